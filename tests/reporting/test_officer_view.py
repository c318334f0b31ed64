"""The privacy officer's view of report.html (issue 15): rules' supports, identity risk on the published
quasi-identifiers, the "does not protect against" box, plain readings of AIL and RCE, rounded figures everywhere,
technical references only in the collapsed appendix; and the same words in the run summary and the audit."""

from __future__ import annotations

import copy
import html
import re
from pathlib import Path

import pytest

from pipeline.reporting.formatting import format_count_share, format_figure, format_share
from pipeline.reporting.release_report import render_report

QUASI_IDENTIFIERS = ["sex", "race", "marital-status", "native-country", "workclass"]

#: A manifest shaped like the Adult release's, with the long floats the gates record (0.3333333333333333, 1.4779e-05).
MANIFEST = {
    "release_id": "20261125T000000Z-00000000",
    "created_at": "2026-11-25T00:00:00+00:00",
    "model": "mixed",
    "ell": 3,
    "min_confidence": 0.8,
    "min_support": 1,
    "seed": 0,
    "randomness": "home-secret",
    "quasi_identifiers": QUASI_IDENTIFIERS,
    "sensitive_attributes": ["education", "occupation", "age", "relationship"],
    "input_reading": {"input_file": "adult.data", "input_format": "csv", "missing_value_tokens": ["", "?"]},
    "n_input": 32561,
    "n_dropped_missing": 1843,
    "n_sac_released": 12420,
    "n_attribute_table": 12136,
    "n_deleted": 6162,
    "n_suppressed_cells": 0,
    "allow_disclosure": False,
    "disclosure_override_used": False,
    "checks": [
        {
            "name": "disclosure_within_bound",
            "passed": True,
            "status": "passed",
            "observed": {
                "bound": 0.3333333333333333,
                "max_disclosure_probability": 0.3333333333333333,
                "mean_disclosure_probability": 0.33333333333333337,
                "n_records_with_strong_rules": 1450,
                "n_records_above_bound": 0,
                "n_records_certain": 0,
                "histogram_bins_0_to_1_step_0.1": [0, 0, 0, 1450, 0, 0, 0, 0, 0, 0],
                "gx_success_percent": 100.0,
                "gx_evaluated_expectations": 1,
                "failed_expectations": "none",
                "gx_expectations": [
                    {
                        "type": "expect_column_values_to_be_between",
                        "column": "probability",
                        "max_value": 0.3333333333333333,
                        "success": True,
                        "element_count": 1450,
                        "unexpected_count": 0,
                        "unexpected_percent": 0.0,
                        "observed_value": 1.4779e-05,
                    }
                ],
            },
        },
        {
            "name": "posterior_within_bound",
            "passed": True,
            "status": "passed",
            "observed": {
                "n_cells": 98224,
                "n_cells_above_bound": 0,
                "max_excess": -0.049999999999996825,
                "calibration_gap": 1.4779e-05,
                "slack": 0.05,
                "gx_success_percent": 100.0,
            },
        },
        {
            "name": "release_carries_no_input_order",
            "passed": True,
            "status": "passed",
            "observed": {"max_abs_spearman": 0.00966860461605902, "order_replay_accuracy_age": 0.3345123456789},
        },
    ],
}

#: report.json shaped like Adult's at min_support 1: three of the seven rules hold for one 86-year-old.
DATA = {
    "report_format": 1,
    "model": "mixed",
    "metrics": {
        "additional_information_loss": 0.20082687674978839,
        "reconstruction_error": 29188.491898148146,
        "reconstruction_error_per_record": 0.9502080831482566,
        "average_raw_confidence": 0.8381414604019565,
        "average_released_confidence": 0.8381414604019565,
        "n_suppressed_cells": 0,
        "n_deleted": 6162,
    },
    "rules": [
        {
            "antecedent": ["education", "Doctorate"],
            "consequent": ["occupation", "Prof-specialty"],
            "raw_confidence": 0.8065326633165829,
            "released_confidence": 0.8065326633165829,
            "support": 321,
            "antecedent_support": 398,
        },
        *[
            {
                "antecedent": ["age", "86"],
                "consequent": [attribute, value],
                "raw_confidence": 1.0,
                "released_confidence": 0.3333333333333333,
                "support": 1,
                "antecedent_support": 1,
            }
            for attribute, value in (("education", "HS-grad"), ("occupation", "Sales"), ("relationship", "Husband"))
        ],
    ],
    "identity_risk": {
        "quasi_identifiers": QUASI_IDENTIFIERS,
        "n_records": 24556,
        "n_classes": 1203,
        "smallest_class": 1,
        "n_unique": 508,
        "unique_share": 508 / 24556,
        "records_in_classes_smaller_than": {"2": 508, "5": 1390, "10": 2741},
        "share_in_classes_smaller_than": {"2": 508 / 24556, "5": 1390 / 24556, "10": 2741 / 24556},
    },
}


