"""The release benchmark's harness (issue 17): engine options, the refusal when the CLI has no --engine, the
process-tree arithmetic and the target verdicts, on fake measurements (no run, no timing)."""

import pytest

from benchmarks import bench_release as bench

LIMITS = bench.SHARDED_TARGETS


def _entry(name, records, wall, *, engine="memory", workers=None, tree=None, digests=None, audit=None):
    spec = {"name": engine, "workers": workers if engine == "local" else None}
    summary = {
        "successful_runs": 1,
        "median_wall_seconds": wall,
        "median_until_published_seconds": wall - (audit or 0.0),
        "microseconds_per_record": round(wall / records * 1e6, 3),
        "tree_peak_rss_mb": tree,
        "peak_rss_mb": tree,
        "stages": {},
    }
    entry = {
        "name": name,
        "description": f"synthetic {name}",
        "engine": engine,
        "engine_spec": spec,
        "records": records,
        "runs": [],
        "summary": summary,
    }
    if digests is not None:
        entry["table_digests"] = digests
    return entry


def _targets(*entries):
    return {t["target"]: t for t in bench.evaluate_targets({"datasets": list(entries)})}


# engines and their options ---------------------------------------------------------------------


def test_engine_list_is_parsed_and_checked():
    assert bench.parse_engines("memory") == ["memory"]
    assert bench.parse_engines(" Local, spark,local ") == ["local", "spark"]
    for bad in ("", "dask", "local,ray"):
        with pytest.raises(ValueError, match="memory, local, spark"):
            bench.parse_engines(bad)


def test_each_engine_passes_its_own_run_options():
    # the in-memory job by name (the CLI's default engine is local, issue 17); nothing on a checkout without --engine
    assert bench.EngineSpec("memory", workers=8).run_arguments() == ["--engine", "memory"]
    assert bench.EngineSpec("memory").run_arguments(engine_option=False) == []
    assert bench.EngineSpec("local", workers=3).run_arguments() == ["--engine", "local", "--workers", "3"]
    assert bench.EngineSpec("spark").run_arguments() == ["--engine", "spark", "--spark-master", "local[2]"]
    remote = bench.EngineSpec("spark", spark_remote="sc://spark:15002")
    assert remote.run_arguments() == ["--engine", "spark", "--spark-remote", "sc://spark:15002"]
    assert remote.label() == "spark sc://spark:15002"
    forced = bench.EngineSpec("local", workers=2, shard_rows=50_000, min_shard_rows=10_000)
    assert forced.run_arguments()[-4:] == ["--shard-rows", "50000", "--min-shard-rows", "10000"]


def test_sharded_engines_are_refused_at_once_when_the_cli_has_no_engine_option(monkeypatch, tmp_path, capsys):
    today = "Usage: msa-release run [OPTIONS]\n  --ell INTEGER\n  --profile\n"

    def never(*_args, **_kwargs):
        raise AssertionError("nothing may be synthesized or run before the engines are checked")

    monkeypatch.setattr(bench, "run_help_text", lambda: today)
    monkeypatch.setattr(bench, "ensure_synthetic", never)
    monkeypatch.setattr(bench, "measure_run", never)
    output = tmp_path / "report"
    status = bench.main(["--engine", "memory,local", "--sizes", "1m", "--output", str(output), "--work-dir", str(tmp_path)])
    message = capsys.readouterr().err
    assert status == 2
    assert "--engine local" in message and "has no --engine option" in message and "ENGINE=memory" in message
    assert not output.exists()


def test_memory_engine_needs_no_sharded_cli_and_spark_needs_pyspark():
    def no_help():
        raise AssertionError("the memory engine must not depend on `msa-release run --help`")

    bench.check_engines([bench.EngineSpec("memory")], help_text=no_help)
    sharded = "  --engine [memory|local|spark]\n  --workers INTEGER\n"
    bench.check_engines([bench.EngineSpec("local")], help_text=lambda: sharded, spark_installed=False)
    with pytest.raises(bench.EngineUnavailable, match=r"pyspark is not installed.*--extra spark"):
        bench.check_engines([bench.EngineSpec("spark")], help_text=lambda: sharded, spark_installed=False)


