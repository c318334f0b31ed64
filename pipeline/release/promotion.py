"""Shared release or comparison: where a release that passed its gates is published (issue 15, no Dagster here).

A *shared* (promoted) release goes to ``<home>/releases/<release_id>/`` and ``releases/LATEST`` names it: it is the
directory meant to be copied or served. A *comparison* goes to ``<home>/comparisons/<release_id>/`` with the same
atomic protocol, never moves ``LATEST``, and its manifest and report.html say :data:`COMPARISON_NOTICE` at the top.

The setting ``promote`` decides, with the gates' verdict:

- ``promote: false`` (``--no-promote``): always a comparison;
- unset (the default): shared, except for a *baseline* model (``rating``: a model to compare with, whose strong-rule
  adversary usually beats 1/ℓ) and for a release that a gate found above its bound and an override let through
  (``allow_disclosure``: gate ``failed_overridden``; ``posterior_gate: warn``: the gate failed and only warned; a
  ``posterior_slack`` raised above its default that let through an excess above the default's bound,
  :func:`loosened_bounds`): those are comparisons;
- ``promote: true`` (``--promote``): shared where that is safe, i.e. when every applicable gate passed (a baseline
  model within every bound, or a run that set an override it did not need, which its manifest records under
  ``promotion.overrides_set``); a release above a bound stays a comparison even then, and its ``promotion.reason``
  says why. A leaky release is never the shared one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pipeline.settings import DEFAULT_POSTERIOR_SLACK

__all__ = [
    "COMPARISONS",
    "COMPARISON_NOTICE",
    "RELEASES",
    "Promotion",
    "decide_promotion",
    "is_comparison",
    "loosened_bounds",
]


def loosened_bounds(
    posterior_slack: float, gates: Sequence[Mapping[str, Any]], *, default_slack: float = DEFAULT_POSTERIOR_SLACK
) -> list[str]:
    """The gates that passed only because their bound was loosened: ``posterior_within_bound`` when ``posterior_slack``
    is above ``default_slack`` and some posterior of a true value is more than ``default_slack`` above max(1/ℓ,
    population posterior), i.e. the gate's figure ``max_excess`` (the largest posterior minus its bound, the bound
    with ``posterior_slack``) plus ``posterior_slack`` is above ``default_slack`` (an unknown figure counts as above).
    Red team, session 38: ``--posterior-slack 1.0`` put a release with 63,289 cells above the default bound into
    ``releases/`` as the shared one.

    ``gates``: :func:`assets.publish.gate_outcomes` (``name``, ``status``, ``observed``)."""
    slack, default = float(posterior_slack), float(default_slack)
    if slack <= default:
        return []
    for gate in gates:
        if gate.get("name") == "posterior_within_bound" and gate.get("status") == "passed":
            excess = (gate.get("observed") or {}).get("max_excess")
            over = None if excess is None else float(excess) + slack
            if over is None or over - default > 1e-12:
                shown = "unknown" if over is None else f"{over:.3f}"
                return [
                    f"posterior_within_bound passed only with posterior_slack {slack:g} (the largest posterior of a "
                    f"true value is {shown} above max(1/ℓ, population posterior); the default bound allows {default:g})"
                ]
    return []


#: Directory (under the home) of the shared releases, and of the comparisons.
RELEASES, COMPARISONS = "releases", "comparisons"

#: The first words of a comparison's manifest.json (key ``notice``) and report.html.
COMPARISON_NOTICE = (
    "COMPARISON — not for sharing: published under comparisons/ to compare models privately; releases/LATEST does "
    "not name it and it must not be copied or served"
)


@dataclass(frozen=True)
class Promotion:
    """Where one release goes and why.

    Attributes
    ----------
    promoted
        True: a shared release (``releases/``, ``LATEST`` moves); False: a comparison (``comparisons/``).
    requested
        The ``promote`` setting as given: True, False or None (unset: the default rule).
    reason
        One sentence for the manifest, the report and the CLI summary.
    overrides_set
        Settings that weaken a protection and were set for this run (``allow_disclosure``, ``posterior_gate: warn``,
        ``allow_recomposition``), whether or not a gate needed them: a shared release shows them.
    """

    promoted: bool
    requested: bool | None
    reason: str
    overrides_set: tuple[str, ...] = ()

    @property
    def area(self) -> str:
        """The directory under the home: :data:`RELEASES` or :data:`COMPARISONS`."""
        return RELEASES if self.promoted else COMPARISONS

    def manifest_entry(self) -> dict[str, Any]:
        """The manifest's ``promotion`` object: ``promoted``, ``area``, ``requested``, ``reason``, ``overrides_set``."""
        return {
            "promoted": self.promoted,
            "area": self.area,
            "requested": self.requested,
            "reason": self.reason,
            "overrides_set": list(self.overrides_set),
        }


