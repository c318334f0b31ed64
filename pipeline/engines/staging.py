"""The input manifest and the shard-partitioned PRIVATE staging of a sharded release (issue 17; SCALE.md §3, §5).

The input is one CSV or Parquet file, or a directory or a list of files of ONE format. Record order is defined the
same way on every engine: the files sorted by file name, then the row position inside each file; the private row
ids are 1-based across the files (exactly ``raw_records.row_id`` for a single file). DuckDB reads every file once,
out of core (:func:`stage_input`): the checks and messages are :func:`pipeline.io.loading.load_records`'s, and its
per-value rules (stripping, missing-value tokens, ``?`` for a missing quasi-identifier, look-alike merging) are
applied to the DISTINCT raw values of each column over all files (:func:`pipeline.io.loading.clean_value_table`), so
S = 1 stages exactly today's records for one file and look-alike spellings are merged across files by the records
of the whole input.

Each record goes to shard :func:`pipeline.core.sharding.shard_of` of its row id, and the shards are written as
``input/shard=<s>/part-<f:05d>.parquet`` (one part per input file ``f`` holding records of shard ``s``; ``row_id``
int64, the configured columns dictionary-encoded text) under the run's staging directory
(:class:`pipeline.engines.base.ShardJob`). The global phase then reads the staged Parquet with one DuckDB
``GROUP BY`` (:func:`sensitive_tuple_counts`); :func:`shard_key_sql` is the shard key as the DuckDB SQL expression
the staging partitions by.

Framework-free: no Dagster, no Great Expectations.
"""

from __future__ import annotations

import hashlib
import shutil
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.core import sharding
from pipeline.engines.base import staged_shard_files
from pipeline.io.loading import (
    DEFAULT_MAX_VALUE_LENGTH,
    MISSING_QUASI_IDENTIFIER,
    InputError,
    check_file_unchanged,
    check_value_lengths,
    clean_value_table,
    file_state,
    input_connection,
    open_input_scan,
    resolve_input_path,
)
from pipeline.vocabulary import setting

__all__ = [
    "INPUT_SUFFIXES",
    "remove_staging",
    "InputFile",
    "StagedInput",
    "input_files",
    "sensitive_tuple_counts",
    "shard_key_sql",
    "stage_input",
    "staged_shard_files",
    "staging_dir_for",
]

#: file-name endings read from an input directory, by format (anything else in the directory is ignored)
INPUT_SUFFIXES = {"csv": (".csv", ".csv.gz", ".tsv", ".txt"), "parquet": (".parquet", ".pq")}

_MASK64 = (1 << 64) - 1
#: SplitMix64's constants (Steele, Lea & Flood, OOPSLA 2014), as in :func:`pipeline.core.sharding.splitmix64`
_GOLDEN_GAMMA = 0x9E3779B97F4A7C15
_MIX1 = 0xBF58476D1CE4E5B9
_MIX2 = 0x94D049BB133111EB


def remove_staging(home: Path, *, keep: str | None = None) -> list[Path]:
    """Remove the PRIVATE staging directories of sharded runs under ``<home>/private/shards`` (every input record of
    those runs), all but ``keep``'s (a run id). Runs of a home hold its release lock one at a time, so another run's
    directory is a finished (published, refused, interrupted or killed) run's. Returns what was removed."""
    import shutil

    root = Path(home) / "private" / "shards"
    removed = []
    if root.is_dir():
        for entry in root.iterdir():
            if entry.name != keep and entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry, ignore_errors=True)
                removed.append(entry)
    return removed


def staging_dir_for(home: Path, run_id: str) -> Path:
    """The PRIVATE staging directory of a run: ``<home>/private/shards/<run_id>`` (not created here).

    It holds every input record (``input/``) and the shards' private tables (``output/``): it stays under the home,
    is never published, and is removed once the run is over.

    Raises
    ------
    ValueError
        A run id that is empty, ``.``/``..`` or holds a path separator (it must name one directory).
    """
    if run_id in ("", ".", "..") or "/" in run_id or "\\" in run_id or "\0" in run_id:
        raise ValueError("a run id used as the staging directory's name must be one directory name (no '/', not '..')")
    return home / "private" / "shards" / run_id


