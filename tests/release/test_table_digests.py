"""The in-job audit compares the published files with the candidate the gates saw by ``table_digests``: the digest
must not depend on how a table is held (in memory or read back from Parquet) and must change with any cell."""

from __future__ import annotations

import pandas as pd

from pipeline.release.audit import table_digests


def _in_memory() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "row_id": pd.Series([1, 2, 3, 4], dtype="int64"),
            "education": pd.Series(["HS-grad", "Masters", None, "HS-grad"], dtype=object),
            "occupation": pd.array([7, None, 2, 7], dtype="Int32"),
        }
    )


def test_the_digest_is_the_same_however_the_table_is_held(tmp_path):
    frame = _in_memory()
    path = tmp_path / "t.parquet"
    frame.to_parquet(path)
    read_back = pd.read_parquet(path)
    other_holding = pd.DataFrame(
        {
            "row_id": frame["row_id"].astype("int32"),
            # categorical text, categories in another order (as DuckDB -> Arrow -> pandas gives them)
            "education": pd.Categorical(frame["education"], categories=["Masters", "HS-grad", "Doctorate"]),
            "occupation": frame["occupation"].astype("Int64"),
        }
    )
    expected = table_digests({"t": frame})
    assert table_digests({"t": read_back}) == expected
    assert table_digests({"t": other_holding}) == expected


def test_the_digest_changes_with_a_cell_a_null_the_row_order_or_a_column_name():
    expected = table_digests({"t": _in_memory()})["t"]
    changed_cell = _in_memory()
    changed_cell.loc[1, "education"] = "Doctorate"
    null_cell = _in_memory()
    null_cell.loc[0, "occupation"] = None
    reordered = _in_memory().iloc[[1, 0, 2, 3]].reset_index(drop=True)
    renamed = _in_memory().rename(columns={"occupation": "workclass"})
    for variant in (changed_cell, null_cell, reordered, renamed):
        assert table_digests({"t": variant})["t"] != expected
