"""The DuckDB streaming staging (pipeline/engines/staging.py stage_input) against the in-memory reader it replaces.

The reference is :func:`pipeline.io.loading.load_records`, file by file, row ids offset by the rows of the files before
(today's ``raw_records``): the staged records, read back with ``read_staged_shard``, must be the same frame, at S = 1
and S = 3, with the same counts; bad input must raise the same error class with the same message.
"""

from __future__ import annotations

import gzip
import random
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.engines.staging import stage_input
from pipeline.engines.worker import read_staged_shard
from pipeline.io.loading import InputError, load_records
from tests.engines.shard_fakes import SALT, make_job

QUASI = ("sex", "zip")
SENSITIVE = ("disease", "job")
#: spellings a reader takes for one value: case, a ligature (NFKC), a zero-width space, surrounding white space
DISEASES = [
    "flu",
    "Flu",
    "FLU",
    "ﬂu",
    "flu\u200b",
    " flu ",
    "hiv",
    "HIV",
    "cold",
    "\u00a0cold",
    "asthma",
    "",
    "NULL",
    "?",
    "null",
]
JOBS = ["nurse", "Nurse", "cook", "clerk", "Clerk", "\tcook", "", "?", "pilot"]
ZIPS = ["100", "101", "102", " 102", "", "?", "NULL", "1O2"]
SEXES = ["F", "M", "f", "?", ""]


def _stage(paths: Any, staging_dir: Path, *, shard_rows: int, **options: Any) -> Any:
    return stage_input(
        paths,
        staging_dir,
        quasi_identifiers=QUASI,
        sensitive_attributes=SENSITIVE,
        salt=SALT,
        shard_rows=shard_rows,
        min_shard_rows=1,
        **options,
    )


def _expected(files: list[Path], **options: Any) -> tuple[pd.DataFrame, list[Any]]:
    """load_records file by file, row ids offset: today's records of the files in order."""
    frames, loaded_all, offset = [], [], 0
    for path in files:
        loaded = load_records(path, quasi_identifiers=QUASI, sensitive_attributes=SENSITIVE, **options)
        records = loaded.records.copy()
        records["row_id"] += offset
        offset += loaded.n_input
        frames.append(records)
        loaded_all.append(loaded)
    if len(frames) == 1:
        return frames[0], loaded_all
    united = pd.concat([f.astype({c: object for c in f.columns[1:]}) for f in frames], ignore_index=True)
    return united, loaded_all


def _staged_union(staging_dir: Path, n_shards: int) -> pd.DataFrame:
    job = make_job(staging_dir, n_shards, QUASI, SENSITIVE)
    shards = [read_staged_shard(job, s) for s in range(n_shards)]
    if n_shards == 1:
        return shards[0]
    united = pd.concat([s.astype({c: object for c in s.columns[1:]}) for s in shards]).sort_values("row_id")
    return united.reset_index(drop=True)


def _random_rows(seed: int, n: int) -> list[list[str]]:
    generator = random.Random(seed)
    return [
        [generator.choice(SEXES), generator.choice(ZIPS), generator.choice(DISEASES), generator.choice(JOBS)] for _ in range(n)
    ]


def _write_csv(path: Path, rows: list[list[str]], *, header: bool = True) -> Path:
    lines = ["sex,zip,disease,job"] if header else []
    lines += [",".join(f'"{v}"' if ("," in v or v.strip() != v) else v for v in row) for row in rows]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _assert_same_counts(staged: Any, loaded_all: list[Any]) -> None:
    assert staged.n_input == sum(x.n_input for x in loaded_all)
    assert staged.n_dropped_missing == sum(x.n_dropped_missing for x in loaded_all)
    assert staged.n_records == sum(len(x.records) for x in loaded_all)
    assert staged.n_missing_quasi_identifier == sum(x.n_missing_quasi_identifier for x in loaded_all)
    assert [f.sha256 for f in staged.files] == [x.input_sha256 for x in loaded_all]
    dropped: dict[str, int] = {}
    missing: dict[str, int] = {}
    for x in loaded_all:
        for key, value in x.dropped_missing_by_attribute.items():
            dropped[key] = dropped.get(key, 0) + value
        for key, value in x.missing_quasi_identifier_by_column.items():
            missing[key] = missing.get(key, 0) + value
    assert staged.dropped_missing_by_attribute == dropped
    assert staged.missing_quasi_identifier_by_column == missing