def _format_of(path: Path) -> str | None:
    name = path.name.lower()
    for fmt, suffixes in INPUT_SUFFIXES.items():
        if name.endswith(suffixes):
            return fmt
    return None


def input_files(paths: str | Path | Sequence[str | Path], *, input_format: str = "auto") -> tuple[list[Path], str]:
    """The input files of a release, in record order, and their one format.

    Parameters
    ----------
    paths
        One CSV or Parquet file, a directory (its regular, non-hidden files ending in ``.csv``, ``.csv.gz``,
        ``.tsv``, ``.txt``, ``.parquet`` or ``.pq``; subdirectories are not read), or a list of files.
    input_format
        ``"csv"``, ``"parquet"`` or ``"auto"`` (by extension; every file must then have the same one).

    Returns
    -------
    (files, format)
        Absolute paths sorted by file name (then by the whole path, for equal names in a list), and ``"csv"`` or
        ``"parquet"``.

    Raises
    ------
    InputError
        A path that does not exist, a directory without input files, files of two formats, or a file listed twice
        (each message names the path and what to do).
    """
    listed = [paths] if isinstance(paths, (str, Path)) else list(paths)
    if not listed:
        raise InputError(f"no input file given; pass a CSV or Parquet file, or a directory of them, with {setting('input_path')}")
    files: list[Path] = []
    for entry in listed:
        candidate = Path(entry).expanduser()
        if candidate.is_dir():
            # each file through resolve_input_path: the checks of a single input (a name DuckDB would take as a
            # pattern included: review, session 39)
            found = sorted(
                resolve_input_path(p)
                for p in candidate.iterdir()
                if p.is_file() and not p.name.startswith(".") and _format_of(p) is not None
            )
            if not found:
                raise InputError(
                    f"input directory {str(entry)!r} holds no CSV or Parquet file (names ending in "
                    f"{', '.join(s for group in INPUT_SUFFIXES.values() for s in group)}); put the input files there "
                    f"or pass a file with {setting('input_path')}"
                )
            files.extend(found)
        else:
            files.append(resolve_input_path(candidate))
    twice = sorted({str(p) for p in files if files.count(p) > 1})
    if twice:
        raise InputError(f"input file(s) {twice} are given more than once; list every input file once")
    files.sort(key=lambda p: (p.name, str(p)))
    if input_format != "auto":
        return files, input_format
    formats = {p: (_format_of(p) or "csv") for p in files}
    if len(set(formats.values())) > 1:
        by_format = {fmt: [p.name for p, f in formats.items() if f == fmt] for fmt in sorted(set(formats.values()))}
        raise InputError(
            f"the input files are of more than one format ({by_format}); a release reads files of one format: convert "
            f"them, or pass the files of one format with {setting('input_path')}"
        )
    return files, next(iter(formats.values()))


@dataclass(frozen=True)
class InputFile:
    """One input file as read: its place in the record order and its counts (no value of the data).

    ``first_row_id`` is the row id of its first row read (1 for the first file); its rows have row ids
    ``first_row_id .. first_row_id + n_input - 1``.
    """

    path: Path
    sha256: str
    first_row_id: int
    n_input: int
    n_dropped_missing: int
    n_records: int

    def as_dict(self) -> dict[str, Any]:
        """JSON-able: ``name``, ``path``, ``sha256``, ``first_row_id``, ``n_input``, ``n_dropped_missing``,
        ``n_records``."""
        return {
            "name": self.path.name,
            "path": str(self.path),
            "sha256": self.sha256,
            "first_row_id": self.first_row_id,
            "n_input": self.n_input,
            "n_dropped_missing": self.n_dropped_missing,
            "n_records": self.n_records,
        }


