"""Jobs, the weekly release schedule and the inbox sensor of the code location.

Jobs select assets by group (``ingest``, ``mining``, ``mixed_model``, ``rating``, ``rating_model``, ``kl_model``,
``release``, ``evaluation``) and, where a group serves several jobs (``release`` holds the
publish assets of every model, ``evaluation`` the audits, the experiments and the attacks), by
asset key:

- ``release``: the mixed model, its gates, publish, audit of the published release;
- ``rating_release``: the plain Rating baseline, its gates, publish, audit of the published release;
- ``kl_release``: the (k, ℓ) model, its gates and publish;
- ``evaluation``: P1 §6 experiments; ``attacks``: the attack evaluation.

Each publishing job's run config keeps the shape ``{"resources": {"settings": {"config": {...}}}}`` but takes only
the settings of its model (:func:`job_settings_mapping`, a job-level ``ConfigMapping``): the launchpad shows
those, and a bad value (``ell: 1``, ``min_confidence: 1.5``, k < ℓ) or another model's setting (``k`` for
``release``) is a config error before a run exists.

``release_schedule`` runs the mixed model's default job, ``sharded_release`` on engine ``local``, weekly (cron from ``$MSA_RELEASE_SCHEDULE_CRON``, default
Monday 03:00; timezone ``$MSA_RELEASE_SCHEDULE_TIMEZONE``, default UTC); it is stopped until
someone starts it in the UI (Automation) or with ``dagster schedule start``. Its run config is the YAML file
``$MSA_RELEASE_SCHEDULE_CONFIG`` or ``$MSA_RELEASE_HOME/schedule.yaml`` when there is one (its ``model`` and ``engine``
pick the job: :func:`pipeline.models.job_and_settings`), checked when the code location loads (:func:`schedule_run_config`); else the launchpad's defaults.

``inbox_sensor`` watches ``$MSA_RELEASE_HOME/inbox/``: a new or changed ``.csv`` / ``.parquet``
file triggers one release run with that file as input. The run key is the file's SHA-256 and a digest
of the run's settings, so the same content with the same settings never triggers twice, whatever its
name, while the same bytes with other settings run again. Settings come from ``inbox/settings.json`` (any
setting of the chosen model, e.g. quasi_identifiers, sensitive_attributes, ell, model) and, for one
file, ``<file name>.settings.json`` beside it; the ``model`` and ``engine`` settings pick the job
(:func:`pipeline.models.job_of_settings`): the mixed model runs ``sharded_release`` on engine ``local`` unless the
settings say ``"engine": "memory"`` (the in-memory ``release`` job) or ``"spark"``; ``rating`` runs
``rating_release``, ``kl`` runs ``kl_release``. A setting of
another model in ``settings.json`` is left out for the file (``min_confidence`` there serves the mixed files, not
a kl file); in the file's own settings it makes them unusable (``seed`` beside ``"model": "kl"``).

The sensor creates the inbox (0700) when it is missing. Once every run of a file is over, the next tick moves it to
``inbox/processed/`` (a run published it) or ``inbox/failed/``, with a ``<name>.result.json`` sidecar (run id, status,
reason, release); a file whose run is queued, running or waiting for Dagster's retry stays (:func:`inbox_file_outcome`,
:func:`set_aside`). The sensor never looks into those folders.

Write-then-rename: a file is written under a name the sensor ignores (starting with ``.`` or ending in
``.part`` / ``.tmp``) and renamed to its ``.csv`` / ``.parquet`` name once complete. Files changed
within the settle time (``$MSA_RELEASE_INBOX_SETTLE_SECONDS``, default 10 s), unreadable, truncated (a
Parquet file without its footer) or with unusable settings are skipped with a reason in the sensor's
log, and looked at again at the next tick. Symbolic links and anything that is not a regular file
directly inside the inbox are refused (skipped, named in the log; no run).

Runs are queued, not failed on the release lock: every job carries the tag ``msa_release/release_lock``,
which the run queue of the instance's ``dagster.yaml`` (:data:`pipeline.cli.common.DAGSTER_YAML`) lets
through one at a time; an inbox run also waits for the release lock (``lock_wait_seconds``) in case
something outside the queue holds it. A run whose worker died (SIGKILL, out of memory, a timeout) is
marked failed at the next tick (:func:`pipeline.run_events.fail_orphaned_runs`) and Dagster's run
retries re-run it from the start, at most ``$MSA_RELEASE_INBOX_MAX_RETRIES`` times (default 3; Dagster's
retry tags on the run and its engine events in the UI say why); a run that failed on the data (a gate,
unusable input) is not retried: drop a corrected file. The step that reads the input (``raw_records``, or
``sharded_input`` of ``sharded_release``) checks that the file it reads is the one the tick hashed (tag
``msa_release/input_sha256``).
"""

from __future__ import annotations

import hashlib
import json
import os
import socket
import stat
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg
from pydantic import ValidationError

from assets.publish import job_assets
from assets.sharded import SHARDED_GROUP, remove_staging_on_failure
from assets.sharded_pipes import SPARK_PIPES_JOB, spark_shard_release
from pipeline.errors import UnusableInputError
from pipeline.models import (
    PUBLICATION_MODELS,
    PublicationModel,
    IN_MEMORY_ENGINE,
    SHARDED_JOBS,
    SHARDED_RELEASE_JOB,
    default_engine,
    job_and_settings,
    job_of_model,
    job_of_settings,
    models_of_job,
    settings_not_of_job,
    settings_of_job,
)
from pipeline.models import jobs as publishing_jobs
from pipeline.resources import (  # the Adult example's settings, re-exported where the jobs apply them
    ADULT_EXAMPLE_INPUT,
    ADULT_EXAMPLE_SETTINGS,
    NULL_MEANS_DEFAULT,
    ReleaseSettings,
    ReleaseStore,
    adult_example_settings,
)
from pipeline.run_events import (
    HOST_TAG,
    INPUT_SHA256_TAG,
    fail_orphaned_runs,
    release_run_tags,
    remind_missed_retries,
)
from pipeline.warehouse import LOCK_WAIT_TAG
from pipeline.settings import SHARDING_SETTINGS, Model

__all__ = [
    "ATTACKS_JOB_SELECTION",
    "InboxOutcome",
    "ScheduleConfigError",
    "create_inbox",
    "inbox_file_outcome",
    "schedule_run_config",
    "set_aside",
    "validate_schedule_config",
    "DEFAULT_SCHEDULE_CRON",
    "EVALUATION_JOB_SELECTION",
    "INBOX_SETTINGS",
    "KL_RELEASE_JOB_SELECTION",
    "RATING_RELEASE_JOB_SELECTION",
    "RELEASE_JOB_SELECTION",
    "JobSettings",
    "ADULT_EXAMPLE_SETTINGS",
    "RELEASE_LOCK_TAG",
    "ReleaseWiring",
    "SettingsConfigMapping",
    "adult_example_settings",
    "attacks_job",
    "build_inbox_sensor",
    "build_release_schedule",
    "build_release_wiring",
    "evaluation_job",
    "plan_job",
    "PLAN_JOB_SELECTION",
    "inbox_file_settings",
    "inbox_run_request",
    "inbox_sensor",
    "job_settings_mapping",
    "kl_release_job",
    "SHARDED_RELEASE_JOB_SELECTION",
    "sharded_release_job",
    "spark_pipes_job",
    "settings_digest",
    "rating_release_job",
    "release_job",
]

