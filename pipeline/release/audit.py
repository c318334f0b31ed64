"""Audit a published release directory from its files alone (no Dagster, no warehouse).

The adversary of SPEC §10 knows the released tables and the strong rules with their exact
confidences. ``audit_release`` re-mines those rules from a raw table read exactly as the
release read it (``manifest.json`` → ``input_reading``), runs the adversary on every released
record, re-checks ℓ-diversity and record counts on the files, recovers every rule's
confidence from the release, and computes AIL and RCE (SPEC §11). The result is a JSON-safe
dict holding only counts, probabilities, rule values and release row ids: never a raw record.

Sources: P1 §3.3, Definition 2, Lemmas 12 and 22; SPEC §8-§11.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd

from pipeline.core.adversary import adversary_view, recover_rule_confidences, rule_bounds
from pipeline.core.columns import distinct_per_group
from pipeline.core.identity_risk import identity_risk
from pipeline.core.metrics import additional_information_loss, domain_sizes, reconstruction_error
from pipeline.core.rules import mine_strong_rules, resolve_mining_backend
from pipeline.core.verification import sid_diversity_summary
from pipeline.settings import DEFAULT_MIN_CONFIDENCE, default_min_support
from pipeline.io.loading import InputError, load_records, without_settings_advice
from pipeline.release.publish import MODEL_TABLES, InvalidLatest, read_latest
from pipeline.errors import UnusableInputError
from pipeline.release.manifest import InputReading, validate_contract, validate_input_reading
from pipeline.release.reports import (
    AdversaryFigures,
    AuditedRawTable,
    AuditedRelease,
    AuditMetrics,
    AuditReport,
    AuditStructure,
    IdentityRisk,
    QueryWorkload,
    RuleExposure,
)

__all__ = [
    "AuditError",
    "AuditResult",
    "PublishedRelease",
    "audit_release",
    "audit_release_against",
    "audit_report",
    "disclosure_histogram",
    "identity_risk_from_files",
    "read_release",
    "release_metrics",
    "run_audit",
    "table_digests",
    "table_files",
]

#: Right edges of the disclosure histogram bins (left-open except the first): 0, (0, 0.1], …, (0.9, 1].
HISTOGRAM_EDGES = tuple(round(0.1 * k, 1) for k in range(11))


class AuditError(UnusableInputError, ValueError):
    """The release directory or the raw table cannot be audited; the message says why."""


class DamagedRelease(AuditError):
    """The release's files break its contract where the audit's figures need it (a contract column missing or
    added, a release row id twice, a SAC~ group or SID with fewer than ℓ distinct values): the verdict is FAIL
    (exit status 1), with the message naming the table, column or count, never a value (red team, session 39: these
    gave tracebacks, or "its message is withheld" on a sharded release)."""

    exit_status = 1


def contract_columns(name: str, manifest: Mapping) -> list[str]:
    """The columns table ``name`` of a mixed or Rating release holds (the release contract): ``sac_released``
    row_id, group_id, quasi-identifiers, sensitive attributes; ``attribute_table`` row_id, quasi-identifiers, one SID
    column per sensitive attribute; ``id_table`` attribute, sid, value, count; ``attribute_clusters`` cluster_id,
    attribute."""
    quasi_identifiers, sensitive = list(manifest["quasi_identifiers"]), list(manifest["sensitive_attributes"])
    return {
        "sac_released": ["row_id", "group_id", *quasi_identifiers, *sensitive],
        "attribute_table": ["row_id", *quasi_identifiers, *sensitive],
        "id_table": ["attribute", "sid", "value", "count"],
        "attribute_clusters": ["cluster_id", "attribute"],
    }[name]


def check_release_frames(tables: Mapping[str, pd.DataFrame], manifest: Mapping, where: str | Path) -> None:
    """Refuse frames read from a release (the whole release, or one part of a sharded one) that break the contract
    where the audit's figures need it: a contract column missing or an extra one, or a release row id held twice.

    Raises
    ------
    DamagedRelease
        Names ``where``, the table and the columns, or how many row ids repeat; never a value.
    """
    for name, frame in tables.items():
        expected = contract_columns(name, manifest)
        missing = [c for c in expected if c not in frame.columns]
        extra = [str(c) for c in frame.columns if c not in expected]
        if missing or extra:
            raise DamagedRelease(
                f"{where}: the release is damaged: table {name} "
                + (f"has no column(s) {missing}" if missing else "")
                + (" and " if missing and extra else "")
                + (f"has column(s) {extra} the contract does not list" if extra else "")
                + " (its manifest's quasi-identifiers and sensitive attributes); audit the release as it was published"
            )
    row_ids = [tables[name]["row_id"] for name in ("sac_released", "attribute_table") if name in tables]
    if row_ids:
        repeated = int(pd.concat(row_ids, ignore_index=True).duplicated().sum())
        if repeated:
            raise DamagedRelease(
                f"{where}: the release is damaged: {repeated} row(s) of sac_released and attribute_table repeat a "
                "release row id held by another (every published record has one row id); audit the release as it was "
                "published"
            )


@dataclass(frozen=True)
class PublishedRelease:
    """A release directory read back: the manifest and the contract tables as pandas frames.

    ``sac_released`` and ``attribute_clusters`` are empty frames with the contract columns
    for a Rating release; SID columns of ``attribute_table`` are nullable ``Int32``.
    """

    path: Path
    manifest: dict
    sac_released: pd.DataFrame
    attribute_table: pd.DataFrame
    id_table: pd.DataFrame
    attribute_clusters: pd.DataFrame

    @property
    def ell(self) -> int:
        return int(self.manifest["ell"])

    @property
    def ell_by_attribute(self) -> dict[str, int]:
        """ℓ_i per sensitive attribute (manifest ``ell_per_attribute``; ``ell`` for each in releases without it)."""
        recorded = self.manifest.get("ell_per_attribute") or {}
        return {a: int(recorded.get(a, self.ell)) for a in self.sensitive_attributes}

    @property
    def sensitive_attributes(self) -> list[str]:
        return list(self.manifest["sensitive_attributes"])

    @property
    def quasi_identifiers(self) -> list[str]:
        return list(self.manifest["quasi_identifiers"])


def _resolve_release_dir(path: Path) -> Path:
    """A release directory, or a ``releases`` directory (or a home) whose ``LATEST`` names one, validated by
    :func:`pipeline.release.publish.read_latest` (a ``LATEST`` holding a path is refused, never followed)."""
    if (path / "manifest.json").is_file():
        return path
    for releases_dir in (path, path / "releases"):
        if os.path.lexists(releases_dir / "LATEST"):
            try:
                latest = read_latest(releases_dir)
            except InvalidLatest as error:
                raise AuditError(str(error)) from error
            if latest is not None:
                return latest
    raise AuditError(
        f"{path} is not a release directory: it has no manifest.json (nor a LATEST file naming one); "
        "pass $MSA_RELEASE_HOME/releases/<release_id>"
    )


def read_release(path: str | Path) -> PublishedRelease:
    """Read a published release directory (its Parquet files and ``manifest.json``): one file per table, or the part
    files of a sharded release (``<table>/part-*.parquet``, read in name order by :func:`read_parquet_frame`;
    :func:`table_files`).

    Parameters
    ----------
    path
        ``<home>/releases/<release_id>``, or ``<home>/releases`` / ``<home>`` (then LATEST).

    Returns
    -------
    PublishedRelease

    Raises
    ------
    AuditError
        No manifest, an unknown model, a (k, ℓ) release (not audited here), or a contract table missing.
    DamagedRelease
        A table breaks the contract (:func:`check_release_frames`).
    """
    directory, manifest = read_audited_manifest(path)
    model = manifest["model"]
    quasi_identifiers = list(manifest["quasi_identifiers"])
    sensitive_attributes = list(manifest["sensitive_attributes"])
    empty_columns = {
        "sac_released": ["row_id", "group_id", *quasi_identifiers, *sensitive_attributes],
        "attribute_clusters": ["cluster_id", "attribute"],
    }
    tables: dict[str, pd.DataFrame] = {}
    for name in ("sac_released", "attribute_table", "id_table", "attribute_clusters"):
        if name in MODEL_TABLES[model]:
            files = table_files(directory, name, manifest)
            if not files:
                raise AuditError(
                    f"{directory / (name + '.parquet')} is missing (nor {directory / name}/part-*.parquet): a {model} "
                    f"release must contain {list(MODEL_TABLES[model])}"
                )
            # text columns as categoricals (one string per distinct value, not per cell); parts in name order
            tables[name] = read_parquet_frame(files, categorical=name in ("sac_released", "attribute_table", "id_table"))
        else:
            tables[name] = pd.DataFrame({c: pd.Series(dtype=object) for c in empty_columns[name]})
    check_release_frames(tables, manifest, directory)
    return PublishedRelease(path=directory, manifest=manifest, **contract_dtypes(tables, sensitive_attributes))


def read_parquet_frame(files: list[Path] | list[str], *, categorical: bool = True) -> pd.DataFrame:
    """The rows of one published table (one Parquet file, or its parts in the order given) as a pandas frame.

    Parameters
    ----------
    files
        One or more Parquet files of the same table (a sharded release's parts, in part order).
    categorical
        Text columns as pandas categoricals (read dictionary-encoded by pyarrow: one Python string per distinct value,
        never one per cell; the categories in order of first appearance); else ``object``.

    Returns
    -------
    pandas.DataFrame
        The files' columns, in the first file's order, with Arrow's pandas dtypes (int64, int32 and float columns as
        numpy dtypes, float64 where a column has nulls; text as above). Parts that differ only in whether a column
        may hold nulls (DuckDB marks a column ``NOT NULL`` in a part that has none) are read as nullable.

    Raises
    ------
    AuditError
        A file that is not a readable Parquet file, or a part whose column names or types differ from the first
        part's (the message names the file).
    ValueError
        ``files`` is empty.
    OSError
        A file is missing or cannot be opened.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    if not files:
        raise ValueError("read_parquet_frame needs at least one file")
    pieces = []
    for file in files:
        try:
            schema = pq.read_schema(file)
            text = [f.name for f in schema if pa.types.is_string(f.type) or pa.types.is_large_string(f.type)]
            pieces.append(pq.read_table(file, read_dictionary=text if categorical else None))
        except (FileNotFoundError, PermissionError, IsADirectoryError):
            raise
        except (pa.ArrowException, OSError) as error:  # not Parquet, truncated, corrupt pages
            raise AuditError(
                f"{file}: not a readable Parquet file ({type(error).__name__}: {error}); the release is damaged: "
                "publish it again",
                file=str(file),
            ) from None
    if len(pieces) == 1:
        return pieces[0].to_pandas()
    # the parts' columns compared by name and type; whether a column may hold nulls is not compared (DuckDB writes
    # NOT NULL where a part happens to have none), every part is read as nullable
    first = pieces[0].schema
    nullable = pa.schema([field.with_nullable(True) for field in first])
    for file, piece in zip(files, pieces, strict=True):
        if piece.schema.names != first.names or piece.schema.types != first.types:
            raise AuditError(
                f"{file}: its columns ({', '.join(f'{f.name} {f.type}' for f in piece.schema)}) differ from those of "
                f"{files[0]} ({', '.join(f'{f.name} {f.type}' for f in first)}); the release is damaged: publish it again",
                file=str(file),
            )
    return pa.concat_tables([piece.cast(nullable) for piece in pieces]).to_pandas()


