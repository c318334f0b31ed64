"""Issue 17: the out-of-core audit of a sharded release (``pipeline.release.sharded_audit``) on Adult.

One sharded release of Adult (``--engine local --workers 2 --shard-rows 8000``: S = 4) is audited twice: by today's
whole-frame audit (``run_audit``: ``read_release`` concatenates the parts) and part by part (``msa-release audit``,
which takes the part path for a part layout). Every figure must agree (floats to 1e-9); the part path must never hold
two parts at once, nor call ``read_release``.
"""

from __future__ import annotations

import gc
import json
import weakref
from pathlib import Path

import pytest
from click.testing import CliRunner

from pipeline.cli import main

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ADULT = Path(__file__).resolve().parents[2] / "data" / "adult" / "adult.data"


@pytest.fixture(scope="module")
def sharded_release(tmp_path_factory) -> Path:
    home = tmp_path_factory.mktemp("sharded-audit-home")
    result = CliRunner().invoke(
        main,
        [
            "run",
            "--quiet",
            "--home",
            str(home),
            "--engine",
            "local",
            "--workers",
            "2",
            "--shard-rows",
            "8000",
            "--min-shard-rows",
            "1000",
            "--max-deleted-share",
            "0.25",
        ],  # fmt: skip
    )
    assert result.exit_code == 0, result.output
    release = home / "releases" / (home / "releases" / "LATEST").read_text().strip()
    assert len(list((release / "attribute_table").glob("part-*.parquet"))) == 4
    return release


def _assert_same(expected, actual, path: str = "") -> None:
    """Figure for figure: same keys, same lengths, equal values, floats within 1e-9."""
    if isinstance(expected, dict):
        assert set(actual) == set(expected), path
        for key in expected:
            _assert_same(expected[key], actual[key], f"{path}.{key}")
    elif isinstance(expected, list):
        assert len(actual) == len(expected), path
        for index, (x, y) in enumerate(zip(expected, actual, strict=True)):
            _assert_same(x, y, f"{path}[{index}]")
    elif isinstance(expected, float) and not isinstance(expected, bool):
        assert actual == pytest.approx(expected, abs=1e-9), path
    else:
        assert actual == expected, path


def test_the_part_by_part_audit_gives_the_whole_frame_audits_figures(sharded_release, tmp_path):
    from pipeline.release.audit import run_audit

    whole = run_audit(sharded_release, ADULT).report.as_json()
    target = tmp_path / "audit.json"
    result = CliRunner().invoke(
        main, ["audit", str(sharded_release), "--raw", str(ADULT), "--workers", "2", "--output", str(target)]
    )
    assert result.exit_code == 0, result.output
    parts = json.loads(target.read_text())
    # the release is not trivial: the figures compared are the ones that could differ
    assert whole["structure"]["n_groups"] > 0 and whole["adversary"]["n_records_exposed"] > 0
    assert whole["identity_risk"]["n_classes"] > 1
    whole["release"].pop("directory"), parts["release"].pop("directory")
    _assert_same(whole, parts)


def test_the_part_by_part_audit_holds_one_part_at_a_time_and_never_the_whole_release(sharded_release, monkeypatch):
    import pipeline.release.audit as audit
    import pipeline.release.sharded_audit as sharded_audit

    def refuse(*args, **kwargs):
        raise AssertionError("read_release (the whole release in pandas) was called")

    monkeypatch.setattr(audit, "read_release", refuse)
    real_read_part = sharded_audit.read_part
    alive: list[weakref.ref] = []
    reads: list[int] = []

    def counting_read_part(task):
        gc.collect()
        held = [ref for ref in alive if ref() is not None]
        assert not held, f"part {task.shard} read while {len(held)} other part(s) are still in memory"
        part = real_read_part(task)
        alive.append(weakref.ref(part.attribute_table))
        alive.append(weakref.ref(part.sac_released))
        alive.append(weakref.ref(part.id_table))
        reads.append(task.shard)
        return part

    monkeypatch.setattr(sharded_audit, "read_part", counting_read_part)
    report = audit.audit_release(sharded_release, ADULT, workers=1)  # in this process, so the patch sees every read
    assert reads == [0, 1, 2, 3]
    assert report.verdict == "PASS"


