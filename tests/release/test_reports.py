"""The typed reports of a release (pipeline/release/reports.py): ``report.json`` of every model and the audit report.
A valid report round-trips through its type unchanged (so the written bytes are those of earlier releases); a report
with a missing, mistyped or unknown key is refused naming the key (never the value), before anything is written."""

from __future__ import annotations

import copy
import json

import pytest

from pipeline.release.reports import (
    AuditReport,
    KlReportData,
    MixedReportData,
    ReportData,
    validate_audit_report,
    validate_report_data,
)
from pipeline.reporting.release_report import REPORT_DATA, report_files

#: Identity risk on the published quasi-identifiers (pipeline/core/identity_risk.py) of a small release.
IDENTITY_RISK = {
    "quasi_identifiers": ["age", "zip"],
    "n_records": 14,
    "n_classes": 5,
    "smallest_class": 1,
    "n_unique": 2,
    "unique_share": 2 / 14,
    "records_in_classes_smaller_than": {"2": 2, "5": 5, "10": 14},
    "share_in_classes_smaller_than": {"2": 2 / 14, "5": 5 / 14, "10": 1.0},
}
#: report.json of a mixed release, the layout of the Adult release (figures of a small one).
MIXED = {
    "report_format": 1,
    "model": "mixed",
    "metrics": {
        "additional_information_loss": 0.21875,
        "reconstruction_error": 7.5,
        "reconstruction_error_per_record": 0.46875,
        "average_raw_confidence": 0.75,
        "average_released_confidence": 0.75,
        "n_suppressed_cells": 0,
        "n_deleted": 2,
    },
    "rules": [
        {
            "antecedent": ["Disease", "flu"],
            "consequent": ["Drug", "aspirin"],
            "raw_confidence": 0.75,
            "released_confidence": 0.75,
            "support": 3,
            "antecedent_support": 4,
        },
        # a release made before the supports were recorded
        {"antecedent": ["Drug", "x"], "consequent": ["Disease", "y"], "raw_confidence": 0.8, "released_confidence": None},
    ],
    "private_rating_baseline": {
        "model": "rating",
        "published": False,
        "additional_information_loss": 0.1,
        "reconstruction_error_per_record": 0.5,
        "average_released_confidence": None,
        "max_disclosure": 1.0,
        "n_holders_above_bound": 3,
        "n_holders_certain": 3,
        "n_suppressed_cells": 1,
        "n_deleted": 0,
        "n_records": 16,
    },
    "identity_risk": IDENTITY_RISK,
}
KL = {
    "report_format": 1,
    "model": "kl",
    "kl": {"class_size_counts": {"3": 4, "5": 1}, "average_generalization_level": {"age": 1.5, "zip": 0.25}},
}
AUDIT = {
    "verdict": "FAIL",
    "reasons": ["3 released record(s) above the bound 1/2 (max 1)"],
    "release": {
        "release_id": "20261125T000000Z-00000000",
        "directory": "/releases/20261125T000000Z-00000000",
        "model": "rating",
        "ell": 2,
        "min_confidence": 0.75,
        "disclosure_override_used": True,
        "ell_per_attribute": None,
    },
    "raw": {"path": "raw.csv", "sha256": None, "is_release_input": None, "n_records": 16},
    "adversary": {
        "min_confidence": 0.75,
        "n_rules": 1,
        "bound": 0.5,
        "n_released_records": 16,
        "max_probability": "1",
        "max_probability_float": 1.0,
        "mean_probability_over_exposed": 1.0,
        "n_records_exposed": 3,
        "n_records_above_bound": 3,
        "n_records_certain": 3,
        "histogram": {"0": 13, "(0.9, 1.0]": 3},
        "release_row_ids_above_bound": [4, 9, 11],
        "per_rule": [
            {
                "antecedent": ["Disease", "flu"],
                "consequent": ["Drug", "aspirin"],
                "confidence": 0.75,
                "n_records_most_exposed_by_rule": 3,
                "max_probability": 1.0,
            }
        ],
    },
    "structure": {
        "n_sids": 8,
        "n_sids_below_ell": 0,
        "n_sids_value_above_share": 0,
        "n_groups": 0,
        "n_groups_not_ell_diverse": 0,
        "record_counts_match_manifest": True,
        "passed": True,
    },
    "metrics": {**MIXED["metrics"], "rules": MIXED["rules"][:1]},
    "identity_risk": IDENTITY_RISK,
    "warnings": ["the raw table is not the release's input (SHA-256 differs): …"],
}


@pytest.mark.parametrize(
    ("data", "kind"),
    [
        (MIXED, MixedReportData),
        (KL, KlReportData),
        ({"model": "rating", **{k: MIXED[k] for k in ("report_format", "metrics", "rules")}}, MixedReportData),
    ],
)
def test_a_valid_report_json_round_trips_unchanged(data, kind):
    typed = validate_report_data(data)
    assert type(typed) is kind
    assert typed.model_dump(mode="json", exclude_unset=True) == data
    assert json.dumps(typed.model_dump(mode="json", exclude_unset=True), sort_keys=True) == json.dumps(data, sort_keys=True)


