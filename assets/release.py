"""Release: assemble the candidate tables, then (only if every blocking gate passed) publish."""

import dataclasses
import json
import time
from pathlib import Path
from datetime import datetime, UTC

import dagster as dg
import numpy as np
import pandas as pd

from pipeline.asset_keys import CANDIDATE, KINDS, PRIVATE, RELEASE, inputs, markdown_preview, table_metadata
from assets.mixed_model import release_secret
from pipeline.io.tables import clusters_from_frame
from pipeline.release.audit import PublishedRelease
from pipeline.core.composition import candidate_sets
from pipeline.core.metrics import domain_sizes
from pipeline.core.hierarchies import load_available_hierarchies
from pipeline.core.mixed_model import assemble_release_tables
from pipeline.evaluation import profiling
from pipeline.run_events import run_step_windows
from pipeline.release.registry import RecompositionRefused, check_series, write_registry_entry
from pipeline.release.publish import contract_schemas, package_versions, publish_release
from pipeline.reporting.release_report import REPORT_HTML, mixed_report_data, private_rating_baseline, report_files
from pipeline.resources import ReleaseSettings, ReleaseStore

CANDIDATE_TABLES = ("sac_released", "attribute_table", "id_table", "attribute_clusters")


def require_release_model(settings: ReleaseSettings) -> None:
    """Refuse to assemble or publish a model this job does not make (the (k, ℓ) model has its own job)."""
    if settings.model not in ("mixed", "rating"):
        raise dg.Failure(
            f"the `release` job publishes the mixed and Rating models, not {settings.model!r}; "
            "run the `kl_release` job (msa-release run --model kl) for the (k, ℓ) model"
        )


@dg.multi_asset(
    outs={
        "sac_released": dg.AssetOut(
            key_prefix=CANDIDATE,
            kinds=KINDS,
            description="Candidate release table: SAC~ rows (row_id, group_id, quasi-identifiers, permuted sensitive attributes).",
        ),
        "attribute_table": dg.AssetOut(
            key_prefix=CANDIDATE,
            kinds=KINDS,
            description="Candidate release table: attribute table (row_id, quasi-identifiers, SID number per sensitive attribute, NULL = suppressed).",
        ),
        "id_table": dg.AssetOut(
            key_prefix=CANDIDATE, kinds=KINDS, description="Candidate release table: ID table (attribute, sid, value, count)."
        ),
        "attribute_clusters": dg.AssetOut(
            key_prefix=CANDIDATE, kinds=KINDS, description="Candidate release table: attribute clusters (cluster_id, attribute)."
        ),
        "release_candidate": dg.AssetOut(
            key_prefix=CANDIDATE,
            kinds=KINDS,
            description="The candidate release as a whole (one row of table sizes); the release gates are attached here.",
        ),
        "release_row_map": dg.AssetOut(
            key_prefix=PRIVATE,
            kinds=KINDS,
            description="PRIVATE: release row id -> internal row id and input row number (1-based input line); for the gates and the custodian's own audits, never released.",
        ),
    },
    ins=inputs(
        private=["raw_records", "sac_permuted", "ir_attribute_sids", "ir_id_table", "sensitive_attribute_clusters", "ir_left"]
    ),
    group_name=RELEASE,
)
def release_candidate(
    context: dg.AssetExecutionContext,
    settings: ReleaseSettings,
    store: ReleaseStore,
    raw_records: pd.DataFrame,
    sac_permuted: pd.DataFrame,
    ir_attribute_sids: pd.DataFrame,
    ir_id_table: pd.DataFrame,
    sensitive_attribute_clusters: pd.DataFrame,
    ir_left: pd.DataFrame,
):
    """Assemble the candidate release: contract tables with fresh row ids that carry no input order."""
    started = time.monotonic()
    require_release_model(settings)
    tables = assemble_release_tables(
        raw_records,
        settings.quasi_identifiers,
        settings.sensitive_attributes,
        sac_permuted=sac_permuted,
        attribute_sids=ir_attribute_sids.astype({a: "Int32" for a in settings.sensitive_attributes}),
        id_table=ir_id_table,
        clusters=clusters_from_frame(sensitive_attribute_clusters),
        secret=release_secret(settings, store),
        generalize=settings.model == "mixed" and settings.grouping == "qi_aware",
        hierarchies=load_available_hierarchies(settings.hierarchies_path(), settings.quasi_identifiers)
        if settings.grouping == "qi_aware"
        else None,
        attribute_table_labels=ir_left if "stratum" in ir_left.columns else None,
    )
    # the custodian's audit map (private, never released): release row id -> input line
    tables = dataclasses.replace(tables, row_map=tables.row_map.assign(input_row_number=tables.row_map["source_row_id"]))
    if settings.model == "rating":  # plain Rating publishes no SAC~ and no clusters (SPEC §7)
        tables = dataclasses.replace(tables, attribute_clusters=tables.attribute_clusters.iloc[0:0])
    sizes = {f"n_rows_{name}": len(getattr(tables, name)) for name in CANDIDATE_TABLES}
    for name in CANDIDATE_TABLES:
        context.add_output_metadata(
            {"n_rows": sizes[f"n_rows_{name}"], **table_metadata(getattr(tables, name))}, output_name=name
        )
    context.add_output_metadata(
        {
            **sizes,
            **tables.generalization,
            "n_rows_in": len(raw_records),
            "n_rows_out": len(tables.sac_released) + len(tables.attribute_table),
            "seconds": round(time.monotonic() - started, 3),
        },
        output_name="release_candidate",
    )
    context.add_output_metadata(table_metadata(tables.row_map), output_name="release_row_map")
    return (
        tables.sac_released,
        tables.attribute_table,
        tables.id_table,
        tables.attribute_clusters,
        pd.DataFrame([{**sizes, **tables.generalization}]),
        tables.row_map,
    )


