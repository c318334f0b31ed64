"""The standalone Spark job (issue 17): the private job file, summaries and reduced gates written next to it, the
gates reported to Dagster Pipes as asset checks; and a Dagster ``materialize`` of the Pipes asset launching it."""

import json
import os
import stat
from pathlib import Path

import dagster as dg
import pytest

from pipeline.engines.spark import SparkExecutor
from pipeline.engines.spark_job import GATES_FILE_NAME, SUMMARIES_FILE_NAME, read_job, run_job, write_job
from pipeline.errors import UnusableInputError
from tests.engines.toy_shards import stage_toy_input, toy_job, toy_reduce, write_toy_parts

ROOT = Path(__file__).resolve().parents[2]


class CannedExecutor:
    """An executor returning fixed summaries (the job file's staging directory is not read)."""

    name = "canned"

    def __init__(self, summaries):
        self.summaries = summaries
        self.jobs = []

    def release_shards(self, job):
        self.jobs.append(job)
        return self.summaries


class RecordingLog:
    def __init__(self):
        self.lines = []

    def info(self, line):
        self.lines.append(line)


class RecordingPipes:
    def __init__(self):
        self.checks, self.materializations = [], []
        self.log = RecordingLog()

    def report_asset_check(self, check_name, passed, metadata=None, severity="ERROR"):
        self.checks.append((check_name, passed, metadata) if severity == "ERROR" else (check_name, passed, metadata, severity))

    def report_asset_materialization(self, metadata=None):
        self.materializations.append(metadata)


def canned_summary(shard, n_records, largest):
    return {
        "shard": shard,
        "counts": {"n_records": n_records},
        "partials": {"toy_gate": {"n_records": n_records, "max_per_disease": largest}},
        "parts": {},
    }


def test_the_job_file_is_private_and_round_trips(tmp_path):
    job = toy_job(tmp_path / "staging", n_shards=3)
    path = write_job(job)
    assert path == tmp_path / "staging" / "shard_job.pickle"
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    loaded = read_job(path)
    assert (loaded.staging_dir, loaded.n_shards, loaded.secret, loaded.parameters) == (
        job.staging_dir,
        3,
        job.secret,
        job.parameters,
    )
    assert loaded.model.clusters == [["disease"]]


@pytest.mark.parametrize("content", [b"not a pickle", None])
def test_a_file_that_is_not_a_job_is_refused_naming_it(tmp_path, content):
    path = tmp_path / "shard_job.pickle"
    if content is None:
        import pickle

        path.write_bytes(pickle.dumps({"format": "something else", "job": 1}))
    else:
        path.write_bytes(content)
    with pytest.raises(UnusableInputError, match="shard job file .*shard_job.pickle") as raised:
        read_job(path)
    assert raised.value.file == str(path)
    with pytest.raises(UnusableInputError, match="cannot be read"):
        read_job(tmp_path / "missing.pickle")


def test_run_job_writes_the_summaries_and_the_reduced_gates_and_reports_them(tmp_path):
    job = toy_job(tmp_path, n_shards=2)
    path = write_job(job)
    summaries = [canned_summary(0, 40, 12), canned_summary(1, 35, 15)]
    executor, pipes = CannedExecutor(summaries), RecordingPipes()

    returned, gates = run_job(path, executor=executor, reduce=toy_reduce, pipes=pipes)

    assert executor.jobs[0].n_shards == 2 and returned == summaries
    assert json.loads((tmp_path / SUMMARIES_FILE_NAME).read_text()) == summaries
    toy_gate = {"n_records": 75, "max_per_disease": 15, "per_shard": {"0": 40, "1": 35}, "histogram": [12, 15]}
    expected_gates = {"toy_gate": {"passed": True, **toy_gate}, "toy_refused": {"passed": False, "n_shards": 2}}
    assert gates == expected_gates and json.loads((tmp_path / GATES_FILE_NAME).read_text()) == expected_gates
    assert pipes.checks == [
        ("toy_gate", True, {**toy_gate, "per_shard": {"raw_value": {"0": 40, "1": 35}, "type": "json"}}),
        ("toy_refused", False, {"n_shards": 2}),
    ]
    assert pipes.materializations == [
        {
            "engine": "spark",
            "n_shards": 2,
            "n_records": 75,
            "shard_records_min": 35,
            "shard_records_max": 40,
            "gates_failed": ["toy_refused"],
        }
    ]


def test_a_declared_gate_the_reduce_did_not_compute_is_reported_not_evaluated(tmp_path):
    path = write_job(toy_job(tmp_path, n_shards=1))
    pipes = RecordingPipes()
    run_job(
        path,
        executor=CannedExecutor([canned_summary(0, 9, 4)]),
        reduce=toy_reduce,
        pipes=pipes,
        declared=["toy_gate", "posterior_within_bound", "toy_refused"],
    )
    assert [check[0] for check in pipes.checks] == ["toy_gate", "toy_refused", "posterior_within_bound"]
    assert pipes.checks[-1] == (
        "posterior_within_bound",
        True,
        {"evaluated": False, "reason": "not reduced by this sharded run"},
        "WARN",
    )


