"""The driver's view of a sharded release (issue 17): the shards' JSON summaries turned into the S-row summary frame
that the gates' Great Expectations suites read, and the totals of the release (the manifest's ``sharding`` section is
:func:`pipeline.release.sharded_publish.sharding_manifest`).

Nothing record-level here: a summary holds counts, gate partials and part-file checksums only
(:data:`pipeline.engines.base.ShardSummary`). Framework-free (no Dagster, no Great Expectations).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pandas as pd

__all__ = [
    "COUNT_COLUMNS",
    "SEPARATOR",
    "accounting_frame",
    "flatten",
    "order_frame",
    "posterior_frame",
    "release_totals",
    "summary_frame",
    "united_tables",
]

#: Joins the levels of a flattened name: ``n_sids__education``, ``records_accounted_for__n_deleted``.
SEPARATOR = "__"

#: Scalar counts of every shard (``ShardRelease.counts``), in the summary frame's order.
COUNT_COLUMNS = ("n_records", "n_sac_released", "n_attribute_table", "n_deleted", "n_groups")


def flatten(figures: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """Nested figures as one level of scalar columns: a mapping's keys joined with :data:`SEPARATOR`; a list or any
    other non-scalar as its JSON text (so that every value fits one cell of a frame).

    Returns
    -------
    dict
        Column name -> bool, int, float, str or None.
    """
    flat: dict[str, Any] = {}
    for key, value in figures.items():
        name = f"{prefix}{SEPARATOR}{key}" if prefix else str(key)
        if isinstance(value, Mapping):
            flat.update(flatten(value, name))
        elif value is None or isinstance(value, bool | int | float | str):
            flat[name] = value
        elif hasattr(value, "item"):  # numpy scalars
            flat[name] = value.item()
        else:
            flat[name] = json.dumps(value, default=str, sort_keys=True)
    return flat


def summary_frame(summaries: Sequence[Mapping[str, Any]], sensitive_attributes: Sequence[str]) -> pd.DataFrame:
    """The S-row summary frame: one row per shard (in shard order), scalar columns only.

    Parameters
    ----------
    summaries
        The shards' summaries (``shard``, ``counts``, ``partials``, ``parts``).
    sensitive_attributes
        Schema order of the per-attribute columns.

    Returns
    -------
    pandas.DataFrame
        ``shard`` (int64), :data:`COUNT_COLUMNS` (int64), ``n_sids__<attribute>`` and ``n_suppressed_cells__<attribute>``
        (int64, one per sensitive attribute), ``n_suppressed_cells`` (int64, their sum), and the flattened gate
        partials ``<gate>__<figure>`` (:func:`flatten`). Never a value of the input.

    Raises
    ------
    ValueError
        A summary lacks a count (the message names the shard and the count).
    """
    rows = []
    for summary in sorted(summaries, key=lambda s: int(s["shard"])):
        counts = summary.get("counts") or {}
        row: dict[str, Any] = {"shard": int(summary["shard"])}
        for name in COUNT_COLUMNS:
            if name not in counts:
                raise ValueError(f"the summary of shard {row['shard']} has no count {name!r}")
            row[name] = int(counts[name])
        for name in ("n_sids", "n_suppressed_cells"):
            per_attribute = counts.get(name) or {}
            for attribute in sensitive_attributes:
                row[f"{name}{SEPARATOR}{attribute}"] = int(per_attribute.get(attribute, 0))
        row["n_suppressed_cells"] = sum(row[f"n_suppressed_cells{SEPARATOR}{a}"] for a in sensitive_attributes)
        row.update(flatten(summary.get("partials") or {}))
        rows.append(row)
    return pd.DataFrame(rows)


def release_totals(frame: pd.DataFrame, sensitive_attributes: Sequence[str]) -> dict[str, Any]:
    """The united release's counts from the summary frame (sums over the shards).

    Returns
    -------
    dict
        ``n_shards`` and the sums of :data:`COUNT_COLUMNS` (int), ``n_suppressed_cells`` (int), and
        ``suppressed_cells`` / ``n_sids`` (attribute -> int).
    """
    totals: dict[str, Any] = {"n_shards": len(frame)}
    for name in (*COUNT_COLUMNS, "n_suppressed_cells"):
        totals[name] = int(frame[name].sum()) if len(frame) else 0
    for name, key in (("n_suppressed_cells", "suppressed_cells"), ("n_sids", "n_sids")):
        totals[key] = {a: int(frame[f"{name}{SEPARATOR}{a}"].sum()) if len(frame) else 0 for a in sensitive_attributes}
    return totals


def accounting_frame(frame: pd.DataFrame) -> pd.DataFrame:
    """Gate 5 per shard: every record of a shard is in exactly one of SAC~, the attribute table or the deleted list.

    Returns
    -------
    pandas.DataFrame
        ``shard`` (int64), ``n_records`` and ``n_placed`` (int64: SAC~ + attribute table + deleted), ``accounted``
        (bool: equal).
    """
    placed = frame["n_sac_released"] + frame["n_attribute_table"] + frame["n_deleted"]
    return pd.DataFrame(
        {
            "shard": frame["shard"].astype("int64"),
            "n_records": frame["n_records"].astype("int64"),
            "n_placed": placed.astype("int64"),
            "accounted": (placed == frame["n_records"]).astype(bool),
        }
    )


#: Flattened names of gate 7's and gate 9's partials in the summary frame (:func:`flatten` of ``partials``).
ORDER_GATE = "release_carries_no_input_order"
POSTERIOR_GATE = "posterior_within_bound"


def order_frame(frame: pd.DataFrame, sensitive_attributes: Sequence[str]) -> pd.DataFrame | None:
    """Gate 7's frame of a sharded release from the S-row summary frame, with the columns of ``checks/gates.py``'s
    ``order_frame`` (what its Great Expectations suite reads): ``kind`` (``spearman`` or ``order_replay``), ``name``,
    ``observed``, ``limit``, ``chance`` (order replay only; NaN for ρ), ``within_limit`` (bool).

    - ``spearman``: one row per shard and published id/SID column (``name`` ``shard <s>: <table>.<column>``): the
      shard's |Spearman ρ| of that column against its records' input positions and the shard's own limit
      max(0.05, z_S/√(n−1)) (z_S = :func:`pipeline.core.sharding.shard_order_replay_sigmas`: 4 at S = 1, 4.32 at
      S = 4), as the shard computed them (:func:`pipeline.core.order_attack.input_order_correlations`).
    - ``order_replay``: one row per sensitive attribute: the order-replay adversary attacking every shard on its own,
      its correct guesses, chance and variance added up over the shards
      (:func:`pipeline.core.sharding.pooled_order_replay`), exactly the figures ``reduce_gates`` reports; and, for
      S > 1, one row per shard and attacked attribute (``name`` ``shard <s>: <attribute>``): that shard's own guesses
      against chance + z·σ with z = :func:`pipeline.core.sharding.shard_order_replay_sigmas` (pooling alone dilutes
      one leaky shard).

    Returns None when a shard did not compute gate 7's partial (``ShardParameters.evaluate_order`` off, or a job file
    that says so): the gate cannot be evaluated. Numbers and column names only.
    """
    from pipeline.core.sharding import pooled_order_replay, shard_order_replay_sigmas

    spearman_column = f"{ORDER_GATE}{SEPARATOR}spearman"
    if not len(frame) or spearman_column not in frame.columns or frame[spearman_column].isna().any():
        return None
    rows: list[dict[str, Any]] = []
    for shard, text in zip(frame["shard"].astype("int64"), frame[spearman_column], strict=True):
        for column in json.loads(str(text)):
            rows.append(
                {
                    "kind": "spearman",
                    "name": f"shard {int(shard)}: {column['column']}",
                    "observed": float(column["abs_spearman"]),
                    "limit": float(column["limit"]),
                    "chance": float("nan"),
                    "within_limit": bool(column["passed"]),
                }
            )
    for attribute in sensitive_attributes:
        prefix = f"{ORDER_GATE}{SEPARATOR}order_replay{SEPARATOR}{attribute}{SEPARATOR}"
        names = [f"{prefix}{figure}" for figure in ("cells", "correct", "expected_correct", "variance_correct")]
        if any(name not in frame.columns for name in names):
            continue  # no shard attacked this attribute (as order_replay_attack, which lists only attacked attributes)
        cells, correct, expected, variance = (frame[name].fillna(0) for name in names)
        accuracy, chance, limit = pooled_order_replay(
            cells=int(cells.astype("int64").sum()),
            correct=int(correct.astype("int64").sum()),
            expected_correct=float(sum(float(x) for x in expected)),
            variance_correct=float(sum(float(x) for x in variance)),
        )
        rows.append(
            {
                "kind": "order_replay",
                "name": str(attribute),
                "observed": accuracy,
                "limit": limit,
                "chance": chance,
                "within_limit": bool(accuracy <= limit),
            }
        )
    if len(frame) > 1:  # every shard on its own as well (for one shard these rows are the pooled ones)
        sigmas = shard_order_replay_sigmas(len(frame))
        for attribute in sensitive_attributes:
            prefix = f"{ORDER_GATE}{SEPARATOR}order_replay{SEPARATOR}{attribute}{SEPARATOR}"
            names = [f"{prefix}{figure}" for figure in ("cells", "correct", "expected_correct", "variance_correct")]
            if any(name not in frame.columns for name in names):
                continue
            for shard, cells, correct, expected, variance in zip(
                frame["shard"].astype("int64"), *(frame[name] for name in names), strict=True
            ):
                if pd.isna(cells) or not int(cells):
                    continue  # the shard attacked no cell of this attribute
                accuracy, chance, limit = pooled_order_replay(
                    cells=int(cells),
                    correct=int(correct),
                    expected_correct=float(expected),
                    variance_correct=float(variance),
                    sigmas=sigmas,
                )
                rows.append(
                    {
                        "kind": "order_replay",
                        "name": f"shard {int(shard)}: {attribute}",
                        "observed": accuracy,
                        "limit": limit,
                        "chance": chance,
                        "within_limit": bool(accuracy <= limit),
                    }
                )
    return pd.DataFrame(rows, columns=["kind", "name", "observed", "limit", "chance", "within_limit"]).astype(
        {"observed": "float64", "limit": "float64", "chance": "float64", "within_limit": bool}
    )


def posterior_frame(frame: pd.DataFrame) -> pd.DataFrame | None:
    """Gate 9's frame of a sharded release from the S-row summary frame: one row per shard, ``shard``, ``n_cells``,
    ``n_cells_above_bound``, ``n_records_above_bound`` (int64) and ``max_excess`` (float64; NaN for a shard without
    cells), the learned-model adversary fitted on that shard's release
    (:func:`pipeline.core.posterior.release_posteriors`, ``ShardParameters.evaluate_posterior``). The column
    ``n_cells_above_bound`` is what the posterior gate's Great Expectations suite reads (as on the memory job's
    ``PosteriorResult.bound``).

    Returns None when a shard did not compute gate 9's partial: the gate cannot be evaluated.
    """
    names = {
        figure: f"{POSTERIOR_GATE}{SEPARATOR}{figure}"
        for figure in ("n_cells", "n_cells_above_bound", "n_records_above_bound", "max_excess")
    }
    counts = [names["n_cells"], names["n_cells_above_bound"], names["n_records_above_bound"]]
    if not len(frame) or any(name not in frame.columns for name in counts) or frame[counts].isna().any().any():
        return None
    max_excess = (
        frame[names["max_excess"]] if names["max_excess"] in frame.columns else pd.Series(float("nan"), index=frame.index)
    )
    return pd.DataFrame(
        {
            "shard": frame["shard"].astype("int64"),
            "n_cells": frame[names["n_cells"]].astype("int64"),
            "n_cells_above_bound": frame[names["n_cells_above_bound"]].astype("int64"),
            "n_records_above_bound": frame[names["n_records_above_bound"]].astype("int64"),
            "max_excess": pd.to_numeric(max_excess, errors="coerce").astype("float64"),
        }
    ).reset_index(drop=True)


def united_tables(
    output_dir: Path,
    summaries: Sequence[Mapping[str, Any]],
    offsets: Sequence[Any],
    sensitive_attributes: Sequence[str],
) -> dict[str, pd.DataFrame]:
    """The shards' private parts read back and united in memory, ids offset as the published release has them
    (``sac_released``: row and group ids; ``attribute_table``: row ids and every SID column; ``id_table``: SIDs of each
    attribute), shards in order. For the report of a release small enough to hold in memory (the publish step's
    ``report.html``); the published files are written out of core by :mod:`pipeline.release.sharded_publish`.

    Parameters
    ----------
    output_dir
        The run's PRIVATE ``<staging>/output``; the summaries' part paths are relative to it.
    summaries
        The shards' summaries, in shard order (``parts``: table -> ``path``).
    offsets
        :func:`pipeline.core.sharding.shard_offsets` of their counts (``sac_row_id``, ``group_id``,
        ``attribute_table_row_id``, ``sid``: attribute -> int).

    Returns
    -------
    dict
        ``sac_released``, ``attribute_table`` (SID columns nullable ``Int64``), ``id_table``.
    """
    tables: dict[str, list[pd.DataFrame]] = {"sac_released": [], "attribute_table": [], "id_table": []}
    for summary, offset in zip(summaries, offsets, strict=True):
        for table, frames in tables.items():
            part = pd.read_parquet(output_dir / summary["parts"][table]["path"])
            if table == "sac_released":
                part["row_id"] = part["row_id"].astype("int64") + int(offset.sac_row_id)
                part["group_id"] = part["group_id"].astype("int64") + int(offset.group_id)
            elif table == "attribute_table":
                part["row_id"] = part["row_id"].astype("int64") + int(offset.attribute_table_row_id)
                for attribute in sensitive_attributes:
                    part[attribute] = part[attribute].astype("Int64") + int(offset.sid[attribute])
            else:
                shift = part["attribute"].astype(str).map({a: int(offset.sid[a]) for a in sensitive_attributes})
                part["sid"] = part["sid"].astype("int64") + shift.astype("int64")
            frames.append(part)
    return {table: pd.concat(frames, ignore_index=True) for table, frames in tables.items()}
