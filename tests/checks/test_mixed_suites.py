"""The Great Expectations suites of the nine gates of the mixed and Rating models (``checks/suites.py``).

Each suite runs through ``checks.gx_runner.validate_frame`` on a small hand-made frame shaped like its gate's
derived frame (columns and dtypes of ``pipeline.core.verification``, ``pipeline.core.eligibility`` and
``pipeline.core.posterior``, as built in ``checks/gates.py``): one frame that keeps the gate's promise passes, and
frames that break it fail on the expectation that states the broken promise, and on no other.
"""

from __future__ import annotations

import pandas as pd
import pytest

from checks import suites
from checks.gx_runner import SuiteOutcome, validate_frame

ELL = 3
#: ``ReleaseSettings.confidence_tolerance`` default.
TOLERANCE = 0.05

BETWEEN = "expect_column_values_to_be_between"
IN_SET = "expect_column_values_to_be_in_set"


def failed(outcome: SuiteOutcome) -> set[tuple[str, str]]:
    """(expectation type, column) of every expectation that failed."""
    return {(e["type"], e["column"]) for e in outcome.expectations if not e["success"]}


# --------------------------------------------------------------------------- gate 1: SAC~ groups


def group_diversity_frame(n_rows, min_distinct_values, cluster_tuples_preserved) -> pd.DataFrame:
    """``group_diversity_summary``: one row per SAC~ group."""
    return pd.DataFrame(
        {
            "group_id": pd.Series(range(len(n_rows)), dtype="int64"),
            "n_rows": pd.Series(n_rows, dtype="int64"),
            "min_distinct_values": pd.Series(min_distinct_values, dtype="int64"),
            "cluster_tuples_preserved": pd.Series(cluster_tuples_preserved, dtype=bool),
        }
    )


def test_sac_diversity_suite_passes_when_every_group_has_ell_rows_and_ell_distinct_values():
    frame = group_diversity_frame(
        n_rows=[ELL, ELL, ELL], min_distinct_values=[ELL, ELL, ELL], cluster_tuples_preserved=[True, True, True]
    )
    outcome = validate_frame(frame, suites.sac_diversity_suite(ell=ELL))
    assert outcome.success
    assert outcome.failed_expectations == []


def test_sac_diversity_suite_fails_when_a_group_has_fewer_than_ell_distinct_values():
    # the second group has ℓ rows but two of them share a value on some sensitive attribute
    frame = group_diversity_frame(n_rows=[ELL, ELL], min_distinct_values=[ELL, ELL - 1], cluster_tuples_preserved=[True, True])
    outcome = validate_frame(frame, suites.sac_diversity_suite(ell=ELL))
    assert not outcome.success
    assert failed(outcome) == {(BETWEEN, "min_distinct_values")}


def test_sac_diversity_suite_fails_when_a_group_has_more_than_ell_rows():
    # "exactly ℓ rows": a group of ℓ + 1 rows with ℓ distinct values is still refused
    frame = group_diversity_frame(n_rows=[ELL, ELL + 1], min_distinct_values=[ELL, ELL], cluster_tuples_preserved=[True, True])
    outcome = validate_frame(frame, suites.sac_diversity_suite(ell=ELL))
    assert not outcome.success
    assert failed(outcome) == {(BETWEEN, "n_rows")}


def test_sac_diversity_suite_fails_when_a_group_does_not_preserve_its_cluster_tuples():
    frame = group_diversity_frame(n_rows=[ELL, ELL], min_distinct_values=[ELL, ELL], cluster_tuples_preserved=[True, False])
    outcome = validate_frame(frame, suites.sac_diversity_suite(ell=ELL))
    assert not outcome.success
    assert failed(outcome) == {(IN_SET, "cluster_tuples_preserved")}


# --------------------------------------------------------------------------- gate 2: SIDs of the attribute table


def sid_diversity_frame(rows: list[tuple[int, list[int], int]]) -> pd.DataFrame:
    """``sid_diversity_summary`` of the attribute ``education``: one row per SID from (sid, value counts, records)."""
    return pd.DataFrame(
        {
            "attribute": pd.Series(["education"] * len(rows), dtype=object),
            "sid": pd.Series([sid for sid, _, _ in rows], dtype="int64"),
            "n_distinct_values": pd.Series([len(counts) for _, counts, _ in rows], dtype="int64"),
            "n_value_occurrences": pd.Series([sum(counts) for _, counts, _ in rows], dtype="int64"),
            "n_records": pd.Series([records for _, _, records in rows], dtype="int64"),
            "max_value_share": pd.Series([max(counts) / sum(counts) for _, counts, _ in rows], dtype="float64"),
            "records_match_occurrences": pd.Series([records == sum(counts) for _, counts, records in rows], dtype=bool),
        }
    )