@pytest.mark.usefixtures("fake_key")
@pytest.mark.parametrize("shard_rows", [100_000, 450])
def test_one_csv_with_look_alikes_and_missing_values_is_load_records(tmp_path: Path, shard_rows: int) -> None:
    path = _write_csv(tmp_path / "records.csv", _random_rows(1, 2000))
    expected, loaded_all = _expected([path])
    # the fixture exercises what it is meant to: look-alikes merged, records dropped, '?' kept
    assert loaded_all[0].look_alike_values["disease"]["n_values_merged"] >= 4
    assert loaded_all[0].n_dropped_missing > 0 and loaded_all[0].n_missing_quasi_identifier > 0
    staged = _stage(path, tmp_path / "run", shard_rows=shard_rows)
    assert staged.n_shards == (1 if shard_rows == 100_000 else 3)
    pd.testing.assert_frame_equal(
        _staged_union(tmp_path / "run", staged.n_shards),
        expected.astype({c: object for c in expected.columns[1:]}) if staged.n_shards > 1 else expected,
    )
    _assert_same_counts(staged, loaded_all)
    assert staged.look_alike_values == loaded_all[0].look_alike_values
    assert sum(staged.shard_records) == staged.n_records


@pytest.mark.usefixtures("fake_key")
def test_options_without_header_other_tokens_and_no_stripping(tmp_path: Path) -> None:
    rows = _random_rows(2, 600)
    path = tmp_path / "records.txt"
    path.write_text("\n".join(";".join(r) for r in rows) + "\n", encoding="utf-8")
    options: dict[str, Any] = {
        "csv_header": False,
        "column_names": ["sex", "zip", "disease", "job"],
        "delimiter": ";",
        "strip_whitespace": False,
        "missing_value_tokens": ["NULL"],  # '' and '?' are values here; 'null' is NULL's look-alike
    }
    expected, loaded_all = _expected([path], **options)
    staged = _stage(path, tmp_path / "run", shard_rows=100_000, **options)
    pd.testing.assert_frame_equal(_staged_union(tmp_path / "run", 1), expected)
    _assert_same_counts(staged, loaded_all)
    assert staged.look_alike_values == loaded_all[0].look_alike_values


@pytest.mark.usefixtures("fake_key")
def test_gzip_csv(tmp_path: Path) -> None:
    plain = _write_csv(tmp_path / "plain.csv", _random_rows(3, 300))
    path = tmp_path / "records.csv.gz"
    path.write_bytes(gzip.compress(plain.read_bytes()))
    expected, loaded_all = _expected([path])
    staged = _stage(path, tmp_path / "run", shard_rows=100_000)
    pd.testing.assert_frame_equal(_staged_union(tmp_path / "run", 1), expected)
    _assert_same_counts(staged, loaded_all)