def input_reading(settings: ReleaseSettings) -> dict:
    """How the input was read, so that ``msa-release audit --raw`` reads the raw table the same way.

    Published, so it names no unconfigured column and no path: the file's base name, the number of
    columns and the 0-based position of each configured column (when the names came from
    ``column_names``, e.g. a headerless CSV); the audit names the other columns ``column_<i>``."""
    configured = [*settings.quasi_identifiers, *settings.sensitive_attributes]
    names = list(settings.column_names)
    return {
        "input_file": Path(settings.input_path).name,
        "input_format": settings.input_format,
        "csv_header": settings.csv_header,
        "column_count": len(names) if names else None,
        "column_positions": {name: names.index(name) for name in configured if name in names} if names else {},
        "delimiter": settings.delimiter,
        "strip_whitespace": settings.strip_whitespace,
        "missing_value_tokens": list(settings.missing_value_tokens),
        "missing_value_policy": settings.missing_value_policy,
    }


def step_windows(context: dg.AssetExecutionContext) -> dict[str, tuple[float, float]]:
    """Start and end (seconds since the epoch) of every step of this run finished so far."""
    return run_step_windows(context.instance, context.run.run_id)


def stage_seconds(context: dg.AssetExecutionContext) -> dict[str, float]:
    """Wall time (s) of every step of this run finished so far, from the Dagster event log."""
    return {step: round(end - start, 3) for step, (start, end) in step_windows(context).items()}


def run_profile(context: dg.AssetExecutionContext, settings: ReleaseSettings) -> dict | None:
    """With ``settings.profile``: wall time and peak RSS of every step and stage finished so far
    (the manifest's ``profile``; see ``pipeline.evaluation.profiling``), else None."""
    if not settings.profile:
        return None
    profile = profiling.build_profile(step_windows(context), profiling.current_sampler())
    profile["note"] = profiling.PUBLISH_NOTE
    return profile


def profile_metadata(profile: dict | None, publish_started: float) -> dict[str, float]:
    """Numeric metadata of a profiled run (``profile_seconds_<stage>``, ``profile_peak_rss_mb_<stage>``),
    the publish step's own figures included (measured from ``publish_started``, epoch seconds, to now)."""
    if profile is None:
        return {}
    entries = profiling.metadata_entries(profile)
    now = time.time()
    entries["profile_seconds_publish"] = round(now - publish_started, 3)
    sampler = profiling.current_sampler()
    if sampler is not None:
        entries["profile_peak_rss_mb_publish"] = round((sampler.peak_bytes(publish_started, now) or 0) / 2**20, 1)
        entries["profile_peak_rss_mb_process"] = round(sampler.process_peak_bytes() / 2**20, 1)
    return entries


