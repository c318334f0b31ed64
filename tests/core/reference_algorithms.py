"""Reference implementations for equivalence tests: the straightforward versions of Algorithm 11
(rescan from the head of each part) and of SID creation (Python deques, one dict per record),
as they were before the linear-time rewrite (validated then against SPEC §16's golden examples).
Test-only code: slow on purpose, easy to read against P1 and the SPEC."""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import pandas as pd

from pipeline.core.rating import restore_descending_order


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


def reference_group_sac(
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
    codes = (
        np.column_stack([pd.factorize(records[a])[0].astype(np.int64) for a in sensitive_attributes])
        if len(records)
        else np.zeros((0, len(sensitive_attributes)), dtype=np.int64)
    )

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


class _Bucket:
    __slots__ = ("value", "records")

    def __init__(self, value: Hashable):
        self.value = value
        self.records: deque[int] = deque()

    def __len__(self) -> int:
        return len(self.records)

    def __repr__(self) -> str:  # the SPEC's trace notation, e.g. ``a:4``
        return f"{self.value}:{len(self.records)}"


@dataclass
class ReferenceSidAssignment:
    """SIDs of one sensitive attribute.

    Attributes
    ----------
    sid_values
        ``sid_values[k]`` = values of SID ``k+1`` in the order they were added (pairwise
        distinct; one record per value occurrence).
    sid_records
        ``sid_records[k]`` = the record ids behind ``sid_values[k]``, position by position.
    record_to_sid
        ``{record id: SID number (1-based)}`` for every record that received a SID.
    suppressed
        Record ids whose cell is suppressed (published as the whole domain), in order.
    dangerous
        Trace notation (``value:size``) of the dangerous buckets, empty for plain Rating.
    initial_sequence
        Trace notation of the initial (non-dangerous) bucket sequence.
    reorder_comparisons
        Improved method only: per call of Algorithm 13, 1 + the number of positions the two
        scans moved (the SPEC §16.3 count; 1 is the best case).
    trace
        Steps in the SPEC §16.3 notation, when requested.
    """

    sid_values: list[list[Hashable]] = field(default_factory=list)
    sid_records: list[list[int]] = field(default_factory=list)
    record_to_sid: dict[int, int] = field(default_factory=dict)
    suppressed: list[int] = field(default_factory=list)
    dangerous: list[str] = field(default_factory=list)
    initial_sequence: list[str] = field(default_factory=list)
    reorder_comparisons: list[int] = field(default_factory=list)
    trace: list[tuple] | None = None


def _stable_bubble_sort(sequence: list) -> None:
    """P1's "old" Rating: stable bubble sort by size, descending, in place."""
    n = len(sequence)
    for end in range(n - 1, 0, -1):
        swapped = False
        for j in range(end):
            if len(sequence[j]) < len(sequence[j + 1]):
                sequence[j], sequence[j + 1] = sequence[j + 1], sequence[j]
                swapped = True
        if not swapped:
            return


def reference_create_sids(
    record_ids: Sequence[int],
    values: Sequence[Hashable],
    *,
    ell: int,
    method: Literal["improved", "plain"] = "improved",
    trace: bool = False,
) -> ReferenceSidAssignment:
    """Create the SIDs of one sensitive attribute (Rating's bucketization).

    Parameters
    ----------
    record_ids
        Record ids in table order (length n).
    values
        The attribute's value of each record (length n, no missing value).
    ell
        ℓ >= 2: every SID receives ℓ pairwise distinct values (plus residuals).
    method
        ``"improved"`` (P1 Algorithms 13 and 19): dangerous buckets (``ℓ·|B| >= |D|``) are
        taken unconditionally outside the sequence and the order is restored by Algorithm 13.
        ``"plain"`` (P0 as described by P1 §6.1): the ℓ largest buckets every time, then a
        stable bubble sort. Both give identical SIDs, record-to-SID maps and suppressions
        (SPEC §6.5).
    trace
        Record the steps in SPEC §16.3 notation (slower; for tests and teaching).

    Returns
    -------
    SidAssignment
        Buckets hold records in table order and give values from their front (FIFO); initial
        ties are broken by first appearance. Residual records join the SID without their value
        that has the fewest values (ties: earliest); if every SID holds the value, the cell is
        suppressed (SPEC [choice] §15 rows 14-15).

    Raises
    ------
    ValueError
        If ``ell < 2`` or the two sequences differ in length.

    References
    ----------
    P1 Algorithms 13 and 19, Definition 18; SPEC §6.1-§6.5, §7 and the traces of §16.3.
    """
    if int(ell) != ell or ell < 2:
        raise ValueError(f"ell (ℓ) must be an integer >= 2, got {ell!r}")
    if len(record_ids) != len(values):
        raise ValueError("record_ids and values must have the same length")
    if method not in ("improved", "plain"):
        raise ValueError(f"unknown SID-creation method {method!r}; use 'improved' or 'plain'")
    buckets: dict[Hashable, _Bucket] = {}
    for record, value in zip(record_ids, values, strict=True):
        bucket = buckets.get(value)
        if bucket is None:
            bucket = buckets[value] = _Bucket(value)
        bucket.records.append(int(record))
    total = len(record_ids)
    sequence = sorted(buckets.values(), key=lambda b: -len(b))  # stable: first appearance
    if method == "improved":
        dangerous = [b for b in sequence if ell * len(b) >= total]
        sequence = [b for b in sequence if ell * len(b) < total]
    else:
        dangerous = []
    chosen = ell - len(dangerous)
    result = ReferenceSidAssignment(
        dangerous=[repr(b) for b in dangerous],
        initial_sequence=[repr(b) for b in sequence],
        trace=[] if trace else None,
    )
    if trace:
        result.trace.append(("init", list(result.dangerous), list(result.initial_sequence)))

    def can_continue() -> bool:
        if any(len(b) == 0 for b in dangerous):
            return False
        if chosen == 0:
            return len(dangerous) > 0
        return len(sequence) >= chosen and len(sequence[chosen - 1]) > 0

    while can_continue():
        taken = dangerous + sequence[:chosen]
        sid_values = [b.value for b in taken]
        sid_records = [b.records.popleft() for b in taken]
        number = len(result.sid_values) + 1
        result.sid_values.append(sid_values)
        result.sid_records.append(sid_records)
        for record in sid_records:
            result.record_to_sid[record] = number
        if method == "improved":
            result.reorder_comparisons.append(restore_descending_order(sequence, chosen))
        else:
            _stable_bubble_sort(sequence)
        if trace:
            result.trace.append(("sid", list(sid_values), [repr(b) for b in sequence]))

    _assign_residuals(result, dangerous + sequence, trace)
    return result


def _assign_residuals(result: ReferenceSidAssignment, buckets: list[_Bucket], trace: bool) -> None:
    """Residual assignment of Algorithm 19 (SPEC §6.4): fewest values, then earliest SID."""
    n_sids = len(result.sid_values)
    sids_holding: dict[Hashable, set[int]] = {}
    for index, values in enumerate(result.sid_values):
        for value in values:
            sids_holding.setdefault(value, set()).add(index)
    sizes = [len(v) for v in result.sid_values]
    for bucket in buckets:
        while bucket.records:
            record = bucket.records.popleft()
            holding = sids_holding.setdefault(bucket.value, set())
            if len(holding) == n_sids:
                result.suppressed.append(record)
                if trace:
                    result.trace.append(("suppress", bucket.value, record))
                continue
            target = min((i for i in range(n_sids) if i not in holding), key=lambda i: (sizes[i], i))
            result.sid_values[target].append(bucket.value)
            result.sid_records[target].append(record)
            result.record_to_sid[record] = target + 1
            sizes[target] += 1
            holding.add(target)
            if trace:
                result.trace.append(("residual", bucket.value, record, target + 1))


def reference_group_sac_qi_aware(
    records: pd.DataFrame,
    sensitive_attributes: Sequence[str],
    sac_row_ids: Sequence[int],
    ir_row_ids: Sequence[int],
    *,
    ell: int,
    quasi_identifiers: Sequence[str],
    row_id_column: str = "row_id",
) -> Grouping:
    """Algorithm 11 with QI-aware partners (issue 12), by plain rescans of Python lists.

    Each slot of a group is filled by, in this order: the first live SAC record with the seed's
    quasi-identifier tuple that is compatible with the partial group, the first such IR record, then
    the first compatible SAC record, then the first compatible IR record (table order everywhere).
    Everything else as :func:`reference_group_sac`.
    """
    if int(ell) != ell or ell < 2:
        raise ValueError(f"ell (ℓ) must be an integer >= 2, got {ell!r}")
    by_id = records.set_index(row_id_column)
    values = {int(i): tuple(by_id.loc[i, list(sensitive_attributes)]) for i in by_id.index}
    quasi = {int(i): tuple(str(v) for v in by_id.loc[i, list(quasi_identifiers)]) for i in by_id.index}
    sac = [int(i) for i in sac_row_ids]
    ir = [int(i) for i in ir_row_ids]
    live = set(sac) | set(ir)

    def compatible(record: int, members: list[int]) -> bool:
        return all(values[record][a] != values[member][a] for member in members for a in range(len(sensitive_attributes)))

    groups: list[list[int]] = []
    borrowed: list[int] = []
    deleted: list[int] = []
    while True:
        seeds = [record for record in sac if record in live]
        if not seeds:
            break
        seed = seeds[0]
        members = [seed]
        while len(members) < ell:
            searches = (
                [r for r in sac if quasi[r] == quasi[seed]],
                [r for r in ir if quasi[r] == quasi[seed]],
                sac,
                ir,
            )
            found = next(
                (r for part in searches for r in part if r in live and r not in members and compatible(r, members)),
                None,
            )
            if found is None:
                break
            members.append(found)
        if len(members) == ell:
            groups.append(members)
            borrowed.extend(r for r in members if r in set(ir))
            live.difference_update(members)
        else:
            deleted.append(seed)
            live.discard(seed)
    return Grouping(groups=groups, borrowed=borrowed, deleted=deleted, ir_left=[r for r in ir if r in live])


def reference_posterior_bound_summary(frame: pd.DataFrame) -> pd.DataFrame:
    """The straightforward summary of :attr:`pipeline.core.posterior.PosteriorResult.frame` (one row per (part,
    sensitive attribute)), to compare with ``PosteriorResult.bound``, which is computed without the per-cell frame.

    Parameters
    ----------
    frame
        ``PosteriorResult.frame``.

    Returns
    -------
    pandas.DataFrame
        ``part``, ``attribute``, ``n_cells`` (int64), ``n_cells_above_bound`` (int64),
        ``max_excess`` (float64), ``mean_posterior`` (float64), ``mean_population_posterior``
        (float64). Numbers only (no value of the table).
    """
    grouped = frame.groupby(["part", "attribute"], sort=True, observed=True)
    summary = grouped.agg(
        n_cells=("posterior", "size"),
        n_cells_above_bound=("above_bound", "sum"),
        max_excess=("excess", "max"),
        mean_posterior=("posterior", "mean"),
        mean_population_posterior=("population_posterior", "mean"),
    ).reset_index()
    return summary.astype({"n_cells": "int64", "n_cells_above_bound": "int64"})


def reference_fold_em_path(data, smoothing: float, n_iterations: int, fold: int) -> list:
    """The held-out selection's EM path by its definition (no shortcut): every round updates the responsibilities of
    every group and SID entry, and the M-step counts every (record, value) pair weighted by 1 when the pair's group
    (SIDs: record) is in ``fold``, else 0, from freshly built pairs. Returns the models after rounds 1..n."""
    from pipeline.core import posterior as module

    def e_step(model) -> None:
        for block in data.groups:
            block.marginals = module.exact_group_marginals(module._group_log_likelihood(model, data, block))
        for attribute, sid in data.sids.items():
            log_w = model.pair_log_joint(attribute, data.feature_codes, sid.records, sid.values) + np.log(sid.availability)
            peak = np.full(len(data.feature_codes), -np.inf)
            np.maximum.at(peak, sid.records, log_w)
            weights = np.exp(log_w - peak[sid.records])
            sid.responsibility = (
                weights / np.bincount(sid.records, weights=weights, minlength=len(data.feature_codes))[sid.records]
            )

    def m_step():
        log_prior, log_conditional = {}, {}
        for attribute in data.domains:
            records, values, weights = [], [], []
            for block in data.groups:
                if attribute not in block.attributes:
                    continue
                size = block.members.shape[1]
                records.append(np.repeat(block.members.reshape(-1), size))
                values.append(np.broadcast_to(block.candidate_values[attribute][:, None, :], block.marginals.shape).reshape(-1))
                weights.append((block.marginals * (block.fold == fold)[:, None, None]).reshape(-1))
            sid = data.sids.get(attribute)
            if sid is not None:
                records.append(sid.records)
                values.append(sid.values)
                weights.append(sid.responsibility * (sid.records % 2 == fold))
            r, v, w = np.concatenate(records), np.concatenate(values), np.concatenate(weights)
            keep = v >= 0
            log_prior[attribute], log_conditional[attribute] = module._estimate(
                r[keep], v[keep], w[keep], data.feature_codes, len(data.domains[attribute]), data.n_features, smoothing
            )
        return module.NaiveBayesModel(log_prior, log_conditional)

    for block in data.groups:
        size = block.members.shape[1]
        block.marginals = np.full((len(block.members), size, size), 1.0 / size)
    for sid in data.sids.values():
        sid.responsibility = (
            sid.availability / np.bincount(sid.records, weights=sid.availability, minlength=len(data.feature_codes))[sid.records]
        )
    models = [m_step()]
    for _ in range(n_iterations - 1):
        e_step(models[-1])
        models.append(m_step())
    return models
