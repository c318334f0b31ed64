"""msa-release run: one release (mixed, Rating or (k, ℓ)) through its Dagster job, and its one-screen summary."""

from __future__ import annotations

import contextlib
import json
import sys
import time
from pathlib import Path

import click

from pipeline.settings import MAX_SEED, Model

from pipeline.cli.app import main
from pipeline.cli.common import (
    EllOption,
    FiniteFloatRange,
    report_run_failures,
    report_step_failures,
    settings_from_options,
    check_model_options,
    environment_failure_messages,
    execute_job,
    failure_exit_status,
    gate_failure_explanations,
    GATE_LINE_OMITS,
    print_refusal_diagnosis,
    diagnose_after_run,
    InstanceFailure,
    hold_release_lock,
    input_options,
    latest_release,
    newest_comparison,
    machine_advice_after_publish,
    machine_errors,
    machine_failure_line,
    preflight,
    unusable_input_messages,
    use_home,
    validate_settings,
    write_profile_sidecar,
)


@main.command()
@input_options
@click.option(
    "--ell",
    type=EllOption(),
    help="ℓ (integer >= 2; default 3), or one ℓ_i per sensitive attribute (--model mixed, rating): "
    "education=4,occupation=3,age=2,relationship=2 (SIDs of attribute i get >= ℓ_i values, SAC~ groups max ℓ_i).",
)
@click.option("--min-confidence", type=FiniteFloatRange(min=0.0, max=1.0, min_open=True), help="In (0, 1]; default 0.8.")
@click.option(
    "--seed",
    type=click.IntRange(min=0, max=MAX_SEED),
    help="Seed of the per-group permutation (integer in [0, 2**63 - 1]; default 0).",
)
@click.option(
    "--model",
    type=click.Choice([choice.value for choice in Model]),
    help="Publication model (default mixed; rating = plain Rating baseline; kl = (k, ℓ)-anonymity, P2).",
)
@click.option(
    "--allow-disclosure",
    is_flag=True,
    default=None,
    help="Publish even if the strong-rule adversary beats 1/ell (recorded in the manifest).",
)
@click.option("--confidence-tolerance", type=FiniteFloatRange(0.0, 1.0), help="Gate 4 tolerance (default 0.05).")
@click.option(
    "--max-deleted-share",
    type=FiniteFloatRange(0.0, 1.0),
    help="Utility gate: largest share of eligible records the release may delete ((k, ℓ): suppress), in [0, 1] "
    "(default 0.10; the Adult example without --input: 0.25); above it the release is refused. A value above the "
    "default is recorded as an override (manifest, summary, report.html).",
)
@click.option(
    "--max-suppressed-share",
    type=FiniteFloatRange(0.0, 1.0),
    help="Utility gate: largest share of a sensitive attribute's published cells that may be suppressed, in [0, 1] "
    "(default 0.10); above it the release is refused. A value above the default is recorded as an override.",
)
@click.option(
    "--posterior-slack",
    type=FiniteFloatRange(0.0, 1.0),
    help="Posterior gate: tolerance above max(1/ell, population posterior) (default 0.05); --model kl: the same "
    "slack for the adversaries measured on the release (manifest 'attacks').",
)
@click.option(
    "--posterior-gate",
    type=click.Choice(["block", "warn"]),
    help="Posterior gate: block (default) refuses a release with a cell above the learned-model bound; warn "
    "publishes it as a comparison and says so (recorded in the manifest).",
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
    type=FiniteFloatRange(0.0, 1.0),
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
    type=click.IntRange(min=1, max=MAX_SEED),
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
    help="--model kl: folder of ARX hierarchies, one per quasi-identifier (default: Adult's, for Adult's adult.data only; "
    "msa-release hierarchies makes them for another table); "
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
    help="Strong-rule mining (default auto: mlxtend FP-growth below --duckdb-mining-threshold records, DuckDB above).",
)
@click.option(
    "--duckdb-mining-threshold",
    type=click.IntRange(min=1),
    help="With --mining-backend auto: mine with DuckDB from this many records on (default 100000).",
)
@click.option(
    "--engine",
    type=click.Choice(["memory", "local", "spark"]),
    help="Where the release runs. local (default for the mixed model: the `sharded_release` job; DuckDB stages the "
    "input in shards of --shard-rows records, --workers processes release them; a table of up to --shard-rows records "
    "is one shard, the in-memory release's tables as part files); spark (the same on Apache Spark: --spark-master or "
    "--spark-remote); memory (the whole table in memory, the `release` job, release.duckdb). Sharded releases publish "
    "the mixed model only: --model rating and kl always run in memory (leave --engine out).",
)
@click.option(
    "--workers", type=click.IntRange(min=1, max=1024), help="Engine local (the default): processes releasing shards (default 2)."
)
@click.option(
    "--shard-rows",
    type=click.IntRange(min=1),
    help="Engine local (the default) or spark: records per shard (default 1000000; S = ceil(records / shard-rows); a "
    "table of up to --shard-rows records is one shard, the same release tables as --engine memory).",
)
@click.option(
    "--min-shard-rows",
    type=click.IntRange(min=1),
    help="Engine local (the default) or spark: smallest accepted mean shard size when there are several shards (default 100000; "
    "smaller shards cost utility; lower it for tests).",
)
@click.option("--spark-master", help="--engine spark: the master in client mode, e.g. local[2], yarn, k8s://https://host:443.")
@click.option("--spark-remote", help="--engine spark: a Spark Connect URL, sc://host:15002 (instead of --spark-master).")
@click.option(
    "--spark-launch",
    type=click.Choice(["client", "pipes"]),
    help="--engine spark: client (default: the release step runs the shards on its own SparkSession) or pipes (the "
    "release step launches `python -m pipeline.engines.spark_job` through Dagster Pipes, PipesSubprocessClient, with "
    "--spark-master or --spark-remote).",
)
@click.option(
    "--keep-releases",
    type=click.IntRange(min=0),
    help="Retention: after publishing, remove the oldest releases beyond the newest N of releases/ (or of comparisons/, "
    "for a comparison; never LATEST's); default 0 keeps all.",
)
@click.option(
    "--promote/--no-promote",
    default=None,
    help="--no-promote: publish a comparison under <home>/comparisons/<id>/ (never LATEST; marked 'COMPARISON - not "
    "for sharing'). Default: shared, except --model rating and releases above a bound by an override "
    "(--allow-disclosure, --posterior-gate warn), which are comparisons. --promote shares a rating release when "
    "every gate passes; a release above a bound is never shared.",
)
@click.option(
    "--wait/--no-wait",
    default=False,
    help="If another run holds the release lock of this home, wait for it (default: fail at once, exit 3).",
)
@click.option(
    "--wait-timeout",
    type=FiniteFloatRange(min=0.0),
    default=3600.0,
    show_default=True,
    help="With --wait: give up (exit 3) after this many seconds.",
)
@click.option(
    "--rebuild-warehouse",
    is_flag=True,
    default=False,
    help="Delete the home's private warehouse (warehouse.duckdb, a cache of intermediate tables, never published) "
    "before the run, which rebuilds it from the input: for a damaged warehouse.",
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
@click.option(
    "--progress/--no-progress",
    default=None,
    help="Print a line to stderr as each step finishes (its seconds and the run's) and every 10 s that a step keeps "
    "running, with its percentage when it reports one (the (k, ℓ) blocks, the posterior gate's EM rounds) "
    "(default: on, unless --quiet).",
)
@click.option(
    "--quiet",
    "-q",
    is_flag=True,
    default=False,
    help="Print nothing but the final summary, or why nothing was published (no progress lines).",
)
def run(**options) -> None:
    """Run the Dagster job of the chosen model in-process and print a summary of the published release: mixed runs
    `sharded_release` on engine local by default (--engine spark: on Spark; --engine memory: the in-memory `release`
    job), rating runs `rating_release`, kl `kl_release`.

    A comparison (--no-promote; by default --model rating and a release above a bound by --allow-disclosure or
    --posterior-gate warn) is published under <home>/comparisons/<release_id>/ and LATEST does not move.

    Exit status: 0 published (shared or comparison), 1 refused by a gate or another failure (a failure after the publish, e.g. the audit, says the release IS published), 2 unusable input (a usage
    error, an unreadable table, a missing or incomplete hierarchy, a table that cannot be made
    (k, ℓ)-anonymous), 3 another run holds the release lock of this home (see --wait).
    """
    started = time.monotonic()
    if options["quiet"] and options["progress"]:
        raise click.UsageError("--progress and --quiet contradict each other; give one of them")
    check_model_options(options)
    config = settings_from_options(options)
    validate_settings(config)
    preflight(config, home_option=options["home"])
    from pipeline.models import job_and_settings

    job_name, job_config = job_and_settings(config)  # the in-memory jobs take no engine setting
    if options["profile_output"] and not options["profile"]:
        raise click.UsageError("--profile-output needs --profile")
    if options["profile_output"]:
        _check_profile_output(options["profile_output"])
    home = use_home(options["home"])
    state: dict = {}
    try:
        _run_and_summarize(options, config, job_name, job_config, started, state)
    except machine_errors() as error:  # the lock, LATEST, the Dagster instance: disk full, I/O error, not writable
        _report_machine_failure(error, home, state)
    except InstanceFailure as failure:  # the Dagster instance's disk is full: say whether the release is published
        from pipeline.failures import error_chain

        cause = next((e for e in error_chain(failure.__cause__) if isinstance(e, machine_errors())), None)
        if failure.exit_code != 1 or cause is None:
            raise
        _report_machine_failure(cause, home, state)


def _report_machine_failure(error: BaseException, home: Path, state: dict) -> None:
    """Exit 1 with one line naming the machine's error (errno text and path, or the Dagster instance's) and what to
    do, saying whether the release was published (LATEST moved from ``state["previous"]``) or not."""
    from pipeline.release.publish import read_latest

    latest = None
    if "previous" in state:
        with contextlib.suppress(*machine_errors()):
            latest = read_latest(home / "releases")
    if latest is not None and latest != state["previous"]:
        click.echo(
            f"msa-release: release {latest} IS published, but the command failed afterwards: {machine_failure_line(error)}",
            err=True,
        )
    else:
        click.echo(f"msa-release: NO release published: {machine_failure_line(error)}", err=True)
        if state.get("previous") is not None:
            click.echo(f"  the previous release is untouched: {state['previous']}", err=True)
    sys.exit(1)


def _run_and_summarize(options: dict, config: dict, job_name: str, job_config: dict, started: float, state: dict) -> None:
    """Hold the release lock, run ``job_name`` with the settings ``job_config`` (``config``, the command's settings,
    as the job takes them) and print the summary or why nothing was published (``state`` gets ``previous``: the
    release LATEST named before the run)."""
    from pipeline.models import publication_model

    home = use_home(options["home"])
    hold_release_lock(home, wait=options["wait"], wait_timeout=options["wait_timeout"])
    previous = state["previous"] = latest_release(home)
    previous_comparison = newest_comparison(home)
    _check_warehouse(home, rebuild=options["rebuild_warehouse"])
    if options["profile"]:
        from pipeline.evaluation.profiling import ensure_sampler

        ensure_sampler()
    progress = options["progress"]
    if progress is None:
        progress = not options["quiet"]
    from pipeline.run_events import release_run_tags

    result, home = execute_job(
        job_name,
        {"resources": {"settings": {"config": job_config}}},
        home_option=options["home"],
        verbose=options["verbose"],
        progress=progress,
        tags={"msa_release/trigger": "cli", **release_run_tags(config)},
        quiet=options["quiet"],
    )
    elapsed = time.monotonic() - started
    if not result.success:
        # an interrupted run (Ctrl-C, SIGTERM) skips the job's failure hook: the private staging of a sharded run
        # (every input record) goes now, under the release lock this command holds, not at the home's next run
        from pipeline.engines.staging import remove_staging

        remove_staging(home)
    profile_error = None
    if options["profile"]:
        try:
            write_profile_sidecar(result, home, options["profile_output"], started=started)
        except OSError as error:  # after the run: the release (if any) stands, the profile is lost
            profile_error = (
                f"msa-release: the profile could not be written to {getattr(error, 'filename', None) or home} "
                f"({error.strerror or error}); choose a writable --profile-output"
            )
    gates = result.get_asset_check_evaluations()
    latest = latest_release(home)
    if latest is not None and latest != previous:
        manifest = json.loads((latest / "manifest.json").read_text())
        click.echo(publication_model(manifest["model"]).summary(manifest, latest, elapsed))
        for line in sharding_lines(manifest):
            click.echo(line)
        if profile_error is not None:
            click.echo(f"{profile_error}; the release above IS published", err=True)
            sys.exit(1)
        if not result.success:
            # published (LATEST moved), but a step after the publish failed, e.g. the audit
            click.echo(
                f"msa-release: the release above IS published, but a later step of run {result.run_id} failed:",
                err=True,
            )
            report_step_failures(result)
            for line in machine_advice_after_publish(result):
                click.echo(f"  {line}", err=True)
            sys.exit(1)
        return
    comparison = newest_comparison(home)
    if comparison is not None and comparison != previous_comparison:
        manifest = json.loads((comparison / "manifest.json").read_text(encoding="utf-8"))
        reason = (manifest.get("promotion") or {}).get("reason", "")
        click.echo("COMPARISON — not for sharing (published under comparisons/, never the shared release)")
        click.echo(publication_model(manifest["model"]).summary(manifest, comparison, elapsed))
        for line in sharding_lines(manifest):
            click.echo(line)
        click.echo(f"  why            {reason}")
        if (manifest.get("promotion") or {}).get("requested") is True:  # --promote was asked for and refused
            click.echo(f"msa-release: {reason}", err=True)
        click.echo(
            f"  LATEST         unchanged: {previous.name if previous is not None else 'no shared release'} "
            f"({home / 'releases' / 'LATEST'})"
        )
        if profile_error is not None:
            click.echo(f"{profile_error}; the comparison above IS published", err=True)
            sys.exit(1)
        if not result.success:  # published, but a step after the publish failed (the audit)
            click.echo(
                f"msa-release: the comparison above IS published, but a later step of run {result.run_id} failed:",
                err=True,
            )
            report_step_failures(result)
            sys.exit(1)
        return
    click.echo(f"msa-release: NO release published (run {result.run_id}, {elapsed:.1f} s)", err=True)
    if profile_error is not None:
        click.echo(f"  {profile_error.removeprefix('msa-release: ')}", err=True)
    status = failure_exit_status(result)  # from the structured failures' metadata (pipeline.failures)
    if report_run_failures(result):  # stopped before any step: the warehouse, the lock (resources)
        for explanation in environment_failure_messages(result):
            click.echo(f"  {explanation}", err=True)
        if previous is not None:
            click.echo(f"  the previous release is untouched: {previous}", err=True)
        sys.exit(status)
    unusable = unusable_input_messages(result)
    if unusable:
        for message in unusable:
            click.echo(f"  unusable input: {message}", err=True)
        if previous is not None:
            click.echo(f"  the previous release is untouched: {previous}", err=True)
        sys.exit(status)
    for evaluation in gates:
        figures = {k: v.value for k, v in evaluation.metadata.items() if k not in GATE_LINE_OMITS}
        if figures.get("applicable") is False:
            outcome = "not applicable"
        else:
            outcome = "passed" if evaluation.passed else "FAILED"
        # --quiet: a passed gate in one short line, a failed one with its figures (newcomer, session 40: every passed
        # gate's figures came before the reason the release was refused)
        shown = "" if options["quiet"] and outcome != "FAILED" else " " + json.dumps(figures, default=str)
        click.echo(f"  gate {evaluation.check_name}: {outcome}{shown}", err=True)
        if evaluation.check_name == "disclosure_within_bound" and not evaluation.passed:
            click.echo(
                "  the strong-rule adversary beats 1/ell on this release; use the mixed model, or, to compare "
                "privately, pass --allow-disclosure: the release is then a comparison under <home>/comparisons/ "
                "(recorded in the manifest; never LATEST, never for sharing)",
                err=True,
            )
    # a data-loss gate: why, and the options (issue 15)
    diagnosed = print_refusal_diagnosis(gates, lambda: diagnose_after_run(config, gates, result.run_id, home))
    report_step_failures(result)
    for explanation in [*gate_failure_explanations(gates, diagnosed=diagnosed), *environment_failure_messages(result)]:
        click.echo(f"  {explanation}", err=True)
    if previous is not None:
        click.echo(f"  the previous release is untouched: {previous}", err=True)
    sys.exit(status)


def sharding_lines(manifest: dict) -> list[str]:
    """The summary's lines about a sharded release (its manifest's ``sharding``): S, the engine and its workers, the
    shard size, and the per-shard spread of records, deletions and suppressed cells; none for an in-memory release."""
    sharding = manifest.get("sharding")
    if not isinstance(sharding, dict):
        return []
    # the workers setting is the local engine's processes; on Spark the cluster's executors decide
    workers = f", {sharding['workers']} workers" if sharding.get("engine") == "local" and sharding.get("workers") else ""
    spread = sharding.get("per_shard") or {}

    def span(name: str) -> str:
        low, high = (spread.get(name) or [0, 0])[:2]
        return f"{low}" if low == high else f"{low}-{high}"

    return [
        f"  shards         S = {sharding['n_shards']} (engine {sharding['engine']}{workers}; shard_rows {sharding['shard_rows']})",
        f"                 per shard: {span('n_records')} records, {span('n_deleted')} deleted, "
        f"{span('n_suppressed_cells')} suppressed cells",
    ]


def _check_profile_output(output: str) -> None:
    """Refuse, before anything runs, a ``--profile-output`` whose directory does not exist or cannot be written
    (exit status 2): otherwise the run would publish and then fail on the sidecar."""
    import tempfile
    from pathlib import Path

    from pipeline.cli.common import UnusableInput

    directory = Path(output).expanduser().parent
    try:
        if Path(output).expanduser().is_dir():
            raise IsADirectoryError(21, "Is a directory", output)
        with tempfile.NamedTemporaryFile(dir=directory, prefix=".profile-probe-"):
            pass
    except OSError as error:
        raise UnusableInput(
            f"--profile-output {output}: cannot write there ({error.strerror or error}); nothing was run: name a "
            "file in an existing directory you can write"
        ) from error


def _check_warehouse(home, *, rebuild: bool) -> None:
    """With the release lock held and before Dagster starts: with ``rebuild`` delete the warehouse (the run rebuilds
    it); then open it once (:func:`pipeline.warehouse.check_warehouse`), so that a damaged or unwritable warehouse is
    refused in about a second (exit status 2) with what to do, instead of minutes of retries and DuckDB's bare error."""
    from pipeline.warehouse import WarehouseUnusable, check_warehouse, remove_warehouse

    database = home / "warehouse.duckdb"
    try:
        if rebuild:
            removed = remove_warehouse(database)
            what = ", ".join(path.name for path in removed) if removed else "nothing to remove"
            click.echo(f"msa-release: --rebuild-warehouse: deleted the warehouse ({what}); this run rebuilds it", err=True)
        check_warehouse(database)
    except (WarehouseUnusable, OSError) as error:
        click.echo("msa-release: NO release published (the warehouse was checked before running anything)", err=True)
        if isinstance(error, WarehouseUnusable):
            click.echo(f"  {error}", err=True)
            sys.exit(error.exit_status)
        click.echo(
            f"  --rebuild-warehouse could not delete {getattr(error, 'filename', None) or database} "
            f"({error.strerror or error}); make the home writable (or delete the file yourself) and retry",
            err=True,
        )
        sys.exit(2)


if __name__ == "__main__":
    main()