def test_sid_diversity_suite_passes_when_no_value_exceeds_one_over_ell_of_its_sid():
    # SID 0: three values twice each, so its largest share is exactly 1/ℓ (allowed); SID 1: four values once each
    frame = sid_diversity_frame([(0, [2, 2, 2], 6), (1, [1, 1, 1, 1], 4)])
    outcome = validate_frame(frame, suites.sid_diversity_suite(ell=ELL))
    assert outcome.success
    assert outcome.failed_expectations == []


def test_sid_diversity_suite_fails_when_a_sid_has_fewer_than_ell_distinct_values():
    # SID 1 holds two values: fewer than ℓ, and each is half of the SID (above 1/ℓ)
    frame = sid_diversity_frame([(0, [1, 1, 1], 3), (1, [1, 1], 2)])
    outcome = validate_frame(frame, suites.sid_diversity_suite(ell=ELL))
    assert not outcome.success
    assert failed(outcome) == {(BETWEEN, "n_distinct_values"), (BETWEEN, "max_value_share")}


def test_sid_diversity_suite_fails_when_one_value_exceeds_one_over_ell_of_a_sid_with_ell_distinct_values():
    # SID 1 has ℓ distinct values but one of them is 2 of its 4 occurrences (1/2 > 1/ℓ)
    frame = sid_diversity_frame([(0, [1, 1, 1], 3), (1, [2, 1, 1], 4)])
    outcome = validate_frame(frame, suites.sid_diversity_suite(ell=ELL))
    assert not outcome.success
    assert failed(outcome) == {(BETWEEN, "max_value_share")}


def test_sid_diversity_suite_fails_when_records_do_not_match_value_occurrences():
    # SID 1 counts four value occurrences but only three attribute-table records point to it
    frame = sid_diversity_frame([(0, [1, 1, 1], 3), (1, [1, 1, 1, 1], 3)])
    outcome = validate_frame(frame, suites.sid_diversity_suite(ell=ELL))
    assert not outcome.success
    assert failed(outcome) == {(IN_SET, "records_match_occurrences")}


# --------------------------------------------------------------------------- gate 3: strong-rule disclosure


def disclosure_frame(fractions: list[tuple[int, int]]) -> pd.DataFrame:
    """``disclosure_summary``: one row per record holding a strong rule, from its disclosure numerator/denominator;
    ``within_bound`` is the documented exact comparison numerator·ℓ <= denominator."""
    numerators = [n for n, _ in fractions]
    denominators = [d for _, d in fractions]
    return pd.DataFrame(
        {
            "row_id": pd.Series(range(1, len(fractions) + 1), dtype="int64"),
            "rule": pd.Series([0] * len(fractions), dtype="int64"),
            "numerator": pd.Series(numerators, dtype="int64"),
            "denominator": pd.Series(denominators, dtype="int64"),
            "probability": pd.Series([n / d for n, d in fractions], dtype="float64"),
            "within_bound": pd.Series([n * ELL <= d for n, d in fractions], dtype=bool),
        }
    )


def test_disclosure_suite_passes_when_every_record_is_disclosed_with_at_most_one_over_ell():
    # 1/3 is exactly the bound for ℓ = 3 (allowed), 1/4 and 2/7 are below it
    frame = disclosure_frame([(1, 3), (1, 4), (2, 7)])
    outcome = validate_frame(frame, suites.disclosure_suite(ell=ELL))
    assert outcome.success
    assert outcome.failed_expectations == []


def test_disclosure_suite_fails_when_a_record_is_disclosed_above_one_over_ell():
    # the second record's value is guessed with probability 1/2 > 1/ℓ
    frame = disclosure_frame([(1, 3), (1, 2), (1, 4)])
    assert not frame["within_bound"].iloc[1]
    outcome = validate_frame(frame, suites.disclosure_suite(ell=ELL))
    assert not outcome.success
    assert failed(outcome) == {(IN_SET, "within_bound")}
    assert outcome.expectations[0]["unexpected_count"] == 1


# --------------------------------------------------------------------------- gate 4: rule confidences


