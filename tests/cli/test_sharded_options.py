"""``msa-release run``'s options of sharded releases (issue 17): which job a run starts, and the usage errors (exit
status 2, naming the option) refused before anything runs."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

import pipeline.cli.run as run_command
from pipeline.cli import main
from pipeline.models import SHARDED_RELEASE_JOB, job_of_settings, settings_not_of_job, settings_of_job


@pytest.fixture
def nothing_runs(monkeypatch):
    """Fail the test if the command gets as far as reading the input."""

    def refuse(*args, **kwargs):
        raise AssertionError("the command read its input although its options were refused")

    monkeypatch.setattr(run_command, "preflight", refuse)


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        (
            ["--engine", "local", "--model", "kl"],
            "--engine local publishes sharded releases of the mixed model only, not --model kl",
        ),
        (["--engine", "spark", "--model", "rating"], "--engine spark publishes sharded releases of the mixed model only"),
        (["--engine", "memory", "--workers", "3"], "--workers: not used by --engine memory"),
        (["--model", "rating", "--workers", "3"], "--workers: not used by --model rating (it runs in memory"),
        (["--engine", "memory", "--shard-rows", "10"], "--shard-rows: not used by --engine memory"),
        (["--engine", "local", "--spark-master", "local[2]"], "--spark-master is for --engine spark only"),
        (
            ["--engine", "spark", "--spark-master", "local[2]", "--spark-remote", "sc://localhost"],
            "give one of --spark-master (client mode) and --spark-remote (Spark Connect), not both",
        ),
        (["--engine", "local", "--workers", "0"], "--workers"),
        (["--engine", "local", "--shard-rows", "0"], "--shard-rows"),
        (["--engine", "local", "--min-shard-rows", "-5"], "--min-shard-rows"),
        (["--engine", "dask"], "'dask' is not one of 'memory', 'local', 'spark'"),
        (["--engine", "local", "--spark-launch", "pipes"], "--spark-launch pipes: not used by --engine local"),
        (["--engine", "local", "--spark-launch", "client"], "--spark-launch client: not used by --engine local"),
        (["--engine", "memory", "--spark-launch", "pipes"], "--spark-launch: not used by --engine memory"),
        (["--spark-launch", "pipes"], "--spark-launch pipes: not used by engine local (the default)"),
        (["--engine", "spark", "--spark-launch", "yarn"], "'yarn' is not one of 'client', 'pipes'"),
    ],
    ids=[
        "local-kl",
        "spark-rating",
        "workers-in-memory",
        "workers-with-rating",
        "shard-rows-in-memory",
        "spark-master-on-local",
        "both-spark-options",
        "workers-0",
        "shard-rows-0",
        "min-shard-rows-negative",
        "unknown-engine",
        "spark-launch-pipes-on-local",
        "spark-launch-client-on-local",
        "spark-launch-in-memory",
        "spark-launch-on-the-default-engine",
        "unknown-spark-launch",
    ],
)
def test_sharding_options_refused_exit_2_before_anything_runs(nothing_runs, tmp_path, arguments, expected):
    outcome = CliRunner().invoke(main, ["run", *arguments, "--home", str(tmp_path / "home")])
    assert outcome.exit_code == 2, outcome.output
    assert expected in outcome.output


def test_the_engine_picks_the_job():
    """Issue 17: the mixed model's default engine is local (sharded_release); memory is its in-memory job; the models
    without a sharded form run their own job."""
    assert job_of_settings(None, None) == SHARDED_RELEASE_JOB
    assert job_of_settings("mixed", None) == SHARDED_RELEASE_JOB
    assert job_of_settings("mixed", "memory") == "release"
    assert job_of_settings("kl", None) == "kl_release"
    assert job_of_settings("rating", None) == "rating_release"
    assert job_of_settings("mixed", "local") == SHARDED_RELEASE_JOB
    assert job_of_settings(None, "spark") == SHARDED_RELEASE_JOB


def test_only_the_sharded_job_reads_the_sharding_settings():
    sharding = {"engine", "workers", "shard_rows", "min_shard_rows", "spark_master", "spark_remote", "spark_launch"}
    assert sharding <= set(settings_of_job(SHARDED_RELEASE_JOB))
    assert set(settings_of_job("release")) <= set(settings_of_job(SHARDED_RELEASE_JOB))  # the mixed model's settings
    for job in ("release", "rating_release", "kl_release"):
        refused = settings_not_of_job(job, sorted(sharding))
        assert set(refused) == sharding
        assert all(SHARDED_RELEASE_JOB in message for message in refused.values())
    assert "k" in settings_not_of_job(SHARDED_RELEASE_JOB, ["k"])


def test_the_sharded_job_refuses_a_bad_setting_before_a_run_exists():
    """The launchpad's run config of sharded_release: its schema has the sharding settings; a value out of range and
    another model's setting are config errors."""
    import dagster as dg

    from pipeline.jobs import sharded_release_job
    from pipeline.definitions import defs

    job = defs.resolve_job_def(sharded_release_job.name)
    good = {"resources": {"settings": {"config": {"engine": "local", "workers": 2, "shard_rows": 8000}}}}
    assert dg.validate_run_config(job, good)
    for settings, named in (({"engine": "local", "workers": 0}, "workers"), ({"engine": "local", "k": 3}, "k")):
        with pytest.raises(dg.DagsterInvalidConfigError, match=named):
            dg.validate_run_config(job, {"resources": {"settings": {"config": settings}}})


