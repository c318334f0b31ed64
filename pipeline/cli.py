"""``msa-release``: run the Dagster ``release`` / ``kl_release`` jobs in-process from the command line."""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import sys
import time
from pathlib import Path

import click

from pipeline.errors import ReleaseLockBusyBase, UnusableInputError

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


def parse_weights(value: str | None) -> dict[str, float] | None:
    """``"a=1,b=2.5"`` -> ``{"a": 1.0, "b": 2.5}`` (``--generalization-weights``).

    Raises
    ------
    click.BadParameter
        An item that is not ``name=number``, or a name given twice.
    """
    if value is None:
        return None
    weights: dict[str, float] = {}
    for item in (v.strip() for v in value.split(",")):
        if not item:
            continue
        name, separator, number = item.rpartition("=")
        name = name.strip()
        try:
            weight = float(number)
        except ValueError:
            weight = None
        if not separator or not name or weight is None:
            raise click.BadParameter(f"{item!r} is not name=number (example: sex=2,race=0.5)", param_hint="--generalization-weights")
        if name in weights:
            raise click.BadParameter(f"{name!r} is given twice", param_hint="--generalization-weights")
        weights[name] = weight
    return weights


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
    k: int | None = None,
    hierarchies_dir: str | None = None,
    kl_method: str | None = None,
    max_block_size: int | None = None,
    generalization_weights: dict[str, float] | None = None,
    mining_backend: str | None = None,
    duckdb_mining_threshold: int | None = None,
    keep_releases: int | None = None,
    profile: bool | None = None,
    randomness: str | None = None,
    min_support: int | None = None,
    grouping: str | None = None,
    stratum_deletion_budget: float | None = None,
    residual_policy: str | None = None,
    allow_recomposition: bool | None = None,
    posterior_slack: float | None = None,
    posterior_gate: str | None = None,
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
        ("k", k),
        ("hierarchies_dir", hierarchies_dir),
        ("kl_method", kl_method),
        ("max_block_size", max_block_size),
        ("generalization_weights", generalization_weights),
        ("mining_backend", mining_backend),
        ("duckdb_mining_threshold", duckdb_mining_threshold),
        ("keep_releases", keep_releases),
        ("profile", profile),
        ("randomness", randomness),
        ("min_support", min_support),
        ("grouping", grouping),
        ("stratum_deletion_budget", stratum_deletion_budget),
        ("residual_policy", residual_policy),
        ("allow_recomposition", allow_recomposition),
        ("posterior_slack", posterior_slack),
        ("posterior_gate", posterior_gate),
    ):
        if value is not None:
            config[key] = value
    return config


class UnusableInput(UnusableInputError, click.ClickException):
    """An input that cannot be used (exit status 2, like a usage error; 1 means a FAIL verdict)."""

    exit_code = UnusableInputError.exit_status



#: Options that only the (k, ℓ) model reads, and options it does not read.
KL_ONLY_OPTIONS = ("k", "hierarchies", "kl_method", "max_block_size", "generalization_weights")
NOT_KL_OPTIONS = (
    "min_confidence", "seed", "allow_disclosure", "confidence_tolerance", "mining_backend", "duckdb_mining_threshold",
    "randomness", "min_support", "grouping", "stratum_deletion_budget", "residual_policy", "posterior_slack", "posterior_gate",
)


def _option_flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def check_model_options(options: dict) -> None:
    """Refuse options that the chosen model does not read (instead of silently ignoring them).

    Raises
    ------
    click.UsageError
    """
    model = options.get("model") or "mixed"
    if model == "kl":
        given = [_option_flag(n) for n in NOT_KL_OPTIONS if options.get(n) is not None]
        if given:
            raise click.UsageError(f"{', '.join(given)}: not used by --model kl (the (k, ℓ) model); leave out")
    else:
        # --hierarchies also serves the QI-aware grouping (generalized group and stratum quasi-identifiers)
        kl_only = [n for n in KL_ONLY_OPTIONS if n != "hierarchies"]
        given = [_option_flag(n) for n in kl_only if options.get(n) is not None]
        if given:
            raise click.UsageError(f"{', '.join(given)}: only used by --model kl (the (k, ℓ) model), not by --model {model}")


def validate_settings(config: dict) -> None:
    """Validate the ``settings`` run config before anything runs (the same checks as the resource).

    Raises
    ------
    click.UsageError
        With pydantic's messages, e.g. k < ell for the (k, ℓ) model.
    """
    from pydantic import ValidationError

    from pipeline.resources import ReleaseSettings

    try:
        ReleaseSettings(**config)
    except ValidationError as error:
        messages = "; ".join(_validation_message(e) for e in error.errors())
        raise click.UsageError(messages) from error


def _validation_message(error: dict) -> str:
    """One pydantic error as text, prefixed with the setting and the value given (``ell = 5000: ...``)."""
    message = str(error.get("msg", error)).removeprefix("Value error, ")
    location = [str(part) for part in error.get("loc", ())]
    if not location:
        return message
    return f"{'.'.join(location)} = {error.get('input')!r}: {message}"


