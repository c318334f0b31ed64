"""The exact optimum of SPEC §14.4 by subset dynamic programming (:mod:`pipeline.core.kl_anonymity`)."""

from __future__ import annotations

import numpy as np

from pipeline.core.kl_anonymity.costs import cluster_cost
from pipeline.core.kl_anonymity.diverse import diverse_exact
from pipeline.core.kl_anonymity.greedy import _validate_parameters
from pipeline.core.kl_anonymity.table import EXACT_MAX_RECORDS, EncodedTable, InfeasibleError


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
