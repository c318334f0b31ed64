"""Honest failures (issue 14, "Medium"): every way a run can fail on the machine rather than on the data gets one
clear line with the cause and what to do, and the right exit status, through the real ``msa-release run``
(in-process via click's CliRunner, as ``tests/e2e/test_bad_input.py``); never a bare "NO release published", a raw
traceback or minutes of retries.

Catalogue (test: situation -> behaviour)

======================================  ================================================================================
shared_home                             --home an existing 1777 directory -> its mode (sticky bit) kept, a warning
                                        naming the mode and ``chmod 700``
damaged_warehouse                       warehouse.duckdb full of random bytes -> exit 2 before Dagster starts, "damaged",
                                        "private cache", ``--rebuild-warehouse``; the previous release untouched;
                                        then ``--rebuild-warehouse`` -> exit 0, a new release
damaged_warehouse_in_the_job            the same found by the job's IO manager (a run launched from the UI; the CLI's
                                        check skipped) -> exit 2, "the run stopped before its first step: … damaged",
                                        no DuckDB retries
warehouse_symlink_loop                  warehouse.duckdb a symlink to itself -> exit 2 "cannot be opened"
warehouse_not_writable                  DuckDB refuses the file (permission denied; simulated, the tests run as root)
                                        -> exit 2, "chown, chmod 600", how to rebuild
home_symlink_loop                       --home a symlink loop -> exit 2 "cannot be used as a directory"
dagster_home_is_a_file                  $DAGSTER_HOME a regular file -> exit 2, names it, "unset it"
release_lock_is_a_directory             <home>/release.lock a directory -> exit 2 "release lock … cannot be opened"
release_lock_of_another_user            opening release.lock: permission denied (simulated) -> exit 2, the same
latest_tmp_is_a_directory               releases/.LATEST.tmp a directory -> exit 2 "cannot be removed … move it out";
                                        the directory, LATEST and the releases untouched
invalid_dagster_yaml                    dagster.yaml not YAML / an unknown key -> exit 2, the file and the problem
invalid_schedule_variables              MSA_RELEASE_SCHEDULE_CRON / _TIMEZONE invalid -> exit 2, names the variable
dagster_instance_disk_full              the instance's SQLite says "database or disk is full" (simulated) -> exit 1
                                        "disk full", $DAGSTER_HOME
profile_output_not_writable             --profile-output in a missing directory -> exit 2 before anything runs
profile_write_fails_after_publish       writing the profile fails after a publish (simulated) -> exit 1, "the release
                                        above IS published", LATEST names the new release
======================================  ================================================================================

No case prints a traceback (``Traceback`` is never in the output) and every message is one line with the cause and
what to do.
"""

from __future__ import annotations

import csv
import errno
import os
import shutil
import sqlite3
import sys
import stat
from pathlib import Path

import dagster as dg
import duckdb
import pytest
from click.testing import CliRunner

import pipeline.cli.run as run_command
from pipeline.cli import main
from pipeline.release.publish import read_latest

STANDARD = ("--quasi-identifiers", "q", "--sensitive-attributes", "a,b", "--ell", "2")
DIVERSE = [["1", "x", "p"], ["2", "y", "q"], ["3", "z", "r"]]
#: A table the mixed model publishes with ℓ = 2 (every value twice, every pair of values once).
PUBLISHABLE = [["1", "x", "p"], ["2", "y", "q"], ["3", "z", "r"], ["4", "x", "q"], ["5", "y", "r"], ["6", "z", "p"]]


def write_csv(path: Path, header: list[str], rows: list[list[str]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)
    return path


def invoke_run(home: Path, *arguments: str, **kwargs):
    return CliRunner().invoke(main, ["run", *arguments, "--home", str(home)], **kwargs)


@pytest.fixture
def cli_environment(tmp_path, monkeypatch):
    """The CLI writes MSA_RELEASE_HOME and DAGSTER_HOME into os.environ; restore them afterwards."""
    monkeypatch.setenv("MSA_RELEASE_HOME", str(tmp_path / "unused-home"))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "unused-dagster"))
    monkeypatch.setenv("GX_ANALYTICS_ENABLED", "false")
    return tmp_path


