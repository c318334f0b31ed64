"""``msa-release run`` on a release refused for data loss (issue 15): the "why" block and numbered options replace the
generic paragraph, and refusal.html is written to the private home.

The run is a tiny in-process job whose blocking check is named ``utility_within_thresholds`` (the utility gate, by
name) and fails with the shared figures but without a diagnosis: the command then reads the input again, mines its
rules and diagnoses the loss itself. The input is the hand table of tests/core/test_diagnosis.py (health = yes on 18
of 20 records; 16 deleted at ℓ = 2). Gate 4's own diagnosis (in its metadata) is run end to end in
tests/e2e/test_bad_input.py and tests/e2e/test_pipeline.py.
"""

from __future__ import annotations

import dagster as dg
from click.testing import CliRunner

import pipeline.cli.run as run_command
from pipeline.cli import main
from tests.core.test_diagnosis import HAND_TABLE_OPTIONS, write_hand_table_csv


@dg.asset
def candidate() -> int:
    return 1


@dg.asset_check(asset=candidate, blocking=True)
def utility_within_thresholds() -> dg.AssetCheckResult:
    return dg.AssetCheckResult(passed=False, metadata={"records_eligible": 20, "records_deleted": 16, "deleted_share": 0.8})


def test_a_utility_refusal_prints_the_diagnosis_and_writes_refusal_html(tmp_path, monkeypatch):
    path = write_hand_table_csv(tmp_path / "dominant.csv")
    result = dg.materialize([candidate, utility_within_thresholds], raise_on_error=False)
    assert not result.success
    home = tmp_path / "home"
    monkeypatch.setattr(run_command, "preflight", lambda config, home_option: home)
    monkeypatch.setattr(run_command, "hold_release_lock", lambda home, wait, wait_timeout: None)
    monkeypatch.setattr(run_command, "execute_job", lambda job, config, **options: (result, home))
    outcome = CliRunner().invoke(
        main,
        [
            "run",
            "--input",
            str(path),
            *HAND_TABLE_OPTIONS,
            "--home",
            str(home),
        ],
    )
    assert outcome.exit_code == 1, outcome.output
    output = outcome.output
    assert "gate utility_within_thresholds: FAILED" in output
    assert "why: 16 of 20 records (80.0 %) would be deleted" in output
    assert "health = yes is held by 90.0 % of the records: at least 16 records must be deleted" in output
    assert "1. drop sensitive attribute `health` (--sensitive-attributes without it)" in output
    assert "--min-confidence 0.91: 1 strong rule(s) left, rule holders 18 → 8" in output
    assert "ℓ is already the minimum (2)" in output and "lower --ell" not in output
    (page,) = (home / "refusals").glob("*/refusal.html")
    assert page.parent.name == result.run_id and f"refusal: {page}" in output
    text = page.read_text() + output
    assert not any(f"Z{k:05d}" in text for k in range(20))
