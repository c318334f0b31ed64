"""Sharded releases: split the records by a keyed hash of their private row id, compute the strong rules, S_max and the
attribute clusters once over all records, release every shard independently, and reduce the gates from per-shard
partials (issue 17; design note ``SCALE.md`` §1-§2, §5).

Why it keeps the guarantees: with GLOBAL rules, S_max and clusters, every SAC~ group and every SID is built inside
one shard (ℓ-diverse, gates 1-2), no attribute-table record holds a strong value off S_max (gates 3 and 6), supports
are sums over shards (gate 4, exact while nothing is deleted), and every gate figure is a sum or a max of per-shard
partials. Rules mined per shard, or S_max chosen per shard, BREAK them (tests/core/test_sharding.py keeps both
counterexamples).

Gates reduced here (:data:`GATE_PARTIALS`): 1, 2, 3 (against the GLOBAL-rule adversary: the SAC~ holders' probabilities
are local to their group, the attribute-table holders' need the per-rule counts of every shard), 4, 5, 6, 8 and the
utility gate, each equal to the gate evaluated on the union. Gate 7 (no input order) is evaluated PER SHARD: Spearman ρ
of each shard's ids against its records' input positions (the maximum |ρ| and every shard's own limit), and the
order-replay adversary attacking each shard on its own (the part files show where a shard's SIDs start), judged twice:
its counts added up over the shards (chance + 4σ), and every shard's own counts (chance + z_S·σ, z_S from
:func:`shard_order_replay_sigmas`), since pooling dilutes one leaky shard (Adult, S = 16: a shard 11.6σ above chance
is 2.8σ in the pooled counts; tests/checks/test_sharded_order_leaks.py); for S = 1 that is the whole gate, for S > 1
it is not the union's statistic. Gate 9 (the learned-model adversary) is
also evaluated PER SHARD: the model is fitted by EM on each shard's release and population (an adversary who attacks
one shard, which the part files allow); counts and sums add up, maxima are maxima. For S = 1 it is the whole gate; for
S > 1 it is not the adversary fitted on the union. Measured on Adult at S = 4 against the ``release`` job's gate
functions on the united release (tests/checks/test_sharded_adversary.py): the same verdicts; the default release 0
records above the bound either way; P1's grouping (above the bound) 25,727 records above it per shard against 25,888
on the union (0.6 % fewer), the same maximum excess.

Pure: no Dagster, no Great Expectations, no file IO (the executors in :mod:`pipeline.engines` read and write).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist
from typing import Any

import numpy as np
import pandas as pd

from pipeline.core import verification
from pipeline.core.adversary import (
    attribute_table_disclosure,
    candidate_adversary,
    recover_rule_confidences,
    rule_holders,
    rule_release_counts,
    with_released_confidence,
)
from pipeline.core.columns import present_sorted_categories, values_mask
from pipeline.core.eligibility import suppressed_cell_certainty, values_in_every_sid
from pipeline.core.grouping import group_sac, permute_within_groups
from pipeline.core.hierarchies import Hierarchy
from pipeline.core.keyed import keyed_digest
from pipeline.core.mixed_model import assemble_release_tables, in_table_order, records_for_rating
from pipeline.core.order_attack import input_order_correlations, order_replay_attack
from pipeline.core.posterior import release_posteriors
from pipeline.core.rating import rating_tables
from pipeline.core.rules import strong_rules_from_tuple_counts, strong_values
from pipeline.core.sac_split import choose_s_max, cluster_sensitive_attributes, split_sac_ir
from pipeline.core.sensitivity import EllRequirement, ell_by_attribute, group_size
from pipeline.settings import DEFAULT_MIN_SHARD_ROWS, DEFAULT_SHARD_ROWS  # records per shard, the floor (re-exported)

__all__ = [
    "GATE_PARTIALS",
    "DEFAULT_MIN_SHARD_ROWS",
    "DEFAULT_SHARD_ROWS",
    "GlobalModel",
    "ShardOffsets",
    "ShardParameters",
    "ShardPlan",
    "ShardRelease",
    "attribute_clusters_frame",
    "global_model_from_tuple_counts",
    "plan_shards",
    "pooled_order_replay",
    "reduce_gates",
    "release_shard",
    "shard_partials",
    "shard_of",
    "shard_offsets",
    "shard_order_replay_sigmas",
    "shard_salt",
    "sid_gate_partial",
    "shard_secret",
    "shard_seed",
    "splitmix64",
    "union_releases",
]


_MASK64 = (1 << 64) - 1
_GOLDEN_GAMMA = np.uint64(0x9E3779B97F4A7C15)
_MIX_1 = np.uint64(0xBF58476D1CE4E5B9)
_MIX_2 = np.uint64(0x94D049BB133111EB)

#: The gates whose partials :func:`release_shard` returns and :func:`reduce_gates` reduces (names as in
#: ``pipeline.models.mixed.MIXED_GATES``). Gates 7 (``release_carries_no_input_order``, only with
#: ``ShardParameters.evaluate_order``) and 9 (``posterior_within_bound``, only with ``ShardParameters.evaluate_posterior``)
#: are evaluated per shard (see the module's notes).
GATE_PARTIALS = (
    "sac_released_is_l_diverse",
    "attribute_table_is_l_diverse",
    "disclosure_within_bound",
    "rule_confidence_preserved",
    "records_accounted_for",
    "no_probability_tilt",
    "no_certain_attribute_table_cell",
    "utility_within_thresholds",
    "release_carries_no_input_order",
    "posterior_within_bound",
)


def splitmix64(values: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser (Steele, Lea & Flood, OOPSLA 2014) on uint64 values, vectorised.

    ``z = x + 0x9E3779B97F4A7C15; z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9; z = (z ^ (z >> 27)) * 0x94D049BB133111EB;
    return z ^ (z >> 31)`` (all arithmetic mod 2**64). The SQL twin in :mod:`pipeline.engines.staging` must agree
    value for value (tested).

    Parameters
    ----------
    values
        Any integer array (converted to uint64; negative int64 values wrap mod 2**64).

    Returns
    -------
    numpy.ndarray
        uint64, same shape.
    """
    z = np.asarray(values).astype(np.uint64, copy=True)
    with np.errstate(over="ignore"):
        z += _GOLDEN_GAMMA
        z = (z ^ (z >> np.uint64(30))) * _MIX_1
        z = (z ^ (z >> np.uint64(27))) * _MIX_2
        result: np.ndarray = z ^ (z >> np.uint64(31))
    return result


def shard_salt(secret: bytes | None) -> int:
    """The 64-bit salt of the shard key: the first 8 bytes (big-endian) of ``keyed_digest(secret, "shard-salt")``.

    Never published (the manifest records that a salt was used, not its value). ``None`` (``randomness:
    spec-reference``, no secret) gives 0.

    Raises
    ------
    ValueError
        A secret shorter than 16 bytes (:func:`pipeline.core.keyed.keyed_digest`).
    """
    if secret is None:
        return 0
    return int.from_bytes(keyed_digest(secret, "shard-salt")[:8], "big")


