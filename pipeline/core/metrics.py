"""Utility metrics of a release: additional information loss (AIL) and reconstruction error (RCE).

Both work on released tables (release contract) plus what only the publisher knows: the number
of deleted records and, for RCE, the size of each sensitive attribute's domain in the raw table.
A release is a mixed release (``sac_released`` + ``attribute_table`` + ``id_table`` +
``attribute_clusters``) or a Rating release (pass an empty ``sac_released``).

Sources: P1 §6 (AIL: "the number of values in SID"; RCE after Anatomy), Lemma 23; Anatomy (Xiao &
Tao, VLDB 2006) for the reconstruction error; SPEC §11 (both formulas are reconstructions) and
§15 rows 22-23 (suppressed cells and deleted records).
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from pipeline.core.columns import as_text, distinct_per_group, sorted_text_codes
from pipeline.core.sensitivity import EllRequirement, ell_by_attribute

__all__ = [
    "additional_information_loss",
    "domain_sizes",
    "reconstruction_error",
]


def _check_ell(ell: int) -> None:
    if int(ell) != ell or ell < 2:
        raise ValueError(f"ell (ℓ) must be an integer >= 2, got {ell!r}")


def _check_n_deleted(n_deleted: int) -> None:
    if int(n_deleted) != n_deleted or n_deleted < 0:
        raise ValueError(f"n_deleted must be an integer >= 0, got {n_deleted!r}")


def exact_sum(*arrays: np.ndarray, chunk: int = 1 << 16) -> float:
    """``math.fsum`` of the elements of float64 arrays (the exactly rounded sum, whatever the order: the same float as
    ``math.fsum(np.concatenate(arrays).tolist())``), ``chunk`` elements at a time: at 1M records × 4 attributes the
    whole list held 4M Python floats (about 130 MiB) at the peak of report.html's Rating baseline (issue 18)."""
    return math.fsum(
        itertools.chain.from_iterable(values[i : i + chunk].tolist() for values in arrays for i in range(0, len(values), chunk))
    )


def _check_columns(frame: pd.DataFrame, columns: Sequence[str], name: str) -> None:
    missing = [c for c in columns if c not in frame.columns]
    if missing:
        raise ValueError(f"column(s) {missing} not in {name} (columns: {list(frame.columns)})")


def _sid_sizes(attribute_table: pd.DataFrame, id_table: pd.DataFrame, sensitive_attributes: Sequence[str]) -> np.ndarray:
    """Number of distinct values of every attribute-table cell's SID, NaN for a suppressed cell.

    Returns a float64 array of shape ``(len(attribute_table), m)``.

    Raises
    ------
    ValueError
        If a published SID number has no row in ``id_table``.
    """
    out = np.full((len(attribute_table), len(sensitive_attributes)), np.nan, dtype=float)
    attribute_of_row = (
        as_text(id_table["attribute"]).to_numpy() if not isinstance(id_table["attribute"].dtype, pd.CategoricalDtype) else None
    )
    # the SID column and the values' codes taken as they are (a categorical's own codes: distinct codes are distinct
    # values), only the attribute's rows converted: no int64 copy of the whole ID table per attribute (issue 18)
    sid_column = id_table["sid"].to_numpy()
    value = id_table["value"]
    value_all = value.cat.codes.to_numpy() if isinstance(value.dtype, pd.CategoricalDtype) else None
    for j, attribute in enumerate(sensitive_attributes):
        if attribute_of_row is None:
            rows = (id_table["attribute"] == attribute).to_numpy()
        else:
            rows = attribute_of_row == attribute
        sid = sid_column[rows].astype(np.int64)
        value_codes = value_all[rows] if value_all is not None else pd.factorize(value[rows])[0]
        # distinct values per SID: unique (sid, value) pairs counted per SID
        size_by_sid = distinct_per_group(sid, value_codes.astype(np.int64), int(sid.max(initial=0)) + 1).astype(float)
        present = np.zeros(len(size_by_sid), dtype=bool)
        present[sid] = True
        column = attribute_table[attribute]
        suppressed = column.isna().to_numpy()
        sids = column.fillna(0).to_numpy(dtype=np.int64)
        inside = (sids >= 0) & (sids < len(size_by_sid))
        known = np.zeros(len(sids), dtype=bool)
        known[inside] = present[sids[inside]]
        unknown = ~suppressed & ~known
        if unknown.any():
            raise ValueError(
                f"attribute {attribute!r}: SID(s) {sorted(set(sids[unknown].tolist()))} of the attribute table "
                "are not in the ID table"
            )
        found = np.where(known, size_by_sid[np.where(known, sids, 0)], np.nan)
        out[:, j] = np.where(suppressed, np.nan, found)
    return out


