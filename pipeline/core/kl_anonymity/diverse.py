"""Diverse(C): the number of pairwise totally different sensitive tuples (SPEC §14.1) (:mod:`pipeline.core.kl_anonymity`)."""

from __future__ import annotations

import itertools

import numpy as np

from pipeline.core.compiled import kernel
from pipeline.core.kl_anonymity.table import DIVERSE_EXACT_LIMIT, EncodedTable


def _distinct_tuples(sensitive_codes: np.ndarray) -> np.ndarray:
    return np.unique(np.asarray(sensitive_codes).reshape(len(sensitive_codes), -1), axis=0)


def _compatibility(tuples: np.ndarray) -> np.ndarray:
    """``compatible[a, b]``: tuples a and b differ on every attribute (totally different)."""
    return (tuples[:, None, :] != tuples[None, :, :]).all(axis=2)


def diverse_greedy(sensitive_codes: np.ndarray, *, stop_at: int | None = None) -> int:
    """A lower bound on ``Diverse``: greedy set of pairwise totally different tuples, taking the
    tuples with the fewest conflicts first (stops early once ``stop_at`` tuples are found)."""
    codes = np.asarray(sensitive_codes)
    if len(codes) == 0:
        return 0
    tuples, counts = np.unique(codes.reshape(len(codes), -1), axis=0, return_counts=True)
    if len(tuples) <= 512:
        conflicts = (~_compatibility(tuples)).sum(axis=1)
        order = np.lexsort((-counts, conflicts))
    else:  # large sets: value frequencies as a cheap conflict proxy
        score = np.zeros(len(tuples))
        for j in range(tuples.shape[1]):
            _, inverse, value_counts = np.unique(tuples[:, j], return_inverse=True, return_counts=True)
            score += value_counts[inverse]
        order = np.argsort(score, kind="stable")
    used: list[set[int]] = [set() for _ in range(tuples.shape[1])]
    chosen = 0
    for index in order:
        row = tuples[index]
        if all(row[j] not in used[j] for j in range(len(row))):
            for j, value in enumerate(row):
                used[j].add(value)
            chosen += 1
            if stop_at is not None and chosen >= stop_at:
                break
    return chosen


def _largest_totally_different(tuples: np.ndarray) -> list[int]:
    """Indices into ``tuples`` (distinct rows) of a largest pairwise totally different set: branch
    and bound over bitsets, stopping once the bound min_j(distinct values of attribute j) is met."""
    n = len(tuples)
    compatible = _compatibility(tuples)
    neighbours = [int(sum(1 << b for b in np.flatnonzero(compatible[a]))) for a in range(n)]
    upper = int(min(len(np.unique(tuples[:, j])) for j in range(tuples.shape[1])))
    best: list[int] = []

    def extend(candidates: int, chosen: list[int]) -> None:
        nonlocal best
        if len(chosen) > len(best):
            best = list(chosen)
        while candidates and len(best) < upper:
            if len(chosen) + bin(candidates).count("1") <= len(best):
                return
            low = candidates & -candidates
            vertex = low.bit_length() - 1
            candidates ^= low
            chosen.append(vertex)
            extend(candidates & neighbours[vertex], chosen)
            chosen.pop()

    extend((1 << n) - 1, [])
    return best


def diverse_exact(sensitive_codes: np.ndarray) -> int:
    """``Diverse`` exactly: the size of the largest set of pairwise totally different tuples
    (SPEC §14.1 [choice] §15 #27), by branch and bound on the distinct tuples.

    Exponential in the worst case; meant for clusters (the gates and :func:`diverse` call it
    only up to ``DIVERSE_EXACT_LIMIT`` distinct tuples).
    """
    codes = np.asarray(sensitive_codes)
    if len(codes) == 0:
        return 0
    return len(_largest_totally_different(_distinct_tuples(codes)))


def diverse(sensitive_codes: np.ndarray) -> int:
    """``Diverse`` of a set of tuples: exact up to ``DIVERSE_EXACT_LIMIT`` distinct tuples, above
    that the greedy lower bound (which certifies ``Diverse ≥`` its value)."""
    codes = np.asarray(sensitive_codes)
    if len(codes) == 0:
        return 0
    if len(_distinct_tuples(codes)) <= DIVERSE_EXACT_LIMIT:
        return diverse_exact(codes)
    return diverse_greedy(codes)


def diverse_at_least(sensitive_codes: np.ndarray, ell: int) -> bool:
    """Whether ``Diverse ≥ ell``: a greedy certificate first (early stop), exact when it fails and
    the set is small; ``False`` when neither proves it (the caller then treats it as not
    diverse, which is safe)."""
    codes = np.asarray(sensitive_codes)
    if len(codes) < ell:
        return False
    codes2 = codes.reshape(len(codes), -1)
    if any(len(np.unique(codes2[:, j])) < ell for j in range(codes2.shape[1])):
        return False
    if diverse_greedy(codes2, stop_at=ell) >= ell:
        return True
    if len(_distinct_tuples(codes2)) <= DIVERSE_EXACT_LIMIT:
        return diverse_exact(codes2) >= ell
    return False