def unusable_input_messages(result) -> list[str]:
    """Messages of the step failures caused by an unusable input: an error class of exit status 2
    (:class:`pipeline.errors.UnusableInputError`: unreadable table or column configuration, hierarchy missing /
    invalid / not covering the data, a table that cannot be made (k, ℓ)-anonymous)."""
    from pipeline.errors import exit_status_of_class_name

    messages = []
    for event in result.all_events:
        if event.is_step_failure and event.step_failure_data and event.step_failure_data.error:
            error = event.step_failure_data.error
            cause = error.cause or error
            if exit_status_of_class_name(cause.cls_name) == 2:
                message = cause.message.strip()
                prefix, separator, rest = message.partition(": ")
                messages.append(rest if separator and prefix.endswith(cause.cls_name) else message)
    return messages


@click.group()
def main() -> None:
    """Publish microdata with several sensitive attributes (strong-rule mixed model, Rating
    baseline, (k, ℓ)-anonymity)."""


def input_options(command):
    """The options that say which table to read and which columns play which role."""
    for option in reversed(
        [
            click.option("--input", "input_path", type=click.Path(dir_okay=False), help="CSV or Parquet file (default: UCI Adult)."),
            click.option("--input-format", type=click.Choice(["auto", "csv", "parquet"]), help="Default: by extension."),
            click.option("--header/--no-header", default=None, help="Whether the CSV has a header row (default with --input: yes)."),
            click.option("--column-names", help="All column names in file order, comma-separated (CSV without header)."),
            click.option("--delimiter", help="CSV field separator (default ',')."),
            click.option("--quasi-identifiers", help="Comma-separated quasi-identifier columns."),
            click.option("--sensitive-attributes", help="Comma-separated sensitive attribute columns (at least 2)."),
            click.option("--missing-tokens", help="Comma-separated values meaning 'missing' (default: '', NULL, ?)."),
            click.option("--home", type=click.Path(file_okay=False), help="Release home (default $MSA_RELEASE_HOME or ./var)."),
            click.option("--verbose", is_flag=True, help="Show Dagster's step-by-step log."),
        ]
    ):
        command = option(command)
    return command


class ReleaseLockBusyError(ReleaseLockBusyBase, click.ClickException):
    """Another run holds the release lock of the home (exit status 3)."""

    exit_code = ReleaseLockBusyBase.exit_status


def hold_release_lock(home: Path, *, wait: bool, wait_timeout: float) -> None:
    """Take the release lock of ``home`` for the rest of the command (released when it ends).

    Raises
    ------
    ReleaseLockBusyError
        Another run holds it (after ``wait_timeout`` seconds with ``wait``): exit status 3.
    """
    from pipeline.locking import ReleaseLockBusy, acquire_release_lock

    try:
        lock = acquire_release_lock(
            home, wait_seconds=wait_timeout if wait else 0.0,
            hint="wait for it or use --wait" if not wait else "try again later or raise --wait-timeout",
        )
    except ReleaseLockBusy as error:
        raise ReleaseLockBusyError(str(error)) from error
    click.get_current_context().call_on_close(lock.release)


def use_home(home_option: str | None) -> Path:
    """The release home: ``--home`` when given (exported as $MSA_RELEASE_HOME), else the default."""
    from pipeline.resources import ensure_release_home, release_home

    if home_option:
        os.environ["MSA_RELEASE_HOME"] = str(Path(home_option).resolve())
    try:
        return ensure_release_home(release_home())
    except OSError as error:
        raise UnusableInput(
            f"the release home {os.environ.get('MSA_RELEASE_HOME', 'var')!r} cannot be used as a directory "
            f"({error.strerror or error}); point --home or $MSA_RELEASE_HOME at a writable directory"
        ) from error


def execute_job(job_name: str, run_config: dict, *, home_option: str | None, verbose: bool):
    """Run a job of the code location in-process on the persistent Dagster instance.

    Returns ``(result, home)``; ``home`` is the release home ($MSA_RELEASE_HOME).
    """
    home = use_home(home_option)
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    prepare_dagster_home(home, explicit_home=bool(home_option))

    import dagster as dg

    from pipeline.definitions import build_definitions

    job = build_definitions(home).resolve_job_def(job_name)
    config = dict(run_config)
    config["loggers"] = {"console": {"config": {"log_level": "DEBUG" if verbose else "CRITICAL"}}}
    with dg.DagsterInstance.get() as instance:
        result = job.execute_in_process(run_config=config, instance=instance, raise_on_error=False)
    return result, home