def shard_of(row_ids: np.ndarray, *, salt: int, n_shards: int) -> np.ndarray:
    """Shard of each record: ``splitmix64((row_id + salt) mod 2**64) mod n_shards`` (int32; all 0 when
    ``n_shards == 1``).

    ``row_ids`` are the PRIVATE input row ids (int64, 1-based, sorted file names then row position), never a data
    column: a key on an unpublished column would reveal which records share it (SCALE.md §2).

    Raises
    ------
    ValueError
        ``n_shards`` < 1, or ``salt`` outside [0, 2**64).
    """
    if n_shards < 1:
        raise ValueError(f"the number of shards must be at least 1, got {n_shards}")
    if not 0 <= salt <= _MASK64:
        raise ValueError("the shard salt must be an unsigned 64-bit integer")
    ids = np.asarray(row_ids)
    if n_shards == 1:
        return np.zeros(ids.shape, dtype=np.int32)
    with np.errstate(over="ignore"):
        keyed = ids.astype(np.uint64) + np.uint64(salt)
    return (splitmix64(keyed) % np.uint64(n_shards)).astype(np.int32)


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

    Parameters
    ----------
    n_records
        Records of the whole table (after the missing-value policy), >= 0.
    shard_rows
        Records per shard (>= 1): S = ceil(n_records / shard_rows), at least 1.
    min_shard_rows
        Smallest accepted mean shard size when S > 1 (>= 1).

    Raises
    ------
    ValueError
        ``shard_rows`` < 1, or more than one shard whose mean size (n_records / S) is below ``min_shard_rows``
        (message names ``shard_rows`` / ``--shard-rows`` and ``min_shard_rows`` / ``--min-shard-rows``).

    References
    ----------
    SCALE.md §2 (below ~50,000 records a random split costs more than 1 % utility).
    """
    if n_records < 0:
        raise ValueError(f"the number of records must be >= 0, got {n_records}")
    if shard_rows < 1:
        raise ValueError(f"shard_rows (--shard-rows) must be at least 1 record per shard, got {shard_rows}")
    if min_shard_rows < 1:
        raise ValueError(f"min_shard_rows (--min-shard-rows) must be at least 1, got {min_shard_rows}")
    n_shards = max(1, math.ceil(n_records / shard_rows))
    if n_shards > 1 and n_records / n_shards < min_shard_rows:
        raise ValueError(
            f"{n_records} records in {n_shards} shards of about {n_records // n_shards} records each: below the "
            f"floor min_shard_rows = {min_shard_rows} (--min-shard-rows), where a random split starts to cost "
            f"suppressed cells and information loss; raise shard_rows (--shard-rows, now {shard_rows}) or, for "
            "tests, lower min_shard_rows (--min-shard-rows)"
        )
    return ShardPlan(n_records=n_records, shard_rows=shard_rows, n_shards=n_shards, min_shard_rows=min_shard_rows)


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

    Rules as :func:`pipeline.core.rules.mine_strong_rules` on the whole table
    (:func:`pipeline.core.rules.strong_rules_from_tuple_counts`), S_max and the strong-value occurrences as
    :func:`pipeline.core.sac_split.split_sac_ir` computes them on the whole table, clusters by
    :func:`pipeline.core.sac_split.cluster_sensitive_attributes`.

    Parameters
    ----------
    tuple_counts
        One row per distinct tuple of ``sensitive_attributes`` (text) and ``n_records`` (int64 > 0).
    sensitive_attributes
        Schema order (at least 2).
    min_confidence, min_support
        As ``mine_strong_rules`` (the release job passes ``min_support`` resolved: 0 -> max(ℓ, 5)).

    Raises
    ------
    ValueError
        As :func:`pipeline.core.rules.strong_rules_from_tuple_counts`.

    References
    ----------
    P1 Algorithms 7 and 10; SCALE.md §1.
    """
    attributes = list(sensitive_attributes)
    rules = strong_rules_from_tuple_counts(tuple_counts, attributes, min_confidence=min_confidence, min_support=min_support)
    weights = tuple_counts["n_records"].to_numpy(np.int64)
    values = strong_values(rules, attributes)
    occurrences = {a: int(weights[values_mask(tuple_counts[a], values[a])].sum()) for a in attributes}
    s_max = choose_s_max(occurrences, attributes) if len(rules) else None
    return GlobalModel(
        rules=rules,
        s_max=s_max,
        strong_value_occurrences=occurrences,
        clusters=cluster_sensitive_attributes(attributes, rules),
        n_records=int(weights.sum()),
    )


@dataclass(frozen=True)
class ShardParameters:
    """The mixed model's parameters as a shard needs them (pure; built from the run settings by the caller).

    Defaults are the release job's (``pipeline.resources.ReleaseSettings``): qi_aware grouping, residual_policy
    delete, stratum_deletion_budget 0.02, confidence_tolerance 0.05, max_deleted_share and max_suppressed_share 0.10,
    posterior_slack 0.05. ``evaluate_posterior`` False leaves gate 9's partial out (its EM is the costliest partial);
    ``evaluate_order`` False leaves gate 7's partial out (then the gate cannot be evaluated and fails,
    ``checks/sharded_gates.py``). The ``sharded_release`` job sets both True (``assets.sharded.shard_parameters``);
    the Spark job launched through Pipes keeps what its job file says.
    ``ell`` is ℓ (int) or ℓ_i per sensitive attribute (a mapping: SAC~ groups of L = max ℓ_i, SPEC §6.7).
    ``hierarchies``: the quasi-identifier hierarchies the qi_aware grouping generalizes along (None: none, every
    differing quasi-identifier becomes ``*``).
    ``posterior_threads``: threads gate 9's fit may use (:func:`pipeline.core.posterior.fit_naive_bayes_on_release`
    ``threads``; the partial is the same, bit for bit, whatever the number): 1 by default; the local engine gives 2
    to a shard released alone in its process (one shard, ``workers`` >= 2: the core of the idle worker).
    """

    quasi_identifiers: tuple[str, ...]
    sensitive_attributes: tuple[str, ...]
    ell: EllRequirement
    seed: int
    grouping: str = "qi_aware"
    residual_policy: str = "delete"
    stratum_deletion_budget: float = 0.02
    hierarchies: Mapping[str, Hierarchy] | None = None
    confidence_tolerance: float = 0.05
    max_deleted_share: float = 0.10
    max_suppressed_share: float = 0.10
    posterior_slack: float = 0.05
    evaluate_posterior: bool = True
    evaluate_order: bool = True
    posterior_threads: int = 1


def shard_secret(secret: bytes | None, shard: int, n_shards: int) -> bytes | None:
    """The secret a shard's keyed orders use: ``secret`` itself when ``n_shards == 1`` (so S = 1 is today's release
    byte for byte), else ``keyed_digest(secret, "shard", str(shard), str(n_shards))``; None stays None."""
    if secret is None or n_shards == 1:
        return secret
    return keyed_digest(secret, "shard", str(shard), str(n_shards))


