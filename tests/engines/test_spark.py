"""The Spark engine (issue 17): SparkExecutor on staged toy shards gives the same summaries and the same part-file
bytes as a plain loop over the shards; a failing shard is named; pyspark or Java missing is a clear error.

The toy shard functions (tests/engines/toy_shards.py) stand in for ``pipeline.engines.worker.release_and_write_shard``;
the tests that start Spark are marked ``slow`` (one session-scoped SparkSession, tests/engines/conftest.py)."""

import shutil
import sys

import pandas as pd
import pytest

from pipeline.engines.local import ShardFailed
from pipeline.engines.spark import (
    DEFAULT_SHARD_FUNCTION,
    ShardFailedError,
    SparkExecutor,
    SparkUnavailableError,
    records_of_staged_shard,
    resolve_shard_function,
)
from tests.engines.toy_shards import (
    COLUMNS,
    fail_on_shard_one,
    fail_with_a_value,
    report_task,
    stage_toy_input,
    toy_job,
    write_toy_parts,
)

N_RECORDS = 600
N_SHARDS = 3


def plain_loop(job, shard_function):
    """The reference: each shard read with pandas, sorted by row id, text as categorical, the function called."""
    summaries = []
    for shard in range(job.n_shards):
        records = pd.read_parquet(job.input_dir / f"shard={shard}").sort_values("row_id").reset_index(drop=True)
        for column in COLUMNS:
            records[column] = pd.Categorical(records[column], categories=sorted(set(records[column])))
        summaries.append(shard_function(records, job, shard))
    return summaries


def part_bytes(job):
    return {path.relative_to(job.output_dir).as_posix(): path.read_bytes() for path in sorted(job.output_dir.rglob("*.parquet"))}


@pytest.mark.slow
def test_spark_gives_the_summaries_and_part_files_of_a_plain_loop(spark, tmp_path):
    table = stage_toy_input(tmp_path / "spark", n_records=N_RECORDS, n_shards=N_SHARDS)
    shutil.copytree(tmp_path / "spark" / "input", tmp_path / "loop" / "input")
    on_spark, in_a_loop = toy_job(tmp_path / "spark", n_shards=N_SHARDS), toy_job(tmp_path / "loop", n_shards=N_SHARDS)

    summaries = SparkExecutor(session=spark, shard_function=write_toy_parts).release_shards(on_spark)

    assert summaries == plain_loop(in_a_loop, write_toy_parts)
    assert part_bytes(on_spark) == part_bytes(in_a_loop)
    assert sorted(part_bytes(on_spark)) == [f"toy/part-{shard:05d}.parquet" for shard in range(N_SHARDS)]
    # and what the loop agrees on is right: shard order, the shard's records, sorted row ids, categorical text
    by_shard = table.groupby("shard")
    assert [s["shard"] for s in summaries] == list(range(N_SHARDS))
    assert [s["counts"]["n_records"] for s in summaries] == [len(by_shard.get_group(s)) for s in range(N_SHARDS)]
    assert [s["counts"]["first_row_id"] for s in summaries] == [by_shard.get_group(s)["row_id"].min() for s in range(N_SHARDS)]
    assert all(s["partials"]["dtypes"] == {"row_id": "int64", "age": "category", "disease": "category"} for s in summaries)
    assert summaries[0]["partials"]["age_categories"] == ["10", "100", "27", "9"]
    # the session's own settings are back
    assert spark.conf.get("spark.sql.shuffle.partitions") == "4"


@pytest.mark.slow
def test_every_shard_is_released_by_its_own_task(spark, tmp_path):
    table = stage_toy_input(tmp_path, n_records=500, n_shards=5)
    summaries = SparkExecutor(session=spark, shard_function=report_task).release_shards(toy_job(tmp_path, n_shards=5))
    assert [summary["n_records"] for summary in summaries] == table.groupby("shard").size().tolist()
    assert len({summary["partition"] for summary in summaries}) == 5


@pytest.mark.slow
def test_a_failing_shard_is_named_with_its_error(spark, tmp_path):
    stage_toy_input(tmp_path, n_records=N_RECORDS, n_shards=N_SHARDS)
    with pytest.raises(ShardFailedError) as raised:
        SparkExecutor(session=spark, shard_function=fail_on_shard_one).release_shards(toy_job(tmp_path, n_shards=N_SHARDS))
    error = raised.value
    assert (error.shard, error.error_class, error.exit_status, error.column) == (1, "UnusableInputError", 2, "disease")
    assert str(error).startswith("shard 1 of 3 (0-based) failed on Spark: UnusableInputError: toy failure")
    assert isinstance(error, ShardFailed)  # what the local executor raises too


