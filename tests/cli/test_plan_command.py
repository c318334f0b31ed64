"""``msa-release plan`` (click's CliRunner) on the hand-made table of ``tests/fixtures/plan_patients.csv``: the table
and the recommendation, ``--json``, the thresholds, and bad input refused like ``run`` refuses it (exit status 2)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from pipeline.cli import main

TABLE = Path(__file__).resolve().parents[1] / "fixtures" / "plan_patients.csv"
COLUMNS = ["--quasi-identifiers", "zip,sex", "--sensitive-attributes", "disease,drug,job"]


def _plan(tmp_path, *arguments: str):
    return CliRunner().invoke(
        main, ["plan", "--input", str(TABLE), *COLUMNS, "--home", str(tmp_path / "home"), *arguments], catch_exceptions=False
    )


def test_plan_prints_the_table_and_a_recommendation(tmp_path):
    result = _plan(tmp_path, "--ell-values", "2,3", "--min-confidence-values", "0.7")
    assert result.exit_code == 0, result.output
    lines = result.output.splitlines()
    header = next(line for line in lines if line.startswith("setting"))
    for heading in ("strong rules", "rule holders", "deleted", "suppressed", "predicted verdict"):
        assert heading in header
    start = lines.index(header) + 2  # after the heading and its rule
    rows = lines[start : lines.index("", start)]
    # ℓ 2, 3 × min_confidence 0.7 and the configured 0.8; the configured one (ℓ = 3, 0.8) is starred
    assert [row[:27].rstrip() for row in rows] == [
        "  ℓ = 2, min_confidence 0.7",
        "  ℓ = 2, min_confidence 0.8",
        "  ℓ = 3, min_confidence 0.7",
        "* ℓ = 3, min_confidence 0.8",
    ]
    assert lines[-2].startswith(("Recommended: ", "No setting passes"))
    assert lines[-1].startswith("planned in ") and lines[-1].endswith(" s")
    assert "posterior_within_bound: not predicted" in result.output
    assert (tmp_path / "home" / "secret.key").exists()  # the run's secret: created as run would
    assert not (tmp_path / "home" / "releases").exists()  # nothing published, no warehouse
    assert not (tmp_path / "home" / "warehouse.duckdb").exists()


def test_plan_json_parses_with_one_row_per_setting(tmp_path):
    result = _plan(tmp_path, "--json", "--ell", "2", "--ell-values", "3,4", "--min-confidence-values", "0.7,0.9")
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    settings = [(row["ell"], row["min_confidence"]) for row in document["rows"]]
    assert settings == [(ell, c) for ell in (2, 3, 4) for c in (0.7, 0.8, 0.9)]
    assert [row["configured"] for row in document["rows"]].count(True) == 1
    assert document["profile"]["n_records"] == 80 and document["max_deleted_share"] == 0.1
    for row in document["rows"]:
        assert row["n_sac_released"] + row["n_attribute_table"] + row["n_deleted"] == 80
        assert set(row["suppressed_share"]) == {"disease", "drug", "job"}


def test_the_utility_thresholds_decide_the_utility_gate(tmp_path):
    result = _plan(tmp_path, "--json", "--max-deleted-share", "0.3", "--ell-values", "2,3,4", "--min-confidence-values", "0.8")
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    assert document["max_deleted_share"] == 0.3
    verdicts = {row["ell"]: row["gates"]["utility_within_thresholds"] for row in document["rows"]}
    shares = {row["ell"]: row["deleted_share"] for row in document["rows"]}
    assert verdicts == {ell: ("pass" if shares[ell] <= 0.3 else "refuse") for ell in shares}
    assert set(verdicts.values()) == {"pass", "refuse"}  # the table deletes less than 30 % at ℓ = 2, more at ℓ = 4


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        (["--ell-values", "1,3"], "every ℓ must be an integer in [2, 1000]"),
        (["--min-confidence-values", "0.5,x"], "give numbers separated by commas"),
        (["--model", "kl", "--seed", "3"], "--seed: not used by --model kl"),
    ],
)
def test_bad_options_are_usage_errors(tmp_path, arguments, expected):
    result = CliRunner().invoke(main, ["plan", "--input", str(TABLE), *COLUMNS, "--home", str(tmp_path), *arguments])
    assert result.exit_code == 2 and expected in result.output


def test_a_column_not_in_the_table_is_refused_like_run_refuses_it(tmp_path):
    result = CliRunner().invoke(
        main,
        ["plan", "--input", str(TABLE), "--quasi-identifiers", "zip,postcode", "--sensitive-attributes", "disease,drug"],
    )
    assert result.exit_code == 2
    assert "nothing planned" in result.output and "postcode" in result.output


def test_an_ell_the_table_cannot_take_is_refused_by_the_preflight_row(tmp_path):
    result = _plan(tmp_path, "--json", "--ell-values", "2,5", "--min-confidence-values", "0.8")
    assert result.exit_code == 0, result.output
    rows = {row["ell"]: row for row in json.loads(result.output)["rows"]}
    # job has 4 distinct values: ℓ = 5 cannot be ℓ-diverse (msa-release run refuses it before running)
    assert rows[5]["gates"]["preflight"] == "refuse" and "'job' (4 distinct values)" in rows[5]["refusal"]
    assert rows[5]["n_deleted"] is None and rows[2]["gates"]["preflight"] == "pass"


def _adult_plan(tmp_path, *arguments: str):
    return CliRunner().invoke(
        main,
        ["plan", "--json", "--home", str(tmp_path / "home"), "--ell-values", "3", "--min-confidence-values", "0.8", *arguments],
        catch_exceptions=False,
    )


def test_the_adult_example_is_planned_with_the_threshold_run_gives_it(tmp_path):
    # `msa-release run` of the Adult example (no --input) sets max_deleted_share 0.25 (issue 15); plan predicts that run
    result = _adult_plan(tmp_path)
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    assert document["max_deleted_share"] == 0.25
    assert document["max_suppressed_share"] == 0.1
    (row,) = document["rows"]
    assert 0.1 < row["deleted_share"] <= 0.25  # about 19.8 %: refused at 0.10, published at 0.25
    assert row["gates"]["utility_within_thresholds"] == "pass"


def test_a_threshold_given_to_plan_wins_over_the_adult_examples(tmp_path):
    result = _adult_plan(tmp_path, "--max-deleted-share", "0.1")
    assert result.exit_code == 0, result.output
    document = json.loads(result.output)
    assert document["max_deleted_share"] == 0.1
    assert document["rows"][0]["gates"]["utility_within_thresholds"] == "refuse"


def test_a_project_error_the_command_does_not_report_is_one_line_not_a_traceback(tmp_path):
    # the home's secret lost while its registry holds a release (pipeline.release.home_secret): plan stops on one line
    registry = tmp_path / "home" / "registry"
    registry.mkdir(parents=True)
    (registry / "20261127T000000Z-00000000.parquet").write_bytes(b"an entry")
    result = _plan(tmp_path)
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit)
    assert "Error: the home secret" in result.output and "restore secret.key" in result.output
    assert "Traceback" not in result.output


def test_per_attribute_ell_is_refused_with_what_to_do(tmp_path):
    # red team, session 38: the CLI said "not a valid integer range" and the plan job planned a uniform ℓ = max ℓ_i as
    # the configured setting (13,482 deleted, refused) where the run with ℓ_i deleted 4,722 and published
    result = _plan(tmp_path, "--ell", "disease=3,drug=2,job=2")
    assert result.exit_code == 2
    said = " ".join(result.output.split())
    assert "nothing planned: per-attribute ℓ (ell_per_attribute disease=3, drug=2, job=2) is not predicted" in said
    assert "msa-release run --no-promote --ell" in said
    from pipeline.evaluation.plan import PerAttributeEllNotPlanned, release_plan
    from pipeline.resources import ReleaseSettings

    settings = ReleaseSettings(
        input_path=str(TABLE),
        quasi_identifiers=["zip", "sex"],
        sensitive_attributes=["disease", "drug", "job"],
        ell=3,
        ell_per_attribute={"disease": 3, "drug": 2, "job": 2},
    )
    with pytest.raises(PerAttributeEllNotPlanned, match="is not predicted by the plan"):
        release_plan(settings, secret=bytes(32))
