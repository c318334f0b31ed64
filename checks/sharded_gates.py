"""The gates of a sharded release (issue 17): blocking asset checks on ``candidate/sharded_release_candidate``.

Nothing record-level reaches them: each runs Great Expectations suites on the S-row summary frame
(``private/shard_summaries``, one row per shard: counts and the flattened gate partials) and on the release's figures
reduced from the partials (:func:`pipeline.core.sharding.reduce_gates`, stored in the candidate's one row). The gates
are today's, by name and figures (``checks/gates.py``): 1-9 and the utility gate. Gates 7 (order) and 9 (learned
model) hold against an adversary who attacks ONE shard at a time (the part files show where a shard starts): each
shard computes them on its own release, and the suites of the ``release`` job run on frames built from the shards'
figures (:func:`pipeline.engines.summaries.order_frame`, :func:`pipeline.engines.summaries.posterior_frame`); what that
covers and what it does not is in README ("Scaling out"). Any failure stops ``sharded_release`` before its publish
step, as in the ``release`` job; with ``posterior_gate: warn`` gate 9 fails with WARN severity and the release is
published as a comparison (``comparisons/<id>/``, never LATEST), as the ``release`` job does; so does gate 3 with
``allow_disclosure``.
"""

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pandas as pd

from checks import suites
from checks.gx_runner import SuiteOutcome, validate_frame
from pipeline.asset_keys import CANDIDATE, PRIVATE
from pipeline.core.diagnosis import DATA_LOSS_GATES
from pipeline.core import verification
from pipeline.engines.summaries import accounting_frame, order_frame, posterior_frame
from pipeline.resources import ReleaseSettings, ReleaseStore

__all__ = ["SHARDED_GATED", "SHARDED_GATES", "SHARDED_GATE_CHECKS", "evaluate_sharded_gate"]

#: The candidate of a sharded release, where its gates attach (the publish step depends on it).
SHARDED_GATED = dg.AssetKey([CANDIDATE, "sharded_release_candidate"])

#: Gate name -> what it certifies (today's descriptions, reduced over the shards).
SHARDED_GATES: dict[str, str] = {
    "sac_released_is_l_diverse": "Gate 1: every SAC~ group of every shard has exactly ℓ rows and ℓ distinct values on "
    "every sensitive attribute; cluster tuples are a permutation of the original.",
    "attribute_table_is_l_diverse": "Gate 2: every SID of every shard has at least ℓ distinct values (no value above "
    "1/ℓ); suppressed cells are counted.",
    "disclosure_within_bound": "Gate 3: the strong-rule adversary with the GLOBAL rules gives every rule holder of "
    "every shard a disclosure probability ≤ 1/ℓ (maximum over the shards). With allow_disclosure it fails with WARN "
    "severity and does not block: the release goes to comparisons/.",
    "rule_confidence_preserved": "Gate 4: every strong rule's confidence recovered from the united release (supports "
    "summed over the shards, Lemma 22) equals the raw one, or stays within the tolerance when records were deleted.",
    "records_accounted_for": "Gate 5: every record of every shard is in exactly one of SAC~, the attribute table or "
    "the deleted list, and the shards' counts add up to the records read minus those dropped for a missing value.",
    "no_probability_tilt": "Gate 6: no SID of an attribute other than the global S_max holds a strong value, in any shard.",
    "release_carries_no_input_order": "Gate 7, per shard: no published id or SID column of any shard carries its "
    "records' input order (|Spearman ρ| ≤ max(0.05, z_S/√(n−1)) with n the shard's rows and z_S 4 at S = 1, Bonferroni over the S shards above: 4.32 at S = 4), and the order-replay adversary "
    "attacking every shard on its own (replays Rating from the shard's ID table) guesses attribute-table cells no "
    "better than chance + 4σ, its guesses added up over the shards, and no shard's own guesses better than chance + "
    "z·σ (z = 4 for one shard, Bonferroni over S shards: 4.32 at S = 4; pooling alone dilutes one leaky shard). Not covered: an adversary correlating the "
    "shards' ids with one another (the shard key is a keyed hash of the private row id, never published).",
    "no_certain_attribute_table_cell": "Gate 8: no attribute-table cell of any shard is disclosed with probability "
    "above 1/ℓ by an adversary who knows how Rating places residuals.",
    "posterior_within_bound": "Gate 9, per shard: the learned-model adversary (naive Bayes fitted by EM on ONE "
    "shard's release; Kifer 2009) gives no record's true sensitive value a posterior above max(1/ℓ, population "
    "posterior of that shard) + posterior_slack; counts added up and maxima taken over the shards. Not covered: a "
    "model fitted on the whole united release (measured on Adult at S = 4: the same verdicts; on a release above the "
    'bound that model found 0.6 % more records above it than the per-shard models; README "Scaling out"). '
    "With posterior_gate='warn' it fails with WARN severity and does not block: the release goes to comparisons/.",
    "utility_within_thresholds": "Utility gate: the share of eligible records deleted (summed over the shards) is at "
    "most max_deleted_share, and every sensitive attribute's share of suppressed cells at most max_suppressed_share.",
}


