"""Gate 7 (``release_carries_no_input_order``) of the ``sharded_release`` job against deliberately leaky shard
releases, end to end: ``msa-release run --engine local`` on Adult, after a clean sharded release of the same home.

- the clean release (S = 16: ``--shard-rows 2000 --min-shard-rows 1000``) passes gate 7 and is published;
- ONE shard of those 16 bucketized in one keyed order shared by every attribute, SIDs in creation order (no published
  id follows the input order; injected by replacing ``pipeline.core.sharding.release_shard`` for shard 0, which the
  local executor calls in this process with ``--workers 1``): gate 7 FAILS on that shard's own order replay, the
  pooled figures and every id within their limits (tests/checks/test_sharded_order_leaks.py measures why);
- every shard in its input order (``--randomness spec-reference``), S = 4 and S = 1: gate 7 FAILS;

and each time nothing is published: exit status 1, "NO release published", LATEST and every file of the previous
release unchanged, no staging left behind.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from pipeline.cli import main
from pipeline.core import sharding
from tests.core.sharding_gates import rating_in_one_shared_order

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

LOCAL = ("--engine", "local", "--workers", "1", "--min-shard-rows", "1000")
GATE = "release_carries_no_input_order"


def _run(home: Path, *arguments: str):
    return CliRunner().invoke(main, ["run", "--quiet", "--home", str(home), *arguments])


def _snapshot(home: Path) -> dict[str, str]:
    """LATEST and the SHA-256 of every file under releases/."""
    releases = home / "releases"
    return {
        str(path.relative_to(releases)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(releases.rglob("*"))
        if path.is_file()
    }


def _gate_figures(output: str) -> dict:
    """The figures of gate 7's line in the run's summary (``  gate <name>: FAILED {...}``)."""
    (line,) = [line for line in output.splitlines() if line.strip().startswith(f"gate {GATE}:")]
    return json.loads(line[line.index("{") :])


def _assert_refused_and_nothing_published(home: Path, before: dict[str, str], outcome) -> dict:
    assert outcome.exit_code == 1, outcome.output
    assert f"gate {GATE}: FAILED" in outcome.output
    assert "NO release published" in outcome.output
    assert _snapshot(home) == before  # LATEST and the previous release, byte for byte; no new release directory
    assert not any((home / "private" / "shards").iterdir())
    return _gate_figures(outcome.output)


def test_leaky_sharded_releases_are_refused_by_gate_7_and_the_previous_release_stays(tmp_path, monkeypatch):
    home = tmp_path / "home"
    clean = _run(home, *LOCAL, "--shard-rows", "2000")
    assert clean.exit_code == 0, clean.output
    manifest = json.loads((home / "releases" / (home / "releases" / "LATEST").read_text().strip() / "manifest.json").read_text())
    assert manifest["sharding"]["n_shards"] == 16
    (order,) = [check for check in manifest["checks"] if check["name"] == GATE]
    assert order["passed"] and order["observed"]["n_shard_attributes_above_chance"] == 0
    before = _snapshot(home)
    assert "LATEST" in before

    # one shard of 16 leaks (the real job path: staging, the worker, the summary frame, the reduce, the GX suite)
    release_shard = sharding.release_shard

    def leaky_release_shard(records, model, parameters, *, secret, shard, n_shards):
        if shard != 0:
            return release_shard(records, model, parameters, secret=secret, shard=shard, n_shards=n_shards)
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(sharding, "rating_tables", rating_in_one_shared_order)
            return release_shard(records, model, parameters, secret=secret, shard=shard, n_shards=n_shards)

    with monkeypatch.context() as patch:
        patch.setattr(sharding, "release_shard", leaky_release_shard)
        figures = _assert_refused_and_nothing_published(home, before, _run(home, *LOCAL, "--shard-rows", "2000"))
    assert figures["n_shards_evaluated"] == 16
    assert figures["n_columns_above_limit"] == 0 and figures["n_attributes_above_chance"] == 0  # what pooling shows
    assert figures["n_shard_attributes_above_chance"] >= 1 and figures["max_shard_order_replay_excess"] > 0.1

    # every shard in its input order: S = 4 and S = 1
    for shard_rows, n_shards in (("8000", 4), ("100000", 1)):
        outcome = _run(home, *LOCAL, "--shard-rows", shard_rows, "--randomness", "spec-reference")
        figures = _assert_refused_and_nothing_published(home, before, outcome)
        assert figures["n_shards_evaluated"] == n_shards
        assert figures["max_abs_spearman"] > 0.5 and figures["n_columns_above_limit"] >= 5
        assert figures["n_attributes_above_chance"] == 4 and figures["n_shard_attributes_above_chance"] >= 4
