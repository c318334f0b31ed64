"""Operating it (issue 7): asset groups, descriptions, kinds and stable numeric metadata in the
Dagster UI; the launchpad's settings; the weekly release schedule; the inbox sensor (Dagster's
build_schedule_context / build_sensor_context, and an in-process run of a sensor's request)."""

import dataclasses
import hashlib
import json
import os
import time
from datetime import datetime, UTC
from pathlib import Path

import dagster as dg
import pandas as pd
import pytest

from assets.sharded import SHARDED_GROUP
from pipeline.asset_keys import GROUPS, publishing_group
from pipeline.models import jobs as publishing_jobs
from pipeline import jobs
from pipeline.definitions import build_definitions
from pipeline.release.publish import read_latest
from pipeline.resources import ReleaseSettings, ReleaseStore
from tests.conftest import example_frame, example_quasi_identifiers
from tests.jobs import ACCEPT_ANY_LOSS, run_job

#: Metadata every published mixed/Rating release reports, numeric, under these exact names.
RELEASE_NUMERIC_KEYS = {
    "n_rows_in",
    "n_rows_out",
    "n_strong_rules",
    "n_groups",
    "n_deleted",
    "n_suppressed_cells",
    "max_disclosure_probability",
    "additional_information_loss",
    "reconstruction_error",
    "publish_seconds",
    # the COUNT-query workload (issue 18): median and 90th percentile of W1 and W2
    "query_workload_w1_median",
    "query_workload_w1_p90",
    "query_workload_w2_median",
    "query_workload_w2_p90",
}


@pytest.fixture(scope="module")
def definitions(tmp_path_factory):
    return build_definitions(tmp_path_factory.mktemp("ops") / "home")


def test_groups_descriptions_and_kinds(definitions):
    graph = definitions.resolve_asset_graph()
    keys = list(graph.get_all_asset_keys())
    groups = {graph.get(key).group_name for key in keys}
    # exactly the stage groups, one group per publishing job and the sharded release job's group, every one used
    assert groups == set(GROUPS) | {publishing_group(job) for job in publishing_jobs()} | {SHARDED_GROUP}
    for key in keys:
        node = graph.get(key)
        description = (node.description or "").strip()
        assert description and "\n" not in description, key  # one line each
        assert node.kinds, key
        if key.path[0] in ("private", "candidate"):
            assert {"duckdb", "pandas"} <= set(node.kinds), key
        if key.path[0] == "private":
            assert description.startswith("PRIVATE") or key.path[-1] in ("input_summary", "strong_value_occurrences"), key
    from checks.gates import GATES, KL_GATES

    for check in [*GATES, *KL_GATES]:
        assert check.op.tags.get("dagster/compute_kind") == "great_expectations"
        assert check.check_specs and all(spec.description for spec in check.check_specs)


def test_jobs_select_their_model_only(definitions):
    def selected(name):
        job = definitions.resolve_job_def(name)
        return {key.to_user_string() for key in job.asset_layer.selected_asset_keys}

    release, kl = selected("release"), selected("kl_release")
    assert "release" in release and "audit/release_disclosure" in release and "private/ir_id_table" in release
    assert not any(k.startswith(("evaluation/", "attacks/")) or "kl_" in k or k == "kl_release" for k in release)
    assert "kl_release" in kl and "private/kl_clusters" in kl
    assert not any(k in kl for k in ("release", "private/strong_rules", "candidate/sac_released", "audit/release_disclosure"))
    assert {k for k in selected("evaluation") if not k.startswith("private/")} == {
        "evaluation/sid_creation_timings",
        "evaluation/model_comparison",
        "evaluation/disclosure_distributions",
        "evaluation/experiment_report",
    }
    assert {k for k in selected("attacks") if not k.startswith("private/")} == {"attacks/attack_evaluation"}


