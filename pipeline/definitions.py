"""The Dagster code location: assets, release gates, the ``release``, ``kl_release``,
``evaluation`` and ``attacks`` jobs, the weekly release schedule, the inbox sensor, and resources.

Asset groups: ``ingest``, ``mining``, ``mixed_model``, ``rating``, ``kl_model``, ``release`` and
``evaluation`` (see ``pipeline.jobs`` for which job runs which assets)."""

from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")

import dagster as dg  # noqa: E402

from assets import attacks, audit, evaluation, ingest, kl_release, mining, mixed_model, release  # noqa: E402
from checks.gates import GATES, KL_GATES  # noqa: E402
from pipeline.jobs import (  # noqa: E402
    ATTACKS_JOB_SELECTION,
    EVALUATION_JOB_SELECTION,
    KL_RELEASE_JOB_SELECTION,
    RELEASE_JOB_SELECTION,
    attacks_job,
    build_release_schedule,
    evaluation_job,
    inbox_sensor,
    kl_release_job,
    release_job,
)
from pipeline.models import PUBLICATION_MODELS  # noqa: E402
from pipeline.resources import ExperimentSettings, ReleaseSettings, ReleaseStore, release_home  # noqa: E402
from pipeline.warehouse import WarehouseIOManager  # noqa: E402

__all__ = [
    "ASSETS",
    "ATTACKS_JOB_SELECTION",
    "EVALUATION_JOB_SELECTION",
    "JOB_OF_MODEL",
    "KL_RELEASE_JOB_SELECTION",
    "RELEASE_JOB_SELECTION",
    "build_definitions",
    "defs",
]

#: The job that publishes each model (``ReleaseSettings.model``).
JOB_OF_MODEL = {name: model.job for name, model in PUBLICATION_MODELS.items()}

ASSETS = dg.load_assets_from_modules([ingest, mining, mixed_model, release, audit, kl_release, evaluation, attacks])


def build_definitions(home: Path) -> dg.Definitions:
    """Definitions whose warehouse, releases and inbox live under ``home`` ($MSA_RELEASE_HOME).

    Nothing is created here (importing :mod:`pipeline.definitions` has no side effect); the home is
    created, mode 0700, when a run sets up its warehouse."""
    home = Path(home).resolve()
    return dg.Definitions(
        assets=ASSETS,
        asset_checks=[*GATES, *KL_GATES],
        jobs=[release_job, kl_release_job, evaluation_job, attacks_job],
        schedules=[build_release_schedule()],
        sensors=[inbox_sensor],
        # ad-hoc materializations from the UI too: one process holds the release lock for the run
        executor=dg.in_process_executor,
        resources={
            "io_manager": WarehouseIOManager(database=str(home / "warehouse.duckdb")),
            "settings": ReleaseSettings(),
            "store": ReleaseStore(home=str(home)),
            "experiments": ExperimentSettings(),
        },
    )


defs = build_definitions(release_home())