def shard_seed(seed: int, shard: int, n_shards: int) -> int:
    """The permutation seed of a shard: ``seed`` when ``n_shards == 1``, else a 63-bit number derived from
    (seed, shard, n_shards) by SHA-256 (the seed is published; the keyed orders carry the protection)."""
    if n_shards == 1:
        return seed
    digest = hashlib.sha256(f"shard-seed\0{seed}\0{shard}\0{n_shards}".encode()).digest()
    return int.from_bytes(digest[:8], "big") >> 1


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
        ``n_sids`` ({attribute: int}), ``n_suppressed_cells`` ({attribute: int}); also ``n_borrowed``,
        ``n_deleted_no_partners``, ``n_deleted_for_eligibility`` and the generalization counts
        (``n_generalized_groups``, ``n_generalized_cells``, and with strata ``n_strata``,
        ``n_generalized_attribute_table_cells``), all sums over shards.
    partials
        Gate name (:data:`GATE_PARTIALS`) -> JSON-able figures of this shard that :func:`reduce_gates` sums or maxes.
    """

    shard: int
    sac_released: pd.DataFrame
    attribute_table: pd.DataFrame
    id_table: pd.DataFrame
    row_map: pd.DataFrame
    deleted: pd.DataFrame
    counts: dict[str, Any]
    partials: dict[str, dict[str, Any]] = field(default_factory=dict)


def attribute_clusters_frame(clusters: Sequence[Sequence[str]]) -> pd.DataFrame:
    """``cluster_id`` (int32, 1-based), ``attribute``: as :func:`pipeline.core.mixed_model.assemble_release_tables`."""
    return pd.DataFrame(
        [(k + 1, attribute) for k, cluster in enumerate(clusters) for attribute in cluster],
        columns=["cluster_id", "attribute"],
    ).astype({"cluster_id": "int32", "attribute": object})


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

    The stages are those of ``assets/mixed_model.py`` (``sac_ir_split``, ``sac_groups``, ``sac_permuted``,
    ``ir_rating``) and ``pipeline.models.mixed.MixedModel.release_tables``, with :func:`shard_secret` and
    :func:`shard_seed` (the run's own secret and seed when ``n_shards == 1``: today's release byte for byte).

    Parameters
    ----------
    records
        The shard's records: ``row_id`` (int64, input row id) and every configured column (categorical or text),
        sorted by ``row_id`` (re-sorted here if not).
    model
        The global model (:func:`global_model_from_tuple_counts`).
    parameters
        The run's parameters.
    secret
        The run's home secret (None with ``randomness: spec-reference``).
    shard, n_shards
        0-based shard number and S.

    Returns
    -------
    ShardRelease
        Its ``partials`` (:data:`GATE_PARTIALS`): see :func:`shard_partials`.

    Raises
    ------
    ValueError
        A missing column, ``shard`` outside [0, n_shards), or an error of a stage (invalid parameters).

    References
    ----------
    P1 Algorithms 7, 10, 11, 13, 19; SPEC §2-§8; SCALE.md §1.
    """
    if not 0 <= shard < n_shards:
        raise ValueError(f"shard {shard} is outside 0..{n_shards - 1}")
    quasi_identifiers = list(parameters.quasi_identifiers)
    sensitive = list(parameters.sensitive_attributes)
    content = [*quasi_identifiers, *sensitive]
    missing = [c for c in ["row_id", *content] if c not in records.columns]
    if missing:
        raise ValueError(f"the shard's records have no column(s) {missing}")
    if parameters.grouping not in ("p1", "qi_aware"):
        raise ValueError(f"unknown grouping {parameters.grouping!r}; use 'p1' or 'qi_aware'")
    row_ids = records["row_id"].to_numpy(np.int64)
    if len(row_ids) > 1 and (np.diff(row_ids) < 0).any():
        records = records.sort_values("row_id", kind="stable")
    records = records.reset_index(drop=True)
    # a shard's categorical columns carry exactly the values present in the shard, sorted (what load_records gives a
    # whole table): the stages' codes and ranks must not depend on values the shard does not hold (a frame cut from
    # the whole table keeps the whole table's categories)
    tidy = {
        column: present_sorted_categories(records[column].array)
        for column in content
        if isinstance(records[column].dtype, pd.CategoricalDtype)
    }
    changed = {column: values for column, values in tidy.items() if values is not records[column].array}
    if changed:
        records = records.assign(**changed)
    local_secret = shard_secret(secret, shard, n_shards)
    seed = shard_seed(parameters.seed, shard, n_shards)
    qi_aware = parameters.grouping == "qi_aware"
    stratified = qi_aware and parameters.residual_policy == "delete"
    hierarchies = dict(parameters.hierarchies or {})
    ell_size = group_size(parameters.ell)

    # sac_ir_split: Algorithm 7 with the GLOBAL rules and S_max
    split = split_sac_ir(records, sensitive, model.rules, s_max=model.s_max)
    # sac_groups: Algorithm 11 in the keyed table order, then the records left for Rating
    sac_ids, ir_ids = in_table_order(records, [split.sac_row_ids, split.ir_row_ids], content, local_secret)
    grouping = group_sac(
        records, sensitive, sac_ids, ir_ids, ell=ell_size, quasi_identifiers=quasi_identifiers if qi_aware else None
    )
    del split, sac_ids, ir_ids
    rating_records, eligibility, _ = records_for_rating(
        records,
        np.asarray(grouping.ir_left, dtype=np.int64),
        quasi_identifiers,
        sensitive,
        ell=parameters.ell,
        residual_policy=parameters.residual_policy,
        grouping=parameters.grouping,
        hierarchies=hierarchies if stratified else None,
        secret=local_secret,
        stratum_deletion_budget=parameters.stratum_deletion_budget,
    )
    # sac_permuted: per group and cluster a keyed permutation of the cluster tuples
    members = np.asarray(grouping.members, dtype=np.int64).reshape(-1, ell_size)
    sac_permuted = permute_within_groups(records[["row_id", *content]], members, model.clusters, seed=seed, secret=local_secret)
    # ir_rating: improved Rating on IR_left (in its strata); rows found by position (no indexed copy of the records)
    rating_positions = pd.Index(records["row_id"].to_numpy(np.int64)).get_indexer(rating_records["row_id"].to_numpy(np.int64))
    if (rating_positions < 0).any():
        raise ValueError("a record chosen for Rating is not in the shard's records")
    rating_input = records.iloc[rating_positions].reset_index(drop=True)
    del rating_positions
    id_table, attribute_sids = rating_tables(
        rating_input,
        sensitive,
        ell=parameters.ell,
        secret=local_secret,
        content_columns=content,
        strata=rating_records["stratum"].to_numpy(np.int64) if "stratum" in rating_records.columns else None,
    )
    del rating_input
    # the candidate: pipeline.models.mixed.MixedModel.release_tables
    tables = assemble_release_tables(
        records,
        quasi_identifiers,
        sensitive,
        sac_permuted=sac_permuted,
        attribute_sids=attribute_sids.astype({a: "Int32" for a in sensitive}),
        id_table=id_table,
        clusters=model.clusters,
        secret=local_secret,
        generalize=qi_aware,
        hierarchies=hierarchies if qi_aware else None,
        attribute_table_labels=rating_records if "stratum" in rating_records.columns else None,
    )
    # the stages' intermediates are not needed any more: free them before the partials (a 1M-record shard's peak)
    del sac_permuted, id_table, attribute_sids, rating_records
    no_partners = np.asarray(grouping.deleted, dtype=np.int64)
    n_borrowed = len(grouping.borrowed)
    del grouping
    deleted = pd.DataFrame(
        {
            "row_id": np.concatenate([no_partners, np.asarray(eligibility, dtype=np.int64)]),
            "reason": pd.Categorical(
                ["no_partners"] * len(no_partners) + ["eligibility"] * len(eligibility),
                categories=["no_partners", "eligibility"],
            ),
        }
    )
    attribute_table = tables.attribute_table
    n_sids = {
        a: int(tables.id_table.loc[values_mask(tables.id_table["attribute"], [a]), "sid"].max())
        if values_mask(tables.id_table["attribute"], [a]).any()
        else 0
        for a in sensitive
    }
    counts: dict[str, Any] = {
        "n_records": len(records),
        "n_sac_released": len(tables.sac_released),
        "n_attribute_table": len(attribute_table),
        "n_deleted": len(deleted),
        "n_deleted_no_partners": len(no_partners),
        "n_deleted_for_eligibility": len(eligibility),
        "n_borrowed": n_borrowed,
        "n_groups": int(members.shape[0]),
        "n_sids": n_sids,
        "n_suppressed_cells": {a: int(attribute_table[a].isna().sum()) for a in sensitive},
        **{k: int(v) for k, v in tables.generalization.items()},
    }
    partials = shard_partials(
        records,
        model,
        parameters,
        sac_released=tables.sac_released,
        attribute_table=attribute_table,
        id_table=tables.id_table,
        attribute_clusters=tables.attribute_clusters,
        row_map=tables.row_map,
        deleted=deleted,
        n_shards=n_shards,
    )
    return ShardRelease(
        shard=shard,
        sac_released=tables.sac_released,
        attribute_table=attribute_table,
        id_table=tables.id_table,
        row_map=tables.row_map,
        deleted=deleted,
        counts=counts,
        partials=partials,
    )


def _value_digest(value: str) -> str:
    """A short SHA-256 of a published ID-table value, so that partials carry no value text."""
    return hashlib.sha256(value.encode()).hexdigest()[:16]


def _ell_per_attribute(parameters: ShardParameters) -> dict[str, int] | None:
    """ℓ_i per sensitive attribute when the run sets them (the gates' per-attribute path), else None."""
    if isinstance(parameters.ell, Mapping):
        return ell_by_attribute(parameters.ell, list(parameters.sensitive_attributes))
    return None


def sid_gate_partial(
    attribute_table: pd.DataFrame,
    id_table: pd.DataFrame,
    sensitive_attributes: Sequence[str],
    *,
    ell: EllRequirement,
    per_attribute_ell: Mapping[str, int] | None,
) -> dict[str, Any]:
    """Gate 2's partial of one shard: its SIDs checked against ℓ (or ℓ_i of their attribute).

    Parameters
    ----------
    attribute_table
        The shard's attribute table: ``row_id`` and one SID column (Int32, <NA> for a suppressed cell) per sensitive
        attribute.
    id_table
        The shard's ID table: ``attribute``, ``sid``, ``value``, ``count``.
    sensitive_attributes
        In schema order.
    ell
        ℓ, or attribute -> ℓ_i.
    per_attribute_ell
        ℓ_i per attribute when the run sets them (the per-attribute path), else None.

    Returns
    -------
    dict
        ``n_sids``, ``min_distinct_values_observed`` (None without SIDs), ``n_suppressed_cells``,
        ``n_attribute_table_rows``, ``n_sids_failing`` (fewer than ℓ / ℓ_i distinct values, a value's share above
        1/ℓ / 1/ℓ_i, or records not matching occurrences) and ``per_attribute`` (:func:`shard_partials`).

    References
    ----------
    P1 Definition 2; SPEC §6.6, §6.7, §9.3.
    """
    sensitive = list(sensitive_attributes)
    ell_size = group_size(ell)
    ells = ell_by_attribute(ell, sensitive)
    sids = verification.sid_diversity_per_attribute(
        verification.sid_diversity_summary(attribute_table, id_table, sensitive), ells
    )
    if per_attribute_ell is None:
        failing = (
            (sids["n_distinct_values"] < ell_size)
            | (sids["max_value_share"] > 1.0 / ell_size + 1e-12)
            | ~sids["records_match_occurrences"]
        )
    else:
        failing = (
            (sids["n_distinct_values"] < min(ells.values())) | ~sids["meets_ell_required"] | ~sids["records_match_occurrences"]
        )
    by_attribute = verification.sid_diversity_by_attribute(sids, attribute_table, ells)
    for figures in by_attribute.values():
        del figures["ell_required"]
        if figures["n_sids"] == 0:
            figures["min_distinct_values_observed"] = None
    n_suppressed_cells = int(attribute_table[sensitive].isna().sum().sum()) if len(attribute_table) else 0
    return {
        "n_sids": len(sids),
        "min_distinct_values_observed": int(sids["n_distinct_values"].min()) if len(sids) else None,
        "n_suppressed_cells": n_suppressed_cells,
        "n_attribute_table_rows": len(attribute_table),
        "n_sids_failing": int(failing.sum()),
        "per_attribute": by_attribute,
    }


def _optional_min(values: Sequence[Any]) -> Any:
    present = [v for v in values if v is not None]
    return min(present) if present else None


def _optional_max(values: Sequence[Any]) -> Any:
    present = [v for v in values if v is not None]
    return max(present) if present else None


