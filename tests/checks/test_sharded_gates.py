"""The gates of a sharded release (checks/sharded_gates.py) on hand-made S-row summary frames and reduced figures: each
passes on a consistent candidate and fails on a deliberately broken one (a lost record, a reduce that failed, a
missing gate, too many deletions), with today's figure names in its metadata."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from checks.sharded_gates import SHARDED_GATES, evaluate_sharded_gate
from pipeline.engines.summaries import release_totals, summary_frame
from pipeline.resources import ReleaseSettings

SETTINGS = ReleaseSettings(sensitive_attributes=["education", "occupation"], quasi_identifiers=["sex"], max_deleted_share=0.10)
ATTRIBUTES = list(SETTINGS.sensitive_attributes)


def _order_partial(*, abs_spearman: float = 0.01, correct: int = 20) -> dict:
    """Gate 7's partial of a shard (pipeline.core.sharding._order_partial's keys): 60 attacked cells per attribute, a
    candidate of 3 per cell (chance 20 correct, variance 60·(1/3)(2/3) = 13.3, so the limit is 20 + 4·3.65 = 34.6)."""
    return {
        "spearman": [
            {"column": "sac_released.row_id", "abs_spearman": abs_spearman, "limit": 0.2, "passed": abs_spearman <= 0.2},
            {"column": "attribute_table.row_id", "abs_spearman": 0.02, "limit": 0.25, "passed": True},
        ],
        "order_replay": {
            a: {"cells": 60, "correct": correct, "expected_correct": 20.0, "variance_correct": 60 * 2 / 9} for a in ATTRIBUTES
        },
    }


def _posterior_partial(*, n_cells_above_bound: int = 0) -> dict:
    """Gate 9's partial of a shard (pipeline.core.sharding._posterior_partial's counted keys)."""
    return {
        "n_records": 95,
        "n_cells": 190,
        "n_cells_above_bound": n_cells_above_bound,
        "n_records_above_bound": n_cells_above_bound,
        "max_excess": 0.1 if n_cells_above_bound else -0.05,
        "histogram": [0, 0, 10, 180, 0, 0, 0, 0, 0, 0],
    }


def _shard(shard: int, n_records: int, n_sac: int, n_at: int, n_deleted: int, partials: dict | None = None) -> dict:
    return {
        "shard": shard,
        "counts": {
            "n_records": n_records,
            "n_sac_released": n_sac,
            "n_attribute_table": n_at,
            "n_deleted": n_deleted,
            "n_groups": n_sac // 3,
            "n_sids": {"education": 3, "occupation": 3},
            "n_suppressed_cells": {"education": 0, "occupation": 0},
        },
        "partials": {
            "release_carries_no_input_order": _order_partial(),
            "posterior_within_bound": _posterior_partial(),
        }
        if partials is None
        else partials,
    }


def _candidate(frame: pd.DataFrame, reduced: dict, *, n_input: int, n_dropped: int = 0) -> pd.DataFrame:
    totals = release_totals(frame, ATTRIBUTES)
    return pd.DataFrame(
        [
            {
                "n_input": n_input,
                "n_dropped_missing": n_dropped,
                "n_shards": totals["n_shards"],
                **{k: totals[k] for k in ("n_records", "n_sac_released", "n_attribute_table", "n_deleted", "n_groups")},
                "n_suppressed_cells": totals["n_suppressed_cells"],
                "suppressed_cells": json.dumps(totals["suppressed_cells"]),
                "n_sids": json.dumps(totals["n_sids"]),
                "reduced_gates": json.dumps(reduced),
            }
        ]
    )


FRAME = summary_frame([_shard(0, 100, 30, 65, 5), _shard(1, 100, 33, 63, 4)], ATTRIBUTES)
PASSING = {name: {"passed": True, "n_groups": 21, "max_disclosure_probability": 1 / 3} for name in SHARDED_GATES}


@pytest.mark.parametrize("name", list(SHARDED_GATES))
def test_every_gate_passes_on_a_consistent_candidate(name):
    result = evaluate_sharded_gate(name, SETTINGS, FRAME, _candidate(FRAME, PASSING, n_input=203, n_dropped=3))
    assert result.passed, result.metadata
    assert result.metadata["n_shards"].value == 2
    assert result.metadata["failed_expectations"].value == "none"


def test_a_gate_whose_reduce_failed_fails_with_the_reduced_figures():
    reduced = {**PASSING, "disclosure_within_bound": {"passed": False, "max_disclosure_probability": 0.5}}
    result = evaluate_sharded_gate("disclosure_within_bound", SETTINGS, FRAME, _candidate(FRAME, reduced, n_input=200))
    assert not result.passed
    assert result.metadata["max_disclosure_probability"].value == 0.5
    assert "expect_column_values_to_be_in_set" in result.metadata["failed_expectations"].value


def test_a_gate_the_reduce_did_not_report_fails_and_says_so():
    reduced = {k: v for k, v in PASSING.items() if k != "no_probability_tilt"}
    result = evaluate_sharded_gate("no_probability_tilt", SETTINGS, FRAME, _candidate(FRAME, reduced, n_input=200))
    assert not result.passed
    assert "gave no figures for no_probability_tilt" in result.metadata["reason"].value


def test_accounting_fails_when_a_shard_loses_a_record_even_if_the_reduce_passed():
    broken = summary_frame([_shard(0, 100, 30, 65, 5), _shard(1, 100, 33, 63, 3)], ATTRIBUTES)  # 99 placed of 100
    result = evaluate_sharded_gate("records_accounted_for", SETTINGS, broken, _candidate(broken, PASSING, n_input=200))
    assert not result.passed
    assert result.metadata["n_deleted"].value == 8


def test_accounting_fails_when_the_shards_do_not_add_up_to_the_input():
    result = evaluate_sharded_gate("records_accounted_for", SETTINGS, FRAME, _candidate(FRAME, PASSING, n_input=205))
    assert not result.passed
    assert "totals_add_up" in result.metadata["failed_expectations"].value


def test_the_utility_gate_counts_deletions_over_all_shards():
    # 9 deleted of 200 eligible: 4.5 % passes at 10 %, fails at 4 %
    candidate = _candidate(FRAME, PASSING, n_input=200)
    passed = evaluate_sharded_gate("utility_within_thresholds", SETTINGS, FRAME, candidate)
    assert passed.passed
    assert passed.metadata["records_deleted"].value == 9
    assert passed.metadata["deleted_share"].value == pytest.approx(0.045)
    strict = SETTINGS.model_copy(update={"max_deleted_share": 0.04})
    assert not evaluate_sharded_gate("utility_within_thresholds", strict, FRAME, candidate).passed


def test_a_summary_frame_with_a_missing_shard_fails_every_gate():
    candidate = _candidate(FRAME, PASSING, n_input=200)
    candidate["n_shards"] = 3  # the plan said three shards, two came back
    assert not evaluate_sharded_gate("sac_released_is_l_diverse", SETTINGS, FRAME, candidate).passed


def test_the_shard_summary_suite_wants_every_shard_once():
    from checks import suites
    from checks.gx_runner import validate_frame

    good = pd.DataFrame({"shard": [0, 1, 2], "n_records": [5, 6, 7], "n_deleted": [0, 1, 0]})
    assert validate_frame(good, suites.shard_summary_suite(n_shards=3)).success
    repeated = good.assign(shard=[0, 1, 1])
    assert not validate_frame(repeated, suites.shard_summary_suite(n_shards=3)).success
    assert not validate_frame(good, suites.shard_summary_suite(n_shards=4)).success  # a shard missing
    negative = good.assign(n_deleted=[0, -1, 0])
    assert not validate_frame(negative, suites.shard_summary_suite(n_shards=3)).success


def test_the_shard_accounting_and_reduced_suites_pass_and_fail():
    from checks import suites
    from checks.gx_runner import validate_frame

    assert validate_frame(pd.DataFrame({"accounted": [True, True]}), suites.shard_accounting_suite()).success
    assert not validate_frame(pd.DataFrame({"accounted": [True, False]}), suites.shard_accounting_suite()).success
    assert validate_frame(pd.DataFrame({"passed": [True]}), suites.reduced_gate_suite("g")).success
    assert not validate_frame(pd.DataFrame({"passed": [False]}), suites.reduced_gate_suite("g")).success
    assert not validate_frame(pd.DataFrame({"passed": [True, True]}), suites.reduced_gate_suite("g")).success


# --------------------------------------------------------------------------- gates 7 and 9, per shard


def _frame_with(shard_one: dict) -> pd.DataFrame:
    return summary_frame([_shard(0, 100, 30, 65, 5), _shard(1, 100, 33, 63, 4, partials=shard_one)], ATTRIBUTES)


def test_gate_7_runs_the_release_jobs_suite_on_every_shards_columns():
    passing = evaluate_sharded_gate("release_carries_no_input_order", SETTINGS, FRAME, _candidate(FRAME, PASSING, n_input=200))
    assert passing.passed
    expectations = passing.metadata["gx_expectations"].value
    in_set = [e for e in expectations if e.get("column") == "within_limit"]
    # 2 shards x 2 columns, 1 pooled row per attribute, and 1 row per shard and attribute (each shard's own replay)
    assert len(in_set) == 1 and in_set[0]["element_count"] == 2 * 2 + len(ATTRIBUTES) + 2 * len(ATTRIBUTES)
    # one shard's SAC~ row ids follow its input order: the suite fails although the candidate's reduce said "passed"
    frame = _frame_with(
        {**_shard(1, 100, 33, 63, 4)["partials"], "release_carries_no_input_order": _order_partial(abs_spearman=0.9)}
    )
    failed = evaluate_sharded_gate("release_carries_no_input_order", SETTINGS, frame, _candidate(frame, PASSING, n_input=200))
    assert not failed.passed
    assert "expect_column_values_to_be_in_set" in failed.metadata["failed_expectations"].value


def test_gate_7_adds_the_order_replay_guesses_up_over_the_shards():
    # 33 of 60 correct is within one shard's limit (34.6); the pooled limit of 2 shards is (40 + 4·5.16) / 120 = 0.505,
    # and 33 + 33 = 66 of 120 (0.55) is above it: pooling the shards' guesses makes the test stricter, not weaker
    partials = {**_shard(1, 100, 33, 63, 4)["partials"], "release_carries_no_input_order": _order_partial(correct=33)}
    alone = summary_frame([_shard(0, 95, 30, 65, 0, partials=partials)], ATTRIBUTES)
    assert evaluate_sharded_gate("release_carries_no_input_order", SETTINGS, alone, _candidate(alone, PASSING, n_input=95)).passed
    frame = summary_frame(
        [_shard(0, 100, 30, 65, 5, partials=partials), _shard(1, 100, 33, 63, 4, partials=partials)], ATTRIBUTES
    )
    failed = evaluate_sharded_gate("release_carries_no_input_order", SETTINGS, frame, _candidate(frame, PASSING, n_input=200))
    assert not failed.passed


def test_gate_9_fails_on_a_shard_above_the_bound_and_warn_only_warns():
    from dagster import AssetCheckSeverity

    frame = _frame_with(
        {**_shard(1, 100, 33, 63, 4)["partials"], "posterior_within_bound": _posterior_partial(n_cells_above_bound=2)}
    )
    candidate = _candidate(frame, PASSING, n_input=200)  # even with a reduce that said "passed"
    blocked = evaluate_sharded_gate("posterior_within_bound", SETTINGS, frame, candidate)
    assert not blocked.passed and blocked.severity == AssetCheckSeverity.ERROR
    assert blocked.metadata["posterior_gate"].value == "block"
    warned = evaluate_sharded_gate(
        "posterior_within_bound", SETTINGS.model_copy(update={"posterior_gate": "warn"}), frame, candidate
    )
    assert not warned.passed and warned.severity == AssetCheckSeverity.WARN
    passing = evaluate_sharded_gate("posterior_within_bound", SETTINGS, FRAME, _candidate(FRAME, PASSING, n_input=200))
    assert passing.passed


def test_warn_does_not_soften_a_missing_shard():
    from dagster import AssetCheckSeverity

    candidate = _candidate(FRAME, PASSING, n_input=200)
    candidate["n_shards"] = 3
    result = evaluate_sharded_gate(
        "posterior_within_bound", SETTINGS.model_copy(update={"posterior_gate": "warn"}), FRAME, candidate
    )
    assert not result.passed and result.severity == AssetCheckSeverity.ERROR


@pytest.mark.parametrize("name", ["release_carries_no_input_order", "posterior_within_bound"])
def test_gates_7_and_9_without_the_shards_partials_fail_and_say_so(name):
    frame = summary_frame([_shard(0, 100, 30, 65, 5, partials={}), _shard(1, 100, 33, 63, 4, partials={})], ATTRIBUTES)
    result = evaluate_sharded_gate(name, SETTINGS, frame, _candidate(frame, PASSING, n_input=200))
    assert not result.passed
    assert "cannot be evaluated" in result.metadata["reason"].value


def test_gate_3_above_the_bound_blocks_unless_allow_disclosure_and_then_only_warns():
    """The release job's gate 3 (checks/gates.py) fails with WARN severity when ``allow_disclosure`` accepts the
    disclosure; the sharded gate did not (session 39's note): it blocked, so the default engine refused what the
    documented setting publishes as a comparison. A shard missing is never only a warning."""
    from dagster import AssetCheckSeverity

    above = {**PASSING, "disclosure_within_bound": {"passed": False, "max_disclosure_probability": 0.9}}
    candidate = _candidate(FRAME, above, n_input=200)
    blocked = evaluate_sharded_gate("disclosure_within_bound", SETTINGS, FRAME, candidate)
    assert not blocked.passed and blocked.severity == AssetCheckSeverity.ERROR
    assert blocked.metadata["overridden_by_allow_disclosure"].value is False
    allowed = SETTINGS.model_copy(update={"allow_disclosure": True})
    warned = evaluate_sharded_gate("disclosure_within_bound", allowed, FRAME, candidate)
    assert not warned.passed and warned.severity == AssetCheckSeverity.WARN
    assert warned.metadata["overridden_by_allow_disclosure"].value is True
    assert warned.metadata["max_disclosure_probability"].value == 0.9
    passing = evaluate_sharded_gate("disclosure_within_bound", allowed, FRAME, _candidate(FRAME, PASSING, n_input=200))
    assert passing.passed and passing.metadata["overridden_by_allow_disclosure"].value is False
    missing_shard = _candidate(FRAME, above, n_input=200)
    missing_shard["n_shards"] = 3
    result = evaluate_sharded_gate("disclosure_within_bound", allowed, FRAME, missing_shard)
    assert not result.passed and result.severity == AssetCheckSeverity.ERROR
