"""Strong-rule mining: exact threshold, rule universe, and the two back ends agree."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.core.rules import exact_fraction, mine_strong_rules


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


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 10_000), n=st.integers(1, 200), confidence=st.sampled_from([0.3, 0.5, 0.75, 0.9, 1.0]))
def test_mlxtend_and_counting_backends_agree(seed, n, confidence):
    rng = np.random.default_rng(seed)
    frame = pd.DataFrame({f"S{j}": rng.integers(0, 4 + j, n).astype(str) for j in range(3)})
    a = mine_strong_rules(frame, list(frame.columns), min_confidence=confidence, backend="mlxtend")
    b = mine_strong_rules(frame, list(frame.columns), min_confidence=confidence, backend="counting")
    pd.testing.assert_frame_equal(a, b)
