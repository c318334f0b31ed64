"""Identity risk on the published quasi-identifiers: uniqueness and equivalence-class sizes.

An adversary who knows a person's quasi-identifiers (from a voter list, a registry, an acquaintance) looks them up in
the release. The records that publish the same quasi-identifier tuple form an *equivalence class*; a record alone in
its class (a *sample unique*) is singled out by its published quasi-identifiers, and a class of size s hides its
members among s. This is the re-identification view of ARX's risk analysis (records at risk, highest risk 1/k) and of
pycanon's default report (k-anonymity = the smallest class size), computed from the published tables only: a
generalised value (``*``, an interval) is one value here, as those tools count it. An adversary who knows the raw
quasi-identifiers can only be less certain than the exact match of published tuples says (a generalised tuple is
compatible with more records), so the figures are what the release shows at most.

Pure: pandas and numpy only, no I/O. Sources: Sweeney, "k-anonymity: a model for protecting privacy" (2002);
ARX's "Risk analysis" (prosecutor model: records in classes below a size); pycanon ``report`` (k-anonymity).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from pipeline.core.columns import as_text, combine_codes

__all__ = ["CLASS_SIZE_THRESHOLDS", "identity_risk", "identity_risk_from_class_sizes"]

#: The class sizes whose "records in smaller classes" the report shows (ARX's and sdcMicro's usual thresholds).
CLASS_SIZE_THRESHOLDS = (2, 5, 10)


def identity_risk(
    tables: Sequence[pd.DataFrame], quasi_identifiers: Sequence[str], *, thresholds: Sequence[int] = CLASS_SIZE_THRESHOLDS
) -> dict[str, object]:
    """Uniqueness and class sizes of the records of ``tables`` on their published quasi-identifiers.

    Parameters
    ----------
    tables
        The published tables that hold records with quasi-identifier columns (a mixed release: ``sac_released`` and
        ``attribute_table``; Rating: ``attribute_table``; (k, ℓ): ``kl_released``). One row per released record; the
        records of all tables are pooled, since the adversary looks a person up in every one of them. Columns may be
        text (object, string or categorical) or anything else, compared as text; a missing value is one value.
    quasi_identifiers
        The quasi-identifier columns, present in every table (a table with no row may lack them).
    thresholds
        Class sizes t (integers >= 2) for which the records in classes smaller than t are counted.

    Returns
    -------
    dict
        JSON-safe: ``quasi_identifiers`` (list), ``n_records`` (released records), ``n_classes`` (distinct published
        quasi-identifier tuples), ``smallest_class`` (k: the smallest class size; None without records), ``n_unique``
        (records alone in their class), ``unique_share`` (``n_unique / n_records``, 0..1; 0.0 without records),
        ``records_in_classes_smaller_than`` and ``share_in_classes_smaller_than`` (``str(t)`` -> records in classes
        of fewer than t records, and that number / ``n_records``).

    Raises
    ------
    ValueError
        A table with rows lacks a quasi-identifier column (named), no quasi-identifier is given, or a threshold is
        not an integer >= 2.
    """
    columns = list(quasi_identifiers)
    if not columns:
        raise ValueError("identity risk needs at least one quasi-identifier column")
    limits = [int(t) for t in thresholds]
    if any(t != s or t < 2 for t, s in zip(limits, thresholds, strict=True)):
        raise ValueError(f"class-size thresholds must be integers >= 2, got {list(thresholds)}")
    frames = []
    for position, table in enumerate(tables):
        if not len(table):
            continue
        missing = [c for c in columns if c not in table.columns]
        if missing:
            raise ValueError(f"published table {position} has no quasi-identifier column(s) {missing}")
        frames.append(as_text(table[columns]))
    n_records = sum(len(frame) for frame in frames)
    if n_records:
        pooled = pd.concat(frames, ignore_index=True)
        codes = [pd.factorize(pooled[c], use_na_sentinel=False)[0].astype(np.int64) for c in columns]
        _, class_sizes = np.unique(combine_codes(codes), return_counts=True)
    else:
        class_sizes = np.zeros(0, dtype=np.int64)
    sizes, n_classes_of_size = np.unique(class_sizes, return_counts=True)
    return identity_risk_from_class_sizes(sizes, n_classes_of_size, columns, thresholds=limits)


def identity_risk_from_class_sizes(
    sizes: Sequence[int] | np.ndarray,
    n_classes_of_size: Sequence[int] | np.ndarray,
    quasi_identifiers: Sequence[str],
    *,
    thresholds: Sequence[int] = CLASS_SIZE_THRESHOLDS,
) -> dict[str, object]:
    """The figures of :func:`identity_risk` from the histogram of equivalence-class sizes (what an out-of-core count
    of the published quasi-identifier tuples gives, e.g. a DuckDB ``GROUP BY`` over a sharded release's part files).

    Parameters
    ----------
    sizes
        Distinct class sizes (records per published quasi-identifier tuple), integers >= 1.
    n_classes_of_size
        Number of classes of each size (aligned with ``sizes``), integers >= 1.
    quasi_identifiers
        The quasi-identifier columns (echoed in the result).
    thresholds
        As :func:`identity_risk`.

    Returns
    -------
    dict
        As :func:`identity_risk`.

    Raises
    ------
    ValueError
        ``sizes`` and ``n_classes_of_size`` differ in length, or a threshold is not an integer >= 2.
    """
    size_array = np.asarray(sizes, dtype=np.int64)
    count_array = np.asarray(n_classes_of_size, dtype=np.int64)
    if size_array.shape != count_array.shape:
        raise ValueError("sizes and n_classes_of_size must have the same length")
    limits = [int(t) for t in thresholds]
    if any(t != s or t < 2 for t, s in zip(limits, thresholds, strict=True)):
        raise ValueError(f"class-size thresholds must be integers >= 2, got {list(thresholds)}")
    n_records = int((size_array * count_array).sum())
    n_unique = int(count_array[size_array == 1].sum())
    below = {str(t): int((size_array * count_array)[size_array < t].sum()) for t in limits}
    return {
        "quasi_identifiers": list(quasi_identifiers),
        "n_records": n_records,
        "n_classes": int(count_array.sum()),
        "smallest_class": int(size_array.min()) if len(size_array) else None,
        "n_unique": n_unique,
        "unique_share": n_unique / n_records if n_records else 0.0,
        "records_in_classes_smaller_than": below,
        "share_in_classes_smaller_than": {t: (n / n_records if n_records else 0.0) for t, n in below.items()},
    }