def test_gates_as_metadata_reports_no_check_and_the_verdicts_in_the_materialization(tmp_path):
    """The sharded_release step (spark_launch: pipes) declares no gate checks: the job reports the verdicts as the
    materialization's metadata and one Pipes log line, no check (Dagster would refuse an undeclared one)."""
    path = write_job(toy_job(tmp_path, n_shards=2))
    pipes = RecordingPipes()
    summaries = [canned_summary(0, 40, 12), canned_summary(1, 35, 15)]
    run_job(path, executor=CannedExecutor(summaries), reduce=toy_reduce, pipes=pipes, gates_as="metadata")
    assert pipes.checks == []
    assert pipes.materializations == [
        {
            "engine": "spark",
            "n_shards": 2,
            "n_records": 75,
            "shard_records_min": 35,
            "shard_records_max": 40,
            "gates_failed": ["toy_refused"],
            "gates": {"raw_value": {"toy_gate": True, "toy_refused": False}, "type": "json"},
        }
    ]
    assert pipes.log.lines == ["spark_job: 2 shards released on Spark; 1 of 2 reduced gates passed"]
    with pytest.raises(ValueError, match="gates_as must be one of"):
        run_job(path, executor=CannedExecutor(summaries), reduce=toy_reduce, pipes=pipes, gates_as="events")


def test_the_reduce_gets_the_arguments_stored_with_the_job(tmp_path):
    seen = {}

    def reduce(partials, model, parameters, **arguments):
        seen.update(arguments, n_partials=len(partials))
        return {}

    path = write_job(toy_job(tmp_path, n_shards=2), reduce_arguments={"n_input": 80, "n_dropped_missing": 5})
    run_job(path, executor=CannedExecutor([canned_summary(0, 40, 12), canned_summary(1, 35, 15)]), reduce=reduce)
    assert seen == {"n_input": 80, "n_dropped_missing": 5, "n_partials": 2}


def test_the_reduce_is_taken_by_import_path(tmp_path):
    path = write_job(toy_job(tmp_path, n_shards=1))
    _, gates = run_job(path, executor=CannedExecutor([canned_summary(0, 9, 4)]), reduce="tests.engines.toy_shards:toy_reduce")
    assert gates["toy_gate"] == {"passed": True, "n_records": 9, "max_per_disease": 4, "per_shard": {"0": 9}, "histogram": [4]}


@pytest.mark.slow
def test_run_job_on_spark_releases_the_staged_shards(spark, tmp_path):
    stage_toy_input(tmp_path, n_records=300, n_shards=2)
    path = write_job(toy_job(tmp_path, n_shards=2))
    summaries, gates = run_job(path, executor=SparkExecutor(session=spark, shard_function=write_toy_parts), reduce=toy_reduce)
    assert [summary["shard"] for summary in summaries] == [0, 1]
    assert gates["toy_gate"]["n_records"] == 300
    assert sorted(p.name for p in (tmp_path / "output" / "toy").iterdir()) == ["part-00000.parquet", "part-00001.parquet"]


@pytest.mark.slow
def test_a_pipes_launch_reports_the_gates_as_asset_checks(tmp_path):
    """dg.materialize of the Pipes asset: a subprocess runs the job on its own local[1] Spark and reports back."""
    from assets.sharded_pipes import spark_shard_release_asset

    stage_toy_input(tmp_path, n_records=300, n_shards=2)
    job_file = write_job(toy_job(tmp_path, n_shards=2))
    asset = spark_shard_release_asset(
        gates=("toy_gate", "toy_refused", "toy_not_reduced"),
        extra_arguments=[
            "--shard-function",
            "tests.engines.toy_shards:write_toy_parts",
            "--reduce",
            "tests.engines.toy_shards:toy_reduce",
        ],
    )
    client = dg.PipesSubprocessClient(cwd=str(ROOT), env={"PYTHONPATH": str(ROOT)})

    result = dg.materialize(
        [asset],
        resources={"pipes_subprocess_client": client},
        run_config={"ops": {"spark_shard_release": {"config": {"job_file": str(job_file), "spark_master": "local[1]"}}}},
        raise_on_error=False,
    )

    assert not result.success  # the toy reduce fails one gate, and the checks are blocking
    summaries_on_disk = json.loads((tmp_path / SUMMARIES_FILE_NAME).read_text())
    evaluations = {evaluation.check_name: evaluation for evaluation in result.get_asset_check_evaluations()}
    assert set(evaluations) == {"toy_gate", "toy_refused", "toy_not_reduced"}
    assert evaluations["toy_gate"].passed and not evaluations["toy_refused"].passed
    assert evaluations["toy_not_reduced"].passed and evaluations["toy_not_reduced"].metadata["evaluated"].value is False
    assert evaluations["toy_gate"].metadata["n_records"].value == 300
    assert evaluations["toy_gate"].metadata["per_shard"].value == {
        "0": summaries_on_disk[0]["counts"]["n_records"],
        "1": summaries_on_disk[1]["counts"]["n_records"],
    }
    materialization = result.asset_materializations_for_node("spark_shard_release")[0]
    assert materialization.metadata["n_shards"].value == 2
    assert json.loads((tmp_path / SUMMARIES_FILE_NAME).read_text())[1]["shard"] == 1


