"""msa-release run: one release (mixed, Rating or (k, ℓ)) through its Dagster job, and its one-screen summary."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import click

from pipeline.cli.app import main
from pipeline.cli.common import (
    report_step_failures,
    settings_from_options,
    check_model_options,
    environment_failure_messages,
    execute_job,
    gate_failure_explanations,
    hold_release_lock,
    input_options,
    preflight,
    unusable_input_messages,
    use_home,
    validate_settings,
    write_profile_sidecar,
)


@main.command()
@input_options
@click.option("--ell", type=click.IntRange(min=2), help="ℓ (integer >= 2; default 3).")
@click.option("--min-confidence", type=click.FloatRange(min=0.0, max=1.0, min_open=True), help="In (0, 1]; default 0.8.")
@click.option("--seed", type=click.IntRange(min=0), help="Seed of the per-group permutation (default 0).")
@click.option(
    "--model",
    type=click.Choice(["mixed", "rating", "kl"]),
    help="Publication model (default mixed; rating = plain Rating baseline; kl = (k, ℓ)-anonymity, P2).",
)
@click.option(
    "--allow-disclosure",
    is_flag=True,
    default=None,
    help="Publish even if the strong-rule adversary beats 1/ell (recorded in the manifest).",
)
@click.option("--confidence-tolerance", type=click.FloatRange(0.0, 1.0), help="Gate 4 tolerance (default 0.05).")
@click.option(
    "--posterior-slack",
    type=click.FloatRange(0.0, 1.0),
    help="Posterior gate: tolerance above max(1/ell, population posterior) (default 0.05).",
)
@click.option(
    "--posterior-gate",
    type=click.Choice(["block", "warn"]),
    help="Posterior gate: block the release or only warn (default warn until the attribute table passes it; "
    "recorded in the manifest).",
)
@click.option(
    "--grouping",
    type=click.Choice(["qi_aware", "p1"]),
    help="Grouping and bucketization (mixed, rating): qi_aware (default: SAC~ partners with the same "
    "quasi-identifiers first, a group's differing quasi-identifiers generalized along --hierarchies, else '*'; "
    "Rating inside quasi-identifier strata) or p1 (P1's Algorithm 11 and plain Rating, exact "
    "quasi-identifiers; does not resist the learned-model adversary on correlated data).",
)
@click.option(
    "--stratum-deletion-budget",
    type=click.FloatRange(0.0, 1.0),
    help="qi_aware: extra records a stratum split may delete per record whose quasi-identifiers it publishes "
    "more specifically (default 0.02; 0 = fewest deletions, most generalization).",
)
@click.option(
    "--allow-recomposition",
    is_flag=True,
    default=None,
    help="Publish even if the release shares records with an earlier release of this home made with other "
    "settings or records (an intersection can pin values; recorded in the manifest).",
)
@click.option(
    "--residual-policy",
    type=click.Choice(["delete", "suppress"]),
    help="delete (default): delete whole records until no value exceeds 1/ell of the attribute table, so no "
    "cell is suppressed (a suppressed cell names its value); suppress: SPEC's reference behaviour.",
)
@click.option(
    "--min-support",
    type=click.IntRange(min=1),
    help="Minimum support of a strong rule in records (default max(ell, 5)); rarer rules are neither used nor printed.",
)
@click.option(
    "--randomness",
    type=click.Choice(["home-secret", "spec-reference"]),
    help="home-secret (default): keyed order, SID numbers and permutation from $MSA_RELEASE_HOME/secret.key; "
    "spec-reference: SPEC's input-order algorithms (golden examples; leaks the input order, refused by the "
    "order gate on tables of more than a few hundred records).",
)
@click.option("--k", "k", type=click.IntRange(min=2), help="--model kl: minimum equivalence-class size (default 3; k >= ell).")
@click.option(
    "--hierarchies",
    type=click.Path(file_okay=False),
    help="--model kl: folder of ARX hierarchies, one per quasi-identifier (default data/adult/hierarchies); "
    "--model mixed or rating: where the QI-aware grouping finds the hierarchies that generalize group and "
    "stratum quasi-identifiers.",
)
@click.option(
    "--kl-method",
    type=click.Choice(["blocked", "greedy", "exact"]),
    help="--model kl: blocked (default, any size), greedy (<= 6000 records) or exact (<= 16 records).",
)
@click.option("--max-block-size", type=click.IntRange(min=4), help="--model kl, blocked: largest block (default 256; >= 2k).")
@click.option("--generalization-weights", help="--model kl: cost weight per quasi-identifier, e.g. sex=2,race=0.5 (default 1).")
@click.option(
    "--mining-backend",
    type=click.Choice(["auto", "mlxtend-apriori", "mlxtend-fpgrowth", "duckdb", "counting"]),
    help="Strong-rule mining (default auto: mlxtend Apriori below --duckdb-mining-threshold records, DuckDB above).",
)
@click.option(
    "--duckdb-mining-threshold",
    type=click.IntRange(min=1),
    help="With --mining-backend auto: mine with DuckDB from this many records on (default 100000).",
)
@click.option(
    "--keep-releases",
    type=click.IntRange(min=0),
    help="Retention: after publishing, remove the oldest releases beyond the newest N (never LATEST's); default 0 keeps all.",
)
@click.option(
    "--wait/--no-wait",
    default=False,
    help="If another run holds the release lock of this home, wait for it (default: fail at once, exit 3).",
)
@click.option(
    "--wait-timeout",
    type=click.FloatRange(min=0.0),
    default=3600.0,
    show_default=True,
    help="With --wait: give up (exit 3) after this many seconds.",
)
@click.option(
    "--profile",
    is_flag=True,
    default=None,
    help="Record wall time and peak memory (RSS) per stage into the manifest, the Dagster metadata and a JSON sidecar.",
)
@click.option(
    "--profile-output",
    type=click.Path(dir_okay=False),
    help="With --profile: where to write the sidecar (default <home>/profiles/<run_id>.json).",
)
def run(**options) -> None:
    """Run the Dagster `release` job (models mixed, rating) or `kl_release` job (model kl) in-process
    and print a summary of the published release.

    Exit status: 0 published, 1 refused by a gate or another failure (a failure after the publish, e.g. the audit, says the release IS published), 2 unusable input (a usage
    error, an unreadable table, a missing or incomplete hierarchy, a table that cannot be made
    (k, ℓ)-anonymous), 3 another run holds the release lock of this home (see --wait).
    """
    started = time.monotonic()
    check_model_options(options)
    config = settings_from_options(options)
    validate_settings(config)
    preflight(config, home_option=options["home"])
    from pipeline.models import job_of_model
    from pipeline.release.publish import read_latest

    job_name = job_of_model(config.get("model"))
    if options["profile_output"] and not options["profile"]:
        raise click.UsageError("--profile-output needs --profile")
    hold_release_lock(use_home(options["home"]), wait=options["wait"], wait_timeout=options["wait_timeout"])
    previous = read_latest(use_home(options["home"]) / "releases")
    if options["profile"]:
        from pipeline.evaluation.profiling import ensure_sampler

        ensure_sampler()
    result, home = execute_job(
        job_name, {"resources": {"settings": {"config": config}}}, home_option=options["home"], verbose=options["verbose"]
    )
    elapsed = time.monotonic() - started
    if options["profile"]:
        write_profile_sidecar(result, home, options["profile_output"], started=started)
    gates = result.get_asset_check_evaluations()
    latest = read_latest(home / "releases")
    if latest is not None and latest != previous:
        manifest = json.loads((latest / "manifest.json").read_text())
        click.echo(
            render_kl_summary(manifest, latest, elapsed)
            if manifest["model"] == "kl"
            else render_summary(manifest, latest, elapsed)
        )
        if not result.success:
            # published (LATEST moved), but a step after the publish failed, e.g. the audit
            click.echo(
                f"msa-release: the release above IS published, but a later step of run {result.run_id} failed:",
                err=True,
            )
            report_step_failures(result)
            sys.exit(1)
        return
    click.echo(f"msa-release: NO release published (run {result.run_id}, {elapsed:.1f} s)", err=True)
    unusable = unusable_input_messages(result)
    if unusable:
        for message in unusable:
            click.echo(f"  unusable input: {message}", err=True)
        if previous is not None:
            click.echo(f"  the previous release is untouched: {previous}", err=True)
        sys.exit(2)
    for evaluation in gates:
        figures = {k: v.value for k, v in evaluation.metadata.items() if k != "gx_expectations"}  # those: report.html
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
    report_step_failures(result)
    for explanation in [*gate_failure_explanations(gates), *environment_failure_messages(result)]:
        click.echo(f"  {explanation}", err=True)
    if previous is not None:
        click.echo(f"  the previous release is untouched: {previous}", err=True)
    sys.exit(1)


def render_summary(manifest: dict, path: Path, elapsed: float) -> str:
    """One screen of text about a published release (from its manifest)."""
    gates = manifest["checks"]
    lines = [
        f"Published release {manifest['release_id']}",
        f"  directory      {path}",
        f"  model          {manifest['model']}  ell={manifest['ell']}  min_confidence={manifest['min_confidence']}  "
        + (f"min_support={manifest['min_support']}  " if manifest.get("min_support") is not None else "")
        + f"seed={manifest['seed']}",
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
    posterior = observed.get("posterior_within_bound", {})
    if posterior:
        lines.append(
            f"  posterior      {posterior.get('n_cells_above_bound', '?')} of {posterior.get('n_cells', '?')} (record, attribute) "
            f"cells above max(1/ell, population) + {posterior.get('slack', '?')} (learned-model adversary)"
        )
    if manifest.get("posterior_gate_warned"):
        lines.append("  WARNING        published with --posterior-gate warn: the posterior bound does NOT hold")
    lines.append("  gates")
    labels = {"passed": "PASS", "failed": "FAIL", "failed_overridden": "FAIL (overridden)", "not_applicable": "n/a "}
    for gate in gates:
        label = labels.get(gate.get("status", ""), "PASS" if gate["passed"] else "FAIL")
        lines.append(f"    {label}  {gate['name']}")
    lines.append(f"  time           {elapsed:.1f} s")
    return "\n".join(lines)


def render_kl_summary(manifest: dict, path: Path, elapsed: float) -> str:
    """One screen of text about a published (k, ℓ) release (from its manifest)."""
    observed = {g["name"]: g.get("observed", {}) for g in manifest["checks"]}
    classes = observed.get("kl_clusters_are_k_anonymous", {})
    diversity = observed.get("kl_clusters_are_l_diverse", {})
    n_released, n_clusters = manifest["n_released"], manifest["n_clusters"]
    weights = manifest.get("generalization_weights") or {}
    weighted = {name: w for name, w in weights.items() if w != 1.0}
    lines = [
        f"Published release {manifest['release_id']}",
        f"  directory      {path}",
        f"  model          kl ((k, ℓ)-anonymity)  k={manifest['k']}  ell={manifest['ell']}  method={manifest['kl_method']}"
        + (f"  max_block_size={manifest['max_block_size']}" if manifest.get("max_block_size") else ""),
        f"  QIs            {', '.join(manifest['quasi_identifiers'])} (generalised; hierarchies in {manifest['hierarchies']['directory']})",
        f"  sensitive      {', '.join(manifest['sensitive_attributes'])} (unchanged)",
        f"  records        {manifest['n_input']} read, {manifest['n_dropped_missing']} dropped (missing sensitive value)",
        f"                 {n_released} released, {manifest['n_suppressed_records']} suppressed",
        f"  clusters       {n_clusters} equivalence classes, average size {n_released / n_clusters if n_clusters else 0:.2f} "
        f"(min {classes.get('min_cluster_size', '?')}, max {classes.get('max_cluster_size', '?')}); "
        f"min Diverse {diversity.get('min_diverse_observed', '?')}",
        f"  cost           S = {manifest['total_generalization_cost']:.1f} "
        f"({manifest['total_generalization_cost'] / n_released if n_released else 0:.3f} per record), "
        f"naive (levels climbed) = {manifest['total_naive_cost']}"
        + (f"; weights {', '.join(f'{n}={w:g}' for n, w in weighted.items())}" if weighted else ""),
        "  gates",
    ]
    labels = {"passed": "PASS", "failed": "FAIL", "failed_overridden": "FAIL (overridden)", "not_applicable": "n/a "}
    for gate in manifest["checks"]:
        label = labels.get(gate.get("status", ""), "PASS" if gate["passed"] else "FAIL")
        lines.append(f"    {label}  {gate['name']}")
    lines.append(f"  time           {elapsed:.1f} s")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