#: Descriptions of the built-in publishing jobs (a plug-in's job gets one from its model).
JOB_DESCRIPTIONS = {
    "release": 'The mixed model in memory (engine memory: run with `msa-release run --engine memory`, or "engine": '
    '"memory" in the inbox/schedule settings; the default is sharded_release): raw table -> strong rules -> SAC/IR '
    "-> SAC~ + IDT/AT -> gates -> published release (release.duckdb) -> audit.",
    "rating_release": "Plain Rating baseline (P1 §6, SPEC §7; what `msa-release run --model rating`, the schedule and "
    "the inbox run for model rating): raw table -> strong rules (for the gates) -> SIDs of every record -> IDT/AT -> "
    "gates -> published release -> audit.",
    SHARDED_RELEASE_JOB: "The mixed model released shard by shard (issue 17), the DEFAULT job of the mixed model: what "
    "`msa-release run`, the schedule and the inbox sensor run unless the settings say engine memory. Engine local "
    "(default) or spark: input staged in private shards -> global strong rules, S_max, clusters -> shard releases -> "
    "gates on the per-shard summary -> published part files -> audit. A table of up to shard_rows records is one "
    "shard: the in-memory release's tables, byte for byte.",
    "kl_release": "(k, ℓ)-anonymity (P2; what `msa-release run --model kl`, the schedule and the inbox run for model "
    "kl): raw table -> hierarchies -> equivalence classes of >= k records with Diverse >= ℓ -> gates -> published "
    "release.",
}


#: Tag of every job of the code location (they all hold the release lock of the home while they run): the run queue
#: of the instance (``dagster.yaml``: ``run_queue.tag_concurrency_limits``) starts one such run at a time and keeps the
#: others QUEUED, so runs launched together (inbox files, the schedule, the launchpad) wait instead of failing on the lock.
RELEASE_LOCK_TAG = "msa_release/release_lock"
RELEASE_LOCK_TAGS = {RELEASE_LOCK_TAG: "home"}


@dataclass(frozen=True)
class ReleaseWiring:
    """What the factory generates from the model registry: per publishing job its assets, selection and job."""

    assets: dict[str, list[dg.AssetsDefinition]]
    selections: dict[str, dg.AssetSelection]
    jobs: dict[str, dg.UnresolvedAssetJobDefinition]

    def all_assets(self) -> list[dg.AssetsDefinition]:
        """Every generated asset (candidate and publish asset of every job)."""
        return [asset for assets in self.assets.values() for asset in assets]


def job_selection(owner: PublicationModel, generated: list[dg.AssetsDefinition]) -> dg.AssetSelection:
    """A publishing job's assets: the owner's stage groups and its generated candidate, publish and (when the model
    is ``audited``) audit assets."""
    keys = [key for asset in generated for key in asset.keys]
    return dg.AssetSelection.groups(*owner.stage_groups) | dg.AssetSelection.assets(*keys)


def build_release_wiring() -> ReleaseWiring:
    """Generate every publishing job from the registry (:func:`pipeline.models.jobs`): its candidate and publish
    assets (``assets/publish.py``), its asset selection and its job (in-process executor: DuckDB has one writer),
    whose run config holds the settings of its model(s) only (:func:`job_settings_mapping`)."""
    assets, selections, jobs = {}, {}, {}
    for job, models in publishing_jobs().items():
        owner = models[0]
        assets[job] = job_assets(job, models)
        selections[job] = job_selection(owner, assets[job])
        names = " / ".join(m.name for m in models)
        jobs[job] = dg.define_asset_job(
            name=job,
            selection=selections[job],
            executor_def=dg.in_process_executor,
            tags=RELEASE_LOCK_TAGS,
            config=job_settings_mapping(job, models),
            description=JOB_DESCRIPTIONS.get(job, f"Publishes model {names} ({owner.source}; {owner.docs})."),
        )
    return ReleaseWiring(assets=assets, selections=selections, jobs=jobs)


# --------------------------------------------------------------------------- run config of a publishing job

#: Where the settings sit in a run config (the shape every caller uses: CLI, inbox sensor, schedule, tests).
SETTINGS_PATH = ("resources", "settings", "config")


def _settings_error(job: str, problems: list[tuple[str | None, str]], config: object) -> dg.DagsterInvalidConfigError:
    """A config error of job ``job`` with one entry per ``(setting or None, message)``, at the setting's path
    (``root:resources:settings:config:<setting>``), as Dagster reports its own schema errors."""
    from dagster._config.errors import DagsterEvaluationErrorReason, EvaluationError
    from dagster._config.stack import EvaluationStackEntry, EvaluationStackPathEntry, EvaluationStackRoot
    from dagster._utils.error import SerializableErrorInfo

    errors = []
    for name, message in problems:
        stack: EvaluationStackEntry = EvaluationStackRoot()
        for part in (*SETTINGS_PATH, *([name] if name else [])):
            stack = EvaluationStackPathEntry(parent=stack, field_name=part)
        errors.append(
            EvaluationError(
                stack=stack,
                reason=DagsterEvaluationErrorReason.FAILED_POST_PROCESSING,
                message=message,
                error_data=SerializableErrorInfo(message=message, stack=[], cls_name=None),
            )
        )
    return dg.DagsterInvalidConfigError(f"Error in config for job {job}", errors, config)


def _allowed_range(name: str) -> str:
    """The bounds of setting ``name`` as text (``2 <= ell <= 1000``), or '' when it has none."""
    field = ReleaseSettings.model_fields.get(name)
    if field is None:
        return ""
    lower = upper = ""
    for bound in field.metadata:
        for attribute, template in (("ge", "{} <= "), ("gt", "{} < "), ("le", " <= {}"), ("lt", " < {}")):
            value = getattr(bound, attribute, None)
            if value is not None:
                if attribute in ("ge", "gt"):
                    lower = template.format(value)
                else:
                    upper = template.format(value)
    return f"{lower}{name}{upper}" if lower or upper else ""


def _settings_of(config: object) -> Mapping[str, Any] | None:
    """The ``settings`` config of a run config, or None when the run config does not have that shape."""
    for key in SETTINGS_PATH:
        if not isinstance(config, Mapping):
            return None
        config = config.get(key) or {}
    return config if isinstance(config, Mapping) else None