def test_an_existing_shared_home_keeps_its_mode_and_the_cli_warns(cli_environment):
    """``--home`` on a shared directory (mode 1777, like /tmp): never re-moded, one warning naming the mode."""
    home = cli_environment / "shared"
    home.mkdir()
    os.chmod(home, 0o1777)
    (home / "releases").write_text("a file\n")  # the run stops right after taking the home (exit 2), nothing runs
    outcome = invoke_run(home, "--input", str(write_csv(cli_environment / "t.csv", ["q", "a", "b"], DIVERSE)), *STANDARD)
    assert outcome.exit_code == 2, outcome.output
    assert stat.S_IMODE(home.stat().st_mode) == 0o1777
    assert outcome.output.count("accessible to other users (mode 1777)") == 1, outcome.output
    assert f"chmod 700 {home}" in outcome.output


# --------------------------------------------------------------------------------------------
# A home holding one release, copied for every case


def snapshot(home: Path) -> tuple[str | None, list[str]]:
    """LATEST's content and every entry of releases/ (hidden ones included)."""
    releases = home / "releases"
    latest = (releases / "LATEST").read_text() if (releases / "LATEST").is_file() else None
    return latest, sorted(p.name for p in releases.iterdir()) if releases.is_dir() else []


@pytest.fixture(scope="module")
def published(tmp_path_factory) -> tuple[Path, Path]:
    """(input CSV, home holding one release of it)."""
    base = tmp_path_factory.mktemp("honest_failures")
    path = write_csv(base / "t.csv", ["q", "a", "b"], PUBLISHABLE)
    home = base / "home"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MSA_RELEASE_HOME", str(base / "unused-home"))
        patch.setenv("DAGSTER_HOME", str(base / "unused-dagster"))
        patch.setenv("GX_ANALYTICS_ENABLED", "false")
        outcome = invoke_run(home, "--input", str(path), *STANDARD)
    assert outcome.exit_code == 0, outcome.output
    return path, home


@pytest.fixture
def seeded(published, cli_environment) -> tuple[Path, Path]:
    """(input CSV, a fresh home, mode 0700, that already holds the module's release)."""
    path, source = published
    home = cli_environment / "home"
    shutil.copytree(source / "releases", home / "releases")
    os.chmod(home, 0o700)
    return path, home


def assert_one_clear_failure(outcome, status: int, *expected: str) -> None:
    assert outcome.exit_code == status, outcome.output
    assert "Traceback" not in outcome.output
    assert outcome.exception is None or isinstance(outcome.exception, SystemExit), repr(outcome.exception)
    for text in expected:
        assert text in outcome.output, (text, outcome.output)


def garbage(path: Path, size: int = 64 * 1024) -> None:
    path.write_bytes(bytes((i * 131 + 7) % 256 for i in range(size)))


# --------------------------------------------------------------------------------------------
# The warehouse


def test_damaged_warehouse_is_refused_at_once_and_rebuilt_on_request(seeded):
    path, home = seeded
    garbage(home / "warehouse.duckdb")
    before = snapshot(home)
    outcome = invoke_run(home, "--input", str(path), *STANDARD)
    assert_one_clear_failure(
        outcome, 2, "NO release published", "is damaged", "private cache", "--rebuild-warehouse", str(home / "warehouse.duckdb")
    )
    assert snapshot(home) == before
    rebuilt = invoke_run(home, "--input", str(path), *STANDARD, "--rebuild-warehouse")
    assert rebuilt.exit_code == 0, rebuilt.output
    assert "deleted the warehouse (warehouse.duckdb)" in rebuilt.output
    assert read_latest(home / "releases").name != before[0]
    duckdb.connect(str(home / "warehouse.duckdb")).close()  # a valid database again


