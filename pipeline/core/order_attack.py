"""The order-replay adversary: what the row and SID order of a release says about the input order.

Rating (SPEC §6, the reference) numbers SIDs in creation order and fills them first-in-first-out
in table order. An adversary who knows that much replays the loop from the ID table: SID ``s`` of
attribute A was created after SIDs ``1..s-1``, so a record in it sits at about the quantile
``(s - ½) / S_A`` of the table on A; and the holder of value ``v`` in SID ``s`` is the
``r``-th holder of ``v`` (``r`` = the number of earlier SIDs holding ``v``), so it sits near the
quantile ``(r + ½) / n_v``. A record sits at the same position on every attribute, so for each
attribute-table cell the adversary estimates the row's position from its SIDs on the *other*
attributes and guesses the candidate value of the SID whose holder quantile is closest: the four
independently bucketized values of a row link back together (red team, issue 12: 89-92 % of
education, occupation and relationship cells right against the 1/3 of ℓ-diversity; Spearman ρ of
0.999 between the recovered and the input position).

:func:`order_replay_attack` runs that adversary on a release and scores it privately against the
true values; :func:`input_order_correlations` measures the rank correlation of every published
id/SID column with the input position. Both are what the ``release_carries_no_input_order`` gate
checks. A release made with the home secret (independent keyed orders per attribute, keyed random
SID numbers, rows ordered by a keyed hash of their content) leaves the adversary at chance.

Sources: SPEC §6 and §10 (the adversary knows the release and the algorithm); Xiao & Tao,
"Anatomy" (VLDB 2006), whose ℓ-diversity guarantee assumes the link inside a bucket is uniformly
random; issue 12, item 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from pipeline.core.columns import joint_text_codes, values_mask

__all__ = ["OrderReplayResult", "input_order_correlations", "order_replay_attack", "order_gate_limits"]


@dataclass(frozen=True)
class OrderReplayResult:
    """Per sensitive attribute, how often the order-replay adversary guessed an attribute-table cell.

    ``per_attribute``: one row per attribute with ``cells`` (attacked cells: published SID, SID of
    ≥ 2 values), ``correct`` (guesses equal to the true value), ``accuracy`` (correct / cells),
    ``chance`` (expected accuracy of a guess that does not depend on which row holds which value:
    the mean of 1 / SID size), ``limit`` (chance + 4 standard deviations of the number correct
    under that null, divided by cells) and ``passed`` (accuracy ≤ limit); ``expected_correct`` and
    ``variance_correct`` (the null's mean and variance of the number correct: sums over cells, which a sharded release
    adds up over its shards).
    """

    per_attribute: pd.DataFrame

    @property
    def passed(self) -> bool:
        return bool(self.per_attribute["passed"].all()) if len(self.per_attribute) else True

    @property
    def max_excess(self) -> float:
        """Largest ``accuracy - chance`` over the attributes (0 when there is nothing to attack)."""
        if not len(self.per_attribute):
            return 0.0
        return float((self.per_attribute["accuracy"] - self.per_attribute["chance"]).max())


def order_gate_limits(n: int, floor: float = 0.05, *, sigmas: float = 4.0) -> float:
    """The largest |Spearman ρ| accepted between a published column of ``n`` rows and the input position.

    ``max(floor, sigmas / sqrt(n - 1))``: ``sigmas`` (default 4) standard errors of ρ under independence (so a
    random order fails with probability about 6e-5 at 4), and never below ``floor`` (the issue's 0.05). A sharded
    release judges each of its S shards with ``sigmas`` = :func:`pipeline.core.sharding.shard_order_replay_sigmas`
    (S) (Bonferroni over the shards, as its per-shard order replay).
    """
    if n < 3:
        return 1.0
    return max(float(floor), float(sigmas) / float(np.sqrt(n - 1)))


def _average_ranks(values: np.ndarray) -> np.ndarray:
    """1-based ranks with ties given their average rank (as ``pandas.Series.rank(method="average")``
    on values without NaN), by one sort."""
    _, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    first = np.cumsum(counts) - counts  # 0-based rank of each distinct value's first occurrence
    return (first + (counts + 1) / 2.0)[inverse.reshape(-1)].astype(np.float64)


def _spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman ρ (average ranks for ties); 0 when either side is constant."""
    rx, ry = _average_ranks(x), _average_ranks(y)
    if rx.std() == 0 or ry.std() == 0:
        return 0.0
    return float(np.corrcoef(rx, ry)[0, 1])


def input_order_correlations(
    tables: dict[str, pd.DataFrame],
    row_map: pd.DataFrame,
    id_columns: dict[str, Sequence[str]],
    *,
    sigmas: float = 4.0,
) -> pd.DataFrame:
    """Spearman ρ between every published id/SID column and the input position of the row's record.

    Parameters
    ----------
    tables
        Published tables by name (e.g. ``sac_released``, ``attribute_table``), each with ``row_id``.
    row_map
        PRIVATE: ``row_id`` (release row id) and ``input_row_number`` (1-based input line).
    id_columns
        Per table, the columns to check (e.g. ``row_id``, ``group_id``, the SID columns). NULL
        cells (suppressed) are left out.
    sigmas
        Standard errors of ρ the limit allows (:func:`order_gate_limits`; 4 for one release).

    Returns
    -------
    pandas.DataFrame
        Columns ``table``, ``column``, ``rows`` (int), ``spearman`` (float), ``limit`` (float,
        :func:`order_gate_limits`), ``passed`` (bool: |ρ| ≤ limit).

    Raises
    ------
    KeyError
        A table or column is missing, or a row id is not in the row map.
    """
    position = pd.Series(row_map["input_row_number"].to_numpy(np.int64), index=row_map["row_id"].to_numpy(np.int64))
    rows = []
    for name, columns in id_columns.items():
        table = tables[name]
        if not len(table):
            continue
        input_position = position.reindex(table["row_id"].to_numpy(np.int64))
        if input_position.isna().any():
            raise KeyError(f"a row id of {name!r} is not in the private row map")
        for column in columns:
            values = table[column]
            keep = values.notna().to_numpy()
            n = int(keep.sum())
            rho = _spearman(values[keep].to_numpy(np.float64), input_position.to_numpy(np.float64)[keep]) if n >= 3 else 0.0
            limit = order_gate_limits(n, sigmas=sigmas)
            rows.append(
                {"table": name, "column": column, "rows": n, "spearman": rho, "limit": limit, "passed": abs(rho) <= limit}
            )
    return pd.DataFrame(rows, columns=["table", "column", "rows", "spearman", "limit", "passed"])


def order_replay_attack(
    attribute_table: pd.DataFrame,
    id_table: pd.DataFrame,
    sensitive_attributes: Sequence[str],
    true_values: pd.DataFrame,
) -> OrderReplayResult:
    """Run the order-replay adversary on the attribute table and score its guesses.

    Parameters
    ----------
    attribute_table
        Published: ``row_id`` and one SID column per sensitive attribute (``<NA>`` = suppressed).
    id_table
        Published: ``attribute``, ``sid``, ``value`` (one row per value occurrence in a SID).
    sensitive_attributes
        The attributes to attack (at least 2: the position of a row is estimated from the others).
    true_values
        PRIVATE: ``row_id`` and each attribute's true value of the attribute-table rows (text).

    Returns
    -------
    OrderReplayResult

    Raises
    ------
    KeyError
        A column is missing.

    Notes
    -----
    The adversary (module docstring): a row's position quantile on attribute B is estimated as
    ``(rank of its SID among B's SIDs - ½) / S_B``; its position for attacking A is the mean over
    the other attributes. In SID ``s`` of A, the holder of value ``v`` is the ``r``-th holder of
    ``v`` in SID-number order, at quantile ``(r + ½) / n_v``; the guess is the value whose
    quantile is closest to the row's estimated position. The cost is a few sorts and group-bys
    per attribute: O(cells log cells).
    """
    attributes = list(sensitive_attributes)
    at = attribute_table[["row_id", *attributes]].reset_index(drop=True)
    truth = true_values.set_index("row_id").reindex(at["row_id"].to_numpy(np.int64))
    attribute_of_entry = id_table["attribute"]
    entries_of = {a: id_table.loc[values_mask(attribute_of_entry, [a]), ["sid", "value"]] for a in attributes}
    # the adversary's position estimate of each row on each attribute, from the SID numbers alone; a cell's SID is
    # located once per attribute (hash look-up into the sorted SID numbers) and reused by the replay below
    quantile, cell_rank, entry_rank, n_sids = {}, {}, {}, {}
    for attribute in attributes:
        present = at[attribute].notna().to_numpy()
        cell_sid = at[attribute].fillna(-1).to_numpy(np.int64)
        sid_numbers, inverse = np.unique(entries_of[attribute]["sid"].to_numpy(np.int64), return_inverse=True)
        rank = pd.Index(sid_numbers).get_indexer(cell_sid)
        unknown = present & (rank < 0)  # a cell naming a SID the ID table lacks: its insertion rank
        rank[unknown] = np.searchsorted(sid_numbers, cell_sid[unknown])
        n_sids[attribute] = len(sid_numbers)
        quantile[attribute] = np.where(present, (rank + 0.5) / max(len(sid_numbers), 1), np.nan)
        cell_rank[attribute] = np.where(present & ~unknown, rank, -1)
        entry_rank[attribute] = inverse.reshape(-1).astype(np.int64)
    rows = []
    for attribute in attributes:
        others = [quantile[b] for b in attributes if b != attribute]
        with np.errstate(all="ignore"):
            position = np.nanmean(np.column_stack(others), axis=1) if others else np.full(len(at), 0.5)
        # value codes in text order, shared by the ID table and the truth (ties are broken by the value's text)
        value_codes, truth_codes = joint_text_codes(entries_of[attribute]["value"], truth[attribute])
        entry_sid = entries_of[attribute]["sid"].to_numpy(np.int64)
        # holder quantile: rank of the occurrence among the value's occurrences in SID-number order
        by_value = np.lexsort((entry_sid, value_codes))
        value_sorted = value_codes[by_value]
        value_index = value_sorted + 1  # a missing value (-1) is a value of its own
        value_count = np.bincount(value_index, minlength=1)
        value_first = np.cumsum(value_count) - value_count
        holder_quantile = np.empty(len(by_value))
        holder_quantile[by_value] = (np.arange(len(by_value)) - value_first[value_index] + 0.5) / value_count[value_index]
        # every cell's candidates: the occurrences of its SID (SIDs of at least 2 occurrences), entries sorted by SID
        by_sid = np.argsort(entry_rank[attribute], kind="stable")
        sid_count = np.bincount(entry_rank[attribute], minlength=n_sids[attribute])
        sid_first = np.cumsum(sid_count) - sid_count
        cells = np.flatnonzero((cell_rank[attribute] >= 0) & ~np.isnan(position))
        first, size = sid_first[cell_rank[attribute][cells]], sid_count[cell_rank[attribute][cells]]
        keep = size >= 2
        cells, first, size = cells[keep], first[keep], size[keep]
        if not len(cells):
            rows.append(
                {
                    "attribute": attribute,
                    "cells": 0,
                    "correct": 0,
                    "accuracy": 0.0,
                    "chance": 0.0,
                    "limit": 1.0,
                    "passed": True,
                    "expected_correct": 0.0,
                    "variance_correct": 0.0,
                }
            )
            continue
        starts = np.cumsum(size) - size
        candidate_cell = np.repeat(np.arange(len(cells)), size)
        candidate_entry = by_sid[np.repeat(first - starts, size) + np.arange(len(candidate_cell))]
        distance = np.abs(holder_quantile[candidate_entry] - position[cells][candidate_cell])
        # the guess: the closest holder quantile, ties to the smaller value text (candidates are grouped by cell)
        closest = np.minimum.reduceat(distance, starts)
        candidate_value = value_codes[candidate_entry]
        tied = np.where(distance == closest[candidate_cell], candidate_value, np.iinfo(np.int64).max)
        guessed = np.minimum.reduceat(tied, starts)
        correct = int(((guessed == truth_codes[cells]) & (truth_codes[cells] >= 0)).sum())
        p = 1.0 / size.astype(np.float64)
        n_cells = len(cells)
        expected = float(p.sum())
        variance = float((p * (1 - p)).sum())
        deviation = float(np.sqrt(variance))
        limit = min(1.0, (expected + 4 * deviation) / n_cells)
        rows.append(
            {
                "attribute": attribute,
                "cells": n_cells,
                "correct": correct,
                "accuracy": correct / n_cells,
                "chance": expected / n_cells,
                "limit": limit,
                "passed": correct / n_cells <= limit,
                "expected_correct": expected,
                "variance_correct": variance,
            }
        )
    return OrderReplayResult(
        pd.DataFrame(
            rows,
            columns=[
                "attribute",
                "cells",
                "correct",
                "accuracy",
                "chance",
                "limit",
                "passed",
                "expected_correct",
                "variance_correct",
            ],
        )
    )
