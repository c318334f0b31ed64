"""Ctrl-C while DuckDB runs a query reaches the step as DuckDB's own error ("RuntimeError: Query interrupted", seen
while the IO manager loaded the publish step's input, session 40), not as Dagster's interrupt: the command names it
as the interruption it is, and leaves every other step failure as it was."""

from __future__ import annotations

import pipeline.failures
from pipeline.cli.common import report_step_failures
from pipeline.failures import StepFailure


def _failure(error_text: str) -> StepFailure:
    return StepFailure("publish_sharded_release", error_text.rsplit(": ", 1)[-1], None, {}, error_text)


def test_duckdb_interrupt_is_reported_as_an_interrupted_run(monkeypatch, capsys):
    interrupted = _failure(
        'DagsterExecutionLoadInputError: Error occurred while loading input "sharded_strong_rules" of step '
        '"publish_sharded_release": RuntimeError: Query interrupted'
    )
    monkeypatch.setattr(pipeline.failures, "step_failures", lambda result: [interrupted])
    report_step_failures(object())
    err = capsys.readouterr().err
    assert "the run was interrupted during step publish_sharded_release (Ctrl-C" in err
    assert "Query interrupted" not in err


def test_another_step_failure_is_reported_as_it_was(monkeypatch, capsys):
    other = _failure("RuntimeError: Conversion Error: could not convert")
    monkeypatch.setattr(pipeline.failures, "step_failures", lambda result: [other])
    report_step_failures(object())
    err = capsys.readouterr().err
    assert "step publish_sharded_release failed: could not convert" in err and "interrupted" not in err
