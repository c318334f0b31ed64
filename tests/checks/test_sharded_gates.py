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


def _shard(shard: int, n_records: int, n_sac: int, n_at: int, n_deleted: int) -> dict:
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
        "partials": {},
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
