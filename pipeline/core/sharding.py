"""Sharded releases: split the records by a keyed hash of their private row id, compute the strong rules, S_max and the
attribute clusters once over all records, release every shard independently, and reduce the gates from per-shard
partials (issue 17; design note ``SCALE.md`` §1-§2, §5).

Why it keeps the guarantees: with GLOBAL rules, S_max and clusters, every SAC~ group and every SID is built inside
one shard (ℓ-diverse, gates 1-2), no attribute-table record holds a strong value off S_max (gates 3 and 6), supports
are sums over shards (gate 4, exact while nothing is deleted), and every gate figure is a sum or a max of per-shard
partials. Rules mined per shard, or S_max chosen per shard, BREAK them (tests/core/test_sharding.py keeps both
counterexamples).

Pure: no Dagster, no Great Expectations, no file IO (the executors in :mod:`pipeline.engines` read and write).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from pipeline.core.hierarchies import Hierarchy
from pipeline.core.sensitivity import EllRequirement

__all__ = [
    "DEFAULT_MIN_SHARD_ROWS",
    "DEFAULT_SHARD_ROWS",
    "GlobalModel",
    "ShardOffsets",
    "ShardParameters",
    "ShardPlan",
    "ShardRelease",
    "global_model_from_tuple_counts",
    "plan_shards",
    "reduce_gates",
    "release_shard",
    "shard_of",
    "shard_offsets",
    "shard_salt",
    "shard_secret",
    "shard_seed",
    "splitmix64",
    "union_releases",
]

#: records per shard; S = ceil(n / shard_rows), so a table up to 1M records is one shard (today's release)
DEFAULT_SHARD_ROWS = 1_000_000
#: shards smaller than this are refused unless the floor is lowered (--min-shard-rows): below ~50,000 records a
#: random split costs more than 1 % extra suppressed cells and AIL (SCALE.md §2)
DEFAULT_MIN_SHARD_ROWS = 100_000

_MASK64 = (1 << 64) - 1


def splitmix64(values: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser (Steele, Lea & Flood, OOPSLA 2014) on uint64 values, vectorised.

    ``z = x + 0x9E3779B97F4A7C15; z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9; z = (z ^ (z >> 27)) * 0x94D049BB133111EB;
    return z ^ (z >> 31)`` (all arithmetic mod 2**64). The SQL twin in :mod:`pipeline.engines.staging` must agree
    value for value (tested).
    """
    raise NotImplementedError


def shard_salt(secret: bytes) -> int:
    """The 64-bit salt of the shard key: the first 8 bytes (big-endian) of ``keyed_digest(secret, "shard-salt")``.

    Never published (the manifest records that a salt was used, not its value)."""
    raise NotImplementedError


def shard_of(row_ids: np.ndarray, *, salt: int, n_shards: int) -> np.ndarray:
    """Shard of each record: ``splitmix64((row_id + salt) mod 2**64) mod n_shards`` (int32; all 0 when
    ``n_shards == 1``).

    ``row_ids`` are the PRIVATE input row ids (int64, 1-based, sorted file names then row position), never a data
    column: a key on an unpublished column would reveal which records share it (SCALE.md §2).
    """
    raise NotImplementedError


@dataclass(frozen=True)
class ShardPlan:
    """``n_shards`` = ceil(n_records / shard_rows) (at least 1)."""

    n_records: int
    shard_rows: int
    n_shards: int
    min_shard_rows: int


def plan_shards(
    n_records: int, *, shard_rows: int = DEFAULT_SHARD_ROWS, min_shard_rows: int = DEFAULT_MIN_SHARD_ROWS
) -> ShardPlan:
    """The shard plan of a table.

    Raises
    ------
    ValueError
        ``shard_rows`` < 1, or more than one shard whose mean size (n_records / S) is below ``min_shard_rows``
        (message names ``shard_rows`` / ``--shard-rows`` and ``min_shard_rows`` / ``--min-shard-rows``).
    """
    raise NotImplementedError


@dataclass(frozen=True)
class GlobalModel:
    """What every shard shares, computed once over ALL records (SCALE.md §1 "global phase").

    Attributes
    ----------
    rules
        Strong rules (``pipeline.core.rules.RULE_COLUMNS``), identical to ``mine_strong_rules`` on the whole table.
    s_max
        The attribute with the most strong-value occurrences over all records (None without rules).
    strong_value_occurrences
        Attribute -> records holding a strong value on it (whole table).
    clusters
        Attribute clusters (Algorithm 10) of the global rules.
    n_records
        Records of the whole table (after the missing-value policy).
    """

    rules: pd.DataFrame
    s_max: str | None
    strong_value_occurrences: dict[str, int]
    clusters: list[list[str]]
    n_records: int


