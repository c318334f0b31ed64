"""Compiled main loop of SID creation (:func:`pipeline.core.rating.create_sids`): Rating's bucketization.

The main loop makes one SID per iteration: it takes the dangerous buckets and the first ℓ' buckets of the sequence
(stable descending size order), removes one value from each, and restores the order (improved Rating: P1
Algorithm 13; plain Rating: a stable bubble sort). It is inherently sequential, and in Python it cost about a third
of a 1M-record shard's CPU time (issue 17), so it runs compiled with numba. Both kernels compute exactly what the
readable loops of :func:`pipeline.core.rating.create_sids` with ``trace=True`` compute (the same SIDs and Algorithm
13's comparison counts; ``tests/core/test_rating_kernel.py`` checks the equality on random tables against the
straightforward reference of ``tests/core/reference_algorithms.py``).

Improved Rating keeps the sequence as size classes (what ``_restore_order`` does to the list, in O(ℓ) per SID
whatever the number of buckets of one size, issue 14): taking the first ℓ' buckets and decrementing each moves every
taken bucket of size s to the front of size class s-1, the taken ones in their order, the rest keeping their places.
Each class is a singly linked list of bucket codes (``head`` per size, ``next_bucket`` per bucket; pushes and pops at
the front), and the non-empty classes form a list in descending size (``lower``: the next smaller non-empty size).
Every SID starts at the largest size, so only the top of that list changes.

No pandas and no Python objects: integer arrays in, integer arrays out.
"""

from __future__ import annotations

import numpy as np
from numba import njit

__all__ = ["improved_sid_loop", "plain_sid_loop"]


