"""The naive per-attribute release of P2 §1 (Tables 2–3): one table per sensitive attribute.

Table ``j`` publishes sensitive attribute ``S_j`` unchanged and treats the quasi-identifiers
*and every other sensitive attribute* as quasi-identifiers, generalised along their hierarchies
so that every equivalence class holds at least ``ℓ`` distinct values of ``S_j`` (distinct
ℓ-diversity, ``k = ℓ``). This is what a custodian gets by running a single-sensitive-attribute
tool (ARX, sdcMicro) once per attribute. Each table alone is ℓ-diverse; P2's point is that an
adversary who joins the tables on the victim's quasi-identifiers can still pin the victim's
tuple (measured by :func:`pipeline.core.attacks.naive_release_belief` and the attacks there).

The tables are built with the (k, ℓ) core of SPEC §14 (:func:`pipeline.core.kl_anonymity.kl_anonymize`
with a single sensitive attribute, so ``Diverse`` is the number of distinct values).

Sources: P2 §1 (the per-attribute release and the join attack); SPEC §14.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pandas as pd

from pipeline.core.hierarchies import Hierarchy
from pipeline.core.kl_anonymity import KLAnonymization, kl_anonymize, kl_release_table

__all__ = ["NaiveRelease", "NaiveTable", "naive_release"]


@dataclass(frozen=True)
class NaiveTable:
    """One table of the naive release.

    Attributes
    ----------
    attribute
        The sensitive attribute ``S_j`` published unchanged in this table.
    generalized
        Columns published generalised: the quasi-identifiers, then the other sensitive
        attributes (schema order).
    released
        ``row_id`` (int64, 1..n, this table's own numbering), ``cluster_id`` (int64), one text
        column per ``generalized`` attribute holding its generalised label, and ``attribute``
        (text, raw value). Shareable.
    row_map
        PRIVATE: ``row_id`` (this table) -> ``source_row_id`` (input row id).
    anonymization
        The :class:`~pipeline.core.kl_anonymity.KLAnonymization` behind the table (clusters,
        cost ``S``, naive cost).
    """

    attribute: str
    generalized: tuple[str, ...]
    released: pd.DataFrame
    row_map: pd.DataFrame
    anonymization: KLAnonymization


@dataclass(frozen=True)
class NaiveRelease:
    """The naive release: one :class:`NaiveTable` per sensitive attribute, schema order.

    Attributes
    ----------
    tables
        Sensitive attribute -> its table.
    quasi_identifiers, sensitive_attributes
        Column names (schema order).
    ell
        ℓ (= k) of every table.
    total_cost
        Sum of the tables' generalisation costs ``S`` (SPEC §14.2; the cost of generalising the
        other sensitive attributes is included, it is information lost on them).
    """

    tables: dict[str, NaiveTable]
    quasi_identifiers: tuple[str, ...]
    sensitive_attributes: tuple[str, ...]
    ell: int
    total_cost: float


def naive_release(
    records: pd.DataFrame,
    quasi_identifiers: Sequence[str],
    sensitive_attributes: Sequence[str],
    hierarchies: Mapping[str, Hierarchy],
    *,
    ell: int,
    weights: Mapping[str, float] | None = None,
    method: str = "blocked",
    max_block_size: int = 256,
    source: str = "the input",
) -> NaiveRelease:
    """Build the per-attribute release of P2 §1: table ``j`` = ``S_j`` raw, everything else generalised.

    Parameters
    ----------
    records
        ``row_id`` (int) + quasi-identifiers + sensitive attributes, as text. PRIVATE; not modified.
    quasi_identifiers
        Published generalised in every table.
    sensitive_attributes
        At least 2; each gets one table in which the others are generalised as quasi-identifiers.
    hierarchies
        Attribute -> :class:`~pipeline.core.hierarchies.Hierarchy`, for every quasi-identifier
        **and** every sensitive attribute (each one is generalised in the other tables).
    ell
        Distinct ℓ-diversity of ``S_j`` in every equivalence class of table ``j``; the tables use
        ``k = ℓ`` (an equivalence class of ℓ records with ℓ distinct values is the smallest
        ℓ-diverse class, as in P2's Tables 2-3).
    weights
        Cost weight ``c_i`` per generalised attribute (default 1; attributes not listed weigh 1).
    method, max_block_size
        Passed to :func:`~pipeline.core.kl_anonymity.kl_anonymize` (default: the scalable
        ``blocked`` method).
    source
        Name of the data, for messages.

    Returns
    -------
    NaiveRelease

    Raises
    ------
    ValueError
        Fewer than 2 sensitive attributes, or a hierarchy missing for some attribute.
    pipeline.core.kl_anonymity.InfeasibleError
        Some ``S_j`` has fewer than ℓ distinct values, or ``ell < 1``.
    pipeline.core.hierarchies.HierarchyError
        A value missing from its hierarchy.

    References
    ----------
    P2 §1 (Tables 2-3, the join attack); SPEC §14.
    """
    quasi_identifier_columns, sensitive_attribute_columns = tuple(quasi_identifiers), tuple(sensitive_attributes)
    if len(sensitive_attribute_columns) < 2:
        raise ValueError(
            f"the naive per-attribute release needs at least 2 sensitive attributes, got {list(sensitive_attribute_columns)}"
        )
    missing = [a for a in (*quasi_identifier_columns, *sensitive_attribute_columns) if a not in hierarchies]
    if missing:
        raise ValueError(
            f"no hierarchy for {missing}: the naive release generalises every quasi-identifier and every "
            "sensitive attribute other than the one a table publishes"
        )
    tables: dict[str, NaiveTable] = {}
    for attribute in sensitive_attribute_columns:
        generalized = (*quasi_identifier_columns, *(a for a in sensitive_attribute_columns if a != attribute))
        anonymization = kl_anonymize(
            records,
            generalized,
            [attribute],
            {a: hierarchies[a] for a in generalized},
            k=ell,
            ell=ell,
            weights={a: float((weights or {}).get(a, 1.0)) for a in generalized},
            method=method,
            max_block_size=max_block_size,
            source=source,
        )
        released, row_map = kl_release_table(records, anonymization, generalized, [attribute])
        tables[attribute] = NaiveTable(attribute, generalized, released, row_map, anonymization)
    return NaiveRelease(
        tables=tables,
        quasi_identifiers=quasi_identifier_columns,
        sensitive_attributes=sensitive_attribute_columns,
        ell=ell,
        total_cost=float(sum(t.anonymization.total_cost for t in tables.values())),
    )
