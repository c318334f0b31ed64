"""The greedy of SPEC §14.3 compiled, without the ``n × n`` edge matrix (:mod:`pipeline.core.kl_anonymity`).

:func:`pipeline.core.kl_anonymity.greedy.greedy_clusters` keeps the single-linkage distance between every two
clusters in an ``n × n`` matrix (``O(n²)`` memory, 6,000 records at most) and rescans a row of it per merge in numpy.
This loop takes the same decisions without the matrix:

* An edge weight ``w(u, v) = S({u, v})`` depends only on the two records' quasi-identifier tuples, so the weights
  are kept between the ``d`` *distinct* tuples (``d × d``; Adult's 30,718 records hold 1,091 tuples).
* The distance from cluster C to a cluster D is ``min_{v ∈ D} r[tuple(v)]`` with ``r[b] = min_{a ∈ tuples(C)} w(a,
  b)``. The partners are visited by increasing ``r``, through the records of each tuple (buckets): a cluster is met
  first at its distance, so the partners at the smallest distance are known as soon as one distance level is
  exhausted. Among them the choice is as in the reference: the smallest rounded cost increase, then the smaller
  partner, then the smallest member id; while ``Diverse(C) < ℓ``, the first level holding a partner with a tuple
  totally different from every tuple of C's witness set wins, and when no partner anywhere has one, the
  ``exact_partner_checks`` nearest partners are tested exactly (as the reference).
* Which cluster merges next (the smallest member id among the clusters below ``s`` records, or below ``Diverse ℓ``
  in the repair) is found with a pointer that only moves forward within a round.
* The partners at one distance are not all visited (the shortcut, issue 18: visiting every record of a tuple made
  the loop quadratic in the records per tuple; 27 s for Adult's records four times over, 3.6 s with it). A cluster
  whose records share one tuple merges with C at the same cost whichever it is, and its cost increase grows with its
  size (costs are >= 0 and 0 for one tuple), so per tuple only its first eligible such cluster by (size, smallest
  member) can be chosen: the first record still alone, in record order, that extends C's witness set (none when,
  on some sensitive attribute, every record still alone there holds a value of the witness set: counted per tuple
  and value), else the smallest of its clusters of two or more records. Clusters that span several tuples are
  compared as before, through per-tuple lists of their records. When no partner is eligible at any distance, the
  full visit runs as without the shortcut. Weights or ranges that are not finite and >= 0, or a hierarchy of height
  0, turn the shortcut off. The decisions are the same as long as the costs stay finite (``encode_table`` refuses
  weights that could overflow them: with an infinite cost increase the order of partners is no longer total).

Same floating-point operations in the same order as the reference, so the same clusters
(``tests/core/test_kl_kernels.py`` checks the equality on random tables). Integer and float arrays in, one label per
record out.
"""

from __future__ import annotations

import numpy as np
from numba import njit

from pipeline.core.kl_anonymity.kernels import (
    greedy_certificate_compiled,
    greedy_witness_compiled,
    largest_totally_different_compiled,
)

__all__ = ["greedy_labels"]


@njit(cache=True)
def _merge_cost(
    ancestors: np.ndarray,
    range_tensor: np.ndarray,
    heights: np.ndarray,
    weights: np.ndarray,
    level: np.ndarray,
    c: int,
    d: int,
    out_levels: np.ndarray,
) -> float:
    """Per-record cost of C ∪ D (C, D: clusters named by a member record); fills ``out_levels``."""
    q, depth = ancestors.shape[1], ancestors.shape[2]
    cost = 0.0
    for i in range(q):
        first_equal = 0
        for h in range(depth):
            if ancestors[d, i, h] != ancestors[c, i, h]:
                first_equal += 1
        lv = max(first_equal, max(level[c, i], level[d, i]))
        out_levels[i] = lv
        cost += weights[i] * (lv / heights[i]) * range_tensor[i, lv, ancestors[c, i, lv]]
    return cost


@njit(cache=True)
def _before(
    link: float, increase: float, size: int, smallest: int, link2: float, increase2: float, size2: int, smallest2: int
) -> bool:
    """The reference's order of partners: distance, rounded cost increase, size, smallest member id."""
    if link != link2:
        return link < link2
    if increase != increase2:
        return increase < increase2
    if size != size2:
        return size < size2
    return smallest < smallest2


@njit(cache=True)
def _round9(x: float) -> float:
    return np.rint(x * 1e9) / 1e9


