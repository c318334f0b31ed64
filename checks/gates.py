"""Release gates: blocking Dagster asset checks on the candidate release, each a GX suite on a
derived frame from ``pipeline.core.verification``. Any failure stops ``release`` in the same run.

``GATES`` are the ten gates of the mixed model (on ``candidate/release_candidate``), which plain Rating's job runs
on its own candidate (``candidate/rating_release_candidate``); ``KL_GATES`` the four of the (k, ℓ) model (on
``candidate/kl_release_candidate``), which stop ``kl_release`` the same way. The utility gate
(``utility_within_thresholds``, issue 15) is written twice, for the mixed/Rating tables and for the (k, ℓ) table
(``GATE_CHECKS_OF_CANDIDATE``). ``GATE_CHECKS`` holds them by name: each plug-in's ``gates``
(:mod:`pipeline.models`) name the checks of its job, and :func:`gates_of` gives the code location its list, each gate
attached to the candidate of every model that names it. A gate that does not apply to the run's model (its plug-in's
``not_applicable``) passes, reported as not applicable.

In a job, the gates of one candidate run in ONE step, ``<candidate>_gates`` (:func:`gate_step`; issue 18: fewer,
larger steps): it loads each table once and yields every gate's result under the gate's own check name."""

import inspect
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
import numpy as np
import pandas as pd

from pipeline.asset_keys import CANDIDATE, PRIVATE, inputs
from pipeline.io.tables import clusters_from_frame, hierarchies_from_frame, s_max_from_frame
from checks import suites
from checks.gx_runner import SuiteOutcome, validate_frame
from pipeline.core import verification
from pipeline.core import posterior as posterior_adversary
from pipeline.core.eligibility import suppressed_cell_certainty
from pipeline.core.order_attack import input_order_correlations, order_replay_attack
from pipeline.core.adversary import holders_disclosure, recover_rule_confidences
from pipeline.core.rules import strong_values
from pipeline.models import publication_model
from pipeline.models.base import adversary_asset
from pipeline.resources import ReleaseSettings, ReleaseStore
from checks.refusal import candidate_loss, refuse_for_data_loss
from pipeline.core.diagnosis import CandidateLoss
from pipeline.warehouse import read_warehouse_columns
from pipeline.run_events import step_progress


#: Every gate is attached to this asset; ``release`` depends on it, so one failure blocks it.
GATED = dg.AssetKey([CANDIDATE, "release_candidate"])
#: The (k, ℓ) gates are attached here; ``kl_release`` depends on it.
GATED_KL = dg.AssetKey([CANDIDATE, "kl_release_candidate"])


#: The plain function of every gate written with :func:`gate_check` (keyed by the check's id): :func:`gates_of` calls
#: them all from one step per candidate (issue 18: fewer, larger steps).
_GATE_FUNCTIONS: dict[int, Callable[..., object]] = {}


def gate_check(**check_arguments: object) -> Callable[[Callable[..., object]], dg.AssetChecksDefinition]:
    """``dg.asset_check(**check_arguments)`` that also records the function, so the gate runs as its own check
    (``GATES`` in tests) or beside the other gates of its candidate in one step (:func:`gates_of`); a gate written
    with a plain ``dg.asset_check`` keeps a step of its own."""

    def wrap(function: Callable[..., object]) -> dg.AssetChecksDefinition:
        check = dg.asset_check(**check_arguments)(function)  # type: ignore[call-overload]
        _GATE_FUNCTIONS[id(check)] = function
        return check

    return wrap


def _result(outcome: SuiteOutcome, figures: dict) -> dg.AssetCheckResult:
    """Check result with the observed figures, GX statistics and failed expectation types."""
    metadata = {key: value for key, value in figures.items()}
    metadata["gx_success_percent"] = float(outcome.statistics.get("success_percent") or 0.0)
    metadata["gx_evaluated_expectations"] = int(outcome.statistics.get("evaluated_expectations", 0))
    metadata["failed_expectations"] = ", ".join(outcome.failed_expectations) or "none"
    # per expectation: type, column, bounds, success, counts (never values of a table); rendered in report.html
    metadata["gx_expectations"] = dg.MetadataValue.json([dict(e) for e in outcome.expectations])
    return dg.AssetCheckResult(passed=outcome.success, metadata=metadata)


def _not_applicable(model: str, reason: str, figures: dict | None = None) -> dg.AssetCheckResult:
    """A gate that does not apply to the chosen publication model: reported, never blocking."""
    metadata = {"applicable": False, "model": model, "reason": reason}
    metadata.update(figures or {})
    return dg.AssetCheckResult(passed=True, metadata=metadata)


def _not_applicable_reason(settings: ReleaseSettings, gate: str) -> str | None:
    """Why ``gate`` does not apply to the run's model (its plug-in's ``not_applicable``), or None when it applies."""
    return publication_model(settings.model).not_applicable.get(gate)


def _original_sensitive(raw_records: pd.DataFrame, release_row_map: pd.DataFrame, sensitive_attributes) -> pd.DataFrame:
    merged = release_row_map.merge(
        raw_records[["row_id", *sensitive_attributes]], left_on="source_row_id", right_on="row_id", suffixes=("", "_raw")
    )
    return merged[["row_id", *sensitive_attributes]]


