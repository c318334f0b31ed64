"""Fixtures of the engines' tests: the sharding core's key and plan replaced by small stand-ins (tests/engines/shard_fakes.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipeline.core import sharding
from tests.engines import shard_fakes

from tests.engines.shard_fakes import QUASI_IDENTIFIERS, SENSITIVE_ATTRIBUTES

__all__ = ["QUASI_IDENTIFIERS", "SENSITIVE_ATTRIBUTES"]

#: a.csv (3 rows read, the 2nd misses a sensitive value), b.csv (4 rows), in that record order
CSV_A = "sex,zip,disease,job\nF,100,flu,nurse\nM,101,,clerk\nF,?,HIV,nurse\n"
CSV_B = "sex,zip,disease,job\nM,100,flu,cook\nF,102,hiv,cook\nM,101,hiv,nurse\nF,100,cold,clerk\n"


@pytest.fixture
def fake_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """shard_of and plan_shards replaced by the reference key and S = ceil(n / shard_rows)."""
    monkeypatch.setattr(sharding, "shard_of", shard_fakes.reference_shard_of)
    monkeypatch.setattr(sharding, "plan_shards", shard_fakes.plan_stand_in)


@pytest.fixture
def two_files(tmp_path: Path) -> Path:
    """A directory with b.csv, a.csv and a file that is not input."""
    directory = tmp_path / "delivery"
    directory.mkdir()
    (directory / "b.csv").write_text(CSV_B)
    (directory / "a.csv").write_text(CSV_A)
    (directory / "notes.md").write_text("not a table\n")
    return directory