def test_bad_worker_count_and_tree_interval_are_usage_errors(capsys):
    with pytest.raises(SystemExit) as exit_info:
        bench.main(["--workers", "0"])
    assert exit_info.value.code == 2 and "--workers" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        bench.main(["--tree-interval", "0"])
    assert "--tree-interval must be > 0" in capsys.readouterr().err


def test_memory_runs_beyond_the_machine_are_skipped_with_the_estimate():
    assert bench.memory_engine_skip_reason(10_000_000, 23.5) is None  # 7.67 GiB estimated
    assert bench.memory_engine_skip_reason(20_000_000, 23.5) is None  # 14.87 GiB <= 75 % of 23.5 (17.6)
    assert "22.1 GiB" in bench.memory_engine_skip_reason(30_000_000, 23.5)  # fits the RAM, not its 75 %
    reason = bench.memory_engine_skip_reason(100_000_000, 23.5)  # 0.47 + 72 = 72.47 GiB
    assert "72.5 GiB" in reason and "100,000,000" in reason and "75% of 23.5 GiB" in reason and "--engine local" in reason
    assert bench.memory_engine_skip_reason(None, 23.5) is None and bench.memory_engine_skip_reason(5, None) is None


# memory of a process tree ----------------------------------------------------------------------


def test_proc_stat_lines_with_spaces_and_parentheses_in_the_command():
    fields_after_command = ["S", "4242"] + ["0"] * 19 + ["1536"] + ["0"] * 20  # field 4 = parent, field 24 = pages
    line = "777 (python (worker) 1) " + " ".join(fields_after_command)
    assert bench.parse_proc_stat(line) == (4242, 1536)
    with pytest.raises(ValueError, match="stat"):
        bench.parse_proc_stat("garbage")


def test_tree_sum_counts_the_root_and_every_descendant_only():
    table = {
        10: (1, 100),  # root
        11: (10, 20),  # worker
        12: (10, 30),  # JVM
        13: (12, 5),  # Spark's Python worker under the JVM
        20: (1, 1000),  # unrelated process
        21: (20, 1000),
    }
    assert bench.tree_resident_bytes(10, table) == (155, 4)
    assert bench.tree_resident_bytes(11, table) == (20, 1)
    assert bench.tree_resident_bytes(99, table) == (0, 0)  # gone


def test_directory_size_counts_every_file_below(tmp_path):
    assert bench.directory_bytes(tmp_path / "missing") == 0
    (tmp_path / "output" / "sac_released").mkdir(parents=True)
    (tmp_path / "output" / "sac_released" / "part-00000.parquet").write_bytes(b"x" * 300)
    (tmp_path / "input.parquet").write_bytes(b"y" * 45)
    assert bench.directory_bytes(tmp_path) == 345


def test_runs_without_a_profile_still_count_and_published_time_excludes_the_audit():
    runs = [
        {
            "exit_status": 0,
            "wall_seconds": 100.0,
            "tree_peak_rss_mb": 900.0,
            "stages": {"audit": {"seconds": 30.0, "peak_rss_mb": 700.0}},
        },
        {"exit_status": 0, "wall_seconds": 80.0, "tree_peak_rss_mb": 1200.0, "staging_peak_mb": 12.5},  # no profile
        {"exit_status": 1, "wall_seconds": 5.0, "tree_peak_rss_mb": 5000.0},
    ]
    summary = bench.summarize_runs(runs)
    assert summary["successful_runs"] == 2
    assert summary["median_wall_seconds"] == 90.0
    assert summary["median_until_published_seconds"] == 75.0  # median of 70 and 80
    assert summary["tree_peak_rss_mb"] == 1200.0  # the failed run's figure is not a measurement of a release
    assert summary["staging_peak_mb"] == 12.5


# targets of issue 17 ---------------------------------------------------------------------------