def _settings_from_options(options: dict) -> dict:
    return build_settings_config(
        input_path=options["input_path"],
        input_format=options["input_format"],
        header=options["header"],
        column_names=_split(options["column_names"]),
        delimiter=options["delimiter"],
        quasi_identifiers=_split(options["quasi_identifiers"]),
        sensitive_attributes=_split(options["sensitive_attributes"]),
        ell=options.get("ell"),
        min_confidence=options.get("min_confidence"),
        seed=options.get("seed"),
        missing_tokens=(options["missing_tokens"].split(",") if options["missing_tokens"] is not None else None),
        confidence_tolerance=options.get("confidence_tolerance"),
        model=options.get("model"),
        allow_disclosure=options.get("allow_disclosure"),
        k=options.get("k"),
        hierarchies_dir=options.get("hierarchies"),
        kl_method=options.get("kl_method"),
        max_block_size=options.get("max_block_size"),
        generalization_weights=parse_weights(options.get("generalization_weights")),
        mining_backend=options.get("mining_backend"),
        duckdb_mining_threshold=options.get("duckdb_mining_threshold"),
        keep_releases=options.get("keep_releases"),
        profile=options.get("profile"),
        randomness=options.get("randomness"),
        min_support=options.get("min_support"),
        grouping=options.get("grouping"),
        stratum_deletion_budget=options.get("stratum_deletion_budget"),
        residual_policy=options.get("residual_policy"),
        allow_recomposition=options.get("allow_recomposition"),
        posterior_slack=options.get("posterior_slack"),
        posterior_gate=options.get("posterior_gate"),
    )


def write_profile_sidecar(result, home: Path, output: str | None, *, started: float) -> Path:
    """Write the profile of the whole run (every step, publish and audit included) as JSON.

    The manifest's ``profile`` cannot hold the publish step that writes it, nor the audit that
    follows; this sidecar does. Keys: run_id, success, release_id (null when nothing was
    published), command_seconds (this command from start to the end of the run), and the
    ``pipeline.profiling.build_profile`` fields (method, process_peak_rss_mb, steps, stages).
    """
    import dagster as dg

    from pipeline.run_events import run_step_windows
    from pipeline.profiling import build_profile, current_sampler
    from pipeline.publish import read_latest

    with dg.DagsterInstance.get() as instance:
        windows = run_step_windows(instance, result.run_id)
    sampler = current_sampler()
    if sampler is not None:
        sampler.stop()
    latest = read_latest(home / "releases")
    profile = {
        "run_id": result.run_id,
        "success": bool(result.success),
        "release_id": latest.name if result.success and latest is not None else None,
        "command_seconds": round(time.monotonic() - started, 3),
        **build_profile(windows, sampler),
    }
    target = Path(output) if output else home / "profiles" / f"{result.run_id}.json"
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(json.dumps(profile, indent=2) + "\n")
    click.echo(f"profile: {target}", err=True)
    return target


def _report_step_failures(result) -> None:
    for event in result.all_events:
        if event.is_step_failure and event.step_failure_data and event.step_failure_data.error:
            error = event.step_failure_data.error
            cause = error.cause or error
            click.echo(f"  step {event.step_key} failed: {cause.message.strip()}", err=True)


def preflight(config: dict, *, home_option: str | None) -> Path:
    """Check everything that can be checked before Dagster starts; return the release home.

    Reads the input as the job will (:func:`pipeline.loading.load_records` with ``ell``, so a
    table that cannot be ℓ-diverse is refused), validates the hierarchies of the (k, ℓ) model,
    and checks that ``<home>/releases`` is a writable directory. Nothing is written but the
    home and ``releases/`` directories (and a probe file, removed at once).

    Raises
    ------
    UnusableInput
        Exit status 2, with the message of the failed check (file, line, column or setting,
        and what to do).
    """
    from pipeline.core.hierarchies import HierarchyError, load_hierarchies
    from pipeline.loading import InfeasibleInput, InputError, load_records
    from pipeline.resources import ReleaseSettings

    settings = ReleaseSettings(**config)
    try:
        loaded = load_records(
            settings.input_path, quasi_identifiers=settings.quasi_identifiers,
            sensitive_attributes=settings.sensitive_attributes, input_format=settings.input_format,
            csv_header=settings.csv_header, column_names=settings.column_names, delimiter=settings.delimiter,
            strip_whitespace=settings.strip_whitespace, missing_value_tokens=settings.missing_value_tokens,
            ell=settings.ell,
        )
        if settings.model == "kl":
            load_hierarchies(
                settings.hierarchies_path(), settings.quasi_identifiers,
                data_values={a: loaded.records[a] for a in settings.quasi_identifiers},
                data_source=f"input {settings.input_path}",
            )
    except InfeasibleInput as error:
        what = "(k, ℓ)-anonymous" if settings.model == "kl" else "ℓ-diverse"
        refuse_before_running(f"the table cannot be made {what}, nothing is published: {error}")
    except (InputError, HierarchyError) as error:
        refuse_before_running(str(error))
    home = use_home(home_option)
    check_releases_writable(home / "releases")
    return home


