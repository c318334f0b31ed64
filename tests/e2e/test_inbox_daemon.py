"""Issue 14 ("Inbox files lost forever", "Zombie runs") against real processes: a SIGKILLed ``msa-release run`` is marked
failed, with the reason, by the next command; a real ``dagster-daemon`` queues inbox files dropped together one run at
a time, marks a run whose worker was SIGKILLed failed and retries it, and leaves a run that failed on its data failed.

Processes started here get their own session and default signal handlers, and are stopped by process group."""

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import dagster as dg
import pytest

from pipeline.cli.common import write_dagster_yaml
from pipeline.run_events import PROCESS_GONE
from pipeline.release.failpoints import ENVIRONMENT_VARIABLE, PAUSE_ENVIRONMENT_VARIABLE
from tests.conftest import example_frame, example_quasi_identifiers

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
STOP_TIMEOUT = 30


def _default_signals() -> None:
    """preexec_fn: processes here may inherit ignored or blocked SIGTERM/SIGINT; undo that."""
    for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(number, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM, signal.SIGINT, signal.SIGHUP})


def _spawn(command: list[str], *, env: dict, log: Path) -> subprocess.Popen:
    with log.open("wb") as output:
        return subprocess.Popen(
            command,
            cwd=ROOT,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=_default_signals,
        )


def _stop_group(process: subprocess.Popen) -> None:
    """SIGTERM the process group of ``process`` (its own session), then SIGKILL what is left after STOP_TIMEOUT s."""
    for number in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, number)
        except ProcessLookupError:
            pass
        try:
            process.wait(timeout=STOP_TIMEOUT)
            return
        except subprocess.TimeoutExpired:
            continue


def _environment(home: Path, dagster_home: Path, **extra: str) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in (ENVIRONMENT_VARIABLE, PAUSE_ENVIRONMENT_VARIABLE)}
    env.update(MSA_RELEASE_HOME=str(home), DAGSTER_HOME=str(dagster_home), GX_ANALYTICS_ENABLED="false", **extra)
    return env


def _wait_for(condition, *, timeout: float, what: str, log: Path | None = None):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(0.5)
    text = log.read_text(errors="replace") if log is not None and log.exists() else ""
    retries = [line for line in text.splitlines() if "EventLogConsumer" in line or "etry" in line and "skipped" not in line]
    tail = "\n".join(retries[-30:]) + "\n...\n" + text[-3000:]
    raise AssertionError(f"timed out after {timeout:g} s waiting for {what}\n{tail}")


def _run_pid(instance: dg.DagsterInstance, run_id: str) -> int | None:
    from pipeline.run_events import run_process_ids

    pids = run_process_ids(instance, run_id)
    return pids[-1][0] if pids else None


def _failure_message(instance: dg.DagsterInstance, run_id: str) -> str:
    records = instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.RUN_FAILURE).records
    return " ".join(record.event_log_entry.dagster_event.message or "" for record in records)


def _engine_messages(instance: dg.DagsterInstance, run_id: str) -> str:
    records = instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.ENGINE_EVENT).records
    return " ".join(record.event_log_entry.dagster_event.message or "" for record in records)


def _settings(example: dict) -> dict:
    return {
        "quasi_identifiers": example_quasi_identifiers(example),
        "sensitive_attributes": example["SA"],
        "ell": example["l"],
        "min_confidence": example["min_conf"],
    }


def _run_storage_has_a_run(dagster_home: Path) -> bool:
    """Whether the Dagster instance in ``dagster_home`` has its run storage and a run in it, read with sqlite3 read-only
    (opening a DagsterInstance would create the storages itself, racing the process that is creating them)."""
    import sqlite3

    database = dagster_home / "history" / "runs.db"
    if not database.exists():
        return False
    try:
        with contextlib.closing(sqlite3.connect(f"file:{database}?mode=ro", uri=True, timeout=1)) as connection:
            return connection.execute("SELECT COUNT(*) FROM runs").fetchone()[0] > 0
    except sqlite3.Error:
        return False


