"""refusal.html: why a release was refused for data loss and what would work (issue 15), in the private home.

Written to ``$MSA_RELEASE_HOME/refusals/<run_id>/refusal.html`` (directory 0700, file 0600; never under releases/),
with the diagnosis as ``diagnosis.json`` beside it, by
the gate that refused the release and by ``msa-release run`` for a refusal before the run. It renders a
:class:`pipeline.core.diagnosis.Diagnosis` with ``templates/refusal.html`` (``string.Template``, like report.html);
every text is HTML-escaped. The only data values it names are the sensitive values of strong rules (report.html
shows them too); quasi-identifiers and other values never appear.
"""

from __future__ import annotations

import html
import json
import os
import string
from datetime import UTC, datetime
from pathlib import Path

from pipeline.core.diagnosis import Diagnosis, diagnosis_paragraph, grouping_clause, option_change

__all__ = [
    "DIAGNOSIS_JSON",
    "REFUSALS",
    "TEMPLATE",
    "read_diagnosis",
    "refusal_html",
    "refusal_path",
    "write_refusal_report",
]

TEMPLATE = Path(__file__).resolve().parent / "templates" / "refusal.html"
#: The folder of the release home that holds one folder per refused run.
REFUSALS = "refusals"
#: The whole diagnosis (with the rules' values), next to refusal.html: what ``msa-release run`` prints.
DIAGNOSIS_JSON = "diagnosis.json"


def _percent(share: float) -> str:
    return f"{100 * share:.1f} %"


def _table(header: list[str], rows: list[list[str]], numeric: set[int] | None = None) -> str:
    numeric = numeric or set()
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join(
        "<tr>"
        + "".join(
            f'<td class="number">{html.escape(c)}</td>' if k in numeric else f"<td>{html.escape(c)}</td>"
            for k, c in enumerate(row)
        )
        + "</tr>"
        for row in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def refusal_html(diagnosis: Diagnosis, *, run_id: str, created: datetime | None = None) -> str:
    """The refusal page of ``diagnosis`` (a whole HTML document)."""
    from pipeline.release.publish import package_versions

    loss = diagnosis.loss
    n = loss.n_records
    loss_rows = [["records deleted", f"{loss.n_deleted:,} of {n:,}", _percent(diagnosis.deleted_share)]]
    if not any(loss.suppressed_cells.values()):
        loss_rows.append(["attribute-table cells suppressed", "none", ""])
    for attribute, count in loss.suppressed_cells.items():
        cells = loss.attribute_cells.get(attribute, 0)
        if not count:
            continue
        loss_rows.append(
            [
                f"attribute-table cells of {attribute} suppressed",
                f"{count:,} of {cells:,}",
                _percent(count / cells if cells else 0.0),
            ]
        )
    loss_html = _table(["what", "count", "share"], loss_rows, {1, 2})
    settings = diagnosis.settings
    cause = [
        f"<p>Settings: ℓ = {settings.ell}, min_confidence = {settings.min_confidence:g}, min_support = "
        f"{settings.min_support}; failed gate(s): {html.escape(', '.join(diagnosis.gates))}.</p>"
    ]
    if loss.max_confidence_deviation is not None and settings.confidence_tolerance is not None:
        cause.append(
            f"<p>The deletions change the strong rules' confidences recovered from the release by up to "
            f"{loss.max_confidence_deviation:.2f} (confidence_tolerance {settings.confidence_tolerance:g}).</p>"
        )
    if diagnosis.n_strong_rules:
        cause.append(
            f"<p>{diagnosis.n_strong_rules} strong rule(s): {diagnosis.rule_holders:,} records "
            f"({_percent(diagnosis.rule_holders / n if n else 0.0)}) hold one (rule holders)"
            f"{html.escape(grouping_clause(diagnosis))}. The largest rules:</p>"
        )
        cause.append(
            _table(
                ["rule", "support (records)", "confidence", "consequent value's share of the table"],
                [
                    [
                        f"{r.side('antecedent')} ⇒ {r.side('consequent')}",
                        f"{r.support:,}",
                        f"{r.confidence:.2f}",
                        _percent(r.consequent_share),
                    ]
                    for r in diagnosis.rules
                ],
                {1, 2, 3},
            )
        )
    else:
        cause.append("<p>There is no strong rule: the loss comes from the values alone.</p>")
    if diagnosis.dominant:
        cause.append(
            f"<p>Every group and SID holds a value at most once in ℓ = {settings.ell} records, so a value held by more "
            f"than 1/{settings.ell} of the records forces deletions whatever the rules:</p>"
        )
        cause.append(
            _table(
                ["value", "share of the records", "deletions it forces (at least)"],
                [
                    [
                        f"{d.attribute} = {d.value}" if d.value is not None else f"most frequent value of {d.attribute}",
                        _percent(d.share),
                        f"{d.forced_deletions:,}",
                    ]
                    for d in diagnosis.dominant
                ],
                {1, 2},
            )
        )
    rows = []
    notes = []
    for option in diagnosis.options:
        if not option.available:
            notes.append(f"<p>{html.escape(option.effect)}.</p>")
            continue
        rows.append(
            [
                str(len(rows) + 1),
                option_change(option, "config"),
                option_change(option, "cli").removeprefix("last resort, "),
                option.effect,
            ]
        )
    options_html = _table(["#", "change (config key)", "command line", "predicted effect"], rows) + "".join(notes)
    when = (created or datetime.now(UTC)).strftime("%Y-%m-%d %H:%M:%S UTC")
    return string.Template(TEMPLATE.read_text(encoding="utf-8")).substitute(
        version=html.escape(package_versions().get("msa-release", "")),
        run_id=html.escape(run_id),
        created=when,
        summary=html.escape(diagnosis_paragraph(diagnosis, "config").split(" Options: ")[0]),
        loss=loss_html,
        cause="\n".join(cause),
        options=options_html,
    )


def refusal_path(home: Path, run_id: str) -> Path:
    """``<home>/refusals/<run_id>/refusal.html``."""
    return Path(home) / REFUSALS / run_id / "refusal.html"


def write_refusal_report(home: Path, run_id: str, diagnosis: Diagnosis) -> Path:
    """Write :func:`refusal_html` to :func:`refusal_path` (folders 0700, the file 0600, replaced atomically).

    Raises
    ------
    OSError
        The home cannot be written.
    """
    target = refusal_path(home, run_id)
    for directory in (target.parent.parent, target.parent):
        directory.mkdir(mode=0o700, exist_ok=True)
    _write_private(target.with_name(DIAGNOSIS_JSON), json.dumps(diagnosis.to_dict(), indent=1) + "\n")
    _write_private(target, refusal_html(diagnosis, run_id=run_id))
    return target


def _write_private(target: Path, text: str) -> None:
    """Write ``text`` to ``target`` (0600), replaced atomically."""
    staged = target.with_name(f".{target.name}.tmp")
    descriptor = os.open(staged, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(text)
    staged.replace(target)


def read_diagnosis(report: Path) -> Diagnosis | None:
    """The whole diagnosis written next to the refusal.html ``report`` (:data:`DIAGNOSIS_JSON`), or None when it is
    missing or unreadable."""
    try:
        return Diagnosis.from_dict(json.loads((Path(report).parent / DIAGNOSIS_JSON).read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError):
        return None
