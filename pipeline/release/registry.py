"""The release registry of a home: keyed fingerprints of every released record, kept privately.

``$MSA_RELEASE_HOME/registry/<release_id>.parquet`` (directory 0700, files 0600): columns
``fingerprint`` (uint64, :func:`pipeline.core.series.record_fingerprints`, keyed by the home
secret) and ``row_id`` (int64: the record's row id in that release, 0 when it was not published),
and, in the file's metadata, the release's configuration. The row ids let a later refusal say
what an intersection with that release would pin, from its published files. Never part of a
release. Entries are kept after retention removes a release (its files may still be out there).
An entry is written just before the atomic publish, so every published release is registered; a
publish that fails afterwards leaves an entry, which can only make later runs stricter.

A sharded release (``sharded_release``, issue 17) is registered the same way without holding its records: each shard
worker writes its records' fingerprints and shard-local row ids to the run's private staging
(:func:`pipeline.engines.worker.release_and_write_shard`), :func:`check_sharded_series` compares them with the
registry in DuckDB (counts only come back) and :func:`write_sharded_registry_entry` streams them into the entry, shard
by shard, with the row ids offset to the published ones.

Each entry says in its metadata (``msa_release.area``) whether the release was shared (``releases``) or a comparison
(``comparisons``, :mod:`pipeline.release.promotion`); entries written before issue 15 are shared. Only shared releases
can refuse a new release (:func:`check_series`): a comparison is not published for others to intersect. A comparison
is still checked against the shared releases, never refused: what it would compose with is recorded in its manifest
(``recomposition``) and reported as a warning.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.core.series import INPUT_KEY
from pipeline.release.promotion import COMPARISONS, RELEASES
from pipeline.errors import ReleaseRefusedError

__all__ = [
    "RecompositionRefused",
    "ShardFingerprints",
    "check_series",
    "check_sharded_series",
    "estimate_pins",
    "read_registry",
    "registry_dir",
    "registry_entries",
    "write_registry_entry",
    "write_sharded_registry_entry",
]

_CONFIGURATION_KEY = b"msa_release.configuration"
_AREA_KEY = b"msa_release.area"


def registry_dir(home: str | Path) -> Path:
    """``<home>/registry`` (not created)."""
    return Path(home) / "registry"


def _entry_metadata(configuration: Mapping, area: str) -> dict[bytes, bytes]:
    """The Parquet key-value metadata of an entry: the configuration (JSON, sorted keys) and the area."""
    return {_CONFIGURATION_KEY: json.dumps(dict(configuration), sort_keys=True).encode(), _AREA_KEY: area.encode()}


#: the columns of an entry
_ENTRY_SCHEMA = pa.schema([("fingerprint", pa.uint64()), ("row_id", pa.int64())])


@contextmanager
def _atomic_entry(home: str | Path, release_id: str) -> Iterator[Path]:
    """Yield a temporary path in the registry (created 0700) to write an entry to; on success it is fsynced and renamed
    to ``<release_id>.parquet`` (0600: written under umask 077), on failure removed."""
    directory = registry_dir(home)
    directory.mkdir(mode=0o700, parents=True, exist_ok=True)
    target = directory / f"{release_id}.parquet"
    temporary = directory / f".{release_id}.{os.getpid()}.tmp"
    old_umask = os.umask(0o077)
    try:
        yield temporary
        with open(temporary, "rb") as handle:
            os.fsync(handle.fileno())
        os.replace(temporary, target)
    finally:
        os.umask(old_umask)
        temporary.unlink(missing_ok=True)


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
    not published; all 0 when None. ``area``: ``releases`` (shared) or ``comparisons``. The entry holds the pairs
    sorted by fingerprint (stable), so it says nothing of the order the records were given in.

    Raises
    ------
    OSError
        The registry cannot be written (the publish then does not happen).
    """
    fingerprints = np.asarray(fingerprints, dtype=np.uint64)
    row_ids = np.zeros(len(fingerprints), np.int64) if row_ids is None else np.asarray(row_ids, dtype=np.int64)
    order = np.argsort(fingerprints, kind="stable")
    table = pa.table({"fingerprint": pa.array(fingerprints[order]), "row_id": pa.array(row_ids[order])})
    table = table.replace_schema_metadata(_entry_metadata(configuration, area))
    with _atomic_entry(home, release_id) as temporary:
        pq.write_table(table, temporary)
    return registry_dir(home) / f"{release_id}.parquet"


