"""The planning advisor: run the model's own algorithm on the input for several settings and predict, without Dagster,
the warehouse, Great Expectations or publishing, what ``msa-release run`` would delete, suppress and refuse.

For every min_confidence the strong rules are mined once (support ≥ max(ℓ, 5) unless ``min_support`` is set: one
mining per distinct (min_confidence, min_support), reused across ℓ). For every ℓ the mixed model's stages are the
calls the release job's assets make (``assets/mixed_model.py``: Algorithm 7's split, Algorithm 10's clusters, the keyed
table order, Algorithm 11's grouping, the eligibility deletions and quasi-identifier strata, the keyed SAC~
permutation, improved Rating), with the same home secret, then the plug-in's ``build`` (``pipeline/models``) gives the
candidate tables whose deleted records, suppressed cells, recovered rule confidences and rule holders' disclosure the
gates would judge; plain Rating's (``assets/rating_model.py``) likewise. The decisions are
:mod:`pipeline.core.plan`'s. The (k, ℓ) model is only checked as the run's preflight checks it (ℓ feasible,
hierarchies covering the data): its search is the run itself, so its deletions and gates are not predicted.

No Dagster here (``tests/test_architecture.py``).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pipeline.errors import UnusableInputError
from pipeline.settings import default_min_support

from pipeline.core.plan import (
    DEFAULT_MAX_DELETED_SHARE,
    DEFAULT_MAX_SUPPRESSED_SHARE,
    Plan,
    PlanRow,
    confidence_gate_passes,
    gate_predictions,
    profile_table,
    recommend,
)

__all__ = ["DEFAULT_ELL_VALUES", "DEFAULT_MIN_CONFIDENCE_VALUES", "mixed_stage_tables", "rating_stage_tables", "release_plan"]

#: The settings a plan predicts unless told otherwise (the configured ones are always added).
DEFAULT_ELL_VALUES = (2, 3, 4)
DEFAULT_MIN_CONFIDENCE_VALUES = (0.7, 0.8, 0.9)


def _records_for_rating(
    records: pd.DataFrame, row_ids: np.ndarray, parameters: Any, secret: bytes | None
) -> tuple[pd.DataFrame, np.ndarray]:
    """As ``assets.mixed_model.rating_records_of``: the records Rating bucketizes and those deleted for eligibility."""
    from pipeline.core.hierarchies import load_available_hierarchies
    from pipeline.core.mixed_model import records_for_rating

    stratified = parameters.grouping == "qi_aware" and parameters.residual_policy == "delete"
    rating_records, deleted, _ = records_for_rating(
        records,
        row_ids,
        list(parameters.quasi_identifiers),
        list(parameters.sensitive_attributes),
        ell=parameters.ell,
        residual_policy=parameters.residual_policy,
        grouping=parameters.grouping,
        hierarchies=(
            (
                load_available_hierarchies(parameters.hierarchies_path, parameters.quasi_identifiers)
                if parameters.hierarchies_path is not None
                else {}  # no hierarchies (a table other than Adult's file): quasi-identifiers generalize to '*'
            )
            if stratified
            else None
        ),
        secret=secret,
        stratum_deletion_budget=parameters.stratum_deletion_budget,
    )
    return rating_records, np.asarray(deleted, dtype=np.int64)


def _sids(
    records: pd.DataFrame, rating_records: pd.DataFrame, parameters: Any, secret: bytes | None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """As ``assets.mixed_model.sid_tables``: improved Rating's ID table and SIDs of ``rating_records``."""
    from pipeline.core.rating import rating_tables

    chosen = records.set_index("row_id", drop=False).loc[rating_records["row_id"]].reset_index(drop=True)
    return rating_tables(
        chosen,
        list(parameters.sensitive_attributes),
        ell=parameters.ell,
        secret=secret,
        content_columns=[*parameters.quasi_identifiers, *parameters.sensitive_attributes],
        strata=rating_records["stratum"].to_numpy(np.int64) if "stratum" in rating_records.columns else None,
    )