def test_launchpad_settings_have_descriptions():
    fields = ReleaseSettings.to_config_schema().as_field().config_type.fields
    for name in ("ell", "min_confidence", "sensitive_attributes", "quasi_identifiers", "seed", "model", "k", "input_path"):
        assert fields[name].description, name
    assert "[2, 1000]" in fields["ell"].description and "(0, 1]" in fields["min_confidence"].description
    with pytest.raises(Exception, match="ell"):
        ReleaseSettings(ell=1)


# --------------------------------------------------------------------------- metadata of a run


@pytest.fixture(scope="module")
def example_b_run(golden, tmp_path_factory):
    root = tmp_path_factory.mktemp("ops_run")
    settings = _example_b_settings(golden, root)  # SPEC's reference run of example B (golden counts below)
    result = run_job(root / "home", "release", settings)
    assert result.success
    metadata = {}
    for event in result.get_asset_materialization_events():
        materialization = event.event_specific_data.materialization
        metadata[materialization.asset_key.to_user_string()] = materialization.metadata
    return golden["example_B"], metadata


def test_release_metadata_is_numeric_with_stable_names(example_b_run):
    example, metadata = example_b_run
    release = metadata["release"]
    for key in RELEASE_NUMERIC_KEYS:
        assert isinstance(release[key].value, (int, float)) and not isinstance(release[key].value, bool), key
    assert any(k.startswith("seconds_") for k in release)
    assert release["n_rows_in"].value == len(example["input"])
    assert release["n_strong_rules"].value == len(example["strong_rules"])
    assert release["n_groups"].value == len(example["groups"])
    assert release["n_deleted"].value == len(example["deleted_ids"]) + release["n_deleted_for_eligibility"].value
    assert release["n_suppressed_cells"].value == 0
    assert release["max_disclosure_probability"].value <= 1 / example["l"] + 1e-12
    assert str(release["report"].value).endswith("report.html")
    for key in (
        "private/raw_records",
        "private/strong_rules",
        "private/sac_groups",
        "private/ir_id_table",
        "candidate/sac_released",
    ):
        assert isinstance(metadata[key]["n_rows_out"].value, int), key
        assert isinstance(metadata[key]["dagster/row_count"].value, int), key
    for key in ("private/raw_records", "private/strong_rules", "private/sac_groups", "private/ir_id_table"):
        assert isinstance(metadata[key]["seconds"].value, float), key
    audit = metadata["audit/release_disclosure"]
    for key in ("additional_information_loss", "reconstruction_error", "max_disclosure_probability"):
        assert isinstance(audit[key].value, float)
    # the audit step audits the release its own run published (by id), not whatever LATEST names
    assert audit["release_id"].value == release["release_id"].value
    assert audit["audited"].value == "the release published by this run"


def test_previews_only_for_published_tables(example_b_run):
    _, metadata = example_b_run
    release = metadata["release"]
    previews = {k for k in release if k.startswith("preview_")}
    assert previews == {"preview_sac_released", "preview_attribute_table", "preview_id_table", "preview_attribute_clusters"}
    assert release["preview_sac_released"].value.startswith("| row\\_id | group\\_id |")  # names escaped (escape_markdown)
    for key, entries in metadata.items():
        markdown = [v.value for v in entries.values() if isinstance(v, dg.MarkdownMetadataValue)]
        if key.startswith(("private/", "candidate/")):
            assert markdown == [], key  # no preview of a private or not-yet-gated table
        elif key != "release":
            assert all(m.startswith("![") and "data:image/png;base64," in m for m in markdown), key  # figures only
    figure = metadata["audit/release_disclosure"]["disclosure_histogram_figure"].value
    assert figure.startswith("![") and "data:image/png;base64," in figure


# --------------------------------------------------------------------------- schedule


