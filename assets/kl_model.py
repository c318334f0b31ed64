"""(k, ℓ)-anonymity stages (P2, SPEC §14): validated hierarchies and equivalence classes. Thin wrappers over
``pipeline.core.hierarchies`` and ``pipeline.core.kl_anonymity``; the ``kl_release`` job runs the assets of group
``kl_model`` after ``ingest``, then the candidate, gates and publish generated for the (k, ℓ) plug-in
(``assets/publish.py``, :mod:`pipeline.models.kl`)."""

import time
from pathlib import Path

import dagster as dg
import numpy as np
import pandas as pd

from pipeline.asset_keys import KINDS, KL_MODEL, PRIVATE, inputs, model_of_run, table_metadata
from pipeline.core.columns import first_occurrences
from pipeline.core.hierarchies import HierarchyError, load_hierarchies, missing_hierarchies_error
from pipeline.failures import with_structured_failures
from pipeline.io.loading import InputError, file_sha256
from pipeline.io.tables import hierarchies_from_frame
from pipeline.models.kl import KL, discernibility
from pipeline.resources import PROJECT_ROOT, ReleaseSettings
from pipeline.vocabulary import setting_example
from pipeline.run_events import step_progress

#: Columns of the release contract that a quasi-identifier or sensitive attribute must not be named.
KL_RESERVED_COLUMNS = ("row_id", "cluster_id")


@dg.asset(
    key_prefix=PRIVATE,
    ins=inputs(private=["raw_records"]),
    group_name=KL_MODEL,
    kinds=KINDS,
    description="PRIVATE: one validated ARX generalisation hierarchy per quasi-identifier (file, SHA-256, height, base values).",
)
@with_structured_failures
def generalization_hierarchies(
    context: dg.AssetExecutionContext, settings: ReleaseSettings, raw_records: pd.DataFrame
) -> pd.DataFrame:
    """One row per quasi-identifier: the ARX hierarchy file read for it (path, SHA-256, height, base values),
    validated and checked to list every value of the data; a missing file or value fails the run with its name."""
    started = time.monotonic()
    model_of_run(KL.job, settings)
    quasi_identifiers = settings.quasi_identifiers
    reserved = [c for c in [*quasi_identifiers, *settings.sensitive_attributes] if c in KL_RESERVED_COLUMNS]
    if reserved:
        raise InputError(f"column name(s) {reserved} are reserved by the (k, ℓ) release contract; rename them in the input")
    directory = settings.hierarchies_path()
    if directory is None:
        raise missing_hierarchies_error(quasi_identifiers, Path(settings.input_path).name)
    if not directory.is_dir():
        looked = (
            "" if Path(settings.hierarchies_dir).expanduser().is_absolute() else f" (looked in {Path.cwd()} and {PROJECT_ROOT})"
        )
        raise HierarchyError(
            f"hierarchy directory {settings.hierarchies_dir!r} not found{looked}; set {setting_example('hierarchies_dir', 'DIR')} "
            "(one ARX file per quasi-identifier, named '<column>.csv' or '*_hierarchy_<column>.csv')"
        )
    firsts = {a: first_occurrences(raw_records[a], raw_records["row_id"]) for a in quasi_identifiers}
    hierarchies = load_hierarchies(
        directory,
        quasi_identifiers,
        data_values={a: values for a, (values, _) in firsts.items()},
        data_source=f"input {settings.input_path}",
        data_record_numbers={a: numbers for a, (_, numbers) in firsts.items()},
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
@with_structured_failures
def kl_anonymization(
    context: dg.AssetExecutionContext,
    settings: ReleaseSettings,
    raw_records: pd.DataFrame,
    generalization_hierarchies: pd.DataFrame,
):
    """(k, ℓ)-anonymise the records (P2, SPEC §14): equivalence classes of at least k records with
    Diverse >= ℓ, quasi-identifiers generalised to the lowest common ancestor along the hierarchies."""
    # numba's kernels (~60 MiB): imported by the step that runs them, not when the code location is loaded
    from pipeline.core.kl_anonymity import InfeasibleError, kl_anonymize

    started = time.monotonic()
    model_of_run(KL.job, settings)
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
            progress=step_progress(context.log, "blocks"),
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
