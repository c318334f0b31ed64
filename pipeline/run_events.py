"""Reading a Dagster run's event log (Dagster wiring): when each step started and finished; which runs lost their
process (killed without a word) and must be marked failed; a progress reporter that prints finished and
long-running steps of a run while it runs."""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg

__all__ = [
    "COMMAND_TAG",
    "FAILURE_REASON_TAG",
    "HOST_TAG",
    "INPUT_SHA256_TAG",
    "PROCESS_GONE",
    "PROGRESS_MARKER",
    "PROGRESS_TAG",
    "RELEASE_TAGS",
    "OrphanedRun",
    "StepProgress",
    "cancel_runs_not_started",
    "fail_orphaned_runs",
    "process_alive_since",
    "remind_missed_retries",
    "release_run_tags",
    "run_process_ids",
    "run_step_windows",
    "step_progress",
]

#: Run tag by which :class:`StepProgress` finds the run the CLI is executing (its value is unique per command).
PROGRESS_TAG = "msa-release/progress"
#: Run tags naming the data and the parameters a release run is about (``msa-release run``, the inbox sensor, the
#: schedule): the input's file name (never its directory), the model, ℓ, min_confidence (mixed, Rating) or k (kl).
INPUT_TAG, MODEL_TAG, ELL_TAG = "msa_release/input", "msa_release/model", "msa_release/ell"
MIN_CONFIDENCE_TAG, K_TAG = "msa_release/min_confidence", "msa_release/k"
RELEASE_TAGS = (INPUT_TAG, MODEL_TAG, ELL_TAG, MIN_CONFIDENCE_TAG, K_TAG)


def release_run_tags(config: Mapping[str, Any]) -> dict[str, str]:
    """The run tags (``RELEASE_TAGS``) of a release run with the ``settings`` resource config ``config`` (keys left
    out take their defaults, as the run will).

    ``msa_release/input`` is the input file's base name only (a path may name a user's directory);
    ``msa_release/min_confidence`` is set for the mixed and Rating models, ``msa_release/k`` for ``kl``.

    Raises
    ------
    pydantic.ValidationError
        ``config`` is not a valid settings config (validate it first).
    """
    from pipeline.resources import ReleaseSettings

    settings = ReleaseSettings(**config)
    tags = {
        INPUT_TAG: Path(settings.input_path).name,
        MODEL_TAG: str(settings.model),
        ELL_TAG: str(settings.ell),
    }
    if str(settings.model) == "kl":
        tags[K_TAG] = str(settings.k)
    else:
        tags[MIN_CONFIDENCE_TAG] = f"{settings.min_confidence:g}"
    return tags


#: Start of the log message a step writes about its progress inside a long loop (:func:`step_progress`).
PROGRESS_MARKER = "progress:"


def step_progress(
    log: logging.Logger | dg.DagsterLogManager, what: str, *, min_interval: float = 2.0
) -> Callable[[int, int], None]:
    """A progress callback for the pure core (:mod:`pipeline.core.progress`) that logs, at INFO level, a line
    ``progress: <what> <done> of <total> (<percent> %)`` at most every ``min_interval`` seconds and at the end.

    The line is in the run's event log (the Dagster UI shows it) and :class:`StepProgress` appends it to the
    heartbeat of the running step. ``what`` names the unit (e.g. "blocks"), never a value of the data."""
    last = [float("-inf")]

    def report(done: int, total: int) -> None:
        now = time.monotonic()
        if done < total and now - last[0] < min_interval:
            return
        last[0] = now
        percent = 100.0 * done / total if total else 100.0
        log.info(f"{PROGRESS_MARKER} {what} {done} of {total} ({percent:.0f} %)")

    return report


def run_step_windows(instance: dg.DagsterInstance, run_id: str) -> dict[str, tuple[float, float]]:
    """Start and end (seconds since the epoch) of every step of run ``run_id`` finished so far, from its event log."""
    started, finished = {}, {}
    for event_type, into in ((dg.DagsterEventType.STEP_START, started), (dg.DagsterEventType.STEP_SUCCESS, finished)):
        for record in instance.get_records_for_run(run_id, of_type=event_type).records:
            entry = record.event_log_entry
            into[entry.step_key] = entry.timestamp
    return {step: (started[step], finished[step]) for step in sorted(finished) if step in started}


