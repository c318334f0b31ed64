"""The utility gate's two versions (``checks/gates.py``; the mixed/Rating one through ``utility_result``, its verdict
without the refusal diagnosis, which tests/e2e/test_utility_gate.py runs end to end) called directly on small, deliberately lossy candidates
(issue 15): each is refused at the default thresholds and passes once the threshold is raised. The shares are
counted by hand in each test."""

from __future__ import annotations

import pandas as pd

from checks.gates import kl_utility_within_thresholds, utility_result
from pipeline.resources import ReleaseSettings

SUMMARY = pd.DataFrame({"n_input": [12], "n_dropped_missing": [2]})  # 10 eligible records


def _figures(result) -> dict:
    return {key: value.value for key, value in result.metadata.items()}


def test_a_kl_candidate_that_suppresses_three_of_ten_records_is_refused_unless_accepted():
    released = pd.DataFrame(
        {"row_id": range(7), "cluster_id": 0, "sex": "*", "education": list("abcdefg"), "occupation": list("gfedcba")}
    )
    suppressed = pd.DataFrame({"row_id": [11, 12, 13]})

    def gate(**thresholds):
        settings = ReleaseSettings(
            model="kl", quasi_identifiers=["sex"], sensitive_attributes=["education", "occupation"], ell=2, k=2, **thresholds
        )
        return kl_utility_within_thresholds(
            settings=settings, input_summary=SUMMARY, kl_suppressed_records=suppressed, kl_released=released
        )

    refused = gate()
    figures = _figures(refused)
    assert not refused.passed
    assert (figures["records_eligible"], figures["records_deleted"], figures["deleted_share"]) == (10, 3, 0.3)
    assert figures["suppressed_cells"] == {"education": 0, "occupation": 0}
    assert figures["attribute_cells"] == {"education": 7, "occupation": 7}
    assert gate(max_deleted_share=0.3).passed


def test_a_mixed_candidate_with_a_third_of_one_attribute_suppressed_is_refused_unless_accepted():
    # 3 SAC~ rows + 6 attribute-table rows = 9 cells per attribute; education: 3 suppressed (1/3), age: none;
    # 1 of the 10 eligible records deleted (10 %, at the threshold: allowed)
    sac_released = pd.DataFrame({"row_id": [1, 2, 3], "group_id": 1, "education": list("abc"), "age": list("xyz")})
    attribute_table = pd.DataFrame(
        {
            "row_id": range(4, 10),
            "education": pd.array([1, None, None, 2, None, 1], dtype="Int32"),
            "age": pd.array([1, 1, 2, 2, 3, 3], dtype="Int32"),
        }
    )
    deleted = pd.DataFrame({"row_id": [10], "reason": ["eligibility"]})

    def gate(**thresholds):
        settings = ReleaseSettings(quasi_identifiers=["sex"], sensitive_attributes=["education", "age"], **thresholds)
        return utility_result(settings, SUMMARY, deleted, sac_released, attribute_table)

    refused = gate()
    figures = _figures(refused)
    assert not refused.passed
    assert (figures["records_deleted"], figures["deleted_share"]) == (1, 0.1)
    assert figures["suppressed_cells"] == {"education": 3, "age": 0}
    assert figures["attribute_cells"] == {"education": 9, "age": 9}
    assert figures["suppressed_share"] == {"education": 1 / 3, "age": 0.0}
    assert gate(max_suppressed_share=0.34).passed
    assert not gate(max_suppressed_share=0.34, max_deleted_share=0.05).passed
