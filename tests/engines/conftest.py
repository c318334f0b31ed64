"""One SparkSession for the whole test session (issue 17): local[2], UI off, 4 shuffle partitions.

Started on first use (only the Spark tests, all marked ``slow``, ask for it) and stopped at the end of the session
together with its JVM (``pipeline.engines.spark.stop_spark`` closes the JVM's standard input, then waits, then
kills), so no Java or Python worker process outlives the tests. The toy shard functions of
``tests/engines/toy_shards.py`` are pickled by value, so the Python workers need not import the test tree.
"""

import shutil
import time

import pytest


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
