"""The greedy clustering of SPEC §14.3 (:mod:`pipeline.core.kl_anonymity`)."""

from __future__ import annotations

from typing import Any

import numpy as np

from pipeline.core.kl_anonymity.costs import edge_weights
from pipeline.core.kl_anonymity.diverse import EXACT_PARTNER_CHECKS, diverse, diverse_at_least, records_witness
from pipeline.core.compiled import kernel
from pipeline.core.kl_anonymity.table import DIVERSE_EXACT_LIMIT, GREEDY_MAX_TUPLES, EncodedTable, InfeasibleError

#: Largest (quasi-identifier tuples × sensitive values) table of counts the compiled loop's partner search keeps
#: (int64 cells: 64 MB); above it the search scans the records still alone without counts (the same clusters).
GREEDY_MAX_VALUE_COUNTS = 8_000_000


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
    compiled: bool = True,
    max_value_counts: int = GREEDY_MAX_VALUE_COUNTS,
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
    compiled
        Run the compiled loop of :mod:`pipeline.core.kl_anonymity.greedy_kernel` (the default; same clusters,
        memory ``O(n + d²)`` for ``d`` distinct quasi-identifier tuples, plus at most 64 MB of counts per tuple and
        sensitive value) when neither ``trace`` nor
        ``weights_matrix`` is given and ``d <= GREEDY_MAX_TUPLES``; else this module's numpy loop over the ``n × n``
        matrix (the reference).
    max_value_counts
        The compiled loop's cap on its table of counts (:data:`GREEDY_MAX_VALUE_COUNTS`; 0: no counts, as above the
        cap; the tests compare both paths with the reference).

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
    ``O(k·n²)`` time; ``O(n²)`` memory in numpy, ``O(n + d²)`` compiled (and the counts above). The diversity test inside (``Diverse(C ∪ D) >
    Diverse(C)``) uses :func:`diverse` (exact on small sets).
    """
    n = len(table)
    _validate_parameters(n, k, ell)
    if not diverse_at_least(table.sensitive_codes, ell):
        raise InfeasibleError(f"Diverse(whole table) < ell={ell}: no (k, ℓ)-anonymous table exists")
    if compiled and trace is None and weights_matrix is None:
        quasi_identifier_tuples, first, inverse = np.unique(
            table.quasi_identifier_codes, axis=0, return_index=True, return_inverse=True
        )
        if len(quasi_identifier_tuples) <= GREEDY_MAX_TUPLES:
            tuple_ids, tuples = table.sensitive_tuples
            labels = kernel("greedy_labels")(
                table.ancestors,
                table.range_tensor,
                table.heights,
                table.weights,
                tuple_ids,
                tuples,
                inverse.reshape(-1).astype(np.int64),
                edge_weights(table, first),
                k,
                ell,
                EXACT_PARTNER_CHECKS,
                DIVERSE_EXACT_LIMIT,
                int(max_value_counts),
            )
            order = np.argsort(labels, kind="stable")
            groups = np.split(order, np.flatnonzero(np.diff(labels[order])) + 1)
            return sorted((np.sort(g).astype(np.int64) for g in groups), key=lambda cluster: int(cluster[0]))
    link = (edge_weights(table) if weights_matrix is None else weights_matrix.copy()).astype(np.float64)
    np.fill_diagonal(link, np.inf)
    members: list[list[int]] = [[p] for p in range(n)]
    alive = np.ones(n, dtype=bool)
    size = np.ones(n, dtype=np.int64)
    diversity = np.ones(n, dtype=np.int64)
    # generalisation state per cluster c: the LCA level per attribute (record c stays in cluster c, so its
    # ancestors are the cluster's above those levels)
    level = np.zeros(table.quasi_identifier_codes.shape, dtype=np.int64)
    record_cost = np.zeros(n)
    smallest = np.arange(n, dtype=np.int64)  # smallest member id (position) per cluster
    label = np.arange(n, dtype=np.int64)  # cluster of every record
    witness: list[np.ndarray] = [np.array([0], dtype=np.int64) for _ in range(n)]  # indices into members[c]
    hierarchies = table.hierarchies

    ancestors, range_tensor, heights, weights = table.ancestors, table.range_tensor, table.heights, table.weights
    tuple_ids = table.sensitive_tuples[0]
    attributes = np.arange(len(hierarchies))

    def merged_state(c: int, candidates: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """LCA levels and per-record cost of C ∪ D for every candidate D (levels nest, so equality of
        ancestors is monotone in the level)."""
        mine = ancestors[c]  # (q, L)
        first_equal = (ancestors[candidates] != mine[None, :, :]).sum(axis=2)  # (nc, q)
        new_levels = np.maximum(first_equal, np.maximum(level[c][None, :], level[candidates]))
        nodes = mine[attributes, new_levels]  # (nc, q)
        cost = np.zeros(len(candidates))
        for i in range(len(hierarchies)):
            cost += weights[i] * (new_levels[:, i] / heights[i]) * range_tensor[i, new_levels[:, i], nodes[:, i]]
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
        if max(diversity[c], diversity[d]) >= ell and len(np.unique(tuple_ids[members[c]])) <= DIVERSE_EXACT_LIMIT:
            # Diverse is exact on this many distinct tuples and grows with the set: still >= ell, and only the
            # comparison with ell is ever read (the witness of a diverse cluster is never used)
            diversity[c] = max(diversity[c], diversity[d])
        else:
            witness[c] = records_witness(table, np.asarray(members[c], dtype=np.int64))
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
