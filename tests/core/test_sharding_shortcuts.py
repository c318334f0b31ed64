"""The two shortcuts of SCALE.md §1 that BREAK a sharded release, as regression tests on small deterministic tables:

- strong rules mined per shard: a rule strong over the whole table but weak in one shard leaves its holders of that
  shard in the attribute table, and the adversary who knows the WHOLE table's rules (the rules printed in the report)
  pins them above 1/ℓ;
- S_max chosen per shard: a shard whose own S_max differs from the whole table's puts strong values of another
  attribute into SIDs (probability tilt, gate 6).

On the same tables, the design (rules, S_max and clusters computed once over all records: :mod:`pipeline.core.sharding`)
keeps both guarantees, and the reduce of the shards' partials equals the gates evaluated on the union.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from pipeline.core import sharding
from pipeline.core.sac_split import split_sac_ir
from tests.core.sharding_gates import SECRET, assert_reduce_equals_whole, whole_release_gates

ATTRIBUTES = ["A", "B", "C"]


def filler(rng: np.random.Generator, n: int, shard: int) -> pd.DataFrame:
    """Records without any strong value: every attribute drawn uniformly from 8 values of its own."""
    return pd.DataFrame(
        {
            "zone": [f"z{k}" for k in rng.integers(0, 2, size=n)],
            "A": [f"g{k}" for k in rng.integers(0, 8, size=n)],
            "B": [f"h{k}" for k in rng.integers(0, 8, size=n)],
            "C": [f"k{k}" for k in rng.integers(0, 8, size=n)],
            "shard": shard,
        }
    )


def with_ids(parts: list[pd.DataFrame]) -> pd.DataFrame:
    table = pd.concat(parts, ignore_index=True)
    return table.assign(row_id=np.arange(1, len(table) + 1, dtype=np.int64))


def released(
    table: pd.DataFrame,
    parameters: sharding.ShardParameters,
    model: sharding.GlobalModel,
    local_model,
) -> tuple[list[sharding.ShardRelease], dict[str, pd.DataFrame]]:
    """Release the table's two shards (column ``shard``) with ``local_model(shard records)`` as each shard's model; the
    partials are those of the GLOBAL model (what the gates check)."""
    releases = []
    for shard in (0, 1):
        records = table[table["shard"] == shard].drop(columns="shard").reset_index(drop=True)
        release = sharding.release_shard(records, local_model(records), parameters, secret=SECRET, shard=shard, n_shards=2)
        partials = sharding.shard_partials(
            records,
            model,
            parameters,
            sac_released=release.sac_released,
            attribute_table=release.attribute_table,
            id_table=release.id_table,
            attribute_clusters=sharding.attribute_clusters_frame(model.clusters),
            row_map=release.row_map,
            deleted=release.deleted,
        )
        releases.append(dataclasses.replace(release, partials=partials))
    return releases, sharding.union_releases(releases, model.clusters)


def global_model(table: pd.DataFrame, *, min_confidence: float, min_support: int) -> sharding.GlobalModel:
    counts = table.groupby(ATTRIBUTES, observed=True).size().reset_index(name="n_records")
    return sharding.global_model_from_tuple_counts(counts, ATTRIBUTES, min_confidence=min_confidence, min_support=min_support)


def rule_set(model: sharding.GlobalModel) -> set[tuple[str, str, str, str]]:
    columns = ["antecedent_attribute", "antecedent_value", "consequent_attribute", "consequent_value"]
    return set(model.rules[columns].itertuples(index=False, name=None))


# --------------------------------------------------------------------------- rules mined per shard


def rules_table() -> pd.DataFrame:
    """a ⇒ b and b ⇒ a hold for the 30 (a, b) records of shard 0; shard 1 has 6 a, 6 b and 4 (a, b) (4/6 both ways,
    not strong at 0.8 there), so over the whole table both rules hold with 34/36."""
    rng = np.random.default_rng(20261126)
    holders = pd.DataFrame({"zone": "z0", "A": "a", "B": "b", "C": [f"k{k % 8}" for k in range(30)], "shard": 0})
    weak = pd.DataFrame(
        {
            "zone": "z1",
            "A": ["a"] * 6 + ["g0", "g1"],
            "B": ["b"] * 4 + ["h0", "h1", "b", "b"],
            "C": [f"k{k % 8}" for k in range(8)],
            "shard": 1,
        }
    )
    return with_ids([holders, filler(rng, 90, 0), weak, filler(rng, 50, 1)])


def test_rules_mined_per_shard_let_the_global_rule_adversary_exceed_one_over_ell():
    table = rules_table()
    parameters = sharding.ShardParameters(quasi_identifiers=("zone",), sensitive_attributes=tuple(ATTRIBUTES), ell=3, seed=0)
    model = global_model(table, min_confidence=0.8, min_support=3)
    assert rule_set(model) == {("A", "a", "B", "b"), ("B", "b", "A", "a")}
    records = table.drop(columns="shard")

    def mined_per_shard(records: pd.DataFrame) -> sharding.GlobalModel:
        return global_model(records, min_confidence=0.8, min_support=3)

    assert rule_set(mined_per_shard(table[table["shard"] == 1])) == set()  # weak in shard 1: its holders go to Rating
    releases, union = released(table, parameters, model, mined_per_shard)
    broken = whole_release_gates(union, records, model, parameters)["disclosure_within_bound"]
    # N_r = ⌈34/36 · 36⌉ − 30 visible in SAC~ = 4 holders hidden among the 9 attribute-table rows whose SIDs show a
    # and b (with this table and secret): 4/9 > 1/3 for each of the 4
    assert broken["max_disclosure_probability"] > 1 / 3
    assert broken["n_records_above_bound"] == 4 and not broken["passed"]
    # the reduce sees the same breach (the attribute-table holders' probabilities need the global counts)
    reduced = sharding.reduce_gates([r.partials for r in releases], model, parameters)
    assert_reduce_equals_whole(reduced, whole_release_gates(union, records, model, parameters))

    # the design: the global rules in every shard
    releases, union = released(table, parameters, model, lambda records: model)
    whole = whole_release_gates(union, records, model, parameters)
    assert whole["disclosure_within_bound"]["passed"]
    assert whole["disclosure_within_bound"]["max_disclosure_probability"] <= 1 / 3
    assert whole["disclosure_within_bound"]["n_records_with_strong_rules"] > 0
    assert_reduce_equals_whole(sharding.reduce_gates([r.partials for r in releases], model, parameters), whole)


# --------------------------------------------------------------------------- S_max chosen per shard


def tilt_table() -> pd.DataFrame:
    """Strong values: a, a2 on A (45 records), b on B (35), c2 on C (40): S_max = A over the whole table. Shard 1
    alone has 5 on A and 35 on B: its own S_max would be B."""
    rng = np.random.default_rng(7)
    a2 = pd.DataFrame({"zone": "z0", "A": "a2", "B": [f"h{k % 8}" for k in range(40)], "C": "c2", "shard": 0})
    ab = pd.DataFrame({"zone": "z1", "A": "a", "B": "b", "C": [f"k{k}" for k in range(5)], "shard": 1})
    b_only = pd.DataFrame(
        {
            "zone": [f"z{k % 2}" for k in range(30)],
            "A": [f"g{k % 8}" for k in range(30)],
            "B": "b",
            "C": [f"k{(k * 3) % 8}" for k in range(30)],
            "shard": 1,
        }
    )
    return with_ids([a2, filler(rng, 60, 0), ab, b_only, filler(rng, 70, 1)])


def test_s_max_chosen_per_shard_tilts_sids_and_the_global_s_max_does_not():
    table = tilt_table()
    parameters = sharding.ShardParameters(quasi_identifiers=("zone",), sensitive_attributes=tuple(ATTRIBUTES), ell=2, seed=0)
    model = global_model(table, min_confidence=0.8, min_support=3)
    assert rule_set(model) == {("A", "a", "B", "b"), ("A", "a2", "C", "c2"), ("C", "c2", "A", "a2")}
    assert model.s_max == "A"
    records = table.drop(columns="shard")

    def s_max_per_shard(records: pd.DataFrame) -> sharding.GlobalModel:
        own = split_sac_ir(records, ATTRIBUTES, model.rules).s_max
        return dataclasses.replace(model, s_max=own)

    assert s_max_per_shard(table[table["shard"] == 1].drop(columns="shard")).s_max == "B"
    releases, union = released(table, parameters, model, s_max_per_shard)
    broken = whole_release_gates(union, records, model, parameters)["no_probability_tilt"]
    assert broken["n_sids_with_strong_values"] > 0 and not broken["passed"]
    reduced = sharding.reduce_gates([r.partials for r in releases], model, parameters)
    assert reduced["no_probability_tilt"] == broken

    # the design: the global S_max in every shard
    releases, union = released(table, parameters, model, lambda records: model)
    whole = whole_release_gates(union, records, model, parameters)
    assert whole["no_probability_tilt"]["passed"] and whole["no_probability_tilt"]["n_sids_checked"] > 0
    assert whole["disclosure_within_bound"]["passed"]
    assert_reduce_equals_whole(sharding.reduce_gates([r.partials for r in releases], model, parameters), whole)
