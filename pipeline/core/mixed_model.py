"""The mixed publication model: SAC~ groups for strong-value holders, improved Rating for the rest,
and the assembly of the release tables.

Sources: P1 §4-§5 (Algorithms 7, 10, 11, 13, 19) and §4.3 (what is released); SPEC §1-§8.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from pipeline.core.grouping import Grouping, group_sac, permute_within_groups
from pipeline.core.partition import SacIrSplit, cluster_sensitive_attributes, split_sac_ir
from pipeline.core.rating import rating_tables
from pipeline.core.rules import mine_strong_rules

__all__ = [
    "MixedModelResult",
    "ReleaseTables",
    "assemble_release_tables",
    "run_mixed_model",
    "validate_model_columns",
]

RESERVED_COLUMNS = ("row_id", "group_id")


def validate_model_columns(
    columns: Sequence[str], quasi_identifiers: Sequence[str], sensitive_attributes: Sequence[str]
) -> None:
    """Check a column configuration before any work is done.

    Raises
    ------
    ValueError
        Fewer than 2 sensitive attributes, a configured column absent from ``columns``, a
        column configured twice or as both quasi-identifier and sensitive attribute, or a
        column named like a release-contract column (``row_id``, ``group_id``).
    """
    if len(sensitive_attributes) < 2:
        raise ValueError(
            f"the mixed model needs at least 2 sensitive attributes, got {list(sensitive_attributes)}; "
            "with one sensitive attribute use plain ℓ-diversity instead"
        )
    both = sorted(set(quasi_identifiers) & set(sensitive_attributes))
    if both:
        raise ValueError(f"column(s) {both} are configured both as quasi-identifier and as sensitive attribute")
    for kind, names in (("quasi-identifier", quasi_identifiers), ("sensitive attribute", sensitive_attributes)):
        duplicated = sorted({n for n in names if list(names).count(n) > 1})
        if duplicated:
            raise ValueError(f"{kind} column(s) {duplicated} are listed more than once")
    missing = [c for c in [*quasi_identifiers, *sensitive_attributes] if c not in columns]
    if missing:
        raise ValueError(f"configured column(s) {missing} are not in the input (columns: {list(columns)})")
    reserved = [c for c in [*quasi_identifiers, *sensitive_attributes] if c in RESERVED_COLUMNS]
    if reserved:
        raise ValueError(f"column name(s) {reserved} are reserved by the release contract; rename them in the input")


@dataclass(frozen=True)
class MixedModelResult:
    """Every stage of the mixed model, with internal row ids (table order, never released).

    ``sac_permuted``: ``group_id``, ``row_id`` and the record's columns, sensitive attributes
    permuted per group and cluster. ``id_table`` / ``attribute_sids``: see
    :func:`pipeline.core.rating.rating_tables` (on ``IR_left``).
    """

    rules: pd.DataFrame
    split: SacIrSplit
    clusters: list[list[str]]
    grouping: Grouping
    sac_permuted: pd.DataFrame
    id_table: pd.DataFrame
    attribute_sids: pd.DataFrame


def run_mixed_model(
    records: pd.DataFrame,
    sensitive_attributes: Sequence[str],
    *,
    ell: int,
    min_confidence: float,
    seed: int,
    rules: pd.DataFrame | None = None,
) -> MixedModelResult:
    """Run the whole mixed model on a table (the pure equivalent of the Dagster job).

    Parameters
    ----------
    records
        One row per record, in table order; column ``row_id`` (int64, unique) plus the
        quasi-identifiers and sensitive attributes (no missing values in the latter).
    sensitive_attributes
        At least 2, schema order.
    ell, min_confidence, seed
        ℓ >= 2; threshold in (0, 1]; seed of the per-group permutation.
    rules
        Strong rules already mined on ``records`` (mined here when None).

    Returns
    -------
    MixedModelResult

    Raises
    ------
    ValueError
        Invalid parameters or columns (see the stage functions).

    References
    ----------
    P1 Algorithms 7, 10, 11, 19; SPEC §2-§6.
    """
    if rules is None:
        rules = mine_strong_rules(records, sensitive_attributes, min_confidence=min_confidence)
    split = split_sac_ir(records, sensitive_attributes, rules)
    clusters = cluster_sensitive_attributes(sensitive_attributes, rules)
    grouping = group_sac(records, sensitive_attributes, split.sac_row_ids, split.ir_row_ids, ell=ell)
    sac_permuted = permute_within_groups(records, grouping.members, clusters, seed=seed)
    indexed = records.set_index("row_id", drop=False)
    ir_left = indexed.loc[grouping.ir_left].reset_index(drop=True)
    id_table, attribute_sids = rating_tables(ir_left, sensitive_attributes, ell=ell)
    return MixedModelResult(rules, split, clusters, grouping, sac_permuted, id_table, attribute_sids)


@dataclass(frozen=True)
class ReleaseTables:
    """The tables of a release (SPEC §8; release contract of the README) and the private row map.

    Attributes
    ----------
    sac_released
        ``row_id`` (int64), ``group_id`` (int64), quasi-identifiers, sensitive attributes.
    attribute_table
        ``row_id`` (int64), quasi-identifiers, one ``Int32`` SID column per sensitive
        attribute (``<NA>`` = suppressed cell).
    id_table
        ``attribute``, ``sid`` (int32), ``value``, ``count`` (int32).
    attribute_clusters
        ``cluster_id`` (int32, 1-based), ``attribute``.
    row_map
        PRIVATE, never released: ``source_row_id`` (internal id) -> ``row_id`` (release id).
    """

    sac_released: pd.DataFrame
    attribute_table: pd.DataFrame
    id_table: pd.DataFrame
    attribute_clusters: pd.DataFrame
    row_map: pd.DataFrame


def _row_keys(frame: pd.DataFrame) -> np.ndarray:
    """One text key per row joining all columns (empty strings when there are no columns)."""
    if frame.shape[1] == 0:
        return np.full(len(frame), "", dtype=object)
    return frame.astype(str).agg("\x1f".join, axis=1).to_numpy(dtype=object)


def _as_text(frame: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    return frame.assign(**{c: frame[c].astype(str) for c in columns})


def assemble_release_tables(
    records: pd.DataFrame,
    quasi_identifiers: Sequence[str],
    sensitive_attributes: Sequence[str],
    *,
    sac_permuted: pd.DataFrame,
    attribute_sids: pd.DataFrame,
    id_table: pd.DataFrame,
    clusters: Sequence[Sequence[str]],
) -> ReleaseTables:
    """Put the model's outputs in release form, with fresh row ids that carry no input order.

    Groups are ordered by their content (sorted member quasi-identifier tuples, then sorted
    original sensitive tuples, both independent of the seed); rows inside a group by
    quasi-identifiers then released sensitive values, so the seed (a SAC record) is not
    recognisable by its position. Attribute-table rows are ordered by quasi-identifiers then
    SIDs. Release row ids are 1..n over SAC~ then the attribute table; group ids 1..g.

    Parameters
    ----------
    records
        The input table (``row_id`` + all configured columns) to take quasi-identifiers from.
    quasi_identifiers, sensitive_attributes
        Column names.
    sac_permuted, attribute_sids, id_table, clusters
        Outputs of :func:`run_mixed_model` (or of the Dagster assets).

    Returns
    -------
    ReleaseTables
    """
    qi = list(quasi_identifiers)
    sa = list(sensitive_attributes)
    records_text = _as_text(records[["row_id", *qi, *sa]], [*qi, *sa])
    sac = _as_text(sac_permuted[["group_id", "row_id", *qi, *sa]], [*qi, *sa])
    if len(sac):
        original = records_text.set_index("row_id").loc[sac["row_id"], sa].reset_index(drop=True)
        member_key = _row_keys(sac[qi])
        original_key = _row_keys(original)
        keys = pd.DataFrame({"group_id": sac["group_id"].to_numpy(), "qi": member_key, "orig": original_key})
        group_key = keys.groupby("group_id").agg(
            qi=("qi", lambda s: "\x1e".join(sorted(s))), orig=("orig", lambda s: "\x1e".join(sorted(s)))
        )
        new_group = group_key.sort_values(["qi", "orig"], kind="stable").index.to_numpy()
        renumber = pd.Series(np.arange(1, len(new_group) + 1, dtype=np.int64), index=new_group)
        sac = sac.assign(group_id=sac["group_id"].map(renumber).astype("int64"))
        sac = sac.sort_values(["group_id", *qi, *sa], kind="stable").reset_index(drop=True)
    n_sac = len(sac)
    sac_row_ids = np.arange(1, n_sac + 1, dtype=np.int64)

    at = attribute_sids.merge(records_text[["row_id", *qi]], on="row_id", how="left")
    at = at.sort_values([*qi, *sa], kind="stable", na_position="first").reset_index(drop=True)
    at_row_ids = np.arange(n_sac + 1, n_sac + len(at) + 1, dtype=np.int64)

    row_map = pd.DataFrame(
        {
            "source_row_id": np.concatenate([sac["row_id"].to_numpy(np.int64), at["row_id"].to_numpy(np.int64)]),
            "row_id": np.concatenate([sac_row_ids, at_row_ids]),
        }
    )
    sac_released = sac.assign(row_id=sac_row_ids)[["row_id", "group_id", *qi, *sa]]
    attribute_table = at.assign(row_id=at_row_ids)[["row_id", *qi, *sa]]
    attribute_table = attribute_table.astype({a: "Int32" for a in sa})
    clusters_frame = pd.DataFrame(
        [(k + 1, attribute) for k, cluster in enumerate(clusters) for attribute in cluster],
        columns=["cluster_id", "attribute"],
    ).astype({"cluster_id": "int32", "attribute": object})
    return ReleaseTables(
        sac_released=sac_released,
        attribute_table=attribute_table,
        id_table=id_table.reset_index(drop=True),
        attribute_clusters=clusters_frame,
        row_map=row_map,
    )