@gate_check(
    asset=GATED,
    blocking=True,
    compute_kind="great_expectations",
    additional_ins=inputs(private=["raw_records", "release_row_map"], candidate=["sac_released", "attribute_clusters"]),
    description="Gate 1: every SAC~ group has exactly ℓ rows and ℓ distinct values on every sensitive attribute; cluster tuples are a permutation of the original.",
)
def sac_released_is_l_diverse(
    settings: ReleaseSettings,
    sac_released: pd.DataFrame,
    raw_records: pd.DataFrame,
    release_row_map: pd.DataFrame,
    attribute_clusters: pd.DataFrame,
) -> dg.AssetCheckResult:
    reason = _not_applicable_reason(settings, "sac_released_is_l_diverse")
    if reason is not None:
        return _not_applicable(settings.model, reason)
    sensitive_attribute_columns = settings.sensitive_attributes
    summary = verification.group_diversity_summary(
        sac_released,
        _original_sensitive(raw_records, release_row_map, sensitive_attribute_columns),
        sensitive_attribute_columns,
        clusters_from_frame(attribute_clusters),
    )
    outcome = validate_frame(summary, suites.sac_diversity_suite(ell=settings.ell))
    return _result(
        outcome,
        {
            "ell_required": settings.ell,
            "n_groups": len(summary),
            "min_group_size": int(summary["n_rows"].min()) if len(summary) else 0,
            "max_group_size": int(summary["n_rows"].max()) if len(summary) else 0,
            "min_distinct_values_observed": int(summary["min_distinct_values"].min()) if len(summary) else 0,
            "n_groups_tuples_not_preserved": int((~summary["cluster_tuples_preserved"]).sum()),
        },
    )


@gate_check(
    asset=GATED,
    blocking=True,
    compute_kind="great_expectations",
    additional_ins=inputs(candidate=["attribute_table", "id_table"]),
    description="Gate 2: every SID of every attribute has at least ℓ distinct values (no value above 1/ℓ); suppressed cells are counted.",
)
def attribute_table_is_l_diverse(
    settings: ReleaseSettings, attribute_table: pd.DataFrame, id_table: pd.DataFrame
) -> dg.AssetCheckResult:
    sensitive_attribute_columns = settings.sensitive_attributes
    summary = verification.sid_diversity_summary(attribute_table, id_table, sensitive_attribute_columns)
    if not settings.ell_per_attribute:
        outcome = validate_frame(summary, suites.sid_diversity_suite(ell=settings.ell))
        return _result(
            outcome,
            {
                "ell_required": settings.ell,
                "n_sids": len(summary),
                "min_distinct_values_observed": int(summary["n_distinct_values"].min()) if len(summary) else 0,
                "n_suppressed_cells": int(attribute_table[sensitive_attribute_columns].isna().sum().sum()),
                "n_attribute_table_rows": len(attribute_table),
            },
        )
    # ℓ_i per attribute (SPEC §6.7): every SID of attribute i has >= ℓ_i distinct values, no value above 1/ℓ_i
    ells = settings.ell_by_attribute()
    summary = verification.sid_diversity_per_attribute(summary, ells)
    outcome = validate_frame(summary, suites.sid_diversity_per_attribute_suite(ell=min(ells.values())))
    per_attribute = verification.sid_diversity_by_attribute(summary, attribute_table, ells)
    return _result(
        outcome,
        {
            "ell_required": dg.MetadataValue.json(ells),
            "n_sids": len(summary),
            "min_distinct_values_observed": int(summary["n_distinct_values"].min()) if len(summary) else 0,
            "n_suppressed_cells": int(attribute_table[sensitive_attribute_columns].isna().sum().sum()),
            "n_attribute_table_rows": len(attribute_table),
            "per_attribute": dg.MetadataValue.json(per_attribute),
        },
    )


@gate_check(
    asset=GATED,
    blocking=True,
    compute_kind="great_expectations",
    additional_ins=inputs(private=["release_candidate_adversary", "strong_rules"]),
    description="Gate 3: the strong-rule adversary (SPEC §10) run on the candidate gives every record a disclosure "
    "probability ≤ 1/ℓ (with ℓ_i per attribute: 1/ℓ_j of the consequent's attribute of the record's most likely rule; "
    "its one pass over the candidate, `private/<candidate>_adversary`, also feeds the audit).",
)
def disclosure_within_bound(
    settings: ReleaseSettings, release_candidate_adversary: pd.DataFrame, strong_rules: pd.DataFrame
) -> dg.AssetCheckResult:
    per_attribute = settings.ell_by_attribute() if settings.ell_per_attribute else None
    summary = verification.disclosure_summary(
        holders_disclosure(release_candidate_adversary),
        ell=settings.ell,
        rules=strong_rules if per_attribute else None,
        ell_per_attribute=per_attribute,
    )
    outcome = validate_frame(summary, suites.disclosure_suite(ell=settings.ell))
    edges = np.linspace(0.0, 1.0, 11)
    histogram, _ = np.histogram(summary["probability"].to_numpy(), bins=edges)
    result = _result(
        outcome,
        {
            "bound": 1.0 / settings.ell,
            "max_disclosure_probability": float(summary["probability"].max()) if len(summary) else 0.0,
            "mean_disclosure_probability": float(summary["probability"].mean()) if len(summary) else 0.0,
            "n_records_with_strong_rules": len(summary),
            "n_records_above_bound": int((~summary["within_bound"]).sum()),
            "n_records_certain": int((summary["numerator"] == summary["denominator"]).sum()),
            "histogram_bins_0_to_1_step_0.1": dg.MetadataValue.json([int(x) for x in histogram]),
            "overridden_by_allow_disclosure": bool(not outcome.success and settings.allow_disclosure),
            **(
                {
                    "bound": 1.0 / min(per_attribute.values()),
                    "ell_per_attribute": dg.MetadataValue.json(per_attribute),
                    "bound_per_attribute": dg.MetadataValue.json({a: 1.0 / v for a, v in per_attribute.items()}),
                    "per_rule": dg.MetadataValue.json(verification.disclosure_by_rule(summary, strong_rules)),
                }
                if per_attribute
                else {}
            ),
        },
    )
    if not outcome.success and settings.allow_disclosure:
        # The user accepted the disclosure explicitly: the gate still fails (and says so in the
        # manifest) but with WARN severity, which does not block `release`.
        result = dg.AssetCheckResult(passed=False, severity=dg.AssetCheckSeverity.WARN, metadata=result.metadata)
    return result


