"""The planning advisor's pure decisions (``pipeline/core/plan.py``): the utility and confidence gates as the release
gates state them, the recommendation, the profile, and the plan's renderings (counts and names only, escaped)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from pipeline.core.plan import (
    Plan,
    PlanRow,
    confidence_gate_passes,
    gate_predictions,
    plan_json,
    plan_markdown,
    plan_text,
    profile_table,
    recommend,
    utility_gate_passes,
)


def _row(
    ell: int, min_confidence: float, deleted: int, *, n: int = 100, refuse: str | None = None, configured=False, rules: int = 2
) -> PlanRow:
    gates = {
        "preflight": "pass",
        "utility_within_thresholds": "pass",
        "rule_confidence_preserved": "pass",
        "disclosure_within_bound": "pass",
        "no_certain_attribute_table_cell": "pass",
    }
    if refuse:
        gates[refuse] = "refuse"
    return PlanRow(
        model="mixed",
        ell=ell,
        min_confidence=min_confidence,
        min_support=5,
        configured=configured,
        n_strong_rules=rules,
        n_rule_holders=10,
        n_rule_holders_released=8,
        n_sac_released=30,
        n_attribute_table=n - 30 - deleted,
        n_deleted=deleted,
        deleted_share=deleted / n,
        suppressed_cells={"disease": 0, "drug": 0},
        suppressed_share={"disease": 0.0, "drug": 0.0},
        max_confidence_deviation=0.0,
        max_disclosure=1 / ell,
        gates=gates,
        refusal=f"{refuse}: …" if refuse else None,
        seconds=0.1,
    )


def test_the_utility_gate_passes_at_its_thresholds_and_refuses_above():
    assert utility_gate_passes(0.10, {"a": 0.10}, max_deleted_share=0.10, max_suppressed_share=0.10)
    assert not utility_gate_passes(0.1001, {"a": 0.0}, max_deleted_share=0.10, max_suppressed_share=0.10)
    # one attribute above its threshold is enough
    assert not utility_gate_passes(0.0, {"a": 0.0, "b": 0.5}, max_deleted_share=0.10, max_suppressed_share=0.10)


def test_the_confidence_gate_needs_exact_rules_only_when_nothing_was_lost():
    summary = pd.DataFrame({"deviation": [0.0, 0.04], "exact": [True, False]})
    assert confidence_gate_passes(summary, exact_required=False, tolerance=0.05)
    assert not confidence_gate_passes(summary, exact_required=True, tolerance=0.05)
    assert not confidence_gate_passes(summary, exact_required=False, tolerance=0.03)
    empty = pd.DataFrame({"deviation": pd.Series(dtype=float), "exact": pd.Series(dtype=bool)})
    assert confidence_gate_passes(empty, exact_required=True, tolerance=0.0)


def _predict(**overrides):
    arguments = dict(
        infeasible=None,
        deleted_share=0.05,
        suppressed_share={"a": 0.0},
        max_deleted_share=0.10,
        max_suppressed_share=0.10,
        confidence_passes=True,
        max_confidence_deviation=0.0,
        confidence_tolerance=0.05,
        disclosure_passes=True,
        max_disclosure=0.5,
        allow_disclosure=False,
        certain_cells_pass=True,
        ell=2,
    )
    arguments.update(overrides)
    return gate_predictions(**arguments)


def test_gate_predictions_name_the_refusing_gate_with_its_figures():
    gates, refusal = _predict()
    assert set(gates.values()) == {"pass"} and refusal is None
    gates, refusal = _predict(deleted_share=0.25)
    assert refusal == "utility_within_thresholds: 25.0 % of records deleted (max 10.0 %)"
    gates, refusal = _predict(suppressed_share={"a": 0.05, "b": 0.5})
    assert refusal == "utility_within_thresholds: 50.0 % of b's cells suppressed (max 10.0 %)"
    gates, refusal = _predict(disclosure_passes=False, max_disclosure=0.76)
    assert gates["disclosure_within_bound"] == "refuse" and "0.760 > 1/ℓ = 0.500" in refusal
    # allow_disclosure: the gate fails with WARN severity and does not block (checks/gates.py)
    gates, refusal = _predict(disclosure_passes=False, max_disclosure=0.76, allow_disclosure=True)
    assert gates["disclosure_within_bound"] == "overridden" and refusal is None
    gates, _ = _predict(confidence_passes=None)
    assert gates["rule_confidence_preserved"] == "n/a"
    gates, refusal = _predict(infeasible="ℓ = 5 is larger than …")
    assert gates["preflight"] == "refuse" and refusal.startswith("preflight: ")
    assert gates["utility_within_thresholds"] == "not predicted"


def test_the_recommendation_never_weakens_the_configured_privacy():
    # Adult's plan (README): the configured ℓ = 3 / 0.8 passes, ℓ = 2 / 0.9 deletes far fewer records; the
    # recommendation is a setting at least as private as the configured one, the weaker one only named as a trade-off
    rows = [
        _row(2, 0.8, 3),
        _row(2, 0.9, 1, rules=1),
        _row(3, 0.7, 20),
        _row(3, 0.8, 20, configured=True),
        _row(3, 0.9, 8, rules=1),
        _row(4, 0.8, 40, refuse="utility_within_thresholds"),
    ]
    line = recommend(rows)
    # 0.7 and 0.8 at ℓ = 3 tie on loss and ℓ, both at least as private: the configured 0.8 is named
    assert line.startswith("Recommended: the configured setting, ℓ = 3, min_confidence 0.8 (20 records deleted (20.0 %)")
    assert "not a recommendation: ℓ = 2, min_confidence 0.9 (1 record deleted (1.0 %)" in line
    assert "bound rises from 1/3 to 1/2" in line and "rules of confidence 0.8 to 0.9 are no longer strong rules" in line
    assert "ℓ = 3, min_confidence 0.9 (8" not in line.split("not a recommendation")[0]
    # the cheapest weaker option at the configured ℓ is named too, with what it gives up
    assert line.endswith(
        "At ℓ = 3: ℓ = 3, min_confidence 0.9 (8 records deleted (8.0 %), no cell suppressed): rules of confidence 0.8 "
        "to 0.9 are no longer strong rules, so no longer bounded (1 strong rule(s) instead of 2)."
    )


def test_a_stronger_setting_with_less_loss_is_recommended():
    rows = [_row(3, 0.8, 20, configured=True), _row(4, 0.8, 10), _row(3, 0.7, 15), _row(2, 0.8, 1)]
    line = recommend(rows)
    assert line.startswith(
        "Recommended: ℓ = 4, min_confidence 0.8 (10 records deleted (10.0 %), no cell suppressed; every predicted gate "
        "passes; at least as private as the configured setting: ℓ ≥ 3 and every strong rule of min_confidence 0.8 bounded)."
    )
    assert "not a recommendation: ℓ = 2, min_confidence 0.8" in line
    # equal loss: the larger ℓ wins
    assert recommend([_row(3, 0.8, 0, configured=True), _row(4, 0.8, 0)]).startswith("Recommended: ℓ = 4")
    # nothing weaker with less loss: no trade-off named
    assert "not a recommendation" not in recommend([_row(3, 0.8, 5, configured=True), _row(2, 0.8, 5)])
    # a higher min_confidence that mines the same rules bounds the same rules: at least as private
    assert recommend([_row(3, 0.8, 20, configured=True), _row(3, 0.9, 8)]).startswith("Recommended: ℓ = 3, min_confidence 0.9")


def test_when_only_weaker_settings_pass_nothing_is_recommended():
    rows = [
        _row(2, 0.9, 1, rules=1),
        _row(3, 0.8, 20, refuse="utility_within_thresholds", configured=True),
        _row(3, 0.9, 8, rules=1),
        _row(4, 0.8, 0, refuse="rule_confidence_preserved"),
    ]
    line = recommend(rows)
    assert line.startswith(
        "No setting passes every predicted gate at the configured privacy or stronger (ℓ ≥ 3 and every strong rule of "
        "min_confidence 0.8 bounded) "
        "(rule_confidence_preserved, utility_within_thresholds)."
    )
    # the closest to the requirement first (ℓ = 3, its one rule), then the least-loss one (ℓ = 2)
    assert "not a recommendation: the closest, ℓ = 3, min_confidence 0.9 (8 records deleted (8.0 %)" in line
    assert "; with the least loss, ℓ = 2, min_confidence 0.9 (1 record deleted (1.0 %)" in line
    assert not line.startswith("Recommended")


def test_a_higher_support_of_a_larger_ell_is_not_at_least_as_private_unless_it_keeps_every_rule():
    # a diff review, session 38: rows of ℓ >= 6 mine at support max(ℓ, 5) = 6 > the configured ℓ = 3's 5; one that lost
    # a rule was called "at least as private" because its min_confidence was no higher
    configured = PlanRow(**{**_row(3, 0.8, 20, refuse="utility_within_thresholds", configured=True, rules=4).__dict__})
    lost = PlanRow(**{**_row(6, 0.8, 10, rules=3).__dict__, "min_support": 6})
    kept = PlanRow(**{**_row(6, 0.8, 10, rules=4).__dict__, "min_support": 6})
    line = recommend([configured, lost])
    assert line.startswith("No setting passes every predicted gate at the configured privacy or stronger")
    assert "rules held by 5 to 6 records are no longer strong rules" in line
    assert recommend([configured, kept]).startswith("Recommended: ℓ = 6, min_confidence 0.8")


def test_spec_reference_randomness_is_told_to_change_randomness_not_ell():
    rows = [_row(ell, 0.8, 1, refuse="release_carries_no_input_order", configured=ell == 3) for ell in (2, 3, 4)]
    line = recommend(rows)
    assert "whatever ℓ or min_confidence: use --randomness home-secret" in line and "try more ℓ" not in line


def test_without_a_passing_setting_the_recommendation_counts_the_refusals():
    rows = [_row(3, 0.8, 30, refuse="utility_within_thresholds"), _row(4, 0.8, 40, refuse="utility_within_thresholds")]
    line = recommend(rows)
    assert line.startswith("No setting passes every predicted gate (utility_within_thresholds refuses 2 of 2)")


def test_the_profile_counts_values_without_naming_them():
    records = pd.DataFrame({"disease": ["flu"] * 3 + ["cold"], "drug": ["a", "b", "c", "d"]})
    profile = profile_table(records, ["disease", "drug"], input_name="t.csv", n_input=6)
    assert (profile.n_input, profile.n_dropped_missing, profile.n_records) == (6, 2, 4)
    assert [(a.attribute, a.distinct_values, a.top_value_share) for a in profile.sensitive] == [
        ("disease", 2, 0.75),
        ("drug", 4, 0.25),
    ]
    assert profile.max_feasible_ell == 2


def _plan(rows) -> Plan:
    records = pd.DataFrame({"![x](http://e/)": ["flu", "cold", "flu"], "drug|x": ["a", "b", "c"]})
    return Plan(
        profile=profile_table(records, list(records.columns), input_name="t.csv", n_input=3),
        rows=tuple(rows),
        max_deleted_share=0.1,
        max_suppressed_share=0.1,
        confidence_tolerance=0.05,
        recommendation=recommend(rows),
        seconds=0.5,
    )


def test_the_renderings_hold_the_rows_and_escape_names():
    plan = _plan([_row(2, 0.8, 3, configured=True), _row(3, 0.8, 20, refuse="utility_within_thresholds")])
    text = plan_text(plan)
    assert "predicted verdict" in text and "* ℓ = 2, min_confidence 0.8" in text
    assert "REFUSED: utility_within_thresholds" in text and "planned in 0.5 s" in text
    markdown = plan_markdown(plan)
    # a column name with markup is shown as text: no image, no extra table cell
    assert "![x](http://e/)" not in markdown and "\\!\\[x\\]\\(http\\:\\/\\/e\\/\\)" in markdown
    assert "drug\\|x" in markdown
    document = json.loads(plan_json(plan))
    assert [row["n_deleted"] for row in document["rows"]] == [3, 20]
    assert [row["passes"] for row in document["rows"]] == [True, False]


@pytest.mark.parametrize("share, shown", [(0.0, "0 %"), (0.0004, "<0.1 %"), (0.199, "19.9 %")])
def test_shares_are_percentages(share, shown):
    row = _row(2, 0.8, 0)
    row = PlanRow(**{**row.__dict__, "deleted_share": share, "n_deleted": 7})
    assert f"7 ({shown})" in plan_text(_plan([row]))


def test_in_table_order_is_the_keyed_order_restricted_to_each_part():
    """The order the release job's assets and the plan both consume records in (pipeline.core.mixed_model)."""
    import numpy as np

    from pipeline.core.mixed_model import in_table_order, keyed_table_order

    records = pd.DataFrame({"row_id": np.arange(10, 30, dtype=np.int64), "a": [str(i % 7) for i in range(20)]})
    parts = [np.array([12, 15, 29, 20]), np.array([11, 10])]
    assert [p.tolist() for p in in_table_order(records, parts, ["a"], None)] == [[12, 15, 29, 20], [11, 10]]
    secret = bytes(range(32))
    order = records["row_id"].to_numpy()[keyed_table_order(records, ["a"], secret)].tolist()
    ordered = in_table_order(records, parts, ["a"], secret)
    assert [p.tolist() for p in ordered] == [sorted(p.tolist(), key=order.index) for p in parts]


def test_a_setting_that_passes_only_by_an_override_is_never_recommended():
    # plan --model rating --allow-disclosure on Adult: every row "publishes (overridden: disclosure_within_bound)"
    overridden = [_row(2, 0.9, 1), _row(3, 0.8, 20, configured=True)]
    for row in overridden:
        row.gates["disclosure_within_bound"] = "overridden"
    line = recommend(overridden)
    assert line.startswith("No setting passes every predicted gate without an override (disclosure_within_bound in 2 of 2)")
    assert "Nothing is recommended" in line and "Recommended:" not in line
    # beside a setting that keeps the bound, the overridden one is not a candidate, even with less loss
    line = recommend([overridden[0], _row(3, 0.8, 20, configured=True)])
    assert line.startswith("Recommended: the configured setting, ℓ = 3") and "ℓ = 2" not in line
