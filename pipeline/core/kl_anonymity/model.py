"""The (k, ℓ) model end to end and its released table (:mod:`pipeline.core.kl_anonymity`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from pipeline.core.columns import as_text
from pipeline.core.hierarchies import Hierarchy
from pipeline.core.kl_anonymity.blocks import blocked_clusters
from pipeline.core.kl_anonymity.costs import _record_cost, cluster_generalization
from pipeline.core.kl_anonymity.diverse import records_diverse
from pipeline.core.kl_anonymity.exact import exact_clusters
from pipeline.core.kl_anonymity.greedy import greedy_clusters
from pipeline.core.kl_anonymity.table import GREEDY_MAX_RECORDS, GREEDY_MAX_TUPLES, EncodedTable, InfeasibleError, encode_table
from pipeline.core.progress import Progress, no_progress

METHODS = ("blocked", "greedy", "exact")


@dataclass(frozen=True)
class KLAnonymization:
    """Outcome of :func:`kl_anonymize`.

    Attributes
    ----------
    assignments
        One row per input record: ``row_id`` (int64, input row id, PRIVATE), ``cluster_id``
        (int64, 1-based, clusters ordered by smallest member).
    clusters
        One row per cluster: ``cluster_id``, ``n_records`` (int64), ``diverse`` (int64, exact up to
        ``DIVERSE_EXACT_LIMIT`` distinct tuples, else a certified lower bound), ``cost`` (float64,
        ``S``), ``naive_cost`` (int64), then one VARCHAR column per quasi-identifier holding the
        generalised label, and ``<qi>__level`` (int64) the level climbed.
    total_cost, total_naive_cost
        Sums over clusters.
    n_blocks
        Blocks of the ``blocked`` method (1 otherwise).
    method, k, ell
        Parameters used.
    """

    assignments: pd.DataFrame
    clusters: pd.DataFrame
    total_cost: float
    total_naive_cost: int
    n_blocks: int
    method: str
    k: int
    ell: int


def kl_anonymize(
    records: pd.DataFrame,
    quasi_identifiers: Sequence[str],
    sensitive_attributes: Sequence[str],
    hierarchies: Mapping[str, Hierarchy],
    *,
    k: int,
    ell: int,
    weights: Mapping[str, float] | None = None,
    method: str = "blocked",
    max_block_size: int = 256,
    whole_table_tuples: int = GREEDY_MAX_TUPLES,
    source: str = "the input",
    progress: Progress = no_progress,
) -> KLAnonymization:
    """(k, ℓ)-anonymise ``records`` (P2; SPEC §14).

    Parameters
    ----------
    records
        One row per record: ``row_id`` (int) and the columns named below, as text. Not modified.
    quasi_identifiers
        Columns generalised along ``hierarchies``.
    sensitive_attributes
        Columns published unchanged; ``Diverse`` is computed on their tuples.
    hierarchies
        Quasi-identifier -> validated hierarchy.
    k, ell
        Minimum cluster size and ``Diverse``; ``k >= ell >= 1``.
    weights
        Cost weights ``c_i`` per quasi-identifier (default 1).
    method
        ``"blocked"`` (default; scales to large tables: the compiled greedy + refinement on the whole table when it
        holds at most ``GREEDY_MAX_TUPLES`` distinct quasi-identifier tuples, else on blocks),
        ``"greedy"`` (SPEC §14.3 exactly, on the whole table, ``O(n²)`` memory, at most ``GREEDY_MAX_RECORDS`` records) or ``"exact"`` (SPEC §14.4,
        at most ``EXACT_MAX_RECORDS`` records).
    max_block_size
        Largest block of the ``blocked`` method (records), when the table needs blocks.
    whole_table_tuples
        ``blocked``: run on the whole table when it holds at most this many distinct quasi-identifier tuples
        (default ``GREEDY_MAX_TUPLES``; 0 always cuts blocks, the method before issue 18).
    source
        Name of the data, for messages.
    progress
        ``blocked``: called with (blocks done, number of blocks) after each block (:mod:`pipeline.core.progress`).

    Returns
    -------
    KLAnonymization

    Raises
    ------
    InfeasibleError
        Invalid ``k``/``ell``, fewer than ``k`` records, ``Diverse(table) < ell``, or a table too
        large for the chosen method.
    pipeline.core.hierarchies.HierarchyError
        A quasi-identifier value missing from its hierarchy.
    ValueError
        Unknown ``method``.
    """
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; use one of {list(METHODS)}")
    table = encode_table(records, quasi_identifiers, sensitive_attributes, hierarchies, weights=weights, source=source)
    n_blocks = 1
    if method == "exact":
        clusters = exact_clusters(table, k=k, ell=ell)
    elif method == "greedy":
        n_tuples = len(np.unique(table.quasi_identifier_codes, axis=0))
        if len(table) > GREEDY_MAX_RECORDS and n_tuples > GREEDY_MAX_TUPLES:
            raise InfeasibleError(
                f"method 'greedy' keeps the edge weights between the {n_tuples} distinct quasi-identifier tuples "
                f"(at most {GREEDY_MAX_TUPLES}) or an n x n matrix (at most {GREEDY_MAX_RECORDS} records, "
                f"{len(table)} given): use method 'blocked'"
            )
        clusters = greedy_clusters(table, k=k, ell=ell)
    else:
        clusters, n_blocks = blocked_clusters(
            table, k=k, ell=ell, max_block_size=max_block_size, whole_table_tuples=whole_table_tuples, progress=progress
        )
    return summarize_clusters(table, clusters, method=method, k=k, ell=ell, n_blocks=n_blocks)


def summarize_clusters(
    table: EncodedTable, clusters: Sequence[np.ndarray], *, method: str, k: int, ell: int, n_blocks: int = 1
) -> KLAnonymization:
    """Build a :class:`KLAnonymization` from cluster positions (used by every method)."""
    cluster_rows = []
    for cluster_id, positions in enumerate(clusters, start=1):
        nodes = cluster_generalization(table, positions)
        row: dict[str, Any] = {
            "cluster_id": cluster_id,
            "n_records": len(positions),
            "diverse": records_diverse(table, np.asarray(positions, dtype=np.int64)),
            "cost": len(positions) * _record_cost(table, nodes),
            "naive_cost": len(positions) * sum(level for level, _ in nodes),
        }
        for attribute, hierarchy, (level, node) in zip(table.quasi_identifiers, table.hierarchies, nodes):
            row[attribute] = hierarchy.label(level, node)
            row[f"{attribute}__level"] = level
        cluster_rows.append(row)
    sizes = np.array([len(positions) for positions in clusters], dtype=np.int64)
    assignments = pd.DataFrame(
        {
            "row_id": np.concatenate([table.row_ids[positions] for positions in clusters]).astype(np.int64)
            if len(clusters)
            else np.zeros(0, dtype=np.int64),
            "cluster_id": np.repeat(np.arange(1, len(clusters) + 1, dtype=np.int64), sizes),
        }
    )
    summary = pd.DataFrame(cluster_rows).astype(
        {"cluster_id": "int64", "n_records": "int64", "diverse": "int64", "naive_cost": "int64"}
    )
    return KLAnonymization(
        assignments=assignments.sort_values("row_id", kind="stable").reset_index(drop=True),
        clusters=summary,
        total_cost=float(summary["cost"].sum()),
        total_naive_cost=int(summary["naive_cost"].sum()),
        n_blocks=n_blocks,
        method=method,
        k=k,
        ell=ell,
    )


def kl_release_table(
    records: pd.DataFrame,
    anonymization: KLAnonymization,
    quasi_identifiers: Sequence[str],
    sensitive_attributes: Sequence[str],
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The released table of the (k, ℓ) model and the private row map.

    Clusters are renumbered by content (generalised tuple, then sorted sensitive tuples) and rows
    sorted by cluster then sensitive values, so neither ``cluster_id`` nor ``row_id`` carries the
    input order.

    Returns
    -------
    (kl_released, row_map)
        ``kl_released``: ``row_id`` (int64, 1..n), ``cluster_id`` (int64), the generalised
        quasi-identifiers (str), the sensitive attributes (str, unchanged).
        ``row_map``: ``row_id`` (release) -> ``source_row_id`` (input; PRIVATE).
    """
    quasi_identifier_columns, sensitive_attribute_columns = list(quasi_identifiers), list(sensitive_attributes)
    labels = anonymization.clusters[["cluster_id", *quasi_identifier_columns]]
    merged = (
        anonymization.assignments.merge(labels, on="cluster_id")
        .merge(
            records[["row_id", *sensitive_attribute_columns]].astype({a: str for a in sensitive_attribute_columns}), on="row_id"
        )
        .rename(columns={"row_id": "source_row_id"})
    )
    # per class: its rows' sensitive tuples in sorted order, fields joined by \x1e, rows by \x1f (each row's text made
    # by vectorized concatenation, then joined per class)
    by_values = merged.sort_values(sensitive_attribute_columns, kind="stable")
    row_text = by_values[sensitive_attribute_columns[0]] if sensitive_attribute_columns else pd.Series("", index=by_values.index)
    for attribute in sensitive_attribute_columns[1:]:
        row_text = row_text + "\x1e" + by_values[attribute]
    signature = row_text.groupby(by_values["cluster_id"], sort=False, observed=True).agg("\x1f".join)
    content = as_text(labels.set_index("cluster_id")[quasi_identifier_columns]).agg("\x1f".join, axis=1).to_frame("qi")
    content["sa"] = signature
    order = content.sort_values(["qi", "sa"], kind="stable").index
    renumber = pd.Series(np.arange(1, len(order) + 1, dtype=np.int64), index=order)
    merged["cluster_id"] = merged["cluster_id"].map(renumber).astype("int64")
    merged = merged.sort_values(["cluster_id", *sensitive_attribute_columns, "source_row_id"], kind="stable").reset_index(
        drop=True
    )
    merged.insert(0, "row_id", np.arange(1, len(merged) + 1, dtype=np.int64))
    released = merged[["row_id", "cluster_id", *quasi_identifier_columns, *sensitive_attribute_columns]].astype(
        {c: str for c in [*quasi_identifier_columns, *sensitive_attribute_columns]}
    )
    return released, merged[["row_id", "source_row_id"]].copy()
