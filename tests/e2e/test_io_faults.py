"""I/O faults injected into a real ``msa-release run``, one call point after another (issue 14, "How trusted systems
test this": SQLite runs its suite with I/O errors and disk-full injected at every read, write, sync and lock call).

The run (the first 2,000 records of Adult, in this process through click's runner) is counted first: every call that
touches the release home (``tests/io_faults.py``): the release lock, ``releases/`` (staging directory, each table of
``release.duckdb`` and its Parquet file, ``manifest.json``, ``report.html``, ``report.json``, every fsync, the rename,
``LATEST``), the warehouse (each DuckDB statement of the IO manager), the registry, and the Dagster instance (its
directories and each kind of event stored in its event log; the command's own runs capture no compute logs,
``pipeline.cli.common.command_instance``). Then each distinct call point fails in
turn, with ENOSPC (a full disk stays full) and with EIO. After each fault:

- the command exits non-zero with one line naming the cause (the errno's text, or the Dagster instance's database
  error) and what to do, and no traceback;
- nothing new is published: ``LATEST`` and the visible entries of ``releases/`` are unchanged and the previous
  release's files have the same digests (a fault after ``LATEST`` moved, e.g. in the audit, must say the release IS
  published, and it must be complete);
- the release lock is free, and the next run without the fault succeeds and leaves no hidden entry in ``releases/``.

A run may survive only the faults of :data:`TOLERATED` (Dagster's compute logs, where a home's own ``dagster.yaml``
turns them on for the command; a log message; the read of an earlier release's manifest for ordering), and then its release must be complete; any other fault that ends in exit status 0 is an error
swallowed.

Each case costs two runs (20 to 30 s), so the cases are capped (``MSA_RELEASE_FAULT_CASES``, default 8, breadth
first over the layers; ``all`` runs every point, about 200 cases). The publish and the lock are faulted at every call
without the cap, fast, in ``tests/release/test_publish_io_faults.py``.
"""

from __future__ import annotations

import errno
import os
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from pipeline.cli import main
from pipeline.release import locking
from pipeline.release.publish import list_releases, read_latest
from tests.e2e.test_release_safety import (
    assert_home_consistent,
    assert_release_readable,
    cli_args,
    fingerprint,
    write_adult_sample,
)
from tests.io_faults import FaultCase, IoFaults, fault_cases

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

_LIMIT = os.environ.get("MSA_RELEASE_FAULT_CASES", "8")
LIMIT = None if _LIMIT == "all" else int(_LIMIT)


def _run(home: Path, input_path: Path, case: FaultCase | None = None):
    """``msa-release run`` in this process, with ``case`` injected; returns (exit code, output, injector)."""
    with pytest.MonkeyPatch.context() as patch:
        for name in ("MSA_RELEASE_HOME", "DAGSTER_HOME"):
            patch.delenv(name, raising=False)
        patch.setenv("GX_ANALYTICS_ENABLED", "false")
        with IoFaults(home, case) as injector:
            result = CliRunner().invoke(main, cli_args(input_path, home))
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        raise AssertionError(f"{case.name if case else 'clean run'}: uncaught {result.exception!r}") from result.exception
    return result.exit_code, result.output, injector


@pytest.fixture(scope="module")
def faulted_home(tmp_path_factory):
    directory = tmp_path_factory.mktemp("io-faults")
    input_path = write_adult_sample(directory / "adult2000.csv")
    home = directory / "home"
    status, output, _ = _run(home, input_path)  # the previous release every fault must leave intact
    assert status == 0, output
    status, output, counted = _run(home, input_path)  # the calls of a clean run on a home that has a release
    assert status == 0, output
    return home, input_path, counted.trace