@pytest.mark.usefixtures("fake_key")
@pytest.mark.parametrize("shard_rows", [100_000, 300])
def test_parquet_with_numbers_nulls_and_nan_is_load_records(tmp_path: Path, shard_rows: int) -> None:
    generator = np.random.default_rng(4)
    n = 800
    zips = pd.array(generator.integers(100, 104, n), dtype="Int64")
    zips[generator.random(n) < 0.1] = pd.NA
    disease = generator.choice(np.asarray(DISEASES, dtype=object), n)
    disease[generator.random(n) < 0.05] = None
    job = generator.choice([1.5, 2.0, 3.25, np.nan], n)
    table = pa.table(
        {
            "extra": pa.array(np.arange(n)),
            "sex": pa.array(generator.choice(np.asarray(SEXES, dtype=object), n).tolist()),
            "zip": pa.array(zips.to_numpy(dtype=object, na_value=None).tolist(), type=pa.int64()),
            "disease": pa.array(disease.tolist(), type=pa.string()),
            "job": pa.array(job),
        }
    )
    path = tmp_path / "records.parquet"
    pq.write_table(table, path, row_group_size=128)
    expected, loaded_all = _expected([path])
    assert loaded_all[0].dropped_missing_by_attribute["job"] > 0  # NaN is missing
    staged = _stage(path, tmp_path / "run", shard_rows=shard_rows)
    got = _staged_union(tmp_path / "run", staged.n_shards)
    if staged.n_shards > 1:
        expected = expected.astype({c: object for c in expected.columns[1:]})
    pd.testing.assert_frame_equal(got, expected)
    _assert_same_counts(staged, loaded_all)


@pytest.mark.usefixtures("fake_key")
@pytest.mark.parametrize("shard_rows", [100_000, 500])
def test_several_files_are_load_records_file_by_file(tmp_path: Path, shard_rows: int) -> None:
    delivery = tmp_path / "delivery"
    delivery.mkdir()
    # no look-alike spelling here: per-file and whole-input merging agree, so load_records is the reference
    pool = {
        "sex": ["F", "M", "?"],
        "zip": ["100", " 101", "", "NULL"],
        "disease": ["flu", "hiv", "", "cold"],
        "job": ["nurse", "cook", "?"],
    }
    generator = random.Random(5)
    sizes = {"c.csv": 400, "a.csv": 350, "b.csv": 1}  # read in name order a, b, c
    for name, size in sizes.items():
        rows = [[generator.choice(pool[c]) for c in ("sex", "zip", "disease", "job")] for _ in range(size)]
        if name == "b.csv":
            rows = [["M", "100", "flu", "cook"]]
        _write_csv(delivery / name, rows)
    files = [delivery / n for n in ("a.csv", "b.csv", "c.csv")]
    expected, loaded_all = _expected(files)
    staged = _stage(delivery, tmp_path / "run", shard_rows=shard_rows)
    assert [f.first_row_id for f in staged.files] == [1, 351, 352]
    got = _staged_union(tmp_path / "run", staged.n_shards)
    pd.testing.assert_frame_equal(got.astype({c: object for c in got.columns[1:]}), expected)
    _assert_same_counts(staged, loaded_all)
    names = sorted(p.name for p in (tmp_path / "run" / "input").iterdir())
    assert names == [f"shard={s}" for s in range(staged.n_shards)]  # no raw copy or spill file is left


@pytest.mark.usefixtures("fake_key")
def test_look_alikes_merged_by_the_records_of_all_files(tmp_path: Path) -> None:
    delivery = tmp_path / "delivery"
    delivery.mkdir()
    # a.csv alone spells it 'HIV' (2 of 3); the whole input spells it 'hiv' (3 of 5): the whole input decides
    _write_csv(delivery / "a.csv", [["F", "100", "HIV", "nurse"], ["M", "101", "HIV", "cook"], ["F", "102", "hiv", "cook"]])
    _write_csv(delivery / "b.csv", [["M", "100", "hiv", "nurse"], ["F", "101", "hiv", "cook"], ["M", "100", "flu", "cook"]])
    staged = _stage(delivery, tmp_path / "run", shard_rows=100_000)
    records = _staged_union(tmp_path / "run", 1)
    assert records["disease"].tolist() == ["hiv"] * 5 + ["flu"]
    assert staged.look_alike_values == {"disease": {"n_values_merged": 1, "n_records_respelled": 2}}


