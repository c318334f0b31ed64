"""Gate 9 of the in-memory jobs (checks/gates.py posterior_within_bound) gives the learned-model adversary's fit two
threads on a machine with two cores or more (its two held-out folds; the result is the same, tested in
tests/core/test_posterior_on_adult.py), one on a single core."""

from __future__ import annotations

import pandas as pd
import pytest

import checks.gates as gates
from pipeline.resources import ReleaseSettings


class _Asked(Exception):
    """Raised by the stand-in adversary with the threads it was asked for."""


@pytest.mark.parametrize(("cores", "expected"), [(2, 2), (8, 2), (1, 1), (None, 1)])
def test_the_in_memory_gate_9_uses_two_threads_when_there_are_two_cores(monkeypatch, cores, expected):
    def asked(*args, **kwargs):
        raise _Asked(kwargs.get("threads"))

    monkeypatch.setattr(gates.posterior_adversary, "release_posteriors", asked)
    monkeypatch.setattr(gates.os, "cpu_count", lambda: cores)
    settings = ReleaseSettings(quasi_identifiers=["q"], sensitive_attributes=["a", "b"], ell=2)
    empty = pd.DataFrame({"row_id": pd.Series([], dtype="int64"), "a": [], "b": []})
    with pytest.raises(_Asked) as raised:
        gates.posterior_within_bound(
            settings=settings,
            sac_released=empty,
            raw_records=empty,
            release_row_map=pd.DataFrame({"source_row_id": [], "row_id": []}),
            attribute_table=empty,
            id_table=pd.DataFrame({"attribute": [], "sid": [], "value": [], "count": []}),
            attribute_clusters=pd.DataFrame({"cluster_id": [], "attribute": []}),
        )
    assert raised.value.args == (expected,)
