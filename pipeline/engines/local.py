"""The ``local`` executor: a process pool over the staged shards of one machine (issue 17; SCALE.md §3-§4).

Each worker process reads one shard's staged records, releases them and writes the part files
(:func:`pipeline.engines.worker.run_staged_shard`); only the JSON-able summaries come back, so the parent (the
Dagster step) never holds a record-level table. Worker processes are started with ``forkserver`` (or ``spawn``),
never ``fork``: Dagster runs threads in the parent, and forking a threaded process can deadlock.

Framework-free: no Dagster, no Great Expectations. The module imports neither the release core nor numba: a worker
process of :func:`map_parts` imports this module to run its task, and imports only what its function needs (the
out-of-core audit's workers never import the release core; the shard workers import it through
:func:`pipeline.engines.worker.run_staged_shard`).
"""

from __future__ import annotations

import dataclasses
import functools
import multiprocessing
import pickle
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_EXCEPTION, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import TYPE_CHECKING, TypeVar

from pipeline.errors import MsaReleaseError

if TYPE_CHECKING:
    from pipeline.engines.base import ShardJob, ShardSummary

__all__ = ["LocalExecutor", "ShardFailed", "map_parts"]

TaskT = TypeVar("TaskT")
ResultT = TypeVar("ResultT")

#: what a worker runs for one shard: (job, shard) -> summary; a module-level function (it is pickled by reference)
ShardFunction = Callable[["ShardJob", int], "ShardSummary"]


class ShardFailed(MsaReleaseError):
    """A shard could not be released; names the shard and the error's class, and its message when the error is the
    project's own (:class:`pipeline.errors.MsaReleaseError`, whose messages never quote a value).

    Another error's message (pandas, numpy, DuckDB…) may quote a record's value, so it is withheld here, from the
    chain (raised ``from None``) and so from the CLI and Dagster's step failure, as the Spark executor does.
    ``shard`` and ``n_shards`` are attributes; ``exit_status``, ``file`` and ``column`` are the cause's when it is an
    :class:`pipeline.errors.MsaReleaseError` (exit 1 otherwise)."""

    def __init__(self, shard: int, n_shards: int, cause: BaseException) -> None:
        ours = isinstance(cause, MsaReleaseError)
        detail = str(cause) if ours else "its message is withheld (it may quote an input value)"
        super().__init__(
            f"shard {shard} of {n_shards} (0-based) failed: {type(cause).__name__}: {detail}",
            file=getattr(cause, "file", None),
            column=getattr(cause, "column", None),
        )
        self.shard = shard
        self.n_shards = n_shards
        if isinstance(cause, MsaReleaseError):
            self.exit_status = cause.exit_status


def _chained(cause: BaseException) -> BaseException | None:
    """The cause to chain to a :class:`ShardFailed`: the project's own errors only (another's may quote a value)."""
    return cause if isinstance(cause, MsaReleaseError) else None


def _task_in_worker(function: Callable[[TaskT], ResultT], task: TaskT) -> ResultT:
    """Run ``function(task)`` in a worker; an unpicklable error becomes a RuntimeError naming its class and message."""
    try:
        return function(task)
    except Exception as error:
        try:
            pickle.loads(pickle.dumps(error))
        except Exception:
            raise RuntimeError(f"{type(error).__name__}: {error}") from None
        raise


