"""Publishing a release directory atomically (no Dagster here).

Layout: ``<home>/releases/<release_id>/`` holds ``release.duckdb`` (only the contract tables),
one Parquet file per table and ``manifest.json``; ``<home>/releases/LATEST`` names the newest
complete release. The directory is written under a hidden staging name, fsynced, then renamed;
LATEST is replaced atomically last, so a reader sees a complete release or none.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Callable, Mapping, Sequence
from importlib import metadata
from pathlib import Path

import duckdb
import pandas as pd

from pipeline.models import PUBLICATION_MODELS
from pipeline.release.failpoints import failpoint
from pipeline.release.listing import InvalidLatest, is_plain_release_id, list_releases, read_latest
from pipeline.release.manifest import validate_manifest

__all__ = [
    "MANIFEST_COLUMNS",
    "MANIFEST_JSON_COLUMNS",
    "MODEL_TABLES",
    "InvalidLatest",
    "check_extra_files",
    "check_publish_request",
    "contract_schemas",
    "list_releases",
    "manifest_frame",
    "manifest_json_text",
    "manifest_row",
    "package_versions",
    "prune_releases",
    "publish_directory",
    "publish_release",
    "read_latest",
    "remove_stale_entries",
    "sql_text",
    "standard_table_schemas",
    "write_manifest_and_extra_files",
    "write_table",
]

#: Columns of ``release_manifest`` and their DuckDB types, in order.
MANIFEST_COLUMNS = {
    "notice": "VARCHAR",  # comparisons: "COMPARISON — not for sharing …" (pipeline/release/promotion.py); else NULL
    "release_id": "VARCHAR",
    "created_at": "VARCHAR",
    "input_hmac": "VARCHAR",
    "model": "VARCHAR",
    "allow_disclosure": "BOOLEAN",
    "disclosure_override_used": "BOOLEAN",
    "allow_recomposition": "BOOLEAN",
    "recomposition": "VARCHAR",
    "input_reading": "VARCHAR",
    "ell": "INTEGER",
    "ell_per_attribute": "VARCHAR",
    "min_confidence": "DOUBLE",
    "min_support": "BIGINT",
    "seed": "BIGINT",
    "randomness": "VARCHAR",
    "grouping": "VARCHAR",
    "stratum_deletion_budget": "DOUBLE",
    "residual_policy": "VARCHAR",
    "n_deleted_for_eligibility": "BIGINT",
    "n_generalized_groups": "BIGINT",
    "n_generalized_cells": "BIGINT",
    "n_strata": "BIGINT",
    "n_generalized_attribute_table_cells": "BIGINT",
    "quasi_identifiers": "VARCHAR",
    "sensitive_attributes": "VARCHAR",
    "n_input": "BIGINT",
    "n_dropped_missing": "BIGINT",
    "dropped_missing_by_attribute": "VARCHAR",  # JSON {sensitive attribute: records dropped that miss it}
    "missing_quasi_identifier_by_column": "VARCHAR",  # JSON {quasi-identifier: records published with '?' for it}
    "look_alike_spellings_merged": "VARCHAR",  # JSON {column: look-alike spellings merged into another}
    "n_sac_released": "BIGINT",
    "n_attribute_table": "BIGINT",
    "n_deleted": "BIGINT",
    "n_suppressed_cells": "BIGINT",
    "checks": "VARCHAR",
    "stage_seconds": "VARCHAR",
    "package_versions": "VARCHAR",
    # (k, ℓ) model (P2, SPEC §14); NULL in mixed and Rating releases
    "k": "INTEGER",
    "kl_method": "VARCHAR",
    "max_block_size": "INTEGER",
    "hierarchies": "VARCHAR",
    "generalization_weights": "VARCHAR",
    "n_released": "BIGINT",
    "n_suppressed_records": "BIGINT",
    "n_clusters": "BIGINT",
    "total_generalization_cost": "DOUBLE",
    "total_naive_cost": "BIGINT",
    "attacks": "VARCHAR",  # (k, ℓ): the issue-12 adversaries measured on the release (JSON; not gated)
    # posterior gate (mixed, Rating; checks.gates.posterior_within_bound); NULL in (k, ℓ) releases
    "posterior_slack": "DOUBLE",
    "posterior_gate": "VARCHAR",
    "posterior_gate_warned": "BOOLEAN",
    # shared release or comparison (pipeline/release/promotion.py): promoted, area, requested, reason, overrides_set
    "promotion": "VARCHAR",
    # utility gate (checks.gates.utility_within_thresholds, issue 15) and the settings that weaken a default (JSON)
    "utility": "VARCHAR",
    "overrides": "VARCHAR",
    # sharded releases (issue 17, pipeline/release/sharded_publish.py): S, shard_rows, engine, workers, the per-shard
    # spread and the part files (JSON); NULL in an unsharded release
    "sharding": "VARCHAR",
    # --profile (pipeline/evaluation/profiling.py): per-stage wall time and peak RSS; NULL without it
    "profile": "VARCHAR",
}

#: Manifest columns that hold JSON text in ``release_manifest`` (objects in ``manifest.json``).
MANIFEST_JSON_COLUMNS = (
    "quasi_identifiers",
    "ell_per_attribute",
    "dropped_missing_by_attribute",
    "missing_quasi_identifier_by_column",
    "look_alike_spellings_merged",
    "sensitive_attributes",
    "checks",
    "attacks",
    "recomposition",
    "package_versions",
    "input_reading",
    "stage_seconds",
    "hierarchies",
    "generalization_weights",
    "utility",
    "overrides",
    "profile",
    "promotion",
    "sharding",
)

_PACKAGES = ("msa-release", "dagster", "pandas", "duckdb", "mlxtend", "great-expectations", "pyarrow", "numpy")


def package_versions() -> dict[str, str]:
    """Installed versions of the packages a release depends on."""
    versions = {}
    for name in _PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


#: Tables each built-in publication model releases (besides ``release_manifest``); the registry has every plug-in's.
MODEL_TABLES = {name: model.tables for name, model in PUBLICATION_MODELS.items()}


def standard_table_schemas(quasi_identifiers: Sequence[str], sensitive_attributes: Sequence[str]) -> dict[str, dict[str, str]]:
    """Column -> DuckDB type of every table the built-in models publish (``sac_released``, ``attribute_table``,
    ``id_table``, ``attribute_clusters``, ``kl_released``), for the given columns."""
    quasi_identifier_columns = {c: "VARCHAR" for c in quasi_identifiers}
    return {
        "sac_released": {
            "row_id": "BIGINT",
            "group_id": "BIGINT",
            **quasi_identifier_columns,
            **{a: "VARCHAR" for a in sensitive_attributes},
        },
        "attribute_table": {"row_id": "BIGINT", **quasi_identifier_columns, **{a: "INTEGER" for a in sensitive_attributes}},
        "id_table": {"attribute": "VARCHAR", "sid": "INTEGER", "value": "VARCHAR", "count": "INTEGER"},
        "attribute_clusters": {"cluster_id": "INTEGER", "attribute": "VARCHAR"},
        "kl_released": {
            "row_id": "BIGINT",
            "cluster_id": "BIGINT",
            **quasi_identifier_columns,
            **{a: "VARCHAR" for a in sensitive_attributes},
        },
    }


def contract_schemas(
    quasi_identifiers: Sequence[str], sensitive_attributes: Sequence[str], *, model: str = "mixed"
) -> dict[str, dict[str, str]]:
    """Column -> DuckDB type of every table of the release contract of ``model`` (its plug-in's ``table_schemas``,
    then ``release_manifest``).

    Raises
    ------
    ValueError
        Unknown ``model`` (known: the registry, :data:`pipeline.models.PUBLICATION_MODELS`).
    """
    if model not in PUBLICATION_MODELS:
        raise ValueError(f"unknown model {model!r}; known: {sorted(PUBLICATION_MODELS)}")
    schemas = PUBLICATION_MODELS[model].table_schemas(quasi_identifiers, sensitive_attributes)
    schemas["release_manifest"] = dict(MANIFEST_COLUMNS)
    return schemas


def _fsync_tree(directory: Path) -> None:
    for path in sorted(directory.rglob("*")):
        if path.is_file():
            with path.open("rb") as handle:
                os.fsync(handle.fileno())
        elif path.is_dir():  # a sharded release's <table>/ directories: their entries (the parts) too
            _fsync_directory(path)
    _fsync_directory(directory)


def _withdraw(releases_dir: Path, release: Path) -> None:
    """Take back a release that ``LATEST`` never named: rename it to ``.deleting-<id>`` (no longer a release for any
    reader), then remove it; what a second error leaves is hidden and removed by the next run (``remove_stale_entries``)."""
    doomed = releases_dir / f"{DELETING_PREFIX}{release.name}"
    with contextlib.suppress(OSError):  # on a full disk the mark may not be written: withdraw the release anyway
        _mark_owned(releases_dir, doomed.name)  # so that the next run's clean-up may remove what is left
    try:
        os.rename(release, doomed)
    except OSError:
        return
    shutil.rmtree(doomed, ignore_errors=True)
    if not doomed.exists():
        with contextlib.suppress(OSError):
            _unmark_owned(releases_dir, doomed.name)


def _fsync_directory(directory: Path) -> None:
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def publish_release(
    releases_dir: Path,
    release_id: str,
    tables: Mapping[str, pd.DataFrame],
    schemas: Mapping[str, Mapping[str, str]],
    manifest: Mapping[str, object],
    extra_files: Mapping[str, bytes] | None = None,
    *,
    keep_releases: int = 0,
    update_latest: bool = True,
) -> Path:
    """Write a release directory atomically and point ``LATEST`` at it (a shared release), or not (a comparison).

    Parameters
    ----------
    releases_dir
        ``<home>/releases`` (created if needed).
    release_id
        Directory name of the new release; must not exist yet.
    tables
        Table name -> frame; each frame must have exactly the columns of ``schemas[name]``.
    schemas
        Table name -> {column: DuckDB type}; tables are created with these exact types.
    manifest
        The manifest row (keys of ``MANIFEST_COLUMNS``; lists/dicts are stored as JSON text). A
        column left out is NULL in ``release_manifest`` and ``null`` in ``manifest.json``.
    extra_files
        Optional file name -> bytes written into the staging directory before it is fsynced
        and renamed, so they are part of the atomic release (e.g. ``report.html``). Plain file
        names only; they must not collide with the contract files.
    keep_releases
        After ``LATEST`` names the new release, remove the oldest releases beyond the newest
        ``keep_releases`` (:func:`prune_releases`); 0 keeps every release.
    update_latest
        True (a shared release, ``<home>/releases``): ``LATEST`` names the new release last. False (a comparison,
        ``<home>/comparisons``, :mod:`pipeline.release.promotion`): the same staging, fsync and rename, and no
        ``LATEST`` is read or written in ``releases_dir``.

    Returns
    -------
    Path
        The published directory.

    Raises
    ------
    InvalidLatest
        ``releases/LATEST`` is not a one-line file naming a release (:func:`read_latest`); nothing is written.
    ValueError
        A ``release_id`` that is not a plain directory name, an integer too large for its manifest column, a table
        whose columns differ from its schema, a manifest key that is not a column of
        ``MANIFEST_COLUMNS`` or a value of the wrong type (:class:`pipeline.release.manifest.Manifest`), an existing ``release_id``, or an extra file name that is not a
        plain name or collides with a contract file.
    OSError, duckdb.Error
        The directory is not writable, the disk is full or reports an I/O error. Until ``LATEST``
        names the new release nothing is published: the staging directory (or the renamed release,
        which ``LATEST`` never named) is removed and ``LATEST`` is unchanged. After it (the fsync of
        ``releases/``, retention) the new release is published and complete.
    """
    manifest_row = check_publish_request(releases_dir, release_id, manifest, update_latest=update_latest)
    extra_files = dict(extra_files or {})
    check_extra_files(
        extra_files, {"release.duckdb", "manifest.json", *(f"{name}.parquet" for name in [*tables, "release_manifest"])}
    )
    all_tables = dict(tables)
    all_tables["release_manifest"] = manifest_frame(manifest_row)

    def write(staging: Path) -> None:
        connection = duckdb.connect(str(staging / "release.duckdb"))
        try:
            for name, frame in all_tables.items():
                write_table(connection, name, frame, schemas[name], staging / f"{name}.parquet")
                failpoint(f"publish.table_written.{name}")
            connection.execute("CHECKPOINT")
        finally:
            connection.close()
        failpoint("publish.database_closed")
        write_manifest_and_extra_files(staging, manifest_row, extra_files)
        failpoint("publish.manifest_written")

    return publish_directory(
        releases_dir, release_id, write, update_latest=update_latest, keep_releases=keep_releases, failpoint_prefix="publish"
    )


def check_publish_request(
    releases_dir: Path, release_id: str, manifest: Mapping[str, object], *, update_latest: bool
) -> dict[str, object]:
    """What every publish checks before writing anything (:func:`publish_release`,
    :func:`pipeline.release.sharded_publish.publish_sharded_release`); creates ``releases_dir``.

    Returns
    -------
    dict
        The ``release_manifest`` row: the manifest with lists and dicts as JSON text.

    Raises
    ------
    InvalidLatest, ValueError
        As :func:`publish_release` (``release_id``, ``LATEST``, ``.LATEST.tmp``, an existing release, the manifest's
        keys, types and integer widths).
    """
    if not is_plain_release_id(release_id):
        raise ValueError(f"release id {release_id[:80]!r} is not a plain directory name (no '/', no leading dot)")
    releases_dir.mkdir(parents=True, exist_ok=True)
    # LATEST must be replaceable before the release is renamed into place: a LATEST directory made os.replace fail
    # after the rename, leaving a complete release that LATEST did not name (issue 14)
    if update_latest:
        read_latest(releases_dir)
    latest_tmp = releases_dir / LATEST_TMP_NAME
    if update_latest and latest_tmp.is_dir() and not latest_tmp.is_symlink():
        raise InvalidLatest(
            f"{latest_tmp} is a directory; msa-release writes a file of that name to replace LATEST atomically: "
            "remove the directory (it is not a release) and run again",
            file=str(latest_tmp),
        )
    final = releases_dir / release_id
    if final.exists():
        raise ValueError(f"release {release_id} already exists in {releases_dir}")
    unknown = sorted(set(manifest) - set(MANIFEST_COLUMNS))
    if unknown:
        raise ValueError(f"manifest keys {unknown} are not columns of release_manifest")
    validate_manifest(manifest)  # every key's type (pipeline/release/manifest.py), before anything is written
    for key, value in manifest.items():  # and every integer fits its column (a seed of 2**70 failed in DuckDB)
        bits = {"INTEGER": 32, "BIGINT": 64}.get(MANIFEST_COLUMNS[key])
        if bits and isinstance(value, int) and not -(2 ** (bits - 1)) <= value < 2 ** (bits - 1):
            raise ValueError(f"manifest key {key!r} = {value} does not fit the {bits}-bit column {MANIFEST_COLUMNS[key]}")
    return manifest_row(manifest)


def manifest_row(manifest: Mapping[str, object]) -> dict[str, object]:
    """The ``release_manifest`` row of a manifest: lists and dicts as JSON text (sorted keys), other values as given."""
    return {k: (json.dumps(v, sort_keys=True) if isinstance(v, (list, dict, tuple)) else v) for k, v in manifest.items()}


def check_extra_files(extra_files: Mapping[str, bytes], reserved: set[str]) -> None:
    """Refuse an extra file name that is not a plain file name or collides with a contract file (``reserved``).

    Raises
    ------
    ValueError
        Naming the file name and the reserved names.
    """
    for name in extra_files:
        if Path(name).name != name or name.startswith(".") or name in reserved:
            raise ValueError(f"extra file name {name!r} must be a plain file name other than {sorted(reserved)}")


def manifest_frame(manifest_row: Mapping[str, object]) -> pd.DataFrame:
    """The one-row ``release_manifest`` frame: every column of :data:`MANIFEST_COLUMNS`, NULL where left out."""
    return pd.DataFrame([{c: manifest_row.get(c) for c in MANIFEST_COLUMNS}])


def write_table(
    connection: duckdb.DuckDBPyConnection, name: str, frame: pd.DataFrame, schema: Mapping[str, str], target: Path
) -> None:
    """Create table ``name`` with exactly ``schema``'s types in ``connection``, fill it from ``frame`` and copy it to
    the Parquet file ``target``.

    Raises
    ------
    ValueError
        ``frame``'s columns differ from ``schema``'s (names both lists).
    """
    if list(frame.columns) != list(schema):
        raise ValueError(f"table {name}: columns {list(frame.columns)} differ from the contract {list(schema)}")
    columns = ", ".join(f"{_quote(c)} {t}" for c, t in schema.items())
    connection.execute(f"CREATE TABLE {_quote(name)} ({columns})")
    connection.register("frame_to_publish", frame)
    connection.execute(f"INSERT INTO {_quote(name)} SELECT * FROM frame_to_publish")
    connection.unregister("frame_to_publish")
    connection.execute(f"COPY {_quote(name)} TO {sql_text(str(target))} (FORMAT parquet)")


def sql_text(text: str) -> str:
    """``text`` as a SQL string literal (single quotes doubled)."""
    return "'" + text.replace("'", "''") + "'"


def write_manifest_and_extra_files(staging: Path, manifest_row: Mapping[str, object], extra_files: Mapping[str, bytes]) -> None:
    """Write ``manifest.json`` (:func:`manifest_json_text` of the row, JSON columns as objects), then the extra files."""
    readable = {
        k: (json.loads(v) if k in MANIFEST_JSON_COLUMNS and isinstance(v, str) else v)
        for k, v in ((c, manifest_row.get(c)) for c in MANIFEST_COLUMNS)
    }
    (staging / "manifest.json").write_text(manifest_json_text(readable), encoding="utf-8")
    for name, content in extra_files.items():
        (staging / name).write_bytes(content)


def publish_directory(
    releases_dir: Path,
    release_id: str,
    write: Callable[[Path], None],
    *,
    update_latest: bool,
    keep_releases: int,
    failpoint_prefix: str,
) -> Path:
    """The atomic publish every release layout shares: a hidden staging directory (owner mark first), ``write`` fills
    it, fsync, rename to ``release_id``, ``LATEST`` replaced last (when ``update_latest``), retention.

    Call :func:`check_publish_request` first. Failpoints: ``<prefix>.staging_created``, ``<prefix>.fsynced``,
    ``<prefix>.renamed``, ``<prefix>.latest_staged``, ``<prefix>.latest_replaced`` (``write`` has its own).

    Returns
    -------
    Path
        The published directory.

    Raises
    ------
    OSError, duckdb.Error, ValueError
        Whatever ``write`` or the file system raises: until ``LATEST`` names the new release nothing is published
        (the staging directory, or the renamed release, is removed; ``LATEST`` unchanged).
    """
    final = releases_dir / release_id
    staging, latest_tmp, renamed = releases_dir / f"{STAGING_PREFIX}{release_id}", releases_dir / LATEST_TMP_NAME, False
    _mark_owned(releases_dir, staging.name)  # before the directory exists, removed after it is gone (renamed)
    staging.mkdir(mode=0o755)
    failpoint(f"{failpoint_prefix}.staging_created")
    try:
        write(staging)
        _fsync_tree(staging)
        failpoint(f"{failpoint_prefix}.fsynced")
        os.rename(staging, final)
        renamed = True
        _fsync_directory(releases_dir)
        failpoint(f"{failpoint_prefix}.renamed")
        if update_latest:
            latest_tmp.write_text(release_id + "\n")
            with latest_tmp.open("rb") as handle:
                os.fsync(handle.fileno())
            failpoint(f"{failpoint_prefix}.latest_staged")
            os.replace(latest_tmp, releases_dir / "LATEST")
    except BaseException:
        # LATEST still names the previous release: withdraw the new one, so that an error (disk full, I/O error)
        # publishes nothing, not a complete release that LATEST does not name (a SIGKILL runs none of this: the
        # release is then complete, and the next run's LATEST names a newer one)
        shutil.rmtree(staging, ignore_errors=True)
        if not staging.exists():
            with contextlib.suppress(OSError):
                _unmark_owned(releases_dir, staging.name)
        if renamed:
            _withdraw(releases_dir, final)
        if update_latest:
            with contextlib.suppress(OSError):
                latest_tmp.unlink(missing_ok=True)
        raise
    _unmark_owned(releases_dir, staging.name)
    _fsync_directory(releases_dir)
    failpoint(f"{failpoint_prefix}.latest_replaced")
    if keep_releases:
        prune_releases(releases_dir, keep_releases)
    return final


def manifest_json_text(manifest: Mapping[str, object]) -> str:
    """``manifest.json``'s text: ``notice`` first (a comparison's "COMPARISON — not for sharing", at the top of the
    file), then every other key in sorted order, nested objects sorted too; two-space indent; UTF-8 text (not
    ``\\u`` escapes), so that the notice reads as written."""
    ordered = json.loads(json.dumps(dict(manifest), sort_keys=True))
    first = {"notice": ordered.pop("notice")} if "notice" in ordered else {}
    return json.dumps({**first, **ordered}, indent=2, ensure_ascii=False) + "\n"


#: Prefixes of the hidden entries of ``releases/`` (never releases; readers ignore dot names).
STAGING_PREFIX, DELETING_PREFIX, LATEST_TMP_NAME = ".staging-", ".deleting-", ".LATEST.tmp"
#: Suffix of the owner mark of a hidden directory: ``.staging-<id>.msa-release`` exists from before
#: ``.staging-<id>`` is created until after it is gone, so only directories this tool made are ever removed.
OWNER_MARK_SUFFIX = ".msa-release"
OWNER_MARK_TEXT = "created by msa-release: the hidden directory of the same name (without this suffix) is its own\n"


def _mark_owned(releases_dir: Path, name: str) -> None:
    """Write (and fsync) the owner mark of the hidden directory ``name``, before that directory exists."""
    mark = releases_dir / f"{name}{OWNER_MARK_SUFFIX}"
    descriptor = os.open(mark, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW | os.O_CLOEXEC, 0o644)
    try:
        os.write(descriptor, OWNER_MARK_TEXT.encode())
        os.fsync(descriptor)
    except BaseException:  # a full disk: no half-written mark is left behind (it would be no one's, and stay)
        os.close(descriptor)
        with contextlib.suppress(OSError):
            mark.unlink()
        raise
    os.close(descriptor)
    _fsync_directory(releases_dir)


def _unmark_owned(releases_dir: Path, name: str) -> None:
    """Remove the owner mark of ``name`` (after the directory is gone or renamed); a missing mark is fine."""
    try:
        (releases_dir / f"{name}{OWNER_MARK_SUFFIX}").unlink()
    except FileNotFoundError:
        pass


def _is_owned(releases_dir: Path, name: str) -> bool:
    """Whether the owner mark of ``name`` is there: a regular file (not a link) holding :data:`OWNER_MARK_TEXT`."""
    mark = releases_dir / f"{name}{OWNER_MARK_SUFFIX}"
    try:
        if mark.is_symlink() or not mark.is_file() or mark.stat().st_size != len(OWNER_MARK_TEXT.encode()):
            return False
        return mark.read_text() == OWNER_MARK_TEXT
    except (OSError, UnicodeDecodeError):
        return False


def remove_stale_entries(releases_dir: Path) -> list[str]:
    """Remove what a killed run left in ``releases_dir``: staging and half-deleted directories.

    Only call it while holding the release lock (:mod:`pipeline.release.locking` does, on acquisition):
    then no other run is writing there, so every ``.staging-<id>`` and ``.deleting-<id>`` directory this tool
    made (its owner mark ``<name>.msa-release`` is there, :data:`OWNER_MARK_TEXT`) is stale, and so is a
    ``.LATEST.tmp`` file. A directory with such a name but without the mark is someone else's and is left alone;
    releases and ``LATEST`` are never touched.

    Returns
    -------
    list of str
        Names of the removed entries (owner marks included).
    """
    if not releases_dir.is_dir():
        return []
    removed = []
    for path in sorted(releases_dir.iterdir()):
        name = path.name
        if not name.startswith((STAGING_PREFIX, DELETING_PREFIX)):
            if name == LATEST_TMP_NAME and not path.is_dir():
                path.unlink()
                removed.append(name)
            continue
        if name.endswith(OWNER_MARK_SUFFIX):
            owned = name.removesuffix(OWNER_MARK_SUFFIX)
            # a mark whose directory is gone (removed above in sorted order, or never created, or renamed)
            if not os.path.lexists(releases_dir / owned) and _is_owned(releases_dir, owned):
                path.unlink()
                removed.append(name)
        elif path.is_dir() and not path.is_symlink() and _is_owned(releases_dir, name):
            shutil.rmtree(path)
            removed.append(name)
    if removed:
        _fsync_directory(releases_dir)
    return removed


def prune_releases(releases_dir: Path, keep: int) -> list[str]:
    """Remove the oldest releases beyond the newest ``keep``; never the one ``LATEST`` names.

    Each release leaves atomically: it is renamed to ``.deleting-<id>`` (no longer a release
    for any reader), the directory is fsynced, then the files are removed. A run killed in
    between leaves a hidden directory that :func:`remove_stale_entries` removes at the next start.

    Parameters
    ----------
    releases_dir
        ``<home>/releases``.
    keep
        Number of newest releases to keep (>= 1); 0 keeps everything.

    Returns
    -------
    list of str
        Release ids removed, oldest first.

    Raises
    ------
    ValueError
        ``keep`` < 0.
    """
    if keep < 0:
        raise ValueError(f"keep_releases must be >= 0 (0 keeps every release), got {keep}")
    if keep == 0:
        return []
    latest = read_latest(releases_dir)
    releases = list_releases(releases_dir)
    removed = []
    for path in releases[: max(len(releases) - keep, 0)]:
        if latest is not None and path.name == latest.name:
            continue
        doomed = releases_dir / f"{DELETING_PREFIX}{path.name}"
        _mark_owned(releases_dir, doomed.name)  # before the rename, removed after the directory is gone
        os.rename(path, doomed)
        _fsync_directory(releases_dir)
        failpoint("retention.renamed")
        for position, child in enumerate(sorted(doomed.iterdir())):
            if child.is_dir() and not child.is_symlink():  # the part files of a sharded release (<table>/part-*)
                for part in sorted(child.iterdir()):
                    part.unlink()
                child.rmdir()
            else:
                child.unlink()
            if position == 0:
                failpoint("retention.deleting")
        doomed.rmdir()
        _unmark_owned(releases_dir, doomed.name)
        removed.append(path.name)
    if removed:
        _fsync_directory(releases_dir)
    failpoint("retention.done")
    return removed