def records_diverse_at_least(table: EncodedTable, positions: np.ndarray, ell: int) -> bool:
    """:func:`diverse_at_least` of ``table.sensitive_codes[positions]`` (same answer), with the greedy certificate
    compiled on the table's sensitive tuple ranks (:mod:`pipeline.core.kl_anonymity.kernels`) instead of
    ``np.unique`` on rows. ``positions``: int64 array of record positions; ``ell >= 1``."""
    tuple_ids, tuples = table.sensitive_tuples
    return tuples_diverse_at_least(tuple_ids[positions], tuples, ell)


def tuples_diverse_at_least(chosen: np.ndarray, tuples: np.ndarray, ell: int) -> bool:
    """:func:`diverse_at_least` of the tuples ``tuples[chosen]`` (int64 ranks into ``tuples``, the distinct tuples in
    lexicographic order, one rank per record): a compiled greedy certificate first, the compiled exact search when it
    fails and at most ``DIVERSE_EXACT_LIMIT`` tuples are distinct, else False."""
    if len(chosen) < ell:
        return False
    found = kernel("greedy_certificate_compiled")(chosen, tuples, ell)
    if found < 0:
        return False
    if found >= ell:
        return True
    distinct = np.unique(chosen)
    return len(distinct) <= DIVERSE_EXACT_LIMIT and len(kernel("largest_totally_different_compiled")(tuples[distinct])) >= ell


def diverse_witness(sensitive_codes: np.ndarray) -> np.ndarray:
    """Row indices of a set of pairwise totally different tuples of size :func:`diverse` (the
    certificate behind the number): exact up to ``DIVERSE_EXACT_LIMIT`` distinct tuples, else greedy."""
    codes = np.asarray(sensitive_codes)
    codes = codes.reshape(len(codes), -1)
    if len(codes) == 0:
        return np.array([], dtype=np.int64)
    tuples, first = np.unique(codes, axis=0, return_index=True)
    n = len(tuples)
    if n <= DIVERSE_EXACT_LIMIT:
        return np.sort(first[_largest_totally_different(tuples)]).astype(np.int64)
    conflicts = (~_compatibility(tuples)).sum(axis=1) if n <= 512 else np.zeros(n)
    chosen_rows: list[int] = []
    used: list[set[int]] = [set() for _ in range(tuples.shape[1])]
    for index in np.argsort(conflicts, kind="stable"):
        row = tuples[index]
        if all(row[j] not in used[j] for j in range(len(row))):
            for j, value in enumerate(row):
                used[j].add(value)
            chosen_rows.append(int(first[index]))
    return np.sort(np.array(chosen_rows, dtype=np.int64))


def records_diverse(table: EncodedTable, positions: np.ndarray) -> int:
    """:func:`diverse` of ``table.sensitive_codes[positions]`` (same answer) with the compiled kernels on the table's
    sensitive tuple ranks (:func:`tuples_diverse`). ``positions``: int64 array of record positions."""
    tuple_ids, tuples = table.sensitive_tuples
    return tuples_diverse(tuple_ids[positions], tuples)


def tuples_diverse(chosen: np.ndarray, tuples: np.ndarray) -> int:
    """:func:`diverse` of the tuples ``tuples[chosen]`` (int64 ranks into ``tuples``, as
    :func:`tuples_diverse_at_least`), compiled: the exact search up to ``DIVERSE_EXACT_LIMIT`` distinct tuples, else
    the greedy lower bound."""
    if len(chosen) == 0:
        return 0
    distinct = np.unique(chosen)
    if len(distinct) <= DIVERSE_EXACT_LIMIT:
        return len(kernel("largest_totally_different_compiled")(tuples[distinct]))
    return int(kernel("greedy_certificate_compiled")(chosen, tuples, 0))


def records_witness(table: EncodedTable, positions: np.ndarray) -> np.ndarray:
    """:func:`diverse_witness` of ``table.sensitive_codes[positions]`` (the same indices into ``positions``), with
    the branch and bound and the greedy compiled (:mod:`pipeline.core.kl_anonymity.kernels`). ``positions``: int64 array of record positions."""
    tuple_ids, tuples = table.sensitive_tuples
    distinct, first = np.unique(tuple_ids[positions], return_index=True)
    if len(distinct) == 0:
        return np.array([], dtype=np.int64)
    if len(distinct) <= DIVERSE_EXACT_LIMIT:
        chosen = kernel("largest_totally_different_compiled")(tuples[distinct])
    else:
        chosen = kernel("greedy_witness_compiled")(tuples[distinct])
    return np.sort(first[chosen]).astype(np.int64)


#: Partners tested exactly for ``Diverse(C ∪ D) > Diverse(C)`` when none extends C's witness set.
EXACT_PARTNER_CHECKS = 32


