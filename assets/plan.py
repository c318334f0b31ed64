"""The planning advisor as an asset: ``release_plan`` predicts, for several ℓ and min_confidence values, what the
configured model's release job would delete, suppress and refuse (:func:`pipeline.evaluation.plan.release_plan`), in
seconds and without publishing. Its own job, ``plan``; it reads the input itself (the ``ingest`` step refuses an ℓ the
table cannot take, which a plan must report instead) and writes nothing to the warehouse (its metadata is the plan)."""

import time

import dagster as dg

from pipeline.asset_keys import PLAN
from pipeline.core.plan import plan_markdown
from pipeline.evaluation.plan import DEFAULT_ELL_VALUES, DEFAULT_MIN_CONFIDENCE_VALUES, release_plan
from pipeline.failures import with_structured_failures
from pipeline.resources import DEFAULT_MAX_DELETED_SHARE, ReleaseSettings, ReleaseStore, adult_example_settings


class PlanConfig(dg.Config):
    """The settings the plan predicts besides the configured ones (``resources.settings``), which are always added."""

    ell_values: list[int] = list(DEFAULT_ELL_VALUES)
    min_confidence_values: list[float] = list(DEFAULT_MIN_CONFIDENCE_VALUES)


@dg.asset(
    name="release_plan",
    group_name=PLAN,
    kinds={"pandas", "markdown"},
    description="Planning advisor: for ℓ = 2..4 and min_confidence 0.7/0.8/0.9 (and the configured ones), the strong "
    "rules, rule holders, records deleted, cells suppressed and which gate would refuse the release, predicted by "
    "running the model's algorithm on the input with the home secret (nothing is published). Metadata: the plan "
    "as a table (counts and shares only) and the recommendation.",
)
@with_structured_failures  # an unusable input fails the step with its message only (a reader's error can quote the input)
def release_plan_asset(
    context: dg.AssetExecutionContext, config: PlanConfig, settings: ReleaseSettings, store: ReleaseStore
) -> dg.MaterializeResult:
    """The plan of the configured input and model (metadata only: no value of the table).

    The utility threshold is the one the release job gives the run: for the Adult example (its input left at Adult's),
    ``max_deleted_share`` at its default counts as not set and takes the example's value (0.25 for mixed and Rating,
    :data:`pipeline.resources.ADULT_EXAMPLE_SETTINGS`), as the release jobs' run config does; the plan job's settings
    cannot tell a value left at the default from one set to it."""
    started = time.monotonic()
    secret = store.home_secret() if settings.randomness == "home-secret" else None
    left_at_default = settings.max_deleted_share == DEFAULT_MAX_DELETED_SHARE
    thresholds = adult_example_settings(
        str(settings.model),
        {"input_path": settings.input_path, "max_deleted_share": None if left_at_default else settings.max_deleted_share},
    )
    plan = release_plan(
        settings,
        secret=secret,
        ell_values=config.ell_values or None,
        min_confidence_values=config.min_confidence_values or None,
        max_deleted_share=thresholds.get("max_deleted_share"),
    )
    configured = next((row for row in plan.rows if row.configured), None)
    metadata: dict[str, object] = {
        "plan": dg.MetadataValue.md(plan_markdown(plan)),
        "recommendation": plan.recommendation,
        "model": str(settings.model),
        "n_settings": len(plan.rows),
        "n_settings_passing": sum(row.passes for row in plan.rows),
        "n_records": plan.profile.n_records,
        "max_deleted_share": float(plan.max_deleted_share),
        "seconds": round(time.monotonic() - started, 3),
    }
    if configured is not None and configured.n_deleted is not None:
        metadata["configured_n_deleted"] = configured.n_deleted
        metadata["configured_deleted_share"] = float(configured.deleted_share or 0.0)
        metadata["configured_passes"] = configured.passes
    context.log.info(plan.recommendation)
    return dg.MaterializeResult(metadata=metadata)
