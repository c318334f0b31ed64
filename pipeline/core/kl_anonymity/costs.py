"""Generalization costs of a cluster: S (SPEC §14.2) and the naive cost (:mod:`pipeline.core.kl_anonymity`)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pipeline.core.compiled import kernel
from pipeline.core.kl_anonymity.table import EncodedTable


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
    ancestors = table.ancestors
    levels = kernel("cluster_levels_compiled")(ancestors, positions)  # the root level is always constant
    return [(int(level), int(ancestors[positions[0], i, level])) for i, level in enumerate(levels)]


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
    positions = np.asarray(positions, dtype=np.int64)
    if positions.size == 0:
        raise ValueError("a cluster needs at least one record")
    return float(kernel("cluster_cost_compiled")(table.ancestors, table.range_tensor, table.heights, table.weights, positions))


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