def refuse_before_running(message: str) -> None:
    """Print why the input is unusable (as a failed run would) and exit with status 2."""
    click.echo("msa-release: NO release published (the input was checked before running anything)", err=True)
    click.echo(f"  unusable input: {message}", err=True)
    sys.exit(2)


def check_releases_writable(releases_dir: Path) -> None:
    """Create ``releases_dir`` if needed and prove it writable with a probe file (removed at once).

    Raises
    ------
    UnusableInput
        ``releases_dir`` (or a parent) is a file, or it cannot be created or written (read-only
        file system, permissions, full disk).
    """
    import tempfile

    try:
        releases_dir.mkdir(parents=True, exist_ok=True)
        if not releases_dir.is_dir():
            raise NotADirectoryError(20, "Not a directory", str(releases_dir))
        with tempfile.NamedTemporaryFile(dir=releases_dir, prefix=".write-probe-"):
            pass
    except OSError as error:
        raise UnusableInput(
            f"the release directory {releases_dir} is not a writable directory ({error.strerror or error}); nothing "
            "was run: make it a directory you can write (or point --home / $MSA_RELEASE_HOME elsewhere) and retry"
        ) from error


#: Why a gate can fail on a valid table, and what the data custodian can do about it.
GATE_FAILURE_EXPLANATIONS = {
    "rule_confidence_preserved": (
        "rule_confidence_preserved failed: records holding strong values were deleted (no ℓ - 1 partners with "
        "different values on every sensitive attribute) or attribute-table cells suppressed, so the strong rules' "
        "confidences cannot be recovered from the release within --confidence-tolerance; lower --ell, raise "
        "--min-confidence (fewer strong rules), add records, or raise --confidence-tolerance if the loss is acceptable"
    ),
    "sac_released_is_l_diverse": "sac_released_is_l_diverse failed: a SAC~ group is not ℓ-diverse; this is a defect, please report it",
    "attribute_table_is_l_diverse": "attribute_table_is_l_diverse failed: a SID is not ℓ-diverse; this is a defect, please report it",
    "records_accounted_for": "records_accounted_for failed: a record is lost or duplicated; this is a defect, please report it",
    "no_probability_tilt": "no_probability_tilt failed: a SID holds a strong value; this is a defect, please report it",
    "no_certain_attribute_table_cell": (
        "no_certain_attribute_table_cell failed: suppressed attribute-table cells name their value (only a value that "
        "every SID holds is suppressed); drop --residual-policy suppress (the default deletes whole records instead), "
        "or lower --ell"
    ),
    "posterior_within_bound": (
        "posterior_within_bound failed: an adversary who learns P(sensitive values | quasi-identifiers) from the release "
        "itself (naive Bayes by EM, exact posterior inside each SAC~ group and SID) guesses some records' true values "
        "above max(1/ell, population posterior) + --posterior-slack: partners in a group or SID whose quasi-identifiers "
        "tell them apart (see docs/posterior.md); --posterior-gate warn publishes anyway (recorded in the manifest)"
    ),
    "release_carries_no_input_order": (
        "release_carries_no_input_order failed: a published id or SID column follows the input order, or the "
        "order-replay adversary links attribute-table cells better than chance: with --randomness spec-reference "
        "(SPEC's input-order algorithms) this is expected, drop that option; with the default home-secret randomness "
        "it is a defect, please report it"
    ),
}


def gate_failure_explanations(gates) -> list[str]:
    """One explanation per failed gate that has one (``GATE_FAILURE_EXPLANATIONS``)."""
    return [
        GATE_FAILURE_EXPLANATIONS[evaluation.check_name]
        for evaluation in gates
        if not evaluation.passed and evaluation.check_name in GATE_FAILURE_EXPLANATIONS
    ]


def environment_failure_messages(result) -> list[str]:
    """Plain-language messages for steps that failed on the machine rather than on the data:
    a full disk, or a release / warehouse location that cannot be written."""
    messages = []
    for event in result.all_events:
        if not (event.is_step_failure and event.step_failure_data and event.step_failure_data.error):
            continue
        error, texts = event.step_failure_data.error, []
        while error is not None:
            texts.append(f"{error.cls_name}: {error.message}")
            error = error.cause or error.context
        text = " ".join(texts)
        if "No space left on device" in text or "[Errno 28]" in text or "ENOSPC" in text:
            messages.append(
                f"disk full: step {event.step_key} ran out of space (No space left on device); nothing was published "
                "and the staging files were removed: free space under $MSA_RELEASE_HOME (old releases, the "
                "warehouse) and retry"
            )
        elif "Permission denied" in text or "Read-only file system" in text or "[Errno 13]" in text or "[Errno 30]" in text:
            messages.append(
                f"not writable: step {event.step_key} could not write (permission denied or read-only file system); "
                "nothing was published: make $MSA_RELEASE_HOME and its releases/ directory writable and retry"
            )
    return list(dict.fromkeys(messages))


