"""No certain cell: make the records left for Rating ℓ-eligible, so that nothing is suppressed.

Rating (SPEC §6.4, [choice] §15 rows 14-15) suppresses a residual value only when every SID of
its attribute already holds it, and the ID table shows which values those are: a NULL SID names
its value with certainty (on Adult all 5,422 suppressed cells were HS-grad or Husband, in 25.6 %
of the attribute-table rows; issue 12, item 3). Anatomy's eligibility condition (Xiao & Tao, VLDB
2006, Theorem 1) says when that cannot happen: a multiset of values can be split into ℓ-diverse
buckets with nothing left over iff no value occurs in more than 1/ℓ of the records. This module
deletes whole records (never publishes a cell that names its value) until every sensitive
attribute of the table is ℓ-eligible:

* the attribute and value with the largest excess ``ℓ·count − n`` is taken first; deleting one of
  its holders lowers the excess by ``ℓ − 1``, so ``ceil(excess / (ℓ − 1))`` holders go in one batch;
* among the holders, records that also hold a value in excess on other attributes go first (one
  deletion then helps several attributes), then a keyed pseudo-random order of their content
  (home secret), so which records are deleted carries no input order and is not predictable from
  anything published;
* repeat until no attribute has a value above 1/ℓ.

The deletion count is reported (manifest ``n_deleted``, the records gate) and is the price of the
guarantee; ``residual_policy = 'suppress'`` keeps SPEC's reference behaviour.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from pipeline.core.columns import distinct_per_group, sorted_text_codes, text_ranks, values_mask
from pipeline.core.keyed import keyed_record_hashes
from pipeline.core.sensitivity import EllRequirement, ell_by_attribute

__all__ = ["eligibility_deletions", "is_ell_eligible", "suppressed_cell_certainty", "values_in_every_sid"]


def is_ell_eligible(records: pd.DataFrame, sensitive_attributes: Sequence[str], ell: EllRequirement) -> bool:
    """True iff no value of any sensitive attribute occurs in more than 1/ℓ_i of ``records`` (``ell``: one ℓ, or
    ℓ_i per attribute, :mod:`pipeline.core.sensitivity`)."""
    n = len(records)
    per_attribute = ell_by_attribute(ell, sensitive_attributes)
    for attribute in sensitive_attributes:
        if n and int(records[attribute].value_counts().max()) * per_attribute[attribute] > n:
            return False
    return True


def eligibility_deletions(
    records: pd.DataFrame,
    sensitive_attributes: Sequence[str],
    *,
    ell: EllRequirement,
    secret: bytes | None = None,
    content_columns: Sequence[str] | None = None,
    row_id_column: str = "row_id",
    tie_hashes: np.ndarray | None = None,
) -> np.ndarray:
    """Row ids to delete so that every sensitive attribute of the rest is ℓ-eligible.

    Parameters
    ----------
    records
        The records Rating would bucketize (IR_left for the mixed model, the whole table for
        the Rating model): ``row_id_column`` and every sensitive attribute (no missing value).
    sensitive_attributes
        The attributes to make eligible.
    ell
        ℓ >= 2, or a mapping attribute -> ℓ_i >= 2 (each attribute made ℓ_i-eligible, SPEC §6.7).
    secret
        Home secret for the tie-break order among equally useful records (keyed hash of
        ``content_columns``, purpose ``"eligibility"``); ``None`` uses table order.
    content_columns
        Columns making up a record's content for the keyed order (default: the sensitive
        attributes).
    row_id_column
        The id column.
    tie_hashes
        Optional uint64 array aligned with ``records``: the keyed hashes of their content
        (purpose ``"eligibility"``) when already computed for a larger table (same result, one
        hashing pass instead of one per call).

    Returns
    -------
    numpy.ndarray
        int64 row ids, in deletion order; empty when the table is already eligible. After
        removing them, ``ℓ_i · count(v) ≤ n`` for every value ``v`` of every attribute i. When an
        attribute has fewer than ℓ_i distinct values, every record is returned (nothing can be
        bucketized ℓ-diversely); the caller reports the loss.

    Raises
    ------
    ValueError
        ``ell < 2`` (or an ℓ_i, or a mapping not naming exactly the attributes) or a missing column.

    References
    ----------
    Xiao & Tao, "Anatomy" (VLDB 2006), eligibility condition and Theorem 1; issue 12 ("no
    certain cell").
    """
    if not isinstance(ell, Mapping) and (int(ell) != ell or ell < 2):
        raise ValueError(f"ell (ℓ) must be an integer >= 2, got {ell!r}")
    ells = np.asarray(
        list(ell_by_attribute(ell if isinstance(ell, Mapping) else int(ell), sensitive_attributes).values()), dtype=np.int64
    )
    missing = [c for c in [row_id_column, *sensitive_attributes] if c not in records.columns]
    if missing:
        raise ValueError(f"column(s) {missing} not in the table")
    n = len(records)
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    codes = np.column_stack([pd.factorize(records[a])[0].astype(np.int64) for a in sensitive_attributes])
    if secret is None:
        tie = np.arange(n, dtype=np.int64)
    else:
        hashes = (
            tie_hashes
            if tie_hashes is not None
            else keyed_record_hashes(records, list(content_columns or sensitive_attributes), secret, "eligibility")
        )
        tie = np.empty(n, dtype=np.int64)
        tie[np.argsort(hashes, kind="stable")] = np.arange(n)
    alive = np.ones(n, dtype=bool)
    counts = [np.bincount(codes[:, a]) for a in range(codes.shape[1])]
    alive_n = n
    deleted: list[np.ndarray] = []
    while True:
        excess = [int(ells[a]) * c - alive_n for a, c in enumerate(counts)]
        worst = max(range(len(excess)), key=lambda a: (int(excess[a].max()), -a))
        value = int(np.argmax(excess[worst]))
        top = int(excess[worst][value])
        if top <= 0:
            break
        batch = -(-top // (int(ells[worst]) - 1))
        holders = np.flatnonzero(alive & (codes[:, worst] == value))
        # how many attributes each holder helps: its value is in excess on that attribute
        helps = np.zeros(len(holders), dtype=np.int64)
        for a in range(codes.shape[1]):
            helps += (excess[a][codes[holders, a]] > 0).astype(np.int64)
        order = np.lexsort((tie[holders], -helps))
        chosen = holders[order[: min(batch, len(holders))]]
        alive[chosen] = False
        alive_n -= len(chosen)
        for a in range(codes.shape[1]):
            counts[a] = counts[a] - np.bincount(codes[chosen, a], minlength=len(counts[a]))
        deleted.append(chosen)
        if alive_n == 0:  # e.g. an attribute with fewer than ℓ distinct values: nothing can be bucketized
            break
    positions = np.concatenate(deleted) if deleted else np.zeros(0, dtype=np.int64)
    return records[row_id_column].to_numpy(np.int64)[positions]


def values_in_every_sid(id_table: pd.DataFrame, attribute: str) -> list[str]:
    """The values (as text, sorted) that every SID of ``attribute`` holds: the candidates of a suppressed cell of
    ``attribute`` (:func:`suppressed_cell_certainty` counts them). A sharded release intersects the shards' lists
    (SCALE.md §1). Empty when the attribute has no SID.

    Parameters
    ----------
    id_table
        Published: ``attribute``, ``sid``, ``value``.
    attribute
        A sensitive attribute's name.
    """
    entries = id_table[values_mask(id_table["attribute"], [attribute])]
    sids = entries["sid"].to_numpy(np.int64)
    n_sids = int(pd.unique(sids).size)
    if not n_sids:
        return []
    codes, texts = sorted_text_codes(entries["value"])
    per_value = distinct_per_group(codes.astype(np.int64) + 1, sids, len(texts) + 1)
    return [str(texts[k]) for k in np.flatnonzero(per_value[1:] == n_sids)]


def suppressed_cell_certainty(
    attribute_table: pd.DataFrame, id_table: pd.DataFrame, sensitive_attributes: Sequence[str], ell: EllRequirement
) -> pd.DataFrame:
    """What an adversary who knows the placement rule learns from each attribute's suppressed cells.

    A NULL SID means "a value that every SID of the attribute already holds" (SPEC §6.4), so the
    candidates of a suppressed cell are the values present in every SID; this adversary gives the
    cell's value probability 1 / (number of candidates) (uniform over the candidates). It is a
    lower bound of what a suppressed cell gives away: with a prior over the values (the dominant
    value is the one left over) the most likely candidate is more likely still. That is why the
    default policy ('delete') leaves no suppressed cell at all.

    Parameters
    ----------
    attribute_table
        Published: one SID column per sensitive attribute (``<NA>`` = suppressed).
    id_table
        Published: ``attribute``, ``sid``, ``value``.
    sensitive_attributes
        Attribute names.
    ell
        ℓ, or ℓ_i per attribute: the bound of attribute i is 1/ℓ_i.

    Returns
    -------
    pandas.DataFrame
        One row per attribute: ``attribute``, ``n_suppressed_cells`` (int), ``n_candidate_values``
        (values present in every SID), ``max_probability`` (float: 1 / candidates when a cell is
        suppressed, 1.0 if no candidate exists, 0 without suppressed cells), ``within_bound``
        (bool: max_probability ≤ 1/ℓ_i), ``bound`` (float: 1/ℓ_i). Numbers and attribute names only.

    References
    ----------
    Issue 12, item 3; SPEC §6.4 and §10.
    """
    rows = []
    per_attribute = ell_by_attribute(ell, sensitive_attributes)
    for attribute in sensitive_attributes:
        n_suppressed = int(attribute_table[attribute].isna().sum()) if attribute in attribute_table else 0
        entries = id_table[values_mask(id_table["attribute"], [attribute])]
        sids = entries["sid"].to_numpy(np.int64)
        n_sids = int(pd.unique(sids).size)
        if n_sids:
            # values by their text (text once per distinct value), SIDs per value counted on integer pairs
            value_codes = text_ranks(entries["value"])
            n_values = int(value_codes.max(initial=-1)) + 2
            per_value = distinct_per_group(value_codes + 1, sids, n_values)
            candidates = int((per_value == n_sids).sum())
        else:
            candidates = 0
        if n_suppressed == 0:
            probability = 0.0
        else:
            probability = 1.0 / candidates if candidates else 1.0
        rows.append(
            {
                "attribute": attribute,
                "n_suppressed_cells": n_suppressed,
                "n_candidate_values": candidates,
                "max_probability": probability,
                "within_bound": probability <= 1.0 / per_attribute[attribute] + 1e-12,
                "bound": 1.0 / per_attribute[attribute],
            }
        )
    return pd.DataFrame(
        rows, columns=["attribute", "n_suppressed_cells", "n_candidate_values", "max_probability", "within_bound", "bound"]
    )
