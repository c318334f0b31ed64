"""What the commands of ``msa-release`` share: settings from options, the Dagster home, running a job in-process,
the release lock, and the messages that explain a failure (never echoing an input value)."""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import click

from pipeline.errors import MsaReleaseError, ReleaseLockBusyBase, UnusableInputError

#: What the first version wrote (telemetry only): replaced by ``DAGSTER_YAML`` when found unchanged.
LEGACY_DAGSTER_YAML = """\
telemetry:
  enabled: false
"""

#: The configuration written before the publish pool (issue 17): replaced by ``DAGSTER_YAML`` when found unchanged.
RUN_QUEUE_DAGSTER_YAML = """\
telemetry:
  enabled: false
# msa-release: runs of this home hold its release lock; the queue keeps the others QUEUED (not failed on the lock)
run_queue:
  tag_concurrency_limits:
    - key: msa_release/release_lock
      limit: 1
# runs stuck STARTING or CANCELING are failed; a run whose process died is failed by the inbox sensor's next tick
# and by the next msa-release command (pipeline.run_events.fail_orphaned_runs)
run_monitoring:
  enabled: true
  start_timeout_seconds: 300
  cancel_timeout_seconds: 300
  poll_interval_seconds: 30
# only runs tagged dagster/max_retries are retried (the inbox sensor's: worker died, not a gate's refusal)
run_retries:
  enabled: true
  max_retries: 0
"""

#: The Dagster instance configuration this project writes (``msa-release``, ``make ui``/``release``): the run queue
#: starts one run tagged ``msa_release/release_lock`` (every job of the code location) at a time, and one run at a
#: time using a concurrency pool (``sharded_release``'s publish step is in pool ``msa_release_publish``; limit 1,
#: enforced per run by the queue, so an in-process step never waits on a slot); run monitoring fails runs stuck
#: starting or cancelling, and run retries re-run the runs tagged ``dagster/max_retries`` (the inbox's).
DAGSTER_YAML = """\
telemetry:
  enabled: false
# msa-release: runs of this home hold its release lock; the queue keeps the others QUEUED (not failed on the lock);
# runs with a step in a pool (sharded_release's publish step: msa_release_publish) start one at a time
concurrency:
  runs:
    tag_concurrency_limits:
      - key: msa_release/release_lock
        limit: 1
  pools:
    default_limit: 1
    granularity: run
# runs stuck STARTING or CANCELING are failed; a run whose process died is failed by the inbox sensor's next tick
# and by the next msa-release command (pipeline.run_events.fail_orphaned_runs)
run_monitoring:
  enabled: true
  start_timeout_seconds: 300
  cancel_timeout_seconds: 300
  poll_interval_seconds: 30
# only runs tagged dagster/max_retries are retried (the inbox sensor's: worker died, not a gate's refusal)
run_retries:
  enabled: true
  max_retries: 0
"""


def write_dagster_yaml(dagster_home: Path) -> Path:
    """Create ``<dagster_home>/dagster.yaml`` (``DAGSTER_YAML``) unless one exists; one that still holds
    ``LEGACY_DAGSTER_YAML`` exactly (written by an earlier version) is replaced. Any other file is the
    steward's and is kept. Returns its path."""
    # its run history is private: every directory created here, the missing parents too (the release home, when
    # DAGSTER_HOME is <home>/dagster and `make` runs first), is 0700; an existing one keeps its mode
    for directory in [*reversed(dagster_home.parents), dagster_home]:
        if not directory.exists():
            directory.mkdir(mode=0o700, exist_ok=True)
    if not dagster_home.is_dir():
        raise NotADirectoryError(20, "Not a directory", str(dagster_home))
    config = dagster_home / "dagster.yaml"
    try:
        current = config.read_text()
    except FileNotFoundError:
        current = None
    if current is None or current in (LEGACY_DAGSTER_YAML, RUN_QUEUE_DAGSTER_YAML):
        staged = config.with_name(".dagster.yaml.tmp")
        staged.write_text(DAGSTER_YAML)
        staged.replace(config)
    return config


def _split(value: str | None) -> list[str] | None:
    if value is None:
        return None
    items = [v.strip() for v in value.split(",") if v.strip()]
    return items


#: The value type of :func:`name_value_pairs` (int for --ell, float for --generalization-weights).
T = TypeVar("T")


def name_value_pairs(text: str, convert: Callable[[str], T]) -> list[tuple[str, str, T | None]]:
    """``"a=1,b=2.5"`` split into ``(item, name, value)``: ``value`` is ``convert(number)``, or None when the item has
    no ``=``, no name, or a number ``convert`` refuses (``ValueError``). Empty items are skipped. The callers word
    the errors (``--ell``, ``--generalization-weights``)."""
    pairs: list[tuple[str, str, T | None]] = []
    for item in (v.strip() for v in text.split(",")):
        if not item:
            continue
        name, separator, number = item.rpartition("=")
        name = name.strip()
        value: T | None
        try:
            value = convert(number)
        except ValueError:
            value = None
        pairs.append((item, name, value if separator and name else None))
    return pairs


class EllOption(click.ParamType):
    """``--ell``: an integer ℓ >= 2 (every sensitive attribute) or ``name=ℓ_i,...`` (one ℓ_i >= 2 per sensitive
    attribute, SPEC §6.7), e.g. ``education=4,occupation=3,age=2,relationship=2``. Which names are needed is checked
    with the settings (every sensitive attribute, no other name)."""

    name = "ell"

    def convert(self, value, param, ctx):
        if isinstance(value, (int, dict)):
            return value
        text = str(value).strip()
        if "=" not in text:
            try:
                int(text)
            except ValueError:
                self.fail(f"{text!r} is neither an integer nor name=integer pairs (e.g. 3, or education=4,age=2)", param, ctx)
            return click.IntRange(min=2).convert(text, param, ctx)
        mapping: dict[str, int] = {}
        for item, name, number in name_value_pairs(text, int):
            if number is None:
                self.fail(f"{item!r} is not name=integer (example: education=4,occupation=3,age=2,relationship=2)", param, ctx)
            if name in mapping:
                self.fail(f"{name!r} is given twice", param, ctx)
            if number < 2:
                self.fail(f"the ℓ of sensitive attribute {name!r} must be an integer >= 2, got {number}", param, ctx)
            mapping[name] = number
        if not mapping:
            self.fail("give an integer or name=integer pairs", param, ctx)
        return mapping


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
    for item, name, weight in name_value_pairs(value, float):
        if weight is None:
            raise click.BadParameter(
                f"{item!r} is not name=number (example: sex=2,race=0.5)", param_hint="--generalization-weights"
            )
        if name in weights:
            raise click.BadParameter(f"{name!r} is given twice", param_hint="--generalization-weights")
        weights[name] = weight
    return weights


