"""(k, ℓ)-anonymity release (P2, SPEC §14): hierarchies, equivalence classes, the candidate
table, then (only if every blocking gate passed) the atomic publish. Thin wrappers over
``pipeline.core.hierarchies`` and ``pipeline.core.kl_anonymity``; the ``kl_release`` job runs
the assets of group ``kl_model`` after ``ingest``, then the (k, ℓ) assets of group ``release``."""

import time
from datetime import datetime, UTC
from pathlib import Path

import dagster as dg
import numpy as np
import pandas as pd

from pipeline.asset_keys import CANDIDATE, KINDS, KL_MODEL, PRIVATE, RELEASE, inputs, markdown_preview, table_metadata
from assets.release import gate_outcomes, input_reading, profile_metadata, release_row_ids_of, run_profile, stage_seconds
from pipeline.core.class_attacks import class_attack_figures, class_candidate_sets
from pipeline.core.hierarchies import HierarchyError, load_hierarchies
from pipeline.core.kl_anonymity import InfeasibleError, KLAnonymization, kl_anonymize, kl_release_table
from pipeline.io.loading import InputError, file_sha256
from pipeline.io.tables import hierarchies_from_frame
from pipeline.release.registry import RecompositionRefused, check_series, write_registry_entry
from pipeline.release.publish import contract_schemas, package_versions, publish_release
from pipeline.reporting.release_report import REPORT_HTML, kl_report_data, report_files
from pipeline.resources import PROJECT_ROOT, ReleaseSettings, ReleaseStore

#: Key of the (k, ℓ) publish asset (and name of its job).
KL_RELEASE = "kl_release"
#: Columns of the release contract that a quasi-identifier or sensitive attribute must not be named.
KL_RESERVED_COLUMNS = ("row_id", "cluster_id")


def require_kl_model(settings: ReleaseSettings) -> None:
    """Refuse to run the ``kl_release`` assets for another publication model."""
    if settings.model != "kl":
        raise dg.Failure(
            f"the kl_release assets publish the (k, ℓ) model but settings.model is {settings.model!r}; set "
            "resources.settings.config.model to 'kl' (msa-release run --model kl does), or run the `release` job"
        )


def discernibility(cluster_sizes: pd.Series) -> int:
    """Discernibility metric: sum of the squared equivalence-class sizes (Bayardo & Agrawal 2005)."""
    return int((cluster_sizes.astype("int64") ** 2).sum())


@dg.asset(
    key_prefix=PRIVATE,
    ins=inputs(private=["raw_records"]),
    group_name=KL_MODEL,
    kinds=KINDS,
    description="PRIVATE: one validated ARX generalisation hierarchy per quasi-identifier (file, SHA-256, height, base values).",
)
def generalization_hierarchies(
    context: dg.AssetExecutionContext, settings: ReleaseSettings, raw_records: pd.DataFrame
) -> pd.DataFrame:
    """One row per quasi-identifier: the ARX hierarchy file read for it (path, SHA-256, height, base values),
    validated and checked to list every value of the data; a missing file or value fails the run with its name."""
    started = time.monotonic()
    require_kl_model(settings)
    quasi_identifiers = settings.quasi_identifiers
    reserved = [c for c in [*quasi_identifiers, *settings.sensitive_attributes] if c in KL_RESERVED_COLUMNS]
    if reserved:
        raise InputError(f"column name(s) {reserved} are reserved by the (k, ℓ) release contract; rename them in the input")
    directory = settings.hierarchies_path()
    if not directory.is_dir():
        looked = (
            "" if Path(settings.hierarchies_dir).expanduser().is_absolute() else f" (looked in {Path.cwd()} and {PROJECT_ROOT})"
        )
        raise HierarchyError(
            f"hierarchy directory {settings.hierarchies_dir!r} not found{looked}; pass --hierarchies DIR "
            "(one ARX file per quasi-identifier, named '<column>.csv' or '*_hierarchy_<column>.csv')"
        )
    hierarchies = load_hierarchies(
        directory,
        quasi_identifiers,
        data_values={a: raw_records[a].astype(str).unique() for a in quasi_identifiers},
        data_source=f"input {settings.input_path}",
    )
    rows = []
    for attribute in quasi_identifiers:
        hierarchy = hierarchies[attribute]
        path = Path(hierarchy.source).resolve()
        rows.append(
            {
                "attribute": attribute,
                "file": path.name,
                "path": str(path),
                "sha256": file_sha256(path),
                "height": hierarchy.height,
                "n_base_values": len(hierarchy.base_values),
                "n_values_in_data": int(raw_records[attribute].nunique()),
            }
        )
    frame = pd.DataFrame(rows).astype({"height": "int64", "n_base_values": "int64", "n_values_in_data": "int64"})
    metadata: dict = {"n_hierarchies": len(frame), "hierarchies_directory": dg.MetadataValue.path(str(directory))}
    for row in rows:
        metadata[f"height_{row['attribute']}"] = row["height"]
        metadata[f"n_base_values_{row['attribute']}"] = row["n_base_values"]
    metadata.update(table_metadata(frame, rows_in=len(raw_records), started=started))
    context.add_output_metadata(metadata)
    return frame


