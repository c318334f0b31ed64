"""Text-column helpers that work on object and categorical columns alike.

The loader gives categorical columns (one dictionary per column) so that tables of millions of
records never hold one Python string per cell; these helpers compare through the categories
instead of converting every cell to ``str``.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
import pandas as pd

__all__ = ["values_mask"]


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
