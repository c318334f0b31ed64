"""Issue 15, a real ``msa-release run`` on 1,500 Adult records: a progress line per step with its seconds (default),
``--quiet`` printing the summary alone, the run's tags in the Dagster instance, the report's path and the drops per
missing column in the summary, and ``msa-release list`` after it."""

from __future__ import annotations

import csv
import re
from pathlib import Path

import dagster as dg
import pytest
from click.testing import CliRunner

from pipeline.cli import main
from tests.conftest import ADULT_COLUMNS

QUASI_IDENTIFIERS = "sex,race,marital-status,native-country,workclass"
SENSITIVE_ATTRIBUTES = "education,occupation,age,relationship"
N_RECORDS = 1500


@pytest.fixture(scope="module")
def table(tmp_path_factory) -> Path:
    """The first 1,500 Adult records with a header row (occupation is '?' in some of them)."""
    source = Path(__file__).resolve().parents[2] / "data" / "adult" / "adult.data"
    lines = source.read_text().splitlines()[:N_RECORDS]
    path = tmp_path_factory.mktemp("run-output") / "adult-sample.csv"
    path.write_text(",".join(ADULT_COLUMNS) + "\n" + "\n".join(lines) + "\n")
    return path


def _missing_per_attribute(path: Path) -> dict[str, int]:
    """Records whose sensitive value is the token '?' or empty, per attribute, counted here from the file."""
    counts = dict.fromkeys(SENSITIVE_ATTRIBUTES.split(","), 0)
    with path.open(newline="") as handle:
        for row in csv.DictReader(handle):
            for attribute in counts:
                if row[attribute].strip() in ("", "?", "NULL"):
                    counts[attribute] += 1
    return {attribute: n for attribute, n in counts.items() if n}


def _run(table: Path, home: Path, *extra: str):
    return CliRunner().invoke(
        main,
        [
            "run",
            "--input",
            str(table),
            "--quasi-identifiers",
            QUASI_IDENTIFIERS,
            "--sensitive-attributes",
            SENSITIVE_ATTRIBUTES,
            "--ell",
            "2",
            "--home",
            str(home),
            *extra,
        ],
        catch_exceptions=False,
    )


@pytest.fixture
def cli_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("MSA_RELEASE_HOME", str(tmp_path / "unused-home"))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "unused-dagster"))
    monkeypatch.setenv("GX_ANALYTICS_ENABLED", "false")
    return tmp_path


def test_default_run_prints_every_step_with_its_seconds_and_tags_the_run(table, cli_environment):
    home = cli_environment / "home"
    outcome = _run(table, home)
    assert outcome.exit_code == 0, outcome.output
    steps = [line for line in outcome.stderr.splitlines() if line.startswith("msa-release: step ")]
    done = re.compile(r"^msa-release: step (\S+) done in \d+\.\d s \((\d+) steps done, \d+ s in all\)$")
    finished = [done.match(line) for line in steps]
    assert all(finished), steps
    names = [match.group(1) for match in finished if match]
    # every step of the job, however short, once each, numbered in order: the default job, sharded_release (issue 17)
    assert {"sharded_input", "publish_sharded_release", "audit__sharded_release_disclosure"} <= set(names), names
    assert len(names) == len(set(names)) and [int(m.group(2)) for m in finished if m] == list(range(1, len(names) + 1))
    # the summary: report.html's path and the drops per missing column
    release = (home / "releases" / (home / "releases" / "LATEST").read_text().strip()).resolve()
    assert f"  report         {release / 'report.html'}" in outcome.stdout.splitlines()
    missing = _missing_per_attribute(table)
    assert missing, "the sample must have missing sensitive values"
    detail = ", ".join(f"{attribute} {n}" for attribute, n in missing.items())
    assert f"dropped (missing sensitive value: {detail})" in outcome.stdout
    # the run's tags, read from the instance of the home
    with dg.DagsterInstance.from_config(str(home / "dagster")) as instance:
        runs = instance.get_runs()
    assert len(runs) == 1
    tags = runs[0].tags
    assert tags["msa_release/input"] == "adult-sample.csv"
    assert tags["msa_release/model"] == "mixed"
    assert tags["msa_release/ell"] == "2" and tags["msa_release/min_confidence"] == "0.8"
    assert str(table.parent) not in " ".join(tags.values())
    # msa-release list: the one release, its input and ℓ, LATEST
    listing = CliRunner().invoke(main, ["list", "--home", str(home)])
    assert listing.exit_code == 0, listing.output
    row = listing.output.splitlines()[1].split()
    assert row[:5] == [release.name, "mixed", "adult-sample.csv", "2", "passed"] and row[-1] == "LATEST"


def test_quiet_prints_the_summary_only(table, cli_environment):
    home = cli_environment / "home"
    home.mkdir(mode=0o700)  # a private home: a shared one gets a warning line
    outcome = _run(table, home, "--quiet")
    assert outcome.exit_code == 0, outcome.output
    assert outcome.stderr == ""
    assert outcome.stdout.startswith("Published release ")
    assert outcome.output == outcome.stdout
