"""The terminal summary and report.html of a class audit (a (k, ℓ) release or another tool's generalized table,
:mod:`pipeline.release.class_audit`): counts and probabilities only, every text escaped."""

from __future__ import annotations

import html
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["class_audit_html", "render_class_audit"]


def _subject(result: Mapping[str, Any]) -> str:
    if "release" in result:
        release = result["release"]
        other = (result.get("raw") or {}).get("is_release_input") is False
        return f"release {release['release_id']} (kl, k={release['k']}, ell={release['ell']})" + (
            " against a raw table that is NOT the release's input" if other else ""
        )
    table = result["table"]
    return f"table {Path(table['path']).name} (required k={table['k']}, ell={table['ell']})"


def _whole_tuple_clause(known: Mapping[str, Any]) -> str:
    """ ", and X their whole sensitive tuple (knowing a: …)" when the audit measured it (audits written before session
    40 did not)."""
    share = known.get("share_records_whole_tuple_pinned")
    if share is None:
        return ""
    by = known.get("whole_tuple_pinned_by") or {}
    worst = sorted(by.items(), key=lambda item: -float(item[1]))[:2]
    named = "; ".join(f"knowing {attribute}: {float(value):.1%}" for attribute, value in worst if float(value) > 0)
    return f", {float(share):.1%} their whole sensitive tuple" + (f" ({named})" if named else "")


