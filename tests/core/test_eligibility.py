"""No certain cell (issue 12, item 3): ℓ-eligibility by deleting whole records, and the certainty of suppressed cells.

Hand examples follow Anatomy's eligibility condition (Xiao & Tao, VLDB 2006): no value above 1/ℓ of the records.
"""

from __future__ import annotations

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.core.eligibility import eligibility_deletions, is_ell_eligible, suppressed_cell_certainty
from pipeline.core.rating import rating_tables


def test_dominant_value_loses_exactly_the_surplus_in_table_order():
    # n = 9, ℓ = 3: x is held by 5 > 9/3 records. Excess 3·5 − 9 = 6; each deletion of an x holder lowers it by 2,
    # so 3 holders go (n = 6, x = 2 = 6/3). B has no value in excess, so the first three x holders go (table order).
    records = pd.DataFrame(
        {
            "row_id": range(1, 10),
            "A": ["x", "y", "x", "z", "x", "y", "x", "z", "x"],
            "B": [f"b{i}" for i in range(9)],
        }
    )
    assert not is_ell_eligible(records, ["A", "B"], 3)
    deleted = eligibility_deletions(records, ["A", "B"], ell=3)
    assert list(deleted) == [1, 3, 5]
    assert is_ell_eligible(records[~records["row_id"].isin(deleted)], ["A", "B"], 3)


def test_records_dominant_on_two_attributes_go_first():
    # ℓ = 2, n = 8: A = x in 5 (excess 2), B = p in 5 (excess 2). Records 3 and 4 hold both x and p.
    records = pd.DataFrame(
        {
            "row_id": range(1, 9),
            "A": ["x", "x", "x", "x", "x", "y", "z", "w"],
            "B": ["q", "r", "p", "p", "s", "p", "p", "p"],
        }
    )
    deleted = eligibility_deletions(records, ["A", "B"], ell=2)
    # one deletion lowers an excess of 2 by 1: A needs 2 deletions of x holders, records 3 and 4 help both
    assert list(deleted) == [3, 4]
    assert is_ell_eligible(records[~records["row_id"].isin(deleted)], ["A", "B"], 2)


def test_an_attribute_with_fewer_than_ell_values_empties_the_table():
    records = pd.DataFrame({"row_id": [1, 2, 3, 4], "A": ["x", "x", "y", "y"], "B": ["p", "q", "r", "s"]})
    assert sorted(eligibility_deletions(records, ["A", "B"], ell=3)) == [1, 2, 3, 4]


@settings(max_examples=60, deadline=None)
@given(
    st.integers(min_value=2, max_value=4),
    st.lists(st.tuples(st.sampled_from("abcdef"), st.sampled_from("pqrstu"), st.sampled_from("vwxyz")), min_size=1, max_size=80),
)
def test_after_the_deletions_rating_suppresses_nothing(ell, rows):
    records = pd.DataFrame(rows, columns=["A", "B", "C"])
    records.insert(0, "row_id", range(1, len(records) + 1))
    deleted = eligibility_deletions(records, ["A", "B", "C"], ell=ell, secret=bytes(range(32)))
    assert len(set(deleted)) == len(deleted)
    rest = records[~records["row_id"].isin(deleted)]
    assert is_ell_eligible(rest, ["A", "B", "C"], ell)
    if len(rest):
        id_table, sids = rating_tables(rest, ["A", "B", "C"], ell=ell)
        assert int(sids[["A", "B", "C"]].isna().sum().sum()) == 0
        certainty = suppressed_cell_certainty(sids, id_table, ["A", "B", "C"], ell)
        assert certainty["within_bound"].all()


def test_a_suppressed_dominant_value_is_certain_and_fails_the_bound():
    """The deliberately leaky candidate: SPEC's suppression on a table where 'x' exceeds 1/ℓ.

    n = 10, ℓ = 3, A: x six times, y, z, w, v once. Rating: SID 1 = {x, y, z}, SID 2 = {x, w, v}; four x are left
    and both SIDs hold x, so four cells are suppressed, and x is the only value in every SID."""
    records = pd.DataFrame(
        {
            "row_id": range(1, 11),
            "A": ["x", "y", "x", "z", "x", "w", "x", "v", "x", "x"],
            "B": [f"b{i}" for i in range(10)],
        }
    )
    id_table, sids = rating_tables(records, ["A", "B"], ell=3)
    assert int(sids["A"].isna().sum()) == 4
    certainty = suppressed_cell_certainty(sids, id_table, ["A", "B"], 3).set_index("attribute")
    # every SID of A holds x and only x is in every SID: a NULL SID says "x" with probability 1
    assert certainty.loc["A", "n_candidate_values"] == 1
    assert certainty.loc["A", "max_probability"] == 1.0
    assert not certainty.loc["A", "within_bound"]
    assert certainty.loc["B", "n_suppressed_cells"] == 0 and certainty.loc["B", "within_bound"]