@gate_check(
    asset=GATED,
    blocking=True,
    compute_kind="great_expectations",
    additional_ins=inputs(
        private=["strong_rules", "deleted_records"],
        candidate=["id_table", "sac_released", "attribute_table", "attribute_clusters"],
    ),
    description="Gate 4: every strong rule's confidence recovered from the released tables alone (Lemma 22) equals the raw one; "
    "with deleted records or suppressed cells, the largest deviation must stay within the tolerance. A refusal says "
    "what would be lost, which rules and dominant values cause it, and what would work (refusal.html).",
)
def rule_confidence_preserved(
    context: dg.AssetCheckExecutionContext,
    settings: ReleaseSettings,
    store: ReleaseStore,
    id_table: pd.DataFrame,
    strong_rules: pd.DataFrame,
    sac_released: pd.DataFrame,
    attribute_table: pd.DataFrame,
    attribute_clusters: pd.DataFrame,
    deleted_records: pd.DataFrame,
) -> Iterator[dg.AssetCheckResult]:
    sensitive_attribute_columns = settings.sensitive_attributes
    attribute_table = attribute_table.astype({a: "Int32" for a in sensitive_attribute_columns})
    recovered = recover_rule_confidences(
        strong_rules,
        sac_released=sac_released,
        attribute_table=attribute_table,
        id_table=id_table,
        attribute_clusters=attribute_clusters,
    )
    summary = verification.confidence_summary(recovered)
    n_suppressed = int(attribute_table[sensitive_attribute_columns].isna().sum().sum())
    exact = len(deleted_records) == 0 and n_suppressed == 0
    figures = {
        "n_strong_rules": len(summary),
        "n_rules_exact": int(summary["exact"].sum()),
        "max_confidence_deviation": float(summary["deviation"].max()) if len(summary) else 0.0,
        "tolerance": settings.confidence_tolerance,
        "exact_required": exact,
        "average_raw_confidence": float(summary["raw_confidence"].mean()) if len(summary) else 0.0,
        "average_released_confidence": float(summary["released_confidence"].mean()) if len(summary) else 0.0,
    }
    reason = _not_applicable_reason(settings, "rule_confidence_preserved")
    if reason is not None:
        yield _not_applicable(settings.model, reason, figures)
        return
    outcome = validate_frame(summary, suites.confidence_suite(exact=exact, tolerance=settings.confidence_tolerance))
    result = _result(outcome, figures)
    if result.passed:
        yield result
        return
    # refused for data loss: the check's description and refusal.html say why and what would work (issue 15); the
    # records' sensitive attributes are read from the warehouse only now, not in every run
    raw_records = read_warehouse_columns(
        Path(store.home) / "warehouse.duckdb", PRIVATE, "raw_records", sensitive_attribute_columns
    )
    yield from refuse_for_data_loss(
        context,
        result,
        gate="rule_confidence_preserved",
        settings=settings,
        store=store,
        raw_records=raw_records,
        strong_rules=strong_rules,
        loss=candidate_loss(
            raw_records,
            deleted_records,
            attribute_table,
            sensitive_attribute_columns,
            max_confidence_deviation=figures["max_confidence_deviation"],
        ),
    )


@gate_check(
    asset=GATED,
    blocking=True,
    compute_kind="great_expectations",
    additional_ins=inputs(
        private=["raw_records", "release_row_map", "deleted_records", "input_summary"],
        candidate=["attribute_table", "sac_released"],
    ),
    description="Gate 5: every input record is in exactly one of SAC~, the attribute table or the deleted list; counts add up.",
)
def records_accounted_for(
    attribute_table: pd.DataFrame,
    raw_records: pd.DataFrame,
    release_row_map: pd.DataFrame,
    deleted_records: pd.DataFrame,
    sac_released: pd.DataFrame,
    input_summary: pd.DataFrame,
) -> dg.AssetCheckResult:
    to_source = release_row_map.set_index("row_id")["source_row_id"]
    summary = verification.accounting_summary(
        raw_records["row_id"],
        sac_row_ids=to_source.reindex(sac_released["row_id"]).fillna(-1).astype("int64"),
        attribute_table_row_ids=to_source.reindex(attribute_table["row_id"]).fillna(-1).astype("int64"),
        deleted_row_ids=deleted_records["row_id"],
    )
    n_input = int(input_summary["n_input"].iloc[0])
    n_dropped = int(input_summary["n_dropped_missing"].iloc[0])
    totals_add_up = n_input - n_dropped == len(sac_released) + len(attribute_table) + len(deleted_records)
    outcome = validate_frame(summary, suites.accounting_suite())
    outcome = SuiteOutcome(
        success=outcome.success and totals_add_up,
        statistics=outcome.statistics,
        expectations=outcome.expectations + [{"type": "totals_add_up", "success": totals_add_up}],
    )
    return _result(
        outcome,
        {
            "n_input": n_input,
            "n_dropped_missing": n_dropped,
            "n_sac_released": len(sac_released),
            "n_attribute_table": len(attribute_table),
            "n_deleted": len(deleted_records),
            "n_records_not_exactly_once": int((summary["n_places"] != 1).sum()),
        },
    )


@gate_check(
    asset=GATED,
    blocking=True,
    compute_kind="great_expectations",
    additional_ins=inputs(private=["strong_rules", "strong_value_occurrences"], candidate=["id_table"]),
    description="Gate 6: no SID of an attribute other than S_max contains a strong value (no probability tilt in the attribute table).",
)
def no_probability_tilt(
    settings: ReleaseSettings, id_table: pd.DataFrame, strong_rules: pd.DataFrame, strong_value_occurrences: pd.DataFrame
) -> dg.AssetCheckResult:
    reason = _not_applicable_reason(settings, "no_probability_tilt")
    if reason is not None:
        return _not_applicable(settings.model, reason)
    s_max = s_max_from_frame(strong_value_occurrences)
    summary = verification.strong_values_in_sids(id_table, strong_values(strong_rules, settings.sensitive_attributes), s_max)
    outcome = validate_frame(summary, suites.no_probability_tilt_suite())
    return _result(
        outcome,
        {
            "n_sids_checked": len(summary),
            "n_sids_with_strong_values": int((summary["n_strong_values"] > 0).sum()),
        },
    )


