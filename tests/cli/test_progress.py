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
    RELEASE.wait(timeout=300.0)
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
            deadline = time.monotonic() + 240.0  # until the step has started (no timing is asserted; a loaded machine
            while time.monotonic() < deadline:  # took more than 30 s to start the run once)
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


# ------------------------------------------------------------------------------------------------ issue 15


PROGRESSED = threading.Event()


@dg.op
def reports_its_blocks(context) -> int:
    from pipeline.run_events import step_progress

    report = step_progress(context.log, "blocks", min_interval=3600.0)
    report(3, 10)  # the first report is always written
    report(4, 10)  # within min_interval: not written
    PROGRESSED.set()
    RELEASE.wait(timeout=60.0)
    return 1


@dg.job
def one_reporting_step() -> None:
    reports_its_blocks()


def test_the_heartbeat_of_a_running_step_carries_its_last_percentage():
    with dg.DagsterInstance.ephemeral() as instance:
        lines: list[str] = []
        progress = StepProgress(instance, "tag-3", lines.append, min_step_seconds=0.0, heartbeat_seconds=0.0)
        RELEASE.clear()
        PROGRESSED.clear()
        runner = threading.Thread(
            target=lambda: one_reporting_step.execute_in_process(instance=instance, tags={PROGRESS_TAG: "tag-3"})
        )
        runner.start()
        try:
            assert PROGRESSED.wait(timeout=60.0)
            for _ in range(600):  # until the progress message is in the event log (no timing is asserted)
                progress.poll()
                if any("blocks" in line for line in lines):
                    break
                time.sleep(0.05)
        finally:
            RELEASE.set()
            runner.join()
        progress.poll()
    beats = [line for line in lines if "running for" in line and "blocks" in line]
    assert beats and beats[-1].startswith("msa-release: step reports_its_blocks running for "), lines
    assert ": blocks 3 of 10 (30 %) (" in beats[-1]
    assert not any("4 of 10" in line for line in lines)  # throttled
    assert lines[-1].startswith("msa-release: step reports_its_blocks done in ")  # every step, however short


def test_the_core_reports_kl_blocks_and_em_rounds_through_its_callback(adult_records):
    """The pure core's long loops call progress(done, total): the (k, ℓ) model's blocks, the posterior EM rounds."""
    from pipeline.core.hierarchies import load_hierarchies
    from pipeline.core.kl_anonymity import kl_anonymize
    from pipeline.resources import PROJECT_ROOT

    quasi_identifiers = ["sex", "race", "marital-status", "native-country", "workclass"]
    sensitive_attributes = ["education", "occupation"]
    records = adult_records.head(600).reset_index(drop=True)
    calls: list[tuple[int, int]] = []
    result = kl_anonymize(
        records,
        quasi_identifiers,
        sensitive_attributes,
        load_hierarchies(PROJECT_ROOT / "data" / "adult" / "hierarchies", quasi_identifiers),
        k=3,
        ell=2,
        max_block_size=64,
        whole_table_tuples=0,  # blocks forced (the table's 600 records would fit whole)
        progress=lambda done, total: calls.append((done, total)),
    )
    n_blocks = result.n_blocks
    assert n_blocks > 1
    assert calls == [(done, n_blocks) for done in range(1, n_blocks + 1)]


def test_the_posterior_adversary_reports_its_em_rounds():
    from pipeline.core.posterior import release_posteriors
    from tests.core.test_posterior import EMPTY_ATTRIBUTE_TABLE, EMPTY_ID_TABLE, _candidate

    records, sac, row_map, clusters = _candidate(leaky=True, n_groups=60)
    calls: list[tuple[int, int]] = []
    result = release_posteriors(
        records,
        row_map,
        ["zone"],
        ["S1", "S2"],
        ell=3,
        sac_released=sac,
        attribute_table=EMPTY_ATTRIBUTE_TABLE,
        id_table=EMPTY_ID_TABLE,
        attribute_clusters=clusters,
        n_iterations=4,
        progress=lambda done, total: calls.append((done, total)),
    )
    selected = max(int(result.summary["em_iterations_selected"]), 1)
    # two folds of 4 rounds to choose the number of rounds, then the chosen number on the whole release
    assert [done for done, _ in calls] == list(range(1, 2 * 4 + selected + 1))
    assert all(done <= total for done, total in calls)
    assert calls[-1] == (2 * 4 + selected, 2 * 4 + selected)