def map_parts(
    function: Callable[[TaskT], ResultT],
    tasks: Sequence[TaskT],
    *,
    workers: int = 2,
    start_method: str = "forkserver",
    hint: str = "lower --workers",
) -> list[ResultT]:
    """``[function(task) for task in tasks]`` on a pool of ``workers`` processes, one task per process at a time (the
    out-of-core audit maps its per-part figures with it: one part triple in memory per worker).

    Parameters
    ----------
    function
        A module-level function (pickled by reference); its task and result must pickle.
    tasks
        One task per part, in part order; task ``i`` is reported as shard ``i``.
    workers
        Processes (>= 1); with one worker or one task the tasks run in this process, one after the other.
    start_method
        ``"forkserver"`` or ``"spawn"`` (never ``fork``: Dagster runs threads in the parent).
    hint
        What the error says to do when a worker process dies (killed, out of memory).

    Returns
    -------
    list
        The results in task order.

    Raises
    ------
    ValueError
        ``workers`` < 1 or another start method.
    ShardFailed
        A task failed: the lowest-numbered one that failed (tasks not started are cancelled, running ones finish
        first), the error chained when it is the project's own.
    """
    if workers < 1:
        raise ValueError(f"workers must be at least 1, not {workers}")
    if start_method not in ("forkserver", "spawn"):
        raise ValueError(f"start_method must be 'forkserver' or 'spawn', not {start_method!r} (never fork a threaded process)")
    if min(workers, len(tasks)) <= 1:
        results = []
        for index, task in enumerate(tasks):
            try:
                results.append(function(task))
            except Exception as error:
                raise ShardFailed(index, len(tasks), error) from _chained(error)
        return results
    # the parent idles while the pool works: what it freed (the staging's DuckDB and Arrow buffers) goes back to the
    # system before the workers start, so that the process tree holds the workers' shards, not the parent's high-water mark
    from pipeline.engines.worker import return_freed_memory

    return_freed_memory()
    context = multiprocessing.get_context(start_method)
    with ProcessPoolExecutor(max_workers=min(workers, len(tasks)), mp_context=context) as pool:
        futures = [pool.submit(_task_in_worker, function, task) for task in tasks]
        wait(futures, return_when=FIRST_EXCEPTION)
        for future in futures:  # what has not started is dropped; what runs is let finish, so that the report
            future.cancel()  # names the lowest failed task whatever the order the tasks ended in
        wait(futures)
        failed = [index for index, f in enumerate(futures) if not f.cancelled() and f.exception() is not None]
        if not failed:
            return [future.result() for future in futures]
        cause = futures[failed[0]].exception()
        assert cause is not None
        reported: BaseException = cause
        if isinstance(cause, BrokenProcessPool):
            reported = MsaReleaseError(f"a worker process died (killed, or out of memory?); {hint}")
        raise ShardFailed(failed[0], len(tasks), reported) from _chained(reported)


class LocalExecutor:
    """Releases the shards of a job on this machine, ``workers`` shards at a time.

    Parameters
    ----------
    workers
        Worker processes (>= 1). With ``workers == 1``, or a single shard, the shards are released in this process,
        one after the other (no process start-up; a single shard is today's release). A single shard with
        ``workers`` >= 2 lets gate 9's fit use two threads (``ShardParameters.posterior_threads``): the core the
        idle worker would have used.
    shard_function
        What a worker runs per shard (None, the default: :func:`pipeline.engines.worker.run_staged_shard`); a
        module-level function, since it is pickled by reference to reach the workers.
    start_method
        ``"forkserver"`` (default) or ``"spawn"``; ``"fork"`` is refused.

    Raises
    ------
    ValueError
        ``workers`` < 1 or a start method other than forkserver / spawn.
    """

    name = "local"

    def __init__(
        self, workers: int = 2, *, shard_function: ShardFunction | None = None, start_method: str = "forkserver"
    ) -> None:
        if workers < 1:
            raise ValueError(f"workers must be at least 1, not {workers}")
        if start_method not in ("forkserver", "spawn"):
            raise ValueError(
                f"start_method must be 'forkserver' or 'spawn', not {start_method!r} (never fork a threaded process)"
            )
        if shard_function is None:
            from pipeline.engines.worker import run_staged_shard

            shard_function = run_staged_shard
        self.workers = workers
        self.shard_function: ShardFunction = shard_function
        self.start_method = start_method

    def release_shards(self, job: ShardJob) -> list[ShardSummary]:
        """Release shards ``0 .. job.n_shards - 1``; return their summaries in shard order.

        Raises
        ------
        ShardFailed
            A shard failed (the lowest-numbered failed shard when several did; the others are cancelled or left to
            finish, and their summaries are dropped). The failed shard leaves no part file
            (:func:`pipeline.engines.worker.release_and_write_shard`); a worker process that died (killed, out of
            memory) breaks the pool: reported as the lowest-numbered shard left unfinished, with a hint.
        """
        if job.n_shards == 1 and self.workers >= 2 and job.parameters.posterior_threads < 2:
            # one shard released in this process: the idle worker's core serves gate 9's second held-out fold
            job = dataclasses.replace(job, parameters=dataclasses.replace(job.parameters, posterior_threads=2))
        return map_parts(
            functools.partial(self.shard_function, job),
            range(job.n_shards),
            workers=self.workers,
            start_method=self.start_method,
            hint="lower --workers or --shard-rows",
        )