def global_model_from_tuple_counts(
    tuple_counts: pd.DataFrame,
    sensitive_attributes: Sequence[str],
    *,
    min_confidence: float,
    min_support: int = 1,
) -> GlobalModel:
    """The global model from the counts of distinct sensitive tuples (a ``GROUP BY`` over all records).

    Parameters
    ----------
    tuple_counts
        One row per distinct tuple of ``sensitive_attributes`` (text) and ``n_records`` (int64 > 0).
    """
    raise NotImplementedError


@dataclass(frozen=True)
class ShardParameters:
    """The mixed model's parameters as a shard needs them (pure; built from the run settings by the caller)."""

    quasi_identifiers: tuple[str, ...]
    sensitive_attributes: tuple[str, ...]
    ell: EllRequirement
    seed: int
    grouping: str = "qi_aware"
    residual_policy: str = "delete"
    stratum_deletion_budget: float = 0.02
    hierarchies: Mapping[str, Hierarchy] | None = None
    confidence_tolerance: float = 0.02


def shard_secret(secret: bytes | None, shard: int, n_shards: int) -> bytes | None:
    """The secret a shard's keyed orders use: ``secret`` itself when ``n_shards == 1`` (so S = 1 is today's release
    byte for byte), else ``keyed_digest(secret, "shard", str(shard), str(n_shards))``; None stays None."""
    raise NotImplementedError


def shard_seed(seed: int, shard: int, n_shards: int) -> int:
    """The permutation seed of a shard: ``seed`` when ``n_shards == 1``, else a 63-bit number derived from
    (seed, shard, n_shards) by SHA-256 (the seed is published; the keyed orders carry the protection)."""
    raise NotImplementedError


@dataclass(frozen=True)
class ShardRelease:
    """One shard released with SHARD-LOCAL ids (offset by :func:`shard_offsets` when the shards are united).

    Attributes
    ----------
    shard
        0-based shard number.
    sac_released, attribute_table, id_table
        The release-contract tables (:class:`pipeline.core.mixed_model.ReleaseTables`), ids local to the shard:
        SAC~ row ids 1..n_sac, attribute-table row ids n_sac+1..n_sac+n_attribute_table, group ids 1..n_groups,
        SIDs of attribute a 1..n_sids[a].
    row_map
        PRIVATE: ``source_row_id`` (input row id, int64) -> ``row_id`` (local release id, int64).
    deleted
        PRIVATE: ``row_id`` (input row id, int64) and ``reason`` (``no_partners`` / ``eligibility``).
    counts
        ``n_records``, ``n_sac_released``, ``n_attribute_table``, ``n_deleted``, ``n_groups``,
        ``n_sids`` ({attribute: int}), ``n_suppressed_cells`` ({attribute: int}).
    partials
        Gate name -> JSON-able figures of this shard that :func:`reduce_gates` sums or maxes.
    """

    shard: int
    sac_released: pd.DataFrame
    attribute_table: pd.DataFrame
    id_table: pd.DataFrame
    row_map: pd.DataFrame
    deleted: pd.DataFrame
    counts: dict[str, Any]
    partials: dict[str, dict[str, Any]] = field(default_factory=dict)


def release_shard(
    records: pd.DataFrame,
    model: GlobalModel,
    parameters: ShardParameters,
    *,
    secret: bytes | None,
    shard: int,
    n_shards: int,
) -> ShardRelease:
    """Release one shard with the global rules, S_max and clusters: SAC/IR split with the GLOBAL S_max,
    Algorithm 11 borrowing from the shard's own IR, the keyed permutation, improved Rating on the shard's IR_left,
    assembly (the same stages, in the same order, as the release job); then the shard's gate partials.

    Parameters
    ----------
    records
        The shard's records: ``row_id`` (int64, input row id) and every configured column (categorical or text),
        sorted by ``row_id``.
    """
    raise NotImplementedError


def reduce_gates(
    partials: Sequence[Mapping[str, Mapping[str, Any]]], model: GlobalModel, parameters: ShardParameters
) -> dict[str, dict[str, Any]]:
    """The whole release's gate figures from the shards' partials (sums and maxima), each with ``passed`` (bool).

    Equal, figure for figure, to evaluating the gates on the union of the shards."""
    raise NotImplementedError


@dataclass(frozen=True)
class ShardOffsets:
    """What to add to a shard's local ids in the united release."""

    shard: int
    sac_row_id: int
    attribute_table_row_id: int
    group_id: int
    sid: dict[str, int]


def shard_offsets(counts: Sequence[Mapping[str, Any]]) -> list[ShardOffsets]:
    """Offsets per shard (in shard order) from the shards' ``counts``: SAC~ rows of all shards first (1..total SAC~),
    then the attribute-table rows of all shards; group ids and each attribute's SIDs consecutive per shard."""
    raise NotImplementedError


def union_releases(releases: Sequence[ShardRelease], clusters: Sequence[Sequence[str]]) -> dict[str, pd.DataFrame]:
    """The united release (in memory; for tests and the pure loop): ``sac_released``, ``attribute_table``,
    ``id_table``, ``attribute_clusters``, ``row_map``, ``deleted`` with offsets applied, shards in order."""
    raise NotImplementedError