def order_frame(
    settings: ReleaseSettings,
    raw_records: pd.DataFrame,
    release_row_map: pd.DataFrame,
    sac_released: pd.DataFrame,
    attribute_table: pd.DataFrame,
    id_table: pd.DataFrame,
) -> pd.DataFrame:
    """Gate 7's frame: ``kind`` (``spearman`` or ``order_replay``), ``name`` (table.column or
    attribute), ``observed`` (|ρ| or accuracy), ``limit``, ``chance`` (order replay only),
    ``within_limit`` (bool). Numbers and column names only."""
    row_map = release_row_map.assign(input_row_number=release_row_map["source_row_id"])
    sensitive = list(settings.sensitive_attributes)
    correlations = input_order_correlations(
        {"sac_released": sac_released, "attribute_table": attribute_table},
        row_map,
        {"sac_released": ["row_id", "group_id"], "attribute_table": ["row_id", *sensitive]},
    )
    truth = _original_sensitive(raw_records, release_row_map, sensitive)
    replay = order_replay_attack(attribute_table, id_table, sensitive, truth).per_attribute
    frames = [
        pd.DataFrame(
            {
                "kind": "spearman",
                "name": correlations["table"] + "." + correlations["column"],
                "observed": correlations["spearman"].abs(),
                "limit": correlations["limit"],
                "chance": np.nan,
                "within_limit": correlations["passed"].astype(bool),
            }
        ),
        pd.DataFrame(
            {
                "kind": "order_replay",
                "name": replay["attribute"],
                "observed": replay["accuracy"],
                "limit": replay["limit"],
                "chance": replay["chance"],
                "within_limit": replay["passed"].astype(bool),
            }
        ),
    ]
    # an empty part (no attribute table, e.g. every record in SAC~ or deleted) is left out of the concatenation
    # (pandas deprecates letting empty frames take part in the result's dtypes)
    present = [frame for frame in frames if len(frame)]
    return pd.concat(present, ignore_index=True) if present else frames[0].iloc[0:0]


@gate_check(
    asset=GATED,
    blocking=True,
    compute_kind="great_expectations",
    additional_ins=inputs(private=["raw_records", "release_row_map"], candidate=["sac_released", "attribute_table", "id_table"]),
    description="Gate 7: no published id or SID column carries the input order (|Spearman ρ| with the input position "
    "≤ max(0.05, 4/√(n−1))), and the order-replay adversary (replays Rating from the ID table, links a row's cells by "
    "position) guesses attribute-table cells no better than chance + 4σ.",
)
def release_carries_no_input_order(
    settings: ReleaseSettings,
    raw_records: pd.DataFrame,
    release_row_map: pd.DataFrame,
    sac_released: pd.DataFrame,
    attribute_table: pd.DataFrame,
    id_table: pd.DataFrame,
) -> dg.AssetCheckResult:
    frame = order_frame(settings, raw_records, release_row_map, sac_released, attribute_table, id_table)
    outcome = validate_frame(frame, suites.no_input_order_suite())
    spearman = frame[frame["kind"] == "spearman"]
    replay = frame[frame["kind"] == "order_replay"]
    figures = {
        "max_abs_spearman": float(spearman["observed"].max()) if len(spearman) else 0.0,
        "spearman_limit": float(spearman["limit"].min()) if len(spearman) else 1.0,
        "n_columns_checked": len(spearman),
        "n_columns_above_limit": int((~spearman["within_limit"]).sum()),
        "max_order_replay_excess": float((replay["observed"] - replay["chance"]).max()) if len(replay) else 0.0,
        "n_attributes_above_chance": int((~replay["within_limit"]).sum()),
    }
    for _, row in replay.iterrows():
        figures[f"order_replay_accuracy_{row['name']}"] = round(float(row["observed"]), 4)
        figures[f"order_replay_chance_{row['name']}"] = round(float(row["chance"]), 4)
    return _result(outcome, figures)


@gate_check(
    asset=GATED,
    blocking=True,
    compute_kind="great_expectations",
    additional_ins=inputs(candidate=["attribute_table", "id_table"]),
    description="Gate 8: no attribute-table cell is disclosed with probability above 1/ℓ by an adversary who knows how "
    "Rating places residuals (a suppressed cell holds a value that every SID of its attribute holds).",
)
def no_certain_attribute_table_cell(
    settings: ReleaseSettings, attribute_table: pd.DataFrame, id_table: pd.DataFrame
) -> dg.AssetCheckResult:
    summary = suppressed_cell_certainty(attribute_table, id_table, settings.sensitive_attributes, settings.ell_requirement())
    outcome = validate_frame(summary, suites.no_certain_cell_suite())
    above = summary[~summary["within_bound"]]
    at_rows = int(attribute_table[list(settings.sensitive_attributes)].isna().any(axis=1).sum()) if len(attribute_table) else 0
    return _result(
        outcome,
        {
            "n_suppressed_cells": int(summary["n_suppressed_cells"].sum()),
            "n_cells_above_bound": int(above["n_suppressed_cells"].sum()),
            "n_attribute_table_rows_with_a_suppressed_cell": at_rows,
            "max_cell_probability": float(summary["max_probability"].max()) if len(summary) else 0.0,
            "bound": 1.0 / settings.ell,
            # per-attribute ℓ: each attribute's cells are bounded by 1/ℓ_i, not 1/L (red team, session 38)
            **(
                {"bound_per_attribute": dg.MetadataValue.json({a: 1.0 / v for a, v in settings.ell_by_attribute().items()})}
                if settings.ell_per_attribute
                else {}
            ),
            "residual_policy": settings.residual_policy,
        },
    )


