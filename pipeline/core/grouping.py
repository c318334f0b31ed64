"""Algorithm 11: group SAC into SAC~ groups of exactly ℓ records, borrowing from IR.

Sources: P1 §4 (Algorithm 11 and the Table 5/6 example), reconstructed in SPEC §5.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

__all__ = ["Grouping", "group_sac", "permute_within_groups"]


@dataclass(frozen=True)
class Grouping:
    """Result of Algorithm 11.

    Attributes
    ----------
    groups
        Row ids of each group's members (exactly ℓ each), in insertion order (seed first).
    borrowed
        Row ids of the IR records moved into groups ("borrowing").
    deleted
        Row ids of the seeds whose group could not be completed (not published at all), in
        deletion order.
    ir_left
        Row ids of IR records not borrowed, in table order (input of improved Rating).
    """

    groups: list[list[int]]
    borrowed: list[int]
    deleted: list[int]
    ir_left: list[int]


class _Queue:
    """Records of one part (SAC or IR) in table order, with permanent removal and a
    vectorised search for the first record compatible with a partial group."""

    def __init__(self, positions: np.ndarray, codes: np.ndarray):
        self.order = positions.astype(np.int64)
        self.codes = codes
        self.removed = np.zeros(len(positions), dtype=bool)
        self.head = 0
        self.n_removed = 0

    def remove(self, indices: Sequence[int]) -> None:
        """Remove records for good (indices into ``order``); may compact ``order`` afterwards."""
        for index in indices:
            self.removed[index] = True
        self.n_removed += len(indices)
        while self.head < len(self.order) and self.removed[self.head]:
            self.head += 1
        if self.n_removed > 1024 and self.n_removed * 2 > len(self.order):
            keep = ~self.removed
            self.order = self.order[keep]
            self.removed = np.zeros(len(self.order), dtype=bool)
            self.head = 0
            self.n_removed = 0

    def first(self) -> int | None:
        return self.head if self.head < len(self.order) else None

    def first_compatible(self, used: list[np.ndarray]) -> int | None:
        """Index (into ``order``) of the first live record whose value on every attribute
        differs from all values in ``used`` (one array of codes per attribute), or None."""
        start = self.head
        size = 32
        n = len(self.order)
        while start < n:
            stop = min(n, start + size)
            block = self.codes[self.order[start:stop]]
            ok = ~self.removed[start:stop]
            for attribute, values in enumerate(used):
                column = block[:, attribute]
                for value in values:
                    ok &= column != value
            hits = np.flatnonzero(ok)
            if len(hits):
                return start + int(hits[0])
            start = stop
            size *= 4
        return None


def group_sac(
    records: pd.DataFrame,
    sensitive_attributes: Sequence[str],
    sac_row_ids: Sequence[int],
    ir_row_ids: Sequence[int],
    *,
    ell: int,
    row_id_column: str = "row_id",
) -> Grouping:
    """Group SAC records into groups of exactly ``ell`` records that differ on every sensitive attribute.

    Parameters
    ----------
    records
        One row per record; columns ``row_id_column`` and every sensitive attribute (no
        missing values). Must contain every id of ``sac_row_ids`` and ``ir_row_ids``.
    sensitive_attributes
        All sensitive attributes; a record is compatible with a partial group iff its value
        on **every** one of them differs from every member's (SPEC §5.1 [deduced]).
    sac_row_ids, ir_row_ids
        SAC and IR in table order (from Algorithm 7).
    ell
        ℓ >= 2, the group size.

    Returns
    -------
    Grouping
        Seeds are taken from SAC in table order; each slot is filled by the first compatible
        SAC record, else the first compatible IR record (borrowing), scanning in table order.
        A group that cannot be completed deletes its seed and returns the other tentatively
        added records to their original places (SPEC [choice], §15 row 9).

    Raises
    ------
    ValueError
        If ``ell < 2`` or an id is not in ``records``.

    References
    ----------
    P1 Algorithm 11; SPEC §5.1 and §15 rows 7-9.
    """
    if int(ell) != ell or ell < 2:
        raise ValueError(f"ell (ℓ) must be an integer >= 2, got {ell!r}")
    row_ids = records[row_id_column].to_numpy(dtype=np.int64)
    position_of = pd.Index(row_ids)
    codes = np.column_stack(
        [pd.factorize(records[a])[0].astype(np.int64) for a in sensitive_attributes]
    ) if len(records) else np.zeros((0, len(sensitive_attributes)), dtype=np.int64)

    def positions(ids: Sequence[int]) -> np.ndarray:
        found = position_of.get_indexer(np.asarray(ids, dtype=np.int64))
        if (found < 0).any():
            raise ValueError("a SAC/IR row id is not in the records table")
        return found

    sac = _Queue(positions(sac_row_ids), codes)
    ir = _Queue(positions(ir_row_ids), codes)
    ir_positions_order = ir.order.copy()
    groups: list[list[int]] = []
    borrowed: list[int] = []
    deleted: list[int] = []
    borrowed_positions: set[int] = set()
    while (seed_index := sac.first()) is not None:
        seed = int(sac.order[seed_index])
        members: list[tuple[_Queue, int]] = [(sac, seed_index)]
        used = [[codes[seed, a]] for a in range(codes.shape[1])]
        while len(members) < ell:
            for queue in (sac, ir):
                index = queue.first_compatible([np.asarray(u) for u in used])
                if index is not None:
                    break
            else:
                break
            members.append((queue, index))
            member = int(queue.order[index])
            for a in range(codes.shape[1]):
                used[a].append(codes[member, a])
        if len(members) == ell:
            group = []
            # resolve positions before removal (removal may compact a queue)
            resolved = [(queue, index, int(queue.order[index])) for queue, index in members]
            for queue, _, position in resolved:
                group.append(int(row_ids[position]))
                if queue is ir:
                    borrowed.append(int(row_ids[position]))
                    borrowed_positions.add(position)
            for queue in (sac, ir):
                queue.remove([index for q, index, _ in resolved if q is queue])
            groups.append(group)
        else:
            deleted.append(int(row_ids[seed]))
            sac.remove([seed_index])
    ir_left = [int(row_ids[p]) for p in ir_positions_order.tolist() if p not in borrowed_positions]
    return Grouping(groups=groups, borrowed=borrowed, deleted=deleted, ir_left=ir_left)


def permute_within_groups(
    records: pd.DataFrame,
    groups: Sequence[Sequence[int]],
    clusters: Sequence[Sequence[str]],
    *,
    seed: int,
    row_id_column: str = "row_id",
) -> pd.DataFrame:
    """Apply an independent uniform random permutation per group and per attribute cluster.

    Parameters
    ----------
    records
        One row per record; columns ``row_id_column``, the quasi-identifiers and every
        attribute named in ``clusters``.
    groups
        Member row ids per group (from :func:`group_sac`).
    clusters
        ``Cluster_Set`` (from Algorithm 10); the values of one cluster move together.
    seed
        Seed of ``random.Random``; groups in order, clusters in order, one
        ``shuffle(list(range(len(group))))`` each, row ``r`` receives tuple ``perm[r]``
        (SPEC §5.2 reference implementation).

    Returns
    -------
    pandas.DataFrame
        One row per group member, in group order then member order: ``group_id`` (int64,
        1-based), ``row_id_column`` (the real member, whose quasi-identifiers the row keeps)
        and every other column of ``records``, with the sensitive attributes permuted.

    References
    ----------
    P1 Table 6 text; SPEC §5.2-§5.3 and §15 row 10.
    """
    member_ids = [row_id for group in groups for row_id in group]
    indexed = records.set_index(row_id_column, drop=False)
    released = indexed.loc[member_ids].reset_index(drop=True)
    released.insert(0, "group_id", np.repeat(np.arange(1, len(groups) + 1), [len(g) for g in groups]))
    rng = random.Random(seed)
    source_rows = {tuple(c): np.empty(len(released), dtype=np.int64) for c in clusters}
    start = 0
    for group in groups:
        size = len(group)
        for cluster in clusters:
            permutation = list(range(size))
            rng.shuffle(permutation)
            source_rows[tuple(cluster)][start : start + size] = np.asarray(permutation) + start
        start += size
    original = released.copy()
    for cluster, source in source_rows.items():
        for attribute in cluster:
            released[attribute] = original[attribute].to_numpy()[source]
    return released
