"""``msa-release run``'s option parsing (click's CliRunner): options the chosen model does not read, values out of
range and unknown models are refused as usage errors (exit status 2) before anything runs."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

import pipeline.cli.run as run_command
from pipeline.cli import main
from pipeline.cli.common import build_settings_config, parse_weights


@pytest.fixture
def nothing_runs(monkeypatch):
    """Fail the test if the command gets as far as reading the input."""

    def refuse(*args, **kwargs):
        raise AssertionError("the command read its input although its options were refused")

    monkeypatch.setattr(run_command, "preflight", refuse)


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        (["--model", "kl", "--seed", "3"], "--seed: not used by --model kl"),
        (["--model", "rating", "--k", "3"], "--k: not used by --model rating (a setting of --model kl)"),
        (
            ["--model", "kl", "--grouping", "p1", "--min-support", "3"],
            "--min-support, --grouping: not used by --model kl (a setting of --model mixed, rating)",
        ),
        (["--max-block-size", "8"], "--max-block-size: not used by --model mixed (a setting of --model kl)"),
        (["--model", "foo"], "'foo' is not one of 'mixed', 'rating', 'kl'"),
        (["--ell", "1"], "1 is not in the range x>=2"),
        (["--min-confidence", "0"], "--min-confidence"),
        (["--input", "x.csv"], "with --input, name the columns"),
        # issue 14: a seed the manifest's 64-bit column cannot hold failed only at publish
        (["--seed", str(2**70)], "--seed"),
        (["--seed", str(2**63)], "0<=x<=9223372036854775807"),
        (["--min-support", str(2**64)], "--min-support"),
        # issue 14: NaN passes every comparison of a range (--wait-timeout nan waited forever)
        (["--wait", "--wait-timeout", "nan"], "'nan' is not a finite number"),
        (["--wait", "--wait-timeout", "inf"], "'inf' is not a finite number"),
        (["--wait", "--wait-timeout", "-1"], "-1.0 is not in the range x>=0"),
        (["--min-confidence", "nan"], "'nan' is not a finite number"),
        (["--posterior-slack", "NaN"], "'NaN' is not a finite number"),
        (["--stratum-deletion-budget", "nan"], "'nan' is not a finite number"),
        (["--confidence-tolerance", "-inf"], "--confidence-tolerance"),
        # issue 15: the utility gate's thresholds are shares in [0, 1]
        (["--max-deleted-share", "1.5"], "--max-deleted-share"),
        (["--max-suppressed-share", "nan"], "'nan' is not a finite number"),
    ],
    ids=[
        "kl-seed",
        "rating-k",
        "kl-grouping",
        "mixed-max-block-size",
        "unknown-model",
        "ell-1",
        "min-confidence-0",
        "input-without-columns",
        "seed-2^70",
        "seed-2^63",
        "min-support-2^64",
        "wait-timeout-nan",
        "wait-timeout-inf",
        "wait-timeout-negative",
        "min-confidence-nan",
        "posterior-slack-nan",
        "stratum-deletion-budget-nan",
        "confidence-tolerance-minus-inf",
        "max-deleted-share-1.5",
        "max-suppressed-share-nan",
    ],
)
def test_refused_options_exit_2_before_anything_runs(nothing_runs, tmp_path, arguments, expected):
    outcome = CliRunner().invoke(main, ["run", *arguments, "--home", str(tmp_path / "home")])
    assert outcome.exit_code == 2, outcome.output
    assert expected in outcome.output


def test_options_left_out_keep_the_defaults():
    config = build_settings_config(
        input_path=None,
        input_format=None,
        header=None,
        column_names=None,
        delimiter=None,
        quasi_identifiers=None,
        sensitive_attributes=None,
        ell=4,
        min_confidence=None,
        seed=None,
        missing_tokens=None,
        confidence_tolerance=None,
        model="rating",
    )
    assert config == {"ell": 4, "model": "rating"}


def test_generalization_weights_are_parsed_and_refused_when_malformed():
    assert parse_weights("sex=2, race=0.5") == {"sex": 2.0, "race": 0.5}
    with pytest.raises(Exception, match="not name=number"):
        parse_weights("sex")
    with pytest.raises(Exception, match="given twice"):
        parse_weights("sex=1,sex=2")


def test_the_largest_seed_is_accepted_and_the_settings_bound_it_too():
    """The settings (Dagster launchpad, inbox) refuse what the CLI refuses: seed and min_support fit a BIGINT."""
    from pydantic import ValidationError

    from pipeline.resources import ReleaseSettings
    from pipeline.settings import MAX_SEED

    assert MAX_SEED == 2**63 - 1
    assert ReleaseSettings(seed=MAX_SEED).seed == MAX_SEED
    for field in ("seed", "min_support"):
        with pytest.raises(ValidationError, match=field):
            ReleaseSettings(**{field: 2**70})


def test_the_utility_thresholds_reach_the_settings():
    config = build_settings_config(
        input_path=None,
        input_format=None,
        header=None,
        column_names=None,
        delimiter=None,
        quasi_identifiers=None,
        sensitive_attributes=None,
        ell=None,
        min_confidence=None,
        seed=None,
        missing_tokens=None,
        confidence_tolerance=None,
        max_deleted_share=0.25,
        max_suppressed_share=0.05,
    )
    assert config == {"max_deleted_share": 0.25, "max_suppressed_share": 0.05}


def test_the_utility_failure_text_names_the_shares_the_thresholds_and_what_to_do():
    """Figures as the gate reports them (``utility_figures``): 6,084 of 30,718 records deleted (19.8 %) and 12 of 40
    cells of education suppressed (30 %), both above 0.1."""
    from pipeline.cli.common import utility_failure_explanation

    text = utility_failure_explanation(
        {
            "records_eligible": 30718,
            "records_deleted": 6084,
            "deleted_share": 6084 / 30718,
            "suppressed_cells": {"education": 12, "age": 0},
            "attribute_cells": {"education": 40, "age": 40},
            "suppressed_share": {"education": 0.3, "age": 0.0},
            "max_deleted_share": 0.1,
            "max_suppressed_share": 0.1,
        }
    )
    assert "6084 of 30718 eligible records would be deleted (19.8 %, above --max-deleted-share 0.1)" in text
    assert "12 of 40 cells of education would be suppressed (30.0 %, above --max-suppressed-share 0.1)" in text
    assert "age" not in text  # within its threshold
    # the thresholds that would accept this loss: the shares rounded up to a whole percent
    assert "pass --max-deleted-share 0.2 --max-suppressed-share 0.3 (recorded" in text
    assert "lower --ell" in text and "raise --min-confidence" in text
