"""Issue 17 end to end: the report of a sharded release (``sharded_release`` job) has the query workload and the
private Rating baseline of the in-memory ``release`` job's report.

- one shard (S = 1): ``report.json``'s ``query_workload`` and ``private_rating_baseline`` equal the ``release``
  job's, field by field, and report.html shows both sections;
- S = 4 (Adult at ``--shard-rows 8000``): both are computed, the workload on the UNITED published tables; the
  expectation is computed here with the pure functions on the release read back from its files and on the records
  read with the loader (never through the sharded job's own wrapper);
- above the limits: both say not computed, with the limit and the records, and no record is read.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from pipeline.cli import main

pytestmark = pytest.mark.e2e

ADULT = Path(__file__).resolve().parents[2] / "data" / "adult" / "adult.data"
#: Adult values that must never reach a report's Dagster metadata (sensitive and quasi-identifier values).
ADULT_VALUES = ("Bachelors", "Prof-specialty", "Husband", "Not-in-family", "Married-civ-spouse", "United-States")


def _run(home: Path, *arguments: str):
    return CliRunner().invoke(main, ["run", "--quiet", "--home", str(home), *arguments])


def _latest(home: Path) -> Path:
    return home / "releases" / (home / "releases" / "LATEST").read_text().strip()


def _report(release: Path) -> tuple[dict, str]:
    return json.loads((release / "report.json").read_text()), (release / "report.html").read_text()


def _assert_both_sections_computed(page: str) -> None:
    workload = page.split("<h2>Query workload</h2>", 1)[1].split("<h2>", 1)[0]
    assert "median error" in workload and "W1: 1–2 quasi-identifiers" in workload and "Not " not in workload
    baseline = page.split("<h2>Comparison with the Rating baseline</h2>", 1)[1].split("<h2>", 1)[0]
    assert "Rating, computed privately" in baseline and "Not computed" not in baseline and "Not available" not in baseline


@pytest.mark.slow
def test_one_shard_reports_the_workload_and_the_baseline_of_the_in_memory_job(tmp_path):
    home = tmp_path / "home"
    memory = _run(home, "--engine", "memory")
    assert memory.exit_code == 0, memory.output
    in_memory, _ = _report(_latest(home))
    sharded = _run(home, "--engine", "local", "--workers", "2", "--shard-rows", "100000")
    assert sharded.exit_code == 0, sharded.output
    release = _latest(home)
    assert json.loads((release / "manifest.json").read_text())["sharding"]["n_shards"] == 1
    data, page = _report(release)
    for key in ("query_workload", "private_rating_baseline"):
        assert not in_memory[key].get("not_computed"), key
        assert set(data[key]) == set(in_memory[key]), key
        for field, value in in_memory[key].items():
            assert data[key][field] == value, (key, field)
    assert data["private_rating_baseline"]["n_records"] == 30718
    _assert_both_sections_computed(page)


@pytest.mark.slow
def test_four_shards_report_the_workload_of_the_united_tables_and_the_baseline_of_all_records(tmp_path):
    from pipeline.core.hierarchies import load_available_hierarchies
    from pipeline.core.query_workload import release_workload_utility
    from pipeline.core.rules import mine_strong_rules
    from pipeline.evaluation.experiments import evaluate_release
    from pipeline.io.loading import load_records
    from pipeline.release.audit import read_release
    from pipeline.reporting.release_report import PRIVATE_BASELINE_FIGURES
    from pipeline.resources import ADULT_HIERARCHIES, ReleaseSettings

    home = tmp_path / "home"
    outcome = _run(home, "--engine", "local", "--workers", "2", "--shard-rows", "8000", "--min-shard-rows", "1000")
    assert outcome.exit_code == 0, outcome.output
    release = _latest(home)
    assert json.loads((release / "manifest.json").read_text())["sharding"]["n_shards"] == 4
    data, page = _report(release)
    _assert_both_sections_computed(page)

    settings = ReleaseSettings()  # the Adult example's defaults, as the CLI runs it
    quasi_identifiers, attributes = list(settings.quasi_identifiers), list(settings.sensitive_attributes)
    records = load_records(ADULT, **settings.reading_options(), ell=settings.feasibility_ell()).records
    published = read_release(release)
    workload = release_workload_utility(
        records,
        quasi_identifiers,
        attributes,
        model="mixed",
        tables={
            "sac_released": published.sac_released,
            "attribute_table": published.attribute_table,
            "id_table": published.id_table,
            "attribute_clusters": published.attribute_clusters,
        },
        hierarchies=load_available_hierarchies(ADULT_HIERARCHIES, [*quasi_identifiers, *attributes]),
    )
    assert data["query_workload"]["W1"]["n_queries"] == 1000
    assert data["query_workload"] == workload  # JSON keeps every float exactly (shortest repr)
    # the GLOBAL strong rules: mined on all records, as the release job's strong_rules
    rules = mine_strong_rules(
        records, attributes, min_confidence=settings.min_confidence, min_support=settings.effective_min_support()
    )
    rating = evaluate_release(
        records[["row_id", *quasi_identifiers, *attributes]],
        quasi_identifiers,
        attributes,
        model="rating",
        ell=settings.ell,
        min_confidence=settings.min_confidence,
        rules=rules,
    )
    baseline = data["private_rating_baseline"]
    assert baseline["model"] == "rating" and baseline["published"] is False
    assert {k: baseline[k] for k in PRIVATE_BASELINE_FIGURES} == {k: rating.get(k) for k in PRIVATE_BASELINE_FIGURES}
    assert baseline["n_records"] == len(records) == 30718


def test_above_the_limits_both_say_not_computed_and_no_record_is_read(tmp_path, monkeypatch):
    """A sample of Adult (S = 2) with ``private_baseline_max_records`` 0 and the workload's limit lowered below its
    records: report.json and report.html say not computed with the limit and the records; the readers of the
    private records and the united tables are never called."""
    import dagster as dg

    from pipeline.release import sharded_report
    from tests.conftest import ADULT_COLUMNS
    from tests.jobs import ACCEPT_ANY_LOSS, run_job

    def refuse(*_args, **_kwargs):
        raise AssertionError("a reader of the private records was called above the limits")

    monkeypatch.setattr(sharded_report, "read_staged_records", refuse)
    monkeypatch.setattr(sharded_report, "read_united_tables", refuse)
    monkeypatch.setattr("pipeline.core.query_workload.MAX_REPORT_RECORDS", 1000)
    sample = tmp_path / "adult_sample.data"
    sample.write_text("".join(ADULT.read_text().splitlines(keepends=True)[:6000]))
    settings = {
        "input_path": str(sample),
        "column_names": list(ADULT_COLUMNS),
        "hierarchies_dir": str(ADULT.parent / "hierarchies"),
        "engine": "local",
        "workers": 1,
        "shard_rows": 3000,
        "min_shard_rows": 1000,
        "private_baseline_max_records": 0,
        **ACCEPT_ANY_LOSS,
    }
    with dg.instance_for_test() as instance:
        result = run_job(tmp_path / "home", "sharded_release", settings, instance=instance)
        assert result.success
        published = [
            m.materialization
            for m in result.get_asset_materialization_events()
            if m.asset_key == dg.AssetKey(["sharded_release"])
        ]
    assert len(published) == 1
    metadata = {k: str(getattr(v, "value", v)) for k, v in published[0].metadata.items()}
    assert not any(key.startswith("query_workload_") for key in metadata)  # nothing measured, nothing reported
    assert not any(value in text for text in metadata.values() for value in ADULT_VALUES)
    release = Path(published[0].metadata["path"].value)
    manifest = json.loads((release / "manifest.json").read_text())
    assert manifest["sharding"]["n_shards"] == 2
    n_records = int(manifest["n_input"]) - int(manifest["n_dropped_missing"])
    assert n_records > 1000
    data, page = _report(release)
    assert data["query_workload"] == {"not_computed": True, "max_records": 1000, "n_records": n_records}
    assert data["private_rating_baseline"] == {
        "model": "rating",
        "published": False,
        "not_computed": True,
        "n_records": n_records,
        "max_records": 0,
    }
    workload = page.split("<h2>Query workload</h2>", 1)[1].split("<h2>", 1)[0]
    assert "Not computed" in workload and "1,000" in workload
    baseline = page.split("<h2>Comparison with the Rating baseline</h2>", 1)[1].split("<h2>", 1)[0]
    assert "Not computed" in baseline and "private_baseline_max_records" in baseline