@dataclass(frozen=True)
class JobSettings:
    """The config function of a publishing job's :class:`SettingsConfigMapping`: checks the settings a run gives
    with the settings' own validation (pydantic's bounds, the choices, the chosen model's :meth:`parameters`, e.g.
    k >= ℓ), so that a bad value is a config error before a run exists, and hands them on with ``model`` set.

    Attributes
    ----------
    job
        The job's name.
    models
        The models it publishes (the first one is the default).
    """

    job: str
    models: tuple[PublicationModel[Any], ...]

    def refuse_settings_of_other_models(self, config: object) -> None:
        """Refuse settings that this job does not read, naming the model and job that read each, and a ``model``
        that another job publishes (Dagster's own message for an unexpected key names neither).

        Raises
        ------
        dagster.DagsterInvalidConfigError
        """
        settings = _settings_of(config)
        if settings is None:
            return  # not a mapping: the schema's own validation says what is wrong
        problems: list[tuple[str | None, str]] = list(settings_not_of_job(self.job, settings).items())
        if self.job in SHARDED_JOBS and str(settings.get("engine")) == IN_MEMORY_ENGINE:
            problems.append(
                (
                    "engine",
                    f"engine: {IN_MEMORY_ENGINE} is the in-memory job {job_of_model(SHARDED_JOBS[self.job])}, not "
                    f"{self.job}: set engine local or spark here, or run {job_of_model(SHARDED_JOBS[self.job])}",
                )
            )
        chosen = settings.get("model")
        other = PUBLICATION_MODELS.get(str(chosen)) if chosen is not None else None
        if other is not None and other not in self.models:
            published = ", ".join(model.name for model in self.models)
            problems.append(("model", f"model: {other.name} is published by job {other.job}, not by {self.job} ({published})"))
        if problems:
            raise _settings_error(self.job, problems, config)

    def __call__(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """The run config of the job's assets from the run config given (the same shape; ``model`` set to the
        chosen model, unless its name is not a choice of the settings' ``model`` enum).

        Raises
        ------
        dagster.DagsterInvalidConfigError
            A setting out of its range or refused by the settings' or the model's checks; each error names the
            setting (its path) and says what is allowed.
        """
        given = dict(_settings_of(config) or {})
        chosen = next((m for m in self.models if m.name == str(given.get("model") or "")), self.models[0])
        settings = {key: value for key, value in given.items() if key != "model"}
        settings.update(adult_example_settings(chosen.name, settings))
        # a setting left null (not set) for a model without an Adult example value keeps the settings' default
        settings = {key: value for key, value in settings.items() if value is not None or key not in NULL_MEANS_DEFAULT}
        if chosen.name in {choice.value for choice in Model}:
            settings["model"] = chosen.name
        if self.job not in SHARDED_JOBS:  # the job is the engine (its schema has no engine setting)
            settings["engine"] = IN_MEMORY_ENGINE
        try:
            chosen.parameters(ReleaseSettings(**settings))
        except ValidationError as error:
            problems: list[tuple[str | None, str]] = []
            for entry in error.errors():
                location = [str(part) for part in entry.get("loc", ())]
                name = location[0] if location else None
                message = str(entry.get("msg", "invalid value")).removeprefix("Value error, ")
                allowed = _allowed_range(name) if name else ""
                text = f"{'.'.join(location)}: {message}" if location else message
                problems.append((name, f"{text} (allowed: {allowed})" if allowed else text))
            raise _settings_error(self.job, problems, config) from error
        except ValueError as error:
            raise _settings_error(self.job, [(None, str(error))], config) from error
        resources = dict(config.get("resources") or {})
        resources["settings"] = {"config": settings}
        return {**config, "resources": resources}


class SettingsConfigMapping(dg.ConfigMapping):
    """A job-level :class:`dagster.ConfigMapping` whose config function is a :class:`JobSettings`: before Dagster
    validates the run config against the job's schema, settings of another model are refused with a message
    naming that model and its job (Dagster's message for an unexpected key would only name the key). The UI's
    webserver checks the schema snapshot before it asks the code server, so there Dagster's own message shows.

    ``resolve_from_unvalidated_config`` is not a public Dagster method (1.13: ``ResolvedRunConfig.build`` calls it);
    ``tests/test_config_schema.py`` fails if a Dagster upgrade stops calling it."""

    def resolve_from_unvalidated_config(self, config: Any) -> Any:
        """Refuse settings of other models (:meth:`JobSettings.refuse_settings_of_other_models`), then validate
        against the schema and map (Dagster's own method)."""
        if isinstance(self.config_fn, JobSettings):
            self.config_fn.refuse_settings_of_other_models(config)
        return super().resolve_from_unvalidated_config(config)


def job_settings_mapping(job: str, models: tuple[PublicationModel[Any], ...]) -> SettingsConfigMapping:
    """The run config schema of publishing job ``job``: today's shape, ``{"resources": {"settings": {"config":
    {...}}}}``, whose settings are only those its models read (:func:`pipeline.models.settings_of_job`), each
    with the description, default and choices of :class:`pipeline.resources.ReleaseSettings`; ``model`` takes
    only the job's models (default: the first). Other resources' config, ``loggers``, ``execution`` and ``ops`` are
    passed on and checked against the job's own schema.

    The Dagster launchpad checks this schema as you type (unknown settings, choices, types); the bounds, the
    cross-field checks (k >= ℓ) and the messages naming another model's setting run in the config function
    (:class:`JobSettings`), which Dagster calls when it builds the run's execution plan: before a run exists
    (``dagster.validate_run_config``, ``execute_job``, the launchpad's Launch button).
    """
    every = ReleaseSettings.to_config_schema().config_type.fields
    wanted = set(settings_of_job(job))
    fields: dict[str, dg.Field] = {name: every[name] for name in every if name in wanted}
    for name, value in ADULT_EXAMPLE_SETTINGS.get(models[0].name, {}).items():  # null: not set (the Adult example's)
        if name in fields:
            fields[name] = dg.Field(
                dg.Noneable(fields[name].config_type),
                default_value=None,
                is_required=False,
                description=f"{fields[name].description} Null (not set): {ReleaseSettings.model_fields[name].default}, "
                f"or {value} for the Adult example (input_path left at {ADULT_EXAMPLE_INPUT}), whose default release "
                "needs it (README, 'The utility gate').",
            )
    if "engine" in fields:  # a sharded job: not set means the model's default engine (local), shown as such
        fields["engine"] = dg.Field(
            fields["engine"].config_type.inner_type,
            default_value=default_engine(models[0].name),
            is_required=False,
            description=fields["engine"].description,
        )
    names = [model.name for model in models]
    fields["model"] = dg.Field(
        dg.Enum(f"{job}_model", [dg.EnumValue(name) for name in names]),
        default_value=names[0],
        description=f"Publication model of the `{job}` job: {', '.join(names)} (set by the job; "
        "the other models have jobs of their own).",
    )
    settings = dg.Shape(fields, description=f"Settings of model {', '.join(names)}: {models[0].source}; {models[0].docs}.")
    resources = dg.Permissive(
        {"settings": dg.Field(dg.Shape({"config": dg.Field(settings, is_required=False)}), is_required=False)}
    )
    schema = dg.Shape(
        {
            "resources": dg.Field(resources, is_required=False),
            "loggers": dg.Field(dg.Permissive(), is_required=False),
            "execution": dg.Field(dg.Permissive(), is_required=False),
            "ops": dg.Field(dg.Permissive(), is_required=False),
        }
    )
    return SettingsConfigMapping(config_fn=JobSettings(job, models), config_schema=schema, receive_processed_config_values=False)


#: The wiring of the built-in models (the code location rebuilds it from the registry, plug-ins included).
RELEASE_WIRING = build_release_wiring()
#: The ``release`` job: mixed model stages, the gated publish and the audit.
RELEASE_JOB_SELECTION = RELEASE_WIRING.selections["release"]
#: The ``rating_release`` job: plain Rating stages, the gated publish and the audit.
RATING_RELEASE_JOB_SELECTION = RELEASE_WIRING.selections["rating_release"]
#: The ``kl_release`` job: the (k, ℓ) stages and its gated publish.
KL_RELEASE_JOB_SELECTION = RELEASE_WIRING.selections["kl_release"]
#: The ``evaluation`` job (P1 §6 experiments) and the ``attacks`` job.
EVALUATION_JOB_SELECTION = dg.AssetSelection.groups("ingest") | dg.AssetSelection.key_prefixes("evaluation")
ATTACKS_JOB_SELECTION = dg.AssetSelection.groups("ingest") | dg.AssetSelection.key_prefixes("attacks")

release_job = RELEASE_WIRING.jobs["release"]
rating_release_job = RELEASE_WIRING.jobs["rating_release"]
kl_release_job = RELEASE_WIRING.jobs["kl_release"]

#: The ``sharded_release`` job (issue 17): the mixed model shard by shard, its gates on the S-row summary, publish.
SHARDED_RELEASE_JOB_SELECTION = dg.AssetSelection.groups(SHARDED_GROUP)


def build_sharded_release_job() -> dg.UnresolvedAssetJobDefinition:
    """The ``sharded_release`` job: in-process executor (DuckDB has one writer; the engine parallelises the shards
    itself), the release lock's tag, and a run config of the mixed model's settings plus the sharding settings
    (:func:`job_settings_mapping`)."""
    return dg.define_asset_job(
        name=SHARDED_RELEASE_JOB,
        selection=SHARDED_RELEASE_JOB_SELECTION,
        executor_def=dg.in_process_executor,
        tags=RELEASE_LOCK_TAGS,
        config=job_settings_mapping(SHARDED_RELEASE_JOB, models_of_job(SHARDED_RELEASE_JOB)),
        description=JOB_DESCRIPTIONS[SHARDED_RELEASE_JOB],
        hooks={remove_staging_on_failure},  # a refused or failed run's private staging is removed
    )


sharded_release_job = build_sharded_release_job()

#: The standalone Spark job launched through Dagster Pipes (``assets/sharded_pipes.py``): the asset
#: ``spark_shard_release`` and its blocking gate checks, on a PRIVATE shard job file someone staged (run config
#: ``ops.spark_shard_release.config.job_file``). Publishes nothing; holds the release lock like every job.
spark_pipes_job = dg.define_asset_job(
    name=SPARK_PIPES_JOB,
    selection=dg.AssetSelection.assets(spark_shard_release),
    executor_def=dg.in_process_executor,
    tags=RELEASE_LOCK_TAGS,
    description="Release the shards of a staged sharded run (its PRIVATE shard job file, written by "
    "pipeline.engines.spark_job.write_job) on Apache Spark through Dagster Pipes (resource pipes_subprocess_client); "
    "the reduced gates come back as blocking asset checks. Publishes nothing: sharded_release publishes.",
)

attacks_job = dg.define_asset_job(
    name="attacks",
    selection=ATTACKS_JOB_SELECTION,
    executor_def=dg.in_process_executor,
    tags=RELEASE_LOCK_TAGS,
    description="P2's join attack and the one-known-value attack on four releases (naive per-attribute, (k, ℓ), "
    "mixed, Rating) of the configured table, with their utility; writes $MSA_RELEASE_HOME/attacks/ (or its output_dir).",
)

#: The planning advisor's job: the ``release_plan`` asset only (it reads the input itself and writes nothing to the
#: warehouse; the code location's IO manager still holds the release lock for the run, hence the lock tag).
PLAN_JOB_SELECTION = dg.AssetSelection.assets("release_plan")

plan_job = dg.define_asset_job(
    name="plan",
    selection=PLAN_JOB_SELECTION,
    executor_def=dg.in_process_executor,
    tags=RELEASE_LOCK_TAGS,
    description="Planning advisor: predict, for several ℓ and min_confidence values, what the configured model's "
    "release job would delete, suppress and refuse (msa-release plan); publishes nothing.",
)

evaluation_job = dg.define_asset_job(
    name="evaluation",
    selection=EVALUATION_JOB_SELECTION,
    executor_def=dg.in_process_executor,
    tags=RELEASE_LOCK_TAGS,
    description="P1 §6 experiments (Figures 1-11) on the configured table: Rating vs the mixed model; writes $MSA_RELEASE_HOME/experiments/ (or its output_dir).",
)

# --------------------------------------------------------------------------- schedule

#: Every Monday at 03:00.
DEFAULT_SCHEDULE_CRON = "0 3 * * 1"


def schedule_cron_and_timezone(cron: str | None = None, timezone: str | None = None) -> tuple[str, str]:
    """The release schedule's cron expression and time zone: as given, else ``$MSA_RELEASE_SCHEDULE_CRON`` /
    ``$MSA_RELEASE_SCHEDULE_TIMEZONE``, else the defaults (:data:`DEFAULT_SCHEDULE_CRON`, UTC), validated.

    Raises
    ------
    ValueError
        The cron expression or the time zone (an IANA name such as ``Europe/Zurich``) is not valid; the message names
        the variable to fix.
    """
    import zoneinfo

    from dagster._utils.schedules import is_valid_cron_string

    cron = (cron or os.environ.get("MSA_RELEASE_SCHEDULE_CRON") or DEFAULT_SCHEDULE_CRON).strip()
    timezone = (timezone or os.environ.get("MSA_RELEASE_SCHEDULE_TIMEZONE") or "UTC").strip()
    if not is_valid_cron_string(cron):
        raise ValueError(
            f"MSA_RELEASE_SCHEDULE_CRON={cron!r} is not a valid cron expression "
            "(five fields: minute hour day-of-month month day-of-week, e.g. '0 3 * * 1')"
        )
    try:
        zoneinfo.ZoneInfo(timezone)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError) as error:
        raise ValueError(
            f"MSA_RELEASE_SCHEDULE_TIMEZONE={timezone!r} is not a time zone (an IANA name, e.g. 'UTC' or 'Europe/Zurich')"
        ) from error
    return cron, timezone


