"""--profile: per-step peak RSS attribution, stage aggregation, and the profile in the manifest,
the Dagster metadata and the CLI's sidecar (no timing assertions)."""

import json
import sys
import time

import numpy as np
import pytest
from click.testing import CliRunner

from pipeline.evaluation import profiling
from pipeline.release.publish import MANIFEST_COLUMNS, MANIFEST_JSON_COLUMNS, read_latest
from tests.conftest import example_frame, example_quasi_identifiers

MEGABYTE = 2**20


def _touch(megabytes: int) -> np.ndarray:
    block = np.ones(megabytes * MEGABYTE, dtype=np.uint8)  # np.ones writes every page: resident
    return block


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="VmHWM and clear_refs are Linux interfaces")
def test_a_short_allocation_is_attributed_to_its_window_and_not_to_the_next():
    sampler = profiling.MemorySampler(interval=0.01).start()
    try:
        assert sampler.method in ("vmhwm_reset", "vmrss_sampling")
        time.sleep(0.05)
        before_start = time.time()
        time.sleep(0.03)
        baseline = sampler.peak_bytes(before_start, time.time())
        first_start = time.time()
        block = _touch(300)
        del block  # freed at once: only the high-water mark (or a sample) saw it
        time.sleep(0.05)
        first_end = time.time()
        time.sleep(0.05)
        second_start = time.time()
        time.sleep(0.05)
        second_end = time.time()
        first = sampler.peak_bytes(first_start, first_end)
        second = sampler.peak_bytes(second_start, second_end)
    finally:
        sampler.stop()
    if sampler.method == "vmhwm_reset":
        assert first >= baseline + 250 * MEGABYTE
        assert second < first - 250 * MEGABYTE
    assert sampler.process_peak_bytes() >= first


def test_build_profile_sums_steps_into_stages_and_maps_gate_steps():
    windows = {
        "raw_records": (100.0, 101.5),
        "private__strong_rules": (101.5, 104.0),
        "sac_groups": (104.0, 105.0),
        "private__sac_permuted": (105.0, 105.25),
        "candidate__release_candidate_records_accounted_for": (106.0, 106.5),
        "candidate__release_candidate_disclosure_within_bound": (106.5, 107.75),
        "something_new": (108.0, 108.5),
    }
    profile = profiling.build_profile(windows, None)
    stages = profile["stages"]
    assert stages["load"]["seconds"] == 1.5
    assert stages["rule_mining"]["seconds"] == 2.5
    assert stages["grouping"] == {"seconds": 1.25, "peak_rss_mb": None, "steps": ["sac_groups", "private__sac_permuted"]}
    assert stages["gates"]["seconds"] == 1.75
    assert stages["something_new"]["seconds"] == 0.5
    assert profile["method"] == "none" and profile["process_peak_rss_mb"] is None
    assert list(profile["steps"]) == sorted(windows, key=lambda s: windows[s][0])  # in run order
    entries = profiling.metadata_entries(profile)
    assert entries["profile_seconds_gates"] == 1.75
    assert not any(key.startswith("profile_peak_rss_mb_") for key in entries)


def test_stage_names_of_the_release_and_kl_steps():
    assert profiling.stage_of_step("ir_rating") == "sid_creation"
    assert profiling.stage_of_step("private__sensitive_attribute_clusters") == "clustering"
    assert profiling.stage_of_step("candidate__kl_release_candidate_kl_records_accounted_for") == "gates"
    # the in-memory jobs' gates in one step per candidate (checks.gates.gate_step)
    for step in ("release_candidate_gates", "rating_release_candidate_gates", "kl_release_candidate_gates"):
        assert profiling.stage_of_step(step) == "gates", step
    assert profiling.stage_of_step("publish_kl_release") == "publish"
    assert profiling.stage_of_step("private__brand_new_asset") == "brand_new_asset"


def test_profile_is_the_last_manifest_column_and_json():
    assert list(MANIFEST_COLUMNS)[-1] == "profile"
    assert "profile" in MANIFEST_JSON_COLUMNS


@pytest.fixture
def example_b(golden, tmp_path):
    example = golden["example_B"]
    path = tmp_path / "example_b.csv"
    example_frame(example).drop(columns="row_id").to_csv(path, index=False)
    return example, path


def test_run_profile_reaches_manifest_sidecar_and_metadata(example_b, tmp_path, monkeypatch):
    from pipeline.cli import main

    example, path = example_b
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    monkeypatch.delenv("MSA_RELEASE_HOME", raising=False)
    home, sidecar = tmp_path / "home", tmp_path / "profile.json"
    arguments = [
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
        "--home",
        str(home),
        "--profile",
        "--profile-output",
        str(sidecar),
        "--engine",
        "memory",  # the in-memory job's stages (load, rule_mining, …) and its release asset's metadata
    ]
    outcome = CliRunner().invoke(main, arguments)
    assert outcome.exit_code == 0, outcome.output
    manifest = json.loads((read_latest(home / "releases") / "manifest.json").read_text())
    profile = manifest["profile"]
    expected = {"load", "rule_mining", "sac_ir_split", "clustering", "grouping", "sid_creation", "assembly", "gates"}
    assert set(profile["stages"]) == expected  # publish writes the manifest: not in it
    assert "publish" in profile["note"]
    for figures in profile["stages"].values():
        assert figures["seconds"] >= 0
        if profile["method"] != "getrusage":
            assert figures["peak_rss_mb"] > 10  # a Python process with pandas loaded
    assert set(manifest["stage_seconds"]) == set(profile["steps"])
    written = json.loads(sidecar.read_text())
    assert written["success"] and written["release_id"] == manifest["release_id"]
    assert expected | {"publish", "audit"} <= set(written["stages"])
    assert written["command_seconds"] > 0 and written["process_peak_rss_mb"] >= max(
        f["peak_rss_mb"] or 0 for f in profile["stages"].values()
    )

    # Dagster metadata of the release asset: numeric, stable names
    import dagster as dg

    with dg.DagsterInstance.get() as instance:
        event = instance.get_latest_materialization_event(dg.AssetKey("release"))
    metadata = {k: v.value for k, v in event.asset_materialization.metadata.items()}
    for stage in (*expected, "publish"):
        assert isinstance(metadata[f"profile_seconds_{stage}"], float)
        assert isinstance(metadata[f"profile_peak_rss_mb_{stage}"], float)


def test_profile_output_without_profile_is_a_usage_error(tmp_path, monkeypatch):
    from pipeline.cli import main

    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    outcome = CliRunner().invoke(main, ["run", "--home", str(tmp_path / "h"), "--profile-output", str(tmp_path / "p.json")])
    assert outcome.exit_code == 2
    assert "--profile-output needs --profile" in outcome.output


def test_without_profile_the_manifest_profile_is_null(example_b, tmp_path, monkeypatch):
    from pipeline.cli import main

    example, path = example_b
    monkeypatch.delenv("DAGSTER_HOME", raising=False)
    monkeypatch.delenv("MSA_RELEASE_HOME", raising=False)
    home = tmp_path / "home"
    outcome = CliRunner().invoke(
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
            "--home",
            str(home),
        ],
    )
    assert outcome.exit_code == 0, outcome.output
    manifest = json.loads((read_latest(home / "releases") / "manifest.json").read_text())
    assert manifest["profile"] is None