@dg.multi_asset(
    outs={
        "kl_assignments": dg.AssetOut(
            key_prefix=PRIVATE, kinds=KINDS, description="PRIVATE: each input record's equivalence class (row_id, cluster_id)."
        ),
        "kl_clusters": dg.AssetOut(
            key_prefix=PRIVATE,
            kinds=KINDS,
            description="PRIVATE: one row per equivalence class: size, Diverse, cost S, naive cost, "
            "generalised quasi-identifier labels and levels climbed.",
        ),
        "kl_suppressed_records": dg.AssetOut(
            key_prefix=PRIVATE,
            kinds=KINDS,
            description="PRIVATE: records left out of the (k, ℓ) release (none today: "
            "every record is released, or the run fails).",
        ),
    },
    ins=inputs(private=["raw_records", "generalization_hierarchies"]),
    group_name=KL_MODEL,
)
def kl_anonymization(
    context: dg.AssetExecutionContext,
    settings: ReleaseSettings,
    raw_records: pd.DataFrame,
    generalization_hierarchies: pd.DataFrame,
):
    """(k, ℓ)-anonymise the records (P2, SPEC §14): equivalence classes of at least k records with
    Diverse >= ℓ, quasi-identifiers generalised to the lowest common ancestor along the hierarchies."""
    started = time.monotonic()
    require_kl_model(settings)
    quasi_identifiers, sensitive_attributes = settings.quasi_identifiers, settings.sensitive_attributes
    try:
        anonymization = kl_anonymize(
            raw_records,
            quasi_identifiers,
            sensitive_attributes,
            hierarchies_from_frame(generalization_hierarchies),
            k=settings.k,
            ell=settings.ell,
            weights=settings.effective_generalization_weights(),
            method=settings.kl_method,
            max_block_size=settings.max_block_size,
            source=f"input {settings.input_path}",
        )
    except InfeasibleError as error:
        raise InfeasibleError(
            f"input {settings.input_path} ({len(raw_records)} records) cannot be made (k, ℓ)-anonymous with "
            f"k={settings.k}, ell={settings.ell}, method {settings.kl_method!r}: {error}; nothing is published"
        ) from error
    clusters = anonymization.clusters
    sizes = clusters["n_records"]
    metadata = {
        "n_records": len(raw_records),
        "n_clusters": len(clusters),
        "average_cluster_size": float(sizes.mean()),
        "min_cluster_size": int(sizes.min()),
        "max_cluster_size": int(sizes.max()),
        "min_diverse": int(clusters["diverse"].min()),
        "total_generalization_cost": float(anonymization.total_cost),
        "average_generalization_cost_per_record": float(anonymization.total_cost / len(raw_records)),
        "total_naive_cost": int(anonymization.total_naive_cost),
        "discernibility": discernibility(sizes),
        "n_blocks": int(anonymization.n_blocks),
        "n_suppressed_records": 0,
        "k": settings.k,
        "ell": settings.ell,
        **{
            f"average_generalization_level_{a}": float((clusters[f"{a}__level"] * sizes).sum() / sizes.sum())
            for a in quasi_identifiers
        },
        "seconds": round(time.monotonic() - started, 3),
        "dagster/row_count": len(clusters),
        "n_rows_in": len(raw_records),
        "n_rows_out": len(clusters),
    }
    context.add_output_metadata(metadata, output_name="kl_clusters")
    context.add_output_metadata(
        {"n_records": len(anonymization.assignments), **table_metadata(anonymization.assignments, rows_in=len(raw_records))},
        output_name="kl_assignments",
    )
    context.add_output_metadata({"n_suppressed_records": 0}, output_name="kl_suppressed_records")
    return anonymization.assignments, clusters, pd.DataFrame({"row_id": np.array([], dtype=np.int64)})


