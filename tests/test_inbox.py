"""Issue 14 ("Inbox files lost forever"): the inbox sensor's file selection, run keys, tags and retries, evaluated
directly (Dagster's build_sensor_context); the Dagster instance configuration the project writes; the liveness test of
the orphaned-run sweep. The daemon itself runs in tests/e2e/test_inbox_daemon.py."""

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest

from pipeline import jobs
from pipeline.cli.common import DAGSTER_YAML, LEGACY_DAGSTER_YAML, RUN_QUEUE_DAGSTER_YAML, write_dagster_yaml
from pipeline.definitions import build_definitions
from pipeline.resources import ReleaseStore
from pipeline.run_events import process_alive_since
from tests.conftest import example_frame, example_quasi_identifiers


def _evaluate(home: Path, cursor: str | None = None):
    context = dg.build_sensor_context(cursor=cursor, resources={"store": ReleaseStore(home=str(home))})
    return jobs.inbox_sensor.evaluate_tick(context)


def _age(path: Path, seconds: float = 120) -> None:
    past = time.time() - seconds
    os.utime(path, (past, past), follow_symlinks=False)


@pytest.fixture
def inbox(golden, tmp_path):
    """A home whose inbox has settings.json naming Example B's columns; returns (home, inbox, CSV text of Example B)."""
    example = golden["example_B"]
    home = tmp_path / "home"
    folder = home / "inbox"
    folder.mkdir(parents=True)
    (folder / "settings.json").write_text(
        json.dumps(
            {
                "quasi_identifiers": example_quasi_identifiers(example),
                "sensitive_attributes": example["SA"],
                "ell": example["l"],
                "min_confidence": example["min_conf"],
            }
        )
    )
    return home, folder, example_frame(example).drop(columns="row_id").to_csv(index=False)


