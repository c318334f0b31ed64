"""The plain-Rating baseline as a publishable model (`msa-release run --model rating`), its
disclosure gate and `--allow-disclosure` override, and `msa-release audit` on published releases.

Every expected number comes from SPEC §16.1 (golden example A, `tests/fixtures/golden_expected.json`):
under plain Rating rows 1, 5 and 6 are disclosed with probability 1; under the mixed model the rule
holders' probability is 1/ℓ = 1/2 and attribute-table rows get 0; AIL mixed 0 / Rating 0, RCE mixed
13 / Rating 14.
"""

from __future__ import annotations

import json
from collections import Counter
from fractions import Fraction
from pathlib import Path

import duckdb
import pandas as pd
import pytest
from click.testing import CliRunner

from pipeline.cli import main
from pipeline.core.adversary import adversary_view
from pipeline.core.mixed_model import assemble_release_tables, run_mixed_model
from pipeline.core.rating import rating_tables
from pipeline.release.publish import list_releases, read_latest
from tests.conftest import FIXTURES, example_frame, example_quasi_identifiers

ALL_GATES = {
    "sac_released_is_l_diverse",
    "attribute_table_is_l_diverse",
    "disclosure_within_bound",
    "rule_confidence_preserved",
    "records_accounted_for",
    "no_probability_tilt",
    "release_carries_no_input_order",
    "no_certain_attribute_table_cell",
    "posterior_within_bound",
    "utility_within_thresholds",
}
NOT_APPLICABLE_TO_RATING = {"sac_released_is_l_diverse", "rule_confidence_preserved", "no_probability_tilt"}
MIXED_TABLES = {"sac_released", "attribute_table", "id_table", "attribute_clusters"}
RATING_TABLES = {"attribute_table", "id_table"}


def _golden_a() -> dict:
    return json.loads((FIXTURES / "golden_expected.json").read_text())["example_A"]


def _qi_of_input_ids(example: dict, ids) -> Counter:
    """Multiset of (quasi-identifier tuple) of the golden input rows with these ids, as text."""
    by_id = {r["id"]: tuple(str(v) for v in r["qi"].values()) for r in example["input"]}
    return Counter(by_id[int(i)] for i in ids)


def _qi_strings(example: dict) -> set[str]:
    return {str(v) for r in example["input"] for v in r["qi"].values()}


