"""Audit of the release a run published: the strong-rule adversary and the utility metrics, from the published files
alone (the same code as ``msa-release audit``). ``assets/publish.py`` generates one audit asset per audited publishing
job (:func:`build_audit_asset`)."""

import json

import dagster as dg
import pandas as pd

from pipeline.asset_keys import EVALUATION, inputs, table_metadata
from pipeline.failures import with_structured_failures
from pipeline.models import PublicationModel
from pipeline.release.audit import audit_release_against, read_release
from pipeline.io.loading import resolve_input_path
from pipeline.reporting.release_report import audit_histogram_png
from pipeline.resources import ReleaseSettings, ReleaseStore

AUDIT = "audit"


def audit_metadata(report: dict) -> dict:
    """Numeric, stably named metadata (the UI plots them across runs) plus the verdict."""
    adversary, metrics, structure = report["adversary"], report["metrics"], report["structure"]
    return {
        "release_id": str(report["release"]["release_id"]),
        "model": str(report["release"]["model"]),
        "verdict": report["verdict"],
        "verdict_passed": int(report["verdict"] == "PASS"),
        "ell": int(report["release"]["ell"]),
        "n_strong_rules": int(adversary["n_rules"]),
        "max_disclosure_probability": float(adversary["max_probability_float"]),
        "mean_disclosure_probability_exposed": float(adversary["mean_probability_over_exposed"]),
        "n_records_exposed": int(adversary["n_records_exposed"]),
        "n_records_above_bound": int(adversary["n_records_above_bound"]),
        "n_records_certain": int(adversary["n_records_certain"]),
        "additional_information_loss": float(metrics["additional_information_loss"]),
        "reconstruction_error": float(metrics["reconstruction_error"]),
        "reconstruction_error_per_record": float(metrics["reconstruction_error_per_record"]),
        "average_raw_confidence": float(metrics["average_raw_confidence"] or 0.0),
        "average_released_confidence": float(metrics["average_released_confidence"] or 0.0),
        "n_suppressed_cells": int(metrics["n_suppressed_cells"]),
        "n_deleted": int(metrics["n_deleted"]),
        "n_sids_below_ell": int(structure["n_sids_below_ell"]),
        "disclosure_histogram": dg.MetadataValue.json(adversary["histogram"]),
    }


def release_published_in_run(context: dg.AssetExecutionContext, publish_asset: str) -> str | None:
    """The ``release_id`` that the publish asset ``publish_asset`` materialized earlier in this run, or None."""
    events = context.instance.all_logs(context.run.run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION)
    for event in reversed(events):
        materialization = event.asset_materialization
        if materialization is not None and materialization.asset_key == dg.AssetKey(publish_asset):
            value = materialization.metadata.get("release_id")
            return str(getattr(value, "value", value)) if value is not None else None
    return None


def build_audit_asset(owner: PublicationModel) -> dg.AssetsDefinition:
    """The audit asset of a publishing job (``audit/<publish_asset>_disclosure``; ``audit/release_disclosure`` for the
    mixed model): the adversary's view of the release that this run's publish asset published, read back by its
    release id (never LATEST: another run may have moved it), with this run's raw records and strong rules."""

    @dg.asset(
        key=[AUDIT, f"{owner.publish_asset}_disclosure"],
        deps=[owner.publish_asset],
        ins=inputs(private=["raw_records", "input_summary", "strong_rules"]),
        group_name=EVALUATION,
        kinds={"duckdb", "pandas"},
        description=f"The adversary's view of the release this run published (`{owner.publish_asset}`, by its release "
        "id): per released record, the most likely strong rule and its probability (SPEC §10), with AIL, RCE, rule "
        "confidences and stage times as metadata. The release is read back from its published files; the raw records "
        "and strong rules are this run's (the input is read once per run).",
    )
    @with_structured_failures
    def audit(
        context: dg.AssetExecutionContext,
        settings: ReleaseSettings,
        store: ReleaseStore,
        raw_records: pd.DataFrame,
        input_summary: pd.DataFrame,
        strong_rules: pd.DataFrame,
    ) -> pd.DataFrame:
        published = release_published_in_run(context, owner.publish_asset)
        if published is None:
            raise dg.Failure(
                f"this run published no release to audit: the audit runs after `{owner.publish_asset}` in the "
                f"`{owner.job}` job (`msa-release audit` audits a release directory from its files)"
            )
        release_dir = store.releases_dir / published
        if not (release_dir / "manifest.json").is_file():
            raise dg.Failure(f"release {published} published by this run is no longer in {store.releases_dir}")
        manifest = json.loads((release_dir / "manifest.json").read_text())
        # the manifest names no path (it is published): the raw table is this run's input, already loaded by the run
        release = read_release(release_dir)
        summary = input_summary.iloc[0]
        result = audit_release_against(
            release,
            raw_records,
            raw_label=str(resolve_input_path(settings.input_path)),
            input_sha256=str(summary["input_sha256"]) if "input_sha256" in input_summary else None,
            rules=strong_rules.reset_index(drop=True),
            is_release_input=True,
        )
        metadata = audit_metadata(result.report)
        metadata["audited"] = "the release published by this run"
        metadata.update({f"seconds_{step}": float(value) for step, value in manifest.get("stage_seconds", {}).items()})
        metadata.update(
            table_metadata(result.per_record, rows_in=int(manifest["n_sac_released"]) + int(manifest["n_attribute_table"]))
        )
        encoded = audit_histogram_png(result.report["adversary"]["histogram"], int(manifest["ell"]))
        metadata["disclosure_histogram_figure"] = dg.MetadataValue.md(
            f"![Disclosure probability per released record](data:image/png;base64,{encoded})"
        )
        context.add_output_metadata(metadata)
        return result.per_record

    return audit
