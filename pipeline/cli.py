"""``msa-release``: run the Dagster ``release`` job in-process from the command line."""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import click

__all__ = ["main"]

DAGSTER_YAML = """\
telemetry:
  enabled: false
"""


def _split(value: str | None) -> list[str] | None:
    if value is None:
        return None
    items = [v.strip() for v in value.split(",") if v.strip()]
    return items


def prepare_dagster_home(home: Path, *, explicit_home: bool = False) -> Path:
    """Make Dagster's instance directory exist and return it.

    ``<home>/dagster`` when the user named ``--home`` (so a run never writes into another
    home's instance) or when ``$DAGSTER_HOME`` is unset; otherwise ``$DAGSTER_HOME``. The
    directory is created if missing (Dagster refuses a missing one) and gets a
    ``dagster.yaml`` with telemetry disabled unless it already has one.
    """
    if os.environ.get("DAGSTER_HOME") and not explicit_home:
        dagster_home = Path(os.environ["DAGSTER_HOME"]).expanduser().resolve()
    else:
        dagster_home = home / "dagster"
    dagster_home.mkdir(parents=True, exist_ok=True)
    config = dagster_home / "dagster.yaml"
    if not config.exists():
        config.write_text(DAGSTER_YAML)
    os.environ["DAGSTER_HOME"] = str(dagster_home)
    return dagster_home


def build_settings_config(
    *,
    input_path: str | None,
    input_format: str | None,
    header: bool | None,
    column_names: list[str] | None,
    delimiter: str | None,
    quasi_identifiers: list[str] | None,
    sensitive_attributes: list[str] | None,
    ell: int | None,
    min_confidence: float | None,
    seed: int | None,
    missing_tokens: list[str] | None,
    confidence_tolerance: float | None,
    model: str | None = None,
    allow_disclosure: bool | None = None,
) -> dict:
    """Run config for the ``settings`` resource; only what the user gave overrides the defaults.

    With ``--input`` the Adult-specific defaults (headerless file, Adult column names and
    columns) no longer apply: the CSV is read with its header row unless ``--no-header``, and
    quasi-identifiers and sensitive attributes must be named.

    Raises
    ------
    click.UsageError
        ``--input`` without ``--quasi-identifiers`` / ``--sensitive-attributes``.
    """
    config: dict = {}
    if input_path is not None:
        if not quasi_identifiers or not sensitive_attributes:
            raise click.UsageError(
                "with --input, name the columns: --quasi-identifiers a,b --sensitive-attributes x,y"
            )
        config.update({"input_path": input_path, "csv_header": True, "column_names": []})
    for key, value in (
        ("input_format", input_format),
        ("csv_header", header),
        ("column_names", column_names),
        ("delimiter", delimiter),
        ("quasi_identifiers", quasi_identifiers),
        ("sensitive_attributes", sensitive_attributes),
        ("ell", ell),
        ("min_confidence", min_confidence),
        ("seed", seed),
        ("missing_value_tokens", missing_tokens),
        ("confidence_tolerance", confidence_tolerance),
        ("model", model),
        ("allow_disclosure", allow_disclosure),
    ):
        if value is not None:
            config[key] = value
    return config


@click.group()
def main() -> None:
    """Publish microdata with several sensitive attributes (strong-rule mixed model)."""


@main.command()
@click.option("--input", "input_path", type=click.Path(dir_okay=False), help="CSV or Parquet file (default: UCI Adult).")
@click.option("--input-format", type=click.Choice(["auto", "csv", "parquet"]), help="Default: by extension.")
@click.option("--header/--no-header", default=None, help="Whether the CSV has a header row (default with --input: yes).")
@click.option("--column-names", help="All column names in file order, comma-separated (CSV without header).")
@click.option("--delimiter", help="CSV field separator (default ',').")
@click.option("--quasi-identifiers", help="Comma-separated quasi-identifier columns.")
@click.option("--sensitive-attributes", help="Comma-separated sensitive attribute columns (at least 2).")
@click.option("--ell", type=click.IntRange(min=2), help="ℓ (integer >= 2; default 3).")
@click.option("--min-confidence", type=click.FloatRange(min=0.0, max=1.0, min_open=True), help="In (0, 1]; default 0.8.")
@click.option("--seed", type=click.IntRange(min=0), help="Seed of the per-group permutation (default 0).")
@click.option("--missing-tokens", help="Comma-separated values meaning 'missing' (default: '', NULL, ?).")
@click.option("--model", type=click.Choice(["mixed", "rating"]), help="Publication model (default mixed; rating = plain Rating baseline).")
@click.option("--allow-disclosure", is_flag=True, default=None,
              help="Publish even if the strong-rule adversary beats 1/ell (recorded in the manifest).")