def prepare_dagster_home(home: Path, *, explicit_home: bool = False) -> Path:
    """Make Dagster's instance directory exist and return it.

    ``<home>/dagster`` when the user named ``--home`` (so a run never writes into another
    home's instance) or when ``$DAGSTER_HOME`` is unset; otherwise ``$DAGSTER_HOME``. The
    directory is created if missing (Dagster refuses a missing one) and gets the project's
    ``dagster.yaml`` (:func:`write_dagster_yaml`) unless it already has one of its own.
    """
    from_environment = bool(os.environ.get("DAGSTER_HOME")) and not explicit_home
    named = os.environ["DAGSTER_HOME"] if from_environment else str(home / "dagster")
    try:
        dagster_home = Path(named).expanduser().resolve()
        write_dagster_yaml(dagster_home)
    except (OSError, RuntimeError) as error:  # RuntimeError: a symlink loop (Path.resolve, Python 3.11)
        where = "$DAGSTER_HOME" if from_environment else "the release home's dagster/ directory"
        fix = (
            "point $DAGSTER_HOME at a directory you can write, or unset it (the run then uses <home>/dagster)"
            if from_environment
            else "make it a directory you can write (remove what is there) or use another --home"
        )
        raise UnusableInput(
            f"the Dagster instance directory {named} ({where}) cannot be used as a directory "
            f"({getattr(error, 'strerror', None) or error}); nothing was run: {fix}"
        ) from error
    os.environ["DAGSTER_HOME"] = str(dagster_home)
    return dagster_home


#: The compute log manager of this command's runs (:func:`command_instance`): none.
NO_COMPUTE_LOGS = {"module": "dagster._core.storage.noop_compute_log_manager", "class": "NoOpComputeLogManager"}


def command_instance(dagster_home: Path):
    """The Dagster instance of ``dagster_home`` for the runs this command executes in its own process: the instance
    of its ``dagster.yaml`` (the same storages, run history and settings as the UI's), except that, unless that file
    configures ``compute_logs`` itself, the runs' stdout and stderr are not captured.

    Dagster captures a run's stdout and stderr into the home through four helper processes (``tail -F`` and its
    ``watch_orphans.py`` for each stream). A run of this command writes them to its own terminal, where they stay;
    capturing them cost about 22 MiB of the process tree and 0.4 s per Adult release (issue 18, alternated, three runs
    each: 9.35 -> 8.98 s, 416 -> 394 MiB). Runs started from the UI, a schedule or the inbox sensor keep their
    compute logs (the UI shows them; a Spark Pipes job's error is there).

    Returns a ``dagster.DagsterInstance`` (``DagsterInstance.local_temp`` with ``dagster_home`` as its directory:
    Dagster's public constructor of a persistent instance from a directory with overrides; ``DagsterInstance.get``
    builds the same instance without them).

    Raises
    ------
    Whatever ``DagsterInstance.get`` raises for the same directory (an invalid ``dagster.yaml``, an unusable
    storage); :func:`instance_failure` words them.
    """
    import dagster as dg
    import yaml

    try:
        configured = yaml.safe_load((dagster_home / "dagster.yaml").read_text()) or {}
    except (OSError, yaml.YAMLError):
        configured = {}  # Dagster reads the file next and reports what is wrong with it
    own = isinstance(configured, dict) and "compute_logs" in configured
    return dg.DagsterInstance.local_temp(tempdir=str(dagster_home), overrides=None if own else {"compute_logs": NO_COMPUTE_LOGS})


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
    max_value_length: int | None = None,
    promote: bool | None = None,
    max_deleted_share: float | None = None,
    max_suppressed_share: float | None = None,
    ell_per_attribute: dict[str, int] | None = None,
    engine: str | None = None,
    workers: int | None = None,
    shard_rows: int | None = None,
    min_shard_rows: int | None = None,
    spark_master: str | None = None,
    spark_remote: str | None = None,
    spark_launch: str | None = None,
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
            raise click.UsageError("with --input, name the columns: --quasi-identifiers a,b --sensitive-attributes x,y")
        config.update({"input_path": input_path, "csv_header": True, "column_names": []})
    for key, value in (
        ("input_format", input_format),
        ("csv_header", header),
        ("column_names", column_names),
        ("delimiter", delimiter),
        ("quasi_identifiers", quasi_identifiers),
        ("sensitive_attributes", sensitive_attributes),
        ("ell", ell),
        ("ell_per_attribute", ell_per_attribute),
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
        ("max_value_length", max_value_length),
        ("promote", promote),
        ("max_deleted_share", max_deleted_share),
        ("max_suppressed_share", max_suppressed_share),
        ("engine", engine),  # None: the model's default (pipeline.models.job_and_settings leaves memory out of the job's)
        ("workers", workers),
        ("shard_rows", shard_rows),
        ("min_shard_rows", min_shard_rows),
        ("spark_master", spark_master),
        ("spark_remote", spark_remote),
        ("spark_launch", spark_launch),
    ):
        if value is not None:
            config[key] = value
    return config


class FiniteFloatRange(click.FloatRange):
    """:class:`click.FloatRange` that also refuses ``nan`` and ``inf``: NaN passes every comparison of a range (``--wait-timeout
    nan`` waited forever) and an infinite timeout or threshold is never what was meant (usage error, exit 2)."""

    name = "finite float range"

    def convert(self, value, param, ctx):
        number = super().convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return number


class UnusableInput(UnusableInputError, click.ClickException):
    """An input that cannot be used (exit status 2, like a usage error; 1 means a FAIL verdict)."""

    exit_code = UnusableInputError.exit_status


def _option_flag(setting: str) -> str:
    from pipeline.vocabulary import option_of

    return option_of(setting)


