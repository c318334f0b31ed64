"""Attacks that combine what a release says about one record: intersections of two releases
(composition), one known value at row level, and the candidate sets both rest on.

Both adversaries are given the victim's *row* in every release (SPEC §10's assumption that the
adversary can locate the victim's record; the worst case for linkage). A record's *candidate set*
on a sensitive attribute is what the release allows its value to be:

* in a SAC~ group: the values of that attribute in the group (the permutation hides which);
* in the attribute table: the values of its SID; a suppressed cell: the values held by every SID
  of the attribute (Rating suppresses only those);
* a deleted record is not in the release: no candidate set.

Sources: Ganta, Kasiviswanathan & Smith, "Composition attacks and auxiliary information in data
privacy" (KDD 2008) for intersections; Li et al., "Slicing" (TKDE 2012) and Xiao & Tao,
"Anatomy" (VLDB 2006) for what a bucket reveals when one value of a record is known; issue 12.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from pipeline.core.columns import as_text

__all__ = ["candidate_sets", "intersection_attack", "one_known_value_at_row_level"]


def candidate_sets(
    sensitive_attributes: Sequence[str],
    *,
    row_map: pd.DataFrame,
    sac_released: pd.DataFrame | None = None,
    attribute_table: pd.DataFrame | None = None,
    id_table: pd.DataFrame | None = None,
) -> dict[str, pd.Series]:
    """Every released record's candidate set per sensitive attribute.

    Parameters
    ----------
    sensitive_attributes
        Attribute names.
    row_map
        PRIVATE: ``row_id`` (release) and ``input_row_number``.
    sac_released, attribute_table, id_table
        The release's tables (any may be None or empty).

    Returns
    -------
    dict
        attribute -> Series indexed by ``input_row_number`` holding ``frozenset`` of value texts.

    Raises
    ------
    KeyError
        A row id absent from the row map, or a missing column.
    """
    to_input = pd.Series(row_map["input_row_number"].to_numpy(np.int64), index=row_map["row_id"].to_numpy(np.int64))
    out: dict[str, pd.Series] = {}
    for attribute in sensitive_attributes:
        parts = []
        if sac_released is not None and len(sac_released):
            groups = as_text(sac_released[attribute]).groupby(sac_released["group_id"]).agg(lambda values: frozenset(values))
            sets = groups.reindex(sac_released["group_id"]).to_numpy()
            parts.append(pd.Series(sets, index=to_input.loc[sac_released["row_id"].to_numpy(np.int64)].to_numpy()))
        if attribute_table is not None and id_table is not None and len(attribute_table):
            entries = id_table[as_text(id_table["attribute"]) == attribute]
            value_text = as_text(entries["value"])
            by_sid = value_text.groupby(entries["sid"]).agg(lambda values: frozenset(values))
            n_sids = len(by_sid)
            counts = entries["sid"].groupby(value_text).nunique()
            everywhere = frozenset(counts[counts == n_sids].index) if n_sids else frozenset()
            sids = attribute_table[attribute]
            sets = [everywhere if pd.isna(s) else by_sid.get(int(s), frozenset()) for s in sids.tolist()]
            parts.append(
                pd.Series(sets, index=to_input.loc[attribute_table["row_id"].to_numpy(np.int64)].to_numpy(), dtype=object)
            )
        out[attribute] = pd.concat(parts) if parts else pd.Series(dtype=object)
    return out


def intersection_attack(
    first: Mapping[str, pd.Series], second: Mapping[str, pd.Series], sensitive_attributes: Sequence[str]
) -> dict[str, Any]:
    """Intersect two releases' candidate sets of every record present in both.

    Parameters
    ----------
    first, second
        :func:`candidate_sets` of two releases of the same input.
    sensitive_attributes
        Attribute names.

    Returns
    -------
    dict
        ``n_records`` (in both releases), ``share_whole_tuple_pinned`` (every attribute's
        intersection has one value), ``share_pinned_<attribute>``, and the same shares for each
        release alone (``share_whole_tuple_pinned_first`` / ``_second``), so the gain of the
        composition is visible. Shares of ``n_records``; numbers only.
    """
    attributes = list(sensitive_attributes)
    common = first[attributes[0]].index.intersection(second[attributes[0]].index)
    n = len(common)
    result: dict[str, Any] = {"n_records": int(n)}
    if n == 0:
        return {
            **result,
            "share_whole_tuple_pinned": 0.0,
            "share_whole_tuple_pinned_first": 0.0,
            "share_whole_tuple_pinned_second": 0.0,
        }
    whole = np.ones(n, dtype=bool)
    whole_first = np.ones(n, dtype=bool)
    whole_second = np.ones(n, dtype=bool)
    for attribute in attributes:
        a = first[attribute].loc[common].to_numpy()
        b = second[attribute].loc[common].to_numpy()
        pinned = np.fromiter((len(x & y) == 1 for x, y in zip(a, b)), dtype=bool, count=n)
        whole &= pinned
        whole_first &= np.fromiter((len(x) == 1 for x in a), dtype=bool, count=n)
        whole_second &= np.fromiter((len(y) == 1 for y in b), dtype=bool, count=n)
        result[f"share_pinned_{attribute}"] = float(pinned.mean())
    result["share_whole_tuple_pinned"] = float(whole.mean())
    result["share_whole_tuple_pinned_first"] = float(whole_first.mean())
    result["share_whole_tuple_pinned_second"] = float(whole_second.mean())
    return result


def one_known_value_at_row_level(
    sac_released: pd.DataFrame | None,
    attribute_clusters: pd.DataFrame | None,
    n_released: int,
) -> dict[str, Any]:
    """What one known sensitive value gives away when the victim's row is known (SPEC §10's assumption).

    In a SAC~ group the values of one attribute cluster move together (P1 keeps cross-attribute links
    inside clusters), so knowing the victim's value on one attribute of a cluster of two or more
    attributes pins the victim's whole cluster tuple (the group's ℓ tuples are distinct on every
    attribute). In the attribute table every attribute is bucketized independently: one known value
    says nothing about the others.

    Returns
    -------
    dict
        ``share_records_pinning_another_value`` (SAC~ rows in a cluster of ≥ 2 attributes, of all
        released records), ``largest_cluster`` (attributes pinned together), ``n_released``.
    """
    n_sac = 0 if sac_released is None else len(sac_released)
    return one_known_value_from_counts(n_sac, attribute_clusters, n_released)


def one_known_value_from_counts(n_sac_released: int, attribute_clusters: pd.DataFrame | None, n_released: int) -> dict[str, Any]:
    """:func:`one_known_value_at_row_level` from the number of SAC~ rows (what a sharded release's manifest counts)
    and the published ``attribute_clusters`` (``cluster_id``, ``attribute``); the same dict."""
    if not n_sac_released or attribute_clusters is None or not len(attribute_clusters):
        return {"share_records_pinning_another_value": 0.0, "largest_cluster": 1, "n_released": int(n_released)}
    largest = int(attribute_clusters.groupby("cluster_id").size().max())
    exposed = int(n_sac_released) if largest >= 2 else 0
    return {
        "share_records_pinning_another_value": exposed / max(n_released, 1),
        "largest_cluster": largest,
        "n_released": int(n_released),
    }