def gate_outcomes(context: dg.AssetExecutionContext) -> list[dict]:
    """Results of this run's asset checks, read from the Dagster event log (name, passed, figures)."""
    records = context.instance.get_records_for_run(context.run.run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION).records
    outcomes = []
    for record in records:
        evaluation = record.event_log_entry.dagster_event.event_specific_data
        figures = {key: value.value for key, value in evaluation.metadata.items()}
        applicable = figures.pop("applicable", True)
        if not applicable:
            status = "not_applicable"
        elif evaluation.passed:
            status = "passed"
        elif evaluation.severity == dg.AssetCheckSeverity.WARN:
            status = "failed_overridden"
        else:
            status = "failed"
        outcomes.append({"name": evaluation.check_name, "passed": bool(evaluation.passed), "status": status, "observed": figures})
    return sorted(outcomes, key=lambda o: o["name"])


_PUBLISH_INPUTS = inputs(
    private=["input_summary", "deleted_records", "strong_rules", "raw_records", "release_row_map"],
    candidate=[*CANDIDATE_TABLES, "release_candidate"],
)


def release_row_ids_of(raw_records: pd.DataFrame, row_map: pd.DataFrame) -> np.ndarray:
    """int64 aligned with ``raw_records``: each record's release row id (``row_map``: ``source_row_id`` -> ``row_id``),
    0 when it is not published."""
    by_source = pd.Series(row_map["row_id"].to_numpy(np.int64), index=row_map["source_row_id"].to_numpy(np.int64))
    return by_source.reindex(raw_records["row_id"].to_numpy(np.int64)).fillna(0).to_numpy(np.int64)


def release_report_metadata(manifest: dict, data: dict) -> dict:
    """Numeric metadata of a published mixed or Rating release, stable names (the UI charts them)."""
    observed = {g["name"]: g.get("observed", {}) for g in manifest["checks"]}
    disclosure = observed.get("disclosure_within_bound", {})
    groups = observed.get("sac_released_is_l_diverse", {})
    metrics = data["metrics"]
    return {
        "n_rows_in": manifest["n_input"],
        "n_rows_out": manifest["n_sac_released"] + manifest["n_attribute_table"],
        "n_strong_rules": len(data["rules"]),
        "n_groups": int(groups.get("n_groups", 0)),
        "max_disclosure_probability": float(disclosure.get("max_disclosure_probability", 0.0)),
        "n_records_above_bound": int(disclosure.get("n_records_above_bound", 0)),
        "additional_information_loss": float(metrics["additional_information_loss"]),
        "reconstruction_error": float(metrics["reconstruction_error"]),
        "reconstruction_error_per_record": float(metrics["reconstruction_error_per_record"]),
        "average_raw_confidence": float(metrics["average_raw_confidence"] or 0.0),
        "average_released_confidence": float(metrics["average_released_confidence"] or 0.0),
    }