@dg.multi_asset(
    outs={
        "kl_released": dg.AssetOut(
            key_prefix=CANDIDATE,
            kinds=KINDS,
            description="Candidate release table of the (k, ℓ) model: row_id, cluster_id, "
            "generalised quasi-identifiers, sensitive attributes (unchanged).",
        ),
        "kl_release_candidate": dg.AssetOut(
            key_prefix=CANDIDATE,
            kinds=KINDS,
            description="The (k, ℓ) candidate release as a whole (one row of sizes); the (k, ℓ) gates are attached here.",
        ),
        "kl_release_row_map": dg.AssetOut(
            key_prefix=PRIVATE,
            kinds=KINDS,
            description="PRIVATE: release row id -> internal row id; used by the gates, never released.",
        ),
    },
    ins=inputs(private=["raw_records", "kl_assignments", "kl_clusters"]),
    group_name=RELEASE,
)
def kl_release_candidate(
    context: dg.AssetExecutionContext,
    settings: ReleaseSettings,
    raw_records: pd.DataFrame,
    kl_assignments: pd.DataFrame,
    kl_clusters: pd.DataFrame,
):
    """Assemble the candidate (k, ℓ) table: clusters numbered by content, rows by cluster, so that
    neither id carries the input order."""
    started = time.monotonic()
    require_kl_model(settings)
    anonymization = KLAnonymization(
        assignments=kl_assignments,
        clusters=kl_clusters,
        total_cost=float(kl_clusters["cost"].sum()),
        total_naive_cost=int(kl_clusters["naive_cost"].sum()),
        n_blocks=1,  # not stored in the warehouse; kl_release_table does not read it
        method=settings.kl_method,
        k=settings.k,
        ell=settings.ell,
    )
    released, row_map = kl_release_table(raw_records, anonymization, settings.quasi_identifiers, settings.sensitive_attributes)
    sizes = {"n_rows_kl_released": len(released), "n_clusters": int(released["cluster_id"].nunique())}
    context.add_output_metadata(
        {"n_rows": len(released), "n_clusters": sizes["n_clusters"], **table_metadata(released, rows_in=len(raw_records))},
        output_name="kl_released",
    )
    context.add_output_metadata(
        {**sizes, "n_rows_in": len(raw_records), "n_rows_out": len(released), "seconds": round(time.monotonic() - started, 3)},
        output_name="kl_release_candidate",
    )
    context.add_output_metadata(table_metadata(row_map), output_name="kl_release_row_map")
    return released, pd.DataFrame([sizes]), row_map


_PUBLISH_INPUTS = inputs(
    private=[
        "input_summary",
        "kl_suppressed_records",
        "kl_clusters",
        "generalization_hierarchies",
        "raw_records",
        "kl_release_row_map",
    ],
    candidate=["kl_released", "kl_release_candidate"],
)


def hierarchies_manifest(settings: ReleaseSettings, generalization_hierarchies: pd.DataFrame) -> dict:
    """The manifest's ``hierarchies`` entry: the directory's base name (never a path: the manifest is
    published) and, per quasi-identifier, the file name, its SHA-256 and height."""
    return {
        "directory": Path(settings.hierarchies_dir).name,
        "files": {
            row.attribute: {"file": row.file, "sha256": row.sha256, "height": int(row.height)}
            for row in generalization_hierarchies.itertuples(index=False)
        },
    }


