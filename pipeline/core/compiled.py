"""The release's compiled loops, ahead of time: one extension module built by ``make env`` with numba's AOT compiler.

The greedy loop of Algorithm 11 (:mod:`pipeline.core.grouping_kernel`), Rating's SID loop
(:mod:`pipeline.core.rating_kernel`) and the (k, ℓ) model's kernels (:mod:`pipeline.core.kl_anonymity.kernels`,
:mod:`pipeline.core.kl_anonymity.greedy_kernel`) are numba functions. Compiled just in time, their first use in a
process costs numba's import and the load of its cached machine code: on Adult about 0.5 s and 140 MiB (LLVM) for the
mixed release and about 1 s and 135 MiB for ``--model kl``, a quarter of the peak memory of the whole
``msa-release run`` (issue 18). Compiled ahead of time
(:mod:`numba.pycc`) the same functions are a plain extension module that imports in under a millisecond and needs
neither numba nor LLVM at run time.

:func:`kernel` gives the ahead-of-time function when the module is built *for the current sources*, else the
numba function (compiled on first use, cached in ``__pycache__``): the two are the same code through the same
compiler, and ``tests/core/test_compiled_kernels.py`` checks that they return the same arrays. The module's name
carries a digest of the kernels' source files, of this file (the signatures) and of the Python, numpy and numba
versions (:func:`source_digest`), so an edited kernel is never served by a stale build: it runs just in time until
``make env`` builds it again.

Build: ``python -m pipeline.core.compiled`` (``make env`` runs it; it needs a C compiler and takes about 30 s). A
machine without one runs every kernel just in time, with the same results. ``numba.pycc`` is pending deprecation
in numba (since 0.57; no removal date, its replacement not released as of 0.68): when it goes, the build step fails
with a message and the just-in-time path remains.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.metadata
import importlib.util
import platform
import sys
from collections.abc import Callable
from functools import cache, lru_cache
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

__all__ = ["KERNELS", "build", "built_module", "kernel", "source_digest"]

_TRIE = "UniTuple(int64[:], 14)"
_KL_KERNELS = "pipeline.core.kl_anonymity.kernels"
#: The (k, ℓ) table's arrays (:class:`pipeline.core.kl_anonymity.table.EncodedTable`): ancestors, range tensor,
#: heights, weights.
_KL_TABLE = "int64[:, :, :], float64[:, :, :], int64[:], float64[:]"

#: Every kernel compiled ahead of time: its name → (the module of its numba source, its one signature). The
#: signatures are those the callers use (int64 and float64 arrays of any layout in; the return types numba infers).
KERNELS: dict[str, tuple[str, str]] = {
    "group_records": (
        "pipeline.core.grouping_kernel",
        "Tuple((int64[::1], int64[::1], int64[::1], boolean[::1]))"
        f"(int64, int64[:, :], int64[:, :], int64[:], UniTuple({_TRIE}, 2), UniTuple({_TRIE}, 2), boolean)",
    ),
    "improved_sid_loop": (
        "pipeline.core.rating_kernel",
        "Tuple((int64[::1], int64[::1], int64[::1]))(int64[:], int64[:], int64[:], int64)",
    ),
    "plain_sid_loop": ("pipeline.core.rating_kernel", "Tuple((int64[::1], int64[:]))(int64[:], int64[:], int64)"),
    "cluster_levels_compiled": (_KL_KERNELS, "int64[::1](int64[:, :, :], int64[:])"),
    "cluster_cost_compiled": (_KL_KERNELS, f"float64({_KL_TABLE}, int64[:])"),
    "bipartition_costs": (_KL_KERNELS, f"float64[::1]({_KL_TABLE}, int64[:], int64)"),
    "bipartition_diversity": (_KL_KERNELS, "int8[:, ::1](int64[:], int64[:], int64[:, :], int64[:], int64, int64)"),
    "greedy_certificate_compiled": (_KL_KERNELS, "int64(int64[:], int64[:, :], int64)"),
    "largest_totally_different_compiled": (_KL_KERNELS, "int64[::1](int64[:, :])"),
    "greedy_witness_compiled": (_KL_KERNELS, "int64[::1](int64[:, :])"),
    "greedy_labels": (
        "pipeline.core.kl_anonymity.greedy_kernel",
        f"int64[::1]({_KL_TABLE}, int64[:], int64[:, :], int64[:], float64[:, :], int64, int64, int64, int64)",
    ),
}

#: The source files the kernels are compiled from (beyond the modules of :data:`KERNELS`): the trie's layout.
EXTRA_SOURCES = ("pipeline.core.grouping_trie",)

#: Where the extension module is built and looked for: this package's ``_compiled`` folder (not in git).
BUILD_DIRECTORY = Path(__file__).with_name("_compiled")


def _source_path(module_name: str) -> Path:
    spec = importlib.util.find_spec(module_name)
    if spec is None or spec.origin is None:  # pragma: no cover - a module of this package
        raise ImportError(f"cannot find the kernel module {module_name}")
    return Path(spec.origin)


def source_digest() -> str:
    """16 hex digits identifying what the extension module is compiled from: the bytes of every kernel module, of
    :data:`EXTRA_SOURCES` and of this file, and the Python, numpy and numba versions and the machine type. Reads
    a few files; imports neither the kernels nor numba."""
    digest = hashlib.sha256()
    modules = sorted({module for module, _ in KERNELS.values()} | set(EXTRA_SOURCES))
    for path in [Path(__file__), *(_source_path(module) for module in modules)]:
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    versions = (sys.version.split()[0], np.__version__, _numba_version(), platform.machine())
    digest.update("\0".join(versions).encode())
    return digest.hexdigest()[:16]


def _numba_version() -> str:
    try:
        return importlib.metadata.version("numba")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - numba is a dependency
        return "none"


def _module_name(digest: str) -> str:
    return f"_kernels_{digest}"


def built_module(directory: Path | None = None) -> ModuleType | None:
    """The ahead-of-time module built from the current sources in ``directory`` (default
    :data:`BUILD_DIRECTORY`), imported; None when there is none (never built, built from other sources or
    versions, or not loadable on this machine)."""
    name = _module_name(source_digest())
    folder = BUILD_DIRECTORY if directory is None else Path(directory)
    for suffix in EXTENSION_SUFFIXES:
        path = folder / f"{name}{suffix}"
        if not path.is_file():
            continue
        if name in sys.modules:
            return sys.modules[name]
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:  # pragma: no cover - an extension file always has a spec
            return None
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
        except ImportError:  # built for another ABI: run just in time
            return None
        sys.modules[name] = module
        return module
    return None


@lru_cache(maxsize=1)
def _default_module() -> ModuleType | None:
    return built_module()


@cache
def kernel(name: str) -> Callable[..., Any]:
    """The compiled kernel ``name`` (a key of :data:`KERNELS`): from the ahead-of-time module when it is built for
    the current sources, else numba's just-in-time function (which imports numba and
    compiles or loads it on first call). Both compute the same; see the module docstring. Cached: the (k, ℓ) model
    calls some kernels hundreds of thousands of times.

    Raises
    ------
    KeyError
        ``name`` is not a kernel.
    """
    module_name, _ = KERNELS[name]
    built = _default_module()
    if built is not None:
        return getattr(built, name)
    return getattr(importlib.import_module(module_name), name)


def build(directory: Path | None = None) -> Path:
    """Compile every kernel of :data:`KERNELS` ahead of time into one extension module in ``directory`` (default
    :data:`BUILD_DIRECTORY`), named after :func:`source_digest`; remove the folder's modules of other digests.
    Returns the module's path. Imports numba (and its compiler); needs a C compiler.

    Raises
    ------
    RuntimeError
        The compiler failed (its message is included); the kernels still run just in time.
    """
    import warnings

    folder = BUILD_DIRECTORY if directory is None else Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    name = _module_name(source_digest())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numba.pycc's NumbaPendingDeprecationWarning
        from numba.pycc import CC  # type: ignore[attr-defined]

        compiler = CC(name)  # type: ignore[no-untyped-call]
        compiler.output_dir = str(folder)
        compiler.verbose = False
        for kernel_name, (module_name, signature) in KERNELS.items():
            function = getattr(importlib.import_module(module_name), kernel_name)
            compiler.export(kernel_name, signature)(function.py_func)  # type: ignore[no-untyped-call]
        try:
            compiler.compile()
        except Exception as error:  # noqa: BLE001  (the compiler's errors have no common type)
            raise RuntimeError(f"compiling the kernels ahead of time failed: {error}") from error
    built = next((folder / f"{name}{suffix}" for suffix in EXTENSION_SUFFIXES if (folder / f"{name}{suffix}").is_file()), None)
    if built is None:  # pragma: no cover - the compiler reported success
        raise RuntimeError(f"compiling the kernels ahead of time wrote no module {name} in {folder}")
    for stale in folder.glob("_kernels_*"):
        if stale != built and stale.is_file():
            stale.unlink()
    return built


def main() -> int:  # pragma: no cover - exercised by make env
    """``python -m pipeline.core.compiled``: build the module; on failure say so and exit 0 (the kernels then run
    just in time, with the same results)."""
    try:
        path = build()
    except Exception as error:  # noqa: BLE001  (numba.pycc missing or failing: the kernels still run just in time)
        print(f"pipeline.core.compiled: {error}; the kernels will run just in time (numba)", file=sys.stderr)
        return 0
    print(f"pipeline.core.compiled: built {path.name}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