def _metadata(figures: dict[str, Any]) -> dict[str, Any]:
    """Figures as check metadata: numbers, text and flags as they are, mappings and lists as JSON."""
    metadata: dict[str, Any] = {}
    for key, value in figures.items():
        if isinstance(value, dict | list | tuple):
            metadata[key] = dg.MetadataValue.json(json.loads(json.dumps(value, default=str)))
        elif value is None:
            metadata[key] = dg.MetadataValue.null()
        else:
            metadata[key] = value
    return metadata


def _merge(outcomes: list[SuiteOutcome]) -> SuiteOutcome:
    """Several suites' outcomes as one (success iff all succeed; expectations listed in order)."""
    expectations = [e for outcome in outcomes for e in outcome.expectations]
    evaluated = len(expectations)
    successful = sum(bool(e["success"]) for e in expectations)
    return SuiteOutcome(
        success=all(o.success for o in outcomes),
        statistics={
            "evaluated_expectations": evaluated,
            "successful_expectations": successful,
            "success_percent": 100.0 * successful / evaluated if evaluated else 100.0,
        },
        expectations=expectations,
    )


def _result(outcome: SuiteOutcome, figures: dict[str, Any]) -> dg.AssetCheckResult:
    """Check result with the figures, GX statistics and failed expectation types (as ``checks/gates.py``)."""
    metadata = _metadata(figures)
    metadata["gx_success_percent"] = float(outcome.statistics.get("success_percent") or 0.0)
    metadata["gx_evaluated_expectations"] = int(outcome.statistics.get("evaluated_expectations", 0))
    metadata["failed_expectations"] = ", ".join(outcome.failed_expectations) or "none"
    metadata["gx_expectations"] = dg.MetadataValue.json([dict(e) for e in outcome.expectations])
    return dg.AssetCheckResult(passed=outcome.success, metadata=metadata)


def utility_figures_of(settings: ReleaseSettings, candidate: pd.Series) -> dict[str, Any]:
    """The utility gate's figures (the manifest's ``utility``) from the united release's counts: records eligible
    (read minus dropped for a missing value) and deleted, per sensitive attribute its suppressed cells out of one cell
    per released record (SAC~ rows and attribute-table rows)."""
    suppressed = {a: int(n) for a, n in json.loads(str(candidate["suppressed_cells"])).items()}
    released = int(candidate["n_sac_released"]) + int(candidate["n_attribute_table"])
    return verification.utility_figures(
        records_eligible=int(candidate["n_input"]) - int(candidate["n_dropped_missing"]),
        records_deleted=int(candidate["n_deleted"]),
        suppressed_cells={a: suppressed.get(a, 0) for a in settings.sensitive_attributes},
        attribute_cells=dict.fromkeys(settings.sensitive_attributes, released),
        max_deleted_share=settings.max_deleted_share,
        max_suppressed_share=settings.max_suppressed_share,
    )


