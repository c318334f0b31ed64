"""The experiments path end to end on a reduced plan (a few points per figure), and the
report's verdict logic on synthetic points. The full run is `make experiments`."""

import json
from fractions import Fraction
from pathlib import Path

import pandas as pd
import pytest

from pipeline.reporting.experiments_report import _model_verdicts, _per_attribute_verdict, _timing_verdicts
from pipeline.resources import ADULT_COLUMNS

ADULT = Path(__file__).resolve().parents[2] / "data" / "adult" / "adult.data"
SENSITIVE = ["education", "occupation", "age", "relationship"]
QUASI_IDENTIFIERS = ["sex", "race", "marital-status", "workclass"]


@pytest.fixture(scope="module")
def experiment_run(tmp_path_factory):
    """`msa-release experiments --quick` on the first 6,000 Adult rows (header added)."""
    from pipeline.cli import execute_job

    base = tmp_path_factory.mktemp("experiments")
    subset = pd.read_csv(ADULT, header=None, names=ADULT_COLUMNS, skipinitialspace=True, dtype=str, nrows=6000)
    csv = base / "adult_6000.csv"
    subset.to_csv(csv, index=False)
    output = base / "report"
    settings = {
        "input_path": str(csv),
        "csv_header": True,
        "column_names": [],
        "quasi_identifiers": QUASI_IDENTIFIERS,
        "sensitive_attributes": SENSITIVE,
    }
    experiments = {
        "output_dir": str(output),
        "ell_values": [2, 3],
        "min_confidence_values": [0.8, 0.9],
        "record_counts": [1000, 0],
        "attribute_set_sizes": [2, 4],
        "histogram_ells": [3, 2],
        "timing_repeats": 2,
    }
    with pytest.MonkeyPatch.context() as patch:  # execute_job sets MSA_RELEASE_HOME and DAGSTER_HOME
        for name in ("MSA_RELEASE_HOME", "DAGSTER_HOME"):
            patch.delenv(name, raising=False)
        result, _ = execute_job(
            "evaluation",
            {"resources": {"settings": {"config": settings}, "experiments": {"config": experiments}}},
            home_option=str(base / "home"),
            verbose=False,
        )
    return result, output


def test_every_figure_results_and_report_are_written(experiment_run):
    result, output = experiment_run
    assert result.success
    for number in range(1, 13):  # 12: per-attribute ℓ (issue 16; the plan's default names Adult's attributes)
        figure = output / f"figure_{number:02d}.png"
        assert figure.is_file() and figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", figure
    report = (output / "REPORT.md").read_text()
    for number in range(1, 13):
        assert f"## Figure {number}." in report and f"(figure_{number:02d}.png)" in report
    results = json.loads((output / "results.json").read_text())
    assert {"plan", "dataset", "machine", "figures", "model_points"} <= set(results)
    assert results["dataset"]["n_input"] == 6000
    # the query workload at the default point (ℓ 3, min_confidence 0.8, all attributes), both models (issue 18)
    measured = [p for p in results["model_points"] if p.get("query_workload")]
    assert {p["model"] for p in measured} == {"mixed", "rating"}
    assert all(p["ell"] == 3 and p["min_confidence"] == 0.8 and p["m"] == 4 for p in measured)
    for point in measured:
        for name in ("W1", "W2"):
            assert point["query_workload"][name]["n_queries"] == 1000
    assert "## Query workload" in report and "| mixed |" in report and "| rating |" in report


def test_results_respect_the_privacy_claims(experiment_run):
    """SPEC §9.2 / Lemma 22 on every measured point: the mixed model caps disclosure at 1/ℓ and
    recovers the raw average confidence when nothing was deleted; Rating must not be reported
    better than the bound it does not promise (no claim), but its points must exist."""
    _, output = experiment_run
    points = json.loads((output / "results.json").read_text())["model_points"]
    mixed = [p for p in points if p["model"] == "mixed"]
    assert mixed and any(p["model"] == "rating" for p in points)
    for point in mixed:
        assert all(Fraction(value) <= Fraction(1, point["ell"]) for value in point["disclosure_counts"])
        if point["n_deleted"] == 0 and point["average_raw_confidence"] is not None:
            assert point["average_released_confidence"] == pytest.approx(point["average_raw_confidence"], abs=1e-12)
    timings = json.loads((output / "results.json").read_text())["figures"]
    assert all(t["identical_output"] for t in timings["1"] + timings["2"])
    assert all(len(t["seconds"]) == 2 for t in timings["1"])


