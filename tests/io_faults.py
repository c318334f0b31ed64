"""I/O fault injection for the fault tests (issue 14: "SQLite runs its suite with I/O errors and disk-full injected at
every read, write, sync and lock call in turn").

:class:`IoFaults` patches, in this process, the calls through which a run touches one directory tree (the release
home, which holds the warehouse, the lock, ``releases/`` and, with ``--home``, the Dagster instance): it counts them
by kind and path, and makes the ``n``-th call of one kind on one path fail. Calls on other paths (the input, Python's
own files) are neither counted nor failed. The kinds (:data:`KINDS`):

- ``mkdir`` (``os.mkdir``), ``open`` (``os.open`` / ``io.open`` for writing or creating), ``read`` (the same for
  reading), ``write`` (``write`` on a file opened for writing, ``os.write`` / ``os.pwrite`` / ``os.ftruncate``),
  ``fsync`` (``os.fsync``), ``rename`` (``os.rename`` / ``os.replace``), ``lock`` (``fcntl.flock``): an ``OSError``
  with the errno, its text and the path, as the kernel would give.
- ``duckdb``: a statement (``execute`` / ``sql``) on a DuckDB connection to a database in the tree (the warehouse
  through the Dagster IO manager, ``release.duckdb`` in the publish): ``duckdb.IOException`` with DuckDB's wording.
- ``parquet``: ``pyarrow.parquet.write_table`` into the tree (the release registry): an ``OSError``.
- ``event_log``: an event stored in the Dagster instance's SQLite event log: SQLAlchemy's ``OperationalError``
  (``database or disk is full`` / ``disk I/O error``), as SQLite reports it.

ENOSPC persists: once the case's call failed, every later call of that kind fails too (a full disk stays full;
deleting never fails). EIO fails that one call only (a transient error). DuckDB's and pyarrow's own C++ writes
and SQLite's page writes cannot be reached from Python: they are faulted at the statement / call that causes them.

The tests (``tests/e2e/test_io_faults.py``) first count the calls of a clean run (:attr:`IoFaults.trace`), then fail
each distinct call point in turn (:func:`fault_cases`).
"""

from __future__ import annotations

import builtins
import errno
import fcntl
import io
import os
import re
import sqlite3
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb
import pyarrow.parquet as pq
import sqlalchemy.exc
from dagster._core.storage.event_log.sqlite.sqlite_event_log import SqliteEventLogStorage

__all__ = ["KINDS", "FaultCase", "InjectedFault", "IoFaults", "fault_cases", "normalized"]

KINDS = ("mkdir", "open", "read", "write", "fsync", "rename", "lock", "duckdb", "parquet", "event_log")
#: Kinds a full disk can fail (reading, renaming and locking do not allocate space).
SPACE_KINDS = frozenset({"mkdir", "open", "write", "fsync", "duckdb", "parquet", "event_log"})


@dataclass(frozen=True)
class FaultCase:
    """Fail the ``ordinal``-th call (1-based) of ``kind`` on ``label`` (the call's normalized path, for DuckDB with the
    statement, for the event log with the event's type) with ``error_number``. Counting per label keeps a case on its
    call when other calls come and go (e.g. one read per earlier release)."""

    kind: str
    ordinal: int
    label: str
    error_number: int

    @property
    def name(self) -> str:
        return f"{self.kind}#{self.ordinal}:{self.label}:{errno.errorcode[self.error_number]}"


@dataclass(frozen=True)
class InjectedFault:
    """The fault that fired: its case and the real path of the call."""

    case: FaultCase
    path: str


_RUN_SPECIFIC = [
    (re.compile(r"\d{8}T\d{6}Z-[0-9a-f]{8}"), "<release>"),
    (re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"), "<run>"),
    (re.compile(r"\.\d+\.tmp$"), ".<pid>.tmp"),
    (re.compile(r"\.write-probe-\w+$"), ".write-probe-<random>"),
    (re.compile(r"/tmp\w{8}$"), "/tmp<random>"),
    (re.compile(r"/[a-z0-9_]{8}\.(out|err|complete)$"), r"/<random>.\1"),
]


def normalized(relative: str) -> str:
    """``relative`` with run-specific parts (release id, run id, pid, random names) replaced by placeholders."""
    for pattern, placeholder in _RUN_SPECIFIC:
        relative = pattern.sub(placeholder, relative)
    return relative


def _writing(flags: int) -> bool:
    return bool(flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND))


def _writing_mode(mode: str) -> bool:
    return any(c in mode for c in "wax+")


class _FaultingFile:
    """A file object whose ``write`` goes through the injector (everything else is the real file's)."""

    def __init__(self, handle: Any, injector: IoFaults, path: str):
        self._handle, self._injector, self._path = handle, injector, path

    def write(self, data: Any) -> Any:
        self._injector._call("write", self._path)
        return self._handle.write(data)

    def writelines(self, lines: Any) -> None:
        self._injector._call("write", self._path)
        self._handle.writelines(lines)

    def __enter__(self) -> _FaultingFile:
        self._handle.__enter__()
        return self

    def __exit__(self, *exc: Any) -> Any:
        return self._handle.__exit__(*exc)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._handle)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._handle, name)


