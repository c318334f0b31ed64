"""Jobs, the weekly release schedule and the inbox sensor of the code location.

Jobs select assets by group (``ingest``, ``mining``, ``mixed_model``, ``rating``, ``rating_model``, ``kl_model``,
``release``, ``evaluation``) and, where a group serves several jobs (``release`` holds the
publish assets of every model, ``evaluation`` the audits, the experiments and the attacks), by
asset key:

- ``release``: the mixed model, its gates, publish, audit of the published release;
- ``rating_release``: the plain Rating baseline, its gates, publish, audit of the published release;
- ``kl_release``: the (k, ℓ) model, its gates and publish;
- ``evaluation``: P1 §6 experiments; ``attacks``: the attack evaluation.

``release_schedule`` runs ``release`` weekly (cron from ``$MSA_RELEASE_SCHEDULE_CRON``, default
Monday 03:00; timezone ``$MSA_RELEASE_SCHEDULE_TIMEZONE``, default UTC); it is stopped until
someone starts it in the UI (Automation) or with ``dagster schedule start``.

``inbox_sensor`` watches ``$MSA_RELEASE_HOME/inbox/``: a new or changed ``.csv`` / ``.parquet``
file triggers one release run with that file as input. The run key is the file's SHA-256, so
the same content never triggers twice (also not after a failed run: a file whose gates fail is
reported by its failed run and not retried). Settings come from ``inbox/settings.json`` (any
``ReleaseSettings`` key, e.g. quasi_identifiers, sensitive_attributes, ell, model) and, for one
file, ``<file name>.settings.json`` beside it; the ``model`` setting picks the job (``rating`` runs
``rating_release``, ``kl`` runs ``kl_release``: :func:`pipeline.models.job_of_model`). Files still
being written (changed within the settle time, ``$MSA_RELEASE_INBOX_SETTLE_SECONDS``, default
10 s), unreadable, truncated (a Parquet file without its footer) or with unusable settings are
skipped with a reason in the sensor's log, and looked at again at the next tick.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path

import dagster as dg
from pydantic import ValidationError

from assets.publish import job_assets
from pipeline.models import DEFAULT_MODEL, PublicationModel, job_of_model
from pipeline.models import jobs as publishing_jobs
from pipeline.resources import ReleaseSettings, ReleaseStore
from pipeline.settings import Model

__all__ = [
    "ATTACKS_JOB_SELECTION",
    "DEFAULT_SCHEDULE_CRON",
    "EVALUATION_JOB_SELECTION",
    "INBOX_SETTINGS",
    "KL_RELEASE_JOB_SELECTION",
    "RATING_RELEASE_JOB_SELECTION",
    "RELEASE_JOB_SELECTION",
    "ReleaseWiring",
    "attacks_job",
    "build_inbox_sensor",
    "build_release_schedule",
    "build_release_wiring",
    "evaluation_job",
    "inbox_run_request",
    "inbox_sensor",
    "kl_release_job",
    "rating_release_job",
    "release_job",
]

#: Descriptions of the built-in publishing jobs (a plug-in's job gets one from its model).
JOB_DESCRIPTIONS = {
    "release": "Raw table -> strong rules -> SAC/IR -> SAC~ + IDT/AT -> gates -> published release -> audit.",
    "rating_release": "Plain Rating baseline (P1 §6, SPEC §7): raw table -> strong rules (for the gates) -> SIDs of "
    "every record -> IDT/AT -> gates -> published release -> audit.",
    "kl_release": "(k, ℓ)-anonymity (P2): raw table -> hierarchies -> equivalence classes of >= k records with "
    "Diverse >= ℓ -> gates -> published release.",
}


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
    assets (``assets/publish.py``), its asset selection and its job (in-process executor: DuckDB has one writer).

    A job that publishes one model of the settings' enum other than the default starts, in the launchpad, from
    ``model: <its model>`` (a run config given in full replaces this default)."""
    assets, selections, jobs = {}, {}, {}
    enumerated = {choice.value for choice in Model}
    for job, models in publishing_jobs().items():
        owner = models[0]
        assets[job] = job_assets(job, models)
        selections[job] = job_selection(owner, assets[job])
        names = " / ".join(m.name for m in models)
        single = len(models) == 1 and owner.name in enumerated and owner.name != DEFAULT_MODEL
        jobs[job] = dg.define_asset_job(
            name=job,
            selection=selections[job],
            executor_def=dg.in_process_executor,
            config={"resources": {"settings": {"config": {"model": owner.name}}}} if single else None,
            description=JOB_DESCRIPTIONS.get(job, f"Publishes model {names} ({owner.source}; {owner.docs})."),
        )
    return ReleaseWiring(assets=assets, selections=selections, jobs=jobs)


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

