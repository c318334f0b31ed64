"""The Spark engine launched through Dagster Pipes (issue 17): an asset whose body starts the standalone job
``python -m pipeline.engines.spark_job`` with ``dg.PipesSubprocessClient`` and receives the reduced gates back as
blocking asset checks (the job reports them with ``pipes.report_asset_check``; nothing record-level crosses).

The job file is the PRIVATE :class:`~pipeline.engines.base.ShardJob` the driver staged
(:func:`pipeline.engines.spark_job.write_job`); the run config names it (``job_file``) with the Spark master or the
Spark Connect address.

Other Pipes clients launch the same module: on EMR (``dagster_aws.pipes.PipesEMRClient``: a step running
``spark-submit pipeline/engines/spark_job.py --job <path>``), Databricks
(``dagster_databricks.PipesDatabricksClient`` with a ``spark_python_task``) or Dataproc
(``dagster_gcp.pipes.PipesDataprocJobClient`` with a ``pyspark_job``): keep the check specs of
:func:`spark_shard_release_asset`, replace ``pipes_subprocess_client.run(command=…)`` by that client's ``run`` with
the cluster's job definition, and let the cluster's entry script open Pipes with the cloud's message writer
(see :mod:`pipeline.engines.spark_job`). Those clients are not dependencies of msa-release.
"""

import sys
from collections.abc import Sequence

import dagster as dg

from pipeline.asset_keys import RELEASE
from pipeline.models import publication_model

#: the gates a sharded mixed-model release reduces (``pipeline.core.sharding.reduce_gates`` reports them by these
#: names, ``GATE_PARTIALS``): the mixed model's gates
SHARDED_GATES: tuple[str, ...] = tuple(publication_model("mixed").gates)
#: the module the asset launches
SPARK_JOB_MODULE = "pipeline.engines.spark_job"


class SparkShardReleaseConfig(dg.Config):
    """Where the staged job is and where Spark runs."""

    job_file: str
    spark_master: str | None = None
    spark_remote: str | None = None
    pyspark_memory: str | None = None


def spark_job_command(config: SparkShardReleaseConfig, extra_arguments: Sequence[str] = ()) -> list[str]:
    """The command line of the standalone job for ``config`` (this interpreter, ``-m`` :data:`SPARK_JOB_MODULE`)."""
    command = [sys.executable, "-m", SPARK_JOB_MODULE, "--job", config.job_file]
    if config.spark_master is not None:
        command += ["--spark-master", config.spark_master]
    if config.spark_remote is not None:
        command += ["--spark-remote", config.spark_remote]
    if config.pyspark_memory is not None:
        command += ["--pyspark-memory", config.pyspark_memory]
    return [*command, *extra_arguments]


def spark_shard_release_asset(
    *, name: str = "spark_shard_release", gates: Sequence[str] = SHARDED_GATES, extra_arguments: Sequence[str] = ()
) -> dg.AssetsDefinition:
    """The asset launching the Spark job through ``dg.PipesSubprocessClient`` (resource ``pipes_subprocess_client``),
    with one blocking check per gate in ``gates`` (passed to the job as the Pipes extra ``gates``, so that a gate the
    run does not reduce is reported as not evaluated); ``extra_arguments`` are appended to the job's command line (tests
    give a toy shard function and reduce)."""

    @dg.asset(
        name=name,
        group_name=RELEASE,
        kinds={"spark"},
        check_specs=[dg.AssetCheckSpec(gate, asset=name, blocking=True) for gate in gates],
        description="Releases the staged shards of a sharded run on Apache Spark (python -m pipeline.engines.spark_job, "
        "launched through Dagster Pipes) and receives the reduced gates as blocking checks: figures only, no record.",
    )
    def spark_shard_release(
        context: dg.AssetExecutionContext, config: SparkShardReleaseConfig, pipes_subprocess_client: dg.PipesSubprocessClient
    ) -> dg.MaterializeResult:
        """Launch the job and return its materialization with the gates' check results."""
        return pipes_subprocess_client.run(
            command=spark_job_command(config, extra_arguments), context=context, extras={"gates": list(gates)}
        ).get_materialize_result()

    return spark_shard_release


spark_shard_release = spark_shard_release_asset()
