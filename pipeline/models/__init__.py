"""The publication models, one entry each: what they publish, which job publishes them, where they are explained.

This is the first slice of issue 13's plug-in registry: one place that says which models exist and, for each, its
job and its release tables, read by the CLI, the inbox sensor, the publish step and the code location instead of
string comparisons in each of them. The plug-in protocol itself (typed parameters per model, how a model builds its
tables, its gates and report sections, its generated job) is not built yet; see the closing notes of issue 13.

No Dagster here: the Dagster wiring reads this registry.
"""

from __future__ import annotations

from dataclasses import dataclass

from pipeline.settings import Model

__all__ = ["PUBLICATION_MODELS", "PublicationModel", "job_of_model", "publication_model"]


@dataclass(frozen=True)
class PublicationModel:
    """One publication model.

    Attributes
    ----------
    name
        The ``model`` setting (:class:`pipeline.settings.Model`).
    job
        The Dagster job that publishes it.
    tables
        The tables it releases besides ``release_manifest`` (the release contract, README).
    source
        The paper and SPEC sections it implements.
    docs
        Its page under ``docs/``.
    """

    name: str
    job: str
    tables: tuple[str, ...]
    source: str
    docs: str


PUBLICATION_MODELS: dict[str, PublicationModel] = {
    model.name: model
    for model in (
        PublicationModel(
            Model.mixed.value,
            "release",
            ("sac_released", "attribute_table", "id_table", "attribute_clusters"),
            "P1 §4-§5 (Algorithms 7, 10, 11, 13, 19); SPEC §1-§8",
            "docs/mixed.md",
        ),
        PublicationModel(
            Model.rating.value,
            "release",
            ("attribute_table", "id_table"),
            "P1 §6 baseline (plain Rating); SPEC §7",
            "docs/rating.md",
        ),
        PublicationModel(Model.kl.value, "kl_release", ("kl_released",), "P2; SPEC §14", "docs/kl.md"),
    )
}


def publication_model(name: str) -> PublicationModel:
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
    return publication_model(name if name is not None else Model.mixed.value).job