def mixed_stage_tables(
    records: pd.DataFrame, rules: pd.DataFrame, parameters: Any, *, secret: bytes | None
) -> tuple[dict[str, pd.DataFrame], pd.DataFrame]:
    """The mixed model's stage tables, as the ``release`` job's assets compute them (``assets/mixed_model.py``).

    Parameters
    ----------
    records
        The input after the missing-value policy (``row_id`` and the configured columns, as
        :func:`pipeline.io.loading.load_records` returns them).
    rules
        The strong rules mined on ``records`` with ``parameters``' min_confidence and min_support.
    parameters
        :class:`pipeline.models.mixed.MixedParameters`.
    secret
        The home secret, or None with ``randomness: spec-reference``.

    Returns
    -------
    (inputs, deleted)
        ``inputs``: the tables of :attr:`pipeline.models.mixed.MixedModel.candidate_inputs` (``raw_records``,
        ``sac_permuted``, ``ir_attribute_sids``, ``ir_id_table``, ``sensitive_attribute_clusters``, ``ir_left``).
        ``deleted``: ``row_id`` (int64) and ``reason`` (``no_partners`` / ``eligibility``) of the deleted records.
    """
    from pipeline.core.grouping import group_sac, permute_within_groups
    from pipeline.core.mixed_model import in_table_order
    from pipeline.core.sac_split import cluster_sensitive_attributes, split_sac_ir
    from pipeline.io.tables import clusters_from_frame

    quasi_identifiers, sensitive = list(parameters.quasi_identifiers), list(parameters.sensitive_attributes)
    split = split_sac_ir(records, sensitive, rules)
    clusters_frame = pd.DataFrame(
        [(k + 1, a) for k, cluster in enumerate(cluster_sensitive_attributes(sensitive, rules)) for a in cluster],
        columns=["cluster_id", "attribute"],
    ).astype({"cluster_id": "int32"})
    sac_ids, ir_ids = in_table_order(
        records, [np.sort(split.sac_row_ids), np.sort(split.ir_row_ids)], [*quasi_identifiers, *sensitive], secret
    )
    grouping = group_sac(
        records,
        sensitive,
        sac_ids,
        ir_ids,
        ell=parameters.ell,
        quasi_identifiers=quasi_identifiers if parameters.grouping == "qi_aware" else None,
    )
    ir_left, eligibility = _records_for_rating(records, np.asarray(grouping.ir_left, dtype=np.int64), parameters, secret)
    sac_permuted = permute_within_groups(
        records[["row_id", *quasi_identifiers, *sensitive]],
        grouping.members.reshape(-1, parameters.ell),
        clusters_from_frame(clusters_frame),
        seed=parameters.seed,
        secret=secret,
    )
    id_table, attribute_sids = _sids(records, ir_left, parameters, secret)
    deleted = pd.DataFrame(
        {
            "row_id": np.concatenate([np.asarray(grouping.deleted, dtype=np.int64), eligibility]),
            "reason": ["no_partners"] * len(grouping.deleted) + ["eligibility"] * len(eligibility),
        }
    )
    inputs = {
        "raw_records": records,
        "sac_permuted": sac_permuted,
        "ir_attribute_sids": attribute_sids,
        "ir_id_table": id_table,
        "sensitive_attribute_clusters": clusters_frame,
        "ir_left": ir_left,
    }
    return inputs, deleted


def rating_stage_tables(
    records: pd.DataFrame, parameters: Any, *, secret: bytes | None
) -> tuple[dict[str, pd.DataFrame], pd.DataFrame]:
    """Plain Rating's stage tables, as the ``rating_release`` job's assets compute them (``assets/rating_model.py``):
    every record in the keyed table order, the eligibility deletions, improved Rating. Returns ``(inputs, deleted)``
    as :func:`mixed_stage_tables` (``inputs``: ``raw_records``, ``rating_records``, ``rating_attribute_sids``,
    ``rating_id_table``)."""
    from pipeline.core.mixed_model import in_table_order

    content = [*parameters.quasi_identifiers, *parameters.sensitive_attributes]
    (row_ids,) = in_table_order(records, [np.sort(records["row_id"].to_numpy(np.int64))], content, secret)
    rating_records, eligibility = _records_for_rating(records, row_ids, parameters, secret)
    id_table, attribute_sids = _sids(records, rating_records, parameters, secret)
    deleted = pd.DataFrame({"row_id": eligibility, "reason": ["eligibility"] * len(eligibility)})
    inputs = {
        "raw_records": records,
        "rating_records": rating_records,
        "rating_attribute_sids": attribute_sids,
        "rating_id_table": id_table,
    }
    return inputs, deleted


