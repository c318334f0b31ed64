"""The per-shard work every engine runs: release one shard and write its part files (issue 17; SCALE.md §5).

:func:`release_and_write_shard` calls :func:`pipeline.core.sharding.release_shard` and writes the shard's tables as
``output/<table>/part-<s:05d>.parquet`` under the run's PRIVATE staging directory; :func:`run_staged_shard` first
reads the shard's staged records (``input/shard=<s>``). Both return the shard's JSON-able summary
(:data:`pipeline.engines.base.ShardSummary`); nothing record-level goes back to the caller, so an executor's driver
(the Dagster step, the Spark driver) only ever holds S summaries.

Part files have deterministic bytes for a given shard release and environment: fixed pyarrow writer options, no
pandas metadata, no timestamps (Parquet has none); each is written under a temporary name and renamed, and a shard
that fails while writing removes the parts it wrote, so no part of a failed shard is left behind.

Framework-free: no Dagster, no Great Expectations; and no DuckDB (the driver stages and publishes): a worker process
imports only what releasing a shard needs (pandas, pyarrow, the compiled kernels and the pure core).
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from pandas.api.types import union_categoricals

from pipeline.core import sharding
from pipeline.core.columns import present_sorted_categories
from pipeline.core.keyed import record_hashes_with_key
from pipeline.engines.base import ShardJob, ShardSummary, staged_shard_files
from pipeline.memory import release_free_memory

__all__ = [
    "FINGERPRINTS",
    "SHARD_TABLES",
    "part_path",
    "read_staged_shard",
    "record_fingerprints_of_shard",
    "release_and_write_shard",
    "run_staged_shard",
]

#: the tables a shard writes, in this order: the release contract's (shard-local ids), then the private ones
SHARD_TABLES = ("sac_released", "attribute_table", "id_table", "row_map", "deleted")
#: the PRIVATE table of the release registry's record fingerprints (``output/fingerprints/part-<s:05d>.parquet``)
FINGERPRINTS = "fingerprints"

#: pyarrow writer options of every part file (fixed, so that equal tables give equal bytes)
_WRITER_OPTIONS: dict[str, Any] = {
    "version": "2.6",
    "compression": "zstd",
    "compression_level": 3,
    "use_dictionary": True,
    "write_statistics": True,
    "data_page_version": "1.0",
    "row_group_size": 1 << 20,
}


def _write_part(frame: pd.DataFrame, target: Path) -> Path:
    """Write ``frame`` to ``target`` (a part file) through a temporary file and one rename; returns ``target``."""
    target.parent.mkdir(parents=True, exist_ok=True)
    temporary = target.with_name(f".{target.name}.tmp")
    try:
        pq.write_table(_arrow_table(frame), temporary, **_WRITER_OPTIONS)
        temporary.replace(target)
    finally:
        with contextlib.suppress(FileNotFoundError):
            temporary.unlink()
    return target


def return_freed_memory() -> None:
    """Give free memory back to the system: pyarrow's memory pool (mimalloc or jemalloc, when chosen, keep what
    Parquet reads and writes freed) and the heap's free pages (glibc ``malloc_trim``,
    :func:`pipeline.memory.release_free_memory`), so that a worker holds no more than its next stage or shard needs."""
    pa.default_memory_pool().release_unused()
    release_free_memory()


def part_path(table: str, shard: int) -> str:
    """A part's path relative to ``output/``: ``<table>/part-<s:05d>.parquet``."""
    return f"{table}/part-{shard:05d}.parquet"


def _jsonable(value: Any) -> Any:
    """``value`` with numpy scalars and arrays, tuples and non-text keys turned into JSON types (recursively)."""
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return [_jsonable(v) for v in value.tolist()]
    if isinstance(value, np.bool_):
        return bool(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, np.floating):
        return float(value)
    return value


def _arrow_table(frame: pd.DataFrame) -> pa.Table:
    """``frame`` as an Arrow table without its index or pandas metadata (categoricals stay dictionary-encoded)."""
    return pa.Table.from_pandas(frame, preserve_index=False).replace_schema_metadata(None)