def _posterior_partial(
    records: pd.DataFrame,
    row_map: pd.DataFrame,
    parameters: ShardParameters,
    sac_released: pd.DataFrame,
    attribute_table: pd.DataFrame,
    id_table: pd.DataFrame,
    attribute_clusters: pd.DataFrame,
) -> dict[str, Any]:
    """Gate 9's partial: :func:`pipeline.core.posterior.release_posteriors` on one shard, as counts, sums and maxima."""
    sensitive = list(parameters.sensitive_attributes)
    result = release_posteriors(
        records,
        row_map,
        list(parameters.quasi_identifiers),
        sensitive,
        ell=group_size(parameters.ell),
        sac_released=sac_released,
        attribute_table=attribute_table,
        id_table=id_table,
        attribute_clusters=attribute_clusters,
        slack=parameters.posterior_slack,
        ell_per_attribute=_ell_per_attribute(parameters),
        threads=parameters.posterior_threads,
    )
    summary = result.summary
    sums = {"posterior": 0.0, "population": 0.0, "self_expected": 0.0}
    for attribute in sensitive:  # in the order release_posteriors adds them up
        sums["posterior"] += float(result.posterior[attribute].sum())
        sums["population"] += float(result.population_posterior[attribute].sum())
        sums["self_expected"] += float(result.self_expected_posterior[attribute].sum())
    has_cells = int(summary["n_cells"]) > 0
    return {
        **{
            key: int(summary[key])
            for key in (
                "n_records",
                "n_cells",
                "n_cells_above_bound",
                "n_records_above_bound",
                "n_sac_cells_above_bound",
                "n_attribute_table_cells_above_bound",
                "em_iterations_max",
                "em_iterations_selected",
            )
        },
        "max_excess": float(summary["max_excess"]) if has_cells else None,
        "max_posterior": float(summary["max_posterior"]) if has_cells else None,
        "sum_posterior": sums["posterior"],
        "sum_population_posterior": sums["population"],
        "sum_self_expected_posterior": sums["self_expected"],
        "n_sac_rows": int(result.n_sac),
        "n_sac_rows_tuple_above_half": int((result.tuple_posterior["posterior"].to_numpy() > 0.5).sum()),
        "histogram": [int(x) for x in result.histogram],
    }


def _order_partial(
    sac_released: pd.DataFrame,
    attribute_table: pd.DataFrame,
    id_table: pd.DataFrame,
    row_map: pd.DataFrame,
    original: pd.DataFrame,
    sensitive: list[str],
    n_shards: int,
) -> dict[str, Any]:
    """Gate 7's partial: Spearman ρ of the shard's published ids against its records' input positions
    (:func:`pipeline.core.order_attack.input_order_correlations`, each column's limit at
    :func:`shard_order_replay_sigmas` (``n_shards``) standard errors: Bonferroni over the shards, as the per-shard
    order replay, so that clean shards raise no more false alarms at S shards than one release does at 4) and the
    order-replay adversary on the shard (:func:`pipeline.core.order_attack.order_replay_attack`), as counts and
    sums."""
    order_map = row_map.assign(input_row_number=row_map["source_row_id"])
    correlations = input_order_correlations(
        {"sac_released": sac_released, "attribute_table": attribute_table},
        order_map,
        {"sac_released": ["row_id", "group_id"], "attribute_table": ["row_id", *sensitive]},
        sigmas=shard_order_replay_sigmas(n_shards),
    )
    replay = order_replay_attack(attribute_table, id_table, sensitive, original).per_attribute
    return {
        "spearman": [
            {
                "column": f"{row.table}.{row.column}",
                "rows": int(row.rows),
                "abs_spearman": abs(float(row.spearman)),
                "limit": float(row.limit),
                "passed": bool(row.passed),
            }
            for row in correlations.itertuples(index=False)
        ],
        "order_replay": {
            str(row.attribute): {
                "cells": int(row.cells),
                "correct": int(row.correct),
                "expected_correct": float(row.expected_correct),
                "variance_correct": float(row.variance_correct),
            }
            for row in replay.itertuples(index=False)
        },
    }


