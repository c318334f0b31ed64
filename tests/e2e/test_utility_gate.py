"""The utility gate end to end (issue 15: heavy loss must not be published with an all-green verdict).

SPEC's golden example B (18 records, ℓ = 3) with whole-record deletion is the deliberately lossy candidate: SPEC
deletes records 8 and 10 and the eligibility step at least one more (``tests/e2e/test_pipeline.py``), so at least 3 of
its 18 eligible records (16.7 %) go, above the default ``max_deleted_share`` of 10 %. The CLI refuses it, naming the
share, the threshold and the option that accepts the loss; raising the threshold publishes it and records the override
in the manifest, the summary and report.html's banner."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from pipeline.cli import main
from pipeline.release.publish import read_latest
from tests.conftest import example_frame, example_quasi_identifiers


@pytest.fixture
def example_b(golden, tmp_path, monkeypatch) -> tuple[dict, Path]:
    monkeypatch.setenv("MSA_RELEASE_HOME", str(tmp_path / "unused-home"))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "unused-dagster"))
    monkeypatch.setenv("GX_ANALYTICS_ENABLED", "false")
    example = golden["example_B"]
    path = tmp_path / "example_b.csv"
    example_frame(example).drop(columns="row_id").to_csv(path, index=False)
    return example, path


def run_example(example: dict, path: Path, home: Path, *extra: str):
    return CliRunner().invoke(
        main,
        [
            "run",
            "--input",
            str(path),
            "--quasi-identifiers",
            ",".join(example_quasi_identifiers(example)),
            "--sensitive-attributes",
            ",".join(example["SA"]),
            "--ell",
            str(example["l"]),
            "--min-confidence",
            str(example["min_conf"]),
            # SPEC's reference algorithms (the golden groups), with the default whole-record deletion
            "--randomness",
            "spec-reference",
            "--grouping",
            "p1",
            "--min-support",
            "1",
            "--home",
            str(home),
            *extra,
        ],
    )


def test_a_lossy_release_is_refused_and_the_cli_says_what_to_do(example_b, tmp_path):
    example, path = example_b
    home = tmp_path / "home"
    outcome = run_example(example, path, home)
    assert outcome.exit_code == 1, outcome.output
    assert "NO release published" in outcome.output
    assert read_latest(home / "releases") is None
    # the refusal diagnosis (issue 15): what would be lost, its cause, and computed options, the threshold last
    found = re.search(r"why: (\d+) of (\d+) records \(([\d.]+) %\) would be deleted", outcome.output)
    assert found, outcome.output
    deleted, eligible, percent = int(found[1]), int(found[2]), float(found[3])
    assert eligible == len(example["input"]) == 18
    assert deleted >= len(example["deleted_ids"]) + 1
    assert percent == pytest.approx(round(100 * deleted / eligible, 1))
    suggested = re.search(r"last resort, --max-deleted-share ([\d.]+): publishes", outcome.output)
    assert suggested and deleted / eligible <= float(suggested[1]) < deleted / eligible + 0.01
    assert "--ell 2" in outcome.output and "drop sensitive attribute" in outcome.output
    (page,) = (home / "refusals").glob("*/refusal.html")
    assert f"refusal: {page}" in outcome.output
    # the gate's own line carries its figures
    assert re.search(r"gate utility_within_thresholds: FAILED \{.*\"deleted_share\"", outcome.output)


def test_raising_the_threshold_publishes_and_records_every_override(example_b, tmp_path):
    example, path = example_b
    home = tmp_path / "home"
    outcome = run_example(example, path, home, "--max-deleted-share", "0.6")
    assert outcome.exit_code == 0, outcome.output
    release = read_latest(home / "releases")
    manifest = json.loads((release / "manifest.json").read_text())
    utility = manifest["utility"]
    eligible = len(example["input"])
    assert utility["records_eligible"] == eligible == manifest["n_input"] - manifest["n_dropped_missing"]
    assert utility["records_deleted"] == manifest["n_deleted"] >= len(example["deleted_ids"]) + 1
    assert utility["deleted_share"] == pytest.approx(manifest["n_deleted"] / eligible)
    assert (utility["max_deleted_share"], utility["max_suppressed_share"], utility["passed"]) == (0.6, 0.1, True)
    released = manifest["n_sac_released"] + manifest["n_attribute_table"]
    assert utility["attribute_cells"] == {attribute: released for attribute in example["SA"]}
    assert utility["suppressed_cells"] == {attribute: 0 for attribute in example["SA"]}
    overrides = {o["setting"]: o for o in manifest["overrides"]}
    assert set(overrides) == {"max_deleted_share", "randomness", "grouping"}
    assert (overrides["max_deleted_share"]["value"], overrides["max_deleted_share"]["default"]) == (0.6, 0.1)
    assert overrides["randomness"]["value"] == "spec-reference" and overrides["grouping"]["value"] == "p1"
    assert all(o["effect"] for o in overrides.values())
    # the summary: the deleted share against its threshold, one line per override
    percent = f"{100 * manifest['n_deleted'] / eligible:.1f} %"
    assert f"deleted {manifest['n_deleted']} of {eligible} eligible records ({percent}; limit 60.0 %)" in outcome.output
    assert "override       max_deleted_share = 0.6 (default 0.1)" in outcome.output
    assert "override       randomness = spec-reference (default home-secret)" in outcome.output
    # report.html's banner: the verdict, the percentage and every override
    page = (release / "report.html").read_text()
    banner = re.search(r'<div class="banner banner-warn" data-utility="passed">(.*?)</div>', page, re.S)
    assert banner and percent in banner[1]
    assert set(re.findall(r'data-override="([^"]+)"', banner[1])) == set(overrides)
    assert {c["name"]: c["status"] for c in manifest["checks"]}["utility_within_thresholds"] == "passed"
