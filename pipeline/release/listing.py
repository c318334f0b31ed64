"""The releases of a home, read without writing anything (no Dagster, pandas or DuckDB here): the release-id pattern,
the complete releases oldest first, and the release ``releases/LATEST`` names, validated.

:mod:`pipeline.release.publish` writes what these functions read (and re-exports them); commands that only read the
home (``msa-release list``) import this module alone, so that they start in a fraction of a second.
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path

from pipeline.errors import UnusableInputError

__all__ = ["RELEASE_ID_PATTERN", "InvalidLatest", "is_plain_release_id", "list_releases", "read_latest"]

#: Name of a release directory: ``<UTC time>Z-<first 8 hex digits of the Dagster run id>``.
RELEASE_ID_PATTERN = re.compile(r"^\d{8}T\d{6}Z-[0-9a-f]{8}$")


def list_releases(releases_dir: Path) -> list[Path]:
    """The complete releases of ``releases_dir``, oldest first.

    A release is a directory whose name matches :data:`RELEASE_ID_PATTERN` and that holds a
    ``manifest.json``; hidden (dot) entries such as staging directories never are. Order:
    ``created_at`` of the manifest (seconds), then the modification time of ``manifest.json``
    (nanoseconds), then the name.

    Returns
    -------
    list of Path
        Empty when the directory does not exist.
    """
    if not releases_dir.is_dir():
        return []
    found = []
    for path in releases_dir.iterdir():
        manifest = path / "manifest.json"
        if not RELEASE_ID_PATTERN.match(path.name) or not path.is_dir() or not manifest.is_file():
            continue
        try:
            created_at = str(json.loads(manifest.read_text()).get("created_at") or "")
        except (OSError, ValueError):
            created_at = ""
        found.append((created_at, manifest.stat().st_mtime_ns, path.name, path))
    return [entry[-1] for entry in sorted(found)]


def is_plain_release_id(release_id: str) -> bool:
    """Whether ``release_id`` can only name an entry of the releases directory itself: a non-empty plain name (no
    ``/``, no NUL, no leading dot, so neither ``..`` nor a hidden entry), at most 128 characters. Releases made by
    the pipeline match :data:`RELEASE_ID_PATTERN`."""
    return 0 < len(release_id) <= 128 and "/" not in release_id and "\0" not in release_id and not release_id.startswith(".")


class InvalidLatest(UnusableInputError, ValueError):
    """``releases/LATEST`` is not what msa-release writes there (exit 2): a directory, a symbolic link or another
    non-regular file, text that is not one release id, or an id whose directory is missing."""


def read_latest(releases_dir: Path) -> Path | None:
    """The release directory named by ``releases/LATEST``, or None when nothing was published (no ``LATEST``).

    ``LATEST`` is validated, never followed blindly: it must be a regular file (not a symbolic link) holding one
    release id, a plain name (no ``/``, no leading dot: nothing outside ``releases_dir`` can be named), of a
    directory (not a symbolic link) of ``releases_dir``.

    Raises
    ------
    InvalidLatest
        Naming ``LATEST``, what is wrong with it and how to repair it.
    """
    latest = releases_dir / "LATEST"
    try:
        status = os.lstat(latest)
    except FileNotFoundError:
        return None
    repair = (
        f"repair it: write the id of the newest complete release of {releases_dir} into it (one line), or remove it "
        "if none was published"
    )
    if not stat.S_ISREG(status.st_mode):
        kind = (
            "a symbolic link"
            if stat.S_ISLNK(status.st_mode)
            else "a directory"
            if stat.S_ISDIR(status.st_mode)
            else ("not a regular file")
        )
        raise InvalidLatest(f"{latest} is {kind}, not the one-line file msa-release writes; {repair}", file=str(latest))
    if status.st_size > 256:
        raise InvalidLatest(f"{latest} holds {status.st_size} bytes, not one release id; {repair}", file=str(latest))
    release_id = latest.read_bytes().decode("utf-8", "replace").strip()
    if not is_plain_release_id(release_id):
        raise InvalidLatest(
            f"{latest} does not hold a release id (expected one line like 20260101T000000Z-0123abcd, the name of a "
            f"directory of {releases_dir}; got {release_id[:80]!r}, {'a path' if '/' in release_id else 'not a plain name'}); "
            f"{repair}",
            file=str(latest),
        )
    directory = releases_dir / release_id
    if directory.is_symlink() or not directory.is_dir():
        raise InvalidLatest(
            f"{latest} names release {release_id}, which is not a directory of {releases_dir}; {repair}", file=str(latest)
        )
    return directory