@gate_check(
    asset=GATED,
    blocking=True,
    compute_kind="great_expectations",
    additional_ins=inputs(
        private=["raw_records", "release_row_map"],
        candidate=["sac_released", "attribute_table", "id_table", "attribute_clusters"],
    ),
    description="Gate 9: the learned-model adversary (naive Bayes fitted by EM on the release, exact posterior "
    "inside every SAC~ group and small SID; Kifer 2009) gives no record's true sensitive value a posterior above "
    "max(1/ℓ, population posterior from the quasi-identifiers alone) + posterior_slack. With posterior_gate='warn' "
    "it fails with WARN severity and does not block.",
)
def posterior_within_bound(
    settings: ReleaseSettings,
    sac_released: pd.DataFrame,
    raw_records: pd.DataFrame,
    release_row_map: pd.DataFrame,
    attribute_table: pd.DataFrame,
    id_table: pd.DataFrame,
    attribute_clusters: pd.DataFrame,
) -> dg.AssetCheckResult:
    sensitive_attribute_columns = settings.sensitive_attributes
    result = posterior_adversary.release_posteriors(
        raw_records,
        release_row_map,
        settings.quasi_identifiers,
        sensitive_attribute_columns,
        ell=settings.ell,
        sac_released=sac_released,
        attribute_table=attribute_table.astype({a: "Int32" for a in sensitive_attribute_columns}),
        id_table=id_table,
        attribute_clusters=attribute_clusters,
        slack=settings.posterior_slack,
        ell_per_attribute=settings.ell_by_attribute() if settings.ell_per_attribute else None,
        progress=step_progress(dg.get_dagster_logger(), "EM rounds of the learned-model adversary"),
        # the in-memory jobs release in this one process: the two held-out folds use two cores when there are two
        threads=2 if (os.cpu_count() or 1) >= 2 else 1,
    )
    outcome = validate_frame(result.bound, suites.posterior_suite())
    figures = {key: value for key, value in result.summary.items()}
    if "ell_per_attribute" in figures:
        figures["ell_per_attribute"] = dg.MetadataValue.json(figures["ell_per_attribute"])
    figures["posterior_gate"] = settings.posterior_gate
    figures["histogram_bins_0_to_1_step_0.1"] = dg.MetadataValue.json([int(x) for x in result.histogram])
    checked = _result(outcome, figures)
    if not outcome.success and settings.posterior_gate == "warn":
        # reported as failed, but with WARN severity: does not block `release` (manifest: failed_overridden)
        checked = dg.AssetCheckResult(passed=False, severity=dg.AssetCheckSeverity.WARN, metadata=checked.metadata)
    return checked


def _utility_result(figures: dict) -> dg.AssetCheckResult:
    """The utility gate's result: its suite on :func:`pipeline.core.verification.utility_summary`, the figures of
    the manifest's ``utility`` as metadata (per-attribute figures as JSON)."""
    outcome = validate_frame(verification.utility_summary(figures), suites.utility_suite())
    metadata = {key: dg.MetadataValue.json(value) if isinstance(value, dict) else value for key, value in figures.items()}
    return _result(outcome, metadata)


def utility_result(
    settings: ReleaseSettings,
    input_summary: pd.DataFrame,
    deleted_records: pd.DataFrame,
    sac_released: pd.DataFrame,
    attribute_table: pd.DataFrame,
) -> dg.AssetCheckResult:
    """The utility gate's verdict on a mixed or Rating candidate (:func:`utility_within_thresholds` without the
    refusal): the shares of eligible records deleted and of each sensitive attribute's published cells suppressed,
    against ``max_deleted_share`` and ``max_suppressed_share``; metadata the manifest's ``utility`` figures."""
    suppressed, cells = verification.suppressed_cells_per_attribute(
        attribute_table, settings.sensitive_attributes, n_other_released=len(sac_released)
    )
    n_input = int(input_summary["n_input"].iloc[0])
    n_dropped = int(input_summary["n_dropped_missing"].iloc[0])
    return _utility_result(
        verification.utility_figures(
            records_eligible=n_input - n_dropped,
            records_deleted=len(deleted_records),
            suppressed_cells=suppressed,
            attribute_cells=cells,
            max_deleted_share=settings.max_deleted_share,
            max_suppressed_share=settings.max_suppressed_share,
        )
    )


@gate_check(
    asset=GATED,
    blocking=True,
    compute_kind="great_expectations",
    additional_ins=inputs(
        private=["input_summary", "deleted_records", "strong_rules"], candidate=["sac_released", "attribute_table"]
    ),
    description="Utility gate: the share of eligible records deleted (deleted / (read − dropped for a missing value)) "
    "is at most max_deleted_share, and for every sensitive attribute the share of its published cells that are "
    "suppressed is at most max_suppressed_share (both 0.10 by default; raising one is recorded as an override). A "
    "refusal says what would be lost, which rules and dominant values cause it, and what would work (refusal.html).",
)
def utility_within_thresholds(
    context: dg.AssetCheckExecutionContext,
    settings: ReleaseSettings,
    store: ReleaseStore,
    input_summary: pd.DataFrame,
    deleted_records: pd.DataFrame,
    strong_rules: pd.DataFrame,
    sac_released: pd.DataFrame,
    attribute_table: pd.DataFrame,
) -> Iterator[dg.AssetCheckResult]:
    result = utility_result(settings, input_summary, deleted_records, sac_released, attribute_table)
    if result.passed:
        yield result
        return
    # refused for data loss: the check's description and refusal.html say why and what would work (issue 15); the
    # records' sensitive attributes are read from the warehouse only now, not in every run
    raw_records = read_warehouse_columns(
        Path(store.home) / "warehouse.duckdb", PRIVATE, "raw_records", settings.sensitive_attributes
    )
    yield from refuse_for_data_loss(
        context,
        result,
        gate="utility_within_thresholds",
        settings=settings,
        store=store,
        raw_records=raw_records,
        strong_rules=strong_rules,
        loss=CandidateLoss(
            n_records=int(result.metadata["records_eligible"].value),
            n_deleted=len(deleted_records),
            suppressed_cells=dict(result.metadata["suppressed_cells"].value),
            attribute_cells=dict(result.metadata["attribute_cells"].value),
        ),
    )