def check_model_options(options: dict) -> None:
    """Refuse options that the chosen model does not read (instead of silently ignoring them): the settings its job
    takes are those of its plug-in (:func:`pipeline.models.settings_of_job`), as in the job's run config schema.

    Raises
    ------
    click.UsageError
        Naming each option, the chosen model and the model(s) whose setting it is.
    """
    from pipeline.models import (
        DEFAULT_MODEL,
        IN_MEMORY_ENGINE,
        PUBLICATION_MODELS,
        SHARDED_JOBS,
        default_engine,
        job_of_settings,
        publication_model,
        settings_of_job,
    )
    from pipeline.resources import SHARDING_SETTINGS

    model = publication_model(options.get("model") or DEFAULT_MODEL)
    sharded = model.name in SHARDED_JOBS.values()
    engine = options.get("engine") or default_engine(model.name)
    if engine != IN_MEMORY_ENGINE and not sharded:
        raise click.UsageError(
            f"--engine {engine} publishes sharded releases of the mixed model only, not --model {model.name}: leave "
            f"--engine out for --model {model.name} (it runs in memory)"
        )
    accepted = set(settings_of_job(job_of_settings(model.name, engine))) | {"engine"}
    given = [name for name in settings_from_options(options) if name not in accepted and name != "model"]
    sharding = [_option_flag(name) for name in given if name in SHARDING_SETTINGS]
    if sharding:
        if sharded:
            raise click.UsageError(
                f"{', '.join(sharding)}: not used by --engine {engine} (the in-memory release); leave --engine "
                f"{engine} out for a sharded release (engine local, the default) or leave {', '.join(sharding)} out"
            )
        raise click.UsageError(
            f"{', '.join(sharding)}: not used by --model {model.name} (it runs in memory: sharded releases publish the "
            "mixed model only); leave it out"
        )
    if options.get("spark_launch") is not None and engine != "spark":
        chosen = f"--engine {engine}" if options.get("engine") else f"engine {engine} (the default)"
        raise click.UsageError(
            f"--spark-launch {options['spark_launch']}: not used by {chosen}; it chooses how --engine spark "
            "runs its shards (client or pipes): add --engine spark or leave --spark-launch out"
        )
    by_owners: dict[str, list[str]] = {}
    for name in given:
        owners = ", ".join(m.name for m in PUBLICATION_MODELS.values() if name in m.settings_fields)
        by_owners.setdefault(owners, []).append(_option_flag(name))
    if by_owners:
        raise click.UsageError(
            "; ".join(
                f"{', '.join(flags)}: not used by --model {model.name}" + (f" (a setting of --model {owners})" if owners else "")
                for owners, flags in by_owners.items()
            )
            + "; leave it out"
        )


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
    """Messages of the step failures caused by an unusable input: structured failures (:mod:`pipeline.failures`) of
    exit status 2 (:class:`pipeline.errors.UnusableInputError`: unreadable table or column configuration, hierarchy
    missing / invalid / not covering the data, a table that cannot be made (k, ℓ)-anonymous)."""
    from pipeline.errors import UnusableInputError
    from pipeline.failures import step_failures

    return [failure.message for failure in step_failures(result) if failure.exit_status == UnusableInputError.exit_status]


def failure_exit_status(result) -> int:
    """The exit status of a run that published nothing: the largest ``exit_status`` its structured failures carry
    (2 unusable input, 3 lock busy), those of its steps and of its resources (:func:`pipeline.failures.run_failures`),
    else 1 (a gate refused the release, or another failure)."""
    from pipeline.failures import run_failures, step_failures

    failures = [*step_failures(result), *run_failures(result)]
    return max([1, *(failure.exit_status for failure in failures if failure.exit_status is not None)])


def report_run_failures(result) -> bool:
    """Echo to stderr why a run stopped outside its steps, one line each; True if there was such a failure: before any
    step ran (its resources could not be set up: a damaged or unwritable warehouse, a release lock that cannot be
    opened, …), or interrupted (Ctrl-C, SIGTERM), named with the step that was running.
    The messages are this project's own (they name files, never a value of the input) or the machine's error."""
    from pipeline.failures import run_failures

    failures = run_failures(result)
    steps_started = [event.step_key for event in result.all_events if event.event_type_value == "STEP_START"]
    for failure in failures:
        if "DagsterExecutionInterruptedError" in failure.error_text:  # Ctrl-C, or SIGTERM / SIGINT sent to the process
            where = f"during step {steps_started[-1]}" if steps_started else "before its first step"
            click.echo(f"  the run was interrupted {where} (Ctrl-C, or a signal sent to the process)", err=True)
        elif steps_started:
            click.echo(f"  the run stopped outside its steps, after step {steps_started[-1]} began: {failure.message}", err=True)
        else:
            click.echo(f"  the run stopped before its first step: {failure.message}", err=True)
    return bool(failures)


