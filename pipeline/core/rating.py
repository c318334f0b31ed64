"""SID creation for one sensitive attribute: improved Rating (Algorithms 13 and 19) and plain Rating.

Sources: P1 §5 (Definition 18, Lemmas 14-17 and 20, Corollary 21, Algorithms 13 and 19);
P0 = Liu, Luo & Huang, "Rating", ICDMW 2011 (plain Rating as described by P1); Anatomy
(Xiao & Tao, VLDB 2006) for the group-creation / residue-assignment shape. Reconstructed in
SPEC §6-§7.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np
import pandas as pd

__all__ = [
    "SidAssignment",
    "create_sids",
    "rating_tables",
    "restore_descending_order",
]


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
class SidAssignment:
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


def restore_descending_order(sequence: list, chosen: int) -> int:
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
    n = len(sequence)
    if chosen == 0 or chosen >= n or len(sequence[chosen - 1]) >= len(sequence[chosen]):
        return 1
    steps = 1
    x = len(sequence[chosen])
    i = chosen  # 1-based start of the block that must move
    while i > 1 and len(sequence[i - 2]) < x:
        i -= 1
        steps += 1
    k = chosen + 1  # 1-based position of the last bucket still larger than x - 1
    while k < n and len(sequence[k]) > x - 1:
        k += 1
        steps += 1
    block = sequence[i - 1 : chosen]
    sequence[i - 1 : k] = sequence[chosen:k] + block
    return steps


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


def create_sids(
    record_ids: Sequence[int],
    values: Sequence[Hashable],
    *,
    ell: int,
    method: Literal["improved", "plain"] = "improved",
    trace: bool = False,
) -> SidAssignment:
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
    result = SidAssignment(
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


def _assign_residuals(result: SidAssignment, buckets: list[_Bucket], trace: bool) -> None:
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


def rating_tables(
    records: pd.DataFrame,
    sensitive_attributes: Sequence[str],
    *,
    ell: int,
    method: Literal["improved", "plain"] = "improved",
    row_id_column: str = "row_id",
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
        ℓ >= 2.
    method
        ``"improved"`` (default) or ``"plain"``; see :func:`create_sids`.

    Returns
    -------
    (id_table, attribute_sids)
        ``id_table``: columns ``attribute`` (str), ``sid`` (int32, 1-based per attribute),
        ``value`` (str), ``count`` (int32, records behind that value in that SID; 1 with
        Rating's construction), sorted by attribute (schema order), sid, value.
        ``attribute_sids``: ``row_id_column`` (int64) and one nullable ``Int32`` column per
        sensitive attribute holding the record's SID number, ``<NA>`` for a suppressed cell;
        rows in the order of ``records``.

    Raises
    ------
    ValueError
        If ``ell < 2`` or a column is missing.

    References
    ----------
    P1 §5 (IDT/AT, Table 2-3); SPEC §6.6.
    """
    missing = [c for c in [row_id_column, *sensitive_attributes] if c not in records.columns]
    if missing:
        raise ValueError(f"column(s) {missing} not in the table")
    record_ids = records[row_id_column].to_numpy(dtype=np.int64)
    attribute_sids = pd.DataFrame({row_id_column: record_ids})
    id_rows: list[pd.DataFrame] = []
    for attribute in sensitive_attributes:
        values = records[attribute].astype(str).tolist()
        assignment = create_sids(record_ids.tolist(), values, ell=ell, method=method)
        mapped = pd.Series(assignment.record_to_sid, dtype="Int64")
        attribute_sids[attribute] = mapped.reindex(record_ids).to_numpy()
        attribute_sids[attribute] = attribute_sids[attribute].astype("Int32")
        sid_numbers = np.repeat(
            np.arange(1, len(assignment.sid_values) + 1), [len(v) for v in assignment.sid_values]
        )
        flat_values = [str(v) for vs in assignment.sid_values for v in vs]
        frame = pd.DataFrame({"attribute": attribute, "sid": sid_numbers, "value": flat_values})
        frame = frame.groupby(["attribute", "sid", "value"], sort=False).size().rename("count").reset_index()
        id_rows.append(frame.sort_values(["sid", "value"], kind="stable"))
    id_table = (
        pd.concat(id_rows, ignore_index=True)
        if id_rows
        else pd.DataFrame(columns=["attribute", "sid", "value", "count"])
    )
    id_table = id_table.astype({"attribute": object, "sid": "int32", "value": object, "count": "int32"})
    return id_table.reset_index(drop=True), attribute_sids
