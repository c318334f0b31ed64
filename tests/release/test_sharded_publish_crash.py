"""SIGKILL at every failpoint of the sharded publish (issue 17; ``pipeline/release/sharded_publish.py``): between the
parts, around the manifest, before and after ``LATEST``. After each kill the previous release is byte-for-byte intact,
``LATEST`` unchanged until it was replaced (then it names the complete new release), nothing partial is visible as a
release, the hidden leftovers are removed by ``remove_stale_entries`` (what the lock does at the next run's start),
and the next publish succeeds.

Each publish runs in a fresh ``python`` process with ``MSA_RELEASE_FAILPOINT`` set (as ``tests/e2e/test_release_safety.py``
does for the unsharded publish); the inputs travel as a JSON file.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipeline.release.failpoints import ENVIRONMENT_VARIABLE
from pipeline.release.publish import list_releases, read_latest, remove_stale_entries
from tests.release.sharded_release import SCHEMAS, example_release, fake_offsets, sharded_manifest, write_private_parts

ROOT = Path(__file__).resolve().parents[2]

#: Every failpoint of the sharded publish, in order; the kill at each must leave the previous release and LATEST.
KILL_POINTS = [
    "sharded_publish.staging_created",
    "sharded_publish.part_written.sac_released.00000",  # between two parts of one table
    "sharded_publish.part_written.attribute_table.00001",  # between two tables
    "sharded_publish.part_written.id_table.00001",  # the last part
    "sharded_publish.parts_written",  # before the manifest
    "sharded_publish.manifest_written",  # after the manifest and the extra files
    "sharded_publish.fsynced",
    "sharded_publish.renamed",  # before LATEST
    "sharded_publish.latest_staged",
    "sharded_publish.latest_replaced",  # after LATEST
]

CHILD = """
import json, sys
from pathlib import Path
import pandas as pd
from pipeline.core.sharding import ShardOffsets
from pipeline.release.sharded_publish import publish_sharded_release
job = json.loads(Path(sys.argv[1]).read_text())
publish_sharded_release(
    Path(job["releases"]), job["release_id"], output_dir=Path(job["output_dir"]), summaries=job["summaries"],
    offsets=[ShardOffsets(**o) for o in job["offsets"]], schemas=job["schemas"], manifest=job["manifest"],
    attribute_clusters=pd.DataFrame(job["attribute_clusters"]), extra_files={"report.html": b"<h1>report</h1>"},
)
"""


def _fingerprint(release: Path) -> dict[str, str]:
    return {
        p.relative_to(release).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(release.rglob("*"))
        if p.is_file()
    }


@pytest.fixture
def sharded_home(tmp_path):
    shards = [example_release(seed=s) for s in range(2)]
    output_dir = tmp_path / "private" / "output"
    summaries = write_private_parts(output_dir, shards)
    offsets = [dataclasses.asdict(o) for o in fake_offsets(summaries)]
    clusters = shards[0].attribute_clusters.to_dict(orient="list")
    releases = tmp_path / "home" / "releases"

    def publish(release_id: str, point: str | None) -> subprocess.CompletedProcess:
        job = tmp_path / f"{release_id}.json"
        job.write_text(
            json.dumps(
                {
                    "releases": str(releases),
                    "release_id": release_id,
                    "output_dir": str(output_dir),
                    "summaries": summaries,
                    "offsets": offsets,
                    "schemas": SCHEMAS,
                    "manifest": sharded_manifest(release_id, summaries),
                    "attribute_clusters": clusters,
                }
            )
        )
        environment = {k: v for k, v in os.environ.items() if k != ENVIRONMENT_VARIABLE}
        if point is not None:
            environment[ENVIRONMENT_VARIABLE] = point
        return subprocess.run(
            [sys.executable, "-c", CHILD, str(job)], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=120
        )

    return releases, publish


def _visible(releases: Path) -> list[str]:
    return sorted(p.name for p in releases.iterdir() if not p.name.startswith("."))


@pytest.mark.slow
def test_sigkill_at_every_failpoint_of_the_sharded_publish_leaves_the_previous_release_intact(sharded_home):
    """10 failpoints, each followed by the clean-up and a publish that must succeed (about 30 s: 21 processes)."""
    _kill_at(sharded_home, KILL_POINTS)


def test_sigkill_between_two_parts_leaves_the_previous_release_intact(sharded_home):
    """The fast loop's share of the test above: one kill between two parts."""
    _kill_at(sharded_home, ["sharded_publish.part_written.sac_released.00000"])


def _kill_at(sharded_home, points: list[str]) -> None:
    releases, publish = sharded_home
    first = publish("20261126T000000Z-00000000", None)
    assert first.returncode == 0, first.stderr
    previous = read_latest(releases)
    assert previous is not None
    for number, point in enumerate(points, start=1):
        before = _fingerprint(previous)
        release_id = f"20261126T0000{number:02d}Z-{number:08x}"
        answer = publish(release_id, point)
        assert answer.returncode == -9, f"failpoint {point} was not reached:\n{answer.stderr[-2000:]}"
        assert _fingerprint(previous) == before, f"{point}: the previous release changed"
        latest = read_latest(releases)
        if point == "sharded_publish.latest_replaced":
            assert latest == releases / release_id, f"{point}: LATEST should name the new release"
        else:
            assert latest == previous, f"{point}: LATEST moved although the publish was killed before replacing it"
        # every visible release is complete: its manifest lists parts that are all there, with their digests
        for release in list_releases(releases):
            manifest = json.loads((release / "manifest.json").read_text())
            for parts in (manifest.get("sharding") or {}).get("parts", {}).values():
                for part in parts:
                    assert hashlib.sha256((release / part["path"]).read_bytes()).hexdigest() == part["sha256"]
        assert set(_visible(releases)) - {"LATEST"} == {r.name for r in list_releases(releases)}, (
            f"{point}: a partial release is visible"
        )
        if point in (
            "sharded_publish.staging_created",
            "sharded_publish.part_written.attribute_table.00001",
            "sharded_publish.fsynced",
        ):
            assert any(p.name.startswith(".staging-") for p in releases.iterdir()), f"{point}: expected a staging directory"
        remove_stale_entries(releases)  # as the release lock does when the next run takes it
        assert [p.name for p in releases.iterdir() if p.name.startswith(".")] == []
        after = publish(f"20261126T0001{number:02d}Z-{number:08x}", None)
        assert after.returncode == 0, f"the publish after a kill at {point} failed:\n{after.stderr[-2000:]}"
        previous = read_latest(releases)
        assert previous is not None and previous.name == f"20261126T0001{number:02d}Z-{number:08x}"
