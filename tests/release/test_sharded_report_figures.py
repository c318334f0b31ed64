"""The report figures of a sharded release that need the private records (issue 17,
pipeline/release/sharded_report.py): the query workload and the private Rating baseline.

The shards are the fakes of ``tests/release/sharded_release.py`` (example A released per shard); the staged records
are written here by hand, and the expected figures come from the pure functions called directly on the records and
on the united tables computed in pandas (``united_tables``), never through the module under test.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.release import sharded_report
from pipeline.release.audit import table_digests
from pipeline.release.sharded_report import private_report_figures, read_staged_records, read_united_tables
from tests.release.sharded_release import (
    EXAMPLE,
    QUASI_IDENTIFIERS,
    SCHEMAS,
    SENSITIVE_ATTRIBUTES,
    example_records,
    example_release,
    fake_offsets,
    united_tables,
    write_private_parts,
)

COLUMNS = [*QUASI_IDENTIFIERS, *SENSITIVE_ATTRIBUTES]


def _write_staged(staging_dir: Path, parts: dict[tuple[int, int], pd.DataFrame]) -> None:
    """Staged parts as the staging writes them: ``input/shard=<s>/part-<f:05d>.parquet``, ``row_id`` int64 and the
    configured columns dictionary-encoded text."""
    for (shard, position), frame in parts.items():
        path = staging_dir / "input" / f"shard={shard}" / f"part-{position:05d}.parquet"
        path.parent.mkdir(parents=True, exist_ok=True)
        table = pa.Table.from_pandas(frame.reset_index(drop=True), preserve_index=False)
        columns = [table.column(0).cast(pa.int64())] + [table.column(i).dictionary_encode() for i in range(1, table.num_columns)]
        pq.write_table(pa.Table.from_arrays(columns, names=table.column_names), path)


def _staged_example(staging_dir: Path, n_shards: int) -> pd.DataFrame:
    """Example A repeated ``n_shards`` times (row ids 1..n in that order) staged over the shards by ``row_id`` mod S,
    each shard's records written in reverse order; returns the records in input order (the expectation)."""
    records = pd.concat([example_records()] * n_shards, ignore_index=True)[COLUMNS]
    records.insert(0, "row_id", np.arange(1, len(records) + 1, dtype=np.int64))
    for shard in range(n_shards):
        held = records[records["row_id"] % n_shards == shard].iloc[::-1]
        _write_staged(staging_dir, {(shard, 0): held})
    return records


def test_staged_records_come_back_in_input_order_with_the_values_present_as_sorted_categories(tmp_path):
    staging = tmp_path / "staging"
    _write_staged(
        staging,
        {
            (0, 0): pd.DataFrame({"row_id": [5, 1], "age": ["9", "10"], "disease": ["flu", "cold"]}),
            (0, 1): pd.DataFrame({"row_id": [7], "age": ["9"], "disease": ["flu"]}),
            (1, 0): pd.DataFrame({"row_id": [2, 6], "age": ["10", "30"], "disease": ["asthma", "flu"]}),
            (2, 0): pd.DataFrame({"row_id": [3], "age": ["9"], "disease": ["cold"]}),  # shard 2 is not read (S = 2)
        },
    )
    records = read_staged_records(staging, 2, ["age", "disease"])
    assert records["row_id"].tolist() == [1, 2, 5, 6, 7]
    assert records["row_id"].dtype == np.int64 and records.index.tolist() == [0, 1, 2, 3, 4]
    assert records["age"].astype(str).tolist() == ["10", "10", "9", "30", "9"]
    assert records["disease"].astype(str).tolist() == ["cold", "asthma", "flu", "flu", "flu"]
    assert list(records["age"].cat.categories) == ["10", "30", "9"]  # text order, as the release job's raw_records
    assert list(records["disease"].cat.categories) == ["asthma", "cold", "flu"]


def test_no_staged_record_is_an_error_naming_the_staging(tmp_path):
    with pytest.raises(FileNotFoundError, match="no staged records"):
        read_staged_records(tmp_path / "staging", 2, ["age"])


@pytest.mark.parametrize("n_shards", [1, 3])
def test_the_united_tables_are_the_published_tables(tmp_path, n_shards):
    shards = [example_release(seed=s) for s in range(n_shards)]
    summaries = write_private_parts(tmp_path / "staging" / "output", shards)
    offsets = fake_offsets(summaries)
    clusters = shards[0].attribute_clusters
    tables = read_united_tables(tmp_path / "staging" / "output", summaries, offsets, SCHEMAS, SENSITIVE_ATTRIBUTES, clusters)
    expected = united_tables(shards, offsets)
    assert table_digests({t: tables[t] for t in expected}) == table_digests(expected)
    assert tables["attribute_table"][SENSITIVE_ATTRIBUTES[0]].dtype == "Int32"
    assert tables["attribute_clusters"] is clusters


def _figures(tmp_path: Path, n_shards: int, *, baseline_max_records: int = 1_000_000):
    shards = [example_release(seed=s) for s in range(n_shards)]
    staging = tmp_path / "staging"
    summaries = write_private_parts(staging / "output", shards)
    offsets = fake_offsets(summaries)
    records = _staged_example(staging, n_shards)
    clusters = shards[0].attribute_clusters
    rules = _global_rules(records)
    figures = private_report_figures(
        n_records=len(records),
        staging_dir=staging,
        summaries=summaries,
        offsets=offsets,
        schemas=SCHEMAS,
        attribute_clusters=clusters,
        strong_rules=rules,
        quasi_identifiers=QUASI_IDENTIFIERS,
        sensitive_attributes=SENSITIVE_ATTRIBUTES,
        ell=EXAMPLE["l"],
        min_confidence=EXAMPLE["min_conf"],
        hierarchies_dir=None,
        baseline_max_records=baseline_max_records,
    )
    return figures, records, {**united_tables(shards, offsets), "attribute_clusters": clusters}, rules