def test_schedule_defaults_weekly_and_stopped(monkeypatch):
    monkeypatch.delenv("MSA_RELEASE_SCHEDULE_CRON", raising=False)
    schedule = jobs.build_release_schedule()
    assert schedule.cron_schedule == "0 3 * * 1"
    assert schedule.default_status == dg.DefaultScheduleStatus.STOPPED
    assert schedule.job_name == "sharded_release"  # the mixed model's default job (issue 17)
    context = dg.build_schedule_context(scheduled_execution_time=datetime(2026, 11, 23, 3, 0, tzinfo=UTC))
    requests = schedule.evaluate_tick(context).run_requests
    assert len(requests) == 1 and requests[0].tags["msa_release/trigger"] == "schedule"


def test_schedule_cron_from_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("MSA_RELEASE_SCHEDULE_CRON", "30 1 * * *")
    assert jobs.build_release_schedule().cron_schedule == "30 1 * * *"
    names = {s.name: s for s in build_definitions(tmp_path / "home").schedules}
    assert names["release_schedule"].cron_schedule == "30 1 * * *"
    monkeypatch.setenv("MSA_RELEASE_SCHEDULE_CRON", "every monday")
    with pytest.raises(ValueError, match="MSA_RELEASE_SCHEDULE_CRON"):
        jobs.build_release_schedule()


# --------------------------------------------------------------------------- inbox sensor


def _evaluate(home: Path, cursor: str | None = None):
    context = dg.build_sensor_context(cursor=cursor, resources={"store": ReleaseStore(home=str(home))})
    return jobs.inbox_sensor.evaluate_tick(context)


def _age(path: Path, seconds: float = 120) -> None:
    past = time.time() - seconds
    os.utime(path, (past, past))


@pytest.fixture
def inbox(golden, tmp_path):
    """An inbox with settings.json naming Example B's columns, and Example B as CSV (settled)."""
    example = golden["example_B"]
    home = tmp_path / "home"
    inbox = home / "inbox"
    inbox.mkdir(parents=True)
    (inbox / "settings.json").write_text(
        json.dumps(
            {
                "quasi_identifiers": example_quasi_identifiers(example),
                "sensitive_attributes": example["SA"],
                "ell": example["l"],
                "min_confidence": example["min_conf"],
            }
        )
    )
    csv = inbox / "example_b.csv"
    example_frame(example).drop(columns="row_id").to_csv(csv, index=False)
    _age(csv)
    return home, csv, example


def test_sensor_without_inbox_creates_it_and_skips(tmp_path):
    data = _evaluate(tmp_path)
    assert not data.run_requests and "created the inbox" in data.skip_message  # issue 15
    assert (tmp_path / "inbox").is_dir()


def test_sensor_requests_one_release_per_content(inbox):
    home, csv, _ = inbox
    data = _evaluate(home)
    assert len(data.run_requests) == 1
    request = data.run_requests[0]
    content = hashlib.sha256(csv.read_bytes()).hexdigest()
    assert request.run_key.startswith(content + "-") and request.tags["msa_release/input_sha256"] == content
    assert request.job_name == "sharded_release"  # no engine in the settings: the default, local (issue 17)
    config = request.run_config["resources"]["settings"]["config"]
    assert config["input_path"] == str(csv.resolve()) and config["input_format"] == "csv" and config["csv_header"] is True
    assert request.tags["msa_release/inbox_file"] == "example_b.csv"
    # next tick, same content: the same run key (Dagster launches a run key once)
    again = _evaluate(home, data.cursor)
    assert [r.run_key for r in again.run_requests] == [request.run_key]
    # changed content: a new run key
    csv.write_text(csv.read_text() + csv.read_text().splitlines()[1] + "\n")
    _age(csv, 60)
    changed = _evaluate(home, again.cursor)
    assert changed.run_requests[0].tags["msa_release/input_sha256"] == hashlib.sha256(csv.read_bytes()).hexdigest()
    assert changed.run_requests[0].run_key != request.run_key