def _statement(args: tuple[Any, ...]) -> str:
    """A DuckDB statement's first words and the table it names (``CREATE OR REPLACE TABLE "private"."raw_records"``),
    so that each table's write is a point of its own."""
    words = str(args[0]).split() if args else []
    head = " ".join(words[:6]) if words[:1] and words[0].upper() in ("CREATE", "INSERT", "COPY") else " ".join(words[:1])
    return re.sub(r"\s*\(.*$|'[^']*'", "", head)


class _FaultingConnection:
    """A DuckDB connection whose statements go through the injector."""

    def __init__(self, connection: Any, injector: IoFaults, path: str):
        self._connection, self._injector, self._path = connection, injector, path

    def execute(self, *args: Any, **kwargs: Any) -> Any:
        self._injector._call("duckdb", self._path, _statement(args))
        result = self._connection.execute(*args, **kwargs)
        return self if result is self._connection else result

    def sql(self, *args: Any, **kwargs: Any) -> Any:
        self._injector._call("duckdb", self._path, _statement(args))
        return self._connection.sql(*args, **kwargs)

    def __enter__(self) -> _FaultingConnection:
        self._connection.__enter__()
        return self

    def __exit__(self, *exc: Any) -> Any:
        return self._connection.__exit__(*exc)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._connection, name)


class IoFaults:
    """Count (and optionally fail) the I/O calls of this process on the tree under ``root``.

    Use as a context manager; the patches are removed on exit. ``case`` None counts only.

    Attributes
    ----------
    trace
        Every counted call, in order: ``(kind, ordinal among the calls of that kind on that label, label)``; the label
        is the normalized path relative to ``root`` (:func:`normalized`), with the statement or event type.
    fired
        The fault that fired first, or None.
    """

    def __init__(self, root: Path, case: FaultCase | None = None):
        self.root = str(Path(root).resolve())
        self.case = case
        self.trace: list[tuple[str, int, str]] = []
        self.fired: InjectedFault | None = None
        self._counts: Counter[tuple[str, str]] = Counter()
        self._guard = threading.Lock()
        self._saved: list[tuple[Any, str, Any]] = []

    # -- bookkeeping ------------------------------------------------------------------------------------------------

    def _relative(self, path: Any) -> str | None:
        if isinstance(path, int):
            try:
                path = os.readlink(f"/proc/self/fd/{path}")
            except OSError:
                return None
        try:
            text = os.fsdecode(path)
        except TypeError:
            return None
        text = os.path.abspath(text)
        if text == self.root:
            return "."
        if not text.startswith(self.root + os.sep):
            return None
        return text[len(self.root) + 1 :]

    def _call(self, kind: str, path: Any, detail: str = "") -> None:
        relative = self._relative(path)
        if relative is None:
            return
        label = normalized(relative) + (f" {detail}" if detail else "")
        with self._guard:
            self._counts[kind, label] += 1
            ordinal = self._counts[kind, label]
            self.trace.append((kind, ordinal, label))
            case = self.case
            if case is None or case.kind != kind:
                return
            if self.fired is None:
                if label != case.label or ordinal != case.ordinal:
                    return
                self.fired = InjectedFault(case, os.path.join(self.root, relative))
            elif case.error_number != errno.ENOSPC:
                return
        raise self._error(kind, case.error_number, os.path.join(self.root, relative))

    @staticmethod
    def _error(kind: str, number: int, path: str) -> BaseException:
        text = os.strerror(number)
        if kind == "duckdb":
            return duckdb.IOException(f'IO Error: Could not write file "{path}": {text}')
        if kind == "event_log":
            reason = "database or disk is full" if number == errno.ENOSPC else "disk I/O error"
            return sqlalchemy.exc.OperationalError("INSERT INTO event_logs", {}, sqlite3.OperationalError(reason))
        return OSError(number, text, path)

    def _patch(self, owner: Any, name: str, replacement: Any) -> None:
        self._saved.append((owner, name, getattr(owner, name)))
        setattr(owner, name, replacement)

    # -- the patches ------------------------------------------------------------------------------------------------

    def __enter__(self) -> IoFaults:
        real_open, real_os_open = io.open, os.open
        real = {name: getattr(os, name) for name in ("mkdir", "write", "pwrite", "ftruncate", "fsync", "rename", "replace")}
        real_flock, real_connect, real_write_table = fcntl.flock, duckdb.connect, pq.write_table
        real_store_event = SqliteEventLogStorage.store_event

        def faulting_open(file: Any, mode: str = "r", *args: Any, **kwargs: Any) -> Any:
            writing = _writing_mode(mode)
            self._call("open" if writing else "read", file)
            handle = real_open(file, mode, *args, **kwargs)
            if writing and self._relative(file) is not None:
                return _FaultingFile(handle, self, file if not isinstance(file, int) else handle.name)
            return handle

        def faulting_os_open(path: Any, flags: int, *args: Any, **kwargs: Any) -> int:
            self._call("open" if _writing(flags) else "read", path)
            return real_os_open(path, flags, *args, **kwargs)

        def by_path(kind: str, function: Any) -> Any:
            def faulting(path: Any, *args: Any, **kwargs: Any) -> Any:
                self._call(kind, path)
                return function(path, *args, **kwargs)

            return faulting

        def faulting_mkdir(path: Any, *args: Any, **kwargs: Any) -> None:
            if not os.path.lexists(path):  # the kernel says EEXIST before it looks for space
                self._call("mkdir", path)
            real["mkdir"](path, *args, **kwargs)

        def faulting_flock(descriptor: Any, operation: int) -> None:
            if not operation & fcntl.LOCK_UN:
                self._call("lock", descriptor if isinstance(descriptor, int) else descriptor.fileno())
            real_flock(descriptor, operation)

        def faulting_connect(database: Any = ":memory:", *args: Any, **kwargs: Any) -> Any:
            connection = real_connect(database, *args, **kwargs)
            if isinstance(database, (str, os.PathLike)) and self._relative(database) is not None:
                return _FaultingConnection(connection, self, os.fspath(database))
            return connection

        def faulting_write_table(table: Any, where: Any, *args: Any, **kwargs: Any) -> Any:
            if isinstance(where, (str, os.PathLike)):
                self._call("parquet", where)
            return real_write_table(table, where, *args, **kwargs)

        def faulting_store_event(storage: Any, event: Any) -> Any:
            dagster_event = getattr(event, "dagster_event", None)
            self._call("event_log", storage._base_dir, dagster_event.event_type_value if dagster_event else "log message")
            return real_store_event(storage, event)

        self._patch(io, "open", faulting_open)
        self._patch(builtins, "open", faulting_open)
        self._patch(os, "open", faulting_os_open)
        self._patch(os, "mkdir", faulting_mkdir)
        for name, kind in (("rename", "rename"), ("replace", "rename")):
            self._patch(os, name, by_path(kind, real[name]))
        for name in ("write", "pwrite", "ftruncate"):
            self._patch(os, name, by_path("write", real[name]))
        self._patch(os, "fsync", by_path("fsync", real["fsync"]))
        self._patch(fcntl, "flock", faulting_flock)
        self._patch(duckdb, "connect", faulting_connect)
        self._patch(pq, "write_table", faulting_write_table)
        self._patch(SqliteEventLogStorage, "store_event", faulting_store_event)
        return self

    def __exit__(self, *exc: Any) -> None:
        while self._saved:
            owner, name, original = self._saved.pop()
            setattr(owner, name, original)


