"""Release series for sharded releases (issue 17 with issue 12's registry): the workers' record fingerprints, the
out-of-core comparison with the registry (DuckDB) and the streamed registry entry.

Expected counts are written out by hand from the toy records, never computed by the code under test; the in-memory
functions (``record_fingerprints``, ``check_series``' message, ``write_registry_entry``'s schema) are the reference the
sharded ones must equal."""

from __future__ import annotations

import stat
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.core.keyed import derive_hash_key, keyed_record_hashes, record_hashes_with_key
from pipeline.core.series import REGISTRY_PURPOSE, record_fingerprints
from pipeline.core.sharding import GlobalModel, ShardParameters
from pipeline.engines.base import ShardJob
from pipeline.engines.worker import record_fingerprints_of_shard
from pipeline.release.registry import (
    SHARDED_PINS_NOTE,
    RecompositionRefused,
    ShardFingerprints,
    check_series,
    check_sharded_series,
    read_registry,
    registry_entries,
    write_registry_entry,
    write_sharded_registry_entry,
)

SECRET = bytes(range(32))
COLUMNS = ["q", "s"]
#: four records, two of them equal (a multiset), and one more record for "other records"
RECORDS = pd.DataFrame({"q": ["a", "b", "c", "c"], "s": ["x", "y", "z", "z"]})
EXTRA = pd.DataFrame({"q": ["e"], "s": ["v"]})
CONFIG = {"model": "mixed", "ell": 3}


def _job(tmp_path: Path) -> ShardJob:
    model = GlobalModel(rules=pd.DataFrame(), s_max=None, strong_value_occurrences={}, clusters=[], n_records=0)
    parameters = ShardParameters(quasi_identifiers=("q",), sensitive_attributes=("s",), ell=2, seed=0)
    return ShardJob(
        staging_dir=tmp_path,
        model=model,
        parameters=parameters,
        secret=None,
        n_shards=2,
        registry_hash_key=derive_hash_key(SECRET, REGISTRY_PURPOSE),
    )