def evaluate_sharded_gate(
    name: str,
    settings: ReleaseSettings,
    shard_summaries: pd.DataFrame,
    candidate_frame: pd.DataFrame,
    *,
    summary_outcome: SuiteOutcome | None = None,
) -> dg.AssetCheckResult:
    """Gate ``name`` of a sharded release.

    Parameters
    ----------
    name
        A key of :data:`SHARDED_GATES`.
    shard_summaries
        The S-row summary frame (:func:`pipeline.engines.summaries.summary_frame`).
    candidate_frame
        The candidate's one row: ``n_input``, ``n_dropped_missing``, ``n_shards``, the totals
        (:func:`pipeline.engines.summaries.release_totals`; ``suppressed_cells`` as JSON text) and ``reduced_gates``
        (JSON text: gate -> figures with ``passed``, from :func:`pipeline.core.sharding.reduce_gates`).
    summary_outcome
        The outcome of ``suites.shard_summary_suite`` on ``shard_summaries`` when the caller already validated it (every
        gate includes it); None: validated here.

    Returns
    -------
    dagster.AssetCheckResult
        Passed iff every suite holds; metadata the reduced figures under today's names, ``n_shards`` and the GX
        statistics. A gate the reduce gave no figures for fails, saying so.
    """
    candidate = candidate_frame.iloc[0]
    n_shards = int(candidate["n_shards"])
    if summary_outcome is None:
        summary_outcome = validate_frame(shard_summaries, suites.shard_summary_suite(n_shards=n_shards))
    outcomes = [summary_outcome]
    if name in ("release_carries_no_input_order", "posterior_within_bound"):
        return _per_shard_gate(name, settings, shard_summaries, candidate, outcomes)
    if name == "utility_within_thresholds":
        figures = utility_figures_of(settings, candidate)
        outcomes.append(validate_frame(verification.utility_summary(figures), suites.utility_suite()))
        return _result(_merge(outcomes), {**figures, "n_shards": n_shards})
    reduced = json.loads(str(candidate["reduced_gates"])).get(name)
    if reduced is None:
        figures: dict[str, Any] = {
            "n_shards": n_shards,
            "reason": f"the reduce of the shards' partials gave no figures for {name}",
        }
        outcomes.append(validate_frame(pd.DataFrame({"passed": [False]}), suites.reduced_gate_suite(name)))
        return _result(_merge(outcomes), figures)
    figures = {key: value for key, value in reduced.items() if key != "passed"}
    outcomes.append(validate_frame(pd.DataFrame({"passed": [bool(reduced.get("passed"))]}), suites.reduced_gate_suite(name)))
    if name == "disclosure_within_bound":
        outcome = _merge(outcomes)
        overridden = not outcome.success and outcomes[0].success and bool(settings.allow_disclosure)
        checked = _result(outcome, {**figures, "n_shards": n_shards, "overridden_by_allow_disclosure": overridden})
        if overridden:
            # as checks/gates.py: the user accepted the disclosure explicitly; the gate still fails, with WARN severity,
            # which does not block (manifest: failed_overridden, disclosure_override_used; a comparison). A shard
            # missing or a count negative is never only a warning.
            return dg.AssetCheckResult(passed=False, severity=dg.AssetCheckSeverity.WARN, metadata=checked.metadata)
        return checked
    if name == "records_accounted_for":
        eligible = int(candidate["n_input"]) - int(candidate["n_dropped_missing"])
        placed = int(candidate["n_sac_released"]) + int(candidate["n_attribute_table"]) + int(candidate["n_deleted"])
        accounting = validate_frame(accounting_frame(shard_summaries), suites.shard_accounting_suite())
        totals_add_up = eligible == placed
        outcomes.append(
            SuiteOutcome(
                success=accounting.success and totals_add_up,
                statistics=accounting.statistics,
                expectations=accounting.expectations + [{"type": "totals_add_up", "success": totals_add_up}],
            )
        )
        figures = {
            "n_input": int(candidate["n_input"]),
            "n_dropped_missing": int(candidate["n_dropped_missing"]),
            "n_sac_released": int(candidate["n_sac_released"]),
            "n_attribute_table": int(candidate["n_attribute_table"]),
            "n_deleted": int(candidate["n_deleted"]),
            **figures,
        }
    return _result(_merge(outcomes), {**figures, "n_shards": n_shards})