@pytest.mark.usefixtures("fake_key")
def test_csv_row_ids_follow_the_file_order_across_parallel_chunks(tmp_path: Path) -> None:
    # 300,000 lines (≈ 30 MB: several chunks of DuckDB's parallel CSV reader); the zip column is the line's number,
    # written in a shuffled-looking but known order, so a row id in another order would pair with another number
    n = 300_000
    numbers = (np.arange(n, dtype=np.int64) * 7919) % n
    padding = "x" * 60
    path = tmp_path / "ordered.csv"
    with path.open("w") as handle:
        handle.write("sex,zip,disease,job,padding\n")
        for k in range(n):
            handle.write(f"F,{numbers[k]},d{k % 5},j{k % 3},{padding}\n")
    staged = _stage(path, tmp_path / "run", shard_rows=100_000)
    assert staged.n_shards == 3
    pattern = str(tmp_path / "run" / "input" / "shard=*" / "*.parquet")
    import duckdb

    with duckdb.connect() as connection:
        mismatched, total = connection.execute(
            f"SELECT count(*) FILTER (WHERE CAST(zip AS BIGINT) <> (row_id - 1) * 7919 % {n}), count(*) "
            f"FROM read_parquet('{pattern}')"
        ).fetchone()  # type: ignore[misc]
    assert (mismatched, total) == (0, n)


@pytest.mark.usefixtures("fake_key")
def test_parquet_row_ids_follow_the_file_order_across_row_groups(tmp_path: Path) -> None:
    # 300,000 rows in 150 row groups (read in parallel by DuckDB); zip is the row's number in a known order
    n = 300_000
    numbers = (np.arange(n, dtype=np.int64) * 7919) % n
    k = np.arange(n)
    table = pa.table(
        {
            "sex": pa.array(np.full(n, "F")),
            "zip": pa.array(numbers.astype(str)),
            "disease": pa.array(np.char.add("d", (k % 5).astype(str))),
            "job": pa.array(np.char.add("j", (k % 3).astype(str))),
        }
    )
    path = tmp_path / "ordered.parquet"
    pq.write_table(table, path, row_group_size=2_000)
    staged = _stage(path, tmp_path / "run", shard_rows=100_000)
    assert staged.n_shards == 3
    pattern = str(tmp_path / "run" / "input" / "shard=*" / "*.parquet")
    import duckdb

    with duckdb.connect() as connection:
        mismatched, total = connection.execute(
            f"SELECT count(*) FILTER (WHERE CAST(zip AS BIGINT) <> (row_id - 1) * 7919 % {n}), count(*) "
            f"FROM read_parquet('{pattern}')"
        ).fetchone()  # type: ignore[misc]
    assert (mismatched, total) == (0, n)


def _bad_inputs(tmp_path: Path) -> dict[str, tuple[Path, dict[str, Any]]]:
    good = "sex,zip,disease,job\nF,100,flu,nurse\nM,101,hiv,cook\n"
    cases: dict[str, tuple[str | bytes, dict[str, Any]]] = {
        "ragged.csv": (good + "F,100,flu\n", {}),
        "unclosed.csv": (good + 'F,100,"flu,nurse\n', {}),
        "absent_column.csv": ("sex,zipcode,disease,job\nF,100,flu,nurse\n", {}),
        "no_names.csv": (good, {"csv_header": False}),
        "empty.csv": ("", {}),
        "header_only.csv": ("sex,zip,disease,job\n", {}),
        "all_dropped.csv": ("sex,zip,disease,job\nF,100,,nurse\nM,101,flu,?\n", {}),
        "too_long.csv": (
            good + "F,100,flu,nurse\nM,1" + "0" * 50 + ",flu,cook\nF," + "9" * 60 + ",flu,cook\n",
            {"max_value_length": 20},
        ),
        "latin1.csv": ("sex,zip,disease,job\nF,100,fi\u00e8vre,nurse\n".encode("latin-1"), {}),
        "duplicate.csv": ("sex,zip,disease,disease\nF,100,flu,nurse\n", {}),
        "garbage.parquet": (b"PAR1 not really parquet", {}),
    }
    written = {}
    for name, (content, options) in cases.items():
        path = tmp_path / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
        written[name] = (path, options)
    nested = tmp_path / "nested.parquet"
    pq.write_table(pa.table({"sex": ["F"], "zip": [[1, 2]], "disease": ["flu"], "job": ["cook"]}), nested)
    written["nested.parquet"] = (nested, {})
    renamed = tmp_path / "renamed.parquet"
    pq.write_table(pa.table({"a": ["F"], "b": ["1"], "c": ["flu"], "d": ["cook"]}), renamed)
    written["renamed.parquet"] = (renamed, {"column_names": ["sex", "zip", "disease"]})
    return written