def _mining_backend(settings: Any, records: pd.DataFrame) -> str:
    """The run's back end (``assets/mining.py``); mlxtend's is replaced by ``counting``, which gives the same rules
    (``tests/core/test_rules.py``) in milliseconds instead of seconds."""
    from pipeline.core.rules import resolve_mining_backend

    backend = resolve_mining_backend(
        settings.mining_backend,
        len(records),
        duckdb_threshold=settings.duckdb_mining_threshold,
        n_items=sum(int(records[a].nunique()) for a in settings.sensitive_attributes),
    )
    return "counting" if backend.startswith("mlxtend") else backend


def _model_row(
    model: Any,
    records: pd.DataFrame,
    rules: pd.DataFrame,
    parameters: Any,
    *,
    secret: bytes | None,
    configured: bool,
    max_deleted_share: float,
    max_suppressed_share: float,
) -> PlanRow:
    """One mixed or Rating setting: stage tables, the plug-in's build, and the predicted gates."""
    from pipeline.core.adversary import (
        disclosure_probabilities,
        per_record_disclosure,
        recover_rule_confidences,
        rule_holders,
    )
    from pipeline.core.eligibility import suppressed_cell_certainty
    from pipeline.core.verification import confidence_summary, disclosure_summary

    started = time.monotonic()
    sensitive = list(parameters.sensitive_attributes)
    if model.publishes_sac:
        inputs, deleted = mixed_stage_tables(records, rules, parameters, secret=secret)
    else:
        inputs, deleted = rating_stage_tables(records, parameters, secret=secret)
    candidate = model.build(inputs, parameters, secret=secret)
    tables = candidate.tables
    attribute_table = tables["attribute_table"].astype({a: "Int32" for a in sensitive})
    suppressed = {a: int(attribute_table[a].isna().sum()) for a in sensitive}
    n_at = len(attribute_table)
    suppressed_share = {a: (count / n_at if n_at else 0.0) for a, count in suppressed.items()}
    n_deleted = len(deleted)
    deleted_share = n_deleted / len(records) if len(records) else 0.0
    release = {
        "sac_released": tables["sac_released"],
        "attribute_table": attribute_table,
        "id_table": tables["id_table"],
        "attribute_clusters": tables["attribute_clusters"],
    }
    all_holders = rule_holders(records, rules)
    released_holders = rule_holders(records, rules, row_map=candidate.row_map)
    per_record = per_record_disclosure(disclosure_probabilities(released_holders, rules, **release))
    disclosure = disclosure_summary(per_record, ell=parameters.ell)
    max_disclosure = float(disclosure["probability"].max()) if len(disclosure) else 0.0
    confidence_passes: bool | None = None
    max_deviation: float | None = None
    if "rule_confidence_preserved" not in model.not_applicable:
        summary = confidence_summary(recover_rule_confidences(rules, **release))
        max_deviation = float(summary["deviation"].max()) if len(summary) else 0.0
        confidence_passes = confidence_gate_passes(
            summary, exact_required=n_deleted == 0 and sum(suppressed.values()) == 0, tolerance=parameters.confidence_tolerance
        )
    certainty = suppressed_cell_certainty(attribute_table, tables["id_table"], sensitive, parameters.ell)
    order_refusal = _order_refusal(release, candidate.row_map, sensitive)
    gates, refusal = gate_predictions(
        infeasible=None,
        deleted_share=deleted_share,
        suppressed_share=suppressed_share,
        max_deleted_share=max_deleted_share,
        max_suppressed_share=max_suppressed_share,
        confidence_passes=confidence_passes,
        max_confidence_deviation=max_deviation,
        confidence_tolerance=parameters.confidence_tolerance,
        disclosure_passes=bool(disclosure["within_bound"].all()),
        max_disclosure=max_disclosure,
        allow_disclosure=parameters.allow_disclosure,
        certain_cells_pass=bool(certainty["within_bound"].all()),
        ell=parameters.ell,
    )
    if order_refusal is not None and gates.get("preflight") == "pass":
        gates["release_carries_no_input_order"] = "refuse"
        refusal = refusal or order_refusal
    return PlanRow(
        model=model.name,
        ell=parameters.ell,
        min_confidence=parameters.min_confidence,
        min_support=parameters.min_support,
        configured=configured,
        n_strong_rules=len(rules),
        n_rule_holders=int(all_holders["row_id"].nunique()),
        n_rule_holders_released=len(disclosure),
        n_sac_released=len(tables["sac_released"]),
        n_attribute_table=n_at,
        n_deleted=n_deleted,
        deleted_share=deleted_share,
        suppressed_cells=suppressed,
        suppressed_share=suppressed_share,
        max_confidence_deviation=max_deviation,
        max_disclosure=max_disclosure,
        gates=gates,
        refusal=refusal,
        seconds=time.monotonic() - started,
    )


