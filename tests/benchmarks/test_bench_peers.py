"""The peers section of the benchmark (issue 18): summaries, targets with pass / miss and the report, on given
numbers (no run, no timing). The limits are issue 18's: warm default mixed on Adult ≤ 6 s and ≤ 400 MiB; --model kl
at (3, 3) and (5, 2) no slower than anjana at the same (k, ℓ); 1M default mixed ≤ 20 s and ≤ 1 GiB."""

import sys

import pytest

from benchmarks import bench_peers as peers
from benchmarks import bench_release as bench


def _measurement(wall, cpu, peak, status=0):
    return {"exit_status": status, "wall_seconds": wall, "cpu_seconds": cpu, "tree_peak_rss_mb": peak}


def _summary(wall, cpu=1.0, peak=100.0):
    return {"successful_runs": 3, "runs": 3, "median_wall_seconds": wall, "median_cpu_seconds": cpu, "tree_peak_rss_mb": peak}


def _targets(summaries, not_run=None):
    return {t["target"]: t for t in peers.evaluate_peer_targets(summaries, not_run)}


def test_summary_is_the_median_of_wall_and_cpu_and_the_largest_peak_over_successful_runs():
    runs = [_measurement(9.0, 4.0, 380.0), _measurement(5.0, 3.0, 410.0), _measurement(7.0, 8.0, 390.0)]
    runs.append(_measurement(1.0, 0.5, 900.0, status=1))  # a failed run counts in "runs", never in a figure
    summary = peers.summarize_peer_runs(runs)
    assert summary["successful_runs"] == 3 and summary["runs"] == 4
    assert summary["median_wall_seconds"] == 7.0
    assert summary["median_cpu_seconds"] == 4.0
    assert summary["tree_peak_rss_mb"] == 410.0
    assert (summary["min_wall_seconds"], summary["max_wall_seconds"]) == (5.0, 9.0)
    assert peers.summarize_peer_runs([_measurement(1.0, 1.0, 1.0, status=2)]) == {"successful_runs": 0, "runs": 1}


def test_mixed_release_targets_are_six_seconds_and_400_mib():
    passing = _targets({"msa-mixed-l3": _summary(5.9, peak=399.0)})
    assert passing["peers_mixed_wall_seconds"]["verdict"] == "pass"
    assert passing["peers_mixed_tree_peak_rss_mb"]["verdict"] == "pass"
    missing = _targets({"msa-mixed-l3": _summary(14.2, peak=950.0)})  # the issue's idle-machine figure and its peak
    assert missing["peers_mixed_wall_seconds"]["verdict"] == "miss"
    assert missing["peers_mixed_tree_peak_rss_mb"]["verdict"] == "miss"
    assert missing["peers_mixed_wall_seconds"]["value"] == 14.2 and missing["peers_mixed_wall_seconds"]["limit"] == 6.0


def test_kl_is_compared_with_anjana_at_the_same_k_and_ell():
    targets = _targets(
        {
            "msa-kl-k3-l3": _summary(4.0),
            "anjana-k3-l3": _summary(5.0),
            "msa-kl-k5-l2": _summary(6.0),
            "anjana-k5-l2": _summary(4.0),
        }
    )
    assert targets["peers_kl_k3_l3_over_anjana"]["value"] == 0.8
    assert targets["peers_kl_k3_l3_over_anjana"]["verdict"] == "pass"
    assert targets["peers_kl_k5_l2_over_anjana"]["value"] == 1.5
    assert targets["peers_kl_k5_l2_over_anjana"]["verdict"] == "miss"
    tie = _targets({"msa-kl-k3-l3": _summary(5.0), "anjana-k3-l3": _summary(5.0)})
    assert tie["peers_kl_k3_l3_over_anjana"]["verdict"] == "pass"  # "no slower": equal passes


def test_a_peer_that_did_not_run_gives_not_measured_with_the_reason():
    reason = "anjana 1.2.3 could not be installed (uv pip install): no network"
    targets = _targets({"msa-kl-k3-l3": _summary(4.0)}, {"anjana-k3-l3": reason, "anjana-k5-l2": reason})
    assert targets["peers_kl_k3_l3_over_anjana"]["verdict"] == "not measured"
    assert reason in targets["peers_kl_k3_l3_over_anjana"]["note"]
    assert targets["peers_mixed_wall_seconds"]["verdict"] == "not measured"
    assert {t["issue"] for t in targets.values()} == {18}


