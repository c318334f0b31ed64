"""The input manifest, the shard-partitioned staging and the SQL twin of the shard key (pipeline/engines/staging.py)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.engines.staging import (
    input_files,
    sensitive_tuple_counts,
    shard_key_sql,
    stage_input,
    staged_shard_files,
    staging_dir_for,
)
from pipeline.engines.worker import read_staged_shard
from pipeline.io.loading import InputError, load_records
from tests.engines.shard_fakes import QUASI_IDENTIFIERS, SENSITIVE_ATTRIBUTES
from tests.conftest import ADULT_COLUMNS
from tests.engines.shard_fakes import MASK64, SALT, make_job, splitmix64_reference


def _stage(paths: object, staging_dir: Path, *, shard_rows: int = 1000) -> object:
    return stage_input(
        paths,  # type: ignore[arg-type]
        staging_dir,
        quasi_identifiers=QUASI_IDENTIFIERS,
        sensitive_attributes=SENSITIVE_ATTRIBUTES,
        salt=SALT,
        shard_rows=shard_rows,
        min_shard_rows=1,
    )


def test_reference_splitmix64_gives_the_published_sequence() -> None:
    # SplitMix64 seeded with 0 (Vigna's splitmix64.c): its outputs are the finaliser of 0, γ, 2γ
    gamma = 0x9E3779B97F4A7C15
    assert [splitmix64_reference(k * gamma & MASK64) for k in range(3)] == [
        0xE220A8397B1DCDAF,
        0x6E789E6AA1B965F4,
        0x06C45D188009454F,
    ]


@pytest.mark.parametrize("n_shards", [1, 2, 3, 7, 1_000_003, 2**62, 2**63 - 1])
def test_sql_shard_key_agrees_with_splitmix64_on_edge_values(n_shards: int) -> None:
    # (row_id + salt) mod 2**64 hits 0, 1, 2**63 - 1, 2**63, 2**64 - 1 and wraps past 2**64
    cases = [
        (0, 0),
        (1, MASK64),  # 1 + (2**64 - 1) wraps to 0
        (5, 2**63 - 5),  # 2**63
        (0, MASK64),  # 2**64 - 1
        (2**63 - 1, MASK64),  # wraps to 2**63 - 2
        (2**63 - 1, 0),
        (12345, SALT),
    ]
    with duckdb.connect() as connection:
        for row_id, salt in cases:
            expression = shard_key_sql("row_id", salt=salt, n_shards=n_shards)
            (got,) = connection.execute(f"SELECT {expression} FROM (SELECT CAST(? AS BIGINT) AS row_id)", [row_id]).fetchone()
            assert got == splitmix64_reference((row_id + salt) & MASK64) % n_shards, (row_id, salt)


def test_sql_shard_key_refuses_bad_arguments() -> None:
    with pytest.raises(ValueError, match="salt"):
        shard_key_sql("row_id", salt=2**64, n_shards=2)
    with pytest.raises(ValueError, match="n_shards"):
        shard_key_sql("row_id", salt=0, n_shards=0)


def test_input_files_sorted_by_name_of_one_format(two_files: Path, tmp_path: Path) -> None:
    files, fmt = input_files(two_files)
    assert [p.name for p in files] == ["a.csv", "b.csv"] and fmt == "csv"
    (two_files / "c.parquet").write_bytes(b"PAR1")
    with pytest.raises(InputError, match="more than one format"):
        input_files(two_files)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(InputError, match="holds no CSV or Parquet file"):
        input_files(empty)
    with pytest.raises(InputError, match="more than once"):
        input_files([two_files / "b.csv", two_files / "b.csv"])


@pytest.mark.usefixtures("fake_key")
def test_one_file_stages_exactly_load_records(two_files: Path, tmp_path: Path) -> None:
    path = two_files / "b.csv"
    staged = _stage(path, tmp_path / "run")
    expected = load_records(path, quasi_identifiers=QUASI_IDENTIFIERS, sensitive_attributes=SENSITIVE_ATTRIBUTES).records
    assert staged.n_shards == 1 and staged.shard_records == (4,)  # type: ignore[attr-defined]
    assert staged.input_sha256 == hashlib.sha256(path.read_bytes()).hexdigest()  # type: ignore[attr-defined]
    pd.testing.assert_frame_equal(read_staged_shard(make_job(tmp_path / "run", 1), 0), expected)


@pytest.mark.usefixtures("fake_key")
def test_several_files_row_ids_manifest_and_look_alikes_across_files(two_files: Path, tmp_path: Path) -> None:
    staged = _stage(two_files, tmp_path / "run")
    manifest = staged.manifest()  # type: ignore[attr-defined]
    assert [f["name"] for f in manifest["files"]] == ["a.csv", "b.csv"]
    assert [f["sha256"] for f in manifest["files"]] == [
        hashlib.sha256((two_files / name).read_bytes()).hexdigest() for name in ("a.csv", "b.csv")
    ]
    assert [f["first_row_id"] for f in manifest["files"]] == [1, 4]
    assert (manifest["n_input"], manifest["n_dropped_missing"], manifest["n_records"]) == (7, 1, 6)
    assert manifest["n_missing_quasi_identifier"] == 1
    assert manifest["dropped_missing_by_attribute"] == {"disease": 1}
    assert (
        manifest["input_sha256"]
        == hashlib.sha256("".join(f"{f['name']}\t{f['sha256']}\n" for f in manifest["files"]).encode()).hexdigest()
    )
    records = read_staged_shard(make_job(tmp_path / "run", 1), 0)
    # row 2 of a.csv is dropped (missing disease); b.csv's rows are 4..7
    assert records["row_id"].tolist() == [1, 3, 4, 5, 6, 7]
    assert records["zip"].tolist() == ["100", "?", "100", "102", "101", "100"]
    # 'HIV' (1 record, a.csv) and 'hiv' (2 records, b.csv) are one value, spelled as the most records spell it
    assert records["disease"].tolist() == ["flu", "hiv", "flu", "hiv", "hiv", "cold"]
    assert list(records["disease"].cat.categories) == ["cold", "flu", "hiv"]
    assert manifest["look_alike_values"] == {"disease": {"n_values_merged": 1, "n_records_respelled": 1}}


@pytest.mark.usefixtures("fake_key")
def test_shards_follow_the_key_and_keep_row_order(two_files: Path, tmp_path: Path) -> None:
    staged = _stage(two_files, tmp_path / "run", shard_rows=2)
    assert staged.n_shards == 3  # type: ignore[attr-defined]
    seen: list[int] = []
    for shard in range(3):
        parts = staged_shard_files(tmp_path / "run", shard)
        for part in parts:
            schema = pq.read_schema(part)
            assert schema.field("row_id").type == pa.int64()
            assert schema.names == ["row_id", *QUASI_IDENTIFIERS, *SENSITIVE_ATTRIBUTES]  # no shard column
        row_ids = read_staged_shard(make_job(tmp_path / "run", 3), shard)["row_id"].tolist() if parts else []
        assert row_ids == sorted(row_ids)
        assert all(splitmix64_reference((r + SALT) & MASK64) % 3 == shard for r in row_ids)
        assert len(row_ids) == staged.shard_records[shard]  # type: ignore[attr-defined]
        seen += row_ids
    assert sorted(seen) == [1, 3, 4, 5, 6, 7]
    # the DuckDB twin of the key puts every staged record in the shard it was staged in
    pattern = str(tmp_path / "run" / "input" / "shard=*" / "*.parquet")
    with duckdb.connect() as connection:
        mismatched = connection.execute(
            f"SELECT count(*) FROM read_parquet('{pattern}', hive_partitioning = true) "
            f"WHERE CAST(shard AS BIGINT) <> {shard_key_sql('row_id', salt=SALT, n_shards=3)}"
        ).fetchone()
    assert mismatched == (0,)


@pytest.mark.usefixtures("fake_key")
def test_restaging_replaces_the_previous_input(two_files: Path, tmp_path: Path) -> None:
    _stage(two_files, tmp_path / "run", shard_rows=2)
    _stage(two_files / "a.csv", tmp_path / "run")
    assert sorted(p.name for p in (tmp_path / "run" / "input").iterdir()) == ["shard=0"]
    assert read_staged_shard(make_job(tmp_path / "run", 1), 0)["row_id"].tolist() == [1, 3]


@pytest.mark.usefixtures("fake_key")
def test_sensitive_tuple_counts_over_all_shards(two_files: Path, tmp_path: Path) -> None:
    _stage(two_files, tmp_path / "run", shard_rows=2)
    counts = sensitive_tuple_counts(tmp_path / "run", SENSITIVE_ATTRIBUTES)
    expected = pd.DataFrame(
        {
            "disease": ["cold", "flu", "flu", "hiv", "hiv"],
            "job": ["clerk", "cook", "nurse", "cook", "nurse"],
            "n_records": np.array([1, 1, 1, 1, 2], dtype=np.int64),
        }
    )
    pd.testing.assert_frame_equal(counts, expected)
    assert counts["disease"].dtype == object


def test_sensitive_tuple_counts_without_staging(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="stage the input first"):
        sensitive_tuple_counts(tmp_path, SENSITIVE_ATTRIBUTES)


@pytest.mark.usefixtures("fake_key")
def test_parquet_input_files(two_files: Path, tmp_path: Path) -> None:
    parquet_dir = tmp_path / "parquet"
    parquet_dir.mkdir()
    for name in ("a", "b"):
        frame = pd.read_csv(two_files / f"{name}.csv", dtype=str, keep_default_na=False)
        frame.to_parquet(parquet_dir / f"{name}.parquet", index=False)
    staged = _stage(parquet_dir, tmp_path / "run")
    assert staged.input_format == "parquet" and staged.n_records == 6  # type: ignore[attr-defined]
    assert read_staged_shard(make_job(tmp_path / "run", 1), 0)["row_id"].tolist() == [1, 3, 4, 5, 6, 7]


ADULT_QUASI_IDENTIFIERS = ("sex", "race", "marital-status", "native-country", "workclass")
ADULT_SENSITIVE_ATTRIBUTES = ("education", "occupation", "age", "relationship")


@pytest.mark.usefixtures("fake_key")
@pytest.mark.parametrize("shard_rows", [40_000, 11_000])
def test_adult_staged_in_shards_is_todays_records(adult_records: pd.DataFrame, tmp_path: Path, shard_rows: int) -> None:
    adult = Path(__file__).resolve().parents[2] / "data" / "adult" / "adult.data"
    staged = stage_input(
        adult,
        tmp_path / "run",
        quasi_identifiers=ADULT_QUASI_IDENTIFIERS,
        sensitive_attributes=ADULT_SENSITIVE_ATTRIBUTES,
        salt=SALT,
        shard_rows=shard_rows,
        min_shard_rows=1,
        csv_header=False,
        column_names=ADULT_COLUMNS,
    )
    assert staged.n_records == 30718 and sum(staged.shard_records) == 30718
    for part in staged_shard_files(tmp_path / "run", 0):  # the text columns are dictionary-encoded on disk
        metadata = pq.read_metadata(part)
        assert all(any("DICTIONARY" in e for e in metadata.row_group(0).column(c).encodings) for c in range(1, 10))
    job = make_job(tmp_path / "run", staged.n_shards, ADULT_QUASI_IDENTIFIERS, ADULT_SENSITIVE_ATTRIBUTES)
    shards = [read_staged_shard(job, s) for s in range(staged.n_shards)]
    if staged.n_shards == 1:
        pd.testing.assert_frame_equal(shards[0], adult_records)
    else:
        assert staged.n_shards == 3
        united = pd.concat([s.astype({c: object for c in s.columns[1:]}) for s in shards]).sort_values("row_id")
        expected = adult_records.astype({c: object for c in adult_records.columns[1:]})
        pd.testing.assert_frame_equal(united.reset_index(drop=True), expected)


def test_staging_dir_for_a_run(tmp_path: Path) -> None:
    assert staging_dir_for(tmp_path, "abc-123") == tmp_path / "private" / "shards" / "abc-123"
    for bad in ("", "..", "a/b"):
        with pytest.raises(ValueError, match="one directory name"):
            staging_dir_for(tmp_path, bad)


def test_sql_shard_key_agrees_with_splitmix64_on_a_run_of_row_ids() -> None:
    salt = 0xF00DFACE12345678
    with duckdb.connect() as connection:
        got = connection.execute(
            f"SELECT {shard_key_sql('row_id', salt=salt, n_shards=7)} FROM range(1, 20001) t(row_id) ORDER BY row_id"
        ).fetchall()
    assert [g for (g,) in got] == [splitmix64_reference((r + salt) & MASK64) % 7 for r in range(1, 20001)]