def _order_refusal(release: Mapping[str, pd.DataFrame], row_map: pd.DataFrame, sensitive: Sequence[str]) -> str | None:
    """Gate 7's rank correlations on the candidate (:func:`pipeline.core.order_attack.input_order_correlations`, the
    columns the gate checks: SAC~ ``row_id`` and ``group_id``, the attribute table's ``row_id`` and SIDs): the refusal
    text for the column furthest above its limit, or None when every column is within it. With ``randomness:
    spec-reference`` the ids follow the input order (|ρ| 0.65 on Adult) and the run refuses the release."""
    from pipeline.core.order_attack import input_order_correlations

    correlations = input_order_correlations(
        {"sac_released": release["sac_released"], "attribute_table": release["attribute_table"]},
        row_map.assign(input_row_number=row_map["source_row_id"]),
        {"sac_released": ["row_id", "group_id"], "attribute_table": ["row_id", *sensitive]},
    )
    failing = correlations[~correlations["passed"].astype(bool)]
    if not len(failing):
        return None
    worst = failing.loc[failing["spearman"].abs().idxmax()]
    return (
        f"release_carries_no_input_order: |Spearman ρ| {abs(float(worst['spearman'])):.3f} of {worst['table']}.{worst['column']} "
        f"with the input position (max {float(worst['limit']):.3f}); randomness home-secret keys the order"
    )


def _refused_row(
    model: str, ell: int, min_confidence: float | None, min_support: int | None, *, configured: bool, reason: str
) -> PlanRow:
    gates, refusal = gate_predictions(
        infeasible=reason,
        deleted_share=None,
        suppressed_share=None,
        max_deleted_share=0.0,
        max_suppressed_share=0.0,
        confidence_passes=None,
        max_confidence_deviation=None,
        confidence_tolerance=0.0,
        disclosure_passes=None,
        max_disclosure=None,
        allow_disclosure=False,
        certain_cells_pass=None,
        ell=ell,
    )
    return _unpredicted_row(model, ell, min_confidence, min_support, configured=configured, gates=gates, refusal=refusal)


def _unpredicted_row(
    model: str,
    ell: int,
    min_confidence: float | None,
    min_support: int | None,
    *,
    configured: bool,
    gates: dict[str, str],
    refusal: str | None,
    notes: tuple[str, ...] = (),
) -> PlanRow:
    """A row whose figures are not predicted (``None``): a setting refused before any stage runs, or a (k, ℓ) row."""
    return PlanRow(
        model=model,
        ell=ell,
        min_confidence=min_confidence,
        min_support=min_support,
        configured=configured,
        n_strong_rules=None,
        n_rule_holders=None,
        n_rule_holders_released=None,
        n_sac_released=None,
        n_attribute_table=None,
        n_deleted=None,
        deleted_share=None,
        suppressed_cells=None,
        suppressed_share=None,
        max_confidence_deviation=None,
        max_disclosure=None,
        gates=gates,
        refusal=refusal,
        seconds=0.0,
        notes=notes,
    )


