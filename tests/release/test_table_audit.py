"""`msa-release audit --table` on another tool's generalized table (issue 16).

The tool is played by :func:`tests.release.generalize_like_anjana.generalize_like_anjana` (anjana's full-domain
generalization with suppression; anjana itself cannot be installed beside this project's pins): Adult at k = 5 and
distinct ℓ = 3 per sensitive attribute. Expected figures come from pycanon on the same file, from the requirement the
tool met, or from hand-made tables."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from pipeline.cli import main
from tests.release.generalize_like_anjana import generalize_like_anjana

ROOT = Path(__file__).resolve().parents[2]
HIERARCHIES = ROOT / "data" / "adult" / "hierarchies"
QUASI_IDENTIFIERS = ["sex", "race", "marital-status", "native-country", "workclass"]
SENSITIVE_ATTRIBUTES = ["education", "occupation", "age", "relationship"]


def audit(*arguments: str, home: Path):
    return CliRunner().invoke(main, ["audit", *arguments, "--home", str(home)])


def table_arguments(path: Path, quasi_identifiers=QUASI_IDENTIFIERS, sensitive_attributes=SENSITIVE_ATTRIBUTES) -> list[str]:
    return [
        "--table",
        str(path),
        "--quasi-identifiers",
        ",".join(quasi_identifiers),
        "--sensitive-attributes",
        ",".join(sensitive_attributes),
    ]


@pytest.fixture(scope="module")
def adult_release(adult_records, tmp_path_factory) -> dict:
    """Adult generalized at k = 5, distinct ℓ = 3 per attribute (at most 5% suppressed), audited with the raw table."""
    base = tmp_path_factory.mktemp("table_audit")
    table, levels = generalize_like_anjana(
        adult_records, QUASI_IDENTIFIERS, SENSITIVE_ATTRIBUTES, HIERARCHIES, k=5, ell=3, max_suppressed_share=0.05
    )
    path = base / "adult_k5_l3.csv"
    table.to_csv(path, index=False)
    raw = base / "adult_raw.csv"
    adult_records[[*QUASI_IDENTIFIERS, *SENSITIVE_ATTRIBUTES]].to_csv(raw, index=False)
    home = base / "home"
    outcome = audit(
        *table_arguments(path), "--k", "5", "--ell", "3", "--hierarchies", str(HIERARCHIES), "--raw", str(raw), home=home
    )
    targets = list((home / "audits").glob("table-*/audit.json"))
    return {"table": table, "levels": levels, "path": path, "outcome": outcome, "targets": targets, "home": home}


def test_adult_audit_writes_json_and_page_under_the_home(adult_release):
    outcome, targets = adult_release["outcome"], adult_release["targets"]
    assert len(targets) == 1, outcome.output
    assert (targets[0].parent / "report.html").is_file()
    report = json.loads(targets[0].read_text())
    assert set(report) == {
        "verdict", "reasons", "warnings", "identity_risk", "table", "raw", "classes", "hierarchies", "strong_rule_adversary",
        "query_workload",
    }  # fmt: skip
    # the COUNT-query workload (issue 18), with --raw and --hierarchies: both workloads, errors ordered
    workload = report["query_workload"]
    assert workload["n_records"] == report["raw"]["n_records"]
    for name in ("W1", "W2"):
        assert workload[name]["n_queries"] == 1000 and 0 <= workload[name]["median"] <= workload[name]["p90"]
    assert "workload" in outcome.output and "COUNT queries per workload" in outcome.output
    assert report["identity_risk"]["smallest_class"] == report["classes"]["k"] >= 5
    assert report["identity_risk"]["n_unique"] == 0
    assert str(targets[0]) in outcome.output
    page = (targets[0].parent / "report.html").read_text()
    assert "Diverse" in page and report["verdict"] in page


def test_adult_audit_agrees_with_pycanon_and_the_requirement(adult_release):
    anonymity = pytest.importorskip("pycanon.anonymity")
    report = json.loads(adult_release["targets"][0].read_text())
    table = pd.read_csv(adult_release["path"], dtype=str, keep_default_na=False)
    classes = report["classes"]
    assert classes["n_records"] == len(table)
    assert classes["k"] == anonymity.k_anonymity(table, QUASI_IDENTIFIERS) >= 5
    for attribute in SENSITIVE_ATTRIBUTES:
        figures = classes["per_attribute"][attribute]
        assert figures["distinct_ell"] == anonymity.l_diversity(table, QUASI_IDENTIFIERS, [attribute]) >= 3
        assert int(figures["entropy_ell"]) == anonymity.entropy_l_diversity(table, QUASI_IDENTIFIERS, [attribute])
    # generalization measured against the hierarchies: the levels the tool chose
    for attribute, level in adult_release["levels"].items():
        assert report["hierarchies"][attribute]["mean_level"] == level


def test_adult_at_distinct_ell_3_per_attribute_is_not_diverse_over_whole_tuples(adult_release):
    """The finding of issue 16: ℓ = 3 attribute by attribute leaves classes without 3 totally different tuples,
    records pinned by one known value, posteriors far above the baseline and certain rule inferences."""
    outcome = adult_release["outcome"]
    assert outcome.exit_code == 1, outcome.output
    report = json.loads(adult_release["targets"][0].read_text())
    assert report["verdict"] == "FAIL"
    diverse = report["classes"]["diverse"]
    assert diverse["n_classes_below_ell"] >= 1 and diverse["smallest"] < 3
    assert report["classes"]["one_known_value"]["share_records_pinning_another_value"] > 0
    assert report["classes"]["learned_model"]["max_posterior"] > 1 / 3 + 0.05
    assert report["strong_rule_adversary"]["n_rules"] > 0
    assert report["strong_rule_adversary"]["n_records_certain"] > 0


def write_semicolon_csv(path: Path, rows: list[tuple[str, ...]], columns: list[str]) -> Path:
    """ARX writes ';'-separated files."""
    path.write_text(";".join(columns) + "\n" + "\n".join(";".join(row) for row in rows) + "\n")
    return path


def test_a_diverse_table_passes_and_a_leaky_one_is_flagged(tmp_path):
    columns = ["zip", "s1", "s2"]
    diverse = [("130**", f"a{i}", f"x{i}") for i in range(3)] + [("*", f"b{i}", f"y{i}") for i in range(3)]
    passed = audit(
        *table_arguments(write_semicolon_csv(tmp_path / "ok.csv", diverse, columns), ["zip"], ["s1", "s2"]),
        "--k",
        "3",
        "--ell",
        "3",
        home=tmp_path / "home",
    )
    assert passed.exit_code == 0, passed.output
    assert "PASS" in passed.output.splitlines()[0]
    # the same classes, but in the second one every record holds b0 with y0 or y1: distinct s1 = 1, Diverse 1
    leaky = diverse[:3] + [("*", "b0", "y0"), ("*", "b0", "y1"), ("*", "b0", "y0")]
    failed = audit(
        *table_arguments(write_semicolon_csv(tmp_path / "leaky.csv", leaky, columns), ["zip"], ["s1", "s2"]),
        "--k",
        "3",
        "--ell",
        "3",
        "--output",
        str(tmp_path / "leaky.json"),
        home=tmp_path / "home",
    )
    assert failed.exit_code == 1, failed.output
    report = json.loads((tmp_path / "leaky.json").read_text())
    assert report["classes"]["diverse"] | {"n_classes_decided_by_search": 0} == {
        "ell": 3,
        "smallest": 1,
        "n_classes_below_ell": 1,
        "n_records_in_classes_below_ell": 3,
        "n_classes_decided_by_search": 0,
    }
    assert report["classes"]["per_attribute"]["s1"]["distinct_ell"] == 1
    assert report["classes"]["learned_model"]["max_posterior"] == 1.0
    assert any("s1" in warning for warning in report["warnings"])


def test_parquet_tables_are_read(tmp_path):
    table = pd.DataFrame({"zip": ["*"] * 4, "s1": ["a", "b", "c", "d"], "s2": ["w", "x", "y", "z"]})
    table.to_parquet(tmp_path / "t.parquet", index=False)
    outcome = audit(
        *table_arguments(tmp_path / "t.parquet", ["zip"], ["s1", "s2"]), "--k", "4", "--ell", "4", home=tmp_path / "h"
    )
    assert outcome.exit_code == 0, outcome.output


def test_unusable_tables_exit_2_naming_the_column_never_a_value(tmp_path):
    rows = [("130**", "secret-value-1", "x"), ("130**", "secret-value-2", "y")]
    path = write_semicolon_csv(tmp_path / "t.csv", rows, ["zip", "s1", "s2"])
    missing = audit(*table_arguments(path, ["zip"], ["s1", "disease"]), home=tmp_path / "h")
    assert missing.exit_code == 2 and "disease" in missing.output and "secret-value" not in missing.output
    hierarchies = tmp_path / "hierarchies"
    hierarchies.mkdir()
    (hierarchies / "t_hierarchy_zip.csv").write_text("13053;1305*;130**;*\n")
    unknown = audit(*table_arguments(path, ["zip", "s1"], ["s2"]), "--hierarchies", str(hierarchies), home=tmp_path / "h")
    assert unknown.exit_code == 1, unknown.output  # audited (s1 has no hierarchy file: not checked); FAIL at k = 2
    (hierarchies / "t_hierarchy_s1.csv").write_text("a;*\n")
    unknown = audit(*table_arguments(path, ["zip", "s1"], ["s2"]), "--hierarchies", str(hierarchies), home=tmp_path / "h")
    assert unknown.exit_code == 2 and "'s1'" in unknown.output and "secret-value" not in unknown.output
    neither = audit(home=tmp_path / "h")
    assert neither.exit_code == 2 and "--table" in neither.output


def test_the_page_escapes_every_text(tmp_path):
    from pipeline.release.class_audit import audit_generalized_table
    from pipeline.reporting.class_audit_report import class_audit_html

    table = pd.DataFrame({"zip": ["*"] * 3, "<s1>": ["a", "b", "c"], "s2": ["x", "y", "z"]})
    table.to_csv(tmp_path / "t.csv", index=False)
    page = class_audit_html(audit_generalized_table(tmp_path / "t.csv", ["zip"], ["<s1>", "s2"], k=3, ell=3))
    assert "<s1>" not in page and "&lt;s1&gt;" in page
    assert "<script" not in page


@pytest.mark.parametrize("hidden", ["*", "", "?", "NULL"])
def test_a_suppressed_or_missing_sensitive_cell_adds_no_diversity(tmp_path, hidden):
    """A red team's table: one class of three records, two publishing flu and aspirin and one whose sensitive cells
    are suppressed or missing. It passed at k = 3, ℓ = 2 (the hidden cells counted as a second distinct value); the
    hidden cell is now audited as its class's most frequent value, so the class has one distinct value: FAIL."""
    rows = [("021**", "*", "flu", "aspirin"), ("021**", "*", "flu", "aspirin"), ("021**", "*", hidden, hidden)]
    path = tmp_path / "t.csv"
    path.write_text("zip,sex,diagnosis,drug\n" + "".join(",".join(row) + "\n" for row in rows))
    outcome = audit(
        *table_arguments(path, ["zip", "sex"], ["diagnosis", "drug"]),
        "--k",
        "3",
        "--ell",
        "2",
        "--output",
        str(tmp_path / "a.json"),
        home=tmp_path / "h",
    )
    assert outcome.exit_code == 1, outcome.output
    report = json.loads((tmp_path / "a.json").read_text())
    assert report["classes"]["per_attribute"]["diagnosis"]["distinct_ell"] == 1
    assert report["classes"]["diverse"]["smallest"] == 1
    assert any("diagnosis: 1 cell(s) suppressed or missing" in warning for warning in report["warnings"])