@njit(cache=True)
def _rounded_increase(size: np.ndarray, record_cost: np.ndarray, c: int, d: int, cost: float) -> float:
    """The reference's cost increase of C ∪ D (per-record cost ``cost``) over C and D apart, rounded to 1e-9."""
    return _round9((size[c] + size[d]) * cost - size[c] * record_cost[c] - size[d] * record_cost[d])


@njit(cache=True)
def _distinct_tuple_ids(
    tuple_ids: np.ndarray, head: int, next_member: np.ndarray, mark: np.ndarray, stamp: int, buffer: np.ndarray
) -> np.ndarray:
    count = 0
    u = head
    while u >= 0:
        t = tuple_ids[u]
        if mark[t] != stamp:
            mark[t] = stamp
            buffer[count] = t
            count += 1
        u = next_member[u]
    return np.sort(buffer[:count])


@njit(cache=True)
def _union_diverse(
    tuple_ids: np.ndarray,
    tuples: np.ndarray,
    c: int,
    d: int,
    next_member: np.ndarray,
    exact_limit: int,
) -> int:
    """:func:`pipeline.core.kl_anonymity.diverse.diverse` of the tuples of C ∪ D."""
    ids = np.empty(0, dtype=np.int64)
    for head in (c, d):
        u = head
        while u >= 0:
            ids = np.append(ids, tuple_ids[u])
            u = next_member[u]
    distinct = np.unique(ids)
    if len(distinct) <= exact_limit:
        return len(largest_totally_different_compiled(tuples[distinct]))
    return greedy_certificate_compiled(ids, tuples, 0)


@njit(cache=True)
def _cluster_extends(
    d: int,
    c: int,
    tuple_ids: np.ndarray,
    tuples: np.ndarray,
    next_member: np.ndarray,
    witness: np.ndarray,
    witness_len: np.ndarray,
    tuple_checked: np.ndarray,
    tuple_extends: np.ndarray,
    stamp: int,
) -> bool:
    """Whether some member of cluster D has a sensitive tuple totally different from every tuple of C's witness set
    (cached per tuple for this ``stamp``, as the partner search of :func:`greedy_labels` caches it)."""
    m = tuples.shape[1]
    v = d
    while v >= 0:
        t = tuple_ids[v]
        if tuple_checked[t] != stamp:
            tuple_checked[t] = stamp
            free = True
            for w_index in range(witness_len[c]):
                other = witness[c, w_index]
                for j in range(m):
                    if tuples[t, j] == tuples[other, j]:
                        free = False
                        break
                if not free:
                    break
            tuple_extends[t] = free
        if tuple_extends[t]:
            return True
        v = next_member[v]
    return False


@njit(cache=True)
def _is_exact(level: np.ndarray, d: int) -> bool:
    """Whether every member of cluster D has the same quasi-identifier tuple (every LCA level 0)."""
    for i in range(level.shape[1]):
        if level[d, i] != 0:
            return False
    return True


