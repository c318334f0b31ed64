"""The Great Expectations suites of the three (k, ℓ) gates (``checks/suites.py``).

Each suite runs through ``checks.gx_runner.validate_frame`` on a small hand-made frame shaped like its gate's
derived frame (columns and dtypes of ``pipeline.core.verification``, as built in ``checks/gates.py``): one frame
that keeps the gate's promise passes, and frames that break it fail on the expectation that states the broken
promise, and on no other.
"""

from __future__ import annotations

import pandas as pd
import pytest

from checks import suites
from checks.gx_runner import SuiteOutcome, validate_frame

K = 3
ELL = 3

BETWEEN = "expect_column_values_to_be_between"
IN_SET = "expect_column_values_to_be_in_set"


def failed(outcome: SuiteOutcome) -> set[tuple[str, str]]:
    """(expectation type, column) of every expectation that failed."""
    return {(e["type"], e["column"]) for e in outcome.expectations if not e["success"]}


# --------------------------------------------------------------------------- gate 1: k-anonymous equivalence classes


def equivalence_class_frame(classes: list[tuple[int, int, bool]]) -> pd.DataFrame:
    """``kl_equivalence_class_summary``: one row per class from (rows, generalised tuples, truthful)."""
    return pd.DataFrame(
        {
            "cluster_id": pd.Series(range(len(classes)), dtype="int64"),
            "n_rows": pd.Series([n for n, _, _ in classes], dtype="int64"),
            "n_quasi_identifier_tuples": pd.Series([tuples for _, tuples, _ in classes], dtype="int64"),
            "generalization_truthful": pd.Series([truthful for _, _, truthful in classes], dtype=bool),
        }
    )


def test_kl_equivalence_class_suite_passes_when_every_class_has_at_least_k_rows_and_one_truthful_tuple():
    # a class of exactly k rows is allowed, and so is a larger one
    frame = equivalence_class_frame([(K, 1, True), (K + 2, 1, True)])
    outcome = validate_frame(frame, suites.kl_equivalence_class_suite(k=K))
    assert outcome.success
    assert outcome.failed_expectations == []


def test_kl_equivalence_class_suite_fails_when_a_class_has_fewer_than_k_rows():
    frame = equivalence_class_frame([(K, 1, True), (K - 1, 1, True)])
    outcome = validate_frame(frame, suites.kl_equivalence_class_suite(k=K))
    assert not outcome.success
    assert failed(outcome) == {(BETWEEN, "n_rows")}


def test_kl_equivalence_class_suite_fails_when_a_class_shows_two_generalised_quasi_identifier_tuples():
    # the class's rows are not generalised to one common tuple, so its records are distinguishable
    frame = equivalence_class_frame([(K, 1, True), (K + 1, 2, True)])
    outcome = validate_frame(frame, suites.kl_equivalence_class_suite(k=K))
    assert not outcome.success
    assert failed(outcome) == {(BETWEEN, "n_quasi_identifier_tuples")}


def test_kl_equivalence_class_suite_fails_when_a_published_label_does_not_generalise_the_members_value():
    frame = equivalence_class_frame([(K, 1, False), (K, 1, True)])
    outcome = validate_frame(frame, suites.kl_equivalence_class_suite(k=K))
    assert not outcome.success
    assert failed(outcome) == {(IN_SET, "generalization_truthful")}


# --------------------------------------------------------------------------- gate 2: ℓ-diverse equivalence classes


def diversity_frame(classes: list[tuple[list[tuple[str, str]], int]]) -> pd.DataFrame:
    """``kl_diversity_summary`` over two sensitive attributes: one row per class from its sensitive tuples and its
    ``Diverse`` (largest set of pairwise totally different tuples, worked out by hand in each test)."""
    rows = []
    for cluster_id, (tuples, diverse) in enumerate(classes):
        min_distinct = min(len({t[0] for t in tuples}), len({t[1] for t in tuples}))
        rows.append((cluster_id, len(tuples), len(set(tuples)), min_distinct, diverse, diverse >= ELL))
    frame = pd.DataFrame(
        rows,
        columns=[
            "cluster_id",
            "n_rows",
            "n_distinct_sensitive_tuples",
            "min_distinct_values",
            "diverse_lower_bound",
            "diverse_at_least_ell",
        ],
    )
    return frame.astype(
        {
            "cluster_id": "int64",
            "n_rows": "int64",
            "n_distinct_sensitive_tuples": "int64",
            "min_distinct_values": "int64",
            "diverse_lower_bound": "int64",
            "diverse_at_least_ell": bool,
        }
    )