@pytest.mark.slow
def test_spark_submit_runs_the_job_on_its_own_master(tmp_path):
    """spark-submit given the file of the job: no --spark-master, so the job takes spark-submit's master (a cluster's
    yarn or k8s://… in real use) instead of its local[2] default; a failed gate outside Pipes exits 1."""
    import subprocess
    import sys

    stage_toy_input(tmp_path, n_records=300, n_shards=2)
    job_file = write_job(toy_job(tmp_path, n_shards=2))
    spark_submit = Path(sys.executable).parent / "spark-submit"
    completed = subprocess.run(
        [str(spark_submit), "--master", "local[1]", "--conf", "spark.ui.enabled=false"]
        + [str(ROOT / "pipeline" / "engines" / "spark_job.py"), "--job", str(job_file)]
        + ["--shard-function", "tests.engines.toy_shards:write_toy_parts", "--reduce", "tests.engines.toy_shards:toy_reduce"],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "PYSPARK_PYTHON": sys.executable},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,  # spark-submit sends the Python program's stderr to its stdout anyway
        text=True,
        timeout=600,
    )
    lines = [line for line in completed.stdout.splitlines() if line.startswith("spark_job:")]
    assert completed.returncode == 1, completed.stdout[-3000:]
    assert lines == ["spark_job: 2 shards released on Spark (local[1])", "spark_job: gates failed: toy_refused"]
    assert [summary["shard"] for summary in json.loads((tmp_path / SUMMARIES_FILE_NAME).read_text())] == [0, 1]


def test_the_code_location_registers_the_pipes_client_and_the_standalone_job(tmp_path):
    """The definitions hold the resource ``pipes_subprocess_client`` (a dg.PipesSubprocessClient) that sharded_release
    with spark_launch: pipes uses, and the job ``spark_pipes_launch`` materializing the standalone asset with one check
    per gate of the mixed model; its launchpad asks for the job file."""
    from assets.sharded_pipes import SHARDED_GATES
    from pipeline.definitions import build_definitions

    definitions = build_definitions(tmp_path / "home")
    assert isinstance(definitions.resources["pipes_subprocess_client"], dg.PipesSubprocessClient)
    job = definitions.resolve_job_def("spark_pipes_launch")
    checks = {key.name for key in job.asset_layer.asset_graph.get_check_keys_for_assets({dg.AssetKey("spark_shard_release")})}
    assert checks == set(SHARDED_GATES) and "disclosure_within_bound" in checks
    config = {"ops": {"spark_shard_release": {"config": {"job_file": "/private/shard_job.pickle", "spark_master": "yarn"}}}}
    assert dg.validate_run_config(job, config)
    with pytest.raises(dg.DagsterInvalidConfigError, match="job_file"):
        dg.validate_run_config(job, {"ops": {"spark_shard_release": {"config": {}}}})


def test_a_failed_pipes_launch_fails_the_step_saying_nothing_is_published(tmp_path):
    """launch_shard_release (sharded_release's spark_launch: pipes step) on a file that is not a shard job: the job
    exits 2 (its error on stderr) and the step fails with a dagster.Failure naming the module."""
    from assets.sharded_pipes import launch_shard_release

    not_a_job = tmp_path / "shard_job.pickle"
    not_a_job.write_bytes(b"not a pickle")
    failures = []

    @dg.asset
    def launching(context: dg.AssetExecutionContext, pipes_subprocess_client: dg.PipesSubprocessClient) -> None:
        try:
            launch_shard_release(context, pipes_subprocess_client, not_a_job, spark_master="local[1]", spark_remote=None)
        except dg.Failure as failure:
            failures.append(failure.description)
            raise

    client = dg.PipesSubprocessClient(cwd=str(ROOT), env={"PYTHONPATH": str(ROOT)})
    result = dg.materialize([launching], resources={"pipes_subprocess_client": client}, raise_on_error=False)
    assert not result.success
    assert len(failures) == 1
    assert "pipeline.engines.spark_job" in failures[0] and "failed with code 2" in failures[0]
    assert "nothing is published" in failures[0]