@njit(cache=True)
def greedy_labels(
    ancestors: np.ndarray,
    range_tensor: np.ndarray,
    heights: np.ndarray,
    weights: np.ndarray,
    tuple_ids: np.ndarray,
    tuples: np.ndarray,
    quasi_identifier_ids: np.ndarray,
    tuple_weights: np.ndarray,
    k: int,
    ell: int,
    exact_partner_checks: int,
    exact_limit: int,
    max_value_counts: int,
) -> np.ndarray:
    """SPEC §14.3 on ``n`` records; int64 ``(n,)``: every record's cluster, named by a member record.

    Parameters
    ----------
    ancestors, range_tensor, heights, weights, tuple_ids, tuples
        As :mod:`pipeline.core.kl_anonymity.kernels`.
    quasi_identifier_ids
        int64 ``(n,)``: every record's distinct quasi-identifier tuple (0..d-1).
    tuple_weights
        float64 ``(d, d)``: the edge weight ``S({u, v})`` between records of those tuples (diagonal 0).
    k, ell
        The model's parameters (validated by the caller; the table is feasible).
    exact_partner_checks, exact_limit
        ``EXACT_PARTNER_CHECKS`` and ``DIVERSE_EXACT_LIMIT`` of :mod:`pipeline.core.kl_anonymity.diverse`.
    max_value_counts
        Largest (tuples × sensitive values) table of counts the partner search's shortcut keeps (int64 cells,
        ``GREEDY_MAX_VALUE_COUNTS`` of :mod:`pipeline.core.kl_anonymity.greedy`); above it, or at 0, the shortcut
        scans the records still alone without counts (the same clusters).
    """
    n = len(tuple_ids)
    q = ancestors.shape[1]
    n_qi = tuple_weights.shape[0]
    m = tuples.shape[1]
    # buckets: the records of every quasi-identifier tuple, ascending
    bucket_records = np.argsort(quasi_identifier_ids, kind="mergesort")
    bucket_start = np.zeros(n_qi + 1, dtype=np.int64)
    for u in range(n):
        bucket_start[quasi_identifier_ids[u] + 1] += 1
    for b in range(n_qi):
        bucket_start[b + 1] += bucket_start[b]
    label = np.arange(n)
    alive = np.ones(n, dtype=np.bool_)
    size = np.ones(n, dtype=np.int64)
    smallest = np.arange(n)
    level = np.zeros((n, q), dtype=np.int64)
    record_cost = np.zeros(n)
    diversity = np.ones(n, dtype=np.int64)
    width = max(ell, 1)
    witness = np.full((n, width), -1, dtype=np.int64)  # tuple ids, kept while Diverse < ell
    witness_len = np.ones(n, dtype=np.int64)
    witness[:, 0] = tuple_ids
    next_member = np.full(n, -1, dtype=np.int64)
    tail = np.arange(n)
    n_alive = n
    # scratch
    r = np.empty(n_qi)
    qi_mark = np.zeros(n_qi, dtype=np.int64)
    qi_list = np.empty(n_qi, dtype=np.int64)
    visit = np.zeros(n, dtype=np.int64)
    extending = np.zeros(n, dtype=np.bool_)
    link_of = np.zeros(n)
    visited = np.empty(n, dtype=np.int64)
    tuple_mark = np.zeros(len(tuples), dtype=np.int64)
    tuple_buffer = np.empty(len(tuples), dtype=np.int64)
    tuple_checked = np.zeros(len(tuples), dtype=np.int64)
    cost_stamp = np.zeros(n_qi, dtype=np.int64)
    cost_cache = np.zeros(n_qi)
    levels_cache = np.zeros((n_qi, q), dtype=np.int64)
    tuple_extends = np.zeros(len(tuples), dtype=np.bool_)
    new_levels = np.empty(q, dtype=np.int64)
    best_levels = np.empty(q, dtype=np.int64)
    fast = np.isfinite(range_tensor).all() and (range_tensor >= 0.0).all()
    for i in range(q):
        if heights[i] <= 0 or not np.isfinite(weights[i]) or weights[i] < 0.0:
            fast = False
    single_pointer = bucket_start[:n_qi].copy()
    # per bucket, its records still alone and how many of them hold each value of each sensitive attribute: when
    # every one of them shares a value with C's witness set on some attribute, none extends it (no scan)
    value_offset = np.zeros(m + 1, dtype=np.int64)
    for j in range(m):
        value_offset[j + 1] = value_offset[j] + (tuples[:, j].max() + 1 if len(tuples) else 1)
    counted = fast and ell > 1 and n_qi * value_offset[m] <= max_value_counts  # ℓ = 1: no cluster is restricted
    n_alone = bucket_start[1:] - bucket_start[:n_qi]
    alone_values = np.zeros((n_qi if counted else 0, value_offset[m]), dtype=np.int64)
    if counted:
        for u in range(n):
            for j in range(m):
                alone_values[quasi_identifier_ids[u], value_offset[j] + tuples[tuple_ids[u], j]] += 1
    mixed_records = np.empty(n, dtype=np.int64)
    n_mixed = np.zeros(n_qi, dtype=np.int64)
    exact_clusters = np.empty(n, dtype=np.int64)
    n_exact = np.zeros(n_qi, dtype=np.int64)
    listed = np.zeros(n, dtype=np.bool_)
    fast_visit = np.zeros(n, dtype=np.int64)
    candidate_levels = np.empty(q, dtype=np.int64)
    stamp = 0
    round_size = 2
    pointer = 0
    while True:
        if n_alive == 1:
            break
        # the next cluster to merge: smallest member id among the small (or, in the repair, weak) clusters
        c = -1
        while pointer < n:
            owner = label[pointer]
            if alive[owner] and smallest[owner] == pointer:
                if (round_size <= k and size[owner] < round_size) or (round_size > k and diversity[owner] < ell):
                    c = owner
                    break
            pointer += 1
        if c < 0:
            if round_size > k:
                break
            round_size += 1
            pointer = 0
            continue
        stamp += 1
        # C's quasi-identifier tuples and the distance r to every tuple
        n_c = 0
        u = c
        while u >= 0:
            b = quasi_identifier_ids[u]
            if qi_mark[b] != stamp:
                qi_mark[b] = stamp
                qi_list[n_c] = b
                n_c += 1
            u = next_member[u]
        r[:] = np.inf
        for a_index in range(n_c):
            a = qi_list[a_index]
            for b in range(n_qi):
                if tuple_weights[a, b] < r[b]:
                    r[b] = tuple_weights[a, b]
        restricted = diversity[c] < ell
        n_visited = 0
        chosen = -1
        best_cost = 0.0
        best_increase = np.inf
        done_level = -np.inf  # distances up to here are visited
        if fast:
            fast_level = -np.inf
            while chosen < 0:
                value = np.inf
                for b in range(n_qi):
                    if fast_level < r[b] < value:
                        value = r[b]
                if value == np.inf:
                    break
                fast_level = value
                for b in range(n_qi):
                    if r[b] != value:
                        continue
                    end = bucket_start[b + 1]
                    p = single_pointer[b]
                    while p < end and not (label[bucket_records[p]] == bucket_records[p] and size[bucket_records[p]] == 1):
                        p += 1
                    single_pointer[b] = p
                    best_exact = -1
                    if restricted and counted:
                        for j in range(m):
                            blocked = 0
                            for w_index in range(witness_len[c]):
                                blocked += alone_values[b, value_offset[j] + tuples[witness[c, w_index], j]]
                            if blocked >= n_alone[b]:
                                p = end  # every record alone here (C too, if it is one) shares a value with the witness set
                                break
                    while p < end:
                        u = bucket_records[p]
                        if u != c and label[u] == u and size[u] == 1:
                            if not restricted or _cluster_extends(
                                u, c, tuple_ids, tuples, next_member, witness, witness_len, tuple_checked, tuple_extends, stamp
                            ):
                                best_exact = u
                                break
                        p += 1
                    if best_exact < 0:  # the bucket's clusters of 2+ records: the eligible one first by (size, smallest)
                        kept = bucket_start[b]
                        for index in range(bucket_start[b], bucket_start[b] + n_exact[b]):
                            e = exact_clusters[index]
                            if not alive[e] or not _is_exact(level, e):
                                continue  # dropped for good: a merged cluster, or one of several tuples, stays so
                            exact_clusters[kept] = e
                            kept += 1
                            if e == c or (
                                best_exact >= 0
                                and (
                                    size[e] > size[best_exact]
                                    or (size[e] == size[best_exact] and smallest[e] > smallest[best_exact])
                                )
                            ):
                                continue
                            if restricted and not _cluster_extends(
                                e, c, tuple_ids, tuples, next_member, witness, witness_len, tuple_checked, tuple_extends, stamp
                            ):
                                continue
                            best_exact = e
                        n_exact[b] = kept - bucket_start[b]
                    if best_exact >= 0:
                        d = best_exact
                        cost = _merge_cost(ancestors, range_tensor, heights, weights, level, c, d, candidate_levels)
                        rounded = _rounded_increase(size, record_cost, c, d, cost)
                        if chosen < 0 or _before(
                            value, rounded, size[d], smallest[d], value, best_increase, size[chosen], smallest[chosen]
                        ):
                            chosen, best_increase, best_cost = d, rounded, cost
                            best_levels[:] = candidate_levels
                    for index in range(bucket_start[b], bucket_start[b] + n_mixed[b]):
                        d = label[mixed_records[index]]
                        if d == c or fast_visit[d] == stamp:
                            continue
                        fast_visit[d] = stamp
                        if restricted and not _cluster_extends(
                            d, c, tuple_ids, tuples, next_member, witness, witness_len, tuple_checked, tuple_extends, stamp
                        ):
                            continue
                        cost = _merge_cost(ancestors, range_tensor, heights, weights, level, c, d, candidate_levels)
                        rounded = _rounded_increase(size, record_cost, c, d, cost)
                        if chosen < 0 or _before(
                            value, rounded, size[d], smallest[d], value, best_increase, size[chosen], smallest[chosen]
                        ):
                            chosen, best_increase, best_cost = d, rounded, cost
                            best_levels[:] = candidate_levels
        while chosen < 0:
            value = np.inf  # the next distance level
            for b in range(n_qi):
                if done_level < r[b] < value:
                    value = r[b]
            if value == np.inf:
                break
            done_level = value
            level_start = n_visited
            for b in range(n_qi):
                if r[b] != value:
                    continue
                for index in range(bucket_start[b], bucket_start[b + 1]):
                    d = label[bucket_records[index]]
                    if d == c or visit[d] == stamp:
                        continue
                    visit[d] = stamp
                    link_of[d] = value
                    visited[n_visited] = d
                    n_visited += 1
                    # does some member of D extend C's witness set?
                    extending[d] = restricted and _cluster_extends(
                        d, c, tuple_ids, tuples, next_member, witness, witness_len, tuple_checked, tuple_extends, stamp
                    )
            for index in range(level_start, n_visited):
                d = visited[index]
                if restricted and not extending[d]:
                    continue
                if _is_exact(level, d):  # D's members share one quasi-identifier tuple: C ∪ D depends on that tuple only
                    b = quasi_identifier_ids[d]
                    if cost_stamp[b] != stamp:
                        cost_stamp[b] = stamp
                        cost_cache[b] = _merge_cost(ancestors, range_tensor, heights, weights, level, c, d, levels_cache[b])
                    cost = cost_cache[b]
                    new_levels[:] = levels_cache[b]
                else:
                    cost = _merge_cost(ancestors, range_tensor, heights, weights, level, c, d, new_levels)
                rounded = _rounded_increase(size, record_cost, c, d, cost)
                if chosen < 0 or _before(
                    value, rounded, size[d], smallest[d], value, best_increase, size[chosen], smallest[chosen]
                ):
                    chosen, best_increase, best_cost = d, rounded, cost
                    best_levels[:] = new_levels
        if chosen < 0:  # restricted and no partner extends the witness set: nearest partners, tested exactly
            keys_link = np.empty(n_visited)
            keys_increase = np.empty(n_visited)
            for index in range(n_visited):
                d = visited[index]
                cost = _merge_cost(ancestors, range_tensor, heights, weights, level, c, d, new_levels)
                keys_link[index] = link_of[d]
                keys_increase[index] = _rounded_increase(size, record_cost, c, d, cost)
            taken = np.zeros(n_visited, dtype=np.bool_)
            first = -1
            for _ in range(min(exact_partner_checks, n_visited)):
                best = -1
                for index in range(n_visited):
                    if taken[index]:
                        continue
                    d = visited[index]
                    if best < 0:
                        best = index
                        continue
                    e = visited[best]
                    if _before(
                        keys_link[index],
                        keys_increase[index],
                        size[d],
                        smallest[d],
                        keys_link[best],
                        keys_increase[best],
                        size[e],
                        smallest[e],
                    ):
                        best = index
                taken[best] = True
                if first < 0:
                    first = best
                if _union_diverse(tuple_ids, tuples, c, visited[best], next_member, exact_limit) > diversity[c]:
                    first = best
                    break
            chosen = visited[first]
            best_cost = _merge_cost(ancestors, range_tensor, heights, weights, level, c, chosen, best_levels)
        if fast:
            for head in (c, chosen):
                if size[head] == 1:  # no longer alone
                    b = quasi_identifier_ids[head]
                    n_alone[b] -= 1
                    if counted:
                        for j in range(m):
                            alone_values[b, value_offset[j] + tuples[tuple_ids[head], j]] -= 1
            merged_exact = not best_levels.any()
            if merged_exact:
                if not listed[c]:
                    b = quasi_identifier_ids[c]
                    exact_clusters[bucket_start[b] + n_exact[b]] = c
                    n_exact[b] += 1
                    listed[c] = True
            else:
                for head in (c, chosen):
                    if _is_exact(level, head):
                        u = head
                        while u >= 0:
                            b = quasi_identifier_ids[u]
                            mixed_records[bucket_start[b] + n_mixed[b]] = u
                            n_mixed[b] += 1
                            u = next_member[u]
        # merge D into C
        d = chosen
        u = d
        while u >= 0:
            label[u] = c
            u = next_member[u]
        next_member[tail[c]] = d
        tail[c] = tail[d]
        alive[d] = False
        n_alive -= 1
        smallest[c] = min(smallest[c], smallest[d])
        size[c] += size[d]
        level[c] = best_levels
        record_cost[c] = best_cost
        stamp += 1
        distinct = _distinct_tuple_ids(tuple_ids, c, next_member, tuple_mark, stamp, tuple_buffer)
        if max(diversity[c], diversity[d]) >= ell and len(distinct) <= exact_limit:
            diversity[c] = max(diversity[c], diversity[d])
        else:
            if len(distinct) <= exact_limit:
                chosen_tuples = distinct[largest_totally_different_compiled(tuples[distinct])]
            else:
                chosen_tuples = distinct[greedy_witness_compiled(tuples[distinct])]
            diversity[c] = len(chosen_tuples)
            if diversity[c] < ell:
                witness[c, : len(chosen_tuples)] = chosen_tuples
                witness_len[c] = len(chosen_tuples)
        if round_size > k and diversity[c] < ell and smallest[c] < pointer:
            pointer = smallest[c]
    return label
