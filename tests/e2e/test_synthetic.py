"""`msa-release synthesize`: seeded, whole source rows, Adult's strong rules kept."""

import hashlib
import json

import duckdb
import numpy as np
import pandas as pd
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from pipeline.core.rules import mine_strong_rules
from pipeline.io.loading import load_records
from pipeline.resources import ReleaseSettings
import tracemalloc

from pipeline.evaluation.synthetic import (
    PARQUET_METADATA_KEY,
    iter_row_index_chunks,
    sample_row_indices,
    synthesize,
    weighted_rule_set,
)

RULE_KEY = ["antecedent_attribute", "antecedent_value", "consequent_attribute", "consequent_value"]


@pytest.fixture(scope="module")
def adult() -> pd.DataFrame:
    settings = ReleaseSettings()
    loaded = load_records(settings.input_path, **settings.reading_options())  # Adult's file: Adult's names, no header
    return loaded.records.drop(columns="row_id")


def _rules(frame: pd.DataFrame) -> set:
    rules = mine_strong_rules(frame, ReleaseSettings().sensitive_attributes, min_confidence=0.8, backend="counting")
    return {tuple(r) for r in rules[RULE_KEY].itertuples(index=False)}


def _read(path) -> pd.DataFrame:
    return duckdb.connect().execute("SELECT * FROM read_parquet(?)", [str(path)]).df()