@dataclass(frozen=True)
class StagedInput:
    """The staged input of a sharded release: the input manifest and the per-shard record counts (counts only).

    Attributes
    ----------
    staging_dir
        The run's PRIVATE staging directory; the records are in ``staging_dir / "input" / "shard=<s>"``.
    files
        The input files in record order.
    input_format
        ``"csv"`` or ``"parquet"``.
    n_input, n_dropped_missing, n_records, n_missing_quasi_identifier
        Sums over the files (as :class:`pipeline.io.loading.LoadedRecords`).
    plan
        The shard plan of ``n_records`` (:func:`pipeline.core.sharding.plan_shards`).
    shard_records
        Records per shard, in shard order (``len == plan.n_shards``).
    look_alike_values, dropped_missing_by_attribute, missing_quasi_identifier_by_column
        As :class:`pipeline.io.loading.LoadedRecords`, summed over the files; ``look_alike_values`` is counted once
        over the whole input (the spellings are merged by the records of all files, :func:`stage_input` step 2).
    """

    staging_dir: Path
    files: tuple[InputFile, ...]
    input_format: str
    n_input: int
    n_dropped_missing: int
    n_records: int
    n_missing_quasi_identifier: int
    plan: sharding.ShardPlan
    shard_records: tuple[int, ...]
    look_alike_values: dict[str, dict[str, int]] = field(default_factory=dict)
    dropped_missing_by_attribute: dict[str, int] = field(default_factory=dict)
    missing_quasi_identifier_by_column: dict[str, int] = field(default_factory=dict)

    @property
    def n_shards(self) -> int:
        return self.plan.n_shards

    @property
    def input_sha256(self) -> str:
        """The input's SHA-256: the file's own for one file (today's ``input_sha256``), else the SHA-256 of the lines
        ``<name>\\t<sha256>\\n`` of the files in record order."""
        if len(self.files) == 1:
            return self.files[0].sha256
        lines = "".join(f"{f.path.name}\t{f.sha256}\n" for f in self.files)
        return hashlib.sha256(lines.encode()).hexdigest()

    def manifest(self) -> dict[str, Any]:
        """The input manifest, JSON-able: ``files`` (:meth:`InputFile.as_dict`), ``input_format``, ``input_sha256``,
        the counts above, ``n_shards`` and ``shard_records``. Counts and digests only, never a value."""
        return {
            "files": [f.as_dict() for f in self.files],
            "input_format": self.input_format,
            "input_sha256": self.input_sha256,
            "n_input": self.n_input,
            "n_dropped_missing": self.n_dropped_missing,
            "n_records": self.n_records,
            "n_missing_quasi_identifier": self.n_missing_quasi_identifier,
            "n_shards": self.n_shards,
            "shard_records": list(self.shard_records),
            "look_alike_values": self.look_alike_values,
            "dropped_missing_by_attribute": self.dropped_missing_by_attribute,
            "missing_quasi_identifier_by_column": self.missing_quasi_identifier_by_column,
        }


def _add_counts(total: dict[str, int], more: Mapping[str, int]) -> None:
    for key, value in more.items():
        total[key] = total.get(key, 0) + int(value)


#: DuckDB's memory limit while staging (it spills to ``input.tmp/duckdb.tmp`` above it) and its threads
STAGING_MEMORY_LIMIT = "512MB"
STAGING_THREADS = 2
#: rows DuckDB buffers per shard before writing them out (its default, 524,288, holds ~100 MB per shard)
_PARTITION_FLUSH_ROWS = 65_536
#: the ``load_records`` options ``stage_input`` passes through, with ``load_records``'s defaults
_LOAD_OPTIONS: dict[str, Any] = {
    "csv_header": True,
    "column_names": (),
    "delimiter": ",",
    "strip_whitespace": True,
    "missing_value_tokens": ("", "NULL", "?"),
    "max_value_length": DEFAULT_MAX_VALUE_LENGTH,
}


def _staging_connection(temporary: Path) -> duckdb.DuckDBPyConnection:
    """The staging's DuckDB connection: :func:`pipeline.io.loading.input_connection` (UTC) with a memory limit, a
    spill directory inside the PRIVATE staging, and insertion order preserved (the CSV copy relies on it)."""
    connection = input_connection()
    connection.execute(f"SET memory_limit = '{STAGING_MEMORY_LIMIT}'")
    connection.execute(f"SET temp_directory = {_sql_string(str(temporary))}")
    connection.execute(f"SET threads = {STAGING_THREADS}")
    connection.execute("SET preserve_insertion_order = true")
    connection.execute("SET enable_progress_bar = false")
    connection.execute(f"SET partitioned_write_flush_threshold = {_PARTITION_FLUSH_ROWS}")
    return connection


