"""Publishing a sharded release from private part files, and reading it back (issue 17, pipeline/release/sharded_publish.py).

The private parts and summaries are written by the fakes of ``tests/release/sharded_release.py`` (example A released
per shard); the expected united tables are computed there in pandas, independently of the DuckDB copy.
"""

from __future__ import annotations

import json
from pathlib import Path

import duckdb
import pandas as pd
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from pipeline.cli import main
from pipeline.release.audit import AuditError, read_release, run_audit, table_digests
from pipeline.release.publish import list_releases, publish_release, read_latest
from pipeline.release.sharded_publish import ShardPartError, file_sha256, publish_sharded_release, sharding_manifest
from tests.release.sharded_release import (
    SCHEMAS,
    SENSITIVE_ATTRIBUTES,
    example_release,
    fake_offsets,
    sharded_manifest,
    united_tables,
    write_private_parts,
    write_raw_table,
)

R0, R1, R2 = "20261126T000000Z-aaaaaaaa", "20261126T000001Z-bbbbbbbb", "20261126T000002Z-cccccccc"


def make_shards(tmp_path: Path, n_shards: int = 3):
    # different seeds: the shards' SAC~ permutations differ, so the order of the parts matters
    shards = [example_release(seed=s) for s in range(n_shards)]
    output_dir = tmp_path / "private" / "output"
    summaries = write_private_parts(output_dir, shards)
    return shards, output_dir, summaries, fake_offsets(summaries)


def publish(releases: Path, release_id: str, output_dir: Path, summaries, offsets, shards, **options) -> Path:
    return publish_sharded_release(
        releases,
        release_id,
        output_dir=output_dir,
        summaries=summaries,
        offsets=offsets,
        schemas=SCHEMAS,
        manifest=sharded_manifest(release_id, summaries),
        attribute_clusters=shards[0].attribute_clusters,
        **options,
    )


def test_parts_hold_the_united_ids_and_the_contract_types(tmp_path):
    shards, output_dir, summaries, offsets = make_shards(tmp_path)
    release = publish(tmp_path / "releases", R0, output_dir, summaries, offsets, shards, extra_files={"report.json": b"{}"})
    assert read_latest(tmp_path / "releases") == release
    assert sorted(p.name for p in release.iterdir()) == [
        "attribute_clusters.parquet",
        "attribute_table",
        "id_table",
        "manifest.json",
        "release_manifest.parquet",
        "report.json",
        "sac_released",
    ]
    expected = united_tables(shards, offsets)
    for table in ("sac_released", "attribute_table", "id_table"):
        parts = sorted((release / table).iterdir())
        assert [p.name for p in parts] == ["part-00000.parquet", "part-00001.parquet", "part-00002.parquet"]
        types = duckdb.sql(f"DESCRIBE SELECT * FROM read_parquet('{parts[0]}')").fetchall()
        assert [(name, kind) for name, kind, *_ in types] == list(SCHEMAS[table].items())
        published = pd.concat([pd.read_parquet(p) for p in parts], ignore_index=True)
        pd.testing.assert_frame_equal(published.astype(object), expected[table].astype(object), check_dtype=False)
    # 8 SAC~ and 8 attribute-table rows per shard: SAC~ rows 1..24 first, then the attribute-table rows 25..48; 4
    # groups per shard: 1..12; 4 SIDs per attribute and shard: 1..12
    sac = pd.concat([pd.read_parquet(p) for p in sorted((release / "sac_released").iterdir())])
    at = pd.concat([pd.read_parquet(p) for p in sorted((release / "attribute_table").iterdir())])
    assert sorted(sac["row_id"]) == list(range(1, 25)) and sorted(at["row_id"]) == list(range(25, 49))
    assert sorted(sac["group_id"].unique()) == list(range(1, 13))
    id_table = pd.concat([pd.read_parquet(p) for p in sorted((release / "id_table").iterdir())])
    for attribute in SENSITIVE_ATTRIBUTES:
        assert sorted(id_table.loc[id_table["attribute"] == attribute, "sid"].unique()) == list(range(1, 13))


