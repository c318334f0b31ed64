"""Give the operating system back the memory a finished stage freed (glibc's ``malloc_trim``), and let the threads of
the ``msa-release`` command share one heap (:func:`share_one_heap`, glibc's ``M_ARENA_MAX``).

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
import functools
import os
from typing import Any

__all__ = ["release_free_memory", "share_one_heap"]


@functools.cache
def _libc_function(name: str, argtypes: tuple[Any, ...], restype: Any) -> Any:
    """The C library's function ``name`` with its ctypes signature, or None (no C library found, or not glibc: macOS,
    Windows and musl have no ``malloc_trim`` nor ``mallopt``'s ``M_ARENA_MAX``, nothing to do)."""
    library_name = ctypes.util.find_library("c")
    if library_name is None:
        return None
    try:
        library = ctypes.CDLL(library_name)
    except OSError:
        return None
    function = getattr(library, name, None)
    if function is None:
        return None
    function.argtypes = list(argtypes)
    function.restype = restype
    return function


#: glibc's mallopt parameter M_ARENA_MAX (malloc.h)
_M_ARENA_MAX = -8


def share_one_heap() -> bool:
    """Let every thread of this process allocate from glibc's one main heap (``mallopt(M_ARENA_MAX, 1)``), so that
    memory one thread frees serves the others: by default each thread that allocates while another does gets a heap
    arena of its own, and the free pages of one arena do not serve another. The ``msa-release`` command calls it
    first thing (:func:`pipeline.cli.app.entry_point`), before any thread allocates: the limit is fixed when glibc
    first creates an arena and later calls change nothing. Measured on the 1M-record default release (issue 18),
    whose gate 9 runs its two held-out folds on two threads: peak RSS 976-1,001 -> 945-967 MiB, wall time unchanged.
    A ``MALLOC_ARENA_MAX`` in the environment is the user's choice: then nothing is changed (False). Returns whether
    the limit was set (False off glibc, where it does nothing)."""
    if "MALLOC_ARENA_MAX" in os.environ:
        return False
    mallopt = _libc_function("mallopt", (ctypes.c_int, ctypes.c_int), ctypes.c_int)
    return mallopt is not None and bool(mallopt(_M_ARENA_MAX, 1))


def release_free_memory() -> bool:
    """Return the free pages of glibc's heap to the operating system (``malloc_trim(0)``); nothing is freed that is
    in use. Returns whether the C library could (False off glibc, where it does nothing)."""
    trim = _libc_function("malloc_trim", (ctypes.c_size_t,), ctypes.c_int)
    if trim is None:
        return False
    trim(0)
    return True
