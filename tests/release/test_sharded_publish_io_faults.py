"""I/O faults at every call of the sharded publish, in turn (issue 17; the harness of ``tests/io_faults.py``, as
``tests/release/test_publish_io_faults.py`` does for the unsharded publish).

The private parts live in the home (``private/shards/<run>/output``), as the engines write them, so their reads are
faulted too (EIO). Each fault must raise (an ``OSError`` or a DuckDB error, never swallowed), leave the previous release
and ``LATEST`` intact, leave no new release visible (only hidden entries, removed by the next run's clean-up), and the
next publish must succeed. DuckDB's own writes of the part files (an in-memory connection's ``COPY``) are not reached
from Python; the files around them (directories, manifest, fsyncs, rename, ``LATEST``) are.
"""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import shutil
from pathlib import Path

import duckdb
import pytest

from pipeline.core.sharding import ShardOffsets
from pipeline.release.publish import list_releases, read_latest, remove_stale_entries
from pipeline.release.sharded_publish import publish_sharded_release
from tests.io_faults import IoFaults, fault_cases
from tests.release.sharded_release import SCHEMAS, example_release, fake_offsets, sharded_manifest, write_private_parts

R0, R1, R2 = "20261126T000000Z-aaaaaaaa", "20261126T000001Z-bbbbbbbb", "20261126T000002Z-cccccccc"
OUTPUT = Path("private/shards/run/output")


def _publish(home: Path, release_id: str, job: dict) -> Path:
    return publish_sharded_release(
        home / "releases",
        release_id,
        output_dir=home / OUTPUT,
        summaries=job["summaries"],
        offsets=[ShardOffsets(**o) for o in job["offsets"]],
        schemas=SCHEMAS,
        manifest=sharded_manifest(release_id, job["summaries"]),
        attribute_clusters=job["clusters"],
        extra_files={"report.html": b"<h1>report</h1>"},
    )


def _fingerprint(release: Path) -> dict[str, str]:
    return {
        p.relative_to(release).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(release.rglob("*"))
        if p.is_file()
    }


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    home = tmp_path_factory.mktemp("base") / "home"
    shards = [example_release(seed=s) for s in range(2)]
    summaries = write_private_parts(home / OUTPUT, shards)
    job = {
        "summaries": summaries,
        "offsets": [dataclasses.asdict(o) for o in fake_offsets(summaries)],
        "clusters": shards[0].attribute_clusters,
    }
    _publish(home, R0, job)
    trace_home = tmp_path_factory.mktemp("count") / "home"
    shutil.copytree(home, trace_home)
    with IoFaults(trace_home) as injector:
        _publish(trace_home, R1, job)
    return home, job, injector.trace


@pytest.mark.parametrize(
    "error_number", [errno.ENOSPC, pytest.param(errno.EIO, marks=pytest.mark.slow)], ids=["disk-full", "io-error"]
)
def test_every_io_call_of_the_sharded_publish_fails_in_turn_and_nothing_is_published(base, tmp_path, error_number):
    base_home, job, trace = base
    cases = [case for case in fault_cases(trace, every_call=True) if case.error_number == error_number]
    assert len(cases) > 15  # the table directories, manifest files, every fsync, the rename and LATEST
    latest_call = next(call for call in trace if call[0] == "rename" and call[2] == "releases/.LATEST.tmp")
    after_latest = set(trace[trace.index(latest_call) + 1 :])
    failures = []
    for number, case in enumerate(cases):
        home = tmp_path / f"case{number}"
        shutil.copytree(base_home, home)
        releases = home / "releases"
        previous = _fingerprint(releases / R0)
        with IoFaults(home, case) as injector, pytest.raises((OSError, duckdb.Error)) as raised:
            _publish(home, R1, job)
        problems = []
        if injector.fired is None:
            problems.append("the fault did not fire")
        if isinstance(raised.value, OSError) and raised.value.errno != case.error_number:
            problems.append(f"another error surfaced: {raised.value!r}")
        latest = read_latest(releases)
        visible = sorted(p.name for p in releases.iterdir() if not p.name.startswith("."))
        if latest == releases / R1:
            if (case.kind, case.ordinal, case.label) not in after_latest or not (releases / R1 / "manifest.json").is_file():
                problems.append("LATEST names the new release")
        elif latest != releases / R0 or visible != sorted(["LATEST", R0]):
            problems.append(f"published something: LATEST {latest}, entries {visible}")
        if _fingerprint(releases / R0) != previous:
            problems.append("the previous release changed")
        remove_stale_entries(releases)
        if sorted(p.name for p in releases.iterdir() if p.name.startswith(".")):
            problems.append("hidden entries survive the next run's clean-up")
        _publish(home, R2, job)
        if read_latest(releases) != releases / R2 or releases / R2 not in list_releases(releases):
            problems.append("the next publish did not succeed")
        if problems:
            failures.append(f"{case.name}: {'; '.join(problems)}")
    assert failures == []
