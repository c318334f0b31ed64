"""A command interrupted (Ctrl-C) after Dagster created its run and before the run began left the run NOT_STARTED in
the UI forever (a red team's case: 'Aborted!', then run 90016d31 'not started' for good).
``pipeline.run_events.cancel_runs_not_started`` cancels the command's own not-started runs, and no other run."""

from __future__ import annotations

import dagster as dg

from pipeline.run_events import COMMAND_TAG, cancel_runs_not_started


@dg.op
def nothing() -> None:
    return None


@dg.job
def trivial() -> None:
    nothing()


def test_only_the_interrupted_commands_not_started_run_is_canceled():
    with dg.DagsterInstance.ephemeral() as instance:
        mine = instance.create_run_for_job(trivial, tags={COMMAND_TAG: "mine"})
        other_command = instance.create_run_for_job(trivial, tags={COMMAND_TAG: "other"})
        finished = trivial.execute_in_process(instance=instance, tags={COMMAND_TAG: "mine"})
        assert instance.get_run_by_id(mine.run_id).status == dg.DagsterRunStatus.NOT_STARTED
        assert cancel_runs_not_started(instance, "mine") == [mine.run_id]
        assert instance.get_run_by_id(mine.run_id).status == dg.DagsterRunStatus.CANCELED
        assert instance.get_run_by_id(other_command.run_id).status == dg.DagsterRunStatus.NOT_STARTED
        assert instance.get_run_by_id(finished.run_id).status == dg.DagsterRunStatus.SUCCESS
        assert cancel_runs_not_started(instance, "mine") == []


def test_ctrl_c_before_the_run_began_cancels_the_commands_run(tmp_path, monkeypatch):
    """The command's wiring: Dagster created the run, then Ctrl-C came before it began (simulated: execute_job creates
    the run with the command's tags and raises KeyboardInterrupt). The command ends as click ends on Ctrl-C
    ("Aborted!", exit 1) and its run is CANCELED, not NOT_STARTED."""
    from click.testing import CliRunner

    from pipeline.cli import main

    def interrupted(job, *, instance, tags, **_):
        instance.create_run_for_job(trivial, tags=tags)
        raise KeyboardInterrupt

    monkeypatch.setattr(dg, "execute_job", interrupted)
    home = tmp_path / "home"
    result = CliRunner().invoke(main, ["run", "--home", str(home), "--no-progress"])
    assert result.exit_code == 1 and "Aborted!" in result.output, result.output
    with dg.DagsterInstance.from_config(str(home / "dagster")) as instance:
        statuses = [record.dagster_run.status for record in instance.get_run_records()]
    assert statuses == [dg.DagsterRunStatus.CANCELED]