def shard_partials(
    records: pd.DataFrame,
    model: GlobalModel,
    parameters: ShardParameters,
    *,
    sac_released: pd.DataFrame,
    attribute_table: pd.DataFrame,
    id_table: pd.DataFrame,
    attribute_clusters: pd.DataFrame,
    row_map: pd.DataFrame,
    deleted: pd.DataFrame,
    n_shards: int = 1,
) -> dict[str, dict[str, Any]]:
    """The gate partials of one shard (or of any release: the union as one "shard" reduces to the whole release's
    figures), from the pure gate functions of :mod:`pipeline.core.verification`, :mod:`pipeline.core.adversary` and
    :mod:`pipeline.core.eligibility` run on the shard's tables.

    Parameters
    ----------
    records
        PRIVATE: the shard's input records (``row_id`` and the sensitive attributes).
    model, parameters
        The global model and the run's parameters (rules, S_max, clusters; ℓ, thresholds).
    sac_released, attribute_table, id_table, attribute_clusters, row_map, deleted
        The shard's release (local ids) and its private row map and deleted records.
    n_shards
        S, the number of shards of the release (1: the whole release): gate 7's ρ limits are Bonferroni-corrected
        over the S shards (:func:`shard_order_replay_sigmas`).

    Returns
    -------
    dict
        Gate name -> JSON-able figures (ints, floats, lists, dicts keyed by attribute names; never a value of a
        table: ID-table values only as short SHA-256 digests):

        - ``sac_released_is_l_diverse``: ``n_groups``, ``min_group_size``, ``max_group_size``,
          ``min_distinct_values_observed`` (None without groups), ``n_groups_tuples_not_preserved``,
          ``n_groups_failing`` (size ≠ L, fewer or more than L distinct values, or tuples not preserved).
        - ``attribute_table_is_l_diverse``: ``n_sids``, ``min_distinct_values_observed`` (None without SIDs),
          ``n_suppressed_cells``, ``n_attribute_table_rows``, ``n_sids_failing`` (below ℓ / ℓ_i, a value above its
          bound, or records not matching occurrences), ``per_attribute`` ({attribute: ``n_sids``,
          ``min_distinct_values_observed`` (None without SIDs), ``max_value_share``, ``n_sids_below_ell``,
          ``n_suppressed_cells``}).
        - ``disclosure_within_bound``: per rule (index order of ``model.rules``) ``rules_n_antecedent``,
          ``rules_n_visible``, ``rules_n_candidates`` (the additive parts of
          :func:`pipeline.core.adversary.attribute_table_disclosure`); ``sac_holders``: ``[rule, numerator,
          denominator, n_records]`` for the SAC~ records holding a rule (their probability is local to their group);
          ``attribute_table_holders``: ``[held rules, rules whose M_r holds the record, n_records]`` for the
          attribute-table records holding a rule (their probability needs the global counts).
        - ``rule_confidence_preserved``: ``released_support_antecedent``, ``released_support_both`` (float per rule,
          Lemma 22's sums), ``n_deleted``, ``n_suppressed_cells``.
        - ``records_accounted_for``: ``n_records``, ``n_sac_released``, ``n_attribute_table``, ``n_deleted``,
          ``n_records_not_exactly_once``.
        - ``no_probability_tilt``: ``n_sids_checked``, ``n_sids_with_strong_values`` (global S_max and rules).
        - ``no_certain_attribute_table_cell``: ``n_attribute_table_rows_with_a_suppressed_cell`` and
          ``per_attribute`` ({attribute: ``n_suppressed_cells``, ``n_sids``, ``candidate_digests`` (digests of the
          values every SID of the shard holds)}).
        - ``utility_within_thresholds``: ``n_deleted``, ``n_sac_released``, ``n_attribute_table``,
          ``suppressed_cells`` ({attribute: int}).
        - ``release_carries_no_input_order`` (with ``parameters.evaluate_order``): ``spearman`` (a list of {``column`` ("table.column"),
          ``rows``, ``abs_spearman``, ``limit`` (max(0.05, z_S/√(rows−1)), z_S = :func:`shard_order_replay_sigmas`),
          ``passed``}) and ``order_replay`` ({attribute: ``cells``, ``correct``,
          ``expected_correct``, ``variance_correct``}).
        - ``posterior_within_bound`` (with ``parameters.evaluate_posterior``): ``n_records``, ``n_cells``,
          ``n_cells_above_bound``, ``n_records_above_bound``, ``n_sac_cells_above_bound``,
          ``n_attribute_table_cells_above_bound``, ``em_iterations_max``, ``em_iterations_selected``, ``max_excess``,
          ``max_posterior`` (None without cells), ``sum_posterior``, ``sum_population_posterior``,
          ``sum_self_expected_posterior``, ``n_sac_rows``, ``n_sac_rows_tuple_above_half``, ``histogram`` (10 bins).

    References
    ----------
    SPEC §9-§10; P1 Lemmas 12 and 22; SCALE.md §1 ("every gate is a sum or max of per-shard partials").
    """
    sensitive = list(parameters.sensitive_attributes)
    ell_size = group_size(parameters.ell)
    per_attribute_ell = _ell_per_attribute(parameters)
    rules = model.rules
    attribute_table = attribute_table.astype({a: "Int32" for a in sensitive})
    original = row_map.merge(records[["row_id", *sensitive]], left_on="source_row_id", right_on="row_id", suffixes=("", "_raw"))[
        ["row_id", *sensitive]
    ]
    partials: dict[str, dict[str, Any]] = {}

    # gate 1: SAC~ groups of L records, L distinct values on every attribute, cluster tuples preserved
    groups = verification.group_diversity_summary(sac_released, original, sensitive, model.clusters)
    has_groups = len(groups) > 0
    partials["sac_released_is_l_diverse"] = {
        "n_groups": len(groups),
        "min_group_size": int(groups["n_rows"].min()) if has_groups else None,
        "max_group_size": int(groups["n_rows"].max()) if has_groups else None,
        "min_distinct_values_observed": int(groups["min_distinct_values"].min()) if has_groups else None,
        "n_groups_tuples_not_preserved": int((~groups["cluster_tuples_preserved"]).sum()),
        "n_groups_failing": int(
            (
                (groups["n_rows"] != ell_size) | (groups["min_distinct_values"] != ell_size) | ~groups["cluster_tuples_preserved"]
            ).sum()
        ),
    }

    # gate 2: SIDs ℓ-diverse (ℓ_i per attribute)
    partials["attribute_table_is_l_diverse"] = sid_gate_partial(
        attribute_table, id_table, sensitive, ell=parameters.ell, per_attribute_ell=per_attribute_ell
    )
    n_suppressed_cells = partials["attribute_table_is_l_diverse"]["n_suppressed_cells"]
    del groups  # each gate's frames are freed once its partial is taken (a 1M-record shard's peak)

    # gate 3: the GLOBAL-rule adversary; SAC~ holders are final here, attribute-table holders need global counts
    holders = rule_holders(records[["row_id", *sensitive]], rules, row_map=row_map)
    in_sac = np.isin(holders["row_id"].to_numpy(np.int64), sac_released["row_id"].to_numpy(np.int64))
    adversary = candidate_adversary(
        rules,
        holders[in_sac],
        sac_released=sac_released,
        attribute_table=attribute_table.iloc[0:0],
        id_table=id_table,
        attribute_clusters=attribute_clusters,
        ell_per_attribute=per_attribute_ell,
    )
    held = adversary[adversary["holds_rule"].astype(bool)]
    sac_holders = held.groupby(["held_rule", "held_numerator", "held_denominator"], sort=True).size().reset_index(name="n")
    rule_counts, members = rule_release_counts(
        rules,
        sac_released=sac_released,
        attribute_table=attribute_table,
        id_table=id_table,
        attribute_clusters=attribute_clusters,
    )
    at_holders = holders[~in_sac]
    signatures: list[list[Any]] = []
    if len(at_holders):
        position = pd.Index(attribute_table["row_id"].to_numpy(np.int64)).get_indexer(at_holders["row_id"].to_numpy(np.int64))
        holder_rules = at_holders["rule"].to_numpy(np.int64)
        member = np.zeros(len(at_holders), dtype=bool)
        for rule_index in np.unique(holder_rules):
            select = holder_rules == rule_index
            member[select] = members[int(rule_index)][position[select]]
        key = pd.Series(holder_rules.astype(str)) + np.where(member, "m", "")
        per_record = key.groupby(at_holders["row_id"].to_numpy(np.int64), sort=True).agg(",".join)
        for signature, n in per_record.value_counts().sort_index().items():
            parts = str(signature).split(",")
            signatures.append([[int(p.rstrip("m")) for p in parts], [int(p[:-1]) for p in parts if p.endswith("m")], int(n)])
    partials["disclosure_within_bound"] = {
        "rules_n_antecedent": [int(v) for v in rule_counts["n_antecedent"]],
        "rules_n_visible": [int(v) for v in rule_counts["n_visible"]],
        "rules_n_candidates": [int(v) for v in rule_counts["n_candidates"]],
        "sac_holders": [[int(r), int(a), int(b), int(n)] for r, a, b, n in sac_holders.itertuples(index=False)],
        "attribute_table_holders": signatures,
    }
    del holders, in_sac, adversary, held, rule_counts, members, at_holders

    # gate 4: Lemma 22's recovered supports (sums over shards)
    recovered = recover_rule_confidences(
        rules,
        sac_released=sac_released,
        attribute_table=attribute_table,
        id_table=id_table,
        attribute_clusters=attribute_clusters,
    )
    partials["rule_confidence_preserved"] = {
        "released_support_antecedent": [float(v) for v in recovered["released_support_antecedent"]],
        "released_support_both": [float(v) for v in recovered["released_support_both"]],
        "n_deleted": len(deleted),
        "n_suppressed_cells": n_suppressed_cells,
    }

    # gate 5: every record of the shard in exactly one place
    to_source = row_map.set_index("row_id")["source_row_id"]
    accounting = verification.accounting_summary(
        records["row_id"],
        sac_row_ids=to_source.reindex(sac_released["row_id"]).fillna(-1).astype("int64"),
        attribute_table_row_ids=to_source.reindex(attribute_table["row_id"]).fillna(-1).astype("int64"),
        deleted_row_ids=deleted["row_id"],
    )
    partials["records_accounted_for"] = {
        "n_records": len(records),
        "n_sac_released": len(sac_released),
        "n_attribute_table": len(attribute_table),
        "n_deleted": len(deleted),
        "n_records_not_exactly_once": int((accounting["n_places"] != 1).sum()),
    }
    del recovered, to_source, accounting

    # gate 6: no strong value (global rules) in a SID of an attribute other than the GLOBAL S_max
    tilt = verification.strong_values_in_sids(id_table, strong_values(rules, sensitive), model.s_max)
    partials["no_probability_tilt"] = {
        "n_sids_checked": len(tilt),
        "n_sids_with_strong_values": int((tilt["n_strong_values"] > 0).sum()),
    }

    # gate 8: suppressed cells; their candidates are the values every SID of the union holds
    certainty = suppressed_cell_certainty(attribute_table, id_table, sensitive, parameters.ell)
    attribute_of_sid = id_table["attribute"]
    partials["no_certain_attribute_table_cell"] = {
        "n_attribute_table_rows_with_a_suppressed_cell": int(attribute_table[sensitive].isna().any(axis=1).sum())
        if len(attribute_table)
        else 0,
        "per_attribute": {
            str(row.attribute): {
                "n_suppressed_cells": int(row.n_suppressed_cells),
                "n_sids": int(pd.unique(id_table.loc[values_mask(attribute_of_sid, [str(row.attribute)]), "sid"]).size),
                "candidate_digests": sorted(_value_digest(v) for v in values_in_every_sid(id_table, str(row.attribute))),
            }
            for row in certainty.itertuples(index=False)
        },
    }

    # gate 7, per shard: Spearman ρ of the published ids against the input positions, the order-replay adversary
    if parameters.evaluate_order:
        partials["release_carries_no_input_order"] = _order_partial(
            sac_released, attribute_table, id_table, row_map, original, sensitive, n_shards
        )
    del original  # gates 1 and 7 only: not held while gate 9 fits its model

    # gate 9, per shard: the learned-model adversary fitted on the shard's release
    if parameters.evaluate_posterior:
        partials["posterior_within_bound"] = _posterior_partial(
            records, row_map, parameters, sac_released, attribute_table, id_table, attribute_clusters
        )

    # utility gate: deleted records and suppressed cells per attribute
    suppressed, _ = verification.suppressed_cells_per_attribute(attribute_table, sensitive, n_other_released=len(sac_released))
    partials["utility_within_thresholds"] = {
        "n_deleted": len(deleted),
        "n_sac_released": len(sac_released),
        "n_attribute_table": len(attribute_table),
        "suppressed_cells": suppressed,
    }
    return partials


def _sum(partials: Sequence[Mapping[str, Any]], key: str) -> int:
    return int(sum(int(p[key]) for p in partials))


def _disclosure_entries(
    partials: Sequence[Mapping[str, Any]], rules: pd.DataFrame, weights: np.ndarray
) -> list[tuple[int, int, int, int]]:
    """``(rule, numerator, denominator, n_records)`` of every record holding a rule, as
    :func:`pipeline.core.adversary.candidate_adversary` chooses them on the united release (the held rule with the
    largest probability times its ℓ_j, the lowest rule number among ties)."""
    n_rules = len(rules)
    n_antecedent = np.zeros(n_rules, dtype=np.int64)
    n_visible = np.zeros(n_rules, dtype=np.int64)
    n_candidates = np.zeros(n_rules, dtype=np.int64)
    for p in partials:
        n_antecedent += np.asarray(p["rules_n_antecedent"], dtype=np.int64).reshape(-1)
        n_visible += np.asarray(p["rules_n_visible"], dtype=np.int64).reshape(-1)
        n_candidates += np.asarray(p["rules_n_candidates"], dtype=np.int64).reshape(-1)
    member_fraction = [
        attribute_table_disclosure(
            support_both=int(rules["support_both"].iloc[r]),
            support_antecedent=int(rules["support_antecedent"].iloc[r]),
            n_antecedent=int(n_antecedent[r]),
            n_visible=int(n_visible[r]),
            n_candidates=int(n_candidates[r]),
        )
        for r in range(n_rules)
    ]
    entries: dict[tuple[int, int, int], int] = {}
    for p in partials:
        for rule, numerator, denominator, n in p["sac_holders"]:
            key = (int(rule), int(numerator), int(denominator))
            entries[key] = entries.get(key, 0) + int(n)
        for held, member, n in p["attribute_table_holders"]:
            in_m = set(member)
            best: tuple[int, int, int] | None = None
            best_score = -1.0
            for rule in sorted(held):
                numerator, denominator = member_fraction[rule] if rule in in_m else (0, max(int(n_candidates[rule]), 1))
                score = numerator / denominator * float(weights[rule])
                if score > best_score:
                    best, best_score = (rule, numerator, denominator), score
            if best is not None:
                entries[best] = entries.get(best, 0) + int(n)
    return [(r, a, b, n) for (r, a, b), n in sorted(entries.items())]


