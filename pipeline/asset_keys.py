"""Asset-key conventions and metadata helpers shared by the assets and the gates (Dagster wiring; checks/ and assets/ both import it, so it lives outside assets/).

Asset key prefixes are DuckDB schemas of the warehouse: ``private`` (raw and intermediate
tables, never released) and ``candidate`` (the release tables before the gates).

Asset groups (shown in the Dagster UI): ``ingest``, ``mining``, ``mixed_model``, ``rating`` (the mixed model's
improved Rating), ``rating_model`` (plain Rating, the ``rating_release`` job), ``kl_model``, ``release`` and
``evaluation``.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

import dagster as dg
import pandas as pd

if TYPE_CHECKING:
    from pipeline.models import PublicationModel

PRIVATE = "private"
CANDIDATE = "candidate"
#: Kinds shown in the UI for warehouse tables.
KINDS = {"duckdb", "pandas"}

#: Asset groups, in pipeline order.
INGEST = "ingest"
MINING = "mining"
MIXED_MODEL = "mixed_model"
RATING = "rating"
RATING_MODEL = "rating_model"
KL_MODEL = "kl_model"
RELEASE = "release"
EVALUATION = "evaluation"
GROUPS = (INGEST, MINING, MIXED_MODEL, RATING, RATING_MODEL, KL_MODEL, RELEASE, EVALUATION)


def publishing_group(job: str) -> str:
    """The asset group of a publishing job's generated candidate and publish assets: ``release`` for the ``release``
    job (the mixed model), else the job's name (``rating_release``, ``kl_release``), so that each group's lineage in
    the UI shows one model's release and its gates."""
    return RELEASE if job == RELEASE else job


#: Rows shown in the Markdown preview of a published table.
PREVIEW_ROWS = 10


def inputs(*, private: Iterable[str] = (), candidate: Iterable[str] = ()) -> dict[str, dg.AssetIn]:
    """``AssetIn`` per warehouse table, keyed by table name (the parameter name of the function)."""
    ins = {name: dg.AssetIn(key=[PRIVATE, name]) for name in private}
    ins.update({name: dg.AssetIn(key=[CANDIDATE, name]) for name in candidate})
    return ins


def model_inputs(model: PublicationModel, *, private: Iterable[str] = (), candidate: Iterable[str] = ()) -> dict[str, dg.AssetIn]:
    """Like :func:`inputs`, for the tables a publication model reads: keyed by table name, each read from the asset
    its job keeps it in (``model.table_assets``; Rating's ``attribute_table`` is ``candidate/rating_attribute_table``)."""
    ins = {name: dg.AssetIn(key=[PRIVATE, model.table_assets.get(name, name)]) for name in private}
    ins.update({name: dg.AssetIn(key=[CANDIDATE, model.table_assets.get(name, name)]) for name in candidate})
    return ins


def table_metadata(frame: pd.DataFrame, *, rows_in: int | None = None, started: float | None = None) -> dict:
    """Numeric metadata with stable names that every warehouse table reports.

    Parameters
    ----------
    frame
        The table the asset returns.
    rows_in
        Records the stage read (``n_rows_in``), when it reads one main table.
    started
        ``time.monotonic()`` at the start of the stage: ``seconds`` is its wall time.

    Returns
    -------
    dict
        ``dagster/row_count`` (shown by the UI as the row count), ``n_rows_out``, and
        ``n_rows_in`` / ``seconds`` when given. Counts only: never a value of the table.
    """
    metadata: dict = {"dagster/row_count": len(frame), "n_rows_out": len(frame)}
    if rows_in is not None:
        metadata["n_rows_in"] = int(rows_in)
    if started is not None:
        metadata["seconds"] = round(time.monotonic() - started, 3)
    return metadata


def _cell(value) -> str:
    if value is None or (not isinstance(value, str) and pd.isna(value)):
        return "NULL"
    return str(value).replace("|", "\\|").replace("\n", " ")


def markdown_preview(frame: pd.DataFrame, rows: int = PREVIEW_ROWS) -> dg.MetadataValue:
    """The first ``rows`` rows of a PUBLISHED table as a Markdown table (the UI renders it).

    Only for tables of a release that passed its gates; never for a private or candidate table.
    """
    head = frame.head(rows)
    lines = [
        "| " + " | ".join(_cell(c) for c in head.columns) + " |",
        "|" + "---|" * len(head.columns),
        *("| " + " | ".join(_cell(v) for v in row) + " |" for row in head.itertuples(index=False)),
    ]
    lines.append(f"\n{min(rows, len(frame))} of {len(frame)} rows.")
    return dg.MetadataValue.md("\n".join(lines))


def model_of_run(job: str, settings) -> PublicationModel:
    """The publication model a run of ``job`` publishes (:func:`pipeline.models.model_of_job` on its ``model``
    setting).

    Raises
    ------
    dagster.Failure
        The setting names a model this job does not publish (the message names the job to run instead).
    """
    from pipeline.models import model_of_job

    try:
        return model_of_job(job, str(settings.model))
    except ValueError as error:
        raise dg.Failure(str(error)) from None
