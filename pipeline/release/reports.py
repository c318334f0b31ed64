"""The typed reports of a release: ``report.json`` (:class:`ReportData`) and the audit report (:class:`AuditReport`).

Like :class:`pipeline.release.manifest.Manifest`, each model says the type of every key. ``report.json`` is validated
before anything is published (:func:`pipeline.reporting.release_report.report_files`, called by the publish step
before :func:`pipeline.release.publish.publish_release`) and written as given, so its bytes stay those of earlier
releases; the audit report is built as an :class:`AuditReport` (:func:`pipeline.release.audit.audit_report`) and
written by ``msa-release audit`` from :meth:`AuditReport.as_json`.

``report.json`` has a common part (``report_format``, ``model``) and a section per model: ``metrics`` and ``rules``
(mixed and Rating; ``private_rating_baseline`` for the mixed model), ``kl`` for the (k, ℓ) model; ``identity_risk``
(every built-in model: uniqueness and class sizes on the published quasi-identifiers). A model registered later (a
plug-in) gets the common part and whichever sections it fills.

No Dagster here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, StrictBool, field_validator

from pipeline.release.manifest import validate_contract

__all__ = [
    "AdversaryFigures",
    "AuditMetrics",
    "AuditReport",
    "AuditStructure",
    "AuditedRelease",
    "AuditedRawTable",
    "IdentityRisk",
    "KlReportData",
    "KlSection",
    "MixedReportData",
    "PrivateRatingBaseline",
    "ReleaseMetrics",
    "ReportData",
    "RuleConfidence",
    "RuleExposure",
    "validate_audit_report",
    "validate_report_data",
]


class _Contract(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


# --------------------------------------------------------------------------- report.json


class RuleConfidence(_Contract):
    """One strong rule ``(S_i = a) ⇒ (S_j = b)``: its raw confidence and the one recovered from the release (P1
    Lemma 22; None when the antecedent has no released support), and its support in the raw table: ``support``
    records hold both a and b, ``antecedent_support`` records hold a (None in releases made before they were
    recorded)."""

    antecedent: tuple[str, str]
    consequent: tuple[str, str]
    raw_confidence: float
    released_confidence: float | None
    support: int | None = None
    antecedent_support: int | None = None


class IdentityRisk(_Contract):
    """Identity risk on the published quasi-identifiers (:func:`pipeline.core.identity_risk.identity_risk`): released
    records, equivalence classes (distinct published quasi-identifier tuples), the smallest class (k), the records
    alone in their class and their share (0..1), and per class size t (``"2"``, ``"5"``, ``"10"``) the records in
    classes smaller than t and their share."""

    quasi_identifiers: list[str]
    n_records: int
    n_classes: int
    smallest_class: int | None
    n_unique: int
    unique_share: float
    records_in_classes_smaller_than: dict[str, int]
    share_in_classes_smaller_than: dict[str, float]


class ReleaseMetrics(_Contract):
    """Utility figures of a mixed or Rating release (SPEC §11; :func:`pipeline.release.audit.release_metrics`)."""

    additional_information_loss: float  # fraction of cells, 0..1
    reconstruction_error: float  # summed over the input records, 0..n
    reconstruction_error_per_record: float
    average_raw_confidence: float | None  # None without strong rules
    average_released_confidence: float | None
    n_suppressed_cells: int
    n_deleted: int


class PrivateRatingBaseline(_Contract):
    """P1's plain Rating of the same records, computed in the publish step and never published (aggregates only;
    :func:`pipeline.reporting.release_report.private_rating_baseline`), or why it was not computed."""

    model: Literal["rating"]
    published: Literal[False]
    not_computed: StrictBool | None = None
    additional_information_loss: float | None = None
    reconstruction_error_per_record: float | None = None
    average_released_confidence: float | None = None
    max_disclosure: float | None = None
    n_holders_above_bound: int | None = None
    n_holders_certain: int | None = None
    n_suppressed_cells: int | None = None
    n_deleted: int | None = None
    n_records: int | None = None
    max_records: int | None = None


class KlSection(_Contract):
    """The (k, ℓ) model's figures: class size -> number of classes; quasi-identifier -> mean levels climbed per record
    (None when regenerated from the release files alone)."""

    class_size_counts: dict[str, int]
    average_generalization_level: dict[str, float] | None


class WorkloadErrors(_Contract):
    """Relative errors of one workload's COUNT queries (:mod:`pipeline.core.query_workload`): median, mean and 90th
    percentile of ``|estimate - exact| / max(exact, floor)`` over ``n_queries`` queries."""

    n_queries: int
    median: float
    mean: float
    p90: float


class QueryWorkload(_Contract):
    """The query-workload utility of Xiao & Tao (Anatomy, VLDB 2006 §6) measured on the release against the private
    table (:func:`pipeline.core.query_workload.release_workload_utility`), or why it was not computed (a table of
    more than ``max_records`` records)."""

    W1: WorkloadErrors | None = None
    W2: WorkloadErrors | None = None
    floor: float | None = None
    floor_share: float | None = None
    n_records: int | None = None
    selectivity: float | None = None
    seed: int | None = None
    not_computed: StrictBool | None = None
    max_records: int | None = None


class OneKnownValue(_Contract):
    """The one-known-value adversary at row level measured on a mixed or Rating release
    (:func:`pipeline.core.composition.one_known_value_from_counts`): the share of released records whose SAC~ row
    lets one known value pin another (SAC~ rows in an attribute cluster of 2+ attributes)."""

    share_records_pinning_another_value: float
    largest_cluster: int
    n_released: int


class ReportData(_Contract):
    """The common part of ``report.json`` (every model); the sections of the built-in models are optional here and
    required by :class:`MixedReportData` and :class:`KlReportData`."""

    report_format: int | None = None  # pipeline.reporting.release_report.REPORT_DATA_FORMAT
    model: str
    metrics: ReleaseMetrics | None = None
    rules: list[RuleConfidence] | None = None
    private_rating_baseline: PrivateRatingBaseline | None = None
    kl: KlSection | None = None
    identity_risk: IdentityRisk | None = None  # None in releases made before it was recorded
    query_workload: QueryWorkload | None = None  # None in releases made before it was measured
    one_known_value: OneKnownValue | None = None  # mixed and Rating; None in releases made before 2026-11-27

    @field_validator("model")
    @classmethod
    def _registered_model(cls, value: str) -> str:
        """A registered publication model (:data:`pipeline.models.PUBLICATION_MODELS`)."""
        from pipeline.models import PUBLICATION_MODELS

        if value not in PUBLICATION_MODELS:
            from pydantic_core import PydanticCustomError

            raise PydanticCustomError("enum", "not a registered publication model")
        return value


class MixedReportData(ReportData):
    """``report.json`` of a mixed or Rating release: the utility metrics and every strong rule's confidences."""

    report_format: int
    metrics: ReleaseMetrics
    rules: list[RuleConfidence]
    kl: None = None