def visible_text(page: str) -> str:
    """The page's text without the inline images and the style sheet (what a reader reads)."""
    page = re.sub(r'src="data:image/png;base64,[^"]*"', 'src=""', page)
    page = re.sub(r"<style>.*?</style>", "", page, flags=re.S)
    return html.unescape(re.sub(r"<[^>]+>", " ", page))


def officer_part(page: str) -> tuple[str, str]:
    """The page before the technical appendix, and the appendix; the appendix is the last thing on the page."""
    before, marker, after = page.partition('<details class="appendix"')
    assert marker, "no technical appendix"
    appendix, closing, rest = after.partition("</details>")
    assert closing and rest.strip().replace("\n", "") in ("</body></html>", ""), "something follows the appendix"
    return before, appendix


@pytest.fixture(scope="module")
def page() -> str:
    return render_report(MANIFEST, DATA)


# --------------------------------------------------------------------------- the formatting helper


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0.3333333333333333, "0.3333"),
        (1.4779e-05, "< 0.0001"),
        (-1.4779e-05, "> -0.0001"),
        (-0.049999999999996825, "-0.05"),
        (0.05, "0.05"),
        (29188.491898148146, "29,188"),
        (16.703643284393692, "16.7"),
        (1.4779, "1.48"),
        (1.0, "1"),
        (12420, "12,420"),
        (True, "yes"),
        (None, "n/a"),
        (float("nan"), "n/a"),
        ({"age": 0.3345123456789}, "age: 0.3345"),
        ([0.12345678, 2], "[0.1235, 2]"),
    ],
)
def test_format_figure_rounds_and_never_writes_scientific_notation(value, text):
    assert format_figure(value) == text


@pytest.mark.parametrize(
    ("share", "text"),
    [(508 / 24556, "2.1 %"), (0.0, "0 %"), (1.0, "100 %"), (1e-5, "< 0.1 %"), (0.99999, "> 99.9 %"), (0.5, "50 %")],
)
def test_format_share_is_a_percentage_that_never_hides_a_small_non_zero_share(share, text):
    assert format_share(share) == text


def test_format_count_share():
    assert format_count_share(508, 24556) == "508 (2.1 %)"
    assert format_count_share(3, 0) == "3"


def test_the_rendered_report_has_no_long_float_and_no_scientific_notation(page):
    text = visible_text(page)
    assert "0.3333" in text  # the long floats of the manifest are on the page, rounded
    assert re.findall(r"\d\.\d{5,}", text) == []  # at most 4 decimals (a figure of 0.0001 or more)
    assert re.findall(r"\d(?:\.\d+)?e[-+]?\d", text, flags=re.I) == []


def test_the_check_of_long_floats_can_fail():
    """The old formatting (6 significant digits, scientific notation below 1e-4) is caught by the same regexes."""
    assert re.findall(r"\d(?:\.\d+)?e[-+]?\d", f"{1.4779e-05:.6g}")
    assert re.findall(r"\d\.\d{5,}", f"{0.3333333333333333:.6g}")


# --------------------------------------------------------------------------- the officer's view


def test_rules_show_their_support_and_rules_of_few_records_are_flagged_in_plain_words(page):
    text = visible_text(page)
    assert "support (records, share)" in page
    assert "321 (1 %)" in text  # 321 of 30,718 kept records
    assert "3 of 4 strong rules hold for fewer than 10 records" in text
    assert text.count("describes one person") == 3
    assert "smallest support 1 (< 0.1 %)" in text  # in the summary


def test_identity_risk_is_shown_in_the_summary_and_its_own_section(page):
    text = visible_text(page)
    assert "Identity risk on the published quasi-identifiers" in text
    assert "508 (2.1 %)" in text  # records unique on their published quasi-identifiers
    assert "records in classes of fewer than 5" in text and "1,390 (5.7 %)" in text
    assert re.search(r"smallest class on the published quasi-identifiers \(k\)\s+1\b", text)


def test_the_box_of_what_is_not_protected_names_adversaries_and_figures(page):
    box = page.split('<div class="not-protected">')[1].split("</div>")[0]
    text = visible_text(box)
    assert "What this release does not protect against" in text
    for adversary in (
        "Identity disclosure",
        "Membership in the input",
        "Other sensitive values of the victim",
        "Intersections with other releases",
        "Background knowledge beyond the measured adversaries",
    ):
        assert adversary in text, adversary
    assert "single out 508 (2.1 %) released records" in text
    assert "24,556 (79.9 %) of the kept records are published" in text


def test_the_one_known_value_adversary_is_measured_from_the_release_counts():
    # the docs reviewer, session 38: the mixed page said "not measured on this release" of an adversary the release's
    # own SAC~ rows and attribute clusters measure (report.json's one_known_value; Adult: 50.6 % in PRIVACY.md)
    def box(data: dict) -> str:
        page = render_report(MANIFEST, data)
        return visible_text(page.split('<div class="not-protected">')[1].split("</div>")[0])

    known = {"share_records_pinning_another_value": 12420 / 24556, "largest_cluster": 2, "n_released": 24556}
    measured = box({**DATA, "one_known_value": known})
    assert "one known value pins another for 12,420 (50.6 %) of the released records" in measured
    assert "not measured on this release" not in measured
    alone = {**known, "share_records_pinning_another_value": 0.0, "largest_cluster": 1}
    assert "pins another for 0 (0 %)" in box({**DATA, "one_known_value": alone})  # every attribute on its own
    assert "one known value can pin another (not measured on this release)" in box(DATA)  # a report.json before it