def test_the_report_figures_from_the_parts_equal_those_of_the_whole_tables(sharded_release):
    from pipeline.core.identity_risk import identity_risk
    from pipeline.core.metrics import domain_sizes
    from pipeline.core.rules import mine_strong_rules
    from pipeline.io.loading import load_records
    from pipeline.release.audit import read_release
    from pipeline.release.sharded_audit import part_files, sharded_report_data
    from pipeline.reporting.release_report import mixed_report_data
    from pipeline.resources import ReleaseSettings

    settings = ReleaseSettings()
    records = load_records(ADULT, **settings.reading_options(), ell=settings.feasibility_ell()).records
    release = read_release(sharded_release)
    attributes = release.sensitive_attributes
    rules = mine_strong_rules(
        records,
        attributes,
        min_confidence=float(release.manifest["min_confidence"]),
        min_support=int(release.manifest.get("min_support") or 1),
    )
    domain = domain_sizes(records, attributes)
    whole = mixed_report_data(release, rules, domain=domain)
    whole["identity_risk"] = identity_risk([release.sac_released, release.attribute_table], release.quasi_identifiers)
    parts = sharded_report_data(
        part_files(release.path, release.manifest),
        release.manifest,
        rules,
        attribute_clusters=release.attribute_clusters,
        domain=domain,
        workers=2,
    )
    _assert_same(json.loads(json.dumps(whole)), json.loads(json.dumps(parts)))


def test_a_parts_adversary_on_a_second_thread_gives_the_same_figures(sharded_release, monkeypatch):
    """A part measured alone in its process (one shard, workers >= 2) runs the strong-rule adversary on a second thread
    while the metrics are computed: the part's figures must equal those of one thread exactly, and the adversary must
    have run on another thread (the rules are the release's own global rules, mined from Adult)."""
    import threading

    import pipeline.release.sharded_audit as sharded_audit
    from pipeline.core.metrics import domain_sizes
    from pipeline.core.rules import mine_strong_rules
    from pipeline.release.audit import load_raw_as_released, read_audited_manifest

    directory, manifest = read_audited_manifest(sharded_release)
    files = sharded_audit.part_files(directory, manifest)
    attributes = list(manifest["sensitive_attributes"])
    records = load_raw_as_released(directory, manifest, ADULT).records
    rules = mine_strong_rules(records, attributes, min_confidence=float(manifest["min_confidence"]), min_support=1)
    assert len(rules) > 0
    real_adversary = sharded_audit._adversary_partial
    threads: list[str] = []

    def recording_adversary(*args, **kwargs):
        threads.append(threading.current_thread().name)
        return real_adversary(*args, **kwargs)

    monkeypatch.setattr(sharded_audit, "_adversary_partial", recording_adversary)
    figures = {}
    for count in (1, 2):
        task = sharded_audit.PartTask(
            shard=0,
            files=files[0],
            manifest=sharded_audit._part_manifest(manifest),
            attribute_clusters=sharded_audit.read_parquet_frame([directory / "attribute_clusters.parquet"]),
            rules=rules,
            domain=domain_sizes(records, attributes),
            threads=count,
        )
        figures[count] = sharded_audit.part_figures(task)
    assert figures[2]["adversary"]["n_records_exposed"] > 0  # the adversary had something to measure
    assert json.dumps(figures[2], sort_keys=True) == json.dumps(figures[1], sort_keys=True)
    assert threads[0] == threading.current_thread().name and threads[1] != threads[0]


def test_a_damaged_part_is_one_line_and_exit_status_2(sharded_release, tmp_path):
    """A red team truncated a part file: the audit printed two tracebacks and exited 1 (the in-memory layout: one
    line, exit 2). The shard's AuditError, wrapped by the part map, now ends the command as the other unusable inputs."""
    import shutil

    damaged = tmp_path / "damaged"
    shutil.copytree(sharded_release, damaged)
    part = damaged / "id_table" / "part-00001.parquet"
    part.write_bytes(part.read_bytes()[:500])
    result = CliRunner().invoke(main, ["audit", str(damaged), "--raw", str(ADULT), "--output", str(tmp_path / "a.json")])
    assert result.exit_code == 2, result.output
    assert isinstance(result.exception, SystemExit) and "Traceback" not in result.output
    assert "part-00001.parquet" in result.output and "not a readable Parquet file" in result.output
    assert not (tmp_path / "a.json").exists()


def test_an_audit_that_cannot_be_written_is_one_line_and_exit_status_1(sharded_release, tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    target = blocker / "audits" / "audit.json"  # its parent is a file: the write fails as on a read-only home
    result = CliRunner().invoke(main, ["audit", str(sharded_release), "--raw", str(ADULT), "--output", str(target)])
    assert result.exit_code == 1, result.output
    assert isinstance(result.exception, SystemExit)
    assert "NOT written" in result.output and str(blocker / "audits") in result.output