def test_the_manifest_lists_every_part_with_its_rows_and_digest_and_the_sharding(tmp_path):
    shards, output_dir, summaries, offsets = make_shards(tmp_path)
    release = publish(tmp_path / "releases", R0, output_dir, summaries, offsets, shards)
    manifest = json.loads((release / "manifest.json").read_text())
    sharding = manifest["sharding"]
    assert {k: sharding[k] for k in ("n_shards", "shard_rows", "engine", "workers")} == {
        "n_shards": 3,
        "shard_rows": 16,
        "engine": "local",
        "workers": 2,
    }
    assert sharding["per_shard"] == {"n_records": [16, 16], "n_deleted": [0, 0], "n_suppressed_cells": [0, 0]}
    assert "salt" not in json.dumps(sharding)
    for table in ("sac_released", "attribute_table", "id_table"):
        listed = sharding["parts"][table]
        assert [p["path"] for p in listed] == [f"{table}/part-{s:05d}.parquet" for s in range(3)]
        for part in listed:
            assert part["sha256"] == file_sha256(release / part["path"])
            assert part["rows"] == pq.ParquetFile(release / part["path"]).metadata.num_rows
    row = pq.read_table(release / "release_manifest.parquet").to_pylist()[0]
    assert json.loads(row["sharding"]) == sharding
    # written last among the release's files (before the extra files)
    times = {p.relative_to(release).as_posix(): p.stat().st_mtime_ns for p in release.rglob("*.parquet")}
    assert max(times.values()) <= (release / "manifest.json").stat().st_mtime_ns
    assert times["release_manifest.parquet"] >= max(v for k, v in times.items() if "/" in k)


def test_sharding_manifest_spreads_records_deletions_and_suppressions():
    summaries = [
        {"shard": 0, "counts": {"n_records": 10, "n_deleted": 2, "n_suppressed_cells": {"a": 1, "b": 3}}},
        {"shard": 1, "counts": {"n_records": 7, "n_deleted": 0, "n_suppressed_cells": {"a": 0, "b": 0}}},
        {"shard": 2, "counts": {"n_records": 9, "n_deleted": 5, "n_suppressed_cells": {"a": 2, "b": 0}}},
    ]
    assert sharding_manifest(summaries, shard_rows=10, engine="spark", workers=4) == {
        "n_shards": 3,
        "shard_rows": 10,
        "engine": "spark",
        "workers": 4,
        "per_shard": {"n_records": [7, 10], "n_deleted": [0, 5], "n_suppressed_cells": [0, 4]},
    }


@pytest.mark.parametrize("damage", ["bytes", "rows", "missing"])
def test_a_part_that_differs_from_its_summary_is_refused_and_nothing_is_published(tmp_path, damage):
    shards, output_dir, summaries, offsets = make_shards(tmp_path)
    releases = tmp_path / "releases"
    previous = publish(releases, R0, output_dir, summaries, offsets, shards)
    part = output_dir / "attribute_table" / "part-00001.parquet"
    if damage == "bytes":  # same rows, other content
        frame = pd.read_parquet(part)
        frame["Country"] = frame["Country"].iloc[::-1].to_numpy()
        frame.to_parquet(part, index=False)
        match = "SHA-256 of the private part of shard 1, table attribute_table"
    elif damage == "rows":
        pd.read_parquet(part).head(3).to_parquet(part, index=False)
        match = "holds 3 rows, its shard summary says 8"
    else:
        part.unlink()
        match = "the private part of shard 1, table attribute_table is missing"
    with pytest.raises(ShardPartError, match=match) as raised:
        publish(releases, R1, output_dir, summaries, offsets, shards)
    assert "part-00001.parquet" in str(raised.value)
    assert str(raised.value.file).endswith("attribute_table/part-00001.parquet") and raised.value.exit_status == 1
    assert read_latest(releases) == previous and list_releases(releases) == [previous]
    assert sorted(p.name for p in releases.iterdir()) == sorted(["LATEST", R0])