@dataclass(frozen=True)
class ShardFingerprints:
    """One shard's fingerprint file in a sharded run's PRIVATE staging and how its row ids become published ones.

    ``path``: Parquet with ``fingerprint`` (uint64, :func:`pipeline.core.series.record_fingerprints`' keyed hash) and
    ``row_id`` (int64, the record's SHARD-LOCAL release row id, 0 when not published), one row per record of the shard
    (published and deleted); ``n_sac_released``: the shard's SAC~ rows (local ids 1..n_sac_released are SAC~ rows, the
    rest attribute-table rows); ``sac_row_id`` / ``attribute_table_row_id``: the shard's offsets
    (:class:`pipeline.core.sharding.ShardOffsets`).
    """

    path: Path
    n_sac_released: int
    sac_row_id: int
    attribute_table_row_id: int

    def published_row_ids(self, local: np.ndarray) -> np.ndarray:
        """int64: the published row ids of local row ids (0 stays 0: not published)."""
        local = np.asarray(local, dtype=np.int64)
        offset = np.where(local <= self.n_sac_released, self.sac_row_id, self.attribute_table_row_id)
        return np.where(local > 0, local + offset, 0).astype(np.int64)


def write_sharded_registry_entry(
    home: str | Path,
    release_id: str,
    shards: Sequence[ShardFingerprints],
    configuration: Mapping,
    *,
    area: str = "releases",
) -> Path:
    """Write (atomically, 0600) the registry entry of a sharded release, streaming: one shard's fingerprint file in
    memory at a time (16 bytes per record of the shard), one row group per shard; the same columns, types and metadata
    keys as :func:`write_registry_entry`, the row ids offset to the published ones
    (:meth:`ShardFingerprints.published_row_ids`). Rows are sorted by fingerprint within each shard.

    Raises
    ------
    OSError, pyarrow.ArrowInvalid
        A fingerprint file is missing or unreadable, or the registry cannot be written (nothing is registered then,
        and the publish does not happen).
    """
    schema = _ENTRY_SCHEMA.with_metadata(_entry_metadata(configuration, area))
    with _atomic_entry(home, release_id) as temporary, pq.ParquetWriter(temporary, schema) as writer:
        for shard in shards:
            part = pq.read_table(shard.path, columns=["fingerprint", "row_id"])
            fingerprints = part.column("fingerprint").to_numpy().astype(np.uint64)
            row_ids = shard.published_row_ids(part.column("row_id").to_numpy())
            del part
            order = np.argsort(fingerprints, kind="stable")
            writer.write_table(
                pa.table({"fingerprint": pa.array(fingerprints[order]), "row_id": pa.array(row_ids[order])}, schema=schema)
            )
    return registry_dir(home) / f"{release_id}.parquet"


