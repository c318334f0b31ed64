"""The per-shard worker (pipeline/engines/worker.py) with a deterministic stand-in for the core's release_shard."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.core import sharding
from pipeline.engines.staging import stage_input
from pipeline.engines.worker import SHARD_TABLES, read_staged_shard, release_and_write_shard, run_staged_shard
from pipeline.io.loading import load_records
from tests.engines import shard_fakes
from tests.engines.shard_fakes import QUASI_IDENTIFIERS, SENSITIVE_ATTRIBUTES
from tests.engines.shard_fakes import SALT, make_job


@pytest.fixture
def staged(two_files: Path, tmp_path: Path, fake_key: None, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setattr(sharding, "release_shard", shard_fakes.fake_release_shard)
    staging_dir = tmp_path / "run"
    stage_input(
        two_files,
        staging_dir,
        quasi_identifiers=QUASI_IDENTIFIERS,
        sensitive_attributes=SENSITIVE_ATTRIBUTES,
        salt=SALT,
        shard_rows=1000,
        min_shard_rows=1,
    )
    return staging_dir


def test_parts_rows_digests_and_a_json_summary(staged: Path) -> None:
    job = make_job(staged, 1)
    records = read_staged_shard(job, 0)
    summary = release_and_write_shard(records, job, 0)
    assert json.loads(json.dumps(summary)) == summary  # JSON-able as it is
    assert summary["shard"] == 0
    assert summary["counts"] == {"n_records": 6, "n_deleted": 1, "n_sids": {"disease": 2}, "n_suppressed_cells": {"disease": 0}}
    assert summary["partials"] == {"gate_1": {"max_share": 1 / 3, "passed": True}, "gate_5": {"row_ids": [0, 1]}}
    expected = shard_fakes.fake_release_shard(records, job.model, job.parameters, secret=None, shard=0, n_shards=1)
    assert list(summary["parts"]) == list(SHARD_TABLES)
    for table, part in summary["parts"].items():
        path = staged / "output" / part["path"]
        assert part["path"] == f"{table}/part-00000.parquet"
        assert part["sha256"] == hashlib.sha256(path.read_bytes()).hexdigest()
        assert part["rows"] == len(getattr(expected, table)) == pq.read_metadata(path).num_rows
        assert pq.read_schema(path).metadata is None or b"pandas" not in pq.read_schema(path).metadata
    # deleted: row 5 (5 % 5 == 0); the SAC~ part keeps its categorical columns dictionary-encoded
    assert pq.read_table(staged / "output" / "deleted/part-00000.parquet").column("row_id").to_pylist() == [5]
    assert pa.types.is_dictionary(pq.read_schema(staged / "output" / "sac_released/part-00000.parquet").field("disease").type)
    assert not list((staged / "output").rglob("*.tmp"))


def test_equal_releases_give_equal_bytes(staged: Path) -> None:
    job = make_job(staged, 1)
    first = release_and_write_shard(read_staged_shard(job, 0), job, 0)
    again = release_and_write_shard(read_staged_shard(job, 0), job, 0)
    assert first == again


def test_run_staged_shard_gives_release_shard_todays_records(
    staged: Path, two_files: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    received: list[pd.DataFrame] = []

    def spy(records: pd.DataFrame, *args: object, **kwargs: object) -> sharding.ShardRelease:
        received.append(records)
        return shard_fakes.fake_release_shard(records, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(sharding, "release_shard", spy)
    stage_input(
        two_files / "b.csv",
        staged,
        quasi_identifiers=QUASI_IDENTIFIERS,
        sensitive_attributes=SENSITIVE_ATTRIBUTES,
        salt=SALT,
        shard_rows=1000,
        min_shard_rows=1,
    )
    run_staged_shard(make_job(staged, 1), 0)
    today = load_records(two_files / "b.csv", quasi_identifiers=QUASI_IDENTIFIERS, sensitive_attributes=SENSITIVE_ATTRIBUTES)
    pd.testing.assert_frame_equal(received[0], today.records)


def test_a_table_that_cannot_be_written_leaves_no_part_of_the_shard(staged: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sharding, "release_shard", shard_fakes._unwritable_release_shard)
    job = make_job(staged, 2)
    with pytest.raises((pa.ArrowInvalid, pa.ArrowTypeError)):
        release_and_write_shard(read_staged_shard(job, 0), job, 1)
    assert [p for p in (staged / "output").rglob("*") if p.is_file()] == []


def test_an_unstaged_shard_is_named(staged: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no staged records for shard 3"):
        run_staged_shard(make_job(staged, 4), 3)


def test_with_a_registry_key_the_shard_writes_every_records_fingerprint_and_local_row_id(staged: Path) -> None:
    """6 records, row 5 deleted by the stand-in (5 % 5 == 0), the others local rows 1..5 in input order: the
    fingerprints file holds all 6 (the home secret's fingerprints, made from the derived key only), row id 0 for the
    deleted one, and its summary entry names the file and the SHA-256 of the sorted fingerprints."""
    import dataclasses

    import numpy as np

    from pipeline.core.keyed import derive_hash_key, keyed_record_hashes
    from pipeline.core.series import REGISTRY_PURPOSE, record_fingerprints

    secret = bytes(range(32))
    job = dataclasses.replace(make_job(staged, 1), registry_hash_key=derive_hash_key(secret, REGISTRY_PURPOSE))
    records = read_staged_shard(job, 0)
    summary = release_and_write_shard(records, job, 0)
    assert list(summary["parts"]) == list(SHARD_TABLES)  # the registry's file is not a part of the release
    entry = summary["fingerprints"]
    assert entry["path"] == "fingerprints/part-00000.parquet" and entry["rows"] == 6
    written = pq.read_table(staged / "output" / entry["path"]).to_pandas()
    expected = record_fingerprints(records, [*QUASI_IDENTIFIERS, *SENSITIVE_ATTRIBUTES], secret)
    assert written["fingerprint"].to_numpy().tolist() == expected.tolist()
    assert entry["digest"] == hashlib.sha256(expected.astype("<u8").tobytes()).hexdigest()
    of_row = dict(
        zip(
            records["row_id"].tolist(),
            keyed_record_hashes(records, [*QUASI_IDENTIFIERS, *SENSITIVE_ATTRIBUTES], secret, REGISTRY_PURPOSE).tolist(),
            strict=True,
        )
    )
    # read: a.csv rows 1 and 3 (row 2 misses a sensitive value), b.csv rows 4..7; the stand-in deletes row 5 and
    # numbers the others 1..5 in input order
    local = {1: 1, 3: 2, 4: 3, 5: 0, 6: 4, 7: 5}
    assert sorted(of_row) == sorted(local)
    expected_pairs = sorted((of_row[row], local[row]) for row in local)
    assert sorted(zip(written["fingerprint"].tolist(), written["row_id"].tolist(), strict=True)) == expected_pairs
    assert written["row_id"].dtype == np.int64
