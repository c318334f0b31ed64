"""The release assets generated for every publishing job from the model registry (issue 13: one factory, like
Dagster's pipeline-factory examples, instead of a near-copy publish asset per model).

For each job of :func:`pipeline.models.jobs` (``release``: mixed; ``rating_release``: plain Rating; ``kl_release``:
(k, ℓ); any plug-in registered later) :func:`job_assets` builds:

- the candidate multi-asset (``candidate/<table>`` per candidate table, ``candidate/<candidate_asset>`` with one row of
  sizes, where the gates attach, and ``private/<row_map_asset>``): the run's plug-in builds the tables
  (:meth:`pipeline.models.base.PublicationModel.build`);
- the publish asset (``<publish_asset>``, step ``<publish_step>``): gate verdict, release-series check, manifest
  (common part + the plug-in's section), report, atomic publish;
- when the model is ``audited``, the audit of the release the run published (``audit/<publish_asset>_disclosure``,
  ``assets/audit.py``).

Tables are read from the assets the plug-in's ``table_assets`` name (Rating keeps its candidate tables as
``candidate/rating_<table>``), under their contract names.

The first model of a job owns its assets; the run's ``model`` setting picks the plug-in at run time.
"""

import json
import time
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import numpy as np
import pandas as pd

from assets.mixed_model import release_secret
from assets.audit import build_audit_asset
from pipeline.asset_keys import (
    CANDIDATE,
    KINDS,
    PRIVATE,
    markdown_preview,
    model_inputs,
    model_of_run,
    publishing_group,
    table_metadata,
)
from pipeline.evaluation import profiling
from pipeline.failures import with_structured_failures
from pipeline.core.adversary import candidate_adversary, rule_holders
from pipeline.core.series import INPUT_KEY
from pipeline.models import CandidateRelease, PublicationModel, settings_of_job
from pipeline.models.base import adversary_asset, runs_strong_rule_adversary
from pipeline.release.audit import table_digests
from pipeline.release.promotion import COMPARISON_NOTICE, decide_promotion, loosened_bounds
from pipeline.release.manifest import release_overrides, utility_of_checks
from pipeline.release.publish import contract_schemas, package_versions, publish_release
from pipeline.release.registry import check_series, write_registry_entry
from pipeline.reporting.release_report import REPORT_HTML, report_files
from pipeline.resources import ReleaseSettings, ReleaseStore
from pipeline.run_events import run_step_windows

#: Descriptions of the candidate tables of the built-in models (a plug-in's other tables get a generic one).
CANDIDATE_DESCRIPTIONS = {
    "sac_released": "Candidate release table: SAC~ rows (row_id, group_id, quasi-identifiers, permuted sensitive attributes).",
    "attribute_table": "Candidate release table: attribute table (row_id, quasi-identifiers, SID number per sensitive "
    "attribute, NULL = suppressed).",
    "id_table": "Candidate release table: ID table (attribute, sid, value, count).",
    "attribute_clusters": "Candidate release table: attribute clusters (cluster_id, attribute).",
    "kl_released": "Candidate release table of the (k, ℓ) model: row_id, cluster_id, generalised quasi-identifiers, "
    "sensitive attributes (unchanged).",
}


def input_reading(settings: ReleaseSettings) -> dict:
    """How the input was read, so that ``msa-release audit --raw`` reads the raw table the same way.

    Published, so it names no unconfigured column and no path: the file's base name, the number of
    columns and the 0-based position of each configured column (when the names came from
    ``column_names``, e.g. a headerless CSV); the audit names the other columns ``column_<i>``."""
    configured = [*settings.quasi_identifiers, *settings.sensitive_attributes]
    names = settings.effective_column_names()
    return {
        "input_file": Path(settings.input_path).name,
        "input_format": settings.input_format,
        "csv_header": settings.effective_csv_header(),
        "column_count": len(names) if names else None,
        "column_positions": {name: names.index(name) for name in configured if name in names} if names else {},
        "delimiter": settings.delimiter,
        "strip_whitespace": settings.strip_whitespace,
        "missing_value_tokens": list(settings.missing_value_tokens),
        "missing_value_policy": settings.missing_value_policy,
    }


