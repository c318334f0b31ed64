"""SID creation for one sensitive attribute: improved Rating (Algorithms 13 and 19) and plain Rating.

Sources: P1 §5 (Definition 18, Lemmas 14-17 and 20, Corollary 21, Algorithms 13 and 19);
P0 = Liu, Luo & Huang, "Rating", ICDMW 2011 (plain Rating as described by P1); Anatomy
(Xiao & Tao, VLDB 2006) for the group-creation / residue-assignment shape. Reconstructed in
SPEC §6-§7.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
import pandas as pd

from pipeline.core.keyed import keyed_generator, keyed_order
from pipeline.core.sensitivity import EllRequirement, ell_by_attribute

__all__ = [
    "SidAssignment",
    "create_sids",
    "rating_tables",
    "restore_descending_order",
]


@dataclass
class SidAssignment:
    """SIDs of one sensitive attribute, as flat arrays (and list views for small inputs).

    One *entry* is one (SID, value, record) membership. Entries are ordered by SID, then in
    the order they were added (the ℓ values of the main loop, then residuals).

    Attributes
    ----------
    bucket_values
        Object array: the distinct values, in order of first appearance (bucket codes index it).
    entry_sid
        int64 array: 1-based SID number of each entry.
    entry_bucket
        int64 array: bucket code (index into ``bucket_values``) of each entry.
    entry_record
        int64 array: record id of each entry.
    record_sid
        int64 array aligned with the input records: the record's SID number, 0 when its cell
        is suppressed.
    suppressed_records
        int64 array: record ids whose cell is suppressed (published as the whole domain), in
        order.
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

    bucket_values: np.ndarray
    entry_sid: np.ndarray
    entry_bucket: np.ndarray
    entry_record: np.ndarray
    record_sid: np.ndarray
    suppressed_records: np.ndarray
    n_sids: int
    dangerous: list[str] = field(default_factory=list)
    initial_sequence: list[str] = field(default_factory=list)
    reorder_comparisons: list[int] = field(default_factory=list)
    trace: list[tuple[Any, ...]] | None = None

    @property
    def sid_values(self) -> list[list[Hashable]]:
        """``sid_values[k]`` = values of SID ``k+1`` in the order they were added."""
        result: list[list[Hashable]] = [[] for _ in range(self.n_sids)]
        for sid, bucket in zip(self.entry_sid.tolist(), self.entry_bucket.tolist(), strict=True):
            result[sid - 1].append(self.bucket_values[bucket])
        return result

    @property
    def sid_records(self) -> list[list[int]]:
        """``sid_records[k]`` = the record ids behind ``sid_values[k]``, position by position."""
        result: list[list[int]] = [[] for _ in range(self.n_sids)]
        for sid, record in zip(self.entry_sid.tolist(), self.entry_record.tolist(), strict=True):
            result[sid - 1].append(record)
        return result

    @property
    def record_to_sid(self) -> dict[int, int]:
        """``{record id: SID number}`` for every record that received a SID."""
        return dict(zip(self.entry_record.tolist(), self.entry_sid.tolist(), strict=True))

    @property
    def suppressed(self) -> list[int]:
        """``suppressed_records`` as a list."""
        return self.suppressed_records.tolist()

    def same_sids_as(self, other: SidAssignment) -> bool:
        """Same SIDs (as value sets), same record → SID map and same suppressed records."""
        if self.n_sids != other.n_sids or not np.array_equal(self.record_sid, other.record_sid):
            return False
        if not np.array_equal(self.suppressed_records, other.suppressed_records):
            return False
        # values as ranks of their text in one shared code space (never a fixed-width unicode array per entry)
        texts = np.asarray([str(v) for v in [*self.bucket_values, *other.bucket_values]], dtype=object)
        _, rank = np.unique(texts, return_inverse=True)
        rank = rank.reshape(-1).astype(np.int64)
        mine = rank[: len(self.bucket_values)][self.entry_bucket]
        theirs = rank[len(self.bucket_values) :][other.entry_bucket]
        order_mine = np.lexsort((mine, self.entry_sid))
        order_theirs = np.lexsort((theirs, other.entry_sid))
        return bool(
            np.array_equal(self.entry_sid[order_mine], other.entry_sid[order_theirs])
            and np.array_equal(mine[order_mine], theirs[order_theirs])
        )