def _global_rules(records: pd.DataFrame) -> pd.DataFrame:
    from pipeline.core.rules import mine_strong_rules

    return mine_strong_rules(records, SENSITIVE_ATTRIBUTES, min_confidence=EXAMPLE["min_conf"])


@pytest.mark.parametrize("n_shards", [1, 3])
def test_the_workload_and_the_baseline_are_those_of_the_pure_functions_on_all_records(tmp_path, n_shards):
    from pipeline.core.query_workload import release_workload_utility
    from pipeline.evaluation.experiments import evaluate_release
    from pipeline.reporting.release_report import PRIVATE_BASELINE_FIGURES

    figures, records, tables, rules = _figures(tmp_path, n_shards)
    assert len(rules) > 0  # the baseline's adversary has rules to use
    workload = release_workload_utility(
        records, QUASI_IDENTIFIERS, SENSITIVE_ATTRIBUTES, model="mixed", tables=tables, hierarchies={}
    )
    assert figures["query_workload"] == workload
    assert workload["W1"]["n_queries"] > 0 and not figures["query_workload"].get("not_computed")
    rating = evaluate_release(
        records,
        QUASI_IDENTIFIERS,
        SENSITIVE_ATTRIBUTES,
        model="rating",
        ell=EXAMPLE["l"],
        min_confidence=EXAMPLE["min_conf"],
        rules=rules,
    )
    baseline = figures["private_rating_baseline"]
    assert baseline["model"] == "rating" and baseline["published"] is False and "not_computed" not in baseline
    assert {k: baseline[k] for k in PRIVATE_BASELINE_FIGURES} == {k: rating.get(k) for k in PRIVATE_BASELINE_FIGURES}
    assert baseline["n_records"] == 16 * n_shards


def _refuse(*_args, **_kwargs):
    raise AssertionError("a reader was called although the release is above the limit")


def test_above_both_limits_nothing_is_read_and_both_say_not_computed(tmp_path, monkeypatch):
    monkeypatch.setattr(sharded_report, "read_staged_records", _refuse)
    monkeypatch.setattr(sharded_report, "read_united_tables", _refuse)
    monkeypatch.setattr("pipeline.core.query_workload.MAX_REPORT_RECORDS", 40)
    figures = private_report_figures(
        n_records=41,
        staging_dir=tmp_path / "no-staging",
        summaries=[],
        offsets=[],
        schemas=SCHEMAS,
        attribute_clusters=pd.DataFrame(),
        strong_rules=pd.DataFrame(),
        quasi_identifiers=QUASI_IDENTIFIERS,
        sensitive_attributes=SENSITIVE_ATTRIBUTES,
        ell=2,
        min_confidence=0.75,
        hierarchies_dir=None,
        baseline_max_records=40,
    )
    assert figures == {
        "query_workload": {"not_computed": True, "max_records": 40, "n_records": 41},
        "private_rating_baseline": {
            "model": "rating",
            "published": False,
            "not_computed": True,
            "n_records": 41,
            "max_records": 40,
        },
    }


def test_above_the_workload_limit_only_the_records_are_read_for_the_baseline(tmp_path, monkeypatch):
    monkeypatch.setattr(sharded_report, "read_united_tables", _refuse)
    monkeypatch.setattr("pipeline.core.query_workload.MAX_REPORT_RECORDS", 15)
    figures, records, _, _ = _figures(tmp_path, 1)
    assert figures["query_workload"] == {"not_computed": True, "max_records": 15, "n_records": 16}
    assert not figures["private_rating_baseline"].get("not_computed")
    assert figures["private_rating_baseline"]["n_records"] == len(records) == 16


def test_above_the_baseline_limit_the_workload_is_still_measured(tmp_path):
    figures, _, _, _ = _figures(tmp_path, 2, baseline_max_records=0)  # 0: never
    assert figures["private_rating_baseline"]["not_computed"] is True
    assert figures["private_rating_baseline"]["max_records"] == 0 and figures["private_rating_baseline"]["n_records"] == 32
    assert figures["query_workload"]["W1"]["n_queries"] > 0


def test_staged_records_other_than_the_plan_are_refused(tmp_path):
    shards = [example_release(seed=0)]
    staging = tmp_path / "staging"
    summaries = write_private_parts(staging / "output", shards)
    records = _staged_example(staging, 1)
    with pytest.raises(ValueError, match="the plan counted 17"):
        private_report_figures(
            n_records=17,
            staging_dir=staging,
            summaries=summaries,
            offsets=fake_offsets(summaries),
            schemas=SCHEMAS,
            attribute_clusters=shards[0].attribute_clusters,
            strong_rules=_global_rules(records),
            quasi_identifiers=QUASI_IDENTIFIERS,
            sensitive_attributes=SENSITIVE_ATTRIBUTES,
            ell=2,
            min_confidence=0.75,
            hierarchies_dir=None,
            baseline_max_records=100,
        )


def test_a_failure_on_the_private_records_names_the_figure_and_withholds_its_message(tmp_path, monkeypatch):
    def leaky(*_args, **_kwargs):
        raise ValueError("value 'flu' of row 7 is odd")  # as a pandas message may quote a record's value

    monkeypatch.setattr("pipeline.reporting.release_report.private_rating_baseline", leaky)
    with pytest.raises(sharded_report.PrivateFiguresFailed) as raised:
        _figures(tmp_path, 1)
    message = str(raised.value)
    assert "private_rating_baseline" in message and "ValueError" in message and "nothing is published" in message
    assert "flu" not in message and raised.value.__cause__ is None and raised.value.__suppress_context__