def _fingerprint_files(directory: Path, *shards: pd.DataFrame) -> list[Path]:
    """One fingerprint file per shard (row ids all 0: not needed for the comparison)."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for number, records in enumerate(shards):
        path = directory / f"part-{number:05d}.parquet"
        fingerprints = record_fingerprints(records, COLUMNS, SECRET)
        pq.write_table(pa.table({"fingerprint": fingerprints, "row_id": np.zeros(len(fingerprints), np.int64)}), path)
        paths.append(path)
    return paths


def test_a_derived_key_gives_the_home_secrets_hashes_without_the_secret():
    mixed = pd.DataFrame({"q": pd.Categorical(["10", "9", "10"]), "s": ["x", "y", "x"], "n": pd.Categorical([1, 2, 1])})
    for columns in (["q", "s"], ["q", "s", "n"]):
        expected = keyed_record_hashes(mixed, columns, SECRET, REGISTRY_PURPOSE)
        assert np.array_equal(record_hashes_with_key(mixed, columns, derive_hash_key(SECRET, REGISTRY_PURPOSE)), expected)
    with pytest.raises(ValueError, match="16 bytes"):
        record_hashes_with_key(mixed, ["q"], "short")


def test_a_shards_fingerprints_equal_the_in_memory_ones_with_local_row_ids(tmp_path):
    # a shard holds its records as categoricals over its own values; the memory job holds text: equal fingerprints
    records = pd.DataFrame({"row_id": [11, 12, 13, 14], "q": ["a", "b", "c", "c"], "s": ["x", "y", "z", "z"]})
    shard = records.assign(q=records["q"].astype("category"), s=records["s"].astype("category"))
    # input rows 11 and 13 published as local rows 2 and 1; 12 and 14 deleted
    row_map = pd.DataFrame({"source_row_id": [13, 11], "row_id": [1, 2]})
    written = record_fingerprints_of_shard(shard, row_map, _job(tmp_path))
    assert written["fingerprint"].dtype == np.uint64 and written["row_id"].dtype == np.int64
    assert np.array_equal(written["fingerprint"].to_numpy(), record_fingerprints(records, COLUMNS, SECRET))  # sorted
    by_record = dict(zip(keyed_record_hashes(records, COLUMNS, SECRET, REGISTRY_PURPOSE), records["row_id"], strict=True))
    pairs = sorted((by_record[f], r) for f, r in zip(written["fingerprint"], written["row_id"], strict=True))
    assert [r for _, r in pairs] == [2, 0, 1, 0] or [r for _, r in pairs] == [2, 0, 0, 1]  # the two c/z records are equal
    assert sorted(written["row_id"].tolist()) == [0, 0, 1, 2]
    with pytest.raises(ValueError, match="registry_hash_key"):
        record_fingerprints_of_shard(shard, row_map, ShardJob(tmp_path, _job(tmp_path).model, _job(tmp_path).parameters, None, 2))


def test_the_out_of_core_comparison_decides_as_the_in_memory_one(tmp_path):
    home = tmp_path / "home"
    write_registry_entry(home, "r1", record_fingerprints(RECORDS, COLUMNS, SECRET), CONFIG)
    # the same records in two shards, same configuration: the same release, nothing found
    same = _fingerprint_files(tmp_path / "same", RECORDS.iloc[:2], RECORDS.iloc[2:])
    assert check_sharded_series(home, same, CONFIG, allow_recomposition=False) == []
    # unrelated records: nothing shared
    other = _fingerprint_files(tmp_path / "other", EXTRA)
    assert check_sharded_series(home, other, {"model": "mixed", "ell": 2}, allow_recomposition=False) == []
    # another ℓ: 4 shared (the duplicate counted twice), refused naming r1; allowed, recorded
    with pytest.raises(RecompositionRefused, match=r"release r1 holds 4 of the same records with other settings \(ell\)"):
        check_sharded_series(home, same, {"model": "mixed", "ell": 2}, allow_recomposition=False)
    assert check_sharded_series(home, same, {"model": "mixed", "ell": 2}, allow_recomposition=True) == [
        {
            "release_id": "r1",
            "n_shared_records": 4,
            "n_only_new": 0,
            "n_only_earlier": 0,
            "changed_settings": ["ell"],
            "same_input_file": False,  # neither configuration names its input
        }
    ]
    # a subset (one of the duplicates gone): 3 shared, 1 no longer present; an appended record: 4 shared, 1 new
    subset = _fingerprint_files(tmp_path / "subset", RECORDS.iloc[:1], RECORDS.iloc[1:3])
    (found,) = check_sharded_series(home, subset, CONFIG, allow_recomposition=True)
    assert (found["n_shared_records"], found["n_only_new"], found["n_only_earlier"]) == (3, 0, 1)
    appended = _fingerprint_files(tmp_path / "appended", RECORDS, EXTRA)
    (found,) = check_sharded_series(home, appended, CONFIG, allow_recomposition=True)
    assert (found["n_shared_records"], found["n_only_new"], found["n_only_earlier"]) == (4, 1, 0)
    # S > 1: n_shards makes it another release than the in-memory one of the same records
    (found,) = check_sharded_series(home, same, {**CONFIG, "n_shards": 2}, allow_recomposition=True)
    assert found["changed_settings"] == ["n_shards"]
    # a comparison is never refused
    assert len(check_sharded_series(home, same, {"model": "mixed", "ell": 2}, allow_recomposition=False, comparison=True)) == 1


def test_the_refusal_is_the_in_memory_one_without_the_measured_pins(tmp_path):
    home = tmp_path / "home"
    write_registry_entry(home, "r1", record_fingerprints(RECORDS, COLUMNS, SECRET), CONFIG)
    with pytest.raises(RecompositionRefused) as memory:
        check_series(home, SECRET, RECORDS, COLUMNS, {"model": "mixed", "ell": 2}, allow_recomposition=False)
    files = _fingerprint_files(tmp_path / "parts", RECORDS)
    with pytest.raises(RecompositionRefused) as sharded:
        check_sharded_series(home, files, {"model": "mixed", "ell": 2}, allow_recomposition=False)
    assert "Measured" not in str(memory.value)  # no releases_dir given: no estimate
    assert str(sharded.value) == str(memory.value).replace(").", ")." + SHARDED_PINS_NOTE, 1)


def test_comparisons_in_the_registry_refuse_nothing(tmp_path):
    home = tmp_path / "home"
    write_registry_entry(home, "c1", record_fingerprints(RECORDS, COLUMNS, SECRET), CONFIG, area="comparisons")
    assert [entry[0] for entry in registry_entries(home)] == ["c1"]
    assert registry_entries(home, shared_only=True) == []
    files = _fingerprint_files(tmp_path / "parts", RECORDS)
    assert check_sharded_series(home, files, {"model": "mixed", "ell": 2}, allow_recomposition=False) == []


def test_the_streamed_entry_has_the_in_memory_schema_and_the_published_row_ids(tmp_path):
    home = tmp_path / "home"
    fingerprints = np.array([5, 3, 9, 7, 1, 2], dtype=np.uint64)
    # shard 0: 2 SAC~ rows and 1 attribute-table row (local ids 1, 2 | 3), one deleted record;
    # shard 1: 2 SAC~ rows (local 1, 2), no attribute-table row. Published: SAC~ 1..4, attribute table 5.
    # shard 0's attribute-table offset: total SAC~ 4 + 0 earlier rows - its own 2 = 2; shard 1's: 4 + 1 - 2 = 3
    directory = tmp_path / "fingerprints"
    directory.mkdir()
    locals_ = [(fingerprints[:4], [1, 2, 3, 0]), (fingerprints[4:], [2, 1])]
    shards = []
    for number, (values, local) in enumerate(locals_):
        path = directory / f"part-{number:05d}.parquet"
        pq.write_table(pa.table({"fingerprint": pa.array(values), "row_id": pa.array(np.array(local, np.int64))}), path)
        shards.append(ShardFingerprints(path, n_sac_released=2, sac_row_id=2 * number, attribute_table_row_id=2 + number))
    entry = write_sharded_registry_entry(home, "s1", shards, CONFIG, area="releases")
    reference = write_registry_entry(home, "m1", fingerprints, CONFIG, row_ids=np.array([1, 2, 5, 0, 4, 3]))
    assert stat.S_IMODE(entry.stat().st_mode) == 0o600 and not list((home / "registry").glob(".*"))
    written, expected = pq.read_table(entry), pq.read_table(reference)
    assert written.schema.equals(expected.schema, check_metadata=True)
    pairs = sorted(zip(written.column("fingerprint").to_pylist(), written.column("row_id").to_pylist(), strict=True))
    assert pairs == [(1, 4), (2, 3), (3, 2), (5, 1), (7, 0), (9, 5)]
    assert pairs == sorted(zip(expected.column("fingerprint").to_pylist(), expected.column("row_id").to_pylist(), strict=True))
    (_, _, configuration, n_records), _ = registry_entries(home)
    assert (configuration, n_records) == (CONFIG, 6)
    assert [release_id for release_id, _, _ in read_registry(home)] == ["m1", "s1"]


def test_the_in_memory_entry_keeps_each_record_with_its_row_id(tmp_path):
    """``check_series`` returns the fingerprints in the records' order, aligned with their release row ids, and the
    entry pairs them so (a fingerprint with the row id of the record it is the fingerprint of)."""
    home = tmp_path / "home"
    records = pd.DataFrame({"q": ["a", "b", "c", "d"], "s": ["x", "y", "z", "w"]})
    row_ids = np.array([0, 3, 1, 2], dtype=np.int64)
    fingerprints, found = check_series(home, SECRET, records, COLUMNS, CONFIG, allow_recomposition=False)
    assert found == []
    write_registry_entry(home, "m1", fingerprints, CONFIG, row_ids=row_ids)
    entry = pq.read_table(home / "registry" / "m1.parquet").to_pandas()
    assert entry["fingerprint"].is_monotonic_increasing
    by_fingerprint = dict(zip(entry["fingerprint"], entry["row_id"], strict=True))
    for position in range(4):
        one = record_fingerprints(records.iloc[[position]], COLUMNS, SECRET)[0]
        assert by_fingerprint[one] == row_ids[position]


def test_an_entry_written_before_the_input_digest_was_recorded_takes_it_from_its_releases_manifest(tmp_path):
    import json

    from pipeline.core.series import INPUT_KEY
    from pipeline.release.registry import registry_entries, write_registry_entry

    fingerprints = np.arange(3, dtype=np.uint64)
    write_registry_entry(tmp_path, "old-shared", fingerprints, {"model": "mixed"})  # no input digest in the entry
    write_registry_entry(tmp_path, "old-comparison", fingerprints, {"model": "rating"}, area="comparisons")
    write_registry_entry(tmp_path, "orphan", fingerprints, {"model": "mixed"})  # its release directory is gone
    write_registry_entry(tmp_path, "new", fingerprints, {"model": "mixed", INPUT_KEY: "in-the-entry"})
    for area, release_id, digest in (("releases", "old-shared", "from-manifest"), ("comparisons", "old-comparison", "cmp")):
        (tmp_path / area / release_id).mkdir(parents=True)
        (tmp_path / area / release_id / "manifest.json").write_text(json.dumps({INPUT_KEY: digest}))
    digests = {release_id: configuration.get(INPUT_KEY) for release_id, _, configuration, _ in registry_entries(tmp_path)}
    assert digests == {"old-shared": "from-manifest", "old-comparison": "cmp", "orphan": None, "new": "in-the-entry"}