def contract_dtypes(tables: dict[str, pd.DataFrame], sensitive_attributes: list[str]) -> dict[str, pd.DataFrame]:
    """The dtypes :class:`PublishedRelease` holds, in place on frames read from Parquet: SID columns of
    ``attribute_table`` nullable ``Int32``, ``row_id``/``group_id`` int64, ``sid``/``count`` of ``id_table`` int32."""
    tables["attribute_table"] = tables["attribute_table"].astype({a: "Int32" for a in sensitive_attributes})
    for column in ("row_id", "group_id"):
        if column in tables["sac_released"]:
            tables["sac_released"][column] = tables["sac_released"][column].astype("int64")
    tables["id_table"] = tables["id_table"].astype({"sid": "int32", "count": "int32"})
    return tables


def read_audited_manifest(path: str | Path) -> tuple[Path, dict]:
    """The release directory (:func:`read_release`'s resolution: a directory, or LATEST of a ``releases`` directory)
    and its ``manifest.json``, checked to be a mixed or Rating release the strong-rule audit reads.

    Raises
    ------
    AuditError
        No manifest, an unreadable one, an unknown model, or a model without SIDs and SAC~ groups ((k, ℓ)).
    """
    directory = _resolve_release_dir(Path(path).expanduser().resolve())
    manifest_path = directory / "manifest.json"
    try:
        manifest = json.loads(manifest_path.read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise AuditError(f"{manifest_path}: cannot read the manifest ({error})") from error
    model = manifest.get("model")
    if model not in MODEL_TABLES:
        raise AuditError(f"{manifest_path}: unknown model {model!r} (known: {sorted(MODEL_TABLES)})")
    from pipeline.models import publication_model

    plugin = publication_model(str(model))
    if not plugin.audited:
        raise AuditError(
            f"{manifest_path}: a {plugin.label} release (model {model!r}) has no SIDs or SAC~ groups for the "
            "strong-rule audit; its gates are recorded in the manifest's checks"
        )
    return directory, manifest


def table_files(directory: Path, name: str, manifest: Mapping) -> list[Path]:
    """The Parquet files of a published table: ``<name>.parquet``, or the part files ``<name>/part-*.parquet`` of a
    sharded release in name order (which is shard order; :mod:`pipeline.release.sharded_publish`); empty when neither
    is there.

    Raises
    ------
    AuditError
        A sharded release whose part files differ from those its manifest lists (``sharding.parts``): a part missing
        or one not listed.
    """
    single = directory / f"{name}.parquet"
    if single.is_file():
        return [single]
    parts_dir = directory / name
    if not parts_dir.is_dir():
        return []
    files = sorted(parts_dir.glob("part-*.parquet"))
    listed = ((manifest.get("sharding") or {}).get("parts") or {}).get(name)
    if listed is not None:
        expected = sorted(str(part["path"]) for part in listed)
        found = [f"{name}/{file.name}" for file in files]
        if found != expected:
            raise AuditError(
                f"{parts_dir}: the part files {found[:5]}{' …' if len(found) > 5 else ''} differ from those "
                f"manifest.json lists ({len(expected)} parts); the release is damaged: publish it again"
            )
    return files


def table_digests(tables: Mapping[str, pd.DataFrame]) -> dict[str, str]:
    """SHA-256 of every table's content: column names, then each column's values in row order (NULL as NULL), so
    that a table held in memory and the same table read back from its Parquet file (categorical text, nullable
    ``Int32`` SIDs) have the same digest, and so does a sharded release's table read from its part files
    (:func:`read_release`: the parts in shard order ARE the table). Text and integer columns are hashed by value as they are (pandas hashes
    object, string and categorical text alike, whatever the categories' order, and every integer width, nullable
    or not, alike): no per-cell text is made, so 10M-row tables cost well under a second per column; other
    columns (floating point, dates) are hashed as text.

    Parameters
    ----------
    tables
        Table name -> frame (the contract's columns, in published order).

    Returns
    -------
    dict
        Table name -> hex digest.
    """
    digests = {}
    for name, frame in tables.items():
        digest = hashlib.sha256()
        for column in frame.columns:
            digest.update(f"{column}\0".encode())
            values = frame[column]
            if not _hashes_by_value(values.dtype):
                values = values.astype("string")
            digest.update(pd.util.hash_pandas_object(values, index=False).to_numpy().tobytes())
        digest.update(f"{len(frame)}".encode())
        digests[name] = digest.hexdigest()
    return digests


def _hashes_by_value(dtype: object) -> bool:
    """Whether ``pd.util.hash_pandas_object`` gives a column of this dtype the same hashes as the same values held
    in the other dtypes its table may have in memory or read back (text: object, string, categorical; integers of
    any width, nullable or not; booleans)."""
    return bool(
        isinstance(dtype, pd.CategoricalDtype)
        or pd.api.types.is_object_dtype(dtype)
        or pd.api.types.is_string_dtype(dtype)
        or pd.api.types.is_integer_dtype(dtype)
        or pd.api.types.is_bool_dtype(dtype)
    )


def identity_risk_from_files(directory: str | Path, manifest: Mapping) -> dict | None:
    """Identity risk on the published quasi-identifiers (:func:`pipeline.core.identity_risk.identity_risk`) of a
    release directory, from its own Parquet files: every published table of its model (``sac_released`` and
    ``attribute_table``, ``kl_released``, …) that holds every quasi-identifier column is pooled.

    Parameters
    ----------
    directory
        ``<home>/releases/<release_id>``.
    manifest
        Its ``manifest.json`` (``model``, ``quasi_identifiers``).

    Returns
    -------
    dict or None
        As :func:`pipeline.core.identity_risk.identity_risk`; None when the manifest names no quasi-identifier or
        no published table holds them.

    Raises
    ------
    OSError, ValueError
        A table file is unreadable.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    quasi_identifiers = list(manifest.get("quasi_identifiers") or [])
    from pipeline.release.sharded_audit import is_sharded, sharded_identity_risk

    if quasi_identifiers and is_sharded(Path(directory)):  # part files: counted by DuckDB, no frame of records
        names = [n for n in ("sac_released", "attribute_table") if n in MODEL_TABLES.get(str(manifest.get("model")), ())]
        return sharded_identity_risk({n: table_files(Path(directory), n, manifest) for n in names}, quasi_identifiers)
    tables = []
    for name in MODEL_TABLES.get(str(manifest.get("model")), ()):
        files = table_files(Path(directory), name, manifest)
        if quasi_identifiers and files and set(quasi_identifiers) <= set(pq.read_schema(files[0]).names):
            parts = [pq.read_table(file, columns=quasi_identifiers) for file in files]
            tables.append(pa.concat_tables(parts).to_pandas(strings_to_categorical=True))
    return identity_risk(tables, quasi_identifiers) if tables else None


def disclosure_histogram(probabilities: np.ndarray) -> dict[str, int]:
    """Counts per bin: ``"0"`` (exactly 0), then ``"(0.0, 0.1]"`` … ``"(0.9, 1.0]"``."""
    probabilities = np.asarray(probabilities, dtype=float)
    counts = {"0": int((probabilities <= 0).sum())}
    for left, right in zip(HISTOGRAM_EDGES[:-1], HISTOGRAM_EDGES[1:], strict=True):
        inside = (
            (probabilities > left + 1e-12) & (probabilities <= right + 1e-12)
            if left
            else (probabilities > 0) & (probabilities <= right + 1e-12)
        )
        counts[f"({left}, {right}]"] = int(inside.sum())
    return counts


def broken_diversity_message(where: str | Path, error: ValueError) -> str:
    """:class:`DamagedRelease`'s message when the utility figures refuse a release (``error`` from
    :func:`pipeline.core.metrics.additional_information_loss`, whose messages name counts and ℓ, never a value)."""
    return (
        f"{where}: the release is damaged: {str(error).splitlines()[0] if str(error) else type(error).__name__} (its "
        "files no longer hold what was published: a SAC~ group or a SID lost records or values, or a SID is missing "
        "from the ID table); audit the release as it was published"
    )


def information_loss(release: PublishedRelease, *, n_deleted: int, where: str | Path) -> float:
    """AIL of a release or of one part of a sharded one (:func:`pipeline.core.metrics.additional_information_loss`
    on its files, ℓ_i per attribute).

    Raises
    ------
    DamagedRelease
        A published set holds fewer than ℓ values, or a SID is missing from the ID table (:func:`broken_diversity_message`,
        naming ``where``).
    """
    try:
        return additional_information_loss(
            sac_released=release.sac_released,
            attribute_table=release.attribute_table,
            id_table=release.id_table,
            sensitive_attributes=release.sensitive_attributes,
            ell=release.ell_by_attribute,
            n_deleted=n_deleted,
        )
    except ValueError as error:  # every published set must hold ℓ values for AIL's formula
        raise DamagedRelease(broken_diversity_message(where, error)) from None


def release_metrics(release: PublishedRelease, rules: pd.DataFrame, *, domain: Mapping[str, int]) -> dict:
    """Utility metrics of a release (SPEC §11): AIL, RCE, rule confidences, suppression.

    Parameters
    ----------
    release
        The release read back.
    rules
        Strong rules of the raw table (``support_antecedent``, ``support_both`` counts).
    domain
        Attribute → number of distinct values in the raw table (RCE factor of a suppressed cell).

    Returns
    -------
    dict
        ``additional_information_loss`` (fraction of cells, 0..1), ``reconstruction_error``
        (sum over input records, 0..n), ``reconstruction_error_per_record``,
        ``average_raw_confidence``, ``average_released_confidence``, ``rules`` (one dict per
        rule: attributes, values, raw and released confidence, ``support`` and ``antecedent_support`` in raw
        records), ``n_suppressed_cells``, ``n_deleted``.
    """
    sensitive_attribute_columns = release.sensitive_attributes
    n_deleted = int(release.manifest.get("n_deleted", 0))
    recovered = recover_rule_confidences(
        rules,
        sac_released=release.sac_released,
        attribute_table=release.attribute_table,
        id_table=release.id_table,
        attribute_clusters=release.attribute_clusters,
    )
    n_records = len(release.sac_released) + len(release.attribute_table) + n_deleted
    rce = reconstruction_error(
        sac_released=release.sac_released,
        attribute_table=release.attribute_table,
        id_table=release.id_table,
        attribute_clusters=release.attribute_clusters,
        sensitive_attributes=sensitive_attribute_columns,
        domain_sizes=dict(domain),
        n_deleted=n_deleted,
    )
    ail = information_loss(release, n_deleted=n_deleted, where=release.path)
    n_suppressed = int(release.attribute_table[sensitive_attribute_columns].isna().sum().sum())
    return metrics_of(recovered, ail=ail, rce=rce, n_records=n_records, n_suppressed_cells=n_suppressed, n_deleted=n_deleted)


def metrics_of(
    recovered: pd.DataFrame, *, ail: float, rce: float, n_records: int, n_suppressed_cells: int, n_deleted: int
) -> dict:
    """:func:`release_metrics`'s dict from its figures: ``recovered`` is the rules with their released supports
    (:func:`pipeline.core.adversary.recover_rule_confidences` or ``with_released_confidence``), ``ail`` a fraction,
    ``rce`` a sum over ``n_records`` input records (deleted ones included)."""
    raw_confidence = recovered["support_both"] / recovered["support_antecedent"]
    return {
        "additional_information_loss": ail,
        "reconstruction_error": rce,
        "reconstruction_error_per_record": rce / n_records if n_records else 0.0,
        "average_raw_confidence": float(raw_confidence.mean()) if len(recovered) else None,
        "average_released_confidence": float(recovered["released_confidence"].mean()) if len(recovered) else None,
        "rules": [
            {
                "antecedent": [row.antecedent_attribute, str(row.antecedent_value)],
                "consequent": [row.consequent_attribute, str(row.consequent_value)],
                "raw_confidence": float(row.support_both / row.support_antecedent),
                "released_confidence": None if np.isnan(row.released_confidence) else float(row.released_confidence),
                "support": int(row.support_both),
                "antecedent_support": int(row.support_antecedent),
            }
            for row in recovered.itertuples(index=False)
        ],
        "n_suppressed_cells": int(n_suppressed_cells),
        "n_deleted": int(n_deleted),
    }


def _structure(release: PublishedRelease, *, check_shares: bool = True) -> AuditStructure:
    """ℓ-diversity of SIDs and groups, and record counts, checked on the files (SPEC §9.1, §9.3); with
    ``check_shares`` (the audit; report.json's part figures do not use it) also each SID's value shares and
    occurrences."""
    ell, sensitive_attribute_columns = release.ell, release.sensitive_attributes
    # distinct values per (attribute, SID) (a missing value is not a value), each attribute against its own ℓ_i
    # (SPEC §6.7): integer codes and one sort (distinct_per_group), not a pandas groupby-nunique
    id_table = release.id_table
    attribute_codes, attributes = pd.factorize(id_table["attribute"])
    if (attribute_codes < 0).any():  # a row naming no attribute belongs to no SID (as the group-by drops it)
        id_table, attribute_codes = id_table[attribute_codes >= 0], attribute_codes[attribute_codes >= 0]
    sid = id_table["sid"].to_numpy(np.int64)
    low = int(sid.min(initial=0))
    span = int(sid.max(initial=0)) - low + 1
    sid_codes, _ = pd.factorize(attribute_codes.astype(np.int64) * span + (sid - low))  # one code per (attribute, SID)
    n_sids = int(sid_codes.max(initial=-1)) + 1
    attribute_of_sid = np.zeros(n_sids, dtype=np.int64)
    attribute_of_sid[sid_codes] = attribute_codes
    value_codes, _ = pd.factorize(id_table["value"])
    known = value_codes >= 0
    per_sid = distinct_per_group(sid_codes[known], value_codes[known], n_sids)
    ells = release.ell_by_attribute
    required = np.asarray([ells.get(str(a), ell) for a in attributes], dtype=np.int64)
    n_sids_below = int((per_sid < required[attribute_of_sid]).sum())
    # no value of a SID above 1/ℓ_i of its occurrences (the ID table's counts, a value's rows added up), and every
    # occurrence one attribute-table record naming the SID: gate 2's own summary (sid_diversity_summary) on the files
    # (red team, session 38: a SID edited to hold one value 4 times out of 6 passed an audit that counted distinct
    # values only)
    if check_shares and "count" in release.id_table.columns and len(release.id_table):
        table = release.attribute_table
        # only the SID columns (a copy of the whole attribute table cost a 1M-record publish 200-280 MiB); a column
        # missing from the files names no SID (every occurrence of its SIDs then unmatched)
        cells = pd.DataFrame(
            {
                a: table[a].astype("Int64") if a in table else pd.array([pd.NA] * len(table), dtype="Int64")
                for a in sensitive_attribute_columns
            }
        )
        # rows naming no attribute belong to no SID and a row without a value is no occurrence (as above)
        named = release.id_table[release.id_table["attribute"].notna() & release.id_table["value"].notna()]
        # SIDs shifted to start at 0 in this part: the summary addresses (attribute, SID) densely, and a sharded
        # release's later parts carry the earlier shards' offsets (a diff review, session 38: 20M offsets cost 0.4 s
        # and 170 MB per part); any SID, even one the ID table lacks or a negative one, is compared as it is
        lowest = [int(named["sid"].min())] if len(named) else []
        lowest += [int(cells[a].min()) for a in sensitive_attribute_columns if cells[a].notna().any()]
        offset = min(lowest, default=0)
        named = named.assign(sid=named["sid"].to_numpy(np.int64) - offset)
        cells = cells.assign(**{a: cells[a] - offset for a in sensitive_attribute_columns})
        summary = sid_diversity_summary(cells, named, sensitive_attribute_columns)
        bound = summary["attribute"].map(lambda a: 1.0 / ells.get(str(a), ell)).to_numpy(np.float64)
        bad = (summary["max_value_share"].to_numpy(np.float64) > bound + 1e-12) | ~summary["records_match_occurrences"].to_numpy(
            bool
        )
        n_sids_share = int(bad.sum())
    else:
        n_sids_share = 0
    # SAC~ groups of L = ell records with L distinct values of every attribute
    sac = release.sac_released
    if len(sac):
        group_index, group_ids = pd.factorize(sac["group_id"].to_numpy(np.int64))
        n_groups = len(group_ids)
        sizes = np.bincount(group_index, minlength=n_groups)
        distinct = np.full(n_groups, np.iinfo(np.int64).max, dtype=np.int64)
        for attribute in sensitive_attribute_columns:
            codes, _ = pd.factorize(sac[attribute])
            present = codes >= 0
            distinct = np.minimum(distinct, distinct_per_group(group_index[present], codes[present], n_groups))
        n_groups_bad = int(((sizes != ell) | (distinct < ell)).sum())
    else:
        n_groups_bad = n_groups = 0
    counts_match = len(sac) == int(release.manifest.get("n_sac_released", len(sac))) and len(release.attribute_table) == int(
        release.manifest.get("n_attribute_table", len(release.attribute_table))
    )
    return AuditStructure(
        n_sids=n_sids,
        n_sids_below_ell=n_sids_below,
        n_sids_value_above_share=n_sids_share,
        n_groups=n_groups,
        n_groups_not_ell_diverse=n_groups_bad,
        record_counts_match_manifest=bool(counts_match),
        passed=bool(n_sids_below == 0 and n_sids_share == 0 and n_groups_bad == 0 and counts_match),
    )


@dataclass(frozen=True)
class AuditResult:
    """``report``: the typed audit (:class:`pipeline.release.reports.AuditReport`). ``per_record``: the
    adversary's view of every released record (:func:`pipeline.core.adversary.adversary_view`:
    ``row_id``, ``rule``, ``numerator``, ``denominator``, ``probability``)."""

    report: AuditReport
    per_record: pd.DataFrame


def _is_release_input(release_path: Path, manifest: dict, raw_sha256: str) -> bool | None:
    """Whether the raw table is the release's input: its keyed fingerprint equals the manifest's
    ``input_hmac`` under the home secret found beside the release (``<home>/releases/<id>``) or in
    ``$MSA_RELEASE_HOME``; None when no secret is found. Older manifests carry ``input_sha256``."""
    import os

    from pipeline.core.keyed import input_hmac
    from pipeline.release.home_secret import read_secret_if_present

    if manifest.get("input_hmac") is None:
        return (raw_sha256 == manifest["input_sha256"]) if manifest.get("input_sha256") else None
    homes = [Path(release_path).resolve().parent.parent]
    if os.environ.get("MSA_RELEASE_HOME"):
        homes.append(Path(os.environ["MSA_RELEASE_HOME"]).expanduser().resolve())
    for home in homes:
        secret = read_secret_if_present(home)
        if secret is not None and input_hmac(secret, raw_sha256) == manifest["input_hmac"]:
            return True
    return False if any(read_secret_if_present(h) is not None for h in homes) else None


def audit_release(
    release_dir: str | Path,
    raw_path: str | Path,
    *,
    min_confidence: float | None = None,
    min_support: int | None = None,
    max_listed_records: int = 1000,
    hierarchies_dir: str | Path | None = None,
    workers: int = 2,
) -> AuditReport:
    """Audit a release directory against the strong rules of a raw table (the report only).

    A sharded release (part files) is audited part by part on ``workers`` processes
    (:func:`pipeline.release.sharded_audit.audit_sharded_release`: the same report, no whole-table frame); any other
    release by :func:`run_audit` (parameters, result and errors there).
    """
    directory = _resolve_release_dir(Path(release_dir).expanduser().resolve())
    from pipeline.release.sharded_audit import audit_sharded_release, is_sharded

    if is_sharded(directory):  # part files: measured part by part, never a whole-table frame
        return audit_sharded_release(
            directory,
            raw_path,
            min_confidence=min_confidence,
            min_support=min_support,
            max_listed_records=max_listed_records,
            workers=workers,
        )
    return run_audit(
        directory,
        raw_path,
        min_confidence=min_confidence,
        min_support=min_support,
        max_listed_records=max_listed_records,
        hierarchies_dir=hierarchies_dir,
    ).report


def run_audit(
    release_dir: str | Path,
    raw_path: str | Path,
    *,
    min_confidence: float | None = None,
    min_support: int | None = None,
    max_listed_records: int = 1000,
    mining_backend: str = "auto",
    duckdb_mining_threshold: int = 100_000,
    hierarchies_dir: str | Path | None = None,
) -> AuditResult:
    """Audit a release directory against the strong rules of a raw table.

    Parameters
    ----------
    release_dir
        A release directory (see :func:`read_release`).
    raw_path
        The raw table the adversary mines the rules from; read with the release's
        ``input_reading`` (format, header, column names, delimiter, missing-value tokens).
    min_confidence
        Threshold of the adversary's rules (default: the release's).
    min_support
        Least support of the adversary's rules, a count of raw records (default: the release's ``min_support``;
        1 for a release made before it existed). Lower than the release's: the audit measures an adversary who
        knows rules the release did not bound.
    max_listed_records
        At most this many release row ids above the bound are listed in the result.
    mining_backend, duckdb_mining_threshold
        How the adversary mines the rules (:func:`pipeline.core.rules.resolve_mining_backend`;
        every back end gives the same rules).
    hierarchies_dir
        The hierarchies the release generalized its quasi-identifiers along: when given, the report also holds the
        COUNT-query workload's errors (``query_workload``, :mod:`pipeline.core.query_workload`) measured on the raw
        records (up to :data:`~pipeline.core.query_workload.MAX_REPORT_RECORDS`).

    Returns
    -------
    AuditResult
        ``report`` (:class:`pipeline.release.reports.AuditReport`; ``.as_json()`` for the JSON): ``verdict`` ("PASS"/"FAIL"), ``reasons``, ``release`` (id, model, ℓ,
        directory), ``raw`` (path, sha256, whether it is the release's input), ``adversary``
        (bound, max/mean probability, records above the bound, certain records, histogram,
        per-rule maxima), ``structure`` (ℓ-diversity and counts on the files) and ``metrics``
        (:func:`release_metrics`). The verdict is PASS when no released record exceeds
        1/ℓ (exact rational comparison) and the structure checks hold.

    Raises
    ------
    AuditError
        Unreadable release or raw table (the message names the file and what to do).
    """
    release = read_release(release_dir)
    loaded = load_raw_as_released(release.path, release.manifest, raw_path)
    result = audit_release_against(
        release,
        loaded.records,
        raw_label=str(raw_path),
        input_sha256=loaded.input_sha256,
        min_confidence=min_confidence,
        min_support=min_support,
        max_listed_records=max_listed_records,
        mining_backend=mining_backend,
        duckdb_mining_threshold=duckdb_mining_threshold,
    )
    if hierarchies_dir is None:
        return result
    workload = _query_workload(release, loaded.records, Path(hierarchies_dir))
    report = result.report.model_copy(update={"query_workload": workload})
    return AuditResult(report=report, per_record=result.per_record)


def load_raw_as_released(directory: Path, manifest: Mapping, raw_path: str | Path):  # noqa: ANN201 (LoadedRecords)
    """The raw table read exactly as the release read its input (the manifest's ``input_reading``), as
    :func:`pipeline.io.loading.load_records` returns it.

    Raises
    ------
    AuditError
        The manifest has no (valid) ``input_reading``, or the raw table is unreadable (names the file).
    """
    reading = manifest.get("input_reading")
    if reading is None:
        raise AuditError(
            f"{directory / 'manifest.json'} has no input_reading (release made before it was recorded); "
            "re-publish the release to audit it with --raw"
        )
    try:
        typed = validate_input_reading(reading)
    except ValueError as error:
        raise AuditError(f"{directory / 'manifest.json'}: {error}") from None
    return read_as_released(raw_path, typed, manifest["quasi_identifiers"], manifest["sensitive_attributes"], error=AuditError)


def read_as_released(
    raw_path: str | Path,
    reading: InputReading,
    quasi_identifiers: Sequence[str],
    sensitive_attributes: Sequence[str],
    *,
    error: type[Exception],
):  # noqa: ANN201 (LoadedRecords)
    """``raw_path`` read as a release read its input (``reading``: its manifest's validated ``input_reading``), for an
    audit of a mixed, Rating or (k, ℓ) release.

    Raises
    ------
    error
        The reader refused the table: its message (naming the file) without the run's reading options, then
        :func:`audit_reading_advice` (the remedy is the release's own input file).
    """
    try:
        with without_settings_advice():  # the remedy is the release's own input file, said below
            return load_records(
                raw_path,
                quasi_identifiers=list(quasi_identifiers),
                sensitive_attributes=list(sensitive_attributes),
                input_format=reading.input_format,
                csv_header=reading.csv_header,
                column_names=reading.all_column_names(),
                delimiter=reading.delimiter,
                strip_whitespace=reading.strip_whitespace,
                missing_value_tokens=reading.missing_value_tokens,
                # the raw table the release was published from, with whatever max_value_length it was read with
                # (the manifest does not record it): no limit here
                max_value_length=None,
            )
    except InputError as refused:
        message = str(refused)
        message = message if str(raw_path) in message else f"raw table {raw_path}: {message}"
        raise error(
            message + audit_reading_advice(reading.input_format, reading.csv_header, reading.delimiter, message)
        ) from None


def audit_reading_advice(input_format: str, csv_header: bool | None, delimiter: str, message: str) -> str:
    """What an audit says after the reader's refusal of its ``--raw`` table: the audit reads it as the manifest says the
    release read its input, so the remedy is the release's own input file, not the run's reading options (red team,
    session 39; the reader's own advice is off while an audit reads, :func:`pipeline.io.loading.without_settings_advice`).
    Starts with the separator ``message`` needs (a sentence after a '.' or '?', else '. ')."""
    separator = " " if message.rstrip().endswith((".", "?")) else ". "
    return (
        f"{separator}The audit reads the raw table as the release read its input (the manifest's input_reading: "
        f"{input_format}, header {csv_header}, delimiter {delimiter!r}) and the release's quasi-identifiers and "
        "sensitive attributes; pass the release's own input file with --raw"
    )


def _query_workload(release: PublishedRelease, records: pd.DataFrame, hierarchies_dir: Path) -> QueryWorkload | None:
    """The COUNT-query workload's errors of a mixed or Rating release against its raw records (None above
    :data:`~pipeline.core.query_workload.MAX_REPORT_RECORDS` records).

    Raises
    ------
    AuditError
        Unreadable hierarchies, or a published label that is neither a value nor a node of its hierarchy.
    """
    from pipeline.core.hierarchies import HierarchyError
    from pipeline.reporting.release_report import query_workload_data

    if not hierarchies_dir.is_dir():
        raise AuditError(f"{hierarchies_dir}: not a directory of hierarchies; pass the release's --hierarchies folder")
    try:
        data = query_workload_data(
            records,
            release.quasi_identifiers,
            release.sensitive_attributes,
            model=str(release.manifest.get("model")),
            tables={
                "sac_released": release.sac_released,
                "attribute_table": release.attribute_table,
                "id_table": release.id_table,
                "attribute_clusters": release.attribute_clusters,
            },
            hierarchies_dir=hierarchies_dir,
        )
    except (HierarchyError, ValueError) as error:
        raise AuditError(f"query workload: {error}") from None
    return None if data.get("not_computed") else QueryWorkload.model_validate(data)


def audit_release_against(
    release: PublishedRelease,
    records: pd.DataFrame,
    *,
    raw_label: str,
    input_sha256: str | None,
    min_confidence: float | None = None,
    min_support: int | None = None,
    max_listed_records: int = 1000,
    mining_backend: str = "auto",
    duckdb_mining_threshold: int = 100_000,
    rules: pd.DataFrame | None = None,
    is_release_input: bool | None = None,
) -> AuditResult:
    """Audit a release read back from its files against raw records already loaded (:func:`run_audit` without the
    reading; the in-job audit passes the run's own records, so a run reads its input once).

    Parameters
    ----------
    release
        :func:`read_release` of the release directory.
    records
        The raw records as :func:`pipeline.io.loading.load_records` returns them (quasi-identifiers and sensitive
        attributes of the release).
    raw_label
        How the raw table is named in the report (a path, or a description).
    input_sha256
        SHA-256 of the raw file (to say whether it is the release's input), or None when unknown.
    min_confidence, min_support
        The adversary's rule thresholds (default: the release's), as :func:`run_audit`.
    rules
        The strong rules of ``records`` at the release's threshold and ``min_support`` when already mined (the
        run's ``strong_rules``); mined here when None.
    is_release_input
        Whether ``records`` are the release's input, when the caller knows (the run that made the release);
        otherwise found from ``input_sha256`` and the home secret.

    Returns
    -------
    AuditResult
        As :func:`run_audit`.
    """
    manifest = release.manifest
    threshold = float(manifest["min_confidence"]) if min_confidence is None else float(min_confidence)
    # the release's own rule set: support >= its min_support (releases made before min_support existed: 1)
    support = int(manifest.get("min_support") or 1) if min_support is None else int(min_support)
    if rules is None:
        backend = resolve_mining_backend(
            mining_backend,
            len(records),
            duckdb_threshold=duckdb_mining_threshold,
            n_items=sum(int(records[a].nunique()) for a in release.sensitive_attributes),
        )
        rules = mine_strong_rules(
            records, release.sensitive_attributes, min_confidence=threshold, backend=backend, min_support=support
        )
    per_attribute = release.ell_by_attribute
    view = adversary_view(
        rules,
        sac_released=release.sac_released,
        attribute_table=release.attribute_table,
        id_table=release.id_table,
        attribute_clusters=release.attribute_clusters,
        ell_per_attribute=per_attribute if release.manifest.get("ell_per_attribute") else None,
    )
    if is_release_input is not None:
        raw_matches = is_release_input
    else:
        raw_matches = _is_release_input(release.path, manifest, input_sha256) if input_sha256 is not None else None
    try:
        metrics = release_metrics(release, rules, domain=domain_sizes(records, release.sensitive_attributes))
    except ValueError as error:  # the utility figures need every published set to hold ℓ values (AIL's formula)
        raise DamagedRelease(broken_diversity_message(release.path, error)) from None
    report = audit_report(
        release,
        rules,
        view,
        min_confidence=threshold,
        min_support=support,
        raw=AuditedRawTable(path=raw_label, sha256=input_sha256, is_release_input=raw_matches, n_records=len(records)),
        metrics=metrics,
        max_listed_records=max_listed_records,
    )
    return AuditResult(report=report, per_record=view)


def audit_report(
    release: PublishedRelease,
    rules: pd.DataFrame,
    view: pd.DataFrame,
    *,
    min_confidence: float,
    raw: AuditedRawTable,
    metrics: Mapping[str, object],
    max_listed_records: int = 1000,
    min_support: int | None = None,
) -> AuditReport:
    """The audit report of a release from the adversary's view of it (no adversary run here).

    Parameters
    ----------
    release
        :func:`read_release` of the release directory (the structure checks run on its files).
    rules
        The strong rules the adversary knows (index = rule number, as in ``view``).
    view
        The adversary's view of every released record (:func:`pipeline.core.adversary.adversary_view`, or
        :func:`pipeline.core.adversary.released_records_view` of the run's one pass on the candidate).
    min_confidence
        The threshold of ``rules``.
    min_support
        Their least support (default: the manifest's ``min_support``, 1 when it has none).
    raw
        The raw table the rules were mined from.
    metrics
        :func:`release_metrics` of the release (``rules`` included).
    max_listed_records
        At most this many release row ids above the bound are listed.

    Returns
    -------
    AuditReport
        PASS when no released record exceeds 1/ℓ (exact rational comparison) and the structure checks hold; its
        ``identity_risk`` (uniqueness and class sizes on the published quasi-identifiers, from the release's tables)
        does not change the verdict.

    Raises
    ------
    ValueError
        ``metrics`` does not match :class:`pipeline.release.reports.AuditMetrics` (names the key).
    """
    manifest = release.manifest
    ell = release.ell
    # the bound of a rule is 1/ℓ_j of its consequent's attribute (SPEC §6.7; 1/ℓ for every rule without ℓ_i)
    ells = release.ell_by_attribute
    required = rule_bounds(rules, view["rule"].to_numpy(np.int64), ell, ells)
    above = view[view["numerator"].to_numpy(np.int64) * required > view["denominator"].to_numpy(np.int64)]
    max_row = view.loc[view["probability"].idxmax()] if len(view) else None
    max_probability = str(Fraction(int(max_row["numerator"]), int(max_row["denominator"]))) if max_row is not None else "0"
    per_rule = []
    for index, rule in rules.iterrows():
        chosen = view[view["rule"] == index]
        per_rule.append(
            RuleExposure(
                antecedent=(str(rule["antecedent_attribute"]), str(rule["antecedent_value"])),
                consequent=(str(rule["consequent_attribute"]), str(rule["consequent_value"])),
                confidence=float(rule["support_both"] / rule["support_antecedent"]),
                n_records_most_exposed_by_rule=int(len(chosen)),
                max_probability=float(chosen["probability"].max()) if len(chosen) else 0.0,
            )
        )
    structure = _structure(release)
    exposed = view["probability"] > 0
    adversary = AdversaryFigures(
        min_confidence=float(min_confidence),
        min_support=int(manifest.get("min_support") or 1) if min_support is None else int(min_support),
        n_rules=len(rules),
        bound=1.0 / ell,
        n_released_records=len(view),
        max_probability=max_probability,
        max_probability_float=float(view["probability"].max()) if len(view) else 0.0,
        mean_probability_over_exposed=float(view.loc[exposed, "probability"].mean()) if exposed.any() else 0.0,
        n_records_exposed=int(exposed.sum()),
        n_records_above_bound=int(len(above)),
        n_records_certain=int(((view["numerator"] == view["denominator"]) & (view["numerator"] > 0)).sum()),
        histogram=disclosure_histogram(view["probability"].to_numpy()),
        release_row_ids_above_bound=[int(r) for r in above["row_id"].head(max_listed_records)],
        per_rule=per_rule,
    )
    risk = identity_risk([release.sac_released, release.attribute_table], release.quasi_identifiers)
    return assemble_report(release.path, manifest, adversary=adversary, structure=structure, raw=raw, metrics=metrics, risk=risk)


def assemble_report(
    directory: Path,
    manifest: Mapping,
    *,
    adversary: AdversaryFigures,
    structure: AuditStructure,
    raw: AuditedRawTable,
    metrics: Mapping[str, object],
    risk: Mapping[str, object],
) -> AuditReport:
    """The audit report from its figures: the verdict (PASS when no released record is above its bound and the
    structure checks hold), its reasons and the warning about a raw table that is not the release's input.

    Raises
    ------
    ValueError
        ``metrics`` or ``risk`` does not match its contract (names the key).
    """
    ell = int(manifest["ell"])
    recorded = manifest.get("ell_per_attribute") or {}
    ells = {a: int(recorded.get(a, ell)) for a in manifest["sensitive_attributes"]}
    reasons = []
    if adversary.n_records_above_bound:
        bound_text = f"1/{ell}" if len(set(ells.values())) <= 1 else "1/ℓ_j of the rule's consequent"
        reasons.append(
            f"{adversary.n_records_above_bound} released record(s) above the bound {bound_text} (max {adversary.max_probability})"
        )
    if not structure.passed:
        reasons.append("the release files break ℓ-diversity or the manifest's record counts")
    audited = AuditedRelease(
        release_id=manifest.get("release_id"),
        directory=str(directory),
        model=str(manifest["model"]),
        ell=ell,
        min_confidence=float(manifest["min_confidence"]),
        disclosure_override_used=bool(manifest.get("disclosure_override_used", False)),
        ell_per_attribute=ells if len(set(ells.values())) > 1 else None,
    )
    warnings: list[str] | None = None
    # rule thresholds above the defaults: the release bounds fewer rules than a default release (red team, session 38:
    # --min-support 1000 mined no rule on Adult, and the audit, mining at the manifest's support, passed it)
    default_support = default_min_support(ell)
    support = manifest.get("min_support")
    weaker = []
    audited_support = adversary.min_support if adversary.min_support is not None else support
    if support is not None and int(support) > default_support and int(audited_support) > default_support:
        weaker.append(f"min_support {int(support)} (default {default_support})")
    if float(manifest["min_confidence"]) > DEFAULT_MIN_CONFIDENCE and float(adversary.min_confidence) > DEFAULT_MIN_CONFIDENCE:
        weaker.append(f"min_confidence {float(manifest['min_confidence']):g} (default {DEFAULT_MIN_CONFIDENCE:g})")
    if weaker:
        warnings = [
            f"the release was made with {' and '.join(weaker)}: it bounds only the rules above those thresholds, and "
            f"this audit mined at min_support {audited_support} and min_confidence {float(adversary.min_confidence):g}; "
            "an adversary who knows the weaker rules is not measured (audit with "
            f"--min-confidence {DEFAULT_MIN_CONFIDENCE:g} --min-support {default_support} to measure them)"
        ]
    if raw.is_release_input is False:
        warnings = [
            *(warnings or []),
            "the raw table is not the release's input (SHA-256 differs): the rules and the metrics describe "
            "this table, not the one the release was made from",
        ]
    elif raw.is_release_input is None:  # no home secret found: the manifest's keyed input digest cannot be checked
        warnings = [
            *(warnings or []),
            "whether the raw table is the release's input is not known: the manifest names its input by a digest keyed "
            "with the home secret, and no secret.key was found beside the release or in $MSA_RELEASE_HOME; the rules "
            "and the metrics describe this table",
        ]
    return AuditReport(
        verdict="PASS" if not reasons else "FAIL",
        reasons=reasons,
        release=audited,
        raw=raw,
        adversary=adversary,
        structure=structure,
        metrics=validate_contract(AuditMetrics, dict(metrics), "the audit's metrics"),
        identity_risk=IdentityRisk.model_validate(risk),
        warnings=warnings,
    )