def reduce_gates(
    partials: Sequence[Mapping[str, Mapping[str, Any]]],
    model: GlobalModel,
    parameters: ShardParameters,
    *,
    n_input: int | None = None,
    n_dropped_missing: int = 0,
) -> dict[str, dict[str, Any]]:
    """The whole release's gate figures from the shards' partials (sums and maxima), each with ``passed`` (bool).

    Equal, figure for figure, to evaluating the gates on the union of the shards (the figures of ``checks/gates.py``
    for the gates of :data:`GATE_PARTIALS`; means are sums divided once, so they may differ from a pandas mean in the
    last bits).

    Parameters
    ----------
    partials
        One :attr:`ShardRelease.partials` per shard (any order).
    model, parameters
        The global model and the run's parameters.
    n_input, n_dropped_missing
        Records read and dropped for a missing sensitive value (the input summary; accounting checks
        ``n_input - n_dropped_missing == n_sac_released + n_attribute_table + n_deleted``). ``n_input`` None: the
        model's ``n_records`` (nothing dropped).

    Returns
    -------
    dict
        Gate name -> figures and ``passed``:

        - ``sac_released_is_l_diverse``: ``ell_required``, ``n_groups``, ``min_group_size``, ``max_group_size``,
          ``min_distinct_values_observed``, ``n_groups_tuples_not_preserved``, ``n_groups_failing``.
        - ``attribute_table_is_l_diverse``: ``ell_required`` (int, or {attribute: ℓ_i}), ``n_sids``,
          ``min_distinct_values_observed``, ``n_suppressed_cells``, ``n_attribute_table_rows``, ``n_sids_failing``,
          with ℓ_i also ``per_attribute``.
        - ``disclosure_within_bound``: ``bound``, ``max_disclosure_probability``, ``mean_disclosure_probability``,
          ``n_records_with_strong_rules``, ``n_records_above_bound``, ``n_records_certain``,
          ``histogram_bins_0_to_1_step_0.1``; with ℓ_i also ``ell_per_attribute``, ``bound_per_attribute``,
          ``per_rule``.
        - ``rule_confidence_preserved``: ``n_strong_rules``, ``n_rules_exact``, ``max_confidence_deviation``,
          ``tolerance``, ``exact_required``, ``average_raw_confidence``, ``average_released_confidence``.
        - ``records_accounted_for``: ``n_input``, ``n_dropped_missing``, ``n_sac_released``, ``n_attribute_table``,
          ``n_deleted``, ``n_records_not_exactly_once``, ``totals_add_up``.
        - ``no_probability_tilt``: ``n_sids_checked``, ``n_sids_with_strong_values``.
        - ``no_certain_attribute_table_cell``: ``n_suppressed_cells``, ``n_cells_above_bound``,
          ``n_attribute_table_rows_with_a_suppressed_cell``, ``max_cell_probability``, ``bound``,
          ``residual_policy``.
        - ``utility_within_thresholds``: :data:`pipeline.core.verification.UTILITY_KEYS`.
        - ``release_carries_no_input_order`` (per shard, see the module's notes): ``max_abs_spearman``,
          ``spearman_limit``, ``n_columns_checked``, ``n_columns_above_limit``, ``max_order_replay_excess``,
          ``n_attributes_above_chance`` (pooled over the shards), ``order_replay_accuracy_<attribute>``,
          ``order_replay_chance_<attribute>``, ``shard_order_replay_sigmas`` (:func:`shard_order_replay_sigmas`),
          ``max_shard_order_replay_excess`` and ``n_shard_attributes_above_chance`` (every shard's own replay: its
          largest accuracy − chance, and the (shard, attribute) pairs above chance + z_S·σ),
          ``n_shards_evaluated`` (only when every partial has it).
        - ``posterior_within_bound`` (per shard; only when every partial has it): the keys of
          :func:`pipeline.core.posterior.release_posteriors`' ``summary`` (means weighted by cells, maxima of maxima,
          ``em_iterations_selected`` the largest), ``histogram_bins_0_to_1_step_0.1`` and ``n_shards_evaluated``.

    Raises
    ------
    KeyError
        A partial without one of the gates of :data:`GATE_PARTIALS` (gates 7 and 9 are optional: reduced only when
        every partial has them).

    References
    ----------
    SCALE.md §1 ("gates as map-reduce"); SPEC §9-§10.
    """
    sensitive = list(parameters.sensitive_attributes)
    ell_size = group_size(parameters.ell)
    per_attribute_ell = _ell_per_attribute(parameters)
    ells = ell_by_attribute(parameters.ell, sensitive)
    rules = model.rules.reset_index(drop=True)
    result: dict[str, dict[str, Any]] = {}

    gate = [p["sac_released_is_l_diverse"] for p in partials]
    n_groups = _sum(gate, "n_groups")
    result["sac_released_is_l_diverse"] = {
        "ell_required": ell_size,
        "n_groups": n_groups,
        "min_group_size": _optional_min([g["min_group_size"] for g in gate]) or 0,
        "max_group_size": _optional_max([g["max_group_size"] for g in gate]) or 0,
        "min_distinct_values_observed": _optional_min([g["min_distinct_values_observed"] for g in gate]) or 0,
        "n_groups_tuples_not_preserved": _sum(gate, "n_groups_tuples_not_preserved"),
        "n_groups_failing": _sum(gate, "n_groups_failing"),
    }
    result["sac_released_is_l_diverse"]["passed"] = result["sac_released_is_l_diverse"]["n_groups_failing"] == 0

    gate = [p["attribute_table_is_l_diverse"] for p in partials]
    sid_figures: dict[str, Any] = {
        "ell_required": dict(per_attribute_ell) if per_attribute_ell else ell_size,
        "n_sids": _sum(gate, "n_sids"),
        "min_distinct_values_observed": _optional_min([g["min_distinct_values_observed"] for g in gate]) or 0,
        "n_suppressed_cells": _sum(gate, "n_suppressed_cells"),
        "n_attribute_table_rows": _sum(gate, "n_attribute_table_rows"),
        "n_sids_failing": _sum(gate, "n_sids_failing"),
    }
    if per_attribute_ell:
        per_attribute: dict[str, dict[str, Any]] = {}
        for attribute, ell in per_attribute_ell.items():
            parts = [g["per_attribute"][attribute] for g in gate]
            per_attribute[attribute] = {
                "ell_required": int(ell),
                "n_sids": _sum(parts, "n_sids"),
                "min_distinct_values_observed": _optional_min([q["min_distinct_values_observed"] for q in parts]) or 0,
                "max_value_share": float(max([float(q["max_value_share"]) for q in parts], default=0.0)),
                "n_sids_below_ell": _sum(parts, "n_sids_below_ell"),
                "n_suppressed_cells": _sum(parts, "n_suppressed_cells"),
            }
        sid_figures["per_attribute"] = per_attribute
    sid_figures["passed"] = sid_figures["n_sids_failing"] == 0
    result["attribute_table_is_l_diverse"] = sid_figures

    gate = [p["disclosure_within_bound"] for p in partials]
    weights = np.asarray(
        [int(per_attribute_ell[str(a)]) if per_attribute_ell else 1 for a in rules["consequent_attribute"]],
        dtype=np.int64,
    )
    entries = _disclosure_entries(gate, rules, weights)
    counts = np.asarray([n for *_, n in entries], dtype=np.int64)
    numerators = np.asarray([a for _, a, _, _ in entries], dtype=np.int64)
    denominators = np.asarray([b for _, _, b, _ in entries], dtype=np.int64)
    entry_rules = np.asarray([r for r, *_ in entries], dtype=np.int64)
    probability = numerators / np.maximum(denominators, 1)
    required = (
        np.asarray([ells[str(rules["consequent_attribute"].iloc[r])] for r in entry_rules], dtype=np.int64)
        if per_attribute_ell
        else np.full(len(entries), ell_size, dtype=np.int64)
    )
    within = numerators * required <= denominators
    n_holders = int(counts.sum())
    histogram, _ = np.histogram(probability, bins=np.linspace(0.0, 1.0, 11), weights=counts)
    disclosure: dict[str, Any] = {
        "bound": 1.0 / ell_size,
        "max_disclosure_probability": float(probability.max()) if n_holders else 0.0,
        "mean_disclosure_probability": float((probability * counts).sum() / n_holders) if n_holders else 0.0,
        "n_records_with_strong_rules": n_holders,
        "n_records_above_bound": int(counts[~within].sum()),
        "n_records_certain": int(counts[numerators == denominators].sum()),
        "histogram_bins_0_to_1_step_0.1": [int(round(x)) for x in histogram],
    }
    if per_attribute_ell:
        per_rule = []
        for rule in np.unique(entry_rules):
            select = entry_rules == rule
            ell = int(required[select][0])
            per_rule.append(
                {
                    "rule": int(rule),
                    "consequent_attribute": str(rules["consequent_attribute"].iloc[int(rule)]),
                    "bound": 1.0 / ell,
                    "max_probability": float(probability[select].max()),
                    "n_records": int(counts[select].sum()),
                    "n_records_above_bound": int(counts[select & ~within].sum()),
                }
            )
        disclosure.update(
            {
                "bound": 1.0 / min(per_attribute_ell.values()),
                "ell_per_attribute": dict(per_attribute_ell),
                "bound_per_attribute": {a: 1.0 / v for a, v in per_attribute_ell.items()},
                "per_rule": per_rule,
            }
        )
    disclosure["passed"] = disclosure["n_records_above_bound"] == 0
    result["disclosure_within_bound"] = disclosure

    gate = [p["rule_confidence_preserved"] for p in partials]
    antecedent = np.zeros(len(rules))
    both = np.zeros(len(rules))
    for g in gate:
        antecedent += np.asarray(g["released_support_antecedent"], dtype=float).reshape(-1)
        both += np.asarray(g["released_support_both"], dtype=float).reshape(-1)
    summary = verification.confidence_summary(with_released_confidence(rules, antecedent, both))
    exact_required = _sum(gate, "n_deleted") == 0 and _sum(gate, "n_suppressed_cells") == 0
    confidence: dict[str, Any] = {
        "n_strong_rules": len(summary),
        "n_rules_exact": int(summary["exact"].sum()),
        "max_confidence_deviation": float(summary["deviation"].max()) if len(summary) else 0.0,
        "tolerance": float(parameters.confidence_tolerance),
        "exact_required": exact_required,
        "average_raw_confidence": float(summary["raw_confidence"].mean()) if len(summary) else 0.0,
        "average_released_confidence": float(summary["released_confidence"].mean()) if len(summary) else 0.0,
    }
    confidence["passed"] = bool(
        (summary["deviation"] <= parameters.confidence_tolerance).all() and (not exact_required or summary["exact"].all())
    )
    result["rule_confidence_preserved"] = confidence

    gate = [p["records_accounted_for"] for p in partials]
    n_sac, n_at, n_deleted = _sum(gate, "n_sac_released"), _sum(gate, "n_attribute_table"), _sum(gate, "n_deleted")
    read = model.n_records + n_dropped_missing if n_input is None else int(n_input)
    totals_add_up = read - n_dropped_missing == n_sac + n_at + n_deleted and _sum(gate, "n_records") == model.n_records
    accounting: dict[str, Any] = {
        "n_input": read,
        "n_dropped_missing": int(n_dropped_missing),
        "n_sac_released": n_sac,
        "n_attribute_table": n_at,
        "n_deleted": n_deleted,
        "n_records_not_exactly_once": _sum(gate, "n_records_not_exactly_once"),
        "totals_add_up": bool(totals_add_up),
    }
    accounting["passed"] = accounting["n_records_not_exactly_once"] == 0 and bool(totals_add_up)
    result["records_accounted_for"] = accounting

    gate = [p["no_probability_tilt"] for p in partials]
    tilt = {"n_sids_checked": _sum(gate, "n_sids_checked"), "n_sids_with_strong_values": _sum(gate, "n_sids_with_strong_values")}
    result["no_probability_tilt"] = {**tilt, "passed": tilt["n_sids_with_strong_values"] == 0}

    gate = [p["no_certain_attribute_table_cell"] for p in partials]
    n_suppressed_total, n_above, max_probability = 0, 0, 0.0
    for attribute in sensitive:
        parts = [g["per_attribute"][attribute] for g in gate]
        n_suppressed = _sum(parts, "n_suppressed_cells")
        with_sids = [set(q["candidate_digests"]) for q in parts if int(q["n_sids"]) > 0]
        candidates = len(set.intersection(*with_sids)) if with_sids else 0
        cell_probability = 0.0 if n_suppressed == 0 else (1.0 / candidates if candidates else 1.0)
        n_suppressed_total += n_suppressed
        if not cell_probability <= 1.0 / ells[attribute] + 1e-12:
            n_above += n_suppressed
        max_probability = max(max_probability, cell_probability)
    result["no_certain_attribute_table_cell"] = {
        "n_suppressed_cells": n_suppressed_total,
        "n_cells_above_bound": n_above,
        "n_attribute_table_rows_with_a_suppressed_cell": _sum(gate, "n_attribute_table_rows_with_a_suppressed_cell"),
        "max_cell_probability": max_probability,
        "bound": 1.0 / ell_size,
        "residual_policy": parameters.residual_policy,
        "passed": n_above == 0,
    }

    gate = [p["utility_within_thresholds"] for p in partials]
    n_released = _sum(gate, "n_sac_released") + _sum(gate, "n_attribute_table")
    figures = verification.utility_figures(
        records_eligible=model.n_records,
        records_deleted=_sum(gate, "n_deleted"),
        suppressed_cells={a: int(sum(int(g["suppressed_cells"][a]) for g in gate)) for a in sensitive},
        attribute_cells=dict.fromkeys(sensitive, n_released),
        max_deleted_share=parameters.max_deleted_share,
        max_suppressed_share=parameters.max_suppressed_share,
    )
    utility = verification.utility_summary(figures)
    result["utility_within_thresholds"] = {
        **figures,
        "passed": bool(utility["within_limit"].all() and utility["share"].between(0.0, 1.0).all()),
    }

    if partials and all("release_carries_no_input_order" in p for p in partials):
        result["release_carries_no_input_order"] = _reduce_order(
            [p["release_carries_no_input_order"] for p in partials], sensitive
        )
    if all("posterior_within_bound" in p for p in partials) and partials:
        result["posterior_within_bound"] = _reduce_posterior(
            [p["posterior_within_bound"] for p in partials], parameters, per_attribute_ell
        )
    return result


