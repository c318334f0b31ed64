"""The input manifest and the shard-partitioned PRIVATE staging of a sharded release (issue 17; SCALE.md §3, §5).

The input is one CSV or Parquet file, or a directory or a list of files of ONE format. Record order is defined the
same way on every engine: the files sorted by file name, then the row position inside each file; the private row
ids are 1-based across the files (exactly ``raw_records.row_id`` for a single file). Every file is read by
:func:`pipeline.io.loading.load_records`, so the validation, the missing-value policy and the look-alike merging are
today's (S = 1 stages exactly today's records); look-alike spellings are then merged ACROSS files too (see
:func:`stage_input`), so that ℓ-diversity counts values as a reader sees them in the whole table.

Each record goes to shard :func:`pipeline.core.sharding.shard_of` of its row id, and the shards are written as
``input/shard=<s>/part-<f:05d>.parquet`` (one part per input file ``f`` holding records of shard ``s``; ``row_id``
int64, the configured columns dictionary-encoded text) under the run's staging directory
(:class:`pipeline.engines.base.ShardJob`). The global phase then reads the staged Parquet with one DuckDB
``GROUP BY`` (:func:`sensitive_tuple_counts`); :func:`shard_key_sql` is the shard key as a DuckDB SQL expression,
for a DuckDB-only (out-of-core) staging path.

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
from pipeline.core.values import value_key
from pipeline.io.loading import InputError, LoadedRecords, load_records, resolve_input_path
from pipeline.vocabulary import setting

__all__ = [
    "INPUT_SUFFIXES",
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
            found = sorted(
                p.resolve()
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
        As :class:`pipeline.io.loading.LoadedRecords`, summed over the files; ``look_alike_values`` also counts the
        spellings merged across files.
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


def _cross_file_spellings(value_counts: Mapping[str, int]) -> dict[str, str]:
    """Spelling -> canonical spelling for the look-alike values that remain across files (empty when none).

    The rule of :func:`pipeline.core.values.merge_look_alike_values`: per :func:`value_key`, the spelling held by
    the most records, ties by code-point order."""
    canonical: dict[str, str] = {}
    for value, count in value_counts.items():
        key = value_key(value)
        best = canonical.get(key)
        if best is None or count > value_counts[best] or (count == value_counts[best] and value < best):
            canonical[key] = value
    return {value: canonical[value_key(value)] for value in value_counts if canonical[value_key(value)] != value}


def _respell(series: pd.Series, spellings: Mapping[str, str]) -> pd.Series:
    """A categorical column with its categories respelled (categories sorted, exactly the values present)."""
    categories = [spellings.get(v, v) for v in series.cat.categories.tolist()]
    merged = sorted(set(categories))
    position = {value: k for k, value in enumerate(merged)}
    remap = np.asarray([position[v] for v in categories], dtype=np.int64)
    codes = series.cat.codes.to_numpy()
    return pd.Series(pd.Categorical.from_codes(remap[codes], categories=pd.Index(merged, dtype=object)), name=series.name)


def _write_parquet(table: pa.Table, path: Path) -> None:
    """Write a staged part (temporary name, then rename), zstd, no statistics needed beyond the defaults."""
    temporary = path.with_name(f".{path.name}.tmp")
    pq.write_table(table, temporary, compression="zstd")
    temporary.replace(path)


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
    """Read the input files and write the shard-partitioned PRIVATE staging ``staging_dir / "input"``.

    Every file is read by :func:`pipeline.io.loading.load_records` (validation, missing-value policy, look-alike
    merging inside the file); its row ids are offset by the rows read from the files before it (sorted file names,
    then row position; 1-based). Look-alike spellings that remain ACROSS files (``HIV`` most frequent in one file,
    ``hiv`` in another) are then merged by the same rule over the files' record counts (the spelling held by the
    most records, ties by code-point order), so the staged table never counts one value twice. Then
    S = :func:`pipeline.core.sharding.plan_shards` of the records kept, and each record goes to shard
    :func:`pipeline.core.sharding.shard_of` ``(row_id, salt, S)``. Files: ``input/shard=<s>/part-<f:05d>.parquet``
    (``f`` = the file's 0-based position; ``row_id`` int64 ascending, then the configured columns as dictionary-
    encoded text), a directory for every shard. The staging is written under ``input.tmp`` and renamed to
    ``input`` last (an existing ``input`` is replaced), so an interrupted staging leaves no partial input.

    Memory: one file's records at a time (about today's ``load_records`` peak for the largest file); several files
    go through a per-file Parquet copy under ``input.tmp/files`` (removed at the end).

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
        Passed to :func:`pipeline.io.loading.load_records` (``csv_header``, ``column_names``, ``delimiter``,
        ``strip_whitespace``, ``missing_value_tokens``, ``max_value_length``); not ``ell``: ℓ-feasibility is a
        property of the whole table, checked by the caller on the global counts.

    Returns
    -------
    StagedInput
        The input manifest and the per-shard counts.

    Raises
    ------
    InputError
        Anything :func:`input_files` or :func:`pipeline.io.loading.load_records` refuses (naming the file); a file
        in which every record misses a sensitive value is refused as it is alone.
    ValueError
        The shard plan's refusals (:func:`pipeline.core.sharding.plan_shards`).
    """
    if "ell" in load_options:
        raise TypeError("stage_input does not take ell: check ℓ-feasibility on the whole table's counts")
    files, fmt = input_files(paths, input_format=input_format)
    staging_dir.mkdir(parents=True, exist_ok=True)
    building = staging_dir / "input.tmp"
    if building.exists():
        shutil.rmtree(building)
    (building / "files").mkdir(parents=True)
    columns = [*quasi_identifiers, *sensitive_attributes]
    read: list[InputFile] = []
    kept_frames: list[pd.DataFrame | Path] = []
    value_counts: dict[str, dict[str, int]] = {column: {} for column in columns}
    look_alikes: dict[str, dict[str, int]] = {}
    dropped_by_attribute: dict[str, int] = {}
    missing_by_column: dict[str, int] = {}
    n_missing_quasi_identifier = 0
    offset = 0
    for index, path in enumerate(files):
        loaded: LoadedRecords = load_records(
            path,
            quasi_identifiers=quasi_identifiers,
            sensitive_attributes=sensitive_attributes,
            input_format=fmt,
            **load_options,
        )
        records = loaded.records
        records["row_id"] += offset
        read.append(
            InputFile(
                path=path,
                sha256=loaded.input_sha256,
                first_row_id=offset + 1,
                n_input=loaded.n_input,
                n_dropped_missing=loaded.n_dropped_missing,
                n_records=len(records),
            )
        )
        offset += loaded.n_input
        for column in columns:
            counts = records[column].value_counts(sort=False)
            _add_counts(value_counts[column], {str(v): int(n) for v, n in counts.items() if n})
        for column, merged in loaded.look_alike_values.items():
            look_alikes.setdefault(column, {})
            _add_counts(look_alikes[column], merged)
        _add_counts(dropped_by_attribute, loaded.dropped_missing_by_attribute)
        _add_counts(missing_by_column, loaded.missing_quasi_identifier_by_column)
        n_missing_quasi_identifier += loaded.n_missing_quasi_identifier
        if len(files) == 1:
            kept_frames.append(records)
        else:
            copy = building / "files" / f"file-{index:05d}.parquet"
            _write_parquet(pa.Table.from_pandas(records, preserve_index=False), copy)
            kept_frames.append(copy)
        del loaded, records
    spellings: dict[str, dict[str, str]] = {}
    if len(files) > 1:
        for column in columns:
            spellings[column] = _cross_file_spellings(value_counts[column])
            if spellings[column]:
                merged_counts = {
                    "n_values_merged": len(spellings[column]),
                    "n_records_respelled": sum(value_counts[column][v] for v in spellings[column]),
                }
                look_alikes.setdefault(column, {})
                _add_counts(look_alikes[column], merged_counts)
    n_records = sum(f.n_records for f in read)
    plan = sharding.plan_shards(n_records, shard_rows=shard_rows, min_shard_rows=min_shard_rows)
    shard_records = np.zeros(plan.n_shards, dtype=np.int64)
    for s in range(plan.n_shards):
        (building / f"shard={s}").mkdir()
    for index, kept in enumerate(kept_frames):
        frame = kept if isinstance(kept, pd.DataFrame) else pq.read_table(kept).to_pandas()
        for column, respelled in spellings.items():
            if respelled:
                frame[column] = _respell(frame[column], respelled)
        shards = np.asarray(
            sharding.shard_of(frame["row_id"].to_numpy(dtype=np.int64), salt=salt, n_shards=plan.n_shards),
            dtype=np.int64,
        )
        order = np.argsort(shards, kind="stable")  # row order kept inside a shard
        bounds = np.searchsorted(shards[order], np.arange(plan.n_shards + 1))
        shard_records += np.diff(bounds)
        table = pa.Table.from_pandas(frame[["row_id", *columns]], preserve_index=False)
        for s in range(plan.n_shards):
            if bounds[s + 1] > bounds[s]:
                part = table.take(pa.array(order[bounds[s] : bounds[s + 1]]))
                _write_parquet(part, building / f"shard={s}" / f"part-{index:05d}.parquet")
        del frame, table
        if isinstance(kept, Path):
            kept.unlink()
    shutil.rmtree(building / "files")
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


def staged_shard_files(staging_dir: Path, shard: int) -> list[Path]:
    """The staged Parquet parts of one shard, in input-file order (``input/shard=<s>/part-*.parquet``)."""
    return sorted((staging_dir / "input" / f"shard={shard}").glob("part-*.parquet"))


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

    ``splitmix64((row_id + salt) mod 2**64) mod n_shards``, computed in ``UHUGEINT`` (128 bits): the product of two
    64-bit numbers fits there, whereas ``UBIGINT`` multiplication raises on overflow; every step is reduced
    mod 2**64, as in the uint64 arithmetic of :func:`pipeline.core.sharding.splitmix64`.

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

    modulus = u(_MASK64 + 1)
    z = f"((CAST({row_id} AS UHUGEINT) + {u(salt)}) % {modulus} + {u(_GOLDEN_GAMMA)}) % {modulus}"
    z = f"((xor({z}, {z} >> 30) * {u(_MIX1)}) % {modulus})"
    z = f"((xor({z}, {z} >> 27) * {u(_MIX2)}) % {modulus})"
    z = f"xor({z}, {z} >> 31)"
    return f"CAST({z} % {u(n_shards)} AS BIGINT)"
