"""Reading a Dagster run's event log (Dagster wiring): when each step started and finished."""

from __future__ import annotations

import dagster as dg

__all__ = ["run_step_windows"]


def run_step_windows(instance: dg.DagsterInstance, run_id: str) -> dict[str, tuple[float, float]]:
    """Start and end (seconds since the epoch) of every step of run ``run_id`` finished so far, from its event log."""
    started, finished = {}, {}
    for event_type, into in ((dg.DagsterEventType.STEP_START, started), (dg.DagsterEventType.STEP_SUCCESS, finished)):
        for record in instance.get_records_for_run(run_id, of_type=event_type).records:
            entry = record.event_log_entry
            into[entry.step_key] = entry.timestamp
    return {step: (started[step], finished[step]) for step in sorted(finished) if step in started}
