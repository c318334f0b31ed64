"""Audit of the release a run published: that the published files are the candidate the run's gates evaluated, and
the strong-rule adversary's figures and the utility metrics of that release (the report of ``msa-release audit``,
from the run's one pass of the adversary over the candidate). ``assets/publish.py`` generates one audit asset per audited publishing
job (:func:`build_audit_asset`)."""

import json

import dagster as dg
import pandas as pd

from pipeline.asset_keys import EVALUATION, inputs, table_metadata
from pipeline.failures import with_structured_failures
from pipeline.core.adversary import released_records_view
from pipeline.io.loading import resolve_input_path
from pipeline.models import PublicationModel
from pipeline.models.base import adversary_asset
from pipeline.release.audit import audit_report, read_release, table_digests
from pipeline.release.reports import AuditedRawTable, AuditReport, validate_report_data
from pipeline.reporting.release_report import REPORT_DATA, audit_histogram_png
from pipeline.resources import ReleaseSettings, ReleaseStore

AUDIT = "audit"


def audit_metadata(report: AuditReport) -> dict:
    """Numeric, stably named metadata (the UI plots them across runs) plus the verdict."""
    adversary, metrics, structure, release = report.adversary, report.metrics, report.structure, report.release
    return {
        "release_id": str(release.release_id),
        "model": release.model,
        "verdict": report.verdict,
        "verdict_passed": int(report.passed),
        "ell": int(release.ell),
        "n_strong_rules": int(adversary.n_rules),
        "max_disclosure_probability": float(adversary.max_probability_float),
        "mean_disclosure_probability_exposed": float(adversary.mean_probability_over_exposed),
        "n_records_exposed": adversary.n_records_exposed,
        "n_records_above_bound": adversary.n_records_above_bound,
        "n_records_certain": adversary.n_records_certain,
        "additional_information_loss": float(metrics.additional_information_loss),
        "reconstruction_error": float(metrics.reconstruction_error),
        "reconstruction_error_per_record": float(metrics.reconstruction_error_per_record),
        "average_raw_confidence": float(metrics.average_raw_confidence or 0.0),
        "average_released_confidence": float(metrics.average_released_confidence or 0.0),
        "n_suppressed_cells": metrics.n_suppressed_cells,
        "n_deleted": metrics.n_deleted,
        "n_sids_below_ell": structure.n_sids_below_ell,
        "n_unique_on_quasi_identifiers": report.identity_risk.n_unique,
        "smallest_class_on_quasi_identifiers": int(report.identity_risk.smallest_class or 0),
        "disclosure_histogram": dg.MetadataValue.json(adversary.histogram),
    }


def publish_metadata_in_run(context: dg.AssetExecutionContext, publish_asset: str) -> dict | None:
    """The metadata of the materialization of ``publish_asset`` earlier in this run (plain values), or None."""
    events = context.instance.all_logs(context.run.run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION)
    for event in reversed(events):
        materialization = event.asset_materialization
        if materialization is not None and materialization.asset_key == dg.AssetKey(publish_asset):
            return {key: getattr(value, "value", value) for key, value in materialization.metadata.items()}
    return None