def registry_entries(home: str | Path, *, shared_only: bool = False) -> list[tuple[str, Path, dict, int]]:
    """Every registered release of the home without reading its fingerprints: ``(release_id, path, configuration,
    n_records)`` (``n_records`` from the Parquet footer), oldest first; with ``shared_only``, the shared releases only.

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
        footer = pq.ParquetFile(path)
        metadata = footer.schema_arrow.metadata or {}
        if shared_only and metadata.get(_AREA_KEY, b"releases") != b"releases":
            continue
        configuration = json.loads(metadata.get(_CONFIGURATION_KEY, b"{}"))
        if INPUT_KEY not in configuration:  # an entry written before the input's digest was recorded in it
            digest = _input_digest_of_manifest(home, path.stem)
            if digest is not None:
                configuration[INPUT_KEY] = digest
        entries.append((path.stem, path, configuration, int(footer.metadata.num_rows)))
    return entries


def _input_digest_of_manifest(home: str | Path, release_id: str) -> str | None:
    """``input_hmac`` of the release's manifest (``releases/`` or ``comparisons/`` of the home), or None when neither
    holds a readable one."""
    for area in (RELEASES, COMPARISONS):
        try:
            manifest = json.loads((Path(home) / area / release_id / "manifest.json").read_text())
        except (OSError, ValueError):
            continue
        digest = manifest.get(INPUT_KEY) if isinstance(manifest, dict) else None
        return str(digest) if digest else None
    return None


def read_registry(home: str | Path, *, shared_only: bool = False) -> list[tuple[str, np.ndarray, dict]]:
    """Every registered release of the home: ``(release_id, fingerprints, configuration)``, oldest first; with
    ``shared_only``, the shared releases only (comparisons left out).

    Raises
    ------
    OSError, pyarrow.ArrowInvalid
        An unreadable entry (the run stops rather than publish without knowing the series).
    """
    return [
        (
            release_id,
            pq.read_table(path, columns=["fingerprint"]).column("fingerprint").to_numpy().astype(np.uint64),
            configuration,
        )
        for release_id, path, configuration, _ in registry_entries(home, shared_only=shared_only)
    ]


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
        The fingerprints to register (uint64, aligned with ``records``, hence with ``release_row_ids``), and one dict
        per earlier release composed with
        (``release_id``, counts, ``changed_settings``; no value).

    Raises
    ------
    RecompositionRefused
        Overlap with an earlier, different shared release, ``allow_recomposition`` is off and the new release is not
        a comparison.
    """
    from pipeline.core.keyed import keyed_record_hashes
    from pipeline.core.series import REGISTRY_PURPOSE, find_recompositions

    # in the records' order, so that they stay aligned with release_row_ids (record_fingerprints would sort them)
    fingerprints = keyed_record_hashes(records, list(content_columns), secret, REGISTRY_PURPOSE)
    found = find_recompositions(fingerprints, configuration, read_registry(home, shared_only=True))
    if found and not allow_recomposition and not comparison:
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
        raise RecompositionRefused(_refusal(found, pinned + _unpublished_note(home, found)))
    return fingerprints, _manifest_entries(found)


def _unpublished_note(home: str | Path, found) -> str:
    """The sentence a refusal adds for the earlier releases whose directory is in neither ``releases/`` nor
    ``comparisons/`` of the home (red team, session 38: a run killed between its registry entry and its publish left an
    entry that refused every later change, the message naming a release that was never published), or empty."""
    missing = [
        r.release_id
        for r in found
        if not (Path(home) / RELEASES / r.release_id).is_dir() and not (Path(home) / COMPARISONS / r.release_id).is_dir()
    ]
    if not missing:
        return ""
    listed = ", ".join(missing[:5]) + (", …" if len(missing) > 5 else "")
    return (
        f" Release(s) {listed} are not in this home's releases/ or comparisons/: removed by retention (their files may "
        "still be out there: the refusal stands), or never published because their run was interrupted after "
        "registering them; only in that second case, move registry/<release_id>.parquet out of the registry "
        "(keep it aside) and run again."
    )


def _refusal(found, pinned: str) -> str:
    """The message of :class:`RecompositionRefused` for the recompositions ``found`` (``pinned``: the sentence on what
    an intersection would pin, with its leading space, or empty)."""
    lines = "; ".join(r.describe() for r in found[:5]) + ("; …" if len(found) > 5 else "")
    return (
        f"release refused: it would compose with {len(found)} earlier release(s) of this home ({lines}).{pinned} "
        "Intersecting two different releases of the same records pins values that neither pins alone "
        "(on Adult, ℓ = 2 after ℓ = 3 pins the whole sensitive tuple of 5.1 % of the records by plain intersection of "
        "candidate sets, a lower bound; a red team linking the rows of earlier versions' releases through their input "
        "order pinned 48.7 %; see docs/series.md and docs/attacks.md). Publish with the earlier release's settings and records, use another "
        "home for an unrelated series, publish this one as a comparison that is never shared (--no-promote; promote: "
        "false), or pass --allow-recomposition (allow_recomposition) to publish anyway (recorded in the manifest)"
    )


