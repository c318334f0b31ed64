"""Issue 14, "Low" items of the releases directory and the release lock, one test each:

- ``LATEST`` is validated wherever it is read or written: a path in it (``../../victim``) is refused by ``audit`` and
  ``report`` (which wrote outside ``releases/``), and a ``LATEST`` directory is refused by the publish *before*
  anything is written (it left a complete release that ``LATEST`` did not name while the CLI said nothing was
  published);
- stale-entry cleanup removes only the hidden directories this tool made (owner mark ``<name>.msa-release``), never a
  user's directory that happens to be called ``.staging-*`` / ``.deleting-*``;
- the lock file is opened without following a symbolic link (``O_NOFOLLOW``): a planted link is refused and its
  target untouched; a FIFO or a directory there is refused; a NaN or negative wait is refused.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

import pipeline.cli.run as run_command
from pipeline.cli import main
from pipeline.release.audit import AuditError, read_release
from pipeline.release.locking import LOCK_FILE_NAME, UnusableLockFile, acquire_release_lock
from pipeline.release.publish import (
    MANIFEST_COLUMNS,
    OWNER_MARK_SUFFIX,
    OWNER_MARK_TEXT,
    InvalidLatest,
    prune_releases,
    publish_release,
    read_latest,
    remove_stale_entries,
)
from pipeline.reporting.release_report import ReportError, regenerate_report

SCHEMAS = {"release_manifest": dict(MANIFEST_COLUMNS)}
IDS = ["20260101T000000Z-00000001", "20260102T000000Z-00000002", "20260103T000000Z-00000003"]


def publish(releases: Path, release_id: str, **options) -> Path:
    created = f"2026-01-0{IDS.index(release_id) + 1}T00:00:00+00:00" if release_id in IDS else None
    return publish_release(releases, release_id, {}, SCHEMAS, {"release_id": release_id, "created_at": created}, **options)


def entries(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


# ------------------------------------------------------------------------------------------------
# LATEST


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("../../victim\n", "a path"),
        ("/etc\n", "a path"),
        ("..\n", "not a plain name"),
        ("\n", "not a plain name"),
        ("20991231T000000Z-deadbeef\n", "which is not a directory of"),
    ],
    ids=["traversal", "absolute", "dot-dot", "empty", "missing-release"],
)
def test_latest_that_does_not_name_a_release_is_refused(tmp_path, content, expected):
    releases = tmp_path / "home" / "releases"
    publish(releases, IDS[0])
    (releases / "LATEST").write_text(content)
    with pytest.raises(InvalidLatest) as refused:
        read_latest(releases)
    assert expected in str(refused.value) and "repair it" in str(refused.value)


def test_report_and_audit_never_follow_a_path_in_latest(tmp_path):
    """``msa-release report`` followed ``../../victim`` and wrote report.html outside releases/."""
    home = tmp_path / "home"
    releases = home / "releases"
    publish(releases, IDS[0])
    victim = tmp_path / "victim"
    victim.mkdir()
    (victim / "manifest.json").write_text(json.dumps({"model": "mixed", "release_id": "victim"}))
    (releases / "LATEST").write_text("../../victim\n")
    with pytest.raises(ReportError, match="does not hold a release id"):
        regenerate_report(releases)
    with pytest.raises(AuditError, match="does not hold a release id"):
        read_release(home)
    outcome = CliRunner().invoke(main, ["report", str(releases)])
    assert outcome.exit_code == 2, outcome.output
    assert "LATEST does not hold a release id" in outcome.output
    assert entries(victim) == ["manifest.json"]  # nothing written there


@pytest.mark.parametrize("kind", ["directory", "symlink"])
def test_publish_refuses_a_latest_that_is_not_a_file_before_writing_anything(tmp_path, kind):
    releases = tmp_path / "releases"
    first = publish(releases, IDS[0])
    (releases / "LATEST").unlink()
    if kind == "directory":
        (releases / "LATEST").mkdir()
    else:
        (releases / "LATEST").symlink_to(first)
    before = entries(releases)
    with pytest.raises(InvalidLatest, match=f"LATEST is a {'directory' if kind == 'directory' else 'symbolic link'}"):
        publish(releases, IDS[1])
    assert entries(releases) == before  # no orphaned release, no staging, no owner mark
    with pytest.raises(InvalidLatest):
        read_latest(releases)


def test_publish_refuses_a_latest_tmp_directory_before_writing_anything(tmp_path):
    releases = tmp_path / "releases"
    publish(releases, IDS[0])
    (releases / ".LATEST.tmp").mkdir()
    before = entries(releases)
    with pytest.raises(InvalidLatest, match=r"\.LATEST\.tmp is a directory"):
        publish(releases, IDS[1])
    assert entries(releases) == before
    assert read_latest(releases).name == IDS[0]


def test_publish_refuses_a_release_id_that_is_a_path(tmp_path):
    with pytest.raises(ValueError, match="not a plain directory name"):
        publish(tmp_path / "releases", "../escape")
    assert not (tmp_path / "escape").exists()


def test_run_with_a_latest_directory_exits_2_before_running(tmp_path, monkeypatch):
    home = tmp_path / "home"
    (home / "releases" / "LATEST").mkdir(parents=True)
    monkeypatch.setattr(run_command, "preflight", lambda config, home_option: home)

    def no_job(*args, **kwargs):
        raise AssertionError("the job ran although LATEST is a directory")

    monkeypatch.setattr(run_command, "execute_job", no_job)
    outcome = CliRunner().invoke(main, ["run", "--home", str(home)])
    assert outcome.exit_code == 2, outcome.output
    assert "LATEST is a directory" in outcome.output and "Traceback" not in outcome.output


# ------------------------------------------------------------------------------------------------
# stale entries: only what this tool made


def test_cleanup_leaves_user_directories_without_the_owner_mark(tmp_path):
    releases = tmp_path / "releases"
    publish(releases, IDS[0])
    for name in (".staging-my-notes", ".deleting-old-stuff", f".staging-{IDS[1]}"):
        (releases / name).mkdir()
        (releases / name / "precious.txt").write_text("keep me")
    # a mark with other content is not this tool's either
    (releases / f".staging-{IDS[1]}{OWNER_MARK_SUFFIX}").write_text("something else\n")
    assert remove_stale_entries(releases) == []
    for name in (".staging-my-notes", ".deleting-old-stuff", f".staging-{IDS[1]}"):
        assert (releases / name / "precious.txt").read_text() == "keep me"


def test_cleanup_removes_marked_directories_and_orphaned_marks(tmp_path):
    releases = tmp_path / "releases"
    publish(releases, IDS[0])
    for name in (f".staging-{IDS[1]}", f".deleting-{IDS[2]}"):
        (releases / name).mkdir()
        (releases / name / "release.duckdb").write_bytes(b"x")
        (releases / f"{name}{OWNER_MARK_SUFFIX}").write_text(OWNER_MARK_TEXT)
    orphan = f".staging-20260104T000000Z-00000004{OWNER_MARK_SUFFIX}"  # killed after the rename
    (releases / orphan).write_text(OWNER_MARK_TEXT)
    removed = remove_stale_entries(releases)
    assert sorted(removed) == sorted(
        [
            f".staging-{IDS[1]}",
            f".staging-{IDS[1]}{OWNER_MARK_SUFFIX}",
            f".deleting-{IDS[2]}",
            f".deleting-{IDS[2]}{OWNER_MARK_SUFFIX}",
            orphan,
        ]
    )
    assert entries(releases) == [IDS[0], "LATEST"]


def test_publish_and_retention_leave_no_mark_behind(tmp_path):
    releases = tmp_path / "releases"
    for release_id in IDS:
        publish(releases, release_id, keep_releases=2)
    assert entries(releases) == [IDS[1], IDS[2], "LATEST"]
    assert prune_releases(releases, 1) == [IDS[1]]
    assert entries(releases) == [IDS[2], "LATEST"]


def test_a_failed_publish_removes_its_staging_directory_and_its_mark(tmp_path):
    releases = tmp_path / "releases"
    publish(releases, IDS[0])
    bad = {"release_manifest": dict(MANIFEST_COLUMNS), "extra": {"x": "VARCHAR"}}
    with pytest.raises(ValueError, match="differ from the contract"):
        publish_release(releases, IDS[1], {"extra": pd.DataFrame({"y": ["1"]})}, bad, {"release_id": IDS[1]})
    assert entries(releases) == [IDS[0], "LATEST"]


# ------------------------------------------------------------------------------------------------
# the lock file


def test_the_lock_file_never_follows_a_symbolic_link(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    target = tmp_path / "someone-elses-file"
    target.write_text("important\n")
    (home / LOCK_FILE_NAME).symlink_to(target)
    with pytest.raises(UnusableLockFile, match="is a symbolic link"):
        acquire_release_lock(home)
    assert target.read_text() == "important\n"  # neither truncated nor overwritten with the holder


def test_a_dangling_lock_link_creates_nothing(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    (home / LOCK_FILE_NAME).symlink_to(tmp_path / "created-by-the-lock")
    with pytest.raises(UnusableLockFile):
        acquire_release_lock(home)
    assert not (tmp_path / "created-by-the-lock").exists()


@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_a_lock_file_that_is_not_a_regular_file_is_refused(tmp_path, kind):
    home = tmp_path / "home"
    home.mkdir()
    path = home / LOCK_FILE_NAME
    os.mkfifo(path) if kind == "fifo" else path.mkdir()
    with pytest.raises(UnusableLockFile, match="remove it"):
        acquire_release_lock(home)


def test_the_cli_reports_a_planted_lock_link_as_unusable(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    (home / LOCK_FILE_NAME).symlink_to(tmp_path / "elsewhere")
    monkeypatch.setattr(run_command, "preflight", lambda config, home_option: home)
    outcome = CliRunner().invoke(main, ["run", "--home", str(home)])
    assert outcome.exit_code == 2, outcome.output
    assert "release.lock is a symbolic link" in outcome.output and "Traceback" not in outcome.output
    assert not (tmp_path / "elsewhere").exists()


@pytest.mark.parametrize("wait", [math.nan, math.inf, -1.0])
def test_a_wait_that_is_not_a_finite_non_negative_number_is_refused(tmp_path, wait):
    with pytest.raises(ValueError, match="finite number >= 0"):
        acquire_release_lock(tmp_path / "home", wait_seconds=wait)


def test_the_largest_seed_the_settings_accept_is_published(tmp_path):
    """``--seed 2**70`` failed only at publish; the bound the CLI and the settings now enforce (2**63 - 1) fits."""
    from pipeline.settings import MAX_SEED

    releases = tmp_path / "releases"
    path = publish_release(releases, IDS[0], {}, SCHEMAS, {"release_id": IDS[0], "seed": MAX_SEED, "min_support": MAX_SEED})
    assert json.loads((path / "manifest.json").read_text())["seed"] == MAX_SEED
    assert pd.read_parquet(path / "release_manifest.parquet")["seed"].tolist() == [MAX_SEED]
    with pytest.raises(ValueError, match="manifest key 'seed' = 9223372036854775808 does not fit the 64-bit column"):
        publish_release(releases, IDS[1], {}, SCHEMAS, {"release_id": IDS[1], "seed": MAX_SEED + 1})
    assert entries(releases) == [IDS[0], "LATEST"]
