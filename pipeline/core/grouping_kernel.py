"""Compiled inner loop of Algorithm 11 (:func:`pipeline.core.grouping.group_sac`).

Algorithm 11 is a greedy loop: every seed (the first live SAC record, in table order) takes, slot by slot, "the first
live record, in table order, compatible with the partial group" (SPEC §5.1), from the seed's quasi-identifier stratum
first when the grouping is QI-aware (issue 12). The loop is inherently sequential, so it runs compiled with numba
instead of record by record in Python (121 s of Python at 10M records before; issue 12's performance note).

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

The result is exactly that of the straightforward rescan (``tests/core/reference_algorithms.py``, hypothesis
equivalence tests). No pandas here: integer arrays in, integer arrays out.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numba import njit

__all__ = ["Trie", "build_trie", "group_records"]

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


@njit(cache=True)
def _first_compatible(trie: Trie, start: np.int64, used: np.ndarray, n_used: int, stack: np.ndarray) -> np.int64:
    """Rank of the first live record below node ``start`` whose value at every level is not among the group's used
    values (``used[attribute, :n_used]``), or -1. ``stack``: scratch int64 ``(2, depth + 1)``."""  # pragma: no cover
    node_low, node_size, node_level = trie[_NODE_LOW], trie[_NODE_SIZE], trie[_NODE_LEVEL]
    entry_head, entry_value, entry_child = trie[_ENTRY_HEAD], trie[_ENTRY_VALUE], trie[_ENTRY_CHILD]
    level_attribute = trie[_LEVEL_ATTRIBUTE]
    last = len(level_attribute) - 1
    best = np.int64(1) << np.int64(62)
    found = False
    top = 0
    stack[0, 0] = start
    stack[1, 0] = 0
    while top >= 0:
        node = stack[0, top]
        index = stack[1, top]
        if index >= node_size[node]:
            top -= 1
            continue
        stack[1, top] = index + 1
        entry = node_low[node] + index
        head = entry_head[entry]
        if head >= best:
            top -= 1
            continue
        level = node_level[node]
        attribute = level_attribute[level]
        if attribute >= 0:
            value = entry_value[entry]
            excluded = False
            for member in range(n_used):
                if used[attribute, member] == value:
                    excluded = True
                    break
            if excluded:
                continue
        if level == last:
            best = head
            found = True
            top -= 1
            continue
        top += 1
        stack[0, top] = entry_child[entry]
        stack[1, top] = 0
    return best if found else _NONE


@njit(cache=True)
def _move_head(trie: Trie, child: np.int64, node: np.int64, head: np.int64) -> None:  # pragma: no cover - compiled
    """The subtree ``child`` of ``node`` now starts at rank ``head`` (later than before), or is empty (-1): move or
    drop its entry, then tell the parents while a node's own head changes."""
    node_low, node_size, node_parent = trie[_NODE_LOW], trie[_NODE_SIZE], trie[_NODE_PARENT]
    entry_head, entry_value, entry_child = trie[_ENTRY_HEAD], trie[_ENTRY_VALUE], trie[_ENTRY_CHILD]
    while node != -1:
        low = node_low[node]
        size = node_size[node]
        old_node_head = entry_head[low]
        index = low
        while entry_child[index] != child:
            index += 1
        value = entry_value[index]
        if head == -1:
            for moved in range(index, low + size - 1):
                entry_head[moved] = entry_head[moved + 1]
                entry_value[moved] = entry_value[moved + 1]
                entry_child[moved] = entry_child[moved + 1]
            size -= 1
            node_size[node] = size
        else:
            while index + 1 < low + size and entry_head[index + 1] < head:
                entry_head[index] = entry_head[index + 1]
                entry_value[index] = entry_value[index + 1]
                entry_child[index] = entry_child[index + 1]
                index += 1
            entry_head[index] = head
            entry_value[index] = value
            entry_child[index] = child
        new_node_head = entry_head[low] if size > 0 else _NONE
        if new_node_head == old_node_head:
            return
        child = node
        head = new_node_head
        node = node_parent[node]


