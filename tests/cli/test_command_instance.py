"""The Dagster instance of the runs ``msa-release`` executes in its own process (``pipeline.cli.common.command_instance``,
issue 18): the home's instance, with the same storages and run history as the UI's, but its runs' stdout and stderr
stay on the command's terminal instead of being captured into the home by helper processes (compute logs), unless the
home's ``dagster.yaml`` configures compute logs itself. The UI's instance (``DagsterInstance.get``) keeps them."""

from __future__ import annotations

import dagster as dg

from pipeline.cli.common import command_instance, write_dagster_yaml


@dg.op
def says_something() -> None:
    print("a line on stdout")


@dg.job(executor_def=dg.in_process_executor)  # as the project's jobs: the steps in the run's process
def tiny_job() -> None:
    says_something()


def _compute_log_directories(dagster_home) -> list:
    return sorted(path.relative_to(dagster_home) for path in (dagster_home / "storage").glob("*/compute_logs"))


def test_the_command_s_runs_capture_no_compute_logs_and_share_the_ui_s_run_history(tmp_path, monkeypatch):
    dagster_home = tmp_path / "dagster"
    write_dagster_yaml(dagster_home)
    monkeypatch.setenv("DAGSTER_HOME", str(dagster_home))
    with command_instance(dagster_home) as instance:
        assert type(instance.compute_log_manager).__name__ == "NoOpComputeLogManager"
        result = dg.execute_job(dg.reconstructable(tiny_job), instance=instance)
        assert result.success
    assert _compute_log_directories(dagster_home) == []  # nothing captured into the home
    with dg.DagsterInstance.get() as ui_instance:  # what the UI, the daemon and the sensors use
        assert type(ui_instance.compute_log_manager).__name__ == "LocalComputeLogManager"
        assert ui_instance.get_run_by_id(result.run_id) is not None  # the same run history
        captured = dg.execute_job(dg.reconstructable(tiny_job), instance=ui_instance)
        assert captured.success
    assert len(_compute_log_directories(dagster_home)) == 1  # the probe can fail: the UI's runs are captured


def test_a_dagster_yaml_that_configures_compute_logs_is_followed(tmp_path):
    dagster_home = tmp_path / "dagster"
    dagster_home.mkdir()
    (dagster_home / "dagster.yaml").write_text(
        "telemetry:\n  enabled: false\ncompute_logs:\n  module: dagster._core.storage.local_compute_log_manager\n"
        f"  class: LocalComputeLogManager\n  config:\n    base_dir: {tmp_path / 'logs'}\n"
    )
    with command_instance(dagster_home) as instance:
        assert type(instance.compute_log_manager).__name__ == "LocalComputeLogManager"