def restore_descending_order(sequence: list[Any], chosen: int) -> int:
    """Algorithm 13: restore the stable descending size order after one SID.

    Parameters
    ----------
    sequence
        Buckets (anything with ``len``) that were in stable descending order before the
        first ``chosen`` of them each lost one value; modified in place.
    chosen
        ℓ' = ℓ − |SDB|, the number of leading buckets that lost a value.

    Returns
    -------
    int
        1 + the number of positions both scans moved (1 = the best case of Lemma 14).

    References
    ----------
    P1 Algorithm 13, Lemmas 14-15, Corollaries 16-17; SPEC §6.3. The result equals a full
    stable re-sort ``sorted(sequence, key=lambda b: -len(b))``.
    """
    positions = list(range(len(sequence)))
    steps = _restore_order(positions, [len(bucket) for bucket in sequence], chosen)
    sequence[:] = [sequence[k] for k in positions]
    return steps


def create_sids(
    record_ids: Sequence[int] | np.ndarray,
    values: Sequence[Hashable] | np.ndarray | pd.Series,
    *,
    ell: int,
    method: Literal["improved", "plain"] = "improved",
    trace: bool = False,
) -> SidAssignment:
    """Create the SIDs of one sensitive attribute (Rating's bucketization).

    Parameters
    ----------
    record_ids
        Record ids (int) in table order (length n).
    values
        The attribute's value of each record (length n, no missing value; a categorical
        Series is used through its codes).
    ell
        ℓ >= 2: every SID receives ℓ pairwise distinct values (plus residuals).
    method
        ``"improved"`` (P1 Algorithms 13 and 19): dangerous buckets (``ℓ·|B| >= |D|``) are
        taken unconditionally outside the sequence and the order is restored by Algorithm 13.
        ``"plain"`` (P0 as described by P1 §6.1): the ℓ largest buckets every time, then a
        stable bubble sort. Both give identical SIDs, record-to-SID maps and suppressions
        (SPEC §6.5).
    trace
        Record the steps in SPEC §16.3 notation: the main loop then runs as the readable Python loops below (slower;
        for tests and teaching). Without it the main loop runs compiled (:mod:`pipeline.core.rating_kernel`: ahead
        of time when ``make env`` built it, :mod:`pipeline.core.compiled`, else by numba on the first call, a few
        seconds, cached in ``__pycache__``), with the same result (``tests/core/test_rating_kernel.py``).

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

    Notes
    -----
    Cost: one pass to bucket the records, then per SID O(ℓ) (Algorithm 13 on size classes) or a
    bubble-sort pass for ``"plain"``, compiled; records are attached to SIDs afterwards with array
    operations, and residuals are placed per bucket with one sort of the candidate SIDs, so
    the improved method runs in O(n + number of SIDs × ℓ) (SPEC §6.3).

    References
    ----------
    P1 Algorithms 13 and 19, Definition 18; SPEC §6.1-§6.5, §7 and the traces of §16.3.
    """
    if int(ell) != ell or ell < 2:
        raise ValueError(f"ell (ℓ) must be an integer >= 2, got {ell!r}")
    ell = int(ell)
    if len(record_ids) != len(values):
        raise ValueError("record_ids and values must have the same length")
    if method not in ("improved", "plain"):
        raise ValueError(f"unknown SID-creation method {method!r}; use 'improved' or 'plain'")
    record_ids = np.asarray(record_ids, dtype=np.int64)
    if isinstance(values, pd.Series) and isinstance(values.dtype, pd.CategoricalDtype):
        # categorical codes -> codes in order of first appearance
        codes, uniques = pd.factorize(values.cat.codes.to_numpy())
        bucket_values = values.cat.categories.to_numpy(dtype=object)[uniques]
    else:
        codes, uniques = pd.factorize(
            pd.Series(list(values) if not isinstance(values, (np.ndarray, pd.Series)) else values, dtype=object)
        )
        bucket_values = np.asarray(uniques, dtype=object)
    codes = codes.astype(np.int64)
    n_buckets = len(bucket_values)
    sizes = np.bincount(codes, minlength=n_buckets).astype(np.int64)
    remaining = sizes.tolist()
    total = len(codes)

    def label(bucket: int) -> str:  # the SPEC's trace notation, e.g. ``a:4``
        return f"{bucket_values[bucket]}:{remaining[bucket]}"

    sequence = sorted(range(n_buckets), key=lambda b: (-remaining[b], b))  # stable: first appearance
    if method == "improved":
        dangerous = [b for b in sequence if ell * remaining[b] >= total]
        sequence = [b for b in sequence if ell * remaining[b] < total]
    else:
        dangerous = []
    chosen = ell - len(dangerous)
    dangerous_labels = [label(b) for b in dangerous]
    initial_labels = [label(b) for b in sequence]
    steps: list[tuple[Any, ...]] | None = [] if trace else None
    if steps is not None:
        steps.append(("init", list(dangerous_labels), list(initial_labels)))
    reorder_comparisons: list[int] = []
    taken_buckets: list[int] = []  # flat, ℓ per SID

    def can_continue() -> bool:
        if any(remaining[b] == 0 for b in dangerous):
            return False
        if chosen == 0:
            return len(dangerous) > 0
        return len(sequence) >= chosen and remaining[sequence[chosen - 1]] > 0

    taken_array: np.ndarray | None = None
    if steps is None:
        # the main loop compiled (the same SIDs as the readable loops below, which also record the trace): ahead of
        # time when built (no numba import), else numba's, imported here, not at module load (its import costs about
        # 0.3-0.8 s, which every command that never rates would pay)
        from pipeline.core.compiled import kernel

        left = sizes.copy()
        if method == "improved":
            taken_array, comparisons, final_sequence = kernel("improved_sid_loop")(
                left, np.asarray(sequence, dtype=np.int64), np.asarray(dangerous, dtype=np.int64), ell
            )
            reorder_comparisons = comparisons.tolist()
        else:
            taken_array, final_sequence = kernel("plain_sid_loop")(left, np.asarray(sequence, dtype=np.int64), ell)
        sequence = final_sequence.tolist()
        remaining = left.tolist()
    elif method == "improved":
        # Algorithm 13 on size classes: O(ℓ) per SID whatever the number of buckets of one size (100,000 distinct
        # values: all of size 1), instead of a scan of the list (issue 14)
        ordered = _SizeClasses(sequence, remaining)
        while not any(remaining[b] == 0 for b in dangerous) and (
            len(dangerous) > 0 if chosen == 0 else ordered.n_positive >= chosen
        ):
            taken = dangerous + ordered.take(chosen)
            taken_buckets.extend(taken)
            for bucket in dangerous:
                remaining[bucket] -= 1
            reorder_comparisons.append(ordered.decrement_taken())
            if steps is not None:
                steps.append(("sid", [bucket_values[b] for b in taken], [label(b) for b in ordered.sequence()]))
        sequence = ordered.sequence()
    while steps is not None and method == "plain" and can_continue():
        taken = dangerous + sequence[:chosen]
        taken_buckets.extend(taken)
        for bucket in taken:
            remaining[bucket] -= 1
        _bubble_sort(sequence, remaining)
        steps.append(("sid", [bucket_values[b] for b in taken], [label(b) for b in sequence]))

    main_bucket = np.asarray(taken_buckets, dtype=np.int64) if taken_array is None else taken_array
    n_sids = len(main_bucket) // ell
    # records behind the main-loop entries: a bucket gives its records in table order (FIFO)
    order = np.argsort(codes, kind="stable")
    bucket_start = np.concatenate([[0], np.cumsum(sizes)[:-1]]) if n_buckets else np.zeros(0, dtype=np.int64)
    main_sid = np.repeat(np.arange(1, n_sids + 1, dtype=np.int64), ell)
    by_bucket = np.argsort(main_bucket, kind="stable")
    taken_count = np.bincount(main_bucket, minlength=n_buckets)
    taken_start = np.concatenate([[0], np.cumsum(taken_count)[:-1]]) if n_buckets else np.zeros(0, dtype=np.int64)
    rank_in_bucket = np.empty(len(main_bucket), dtype=np.int64)
    rank_in_bucket[by_bucket] = np.arange(len(main_bucket)) - taken_start[main_bucket[by_bucket]]
    main_position = order[bucket_start[main_bucket] + rank_in_bucket] if len(main_bucket) else np.zeros(0, dtype=np.int64)

    # residuals (Algorithm 19, SPEC §6.4), bucket by bucket in sequence order
    sid_sizes = np.full(n_sids, ell, dtype=np.int64)
    residual_sid: list[np.ndarray] = []
    residual_bucket: list[np.ndarray] = []
    residual_position: list[np.ndarray] = []
    suppressed_positions: list[np.ndarray] = []
    for bucket in dangerous + sequence:
        left = remaining[bucket]
        if left == 0:
            continue
        first_left = bucket_start[bucket] + taken_count[bucket]
        positions = order[first_left : first_left + left]
        holding = np.zeros(n_sids, dtype=bool)
        holding[main_sid[by_bucket[taken_start[bucket] : taken_start[bucket] + taken_count[bucket]]] - 1] = True
        candidates = np.flatnonzero(~holding)
        candidates = candidates[np.lexsort((candidates, sid_sizes[candidates]))][:left]
        targets = candidates + 1
        placed = len(targets)
        sid_sizes[candidates] += 1
        residual_sid.append(targets)
        residual_bucket.append(np.full(placed, bucket, dtype=np.int64))
        residual_position.append(positions[:placed])
        suppressed_positions.append(positions[placed:])
        if steps is not None:
            for position, target in zip(positions[:placed].tolist(), targets.tolist(), strict=True):
                steps.append(("residual", bucket_values[bucket], int(record_ids[position]), target))
            for position in positions[placed:].tolist():
                steps.append(("suppress", bucket_values[bucket], int(record_ids[position])))
        remaining[bucket] = 0

    entry_sid = np.concatenate([main_sid, *residual_sid]) if residual_sid else main_sid
    entry_bucket = np.concatenate([main_bucket, *residual_bucket]) if residual_bucket else main_bucket
    entry_position = np.concatenate([main_position, *residual_position]) if residual_position else main_position
    entry_order = np.argsort(entry_sid, kind="stable")
    record_sid = np.zeros(total, dtype=np.int64)
    record_sid[entry_position] = entry_sid
    suppressed = np.concatenate(suppressed_positions) if suppressed_positions else np.zeros(0, dtype=np.int64)
    return SidAssignment(
        bucket_values=bucket_values,
        entry_sid=entry_sid[entry_order],
        entry_bucket=entry_bucket[entry_order],
        entry_record=record_ids[entry_position[entry_order]],
        record_sid=record_sid,
        suppressed_records=record_ids[suppressed],
        n_sids=n_sids,
        dangerous=dangerous_labels,
        initial_sequence=initial_labels,
        reorder_comparisons=reorder_comparisons,
        trace=steps,
    )