#: What a (k, ℓ) row does not predict.
KL_NOT_PREDICTED = (
    "kl: deletions, suppressed records and its gates are not predicted (its generalisation search is the run "
    "itself); predicted: the preflight (ℓ feasible, k ≥ ℓ, hierarchies covering every quasi-identifier value)"
)


def _kl_row(ell: int, k: int, *, configured: bool) -> PlanRow:
    gates = {
        "preflight": "pass",
        "utility_within_thresholds": "not predicted",
        "rule_confidence_preserved": "n/a",
        "disclosure_within_bound": "n/a",
        "no_certain_attribute_table_cell": "n/a",
    }
    if k < ell:
        return dataclasses.replace(
            _refused_row("kl", ell, None, None, configured=configured, reason=f"k = {k} < ℓ = {ell}: raise --k to at least ℓ"),
            notes=(KL_NOT_PREDICTED,),
        )
    return _unpredicted_row("kl", ell, None, None, configured=configured, gates=gates, refusal=None, notes=(KL_NOT_PREDICTED,))


def _values(given: Sequence[Any] | None, default: Sequence[Any], configured: Any) -> list[Any]:
    values = list(given) if given else list(default)
    return sorted({*values, configured})


class PerAttributeEllNotPlanned(UnusableInputError, ValueError):
    """The settings give one ℓ_i per sensitive attribute (``ell_per_attribute``), which the plan does not predict
    (exit 2)."""