def test_local_targets_pass_and_miss_on_their_limits():
    targets = _targets(
        _entry("1m", 1_000_000, 30.0, engine="local", workers=2, tree=800.0),
        _entry("10m", 10_000_000, 125.0, engine="local", workers=2, tree=1900.0, audit=10.0),  # 115 s until published
        _entry("100m", 100_000_000, 1600.0, engine="local", workers=2, tree=3500.0),
    )
    assert targets["local_10m_seconds"]["value"] == 115.0 and targets["local_10m_seconds"]["verdict"] == "pass"
    assert targets["local_10m_tree_peak_rss_mb"]["verdict"] == "pass"  # 1900 <= 2048
    assert targets["local_100m_seconds"]["verdict"] == "miss"  # 1600 s > 25 min
    assert targets["local_100m_tree_peak_rss_mb"]["verdict"] == "miss"  # 3500 > 3072 MiB
    flat = targets["local_time_per_record_ratio_1m_to_100m"]
    assert flat["value"] == 0.533 and flat["verdict"] == "pass"  # 16 µs and 12.5 µs per record vs 30 µs at 1M
    assert "10m 12.50 µs (0.417 x)" in flat["note"]


def test_time_per_record_must_stay_within_1_2_of_1m_at_every_size():
    targets = _targets(
        _entry("1m", 1_000_000, 30.0, engine="local", workers=2),
        _entry("30m", 30_000_000, 1170.0, engine="local", workers=2),  # 39 µs: 1.3 x
        _entry("100m", 100_000_000, 3300.0, engine="local", workers=2),  # 33 µs: 1.1 x
    )
    flat = targets["local_time_per_record_ratio_1m_to_100m"]
    assert flat["value"] == 1.3 and flat["limit"] == LIMITS["local_time_per_record_ratio_1m_to_100m"]
    assert flat["verdict"] == "miss"


def test_without_100m_flatness_has_no_verdict_and_other_worker_counts_do_not_count():
    targets = _targets(
        _entry("1m", 1_000_000, 30.0, engine="local", workers=2),
        _entry("10m", 10_000_000, 300.0, engine="local", workers=2),
        _entry("10m", 10_000_000, 60.0, engine="local", workers=8, tree=1000.0),
    )
    flat = targets["local_time_per_record_ratio_1m_to_100m"]
    assert flat["verdict"] == "not measured" and "100m not measured" in flat["note"] and "10m 30.00 µs (1.0 x)" in flat["note"]
    assert targets["local_10m_seconds"]["value"] == 300.0  # the 2-worker run, not the 8-worker one
    assert targets["local_10m_tree_peak_rss_mb"]["verdict"] == "not measured"


def test_spark_must_publish_local_s_digests_and_its_overhead_is_reported():
    same, other = {"sac_released": "a", "id_table": "b"}, {"sac_released": "a", "id_table": "c"}
    targets = _targets(
        _entry("1m", 1_000_000, 30.0, engine="local", workers=2, digests=same),
        _entry("1m", 1_000_000, 75.0, engine="spark", digests=same),
        _entry("10m", 10_000_000, 110.0, engine="local", workers=2, digests=same),
        _entry("10m", 10_000_000, 143.0, engine="spark", digests=other),
    )
    digests = targets["spark_digests_equal_local"]
    assert digests["value"] == 1 and digests["verdict"] == "miss" and "DIFFERENT on 10m" in digests["note"]
    assert targets["spark_overhead_1m"]["value"] == 2.5 and targets["spark_overhead_1m"]["verdict"] == "reported"
    assert targets["spark_overhead_10m"]["value"] == 1.3
    assert targets["spark_overhead_10m"]["limit"] is None


def test_spark_digest_target_passes_when_every_compared_size_is_equal():
    same = {"sac_released": "a"}
    targets = _targets(
        _entry("1m", 1_000_000, 30.0, engine="local", workers=2, digests=same),
        _entry("1m", 1_000_000, 60.0, engine="spark", digests=same),
        _entry("10m", 10_000_000, 600.0, engine="spark", digests={"error": "no release"}),  # not comparable
    )
    assert targets["spark_digests_equal_local"]["value"] == 0
    assert targets["spark_digests_equal_local"]["verdict"] == "pass"
    assert targets["spark_digests_equal_local"]["note"] == "compared on 1m; all equal"


