"""Derived frames that state the privacy claims of SPEC §9 row by row, for the release gates.

Each function returns a small frame with one row per group / SID / record / rule and boolean or
numeric columns that a Great Expectations suite then checks (``checks/suites.py``). Nothing here
returns raw values: only ids, counts and flags.

Sources: P1 Lemmas 12 and 22; SPEC §8-§10; for the (k, ℓ)-anonymity model, SPEC §14.1.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any
from fractions import Fraction

import numpy as np
import pandas as pd

from pipeline.core.adversary import rule_bounds
from pipeline.core.columns import as_text, combine_codes, sorted_text_codes, distinct_per_group, joint_text_codes
from pipeline.core.hierarchies import Hierarchy

__all__ = [
    "accounting_summary",
    "confidence_summary",
    "disclosure_summary",
    "group_diversity_summary",
    "kl_accounting_summary",
    "kl_diversity_summary",
    "kl_equivalence_class_summary",
    "disclosure_by_rule",
    "sid_diversity_by_attribute",
    "sid_diversity_per_attribute",
    "sid_diversity_summary",
    "strong_values_in_sids",
    "UTILITY_KEYS",
    "suppressed_cells_per_attribute",
    "utility_figures",
    "utility_summary",
]

#: Keys of the utility figures (:func:`utility_figures`), as the gate reports them and the manifest's ``utility`` holds
#: them (with ``passed``).
UTILITY_KEYS = (
    "records_eligible",
    "records_deleted",
    "deleted_share",
    "suppressed_cells",
    "attribute_cells",
    "suppressed_share",
    "max_deleted_share",
    "max_suppressed_share",
)


def group_diversity_summary(
    sac_released: pd.DataFrame,
    original_sensitive: pd.DataFrame,
    sensitive_attributes: Sequence[str],
    clusters: Sequence[Sequence[str]],
) -> pd.DataFrame:
    """One row per SAC~ group: size, distinct values per attribute, cluster tuples preserved.

    Parameters
    ----------
    sac_released
        ``row_id``, ``group_id`` and the (permuted) sensitive attributes.
    original_sensitive
        ``row_id`` and the sensitive attributes of the same records before the permutation
        (PRIVATE: from the raw table through the row map).
    sensitive_attributes, clusters
        Attribute names and ``Cluster_Set``.

    Returns
    -------
    pandas.DataFrame
        ``group_id``, ``n_rows`` (int64), ``min_distinct_values`` (int64, minimum over the
        sensitive attributes of the distinct values in the group) and
        ``cluster_tuples_preserved`` (bool: for every cluster, the multiset of cluster tuples
        equals the original members' one).

    References
    ----------
    SPEC §9.1 (P1 §4: SAC~ is ℓ-diverse on every attribute).
    """
    if len(sac_released) == 0:
        return pd.DataFrame(
            {
                "group_id": pd.Series(dtype="int64"),
                "n_rows": pd.Series(dtype="int64"),
                "min_distinct_values": pd.Series(dtype="int64"),
                "cluster_tuples_preserved": pd.Series(dtype=bool),
            }
        )
    n = len(sac_released)
    group_index, group_ids = pd.factorize(sac_released["group_id"].to_numpy(np.int64), sort=True)
    n_groups = len(group_ids)
    position = pd.Index(original_sensitive["row_id"].to_numpy(np.int64)).get_indexer(sac_released["row_id"].to_numpy(np.int64))
    found = position >= 0
    released_codes, original_codes = {}, {}
    for attribute in sensitive_attributes:
        original_column = original_sensitive[attribute].iloc[np.where(found, position, 0)].reset_index(drop=True)
        released_codes[attribute], original_codes[attribute] = joint_text_codes(
            sac_released[attribute].reset_index(drop=True), original_column
        )
        original_codes[attribute] = np.where(found, original_codes[attribute], -1)
    summary = pd.DataFrame({"group_id": group_ids, "n_rows": np.bincount(group_index, minlength=n_groups)})
    distinct = np.full(n_groups, np.iinfo(np.int64).max, dtype=np.int64)
    for attribute in sensitive_attributes:
        distinct = np.minimum(distinct, distinct_per_group(group_index, released_codes[attribute], n_groups))
    summary["min_distinct_values"] = distinct if sensitive_attributes else 0
    preserved = np.ones(n_groups, dtype=bool)
    for cluster in clusters:
        released_tuple = combine_codes([released_codes[a] for a in cluster])
        original_tuple = combine_codes([original_codes[a] for a in cluster])
        released_sorted = released_tuple[np.lexsort((released_tuple, group_index))]
        original_sorted = original_tuple[np.lexsort((original_tuple, group_index))]
        mismatch = released_sorted != original_sorted
        groups_sorted = np.sort(group_index)
        preserved &= np.bincount(groups_sorted, weights=mismatch, minlength=n_groups) == 0
    preserved &= np.bincount(group_index, weights=~found, minlength=n_groups) == 0 if n else preserved
    summary["cluster_tuples_preserved"] = preserved.astype(bool)
    return summary.astype({"group_id": "int64", "n_rows": "int64", "min_distinct_values": "int64"})


def sid_diversity_summary(
    attribute_table: pd.DataFrame, id_table: pd.DataFrame, sensitive_attributes: Sequence[str]
) -> pd.DataFrame:
    """One row per (attribute, SID): distinct values, value occurrences, records mapped to it.

    Returns
    -------
    pandas.DataFrame
        ``attribute``, ``sid``, ``n_distinct_values``, ``n_value_occurrences`` (sum of
        ``count``), ``n_records`` (attribute-table rows pointing to the SID), ``max_value_share``
        (the occurrences of the SID's most frequent value, summed over every ID-table row of that value, / all its
        occurrences, float; Def. 2 requires <= 1/ℓ) and
        ``records_match_occurrences`` (bool: each value occurrence stands for one record).

    References
    ----------
    P1 Definition 2 and §5; SPEC §6.6 and §9.3.
    """
    # vectorised group-by over (attribute, sid) on integer keys: attributes ranked by name (the output's order),
    # values coded once, pairs counted with numpy; no pandas merge (seconds per million SIDs)
    attribute_index, attribute_names = pd.factorize(id_table["attribute"])
    names = [str(name) for name in attribute_names]
    names += [str(a) for a in sensitive_attributes if str(a) not in names]
    rank_of_name = np.argsort(np.argsort(np.asarray(names, dtype=object), kind="stable"), kind="stable").astype(np.int64)
    sid = id_table["sid"].to_numpy(np.int64)
    value_index = pd.factorize(id_table["value"])[0].astype(np.int64)
    count = id_table["count"].to_numpy(np.int64)
    pointing_attribute, pointing_sid = [], []
    for attribute in sensitive_attributes:
        column = attribute_table[attribute]
        present = column.notna().to_numpy()
        pointing_sid.append(column[present].to_numpy(np.int64))
        pointing_attribute.append(np.full(int(present.sum()), names.index(str(attribute)), dtype=np.int64))
    pointing_sid_all = np.concatenate(pointing_sid) if pointing_sid else np.zeros(0, np.int64)
    pointing_attribute_all = np.concatenate(pointing_attribute) if pointing_attribute else np.zeros(0, np.int64)
    sid_radix = max(int(sid.max(initial=0)), int(pointing_sid_all.max(initial=0))) + 1
    id_key = rank_of_name[attribute_index.astype(np.int64)] * sid_radix + sid if len(sid) else np.zeros(0, np.int64)
    pointing_key = rank_of_name[pointing_attribute_all] * sid_radix + pointing_sid_all
    # keys address a dense space (attributes × SIDs): counts by bincount, no hashing
    space = len(names) * sid_radix
    occurrences_all = np.bincount(id_key, weights=count, minlength=space)
    records_all = np.bincount(pointing_key, minlength=space)
    present = (np.bincount(id_key, minlength=space) > 0) | (records_all > 0)
    keys = np.flatnonzero(present).astype(np.int64)
    n_keys = len(keys)
    occurrences = occurrences_all[keys].astype(np.int64)
    n_records = records_all[keys].astype(np.int64)
    # distinct values per key, and each value's occurrences: runs of the sorted (key, value) pairs. A value's share
    # sums its count over every ID-table row that lists it (a value listed twice with count 1 is 2 occurrences of it,
    # not two values of 1: Def. 2 bounds the value, not the row)
    value_radix = int(value_index.max(initial=0)) + 1
    pair_keys = id_key * value_radix + value_index
    order = np.argsort(pair_keys, kind="stable")
    pairs = pair_keys[order]
    first = np.ones(len(pairs), dtype=bool)
    first[1:] = pairs[1:] != pairs[:-1]
    starts = np.flatnonzero(first)
    pair_key_of_run = pairs[starts] // value_radix
    n_distinct = np.bincount(pair_key_of_run, minlength=space)[keys].astype(np.int64)
    max_all = np.zeros(space, dtype=np.int64)
    if len(starts):
        np.maximum.at(max_all, pair_key_of_run, np.add.reduceat(count[order], starts))
    max_count = max_all[keys]
    name_of_rank = np.empty(len(names), dtype=object)
    name_of_rank[rank_of_name] = np.asarray(names, dtype=object)
    return pd.DataFrame(
        {
            "attribute": name_of_rank[keys // sid_radix] if n_keys else np.zeros(0, dtype=object),
            "sid": keys % sid_radix,
            "n_distinct_values": n_distinct,
            "n_value_occurrences": occurrences,
            "n_records": n_records,
            "max_value_share": np.where(occurrences > 0, max_count / np.maximum(occurrences, 1), 1.0),
            "records_match_occurrences": n_records == occurrences,
        }
    )


def strong_values_in_sids(id_table: pd.DataFrame, strong_values: dict[str, set[str]], s_max: str | None) -> pd.DataFrame:
    """One row per SID of an attribute other than ``S_max`` with its number of strong values.

    Returns
    -------
    pandas.DataFrame
        ``attribute``, ``sid``, ``n_strong_values`` (int64; must be 0: no probability tilt).

    References
    ----------
    SPEC §9.4 (P1 §4.3: the only strong values left in IR belong to ``S_max``).
    """
    others = id_table[id_table["attribute"] != s_max]
    strong = np.zeros(len(others), dtype=bool)
    attributes = others["attribute"].to_numpy()
    value_text = as_text(others["value"]).to_numpy(dtype=object)  # one pointer per row, whatever the value's length
    for attribute, values in strong_values.items():
        if values:
            rows = attributes == attribute
            strong[rows] = np.isin(value_text[rows], sorted(values))
    frame = others[["attribute", "sid"]].assign(n_strong_values=strong.astype("int64"))
    return frame.groupby(["attribute", "sid"], as_index=False, observed=True)["n_strong_values"].sum()


def sid_diversity_per_attribute(summary: pd.DataFrame, ell_per_attribute: Mapping[str, int]) -> pd.DataFrame:
    """:func:`sid_diversity_summary` checked against each attribute's own ℓ_i (SPEC §6.7).

    Parameters
    ----------
    summary
        Output of :func:`sid_diversity_summary`.
    ell_per_attribute
        Sensitive attribute -> ℓ_i >= 2 (every attribute of ``summary``).

    Returns
    -------
    pandas.DataFrame
        ``summary`` plus ``ell_required`` (int64, ℓ_i of the row's attribute) and ``meets_ell_required`` (bool:
        ``n_distinct_values >= ℓ_i`` and ``max_value_share · ℓ_i <= 1``).

    Raises
    ------
    KeyError
        An attribute of ``summary`` without ℓ_i.
    """
    required = np.asarray([int(ell_per_attribute[str(a)]) for a in summary["attribute"]], dtype=np.int64)
    meets = (summary["n_distinct_values"].to_numpy(np.int64) >= required) & (
        summary["max_value_share"].to_numpy(np.float64) * required <= 1.0 + 1e-12
    )
    return summary.assign(ell_required=required, meets_ell_required=meets)


def sid_diversity_by_attribute(
    summary: pd.DataFrame, attribute_table: pd.DataFrame, ell_per_attribute: Mapping[str, int]
) -> dict[str, dict[str, Any]]:
    """Per sensitive attribute (the gate's and report's rows): ``ell_required``, ``n_sids``,
    ``min_distinct_values_observed``, ``max_value_share`` (float), ``n_sids_below_ell``, ``n_suppressed_cells``.

    Parameters
    ----------
    summary
        Output of :func:`sid_diversity_per_attribute`.
    attribute_table
        The candidate attribute table (one SID column per attribute, ``<NA>`` = suppressed).
    ell_per_attribute
        Sensitive attribute -> ℓ_i, in schema order (the result's order).
    """
    result: dict[str, dict[str, Any]] = {}
    attributes = summary["attribute"].astype(str)
    for attribute, ell in ell_per_attribute.items():
        rows = summary[(attributes == attribute).to_numpy()]
        result[attribute] = {
            "ell_required": int(ell),
            "n_sids": len(rows),
            "min_distinct_values_observed": int(rows["n_distinct_values"].min()) if len(rows) else 0,
            "max_value_share": float(rows["max_value_share"].max()) if len(rows) else 0.0,
            "n_sids_below_ell": int((~rows["meets_ell_required"]).sum()),
            "n_suppressed_cells": int(attribute_table[attribute].isna().sum()) if attribute in attribute_table else 0,
        }
    return result


def disclosure_summary(
    per_record: pd.DataFrame, *, ell: int, rules: pd.DataFrame | None = None, ell_per_attribute: Mapping[str, int] | None = None
) -> pd.DataFrame:
    """Per-record disclosure with an exact ``within_bound`` flag (probability <= 1/ℓ).

    Parameters
    ----------
    per_record
        Output of :func:`pipeline.core.adversary.per_record_disclosure` (``rule``: index into ``rules``).
    ell
        ℓ: the bound 1/ℓ of every rule.
    rules, ell_per_attribute
        Optional, together (SPEC §6.7): the strong rules (``consequent_attribute``) and ℓ_j per sensitive attribute;
        the bound of a rule is then 1/ℓ_j of its consequent's attribute (the adversary infers the consequent's value).

    Returns
    -------
    pandas.DataFrame
        ``per_record`` plus ``within_bound`` (bool, ``numerator·ℓ <= denominator``, exact), and with
        ``ell_per_attribute`` ``ell_required`` (int64, ℓ_j of the record's rule).

    References
    ----------
    P1 Lemma 12; SPEC §9.2, §10 and §6.7.
    """
    if rules is None or ell_per_attribute is None:
        return per_record.assign(within_bound=per_record["numerator"] * ell <= per_record["denominator"])
    required = rule_bounds(rules, per_record["rule"].to_numpy(np.int64), ell, ell_per_attribute)
    return per_record.assign(
        ell_required=required,
        within_bound=per_record["numerator"].to_numpy(np.int64) * required <= per_record["denominator"].to_numpy(np.int64),
    )


def disclosure_by_rule(summary: pd.DataFrame, rules: pd.DataFrame) -> list[dict[str, Any]]:
    """Per strong rule held by a released record (SPEC §6.7): its consequent's attribute, its bound 1/ℓ_j and the
    largest disclosure probability observed among the records whose most likely rule it is.

    Parameters
    ----------
    summary
        Output of :func:`disclosure_summary` with ``ell_per_attribute`` (``rule``, ``probability``, ``ell_required``,
        ``within_bound``).
    rules
        The strong rules (``consequent_attribute``; index = rule number).

    Returns
    -------
    list of dict
        ``rule`` (int), ``consequent_attribute`` (str), ``bound`` (float), ``max_probability`` (float),
        ``n_records`` (int), ``n_records_above_bound`` (int); ordered by rule number. Attribute names and numbers
        only, never a value.
    """
    rows = []
    for rule, part in summary.groupby("rule", sort=True):
        ell = int(part["ell_required"].iloc[0])
        rows.append(
            {
                "rule": int(rule),
                "consequent_attribute": str(rules.loc[int(rule), "consequent_attribute"]),
                "bound": 1.0 / ell,
                "max_probability": float(part["probability"].max()),
                "n_records": len(part),
                "n_records_above_bound": int((~part["within_bound"]).sum()),
            }
        )
    return rows


def confidence_summary(recovered: pd.DataFrame) -> pd.DataFrame:
    """One row per strong rule: raw vs recovered confidence and the deviation.

    Parameters
    ----------
    recovered
        Output of :func:`pipeline.core.adversary.recover_rule_confidences` (with the raw
        ``support_antecedent`` and ``support_both`` counts).

    Returns
    -------
    pandas.DataFrame
        ``rule`` (int64), ``raw_confidence``, ``released_confidence``, ``deviation`` (float64,
        absolute difference; 1.0 when nothing of the antecedent was released) and ``exact``
        (bool: the recovered supports are integers whose ratio equals the raw ratio exactly).

    References
    ----------
    P1 Lemma 22; SPEC §8.
    """
    raw = recovered["support_both"] / recovered["support_antecedent"]
    released = recovered["released_confidence"]
    exact = []
    for row in recovered.itertuples(index=False):
        a, b = row.released_support_antecedent, row.released_support_both
        if a > 0 and float(a).is_integer() and float(b).is_integer():
            exact.append(Fraction(int(b), int(a)) == Fraction(int(row.support_both), int(row.support_antecedent)))
        else:
            exact.append(False)
    return pd.DataFrame(
        {
            "rule": np.arange(len(recovered), dtype=np.int64),
            "raw_confidence": raw.to_numpy(dtype=float),
            "released_confidence": released.to_numpy(dtype=float),
            "deviation": (released - raw).abs().fillna(1.0).to_numpy(dtype=float),
            "exact": np.asarray(exact, dtype=bool),
        }
    )


def accounting_summary(
    input_row_ids: Sequence[int],
    *,
    sac_row_ids: Sequence[int],
    attribute_table_row_ids: Sequence[int],
    deleted_row_ids: Sequence[int],
) -> pd.DataFrame:
    """One row per input record (after the missing-value policy) with the number of places it is in.

    Parameters
    ----------
    input_row_ids
        Internal ids of all records that entered the model.
    sac_row_ids, attribute_table_row_ids, deleted_row_ids
        Internal ids published in SAC~, published in the attribute table, and deleted.

    Returns
    -------
    pandas.DataFrame
        ``row_id`` and ``n_places`` (int64; must be exactly 1), plus one extra row per id that
        appears in an output but not in the input (``n_places`` = -1 marks it).

    References
    ----------
    SPEC §9.5.
    """
    placed = pd.Series(
        np.concatenate(
            [
                np.asarray(sac_row_ids, dtype=np.int64),
                np.asarray(attribute_table_row_ids, dtype=np.int64),
                np.asarray(deleted_row_ids, dtype=np.int64),
            ]
        )
    ).value_counts()
    inputs = pd.Index(np.asarray(input_row_ids, dtype=np.int64))
    counts = placed.reindex(inputs, fill_value=0)
    unknown = placed.index.difference(inputs)
    frame = pd.DataFrame({"row_id": inputs.to_numpy(), "n_places": counts.to_numpy(dtype=np.int64)})
    if len(unknown):
        frame = pd.concat([frame, pd.DataFrame({"row_id": unknown.to_numpy(), "n_places": -1})], ignore_index=True)
    return frame


# --------------------------------------------------------------------------- (k, ℓ) model


def kl_equivalence_class_summary(
    kl_released: pd.DataFrame,
    quasi_identifiers: Sequence[str],
    *,
    original_quasi_identifiers: pd.DataFrame,
    hierarchies: Mapping[str, Hierarchy],
) -> pd.DataFrame:
    """One row per equivalence class (``cluster_id``) of a (k, ℓ) release: its size, the number
    of distinct generalised quasi-identifier tuples it shows, and whether every published label
    truly generalises the member's own value.

    Parameters
    ----------
    kl_released
        The candidate table: ``row_id``, ``cluster_id`` and the generalised quasi-identifier
        columns (text).
    quasi_identifiers
        Column names.
    original_quasi_identifiers
        PRIVATE: ``row_id`` (release row id, through the row map) and the members' raw
        quasi-identifier values (text); a released row missing here counts as not truthful.
    hierarchies
        Quasi-identifier -> hierarchy the release was generalised along.

    Returns
    -------
    pandas.DataFrame
        ``cluster_id`` (int64), ``n_rows`` (int64), ``n_quasi_identifier_tuples`` (int64: distinct
        generalised tuples among the class's rows; must be 1) and ``generalization_truthful``
        (bool: for every row and quasi-identifier, the published label is the raw value or one
        of its ancestors in the hierarchy). Empty input gives an empty frame with these columns.

    Raises
    ------
    KeyError
        A quasi-identifier without hierarchy, or a column missing.

    References
    ----------
    SPEC §14.1 (P2: a cluster's records share one generalised tuple, the per-attribute lowest
    common ancestor; k-anonymity requires at least ``k`` records per cluster).
    """
    quasi_identifiers = list(quasi_identifiers)
    columns = {
        "cluster_id": pd.Series(dtype="int64"),
        "n_rows": pd.Series(dtype="int64"),
        "n_quasi_identifier_tuples": pd.Series(dtype="int64"),
        "generalization_truthful": pd.Series(dtype=bool),
    }
    if len(kl_released) == 0:
        return pd.DataFrame(columns)
    released = kl_released[["row_id", "cluster_id", *quasi_identifiers]].astype({c: str for c in quasi_identifiers})
    original = released[["row_id"]].merge(
        original_quasi_identifiers[["row_id", *quasi_identifiers]].astype({c: str for c in quasi_identifiers}),
        on="row_id",
        how="left",
    )
    truthful = original[quasi_identifiers[0]].notna().to_numpy() if quasi_identifiers else np.ones(len(released), bool)
    for attribute in quasi_identifiers:
        hierarchy = hierarchies[attribute]
        ancestors = {
            base: {hierarchy.label(level, int(hierarchy.codes[code, level])) for level in range(hierarchy.height + 1)}
            for code, base in enumerate(hierarchy.base_values)
        }
        # each distinct (label, raw value) pair is looked up once (a missing raw value has no ancestor)
        label_codes, labels = pd.factorize(released[attribute])
        value_codes, values = pd.factorize(original[attribute])
        _, first, pair = np.unique(combine_codes([label_codes, value_codes]), return_index=True, return_inverse=True)
        pair_truthful = np.array(
            [value_codes[row] >= 0 and labels[label_codes[row]] in ancestors.get(values[value_codes[row]], ()) for row in first],
            dtype=bool,
        )
        truthful &= pair_truthful[pair.reshape(-1)]
    # one integer per distinct generalised tuple (issue 18: joining each row's labels into one text took about 0.2 s on
    # Adult; codes also keep apart tuples whose joined texts would coincide)
    tuples = (
        combine_codes([pd.factorize(released[c])[0] for c in quasi_identifiers])
        if quasi_identifiers
        else np.zeros(len(released), dtype=np.int64)
    )
    frame = pd.DataFrame({"cluster_id": released["cluster_id"].to_numpy(), "tuple": tuples, "truthful": truthful})
    grouped = frame.groupby("cluster_id", sort=True, observed=True)
    summary = pd.DataFrame(
        {
            "n_rows": grouped.size(),
            "n_quasi_identifier_tuples": grouped["tuple"].nunique(),
            "generalization_truthful": grouped["truthful"].all(),
        }
    )
    return summary.reset_index().astype(
        {"cluster_id": "int64", "n_rows": "int64", "n_quasi_identifier_tuples": "int64", "generalization_truthful": bool}
    )


def kl_diversity_summary(kl_released: pd.DataFrame, sensitive_attributes: Sequence[str], *, ell: int) -> pd.DataFrame:
    """One row per equivalence class (``cluster_id``) of a (k, ℓ) release with its ``Diverse``
    recomputed from the released sensitive values alone.

    Parameters
    ----------
    kl_released
        ``cluster_id`` and the sensitive attribute columns (published unchanged).
    sensitive_attributes
        Column names.
    ell
        ℓ required.

    Returns
    -------
    pandas.DataFrame
        ``cluster_id`` (int64), ``n_rows`` (int64), ``n_distinct_sensitive_tuples`` (int64),
        ``min_distinct_values`` (int64: fewest distinct values over the sensitive attributes, an
        upper bound of ``Diverse``), ``diverse_lower_bound`` (int64: ``Diverse`` exactly up to
        ``DIVERSE_EXACT_LIMIT`` distinct tuples, else a certified greedy lower bound) and
        ``diverse_at_least_ell`` (bool: ``Diverse ≥ ℓ`` proven by a greedy set of ℓ pairwise
        totally different tuples, or by the exact search on small classes; ``False`` when
        neither proves it, which is the safe answer).

    References
    ----------
    SPEC §14.1 and §15 #27 (``Diverse`` = largest set of pairwise totally different tuples).
    """
    # the (k, ℓ) package (its model and kernels): imported by the (k, ℓ) gate only, not by every process that verifies
    # a mixed or sharded release
    from pipeline.core.kl_anonymity.diverse import tuples_diverse, tuples_diverse_at_least

    attributes = list(sensitive_attributes)
    if len(kl_released) == 0:
        return pd.DataFrame(
            {
                name: pd.Series(dtype="int64")
                for name in ("cluster_id", "n_rows", "n_distinct_sensitive_tuples", "min_distinct_values", "diverse_lower_bound")
            }
            | {"diverse_at_least_ell": pd.Series(dtype=bool)}
        )
    codes = np.column_stack([sorted_text_codes(kl_released[a])[0] for a in attributes]).astype(np.int64)
    classes, class_index = np.unique(kl_released["cluster_id"].to_numpy(np.int64), return_inverse=True)
    class_index = class_index.reshape(-1).astype(np.int64)
    n_classes = len(classes)
    n_rows = np.bincount(class_index, minlength=n_classes).astype(np.int64)
    # the released sensitive tuples, in lexicographic order, and each row's rank among them (as the (k, ℓ) kernels
    # take them: :attr:`pipeline.core.kl_anonymity.table.EncodedTable.sensitive_tuples`)
    tuples, tuple_id = np.unique(codes, axis=0, return_inverse=True)
    tuples, tuple_id = tuples.astype(np.int64), tuple_id.reshape(-1).astype(np.int64)
    n_distinct = distinct_per_group(class_index, tuple_id, n_classes)
    min_distinct = np.min(
        np.column_stack([distinct_per_group(class_index, codes[:, j], n_classes) for j in range(codes.shape[1])]), axis=1
    )
    # per class, compiled (kl_anonymity.diverse): Diverse exactly up to DIVERSE_EXACT_LIMIT distinct tuples, else the
    # greedy lower bound; Diverse ≥ ℓ by a greedy certificate, else exactly on small classes, else False
    order = np.argsort(class_index, kind="stable")
    bounds = np.concatenate([[0], np.cumsum(n_rows)])
    diverse_bound = np.empty(n_classes, dtype=np.int64)
    at_least = np.empty(n_classes, dtype=bool)
    for c in range(n_classes):
        members = tuple_id[order[bounds[c] : bounds[c + 1]]]
        diverse_bound[c] = tuples_diverse(members, tuples)
        at_least[c] = tuples_diverse_at_least(members, tuples, ell)
    summary = pd.DataFrame(
        {
            "cluster_id": classes,
            "n_rows": n_rows,
            "n_distinct_sensitive_tuples": n_distinct,
            "min_distinct_values": min_distinct,
            "diverse_lower_bound": diverse_bound,
            "diverse_at_least_ell": at_least,
        }
    )
    return summary.astype(
        {
            "cluster_id": "int64",
            "n_rows": "int64",
            "n_distinct_sensitive_tuples": "int64",
            "min_distinct_values": "int64",
            "diverse_lower_bound": "int64",
            "diverse_at_least_ell": bool,
        }
    )


def kl_accounting_summary(
    input_row_ids: Sequence[int], *, released_row_ids: Sequence[int], suppressed_row_ids: Sequence[int]
) -> pd.DataFrame:
    """One row per input record of the (k, ℓ) model with the number of places it is in.

    Parameters
    ----------
    input_row_ids
        Internal ids of all records that entered the model (after the missing-value policy).
    released_row_ids
        Internal ids of the released rows (through the private row map; ``-1`` for a released
        row the map does not know).
    suppressed_row_ids
        Internal ids reported as suppressed (not released).

    Returns
    -------
    pandas.DataFrame
        ``row_id`` and ``n_places`` (int64; must be exactly 1: released once or suppressed), plus
        one row with ``n_places`` = -1 per id that appears in an output but not in the input.

    References
    ----------
    SPEC §9.5, applied to the (k, ℓ) release.
    """
    return accounting_summary(
        input_row_ids, sac_row_ids=released_row_ids, attribute_table_row_ids=[], deleted_row_ids=suppressed_row_ids
    )


# --------------------------------------------------------------------------- utility (issue 15)


def _share(part: int, whole: int) -> float:
    """``part / whole``, 0.0 when ``whole`` is 0."""
    return part / whole if whole else 0.0


def suppressed_cells_per_attribute(
    attribute_table: pd.DataFrame, sensitive_attributes: Sequence[str], *, n_other_released: int = 0
) -> tuple[dict[str, int], dict[str, int]]:
    """Suppressed and published cells of every sensitive attribute of a mixed or Rating release.

    Parameters
    ----------
    attribute_table
        The candidate attribute table: one SID column per sensitive attribute, NULL (``NA``/``NaN``) = suppressed.
    sensitive_attributes
        Attribute names, in schema order.
    n_other_released
        Records released elsewhere with a cell of every attribute (the SAC~ rows of the mixed model; 0 for Rating).

    Returns
    -------
    tuple of dict
        ``suppressed_cells`` (attribute -> NULL cells of the attribute table) and ``attribute_cells`` (attribute ->
        cells of the attribute in the release, one per released record: SAC~ rows plus attribute-table rows,
        suppressed ones included).
    """
    suppressed = {a: int(attribute_table[a].isna().sum()) for a in sensitive_attributes}
    published = {a: int(n_other_released + len(attribute_table)) for a in sensitive_attributes}
    return suppressed, published


def utility_figures(
    *,
    records_eligible: int,
    records_deleted: int,
    suppressed_cells: Mapping[str, int],
    attribute_cells: Mapping[str, int],
    max_deleted_share: float,
    max_suppressed_share: float,
) -> dict[str, Any]:
    """What a release loses, against the steward's thresholds (issue 15: heavy loss is refused unless accepted).

    Parameters
    ----------
    records_eligible
        Records that entered the model: read minus those dropped for a missing sensitive value.
    records_deleted
        Eligible records the release does not publish (mixed and Rating: deleted records; (k, ℓ): suppressed
        records).
    suppressed_cells, attribute_cells
        Per sensitive attribute: suppressed cells and the attribute's cells in the release (suppressed included),
        as :func:`suppressed_cells_per_attribute` gives them.
    max_deleted_share, max_suppressed_share
        Thresholds in [0, 1] (``ReleaseSettings``).

    Returns
    -------
    dict
        The keys of :data:`UTILITY_KEYS`: the counts (int), ``deleted_share`` = deleted / eligible and
        ``suppressed_share`` (attribute -> suppressed / attribute cells), fractions in [0, 1] (0 when the
        denominator is 0), and the two thresholds. Counts and column names only, never a value of a table.
    """
    return {
        "records_eligible": int(records_eligible),
        "records_deleted": int(records_deleted),
        "deleted_share": _share(int(records_deleted), int(records_eligible)),
        "suppressed_cells": {a: int(n) for a, n in suppressed_cells.items()},
        "attribute_cells": {a: int(attribute_cells[a]) for a in suppressed_cells},
        "suppressed_share": {a: _share(int(n), int(attribute_cells[a])) for a, n in suppressed_cells.items()},
        "max_deleted_share": float(max_deleted_share),
        "max_suppressed_share": float(max_suppressed_share),
    }


def utility_summary(figures: Mapping[str, Any]) -> pd.DataFrame:
    """The utility gate's frame: one row for the deleted records, one per sensitive attribute for its suppressed cells.

    Parameters
    ----------
    figures
        :func:`utility_figures`.

    Returns
    -------
    pandas.DataFrame
        ``measure`` (``deleted_records`` or ``suppressed_cells``), ``attribute`` ('' for the records row), ``count``
        and ``total`` (int64), ``share`` and ``limit`` (float64), ``within_limit`` (bool: share <= limit).
    """
    suppressed, cells, shares = figures["suppressed_cells"], figures["attribute_cells"], figures["suppressed_share"]
    rows = [
        (
            "deleted_records",
            "",
            figures["records_deleted"],
            figures["records_eligible"],
            figures["deleted_share"],
            figures["max_deleted_share"],
        ),
        *(("suppressed_cells", a, suppressed[a], cells[a], shares[a], figures["max_suppressed_share"]) for a in suppressed),
    ]
    frame = pd.DataFrame(rows, columns=["measure", "attribute", "count", "total", "share", "limit"])
    frame = frame.astype({"count": "int64", "total": "int64", "share": "float64", "limit": "float64"})
    frame["within_limit"] = (frame["share"] <= frame["limit"]).astype(bool)
    return frame
