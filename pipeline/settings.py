"""Typed choices of the release settings, without Dagster (issue 13: "typed parameters").

Each is a :class:`enum.StrEnum` whose member names equal their values, so that Dagster's config schema (which
names enum members) shows the same words as the CLI, the manifest and the docs, and the Dagster launchpad refuses
any other word before a run starts (``model: foo`` is a config error, not a failed run). Members compare equal to
their strings (``settings.model == "mixed"``) and serialize as them.

Choices spelled with a hyphen (``randomness``: ``home-secret``, ``spec-reference``; ``mining_backend``) stay plain
strings checked by the settings' validators: a Dagster enum cannot carry those names.
"""

from __future__ import annotations

import enum

__all__ = [
    "DEFAULT_MIN_CONFIDENCE",
    "DEFAULT_MIN_SHARD_ROWS",
    "DEFAULT_POSTERIOR_SLACK",
    "DEFAULT_SHARD_ROWS",
    "MAX_SEED",
    "SHARDING_SETTINGS",
    "Engine",
    "SparkLaunch",
    "Grouping",
    "KLMethod",
    "Model",
    "PosteriorGate",
    "ResidualPolicy",
    "default_min_support",
]

#: Defaults of the strong rules' confidence and of the learned-model gate's slack (P1 §6; issue 12): what a shared
#: release bounds unless a recorded override raises them (``ReleaseSettings``, the overrides, promotion, the audit).
DEFAULT_MIN_CONFIDENCE = 0.8
DEFAULT_POSTERIOR_SLACK = 0.05


def default_min_support(ell: int) -> int:
    """The support (records) of a strong rule when ``min_support`` is not set (0): max(ℓ, 5)."""
    return max(int(ell), 5)


#: Largest seed (and min_support) accepted: the manifest stores them as signed 64-bit integers (DuckDB BIGINT), so a
#: larger one is refused when the settings are read instead of failing at publish (issue 14).
MAX_SEED = 2**63 - 1

#: Sharded release (issue 17): records per shard; S = ceil(n / shard_rows), so a table up to 1M records is one shard
#: (today's release). Here, not in :mod:`pipeline.core.sharding`, so that reading the settings (the CLI, the Dagster
#: resources) does not import the release algorithms.
DEFAULT_SHARD_ROWS = 1_000_000
#: shards smaller than this are refused unless the floor is lowered (--min-shard-rows): below ~50,000 records a
#: random split costs more than 1 % extra suppressed cells and AIL (SCALE.md §2)
DEFAULT_MIN_SHARD_ROWS = 100_000


class Model(enum.StrEnum):
    """Publication model: P1's mixed model, the plain Rating baseline (SPEC §7), (k, ℓ)-anonymity (P2, SPEC §14)."""

    mixed = "mixed"
    rating = "rating"
    kl = "kl"


class Grouping(enum.StrEnum):
    """SAC~ grouping and Rating bucketization: quasi-identifier aware (default) or P1's exact algorithms."""

    qi_aware = "qi_aware"
    p1 = "p1"


class ResidualPolicy(enum.StrEnum):
    """What happens to Rating's residual values: whole records deleted (default) or SPEC §6.4's suppression."""

    delete = "delete"
    suppress = "suppress"


class PosteriorGate(enum.StrEnum):
    """What the learned-model gate (gate 9) does above its bound: refuse the release, or publish with a warning."""

    block = "block"
    warn = "warn"


class KLMethod(enum.StrEnum):
    """Algorithm of the (k, ℓ) model (SPEC §14.3-§14.4)."""

    blocked = "blocked"
    greedy = "greedy"
    exact = "exact"


class Engine(enum.StrEnum):
    """Where a release runs (issue 17): ``memory`` (today's ``release`` job, the whole table in pandas), or the sharded
    release job ``sharded_release`` on ``local`` (DuckDB staging and a process pool) or ``spark`` (pyspark)."""

    memory = "memory"
    local = "local"
    spark = "spark"


class SparkLaunch(enum.StrEnum):
    """How engine ``spark`` runs the shards (issue 17): ``client`` (the release step's own SparkSession, client mode or
    Spark Connect) or ``pipes`` (the release step launches the standalone job ``python -m pipeline.engines.spark_job``
    through the Dagster Pipes client of the resource ``pipes_subprocess_client``)."""

    client = "client"
    pipes = "pipes"


#: The settings of a sharded release (read by the ``sharded_release`` job only; ``engine`` picks the job).
SHARDING_SETTINGS = ("engine", "workers", "shard_rows", "min_shard_rows", "spark_master", "spark_remote", "spark_launch")
