"""Strong-rule mining: exact threshold, rule universe, and every back end agrees."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.core.rules import exact_fraction, mine_strong_rules, resolve_mining_backend


def test_threshold_is_exact_and_inclusive():
    # a => b holds in 4 of 5 records: confidence exactly 4/5 must pass min_confidence 0.8
    frame = pd.DataFrame({"A": ["a"] * 5 + ["x"], "B": ["b"] * 4 + ["c", "d"]})
    rules = mine_strong_rules(frame, ["A", "B"], min_confidence=0.8)
    assert ((rules["antecedent_value"] == "a") & (rules["consequent_value"] == "b")).any()
    assert exact_fraction(0.8) == exact_fraction("0.8") == pytest.approx(0.8)
    assert exact_fraction(0.8).denominator == 5


def test_rules_only_between_two_attributes_one_item_each():
    frame = pd.DataFrame({"A": ["a", "a", "b"], "B": ["x", "x", "y"], "C": ["p", "q", "p"]})
    rules = mine_strong_rules(frame, ["A", "B", "C"], min_confidence=1.0)
    assert (rules["antecedent_attribute"] != rules["consequent_attribute"]).all()
    assert set(rules.columns) >= {"support_antecedent", "support_both"}
    # a => x (2/2) and x => a (2/2) are strong; a => p is 1/2, not strong at 1.0
    pairs = set(zip(rules["antecedent_value"], rules["consequent_value"]))
    assert {("a", "x"), ("x", "a")} <= pairs and ("a", "p") not in pairs


@pytest.mark.parametrize("bad", [0, -0.1, 1.5])
def test_min_confidence_outside_unit_interval_is_refused(bad):
    frame = pd.DataFrame({"A": ["a"], "B": ["b"]})
    with pytest.raises(ValueError, match="min_confidence"):
        mine_strong_rules(frame, ["A", "B"], min_confidence=bad)


BACKENDS = ["mlxtend-apriori", "mlxtend-fpgrowth", "duckdb", "counting"]


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    n=st.integers(1, 200),
    confidence=st.sampled_from([0.3, 0.5, 0.75, 0.9, 1.0]),
    categorical=st.booleans(),
)
def test_all_mining_backends_agree_on_random_tables(seed, n, confidence, categorical):
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({f"S{j}": rng.integers(0, 4 + j, n).astype(str) for j in range(3)})
    if categorical:  # the pipeline's loader gives categorical columns (with unused categories possible)
        frame = frame.astype("category")
        frame["S0"] = frame["S0"].cat.add_categories(["unused"])
    results = {
        backend: mine_strong_rules(frame, list(frame.columns), min_confidence=confidence, backend=backend) for backend in BACKENDS
    }
    for backend in BACKENDS[1:]:
        pd.testing.assert_frame_equal(results[BACKENDS[0]], results[backend], obj=backend)
    # every rule really holds in the table, with the stated counts (independent recount)
    for rule in results["duckdb"].itertuples():
        has_a = frame[rule.antecedent_attribute].astype(str) == rule.antecedent_value
        has_b = frame[rule.consequent_attribute].astype(str) == rule.consequent_value
        assert rule.support_antecedent == has_a.sum() and rule.support_both == (has_a & has_b).sum()
        assert rule.support_both >= confidence * rule.support_antecedent - 1e-9


def test_all_mining_backends_agree_on_adult(adult_records):
    """The issue's requirement: the same 1=>1 rule set from mlxtend apriori, fpgrowth and DuckDB."""
    attributes = ["education", "occupation", "age", "relationship"]
    results = {backend: mine_strong_rules(adult_records, attributes, min_confidence=0.8, backend=backend) for backend in BACKENDS}
    assert len(results["duckdb"]) == 7  # the default Adult release's 7 strong rules (README)
    for backend in BACKENDS[1:]:
        pd.testing.assert_frame_equal(results[BACKENDS[0]], results[backend], obj=backend)


def test_auto_backend_switches_to_duckdb_at_the_threshold():
    assert resolve_mining_backend("auto", 99, duckdb_threshold=100) == "mlxtend-fpgrowth"
    assert resolve_mining_backend("auto", 100, duckdb_threshold=100) == "duckdb"
    assert resolve_mining_backend("mlxtend", 10**8, duckdb_threshold=100) == "mlxtend-apriori"
    with pytest.raises(ValueError, match="unknown rule-mining backend 'spark'"):
        resolve_mining_backend("spark", 10, duckdb_threshold=100)


def test_min_support_drops_rules_held_by_fewer_records_in_every_backend():
    """Issue 12: a rule of support 1 (the only record with A = rare) is a fact about one record, not a pattern.

    Table (by hand): A=x,B=p three times; A=rare,B=q once; A=y,B=r twice.
    At min_confidence 1: x=>p, p=>x (support 3), rare=>q, q=>rare (support 1), y=>r, r=>y (support 2).
    """
    records = pd.DataFrame({"A": ["x", "x", "x", "rare", "y", "y"], "B": ["p", "p", "p", "q", "r", "r"]})
    expected = {
        1: {("x", "p"), ("p", "x"), ("rare", "q"), ("q", "rare"), ("y", "r"), ("r", "y")},
        2: {("x", "p"), ("p", "x"), ("y", "r"), ("r", "y")},
        3: {("x", "p"), ("p", "x")},
        4: set(),
    }
    for backend in ("mlxtend-apriori", "mlxtend-fpgrowth", "duckdb", "counting"):
        for min_support, rules in expected.items():
            mined = mine_strong_rules(records, ["A", "B"], min_confidence=1.0, backend=backend, min_support=min_support)
            assert set(zip(mined["antecedent_value"], mined["consequent_value"])) == rules, (backend, min_support)
            assert (mined["support_both"] >= min_support).all()
    with pytest.raises(ValueError, match="min_support"):
        mine_strong_rules(records, ["A", "B"], min_confidence=1.0, min_support=0)