def test_sensor_skips_partial_unreadable_and_misconfigured_files(inbox, monkeypatch):
    home, csv, _ = inbox
    folder = home / "inbox"
    csv.unlink()
    fresh = folder / "fresh.csv"
    fresh.write_text("a,b\n1,2\n")  # just written: may still be growing
    truncated = folder / "truncated.parquet"
    pd.DataFrame({"a": [1, 2]}).to_parquet(truncated)
    truncated.write_bytes(truncated.read_bytes()[:-10])
    _age(truncated)
    empty = folder / "empty.csv"
    empty.write_text("")
    _age(empty)
    bad_settings = folder / "bad.csv"
    bad_settings.write_text("x,y\n1,2\n")
    (folder / "bad.csv.settings.json").write_text(json.dumps({"ell": 1}))
    _age(bad_settings)
    _age(folder / "bad.csv.settings.json")
    (folder / "notes.txt").write_text("ignored")
    (folder / "directory.csv").mkdir()
    data = _evaluate(home)
    assert data.run_requests == []
    message = data.skip_message
    assert "fresh.csv" in message and "waiting" in message
    assert "truncated.parquet" in message and "Parquet" in message
    assert "empty.csv: empty file" in message
    assert "bad.csv: unusable settings" in message and "ell" in message
    assert "notes.txt" not in message and "directory.csv" not in message

    def unreadable(path):
        raise PermissionError(13, "Permission denied")

    _age(fresh)
    monkeypatch.setattr(jobs, "_sha256", unreadable)
    data = _evaluate(home)
    assert "fresh.csv: unreadable (Permission denied)" in data.skip_message


def test_sensor_routes_kl_and_parquet(inbox):
    home, csv, _ = inbox
    parquet = home / "inbox" / "table.parquet"
    pd.read_csv(csv).astype(str).to_parquet(parquet)
    _age(parquet)
    (home / "inbox" / "table.parquet.settings.json").write_text(json.dumps({"model": "kl", "k": 4}))
    _age(home / "inbox" / "table.parquet.settings.json")  # a file's own settings file settles too
    requests = {r.tags["msa_release/inbox_file"]: r for r in _evaluate(home).run_requests}
    assert requests["table.parquet"].job_name == "kl_release"
    config = requests["table.parquet"].run_config["resources"]["settings"]["config"]
    assert config["input_format"] == "parquet" and config["model"] == "kl" and config["k"] == 4
    assert requests["example_b.csv"].job_name == "sharded_release"


def test_sensor_run_request_runs_in_process(inbox):
    """The sensor's run config publishes the inbox file; the release's input hash is the one the tick tagged."""
    home, _, example = inbox
    request = _evaluate(home).run_requests[0]
    definitions = build_definitions(home)
    result = definitions.resolve_job_def(request.job_name).execute_in_process(
        run_config=request.run_config, tags=request.tags, raise_on_error=False
    )
    assert result.success
    manifest = json.loads((read_latest(home / "releases") / "manifest.json").read_text())
    # the run key is the file's SHA-256 (Dagster-private); the published manifest carries its keyed HMAC only
    from pipeline.core.keyed import input_hmac
    from pipeline.release.home_secret import read_secret_if_present

    assert "input_sha256" not in manifest
    assert manifest["input_hmac"] == input_hmac(read_secret_if_present(home), request.tags["msa_release/input_sha256"])
    assert manifest["n_input"] == len(example["input"])


def test_sensor_file_that_cannot_be_released_fails_its_run_with_the_reason(inbox):
    """A file missing a configured column: the run fails, naming the file and the column; nothing is published."""
    home, csv, _ = inbox
    frame = pd.read_csv(csv).drop(columns=["S3"])
    frame.to_csv(csv, index=False)
    _age(csv)
    request = _evaluate(home).run_requests[0]
    result = (
        build_definitions(home)
        .resolve_job_def(request.job_name)
        .execute_in_process(run_config=request.run_config, raise_on_error=False)
    )
    assert not result.success
    messages = " ".join(
        (e.step_failure_data.error.cause or e.step_failure_data.error).message for e in result.all_events if e.is_step_failure
    )
    assert "S3" in messages and "example_b.csv" in messages
    assert read_latest(home / "releases") is None


