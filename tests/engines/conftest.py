"""Fixtures of the engines' tests: the sharding core's key and plan replaced by small stand-ins
(tests/engines/shard_fakes.py); and one SparkSession for the whole test session (issue 17): local[2], UI off,
4 shuffle partitions.

The SparkSession is started on first use (only the Spark tests, all marked ``slow``, ask for it) and stopped at the
end of the session together with its JVM (``pipeline.engines.spark.stop_spark`` closes the JVM's standard input, then
waits, then kills), so no Java or Python worker process outlives the tests. The toy shard functions of
``tests/engines/toy_shards.py`` are pickled by value, so the Python workers need not import the test tree.
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from pipeline.core import sharding
from tests.engines import shard_fakes
from tests.engines.shard_fakes import QUASI_IDENTIFIERS, SENSITIVE_ATTRIBUTES

__all__ = ["QUASI_IDENTIFIERS", "SENSITIVE_ATTRIBUTES"]

#: a.csv (3 rows read, the 2nd misses a sensitive value), b.csv (4 rows), in that record order
CSV_A = "sex,zip,disease,job\nF,100,flu,nurse\nM,101,,clerk\nF,?,HIV,nurse\n"
CSV_B = "sex,zip,disease,job\nM,100,flu,cook\nF,102,hiv,cook\nM,101,hiv,nurse\nF,100,cold,clerk\n"


@pytest.fixture
def fake_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """shard_of and plan_shards replaced by the reference key and S = ceil(n / shard_rows)."""
    monkeypatch.setattr(sharding, "shard_of", shard_fakes.reference_shard_of)
    monkeypatch.setattr(sharding, "plan_shards", shard_fakes.plan_stand_in)


@pytest.fixture
def two_files(tmp_path: Path) -> Path:
    """A directory with b.csv, a.csv and a file that is not input."""
    directory = tmp_path / "delivery"
    directory.mkdir()
    (directory / "b.csv").write_text(CSV_B)
    (directory / "a.csv").write_text(CSV_A)
    (directory / "notes.md").write_text("not a table\n")
    return directory


@pytest.fixture(scope="session")
def spark():
    pytest.importorskip("pyspark")
    if shutil.which("java") is None:
        pytest.fail("the Spark tests need Java 17 (.ci/run installs openjdk-17-jre-headless)")
    from pyspark import cloudpickle
    from pyspark.sql import SparkSession

    import tests.engines.toy_shards as toy_shards
    from pipeline.engines.spark import _python_of_local_workers, stop_spark

    cloudpickle.register_pickle_by_value(toy_shards)
    started = time.monotonic()
    with _python_of_local_workers("local[2]"):
        session = (
            SparkSession.builder.master("local[2]")
            .appName("msa-release-tests")
            .config("spark.ui.enabled", "false")
            .config("spark.sql.shuffle.partitions", "4")
            .config("spark.driver.memory", "1g")
            .getOrCreate()
        )
    session.sparkContext.setLogLevel("ERROR")
    print(f"SparkSession local[2] started in {time.monotonic() - started:.1f} s")
    try:
        yield session
    finally:
        stop_spark(session)
        cloudpickle.unregister_pickle_by_value(toy_shards)
