"""msa-release audit and report: audit a published release from its files; regenerate its report.html."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from pipeline.cli.app import main
from pipeline.cli.common import FiniteFloatRange, UnusableInput, machine_failure_line, use_home
from pipeline.release.reports import AuditReport


@main.command()
@click.argument("release_dir", type=click.Path(exists=True, file_okay=False))
@click.option(
    "--raw",
    "raw_path",
    required=True,
    type=click.Path(exists=True, dir_okay=False),
    help="Raw table to mine the adversary's strong rules from (read as the release read its input).",
)
@click.option(
    "--min-confidence",
    type=FiniteFloatRange(min=0.0, max=1.0, min_open=True),
    help="Threshold of the adversary's rules (default: the release's).",
)
@click.option(
    "--output",
    type=click.Path(dir_okay=False),
    help="Where to write the JSON report (default: <home>/audits/<release_id>/audit.json).",
)
@click.option(
    "--home",
    type=click.Path(file_okay=False),
    help="Release home whose audits/ gets the report when --output is not given (default $MSA_RELEASE_HOME or ./var).",
)
def audit(release_dir: str, raw_path: str, min_confidence: float | None, output: str | None, home: str | None) -> None:
    """Audit RELEASE_DIR (a release directory, or a releases directory with LATEST) from its files.

    Runs the strong-rule adversary (SPEC §10) on every released record, re-checks ℓ-diversity
    on the files, and computes AIL, RCE and rule confidences. Writes the JSON report to
    <home>/audits/<release_id>/audit.json (or --output). Exit status: 0 PASS, 1 FAIL,
    2 unusable input.
    """
    from pipeline.release.audit import AuditError, audit_release

    try:
        report = audit_release(release_dir, raw_path, min_confidence=min_confidence)
    except AuditError as error:
        raise UnusableInput(str(error)) from error
    if output:
        target = Path(output)
    else:
        target = use_home(home) / "audits" / report.release.release_id / "audit.json"
        target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(report.as_json(), indent=2) + "\n")
    click.echo(render_audit(report, target))
    if not report.passed:
        sys.exit(1)


@main.command()
@click.argument("release_dir", type=click.Path(exists=True, file_okay=False))
@click.option(
    "--raw",
    "raw_path",
    type=click.Path(exists=True, dir_okay=False),
    help="Raw table, only for a mixed/Rating release without report.json: rule confidences, AIL and RCE "
    "are then computed from it (read as the release read its input).",
)
def report(release_dir: str, raw_path: str | None) -> None:
    """Regenerate RELEASE_DIR/report.html (a release directory, or a releases directory with LATEST).

    The page is rebuilt from the release's own files (manifest.json, report.json, the Parquet
    tables) and compared with the newest release of the other model (mixed vs Rating) of the same
    input and parameters in the same releases directory. Exit status: 0 written, 2 unusable input.
    """
    from pipeline.reporting.release_report import ReportError, regenerate_report

    try:
        target = regenerate_report(release_dir, raw_path=raw_path)
    except ReportError as error:
        raise UnusableInput(str(error)) from error
    except OSError as error:
        click.echo(f"msa-release: report.html NOT rewritten (the old page is unchanged): {machine_failure_line(error)}", err=True)
        sys.exit(1)
    click.echo(f"Report written: {target}")


def render_audit(report: AuditReport, target: Path) -> str:
    """One screen of text about an audit (from :func:`pipeline.release.audit.audit_release`)."""
    from pipeline.reporting.formatting import format_count_share, format_figure
    from pipeline.reporting.release_report import no_strong_rules_sentence

    adversary, structure, metrics, release = report.adversary, report.structure, report.metrics, report.release
    risk = report.identity_risk
    lines = [
        f"Audit of release {release.release_id} ({release.model}, ell={release.ell}): {report.verdict}",
        *[f"  reason         {reason}" for reason in report.reasons],
        *[f"  WARNING        {warning}" for warning in report.warnings or []],
        f"  rules          {adversary.n_rules} strong rules mined from {report.raw.path} "
        f"(min_confidence {adversary.min_confidence})",
        f"  disclosure     max {adversary.max_probability} over {format_figure(adversary.n_released_records)} released "
        "records (the adversary cannot tell rule holders apart, so it scores every released record); "
        f"{format_figure(adversary.n_records_exposed)} released records with a positive probability, "
        f"{format_figure(adversary.n_records_above_bound)} released records above the bound 1/{release.ell}, "
        f"{format_figure(adversary.n_records_certain)} certain",
        *([f"                 {no_strong_rules_sentence(release.model)}"] if adversary.n_rules == 0 else []),
        f"  identity       {format_count_share(risk.n_unique, risk.n_records)} released records unique on their published "
        f"quasi-identifiers; smallest class k = {format_figure(risk.smallest_class)}; "
        + ", ".join(
            f"{format_count_share(n, risk.n_records)} in classes of fewer than {size}"
            for size, n in risk.records_in_classes_smaller_than.items()
            if size != "2"
        ),
        f"  structure      {structure.n_sids} SIDs ({structure.n_sids_below_ell} below ell), "
        f"{structure.n_groups} groups ({structure.n_groups_not_ell_diverse} not ell-diverse), "
        f"counts match manifest: {structure.record_counts_match_manifest}",
        f"  utility        AIL {format_figure(metrics.additional_information_loss)}, RCE "
        f"{format_figure(metrics.reconstruction_error)} ({format_figure(metrics.reconstruction_error_per_record)} per "
        f"record), {format_figure(metrics.n_suppressed_cells)} suppressed cells, {format_figure(metrics.n_deleted)} "
        "deleted records",
    ]
    if metrics.average_raw_confidence is not None and metrics.average_released_confidence is not None:
        lines.append(
            f"  confidences    average raw {format_figure(metrics.average_raw_confidence)}, "
            f"recovered from the release {format_figure(metrics.average_released_confidence)}"
        )
    lines.append(f"  report         {target}")
    return "\n".join(lines)