#: The schedule's run config: ``$MSA_RELEASE_SCHEDULE_CONFIG`` names a YAML file, else ``<home>/schedule.yaml`` if present.
SCHEDULE_CONFIG_VARIABLE, SCHEDULE_CONFIG_FILE = "MSA_RELEASE_SCHEDULE_CONFIG", "schedule.yaml"


class ScheduleConfigError(UnusableInputError, ValueError):
    """The schedule's run config file cannot be used (exit status 2): the message names the file and the key, and what
    to do."""


def _config_key(path: tuple[str, ...], message: str) -> str:
    """The dotted key of a config error (``resources.settings.config.ell``); an unexpected entry's own name is added."""
    import re

    unexpected = re.search(r'unexpected config entr(?:y|ies) "([^"]+)"', message)
    return ".".join([*path, *([unexpected.group(1)] if unexpected else [])]) or "(the whole file)"


def _stack_path(stack: Any) -> tuple[str, ...]:
    names = []
    while stack is not None:
        name = getattr(stack, "field_name", None)
        if name is not None:
            names.append(str(name))
        stack = getattr(stack, "parent", None)
    return tuple(reversed(names))


def validate_schedule_config(config: object, *, source: str) -> tuple[str, dict[str, Any]]:
    """Check a run config for the schedule against the schema of the job its ``model`` selects, as the launchpad and
    Dagster would at launch: settings of another model, unknown keys, types, then the bounds and cross-field checks
    (:class:`JobSettings`).

    Parameters
    ----------
    config
        The parsed YAML: ``{"resources": {"settings": {"config": {...}}}}``, as the launchpad's editor holds it.
    source
        The file's path, named in every error.

    Returns
    -------
    (job name, run config)
        The job of the settings' ``model`` and ``engine`` (:func:`pipeline.models.job_and_settings`:
        ``sharded_release`` on engine local when neither is set) and the run config as given (without ``engine:
        memory``, which chose the in-memory job).

    Raises
    ------
    ScheduleConfigError
        Naming ``source``, each key (dotted path) and what is wrong.
    """
    from dagster._config import process_config

    if not isinstance(config, Mapping) or _settings_of(config) is None:
        raise ScheduleConfigError(
            f"{source}: not a run config; write it as the launchpad shows it: 'resources: settings: config:' and the "
            "settings under it (input_path, quasi_identifiers, …)"
        )
    given = _settings_of(config) or {}
    try:
        job_name, settings = job_and_settings(given)
    except KeyError as error:
        raise ScheduleConfigError(f"{source}: resources.settings.config.model: {error.args[0]}") from None
    if settings != given:  # "engine: memory" chose the in-memory job, whose run config has no engine setting
        resources = dict(config["resources"])
        config = {**config, "resources": {**resources, "settings": {**dict(resources["settings"]), "config": settings}}}
    mapping = job_settings_mapping(job_name, models_of_job(job_name))
    job_settings = JobSettings(job_name, models_of_job(job_name))
    problems: list[str] = []
    try:
        job_settings.refuse_settings_of_other_models(config)
    except dg.DagsterInvalidConfigError as error:
        problems += [f"{_config_key(_stack_path(e.stack), e.message)}: {e.message}" for e in error.errors]
    if not problems:
        evaluated = process_config(mapping.config_schema.config_type, config)
        for entry in evaluated.errors or []:
            message = entry.message.split(' Expected: "', 1)[0]
            problems.append(f"{_config_key(_stack_path(entry.stack), message)}: {message}")
    if not problems:
        try:
            job_settings(dict(config))
        except dg.DagsterInvalidConfigError as error:
            problems += [f"{_config_key(_stack_path(e.stack), e.message)}: {e.message}" for e in error.errors]
    if problems:
        raise ScheduleConfigError(
            f"{source}: the schedule's run config for job {job_name} is not valid: " + "; ".join(problems) + f"; fix "
            f"the key(s) in the file (or unset {SCHEDULE_CONFIG_VARIABLE} / remove the file to run the launchpad's defaults)"
        )
    return job_name, dict(config)


