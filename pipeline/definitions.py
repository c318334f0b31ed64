"""The Dagster code location: assets, release gates, the publishing jobs generated from the model registry
(``release``, ``rating_release``, ``kl_release``, and any plug-in's), ``sharded_release``, the ``evaluation``,
``attacks``, ``plan`` and ``spark_pipes_launch`` (the standalone Spark job through Dagster Pipes) jobs, the weekly
release schedule, the inbox sensor, and resources (``pipes_subprocess_client``: the Pipes client of the Spark job).

Asset groups: ``ingest``, ``mining``, ``mixed_model``, ``rating``, ``rating_model``, ``kl_model``, ``release`` and
``evaluation`` (see ``pipeline.jobs`` for which job runs which assets)."""

from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")

import dagster as dg  # noqa: E402

from assets import attacks, evaluation, ingest, kl_model, mining, mixed_model, plan, rating_model  # noqa: E402
from assets.sharded import SHARDED_ASSETS  # noqa: E402
from assets.sharded_pipes import PIPES_CLIENT_RESOURCE, spark_shard_release  # noqa: E402
from checks.gates import GATES, KL_GATES, gates_of  # noqa: E402
from checks.sharded_gates import SHARDED_GATE_CHECKS  # noqa: E402
from pipeline.jobs import (  # noqa: E402
    ATTACKS_JOB_SELECTION,
    EVALUATION_JOB_SELECTION,
    KL_RELEASE_JOB_SELECTION,
    RELEASE_JOB_SELECTION,
    RELEASE_WIRING,
    attacks_job,
    build_inbox_sensor,
    build_release_schedule,
    build_release_wiring,
    build_sharded_release_job,
    evaluation_job,
    plan_job,
    schedule_run_config,
    spark_pipes_job,
)
from pipeline.models import PUBLICATION_MODELS, job_of_settings  # noqa: E402
from pipeline.resources import ExperimentSettings, ReleaseSettings, ReleaseStore, release_home  # noqa: E402
from pipeline.warehouse import WarehouseIOManager  # noqa: E402

__all__ = [
    "ASSETS",
    "ATTACKS_JOB_SELECTION",
    "EVALUATION_JOB_SELECTION",
    "GATES",
    "JOB_OF_MODEL",
    "KL_GATES",
    "KL_RELEASE_JOB_SELECTION",
    "RELEASE_JOB_SELECTION",
    "STAGE_MODULES",
    "build_definitions",
    "defs",
]

#: The job that publishes each built-in model (``ReleaseSettings.model``).
JOB_OF_MODEL = {name: model.job for name, model in PUBLICATION_MODELS.items()}

#: The hand-written asset modules: ingest, mining, the models' stages, evaluation, attacks, the plan. The candidate, publish
#: and audit assets of every publishing job are generated from the model registry (``assets/publish.py``).
STAGE_MODULES = [ingest, mining, mixed_model, rating_model, kl_model, evaluation, attacks, plan]

#: Every asset of the built-in models' code location.
ASSETS = [*dg.load_assets_from_modules(STAGE_MODULES), *RELEASE_WIRING.all_assets(), *SHARDED_ASSETS, spark_shard_release]


def build_definitions(home: Path) -> dg.Definitions:
    """Definitions whose warehouse, releases and inbox live under ``home`` ($MSA_RELEASE_HOME).

    The publishing jobs, their candidate and publish assets and their gate lists are generated from the model
    registry (:mod:`pipeline.models`) at each call, so a plug-in registered before the call gets its job.
    Nothing is created here (importing :mod:`pipeline.definitions` has no side effect); the home is
    created, mode 0700, when a run sets up its warehouse. The release schedule runs the configured run of
    ``$MSA_RELEASE_SCHEDULE_CONFIG`` or ``<home>/schedule.yaml`` when there is one (:func:`pipeline.jobs.schedule_run_config`).

    Raises
    ------
    ValueError
        An invalid ``MSA_RELEASE_SCHEDULE_CRON`` / ``_TIMEZONE``, or schedule run config (naming the file and key).
    """
    home = Path(home).resolve()
    wiring = build_release_wiring()
    publishing_jobs = [*wiring.jobs.values(), build_sharded_release_job()]
    by_name = {job.name: job for job in publishing_jobs}
    configured = schedule_run_config(home)  # ScheduleConfigError (a ValueError) names the file and the key
    if configured is None:
        schedule = build_release_schedule(job=by_name[job_of_settings(None, None)])  # the default: sharded_release
    else:
        job_name, run_config, config_file = configured
        schedule = build_release_schedule(job=by_name[job_name], run_config=run_config, config_file=config_file)
    return dg.Definitions(
        assets=[*dg.load_assets_from_modules(STAGE_MODULES), *wiring.all_assets(), *SHARDED_ASSETS, spark_shard_release],
        asset_checks=[*gates_of(PUBLICATION_MODELS.values()), *SHARDED_GATE_CHECKS],
        jobs=[*publishing_jobs, evaluation_job, attacks_job, plan_job, spark_pipes_job],
        schedules=[schedule],
        sensors=[build_inbox_sensor(publishing_jobs)],
        # ad-hoc materializations from the UI too: one process holds the release lock for the run
        executor=dg.in_process_executor,
        resources={
            "io_manager": WarehouseIOManager(database=str(home / "warehouse.duckdb")),
            "settings": ReleaseSettings(),
            "store": ReleaseStore(home=str(home)),
            "experiments": ExperimentSettings(),
            # sharded_release with engine spark and spark_launch pipes, and the spark_shard_release job, launch the
            # standalone Spark job through it (swap in PipesEMRClient, PipesDatabricksClient, … in a code location of
            # your own: README "Scaling out")
            PIPES_CLIENT_RESOURCE: dg.PipesSubprocessClient(),
        },
    )


defs = build_definitions(release_home())
