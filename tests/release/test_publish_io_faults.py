"""I/O faults at every call of the publish and of the release lock, in turn (issue 14, "How trusted systems test
this": SQLite injects I/O errors and disk-full at every read, write, sync and lock call).

The harness (``tests/io_faults.py``) counts the calls of a clean publish (staging directory, each table of
``release.duckdb`` and its Parquet file, ``manifest.json``, ``report.html``, ``report.json``, every fsync, the rename,
``.LATEST.tmp`` and ``LATEST``) and of a clean lock acquisition, then fails each in turn with ENOSPC (a full disk stays
full) and with EIO. Each fault must leave: an error raised (never swallowed), the previous release and ``LATEST``
byte-for-byte intact, no new release visible (only hidden staging entries, removed by the next run), the lock free, and
the next publish succeeding; the rewrite of ``report.html`` by ``msa-release report`` is faulted the same way. The
whole ``msa-release run`` is faulted in ``tests/e2e/test_io_faults.py``.
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import shutil
from pathlib import Path

import duckdb
import pandas as pd
import pytest

from pipeline.release import locking
from pipeline.release.locking import acquire_release_lock
from pipeline.release.publish import contract_schemas, list_releases, publish_release, read_latest, remove_stale_entries
from tests.io_faults import FaultCase, IoFaults, fault_cases

SCHEMAS = contract_schemas(["q"], ["x", "y"], model="rating")
TABLES = {
    "attribute_table": pd.DataFrame({"row_id": [1, 2, 3], "q": ["a", "a", "b"], "x": [1, 2, 3], "y": [2, 3, 1]}),
    "id_table": pd.DataFrame({"attribute": ["x", "y"], "sid": [1, 1], "value": ["u", "v"], "count": [3, 3]}),
}
REPORTS = {"report.html": b"<h1>report</h1>", "report.json": b"{}"}
#: The previous release, the faulted one and the next one (release ids: ``<UTC time>Z-<8 hex digits>``).
R0, R1, R2 = "20260101T000000Z-aaaaaaaa", "20260101T000001Z-bbbbbbbb", "20260101T000002Z-cccccccc"


def _publish(releases: Path, release_id: str) -> Path:
    manifest = {"release_id": release_id, "model": "rating", "ell": 2}
    return publish_release(releases, release_id, TABLES, SCHEMAS, manifest, extra_files=REPORTS)


def _fingerprint(release: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(release.iterdir())}


@pytest.fixture(scope="module")
def base_home(tmp_path_factory) -> Path:
    home = tmp_path_factory.mktemp("base") / "home"
    _publish(home / "releases", R0)
    return home


@pytest.fixture(scope="module")
def publish_trace(base_home, tmp_path_factory) -> list[FaultCase]:
    home = tmp_path_factory.mktemp("count") / "home"
    shutil.copytree(base_home, home)
    with IoFaults(home) as injector:
        _publish(home / "releases", R1)
    kinds = {kind for kind, _, _ in injector.trace}
    assert {"mkdir", "duckdb", "open", "write", "fsync", "rename"} <= kinds  # the harness sees the publish's calls
    return injector.trace


def _after_latest(trace: list[tuple[str, int, str]]) -> set[tuple[str, int, str]]:
    """The calls after ``.LATEST.tmp`` was renamed over ``LATEST`` (the release is then published)."""
    position = trace.index(next(call for call in trace if call[0] == "rename" and call[2] == "releases/.LATEST.tmp"))
    return set(trace[position + 1 :])


@pytest.mark.parametrize(
    "error_number", [errno.ENOSPC, pytest.param(errno.EIO, marks=pytest.mark.slow)], ids=["disk-full", "io-error"]
)
def test_every_io_call_of_the_publish_fails_in_turn_and_nothing_is_published(base_home, publish_trace, tmp_path, error_number):
    cases = [case for case in fault_cases(publish_trace, every_call=True) if case.error_number == error_number]
    after_latest = _after_latest(publish_trace)
    assert len(cases) > 25  # every table, file, fsync and rename (and, with EIO, every read and lock)
    failures = []
    for number, case in enumerate(cases):
        home = tmp_path / f"case{number}"
        shutil.copytree(base_home, home)
        releases = home / "releases"
        previous = _fingerprint(releases / R0)
        with IoFaults(home, case) as injector, pytest.raises((OSError, duckdb.Error)) as raised:
            _publish(releases, R1)
        problems = []
        if injector.fired is None:
            problems.append("the fault did not fire")
        if isinstance(raised.value, OSError) and raised.value.errno != case.error_number:
            problems.append(f"another error surfaced: {raised.value!r}")
        latest = read_latest(releases)
        visible = sorted(p.name for p in releases.iterdir() if not p.name.startswith("."))
        if latest == releases / R1:
            # only a fault after LATEST was replaced (the fsync of releases/) may leave it published, and complete
            if (case.kind, case.ordinal, case.label) not in after_latest or not (releases / R1 / "manifest.json").is_file():
                problems.append("LATEST names the new release")
        elif latest != releases / R0 or visible != sorted(["LATEST", R0]):
            problems.append(f"published something: LATEST {latest}, entries {visible}")
        if _fingerprint(releases / R0) != previous:
            problems.append("the previous release changed")
        remove_stale_entries(releases)  # what the next run does under the lock
        if sorted(p.name for p in releases.iterdir() if p.name.startswith(".")):
            problems.append("hidden entries survive the next run's clean-up")
        _publish(releases, R2)
        if read_latest(releases) != releases / R2 or releases / R2 not in list_releases(releases):
            problems.append("the next publish did not succeed")
        if problems:
            failures.append(f"{case.name}: {'; '.join(problems)}")
    assert failures == []


def _lock_is_free(home: Path) -> bool:
    if not (home / locking.LOCK_FILE_NAME).exists():
        return not locking._held
    descriptor = os.open(home / locking.LOCK_FILE_NAME, os.O_RDWR)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)  # another open file description: conflicts with a leak
        return not locking._held
    except BlockingIOError:
        return False
    finally:
        os.close(descriptor)


def _stale_staging(home: Path) -> None:
    """A killed run's staging directory with its owner mark (only marked entries are this tool's to remove)."""
    from pipeline.release.publish import OWNER_MARK_SUFFIX, OWNER_MARK_TEXT

    (home / "releases" / ".staging-stale").mkdir(parents=True, exist_ok=True)
    (home / "releases" / f".staging-stale{OWNER_MARK_SUFFIX}").write_text(OWNER_MARK_TEXT)


def test_every_io_call_of_the_lock_fails_in_turn_and_leaves_no_stale_lock(tmp_path):
    home = tmp_path / "home"
    _stale_staging(home)  # a killed run's leftovers, removed under the lock
    counting_home = tmp_path / "counting"
    shutil.copytree(home, counting_home)
    with IoFaults(counting_home) as injector:
        acquire_release_lock(counting_home).release()
    cases = fault_cases(injector.trace)
    assert {"open", "lock", "write"} <= {case.kind for case in cases}
    for case in cases:
        _stale_staging(home)
        with IoFaults(home, case) as injector:
            try:
                acquire_release_lock(home).release()
            except OSError as error:
                assert error.errno == case.error_number, case.name
        assert injector.fired is not None, case.name
        assert _lock_is_free(home), f"{case.name}: the lock stayed held"
    acquire_release_lock(home).release()
    assert not (home / "releases" / ".staging-stale").exists()


def test_the_harness_fails_the_nth_call_of_a_kind_and_persists_only_a_full_disk(tmp_path):
    target = tmp_path / "file"
    for error_number, later_fails in ((errno.EIO, False), (errno.ENOSPC, True)):
        with IoFaults(tmp_path, FaultCase("write", 2, "file", error_number)) as injector:
            with open(target, "w") as handle:
                handle.write("first")
                with pytest.raises(OSError) as raised:
                    handle.write("second")
                assert raised.value.errno == error_number and raised.value.filename == str(target)
                try:
                    handle.write("third")
                    third_failed = False
                except OSError:
                    third_failed = True
        assert third_failed is later_fails
        assert injector.fired is not None and [kind for kind, _, _ in injector.trace].count("write") == 3
    with IoFaults(tmp_path) as injector:
        (tmp_path.parent / "elsewhere").write_text("not counted")
    assert injector.trace == []


def test_every_io_call_of_the_report_rewrite_fails_in_turn_and_leaves_the_old_page(tmp_path):
    """``msa-release report`` rewrites ``report.html`` of a published release: a fault leaves the old page, no
    temporary file in the release, and one line (exit status 1) from the command."""
    from click.testing import CliRunner

    from pipeline.cli import main
    from pipeline.reporting.release_report import ReportError, regenerate_report

    release = publish_release(
        tmp_path / "home" / "releases",
        R0,
        TABLES,
        SCHEMAS,
        {"release_id": R0, "model": "rating", "ell": 2},
        extra_files={"report.html": b"<h1>old</h1>"},
    )
    with IoFaults(tmp_path / "home") as injector:
        regenerate_report(release)
    regenerate_report(release)
    before = _fingerprint(release)
    cases = fault_cases(injector.trace, every_call=True)
    assert {"open", "write", "rename"} <= {case.kind for case in cases}
    for case in cases:
        with IoFaults(tmp_path / "home", case) as injector, pytest.raises((OSError, ReportError)):
            regenerate_report(release)  # ReportError: the manifest cannot be read (naming it and the errno's text)
        assert injector.fired is not None and _fingerprint(release) == before, case.name
    case = next(case for case in cases if case.kind == "write")
    with IoFaults(tmp_path / "home", case):
        outcome = CliRunner().invoke(main, ["report", str(release)])
    assert outcome.exit_code == 1 and "Traceback" not in outcome.output
    assert outcome.output.startswith("msa-release: report.html NOT rewritten (the old page is unchanged): No space left")
    assert _fingerprint(release) == before
