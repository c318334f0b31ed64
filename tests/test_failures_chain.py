"""``pipeline.failures.structured_failures``: the failure Dagster stores keeps the project's own errors in its chain
and drops a library's error, whose message can quote the input (DuckDB's CSV errors quote the offending line)."""

from __future__ import annotations

import dagster as dg
import pytest

from pipeline.failures import structured_failures, without_foreign_causes
from pipeline.io.loading import InputError


def chain(error: BaseException | None) -> list[BaseException]:
    found = []
    while error is not None and error not in found:
        found.append(error)
        error = error.__cause__ if error.__cause__ is not None else (None if error.__suppress_context__ else error.__context__)
    return found


def test_a_library_error_under_the_projects_error_is_not_kept():
    with pytest.raises(dg.Failure) as raised:
        with structured_failures(file="input.csv"):
            try:
                raise ValueError("CSV Error on Line: 11 | Original Line: Male,QQSECRETQQ")
            except ValueError as error:
                raise InputError("input.csv, line 11: the line cannot be parsed; check the quoting") from error
    kept = chain(raised.value)
    assert [type(e).__name__ for e in kept] == ["Failure", "InputError"]
    assert all("QQSECRETQQ" not in str(e) for e in kept)
    assert raised.value.description == "input.csv, line 11: the line cannot be parsed; check the quoting"


def test_an_implicit_context_is_dropped_too():
    with pytest.raises(dg.Failure) as raised:
        with structured_failures():
            try:
                raise KeyError("QQSECRETQQ")
            except KeyError:
                raise InputError("input.csv: a value is not in the hierarchy")  # noqa: B904  (the implicit context)
    kept = chain(raised.value)
    assert [type(e).__name__ for e in kept] == ["Failure", "InputError"]
    assert all("QQSECRETQQ" not in str(e) for e in kept)


def test_the_projects_errors_and_os_errors_stay_in_the_chain():
    inner = OSError(28, "No space left on device", "/home/x")
    middle = InputError("input.csv: cannot be staged")
    middle.__cause__ = inner
    outer = InputError("input.csv: nothing is published")
    outer.__cause__ = middle
    assert chain(without_foreign_causes(outer)) == [outer, middle, inner]
    below = ValueError("QQSECRETQQ")
    inner.__cause__ = below
    assert chain(without_foreign_causes(outer)) == [outer, middle, inner]