class _SizeClasses:
    """A stable descending sequence of bucket codes (sizes in ``remaining``, a list shared with the caller) kept as
    one FIFO per size, largest size first: what :func:`_restore_order` does to the list, in O(ℓ) per SID.

    Taking the first ``chosen`` buckets and decrementing each by one, then restoring the stable descending order
    (Algorithm 13), moves each taken bucket of size s to the front of size class s-1, the taken ones in their
    order; the rest keep their places. Algorithm 13's count of comparisons is computed from the class sizes
    (1 + the moves back over taken buckets of the boundary size + the moves forward over untaken buckets of it).
    """

    def __init__(self, sequence: list[int], remaining: list[int]) -> None:
        self.remaining = remaining
        self.classes: dict[int, deque[int]] = {}
        for bucket in sequence:  # sequence is in stable descending order
            self.classes.setdefault(remaining[bucket], deque()).append(bucket)
        self._present = set(self.classes)
        self.sizes = sorted(self._present, reverse=True)  # sizes of the non-empty classes, descending
        self.n = len(sequence)
        self.n_positive = self.n - len(self.classes.get(0, ()))
        self._taken: list[tuple[int, list[int]]] = []

    def take(self, chosen: int) -> list[int]:
        """Remove and return the first ``chosen`` buckets of the sequence (call :meth:`decrement_taken` next)."""
        taken: list[tuple[int, list[int]]] = []
        left = chosen
        for size in self.sizes:
            if left == 0:
                break
            members = self.classes[size]
            part = [members.popleft() for _ in range(min(left, len(members)))]
            taken.append((size, part))
            left -= len(part)
        self._taken = taken
        return [bucket for _, part in taken for bucket in part]

    def decrement_taken(self) -> int:
        """Decrement the buckets of the last :meth:`take` and put them back in stable descending order; the
        number of comparisons Algorithm 13 (:func:`_restore_order`) makes for this step."""
        taken, self._taken = self._taken, []
        chosen = sum(len(part) for _, part in taken)
        comparisons = 1
        if 0 < chosen < self.n:
            boundary_size, boundary_part = taken[-1]
            untaken_of_boundary = len(self.classes[boundary_size])
            if untaken_of_boundary:  # the bucket after the taken ones has the boundary size: Algorithm 13 moves
                comparisons += (len(boundary_part) - 1) + (untaken_of_boundary - 1)
        for size, part in taken:
            for bucket in part:
                self.remaining[bucket] -= 1
            if size == 1:
                self.n_positive -= len(part)
            target = self.classes.get(size - 1)
            if target is None:
                target = self.classes[size - 1] = deque()
            target.extendleft(reversed(part))
        touched = {size for size, _ in taken} | {size - 1 for size, _ in taken}
        if any(bool(self.classes[size]) != (size in self._present) for size in touched):  # a class emptied or appeared
            self._present = {size for size in self._present | touched if self.classes[size]}
            self.sizes = sorted(self._present, reverse=True)
        return comparisons

    def sequence(self) -> list[int]:
        """The whole sequence, largest size first (ties in their order)."""
        return [bucket for size in self.sizes for bucket in self.classes[size]]