@main.command()
@input_options
@click.option("--ell", type=click.IntRange(min=2), help="ℓ (integer >= 2; default 3).")
@click.option("--min-confidence", type=click.FloatRange(min=0.0, max=1.0, min_open=True), help="In (0, 1]; default 0.8.")
@click.option("--seed", type=click.IntRange(min=0), help="Seed of the per-group permutation (default 0).")
@click.option("--model", type=click.Choice(["mixed", "rating", "kl"]),
              help="Publication model (default mixed; rating = plain Rating baseline; kl = (k, ℓ)-anonymity, P2).")
@click.option("--allow-disclosure", is_flag=True, default=None,
              help="Publish even if the strong-rule adversary beats 1/ell (recorded in the manifest).")
@click.option("--confidence-tolerance", type=click.FloatRange(0.0, 1.0), help="Gate 4 tolerance (default 0.05).")
@click.option("--posterior-slack", type=click.FloatRange(0.0, 1.0),
              help="Posterior gate: tolerance above max(1/ell, population posterior) (default 0.05).")
@click.option("--posterior-gate", type=click.Choice(["block", "warn"]),
              help="Posterior gate: block the release or only warn (default warn until the attribute table passes it; "
              "recorded in the manifest).")
@click.option("--grouping", type=click.Choice(["qi_aware", "p1"]),
              help="Grouping and bucketization (mixed, rating): qi_aware (default: SAC~ partners with the same "
              "quasi-identifiers first, a group's differing quasi-identifiers generalized along --hierarchies, else '*'; "
              "Rating inside quasi-identifier strata) or p1 (P1's Algorithm 11 and plain Rating, exact "
              "quasi-identifiers; does not resist the learned-model adversary on correlated data).")
@click.option("--stratum-deletion-budget", type=click.FloatRange(0.0, 1.0),
              help="qi_aware: extra records a stratum split may delete per record whose quasi-identifiers it publishes "
              "more specifically (default 0.02; 0 = fewest deletions, most generalization).")
@click.option("--allow-recomposition", is_flag=True, default=None,
              help="Publish even if the release shares records with an earlier release of this home made with other "
              "settings or records (an intersection can pin values; recorded in the manifest).")
@click.option("--residual-policy", type=click.Choice(["delete", "suppress"]),
              help="delete (default): delete whole records until no value exceeds 1/ell of the attribute table, so no "
              "cell is suppressed (a suppressed cell names its value); suppress: SPEC's reference behaviour.")
@click.option("--min-support", type=click.IntRange(min=1),
              help="Minimum support of a strong rule in records (default max(ell, 5)); rarer rules are neither used nor printed.")
@click.option("--randomness", type=click.Choice(["home-secret", "spec-reference"]),
              help="home-secret (default): keyed order, SID numbers and permutation from $MSA_RELEASE_HOME/secret.key; "
              "spec-reference: SPEC's input-order algorithms (golden examples; leaks the input order, refused by the "
              "order gate on tables of more than a few hundred records).")
@click.option("--k", "k", type=click.IntRange(min=2), help="--model kl: minimum equivalence-class size (default 3; k >= ell).")
@click.option("--hierarchies", type=click.Path(file_okay=False),
              help="--model kl: folder of ARX hierarchies, one per quasi-identifier (default data/adult/hierarchies); "
              "--model mixed or rating: where the QI-aware grouping finds the hierarchies that generalize group and "
              "stratum quasi-identifiers.")
@click.option("--kl-method", type=click.Choice(["blocked", "greedy", "exact"]),
              help="--model kl: blocked (default, any size), greedy (<= 6000 records) or exact (<= 16 records).")
@click.option("--max-block-size", type=click.IntRange(min=4), help="--model kl, blocked: largest block (default 256; >= 2k).")
@click.option("--generalization-weights", help="--model kl: cost weight per quasi-identifier, e.g. sex=2,race=0.5 (default 1).")
@click.option("--mining-backend", type=click.Choice(["auto", "mlxtend-apriori", "mlxtend-fpgrowth", "duckdb", "counting"]),
              help="Strong-rule mining (default auto: mlxtend Apriori below --duckdb-mining-threshold records, DuckDB above).")
@click.option("--duckdb-mining-threshold", type=click.IntRange(min=1),
              help="With --mining-backend auto: mine with DuckDB from this many records on (default 100000).")
@click.option("--keep-releases", type=click.IntRange(min=0),
              help="Retention: after publishing, remove the oldest releases beyond the newest N (never LATEST's); "
              "default 0 keeps all.")
@click.option("--wait/--no-wait", default=False,
              help="If another run holds the release lock of this home, wait for it (default: fail at once, exit 3).")
@click.option("--wait-timeout", type=click.FloatRange(min=0.0), default=3600.0, show_default=True,
              help="With --wait: give up (exit 3) after this many seconds.")
@click.option("--profile", is_flag=True, default=None,
              help="Record wall time and peak memory (RSS) per stage into the manifest, the Dagster metadata and a JSON sidecar.")
