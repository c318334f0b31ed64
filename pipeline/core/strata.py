"""Quasi-identifier strata for Rating: buckets whose members cannot be told apart.

Why
---
Rating (P1 §5) bucketizes every sensitive attribute into SIDs of ℓ distinct values, but the
members of a SID are records with *different* published quasi-identifiers. The learned-model
adversary (Kifer, SIGMOD 2009; :mod:`pipeline.core.posterior`) fits P(value | quasi-identifiers)
on the release and computes the exact posterior inside each SID: when the model says a value is
unlikely for all members but one (``Husband`` for the women of a SID), that member owns it. On
Adult at ℓ = 3, half of the attribute-table cells exceeded ``max(1/ℓ, population posterior) +
0.05`` (issue 12).

What
----
The records Rating publishes are partitioned into *strata*; every stratum publishes one tuple of
quasi-identifier labels (each a node of the column's generalization hierarchy, or ``*``), and
Rating runs inside each stratum (:func:`pipeline.core.rating.rating_tables` with ``strata``). The
members of a SID then share their published quasi-identifiers, so for the learned-model
adversary they are exchangeable and the exact posterior of a member's value is the value's share
of the SID (``1/|SID|`` ≤ ``1/ℓ`` with Rating's distinct values), whatever the model.

A stratum must be ℓ-eligible on every sensitive attribute (no value held by more than ``1/ℓ`` of
its records; Xiao & Tao, Anatomy, VLDB 2006), so that Rating bucketizes all of it without a
residual or a suppressed cell.

How (bottom-up local recoding along the hierarchies)
----------------------------------------------------
Start with every quasi-identifier at its base value (level 0). Records whose tuple of current
labels forms an ℓ-eligible set are fixed as one stratum with those labels. The rest climb one
level on one quasi-identifier (the climb that fixes the most records at the next step; ties:
the column listed first) and are grouped again, until every column is fully generalized
(``*``). The records left then form one last stratum, from which the fewest records are deleted
(:func:`pipeline.core.eligibility.eligibility_deletions`) to make it ℓ-eligible. Every
quasi-identifier has levels ``0 .. H`` of its hierarchy plus a final ``*`` level (a column
without hierarchy, or a value its hierarchy does not list, goes from its value straight to
``*``).

This is local recoding (strata of different records may sit at different levels), in the
spirit of bottom-up generalization (Wang, Yu & Chakraborty, ICDM 2004) and of the generalized
quasi-identifiers of Anatomy's competitors; what is new here is only the stopping rule
(ℓ-eligibility per sensitive attribute, so that Anatomy-style buckets exist inside the stratum).

Nothing here reads input row order; ties are broken by column order and label codes only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from pipeline.core.columns import combine_codes, sorted_text_codes
from pipeline.core.eligibility import eligibility_deletions
from pipeline.core.hierarchies import Hierarchy
from pipeline.core.keyed import keyed_record_hashes
from pipeline.core.sensitivity import EllRequirement, ell_by_attribute

__all__ = ["SUPPRESSED_LABEL", "QuasiIdentifierStrata", "stratify_for_rating"]

#: Label of a fully generalized quasi-identifier.
SUPPRESSED_LABEL = "*"


@dataclass(frozen=True)
class QuasiIdentifierStrata:
    """The strata of the records Rating publishes.

    Attributes
    ----------
    labels
        One row per kept record: ``row_id`` (int64), ``stratum`` (int64, 1-based, dense; numbered
        in the order of the published label tuples as text, so the number says nothing the labels
        do not), and one object column per quasi-identifier holding the published label.
    deleted
        int64 row ids deleted (before stratification) to make the records ℓ-eligible.
    n_strata
        Number of strata.
    n_generalized_cells
        Quasi-identifier cells of kept records whose published label differs from the value.
    """

    labels: pd.DataFrame
    deleted: np.ndarray
    n_strata: int
    n_generalized_cells: int


class _Column:
    """The generalization levels of one quasi-identifier for a set of records: ``codes[L]`` is
    an int64 array (one node code per record) and ``labels[L][code]`` its text; the last level is
    ``*`` for everybody."""

    def __init__(self, values: pd.Series, hierarchy: Hierarchy | None):
        # one factorization; everything else is per distinct value, then an array look-up
        base_codes, base_labels = sorted_text_codes(values)
        self.codes: list[np.ndarray] = [base_codes.astype(np.int64)]
        self.labels: list[np.ndarray] = [base_labels]
        n = len(base_codes)
        if hierarchy is not None:
            index = {value: code for code, value in enumerate(hierarchy.base_values)}
            base = np.asarray([index.get(v, -1) for v in base_labels], dtype=np.int64)[base_codes] if n else np.zeros(0, np.int64)
            known = base >= 0
            for level in range(1, hierarchy.height + 1):
                labels = list(hierarchy.labels[level])
                if SUPPRESSED_LABEL not in labels:  # a value the hierarchy does not list is '*' above its base level
                    labels.append(SUPPRESSED_LABEL)
                star = labels.index(SUPPRESSED_LABEL)
                node = np.where(known, hierarchy.codes[np.where(known, base, 0), level].astype(np.int64), star)
                self.codes.append(node)
                self.labels.append(np.asarray(labels, dtype=object))
        if hierarchy is None or tuple(hierarchy.labels[-1]) != (SUPPRESSED_LABEL,):
            self.codes.append(np.zeros(n, dtype=np.int64))
            self.labels.append(np.asarray([SUPPRESSED_LABEL], dtype=object))

    @property
    def top(self) -> int:
        return len(self.codes) - 1


def stratify_for_rating(
    records: pd.DataFrame,
    quasi_identifiers: Sequence[str],
    sensitive_attributes: Sequence[str],
    *,
    ell: EllRequirement,
    hierarchies: Mapping[str, Hierarchy] | None = None,
    secret: bytes | None = None,
    content_columns: Sequence[str] | None = None,
    row_id_column: str = "row_id",
    deletion_budget: float = 0.05,
) -> QuasiIdentifierStrata:
    """Partition the records Rating publishes into ℓ-eligible strata of equal published quasi-identifiers.

    Parameters
    ----------
    records
        The records to bucketize (IR_left of the mixed model, or the whole table of the Rating
        model): ``row_id_column`` (int64, unique), the quasi-identifiers and the sensitive
        attributes (no missing values).
    quasi_identifiers, sensitive_attributes
        Column names (schema order).
    ell
        ℓ >= 2, or a mapping attribute -> ℓ_i >= 2 (SPEC §6.7: attribute i made ℓ_i-eligible; a stratum needs at
        least L = max ℓ_i records).
    hierarchies
        Attribute -> :class:`pipeline.core.hierarchies.Hierarchy` (ARX format); columns without
        one go from their value straight to ``*``.
    secret, content_columns
        Passed to :func:`pipeline.core.eligibility.eligibility_deletions` for the tie-break among
        records of the last stratum (``None``: table order).
    row_id_column
        The id column.

    Returns
    -------
    QuasiIdentifierStrata
        Every record is either in ``labels`` (exactly once) or in ``deleted``. Every stratum is
        ℓ-eligible on every sensitive attribute (``ℓ · count(v) ≤ size``); every record of a
        stratum has the same labels; a label is the record's value or an ancestor of it.

    Raises
    ------
    ValueError
        ``ell < 2`` or a missing column.

    References
    ----------
    Kifer (SIGMOD 2009) for the attack; Xiao & Tao, Anatomy (VLDB 2006) for eligibility;
    Samarati & Sweeney (1998) for generalization hierarchies; issue 12.
    """
    if not isinstance(ell, Mapping) and (int(ell) != ell or ell < 2):
        raise ValueError(f"ell (ℓ) must be an integer >= 2, got {ell!r}")
    quasi = list(quasi_identifiers)
    sensitive = list(sensitive_attributes)
    ells = list(ell_by_attribute(ell if isinstance(ell, Mapping) else int(ell), sensitive).values())
    largest_ell = max(ells)
    missing = [c for c in [row_id_column, *quasi, *sensitive] if c not in records.columns]
    if missing:
        raise ValueError(f"column(s) {missing} not in the table")
    row_ids = records[row_id_column].to_numpy(np.int64)
    n = len(records)
    if n == 0:
        empty = pd.DataFrame(
            {
                row_id_column: np.zeros(0, np.int64),
                "stratum": np.zeros(0, np.int64),
                **{c: pd.Series([], dtype=object) for c in quasi},
            }
        )
        return QuasiIdentifierStrata(empty, np.zeros(0, np.int64), 0, 0)
    columns = [_Column(records[c].reset_index(drop=True), (hierarchies or {}).get(c)) for c in quasi]
    codes = [pd.factorize(records[a])[0].astype(np.int64) for a in sensitive]  # one contiguous array per attribute
    domain = [int(column.max()) + 1 for column in codes]
    record_level = np.zeros((n, len(quasi)), dtype=np.int64)

    def counts(rows: np.ndarray) -> list[np.ndarray]:
        return [np.bincount(codes[a][rows], minlength=domain[a]) for a in range(len(sensitive))]

    def cost(size: int, value_counts: list[np.ndarray]) -> int:
        """Lower bound on the records to delete for ℓ-eligibility (Anatomy): per attribute, the
        records of its most frequent value above ``1/ℓ``, ``⌈(ℓ·c − s)/(ℓ − 1)⌉``; a part smaller
        than ℓ is deleted whole."""
        if size < largest_ell:
            return size
        return max(
            (max(0, -(-(e * int(c.max(initial=0)) - size) // (e - 1))) for e, c in zip(ells, value_counts, strict=True)),
            default=0,
        )

    def split(rows: np.ndarray, column: int, level: int, parent_cost: int) -> tuple[list[np.ndarray], np.ndarray, int] | None:
        """Children of ``rows`` one level below ``level`` on ``column``: those that become
        strata and the remainder that keeps the parent's label, with the extra deletions
        (lower bound) the split costs; ``None`` when it costs more than ``deletion_budget`` per
        specialized record."""
        child_codes = columns[column].codes[level - 1][rows]
        sizes = np.bincount(child_codes)
        sizes = sizes[sizes > 0]
        if len(sizes) < 2:
            return [rows], np.zeros(0, np.int64), 0  # one child: specialize the whole stratum for free
        # children in code order, table order inside (a stable sort; small codes sort by radix)
        narrow = child_codes.astype(np.int16) if len(sizes) and int(child_codes.max()) < 2**15 else child_codes
        children = np.split(rows[np.argsort(narrow, kind="stable")], np.cumsum(sizes)[:-1])
        child_counts = [counts(child) for child in children]
        child_cost = [cost(len(child), child_counts[k]) for k, child in enumerate(children)]
        # children ranked by their own cost per record; the costliest move to the remainder
        ranked = sorted(range(len(children)), key=lambda k: (child_cost[k] / len(children[k]), k))
        best = None
        rest_size, rest_counts = 0, [np.zeros(int(domain[a]), np.int64) for a in range(len(sensitive))]
        for cut in range(len(children), 0, -1):  # children ranked[:cut] become strata
            if cut < len(children):
                k = ranked[cut]
                rest_size += len(children[k])
                rest_counts = [rest_counts[a] + child_counts[k][a] for a in range(len(sensitive))]
            specialized = sum(len(children[k]) for k in ranked[:cut])
            if specialized == len(rows) and cut == 1:
                continue
            extra = sum(child_cost[k] for k in ranked[:cut]) + (cost(rest_size, rest_counts) if rest_size else 0) - parent_cost
            if extra <= deletion_budget * specialized and (best is None or specialized > best[0]):
                best = (specialized, cut, extra)
        if best is None:
            return None
        _, cut, extra = best
        rest = [children[k] for k in ranked[cut:]]
        return [children[k] for k in ranked[:cut]], (np.concatenate(rest) if rest else np.zeros(0, np.int64)), extra

    # top-down (Mondrian-style) specialization with local recoding, from every column at '*'
    stack: list[tuple[np.ndarray, tuple[int, ...], frozenset[int]]] = [
        (np.arange(n, dtype=np.int64), tuple(c.top for c in columns), frozenset())
    ]
    final: list[np.ndarray] = []
    while stack:
        rows, levels, frozen = stack.pop()
        parent_cost = cost(len(rows), counts(rows))
        best: tuple[int, int, int] | None = None  # (records specialized, -extra deletions, -column)
        best_split: tuple[list[np.ndarray], np.ndarray] | None = None
        for j in range(len(quasi)):
            if levels[j] == 0 or j in frozen:
                continue
            result = split(rows, j, levels[j], parent_cost)
            if result is None:
                continue
            children, rest, extra = result
            key = (len(rows) - len(rest), -extra, -j)
            if best is None or key > best:
                best, best_split = key, (children, rest)
        if best is None or best_split is None:
            record_level[rows] = levels
            final.append(rows)
            continue
        j = -best[2]
        children, rest = best_split
        lower = tuple(level - 1 if k == j else level for k, level in enumerate(levels))
        for child in children:
            stack.append((child, lower, frozen))
        if len(rest):
            stack.append((rest, levels, frozen | {j}))
    # delete, per stratum, the fewest records that make it ℓ-eligible
    deleted_parts = []
    hashes = None
    for rows in final:
        if len(rows) < largest_ell:
            deleted_parts.append(row_ids[rows])
        elif cost(len(rows), counts(rows)) > 0:
            if secret is not None and hashes is None:  # one hashing pass for every stratum
                hashes = keyed_record_hashes(records, list(content_columns or sensitive), secret, "eligibility")
            deleted_parts.append(
                eligibility_deletions(
                    records.iloc[rows],
                    sensitive,
                    ell=ell,
                    secret=secret,
                    content_columns=content_columns,
                    row_id_column=row_id_column,
                    tie_hashes=None if hashes is None else hashes[rows],
                )
            )
    deleted = np.concatenate(deleted_parts) if deleted_parts else np.zeros(0, np.int64)
    keep = ~np.isin(row_ids, deleted)
    positions = np.flatnonzero(keep)
    label_columns: dict[str, np.ndarray] = {}
    generalized = 0
    label_codes: list[np.ndarray] = []
    for j, (name, column) in enumerate(zip(quasi, columns, strict=True)):
        # every (level, node) of the column gets one global label code; labels are looked up per code
        level_of = record_level[positions, j]
        offsets = np.cumsum([0] + [len(labels) for labels in column.labels])
        node = np.zeros(len(positions), dtype=np.int64)
        for level in np.unique(level_of):
            at = level_of == level
            node[at] = offsets[int(level)] + column.codes[int(level)][positions[at]]
        all_labels = np.concatenate([np.asarray(labels, dtype=object) for labels in column.labels])
        # texts per distinct node (several nodes may share a text, e.g. '*'), then one look-up per record
        present = np.bincount(node, minlength=len(all_labels)) > 0
        node_text_codes, text = pd.factorize(all_labels[present], sort=True)
        text_codes = node_text_codes[(np.cumsum(present) - 1)[node]].astype(np.int64)
        out = np.asarray(text, dtype=object)[text_codes]
        generalized += int(((node >= offsets[1]) & (out != column.labels[0][column.codes[0][positions]])).sum())
        label_codes.append(text_codes.astype(np.int64))
        label_columns[name] = out
    frame = pd.DataFrame({row_id_column: row_ids[positions], **label_columns})
    if quasi and len(frame):
        # strata numbered in the order of their label tuples as text (codes of sorted texts, column by column)
        stratum = pd.factorize(combine_codes(label_codes), sort=True)[0].astype(np.int64) + 1
    else:
        stratum = np.ones(len(frame), dtype=np.int64)
    frame.insert(1, "stratum", stratum)
    return QuasiIdentifierStrata(frame, deleted, int(stratum.max(initial=0)), generalized)
