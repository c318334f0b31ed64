"""Apache Spark as the distributed engine of sharded releases (issue 17; design note ``SCALE.md`` §4-§5).

:class:`SparkExecutor` releases every staged shard of a :class:`~pipeline.engines.base.ShardJob` with
``groupBy("shard").applyInPandas``: Spark reads the PRIVATE staged input (``input/shard=<s>/*.parquet``, the
partition column ``shard``), hands each shard's records to one Python worker as a pandas frame (one task per
shard: the grouping key is one number per shard, chosen so that hash partitioning sends shard s to partition s), and the worker calls
the per-shard function (by default :func:`pipeline.engines.worker.release_and_write_shard`), which writes the
shard's part files under ``output/`` and returns the shard's JSON-able summary. Only the S summaries (one row per
shard: ``shard`` int, ``summary`` JSON text) come back to the driver: nothing record-level.

Where it runs: client mode with ``master`` (``local[2]`` on one machine, ``yarn``, ``k8s://https://…``,
``spark://…``), or Spark Connect with ``remote`` (``sc://host:15002``). On a cluster, the staging directory must be a
path every executor reads and writes (a shared file system), and the executors need the same locked environment
(msa-release installed from ``uv.lock``).

How the job reaches the executors: the :class:`ShardJob` (global rules, S_max, clusters, parameters, the home
secret) travels in the closure of the grouped-map function, which Spark serialises (cloudpickle) with the task;
this works in client mode and over Spark Connect alike (Connect has no ``SparkContext.broadcast``). The job holds the
home secret: on a shared cluster, turn on Spark's RPC and local-disk encryption (``spark.network.crypto.enabled``,
``spark.io.encryption.enabled``, ``spark.authenticate``).

Requires the optional extra ``msa-release[spark]`` (pyspark) and, in client mode, Java 17 or 21; both are checked
with a clear error (:class:`SparkUnavailableError`) naming what to install or ``--engine local``.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import shutil
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from pipeline.engines.base import ShardJob, ShardSummary
from pipeline.engines.local import ShardFailed
from pipeline.errors import MsaReleaseError, UnusableInputError

if TYPE_CHECKING:  # pyspark is an optional extra: imported only when a Spark executor runs
    from pyspark.sql import SparkSession

__all__ = [
    "DEFAULT_SHARD_FUNCTION",
    "ShardFailedError",
    "ShardFunction",
    "SparkExecutor",
    "SparkUnavailableError",
    "records_of_staged_shard",
    "resolve_shard_function",
    "stop_spark",
]

#: the per-shard function both engines call, as an import path (resolved on the executor, not pickled by value)
DEFAULT_SHARD_FUNCTION = "pipeline.engines.worker:release_and_write_shard"
#: ``(records, job, shard) -> summary``: releases one shard's records and writes its parts (see the module docstring)
ShardFunction = Callable[[pd.DataFrame, ShardJob, int], ShardSummary]

#: what a failing shard's Python worker raises, so that the driver can name the shard (the JSON after it holds the
#: error's class, exit status, message, file and column: no record value, as the project's errors never echo one)
_SHARD_FAILED = "msa-release shard failed: "
_SHARD_FAILED_PATTERN = re.compile(re.escape(_SHARD_FAILED) + r"(\{[^\n]*\})")
#: the grouping column: one key per shard, chosen so that each shard is its own task (:func:`_task_keys`)
_TASK_KEY = "__msa_release_task"
#: the schema of the grouped map's output: one row per shard
_OUTPUT_SCHEMA = "shard int, summary string"
_INSTALL_HINT = "install the Spark engine with `pip install 'msa-release[spark]'`, or run with `--engine local`"


class SparkUnavailableError(UnusableInputError):
    """The Spark engine cannot start here: pyspark is not installed, or Java is missing (exit 2).

    The message says what to install (``pip install 'msa-release[spark]'``, Java 17) or to use ``--engine local``."""


class ShardFailedError(ShardFailed):
    """One shard's release failed on a Spark executor: a :class:`pipeline.engines.local.ShardFailed` (the same
    ``shard``, ``n_shards``, ``exit_status``, ``file``, ``column``), whose cause stayed on the executor.

    Attributes
    ----------
    shard, n_shards
        The failing shard (0-based) and S.
    error_class
        The class name of the error the shard function raised.
    exit_status
        That error's exit status when it was one of the project's errors (:mod:`pipeline.errors`), else 1.
    file, column
        As named by that error, else None. A foreign error's message is not carried (it may hold a value).
    """

    def __init__(
        self,
        message: str,
        *,
        shard: int,
        n_shards: int,
        error_class: str,
        exit_status: int = 1,
        file: str | None = None,
        column: str | None = None,
    ) -> None:
        MsaReleaseError.__init__(self, message, file=file, column=column)
        self.shard = shard
        self.n_shards = n_shards
        self.error_class = error_class
        self.exit_status = exit_status


def resolve_shard_function(shard_function: ShardFunction | str) -> ShardFunction:
    """The per-shard function itself: ``shard_function`` when callable, else imported from ``"module:attribute"``.

    Raises
    ------
    ValueError
        A string that is not ``module:attribute``.
    ImportError, AttributeError
        The module or the attribute does not exist.
    """
    if callable(shard_function):
        return shard_function
    module_name, separator, attribute = shard_function.partition(":")
    if not separator or not module_name or not attribute:
        raise ValueError(f"shard function {shard_function!r}: expected 'module:attribute'")
    function: ShardFunction = getattr(importlib.import_module(module_name), attribute)
    return function


def records_of_staged_shard(frame: pd.DataFrame, columns: Sequence[str] | None = None) -> pd.DataFrame:
    """A shard's records as the per-shard function takes them, from the rows Spark hands to the grouped map.

    Parameters
    ----------
    frame
        One shard's staged rows: ``row_id`` (integer), the configured columns (text, None for a missing value) and
        the partition column ``shard``, in any order of rows.
    columns
        The columns to keep, in this order (``row_id``, the quasi-identifiers, the sensitive attributes, as
        :func:`pipeline.engines.worker.read_staged_shard` gives them); None: every column but ``shard``.

    Returns
    -------
    pandas.DataFrame
        ``row_id`` (int64) and every configured column as categorical text (sorted categories: exactly the values
        present, as :func:`pipeline.io.loading.load_records` gives them; a missing value stays NaN), sorted by
        ``row_id`` with a fresh RangeIndex; the ``shard`` column dropped.
    """
    records = frame.drop(columns=["shard"], errors="ignore").sort_values("row_id", kind="stable").reset_index(drop=True)
    if columns is not None:
        records = records[list(columns)]
    records["row_id"] = records["row_id"].astype("int64")
    for column in records.columns:
        if column != "row_id" and not isinstance(records[column].dtype, pd.CategoricalDtype):
            records[column] = records[column].astype("category")
    return records


def _task_keys(session: SparkSession, n_shards: int) -> list[int]:
    """For each shard s (0..n_shards-1), an int key k_s that Spark's hash partitioning sends to partition s among
    ``n_shards`` partitions: a grouping key k goes to ``pmod(hash(k), n)`` (Murmur3, seed 42: SQL's ``hash``). Found by
    one small query over 64·S candidates (a shard with no candidate, probability e^-64, keeps its own number)."""
    from pyspark.sql import functions

    candidates = (
        session.range(0, 64 * max(1, n_shards))
        .select(functions.col("id").cast("int").alias("id"))
        .select("id", functions.expr(f"pmod(hash(id), {max(1, n_shards)})").alias("partition"))
    )
    found = {
        int(row["partition"]): int(row["key"])
        for row in candidates.groupBy("partition").agg(functions.min("id").alias("key")).collect()
    }
    return [found.get(shard, shard) for shard in range(n_shards)]


def _release_group(shard_function: ShardFunction | str, job: ShardJob) -> Callable[[pd.DataFrame], pd.DataFrame]:
    """The grouped-map function run on the executors: one shard's rows in, one row (shard, summary JSON) out."""

    columns = ["row_id", *job.parameters.quasi_identifiers, *job.parameters.sensitive_attributes]

    def release(frame: pd.DataFrame) -> pd.DataFrame:
        shard = int(frame["shard"].iloc[0])
        try:
            records = records_of_staged_shard(frame, columns)
            summary = resolve_shard_function(shard_function)(records, job, shard)
            text = json.dumps(summary)
        except Exception as error:  # named for the driver: the shard, the class, the project's fields
            ours = error if isinstance(error, MsaReleaseError) else None  # a foreign error's message may hold a value
            details = {
                "shard": shard,
                "error_class": type(error).__name__,
                "exit_status": ours.exit_status if ours else 1,
                "file": ours.file if ours else None,
                "column": ours.column if ours else None,
                "message": str(ours) if ours else "",
            }
            raise RuntimeError(_SHARD_FAILED + json.dumps(details)) from None
        return pd.DataFrame({"shard": pd.Series([shard], dtype="int32"), "summary": [text]})

    return release


def _shard_failure(error: BaseException, n_shards: int) -> ShardFailedError | None:
    """The :class:`ShardFailedError` a Spark error carries (the worker's marker in its text), else None."""
    match = _SHARD_FAILED_PATTERN.search(str(error))
    if match is None:
        return None
    details = json.loads(match.group(1))
    shard, error_class = int(details["shard"]), str(details["error_class"])
    message = f"shard {shard} of {n_shards} (0-based) failed on Spark: {error_class}"
    if details.get("message"):
        message += f": {details['message']}"
    return ShardFailedError(
        message,
        shard=shard,
        n_shards=n_shards,
        error_class=error_class,
        exit_status=int(details.get("exit_status") or 1),
        file=details.get("file"),
        column=details.get("column"),
    )


def _require_pyspark() -> None:
    try:
        importlib.import_module("pyspark.sql")
    except ImportError as error:
        raise SparkUnavailableError(f"--engine spark needs pyspark, which is not installed: {_INSTALL_HINT}") from error


def _require_java() -> None:
    java_home = os.environ.get("JAVA_HOME")
    if java_home and (Path(java_home) / "bin" / "java").exists():
        return
    if shutil.which("java") is None:
        raise SparkUnavailableError(
            "--engine spark with --spark-master needs Java 17 or 21 (a `java` on PATH or JAVA_HOME), which was not "
            "found: install it (Debian: `apt-get install openjdk-17-jre-headless`), connect to a Spark Connect "
            "server with --spark-remote sc://…, or run with `--engine local`"
        )


class SparkExecutor:
    """Releases the staged shards of a job on Apache Spark (``groupBy("shard").applyInPandas``).

    Parameters
    ----------
    master
        Client mode: the Spark master (``local[2]``, ``yarn``, ``k8s://https://…``, ``spark://…``); when neither
        ``master`` nor ``remote`` nor ``session`` is given: the master ``spark-submit`` was given when it launched
        this process, else ``local[2]``.
    remote
        Spark Connect: the server's address (``sc://host:15002``); no local Java needed.
    session
        An existing SparkSession to use (never stopped by the executor); else one is got or created with the app
        name ``msa-release``, the UI off and, with a ``local`` master, the Python workers on this interpreter
        (``PYSPARK_PYTHON`` while the session starts, unless set; on a cluster set ``PYSPARK_PYTHON`` or
        ``spark.pyspark.python`` to the shipped environment's interpreter), and stopped after :meth:`release_shards` if this executor created it.
    shard_function
        ``(records, job, shard) -> summary`` or its import path ``"module:attribute"`` (resolved on each executor);
        default :data:`DEFAULT_SHARD_FUNCTION`. A callable is serialised with the task (cloudpickle).
    pyspark_memory
        ``spark.executor.pyspark.memory`` (e.g. ``"2g"``): the memory limit of each Python worker, which holds one
        shard at a time (keep ``shard_rows`` ≤ 1-2M records). Client mode only (a Connect server sets its own).
    config
        Further Spark settings for a session this executor creates (``{"spark.executor.memory": "4g"}``).

    Raises
    ------
    ValueError
        Both ``master`` and ``remote`` given.
    """

    name = "spark"

    def __init__(
        self,
        master: str | None = None,
        remote: str | None = None,
        session: SparkSession | None = None,
        shard_function: ShardFunction | str | None = None,
        *,
        pyspark_memory: str | None = None,
        config: Mapping[str, str] | None = None,
    ) -> None:
        if master is not None and remote is not None:
            raise ValueError("give either a Spark master (--spark-master) or a Spark Connect address (--spark-remote)")
        self.master = master
        self.remote = remote
        self.session = session
        self.shard_function: ShardFunction | str = shard_function if shard_function is not None else DEFAULT_SHARD_FUNCTION
        self.pyspark_memory = pyspark_memory
        self.config = dict(config or {})
        #: the master the last :meth:`release_shards` ran on (``spark.master``; None over Spark Connect or before a run)
        self.master_used: str | None = None

    def _session(self) -> tuple[SparkSession, bool]:
        """(session, created here)."""
        if self.session is not None:
            return self.session, False
        _require_pyspark()
        from pyspark.sql import SparkSession

        builder = SparkSession.builder.appName("msa-release")
        settings = dict(self.config)
        master: str | None = None
        if self.remote is not None:
            builder = builder.remote(self.remote)
        else:
            launched_by_spark_submit = "PYSPARK_GATEWAY_PORT" in os.environ  # its JVM and master are already there
            if not launched_by_spark_submit:
                _require_java()
            master = self.master or (None if launched_by_spark_submit else "local[2]")
            if master is not None:
                builder = builder.master(master)
            settings.setdefault("spark.ui.enabled", "false")
            if self.pyspark_memory is not None:
                settings["spark.executor.pyspark.memory"] = self.pyspark_memory
        for key, value in settings.items():
            builder = builder.config(key, value)
        active = SparkSession.getActiveSession()
        try:
            with _python_of_local_workers(None if self.remote is not None else master):
                session = builder.getOrCreate()
        except Exception as error:
            if self.remote is None and "JAVA_GATEWAY_EXITED" in str(error):
                raise SparkUnavailableError(
                    "Spark's Java process did not start (is Java 17 or 21 installed and JAVA_HOME right?); "
                    "or run with `--engine local`"
                ) from error
            raise
        return session, active is None or session is not active

    def release_shards(self, job: ShardJob) -> list[ShardSummary]:
        """Release every staged shard of ``job`` and return the summaries in shard order.

        Reads ``job.input_dir`` (``shard=<s>`` partitions of Parquet: ``row_id`` and the configured columns), runs the
        shard function once per shard on the executors, and collects the S summaries (nothing record-level).

        Raises
        ------
        SparkUnavailableError
            pyspark or Java missing (the message names ``msa-release[spark]`` / ``--engine local``).
        ShardFailedError
            A shard's release failed (names the shard, the error's class, and its file/column when it named one).
        ValueError
            A shard of ``range(job.n_shards)`` has no staged records, or a summary names another shard.
        """
        session, created = self._session()
        try:
            return self._release_shards(session, job)
        finally:
            if created:
                stop_spark(session)

    def _release_shards(self, session: SparkSession, job: ShardJob) -> list[ShardSummary]:
        from pyspark.sql import functions

        self.master_used = None if self.remote is not None else session.conf.get("spark.master", None)
        staged = session.read.parquet(str(job.input_dir)).withColumn("shard", functions.col("shard").cast("int"))
        with _shuffle_settings(session, job.n_shards):
            # group by a key that hash-partitions shard s into partition s: one shard per task (grouping by the shard
            # number itself would put two shards in one task and leave another task idle)
            keys = functions.array(*[functions.lit(key).cast("int") for key in _task_keys(session, job.n_shards)])
            by_task = staged.withColumn(_TASK_KEY, functions.element_at(keys, functions.col("shard") + 1))
            released = by_task.groupBy(_TASK_KEY).applyInPandas(_release_group(self.shard_function, job), schema=_OUTPUT_SCHEMA)
            try:
                rows = released.collect()
            except Exception as error:
                failure = _shard_failure(error, job.n_shards)
                if failure is not None:
                    raise failure from None
                raise
        summaries: dict[int, ShardSummary] = {}
        for row in rows:
            summary = json.loads(row["summary"])
            if int(summary.get("shard", row["shard"])) != int(row["shard"]):
                raise ValueError(f"the summary of shard {row['shard']} names shard {summary.get('shard')}")
            summaries[int(row["shard"])] = summary
        missing = sorted(set(range(job.n_shards)) - set(summaries))
        unexpected = sorted(set(summaries) - set(range(job.n_shards)))
        if missing or unexpected:
            raise ValueError(
                f"staged shards under {job.input_dir} do not match n_shards={job.n_shards}: "
                f"missing {missing[:10]}, unexpected {unexpected[:10]} (stage the input again)"
            )
        return [summaries[shard] for shard in sorted(summaries)]


@contextmanager
def _python_of_local_workers(master: str | None) -> Iterator[None]:
    """With a ``local`` master and no ``PYSPARK_PYTHON``, the Python workers run this interpreter (the environment
    msa-release is installed in), not the first ``python3`` on PATH: pyspark reads ``PYSPARK_PYTHON`` once, when the
    SparkContext starts, so it is set only for that moment."""
    if master is None or not master.startswith("local") or "PYSPARK_PYTHON" in os.environ:
        yield
        return
    os.environ["PYSPARK_PYTHON"] = sys.executable
    try:
        yield
    finally:
        os.environ.pop("PYSPARK_PYTHON", None)


def stop_spark(session: SparkSession, *, timeout: float = 60.0) -> None:
    """Stop ``session`` and, in client mode, the JVM that pyspark launched for it (and with it the Python workers).

    pyspark's JVM exits when the pipe on its standard input closes; closing it (rather than sending SIGTERM, which a
    background process may have inherited as ignored) and waiting ``timeout`` seconds, then SIGKILL, leaves no
    process behind. A Spark Connect session is only stopped (the server is not ours). A later session in the same
    process launches a new JVM.
    """
    session.stop()
    from pyspark import SparkContext

    gateway = SparkContext._gateway
    if gateway is None:
        return
    process = getattr(gateway, "proc", None)
    try:
        gateway.shutdown()
    finally:
        SparkContext._gateway = None
        SparkContext._jvm = None
        if process is not None:
            if process.stdin is not None:
                process.stdin.close()
            try:
                process.wait(timeout=timeout)
            except Exception:
                process.kill()
                process.wait(timeout=timeout)


@contextmanager
def _shuffle_settings(session: SparkSession, n_shards: int) -> Iterator[None]:
    """One shuffle partition per shard and no coalescing of partitions (so that adaptive execution never puts two
    shards in one task) while the job runs; the session's own settings restored afterwards (also after an error)."""
    settings = {
        "spark.sql.shuffle.partitions": str(max(1, n_shards)),
        "spark.sql.adaptive.coalescePartitions.enabled": "false",
    }
    previous = {key: session.conf.get(key, None) for key in settings}
    for key, value in settings.items():
        session.conf.set(key, value)
    try:
        yield
    finally:
        for key, earlier in previous.items():
            if earlier is None:
                session.conf.unset(key)
            else:
                session.conf.set(key, earlier)
