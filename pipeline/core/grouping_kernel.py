"""Compiled inner loop of Algorithm 11 (:func:`pipeline.core.grouping.group_sac`).

Algorithm 11 is a greedy loop: every seed (the first live SAC record, in table order) takes, slot by slot, "the first
live record, in table order, compatible with the partial group" (SPEC §5.1), from the seed's quasi-identifier stratum
first when the grouping is QI-aware (issue 12). The loop is inherently sequential, so it runs compiled with numba
instead of record by record in Python (121 s of Python at 10M records before; issue 12's performance note).

The index it walks and updates is the trie of :mod:`pipeline.core.grouping_trie` (see there). The result is exactly
that of the straightforward rescan (``tests/core/reference_algorithms.py``, hypothesis equivalence tests). No pandas
here: integer arrays in, integer arrays out. The loop runs ahead-of-time compiled when :mod:`pipeline.core.compiled`
has built it, else compiled by numba on first use (cached in ``__pycache__``).
"""

from __future__ import annotations

import numpy as np
from numba import njit

from pipeline.core.grouping_trie import (
    _ENTRY_CHILD,
    _ENTRY_HEAD,
    _ENTRY_VALUE,
    _KEY_HEAD,
    _KEY_OF_RANK,
    _KEY_PARENT,
    _KEY_STOP,
    _LEVEL_ATTRIBUTE,
    _NODE_LEVEL,
    _NODE_LOW,
    _NODE_PARENT,
    _NODE_SIZE,
    _NONE,
    _QUEUE,
    _START_NODE,
    Trie,
)

__all__ = ["group_records"]


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
