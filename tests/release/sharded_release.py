"""Test fakes for sharded releases (issue 17): the private part files and summaries a shard worker writes, and the id
offsets, made here without ``pipeline.core.sharding`` (helper "core" owns it) or the engines.

Each fake shard is SPEC §16's example A released by the pure mixed model (``run_mixed_model`` +
``assemble_release_tables``), so a release of S such shards is the example A table repeated S times: the adversary's
rules and confidences are the example's, and the audit against the repeated raw table must PASS (max 1/ℓ).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.core.mixed_model import ReleaseTables, assemble_release_tables, run_mixed_model
from pipeline.core.sharding import ShardOffsets
from pipeline.release.publish import contract_schemas
from pipeline.release.sharded_publish import PART_TABLES, part_name, sharding_manifest
from tests.conftest import FIXTURES, example_frame, example_quasi_identifiers

EXAMPLE = json.loads((FIXTURES / "golden_expected.json").read_text())["example_A"]
QUASI_IDENTIFIERS = example_quasi_identifiers(EXAMPLE)
SENSITIVE_ATTRIBUTES = list(EXAMPLE["SA"])
SCHEMAS = contract_schemas(QUASI_IDENTIFIERS, SENSITIVE_ATTRIBUTES, model="mixed")


def example_records() -> pd.DataFrame:
    """Example A's records: ``row_id`` and the quasi-identifiers and sensitive attributes as text."""
    return example_frame(EXAMPLE)


def example_release(seed: int = 0) -> ReleaseTables:
    """Example A released by the pure mixed model (ℓ = 2, min_confidence 3/4): 4 SAC~ rows, 12 attribute-table rows."""
    records = example_records()
    result = run_mixed_model(records, SENSITIVE_ATTRIBUTES, ell=EXAMPLE["l"], min_confidence=EXAMPLE["min_conf"], seed=seed)
    return assemble_release_tables(
        records,
        QUASI_IDENTIFIERS,
        SENSITIVE_ATTRIBUTES,
        sac_permuted=result.sac_permuted,
        attribute_sids=result.attribute_sids,
        id_table=result.id_table,
        clusters=result.clusters,
    )


def shard_counts(tables: ReleaseTables) -> dict[str, Any]:
    """A shard's ``counts`` as the worker reports them."""
    at = tables.attribute_table
    return {
        "n_records": len(tables.sac_released) + len(at),
        "n_sac_released": len(tables.sac_released),
        "n_attribute_table": len(at),
        "n_deleted": 0,
        "n_groups": int(tables.sac_released["group_id"].nunique()),
        "n_sids": {a: int(tables.id_table.loc[tables.id_table["attribute"] == a, "sid"].max()) for a in SENSITIVE_ATTRIBUTES},
        "n_suppressed_cells": {a: int(at[a].isna().sum()) for a in SENSITIVE_ATTRIBUTES},
    }


def write_private_parts(output_dir: Path, shards: Sequence[ReleaseTables]) -> list[dict[str, Any]]:
    """Write every shard's private parts ``output/<table>/part-<s:05d>.parquet`` (pyarrow, the frames' own dtypes) and
    return the summaries (shard order)."""
    summaries = []
    for shard, tables in enumerate(shards):
        parts = {}
        for table in PART_TABLES:
            path = output_dir / table / part_name(shard)
            path.parent.mkdir(parents=True, exist_ok=True)
            frame = getattr(tables, table)[list(SCHEMAS[table])]
            pq.write_table(pa.Table.from_pandas(frame, preserve_index=False), path)
            parts[table] = {
                "path": f"{table}/{path.name}",
                "rows": len(frame),
                "sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
            }
        summaries.append({"shard": shard, "counts": shard_counts(tables), "partials": {}, "parts": parts})
    return summaries