def build_audit_asset(owner: PublicationModel) -> dg.AssetsDefinition:
    """The audit asset of a publishing job (``audit/<publish_asset>_disclosure``; ``audit/release_disclosure`` for the
    mixed model): the release that this run's publish asset published, found by its release id (never LATEST: another
    run may have moved it), checked to be the candidate this run evaluated (the content digest of every published file
    equals the one the publish step recorded from the candidate tables), with the adversary's view of it from the
    run's one pass over the candidate (``private/<candidate>_adversary``; the adversary is not run again) and the
    utility figures of its ``report.json``. ``msa-release audit`` is the independent audit from the files alone."""

    @dg.asset(
        key=[AUDIT, f"{owner.publish_asset}_disclosure"],
        deps=[owner.publish_asset],
        ins=inputs(private=["input_summary", "strong_rules", adversary_asset(owner)]),
        group_name=EVALUATION,
        kinds={"duckdb", "pandas"},
        description=f"The adversary's view of the release this run published (`{owner.publish_asset}`, by its release "
        "id): per released record, the most likely strong rule and its probability (SPEC §10), with AIL, RCE, rule "
        "confidences and stage times as metadata. The published files are checked to be the candidate the gates "
        "evaluated (table digests); the view is the run's one pass of the adversary over that candidate.",
    )
    @with_structured_failures
    def audit(
        context: dg.AssetExecutionContext,
        settings: ReleaseSettings,
        store: ReleaseStore,
        input_summary: pd.DataFrame,
        strong_rules: pd.DataFrame,
        **adversary: pd.DataFrame,
    ) -> pd.DataFrame:
        published = publish_metadata_in_run(context, owner.publish_asset)
        if published is None or published.get("release_id") is None:
            raise dg.Failure(
                f"this run published no release to audit: the audit runs after `{owner.publish_asset}` in the "
                f"`{owner.job}` job (`msa-release audit` audits a release directory from its files)"
            )
        release_id = str(published["release_id"])
        # a shared release (releases/) or a comparison (comparisons/, pipeline/release/promotion.py)
        release_dir = next(
            (d / release_id for d in (store.releases_dir, store.comparisons_dir) if (d / release_id / "manifest.json").is_file()),
            store.releases_dir / release_id,
        )
        if not (release_dir / "manifest.json").is_file():
            raise dg.Failure(
                f"release {release_id} published by this run is no longer in {store.releases_dir} or {store.comparisons_dir}"
            )
        release = read_release(release_dir)
        expected = dict(published.get("table_digests") or {})
        found = table_digests({name: getattr(release, name) for name in expected})
        differing = sorted(name for name in expected if found[name] != expected[name])
        if not expected or differing:
            raise dg.Failure(
                f"release {release_id} is not the candidate this run's gates evaluated: "
                + (f"table(s) {differing} differ from it" if differing else "the publish step recorded no table digests")
                + "; audit it from its files with `msa-release audit`"
            )
        try:
            report_data = validate_report_data(json.loads((release_dir / REPORT_DATA).read_text()))
        except (OSError, ValueError) as error:
            raise dg.Failure(f"release {release_id}: its {REPORT_DATA} cannot be read ({error})") from None
        if report_data.metrics is None or report_data.rules is None:
            raise dg.Failure(f"release {release_id}: its {REPORT_DATA} has no utility metrics to report")
        summary = input_summary.iloc[0]
        view = released_records_view(adversary[adversary_asset(owner)])
        manifest = release.manifest
        report = audit_report(
            release,
            strong_rules.reset_index(drop=True),
            view,
            min_confidence=float(manifest["min_confidence"]),
            # the manifest names no path (it is published): the raw table is this run's input, already loaded by the run
            raw=AuditedRawTable(
                path=str(resolve_input_path(settings.input_path)),
                sha256=str(summary["input_sha256"]) if "input_sha256" in input_summary else None,
                is_release_input=True,
                n_records=int(summary["n_input"]) - int(summary["n_dropped_missing"]),
            ),
            metrics={**report_data.metrics.model_dump(), "rules": [rule.model_dump() for rule in report_data.rules]},
        )
        metadata = audit_metadata(report)
        metadata["audited"] = "the release published by this run"
        metadata.update({f"seconds_{step}": float(value) for step, value in manifest.get("stage_seconds", {}).items()})
        metadata.update(table_metadata(view, rows_in=int(manifest["n_sac_released"]) + int(manifest["n_attribute_table"])))
        encoded = audit_histogram_png(report.adversary.histogram, release.ell)
        metadata["disclosure_histogram_figure"] = dg.MetadataValue.md(
            f"![Disclosure probability per released record](data:image/png;base64,{encoded})"
        )
        context.add_output_metadata(metadata)
        return view

    return audit
