"""A full-domain generalizer in the manner of anjana and ARX, for the tests: it plays "another tool" whose output
``msa-release audit --table`` reads (anjana itself cannot be installed beside this project's pins, see the README).

Every quasi-identifier is generalized to one level of its ARX hierarchy (the same level for the whole column); the
records of classes that break k-anonymity or distinct ℓ-diversity of some sensitive attribute (each attribute on its
own, as anjana's ``l_diversity`` checks it) are suppressed (removed, as anjana does); the lattice node of the lowest
total level whose suppression stays within the limit wins (ties: fewer suppressed records, then the node's order).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd

from pipeline.core.hierarchies import load_hierarchies


def generalize_like_anjana(
    records: pd.DataFrame,
    quasi_identifiers: Sequence[str],
    sensitive_attributes: Sequence[str],
    hierarchies_dir: Path,
    *,
    k: int,
    ell: int,
    max_suppressed_share: float,
) -> tuple[pd.DataFrame, Mapping[str, int]]:
    """The generalized table (quasi-identifier labels and sensitive values as text) and the chosen level per
    quasi-identifier."""
    hierarchies = load_hierarchies(hierarchies_dir, list(quasi_identifiers))
    text = records[[*quasi_identifiers, *sensitive_attributes]].astype(str)
    columns = {}
    for attribute in quasi_identifiers:
        hierarchy = hierarchies[attribute]
        base = {value: i for i, value in enumerate(hierarchy.base_values)}
        positions = text[attribute].map(base).to_numpy()
        columns[attribute] = [
            pd.Series([hierarchy.labels[level][code] for code in hierarchy.codes[positions, level]], index=text.index)
            for level in range(hierarchy.height + 1)
        ]
    best = None
    for levels in itertools.product(*(range(hierarchies[a].height + 1) for a in quasi_identifiers)):
        table = pd.DataFrame({a: columns[a][level] for a, level in zip(quasi_identifiers, levels, strict=True)})
        table = pd.concat([table, text[list(sensitive_attributes)]], axis=1)
        groups = table.groupby(list(quasi_identifiers), sort=False)
        keep = groups[quasi_identifiers[0]].transform("size") >= k
        for attribute in sensitive_attributes:
            keep &= groups[attribute].transform("nunique") >= ell
        suppressed = int((~keep).sum())
        if suppressed > max_suppressed_share * len(table):
            continue
        key = (sum(levels), suppressed, levels)
        if best is None or key < best[0]:
            best = (key, table[keep.to_numpy()].reset_index(drop=True))
    assert best is not None, "no lattice node satisfies the requirement within the suppression limit"
    return best[1], dict(zip(quasi_identifiers, best[0][2], strict=True))