@click.option("--profile-output", type=click.Path(dir_okay=False),
              help="With --profile: where to write the sidecar (default <home>/profiles/<run_id>.json).")
def run(**options) -> None:
    """Run the Dagster `release` job (models mixed, rating) or `kl_release` job (model kl) in-process
    and print a summary of the published release.

    Exit status: 0 published, 1 refused by a gate or another failure (a failure after the publish, e.g. the audit, says the release IS published), 2 unusable input (a usage
    error, an unreadable table, a missing or incomplete hierarchy, a table that cannot be made
    (k, ℓ)-anonymous), 3 another run holds the release lock of this home (see --wait).
    """
    started = time.monotonic()
    check_model_options(options)
    config = _settings_from_options(options)
    validate_settings(config)
    preflight(config, home_option=options["home"])
    from pipeline.publish import read_latest

    from pipeline.models import job_of_model

    job_name = job_of_model(config.get("model"))
    if options["profile_output"] and not options["profile"]:
        raise click.UsageError("--profile-output needs --profile")
    hold_release_lock(use_home(options["home"]), wait=options["wait"], wait_timeout=options["wait_timeout"])
    previous = read_latest(use_home(options["home"]) / "releases")
    if options["profile"]:
        from pipeline.profiling import ensure_sampler

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
        click.echo(render_kl_summary(manifest, latest, elapsed) if manifest["model"] == "kl" else render_summary(manifest, latest, elapsed))
        if not result.success:
            # published (LATEST moved), but a step after the publish failed, e.g. the audit
            click.echo(
                f"msa-release: the release above IS published, but a later step of run {result.run_id} failed:",
                err=True,
            )
            _report_step_failures(result)
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
    _report_step_failures(result)
    for explanation in [*gate_failure_explanations(gates), *environment_failure_messages(result)]:
        click.echo(f"  {explanation}", err=True)
    if previous is not None:
        click.echo(f"  the previous release is untouched: {previous}", err=True)
    sys.exit(1)


#: A few points per figure: checks the whole path in minutes (CI, first look at a new table).
QUICK_PLAN = {
    "ell_values": [2, 3],
    "min_confidence_values": [0.8, 0.9],
    "record_counts": [1000, 0],
    "histogram_ells": [3, 2],
    "timing_repeats": 1,
}


@main.command()
@input_options
@click.option("--output", type=click.Path(file_okay=False), help="Output directory (default: reports/experiments).")
@click.option("--repeats", type=click.IntRange(1, 100), help="Timed runs per point of Figures 1-2 (default 5).")
@click.option("--quick", is_flag=True, help="A few points per figure (minutes instead of the full sweep).")
def experiments(**options) -> None:
    """Run the Dagster `evaluation` job: P1 §6 Figures 1-11, results.json and REPORT.md.

    Sensitive attributes are taken in the given order; Figures 2, 5 and 9 use the first m.
    """
    started = time.monotonic()
    config = _settings_from_options(options)
    experiment_config: dict = dict(QUICK_PLAN) if options["quick"] else {}
    if options["output"]:
        experiment_config["output_dir"] = str(Path(options["output"]).resolve())
    if options["repeats"]:
        experiment_config["timing_repeats"] = options["repeats"]
    from pipeline.resources import ReleaseSettings

    m_all = len(config.get("sensitive_attributes") or ReleaseSettings().sensitive_attributes)
    experiment_config["attribute_set_sizes"] = sorted({2, m_all}) if options["quick"] else list(range(2, m_all + 1))
    if options["input_path"]:
        experiment_config["dataset_description"] = Path(options["input_path"]).name
    result, _ = execute_job(
        "evaluation",
        {"resources": {"settings": {"config": config}, "experiments": {"config": experiment_config}}},
        home_option=options["home"],
        verbose=options["verbose"],
    )
    elapsed = time.monotonic() - started
    if not result.success:
        click.echo(f"msa-release: the evaluation run failed ({elapsed:.0f} s)", err=True)
        _report_step_failures(result)
        sys.exit(1)
    report = None
    for event in result.get_asset_materialization_events():
        materialization = event.event_specific_data.materialization
        if materialization.asset_key.path[-1] == "experiment_report":
            report = materialization.metadata["report"].value
    click.echo(f"Experiments done in {elapsed:.0f} s: {report}")
    if report:
        click.echo(f"  figures and results.json beside it in {Path(report).parent}")


