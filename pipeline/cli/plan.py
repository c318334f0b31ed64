"""msa-release plan: predict, in seconds and without publishing, what ``msa-release run`` would delete, suppress and
refuse for several ℓ and min_confidence values (:func:`pipeline.evaluation.plan.release_plan`)."""

from __future__ import annotations

import sys

import click

from pipeline.cli.app import main
from pipeline.cli.common import (
    EllOption,
    FiniteFloatRange,
    check_model_options,
    input_options,
    settings_from_options,
    use_home,
    validate_settings,
)
from pipeline.settings import MAX_SEED, Model


def _integers(text: str | None) -> list[int] | None:
    """``2,3,4`` -> [2, 3, 4]; each at least 2."""
    if text is None:
        return None
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError as error:
        raise click.BadParameter(f"{text!r}: give integers separated by commas, e.g. 2,3,4", param_hint="--ell-values") from error
    if not values or any(value < 2 or value > 1000 for value in values):
        raise click.BadParameter(f"{text!r}: every ℓ must be an integer in [2, 1000]", param_hint="--ell-values")
    return values


def _confidences(text: str | None) -> list[float] | None:
    """``0.7,0.8`` -> [0.7, 0.8]; each in (0, 1]."""
    if text is None:
        return None
    try:
        values = [float(part) for part in text.split(",") if part.strip()]
    except ValueError as error:
        raise click.BadParameter(
            f"{text!r}: give numbers separated by commas, e.g. 0.7,0.8,0.9", param_hint="--min-confidence-values"
        ) from error
    if not values or any(not 0.0 < value <= 1.0 for value in values):
        raise click.BadParameter(f"{text!r}: every min_confidence must be in (0, 1]", param_hint="--min-confidence-values")
    return values


@main.command()
@input_options
@click.option(
    "--model",
    type=click.Choice([choice.value for choice in Model]),
    help="Publication model (default mixed; rating; kl: only the preflight is predicted).",
)
@click.option(
    "--ell",
    type=EllOption(),
    help="The configured ℓ (default 3), always planned. Per-attribute ℓ (education=4,…) is not predicted: refused, "
    "naming what to do.",
)
@click.option(
    "--min-confidence",
    type=FiniteFloatRange(min=0.0, max=1.0, min_open=True),
    help="The configured min_confidence (default 0.8), always planned.",
)
@click.option("--ell-values", help="ℓ values to plan, comma-separated (default 2,3,4; the configured ℓ is added).")
@click.option(
    "--min-confidence-values",
    help="min_confidence values to plan, comma-separated (default 0.7,0.8,0.9; the configured one is added).",
)
@click.option("--seed", type=click.IntRange(min=0, max=MAX_SEED), help="As for run (default 0).")
@click.option("--confidence-tolerance", type=FiniteFloatRange(0.0, 1.0), help="As for run: gate 4 tolerance (default 0.05).")
@click.option("--allow-disclosure", is_flag=True, default=None, help="As for run: a failing disclosure gate is overridden.")
@click.option("--grouping", type=click.Choice(["qi_aware", "p1"]), help="As for run (default qi_aware).")
@click.option("--stratum-deletion-budget", type=FiniteFloatRange(0.0, 1.0), help="As for run (default 0.02).")
@click.option("--residual-policy", type=click.Choice(["delete", "suppress"]), help="As for run (default delete).")
@click.option("--min-support", type=click.IntRange(min=1, max=MAX_SEED), help="As for run (default max(ell, 5)).")
@click.option("--randomness", type=click.Choice(["home-secret", "spec-reference"]), help="As for run (default home-secret).")
@click.option("--hierarchies", type=click.Path(file_okay=False), help="As for run.")
@click.option("--k", "k", type=click.IntRange(min=2), help="--model kl: as for run (default 3).")
@click.option(
    "--mining-backend",
    type=click.Choice(["auto", "mlxtend-apriori", "mlxtend-fpgrowth", "duckdb", "counting"]),
    help="As for run (every back end gives the same rules; the plan counts with numpy instead of mlxtend).",
)
@click.option("--duckdb-mining-threshold", type=click.IntRange(min=1), help="As for run.")
@click.option(
    "--max-deleted-share",
    type=FiniteFloatRange(0.0, 1.0),
    help="Utility gate: largest share of records deleted (default: the setting, else 0.10).",
)
@click.option(
    "--max-suppressed-share",
    type=FiniteFloatRange(0.0, 1.0),
    help="Utility gate: largest share of an attribute's attribute-table cells suppressed (default: the setting, else 0.10).",
)
@click.option("--json", "as_json", is_flag=True, default=False, help="Print the plan as JSON instead of a table.")
def plan(**options) -> None:
    """Predict what `msa-release run` with these options would do for several ℓ and min_confidence values: strong
    rules, rule holders, records deleted, cells suppressed and which gate would refuse, with a recommendation.

    Runs the model's own algorithm on the table with the home's secret (nothing is written, nothing published; the
    secret is created if the home has none, as run would). The posterior gate is not predicted. Exit status: 0, 2
    unusable input.
    """
    ell_values = _integers(options.pop("ell_values"))
    confidence_values = _confidences(options.pop("min_confidence_values"))
    as_json = options.pop("as_json")
    thresholds = {
        name: value for name in ("max_deleted_share", "max_suppressed_share") if (value := options.pop(name)) is not None
    }
    check_model_options(options)
    config = settings_from_options(options)
    validate_settings(config)

    from pipeline.core.hierarchies import HierarchyError
    from pipeline.core.plan import plan_json, plan_text
    from pipeline.evaluation.plan import PerAttributeEllNotPlanned, release_plan
    from pipeline.io.loading import InputError
    from pipeline.release.home_secret import load_or_create_secret
    from pipeline.resources import ADULT_EXAMPLE_INPUT, ReleaseSettings, adult_example_settings

    settings = ReleaseSettings(**config)
    # a threshold neither given nor set takes what run would give it: the Adult example's explicit override when the
    # input is the Adult example (pipeline.resources.ADULT_EXAMPLE_SETTINGS, 0.25 deleted for mixed and Rating), else
    # the setting's default
    unset = {name: thresholds.get(name, config.get(name)) for name in ("max_deleted_share", "max_suppressed_share")}
    thresholds.update(
        adult_example_settings(str(settings.model), {"input_path": config.get("input_path", ADULT_EXAMPLE_INPUT), **unset})
    )
    secret = load_or_create_secret(use_home(options["home"])) if settings.randomness == "home-secret" else None
    try:
        result = release_plan(
            settings,
            secret=secret,
            ell_values=ell_values,
            min_confidence_values=confidence_values,
            **thresholds,
        )
    except (InputError, HierarchyError) as error:
        click.echo("msa-release plan: nothing planned (the input was checked as run checks it)", err=True)
        click.echo(f"  unusable input: {error}", err=True)
        sys.exit(2)
    except PerAttributeEllNotPlanned as error:
        click.echo(f"msa-release plan: nothing planned: {error}", err=True)
        sys.exit(2)
    click.echo(plan_json(result) if as_json else plan_text(result))
