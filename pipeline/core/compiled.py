"""The release's compiled loops, ahead of time: one extension module built by ``make env`` with numba's AOT compiler.

The greedy loop of Algorithm 11 (:mod:`pipeline.core.grouping_kernel`), Rating's SID loop
(:mod:`pipeline.core.rating_kernel`) and the (k, ℓ) model's kernels (:mod:`pipeline.core.kl_anonymity.kernels`,
:mod:`pipeline.core.kl_anonymity.greedy_kernel`) are numba functions. Compiled just in time, their first use in a
process costs numba's import and the load of its cached machine code: on Adult about 0.5 s and 140 MiB (LLVM) for the
mixed release and about 1 s and 135 MiB for ``--model kl``, a quarter of the peak memory of the whole
``msa-release run`` (issue 18). Compiled ahead of time
(:mod:`numba.pycc`) the same functions are a plain extension module that loads in about a millisecond and needs
neither numba nor LLVM at run time.

:func:`kernel` gives the ahead-of-time function when the module is built *for the current sources*, else the
numba function (compiled on first use, cached in ``__pycache__``): the two are the same code through the same
compiler, and ``tests/core/test_compiled_kernels.py`` checks that they return the same arrays. The ahead-of-time
functions have one signature each (:data:`KERNELS`) and do not check their arguments, so :func:`kernel` wraps them
in a check that raises a ``TypeError`` for any other type, dtype or number of dimensions. The module's name
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
from dataclasses import dataclass
from functools import cache
from importlib.machinery import EXTENSION_SUFFIXES
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

__all__ = ["KERNELS", "KernelSignature", "build", "built_module", "kernel", "source_digest"]


@dataclass(frozen=True)
class _Array:
    """An array argument: its numba dtype and number of dimensions (any layout)."""

    dtype: str
    ndim: int

    @property
    def numba(self) -> str:
        return f"{self.dtype}[{', '.join(':' * self.ndim)}]"

    def accepts(self, value: object) -> bool:
        return isinstance(value, np.ndarray) and value.ndim == self.ndim and value.dtype == _NUMPY_DTYPES[self.dtype]


@dataclass(frozen=True)
class _Scalar:
    """An int64 or boolean scalar argument."""

    numba: str

    def accepts(self, value: object) -> bool:
        if self.numba == "boolean":
            return isinstance(value, bool | np.bool_)
        return isinstance(value, int | np.integer) and not isinstance(value, bool | np.bool_)


@dataclass(frozen=True)
class _Tuple:
    """A tuple argument of ``count`` items of one kind (a trie: 14 int64 arrays)."""

    item: _Array | _Tuple
    count: int

    @property
    def numba(self) -> str:
        return f"UniTuple({self.item.numba}, {self.count})"

    def accepts(self, value: object) -> bool:
        return isinstance(value, tuple) and len(value) == self.count and all(self.item.accepts(v) for v in value)


_NUMPY_DTYPES = {"int64": np.dtype(np.int64), "float64": np.dtype(np.float64)}


@dataclass(frozen=True)
class KernelSignature:
    """One kernel's only signature in the ahead-of-time module: its numba source module, its result's numba type
    and its arguments. The ahead-of-time functions do not check their arguments (a wrong dtype reads memory as
    another type, or crashes the process), so :func:`kernel` checks them against ``arguments`` first."""

    module: str
    returns: str
    arguments: tuple[_Array | _Scalar | _Tuple, ...]

    @property
    def numba(self) -> str:
        """The signature as numba's ``CC.export`` takes it."""
        return f"{self.returns}({', '.join(argument.numba for argument in self.arguments)})"


_INT = _Scalar("int64")
_BOOLEAN = _Scalar("boolean")
_I64 = {ndim: _Array("int64", ndim) for ndim in (1, 2, 3)}
_F64 = {ndim: _Array("float64", ndim) for ndim in (1, 2, 3)}
_TRIES = _Tuple(_Tuple(_I64[1], 14), 2)  # the SAC and IR tries of pipeline.core.grouping_trie
#: The (k, ℓ) table's arrays (:class:`pipeline.core.kl_anonymity.table.EncodedTable`): ancestors, range tensor,
#: heights, weights.
_KL_TABLE = (_I64[3], _F64[3], _I64[1], _F64[1])
_KL_KERNELS = "pipeline.core.kl_anonymity.kernels"