def _source_sql(copy: Path, n_columns: int) -> str:
    """A file's private copy as a subquery: ``position`` (0-based row position: the copy's ``file_row_number``) and
    the configured columns as ``c0 … c<n-1>`` (positional names: no configured name collides with an internal one)."""
    text = ", ".join(f"c{k}" for k in range(n_columns))
    return f"(SELECT file_row_number AS position, {text} FROM read_parquet({_sql_string(str(copy))}, file_row_number = true))"


def _copy_sql(scan_sql: str, n_columns: int) -> str:
    """The SELECT of a file's private copy: the scan's columns renamed by position (``c0`` …), rows in scan order."""
    return f"SELECT {', '.join(f'#{k + 1} AS c{k}' for k in range(n_columns))} FROM ({scan_sql})"


def stage_input(
    paths: str | Path | Sequence[str | Path],
    staging_dir: Path,
    *,
    quasi_identifiers: Sequence[str],
    sensitive_attributes: Sequence[str],
    salt: int,
    shard_rows: int = sharding.DEFAULT_SHARD_ROWS,
    min_shard_rows: int = sharding.DEFAULT_MIN_SHARD_ROWS,
    input_format: str = "auto",
    **load_options: Any,
) -> StagedInput:
    """Read the input files with DuckDB, out of core, and write the shard-partitioned PRIVATE staging
    ``staging_dir / "input"``: the records :func:`pipeline.io.loading.load_records` gives, file by file.

    Steps (every query under ``SET memory_limit`` = :data:`STAGING_MEMORY_LIMIT`, spilling to
    ``input.tmp/duckdb.tmp``; nothing record-level passes through Python):

    1. Each file is checked as :func:`pipeline.io.loading.load_records` checks it before reading
       (:func:`pipeline.io.loading.open_input_scan`: same refusals, same messages), then read ONCE by DuckDB into a
       private Parquet copy ``input.tmp/raw/raw-<f:05d>.parquet`` (the configured columns as raw text). Row
       position: the copy is written with ``preserve_insertion_order`` on, under which DuckDB guarantees that
       ``COPY (SELECT … FROM read_csv(…) | read_parquet(…))`` writes the rows in the order read (DuckDB "Order
       Preservation": COPY, a single-table FROM and a projection preserve order, also when the reader runs in
       parallel), so the copy's ``file_row_number`` is the record's position in the input: the guarantee the
       in-memory reader numbers rows by. The file's size, modification time and SHA-256 are compared before and
       after the read (a file that changed is refused).
    2. One ``GROUP BY`` per configured column over the copy gives its DISTINCT raw values with their record counts
       (and first row): the value-length limit is checked there (same message), and the per-value rules of
       :func:`pipeline.io.loading.clean_value_table` (stripping, missing-value tokens, ``?`` for a missing
       quasi-identifier, look-alike merging) are applied ONCE to the distinct values of ALL files together, giving
       a small mapping table raw → staged value per column. Look-alike spellings are therefore merged across files
       by the records of the whole input (for one file: exactly ``load_records``'s merge).
    3. A counting query per file joins the copy to the mapping tables: records kept (no missing sensitive value),
       dropped per attribute, missing quasi-identifiers; a file in which every record misses a sensitive value is
       refused as ``load_records`` refuses it. S = :func:`pipeline.core.sharding.plan_shards` of the records kept.
    4. One ``COPY … TO … (FORMAT parquet, PARTITION_BY (shard))`` per file writes its kept records, ``row_id`` =
       the 1-based position across the files (sorted file names, then row position; dropped rows counted), shard
       = :func:`shard_key_sql` of the row id (= :func:`pipeline.core.sharding.shard_of`), as
       ``input/shard=<s>/part-<f:05d>.parquet`` (``row_id`` int64, then the configured columns as text, Parquet
       dictionary-encoded; row order inside a part is not defined: :func:`pipeline.engines.worker.read_staged_shard`
       sorts by ``row_id``), a directory for every shard. With one shard the ``COPY`` writes
       ``input/shard=0/part-<f:05d>.parquet`` itself, without ``PARTITION_BY`` (the same part, faster).

    The staging is written under ``input.tmp`` and renamed to ``input`` last (an existing ``input`` is replaced);
    on an error ``input.tmp`` is removed, so an interrupted staging leaves no partial input.

    Memory: bounded by DuckDB's limit plus the distinct values of the configured columns (held in Python as the
    mapping tables), whatever the number of records. Disk: one Parquet copy of the configured columns per file
    while staging.

    Parameters
    ----------
    paths
        See :func:`input_files`.
    staging_dir
        The run's PRIVATE staging directory (created when missing).
    quasi_identifiers, sensitive_attributes
        The configured columns.
    salt
        The shard key's salt (:func:`pipeline.core.sharding.shard_salt`; private).
    shard_rows, min_shard_rows
        The shard plan's settings.
    input_format
        ``"csv"``, ``"parquet"`` or ``"auto"``.
    load_options
        :func:`pipeline.io.loading.load_records`'s ``csv_header``, ``column_names``, ``delimiter``,
        ``strip_whitespace``, ``missing_value_tokens``, ``max_value_length`` (same defaults); not ``ell``:
        ℓ-feasibility is a property of the whole table, checked by the caller on the global counts.

    Returns
    -------
    StagedInput
        The input manifest and the per-shard counts.

    Raises
    ------
    InputError
        A configured column named ``shard`` (the partition column); anything :func:`input_files` or
        :func:`pipeline.io.loading.load_records` refuses (naming the file, with
        ``load_records``'s message); a file in which every record misses a sensitive value is refused as it is
        alone. With several bad files the files are checked in order by steps 1-2 (every file), then 3.
    ValueError
        The shard plan's refusals (:func:`pipeline.core.sharding.plan_shards`).
    TypeError
        ``ell`` or an option ``load_records`` does not take.
    """
    if "ell" in load_options:
        raise TypeError("stage_input does not take ell: check ℓ-feasibility on the whole table's counts")
    unknown = sorted(set(load_options) - set(_LOAD_OPTIONS))
    if unknown:
        raise TypeError(f"stage_input got unexpected option(s) {unknown}")
    options = {**_LOAD_OPTIONS, **load_options}
    files, fmt = input_files(paths, input_format=input_format)
    clashing = [c for c in (*quasi_identifiers, *sensitive_attributes) if c.casefold() == "shard"]
    if clashing:
        raise InputError(
            f"configured column {clashing[0]!r} has the name of the sharded staging's partition column 'shard' "
            f"(compared ignoring case); rename it in the input (or with {setting('column_names')})",
            column=clashing[0],
        )
    staging_dir.mkdir(parents=True, exist_ok=True)
    building = staging_dir / "input.tmp"
    if building.exists():
        shutil.rmtree(building)
    (building / "raw").mkdir(parents=True)
    try:
        return _stage(
            files,
            fmt,
            staging_dir,
            building,
            quasi_identifiers=quasi_identifiers,
            sensitive_attributes=sensitive_attributes,
            salt=salt,
            shard_rows=shard_rows,
            min_shard_rows=min_shard_rows,
            options=options,
        )
    except BaseException:
        shutil.rmtree(building, ignore_errors=True)
        raise


