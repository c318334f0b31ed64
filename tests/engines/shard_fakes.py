"""Small stand-ins for the sharding core, so the engines' tests do not depend on helper "core"'s bodies.

Module-level functions: the ``local`` executor's worker processes import them by name (tests.engines.shard_fakes).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from pipeline.core import sharding
from pipeline.engines.base import ShardJob, ShardSummary
from pipeline.engines.worker import run_staged_shard

MASK64 = (1 << 64) - 1
#: a shard salt for the tests
SALT = 0x0123456789ABCDEF
QUASI_IDENTIFIERS = ("sex", "zip")
SENSITIVE_ATTRIBUTES = ("disease", "job")


def make_job(
    staging_dir: Path,
    n_shards: int,
    quasi_identifiers: tuple[str, ...] = QUASI_IDENTIFIERS,
    sensitive_attributes: tuple[str, ...] = SENSITIVE_ATTRIBUTES,
) -> ShardJob:
    """A shard job over the given columns (the stand-ins ignore the model)."""
    model = sharding.GlobalModel(rules=pd.DataFrame(), s_max=None, strong_value_occurrences={}, clusters=[], n_records=0)
    parameters = sharding.ShardParameters(
        quasi_identifiers=quasi_identifiers, sensitive_attributes=sensitive_attributes, ell=2, seed=0
    )
    return ShardJob(staging_dir=staging_dir, model=model, parameters=parameters, secret=None, n_shards=n_shards)


def splitmix64_reference(x: int) -> int:
    """SplitMix64's finaliser, written out on Python integers (Steele, Lea & Flood 2014; Vigna's splitmix64.c)."""
    z = (x + 0x9E3779B97F4A7C15) & MASK64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


def reference_shard_of(row_ids: np.ndarray, *, salt: int, n_shards: int) -> np.ndarray:
    """The shard key, one Python integer at a time."""
    return np.asarray(
        [splitmix64_reference((int(r) + salt) & MASK64) % n_shards for r in np.asarray(row_ids).tolist()], dtype=np.int32
    )


def plan_stand_in(n_records: int, *, shard_rows: int, min_shard_rows: int) -> sharding.ShardPlan:
    """S = ceil(n / shard_rows), no floor."""
    return sharding.ShardPlan(
        n_records=n_records,
        shard_rows=shard_rows,
        n_shards=max(1, math.ceil(n_records / shard_rows)),
        min_shard_rows=min_shard_rows,
    )


def fake_release_shard(
    records: pd.DataFrame,
    model: sharding.GlobalModel,
    parameters: sharding.ShardParameters,
    *,
    secret: bytes | None,
    shard: int,
    n_shards: int,
) -> sharding.ShardRelease:
    """A deterministic function of the records: groups of 3 consecutive records, every 5th record deleted."""
    n = len(records)
    deleted_mask = (records["row_id"].to_numpy() % 5) == 0
    kept = records[~deleted_mask].reset_index(drop=True)
    local = np.arange(1, len(kept) + 1, dtype=np.int64)
    sac = kept.drop(columns="row_id").assign(row_id=local, group_id=(local - 1) // 3 + 1)
    first = parameters.sensitive_attributes[0]
    attribute_table = pd.DataFrame(
        {"row_id": local[: len(local) // 2] + len(local), first: kept[first].iloc[: len(local) // 2].to_numpy()}
    )
    id_table = pd.DataFrame({"group_id": np.unique(sac["group_id"]), "sid": np.arange(1, sac["group_id"].nunique() + 1)})
    row_map = pd.DataFrame({"source_row_id": kept["row_id"].to_numpy(dtype=np.int64), "row_id": local})
    deleted = pd.DataFrame({"row_id": records["row_id"].to_numpy(dtype=np.int64)[deleted_mask], "reason": "no_partners"})
    counts: dict[str, Any] = {
        "n_records": np.int64(n),
        "n_deleted": np.int64(deleted_mask.sum()),
        "n_sids": {first: np.int64(len(id_table))},
        "n_suppressed_cells": {first: 0},
    }
    partials: dict[str, dict[str, Any]] = {
        "gate_1": {"max_share": np.float64(1 / 3), "passed": np.bool_(True)},
        "gate_5": {"row_ids": np.arange(2)},
    }
    return sharding.ShardRelease(
        shard=shard,
        sac_released=sac,
        attribute_table=attribute_table,
        id_table=id_table,
        row_map=row_map,
        deleted=deleted,
        counts=counts,
        partials=partials,
    )


def _failing_release_shard(records: pd.DataFrame, *args: Any, shard: int, **kwargs: Any) -> sharding.ShardRelease:
    if shard == 1:
        raise ValueError("no SAC~ group can be formed in this shard")
    return fake_release_shard(records, *args, shard=shard, **kwargs)


def _unwritable_release_shard(records: pd.DataFrame, *args: Any, shard: int, **kwargs: Any) -> sharding.ShardRelease:
    released = fake_release_shard(records, *args, shard=shard, **kwargs)
    if shard != 1:
        return released
    # the last table cannot be written (mixed types in one column): the first four parts are written before it fails
    bad = pd.DataFrame({"row_id": [1, 2], "reason": [b"\x00", 3.5]})
    return sharding.ShardRelease(**{**released.__dict__, "deleted": bad})


def _with_release(release: Any, job: ShardJob, shard: int) -> ShardSummary:
    """run_staged_shard with ``release`` as the core's release_shard (restored afterwards: also runs in-process)."""
    original = sharding.release_shard
    sharding.release_shard = release
    try:
        return run_staged_shard(job, shard)
    finally:
        sharding.release_shard = original


def fake_staged_shard(job: ShardJob, shard: int) -> ShardSummary:
    return _with_release(fake_release_shard, job, shard)


def failing_staged_shard(job: ShardJob, shard: int) -> ShardSummary:
    return _with_release(_failing_release_shard, job, shard)


def unwritable_staged_shard(job: ShardJob, shard: int) -> ShardSummary:
    return _with_release(_unwritable_release_shard, job, shard)


def square_in_a_process(task: int) -> tuple[int, int]:
    """A map_parts task: its square and the worker's process id (module level: pickled by reference)."""
    import os

    from pipeline.errors import UnusableInputError

    if task < 0:
        raise UnusableInputError(f"task {task} is negative", column="task")
    return task * task, os.getpid()


def threads_of_shard(job: ShardJob, shard: int) -> dict[str, int]:
    """A stand-in shard function that reports the gate-9 threads its job gives it (no file read or written)."""
    return {"shard": shard, "posterior_threads": job.parameters.posterior_threads}