GATES = [
    sac_released_is_l_diverse,
    attribute_table_is_l_diverse,
    disclosure_within_bound,
    rule_confidence_preserved,
    records_accounted_for,
    no_probability_tilt,
    release_carries_no_input_order,
    no_certain_attribute_table_cell,
    posterior_within_bound,
    utility_within_thresholds,
]


# --------------------------------------------------------------------------- (k, ℓ) model


@gate_check(
    asset=GATED_KL,
    blocking=True,
    compute_kind="great_expectations",
    additional_ins=inputs(private=["raw_records", "kl_release_row_map", "generalization_hierarchies"], candidate=["kl_released"]),
    description="(k, ℓ) gate 1: every equivalence class (cluster_id) has at least k rows and exactly one generalised "
    "quasi-identifier tuple, and every published label generalises the record's own value along its hierarchy.",
)
def kl_clusters_are_k_anonymous(
    settings: ReleaseSettings,
    kl_released: pd.DataFrame,
    raw_records: pd.DataFrame,
    kl_release_row_map: pd.DataFrame,
    generalization_hierarchies: pd.DataFrame,
) -> dg.AssetCheckResult:
    quasi_identifiers = settings.quasi_identifiers
    original = kl_release_row_map.merge(
        raw_records[["row_id", *quasi_identifiers]], left_on="source_row_id", right_on="row_id", suffixes=("", "_raw")
    )[["row_id", *quasi_identifiers]]
    summary = verification.kl_equivalence_class_summary(
        kl_released,
        quasi_identifiers,
        original_quasi_identifiers=original,
        hierarchies=hierarchies_from_frame(generalization_hierarchies),
    )
    outcome = validate_frame(summary, suites.kl_equivalence_class_suite(k=settings.k))
    sizes = summary["n_rows"]
    return _result(
        outcome,
        {
            "k_required": settings.k,
            "n_clusters": len(summary),
            "n_released_rows": len(kl_released),
            "min_cluster_size": int(sizes.min()) if len(summary) else 0,
            "max_cluster_size": int(sizes.max()) if len(summary) else 0,
            "average_cluster_size": float(sizes.mean()) if len(summary) else 0.0,
            "n_clusters_below_k": int((sizes < settings.k).sum()),
            "n_clusters_with_several_tuples": int((summary["n_quasi_identifier_tuples"] != 1).sum()),
            "n_clusters_not_truthful": int((~summary["generalization_truthful"]).sum()),
        },
    )


@gate_check(
    asset=GATED_KL,
    blocking=True,
    compute_kind="great_expectations",
    additional_ins=inputs(candidate=["kl_released"]),
    description="(k, ℓ) gate 2: every equivalence class has Diverse >= ℓ (ℓ pairwise totally different sensitive "
    "tuples), recomputed from the candidate table alone: a greedy certificate, exact search on small classes.",
)
def kl_clusters_are_l_diverse(settings: ReleaseSettings, kl_released: pd.DataFrame) -> dg.AssetCheckResult:
    summary = verification.kl_diversity_summary(kl_released, settings.sensitive_attributes, ell=settings.ell)
    outcome = validate_frame(summary, suites.kl_diversity_suite(ell=settings.ell))
    return _result(
        outcome,
        {
            "ell_required": settings.ell,
            "n_clusters": len(summary),
            "min_diverse_observed": int(summary["diverse_lower_bound"].min()) if len(summary) else 0,
            "min_distinct_values_observed": int(summary["min_distinct_values"].min()) if len(summary) else 0,
            "n_clusters_not_proven_diverse": int((~summary["diverse_at_least_ell"]).sum()),
        },
    )


@gate_check(
    asset=GATED_KL,
    blocking=True,
    compute_kind="great_expectations",
    additional_ins=inputs(
        private=["raw_records", "kl_release_row_map", "kl_suppressed_records", "input_summary"], candidate=["kl_released"]
    ),
    description="(k, ℓ) gate 3: every input record (after the missing-value policy) is released exactly once or "
    "reported suppressed, and n_input - n_dropped_missing = n_released + n_suppressed_records.",
)
def kl_records_accounted_for(
    kl_released: pd.DataFrame,
    raw_records: pd.DataFrame,
    kl_release_row_map: pd.DataFrame,
    kl_suppressed_records: pd.DataFrame,
    input_summary: pd.DataFrame,
) -> dg.AssetCheckResult:
    to_source = kl_release_row_map.drop_duplicates("row_id").set_index("row_id")["source_row_id"]
    summary = verification.kl_accounting_summary(
        raw_records["row_id"],
        released_row_ids=to_source.reindex(kl_released["row_id"]).fillna(-1).astype("int64"),
        suppressed_row_ids=kl_suppressed_records["row_id"],
    )
    n_input = int(input_summary["n_input"].iloc[0])
    n_dropped = int(input_summary["n_dropped_missing"].iloc[0])
    totals_add_up = n_input - n_dropped == len(kl_released) + len(kl_suppressed_records)
    outcome = validate_frame(summary, suites.kl_accounting_suite())
    outcome = SuiteOutcome(
        success=outcome.success and totals_add_up,
        statistics=outcome.statistics,
        expectations=outcome.expectations + [{"type": "totals_add_up", "success": totals_add_up}],
    )
    return _result(
        outcome,
        {
            "n_input": n_input,
            "n_dropped_missing": n_dropped,
            "n_released": len(kl_released),
            "n_suppressed_records": len(kl_suppressed_records),
            "n_records_not_exactly_once": int((summary["n_places"] != 1).sum()),
        },
    )