def _per_shard_gate(
    name: str, settings: ReleaseSettings, shard_summaries: pd.DataFrame, candidate: pd.Series, outcomes: list[SuiteOutcome]
) -> dg.AssetCheckResult:
    """Gate 7 or 9: the ``release`` job's suite (``no_input_order_suite`` / ``posterior_suite``) on the frame built
    from the shards' figures, and the reduce's verdict; metadata the reduced figures under today's names. Fails,
    saying so, when a shard did not compute the gate's partial. Gate 9 with ``posterior_gate: warn``: a failure is
    reported with WARN severity (the ``release`` job's behaviour: published as a comparison, never LATEST)."""
    n_shards = int(candidate["n_shards"])
    reduced = json.loads(str(candidate["reduced_gates"])).get(name)
    if name == "release_carries_no_input_order":
        frame, suite = order_frame(shard_summaries, settings.sensitive_attributes), suites.no_input_order_suite()
    else:
        frame, suite = posterior_frame(shard_summaries), suites.posterior_suite()
    if reduced is None or frame is None:
        outcomes.append(validate_frame(pd.DataFrame({"passed": [False]}), suites.reduced_gate_suite(name)))
        figures: dict[str, Any] = {
            "n_shards": n_shards,
            "reason": f"the shards did not compute the partials of {name} (ShardParameters.evaluate_"
            f"{'order' if name == 'release_carries_no_input_order' else 'posterior'} is off): it cannot be evaluated",
        }
        return _result(_merge(outcomes), figures)
    outcomes.append(validate_frame(frame, suite))
    outcomes.append(validate_frame(pd.DataFrame({"passed": [bool(reduced.get("passed"))]}), suites.reduced_gate_suite(name)))
    figures = {key: value for key, value in reduced.items() if key != "passed"}
    figures["n_shards"] = n_shards
    if name == "posterior_within_bound":
        figures["posterior_gate"] = str(settings.posterior_gate)
    outcome = _merge(outcomes)
    checked = _result(outcome, figures)
    summary_whole = outcomes[0].success  # a shard missing or a count negative is never only a warning
    if name == "posterior_within_bound" and not outcome.success and summary_whole and str(settings.posterior_gate) == "warn":
        # as checks/gates.py: failed with WARN severity, does not block (manifest: failed_overridden, a comparison)
        return dg.AssetCheckResult(passed=False, severity=dg.AssetCheckSeverity.WARN, metadata=checked.metadata)
    return checked


def build_sharded_gates() -> dg.AssetChecksDefinition:
    """Every gate of :data:`SHARDED_GATES` as a blocking check on :data:`SHARDED_GATED`, evaluated in ONE step (see
    :func:`evaluate_sharded_gate`): the gates read the same two small frames, so one step loads them and Great
    Expectations once instead of ten times (issue 18: fewer, larger steps). Each gate is still its own check in the UI,
    the run's events and the manifest; any failed gate (ERROR severity) stops the publish step, as separate blocking
    checks did."""

    @dg.multi_asset_check(
        name="sharded_release_gates",
        specs=[
            dg.AssetCheckSpec(
                name,
                asset=SHARDED_GATED,
                blocking=True,
                description=description,
                additional_deps=[
                    dg.AssetKey([PRIVATE, "shard_summaries"]),
                    # the data-loss gates' refusal diagnosis reads the staged records and the global rules
                    *(
                        [dg.AssetKey([PRIVATE, "sharded_input_summary"]), dg.AssetKey([PRIVATE, "sharded_strong_rules"])]
                        if name in DATA_LOSS_GATES
                        else []
                    ),
                ],
            )
            for name, description in SHARDED_GATES.items()
        ],
        compute_kind="great_expectations",
        ins={
            "sharded_release_candidate": dg.AssetIn(key=SHARDED_GATED),
            "shard_summaries": dg.AssetIn(key=[PRIVATE, "shard_summaries"]),
            "sharded_input_summary": dg.AssetIn(key=[PRIVATE, "sharded_input_summary"]),
            "sharded_strong_rules": dg.AssetIn(key=[PRIVATE, "sharded_strong_rules"]),
        },
    )
    def gates(
        context: dg.AssetCheckExecutionContext,
        settings: ReleaseSettings,
        store: ReleaseStore,
        sharded_release_candidate: pd.DataFrame,
        shard_summaries: pd.DataFrame,
        sharded_input_summary: pd.DataFrame,
        sharded_strong_rules: pd.DataFrame,
    ) -> Iterator[dg.AssetCheckResult]:
        n_shards = int(sharded_release_candidate.iloc[0]["n_shards"])
        summary_outcome = validate_frame(shard_summaries, suites.shard_summary_suite(n_shards=n_shards))
        results: dict[str, dg.AssetCheckResult] = {}
        refused: list[str] = []  # the data-loss gates that failed, refused once every gate is reported
        for name in SHARDED_GATES:
            result = evaluate_sharded_gate(
                name, settings, shard_summaries, sharded_release_candidate, summary_outcome=summary_outcome
            )
            results[name] = dg.AssetCheckResult(
                asset_key=SHARDED_GATED,
                check_name=name,
                passed=result.passed,
                severity=result.severity,
                metadata=result.metadata,
            )
            if name in DATA_LOSS_GATES and not result.passed:
                refused.append(name)
            else:
                yield results[name]
        if refused:
            # refused for data loss: the check carries the diagnosis and refusal.html is written, as in the in-memory
            # jobs (issue 15), then the refusal is raised. The utility gate's refusal names gate 4 too (one page); gate
            # 4 alone is refused by its own check.
            gate = "utility_within_thresholds" if "utility_within_thresholds" in refused else refused[0]
            also = [other for other in refused if other != gate]
            for other in also:
                yield results[other]
            yield from _refuse_for_data_loss(
                context,
                results[gate],
                settings,
                store,
                sharded_release_candidate,
                sharded_input_summary,
                sharded_strong_rules,
                gate=gate,
                also_refused_by=also,
            )

    return gates


