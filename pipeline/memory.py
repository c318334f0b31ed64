"""Give the operating system back the memory a finished stage freed (glibc's ``malloc_trim``).

numpy, pandas and Arrow (with the system allocator, :mod:`pipeline`) allocate through glibc's malloc, which keeps
freed pages in the process for reuse, so the next stage's peak comes on top of the earlier stage's leftovers. The
stages that free hundreds of MiB before more work in the same step call :func:`release_free_memory`: the staged
records' read (the Arrow tables it converts) and report.html's Rating baseline (the model's temporaries before its
measures). Measured at 1M records (issue 18): the Rating baseline's start 694 -> 565 MiB, its measures' start
905 -> 718 MiB. A trim when every step starts made no difference to the peak (the peaks are inside steps).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import sys
from functools import lru_cache

__all__ = ["release_free_memory"]


@lru_cache(maxsize=1)
def _malloc_trim():
    """glibc's ``malloc_trim``, or None (another C library, another system)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        library = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        return library.malloc_trim
    except (OSError, AttributeError):  # musl has no malloc_trim
        return None


def release_free_memory() -> bool:
    """Return the free pages of glibc's heap to the operating system (``malloc_trim(0)``); nothing is freed that is
    in use. Returns whether the C library could (False off glibc, where it does nothing)."""
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True
