"""Utility of the four releases compared in the attack evaluation: (k, ℓ), mixed, Rating, naive.

Definitions (the attack report repeats them)
------------------------------------------
Hiding set of a published cell ``(t, S_j)``
    The set of records the cell's true value is mixed with: the record's (k, ℓ) equivalence
    class; in the naive release, its equivalence class in table ``j`` (the table publishing
    ``S_j``); in a mixed release, its SAC~ group for a SAC~ row and its ``S_j``-SID (the
    records behind it, ``Σ count``) for an attribute-table row; in a Rating release, its SID.
    A suppressed cell (``NULL`` SID) has no hiding set: it is hidden among all ``n`` records.
Average cluster size
    Per attribute, published (non-suppressed) cells divided by the number of distinct hiding
    sets (``Σ_t 1/|set(t)|`` sets), i.e. the mean *set* size, then averaged over attributes.
    (k, ℓ): ``n / #classes``; naive: each table's ``n / #classes``, averaged over tables.
Discernibility
    Bayardo & Agrawal's discernibility metric per attribute, ``DM_j = Σ_t |set_j(t)|`` over the
    original records, a suppressed cell or a deleted record costing ``n``; reported as the mean
    over attributes (for (k, ℓ) this is the classic ``Σ_classes |C|²``) and per record
    (``DM / n``: the average number of records a cell is hidden among).
Share of suppressed cells
    ``NULL`` SID cells / (``n·m``), ``n`` the records of the input (deleted records are reported
    separately). 0 for the (k, ℓ) and naive releases (no suppression in SPEC §14).
Generalisation cost ``S``
    SPEC §14.2 (P2 formula (11)): the (k, ℓ) release's ``total_cost``; the naive release's sum
    over its tables (which includes generalising the other sensitive attributes); 0 for mixed
    and Rating (QIs published unchanged).
Rule confidence recoverable from a release
    (k, ℓ): sensitive tuples are published unchanged and linked inside a record, so supports
    are counted on the released tuples (exact). Mixed and Rating:
    :func:`pipeline.core.adversary.recover_rule_confidences` (Lemma 22 / SPEC §11 expected
    supports). Naive: ``support(a)`` is counted in table ``A`` (``S_A`` raw); ``support(a ∧ b)``
    is the expected count over table ``A``'s rows holding ``a`` of their generalised ``B`` label
    spread uniformly over the base values of ``B``'s hierarchy it covers,
    ``Σ [b ∈ label] / |label|`` (a user who reads table ``A`` alone; the rule's antecedent side
    is exact there).

Sources: P2 §3-§4 (cost, clusters); Bayardo & Agrawal, "Data privacy through optimal
k-anonymization", ICDE 2005 (discernibility); SPEC §11, §14.2.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from pipeline.core.adversary import with_released_confidence
from pipeline.core.attacks import label_coverage
from pipeline.core.columns import as_text
from pipeline.core.hierarchies import Hierarchy

__all__ = [
    "average_confidence",
    "hiding_set_sizes_kl",
    "hiding_set_sizes_mixed",
    "hiding_set_sizes_naive",
    "kl_rule_confidences",
    "naive_rule_confidences",
    "utility_measures",
]


def hiding_set_sizes_kl(kl_released: pd.DataFrame, sensitive_attributes: Sequence[str]) -> np.ndarray:
    """float64 ``(n_rows, m)``: every cell's equivalence-class size (same for all attributes)."""
    sizes = kl_released.groupby("cluster_id", observed=True)["cluster_id"].transform("size").to_numpy(float)
    return np.repeat(sizes[:, None], len(sensitive_attributes), axis=1)


