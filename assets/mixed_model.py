"""Mixed model stages: SAC/IR split, attribute clusters, SAC~ groups, permutation, improved Rating."""

import time

import dagster as dg
import numpy as np
import pandas as pd

from pipeline.core.grouping import group_sac, permute_within_groups
from pipeline.core.hierarchies import load_available_hierarchies
from pipeline.core.mixed_model import in_table_order, records_for_rating
from pipeline.core.sac_split import cluster_sensitive_attributes, split_sac_ir
from pipeline.core.rating import rating_tables
from pipeline.failures import with_structured_failures
from pipeline.io.tables import clusters_from_frame
from pipeline.asset_keys import KINDS, MIXED_MODEL, PRIVATE, RATING, inputs, model_of_run, table_metadata
from pipeline.models.mixed import MIXED
from pipeline.resources import ReleaseSettings, ReleaseStore
from pipeline.settings import Grouping, ResidualPolicy


def release_secret(settings: ReleaseSettings, store: ReleaseStore) -> bytes | None:
    """The home secret, or None with ``randomness = 'spec-reference'`` (SPEC's input-order algorithms)."""
    return store.home_secret() if settings.randomness == "home-secret" else None


def available_hierarchies(settings: ReleaseSettings) -> dict:
    """The hierarchies of the quasi-identifiers that ``hierarchies_dir`` holds: none when there is no folder (a table
    other than Adult's adult.data without ``hierarchies_dir``; the grouping then generalizes to ``*``)."""
    directory = settings.hierarchies_path()
    return load_available_hierarchies(directory, settings.quasi_identifiers) if directory is not None else {}


def rating_records_of(
    raw_records: pd.DataFrame, row_ids: np.ndarray, settings: ReleaseSettings, secret: bytes | None
) -> tuple[pd.DataFrame, list[int], dict]:
    """The records of ``row_ids`` that go to Rating, as the run's settings say
    (:func:`pipeline.core.mixed_model.records_for_rating`: the same call for the mixed model's IR-left records and
    for every record of the ``rating_release`` job). The quasi-identifier hierarchies are read only when the
    qi_aware grouping deletes residual records (its strata are generalised along them)."""
    stratified = settings.grouping == Grouping.qi_aware and settings.residual_policy == ResidualPolicy.delete
    return records_for_rating(
        raw_records,
        row_ids,
        settings.quasi_identifiers,
        settings.sensitive_attributes,
        ell=settings.ell_requirement(),
        residual_policy=settings.residual_policy,
        grouping=settings.grouping,
        hierarchies=available_hierarchies(settings) if stratified else None,
        secret=secret,
        stratum_deletion_budget=settings.stratum_deletion_budget,
    )


def in_keyed_order(
    raw_records: pd.DataFrame, parts: list[np.ndarray], settings: ReleaseSettings, secret: bytes | None
) -> list[np.ndarray]:
    """Each array of ``parts`` (row ids) re-ordered by the keyed content order of the records
    (:func:`pipeline.core.mixed_model.in_table_order`): the "table order" in which Algorithm 11 consumes SAC and
    IR (unchanged without a secret)."""
    return in_table_order(raw_records, parts, [*settings.quasi_identifiers, *settings.sensitive_attributes], secret)


@dg.multi_asset(
    outs={
        "sac_ir_split": dg.AssetOut(
            key_prefix=PRIVATE,
            kinds=KINDS,
            description="PRIVATE: each record's part, SAC (holds a strong value off S_max) or IR (Algorithm 7).",
        ),
        "strong_value_occurrences": dg.AssetOut(
            key_prefix=PRIVATE,
            kinds=KINDS,
            description="Per sensitive attribute: records holding a strong value, and which attribute is S_max.",
        ),
    },
    ins=inputs(private=["raw_records", "strong_rules"]),
    group_name=MIXED_MODEL,
)
def sac_ir_split(
    context: dg.AssetExecutionContext, settings: ReleaseSettings, raw_records: pd.DataFrame, strong_rules: pd.DataFrame
):
    """Algorithm 7: choose S_max and split the table into SAC and IR (plain Rating has its own stages:
    ``assets/rating_model.py``)."""
    started = time.monotonic()
    model_of_run(MIXED.job, settings)  # a run of this job with another model's setting fails here, by name
    split = split_sac_ir(raw_records, settings.sensitive_attributes, strong_rules)
    sac_ids, ir_ids = split.sac_row_ids, split.ir_row_ids
    parts = pd.DataFrame(
        {
            "row_id": np.concatenate([sac_ids, ir_ids]).astype(np.int64),
            "part": pd.Categorical.from_codes(
                np.concatenate([np.zeros(len(sac_ids), np.int8), np.ones(len(ir_ids), np.int8)]), categories=["SAC", "IR"]
            ),
        }
    ).sort_values("row_id", kind="stable")
    occurrences = pd.DataFrame(
        {
            "attribute": settings.sensitive_attributes,
            "occurrences": [split.strong_value_occurrences[a] for a in settings.sensitive_attributes],
            "is_s_max": [a == split.s_max for a in settings.sensitive_attributes],
        }
    )
    context.add_output_metadata(
        {
            "n_sac": len(sac_ids),
            "n_ir": len(ir_ids),
            "s_max": split.s_max or "(none)",
            "model": settings.model,
            **table_metadata(parts, rows_in=len(raw_records), started=started),
        },
        output_name="sac_ir_split",
    )
    return parts.reset_index(drop=True), occurrences


