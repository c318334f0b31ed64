"""What reading the input changed is reported on both engines (red team, session 39): the look-alike spellings merged
before diversity is counted and the missing quasi-identifier values kept as ``?``, counts only, in the manifest and
the command's summary. Before, the default engine dropped both (the README said "both counts are reported")."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from pipeline.cli import main
from pipeline.release.publish import read_latest
from pipeline.resources import ADULT_COLUMNS

ROOT = Path(__file__).resolve().parents[2]


def _adult_with_changes(path: Path, n_records: int = 4000) -> tuple[int, int]:
    """Adult's first records with 'husband' for every 4th Husband and the workclass of every 50th record emptied;
    returns (records respelled, workclass values emptied)."""
    with (ROOT / "data" / "adult" / "adult.data").open() as source:
        rows = [[cell.strip() for cell in line.split(",")] for line in source if line.strip()][:n_records]
    relationship, workclass = ADULT_COLUMNS.index("relationship"), ADULT_COLUMNS.index("workclass")
    respelled = emptied = 0
    for index, row in enumerate(rows):
        if row[relationship] == "Husband" and index % 4 == 0:
            row[relationship], respelled = "husband", respelled + 1
        if index % 50 == 0:
            row[workclass], emptied = "", emptied + (row[workclass] not in ("", "?"))
    with path.open("w", newline="") as target:
        csv.writer(target, lineterminator="\n").writerows([ADULT_COLUMNS, *rows])
    return respelled, emptied


@pytest.mark.parametrize("engine", ["local", "memory"])
def test_look_alikes_and_missing_quasi_identifiers_are_reported(tmp_path, engine):
    path = tmp_path / "adult.csv"
    respelled, _ = _adult_with_changes(path)
    assert respelled > 0
    home = tmp_path / "home"
    arguments = [
        "run", "--input", str(path), "--quasi-identifiers", "sex,race,workclass",
        "--sensitive-attributes", "education,occupation,relationship", "--ell", "2", "--max-deleted-share", "1",
        "--engine", engine, "--home", str(home),
    ]  # fmt: skip
    outcome = CliRunner().invoke(main, arguments, env={"MSA_RELEASE_HOME": str(home), "DAGSTER_HOME": str(home / "dagster")})
    assert outcome.exit_code == 0, outcome.output
    manifest = json.loads((read_latest(home / "releases") / "manifest.json").read_text())
    assert manifest["look_alike_spellings_merged"] == {"relationship": 1}
    # Adult's own '?' workclass values and the emptied ones, each a missing quasi-identifier value published as '?'
    with path.open() as source:
        expected_missing = sum(
            1 for row in csv.DictReader(source) if row["workclass"] in ("", "?") and row["occupation"] not in ("", "?")
        )
    assert manifest["missing_quasi_identifier_by_column"] == {"workclass": expected_missing}
    assert "look-alike spellings merged into another before counting diversity" in outcome.output
    assert "relationship 1" in outcome.output and "husband" not in outcome.output
    assert f"missing quasi-identifier values kept as '?': workclass {expected_missing}" in outcome.output