#: ℓ = 3 tuples (education, occupation) pairwise different on both attributes: Diverse = 3.
DIVERSE_CLASS = ([("bachelors", "sales"), ("masters", "clerical"), ("doctorate", "service")], 3)


def test_kl_diversity_suite_passes_when_every_class_has_ell_pairwise_totally_different_tuples():
    larger_class = ([("bachelors", "sales"), ("masters", "clerical"), ("doctorate", "service"), ("bachelors", "service")], 3)
    frame = diversity_frame([DIVERSE_CLASS, larger_class])
    outcome = validate_frame(frame, suites.kl_diversity_suite(ell=ELL))
    assert outcome.success
    assert outcome.failed_expectations == []


def test_kl_diversity_suite_fails_when_a_class_has_fewer_than_ell_distinct_values_on_an_attribute():
    # the second class has three occupations but only two educations: Diverse <= 2 < ℓ as well
    two_educations = ([("bachelors", "sales"), ("masters", "clerical"), ("bachelors", "service")], 2)
    frame = diversity_frame([DIVERSE_CLASS, two_educations])
    outcome = validate_frame(frame, suites.kl_diversity_suite(ell=ELL))
    assert not outcome.success
    assert failed(outcome) == {(BETWEEN, "min_distinct_values"), (IN_SET, "diverse_at_least_ell")}


def test_kl_diversity_suite_fails_when_ell_distinct_values_per_attribute_do_not_give_ell_totally_different_tuples():
    # three educations and three occupations, but (bachelors, sales) and (masters, sales) share sales and
    # (doctorate, clerical) and (doctorate, service) share doctorate: at most one of each pair, Diverse = 2 < ℓ.
    # Only the Diverse flag catches this class; the distinct-values expectation (a necessary condition) holds.
    not_diverse = ([("bachelors", "sales"), ("masters", "sales"), ("doctorate", "clerical"), ("doctorate", "service")], 2)
    frame = diversity_frame([DIVERSE_CLASS, not_diverse])
    assert frame["min_distinct_values"].tolist() == [ELL, ELL]
    outcome = validate_frame(frame, suites.kl_diversity_suite(ell=ELL))
    assert not outcome.success
    assert failed(outcome) == {(IN_SET, "diverse_at_least_ell")}


# --------------------------------------------------------------------------- gate 3: records accounted for


def accounting_frame(n_places: list[int]) -> pd.DataFrame:
    """``kl_accounting_summary``: one row per input record with the number of places it is in (-1: unknown id)."""
    return pd.DataFrame(
        {"row_id": pd.Series(range(1, len(n_places) + 1), dtype="int64"), "n_places": pd.Series(n_places, dtype="int64")}
    )


def test_kl_accounting_suite_passes_when_every_record_is_released_once_or_suppressed():
    outcome = validate_frame(accounting_frame([1, 1, 1, 1, 1]), suites.kl_accounting_suite())
    assert outcome.success
    assert outcome.failed_expectations == []


@pytest.mark.parametrize(
    "n_places",
    [
        pytest.param([1, 1, 0, 1, 1], id="record_neither_released_nor_suppressed"),
        pytest.param([1, 1, 2, 1, 1], id="record_released_twice"),
        pytest.param([1, 1, 1, 1, -1], id="released_id_not_in_the_input"),
    ],
)
def test_kl_accounting_suite_fails_when_a_record_is_unaccounted_for(n_places):
    outcome = validate_frame(accounting_frame(n_places), suites.kl_accounting_suite())
    assert not outcome.success
    assert failed(outcome) == {(BETWEEN, "n_places")}
    assert outcome.expectations[0]["unexpected_count"] == 1
