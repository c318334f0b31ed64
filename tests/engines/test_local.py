"""The ``local`` executor (pipeline/engines/local.py): a process pool over the staged shards.

The workers are separate processes (forkserver): they run tests/engines/shard_fakes.py's shard functions, which put a
deterministic stand-in in place of the core's release_shard inside the worker."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.engines.local import LocalExecutor, ShardFailed
from pipeline.engines.staging import stage_input
from pipeline.errors import MsaReleaseError
from tests.engines import shard_fakes
from tests.engines.shard_fakes import QUASI_IDENTIFIERS, SALT, SENSITIVE_ATTRIBUTES, make_job


@pytest.fixture
def staged(two_files: Path, tmp_path: Path, fake_key: None) -> Path:
    """The two test files staged in 3 shards (2, 2 and 2 records)."""
    staging_dir = tmp_path / "run"
    result = stage_input(
        two_files,
        staging_dir,
        quasi_identifiers=QUASI_IDENTIFIERS,
        sensitive_attributes=SENSITIVE_ATTRIBUTES,
        salt=SALT,
        shard_rows=2,
        min_shard_rows=1,
    )
    assert result.n_shards == 3 and min(result.shard_records) > 0
    return staging_dir


def _output_bytes(staging_dir: Path) -> dict[str, bytes]:
    output = staging_dir / "output"
    return {str(p.relative_to(output)): p.read_bytes() for p in sorted(output.rglob("*")) if p.is_file()}


def test_two_workers_equal_the_in_process_loop(staged: Path) -> None:
    job = make_job(staged, 3)
    in_process = LocalExecutor(1, shard_function=shard_fakes.fake_staged_shard).release_shards(job)
    in_process_bytes = _output_bytes(staged)
    for path in (staged / "output").rglob("*.parquet"):
        path.unlink()
    pooled = LocalExecutor(2, shard_function=shard_fakes.fake_staged_shard).release_shards(job)
    assert [s["shard"] for s in in_process] == [0, 1, 2]
    assert pooled == in_process
    assert _output_bytes(staged) == in_process_bytes
    assert len(in_process_bytes) == 3 * 5  # five tables per shard


@pytest.mark.parametrize("workers", [1, 2])
def test_a_failing_shard_is_named_and_leaves_no_part(staged: Path, workers: int) -> None:
    job = make_job(staged, 3)
    with pytest.raises(ShardFailed, match=r"shard 1 of 3 \(0-based\) failed: ValueError: its message is withheld") as raised:
        LocalExecutor(workers, shard_function=shard_fakes.failing_staged_shard).release_shards(job)
    assert raised.value.shard == 1 and isinstance(raised.value, MsaReleaseError)
    # a foreign error's message may quote a value: neither the text nor the chain carries it (the Spark executor's rule)
    assert "SAC~" not in str(raised.value) and raised.value.__cause__ is None and raised.value.__suppress_context__
    assert not list((staged / "output").rglob("part-00001.parquet"))


@pytest.mark.parametrize("workers", [1, 2])
def test_a_shard_failing_while_writing_leaves_no_part(staged: Path, workers: int) -> None:
    job = make_job(staged, 3)
    with pytest.raises(ShardFailed, match="shard 1 of 3") as raised:
        LocalExecutor(workers, shard_function=shard_fakes.unwritable_staged_shard).release_shards(job)
    assert raised.value.shard == 1
    assert not list((staged / "output").rglob("part-00001.parquet")) and not list((staged / "output").rglob("*.tmp"))


def test_settings_are_checked() -> None:
    with pytest.raises(ValueError, match="workers must be at least 1"):
        LocalExecutor(0)
    with pytest.raises(ValueError, match="never fork"):
        LocalExecutor(2, start_method="fork")


def test_map_parts_returns_results_in_task_order_from_worker_processes():
    import os

    from pipeline.engines.local import map_parts

    results = map_parts(shard_fakes.square_in_a_process, [3, 1, 2, 5], workers=2)
    assert [square for square, _ in results] == [9, 1, 4, 25]
    assert os.getpid() not in {pid for _, pid in results}  # the tasks ran in the pool, not in this process
    in_process = map_parts(shard_fakes.square_in_a_process, [3, 1], workers=1)
    assert in_process == [(9, os.getpid()), (1, os.getpid())]


@pytest.mark.parametrize("workers", [1, 2])
def test_map_parts_names_the_lowest_failed_task(workers):
    from pipeline.engines.local import map_parts

    match = r"shard 1 of 4 \(0-based\) failed: UnusableInputError: task -1 is negative"
    with pytest.raises(ShardFailed, match=match) as caught:
        map_parts(shard_fakes.square_in_a_process, [0, -1, 2, -3], workers=workers)
    # the project's own error: its message, column and exit status are kept and it is chained
    assert caught.value.shard == 1 and caught.value.column == "task" and caught.value.exit_status == 2
    assert type(caught.value.__cause__).__name__ == "UnusableInputError"
    with pytest.raises(ValueError, match="workers must be at least 1"):
        map_parts(shard_fakes.square_in_a_process, [1], workers=0)


@pytest.mark.parametrize(
    ("workers", "n_shards", "expected"),
    [(2, 1, [2]), (4, 1, [2]), (1, 1, [1]), (2, 3, [1, 1, 1]), (1, 3, [1, 1, 1])],
)
def test_a_shard_released_alone_gets_the_idle_workers_core_for_gate_9(staged: Path, workers, n_shards, expected) -> None:
    """One shard with workers >= 2 runs in this process while the other worker's core idles: its gate-9 fit gets two
    threads (ShardParameters.posterior_threads); several shards, or one worker, keep one thread per shard."""
    summaries = LocalExecutor(workers, shard_function=shard_fakes.threads_of_shard).release_shards(make_job(staged, n_shards))
    assert [s["posterior_threads"] for s in summaries] == expected
