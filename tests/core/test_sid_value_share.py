"""Gate 2's "no value above 1/ℓ" (P1 Definition 2, SPEC §6.6): a value's share of a SID sums its occurrences over every
ID-table row that lists it. Before, the share was the largest single row's ``count`` over the SID's occurrences, so a
SID listing ``a, a, b`` (count 1 each) had a share of 1/3 and passed at ℓ = 2 although ``a`` is 2/3 of it. The
expected figures are counted by hand in the comments or by a row-by-row pandas reference, never by the code under
test."""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from checks import suites
from checks.gx_runner import validate_frame
from pipeline.core import sharding, verification


def one_sid(values: list[str], counts: list[int]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """SID 1 of attribute A listing ``values`` with ``counts``; as many attribute-table records point to it as it has
    occurrences (so that only the share can fail)."""
    n_records = int(sum(counts))
    attribute_table = pd.DataFrame(
        {"row_id": np.arange(n_records, dtype=np.int64), "A": pd.array([1] * n_records, dtype="Int32")}
    )
    id_table = pd.DataFrame(
        {
            "attribute": ["A"] * len(values),
            "sid": np.ones(len(values), dtype=np.int32),
            "value": values,
            "count": np.asarray(counts, dtype=np.int32),
        }
    )
    return attribute_table, id_table


def test_a_value_listed_on_two_rows_counts_as_one_value_with_both_occurrences():
    attribute_table, id_table = one_sid(["a", "a", "b"], [1, 1, 1])
    summary = verification.sid_diversity_summary(attribute_table, id_table, ["A"])
    assert summary["n_distinct_values"].tolist() == [2]
    assert summary["n_value_occurrences"].tolist() == [3]
    assert summary["max_value_share"].tolist() == [2 / 3]  # a: 1 + 1 of 3 occurrences


def test_the_share_is_the_same_whether_a_value_is_one_row_or_several():
    listed_twice = verification.sid_diversity_summary(*one_sid(["a", "b", "a"], [1, 1, 1]), ["A"])
    counted_once = verification.sid_diversity_summary(*one_sid(["a", "b"], [2, 1]), ["A"])
    pd.testing.assert_frame_equal(listed_twice, counted_once)


def test_gate_2_refuses_a_sid_whose_repeated_value_is_above_one_over_ell():
    # ℓ = 2: a is 2/3 of SID 1 (> 1/2); the SID also has only 2 distinct values, which ℓ = 2 allows
    summary = verification.sid_diversity_summary(*one_sid(["a", "a", "b"], [1, 1, 1]), ["A"])
    outcome = validate_frame(summary, suites.sid_diversity_suite(ell=2))
    assert not outcome.success
    assert {e["column"] for e in outcome.expectations if not e["success"]} == {"max_value_share"}


def test_the_per_attribute_gate_refuses_it_too():
    summary = verification.sid_diversity_summary(*one_sid(["a", "a", "b"], [1, 1, 1]), ["A"])
    checked = verification.sid_diversity_per_attribute(summary, {"A": 2})
    assert checked["meets_ell_required"].tolist() == [False]


def test_the_sharded_gate_2_partial_counts_the_sid_as_failing():
    attribute_table, id_table = one_sid(["a", "a", "b"], [1, 1, 1])
    summary = sharding.sid_gate_partial(attribute_table, id_table, ["A"], ell=2, per_attribute_ell=None)
    assert summary["n_sids_failing"] == 1


id_rows = st.lists(
    st.tuples(st.integers(1, 4), st.sampled_from(["a", "b", "c", "d"]), st.integers(1, 3)), min_size=1, max_size=25
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(id_rows)
def test_the_share_matches_a_row_by_row_count_of_each_value(rows):
    id_table = pd.DataFrame(
        {
            "attribute": ["A"] * len(rows),
            "sid": np.asarray([sid for sid, _, _ in rows], dtype=np.int32),
            "value": [value for _, value, _ in rows],
            "count": np.asarray([count for _, _, count in rows], dtype=np.int32),
        }
    )
    attribute_table = pd.DataFrame({"row_id": np.zeros(0, dtype=np.int64), "A": pd.array([], dtype="Int32")})
    summary = verification.sid_diversity_summary(attribute_table, id_table, ["A"]).set_index("sid")
    per_value = id_table.groupby(["sid", "value"])["count"].sum()
    expected = (per_value.groupby(level="sid").max() / per_value.groupby(level="sid").sum()).sort_index()
    np.testing.assert_allclose(summary.loc[expected.index, "max_value_share"].to_numpy(), expected.to_numpy())
    assert (summary.loc[expected.index, "n_distinct_values"] == per_value.groupby(level="sid").size()).all()
