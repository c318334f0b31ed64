"""One way for tests to run a job of the code location in-process (issue 13: one shared helper)."""

from __future__ import annotations

from pathlib import Path

import dagster as dg

#: Utility-gate thresholds that accept any loss (issue 15). Tests of other behaviour publish tiny or lossy tables
#: (SPEC's golden examples of a dozen records, small samples) whose deletions are far above the default 10 %; their
#: settings add these so that the gate under test decides (the utility gate's own tests, tests/e2e/test_utility_gate.py,
#: keep the defaults). The manifest then lists both thresholds under ``overrides``.
ACCEPT_ANY_LOSS = {"max_deleted_share": 1.0, "max_suppressed_share": 1.0}
#: The same as ``msa-release run`` options.
ACCEPT_ANY_LOSS_OPTIONS = ("--max-deleted-share", "1", "--max-suppressed-share", "1")


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