def _restore_order(sequence: list[int], remaining: list[int], chosen: int) -> int:
    """Algorithm 13 on bucket codes with sizes in ``remaining`` (see :func:`restore_descending_order`)."""
    n = len(sequence)
    if chosen == 0 or chosen >= n or remaining[sequence[chosen - 1]] >= remaining[sequence[chosen]]:
        return 1
    steps = 1
    x = remaining[sequence[chosen]]
    i = chosen
    while i > 1 and remaining[sequence[i - 2]] < x:
        i -= 1
        steps += 1
    k = chosen + 1
    while k < n and remaining[sequence[k]] > x - 1:
        k += 1
        steps += 1
    block = sequence[i - 1 : chosen]
    sequence[i - 1 : k] = sequence[chosen:k] + block
    return steps


def _bubble_sort(sequence: list[int], remaining: list[int]) -> None:
    """P1's "old" Rating: stable bubble sort of bucket codes by size, descending, in place."""
    n = len(sequence)
    for end in range(n - 1, 0, -1):
        swapped = False
        for j in range(end):
            if remaining[sequence[j]] < remaining[sequence[j + 1]]:
                sequence[j], sequence[j + 1] = sequence[j + 1], sequence[j]
                swapped = True
        if not swapped:
            return


def _create_sids_per_stratum(
    record_ids: np.ndarray, values: pd.Series, strata: np.ndarray, *, ell: int, method: Literal["improved", "plain"]
) -> SidAssignment:
    """:func:`create_sids` run on each run of equal ``strata`` (sorted) and put together: SID
    numbers run on from one stratum to the next, bucket codes index one shared value array."""
    codes, uniques = pd.factorize(values)
    codes = codes.astype(np.int64)
    bounds = np.flatnonzero(np.diff(strata)) + 1
    starts = np.concatenate([[0], bounds])
    ends = np.concatenate([bounds, [len(strata)]])
    entry_sid, entry_bucket, entry_record, record_sid, suppressed = [], [], [], [], []
    offset = 0
    for start, end in zip(starts.tolist(), ends.tolist(), strict=True):
        if end <= start:
            continue
        part = create_sids(record_ids[start:end], codes[start:end], ell=ell, method=method)
        global_bucket = np.asarray(part.bucket_values, dtype=np.int64)
        entry_sid.append(part.entry_sid + offset)
        entry_bucket.append(global_bucket[part.entry_bucket])
        entry_record.append(part.entry_record)
        record_sid.append(np.where(part.record_sid > 0, part.record_sid + offset, 0))
        suppressed.append(part.suppressed_records)
        offset += part.n_sids
    empty = np.zeros(0, dtype=np.int64)
    return SidAssignment(
        bucket_values=np.asarray(uniques, dtype=object),
        entry_sid=np.concatenate(entry_sid) if entry_sid else empty,
        entry_bucket=np.concatenate(entry_bucket) if entry_bucket else empty,
        entry_record=np.concatenate(entry_record) if entry_record else empty,
        record_sid=np.concatenate(record_sid) if record_sid else empty,
        suppressed_records=np.concatenate(suppressed) if suppressed else empty,
        n_sids=offset,
    )


