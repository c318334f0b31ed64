"""The publication models as plug-ins (issue 13): one module per model behind one protocol, and their registry.

:class:`pipeline.models.base.PublicationModel` says what a plug-in provides (typed parameters, how it builds its
release tables from records, its contract tables, its gates, its manifest/report/summary sections and its job);
:mod:`pipeline.models.mixed`, :mod:`pipeline.models.rating` and :mod:`pipeline.models.kl` are the three models. The
Dagster wiring generates each job, candidate asset, publish asset and gate list from this registry
(``assets/publish.py``, ``pipeline/jobs.py``, ``pipeline/definitions.py``); the CLI, the inbox sensor and the publish
step ask it instead of comparing model names. A fourth model is one more plug-in passed to :func:`register`
(``docs/adding-a-model.md``).

No Dagster here: the Dagster wiring reads this registry.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from pipeline.models.base import COMMON_SETTINGS, CandidateRelease, GateVerdict, PublicationModel
from pipeline.models.kl import KL
from pipeline.models.mixed import MIXED
from pipeline.models.rating import RATING
from pipeline.settings import Model

__all__ = [
    "COMMON_SETTINGS",
    "CandidateRelease",
    "DEFAULT_MODEL",
    "GateVerdict",
    "PUBLICATION_MODELS",
    "PublicationModel",
    "job_of_model",
    "jobs",
    "model_of_job",
    "models_of_job",
    "publication_model",
    "register",
    "settings_not_of_job",
    "settings_of_job",
    "unregister",
]

#: The model of a run that names none.
DEFAULT_MODEL = "mixed"

#: Every registered model by name, in registration order (mixed, rating, kl, then any plug-in registered later).
PUBLICATION_MODELS: dict[str, PublicationModel[Any]] = {model.name: model for model in (MIXED, RATING, KL)}


def register(model: PublicationModel[Any]) -> PublicationModel[Any]:
    """Add a plug-in to the registry (the code location built afterwards generates its job, assets and gates).

    Raises
    ------
    ValueError
        A model of that name is already registered, or ``model`` lacks a part of the protocol.
    """
    if not isinstance(model, PublicationModel):
        raise ValueError(f"{model!r} does not implement pipeline.models.base.PublicationModel")
    if model.name in PUBLICATION_MODELS:
        raise ValueError(f"a model named {model.name!r} is already registered")
    PUBLICATION_MODELS[model.name] = model
    return model


def unregister(name: str) -> None:
    """Remove a plug-in added by :func:`register` (tests); the three built-in models stay.

    Raises
    ------
    ValueError
        ``name`` is a built-in model.
    """
    if name in (MIXED.name, RATING.name, KL.name):
        raise ValueError(f"{name!r} is a built-in model")
    PUBLICATION_MODELS.pop(name, None)


def publication_model(name: str) -> PublicationModel[Any]:
    """The model called ``name``.

    Raises
    ------
    KeyError
        No such model (the message lists the known ones).
    """
    try:
        return PUBLICATION_MODELS[str(name)]
    except KeyError:
        raise KeyError(f"unknown model {name!r}; known: {sorted(PUBLICATION_MODELS)}") from None


def job_of_model(name: str | None) -> str:
    """The job that publishes model ``name`` (the default model's when None)."""
    return publication_model(name if name is not None else DEFAULT_MODEL).job


def jobs() -> dict[str, tuple[PublicationModel[Any], ...]]:
    """Every publishing job and the models it publishes (the first one owns the job's assets)."""
    grouped: dict[str, list[PublicationModel[Any]]] = {}
    for model in PUBLICATION_MODELS.values():
        grouped.setdefault(model.job, []).append(model)
    return {job: tuple(models) for job, models in grouped.items()}


def models_of_job(job: str) -> tuple[PublicationModel[Any], ...]:
    """The models job ``job`` publishes.

    Raises
    ------
    KeyError
        No registered model is published by ``job``.
    """
    try:
        return jobs()[job]
    except KeyError:
        raise KeyError(f"no registered model is published by job {job!r}") from None


def model_of_job(job: str, model_setting: str | None) -> PublicationModel[Any]:
    """The model a run of ``job`` publishes: the one its ``model`` setting names.

    A job that publishes one model only implies it when the setting names no model of another job (a plug-in whose
    name the settings' enum does not list yet runs through its job with the default setting).

    Raises
    ------
    ValueError
        The setting names a model that ``job`` does not publish (the message names the job to run instead).
    """
    models = models_of_job(job)
    for model in models:
        if model.name == str(model_setting):
            return model
    enumerated = {choice.value for choice in Model}  # the settings' enum; a plug-in outside it is chosen by its job
    other = PUBLICATION_MODELS.get(str(model_setting)) if model_setting is not None else None
    if len(models) == 1 and (other is None or str(model_setting) == DEFAULT_MODEL and models[0].name not in enumerated):
        return models[0]
    names = ", ".join(repr(m.name) for m in models)
    hint = f"; run the `{other.job}` job for it" if other is not None else ""
    raise ValueError(f"the `{job}` job publishes model {names}, not {str(model_setting)!r}{hint}")


def settings_of_job(job: str) -> tuple[str, ...]:
    """The settings a run of ``job`` reads: :data:`COMMON_SETTINGS`, then the ``settings_fields`` of each model the
    job publishes, each name once (``model`` not included: the job sets it).

    Raises
    ------
    KeyError
        No registered model is published by ``job``.
    """
    names = [*COMMON_SETTINGS, *(name for model in models_of_job(job) for name in model.settings_fields)]
    return tuple(dict.fromkeys(names))


def settings_not_of_job(job: str, names: Iterable[str]) -> dict[str, str]:
    """The settings among ``names`` that ``job`` does not read (``model`` aside), each with a message naming the
    model(s) and job(s) that read it, e.g. ``k`` for ``release``: ``k: a setting of model kl (job kl_release), not
    of model mixed (job release); leave it out or run kl_release``.

    Raises
    ------
    KeyError
        No registered model is published by ``job``.
    """
    accepted = {*settings_of_job(job), "model"}
    published = ", ".join(model.name for model in models_of_job(job))
    refused = {}
    for name in names:
        if name in accepted:
            continue
        owners = [model for model in PUBLICATION_MODELS.values() if name in model.settings_fields]
        if owners:
            readers = ", ".join(f"{model.name} (job {model.job})" for model in owners)
            jobs_of_owners = " or ".join(dict.fromkeys(model.job for model in owners))
            refused[name] = (
                f"{name}: a setting of model {readers}, not of model {published} (job {job}); "
                f"leave it out or run {jobs_of_owners}"
            )
        else:
            refused[name] = f"{name}: not a setting of any publication model (job {job} publishes model {published})"
    return refused