def _strings_in(value) -> list[str]:
    """Every string (keys included) of a JSON document."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in (k, *_strings_in(v))]
    if isinstance(value, list):
        return [s for v in value for s in _strings_in(v)]
    return []


def _read_parquet(path: Path) -> pd.DataFrame:
    return duckdb.sql(f"SELECT * FROM read_parquet('{path}')").df()


# --------------------------------------------------------------------------------------------
# Published homes, shared by the module (each Dagster run takes a few seconds)


class Published:
    """What the module fixture built: the example, its CSV, and the CLI outcomes."""

    def __init__(self, example, csv, mixed_home, rating_home, outcomes, refused_snapshot):
        self.example = example
        self.csv = csv
        self.mixed_home = mixed_home
        self.rating_home = rating_home
        self.outcomes = outcomes
        self.refused_snapshot = refused_snapshot

    @property
    def mixed_release(self) -> Path:
        return read_latest(self.mixed_home / "releases")

    @property
    def rating_release(self) -> Path:
        """A Rating release with --allow-disclosure is a comparison (issue 15): the first of comparisons/ (the
        second is the run with --promote, refused)."""
        return list_releases(self.rating_home / "comparisons")[0]


def _run_args(example: dict, csv: Path, home: Path, *extra: str) -> list[str]:
    return [
        "run",
        "--input",
        str(csv),
        "--quasi-identifiers",
        ",".join(example_quasi_identifiers(example)),
        "--sensitive-attributes",
        ",".join(example["SA"]),
        "--ell",
        str(example["l"]),
        "--min-confidence",
        str(example["min_conf"]),
        "--seed",
        "0",
        "--randomness",
        "spec-reference",  # golden figures: SPEC's reference algorithms in input order
        "--min-support",
        "1",  # and SPEC §1's rule set
        "--residual-policy",
        "suppress",  # and SPEC §6.4's residual placement
        *(["--grouping", "p1"] if "rating" not in extra else []),  # and P1's Algorithm 11
        "--home",
        str(home),
        *extra,
    ]


def _releases_snapshot(home: Path) -> tuple[str | None, list[str]]:
    releases = home / "releases"
    latest = (releases / "LATEST").read_text() if (releases / "LATEST").is_file() else None
    entries = sorted(p.name for p in releases.iterdir()) if releases.is_dir() else []
    return latest, entries


@pytest.fixture(scope="module")
def published(tmp_path_factory) -> Published:
    """Example A published three ways through the CLI:

    * ``mixed_home``: the mixed model (must publish), then ``--model rating`` WITHOUT
      ``--allow-disclosure`` (must be refused and leave the mixed release as LATEST);
    * ``rating_home``: ``--model rating --allow-disclosure`` (must publish, as a comparison: issue 15);
    * ``mixed_home`` again: ``--model rating --allow-disclosure`` and ``--model mixed --no-promote`` (comparisons: LATEST
      must stay the mixed release).
    """
    example = _golden_a()
    base = tmp_path_factory.mktemp("rating_and_audit")
    csv = base / "example_a.csv"
    example_frame(example).drop(columns="row_id").to_csv(csv, index=False)
    runner = CliRunner()
    outcomes = {}
    with pytest.MonkeyPatch.context() as patch:
        # the CLI writes these into os.environ; restore them after the module
        patch.setenv("MSA_RELEASE_HOME", str(base / "unused-home"))
        patch.setenv("DAGSTER_HOME", str(base / "unused-dagster"))
        patch.setenv("GX_ANALYTICS_ENABLED", "false")
        mixed_home, rating_home = base / "mixed_home", base / "rating_home"
        # the mixed model in memory (--engine memory, issue 17): these tests read its release.duckdb and single-file
        # tables and audit its report.json's query workload, which the sharded default does not record yet (the
        # default engine's release and audit: tests/e2e/test_default_engine.py, test_sharded_audit.py)
        outcomes["mixed"] = runner.invoke(main, _run_args(example, csv, mixed_home, "--model", "mixed", "--engine", "memory"))
        before_refusal = _releases_snapshot(mixed_home)
        outcomes["rating_refused"] = runner.invoke(main, _run_args(example, csv, mixed_home, "--model", "rating"))
        after_refusal = _releases_snapshot(mixed_home)
        outcomes["rating_allowed"] = runner.invoke(
            main, _run_args(example, csv, rating_home, "--model", "rating", "--allow-disclosure")
        )
        outcomes["rating_comparison"] = runner.invoke(
            main, _run_args(example, csv, mixed_home, "--model", "rating", "--allow-disclosure")
        )
        outcomes["after_rating_comparison"] = _releases_snapshot(mixed_home)
        outcomes["mixed_no_promote"] = runner.invoke(
            main, _run_args(example, csv, mixed_home, "--model", "mixed", "--engine", "memory", "--no-promote")
        )
        outcomes["after_mixed_no_promote"] = _releases_snapshot(mixed_home)
        outcomes["rating_promote_refused"] = runner.invoke(
            main, _run_args(example, csv, rating_home, "--model", "rating", "--allow-disclosure", "--promote")
        )
    return Published(example, csv, mixed_home, rating_home, outcomes, (before_refusal, after_refusal))


def _manifest(release_dir: Path) -> dict:
    return json.loads((release_dir / "manifest.json").read_text())


# --------------------------------------------------------------------------------------------
# 1. msa-release run --model rating / mixed


def test_mixed_model_publishes_example_a_with_every_gate_passed(published):
    outcome = published.outcomes["mixed"]
    assert outcome.exit_code == 0, outcome.output
    release = published.mixed_release
    assert release is not None and release.is_dir()
    manifest = _manifest(release)
    assert manifest["model"] == "mixed"
    assert manifest["allow_disclosure"] is False
    assert manifest["disclosure_override_used"] is False
    assert {c["name"] for c in manifest["checks"]} == ALL_GATES
    assert all(c["passed"] and c["status"] == "passed" for c in manifest["checks"]), manifest["checks"]
    example = published.example
    assert manifest["n_sac_released"] == sum(len(g) for g in example["groups"])
    assert manifest["n_attribute_table"] == len(example["IR_left_ids"])
    assert manifest["n_deleted"] == len(example["deleted_ids"])
    assert {p.stem for p in release.glob("*.parquet")} == MIXED_TABLES | {"release_manifest"}
    connection = duckdb.connect(str(release / "release.duckdb"), read_only=True)
    try:
        tables = {r[0] for r in connection.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    finally:
        connection.close()
    assert tables == MIXED_TABLES | {"release_manifest"}


def test_rating_without_allow_disclosure_is_refused_and_latest_is_untouched(published):
    outcome = published.outcomes["rating_refused"]
    assert outcome.exit_code == 1, outcome.output
    assert "NO release published" in outcome.output
    assert "disclosure_within_bound: FAILED" in outcome.output
    assert "--allow-disclosure" in outcome.output
    before, after = published.refused_snapshot
    assert before[0] is not None  # the mixed release was there before
    assert after == before  # same LATEST, no new release directory, no staging left over
    assert published.mixed_release.name == before[0].strip()
    assert _manifest(published.mixed_release)["model"] == "mixed"


def test_rating_with_allow_disclosure_publishes_and_records_the_override(published):
    outcome = published.outcomes["rating_allowed"]
    assert outcome.exit_code == 0, outcome.output
    assert "Published release" in outcome.output
    assert "--allow-disclosure" in outcome.output  # the summary warns about the override
    release = published.rating_release
    assert release is not None
    manifest = _manifest(release)
    assert manifest["model"] == "rating"
    assert manifest["allow_disclosure"] is True
    assert manifest["disclosure_override_used"] is True
    example = published.example
    n = len(example["input"])
    assert (manifest["n_input"], manifest["n_dropped_missing"]) == (n, 0)
    assert (manifest["n_sac_released"], manifest["n_attribute_table"], manifest["n_deleted"]) == (0, n, 0)
    reading = manifest["input_reading"]
    for key in (
        "input_file",
        "input_format",
        "csv_header",
        "column_count",
        "column_positions",
        "delimiter",
        "strip_whitespace",
        "missing_value_tokens",
    ):
        assert key in reading
    # published: no path and no unconfigured column name
    assert "input_path" not in reading and "column_names" not in reading and "/" not in reading["input_file"]
    assert reading["csv_header"] is True
    assert reading["column_positions"] == {}
    assert reading["delimiter"] == ","
    assert reading["input_format"] in {"auto", "csv"}

    statuses = {c["name"]: c["status"] for c in manifest["checks"]}
    assert set(statuses) == ALL_GATES
    assert statuses["disclosure_within_bound"] == "failed_overridden"
    disclosure = next(c for c in manifest["checks"] if c["name"] == "disclosure_within_bound")
    assert disclosure["passed"] is False
    # SPEC §16.1: rows 1, 5, 6 disclosed with probability 1
    assert disclosure["observed"]["max_disclosure_probability"] == 1.0
    assert disclosure["observed"]["n_records_certain"] == len(example["attack_rating"])
    assert disclosure["observed"]["n_records_above_bound"] == len(example["attack_rating"])
    for name in NOT_APPLICABLE_TO_RATING:
        assert statuses[name] == "not_applicable", name
    for name in ALL_GATES - NOT_APPLICABLE_TO_RATING - {"disclosure_within_bound"}:
        assert statuses[name] == "passed", name


def test_rating_with_allow_disclosure_is_a_comparison_and_never_moves_latest(published):
    """Issue 15: the advice "--model rating --allow-disclosure" once replaced releases/LATEST with a release of maximum
    disclosure 1.0. Now it lands in comparisons/<id>/, marked "COMPARISON — not for sharing" at the top of its
    manifest.json and report.html, LATEST still names the mixed release, and the series check does not refuse it."""
    outcome = published.outcomes["rating_comparison"]
    assert outcome.exit_code == 0, outcome.output
    before = published.refused_snapshot[1]
    after = published.outcomes["after_rating_comparison"]
    assert after == before  # releases/: same LATEST, same entries
    assert "COMPARISON — not for sharing" in outcome.output
    assert f"LATEST         unchanged: {before[0].strip()}" in outcome.output
    comparison = list_releases(published.mixed_home / "comparisons")[0]
    assert comparison.name in outcome.output and str(comparison) in outcome.output
    text = (comparison / "manifest.json").read_text(encoding="utf-8")
    assert text.startswith('{\n  "notice": "COMPARISON — not for sharing'), text[:120]
    manifest = json.loads(text)
    assert manifest["model"] == "rating" and manifest["disclosure_override_used"] is True
    assert manifest["promotion"]["promoted"] is False and manifest["promotion"]["area"] == "comparisons"
    assert manifest["promotion"]["requested"] is None and "allow_disclosure" in manifest["promotion"]["overrides_set"]
    # shares every record with the shared mixed release under other settings: recorded, not refused
    assert manifest["recomposition"] and manifest["recomposition"][0]["release_id"] == before[0].strip()
    page = (comparison / "report.html").read_text(encoding="utf-8")
    assert page.index("COMPARISON — not for sharing") < page.index("<h1>")
    # the comparison's page compares with the shared mixed release; the mixed page, regenerated, with the comparison
    assert f"mixed model (release {before[0].strip()})" in page
    from pipeline.reporting.release_report import regenerate_report

    mixed_page = regenerate_report(published.mixed_release).read_text(encoding="utf-8")
    assert f"Rating (comparison {comparison.name})" in mixed_page
    assert "COMPARISON — not for sharing" not in mixed_page.split("<h1>")[0]


def test_no_promote_publishes_a_mixed_release_as_a_comparison(published):
    outcome = published.outcomes["mixed_no_promote"]
    assert outcome.exit_code == 0, outcome.output
    assert published.outcomes["after_mixed_no_promote"] == published.refused_snapshot[1]  # LATEST did not move
    comparisons = list_releases(published.mixed_home / "comparisons")
    assert len(comparisons) == 2
    manifest = _manifest(comparisons[-1])
    assert manifest["model"] == "mixed" and manifest["notice"].startswith("COMPARISON — not for sharing")
    assert manifest["promotion"] == {
        "promoted": False,
        "area": "comparisons",
        "requested": False,
        "reason": "promote is off (--no-promote): published as a comparison",
        "overrides_set": [],
    }


def test_promote_never_shares_a_release_above_its_bound(published):
    """--promote with --allow-disclosure on a Rating release whose disclosure gate fails: still a comparison, the
    refusal said on stderr and in the manifest; releases/ is not even created."""
    outcome = published.outcomes["rating_promote_refused"]
    assert outcome.exit_code == 0, outcome.output
    assert "msa-release: --promote refused: gate(s) disclosure_within_bound failed" in outcome.output
    assert not (published.rating_home / "releases" / "LATEST").exists()
    first, refused = list_releases(published.rating_home / "comparisons")
    assert first == published.rating_release
    manifest = _manifest(refused)
    assert manifest["promotion"]["requested"] is True and manifest["promotion"]["promoted"] is False


def test_rating_release_holds_only_the_rating_tables(published):
    release = published.rating_release
    assert {p.stem for p in release.glob("*.parquet")} == RATING_TABLES | {"release_manifest"}
    assert {p.name for p in release.iterdir()} == {
        "release.duckdb",
        "manifest.json",
        "report.html",
        "report.json",
        *(f"{t}.parquet" for t in RATING_TABLES | {"release_manifest"}),
    }
    connection = duckdb.connect(str(release / "release.duckdb"), read_only=True)
    try:
        tables = {r[0] for r in connection.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    finally:
        connection.close()
    assert tables == RATING_TABLES | {"release_manifest"}
    # plain Rating on the whole table (SPEC §16.1): 8 SIDs of 2 values per attribute
    id_table = _read_parquet(release / "id_table.parquet")
    per_attribute = id_table.groupby("attribute")["sid"].nunique().to_dict()
    expected = {a: len(v["SIDs"]) for a, v in published.example["plain_rating_full_table"].items()}
    assert per_attribute == expected


# --------------------------------------------------------------------------------------------
# 2. msa-release audit


def _audit(release_dir: Path, raw: Path, output: Path, *extra: str):
    return CliRunner().invoke(main, ["audit", str(release_dir), "--raw", str(raw), "--output", str(output), *extra])


@pytest.fixture(scope="module")
def audits(published, tmp_path_factory) -> dict:
    out = tmp_path_factory.mktemp("audits")
    results = {}
    for name, release in (("mixed", published.mixed_release), ("rating", published.rating_release)):
        target = out / f"{name}.json"
        outcome = _audit(release, published.csv, target)
        results[name] = (outcome, json.loads(target.read_text()) if target.is_file() else None, target)
    return results


def test_audit_of_the_mixed_release_passes(published, audits):
    outcome, report, _ = audits["mixed"]
    assert outcome.exit_code == 0, outcome.output
    assert report is not None
    assert report["verdict"] == "PASS"
    assert "PASS" in outcome.output
    example = published.example
    adversary = report["adversary"]
    assert Fraction(adversary["max_probability"]) == Fraction(1, example["l"])
    assert adversary["max_probability"] == "1/2"
    assert adversary["n_records_above_bound"] == 0
    assert adversary["n_records_certain"] == 0
    assert adversary["n_rules"] == len(example["strong_rules"])
    # every member of a SAC~ group holding a rule has 1/ℓ (Lemma 12), attribute-table rows 0
    holders = {int(i) for i in example["attack_mixed"]}
    exposed = sum(len(g) for g in example["groups"] if holders & set(g))
    histogram = adversary["histogram"]
    assert sum(histogram.values()) == len(example["input"])
    assert histogram["(0.4, 0.5]"] == exposed
    assert histogram["0"] == len(example["input"]) - exposed
    assert report["structure"]["passed"] is True
    assert report["structure"]["n_groups"] == len(example["groups"])
    assert report["raw"]["is_release_input"] is True
    assert "warnings" not in report
    assert report["release"]["model"] == "mixed"
    assert report["release"]["release_id"] == published.mixed_release.name
    metrics = report["metrics"]
    assert metrics["additional_information_loss"] == pytest.approx(float(Fraction(example["AIL_mixed"])), abs=1e-12)
    assert metrics["reconstruction_error"] == pytest.approx(float(Fraction(example["RCE_mixed"])), abs=1e-9)
    # the mixed release recovers both rule confidences exactly (SPEC §16.1: 3/4)
    expected_conf = sorted(float(Fraction(c)) for c in example["conf_recovered_mixed"].values())
    assert sorted(r["released_confidence"] for r in metrics["rules"]) == pytest.approx(expected_conf)


def test_an_audit_without_the_home_secret_says_the_input_is_unknown_not_different(published, tmp_path, monkeypatch):
    """A copy of the release outside its home, no $MSA_RELEASE_HOME: the manifest's keyed input digest cannot be
    checked. The audit said "the raw table is not the release's input (SHA-256 differs)" although it is (a red team
    ran it after deleting the home's secret); it now says that it does not know."""
    import shutil

    copy = tmp_path / "elsewhere" / "releases" / published.mixed_release.name
    shutil.copytree(published.mixed_release, copy)
    monkeypatch.delenv("MSA_RELEASE_HOME", raising=False)
    target = tmp_path / "audit.json"
    outcome = _audit(copy, published.csv, target)
    assert outcome.exit_code == 0, outcome.output
    report = json.loads(target.read_text())
    assert report["raw"]["is_release_input"] is None
    (warning,) = report["warnings"]
    assert warning.startswith("whether the raw table is the release's input is not known") and "SHA-256 differs" not in warning


def test_audit_of_the_rating_release_fails_with_three_certain_records(published, audits):
    outcome, report, target = audits["rating"]
    assert outcome.exit_code == 1, outcome.output
    assert report is not None, "the report must be written even when the verdict is FAIL"
    assert report["verdict"] == "FAIL"
    assert "FAIL" in outcome.output
    assert report["reasons"]
    example = published.example
    adversary = report["adversary"]
    n_disclosed = len(example["attack_rating"])
    assert set(example["attack_rating"].values()) == {"1"}
    assert adversary["max_probability"] == "1"
    assert adversary["n_records_certain"] == n_disclosed
    assert adversary["n_records_above_bound"] == n_disclosed
    assert adversary["histogram"]["(0.9, 1.0]"] == n_disclosed
    assert adversary["histogram"]["0"] == len(example["input"]) - n_disclosed
    assert report["release"]["model"] == "rating"
    assert report["release"]["disclosure_override_used"] is True
    assert report["raw"]["is_release_input"] is True
    metrics = report["metrics"]
    assert metrics["additional_information_loss"] == pytest.approx(float(Fraction(example["AIL_rating"])), abs=1e-12)
    assert metrics["reconstruction_error"] == pytest.approx(float(Fraction(example["RCE_rating"])), abs=1e-9)
    # the release renumbers rows: identify the disclosed rows by their published quasi-identifiers
    listed = adversary["release_row_ids_above_bound"]
    assert len(listed) == n_disclosed
    table = _read_parquet(published.rating_release / "attribute_table.parquet")
    quasi_identifier_columns = example_quasi_identifiers(example)
    published_qi = table.set_index("row_id").loc[listed, quasi_identifier_columns]
    disclosed = Counter(tuple(str(v) for v in row) for row in published_qi.itertuples(index=False))
    assert disclosed == _qi_of_input_ids(example, example["attack_rating"])


def test_audit_json_keys(audits):
    for _, report, _ in audits.values():
        assert {"verdict", "adversary", "structure", "metrics", "release", "raw"} <= set(report)
        assert {"max_probability", "n_records_above_bound", "n_records_certain", "histogram"} <= set(report["adversary"])
        assert {"additional_information_loss", "reconstruction_error"} <= set(report["metrics"])
        Fraction(report["adversary"]["max_probability"])  # an exact fraction string


def test_audit_with_hierarchies_measures_the_query_workload_of_report_json(published, audits, tmp_path):
    """Issue 18: with --hierarchies the audit answers the COUNT-query workload from the release's files against the
    raw table; Example A publishes its quasi-identifiers unchanged, so an empty hierarchy folder serves, and the
    figures equal the ones the publish step wrote into report.json (same workload, same records, same tables)."""
    hierarchies = tmp_path / "no-hierarchies"
    hierarchies.mkdir()
    for name, release in (("mixed", published.mixed_release), ("rating", published.rating_release)):
        assert "query_workload" not in audits[name][1]  # without --hierarchies: not measured
        target = tmp_path / f"{name}.json"
        outcome = _audit(release, published.csv, target, "--hierarchies", str(hierarchies))
        assert outcome.exit_code in (0, 1), outcome.output
        workload = json.loads(target.read_text())["query_workload"]
        measured = {key: value for key, value in workload.items() if value is not None}  # the contract's unset keys
        assert measured == json.loads((release / "report.json").read_text())["query_workload"]
        assert workload["W1"]["n_queries"] == workload["W2"]["n_queries"] == 1000
        assert "workload       1000 COUNT queries per workload" in outcome.output


def test_audit_accepts_a_releases_directory_with_latest(published, audits, tmp_path):
    # the Rating comparison (issue 15) is not named by LATEST: a releases/ without LATEST is refused, its directory audited
    refused = _audit(published.rating_home / "releases", published.csv, tmp_path / "none.json")
    assert refused.exit_code == 2 and "not a release directory" in refused.output, refused.output
    target = tmp_path / "via_latest.json"
    outcome = _audit(published.rating_release, published.csv, target)
    assert outcome.exit_code == 1, outcome.output
    report = json.loads(target.read_text())
    _, direct, _ = audits["rating"]
    assert report["release"]["release_id"] == direct["release"]["release_id"] == published.rating_release.name
    assert report["adversary"] == direct["adversary"]
    assert report["verdict"] == "FAIL"

    target = tmp_path / "mixed_via_latest.json"
    outcome = _audit(published.mixed_home / "releases", published.csv, target)
    assert outcome.exit_code == 0, outcome.output
    assert json.loads(target.read_text())["release"]["release_id"] == published.mixed_release.name


def test_audit_min_confidence_above_every_rule_finds_nothing(published, tmp_path):
    """Raw confidences are 3/4; a threshold of 0.9 leaves the adversary without rules."""
    target = tmp_path / "strict.json"
    outcome = _audit(published.rating_release, published.csv, target, "--min-confidence", "0.9")
    assert outcome.exit_code == 0, outcome.output
    report = json.loads(target.read_text())
    assert report["adversary"]["n_rules"] == 0
    assert report["adversary"]["min_confidence"] == 0.9
    assert report["adversary"]["max_probability"] == "0"
    assert report["verdict"] == "PASS"


def test_audit_default_output_is_under_the_home_named_after_the_release(published, tmp_path, monkeypatch):
    """Issue 15: the audit goes to <home>/audits/<release_id>/audit.json, never into the working directory (the
    committed reports/ of a checkout)."""
    home = tmp_path / "audit-home"
    monkeypatch.setenv("MSA_RELEASE_HOME", str(home))
    runner = CliRunner()
    with runner.isolated_filesystem(temp_dir=tmp_path) as cwd:
        outcome = runner.invoke(main, ["audit", str(published.mixed_release), "--raw", str(published.csv)])
        assert outcome.exit_code == 0, outcome.output
        expected = home / "audits" / published.mixed_release.name / "audit.json"
        assert expected.is_file(), outcome.output
        assert json.loads(expected.read_text())["verdict"] == "PASS"
        assert str(expected) in outcome.output
        assert list(Path(cwd).iterdir()) == []


def test_audit_of_a_missing_raw_file_is_a_usage_error(published, tmp_path):
    outcome = CliRunner().invoke(main, ["audit", str(published.mixed_release), "--raw", str(tmp_path / "nope.csv")])
    assert outcome.exit_code == 2, outcome.output
    assert not list(tmp_path.glob("*.json"))


def test_audit_of_a_directory_without_manifest_is_refused_with_a_message(tmp_path):
    empty = tmp_path / "not_a_release"
    empty.mkdir()
    raw = tmp_path / "raw.csv"
    raw.write_text("a,b\n1,2\n")
    outcome = CliRunner().invoke(main, ["audit", str(empty), "--raw", str(raw), "--output", str(tmp_path / "r.json")])
    assert outcome.exit_code != 0
    assert "manifest.json" in outcome.output
    assert not (tmp_path / "r.json").exists()


@pytest.mark.parametrize("case", ["no_manifest", "raw_without_the_columns"])
def test_audit_of_unusable_input_exits_with_status_2(published, tmp_path, case):
    raw = tmp_path / "raw.csv"
    raw.write_text("a,b\n1,2\n")
    if case == "no_manifest":
        release, raw_path = tmp_path / "not_a_release", published.csv
        release.mkdir()
    else:
        release, raw_path = published.mixed_release, raw
    outcome = CliRunner().invoke(main, ["audit", str(release), "--raw", str(raw_path), "--output", str(tmp_path / "r.json")])
    assert outcome.exit_code == 2, outcome.output


# --------------------------------------------------------------------------------------------
# 3. No raw quasi-identifier or input row id in the audit report or the release


def test_audit_report_holds_no_quasi_identifier_value(published, audits):
    example = published.example
    qi_values = _qi_strings(example)
    countries = {str(r["qi"]["Country"]) for r in example["input"]}
    for _, report, target in audits.values():
        strings = _strings_in(report)
        assert not qi_values & set(strings), sorted(qi_values & set(strings))
        text = target.read_text()
        assert not [c for c in countries if c in text]
        # no key that could carry an input row number or a raw record
        keys = {k for k in strings if k in {"source_row_id", "input_row", "records", "raw_records"}}
        assert not keys
        # the only row ids listed are release row ids (renumbered, present in the release)
        release = Path(report["release"]["directory"])
        released_ids = set(_read_parquet(release / "attribute_table.parquet")["row_id"].tolist())
        if (release / "sac_released.parquet").is_file():
            released_ids |= set(_read_parquet(release / "sac_released.parquet")["row_id"].tolist())
        assert set(report["adversary"]["release_row_ids_above_bound"]) <= released_ids


@pytest.mark.parametrize("model", ["mixed", "rating"])
def test_release_directory_publishes_no_more_than_the_input_quasi_identifiers(published, model):
    example = published.example
    release = published.mixed_release if model == "mixed" else published.rating_release
    quasi_identifier_columns = example_quasi_identifiers(example)
    published_rows = Counter()
    for file in release.glob("*.parquet"):
        frame = _read_parquet(file)
        assert "source_row_id" not in frame.columns
        if set(quasi_identifier_columns) <= set(frame.columns):
            published_rows.update(tuple(str(v) for v in row) for row in frame[quasi_identifier_columns].itertuples(index=False))
    # each input record's quasi-identifiers appear exactly once, nothing else
    assert published_rows == _qi_of_input_ids(example, [r["id"] for r in example["input"]])
    manifest_strings = set(_strings_in(_manifest(release)))
    assert not _qi_strings(example) & manifest_strings


# --------------------------------------------------------------------------------------------
# 4. adversary_view on golden example A (pure core)


def _golden_rules(example: dict) -> pd.DataFrame:
    return pd.DataFrame(
        [
            {
                "antecedent_attribute": r["lhs"][0],
                "antecedent_value": r["lhs"][1],
                "consequent_attribute": r["rhs"][0],
                "consequent_value": r["rhs"][1],
                "support_antecedent": r["supp_lhs"],
                "support_both": r["supp_ab"],
            }
            for r in example["strong_rules"]
        ]
    )


def _view(tables, rules):
    return adversary_view(
        rules,
        sac_released=tables.sac_released,
        attribute_table=tables.attribute_table,
        id_table=tables.id_table,
        attribute_clusters=tables.attribute_clusters,
    )


def test_adversary_view_rating_release_of_example_a():
    example = _golden_a()
    frame, quasi_identifier_columns, sensitive_attribute_columns = (
        example_frame(example),
        example_quasi_identifiers(example),
        example["SA"],
    )
    id_table, attribute_sids = rating_tables(frame, sensitive_attribute_columns, ell=example["l"])
    empty_sac = pd.DataFrame(columns=["group_id", "row_id", *quasi_identifier_columns, *sensitive_attribute_columns])
    tables = assemble_release_tables(
        frame,
        quasi_identifier_columns,
        sensitive_attribute_columns,
        sac_permuted=empty_sac,
        attribute_sids=attribute_sids,
        id_table=id_table,
        clusters=[],
    )
    view = _view(tables, _golden_rules(example))
    assert len(view) == len(example["input"])
    assert view["row_id"].is_monotonic_increasing
    certain = view[(view["numerator"] == view["denominator"]) & (view["numerator"] > 0)]
    assert len(certain) == len(example["attack_rating"])
    assert (certain["probability"] == 1.0).all()
    others = view.drop(certain.index)
    assert (others["numerator"] == 0).all() and (others["probability"] == 0.0).all()
    assert (others["rule"] == -1).all()
    to_source = tables.row_map.set_index("row_id")["source_row_id"]
    assert sorted(int(to_source[r]) for r in certain["row_id"]) == sorted(int(i) for i in example["attack_rating"])


def test_adversary_view_mixed_release_of_example_a():
    example = _golden_a()
    frame, quasi_identifier_columns, sensitive_attribute_columns, ell = (
        example_frame(example),
        example_quasi_identifiers(example),
        example["SA"],
        example["l"],
    )
    result = run_mixed_model(frame, sensitive_attribute_columns, ell=ell, min_confidence=example["min_conf"], seed=0)
    tables = assemble_release_tables(
        frame,
        quasi_identifier_columns,
        sensitive_attribute_columns,
        sac_permuted=result.sac_permuted,
        attribute_sids=result.attribute_sids,
        id_table=result.id_table,
        clusters=result.clusters,
    )
    view = _view(tables, _golden_rules(example))
    assert len(view) == len(example["input"])
    fractions = [Fraction(int(n), int(d)) for n, d in zip(view["numerator"], view["denominator"], strict=True)]
    assert max(fractions) == Fraction(1, ell)
    assert all(f <= Fraction(1, ell) for f in fractions)
    # the rule holders (SPEC §16.1: 1/2 each) and their group partners are at 1/ℓ; AT rows at 0
    to_source = tables.row_map.set_index("row_id")["source_row_id"]
    source_probability = {int(to_source[r]): f for r, f in zip(view["row_id"], fractions, strict=True)}
    for holder, expected in example["attack_mixed"].items():
        assert source_probability[int(holder)] == Fraction(expected)
    for row in example["IR_left_ids"]:
        assert source_probability[int(row)] == 0
