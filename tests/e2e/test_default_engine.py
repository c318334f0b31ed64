"""Issue 17, "local (default)": a default ``msa-release run`` of the mixed model runs the ``sharded_release`` job on
engine ``local``; Adult (30,718 eligible records, far below ``shard_rows`` 1,000,000) is one shard, whose published
tables equal the in-memory ``release`` job's (``--engine memory``), digest for digest, with the same home secret.
These tests fail on the old default (``memory``): its release has no ``sharding`` section and a ``release.duckdb``."""

from __future__ import annotations

import json

import pytest

# the sharded e2e tests' helpers: a quiet CLI run in a home, its LATEST release, the published tables' digests
from tests.e2e.test_sharded_release import _latest, _published_digests, _run

pytestmark = pytest.mark.e2e


@pytest.mark.slow
def test_a_default_run_publishes_one_shard_with_the_in_memory_releases_tables(tmp_path):
    import duckdb

    home = tmp_path / "home"
    default = _run(home)
    assert default.exit_code == 0, default.output
    assert "shards         S = 1 (engine local, 2 workers; shard_rows 1000000)" in default.output
    sharded = _latest(home)
    manifest = json.loads((sharded / "manifest.json").read_text())
    assert manifest["sharding"]["n_shards"] == 1
    assert manifest["sharding"]["engine"] == "local" and manifest["sharding"]["workers"] == 2
    assert manifest["sharding"]["shard_rows"] == 1_000_000
    assert (sharded / "id_table" / "part-00000.parquet").is_file()
    assert not (sharded / "release.duckdb").exists()
    # the part files are read with DuckDB as the README's Release contract says
    with duckdb.connect() as connection:
        (n_rows,) = connection.execute(f"SELECT count(*) FROM read_parquet('{sharded}/id_table/*.parquet')").fetchone()
    assert n_rows == manifest["sharding"]["parts"]["id_table"][0]["rows"] > 0

    in_memory = _run(home, "--engine", "memory")
    assert in_memory.exit_code == 0, in_memory.output
    unsharded = _latest(home)
    assert unsharded != sharded and (unsharded / "release.duckdb").is_file()
    assert json.loads((unsharded / "manifest.json").read_text())["sharding"] is None
    assert "shards" not in in_memory.output
    assert _published_digests(sharded) == _published_digests(unsharded)