def test_a_sigkilled_cli_run_is_marked_failed_with_the_reason_at_the_next_start(golden, tmp_path):
    """Zombie runs: ``msa-release run`` SIGKILLed mid-run leaves its Dagster run STARTED; the next ``msa-release run``
    marks it FAILURE with the reason (its process is gone), says so on stderr, and publishes."""
    example = golden["example_B"]
    home, dagster_home = tmp_path / "home", tmp_path / "home" / "dagster"
    csv = tmp_path / "example_b.csv"
    example_frame(example).drop(columns="row_id").to_csv(csv, index=False)
    settings = _settings(example)
    args = [
        str(BIN / "msa-release"),
        "run",
        "--engine",
        "memory",  # paused at the in-memory job's failpoint (warehouse.before_load.private.raw_records)
        "--input",
        str(csv),
        "--quasi-identifiers",
        ",".join(settings["quasi_identifiers"]),
        "--sensitive-attributes",
        ",".join(settings["sensitive_attributes"]),
        "--ell",
        str(settings["ell"]),
        "--min-confidence",
        str(settings["min_confidence"]),
    ]
    paused = _spawn(
        args,
        env=_environment(home, dagster_home, **{PAUSE_ENVIRONMENT_VARIABLE: "warehouse.before_load.private.raw_records=300"}),
        log=tmp_path / "killed.log",
    )
    try:
        # the CLI creates the instance's SQLite storages after it writes dagster.yaml: opening the instance here before
        # its first run exists raced with that creation ("table alembic_version already exists" in the CLI)
        _wait_for(
            lambda: _run_storage_has_a_run(dagster_home), timeout=90, what="the CLI's first run", log=tmp_path / "killed.log"
        )
        with dg.DagsterInstance.from_config(str(dagster_home)) as instance:

            def ingested():
                runs = instance.get_runs(filters=dg.RunsFilter(statuses=[dg.DagsterRunStatus.STARTED]))
                if runs and instance.get_records_for_run(runs[0].run_id, of_type=dg.DagsterEventType.STEP_SUCCESS).records:
                    return runs[0]
                return None

            run = _wait_for(ingested, timeout=90, what="the run to pass its ingest step", log=tmp_path / "killed.log")
            assert _run_pid(instance, run.run_id) == paused.pid
            os.kill(paused.pid, signal.SIGKILL)
            paused.wait(timeout=30)
            assert instance.get_run_by_id(run.run_id).status == dg.DagsterRunStatus.STARTED  # the zombie
            after = subprocess.run(
                args, cwd=tmp_path, env=_environment(home, dagster_home), capture_output=True, text=True, timeout=300
            )
            assert after.returncode == 0, after.stderr
            assert f"run {run.run_id} (release) marked failed: its process (pid {paused.pid}) is gone" in after.stderr
            assert instance.get_run_by_id(run.run_id).status == dg.DagsterRunStatus.FAILURE
            assert "killed (SIGKILL, out of memory, a timeout)" in _failure_message(instance, run.run_id)
            assert instance.get_run_by_id(run.run_id).tags["msa_release/failure_reason"] == PROCESS_GONE
    finally:
        _stop_group(paused)