#: Every kernel compiled ahead of time, by name: its one signature, the one its callers use (int64 and float64
#: arrays of any layout in; the result types numba infers for them).
KERNELS: dict[str, KernelSignature] = {
    "group_records": KernelSignature(
        "pipeline.core.grouping_kernel",
        "Tuple((int64[::1], int64[::1], int64[::1], boolean[::1]))",
        (_INT, _I64[2], _I64[2], _I64[1], _TRIES, _TRIES, _BOOLEAN),
    ),
    "improved_sid_loop": KernelSignature(
        "pipeline.core.rating_kernel",
        "Tuple((int64[::1], int64[::1], int64[::1]))",
        (_I64[1], _I64[1], _I64[1], _INT),
    ),
    "plain_sid_loop": KernelSignature("pipeline.core.rating_kernel", "Tuple((int64[::1], int64[:]))", (_I64[1], _I64[1], _INT)),
    "cluster_levels_compiled": KernelSignature(_KL_KERNELS, "int64[::1]", (_I64[3], _I64[1])),
    "cluster_cost_compiled": KernelSignature(_KL_KERNELS, "float64", (*_KL_TABLE, _I64[1])),
    "bipartition_costs": KernelSignature(_KL_KERNELS, "float64[::1]", (*_KL_TABLE, _I64[1], _INT)),
    "bipartition_diversity": KernelSignature(_KL_KERNELS, "int8[:, ::1]", (_I64[1], _I64[1], _I64[2], _I64[1], _INT, _INT)),
    "greedy_certificate_compiled": KernelSignature(_KL_KERNELS, "int64", (_I64[1], _I64[2], _INT)),
    "largest_totally_different_compiled": KernelSignature(_KL_KERNELS, "int64[::1]", (_I64[2],)),
    "greedy_witness_compiled": KernelSignature(_KL_KERNELS, "int64[::1]", (_I64[2],)),
    "greedy_labels": KernelSignature(
        "pipeline.core.kl_anonymity.greedy_kernel",
        "int64[::1]",
        (*_KL_TABLE, _I64[1], _I64[2], _I64[1], _F64[2], _INT, _INT, _INT, _INT, _INT),
    ),
}

#: The source files the kernels are compiled from (beyond the modules of :data:`KERNELS`): the trie's layout.
EXTRA_SOURCES = ("pipeline.core.grouping_trie",)

#: Where the extension module is built and looked for: this package's ``_compiled`` folder (not in git).
BUILD_DIRECTORY = Path(__file__).with_name("_compiled")


def _source_path(module_name: str) -> Path:
    """The file of a kernel module of this package, found without importing it or its package (in a mixed release,
    ``pipeline.core.kl_anonymity``'s ``__init__`` would import the whole (k, ℓ) model)."""
    package, _, relative = module_name.partition(f"{__package__}.")
    if package or not relative:
        raise ValueError(f"{module_name} is not a module of {__package__}")
    return Path(__file__).parent.joinpath(*relative.split(".")).with_suffix(".py")