@pytest.mark.usefixtures("fake_key")
def test_bad_inputs_give_load_records_errors(tmp_path: Path) -> None:
    for name, (path, options) in _bad_inputs(tmp_path).items():
        with pytest.raises(InputError) as expected:
            load_records(path, quasi_identifiers=QUASI, sensitive_attributes=SENSITIVE, **options)
        with pytest.raises(InputError) as got:
            _stage(path, tmp_path / "run", shard_rows=100_000, **options)
        assert type(got.value) is type(expected.value), name
        assert str(got.value) == str(expected.value), name
        assert not (tmp_path / "run" / "input.tmp").exists(), name  # nothing private left half-written
        if name == "too_long.csv":  # first such value, how many, the longest: from the distinct values
            assert "too_long.csv, line 5: column 'zip'" in str(got.value)
            assert "(2 such value(s) in the column, the longest 60 bytes)" in str(got.value)


@pytest.mark.usefixtures("fake_key")
def test_a_bad_file_among_several_is_named(tmp_path: Path) -> None:
    delivery = tmp_path / "delivery"
    delivery.mkdir()
    _write_csv(delivery / "a.csv", [["F", "100", "flu", "nurse"]])
    (delivery / "b.csv").write_text("sex,zip,disease,job\nF,100,flu,nurse\nM,101\n")
    with pytest.raises(InputError, match=r"b\.csv, line 3: the row has 2 fields"):
        _stage(delivery, tmp_path / "run", shard_rows=100_000)


@pytest.mark.usefixtures("fake_key")
def test_columns_named_like_internal_ones(tmp_path: Path) -> None:
    # 'file_row_number' and 'position' are ordinary names for the staging (its internal columns are positional)
    path = tmp_path / "names.parquet"
    pq.write_table(
        pa.table({"file_row_number": ["9", "8", "7"], "position": ["a", "b", "a"], "d": ["x", "y", "z"], "j": ["p", "q", "p"]}),
        path,
    )
    columns: dict[str, Any] = {"quasi_identifiers": ("file_row_number", "position"), "sensitive_attributes": ("d", "j")}
    expected = load_records(path, **columns).records
    stage_input(path, tmp_path / "run", salt=SALT, shard_rows=10, min_shard_rows=1, **columns)
    job = make_job(tmp_path / "run", 1, ("file_row_number", "position"), ("d", "j"))
    pd.testing.assert_frame_equal(read_staged_shard(job, 0), expected)
    with pytest.raises(InputError, match="partition column 'shard'"):
        stage_input(path, tmp_path / "run", quasi_identifiers=("Shard",), sensitive_attributes=("d", "j"), salt=SALT)


@pytest.mark.usefixtures("fake_key")
def test_a_file_that_changes_while_it_is_read_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import itertools

    from pipeline.io import loading

    path = _write_csv(tmp_path / "records.csv", _random_rows(6, 50))
    digests = (f"{k:064x}" for k in itertools.count())  # a new SHA-256 at every read: the file "changes"
    monkeypatch.setattr(loading, "file_sha256", lambda _: next(digests))
    with pytest.raises(InputError) as expected:
        load_records(path, quasi_identifiers=QUASI, sensitive_attributes=SENSITIVE)
    with pytest.raises(InputError) as got:
        _stage(path, tmp_path / "run", shard_rows=100_000)
    assert "the file changed while it was being read (content (SHA-256) differ" in str(got.value)
    assert str(got.value) == str(expected.value)
    assert not (tmp_path / "run" / "input.tmp").exists()