#: Calls whose failure a run may survive, publishing a complete release: Dagster's compute logs and the event that
#: records them (Dagster goes on without capturing the step's output), a plain log message (Dagster prints "Exception
#: while writing logger call to event log" and goes on), and the read of an earlier release's manifest.json by
#: ``list_releases`` (the order falls back to the file's time). Every other fault must stop the run.
TOLERATED = re.compile(
    r"^dagster/storage/<run>(/compute_logs(/.*)?)?$|^dagster/history/runs (LOGS_CAPTURED|log message)$"
    r"|^releases/<release>/manifest\.json$"
)


def _cause_texts(case: FaultCase) -> tuple[str, ...]:
    if case.kind == "event_log":
        return ("database or disk is full",) if case.error_number == errno.ENOSPC else ("disk I/O error",)
    return (os.strerror(case.error_number),)


def _lock_is_free() -> bool:
    return not locking._held


def test_io_fault_at_each_call_point_of_a_release_run(faulted_home, capfd):
    home, input_path, trace = faulted_home
    kinds = {kind for kind, _, _ in trace}
    assert {"lock", "duckdb", "event_log", "fsync", "rename", "write", "parquet"} <= kinds
    cases = fault_cases(trace, limit=LIMIT)
    failures = []
    for case in cases:
        capfd.readouterr()
        problems, printed = fault_problems(home, input_path, case, lambda: capfd.readouterr().err)
        if problems:
            failures.append(f"{case.name}: {'; '.join(problems)}\n    {printed.strip().splitlines()[:3]}")
    assert not failures, "\n".join(failures)
    assert len(list_releases(home / "releases")) >= len(cases) + 2


def fault_problems(home: Path, input_path: Path, case: FaultCase, stderr=lambda: "") -> tuple[list[str], str]:
    """Run ``msa-release run`` with ``case`` injected, then a clean run; return what went wrong (empty: nothing) and
    what the faulted run printed (``stderr`` gives what was written to the process's stderr meanwhile)."""
    releases = home / "releases"
    previous = read_latest(releases)
    assert previous is not None
    previous_files = fingerprint(previous)
    visible = {p.name for p in releases.iterdir() if not p.name.startswith(".")}
    status, output, injector = _run(home, input_path, case)
    printed = output + stderr()
    problems = []
    if injector.fired is None:
        problems.append("the fault did not fire (the run's calls changed: recount)")
    latest = read_latest(releases)
    if status == 0 and TOLERATED.match(case.label) and latest != previous and latest is not None:
        assert_release_readable(latest)  # survived: a complete release, and the checks below after the next run
    elif status == 0:
        problems.append("exit status 0: the error was swallowed")
    else:
        problems += _failed_run_problems(case, printed, releases, previous, latest, visible)
    if fingerprint(previous) != previous_files:
        problems.append("the previous release changed")
    if not _lock_is_free():
        problems.append("the release lock stayed held")
    status, output, _ = _run(home, input_path)
    if status != 0:
        problems.append(f"the next run failed: {output[-500:]}")
    else:
        assert_home_consistent(home)
        hidden = sorted(p.name for p in releases.iterdir() if p.name.startswith("."))
        if hidden:
            problems.append(f"hidden entries after the next run: {hidden}")
    return problems, printed


def _failed_run_problems(case: FaultCase, printed: str, releases: Path, previous: Path, latest, visible: set) -> list[str]:
    """What is wrong with how a run stopped by ``case`` reported it and left ``releases/``."""
    problems = []
    if "Traceback" in printed:
        problems.append("a traceback was printed")
    if "Exception while writing logger call to event log" in printed:
        problems.append("Dagster's own event-log error lines were printed beside the command's one line")
    if not any(text in printed for text in _cause_texts(case)) or "retry" not in printed:
        problems.append("no line names the cause and what to do")
    if "IS published" in printed:
        if latest == previous or latest is None:
            problems.append("says IS published, but LATEST did not move")
        else:
            assert_release_readable(latest)
    else:
        if "NO release published" not in printed and "nothing was run" not in printed:
            problems.append("does not say whether a release was published")
        if latest != previous or {p.name for p in releases.iterdir() if not p.name.startswith(".")} != visible:
            problems.append(f"published something: LATEST {latest}")
    return problems