@pytest.mark.slow
def test_a_foreign_error_names_the_shard_but_not_the_value(spark, tmp_path):
    stage_toy_input(tmp_path, n_records=N_RECORDS, n_shards=N_SHARDS)
    with pytest.raises(ShardFailedError) as raised:
        SparkExecutor(session=spark, shard_function=fail_with_a_value).release_shards(toy_job(tmp_path, n_shards=N_SHARDS))
    error = raised.value
    assert error.shard in range(N_SHARDS) and error.error_class == "ValueError" and error.exit_status == 1
    assert str(error) == f"shard {error.shard} of 3 (0-based) failed on Spark: ValueError"
    assert not any(value in str(error) for value in ("flu", "Flu", "asthma", "ulcer", "cold"))


@pytest.mark.slow
def test_a_shard_without_staged_records_is_refused(spark, tmp_path):
    stage_toy_input(tmp_path, n_records=N_RECORDS, n_shards=N_SHARDS)
    with pytest.raises(ValueError, match=r"missing \[3\]"):
        SparkExecutor(session=spark, shard_function=write_toy_parts).release_shards(toy_job(tmp_path, n_shards=N_SHARDS + 1))


def test_without_pyspark_the_error_names_the_extra_and_the_local_engine(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "pyspark.sql", None)
    with pytest.raises(SparkUnavailableError) as raised:
        SparkExecutor(master="local[1]").release_shards(toy_job(tmp_path, n_shards=1))
    assert "pip install 'msa-release[spark]'" in str(raised.value) and "--engine local" in str(raised.value)
    assert raised.value.exit_status == 2


def test_without_java_the_error_says_what_to_install(monkeypatch, tmp_path):
    pytest.importorskip("pyspark")
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(SparkUnavailableError) as raised:
        SparkExecutor(master="local[1]").release_shards(toy_job(tmp_path, n_shards=1))
    assert "Java 17" in str(raised.value) and "openjdk-17-jre-headless" in str(raised.value)
    assert "--engine local" in str(raised.value) and "--spark-remote" in str(raised.value)


def test_master_and_remote_are_exclusive():
    with pytest.raises(ValueError, match="either"):
        SparkExecutor(master="local[2]", remote="sc://localhost:15002")


def test_the_default_shard_function_is_the_workers_by_import_path():
    assert SparkExecutor().shard_function == DEFAULT_SHARD_FUNCTION == "pipeline.engines.worker:release_and_write_shard"
    assert resolve_shard_function("tests.engines.toy_shards:write_toy_parts") is write_toy_parts
    with pytest.raises(ValueError, match="module:attribute"):
        resolve_shard_function("pipeline.engines.worker")


def test_staged_rows_become_the_records_a_shard_function_takes():
    frame = pd.DataFrame({"row_id": [5, 2, 9], "age": ["9", "10", "9"], "disease": ["flu", None, "asthma"], "shard": [1, 1, 1]})
    records = records_of_staged_shard(frame, ["row_id", "age", "disease"])
    assert list(records_of_staged_shard(frame[["disease", "shard", "row_id", "age"]]).columns) == ["disease", "row_id", "age"]
    assert list(records.columns) == ["row_id", "age", "disease"]
    assert records["row_id"].tolist() == [2, 5, 9] and str(records["row_id"].dtype) == "int64"
    assert list(records["age"].cat.categories) == ["10", "9"] and records["age"].tolist() == ["10", "9", "9"]
    assert records["disease"].isna().tolist() == [True, False, False]
    assert records.index.tolist() == [0, 1, 2]


CONNECT_SCRIPT = """
import sys
from pathlib import Path
from pipeline.engines.spark import SparkExecutor
from tests.engines.toy_shards import toy_job
job = toy_job(Path(sys.argv[1]), n_shards=2)
summaries = SparkExecutor(remote="local[1]", shard_function="tests.engines.toy_shards:write_toy_parts").release_shards(job)
print([summary["counts"]["n_records"] for summary in summaries])
"""