@click.option("--confidence-tolerance", type=click.FloatRange(0.0, 1.0), help="Gate 4 tolerance (default 0.05).")
@click.option("--home", type=click.Path(file_okay=False), help="Release home (default $MSA_RELEASE_HOME or ./var).")
@click.option("--verbose", is_flag=True, help="Show Dagster's step-by-step log.")
def run(**options) -> None:
    """Run the Dagster `release` job in-process and print a summary of the published release."""
    started = time.monotonic()
    if options["home"]:
        os.environ["MSA_RELEASE_HOME"] = str(Path(options["home"]).resolve())
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    config = build_settings_config(
        input_path=options["input_path"],
        input_format=options["input_format"],
        header=options["header"],
        column_names=_split(options["column_names"]),
        delimiter=options["delimiter"],
        quasi_identifiers=_split(options["quasi_identifiers"]),
        sensitive_attributes=_split(options["sensitive_attributes"]),
        ell=options["ell"],
        min_confidence=options["min_confidence"],
        seed=options["seed"],
        missing_tokens=(options["missing_tokens"].split(",") if options["missing_tokens"] is not None else None),
        confidence_tolerance=options["confidence_tolerance"],
        model=options["model"],
        allow_disclosure=options["allow_disclosure"],
    )
    from pipeline.resources import release_home

    home = release_home()
    prepare_dagster_home(home, explicit_home=bool(options["home"]))

    import dagster as dg

    from pipeline.definitions import build_definitions
    from pipeline.publish import read_latest

    previous = read_latest(home / "releases")
    definitions = build_definitions(home)
    job = definitions.resolve_job_def("release")
    with dg.DagsterInstance.get() as instance:
        result = job.execute_in_process(
            run_config={
                "resources": {"settings": {"config": config}},
                "loggers": {"console": {"config": {"log_level": "DEBUG" if options["verbose"] else "CRITICAL"}}},
            },
            instance=instance,
            raise_on_error=False,
        )
    elapsed = time.monotonic() - started
    gates = result.get_asset_check_evaluations()
    latest = read_latest(home / "releases")
    if result.success and latest is not None and latest != previous:
        manifest = json.loads((latest / "manifest.json").read_text())
        click.echo(render_summary(manifest, latest, elapsed))
        return
    click.echo(f"msa-release: NO release published (run {result.run_id}, {elapsed:.1f} s)", err=True)
    for evaluation in gates:
        figures = {k: v.value for k, v in evaluation.metadata.items()}
        if figures.get("applicable") is False:
            status = "not applicable"
        else:
            status = "passed" if evaluation.passed else "FAILED"
        click.echo(f"  gate {evaluation.check_name}: {status} {json.dumps(figures, default=str)}", err=True)
        if evaluation.check_name == "disclosure_within_bound" and not evaluation.passed:
            click.echo(
                "  the strong-rule adversary beats 1/ell on this release; use the mixed model, or pass "
                "--allow-disclosure to publish anyway (recorded in the manifest)",
                err=True,
            )
    for event in result.all_events:
        if event.is_step_failure and event.step_failure_data and event.step_failure_data.error:
            error = event.step_failure_data.error
            cause = error.cause or error
            click.echo(f"  step {event.step_key} failed: {cause.message.strip()}", err=True)
    if previous is not None:
        click.echo(f"  the previous release is untouched: {previous}", err=True)
    sys.exit(1)


@main.command()
@click.argument("release_dir", type=click.Path(exists=True, file_okay=False))
@click.option("--raw", "raw_path", required=True, type=click.Path(exists=True, dir_okay=False),
              help="Raw table to mine the adversary's strong rules from (read as the release read its input).")
@click.option("--min-confidence", type=click.FloatRange(min=0.0, max=1.0, min_open=True),
              help="Threshold of the adversary's rules (default: the release's).")
@click.option("--output", type=click.Path(dir_okay=False),
              help="Where to write the JSON report (default: ./audit-<release_id>.json).")
def audit(release_dir: str, raw_path: str, min_confidence: float | None, output: str | None) -> None:
    """Audit RELEASE_DIR (a release directory, or a releases directory with LATEST) from its files.

    Runs the strong-rule adversary (SPEC §10) on every released record, re-checks ℓ-diversity
    on the files, and computes AIL, RCE and rule confidences. Exit status: 0 PASS, 1 FAIL,
    2 unusable input.
    """
    from pipeline.audit import AuditError, audit_release

    try:
        report = audit_release(release_dir, raw_path, min_confidence=min_confidence)
    except AuditError as error:
        raise click.ClickException(str(error)) from error
    target = Path(output or f"audit-{report['release']['release_id']}.json")
    target.write_text(json.dumps(report, indent=2) + "\n")
    click.echo(render_audit(report, target))
    if report["verdict"] != "PASS":
        sys.exit(1)


