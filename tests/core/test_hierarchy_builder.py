"""Issue 15: hierarchies generated the way ARX's hierarchy wizard does (``pipeline/core/hierarchy_builder.py``) are
valid ARX files for the tool's own reader, list every value of the column, and report every problem at once."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.cli.hierarchies import hierarchy_text
from pipeline.core.hierarchies import Hierarchy, read_hierarchy
from pipeline.core.hierarchy_builder import HierarchyGenerationError, build_hierarchies, build_hierarchy, choose_builder


def _round_trip(tmp_path, generated) -> Hierarchy:
    """The generated rows written as a file and read back with the reader the kl run uses."""
    path = tmp_path / f"{generated.attribute}.csv"
    path.write_text(hierarchy_text(generated.rows), encoding="utf-8")
    return read_hierarchy(path, attribute=generated.attribute)


def test_numbers_get_nested_intervals_whose_width_doubles(tmp_path):
    """Ages 20-39 span 19: level 1 has width 1 (19 intervals, fewer than 20); every level doubles the width from
    the origin 20 until one interval holds every value (width 32), then ``*`` (worked by hand)."""
    ages = [str(a) for a in range(20, 40)]
    generated = build_hierarchy("age", ages)
    assert generated.builder == "interval"
    row = dict((r[0], r) for r in generated.rows)["20"]
    assert row == ("20", "[20-21[", "[20-22[", "[20-24[", "[20-28[", "[20-36[", "[20-52[", "*")
    assert dict((r[0], r) for r in generated.rows)["39"][1:4] == ("[39-40[", "[38-40[", "[36-40[")
    hierarchy = _round_trip(tmp_path, generated)
    assert set(hierarchy.base_values) == set(ages) and hierarchy.labels[-1] == ("*",)


def test_ages_like_adult_get_five_year_intervals_then_doubling(tmp_path):
    """17-90 spans 73: width 5 is the smallest nice width with fewer than 20 intervals (73/2 = 36.5, 73/5 = 14.6)."""
    generated = build_hierarchy("age", [str(a) for a in range(17, 91)])
    rows = {r[0]: r for r in generated.rows}
    assert rows["22"][1:4] == ("[20-25[", "[15-25[", "[15-35[")  # origin 15: the multiple of 5 at or below 17
    assert rows["90"][1] == "[90-95["
    _round_trip(tmp_path, generated)


def test_codes_of_one_length_are_masked_from_the_right(tmp_path):
    zips = ["02138", "02139", "02141", "10001"]
    generated = build_hierarchy("zip", [*zips, "?"])
    assert generated.builder == "mask"
    rows = {r[0]: r for r in generated.rows}
    assert rows["02138"] == ("02138", "0213*", "021**", "02***", "0****", "*")
    assert rows["?"] == ("?", "?", "?", "?", "?", "*")  # a missing value has its own chain
    hierarchy = _round_trip(tmp_path, generated)
    hierarchy.encode([*zips, "?"])  # every value of the column is listed


def test_other_text_is_grouped_alphabetically(tmp_path):
    values = ["Bachelors", "HS-grad", "Masters", "Doctorate", "Some-college", "Preschool", "9th"]
    generated = build_hierarchy("education", values, group_size=3)
    assert generated.builder == "group"
    rows = {r[0]: r for r in generated.rows}
    # sorted (case-folded): 9th, Bachelors, Doctorate | HS-grad, Masters, Preschool | Some-college
    assert rows["Bachelors"] == ("Bachelors", "9th..Doctorate", "*")
    assert rows["Masters"] == ("Masters", "HS-grad..Preschool", "*")
    assert rows["Some-college"] == ("Some-college", "Some-college", "*")
    _round_trip(tmp_path, generated)
    assert build_hierarchy("sex", ["F", "M"]).rows == (("F", "*"), ("M", "*"))


def test_the_suggested_builder():
    assert choose_builder(["1", "2.5", "-3"]) == "interval"
    assert choose_builder(["02138", "10001"]) == "mask"
    assert choose_builder(["10001", "20002"]) == "interval"  # no leading zero: a number
    assert choose_builder(["a", "1"]) == "group"
    assert choose_builder(["nan", "1"]) == "group"  # NaN is no number


def test_every_problem_of_every_column_is_reported_in_one_error_without_values():
    with pytest.raises(HierarchyGenerationError) as refused:
        build_hierarchies(
            {"a": ["x", " padded"], "b": ["1", "SECRETVALUE"], "c": ["01", "123"]},
            builders={"b": "interval", "c": "mask", "d": "group"},
        )
    message = str(refused.value)
    assert message.startswith("no hierarchy written (4 problem(s))")
    assert "['d']" in message  # a builder for a column that is not a quasi-identifier
    assert "'a': 1 value(s) are empty or have spaces" in message
    assert "'b': 1 distinct value(s) are not numbers" in message
    assert "'c': the values have 2 different lengths" in message
    assert "SECRETVALUE" not in message and "padded" not in message


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.integers(-10_000, 10_000).map(str),
            st.decimals(-1000, 1000, places=2, allow_nan=False, allow_infinity=False).map(str),
            st.text(st.characters(codec="utf-8", exclude_categories=("Cc", "Cs", "Zs", "Zl", "Zp")), min_size=1, max_size=6),
        ),
        min_size=1,
        max_size=40,
        unique=True,
    ),
    st.integers(2, 5),
)
def test_any_column_gives_a_valid_hierarchy_listing_every_value(values, group_size):
    """Property: whatever the values (numbers, decimals, text with ';' or quotes), the rows are a valid ARX
    hierarchy (same length, one parent per node, a single root) that lists every value exactly once."""
    values = [v for v in values if v.strip() == v and v]
    if not values:
        return
    generated = build_hierarchy("column", values, group_size=group_size)
    hierarchy = Hierarchy.from_rows(list(generated.rows), attribute="column")
    assert sorted(hierarchy.base_values) == sorted(set(values))
    assert hierarchy.labels[-1] == ("*",)