def test_damaged_warehouse_found_by_the_job_stops_the_run_with_the_reason(seeded, monkeypatch):
    """A run launched from the UI has no CLI check: the IO manager's first open refuses the warehouse (no retries);
    the CLI, reading that run, prints the reason and exits 2."""
    path, home = seeded
    garbage(home / "warehouse.duckdb")
    monkeypatch.setattr(run_command, "_check_warehouse", lambda home, rebuild: None)
    before = snapshot(home)
    outcome = invoke_run(home, "--input", str(path), *STANDARD)
    assert_one_clear_failure(
        outcome,
        2,
        "NO release published",
        "the run stopped before its first step: the warehouse",
        "is damaged",
        "--rebuild-warehouse",
        "the previous release is untouched",
    )
    assert snapshot(home) == before


def test_warehouse_symlink_loop(seeded):
    path, home = seeded
    (home / "warehouse.duckdb").symlink_to(home / "warehouse.duckdb")
    outcome = invoke_run(home, "--input", str(path), *STANDARD)
    assert_one_clear_failure(outcome, 2, "warehouse", "cannot be opened", "--rebuild-warehouse")


def test_warehouse_not_writable(seeded, monkeypatch):
    """Permission denied on the warehouse (simulated: the tests run as root, so a chmod would not bite)."""
    path, home = seeded
    duckdb.connect(str(home / "warehouse.duckdb")).close()
    real_connect = duckdb.connect

    def refuse_the_warehouse(database=":memory:", *args, **kwargs):
        if str(database).endswith("warehouse.duckdb"):
            raise duckdb.IOException(f'IO Error: Cannot open file "{database}": Permission denied')
        return real_connect(database, *args, **kwargs)

    monkeypatch.setattr(duckdb, "connect", refuse_the_warehouse)
    outcome = invoke_run(home, "--input", str(path), *STANDARD)
    assert_one_clear_failure(outcome, 2, "cannot be opened for writing", "Permission denied", "chown, chmod 600")


# --------------------------------------------------------------------------------------------
# The home, the lock, releases/


def test_home_symlink_loop(published, cli_environment):
    path, _ = published
    loop = cli_environment / "loop"
    loop.symlink_to(cli_environment / "loop")
    outcome = invoke_run(loop, "--input", str(path), *STANDARD)
    assert_one_clear_failure(outcome, 2, "cannot be used as a directory", "Symlink loop")


def test_dagster_home_is_a_file(published, cli_environment):
    path, _ = published
    dagster_home = cli_environment / "dagster-file"
    dagster_home.write_text("a file\n")
    outcome = CliRunner().invoke(
        main,
        ["run", "--input", str(path), *STANDARD],
        env={"MSA_RELEASE_HOME": str(cli_environment / "home"), "DAGSTER_HOME": str(dagster_home)},
    )
    assert_one_clear_failure(outcome, 2, str(dagster_home), "$DAGSTER_HOME", "cannot be used as a directory", "unset it")
    assert dagster_home.read_text() == "a file\n"


def test_release_lock_is_a_directory(seeded):
    path, home = seeded
    (home / "release.lock").mkdir()
    outcome = invoke_run(home, "--input", str(path), *STANDARD)
    assert_one_clear_failure(outcome, 2, "release.lock is a directory, not the lock file", "remove it")


def test_release_lock_of_another_user(seeded, monkeypatch):
    """Opening release.lock is refused (another user's 0600 file; simulated, the tests run as root)."""
    import pipeline.release.locking as locking

    path, home = seeded
    real_open = os.open

    def refuse_the_lock(file, *args, **kwargs):
        if str(file).endswith("release.lock"):
            raise PermissionError(errno.EACCES, "Permission denied", str(file))
        return real_open(file, *args, **kwargs)

    monkeypatch.setattr(locking.os, "open", refuse_the_lock)
    before = snapshot(home)
    outcome = invoke_run(home, "--input", str(path), *STANDARD)
    assert_one_clear_failure(outcome, 2, "the release lock", "cannot be opened (Permission denied)", "home of your own")
    assert snapshot(home) == before