def render_audit(report: dict, target: Path) -> str:
    """One screen of text about an audit (from :func:`pipeline.audit.audit_release`)."""
    adversary, structure, metrics = report["adversary"], report["structure"], report["metrics"]
    release = report["release"]
    lines = [
        f"Audit of release {release['release_id']} ({release['model']}, ell={release['ell']}): {report['verdict']}",
        *[f"  reason         {reason}" for reason in report["reasons"]],
        *[f"  WARNING        {warning}" for warning in report.get("warnings", [])],
        f"  rules          {adversary['n_rules']} strong rules mined from {report['raw']['path']} "
        f"(min_confidence {adversary['min_confidence']})",
        f"  adversary      max P(record holds a rule) = {adversary['max_probability']} (bound 1/{release['ell']}); "
        f"{adversary['n_records_exposed']} records exposed, {adversary['n_records_above_bound']} above the bound, "
        f"{adversary['n_records_certain']} certain",
        f"  structure      {structure['n_sids']} SIDs ({structure['n_sids_below_ell']} below ell), "
        f"{structure['n_groups']} groups ({structure['n_groups_not_ell_diverse']} not ell-diverse), "
        f"counts match manifest: {structure['record_counts_match_manifest']}",
        f"  utility        AIL {metrics['additional_information_loss']:.6f}, RCE {metrics['reconstruction_error']:.1f} "
        f"({metrics['reconstruction_error_per_record']:.4f} per record), {metrics['n_suppressed_cells']} suppressed cells, "
        f"{metrics['n_deleted']} deleted records",
    ]
    if metrics["average_raw_confidence"] is not None:
        lines.append(
            f"  confidences    average raw {metrics['average_raw_confidence']:.4f}, "
            f"recovered from the release {metrics['average_released_confidence']:.4f}"
        )
    lines.append(f"  report         {target}")
    return "\n".join(lines)


def render_summary(manifest: dict, path: Path, elapsed: float) -> str:
    """One screen of text about a published release (from its manifest)."""
    gates = manifest["checks"]
    lines = [
        f"Published release {manifest['release_id']}",
        f"  directory      {path}",
        f"  model          {manifest['model']}  ell={manifest['ell']}  min_confidence={manifest['min_confidence']}  seed={manifest['seed']}",
        f"  QIs            {', '.join(manifest['quasi_identifiers'])}",
        f"  sensitive      {', '.join(manifest['sensitive_attributes'])}",
        f"  records        {manifest['n_input']} read, {manifest['n_dropped_missing']} dropped (missing sensitive value)",
        f"                 {manifest['n_sac_released']} in SAC~, {manifest['n_attribute_table']} in the attribute table, "
        f"{manifest['n_deleted']} deleted",
        f"  suppressed     {manifest['n_suppressed_cells']} attribute-table cells",
    ]
    observed = {g["name"]: g.get("observed", {}) for g in gates}
    rules = observed.get("rule_confidence_preserved", {})
    disclosure = observed.get("disclosure_within_bound", {})
    groups = observed.get("sac_released_is_l_diverse", {})
    lines.append(
        f"  strong rules   {rules.get('n_strong_rules', '?')} (recovered exactly: {rules.get('n_rules_exact', '?')}, "
        f"max deviation {rules.get('max_confidence_deviation', '?')})"
    )
    if manifest["model"] == "mixed":
        lines.append(f"  groups         {groups.get('n_groups', '?')} SAC~ groups of {manifest['ell']}")
    lines.append(
        f"  disclosure     max {disclosure.get('max_disclosure_probability', '?')} over "
        f"{disclosure.get('n_records_with_strong_rules', '?')} rule holders (bound 1/ell = {1 / manifest['ell']:.4f})"
    )
    if manifest.get("disclosure_override_used"):
        lines.append("  WARNING        published with --allow-disclosure: the disclosure bound 1/ell does NOT hold")
    lines.append("  gates")
    labels = {"passed": "PASS", "failed": "FAIL", "failed_overridden": "FAIL (overridden)", "not_applicable": "n/a "}
    for gate in gates:
        label = labels.get(gate.get("status", ""), "PASS" if gate["passed"] else "FAIL")
        lines.append(f"    {label}  {gate['name']}")
    lines.append(f"  time           {elapsed:.1f} s")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
