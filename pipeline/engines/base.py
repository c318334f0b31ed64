"""The executor interface of sharded releases (issue 17; SCALE.md §4-§5).

An executor maps :func:`pipeline.engines.worker.release_and_write_shard` over the staged shards and returns one
JSON-able summary per shard; it never brings a record-level table back to the driver. Two implementations:
:mod:`pipeline.engines.local` (a process pool, the default) and :mod:`pipeline.engines.spark`
(``groupBy("shard").applyInPandas``).

Layout of a run's PRIVATE staging directory (under ``$MSA_RELEASE_HOME/private/shards/<run>/``):

- ``input/shard=<s>/*.parquet``: the shard's records (``row_id`` int64 + configured columns), written by
  :mod:`pipeline.engines.staging`;
- ``output/<table>/part-<s:05d>.parquet``: the shard's release tables with SHARD-LOCAL ids (``sac_released``,
  ``attribute_table``, ``id_table``) and its private ``row_map`` and ``deleted`` tables;
- ``output/fingerprints/part-<s:05d>.parquet`` (with ``ShardJob.registry_hash_key``): PRIVATE, the keyed fingerprint
  (uint64) and shard-local release row id (int64, 0: not published) of every record of the shard, for the release
  registry (:mod:`pipeline.release.registry`);
- the summaries (one per shard): ``shard``, ``counts``, ``partials`` and ``parts`` (table -> ``path`` relative to
  ``output/``, ``rows``, ``sha256``), and ``fingerprints`` (``path``, ``rows``, ``digest``) when written.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from pipeline.core.sharding import GlobalModel, ShardParameters

__all__ = ["ENGINES", "Executor", "ShardJob", "ShardSummary", "staged_shard_files"]

ENGINES = ("local", "spark")

#: one shard's summary: ``shard`` (int), ``counts`` and ``partials`` (:class:`pipeline.core.sharding.ShardRelease`),
#: ``parts`` ({table: {"path": str, "rows": int, "sha256": str}}); JSON-able
ShardSummary = dict[str, Any]


@dataclass(frozen=True)
class ShardJob:
    """Everything a worker needs to release one shard (picklable; broadcast to Spark executors).

    Attributes
    ----------
    staging_dir
        The run's PRIVATE staging directory (see the module docstring); on a cluster a path every executor reads.
    model
        The global rules, S_max and clusters.
    parameters
        The mixed model's parameters.
    secret
        The home secret (None with ``randomness: spec-reference``); never leaves the private side.
    n_shards
        S.
    registry_hash_key
        The key of the release registry's record fingerprints (``derive_hash_key(home secret, "release-registry")``,
        :data:`pipeline.core.series.REGISTRY_PURPOSE`), derived on the driver so that a worker never needs the home
        secret for it; with it, every shard also writes ``output/fingerprints/part-<s:05d>.parquet`` (None: it does
        not, e.g. in tests of the release alone).
    """

    staging_dir: Path
    model: GlobalModel
    parameters: ShardParameters
    secret: bytes | None
    n_shards: int
    registry_hash_key: str | None = None

    @property
    def input_dir(self) -> Path:
        return self.staging_dir / "input"

    @property
    def output_dir(self) -> Path:
        return self.staging_dir / "output"


class Executor(Protocol):
    """Releases every staged shard of ``job`` and returns the summaries in shard order."""

    name: str

    def release_shards(self, job: ShardJob) -> list[ShardSummary]: ...


def staged_shard_files(staging_dir: Path, shard: int) -> list[Path]:
    """The staged Parquet parts of one shard, in input-file order (``input/shard=<s>/part-*.parquet``).

    Here rather than in :mod:`pipeline.engines.staging` (which re-exports it), so that a worker process lists its
    shard's parts without importing DuckDB."""
    return sorted((staging_dir / "input" / f"shard={shard}").glob("part-*.parquet"))