def pooled_order_replay(
    *, cells: int, correct: int, expected_correct: float, variance_correct: float, sigmas: float = 4.0
) -> tuple[float, float, float]:
    """The order-replay adversary's (accuracy, chance, limit) on one attribute from the counts added up over the
    shards it attacked one by one (:func:`pipeline.core.order_attack.order_replay_attack`'s ``cells``, ``correct``,
    ``expected_correct``, ``variance_correct``): accuracy = correct / cells, chance = expected / cells, limit =
    min(1, (expected + sigmas·√variance) / cells), with ``sigmas`` 4 the formula of ``order_replay_attack`` on the
    pooled counts (the guesses of different cells are independent). ``(0, 0, 1)`` without cells. Gate 7 fails on an
    attribute whose accuracy is above its limit. The same function judges one shard's own counts with
    ``sigmas`` = :func:`shard_order_replay_sigmas`."""
    if not cells:
        return 0.0, 0.0, 1.0
    limit = min(1.0, (expected_correct + sigmas * float(np.sqrt(variance_correct))) / cells)
    return correct / cells, expected_correct / cells, limit


def shard_order_replay_sigmas(n_shards: int) -> float:
    """How many standard deviations above chance ONE shard's order-replay guesses may reach when each of ``n_shards``
    shards is judged on its own (gate 7's per-shard test, besides the pooled one): 4 for one shard (then it is the
    pooled test, the ``release`` job's), else the standard normal quantile whose upper tail is Φ(−4) / S (Bonferroni
    over the shards: a release whose shards are all at chance fails the per-shard test about as rarely as a release
    fails the 4σ test), e.g. 4.32 at S = 4, 4.98 at S = 100, 5.43 at S = 1,000.

    Why both tests: pooling dilutes one leaky shard. Its excess over chance is divided by S in the pooled accuracy,
    while the pooled limit shrinks only by √S, so a shard whose own guesses are z standard deviations above chance
    moves the pooled figure by about z / √S of them (measured on Adult in ``tests/checks/test_sharded_order_leaks.py``).

    Raises
    ------
    ValueError
        ``n_shards`` < 1.
    """
    if n_shards < 1:
        raise ValueError(f"n_shards must be at least 1, not {n_shards}")
    if n_shards == 1:
        return 4.0
    normal = NormalDist()
    return max(4.0, -normal.inv_cdf(normal.cdf(-4.0) / n_shards))


