"""The blocked method: blocks along the hierarchies, clustered one by one, then refined (:mod:`pipeline.core.kl_anonymity`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pipeline.core.kl_anonymity.costs import cluster_cost
from pipeline.core.kl_anonymity.diverse import records_diverse_at_least
from pipeline.core.compiled import kernel
from pipeline.core.kl_anonymity.greedy import _validate_parameters, greedy_clusters
from pipeline.core.kl_anonymity.table import GREEDY_MAX_TUPLES, EncodedTable, InfeasibleError
from pipeline.core.progress import Progress, no_progress


def _allowable(table: EncodedTable, positions: np.ndarray, k: int, ell: int) -> bool:
    return len(positions) >= k and records_diverse_at_least(table, positions, ell)


def partition_blocks(table: EncodedTable, *, k: int, ell: int, max_block_size: int = 256) -> list[np.ndarray]:
    """Cut the table into blocks of at most ``max_block_size`` records (when possible), each with
    ``≥ k`` records and ``Diverse ≥ ℓ``, so that the §14.3 greedy can run inside blocks.

    Mondrian-style top-down specialisation on the hierarchies (LeFevre, DeWitt, Ramakrishnan,
    "Mondrian multidimensional k-anonymity", ICDE 2006, categorical splits): a block is split by
    the children (one level down from the block's common ancestor) of the attribute with the
    largest normalised generalisation, children that are too small or not diverse enough are
    pooled into one extra part (merged into the largest part when the pool itself is not
    allowable). When no attribute allows a split, the block is sorted along the hierarchies and
    cut near the middle (at the first cut whose two halves are allowable); failing that, it is
    split into every other record of that order (both halves keep the block's mix of rare
    sensitive tuples, e.g. the few non-husbands among married men in Adult). A block that cannot
    be split stays whole.

    Returns
    -------
    list of int64 arrays
        Positions (ascending within a block), blocks in a deterministic order.

    Raises
    ------
    InfeasibleError
        As :func:`greedy_clusters` for the whole table.
    """
    n = len(table)
    _validate_parameters(n, k, ell)
    if max_block_size < 2 * k:
        raise InfeasibleError(f"max_block_size={max_block_size} must be at least 2k={2 * k}")
    everything = np.arange(n, dtype=np.int64)
    if not _allowable(table, everything, k, ell):
        raise InfeasibleError(f"Diverse(whole table) < ell={ell}: no (k, ℓ)-anonymous table exists")
    ancestors = [h.codes[table.quasi_identifier_codes[:, i]] for i, h in enumerate(table.hierarchies)]
    sort_key = np.lexsort([ancestors[i][:, h] for i in reversed(range(len(ancestors))) for h in range(ancestors[i].shape[1])])
    rank = np.empty(n, dtype=np.int64)
    rank[sort_key] = np.arange(n)
    blocks: list[np.ndarray] = []
    stack = [everything]
    while stack:
        block = stack.pop()
        if len(block) <= max_block_size:
            blocks.append(np.sort(block))
            continue
        parts = _split_by_hierarchy(table, ancestors, block, k, ell)
        if parts is None:
            ordered = block[np.argsort(rank[block], kind="stable")]
            parts = _split_sorted(table, ordered, k, ell)
            if parts is None:  # keep the rare tuples on both sides: every other record
                halves = [ordered[0::2], ordered[1::2]]
                parts = halves if all(_allowable(table, h, k, ell) for h in halves) else None
        if parts is None:
            blocks.append(np.sort(block))
            continue
        stack.extend(reversed(parts))
    return blocks


def _split_by_hierarchy(
    table: EncodedTable, ancestors: Sequence[np.ndarray], block: np.ndarray, k: int, ell: int
) -> list[np.ndarray] | None:
    scores = []
    for i, hierarchy in enumerate(table.hierarchies):
        column = ancestors[i][block]
        constant = column.min(axis=0) == column.max(axis=0)
        level = int(np.argmax(constant))
        scores.append(
            (
                level
                / hierarchy.height
                * hierarchy.range_matrix[level, column[0, level]]
                / max(1.0, hierarchy.range_matrix[hierarchy.height, 0]),
                i,
                level,
            )
        )
    for _, i, level in sorted(scores, key=lambda s: (-s[0], s[1])):
        if level == 0:
            continue
        children = ancestors[i][block, level - 1]
        values, inverse = np.unique(children, return_inverse=True)
        if len(values) < 2:
            continue
        parts: list[np.ndarray] = []
        pool: list[np.ndarray] = []
        for child in range(len(values)):
            members = block[inverse == child]
            (parts if _allowable(table, members, k, ell) else pool).append(members)
        if pool:
            pooled = np.concatenate(pool)
            if _allowable(table, pooled, k, ell):
                parts.append(pooled)
            elif parts:
                largest = max(range(len(parts)), key=lambda p: len(parts[p]))
                parts[largest] = np.concatenate([parts[largest], pooled])
        if len(parts) >= 2:
            return parts
    return None


def _split_sorted(table: EncodedTable, ordered: np.ndarray, k: int, ell: int) -> list[np.ndarray] | None:
    middle = len(ordered) // 2
    step = max(1, len(ordered) // 64)
    # a cut whose one side has fewer than ℓ distinct values of some sensitive attribute cannot give two allowable sides
    # (ℓ pairwise totally different tuples hold ℓ distinct values of every attribute): such cuts are skipped without
    # the diversity test, the first cut found is the same (on Adult at (3, 3) about two thirds of the tests, issue 18)
    possible = _cuts_with_enough_values(table, ordered, ell)
    for offset in range(0, middle - k + 1, step):
        for cut in (middle - offset, middle + offset):
            if k <= cut <= len(ordered) - k and possible[cut]:
                left, right = ordered[:cut], ordered[cut:]
                if _allowable(table, left, k, ell) and _allowable(table, right, k, ell):
                    return [left, right]
    return None


def _cuts_with_enough_values(table: EncodedTable, ordered: np.ndarray, ell: int) -> np.ndarray:
    """bool ``(len(ordered) + 1,)``: at ``cut``, whether ``ordered[:cut]`` and ``ordered[cut:]`` both hold at least
    ``ell`` distinct values of every sensitive attribute (a necessary condition of ``Diverse ≥ ℓ`` on each side)."""
    n = len(ordered)
    tuple_ids, tuples = table.sensitive_tuples
    values = tuples[tuple_ids[ordered]]  # (n, m) value codes of the records in order
    possible = np.ones(n + 1, dtype=bool)
    for column in values.T:
        _, first = np.unique(column, return_index=True)
        _, last_reversed = np.unique(column[::-1], return_index=True)
        # distinct values among the first ``cut`` records, and among the records from ``cut`` on
        before = np.concatenate([[0], np.cumsum(np.bincount(first, minlength=n))])
        after = np.concatenate([[0], np.cumsum(np.bincount(last_reversed, minlength=n))])[::-1]
        possible &= (before >= ell) & (after >= ell)
    return possible


#: Clusters up to this size are split by trying every bipartition in :func:`refine_clusters`.
REFINE_EXHAUSTIVE_MAX = 10


def refine_clusters(table: EncodedTable, clusters: Sequence[np.ndarray], *, k: int, ell: int) -> list[np.ndarray]:
    """Split clusters of ``≥ 2k`` records while the cost ``S`` does not increase and every part
    stays valid (``≥ k`` records, ``Diverse ≥ ℓ``). An addition to SPEC §14.3 (whose rounds
    merge a too-small cluster into its nearest neighbour and can leave clusters far above k,
    e.g. §16.5 (3, 2)): clusters of at most ``REFINE_EXHAUSTIVE_MAX`` records try every
    bipartition (the cheapest valid one wins); larger ones try the hierarchy split and the
    sorted cut of :func:`partition_blocks`. Never increases the total cost.

    Returns
    -------
    list of int64 arrays
        The refined clusters (positions), ordered by smallest member.
    """
    if not clusters:
        return []
    ancestors = [h.codes[table.quasi_identifier_codes[:, i]] for i, h in enumerate(table.hierarchies)]
    done: list[np.ndarray] = []
    stack = [np.asarray(c, dtype=np.int64) for c in clusters]
    while stack:
        cluster = stack.pop()
        if len(cluster) < 2 * k:
            done.append(cluster)
            continue
        cost = cluster_cost(table, cluster)
        best: tuple[float, list[np.ndarray]] | None = None  # (total cost, the parts)
        if len(cluster) <= REFINE_EXHAUSTIVE_MAX:
            rest = cluster[1:]
            totals = kernel("bipartition_costs")(table.ancestors, table.range_tensor, table.heights, table.weights, cluster, k)
            masks = np.flatnonzero(totals <= cost + 1e-9)
            # the greedy certificates of every candidate's two sides in one compiled call; a side it cannot decide
            # (2) is decided by records_diverse_at_least's exact search, as _allowable would
            certified = kernel("bipartition_diversity")(cluster, *table.sensitive_tuples, masks.astype(np.int64), k, ell)
            bits = np.arange(len(rest))
            for i, mask in enumerate(masks):
                total = float(totals[mask])
                if (best is None or total < best[0] - 1e-9) and certified[i, 0] and certified[i, 1]:
                    chosen = ((int(mask) >> bits) & 1).astype(bool)
                    left = np.concatenate([cluster[:1], rest[~chosen]])
                    right = rest[chosen]
                    if all(
                        status == 1 or records_diverse_at_least(table, side, ell)
                        for status, side in ((certified[i, 0], left), (certified[i, 1], right))
                    ):
                        best = (total, [left, right])
        else:
            parts = _split_by_hierarchy(table, ancestors, cluster, k, ell)
            if parts is None:
                parts = _split_sorted(table, cluster, k, ell)
            split_cost = float(sum(cluster_cost(table, p) for p in parts)) if parts is not None else np.inf
            if parts is not None and split_cost <= cost + 1e-9:
                best = (split_cost, parts)
        if best is None:
            done.append(cluster)
        else:
            stack.extend(best[1])
    return sorted((np.sort(c) for c in done), key=lambda c: int(c[0]))


def blocked_clusters(
    table: EncodedTable,
    *,
    k: int,
    ell: int,
    max_block_size: int = 256,
    whole_table_tuples: int = GREEDY_MAX_TUPLES,
    progress: Progress = no_progress,
) -> tuple[list[np.ndarray], int]:
    """:func:`greedy_clusters` and :func:`refine_clusters` on the whole table when it holds at most
    ``whole_table_tuples`` distinct quasi-identifier tuples (the compiled greedy keeps the edge weights between
    them, ``O(d²)`` memory); otherwise :func:`partition_blocks` first and both inside every block.
    ``progress(blocks done, n_blocks)`` is called after each block (:mod:`pipeline.core.progress`).

    Returns
    -------
    (clusters, n_blocks)
        Cluster positions (ordered by smallest member) and the number of blocks (1: the whole table).

    Raises
    ------
    InfeasibleError
        As :func:`partition_blocks`.
    """
    clusters: list[np.ndarray] = []
    if len(np.unique(table.quasi_identifier_codes, axis=0)) <= whole_table_tuples:
        _validate_parameters(len(table), k, ell)
        blocks = [np.arange(len(table), dtype=np.int64)]
    else:
        blocks = partition_blocks(table, k=k, ell=ell, max_block_size=max_block_size)
    for done, block in enumerate(blocks, start=1):
        local_table = table if len(blocks) == 1 else table.subset(block)
        for local in refine_clusters(local_table, greedy_clusters(local_table, k=k, ell=ell), k=k, ell=ell):
            clusters.append(block[local])
        progress(done, len(blocks))
    return sorted(clusters, key=lambda cluster: int(cluster.min())), len(blocks)