@gate_check(
    asset=GATED_KL,
    name="utility_within_thresholds",
    blocking=True,
    compute_kind="great_expectations",
    additional_ins=inputs(private=["input_summary", "kl_suppressed_records"], candidate=["kl_released"]),
    description="Utility gate of the (k, ℓ) model: the share of eligible records suppressed (not released; counted as "
    "deleted) is at most max_deleted_share; sensitive values are published unchanged, so no cell is suppressed.",
)
def kl_utility_within_thresholds(
    settings: ReleaseSettings, input_summary: pd.DataFrame, kl_suppressed_records: pd.DataFrame, kl_released: pd.DataFrame
) -> dg.AssetCheckResult:
    sensitive = list(settings.sensitive_attributes)
    n_input = int(input_summary["n_input"].iloc[0])
    n_dropped = int(input_summary["n_dropped_missing"].iloc[0])
    return _utility_result(
        verification.utility_figures(
            records_eligible=n_input - n_dropped,
            records_deleted=len(kl_suppressed_records),
            suppressed_cells={a: int(kl_released[a].isna().sum()) for a in sensitive},
            attribute_cells={a: len(kl_released) for a in sensitive},
            max_deleted_share=settings.max_deleted_share,
            max_suppressed_share=settings.max_suppressed_share,
        )
    )


KL_GATES = [
    kl_clusters_are_k_anonymous,
    kl_clusters_are_l_diverse,
    kl_records_accounted_for,
    kl_utility_within_thresholds,
]


#: Every gate check by name; a plug-in's ``gates`` name the checks its job runs (``register_gate`` adds a new one).
#: A gate written twice for differently shaped candidates (the utility gate: mixed/Rating tables, (k, ℓ) tables) is
#: here under the mixed model's version; the other versions are in ``GATE_CHECKS_OF_CANDIDATE``.
GATE_CHECKS: dict[str, dg.AssetChecksDefinition] = {
    next(iter(check.check_keys)).name: check for check in (*GATES, *KL_GATES) if check is not kl_utility_within_thresholds
}
#: (candidate asset, gate name) -> the version of a gate written for that candidate's tables (:func:`gates_of` uses
#: it before ``GATE_CHECKS``).
GATE_CHECKS_OF_CANDIDATE: dict[tuple[str, str], dg.AssetChecksDefinition] = {
    ("kl_release_candidate", "utility_within_thresholds"): kl_utility_within_thresholds,
}


def register_gate(check: dg.AssetChecksDefinition) -> dg.AssetChecksDefinition:
    """Add a gate check (attached to a plug-in's candidate asset) so that plug-ins can name it in ``gates``.

    Raises
    ------
    ValueError
        A gate of that name is already registered.
    """
    name = next(iter(check.check_keys)).name
    if name in GATE_CHECKS:
        raise ValueError(f"a gate named {name!r} is already registered")
    GATE_CHECKS[name] = check
    return check


#: Gates that still measure when they do not apply to a model (their figures are reported beside the reason); any
#: other gate returns before reading its tables when it does not apply.
MEASURED_WHEN_NOT_APPLICABLE = frozenset({"rule_confidence_preserved"})


def not_applicable_gate(model, name: str, reason: str) -> dg.AssetChecksDefinition:
    """Gate ``name`` on ``model``'s candidate as it reports for a model it does not apply to: passed, not applicable,
    with the reason; it reads no table (so a job need not produce the tables the gate would read)."""

    @dg.asset_check(
        asset=dg.AssetKey([CANDIDATE, model.candidate_asset]),
        name=name,
        blocking=True,
        description=f"Not applicable to model {model.name}: {reason}.",
    )
    def gate() -> dg.AssetCheckResult:
        return _not_applicable(model.name, reason)

    return gate


def _retargeted_keys(check: dg.AssetChecksDefinition, model) -> dict[dg.AssetKey, dg.AssetKey]:
    """The asset keys of ``check`` (written for the candidate and tables of the model that owns the asset it checks)
    replaced by those of ``model``: the candidate asset, the row map, the adversary and every table of
    ``model.table_assets``."""
    from pipeline.models import PUBLICATION_MODELS

    (checked,) = {key.asset_key for key in check.check_keys}
    home = next(m for m in PUBLICATION_MODELS.values() if checked == dg.AssetKey([CANDIDATE, m.candidate_asset]))
    renamed = {
        home.candidate_asset: model.candidate_asset,
        home.row_map_asset: model.row_map_asset,
        adversary_asset(home): adversary_asset(model),
        **model.table_assets,
    }
    return {
        key: dg.AssetKey([*key.path[:-1], renamed[key.path[-1]]])
        for key in {checked, *check.node_keys_by_input_name.values()}
        if key.path[-1] in renamed
    }


def retargeted_gate(check: dg.AssetChecksDefinition, model) -> dg.AssetChecksDefinition:
    """``check`` (written for the candidate and tables of the model that owns the asset it checks) attached to
    ``model``'s candidate and reading ``model``'s tables: the same gate function, its asset keys replaced (the
    candidate asset, the row map and every table of ``model.table_assets``). Its step keeps its name."""
    return check.with_attributes(asset_key_replacements=_retargeted_keys(check, model))


@dataclass(frozen=True)
class PlannedGate:
    """One gate of a candidate's gate step: its check ``name`` and ``description``; ``inputs`` (input name -> asset
    key, already re-targeted at the model's own tables) and ``function`` (the gate's plain function), or, for a gate
    that does not apply and measures nothing then, ``inputs`` empty, ``function`` None and the ``reason``."""

    name: str
    description: str
    inputs: dict[str, dg.AssetKey]
    function: Callable[..., object] | None
    reason: str | None = None


def _as_results(returned: object) -> Iterator[dg.AssetCheckResult]:
    """A gate's result, or the results its generator yields one by one (a refusal yields its result, then raises)."""
    if isinstance(returned, dg.AssetCheckResult):
        yield returned
    else:
        yield from returned  # type: ignore[misc]