def confidence_frame(rules: list[tuple[float, float, bool]]) -> pd.DataFrame:
    """``confidence_summary``: one row per strong rule from (raw confidence, released confidence, exact)."""
    return pd.DataFrame(
        {
            "rule": pd.Series(range(len(rules)), dtype="int64"),
            "raw_confidence": pd.Series([raw for raw, _, _ in rules], dtype="float64"),
            "released_confidence": pd.Series([released for _, released, _ in rules], dtype="float64"),
            "deviation": pd.Series([abs(released - raw) for raw, released, _ in rules], dtype="float64"),
            "exact": pd.Series([exact for _, _, exact in rules], dtype=bool),
        }
    )


def test_confidence_suite_passes_when_every_recovered_confidence_equals_the_raw_one_exactly():
    frame = confidence_frame([(0.8, 0.8, True), (0.75, 0.75, True)])
    outcome = validate_frame(frame, suites.confidence_suite(exact=True, tolerance=TOLERANCE))
    assert outcome.success
    assert {(e["type"], e["column"]) for e in outcome.expectations} == {(BETWEEN, "deviation"), (IN_SET, "exact")}


def test_confidence_suite_fails_when_a_recovered_confidence_deviates_beyond_the_tolerance():
    # nothing was deleted or suppressed (exact required), yet a rule's confidence moved from 0.8 to 0.6
    frame = confidence_frame([(0.75, 0.75, True), (0.8, 0.6, False)])
    outcome = validate_frame(frame, suites.confidence_suite(exact=True, tolerance=TOLERANCE))
    assert not outcome.success
    assert failed(outcome) == {(BETWEEN, "deviation"), (IN_SET, "exact")}


def test_confidence_suite_fails_when_exactness_is_required_and_a_rule_is_only_close():
    # deviation within the tolerance, but with nothing deleted or suppressed the recovery must be exact
    frame = confidence_frame([(0.75, 0.75, True), (0.8, 0.79, False)])
    outcome = validate_frame(frame, suites.confidence_suite(exact=True, tolerance=TOLERANCE))
    assert not outcome.success
    assert failed(outcome) == {(IN_SET, "exact")}


def test_confidence_suite_passes_inexact_rules_within_the_tolerance_when_exactness_is_not_required():
    # records were deleted or cells suppressed: only the tolerance applies (a deviation equal to it is allowed)
    frame = confidence_frame([(0.8, 0.79, False), (0.75, 0.75, True)]).assign(deviation=[0.01, TOLERANCE])
    outcome = validate_frame(frame, suites.confidence_suite(exact=False, tolerance=TOLERANCE))
    assert outcome.success
    assert [(e["type"], e["column"]) for e in outcome.expectations] == [(BETWEEN, "deviation")]


def test_confidence_suite_fails_when_exactness_is_not_required_and_a_deviation_exceeds_the_tolerance():
    # nothing of the second rule's antecedent was released: deviation 1.0 by convention
    frame = confidence_frame([(0.8, 0.79, False), (0.75, 0.75, False)]).assign(deviation=[0.01, 1.0])
    outcome = validate_frame(frame, suites.confidence_suite(exact=False, tolerance=TOLERANCE))
    assert not outcome.success
    assert failed(outcome) == {(BETWEEN, "deviation")}


# --------------------------------------------------------------------------- gate 5: records accounted for


def accounting_frame(n_places: list[int]) -> pd.DataFrame:
    """``accounting_summary``: one row per input record with the number of places it is in (-1: unknown id)."""
    return pd.DataFrame(
        {"row_id": pd.Series(range(1, len(n_places) + 1), dtype="int64"), "n_places": pd.Series(n_places, dtype="int64")}
    )


def test_accounting_suite_passes_when_every_record_is_in_exactly_one_place():
    outcome = validate_frame(accounting_frame([1, 1, 1, 1]), suites.accounting_suite())
    assert outcome.success
    assert outcome.failed_expectations == []


@pytest.mark.parametrize(
    "n_places",
    [
        pytest.param([1, 0, 1, 1], id="record_in_no_place"),
        pytest.param([1, 2, 1, 1], id="record_in_two_places"),
        pytest.param([1, 1, 1, -1], id="output_id_not_in_the_input"),
    ],
)
def test_accounting_suite_fails_when_a_record_is_unaccounted_for(n_places):
    outcome = validate_frame(accounting_frame(n_places), suites.accounting_suite())
    assert not outcome.success
    assert failed(outcome) == {(BETWEEN, "n_places")}
    assert outcome.expectations[0]["unexpected_count"] == 1


# --------------------------------------------------------------------------- gate 6: no probability tilt