def test_report_puts_both_tools_side_by_side_with_the_verdicts():
    summaries = {
        "msa-mixed-l3": _summary(14.2, 15.5, 950.0),
        "msa-kl-k3-l3": _summary(4.0, 3.1, 300.0),
        "anjana-k3-l3": _summary(5.5, 3.5, 105.0),
    }
    runs = {
        run.key: {"label": run.label, "summary": summaries.get(run.key, {}), "measurements": []}
        for run in peers.PEER_RUNS
        if run.key in summaries
    }
    runs["anjana-k5-l2"] = {"label": "anjana 1.2.3 k=5 ℓ=2", "not_run": "no uv", "measurements": []}
    results = {
        "runs": runs,
        "rounds": 3,
        "arx": peers.arx_status(None),
        "targets": peers.evaluate_peer_targets(summaries, {"anjana-k5-l2": "no uv"}),
    }
    text = peers.render_peers_markdown(results)
    assert "| msa mixed ℓ=3 (`msa-release run`) | 14.20 | 15.50 | 950 | 3/3 |" in text
    assert "| anjana 1.2.3 k=3 ℓ=3 | 5.50 | 3.50 | 105 | 3/3 |" in text
    assert "| anjana 1.2.3 k=5 ℓ=2 | not run | — | — | no uv |" in text
    assert "| ARX | not run (no jar) |" in text
    assert "| **miss** |" in text and "| **pass** |" in text and "| **not measured** |" in text


def test_msa_configurations_run_the_models_of_the_issue_with_the_readme_settings(tmp_path):
    arguments = {run.key: run.msa_arguments() for run in peers.PEER_RUNS if run.tool == "msa"}
    assert arguments == {
        "msa-mixed-l3": ["--ell", "3"],
        "msa-rating-l3": ["--model", "rating", "--ell", "3", "--allow-disclosure"],  # README's baseline command
        "msa-kl-k3-l3": ["--model", "kl", "--k", "3", "--ell", "3"],
        "msa-kl-k5-l2": ["--model", "kl", "--k", "5", "--ell", "2"],
    }
    mixed = peers.peer_command(peers.PEER_RUNS[0], work_dir=tmp_path, anjana_python=None, anjana_input=tmp_path / "in.csv")
    assert mixed[1:4] == ["run", "--max-deleted-share", "0.25"]
    assert mixed[-2:] == ["--home", str(tmp_path / "homes" / "msa-mixed-l3")]
    anjana = next(run for run in peers.PEER_RUNS if run.key == "anjana-k5-l2")
    command = peers.peer_command(anjana, work_dir=tmp_path, anjana_python="/venv/bin/python", anjana_input=tmp_path / "in.csv")
    assert command[:2] == ["/venv/bin/python", str(peers.ANJANA_SCRIPT)]
    assert command[-4:-1] == ["5", "2", "5"]  # k, ℓ, suppression %
    with pytest.raises(ValueError, match="not an msa-release run"):
        anjana.msa_arguments()


def test_size_section_marks_the_1m_target_of_issue_18():
    def entry(wall, tree):
        summary = {"successful_runs": 1, "median_wall_seconds": wall, "peak_rss_mb": 700.0, "tree_peak_rss_mb": tree}
        return {"name": "1m", "records": 1_000_000, "runs": [], "summary": summary}

    targets = {t["target"]: t for t in bench.evaluate_targets({"datasets": [entry(33.5, 1638.0)]})}
    assert targets["mixed_1m_wall_seconds"]["verdict"] == "miss"  # 33.5 s > 20 s
    assert targets["mixed_1m_peak_rss_mb"]["verdict"] == "miss"  # the tree's 1,638 MiB, not the process's 700
    assert targets["mixed_1m_peak_rss_mb"]["issue"] == 18
    targets = {t["target"]: t for t in bench.evaluate_targets({"datasets": [entry(19.0, 1000.0)]})}
    assert targets["mixed_1m_wall_seconds"]["verdict"] == targets["mixed_1m_peak_rss_mb"]["verdict"] == "pass"
    # the default engine (local) counts when it was measured; the memory entry beside it does not
    local = {**entry(5.0, 500.0), "engine_spec": {"name": "local", "workers": 2}}
    targets = {t["target"]: t for t in bench.evaluate_targets({"datasets": [entry(33.5, 1638.0), local]})}
    assert targets["mixed_1m_wall_seconds"]["verdict"] == targets["mixed_1m_peak_rss_mb"]["verdict"] == "pass"
    assert "local engine" in targets["mixed_1m_wall_seconds"]["description"]
    spark = {**entry(5.0, 500.0), "engine_spec": {"name": "spark"}}  # not the default's engine: does not count
    targets = {t["target"]: t for t in bench.evaluate_targets({"datasets": [spark]})}
    assert targets["mixed_1m_wall_seconds"]["verdict"] == "not measured"


