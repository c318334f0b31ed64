"""msa-release attacks and privacy-report: the attacks on four releases, and the issue-12 adversaries on candidate releases."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import click

from pipeline.cli.app import main
from pipeline.cli.common import (
    FiniteFloatRange,
    execute_job,
    input_options,
    report_step_failures,
    settings_from_options,
    use_home,
)


@main.command()
@input_options
@click.option("--ell", type=click.IntRange(min=2), help="ℓ of every release (default 3).")
@click.option("--k", type=click.IntRange(min=2), help="k of the (k, ℓ) release (default 3).")
@click.option(
    "--min-confidence",
    type=FiniteFloatRange(min=0.0, max=1.0, min_open=True),
    help="Strong-rule threshold of the mixed model (default 0.8).",
)
@click.option(
    "--hierarchies",
    type=click.Path(file_okay=False),
    help="Hierarchies of every quasi-identifier and sensitive attribute (default: Adult's, for Adult's adult.data only).",
)
@click.option(
    "--output",
    type=click.Path(file_okay=False),
    help="Output directory (default: <home>/attacks; `make attacks` names reports/attacks, the committed report).",
)
def attacks(**options) -> None:
    """Run the Dagster `attacks` job: P2's join attack and the one-known-value attack against the
    naive per-attribute, (k, ℓ), mixed and Rating releases, with their utility.

    Writes results.json, REPORT.md and the figures (default $MSA_RELEASE_HOME/attacks/; a few minutes on Adult).
    """
    started = time.monotonic()
    config = settings_from_options(options)
    op_config: dict = {}
    if options["output"]:
        op_config["output_dir"] = str(Path(options["output"]).resolve())
    if options["input_path"]:
        op_config["dataset_description"] = Path(options["input_path"]).name
    run_config = {"resources": {"settings": {"config": config}}}
    if op_config:
        run_config["ops"] = {"attacks__attack_evaluation": {"config": op_config}}
    result, home = execute_job("attacks", run_config, home_option=options["home"], verbose=options["verbose"])
    elapsed = time.monotonic() - started
    if not result.success:
        click.echo(f"msa-release: the attack evaluation failed ({elapsed:.0f} s)", err=True)
        report_step_failures(result)
        sys.exit(1)
    target = Path(op_config.get("output_dir", home / "attacks"))
    click.echo(f"Attacks done in {elapsed:.0f} s: {target / 'REPORT.md'}")


@main.command("privacy-report")
@click.option(
    "--output",
    type=click.Path(file_okay=False),
    help="Where to write privacy.json and PRIVACY.md (default: <home>/privacy-report; `make privacy-report` names "
    "reports/attacks, the committed report).",
)
@click.option("--home", type=click.Path(file_okay=False), help="Release home (default $MSA_RELEASE_HOME or ./var).")
def privacy_report(output: str | None, home: str | None) -> None:
    """Run the attacks of issue 12 (order replay, learned model, certain cells, composition, one known
    value) against candidate releases of Adult in a scratch home and write OUTPUT/PRIVACY.md."""
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    from pipeline.privacy_report import run_privacy_report

    if output is None:
        output = str(use_home(home) / "privacy-report")

    started = time.monotonic()
    scratch_dagster = Path(tempfile.mkdtemp(prefix="msa-privacy-dagster-"))
    (scratch_dagster / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    os.environ["DAGSTER_HOME"] = str(scratch_dagster)
    try:
        run_privacy_report(output, progress=lambda message: click.echo(f"  {message}"))
    finally:
        shutil.rmtree(scratch_dagster, ignore_errors=True)
    click.echo(f"wrote {Path(output) / 'PRIVACY.md'} and privacy.json in {time.monotonic() - started:.0f} s")