def test_figures_are_asset_metadata(experiment_run):
    result, _ = experiment_run
    metadata = {
        tuple(event.event_specific_data.materialization.asset_key.path): event.event_specific_data.materialization.metadata
        for event in result.get_asset_materialization_events()
    }
    assert {"figure_01", "figure_02"} <= set(metadata[("evaluation", "sid_creation_timings")])
    assert {f"figure_{n:02d}" for n in range(3, 10)} <= set(metadata[("evaluation", "model_comparison")])
    assert {"figure_10", "figure_11"} <= set(metadata[("evaluation", "disclosure_distributions")])
    assert metadata[("evaluation", "sid_creation_timings")]["figure_01"].value.startswith("![Figure 1](data:image/png;base64,")


def _point(sweep, model, ell=3, m=4, confidence=0.8, **values):
    base = {
        "sweep": sweep,
        "model": model,
        "ell": ell,
        "m": m,
        "min_confidence": confidence,
        "n_deleted": 0,
        "n_suppressed_cells": 0,
        "n_sac_released": 0,
        "n_strong_rules": 1,
        "additional_information_loss": 0.0,
        "average_raw_confidence": 0.9,
        "average_released_confidence": 0.9,
        "disclosure_counts": {},
    }
    base.update(values)
    return base


def timing(figure, n, m, method, seconds):
    """One timing point of the SID-creation experiments (median = min = max), identical outputs."""
    return {
        "figure": figure,
        "n_records": n,
        "m": m,
        "method": method,
        "median_seconds": seconds,
        "min_seconds": seconds,
        "max_seconds": seconds,
        "identical_output": True,
    }


def test_timing_verdicts_follow_the_measurements():
    faster = [
        timing(1, 1000, 4, "improved", 0.01),
        timing(1, 1000, 4, "plain", 0.05),
        timing(1, 9000, 4, "improved", 0.1),
        timing(1, 9000, 4, "plain", 0.9),
    ]
    slower = [
        timing(1, 1000, 4, "improved", 0.05),
        timing(1, 1000, 4, "plain", 0.01),
        timing(1, 9000, 4, "improved", 0.9),
        timing(1, 9000, 4, "plain", 0.1),
    ]
    assert _timing_verdicts(faster)[1][0] == "agrees"
    assert _timing_verdicts(slower)[1][0] == "differs"


def test_model_verdicts_follow_the_measurements():
    # Figure 10: mixed all at 1/3 and Rating mostly above 0.8 with some at 1 -> agrees;
    # Rating mostly at 1/2 -> only partly.
    agree = [
        _point("histogram", "mixed", disclosure_counts={"1/3": 10}),
        _point("histogram", "rating", disclosure_counts={"9/10": 8, "1": 2}),
    ]
    partly = [
        _point("histogram", "mixed", disclosure_counts={"1/3": 10}),
        _point("histogram", "rating", disclosure_counts={"1/2": 9, "1": 1}),
    ]
    assert _model_verdicts(agree, [3])[10][0] == "agrees"
    assert _model_verdicts(partly, [3])[10][0] == "partly agrees"
    # Figure 4: AIL must fall as min_confidence rises.
    rising = [_point("min_confidence", "mixed", confidence=c, additional_information_loss=a) for c, a in ((0.6, 0.2), (0.9, 0.1))]
    falling = [
        _point("min_confidence", "mixed", confidence=c, additional_information_loss=a) for c, a in ((0.6, 0.1), (0.9, 0.2))
    ]
    rating = [_point("min_confidence", "rating", confidence=c) for c in (0.6, 0.9)]
    assert _model_verdicts(rising + rating, [3])[4][0] == "agrees"
    assert _model_verdicts(falling + rating, [3])[4][0] == "differs"