def test_spark_launch_is_a_launchpad_setting_of_the_sharded_job_only():
    """``spark_launch`` (client | pipes) is in the sharded job's run config schema; another value is a config error, and
    ``spark_launch: pipes`` without ``engine: spark`` is refused by the settings naming both keys."""
    import dagster as dg
    from pydantic import ValidationError

    from pipeline.definitions import defs
    from pipeline.jobs import sharded_release_job
    from pipeline.resources import ReleaseSettings

    job = defs.resolve_job_def(sharded_release_job.name)
    pipes = {"engine": "spark", "spark_master": "local[2]", "spark_launch": "pipes"}
    assert dg.validate_run_config(job, {"resources": {"settings": {"config": pipes}}})
    with pytest.raises(dg.DagsterInvalidConfigError, match="spark_launch"):
        dg.validate_run_config(job, {"resources": {"settings": {"config": {**pipes, "spark_launch": "yarn"}}}})
    assert ReleaseSettings(**pipes).spark_launch == "pipes"
    assert ReleaseSettings(engine="spark").spark_launch == "client"
    with pytest.raises(ValidationError, match="`spark_launch: pipes` is for `engine: spark` only"):
        ReleaseSettings(engine="local", spark_launch="pipes")
    assert "spark_launch" in settings_not_of_job("release", ["spark_launch"])


def test_the_engine_setting_defaults_to_the_models_engine():
    """Issue 17: ``engine`` not set is the model's default engine (local for mixed, memory for rating and kl), in the
    settings and in the sharded job's launchpad schema; the sharded job refuses engine memory naming the job to run."""
    import dagster as dg
    from pydantic import ValidationError

    from pipeline.definitions import defs
    from pipeline.jobs import sharded_release_job
    from pipeline.resources import ReleaseSettings

    assert ReleaseSettings().engine == "local"
    assert ReleaseSettings(engine=None).engine == "local"
    assert ReleaseSettings(model="rating").engine == "memory"
    assert ReleaseSettings(model="kl", k=3).engine == "memory"
    assert ReleaseSettings(engine="memory").engine == "memory"
    with pytest.raises(ValidationError, match="leave `engine` out"):
        ReleaseSettings(model="rating", engine="local")
    job = defs.resolve_job_def(sharded_release_job.name)
    assert dg.validate_run_config(job, {})  # nothing set: the mixed model on engine local
    engine = job.config_mapping.config_schema.config_type.fields["resources"].config_type.fields["settings"]
    engine = engine.config_type.fields["config"].config_type.fields["engine"]
    assert engine.default_value == "local"
    with pytest.raises(dg.DagsterInvalidConfigError, match="engine: memory is the in-memory job release"):
        dg.validate_run_config(job, {"resources": {"settings": {"config": {"engine": "memory"}}}})


def test_the_in_memory_job_runs_on_engine_memory():
    """The ``release`` job's config mapping hands its resource ``engine: memory`` (its schema has no engine setting:
    the job is the engine), so its settings never claim the sharded default."""
    from pipeline.jobs import JobSettings
    from pipeline.models import models_of_job

    mapped = JobSettings("release", models_of_job("release"))({"resources": {"settings": {"config": {}}}})
    assert mapped["resources"]["settings"]["config"]["engine"] == "memory"
    sharded = JobSettings(SHARDED_RELEASE_JOB, models_of_job(SHARDED_RELEASE_JOB))({"resources": {"settings": {"config": {}}}})
    assert "engine" not in sharded["resources"]["settings"]["config"]  # not set: the model's default, local


@pytest.mark.parametrize(
    ("arguments", "job", "engine"),
    [
        ([], SHARDED_RELEASE_JOB, None),
        (["--workers", "3", "--shard-rows", "200000"], SHARDED_RELEASE_JOB, None),
        (["--engine", "local"], SHARDED_RELEASE_JOB, "local"),
        (["--engine", "memory"], "release", None),
        (["--model", "rating"], "rating_release", None),
        (["--model", "kl"], "kl_release", None),
    ],
    ids=["default", "sharding-options-without-engine", "local", "memory", "rating", "kl"],
)
def test_msa_release_run_starts_the_job_of_the_default_engine(monkeypatch, tmp_path, arguments, job, engine):
    """Issue 17: without --engine the mixed model runs sharded_release (engine local, the job's default) and rating
    and kl their in-memory jobs, without an error; --engine memory runs release, whose settings hold no engine."""
    started = {}

    def record(options, config, job_name, job_config, started_at, state):
        started.update(job=job_name, config=job_config)

    monkeypatch.setattr(run_command, "preflight", lambda config, home_option: tmp_path)
    monkeypatch.setattr(run_command, "_run_and_summarize", record)
    outcome = CliRunner().invoke(main, ["run", *arguments, "--home", str(tmp_path / "home")])
    assert outcome.exit_code == 0, outcome.output
    assert started["job"] == job
    assert started["config"].get("engine") == engine