@dg.asset(
    key_prefix=PRIVATE,
    ins=inputs(private=["strong_rules"]),
    group_name=MIXED_MODEL,
    kinds=KINDS,
    description="PRIVATE: clusters of sensitive attributes linked by strong rules (Algorithm 10, fix-point).",
)
def sensitive_attribute_clusters(
    context: dg.AssetExecutionContext, settings: ReleaseSettings, strong_rules: pd.DataFrame
) -> pd.DataFrame:
    """Algorithm 10 (fix-point): clusters of sensitive attributes linked by strong rules."""
    started = time.monotonic()
    clusters = cluster_sensitive_attributes(settings.sensitive_attributes, strong_rules)
    frame = pd.DataFrame(
        [(k + 1, a) for k, cluster in enumerate(clusters) for a in cluster], columns=["cluster_id", "attribute"]
    ).astype({"cluster_id": "int32"})
    context.add_output_metadata(
        {
            "n_clusters": len(clusters),
            "largest_cluster": max(len(c) for c in clusters),
            **table_metadata(frame, rows_in=len(strong_rules), started=started),
        }
    )
    return frame


@dg.multi_asset(
    outs={
        "sac_groups": dg.AssetOut(
            key_prefix=PRIVATE,
            kinds=KINDS,
            description="PRIVATE: members of each SAC~ group of exactly ℓ records (Algorithm 11), with their origin (SAC or borrowed from IR).",
        ),
        "deleted_records": dg.AssetOut(
            key_prefix=PRIVATE,
            kinds=KINDS,
            description="PRIVATE: records not published: seeds whose group could not be completed "
            "(reason no_partners), and records deleted so that no value exceeds 1/ℓ of the attribute "
            "table (reason eligibility, residual_policy 'delete').",
        ),
        "ir_left": dg.AssetOut(
            key_prefix=PRIVATE,
            kinds=KINDS,
            description="PRIVATE: IR records not borrowed into groups, published by improved Rating; with "
            "the qi_aware grouping also each record's quasi-identifier stratum and the stratum's published "
            "(generalized) quasi-identifiers.",
        ),
    },
    ins=inputs(private=["raw_records", "sac_ir_split"]),
    group_name=MIXED_MODEL,
)
@with_structured_failures
def sac_groups(
    context: dg.AssetExecutionContext,
    settings: ReleaseSettings,
    store: ReleaseStore,
    raw_records: pd.DataFrame,
    sac_ir_split: pd.DataFrame,
):
    """Algorithm 11: group SAC into groups of ℓ records pairwise different on every sensitive attribute, borrowing from IR.

    "Table order" is the keyed content order of the records (home secret), not the input order."""
    started = time.monotonic()
    secret = release_secret(settings, store)
    part = sac_ir_split["part"]
    sac_ids, ir_ids = in_keyed_order(
        raw_records,
        [sac_ir_split.loc[part == "SAC", "row_id"].to_numpy(), sac_ir_split.loc[part == "IR", "row_id"].to_numpy()],
        settings,
        secret,
    )
    grouping = group_sac(
        raw_records,
        settings.sensitive_attributes,
        sac_ids,
        ir_ids,
        ell=settings.ell,
        quasi_identifiers=settings.quasi_identifiers if settings.grouping == "qi_aware" else None,
    )
    ir_left = np.asarray(grouping.ir_left, dtype=np.int64)
    ir_left_frame, eligibility, strata_metadata = rating_records_of(raw_records, ir_left, settings, secret)
    ir_left = ir_left_frame["row_id"].to_numpy(np.int64)
    n_groups, ell = grouping.members.shape
    member_ids = grouping.members.ravel()
    members = pd.DataFrame(
        {
            "group_id": np.repeat(np.arange(1, n_groups + 1, dtype=np.int64), ell),
            "member_position": np.tile(np.arange(1, ell + 1, dtype=np.int64), n_groups),
            "row_id": member_ids,
            "source": np.where(np.isin(member_ids, grouping.borrowed), "IR", "SAC"),
        }
    )
    context.add_output_metadata(
        {
            "n_groups": grouping.n_groups,
            "n_borrowed": len(grouping.borrowed),
            "n_deleted": len(grouping.deleted) + len(eligibility),
            "n_deleted_no_partners": len(grouping.deleted),
            "n_deleted_for_eligibility": len(eligibility),
            **table_metadata(members, rows_in=len(sac_ids), started=started),
        },
        output_name="sac_groups",
    )
    deleted = pd.DataFrame(
        {
            "row_id": np.concatenate([np.asarray(grouping.deleted, dtype=np.int64), eligibility]),
            "reason": pd.Categorical(
                ["no_partners"] * len(grouping.deleted) + ["eligibility"] * len(eligibility),
                categories=["no_partners", "eligibility"],
            ),
        }
    )
    context.add_output_metadata(
        {
            "n_deleted": len(deleted),
            "n_deleted_for_eligibility": len(eligibility),
            "dagster/row_count": len(deleted),
            "n_rows_out": len(deleted),
        },
        output_name="deleted_records",
    )
    context.add_output_metadata(
        {"n_ir_left": len(ir_left), "dagster/row_count": len(ir_left), "n_rows_out": len(ir_left), **strata_metadata},
        output_name="ir_left",
    )
    return members, deleted, ir_left_frame


