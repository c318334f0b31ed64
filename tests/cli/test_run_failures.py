"""How ``msa-release run`` reports a run that published nothing (issue 13: the CLI reads the structured failures of
the steps, ``pipeline/failures.py``, to choose its exit status and message).

A tiny in-process job fails in three ways: an unusable input (exit status 2, names its file and column), a full disk
(an ``OSError`` with errno ENOSPC) and an unexpected error; the CLI's reading of that run is checked directly, and
through the ``run`` command with the job replaced by that run (click's CliRunner; nothing else is executed). Errors of
the machine (issue 14's fault injection): a DuckDB ``IO Error`` and an EIO inside a step get what to do; an ``OSError`` or
the Dagster instance's database error outside a step (the lock, the instance) is one line, exit status 1, saying
whether the release was published."""

from __future__ import annotations

import errno

import dagster as dg
import pytest
from click.testing import CliRunner

import pipeline.cli.run as run_command
from pipeline.cli import main
from pipeline.cli.common import environment_failure_messages, failure_exit_status, unusable_input_messages
from pipeline.failures import step_failures, structured_failures
from pipeline.io.loading import InputError

UNUSABLE = "in.csv: sensitive attribute(s) ['diagnosis'] have the same value in all 4 records"


@dg.op
def unreadable_input() -> None:
    with structured_failures(file="/data/in.csv"):
        raise InputError(UNUSABLE, column="diagnosis")


@dg.op
def disk_full() -> None:
    with structured_failures():
        raise OSError(errno.ENOSPC, "No space left on device")


@dg.op
def unexpected() -> None:
    raise RuntimeError("an unexpected failure")


def _run(*ops) -> dg.ExecuteInProcessResult:
    @dg.job(name="failing_" + "_".join(op.name for op in ops))
    def failing():
        for op in ops:
            op()

    return failing.execute_in_process(raise_on_error=False)


@pytest.fixture(scope="module")
def failed_run() -> dg.ExecuteInProcessResult:
    return _run(unreadable_input, disk_full, unexpected)


def test_each_failed_step_carries_its_class_exit_status_file_and_column(failed_run):
    failures = {failure.step: failure for failure in step_failures(failed_run)}
    assert set(failures) == {"unreadable_input", "disk_full", "unexpected"}
    unusable = failures["unreadable_input"]
    assert unusable.exit_status == 2 and unusable.message == UNUSABLE
    assert unusable.metadata == {"error_class": "InputError", "exit_status": 2, "file": "/data/in.csv", "column": "diagnosis"}
    assert failures["disk_full"].metadata == {"error_class": "OSError", "exit_status": 1, "errno": errno.ENOSPC}
    assert failures["unexpected"].exit_status is None and failures["unexpected"].metadata == {}


def test_the_exit_status_and_messages_come_from_the_metadata(failed_run):
    assert failure_exit_status(failed_run) == 2
    assert unusable_input_messages(failed_run) == [UNUSABLE]
    (message,) = environment_failure_messages(failed_run)
    assert message.startswith("disk full: step disk_full ran out of space")
    machine_only = _run(disk_full)
    assert failure_exit_status(machine_only) == 1 and unusable_input_messages(machine_only) == []


def test_a_message_that_merely_mentions_a_full_disk_is_not_one(tmp_path):
    @dg.op
    def says_no_space() -> None:
        with structured_failures():
            raise InputError("a column named 'No space left on device [Errno 28]' is reserved")

    run = _run(says_no_space)
    assert environment_failure_messages(run) == []  # structured: its errno (none) decides, not its text
    assert failure_exit_status(run) == 2


@pytest.mark.parametrize(
    ("ops", "status", "expected"),
    [
        ((unreadable_input,), 2, f"unusable input: {UNUSABLE}"),
        ((disk_full,), 1, "disk full: step disk_full ran out of space"),
    ],
    ids=["unusable-input", "disk-full"],
)
def test_the_run_command_exits_with_the_status_the_failures_carry(tmp_path, monkeypatch, ops, status, expected):
    result = _run(*ops)
    home = tmp_path / "home"
    monkeypatch.setattr(run_command, "preflight", lambda config, home_option: home)
    monkeypatch.setattr(run_command, "hold_release_lock", lambda home, wait, wait_timeout: None)
    started = []
    monkeypatch.setattr(
        run_command,
        "execute_job",
        lambda job, config, home_option, verbose, **options: started.append(job) or (result, home),
    )
    outcome = CliRunner().invoke(main, ["run", "--model", "rating", "--home", str(home)])
    assert started == ["rating_release"]  # the model's own job, from the registry
    assert outcome.exit_code == status, outcome.output
    assert "NO release published" in outcome.output and expected in outcome.output


class RefusingResource(dg.ConfigurableResource):
    """A resource whose set-up fails as the warehouse IO manager does on a damaged warehouse."""

    def setup_for_execution(self, context) -> None:
        from pipeline.warehouse import WarehouseCorrupt

        raise WarehouseCorrupt("the warehouse /h/warehouse.duckdb is damaged; rebuild it", file="/h/warehouse.duckdb")