def test_the_targets_quote_the_stack_floor_when_it_was_measured():
    summaries = {
        "msa-mixed-l3": _summary(8.4, peak=418.0),
        "msa-kl-k3-l3": _summary(10.95),
        "anjana-k3-l3": _summary(3.12),
        peers.FLOOR_KEY: _summary(4.03, peak=322.4),
    }
    targets = _targets(summaries)
    assert targets["peers_mixed_wall_seconds"]["note"].endswith("the stack's imports alone (stack-floor): 4.03 s")
    assert targets["peers_mixed_tree_peak_rss_mb"]["note"].endswith("the stack's imports alone (stack-floor): 322 MiB")
    kl = targets["peers_kl_k3_l3_over_anjana"]
    assert kl["value"] == 3.51 and kl["verdict"] == "miss"  # 10.95 / 3.12; the floor changes no verdict
    assert kl["note"] == (
        "msa-release 10.95 s, anjana 3.12 s (median wall); the stack's imports alone (stack-floor): 4.03 s, "
        "1.29 x anjana's whole command"
    )
    without = _targets({key: value for key, value in summaries.items() if key != peers.FLOOR_KEY})
    assert "stack" not in without["peers_mixed_wall_seconds"]["note"] + without["peers_kl_k3_l3_over_anjana"]["note"]
    assert [t["target"] for t in peers.evaluate_peer_targets(summaries)] == [
        t["target"] for t in peers.evaluate_peer_targets({})
    ]  # no target of its own: the floor is context, not a target


def test_the_stack_floor_runs_its_module_in_this_interpreter(tmp_path):
    floor = next(run for run in peers.PEER_RUNS if run.key == peers.FLOOR_KEY)
    command = peers.peer_command(floor, work_dir=tmp_path, anjana_python=None, anjana_input=tmp_path / "in.csv")
    assert command == [sys.executable, "-m", "benchmarks.stack_floor"]
    with pytest.raises(ValueError, match="not an msa-release run"):
        floor.msa_arguments()
    with pytest.raises(ValueError, match="needs k and ℓ"):  # an anjana row never runs with "None" arguments
        peers.peer_command(
            peers.PeerRun("anjana-x", "anjana", "anjana"), work_dir=tmp_path, anjana_python="python", anjana_input=tmp_path
        )


def test_run_peers_warms_up_once_then_runs_round_robin_and_writes_the_report(monkeypatch, tmp_path):
    order = []

    def fake_measure(command, **_kwargs):
        order.append(command[-1])
        return _measurement(1.0, 0.5, 50.0)

    monkeypatch.setattr(peers, "ensure_peers_environment", lambda *_a, **_k: (None, "uv is not installed"))
    monkeypatch.setattr(peers, "peer_command", lambda run, **_k: ["true", run.key])
    monkeypatch.setattr(peers, "measure_command", fake_measure)
    monkeypatch.setattr(bench, "machine_description", lambda: {"cpu_model": "test", "load_average_at_start": [0.0]})
    results = peers.run_peers(output_dir=tmp_path / "report", work_dir=tmp_path / "work", rounds=2, log=lambda *_: None)
    measured = [run.key for run in peers.PEER_RUNS if run.tool != "anjana"]  # msa-release's runs and the stack floor
    assert measured[-1] == peers.FLOOR_KEY and len(measured) == 5
    assert order == measured * 3  # one warm-up round (not measured), then 2 rounds in the same order
    assert all(len(results["runs"][key]["measurements"]) == 2 for key in measured)
    assert results["runs"]["anjana-k3-l3"]["not_run"] == "uv is not installed"
    text = (tmp_path / "report" / "peers.md").read_text()
    assert "| anjana 1.2.3 k=3 ℓ=3 | not run | — | — | uv is not installed |" in text
    assert (tmp_path / "report" / "peers.json").is_file()


def test_a_busy_sitting_is_flagged_in_the_report():
    idle = {"machine": {"usable_cpus": 2, "load_average_at_start": [0.1, 0.2, 0.3]}, "load_average_at_end": [1.9, 1.0, 0.5]}
    assert peers.busy_machine_note(idle) is None
    assert "Busy machine" not in peers.render_peers_markdown({**idle, "runs": {}, "targets": []})
    busy = {"machine": {"usable_cpus": 2, "load_average_at_start": [0.5, 0.2, 0.3]}, "load_average_at_end": [6.4, 5.0, 4.0]}
    note = peers.busy_machine_note(busy)
    assert note is not None and "6.4 at the end" in note and "0.5" not in note and "2 usable CPUs" in note
    assert note in peers.render_peers_markdown({**busy, "runs": {}, "targets": []})