def _sha256(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_balanced_sampling_gives_every_row_floor_or_ceiling_copies():
    n, rows = 1000, 2 * 1000 + 137
    indices = sample_row_indices(n, rows, seed=3)
    counts = np.bincount(indices, minlength=n)
    assert len(indices) == rows
    assert set(np.unique(counts)) == {2, 3}
    assert (counts == 3).sum() == 137
    assert not np.array_equal(indices[:n], np.arange(n))  # shuffled, not blocks of copies


@pytest.mark.parametrize("chunk_rows", [1, 7, 250, 2137, 10_000])
def test_balanced_chunks_keep_floor_or_ceiling_copies_whatever_the_chunk_size(chunk_rows):
    n, rows = 250, 8 * 250 + 137
    chunks = list(iter_row_index_chunks(n, rows, seed=4, chunk_rows=chunk_rows))
    assert [len(c) for c in chunks[:-1]] == [chunk_rows] * (len(chunks) - 1)
    assert len(chunks) == -(-rows // chunk_rows) and 1 <= len(chunks[-1]) <= chunk_rows
    counts = np.bincount(np.concatenate(chunks), minlength=n)
    assert set(np.unique(counts)) == {8, 9} and (counts == 9).sum() == 137
    again = list(iter_row_index_chunks(n, rows, seed=4, chunk_rows=chunk_rows))
    assert all(np.array_equal(a, b) for a, b in zip(chunks, again, strict=True))


def test_balanced_chunks_are_a_uniform_shuffle():
    # where the copies of one source row land: with a uniform order of the multiset every output position is
    # equally likely; a chunk-wise design that filled chunks source row by source row would not be
    n, rows, chunk_rows, draws = 4, 40, 8, 400
    first_chunk_share = np.zeros(n)
    for seed in range(draws):
        chunk = next(iter_row_index_chunks(n, rows, seed=seed, chunk_rows=chunk_rows))
        first_chunk_share += np.bincount(chunk, minlength=n) / chunk_rows
    share = first_chunk_share / draws
    assert np.allclose(share, 1 / n, atol=0.03)  # each row holds 1/4 of the first chunk on average


def test_replacement_chunks_draw_every_row_independently():
    chunks = list(iter_row_index_chunks(50, 1000, seed=2, sampling="replacement", chunk_rows=300))
    assert [len(c) for c in chunks] == [300, 300, 300, 100]
    assert np.concatenate(chunks).min() >= 0 and np.concatenate(chunks).max() < 50
    assert np.array_equal(np.concatenate(chunks), sample_row_indices(50, 1000, seed=2, sampling="replacement", chunk_rows=300))


def test_synthesize_writes_the_streamed_rows(adult, tmp_path):
    sensitive = ReleaseSettings().sensitive_attributes
    result = synthesize(adult, sensitive, rows=4000, seed=9, output=tmp_path / "s.parquet", chunk_rows=333)
    expected = adult.iloc[sample_row_indices(len(adult), 4000, seed=9, chunk_rows=333)].reset_index(drop=True)
    written = _read(result.path)
    assert written.astype(str).equals(expected.astype(str))
    assert pq.ParquetFile(result.path).metadata.num_row_groups == 13  # 12 x 333 + 4


def test_synthesize_memory_does_not_grow_with_rows(adult, tmp_path):
    # the bounded path: with a small chunk, 50 times more rows must not cost the 4 bytes per record of a full
    # index (1M rows: 3.8 MiB of int32 positions, plus the same again for its shuffle and multiplicities)
    sensitive = ReleaseSettings().sensitive_attributes
    source = adult.head(3000)

    def traced_peak(rows: int) -> int:
        tracemalloc.start()
        try:
            synthesize(source, sensitive, rows=rows, seed=0, output=tmp_path / f"m{rows}.parquet", chunk_rows=5000)
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    small, large = traced_peak(20_000), traced_peak(1_000_000)
    assert large - small < 1024 * 1024, (small, large)
    assert len(_read(tmp_path / "m1000000.parquet")) == 1_000_000


def test_sampling_rejects_bad_arguments():
    with pytest.raises(ValueError, match="unknown sampling"):
        sample_row_indices(10, 5, seed=0, sampling="stratified")
    with pytest.raises(ValueError, match="at least one"):
        sample_row_indices(0, 5, seed=0)


@pytest.mark.parametrize("sampling", ["balanced", "replacement"])
def test_same_seed_same_file_and_rows_are_whole_adult_rows(adult, tmp_path, sampling):
    first = synthesize(
        adult,
        ReleaseSettings().sensitive_attributes,
        rows=5000,
        seed=11,
        output=tmp_path / "a.parquet",
        sampling=sampling,
        chunk_rows=1500,
    )
    again = synthesize(
        adult,
        ReleaseSettings().sensitive_attributes,
        rows=5000,
        seed=11,
        output=tmp_path / "b.parquet",
        sampling=sampling,
        chunk_rows=1500,
    )
    other = synthesize(
        adult,
        ReleaseSettings().sensitive_attributes,
        rows=5000,
        seed=12,
        output=tmp_path / "c.parquet",
        sampling=sampling,
        chunk_rows=1500,
    )
    assert _sha256(first.path) == _sha256(again.path)
    sample = _read(first.path)
    assert not sample.equals(_read(other.path))
    assert list(sample.columns) == list(adult.columns) and len(sample) == 5000
    assert pq.ParquetFile(first.path).metadata.num_row_groups == 4  # 1500 + 1500 + 1500 + 500
    source_rows = set(adult.itertuples(index=False, name=None))
    assert all(row in source_rows for row in sample.itertuples(index=False, name=None))
    facts = json.loads(pq.read_schema(first.path).metadata[PARQUET_METADATA_KEY])
    assert facts["seed"] == 11 and facts["rows"] == 5000 and facts["sampling"] == sampling


def test_rules_of_a_moderate_sample_equal_adults(adult, tmp_path):
    result = synthesize(adult, ReleaseSettings().sensitive_attributes, rows=100_000, seed=0, output=tmp_path / "s.parquet")
    adult_rules = _rules(adult)
    assert len(adult_rules) == 7  # README: 7 strong rules on Adult with the defaults
    assert _rules(_read(result.path)) == adult_rules
    assert result.rules_equal_source and result.sample_rules == result.source_rules == 7


def test_weighted_rules_equal_the_rules_of_the_materialised_table(adult):
    # a small bootstrap sample whose rules differ from Adult's (rare values vanish or dominate)
    indices = sample_row_indices(len(adult), 3000, seed=5, sampling="replacement")
    weights = np.bincount(indices, minlength=len(adult))
    materialised = adult.iloc[indices].reset_index(drop=True)
    sensitive = ReleaseSettings().sensitive_attributes
    weighted = weighted_rule_set(adult, sensitive, weights, min_confidence=0.8)
    assert weighted == _rules(materialised)
    assert weighted != _rules(adult)


def test_synthesize_command(tmp_path, monkeypatch):
    from pipeline.cli import main

    monkeypatch.delenv("MSA_RELEASE_HOME", raising=False)
    output = tmp_path / "cache" / "adult_2000.parquet"
    outcome = CliRunner().invoke(main, ["synthesize", "--rows", "2000", "--seed", "1", "--output", str(output)])
    assert outcome.exit_code == 0, outcome.output
    assert "Wrote 2000 records" in outcome.output
    assert len(_read(output)) == 2000
    assert not list(output.parent.glob(".*partial"))
    facts = json.loads(pq.read_schema(output).metadata[PARQUET_METADATA_KEY])
    assert facts["source"] == "adult.data"
    assert facts["source_sha256"] == "5b00264637dbfec36bdeaab5676b0b309ff9eb788d63554ca0a249491c86603d"


def test_synthesize_command_names_a_missing_column(tmp_path):
    from pipeline.cli import main

    outcome = CliRunner().invoke(
        main,
        [
            "synthesize",
            "--rows",
            "10",
            "--output",
            str(tmp_path / "x.parquet"),
            "--sensitive-attributes",
            "education,nope",
        ],
    )
    assert outcome.exit_code == 2
    assert "nope" in outcome.output
