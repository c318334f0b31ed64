"""Issue 16 on the whole of Adult: per-attribute ℓ (education 4, occupation 3, age 2, relationship 2) publishes with
the mixed model (launchpad run config) and with Rating (``msa-release run``), and the published files keep each
attribute's own ℓ_i, counted here from the release's Parquet files."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
from click.testing import CliRunner

from pipeline.cli import main
from pipeline.release.publish import read_latest
from tests.jobs import run_job

ELL_PER_ATTRIBUTE = {"education": 4, "occupation": 3, "age": 2, "relationship": 2}


def fewest_values_per_sid(release: Path) -> dict[str, int]:
    id_table = pd.read_parquet(release / "id_table.parquet")
    per_sid = id_table.groupby(["attribute", "sid"], observed=True)["value"].nunique()
    return {str(attribute): int(per_sid.loc[attribute].min()) for attribute in per_sid.index.get_level_values(0).unique()}


def test_the_mixed_model_publishes_adult_with_each_attribute_s_ell_and_groups_of_the_largest(tmp_path):
    home = tmp_path / "home"
    result = run_job(home, "release", {"ell_per_attribute": ELL_PER_ATTRIBUTE})  # ell left at its default, 3
    assert result.success
    release = read_latest(home / "releases")
    manifest = json.loads((release / "manifest.json").read_text())
    assert manifest["ell"] == 4  # L = max ℓ_i
    assert manifest["ell_per_attribute"] == ELL_PER_ATTRIBUTE
    assert {g["name"]: g["status"] for g in manifest["checks"]} == dict.fromkeys(
        [g["name"] for g in manifest["checks"]], "passed"
    )
    # every SID of attribute i holds exactly ℓ_i values (eligibility leaves no residual), not L
    assert fewest_values_per_sid(release) == ELL_PER_ATTRIBUTE
    sac = pd.read_parquet(release / "sac_released.parquet")
    groups = sac.groupby("group_id")
    assert set(groups.size()) == {4}
    assert all(set(groups[a].nunique()) == {4} for a in ELL_PER_ATTRIBUTE)
    disclosure = next(g for g in manifest["checks"] if g["name"] == "disclosure_within_bound")["observed"]
    assert {r["consequent_attribute"]: r["bound"] for r in disclosure["per_rule"]} == {"occupation": 1 / 3, "relationship": 1 / 2}
    assert all(r["max_probability"] <= 1 / 4 for r in disclosure["per_rule"])  # SAC~ groups of 4
    assert "ℓ per sensitive attribute" in (release / "report.html").read_text()
    # the audit reads ℓ_i from the manifest: a SID of age with 2 values is not below L = 4
    raw = Path(__file__).resolve().parents[2] / "data" / "adult" / "adult.data"
    audited = CliRunner().invoke(main, ["audit", str(release), "--raw", str(raw), "--output", str(tmp_path / "audit.json")])
    assert audited.exit_code == 0, audited.output
    report = json.loads((tmp_path / "audit.json").read_text())
    assert report["structure"]["n_sids_below_ell"] == 0


def test_rating_publishes_adult_with_each_attribute_s_ell_from_the_command_line(tmp_path):
    home = tmp_path / "home"
    outcome = CliRunner().invoke(
        main,
        [
            "run",
            "--model",
            "rating",
            "--ell",
            "education=4,occupation=3,age=2,relationship=2",
            "--allow-disclosure",
            "--quiet",
            "--home",
            str(home),
        ],
    )
    assert outcome.exit_code == 0, outcome.output
    assert "ell per attr   education=4, occupation=3, age=2, relationship=2" in outcome.output
    release = next((home / "comparisons").iterdir())
    manifest = json.loads((release / "manifest.json").read_text())
    assert manifest["ell_per_attribute"] == ELL_PER_ATTRIBUTE
    statuses = {g["name"]: g["status"] for g in manifest["checks"]}
    assert statuses["attribute_table_is_l_diverse"] == "passed"
    assert statuses["disclosure_within_bound"] == "failed_overridden"  # Rating: the strong-rule attack
    assert fewest_values_per_sid(release) == ELL_PER_ATTRIBUTE
