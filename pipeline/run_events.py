"""Reading a Dagster run's event log (Dagster wiring): when each step started and finished, and a progress
reporter that prints finished and long-running steps of a run while it runs."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import dagster as dg

__all__ = ["PROGRESS_TAG", "StepProgress", "run_step_windows"]

#: Run tag by which :class:`StepProgress` finds the run the CLI is executing (its value is unique per command).
PROGRESS_TAG = "msa-release/progress"


def run_step_windows(instance: dg.DagsterInstance, run_id: str) -> dict[str, tuple[float, float]]:
    """Start and end (seconds since the epoch) of every step of run ``run_id`` finished so far, from its event log."""
    started, finished = {}, {}
    for event_type, into in ((dg.DagsterEventType.STEP_START, started), (dg.DagsterEventType.STEP_SUCCESS, finished)):
        for record in instance.get_records_for_run(run_id, of_type=event_type).records:
            entry = record.event_log_entry
            into[entry.step_key] = entry.timestamp
    return {step: (started[step], finished[step]) for step in sorted(finished) if step in started}


class StepProgress:
    """Prints the progress of the run tagged ``PROGRESS_TAG = tag`` from a background thread (issue 14: a run of
    100,000 distinct values printed nothing for minutes).

    Every ``interval`` seconds it reads the run's new step events from ``instance``'s event log and calls ``write``
    with one line per step that finished after at least ``min_step_seconds`` (or failed), and one line when a step
    has been running for ``heartbeat_seconds`` (again each ``heartbeat_seconds``). Lines name the step and times
    only, never a value. Errors reading the event log are ignored: progress must never fail a run.
    """

    def __init__(
        self,
        instance: dg.DagsterInstance,
        tag: str,
        write: Callable[[str], None],
        *,
        interval: float = 1.0,
        min_step_seconds: float = 5.0,
        heartbeat_seconds: float = 30.0,
    ) -> None:
        self.instance, self.tag, self.write = instance, tag, write
        self.interval, self.min_step_seconds, self.heartbeat_seconds = interval, min_step_seconds, heartbeat_seconds
        self.run_id: str | None = None
        self._cursor: str | None = None
        self._started_at: dict[str, float] = {}  # running steps: event timestamp of STEP_START
        self._next_heartbeat: dict[str, float] = {}
        self._n_finished = 0
        self._begun = time.time()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="msa-release-progress", daemon=True)

    def start(self) -> StepProgress:
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop polling (after reading the events written so far)."""
        self._stop.set()
        self._thread.join(timeout=10.0)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self._poll_quietly()
        self._poll_quietly()

    def _poll_quietly(self) -> None:
        try:
            self.poll()
        except Exception:  # noqa: BLE001 - a progress line is never worth failing or interrupting a run
            pass

    def poll(self) -> None:
        """Read the new step events once and write the lines they call for."""
        if self.run_id is None:
            runs = self.instance.get_run_records(filters=dg.RunsFilter(tags={PROGRESS_TAG: self.tag}), limit=1)
            if not runs:
                return
            self.run_id = runs[0].dagster_run.run_id
        kinds = {dg.DagsterEventType.STEP_START, dg.DagsterEventType.STEP_SUCCESS, dg.DagsterEventType.STEP_FAILURE}
        while True:
            connection = self.instance.get_records_for_run(self.run_id, cursor=self._cursor, of_type=kinds, limit=500)
            self._cursor = connection.cursor
            for record in connection.records:
                self._on_event(record.event_log_entry)
            if not connection.has_more:
                break
        now = time.time()
        for step, started in sorted(self._started_at.items()):
            if now >= self._next_heartbeat.get(step, started + self.heartbeat_seconds):
                self.write(f"msa-release: step {step} running for {now - started:.0f} s ({now - self._begun:.0f} s in all)")
                self._next_heartbeat[step] = now + self.heartbeat_seconds

    def _on_event(self, entry: dg.EventLogEntry) -> None:
        step, kind = entry.step_key, entry.dagster_event_type
        if step is None:
            return
        if kind == dg.DagsterEventType.STEP_START:
            self._started_at[step] = entry.timestamp
            return
        started = self._started_at.pop(step, entry.timestamp)
        self._next_heartbeat.pop(step, None)
        self._n_finished += 1
        seconds = entry.timestamp - started
        in_all = entry.timestamp - self._begun
        if kind == dg.DagsterEventType.STEP_FAILURE:
            self.write(f"msa-release: step {step} failed after {seconds:.1f} s ({in_all:.0f} s in all)")
        elif seconds >= self.min_step_seconds:
            self.write(f"msa-release: step {step} done in {seconds:.1f} s ({self._n_finished} steps done, {in_all:.0f} s in all)")