def evaluate_planned_gates(
    plan: list[PlannedGate],
    *,
    candidate: dg.AssetKey,
    model: str,
    context: dg.AssetCheckExecutionContext | None,
    settings: ReleaseSettings | None,
    store: ReleaseStore | None,
    tables: dict[str, pd.DataFrame],
) -> Iterator[dg.AssetCheckResult]:
    """Evaluate every gate of ``plan`` in order on the loaded ``tables`` (input name -> frame, each read once),
    yielding each gate's result under its own check name on ``candidate``. A gate that raises (a refusal for data
    loss raises ``dagster.Failure`` after its result) does not stop the others: the first error is raised after
    every gate has reported, so the step fails as that gate's own step did."""
    first_error: BaseException | None = None
    for gate in plan:
        if gate.function is None:
            results = [_not_applicable(model, gate.reason or "")]
        else:
            available = {"context": context, "settings": settings, "store": store}
            arguments = {
                parameter: available[parameter] if parameter in available else tables[parameter]
                for parameter in inspect.signature(gate.function).parameters
            }
            results = []
            try:
                for result in _as_results(gate.function(**arguments)):
                    results.append(result)
            except Exception as error:  # reported after the other gates have run
                first_error = first_error or error
        for result in results:
            yield dg.AssetCheckResult(
                asset_key=candidate,
                check_name=gate.name,
                passed=result.passed,
                severity=result.severity,
                metadata=result.metadata,
                description=result.description,
            )
    if first_error is not None:
        raise first_error


def gate_step(model, plan: list[PlannedGate]) -> dg.AssetChecksDefinition:
    """Every gate of ``plan`` as a blocking check on ``model``'s candidate, evaluated in ONE step
    (``<candidate>_gates``) that loads each input table once (issue 18: fewer, larger steps; as
    :func:`checks.sharded_gates.build_sharded_gates`). Each gate is still its own check by name in the UI, the run's
    events and the manifest; any failed gate of ERROR severity stops the publish step, as separate blocking checks
    did (WARN severity, ``allow_disclosure`` or ``posterior_gate: warn``, does not).

    Raises
    ------
    ValueError
        Two gates read different assets under the same input name.
    """
    candidate = dg.AssetKey([CANDIDATE, model.candidate_asset])
    inputs_by_name: dict[str, dg.AssetKey] = {}
    for gate in plan:
        for name, key in gate.inputs.items():
            if inputs_by_name.setdefault(name, key) != key:
                raise ValueError(f"gates of {model.candidate_asset} read input {name!r} from two assets")

    @dg.multi_asset_check(
        name=f"{model.candidate_asset}_gates",
        specs=[
            dg.AssetCheckSpec(
                gate.name,
                asset=candidate,
                blocking=True,
                description=gate.description,
                additional_deps=list(dict.fromkeys(gate.inputs.values())),
            )
            for gate in plan
        ],
        compute_kind="great_expectations",
        ins={name: dg.AssetIn(key=key) for name, key in inputs_by_name.items()},
    )
    def gates(
        context: dg.AssetCheckExecutionContext, settings: ReleaseSettings, store: ReleaseStore, **tables: pd.DataFrame
    ) -> Iterator[dg.AssetCheckResult]:
        yield from evaluate_planned_gates(
            plan, candidate=candidate, model=model.name, context=context, settings=settings, store=store, tables=tables
        )

    return gates


def gate_plan(model) -> tuple[list[PlannedGate], list[dg.AssetChecksDefinition]]:
    """The gates ``model`` names on its own candidate: those written here as :class:`PlannedGate` (in the order of
    ``model.gates``; :func:`gate_step` runs them in one step), and the gates registered as asset checks of their own
    (:func:`register_gate`; each keeps its own step, re-targeted with :func:`retargeted_gate` or reported by
    :func:`not_applicable_gate`). A gate written for another model's candidate reads ``model``'s tables; one that does
    not apply to ``model`` and measures nothing then (not in :data:`MEASURED_WHEN_NOT_APPLICABLE`) reads no table.

    Raises
    ------
    KeyError
        ``model`` names a gate that is not registered.
    """
    candidate = dg.AssetKey([CANDIDATE, model.candidate_asset])
    plan: list[PlannedGate] = []
    own_steps: list[dg.AssetChecksDefinition] = []
    for name in dict.fromkeys(model.gates):
        check = GATE_CHECKS_OF_CANDIDATE.get((model.candidate_asset, name), GATE_CHECKS[name])
        (checked,) = {key.asset_key for key in check.check_keys}
        own = checked == candidate
        not_applicable = not own and name in model.not_applicable and name not in MEASURED_WHEN_NOT_APPLICABLE
        function = _GATE_FUNCTIONS.get(id(check))
        if function is None:  # a registered check of its own: its own step
            if own:
                own_steps.append(check)
            elif not_applicable:
                own_steps.append(not_applicable_gate(model, name, model.not_applicable[name]))
            else:
                own_steps.append(retargeted_gate(check, model))
        elif not_applicable:
            reason = model.not_applicable[name]
            plan.append(PlannedGate(name, f"Not applicable to model {model.name}: {reason}.", {}, None, reason))
        else:
            replacements = {} if own else _retargeted_keys(check, model)
            (spec,) = check.check_specs
            reads = {
                input_name: replacements.get(key, key)
                for input_name, key in check.node_keys_by_input_name.items()
                if key != checked
            }
            plan.append(PlannedGate(name, spec.description or "", reads, function))
    return plan, own_steps


def gates_of(models) -> list[dg.AssetChecksDefinition]:
    """The gate checks the given plug-ins name, each attached to the candidate of every plug-in that names it
    (:func:`gate_plan`): the gates written here in one step per candidate (:func:`gate_step`), a gate registered as
    its own asset check (:func:`register_gate`) in its own step.

    Raises
    ------
    KeyError
        A plug-in names a gate that is not registered.
    """
    names = list(dict.fromkeys(name for model in models for name in model.gates))
    missing = [name for name in names if name not in GATE_CHECKS]
    if missing:
        raise KeyError(f"gate(s) {missing} named by a publication model are not registered (checks.gates.register_gate)")
    checks: list[dg.AssetChecksDefinition] = []
    candidates: set[str] = set()
    for model in models:
        if model.candidate_asset in candidates:
            continue
        candidates.add(model.candidate_asset)
        plan, own_steps = gate_plan(model)
        if plan:
            checks.append(gate_step(model, plan))
        checks.extend(own_steps)
    return checks