def dropped_missing_by_attribute(summary: pd.Series) -> dict[str, int]:
    """The input summary's records dropped per sensitive attribute with a missing value (JSON text; ``{}`` in a
    warehouse written before the column existed)."""
    return summary_counts(summary, "dropped_missing_by_attribute")


def summary_counts(summary: pd.Series, key: str) -> dict[str, int]:
    """A ``{column: count}`` JSON column of the input summary (``{}`` in a warehouse written before it existed)."""
    text = summary.get(key)
    if not isinstance(text, str) or not text:
        return {}
    return {str(column): int(n) for column, n in json.loads(text).items()}


def input_cleaning_fields(summary: pd.Series) -> dict[str, dict[str, int]]:
    """The manifest's ``missing_quasi_identifier_by_column`` and ``look_alike_spellings_merged`` from the input
    summary (:func:`pipeline.io.loading.input_cleaning_counts`)."""
    return {
        "missing_quasi_identifier_by_column": summary_counts(summary, "missing_quasi_identifier_by_column"),
        "look_alike_spellings_merged": summary_counts(summary, "look_alike_spellings_merged"),
    }


def release_metadata_fields(settings: ReleaseSettings, model: PublicationModel) -> dict[str, str | int | float]:
    """What a release is about, as the release asset's metadata (the same fields as the run tags of
    :func:`pipeline.run_events.release_run_tags`, for runs launched from the launchpad too): ``input`` (file name
    only), ``ell``, and ``min_confidence`` (mixed, Rating) or ``k`` (kl). Numbers stay numbers, so the UI's plots
    can be told apart by them."""
    fields: dict[str, str | int | float] = {"input": Path(settings.input_path).name, "ell": int(settings.ell)}
    if model.name == "kl":
        fields["k"] = int(settings.k)
    else:
        fields["min_confidence"] = float(settings.min_confidence)
    return fields


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


def settings_overrides(job: str, settings: ReleaseSettings) -> list[dict]:
    """The manifest's ``overrides``: the settings of ``job`` whose value weakens a default protection or threshold
    (:func:`pipeline.release.manifest.release_overrides`)."""
    defaults = {name: field.default for name, field in ReleaseSettings.model_fields.items()}
    values = {name: getattr(settings, name) for name in ReleaseSettings.model_fields}
    return release_overrides(values, defaults, settings_of_job(job))


def utility_metadata(manifest: dict) -> dict[str, float | int]:
    """The publish asset's utility figures (stable names, percentages): ``deleted_percent``, ``max_deleted_percent``,
    ``suppressed_percent_<attribute>`` per sensitive attribute, ``max_suppressed_percent`` and ``n_overrides``."""
    utility = manifest.get("utility")
    figures: dict[str, float | int] = {"n_overrides": len(manifest.get("overrides") or [])}
    if utility is None:
        return figures
    figures["deleted_percent"] = round(100 * utility["deleted_share"], 2)
    figures["max_deleted_percent"] = round(100 * utility["max_deleted_share"], 2)
    for attribute, share in utility["suppressed_share"].items():
        figures[f"suppressed_percent_{attribute}"] = round(100 * share, 2)
    figures["max_suppressed_percent"] = round(100 * utility["max_suppressed_share"], 2)
    return figures


def release_row_ids_of(raw_records: pd.DataFrame, row_map: pd.DataFrame) -> np.ndarray:
    """int64 aligned with ``raw_records``: each record's release row id (``row_map``: ``source_row_id`` -> ``row_id``),
    0 when it is not published."""
    by_source = pd.Series(row_map["row_id"].to_numpy(np.int64), index=row_map["source_row_id"].to_numpy(np.int64))
    return by_source.reindex(raw_records["row_id"].to_numpy(np.int64)).fillna(0).to_numpy(np.int64)


def parameters_of_run(model: PublicationModel, settings: ReleaseSettings):
    """The model's typed parameters; a refused value fails the step with the model's message."""
    try:
        return model.parameters(settings)
    except ValueError as error:
        raise dg.Failure(f"settings of model {model.name!r}: {error}") from None