def _has_totally_different_set(tuples: np.ndarray, candidates: np.ndarray, needed: int) -> bool:
    """Whether ``needed`` pairwise totally different rows exist among ``tuples[candidates]`` (distinct rows):
    depth-first search that extends a partial set only with rows totally different from every chosen one,
    pruned by the number of candidates, by each attribute's distinct values among them and by a cover of them
    (:func:`_covered_by_fewer`)."""
    if needed <= 0:
        return True
    if len(candidates) < needed:
        return False
    rows = tuples[candidates]
    if needed == 1:
        return True
    if needed == 2 and 2 ** rows.shape[1] <= len(rows):
        return _has_totally_different_pair(rows)
    if any(len(np.unique(rows[:, j])) < needed for j in range(rows.shape[1])) or _covered_by_fewer(rows, needed):
        return False
    for position in range(len(candidates) - needed + 1):
        later = rows[position + 1 :]
        partners = candidates[position + 1 :][(later != rows[position]).all(axis=1)]
        if _has_totally_different_set(tuples, partners, needed - 1):
            return True
    return False


def _covered_by_fewer(rows: np.ndarray, needed: int) -> bool:
    """Whether fewer than ``needed`` (attribute, value) pairs cover every row (rows: dense non-negative codes).

    The rows holding one value of one attribute pairwise share it, so a set of pairwise totally different rows takes
    at most one row of each such pair's rows: a cover by fewer than ``needed`` pairs proves that no ``needed`` rows
    are pairwise totally different (a greedy set cover, most rows first; the distinct values of one attribute are the
    trivial cover)."""
    uncovered = np.ones(len(rows), dtype=bool)
    for _ in range(needed - 1):
        best_count, best_attribute, best_value = 0, 0, 0
        for j in range(rows.shape[1]):
            counts = np.bincount(rows[uncovered, j])
            value = int(counts.argmax())
            if counts[value] > best_count:
                best_count, best_attribute, best_value = int(counts[value]), j, value
        uncovered &= rows[:, best_attribute] != best_value
        if not uncovered.any():
            return True
    return False


def _has_totally_different_pair(rows: np.ndarray) -> bool:
    """Whether two of the distinct ``rows`` differ on every attribute, in ``O(2^m · n log n)`` rather than ``O(n²)``:
    by inclusion-exclusion over the attribute subsets, the number of rows sharing at least one value with a row; a
    row sharing a value with fewer than all rows has a totally different partner."""
    n, m = rows.shape
    sharing = np.zeros(n, dtype=np.int64)
    for size in range(1, m + 1):
        for subset in itertools.combinations(range(m), size):
            _, inverse, counts = np.unique(rows[:, subset], axis=0, return_inverse=True, return_counts=True)
            sharing += (-1) ** (size + 1) * counts[inverse.reshape(-1)]
    return bool((sharing < n).any())


def diverse_at_least_exact(sensitive_codes: np.ndarray, ell: int) -> bool:
    """Whether ``Diverse ≥ ell`` (SPEC §14.1), decided exactly whatever the number of distinct tuples.

    A greedy certificate (:func:`diverse_greedy`) settles most sets at once; when it is inconclusive (a greedy pass
    in the wrong order can miss a set that exists), a depth-first search over the distinct tuples decides: it
    extends a partial set of pairwise totally different tuples only with tuples totally different from all of it,
    and prunes a branch once the candidates left, the distinct values of one attribute among them, or a greedy
    cover of them by (attribute, value) pairs number fewer than the tuples still needed; a last pair is found by
    inclusion-exclusion over the attribute subsets. Exponential in ``ell`` in the worst case (``O(n^(ell-1))`` candidate filters of
    ``n`` distinct tuples), polynomial for a fixed ``ell``; unlike :func:`diverse_at_least` it never answers
    ``False`` for want of a proof.

    Parameters
    ----------
    sensitive_codes
        ``(n_records, n_attributes)`` array of value codes (any comparable dtype), or ``(n_records,)`` for one
        attribute.
    ell
        The required number of pairwise totally different tuples (``≥ 1``).

    Returns
    -------
    bool
    """
    codes = np.asarray(sensitive_codes)
    codes = codes.reshape(len(codes), -1)
    if ell <= 0:
        return True
    if len(codes) < ell or any(len(np.unique(codes[:, j])) < ell for j in range(codes.shape[1])):
        return False
    if diverse_greedy(codes, stop_at=ell) >= ell:
        return True
    dense = np.stack([np.unique(codes[:, j], return_inverse=True)[1].reshape(-1) for j in range(codes.shape[1])], axis=1)
    tuples = np.unique(dense.astype(np.int64), axis=0)
    # tuples whose values are rare come first (they conflict with few others)
    rarity = np.zeros(len(tuples))
    for j in range(tuples.shape[1]):
        _, inverse, value_counts = np.unique(tuples[:, j], return_inverse=True, return_counts=True)
        rarity += value_counts[inverse]
    order = np.argsort(rarity, kind="stable")
    return _has_totally_different_set(tuples[order], np.arange(len(tuples)), ell)
