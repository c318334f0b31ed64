"""Property tests (hypothesis): SPEC §6.5 equivalence and the SPEC §9 invariants on random tables."""

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.core import verification
from pipeline.core.adversary import disclosure_probabilities, per_record_disclosure, recover_rule_confidences, rule_holders
from pipeline.core.mixed_model import assemble_release_tables, run_mixed_model
from pipeline.core.rating import create_sids, restore_descending_order
from pipeline.core.rules import strong_values


@st.composite
def value_columns(draw, max_records=60):
    n = draw(st.integers(min_value=0, max_value=max_records))
    n_values = draw(st.integers(min_value=1, max_value=8))
    weights = draw(st.lists(st.integers(1, 10), min_size=n_values, max_size=n_values))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    probabilities = np.asarray(weights) / sum(weights)
    return [f"v{k}" for k in rng.choice(n_values, size=n, p=probabilities)]


@settings(max_examples=300, deadline=None)
@given(values=value_columns(), ell=st.integers(2, 5))
def test_improved_sid_creation_equals_plain_rating(values, ell):
    ids = list(range(1, len(values) + 1))
    improved = create_sids(ids, values, ell=ell, method="improved")
    plain = create_sids(ids, values, ell=ell, method="plain")
    assert [sorted(s) for s in improved.sid_values] == [sorted(s) for s in plain.sid_values]
    assert improved.record_to_sid == plain.record_to_sid
    assert improved.suppressed == plain.suppressed
    # SID invariants (SPEC §6.4): >= ell pairwise distinct values, every record exactly once
    for sid in improved.sid_values:
        assert len(sid) >= ell and len(set(sid)) == len(sid)
    placed = sorted(list(improved.record_to_sid) + improved.suppressed)
    assert placed == ids


class _Sized:
    def __init__(self, size):
        self.size = size

    def __len__(self):
        return self.size


@settings(max_examples=300, deadline=None)
@given(sizes=st.lists(st.integers(1, 20), min_size=1, max_size=15), chosen=st.integers(1, 6))
def test_algorithm_13_equals_stable_resort(sizes, chosen):
    sequence = [_Sized(s) for s in sorted(sizes, reverse=True)]
    chosen = min(chosen, len(sequence))
    for bucket in sequence[:chosen]:
        bucket.size -= 1
    expected = sorted(sequence, key=lambda b: -len(b))
    restore_descending_order(sequence, chosen)
    assert [id(b) for b in sequence] == [id(b) for b in expected]


@st.composite
def tables(draw):
    n = draw(st.integers(min_value=1, max_value=80))
    m = draw(st.integers(min_value=2, max_value=4))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    frame = pd.DataFrame({"row_id": np.arange(1, n + 1), "qi": rng.integers(0, 5, n).astype(str)})
    for j in range(m):
        k = draw(st.integers(min_value=1, max_value=7))
        skew = draw(st.floats(min_value=0.0, max_value=2.0))
        weights = 1.0 / np.arange(1, k + 1) ** skew
        frame[f"S{j + 1}"] = [f"s{j + 1}_{v}" for v in rng.choice(k, size=n, p=weights / weights.sum())]
    return frame


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(frame=tables(), ell=st.integers(2, 4), min_confidence=st.sampled_from([0.5, 0.75, 0.8, 1.0]), seed=st.integers(0, 1000))
def test_spec_section_9_invariants(frame, ell, min_confidence, seed):
    sensitive = [c for c in frame.columns if c.startswith("S")]
    assert_section_9_invariants(frame, ["qi"], sensitive, ell=ell, min_confidence=min_confidence, seed=seed)


