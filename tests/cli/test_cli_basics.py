"""Issue 15: ``msa-release --version``, ``-h`` as ``--help`` on the group and every command, ``msa-release list``, the run
tags of a release run, and the options of ``run``'s output (``--quiet``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from importlib import metadata
from pathlib import Path

import pytest
from click.testing import CliRunner

import pipeline.cli.run as run_command
from pipeline.cli import main
from pipeline.run_events import release_run_tags


def test_version_prints_the_installed_package_version():
    outcome = CliRunner().invoke(main, ["--version"])
    assert outcome.exit_code == 0, outcome.output
    assert outcome.output.strip() == f"msa-release {metadata.version('msa-release')}"


@pytest.mark.parametrize("command", [[], *([name] for name in sorted(main.commands))], ids=lambda c: " ".join(c) or "group")
def test_h_is_help_on_the_group_and_every_command(command):
    short = CliRunner().invoke(main, [*command, "-h"])
    long = CliRunner().invoke(main, [*command, "--help"])
    assert short.exit_code == 0, short.output
    assert short.output.startswith("Usage: ") and short.output == long.output
    assert "-h, --help" in short.output


def test_run_h_lists_quiet_and_progress():
    outcome = CliRunner().invoke(main, ["run", "-h"])
    assert outcome.exit_code == 0
    assert "--quiet" in outcome.output and "--progress / --no-progress" in outcome.output


def test_quiet_and_progress_together_are_a_usage_error(tmp_path, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the command went on although its options contradict each other")

    monkeypatch.setattr(run_command, "preflight", refuse)
    outcome = CliRunner().invoke(main, ["run", "--quiet", "--progress", "--home", str(tmp_path / "home")])
    assert outcome.exit_code == 2, outcome.output
    assert "--progress and --quiet" in outcome.output


# ------------------------------------------------------------------------------------------------ run tags


def test_run_tags_name_the_input_file_only_and_the_parameters():
    tags = release_run_tags(
        {"input_path": "/home/alice/secret-project/patients.csv", "ell": 4, "min_confidence": 0.75, "csv_header": True}
    )
    assert tags == {
        "msa_release/input": "patients.csv",
        "msa_release/model": "mixed",
        "msa_release/ell": "4",
        "msa_release/min_confidence": "0.75",
    }
    assert "alice" not in json.dumps(tags)


def test_run_tags_of_the_defaults_and_of_the_kl_model():
    assert release_run_tags({})["msa_release/input"] == "adult.data"
    kl = release_run_tags({"model": "kl", "k": 5, "ell": 2})
    assert kl["msa_release/model"] == "kl" and kl["msa_release/k"] == "5" and kl["msa_release/ell"] == "2"
    assert "msa_release/min_confidence" not in kl  # the (k, ℓ) model reads no min_confidence


def test_the_schedule_and_the_inbox_tag_their_runs(tmp_path):
    from pipeline.jobs import build_release_schedule, inbox_run_request

    schedule = build_release_schedule("0 3 * * 1", "UTC")
    assert schedule.tags["msa_release/input"] == "adult.data" and schedule.tags["msa_release/ell"] == "3"
    data = tmp_path / "ward 7.csv"
    data.write_text("q,a,b\n1,x,y\n")
    request = inbox_run_request(
        data, {"quasi_identifiers": ["q"], "sensitive_attributes": ["a", "b"], "ell": 2, "min_confidence": 0.9}, sha256="0" * 64
    )
    assert request.tags["msa_release/input"] == "ward 7.csv"
    assert request.tags["msa_release/model"] == "mixed"
    assert request.tags["msa_release/ell"] == "2" and request.tags["msa_release/min_confidence"] == "0.9"
    assert str(tmp_path) not in json.dumps(request.tags)


# ------------------------------------------------------------------------------------------------ msa-release list

OLDER = "20260101T000000Z-aaaaaaaa"
NEWER = "20260102T000000Z-bbbbbbbb"
COMPARED = "20260103T000000Z-cccccccc"


def _write_release(directory: Path, manifest: dict) -> None:
    directory.mkdir(parents=True)
    (directory / "manifest.json").write_text(json.dumps(manifest))


def _home_with_two_releases(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    passed = [{"name": "disclosure_within_bound", "passed": True, "status": "passed"}]
    # an older manifest: no utility, no input_reading (made before either existed)
    _write_release(
        home / "releases" / OLDER,
        {
            "release_id": OLDER,
            "created_at": "2026-01-01T00:00:00+00:00",
            "model": "mixed",
            "ell": 3,
            "n_input": 1000,
            "n_dropped_missing": 100,
            "n_deleted": 90,
            "n_suppressed_cells": 0,
            "checks": passed,
        },
    )
    _write_release(
        home / "releases" / NEWER,
        {
            "release_id": NEWER,
            "created_at": "2026-01-02T00:00:00+00:00",
            "model": "rating",
            "ell": 2,
            "input_reading": {"input_file": "kdd.csv"},
            "n_input": 1000,
            "n_dropped_missing": 0,
            "n_deleted": 5,
            "n_suppressed_cells": 12,
            "utility": {"deleted_share": 0.36, "suppressed_share": {"health": 0.49, "drug": 0.1}},
            "checks": [{"name": "disclosure_within_bound", "passed": False, "status": "failed_overridden"}],
        },
    )
    (home / "releases" / "LATEST").write_text(NEWER + "\n")
    return home


def _lines(home: Path) -> list[list[str]]:
    outcome = CliRunner().invoke(main, ["list", "--home", str(home)])
    assert outcome.exit_code == 0, outcome.output
    return [[cell.strip() for cell in line.split("  ") if cell.strip()] for line in outcome.output.splitlines()]


def test_list_shows_one_line_per_release_with_older_manifests_tolerated(tmp_path):
    home = _home_with_two_releases(tmp_path)
    header, older, newer = _lines(home)
    assert header == ["release", "model", "input", "ell", "verdict", "deleted %", "suppressed %"]
    # older: deleted 90 of 1000 - 100 eligible = 10.0 %; no suppressed cell; no input name recorded
    assert older == [OLDER, "mixed", "-", "3", "passed", "10.0", "0.0"]
    # newer: the utility figures as given (not recomputed from n_deleted), the largest attribute share and LATEST
    assert newer == [NEWER, "rating", "kdd.csv", "2", "overridden", "36.0", "49.0 (health)", "LATEST"]


def test_list_marks_comparison_releases(tmp_path):
    home = _home_with_two_releases(tmp_path)
    _write_release(
        home / "comparisons" / COMPARED,
        {
            "release_id": COMPARED,
            "model": "rating",
            "ell": 3,
            "n_input": 10,
            "n_dropped_missing": 0,
            "n_deleted": 1,
            "n_suppressed_cells": 3,
            "checks": [],
        },
    )
    lines = _lines(home)
    assert lines[-1] == [COMPARED, "rating", "-", "3", "passed", "10.0", "-", "comparison"]
    assert sum("LATEST" in line for line in lines) == 1


def test_list_of_an_empty_home_says_so(tmp_path):
    outcome = CliRunner().invoke(main, ["list", "--home", str(tmp_path / "empty")])
    assert outcome.exit_code == 0 and outcome.output.startswith("no release in ")
    assert not (tmp_path / "empty").exists()  # listing never creates a home


def _console_script(tmp_path: Path, *arguments: str, code: str = "") -> subprocess.CompletedProcess:
    """Run the console script's function (``pipeline.cli:entry_point``, as pyproject.toml installs it) in a fresh
    interpreter, after ``code``."""
    script = f"import sys\n{code}\nfrom pipeline.cli import entry_point\nsys.argv = ['msa-release', *{list(arguments)!r}]\nentry_point()"
    environment = {**os.environ, "MSA_RELEASE_HOME": str(tmp_path / "home"), "GX_ANALYTICS_ENABLED": "false"}
    environment.pop("PYTHONUNBUFFERED", None)  # buffered streams, as a user's shell usually has them
    return subprocess.run([sys.executable, "-c", script], env=environment, capture_output=True, text=True, timeout=120)


def test_the_console_script_keeps_click_exit_statuses_output_and_atexit_handlers(tmp_path):
    """The console script ends with ``os._exit`` after the command (no final garbage collection, issue 18): the
    exit status is still click's (0, 2 for a usage error), output is flushed, and ``atexit`` handlers still run."""
    marker = tmp_path / "atexit-ran"
    at_exit = f"import atexit\natexit.register(lambda: open({str(marker)!r}, 'w').write('yes'))"
    version = _console_script(tmp_path, "--version", code=at_exit)
    assert version.returncode == 0, version.stderr
    assert version.stdout.strip() == f"msa-release {metadata.version('msa-release')}"
    assert marker.read_text() == "yes"
    usage = _console_script(tmp_path, "run", "--ell", "0")
    assert usage.returncode == 2
    assert "--ell" in usage.stderr
    message = _console_script(
        tmp_path, "--version", code="import pipeline.cli.app as app\napp.main = lambda: sys.exit('stopped: a message')"
    )
    assert message.returncode == 1 and "stopped: a message" in message.stderr


def test_the_console_script_keeps_what_atexit_handlers_print_and_waits_for_running_threads(tmp_path):
    """What an ``atexit`` handler prints after the command still reaches a piped stdout, and a thread that is not a
    daemon finishes its work: the script then exits as the interpreter would (review of issue 18's fast exit)."""
    marker = tmp_path / "thread-finished"
    printing = _console_script(tmp_path, "--version", code="import atexit\natexit.register(lambda: print('said at exit'))")
    assert printing.returncode == 0, printing.stderr
    assert printing.stdout.splitlines()[-1] == "said at exit"
    late = (
        "import threading, time\n"
        f"threading.Thread(target=lambda: (time.sleep(0.5), open({str(marker)!r}, 'w').write('done'))).start()"
    )
    threaded = _console_script(tmp_path, "--version", code=late)
    assert threaded.returncode == 0, threaded.stderr
    assert marker.read_text() == "done"