def hiding_set_sizes_mixed(
    *,
    sac_released: pd.DataFrame,
    attribute_table: pd.DataFrame,
    id_table: pd.DataFrame,
    sensitive_attributes: Sequence[str],
) -> np.ndarray:
    """float64 ``(n_sac + n_at, m)``: SAC~ rows, their group size; attribute-table rows, the
    records behind their SID (``Σ count``); ``NaN`` for a suppressed cell. Rating: pass an empty
    ``sac_released``.

    Raises
    ------
    ValueError
        A SID absent from ``id_table``.
    """
    sensitive_attribute_columns = list(sensitive_attributes)
    parts = []
    if len(sac_released):
        sizes = sac_released.groupby("group_id", observed=True)["group_id"].transform("size").to_numpy(float)
        parts.append(np.repeat(sizes[:, None], len(sensitive_attribute_columns), axis=1))
    totals = id_table.groupby(["attribute", "sid"], observed=True)["count"].sum()
    at = np.full((len(attribute_table), len(sensitive_attribute_columns)), np.nan)
    for j, attribute in enumerate(sensitive_attribute_columns):
        column = attribute_table[attribute]
        published = column.notna().to_numpy()
        lookup = (
            totals.xs(attribute, level="attribute") if attribute in totals.index.get_level_values(0) else pd.Series(dtype=float)
        )
        found = lookup.reindex(column[published].astype(np.int64).to_numpy()).to_numpy(float)
        if np.isnan(found).any():
            raise ValueError(f"attribute {attribute!r}: a SID of the attribute table is not in the ID table")
        at[published, j] = found
    parts.append(at)
    return np.concatenate(parts, axis=0)


def hiding_set_sizes_naive(
    tables: Mapping[str, pd.DataFrame], row_maps: Mapping[str, pd.DataFrame], sensitive_attributes: Sequence[str]
) -> np.ndarray:
    """float64 ``(n, m)``: column ``j`` = the record's class size in the table of ``S_j``, rows
    aligned by ``source_row_id`` (ascending) through each table's ``row_map``."""
    columns = []
    for attribute in sensitive_attributes:
        table = tables[attribute]
        sizes = table.groupby("cluster_id", observed=True)["cluster_id"].transform("size")
        frame = pd.DataFrame({"row_id": table["row_id"].to_numpy(), "size": sizes.to_numpy(float)}).merge(
            row_maps[attribute], on="row_id"
        )
        columns.append(frame.set_index("source_row_id")["size"])
    joined = pd.concat(columns, axis=1, join="inner").sort_index()
    return joined.to_numpy(float)


def utility_measures(
    sizes: np.ndarray, *, n_records: int, n_deleted: int = 0, generalization_cost: float = 0.0
) -> dict[str, Any]:
    """Utility numbers of a release from the hiding-set size of each published cell.

    Parameters
    ----------
    sizes
        float64 ``(n_published, m)``, ``NaN`` = suppressed cell (see the ``hiding_set_sizes_*``).
    n_records
        Records of the input (``n``): published + deleted.
    n_deleted
        Records not published at all.
    generalization_cost
        ``S`` of the release (SPEC §14.2).

    Returns
    -------
    dict
        ``generalization_cost``, ``average_cluster_size``, ``average_cluster_size_per_attribute``
        (list), ``discernibility`` (mean over attributes), ``discernibility_per_record``,
        ``n_suppressed_cells``, ``share_suppressed_cells`` (over ``n·m``), ``n_deleted``.
    """
    sizes = np.asarray(sizes, dtype=float)
    m = sizes.shape[1] if sizes.ndim == 2 else 0
    n = int(n_records)
    per_attribute, dm, penalty = [], [], []
    for j in range(m):
        column = sizes[:, j]
        published = ~np.isnan(column)
        n_sets = float(np.sum(1.0 / column[published])) if published.any() else 0.0
        per_attribute.append(float(published.sum() / n_sets) if n_sets else 0.0)
        penalty.append(float((int((~published).sum()) + int(n_deleted)) * n))
        dm.append(float(column[published].sum()) + penalty[-1])
    suppressed = int(np.isnan(sizes).sum())
    discernibility = float(np.mean(dm)) if dm else 0.0
    published_sizes = sizes[~np.isnan(sizes)] if sizes.size else np.array([])
    return {
        "generalization_cost": float(generalization_cost),
        "average_cluster_size": float(np.mean(per_attribute)) if per_attribute else 0.0,
        "average_cluster_size_per_attribute": per_attribute,
        "discernibility": discernibility,
        "discernibility_per_record": discernibility / n if n else 0.0,
        "discernibility_share_from_suppression": float(np.sum(penalty) / np.sum(dm)) if dm and np.sum(dm) else 0.0,
        "mean_hiding_set_size": float(published_sizes.mean()) if published_sizes.size else 0.0,
        "n_suppressed_cells": suppressed,
        "share_suppressed_cells": suppressed / (n * m) if n and m else 0.0,
        "n_deleted": int(n_deleted),
    }


