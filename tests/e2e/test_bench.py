"""Smoke-sized release benchmark: the code path of `make bench` on two small synthetic tables
(one run each, into tmp_path). No timing assertions: only that every figure is produced and the
back ends and SID methods agree."""

import json
import os
import subprocess
import sys
import time

import pytest

from benchmarks import bench_release as bench


def test_parse_count():
    assert bench.parse_count("1m") == 1_000_000
    assert bench.parse_count("250k") == 250_000
    assert bench.parse_count("2.5M") == 2_500_000
    assert bench.parse_count("5000") == 5000
    with pytest.raises(ValueError, match="not adult, kdd or a number"):
        bench.parse_count("huge")


def _fake(name, records, wall, peak=None):
    return {
        "name": name,
        "records": records,
        "runs": [],
        "summary": {"successful_runs": 1, "median_wall_seconds": wall, "peak_rss_mb": peak},
    }


def test_targets_pass_miss_and_not_measured():
    results = {"datasets": [_fake("1m", 1_000_000, 20.0), _fake("10m", 10_000_000, 280.0, peak=9000.0)]}
    targets = {t["target"]: t for t in bench.evaluate_targets(results)}
    assert targets["end_to_end_10m_seconds"]["verdict"] == "pass"  # 280 s <= 300 s
    assert targets["peak_rss_10m_mb"]["verdict"] == "miss"  # 9000 MiB > 8192 MiB
    assert targets["time_per_record_ratio_1m_to_10m"]["value"] == 1.4  # (280/10M) / (20/1M)
    assert targets["time_per_record_ratio_1m_to_10m"]["verdict"] == "miss"
    assert targets["adult_release_wall_seconds"]["verdict"] == "not measured"
    assert targets["adult_algorithms_seconds"]["verdict"] == "not measured"


def test_memory_bounds_per_value_length_and_distinct_count(tmp_path):
    results = {"datasets": [_fake("long-values", 30_718, 60.0, peak=900.0), _fake("distinct-100k", 100_000, 400.0, peak=1500.0)]}
    targets = {t["target"]: t for t in bench.evaluate_targets(results)}
    assert targets["long_value_peak_rss_mb"]["verdict"] == "pass"  # 900 MiB <= 1536 MiB
    assert targets["distinct_100k_peak_rss_mb"]["verdict"] == "pass"  # 1500 MiB <= 2048 MiB
    assert targets["distinct_100k_wall_seconds"]["verdict"] == "miss"  # 400 s > 300 s
    datasets = bench.resolve_datasets(["long-values", "distinct-100k"], tmp_path)
    assert [d.stress for d in datasets] == ["long-values", "distinct-100k"]
    assert "--max-value-length" in datasets[0].run_arguments and "--max-value-length" not in datasets[1].run_arguments


@pytest.mark.slow
def test_smoke_benchmark_writes_every_output(tmp_path):
    # Just above Adult's 30,718 rows: every Adult row once plus a few hundred / thousand more, so the
    # tables have Adult's 7 strong rules and pass the gates (a random subset of a few thousand rows
    # has other rules and can be refused by gate 4; the benchmark records that, but the smoke test
    # must go through publish).
    output, work = tmp_path / "report", tmp_path / "work"
    results = bench.run_benchmark(
        ["31000", "32k"], output_dir=output, work_dir=work, runs=1, algorithms_max_records=0, log=lambda message: None
    )

    written = json.loads((output / "results.json").read_text())
    assert written["datasets"] == json.loads(json.dumps(results["datasets"]))
    assert [d["name"] for d in written["datasets"]] == ["31000", "32k"]
    for dataset, rows in zip(written["datasets"], (31_000, 32_000), strict=True):
        assert dataset["records"] == rows
        assert (work / "cache" / f"adult_synthetic_{rows}_seed0.parquet").exists()
        run = dataset["runs"][0]
        assert run["exit_status"] == 0, run.get("error")
        summary = dataset["summary"]
        assert summary["successful_runs"] == 1
        assert set(bench.STAGES) <= set(summary["stages"])
        for figures in summary["stages"].values():
            assert figures["median_seconds"] >= 0
        assert summary["peak_rss_mb"] > 0
        comparisons = dataset["comparisons"]
        assert "error" not in comparisons, comparisons.get("error")
        assert comparisons["rule_sets_equal"] is True
        assert comparisons["sid_outputs_identical"] is True
        assert comparisons["rule_backends_compared"] == ["counting", "duckdb", "mlxtend-apriori", "mlxtend-fpgrowth"]
        assert comparisons["rule_mining"]["counting"]["n_rules"] == 7  # Adult's rules (README)
        assert "algorithms_seconds" not in comparisons  # above algorithms_max_records
        for attribute in bench.ADULT_SENSITIVE_ATTRIBUTES:
            assert comparisons["sid_creation"][attribute]["identical"] is True
    assert set(bench.TARGETS) | set(bench.SHARDED_TARGETS) <= {t["target"] for t in written["targets"]}
    for dataset in written["datasets"]:
        summary = dataset["summary"]
        assert dataset["engine"] == "memory"
        assert summary["tree_peak_rss_mb"] >= summary["peak_rss_mb"]  # the tree includes the main process
        assert summary["microseconds_per_record"] > 0
        assert set(dataset["table_digests"]) == set(bench.DIGEST_TABLES)
    assert written["machine"]["python"] and written["machine"]["packages"]["duckdb"]

    markdown = (output / "README.md").read_text()
    assert "| load |" in markdown and "| 32k |" in markdown and "## Targets" in markdown
    assert (output / "scaling.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_process_tree_sampler_counts_a_child_s_memory_and_the_watched_directory(tmp_path):
    # a parent (small) whose child holds 200 MiB for a second and writes 3 MB into the watched directory (then
    # removes it): the tree's peak includes the child, the directory's peak the file
    staged = tmp_path / "shards" / "part.bin"
    child = (
        "import os, time; b = bytearray(200 * 1024 * 1024); b[::4096] = b'x' * len(b[::4096]); "
        f"os.makedirs({str(staged.parent)!r}); open({str(staged)!r}, 'wb').write(b'z' * 3_000_000); time.sleep(1.5); "
        f"os.remove({str(staged)!r})"
    )
    parent = f"import subprocess, sys; subprocess.run([sys.executable, '-c', {child!r}])"
    process = subprocess.Popen([sys.executable, "-c", parent])
    with bench.ProcessTreeSampler(process.pid, interval=0.05, watch=tmp_path / "shards", watch_every=2) as sampler:
        process.wait(timeout=60)
    assert sampler.available and sampler.samples > 0
    assert sampler.peak_processes >= 2
    assert sampler.peak_bytes >= 200 * 1024 * 1024
    assert sampler.peak_watch_bytes == 3_000_000 and not staged.exists()


def test_a_timed_out_run_is_killed_with_its_whole_process_tree():
    grandchild = "import time; time.sleep(120)"
    parent = (
        f"import subprocess, sys, time; p = subprocess.Popen([sys.executable, '-c', {grandchild!r}]); "
        "print(p.pid, flush=True); time.sleep(120)"
    )
    completed, sampler = bench._run_sampled([sys.executable, "-c", parent], timeout=3.0, interval=0.05)
    assert completed.returncode == -9 and "timed out after 3 s" in completed.stderr
    pid = int(completed.stdout.split()[0])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and os.path.exists(f"/proc/{pid}") and _state(pid) != "Z":
        time.sleep(0.1)
    assert not os.path.exists(f"/proc/{pid}") or _state(pid) == "Z"  # gone (or a zombie awaiting its reaper)
    assert sampler.peak_processes >= 2


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return ""