def _reduce_order(gate: Sequence[Mapping[str, Any]], sensitive: Sequence[str]) -> dict[str, Any]:
    """Gate 7's figures (per shard, see the module's notes) from the shards' partials."""
    columns = [c for g in gate for c in g["spearman"]]
    order: dict[str, Any] = {
        "max_abs_spearman": max((float(c["abs_spearman"]) for c in columns), default=0.0),
        "spearman_limit": min((float(c["limit"]) for c in columns), default=1.0),
        "n_columns_checked": len(columns),
        "n_columns_above_limit": sum(1 for c in columns if not c["passed"]),
    }
    excess, n_attributes_above = [], 0
    for attribute in sensitive:
        parts = [g["order_replay"][attribute] for g in gate if attribute in g["order_replay"]]
        accuracy, chance, limit = pooled_order_replay(
            cells=_sum(parts, "cells"),
            correct=_sum(parts, "correct"),
            expected_correct=float(sum(float(q["expected_correct"]) for q in parts)),
            variance_correct=float(sum(float(q["variance_correct"]) for q in parts)),
        )
        excess.append(accuracy - chance)
        n_attributes_above += int(not accuracy <= limit)
        order[f"order_replay_accuracy_{attribute}"] = round(accuracy, 4)
        order[f"order_replay_chance_{attribute}"] = round(chance, 4)
    order["max_order_replay_excess"] = float(max(excess)) if excess else 0.0
    order["n_attributes_above_chance"] = n_attributes_above
    # every shard on its own as well: pooling divides one leaky shard's excess by S (shard_order_replay_sigmas)
    sigmas = shard_order_replay_sigmas(max(len(gate), 1))
    shard_excess, n_shard_attributes_above = [], 0
    for g in gate:
        for attribute in sensitive:
            part = g["order_replay"].get(attribute)
            if part is None or not int(part["cells"]):
                continue
            accuracy, chance, limit = pooled_order_replay(
                cells=int(part["cells"]),
                correct=int(part["correct"]),
                expected_correct=float(part["expected_correct"]),
                variance_correct=float(part["variance_correct"]),
                sigmas=sigmas,
            )
            shard_excess.append(accuracy - chance)
            n_shard_attributes_above += int(not accuracy <= limit)
    order["shard_order_replay_sigmas"] = round(sigmas, 4)
    order["max_shard_order_replay_excess"] = float(max(shard_excess)) if shard_excess else 0.0
    order["n_shard_attributes_above_chance"] = n_shard_attributes_above
    order["n_shards_evaluated"] = len(gate)
    order["passed"] = order["n_columns_above_limit"] == 0 and n_attributes_above == 0 and n_shard_attributes_above == 0
    return order


def _reduce_posterior(
    gate: Sequence[Mapping[str, Any]], parameters: ShardParameters, per_attribute_ell: Mapping[str, int] | None
) -> dict[str, Any]:
    """Gate 9's figures (``pipeline.core.posterior.release_posteriors``'s ``summary`` and histogram) from the shards'
    partials."""
    n_cells = _sum(gate, "n_cells")
    n_sac_rows = _sum(gate, "n_sac_rows")

    def total(key: str) -> float:
        return float(sum(float(g[key]) for g in gate))

    mean_posterior = total("sum_posterior") / n_cells if n_cells else 0.0
    figures: dict[str, Any] = {
        "ell": group_size(parameters.ell),
        "slack": float(parameters.posterior_slack),
        "em_iterations_max": max(int(g["em_iterations_max"]) for g in gate),
        "em_iterations_selected": max(int(g["em_iterations_selected"]) for g in gate),
        **{
            key: _sum(gate, key)
            for key in (
                "n_records",
                "n_cells",
                "n_cells_above_bound",
                "n_records_above_bound",
                "n_sac_cells_above_bound",
                "n_attribute_table_cells_above_bound",
            )
        },
        "max_excess": float(_optional_max([g["max_excess"] for g in gate]) or 0.0),
        "max_posterior": float(_optional_max([g["max_posterior"] for g in gate]) or 0.0),
        "mean_posterior": float(mean_posterior),
        "mean_population_posterior": total("sum_population_posterior") / n_cells if n_cells else 0.0,
        "mean_self_expected_posterior": total("sum_self_expected_posterior") / n_cells if n_cells else 0.0,
        "calibration_gap": total("sum_self_expected_posterior") / n_cells - mean_posterior if n_cells else 0.0,
        "share_sac_rows_tuple_above_half": _sum(gate, "n_sac_rows_tuple_above_half") / n_sac_rows if n_sac_rows else 0.0,
    }
    if per_attribute_ell is not None:
        figures["ell_per_attribute"] = dict(per_attribute_ell)
    figures["histogram_bins_0_to_1_step_0.1"] = [
        int(sum(int(g["histogram"][k]) for g in gate)) for k in range(len(gate[0]["histogram"]))
    ]
    figures["n_shards_evaluated"] = len(gate)
    figures["passed"] = figures["n_cells_above_bound"] == 0
    return figures


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
    then the attribute-table rows of all shards; group ids and each attribute's SIDs consecutive per shard.

    A shard's local attribute-table ids are ``n_sac + 1 .. n_sac + n_attribute_table`` (its own ``n_sac``), so its
    attribute-table offset is ``total SAC~ + attribute-table rows of the earlier shards − its own n_sac``.

    Parameters
    ----------
    counts
        :attr:`ShardRelease.counts` of every shard, in shard order (``n_sac_released``, ``n_attribute_table``,
        ``n_groups``, ``n_sids``).
    """
    total_sac = sum(int(c["n_sac_released"]) for c in counts)
    offsets = []
    sac, attribute_table, groups = 0, 0, 0
    sids: dict[str, int] = {}
    for shard, c in enumerate(counts):
        n_sac = int(c["n_sac_released"])
        offsets.append(
            ShardOffsets(
                shard=shard,
                sac_row_id=sac,
                attribute_table_row_id=total_sac + attribute_table - n_sac,
                group_id=groups,
                sid={str(a): sids.get(str(a), 0) for a in c["n_sids"]},
            )
        )
        sac += n_sac
        attribute_table += int(c["n_attribute_table"])
        groups += int(c["n_groups"])
        for attribute, n in c["n_sids"].items():
            sids[str(attribute)] = sids.get(str(attribute), 0) + int(n)
    return offsets


def union_releases(releases: Sequence[ShardRelease], clusters: Sequence[Sequence[str]]) -> dict[str, pd.DataFrame]:
    """The united release (in memory; for tests and the pure loop): ``sac_released``, ``attribute_table``,
    ``id_table``, ``attribute_clusters``, ``row_map``, ``deleted`` with offsets applied, shards in order.

    Parameters
    ----------
    releases
        Every shard's release, in shard order (``shard`` 0..S-1).
    clusters
        The global attribute clusters.

    Raises
    ------
    ValueError
        Shards missing or out of order.
    """
    if [r.shard for r in releases] != list(range(len(releases))):
        raise ValueError("union_releases needs every shard once, in shard order (0..S-1)")
    offsets = shard_offsets([r.counts for r in releases])
    sac, attribute_tables, id_tables, row_maps = [], [], [], []
    for release, offset in zip(releases, offsets, strict=True):
        n_sac = int(release.counts["n_sac_released"])
        sac.append(
            release.sac_released.assign(
                row_id=release.sac_released["row_id"].to_numpy(np.int64) + offset.sac_row_id,
                group_id=release.sac_released["group_id"].to_numpy(np.int64) + offset.group_id,
            )
        )
        shifted = release.attribute_table.assign(
            row_id=release.attribute_table["row_id"].to_numpy(np.int64) + offset.attribute_table_row_id
        )
        for attribute, add in offset.sid.items():
            if attribute in shifted.columns:
                shifted[attribute] = (shifted[attribute].astype("Int64") + add).astype("Int32")
        attribute_tables.append(shifted)
        sid_offset = release.id_table["attribute"].astype(str).map(offset.sid).fillna(0).to_numpy(np.int64)
        id_tables.append(release.id_table.assign(sid=(release.id_table["sid"].to_numpy(np.int64) + sid_offset).astype(np.int32)))
        local = release.row_map["row_id"].to_numpy(np.int64)
        row_maps.append(
            release.row_map.assign(
                row_id=np.where(local <= n_sac, local + offset.sac_row_id, local + offset.attribute_table_row_id)
            )
        )

    def united(frames: list[pd.DataFrame]) -> pd.DataFrame:
        present = [f for f in frames if len(f)]
        return pd.concat(present, ignore_index=True) if present else frames[0].iloc[0:0].reset_index(drop=True)

    deleted = united([r.deleted for r in releases])
    return {
        "sac_released": united(sac),
        "attribute_table": united(attribute_tables),
        "id_table": united(id_tables),
        "attribute_clusters": attribute_clusters_frame(clusters),
        "row_map": united(row_maps).sort_values("row_id", kind="stable").reset_index(drop=True),
        "deleted": deleted,
    }
