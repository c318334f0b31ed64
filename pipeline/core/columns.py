"""Text-column helpers that work on object and categorical columns alike.

The loader gives categorical columns (one dictionary per column) so that tables of millions of
records never hold one Python string per cell; these helpers compare through the categories
instead of converting every cell to ``str``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np
import pandas as pd

__all__ = [
    "as_text",
    "category_texts",
    "combine_codes",
    "distinct_per_group",
    "factorize_by_text",
    "first_occurrences",
    "joint_text_codes",
    "present_sorted_categories",
    "text_codes",
    "text_ranks",
    "values_mask",
]


def category_texts(categories: pd.Index) -> np.ndarray:
    """Object array (len(categories),) of ``str`` of each category, what ``categories.astype(str)`` gives, never
    through a fixed-width numpy unicode array (whose size is the number of categories times the longest text)."""
    if categories.dtype == object:
        return np.asarray(categories.astype(str), dtype=object)  # object to object: one str per category
    return np.asarray([str(value) for value in categories.astype(str)], dtype=object)  # numbers: short texts


def as_text(values: pd.Series | pd.DataFrame) -> pd.Series | pd.DataFrame:
    """``values.astype(str)`` (same index, names and order; object columns of ``str``; a missing value becomes the
    text ``'nan'`` or ``'None'`` as ``astype(str)`` gives it) with memory that does not depend on the longest value.

    pandas turns a categorical column into text through a fixed-width numpy unicode array of one cell per row,
    4 bytes per character of the *longest* category (issue 14: one 1 MiB value in a 3,000-row table took 23 GB);
    here a categorical column is mapped through its categories' texts (one ``str`` per category, shared by the
    rows), so the cost is one pointer per row. Other columns are left to ``astype(str)``, which already gives
    objects (numbers make short texts)."""
    if isinstance(values, pd.DataFrame):
        return pd.DataFrame({i: as_text(values.iloc[:, i]) for i in range(values.shape[1])}, index=values.index).set_axis(
            values.columns, axis=1
        )
    if not isinstance(values.dtype, pd.CategoricalDtype):
        return values.astype(str)
    lookup = np.append(category_texts(values.cat.categories), np.asarray([str(np.nan)], dtype=object))
    codes = values.cat.codes.to_numpy()
    return pd.Series(lookup[codes], index=values.index, name=values.name, dtype=object)  # code -1 (missing) -> 'nan'


def present_sorted_categories(values: pd.Categorical | pd.Series) -> pd.Categorical:
    """``values`` (a categorical) with exactly the categories present, sorted: what
    ``values.remove_unused_categories().reorder_categories(sorted(...))`` gives (the same codes and categories), by
    integer work on the codes: one ``np.bincount`` when nothing is to change (a staged shard's columns usually), the
    sort of the categories kept otherwise (pandas' own take a sort of every code, seconds per column at 10M rows).

    Parameters
    ----------
    values
        A pandas Categorical, or a Series of categorical dtype; missing cells (code -1) stay missing.

    Returns
    -------
    pandas.Categorical
        ``values`` itself (as a Categorical) when its categories are already the present values, sorted; else a new
        one, ``ordered`` as ``values``, whose categories keep the dtype of ``values``' (pandas' chain makes a list of
        them, object dtype: the same for the object categories every caller has).
    """
    values = values.array if isinstance(values, pd.Series) else values
    codes = np.asarray(values.codes, dtype=np.int64)
    categories = values.categories
    used = np.bincount(codes[codes >= 0], minlength=len(categories)) > 0
    kept = categories[used]
    if used.all() and kept.is_monotonic_increasing:
        return values
    order = np.argsort(np.asarray(kept, dtype=object), kind="stable")
    new_code = np.full(len(categories), -1, dtype=np.int64)
    new_code[np.flatnonzero(used)[order]] = np.arange(len(kept), dtype=np.int64)
    return pd.Categorical.from_codes(np.where(codes >= 0, new_code[codes], -1), categories=kept[order], ordered=values.ordered)


def first_occurrences(column: pd.Series, record_numbers: pd.Series) -> tuple[list[str], list[int]]:
    """The distinct texts of ``column`` (as :func:`as_text` gives them) in order of first appearance, and the
    record number (from ``record_numbers``, aligned with ``column``) of each first appearance: what a check of
    every value needs, and a message naming a record instead of a value (issue 14)."""
    texts = as_text(column)
    first = ~texts.duplicated().to_numpy()
    return texts.to_numpy(dtype=object)[first].tolist(), record_numbers.to_numpy()[first].tolist()


def values_mask(column: pd.Series, values: Iterable[str]) -> np.ndarray:
    """Boolean array (len(column),): which cells hold one of ``values``, compared as text.

    A categorical column is compared through its categories (O(categories + n) integer work);
    an object column of strings directly; any other column after ``astype(str)``.
    """
    wanted = [str(v) for v in values]
    if isinstance(column.dtype, pd.CategoricalDtype):
        categories = np.asarray(column.cat.categories.astype(str), dtype=object)
        matching = np.flatnonzero(np.isin(categories, wanted)) if len(wanted) else np.zeros(0, dtype=np.int64)
        codes = column.cat.codes.to_numpy()
        if len(matching) == 0:
            return np.zeros(len(codes), dtype=bool)
        lookup = np.zeros(len(categories) + 1, dtype=bool)
        lookup[matching] = True
        return lookup[np.where(codes < 0, len(categories), codes)]
    if column.dtype == object and pd.api.types.infer_dtype(column, skipna=False) == "string":
        return column.isin(wanted).to_numpy()
    return column.astype(str).isin(wanted).to_numpy()


def factorize_by_text(series: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """``pd.factorize(series, use_na_sentinel=True)`` with the values grouped by their text: int64 codes
    ``(len(series),)`` (-1 for a missing value) and the object array of the distinct values' texts (``str(value)``, one
    per code). The text is made once per distinct value when the values are strings (or the column is of an integer
    or boolean dtype), where equal values print alike; otherwise (floats, an object column mixing types) once per row,
    since values that compare equal may print differently (``1``, ``1.0`` and ``True``; ``0.0`` and ``-0.0``) and
    must get different codes, as their texts differ. Not for categorical columns (their categories are the texts)."""
    codes, uniques = pd.factorize(series, use_na_sentinel=True)
    dtype = series.dtype
    exact = pd.api.types.is_integer_dtype(dtype) or pd.api.types.is_bool_dtype(dtype)
    if not exact:
        exact = all(isinstance(value, str) for value in np.asarray(uniques, dtype=object))
    if exact:
        return codes.astype(np.int64), np.asarray(pd.Index(uniques).astype(str), dtype=object)
    missing = series.isna().to_numpy()
    codes, uniques = pd.factorize(series.astype(str).to_numpy(dtype=object))
    codes = codes.astype(np.int64)
    codes[missing] = -1
    return codes, np.asarray(uniques, dtype=object)


def text_ranks(series: pd.Series) -> np.ndarray:
    """int64 codes (len(series),) whose order is the order of the values' text (equal text,
    equal code; missing values -1)."""
    if isinstance(series.dtype, pd.CategoricalDtype):
        text = np.asarray(series.cat.categories.astype(str), dtype=object)
        _, inverse = np.unique(text, return_inverse=True)
        codes = series.cat.codes.to_numpy()
        return np.where(codes < 0, -1, inverse.reshape(-1)[np.where(codes < 0, 0, codes)]).astype(np.int64)
    codes, text = factorize_by_text(series)
    _, inverse = np.unique(text, return_inverse=True)
    inverse = inverse.reshape(-1).astype(np.int64)
    return np.where(codes < 0, -1, inverse[np.clip(codes, 0, None)] if len(inverse) else -1).astype(np.int64)


def sorted_text_codes(series: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """What ``pd.factorize(series.astype(str), sort=True)`` returns, with the text made once per distinct value
    (categories or ``pd.factorize`` uniques), never once per row: int64 codes ``(len(series),)`` and the object
    array of the distinct texts present, sorted. A missing value is the text ``astype(str)`` gives it (``'nan'``,
    ``'None'``)."""
    if isinstance(series.dtype, pd.CategoricalDtype):
        raw = series.cat.codes.to_numpy().astype(np.int64)
        distinct = [str(value) for value in series.cat.categories]
        if (raw < 0).any():
            distinct.append(str(np.nan))
            raw = np.where(raw < 0, len(distinct) - 1, raw)
    else:
        raw, texts = factorize_by_text(series)
        distinct = list(texts)
        missing = raw < 0
        if missing.any():  # None and NaN have different texts: take them row by row (only the missing rows)
            missing_codes, missing_texts = pd.factorize(series[missing].astype(str).to_numpy(dtype=object))
            raw[missing] = len(distinct) + missing_codes
            distinct.extend(missing_texts)
    labels, inverse = np.unique(np.asarray(distinct, dtype=object), return_inverse=True)
    codes = inverse.reshape(-1).astype(np.int64)[raw] if len(raw) else np.zeros(0, dtype=np.int64)
    present = np.bincount(codes, minlength=len(labels)) > 0
    if not present.all():
        codes = (np.cumsum(present) - 1)[codes]
        labels = labels[present]
    return codes.astype(np.int64), np.asarray(labels, dtype=object)


def text_codes(series: pd.Series, domain: pd.Index) -> np.ndarray:
    """int64 codes (len(series),): the position of each value's text in ``domain`` (a pandas Index of
    distinct strings), -1 for a missing value or a text not in ``domain``. The conversion to text is
    made once per distinct value (categories or ``pd.factorize`` uniques), never once per row, so the
    cost is a hash per row and the memory does not depend on the longest value."""
    if isinstance(series.dtype, pd.CategoricalDtype):
        distinct = series.cat.categories
        codes = series.cat.codes.to_numpy().astype(np.int64)
    else:
        codes, distinct = factorize_by_text(series)
    positions = domain.get_indexer(pd.Index(distinct).astype(str)).astype(np.int64) if len(distinct) else np.zeros(0, np.int64)
    if not len(positions):
        return np.full(len(codes), -1, dtype=np.int64)
    return np.where(codes < 0, -1, positions[np.clip(codes, 0, None)]).astype(np.int64)


def joint_text_codes(first: pd.Series, second: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """int64 codes of two text columns in one shared code space (equal text, equal code;
    missing values get -1). Categorical columns are coded through their categories, so no
    Python string is made per row."""

    def parts(series: pd.Series) -> tuple[np.ndarray, np.ndarray]:
        if isinstance(series.dtype, pd.CategoricalDtype):
            return np.asarray(series.cat.categories.astype(str), dtype=object), series.cat.codes.to_numpy().astype(np.int64)
        codes, texts = factorize_by_text(series)  # text made once per distinct value when they are strings
        return texts, codes

    first_values, first_codes = parts(first)
    second_values, second_codes = parts(second)
    _, inverse = np.unique(np.concatenate([first_values, second_values]), return_inverse=True)
    inverse = inverse.reshape(-1).astype(np.int64)
    first_map, second_map = inverse[: len(first_values)], inverse[len(first_values) :]
    first_out = np.where(first_codes < 0, -1, first_map[np.clip(first_codes, 0, None)] if len(first_map) else -1)
    second_out = np.where(second_codes < 0, -1, second_map[np.clip(second_codes, 0, None)] if len(second_map) else -1)
    return first_out.astype(np.int64), second_out.astype(np.int64)


def combine_codes(columns: Sequence[np.ndarray]) -> np.ndarray:
    """One int64 per row for a tuple of int code columns (each >= -1), order-preserving
    (lexicographic over the columns) and equal exactly for equal tuples: a mixed radix when it
    fits in int64, else the dense rank of the rows (``np.unique`` over rows)."""
    radices = [int(c.max(initial=0)) + 2 for c in columns]
    if float(np.prod(radices, dtype=float)) < 2**62:
        combined = np.zeros(len(columns[0]), dtype=np.int64)
        for column, radix in zip(columns, radices, strict=True):
            combined = combined * radix + (column + 1)
        return combined
    _, inverse = np.unique(np.column_stack(columns), axis=0, return_inverse=True)
    return inverse.reshape(-1).astype(np.int64)


#: The flags of :func:`distinct_per_group`'s table path: at most this many bytes per (group, code) pair counted
#: (the sort path's own copy of the pairs is 8), above a floor that small inputs may always use.
_DISTINCT_TABLE_BYTES_PER_PAIR = 32
_DISTINCT_TABLE_FLOOR = 1 << 20


def distinct_per_group(group_index: np.ndarray, codes: np.ndarray, n_groups: int) -> np.ndarray:
    """int64 array (n_groups,): number of distinct ``codes`` (int, >= -1; -1 counts as a value)
    per dense ``group_index`` (0..n_groups-1), by counting unique (group, code) pairs.

    When the (groups x codes) table of flags is small (at most ``_DISTINCT_TABLE_BYTES_PER_PAIR`` bytes per pair,
    or ``_DISTINCT_TABLE_FLOOR`` in all) every pair sets its flag and each group's flags are counted: 2-4x faster
    than sorting the pairs at 1M records (issue 18). Otherwise the pairs are sorted and the first of each run is
    counted. Both give the same counts.

    Raises
    ------
    ValueError
        A group index outside ``0..n_groups-1``."""
    if len(group_index) and (int(group_index.min()) < 0 or int(group_index.max()) >= n_groups):
        raise ValueError(f"group indices must lie in 0..{n_groups - 1}, got {int(group_index.min())}..{int(group_index.max())}")
    radix = int(codes.max(initial=0)) + 2
    pairs = group_index.astype(np.int64) * radix + codes.astype(np.int64) + 1
    cells = int(n_groups) * radix
    if cells <= max(_DISTINCT_TABLE_FLOOR, _DISTINCT_TABLE_BYTES_PER_PAIR * len(pairs)):
        seen = np.zeros(cells, dtype=bool)
        seen[pairs] = True
        return np.count_nonzero(seen.reshape(int(n_groups), radix), axis=1).astype(np.int64)
    pairs.sort()  # sorting beats hashing here
    first = np.ones(len(pairs), dtype=bool)
    first[1:] = pairs[1:] != pairs[:-1]
    return np.bincount(pairs[first] // radix, minlength=n_groups).astype(np.int64)
