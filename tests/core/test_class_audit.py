"""The audit of tables of equivalence classes (issue 16): exact Diverse over whole sensitive tuples, k, distinct and
entropy ℓ (against pycanon), the one-known-value share, the learned model and the strong-rule adversary.

Expected figures are worked out by hand below (or by brute force over subsets, an independent oracle)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.core.class_audit import class_audit, equivalence_class_codes, smallest_diverse, whole_record_rule_adversary
from pipeline.core.kl_anonymity import DIVERSE_EXACT_LIMIT, diverse_at_least, diverse_at_least_exact, diverse_greedy

#: 26 distinct tuples over 3 attributes (more than DIVERSE_EXACT_LIMIT): 5 pairwise totally different ones exist (brute
#: force below), yet the greedy pass, taking tuples with the fewest conflicts first, stops at 3 (found by a random
#: search against the brute force).
GREEDY_MISSES = np.array(
    [
        [0, 0, 2], [0, 2, 0], [0, 3, 1], [1, 0, 1], [1, 2, 4], [1, 3, 1], [1, 3, 2], [1, 4, 3], [1, 4, 4],
        [2, 0, 0], [2, 0, 3], [2, 2, 0], [2, 2, 1], [2, 3, 0], [2, 3, 3], [3, 1, 4], [3, 3, 2], [3, 3, 4],
        [3, 4, 4], [4, 0, 0], [4, 0, 3], [4, 1, 2], [4, 1, 4], [4, 2, 0], [4, 3, 4], [4, 4, 2],
    ]
)  # fmt: skip


def brute_force_diverse(tuples: np.ndarray) -> int:
    """The largest pairwise totally different subset, by trying every subset (largest first; none can be larger
    than the fewest distinct values of an attribute)."""
    rows = np.unique(np.asarray(tuples).reshape(len(tuples), -1), axis=0)
    distinct = [tuple(row) for row in rows]
    bound = min(len(np.unique(rows[:, j])) for j in range(rows.shape[1]))
    for size in range(bound, 0, -1):
        for chosen in itertools.combinations(distinct, size):
            if all(all(x != y for x, y in zip(a, b, strict=True)) for a, b in itertools.combinations(chosen, 2)):
                return size
    return 0


def brute_force_at_least(tuples: np.ndarray, ell: int) -> bool:
    distinct = [tuple(row) for row in np.unique(tuples, axis=0)]
    return any(
        all(all(x != y for x, y in zip(a, b, strict=True)) for a, b in itertools.combinations(chosen, 2))
        for chosen in itertools.combinations(distinct, ell)
    )


# ---------------------------------------------------------------------------------------------------- exact Diverse


def test_greedy_misses_a_diverse_set_the_exact_search_finds():
    assert len(GREEDY_MISSES) > DIVERSE_EXACT_LIMIT
    assert brute_force_at_least(GREEDY_MISSES, 4)
    assert diverse_greedy(GREEDY_MISSES, stop_at=4) < 4
    assert not diverse_at_least(GREEDY_MISSES, 4)  # the gates' check: no proof beyond the exact limit
    assert diverse_at_least_exact(GREEDY_MISSES, 4)
    assert diverse_greedy(GREEDY_MISSES) == 3
    assert brute_force_diverse(GREEDY_MISSES) == 5
    assert diverse_at_least_exact(GREEDY_MISSES, 5)
    assert not diverse_at_least_exact(GREEDY_MISSES, 6)  # 5 values per attribute at most


def test_a_large_class_without_a_diverse_set_is_decided():
    """600 tuples over 4 attributes with 60 values each, but every tuple holds 0 or 1 on the third or on the fourth
    attribute: pairwise totally different tuples take at most two of those values on each, so Diverse ≤ 4 (a
    search without a bound explores millions of branches here)."""
    rng = np.random.default_rng(5)
    n = 600
    third = np.where(rng.random(n) < 0.5, rng.integers(0, 2, n), rng.integers(0, 60, n))
    fourth = np.where(third >= 2, rng.integers(0, 2, n), rng.integers(0, 60, n))
    tuples = np.stack([rng.integers(0, 60, n), rng.integers(0, 60, n), third, fourth], axis=1)
    assert len(np.unique(tuples, axis=0)) > DIVERSE_EXACT_LIMIT
    assert all(len(np.unique(tuples[:, j])) >= 5 for j in range(4))
    assert not diverse_at_least_exact(tuples, 5)
    assert diverse_at_least_exact(tuples, 4)


@settings(max_examples=300, deadline=None)
@given(
    st.integers(1, 4).flatmap(lambda m: st.lists(st.lists(st.integers(0, 3), min_size=m, max_size=m), min_size=1, max_size=9)),
    st.integers(1, 4),
)
def test_exact_check_agrees_with_brute_force(rows, ell):
    tuples = np.array(rows)
    assert diverse_at_least_exact(tuples, ell) == brute_force_at_least(tuples, ell)


def test_smallest_diverse_is_exact_beyond_the_exact_limit():
    easy = np.array([[0, 0, 0], [1, 1, 1], [2, 2, 2], [3, 3, 3], [4, 4, 4]])
    assert brute_force_diverse(easy) == 5
    assert smallest_diverse([easy, GREEDY_MISSES]) == 5
    assert smallest_diverse([GREEDY_MISSES]) == 5
    assert smallest_diverse([GREEDY_MISSES, GREEDY_MISSES[[0, 1, 2]]]) == 1  # three tuples sharing the value 0
    assert smallest_diverse([]) == 0


# ---------------------------------------------------------------------------------------------- a hand-made table


def hand_table() -> pd.DataFrame:
    """Three classes on the quasi-identifiers (sex, zip):

    * ("F", "130**"), 4 records: tuples (a, x, p), (a, y, q), (b, x, q), (a, x, p): two values of every attribute, yet
      every two tuples share a value: Diverse 1. Knowing s1 = b pins s2 = x and s3 = q for the third record.
    * ("M", "130**"), 3 records: (a, x, p), (b, y, q), (c, z, r): Diverse 3, entropy ℓ 3.
    * ("*", "*"), 5 records (suppressed quasi-identifiers, one class): (a, x, p) ×4 and (b, y, q): Diverse 2.
    """
    rows = [
        ("F", "130**", "a", "x", "p"),
        ("F", "130**", "a", "y", "q"),
        ("F", "130**", "b", "x", "q"),
        ("F", "130**", "a", "x", "p"),
        ("M", "130**", "a", "x", "p"),
        ("M", "130**", "b", "y", "q"),
        ("M", "130**", "c", "z", "r"),
        ("*", "*", "a", "x", "p"),
        ("*", "*", "a", "x", "p"),
        ("*", "*", "a", "x", "p"),
        ("*", "*", "a", "x", "p"),
        ("*", "*", "b", "y", "q"),
    ]
    return pd.DataFrame(rows, columns=["sex", "zip", "s1", "s2", "s3"])


QUASI_IDENTIFIERS = ["sex", "zip"]
SENSITIVE_ATTRIBUTES = ["s1", "s2", "s3"]


def test_hand_table_figures():
    result = class_audit(hand_table(), QUASI_IDENTIFIERS, SENSITIVE_ATTRIBUTES, ell=2, slack=0.05)
    assert (result["n_records"], result["n_classes"], result["k"]) == (12, 3, 3)
    # distinct ℓ: 2 for every attribute (F: {a, b}, {x, y}, {p, q}; *: 2 values each)
    assert {a: f["distinct_ell"] for a, f in result["per_attribute"].items()} == {"s1": 2, "s2": 2, "s3": 2}
    # entropy ℓ of s1: the * class (4/5, 1/5) has the lowest entropy: exp(-(0.8 ln 0.8 + 0.2 ln 0.2))
    assert result["per_attribute"]["s1"]["entropy_ell"] == pytest.approx(
        math.exp(-(0.8 * math.log(0.8) + 0.2 * math.log(0.2))), abs=1e-6
    )
    assert result["diverse"] == {
        "ell": 2,
        "smallest": 1,
        "n_classes_below_ell": 1,
        "n_records_in_classes_below_ell": 4,
        "n_classes_decided_by_search": 1,
    }
    # one known value pins another: F class: record 2 (s2 = y pins s1 = a, s3 = q), record 3 (s1 = b pins x, q),
    # records 1 and 4 (s3 = p pins s1 = a and s2 = x); M class: every value is unique: all 3; * class: all 5
    assert result["one_known_value"]["share_records_pinning_another_value"] == pytest.approx(1.0)
    # learned model, bound max(1/2, baseline) + 0.05: baselines a 8/12, x 8/12, p 7/12. The * class gives its four
    # (a, x, p) records 4/5 on every attribute (> 0.717, > 0.633): 12 cells; the F class gives a and x 3/4 > 0.717:
    # rows 1, 2, 4 on s1 and rows 1, 3, 4 on s2: 6 cells; 8 records in all
    learned = result["learned_model"]
    assert learned["max_posterior"] == pytest.approx(0.8)
    assert learned["n_cells"] == 36
    assert learned["per_attribute"]["s1"]["max_population_baseline"] == pytest.approx(8 / 12, abs=1e-6)
    assert learned["per_attribute"]["s3"]["max_population_baseline"] == pytest.approx(7 / 12, abs=1e-6)
    assert learned["n_cells_above_bound"] == 18
    assert learned["n_records_above_bound"] == 8


def test_diverse_over_tuples_is_not_distinct_ell_on_every_attribute():
    """The F class alone: distinct ℓ = 2 on every attribute, Diverse 1: a table (2, 2)-anonymous attribute by
    attribute fails the whole-tuple check."""
    table = hand_table().iloc[:4]
    result = class_audit(table, QUASI_IDENTIFIERS, SENSITIVE_ATTRIBUTES, ell=2)
    assert result["across_attributes"]["distinct_ell"] == 2
    assert result["diverse"]["smallest"] == 1 and result["diverse"]["n_classes_below_ell"] == 1


def test_a_class_where_greedy_misses_is_not_flagged():
    """One class holding the 26 tuples: Diverse ≥ 4 (and 5) is true and decided by the exact search (the greedy
    stops at 3); ℓ = 6 is refused."""
    table = pd.DataFrame(GREEDY_MISSES.astype(str), columns=SENSITIVE_ATTRIBUTES).assign(sex="F", zip="130**")
    for ell in (4, 5):
        result = class_audit(table, QUASI_IDENTIFIERS, SENSITIVE_ATTRIBUTES, ell=ell)
        assert result["diverse"]["n_classes_below_ell"] == 0
        assert result["diverse"]["n_classes_decided_by_search"] == 1
        assert result["diverse"]["smallest"] == 5
    assert class_audit(table, QUASI_IDENTIFIERS, SENSITIVE_ATTRIBUTES, ell=6)["diverse"]["n_classes_below_ell"] == 1


def test_equivalence_classes_follow_the_labels_and_the_class_column():
    codes = equivalence_class_codes(hand_table(), QUASI_IDENTIFIERS)
    assert len(set(codes[:4])) == 1 and len(set(codes)) == 3
    with_column = hand_table().assign(cluster_id=[1] * 7 + [2] * 5)  # F and M merged in one class
    result = class_audit(with_column, QUASI_IDENTIFIERS, SENSITIVE_ATTRIBUTES, ell=2, class_column="cluster_id")
    assert (result["n_classes"], result["k"]) == (2, 5)


def test_invalid_arguments_are_refused():
    with pytest.raises(ValueError, match="at least one sensitive attribute"):
        class_audit(hand_table(), QUASI_IDENTIFIERS, [], ell=2)
    with pytest.raises(ValueError, match="ell must be"):
        class_audit(hand_table(), QUASI_IDENTIFIERS, SENSITIVE_ATTRIBUTES, ell=0)


# ------------------------------------------------------------------------------------------------------ pycanon


@pytest.mark.parametrize("rows", [slice(None), slice(0, 7), slice(4, 12)])
def test_k_and_ell_agree_with_pycanon(rows):
    anonymity = pytest.importorskip("pycanon.anonymity")
    table = hand_table().iloc[rows].reset_index(drop=True)
    result = class_audit(table, QUASI_IDENTIFIERS, SENSITIVE_ATTRIBUTES, ell=2)
    assert result["k"] == anonymity.k_anonymity(table, QUASI_IDENTIFIERS)
    for attribute in SENSITIVE_ATTRIBUTES:
        figures = result["per_attribute"][attribute]
        assert figures["distinct_ell"] == anonymity.l_diversity(table, QUASI_IDENTIFIERS, [attribute])
        # pycanon floors exp(entropy); an exact integer may come out one below from floating point
        assert anonymity.entropy_l_diversity(table, QUASI_IDENTIFIERS, [attribute]) in {
            math.floor(figures["entropy_ell"] + 1e-9),
            math.floor(figures["entropy_ell"] - 1e-9),
        }
    assert result["across_attributes"]["distinct_ell"] == anonymity.l_diversity(table, QUASI_IDENTIFIERS, SENSITIVE_ATTRIBUTES)


# ------------------------------------------------------------------------------------------- strong-rule adversary


def test_whole_record_rule_adversary_on_a_leaky_class():
    """Rule s1 = a ⇒ s2 = x. F class: 3 records hold a, 2 of them x: 2/3; * class: 4 hold a, all x: certain."""
    table = hand_table()
    rules = pd.DataFrame(
        {
            "antecedent_attribute": ["s1"],
            "antecedent_value": ["a"],
            "consequent_attribute": ["s2"],
            "consequent_value": ["x"],
            "confidence": [0.875],
        }
    )
    result = whole_record_rule_adversary(table, equivalence_class_codes(table, QUASI_IDENTIFIERS), rules, ell=2)
    # holders of (a, x): F rows 1 and 4 (2/3), M row 5 (1/1), * rows 8-11 (4/4)
    assert result["n_records_exposed"] == 7
    assert result["n_records_above_bound"] == 7
    assert result["n_records_certain"] == 5
    assert result["max_probability"] == 1.0
    assert result["per_rule"][0]["n_records_above_bound"] == 7