def test_small_tables_on_local_are_no_slower_than_today_and_the_same_release():
    same = {"sac_released": "a"}
    targets = _targets(
        _entry("adult", 30_718, 14.0, digests=same),
        _entry("adult", 30_718, 14.7, engine="local", workers=2, digests=same),  # 1.05 x
        _entry("1m", 1_000_000, 33.0, digests=same),
        _entry("1m", 1_000_000, 30.0, engine="local", workers=2, digests={"sac_released": "z"}),
        _entry("10m", 10_000_000, 300.0),  # above 1M: not part of this target
        _entry("10m", 10_000_000, 100.0, engine="local", workers=2),
    )
    slower = targets["local_over_memory_ratio_up_to_1m"]
    assert slower["value"] == 1.05 and slower["verdict"] == "miss"
    assert "same release (digests) on adult" in slower["note"] and "DIFFERENT release on 1m" in slower["note"]
    assert targets["local_equals_memory_digests_up_to_1m"]["value"] == 1
    assert targets["local_equals_memory_digests_up_to_1m"]["verdict"] == "miss"


def test_issue_5_targets_read_only_the_memory_engine_and_nothing_measured_is_not_measured():
    targets = _targets(_entry("10m", 10_000_000, 100.0, engine="local", workers=2, tree=1000.0))
    assert targets["end_to_end_10m_seconds"]["verdict"] == "not measured"  # a local run is not today's job
    assert targets["peak_rss_10m_mb"]["verdict"] == "not measured"
    empty = _targets()
    for name in [*LIMITS, "spark_digests_equal_local", "spark_overhead_1m", "spark_overhead_10m"]:
        assert empty[name]["verdict"] == "not measured", name
    assert {t["issue"] for t in empty.values()} == {5, 17, 18}  # 18: the 1M default mixed target of the size section


def test_the_report_has_both_target_tables_and_the_engine_of_every_run():
    results = {
        "command": "bench_release.py --sizes 1m --engine memory,local",
        "started_at": "2026-11-26T00:00:00Z",
        "ell": 3,
        "min_confidence": 0.8,
        "limits": {"tree_interval_seconds": 0.1},
        "machine": {
            "cpu_model": "test CPU",
            "logical_cpus": 2,
            "usable_cpus": 2,
            "memory_gb": 23.5,
            "os": "Linux",
            "python": "3.11",
            "load_average_at_start": [0.0, 0.0, 0.0],
            "packages": {},
        },
        "datasets": [
            _entry("1m", 1_000_000, 33.0, tree=1300.0),
            {**_entry("1m", 1_000_000, 30.0, engine="local", workers=2, tree=900.0), "engine": "local×2"},
            {**_entry("100m", 100_000_000, 0.0), "skipped": "today's in-memory job needs about 72.5 GiB", "runs": []},
        ],
    }
    results["datasets"][2]["summary"] = {"successful_runs": 0}
    results["targets"] = bench.evaluate_targets(results)
    markdown = bench.render_markdown(results)
    assert "## Targets (issue 5, today's in-memory job)" in markdown and "## Targets (issue 17, sharded releases)" in markdown
    assert "| 1m | local×2 | 1,000,000 |" in markdown and "| 900 |" in markdown
    assert "- 100m on memory: today's in-memory job needs about 72.5 GiB" in markdown
    assert "| 1m (local×2) |" in markdown  # per-stage columns name the engine when several ran
    assert markdown.count("**1m**: synthetic 1m") == 1  # a data set is described once, whatever the engines


def test_a_measured_run_leaves_its_home_as_it_found_it_but_for_the_secret_and_warehouse(tmp_path):
    """After a run the benchmark deletes its releases, comparisons and their release-registry entries (every run of a
    configuration then starts from the same state, as on a fresh clone), and keeps the home's secret, warehouse and
    Dagster state."""
    home = tmp_path / "home"
    for folder in ("releases/20261126T000000Z-aaaa", "comparisons/x", "registry", "dagster"):
        (home / folder).mkdir(parents=True)
    (home / "releases" / "LATEST").write_text("20261126T000000Z-aaaa")
    (home / "registry" / "20261126T000000Z-aaaa.parquet").write_bytes(b"PAR1")
    (home / "secret.key").write_bytes(b"k" * 32)
    (home / "warehouse.duckdb").write_bytes(b"")
    bench.forget_releases(home)
    assert not (home / "releases").exists() and not (home / "comparisons").exists()
    assert (home / "registry").is_dir() and list((home / "registry").iterdir()) == []
    assert (home / "secret.key").exists() and (home / "warehouse.duckdb").exists() and (home / "dagster").is_dir()
    bench.forget_releases(tmp_path / "empty-home")  # a home with nothing published: nothing to do, no error