def test_the_typed_report_json_reads_by_attribute():
    typed = validate_report_data(MIXED)
    assert typed.metrics is not None and typed.metrics.n_deleted == 2
    assert typed.rules is not None and typed.rules[0].antecedent == ("Disease", "flu")
    assert typed.rules[1].released_confidence is None
    assert typed.private_rating_baseline is not None and typed.private_rating_baseline.n_holders_certain == 3


def test_the_common_part_alone_serves_a_model_without_a_section_type_and_names_a_registered_model():
    """A plug-in registered later gets :class:`ReportData` (the toy model of tests/models writes ``{"model": "toy"}``)."""
    assert ReportData.model_validate({"model": "mixed"}).model_dump(exclude_unset=True) == {"model": "mixed"}
    with pytest.raises(ValueError, match=r"model \(enum\)"):
        validate_report_data({"model": "no-such-model"})


def _without(data: dict, path: tuple[str, ...]) -> dict:
    data = copy.deepcopy(data)
    target = data
    for key in path[:-1]:
        target = target[key]
    del target[path[-1]]
    return data


def _with(data: dict, path: tuple, value) -> dict:
    data = copy.deepcopy(data)
    target = data
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    return data


@pytest.mark.parametrize(
    ("data", "named", "kind"),
    [
        (_without(MIXED, ("metrics",)), "metrics", "missing"),
        (_without(MIXED, ("metrics", "n_deleted")), "metrics.n_deleted", "missing"),
        (_without(MIXED, ("rules",)), "rules", "missing"),
        (_without(KL, ("kl",)), "kl", "missing"),
        (_with(MIXED, ("metrics", "n_suppressed_cells"), "none-of-them"), "metrics.n_suppressed_cells", "int_parsing"),
        (_with(MIXED, ("metrics", "additional_information_loss"), [0.2]), "metrics.additional_information_loss", "float_type"),
        (_with(MIXED, ("rules", 0, "antecedent"), "Disease=flu"), "rules.0.antecedent", "tuple_type"),
        (_with(MIXED, ("private_rating_baseline", "published"), True), "private_rating_baseline.published", "literal_error"),
        (_with(KL, ("kl", "class_size_counts"), {"3": "four"}), "kl.class_size_counts.3", "int_parsing"),
        (_with(MIXED, ("identity_risk", "n_unique"), "two"), "identity_risk.n_unique", "int_parsing"),
        (_with(MIXED, ("rules", 0, "support"), "three"), "rules.0.support", "int_parsing"),
        (_with(MIXED, ("unexpected",), 1), "unexpected", "extra_forbidden"),
    ],
)
def test_a_report_json_with_a_missing_or_mistyped_key_is_refused_naming_the_key(data, named, kind):
    with pytest.raises(ValueError) as raised:
        validate_report_data(data)
    message = str(raised.value)
    assert f"{named} ({kind})" in message, message
    assert "none-of-them" not in message and "four" not in message and "Disease=flu" not in message
    assert "three" not in message


def test_a_bad_report_json_is_refused_before_any_file_is_made(tmp_path):
    manifest = {"model": "mixed", "release_id": "r", "checks": []}
    with pytest.raises(ValueError, match="metrics.n_deleted"):
        report_files(manifest, _without(MIXED, ("metrics", "n_deleted")), releases_dir=tmp_path)
    files = report_files({"model": "kl", "release_id": "r", "checks": []}, KL, releases_dir=tmp_path)
    assert json.loads(files[REPORT_DATA]) == KL  # written as given


def test_a_valid_audit_report_round_trips():
    typed = validate_audit_report(AUDIT)
    assert isinstance(typed, AuditReport) and not typed.passed
    assert typed.as_json() == AUDIT
    assert validate_audit_report(typed.as_json()) == typed
    without_warnings = _without(AUDIT, ("warnings",))
    assert validate_audit_report(without_warnings).as_json() == without_warnings  # no "warnings": null


@pytest.mark.parametrize(
    ("data", "named", "kind"),
    [
        (_without(AUDIT, ("adversary", "n_records_certain")), "adversary.n_records_certain", "missing"),
        (_without(AUDIT, ("structure",)), "structure", "missing"),
        (_with(AUDIT, ("verdict",), "MAYBE"), "verdict", "literal_error"),
        (_with(AUDIT, ("adversary", "histogram"), {"0": "many"}), "adversary.histogram.0", "int_parsing"),
        (_with(AUDIT, ("structure", "passed"), "yes"), "structure.passed", "bool_type"),
        (_with(AUDIT, ("metrics", "rules", 0, "raw_confidence"), "high"), "metrics.rules.0.raw_confidence", "float_parsing"),
    ],
)
def test_an_audit_report_with_a_missing_or_mistyped_key_is_refused_naming_the_key(data, named, kind):
    with pytest.raises(ValueError) as raised:
        validate_audit_report(data)
    message = str(raised.value)
    assert f"{named} ({kind})" in message, message
    assert "MAYBE" not in message and "many" not in message and "high" not in message
