"""The driver's view of a sharded release (pipeline/engines/summaries.py): the S-row summary frame and the totals from
hand-written shard summaries (expected figures worked out by hand)."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from pipeline.engines.summaries import accounting_frame, flatten, release_totals, summary_frame, united_tables

ATTRIBUTES = ["education", "occupation"]


def _summary(shard: int, *, n_records: int, n_sac: int, n_at: int, n_deleted: int, suppressed: dict) -> dict:
    return {
        "shard": shard,
        "counts": {
            "n_records": n_records,
            "n_sac_released": n_sac,
            "n_attribute_table": n_at,
            "n_deleted": n_deleted,
            "n_groups": n_sac // 3,
            "n_sids": {"education": 4 + shard, "occupation": 5},
            "n_suppressed_cells": suppressed,
        },
        "partials": {"disclosure_within_bound": {"max_probability": 0.25 + 0.05 * shard, "per_rule": [1, 2]}},
        "parts": {"sac_released": {"path": f"sac_released/part-{shard:05d}.parquet", "rows": n_sac, "sha256": "0" * 64}},
    }


SUMMARIES = [  # out of order on purpose: the frame is in shard order
    _summary(1, n_records=100, n_sac=30, n_at=60, n_deleted=10, suppressed={"education": 2, "occupation": 0}),
    _summary(0, n_records=120, n_sac=33, n_at=80, n_deleted=7, suppressed={"education": 0, "occupation": 1}),
]


def test_summary_frame_has_one_scalar_row_per_shard_in_shard_order():
    frame = summary_frame(SUMMARIES, ATTRIBUTES)
    assert frame["shard"].tolist() == [0, 1]
    assert frame["n_records"].tolist() == [120, 100]
    assert frame["n_sids__education"].tolist() == [4, 5]
    assert frame["n_suppressed_cells__occupation"].tolist() == [1, 0]
    assert frame["n_suppressed_cells"].tolist() == [1, 2]
    assert frame["disclosure_within_bound__max_probability"].tolist() == pytest.approx([0.25, 0.30])
    # a list partial becomes JSON text: every cell is a scalar; the parts (paths, checksums) stay out
    assert json.loads(frame["disclosure_within_bound__per_rule"].iloc[0]) == [1, 2]
    assert not any(column.startswith("parts") for column in frame.columns)
    for column in frame.columns:
        assert all(isinstance(value, bool | int | float | str) for value in frame[column].tolist()), column


def test_a_summary_without_a_count_is_refused_naming_shard_and_count():
    broken = {"shard": 4, "counts": {"n_records": 1}, "partials": {}}
    with pytest.raises(ValueError, match=r"shard 4 has no count 'n_sac_released'"):
        summary_frame([broken], ATTRIBUTES)


def test_totals_are_sums_over_the_shards():
    totals = release_totals(summary_frame(SUMMARIES, ATTRIBUTES), ATTRIBUTES)
    assert totals["n_shards"] == 2
    assert (totals["n_records"], totals["n_sac_released"], totals["n_attribute_table"], totals["n_deleted"]) == (220, 63, 140, 17)
    assert totals["suppressed_cells"] == {"education": 2, "occupation": 1}
    assert totals["n_suppressed_cells"] == 3
    assert totals["n_sids"] == {"education": 9, "occupation": 10}


def test_accounting_flags_the_shard_whose_records_do_not_add_up():
    frame = summary_frame(SUMMARIES, ATTRIBUTES)
    assert accounting_frame(frame)["accounted"].tolist() == [True, True]
    frame.loc[frame["shard"] == 1, "n_deleted"] = 9  # one record of shard 1 lost
    accounting = accounting_frame(frame)
    assert accounting["accounted"].tolist() == [True, False]
    assert accounting["n_placed"].tolist() == [120, 99]


def test_flatten_joins_levels_and_keeps_scalars():
    assert flatten({"a": {"b": 1, "c": {"d": True}}, "e": None, "f": [1]}) == {"a__b": 1, "a__c__d": True, "e": None, "f": "[1]"}


def test_united_tables_offset_every_id_as_the_published_release_has_them(tmp_path):
    """Two shards' private parts with local ids: the second shard's SAC~ rows, groups, attribute-table rows and SIDs
    come after the first's (offsets worked out by hand: 2 SAC~ rows and 1 group in shard 0, 3 SAC~ rows in all)."""
    from types import SimpleNamespace

    output = tmp_path / "output"
    parts = {
        0: {
            "sac_released": pd.DataFrame({"row_id": [1, 2], "group_id": [1, 1], "sex": ["F", "M"]}),
            "attribute_table": pd.DataFrame({"row_id": [3], "sex": ["F"], "education": [1], "occupation": [pd.NA]}),
            "id_table": pd.DataFrame(
                {"attribute": ["education", "occupation"], "sid": [1, 1], "value": ["a", "b"], "count": [1, 1]}
            ),
        },
        1: {
            "sac_released": pd.DataFrame({"row_id": [1], "group_id": [1], "sex": ["M"]}),
            "attribute_table": pd.DataFrame({"row_id": [2, 3], "sex": ["M", "F"], "education": [1, 2], "occupation": [1, 1]}),
            "id_table": pd.DataFrame(
                {"attribute": ["education", "occupation"], "sid": [2, 1], "value": ["c", "d"], "count": [1, 2]}
            ),
        },
    }
    summaries = []
    for shard, tables in parts.items():
        entry: dict = {"shard": shard, "parts": {}}
        for table, frame in tables.items():
            path = output / table / f"part-{shard:05d}.parquet"
            path.parent.mkdir(parents=True, exist_ok=True)
            frame.astype({"occupation": "Int32"} if "occupation" in frame and table == "attribute_table" else {}).to_parquet(path)
            entry["parts"][table] = {"path": f"{table}/part-{shard:05d}.parquet"}
        summaries.append(entry)
    offsets = [
        SimpleNamespace(sac_row_id=0, group_id=0, attribute_table_row_id=1, sid={"education": 0, "occupation": 0}),
        SimpleNamespace(sac_row_id=2, group_id=1, attribute_table_row_id=3, sid={"education": 1, "occupation": 1}),
    ]
    united = united_tables(output, summaries, offsets, ATTRIBUTES)
    assert united["sac_released"]["row_id"].tolist() == [1, 2, 3]
    assert united["sac_released"]["group_id"].tolist() == [1, 1, 2]
    assert united["attribute_table"]["row_id"].tolist() == [4, 5, 6]  # local ids 3 | 2, 3 -> after the 3 SAC~ rows
    assert united["attribute_table"]["education"].tolist() == [1, 2, 3]
    assert united["attribute_table"]["occupation"].isna().tolist() == [True, False, False]  # suppressed stays NULL
    assert united["id_table"]["sid"].tolist() == [1, 1, 3, 2]