#: Tag of an inbox run: the input file's SHA-256 as the sensor's tick hashed it (the ingest step re-checks it).
INPUT_SHA256_TAG = "msa_release/input_sha256"
#: Tag set on a run that failed because its process died: what happened, in one line (visible in the UI's run list).
FAILURE_REASON_TAG = "msa_release/failure_reason"
#: The value of ``FAILURE_REASON_TAG`` for a run whose process died.
PROCESS_GONE = "its process died without a word (SIGKILL, out of memory, a timeout)"
#: Dagster's failure message when something outside the run (its code server, which saw the worker die) failed it.
DAGSTER_GENERIC_FAILURE = "This run has been marked as failed from outside the execution context."
#: How far back :func:`fail_orphaned_runs` looks for runs failed with ``DAGSTER_GENERIC_FAILURE`` to explain them.
EXPLAIN_WINDOW_SECONDS = 3600.0
#: How long a failed run may wait for Dagster's retry before :func:`remind_missed_retries` reports its failure again
#: (Dagster's event log consumer reads new failures every 5 s).
RETRY_GRACE_SECONDS = 60.0
#: At most this many reminders per run (:func:`remind_missed_retries`).
MAX_RETRY_REMINDERS = 3
#: Tag counting the reminders of a run.
RETRY_REMINDERS_TAG = "msa_release/retry_reminders"
#: Tag naming the machine a run's process runs on (the orphan sweep only judges runs of its own machine).
HOST_TAG = "msa_release/host"
#: Tag whose value is unique per ``msa-release`` command that runs a job (:func:`cancel_runs_not_started`).
COMMAND_TAG = "msa_release/command"


def cancel_runs_not_started(instance: dg.DagsterInstance, command: str) -> list[str]:
    """Mark canceled every run tagged ``COMMAND_TAG = command`` that is still NOT_STARTED: the command was interrupted
    (Ctrl-C) after Dagster created its run and before the run began, which otherwise stays "not started" in the UI
    forever (no process ever owns it, so the orphan sweep, which judges runs by their processes, cannot end it).

    Returns
    -------
    list[str]
        The run ids canceled.
    """
    canceled = []
    filters = dg.RunsFilter(tags={COMMAND_TAG: command}, statuses=[dg.DagsterRunStatus.NOT_STARTED])
    for record in instance.get_run_records(filters=filters):
        instance.report_run_canceled(
            record.dagster_run, message="the command that created this run was interrupted (Ctrl-C) before it started"
        )
        canceled.append(record.dagster_run.run_id)
    return canceled


@dataclass(frozen=True)
class OrphanedRun:
    """A run that :func:`fail_orphaned_runs` marked failed.

    Attributes
    ----------
    run_id, job_name
        The run.
    pids
        The process ids its event log recorded (all gone).
    message
        The reason written into the run's failure event (shown in the Dagster UI).
    """

    run_id: str
    job_name: str
    pids: tuple[int, ...]
    message: str


def _boot_time() -> float | None:
    try:
        for line in Path("/proc/stat").read_text().splitlines():
            if line.startswith("btime "):
                return float(line.split()[1])
    except OSError:
        return None
    return None


def process_alive_since(pid: int, before: float) -> bool:
    """Whether a live process ``pid`` exists that started no later than ``before`` (seconds since the epoch).

    On Linux, ``/proc/<pid>/stat`` gives the state (a zombie, killed but not yet reaped, is dead) and the start time
    (a process started after ``before`` reuses the pid of a dead one); elsewhere, ``kill(pid, 0)`` only.
    """
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process: alive
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return True
    if fields[0] in ("Z", "X"):
        return False
    boot = _boot_time()
    if boot is None:
        return True
    started = boot + int(fields[19]) / os.sysconf("SC_CLK_TCK")
    return started <= before + 2.0  # /proc's start time is in clock ticks; 2 s of slack


def run_process_ids(instance: dg.DagsterInstance, run_id: str) -> list[tuple[int, float]]:
    """(pid, timestamp of the event) of every engine event of the run that names a process (Dagster's "Started
    process for run (pid: …)" and "Executing steps in process (pid: …)")."""
    pids = []
    for record in instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.ENGINE_EVENT).records:
        event = record.event_log_entry.dagster_event
        data = event.engine_event_data if event is not None else None
        pid = data.metadata.get("pid") if data is not None else None
        if pid is not None:
            try:
                pids.append((int(str(pid.value)), record.event_log_entry.timestamp))
            except ValueError:
                continue
    return pids


