"""The text helpers of pipeline/core/columns.py give what the per-row ``astype(str)`` they replace gives; the code
helpers give what pandas gives."""

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.core import columns
from pipeline.core.columns import as_text, distinct_per_group, first_occurrences, sorted_text_codes

values = st.one_of(
    st.sampled_from(["b", "a", "HS-grad", "10th", "9th", "é", "", "1", "1.0", "True", "nan"]),
    st.none(),
    st.integers(0, 12),
    # values that compare equal but print differently: 1, 1.0 and True; 0.0 and -0.0; and a missing float
    st.sampled_from([1.0, True, False, 0.0, -0.0, float("nan")]),
)


@settings(max_examples=200, deadline=None)
@given(column=st.lists(values, max_size=40), categorical=st.booleans())
def test_sorted_text_codes_equal_factorizing_the_text(column, categorical):
    series = pd.Series(column, dtype=object)
    if categorical:
        series = series.astype("category") if series.dropna().map(type).nunique() <= 1 else series.astype(str).astype("category")
    expected_codes, expected_labels = pd.factorize(series.astype(str), sort=True)
    codes, labels = sorted_text_codes(series)
    assert codes.tolist() == expected_codes.tolist()
    assert labels.tolist() == list(expected_labels)


def test_sorted_text_codes_of_a_categorical_keep_only_the_values_present():
    series = pd.Series(["b", "b", None], dtype=pd.CategoricalDtype(["a", "b", "c"]))
    codes, labels = sorted_text_codes(series)
    assert labels.tolist() == ["b", "nan"]
    assert codes.tolist() == [0, 0, 1]
    assert np.asarray(codes).dtype == np.int64


@settings(max_examples=200, deadline=None)
@given(column=st.lists(values, max_size=40), categorical=st.booleans())
def test_as_text_equals_astype_str(column, categorical):
    series = pd.Series(column, dtype=object, index=np.arange(len(column)) * 3 + 1, name="s")
    if categorical:
        series = series.astype("category") if series.dropna().map(type).nunique() <= 1 else series.astype(str).astype("category")
    expected = series.astype(str)
    got = as_text(series)
    assert got.dtype == object and got.name == "s" and got.index.equals(expected.index)
    assert got.tolist() == expected.tolist()
    frame = pd.DataFrame({"x": series, "y": np.arange(len(column))}, index=series.index)
    assert as_text(frame).equals(frame.astype(str))


def test_first_occurrences_give_each_text_once_with_the_record_of_its_first_appearance():
    column = pd.Series(["b", "a", "b", None, "c", "a"], dtype="category")
    values, numbers = first_occurrences(column, pd.Series([11, 12, 13, 14, 15, 16]))
    assert values == ["b", "a", "nan", "c"]
    assert numbers == [11, 12, 14, 15]


@settings(max_examples=200, deadline=None)
@given(
    cells=st.lists(st.one_of(st.none(), st.sampled_from(["b", "a", "HS-grad", "10th", "9th", "é", ""])), max_size=40),
    extra=st.lists(st.sampled_from(["zz", "c", "a", "0"]), max_size=3, unique=True),
    shuffle=st.randoms(use_true_random=False),
)
def test_present_sorted_categories_equal_pandas_remove_unused_then_sorted(cells, extra, shuffle):
    """:func:`present_sorted_categories` (integer work on the codes) gives what pandas' remove_unused_categories and
    reorder_categories(sorted(...)) give: the same codes and categories, unused and unsorted categories or not; an
    already tidy column is returned as is."""
    from pipeline.core.columns import present_sorted_categories

    categories = sorted({c for c in cells if c is not None} | set(extra))
    shuffle.shuffle(categories)
    values = pd.Categorical(cells, categories=categories)
    expected = values.remove_unused_categories()
    expected = expected.reorder_categories(sorted(expected.categories.tolist()))
    got = present_sorted_categories(pd.Series(values))
    assert got.categories.tolist() == expected.categories.tolist()
    assert got.codes.tolist() == expected.codes.tolist()
    assert present_sorted_categories(expected) is expected


@pytest.mark.parametrize("path", ["table", "sort"])
@settings(max_examples=150, deadline=None)
@given(
    pairs=st.lists(st.tuples(st.integers(0, 9), st.integers(-1, 40)), max_size=60),
    extra_groups=st.integers(0, 3),
)
def test_distinct_per_group_equals_pandas_nunique(path, pairs, extra_groups):
    """Both paths (the flag table, and the sort used when the table would be large) count what pandas' nunique
    counts per group, -1 included as a value; groups without a pair count 0."""
    group = np.array([g for g, _ in pairs], dtype=np.int64)
    codes = np.array([c for _, c in pairs], dtype=np.int64)
    n_groups = int(group.max(initial=-1)) + 1 + extra_groups
    expected = pd.Series(codes).groupby(group).nunique().reindex(range(n_groups), fill_value=0).to_numpy()
    with pytest.MonkeyPatch.context() as patch:
        if path == "sort":
            patch.setattr(columns, "_DISTINCT_TABLE_FLOOR", 0)
            patch.setattr(columns, "_DISTINCT_TABLE_BYTES_PER_PAIR", 0)
        got = distinct_per_group(group, codes, n_groups)
    assert got.dtype == np.int64
    assert got.tolist() == expected.tolist()


@pytest.mark.parametrize("groups", [[-1, 0, 1], [0, 1, 2]])
def test_distinct_per_group_refuses_a_group_outside_its_range(groups):
    """A group index below 0 or at ``n_groups`` or above is refused (the flag table would wrap it silently)."""
    with pytest.raises(ValueError, match="group indices"):
        distinct_per_group(np.array(groups, dtype=np.int64), np.array([1, 2, 3], dtype=np.int64), 2)


@settings(max_examples=200, deadline=None)
@given(column=st.lists(values, max_size=40), as_float=st.booleans())
def test_text_codes_ranks_and_joint_codes_group_the_values_by_their_text(column, as_float):
    """text_ranks, text_codes and joint_text_codes give equal codes exactly to equal texts (``astype(str)``) and -1 to
    missing values, on object columns mixing types and on float columns (0.0 and -0.0 print differently)."""
    series = pd.Series(column, dtype=object)
    if as_float:
        series = pd.to_numeric(series.map(lambda v: v if isinstance(v, (int, float)) else None), errors="coerce").astype(float)
    texts = series.astype(str).to_numpy(dtype=object)
    missing = series.isna().to_numpy()
    ranks = columns.text_ranks(series)
    assert (ranks[missing] == -1).all()
    present = np.flatnonzero(~missing)
    for i in present:
        for j in present:
            assert (ranks[i] == ranks[j]) == (texts[i] == texts[j])
            assert (ranks[i] < ranks[j]) == (texts[i] < texts[j])
    domain = pd.Index(sorted(set(texts[~missing])) + ["unused"])
    codes = columns.text_codes(series, domain)
    assert codes.tolist() == [-1 if m else domain.get_loc(t) for t, m in zip(texts, missing, strict=True)]
    other = pd.Series(list(reversed(column)), dtype=object)
    first, second = columns.joint_text_codes(series, other)
    other_texts, other_missing = other.astype(str).to_numpy(dtype=object), other.isna().to_numpy()
    assert (first[missing] == -1).all() and (second[other_missing] == -1).all()
    for i in present:
        for j in np.flatnonzero(~other_missing):
            assert (first[i] == second[j]) == (texts[i] == other_texts[j])
