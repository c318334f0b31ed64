"""Toy per-shard functions and staged inputs for the engine tests (they stand in for
``pipeline.engines.worker.release_and_write_shard`` while the real one is built): deterministic, they write part
files under the job's ``output/`` and return a summary shaped as the real one (``shard``, ``counts``, ``partials``,
``parts``)."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from pipeline.core.sharding import GlobalModel, ShardParameters
from pipeline.engines.base import ShardJob
from pipeline.errors import UnusableInputError

#: the toy table's text columns (values that sort differently as text and as numbers, on purpose)
COLUMNS = ("age", "disease")


def toy_job(staging_dir: Path, *, n_shards: int, secret: bytes | None = b"k" * 32) -> ShardJob:
    """A ShardJob over a toy staging directory (the global model is a placeholder: toy shard functions ignore it)."""
    model = GlobalModel(rules=pd.DataFrame(), s_max=None, strong_value_occurrences={}, clusters=[["disease"]], n_records=0)
    parameters = ShardParameters(quasi_identifiers=("age",), sensitive_attributes=("disease",), ell=2, seed=7)
    return ShardJob(staging_dir=staging_dir, model=model, parameters=parameters, secret=secret, n_shards=n_shards)


def stage_toy_input(staging_dir: Path, *, n_records: int, n_shards: int, seed: int = 0) -> pd.DataFrame:
    """Write ``input/shard=<s>/part-<k>.parquet`` (``row_id`` int64 + COLUMNS as text; each shard in two files whose
    rows are NOT in row_id order) and return the whole toy table (``row_id``, COLUMNS, ``shard``)."""
    generator = np.random.default_rng(seed)
    table = pd.DataFrame(
        {
            "row_id": np.arange(1, n_records + 1, dtype="int64"),
            "age": generator.choice(["9", "10", "27", "100"], size=n_records).astype(object),
            "disease": generator.choice(["flu", "Flu", "asthma", "ulcer", "é-cold"], size=n_records).astype(object),
        }
    )
    table["shard"] = (table["row_id"] * 2654435761 % 1000003 % n_shards).astype("int32")
    for shard, rows in table.groupby("shard"):
        directory = staging_dir / "input" / f"shard={shard}"
        directory.mkdir(parents=True, exist_ok=True)
        shuffled = rows.drop(columns=["shard"]).iloc[generator.permutation(len(rows))]
        half = len(shuffled) // 2
        for part, piece in enumerate((shuffled.iloc[:half], shuffled.iloc[half:])):
            pq.write_table(pa.Table.from_pandas(piece, preserve_index=False), directory / f"part-{part}.parquet")
    return table


def write_toy_parts(records: pd.DataFrame, job: ShardJob, shard: int) -> dict:
    """The toy release of a shard: its records with the row ids made local and the text kept categorical, written
    to ``output/toy/part-<s:05d>.parquet``; the summary counts records per disease and records the dtypes seen."""
    released = records.copy()
    released["row_id"] = np.arange(1, len(released) + 1, dtype="int64")
    path = Path("toy") / f"part-{shard:05d}.parquet"
    target = job.output_dir / path
    target.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pandas(released, preserve_index=False), target)
    counts = records["disease"].value_counts(sort=False)
    return {
        "shard": shard,
        "counts": {"n_records": len(records), "first_row_id": int(records["row_id"].iloc[0])},
        "partials": {
            "toy_gate": {"max_per_disease": int(counts.max()), "n_records": len(records)},
            "dtypes": {column: str(records[column].dtype) for column in records.columns},
            "age_categories": [str(value) for value in records["age"].cat.categories],
        },
        "parts": {
            "toy": {"path": path.as_posix(), "rows": len(released), "sha256": hashlib.sha256(target.read_bytes()).hexdigest()}
        },
    }


def fail_on_shard_one(records: pd.DataFrame, job: ShardJob, shard: int) -> dict:
    """Raises one of the project's errors (naming a column) on shard 1; else as :func:`write_toy_parts`."""
    if shard == 1:
        raise UnusableInputError("toy failure: a column cannot be used", column="disease")
    return write_toy_parts(records, job, shard)


def fail_with_a_value(records: pd.DataFrame, job: ShardJob, shard: int) -> dict:
    """Raises a foreign error whose message holds a record's value (which must not reach the driver's message)."""
    raise ValueError(f"bad value {records['disease'].iloc[0]!r}")


def toy_reduce(partials, model, parameters) -> dict:
    """A stand-in for ``pipeline.core.sharding.reduce_gates``: sums and maxima of the toy partials."""
    n_records = sum(p["toy_gate"]["n_records"] for p in partials)
    largest = max(p["toy_gate"]["max_per_disease"] for p in partials)
    return {
        "toy_gate": {
            "passed": largest <= n_records,
            "n_records": n_records,
            "max_per_disease": largest,
            "per_shard": {str(shard): p["toy_gate"]["n_records"] for shard, p in enumerate(partials)},
            "histogram": [p["toy_gate"]["max_per_disease"] for p in partials],
        },
        "toy_refused": {"passed": False, "n_shards": len(partials)},
    }


def report_task(records: pd.DataFrame, job: ShardJob, shard: int) -> dict:
    """The Spark partition (task) that released the shard, and its number of records."""
    from pyspark import TaskContext

    return {"shard": shard, "partition": TaskContext.get().partitionId(), "n_records": len(records)}