def rating_tables(
    records: pd.DataFrame,
    sensitive_attributes: Sequence[str],
    *,
    ell: EllRequirement,
    method: Literal["improved", "plain"] = "improved",
    row_id_column: str = "row_id",
    secret: bytes | None = None,
    content_columns: Sequence[str] | None = None,
    strata: np.ndarray | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Bucketize every sensitive attribute independently into an ID table and an attribute table.

    Parameters
    ----------
    records
        The records to publish by Rating, one row each in table order (IR_left for the
        mixed model, the whole table for plain Rating); columns ``row_id_column`` and every
        sensitive attribute (no missing values).
    sensitive_attributes
        The attributes to bucketize, each processed independently.
    ell
        ℓ >= 2, or a mapping attribute -> ℓ_i >= 2 naming every sensitive attribute (P0's per-attribute
        sensitivity, SPEC §6.7): the SIDs of attribute i receive ℓ_i pairwise distinct values.
    method
        ``"improved"`` (default) or ``"plain"``; see :func:`create_sids`.
    secret
        The home secret (:mod:`pipeline.release.home_secret`). ``None`` is SPEC §6's reference
        behaviour: buckets are filled first-in-first-out in table order and SIDs are numbered
        in creation order, which lets an adversary replay the loop from the ID table and link a
        record's values across attributes (the order-replay attack, ``docs/attacks.md``). With a
        secret, every attribute is bucketized in its **own** keyed pseudo-random order of the
        records' content (:func:`pipeline.core.keyed.keyed_order` over ``content_columns``,
        purpose ``("rating-order", attribute)``), so the orders of two attributes are
        independent and none depends on the input row order, and the SID numbers of every
        attribute are a keyed random permutation of ``1..S`` (no creation order).
    content_columns
        The columns that make up a record's content for the keyed order (the configured
        quasi-identifiers and sensitive attributes); default: the sensitive attributes. Ignored
        without ``secret``.
    strata
        Optional int64 array aligned with ``records``: a stratum number per record
        (:func:`pipeline.core.strata.stratify_for_rating`). SIDs are then created inside each
        stratum (records of a SID share the stratum's published quasi-identifiers), strata in
        increasing number, each in the same per-attribute order as without strata; SID numbers
        run on across strata (and are permuted as a whole with a secret). ``None``: one stratum.

    Returns
    -------
    (id_table, attribute_sids)
        ``id_table``: columns ``attribute`` (categorical text), ``sid`` (int32, 1-based per
        attribute), ``value`` (categorical text), ``count`` (int32, records behind that value
        in that SID; 1 with Rating's construction), sorted by attribute (schema order), sid,
        value. One row per published value occurrence, so n × m rows at most.
        ``attribute_sids``: ``row_id_column`` (int64) and one nullable ``Int32`` column per
        sensitive attribute holding the record's SID number, ``<NA>`` for a suppressed cell;
        rows in the order of ``records``.

    Raises
    ------
    ValueError
        If ``ell < 2`` (or an ℓ_i, or a mapping not naming exactly the attributes) or a column is missing.

    References
    ----------
    P1 §5 (IDT/AT, Table 2-3); SPEC §6.6, §6.7.
    """
    missing = [c for c in [row_id_column, *sensitive_attributes] if c not in records.columns]
    if missing:
        raise ValueError(f"column(s) {missing} not in the table")
    ells = ell_by_attribute(ell, sensitive_attributes) if isinstance(ell, Mapping) else dict.fromkeys(sensitive_attributes, ell)
    record_ids = records[row_id_column].to_numpy(dtype=np.int64)
    attribute_sids = pd.DataFrame({row_id_column: record_ids})
    id_rows: list[pd.DataFrame] = []
    content = list(content_columns) if content_columns is not None else list(sensitive_attributes)
    for attribute in sensitive_attributes:
        column = records[attribute]
        if not isinstance(column.dtype, pd.CategoricalDtype):
            column = column.astype(str)
        column = column.reset_index(drop=True)
        if secret is None:
            order = np.arange(len(records), dtype=np.int64)
        else:
            order = keyed_order(records, content, secret, "rating-order", attribute)
        if strata is None:
            assignment = create_sids(
                record_ids[order], column.iloc[order].reset_index(drop=True), ell=ells[attribute], method=method
            )
        else:
            order = order[np.argsort(np.asarray(strata, dtype=np.int64)[order], kind="stable")]
            assignment = _create_sids_per_stratum(
                record_ids[order],
                column.iloc[order].reset_index(drop=True),
                np.asarray(strata, dtype=np.int64)[order],
                ell=ells[attribute],
                method=method,
            )
        if secret is not None and assignment.n_sids:
            # SID numbers carry no creation order: a keyed random permutation of 1..S
            renumber = np.zeros(assignment.n_sids + 1, dtype=np.int64)
            renumber[1:] = keyed_generator(secret, "sid-numbers", attribute).permutation(assignment.n_sids) + 1
            assignment = dataclasses.replace(
                assignment, entry_sid=renumber[assignment.entry_sid], record_sid=renumber[assignment.record_sid]
            )
        record_sid = np.empty(len(records), dtype=np.int64)
        record_sid[order] = assignment.record_sid
        attribute_sids[attribute] = pd.array(np.where(record_sid > 0, record_sid, 0).astype(np.int32), dtype="Int32")
        attribute_sids.loc[record_sid == 0, attribute] = pd.NA
        # Rating's construction puts a value at most once in a SID, so each entry is one row
        # (value, count 1); sort by SID then value text. Value cells share one Python string
        # per distinct value.
        value_text = np.asarray([str(v) for v in assignment.bucket_values], dtype=object)
        value_rank = np.empty(len(value_text), dtype=np.int64)
        value_rank[np.argsort(value_text, kind="stable")] = np.arange(len(value_text))
        order = np.lexsort((value_rank[assignment.entry_bucket], assignment.entry_sid))
        sid_sorted = assignment.entry_sid[order]
        bucket_sorted = assignment.entry_bucket[order]
        if len(order) > 1 and np.any((np.diff(sid_sorted) == 0) & (np.diff(bucket_sorted) == 0)):
            raise AssertionError(f"a SID of {attribute!r} holds a value twice (Rating invariant broken)")
        id_rows.append((attribute, sid_sorted.astype(np.int32), value_text, bucket_sorted))
        # this attribute's working arrays are freed before the next attribute's SIDs are created (at 1M records each
        # holds several arrays of one int64 per record, issue 18)
        del assignment, record_sid, order, sid_sorted, bucket_sorted, value_rank
    # one categorical column each for attribute and value (a table of n × m rows must not hold
    # one Python string per cell); categories are the sorted texts
    all_values = np.unique(np.concatenate([texts for _, _, texts, _ in id_rows])) if id_rows else np.zeros(0, dtype=object)
    # each column filled attribute by attribute into one array (no list of per-attribute pieces next to their
    # concatenation), each attribute's entries freed once copied
    names = [a for a, _, _, _ in id_rows]
    n_rows = sum(len(sid_sorted) for _, sid_sorted, _, _ in id_rows)
    attribute_code = np.empty(n_rows, dtype=np.int32)
    value_code = np.empty(n_rows, dtype=np.int32)
    sid = np.empty(n_rows, dtype=np.int32)
    start = 0
    for number in range(len(id_rows)):
        _, sid_sorted, value_text, bucket_sorted = id_rows[number]
        id_rows[number] = (names[number], np.zeros(0, np.int32), value_text, np.zeros(0, np.int64))
        stop = start + len(sid_sorted)
        attribute_code[start:stop] = number
        value_code[start:stop] = np.searchsorted(all_values, value_text)[bucket_sorted]
        sid[start:stop] = sid_sorted
        start = stop
        del sid_sorted, bucket_sorted
    del id_rows
    # built from whole columns, the frame has the default index 0..n-1 (what reset_index would give, without a copy)
    id_table = pd.DataFrame(
        {
            "attribute": pd.Categorical.from_codes(attribute_code, categories=pd.Index(names, dtype=object)),
            "sid": sid,
            "value": pd.Categorical.from_codes(value_code, categories=pd.Index(all_values, dtype=object)),
            "count": np.ones(n_rows, dtype=np.int32),
        }
    )
    return id_table, attribute_sids