@pytest.mark.slow
def test_spark_connect_releases_the_same_shards(tmp_path):
    """--spark-remote: the same job through Spark Connect (pyspark's local Connect server, in a subprocess so that
    its JVM is not the session fixture's), part files byte for byte those of a plain loop."""
    import os
    import subprocess
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    table = stage_toy_input(tmp_path / "connect", n_records=300, n_shards=2)
    shutil.copytree(tmp_path / "connect" / "input", tmp_path / "loop" / "input")
    environment = {**os.environ, "PYTHONPATH": str(root), "PYSPARK_PYTHON": sys.executable}
    completed = subprocess.run(
        [sys.executable, "-c", CONNECT_SCRIPT, str(tmp_path / "connect")],
        cwd=root,
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    assert completed.stdout.strip().splitlines()[-1] == str(table.groupby("shard").size().tolist())
    plain_loop(toy_job(tmp_path / "loop", n_shards=2), write_toy_parts)
    assert part_bytes(toy_job(tmp_path / "connect", n_shards=2)) == part_bytes(toy_job(tmp_path / "loop", n_shards=2))


ADULT_QUASI_IDENTIFIERS = ("sex", "race", "marital-status", "native-country", "workclass")
ADULT_SENSITIVE = ("education", "occupation", "age", "relationship")


def stage_adult_in_four_shards(staging_dir):
    """Adult staged in four shards (shard_rows 8,000), the global model and the release job's default parameters
    (ℓ = 3, min_confidence 0.8, min_support 5, Adult's hierarchies; no posterior gate, to save time): (staged, job)."""
    from pathlib import Path

    from pipeline.core import sharding
    from pipeline.core.hierarchies import load_available_hierarchies
    from pipeline.engines.base import ShardJob
    from pipeline.engines.staging import sensitive_tuple_counts, stage_input
    from tests.conftest import ADULT_COLUMNS, TEST_HOME_SECRET

    root = Path(__file__).resolve().parents[2]
    staged = stage_input(
        root / "data" / "adult" / "adult.data",
        staging_dir,
        quasi_identifiers=ADULT_QUASI_IDENTIFIERS,
        sensitive_attributes=ADULT_SENSITIVE,
        salt=sharding.shard_salt(TEST_HOME_SECRET),
        shard_rows=8_000,
        min_shard_rows=5_000,
        csv_header=False,
        column_names=ADULT_COLUMNS,
    )
    assert staged.n_records == 30718 and staged.plan.n_shards == 4
    model = sharding.global_model_from_tuple_counts(
        sensitive_tuple_counts(staging_dir, ADULT_SENSITIVE), ADULT_SENSITIVE, min_confidence=0.8, min_support=5
    )
    parameters = sharding.ShardParameters(
        quasi_identifiers=ADULT_QUASI_IDENTIFIERS,
        sensitive_attributes=ADULT_SENSITIVE,
        ell=3,
        seed=0,
        hierarchies=load_available_hierarchies(root / "data" / "adult" / "hierarchies", ADULT_QUASI_IDENTIFIERS),
        evaluate_posterior=False,
    )
    job = ShardJob(staging_dir=staging_dir, model=model, parameters=parameters, secret=TEST_HOME_SECRET, n_shards=4)
    return staged, job


@pytest.mark.slow
def test_spark_equals_the_local_engine_on_adult_in_four_shards(spark, tmp_path):
    """The real per-shard function (pipeline.engines.worker) on Adult staged in four shards: Spark local[2] gives the
    summaries and the part files, byte for byte, of the local engine's in-process loop (issue 17's CI item)."""
    from pipeline.engines.local import LocalExecutor

    staged, job = stage_adult_in_four_shards(tmp_path / "run")

    on_spark = SparkExecutor(session=spark).release_shards(job)
    spark_parts = part_bytes(job)
    shutil.rmtree(job.output_dir)
    in_a_loop = LocalExecutor(1).release_shards(job)

    assert on_spark == in_a_loop
    assert spark_parts == part_bytes(job) and len(spark_parts) == 4 * 5
    assert [summary["counts"]["n_records"] for summary in on_spark] == list(staged.shard_records)


@pytest.mark.slow
def test_the_spark_job_reduces_adults_gates_with_the_real_reduce(spark, tmp_path):
    """run_job on Adult in four shards with pipeline.core.sharding.reduce_gates and the input summary stored with
    the job: every reduced gate is one the Pipes asset declares, and gates 1-6 and 8 pass (Adult's default release
    deletes ~20 % of its records, over the utility gate's 10 %: that gate refuses, as in the unsharded job)."""
    from assets.sharded_pipes import SHARDED_GATES
    from pipeline.engines.spark_job import run_job, write_job

    staged, job = stage_adult_in_four_shards(tmp_path / "run")
    path = write_job(job, reduce_arguments={"n_input": staged.n_input, "n_dropped_missing": staged.n_dropped_missing})

    summaries, gates = run_job(path, executor=SparkExecutor(session=spark))

    assert len(summaries) == 4 and set(gates) <= set(SHARDED_GATES)
    assert set(SHARDED_GATES) - set(gates) == {"posterior_within_bound"}  # evaluate_posterior=False
    for gate in (
        "sac_released_is_l_diverse",
        "attribute_table_is_l_diverse",
        "disclosure_within_bound",
        "rule_confidence_preserved",
        "records_accounted_for",
        "no_probability_tilt",
        "no_certain_attribute_table_cell",
    ):
        assert gates[gate]["passed"], gate
    assert gates["records_accounted_for"]["n_input"] == staged.n_input
    assert gates["disclosure_within_bound"]["max_disclosure_probability"] == pytest.approx(1 / 3)
    assert not gates["utility_within_thresholds"]["passed"]