def schedule_run_config(home: Path | str) -> tuple[str, dict[str, Any], Path] | None:
    """The schedule's configured run: ``$MSA_RELEASE_SCHEDULE_CONFIG`` (a YAML file; it must exist), else
    ``<home>/schedule.yaml`` when present, read and checked by :func:`validate_schedule_config`; None when neither is
    set (the schedule then runs the default job, ``sharded_release`` on engine local, with the launchpad's defaults).

    Returns
    -------
    (job name, run config, file) or None

    Raises
    ------
    ScheduleConfigError
        The file is missing (named by the variable), unreadable, not YAML, or not a valid run config; the message
        names the file and the key.
    """
    import yaml

    named = os.environ.get(SCHEDULE_CONFIG_VARIABLE, "").strip()
    path = Path(named).expanduser() if named else Path(home) / SCHEDULE_CONFIG_FILE
    if not named and not path.exists():
        return None
    where = f"{path} ({SCHEDULE_CONFIG_VARIABLE})" if named else str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        reason = getattr(error, "strerror", None) or error
        raise ScheduleConfigError(f"{where}: cannot read the schedule's run config ({reason}); fix or unset it") from None
    try:
        config = yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        line = f" at line {mark.line + 1}" if mark is not None else ""
        raise ScheduleConfigError(f"{where}: not valid YAML{line}; fix the file") from None
    job_name, run_config = validate_schedule_config(config, source=where)
    return job_name, run_config, path


def build_release_schedule(
    cron: str | None = None,
    timezone: str | None = None,
    *,
    job: dg.UnresolvedAssetJobDefinition | None = None,
    run_config: Mapping[str, Any] | None = None,
    config_file: Path | None = None,
) -> dg.ScheduleDefinition:
    """The schedule that runs ``job`` (default: the default model's default job, ``sharded_release`` on engine local) with ``run_config`` (:func:`schedule_run_config`), or with the
    launchpad's default settings when there is none;
    tagged with the run's settings (:func:`pipeline.run_events.release_run_tags`).

    Parameters
    ----------
    cron
        Cron expression; default ``$MSA_RELEASE_SCHEDULE_CRON``, else ``DEFAULT_SCHEDULE_CRON``.
    timezone
        IANA timezone of the cron; default ``$MSA_RELEASE_SCHEDULE_TIMEZONE``, else UTC.
    job
        The job to run (default: ``sharded_release``); with ``run_config``, the job of its ``model`` and ``engine``.
    run_config, config_file
        The configured run (already checked) and the file it came from (named in the description and a tag).

    Returns
    -------
    dagster.ScheduleDefinition
        Named ``release_schedule``, stopped by default (start it in the UI).

    Raises
    ------
    ValueError
        The cron expression is not valid (the message names the variable to fix).
    """
    cron, timezone = schedule_cron_and_timezone(cron, timezone)
    job = job if job is not None else sharded_release_job
    what = f"the run config of {config_file}" if config_file is not None else "the launchpad's default settings"
    return dg.ScheduleDefinition(
        name="release_schedule",
        job=job,
        cron_schedule=cron,
        execution_timezone=timezone,
        run_config=dict(run_config) if run_config is not None else None,
        default_status=dg.DefaultScheduleStatus.STOPPED,
        tags={
            "msa_release/trigger": "schedule",
            **release_run_tags(((run_config or {}).get("resources", {}).get("settings", {}) or {}).get("config", {}) or {}),
            **({"msa_release/schedule_config": config_file.name} if config_file is not None else {}),
        },
        description=f"Runs the `{job.name}` job ({cron}, {timezone}) with {what}. Set MSA_RELEASE_SCHEDULE_CRON / "
        f"MSA_RELEASE_SCHEDULE_TIMEZONE to change when, $MSA_RELEASE_HOME/{SCHEDULE_CONFIG_FILE} or "
        f"{SCHEDULE_CONFIG_VARIABLE} what; stopped until started.",
    )


# --------------------------------------------------------------------------- inbox sensor

INBOX = "inbox"
#: Settings of every inbox file (any ReleaseSettings key).
INBOX_SETTINGS = "settings.json"
#: Suffix of a per-file settings file: ``<file name>.settings.json``.
FILE_SETTINGS_SUFFIX = ".settings.json"
DATA_SUFFIXES = {".csv": "csv", ".parquet": "parquet"}
#: Write-then-rename: a file being written carries one of these suffixes (or starts with ``.``) until it is renamed.
IN_PROGRESS_SUFFIXES = (".part", ".tmp")
DEFAULT_SETTLE_SECONDS = 10.0
#: How often the daemon evaluates the inbox (``$MSA_RELEASE_INBOX_INTERVAL_SECONDS``).
DEFAULT_INTERVAL_SECONDS = 30
#: Retries of an inbox run whose worker died (``$MSA_RELEASE_INBOX_MAX_RETRIES``).
DEFAULT_MAX_RETRIES = 3
#: How long an inbox run waits for the release lock when something outside the run queue holds it (a CLI run).
INBOX_LOCK_WAIT_SECONDS = 3600.0
#: Tag of an inbox run: the digest of its settings (the content's SHA-256 is ``INPUT_SHA256_TAG``).
SETTINGS_SHA256_TAG = "msa_release/settings_sha256"
#: Sub-folders of the inbox where a file goes once its run is over: published, or failed (refused, unusable, crashed
#: beyond its retries, canceled). Never looked into by the sensor (it reads the inbox's own files only).
PROCESSED, FAILED = "processed", "failed"
#: An inbox file whose content's only runs were for other names and failed because their file was gone: run it again
RERUN = "rerun"
#: Suffix of the sidecar written beside a file set aside: ``<name>.result.json`` (run id, status, reason, release).
RESULT_SUFFIX = ".result.json"
#: Longest failure reason kept in a sidecar (characters).
MAX_REASON_LENGTH = 2000


def _environment_number(name: str, default: float, minimum: float) -> float:
    try:
        value = float(os.environ.get(name, default))
    except ValueError:
        return default
    return max(minimum, value) if value == value else default  # NaN: the default


def _settle_seconds() -> float:
    return _environment_number("MSA_RELEASE_INBOX_SETTLE_SECONDS", DEFAULT_SETTLE_SECONDS, 0.0)


def _interval_seconds() -> int:
    return int(_environment_number("MSA_RELEASE_INBOX_INTERVAL_SECONDS", DEFAULT_INTERVAL_SECONDS, 1))


def _max_retries() -> int:
    return int(_environment_number("MSA_RELEASE_INBOX_MAX_RETRIES", DEFAULT_MAX_RETRIES, 0))