def fault_cases(trace: list[tuple[str, int, str]], *, every_call: bool = False, limit: int | None = None) -> list[FaultCase]:
    """The cases to run from a clean run's ``trace``: each call point with ENOSPC where a full disk can fail it, then
    with EIO; at most ``limit``, taken breadth first over the layers (so a cap keeps every layer).

    ``every_call`` True: every call in turn (SQLite's way; for a short trace such as one publish). False: the first call
    of each distinct (kind, path) point (a run stores hundreds of events and statements on the same file).
    """
    if every_call:
        points = [(kind, ordinal, label) for kind, ordinal, label in trace]
    else:
        seen: set[tuple[str, str]] = set()
        points = []
        for kind, ordinal, label in trace:
            if (kind, label) not in seen:
                seen.add((kind, label))
                points.append((kind, ordinal, label))
    space = [FaultCase(kind, ordinal, label, errno.ENOSPC) for kind, ordinal, label in points if kind in SPACE_KINDS]
    transient = [FaultCase(kind, ordinal, label, errno.EIO) for kind, ordinal, label in points]
    cases = space + transient
    if limit is None or len(cases) <= limit:
        return cases
    # breadth first: one case of each layer (kind and top-level entry: releases/, dagster/, the warehouse, the
    # registry, the lock) in turn, each layer's cases in run order, ENOSPC before EIO
    layers: dict[tuple[str, str], list[FaultCase]] = {}
    for case in cases:
        layers.setdefault((case.kind, case.label.split("/")[0].split(" ")[0]), []).append(case)
    chosen: list[FaultCase] = []
    while len(chosen) < limit:
        for layer in layers.values():
            if layer and len(chosen) < limit:
                chosen.append(layer.pop(0))
    return chosen


@contextmanager
def counting(root: Path) -> Iterator[IoFaults]:
    """Count the calls on ``root`` without failing any."""
    with IoFaults(root) as injector:
        yield injector
