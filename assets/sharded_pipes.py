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

The ``sharded_release`` job launches the same module from its shard-release step when the settings say
``engine: spark`` and ``spark_launch: pipes`` (:func:`launch_shard_release`): there the gates are the blocking checks
of the job's candidate summary, so the launched job reports its reduced gates as the step's materialization
metadata (Pipes extra ``gates_as: metadata``), not as checks the step does not declare. The standalone asset runs in
its own job, :data:`SPARK_PIPES_JOB` (``spark_pipes_launch``), on a job file someone staged.
"""

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import dagster as dg

from pipeline.asset_keys import RELEASE
from pipeline.models import publication_model

#: the gates a sharded mixed-model release reduces (``pipeline.core.sharding.reduce_gates`` reports them by these
#: names, ``GATE_PARTIALS``): the mixed model's gates
SHARDED_GATES: tuple[str, ...] = tuple(publication_model("mixed").gates)
#: the module the asset launches
SPARK_JOB_MODULE = "pipeline.engines.spark_job"
#: the resource key of the Pipes client (``dg.PipesSubprocessClient`` in :mod:`pipeline.definitions`)
PIPES_CLIENT_RESOURCE = "pipes_subprocess_client"
#: the job that materializes the standalone asset :data:`spark_shard_release` and its gate checks
#: (``pipeline.jobs.spark_pipes_job``; not the asset's own name: Dagster wants job and op names distinct)
SPARK_PIPES_JOB = "spark_pipes_launch"


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


def launch_shard_release(
    context: dg.AssetExecutionContext,
    client: dg.PipesSubprocessClient,
    job_file: Path,
    *,
    spark_master: str | None,
    spark_remote: str | None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """Launch ``python -m pipeline.engines.spark_job --job <job_file>`` through ``client`` from the ``sharded_release``
    job's shard-release step and read back what it wrote next to the job file.

    The job reports its reduced gates as the materialization's metadata (Pipes extra ``gates_as: metadata``: the
    step declares no gate checks; the job's candidate summary carries them) and a Pipes log line; Dagster records the
    launch in the run's event log (``[pipes] external process successfully opened dagster pipes.``).

    Returns
    -------
    (summaries, metadata)
        The S shard summaries (``shard_summaries.json``, shard order: dicts with ``shard``, ``counts``, ``partials``,
        ``parts``) and the metadata the job reported (counts and the gates' verdicts only).

    Raises
    ------
    dagster.Failure
        The job exited with a non-zero status (its error, naming the shard or the file, is on the step's stderr: the
        terminal of an ``msa-release`` command, the run's compute logs in the UI for a run started there).
    """
    from dagster._core.errors import DagsterPipesExecutionError  # raised by PipesSubprocessClient; not exported

    from pipeline.engines.spark_job import SUMMARIES_FILE_NAME

    config = SparkShardReleaseConfig(job_file=str(job_file), spark_master=spark_master, spark_remote=spark_remote)
    try:
        invocation = client.run(
            command=spark_job_command(config), context=context, extras={"job": str(job_file), "gates_as": "metadata"}
        )
    except DagsterPipesExecutionError as error:
        raise dg.Failure(
            f"the Spark job launched through Dagster Pipes ({SPARK_JOB_MODULE}) failed: {error}; its error (the shard, "
            "the file) is on this step's stderr (the terminal of an msa-release command; the run's stderr in the UI "
            "for a run started there); nothing is published"
        ) from None
    metadata: dict[str, Any] = {}
    for result in invocation.get_results(implicit_materializations=False):
        if isinstance(result, dg.MaterializeResult):
            metadata.update(result.metadata or {})
    summaries = json.loads((Path(job_file).parent / SUMMARIES_FILE_NAME).read_text(encoding="utf-8"))
    return sorted(summaries, key=lambda summary: int(summary["shard"])), metadata
