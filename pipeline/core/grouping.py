"""Algorithm 11: group SAC into SAC~ groups of exactly ℓ records, borrowing from IR.

Sources: P1 §4 (Algorithm 11 and the Table 5/6 example), reconstructed in SPEC §5.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from pipeline.core.columns import combine_codes, distinct_per_group, sorted_text_codes
from pipeline.core.hierarchies import Hierarchy
from pipeline.core.keyed import keyed_generator

__all__ = ["Grouping", "generalize_group_quasi_identifiers", "group_sac", "permute_within_groups"]


@dataclass(frozen=True)
class Grouping:
    """Result of Algorithm 11 (row ids are the caller's ``row_id`` values, int64).

    Attributes
    ----------
    members
        ``(n_groups, ℓ)`` int64 array: row ids of each group's members, in insertion order
        (seed first); groups in creation order.
    borrowed
        int64 array: row ids of the IR records moved into groups ("borrowing"), in order.
    deleted
        int64 array: row ids of the seeds whose group could not be completed (not published
        at all), in deletion order.
    ir_left
        int64 array: row ids of IR records not borrowed, in table order (input of improved
        Rating).
    """

    members: np.ndarray
    borrowed: np.ndarray
    deleted: np.ndarray
    ir_left: np.ndarray

    @property
    def groups(self) -> list[list[int]]:
        """``members`` as Python lists (small tables, tests and teaching)."""
        return self.members.tolist()

    @property
    def n_groups(self) -> int:
        return int(self.members.shape[0])


def group_sac(
    records: pd.DataFrame,
    sensitive_attributes: Sequence[str],
    sac_row_ids: Sequence[int] | np.ndarray,
    ir_row_ids: Sequence[int] | np.ndarray,
    *,
    ell: int,
    row_id_column: str = "row_id",
    quasi_identifiers: Sequence[str] | None = None,
) -> Grouping:
    """Group SAC records into groups of exactly ``ell`` records that differ on every sensitive attribute.

    Parameters
    ----------
    records
        One row per record; columns ``row_id_column`` and every sensitive attribute (no
        missing values; object or categorical). Must contain every id of ``sac_row_ids`` and
        ``ir_row_ids``.
    sensitive_attributes
        All sensitive attributes; a record is compatible with a partial group iff its value
        on **every** one of them differs from every member's (SPEC §5.1 [deduced]).
    sac_row_ids, ir_row_ids
        SAC and IR in table order (from Algorithm 7).
    ell
        ℓ >= 2, the group size.
    quasi_identifiers
        ``None`` (P1's grouping, ``grouping = 'p1'``): partners are chosen by table order only.
        With the quasi-identifier columns (``grouping = 'qi_aware'``, issue 12): each slot is
        filled, in this order, by the first compatible SAC record with the seed's
        quasi-identifier tuple, the first compatible IR record with that tuple, then as P1 (first
        compatible SAC record, first compatible IR record). Partners that share the seed's
        quasi-identifiers cannot be told apart by an adversary who learns P(sensitive |
        quasi-identifiers) (the deFinetti attack, Kifer SIGMOD 2009); the other groups are
        generalized by :func:`generalize_group_quasi_identifiers`.

    Returns
    -------
    Grouping
        Seeds are taken from SAC in table order; each slot is filled by the first compatible
        SAC record, else the first compatible IR record (borrowing), in table order.
        A group that cannot be completed deletes its seed and returns the other tentatively
        added records to their original places (SPEC [choice], §15 row 9).

    Raises
    ------
    ValueError
        If ``ell < 2`` or an id is not in ``records``.

    Notes
    -----
    The greedy loop runs compiled (:mod:`pipeline.core.grouping_kernel`): records with the same
    sensitive tuple share a FIFO key, and "the first compatible record" is a pruned depth-first walk
    of a trie over the keys (:mod:`pipeline.core.grouping_trie`); the result is the same as the
    rescan of P1's Algorithm 11 (equivalence tests in ``tests/core``). The loop is compiled ahead of
    time by ``make env`` (:mod:`pipeline.core.compiled`); without that build, the first call in a
    fresh checkout compiles it just in time (a few seconds; numba caches it in ``__pycache__``).

    References
    ----------
    P1 Algorithm 11; SPEC §5.1 and §15 rows 7-9.
    """
    if int(ell) != ell or ell < 2:
        raise ValueError(f"ell (ℓ) must be an integer >= 2, got {ell!r}")
    ell = int(ell)
    m = len(sensitive_attributes)
    row_ids = records[row_id_column].to_numpy(dtype=np.int64)
    position_of = pd.Index(row_ids)
    if len(records):
        codes = np.column_stack([pd.factorize(records[a])[0].astype(np.int64) for a in sensitive_attributes])
    else:
        codes = np.zeros((0, m), dtype=np.int64)

    def positions(ids: Sequence[int] | np.ndarray) -> np.ndarray:
        found = position_of.get_indexer(np.asarray(ids, dtype=np.int64))
        if (found < 0).any():
            raise ValueError("a SAC/IR row id is not in the records table")
        return found

    sac_positions = positions(sac_row_ids)
    ir_positions = positions(ir_row_ids)
    qi_aware = bool(quasi_identifiers)
    stratum = (
        _dense(combine_codes([pd.factorize(records[column])[0].astype(np.int64) for column in quasi_identifiers or []]))
        if qi_aware and len(records)
        else np.zeros(len(records), dtype=np.int64)
    )
    n_strata = int(stratum.max()) + 1 if len(stratum) else 0
    domain = [int(codes[:, a].max()) + 1 if len(codes) else 0 for a in range(m)]
    level_order = sorted(range(m), key=lambda a: (domain[a], a))  # smallest domain first: the trie prunes early
    key = _dense(combine_codes(list(codes.T))) if len(records) else np.zeros(0, dtype=np.int64)
    n_keys = int(key.max()) + 1 if len(key) else 0
    key_codes = np.zeros((n_keys, m), dtype=np.int64)
    key_codes[key] = codes
    key_levels = key_codes[:, level_order]
    # the loop ahead-of-time compiled when built (no numba import), else numba's (imported here, not at module load:
    # its import costs about 0.3-0.8 s, which every command that never groups would pay)
    from pipeline.core.compiled import kernel
    from pipeline.core.grouping_trie import build_trie

    group_records = kernel("group_records")

    tries = tuple(build_trie(key[p], key_levels, level_order, stratum_level=False) for p in (sac_positions, ir_positions))
    stratum_tries = tries
    if qi_aware:
        stratum_tries = tuple(
            _stratum_trie(key[p], stratum[p], key_levels, level_order, n_strata) for p in (sac_positions, ir_positions)
        )
    members, member_parts, deleted, ir_alive = group_records(
        np.int64(ell),
        np.ascontiguousarray(codes[sac_positions]),
        np.ascontiguousarray(codes[ir_positions]),
        stratum[sac_positions],
        tries,
        stratum_tries,
        qi_aware,
    )
    member_positions = np.empty(len(members), dtype=np.int64)
    from_sac = member_parts == 0
    member_positions[from_sac] = sac_positions[members[from_sac]]
    member_positions[~from_sac] = ir_positions[members[~from_sac]]
    return Grouping(
        members=row_ids[member_positions].reshape(-1, ell),
        borrowed=row_ids[member_positions[member_parts == 1]],
        deleted=row_ids[sac_positions[deleted]],
        ir_left=row_ids[ir_positions[ir_alive]],
    )


def _dense(combined: np.ndarray) -> np.ndarray:
    """Dense int64 codes 0..k-1 of an int64 array (equal in, equal out)."""
    return pd.factorize(combined)[0].astype(np.int64)


def _stratum_trie(
    part_keys: np.ndarray, part_strata: np.ndarray, key_levels: np.ndarray, level_order: list[int], n_strata: int
) -> tuple[np.ndarray, ...]:
    """The per-stratum trie of one part: keys (stratum, sensitive tuple), the stratum on top, never excluded."""
    from pipeline.core.grouping_trie import build_trie

    pair = _dense(part_strata * max(len(key_levels), 1) + part_keys)
    n_pairs = int(pair.max()) + 1 if len(pair) else 0
    pair_stratum = np.zeros(n_pairs, dtype=np.int64)
    pair_key = np.zeros(n_pairs, dtype=np.int64)
    pair_stratum[pair] = part_strata
    pair_key[pair] = part_keys
    levels = (
        np.column_stack([pair_stratum, key_levels[pair_key]])
        if n_pairs
        else np.zeros((0, key_levels.shape[1] + 1), dtype=np.int64)
    )
    return build_trie(pair, levels, [-1, *level_order], stratum_level=True, n_strata=n_strata)


def permute_within_groups(
    records: pd.DataFrame,
    groups: np.ndarray | Sequence[Sequence[int]],
    clusters: Sequence[Sequence[str]],
    *,
    seed: int,
    row_id_column: str = "row_id",
    secret: bytes | None = None,
) -> pd.DataFrame:
    """Apply an independent uniform random permutation per group and per attribute cluster.

    Parameters
    ----------
    records
        One row per record; columns ``row_id_column``, the quasi-identifiers and every
        attribute named in ``clusters``.
    groups
        ``(n_groups, ℓ)`` member row ids (``Grouping.members`` of :func:`group_sac`), or an
        equivalent list of equal-length lists.
    clusters
        ``Cluster_Set`` (from Algorithm 10); the values of one cluster move together.
    seed
        Seed of ``numpy.random.default_rng``. For cluster ``c`` (in ``Cluster_Set`` order) one
        matrix of ``(n_groups, ℓ)`` uniform draws is taken; the permutation of a group is the
        ``argsort`` of its row, and row ``r`` receives the tuple of member ``perm[r]``. This is
        a uniform permutation per group and cluster, drawn with one vectorised call instead
        of SPEC §5.2's reference ``random.shuffle`` loop (same distribution; SPEC asks tests to
        check invariants, not a particular permutation).
    secret
        The home secret (:mod:`pipeline.release.home_secret`). With it the draws come from
        :func:`pipeline.core.keyed.keyed_generator` of ``("group-permutation", seed)``, so the
        published seed alone cannot replay the permutation; ``None`` (the SPEC reference) seeds
        ``numpy.random.default_rng(seed)``.

    Returns
    -------
    pandas.DataFrame
        One row per group member, in group order then member order: ``group_id`` (int64,
        1-based), ``row_id_column`` (the real member, whose quasi-identifiers the row keeps)
        and every other column of ``records`` (dtypes kept), with the sensitive attributes
        permuted.

    Raises
    ------
    ValueError
        Groups of unequal sizes, or a member id absent from ``records``.

    References
    ----------
    P1 Table 6 text; SPEC §5.2-§5.3 and §15 row 10.
    """
    members = np.asarray(groups, dtype=np.int64)
    if members.ndim != 2:
        if members.size == 0:
            members = members.reshape(0, 0)
        else:
            raise ValueError("every group must have the same number of members (ℓ)")
    n_groups, size = members.shape
    positions = pd.Index(records[row_id_column].to_numpy(np.int64)).get_indexer(members.ravel())
    if (positions < 0).any():
        raise ValueError("a group member's row id is not in the records table")
    released = records.iloc[positions].reset_index(drop=True)
    released.insert(0, "group_id", np.repeat(np.arange(1, n_groups + 1, dtype=np.int64), size))
    rng = np.random.default_rng(seed) if secret is None else keyed_generator(secret, "group-permutation", str(int(seed)))
    base = (np.arange(n_groups, dtype=np.int64) * size)[:, None]
    for cluster in clusters:
        permutation = np.argsort(rng.random((n_groups, size)), axis=1, kind="stable")
        source = (permutation + base).ravel()
        for attribute in cluster:
            column = released[attribute]
            released[attribute] = column.iloc[source].reset_index(drop=True)
    return released


def generalize_group_quasi_identifiers(
    released: pd.DataFrame,
    quasi_identifiers: Sequence[str],
    hierarchies: Mapping[str, Hierarchy] | None = None,
    *,
    group_column: str = "group_id",
    suppressed_label: str = "*",
) -> tuple[pd.DataFrame, dict[str, int]]:
    """Give every member of a SAC~ group the same quasi-identifiers: the lowest common ancestor.

    Parameters
    ----------
    released
        SAC~ rows: ``group_column`` and the quasi-identifier columns (text or categorical).
    quasi_identifiers
        Columns to generalize.
    hierarchies
        Optional attribute -> :class:`pipeline.core.hierarchies.Hierarchy` (ARX format, e.g.
        ``data/adult/hierarchies``). Where the members of a group differ on a column, the
        column becomes the label of the lowest hierarchy level at which their values meet;
        without a hierarchy for the column, or for a value it does not list, ``suppressed_label``.
    group_column
        The group id column.
    suppressed_label
        The label of a fully generalized (suppressed) quasi-identifier.

    Returns
    -------
    (frame, counts)
        A copy of ``released`` with generalized quasi-identifier columns (object dtype where a
        column changed), and ``counts``: ``n_generalized_groups`` (groups with at least one
        generalized column) and ``n_generalized_cells`` (quasi-identifier cells whose published
        label differs from the record's value). Numbers only.

    Raises
    ------
    KeyError
        A column is missing.

    Notes
    -----
    Members that share the published quasi-identifiers are exchangeable for an adversary who
    knows P(sensitive | quasi-identifiers) and sees the group, so the exact posterior of a
    member's value over the ℓ! assignments of the group is uniform (1/ℓ per value). This is the
    generalization step of the QI-aware grouping (issue 12); vectorised per column: one
    group-by for the groups that differ, then a walk up the hierarchy levels.

    References
    ----------
    Kifer, "Attacks on privacy and deFinetti's theorem" (SIGMOD 2009); Samarati & Sweeney
    (1998) for generalization hierarchies; ARX's hierarchy format (SPEC §14.1).
    """
    frame = released.copy()
    groups = pd.factorize(frame[group_column])[0].astype(np.int64)  # dense group index
    n_group_index = int(groups.max()) + 1 if len(groups) else 0
    generalized_group = np.zeros(len(frame), dtype=bool)
    generalized_cells = 0
    for column in quasi_identifiers:
        # text once per distinct value (sorted_text_codes); everything per row is integer work
        codes, texts = sorted_text_codes(frame[column])
        differs = (distinct_per_group(groups, codes, n_group_index) > 1)[groups]
        if not differs.any():
            continue
        generalized_group |= differs
        labels = np.full(len(frame), suppressed_label, dtype=object)
        hierarchy = (hierarchies or {}).get(column)
        if hierarchy is not None:
            index = {value: code for code, value in enumerate(hierarchy.base_values)}
            base = np.asarray([index.get(text, -1) for text in texts], dtype=np.int64)[codes]
            rows = np.flatnonzero(differs)
            unknown_groups = np.unique(groups[rows][base[rows] < 0])
            pending = rows[~np.isin(groups[rows], unknown_groups)]
            for level in range(1, hierarchy.height + 1):
                if not len(pending):
                    break
                node = hierarchy.codes[base[pending], level].astype(np.int64)
                same = (distinct_per_group(groups[pending], node, n_group_index) == 1)[groups[pending]]
                meet = pending[same]
                labels[meet] = np.asarray(hierarchy.labels[level], dtype=object)[hierarchy.codes[base[meet], level]]
                pending = pending[~same]
        new_column = np.where(differs, labels, np.asarray(texts, dtype=object)[codes])
        generalized_cells += int(differs.sum())
        frame[column] = pd.Series(new_column, index=frame.index, dtype=object)
    n_groups = int(np.unique(groups[generalized_group]).size) if len(frame) else 0
    return frame, {"n_generalized_groups": n_groups, "n_generalized_cells": generalized_cells}
