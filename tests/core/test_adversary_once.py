"""The strong-rule adversary run once (issue 13, "one pass"): :func:`candidate_adversary` gives the disclosure gate's
figures and the audit's view from one pass over the rules, equal to the two functions that computed them apart
(:func:`per_record_disclosure` of :func:`disclosure_probabilities` on the rule holders, and :func:`adversary_view`), on
random mixed and plain-Rating releases (Rating's are the leaky ones: records above 1/ℓ, some certain)."""

import pandas as pd
import pandas.testing as pdt
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.core.adversary import (
    adversary_view,
    candidate_adversary,
    disclosure_probabilities,
    holders_disclosure,
    per_record_disclosure,
    released_records_view,
    rule_holders,
)
from pipeline.core.mixed_model import assemble_release_tables, run_mixed_model
from pipeline.core.rating import rating_tables
from tests.core.test_properties import tables


def _release(frame: pd.DataFrame, sensitive: list[str], *, ell: int, min_confidence: float, rating: bool):
    result = run_mixed_model(frame, sensitive, ell=ell, min_confidence=min_confidence, seed=0)
    if rating:  # every record bucketized by plain Rating, no SAC~
        id_table, attribute_sids = rating_tables(frame, sensitive, ell=ell)
        empty = pd.DataFrame(columns=["group_id", "row_id", "qi", *sensitive])
        release = assemble_release_tables(
            frame, ["qi"], sensitive, sac_permuted=empty, attribute_sids=attribute_sids, id_table=id_table, clusters=[]
        )
    else:
        release = assemble_release_tables(
            frame,
            ["qi"],
            sensitive,
            sac_permuted=result.sac_permuted,
            attribute_sids=result.attribute_sids,
            id_table=result.id_table,
            clusters=result.clusters,
        )
    return result.rules, release


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(frame=tables(), ell=st.integers(2, 3), min_confidence=st.sampled_from([0.5, 0.75, 1.0]), rating=st.booleans())
def test_one_pass_equals_the_gate_and_the_audit_computed_apart(frame, ell, min_confidence, rating):
    sensitive = [c for c in frame.columns if c.startswith("S")]
    rules, release = _release(frame, sensitive, ell=ell, min_confidence=min_confidence, rating=rating)
    tables_ = {
        "sac_released": release.sac_released,
        "attribute_table": release.attribute_table,
        "id_table": release.id_table,
        "attribute_clusters": release.attribute_clusters,
    }
    holders = rule_holders(frame, rules, row_map=release.row_map)
    once = candidate_adversary(rules, holders, **tables_)

    gate = per_record_disclosure(disclosure_probabilities(holders, rules, **tables_))
    pdt.assert_frame_equal(holders_disclosure(once), gate.reset_index(drop=True), check_dtype=False)
    pdt.assert_frame_equal(released_records_view(once), adversary_view(rules, **tables_))
    assert set(once.loc[once["holds_rule"], "row_id"]) == set(holders["row_id"])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(frame=tables(), min_confidence=st.sampled_from([0.5, 0.75, 1.0]), data=st.data())