def test_a_run_stopped_by_its_resources_is_read_back_with_the_error_class_exit_status():
    @dg.op(required_resource_keys={"warehouse"})
    def needs_the_warehouse() -> None:
        pass

    @dg.job(resource_defs={"warehouse": RefusingResource()})
    def refused():
        needs_the_warehouse()

    from pipeline.failures import RUN_STEP, run_failures

    result = refused.execute_in_process(raise_on_error=False)
    assert step_failures(result) == []
    (failure,) = run_failures(result)
    assert (failure.step, failure.exit_status) == (RUN_STEP, 2)
    assert failure.message == "the warehouse /h/warehouse.duckdb is damaged; rebuild it"
    assert failure.metadata["error_class"] == "WarehouseCorrupt"
    assert failure_exit_status(result) == 2


def test_a_run_failed_by_its_steps_has_no_run_failure(failed_run):
    from pipeline.failures import run_failures

    assert run_failures(failed_run) == [] and run_failures(_run(disk_full)) == []


@dg.op
def warehouse_full() -> None:
    import duckdb

    raise duckdb.IOException('IO Error: Could not write file "/home/warehouse.duckdb": No space left on device')


@dg.op
def io_error() -> None:
    with structured_failures():
        raise OSError(errno.EIO, "Input/output error", "/home/releases/.staging-x/manifest.json")


def test_a_duckdb_io_error_and_an_io_error_get_what_to_do():
    full, failing = _run(warehouse_full), _run(io_error)
    (message,) = environment_failure_messages(full)  # DuckDB's IO Error carries the errno's text, not [Errno 28]
    assert message.startswith("disk full: step warehouse_full ran out of space") and "free space" in message
    (message,) = environment_failure_messages(failing)
    assert message.startswith("I/O error: step io_error failed on the machine (Input/output error)")
    assert message.endswith("check it (e.g. dmesg, free space) and retry")


def _instance_full() -> BaseException:
    import sqlite3

    import sqlalchemy.exc

    return sqlalchemy.exc.OperationalError("INSERT INTO event_logs", {}, sqlite3.OperationalError("database or disk is full"))


@pytest.mark.parametrize(
    ("where", "error", "expected"),
    [
        ("lock", OSError(errno.ENOSPC, "No space left on device", "/h/release.lock"), "No space left on device: /h/release.lock"),
        ("job", OSError(errno.EIO, "Input/output error", "/h/dagster/storage"), "Input/output error: /h/dagster/storage"),
        ("job", _instance_full(), "the Dagster instance in "),
    ],
    ids=["lock-disk-full", "instance-io-error", "event-log-full"],
)
def test_an_error_of_the_machine_outside_a_step_is_one_line_and_exit_1(tmp_path, monkeypatch, where, error, expected):
    home = tmp_path / "home"
    home.mkdir(mode=0o700)  # a private home (a shared one gets a warning line first)
    (home / "releases" / "20260101T000000Z-aaaaaaaa").mkdir(parents=True)
    (home / "releases" / "LATEST").write_text("20260101T000000Z-aaaaaaaa\n")

    def fail(*args, **kwargs):
        raise error

    monkeypatch.setattr(run_command, "preflight", lambda config, home_option: home)
    monkeypatch.setattr(run_command, "hold_release_lock", fail if where == "lock" else (lambda home, wait, wait_timeout: None))
    monkeypatch.setattr(run_command, "execute_job", fail)
    outcome = CliRunner().invoke(main, ["run", "--home", str(home)])
    assert outcome.exit_code == 1 and isinstance(outcome.exception, SystemExit), outcome.output
    first, *rest = outcome.output.splitlines()
    assert first.startswith("msa-release: NO release published: ") and expected in first and first.endswith("and retry")
    untouched = f"  the previous release is untouched: {home / 'releases' / '20260101T000000Z-aaaaaaaa'}"
    assert rest == ([] if where == "lock" else [untouched])  # LATEST is read once the lock is held


def test_an_error_of_the_machine_after_latest_moved_says_the_release_is_published(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir(mode=0o700)  # a private home (a shared one gets a warning line first)
    (home / "releases" / "20260101T000000Z-bbbbbbbb").mkdir(parents=True)

    def publish_then_fail(*args, **kwargs):
        (home / "releases" / "LATEST").write_text("20260101T000000Z-bbbbbbbb\n")
        raise _instance_full()

    monkeypatch.setattr(run_command, "preflight", lambda config, home_option: home)
    monkeypatch.setattr(run_command, "hold_release_lock", lambda home, wait, wait_timeout: None)
    monkeypatch.setattr(run_command, "execute_job", publish_then_fail)
    outcome = CliRunner().invoke(main, ["run", "--home", str(home)])
    assert outcome.exit_code == 1
    assert outcome.output.startswith(f"msa-release: release {home / 'releases' / '20260101T000000Z-bbbbbbbb'} IS published")
    assert "database or disk is full" in outcome.output and "NO release" not in outcome.output


@dg.op
def event_log_io_error() -> None:
    import sqlite3

    import sqlalchemy.exc

    raise sqlalchemy.exc.OperationalError("INSERT INTO event_logs", {}, sqlite3.OperationalError("disk I/O error"))


def test_the_dagster_instance_s_sqlite_errors_inside_a_step_get_what_to_do():
    (message,) = environment_failure_messages(_run(event_log_io_error))
    assert message.startswith("I/O error: step event_log_io_error failed on the machine (Input/output error)")