def strong_values_frame(n_strong_values: list[int]) -> pd.DataFrame:
    """``strong_values_in_sids``: one row per SID of an attribute other than S_max."""
    return pd.DataFrame(
        {
            "attribute": pd.Series(["occupation"] * len(n_strong_values), dtype=object),
            "sid": pd.Series(range(len(n_strong_values)), dtype="int64"),
            "n_strong_values": pd.Series(n_strong_values, dtype="int64"),
        }
    )


def test_no_probability_tilt_suite_passes_when_no_sid_outside_s_max_holds_a_strong_value():
    outcome = validate_frame(strong_values_frame([0, 0, 0]), suites.no_probability_tilt_suite())
    assert outcome.success
    assert outcome.failed_expectations == []


def test_no_probability_tilt_suite_fails_when_a_sid_outside_s_max_holds_a_strong_value():
    outcome = validate_frame(strong_values_frame([0, 1, 0]), suites.no_probability_tilt_suite())
    assert not outcome.success
    assert failed(outcome) == {(BETWEEN, "n_strong_values")}


# --------------------------------------------------------------------------- gate 7: no input order


def order_frame(spearman: list[tuple[str, float, float]], order_replay: list[tuple[str, float, float, float]]) -> pd.DataFrame:
    """``checks.gates.order_frame``: (table.column, |ρ|, limit) per published id/SID column and
    (attribute, accuracy, limit, chance) per attacked attribute; ``within_limit`` is observed <= limit."""
    rows = [
        {"kind": "spearman", "name": name, "observed": observed, "limit": limit, "chance": float("nan")}
        for name, observed, limit in spearman
    ] + [
        {"kind": "order_replay", "name": name, "observed": observed, "limit": limit, "chance": chance}
        for name, observed, limit, chance in order_replay
    ]
    frame = pd.DataFrame(rows, columns=["kind", "name", "observed", "limit", "chance"])
    return frame.assign(within_limit=(frame["observed"] <= frame["limit"]).astype(bool))


ORDER_COLUMNS_WITHIN_LIMIT = [
    ("sac_released.row_id", 0.01, 0.05),
    ("sac_released.group_id", 0.03, 0.05),
    ("attribute_table.row_id", 0.02, 0.05),
    ("attribute_table.education", 0.04, 0.05),
]


def test_no_input_order_suite_passes_when_every_column_and_attacked_attribute_is_within_its_limit():
    frame = order_frame(ORDER_COLUMNS_WITHIN_LIMIT, [("education", 0.26, 0.30, 0.25)])
    outcome = validate_frame(frame, suites.no_input_order_suite())
    assert outcome.success
    assert outcome.failed_expectations == []


def test_no_input_order_suite_fails_when_a_published_column_follows_the_input_order():
    # attribute-table row ids numbered in input order: |ρ| = 0.9 against a limit of 0.05
    columns = [*ORDER_COLUMNS_WITHIN_LIMIT[:2], ("attribute_table.row_id", 0.9, 0.05), ORDER_COLUMNS_WITHIN_LIMIT[3]]
    outcome = validate_frame(order_frame(columns, [("education", 0.26, 0.30, 0.25)]), suites.no_input_order_suite())
    assert not outcome.success
    assert failed(outcome) == {(IN_SET, "within_limit")}


def test_no_input_order_suite_fails_when_the_order_replay_adversary_beats_chance():
    # replaying Rating links 60 % of the cells where chance is 25 % (limit 30 %)
    frame = order_frame(ORDER_COLUMNS_WITHIN_LIMIT, [("education", 0.26, 0.30, 0.25), ("occupation", 0.60, 0.30, 0.25)])
    outcome = validate_frame(frame, suites.no_input_order_suite())
    assert not outcome.success
    assert failed(outcome) == {(IN_SET, "within_limit")}


# --------------------------------------------------------------------------- gate 8: no certain attribute-table cell


def suppressed_cell_frame(attributes: list[tuple[str, int, int]]) -> pd.DataFrame:
    """``suppressed_cell_certainty``: one row per attribute from (name, suppressed cells, candidate values), with the
    documented probability (0 without suppressed cells, 1/candidates, 1 without candidates) and bound 1/ℓ."""
    rows = []
    for attribute, n_suppressed, candidates in attributes:
        probability = 0.0 if n_suppressed == 0 else (1.0 / candidates if candidates else 1.0)
        rows.append(
            {
                "attribute": attribute,
                "n_suppressed_cells": n_suppressed,
                "n_candidate_values": candidates,
                "max_probability": probability,
                "within_bound": probability <= 1.0 / ELL,
            }
        )
    return pd.DataFrame(
        rows, columns=["attribute", "n_suppressed_cells", "n_candidate_values", "max_probability", "within_bound"]
    )