def _lines(result: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(label, text) rows shared by the terminal summary and the page."""
    classes = result["classes"]
    diverse, learned = classes["diverse"], classes["learned_model"]
    rows = [
        (
            "classes",
            f"{classes['n_records']} records in {classes['n_classes']} equivalence classes; smallest class k = {classes['k']}",
        ),
        *[
            (
                f"  {attribute}",
                f"distinct ell {figures['distinct_ell']}, entropy ell {figures['entropy_ell']:.3f}, "
                f"{figures['n_classes_below_ell']} classes below ell",
            )
            for attribute, figures in classes["per_attribute"].items()
        ],
        (
            "across",
            f"distinct ell {classes['across_attributes']['distinct_ell']}, entropy ell "
            f"{classes['across_attributes']['entropy_ell']:.3f}",
        ),
        (
            "diverse",
            f"smallest Diverse over whole tuples {diverse['smallest']}; {diverse['n_classes_below_ell']} classes "
            f"({diverse['n_records_in_classes_below_ell']} records) below ell = {diverse['ell']} "
            f"({diverse['n_classes_decided_by_search']} decided by exact search)",
        ),
        (
            "one value",
            f"{classes['one_known_value']['share_records_pinning_another_value']:.1%} of records have another "
            "sensitive value pinned once one is known" + _whole_tuple_clause(classes["one_known_value"]),
        ),
        (
            "learned",
            f"posterior max {learned['max_posterior']:.3f}, mean {learned['mean_posterior']:.3f} against a population "
            f"baseline of mean {learned['mean_population_baseline']:.3f}; {learned['n_cells_above_bound']} of "
            f"{learned['n_cells']} cells ({learned['n_records_above_bound']} records) above max(1/ell, baseline) + "
            f"{learned['slack']}",
        ),
    ]
    risk = result.get("identity_risk")
    if risk:
        rows.append(
            (
                "identity",
                f"{risk['n_unique']} records unique on their published quasi-identifiers; "
                + ", ".join(
                    f"{n} in classes of fewer than {size}" for size, n in risk["records_in_classes_smaller_than"].items()
                ),
            )
        )
    adversary = result.get("strong_rule_adversary")
    if adversary is not None:
        rows.append(
            (
                "rules",
                f"{adversary['n_rules']} strong rules (min_confidence {adversary['min_confidence']}, support >= "
                f"{adversary['min_support']}); max probability {adversary['max_probability']:.3f}, "
                f"{adversary['n_records_above_bound']} records above 1/ell, {adversary['n_records_certain']} certain",
            )
        )
    workload = result.get("query_workload")
    if workload and workload.get("W1"):
        rows.append(
            (
                "workload",
                f"{workload['W1']['n_queries']} COUNT queries per workload: median relative error W1 "
                f"{workload['W1']['median']:.3f}"
                + (f", W2 {workload['W2']['median']:.3f}" if workload.get("W2") else "")
                + f" (90th percentile W1 {workload['W1']['p90']:.3f}"
                + (f", W2 {workload['W2']['p90']:.3f}" if workload.get("W2") else "")
                + f"; floor {workload['floor']:.1f} records)",
            )
        )
    labels = {"join": "join attack", "one_known_value": "known value"}
    for name, summary in (result.get("attacks") or {}).items():
        rows.append(
            (
                labels.get(name, name),
                f"{summary['n_victims']} raw records: max {summary['max']:.3f}, mean {summary['mean']:.3f}, "
                f"{summary['share_above_one_over_ell']:.1%} above 1/ell, {summary['n_certain']} certain",
            )
        )
    for attribute, figures in (result.get("hierarchies") or {}).items():
        if figures is not None:
            rows.append(
                (
                    f"  {attribute}",
                    f"mean level {figures['mean_level']:.2f} of {figures['height']}, "
                    f"{figures['n_suppressed_cells']} suppressed cells",
                )
            )
    return rows


def render_class_audit(result: Mapping[str, Any], target: Path, page: Path) -> str:
    """One screen of text about a class audit.

    Parameters
    ----------
    result
        :func:`pipeline.release.class_audit.audit_kl_release` or :func:`~pipeline.release.class_audit.audit_generalized_table`.
    target, page
        Where its JSON and report.html were written.
    """
    lines = [f"Audit of {_subject(result)}: {result['verdict']}"]
    lines += [f"  reason         {reason}" for reason in result["reasons"]]
    lines += [f"  WARNING        {warning}" for warning in result["warnings"]]
    lines += [f"  {label:<14} {text}" for label, text in _lines(result)]
    lines += [f"  report         {target}", f"  page           {page}"]
    return "\n".join(lines)


def class_audit_html(result: Mapping[str, Any]) -> str:
    """A standalone report.html of a class audit (no script, no external resource; every text escaped)."""
    escape = html.escape
    rows = "\n".join(f"<tr><th>{escape(label.strip())}</th><td>{escape(text)}</td></tr>" for label, text in _lines(result))
    reasons = "".join(f"<li>{escape(r)}</li>" for r in result["reasons"]) or "<li>none</li>"
    warnings = "".join(f"<li>{escape(w)}</li>" for w in result["warnings"]) or "<li>none</li>"
    rules = (result.get("strong_rule_adversary") or {}).get("per_rule") or []
    rule_rows = "\n".join(
        f"<tr><td>{escape(' = '.join(r['antecedent']))}</td><td>{escape(' = '.join(r['consequent']))}</td>"
        f"<td>{r['confidence']:.3f}</td><td>{r['max_probability']:.3f}</td><td>{r['n_records_above_bound']}</td></tr>"
        for r in rules
    )
    rule_table = (
        "<h2>Strong rules exposing records most</h2><table><tr><th>antecedent</th><th>consequent</th><th>confidence</th>"
        f"<th>max probability</th><th>records above 1/ell</th></tr>{rule_rows}</table>"
        if rules
        else ""
    )
    verdict = escape(result["verdict"])
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>Audit: {escape(_subject(result))}</title>
<style>body{{font-family:sans-serif;max-width:60em;margin:2em auto}}th{{text-align:left;padding-right:1em}}
td,th{{vertical-align:top;border-bottom:1px solid #ddd}}.PASS{{color:#060}}.FAIL{{color:#a00}}</style></head>
<body><h1>Audit of {escape(_subject(result))}: <span class="{verdict}">{verdict}</span></h1>
<p>(k, ℓ)-anonymity over whole sensitive tuples (P2; SPEC §14.1): every equivalence class holds at least k records and
ℓ pairwise totally different sensitive tuples. The other figures are measurements.</p>
<h2>Reasons</h2><ul>{reasons}</ul><h2>Warnings</h2><ul>{warnings}</ul>
<h2>Figures</h2><table>{rows}</table>
{rule_table}
</body></html>
"""