def record_fingerprints_of_shard(records: pd.DataFrame, row_map: pd.DataFrame, job: ShardJob) -> pd.DataFrame:
    """The release registry's view of one shard: every record's keyed fingerprint and its shard-local release row id.

    Parameters
    ----------
    records
        The shard's records (``row_id``: input row id, and the configured columns).
    row_map
        The shard release's PRIVATE row map (``source_row_id`` -> local ``row_id``).
    job
        The run's shard job; its ``registry_hash_key`` keys the fingerprints (never the home secret).

    Returns
    -------
    pandas.DataFrame
        ``fingerprint`` (uint64: the keyed hash of the record's quasi-identifiers and sensitive attributes, equal to
        what :func:`pipeline.core.series.record_fingerprints` gives with the home secret) and ``row_id`` (int64, the
        record's local release row id, 0 when it is not published), one row per record (published and deleted),
        sorted by fingerprint (stable), so nothing of the input order remains.

    Raises
    ------
    ValueError
        ``job.registry_hash_key`` is None.
    """
    if job.registry_hash_key is None:
        raise ValueError("the shard job has no registry_hash_key: the release registry's fingerprints cannot be made")
    columns = [*job.parameters.quasi_identifiers, *job.parameters.sensitive_attributes]
    fingerprints = record_hashes_with_key(records, columns, job.registry_hash_key)
    by_source = pd.Series(row_map["row_id"].to_numpy(np.int64), index=row_map["source_row_id"].to_numpy(np.int64))
    row_ids = by_source.reindex(records["row_id"].to_numpy(np.int64)).fillna(0).to_numpy(np.int64)
    order = np.argsort(fingerprints, kind="stable")
    return pd.DataFrame({"fingerprint": fingerprints[order], "row_id": row_ids[order]})


def release_and_write_shard(records: pd.DataFrame, job: ShardJob, shard: int) -> ShardSummary:
    """Release one shard and write its part files; return its summary.

    Parameters
    ----------
    records
        The shard's records as :func:`pipeline.core.sharding.release_shard` takes them: ``row_id`` (int64, input row
        id, ascending) and the configured columns (categorical text).
    job
        The run's shard job (staging directory, global model, parameters, secret, S).
    shard
        0-based shard number.

    Returns
    -------
    ShardSummary
        ``shard``; ``counts`` and ``partials`` of the :class:`pipeline.core.sharding.ShardRelease` (numpy numbers
        turned into JSON numbers); ``parts``: for each table of :data:`SHARD_TABLES`, ``path`` (relative to
        ``output/``), ``rows`` (int) and ``sha256`` (hex digest of the file's bytes); with ``job.registry_hash_key``,
        ``fingerprints``: ``path``, ``rows`` and ``digest`` (SHA-256 of the shard's sorted keyed fingerprints) of its
        :func:`record_fingerprints_of_shard` file.

    Raises
    ------
    Exception
        Whatever :func:`pipeline.core.sharding.release_shard` raises (nothing written then); an error while writing
        (the parts this call wrote are removed first). The caller names the shard.

    Memory: free pages go back to the system after the release and after the writes (pyarrow's pool, glibc's heap),
    so that a worker does not keep one shard's high-water mark into the next; nothing computed changes.
    """
    released = sharding.release_shard(
        records,
        job.model,
        job.parameters,
        secret=job.secret,
        shard=shard,
        n_shards=job.n_shards,
    )
    return_freed_memory()
    written: list[Path] = []
    parts: dict[str, dict[str, Any]] = {}
    fingerprint_part: dict[str, Any] | None = None
    try:
        for table in SHARD_TABLES:
            frame: pd.DataFrame = getattr(released, table)
            relative = part_path(table, shard)
            target = _write_part(frame, job.output_dir / relative)
            written.append(target)
            with target.open("rb") as written_file:
                digest = hashlib.file_digest(written_file, "sha256").hexdigest()
            parts[table] = {"path": relative, "rows": len(frame), "sha256": digest}
        if job.registry_hash_key is not None:
            fingerprints = record_fingerprints_of_shard(records, released.row_map, job)
            relative = part_path(FINGERPRINTS, shard)
            written.append(_write_part(fingerprints, job.output_dir / relative))
            # which records this shard holds (a keyed digest of its fingerprints' multiset): the release registry tells
            # two assignments of the same records to S > 1 shards apart (another input order, other groups)
            digest = hashlib.sha256(fingerprints["fingerprint"].to_numpy(np.uint64).astype("<u8").tobytes()).hexdigest()
            fingerprint_part = {"path": relative, "rows": len(fingerprints), "digest": digest}
    except BaseException:
        for target in written:
            with contextlib.suppress(FileNotFoundError):
                target.unlink()
        raise
    finally:
        return_freed_memory()
    summary: ShardSummary = {
        "shard": shard,
        "counts": _jsonable(released.counts),
        "partials": _jsonable(released.partials),
        "parts": parts,
    }
    if fingerprint_part is not None:
        summary[FINGERPRINTS] = fingerprint_part
    return summary