def _stage(
    files: list[Path],
    fmt: str,
    staging_dir: Path,
    building: Path,
    *,
    quasi_identifiers: Sequence[str],
    sensitive_attributes: Sequence[str],
    salt: int,
    shard_rows: int,
    min_shard_rows: int,
    options: Mapping[str, Any],
) -> StagedInput:
    """:func:`stage_input`'s steps 1-4 (``building`` = ``input.tmp``, created and empty but for ``raw``)."""
    columns = [*quasi_identifiers, *sensitive_attributes]
    tokens = list(options["missing_value_tokens"])
    connection = _staging_connection(building / "duckdb.tmp")
    try:
        # 1-2: one read of every file into its private copy; distinct raw values per column
        copies: list[Path] = []
        digests: list[str] = []
        n_inputs: list[int] = []
        distinct: dict[str, dict[str, int]] = {column: {} for column in columns}
        for index, path in enumerate(files):
            scan = open_input_scan(
                path,
                connection=connection,
                quasi_identifiers=quasi_identifiers,
                sensitive_attributes=sensitive_attributes,
                input_format=fmt,
                csv_header=options["csv_header"],
                column_names=options["column_names"],
                delimiter=options["delimiter"],
            )
            before = file_state(path)
            copy = building / "raw" / f"raw-{index:05d}.parquet"
            try:
                copied = _copy_sql(scan.sql, len(columns))
                connection.execute(f"COPY ({copied}) TO {_sql_string(str(copy))} (FORMAT parquet, COMPRESSION zstd)", scan.params)
                per_column = {}
                for k, column in enumerate(columns):
                    rows = connection.execute(
                        f"SELECT c{k}, count(*), min(position) FROM {_source_sql(copy, len(columns))} "
                        f"WHERE c{k} IS NOT NULL GROUP BY c{k}"
                    ).fetchall()
                    per_column[column] = ([r[0] for r in rows], [int(r[1]) for r in rows], [int(r[2]) for r in rows])
            except duckdb.Error as error:
                raise scan.error(error) from None  # DuckDB's message quotes the offending line
            check_value_lengths(path, per_column, max_value_length=options["max_value_length"], first_line=scan.first_line)
            digests.append(check_file_unchanged(path, before))
            n_input = pq.read_metadata(copy).num_rows
            if n_input == 0:
                raise InputError(
                    f"{path}: the table has no records (only a header row, or blank lines); pass a file with at least one record"
                )
            for column, (values, counts, _) in per_column.items():
                seen = distinct[column]
                for value, count in zip(values, counts):
                    seen[value] = seen.get(value, 0) + count
            copies.append(copy)
            n_inputs.append(n_input)
        look_alikes: dict[str, dict[str, int]] = {}
        for position, column in enumerate(columns):
            values = list(distinct[column])
            staged, missing, merged = clean_value_table(
                values,
                [distinct[column][v] for v in values],
                quasi_identifier=column in quasi_identifiers,
                strip_whitespace=options["strip_whitespace"],
                missing_value_tokens=tokens,
            )
            if merged["n_values_merged"]:
                look_alikes[column] = merged
            mapping = pa.table(
                {
                    "raw": pa.array(values, type=pa.string()),
                    "value": pa.array(staged, type=pa.string()),
                    "missing": pa.array(missing, type=pa.bool_()),
                }
            )
            connection.register("mapping_input", mapping)
            connection.execute(f"CREATE TEMP TABLE mapping_{position} AS SELECT * FROM mapping_input")
            connection.unregister("mapping_input")
        del distinct
        joins = " ".join(f"LEFT JOIN mapping_{k} AS m{k} ON src.c{k} = m{k}.raw" for k in range(len(columns)))
        quasi_missing = [f"(m{k}.raw IS NULL OR m{k}.missing)" for k, c in enumerate(columns) if c in quasi_identifiers]
        sensitive_value = {c: f"m{k}.value" for k, c in enumerate(columns) if c in sensitive_attributes}
        kept = " AND ".join(f"{v} IS NOT NULL" for v in sensitive_value.values())
        # 3: counts per file
        read: list[InputFile] = []
        dropped_by_attribute: dict[str, int] = {}
        missing_by_column: dict[str, int] = {}
        n_missing_quasi_identifier = 0
        offset = 0
        counting = ", ".join(
            [
                f"count(*) FILTER (WHERE {kept})",
                f"count(*) FILTER (WHERE {kept} AND ({' OR '.join(quasi_missing) or 'false'}))",
                *(f"count(*) FILTER (WHERE {kept} AND {m})" for m in quasi_missing),
                *(f"count(*) FILTER (WHERE {v} IS NULL)" for v in sensitive_value.values()),
            ]
        )
        for index, path in enumerate(files):
            row = connection.execute(
                f"SELECT {counting} FROM {_source_sql(copies[index], len(columns))} AS src {joins}"
            ).fetchone()
            assert row is not None
            n_kept, n_quasi = int(row[0]), int(row[1])
            by_quasi = dict(zip(quasi_identifiers, (int(n) for n in row[2 : 2 + len(quasi_identifiers)])))
            by_sensitive = dict(zip(sensitive_attributes, (int(n) for n in row[2 + len(quasi_identifiers) :])))
            if n_kept == 0:
                raise InputError(
                    f"{path}: all {n_inputs[index]} records have a missing value in a sensitive attribute (missing values "
                    f"per attribute: {by_sensitive}; missing-value tokens {sorted(set(tokens))} and SQL NULL), so the "
                    "missing-value policy drops every record and nothing can be published; check the "
                    f"{setting('sensitive_attributes')} columns and {setting('missing_value_tokens')} (a token may "
                    "match real values)"
                )
            read.append(
                InputFile(
                    path=path,
                    sha256=digests[index],
                    first_row_id=offset + 1,
                    n_input=n_inputs[index],
                    n_dropped_missing=n_inputs[index] - n_kept,
                    n_records=n_kept,
                )
            )
            offset += n_inputs[index]
            _add_counts(dropped_by_attribute, {a: n for a, n in by_sensitive.items() if n})
            _add_counts(missing_by_column, {c: n for c, n in by_quasi.items() if n})
            n_missing_quasi_identifier += n_quasi
        n_records = sum(f.n_records for f in read)
        plan = sharding.plan_shards(n_records, shard_rows=shard_rows, min_shard_rows=min_shard_rows)
        # 4: the shard-partitioned copy of the kept records
        connection.execute("SET preserve_insertion_order = false")  # read_staged_shard sorts by row_id
        for s in range(plan.n_shards):
            (building / f"shard={s}").mkdir()
        shard_records = np.zeros(plan.n_shards, dtype=np.int64)
        staged_values = ", ".join(
            (f"COALESCE(m{k}.value, {_sql_string(MISSING_QUASI_IDENTIFIER)})" if column in quasi_identifiers else f"m{k}.value")
            + f" AS {_quote(column)}"
            for k, column in enumerate(columns)
        )
        selected = ", ".join(_quote(c) for c in columns)
        for index, file in enumerate(read):
            written = building / f"file-{index:05d}"
            records = (
                f"SELECT CAST(src.position AS BIGINT) + {file.first_row_id} AS row_id, {staged_values} "
                f"FROM {_source_sql(copies[index], len(columns))} AS src {joins} WHERE {kept}"
            )
            if plan.n_shards == 1:
                # one shard: every record is in shard 0, written straight to its part (the same file a partitioned
                # write would give, without partitioning's cost: about 0.3 s of 1M records)
                part = building / "shard=0" / f"part-{index:05d}.parquet"
                connection.execute(
                    f"COPY (SELECT row_id, {selected} FROM ({records})) TO {_sql_string(str(part))} "
                    "(FORMAT parquet, COMPRESSION zstd)"
                )
                copies[index].unlink()
                shard_records[0] += pq.read_metadata(part).num_rows
                continue
            key = shard_key_sql("row_id", salt=salt, n_shards=plan.n_shards)
            connection.execute(
                f"COPY (SELECT row_id, {selected}, {key} AS shard FROM ({records})) TO {_sql_string(str(written))} "
                "(FORMAT parquet, COMPRESSION zstd, PARTITION_BY (shard))"
            )
            copies[index].unlink()
            for s in range(plan.n_shards):
                parts = sorted((written / f"shard={s}").glob("*.parquet"))
                for k, part in enumerate(parts):
                    name = f"part-{index:05d}.parquet" if len(parts) == 1 else f"part-{index:05d}-{k:05d}.parquet"
                    shard_records[s] += pq.read_metadata(part).num_rows
                    part.replace(building / f"shard={s}" / name)
            shutil.rmtree(written)
    finally:
        connection.close()
    if int(shard_records.sum()) != n_records:
        raise RuntimeError(f"staging wrote {int(shard_records.sum())} records for {n_records} kept; stage again")
    for leftover in ("raw", "duckdb.tmp"):
        shutil.rmtree(building / leftover, ignore_errors=True)
    final = staging_dir / "input"
    if final.exists():
        shutil.rmtree(final)
    building.rename(final)
    return StagedInput(
        staging_dir=staging_dir,
        files=tuple(read),
        input_format=fmt,
        n_input=offset,
        n_dropped_missing=sum(f.n_dropped_missing for f in read),
        n_records=n_records,
        n_missing_quasi_identifier=n_missing_quasi_identifier,
        plan=plan,
        shard_records=tuple(int(n) for n in shard_records),
        look_alike_values=look_alikes,
        dropped_missing_by_attribute=dropped_by_attribute,
        missing_quasi_identifier_by_column=missing_by_column,
    )


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _sql_string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def sensitive_tuple_counts(staging_dir: Path, sensitive_attributes: Sequence[str]) -> pd.DataFrame:
    """The global phase's input: how many staged records hold each distinct tuple of sensitive values.

    One DuckDB ``GROUP BY`` over every staged part (``input/shard=*/part-*.parquet``), out of core.

    Returns
    -------
    pandas.DataFrame
        One row per distinct tuple: the ``sensitive_attributes`` (text, object dtype) and ``n_records`` (int64 > 0),
        sorted by the attributes (byte order); the input of
        :func:`pipeline.core.sharding.global_model_from_tuple_counts`.

    Raises
    ------
    FileNotFoundError
        Nothing is staged under ``staging_dir / "input"``.
    """
    pattern = staging_dir / "input" / "shard=*" / "part-*.parquet"
    if not list((staging_dir / "input").glob("shard=*/part-*.parquet")):
        raise FileNotFoundError(f"{staging_dir / 'input'}: no staged shard; stage the input first (stage_input)")
    selected = ", ".join(f"CAST({_quote(a)} AS VARCHAR) AS {_quote(a)}" for a in sensitive_attributes)
    keys = ", ".join(_quote(a) for a in sensitive_attributes)
    query = (
        f"SELECT {selected}, CAST(COUNT(*) AS BIGINT) AS n_records "
        f"FROM read_parquet({_sql_string(str(pattern))}, hive_partitioning = false) "
        f"GROUP BY {keys} ORDER BY {keys}"
    )
    with duckdb.connect(config={"threads": 1}) as connection:
        counts = connection.execute(query).fetch_df()
    for attribute in sensitive_attributes:
        counts[attribute] = counts[attribute].astype(object)
    counts["n_records"] = counts["n_records"].astype(np.int64)
    return counts