def test_the_most_frequent_value_of_the_class_fills_a_hidden_cell():
    from pipeline.release.class_audit import worst_case_sensitive_values

    table = pd.DataFrame(
        {"zip": ["1*", "1*", "1*", "1*", "2*"], "s": ["a", "b", "b", "*", "?"]},
    )
    filled, replaced = worst_case_sensitive_values(table, ["zip"], ["s"])
    assert filled["s"].tolist() == ["a", "b", "b", "b", "*"]  # class 2* has no value: one label for its cells
    assert replaced == {"s": 2}
    assert table["s"].tolist() == ["a", "b", "b", "*", "?"]  # the caller's frame is left as it was


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("zip,s1,s2\n1*,a,x\n1*,b\n", "1 row(s) have fewer fields than the header, the first on line 3"),
        ("zip,s1,s2\n1*,a,x\n1*,b,y,extra\n", "line 3 has 4 fields, more than the header"),
        ("zip,s1,s2\n", "the table has no records"),
    ],
)
def test_ragged_or_empty_tables_exit_2_naming_the_line(tmp_path, text, expected):
    path = tmp_path / "t.csv"
    path.write_text(text)
    outcome = audit(*table_arguments(path, ["zip"], ["s1", "s2"]), home=tmp_path / "h")
    assert outcome.exit_code == 2, outcome.output
    assert expected in " ".join(outcome.output.split())