def fake_offsets(summaries: Sequence[dict[str, Any]]) -> list[ShardOffsets]:
    """The offsets ``shard_offsets`` documents, computed here: SAC~ rows of all shards first, then attribute-table rows
    (a shard's local attribute-table ids start after its own SAC~ rows); group ids and SIDs consecutive per shard."""
    counts = [s["counts"] for s in summaries]
    total_sac = sum(c["n_sac_released"] for c in counts)
    offsets, sac, at, groups = [], 0, 0, 0
    sids = dict.fromkeys(SENSITIVE_ATTRIBUTES, 0)
    for shard, c in enumerate(counts):
        offsets.append(ShardOffsets(shard, sac, total_sac + at - c["n_sac_released"], groups, dict(sids)))
        sac, at, groups = sac + c["n_sac_released"], at + c["n_attribute_table"], groups + c["n_groups"]
        sids = {a: sids[a] + c["n_sids"][a] for a in SENSITIVE_ATTRIBUTES}
    return offsets


def united_tables(shards: Sequence[ReleaseTables], offsets: Sequence[ShardOffsets]) -> dict[str, pd.DataFrame]:
    """The united release computed in pandas (the expectation the DuckDB copy is checked against)."""
    sac, at, ids = [], [], []
    for tables, offset in zip(shards, offsets, strict=True):
        s = tables.sac_released[list(SCHEMAS["sac_released"])].copy()
        s["row_id"] += offset.sac_row_id
        s["group_id"] += offset.group_id
        a = tables.attribute_table[list(SCHEMAS["attribute_table"])].copy()
        a["row_id"] += offset.attribute_table_row_id
        for attribute in SENSITIVE_ATTRIBUTES:
            a[attribute] = a[attribute].astype("Int64") + offset.sid[attribute]
        i = tables.id_table[list(SCHEMAS["id_table"])].copy()
        i["sid"] += i["attribute"].map(offset.sid)
        sac.append(s)
        at.append(a)
        ids.append(i)
    return {
        "sac_released": pd.concat(sac, ignore_index=True),
        "attribute_table": pd.concat(at, ignore_index=True),
        "id_table": pd.concat(ids, ignore_index=True),
    }


def sharded_manifest(release_id: str, summaries: Sequence[dict[str, Any]], raw_name: str = "raw.csv") -> dict[str, Any]:
    """A mixed-model manifest of the fake sharded release (enough for the audit and report.html)."""
    counts = [s["counts"] for s in summaries]
    n_records = sum(c["n_records"] for c in counts)
    return {
        "release_id": release_id,
        "created_at": "2026-11-26T00:00:00+00:00",
        "model": "mixed",
        "ell": EXAMPLE["l"],
        "min_confidence": EXAMPLE["min_conf"],
        "min_support": 1,
        "seed": 0,
        "randomness": "spec-reference",
        "grouping": "p1",
        "residual_policy": "suppress",
        "quasi_identifiers": QUASI_IDENTIFIERS,
        "sensitive_attributes": SENSITIVE_ATTRIBUTES,
        "input_reading": {
            "input_file": raw_name,
            "input_format": "csv",
            "csv_header": True,
            "column_count": 1 + len(QUASI_IDENTIFIERS) + len(SENSITIVE_ATTRIBUTES),
            "column_positions": {c: i + 1 for i, c in enumerate([*QUASI_IDENTIFIERS, *SENSITIVE_ATTRIBUTES])},
        },
        "n_input": n_records,
        "n_dropped_missing": 0,
        "n_sac_released": sum(c["n_sac_released"] for c in counts),
        "n_attribute_table": sum(c["n_attribute_table"] for c in counts),
        "n_deleted": 0,
        "n_suppressed_cells": sum(sum(c["n_suppressed_cells"].values()) for c in counts),
        "checks": [],
        "sharding": sharding_manifest(summaries, shard_rows=16, engine="local", workers=2),
    }


def write_raw_table(path: Path, n_shards: int) -> Path:
    """Example A's records repeated once per shard, as a CSV with a header (the raw table of the fake release)."""
    records = example_records()
    pd.concat([records] * n_shards, ignore_index=True).to_csv(path, index=False)
    return path