def test_a_part_with_other_columns_is_refused_during_the_copy_and_nothing_is_published(tmp_path):
    shards, output_dir, summaries, offsets = make_shards(tmp_path, n_shards=2)
    part = output_dir / "id_table" / "part-00001.parquet"
    pd.read_parquet(part).rename(columns={"count": "n"}).to_parquet(part, index=False)
    summaries[1]["parts"]["id_table"]["sha256"] = file_sha256(part)  # a worker that wrote the wrong columns
    releases = tmp_path / "releases"
    with pytest.raises(ShardPartError, match="has the columns .* not the contract's"):
        publish(releases, R1, output_dir, summaries, offsets, shards)
    assert sorted(p.name for p in releases.iterdir()) == []


def test_summaries_offsets_and_manifest_must_fit_together(tmp_path):
    shards, output_dir, summaries, offsets = make_shards(tmp_path, n_shards=2)
    releases = tmp_path / "releases"
    with pytest.raises(ShardPartError, match="2 shard summaries, 1 offsets"):
        publish(releases, R0, output_dir, summaries, offsets[:1], shards)
    with pytest.raises(ShardPartError, match="shard order"):
        publish(releases, R0, output_dir, summaries[::-1], offsets, shards)
    escaping = json.loads(json.dumps(summaries))
    escaping[0]["parts"]["id_table"]["path"] = "../../elsewhere.parquet"
    with pytest.raises(ShardPartError, match="leaves the staging output directory"):
        publish(releases, R0, output_dir, escaping, offsets, shards)
    manifest = sharded_manifest(R0, summaries)
    manifest["n_sac_released"] = 5
    with pytest.raises(ValueError, match="n_sac_released = 5 differs from the 16 rows"):
        publish_sharded_release(
            releases,
            R0,
            output_dir=output_dir,
            summaries=summaries,
            offsets=offsets,
            schemas=SCHEMAS,
            manifest=manifest,
            attribute_clusters=shards[0].attribute_clusters,
        )
    assert not releases.exists() or sorted(p.name for p in releases.iterdir()) == []


def test_a_comparison_does_not_move_latest_and_retention_prunes_sharded_releases(tmp_path):
    shards, output_dir, summaries, offsets = make_shards(tmp_path, n_shards=2)
    releases = tmp_path / "releases"
    first = publish(releases, R0, output_dir, summaries, offsets, shards)
    publish(releases, R1, output_dir, summaries, offsets, shards, update_latest=False)
    assert read_latest(releases) == first
    publish(releases, R2, output_dir, summaries, offsets, shards, keep_releases=1)
    assert [p.name for p in list_releases(releases)] == [R2]


# ------------------------------------------------------------------------------------------------
# reading it back


def test_read_release_reads_the_parts_in_shard_order(tmp_path):
    shards, output_dir, summaries, offsets = make_shards(tmp_path)
    release = read_release(publish(tmp_path / "releases", R0, output_dir, summaries, offsets, shards))
    expected = united_tables(shards, offsets)
    for table in ("sac_released", "attribute_table", "id_table"):
        pd.testing.assert_frame_equal(getattr(release, table).astype(object), expected[table].astype(object), check_dtype=False)
    assert release.attribute_table[SENSITIVE_ATTRIBUTES[0]].dtype == "Int32"