def adversary_on_candidate(
    release: CandidateRelease,
    raw_records: pd.DataFrame,
    strong_rules: pd.DataFrame,
    sensitive_attributes,
    ell_per_attribute: dict[str, int] | None = None,
) -> pd.DataFrame:
    """The strong-rule adversary's one pass over the candidate (:func:`pipeline.core.adversary.candidate_adversary`),
    the rule holders found in ``raw_records`` through the candidate's row map (``ell_per_attribute``: each rule's
    bound 1/ℓ_j of its consequent's attribute, SPEC §6.7)."""
    tables = release.tables
    holders = rule_holders(raw_records, strong_rules, row_map=release.row_map)
    return candidate_adversary(
        strong_rules,
        holders,
        sac_released=tables["sac_released"],
        attribute_table=tables["attribute_table"].astype({a: "Int32" for a in sensitive_attributes}),
        id_table=tables["id_table"],
        attribute_clusters=tables["attribute_clusters"],
        ell_per_attribute=ell_per_attribute,
    )


def build_candidate_asset(job: str, owner: PublicationModel) -> dg.AssetsDefinition:
    """The candidate multi-asset of ``job`` (named after ``owner.candidate_asset``), see the module docstring."""
    outs = {
        name: dg.AssetOut(
            key=[CANDIDATE, owner.table_assets.get(name, name)],
            kinds=KINDS,
            description=CANDIDATE_DESCRIPTIONS.get(name, f"Candidate release table {name} ({owner.docs})."),
        )
        for name in owner.candidate_tables
    }
    outs[owner.candidate_asset] = dg.AssetOut(
        key_prefix=CANDIDATE,
        kinds=KINDS,
        description=f"The candidate release of the `{job}` job as a whole (one row of table sizes); its gates are attached here.",
    )
    outs[owner.row_map_asset] = dg.AssetOut(
        key_prefix=PRIVATE,
        kinds=KINDS,
        description="PRIVATE: release row id -> internal row id (and input row number); for the gates and the "
        "custodian's own audits, never released.",
    )
    adversary = runs_strong_rule_adversary(owner)
    if adversary:
        outs[adversary_asset(owner)] = dg.AssetOut(
            key_prefix=PRIVATE,
            kinds=KINDS,
            description="PRIVATE: the strong-rule adversary (SPEC §10) run once on the candidate: per released record "
            "the most likely rule and its probability (the audit's view), and for the records that hold a rule the "
            "probability of the rules they hold (the disclosure gate's figures). Never released.",
        )
    candidate_inputs = [
        *owner.candidate_inputs,
        *(["strong_rules"] if adversary and "strong_rules" not in owner.candidate_inputs else []),
    ]

    @dg.multi_asset(
        name=owner.candidate_asset,
        outs=outs,
        ins=model_inputs(owner, private=candidate_inputs),
        group_name=publishing_group(job),
    )
    @with_structured_failures
    def candidate(context: dg.AssetExecutionContext, settings: ReleaseSettings, store: ReleaseStore, **frames):
        """Assemble the candidate release with the run's plug-in: contract tables with fresh row ids that carry no
        input order."""
        started = time.monotonic()
        model = model_of_run(job, settings)
        release = model.build(frames, parameters_of_run(model, settings), secret=release_secret(settings, store))
        for name in owner.candidate_tables:
            frame = release.tables[name]
            context.add_output_metadata({"n_rows": len(frame), **table_metadata(frame)}, output_name=name)
        context.add_output_metadata(
            {
                **release.figures,
                "n_rows_in": len(frames["raw_records"]),
                "n_rows_out": release.n_rows_out,
                "seconds": round(time.monotonic() - started, 3),
            },
            output_name=owner.candidate_asset,
        )
        context.add_output_metadata(table_metadata(release.row_map), output_name=owner.row_map_asset)
        outputs = (*(release.tables[name] for name in owner.candidate_tables), pd.DataFrame([release.figures]), release.row_map)
        if not adversary:
            return outputs
        view = adversary_on_candidate(
            release,
            frames["raw_records"],
            frames["strong_rules"],
            settings.sensitive_attributes,
            settings.ell_by_attribute() if settings.ell_per_attribute else None,
        )
        context.add_output_metadata(table_metadata(view), output_name=adversary_asset(owner))
        return (*outputs, view)

    return candidate


