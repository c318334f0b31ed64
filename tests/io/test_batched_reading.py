"""load_records reads DuckDB's result in Arrow batches (pipeline/io/loading.py ``_BATCH_ROWS``): the records and the
long-value refusal are those of a whole-table read, whatever the batch size."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

import pipeline.io.loading as loading
from pipeline.io.loading import ValueTooLong, load_records

CSV = "a,b,s1,s2\nx,1,p,q\ny,,p,r\nx,2,,q\nz,1,t,NULL\nX,3,t,q\n"


def _load(path: Path, **options: object) -> loading.LoadedRecords:
    return load_records(path, quasi_identifiers=["a", "b"], sensitive_attributes=["s1", "s2"], **options)  # type: ignore[arg-type]


@pytest.mark.parametrize("batch_rows", [1, 2, 3])
def test_records_do_not_depend_on_the_batch_size(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, batch_rows: int) -> None:
    path = tmp_path / "t.csv"
    path.write_text(CSV)
    whole = _load(path)
    monkeypatch.setattr(loading, "_BATCH_ROWS", batch_rows)
    batched = _load(path)
    pd.testing.assert_frame_equal(batched.records, whole.records)
    # rows 3 and 4 miss a sensitive value; 'X' is a look-alike of 'x'
    assert batched.records["row_id"].tolist() == [1, 2, 5]
    assert batched.records["a"].tolist() == ["x", "y", "x"]


def test_a_long_value_in_a_later_batch_is_found_in_column_order(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    long = "v" * 50
    # batches of 4 rows: column s1 has a long value on line 3 (batch 1); column a on line 5 (batch 1) and a longer
    # one on line 6 (batch 2)
    path = tmp_path / "t.csv"
    path.write_text(f"a,b,s1,s2\nx,1,p,q\ny,1,{long},q\nx,1,p,q\n{long},1,p,q\n{long}w,1,p,q\n")
    monkeypatch.setattr(loading, "_BATCH_ROWS", 4)
    with pytest.raises(ValueTooLong) as raised:
        _load(path, max_value_length=10)
    message = str(raised.value)
    assert message.startswith(f"{path}, line 5: column 'a' holds a value longer than max_value_length = 10 bytes")
    assert "(2 such value(s) in the column, the longest 51 bytes)" in message
    assert long not in message and raised.value.column == "a"