@njit(cache=True)
def _remove(trie: Trie, rank: np.int64, alive: np.ndarray) -> None:  # pragma: no cover - compiled
    """Forget record ``rank``, already marked dead in ``alive``; move its key's head if it was the head."""
    key_of_rank, queue, key_head, key_stop = trie[_KEY_OF_RANK], trie[_QUEUE], trie[_KEY_HEAD], trie[_KEY_STOP]
    key = key_of_rank[rank]
    at = key_head[key]
    if queue[at] != rank:
        return
    at += 1
    while at < key_stop[key] and not alive[queue[at]]:
        at += 1
    key_head[key] = at
    _move_head(trie, key, trie[_KEY_PARENT][key], queue[at] if at < key_stop[key] else _NONE)


@njit(cache=True)
def group_records(
    ell: np.int64,
    sac_codes: np.ndarray,
    ir_codes: np.ndarray,
    sac_strata: np.ndarray,
    tries: tuple,  # type: ignore[type-arg]
    stratum_tries: tuple,  # type: ignore[type-arg]
    qi_aware: bool,
) -> tuple:  # type: ignore[type-arg]  # pragma: no cover - compiled
    """The greedy loop of Algorithm 11 over SAC (part 0) and IR (part 1); see :func:`pipeline.core.grouping.group_sac`.

    ``sac_codes``/``ir_codes``: int64 ``(n_part, m)`` sensitive codes by part rank (table order); ``sac_strata``: the
    stratum of every SAC rank; ``tries``: the whole-part tries of SAC and IR; ``stratum_tries``: their per-stratum
    tries (ignored unless ``qi_aware``), all from :func:`build_trie`.

    Returns ``(members, member_parts, deleted, ir_alive)``: the part ranks of the members of every completed group
    (ℓ per group, seed first) and their parts (0 = SAC, 1 = IR), the SAC ranks of the deleted seeds in order, and a
    bool mask of the IR ranks still live.
    """
    m = sac_codes.shape[1]
    n_sac = sac_codes.shape[0]
    alive = (np.ones(n_sac, dtype=np.bool_), np.ones(ir_codes.shape[0], dtype=np.bool_))
    members = np.empty(max(n_sac * ell, 1), dtype=np.int64)
    member_parts = np.empty_like(members)
    deleted = np.empty(max(n_sac, 1), dtype=np.int64)
    n_members = 0
    n_deleted = 0
    used = np.empty((m, ell), dtype=np.int64)
    stack = np.empty((2, m + 2), dtype=np.int64)
    group_ranks = np.empty(ell, dtype=np.int64)
    group_parts = np.empty(ell, dtype=np.int64)
    seed = 0
    while True:
        while seed < n_sac and not alive[0][seed]:
            seed += 1
        if seed >= n_sac:
            break
        for attribute in range(m):
            used[attribute, 0] = sac_codes[seed, attribute]
        group_ranks[0] = seed
        group_parts[0] = 0
        size = 1
        while size < ell:
            found = _NONE
            found_part = 0
            if qi_aware:
                stratum = sac_strata[seed]
                for part in range(2):
                    start_nodes = stratum_tries[part][_START_NODE]
                    if stratum < len(start_nodes) and start_nodes[stratum] != -1:
                        found = _first_compatible(stratum_tries[part], start_nodes[stratum], used, size, stack)
                    if found != -1:
                        found_part = part
                        break
            if found == -1:
                for part in range(2):
                    root = tries[part][_START_NODE][0]
                    if root != -1:
                        found = _first_compatible(tries[part], root, used, size, stack)
                    if found != -1:
                        found_part = part
                        break
            if found == -1:
                break
            group_ranks[size] = found
            group_parts[size] = found_part
            for attribute in range(m):
                used[attribute, size] = sac_codes[found, attribute] if found_part == 0 else ir_codes[found, attribute]
            size += 1
        complete = size == ell
        if not complete:
            deleted[n_deleted] = seed
            n_deleted += 1
        for member in range(ell if complete else 1):
            part = group_parts[member]
            rank = group_ranks[member]
            alive[part][rank] = False
            _remove(tries[part], rank, alive[part])
            if qi_aware:
                _remove(stratum_tries[part], rank, alive[part])
            if complete:
                members[n_members] = rank
                member_parts[n_members] = part
                n_members += 1
    return members[:n_members], member_parts[:n_members], deleted[:n_deleted], alive[1]