def fail_orphaned_runs(instance: dg.DagsterInstance) -> list[OrphanedRun]:
    """Mark failed every run of ``instance`` still STARTING, STARTED or CANCELING whose process is gone.

    A run killed by SIGKILL, the out-of-memory killer or a timeout writes no failure event, so Dagster shows it
    STARTED forever (and the run queue counts it against ``msa_release/release_lock``). A run is orphaned when its
    event log names at least one process and none of them is alive (:func:`process_alive_since`), on this machine
    (a run tagged with another ``msa_release/host`` is left alone). Each is reported failed with the reason
    ``UNEXPECTED_TERMINATION``, so Dagster's run retries apply to it (the inbox's runs are retried), and tagged
    ``msa_release/failure_reason``.

    A run that the Dagster code server already failed when it saw its worker die carries only Dagster's generic "marked
    as failed from outside the execution context"; such runs of the last hour whose processes are all gone get the
    same tag and an engine event saying what happened (they are not returned).

    Returns
    -------
    list[OrphanedRun]
        The runs marked failed (empty when none).
    """
    from dagster._core.events import JobFailureData, RunFailureReason

    host = socket.gethostname()
    statuses = [dg.DagsterRunStatus.STARTING, dg.DagsterRunStatus.STARTED, dg.DagsterRunStatus.CANCELING]
    orphans = []
    for record in instance.get_run_records(filters=dg.RunsFilter(statuses=statuses)):
        run = record.dagster_run
        if run.tags.get(HOST_TAG, host) != host:
            continue
        pids = run_process_ids(instance, run.run_id)
        if not pids or any(process_alive_since(pid, at) for pid, at in pids):
            continue
        numbers = tuple(dict.fromkeys(pid for pid, _ in pids))
        message = (
            f"run {run.run_id} ({run.job_name}) marked failed: its process (pid {', '.join(map(str, numbers))}) is gone "
            "without a word: killed (SIGKILL, out of memory, a timeout) or the machine restarted. Nothing it wrote was "
            "published (a release appears by one rename); the release lock went with the process."
        )
        current = instance.get_run_by_id(run.run_id)
        if current is None or current.status not in statuses:
            continue
        instance.add_run_tags(run.run_id, {FAILURE_REASON_TAG: PROCESS_GONE})
        instance.report_run_failed(
            current, message, JobFailureData(error=None, failure_reason=RunFailureReason.UNEXPECTED_TERMINATION)
        )
        orphans.append(OrphanedRun(run.run_id, run.job_name, numbers, message))
    _explain_generic_failures(instance, host)
    return orphans


def remind_missed_retries(
    instance: dg.DagsterInstance, *, grace_seconds: float = RETRY_GRACE_SECONDS, now: float | None = None
) -> list[str]:
    """Report again the failure of every run that has waited more than ``grace_seconds`` for a retry Dagster said it
    would launch (status FAILURE, ``dagster/will_retry`` true, no retry run), on this machine; at most
    ``MAX_RETRY_REMINDERS`` times per run (tag ``msa_release/retry_reminders``).

    Why: Dagster's retry daemon (the event log consumer) reads each new RUN_FAILURE event once. Dagster stores the
    event before it sets the run's status to FAILURE; a consumer tick that falls between the two sees a run that is
    not failed, skips it and moves its cursor past the event, so the run waits for a retry forever (an inbox file then
    stays in the inbox and holds its settings). A second failure event, written when the run is already FAILURE, is
    read with the right status and retried. ``now`` (seconds since the epoch) is for tests.

    Returns
    -------
    list[str]
        The run ids reported again (empty when none).
    """
    import time

    from dagster._core.events import JobFailureData, RunFailureReason

    host = socket.gethostname()
    now = time.time() if now is None else now
    reminded = []
    for record in instance.get_run_records(filters=dg.RunsFilter(statuses=[dg.DagsterRunStatus.FAILURE])):
        run = record.dagster_run
        if not run.is_complete_and_waiting_to_retry or run.tags.get(HOST_TAG, host) != host:
            continue
        count = int(run.tags.get(RETRY_REMINDERS_TAG, "0") or 0)
        ended = record.end_time if record.end_time is not None else record.update_timestamp.timestamp()
        if count >= MAX_RETRY_REMINDERS or now - ended < grace_seconds:
            continue
        instance.add_run_tags(run.run_id, {RETRY_REMINDERS_TAG: str(count + 1)})
        try:
            reason = RunFailureReason(run.tags.get("dagster/failure_reason", "UNEXPECTED_TERMINATION"))
        except ValueError:
            reason = RunFailureReason.UNKNOWN
        instance.report_run_failed(
            instance.get_run_by_id(run.run_id) or run,
            f"msa-release: this run failed and Dagster said it would retry it, but no retry has started after "
            f"{now - ended:.0f} s; its failure is reported again so that Dagster's retry daemon reads it (reminder "
            f"{count + 1} of {MAX_RETRY_REMINDERS}).",
            JobFailureData(error=None, failure_reason=reason),
        )
        reminded.append(run.run_id)
    return reminded


