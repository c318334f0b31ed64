"""report.html of every release (issue 7): written into the release before the atomic rename,
self-contained, with the contract the browser test relies on, golden figures of SPEC §16.2
(Example A: RCE 13 mixed / 14 Rating, confidences 3/4 recovered / 3/16 estimated, Rating's
disclosure 1), the Rating comparison, the (k, ℓ) page, and `msa-release report`."""

import html
import json
import re
from fractions import Fraction
from html.parser import HTMLParser
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from pipeline.cli import main
from pipeline.release.publish import contract_schemas, list_releases, publish_release, read_latest
from pipeline.reporting.release_report import REPORT_DATA, REPORT_HTML, render_report
from pipeline.models import job_of_model
from tests.jobs import run_job
from tests.conftest import example_frame, example_quasi_identifiers

MIXED_GATES = {
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
KL_GATES = {"kl_clusters_are_k_anonymous", "kl_clusters_are_l_diverse", "kl_records_accounted_for", "utility_within_thresholds"}


class Page(HTMLParser):
    """The parts of report.html the contract speaks about."""

    def __init__(self):
        super().__init__()
        self.h1 = []
        self.images = []
        self.gates = {}
        self.tags = set()
        self.external = []
        self._in_h1 = False

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        self.tags.add(tag)
        if tag == "h1":
            self._in_h1 = True
            self.h1.append("")
        if tag == "img":
            self.images.append(attrs)
        if "data-gate" in attrs:
            self.gates[attrs["data-gate"]] = attrs.get("data-status")
        for key in ("src", "href"):
            value = attrs.get(key) or ""
            if value and not value.startswith("data:") and not value.startswith("#"):
                self.external.append(value)

    def handle_endtag(self, tag):
        if tag == "h1":
            self._in_h1 = False

    def handle_data(self, data):
        if self._in_h1:
            self.h1[-1] += data


def parse(path: Path) -> Page:
    page = Page()
    page.feed(path.read_text(encoding="utf-8"))
    return page


def assert_contract(path: Path, gates: set[str]) -> Page:
    page = parse(path)
    assert any("msa-release report" in h for h in page.h1)
    assert page.images, "no figure"
    for image in page.images:
        assert image["src"].startswith("data:image/png;base64,")
        assert (image.get("alt") or "").strip()
    assert set(page.gates) == gates
    assert page.external == []  # self-contained: no network resource, no link out
    assert not ({"script", "link", "iframe"} & page.tags)
    return page


def text_without_images(path: Path) -> str:
    return re.sub(r'src="data:image/png;base64,[^"]*"', "", path.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def example_a_releases(golden, tmp_path_factory):
    """Example A (SPEC §16) published as Rating (allow_disclosure) first, then mixed, in one home."""
    example = golden["example_A"]
    root = tmp_path_factory.mktemp("report")
    csv = root / "example_a.csv"
    example_frame(example).drop(columns="row_id").to_csv(csv, index=False)
    settings = {
        "input_path": str(csv),
        "csv_header": True,
        "column_names": [],
        "quasi_identifiers": example_quasi_identifiers(example),
        "sensitive_attributes": example["SA"],
        "ell": example["l"],
        "min_confidence": example["min_conf"],
        "seed": 0,
        "randomness": "spec-reference",
        "min_support": 1,
        "residual_policy": "suppress",
        "grouping": "p1",
    }
    home = root / "home"
    releases = {}
    # both models of one input in one home (the comparison in report.html): Rating is a comparison (issue 15), so the
    # shared mixed release after it is no recomposition of a shared release
    for model, extra in (("rating", {"allow_disclosure": True}), ("mixed", {})):
        config = {**settings, "model": model, **extra}
        result = run_job(home, job_of_model(model), config)
        assert result.success, model
        releases[model] = read_latest(home / "releases") if model == "mixed" else list_releases(home / "comparisons")[-1]
    assert read_latest(home / "releases") == releases["mixed"] and releases["rating"].parent.name == "comparisons"
    return {"example": example, "csv": csv, "home": home, **releases}


def test_every_release_has_a_self_contained_report_with_the_contract(example_a_releases):
    for model in ("mixed", "rating"):
        release = example_a_releases[model]
        assert (release / REPORT_HTML).is_file() and (release / REPORT_DATA).is_file()
        page = assert_contract(release / REPORT_HTML, MIXED_GATES)
        manifest = json.loads((release / "manifest.json").read_text())
        statuses = {c["name"]: c["status"] for c in manifest["checks"]}
        assert page.gates == statuses
    # the mixed model passes every gate; Rating's two SAC~/rule gates do not apply and its
    # disclosure gate fails, overridden (SPEC §16.2: Rating discloses 3 records with certainty)
    assert set(parse(example_a_releases["mixed"] / REPORT_HTML).gates.values()) == {"passed"}
    rating = parse(example_a_releases["rating"] / REPORT_HTML).gates
    assert rating["disclosure_within_bound"] == "failed_overridden"
    assert rating["sac_released_is_l_diverse"] == "not_applicable"


def test_report_figures_are_the_golden_ones(example_a_releases):
    """SPEC §16.2 Example A: AIL 0 and RCE 13 (mixed) / 14 (Rating); rule confidences 3/4 raw,
    3/4 recovered from the mixed release and 3/16 estimated from Rating."""
    example = example_a_releases["example"]
    for model, rce, recovered in (
        ("mixed", "RCE_mixed", "conf_recovered_mixed"),
        ("rating", "RCE_rating", "conf_estimated_rating"),
    ):
        data = json.loads((example_a_releases[model] / REPORT_DATA).read_text())
        assert data["metrics"]["reconstruction_error"] == pytest.approx(float(Fraction(example[rce])))
        assert data["metrics"]["additional_information_loss"] == pytest.approx(float(Fraction(example[f"AIL_{model}"])))
        expected = {
            f"{r['lhs'][0]}={r['lhs'][1]}=>{r['rhs'][0]}={r['rhs'][1]}": Fraction(r["supp_ab"], r["supp_lhs"])
            for r in example["strong_rules"]
        }
        got = {f"{r['antecedent'][0]}={r['antecedent'][1]}=>{r['consequent'][0]}={r['consequent'][1]}": r for r in data["rules"]}
        assert set(got) == set(expected)
        for name, rule in got.items():
            assert rule["raw_confidence"] == pytest.approx(float(expected[name]))
            assert rule["released_confidence"] == pytest.approx(float(Fraction(example[recovered][name])))


def test_report_shows_no_value_outside_the_rules(example_a_releases):
    """Only rule values (recoverable from the release, Lemma 22) appear; no other sensitive value
    of the input, and no input row."""
    example = example_a_releases["example"]
    rule_values = {v for r in example["strong_rules"] for v in (r["lhs"][1], r["rhs"][1])}
    other_values = {str(v) for row in example["input"] for v in row["sa"].values()} - rule_values
    assert other_values
    for model in ("mixed", "rating"):
        text = text_without_images(example_a_releases[model] / REPORT_HTML)
        leaked = sorted(v for v in other_values if re.search(rf"(?<![\w]){re.escape(v)}(?![\w])", text))
        assert leaked == []
        assert all(re.search(rf"(?<![\w]){re.escape(v)}(?![\w])", text) for v in rule_values)


def test_rating_comparison_in_the_mixed_report_and_after_regeneration(example_a_releases):
    mixed, rating = example_a_releases["mixed"], example_a_releases["rating"]
    mixed_text = text_without_images(mixed / REPORT_HTML)
    assert "Comparison with the Rating baseline" in mixed_text and f"Rating (comparison {rating.name})" in mixed_text
    # the Rating release was published first: no mixed release to compare with yet
    rating_text = text_without_images(rating / REPORT_HTML)
    assert "Comparison with the mixed model" in rating_text and "Not available" in rating_text
    assert "msa-release run --model mixed" in rating_text and "--allow-disclosure" not in rating_text
    assert "COMPARISON — not for sharing" in rating_text.split("<h1>")[0]  # the banner, before the title
    outcome = CliRunner().invoke(main, ["report", str(rating)])
    assert outcome.exit_code == 0, outcome.output
    regenerated = text_without_images(rating / REPORT_HTML)
    assert mixed.name in regenerated
    assert_contract(rating / REPORT_HTML, MIXED_GATES)


def test_report_command_without_report_data_needs_raw(example_a_releases, tmp_path):
    import shutil

    copy = tmp_path / "releases" / example_a_releases["mixed"].name
    shutil.copytree(example_a_releases["mixed"], copy)
    (copy / REPORT_DATA).unlink()
    (copy / REPORT_HTML).unlink()
    runner = CliRunner()
    outcome = runner.invoke(main, ["report", str(copy)])
    assert outcome.exit_code == 0, outcome.output
    text = text_without_images(copy / REPORT_HTML)
    assert "Not available" in text and "--raw" in text
    outcome = runner.invoke(main, ["report", str(copy), "--raw", str(example_a_releases["csv"])])
    assert outcome.exit_code == 0, outcome.output
    text = text_without_images(copy / REPORT_HTML)
    assert "RCE per record" in text and "s1_1" in text
    assert_contract(copy / REPORT_HTML, MIXED_GATES)
    assert not (copy / REPORT_DATA).exists()  # the release's own files are not changed


def test_report_command_refuses_a_directory_that_is_not_a_release(tmp_path):
    outcome = CliRunner().invoke(main, ["report", str(tmp_path)])
    assert outcome.exit_code == 2
    assert str(tmp_path) in outcome.output and "manifest.json" in outcome.output


def test_failed_gate_renders_as_failed():
    """A manifest whose gate failed (as the CLI would see it had the release been forced)."""
    manifest = {
        "release_id": "r1",
        "model": "mixed",
        "ell": 3,
        "min_confidence": 0.8,
        "seed": 0,
        "quasi_identifiers": ["a"],
        "sensitive_attributes": ["x", "y"],
        "n_input": 10,
        "n_dropped_missing": 1,
        "n_sac_released": 3,
        "n_attribute_table": 6,
        "n_deleted": 0,
        "n_suppressed_cells": 0,
        "checks": [
            {
                "name": "disclosure_within_bound",
                "passed": False,
                "status": "failed",
                "observed": {
                    "max_disclosure_probability": 1.0,
                    "histogram_bins_0_to_1_step_0.1": [0] * 9 + [2],
                    "gx_expectations": [
                        {
                            "type": "expect_column_values_to_be_in_set",
                            "column": "within_bound",
                            "success": False,
                            "value_set": [True],
                            "element_count": 2,
                            "unexpected_count": 2,
                            "unexpected_percent": 100.0,
                        }
                    ],
                },
            },
            {"name": "records_accounted_for", "passed": True, "status": "passed", "observed": {}},
        ],
    }
    text = render_report(manifest, None)
    assert re.search(r'data-gate="disclosure_within_bound" data-status="failed"', text)
    assert re.search(r'data-gate="records_accounted_for" data-status="passed"', text)
    assert "Not every gate passed" in text
    assert "expect_column_values_to_be_in_set" in text  # the GX result is rendered
    assert "Not available" in text  # no report.json: rules, AIL/RCE and the baseline are said missing


def test_extra_files_are_part_of_the_atomic_release(tmp_path):
    schemas = contract_schemas(["q"], ["x", "y"], model="rating")
    tables = {
        "attribute_table": pd.DataFrame({"row_id": pd.Series([], dtype="int64"), "q": [], "x": [], "y": []}),
        "id_table": pd.DataFrame({"attribute": [], "sid": [], "value": [], "count": []}),
    }
    releases = tmp_path / "releases"
    with pytest.raises(ValueError, match="plain file name"):
        publish_release(releases, "bad", tables, schemas, {"release_id": "bad"}, extra_files={"../x.html": b"x"})
    with pytest.raises(ValueError, match="plain file name"):
        publish_release(releases, "bad", tables, schemas, {"release_id": "bad"}, extra_files={"manifest.json": b"x"})
    assert read_latest(releases) is None and [p.name for p in releases.iterdir()] == []
    path = publish_release(releases, "ok", tables, schemas, {"release_id": "ok"}, extra_files={"report.html": b"<h1>x</h1>"})
    assert (path / "report.html").read_bytes() == b"<h1>x</h1>"


@pytest.fixture(scope="module")
def kl_release(tmp_path_factory):
    from tests.e2e.test_kl_pipeline import kl_settings, run_kl_job, write_hierarchies, write_table

    root = tmp_path_factory.mktemp("kl_report")
    csv, hierarchies = write_table(root / "table.csv"), write_hierarchies(root / "hierarchies")
    result = run_kl_job(root / "home", kl_settings(csv, hierarchies))
    assert result.success
    return read_latest(root / "home" / "releases")


def test_kl_release_has_its_own_report(kl_release):
    page = assert_contract(kl_release / REPORT_HTML, KL_GATES)
    assert set(page.gates.values()) == {"passed"}
    manifest = json.loads((kl_release / "manifest.json").read_text())
    data = json.loads((kl_release / REPORT_DATA).read_text())["kl"]
    counts = {int(size): n for size, n in data["class_size_counts"].items()}
    assert sum(counts.values()) == manifest["n_clusters"]
    assert sum(size * n for size, n in counts.items()) == manifest["n_released"]
    assert min(counts) >= manifest["k"]
    heights = {a: f["height"] for a, f in manifest["hierarchies"]["files"].items()}
    assert set(data["average_generalization_level"]) == set(manifest["quasi_identifiers"])
    assert all(0 <= level <= heights[a] for a, level in data["average_generalization_level"].items())
    text = text_without_images(kl_release / REPORT_HTML)
    assert "Equivalence classes and generalisation cost" in text and "Comparison with" not in text
    assert len(page.images) >= 3  # accounting, class sizes, generalisation levels


def test_kl_report_regenerates_without_report_data(kl_release, tmp_path):
    import shutil

    copy = tmp_path / kl_release.name
    shutil.copytree(kl_release, copy)
    (copy / REPORT_DATA).unlink()
    outcome = CliRunner().invoke(main, ["report", str(copy)])
    assert outcome.exit_code == 0, outcome.output
    page = assert_contract(copy / REPORT_HTML, KL_GATES)
    assert len(page.images) >= 2  # class sizes from kl_released.parquet; levels are not recorded


def test_the_private_rating_baseline_is_the_golden_one_and_shown_without_a_rating_release(example_a_releases, tmp_path):
    """Issue 12 (series (c)): report.json carries P1's plain Rating of the same records, computed in the run and never
    published; its figures are SPEC §16.2's for Example A: AIL 0, RCE 14 of 16 records, records 1, 5 and 6 disclosed
    with certainty by the strong-rule adversary. Without a Rating release in the home, report.html shows it."""
    import shutil

    example = example_a_releases["example"]
    data = json.loads((example_a_releases["mixed"] / REPORT_DATA).read_text())
    baseline = data["private_rating_baseline"]
    assert baseline["published"] is False and baseline["model"] == "rating"
    assert baseline["additional_information_loss"] == pytest.approx(float(Fraction(example["AIL_rating"])))
    assert baseline["reconstruction_error_per_record"] == pytest.approx(
        float(Fraction(example["RCE_rating"])) / len(example["input"])
    )
    assert baseline["n_holders_certain"] == sum(1 for p in example["attack_rating"].values() if Fraction(p) == 1)
    # a home holding only the mixed release: the page compares with the private baseline
    alone = tmp_path / "releases" / example_a_releases["mixed"].name
    shutil.copytree(example_a_releases["mixed"], alone)
    outcome = CliRunner().invoke(main, ["report", str(alone)])
    assert outcome.exit_code == 0, outcome.output
    text = text_without_images(alone / REPORT_HTML)
    assert (
        "computed privately in this run and never published" in text and "Not available" not in text.split("Comparison with")[1]
    )


def test_report_shows_every_rule_s_support_and_the_identity_risk_of_the_published_quasi_identifiers(example_a_releases):
    """Issue 15: Example A's two rules are held by 3 records of 4 holding the antecedent (SPEC §16.1), shown beside
    their confidences; its 16 records have 16 distinct (Age, Country) pairs, published unchanged by the p1 grouping,
    so every released record is unique on its published quasi-identifiers (k = 1) and the summary says so."""
    example = example_a_releases["example"]
    expected = {(tuple(r["lhs"]), tuple(r["rhs"])): (r["supp_ab"], r["supp_lhs"]) for r in example["strong_rules"]}
    assert len({tuple(r["qi"].values()) for r in example["input"]}) == len(example["input"]) == 16
    for model in ("mixed", "rating"):
        data = json.loads((example_a_releases[model] / REPORT_DATA).read_text())
        got = {(tuple(r["antecedent"]), tuple(r["consequent"])): (r["support"], r["antecedent_support"]) for r in data["rules"]}
        assert got == expected
        risk = data["identity_risk"]
        assert (risk["n_records"], risk["n_classes"], risk["smallest_class"], risk["n_unique"]) == (16, 16, 1, 16)
        assert risk["records_in_classes_smaller_than"] == {"2": 16, "5": 16, "10": 16}
        text = text_without_images(example_a_releases[model] / REPORT_HTML)
        assert "What this release does not protect against" in text
        assert "single out 16 (100 %) released records" in text
        assert "3 (18.8 %)" in text  # each rule's support: 3 of the 16 records


def test_every_report_carries_the_query_workload(example_a_releases, kl_release):
    """Issue 18: the publish step measures the COUNT-query workload against the private records (16 in Example A):
    report.json holds W1/W2 figures, report.html the section; the kl release's report too."""
    for release, n_records in ((example_a_releases["mixed"], 16), (example_a_releases["rating"], 16), (kl_release, None)):
        data = json.loads((release / REPORT_DATA).read_text())["query_workload"]
        manifest = json.loads((release / "manifest.json").read_text())
        expected = n_records if n_records is not None else manifest["n_input"] - manifest["n_dropped_missing"]
        assert data["n_records"] == expected and data["floor"] == max(1.0, 0.001 * expected)
        for name in ("W1", "W2"):
            assert data[name]["n_queries"] == 1000 and 0 <= data[name]["median"] <= data[name]["p90"]
        text = text_without_images(release / REPORT_HTML)
        assert "Query workload" in text and "Half of the W1 queries are off by at most" in text


def test_the_mixed_report_measures_the_one_known_value_adversary(example_a_releases):
    """The docs reviewer and a diff review, session 38: report.html said "not measured on this release" of the
    one-known-value adversary. SPEC §16 Example A: clusters [[S1, S2], [S3]] (a cluster of 2), groups of 2 holding 8 of
    the 16 records, nothing deleted: one known value pins another for the 8 SAC~ records, half of those released."""
    example = example_a_releases["example"]
    n_sac = sum(len(group) for group in example["groups"])
    n_released = len(example["input"]) - len(example["deleted_ids"])
    assert max(len(c) for c in example["clusters"]) >= 2 and (n_sac, n_released) == (8, 16)
    data = json.loads((example_a_releases["mixed"] / REPORT_DATA).read_text())
    assert data["one_known_value"] == {"share_records_pinning_another_value": 0.5, "largest_cluster": 2, "n_released": 16}
    text = " ".join(html.unescape(re.sub(r"<[^>]+>", " ", (example_a_releases["mixed"] / REPORT_HTML).read_text())).split())
    assert "one known value pins another for 8 (50 %) of the released records" in text
