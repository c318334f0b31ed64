"""The Spark engine as a standalone job: ``python -m pipeline.engines.spark_job --job <job file>`` (issue 17).

The driver (the ``sharded_release`` job, or anyone with the staged input and the global model) writes the
:class:`~pipeline.engines.base.ShardJob` with :func:`write_job` into the run's PRIVATE staging directory; this job
loads it, releases every staged shard with :class:`~pipeline.engines.spark.SparkExecutor`, writes the S summaries
next to the job file (``shard_summaries.json``), reduces the gates from the shards' partials
(``pipeline.core.sharding.reduce_gates``; ``shard_gates.json``), and, when a Dagster Pipes client launched it,
reports each reduced gate as an asset check (``passed`` and the gate's figures: sums and maxima, never a record), or,
when the launching step declares no such checks (the ``sharded_release`` job's shard releases with ``spark_launch:
pipes``; Pipes extra ``gates_as: metadata``), as the materialization's metadata (``gates``: {gate: passed}) and a
Pipes log line.

Launch it

- from a shell, or by ``spark-submit`` given the path of this file (client or cluster deploy mode; msa-release
  installed on the driver and the executors): ``spark-submit --master yarn pipeline/engines/spark_job.py --job /shared/…/shard_job.pickle``
  (without ``--spark-master`` the job uses the master spark-submit was given);
- from Dagster with ``dg.PipesSubprocessClient`` (``assets/sharded_pipes.py``). On EMR, Databricks or Dataproc the
  Pipes client of ``dagster-aws`` / ``dagster-databricks`` / ``dagster-gcp`` launches the same module; there the
  context and messages travel through S3 / DBFS / GCS, so the entry script opens Pipes with that cloud's loaders
  and calls :func:`run_job` (e.g. ``with open_dagster_pipes(message_writer=PipesS3MessageWriter(client=boto3.client
  ("s3"))) as pipes: run_job(path, executor=SparkExecutor(), pipes=pipes)``).

Exit status: 0 when every gate passed or when launched by Pipes (the checks then block what follows); 1 when a gate
failed outside Pipes; the status of the project's error otherwise (2 for an unusable job file or Spark missing).

Why a pickle: the job file holds Python objects of ``pipeline.core`` (the rules frame, hierarchies, ℓ per
attribute) and the home secret. It is written by the driver with mode 0600 into the PRIVATE staging directory (the
same trust as ``secret.key``: whoever can write it can already read the secret) and read only by the same locked
installation of msa-release, so unpickling it trusts nothing that the secret does not already trust. It is never a
user's input, and it is removed with the staging directory. A version stamp refuses a file of another format.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import pickle
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pipeline.core.sharding import GlobalModel, ShardParameters
from pipeline.engines.base import Executor, ShardJob, ShardSummary
from pipeline.errors import MsaReleaseError, UnusableInputError

__all__ = [
    "DEFAULT_REDUCE",
    "GATES_AS",
    "GATES_FILE_NAME",
    "JOB_FILE_NAME",
    "SUMMARIES_FILE_NAME",
    "ReduceGates",
    "main",
    "pipes_metadata",
    "read_job",
    "read_job_file",
    "report_gates",
    "run_job",
    "write_job",
]

JOB_FILE_NAME = "shard_job.pickle"
SUMMARIES_FILE_NAME = "shard_summaries.json"
GATES_FILE_NAME = "shard_gates.json"
#: the format stamp of a job file (a file of another format is refused, not guessed at)
JOB_FORMAT = "msa-release shard job 1"
#: the reduce of the gates, by import path (``pipeline.core.sharding.reduce_gates``)
DEFAULT_REDUCE = "pipeline.core.sharding:reduce_gates"
#: ``(partials per shard, model, parameters) -> {gate: {"passed": bool, figure: value, …}}``
ReduceGates = Callable[[Sequence[Mapping[str, Mapping[str, Any]]], GlobalModel, ShardParameters], dict[str, dict[str, Any]]]


def write_job(job: ShardJob, path: Path | None = None, *, reduce_arguments: Mapping[str, Any] | None = None) -> Path:
    """Write ``job`` for :func:`run_job` (PRIVATE: mode 0600, written whole then renamed into place).

    ``reduce_arguments`` are the keyword arguments the gates' reduce gets besides the partials, model and parameters
    (``reduce_gates``' ``n_input`` and ``n_dropped_missing``, from the input summary, for the accounting gate).

    Returns the path: ``path``, or ``<job.staging_dir>/shard_job.pickle``."""
    target = Path(path) if path is not None else job.staging_dir / JOB_FILE_NAME
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(f".{target.name}.partial")
    descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "wb") as stream:
        content = {"format": JOB_FORMAT, "job": job, "reduce_arguments": dict(reduce_arguments or {})}
        pickle.dump(content, stream, protocol=pickle.HIGHEST_PROTOCOL)
    os.replace(partial, target)
    return target


def read_job(path: Path) -> ShardJob:
    """The job :func:`write_job` wrote (:func:`read_job_file` gives the reduce's arguments too).

    Raises
    ------
    UnusableInputError
        The file is missing or unreadable, or is not a job file of this format (names the file).
    """
    return read_job_file(path)[0]


def read_job_file(path: Path) -> tuple[ShardJob, dict[str, Any]]:
    """(job, the reduce's keyword arguments) as :func:`write_job` wrote them; errors as :func:`read_job`."""
    try:
        with open(path, "rb") as stream:
            content = pickle.load(stream)
    except OSError as error:
        raise UnusableInputError(
            f"shard job file {path}: cannot be read ({error.strerror}); write it with pipeline.engines.spark_job.write_job",
            file=str(path),
        ) from None
    except (pickle.UnpicklingError, EOFError, AttributeError, ImportError, ValueError):
        raise UnusableInputError(
            f"shard job file {path}: not a shard job of this msa-release version; stage the run again",
            file=str(path),
        ) from None
    if not isinstance(content, dict) or content.get("format") != JOB_FORMAT or not isinstance(content.get("job"), ShardJob):
        raise UnusableInputError(
            f"shard job file {path}: not a shard job of format {JOB_FORMAT!r}; stage the run again", file=str(path)
        )
    job: ShardJob = content["job"]
    return job, dict(content.get("reduce_arguments") or {})


def _resolve(reference: ReduceGates | str) -> ReduceGates:
    """``reference`` itself when callable, else imported from ``"module:attribute"``."""
    if callable(reference):
        return reference
    module_name, _, attribute = reference.partition(":")
    function: ReduceGates = getattr(importlib.import_module(module_name), attribute)
    return function


def _write_json(path: Path, content: Any) -> None:
    partial = path.with_name(f".{path.name}.partial")
    descriptor = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as stream:
        json.dump(content, stream, indent=1, sort_keys=True)
    os.replace(partial, path)


def pipes_metadata(figures: Mapping[str, Any]) -> dict[str, Any]:
    """Gate figures as Dagster Pipes metadata: a mapping value (figures per attribute, per rule) marked as JSON, since
    Pipes reads a bare mapping as a ``{raw_value, type}`` pair; other values as they are (Dagster infers the type)."""
    return {key: {"raw_value": value, "type": "json"} if isinstance(value, Mapping) else value for key, value in figures.items()}


#: How the job reports the reduced gates to Pipes (the launching step's extra ``gates_as``): ``checks`` (default; the
#: launching asset declares one check per gate, :mod:`assets.sharded_pipes`) or ``metadata`` (the launching step is
#: ``sharded_release``'s shard releases, whose gates are the blocking checks of its candidate summary: a check the
#: step does not declare would be refused by Dagster, so the gates' verdicts travel as the materialization's metadata)
GATES_AS = ("checks", "metadata")


def report_gates(
    pipes: Any,
    gates: Mapping[str, Mapping[str, Any]],
    summaries: Sequence[ShardSummary],
    declared: Sequence[str] = (),
    *,
    gates_as: str = "checks",
) -> None:
    """Report the reduced gates to Dagster through an open Pipes context, then the materialization (S and the
    records per shard: counts only; ``gates_failed``).

    ``gates_as="checks"``: one asset check per gate (``passed`` and the gate's other figures as metadata). A gate the
    asset declares (``declared``) that the reduce did not compute (``posterior_within_bound`` when the run does not
    evaluate the posterior) is reported as not evaluated (passed, ``evaluated`` False, never blocking), as
    ``checks/gates.py`` reports a gate that does not apply: Dagster requires a result for every declared check.

    ``gates_as="metadata"``: no check; the materialization's metadata gains ``gates`` ({gate: passed}, JSON) and a
    Pipes log line says how many passed (the launching job's own checks decide).

    Raises
    ------
    ValueError
        ``gates_as`` is not one of :data:`GATES_AS`.
    """
    if gates_as not in GATES_AS:
        raise ValueError(f"gates_as must be one of {GATES_AS}, got {gates_as!r}")
    if gates_as == "checks":
        for gate, figures in gates.items():
            pipes.report_asset_check(
                check_name=gate,
                passed=bool(figures["passed"]),
                metadata=pipes_metadata({key: value for key, value in figures.items() if key != "passed"}),
            )
        for gate in declared:
            if gate not in gates:
                pipes.report_asset_check(
                    check_name=gate,
                    passed=True,
                    severity="WARN",
                    metadata={"evaluated": False, "reason": "not reduced by this sharded run"},
                )
    records = [summary.get("counts", {}).get("n_records") for summary in summaries]
    metadata: dict[str, Any] = {"engine": "spark", "n_shards": len(summaries)}
    if records and all(isinstance(n, int) for n in records):
        metadata.update({"n_records": sum(records), "shard_records_min": min(records), "shard_records_max": max(records)})
    metadata["gates_failed"] = sorted(gate for gate, figures in gates.items() if not figures["passed"])
    if gates_as == "metadata":
        metadata["gates"] = {"raw_value": {gate: bool(figures["passed"]) for gate, figures in gates.items()}, "type": "json"}
        passed = sum(bool(figures["passed"]) for figures in gates.values())
        pipes.log.info(f"spark_job: {len(summaries)} shards released on Spark; {passed} of {len(gates)} reduced gates passed")
    pipes.report_asset_materialization(metadata=metadata)


def run_job(
    job_path: Path,
    *,
    executor: Executor,
    reduce: ReduceGates | str = DEFAULT_REDUCE,
    pipes: Any = None,
    declared: Sequence[str] = (),
    gates_as: str = "checks",
) -> tuple[list[ShardSummary], dict[str, dict[str, Any]]]:
    """Release the shards of the job at ``job_path`` on ``executor``, write the summaries and the reduced gates next
    to the job file, report them to ``pipes`` (an open Dagster Pipes context) if given, with the gates the launching
    asset ``declared``, as checks or as metadata (``gates_as``; see :func:`report_gates`). The reduce gets the
    partials, the model, the parameters and the keyword arguments :func:`write_job` stored.

    Returns
    -------
    (summaries, gates)
        The S summaries in shard order; the reduced gates ({gate: {"passed": bool, figures…}}).

    Raises
    ------
    UnusableInputError
        The job file cannot be used (see :func:`read_job`).
    pipeline.engines.spark.ShardFailedError, pipeline.engines.spark.SparkUnavailableError
        From the Spark executor.
    """
    job_path = Path(job_path)
    job, reduce_arguments = read_job_file(job_path)
    summaries = executor.release_shards(job)
    _write_json(job_path.with_name(SUMMARIES_FILE_NAME), summaries)
    partials = [summary["partials"] for summary in summaries]
    gates = _resolve(reduce)(partials, job.model, job.parameters, **reduce_arguments)
    _write_json(job_path.with_name(GATES_FILE_NAME), gates)
    if pipes is not None:
        report_gates(pipes, gates, summaries, declared, gates_as=gates_as)
    return summaries, gates


def _arguments(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m pipeline.engines.spark_job",
        description="Release the staged shards of a sharded msa-release run on Apache Spark and reduce its gates.",
    )
    parser.add_argument("--job", type=Path, help="the shard job file (write_job); under Pipes, the extra 'job' may give it")
    where = parser.add_mutually_exclusive_group()
    where.add_argument(
        "--spark-master",
        help="client mode: local[2], yarn, k8s://https://…, spark://… (default: spark-submit's master, else local[2])",
    )
    where.add_argument("--spark-remote", help="Spark Connect: sc://host:15002")
    parser.add_argument("--pyspark-memory", help="spark.executor.pyspark.memory, e.g. 2g (client mode)")
    parser.add_argument("--shard-function", help="module:attribute of the per-shard function (default: the worker's)")
    parser.add_argument("--reduce", default=DEFAULT_REDUCE, help="module:attribute of the gates' reduce")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """The command line (see the module docstring); returns the exit status."""
    from dagster_pipes import PipesEnvVarParamsLoader, open_dagster_pipes

    from pipeline.engines.spark import SparkExecutor

    arguments = _arguments(argv)
    executor = SparkExecutor(  # without --spark-master: spark-submit's master when it launched us, else local[2]
        master=arguments.spark_master,
        remote=arguments.spark_remote,
        shard_function=arguments.shard_function,
        pyspark_memory=arguments.pyspark_memory,
    )
    try:
        if PipesEnvVarParamsLoader().is_dagster_pipes_process():  # type: ignore[no-untyped-call]
            with open_dagster_pipes() as pipes:
                job_path = arguments.job or pipes.get_extra("job")
                declared = list(pipes.extras.get("gates") or [])  # the checks the launching asset declares
                gates_as = str(pipes.extras.get("gates_as") or "checks")  # "metadata": sharded_release's step
                run_job(
                    Path(job_path),
                    executor=executor,
                    reduce=arguments.reduce,
                    pipes=pipes,
                    declared=declared,
                    gates_as=gates_as,
                )
            return 0
        if arguments.job is None:
            print("spark_job: --job is required outside Dagster Pipes", file=sys.stderr)
            return 2
        summaries, gates = run_job(arguments.job, executor=executor, reduce=arguments.reduce)
    except MsaReleaseError as error:
        print(f"spark_job: {error}", file=sys.stderr)
        return error.exit_status
    where = executor.remote or executor.master_used
    print(f"spark_job: {len(summaries)} shards released on Spark ({where})", file=sys.stderr)
    failed = sorted(gate for gate, figures in gates.items() if not figures["passed"])
    if failed:
        print(f"spark_job: gates failed: {', '.join(failed)}", file=sys.stderr)
        return 1
    print(f"spark_job: {len(gates)} gates passed", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
