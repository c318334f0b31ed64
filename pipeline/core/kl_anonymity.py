"""The (k, ℓ)-anonymity model of P2 (SPEC §14): generalise quasi-identifiers along hierarchies
so that every equivalence class (``cluster_id``, "cluster" in P2) has at least ``k`` records and
``Diverse ≥ ℓ``, i.e. at least ℓ sensitive tuples that are pairwise *totally different* (they
differ on every sensitive attribute). Sensitive values are published unchanged, so tuples stay
linked inside a record.

Algorithms
----------
* :func:`greedy_clusters`: the approximation algorithm of SPEC §14.3 (greedy graph aggregation,
  rounds ``s = 2..k``, single-linkage edge weight ``S({u, v})``, ties by cost increase then id,
  diversity-increasing partners first, then repair). ``O(k·n²)`` time and ``O(n²)`` memory.
* :func:`partition_blocks` + :func:`blocked_clusters`: the scalable design used on real tables. A
  Mondrian-style top-down split on the hierarchies (LeFevre et al. 2006, categorical splits
  along hierarchy children; small children pooled) cuts the table into blocks of at most
  ``max_block_size`` records, each of which has ``≥ k`` records and ``Diverse ≥ ℓ``; the §14.3
  greedy then runs inside every block. Memory ``O(max_block_size²)``.
* :func:`refine_clusters`: our addition, run after the greedy in every block: split clusters of
  ``≥ 2k`` records while ``S`` does not grow (the greedy's rounds overshoot k).
* :func:`exact_clusters`: SPEC §14.4 subset DP, ``O(3ⁿ)``, for small tables (``n ≤ 16``).

Costs: :func:`cluster_cost` is P2's formula (11) as reconstructed in SPEC §14.2,
``S(C) = Σ_{t∈C} Σ_i c_i · (H(t[A_i], Â_i)/H_i) · R(t[A_i], Â_i)``; :func:`cluster_naive_cost` is the
naive count of generalised positions (levels climbed; one ``*`` per level in P2's notation).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from pipeline.core.hierarchies import Hierarchy
from pipeline.errors import UnusableInputError

__all__ = [
    "DIVERSE_EXACT_LIMIT",
    "EncodedTable",
    "InfeasibleError",
    "KLAnonymization",
    "blocked_clusters",
    "cluster_cost",
    "cluster_naive_cost",
    "cluster_generalization",
    "diverse",
    "diverse_at_least",
    "diverse_exact",
    "diverse_greedy",
    "edge_weights",
    "encode_table",
    "exact_clusters",
    "greedy_clusters",
    "kl_anonymize",
    "kl_release_table",
    "partition_blocks",
    "refine_clusters",
]

#: Up to this many distinct sensitive tuples, :func:`diverse` is exact (branch and bound).
DIVERSE_EXACT_LIMIT = 24
#: Largest table :func:`exact_clusters` accepts (``3ⁿ`` subset DP).
EXACT_MAX_RECORDS = 16
#: Largest table the unblocked ``greedy`` method accepts (``n²`` edge matrix of float64).
GREEDY_MAX_RECORDS = 6000


class InfeasibleError(UnusableInputError, ValueError):
    """No (k, ℓ)-anonymous table exists for this input (fewer than ``k`` records, or
    ``Diverse(whole table) < ℓ``), or the parameters are invalid."""


@dataclass(frozen=True, eq=False)
class EncodedTable:
    """Records encoded for the algorithms.

    Attributes
    ----------
    row_ids
        int64, shape ``(n,)``: the input row ids, in the order that defines "member id" (SPEC
        §14.3 ties): ascending row id.
    quasi_identifiers, sensitive_attributes
        Column names.
    hierarchies
        One :class:`Hierarchy` per quasi-identifier.
    quasi_identifier_codes
        int32, shape ``(n, q)``: base codes in each hierarchy.
    sensitive_codes
        int32, shape ``(n, m)``: per-attribute value codes (equal code = equal value).
    weights
        float64, shape ``(q,)``: the weights ``c_i`` of the cost (SPEC §14.2; default 1).
    """

    row_ids: np.ndarray
    quasi_identifiers: tuple[str, ...]
    sensitive_attributes: tuple[str, ...]
    hierarchies: tuple[Hierarchy, ...]
    quasi_identifier_codes: np.ndarray
    sensitive_codes: np.ndarray
    weights: np.ndarray

    def __len__(self) -> int:
        return len(self.row_ids)

    def subset(self, positions: np.ndarray) -> EncodedTable:
        """The records at ``positions`` (in the given order)."""
        return EncodedTable(
            row_ids=self.row_ids[positions],
            quasi_identifiers=self.quasi_identifiers,
            sensitive_attributes=self.sensitive_attributes,
            hierarchies=self.hierarchies,
            quasi_identifier_codes=self.quasi_identifier_codes[positions],
            sensitive_codes=self.sensitive_codes[positions],
            weights=self.weights,
        )


def encode_table(
    records: pd.DataFrame,
    quasi_identifiers: Sequence[str],
    sensitive_attributes: Sequence[str],
    hierarchies: Mapping[str, Hierarchy],
    *,
    weights: Mapping[str, float] | None = None,
    source: str = "the input",
) -> EncodedTable:
    """Encode ``records`` for the (k, ℓ) algorithms.

    Parameters
    ----------
    records
        One row per record: ``row_id`` (int) plus the quasi-identifier and sensitive-attribute
        columns (text). Not modified.
    quasi_identifiers, sensitive_attributes
        Column names; at least one of each.
    hierarchies
        Quasi-identifier -> hierarchy (see :mod:`pipeline.core.hierarchies`).
    weights
        Optional quasi-identifier -> weight ``c_i >= 0`` (default 1 for every attribute).
    source
        Name of the data, for messages.

    Raises
    ------
    KeyError
        A column is missing from ``records``.
    pipeline.core.hierarchies.HierarchyError
        A quasi-identifier has no hierarchy or holds a value its hierarchy does not list.
    ValueError
        A negative weight or a weight for an unknown attribute.
    """
    from pipeline.core.hierarchies import HierarchyError

    missing = [c for c in ["row_id", *quasi_identifiers, *sensitive_attributes] if c not in records.columns]
    if missing:
        raise KeyError(f"columns {missing} are not in {source}")
    if not quasi_identifiers or not sensitive_attributes:
        raise ValueError("the (k, ℓ) model needs at least one quasi-identifier and one sensitive attribute")
    weights = dict(weights or {})
    unknown = sorted(set(weights) - set(quasi_identifiers))
    if unknown:
        raise ValueError(f"weights given for {unknown}, which are not quasi-identifiers")
    if any(w < 0 for w in weights.values()):
        raise ValueError(f"weights must be >= 0, got {weights}")
    ordered = records.sort_values("row_id", kind="stable")
    chosen = []
    for attribute in quasi_identifiers:
        if attribute not in hierarchies:
            raise HierarchyError(f"no hierarchy given for quasi-identifier {attribute!r}")
        chosen.append(hierarchies[attribute])
    qi_codes = np.column_stack(
        [h.encode(ordered[a].astype(str), column_source=source) for a, h in zip(quasi_identifiers, chosen)]
    ).astype(np.int32)
    sa_codes = np.column_stack([pd.factorize(ordered[a].astype(str), sort=True)[0] for a in sensitive_attributes]).astype(
        np.int32
    )
    return EncodedTable(
        row_ids=ordered["row_id"].to_numpy(np.int64),
        quasi_identifiers=tuple(quasi_identifiers),
        sensitive_attributes=tuple(sensitive_attributes),
        hierarchies=tuple(chosen),
        quasi_identifier_codes=qi_codes.reshape(len(ordered), len(quasi_identifiers)),
        sensitive_codes=sa_codes.reshape(len(ordered), len(sensitive_attributes)),
        weights=np.array([float(weights.get(a, 1.0)) for a in quasi_identifiers]),
    )


# --------------------------------------------------------------------------- costs


def cluster_generalization(table: EncodedTable, positions: Sequence[int] | np.ndarray) -> list[tuple[int, int]]:
    """The cluster's generalised quasi-identifier tuple: per attribute ``(level, node code)`` of the
    lowest common ancestor of the members' values (SPEC §14.1).

    Raises
    ------
    ValueError
        Empty ``positions``.
    """
    positions = np.asarray(positions, dtype=np.int64)
    if positions.size == 0:
        raise ValueError("a cluster needs at least one record")
    nodes = []
    for i, hierarchy in enumerate(table.hierarchies):
        ancestors = hierarchy.codes[table.quasi_identifier_codes[positions, i]]  # (|C|, H+1)
        constant = ancestors.min(axis=0) == ancestors.max(axis=0)
        level = int(np.argmax(constant))  # the root level is always constant
        nodes.append((level, int(ancestors[0, level])))
    return nodes


def _record_cost(table: EncodedTable, nodes: Sequence[tuple[int, int]]) -> float:
    """Cost of one member of a cluster generalised to ``nodes``: Σ_i c_i·(h_i/H_i)·R_i."""
    return float(
        sum(
            table.weights[i] * (level / h.height) * h.ranges[level][node]
            for i, (h, (level, node)) in enumerate(zip(table.hierarchies, nodes))
        )
    )


def cluster_cost(table: EncodedTable, positions: Sequence[int] | np.ndarray) -> float:
    """``S(C)`` of SPEC §14.2 (P2 formula (11), product form, weights ``c_i``).

    Every member climbs the same number of levels (all base values sit at level 0 in an ARX
    hierarchy), so ``S(C) = |C| · Σ_i c_i · (h_i/H_i) · R_i(node_i)``. 0 for an ungeneralised
    cluster. Unit: "weighted base values", P2's own unit.
    """
    return len(positions) * _record_cost(table, cluster_generalization(table, positions))


def cluster_naive_cost(table: EncodedTable, positions: Sequence[int] | np.ndarray) -> int:
    """The naive cost P2 contrasts with ``S``: number of generalised positions, counted as levels
    climbed per value (one ``*`` per level in P2's notation), summed over members."""
    return len(positions) * sum(level for level, _ in cluster_generalization(table, positions))


def edge_weights(table: EncodedTable, positions: np.ndarray | None = None) -> np.ndarray:
    """Matrix of edge weights ``w(u, v) = S({u, v})`` (SPEC §14.3), float64, shape ``(b, b)``,
    diagonal 0; ``positions`` selects the records (default all). Memory ``O(b²)``."""
    positions = np.arange(len(table)) if positions is None else np.asarray(positions)
    b = len(positions)
    per_record = np.zeros((b, b))
    for i, hierarchy in enumerate(table.hierarchies):
        ancestors = hierarchy.codes[table.quasi_identifier_codes[positions, i]]  # (b, H+1)
        level = np.zeros((b, b), dtype=np.int64)
        for h in range(hierarchy.height + 1):  # equality is monotone in the level (levels nest)
            level += ancestors[:, h][:, None] != ancestors[:, h][None, :]
        ranges = np.zeros((b, b))
        for h in range(1, hierarchy.height + 1):
            ranges = np.where(level == h, hierarchy.range_matrix[h, ancestors[:, h]][:, None], ranges)
        per_record += table.weights[i] * (level / hierarchy.height) * ranges
    return 2.0 * per_record


# --------------------------------------------------------------------------- Diverse


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


#: Partners tested exactly for ``Diverse(C ∪ D) > Diverse(C)`` when none extends C's witness set.
EXACT_PARTNER_CHECKS = 32


# --------------------------------------------------------------------------- §14.3 greedy


def _validate_parameters(n: int, k: int, ell: int) -> None:
    if ell < 1 or k < 1:
        raise InfeasibleError(f"k and ℓ must be >= 1, got k={k}, ell={ell}")
    if k < ell:
        raise InfeasibleError(f"k={k} < ell={ell}: a cluster of k records cannot hold ℓ totally different tuples; use k >= ell")
    if n < k:
        raise InfeasibleError(f"the table has {n} records, fewer than k={k}")


def greedy_clusters(
    table: EncodedTable,
    *,
    k: int,
    ell: int,
    trace: list[Any] | None = None,
    weights_matrix: np.ndarray | None = None,
) -> list[np.ndarray]:
    """SPEC §14.3 approximation (greedy graph aggregation) on the whole ``table``.

    Parameters
    ----------
    table
        Encoded records (member id = position, i.e. ascending ``row_id``).
    k, ell
        Required cluster size and ``Diverse``; ``k >= ell >= 1``.
    trace
        If given, ``("merge", sorted row ids of the merged cluster)`` is appended per merge
        (the format of SPEC §16.5).
    weights_matrix
        Precomputed :func:`edge_weights` (default: computed here).

    Returns
    -------
    list of int64 arrays
        Positions of each cluster's members, clusters ordered by smallest member.

    Raises
    ------
    InfeasibleError
        ``k < ell``, fewer than ``k`` records, or ``Diverse(table) < ell``.

    Notes
    -----
    ``O(k·n²)`` time, ``O(n²)`` memory. The diversity test inside (``Diverse(C ∪ D) >
    Diverse(C)``) uses :func:`diverse` (exact on small sets).
    """
    n = len(table)
    _validate_parameters(n, k, ell)
    if not diverse_at_least(table.sensitive_codes, ell):
        raise InfeasibleError(f"Diverse(whole table) < ell={ell}: no (k, ℓ)-anonymous table exists")
    link = (edge_weights(table) if weights_matrix is None else weights_matrix.copy()).astype(np.float64)
    np.fill_diagonal(link, np.inf)
    members: list[list[int]] = [[p] for p in range(n)]
    alive = np.ones(n, dtype=bool)
    size = np.ones(n, dtype=np.int64)
    diversity = np.ones(n, dtype=np.int64)
    # generalisation state per cluster: one representative base code and the LCA level per attribute
    representative = table.quasi_identifier_codes.copy()
    level = np.zeros_like(representative)
    record_cost = np.zeros(n)
    smallest = np.arange(n, dtype=np.int64)  # smallest member id (position) per cluster
    label = np.arange(n, dtype=np.int64)  # cluster of every record
    witness: list[np.ndarray] = [np.array([0], dtype=np.int64) for _ in range(n)]  # indices into members[c]
    hierarchies = table.hierarchies

    def merged_state(c: int, candidates: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """LCA levels and per-record cost of C ∪ D for every candidate D."""
        new_levels = np.empty((len(candidates), len(hierarchies)), dtype=np.int64)
        cost = np.zeros(len(candidates))
        for i, hierarchy in enumerate(hierarchies):
            mine = hierarchy.codes[representative[c, i]]  # (H+1,)
            theirs = hierarchy.codes[representative[candidates, i]]  # (nc, H+1)
            first_equal = (theirs != mine[None, :]).sum(axis=1)  # monotone equality
            lv = np.maximum(first_equal, np.maximum(level[c, i], level[candidates, i]))
            new_levels[:, i] = lv
            cost += table.weights[i] * (lv / hierarchy.height) * hierarchy.range_matrix[lv, mine[lv]]
        return new_levels, cost

    def merge_into(c: int, d: int, new_levels: np.ndarray, new_cost: float) -> None:
        members[c].extend(members[d])
        label[members[d]] = c
        members[d] = []  # merged into c
        alive[d] = False
        smallest[c] = min(smallest[c], smallest[d])
        size[c] += size[d]
        level[c] = new_levels
        record_cost[c] = new_cost
        link[c, :] = np.minimum(link[c, :], link[d, :])
        link[:, c] = link[c, :]
        link[c, c] = np.inf
        link[d, :] = np.inf
        link[:, d] = np.inf
        witness[c] = diverse_witness(table.sensitive_codes[members[c]])
        diversity[c] = len(witness[c])
        if trace is not None:
            trace.append(("merge", sorted(int(table.row_ids[p]) for p in members[c])))

    def best_partner(c: int) -> None:
        candidates = np.flatnonzero(alive)
        candidates = candidates[candidates != c]
        new_levels, cost = merged_state(c, candidates)
        increase = (size[c] + size[candidates]) * cost - size[c] * record_cost[c] - size[candidates] * record_cost[candidates]
        # ties: cost increase, then the smaller partner (keeps equivalence classes small where S
        # is indifferent, e.g. identical quasi-identifiers), then the smallest member id
        order = np.lexsort((smallest[candidates], size[candidates], np.round(increase, 9), link[c, candidates]))
        chosen = order[0]
        if diversity[c] < ell:
            # D raises Diverse(C) for sure if one of its tuples is totally different from every
            # tuple of C's witness set; otherwise test the nearest partners exactly.
            witness_tuples = table.sensitive_codes[np.asarray(members[c])[witness[c]]]
            extends = (table.sensitive_codes[:, None, :] != witness_tuples[None, :, :]).all(axis=(1, 2))
            extending_clusters = np.zeros(n, dtype=bool)
            extending_clusters[label[extends]] = True
            hits = np.flatnonzero(extending_clusters[candidates[order]])
            if len(hits):
                chosen = order[hits[0]]
            else:
                for position in order[:EXACT_PARTNER_CHECKS]:
                    d = candidates[position]
                    if diverse(table.sensitive_codes[members[c] + members[d]]) > diversity[c]:
                        chosen = position
                        break
        merge_into(c, int(candidates[chosen]), new_levels[chosen], float(cost[chosen]))

    for s in range(2, k + 1):
        while True:
            small = np.flatnonzero(alive & (size < s))
            if len(small) == 0 or alive.sum() == 1:
                break
            best_partner(int(small[np.argmin(smallest[small])]))
    while True:  # repair
        weak = np.flatnonzero(alive & (diversity < ell))
        if len(weak) == 0 or alive.sum() == 1:
            break
        best_partner(int(weak[np.argmin(smallest[weak])]))
    clusters = [np.array(sorted(members[c]), dtype=np.int64) for c in np.flatnonzero(alive)]
    return sorted(clusters, key=lambda cluster: int(cluster[0]))


# --------------------------------------------------------------------------- §14.4 exact


def exact_clusters(table: EncodedTable, *, k: int, ell: int) -> list[np.ndarray]:
    """SPEC §14.4: a partition of minimum total ``S`` whose blocks all have ``≥ k`` records and
    ``Diverse ≥ ℓ`` (exact ``Diverse``), by subset DP over bitmasks (``O(3ⁿ)``).

    Returns
    -------
    list of int64 arrays
        Positions of each cluster, ordered by smallest member; among optimal partitions, the block holding the lowest
        remaining record is the smallest bitmask (deterministic; reproduces SPEC §16.5).

    Raises
    ------
    InfeasibleError
        ``k < ell``, fewer than ``k`` records, no valid partition, or more than
        ``EXACT_MAX_RECORDS`` records.
    """
    n = len(table)
    _validate_parameters(n, k, ell)
    if n > EXACT_MAX_RECORDS:
        raise InfeasibleError(f"the exact algorithm is O(3^n); {n} records exceed its limit of {EXACT_MAX_RECORDS}")
    full = (1 << n) - 1
    valid_cost: dict[int, float] = {}
    for mask in range(1, full + 1):
        positions = [p for p in range(n) if mask >> p & 1]
        if len(positions) >= k and diverse_exact(table.sensitive_codes[positions]) >= ell:
            valid_cost[mask] = cluster_cost(table, positions)
    best: dict[int, tuple[float, tuple[int, ...]]] = {0: (0.0, ())}
    for mask in range(1, full + 1):
        low = mask & -mask
        rest = mask ^ low
        candidate_best: tuple[float, tuple[int, ...]] | None = None
        sub = 0
        while True:  # every subset of `rest` in increasing order, plus the lowest bit
            block = sub | low
            if block in valid_cost and (mask ^ block) in best:
                cost = valid_cost[block] + best[mask ^ block][0]
                if candidate_best is None or cost < candidate_best[0] - 1e-9:
                    candidate_best = (cost, (block, *best[mask ^ block][1]))
            if sub == rest:
                break
            sub = ((sub | ~rest) + 1) & rest
        if candidate_best is not None:
            best[mask] = candidate_best
    if full not in best:
        raise InfeasibleError(f"no partition into clusters of >= k={k} records with Diverse >= ell={ell} exists")
    clusters = [np.array([p for p in range(n) if block >> p & 1], dtype=np.int64) for block in best[full][1]]
    return sorted(clusters, key=lambda cluster: int(cluster[0]))


# --------------------------------------------------------------------------- blocks


def _allowable(table: EncodedTable, positions: np.ndarray, k: int, ell: int) -> bool:
    return len(positions) >= k and diverse_at_least(table.sensitive_codes[positions], ell)


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
    for offset in range(0, middle - k + 1, step):
        for cut in (middle - offset, middle + offset):
            if k <= cut <= len(ordered) - k:
                left, right = ordered[:cut], ordered[cut:]
                if _allowable(table, left, k, ell) and _allowable(table, right, k, ell):
                    return [left, right]
    return None


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
            for mask in range(1, 1 << len(rest)):
                chosen = np.array([(mask >> b) & 1 for b in range(len(rest))], dtype=bool)
                left = np.concatenate([cluster[:1], rest[~chosen]])
                right = rest[chosen]
                if len(left) < k or len(right) < k:
                    continue
                total = cluster_cost(table, left) + cluster_cost(table, right)
                if total <= cost + 1e-9 and (best is None or total < best[0] - 1e-9):
                    if _allowable(table, left, k, ell) and _allowable(table, right, k, ell):
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


def blocked_clusters(table: EncodedTable, *, k: int, ell: int, max_block_size: int = 256) -> tuple[list[np.ndarray], int]:
    """:func:`partition_blocks`, then :func:`greedy_clusters` and :func:`refine_clusters` inside
    every block.

    Returns
    -------
    (clusters, n_blocks)
        Cluster positions (ordered by smallest member) and the number of blocks.

    Raises
    ------
    InfeasibleError
        As :func:`partition_blocks`.
    """
    clusters: list[np.ndarray] = []
    blocks = partition_blocks(table, k=k, ell=ell, max_block_size=max_block_size)
    for block in blocks:
        local_table = table.subset(block)
        for local in refine_clusters(local_table, greedy_clusters(local_table, k=k, ell=ell), k=k, ell=ell):
            clusters.append(block[local])
    return sorted(clusters, key=lambda cluster: int(cluster.min())), len(blocks)


# --------------------------------------------------------------------------- model


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
    source: str = "the input",
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
        ``"blocked"`` (default; scales to large tables; blocks + greedy + refinement),
        ``"greedy"`` (SPEC §14.3 exactly, on the whole table, ``O(n²)`` memory, at most ``GREEDY_MAX_RECORDS`` records) or ``"exact"`` (SPEC §14.4,
        at most ``EXACT_MAX_RECORDS`` records).
    max_block_size
        Largest block of the ``blocked`` method.
    source
        Name of the data, for messages.

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
        if len(table) > GREEDY_MAX_RECORDS:
            raise InfeasibleError(
                f"method 'greedy' keeps an n x n matrix; {len(table)} records exceed {GREEDY_MAX_RECORDS}: use method 'blocked'"
            )
        clusters = greedy_clusters(table, k=k, ell=ell)
    else:
        clusters, n_blocks = blocked_clusters(table, k=k, ell=ell, max_block_size=max_block_size)
    return summarize_clusters(table, clusters, method=method, k=k, ell=ell, n_blocks=n_blocks)


def summarize_clusters(
    table: EncodedTable, clusters: Sequence[np.ndarray], *, method: str, k: int, ell: int, n_blocks: int = 1
) -> KLAnonymization:
    """Build a :class:`KLAnonymization` from cluster positions (used by every method)."""
    assignment_rows, cluster_rows = [], []
    for cluster_id, positions in enumerate(clusters, start=1):
        nodes = cluster_generalization(table, positions)
        row: dict[str, Any] = {
            "cluster_id": cluster_id,
            "n_records": len(positions),
            "diverse": diverse(table.sensitive_codes[positions]),
            "cost": len(positions) * _record_cost(table, nodes),
            "naive_cost": len(positions) * sum(level for level, _ in nodes),
        }
        for attribute, hierarchy, (level, node) in zip(table.quasi_identifiers, table.hierarchies, nodes):
            row[attribute] = hierarchy.label(level, node)
            row[f"{attribute}__level"] = level
        cluster_rows.append(row)
        assignment_rows.append(pd.DataFrame({"row_id": table.row_ids[positions], "cluster_id": cluster_id}))
    assignments = pd.concat(assignment_rows, ignore_index=True).astype({"row_id": "int64", "cluster_id": "int64"})
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
    signature = (
        merged.sort_values(sensitive_attribute_columns, kind="stable")
        .groupby("cluster_id", sort=False, observed=True)[sensitive_attribute_columns]
        .apply(lambda frame: "\x1f".join("\x1e".join(row) for row in frame.itertuples(index=False)))
    )
    content = labels.set_index("cluster_id")[quasi_identifier_columns].astype(str).agg("\x1f".join, axis=1).to_frame("qi")
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