def test_a_file_replaced_after_the_tick_is_not_published(inbox):
    """Issue 14: the run checks that the file is the one the tick hashed; replaced in between, the run fails naming the
    file, publishes nothing, and the new content gets a request of its own."""
    home, csv, _ = inbox
    request = _evaluate(home).run_requests[0]
    csv.write_text(csv.read_text() + csv.read_text().splitlines()[1] + "\n")
    _age(csv)
    result = (
        build_definitions(home)
        .resolve_job_def(request.job_name)
        .execute_in_process(run_config=request.run_config, tags=request.tags, raise_on_error=False)
    )
    assert not result.success
    messages = " ".join(
        (e.step_failure_data.error.cause or e.step_failure_data.error).message for e in result.all_events if e.is_step_failure
    )
    assert "example_b.csv" in messages and "not the one the inbox sensor hashed" in messages
    assert read_latest(home / "releases") is None
    assert _evaluate(home).run_requests[0].run_key != request.run_key


def test_an_inbox_run_waits_for_the_release_lock(inbox):
    """Issue 14: a run tagged msa_release/lock_wait_seconds (every inbox run) waits for a lock held by another process
    instead of failing; without the tag it fails at once ("another release is running")."""
    import subprocess
    import sys

    home, _, _ = inbox
    request = _evaluate(home).run_requests[0]
    job = build_definitions(home).resolve_job_def(request.job_name)
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from pipeline.release.locking import acquire_release_lock; "
            "lock = acquire_release_lock(sys.argv[1]); print('held', flush=True); time.sleep(float(sys.argv[2]))",
            str(home),
            "8",
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        untagged = {k: v for k, v in request.tags.items() if k != "msa_release/lock_wait_seconds"}
        refused = job.execute_in_process(run_config=request.run_config, tags=untagged, raise_on_error=False)
        assert not refused.success and holder.poll() is None  # failed while the other process held the lock
        assert any("another release is running" in repr(event.event_specific_data) for event in refused.all_events)
        waited = job.execute_in_process(run_config=request.run_config, tags=request.tags, raise_on_error=False)
        assert waited.success and holder.poll() is not None  # succeeded after the holder ended
    finally:
        holder.kill()
        holder.wait()
    assert read_latest(home / "releases") is not None


def test_definitions_register_schedule_and_sensor(definitions):
    assert {s.name for s in definitions.schedules} == {"release_schedule"}
    assert {s.name for s in definitions.sensors} == {"inbox_sensor"}
    sensor = next(iter(definitions.sensors))
    assert sensor.default_status == dg.DefaultSensorStatus.STOPPED


def test_a_release_run_reads_its_input_once(golden, tmp_path, monkeypatch):
    """Issue 13 ("one pass"): the ingest step reads the input; the in-job audit uses the run's records and rules."""
    import assets.ingest
    import pipeline.release.audit
    from pipeline.io.loading import load_records

    example = golden["example_B"]
    csv = tmp_path / "example_b.csv"
    example_frame(example).drop(columns="row_id").to_csv(csv, index=False)
    calls = []

    def counting(*args, **kwargs):
        calls.append(str(args[0]) if args else kwargs.get("path"))
        return load_records(*args, **kwargs)

    monkeypatch.setattr(assets.ingest, "load_records", counting)
    monkeypatch.setattr(pipeline.release.audit, "load_records", counting)
    settings = {
        "input_path": str(csv),
        "csv_header": True,
        "column_names": [],
        "quasi_identifiers": example_quasi_identifiers(example),
        "sensitive_attributes": example["SA"],
        "ell": example["l"],
        "min_confidence": example["min_conf"],
        "seed": 0,
        "randomness": "spec-reference",
        "min_support": 1,
        "grouping": "p1",
        "residual_policy": "delete",
        **ACCEPT_ANY_LOSS,  # SPEC's deletions in 18 records are above the utility gate's 10 %
    }
    result = run_job(tmp_path / "home", "release", settings)
    assert result.success
    assert len(calls) == 1
    audit = next(
        e
        for e in result.get_asset_materialization_events()
        if e.event_specific_data.materialization.asset_key.to_user_string() == "audit/release_disclosure"
    )
    assert audit.event_specific_data.materialization.metadata["verdict"].value == "PASS"