def shard_key_sql(row_id: str, *, salt: int, n_shards: int) -> str:
    """The shard key :func:`pipeline.core.sharding.shard_of` as a DuckDB SQL expression (value in ``[0, n_shards)``).

    ``splitmix64((row_id + salt) mod 2**64) mod n_shards``: the state is a ``UBIGINT``; each sum and product is
    taken in ``UHUGEINT`` (128 bits: the product of two 64-bit numbers fits there, whereas ``UBIGINT`` arithmetic
    raises on overflow) and reduced mod 2**64 by a bit mask, as in the uint64 arithmetic of
    :func:`pipeline.core.sharding.splitmix64`; shifts and xors stay in 64 bits (about 30 ns per row on one core).

    Parameters
    ----------
    row_id
        A SQL expression of the private row id (an integer column, e.g. ``"row_id"``; >= 0).
    salt
        The 64-bit salt, in ``[0, 2**64)``.
    n_shards
        S >= 1.

    Returns
    -------
    str
        A ``BIGINT`` SQL expression; the salt appears in it as a literal, so never log or publish the SQL.

    Raises
    ------
    ValueError
        A salt outside ``[0, 2**64)`` or ``n_shards`` < 1.
    """
    if not 0 <= salt <= _MASK64:
        raise ValueError("the shard salt must be in [0, 2**64)")
    if n_shards < 1:
        raise ValueError(f"n_shards must be at least 1, not {n_shards}")

    def u(value: int) -> str:
        return f"CAST('{value}' AS UHUGEINT)"

    mask = u(_MASK64)

    def wrap(expression: str) -> str:  # a UHUGEINT below 2**128 reduced mod 2**64, as UBIGINT
        return f"CAST(({expression}) & {mask} AS UBIGINT)"

    z = wrap(f"CAST({row_id} AS UHUGEINT) + {u(salt)} + {u(_GOLDEN_GAMMA)}")
    z = wrap(f"CAST(xor({z}, {z} >> 30) AS UHUGEINT) * {u(_MIX1)}")
    z = wrap(f"CAST(xor({z}, {z} >> 27) AS UHUGEINT) * {u(_MIX2)}")
    return f"CAST(xor({z}, {z} >> 31) % CAST('{n_shards}' AS UBIGINT) AS BIGINT)"
