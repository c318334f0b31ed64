"""The victims of the attacks and the coverage of generalized labels (:mod:`pipeline.core.attacks`)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

from pipeline.core.hierarchies import Hierarchy

#: Largest full-tuple code space (product of the domain sizes) the mixture beliefs accept.
MAX_CODE_SPACE = 2**62
#: Target number of dense cells per chunk of the sparse products (bounds memory).
CHUNK_CELLS = 8_000_000
#: Contexts per batch of the naive join (each batch holds a contexts × clusters matrix per table).
NAIVE_BATCH = 768
#: Histogram bin edges of :func:`summarize_attack` (probabilities).
HISTOGRAM_EDGES = (0.0, 0.05, 0.1, 0.2, 0.3, 1 / 3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)


def label_coverage(hierarchy: Hierarchy, labels: Sequence[str], values: Sequence[str]) -> np.ndarray:
    """Which generalised labels cover which base values.

    Parameters
    ----------
    hierarchy
        The attribute's hierarchy.
    labels
        Published labels (base values or generalised node labels).
    values
        Base values (raw data values).

    Returns
    -------
    numpy.ndarray
        bool, shape ``(len(labels), len(values))``: ``True`` iff the value's ancestor at some
        level ``h`` is a node of level ``h`` whose label is the given label (a label that
        appears at several levels covers the union).

    Raises
    ------
    ValueError
        A label that is no node of the hierarchy.
    pipeline.core.hierarchies.HierarchyError
        A value that is not a base value of the hierarchy.
    """
    nodes: dict[str, list[tuple[int, int]]] = {}
    for level, names in enumerate(hierarchy.labels):
        for node, name in enumerate(names):
            nodes.setdefault(name, []).append((level, node))
    ancestors = (
        hierarchy.codes[hierarchy.encode(list(values))] if len(values) else np.zeros((0, hierarchy.height + 1), dtype=np.int32)
    )
    covered = np.zeros((len(labels), len(values)), dtype=bool)
    for row, label in enumerate(labels):
        found = nodes.get(label)
        if found is None:
            raise ValueError(
                f"published label {label!r} of {hierarchy.attribute!r} is not a node of hierarchy {hierarchy.source}"
            )
        for level, node in found:
            covered[row] |= ancestors[:, level] == node
    return covered


def victim_table(
    records: pd.DataFrame,
    row_map: pd.DataFrame,
    quasi_identifiers: Sequence[str],
    sensitive_attributes: Sequence[str],
) -> pd.DataFrame:
    """The victims of a release: every released record, with its true values (PRIVATE).

    Parameters
    ----------
    records
        Raw table: ``row_id`` (input id) + quasi-identifiers + sensitive attributes.
    row_map
        ``source_row_id`` (input id) of every released row (a release's private row map;
        other columns ignored). Deleted / unpublished records are absent and are no victims.
    quasi_identifiers, sensitive_attributes
        Column names.

    Returns
    -------
    pandas.DataFrame
        ``source_row_id`` (int64, ascending) and the quasi-identifiers and sensitive
        attributes as text, one row per released record.
    """
    columns = [*quasi_identifiers, *sensitive_attributes]
    released = np.unique(row_map["source_row_id"].to_numpy(np.int64))
    chosen = records[records["row_id"].isin(released)]
    victims = chosen[["row_id", *columns]].rename(columns={"row_id": "source_row_id"})
    victims = victims.astype({c: str for c in columns}).astype({"source_row_id": "int64"})
    return victims.sort_values("source_row_id", kind="stable").reset_index(drop=True)


def _contexts(victims: pd.DataFrame, columns: Sequence[str]) -> tuple[pd.DataFrame, np.ndarray]:
    """Distinct value tuples of ``columns`` among the victims and each victim's context index."""
    columns = list(columns)
    codes = victims.groupby(columns, sort=True, dropna=False, observed=True).ngroup().to_numpy(np.int64)
    first = np.unique(codes, return_index=True)[1]
    contexts = victims.iloc[first][columns].reset_index(drop=True)
    return contexts, codes


def _encode(values: Iterable[str], domain: Sequence[str]) -> np.ndarray:
    """Domain index of each value, -1 for a value the release never shows."""
    index = {v: k for k, v in enumerate(domain)}
    return np.fromiter((index.get(str(v), -1) for v in values), dtype=np.int64)
