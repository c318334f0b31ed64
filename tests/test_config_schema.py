"""Issue 13: the Dagster config schema itself refuses unknown choices, so the launchpad shows the error before a
run starts (instead of "No errors" and a failed run)."""

from __future__ import annotations

import dagster as dg
import pytest

from pipeline.definitions import build_definitions


@pytest.mark.parametrize(
    "key,bad,good",
    [("model", "foo", "rating"), ("grouping", "qi-aware", "p1"), ("residual_policy", "drop", "suppress"),
     ("posterior_gate", "ignore", "warn"), ("kl_method", "fast", "greedy")],
)
def test_unknown_choices_are_config_errors_before_launch(tmp_path, key, bad, good):
    job = build_definitions(tmp_path / "home").resolve_job_def("release")
    with pytest.raises(dg.DagsterInvalidConfigError, match=key):
        dg.validate_run_config(job, {"resources": {"settings": {"config": {key: bad}}}})
    assert dg.validate_run_config(job, {"resources": {"settings": {"config": {key: good}}}})
    assert not (tmp_path / "home").exists()  # validating a config creates nothing