def test_the_daemon_queues_inbox_files_retries_a_killed_run_and_leaves_a_refused_one_failed(golden, tmp_path):
    """Three files dropped together into the inbox of a real ``dagster-daemon``: two good ones (same bytes, other
    settings: both run), one missing a configured column. Runs never overlap (the run queue) and none fails on the
    release lock; the first run's worker is SIGKILLed: the next tick marks it FAILURE with the reason and Dagster
    retries it (a new run, its child), which publishes; the bad file's run fails on its data and is not retried.
    The files name no engine: they run the mixed model's default job, ``sharded_release`` on engine local (issue 17)."""
    example = golden["example_B"]
    home, dagster_home = tmp_path / "home", tmp_path / "dagster"
    inbox = home / "inbox"
    inbox.mkdir(parents=True)
    write_dagster_yaml(dagster_home)
    (inbox / "settings.json").write_text(json.dumps(_settings(example)))
    frame = example_frame(example).drop(columns="row_id")
    for name, table in (("a.csv", frame), ("b.csv", frame), ("bad.csv", frame.drop(columns=[example["SA"][-1]]))):
        table.to_csv(inbox / (name + ".part"), index=False)
    # other settings (a recomposition of a.csv's records, allowed explicitly: docs/series.md)
    (inbox / "b.csv.settings.json").write_text(json.dumps({"seed": 11, "allow_recomposition": True}))
    for name in ("a.csv", "b.csv", "bad.csv"):
        (inbox / (name + ".part")).rename(inbox / name)
    env = _environment(home, dagster_home, MSA_RELEASE_INBOX_INTERVAL_SECONDS="2", MSA_RELEASE_INBOX_SETTLE_SECONDS="0")
    workspace = ROOT / "workspace.yaml"
    started = subprocess.run(
        [str(BIN / "dagster"), "sensor", "start", "inbox_sensor", "-w", str(workspace)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        preexec_fn=_default_signals,
    )
    assert started.returncode == 0, started.stdout + started.stderr
    log = tmp_path / "daemon.log"
    daemon = _spawn([str(BIN / "dagster-daemon"), "run", "-w", str(workspace)], env=env, log=log)
    try:
        with dg.DagsterInstance.from_config(str(dagster_home)) as instance:

            def first_worker():
                for run in instance.get_runs(filters=dg.RunsFilter(statuses=[dg.DagsterRunStatus.STARTED])):
                    pid = _run_pid(instance, run.run_id)
                    if pid is not None and run.tags.get("msa_release/inbox_file") in ("a.csv", "b.csv"):
                        return run, pid
                return None

            killed, pid = _wait_for(first_worker, timeout=120, what="a started inbox run", log=log)
            os.kill(pid, signal.SIGKILL)

            def settled():
                runs = instance.get_runs()
                done = [r for r in runs if r.status in (dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE)]
                retried = [r for r in runs if r.parent_run_id == killed.run_id]
                explained = instance.get_run_by_id(killed.run_id).tags.get("msa_release/failure_reason")
                return runs if len(runs) == 4 and len(done) == 4 and retried and explained else None

            runs = _wait_for(settled, timeout=240, what="three inbox runs and one retry to finish", log=log)

            def set_aside():  # issue 15: the next ticks move every file whose runs are over
                names = {p.name for p in inbox.iterdir() if p.is_file()}
                return not names & {"a.csv", "b.csv", "bad.csv"} and (inbox / "failed" / "bad.csv").is_file()

            _wait_for(set_aside, timeout=60, what="the inbox files to be moved to processed/ and failed/", log=log)
    finally:
        _stop_group(daemon)
    with dg.DagsterInstance.from_config(str(dagster_home)) as instance:
        records = {record.dagster_run.run_id: record for record in instance.get_run_records()}
        by_file: dict[str, list] = {}
        for run in runs:
            by_file.setdefault(run.tags["msa_release/inbox_file"], []).append(run)
        assert set(by_file) == {"a.csv", "b.csv", "bad.csv"} and len(by_file[killed.tags["msa_release/inbox_file"]]) == 2
        assert {run.job_name for run in runs} == {"sharded_release"}
        # the killed run: FAILURE with the reason, retried once (a child run with Dagster's retry tags) that published
        assert instance.get_run_by_id(killed.run_id).status == dg.DagsterRunStatus.FAILURE
        # failed by the code server that saw its worker die (Dagster's generic message) or by the sensor's next tick;
        # either way the run says why, in a tag and in its event log
        assert instance.get_run_by_id(killed.run_id).tags.get("msa_release/failure_reason") == PROCESS_GONE
        assert f"(pid {pid}) is gone" in _failure_message(instance, killed.run_id) + _engine_messages(instance, killed.run_id)
        retry = next(r for r in runs if r.parent_run_id == killed.run_id)
        assert retry.status == dg.DagsterRunStatus.SUCCESS and retry.tags.get("dagster/retry_number") == "1"
        assert retry.tags["msa_release/input_sha256"] == killed.tags["msa_release/input_sha256"]
        # both good files published (the same bytes with other settings ran), the bad one failed on its data, not retried
        good = [r for r in runs if r.tags["msa_release/inbox_file"] in ("a.csv", "b.csv") and r.run_id != killed.run_id]
        assert len(good) == 2 and all(r.status == dg.DagsterRunStatus.SUCCESS for r in good)
        bad = [r for r in runs if r.tags["msa_release/inbox_file"] == "bad.csv"]
        assert len(bad) == 1 and bad[0].status == dg.DagsterRunStatus.FAILURE
        assert instance.get_run_by_id(bad[0].run_id).tags.get("dagster/will_retry") == "false"
        # one at a time: no two runs' [start, end] windows overlap; no run failed on the release lock
        windows = sorted((records[r.run_id].start_time, records[r.run_id].end_time) for r in runs if r.run_id != killed.run_id)
        assert all(earlier[1] <= later[0] for earlier, later in zip(windows, windows[1:])), windows
        for run in runs:
            assert "another release is running" not in _failure_message(instance, run.run_id)
        assert len([p for p in (home / "releases").iterdir() if not p.name.startswith(".") and p.is_dir()]) == 2
        # the good files in processed/ (the killed one only after its retry published), the bad one in failed/
        assert {p.name for p in (inbox / "processed").iterdir()} == {
            "a.csv",
            "a.csv.result.json",
            "b.csv",
            "b.csv.result.json",
            "b.csv.settings.json",
        }
        killed_file = killed.tags["msa_release/inbox_file"]
        result = json.loads((inbox / "processed" / f"{killed_file}.result.json").read_text())
        assert result["run_id"] == retry.run_id and result["release"]["area"] == "releases"
        failed = json.loads((inbox / "failed" / "bad.csv.result.json").read_text())
        assert failed["run_id"] == bad[0].run_id and failed["status"] == "failed" and failed["reason"]