def _manifest_entries(found) -> list[dict]:
    """The manifest's ``recomposition``: one dict per earlier release (counts and setting names; no value)."""
    return [
        {
            "release_id": r.release_id,
            "n_shared_records": r.n_shared_records,
            "n_only_new": r.n_only_new,
            "n_only_earlier": r.n_only_earlier,
            "changed_settings": list(r.changed_settings),
            "same_input_file": r.same_input_file,
        }
        for r in found
    ]


def _sql_string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


#: DuckDB's memory limit while comparing a sharded release with the registry (it spills above it)
SERIES_MEMORY_LIMIT = "1GB"

#: the sentence a sharded release's refusal has where the in-memory job's says what an intersection would pin
SHARDED_PINS_NOTE = (
    " (What an intersection would pin is not measured for a sharded release: that needs its candidate tables in memory.)"
)


def check_sharded_series(
    home: str | Path,
    fingerprint_files: Sequence[str | Path],
    configuration: Mapping,
    *,
    allow_recomposition: bool,
    comparison: bool = False,
    spill_dir: str | Path | None = None,
) -> list[dict]:
    """:func:`check_series` for a sharded release, out of core: DuckDB counts each fingerprint over the shards' files
    and, per registered shared release, the multiset intersection (the sum over common fingerprints of the smaller
    count); the decision is :func:`pipeline.core.series.recomposition_of`'s, exactly as for the in-memory job, and the
    refusal says the same, except that what an intersection would pin (the in-memory refusal's "Measured: … pins") is
    not estimated (:data:`SHARDED_PINS_NOTE`): that needs the candidate's tables in memory.

    Parameters
    ----------
    home
        The home (its registry).
    fingerprint_files
        The shards' fingerprint files (Parquet, column ``fingerprint`` uint64; :class:`ShardFingerprints`), every record
        the release covers once.
    configuration
        The release's configuration (:data:`pipeline.core.series.CONFIGURATION_KEYS`, with ``n_shards`` and
        ``shard_assignment`` when S > 1).
    allow_recomposition, comparison
        As :func:`check_series`.
    spill_dir
        A PRIVATE directory DuckDB may spill to (the run's staging); DuckDB's default otherwise.

    Returns
    -------
    list of dict
        The manifest's ``recomposition`` (one dict per earlier release composed with; counts and setting names only).

    Raises
    ------
    RecompositionRefused
        As :func:`check_series`.
    OSError, duckdb.Error
        A fingerprint file or an entry is unreadable (nothing is published).
    """
    import duckdb

    from pipeline.core.series import recomposition_of

    entries = registry_entries(home, shared_only=True)
    if not entries:
        return []
    files = "[" + ", ".join(_sql_string(str(path)) for path in fingerprint_files) + "]"
    found = []
    with duckdb.connect(config={"threads": 1}) as connection:
        connection.execute(f"SET memory_limit = '{SERIES_MEMORY_LIMIT}'")
        if spill_dir is not None:
            connection.execute(f"SET temp_directory = {_sql_string(str(spill_dir))}")
        connection.execute(
            f"CREATE TEMP TABLE new_counts AS SELECT fingerprint, count(*) AS n FROM read_parquet({files}) GROUP BY fingerprint"
        )
        row = connection.execute("SELECT coalesce(sum(n), 0) FROM new_counts").fetchone()
        n_records = int(row[0]) if row else 0
        for release_id, path, earlier_configuration, n_earlier in entries:
            row = connection.execute(
                "SELECT coalesce(sum(least(new_counts.n, earlier.n)), 0) FROM new_counts JOIN ("
                f"SELECT fingerprint, count(*) AS n FROM read_parquet({_sql_string(str(path))}) GROUP BY fingerprint"
                ") AS earlier USING (fingerprint)"
            ).fetchone()
            recomposition = recomposition_of(
                release_id,
                n_shared_records=int(row[0]) if row else 0,
                n_records=n_records,
                n_earlier_records=n_earlier,
                configuration=configuration,
                earlier_configuration=earlier_configuration,
            )
            if recomposition is not None:
                found.append(recomposition)
    if found and not allow_recomposition and not comparison:
        raise RecompositionRefused(_refusal(found, SHARDED_PINS_NOTE + _unpublished_note(home, found)))
    return _manifest_entries(found)