@main.command()
@input_options
@click.option("--ell", type=click.IntRange(min=2), help="ℓ of every release (default 3).")
@click.option("--k", type=click.IntRange(min=2), help="k of the (k, ℓ) release (default 3).")
@click.option("--min-confidence", type=click.FloatRange(min=0.0, max=1.0, min_open=True), help="Strong-rule threshold of the mixed model (default 0.8).")
@click.option("--hierarchies", type=click.Path(file_okay=False), help="Hierarchies of every quasi-identifier and sensitive attribute (default: data/adult/hierarchies).")
@click.option("--output", type=click.Path(file_okay=False), help="Output directory (default: reports/attacks).")
def attacks(**options) -> None:
    """Run the Dagster `attacks` job: P2's join attack and the one-known-value attack against the
    naive per-attribute, (k, ℓ), mixed and Rating releases, with their utility.

    Writes results.json, REPORT.md and the figures (default reports/attacks/; a few minutes on Adult).
    """
    started = time.monotonic()
    config = _settings_from_options(options)
    op_config: dict = {}
    if options["output"]:
        op_config["output_dir"] = str(Path(options["output"]).resolve())
    if options["input_path"]:
        op_config["dataset_description"] = Path(options["input_path"]).name
    run_config = {"resources": {"settings": {"config": config}}}
    if op_config:
        run_config["ops"] = {"attacks__attack_evaluation": {"config": op_config}}
    result, _ = execute_job("attacks", run_config, home_option=options["home"], verbose=options["verbose"])
    elapsed = time.monotonic() - started
    if not result.success:
        click.echo(f"msa-release: the attack evaluation failed ({elapsed:.0f} s)", err=True)
        _report_step_failures(result)
        sys.exit(1)
    target = Path(op_config.get("output_dir", Path(__file__).resolve().parents[1] / "reports" / "attacks"))
    click.echo(f"Attacks done in {elapsed:.0f} s: {target / 'REPORT.md'}")


@main.command("kl-quality")
@input_options
@click.option("--hierarchies", type=click.Path(file_okay=False), help="Hierarchy directory (default: data/adult/hierarchies).")
@click.option("--output", type=click.Path(file_okay=False), help="Output directory (default: reports/kl_quality).")
@click.option("--quick", is_flag=True, help="A few small tables and one medium point (seconds instead of minutes).")
def kl_quality(**options) -> None:
    """Measure the (k, ℓ) approximation: greedy and blocked vs the exact optimum on small random
    samples, blocked vs the whole-table greedy on medium samples, and the whole table's time.

    Writes results.json, REPORT.md and two figures (about 2-3 min on Adult; --quick: seconds).
    """
    from pipeline import kl_quality as quality
    from pipeline.core.hierarchies import HierarchyError, load_hierarchies
    from pipeline.loading import InputError, load_records
    from pipeline.resources import ReleaseSettings

    started = time.monotonic()
    config = _settings_from_options(options)
    try:
        settings = ReleaseSettings(**config)
        loaded = load_records(
            settings.input_path, quasi_identifiers=settings.quasi_identifiers, sensitive_attributes=settings.sensitive_attributes,
            input_format=settings.input_format, csv_header=settings.csv_header, column_names=settings.column_names,
            delimiter=settings.delimiter, strip_whitespace=settings.strip_whitespace, missing_value_tokens=settings.missing_value_tokens,
        )
        hierarchies = load_hierarchies(
            settings.hierarchies_path(), settings.quasi_identifiers,
            data_values={a: loaded.records[a] for a in settings.quasi_identifiers}, data_source=str(settings.input_path),
        )
    except (InputError, HierarchyError, ValueError) as error:
        raise UnusableInput(str(error)) from error
    plan = (
        quality.QualityPlan(small_sizes=(8,), small_tables_per_point=5, medium_sizes=(500,), medium_parameters=((3, 3),), whole_parameters=())
        if options["quick"]
        else quality.QualityPlan()
    )
    out_dir = Path(options["output"]).resolve() if options["output"] else Path(__file__).resolve().parents[1] / "reports" / "kl_quality"
    report = quality.main(
        records=loaded.records, quasi_identifiers=settings.quasi_identifiers, sensitive_attributes=settings.sensitive_attributes,
        hierarchies=hierarchies, out_dir=out_dir, plan=plan,
        description=("UCI Adult (adult.data, CC BY 4.0), default columns" if not options["input_path"] else Path(settings.input_path).name),
    )
    click.echo(f"kl-quality done in {time.monotonic() - started:.0f} s: {report}")


@main.command()
@click.option("--rows", type=click.IntRange(min=1), required=True, help="Records to write (e.g. 1000000).")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True, help="Random seed (same seed, same file).")
@click.option("--output", type=click.Path(dir_okay=False), required=True, help="Parquet file to write.")
@click.option("--sampling", type=click.Choice(["balanced", "replacement"]), default="balanced", show_default=True,
              help="balanced: every source row floor(N/n) times plus a random subset once more (rules kept); "
              "replacement: N independent draws.")