def test_ail_and_rce_are_read_in_plain_words(page):
    text = visible_text(page)
    assert "about 20.1 % of the sensitive information is lost" in text
    assert "gets it right for about 5 % of the records" in text


def test_no_spec_lemma_or_great_expectations_internals_outside_the_appendix(page):
    officer, appendix = officer_part(page)
    for word in ("SPEC", "Lemma", "gx_", "expect_column"):
        assert word not in officer, word
        assert word in appendix, word  # they are there, for auditors
    assert 'data-gate="disclosure_within_bound"' in officer  # the gate table stays in the officer's view


def test_the_officer_summary_comes_first_and_leaves_the_top_to_the_banners(page):
    body = page.split("<body>")[1]
    assert body.index('class="banner') < body.index('id="officer-summary"') < body.index("<h2>Parameters</h2>")


def test_no_strong_rules_says_the_mixed_model_is_plain_rating_and_the_gate_is_vacuous():
    manifest = copy.deepcopy(MANIFEST)
    manifest["checks"][0]["observed"]["n_records_with_strong_rules"] = 0
    data = {**copy.deepcopy(DATA), "rules": []}
    text = visible_text(render_report(manifest, data))
    assert "the mixed model then equals plain Rating" in text and "the disclosure gate is vacuous" in text
    rating = visible_text(render_report({**manifest, "model": "rating"}, {**data, "model": "rating"}))
    assert "the disclosure gate is vacuous" in rating and "equals plain Rating" not in rating


def test_a_release_without_recorded_supports_or_identity_risk_still_renders():
    data = copy.deepcopy(DATA)
    del data["identity_risk"]
    for rule in data["rules"]:
        del rule["support"], rule["antecedent_support"]
    text = visible_text(render_report(MANIFEST, data))
    assert "did not record the rules' supports" in text
    assert "Not recorded in this release" in text and "msa-release report" in text


# --------------------------------------------------------------------------- the same words in run and audit


def test_run_summary_and_audit_name_their_counts_rule_holders_and_released_records():
    from pipeline.cli.audit import render_audit
    from pipeline.models.mixed import render_summary
    from pipeline.release.reports import validate_audit_report
    from tests.release.test_reports import AUDIT

    summary = render_summary(MANIFEST, path=Path("/releases/x"), elapsed=1.0)
    line = next(line for line in summary.splitlines() if line.strip().startswith("disclosure"))
    assert "max 0.3333 over 1,450 rule holders" in line and "0 rule holders above the bound 1/ell = 0.3333" in line
    assert "equals plain Rating" not in summary and "vacuous" not in summary  # there are rule holders
    audit = render_audit(validate_audit_report(AUDIT), Path("audit.json"))
    line = next(line for line in audit.splitlines() if line.strip().startswith("disclosure"))
    assert "over 16 released records" in line and "3 released records above the bound 1/2" in line
    assert "rule holder" not in line.replace("cannot tell rule holders apart", "")
    assert "identity       2 (14.3 %) released records unique" in audit


def test_run_summary_and_audit_say_what_no_strong_rules_means():
    from pipeline.cli.audit import render_audit
    from pipeline.models.mixed import render_summary
    from pipeline.release.reports import validate_audit_report
    from tests.release.test_reports import AUDIT

    manifest = copy.deepcopy(MANIFEST)
    manifest["checks"][0]["observed"]["n_records_with_strong_rules"] = 0
    summary = render_summary(manifest, path=Path("/r"), elapsed=1.0)
    assert "the mixed model then equals plain Rating" in summary and "disclosure gate is vacuous" in summary
    audit = copy.deepcopy(AUDIT)
    audit["adversary"]["n_rules"] = 0
    text = render_audit(validate_audit_report(audit), Path("audit.json"))
    # the audit's rules come from the raw table it was given, not from the release: it says what it mined
    # (session 40: "the mixed model then equals plain Rating" beside a release of 1,319 SAC~ groups)
    assert "no strong rule was mined from this raw table" in text and "learns nothing" in text
    assert "equals plain Rating" not in text and "vacuous" not in text
    grouped = copy.deepcopy(audit)
    grouped["structure"]["n_groups"] = 1319
    assert "(the release itself has 1,319 SAC~ groups)" in render_audit(validate_audit_report(grouped), Path("a.json"))


def test_the_box_says_so_when_no_released_record_is_unique():
    data = copy.deepcopy(DATA)
    data["identity_risk"].update(n_unique=0, unique_share=0.0, smallest_class=3)
    box = visible_text(render_report(MANIFEST, data).split('<div class="not-protected">')[1].split("</div>")[0])
    assert "finds no released record alone with its published quasi-identifiers" in box and "single out" not in box
    assert "smallest class k = 3" in box
