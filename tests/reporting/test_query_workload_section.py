"""The "Query workload" section of report.html (issue 18): W1/W2 median and 90th-percentile relative error, the query
count and the floor, in plain words; "not recorded" without the figures; the typed report.json accepts them."""

from __future__ import annotations

import copy
import html
import re

import pytest

from pipeline.release.reports import validate_report_data
from pipeline.reporting.release_report import render_report
from tests.reporting.test_officer_view import DATA, MANIFEST

WORKLOAD = {
    "W1": {"n_queries": 1000, "median": 0.1304, "mean": 0.52, "p90": 1.234},
    "W2": {"n_queries": 1000, "median": 0.2351, "mean": 0.61, "p90": 2.5},
    "floor": 30.718,
    "floor_share": 0.001,
    "n_records": 30718,
    "selectivity": 0.05,
    "seed": 0,
}


def section_text(page: str) -> str:
    part = page.split("<h2>Query workload</h2>")[1].split("<h2>")[0]
    return html.unescape(re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", part)))


def test_the_section_shows_both_workloads_and_says_what_they_mean() -> None:
    data = {**copy.deepcopy(DATA), "query_workload": WORKLOAD}
    validate_report_data(data)
    text = section_text(render_report(MANIFEST, data))
    assert re.search(r"W1: 1–2 quasi-identifiers and 1 sensitive attribute 1,000 13 % 123.4 % 52 %", text)
    assert re.search(r"W2: 1–2 quasi-identifiers and 2 sensitive attributes 1,000 23.5 % 250 % 61 %", text)
    assert "max(true, 30.7 records, 0.1 % of the table)" in text
    assert "Half of the W1 queries are off by at most 13 % of their true count, nine in ten by at most 123.4 %" in text


def test_a_release_without_the_figures_says_so() -> None:
    text = section_text(render_report(MANIFEST, DATA))
    assert "Not recorded in this release" in text


def test_a_large_table_says_it_was_not_computed() -> None:
    data = {**copy.deepcopy(DATA), "query_workload": {"not_computed": True, "max_records": 200000, "n_records": 1000000}}
    validate_report_data(data)
    text = section_text(render_report(MANIFEST, data))
    assert "Not computed: the table holds 1,000,000 records, more than the 200,000" in text


def test_report_json_refuses_an_unknown_workload_key() -> None:
    data = {**copy.deepcopy(DATA), "query_workload": {**WORKLOAD, "queries": []}}
    with pytest.raises(ValueError, match="query_workload"):
        validate_report_data(data)