@pytest.mark.parametrize("n_shards", [1, 3])
def test_the_same_table_content_has_the_same_digest_in_one_file_or_in_parts(tmp_path, n_shards):
    shards, output_dir, summaries, offsets = make_shards(tmp_path, n_shards)
    sharded = read_release(publish(tmp_path / "sharded", R0, output_dir, summaries, offsets, shards))
    united = united_tables(shards, offsets)
    manifest = {k: v for k, v in sharded_manifest(R0, summaries).items() if k != "sharding"}
    single = read_release(
        publish_release(
            tmp_path / "single",
            R0,
            {**united, "attribute_clusters": shards[0].attribute_clusters},
            SCHEMAS,
            manifest,
        )
    )
    tables = ("sac_released", "attribute_table", "id_table", "attribute_clusters")
    digests = table_digests({t: getattr(sharded, t) for t in tables})
    assert digests == table_digests({t: getattr(single, t) for t in tables})
    if n_shards == 1:  # one shard: no offset, the worker's tables themselves
        local = {t: getattr(shards[0], t)[list(SCHEMAS[t])] for t in tables}
        assert digests == table_digests(local)
    # and the digest sees the rows' order: the SAC~ rows rotated give another digest
    rotated = pd.concat([united["sac_released"].iloc[4:], united["sac_released"].iloc[:4]], ignore_index=True)
    assert table_digests({"sac_released": rotated})["sac_released"] != digests["sac_released"]


def test_a_part_missing_from_the_release_is_reported(tmp_path):
    shards, output_dir, summaries, offsets = make_shards(tmp_path, n_shards=2)
    release = publish(tmp_path / "releases", R0, output_dir, summaries, offsets, shards)
    (release / "id_table" / "part-00001.parquet").unlink()
    with pytest.raises(AuditError, match="differ from those manifest.json lists"):
        read_release(release)


def test_the_audit_and_the_report_work_on_a_sharded_release(tmp_path):
    shards, output_dir, summaries, offsets = make_shards(tmp_path, n_shards=2)
    home = tmp_path / "home"
    release = publish(home / "releases", R0, output_dir, summaries, offsets, shards)
    raw = write_raw_table(tmp_path / "raw.csv", n_shards=2)
    result = run_audit(release, raw)
    assert result.report.verdict == "PASS", result.report.reasons
    assert result.report.adversary.n_released_records == 32 and result.report.adversary.max_probability == "1/2"
    assert result.report.structure.record_counts_match_manifest and result.report.structure.n_groups == 8
    outcome = CliRunner().invoke(main, ["audit", str(release), "--raw", str(raw), "--output", str(tmp_path / "a.json")])
    assert outcome.exit_code == 0, outcome.output
    assert "PASS" in outcome.output
    outcome = CliRunner().invoke(main, ["report", str(home / "releases")])
    assert outcome.exit_code == 0, outcome.output
    page = (release / "report.html").read_text()
    assert "Sharding" in page and "2 shards" in page


def test_the_report_section_shows_the_shards_and_their_spread_and_nothing_when_unsharded():
    from pipeline.reporting.release_report import sharding_section

    sharding = {
        "n_shards": 12,
        "shard_rows": 1_000_000,
        "engine": "spark",
        "workers": 4,
        "per_shard": {"n_records": [999_871, 1_000_000], "n_deleted": [0, 1_234], "n_suppressed_cells": [17, 20_480]},
    }
    page = sharding_section({"sharding": sharding})
    assert "12 shards" in page and "up to 1,000,000 records each" in page and "engine spark" in page and "4 workers" in page
    assert '<td>deleted records</td><td class="number">0</td><td class="number">1,234</td>' in page
    assert "999,871" in page and "20,480" in page
    # gates 7 and 9 are per shard (red team, session 40: the page claimed every gate for the whole release)
    assert "gates 7 (input order) and 9 (learned-model adversary) are measured on each shard on its own" in page
    assert "attacks one shard at a time" in page and "hold for the whole release" in page
    one = sharding_section({"sharding": {**sharding, "n_shards": 1}})
    assert "every release gate (below) was measured on the whole release" in one and "one shard at a time" not in one
    # a comparison whose gate failed and an override accepted it (diff review, session 40): that gate does not hold
    overridden = sharding_section(
        {"sharding": sharding, "checks": [{"name": "disclosure_within_bound", "status": "failed_overridden"}]}
    )
    assert "except what failed: disclosure_within_bound" in overridden
    assert "except what failed" not in page
    assert sharding_section({"sharding": None}) == "" and sharding_section({}) == ""