def _drop(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(text)
    _age(path)
    return path


def _keys(data) -> dict[str, str]:
    return {request.tags["msa_release/inbox_file"]: request.run_key for request in data.run_requests}


def test_runs_are_keyed_by_content_and_settings(inbox):
    """The same bytes under another name with the same settings: the same run key (runs once); with other settings
    (a per-file settings file): another run key; another content: another run key."""
    home, folder, text = inbox
    _drop(folder, "a.csv", text)
    _drop(folder, "b.csv", text)
    _drop(folder, "c.csv", text)
    (folder / "c.csv.settings.json").write_text(json.dumps({"seed": 7}))
    _age(folder / "c.csv.settings.json")
    _drop(folder, "d.csv", text + text.splitlines()[1] + "\n")
    keys = _keys(_evaluate(home))
    assert keys["a.csv"] == keys["b.csv"]
    assert len({keys["a.csv"], keys["c.csv"], keys["d.csv"]}) == 3
    # the content part of the key is the file's SHA-256, the same for c.csv
    assert keys["a.csv"].split("-")[0] == keys["c.csv"].split("-")[0] != keys["d.csv"].split("-")[0]


def test_symbolic_links_and_files_outside_the_inbox_are_refused(inbox, tmp_path):
    """A symlink in the inbox (to a file outside it, or to one inside it) or a hard link to a file outside it gives no
    run; the tick names it."""
    home, folder, text = inbox
    outside = tmp_path / "secret.csv"
    outside.write_text(text)
    _age(outside)
    (folder / "link.csv").symlink_to(outside)
    inside = _drop(folder, "real.csv", text)
    (folder / "alias.csv").symlink_to(inside)
    _age(folder / "link.csv")
    data = _evaluate(home)
    assert set(_keys(data)) == {"real.csv"}
    assert [r.run_config["resources"]["settings"]["config"]["input_path"] for r in data.run_requests] == [str(inside)]
    inside.unlink()
    (folder / "hard.csv").hardlink_to(outside)
    data = _evaluate(home)
    assert data.run_requests == []
    assert "hard.csv: a hard link" in data.skip_message
    assert "link.csv: a symbolic link, refused" in data.skip_message
    assert "alias.csv: a symbolic link, refused" in data.skip_message


@pytest.mark.parametrize("kind", ["directory", "fifo"])
def test_a_settings_file_that_is_a_directory_or_a_pipe_is_refused(inbox, kind):
    """A red team's case: a directory (or a FIFO) named <file>.settings.json was ignored, so the file ran with the
    shared settings only; a stricter per-file setting would have been lost without a word."""
    home, folder, text = inbox
    _drop(folder, "a.csv", text)
    settings = folder / "a.csv.settings.json"
    settings.mkdir() if kind == "directory" else os.mkfifo(settings)
    data = _evaluate(home)
    assert data.run_requests == []
    assert "a.csv.settings.json is not a regular file (a directory or a pipe): refused" in data.skip_message


def test_a_skip_reason_is_capped(inbox):
    # a settings key megabytes long: the reason (logged and shown at every tick) stays short
    home, folder, text = inbox
    _drop(folder, "a.csv", text)
    (folder / "a.csv.settings.json").write_text(json.dumps({"A" * 100_000: 1}))
    _age(folder / "a.csv.settings.json")
    data = _evaluate(home)
    assert data.run_requests == [] and "a.csv: unusable settings (" in data.skip_message
    assert len(data.skip_message) < 1_000


def test_a_symlinked_settings_file_is_refused(inbox, tmp_path):
    home, folder, text = inbox
    _drop(folder, "a.csv", text)
    elsewhere = tmp_path / "other.json"
    elsewhere.write_text(json.dumps({"ell": 2}))
    (folder / "a.csv.settings.json").symlink_to(elsewhere)
    data = _evaluate(home)
    assert data.run_requests == [] and "a.csv.settings.json is a symbolic link" in data.skip_message


def test_write_then_rename(inbox):
    """A file being written is named <name>.part / .tmp (or starts with '.'): however long it stalls, it is not
    released; once renamed to its .csv name, it is."""
    home, folder, text = inbox
    stalled = _drop(folder, "upload.csv.part", text[: len(text) // 2])
    _age(stalled, 3600)
    _drop(folder, "other.parquet.tmp", "PAR1")
    _drop(folder, ".hidden.csv", text)
    data = _evaluate(home)
    assert data.run_requests == []
    assert "upload.csv.part: still being written" in data.skip_message
    assert "other.parquet.tmp: still being written" in data.skip_message
    assert ".hidden.csv" not in data.skip_message
    stalled.write_text(text)
    stalled.rename(folder / "upload.csv")
    _age(folder / "upload.csv")
    assert set(_keys(_evaluate(home, data.cursor))) == {"upload.csv"}


def test_inbox_runs_wait_for_the_lock_and_are_retried_after_a_crash_only(inbox, monkeypatch):
    home, folder, text = inbox
    _drop(folder, "a.csv", text)
    request = _evaluate(home).run_requests[0]
    assert float(request.tags["msa_release/lock_wait_seconds"]) >= 600
    assert request.tags["dagster/max_retries"] == "3"
    assert request.tags["dagster/retry_strategy"] == "ALL_STEPS"  # never "from failure": the warehouse is shared
    assert request.tags["dagster/retry_on_asset_or_op_failure"] == "false"  # a gate's refusal is not retried
    monkeypatch.setenv("MSA_RELEASE_INBOX_MAX_RETRIES", "1")
    assert _evaluate(home).run_requests[0].tags["dagster/max_retries"] == "1"


def test_a_missing_inbox_is_created_private(tmp_path):
    """Issue 15: the sensor creates the inbox (and the home) when it is missing, mode 0700 like the home's other
    private directories, and says so; an existing inbox keeps its mode."""
    home = tmp_path / "home"
    data = _evaluate(home)
    assert data.run_requests == [] and "created the inbox" in data.skip_message
    assert (home / "inbox").is_dir() and (home / "inbox").stat().st_mode & 0o777 == 0o700
    assert home.stat().st_mode & 0o777 == 0o700
    (home / "inbox").chmod(0o750)
    assert "no CSV or Parquet file" in _evaluate(home).skip_message
    assert (home / "inbox").stat().st_mode & 0o777 == 0o750


def _evaluate_with(instance: dg.DagsterInstance, home: Path, cursor: str | None = None):
    context = dg.build_sensor_context(cursor=cursor, instance=instance, resources={"store": ReleaseStore(home=str(home))})
    return jobs.inbox_sensor.evaluate_tick(context)


def _run_request(home: Path, instance: dg.DagsterInstance, request: dg.RunRequest) -> dg.ExecuteInProcessResult:
    """Run what the sensor requested, as the daemon would (its job, run config and tags)."""
    job = build_definitions(home).resolve_job_def(request.job_name)
    return job.execute_in_process(run_config=request.run_config, instance=instance, tags=request.tags, raise_on_error=False)


def test_files_are_moved_aside_once_their_runs_are_over_and_never_run_again(inbox, tmp_path):
    """Issue 15: a file whose run published goes to <inbox>/processed/, one whose run failed on its data to
    <inbox>/failed/ (with its own settings file), each with a <name>.result.json sidecar (0600) giving the run id, the
    reason and the release; while its run is queued or running, or failed and waiting for Dagster's retry, the file
    stays. A moved file is never requested again, and the same bytes dropped again are set aside at once, naming the
    run that already published them."""
    home, folder, text = inbox
    _drop(folder, "good.csv", text)
    header, *rows = text.splitlines()
    columns = header.split(",")
    dropped = columns.index(json.loads((folder / "settings.json").read_text())["sensitive_attributes"][-1])
    _drop(
        folder,
        "bad.csv",
        "\n".join(",".join(c for i, c in enumerate(line.split(",")) if i != dropped) for line in text.splitlines()) + "\n",
    )
    (folder / "bad.csv.settings.json").write_text(json.dumps({"seed": 3}))
    _age(folder / "bad.csv.settings.json")
    (tmp_path / "dagster").mkdir()
    with dg.DagsterInstance.local_temp(tempdir=str(tmp_path / "dagster")) as instance:
        first = _evaluate_with(instance, home)
        requests = {r.tags["msa_release/inbox_file"]: r for r in first.run_requests}
        assert set(requests) == {"good.csv", "bad.csv"}
        # a run still going: the file stays, and no second run is requested
        waiting = instance.create_run_for_job(
            build_definitions(home).resolve_job_def("release"),
            run_config=requests["good.csv"].run_config,
            tags=requests["good.csv"].tags,
        )
        second = _evaluate_with(instance, home, first.cursor)
        assert {r.tags["msa_release/inbox_file"] for r in second.run_requests} == {"bad.csv"}
        assert (folder / "good.csv").exists()
        instance.delete_run(waiting.run_id)
        assert _run_request(home, instance, requests["good.csv"]).success
        assert not _run_request(home, instance, requests["bad.csv"]).success
        third = _evaluate_with(instance, home, second.cursor)
        assert third.run_requests == []
        assert not (folder / "good.csv").exists() and not (folder / "bad.csv").exists()
        assert (folder / "processed" / "good.csv").read_text() == text
        assert (folder / "failed" / "bad.csv").is_file() and (folder / "failed" / "bad.csv.settings.json").is_file()
        for sub in ("processed", "failed"):
            assert (folder / sub).stat().st_mode & 0o777 == 0o700
        good = json.loads((folder / "processed" / "good.csv.result.json").read_text())
        assert (folder / "processed" / "good.csv.result.json").stat().st_mode & 0o777 == 0o600
        release = next(p for p in (home / "releases").iterdir() if p.name != "LATEST")
        assert good["status"] == "processed" and good["file"] == "good.csv" and good["release"]["release_id"] == release.name
        assert good["run_id"] == instance.get_runs(filters=dg.RunsFilter(tags={"msa_release/inbox_file": "good.csv"}))[0].run_id
        bad = json.loads((folder / "failed" / "bad.csv.result.json").read_text())
        assert bad["status"] == "failed" and bad["release"] is None and bad["run_id"]
        assert columns[dropped] in bad["reason"]  # the missing column is named (a column name, never a value)
        # never looked at again; the same bytes dropped again under another name: set aside at once, not run
        _drop(folder, "again.csv", text)
        fourth = _evaluate_with(instance, home, third.cursor)
        assert fourth.run_requests == [] and not (folder / "again.csv").exists()
        assert json.loads((folder / "processed" / "again.csv.result.json").read_text())["run_id"] == good["run_id"]
        _drop(folder, "good.csv", text)  # the same name again: kept apart from the first
        _evaluate_with(instance, home, fourth.cursor)
        assert (folder / "processed" / f"good.{good['run_id'][:8]}.csv").is_file()
        assert (folder / "processed" / "good.csv").read_text() == text


def test_a_failed_run_waiting_for_its_retry_keeps_its_file(inbox, tmp_path):
    home, folder, text = inbox
    _drop(folder, "a.csv", text)
    (tmp_path / "dagster").mkdir()
    with dg.DagsterInstance.local_temp(tempdir=str(tmp_path / "dagster")) as instance:
        request = _evaluate_with(instance, home).run_requests[0]
        job = build_definitions(home).resolve_job_def("release")
        run = instance.create_run_for_job(job, run_config=request.run_config, tags={**request.tags, "dagster/will_retry": "true"})
        instance.report_run_failed(run, "its process (pid 1) is gone")
        data = _evaluate_with(instance, home)
        assert (folder / "a.csv").exists() and "waiting for its retry" in data.skip_message
        instance.add_run_tags(run.run_id, {"dagster/will_retry": "false"})
        _evaluate_with(instance, home)
        assert not (folder / "a.csv").exists()
        assert "is gone" in json.loads((folder / "failed" / "a.csv.result.json").read_text())["reason"]


def test_every_job_carries_the_release_lock_tag(tmp_path):
    """The run queue's tag concurrency limit applies to every job of the code location (all hold the release lock)."""
    definitions = build_definitions(tmp_path / "home")
    names = {job.name for job in definitions.resolve_all_job_defs() if not job.name.startswith("__")}
    assert {"release", "rating_release", "kl_release", "evaluation", "attacks"} <= names
    for name in names:
        assert definitions.resolve_job_def(name).tags.get(jobs.RELEASE_LOCK_TAG), name


def test_the_dagster_yaml_queues_release_runs_and_enables_monitoring_and_retries(tmp_path, monkeypatch):
    legacy = tmp_path / "legacy"
    legacy.mkdir()
    (legacy / "dagster.yaml").write_text(LEGACY_DAGSTER_YAML)
    custom = tmp_path / "custom"
    custom.mkdir()
    (custom / "dagster.yaml").write_text("telemetry:\n  enabled: true\n")
    fresh = tmp_path / "fresh"
    before_pools = tmp_path / "before_pools"  # written by the version before the publish pool: replaced too
    before_pools.mkdir()
    (before_pools / "dagster.yaml").write_text(RUN_QUEUE_DAGSTER_YAML)
    for home in (legacy, custom, fresh, before_pools):
        write_dagster_yaml(home)
    assert (legacy / "dagster.yaml").read_text() == DAGSTER_YAML == (fresh / "dagster.yaml").read_text()
    assert (before_pools / "dagster.yaml").read_text() == DAGSTER_YAML
    assert (custom / "dagster.yaml").read_text() == "telemetry:\n  enabled: true\n"  # the steward's own: kept
    monkeypatch.setenv("DAGSTER_HOME", str(fresh))
    with dg.DagsterInstance.get() as instance:
        assert instance.run_monitoring_enabled and instance.run_retries_enabled
        assert instance.run_retries_max_retries == 0  # only runs tagged dagster/max_retries
        concurrency = instance.get_concurrency_config()  # the queue's settings as the daemon applies them
        assert concurrency.run_queue_config is not None
        assert {"key": jobs.RELEASE_LOCK_TAG, "limit": 1} in concurrency.run_queue_config.tag_concurrency_limits
        # sharded_release's publish step is in a pool of one (issue 17), enforced per run (no in-process waiting)
        assert concurrency.pool_config.default_pool_limit == 1
        assert str(concurrency.pool_config.pool_granularity.value) == "run"


def test_the_dagster_yaml_creates_private_directories_and_keeps_an_existing_mode(tmp_path):
    """`make release` writes the instance's dagster.yaml before the first run: the release home and its dagster/
    directory it creates are 0700 (not the umask's 0755), an existing directory keeps its mode (issue 14)."""
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    shared.chmod(0o1777)
    write_dagster_yaml(shared / "home" / "dagster")
    assert (shared / "home").stat().st_mode & 0o7777 == 0o700
    assert (shared / "home" / "dagster").stat().st_mode & 0o7777 == 0o700
    assert shared.stat().st_mode & 0o7777 == 0o1777


def test_process_alive_since(tmp_path):
    """Alive: this process. Dead: a reaped child, a killed child not yet reaped (zombie), and this process's pid
    read as the pid of a run that started before it (a reused pid)."""
    assert process_alive_since(os.getpid(), time.time())
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait()
    assert not process_alive_since(child.pid, time.time())
    zombie = subprocess.Popen([sys.executable, "-c", "pass"])
    deadline = time.time() + 30
    while Path(f"/proc/{zombie.pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z" and time.time() < deadline:
        time.sleep(0.05)
    assert not process_alive_since(zombie.pid, time.time())
    zombie.wait()
    assert not process_alive_since(os.getpid(), time.time() - 10 * 24 * 3600)


def test_fail_orphaned_runs_fails_only_runs_whose_process_is_gone(tmp_path):
    """Zombie runs: of four STARTED runs, the one whose process is dead is marked FAILURE with the reason and tagged;
    a live process's run, a run of another machine and a run without a recorded process are left alone. A run that
    Dagster failed with its generic message, whose process is gone, gets the reason too."""
    import socket

    from dagster._core.events import EngineEventData
    from dagster._core.storage.dagster_run import DagsterRun

    from pipeline.run_events import FAILURE_REASON_TAG, HOST_TAG, PROCESS_GONE, fail_orphaned_runs

    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    with dg.instance_for_test(temp_dir=str(tmp_path)) as instance:

        def started(run_id: str, pid: int | None, **tags: str) -> DagsterRun:
            run = instance.add_run(DagsterRun(job_name="release", run_id=run_id, status=dg.DagsterRunStatus.STARTED, tags=tags))
            if pid is not None:
                instance.report_engine_event(f"Executing steps in process (pid: {pid})", run, EngineEventData.in_process(pid))
            return run

        started("dead", dead.pid)
        started("alive", os.getpid())
        started("elsewhere", dead.pid, **{HOST_TAG: socket.gethostname() + "-other"})
        started("unknown", None)
        generic = started("generic", dead.pid)
        instance.report_run_failed(generic)  # what Dagster's code server writes when it sees its worker die
        orphans = fail_orphaned_runs(instance)
        assert [orphan.run_id for orphan in orphans] == ["dead"] and orphans[0].pids == (dead.pid,)
        status = {run_id: instance.get_run_by_id(run_id).status for run_id in ("dead", "alive", "elsewhere", "unknown")}
        assert status == {
            "dead": dg.DagsterRunStatus.FAILURE,
            "alive": dg.DagsterRunStatus.STARTED,
            "elsewhere": dg.DagsterRunStatus.STARTED,
            "unknown": dg.DagsterRunStatus.STARTED,
        }
        failure = instance.get_records_for_run("dead", of_type=dg.DagsterEventType.RUN_FAILURE).records[0]
        assert f"its process (pid {dead.pid}) is gone" in failure.event_log_entry.dagster_event.message
        for run_id in ("dead", "generic"):
            assert instance.get_run_by_id(run_id).tags[FAILURE_REASON_TAG] == PROCESS_GONE
        engine = instance.get_records_for_run("generic", of_type=dg.DagsterEventType.ENGINE_EVENT).records
        assert any(f"(pid {dead.pid}) is gone" in (r.event_log_entry.dagster_event.message or "") for r in engine)
        assert fail_orphaned_runs(instance) == []  # nothing left to do


def test_remind_missed_retries_reports_again_a_failure_the_retry_daemon_missed(tmp_path):
    """A run failed with ``dagster/will_retry`` true and no retry after the grace period (Dagster's event log consumer
    read its failure event before its status was FAILURE) gets its failure reported again, at most three times; a run
    within the grace period, a run Dagster will not retry and a run already retried are left alone."""
    import time

    from dagster._core.storage.dagster_run import DagsterRun

    from pipeline.run_events import MAX_RETRY_REMINDERS, RETRY_REMINDERS_TAG, remind_missed_retries

    with dg.instance_for_test(temp_dir=str(tmp_path), overrides={"run_retries": {"enabled": True}}) as instance:

        def failed(run_id: str, **tags: str) -> None:
            run = instance.add_run(DagsterRun(job_name="release", run_id=run_id, status=dg.DagsterRunStatus.STARTED, tags=tags))
            instance.report_run_failed(run)

        failed("missed", **{"dagster/max_retries": "3"})
        failed("no_retry")  # no max_retries tag: Dagster will not retry it
        failed("retried", **{"dagster/max_retries": "3"})
        instance.add_run_tags("retried", {"dagster/auto_retry_run_id": "child"})
        assert instance.get_run_by_id("missed").tags["dagster/will_retry"] == "true"
        assert instance.get_run_by_id("no_retry").tags["dagster/will_retry"] == "false"

        def failures(run_id: str) -> int:
            return len(instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.RUN_FAILURE).records)

        assert remind_missed_retries(instance) == []  # within the grace period
        later = time.time() + 61
        for reminder in range(1, MAX_RETRY_REMINDERS + 1):
            assert remind_missed_retries(instance, now=later) == ["missed"]
            assert failures("missed") == 1 + reminder
            run = instance.get_run_by_id("missed")
            assert run.status == dg.DagsterRunStatus.FAILURE and run.tags[RETRY_REMINDERS_TAG] == str(reminder)
            assert run.tags["dagster/will_retry"] == "true"
        assert remind_missed_retries(instance, now=later) == []  # at most MAX_RETRY_REMINDERS
        assert failures("no_retry") == 1 and failures("retried") == 1
        message = instance.get_records_for_run("missed", of_type=dg.DagsterEventType.RUN_FAILURE).records[-1]
        assert "no retry has started after" in message.event_log_entry.dagster_event.message


def test_a_badly_named_file_is_skipped_and_the_others_still_run(inbox):
    """Red team, session 38: a file whose name is not valid UTF-8, or so long that its <name>.settings.json cannot
    exist, made every tick fail (UnicodeEncodeError in the run's tags; ENAMETOOLONG), so no other file ran."""
    home, folder, text = inbox
    _drop(folder, "good.csv", text)
    bad = os.fsencode(folder) + b"/bad\xffname.csv"
    with open(bad, "w") as handle:
        handle.write(text)
    past = time.time() - 120
    os.utime(bad, (past, past))
    _drop(folder, "n" * 240 + ".csv", text)
    data = _evaluate(home)
    # the long name runs, with the shared settings; the bad name is no run (its reason is logged)
    assert set(_keys(data)) == {"good.csv", "n" * 240 + ".csv"}
    (folder / "good.csv").unlink()
    (folder / ("n" * 240 + ".csv")).unlink()
    alone = _evaluate(home)
    assert alone.run_requests == []
    assert "bad\ufffdname.csv: its name is not valid UTF-8; rename it" in alone.skip_message


def test_content_whose_run_failed_because_another_file_was_removed_runs_again(inbox, tmp_path):
    """Red team, session 38: gone.csv was requested, removed before its run read it (the run failed: input file not
    found); the same content dropped as gone-again.csv went straight to failed/ with gone.csv's reason, and could never
    run again with these settings. A run that failed only because another name's file was missing is no verdict on
    this file: it gets a run of its own (a new run key); a failure of its own run is final, as before."""
    home, folder, text = inbox
    _drop(folder, "gone.csv", text)
    (tmp_path / "dagster").mkdir()
    with dg.DagsterInstance.local_temp(tempdir=str(tmp_path / "dagster")) as instance:
        first = _evaluate_with(instance, home)
        (request,) = first.run_requests
        (folder / "gone.csv").unlink()
        assert not _run_request(home, instance, request).success
        _drop(folder, "gone-again.csv", text)
        second = _evaluate_with(instance, home, first.cursor)
        (again,) = second.run_requests
        assert again.tags["msa_release/inbox_file"] == "gone-again.csv" and again.run_key != request.run_key
        assert (folder / "gone-again.csv").exists() and not (folder / "failed").exists()
        assert _run_request(home, instance, again).success
        _evaluate_with(instance, home, second.cursor)
        assert (folder / "processed" / "gone-again.csv").read_text() == text


def test_a_file_waits_for_its_settings_file_to_settle(inbox):
    """Red team, session 38: a <name>.settings.json written just after its (settled) data file came too late: the file
    was released with the shared settings. Its own settings file must settle too."""
    home, folder, text = inbox
    _drop(folder, "a.csv", text)
    (folder / "a.csv.settings.json").write_text(json.dumps({"seed": 3}))  # just written
    data = _evaluate(home)
    assert data.run_requests == [] and "a.csv: its settings file changed" in data.skip_message
    _age(folder / "a.csv.settings.json")
    (request,) = _evaluate(home).run_requests
    assert request.run_config["resources"]["settings"]["config"]["seed"] == 3