class KlReportData(ReportData):
    """``report.json`` of a (k, ℓ) release: class sizes and generalisation levels."""

    report_format: int
    kl: KlSection
    metrics: None = None
    rules: None = None
    private_rating_baseline: None = None


#: The typed report.json of each built-in model; any other model: :class:`ReportData`.
REPORT_DATA_MODELS: dict[str, type[ReportData]] = {"mixed": MixedReportData, "rating": MixedReportData, "kl": KlReportData}


def validate_report_data(data: Mapping[str, object]) -> ReportData:
    """Check ``report.json``'s keys and types (the model's sections required, see :data:`REPORT_DATA_MODELS`).

    Parameters
    ----------
    data
        Key -> JSON-ready value, as a plug-in's ``report_data`` returns it.

    Returns
    -------
    ReportData
        The typed report (:class:`MixedReportData`, :class:`KlReportData` or :class:`ReportData`); the input itself
        is what gets written.

    Raises
    ------
    ValueError
        A missing or unknown key or a value of the wrong type; the message names the key(s), never the value.
    """
    schema = REPORT_DATA_MODELS.get(str(data.get("model")), ReportData)
    return validate_contract(schema, dict(data), "the release's report.json")


# --------------------------------------------------------------------------- audit report


class AuditedRelease(_Contract):
    """Which release was audited."""

    release_id: str | None
    directory: str
    model: str
    ell: int
    min_confidence: float
    disclosure_override_used: StrictBool
    #: ℓ_i per sensitive attribute when they differ (the manifest's ``ell_per_attribute``), else None: a rule's
    #: disclosure bound is 1/ℓ_j of its consequent's attribute
    ell_per_attribute: dict[str, int] | None = None