def test_with_ell_per_attribute_the_gate_refuses_a_record_iff_one_of_its_rules_is_above_its_own_bound(
    frame, min_confidence, data
):
    """Issue 16: the held rule is the one furthest above (or nearest to) its own bound 1/ℓ_j, so checking it alone
    refuses a record exactly when some rule it holds is above that rule's bound, counted here over every
    (record, rule) pair of :func:`disclosure_probabilities` (plain-Rating releases: the leaky ones)."""
    from pipeline.core.verification import disclosure_summary

    sensitive = [c for c in frame.columns if c.startswith("S")]
    ells = {a: data.draw(st.integers(2, 3), label=a) for a in sensitive}
    rules, release = _release(frame, sensitive, ell=2, min_confidence=min_confidence, rating=True)
    id_table, attribute_sids = rating_tables(frame, sensitive, ell=ells)
    empty = pd.DataFrame(columns=["group_id", "row_id", "qi", *sensitive])
    release = assemble_release_tables(
        frame, ["qi"], sensitive, sac_permuted=empty, attribute_sids=attribute_sids, id_table=id_table, clusters=[]
    )
    tables_ = {
        "sac_released": release.sac_released,
        "attribute_table": release.attribute_table,
        "id_table": release.id_table,
        "attribute_clusters": release.attribute_clusters,
    }
    holders = rule_holders(frame, rules, row_map=release.row_map)
    once = candidate_adversary(rules, holders, **tables_, ell_per_attribute=ells)
    gate = disclosure_summary(holders_disclosure(once), ell=2, rules=rules, ell_per_attribute=ells)
    pairs = disclosure_probabilities(holders, rules, **tables_)
    bound_of_rule = rules["consequent_attribute"].map(ells)
    pair_ell = bound_of_rule.reindex(pairs["rule"].to_numpy()).to_numpy()
    above = pairs.assign(above=pairs["numerator"].to_numpy() * pair_ell > pairs["denominator"].to_numpy())
    expected = set(above.loc[above["above"], "row_id"])
    assert set(gate.loc[~gate["within_bound"], "row_id"]) == expected
    # the audit's view (every released record, every rule) weighs the rules the same way, in both implementations
    view = released_records_view(once)
    pdt.assert_frame_equal(view, adversary_view(rules, **tables_, ell_per_attribute=ells))
    view_ell = bound_of_rule.reindex(view["rule"].to_numpy()).fillna(2).to_numpy()
    assert expected <= set(view.loc[view["numerator"].to_numpy() * view_ell > view["denominator"].to_numpy(), "row_id"])


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.one_of(st.none(), st.integers(0, 40)), min_size=0, max_size=60),
    st.lists(st.one_of(st.none(), st.integers(0, 40)), min_size=0, max_size=60),
    st.lists(st.integers(0, 60), max_size=8),
    st.lists(st.integers(0, 60), max_size=8),
)
def test_the_candidate_set_of_a_rule_is_set_membership_of_both_sids(a_cells, b_cells, a_sids, b_sids):
    """``M_r`` (:func:`pipeline.core.adversary._in_candidates`, a look-up table of the chosen SIDs) is the rows whose
    SID of a is in ``a_sids`` and SID of b in ``b_sids``, as ``np.isin`` defines it; a suppressed cell (<NA>) is in
    neither, and a chosen SID above every SID of the column changes nothing."""
    import numpy as np

    from pipeline.core.adversary import _in_candidates

    n = min(len(a_cells), len(b_cells))
    table = pd.DataFrame({"A": pd.array(a_cells[:n], dtype="Int32"), "B": pd.array(b_cells[:n], dtype="Int32")})
    expected = np.array(
        [a is not None and a in a_sids and b is not None and b in b_sids for a, b in zip(a_cells[:n], b_cells[:n])],
        dtype=bool,
    )
    cache: dict = {}
    for _ in range(2):  # the second call reads the cached columns
        got = _in_candidates(table, "A", np.array(a_sids, dtype=np.int64), "B", np.array(b_sids, dtype=np.int64), cache)
        assert got.dtype == bool and got.tolist() == expected.tolist()
    assert set(cache) == {"A", "B"}


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.one_of(st.none(), st.integers(0, 30)), max_size=50),
    st.dictionaries(st.integers(0, 40), st.tuples(st.integers(1, 5), st.integers(0, 5)), max_size=12),
)
def test_the_attribute_table_value_probability_is_count_over_total_of_the_record_sid(cells, sid_counts):
    """P(an attribute-table record has value v) (:func:`pipeline.core.adversary._at_probability`, a look-up table of
    the SIDs) is count(v in the record's SID) / the SID's total, 0 for a SID without v and for a suppressed cell, as
    mapping each cell through a SID -> share table gives."""
    import numpy as np

    from pipeline.core.adversary import _at_probability

    table = pd.DataFrame({"A": pd.array(cells, dtype="Int32")})
    shares = pd.DataFrame(
        {
            "attribute": ["A"] * len(sid_counts) + ["B"] * len(sid_counts),
            "sid": list(sid_counts) * 2,
            "value": ["v"] * len(sid_counts) + ["v"] * len(sid_counts),
            "count": [count for count, _ in sid_counts.values()] * 2,
            "sid_total": [count + extra for count, extra in sid_counts.values()] * 2,
        }
    )
    expected = [0.0 if cell is None or cell not in sid_counts else sid_counts[cell][0] / sum(sid_counts[cell]) for cell in cells]
    got = _at_probability(table, shares, "A", "v")
    assert got.dtype == np.float64 and got.tolist() == expected
    assert _at_probability(table, shares, "A", "w").tolist() == [0.0] * len(cells)  # a value no SID holds
