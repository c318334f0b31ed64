"""The planning advisor's pure part: a profile of the input, one predicted outcome per setting (ℓ, min_confidence),
which gates would refuse it, the recommendation, and the plan as text, Markdown or JSON.

``msa-release plan`` (``pipeline/cli/plan.py``) and the Dagster asset ``release_plan`` (``assets/plan.py``) run the
model's own algorithm on the table for every setting (:func:`pipeline.evaluation.plan.release_plan`: the same core
functions as the release job's stages, then the plug-in's ``build``) and hand the figures to this module, which
decides the predicted gates exactly as ``checks/gates.py`` does for the gates it predicts:

- ``preflight``: the table cannot be made ℓ-diverse (``msa-release run`` refuses it before running, exit status 2);
- ``utility_within_thresholds``: the share of records deleted at most ``max_deleted_share`` and, per sensitive
  attribute, the share of attribute-table cells suppressed at most ``max_suppressed_share``;
- ``rule_confidence_preserved`` (mixed): every strong rule's confidence recovered from the release exactly when
  nothing was deleted or suppressed, else within ``confidence_tolerance`` (Lemma 22; SPEC §8);
- ``disclosure_within_bound``: no rule holder's disclosure probability above 1/ℓ (SPEC §10), unless
  ``allow_disclosure``;
- ``no_certain_attribute_table_cell``: no suppressed cell disclosed above 1/ℓ.

The learned-model gate ``posterior_within_bound`` is not predicted (it fits a model by EM on the release: as costly
as the run itself), nor are the gates that fail only on a defect (ℓ-diversity of groups and SIDs, accounting, tilt)
and the input-order gate (it fails only with ``randomness: spec-reference``).

Nothing here holds a value of the table: counts, shares, attribute names and gate names only. No Dagster here.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import pandas as pd

__all__ = [
    "DEFAULT_MAX_DELETED_SHARE",
    "DEFAULT_MAX_SUPPRESSED_SHARE",
    "NOT_PREDICTED",
    "PREDICTED_GATES",
    "AttributeProfile",
    "Plan",
    "PlanRow",
    "TableProfile",
    "confidence_gate_passes",
    "gate_predictions",
    "plan_frame",
    "plan_json",
    "plan_markdown",
    "plan_text",
    "profile_table",
    "recommend",
    "utility_gate_passes",
]

#: Defaults of the utility gate's thresholds (the settings ``max_deleted_share`` / ``max_suppressed_share``).
DEFAULT_MAX_DELETED_SHARE = 0.10
DEFAULT_MAX_SUPPRESSED_SHARE = 0.10

#: The gates a plan row predicts, in the order they are shown.
PREDICTED_GATES = (
    "preflight",
    "utility_within_thresholds",
    "rule_confidence_preserved",
    "disclosure_within_bound",
    "no_certain_attribute_table_cell",
)
#: What the plan says of what it does not compute, with the reason (shown under the table).
NOT_PREDICTED = {
    "posterior_within_bound": "not predicted: the learned-model adversary fits naive Bayes by EM on the release, as "
    "costly as the run itself",
    "structural gates": "not predicted: ℓ-diversity of groups and SIDs, records accounted for, no probability tilt "
    "hold by construction and fail only on a defect; release_carries_no_input_order: its rank correlations are "
    "predicted (they refuse randomness spec-reference, whose ids follow the input order), its order-replay adversary "
    "is not",
}

#: A gate's predicted status: ``pass``, ``refuse``, ``overridden`` (fails but a setting accepts it), ``n/a`` (does not
#: apply to the model) or ``not predicted``.
GATE_STATUSES = ("pass", "refuse", "overridden", "n/a", "not predicted")


@dataclass(frozen=True)
class AttributeProfile:
    """One sensitive attribute of the input: ``distinct_values`` and ``top_value_share`` (the share of records holding
    its most frequent value, in [0, 1]; the value itself is never named)."""

    attribute: str
    distinct_values: int
    top_value_share: float


@dataclass(frozen=True)
class TableProfile:
    """What the plan says about the input before any setting.

    Attributes
    ----------
    input_name
        The input file's base name (never a path).
    n_input, n_dropped_missing
        Records read, and dropped for a missing sensitive value.
    n_records
        Records eligible for the release (``n_input - n_dropped_missing``): the denominator of the deleted share.
    sensitive
        One :class:`AttributeProfile` per sensitive attribute, schema order.
    max_feasible_ell
        The largest ℓ the preflight accepts (the fewest distinct values of a sensitive attribute, capped by
        ``n_records``); 0 when none.
    """

    input_name: str
    n_input: int
    n_dropped_missing: int
    n_records: int
    sensitive: tuple[AttributeProfile, ...]
    max_feasible_ell: int


def profile_table(records: pd.DataFrame, sensitive_attributes: Sequence[str], *, input_name: str, n_input: int) -> TableProfile:
    """The profile of ``records`` (the input after the missing-value policy: one column per sensitive attribute, no
    missing value there), counts and shares only.

    Parameters
    ----------
    records
        The records (``load_records(...).records``).
    sensitive_attributes
        Column names, schema order.
    input_name
        The file's base name.
    n_input
        Records read before the missing-value policy.
    """
    attributes = []
    for attribute in sensitive_attributes:
        counts = records[attribute].value_counts(sort=True)
        counts = counts[counts > 0]
        attributes.append(
            AttributeProfile(
                attribute=attribute,
                distinct_values=int(len(counts)),
                top_value_share=float(counts.iloc[0] / len(records)) if len(records) and len(counts) else 0.0,
            )
        )
    distinct = [a.distinct_values for a in attributes]
    feasible = min([*distinct, len(records)]) if attributes else 0
    return TableProfile(
        input_name=input_name,
        n_input=int(n_input),
        n_dropped_missing=int(n_input - len(records)),
        n_records=int(len(records)),
        sensitive=tuple(attributes),
        max_feasible_ell=int(feasible if feasible >= 2 else 0),
    )


@dataclass(frozen=True)
class PlanRow:
    """The predicted outcome of one setting (``msa-release run`` with this ℓ and min_confidence).

    Counts are records unless named cells; ``None`` means not predicted (``notes`` says why).

    Attributes
    ----------
    model, ell, min_confidence, min_support
        The setting (``min_confidence`` / ``min_support`` None for the (k, ℓ) model, which mines no rule).
    configured
        Whether this is the configured setting (the one ``msa-release run`` with the same options would use).
    n_strong_rules
        Strong rules mined (support ≥ min_support, confidence ≥ min_confidence).
    n_rule_holders, n_rule_holders_released
        Records holding both sides of at least one strong rule: in the input, and among the released records (the
        "rule holders" of ``msa-release run``'s summary and of the disclosure gate).
    n_sac_released, n_attribute_table
        Records published in SAC~ groups and in the attribute table.
    n_deleted, deleted_share
        Records deleted (not published) and their share of the eligible records.
    suppressed_cells, suppressed_share
        Per sensitive attribute: attribute-table cells suppressed, and their share of the attribute table's rows.
    max_confidence_deviation
        Largest |recovered − raw| rule confidence (mixed; 1.0 for a rule none of whose antecedent holders is released).
    max_disclosure
        The strong-rule adversary's largest disclosure probability over the rule holders (bound 1/ℓ).
    gates
        Gate name -> predicted status (:data:`GATE_STATUSES`), every gate of :data:`PREDICTED_GATES`.
    refusal
        Why ``msa-release run`` would refuse it (the first refusing gate and its figures), or None.
    seconds
        Wall time of this row's prediction.
    notes
        What was not predicted and why.
    """

    model: str
    ell: int
    min_confidence: float | None
    min_support: int | None
    configured: bool
    n_strong_rules: int | None
    n_rule_holders: int | None
    n_rule_holders_released: int | None
    n_sac_released: int | None
    n_attribute_table: int | None
    n_deleted: int | None
    deleted_share: float | None
    suppressed_cells: dict[str, int] | None
    suppressed_share: dict[str, float] | None
    max_confidence_deviation: float | None
    max_disclosure: float | None
    gates: dict[str, str]
    refusal: str | None
    seconds: float
    notes: tuple[str, ...] = ()

    @property
    def max_suppressed_share(self) -> float | None:
        """The largest suppressed share over the sensitive attributes (0 without attribute table), or None."""
        if self.suppressed_share is None:
            return None
        return max(self.suppressed_share.values(), default=0.0)

    @property
    def passes(self) -> bool:
        """Whether every predicted gate passes (or is overridden, or does not apply): the release would be published
        unless a gate the plan does not predict refuses it."""
        return self.refusal is None and all(status != "refuse" for status in self.gates.values())


@dataclass(frozen=True)
class Plan:
    """A profile, one :class:`PlanRow` per setting and the recommendation.

    Attributes
    ----------
    profile
        :class:`TableProfile`.
    rows
        Settings in order of ℓ, then min_confidence.
    max_deleted_share, max_suppressed_share, confidence_tolerance
        The thresholds the predictions were judged with.
    recommendation
        One line (:func:`recommend`): the least-loss setting at least as private as the configured one that passes
        every predicted gate, or why none does.
    seconds
        Wall time of the whole plan (reading, mining and every row).
    not_predicted
        Gate (or group of gates) -> why it is not predicted.
    """

    profile: TableProfile
    rows: tuple[PlanRow, ...]
    max_deleted_share: float
    max_suppressed_share: float
    confidence_tolerance: float
    recommendation: str
    seconds: float
    not_predicted: dict[str, str] = field(default_factory=lambda: dict(NOT_PREDICTED))


def utility_gate_passes(
    deleted_share: float, suppressed_share: Mapping[str, float], *, max_deleted_share: float, max_suppressed_share: float
) -> bool:
    """The utility gate ``utility_within_thresholds``: the deleted share is at most ``max_deleted_share`` and every
    attribute's suppressed share at most ``max_suppressed_share`` (shares in [0, 1]; equal to the threshold passes)."""
    return deleted_share <= max_deleted_share and all(share <= max_suppressed_share for share in suppressed_share.values())


def confidence_gate_passes(summary: pd.DataFrame, *, exact_required: bool, tolerance: float) -> bool:
    """Gate 4 ``rule_confidence_preserved`` on :func:`pipeline.core.verification.confidence_summary` as
    ``checks/suites.py`` states it: every ``deviation`` in [0, ``tolerance``], and with ``exact_required`` (nothing
    deleted or suppressed) every rule ``exact``. No rule: passes."""
    deviations = summary["deviation"].to_numpy(dtype=float)
    within = bool(np.all((deviations >= 0.0) & (deviations <= tolerance)))
    if exact_required:
        within = within and bool(summary["exact"].astype(bool).all())
    return within


def _loss_key(row: PlanRow) -> tuple[float, float, int, float]:
    """Least loss first: fewer deleted, then fewer suppressed; among equal losses the larger ℓ (more protection),
    then the larger min_confidence (fewer rules)."""
    return (row.deleted_share or 0.0, row.max_suppressed_share or 0.0, -row.ell, -(row.min_confidence or 0.0))


def _setting(row: PlanRow) -> str:
    text = f"ℓ = {row.ell}"
    if row.min_confidence is not None:
        text += f", min_confidence {row.min_confidence:g}"
    return text


def _loss(row: PlanRow) -> str:
    if row.deleted_share is None:
        return "loss not predicted"
    deleted = f"{row.n_deleted:,} record{'' if row.n_deleted == 1 else 's'} deleted ({_percent(row.deleted_share)})"
    worst = row.max_suppressed_share or 0.0
    return deleted + (f", up to {_percent(worst)} of an attribute's cells suppressed" if worst else ", no cell suppressed")


def _at_least_as_private(row: PlanRow, configured: PlanRow) -> bool:
    """Whether ``row`` protects at least what ``configured`` protects: an ℓ at least the configured one (the
    strong-rule adversary's bound 1/ℓ no larger) and every strong rule of the configured setting still a strong rule
    (a min_confidence at most the configured one, or a higher one that mines as many rules: the same rules)."""
    if row.ell < configured.ell:
        return False
    if configured.min_confidence is None or row.min_confidence is None:
        return configured.min_confidence is None and row.min_confidence is None
    support, configured_support = row.min_support or 0, configured.min_support or 0
    if row.min_confidence <= configured.min_confidence and support <= configured_support:
        return True  # both thresholds no higher: every configured rule is still mined
    # a higher threshold keeps a subset of the configured strong rules (a row of ℓ >= 6 mines at support max(ℓ, 5),
    # above the configured ℓ = 3's 5: a diff review, session 38); the same set only when as many are mined and neither
    # threshold is lower (a lower one could add rules while a higher one drops others)
    return (
        row.n_strong_rules is not None
        and row.n_strong_rules == configured.n_strong_rules
        and row.min_confidence >= configured.min_confidence
        and support >= configured_support
    )


def _weaker_by(row: PlanRow, configured: PlanRow) -> str:
    """What ``row`` gives up against ``configured``, in the adversaries' terms (one clause)."""
    parts = []
    if row.ell < configured.ell:
        parts.append(
            f"the strong-rule adversary's bound rises from 1/{configured.ell} to 1/{row.ell} and groups and SIDs "
            f"hold {row.ell} distinct values instead of {configured.ell}"
        )
    if (row.n_strong_rules or 0) < (configured.n_strong_rules or 0):
        if (
            row.min_confidence is not None
            and configured.min_confidence is not None
            and row.min_confidence > configured.min_confidence
        ):
            parts.append(
                f"rules of confidence {configured.min_confidence:g} to {row.min_confidence:g} are no longer strong rules, "
                f"so no longer bounded ({row.n_strong_rules} strong rule(s) instead of {configured.n_strong_rules})"
            )
        else:
            parts.append(
                f"rules held by {configured.min_support} to {row.min_support} records are no longer strong rules, so no "
                f"longer bounded ({row.n_strong_rules} strong rule(s) instead of {configured.n_strong_rules})"
            )
    return "; ".join(parts)


def recommend(rows: Sequence[PlanRow]) -> str:
    """The recommendation line. Privacy first: the configured setting (its ℓ and min_confidence) is the custodian's
    privacy requirement, so the recommended setting is the one with the least loss (deleted share, then suppressed
    share; then the larger ℓ) among the settings that pass every predicted gate AND are at least as private as the
    configured one (ℓ no smaller, min_confidence no larger). A weaker setting with less loss is named after it, with
    what it gives up, as a decision for the privacy officer, never as the recommendation. Without a configured row
    (not made by :func:`pipeline.core.plan`'s callers), the least-loss passing setting. When nothing passes: the
    refusals, counted by gate."""
    # a setting that passes only because a gate is overridden (allow_disclosure) does not keep that gate's bound: never
    # recommended (such a release is a comparison, never the shared release)
    passing = [
        row
        for row in rows
        if row.passes and row.deleted_share is not None and not any(status == "overridden" for status in row.gates.values())
    ]
    configured = next((row for row in rows if row.configured), None)
    if not passing and any(row.passes for row in rows):
        by_gate_overridden: dict[str, int] = {}
        for row in rows:
            for gate, status in row.gates.items():
                if status == "overridden":
                    by_gate_overridden[gate] = by_gate_overridden.get(gate, 0) + 1
        named = ", ".join(f"{gate} in {count} of {len(rows)}" for gate, count in by_gate_overridden.items())
        return (
            f"No setting passes every predicted gate without an override ({named}): an overridden gate's bound does not "
            "hold, and such a release is a comparison, never the shared release. Nothing is recommended."
        )
    if not passing:
        by_gate: dict[str, int] = {}
        for row in rows:
            for gate, status in row.gates.items():
                if status == "refuse":
                    by_gate[gate] = by_gate.get(gate, 0) + 1
        if not by_gate:
            return "No recommendation: the outcome of these settings is not predicted (see the notes)."
        reasons = ", ".join(f"{gate} refuses {count}" for gate, count in sorted(by_gate.items(), key=lambda kv: -kv[1]))
        if by_gate.get("release_carries_no_input_order") == len(rows):
            return (
                f"No setting passes every predicted gate ({reasons} of {len(rows)}): the input-order gate refuses "
                "randomness spec-reference (its ids follow the input order) whatever ℓ or min_confidence: use "
                "--randomness home-secret (the default)."
            )
        return (
            f"No setting passes every predicted gate ({reasons} of {len(rows)}): try more ℓ or min_confidence values "
            "(--ell-values, --min-confidence-values), drop a sensitive attribute with a dominant value, or raise a "
            "threshold knowingly (the override is recorded)."
        )
    if configured is None:
        best = min(passing, key=_loss_key)
        return f"Recommended: {_setting(best)} ({_loss(best)}; every predicted gate passes)."
    private = [row for row in passing if _at_least_as_private(row, configured)]
    weaker = [row for row in passing if not _at_least_as_private(row, configured)]
    requirement = f"ℓ ≥ {configured.ell}" + (
        f" and every strong rule of min_confidence {configured.min_confidence:g} bounded"
        if configured.min_confidence is not None
        else ""
    )
    if private:
        best = min(private, key=_loss_key)
        if best is configured:
            line = f"Recommended: the configured setting, {_setting(best)} ({_loss(best)}; every predicted gate passes)."
        else:
            line = (
                f"Recommended: {_setting(best)} ({_loss(best)}; every predicted gate passes; at least as private as "
                f"the configured setting: {requirement})."
            )
        cheaper = [row for row in weaker if _loss_key(row)[:2] < _loss_key(best)[:2]]
        if cheaper:
            option = min(cheaper, key=_loss_key)
            line += (
                " Less loss only with weaker protection, a decision for the privacy officer and not a recommendation: "
                f"{_setting(option)} ({_loss(option)}): {_weaker_by(option, configured)}"
            )
            at_ell = [row for row in cheaper if row.ell >= configured.ell]
            if option.ell < configured.ell and at_ell:
                same = min(at_ell, key=_loss_key)
                line += f". At ℓ = {same.ell}: {_setting(same)} ({_loss(same)}): {_weaker_by(same, configured)}"
            line += "."
        return line
    # the passing setting closest to the requirement (the largest ℓ, then the most rules, then the least loss), and
    # the least-loss one when it differs (a diff review, session 38: naming only the least-loss one named the weakest)
    closest = min(weaker, key=lambda row: (-row.ell, -(row.n_strong_rules or 0), *_loss_key(row)))
    cheapest = min(weaker, key=_loss_key)
    refusing = sorted({row.refusal.split(":", 1)[0] for row in rows if _at_least_as_private(row, configured) and row.refusal})
    because = f" ({', '.join(refusing)})" if refusing else ""
    named = f"{_setting(closest)} ({_loss(closest)}): {_weaker_by(closest, configured)}"
    if cheapest is not closest:
        named += f"; with the least loss, {_setting(cheapest)} ({_loss(cheapest)}): {_weaker_by(cheapest, configured)}"
    advice = "Or raise a threshold knowingly (the override is recorded)."
    if refusing == ["release_carries_no_input_order"]:
        advice = "The input-order gate refuses randomness spec-reference whatever ℓ: use --randomness home-secret."
    return (
        f"No setting passes every predicted gate at the configured privacy or stronger ({requirement}){because}. "
        f"Weaker settings pass, a decision for the privacy officer and not a recommendation: the closest, {named}. {advice}"
    )


def _percent(share: float | None) -> str:
    if share is None:
        return "—"
    if share == 0:
        return "0 %"
    if share < 0.001:
        return "<0.1 %"
    return f"{100 * share:.1f} %"


def _count(value: int | None) -> str:
    return "—" if value is None else f"{value:,}"


def _verdict(row: PlanRow) -> str:
    if row.gates.get("preflight") == "refuse":
        return "REFUSED before running (preflight)"
    refusing = [gate for gate, status in row.gates.items() if status == "refuse"]
    if refusing:
        return "REFUSED: " + ", ".join(refusing)
    overridden = [gate for gate, status in row.gates.items() if status == "overridden"]
    if row.deleted_share is None and not overridden:
        return "not predicted"
    return "publishes" + (f" (overridden: {', '.join(overridden)})" if overridden else "")


#: Columns of :func:`plan_frame` (and of the text and Markdown tables), with their headings.
COLUMNS = {
    "setting": "setting",
    "strong_rules": "strong rules",
    "rule_holders": "rule holders (released)",
    "deleted": "deleted",
    "suppressed": "suppressed (worst attribute)",
    "confidence_deviation": "max conf. deviation",
    "disclosure": "max disclosure",
    "verdict": "predicted verdict",
}


def plan_frame(plan: Plan) -> pd.DataFrame:
    """The plan as a table of text, one row per setting, columns :data:`COLUMNS` (keys): ``setting`` (ℓ and
    min_confidence; ``*`` marks the configured one), ``strong_rules``, ``rule_holders`` (in the input, and released),
    ``deleted`` (count and share),
    ``suppressed`` (the largest share over the sensitive attributes), ``confidence_deviation``, ``disclosure``
    (largest disclosure probability of a rule holder / the bound 1/ℓ), ``verdict``. Counts and shares only."""
    records = []
    for row in plan.rows:
        deleted = "—" if row.n_deleted is None else f"{row.n_deleted:,} ({_percent(row.deleted_share)})"
        if row.suppressed_share is None:
            suppressed = "—"
        else:
            worst = max(row.suppressed_share, key=lambda a: row.suppressed_share[a]) if row.suppressed_share else None  # type: ignore[index]
            suppressed = (
                "0 %"
                if worst is None or row.suppressed_share[worst] == 0
                else f"{_percent(row.suppressed_share[worst])} ({worst})"
            )
        deviation = "—" if row.max_confidence_deviation is None else f"{row.max_confidence_deviation:.3f}"
        disclosure = "—" if row.max_disclosure is None else f"{row.max_disclosure:.3f} / {1 / row.ell:.3f}"
        records.append(
            {
                "setting": ("* " if row.configured else "  ") + _setting(row),
                "strong_rules": _count(row.n_strong_rules),
                "rule_holders": _count(row.n_rule_holders)
                + ("" if row.n_rule_holders_released is None else f" ({row.n_rule_holders_released:,})"),
                "deleted": deleted,
                "suppressed": suppressed,
                "confidence_deviation": deviation,
                "disclosure": disclosure,
                "verdict": _verdict(row),
            }
        )
    return pd.DataFrame(records, columns=list(COLUMNS))


def _profile_lines(profile: TableProfile) -> list[str]:
    lines = [
        f"{profile.input_name}: {profile.n_input:,} records read, {profile.n_dropped_missing:,} dropped (missing "
        f"sensitive value), {profile.n_records:,} eligible; largest feasible ℓ {profile.max_feasible_ell}",
    ]
    lines.append(
        "sensitive attributes (distinct values, most frequent value's share): "
        + "; ".join(f"{a.attribute} {a.distinct_values} ({_percent(a.top_value_share)})" for a in profile.sensitive)
    )
    return lines


def _threshold_line(plan: Plan) -> str:
    return (
        f"thresholds: max_deleted_share {plan.max_deleted_share:g}, max_suppressed_share {plan.max_suppressed_share:g}, "
        f"confidence_tolerance {plan.confidence_tolerance:g}"
    )


def _refusal_lines(plan: Plan) -> list[str]:
    lines = []
    for row in plan.rows:
        if row.refusal is not None:
            lines.append(f"  {_setting(row)}: {row.refusal}")
    return lines


def plan_text(plan: Plan) -> str:
    """The plan as a terminal screen: the profile, an aligned table, each refusal's reason, what is not predicted,
    the recommendation and the time."""
    frame = plan_frame(plan)
    headings = list(COLUMNS.values())
    cells = [headings, *frame.astype(str).values.tolist()]
    widths = [max(len(str(line[j])) for line in cells) for j in range(len(headings))]
    table = ["  ".join(str(value).ljust(width) for value, width in zip(line, widths, strict=True)).rstrip() for line in cells]
    table.insert(1, "  ".join("-" * width for width in widths))
    notes = sorted({note for row in plan.rows for note in row.notes})
    lines = [
        *_profile_lines(plan.profile),
        _threshold_line(plan),
        "",
        *table,
        "",
        "* the configured setting",
    ]
    refusals = _refusal_lines(plan)
    if refusals:
        lines += ["why refused:", *refusals]
    lines += [f"{gate}: {reason}" for gate, reason in plan.not_predicted.items()]
    lines += notes
    lines += ["", plan.recommendation, f"planned in {plan.seconds:.1f} s"]
    return "\n".join(lines)


#: Every ASCII punctuation character (CommonMark: a backslash-escaped one is literal text) and the line breaks.
_MARKDOWN_PUNCTUATION = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
_LINE_BREAKS = frozenset("\n\r\t\v\f\x85\u2028\u2029")


def _markdown_cell(text: str) -> str:
    """``text`` as Markdown shown literally (as ``pipeline.asset_keys.escape_markdown``): every ASCII punctuation
    character escaped, line breaks as spaces, so no name becomes markup, a link or a table boundary."""
    return "".join(" " if c in _LINE_BREAKS else ("\\" + c if c in _MARKDOWN_PUNCTUATION else c) for c in text)


def plan_markdown(plan: Plan) -> str:
    """The plan as Markdown (the Dagster asset's metadata): the profile, the table and the recommendation. Counts,
    shares, attribute and gate names only, escaped so that the UI shows them as text."""
    frame = plan_frame(plan)
    headings = list(COLUMNS.values())
    lines = [_markdown_cell(line) for line in _profile_lines(plan.profile)]
    lines += [_markdown_cell(_threshold_line(plan)), ""]
    lines.append("| " + " | ".join(headings) + " |")
    lines.append("|" + "---|" * len(headings))
    for values in frame.astype(str).values.tolist():
        lines.append("| " + " | ".join(_markdown_cell(str(v).strip()) for v in values) + " |")
    lines += ["", _markdown_cell("* the configured setting")]
    for refusal in _refusal_lines(plan):
        lines.append("- " + _markdown_cell(refusal.strip()))
    for gate, reason in plan.not_predicted.items():
        lines.append("- " + _markdown_cell(f"{gate}: {reason}"))
    lines += ["", "**" + _markdown_cell(plan.recommendation) + "**"]
    return "\n".join(lines)


def _finite(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def plan_json(plan: Plan) -> str:
    """The plan as JSON: ``profile``, ``rows`` (every :class:`PlanRow` field, plus ``passes``), the thresholds,
    ``recommendation``, ``seconds`` and ``not_predicted``. Counts, shares and names only."""
    rows = []
    for row in plan.rows:
        record = {key: _finite(value) for key, value in asdict(row).items()}
        record["notes"] = list(row.notes)
        record["passes"] = row.passes
        rows.append(record)
    document = {
        "profile": asdict(plan.profile),
        "rows": rows,
        "max_deleted_share": plan.max_deleted_share,
        "max_suppressed_share": plan.max_suppressed_share,
        "confidence_tolerance": plan.confidence_tolerance,
        "recommendation": plan.recommendation,
        "seconds": round(plan.seconds, 3),
        "not_predicted": plan.not_predicted,
    }
    return json.dumps(document, indent=2, ensure_ascii=False)


def gate_predictions(
    *,
    infeasible: str | None,
    deleted_share: float | None,
    suppressed_share: Mapping[str, float] | None,
    max_deleted_share: float,
    max_suppressed_share: float,
    confidence_passes: bool | None,
    max_confidence_deviation: float | None,
    confidence_tolerance: float,
    disclosure_passes: bool | None,
    max_disclosure: float | None,
    allow_disclosure: bool,
    certain_cells_pass: bool | None,
    ell: int,
) -> tuple[dict[str, str], str | None]:
    """Each predicted gate's status and the refusal ``msa-release run`` would print first (or None).

    ``None`` for a figure means it was not computed: the gate is ``n/a`` when ``confidence_passes`` is None (the model
    does not promise rule confidences), else ``not predicted``. A failing ``disclosure_within_bound`` is
    ``overridden`` with ``allow_disclosure`` (``checks/gates.py``: WARN severity).
    """
    gates = dict.fromkeys(PREDICTED_GATES, "not predicted")
    if infeasible is not None:
        gates["preflight"] = "refuse"
        return gates, f"preflight: {infeasible}"
    gates["preflight"] = "pass"
    refusals = []
    if deleted_share is not None and suppressed_share is not None:
        passes = utility_gate_passes(
            deleted_share, suppressed_share, max_deleted_share=max_deleted_share, max_suppressed_share=max_suppressed_share
        )
        gates["utility_within_thresholds"] = "pass" if passes else "refuse"
        if not passes:
            parts = []
            if deleted_share > max_deleted_share:
                parts.append(f"{_percent(deleted_share)} of records deleted (max {_percent(max_deleted_share)})")
            parts += [
                f"{_percent(share)} of {attribute}'s cells suppressed (max {_percent(max_suppressed_share)})"
                for attribute, share in suppressed_share.items()
                if share > max_suppressed_share
            ]
            refusals.append("utility_within_thresholds: " + ", ".join(parts))
    if confidence_passes is None:
        gates["rule_confidence_preserved"] = "n/a"
    else:
        gates["rule_confidence_preserved"] = "pass" if confidence_passes else "refuse"
        if not confidence_passes:
            refusals.append(
                f"rule_confidence_preserved: a rule's recovered confidence deviates by {max_confidence_deviation or 0.0:.3f} "
                f"(tolerance {confidence_tolerance:g})"
            )
    if disclosure_passes is not None:
        if disclosure_passes:
            gates["disclosure_within_bound"] = "pass"
        elif allow_disclosure:
            gates["disclosure_within_bound"] = "overridden"
        else:
            gates["disclosure_within_bound"] = "refuse"
            refusals.append(
                f"disclosure_within_bound: the strong-rule adversary learns a rule holder's value with probability "
                f"{max_disclosure or 0.0:.3f} > 1/ℓ = {1 / ell:.3f}"
            )
    if certain_cells_pass is not None:
        gates["no_certain_attribute_table_cell"] = "pass" if certain_cells_pass else "refuse"
        if not certain_cells_pass:
            refusals.append("no_certain_attribute_table_cell: suppressed cells name their value")
    return gates, ("; ".join(refusals) or None)