@njit(cache=True)
def improved_sid_loop(
    remaining: np.ndarray, sequence: np.ndarray, dangerous: np.ndarray, ell: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The main loop of improved Rating (P1 Algorithms 13 and 19, SPEC §6.3) on bucket codes.

    Parameters
    ----------
    remaining
        int64 ``(n_buckets,)``: the size of every bucket; decremented in place (what is left for the residuals).
    sequence
        int64: the non-dangerous buckets in stable descending size order (ties: first appearance).
    dangerous
        int64: the dangerous buckets (``ℓ·|B| >= |D|``), taken by every SID, in sequence order.
    ell
        ℓ >= len(dangerous).

    Returns
    -------
    (taken, comparisons, final_sequence)
        ``taken``: int64 ``(n_sids * ℓ,)``, the buckets of SID 1, then SID 2, … (each SID: the dangerous buckets,
        then the ℓ' taken from the sequence, in sequence order); ``comparisons``: int64 ``(n_sids,)``, per SID 1 +
        the positions Algorithm 13's two scans moved (SPEC §16.3); ``final_sequence``: the sequence after the last
        SID, in stable descending size order (buckets of size 0 last).
    """
    n = len(sequence)
    n_dangerous = len(dangerous)
    chosen = ell - n_dangerous
    total = 0
    max_size = 0
    for b in range(len(remaining)):
        total += remaining[b]
    for b in sequence:
        max_size = max(max_size, remaining[b])
    head = np.full(max_size + 1, -1, dtype=np.int64)
    tail = np.full(max_size + 1, -1, dtype=np.int64)
    count = np.zeros(max_size + 1, dtype=np.int64)
    next_bucket = np.full(len(remaining), -1, dtype=np.int64)
    for b in sequence:  # each class in sequence order
        size = remaining[b]
        if head[size] == -1:
            head[size] = b
        else:
            next_bucket[tail[size]] = b
        tail[size] = b
        count[size] += 1
    lower = np.full(max_size + 1, -1, dtype=np.int64)
    top = -1
    previous = -1
    for size in range(max_size, -1, -1):
        if count[size] > 0:
            if previous == -1:
                top = size
            else:
                lower[previous] = size
            previous = size
    n_positive = n - count[0]
    bound = total // ell
    taken = np.empty(bound * ell, dtype=np.int64)
    comparisons = np.empty(bound, dtype=np.int64)
    part_bucket = np.empty(max(chosen, 1), dtype=np.int64)
    part_size = np.empty(max(chosen, 1), dtype=np.int64)
    candidates = np.empty(2 * max(chosen, 1), dtype=np.int64)
    n_sids = 0
    while True:
        exhausted = False
        for d in dangerous:
            if remaining[d] == 0:
                exhausted = True
        if exhausted or (n_dangerous == 0 if chosen == 0 else n_positive < chosen):
            break
        base = n_sids * ell
        for j in range(n_dangerous):
            taken[base + j] = dangerous[j]
            remaining[dangerous[j]] -= 1
        # take the first ℓ' buckets: the fronts of the largest classes
        size = top
        k = 0
        while k < chosen:
            while k < chosen and count[size] > 0:
                b = head[size]
                head[size] = next_bucket[b]
                count[size] -= 1
                part_bucket[k] = b
                part_size[k] = size
                taken[base + n_dangerous + k] = b
                k += 1
            if k < chosen:
                size = lower[size]
        steps = 1
        if 0 < chosen < n:
            boundary = part_size[chosen - 1]
            untaken_of_boundary = count[boundary]
            if untaken_of_boundary > 0:  # the bucket after the taken ones has the boundary size: Algorithm 13 moves
                boundary_taken = 0
                for j in range(chosen):
                    if part_size[j] == boundary:
                        boundary_taken += 1
                steps += (boundary_taken - 1) + (untaken_of_boundary - 1)
        comparisons[n_sids] = steps
        n_sids += 1
        if chosen == 0:
            continue
        boundary = part_size[chosen - 1]
        rest = lower[boundary]  # the first class below the touched ones (links not changed yet)
        if rest != -1 and rest == boundary - 1:
            rest = lower[rest]
        # decrement: the taken buckets of size s go to the front of class s-1, in their order
        for j in range(chosen - 1, -1, -1):
            b = part_bucket[j]
            target = part_size[j] - 1
            remaining[b] -= 1
            if target == 0:
                n_positive -= 1
            next_bucket[b] = head[target]
            head[target] = b
            count[target] += 1
        # relink the touched classes (sizes s and s-1 of every taken size s, descending) above ``rest``
        n_candidates = 0
        for j in range(chosen):
            for size in (part_size[j], part_size[j] - 1):
                if n_candidates == 0 or candidates[n_candidates - 1] > size:
                    candidates[n_candidates] = size
                    n_candidates += 1
        top = -1
        previous = -1
        for j in range(n_candidates):
            size = candidates[j]
            if count[size] > 0:
                if previous == -1:
                    top = size
                else:
                    lower[previous] = size
                previous = size
        if previous == -1:
            top = rest
        else:
            lower[previous] = rest
    final_sequence = np.empty(n, dtype=np.int64)
    k = 0
    size = top
    while size != -1:
        b = head[size]
        while b != -1:
            final_sequence[k] = b
            k += 1
            b = next_bucket[b]
        size = lower[size]
    return taken[: n_sids * ell], comparisons[:n_sids], final_sequence


@njit(cache=True)
def plain_sid_loop(remaining: np.ndarray, sequence: np.ndarray, ell: int) -> tuple[np.ndarray, np.ndarray]:
    """The main loop of plain Rating (P0 as described by P1 §6.1): the ℓ largest buckets, then a stable bubble sort.

    Parameters
    ----------
    remaining
        int64 ``(n_buckets,)``: the size of every bucket; decremented in place.
    sequence
        int64: every bucket in stable descending size order (ties: first appearance).
    ell
        ℓ >= 2.

    Returns
    -------
    (taken, final_sequence)
        ``taken``: int64 ``(n_sids * ℓ,)``, the buckets of SID 1, then SID 2, …; ``final_sequence``: the sequence
        after the last SID.
    """
    sequence = sequence.copy()
    n = len(sequence)
    total = 0
    for b in range(len(remaining)):
        total += remaining[b]
    bound = total // ell
    taken = np.empty(bound * ell, dtype=np.int64)
    n_sids = 0
    while n >= ell and remaining[sequence[ell - 1]] > 0:
        for j in range(ell):
            taken[n_sids * ell + j] = sequence[j]
            remaining[sequence[j]] -= 1
        n_sids += 1
        for end in range(n - 1, 0, -1):  # the stable bubble sort, descending
            swapped = False
            for j in range(end):
                if remaining[sequence[j]] < remaining[sequence[j + 1]]:
                    swapped_bucket = sequence[j]
                    sequence[j] = sequence[j + 1]
                    sequence[j + 1] = swapped_bucket
                    swapped = True
            if not swapped:
                break
    return taken[: n_sids * ell], sequence
