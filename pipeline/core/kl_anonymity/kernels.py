"""Compiled hot loops of the (k, ℓ) model (:mod:`pipeline.core.kl_anonymity`).

The blocked method evaluates the cost ``S`` (SPEC §14.2) and the certificate ``Diverse ≥ ℓ`` (SPEC §14.1) of
hundreds of thousands of small candidate clusters (block splits, bipartitions of the refinement). In numpy every
evaluation pays a dozen array calls (``np.unique`` on rows above all); here each one is a single compiled loop over
the members. The kernels compute exactly what the reference functions compute, in the same floating-point order
(:func:`pipeline.core.kl_anonymity.costs.cluster_cost`, :func:`pipeline.core.kl_anonymity.diverse.diverse_greedy`),
so the clustering does not change (``tests/core/test_kl_kernels.py`` checks the equality on random tables).

Inputs are the per-table arrays of :class:`pipeline.core.kl_anonymity.table.EncodedTable`:

* ``ancestors``: int64 ``(n, q, L)``, the code of every record's ancestor at every level of each quasi-identifier's
  hierarchy, padded past the hierarchy's height with its root code (``L`` = largest height + 1);
* ``range_tensor``: float64 ``(q, L, max nodes)``, the range ``R`` of every node; ``heights``: int64 ``(q,)``;
  ``weights``: float64 ``(q,)``, the weights ``c_i``;
* ``tuple_ids``: int64 ``(n,)``, the rank of every record's sensitive tuple among the table's distinct tuples in
  lexicographic order (``np.unique(..., axis=0)`` order); ``tuples``: int64 ``(d, m)``, those distinct tuples.

No pandas and no Python objects: integer and float arrays in, numbers out.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = [
    "bipartition_costs",
    "bipartition_diversity",
    "cluster_cost_compiled",
    "cluster_levels_compiled",
    "greedy_certificate_compiled",
]

#: Above this many distinct tuples the greedy certificate orders tuples by value frequencies (as
#: :func:`pipeline.core.kl_anonymity.diverse.diverse_greedy`).
CONFLICT_ORDER_LIMIT = 512


@njit(cache=True)
def cluster_levels_compiled(ancestors: np.ndarray, positions: np.ndarray) -> np.ndarray:
    """Per quasi-identifier, the lowest level at which all ``positions`` share their ancestor: int64 ``(q,)``."""
    q = ancestors.shape[1]
    depth = ancestors.shape[2]
    levels = np.zeros(q, dtype=np.int64)
    first = positions[0]
    for i in range(q):
        for h in range(depth):
            value = ancestors[first, i, h]
            same = True
            for p in positions:
                if ancestors[p, i, h] != value:
                    same = False
                    break
            if same:
                levels[i] = h
                break
    return levels


@njit(cache=True)
def _record_cost(
    ancestors: np.ndarray, range_tensor: np.ndarray, heights: np.ndarray, weights: np.ndarray, first: int, levels: np.ndarray
) -> float:
    total = 0.0
    for i in range(len(levels)):
        level = levels[i]
        total += weights[i] * (level / heights[i]) * range_tensor[i, level, ancestors[first, i, level]]
    return total


@njit(cache=True)
def cluster_cost_compiled(
    ancestors: np.ndarray, range_tensor: np.ndarray, heights: np.ndarray, weights: np.ndarray, positions: np.ndarray
) -> float:
    """``S(C)`` of SPEC §14.2 for the records at ``positions`` (non-empty), as
    :func:`pipeline.core.kl_anonymity.costs.cluster_cost` computes it (same operations, same order)."""
    levels = cluster_levels_compiled(ancestors, positions)
    return len(positions) * _record_cost(ancestors, range_tensor, heights, weights, positions[0], levels)


@njit(cache=True)
def _bipartition(values: np.ndarray, mask: int, left: np.ndarray, right: np.ndarray) -> tuple[int, int]:
    """Split ``values`` by ``mask`` into the scratch arrays: ``right`` gets ``values[1 + b]`` for every set bit ``b``,
    ``left`` ``values[0]`` and the others, each in order; returns (n_left, n_right)."""
    n_left = 1
    n_right = 0
    left[0] = values[0]
    for b in range(len(values) - 1):
        if (mask >> b) & 1:
            right[n_right] = values[1 + b]
            n_right += 1
        else:
            left[n_left] = values[1 + b]
            n_left += 1
    return n_left, n_right


@njit(cache=True)
def bipartition_costs(
    ancestors: np.ndarray, range_tensor: np.ndarray, heights: np.ndarray, weights: np.ndarray, cluster: np.ndarray, k: int
) -> np.ndarray:
    """For every ``mask`` in ``1 .. 2^(len(cluster)-1) - 1``: ``S(left) + S(right)`` where ``right`` holds
    ``cluster[1 + b]`` for every set bit ``b`` of ``mask`` and ``left`` the others (with ``cluster[0]``); ``inf`` when a
    side has fewer than ``k`` records. float64 ``(2^(len(cluster)-1),)`` (entry 0 unused, ``inf``)."""
    rest = len(cluster) - 1
    out = np.full(1 << rest, np.inf)
    left = np.empty(len(cluster), dtype=np.int64)
    right = np.empty(len(cluster), dtype=np.int64)
    for mask in range(1, 1 << rest):
        n_left, n_right = _bipartition(cluster, mask, left, right)
        if n_left < k or n_right < k:
            continue
        out[mask] = cluster_cost_compiled(ancestors, range_tensor, heights, weights, left[:n_left]) + cluster_cost_compiled(
            ancestors, range_tensor, heights, weights, right[:n_right]
        )
    return out


@njit(cache=True)
def bipartition_diversity(
    cluster: np.ndarray, tuple_ids: np.ndarray, tuples: np.ndarray, masks: np.ndarray, k: int, ell: int
) -> np.ndarray:
    """For every bipartition ``masks[i]`` of ``cluster`` (as :func:`bipartition_costs` splits it: ``right`` holds
    ``cluster[1 + b]`` for every set bit ``b``, ``left`` the others with ``cluster[0]``), what the greedy certificate
    of :func:`pipeline.core.kl_anonymity.diverse.records_diverse_at_least` says of each side being allowable
    (``≥ k`` records and ``Diverse ≥ ell``): int8 ``(len(masks), 2)`` (left, right), 0 not allowable (fewer than
    ``k`` or ``ell`` records, or an attribute with fewer than ``ell`` distinct values), 1 allowable (a greedy
    certificate of ``ell`` totally different tuples), 2 undecided (the exact search must decide). ``tuple_ids``,
    ``tuples``: :attr:`pipeline.core.kl_anonymity.table.EncodedTable.sensitive_tuples`."""
    ranks = tuple_ids[cluster]
    out = np.zeros((len(masks), 2), dtype=np.int8)
    left = np.empty(len(cluster), dtype=np.int64)
    right = np.empty(len(cluster), dtype=np.int64)
    for i in range(len(masks)):
        n_left, n_right = _bipartition(ranks, masks[i], left, right)
        for side in range(2):
            n = n_left if side == 0 else n_right
            if n < k or n < ell:
                continue
            found = greedy_certificate_compiled(left[:n_left] if side == 0 else right[:n_right], tuples, ell)
            if found >= ell:
                out[i, side] = 1
            elif found >= 0:
                out[i, side] = 2
    return out


@njit(cache=True)
def greedy_certificate_compiled(tuple_ids: np.ndarray, tuples: np.ndarray, stop_at: int) -> int:
    """:func:`pipeline.core.kl_anonymity.diverse.diverse_greedy` of the tuples ``tuples[tuple_ids]`` with
    ``stop_at`` (``stop_at <= 0``: no early stop), and ``-1`` when some attribute has fewer than ``stop_at`` distinct
    values among them (no certificate can exist).

    Same order as the reference: distinct tuples in lexicographic order; up to ``CONFLICT_ORDER_LIMIT`` of them by
    conflicts ascending (tuples not totally different, itself included), then count descending, then rank; above,
    by the summed frequencies of their values among the distinct tuples, then rank."""
    m = tuples.shape[1]
    if len(tuple_ids) == 0:
        return 0
    ids = np.sort(tuple_ids)
    distinct = np.empty(len(ids), dtype=np.int64)
    counts = np.zeros(len(ids), dtype=np.int64)
    d = 0
    for r in range(len(ids)):
        if r == 0 or ids[r] != ids[r - 1]:
            distinct[d] = ids[r]
            d += 1
        counts[d - 1] += 1
    distinct = distinct[:d]
    counts = counts[:d]
    width = 0
    for a in range(d):
        for j in range(m):
            width = max(width, tuples[distinct[a], j] + 1)
    seen = np.zeros((m, width), dtype=np.int64)  # distinct tuples holding each value
    for a in range(d):
        for j in range(m):
            seen[j, tuples[distinct[a], j]] += 1
    if stop_at > 0:
        for j in range(m):
            values = 0
            for v in range(width):
                if seen[j, v] > 0:
                    values += 1
            if values < stop_at:
                return -1
    if d <= CONFLICT_ORDER_LIMIT:
        conflicts = np.zeros(d, dtype=np.int64)
        for a in range(d):
            for b in range(d):
                for j in range(m):
                    if tuples[distinct[a], j] == tuples[distinct[b], j]:
                        conflicts[a] += 1
                        break
        keys = np.empty(d, dtype=np.int64)  # conflicts asc, counts desc, rank asc
        for a in range(d):
            keys[a] = (conflicts[a] * (len(ids) + 1) + (len(ids) - counts[a])) * (d + 1) + a
        order = np.argsort(keys)
    else:
        score = np.zeros(d, dtype=np.int64)
        for a in range(d):
            for j in range(m):
                score[a] += seen[j, tuples[distinct[a], j]]
        order = np.argsort(score, kind="mergesort")
    used = np.zeros((m, width), dtype=np.bool_)
    chosen = 0
    for index in order:
        free = True
        for j in range(m):
            if used[j, tuples[distinct[index], j]]:
                free = False
                break
        if free:
            for j in range(m):
                used[j, tuples[distinct[index], j]] = True
            chosen += 1
            if stop_at > 0 and chosen >= stop_at:
                break
    return chosen


@njit(cache=True)
def _popcount(bits: int) -> int:
    count = 0
    while bits:
        bits &= bits - 1
        count += 1
    return count


@njit(cache=True)
def largest_totally_different_compiled(tuples: np.ndarray) -> np.ndarray:
    """Indices into ``tuples`` (int64 ``(d, m)``, distinct rows, ``d <= 62``) of a largest set of pairwise totally
    different rows: the branch and bound of
    :func:`pipeline.core.kl_anonymity.diverse._largest_totally_different` (lowest index first, depth first, the
    first largest set found wins; bound: ``min_j`` distinct values of attribute ``j``), with an explicit stack."""
    d, m = tuples.shape
    neighbours = np.zeros(d, dtype=np.int64)
    for a in range(d):
        for b in range(d):
            different = True
            for j in range(m):
                if tuples[a, j] == tuples[b, j]:
                    different = False
                    break
            if different:
                neighbours[a] |= np.int64(1) << np.int64(b)
    upper = d
    for j in range(m):
        values = np.unique(tuples[:, j])
        upper = min(upper, len(values))
    best = np.empty(d, dtype=np.int64)
    n_best = 0
    chosen = np.empty(d + 1, dtype=np.int64)
    candidates = np.zeros(d + 1, dtype=np.int64)
    candidates[0] = (np.int64(1) << np.int64(d)) - 1
    depth = 0
    while True:
        bits = candidates[depth]
        if bits != 0 and n_best < upper and depth + _popcount(bits) > n_best:
            low = bits & -bits
            vertex = 0
            while (low >> np.int64(vertex)) != 1:
                vertex += 1
            candidates[depth] = bits ^ low
            chosen[depth] = vertex
            candidates[depth + 1] = candidates[depth] & neighbours[vertex]
            depth += 1
            if depth > n_best:
                best[:depth] = chosen[:depth]
                n_best = depth
        else:
            if depth == 0:
                break
            depth -= 1
    return best[:n_best].copy()


@njit(cache=True)
def greedy_witness_compiled(tuples: np.ndarray) -> np.ndarray:
    """Indices into ``tuples`` (int64 ``(d, m)``, distinct rows in lexicographic order, non-negative codes) of the
    greedy set of pairwise totally different rows that
    :func:`pipeline.core.kl_anonymity.diverse.diverse_witness` takes above ``DIVERSE_EXACT_LIMIT`` distinct
    tuples: rows by conflicts ascending (up to ``CONFLICT_ORDER_LIMIT`` rows; above, in their order), then
    rank, each taken when it shares no value with those taken before."""
    d, m = tuples.shape
    conflicts = np.zeros(d, dtype=np.int64)
    if d <= CONFLICT_ORDER_LIMIT:
        for a in range(d):
            for b in range(d):
                for j in range(m):
                    if tuples[a, j] == tuples[b, j]:
                        conflicts[a] += 1
                        break
    order = np.argsort(conflicts, kind="mergesort")
    width = 0
    for a in range(d):
        for j in range(m):
            width = max(width, tuples[a, j] + 1)
    used = np.zeros((m, width), dtype=np.bool_)
    chosen = np.empty(d, dtype=np.int64)
    n_chosen = 0
    for index in order:
        free = True
        for j in range(m):
            if used[j, tuples[index, j]]:
                free = False
                break
        if free:
            for j in range(m):
                used[j, tuples[index, j]] = True
            chosen[n_chosen] = index
            n_chosen += 1
    return chosen[:n_chosen].copy()