def assert_section_9_invariants(frame, quasi_identifiers, sensitive, *, ell, min_confidence, seed):
    """Run the pure mixed model and assert every SPEC §9 invariant on its release tables.

    Also used by the fuzz tests (tests/core/test_fuzz.py) on wilder tables. Returns the model
    result and the release tables.
    """
    result = run_mixed_model(frame, sensitive, ell=ell, min_confidence=min_confidence, seed=seed)
    tables_ = assemble_release_tables(
        frame,
        quasi_identifiers,
        sensitive,
        sac_permuted=result.sac_permuted,
        attribute_sids=result.attribute_sids,
        id_table=result.id_table,
        clusters=result.clusters,
    )
    sac, at = tables_.sac_released, tables_.attribute_table
    # 1. SAC~ groups: exactly ell rows, ell distinct values per attribute, cluster tuples preserved
    original = tables_.row_map.merge(frame, left_on="source_row_id", right_on="row_id", suffixes=("", "_raw"))
    groups = verification.group_diversity_summary(sac, original[["row_id", *sensitive]], sensitive, result.clusters)
    assert (groups["n_rows"] == ell).all()
    assert (groups["min_distinct_values"] == ell).all()
    assert groups["cluster_tuples_preserved"].all()
    assert len(groups) == len(result.grouping.groups) and len(sac) == ell * len(groups)
    # 2. Lemma 12: every rule holder is disclosed with probability <= 1/ell; exactly 0 in AT
    holders = rule_holders(frame, result.rules, row_map=tables_.row_map)
    per_record = per_record_disclosure(
        disclosure_probabilities(
            holders,
            result.rules,
            sac_released=sac,
            attribute_table=at,
            id_table=tables_.id_table,
            attribute_clusters=tables_.attribute_clusters,
        )
    )
    assert (per_record["numerator"] * ell <= per_record["denominator"]).all()
    in_at = per_record["row_id"].isin(at["row_id"])
    assert (per_record.loc[in_at, "numerator"] == 0).all()
    # every record holding a strong rule is in SAC (SPEC §3 consequence) unless deleted
    sac_sources = set(tables_.row_map.set_index("row_id").loc[sac["row_id"], "source_row_id"]) if len(sac) else set()
    raw_holders = set(rule_holders(frame, result.rules)["row_id"])
    assert raw_holders <= sac_sources | set(result.grouping.deleted)
    # 3. every SID has >= ell distinct values, no value above 1/ell; suppressed cells reported
    sids = verification.sid_diversity_summary(at, tables_.id_table, sensitive)
    assert (sids["n_distinct_values"] >= ell).all()
    assert (sids["records_match_occurrences"]).all()
    assert (sids["max_value_share"] * ell <= 1 + 1e-12).all()
    assert not tables_.id_table.duplicated(["attribute", "sid", "value"]).any()
    # 4. no probability tilt
    tilt = verification.strong_values_in_sids(tables_.id_table, strong_values(result.rules, sensitive), result.split.s_max)
    assert (tilt["n_strong_values"] == 0).all()
    # 5. every record exactly once
    to_source = tables_.row_map.set_index("row_id")["source_row_id"]
    accounting = verification.accounting_summary(
        frame["row_id"],
        sac_row_ids=to_source.reindex(sac["row_id"]),
        attribute_table_row_ids=to_source.reindex(at["row_id"]),
        deleted_row_ids=result.grouping.deleted,
    )
    assert (accounting["n_places"] == 1).all()
    assert len(sac) + len(at) + len(result.grouping.deleted) == len(frame)
    # Lemma 22: with nothing deleted, confidences are recovered exactly unless an antecedent cell was suppressed
    recovered = recover_rule_confidences(
        result.rules,
        sac_released=sac,
        attribute_table=at,
        id_table=tables_.id_table,
        attribute_clusters=tables_.attribute_clusters,
    )
    summary = verification.confidence_summary(recovered)
    if len(result.grouping.deleted) == 0 and not at[sensitive].isna().any().any():
        assert summary["exact"].all()
    # release row ids are unique across the release and carry no input order
    assert len(set(sac["row_id"]) | set(at["row_id"])) == len(sac) + len(at)
    # the released values are the input's: SAC~ rows keep each group's values, the ID table the rest
    for attribute in sensitive:
        released = sorted(
            sac[attribute].tolist()
            + [
                v
                for v, c in zip(
                    tables_.id_table.loc[tables_.id_table["attribute"] == attribute, "value"],
                    tables_.id_table.loc[tables_.id_table["attribute"] == attribute, "count"],
                )
                for _ in range(int(c))
            ]
        )
        published = frame[frame["row_id"].isin(to_source)].copy()
        suppressed_at = at.loc[at[attribute].isna(), "row_id"]
        published = published[~published["row_id"].isin(to_source.reindex(suppressed_at))]
        assert released == sorted(published[attribute].astype(str).tolist())
    return result, tables_
