"""Why a release was refused for data loss, and what would work: the refusal diagnosis (issue 15).

A candidate release is refused for data loss when gate 4 (``rule_confidence_preserved``: the strong rules'
confidences cannot be recovered within the tolerance because records were deleted or cells suppressed) or the utility
gate (``utility_within_thresholds``: too many records deleted or cells suppressed) fails. :func:`diagnose` turns the
table, its strong rules, the settings and the candidate's loss into a :class:`Diagnosis`:

* **what would be lost**: records deleted and their share, suppressed attribute-table cells per attribute and share;
* **the cause**: the strong rules with their support, confidence and holders (records that contain the rule: both its
  antecedent and its consequent value, SPEC §2), the records holding a strong value outside S_max (SPEC §3, SAC: they must be grouped
  into SAC~ groups of ℓ records with pairwise different values on every sensitive attribute, else deleted), and the
  *dominant* values: every SAC~ group and every SID holds a value at most once in ℓ (SPEC §5.1, §6.4; the attribute
  table is made ℓ-eligible, :mod:`pipeline.core.eligibility`), so a value held by ``c`` of ``n`` records with
  ``ℓ·c > n`` forces at least ``⌈(ℓ·c − n) / (ℓ − 1)⌉`` deletions (or suppressions) whatever the rules — deleting
  ``d`` records leaves at least ``c − d`` holders among ``n − d`` records, and ``ℓ·(c − d) ≤ n − d`` needs that ``d``;
* **computed options**, each with its predicted effect: drop a sensitive attribute, raise ``min_confidence`` (the
  rules are mined once; a higher threshold or one attribute fewer keeps a subset of them, since 1-to-1 rules between
  two attributes do not depend on the others, so the rule holders of each option are counted exactly), a lower ℓ
  (or that ℓ is already the minimum, 2), and, last, the tolerances and thresholds with what they cost.

Nothing here prints a raw record value: the only values named are sensitive values of strong rules (already shown in
report.html); a dominant value that is in no rule is described by its attribute and share only. Pure (pandas, numpy).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd

from pipeline.core.rules import exact_fraction

__all__ = [
    "DATA_LOSS_GATES",
    "REFUSAL_ERROR_CLASS",
    "CandidateLoss",
    "Diagnosis",
    "DiagnosisSettings",
    "DominantValue",
    "Option",
    "RuleCause",
    "diagnose",
    "diagnosis_lines",
    "diagnosis_paragraph",
    "forced_deletions",
    "grouping_clause",
    "option_change",
    "option_text",
    "setting_name",
]

#: The gates whose failure means "too much would be lost" (the utility gate is issue 15's, by name).
DATA_LOSS_GATES = ("rule_confidence_preserved", "utility_within_thresholds")

#: ``error_class`` of the step failure that carries a refusal for data loss (``checks.refusal``; the CLI prints the
#: diagnosis instead of the failure).
REFUSAL_ERROR_CLASS = "ReleaseRefused"

#: How many rules, dominant values and options a diagnosis names (the largest first).
MAX_RULES = 5
MAX_DROP_OPTIONS = 3


@dataclass(frozen=True)
class DiagnosisSettings:
    """The settings the refused run used (config keys of :class:`pipeline.resources.ReleaseSettings`)."""

    ell: int
    min_confidence: float
    min_support: int
    sensitive_attributes: tuple[str, ...]
    confidence_tolerance: float | None = None
    max_deleted_share: float | None = None
    max_suppressed_share: float | None = None
    model: str = "mixed"


@dataclass(frozen=True)
class CandidateLoss:
    """The refused candidate's loss (counts of records and cells).

    Attributes
    ----------
    n_records
        Records the model read (after the missing-value policy).
    n_deleted
        Records deleted (neither in SAC~ nor in the attribute table).
    suppressed_cells
        Suppressed attribute-table cells per sensitive attribute.
    attribute_cells
        Attribute-table cells per sensitive attribute (its rows).
    max_confidence_deviation
        Gate 4's largest difference between a rule's raw and recovered confidence, when measured.
    """

    n_records: int
    n_deleted: int
    suppressed_cells: Mapping[str, int] = field(default_factory=dict)
    attribute_cells: Mapping[str, int] = field(default_factory=dict)
    max_confidence_deviation: float | None = None


@dataclass(frozen=True)
class RuleCause:
    """One strong rule, its support (records holding both values) and confidence, and the share of the table that
    holds its consequent value. The values are None in a redacted diagnosis (:meth:`Diagnosis.redacted`)."""

    antecedent_attribute: str
    antecedent_value: str | None
    consequent_attribute: str
    consequent_value: str | None
    support: int
    confidence: float
    consequent_share: float

    def side(self, which: str) -> str:
        """``attribute = value`` of the ``"antecedent"`` or ``"consequent"``, or the attribute alone when redacted."""
        attribute, value = getattr(self, f"{which}_attribute"), getattr(self, f"{which}_value")
        return attribute if value is None else f"{attribute} = {value}"

    def text(self) -> str:
        return (
            f"{self.side('antecedent')} ⇒ {self.side('consequent')} (support {self.support:,} records, confidence "
            f"{self.confidence:.2f})"
        )


@dataclass(frozen=True)
class DominantValue:
    """The most frequent value of a sensitive attribute when it is held by more than 1/ℓ of the records.

    ``value`` is None when the value is in no strong rule (it is then never named) and in a redacted diagnosis."""

    attribute: str
    value: str | None
    count: int
    share: float
    forced_deletions: int

    def text(self) -> str:
        what = f"{self.attribute} = {self.value}" if self.value is not None else f"the most frequent value of {self.attribute}"
        return f"{what} is held by {_percent(self.share)} of the records"


@dataclass(frozen=True)
class Option:
    """A change of one setting and its predicted effect.

    Attributes
    ----------
    setting
        The config key changed (``sensitive_attributes``, ``min_confidence``, ``ell``, ``confidence_tolerance``,
        ``max_deleted_share``, ``max_suppressed_share``).
    value
        The new value (text), e.g. ``"0.94"``; for ``sensitive_attributes`` the attribute dropped.
    effect
        The predicted effect in words (no setting names).
    rule_holders, strong_rules, forced_deletions
        Predicted counts under the option (None when not computed).
    last_resort
        A tolerance or threshold raised: the loss is published, not avoided.
    available
        False for a note such as "ℓ is already the minimum".
    """

    setting: str
    value: str
    effect: str
    rule_holders: int | None = None
    strong_rules: int | None = None
    forced_deletions: int | None = None
    last_resort: bool = False
    available: bool = True


@dataclass(frozen=True)
class Diagnosis:
    """Why a release was refused for data loss and what would work (see the module docstring)."""

    gates: tuple[str, ...]
    settings: DiagnosisSettings
    loss: CandidateLoss
    n_strong_rules: int
    rules: tuple[RuleCause, ...]
    rule_holders: int
    records_to_group: int
    dominant: tuple[DominantValue, ...]
    forced_deletions: int
    options: tuple[Option, ...]

    @property
    def deleted_share(self) -> float:
        return self.loss.n_deleted / self.loss.n_records if self.loss.n_records else 0.0

    def suppressed_share(self) -> dict[str, float]:
        return {
            attribute: count / self.loss.attribute_cells[attribute]
            for attribute, count in self.loss.suppressed_cells.items()
            if count and self.loss.attribute_cells.get(attribute)
        }

    def redacted(self) -> Diagnosis:
        """The same diagnosis without any value of the data (the rules' and dominant values set to None): what Dagster
        shows (its metadata and event log never hold a sensitive value); the values stay in refusal.html."""
        return replace(
            self,
            rules=tuple(replace(rule, antecedent_value=None, consequent_value=None) for rule in self.rules),
            dominant=tuple(replace(value, value=None) for value in self.dominant),
        )

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able form (round trip with :meth:`from_dict`)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Diagnosis:
        """The diagnosis :meth:`to_dict` wrote.

        Raises
        ------
        KeyError, TypeError
            ``data`` is not such a dictionary.
        """
        settings = dict(data["settings"])
        settings["sensitive_attributes"] = tuple(settings["sensitive_attributes"])
        return cls(
            gates=tuple(data["gates"]),
            settings=DiagnosisSettings(**settings),
            loss=CandidateLoss(**data["loss"]),
            n_strong_rules=int(data["n_strong_rules"]),
            rules=tuple(RuleCause(**rule) for rule in data["rules"]),
            rule_holders=int(data["rule_holders"]),
            records_to_group=int(data["records_to_group"]),
            dominant=tuple(DominantValue(**value) for value in data["dominant"]),
            forced_deletions=int(data["forced_deletions"]),
            options=tuple(Option(**option) for option in data["options"]),
        )


def merge_diagnoses(first: Diagnosis, other: Diagnosis) -> Diagnosis:
    """One diagnosis for a run refused by two data-loss gates (gate 4 and the utility gate name the same loss):
    ``first``'s causes and options, the gates of both, the confidence deviation of whichever measured it, and
    ``other``'s last-resort options whose setting ``first`` does not already offer (e.g. both
    ``confidence_tolerance`` and ``max_deleted_share``), so the refusal names every threshold that stands in the way.
    """
    settings_offered = {option.setting for option in first.options}
    extra = tuple(o for o in other.options if o.last_resort and o.setting not in settings_offered)
    deviation = first.loss.max_confidence_deviation
    if deviation is None:
        deviation = other.loss.max_confidence_deviation
    return replace(
        first,
        gates=tuple(dict.fromkeys((*first.gates, *other.gates))),
        loss=replace(first.loss, max_confidence_deviation=deviation),
        options=(*first.options, *extra),
    )


def deviation_text(deviation: float, tolerance: float) -> str:
    """Gate 4's deviation as the diagnosis writes it: two decimals, or three where two would round it down to the
    tolerance it exceeds (diff review, session 40: 0.050187 was written "0.05 (allowed: 0.05)")."""
    text = f"{deviation:.2f}"
    return f"{deviation:.3f}" if float(text) <= tolerance < deviation else text


def forced_deletions(count: int, n: int, ell: int) -> int:
    """Fewest records to delete so that a value held by ``count`` of ``n`` records is held by at most 1/ℓ of the
    rest: ``max(0, ⌈(ℓ·count − n) / (ℓ − 1)⌉)`` (the module docstring's bound; Anatomy's eligibility, Xiao & Tao 2006)."""
    excess = ell * count - n
    return 0 if excess <= 0 else -(-excess // (ell - 1))


class _Codes:
    """The sensitive attributes as integer codes (one factorization per attribute), for exact, fast holder counts."""

    def __init__(self, records: pd.DataFrame, attributes: Sequence[str]) -> None:
        self.n = len(records)
        self.codes: dict[str, np.ndarray] = {}
        self.index: dict[str, dict[str, int]] = {}
        self.counts: dict[str, np.ndarray] = {}
        for attribute in attributes:
            column = records[attribute]
            codes, uniques = pd.factorize(column.astype(str) if not isinstance(column.dtype, pd.CategoricalDtype) else column)
            self.codes[attribute] = codes.astype(np.int64)
            self.index[attribute] = {str(value): k for k, value in enumerate(uniques)}
            self.counts[attribute] = np.bincount(codes[codes >= 0], minlength=len(uniques))

    def holder_mask(self, rules: pd.DataFrame) -> np.ndarray:
        """True for every record that contains at least one of ``rules`` (both its values)."""
        mask = np.zeros(self.n, dtype=bool)
        if rules.empty:
            return mask
        for (antecedent, consequent), group in rules.groupby(["antecedent_attribute", "consequent_attribute"], sort=False):
            width = len(self.index[consequent]) + 1
            keys = self.codes[antecedent] * width + self.codes[consequent]
            wanted = [
                self.index[antecedent][str(a)] * width + self.index[consequent][str(c)]
                for a, c in zip(group["antecedent_value"], group["consequent_value"], strict=True)
                if str(a) in self.index[antecedent] and str(c) in self.index[consequent]
            ]
            mask |= np.isin(keys, np.asarray(wanted, dtype=np.int64))
        return mask

    def records_to_group(self, rules: pd.DataFrame, attributes: Sequence[str]) -> int:
        """SPEC §3's ``|SAC|``: records holding a strong value on an attribute other than ``S_max`` (the attribute whose
        strong values occur in the most records; ties: the first in schema order)."""
        holding = {}
        for attribute in attributes:
            values = {
                str(v)
                for side in ("antecedent", "consequent")
                for v in rules.loc[rules[f"{side}_attribute"] == attribute, f"{side}_value"]
            }
            wanted = [self.index[attribute][v] for v in values if v in self.index[attribute]]
            holding[attribute] = np.isin(self.codes[attribute], np.asarray(wanted, dtype=np.int64))
        if not holding:
            return 0
        s_max = max(attributes, key=lambda a: (int(holding[a].sum()), -list(attributes).index(a)))
        mask = np.zeros(self.n, dtype=bool)
        for attribute in attributes:
            if attribute != s_max:
                mask |= holding[attribute]
        return int(mask.sum())

    def forced(self, attributes: Sequence[str], ell: int) -> int:
        """The largest :func:`forced_deletions` over the most frequent value of each of ``attributes``."""
        return max([forced_deletions(int(self.counts[a].max(initial=0)), self.n, ell) for a in attributes], default=0)


def _kept_at(rules: pd.DataFrame, threshold: Fraction) -> pd.DataFrame:
    """The rules still strong at ``min_confidence = threshold`` (exact: ``support_both / support_antecedent``)."""
    keep = [
        int(both) * threshold.denominator >= threshold.numerator * int(antecedent)
        for both, antecedent in zip(rules["support_both"], rules["support_antecedent"], strict=True)
    ]
    return rules[np.asarray(keep, dtype=bool)] if len(rules) else rules


def _next_hundredth(confidence: Fraction) -> Fraction:
    """The smallest multiple of 0.01 strictly above ``confidence``."""
    return Fraction(math.floor(confidence * 100) + 1, 100)


def _at_least_hundredth(share: Fraction) -> Fraction:
    """The smallest multiple of 0.01 at or above ``share``."""
    return Fraction(math.ceil(share * 100), 100)


def _percent(share: float) -> str:
    return f"{100 * share:.1f} %"


def diagnose(
    records: pd.DataFrame,
    rules: pd.DataFrame,
    settings: DiagnosisSettings,
    loss: CandidateLoss,
    *,
    gates: Sequence[str] = ("rule_confidence_preserved",),
) -> Diagnosis:
    """Diagnose a release refused for data loss.

    Parameters
    ----------
    records
        The records the model read (after the missing-value policy): every column of
        ``settings.sensitive_attributes`` (text or categorical, no missing value); other columns (quasi-identifiers,
        ``row_id``) are ignored and never named. PRIVATE.
    rules
        The strong rules mined at ``settings.min_confidence`` and ``settings.min_support``
        (:func:`pipeline.core.rules.mine_strong_rules`, columns ``RULE_COLUMNS``).
    settings
        The refused run's settings.
    loss
        The candidate's records deleted and cells suppressed.
    gates
        The failed data-loss gates (:data:`DATA_LOSS_GATES`), named in the texts.

    Returns
    -------
    Diagnosis
        Counts are exact on ``records``; an option's ``forced_deletions`` is a lower bound on the deletions it would
        still need (the run may delete more: records holding strong values that find no ℓ − 1 partners).

    Raises
    ------
    KeyError
        A sensitive attribute missing from ``records``.
    """
    attributes = list(settings.sensitive_attributes)
    ell = int(settings.ell)
    codes = _Codes(records, attributes)
    n = codes.n
    holders = int(codes.holder_mask(rules).sum())
    to_group = codes.records_to_group(rules, attributes) if settings.model == "mixed" else 0  # SAC: the mixed model's

    strong_values = {
        (str(attribute), str(value))
        for side in ("antecedent", "consequent")
        for attribute, value in zip(rules[f"{side}_attribute"], rules[f"{side}_value"], strict=True)
    }
    causes = sorted(
        (
            RuleCause(
                antecedent_attribute=str(rule.antecedent_attribute),
                antecedent_value=str(rule.antecedent_value),
                consequent_attribute=str(rule.consequent_attribute),
                consequent_value=str(rule.consequent_value),
                support=int(rule.support_both),
                confidence=float(rule.confidence),
                consequent_share=float(
                    codes.counts[str(rule.consequent_attribute)][
                        codes.index[str(rule.consequent_attribute)][str(rule.consequent_value)]
                    ]
                    / n
                )
                if n
                else 0.0,
            )
            for rule in rules.itertuples(index=False)
        ),
        key=lambda cause: (-cause.support, -cause.confidence),
    )[:MAX_RULES]

    dominant = []
    for attribute in attributes:
        counts = codes.counts[attribute]
        if not len(counts) or n == 0:
            continue
        top = int(np.argmax(counts))
        count = int(counts[top])
        if count * ell <= n:
            continue
        value = next(v for v, k in codes.index[attribute].items() if k == top)
        dominant.append(
            DominantValue(
                attribute=attribute,
                value=value if (attribute, value) in strong_values else None,
                count=count,
                share=count / n,
                forced_deletions=forced_deletions(count, n, ell),
            )
        )
    dominant.sort(key=lambda d: -d.count)
    forced = codes.forced(attributes, ell)

    options: list[Option] = []
    # 1. drop one sensitive attribute (the model needs at least 2)
    if len(attributes) >= 3:
        drops = []
        involved = set(rules["antecedent_attribute"].astype(str)) | set(rules["consequent_attribute"].astype(str))
        for attribute in attributes:
            if attribute not in involved and all(d.attribute != attribute for d in dominant):
                continue
            kept = rules[(rules["antecedent_attribute"] != attribute) & (rules["consequent_attribute"] != attribute)]
            rest = [a for a in attributes if a != attribute]
            drops.append(
                Option(
                    setting="sensitive_attributes",
                    value=attribute,
                    effect="",
                    rule_holders=int(codes.holder_mask(kept).sum()),
                    strong_rules=len(kept),
                    forced_deletions=codes.forced(rest, ell),
                )
            )
        # worth naming: fewer forced deletions, or at least a tenth fewer rule holders
        drops = [o for o in drops if (o.forced_deletions or 0) < forced or (o.rule_holders or 0) * 10 <= holders * 9]
        drops.sort(key=lambda o: (o.forced_deletions or 0, o.rule_holders or 0))
        for option in drops[:MAX_DROP_OPTIONS]:
            options.append(
                Option(
                    **{
                        **asdict(option),
                        "effect": _effect(option, holders, forced, n),
                    }
                )
            )
    # 2. a higher min_confidence (rules mined once; a higher threshold keeps a subset)
    if len(rules):
        confidences = sorted(
            {Fraction(int(b), int(a)) for b, a in zip(rules["support_both"], rules["support_antecedent"], strict=True)}
        )
        current = exact_fraction(settings.min_confidence)
        chosen: list[Fraction] = []
        by_threshold: dict[Fraction, int] = {}
        for confidence in confidences:
            threshold = _next_hundredth(confidence)
            if threshold > 1 or threshold <= current or threshold in by_threshold:
                continue
            by_threshold[threshold] = int(codes.holder_mask(_kept_at(rules, threshold)).sum())
        highest = _next_hundredth(confidences[-1])
        partial = {t: count for t, count in by_threshold.items() if t != highest}
        halving = sorted(t for t, count in partial.items() if count * 2 <= holders)
        if halving:
            chosen.append(halving[0])
        elif partial and min(partial.values()) * 10 <= holders * 9:  # at least a tenth fewer holders
            chosen.append(min(partial, key=lambda t: (partial[t], t)))
        if highest <= 1:
            chosen.append(highest)
        for threshold in chosen:
            kept = _kept_at(rules, threshold)
            count = int(codes.holder_mask(kept).sum())
            option = Option(
                setting="min_confidence",
                value=f"{float(threshold):.2f}",
                effect="",
                rule_holders=count,
                strong_rules=len(kept),
                forced_deletions=forced,
            )
            options.append(Option(**{**asdict(option), "effect": _effect(option, holders, forced, n)}))
        if highest > 1:
            options.append(
                Option(
                    setting="min_confidence",
                    value="1.0",
                    effect="some rules hold with confidence 1 (every record with the antecedent value has the consequent "
                    "value), so no confidence threshold removes every strong rule",
                    available=False,
                )
            )
    # 3. ℓ
    if ell <= 2:
        options.append(
            Option(setting="ell", value="2", effect="ℓ is already the minimum (2); it cannot be lowered", available=False)
        )
    else:
        # the largest lower ℓ whose dominant values force no deletion beyond what max_deleted_share allows (newcomer,
        # session 40: ℓ = 6 refused, the advice said ℓ = 3 while ℓ = 4, forcing 1 deletion, published with 1.5 % lost)
        # exact: max_deleted_share 0.29 of 100 records allows 29 (a float product gave 28). Forced deletions also move
        # rule confidences (gate 4); the option shows them, and `msa-release plan` predicts the gate for each ℓ
        allowed = 0 if settings.max_deleted_share is None else math.floor(Fraction(str(settings.max_deleted_share)) * codes.n)
        lower = next((candidate for candidate in range(ell - 1, 1, -1) if codes.forced(attributes, candidate) <= allowed), 2)
        option = Option(
            setting="ell",
            value=str(lower),
            effect="",
            rule_holders=holders,
            strong_rules=len(rules),
            forced_deletions=codes.forced(attributes, lower),
        )
        partners = (
            f"each record holding a strong value then needs {lower - 1} partner(s) with different values instead of {ell - 1}; "
            if settings.model == "mixed"
            else ""
        )
        text = (
            f"groups of {lower} instead of {ell} records (weaker protection: an adversary's guess is right with "
            f"probability up to 1/{lower}); {partners}" + _forced_text(option.forced_deletions or 0, forced, n)
        )
        options.append(Option(**{**asdict(option), "effect": text}))
    # 4. last resort: publish the loss
    deviation = loss.max_confidence_deviation
    if "rule_confidence_preserved" in gates and deviation is not None and settings.confidence_tolerance is not None:
        tolerance = _next_hundredth(Fraction(deviation).limit_denominator(10**9))
        if deviation > settings.confidence_tolerance and tolerance <= 1:
            options.append(
                Option(
                    setting="confidence_tolerance",
                    value=f"{float(tolerance):.2f}",
                    effect="accepts confidences recovered from the release that are off by up to "
                    f"{deviation_text(deviation, settings.confidence_tolerance)}; "
                    f"publishes with {loss.n_deleted:,} records ({_percent(loss.n_deleted / n if n else 0.0)}) deleted",
                    last_resort=True,
                )
            )
    share = loss.n_deleted / n if n else 0.0
    if settings.max_deleted_share is not None and share > settings.max_deleted_share:
        options.append(
            Option(
                setting="max_deleted_share",
                value=f"{float(_at_least_hundredth(Fraction(loss.n_deleted, n))):.2f}",
                effect=f"publishes {loss.n_records - loss.n_deleted:,} of {loss.n_records:,} records: "
                f"{_percent(share)} of the table is lost",
                last_resort=True,
            )
        )
    suppressed = {a: c / loss.attribute_cells[a] for a, c in loss.suppressed_cells.items() if c and loss.attribute_cells.get(a)}
    if settings.max_suppressed_share is not None and suppressed and max(suppressed.values()) > settings.max_suppressed_share:
        worst = max(suppressed, key=lambda a: suppressed[a])
        options.append(
            Option(
                setting="max_suppressed_share",
                value=f"{float(_at_least_hundredth(Fraction(loss.suppressed_cells[worst], loss.attribute_cells[worst]))):.2f}",
                effect=f"publishes with {_percent(suppressed[worst])} of {worst}'s attribute-table cells suppressed",
                last_resort=True,
            )
        )
    return Diagnosis(
        gates=tuple(gates),
        settings=settings,
        loss=loss,
        n_strong_rules=len(rules),
        rules=tuple(causes),
        rule_holders=holders,
        records_to_group=to_group,
        dominant=tuple(dominant),
        forced_deletions=forced,
        options=tuple(options),
    )


def _forced_text(forced_then: int, forced_now: int, n: int) -> str:
    now = f" (now at least {forced_now:,})" if forced_now != forced_then else ""
    if forced_then == 0:
        return f"no value is then held by more than 1/ℓ of the records, so no deletion is forced by a dominant value{now}"
    return f"a dominant value forces at least {forced_then:,} deletions ({_percent(forced_then / n if n else 0.0)}){now}"


def _effect(option: Option, holders_now: int, forced_now: int, n: int) -> str:
    """The predicted effect of a drop or min_confidence option in words."""
    holders = option.rule_holders or 0
    parts = [
        f"{option.strong_rules} strong rule(s) left, rule holders {holders_now:,} → {holders:,}"
        + (f" ({_percent(holders / n)})" if n else "")
    ]
    if option.strong_rules == 0:
        parts.append("rule_confidence_preserved then has no rule to check")
    parts.append(_forced_text(option.forced_deletions or 0, forced_now, n))
    return "; ".join(parts)


#: How each setting is named: by its config key (Dagster UI, run config) or by its command-line option.
_FLAGS = {"sensitive_attributes": "--sensitive-attributes"}


def setting_name(setting: str, vocabulary: str) -> str:
    """``setting`` as the user sets it: ``--min-confidence`` (``vocabulary="cli"``) or `` `min_confidence` `` (config)."""
    if vocabulary == "cli":
        return _FLAGS.get(setting, "--" + setting.replace("_", "-"))
    return f"`{setting}`"


def option_change(option: Option, vocabulary: str) -> str:
    """What an option changes, in ``vocabulary`` (see :func:`setting_name`), e.g. ``--min-confidence 0.94`` or
    `` `min_confidence` ≥ 0.94 ``; empty for a note (``available`` False)."""
    name = setting_name(option.setting, vocabulary)
    if not option.available:
        return ""
    if option.setting == "sensitive_attributes":
        return f"drop sensitive attribute `{option.value}` ({name} without it)"
    if option.setting == "ell" or vocabulary == "cli":
        change = f"{name} {option.value}" if vocabulary == "cli" else f"{name} = {option.value}"
    else:
        change = f"{name} ≥ {option.value}"
    return f"last resort, {change}" if option.last_resort else change


def option_text(option: Option, vocabulary: str) -> str:
    """An option in one line: its change (:func:`option_change`) and its predicted effect, or the note itself."""
    if not option.available:
        return option.effect
    return f"{option_change(option, vocabulary)}: {option.effect}"


def grouping_clause(diagnosis: Diagnosis) -> str:
    """``"; N (p %) hold a strong value outside S_max and must each be grouped …"`` for the mixed model, else ""."""
    if diagnosis.settings.model != "mixed":
        return ""
    n = diagnosis.loss.n_records
    return (
        f"; {diagnosis.records_to_group:,} ({_percent(diagnosis.records_to_group / n if n else 0.0)}) hold a strong "
        f"value outside S_max and must each be grouped with {diagnosis.settings.ell - 1} partner(s) with different "
        "values on every sensitive attribute, else they are deleted"
    )


def _consequent_share(rule: RuleCause) -> str:
    if rule.consequent_value is None:
        return f"its value of {rule.consequent_attribute} is {_percent(rule.consequent_share)} of the table"
    return f"{rule.side('consequent')} is {_percent(rule.consequent_share)} of the table"


def _loss_text(diagnosis: Diagnosis) -> str:
    loss = diagnosis.loss
    text = f"{loss.n_deleted:,} of {loss.n_records:,} records ({_percent(diagnosis.deleted_share)}) would be deleted"
    suppressed = diagnosis.suppressed_share()
    if suppressed:
        cells = ", ".join(
            f"{attribute} {loss.suppressed_cells[attribute]:,} ({_percent(share)})" for attribute, share in suppressed.items()
        )
        text += f" and attribute-table cells suppressed: {cells}"
    return text


def diagnosis_lines(diagnosis: Diagnosis, vocabulary: str = "cli") -> list[str]:
    """The diagnosis as lines of text (no indentation): what would be lost, why, and the numbered options.

    ``vocabulary``: ``"cli"`` names settings by their options (``--ell``), ``"config"`` by their config keys
    (`` `ell` ``, for the Dagster UI)."""
    settings = diagnosis.settings
    n = diagnosis.loss.n_records
    lines = [f"why: {_loss_text(diagnosis)}."]
    deviation = diagnosis.loss.max_confidence_deviation
    if "rule_confidence_preserved" in diagnosis.gates and deviation is not None and settings.confidence_tolerance is not None:
        lines.append(
            "  the deletions change the strong rules' confidences recovered from the release by up to "
            f"{deviation_text(deviation, settings.confidence_tolerance)} "
            f"(allowed: {setting_name('confidence_tolerance', vocabulary)} {settings.confidence_tolerance:g})."
        )
    if diagnosis.n_strong_rules:
        lines.append(
            f"  {diagnosis.n_strong_rules} strong rule(s) at {setting_name('min_confidence', vocabulary)} "
            f"{settings.min_confidence:g}: {diagnosis.rule_holders:,} records ({_percent(diagnosis.rule_holders / n if n else 0.0)}) "
            f"hold one (rule holders){grouping_clause(diagnosis)}; the largest rules:"
        )
        for rule in diagnosis.rules:
            lines.append(f"    {rule.text()}; {_consequent_share(rule)}")
    else:
        lines.append("  there is no strong rule: the loss comes from the values alone.")
    if diagnosis.dominant:
        lines.append(
            f"  every group and SID holds a value at most once in ℓ = {settings.ell} records, so a value held by more than "
            f"1/{settings.ell} of the records forces deletions whatever the rules:"
        )
        for value in diagnosis.dominant:
            lines.append(f"    {value.text()}: at least {value.forced_deletions:,} records must be deleted")
    lines.append("options (predicted from the table; deletions forced by a dominant value are a lower bound):")
    number = 0
    for option in diagnosis.options:
        if option.available:
            number += 1
            lines.append(f"  {number}. {option_text(option, vocabulary)}")
        else:
            lines.append(f"  -  {option_text(option, vocabulary)}")
    return lines


def diagnosis_paragraph(diagnosis: Diagnosis, vocabulary: str = "config") -> str:
    """The diagnosis in one paragraph (the asset check's description, the run's failure message)."""
    parts = [f"Release refused: {_loss_text(diagnosis)}."]
    if diagnosis.rules:
        rule = diagnosis.rules[0]
        parts.append(
            f"Cause: {diagnosis.n_strong_rules} strong rule(s) make {diagnosis.rule_holders:,} records "
            f"({_percent(diagnosis.rule_holders / diagnosis.loss.n_records if diagnosis.loss.n_records else 0.0)}) rule holders, "
            f"e.g. {rule.text()}: {_consequent_share(rule)}."
        )
    if diagnosis.dominant:
        top = diagnosis.dominant[0]
        parts.append(
            f"Dominant value: {top.text()}, above 1/{diagnosis.settings.ell}: at least "
            f"{top.forced_deletions:,} records must be deleted whatever the rules."
        )
    options = [option_text(o, vocabulary) for o in diagnosis.options if o.available]
    notes = [option_text(o, vocabulary) for o in diagnosis.options if not o.available]
    if options:
        parts.append("Options: " + " ".join(f"({k}) {text}." for k, text in enumerate(options, start=1)))
    parts.extend(f"{note[0].upper()}{note[1:]}." for note in notes)
    return " ".join(parts)