def _example_b_settings(golden, tmp_path) -> dict:
    example = golden["example_B"]
    csv = tmp_path / "example_b.csv"
    example_frame(example).drop(columns="row_id").to_csv(csv, index=False)
    return {
        "input_path": str(csv),
        "csv_header": True,
        "column_names": [],
        "quasi_identifiers": example_quasi_identifiers(example),
        "sensitive_attributes": example["SA"],
        "ell": example["l"],
        "min_confidence": example["min_conf"],
        "seed": 0,
        "randomness": "spec-reference",
        "min_support": 1,
        "grouping": "p1",
        "residual_policy": "delete",
        **ACCEPT_ANY_LOSS,  # SPEC's deletions in 18 records are above the utility gate's 10 %
    }


def test_a_release_run_runs_the_adversary_once(golden, tmp_path, monkeypatch):
    """Issue 13 ("one pass"): the candidate step runs the strong-rule adversary once; gate 3 and the in-job audit use
    that pass (the audit does not run the from-files adversary of ``msa-release audit``)."""
    import assets.publish
    import pipeline.release.audit
    from pipeline.core.adversary import candidate_adversary

    calls = {"candidate_adversary": 0, "adversary_view": 0}

    def counting(*args, **kwargs):
        calls["candidate_adversary"] += 1
        return candidate_adversary(*args, **kwargs)

    def refused(*args, **kwargs):
        calls["adversary_view"] += 1
        raise AssertionError("the in-job audit must not run the adversary again")

    monkeypatch.setattr(assets.publish, "candidate_adversary", counting)
    monkeypatch.setattr(pipeline.release.audit, "adversary_view", refused)
    result = run_job(tmp_path / "home", "release", _example_b_settings(golden, tmp_path))
    assert result.success
    assert calls == {"candidate_adversary": 1, "adversary_view": 0}
    gates = {e.check_name: e for e in result.get_asset_check_evaluations()}
    assert gates["disclosure_within_bound"].passed
    audit = next(
        e.event_specific_data.materialization.metadata
        for e in result.get_asset_materialization_events()
        if e.event_specific_data.materialization.asset_key.to_user_string() == "audit/release_disclosure"
    )
    assert audit["verdict"].value == "PASS" and audit["n_records_above_bound"].value == 0


def test_the_in_job_audit_refuses_published_files_that_are_not_the_gated_candidate(golden, tmp_path, monkeypatch):
    """The audit reports the adversary's pass over the candidate only for the files that are that candidate: a
    published table that differs (here: the SAC~ rows read back in another order) fails the audit step, naming the
    table."""
    import assets.audit
    from pipeline.release.audit import read_release

    def tampered(path):
        release = read_release(path)
        assert len(release.sac_released) > 1
        flipped = release.sac_released.iloc[::-1].reset_index(drop=True)
        return dataclasses.replace(release, sac_released=flipped)

    monkeypatch.setattr(assets.audit, "read_release", tampered)
    result = run_job(tmp_path / "home", "release", _example_b_settings(golden, tmp_path))
    assert not result.success
    failures = [e for e in result.all_events if e.is_step_failure]
    assert [e.step_key for e in failures] == ["audit__release_disclosure"]
    message = " ".join((e.step_failure_data.error.cause or e.step_failure_data.error).message for e in failures)
    assert "is not the candidate" in message and "sac_released" in message