attacks_job = dg.define_asset_job(
    name="attacks",
    selection=ATTACKS_JOB_SELECTION,
    executor_def=dg.in_process_executor,
    description="P2's join attack and the one-known-value attack on four releases (naive per-attribute, (k, ℓ), "
    "mixed, Rating) of the configured table, with their utility; writes reports/attacks/.",
)

evaluation_job = dg.define_asset_job(
    name="evaluation",
    selection=EVALUATION_JOB_SELECTION,
    executor_def=dg.in_process_executor,
    description="P1 §6 experiments (Figures 1-11) on the configured table: Rating vs the mixed model; writes reports/experiments/.",
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


def build_release_schedule(
    cron: str | None = None, timezone: str | None = None, *, job: dg.UnresolvedAssetJobDefinition | None = None
) -> dg.ScheduleDefinition:
    """The schedule that runs the ``release`` job with the launchpad's default settings.

    Parameters
    ----------
    cron
        Cron expression; default ``$MSA_RELEASE_SCHEDULE_CRON``, else ``DEFAULT_SCHEDULE_CRON``.
    timezone
        IANA timezone of the cron; default ``$MSA_RELEASE_SCHEDULE_TIMEZONE``, else UTC.
    job
        The ``release`` job to run (default: the built-in models' one).

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
    return dg.ScheduleDefinition(
        name="release_schedule",
        job=job if job is not None else release_job,
        cron_schedule=cron,
        execution_timezone=timezone,
        default_status=dg.DefaultScheduleStatus.STOPPED,
        tags={"msa_release/trigger": "schedule"},
        description=f"Runs the `release` job ({cron}, {timezone}) with the launchpad's default settings. "
        "Set MSA_RELEASE_SCHEDULE_CRON / MSA_RELEASE_SCHEDULE_TIMEZONE to change it; stopped until started.",
    )


# --------------------------------------------------------------------------- inbox sensor

INBOX = "inbox"
#: Settings of every inbox file (any ReleaseSettings key).
INBOX_SETTINGS = "settings.json"
#: Suffix of a per-file settings file: ``<file name>.settings.json``.
FILE_SETTINGS_SUFFIX = ".settings.json"
DATA_SUFFIXES = {".csv": "csv", ".parquet": "parquet"}
DEFAULT_SETTLE_SECONDS = 10.0


def _settle_seconds() -> float:
    try:
        return max(0.0, float(os.environ.get("MSA_RELEASE_INBOX_SETTLE_SECONDS", DEFAULT_SETTLE_SECONDS)))
    except ValueError:
        return DEFAULT_SETTLE_SECONDS


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _read_settings(path: Path) -> dict:
    if not path.is_file():
        return {}
    try:
        settings = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise ValueError(f"{path} is not readable JSON ({error})") from error
    if not isinstance(settings, dict):
        raise ValueError(f"{path} must hold a JSON object of settings keys")
    return settings


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


def inbox_run_request(path: Path, inbox_settings: dict, *, sha256: str) -> dg.RunRequest:
    """The run request for one inbox file.

    Parameters
    ----------
    path
        The data file (``.csv`` with a header row, or ``.parquet``).
    inbox_settings
        ``inbox/settings.json`` merged with the file's own ``<name>.settings.json``.
    sha256
        The file's content hash: the run key.

    Returns
    -------
    dagster.RunRequest
        For the job of the settings' ``model`` (:func:`pipeline.models.job_of_model`: ``release``,
        ``rating_release``, ``kl_release``, a plug-in's); the run config sets
        ``input_path``, ``input_format``, ``csv_header`` true and ``column_names`` [] unless the
        settings say otherwise.

    Raises
    ------
    ValueError
        Settings that ``ReleaseSettings`` refuses (the message is pydantic's).
    """
    config = {"csv_header": True, "column_names": [], **inbox_settings}
    config["input_path"] = str(path.resolve())
    config["input_format"] = DATA_SUFFIXES[path.suffix.lower()]
    try:
        ReleaseSettings(**config)
    except ValidationError as error:
        messages = "; ".join(
            ": ".join(
                part
                for part in (".".join(str(x) for x in e.get("loc", ())), str(e.get("msg", e)).removeprefix("Value error, "))
                if part
            )
            for e in error.errors()
        )
        raise ValueError(messages) from error
    job_name = job_of_model(config.get("model"))
    return dg.RunRequest(
        run_key=sha256,
        job_name=job_name,
        run_config={"resources": {"settings": {"config": config}}},
        tags={
            "msa_release/trigger": "inbox",
            "msa_release/inbox_file": path.name,
            "msa_release/input_sha256": sha256,
        },
    )


def build_inbox_sensor(jobs: list[dg.UnresolvedAssetJobDefinition]) -> dg.SensorDefinition:
    """The inbox sensor, able to start any of ``jobs`` (the publishing jobs of the registry)."""
    return dg.sensor(
        name="inbox_sensor",
        jobs=jobs,
        minimum_interval_seconds=30,
        default_status=dg.DefaultSensorStatus.STOPPED,
        description="Watches $MSA_RELEASE_HOME/inbox/: a new or changed .csv/.parquet file triggers a release run with it "
        "as input (run key = SHA-256 of the content, so the same content never runs twice). Settings: inbox/settings.json "
        "and <file>.settings.json.",
    )(evaluate_inbox)


def evaluate_inbox(context: dg.SensorEvaluationContext, store: ReleaseStore):
    """Evaluate the inbox: one RunRequest per complete, readable data file (see the module docstring).

    The cursor remembers each file's (size, mtime, SHA-256) so unchanged files are not hashed
    again; Dagster drops a RunRequest whose run key it has already seen.
    """
    inbox = Path(store.home) / INBOX
    if not inbox.is_dir():
        return dg.SkipReason(f"no inbox directory {inbox}: create it and drop CSV (with a header row) or Parquet files in it")
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
    now = time.time()
    for path in sorted(inbox.iterdir()):
        suffix = path.suffix.lower()
        if path.name.startswith(".") or suffix not in DATA_SUFFIXES or not path.is_file():
            continue
        try:
            stat = path.stat()
            if now - stat.st_mtime < _settle_seconds():
                skipped.append(f"{path.name}: changed {now - stat.st_mtime:.0f} s ago, waiting until it is complete")
                continue
            problem = _looks_complete(path, DATA_SUFFIXES[suffix])
            if problem:
                skipped.append(f"{path.name}: {problem}")
                continue
            known = cursor.get(path.name)
            signature = [stat.st_size, stat.st_mtime_ns]
            sha256 = known[2] if known and known[:2] == signature else _sha256(path)
        except OSError as error:
            skipped.append(f"{path.name}: unreadable ({error.strerror or error})")
            continue
        new_cursor[path.name] = [*signature, sha256]
        try:
            settings = {**shared, **_read_settings(path.with_name(path.name + FILE_SETTINGS_SUFFIX))}
            requests.append(inbox_run_request(path, settings, sha256=sha256))
        except ValueError as error:
            skipped.append(f"{path.name}: unusable settings ({error})")
    for reason in skipped:
        context.log.warning(f"inbox: skipped {reason}")
    cursor_text = json.dumps(new_cursor, sort_keys=True)
    if requests:
        return dg.SensorResult(run_requests=requests, cursor=cursor_text)
    reason = "; ".join(skipped) if skipped else f"no CSV or Parquet file in {inbox}"
    return dg.SensorResult(skip_reason=dg.SkipReason(reason), cursor=cursor_text)


inbox_sensor = build_inbox_sensor(list(RELEASE_WIRING.jobs.values()))
