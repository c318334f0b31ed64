"""Warehouse tables back into the core's objects (no Dagster): what the assets and the gates both read.

``clusters_from_frame`` (``private.sensitive_attribute_clusters`` -> P1's ``Cluster_Set``), ``s_max_from_frame``
(``private.strong_value_occurrences`` -> ``S_max``) and ``hierarchies_from_frame``
(``private.generalization_hierarchies`` -> validated hierarchies, re-read and checked against their SHA-256).
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from pipeline.core.hierarchies import Hierarchy, HierarchyError, read_hierarchy
from pipeline.io.loading import file_sha256

__all__ = ["clusters_from_frame", "hierarchies_from_frame", "s_max_from_frame"]


def clusters_from_frame(frame: pd.DataFrame) -> list[list[str]]:
    """``Cluster_Set`` from a ``cluster_id, attribute`` frame (order kept)."""
    return [list(chunk["attribute"]) for _, chunk in frame.groupby("cluster_id", sort=True, observed=True)]


def s_max_from_frame(frame: pd.DataFrame) -> str | None:
    """``S_max`` from a ``strong_value_occurrences`` frame (None when there is no strong rule)."""
    chosen = frame.loc[frame["is_s_max"].astype(bool), "attribute"]
    return str(chosen.iloc[0]) if len(chosen) else None


def hierarchies_from_frame(frame: pd.DataFrame) -> dict[str, Hierarchy]:
    """Re-read the hierarchy files listed by ``private/generalization_hierarchies``.

    Raises
    ------
    HierarchyError
        A file changed (other SHA-256) since the run validated it, or became unreadable.
    """
    hierarchies = {}
    for row in frame.itertuples(index=False):
        path = Path(row.path)
        if not path.is_file() or file_sha256(path) != row.sha256:
            raise HierarchyError(f"hierarchy file {path} for {row.attribute!r} changed during the run; run again")
        hierarchies[row.attribute] = read_hierarchy(path, attribute=row.attribute)
    return hierarchies
