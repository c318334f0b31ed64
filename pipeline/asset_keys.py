"""Asset-key conventions and metadata helpers shared by the assets and the gates (Dagster wiring; checks/ and assets/ both import it, so it lives outside assets/).

Asset key prefixes are DuckDB schemas of the warehouse: ``private`` (raw and intermediate
tables, never released) and ``candidate`` (the release tables before the gates).

Asset groups (shown in the Dagster UI): ``ingest``, ``mining``, ``mixed_model``, ``rating`` (the mixed model's
improved Rating), ``rating_model`` (plain Rating, the ``rating_release`` job), ``kl_model``, ``release``,
``evaluation`` and ``plan`` (the planning advisor, the ``plan`` job).
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
PLAN = "plan"
GROUPS = (INGEST, MINING, MIXED_MODEL, RATING, RATING_MODEL, KL_MODEL, RELEASE, EVALUATION, PLAN)


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


#: Every ASCII punctuation character: CommonMark lets each be backslash-escaped, and an escaped one is literal text.
_MARKDOWN_PUNCTUATION = frozenset("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~")
#: Characters that would end a table row or a paragraph, shown as one space.
_LINE_BREAKS = frozenset("\n\r\t\v\f\x85\u2028\u2029")


def escape_markdown(text: object) -> str:
    """``text`` as Markdown that the UI shows literally, never as markup (issue 14).

    Every ASCII punctuation character is backslash-escaped (CommonMark: an escaped punctuation character is literal),
    so no value becomes an image (``![x](http://…)`` would make the viewer's browser fetch the URL), a link, raw HTML
    (``<img src=x>`` would show as a blank), code, emphasis or a table cell boundary (``|``); line breaks become a
    space so that a value stays on its table row.

    Parameters
    ----------
    text
        Any value; ``str(text)`` is escaped.

    Returns
    -------
    str
        The escaped text, rendered as exactly ``str(text)`` (line breaks as spaces).
    """
    return "".join(" " if c in _LINE_BREAKS else ("\\" + c if c in _MARKDOWN_PUNCTUATION else c) for c in str(text))


def _cell(value) -> str:
    if value is None or (not isinstance(value, str) and pd.isna(value)):
        return "NULL"
    return escape_markdown(value)


def markdown_preview(frame: pd.DataFrame, rows: int = PREVIEW_ROWS) -> dg.MetadataValue:
    """The first ``rows`` rows of a PUBLISHED table as a Markdown table (the UI renders it).

    Only for tables of a release that passed its gates; never for a private or candidate table. Every column name and
    value goes through :func:`escape_markdown`, so a published value is shown as text, never rendered.
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
