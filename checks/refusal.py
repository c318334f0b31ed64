"""A gate that refuses a release for data loss says why and what would work (issue 15).

:func:`refuse_for_data_loss` is what a data-loss gate (:data:`pipeline.core.diagnosis.DATA_LOSS_GATES`:
``rule_confidence_preserved``, ``utility_within_thresholds``) yields when it fails: its check result with the
diagnosis (:func:`pipeline.core.diagnosis.diagnose`) as the check's description (plain language, config keys: the UI
user sets ``ell``, not ``--ell``) and as metadata (``diagnosis``; ``refusal_report``: the path of refusal.html), both
redacted (:meth:`~pipeline.core.diagnosis.Diagnosis.redacted`: rules named by their attributes, no value of the data
in Dagster), writes ``$MSA_RELEASE_HOME/refusals/<run_id>/refusal.html`` and ``diagnosis.json`` with the rules'
values (what ``msa-release run`` prints as its "why" block),
and then stops the step with a ``dagster.Failure`` whose description is the same paragraph (instead of Dagster's
"1 blocking asset check failed" error), marked ``error_class = ReleaseRefused`` (exit status 1).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path

import dagster as dg
import pandas as pd

from pipeline.core.diagnosis import (
    REFUSAL_ERROR_CLASS,
    CandidateLoss,
    DiagnosisSettings,
    diagnose,
    diagnosis_paragraph,
    merge_diagnoses,
)
from pipeline.reporting.refusal_report import read_diagnosis, refusal_path, write_refusal_report
from pipeline.resources import ReleaseSettings, ReleaseStore


def diagnosis_settings(settings: ReleaseSettings) -> DiagnosisSettings:
    """The settings a diagnosis reads, from the run's ``settings`` (the utility thresholds when this version has them)."""
    return DiagnosisSettings(
        ell=int(settings.ell),
        min_confidence=float(settings.min_confidence),
        min_support=int(settings.effective_min_support()),
        sensitive_attributes=tuple(settings.sensitive_attributes),
        confidence_tolerance=float(settings.confidence_tolerance),
        max_deleted_share=getattr(settings, "max_deleted_share", None),
        max_suppressed_share=getattr(settings, "max_suppressed_share", None),
        model=str(settings.model),
    )


def candidate_loss(
    raw_records: pd.DataFrame,
    deleted_records: pd.DataFrame,
    attribute_table: pd.DataFrame,
    sensitive_attributes: Sequence[str],
    *,
    max_confidence_deviation: float | None = None,
) -> CandidateLoss:
    """The candidate's records deleted and attribute-table cells suppressed (a missing cell) per sensitive attribute."""
    return CandidateLoss(
        n_records=len(raw_records),
        n_deleted=len(deleted_records),
        suppressed_cells={a: int(attribute_table[a].isna().sum()) for a in sensitive_attributes},
        attribute_cells={a: len(attribute_table) for a in sensitive_attributes},
        max_confidence_deviation=max_confidence_deviation,
    )


def refuse_for_data_loss(
    context: dg.AssetCheckExecutionContext,
    result: dg.AssetCheckResult,
    *,
    gate: str,
    settings: ReleaseSettings,
    store: ReleaseStore,
    raw_records: pd.DataFrame,
    strong_rules: pd.DataFrame,
    loss: CandidateLoss,
    also_refused_by: Sequence[str] = (),
) -> Iterator[dg.AssetCheckResult]:
    """Yield the failed ``result`` of ``gate`` with the diagnosis, write refusal.html, then raise the refusal. The
    yielded result keeps ``result``'s ``asset_key`` and ``check_name`` (set in a multi-check step such as the sharded
    job's gates; None in a check of its own). ``also_refused_by``: the other data-loss gates that refused the same
    candidate in the same step (the sharded job's gates), named in the diagnosis beside ``gate``.

    Raises
    ------
    dagster.Failure
        Always (after the result): the diagnosis in one paragraph, metadata ``error_class`` and ``exit_status`` (1).
    """
    try:
        diagnosis = diagnose(raw_records, strong_rules, diagnosis_settings(settings), loss, gates=(*also_refused_by, gate))
    except Exception as error:  # a defect of the diagnosis never turns the refusal into a crash of the gate
        context.log.warning(f"{gate}: the refusal diagnosis could not be computed ({type(error).__name__})")
        paragraph = f"Release refused by {gate}: {loss.n_deleted:,} of {loss.n_records:,} records would be deleted."
        yield dg.AssetCheckResult(
            asset_key=result.asset_key,
            check_name=result.check_name,
            passed=False,
            severity=result.severity,
            metadata=result.metadata,
            description=paragraph,
        )
        raise dg.Failure(
            description=paragraph, metadata={"error_class": REFUSAL_ERROR_CLASS, "exit_status": 1, "gate": gate}
        ) from None
    shown = diagnosis.redacted()  # Dagster never holds a value of the data; refusal.html names the rules' values
    paragraph = diagnosis_paragraph(shown, "config")
    run_id = context.op_execution_context.run_id
    metadata = dict(result.metadata or {})
    metadata["diagnosis"] = dg.MetadataValue.json(shown.to_dict())
    try:
        earlier = read_diagnosis(refusal_path(Path(store.home), run_id))  # another data-loss gate of this run
        if earlier is not None and gate not in earlier.gates:
            diagnosis = merge_diagnoses(earlier, diagnosis)
        path = write_refusal_report(Path(store.home), run_id, diagnosis)
        metadata["refusal_report"] = dg.MetadataValue.path(str(path))
        paragraph += f" Details, with the rules' values: {path}."
    except OSError as error:  # the refusal stands; only its page is missing
        paragraph += f" (refusal.html could not be written: {error.strerror or error}.)"
    yield dg.AssetCheckResult(
        asset_key=result.asset_key,
        check_name=result.check_name,
        passed=False,
        severity=result.severity,
        metadata=metadata,
        description=paragraph,
    )
    raise dg.Failure(
        description=paragraph,
        metadata={"error_class": REFUSAL_ERROR_CLASS, "exit_status": 1, "gate": gate},
        allow_retries=False,
    )