def read_staged_files(files: Sequence[Path], columns: Sequence[str]) -> pd.DataFrame:
    """PRIVATE: staged records (``input/shard=<s>/part-*.parquet`` files, :mod:`pipeline.engines.staging`) united and
    in input order, as the ``release`` job holds its records: one shard's (:func:`read_staged_shard`) or every
    shard's (:func:`pipeline.release.sharded_report.read_staged_records`).

    Parameters
    ----------
    files
        The staged Parquet files to read (one or more).
    columns
        The configured columns (quasi-identifiers, then sensitive attributes); ``row_id`` is read as well.

    Returns
    -------
    pandas.DataFrame
        ``row_id`` (int64, ascending; index 0..n-1) and ``columns`` as categoricals whose categories are exactly the
        values present, sorted (as :func:`pipeline.io.loading.load_records` gives them).
    """
    names = list(columns)
    # the text columns read as Arrow dictionaries: pandas categoricals, never one Python string per cell
    frames = [pq.read_table(path, columns=["row_id", *names], read_dictionary=names).to_pandas() for path in files]
    records = pd.DataFrame({"row_id": np.concatenate([f["row_id"].to_numpy(dtype=np.int64) for f in frames])})
    for column in names:
        pieces = [f[column] if isinstance(f[column].dtype, pd.CategoricalDtype) else f[column].astype("category") for f in frames]
        records[column] = present_sorted_categories(union_categoricals(pieces, ignore_order=True))
    del frames
    order = np.argsort(records["row_id"].to_numpy(), kind="stable")
    if not np.array_equal(order, np.arange(len(order))):
        records = records.iloc[order].reset_index(drop=True)
    # the Arrow tables (and an unsorted copy) are freed: their pages go back before the next stage adds its own (at
    # 1M records about 130 MiB of the publish step's peak, issue 18)
    return_freed_memory()
    return records


def read_staged_shard(job: ShardJob, shard: int) -> pd.DataFrame:
    """The staged records of one shard (``input/shard=<s>/part-*.parquet``), as the release job holds them
    (:func:`read_staged_files`: ``row_id`` int64 ascending, the quasi-identifiers then the sensitive attributes as
    categoricals of the values present, sorted).

    Raises
    ------
    FileNotFoundError
        The shard has no staged part (it is empty, or the input was not staged).
    """
    files = staged_shard_files(job.staging_dir, shard)
    if not files:
        raise FileNotFoundError(
            f"{job.input_dir / f'shard={shard}'}: no staged records for shard {shard}; stage the input first, or lower "
            "the number of shards"
        )
    return read_staged_files(files, [*job.parameters.quasi_identifiers, *job.parameters.sensitive_attributes])


def run_staged_shard(job: ShardJob, shard: int) -> ShardSummary:
    """Read shard ``shard``'s staged records (:func:`read_staged_shard`) and release them
    (:func:`release_and_write_shard`); the function every executor maps over the shards.

    Raises
    ------
    FileNotFoundError
        As :func:`read_staged_shard`; and whatever :func:`release_and_write_shard` raises.
    """
    return release_and_write_shard(read_staged_shard(job, shard), job, shard)