def _sha256(path: Path) -> str:
    """SHA-256 of a regular file, opened without following a symbolic link (``OSError`` ELOOP if it is one)."""
    digest = hashlib.sha256()
    with os.fdopen(os.open(path, os.O_RDONLY | os.O_NOFOLLOW), "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


#: The longest file name (bytes) the file systems the inbox runs on take: a data file whose ``<name>.settings.json``
#: would be longer cannot have one
MAX_NAME_BYTES = 255


def _can_exist(path: Path) -> bool:
    """Whether a file of ``path``'s name can exist: its name fits :data:`MAX_NAME_BYTES` (red team, session 38: the
    stat of a data file's too-long ``<name>.settings.json`` raised, and stopped every tick)."""
    return len(path.name.encode("utf-8", "surrogateescape")) <= MAX_NAME_BYTES


def _read_settings(path: Path) -> dict:
    if not _can_exist(path):
        return {}
    if path.is_symlink():
        raise ValueError(f"{path.name} is a symbolic link: refused (put the settings file itself in the inbox)")
    if not path.exists():
        return {}
    if not path.is_file():  # a directory or a pipe (which would block the tick): its settings would be lost unnoticed
        raise ValueError(f"{path.name} is not a regular file (a directory or a pipe): refused (write the settings to a file)")
    try:
        settings = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise ValueError(f"{path} is not readable JSON ({error})") from error
    if not isinstance(settings, dict):
        raise ValueError(f"{path} must hold a JSON object of settings keys")
    return settings


#: The longest reason the inbox gives for skipping a file (a settings file can name a key or value megabytes long,
#: and the reason is logged and shown by the sensor at every tick)
MAX_REASON_CHARACTERS = 400


def _shortened(text: str, limit: int = MAX_REASON_CHARACTERS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _looks_complete(path: Path, input_format: str) -> str | None:
    """None when the file looks complete, else why not (a truncated Parquet file has no footer)."""
    size = path.stat().st_size
    if size == 0:
        return "empty file"
    if input_format == "parquet":
        with path.open("rb") as handle:
            head = handle.read(4)
            handle.seek(max(0, size - 4))
            tail = handle.read(4)
        if head != b"PAR1" or tail != b"PAR1":
            return "not a complete Parquet file (no PAR1 header/footer: still being written, or not Parquet)"
    else:
        with path.open("rb") as handle:
            first = handle.readline(1 << 20)
        if not first.strip():
            return "the first line is empty (a CSV in the inbox needs a header row)"
    return None


def inbox_file_settings(shared: dict, own: dict) -> dict:
    """The settings of one inbox file: the shared ``settings.json`` without the settings that the file's job does not
    read (those of other models, and the sharding settings, ``engine`` included, for a file of a model without a
    sharded job: they are there for the files of other models), then the file's own ``<name>.settings.json``, whose
    settings of another model or job :func:`inbox_run_request` refuses (they were written for this file).

    Parameters
    ----------
    shared
        ``inbox/settings.json``.
    own
        The file's ``<name>.settings.json`` (``{}`` when it has none).
    """
    model = own.get("model", shared.get("model"))
    engine = own.get("engine", shared.get("engine"))
    if "engine" not in own and default_engine(model) == IN_MEMORY_ENGINE:
        engine = None  # the shared engine is for the files of a model with a sharded job (mixed)
    try:
        job = job_of_settings(model, engine)
    except KeyError:
        return {**shared, **own}  # inbox_run_request names the unknown model
    accepted = set(settings_of_job(job))
    owned = {name for each in PUBLICATION_MODELS.values() for name in each.settings_fields} | set(SHARDING_SETTINGS)
    of_other_models = owned - accepted
    return {**{key: value for key, value in shared.items() if key not in of_other_models}, **own}


def settings_digest(config: dict) -> str:
    """SHA-256 (hex) of a run's settings without the input's path: what, besides the content, keys an inbox run.

    Parameters
    ----------
    config
        The ``settings`` run config (JSON values).

    Returns
    -------
    str
        64 hex digits of the canonical JSON (sorted keys) of ``config`` minus ``input_path``: the same bytes
        dropped under another name with the same settings give the same digest.
    """
    keyed = {key: value for key, value in config.items() if key != "input_path"}
    return hashlib.sha256(json.dumps(keyed, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def inbox_run_request(path: Path, inbox_settings: dict, *, sha256: str) -> dg.RunRequest:
    """The run request for one inbox file.

    Parameters
    ----------
    path
        The data file (``.csv`` with a header row, or ``.parquet``).
    inbox_settings
        ``inbox/settings.json`` merged with the file's own ``<name>.settings.json`` (:func:`inbox_file_settings`).
    sha256
        The file's content hash, as the tick computed it.

    Returns
    -------
    dagster.RunRequest
        For the job of the settings' ``model`` and ``engine`` (:func:`pipeline.models.job_and_settings`:
        ``sharded_release`` on engine local for the mixed model unless ``"engine": "memory"`` (``release``),
        ``rating_release``, ``kl_release``, a plug-in's); the run config sets
        ``input_path``, ``input_format``, ``csv_header`` true and ``column_names`` [] unless the
        settings say otherwise. Run key
        ``<content SHA-256>-<first 16 hex digits of settings_digest>``; tags ``msa_release/trigger``,
        ``msa_release/inbox_file``, ``msa_release/input_sha256`` (checked by the ingest step),
        ``msa_release/settings_sha256``, ``msa_release/lock_wait_seconds`` (the run waits for the release lock),
        the input's file name, model, ℓ and min_confidence or k (:func:`pipeline.run_events.release_run_tags`),
        and Dagster's run-retry tags (``dagster/max_retries``, re-run from the
        start, not after a step failure).

    Raises
    ------
    ValueError
        An unknown model; a setting of another model than the chosen one (the message names the model and job that
        read it); a value the job's config mapping refuses (:class:`JobSettings`: out of range, k < ℓ, …).
    """
    config = {"csv_header": True, "column_names": [], **inbox_settings}
    config["input_path"] = str(path.resolve())
    config["input_format"] = DATA_SUFFIXES[path.suffix.lower()]
    try:
        job_name, job_config = job_and_settings(config)  # "engine": "memory" chooses the in-memory job, then goes
    except KeyError as error:
        raise ValueError(f"model: {error.args[0]}") from None
    run_config = {"resources": {"settings": {"config": job_config}}}
    job_settings = JobSettings(job_name, models_of_job(job_name))
    try:  # what the job's config mapping checks at launch, here so that a bad settings file is skipped with a reason
        job_settings.refuse_settings_of_other_models(run_config)
        job_settings(run_config)
    except dg.DagsterInvalidConfigError as error:
        raise ValueError("; ".join(error.error_messages)) from None
    digest = settings_digest(config)
    return dg.RunRequest(
        run_key=f"{sha256}-{digest[:16]}",
        job_name=job_name,
        run_config=run_config,
        tags={
            **release_run_tags(config),
            "msa_release/trigger": "inbox",
            "msa_release/inbox_file": path.name,
            INPUT_SHA256_TAG: sha256,
            SETTINGS_SHA256_TAG: digest,
            HOST_TAG: socket.gethostname(),
            LOCK_WAIT_TAG: f"{INBOX_LOCK_WAIT_SECONDS:g}",
            # Dagster's run retries (dagster.yaml run_retries.enabled): a run whose worker died is re-run from the start
            # (the warehouse holds one run's tables: never "from failure"); a step failure (a gate, unusable input) is not.
            "dagster/max_retries": str(_max_retries()),
            "dagster/retry_strategy": "ALL_STEPS",
            "dagster/retry_on_asset_or_op_failure": "false",
        },
    )


def create_inbox(home: Path) -> Path:
    """Create ``<home>/inbox`` (and the home) private, mode 0700, as the home's other private directories; an existing
    directory keeps its mode. Returns the inbox.

    Raises
    ------
    OSError
        It cannot be created (the home is not writable, a file of that name is there).
    """
    from pipeline.resources import ensure_release_home

    inbox = ensure_release_home(home) / INBOX
    inbox.mkdir(mode=0o700, exist_ok=True)
    if not inbox.is_dir():
        raise NotADirectoryError(20, "Not a directory", str(inbox))
    return inbox


@dataclass(frozen=True)
class InboxOutcome:
    """Where the runs of one inbox file (its content and settings: the run key) stand.

    Attributes
    ----------
    finished
        True when no run of the key is queued, running or waiting for a retry.
    status
        :data:`PROCESSED` (a run published), :data:`FAILED` (every run failed or was canceled), ``"running"``, or
        :data:`RERUN` (every run was for another file name and failed because that file was gone).
    run_id
        The run that decides (the successful one, else the newest).
    reason
        What happened: the failure's message (structured failures name the file or setting, never a value), the
        release it published, or what the file waits for.
    release
        ``release_id``, ``area`` (``releases`` or ``comparisons``) and ``path`` of what a successful run published.
    """

    finished: bool
    status: str
    run_id: str
    reason: str
    release: dict[str, str] | None = None


def _failure_reason(instance: dg.DagsterInstance, run: dg.DagsterRun) -> str:
    """Why ``run`` failed: its first step failure's message (:func:`pipeline.failures.step_failures`), else the run's
    failure event, else the orphan sweep's tag, else its status."""
    from types import SimpleNamespace

    from pipeline.failures import step_failures
    from pipeline.run_events import FAILURE_REASON_TAG

    if run.status == dg.DagsterRunStatus.CANCELED:
        return "the run was canceled"
    records = instance.get_records_for_run(run.run_id, of_type=dg.DagsterEventType.STEP_FAILURE).records
    failures = step_failures(SimpleNamespace(all_events=[r.event_log_entry.dagster_event for r in records]))
    messages = [f"{f.step}: {f.message}" for f in failures if f.message]
    if not messages:
        records = instance.get_records_for_run(run.run_id, of_type=dg.DagsterEventType.RUN_FAILURE).records
        messages = [r.event_log_entry.dagster_event.message or "" for r in records]
        messages = [m for m in messages if m] or [run.tags.get(FAILURE_REASON_TAG, "") or f"run {run.status.value}"]
    reason = "; ".join(messages)
    return reason if len(reason) <= MAX_REASON_LENGTH else reason[: MAX_REASON_LENGTH - 1] + "…"


def _published_release(instance: dg.DagsterInstance, run_id: str) -> dict[str, str] | None:
    """``release_id``, ``area`` and ``path`` from the publish asset's materialization in run ``run_id``, or None."""
    records = instance.get_records_for_run(run_id, of_type=dg.DagsterEventType.ASSET_MATERIALIZATION).records
    for record in records:
        materialization = record.event_log_entry.dagster_event.event_specific_data.materialization
        metadata = {key: getattr(value, "value", value) for key, value in materialization.metadata.items()}
        if "release_id" in metadata:
            return {
                "release_id": str(metadata["release_id"]),
                "area": str(metadata.get("area", "releases")),
                "path": str(metadata.get("path", "")),
            }
    return None


def inbox_file_outcome(instance: dg.DagsterInstance, request: dg.RunRequest) -> InboxOutcome | None:
    """Where the runs of an inbox file stand: the runs tagged with its content SHA-256 and settings digest (retries
    carry their parent's tags), or None when there is none yet.

    A run queued, running, or failed and waiting for Dagster's retry (``dagster/will_retry``, no retry launched yet)
    keeps the file in place (the ingest step reads it, and its retry too). Once every run is over: processed when one
    of them succeeded, else failed, with the newest run's reason.
    """
    tags = {key: request.tags[key] for key in (INPUT_SHA256_TAG, SETTINGS_SHA256_TAG)}
    runs = instance.get_runs(filters=dg.RunsFilter(tags=tags))
    if not runs:
        return None
    finished = (dg.DagsterRunStatus.SUCCESS, dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED)
    for run in runs:
        if run.status not in finished:
            return InboxOutcome(False, "running", run.run_id, run.status.value.lower().replace("_", " "))
        if run.is_complete_and_waiting_to_retry:
            return InboxOutcome(False, "running", run.run_id, "failed and waiting for its retry")
    succeeded = [run for run in runs if run.status == dg.DagsterRunStatus.SUCCESS]
    if succeeded:
        release = _published_release(instance, succeeded[0].run_id)
        where = (
            f"published {'a comparison' if release['area'] == 'comparisons' else 'release'} {release['release_id']} "
            f"({release['path']})"
            if release
            else "succeeded"
        )
        return InboxOutcome(True, PROCESSED, succeeded[0].run_id, where, release)
    newest = runs[0]  # get_runs: newest first
    reason = _failure_reason(instance, newest)
    name = request.tags.get("msa_release/inbox_file")
    if "input file" in reason and "not found" in reason and all(run.tags.get("msa_release/inbox_file") != name for run in runs):
        # red team, session 38: the same content's run under another name failed because that file was removed before
        # it was read: no verdict on this file, which no run has read (evaluate_inbox gives it a run of its own)
        return InboxOutcome(False, RERUN, newest.run_id, reason)
    return InboxOutcome(True, FAILED, newest.run_id, reason)


def set_aside(inbox: Path, path: Path, outcome: InboxOutcome) -> Path:
    """Move an inbox file whose runs are over to ``<inbox>/processed/`` or ``<inbox>/failed/`` (created 0700), with
    its ``<name>.settings.json`` if it has one, and write ``<moved name>.result.json`` (0600) beside it: the original
    name, the run id, the status, the reason and the release published. A name already taken there gets the run id's
    first 8 hex digits (``a.<run>.csv``). The sensor never looks into those folders, so a moved file is not run again.

    Returns
    -------
    Path
        Where the file is now.

    Raises
    ------
    OSError
        The folder cannot be created or the file cannot be renamed (it then stays in the inbox, looked at again).
    """
    from datetime import UTC, datetime

    folder = inbox / outcome.status
    folder.mkdir(mode=0o700, exist_ok=True)
    target = folder / path.name
    if os.path.lexists(target) or os.path.lexists(target.with_name(target.name + RESULT_SUFFIX)):
        target = folder / f"{path.stem}.{outcome.run_id[:8]}{path.suffix}"
    counter = 1
    while os.path.lexists(target):
        target = folder / f"{path.stem}.{outcome.run_id[:8]}-{counter}{path.suffix}"
        counter += 1
    os.rename(path, target)
    own_settings = path.with_name(path.name + FILE_SETTINGS_SUFFIX)
    if own_settings.is_file() and not own_settings.is_symlink():
        os.rename(own_settings, target.with_name(target.name + FILE_SETTINGS_SUFFIX))
    sidecar = {
        "file": path.name,
        "moved_to": f"{outcome.status}/{target.name}",
        "status": outcome.status,
        "run_id": outcome.run_id,
        "reason": outcome.reason,
        "release": outcome.release,
        "moved_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    descriptor = os.open(
        target.with_name(target.name + RESULT_SUFFIX), os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600
    )
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        handle.write(json.dumps(sidecar, indent=2, ensure_ascii=False) + "\n")
    return target


def build_inbox_sensor(jobs: list[dg.UnresolvedAssetJobDefinition]) -> dg.SensorDefinition:
    """The inbox sensor, able to start any of ``jobs`` (the publishing jobs of the registry); evaluated every
    ``$MSA_RELEASE_INBOX_INTERVAL_SECONDS`` (default 30) once started."""
    return dg.sensor(
        name="inbox_sensor",
        jobs=jobs,
        minimum_interval_seconds=_interval_seconds(),
        default_status=dg.DefaultSensorStatus.STOPPED,
        description="Watches $MSA_RELEASE_HOME/inbox/ (created 0700 when missing): a new or changed .csv/.parquet file "
        "triggers a release run with it as input; once its runs are over it moves to inbox/processed/ or "
        "inbox/failed/ with a .result.json sidecar (run key = SHA-256 of the content and of the settings, so the same content with the same settings never "
        "runs twice). Write files as <name>.part (or .tmp, or a name starting with '.') and rename them when complete; "
        "symbolic links are refused. Settings: inbox/settings.json and <file>.settings.json.",
    )(evaluate_inbox)


def _refusal(path: Path, inbox: Path) -> str | None:
    """Why ``path`` (an entry of the inbox with a data suffix) is refused, or None for a regular file inside it (one
    link: a hard link shares the file with a place outside the inbox); "" for a directory (ignored without a word)."""
    mode = path.lstat().st_mode
    if stat.S_ISLNK(mode):
        return "a symbolic link, refused (only regular files inside the inbox are released: copy the file in)"
    if stat.S_ISDIR(mode):
        return ""
    if not stat.S_ISREG(mode):
        return "not a regular file, refused"
    if path.lstat().st_nlink > 1:
        return "a hard link (the same file also lives elsewhere), refused: copy the file in"
    if path.resolve().parent != inbox:
        return "resolves outside the inbox, refused"
    return None


def _sensor_instance(context: dg.SensorEvaluationContext) -> dg.DagsterInstance | None:
    """The tick's Dagster instance, or None when the context has none (a test's bare context)."""
    try:
        return context.instance
    except dg.DagsterInvariantViolationError:
        return None


def evaluate_inbox(context: dg.SensorEvaluationContext, store: ReleaseStore):
    """Evaluate the inbox: one RunRequest per complete, readable data file (see the module docstring).

    First marks failed the runs of the instance whose worker process is gone (:func:`pipeline.run_events.
    fail_orphaned_runs`: they would hold the run queue forever) and reports again the failure of a run Dagster's retry
    daemon missed (:func:`pipeline.run_events.remind_missed_retries`). The cursor remembers each file's (size, mtime,
    SHA-256) so unchanged files are not hashed again; Dagster drops a RunRequest whose run key it has already seen.
    """
    if context.instance_ref is not None:
        try:
            for orphan in fail_orphaned_runs(context.instance):
                context.log.warning(f"inbox: {orphan.message}")
            for run_id in remind_missed_retries(context.instance):
                context.log.warning(f"inbox: run {run_id} waited too long for Dagster's retry: its failure reported again")
        except Exception as error:  # the sweep must never stop the inbox
            context.log.warning(f"inbox: could not check for runs whose process died ({type(error).__name__}: {error})")
    inbox = Path(store.home) / INBOX
    if not inbox.is_dir():
        try:
            created = create_inbox(Path(store.home))
        except OSError as error:
            return dg.SkipReason(
                f"no inbox directory {inbox}, and it cannot be created ({error.strerror or error}): create it (mode 0700) "
                "and drop CSV (with a header row) or Parquet files in it"
            )
        return dg.SkipReason(f"created the inbox {created} (mode 0700): drop CSV (with a header row) or Parquet files in it")
    inbox = inbox.resolve()
    try:
        cursor = json.loads(context.cursor) if context.cursor else {}
    except ValueError:
        cursor = {}
    skipped: list[str] = []
    try:
        shared = _read_settings(inbox / INBOX_SETTINGS)
    except ValueError as error:
        return dg.SkipReason(f"{error}; fix it to release the inbox files")
    requests, new_cursor = [], {}
    instance = _sensor_instance(context)
    now = time.time()
    for path in sorted(inbox.iterdir()):
        name = path.name
        if name.startswith("."):
            continue
        try:
            name.encode("utf-8")
        except UnicodeEncodeError:  # red team, session 38: the run's tags refused it, and every tick failed on it
            shown = name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
            if Path(shown).suffix.lower() in DATA_SUFFIXES:
                skipped.append(f"{shown}: its name is not valid UTF-8; rename it (a UTF-8 name) to release it")
            continue
        if name.lower().endswith(IN_PROGRESS_SUFFIXES):
            if Path(name[: name.rindex(".")]).suffix.lower() in DATA_SUFFIXES:
                skipped.append(f"{name}: still being written (write-then-rename), waiting for its rename")
            continue
        suffix = path.suffix.lower()
        if suffix not in DATA_SUFFIXES:
            continue
        try:
            refusal = _refusal(path, inbox)
            if refusal is not None:
                if refusal:
                    skipped.append(f"{name}: {refusal}")
                continue
            status = path.stat()
            if now - status.st_mtime < _settle_seconds():
                skipped.append(f"{name}: changed {now - status.st_mtime:.0f} s ago, waiting until it is complete")
                continue
            # its own settings file settles too (red team, session 38: a settings file written just after its data file
            # came too late, and the file was released with the shared settings)
            own = path.with_name(name + FILE_SETTINGS_SUFFIX)
            if _can_exist(own) and own.is_file() and not own.is_symlink():
                age = now - own.stat().st_mtime
                if age < _settle_seconds():
                    skipped.append(f"{name}: its settings file changed {age:.0f} s ago, waiting until it is complete")
                    continue
            problem = _looks_complete(path, DATA_SUFFIXES[suffix])
            if problem:
                skipped.append(f"{name}: {problem}")
                continue
            known = cursor.get(name)
            signature = [status.st_size, status.st_mtime_ns]
            sha256 = known[2] if known and known[:2] == signature else _sha256(path)
        except OSError as error:
            skipped.append(f"{name}: unreadable ({error.strerror or error})")
            continue
        try:
            settings = inbox_file_settings(shared, _read_settings(path.with_name(name + FILE_SETTINGS_SUFFIX)))
            request = inbox_run_request(path, settings, sha256=sha256)
        except ValueError as error:
            new_cursor[name] = [*signature, sha256]
            skipped.append(f"{name}: unusable settings ({_shortened(str(error))})")
            continue
        except OSError as error:  # one file's trouble never stops the others
            skipped.append(f"{name}: its settings file cannot be read ({error.strerror or error})")
            continue
        outcome = inbox_file_outcome(instance, request) if instance is not None else None
        if outcome is not None and outcome.status == RERUN:  # a run of its own: a new run key (Dagster drops a seen one)
            outcome = None
            request = request.with_replaced_attrs(run_key=f"{request.run_key}-{hashlib.sha256(name.encode()).hexdigest()[:8]}")
        if outcome is None:  # no run yet: request one (Dagster drops a run key it has already seen)
            new_cursor[name] = [*signature, sha256]
            requests.append(request)
        elif outcome.finished:
            try:
                target = set_aside(inbox, path, outcome)
            except OSError as error:
                new_cursor[name] = [*signature, sha256]
                skipped.append(
                    f"{name}: its run {outcome.run_id} is over but the file could not be moved ({error.strerror or error})"
                )
                continue
            log = context.log.info if outcome.status == PROCESSED else context.log.warning
            log(f"inbox: {name} -> {target.parent.name}/{target.name} (run {outcome.run_id}: {outcome.reason})")
        else:
            new_cursor[name] = [*signature, sha256]
            skipped.append(f"{name}: run {outcome.run_id} is {outcome.reason}; the file stays until it is over")
    for reason in skipped:
        context.log.warning(f"inbox: skipped {reason}")
    cursor_text = json.dumps(new_cursor, sort_keys=True)
    if requests:
        return dg.SensorResult(run_requests=requests, cursor=cursor_text)
    reason = "; ".join(skipped) if skipped else f"no CSV or Parquet file in {inbox}"
    return dg.SensorResult(skip_reason=dg.SkipReason(reason), cursor=cursor_text)


inbox_sensor = build_inbox_sensor([*RELEASE_WIRING.jobs.values(), sharded_release_job])  # sharded_release: the default