@dg.asset(
    key_prefix=PRIVATE,
    ins=inputs(private=["raw_records", "sac_groups", "sensitive_attribute_clusters"]),
    group_name=MIXED_MODEL,
    kinds=KINDS,
)
def sac_permuted(
    context: dg.AssetExecutionContext,
    settings: ReleaseSettings,
    store: ReleaseStore,
    raw_records: pd.DataFrame,
    sac_groups: pd.DataFrame,
    sensitive_attribute_clusters: pd.DataFrame,
) -> pd.DataFrame:
    """PRIVATE: SAC~, per group and per attribute cluster a seeded uniform random permutation of the cluster tuples (SPEC §5.2)."""
    started = time.monotonic()
    ordered = sac_groups.sort_values(["group_id", "member_position"])
    ell = int(ordered["member_position"].max()) if len(ordered) else settings.ell
    groups = ordered["row_id"].to_numpy(np.int64).reshape(-1, ell)
    clusters = clusters_from_frame(sensitive_attribute_clusters)
    columns = ["row_id", *settings.quasi_identifiers, *settings.sensitive_attributes]
    permuted = permute_within_groups(
        raw_records[columns], groups, clusters, seed=settings.seed, secret=release_secret(settings, store)
    )
    context.add_output_metadata(
        {"n_rows": len(permuted), "n_groups": len(groups), **table_metadata(permuted, rows_in=len(sac_groups), started=started)}
    )
    return permuted


@dg.multi_asset(
    outs={
        "ir_id_table": dg.AssetOut(
            key_prefix=PRIVATE,
            kinds=KINDS,
            description="PRIVATE candidate: SIDs of IR_left per sensitive attribute (improved Rating, Algorithms 13 and 19).",
        ),
        "ir_attribute_sids": dg.AssetOut(
            key_prefix=PRIVATE,
            kinds=KINDS,
            description="PRIVATE candidate: each IR_left record's SID per sensitive attribute (NULL = suppressed cell).",
        ),
    },
    ins=inputs(private=["raw_records", "ir_left"]),
    group_name=RATING,
)
def ir_rating(
    context: dg.AssetExecutionContext,
    settings: ReleaseSettings,
    store: ReleaseStore,
    raw_records: pd.DataFrame,
    ir_left: pd.DataFrame,
):
    """Improved Rating on IR_left: dangerous buckets, Algorithm 13 reordering, residuals and suppression.

    Every attribute is bucketized in its own keyed content order and gets keyed random SID numbers (home secret)."""
    return sid_tables(context, settings, store, raw_records, ir_left, outputs=("ir_id_table", "ir_attribute_sids"))


def sid_tables(
    context: dg.AssetExecutionContext,
    settings: ReleaseSettings,
    store: ReleaseStore,
    raw_records: pd.DataFrame,
    rating_records: pd.DataFrame,
    *,
    outputs: tuple[str, str],
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Improved Rating (:func:`pipeline.core.rating.rating_tables`) on the records of ``rating_records`` (``row_id``
    in table order, ``stratum`` when stratified), with the metadata of both outputs (``outputs``: the ID-table and
    the SID outputs' names). Returns ``(id_table, attribute_sids)``."""
    started = time.monotonic()
    records = raw_records.set_index("row_id", drop=False).loc[rating_records["row_id"]].reset_index(drop=True)
    id_table, attribute_sids = rating_tables(
        records,
        settings.sensitive_attributes,
        ell=settings.ell_requirement(),
        secret=release_secret(settings, store),
        content_columns=[*settings.quasi_identifiers, *settings.sensitive_attributes],
        strata=rating_records["stratum"].to_numpy(np.int64) if "stratum" in rating_records.columns else None,
    )
    suppressed = {f"n_suppressed_cells_{a}": int(attribute_sids[a].isna().sum()) for a in settings.sensitive_attributes}
    context.add_output_metadata(
        {
            "n_sids": int(id_table.groupby("attribute", observed=True)["sid"].nunique().sum()) if len(id_table) else 0,
            "n_suppressed_cells": sum(suppressed.values()),
            **suppressed,
            **table_metadata(id_table, rows_in=len(rating_records), started=started),
        },
        output_name=outputs[0],
    )
    context.add_output_metadata(
        {"n_suppressed_cells": sum(suppressed.values()), **table_metadata(attribute_sids, rows_in=len(rating_records))},
        output_name=outputs[1],
    )
    return id_table, attribute_sids