def _setting_point(model, setting, ell, ail, suppressed):
    ells = {"A": 3, "B": 2} if setting == "per-attribute" else {"A": ell, "B": ell}
    return _point(
        "ell_per_attribute",
        model,
        ell=ell,
        m=2,
        setting=setting,
        ell_per_attribute=ells,
        sensitive_attributes=["A", "B"],
        additional_information_loss=ail,
        n_suppressed_cells=suppressed,
        additional_information_loss_by_attribute={"A": ail, "B": ail},
        n_suppressed_cells_by_attribute={"A": suppressed, "B": 0},
    )


def test_the_per_attribute_verdict_compares_with_uniform_max():
    """Issue 16's Figure 12: "agrees" when per-attribute ℓ_i costs no more AIL and suppression than ℓ = max ℓ_i."""

    def points(mixed_ail):
        return [
            _setting_point("mixed", "per-attribute", 3, mixed_ail, 5),
            _setting_point("mixed", "uniform max", 3, 0.2, 9),
            _setting_point("mixed", "uniform min", 2, 0.0, 0),
            _setting_point("rating", "per-attribute", 3, 0.05, 2),
            _setting_point("rating", "uniform max", 3, 0.1, 4),
            _setting_point("rating", "uniform min", 2, 0.0, 0),
        ]

    verdict, numbers = _per_attribute_verdict(points(0.1))[12]
    assert verdict == "agrees"
    assert "suppressed cells 5 / 9 / 0" in numbers
    verdict, _ = _per_attribute_verdict(points(0.3))[12]
    assert verdict == "partly agrees (rating only)"
    assert _per_attribute_verdict([_point("ell", "mixed")]) == {}


def test_the_report_names_this_tables_attribute_and_labels_adults_explanations(tmp_path):
    """Newcomer, session 40: a report on a hospital table said "m=3 adds age" and explained Figure 2 by Adult's age
    column. Figure 2's text now names the attribute the table adds at that m, and the fixed explanations, written for
    UCI Adult, say so on another table."""
    from pipeline.reporting.experiments_report import ADULT_WHY_LABEL, write_report

    timings = [
        timing(2, 1000, 2, "plain", 0.1),
        timing(2, 1000, 2, "improved", 0.1),
        timing(2, 1000, 3, "plain", 0.9),
        timing(2, 1000, 3, "improved", 0.2),
    ]
    verdict = _timing_verdicts(timings, ["diagnosis", "department", "medication"])[2][1]
    assert "m=3 adds medication" in verdict and "age" not in verdict
    plan = {
        "default_ell": 3,
        "default_min_confidence": 0.8,
        "seed": 0,
        "timing_repeats": 1,
        "histogram_ells": [3, 2],
    }
    machine = {"platform": "linux", "cpu_count": 2, "python": "3.11"}
    points = [_point("ell", "mixed", m=3), _point("ell", "rating", m=3)]
    dataset = {
        "description": "patients.csv",
        "n_records": 1000,
        "quasi_identifiers": ["age", "sex"],
        "sensitive_attributes": ["diagnosis", "department", "medication"],
    }
    for name in ("other", "adult"):
        (tmp_path / name).mkdir()
    other = write_report(
        tmp_path / "other" / "REPORT.md",
        timings=timings,
        points=points,
        plan=plan,
        dataset=dataset,
        machine=machine,
        wall_seconds={},
    ).read_text()
    assert f"**{ADULT_WHY_LABEL}:**" in other and "- **Why:**" not in other
    adult = write_report(
        tmp_path / "adult" / "REPORT.md",
        timings=timings,
        points=points,
        plan=plan,
        dataset={**dataset, "description": "UCI Adult (adult.data, CC BY 4.0)"},
        machine=machine,
        wall_seconds={},
    ).read_text()
    assert "- **Why:**" in adult and ADULT_WHY_LABEL not in adult
