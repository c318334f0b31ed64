"""msa-release experiments: the P1 §6 sweeps and figures (<home>/experiments/, or --output)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import click

from pipeline.cli.app import main
from pipeline.cli.common import report_step_failures, settings_from_options, execute_job, input_options

#: A few points per figure: checks the whole path in minutes (CI, first look at a new table).
QUICK_PLAN = {
    "ell_values": [2, 3],
    "min_confidence_values": [0.8, 0.9],
    "record_counts": [1000, 0],
    "histogram_ells": [3, 2],
    "timing_repeats": 1,
}


@main.command()
@input_options
@click.option(
    "--output",
    type=click.Path(file_okay=False),
    help="Output directory (default: <home>/experiments; `make experiments` names reports/experiments, the committed report).",
)
@click.option("--repeats", type=click.IntRange(1, 100), help="Timed runs per point of Figures 1-2 (default 5).")
@click.option("--quick", is_flag=True, help="A few points per figure (minutes instead of the full sweep).")
def experiments(**options) -> None:
    """Run the Dagster `evaluation` job: P1 §6 Figures 1-11, results.json and REPORT.md.

    Sensitive attributes are taken in the given order; Figures 2, 5 and 9 use the first m.
    """
    started = time.monotonic()
    config = settings_from_options(options)
    experiment_config: dict = dict(QUICK_PLAN) if options["quick"] else {}
    if options["output"]:
        experiment_config["output_dir"] = str(Path(options["output"]).resolve())
    if options["repeats"]:
        experiment_config["timing_repeats"] = options["repeats"]
    from pipeline.resources import ReleaseSettings

    m_all = len(config.get("sensitive_attributes") or ReleaseSettings().sensitive_attributes)
    experiment_config["attribute_set_sizes"] = sorted({2, m_all}) if options["quick"] else list(range(2, m_all + 1))
    if options["input_path"]:
        experiment_config["dataset_description"] = Path(options["input_path"]).name
    result, _ = execute_job(
        "evaluation",
        {"resources": {"settings": {"config": config}, "experiments": {"config": experiment_config}}},
        home_option=options["home"],
        verbose=options["verbose"],
    )
    elapsed = time.monotonic() - started
    if not result.success:
        click.echo(f"msa-release: the evaluation run failed ({elapsed:.0f} s)", err=True)
        report_step_failures(result)
        sys.exit(1)
    report = None
    for event in result.get_asset_materialization_events():
        materialization = event.event_specific_data.materialization
        if materialization.asset_key.path[-1] == "experiment_report":
            report = materialization.metadata["report"].value
    click.echo(f"Experiments done in {elapsed:.0f} s: {report}")
    if report:
        click.echo(f"  figures and results.json beside it in {Path(report).parent}")
