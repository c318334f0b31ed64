"""Algorithm 7 (split into SAC and IR) and Algorithm 10 (sensitive-attribute clustering).

Sources: P1 §4 (Algorithm 7, Definitions 8-9, Algorithm 10), reconstructed in SPEC §3-§4.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from pipeline.core.columns import values_mask
from pipeline.core.rules import strong_values

__all__ = ["SacIrSplit", "choose_s_max", "cluster_sensitive_attributes", "split_sac_ir"]


@dataclass(frozen=True)
class SacIrSplit:
    """Result of Algorithm 7.

    Attributes
    ----------
    s_max
        The sensitive attribute with the most strong-value occurrences (ties: schema order);
        ``None`` when there is no strong rule.
    strong_value_occurrences
        ``{attribute: number of records whose value on it is a strong value}``.
    sac_row_ids, ir_row_ids
        Row ids (int64 arrays) of SAC and IR, each in table order; together all records.
    """

    s_max: str | None
    strong_value_occurrences: dict[str, int]
    sac_row_ids: np.ndarray
    ir_row_ids: np.ndarray


def choose_s_max(occurrences: dict[str, int], sensitive_attributes: Sequence[str]) -> str:
    """``S_max`` of Algorithm 7: the attribute with the most strong-value occurrences (records), ties to the first in
    schema order.

    Raises
    ------
    KeyError
        An attribute without an entry in ``occurrences``. ``ValueError``: no sensitive attribute.

    References
    ----------
    P1 Algorithm 7; SPEC §3.
    """
    attributes = list(sensitive_attributes)
    return max(attributes, key=lambda a: (occurrences[a], -attributes.index(a)))


def split_sac_ir(
    records: pd.DataFrame,
    sensitive_attributes: Sequence[str],
    rules: pd.DataFrame,
    *,
    row_id_column: str = "row_id",
    s_max: str | None = None,
) -> SacIrSplit:
    """Split a table into SAC (records holding a strong value off ``S_max``) and IR (the rest).

    Parameters
    ----------
    records
        One row per record in table order; columns ``row_id_column`` (int) and every
        sensitive attribute.
    sensitive_attributes
        Sensitive attribute columns in schema order.
    rules
        Strong rules (``pipeline.core.rules.RULE_COLUMNS``) mined on ``records`` (a shard: on the whole table).
    s_max
        ``S_max`` chosen elsewhere: a shard of a sharded release takes the whole table's (SCALE.md §1; choosing it
        per shard tilts SIDs). None (default): chosen here from ``records``' occurrences.

    Returns
    -------
    SacIrSplit
        ``S_max`` = attribute with the largest number of strong-value occurrences (records,
        not distinct values; ties go to the first attribute in schema order). SAC = records
        (table order) holding a strong value on any attribute other than ``S_max``; IR = the
        rest (table order). With no strong rule, SAC is empty and ``s_max`` is None.

    Raises
    ------
    ValueError
        If a column is missing, or ``s_max`` is not one of ``sensitive_attributes``.

    References
    ----------
    P1 Algorithm 7; SPEC §3 and §15 row 4.
    """
    missing = [c for c in [row_id_column, *sensitive_attributes] if c not in records.columns]
    if missing:
        raise ValueError(f"column(s) {missing} not in the table")
    if s_max is not None and s_max not in sensitive_attributes:
        raise ValueError(f"s_max {s_max!r} is not a sensitive attribute ({list(sensitive_attributes)})")
    values = strong_values(rules, sensitive_attributes)
    holds = {a: values_mask(records[a], values[a]) for a in sensitive_attributes}
    occurrences = {a: int(holds[a].sum()) for a in sensitive_attributes}
    row_ids = records[row_id_column].to_numpy(dtype=np.int64)
    if len(rules) == 0:
        return SacIrSplit(None, occurrences, row_ids[:0].copy(), row_ids.copy())
    if s_max is None:
        s_max = choose_s_max(occurrences, sensitive_attributes)
    in_sac = np.zeros(len(records), dtype=bool)
    for attribute in sensitive_attributes:
        if attribute != s_max:
            in_sac |= holds[attribute]
    return SacIrSplit(s_max, occurrences, row_ids[in_sac], row_ids[~in_sac])


def cluster_sensitive_attributes(
    sensitive_attributes: Sequence[str],
    rules: pd.DataFrame,
    *,
    fixpoint: bool = True,
) -> list[list[str]]:
    """Cluster sensitive attributes so that every pair linked by a strong rule shares a cluster.

    Parameters
    ----------
    sensitive_attributes
        Attributes in schema order.
    rules
        Strong rules (``antecedent_attribute`` / ``consequent_attribute`` columns used).
    fixpoint
        ``True`` (default, SPEC [choice]): rescan the remaining attributes until a full scan adds
        nothing, which yields the connected components of the attribute graph. ``False``: P1's
        literal single pass, which can split a component (SPEC §16.4); kept for comparison.

    Returns
    -------
    list of list of str
        ``Cluster_Set``: clusters in creation order, members in insertion order. Distance
        between attributes (Def. 8) is 0 iff a rule links them; attribute-to-cluster distance
        (Def. 9) is the minimum over members (single linkage).

    References
    ----------
    P1 Definitions 8-9 and Algorithm 10; SPEC §4 and §15 row 6.
    """
    linked: set[frozenset[str]] = {
        frozenset((a, b)) for a, b in zip(rules["antecedent_attribute"], rules["consequent_attribute"], strict=True)
    }
    rest = list(sensitive_attributes)
    clusters: list[list[str]] = []
    while rest:
        cluster = [rest.pop(0)]
        changed = True
        while changed:
            changed = False
            for attribute in list(rest):
                if any(frozenset((attribute, member)) in linked for member in cluster):
                    cluster.append(attribute)
                    rest.remove(attribute)
                    changed = True
            if not fixpoint:
                break
        clusters.append(cluster)
    return clusters