@dg.multi_asset(
    name="publish_kl_release",
    specs=[
        dg.AssetSpec(
            KL_RELEASE,
            description="Publish the gated (k, ℓ) release atomically to $MSA_RELEASE_HOME/releases/<release_id>/ and update LATEST.",
            group_name=RELEASE,
            kinds={"duckdb", "parquet", "html"},
            deps=[asset_in.key for asset_in in _PUBLISH_INPUTS.values()],
        )
    ],
    ins=_PUBLISH_INPUTS,
)
def publish_kl_release(
    context: dg.AssetExecutionContext,
    settings: ReleaseSettings,
    store: ReleaseStore,
    kl_released: pd.DataFrame,
    kl_release_candidate: pd.DataFrame,
    input_summary: pd.DataFrame,
    kl_suppressed_records: pd.DataFrame,
    kl_clusters: pd.DataFrame,
    generalization_hierarchies: pd.DataFrame,
    raw_records: pd.DataFrame,
    kl_release_row_map: pd.DataFrame,
) -> dg.MaterializeResult:
    """Publish the gated (k, ℓ) release atomically to $MSA_RELEASE_HOME/releases/<release_id>/ and update LATEST."""
    started = time.monotonic()
    publish_started = time.time()
    require_kl_model(settings)
    now = datetime.now(UTC)
    release_id = f"{now.strftime('%Y%m%dT%H%M%S')}Z-{context.run.run_id[:8]}"
    gates = gate_outcomes(context)
    failed = [g["name"] for g in gates if g["status"] != "passed"]
    if failed:  # blocking checks already stop this step; this is a second lock on the door
        raise dg.Failure(f"release refused: gate(s) {failed} failed")
    quasi_identifiers, sensitive_attributes = settings.quasi_identifiers, settings.sensitive_attributes
    release_row_ids = release_row_ids_of(raw_records, kl_release_row_map)
    try:  # release series: refuse to compose with an earlier, different release of the same records
        fingerprints, recomposition = check_series(
            store.home,
            store.home_secret(),
            raw_records,
            [*quasi_identifiers, *sensitive_attributes],
            settings.series_configuration(),
            allow_recomposition=settings.allow_recomposition,
            releases_dir=store.releases_dir,
            release_row_ids=release_row_ids,
            sensitive_attributes=list(sensitive_attributes),
            candidate_sets_of=lambda row_map: class_candidate_sets(kl_released, row_map, sensitive_attributes),
        )
    except RecompositionRefused as error:
        raise dg.Failure(str(error)) from error
    summary = input_summary.iloc[0]
    sizes = kl_released.groupby("cluster_id", observed=True).size()
    manifest = {
        "release_id": release_id,
        "created_at": now.isoformat(timespec="seconds"),
        "input_hmac": str(summary["input_hmac"]),
        "model": "kl",
        "allow_disclosure": None,  # not a setting of this model
        "allow_recomposition": settings.allow_recomposition,
        "recomposition": recomposition,
        "disclosure_override_used": False,
        "input_reading": input_reading(settings),
        "ell": settings.ell,
        "quasi_identifiers": list(quasi_identifiers),
        "sensitive_attributes": list(sensitive_attributes),
        "n_input": int(summary["n_input"]),
        "n_dropped_missing": int(summary["n_dropped_missing"]),
        "checks": gates,
        "stage_seconds": stage_seconds(context),
        "package_versions": package_versions(),
        "k": settings.k,
        "kl_method": settings.kl_method,
        "max_block_size": settings.max_block_size if settings.kl_method == "blocked" else None,
        "hierarchies": hierarchies_manifest(settings, generalization_hierarchies),
        "generalization_weights": settings.effective_generalization_weights(),
        "n_released": len(kl_released),
        "n_suppressed_records": len(kl_suppressed_records),
        "n_clusters": len(sizes),
        "total_generalization_cost": float(kl_clusters["cost"].sum()),
        "total_naive_cost": int(kl_clusters["naive_cost"].sum()),
        # the adversaries of docs/attacks.md on this release: measured and published, not gated (issue 12)
        "attacks": class_attack_figures(
            raw_records,
            kl_released,
            kl_release_row_map,
            quasi_identifiers,
            sensitive_attributes,
            ell=settings.ell,
            slack=settings.posterior_slack,
        ),
        "profile": run_profile(context, settings),
    }
    schemas = contract_schemas(quasi_identifiers, sensitive_attributes, model="kl")
    tables = {"kl_released": kl_released[list(schemas["kl_released"])]}
    report_data = kl_report_data(kl_released, kl_clusters, quasi_identifiers)
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
    context.log.info(f"published (k, ℓ) release {release_id} at {path}")
    return dg.MaterializeResult(
        asset_key=KL_RELEASE,
        metadata={
            "release_id": release_id,
            "path": dg.MetadataValue.path(str(path)),
            "model": "kl",
            "k": settings.k,
            "ell": settings.ell,
            "n_input": manifest["n_input"],
            "n_dropped_missing": manifest["n_dropped_missing"],
            "n_released": manifest["n_released"],
            "n_suppressed_records": manifest["n_suppressed_records"],
            "n_clusters": manifest["n_clusters"],
            "average_cluster_size": float(sizes.mean()) if len(sizes) else 0.0,
            "total_generalization_cost": manifest["total_generalization_cost"],
            "total_naive_cost": manifest["total_naive_cost"],
            "discernibility": discernibility(sizes),
            **{f"attack_{key}": value for key, value in manifest["attacks"].items()},
            "n_gates_passed": sum(g["passed"] for g in gates),
            "publish_seconds": round(time.monotonic() - started, 3),
            **{f"seconds_{step}": value for step, value in manifest["stage_seconds"].items()},
            "gates": dg.MetadataValue.json([{k: g[k] for k in ("name", "status")} for g in gates]),
            "n_rows_in": manifest["n_input"],
            "n_rows_out": manifest["n_released"],
            "min_diverse": int(kl_clusters["diverse"].min()) if len(kl_clusters) else 0,
            "report": dg.MetadataValue.path(str(path / REPORT_HTML)),
            # preview of the PUBLISHED table only (after every gate passed)
            "preview_kl_released": markdown_preview(tables["kl_released"]),
            **profile_metadata(manifest["profile"], publish_started),
        },
    )
