"""The Dagster code location: assets, release gates, the ``release`` job and resources."""

from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")

import dagster as dg  # noqa: E402

from assets import audit, evaluation, ingest, mining, mixed_model, release  # noqa: E402
from checks.gates import GATES  # noqa: E402
from pipeline.resources import ExperimentSettings, ReleaseSettings, ReleaseStore, release_home  # noqa: E402
from pipeline.warehouse import WarehouseIOManager  # noqa: E402

__all__ = ["RELEASE_JOB_GROUPS", "build_definitions", "defs"]

RELEASE_JOB_GROUPS = ("ingest", "mining", "mixed_model", "release", "audit")

ASSETS = dg.load_assets_from_modules([ingest, mining, mixed_model, release, audit, evaluation])

release_job = dg.define_asset_job(
    name="release",
    selection=dg.AssetSelection.groups(*RELEASE_JOB_GROUPS),
    executor_def=dg.in_process_executor,
    description="Raw table -> strong rules -> SAC/IR -> SAC~ + IDT/AT (or plain Rating) -> gates -> published release -> audit.",
)

evaluation_job = dg.define_asset_job(
    name="evaluation",
    selection=dg.AssetSelection.groups("ingest", "evaluation"),
    executor_def=dg.in_process_executor,
    description="P1 §6 experiments (Figures 1-11) on the configured table: Rating vs the mixed model; writes reports/experiments/.",
)


def build_definitions(home: Path) -> dg.Definitions:
    """Definitions whose warehouse and releases live under ``home`` ($MSA_RELEASE_HOME)."""
    home = Path(home).resolve()
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chmod(home, 0o700)
    return dg.Definitions(
        assets=ASSETS,
        asset_checks=GATES,
        jobs=[release_job, evaluation_job],
        resources={
            "io_manager": WarehouseIOManager(database=str(home / "warehouse.duckdb")),
            "settings": ReleaseSettings(),
            "store": ReleaseStore(home=str(home)),
            "experiments": ExperimentSettings(),
        },
    )


defs = build_definitions(release_home())
