"""msa-release audit and report: audit a published release from its files; regenerate its report.html."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import click

from pipeline.cli.app import main
from pipeline.cli.common import FiniteFloatRange, UnusableInput, machine_failure_line, use_home

if TYPE_CHECKING:  # pydantic's models: imported by the audit when it runs, not by every command of the CLI
    from pipeline.release.reports import AuditReport


@main.command()
@click.argument("release_dir", required=False, type=click.Path(exists=True, file_okay=False))
@click.option(
    "--raw",
    "raw_path",
    type=click.Path(exists=True, dir_okay=False),
    help="Raw table to mine the adversary's strong rules from (a release: read as the release read its input; "
    "required for a mixed/Rating release). With --table: a CSV with a header or a Parquet file.",
)
@click.option(
    "--min-confidence",
    type=FiniteFloatRange(min=0.0, max=1.0, min_open=True),
    help="Threshold of the adversary's rules (default: the release's; --table: 0.8).",
)
@click.option(
    "--min-support",
    type=click.IntRange(min=1),
    help="Least support of the adversary's rules, in raw records holding both values (default: the release's; a "
    "(k, ℓ) release or --table: max(ℓ, 5)). Lower than the release's, it measures an adversary who knows rules the "
    "release did not bound.",
)
@click.option(
    "--table",
    "table_path",
    type=click.Path(exists=True, dir_okay=False),
    help="Audit another tool's generalized or suppressed table (ARX, anjana, sdcMicro: labels from the hierarchies, "
    "'*' for a suppressed value), .csv or .parquet, instead of a release.",
)
@click.option("--quasi-identifiers", help="With --table: its quasi-identifier columns, comma-separated.")
@click.option("--sensitive-attributes", help="With --table: its sensitive attribute columns, comma-separated.")
@click.option(
    "--hierarchies",
    "hierarchies_dir",
    type=click.Path(exists=True, file_okay=False),
    help="ARX hierarchies: with --table, labels are checked and generalization measured; with a (k, ℓ) release and "
    "--raw, the join and one-known-value attacks run for every raw record; with --raw, any release or table also gets "
    "the COUNT-query workload's errors (generalized labels spread over the values they cover).",
)
@click.option("--k", "k", type=click.IntRange(min=1), default=2, show_default=True, help="With --table: the k required.")
@click.option("--ell", type=click.IntRange(min=1), default=2, show_default=True, help="With --table: the ℓ required.")
@click.option(
    "--output",
    type=click.Path(dir_okay=False),
    help="Where to write the JSON report (default: <home>/audits/<release_id>/audit.json; --table: "
    "<home>/audits/table-<sha256 prefix>/audit.json, with report.html beside it).",
)
@click.option(
    "--home",
    type=click.Path(file_okay=False),
    help="Release home whose audits/ gets the report when --output is not given (default $MSA_RELEASE_HOME or ./var).",
)
@click.option(
    "--workers",
    type=click.IntRange(min=1),
    default=2,
    show_default=True,
    help="A sharded release (part files): processes auditing its parts, one part per process at a time.",
)
def audit(
    release_dir: str | None,
    raw_path: str | None,
    min_confidence: float | None,
    min_support: int | None,
    table_path: str | None,
    quasi_identifiers: str | None,
    sensitive_attributes: str | None,
    hierarchies_dir: str | None,
    k: int,
    ell: int,
    output: str | None,
    home: str | None,
    workers: int,
) -> None:
    """Audit RELEASE_DIR (a release directory, or a releases directory with LATEST) from its files, or another tool's
    table (--table).

    A mixed/Rating release: runs the strong-rule adversary (SPEC §10) on every released record, re-checks
    ℓ-diversity on the files, and computes AIL, RCE and rule confidences (--raw required). A (k, ℓ) release, or a
    --table: k, distinct and entropy ℓ per sensitive attribute, Diverse ≥ ℓ over whole sensitive tuples (exact),
    the share of records pinned by one known value and the learned-model posterior against the population
    baseline; with --raw the strong-rule adversary (and, for a release with --hierarchies, the join and
    one-known-value attacks). Writes the JSON report to <home>/audits/<id>/audit.json (or --output).
    Exit status: 0 PASS, 1 FAIL, 2 unusable input.
    """
    from pipeline.release.class_audit import ClassAuditError, release_model

    if table_path is not None:
        if release_dir is not None:
            raise UnusableInput("pass either RELEASE_DIR or --table, not both")
        _audit_table(
            table_path,
            quasi_identifiers,
            sensitive_attributes,
            hierarchies_dir,
            raw_path,
            k,
            ell,
            min_confidence,
            min_support,
            output,
            home,
        )
        return
    if release_dir is None:
        raise UnusableInput("pass RELEASE_DIR (a release directory) or --table FILE")
    if release_model(release_dir) == "kl":
        from pipeline.release.class_audit import audit_kl_release

        try:
            result = audit_kl_release(
                release_dir,
                raw_path=raw_path,
                hierarchies_dir=hierarchies_dir,
                min_confidence=min_confidence,
                min_support=min_support,
            )
        except ClassAuditError as error:
            raise UnusableInput(str(error)) from error
        other_raw = None
        if result.get("raw") is not None:
            from pipeline.release.audit import _is_release_input

            directory = Path(str(result["release"]["directory"]))
            manifest = json.loads((directory / "manifest.json").read_text(encoding="utf-8"))
            is_input = _is_release_input(directory, manifest, str(result["raw"]["sha256"]))
            result["raw"]["is_release_input"] = is_input
            if is_input is False:
                other_raw = str(result["raw"]["sha256"])
                result["warnings"] = [
                    *result["warnings"],
                    "the raw table is not the release's input (SHA-256 differs): the strong-rule adversary's rules "
                    "and the attacks describe this table, not the one the release was made from",
                ]
        target = Path(output) if output else _default_target(home, str(result["release"]["release_id"]), other_raw)
        _write_class_audit(result, target)
        return
    if raw_path is None:
        raise UnusableInput("a mixed or Rating release is audited against its raw table: pass --raw RAW")
    from pipeline.engines.local import ShardFailed
    from pipeline.release.audit import AuditError, DamagedRelease, audit_release

    try:
        report = audit_release(
            release_dir,
            raw_path,
            min_confidence=min_confidence,
            min_support=min_support,
            hierarchies_dir=hierarchies_dir,
            workers=workers,
        )
    except DamagedRelease as error:
        _damaged(release_dir, str(error))
    except ShardFailed as error:
        if not isinstance(error.__cause__, DamagedRelease):  # a part's damage (the project's errors stay the cause)
            raise
        _damaged(release_dir, str(error))
    except AuditError as error:
        raise UnusableInput(str(error)) from error
    other_raw = report.raw.sha256 if report.raw.is_release_input is False else None
    target = Path(output) if output else _default_target(home, str(report.release.release_id), other_raw)
    with _writing_audit(target):
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(report.as_json(), indent=2) + "\n")
    click.echo(render_audit(report, target))
    if not report.passed:
        sys.exit(1)


def _default_target(home: str | None, release_id: str, other_raw_sha256: str | None) -> Path:
    """Where an audit's JSON goes without --output: ``<home>/audits/<release_id>/audit.json``; an audit against a raw
    table that is known not to be the release's input goes to ``<home>/audits/<release_id>/other-raw-<sha256
    prefix>/audit.json``, so that it never replaces the audit against the input (a newcomer's audit with 20 rows of
    the input, session 40, replaced it and passed: no rule is mined from 20 rows)."""
    base = use_home(home) / "audits" / release_id
    if other_raw_sha256 is None:
        return base / "audit.json"
    return base / f"other-raw-{other_raw_sha256[:12]}" / "audit.json"


def _damaged(release_dir: str, reason: str) -> NoReturn:
    """Print the FAIL verdict of a release whose files break its contract (:class:`DamagedRelease`) and exit 1: the
    audit cannot measure it, and a damaged release fails its audit."""
    click.echo(f"Audit of release {release_dir}: FAIL (the release is damaged)\n  reason         {reason}")
    sys.exit(1)


def _columns(option: str, value: str | None) -> list[str]:
    columns = [c.strip() for c in (value or "").split(",") if c.strip()]
    if not columns:
        raise UnusableInput(f"--table needs {option} (comma-separated column names of the table)")
    return columns


def _audit_table(
    table_path: str,
    quasi_identifiers: str | None,
    sensitive_attributes: str | None,
    hierarchies_dir: str | None,
    raw_path: str | None,
    k: int,
    ell: int,
    min_confidence: float | None,
    min_support: int | None,
    output: str | None,
    home: str | None,
) -> None:
    from pipeline.release.class_audit import ClassAuditError, audit_generalized_table

    try:
        result = audit_generalized_table(
            table_path,
            _columns("--quasi-identifiers", quasi_identifiers),
            _columns("--sensitive-attributes", sensitive_attributes),
            k=k,
            ell=ell,
            hierarchies_dir=hierarchies_dir,
            raw_path=raw_path,
            min_confidence=0.8 if min_confidence is None else min_confidence,
            min_support=min_support,
        )
    except ClassAuditError as error:
        raise UnusableInput(str(error)) from error
    target = Path(output) if output else use_home(home) / "audits" / f"table-{result['table']['sha256'][:12]}" / "audit.json"
    _write_class_audit(result, target)


@contextmanager
def _writing_audit(target: Path) -> Iterator[None]:
    """Exit 1 with one line (the machine's error, where, and what to do) when the audit's report cannot be written
    (a read-only or full home), instead of a traceback; the audit's verdict is not printed then."""
    try:
        yield
    except OSError as error:
        click.echo(
            f"msa-release audit: the audit was computed but NOT written to {target}: {machine_failure_line(error)}; "
            "or pass --output <a file in a writable directory>",
            err=True,
        )
        sys.exit(1)


def _write_class_audit(result: dict, target: Path) -> None:
    """Write the JSON and report.html of a class audit beside it, print the summary, exit 1 on FAIL."""
    from pipeline.reporting.class_audit_report import class_audit_html, render_class_audit

    page = target.parent / "report.html"
    with _writing_audit(target):
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(result, indent=2) + "\n")
        page.write_text(class_audit_html(result))
    click.echo(render_class_audit(result, target, page))
    if result["verdict"] != "PASS":
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

    adversary, structure, metrics, release = report.adversary, report.structure, report.metrics, report.release
    risk = report.identity_risk
    against = (
        " — against a raw table that is NOT the release's input (the verdict is about that table's rules)"
        if report.raw.is_release_input is False
        else ""
    )
    lines = [
        f"Audit of release {release.release_id} ({release.model}, ell={release.ell}): {report.verdict}{against}",
        *[f"  reason         {reason}" for reason in report.reasons],
        *[f"  WARNING        {warning}" for warning in report.warnings or []],
        f"  rules          {adversary.n_rules} strong rules mined from {report.raw.path} "
        f"(min_confidence {adversary.min_confidence}"
        + (f", min_support {adversary.min_support} records)" if adversary.min_support is not None else ")"),
        f"  disclosure     max {adversary.max_probability} over {format_figure(adversary.n_released_records)} released "
        "records (the adversary cannot tell rule holders apart, so it scores every released record); "
        f"{format_figure(adversary.n_records_exposed)} released records with a positive probability, "
        f"{format_figure(adversary.n_records_above_bound)} released records above the bound "
        + (
            f"1/{release.ell}"
            if not release.ell_per_attribute
            else "1/ℓ_j of each rule's consequent ("
            + ", ".join(f"{name} 1/{value}" for name, value in release.ell_per_attribute.items())
            + ")"
        )
        + ", "
        f"{format_figure(adversary.n_records_certain)} certain",
        *(
            [
                "                 no strong rule was mined from this raw table at these thresholds: the strong-rule "
                "adversary has no rule to use, so it learns nothing"
                + (f" (the release itself has {format_figure(structure.n_groups)} SAC~ groups)" if structure.n_groups else "")
            ]
            if adversary.n_rules == 0
            else []
        ),
        f"  identity       {format_count_share(risk.n_unique, risk.n_records)} released records unique on their published "
        f"quasi-identifiers; smallest class k = {format_figure(risk.smallest_class)}; "
        + ", ".join(
            f"{format_count_share(n, risk.n_records)} in classes of fewer than {size}"
            for size, n in risk.records_in_classes_smaller_than.items()
            if size != "2"
        ),
        f"  structure      {structure.n_sids} SIDs ({structure.n_sids_below_ell} below ell, "
        f"{structure.n_sids_value_above_share} with a value above 1/ell or counts not matching the attribute table), "
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
    workload = report.query_workload
    if workload is not None and workload.W1 is not None:
        lines.append(
            f"  workload       {workload.W1.n_queries} COUNT queries per workload: median relative error W1 "
            f"{workload.W1.median:.3f}"
            + (f", W2 {workload.W2.median:.3f}" if workload.W2 is not None else "")
            + f" (90th percentile W1 {workload.W1.p90:.3f}"
            + (f", W2 {workload.W2.p90:.3f}" if workload.W2 is not None else "")
            + f"; floor {format_figure(workload.floor)} records)"
        )
    lines.append(f"  report         {target}")
    return "\n".join(lines)
