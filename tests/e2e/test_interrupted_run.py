"""Ctrl-C during ``msa-release run`` (a red team's case): the command says which step was running when it was
interrupted, not "the run stopped before its first step" (which it said after five steps had finished), publishes
nothing, leaves no private staging behind and exits 1. The command runs as a user runs it: a process of its own, SIGINT sent once the shard step is
done (the gates step is then running)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]


def test_ctrl_c_names_the_step_that_was_running_and_publishes_nothing(tmp_path):
    home = tmp_path / "home"
    dagster_home = tmp_path / "dagster"
    dagster_home.mkdir()
    (dagster_home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    environment = {
        **os.environ,
        "MSA_RELEASE_HOME": str(home),
        "DAGSTER_HOME": str(dagster_home),
        "GX_ANALYTICS_ENABLED": "false",
    }
    command = [str(Path(sys.executable).with_name("msa-release")), "run", "--max-deleted-share", "0.25", "--progress"]
    process = subprocess.Popen(
        command,
        cwd=ROOT,
        env=environment,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # a shell's child gets Ctrl-C's default
    )
    seen = []
    assert process.stderr is not None
    for line in process.stderr:
        seen.append(line)
        if "step private__shard_summaries done" in line:
            process.send_signal(signal.SIGINT)
            break
    seen.append(process.stderr.read())
    status = process.wait(timeout=120)
    output = "".join(seen)
    assert "step private__shard_summaries done" in output, output
    assert status == 1, output
    assert "NO release published" in output
    assert "the run was interrupted during step " in output and "before its first step" not in output, output
    assert "Query interrupted" not in output, output  # DuckDB's error for the interrupt is named as the interrupt
    assert not (home / "releases" / "LATEST").exists()
    # the interrupted step skips the job's failure hook; the command removes the run's private staging (every input
    # record) itself, not the home's next run (session 40: it stayed on disk)
    staging = home / "private" / "shards"
    assert not staging.exists() or not any(staging.iterdir()), list(staging.iterdir())
