"""msa-release kl-quality: the (k, ℓ) approximation against the exact optimum (<home>/kl_quality/, or --output)."""

from __future__ import annotations

import time
from pathlib import Path

import click

from pipeline.cli.app import main
from pipeline.cli.common import UnusableInput, settings_from_options, input_options


@main.command("kl-quality")
@input_options
@click.option(
    "--hierarchies",
    type=click.Path(file_okay=False),
    help="Hierarchy directory (default: Adult's, for Adult only; msa-release hierarchies makes one).",
)
@click.option(
    "--output",
    type=click.Path(file_okay=False),
    help="Output directory (default: $MSA_RELEASE_HOME/kl_quality; `make kl-quality` names reports/kl_quality, the "
    "committed report).",
)
@click.option("--quick", is_flag=True, help="A few small tables and one medium point (seconds instead of minutes).")
def kl_quality(**options) -> None:
    """Measure the (k, ℓ) approximation: greedy and blocked vs the exact optimum on small random
    samples, blocked vs the whole-table greedy on medium samples, and the whole table's time.

    Writes results.json, REPORT.md and two figures (about 2-3 min on Adult; --quick: seconds).
    """
    from pipeline.core.hierarchies import HierarchyError, load_hierarchies, missing_hierarchies_error
    from pipeline.evaluation import kl_quality as quality
    from pipeline.io.loading import InputError, load_records
    from pipeline.resources import ReleaseSettings

    started = time.monotonic()
    config = settings_from_options(options)
    try:
        settings = ReleaseSettings(**config)
        loaded = load_records(
            settings.input_path,
            **settings.reading_options(),
        )
        directory = settings.hierarchies_path()
        if directory is None:
            raise missing_hierarchies_error(settings.quasi_identifiers, Path(settings.input_path).name)
        hierarchies = load_hierarchies(
            directory,
            settings.quasi_identifiers,
            data_values={a: loaded.records[a] for a in settings.quasi_identifiers},
            data_source=str(settings.input_path),
            data_record_numbers={a: loaded.records["row_id"].to_numpy() for a in settings.quasi_identifiers},
        )
    except (InputError, HierarchyError, ValueError) as error:
        raise UnusableInput(str(error)) from error
    plan = (
        quality.QualityPlan(
            small_sizes=(8,), small_tables_per_point=5, medium_sizes=(500,), medium_parameters=((3, 3),), whole_parameters=()
        )
        if options["quick"]
        else quality.QualityPlan()
    )
    if options["output"]:
        out_dir = Path(options["output"]).resolve()
    else:  # under the home, never into the committed reports/ (issue 15)
        from pipeline.cli.common import use_home

        out_dir = use_home(None) / "kl_quality"
    report = quality.main(
        records=loaded.records,
        quasi_identifiers=settings.quasi_identifiers,
        sensitive_attributes=settings.sensitive_attributes,
        hierarchies=hierarchies,
        out_dir=out_dir,
        plan=plan,
        description=(
            "UCI Adult (adult.data, CC BY 4.0), default columns" if not options["input_path"] else Path(settings.input_path).name
        ),
    )
    click.echo(f"kl-quality done in {time.monotonic() - started:.0f} s: {report}")