@click.option("--chunk-rows", type=click.IntRange(min=1), default=1_000_000, show_default=True, help="Rows per Parquet row group.")
@click.option("--input", "input_path", type=click.Path(dir_okay=False), help="Source CSV or Parquet file (default: UCI Adult).")
@click.option("--input-format", type=click.Choice(["auto", "csv", "parquet"]), help="Default: by extension.")
@click.option("--header/--no-header", default=None, help="Whether the source CSV has a header row (default with --input: yes).")
@click.option("--column-names", help="All column names of the source in file order, comma-separated (CSV without header).")
@click.option("--delimiter", help="CSV field separator (default ',').")
@click.option("--quasi-identifiers", help="Comma-separated quasi-identifier columns to keep.")
@click.option("--sensitive-attributes", help="Comma-separated sensitive attribute columns to keep (at least 2).")
@click.option("--missing-tokens", help="Comma-separated values meaning 'missing' (default: '', NULL, ?).")
@click.option("--min-confidence", type=click.FloatRange(min=0.0, max=1.0, min_open=True),
              help="Threshold of the rule comparison source vs sample (default 0.8).")
def synthesize(**options) -> None:
    """Write a synthetic table of --rows whole rows of the source (default: UCI Adult's quasi-identifiers
    and sensitive attributes of the default configuration, after the missing-value policy) as Parquet.

    Prints whether the sample's strong rules equal the source's. Exit status 2 on unusable input.
    """
    from pipeline.loading import InputError, file_sha256, load_records, resolve_input_path
    from pipeline.resources import ReleaseSettings
    from pipeline.synthetic import synthesize as write_synthetic

    started = time.monotonic()
    config = _settings_from_options(options)
    validate_settings(config)
    settings = ReleaseSettings(**config)
    try:
        loaded = load_records(
            settings.input_path, quasi_identifiers=settings.quasi_identifiers, sensitive_attributes=settings.sensitive_attributes,
            input_format=settings.input_format, csv_header=settings.csv_header, column_names=settings.column_names,
            delimiter=settings.delimiter, strip_whitespace=settings.strip_whitespace, missing_value_tokens=settings.missing_value_tokens,
        )
        source_path = resolve_input_path(settings.input_path)
    except InputError as error:
        raise UnusableInput(str(error)) from error
    result = write_synthetic(
        loaded.records.drop(columns="row_id"), settings.sensitive_attributes, rows=options["rows"], seed=options["seed"],
        output=options["output"], sampling=options["sampling"], min_confidence=settings.min_confidence,
        chunk_rows=options["chunk_rows"],
        provenance={"source": source_path.name, "source_sha256": file_sha256(source_path)},
    )
    click.echo(
        f"Wrote {result.rows} records ({options['sampling']} sampling, seed {options['seed']}) of {result.source_rows} "
        f"source records to {result.path} in {time.monotonic() - started:.1f} s\n"
        f"  columns        {', '.join(result.columns)}\n"
        f"  strong rules   {result.sample_rules} in the sample, {result.source_rules} in the source "
        f"(min_confidence {settings.min_confidence}): {'equal' if result.rules_equal_source else 'DIFFERENT'}"
    )


@main.command("privacy-report")
@click.option("--output", type=click.Path(file_okay=False), default="reports/attacks", show_default=True,
              help="Where to write privacy.json and PRIVACY.md.")
def privacy_report(output: str) -> None:
    """Run the attacks of issue 12 (order replay, learned model, certain cells, composition, one known
    value) against candidate releases of Adult in a scratch home and write OUTPUT/PRIVACY.md."""
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    from pipeline.privacy_report import run_privacy_report

    started = time.monotonic()
    scratch_dagster = Path(tempfile.mkdtemp(prefix="msa-privacy-dagster-"))
    (scratch_dagster / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    os.environ["DAGSTER_HOME"] = str(scratch_dagster)
    try:
        run_privacy_report(output, progress=lambda message: click.echo(f"  {message}"))
    finally:
        shutil.rmtree(scratch_dagster, ignore_errors=True)
    click.echo(f"wrote {Path(output) / 'PRIVACY.md'} and privacy.json in {time.monotonic() - started:.0f} s")


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
        raise UnusableInput(str(error)) from error
    target = Path(output or f"audit-{report['release']['release_id']}.json")
    target.write_text(json.dumps(report, indent=2) + "\n")
    click.echo(render_audit(report, target))
    if report["verdict"] != "PASS":
        sys.exit(1)


@main.command()
@click.argument("release_dir", type=click.Path(exists=True, file_okay=False))
@click.option("--raw", "raw_path", type=click.Path(exists=True, dir_okay=False),
              help="Raw table, only for a mixed/Rating release without report.json: rule confidences, AIL and RCE "
              "are then computed from it (read as the release read its input).")
def report(release_dir: str, raw_path: str | None) -> None:
    """Regenerate RELEASE_DIR/report.html (a release directory, or a releases directory with LATEST).

    The page is rebuilt from the release's own files (manifest.json, report.json, the Parquet
    tables) and compared with the newest release of the other model (mixed vs Rating) of the same
    input and parameters in the same releases directory. Exit status: 0 written, 2 unusable input.
    """
    from pipeline.release_report import ReportError, regenerate_report

    try:
        target = regenerate_report(release_dir, raw_path=raw_path)
    except ReportError as error:
        raise UnusableInput(str(error)) from error
    click.echo(f"Report written: {target}")


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
