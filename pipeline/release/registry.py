"""The release registry of a home: keyed fingerprints of every released record, kept privately.

``$MSA_RELEASE_HOME/registry/<release_id>.parquet`` (directory 0700, files 0600): columns
``fingerprint`` (uint64, :func:`pipeline.core.series.record_fingerprints`, keyed by the home
secret) and ``row_id`` (int64: the record's row id in that release, 0 when it was not published),
and, in the file's metadata, the release's configuration. The row ids let a later refusal say
what an intersection with that release would pin, from its published files. Never part of a
release. Entries are kept after retention removes a release (its files may still be out there).
An entry is written just before the atomic publish, so every published release is registered; a
publish that fails afterwards leaves an entry, which can only make later runs stricter.

Each entry says in its metadata (``msa_release.area``) whether the release was shared (``releases``) or a comparison
(``comparisons``, :mod:`pipeline.release.promotion`); entries written before issue 15 are shared. Only shared releases
can refuse a new release (:func:`check_series`): a comparison is not published for others to intersect. A comparison
is still checked against the shared releases, never refused: what it would compose with is recorded in its manifest
(``recomposition``) and reported as a warning.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.errors import ReleaseRefusedError

__all__ = ["RecompositionRefused", "check_series", "estimate_pins", "read_registry", "registry_dir", "write_registry_entry"]

_CONFIGURATION_KEY = b"msa_release.configuration"
_AREA_KEY = b"msa_release.area"


def registry_dir(home: str | Path) -> Path:
    """``<home>/registry`` (not created)."""
    return Path(home) / "registry"


def write_registry_entry(
    home: str | Path,
    release_id: str,
    fingerprints: np.ndarray,
    configuration: Mapping,
    row_ids: np.ndarray | None = None,
    *,
    area: str = "releases",
) -> Path:
    """Write (atomically, 0600) the registry entry of one release.

    ``row_ids`` (int64, aligned with ``fingerprints``): each record's row id in the release, 0 when
    not published; all 0 when None. ``area``: ``releases`` (shared) or ``comparisons``.

    Raises
    ------
    OSError
        The registry cannot be written (the publish then does not happen).
    """
    directory = registry_dir(home)
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    fingerprints = np.asarray(fingerprints, dtype=np.uint64)
    row_ids = np.zeros(len(fingerprints), np.int64) if row_ids is None else np.asarray(row_ids, dtype=np.int64)
    table = pa.table({"fingerprint": pa.array(fingerprints), "row_id": pa.array(row_ids)})
    table = table.replace_schema_metadata(
        {_CONFIGURATION_KEY: json.dumps(dict(configuration), sort_keys=True).encode(), _AREA_KEY: area.encode()}
    )
    target = directory / f"{release_id}.parquet"
    temporary = directory / f".{release_id}.{os.getpid()}.tmp"
    old_umask = os.umask(0o077)
    try:
        pq.write_table(table, temporary)
        with open(temporary, "rb") as handle:
            os.fsync(handle.fileno())
        os.replace(temporary, target)
    finally:
        os.umask(old_umask)
        temporary.unlink(missing_ok=True)
    return target


def read_registry(home: str | Path, *, shared_only: bool = False) -> list[tuple[str, np.ndarray, dict]]:
    """Every registered release of the home: ``(release_id, fingerprints, configuration)``, oldest first; with
    ``shared_only``, the shared releases only (comparisons left out).

    Raises
    ------
    OSError, pyarrow.ArrowInvalid
        An unreadable entry (the run stops rather than publish without knowing the series).
    """
    directory = registry_dir(home)
    if not directory.is_dir():
        return []
    entries = []
    for path in sorted(directory.glob("*.parquet")):
        table = pq.read_table(path)
        metadata = table.schema.metadata or {}
        if shared_only and metadata.get(_AREA_KEY, b"releases") != b"releases":
            continue
        configuration = json.loads(metadata.get(_CONFIGURATION_KEY, b"{}"))
        entries.append((path.stem, table.column("fingerprint").to_numpy().astype(np.uint64), configuration))
    return entries


def _registry_row_ids(home: str | Path, release_id: str) -> tuple[np.ndarray, np.ndarray] | None:
    """``(fingerprints, row_ids)`` of one entry, or None when it has no row ids (older entries)."""
    path = registry_dir(home) / f"{release_id}.parquet"
    table = pq.read_table(path)
    if "row_id" not in table.column_names:
        return None
    return table.column("fingerprint").to_numpy().astype(np.uint64), table.column("row_id").to_numpy().astype(np.int64)


def _fingerprint_row_map(fingerprints: np.ndarray, row_ids: np.ndarray) -> pd.DataFrame:
    """A row map keyed by record fingerprint (as int64, in ``input_row_number``) for the published records
    (``row_ids > 0``) of one release: what :func:`pipeline.core.composition.candidate_sets` indexes by."""
    published = np.asarray(row_ids) > 0
    row_map = pd.DataFrame(
        {
            "row_id": np.asarray(row_ids, dtype=np.int64)[published],
            "input_row_number": np.asarray(fingerprints, dtype=np.uint64)[published].view(np.int64),
        }
    )
    return row_map.drop_duplicates("row_id")


def estimate_pins(home: str | Path, releases_dir: str | Path, release_id: str, new_sets, sensitive_attributes) -> dict | None:
    """What intersecting the new release with an earlier one of the home would pin.

    Parameters
    ----------
    home, releases_dir
        The home (its registry) and its releases directory.
    release_id
        The earlier release.
    new_sets
        :func:`pipeline.core.composition.candidate_sets` of the new release, indexed by record
        fingerprint (as int64).
    sensitive_attributes
        The attributes compared.

    Returns
    -------
    dict or None
        :func:`pipeline.core.composition.intersection_attack` (``n_records`` in both,
        ``share_whole_tuple_pinned``, …), or None when the earlier release's files or row ids are
        gone, or it has other sensitive attributes (nothing can then be estimated).
    """
    from pipeline.core.composition import intersection_attack
    from pipeline.models import publication_model

    entry = _registry_row_ids(home, release_id)
    directory = Path(releases_dir) / release_id
    if entry is None or not directory.is_dir():
        return None
    try:
        manifest = json.loads((directory / "manifest.json").read_text())
        if list(manifest.get("sensitive_attributes") or []) != list(sensitive_attributes):
            return None
        row_map = _fingerprint_row_map(*entry)
        model = publication_model(str(manifest.get("model")))
        old_sets = model.candidate_sets(model.read_published(directory), row_map, sensitive_attributes)
    except (OSError, ValueError, KeyError):
        return None
    old_sets = {a: series[~series.index.duplicated()] for a, series in old_sets.items()}
    fresh = {a: series[~series.index.duplicated()] for a, series in new_sets.items()}
    return intersection_attack(fresh, old_sets, sensitive_attributes)


class RecompositionRefused(ReleaseRefusedError, RuntimeError):
    """A new release would compose with earlier releases of the home (the message says which and how)."""


def check_series(
    home: str | Path,
    secret: bytes,
    records,
    content_columns,
    configuration: Mapping,
    *,
    allow_recomposition: bool,
    releases_dir: str | Path | None = None,
    release_row_ids: np.ndarray | None = None,
    candidate_sets_of=None,
    sensitive_attributes=None,
    comparison: bool = False,
) -> tuple[np.ndarray, list[dict]]:
    """Fingerprint the new release's records and compare them with the registry.

    Parameters
    ----------
    home, secret
        The home and its secret.
    records
        Every record the release covers (published or deleted): a DataFrame with ``content_columns``.
    content_columns
        Quasi-identifiers and sensitive attributes.
    configuration
        The release's configuration (:data:`pipeline.core.series.CONFIGURATION_KEYS`).
    allow_recomposition
        Publish anyway (recorded in the manifest by the caller).
    releases_dir, release_row_ids, candidate_sets_of, sensitive_attributes
        Optional: with them, a refusal also says what intersecting the new release with each of
        the first three earlier ones would pin (:func:`estimate_pins`). ``release_row_ids``: int64
        aligned with ``records``, each record's row id in the new release (0: not published);
        ``candidate_sets_of`` is called with a row map (``row_id``, ``input_row_number`` = record
        fingerprint) and returns the new release's candidate sets (computed only when a release is
        refused).
    comparison
        The new release is a comparison (:mod:`pipeline.release.promotion`): compared with the shared releases, never
        refused; the caller records what it would compose with and warns.

    Only the home's shared releases are compared with (``read_registry(shared_only=True)``): comparisons never
    refuse a release.

    Returns
    -------
    (fingerprints, recompositions)
        The fingerprints to register, and one dict per earlier release composed with
        (``release_id``, counts, ``changed_settings``; no value).

    Raises
    ------
    RecompositionRefused
        Overlap with an earlier, different shared release, ``allow_recomposition`` is off and the new release is not
        a comparison.
    """
    from pipeline.core.series import find_recompositions, record_fingerprints

    fingerprints = record_fingerprints(records, content_columns, secret)
    found = find_recompositions(fingerprints, configuration, read_registry(home, shared_only=True))
    if found and not allow_recomposition and not comparison:
        lines = "; ".join(r.describe() for r in found[:5]) + ("; …" if len(found) > 5 else "")
        pins = []
        if all(x is not None for x in (releases_dir, release_row_ids, candidate_sets_of, sensitive_attributes)):
            new_sets = candidate_sets_of(_fingerprint_row_map(fingerprints, release_row_ids))
            for recomposition in found[:3]:
                estimate = estimate_pins(home, releases_dir, recomposition.release_id, new_sets, sensitive_attributes)
                if estimate is not None and estimate["n_records"]:
                    pins.append(
                        f"intersected with release {recomposition.release_id}, it would pin the whole sensitive tuple of "
                        f"{round(estimate['share_whole_tuple_pinned'] * estimate['n_records'])} of the "
                        f"{estimate['n_records']} records published in both ({100 * estimate['share_whole_tuple_pinned']:.1f} %; "
                        "an adversary who can locate a victim's row in both)"
                    )
        pinned = (" Measured: " + "; ".join(pins) + ".") if pins else ""
        raise RecompositionRefused(
            f"release refused: it would compose with {len(found)} earlier release(s) of this home ({lines}).{pinned} "
            "Intersecting two different releases of the same records pins values that neither pins alone "
            "(on Adult, ℓ = 2 after ℓ = 3 pins the whole sensitive tuple of 48.7 % of the records; see "
            "docs/series.md and docs/attacks.md). Publish with the earlier release's settings and records, use another "
            "home for an unrelated series, or pass --allow-recomposition (allow_recomposition) to publish anyway "
            "(recorded in the manifest)"
        )
    return fingerprints, [
        {
            "release_id": r.release_id,
            "n_shared_records": r.n_shared_records,
            "n_only_new": r.n_only_new,
            "n_only_earlier": r.n_only_earlier,
            "changed_settings": list(r.changed_settings),
        }
        for r in found
    ]
