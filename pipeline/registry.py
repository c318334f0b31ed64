"""The release registry of a home: keyed fingerprints of every released record, kept privately.

``$MSA_RELEASE_HOME/registry/<release_id>.parquet`` (directory 0700, files 0600): one column
``fingerprint`` (uint64, :func:`pipeline.core.series.record_fingerprints`, keyed by the home
secret) and, in the file's metadata, the release's configuration and input HMAC. Never part of a
release. Entries are kept after retention removes a release (its files may still be out there).
An entry is written just before the atomic publish, so every published release is registered; a
publish that fails afterwards leaves an entry, which can only make later runs stricter.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

__all__ = ["read_registry", "registry_dir", "write_registry_entry"]

_CONFIGURATION_KEY = b"msa_release.configuration"


def registry_dir(home: str | Path) -> Path:
    """``<home>/registry`` (not created)."""
    return Path(home) / "registry"


def write_registry_entry(home: str | Path, release_id: str, fingerprints: np.ndarray, configuration: Mapping) -> Path:
    """Write (atomically, 0600) the registry entry of one release.

    Raises
    ------
    OSError
        The registry cannot be written (the publish then does not happen).
    """
    directory = registry_dir(home)
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    table = pa.table({"fingerprint": pa.array(np.asarray(fingerprints, dtype=np.uint64))})
    table = table.replace_schema_metadata({_CONFIGURATION_KEY: json.dumps(dict(configuration), sort_keys=True).encode()})
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


def read_registry(home: str | Path) -> list[tuple[str, np.ndarray, dict]]:
    """Every registered release of the home: ``(release_id, fingerprints, configuration)``, oldest first.

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
        configuration = json.loads((table.schema.metadata or {}).get(_CONFIGURATION_KEY, b"{}"))
        entries.append((path.stem, table.column("fingerprint").to_numpy().astype(np.uint64), configuration))
    return entries


class RecompositionRefused(RuntimeError):
    """A new release would compose with earlier releases of the home (the message says which and how)."""


def check_series(
    home: str | Path,
    secret: bytes,
    records,
    content_columns,
    configuration: Mapping,
    *,
    allow_recomposition: bool,
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

    Returns
    -------
    (fingerprints, recompositions)
        The fingerprints to register, and one dict per earlier release composed with
        (``release_id``, counts, ``changed_settings``; no value).

    Raises
    ------
    RecompositionRefused
        Overlap with an earlier, different release and ``allow_recomposition`` is off.
    """
    from pipeline.core.series import find_recompositions, record_fingerprints

    fingerprints = record_fingerprints(records, content_columns, secret)
    found = find_recompositions(fingerprints, configuration, read_registry(home))
    if found and not allow_recomposition:
        lines = "; ".join(r.describe() for r in found[:5]) + ("; …" if len(found) > 5 else "")
        raise RecompositionRefused(
            f"release refused: it would compose with {len(found)} earlier release(s) of this home ({lines}). "
            "Intersecting two different releases of the same records pins values that neither pins alone "
            "(on Adult, ℓ = 2 after ℓ = 3 pins the whole sensitive tuple of 48.7 % of the records; see "
            "docs/series.md and docs/attacks.md). Publish with the earlier release's settings and records, use another "
            "home for an unrelated series, or pass --allow-recomposition (allow_recomposition) to publish anyway "
            "(recorded in the manifest)"
        )
    return fingerprints, [
        {"release_id": r.release_id, "n_shared_records": r.n_shared_records, "n_only_new": r.n_only_new,
         "n_only_earlier": r.n_only_earlier, "changed_settings": list(r.changed_settings)}
        for r in found
    ]