def source_digest() -> str:
    """16 hex digits identifying what the extension module is compiled from: the bytes of every kernel module, of
    :data:`EXTRA_SOURCES` and of this file, and the Python, numpy and numba versions and the machine type. Reads
    a few files (about 20 ms); imports neither the kernels nor numba.

    Raises
    ------
    OSError
        A source file cannot be read (e.g. the package runs from a zip archive).
    """
    digest = hashlib.sha256()
    modules = sorted({signature.module for signature in KERNELS.values()} | set(EXTRA_SOURCES))
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
    versions, not loadable on this machine, or the sources not readable as files)."""
    try:
        name = _module_name(source_digest())
    except OSError:  # e.g. the package imported from a zip archive (Spark's --py-files): run just in time
        return None
    path = _extension_path(BUILD_DIRECTORY if directory is None else Path(directory), name)
    if path is None:
        return None
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


def _extension_path(folder: Path, name: str) -> Path | None:
    """The extension module file ``name`` in ``folder`` (any of this interpreter's suffixes), or None."""
    return next((folder / f"{name}{suffix}" for suffix in EXTENSION_SUFFIXES if (folder / f"{name}{suffix}").is_file()), None)


@cache
def _default_module() -> ModuleType | None:
    return built_module()


@cache
def kernel(name: str) -> Callable[..., Any]:
    """The compiled kernel ``name`` (a key of :data:`KERNELS`): from the ahead-of-time module when it is built for
    the current sources, else numba's just-in-time function (which imports numba and compiles or loads it on first
    call). Both compute the same; see the module docstring. The ahead-of-time function comes wrapped in a check of
    its arguments against :data:`KERNELS` (numba's dispatcher would compile another specialization instead; the
    compiled function would misread them). Cached: the (k, ℓ) model calls some kernels thousands of times.

    Raises
    ------
    KeyError
        ``name`` is not a kernel.
    TypeError
        (from the returned function) An argument's type, dtype or number of dimensions is not the signature's.
    """
    signature = KERNELS[name]
    built = _default_module()
    if built is None:
        return getattr(importlib.import_module(signature.module), name)
    compiled = getattr(built, name)
    arguments = signature.arguments

    def checked(*values: Any) -> Any:
        if len(values) != len(arguments) or not all(a.accepts(v) for a, v in zip(arguments, values, strict=True)):
            raise TypeError(_mismatch(name, signature, values))
        return compiled(*values)

    checked.__name__ = checked.__qualname__ = name
    checked.__doc__ = compiled.__doc__
    return checked


def _mismatch(name: str, signature: KernelSignature, values: tuple[Any, ...]) -> str:
    def described(value: Any) -> str:
        if isinstance(value, np.ndarray):
            return f"{value.dtype}[{value.ndim}d]"
        return type(value).__name__

    if len(values) != len(signature.arguments):
        return f"kernel {name} takes {len(signature.arguments)} arguments ({signature.numba}), got {len(values)}"
    wrong = next(i for i, (a, v) in enumerate(zip(signature.arguments, values, strict=True)) if not a.accepts(v))
    return (
        f"kernel {name}: argument {wrong + 1} must be {signature.arguments[wrong].numba}, got "
        f"{described(values[wrong])} (the ahead-of-time build has one signature: {signature.numba}; convert the "
        "argument, e.g. np.asarray(value, dtype=np.int64))"
    )


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
        for kernel_name, signature in KERNELS.items():
            function = getattr(importlib.import_module(signature.module), kernel_name)
            compiler.export(kernel_name, signature.numba)(function.py_func)  # type: ignore[no-untyped-call]
        try:
            compiler.compile()
        except Exception as error:  # noqa: BLE001  (the compiler's errors have no common type)
            raise RuntimeError(f"compiling the kernels ahead of time failed: {error}") from error
    built = _extension_path(folder, name)
    if built is None:  # pragma: no cover - the compiler reported success
        raise RuntimeError(f"compiling the kernels ahead of time wrote no module {name} in {folder}")
    for stale in folder.glob("_kernels_*"):
        if stale != built and stale.is_file():
            stale.unlink()
    return built


def main() -> int:  # pragma: no cover - exercised by make env
    """``python -m pipeline.core.compiled``: build the module unless the one of the current sources is there; on
    failure say so and exit 0 (the kernels then run just in time, with the same results)."""
    if built_module() is not None:
        return 0
    try:
        path = build()
    except Exception as error:  # noqa: BLE001  (numba.pycc missing or failing: the kernels still run just in time)
        print(f"pipeline.core.compiled: {error}; the kernels will run just in time (numba)", file=sys.stderr)
        return 0
    print(f"pipeline.core.compiled: built {path.name}")
    return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
