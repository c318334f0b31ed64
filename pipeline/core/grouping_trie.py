"""The trie index of Algorithm 11's greedy loop (:func:`pipeline.core.grouping.group_sac`), built with numpy.

The index, per part (SAC or IR), is a *trie* over the records' keys:

* Records with the same tuple of sensitive values are interchangeable for compatibility: they share a *key*, whose
  records form a FIFO queue in table order (``queue``; ``key_head`` = the position in the queue of the first live
  record, ``key_stop`` its end). Removing a record that is not its key's head only marks it dead; the head skips
  dead records when it advances.
* The keys are the leaves of a trie whose levels are the sensitive attributes, smallest domain first. Every node
  keeps its entries (one per child: the child's value, the child, and the rank of the first live record below it,
  its *head*) sorted by head. "The first compatible live record" is a depth-first walk in that order that skips the
  values the partial group already uses and prunes every entry whose head is not before the best answer so far.
  A removal that moves a key's head moves one entry per level, up to where a node's own head does not change.
* For QI-aware grouping a second trie per part has one more level on top, the quasi-identifier stratum (never
  excluded); a search of "the seed's stratum" starts at the stratum's node, and updates stop there.

The loop that walks and updates it is :mod:`pipeline.core.grouping_kernel` (compiled). This module does not import
numba: building the index needs numpy only.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["Trie", "build_trie"]

#: A trie as the compiled loop takes it: a tuple of 14 int64 arrays, in this order.
Trie = tuple[np.ndarray, ...]
_KEY_OF_RANK, _QUEUE, _KEY_HEAD, _KEY_STOP, _KEY_PARENT = 0, 1, 2, 3, 4
_NODE_LOW, _NODE_SIZE, _NODE_PARENT, _NODE_LEVEL = 5, 6, 7, 8
_ENTRY_HEAD, _ENTRY_VALUE, _ENTRY_CHILD = 9, 10, 11
_LEVEL_ATTRIBUTE, _START_NODE = 12, 13
_NONE = np.int64(-1)


def build_trie(
    key_of_rank: np.ndarray,
    key_levels: np.ndarray,
    level_attribute: Sequence[int],
    *,
    stratum_level: bool,
    n_strata: int = 0,
) -> Trie:
    """The trie of one part for :func:`group_records`.

    Parameters
    ----------
    key_of_rank
        int64 ``(n,)``: the key (0..n_keys-1) of every record of the part, by rank (table order).
    key_levels
        int64 ``(n_keys, L)``: each key's value code at every level of the trie, top level first.
    level_attribute
        For every level, the column of the group's used values it is checked against, or -1 for a level that is
        never excluded (the stratum).
    stratum_level
        True for the per-stratum trie: level 0 holds stratum numbers (0..n_strata-1); searches start at a stratum's
        node and head updates stop there (the root is never searched).
    n_strata
        Number of strata (only with ``stratum_level``).

    Returns
    -------
    Trie
        14 int64 arrays (see the module docstring); ``start node`` is ``[root]`` (or ``[-1]`` for an empty part)
        without ``stratum_level``, else the node of every stratum (-1 where the part has none).
    """
    key_of_rank = np.asarray(key_of_rank, dtype=np.int64)
    n_keys, depth = key_levels.shape
    queue = np.argsort(key_of_rank, kind="stable").astype(np.int64)
    counts = np.bincount(key_of_rank, minlength=n_keys).astype(np.int64)
    key_stop = np.cumsum(counts).astype(np.int64)
    key_head = key_stop - counts
    present = np.flatnonzero(counts > 0)
    rows = key_levels[present]
    order = np.lexsort(rows.T[::-1]) if len(rows) else np.zeros(0, dtype=np.int64)
    rows, keys, heads = rows[order], present[order], queue[key_head[present[order]]]
    n_rows = len(rows)
    # new[i, l]: row i starts a new prefix of length l + 1
    new = np.ones((n_rows, depth), dtype=bool)
    if n_rows > 1:
        new[1:] = np.logical_or.accumulate(rows[1:] != rows[:-1], axis=1)
    prefix = np.cumsum(new, axis=0).astype(np.int64) - 1  # prefix[i, l]: id of row i's prefix of length l + 1
    # node ids: the root (0), then the prefixes of length 1, 2, ..., depth - 1
    n_prefixes = [int(prefix[-1, level]) + 1 if n_rows else 0 for level in range(depth)]
    node_offset = np.ones(depth, dtype=np.int64)
    node_offset[0] = 0
    for level in range(2, depth):
        node_offset[level] = node_offset[level - 1] + n_prefixes[level - 2]
    n_nodes = 1 + sum(n_prefixes[: depth - 1])
    parents, values, children, entry_heads, inner = [], [], [], [], []
    for level in range(depth):  # entries of the nodes at `level`: the prefixes of length level + 1
        first = np.flatnonzero(new[:, level])
        parents.append(node_offset[level] + prefix[first, level - 1] if level else np.zeros(len(first), dtype=np.int64))
        values.append(rows[first, level])
        children.append(node_offset[level + 1] + prefix[first, level] if level + 1 < depth else keys[first])
        entry_heads.append(np.minimum.reduceat(heads, first) if len(first) else np.zeros(0, dtype=np.int64))
        inner.append(np.full(len(first), level + 1 < depth))
    parent, entry_value, entry_child, entry_head, is_inner = (
        np.concatenate(parts).astype(np.int64 if kind else bool)
        for parts, kind in ((parents, 1), (values, 1), (children, 1), (entry_heads, 1), (inner, 0))
    )
    order = np.lexsort((entry_head, parent))  # entries of a node together, by head
    parent, entry_value, entry_child, entry_head, is_inner = (
        parent[order],
        entry_value[order],
        entry_child[order],
        entry_head[order],
        is_inner[order],
    )
    node_size = np.bincount(parent, minlength=n_nodes).astype(np.int64)
    node_low = (np.cumsum(node_size) - node_size).astype(np.int64)
    node_parent = np.full(n_nodes, -1, dtype=np.int64)
    node_parent[entry_child[is_inner]] = parent[is_inner]
    node_level = np.zeros(n_nodes, dtype=np.int64)
    for level in range(1, depth):
        node_level[node_offset[level] : node_offset[level] + n_prefixes[level - 1]] = level
    key_parent = np.full(n_keys, -1, dtype=np.int64)
    key_parent[entry_child[~is_inner]] = parent[~is_inner]
    if stratum_level:
        start_node = np.full(max(n_strata, 1), -1, dtype=np.int64)
        at_root = np.flatnonzero(parent == 0)
        if depth > 1:
            start_node[entry_value[at_root]] = entry_child[at_root]
            node_parent[entry_child[at_root]] = -1  # updates stop at the stratum's node
    else:
        start_node = np.asarray([0 if n_rows else -1], dtype=np.int64)
    return (
        key_of_rank,
        queue,
        key_head.astype(np.int64),
        key_stop,
        key_parent,
        node_low,
        node_size,
        node_parent,
        node_level,
        entry_head.astype(np.int64),
        entry_value.astype(np.int64),
        entry_child.astype(np.int64),
        np.asarray(level_attribute, dtype=np.int64),
        start_node,
    )