@dg.multi_asset(
    name="publish_release",
    specs=[
        dg.AssetSpec(
            "release",
            description="Publish the gated release atomically to $MSA_RELEASE_HOME/releases/<release_id>/ and update LATEST.",
            group_name=RELEASE,
            kinds={"duckdb", "parquet", "html"},
            deps=[asset_in.key for asset_in in _PUBLISH_INPUTS.values()],
        )
    ],
    ins=_PUBLISH_INPUTS,
)
def publish_release_asset(
    context: dg.AssetExecutionContext,
    settings: ReleaseSettings,
    store: ReleaseStore,
    sac_released: pd.DataFrame,
    attribute_table: pd.DataFrame,
    id_table: pd.DataFrame,
    attribute_clusters: pd.DataFrame,
    release_candidate: pd.DataFrame,
    input_summary: pd.DataFrame,
    deleted_records: pd.DataFrame,
    strong_rules: pd.DataFrame,
    raw_records: pd.DataFrame,
    release_row_map: pd.DataFrame,
) -> dg.MaterializeResult:
    """Publish the gated release atomically to $MSA_RELEASE_HOME/releases/<release_id>/ and update LATEST."""
    started = time.monotonic()
    publish_started = time.time()
    require_release_model(settings)
    now = datetime.now(UTC)
    release_id = f"{now.strftime('%Y%m%dT%H%M%S')}Z-{context.run.run_id[:8]}"
    gates = gate_outcomes(context)
    failed = [g["name"] for g in gates if g["status"] == "failed"]
    if failed:  # blocking checks already stop this step; this is a second lock on the door
        raise dg.Failure(f"release refused: gate(s) {failed} failed")
    overridden = [g["name"] for g in gates if g["status"] == "failed_overridden"]
    posterior_warned = "posterior_within_bound" in overridden and settings.posterior_gate == "warn"
    overridden = [name for name in overridden if not (name == "posterior_within_bound" and posterior_warned)]
    if overridden and not settings.allow_disclosure:
        raise dg.Failure(f"release refused: gate(s) {overridden} failed and allow_disclosure is off")
    quasi_identifier_columns, sensitive_attribute_columns = settings.quasi_identifiers, settings.sensitive_attributes
    release_row_ids = release_row_ids_of(raw_records, release_row_map)
    try:  # release series: refuse to compose with an earlier, different release of the same records
        fingerprints, recomposition = check_series(
            store.home,
            store.home_secret(),
            raw_records,
            [*quasi_identifier_columns, *sensitive_attribute_columns],
            settings.series_configuration(),
            allow_recomposition=settings.allow_recomposition,
            releases_dir=store.releases_dir,
            release_row_ids=release_row_ids,
            sensitive_attributes=list(sensitive_attribute_columns),
            candidate_sets_of=lambda row_map: candidate_sets(
                sensitive_attribute_columns,
                row_map=row_map,
                sac_released=sac_released,
                attribute_table=attribute_table,
                id_table=id_table,
            ),
        )
    except RecompositionRefused as error:
        raise dg.Failure(str(error)) from error
    summary = input_summary.iloc[0]
    attribute_table = attribute_table.astype({a: "Int32" for a in sensitive_attribute_columns})
    n_suppressed = int(attribute_table[sensitive_attribute_columns].isna().sum().sum())
    manifest = {
        "release_id": release_id,
        "created_at": now.isoformat(timespec="seconds"),
        "input_hmac": str(summary["input_hmac"]),
        "model": settings.model,
        "allow_disclosure": settings.allow_disclosure,
        "disclosure_override_used": bool(overridden),
        "allow_recomposition": settings.allow_recomposition,
        "recomposition": recomposition,
        "posterior_slack": settings.posterior_slack,
        "posterior_gate": settings.posterior_gate,
        "posterior_gate_warned": posterior_warned,
        "input_reading": input_reading(settings),
        "ell": settings.ell,
        "min_confidence": settings.min_confidence,
        "min_support": settings.effective_min_support(),
        "seed": settings.seed,
        "randomness": settings.randomness,
        "grouping": settings.grouping,
        "stratum_deletion_budget": settings.stratum_deletion_budget if settings.grouping == "qi_aware" else None,
        "residual_policy": settings.residual_policy,
        "n_deleted_for_eligibility": int((deleted_records["reason"] == "eligibility").sum())
        if "reason" in deleted_records
        else 0,
        "n_generalized_groups": int(release_candidate["n_generalized_groups"].iloc[0])
        if "n_generalized_groups" in release_candidate
        else 0,
        "n_generalized_cells": int(release_candidate["n_generalized_cells"].iloc[0])
        if "n_generalized_cells" in release_candidate
        else 0,
        "n_strata": int(release_candidate["n_strata"].iloc[0]) if "n_strata" in release_candidate else 0,
        "n_generalized_attribute_table_cells": int(release_candidate["n_generalized_attribute_table_cells"].iloc[0])
        if "n_generalized_attribute_table_cells" in release_candidate
        else 0,
        "quasi_identifiers": list(quasi_identifier_columns),
        "sensitive_attributes": list(sensitive_attribute_columns),
        "n_input": int(summary["n_input"]),
        "n_dropped_missing": int(summary["n_dropped_missing"]),
        "n_sac_released": len(sac_released),
        "n_attribute_table": len(attribute_table),
        "n_deleted": len(deleted_records),
        "n_suppressed_cells": n_suppressed,
        "checks": gates,
        "stage_seconds": stage_seconds(context),
        "package_versions": package_versions(),
        "profile": run_profile(context, settings),
    }
    schemas = contract_schemas(quasi_identifier_columns, sensitive_attribute_columns, model=settings.model)
    candidates = {
        "sac_released": sac_released,
        "attribute_table": attribute_table,
        "id_table": id_table,
        "attribute_clusters": attribute_clusters,
    }
    tables = {name: candidates[name][list(schema)] for name, schema in schemas.items() if name in candidates}
    # report.html / report.json: aggregate figures only (rules are recoverable from the release, Lemma 22)
    in_memory = PublishedRelease(
        path=store.releases_dir / release_id,
        manifest=manifest,
        sac_released=sac_released,
        attribute_table=attribute_table,
        id_table=id_table,
        attribute_clusters=attribute_clusters,
    )
    report_data = mixed_report_data(in_memory, strong_rules, domain=domain_sizes(raw_records, sensitive_attribute_columns))
    if settings.model == "mixed" and len(raw_records) <= settings.private_baseline_max_records:
        # the Rating baseline of report.html, computed privately from the same records (issue 12, series (c)): never
        # published as a release, so it cannot be intersected with this one; aggregate figures only
        report_data["private_rating_baseline"] = private_rating_baseline(
            raw_records,
            quasi_identifier_columns,
            sensitive_attribute_columns,
            ell=settings.ell,
            min_confidence=settings.min_confidence,
            rules=strong_rules,
        )
    elif settings.model == "mixed":
        report_data["private_rating_baseline"] = {
            "model": "rating",
            "published": False,
            "not_computed": True,
            "n_records": len(raw_records),
            "max_records": settings.private_baseline_max_records,
        }
    extra_files = report_files(manifest, report_data, releases_dir=store.releases_dir)
    write_registry_entry(store.home, release_id, fingerprints, settings.series_configuration(), row_ids=release_row_ids)
    path = publish_release(
        store.releases_dir,
        release_id,
        tables,
        schemas,
        manifest,
        extra_files=extra_files,
        keep_releases=settings.keep_releases,
    )
    context.log.info(f"published release {release_id} at {path}")
    return dg.MaterializeResult(
        asset_key="release",
        metadata={
            "release_id": release_id,
            "path": dg.MetadataValue.path(str(path)),
            "n_input": manifest["n_input"],
            "n_dropped_missing": manifest["n_dropped_missing"],
            "n_sac_released": manifest["n_sac_released"],
            "n_attribute_table": manifest["n_attribute_table"],
            "n_deleted": manifest["n_deleted"],
            "n_deleted_for_eligibility": manifest["n_deleted_for_eligibility"],
            "n_generalized_groups": manifest["n_generalized_groups"],
            "n_generalized_cells": manifest["n_generalized_cells"],
            "n_strata": manifest["n_strata"],
            "n_generalized_attribute_table_cells": manifest["n_generalized_attribute_table_cells"],
            "n_suppressed_cells": n_suppressed,
            "n_gates_passed": sum(g["passed"] for g in gates),
            "publish_seconds": round(time.monotonic() - started, 3),
            **{f"seconds_{step}": value for step, value in manifest["stage_seconds"].items()},
            "model": settings.model,
            "disclosure_override_used": int(bool(overridden)),
            "gates": dg.MetadataValue.json(json.loads(json.dumps([{k: g[k] for k in ("name", "status")} for g in gates]))),
            "report": dg.MetadataValue.path(str(path / REPORT_HTML)),
            **release_report_metadata(manifest, report_data),
            # previews of the PUBLISHED tables only (after every gate passed), never of private tables
            **{f"preview_{name}": markdown_preview(frame) for name, frame in tables.items()},
            **profile_metadata(manifest["profile"], publish_started),
        },
    )