class AuditedRawTable(_Contract):
    """The raw table the adversary mined its rules from (never a value of it)."""

    path: str
    sha256: str | None
    is_release_input: StrictBool | None  # None: the home secret needed to check the input HMAC was not found
    n_records: int


class RuleExposure(_Contract):
    """One rule the adversary knows and the released records it exposes most."""

    antecedent: tuple[str, str]
    consequent: tuple[str, str]
    confidence: float
    n_records_most_exposed_by_rule: int
    max_probability: float


class AdversaryFigures(_Contract):
    """The strong-rule adversary on every released record (SPEC §10)."""

    min_confidence: float
    #: the rules' least support (a count of raw records holding antecedent and consequent): the release's, or the
    #: audit's ``--min-support``; None in audits written before 2026-11-27
    min_support: int | None = None
    n_rules: int
    bound: float  # 1/ℓ
    n_released_records: int
    max_probability: str  # an exact fraction ("1/3", "0")
    max_probability_float: float
    mean_probability_over_exposed: float
    n_records_exposed: int
    n_records_above_bound: int
    n_records_certain: int
    histogram: dict[str, int]  # pipeline.release.audit.disclosure_histogram
    release_row_ids_above_bound: list[int]
    per_rule: list[RuleExposure]


class AuditStructure(_Contract):
    """ℓ-diversity of the SIDs and SAC~ groups and the record counts, checked on the files (SPEC §9.1, §9.3)."""

    n_sids: int
    n_sids_below_ell: int
    #: SIDs of attribute i whose most frequent value holds more than 1/ℓ_i of the SID's occurrences (the ID table's
    #: counts), or whose counts do not add up to the attribute table's rows naming the SID (gate 2's ``max_value_share``
    #: and occurrence check, on the files); 0 in audits written before 2026-11-27
    n_sids_value_above_share: int = 0
    n_groups: int
    n_groups_not_ell_diverse: int
    record_counts_match_manifest: StrictBool
    passed: StrictBool


class AuditMetrics(ReleaseMetrics):
    """The utility figures of the audited release, with every rule's confidences."""

    rules: list[RuleConfidence]


class AuditReport(_Contract):
    """The audit of a release (:func:`pipeline.release.audit.run_audit`): verdict, reasons and the figures; counts,
    probabilities, rules and release row ids only. ``warnings`` is left out of the JSON when there is none."""

    verdict: Literal["PASS", "FAIL"]
    reasons: list[str]
    release: AuditedRelease
    raw: AuditedRawTable
    adversary: AdversaryFigures
    structure: AuditStructure
    metrics: AuditMetrics
    identity_risk: IdentityRisk
    warnings: list[str] | None = None
    query_workload: QueryWorkload | None = None  # with --hierarchies (pipeline.core.query_workload)

    @property
    def passed(self) -> bool:
        """Whether the verdict is PASS."""
        return self.verdict == "PASS"

    def as_json(self) -> dict[str, Any]:
        """The JSON object of ``msa-release audit`` (``warnings`` only when there are some, ``query_workload`` only
        when measured, ``adversary.min_support`` only when known: audits written before it existed round-trip)."""
        left_out: dict[str, Any] = {name: True for name in ("warnings", "query_workload") if getattr(self, name) is None}
        if self.adversary.min_support is None:
            left_out["adversary"] = {"min_support"}
        return self.model_dump(mode="json", exclude_none=False, exclude=left_out)


def validate_audit_report(report: Mapping[str, object]) -> AuditReport:
    """An audit report as :class:`AuditReport`.

    Raises
    ------
    ValueError
        A missing or unknown key or a value of the wrong type; the message names the key(s), never the value.
    """
    return validate_contract(AuditReport, dict(report), "the audit report")
