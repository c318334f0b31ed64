"""Release series of the ``sharded_release`` job end to end (issue 17 with issue 12's registry; docs/series.md).

On a 4,000-record sample of Adult at forced small shards (``--shard-rows 2000``: S = 2; ``--shard-rows 100000``: S = 1),
``msa-release run --engine local`` is checked against the home's registry as the in-memory ``release`` job is:

- after an in-memory release, S = 1 with the same settings is the same release (not refused) and registers exactly
  the in-memory job's entry (the same fingerprints with the same release row ids); S = 2 is another release (other
  groups): refused naming the earlier releases, published with ``--allow-recomposition`` and recorded in its manifest;
- a second S = 2 release of the same records and settings is not refused; a subset of the records is, and so is the
  in-memory job's release of the same records (with its measured pins, from the sharded release's files);
- a kill after the registry entry and before the publish leaves an entry without a release: a stricter home (the
  next run of other settings is refused naming it), not a broken one (the next run of the same settings publishes).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from pipeline.cli import main
from pipeline.release.failpoints import ENVIRONMENT_VARIABLE, PAUSE_ENVIRONMENT_VARIABLE
from tests.e2e.test_release_safety import cli_args, write_adult_sample

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
S2 = ("--engine", "local", "--workers", "1", "--shard-rows", "2000", "--min-shard-rows", "1000")
S1 = ("--engine", "local", "--workers", "1", "--shard-rows", "100000", "--min-shard-rows", "1000")


@pytest.fixture
def sample(tmp_path, monkeypatch) -> Path:
    monkeypatch.setenv("MSA_RELEASE_HOME", str(tmp_path / "unused-home"))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "unused-dagster"))
    monkeypatch.setenv("GX_ANALYTICS_ENABLED", "false")
    monkeypatch.delenv(ENVIRONMENT_VARIABLE, raising=False)
    return write_adult_sample(tmp_path / "adult_sample.csv", n_rows=4000)


def _run(sample: Path, home: Path, *extra: str):
    return CliRunner().invoke(main, [*cli_args(sample, home, "--quiet"), *extra])


def _latest(home: Path) -> Path:
    return home / "releases" / (home / "releases" / "LATEST").read_text().strip()


def _manifest(release: Path) -> dict:
    return json.loads((release / "manifest.json").read_text())


def _entry_pairs(home: Path, release_id: str) -> list[tuple[int, int]]:
    table = pq.read_table(home / "registry" / f"{release_id}.parquet")
    return sorted(zip(table.column("fingerprint").to_pylist(), table.column("row_id").to_pylist(), strict=True))


def _said(outcome) -> str:
    return " ".join(outcome.output.split())


def test_a_sharded_release_is_checked_against_an_in_memory_one(sample, tmp_path):
    home = tmp_path / "home"
    memory = _run(sample, home)
    assert memory.exit_code == 0, memory.output
    memory_id = _latest(home).name

    # S = 1 reproduces the in-memory release: the same release, not refused, the same registry entry
    one = _run(sample, home, *S1)
    assert one.exit_code == 0, one.output
    one_release = _latest(home)
    assert one_release.name != memory_id and _manifest(one_release)["recomposition"] == []
    memory_pairs, one_pairs = _entry_pairs(home, memory_id), _entry_pairs(home, one_release.name)
    assert one_pairs == memory_pairs
    n_records = _manifest(one_release)["n_input"] - _manifest(one_release)["n_dropped_missing"]
    assert len(memory_pairs) == n_records  # every record, published or deleted
    published = sorted(row_id for _, row_id in memory_pairs if row_id)
    manifest = _manifest(one_release)
    assert published == list(range(1, manifest["n_sac_released"] + manifest["n_attribute_table"] + 1))

    # S = 2 with another ℓ: refused, naming both earlier releases; nothing published
    refused = _run(sample, home, *S2, "--ell", "2")
    assert refused.exit_code == 1, refused.output
    said = _said(refused)
    assert "would compose with 2 earlier release(s)" in said and "--allow-recomposition" in said
    assert (
        f"release {memory_id} holds {n_records} of the same records with other settings (ell, n_shards, shard_assignment)" in said
    )
    assert one_release.name in said and "not measured for a sharded release" in said
    assert _latest(home) == one_release and len(list((home / "registry").glob("*.parquet"))) == 2

    allowed = _run(sample, home, *S2, "--ell", "2", "--allow-recomposition")
    assert allowed.exit_code == 0, allowed.output
    manifest = _manifest(_latest(home))
    assert manifest["allow_recomposition"] is True and manifest["sharding"]["n_shards"] == 2
    assert sorted(manifest["recomposition"], key=lambda r: r["release_id"]) == [
        {
            "release_id": release_id,
            "n_shared_records": n_records,
            "n_only_new": 0,
            "n_only_earlier": 0,
            "changed_settings": ["ell", "n_shards", "shard_assignment"],
            "same_input_file": True,
        }
        for release_id in sorted((memory_id, one_release.name))
    ]
    entry = pq.read_table(home / "registry" / f"{manifest['release_id']}.parquet")
    configuration = json.loads(entry.schema.metadata[b"msa_release.configuration"])
    assert configuration["n_shards"] == 2 and configuration["ell"] == 2
    assert entry.schema.metadata[b"msa_release.area"] == b"releases"
    row_ids = sorted(r for r in entry.column("row_id").to_pylist() if r)
    assert row_ids == list(range(1, manifest["n_sac_released"] + manifest["n_attribute_table"] + 1))


def test_a_sharded_series_refuses_other_records_not_the_same_release(sample, tmp_path):
    home = tmp_path / "home"
    first = _run(sample, home, *S2)
    assert first.exit_code == 0, first.output
    first_id = _latest(home).name
    again = _run(sample, home, *S2, "--seed", "5")  # the same records, settings and S (another seed only permutes)
    assert again.exit_code == 0, again.output
    assert _manifest(_latest(home))["recomposition"] == []

    subset = tmp_path / "adult_subset.csv"
    pd.read_csv(sample).iloc[:3600].to_csv(subset, index=False)
    refused = _run(subset, home, *S2)
    assert refused.exit_code == 1, refused.output
    said = _said(refused)
    assert "would compose with 2 earlier release(s)" in said and f"release {first_id} holds" in said
    assert "0 new," in said and "no longer present" in said

    # the in-memory job of the same records is refused by the sharded releases, and measures what intersecting it with
    # them would pin from their part files and the row ids their entries hold
    memory = _run(sample, home)
    assert memory.exit_code == 1, memory.output
    said = _said(memory)
    assert f"release {first_id} holds" in said and "other settings (n_shards, shard_assignment)" in said
    assert f"intersected with release {first_id}, it would pin the whole sensitive tuple of" in said


def test_a_kill_after_the_registry_entry_leaves_a_stricter_home(sample, tmp_path):
    home = tmp_path / "home"
    first = _run(sample, home, *S2)
    assert first.exit_code == 0, first.output
    previous = _latest(home)
    environment = {k: v for k, v in os.environ.items() if k not in ("DAGSTER_HOME", PAUSE_ENVIRONMENT_VARIABLE)}
    environment.update(
        MSA_RELEASE_HOME=str(home), GX_ANALYTICS_ENABLED="false", **{ENVIRONMENT_VARIABLE: "sharded_publish.registry_written"}
    )
    killed = subprocess.run(
        [sys.executable, "-c", "from pipeline.cli import main; main()", *cli_args(sample, home, "--quiet"), *S2, "--seed", "9"],
        cwd=ROOT,
        env=environment,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert killed.returncode == -9, killed.stderr[-2000:]
    entries = sorted(p.stem for p in (home / "registry").glob("*.parquet"))
    assert len(entries) == 2 and previous.name in entries
    (orphan,) = [e for e in entries if e != previous.name]
    assert _latest(home) == previous and not (home / "releases" / orphan).exists()

    # stricter: another ℓ is refused naming the unpublished entry too; not broken: the same settings publish
    refused = _run(sample, home, *S2, "--ell", "2")
    assert refused.exit_code == 1 and f"release {orphan} holds" in _said(refused), refused.output
    # the refusal says which earlier release is not in the home and what to do if it was never published
    assert f"Release(s) {orphan} are not in this home's releases/ or comparisons/" in _said(refused)
    assert f"Release(s) {previous.name}" not in _said(refused)
    assert "move registry/<release_id>.parquet out of the registry" in _said(refused)
    again = _run(sample, home, *S2)
    assert again.exit_code == 0, again.output
    assert _latest(home) != previous and _manifest(_latest(home))["recomposition"] == []