def test_latest_tmp_is_a_directory(seeded):
    path, home = seeded
    stray = home / "releases" / ".LATEST.tmp"
    stray.mkdir()
    (stray / "kept").write_text("a user's file\n")
    before = snapshot(home)
    outcome = invoke_run(home, "--input", str(path), *STANDARD)
    assert_one_clear_failure(outcome, 2, ".LATEST.tmp is a directory", "remove the directory (it is not a release)")
    assert snapshot(home) == before and (stray / "kept").read_text() == "a user's file\n"


# --------------------------------------------------------------------------------------------
# The Dagster instance and the code location's variables


@pytest.mark.parametrize(
    ("content", "expected"),
    [("telemetry: [\n", "while parsing"), ("nonsense_key: 1\n", 'unexpected config entry "nonsense_key"')],
    ids=["not-yaml", "unknown-key"],
)
def test_invalid_dagster_yaml(seeded, content, expected):
    path, home = seeded
    (home / "dagster").mkdir()
    (home / "dagster" / "dagster.yaml").write_text(content)
    before = snapshot(home)
    outcome = invoke_run(home, "--input", str(path), *STANDARD)
    assert_one_clear_failure(outcome, 2, str(home / "dagster" / "dagster.yaml"), "is invalid", expected, "delete it")
    assert snapshot(home) == before


@pytest.mark.parametrize(
    ("variable", "value"),
    [("MSA_RELEASE_SCHEDULE_CRON", "every monday"), ("MSA_RELEASE_SCHEDULE_TIMEZONE", "Mars/Olympus_Mons")],
    ids=["cron", "time-zone"],
)
def test_invalid_schedule_variables(seeded, monkeypatch, variable, value):
    path, home = seeded
    monkeypatch.setenv(variable, value)
    outcome = invoke_run(home, "--input", str(path), *STANDARD)
    assert_one_clear_failure(outcome, 2, f"{variable}={value!r} is not", "nothing was run")


def test_dagster_instance_disk_full(seeded, monkeypatch):
    """SQLite of the Dagster instance runs out of space while the run writes its events (simulated)."""
    import sqlalchemy.exc

    path, home = seeded

    def full(*args, **kwargs):
        cause = sqlite3.OperationalError("database or disk is full")
        error = sqlalchemy.exc.OperationalError("INSERT INTO event_logs ...", {}, cause)
        sys.stderr.write(f"Exception while writing logger call to event log: {error}\n")  # what Dagster prints itself
        raise error

    monkeypatch.setattr(dg, "execute_job", full)
    before = snapshot(home)
    outcome = invoke_run(home, "--input", str(path), *STANDARD)
    assert_one_clear_failure(
        outcome,
        1,
        "NO release published: the Dagster instance in",
        "database or disk is full",
        "free space under $MSA_RELEASE_HOME",
    )
    assert "Exception while writing logger call" not in outcome.output and "[SQL:" not in outcome.output
    assert snapshot(home) == before


# --------------------------------------------------------------------------------------------
# --profile-output


def test_profile_output_not_writable_is_refused_before_running(seeded):
    path, home = seeded
    target = home / "no-such-directory" / "profile.json"
    outcome = invoke_run(home, "--input", str(path), *STANDARD, "--profile", "--profile-output", str(target))
    assert_one_clear_failure(outcome, 2, "--profile-output", "cannot write there", "nothing was run")
    assert not (home / "warehouse.duckdb").exists()


def test_profile_write_fails_after_publish(seeded, monkeypatch):
    path, home = seeded

    def no_space(result, home, output, *, started):
        raise OSError(errno.ENOSPC, "No space left on device", str(output))

    monkeypatch.setattr(run_command, "write_profile_sidecar", no_space)
    before = snapshot(home)
    outcome = invoke_run(home, "--input", str(path), *STANDARD, "--profile", "--profile-output", str(home / "p.json"))
    assert_one_clear_failure(outcome, 1, "the profile could not be written", "No space left", "the release above IS published")
    assert read_latest(home / "releases").name != before[0]
