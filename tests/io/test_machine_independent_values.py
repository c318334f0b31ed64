"""Published values do not depend on the machine (issue 14, "Medium"): a ``TIMESTAMP WITH TIME ZONE`` Parquet column
reads as the same text under any ``TZ`` (DuckDB's session time zone is set to UTC), and a floating-point NaN is a
missing value like a NULL, never the text ``"nan"``.

Each Parquet file is written with pyarrow here; the expected texts are written out by hand (UTC), not computed by
the reader under test. The reader runs in a child process so that ``TZ`` is the machine's time zone from its start
(DuckDB reads it when a connection opens)."""

from __future__ import annotations

import datetime
import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.io.loading import load_records

PROJECT_ROOT = Path(__file__).resolve().parents[2]

#: 20:00 UTC on 1 January: 05:00 on 2 January in Tokyo (+09), 10:00 on 1 January in Honolulu (-10).
INSTANTS = [
    datetime.datetime(2020, 1, 1, 20, 0, tzinfo=datetime.UTC),
    datetime.datetime(2021, 6, 30, 23, 30, tzinfo=datetime.UTC),
]
EXPECTED_UTC_TEXT = ["2020-01-01 20:00:00+00", "2021-06-30 23:30:00+00"]

READ_IN_CHILD = """
import json, sys
from pipeline.io.loading import load_records
loaded = load_records(sys.argv[1], quasi_identifiers=["q"], sensitive_attributes=["when", "b"], ell=2)
print(json.dumps(sorted(str(v) for v in loaded.records["when"])))
"""


def _timestamp_table(path: Path) -> Path:
    rows = 2 * len(INSTANTS)
    table = pa.table(
        {
            "q": pa.array(["x"] * rows),
            "when": pa.array(INSTANTS * 2, pa.timestamp("us", tz="UTC")),
            "b": pa.array([str(i) for i in range(rows)]),
        }
    )
    pq.write_table(table, path)
    return path


@pytest.mark.parametrize("time_zone", ["UTC", "Asia/Tokyo", "Pacific/Honolulu"])
def test_a_timestamp_with_time_zone_reads_as_utc_text_in_every_time_zone(tmp_path, time_zone):
    path = _timestamp_table(tmp_path / "when.parquet")
    environment = {**os.environ, "TZ": time_zone}
    child = subprocess.run(
        [sys.executable, "-c", READ_IN_CHILD, str(path)],
        cwd=PROJECT_ROOT,
        env=environment,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert child.returncode == 0, child.stderr
    assert json.loads(child.stdout.strip().splitlines()[-1]) == sorted(EXPECTED_UTC_TEXT * 2)


def test_the_machine_time_zone_of_this_process_does_not_matter(tmp_path, monkeypatch):
    """The same in this process with ``TZ`` changed (``time.tzset``): DuckDB would otherwise follow it."""
    import time

    monkeypatch.setenv("TZ", "Asia/Tokyo")
    time.tzset()
    try:
        loaded = load_records(
            _timestamp_table(tmp_path / "when.parquet"), quasi_identifiers=["q"], sensitive_attributes=["when", "b"], ell=2
        )
    finally:
        monkeypatch.undo()
        time.tzset()
    assert sorted(map(str, loaded.records["when"])) == sorted(EXPECTED_UTC_TEXT * 2)


def test_a_nan_double_is_a_missing_value_not_the_text_nan(tmp_path):
    nan = float("nan")
    table = pa.table(
        {
            "q": pa.array(["x", "y", "z", "x", "y", "z"]),
            "score": pa.array([1.5, nan, 2.5, None, 1.5, 2.5], pa.float64()),  # row 2 NaN, row 4 NULL: both missing
            "ratio": pa.array([0.25, 0.5, 0.25, 0.5, 0.25, 0.5], pa.float32()),
            "kind": pa.array(["a", "b", "a", "b", "a", "b"]),
            "q_number": pa.array([nan, 1.0, 2.0, 1.0, 2.0, 1.0], pa.float64()),  # a NaN quasi-identifier: '?'
        }
    )
    path = tmp_path / "nan.parquet"
    pq.write_table(table, path)
    loaded = load_records(path, quasi_identifiers=["q", "q_number"], sensitive_attributes=["score", "ratio", "kind"], ell=2)
    assert loaded.n_input == 6 and loaded.n_dropped_missing == 2  # the NaN record and the NULL record
    records = loaded.records
    assert sorted(map(str, records["score"])) == ["1.5", "1.5", "2.5", "2.5"]
    assert "nan" not in {str(v).lower() for column in records.columns for v in records[column].astype(str)}
    assert sorted(map(str, records["q_number"])) == [
        "1.0",
        "2.0",
        "2.0",
        "?",
    ]  # rows 1, 3, 5, 6 kept; row 1 (NaN) as the missing label
    assert loaded.n_missing_quasi_identifier == 1
