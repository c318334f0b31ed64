"""Issue 14: long runs show their progress per step (pipeline.run_events.StepProgress, `msa-release run --progress`)."""

from __future__ import annotations

import threading
import time

import dagster as dg

from pipeline.run_events import PROGRESS_TAG, StepProgress


@dg.op
def load_part() -> int:
    return 1


@dg.op
def fail_part(value: int) -> int:
    raise RuntimeError("deliberate failure")


@dg.job
def two_steps() -> None:
    fail_part(load_part())


def test_a_line_per_finished_or_failed_step_naming_the_step_and_only_the_run_with_the_tag():
    with dg.DagsterInstance.ephemeral() as instance:
        two_steps.execute_in_process(instance=instance, raise_on_error=False)  # another run: not reported
        lines: list[str] = []
        progress = StepProgress(instance, "tag-1", lines.append, min_step_seconds=0.0)
        progress.poll()
        assert progress.run_id is None and lines == []
        result = two_steps.execute_in_process(instance=instance, raise_on_error=False, tags={PROGRESS_TAG: "tag-1"})
        progress.poll()
        progress.poll()  # nothing new: no line twice
    assert progress.run_id == result.run_id
    assert len(lines) == 2, lines
    assert lines[0].startswith("msa-release: step load_part done in ") and "1 steps done" in lines[0]
    assert lines[1].startswith("msa-release: step fail_part failed after ")
    assert "deliberate" not in "".join(lines)


RELEASE = threading.Event()


@dg.op
def wait_for_the_test() -> int:
    RELEASE.wait(timeout=60.0)
    return 1


@dg.job
def one_waiting_step() -> None:
    wait_for_the_test()


def test_short_steps_are_not_reported_and_a_running_step_gets_a_heartbeat():
    with dg.DagsterInstance.ephemeral() as instance:
        lines: list[str] = []
        progress = StepProgress(instance, "tag-2", lines.append, min_step_seconds=3600.0, heartbeat_seconds=0.0)
        RELEASE.clear()
        runner = threading.Thread(
            target=lambda: one_waiting_step.execute_in_process(instance=instance, tags={PROGRESS_TAG: "tag-2"})
        )
        runner.start()
        try:
            for _ in range(600):  # until the step has started (no timing is asserted)
                progress.poll()
                if lines:
                    break
                time.sleep(0.05)
        finally:
            RELEASE.set()
            runner.join()
        n_heartbeats = len(lines)
        progress.poll()
    assert lines and lines[0].startswith("msa-release: step wait_for_the_test running for "), lines
    assert len(lines) == n_heartbeats  # finished in less than an hour: no "done" line
