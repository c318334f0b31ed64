"""Test helpers of the sharded release: the pure loop over shards, and the gates of ``checks/gates.py`` evaluated on a
whole (united) release with the same pure functions the gates call, figure for figure (no Dagster, no GX: the
suites' conditions written out)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd
import pytest

from pipeline.core import sharding, verification
from pipeline.core.adversary import candidate_adversary, holders_disclosure, recover_rule_confidences, rule_holders
from pipeline.core.eligibility import suppressed_cell_certainty
from pipeline.core.keyed import keyed_order
from pipeline.core.order_attack import input_order_correlations, order_replay_attack
from pipeline.core.posterior import release_posteriors
from pipeline.core.rating import rating_tables
from pipeline.core.rules import strong_values
from pipeline.core.sensitivity import ell_by_attribute, group_size

SECRET = bytes(range(40, 72))


def sharded_release(
    records: pd.DataFrame,
    parameters: sharding.ShardParameters,
    *,
    n_shards: int,
    salt: int,
    min_confidence: float,
    min_support: int,
    secret: bytes | None = SECRET,
) -> tuple[sharding.GlobalModel, list[sharding.ShardRelease], dict[str, pd.DataFrame]]:
    """The pure loop: global model from the tuple counts, every shard released, the union."""
    attributes = list(parameters.sensitive_attributes)
    counts = records.groupby(attributes, observed=True).size().reset_index(name="n_records")
    model = sharding.global_model_from_tuple_counts(counts, attributes, min_confidence=min_confidence, min_support=min_support)
    shard = sharding.shard_of(records["row_id"].to_numpy(np.int64), salt=salt, n_shards=n_shards)
    releases = [
        sharding.release_shard(
            records[shard == s].reset_index(drop=True), model, parameters, secret=secret, shard=s, n_shards=n_shards
        )
        for s in range(n_shards)
    ]
    return model, releases, sharding.union_releases(releases, model.clusters)


def rating_in_one_shared_order(
    records: pd.DataFrame,
    sensitive_attributes: Any,
    *,
    secret: bytes | None = None,
    content_columns: Any = None,
    strata: np.ndarray | None = None,
    **options: Any,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """A deliberately LEAKY Rating: SPEC's reference Rating (first in, first out; SIDs numbered in creation order) on
    one keyed order of the records shared by every attribute, instead of an independent keyed order and keyed random
    SID numbers per attribute. Same arguments and result as :func:`pipeline.core.rating.rating_tables`."""
    assert secret is not None
    order = keyed_order(records, list(content_columns or sensitive_attributes), secret, "leaky-shared-order")
    id_table, attribute_sids = rating_tables(
        records.iloc[order].reset_index(drop=True),
        sensitive_attributes,
        secret=None,
        content_columns=content_columns,
        strata=None if strata is None else np.asarray(strata)[order],
        **options,
    )
    back = np.empty(len(order), dtype=np.int64)
    back[order] = np.arange(len(order))
    return id_table, attribute_sids.iloc[back].reset_index(drop=True)  # rows in the order of ``records``, as promised


def whole_release_gates(
    union: Mapping[str, pd.DataFrame],
    records: pd.DataFrame,
    model: sharding.GlobalModel,
    parameters: sharding.ShardParameters,
    *,
    include_per_shard_gates: bool = False,
) -> dict[str, dict[str, Any]]:
    """The figures of ``checks/gates.py`` (gates 1-6, 8 and the utility gate; with ``include_per_shard_gates`` gates 7
    and 9, whose sharded figures are per shard and so equal these for one shard only) on a whole release, with
    ``passed``."""
    sensitive = list(parameters.sensitive_attributes)
    ell = group_size(parameters.ell)
    per_attribute = ell_by_attribute(parameters.ell, sensitive) if isinstance(parameters.ell, Mapping) else None
    sac, id_table, clusters = union["sac_released"], union["id_table"], union["attribute_clusters"]
    attribute_table = union["attribute_table"].astype({a: "Int32" for a in sensitive})
    row_map, deleted, rules = union["row_map"], union["deleted"], model.rules
    original = row_map.merge(records[["row_id", *sensitive]], left_on="source_row_id", right_on="row_id", suffixes=("", "_raw"))[
        ["row_id", *sensitive]
    ]
    gates: dict[str, dict[str, Any]] = {}

    summary = verification.group_diversity_summary(sac, original, sensitive, model.clusters)
    gates["sac_released_is_l_diverse"] = {
        "ell_required": ell,
        "n_groups": len(summary),
        "min_group_size": int(summary["n_rows"].min()) if len(summary) else 0,
        "max_group_size": int(summary["n_rows"].max()) if len(summary) else 0,
        "min_distinct_values_observed": int(summary["min_distinct_values"].min()) if len(summary) else 0,
        "n_groups_tuples_not_preserved": int((~summary["cluster_tuples_preserved"]).sum()),
        "passed": bool(
            ((summary["n_rows"] == ell) & (summary["min_distinct_values"] == ell) & summary["cluster_tuples_preserved"]).all()
        ),
    }

    summary = verification.sid_diversity_summary(attribute_table, id_table, sensitive)
    figures: dict[str, Any] = {
        "ell_required": dict(per_attribute) if per_attribute else ell,
        "n_sids": len(summary),
        "min_distinct_values_observed": int(summary["n_distinct_values"].min()) if len(summary) else 0,
        "n_suppressed_cells": int(attribute_table[sensitive].isna().sum().sum()),
        "n_attribute_table_rows": len(attribute_table),
    }
    if per_attribute:
        summary = verification.sid_diversity_per_attribute(summary, per_attribute)
        figures["per_attribute"] = verification.sid_diversity_by_attribute(summary, attribute_table, per_attribute)
        ok = (summary["n_distinct_values"] >= min(per_attribute.values())) & summary["meets_ell_required"]
    else:
        ok = (summary["n_distinct_values"] >= ell) & (summary["max_value_share"] <= 1.0 / ell + 1e-12)
    figures["passed"] = bool((ok & summary["records_match_occurrences"]).all())
    gates["attribute_table_is_l_diverse"] = figures

    holders = rule_holders(records[["row_id", *sensitive]], rules, row_map=row_map)
    adversary = candidate_adversary(
        rules,
        holders,
        sac_released=sac,
        attribute_table=attribute_table,
        id_table=id_table,
        attribute_clusters=clusters,
        ell_per_attribute=per_attribute,
    )
    summary = verification.disclosure_summary(
        holders_disclosure(adversary), ell=ell, rules=rules if per_attribute else None, ell_per_attribute=per_attribute
    )
    histogram, _ = np.histogram(summary["probability"].to_numpy(), bins=np.linspace(0.0, 1.0, 11))
    figures = {
        "bound": 1.0 / ell,
        "max_disclosure_probability": float(summary["probability"].max()) if len(summary) else 0.0,
        "mean_disclosure_probability": float(summary["probability"].mean()) if len(summary) else 0.0,
        "n_records_with_strong_rules": len(summary),
        "n_records_above_bound": int((~summary["within_bound"]).sum()),
        "n_records_certain": int((summary["numerator"] == summary["denominator"]).sum()),
        "histogram_bins_0_to_1_step_0.1": [int(x) for x in histogram],
        "passed": bool(summary["within_bound"].all()),
    }
    if per_attribute:
        figures.update(
            {
                "bound": 1.0 / min(per_attribute.values()),
                "ell_per_attribute": dict(per_attribute),
                "bound_per_attribute": {a: 1.0 / v for a, v in per_attribute.items()},
                "per_rule": verification.disclosure_by_rule(summary, rules),
            }
        )
    gates["disclosure_within_bound"] = figures

    recovered = recover_rule_confidences(
        rules, sac_released=sac, attribute_table=attribute_table, id_table=id_table, attribute_clusters=clusters
    )
    summary = verification.confidence_summary(recovered)
    n_suppressed = int(attribute_table[sensitive].isna().sum().sum())
    exact = len(deleted) == 0 and n_suppressed == 0
    gates["rule_confidence_preserved"] = {
        "n_strong_rules": len(summary),
        "n_rules_exact": int(summary["exact"].sum()),
        "max_confidence_deviation": float(summary["deviation"].max()) if len(summary) else 0.0,
        "tolerance": parameters.confidence_tolerance,
        "exact_required": exact,
        "average_raw_confidence": float(summary["raw_confidence"].mean()) if len(summary) else 0.0,
        "average_released_confidence": float(summary["released_confidence"].mean()) if len(summary) else 0.0,
        "passed": bool((summary["deviation"] <= parameters.confidence_tolerance).all() and (not exact or summary["exact"].all())),
    }

    to_source = row_map.set_index("row_id")["source_row_id"]
    summary = verification.accounting_summary(
        records["row_id"],
        sac_row_ids=to_source.reindex(sac["row_id"]).fillna(-1).astype("int64"),
        attribute_table_row_ids=to_source.reindex(attribute_table["row_id"]).fillna(-1).astype("int64"),
        deleted_row_ids=deleted["row_id"],
    )
    totals_add_up = len(records) == len(sac) + len(attribute_table) + len(deleted)
    gates["records_accounted_for"] = {
        "n_input": len(records),
        "n_dropped_missing": 0,
        "n_sac_released": len(sac),
        "n_attribute_table": len(attribute_table),
        "n_deleted": len(deleted),
        "n_records_not_exactly_once": int((summary["n_places"] != 1).sum()),
        "passed": bool((summary["n_places"] == 1).all() and totals_add_up),
    }

    summary = verification.strong_values_in_sids(id_table, strong_values(rules, sensitive), model.s_max)
    gates["no_probability_tilt"] = {
        "n_sids_checked": len(summary),
        "n_sids_with_strong_values": int((summary["n_strong_values"] > 0).sum()),
        "passed": bool((summary["n_strong_values"] == 0).all()),
    }

    summary = suppressed_cell_certainty(attribute_table, id_table, sensitive, parameters.ell)
    above = summary[~summary["within_bound"]]
    gates["no_certain_attribute_table_cell"] = {
        "n_suppressed_cells": int(summary["n_suppressed_cells"].sum()),
        "n_cells_above_bound": int(above["n_suppressed_cells"].sum()),
        "n_attribute_table_rows_with_a_suppressed_cell": int(attribute_table[sensitive].isna().any(axis=1).sum())
        if len(attribute_table)
        else 0,
        "max_cell_probability": float(summary["max_probability"].max()) if len(summary) else 0.0,
        "bound": 1.0 / ell,
        "residual_policy": parameters.residual_policy,
        "passed": bool(summary["within_bound"].all()),
    }

    suppressed, cells = verification.suppressed_cells_per_attribute(attribute_table, sensitive, n_other_released=len(sac))
    figures = verification.utility_figures(
        records_eligible=len(records),
        records_deleted=len(deleted),
        suppressed_cells=suppressed,
        attribute_cells=cells,
        max_deleted_share=parameters.max_deleted_share,
        max_suppressed_share=parameters.max_suppressed_share,
    )
    frame = verification.utility_summary(figures)
    gates["utility_within_thresholds"] = {**figures, "passed": bool(frame["within_limit"].all())}
    if include_per_shard_gates:
        gates["release_carries_no_input_order"] = order_gate(sac, attribute_table, id_table, row_map, original, sensitive)
        result = release_posteriors(
            records,
            row_map,
            list(parameters.quasi_identifiers),
            sensitive,
            ell=ell,
            sac_released=sac,
            attribute_table=attribute_table,
            id_table=id_table,
            attribute_clusters=clusters,
            slack=parameters.posterior_slack,
            ell_per_attribute=per_attribute,
        )
        gates["posterior_within_bound"] = {
            **result.summary,
            "histogram_bins_0_to_1_step_0.1": [int(x) for x in result.histogram],
            "passed": bool((result.bound["n_cells_above_bound"] == 0).all()),
        }
    return gates


def order_gate(
    sac: pd.DataFrame,
    attribute_table: pd.DataFrame,
    id_table: pd.DataFrame,
    row_map: pd.DataFrame,
    original: pd.DataFrame,
    sensitive: list[str],
) -> dict[str, Any]:
    """Gate 7's figures as ``checks/gates.py`` (``order_frame`` and ``release_carries_no_input_order``) makes them."""
    correlations = input_order_correlations(
        {"sac_released": sac, "attribute_table": attribute_table},
        row_map.assign(input_row_number=row_map["source_row_id"]),
        {"sac_released": ["row_id", "group_id"], "attribute_table": ["row_id", *sensitive]},
    )
    replay = order_replay_attack(attribute_table, id_table, sensitive, original).per_attribute
    figures: dict[str, Any] = {
        "max_abs_spearman": float(correlations["spearman"].abs().max()) if len(correlations) else 0.0,
        "spearman_limit": float(correlations["limit"].min()) if len(correlations) else 1.0,
        "n_columns_checked": len(correlations),
        "n_columns_above_limit": int((~correlations["passed"].astype(bool)).sum()),
        "max_order_replay_excess": float((replay["accuracy"] - replay["chance"]).max()) if len(replay) else 0.0,
        "n_attributes_above_chance": int((~replay["passed"].astype(bool)).sum()),
    }
    for _, row in replay.iterrows():
        figures[f"order_replay_accuracy_{row['attribute']}"] = round(float(row["accuracy"]), 4)
        figures[f"order_replay_chance_{row['attribute']}"] = round(float(row["chance"]), 4)
    figures["passed"] = figures["n_columns_above_limit"] == 0 and figures["n_attributes_above_chance"] == 0
    return figures


#: Figures that are float sums or means: the reduce divides once, the whole evaluation averages a column.
APPROXIMATE = {"mean_disclosure_probability", "max_confidence_deviation", "average_released_confidence"}


def assert_reduce_equals_whole(reduced: Mapping[str, Mapping[str, Any]], whole: Mapping[str, Mapping[str, Any]]) -> None:
    """Every figure of the whole evaluation equals the reduced one (floats of sums to 1e-9 relative)."""
    for gate, figures in whole.items():
        for key, value in figures.items():
            assert key in reduced[gate], (gate, key)
            if key in APPROXIMATE:
                assert reduced[gate][key] == pytest.approx(value, rel=1e-9, abs=1e-12, nan_ok=True), (gate, key)
            else:
                assert reduced[gate][key] == value, (gate, key, reduced[gate][key], value)
