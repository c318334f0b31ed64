"""``msa-release audit`` checks each SID's value shares on the files, as gate 2 does (red team, session 38: a release
copy whose ID table was edited so that one education SID held Bachelors 4 times out of 6, with 3 matching
attribute-table rows added and the manifest's count raised, passed the audit, which counted distinct values only)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from pipeline.cli import main
from pipeline.release.audit import audit_release
from pipeline.release.publish import read_latest
from tests.conftest import example_release_settings, run_arguments


def _publish(golden, tmp_path: Path, monkeypatch, min_support: int = 1, extra: tuple[str, ...] = ()) -> tuple[Path, Path, dict]:
    monkeypatch.setenv("GX_ANALYTICS_ENABLED", "false")
    example = golden["example_A"]
    home = tmp_path / "home"
    monkeypatch.setenv("MSA_RELEASE_HOME", str(home))
    monkeypatch.setenv("DAGSTER_HOME", str(home / "dagster"))
    settings = example_release_settings(example, tmp_path, min_support=min_support)
    result = CliRunner().invoke(main, [*run_arguments(settings), *extra, "--home", str(home)])
    assert result.exit_code == 0, result.output
    return home / "releases" / read_latest(home / "releases").name, Path(settings["input_path"]), example


def test_a_sid_edited_above_one_over_ell_fails_the_audit(golden, tmp_path, monkeypatch):
    release, raw, example = _publish(golden, tmp_path, monkeypatch)
    clean = audit_release(release, raw, workers=1)
    assert clean.verdict == "PASS" and clean.structure.n_sids_value_above_share == 0
    copy = tmp_path / "copy" / release.name
    shutil.copytree(release, copy)
    id_parts = sorted((copy / "id_table").glob("*.parquet"))
    at_parts = sorted((copy / "attribute_table").glob("*.parquet"))
    id_table = pd.concat([pd.read_parquet(p) for p in id_parts], ignore_index=True)
    attribute_table = pd.concat([pd.read_parquet(p) for p in at_parts], ignore_index=True)
    attribute = str(example["SA"][0])
    sid = int(attribute_table[attribute].dropna().iloc[0])
    rows = id_table.index[(id_table["attribute"] == attribute) & (id_table["sid"] == sid)]
    total = int(id_table.loc[rows, "count"].sum())
    assert id_table.loc[rows, "value"].nunique() >= 2  # still 2 distinct values: only the shares tell
    # one value's count doubled with as many attribute-table rows naming the SID: its share > 1/2, counts consistent
    id_table.loc[rows[0], "count"] += total
    holder = attribute_table[attribute_table[attribute] == sid].iloc[[0] * total]
    added = holder.assign(
        row_id=range(int(attribute_table["row_id"].max()) + 1, int(attribute_table["row_id"].max()) + 1 + total)
    )
    for part in [*id_parts[1:], *at_parts[1:]]:
        part.unlink()
    id_table.to_parquet(id_parts[0], index=False)
    pd.concat([attribute_table, added.astype(attribute_table.dtypes.to_dict())], ignore_index=True).to_parquet(
        at_parts[0], index=False
    )
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["n_attribute_table"] = int(manifest["n_attribute_table"]) + total
    (copy / "manifest.json").write_text(json.dumps(manifest))
    tampered = audit_release(copy, raw, workers=1)
    assert tampered.structure.n_sids_below_ell == 0 and tampered.structure.record_counts_match_manifest
    # the edited SID (a value above 1/2) and the SIDs the added rows name on the other two attributes, whose counts
    # were not raised (occurrences no longer match the records naming them)
    assert tampered.structure.n_sids_value_above_share == 3
    assert tampered.verdict == "FAIL"
    assert "the release files break ℓ-diversity or the manifest's record counts" in tampered.reasons


def test_an_audit_of_a_release_with_weaker_rule_thresholds_says_what_it_does_not_measure(golden, tmp_path, monkeypatch):
    # red team, session 38: --min-support 1000 mined no rule on Adult, and the audit (mining at the manifest's
    # support) passed it without a word; min_support above max(ℓ, 5) is now an override and the audit warns
    release, raw, _ = _publish(golden, tmp_path, monkeypatch, min_support=50)
    manifest = json.loads((release / "manifest.json").read_text())
    assert "min_support" in {o["setting"] for o in manifest["overrides"]}
    report = audit_release(release, raw, workers=1)
    (warning,) = [w for w in report.warnings or [] if "min_support" in w]
    assert warning.startswith("the release was made with min_support 50 (default 5): it bounds only the rules above")
    # ... and --min-support measures that adversary (session 38's note: the audit could mine at the release's support
    # only): every rule of the example, which the release did not bound
    output = tmp_path / "audit-support-1.json"
    outcome = CliRunner().invoke(
        main, ["audit", str(release), "--raw", str(raw), "--min-support", "1", "--workers", "1", "--output", str(output)]
    )
    assert outcome.exit_code in (0, 1), outcome.output
    measured = json.loads(output.read_text())
    assert measured["adversary"]["min_support"] == 1 and report.adversary.min_support == 50
    assert measured["adversary"]["n_rules"] > report.adversary.n_rules
    assert "min_support 1 records" in outcome.output
    assert not [w for w in measured.get("warnings") or [] if "min_support" in w]
    # the release bounded none of the example's 2 rules: 5 released records above 1/ℓ, which the default audit missed
    assert (report.adversary.n_rules, measured["adversary"]["n_rules"]) == (0, 2)
    assert report.verdict == "PASS" and measured["verdict"] == "FAIL" and outcome.exit_code == 1
    assert measured["adversary"]["n_records_above_bound"] == 5


def test_min_support_of_the_audit_on_an_in_memory_release(golden, tmp_path, monkeypatch):
    # the same on the in-memory job's release (one file per table, no parts: pipeline.release.audit.run_audit)
    release, raw, _ = _publish(golden, tmp_path, monkeypatch, min_support=50, extra=("--engine", "memory"))
    assert not (release / "id_table").is_dir()
    default, measured = audit_release(release, raw), audit_release(release, raw, min_support=1)
    assert (default.adversary.min_support, measured.adversary.min_support) == (50, 1)
    assert (default.adversary.n_rules, measured.adversary.n_rules) == (0, 2)
    assert (default.verdict, measured.verdict, measured.adversary.n_records_above_bound) == ("PASS", "FAIL", 5)


def _table_files(release: Path, table: str) -> list[Path]:
    parts = sorted((release / table).glob("*.parquet"))
    return parts or [release / f"{table}.parquet"]


@pytest.mark.parametrize("engine", ["local", "memory"])
@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        ("drop a sac_released row", "a published possible-value set has fewer than ℓ"),
        ("repeat an attribute_table row", "repeat a release row id held by another"),
        ("rename a sensitive column", "has no column(s)"),
    ],
)
def test_an_audit_of_a_damaged_release_fails_naming_the_damage(golden, tmp_path, monkeypatch, engine, damage, reason):
    # red team, session 39: these gave a traceback (exit 1, like FAIL) or, on a sharded release, "shard 0 of 1
    # failed: KeyError: its message is withheld", naming no table or column
    release, raw, example = _publish(golden, tmp_path, monkeypatch, extra=("--engine", engine))
    copy = tmp_path / "copy" / release.name
    shutil.copytree(release, copy)
    attribute = str(example["SA"][0])
    if damage == "drop a sac_released row":
        (path,) = _table_files(copy, "sac_released")
        frame = pd.read_parquet(path)
        assert len(frame)
        frame.iloc[1:].to_parquet(path, index=False)
    elif damage == "repeat an attribute_table row":
        (path,) = _table_files(copy, "attribute_table")
        frame = pd.read_parquet(path)
        pd.concat([frame, frame.iloc[:1]], ignore_index=True).to_parquet(path, index=False)
    else:
        (path,) = _table_files(copy, "attribute_table")
        pd.read_parquet(path).rename(columns={attribute: f"{attribute}_renamed"}).to_parquet(path, index=False)
    outcome = CliRunner().invoke(
        main, ["audit", str(copy), "--raw", str(raw), "--workers", "1", "--output", str(tmp_path / "a.json")]
    )
    assert outcome.exit_code == 1, outcome.output
    assert outcome.exception is None or isinstance(outcome.exception, SystemExit), outcome.exception
    assert "FAIL (the release is damaged)" in outcome.output and reason in outcome.output, outcome.output
    assert "withheld" not in outcome.output


def test_an_unreadable_raw_table_is_explained_in_the_audits_terms(golden, tmp_path, monkeypatch):
    # red team, session 39: the reader's advice named the run's options (--quasi-identifiers, --no-header), which
    # audit does not have: the raw table is read as the manifest says the release read its input
    release, raw, example = _publish(golden, tmp_path, monkeypatch)
    other = tmp_path / "other.csv"
    pd.read_csv(raw).drop(columns=[str(example["SA"][0])]).to_csv(other, index=False)
    outcome = CliRunner().invoke(main, ["audit", str(release), "--raw", str(other), "--workers", "1"])
    assert outcome.exit_code == 2, outcome.output
    assert "other.csv" in outcome.output
    assert "the manifest's input_reading: auto, header True, delimiter ','" in outcome.output
    assert "pass the release's own input file with --raw" in outcome.output


def test_an_audit_against_another_raw_table_says_so_and_keeps_the_inputs_audit(golden, tmp_path, monkeypatch):
    # newcomer, session 40: an audit with 20 rows of the input mined no rule, printed PASS beside a one-line warning and
    # replaced <home>/audits/<id>/audit.json, the audit against the input; it now goes beside it, and says so first
    release, raw, _ = _publish(golden, tmp_path, monkeypatch)
    home = tmp_path / "home"
    first = CliRunner().invoke(main, ["audit", str(release), "--raw", str(raw), "--workers", "1", "--home", str(home)])
    assert first.exit_code in (0, 1), first.output
    own = home / "audits" / release.name / "audit.json"
    kept = own.read_bytes()
    assert json.loads(kept)["raw"]["is_release_input"] is True
    other = tmp_path / "other.csv"
    pd.read_csv(raw).iloc[:-1].to_csv(other, index=False)  # one record less: another table
    outcome = CliRunner().invoke(main, ["audit", str(release), "--raw", str(other), "--workers", "1", "--home", str(home)])
    assert outcome.exit_code in (0, 1), outcome.output
    assert "against a raw table that is NOT the release's input" in outcome.output.splitlines()[0], outcome.output
    assert own.read_bytes() == kept
    (written,) = (home / "audits" / release.name).glob("other-raw-*/audit.json")
    assert json.loads(written.read_text())["raw"]["is_release_input"] is False


def test_an_audit_against_a_table_without_the_releases_columns_names_no_run_option(golden, tmp_path, monkeypatch):
    # newcomer, session 40: auditing a release with Adult as --raw said "read it with --no-header --column-names
    # a,b,c; otherwise fix --quasi-identifiers / --sensitive-attributes": options audit does not have (or not for this)
    release, _, _ = _publish(golden, tmp_path, monkeypatch)
    adult = Path(__file__).resolve().parents[2] / "data" / "adult" / "adult.data"
    outcome = CliRunner().invoke(main, ["audit", str(release), "--raw", str(adult), "--workers", "1"])
    assert outcome.exit_code == 2, outcome.output
    assert "are not in the input" in outcome.output and "pass the release's own input file with --raw" in outcome.output
    for option in ("--no-header", "--column-names", "--quasi-identifiers", "--sensitive-attributes"):
        assert option not in outcome.output, outcome.output
