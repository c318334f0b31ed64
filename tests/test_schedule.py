"""Issue 15, "the schedule can publish a configured input, not only the launchpad defaults": the release schedule's run
config comes from ``$MSA_RELEASE_SCHEDULE_CONFIG`` or ``<home>/schedule.yaml``, checked against the job's schema when
the code location loads, with an error naming the file and the key."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest
import yaml

from pipeline.definitions import build_definitions
from pipeline.jobs import ScheduleConfigError

PATIENTS = {
    "input_path": "/data/patients.csv",
    "csv_header": True,
    "column_names": [],
    "quasi_identifiers": ["age", "zip"],
    "sensitive_attributes": ["diagnosis", "drug"],
    "ell": 4,
    "min_confidence": 0.75,
}


def _tick(definitions: dg.Definitions) -> list[dg.RunRequest]:
    schedule = definitions.get_schedule_def("release_schedule")
    with dg.build_schedule_context() as context:
        data = schedule.evaluate_tick(context)
    return list(data.run_requests or [])


def _write(path: Path, settings: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump({"resources": {"settings": {"config": settings}}}))
    return path


def test_without_a_config_the_schedule_runs_the_launchpad_defaults(tmp_path, monkeypatch):
    monkeypatch.delenv("MSA_RELEASE_SCHEDULE_CONFIG", raising=False)
    definitions = build_definitions(tmp_path / "home")
    (request,) = _tick(definitions)
    assert request.run_config == {} and request.job_name in (None, "sharded_release")
    # issue 17: the default job of the mixed model is the sharded one, on engine local
    assert definitions.get_schedule_def("release_schedule").job_name == "sharded_release"


def test_a_schedule_yaml_in_the_home_is_the_ticks_run_config(tmp_path, monkeypatch):
    monkeypatch.delenv("MSA_RELEASE_SCHEDULE_CONFIG", raising=False)
    home = tmp_path / "home"
    _write(home / "schedule.yaml", PATIENTS)
    definitions = build_definitions(home)
    (request,) = _tick(definitions)
    assert request.run_config == {"resources": {"settings": {"config": PATIENTS}}}
    schedule = definitions.get_schedule_def("release_schedule")
    assert schedule.job_name == "sharded_release" and "schedule.yaml" in (schedule.description or "")
    assert request.tags["msa_release/schedule_config"] == "schedule.yaml"


def test_engine_memory_in_the_schedule_config_runs_the_in_memory_job(tmp_path, monkeypatch):
    """Issue 17: ``engine: memory`` picks the in-memory ``release`` job, whose run config has no engine setting (the
    tick's run config leaves it out); ``engine: local`` with a sharding setting stays with ``sharded_release``."""
    monkeypatch.delenv("MSA_RELEASE_SCHEDULE_CONFIG", raising=False)
    home = tmp_path / "home"
    _write(home / "schedule.yaml", {**PATIENTS, "engine": "memory"})
    definitions = build_definitions(home)
    (request,) = _tick(definitions)
    assert definitions.get_schedule_def("release_schedule").job_name == "release"
    assert request.run_config == {"resources": {"settings": {"config": PATIENTS}}}
    _write(home / "schedule.yaml", {**PATIENTS, "engine": "local", "workers": 3})
    definitions = build_definitions(home)
    assert definitions.get_schedule_def("release_schedule").job_name == "sharded_release"
    _write(home / "schedule.yaml", {**PATIENTS, "engine": "memory", "workers": 3})
    with pytest.raises(ScheduleConfigError, match=r"resources\.settings\.config\.workers: workers: a setting of sharded"):
        build_definitions(home)


def test_the_environment_variable_names_the_file_and_its_model_picks_the_job(tmp_path, monkeypatch):
    config = _write(tmp_path / "elsewhere" / "weekly-rating.yaml", {**PATIENTS, "model": "rating", "promote": False})
    _write(tmp_path / "home" / "schedule.yaml", {"ell": 7})  # the variable wins over the home's file
    monkeypatch.setenv("MSA_RELEASE_SCHEDULE_CONFIG", str(config))
    definitions = build_definitions(tmp_path / "home")
    (request,) = _tick(definitions)
    assert request.run_config["resources"]["settings"]["config"]["model"] == "rating"
    assert definitions.get_schedule_def("release_schedule").job_name == "rating_release"


@pytest.mark.parametrize(
    ("settings", "key", "said"),
    [
        ({**PATIENTS, "ell": 1}, "resources.settings.config.ell", "greater than or equal to 2"),
        ({**PATIENTS, "ell": "three"}, "resources.settings.config.ell", "Int"),
        ({**PATIENTS, "quasi_identfiers": ["age"]}, "resources.settings.config.quasi_identfiers", "not a setting"),
        ({**PATIENTS, "k": 5}, "resources.settings.config.k", "kl"),  # a setting of another model: named
    ],
    ids=["out-of-range", "wrong-type", "unknown-key", "other-model"],
)
def test_an_invalid_schedule_config_names_the_file_and_the_key(tmp_path, monkeypatch, settings, key, said):
    monkeypatch.delenv("MSA_RELEASE_SCHEDULE_CONFIG", raising=False)
    home = tmp_path / "home"
    path = _write(home / "schedule.yaml", settings)
    with pytest.raises(ScheduleConfigError) as raised:
        build_definitions(home)
    message = str(raised.value)
    assert message.startswith(str(path)) and key in message and said in message, message


def test_a_missing_or_broken_file_is_named(tmp_path, monkeypatch):
    monkeypatch.setenv("MSA_RELEASE_SCHEDULE_CONFIG", str(tmp_path / "nowhere.yaml"))
    with pytest.raises(ScheduleConfigError, match=r"nowhere\.yaml \(MSA_RELEASE_SCHEDULE_CONFIG\): cannot read"):
        build_definitions(tmp_path / "home")
    broken = tmp_path / "broken.yaml"
    broken.write_text("resources: [\n")
    monkeypatch.setenv("MSA_RELEASE_SCHEDULE_CONFIG", str(broken))
    with pytest.raises(ScheduleConfigError, match=r"broken\.yaml .*not valid YAML at line"):
        build_definitions(tmp_path / "home")
    broken.write_text("ell: 3\n")  # settings without the run config's shape: the key is named
    with pytest.raises(ScheduleConfigError, match=r'broken\.yaml .*: ell: Received unexpected config entry "ell" at the root'):
        build_definitions(tmp_path / "home")
    broken.write_text("- 3\n")
    with pytest.raises(ScheduleConfigError, match=r"not a run config"):
        build_definitions(tmp_path / "home")


def test_msa_release_run_refuses_a_bad_schedule_config_before_running(tmp_path, monkeypatch):
    """The code location that runs the job builds the schedule too: `msa-release run` names the file and the key
    (exit 2, nothing run), as for an invalid MSA_RELEASE_SCHEDULE_CRON."""
    from click.testing import CliRunner

    from pipeline.cli import main

    monkeypatch.delenv("MSA_RELEASE_SCHEDULE_CONFIG", raising=False)
    monkeypatch.delenv("DAGSTER_HOME", raising=False)  # the CLI exports both: restored after the test
    home = tmp_path / "home"
    monkeypatch.setenv("MSA_RELEASE_HOME", str(home))
    path = _write(home / "schedule.yaml", {"ell": 0})
    outcome = CliRunner().invoke(main, ["run", "--home", str(home)])
    assert outcome.exit_code == 2, outcome.output
    assert str(path) in outcome.output and "resources.settings.config.ell" in outcome.output
    assert "nothing was run" in outcome.output and not (home / "releases" / "LATEST").exists()