#: Up to this many eligible records, a sharded release refused by a data-loss gate reads the sensitive attributes of
#: the PRIVATE staged records into the gates' step to diagnose the refusal (the in-memory jobs' diagnosis, refusal.html);
#: above it the check carries the gate's figures only (the driver of a large release holds no record-level table).
DIAGNOSIS_MAX_RECORDS = 1_000_000


def _refuse_for_data_loss(
    context: dg.AssetCheckExecutionContext,
    checked: dg.AssetCheckResult,
    settings: ReleaseSettings,
    store: ReleaseStore,
    candidate_frame: pd.DataFrame,
    input_summary: pd.DataFrame,
    strong_rules: pd.DataFrame,
    *,
    gate: str,
    also_refused_by: list[str],
) -> Iterator[dg.AssetCheckResult]:
    """The failed data-loss gate ``gate`` (``utility_within_thresholds`` or ``rule_confidence_preserved``) with the
    refusal diagnosis (:func:`checks.refusal.refuse_for_data_loss`): the sensitive attributes of the staged records
    (:func:`pipeline.release.sharded_report.read_staged_records`) and the GLOBAL strong rules, the loss from the
    reduced counts (:func:`utility_figures_of`, the utility gate's figures). Above
    :data:`DIAGNOSIS_MAX_RECORDS` eligible records, or when the staged records cannot be read, ``checked`` is yielded
    as it is (the CLI still prints why)."""
    from checks.refusal import refuse_for_data_loss
    from pipeline.core.diagnosis import CandidateLoss
    from pipeline.release.sharded_report import read_staged_records

    candidate = candidate_frame.iloc[0]
    figures = utility_figures_of(settings, candidate)
    n_eligible = int(candidate["n_input"]) - int(candidate["n_dropped_missing"])
    first = input_summary.iloc[0]
    if n_eligible > DIAGNOSIS_MAX_RECORDS:
        context.log.info(f"{gate}: no refusal diagnosis in the check (above {DIAGNOSIS_MAX_RECORDS:,} records)")
        yield checked
        return
    try:
        records = read_staged_records(Path(str(first["staging_dir"])), int(first["n_shards"]), settings.sensitive_attributes)
    except OSError as error:
        context.log.info(f"{gate}: no refusal diagnosis in the check ({type(error).__name__})")
        yield checked
        return
    yield from refuse_for_data_loss(
        context,
        checked,
        gate=gate,
        settings=settings,
        store=store,
        raw_records=records,
        strong_rules=strong_rules,
        loss=CandidateLoss(
            n_records=n_eligible,
            n_deleted=int(candidate["n_deleted"]),
            suppressed_cells={str(k): int(v) for k, v in dict(figures.get("suppressed_cells") or {}).items()},
            attribute_cells={str(k): int(v) for k, v in dict(figures.get("attribute_cells") or {}).items()},
            max_confidence_deviation=_confidence_deviation(candidate, refused=[gate, *also_refused_by]),
        ),
        also_refused_by=also_refused_by,
    )


def _confidence_deviation(candidate: pd.Series, *, refused: list[str]) -> float | None:
    """Gate 4's largest deviation of a recovered rule confidence (the reduce's figure), when gate 4 is among the
    ``refused`` data-loss gates: the diagnosis then names it and offers ``confidence_tolerance``, as the in-memory jobs'
    does (newcomer, session 40: the default engine's refusal left both out, and its last resort, a higher
    max_deleted_share, was refused again by gate 4). None otherwise, or when the reduce gave no figure."""
    if "rule_confidence_preserved" not in refused:
        return None
    figures = json.loads(str(candidate["reduced_gates"])).get("rule_confidence_preserved") or {}
    deviation = figures.get("max_confidence_deviation")
    return float(deviation) if deviation is not None else None


#: Every gate of ``sharded_release``, in gate order, in one check step.
SHARDED_GATE_CHECKS = [build_sharded_gates()]
