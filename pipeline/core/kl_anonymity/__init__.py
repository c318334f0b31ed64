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
* :func:`blocked_clusters` (the default): the greedy compiled (:mod:`.greedy_kernel`, edge weights between distinct
  quasi-identifier tuples) on the whole table when it holds at most ``GREEDY_MAX_TUPLES`` of them, else
  :func:`partition_blocks` first. A
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

from pipeline.core.kl_anonymity.blocks import blocked_clusters, partition_blocks, refine_clusters
from pipeline.core.kl_anonymity.costs import cluster_cost, cluster_generalization, cluster_naive_cost, edge_weights
from pipeline.core.kl_anonymity.diverse import (
    diverse,
    diverse_at_least,
    diverse_at_least_exact,
    diverse_exact,
    diverse_greedy,
    diverse_witness,
)
from pipeline.core.kl_anonymity.exact import exact_clusters
from pipeline.core.kl_anonymity.greedy import greedy_clusters
from pipeline.core.kl_anonymity.model import KLAnonymization, kl_anonymize, kl_release_table
from pipeline.core.kl_anonymity.table import (
    DIVERSE_EXACT_LIMIT,
    EXACT_MAX_RECORDS,
    GREEDY_MAX_RECORDS,
    GREEDY_MAX_TUPLES,
    EncodedTable,
    InfeasibleError,
    encode_table,
)

__all__ = [
    "DIVERSE_EXACT_LIMIT",
    "EXACT_MAX_RECORDS",
    "GREEDY_MAX_RECORDS",
    "GREEDY_MAX_TUPLES",
    "EncodedTable",
    "InfeasibleError",
    "KLAnonymization",
    "blocked_clusters",
    "cluster_cost",
    "cluster_generalization",
    "cluster_naive_cost",
    "diverse",
    "diverse_at_least",
    "diverse_at_least_exact",
    "diverse_exact",
    "diverse_greedy",
    "diverse_witness",
    "edge_weights",
    "encode_table",
    "exact_clusters",
    "greedy_clusters",
    "kl_anonymize",
    "kl_release_table",
    "partition_blocks",
    "refine_clusters",
]
