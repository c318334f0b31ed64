"""Publishing a sharded release from the shards' PRIVATE part files (issue 17; design note ``SCALE.md`` §5).

Layout of a sharded release ``<home>/releases/<release_id>/``:

- ``<table>/part-<s:05d>.parquet`` for ``sac_released``, ``attribute_table`` and ``id_table``, one per shard in shard
  order, with the ids of the united release (:func:`pipeline.core.sharding.shard_offsets`: SAC~ row ids,
  attribute-table row ids, group ids and every attribute's SIDs offset per shard) and the contract's column types
  (:func:`pipeline.release.publish.contract_schemas`); read back, the parts in name order ARE the table;
- ``attribute_clusters.parquet`` and ``release_manifest.parquet`` (one file each: small, global);
- ``manifest.json``, whose ``sharding`` records S, ``shard_rows``, the engine, its workers, the per-shard spread of
  records, deletions and suppressed cells, and every part's path, rows and SHA-256 (never the shard key's salt);
- the extra files (``report.html``, ``report.json``).

No ``release.duckdb``: a copy of every table in one database would double the release on disk and need a
whole-table write, and views over the parts would hold paths that no longer point at the release once it is
renamed, copied or moved (and the contract allows no view). Readers use DuckDB's ``read_parquet`` over the sorted
part files (:func:`pipeline.release.audit.read_release`, README "Release contract").

Before a private part is read its row count (Parquet footer) and SHA-256 are checked against the shard's summary;
any mismatch stops the publish before anything is written. DuckDB then copies one part at a time (a streamed
``COPY (SELECT …) TO``; no table is held in pandas), and every written part's row count is checked. The manifest
files are written last, then the extra files; the directory is fsynced, renamed, and ``LATEST`` replaced last, by
the same code as :func:`pipeline.release.publish.publish_release` (:func:`pipeline.release.publish.publish_directory`).

Failpoints (:mod:`pipeline.release.failpoints`): ``sharded_publish.staging_created``,
``sharded_publish.part_written.<table>.<s:05d>`` (after each part: between parts), ``sharded_publish.parts_written``
(before the manifest), ``sharded_publish.manifest_written`` (after it and the extra files),
``sharded_publish.fsynced``, ``sharded_publish.renamed`` (before LATEST), ``sharded_publish.latest_staged``,
``sharded_publish.latest_replaced`` (after LATEST).

No Dagster here.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import duckdb
import pandas as pd
import pyarrow.parquet as pq

from pipeline.core.sharding import ShardOffsets
from pipeline.errors import MsaReleaseError
from pipeline.release.failpoints import failpoint
from pipeline.release.manifest import validate_manifest
from pipeline.release.publish import (
    check_extra_files,
    check_publish_request,
    manifest_frame,
    manifest_row,
    publish_directory,
    sql_text,
    write_manifest_and_extra_files,
    write_table,
)

__all__ = [
    "PART_TABLES",
    "ShardPartError",
    "file_sha256",
    "part_name",
    "publish_sharded_release",
    "published_part_sql",
    "sharding_manifest",
]

#: Tables published as one part file per shard (the others are one file each).
PART_TABLES = ("sac_released", "attribute_table", "id_table")
#: Prefix of the failpoints of this module.
FAILPOINT_PREFIX = "sharded_publish"


class ShardPartError(MsaReleaseError, ValueError):
    """A shard's private part file does not match its summary (missing, other rows, other bytes, other columns) or
    the summaries, offsets and manifest do not fit together (exit 1: the run's own staging is inconsistent); the
    message names the part and what to do, ``file`` the part's path when there is one."""


def part_name(shard: int) -> str:
    """``part-<s:05d>.parquet``: the file name of shard ``shard``'s part (private staging and published release)."""
    return f"part-{shard:05d}.parquet"


def file_sha256(path: Path) -> str:
    """SHA-256 (hex) of a file's bytes, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _spread(values: Sequence[int]) -> list[int]:
    return [min(values), max(values)] if values else [0, 0]


def _suppressed(counts: Mapping[str, Any]) -> int:
    value = counts.get("n_suppressed_cells", 0)
    return int(sum(value.values())) if isinstance(value, Mapping) else int(value or 0)


def sharding_manifest(summaries: Sequence[Mapping[str, Any]], *, shard_rows: int, engine: str, workers: int) -> dict[str, Any]:
    """The manifest's ``sharding`` (without ``parts``, which :func:`publish_sharded_release` adds) from the shards'
    summaries (:data:`pipeline.engines.base.ShardSummary`, shard order).

    Returns
    -------
    dict
        ``n_shards`` (S), ``shard_rows``, ``engine``, ``workers`` and ``per_shard``: ``[min, max]`` over the shards of
        ``n_records``, ``n_deleted`` and ``n_suppressed_cells`` (summed over the sensitive attributes); counts only.
    """
    counts = [summary["counts"] for summary in summaries]
    return {
        "n_shards": len(summaries),
        "shard_rows": int(shard_rows),
        "engine": str(engine),
        "workers": int(workers),
        "per_shard": {
            "n_records": _spread([int(c.get("n_records", 0)) for c in counts]),
            "n_deleted": _spread([int(c.get("n_deleted", 0)) for c in counts]),
            "n_suppressed_cells": _spread([_suppressed(c) for c in counts]),
        },
    }


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _private_part(output_dir: Path, summary: Mapping[str, Any], table: str, shard: int) -> tuple[Path, int]:
    """The checked private part of ``table`` of a shard and its row count.

    Raises
    ------
    ShardPartError
        The summary lacks the part, its path leaves ``output_dir``, the file is missing or not Parquet, or its rows or
        SHA-256 differ from the summary's.
    """
    label = f"shard {shard}, table {table}"
    entry = (summary.get("parts") or {}).get(table)
    if not isinstance(entry, Mapping) or not {"path", "rows", "sha256"} <= set(entry):
        raise ShardPartError(f"{label}: the shard summary lists no part (path, rows, sha256); release the shard again")
    path = (output_dir / str(entry["path"])).resolve()
    if not path.is_relative_to(output_dir.resolve()):
        raise ShardPartError(f"{label}: the summary's part path leaves the staging output directory {output_dir}")
    try:
        rows = pq.ParquetFile(path).metadata.num_rows
        sha256 = file_sha256(path)
    except FileNotFoundError:
        raise ShardPartError(
            f"{path}: the private part of {label} is missing; release the shard again; nothing was published",
            file=str(path),
        ) from None
    except ValueError as error:  # pyarrow's ArrowInvalid: not a Parquet file (an I/O error stays an OSError)
        raise ShardPartError(
            f"{path}: the private part of {label} is not a readable Parquet file ({type(error).__name__}); release the "
            "shard again; nothing was published",
            file=str(path),
        ) from None
    if rows != int(entry["rows"]):
        raise ShardPartError(
            f"{path}: the private part of {label} holds {rows} rows, its shard summary says {int(entry['rows'])}; the "
            "part was changed or the run mixed two attempts: release the shard again; nothing was published",
            file=str(path),
        )
    if sha256 != str(entry["sha256"]):
        raise ShardPartError(
            f"{path}: the SHA-256 of the private part of {label} differs from its shard summary; the part was changed "
            "after the shard was released: release the shard again; nothing was published",
            file=str(path),
        )
    return path, rows


def published_part_sql(
    table: str, part: Path, schema: Mapping[str, str], offsets: ShardOffsets, sensitive_attributes: Sequence[str]
) -> str:
    """The SELECT (DuckDB SQL) that reads one private part of ``table`` with the united release's ids (``offsets`` of its
    shard added to the row ids, group ids and SIDs) and the contract's column types (``schema``): exactly the rows the
    published part holds."""
    expressions = []
    for column, kind in schema.items():
        source = _quote(column)
        if table == "sac_released" and column == "row_id":
            source = f"{source} + {int(offsets.sac_row_id)}"
        elif table == "sac_released" and column == "group_id":
            source = f"{source} + {int(offsets.group_id)}"
        elif table == "attribute_table" and column == "row_id":
            source = f"{source} + {int(offsets.attribute_table_row_id)}"
        elif table == "attribute_table" and column in sensitive_attributes:
            source = f"{source} + {int(offsets.sid[column])}"
        elif table == "id_table" and column == "sid":
            cases = " ".join(f"WHEN {sql_text(a)} THEN {int(offsets.sid[a])}" for a in sensitive_attributes)
            missing = sql_text(f"{part.name} of id_table names an attribute that is not a sensitive attribute")
            source = f"{source} + CASE {_quote('attribute')} {cases} ELSE error({missing}) END"
        expressions.append(f"CAST({source} AS {kind}) AS {_quote(column)}")
    return f"SELECT {', '.join(expressions)} FROM read_parquet({sql_text(str(part))})"


def _check_request(
    summaries: Sequence[Mapping[str, Any]],
    offsets: Sequence[ShardOffsets],
    schemas: Mapping[str, Mapping[str, str]],
    manifest: Mapping[str, object],
) -> list[str]:
    """The sensitive attributes, once summaries, offsets, schemas and manifest are known to fit together."""
    sharding = manifest.get("sharding")
    if not isinstance(sharding, Mapping):
        raise ShardPartError("the manifest of a sharded release needs its 'sharding' section (sharding_manifest)")
    if not summaries:
        raise ShardPartError("a sharded release needs at least one shard summary")
    if not len(summaries) == len(offsets) == int(sharding.get("n_shards", -1)):
        raise ShardPartError(
            f"{len(summaries)} shard summaries, {len(offsets)} offsets and n_shards = {sharding.get('n_shards')} in the "
            "manifest: they must be equal (one of each per shard)"
        )
    for position, (summary, offset) in enumerate(zip(summaries, offsets, strict=True)):
        if int(summary.get("shard", -1)) != position or offset.shard != position:
            raise ShardPartError(f"summaries and offsets must be in shard order: position {position} holds another shard")
    if "parts" in sharding:
        raise ShardPartError("the manifest's sharding must not list parts: publish_sharded_release writes them")
    missing = [t for t in (*PART_TABLES, "attribute_clusters", "release_manifest") if t not in schemas]
    if missing:
        raise ShardPartError(f"the schemas lack {missing}: pass contract_schemas(..., model='mixed')")
    sensitive_attributes = [str(a) for a in manifest.get("sensitive_attributes") or []]  # type: ignore[attr-defined]
    if not sensitive_attributes:
        raise ShardPartError("the manifest names no sensitive_attributes")
    for offset in offsets:
        if set(offset.sid) != set(sensitive_attributes):
            raise ShardPartError(
                f"the SID offsets of shard {offset.shard} are not given for exactly the sensitive attributes "
                f"{sensitive_attributes}"
            )
    return sensitive_attributes


def publish_sharded_release(
    releases_dir: Path,
    release_id: str,
    *,
    output_dir: Path,
    summaries: Sequence[Mapping[str, Any]],
    offsets: Sequence[ShardOffsets],
    schemas: Mapping[str, Mapping[str, str]],
    manifest: Mapping[str, object],
    attribute_clusters: pd.DataFrame,
    extra_files: Mapping[str, bytes] | None = None,
    keep_releases: int = 0,
    update_latest: bool = True,
) -> Path:
    """Publish a sharded release atomically from the shards' private parts and point ``LATEST`` at it (or not).

    Parameters
    ----------
    releases_dir
        ``<home>/releases`` (or ``<home>/comparisons`` with ``update_latest=False``); created if needed.
    release_id
        Directory name of the new release; must not exist yet.
    output_dir
        The run's PRIVATE ``<staging>/output`` (:class:`pipeline.engines.base.ShardJob.output_dir`); the summaries'
        part paths are relative to it.
    summaries
        One :data:`pipeline.engines.base.ShardSummary` per shard, in shard order (``shard`` 0..S-1): its ``parts``
        give, for ``sac_released``, ``attribute_table`` and ``id_table``, ``path``, ``rows`` and ``sha256`` of the
        part with SHARD-LOCAL ids (the contract's columns, in order).
    offsets
        :func:`pipeline.core.sharding.shard_offsets` of the summaries' counts (shard order): added to the local ids.
    schemas
        :func:`pipeline.release.publish.contract_schemas` of the mixed model (column -> DuckDB type per table).
    manifest
        The manifest (keys of ``MANIFEST_COLUMNS``) with ``sensitive_attributes`` and ``sharding``
        (:func:`sharding_manifest`, without ``parts``; its ``n_shards`` = number of summaries). ``n_sac_released``
        and ``n_attribute_table``, when given, must equal the parts' total rows.
    attribute_clusters
        The global attribute clusters (``cluster_id``, ``attribute``), published as ``attribute_clusters.parquet``.
    extra_files, keep_releases, update_latest
        As :func:`pipeline.release.publish.publish_release` (``report.html``, ``report.json``; retention; a shared
        release or a comparison).

    Returns
    -------
    Path
        The published directory; its ``manifest.json`` lists every part under ``sharding.parts``
        (``{table: [{"path": "<table>/part-<s:05d>.parquet", "rows", "sha256"}]}``).

    Raises
    ------
    ShardPartError
        Summaries, offsets and manifest that do not fit together, or a private part that is missing, not Parquet, or
        whose rows or SHA-256 differ from its summary (the message names the part); raised before anything is
        written. A part whose columns differ from the contract, or a written part whose row count differs, is
        raised during the copy: the staging directory is removed, nothing published.
    InvalidLatest, ValueError
        As :func:`pipeline.release.publish.publish_release` (release id, ``LATEST``, manifest types, extra files,
        ``n_sac_released`` / ``n_attribute_table`` different from the parts' rows).
    OSError, duckdb.Error
        The disk is full or reports an I/O error; until ``LATEST`` names the new release nothing is published.
    """
    sensitive_attributes = _check_request(summaries, offsets, schemas, manifest)
    check_publish_request(releases_dir, release_id, manifest, update_latest=update_latest)
    extra_files = dict(extra_files or {})
    check_extra_files(
        extra_files, {"manifest.json", "release.duckdb", "attribute_clusters.parquet", "release_manifest.parquet", *PART_TABLES}
    )
    # every private part checked against its summary before anything is written or read
    private = {
        (table, position): _private_part(output_dir, summary, table, position)
        for table in PART_TABLES
        for position, summary in enumerate(summaries)
    }
    totals = {table: sum(private[(table, s)][1] for s in range(len(summaries))) for table in PART_TABLES}
    for key, table in (("n_sac_released", "sac_released"), ("n_attribute_table", "attribute_table")):
        if manifest.get(key) is not None and int(manifest[key]) != totals[table]:  # type: ignore[call-overload]
            raise ValueError(f"the manifest's {key} = {manifest[key]} differs from the {totals[table]} rows of the {table} parts")

    def write(staging: Path) -> None:
        published: dict[str, list[dict[str, Any]]] = {}
        connection = duckdb.connect()  # in memory: each part streams from its private file to its published file
        try:
            for table in PART_TABLES:
                (staging / table).mkdir()
                schema = schemas[table]
                published[table] = []
                for position in range(len(summaries)):
                    source, rows = private[(table, position)]
                    columns = pq.read_schema(source).names
                    if columns != list(schema):
                        raise ShardPartError(
                            f"{source}: the private part of shard {position}, table {table}, has the columns {columns}, "
                            f"not the contract's {list(schema)}; nothing was published",
                            file=str(source),
                        )
                    target = staging / table / part_name(position)
                    select = published_part_sql(table, source, schema, offsets[position], sensitive_attributes)
                    connection.execute(f"COPY ({select}) TO {sql_text(str(target))} (FORMAT parquet)")
                    written = pq.ParquetFile(target).metadata.num_rows
                    if written != rows:
                        raise ShardPartError(
                            f"{target.name} of {table}: {written} rows written from a private part of {rows} rows; "
                            "nothing was published"
                        )
                    published[table].append(
                        {"path": f"{table}/{target.name}", "rows": int(written), "sha256": file_sha256(target)}
                    )
                    failpoint(f"{FAILPOINT_PREFIX}.part_written.{table}.{position:05d}")
            failpoint(f"{FAILPOINT_PREFIX}.parts_written")
            final_manifest = dict(manifest)
            final_manifest["sharding"] = {**dict(manifest["sharding"]), "parts": published}  # type: ignore[call-overload]
            validate_manifest(final_manifest)
            row = manifest_row(final_manifest)
            write_table(
                connection,
                "attribute_clusters",
                attribute_clusters,
                schemas["attribute_clusters"],
                staging / "attribute_clusters.parquet",
            )
            write_table(
                connection,
                "release_manifest",
                manifest_frame(row),
                schemas["release_manifest"],
                staging / "release_manifest.parquet",
            )
        finally:
            connection.close()
        write_manifest_and_extra_files(staging, row, extra_files)
        failpoint(f"{FAILPOINT_PREFIX}.manifest_written")

    return publish_directory(
        releases_dir,
        release_id,
        write,
        update_latest=update_latest,
        keep_releases=keep_releases,
        failpoint_prefix=FAILPOINT_PREFIX,
    )