def _explain_generic_failures(instance: dg.DagsterInstance, host: str) -> None:
    """Tag and explain the runs failed in the last hour with ``DAGSTER_GENERIC_FAILURE`` whose processes are gone."""
    import time

    recent = dg.RunsFilter(statuses=[dg.DagsterRunStatus.FAILURE], updated_after=_utc(time.time() - EXPLAIN_WINDOW_SECONDS))
    for record in instance.get_run_records(filters=recent):
        run = record.dagster_run
        if FAILURE_REASON_TAG in run.tags or run.tags.get(HOST_TAG, host) != host:
            continue
        failures = instance.get_records_for_run(run.run_id, of_type=dg.DagsterEventType.RUN_FAILURE).records
        messages = [f.event_log_entry.dagster_event.message for f in failures if f.event_log_entry.dagster_event is not None]
        pids = run_process_ids(instance, run.run_id)
        if messages != [DAGSTER_GENERIC_FAILURE] or not pids or any(process_alive_since(pid, at) for pid, at in pids):
            continue
        numbers = ", ".join(dict.fromkeys(str(pid) for pid, _ in pids))
        instance.add_run_tags(run.run_id, {FAILURE_REASON_TAG: PROCESS_GONE})
        instance.report_engine_event(
            f"msa-release: this run failed because its process (pid {numbers}) is gone without a word: killed (SIGKILL, "
            "out of memory, a timeout). Nothing it wrote was published (a release appears by one rename).",
            run,
        )


def _utc(seconds: float):
    from datetime import UTC, datetime

    return datetime.fromtimestamp(seconds, UTC)


class StepProgress:
    """Prints the progress of the run tagged ``PROGRESS_TAG = tag`` from a background thread (issue 14: a run of
    100,000 distinct values printed nothing for minutes).

    Every ``interval`` seconds it reads the run's new step events from ``instance``'s event log and calls ``write``
    with one line per step that finished after at least ``min_step_seconds`` (or failed), and one line when a step
    has been running for ``heartbeat_seconds`` (again each ``heartbeat_seconds``), with the step's last progress
    message (:func:`step_progress`: e.g. "blocks 120 of 300 (40 %)") when it wrote one. Lines name the step, times
    and counts only, never a value. Errors reading the event log are ignored: progress must never fail a run.
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
        self._progress: dict[str, str] = {}  # running steps: their last progress message (without the marker)
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
        while True:  # every record: the step events and the steps' progress messages (plain log records)
            connection = self.instance.get_records_for_run(self.run_id, cursor=self._cursor, limit=500)
            self._cursor = connection.cursor
            for record in connection.records:
                entry = record.event_log_entry
                if entry.dagster_event_type in kinds:
                    self._on_event(entry)
                elif entry.dagster_event is None and entry.step_key and entry.user_message.startswith(PROGRESS_MARKER):
                    if entry.step_key in self._started_at:
                        self._progress[entry.step_key] = entry.user_message.removeprefix(PROGRESS_MARKER).strip()
            if not connection.has_more:
                break
        now = time.time()
        for step, started in sorted(self._started_at.items()):
            if now >= self._next_heartbeat.get(step, started + self.heartbeat_seconds):
                done = f": {self._progress[step]}" if step in self._progress else ""
                self.write(f"msa-release: step {step} running for {now - started:.0f} s{done} ({now - self._begun:.0f} s in all)")
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
        self._progress.pop(step, None)
        self._n_finished += 1
        seconds = entry.timestamp - started
        in_all = entry.timestamp - self._begun
        if kind == dg.DagsterEventType.STEP_FAILURE:
            self.write(f"msa-release: step {step} failed after {seconds:.1f} s ({in_all:.0f} s in all)")
        elif seconds >= self.min_step_seconds:
            self.write(f"msa-release: step {step} done in {seconds:.1f} s ({self._n_finished} steps done, {in_all:.0f} s in all)")
