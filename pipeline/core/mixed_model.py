"""The mixed publication model: SAC~ groups for strong-value holders, improved Rating for the rest,
and the assembly of the release tables.

Sources: P1 §4-§5 (Algorithms 7, 10, 11, 13, 19) and §4.3 (what is released); SPEC §1-§8.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from pipeline.core.columns import as_text, combine_codes, text_ranks
from pipeline.core.eligibility import eligibility_deletions
from pipeline.core.grouping import Grouping, generalize_group_quasi_identifiers, group_sac, permute_within_groups
from pipeline.core.hierarchies import Hierarchy
from pipeline.core.keyed import keyed_order, keyed_record_hashes
from pipeline.core.ordering import hash_first_order, packed_lexsort
from pipeline.core.rating import rating_tables
from pipeline.core.rules import mine_strong_rules
from pipeline.core.sac_split import SacIrSplit, cluster_sensitive_attributes, split_sac_ir
from pipeline.core.sensitivity import EllRequirement, group_size
from pipeline.core.strata import stratify_for_rating

__all__ = [
    "MixedModelResult",
    "ReleaseTables",
    "assemble_release_tables",
    "in_table_order",
    "keyed_table_order",
    "records_for_rating",
    "run_mixed_model",
    "validate_model_columns",
]

RESERVED_COLUMNS = ("row_id", "group_id")
#: Names the models' own working tables give their columns beside the configured ones (Rating's strata of
#: quasi-identifier tuples): a configured column of that name cannot be held beside them (red team, session 39:
#: ``stratum`` as a quasi-identifier failed deep in the run, with a traceback from ``plan``)
WORKING_COLUMNS = ("stratum",)


def validate_model_columns(columns: Sequence[str], quasi_identifiers: Sequence[str], sensitive_attributes: Sequence[str]) -> None:
    """Check a column configuration before any work is done.

    Raises
    ------
    ValueError
        Fewer than 2 sensitive attributes, a configured column absent from ``columns``, a
        column configured twice or as both quasi-identifier and sensitive attribute, or a
        column named like a release-contract column (``row_id``, ``group_id``) or a working column of the models
        (:data:`WORKING_COLUMNS`).
    """
    if len(sensitive_attributes) < 2:
        raise ValueError(
            f"the mixed model needs at least 2 sensitive attributes, got {list(sensitive_attributes)}; "
            "with one sensitive attribute use plain ℓ-diversity instead"
        )
    both = sorted(set(quasi_identifiers) & set(sensitive_attributes))
    if both:
        raise ValueError(f"column(s) {both} are configured both as quasi-identifier and as sensitive attribute")
    for kind, names in (("quasi-identifier", quasi_identifiers), ("sensitive attribute", sensitive_attributes)):
        duplicated = sorted({n for n in names if list(names).count(n) > 1})
        if duplicated:
            raise ValueError(f"{kind} column(s) {duplicated} are listed more than once")
    missing = [c for c in [*quasi_identifiers, *sensitive_attributes] if c not in columns]
    if missing:
        raise ValueError(f"configured column(s) {missing} are not in the input (columns: {list(columns)})")
    reserved = [c for c in [*quasi_identifiers, *sensitive_attributes] if c in RESERVED_COLUMNS]
    if reserved:
        raise ValueError(f"column name(s) {reserved} are reserved by the release contract; rename them in the input")
    working = [c for c in [*quasi_identifiers, *sensitive_attributes] if c in WORKING_COLUMNS]
    if working:
        raise ValueError(
            f"column name(s) {working} are used by the models' working tables (Rating's strata); rename them in the "
            "input (a CSV's header, or the column names option)"
        )


def keyed_table_order(records: pd.DataFrame, content_columns: Sequence[str], secret: bytes) -> np.ndarray:
    """The order in which the model consumes records ("table order" of SPEC §5.1 and §6).

    A keyed pseudo-random order of the records' content (``content_columns``: the configured
    quasi-identifiers and sensitive attributes; purpose ``"record-order"``), so the same records
    in any input order give the same release, and nothing published (seed, release) replays it.
    Records with equal content are interchangeable and keep their relative order.

    Parameters
    ----------
    records
        One row per record, holding ``content_columns``.
    content_columns
        Column names; never ``row_id`` or an input position.
    secret
        The home secret (at least 16 bytes).

    Returns
    -------
    numpy.ndarray
        int64 positions into ``records`` (a permutation).

    Raises
    ------
    KeyError
        A column is missing. ``ValueError``: the secret is shorter than 16 bytes.

    References
    ----------
    Issue 12 ("no order anywhere", "release series" (a)); Xiao & Tao, Anatomy (VLDB 2006),
    whose guarantee assumes that the link inside a bucket is uniformly random.
    """
    return keyed_order(records, content_columns, secret, "record-order")


def in_table_order(
    records: pd.DataFrame, parts: Sequence[np.ndarray], content_columns: Sequence[str], secret: bytes | None
) -> list[np.ndarray]:
    """Each array of row ids in ``parts`` re-ordered by the keyed content order of ``records``
    (:func:`keyed_table_order`, computed once): the "table order" in which Algorithm 11 consumes SAC and IR and
    Rating consumes its records. Unchanged (as int64 arrays) without a secret.

    Parameters
    ----------
    records
        ``row_id`` (int64) and ``content_columns``; every id of ``parts`` is one of its rows.
    parts
        Arrays of row ids (e.g. SAC and IR).
    content_columns
        The configured quasi-identifiers and sensitive attributes.
    secret
        The home secret, or None (``randomness: spec-reference``).

    Returns
    -------
    list of numpy.ndarray
        One int64 array per part, same ids, in the keyed order.
    """
    if secret is None:
        return [np.asarray(row_ids, dtype=np.int64) for row_ids in parts]
    rank = np.empty(len(records), dtype=np.int64)
    rank[keyed_table_order(records, list(content_columns), secret)] = np.arange(len(records))
    index = pd.Index(records["row_id"].to_numpy(np.int64))
    ordered = []
    for row_ids in parts:
        ids = np.asarray(row_ids, dtype=np.int64)
        ordered.append(ids[np.argsort(rank[index.get_indexer(ids)], kind="stable")])
    return ordered


def records_for_rating(
    records: pd.DataFrame,
    rating_row_ids: np.ndarray,
    quasi_identifiers: Sequence[str],
    sensitive_attributes: Sequence[str],
    *,
    ell: EllRequirement,
    residual_policy: str = "suppress",
    grouping: str = "p1",
    hierarchies: Mapping[str, Hierarchy] | None = None,
    secret: bytes | None = None,
    stratum_deletion_budget: float = 0.02,
) -> tuple[pd.DataFrame, np.ndarray, dict[str, Any]]:
    """Which records Rating bucketizes, in which quasi-identifier strata, and which are deleted.

    Parameters
    ----------
    records
        The input table: ``row_id`` (int64) and every configured column.
    rating_row_ids
        int64 ids of the records left for Rating (IR_left; every record for the Rating model),
        in table order.
    quasi_identifiers, sensitive_attributes
        Column names.
    ell
        ℓ >= 2, or ℓ_i per sensitive attribute (:mod:`pipeline.core.sensitivity`, SPEC §6.7).
    residual_policy
        ``"suppress"``: SPEC §6's residual placement and suppression (nothing deleted here);
        ``"delete"``: no certain cell, whole records are deleted until every value is
        ℓ-eligible (Anatomy).
    grouping
        With ``"qi_aware"`` and ``"delete"``, Rating runs inside quasi-identifier strata
        (:func:`pipeline.core.strata.stratify_for_rating` with ``hierarchies`` and
        ``stratum_deletion_budget``), so the members of every SID publish the same
        quasi-identifiers.
    secret
        The home secret (tie-break among deletable records); ``None``: table order.

    Returns
    -------
    (rating_records, deleted, counts)
        ``rating_records``: ``row_id`` (int64) in table order, plus ``stratum`` (int64) and one
        object column per quasi-identifier (the published labels) when stratified.
        ``deleted``: int64 ids deleted for eligibility. ``counts``: ``n_strata`` and
        ``n_generalized_attribute_table_cells`` when stratified, else empty.

    Raises
    ------
    ValueError
        Unknown ``residual_policy`` or ``grouping``; see the called functions.

    References
    ----------
    Xiao & Tao, Anatomy (VLDB 2006); Kifer (SIGMOD 2009); issue 12.
    """
    if residual_policy not in ("suppress", "delete"):
        raise ValueError(f"unknown residual_policy {residual_policy!r}; use 'delete' or 'suppress'")
    if grouping not in ("p1", "qi_aware"):
        raise ValueError(f"unknown grouping {grouping!r}; use 'p1' or 'qi_aware'")
    rating_row_ids = np.asarray(rating_row_ids, dtype=np.int64)
    if residual_policy == "suppress":
        return pd.DataFrame({"row_id": rating_row_ids}), np.zeros(0, np.int64), {}
    left = records.set_index("row_id", drop=False).loc[rating_row_ids].reset_index(drop=True)
    content = [*quasi_identifiers, *sensitive_attributes]
    if grouping == "qi_aware":
        strata = stratify_for_rating(
            left,
            quasi_identifiers,
            sensitive_attributes,
            ell=ell,
            hierarchies=hierarchies,
            secret=secret,
            content_columns=content,
            deletion_budget=stratum_deletion_budget,
        )
        # keep table order
        position = pd.Index(rating_row_ids).get_indexer(strata.labels["row_id"].to_numpy(np.int64))
        labels = strata.labels.iloc[np.argsort(position, kind="stable")].reset_index(drop=True)
        counts = {"n_strata": strata.n_strata, "n_generalized_attribute_table_cells": strata.n_generalized_cells}
        return labels, strata.deleted, counts
    deleted = eligibility_deletions(left, sensitive_attributes, ell=ell, secret=secret, content_columns=content)
    return pd.DataFrame({"row_id": rating_row_ids[~np.isin(rating_row_ids, deleted)]}), deleted, {}


@dataclass(frozen=True)
class MixedModelResult:
    """Every stage of the mixed model, with internal row ids (table order, never released).

    ``sac_permuted``: ``group_id``, ``row_id`` and the record's columns, sensitive attributes
    permuted per group and cluster. ``id_table`` / ``attribute_sids``: see
    :func:`pipeline.core.rating.rating_tables` (on ``IR_left``).
    """

    rules: pd.DataFrame
    split: SacIrSplit
    clusters: list[list[str]]
    grouping: Grouping
    sac_permuted: pd.DataFrame
    id_table: pd.DataFrame
    attribute_sids: pd.DataFrame
    rating_records: pd.DataFrame | None = None
    deleted_for_eligibility: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))


def run_mixed_model(
    records: pd.DataFrame,
    sensitive_attributes: Sequence[str],
    *,
    ell: EllRequirement,
    min_confidence: float,
    seed: int,
    rules: pd.DataFrame | None = None,
    secret: bytes | None = None,
    quasi_identifiers: Sequence[str] = (),
    grouping: str = "p1",
    residual_policy: str = "suppress",
    hierarchies: Mapping[str, Hierarchy] | None = None,
    stratum_deletion_budget: float = 0.02,
) -> MixedModelResult:
    """Run the whole mixed model on a table (the pure equivalent of the Dagster job).

    Parameters
    ----------
    records
        One row per record, in table order; column ``row_id`` (int64, unique) plus the
        quasi-identifiers and sensitive attributes (no missing values in the latter).
    sensitive_attributes
        At least 2, schema order.
    ell, min_confidence, seed
        ℓ >= 2 (or ℓ_i per sensitive attribute: SIDs of attribute i get ℓ_i values, SAC~ groups have
        L = max ℓ_i members, SPEC §6.7); threshold in (0, 1]; seed of the per-group permutation.
    rules
        Strong rules already mined on ``records`` (mined here when None).
    secret
        The home secret. ``None`` runs SPEC's reference algorithms in table order. With a
        secret the records are first put in a keyed order of their content
        (:func:`keyed_table_order`; the release then depends neither on the input row order nor
        on anything published), the per-group permutation is keyed, and improved Rating uses an
        independent keyed order and keyed random SID numbers per attribute
        (:func:`pipeline.core.rating.rating_tables`).
    quasi_identifiers
        With ``secret``: the quasi-identifier columns, part of a record's content.
    grouping
        ``"p1"`` (P1's Algorithm 11) or ``"qi_aware"`` (same-quasi-identifier partners first,
        :func:`pipeline.core.grouping.group_sac`); the generalization of the groups' published
        quasi-identifiers is done by :func:`assemble_release_tables`.
    residual_policy, hierarchies, stratum_deletion_budget
        See :func:`records_for_rating` (the default ``"suppress"`` is SPEC's reference; the
        Dagster job's default is ``"delete"`` with ``"qi_aware"``: Rating inside
        quasi-identifier strata, whose labels are ``MixedModelResult.rating_records``).

    Returns
    -------
    MixedModelResult

    Raises
    ------
    ValueError
        Invalid parameters or columns (see the stage functions).

    References
    ----------
    P1 Algorithms 7, 10, 11, 19; SPEC §2-§6.
    """
    if rules is None:
        rules = mine_strong_rules(records, sensitive_attributes, min_confidence=min_confidence)
    content = [*quasi_identifiers, *sensitive_attributes]
    if secret is not None:
        records = records.iloc[keyed_table_order(records, content, secret)].reset_index(drop=True)
    split = split_sac_ir(records, sensitive_attributes, rules)
    clusters = cluster_sensitive_attributes(sensitive_attributes, rules)
    if grouping not in ("p1", "qi_aware"):
        raise ValueError(f"unknown grouping {grouping!r}; use 'p1' or 'qi_aware'")
    groups = group_sac(
        records,
        sensitive_attributes,
        split.sac_row_ids,
        split.ir_row_ids,
        ell=group_size(ell),
        quasi_identifiers=list(quasi_identifiers) if grouping == "qi_aware" else None,
    )
    sac_permuted = permute_within_groups(records, groups.members, clusters, seed=seed, secret=secret)
    rating_records, deleted, _ = records_for_rating(
        records,
        np.asarray(groups.ir_left, dtype=np.int64),
        list(quasi_identifiers),
        sensitive_attributes,
        ell=ell,
        residual_policy=residual_policy,
        grouping=grouping,
        hierarchies=hierarchies,
        secret=secret,
        stratum_deletion_budget=stratum_deletion_budget,
    )
    indexed = records.set_index("row_id", drop=False)
    ir_left = indexed.loc[rating_records["row_id"].to_numpy(np.int64)].reset_index(drop=True)
    id_table, attribute_sids = rating_tables(
        ir_left,
        sensitive_attributes,
        ell=ell,
        secret=secret,
        content_columns=content,
        strata=rating_records["stratum"].to_numpy(np.int64) if "stratum" in rating_records.columns else None,
    )
    return MixedModelResult(
        rules,
        split,
        clusters,
        groups,
        sac_permuted,
        id_table,
        attribute_sids,
        rating_records if "stratum" in rating_records.columns else None,
        deleted,
    )


@dataclass(frozen=True)
class ReleaseTables:
    """The tables of a release (SPEC §8; release contract of the README) and the private row map.

    Attributes
    ----------
    sac_released
        ``row_id`` (int64), ``group_id`` (int64), quasi-identifiers, sensitive attributes.
    attribute_table
        ``row_id`` (int64), quasi-identifiers, one ``Int32`` SID column per sensitive
        attribute (``<NA>`` = suppressed cell).
    id_table
        ``attribute``, ``sid`` (int32), ``value``, ``count`` (int32).
    attribute_clusters
        ``cluster_id`` (int32, 1-based), ``attribute``.
    row_map
        PRIVATE, never released: ``source_row_id`` (internal id) -> ``row_id`` (release id).
    """

    sac_released: pd.DataFrame
    attribute_table: pd.DataFrame
    id_table: pd.DataFrame
    attribute_clusters: pd.DataFrame
    row_map: pd.DataFrame
    generalization: dict[str, int] = field(default_factory=lambda: {"n_generalized_groups": 0, "n_generalized_cells": 0})


def _tuple_ranks(frame: pd.DataFrame, columns: Sequence[str]) -> np.ndarray:
    """An int64 per row whose order is the order of the row's tuple of ``columns`` (compared
    column by column as text); equal tuples, equal numbers."""
    if not columns:
        return np.zeros(len(frame), dtype=np.int64)
    return combine_codes([text_ranks(frame[c]) for c in columns])


def assemble_release_tables(
    records: pd.DataFrame,
    quasi_identifiers: Sequence[str],
    sensitive_attributes: Sequence[str],
    *,
    sac_permuted: pd.DataFrame,
    attribute_sids: pd.DataFrame,
    id_table: pd.DataFrame,
    clusters: Sequence[Sequence[str]],
    secret: bytes | None = None,
    generalize: bool = False,
    hierarchies: Mapping[str, Hierarchy] | None = None,
    attribute_table_labels: pd.DataFrame | None = None,
) -> ReleaseTables:
    """Put the model's outputs in release form, with fresh row ids that carry no input order.

    Groups are ordered by their content (sorted member quasi-identifier tuples, then sorted
    original sensitive tuples, both independent of the seed; tuples compared value by value
    as text); rows inside a group by quasi-identifiers then released sensitive values, so the
    seed (a SAC record) is not recognisable by its position. Attribute-table rows are ordered
    by quasi-identifiers then SIDs (suppressed first). Release row ids are 1..n over SAC~ then
    the attribute table; group ids 1..g. Text columns keep their dtype (object or
    categorical). All steps are sorts and array look-ups (no per-row Python).

    Parameters
    ----------
    records
        The input table (``row_id`` + all configured columns) to take quasi-identifiers from.
    quasi_identifiers, sensitive_attributes
        Column names.
    sac_permuted, attribute_sids, id_table, clusters
        Outputs of :func:`run_mixed_model` (or of the Dagster assets).
    secret
        The home secret. With it, groups and attribute-table rows are ordered by a keyed hash
        of the same content keys (ties as above) instead of the content keys themselves, so row
        and group ids correlate neither with the input order nor with a sorted input (a file
        sorted by a quasi-identifier would otherwise give row ids in input order).
    generalize, hierarchies
        With ``generalize`` (the QI-aware grouping), the members of every SAC~ group get the
        same published quasi-identifiers: the lowest common ancestor in ``hierarchies``, else
        ``*`` (:func:`pipeline.core.grouping.generalize_group_quasi_identifiers`); the counts are
        in ``ReleaseTables.generalization``.
    attribute_table_labels
        Optional: the published quasi-identifiers of the attribute-table records, one row per
        record (``row_id`` and every quasi-identifier; :class:`pipeline.core.strata.QuasiIdentifierStrata`
        ``labels``, with a ``stratum`` column); they replace the records' values in the
        attribute table, and ``generalization`` gains ``n_strata`` and
        ``n_generalized_attribute_table_cells``.

    Returns
    -------
    ReleaseTables
    """
    quasi_identifier_columns = list(quasi_identifiers)
    sensitive_attribute_columns = list(sensitive_attributes)
    sac = sac_permuted[["group_id", "row_id", *quasi_identifier_columns, *sensitive_attribute_columns]].reset_index(drop=True)
    generalization = {"n_generalized_groups": 0, "n_generalized_cells": 0}
    record_position = pd.Index(records["row_id"].to_numpy(np.int64))
    if len(sac):
        sizes = sac.groupby("group_id", sort=False, observed=True).size()
        ell = int(sizes.iloc[0])
        if (sizes != ell).any():
            raise ValueError("every SAC~ group must have the same number of records (ℓ)")
        sac = sac.sort_values("group_id", kind="stable").reset_index(drop=True)
        n_groups = len(sac) // ell
        member_key = _tuple_ranks(sac, quasi_identifier_columns).reshape(n_groups, ell)
        original = records.iloc[record_position.get_indexer(sac["row_id"].to_numpy(np.int64))]
        original_key = _tuple_ranks(original, sensitive_attribute_columns).reshape(n_groups, ell)
        del original  # the stages' frames are freed as soon as they are used (a 1M-record shard's peak)
        # group order: sorted member QI tuples, then sorted original sensitive tuples (both
        # independent of the seed), then the group's internal number (its position: the sorts are stable)
        group_keys = np.concatenate([np.sort(member_key, axis=1), np.sort(original_key, axis=1)], axis=1)
        if secret is None:
            order = packed_lexsort(list(group_keys.T))  # np.lexsort([internal, *group_keys.T[::-1]])
        else:
            key_frame = pd.DataFrame(group_keys, columns=[f"k{j}" for j in range(group_keys.shape[1])])
            hashed = keyed_record_hashes(key_frame, list(key_frame.columns), secret, "group-order")
            order = hash_first_order(hashed, list(group_keys.T))  # np.lexsort([internal, *group_keys.T[::-1], hashed])
        new_group = np.empty(n_groups, dtype=np.int64)
        new_group[order] = np.arange(1, n_groups + 1)
        sac["group_id"] = np.repeat(new_group, ell)
        if generalize:
            sac, generalization = generalize_group_quasi_identifiers(sac, quasi_identifier_columns, hierarchies)
        # rows inside a group: quasi-identifiers, then released sensitive values (as text)
        row_keys = [
            sac["group_id"].to_numpy(),
            *(text_ranks(sac[c]) for c in [*quasi_identifier_columns, *sensitive_attribute_columns]),
        ]
        row_order = packed_lexsort(row_keys)
        del row_keys, member_key, original_key, group_keys
        sac = sac.iloc[row_order].reset_index(drop=True)
        del row_order
    n_sac = len(sac)
    sac_row_ids = np.arange(1, n_sac + 1, dtype=np.int64)

    at_positions = record_position.get_indexer(attribute_sids["row_id"].to_numpy(np.int64))
    if (at_positions < 0).any():
        raise ValueError("an attribute-table row id is not in the records table")
    at = records.iloc[at_positions][["row_id", *quasi_identifier_columns]].reset_index(drop=True)
    if attribute_table_labels is not None:
        labels = attribute_table_labels.set_index("row_id")
        label_rows = labels.index.get_indexer(at["row_id"].to_numpy(np.int64))
        if (label_rows < 0).any():
            raise ValueError("an attribute-table record has no published quasi-identifier labels")
        changed = 0
        for column in quasi_identifier_columns:
            published = labels[column].to_numpy(dtype=object)[label_rows]
            changed += int((published != as_text(at[column]).to_numpy(dtype=object)).sum())
            at[column] = pd.Series(published, dtype=object)
        n_strata = int(labels["stratum"].nunique()) if "stratum" in labels.columns else 0
        generalization = {**generalization, "n_strata": n_strata, "n_generalized_attribute_table_cells": changed}
    for attribute in sensitive_attribute_columns:
        at[attribute] = attribute_sids[attribute].reset_index(drop=True).astype("Int32")
    at_keys = [
        *(text_ranks(at[c]) for c in quasi_identifier_columns),
        *(at[a].fillna(-1).to_numpy(np.int64) for a in sensitive_attribute_columns),
    ]
    if secret is not None and len(at):
        hashed = keyed_record_hashes(
            at, [*quasi_identifier_columns, *sensitive_attribute_columns], secret, "attribute-table-order"
        )
        at_order = hash_first_order(hashed, at_keys)  # np.lexsort([*at_keys[::-1], hashed])
    else:
        at_order = packed_lexsort(at_keys) if len(at) else np.zeros(0, dtype=np.int64)
    del at_keys
    at = at.iloc[at_order].reset_index(drop=True) if len(at) else at
    del at_order
    at_row_ids = np.arange(n_sac + 1, n_sac + len(at) + 1, dtype=np.int64)

    row_map = pd.DataFrame(
        {
            "source_row_id": np.concatenate([sac["row_id"].to_numpy(np.int64), at["row_id"].to_numpy(np.int64)]),
            "row_id": np.concatenate([sac_row_ids, at_row_ids]),
        }
    )
    # sac and at are this function's own frames: their row ids are replaced in place, then the columns taken in
    # release order (one copy each, the working frame freed at once)
    sac["row_id"] = sac_row_ids
    sac_released = sac[["row_id", "group_id", *quasi_identifier_columns, *sensitive_attribute_columns]]
    del sac
    at["row_id"] = at_row_ids
    attribute_table = at[["row_id", *quasi_identifier_columns, *sensitive_attribute_columns]]
    del at
    attribute_table = attribute_table.astype({a: "Int32" for a in sensitive_attribute_columns}, copy=False)
    clusters_frame = pd.DataFrame(
        [(k + 1, attribute) for k, cluster in enumerate(clusters) for attribute in cluster],
        columns=["cluster_id", "attribute"],
    ).astype({"cluster_id": "int32", "attribute": object})
    return ReleaseTables(
        sac_released=sac_released,
        attribute_table=attribute_table,
        id_table=id_table.reset_index(drop=True),
        attribute_clusters=clusters_frame,
        row_map=row_map,
        generalization=generalization,
    )