def test_no_certain_cell_suite_passes_when_suppressed_cells_have_at_least_ell_candidates():
    # education: no suppressed cell; occupation: two suppressed cells, each one of ℓ candidate values (1/ℓ, allowed)
    frame = suppressed_cell_frame([("education", 0, 1), ("occupation", 2, ELL)])
    outcome = validate_frame(frame, suites.no_certain_cell_suite())
    assert outcome.success
    assert outcome.failed_expectations == []


def test_no_certain_cell_suite_fails_when_a_suppressed_cell_has_a_single_candidate_value():
    # one value is held by every SID of occupation: a suppressed occupation cell is that value with certainty
    frame = suppressed_cell_frame([("education", 0, 1), ("occupation", 1, 1)])
    outcome = validate_frame(frame, suites.no_certain_cell_suite())
    assert not outcome.success
    assert failed(outcome) == {(IN_SET, "within_bound")}


# --------------------------------------------------------------------------- gate 9: learned-model posterior


def posterior_frame(parts: list[tuple[str, str, int, int, float]]) -> pd.DataFrame:
    """``PosteriorResult.bound``: one row per (part, sensitive attribute) from
    (part, attribute, cells, cells above the bound, largest posterior minus bound)."""
    return pd.DataFrame(
        {
            "part": [part for part, *_ in parts],
            "attribute": [attribute for _, attribute, *_ in parts],
            "n_cells": pd.Series([n for _, _, n, _, _ in parts], dtype="int64"),
            "n_cells_above_bound": pd.Series([above for _, _, _, above, _ in parts], dtype="int64"),
            "max_excess": pd.Series([excess for *_, excess in parts], dtype="float64"),
            "mean_posterior": pd.Series([0.3] * len(parts), dtype="float64"),
            "mean_population_posterior": pd.Series([0.25] * len(parts), dtype="float64"),
        }
    )


def test_posterior_suite_passes_when_no_posterior_exceeds_its_bound():
    frame = posterior_frame(
        [("attribute_table", "education", 40, 0, -0.02), ("sac", "education", 30, 0, -0.1), ("sac", "occupation", 30, 0, 0.0)]
    )
    outcome = validate_frame(frame, suites.posterior_suite())
    assert outcome.success
    assert outcome.failed_expectations == []


def test_posterior_suite_fails_when_a_posterior_exceeds_its_bound():
    # two attribute-table education cells get a posterior 0.2 above max(1/ℓ, population posterior) + slack
    frame = posterior_frame([("attribute_table", "education", 40, 2, 0.2), ("sac", "education", 30, 0, -0.1)])
    outcome = validate_frame(frame, suites.posterior_suite())
    assert not outcome.success
    assert failed(outcome) == {(BETWEEN, "n_cells_above_bound")}


# --------------------------------------------------------------------------- utility gate (every model)


def utility_frame(rows) -> pd.DataFrame:
    """``utility_summary``: (measure, attribute, count, total, limit) per row; share and within_limit derived as
    the core function derives them (share = count / total, within_limit = share <= limit)."""
    frame = pd.DataFrame(rows, columns=["measure", "attribute", "count", "total", "limit"])
    frame = frame.astype({"count": "int64", "total": "int64", "limit": "float64"})
    frame.insert(4, "share", frame["count"] / frame["total"])
    frame["within_limit"] = frame["share"] <= frame["limit"]
    return frame


def test_utility_suite_passes_when_every_share_is_within_its_threshold():
    frame = utility_frame(
        [
            ("deleted_records", "", 9, 100, 0.10),
            ("suppressed_cells", "education", 10, 100, 0.10),
            ("suppressed_cells", "age", 0, 100, 0.10),
        ]
    )
    outcome = validate_frame(frame, suites.utility_suite())
    assert outcome.success
    assert outcome.failed_expectations == []


def test_utility_suite_fails_when_too_many_records_are_deleted():
    frame = utility_frame([("deleted_records", "", 20, 100, 0.10), ("suppressed_cells", "education", 0, 80, 0.10)])
    outcome = validate_frame(frame, suites.utility_suite())
    assert not outcome.success
    assert failed(outcome) == {(IN_SET, "within_limit")}


def test_utility_suite_fails_when_one_attribute_has_too_many_suppressed_cells():
    frame = utility_frame([("deleted_records", "", 0, 100, 0.10), ("suppressed_cells", "occupation", 11, 100, 0.10)])
    outcome = validate_frame(frame, suites.utility_suite())
    assert not outcome.success
    assert failed(outcome) == {(IN_SET, "within_limit")}
