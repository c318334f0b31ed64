"""The (k, ℓ) quality measurement (``msa-release kl-quality``): invariants of its rows and the
report it writes, on a reduced plan over Adult."""

import json

import pytest
from click.testing import CliRunner

from pipeline.cli import main


@pytest.fixture(scope="module")
def quick_report(tmp_path_factory):
    """The quick plan, written where the command writes without --output: under the home (issue 15: never into the
    committed reports/)."""
    home = tmp_path_factory.mktemp("kl_quality") / "home"
    result = CliRunner().invoke(main, ["kl-quality", "--quick"], env={"MSA_RELEASE_HOME": str(home)})
    assert result.exit_code == 0, result.output
    out = home / "kl_quality"
    assert (out / "results.json").is_file(), sorted(p.name for p in home.rglob("*"))
    return out


def test_exact_is_a_lower_bound_for_every_method(quick_report):
    results = json.loads((quick_report / "results.json").read_text())
    assert results["small"], "no feasible small table was measured"
    for row in results["small"]:
        assert row["ratio"] >= 1.0 - 1e-9 and row["blocked_ratio"] >= 1.0 - 1e-9
        assert row["greedy_optimal"] == (row["greedy_cost"] <= row["exact_cost"] + 1e-9)
        # the refinement never makes the greedy worse (one block on small tables)
        assert row["blocked_cost"] <= row["greedy_cost"] + 1e-9


def test_report_lists_every_measurement(quick_report):
    results = json.loads((quick_report / "results.json").read_text())
    report = (quick_report / "REPORT.md").read_text()
    assert (quick_report / "greedy_vs_exact_ratio.png").stat().st_size > 0
    assert (quick_report / "blocked_vs_greedy.png").stat().st_size > 0
    for row in results["medium"]:
        assert f"| {row['n']} | {row['k']} | {row['ell']} | {row['greedy_cost']:.0f} | {row['blocked_cost']:.0f} |" in report


def test_unknown_hierarchy_directory_is_exit_2(tmp_path):
    result = CliRunner().invoke(main, ["kl-quality", "--quick", "--output", str(tmp_path), "--hierarchies", str(tmp_path)])
    assert result.exit_code == 2
    assert "no hierarchy for quasi-identifier 'sex'" in result.output