def kl_rule_confidences(rules: pd.DataFrame, kl_released: pd.DataFrame) -> pd.DataFrame:
    """Rule supports counted on the (k, ℓ) release's sensitive tuples (published unchanged).

    Returns
    -------
    pandas.DataFrame
        ``rules`` plus ``released_support_antecedent``, ``released_support_both`` (float64,
        records) and ``released_confidence`` (NaN when the antecedent is absent).
    """
    antecedent, both = [], []
    for rule in rules.itertuples(index=False):
        has_a = as_text(kl_released[rule.antecedent_attribute]) == str(rule.antecedent_value)
        has_b = as_text(kl_released[rule.consequent_attribute]) == str(rule.consequent_value)
        antecedent.append(float(has_a.sum()))
        both.append(float((has_a & has_b).sum()))
    return with_released_confidence(rules, antecedent, both)


def naive_rule_confidences(
    rules: pd.DataFrame, tables: Mapping[str, pd.DataFrame], hierarchies: Mapping[str, Hierarchy]
) -> pd.DataFrame:
    """Expected rule supports read from the naive release (module docstring).

    Parameters
    ----------
    rules
        Rules (``antecedent_*``, ``consequent_*``).
    tables
        Sensitive attribute -> its published table (raw column for it, labels for the others).
    hierarchies
        Hierarchy of every sensitive attribute (for the base values a label covers).

    Returns
    -------
    pandas.DataFrame
        As :func:`kl_rule_confidences`.
    """
    antecedent, both = [], []
    for rule in rules.itertuples(index=False):
        a_attr, b_attr = rule.antecedent_attribute, rule.consequent_attribute
        table = tables[a_attr]
        holders = table[as_text(table[a_attr]) == str(rule.antecedent_value)]
        antecedent.append(float(len(holders)))
        if len(holders) == 0:
            both.append(0.0)
            continue
        hierarchy = hierarchies[b_attr]
        labels, inverse = np.unique(as_text(holders[b_attr]).to_numpy(dtype=object), return_inverse=True)
        cover = label_coverage(hierarchy, list(labels), list(hierarchy.base_values))
        share = (
            np.where(cover[:, hierarchy.base_values.index(str(rule.consequent_value))], 1.0 / cover.sum(axis=1), 0.0)
            if str(rule.consequent_value) in hierarchy.base_values
            else np.zeros(len(labels))
        )
        both.append(float(share[inverse].sum()))
    return with_released_confidence(rules, antecedent, both)


def average_confidence(recovered: pd.DataFrame) -> dict[str, Any]:
    """Raw vs released average confidence of the rules (JSON-safe).

    Parameters
    ----------
    recovered
        Rules with ``support_antecedent``, ``support_both`` (raw counts) and
        ``released_confidence``.

    Returns
    -------
    dict
        ``n_rules``, ``average_raw_confidence``, ``average_released_confidence`` (over rules with
        a defined released confidence; None without rules), ``max_abs_deviation`` and
        ``n_rules_exact`` (released = raw within 1e-9).
    """
    if len(recovered) == 0:
        return {
            "n_rules": 0,
            "average_raw_confidence": None,
            "average_released_confidence": None,
            "max_abs_deviation": None,
            "n_rules_exact": 0,
        }
    raw = (recovered["support_both"] / recovered["support_antecedent"]).to_numpy(float)
    released = recovered["released_confidence"].to_numpy(float)
    deviation = np.abs(np.where(np.isnan(released), 0.0, released) - raw)
    return {
        "n_rules": int(len(recovered)),
        "average_raw_confidence": float(raw.mean()),
        "average_released_confidence": float(np.nanmean(released)) if (~np.isnan(released)).any() else None,
        "max_abs_deviation": float(deviation.max()),
        "n_rules_exact": int((deviation < 1e-9).sum()),
    }