def release_plan(
    settings: Any,
    *,
    secret: bytes | None,
    ell_values: Sequence[int] | None = None,
    min_confidence_values: Sequence[float] | None = None,
    max_deleted_share: float | None = None,
    max_suppressed_share: float | None = None,
) -> Plan:
    """Predict ``msa-release run``'s deletions, suppressions and refusals for every ℓ of ``ell_values`` and every
    min_confidence of ``min_confidence_values`` (the configured ℓ and min_confidence are always added).

    Parameters
    ----------
    settings
        :class:`pipeline.resources.ReleaseSettings` (any object with its fields): how to read the input, the model
        and every other setting, as ``msa-release run`` with the same options would use them. The utility gate's
        thresholds are its ``max_deleted_share`` / ``max_suppressed_share`` when it has them, else 0.10.
    secret
        The home secret (:func:`pipeline.release.home_secret.load_or_create_secret` of the home the run would use):
        the keyed orders decide which records are grouped and deleted. Ignored with ``randomness: spec-reference``.
    ell_values, min_confidence_values
        The settings to predict (default :data:`DEFAULT_ELL_VALUES`, :data:`DEFAULT_MIN_CONFIDENCE_VALUES`; the
        (k, ℓ) model ignores min_confidence).
    max_deleted_share, max_suppressed_share
        The utility gate's thresholds, when given; else the settings' (0.10 when they have none).

    Returns
    -------
    pipeline.core.plan.Plan
        Rows in order of ℓ, then min_confidence.

    Raises
    ------
    pipeline.io.loading.InputError
        The input cannot be read as configured (as ``msa-release run`` would refuse it, exit status 2).
    pipeline.core.hierarchies.HierarchyError
        (k, ℓ) model: a hierarchy missing or not covering the data.
    ValueError
        ``secret`` is None with ``randomness: home-secret`` (the prediction would not be the run's).
    PerAttributeEllNotPlanned
        ``settings.ell_per_attribute`` is set (one ℓ_i per sensitive attribute is not predicted).
    """
    from pipeline.core.rules import mine_strong_rules
    from pipeline.io.loading import InfeasibleInput, check_ell_feasible, load_records
    from pipeline.models import publication_model

    started = time.monotonic()
    if getattr(settings, "ell_per_attribute", None):
        # red team, session 38: the plan job planned a uniform ℓ = L = max ℓ_i as "the configured setting" (13,482
        # deleted, refused) where the run with ℓ_i deleted 4,722 and published
        raise PerAttributeEllNotPlanned(
            "per-attribute ℓ (ell_per_attribute "
            + ", ".join(f"{name}={value}" for name, value in dict(settings.ell_per_attribute).items())
            + ") is not predicted by the plan, which plans one ℓ for every sensitive attribute; plan a uniform ℓ "
            "(--ell 3), or run the per-attribute setting as a comparison (msa-release run --no-promote --ell …) to see "
            "its deletions and gates"
        )
    if secret is None and settings.randomness == "home-secret":
        raise ValueError("randomness 'home-secret' needs the home secret: the keyed orders decide which records are deleted")
    model = publication_model(settings.model)
    loaded = load_records(settings.input_path, **settings.reading_options())
    records = loaded.records
    input_name = Path(settings.input_path).name
    profile = profile_table(records, settings.sensitive_attributes, input_name=input_name, n_input=loaded.n_input)
    if max_deleted_share is None:
        max_deleted_share = float(getattr(settings, "max_deleted_share", DEFAULT_MAX_DELETED_SHARE))
    if max_suppressed_share is None:
        max_suppressed_share = float(getattr(settings, "max_suppressed_share", DEFAULT_MAX_SUPPRESSED_SHARE))
    ells = _values(ell_values, DEFAULT_ELL_VALUES, int(settings.ell))
    confidences = _values(min_confidence_values, DEFAULT_MIN_CONFIDENCE_VALUES, float(settings.min_confidence))

    def infeasible(ell: int) -> str | None:
        try:
            check_ell_feasible(records, settings.sensitive_attributes, ell=ell, source=input_name, n_input=loaded.n_input)
        except InfeasibleInput as error:
            return f"the table cannot be made {model.guarantee}: {error}"
        return None

    rows: list[PlanRow] = []
    if model.name == "kl":
        model.check_input(settings, records)  # hierarchies cover the data, as the run's preflight checks
        for ell in ells:
            reason = infeasible(ell)
            configured = ell == settings.ell
            rows.append(
                dataclasses.replace(
                    _refused_row("kl", ell, None, None, configured=configured, reason=reason), notes=(KL_NOT_PREDICTED,)
                )
                if reason
                else _kl_row(ell, int(settings.k), configured=configured)
            )
        not_predicted_rows = rows
    else:
        secret = secret if settings.randomness == "home-secret" else None
        base = model.parameters(settings)
        backend = _mining_backend(settings, records)
        mined: dict[tuple[float, int], pd.DataFrame] = {}
        for ell in ells:
            reason = infeasible(ell)
            for confidence in confidences:
                min_support = int(settings.min_support) if settings.min_support else default_min_support(ell)
                configured = ell == settings.ell and confidence == settings.min_confidence
                if reason is not None:
                    rows.append(_refused_row(model.name, ell, confidence, min_support, configured=configured, reason=reason))
                    continue
                key = (confidence, min_support)
                if key not in mined:
                    mined[key] = mine_strong_rules(
                        records,
                        settings.sensitive_attributes,
                        min_confidence=confidence,
                        backend=backend,
                        min_support=min_support,
                    )
                parameters = dataclasses.replace(base, ell=ell, min_confidence=confidence, min_support=min_support)
                rows.append(
                    _model_row(
                        model,
                        records,
                        mined[key],
                        parameters,
                        secret=secret,
                        configured=configured,
                        max_deleted_share=max_deleted_share,
                        max_suppressed_share=max_suppressed_share,
                    )
                )
        not_predicted_rows = []
    plan_rows = tuple(rows)
    recommendation = recommend(plan_rows)
    if not_predicted_rows:
        recommendation = "No recommendation: the (k, ℓ) model's outcome is not predicted; the preflight figures are above."
    extra: dict[str, Any] = {"not_predicted": {}} if model.name == "kl" else {}
    return Plan(
        profile=profile,
        rows=plan_rows,
        max_deleted_share=max_deleted_share,
        max_suppressed_share=max_suppressed_share,
        confidence_tolerance=float(settings.confidence_tolerance),
        recommendation=recommendation,
        seconds=time.monotonic() - started,
        **extra,
    )
