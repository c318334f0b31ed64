"""Evaluation: the experiments of P1 §6 (Figures 1-11) on the configured table, Rating vs the
mixed model. Thin wrappers over ``pipeline.evaluation.experiments``, ``pipeline.reporting.figures`` and
``pipeline.reporting.experiments_report``; every figure is attached to its asset as metadata."""

import base64
import json
import time

import dagster as dg
import pandas as pd

from pipeline.asset_keys import KINDS, inputs
from pipeline.evaluation.experiments import run_model_sweeps, run_sid_creation_timings
from pipeline.reporting.figures import plot_histogram_figures, plot_model_figures, plot_timing_figures
from pipeline.reporting.experiments_report import machine_description, write_report, write_results
from pipeline.resources import ExperimentSettings, ReleaseSettings

EVALUATION = "evaluation"
#: Columns holding lists/dicts, stored as JSON text in the warehouse.
JSON_COLUMNS = (
    "seconds",
    "sensitive_attributes",
    "disclosure_counts",
    "ell_per_attribute",
    "additional_information_loss_by_attribute",
    "n_suppressed_cells_by_attribute",
)


def _to_frame(rows: list[dict]) -> pd.DataFrame:
    frame = pd.DataFrame(rows)
    for column in JSON_COLUMNS:
        if column in frame:
            frame[column] = frame[column].map(json.dumps)
    return frame


def _from_frame(frame: pd.DataFrame) -> list[dict]:
    rows = frame.to_dict(orient="records")
    for row in rows:
        for column in JSON_COLUMNS:
            if column in row and isinstance(row[column], str):
                row[column] = json.loads(row[column])
        for key, value in list(row.items()):
            if isinstance(value, float) and value != value:  # NaN back to None
                row[key] = None
    return rows


def _figures_metadata(paths: dict) -> dict:
    """One markdown entry per figure with the PNG embedded (the UI renders it)."""
    metadata = {}
    for number, path in sorted(paths.items()):
        encoded = base64.b64encode(path.read_bytes()).decode("ascii")
        metadata[f"figure_{number:02d}"] = dg.MetadataValue.md(f"![Figure {number}](data:image/png;base64,{encoded})")
        metadata[f"figure_{number:02d}_path"] = dg.MetadataValue.path(str(path))
    return metadata


@dg.asset(key_prefix=EVALUATION, ins=inputs(private=["raw_records"]), group_name=EVALUATION, kinds=KINDS)
def sid_creation_timings(
    context: dg.AssetExecutionContext, settings: ReleaseSettings, experiments: ExperimentSettings, raw_records: pd.DataFrame
) -> pd.DataFrame:
    """Figures 1-2: SID creation time, improved (Algorithms 13 + 19) vs the old bubble sort, by records and by m."""
    started = time.monotonic()
    plan = experiments.plan()
    timings = run_sid_creation_timings(raw_records, settings.sensitive_attributes, plan, progress=context.log.info)
    paths = plot_timing_figures(timings, experiments.output_path())
    largest = max(t["n_records"] for t in timings if t["figure"] == 1)
    medians = {t["method"]: t["median_seconds"] for t in timings if t["figure"] == 1 and t["n_records"] == largest}
    context.add_output_metadata(
        {
            "median_seconds_improved_all_records": medians.get("improved", 0.0),
            "median_seconds_old_all_records": medians.get("plain", 0.0),
            "speedup_all_records": medians.get("plain", 0.0) / medians["improved"] if medians.get("improved") else 0.0,
            "identical_output": all(t["identical_output"] for t in timings),
            "timing_repeats": plan.timing_repeats,
            "wall_seconds": round(time.monotonic() - started, 1),
            **_figures_metadata(paths),
        }
    )
    return _to_frame(timings)


@dg.asset(key_prefix=EVALUATION, ins=inputs(private=["raw_records"]), group_name=EVALUATION, kinds=KINDS)
def model_comparison(
    context: dg.AssetExecutionContext, settings: ReleaseSettings, experiments: ExperimentSettings, raw_records: pd.DataFrame
) -> pd.DataFrame:
    """Figures 3-9: AIL and average rule confidence of the mixed model and Rating, sweeping ℓ, min_confidence and m."""
    started = time.monotonic()
    plan = experiments.plan()
    points = run_model_sweeps(
        raw_records, settings.quasi_identifiers, settings.sensitive_attributes, plan, progress=context.log.info
    )
    paths = plot_model_figures(points, experiments.output_path())
    default = {p["model"]: p for p in points if p["sweep"] == "attributes" and p["m"] == max(q["m"] for q in points)}
    metadata = {"n_points": len(points), "wall_seconds": round(time.monotonic() - started, 1)}
    for model, point in default.items():
        metadata[f"{model}_additional_information_loss"] = float(point["additional_information_loss"])
        metadata[f"{model}_reconstruction_error_per_record"] = float(point["reconstruction_error_per_record"])
        metadata[f"{model}_average_released_confidence"] = float(point["average_released_confidence"] or 0.0)
        metadata[f"{model}_n_suppressed_cells"] = int(point["n_suppressed_cells"])
        metadata[f"{model}_n_deleted"] = int(point["n_deleted"])
    context.add_output_metadata({**metadata, **_figures_metadata(paths)})
    return _to_frame(points)