def _group_value_counts(sac_released: pd.DataFrame, sensitive_attributes: Sequence[str]) -> np.ndarray:
    """Distinct values of each attribute in each ``SAC~`` row's group, shape ``(len(sac), m)``, float64."""
    group_index, group_ids = pd.factorize(sac_released["group_id"].to_numpy(np.int64))
    out = np.empty((len(sac_released), len(sensitive_attributes)), dtype=float)
    for j, attribute in enumerate(sensitive_attributes):
        codes, _ = pd.factorize(sac_released[attribute])
        distinct = distinct_per_group(group_index, codes, len(group_ids))
        out[:, j] = distinct[group_index]
    return out


def additional_information_loss(
    *,
    sac_released: pd.DataFrame,
    attribute_table: pd.DataFrame,
    id_table: pd.DataFrame,
    sensitive_attributes: Sequence[str],
    ell: EllRequirement,
    n_deleted: int,
) -> float:
    """Additional information loss of a release, the mean loss per original cell beyond ℓ.

    Per published cell ``(t, S_i)`` with possible-value set ``G`` — the distinct values of its
    SID for an attribute-table row, the distinct ``S_i`` values of its group for a ``SAC~``
    row — the loss is ``(|G| − ℓ)/|G|``; a suppressed cell (``<NA>`` SID) costs 1 and a deleted
    record costs 1 per attribute. ``AIL = (1/(n·m)) Σ_t Σ_i AIL(t, S_i)`` with
    ``n = len(sac_released) + len(attribute_table) + n_deleted`` (the original records) and
    ``m = len(sensitive_attributes)``. It is 0 when every set has exactly ℓ values.

    Parameters
    ----------
    sac_released
        ``row_id``, ``group_id`` (int64), sensitive attributes (str), shape ``(n_sac, ...)``.
        May be empty, with any columns (Rating release).
    attribute_table
        ``row_id`` and one nullable ``Int32`` SID column per sensitive attribute (``<NA>`` =
        suppressed), shape ``(n_at, ...)``.
    id_table
        ``attribute`` (str), ``sid`` (int32), ``value`` (str); SIDs numbered per attribute.
    sensitive_attributes
        The m attributes to score, m >= 1.
    ell
        ℓ >= 2 of the release, or ℓ_i per sensitive attribute (SPEC §6.7: a cell of attribute i loses
        ``(|G| − ℓ_i)/|G|``).
    n_deleted
        Records of the input that were deleted (not published), >= 0.

    Returns
    -------
    float
        AIL in ``[0, 1]``; 0.0 when ``n == 0``. With one attribute in ``sensitive_attributes``, that
        attribute's AIL.

    Raises
    ------
    ValueError
        Invalid ``ell``/``n_deleted``, no sensitive attribute, a missing column, a SID absent
        from ``id_table``, or a possible-value set with fewer than ℓ values (the release is not
        ℓ-diverse, so the formula would go negative).

    References
    ----------
    P1 §6 (AIL after its ref. [12]); SPEC §11 and §15 row 22.
    """
    _check_n_deleted(n_deleted)
    sensitive_attribute_columns = list(sensitive_attributes)
    if not sensitive_attribute_columns:
        raise ValueError("at least one sensitive attribute is needed")
    if isinstance(ell, Mapping):
        per_attribute = ell_by_attribute(ell, sensitive_attribute_columns)
        row_ell: int | np.ndarray = np.asarray(list(per_attribute.values()), dtype=np.int64)
    else:
        _check_ell(ell)
        row_ell = ell
    _check_columns(attribute_table, sensitive_attribute_columns, "attribute_table")
    n_sac = len(sac_released)
    n = n_sac + len(attribute_table) + int(n_deleted)
    if n == 0:
        return 0.0
    parts: list[np.ndarray] = []
    if n_sac:
        _check_columns(sac_released, ["group_id", *sensitive_attribute_columns], "sac_released")
        parts.append(_group_value_counts(sac_released, sensitive_attribute_columns).ravel())
    parts.append(_sid_sizes(attribute_table, id_table, sensitive_attribute_columns).ravel())
    sizes = np.concatenate(parts)
    del parts
    # parts are (rows × attributes) raveled row by row: ℓ_i repeats with period m
    required = row_ell if not isinstance(row_ell, np.ndarray) else np.tile(row_ell, len(sizes) // len(row_ell))
    published = ~np.isnan(sizes)
    if (sizes < required)[published].any():
        raise ValueError(f"a published possible-value set has fewer than ℓ = {ell} values")
    # in place: (|G| − ℓ) / |G| where published, 1 where suppressed, the same operations as without (one n × m array
    # instead of four at the peak, issue 18)
    loss = np.where(published, sizes, 1.0)
    del sizes
    np.divide(np.subtract(loss, required), loss, out=loss)
    loss[~published] = 1.0
    total = exact_sum(loss) + int(n_deleted) * len(sensitive_attribute_columns)
    return total / (n * len(sensitive_attribute_columns))


def reconstruction_error(
    *,
    sac_released: pd.DataFrame,
    attribute_table: pd.DataFrame,
    id_table: pd.DataFrame,
    attribute_clusters: pd.DataFrame,
    sensitive_attributes: Sequence[str],
    domain_sizes: Mapping[str, int],
    n_deleted: int,
) -> float:
    """Anatomy-style reconstruction error of a release, summed over the original records.

    A user rebuilds for each record a pdf uniform over ``N_t`` tuples of
    ``D(S_1) × … × D(S_m)`` that include the truth, so ``Err(t) = 1 − 1/N_t``:

    * attribute-table row: ``N_t = Π_i |SID_i(t)|`` (distinct values of the SID), a suppressed
      cell contributing the factor ``domain_sizes[S_i]``;
    * ``SAC~`` row: ``N_t = Π_C (#distinct C-tuples in the row's group)`` over the attribute
      clusters (each attribute its own cluster when ``attribute_clusters`` is empty);
    * deleted record: ``Err = 1``.

    ``RCE = Σ_t Err(t)``. ``1/N_t`` is computed as a float product of reciprocals, so any
    number of attributes is safe (no integer overflow; a vanishing ``1/N_t`` gives ``Err = 1``).

    Parameters
    ----------
    sac_released
        ``row_id``, ``group_id`` (int64), sensitive attributes (str). May be empty, with any
        columns (Rating release).
    attribute_table
        ``row_id`` and one nullable ``Int32`` SID column per sensitive attribute (``<NA>`` =
        suppressed).
    id_table
        ``attribute`` (str), ``sid`` (int32), ``value`` (str); SIDs numbered per attribute.
    attribute_clusters
        ``cluster_id`` (int), ``attribute`` (str); a partition of ``sensitive_attributes``, or
        empty.
    sensitive_attributes
        The m >= 1 attributes spanning the reconstruction space.
    domain_sizes
        Attribute -> number of distinct values in the raw table (see :func:`domain_sizes`),
        every sensitive attribute; >= 1 where a cell is suppressed.
    n_deleted
        Records of the input that were deleted (not published), >= 0.

    Returns
    -------
    float
        RCE in ``[0, n]`` (a total, not a mean), ``n`` the original records.

    Raises
    ------
    ValueError
        Invalid ``n_deleted``, no sensitive attribute, a missing column, a missing domain
        size (or one < 1 for an attribute with a suppressed cell), a SID absent from ``id_table``, or a non-empty
        ``attribute_clusters`` that is not a partition of ``sensitive_attributes``.

    References
    ----------
    Anatomy (Xiao & Tao 2006) §6 (reconstruction error); P1 §6 and Lemma 23; SPEC §11 and §15
    row 23.
    """
    _check_n_deleted(n_deleted)
    sensitive_attribute_columns = list(sensitive_attributes)
    if not sensitive_attribute_columns:
        raise ValueError("at least one sensitive attribute is needed")
    _check_columns(attribute_table, sensitive_attribute_columns, "attribute_table")
    missing = [a for a in sensitive_attribute_columns if a not in domain_sizes]
    if missing:
        raise ValueError(f"no domain size given for attribute(s) {missing}")

    errors: list[np.ndarray] = []
    # attribute-table rows
    sizes = _sid_sizes(attribute_table, id_table, sensitive_attribute_columns)
    domains = np.array([float(domain_sizes[a]) for a in sensitive_attribute_columns])
    bad = [a for j, a in enumerate(sensitive_attribute_columns) if np.isnan(sizes[:, j]).any() and not domains[j] >= 1]
    if bad:
        raise ValueError(f"attribute(s) {bad} have suppressed cells but a domain size < 1")
    # in place, the same operations (a suppressed cell's factor is the domain size): one n × m array at the peak
    # instead of three (issue 18: report.html's Rating baseline at 1M records)
    suppressed = np.isnan(sizes)
    np.copyto(sizes, np.broadcast_to(domains[np.newaxis, :], sizes.shape), where=suppressed)
    del suppressed
    np.divide(1.0, sizes, out=sizes)
    reciprocal_product = np.prod(sizes, axis=1)
    del sizes
    errors.append(np.subtract(1.0, reciprocal_product, out=reciprocal_product))
    # SAC~ rows
    if len(sac_released):
        _check_columns(sac_released, ["group_id", *sensitive_attribute_columns], "sac_released")
        clusters = _cluster_lists(attribute_clusters, sensitive_attribute_columns)
        inverse = np.ones(len(sac_released), dtype=float)
        for cluster in clusters:
            tuples = sac_released[["group_id", *cluster]].drop_duplicates().groupby("group_id", observed=True).size()
            inverse /= sac_released["group_id"].map(tuples).to_numpy(dtype=float)
        errors.append(1.0 - inverse)
    return exact_sum(*errors) + float(int(n_deleted))


def _cluster_lists(attribute_clusters: pd.DataFrame, sensitive_attributes: list[str]) -> list[list[str]]:
    """Clusters in ``cluster_id`` order; one singleton per attribute when the frame is empty."""
    if len(attribute_clusters) == 0:
        return [[a] for a in sensitive_attributes]
    listed = attribute_clusters["attribute"].tolist()
    if sorted(listed) != sorted(sensitive_attributes):
        raise ValueError(
            f"attribute_clusters {sorted(listed)} is not a partition of the sensitive attributes {sorted(sensitive_attributes)}"
        )
    return [list(g["attribute"]) for _, g in attribute_clusters.groupby("cluster_id", sort=True, observed=True)]


def domain_sizes(records: pd.DataFrame, sensitive_attributes: Sequence[str]) -> dict[str, int]:
    """Number of distinct values of each sensitive attribute in a raw records table.

    Parameters
    ----------
    records
        The raw input (one row per record); values are compared as ``str``.
    sensitive_attributes
        Columns to measure.

    Returns
    -------
    dict[str, int]
        Attribute -> ``|D(S_i)|``, the factor of a suppressed cell in
        :func:`reconstruction_error` (SPEC §11; reproduces SPEC §16.2's ``RCE_mixed``).

    Raises
    ------
    ValueError
        If a column is missing.
    """
    _check_columns(records, list(sensitive_attributes), "records")
    # distinct texts, as ``astype(str).nunique()`` counts them, made once per distinct value (not per row)
    return {a: len(sorted_text_codes(records[a])[1]) for a in sensitive_attributes}
