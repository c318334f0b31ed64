"""One way for tests to run a job of the code location in-process (issue 13: one shared helper)."""

from __future__ import annotations

from pathlib import Path

import dagster as dg


def run_job(
    home: Path, job_name: str, settings: dict, *, instance: dg.DagsterInstance | None = None, raise_on_error: bool = False
) -> dg.ExecuteInProcessResult:
    """Run ``job_name`` (``release``, ``kl_release``, …) with ``settings`` as the ``settings`` resource's config,
    in a home at ``home`` (created when the run sets up its warehouse)."""
    from pipeline.definitions import build_definitions

    job = build_definitions(home).resolve_job_def(job_name)
    return job.execute_in_process(
        run_config={"resources": {"settings": {"config": settings}}}, instance=instance, raise_on_error=raise_on_error
    )
