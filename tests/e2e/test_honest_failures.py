"""Honest failures (issue 14, "Medium"): every way a run can fail on the machine rather than on the data gets one
clear line with the cause and what to do, and the right exit status, through the real ``msa-release run``
(in-process via click's CliRunner, as ``tests/e2e/test_bad_input.py``); never a bare "NO release published", a raw
traceback or minutes of retries.

Catalogue (test: situation -> behaviour)

======================================  ================================================================================
shared_home                             --home an existing 1777 directory -> its mode (sticky bit) kept, a warning
                                        naming the mode and ``chmod 700``
======================================  ================================================================================
"""

from __future__ import annotations

import csv
import os
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner

from pipeline.cli import main

STANDARD = ("--quasi-identifiers", "q", "--sensitive-attributes", "a,b", "--ell", "2")
DIVERSE = [["1", "x", "p"], ["2", "y", "q"], ["3", "z", "r"]]


def write_csv(path: Path, header: list[str], rows: list[list[str]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(header)
        writer.writerows(rows)
    return path


def invoke_run(home: Path, *arguments: str, **kwargs):
    return CliRunner().invoke(main, ["run", *arguments, "--home", str(home)], **kwargs)


@pytest.fixture
def cli_environment(tmp_path, monkeypatch):
    """The CLI writes MSA_RELEASE_HOME and DAGSTER_HOME into os.environ; restore them afterwards."""
    monkeypatch.setenv("MSA_RELEASE_HOME", str(tmp_path / "unused-home"))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "unused-dagster"))
    monkeypatch.setenv("GX_ANALYTICS_ENABLED", "false")
    return tmp_path


def test_an_existing_shared_home_keeps_its_mode_and_the_cli_warns(cli_environment):
    """``--home`` on a shared directory (mode 1777, like /tmp): never re-moded, one warning naming the mode."""
    home = cli_environment / "shared"
    home.mkdir()
    os.chmod(home, 0o1777)
    (home / "releases").write_text("a file\n")  # the run stops right after taking the home (exit 2), nothing runs
    outcome = invoke_run(home, "--input", str(write_csv(cli_environment / "t.csv", ["q", "a", "b"], DIVERSE)), *STANDARD)
    assert outcome.exit_code == 2, outcome.output
    assert stat.S_IMODE(home.stat().st_mode) == 0o1777
    assert outcome.output.count("accessible to other users (mode 1777)") == 1, outcome.output
    assert f"chmod 700 {home}" in outcome.output