def input_options(command):
    """The options that say which table to read and which columns play which role."""
    for option in reversed(
        [
            click.option(
                "--input", "input_path", type=click.Path(dir_okay=False), help="CSV or Parquet file (default: UCI Adult)."
            ),
            click.option("--input-format", type=click.Choice(["auto", "csv", "parquet"]), help="Default: by extension."),
            click.option(
                "--header/--no-header", default=None, help="Whether the CSV has a header row (default with --input: yes)."
            ),
            click.option("--column-names", help="All column names in file order, comma-separated (CSV without header)."),
            click.option("--delimiter", help="CSV field separator (default ',')."),
            click.option("--quasi-identifiers", help="Comma-separated quasi-identifier columns."),
            click.option("--sensitive-attributes", help="Comma-separated sensitive attribute columns (at least 2)."),
            click.option("--missing-tokens", help="Comma-separated values meaning 'missing' (default: '', NULL, ?)."),
            click.option(
                "--max-value-length",
                type=click.IntRange(min=1),
                help="Longest accepted value of a configured column, in bytes of UTF-8 (default 4096); a longer value "
                "is refused before anything runs (exit 2, naming the column and the line, never the value).",
            ),
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
    from pipeline.release.locking import ReleaseLockBusy, UnusableLockFile, acquire_release_lock

    try:
        lock = acquire_release_lock(
            home,
            wait_seconds=wait_timeout if wait else 0.0,
            hint="wait for it or use --wait" if not wait else "try again later or raise --wait-timeout",
        )
    except ReleaseLockBusy as error:
        raise ReleaseLockBusyError(str(error)) from error
    except UnusableLockFile as error:  # release.lock is a symbolic link or not a regular file
        raise UnusableInput(str(error)) from error
    except OSError as error:
        if error.errno in (errno.ENOSPC, errno.EDQUOT, errno.EIO):
            raise  # the machine, not the home's layout: `run` reports it (whether a release is published, what to do)
        from pipeline.warehouse import home_preparation_message

        raise UnusableInput(home_preparation_message(home, error)) from error
    click.get_current_context().call_on_close(lock.release)


def latest_release(home: Path) -> Path | None:
    """The release ``<home>/releases/LATEST`` names, or None (:func:`pipeline.release.publish.read_latest`).

    Raises
    ------
    UnusableInput
        ``LATEST`` is a directory, a symbolic link, or does not hold the id of a release of the home (exit 2).
    """
    from pipeline.release.listing import InvalidLatest, read_latest

    try:
        return read_latest(home / "releases")
    except InvalidLatest as error:
        raise UnusableInput(str(error)) from error


def newest_comparison(home: Path) -> Path | None:
    """The newest release of ``<home>/comparisons`` (:func:`pipeline.release.publish.list_releases`), or None."""
    from pipeline.release.listing import list_releases

    comparisons = list_releases(home / "comparisons")
    return comparisons[-1] if comparisons else None


def use_home(home_option: str | None) -> Path:
    """The release home: ``--home`` when given (exported as $MSA_RELEASE_HOME), else the default; created 0700 if
    absent, an existing directory's mode never changed (a warning on stderr when others can access it)."""
    from pipeline.home import HomePathError
    from pipeline.resources import ensure_release_home, home_access_warning, release_home

    try:
        if home_option:
            os.environ["MSA_RELEASE_HOME"] = str(Path(home_option).resolve())
        home = ensure_release_home(release_home())
    except HomePathError as error:
        raise UnusableInput(str(error)) from None
    except (OSError, RuntimeError) as error:  # RuntimeError: a symlink loop (Path.resolve, Python 3.11)
        raise UnusableInput(
            f"the release home {home_option or os.environ.get('MSA_RELEASE_HOME', 'var')!r} cannot be used as a "
            f"directory ({getattr(error, 'strerror', None) or error}); point --home or $MSA_RELEASE_HOME at a writable "
            "directory"
        ) from error
    warning = home_access_warning(home)
    if warning is not None and home not in _WARNED_HOMES:  # once per process (use_home is called at every stage)
        _WARNED_HOMES.add(home)
        click.echo(f"msa-release: {warning}", err=True)
    return home


#: Homes whose access warning this process printed already.
_WARNED_HOMES: set[Path] = set()


#: What Dagster writes to ``sys.stderr`` itself (dagster/_core/instance/types.py) when its event log cannot be written
#: (a full disk, an I/O error): three raw lines of SQLAlchemy's error before the run fails. The command reports the
#: same cause in its own line (:func:`machine_failure_line`), so these are left out.
DAGSTER_EVENT_LOG_WRITE_ERROR = "Exception while writing logger call to event log"


class _WithoutEventLogWriteErrors:
    """A text stream that passes every write to ``stream`` except Dagster's event-log write errors."""

    def __init__(self, stream) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        if text.startswith(DAGSTER_EVENT_LOG_WRITE_ERROR):
            return len(text)
        return int(self._stream.write(text))

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


@contextlib.contextmanager
def without_event_log_write_errors():
    """While a job runs: ``sys.stderr`` without Dagster's own "Exception while writing logger call to event log"
    lines (the command's one failure line names the cause: issue 14, "every failure gets one clear line")."""
    original = sys.stderr
    sys.stderr = _WithoutEventLogWriteErrors(original)
    try:
        yield
    finally:
        sys.stderr = original


#: ``msa-release run``'s progress: a line for every finished step, and a heartbeat every this many seconds that a
#: step keeps running (with the step's last progress message: blocks, EM rounds, …).
PROGRESS_HEARTBEAT_SECONDS = 10.0


def execute_job(
    job_name: str,
    run_config: dict,
    *,
    home_option: str | None,
    verbose: bool,
    progress: bool = False,
    tags: dict[str, str] | None = None,
    quiet: bool = False,
):
    """Run a job of the code location in-process on the persistent Dagster instance.

    Runs of the instance whose process is gone (killed: SIGKILL, out of memory, a timeout) are first marked failed,
    each with a line on stderr (:func:`pipeline.run_events.fail_orphaned_runs`; not with ``quiet``).

    With ``progress``, a line goes to stderr for every step as it finishes (its elapsed seconds and the run's), and
    every ``PROGRESS_HEARTBEAT_SECONDS`` that a step keeps running, with its percentage when the step reports one
    (:class:`pipeline.run_events.StepProgress`). ``tags`` are added to the run's tags (e.g.
    :func:`pipeline.run_events.release_run_tags`).

    Returns ``(result, home)``; ``home`` is the release home ($MSA_RELEASE_HOME).
    """
    home = use_home(home_option)
    os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
    dagster_home = prepare_dagster_home(home, explicit_home=bool(home_option))
    from pipeline.jobs import schedule_cron_and_timezone, schedule_run_config

    try:
        schedule_cron_and_timezone()  # the code location's schedule is built with the job: refuse bad variables first
        schedule_run_config(home)  # and a bad schedule config file (it names the file and the key)
    except ValueError as error:
        raise UnusableInput(f"{error}; nothing was run") from error

    import dagster as dg

    config = dict(run_config)
    config["loggers"] = {"console": {"config": {"log_level": "DEBUG" if verbose else "CRITICAL"}}}
    # dg.execute_job rather than JobDefinition.execute_in_process: the latter keeps every step's output value in
    # memory until the run ends (for ExecuteInProcessResult.output_for_node), which at 10M records held about
    # 4 GiB of frames that every later step had already reloaded from the warehouse. The jobs run with the
    # in-process executor, so the steps still run in this process, one at a time.
    import socket
    import uuid

    from pipeline.run_events import COMMAND_TAG, HOST_TAG, cancel_runs_not_started, fail_orphaned_runs

    try:
        with _jobs_built_once(), command_instance(dagster_home) as instance, without_event_log_write_errors():
            job = dg.build_reconstructable_job(__name__, "job_of_home", reconstructable_args=(str(home), job_name))
            for orphan in fail_orphaned_runs(instance):
                if not quiet:
                    click.echo(f"msa-release: {orphan.message}", err=True)
            command = uuid.uuid4().hex
            run_tags = {**(tags or {}), HOST_TAG: socket.gethostname(), COMMAND_TAG: command}
            try:
                if not progress:
                    result = dg.execute_job(job, instance=instance, run_config=config, tags=run_tags, raise_on_error=False)
                    return result, home
                from pipeline.run_events import PROGRESS_TAG, StepProgress

                reporter = StepProgress(
                    instance,
                    command,
                    lambda line: click.echo(line, err=True),
                    min_step_seconds=0.0,
                    heartbeat_seconds=PROGRESS_HEARTBEAT_SECONDS,
                ).start()
                try:
                    result = dg.execute_job(
                        job, instance=instance, run_config=config, raise_on_error=False, tags={**run_tags, PROGRESS_TAG: command}
                    )
                finally:
                    reporter.stop()
            except KeyboardInterrupt:  # Ctrl-C before the run began: its NOT_STARTED run would stay so in the UI forever
                cancel_runs_not_started(instance, command)
                raise
    except Exception as error:
        failure = instance_failure(error, dagster_home)
        if failure is None:
            raise
        raise failure from error
    return result, home


class InstanceFailure(MsaReleaseError, click.ClickException):
    """The Dagster instance (``$DAGSTER_HOME``) failed: a full disk (exit status 1) or an invalid ``dagster.yaml``
    or an unwritable directory (:class:`UnusableInput`, exit status 2)."""

    exit_code = MsaReleaseError.exit_status


def instance_failure(error: BaseException, dagster_home: Path) -> click.ClickException | None:
    """The one-line error of a failure of the Dagster instance in ``dagster_home`` (its configuration, its SQLite
    storage, its directory), or None for any other error (raised as it is).

    Recognised: no space left (an ``OSError`` ENOSPC / EDQUOT in the chain, or SQLite's "database or disk is full"):
    exit status 1; ``dagster.yaml`` that is not YAML or not a valid instance configuration, and a storage that cannot
    be written (permission, read-only): exit status 2.
    """
    import yaml
    from dagster._core.errors import DagsterInvalidConfigError

    from pipeline.failures import error_chain

    chain = error_chain(error)
    text = " ".join(f"{type(e).__name__}: {e}" for e in chain)
    numbers = {getattr(e, "errno", None) for e in chain}
    config = dagster_home / "dagster.yaml"
    if numbers & NO_SPACE_ERRNOS or "disk is full" in text or "No space left" in text:
        return InstanceFailure(
            f"disk full: the Dagster instance {dagster_home} could not write its run history (no space left on "
            "device); the run was stopped and a release is published whole or not at all (releases/LATEST names the "
            "newest complete one): free space under $DAGSTER_HOME and $MSA_RELEASE_HOME and retry"
        )
    configuration = next((e for e in chain if isinstance(e, yaml.YAMLError | DagsterInvalidConfigError)), None)
    if configuration is not None:
        lines = [line.strip() for line in str(configuration).splitlines() if line.strip()]
        problems = [line.split(". Expected:")[0] for line in lines if line.startswith("Error ")] or lines[:1]
        return UnusableInput(
            f"the Dagster instance configuration {config} is invalid ({'; '.join(problems)[:300]}); nothing was run: "
            "fix it, or delete it (msa-release then writes one with telemetry disabled) and retry"
        )
    denied = numbers & NOT_WRITABLE_ERRNOS or "readonly database" in text or "unable to open database" in text
    if denied:
        return UnusableInput(
            f"the Dagster instance {dagster_home} cannot be written (permission denied, read-only, or not yours); "
            "nothing was published: make $DAGSTER_HOME a directory you can write, or unset it, and retry"
        )
    return None


#: Jobs already built during the current :func:`execute_job` call, by (home, job name); None outside one. Dagster
#: reconstructs the job from its pointer four times per run (the job, then its repository three times), and each
#: build makes the whole code location again (issue 18).
_JOBS_OF_THIS_RUN: dict[tuple[str, str], object] | None = None


@contextlib.contextmanager
def _jobs_built_once():
    """Within the block, :func:`job_of_home` builds each (home, job) once and returns the same job after that."""
    global _JOBS_OF_THIS_RUN
    previous, _JOBS_OF_THIS_RUN = _JOBS_OF_THIS_RUN, {} if _JOBS_OF_THIS_RUN is None else _JOBS_OF_THIS_RUN
    try:
        yield
    finally:
        _JOBS_OF_THIS_RUN = previous


def job_of_home(home: str, job_name: str):
    """The job ``job_name`` of the code location of the release home ``home`` (what :func:`execute_job` runs;
    module-level so that Dagster can reconstruct it). Inside :func:`execute_job` each job is built once."""
    from pipeline.definitions import build_definitions

    if _JOBS_OF_THIS_RUN is not None and (home, job_name) in _JOBS_OF_THIS_RUN:
        return _JOBS_OF_THIS_RUN[(home, job_name)]
    job = build_definitions(Path(home)).resolve_job_def(job_name)
    if _JOBS_OF_THIS_RUN is not None:
        _JOBS_OF_THIS_RUN[(home, job_name)] = job
    return job


def settings_from_options(options: dict) -> dict:
    """The ``settings`` resource config from a command's click options (``input_options`` and the model options);
    options left out (``None``) keep the resource's defaults. See :func:`build_settings_config`."""
    return build_settings_config(
        input_path=options["input_path"],
        input_format=options["input_format"],
        header=options["header"],
        column_names=_split(options["column_names"]),
        delimiter=options["delimiter"],
        quasi_identifiers=_split(options["quasi_identifiers"]),
        sensitive_attributes=_split(options["sensitive_attributes"]),
        ell=options.get("ell") if not isinstance(options.get("ell"), dict) else max(options["ell"].values()),
        ell_per_attribute=options.get("ell") if isinstance(options.get("ell"), dict) else None,
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
        max_value_length=options.get("max_value_length"),
        promote=options.get("promote"),
        max_deleted_share=options.get("max_deleted_share"),
        max_suppressed_share=options.get("max_suppressed_share"),
        engine=options.get("engine"),
        workers=options.get("workers"),
        shard_rows=options.get("shard_rows"),
        min_shard_rows=options.get("min_shard_rows"),
        spark_master=options.get("spark_master"),
        spark_remote=options.get("spark_remote"),
        spark_launch=options.get("spark_launch"),
    )


def write_profile_sidecar(result, home: Path, output: str | None, *, started: float) -> Path:
    """Write the profile of the whole run (every step, publish and audit included) as JSON.

    The manifest's ``profile`` cannot hold the publish step that writes it, nor the audit that
    follows; this sidecar does. Keys: run_id, success, release_id (null when nothing was
    published), command_seconds (this command from start to the end of the run), and the
    ``pipeline.evaluation.profiling.build_profile`` fields (method, process_peak_rss_mb, steps, stages).
    """
    import dagster as dg

    from pipeline.evaluation.profiling import build_profile, current_sampler
    from pipeline.run_events import run_step_windows

    with dg.DagsterInstance.get() as instance:
        windows = run_step_windows(instance, result.run_id)
    sampler = current_sampler()
    if sampler is not None:
        sampler.stop()
    latest = latest_release(home)
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


def report_step_failures(result) -> None:
    """Echo to stderr, for a failed run (``dagster.ExecuteInProcessResult``), each failed step and its error message
    (the messages of this project never hold an input value; :func:`pipeline.failures.step_failures`), except the
    steps a gate stopped: a data-loss refusal (printed as its diagnosis) and Dagster's "blocking asset check failed"
    (each gate is printed as its own line)."""
    from pipeline.core.diagnosis import REFUSAL_ERROR_CLASS
    from pipeline.failures import step_failures

    for failure in step_failures(result):
        if failure.metadata.get("error_class") == REFUSAL_ERROR_CLASS:  # printed as the refusal diagnosis
            continue
        if failure.message.split(":", 1)[0].endswith("DagsterAssetCheckFailedError"):
            continue  # a blocking gate stopped the step: printed as its "gate …: FAILED" line (the sharded job's gates)
        if any(mark in failure.error_text for mark in INTERRUPTED_QUERY_MARKS):
            # Ctrl-C while DuckDB ran a query: DuckDB turns the interrupt into its own error
            click.echo(
                f"  the run was interrupted during step {failure.step} (Ctrl-C, or a signal sent to the process)", err=True
            )
            continue
        click.echo(f"  step {failure.step} failed: {failure.message}", err=True)


#: How a step's error chain reads when Ctrl-C (or SIGINT / SIGTERM) reached DuckDB during a query: DuckDB raises its
#: own error instead of Dagster's interrupt (seen with duckdb 2.0.0 while the IO manager loaded a step's input).
INTERRUPTED_QUERY_MARKS = ("RuntimeError: Query interrupted", "InterruptException: ")


def preflight(config: dict, *, home_option: str | None) -> Path:
    """Check everything that can be checked before Dagster starts; return the release home.

    Reads the input as the job will (:func:`pipeline.io.loading.load_records` with ``ell``, so a
    table that cannot be ℓ-diverse is refused; a sharded release (engine local or spark) only lists its files, its
    staging step reads them once), validates the hierarchies of the (k, ℓ) model,
    and checks that ``<home>/releases`` is a writable directory. Nothing is written but the
    home and ``releases/`` directories (and a probe file, removed at once).

    Raises
    ------
    UnusableInput
        Exit status 2, with the message of the failed check (file, line, column or setting,
        and what to do).
    """
    from pipeline.core.hierarchies import HierarchyError
    from pipeline.io.loading import InfeasibleInput, InputError, load_records
    from pipeline.models import publication_model
    from pipeline.resources import ReleaseSettings

    settings = ReleaseSettings(**config)
    model = publication_model(settings.model)
    try:
        if settings.engine != "memory":
            # a sharded release reads its input once, file by file, in its staging step (which refuses what
            # load_records refuses, the shard plan and an infeasible ℓ with exit status 2): here only the files
            from pipeline.engines.staging import input_files

            input_files(settings.input_path, input_format=settings.input_format)
            # the hierarchy folder (the sharded job is the mixed model's)
            from pipeline.models.mixed import check_hierarchy_folder

            check_hierarchy_folder(settings)
        else:
            loaded = load_records(
                settings.input_path,
                **settings.reading_options(),
                ell=settings.feasibility_ell(),
            )
            model.check_input(settings, loaded.records)
    except InfeasibleInput as error:
        refuse_before_running(f"the table cannot be made {model.guarantee}, nothing is published: {error}")
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
        "confidences cannot be recovered from the release within --confidence-tolerance; raise --min-confidence "
        "(fewer strong rules), lower --ell if it is above 2, add records, or raise --confidence-tolerance if the loss is "
        "acceptable"
    ),
    "sac_released_is_l_diverse": "sac_released_is_l_diverse failed: a SAC~ group is not ℓ-diverse; this is a defect, please report it",
    "attribute_table_is_l_diverse": "attribute_table_is_l_diverse failed: a SID is not ℓ-diverse; this is a defect, please report it",
    "records_accounted_for": "records_accounted_for failed: a record is lost or duplicated; this is a defect, please report it",
    "no_probability_tilt": "no_probability_tilt failed: a SID holds a strong value; this is a defect, please report it",
    "no_certain_attribute_table_cell": (
        "no_certain_attribute_table_cell failed: suppressed attribute-table cells name their value (only a value that "
        "every SID holds is suppressed); drop --residual-policy suppress (the default deletes whole records instead), "
        "or lower --ell if it is above 2"
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


def _threshold_above(share: float) -> float:
    """The smallest whole percentage at or above ``share`` (a fraction), as a fraction: the threshold to suggest."""
    return math.ceil(round(share * 100, 9)) / 100


def utility_failure_explanation(figures: dict) -> str:
    """What the utility gate's refusal means and what to do, from its figures (counts and shares only): which share
    is above which threshold, the option that accepts the loss, and what reduces it.

    Parameters
    ----------
    figures
        The gate's metadata values (``pipeline.core.verification.utility_figures``).
    """
    above = []
    options = []
    deleted, limit = float(figures["deleted_share"]), float(figures["max_deleted_share"])
    if deleted > limit:
        above.append(
            f"{figures['records_deleted']} of {figures['records_eligible']} eligible records would be deleted "
            f"({100 * deleted:.1f} %, above --max-deleted-share {limit:g})"
        )
        options.append(f"--max-deleted-share {_threshold_above(deleted):g}")
    limit = float(figures["max_suppressed_share"])
    cells = figures["attribute_cells"]
    worst = 0.0
    for attribute, share in figures["suppressed_share"].items():
        if float(share) > limit:
            above.append(
                f"{figures['suppressed_cells'][attribute]} of {cells[attribute]} cells of {attribute} would be suppressed "
                f"({100 * float(share):.1f} %, above --max-suppressed-share {limit:g})"
            )
            worst = max(worst, float(share))
    if worst:
        options.append(f"--max-suppressed-share {_threshold_above(worst):g}")
    return (
        f"utility_within_thresholds failed: {'; '.join(above)}. If this loss is acceptable, pass "
        f"{' '.join(options)} (recorded in the manifest and report.html as an override); otherwise reduce it: lower "
        "--ell, raise --min-confidence (fewer strong rules, fewer rule holders to group), or leave out the sensitive "
        "attribute whose dominant values force the deletions"
    )


def gate_failure_explanations(gates, *, diagnosed: bool = False) -> list[str]:
    """One explanation per failed gate that has one (``GATE_FAILURE_EXPLANATIONS``; the utility gate's from its
    figures, :func:`utility_failure_explanation`); with ``diagnosed`` (the refusal diagnosis was printed:
    :func:`print_refusal_diagnosis`) none for the data-loss gates, whose diagnosis says it."""
    from pipeline.core.diagnosis import DATA_LOSS_GATES

    explanations = []
    for evaluation in gates:
        if evaluation.passed or (diagnosed and evaluation.check_name in DATA_LOSS_GATES):
            continue
        if evaluation.check_name == "utility_within_thresholds":
            explanations.append(utility_failure_explanation({k: v.value for k, v in evaluation.metadata.items()}))
        elif evaluation.check_name in GATE_FAILURE_EXPLANATIONS:
            explanations.append(GATE_FAILURE_EXPLANATIONS[evaluation.check_name])
    return explanations


#: Metadata of a gate that the CLI's gate line leaves out: GX's per-expectation details (report.html shows them), the
#: refusal diagnosis and its page (printed as the "why" block, :func:`print_refusal_diagnosis`).
GATE_LINE_OMITS = frozenset({"gx_expectations", "diagnosis", "refusal_report"})


def refusal_diagnoses(gates) -> list[tuple[object, str | None]]:
    """``(Diagnosis, refusal.html path or None)`` of every failed data-loss gate (``DATA_LOSS_GATES``, by name: the
    utility gate included) whose check result carries one (metadata ``diagnosis``, :mod:`checks.refusal`): the whole
    diagnosis written beside refusal.html in the private home, else the redacted one of the metadata."""
    from pipeline.core.diagnosis import DATA_LOSS_GATES, Diagnosis
    from pipeline.reporting.refusal_report import read_diagnosis

    found = []
    for evaluation in gates:
        if evaluation.passed or evaluation.check_name not in DATA_LOSS_GATES or "diagnosis" not in evaluation.metadata:
            continue
        path = evaluation.metadata.get("refusal_report")
        whole = read_diagnosis(Path(str(path.value))) if path is not None else None  # with the rules' values
        try:
            diagnosis = whole or Diagnosis.from_dict(evaluation.metadata["diagnosis"].value)
        except (KeyError, TypeError, ValueError):
            continue
        found.append((diagnosis, str(path.value) if path is not None else None))
    return found


def diagnose_after_run(config: dict, gates, run_id: str, home: Path) -> tuple[object, str | None] | None:
    """The refusal diagnosis computed by the command itself, for a data-loss gate that failed without one in its
    metadata (``utility_within_thresholds`` before it carries one): the input is read again and its rules mined as
    the run did (:func:`pipeline.io.loading.load_records`, :func:`pipeline.core.rules.mine_strong_rules`), the loss
    read from the gates' figures; refusal.html is written to ``<home>/refusals/<run_id>/``. None when no such gate
    failed, or when the input cannot be read again (the gate lines still say what failed)."""
    from pipeline.core.diagnosis import DATA_LOSS_GATES, CandidateLoss, DiagnosisSettings, diagnose
    from pipeline.core.rules import mine_strong_rules, resolve_mining_backend
    from pipeline.io.loading import InputError, load_records
    from pipeline.reporting.refusal_report import write_refusal_report
    from pipeline.resources import ReleaseSettings

    failed = [e.check_name for e in gates if not e.passed and e.check_name in DATA_LOSS_GATES]
    settings = ReleaseSettings(**config)
    if not failed or settings.model == "kl":  # strong rules and SAC~ groups do not shape a (k, ℓ) release
        return None
    figures: dict = {}
    for evaluation in gates:
        figures.update({k: v.value for k, v in evaluation.metadata.items() if k not in GATE_LINE_OMITS})
    attributes = list(settings.sensitive_attributes)
    try:
        records = load_records(settings.input_path, **settings.reading_options()).records
    except (InputError, OSError):
        return None
    n = int(figures.get("records_eligible", len(records)))
    deleted = int(figures.get("records_deleted", figures.get("n_deleted", 0)))
    suppressed = figures.get("suppressed_cells") if isinstance(figures.get("suppressed_cells"), dict) else {}
    cells = figures.get("attribute_cells") if isinstance(figures.get("attribute_cells"), dict) else {}
    backend = resolve_mining_backend(
        settings.mining_backend,
        len(records),
        duckdb_threshold=settings.duckdb_mining_threshold,
        n_items=sum(int(records[a].nunique()) for a in attributes),
    )
    rules = mine_strong_rules(
        records, attributes, min_confidence=settings.min_confidence, backend=backend, min_support=settings.effective_min_support()
    )
    diagnosis = diagnose(
        records,
        rules,
        DiagnosisSettings(
            ell=int(settings.ell),
            min_confidence=float(settings.min_confidence),
            min_support=int(settings.effective_min_support()),
            sensitive_attributes=tuple(attributes),
            confidence_tolerance=float(settings.confidence_tolerance),
            max_deleted_share=getattr(settings, "max_deleted_share", None),
            max_suppressed_share=getattr(settings, "max_suppressed_share", None),
            model=str(settings.model),
        ),
        CandidateLoss(
            n_records=n,
            n_deleted=deleted,
            suppressed_cells={str(a): int(c) for a, c in suppressed.items()},
            attribute_cells={str(a): int(c) for a, c in cells.items()},
            max_confidence_deviation=figures.get("max_confidence_deviation"),
        ),
        gates=failed,
    )
    try:
        path: str | None = str(write_refusal_report(home, run_id, diagnosis))
    except OSError:
        path = None
    return diagnosis, path


def print_refusal_diagnosis(gates, fallback=None) -> bool:
    """Echo to stderr, after the gate lines, why a data-loss gate refused the release and the numbered options
    (:func:`pipeline.core.diagnosis.diagnosis_lines`, in command-line vocabulary), and the path of refusal.html;
    True if a diagnosis was printed (one: the first failed data-loss gate's, with the other gates' last-resort options,
    :func:`pipeline.core.diagnosis.merge_diagnoses`). Without
    one in the metadata, ``fallback()`` (:func:`diagnose_after_run`) may compute it."""
    from pipeline.core.diagnosis import diagnosis_lines, merge_diagnoses

    diagnoses = refusal_diagnoses(gates)
    if not diagnoses and fallback is not None:
        try:
            computed = fallback()
        except Exception:  # noqa: BLE001 - the gate lines and the generic explanation still say what failed
            computed = None
        diagnoses = [computed] if computed is not None else []
    if not diagnoses:
        return False
    diagnosis, path = diagnoses[0]
    for other, _ in diagnoses[1:]:  # the same loss refused by two gates: every threshold in the way is named
        if not set(other.gates) <= set(diagnosis.gates):  # type: ignore[attr-defined]
            diagnosis = merge_diagnoses(diagnosis, other)  # type: ignore[arg-type]
    for line in diagnosis_lines(diagnosis, "cli"):  # type: ignore[arg-type]
        click.echo(f"  {line}", err=True)
    if path is not None:
        click.echo(f"  refusal: {path}", err=True)
    return True


#: errno values of a machine that cannot write: no space left; permission denied, not permitted, read-only.
NO_SPACE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
NOT_WRITABLE_ERRNOS = frozenset({errno.EACCES, errno.EPERM, errno.EROFS})


#: The texts of the errnos above as C libraries print them (DuckDB's ``IO Error: Could not write file "…": No space
#: left on device`` carries no ``[Errno N]``).
_ERRNO_TEXTS = {os.strerror(number): number for number in (*NO_SPACE_ERRNOS, *NOT_WRITABLE_ERRNOS, errno.EIO)}
#: SQLite's texts for the same (the Dagster instance's event log, through SQLAlchemy's ``OperationalError``).
_ERRNO_TEXTS.update({"database or disk is full": errno.ENOSPC, "disk I/O error": errno.EIO})


def _errno_of(failure) -> int | None:
    """The errno of a failed step: from its structured failure's metadata (an asset's ``OSError``); for a failure
    raised outside an asset's body (the warehouse IO manager), which carries no metadata, from the ``[Errno N]`` that
    Python puts in an ``OSError``'s text, or from the errno text in a DuckDB ``IO Error`` or a SQLite
    ``OperationalError`` (the Dagster instance)."""
    if "errno" in failure.metadata:
        return int(failure.metadata["errno"])
    if failure.exit_status is None:
        import re

        found = re.search(r"\[Errno (\d+)\]", failure.error_text)
        if found:
            return int(found.group(1))
        if "IO Error" in failure.error_text or "OperationalError" in failure.error_text:
            return next((number for text, number in _ERRNO_TEXTS.items() if text in failure.error_text), None)
    return None


def machine_advice(number: int | None) -> str:
    """What to do about an errno of the machine (a full disk, a location that cannot be written, an I/O error)."""
    if number in NO_SPACE_ERRNOS:
        return "free space under $MSA_RELEASE_HOME (old releases, the warehouse, the Dagster instance) and retry"
    if number in NOT_WRITABLE_ERRNOS:
        return "make $MSA_RELEASE_HOME, its releases/ and DAGSTER_HOME writable and retry"
    return "the disk reported an error: check it (e.g. dmesg, free space) and retry"


def environment_failure_messages(result) -> list[str]:
    """Plain-language messages for steps that failed on the machine rather than on the data:
    a full disk, a release / warehouse location that cannot be written, or an I/O error (by the failure's errno)."""
    from pipeline.failures import run_failures, step_failures

    messages = []
    for failure in [*step_failures(result), *run_failures(result)]:
        number = _errno_of(failure)
        if number in NO_SPACE_ERRNOS:
            messages.append(
                f"disk full: step {failure.step} ran out of space (No space left on device); nothing was published "
                "and the staging files were removed: free space under $MSA_RELEASE_HOME (old releases, the "
                "warehouse) and retry"
            )
        elif number in NOT_WRITABLE_ERRNOS:
            messages.append(
                f"not writable: step {failure.step} could not write (permission denied or read-only file system); "
                "nothing was published: make $MSA_RELEASE_HOME and its releases/ directory writable and retry"
            )
        elif number is not None:
            messages.append(
                f"I/O error: step {failure.step} failed on the machine ({os.strerror(number)}); nothing was published "
                f"and the staging files were removed: {machine_advice(number)}"
            )
    return list(dict.fromkeys(messages))


def machine_errors() -> tuple[type[BaseException], ...]:
    """The errors of the machine that can reach a command outside a step: ``OSError`` (disk full, I/O error, not
    writable: the release lock, ``releases/LATEST``, the Dagster instance's directories) and the errors of the Dagster
    instance's database (SQLite through SQLAlchemy: ``database or disk is full``, ``disk I/O error``)."""
    import sqlite3

    import sqlalchemy.exc

    return (OSError, sqlite3.Error, sqlalchemy.exc.DBAPIError)


def machine_failure_line(error: BaseException) -> str:
    """One line for an error of :func:`machine_errors`: the cause (errno text and path, or the Dagster instance's
    database error) and what to do. Never echoes an input value (paths and errno texts only)."""
    if isinstance(error, OSError):
        where = f": {error.filename}" if error.filename else ""
        return f"{error.strerror or type(error).__name__}{where}; {machine_advice(error.errno)}"
    reason = str(getattr(error, "orig", None) or error).splitlines()[0]
    number = errno.ENOSPC if "full" in reason else errno.EIO
    return (
        f"the Dagster instance in {os.environ.get('DAGSTER_HOME', '$DAGSTER_HOME')} could not be written ({reason}); "
        f"{machine_advice(number)}"
    )


def machine_advice_after_publish(result) -> list[str]:
    """For a run whose release IS published but a later step failed on the machine (e.g. the audit could not write
    the warehouse): what to do, one line per cause."""
    from pipeline.failures import step_failures

    lines = []
    for failure in step_failures(result):
        number = _errno_of(failure)
        if number is not None:
            lines.append(f"step {failure.step} failed on the machine ({os.strerror(number)}): {machine_advice(number)}")
    return list(dict.fromkeys(lines))
