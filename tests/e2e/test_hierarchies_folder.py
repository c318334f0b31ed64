"""A mistyped hierarchy folder is refused, not ignored (red team of the Dagster UI, session 38: ``--hierarchies`` or
``hierarchies_dir`` naming no folder published every quasi-identifier of a differing group as ``*``, exit 0)."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from pipeline.cli import main
from tests.conftest import example_release_settings, run_arguments
from tests.jobs import run_job


def _options(golden, tmp_path) -> tuple[dict, list[str]]:
    settings = example_release_settings(golden["example_A"], tmp_path, hierarchies_dir=str(tmp_path / "no-such-folder"))
    return settings, run_arguments(settings)


@pytest.mark.parametrize("engine", ["memory", "local"])
def test_the_command_refuses_a_missing_hierarchy_folder_before_running(golden, tmp_path, monkeypatch, engine):
    monkeypatch.setenv("GX_ANALYTICS_ENABLED", "false")
    _, arguments = _options(golden, tmp_path)
    home = tmp_path / "home"
    result = CliRunner().invoke(main, [*arguments, "--engine", engine, "--home", str(home)])
    assert result.exit_code == 2, result.output
    said = " ".join(result.output.split())
    assert "the input was checked before running anything" in said
    assert f"the hierarchy folder {tmp_path / 'no-such-folder'} (hierarchies_dir / --hierarchies) does not exist" in said
    assert not (home / "releases").exists()


@pytest.mark.parametrize("job_name", ["release", "sharded_release"])
def test_a_launched_run_with_a_missing_hierarchy_folder_publishes_nothing(golden, tmp_path, monkeypatch, job_name):
    monkeypatch.setenv("GX_ANALYTICS_ENABLED", "false")
    settings, _ = _options(golden, tmp_path)
    home = tmp_path / "home"
    result = run_job(home, job_name, settings)
    assert not result.success
    messages = " ".join(
        str(event.event_specific_data.error.message)
        for event in result.all_events
        if event.is_step_failure and event.event_specific_data.error is not None
    )
    assert "(hierarchies_dir / --hierarchies) does not exist" in messages
    assert not (home / "releases").exists()
