"""Issue 15: the records dropped for a missing sensitive value are counted per column (which columns had missing values,
how many records each), counts only; the run summary shows them."""

from __future__ import annotations

from pathlib import Path

from pipeline.io.loading import load_records
from pipeline.models.mixed import dropped_line

# 8 records: a missing in rows 2, 5 (NULL token) and 7 (empty); b missing in row 5 and 6 ("?"); q missing in row 3,
# and in row 7 (dropped anyway for a)
TABLE = """q,a,b
1,x,p
2,,p
?,y,q
4,z,r
5,NULL,?
6,x,?
,,r
8,y,s
"""


def _load(tmp_path: Path):
    path = tmp_path / "table.csv"
    path.write_text(TABLE)
    return load_records(path, quasi_identifiers=["q"], sensitive_attributes=["a", "b"], csv_header=True, column_names=[])


def test_drops_are_counted_per_sensitive_attribute_and_missing_quasi_identifiers_per_column(tmp_path):
    loaded = _load(tmp_path)
    assert loaded.n_input == 8
    assert loaded.n_dropped_missing == 4  # rows 2, 5, 6, 7
    # row 5 misses both a and b: it counts under each
    assert loaded.dropped_missing_by_attribute == {"a": 3, "b": 2}
    # row 3 is kept with q missing; row 7 (q missing too) is dropped for a, so it is not counted as kept
    assert loaded.n_missing_quasi_identifier == 1
    assert loaded.missing_quasi_identifier_by_column == {"q": 1}


def test_no_missing_value_gives_empty_counts(tmp_path):
    path = tmp_path / "full.csv"
    path.write_text("q,a,b\n1,x,p\n2,y,q\n3,z,r\n")
    loaded = load_records(path, quasi_identifiers=["q"], sensitive_attributes=["a", "b"], csv_header=True, column_names=[])
    assert loaded.dropped_missing_by_attribute == {} and loaded.missing_quasi_identifier_by_column == {}


def test_the_summary_line_names_each_column_and_its_count_never_a_value(tmp_path):
    loaded = _load(tmp_path)
    manifest = {
        "n_dropped_missing": loaded.n_dropped_missing,
        "dropped_missing_by_attribute": loaded.dropped_missing_by_attribute,
    }
    line = dropped_line(manifest)
    assert line == "4 dropped (missing sensitive value: a 3, b 2)"
    # an older manifest (before the field): the total alone, as before
    assert dropped_line({"n_dropped_missing": 1843}) == "1843 dropped (missing sensitive value)"