def decide_promotion(
    *,
    promote: bool | None,
    baseline: bool,
    model: str,
    overridden: Sequence[str] = (),
    warned: Sequence[str] = (),
    settings: Mapping[str, Any] | None = None,
    loosened: Sequence[str] = (),
) -> Promotion:
    """Decide whether a release that its gates let through is shared or a comparison (rules: module docstring).

    Parameters
    ----------
    promote
        The ``promote`` setting: True, False, or None (unset).
    baseline
        Whether the model is a baseline (:attr:`pipeline.models.base.PublicationModel.baseline`).
    model
        The model's name (for the reason).
    overridden, warned
        The gates that failed and were accepted by ``allow_disclosure`` / only warned (``posterior_gate: warn``):
        :class:`pipeline.models.base.GateVerdict`'s fields. Non-empty means the release is above a bound.
    settings
        The run's settings (``allow_disclosure``, ``posterior_gate``, ``allow_recomposition``, ``posterior_slack``) for
        ``overrides_set``.
    loosened
        :func:`loosened_bounds`: gates that passed only with a loosened bound; non-empty means the release is above
        the default bound, so a comparison (even with ``promote``).

    Returns
    -------
    Promotion
    """
    settings = settings or {}
    overrides_set = tuple(
        name
        for name, is_set in (
            ("allow_disclosure", bool(settings.get("allow_disclosure"))),
            ("posterior_gate: warn", str(settings.get("posterior_gate") or "") == "warn"),
            ("allow_recomposition", bool(settings.get("allow_recomposition"))),
            (
                "posterior_slack",
                float(settings.get("posterior_slack") or DEFAULT_POSTERIOR_SLACK) > DEFAULT_POSTERIOR_SLACK,
            ),
        )
        if is_set
    )
    above = [*overridden, *warned]
    if promote is False:
        return Promotion(False, False, "promote is off (--no-promote): published as a comparison", overrides_set)
    if loosened and not above:
        why = "; ".join(loosened) + ": it is above the default bound"
        if promote:
            return Promotion(
                False, True, f"--promote refused: {why}; a release above a bound is never the shared one", overrides_set
            )
        return Promotion(False, None, f"{why}, so it is a comparison (never the shared release)", overrides_set)
    if above:
        why = f"gate(s) {', '.join(above)} failed and an override let the release through: it is above its bound"
        if promote:
            return Promotion(
                False, True, f"--promote refused: {why}; a release above a bound is never the shared one", overrides_set
            )
        return Promotion(False, None, f"{why}, so it is a comparison (never the shared release)", overrides_set)
    if baseline and not promote:
        return Promotion(
            False,
            None,
            f"model {model} is a baseline to compare with: published as a comparison (--promote shares it when every "
            "gate passes)",
            overrides_set,
        )
    if promote:
        return Promotion(True, True, "--promote: every applicable gate passed; shared (releases/LATEST)", overrides_set)
    return Promotion(True, None, "every applicable gate passed; shared (releases/LATEST)", overrides_set)


def is_comparison(manifest: Mapping[str, Any]) -> bool:
    """Whether a release's manifest says it is a comparison (``promotion.promoted`` false); releases made before
    issue 15 have no ``promotion`` and are shared."""
    promotion = manifest.get("promotion")
    return isinstance(promotion, Mapping) and promotion.get("promoted") is False