def test_min_support_sets_the_strong_rule_adversarys_rules(adult_release, tmp_path):
    # session 38's closing note: the audit mined at one support only; --min-support now chooses the adversary's
    (target,) = adult_release["targets"]
    default = json.loads(target.read_text())["strong_rule_adversary"]
    assert default["min_support"] == 5  # max(ℓ, 5) at ℓ = 3
    raw = adult_release["path"].parent / "adult_raw.csv"
    output = tmp_path / "audit.json"
    outcome = audit(
        *table_arguments(adult_release["path"]),
        "--k", "5", "--ell", "3", "--raw", str(raw), "--min-support", "400", "--output", str(output),
        home=adult_release["home"],
    )  # fmt: skip
    assert outcome.exit_code in (0, 1), outcome.output
    adversary = json.loads(output.read_text())["strong_rule_adversary"]
    assert adversary["min_support"] == 400
    assert "support >= 400" in outcome.output
    assert 0 < adversary["n_rules"] < default["n_rules"]


@pytest.mark.parametrize(
    ("quasi_identifiers", "sensitive_attributes", "named"),
    [
        (QUASI_IDENTIFIERS, ["education", "education"], "--sensitive-attributes lists ['education'] more than once"),
        (["sex", "sex", "race"], SENSITIVE_ATTRIBUTES, "--quasi-identifiers lists ['sex'] more than once"),
        (["sex", "education"], SENSITIVE_ATTRIBUTES, "column(s) ['education'] are listed as quasi-identifier and as sensitive"),
    ],
)
def test_a_column_listed_twice_or_in_both_roles_is_a_usage_error(
    adult_release, tmp_path, quasi_identifiers, sensitive_attributes, named
):
    # red team, session 39: the duplicate was merged silently (one sensitive attribute left, PASS); both roles gave FAIL
    outcome = audit(*table_arguments(adult_release["path"], quasi_identifiers, sensitive_attributes), home=tmp_path / "home")
    assert outcome.exit_code == 2, outcome.output
    assert named in outcome.output


def test_a_nested_parquet_column_is_refused_naming_it(tmp_path):
    # red team, session 39: a list quasi-identifier was accepted (each list audited as its text)
    import pyarrow as pa
    import pyarrow.parquet as pq

    path = tmp_path / "nested.parquet"
    pq.write_table(pa.table({"q": [[1, 2], [3]] * 5, "a": ["x", "y"] * 5, "b": ["p", "q"] * 5}), path)
    outcome = audit(*table_arguments(path, ["q"], ["a", "b"]), home=tmp_path / "home")
    assert outcome.exit_code == 2, outcome.output
    assert "column(s) 'q' (list<" in outcome.output and "hold nested or binary values" in outcome.output