def build_publish_asset(job: str, owner: PublicationModel) -> dg.AssetsDefinition:
    """The publish asset of ``job`` (key ``owner.publish_asset``, step ``owner.publish_step``)."""
    ins = model_inputs(
        owner,
        private=["input_summary", "raw_records", owner.row_map_asset, *owner.publish_inputs],
        candidate=[*owner.candidate_tables, owner.candidate_asset],
    )
    description = (
        f"Publish the gated release of the `{job}` job atomically to $MSA_RELEASE_HOME/releases/<release_id>/ and update "
        "LATEST, or, for a comparison (setting promote; baselines and releases above a bound by default), to "
        "$MSA_RELEASE_HOME/comparisons/<release_id>/ without touching LATEST."
    )

    @dg.multi_asset(
        name=owner.publish_step,
        specs=[
            dg.AssetSpec(
                owner.publish_asset,
                description=description,
                group_name=publishing_group(job),
                kinds={"duckdb", "parquet", "html"},
                deps=[asset_in.key for asset_in in ins.values()],
            )
        ],
        ins=ins,
    )
    @with_structured_failures
    def publish(context: dg.AssetExecutionContext, settings: ReleaseSettings, store: ReleaseStore, **frames):
        """Publish the gated release atomically to $MSA_RELEASE_HOME/releases/<release_id>/ and update LATEST, or to
        $MSA_RELEASE_HOME/comparisons/<release_id>/ (a comparison: LATEST untouched; pipeline/release/promotion.py)."""
        started = time.monotonic()
        publish_started = time.time()
        model = model_of_run(job, settings)
        parameters = parameters_of_run(model, settings)
        now = datetime.now(UTC)
        release_id = f"{now.strftime('%Y%m%dT%H%M%S')}Z-{context.run.run_id[:8]}"
        gates = gate_outcomes(context)
        verdict = model.verdict(gates, parameters)
        if verdict.refusal is not None:  # blocking checks already stop this step; this is a second lock on the door
            raise dg.Failure(verdict.refusal)
        promotion = decide_promotion(
            promote=settings.promote,
            baseline=model.baseline,
            model=model.name,
            overridden=verdict.overridden,
            warned=verdict.warned,
            settings={
                "allow_disclosure": settings.allow_disclosure,
                "posterior_gate": settings.posterior_gate,
                "allow_recomposition": settings.allow_recomposition,
                "posterior_slack": settings.posterior_slack,
            },
            loosened=loosened_bounds(settings.posterior_slack, gates),
        )
        target_dir = store.releases_dir if promotion.promoted else store.comparisons_dir
        raw_records, row_map = frames["raw_records"], frames[owner.row_map_asset]
        quasi_identifiers, sensitive_attributes = list(settings.quasi_identifiers), list(settings.sensitive_attributes)
        # the settings the registry compares, and the input file by its keyed digest (another release of the same file
        # is a recomposition even over other columns, whose record fingerprints match nothing)
        configuration = {**model.series_configuration(parameters), INPUT_KEY: str(frames["input_summary"].iloc[0]["input_hmac"])}
        release_row_ids = release_row_ids_of(raw_records, row_map)
        # release series: refuse to compose with an earlier, different release of the same records (RecompositionRefused)
        fingerprints, recomposition = check_series(
            store.home,
            store.home_secret(),
            raw_records,
            [*quasi_identifiers, *sensitive_attributes],
            configuration,
            allow_recomposition=settings.allow_recomposition,
            releases_dir=store.releases_dir,
            release_row_ids=release_row_ids,
            sensitive_attributes=sensitive_attributes,
            candidate_sets_of=lambda candidate_row_map: model.candidate_sets(
                frames, candidate_row_map, parameters.sensitive_attributes
            ),
            comparison=not promotion.promoted,
        )
        if recomposition and not promotion.promoted:
            context.log.warning(
                f"comparison {release_id} shares records with {len(recomposition)} shared release(s) of this home made "
                "with other settings or records: it is not refused because it is not shared; sharing its directory "
                "would let the two be intersected (docs/series.md)"
            )
        summary = frames["input_summary"].iloc[0]
        manifest = {
            "notice": None if promotion.promoted else COMPARISON_NOTICE,
            "promotion": promotion.manifest_entry(),
            "release_id": release_id,
            "created_at": now.isoformat(timespec="seconds"),
            "input_hmac": str(summary["input_hmac"]),
            "model": model.name,
            "allow_recomposition": settings.allow_recomposition,
            "recomposition": recomposition,
            "input_reading": input_reading(settings),
            "ell": settings.ell,
            # ℓ_i per sensitive attribute (SPEC §6.7): ell is then L = max ℓ_i; the (k, ℓ) model has one ℓ
            "ell_per_attribute": settings.ell_by_attribute() if model.name != "kl" else None,
            "quasi_identifiers": quasi_identifiers,
            "sensitive_attributes": sensitive_attributes,
            "n_input": int(summary["n_input"]),
            "n_dropped_missing": int(summary["n_dropped_missing"]),
            "dropped_missing_by_attribute": dropped_missing_by_attribute(summary),
            **input_cleaning_fields(summary),
            **model.manifest_section(frames, parameters, verdict, settings),
            "checks": gates,
            "utility": utility_of_checks(gates),
            "overrides": settings_overrides(job, settings),
            "stage_seconds": stage_seconds(context),
            "package_versions": package_versions(),
            "profile": run_profile(context, settings),
        }
        schemas = contract_schemas(quasi_identifiers, sensitive_attributes, model=model.name)
        candidates = model.published_tables(frames, parameters)
        tables = {name: candidates[name][list(schema)] for name, schema in schemas.items() if name in candidates}
        # report.html / report.json: aggregate figures only (rules are recoverable from the release, Lemma 22)
        report_data = model.report_data(frames, manifest, parameters, release_path=target_dir / release_id)
        extra_files = report_files(manifest, report_data, releases_dir=store.releases_dir)
        write_registry_entry(store.home, release_id, fingerprints, configuration, row_ids=release_row_ids, area=promotion.area)
        path = publish_release(
            target_dir,
            release_id,
            tables,
            schemas,
            manifest,
            extra_files=extra_files,
            keep_releases=settings.keep_releases,
            update_latest=promotion.promoted,
        )
        if promotion.promoted:
            context.log.info(f"published {model.name} release {release_id} at {path}")
        else:
            context.log.info(
                f"published {model.name} release {release_id} as a COMPARISON (not for sharing) at {path}; "
                f"releases/LATEST is unchanged: {promotion.reason}"
            )
        return dg.MaterializeResult(
            asset_key=owner.publish_asset,
            metadata={
                "release_id": release_id,
                "path": dg.MetadataValue.path(str(path)),
                "model": model.name,
                **release_metadata_fields(settings, model),
                "promoted": promotion.promoted,
                "area": promotion.area,
                **model.publish_figures(frames, manifest, report_data),
                **utility_metadata(manifest),
                "n_gates_passed": sum(g["passed"] for g in gates),
                "publish_seconds": round(time.monotonic() - started, 3),
                **{f"seconds_{step}": value for step, value in manifest["stage_seconds"].items()},
                "gates": dg.MetadataValue.json(json.loads(json.dumps([{k: g[k] for k in ("name", "status")} for g in gates]))),
                "report": dg.MetadataValue.path(str(path / REPORT_HTML)),
                # content digest of every published table, as the gates saw it (the audit checks the files against them)
                "table_digests": dg.MetadataValue.json(table_digests(tables)),
                # previews of the PUBLISHED tables only (after every gate passed), never of private tables
                **{f"preview_{name}": markdown_preview(frame) for name, frame in tables.items()},
                **profile_metadata(manifest["profile"], publish_started),
            },
        )

    return publish


def job_assets(job: str, models: tuple[PublicationModel, ...]) -> list[dg.AssetsDefinition]:
    """The generated assets of ``job`` (its first model owns them): the candidate and the publish asset, and the
    audit of the published release when the model is ``audited``."""
    owner = models[0]
    generated = [build_candidate_asset(job, owner), build_publish_asset(job, owner)]
    if owner.audited:
        generated.append(build_audit_asset(owner))
    return generated