@dg.asset(
    key_prefix=EVALUATION,
    group_name=EVALUATION,
    ins={"model_comparison": dg.AssetIn(key=[EVALUATION, "model_comparison"])},
    kinds={"matplotlib"},
)
def disclosure_distributions(
    context: dg.AssetExecutionContext, experiments: ExperimentSettings, model_comparison: pd.DataFrame
) -> dg.MaterializeResult:
    """Figures 10-11: per-record disclosure probability of the rule holders, mixed vs Rating (ℓ = 3 and 2)."""
    points = _from_frame(model_comparison)
    paths = plot_histogram_figures(points, experiments.output_path(), experiments.histogram_ells)
    metadata = {}
    for point in points:
        if point["sweep"] == "histogram":
            prefix = f"{point['model']}_ell_{point['ell']}"
            metadata[f"{prefix}_max_disclosure"] = float(point["max_disclosure"])
            metadata[f"{prefix}_mean_disclosure"] = float(point["mean_disclosure"])
            metadata[f"{prefix}_n_holders_above_bound"] = int(point["n_holders_above_bound"])
            metadata[f"{prefix}_n_holders_certain"] = int(point["n_holders_certain"])
    return dg.MaterializeResult(metadata={**metadata, **_figures_metadata(paths)})


@dg.asset(
    key_prefix=EVALUATION,
    group_name=EVALUATION,
    ins={
        "sid_creation_timings": dg.AssetIn(key=[EVALUATION, "sid_creation_timings"]),
        "model_comparison": dg.AssetIn(key=[EVALUATION, "model_comparison"]),
        "input_summary": dg.AssetIn(key=["private", "input_summary"]),
    },
    deps=[[EVALUATION, "disclosure_distributions"]],
    kinds={"markdown", "json"},
)
def experiment_report(
    context: dg.AssetExecutionContext,
    settings: ReleaseSettings,
    experiments: ExperimentSettings,
    sid_creation_timings: pd.DataFrame,
    model_comparison: pd.DataFrame,
    input_summary: pd.DataFrame,
) -> dg.MaterializeResult:
    """results.json (every point of every figure) and REPORT.md (each figure beside P1's claim, with a verdict)."""
    out_dir = experiments.output_path()
    timings, points = _from_frame(sid_creation_timings), _from_frame(model_comparison)
    plan = experiments.plan().as_dict()
    summary = input_summary.iloc[0]
    dataset = {
        "description": experiments.dataset_description,
        "input_sha256": str(summary["input_sha256"]),
        "n_input": int(summary["n_input"]),
        "n_dropped_missing": int(summary["n_dropped_missing"]),
        "n_records": int(summary["n_input"]) - int(summary["n_dropped_missing"]),
        "quasi_identifiers": list(settings.quasi_identifiers),
        "sensitive_attributes": list(settings.sensitive_attributes),
    }
    wall = {}
    for name in ("sid_creation_timings", "model_comparison"):
        event = context.instance.get_latest_materialization_event(dg.AssetKey([EVALUATION, name]))
        if event is not None and event.asset_materialization is not None:
            value = event.asset_materialization.metadata.get("wall_seconds")
            if value is not None:
                wall[name] = float(value.value)
    machine = machine_description()
    results = write_results(
        out_dir / "results.json", plan=plan, dataset=dataset, timings=timings, points=points, machine=machine, wall_seconds=wall
    )
    report = write_report(
        out_dir / "REPORT.md", timings=timings, points=points, plan=plan, dataset=dataset, machine=machine, wall_seconds=wall
    )
    return dg.MaterializeResult(
        metadata={
            "results": dg.MetadataValue.path(str(results)),
            "report": dg.MetadataValue.path(str(report)),
            "n_figures": len(list(out_dir.glob("figure_*.png"))),
            "report_text": dg.MetadataValue.md(report.read_text().split("## Figure 1.")[0]),
        }
    )
