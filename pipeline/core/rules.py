"""Strong association rules between values of two different sensitive attributes.

Source: P1 ("Privacy Protection Method for Multiple Sensitive Attributes Based on Strong Rule",
Math. Probl. Eng. 2015) §3, as reconstructed in SPEC §2: a rule is ``(S_i = a) => (S_j = b)``
with ``i != j``, one item on each side, ``min_support`` fixed at one record, and
``confidence >= min_confidence`` compared with exact rational arithmetic.
Support and confidence follow Agrawal, Imielinski & Swami (SIGMOD 1993).

This module is the only place that imports mlxtend.
"""

from __future__ import annotations

from collections.abc import Sequence
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pandas as pd

__all__ = [
    "APRIORI_MAX_BYTES",
    "MINING_BACKENDS",
    "RULE_COLUMNS",
    "exact_fraction",
    "mine_strong_rules",
    "resolve_mining_backend",
    "strong_rules_from_tuple_counts",
    "strong_values",
]

#: Columns of a strong-rule frame, in order.
RULE_COLUMNS = [
    "antecedent_attribute",
    "antecedent_value",
    "consequent_attribute",
    "consequent_value",
    "support_antecedent",
    "support_both",
    "confidence",
]


def exact_fraction(value: float | str | Fraction) -> Fraction:
    """Return the exact rational a user meant by a decimal such as ``0.8``.

    ``Fraction(0.8)`` is the binary double just above 4/5, which would make a rule of
    confidence exactly 4/5 fail ``>= 0.8``. The decimal text of the number is used instead.

    Raises
    ------
    ValueError
        If ``value`` is not a finite number.
    """
    if isinstance(value, Fraction):
        return value
    try:
        return Fraction(Decimal(str(value)))
    except (ArithmeticError, ValueError) as error:
        raise ValueError(f"min_confidence must be a finite number, got {value!r}") from error


def _validate(records: pd.DataFrame, sensitive_attributes: Sequence[str], min_confidence: float) -> Fraction:
    if len(sensitive_attributes) < 2:
        raise ValueError(
            f"at least 2 sensitive attributes are needed for cross-attribute rules, got {list(sensitive_attributes)}"
        )
    missing = [a for a in sensitive_attributes if a not in records.columns]
    if missing:
        raise ValueError(f"sensitive attribute column(s) {missing} not in the table (columns: {list(records.columns)})")
    threshold = exact_fraction(min_confidence)
    if not (0 < threshold <= 1):
        raise ValueError(f"min_confidence must lie in (0, 1], got {min_confidence!r}")
    return threshold


def _item_table(records: pd.DataFrame, sensitive_attributes: Sequence[str]) -> tuple[np.ndarray, list[tuple[str, str]]]:
    """Integer item codes per record (n x m, int32) and the (attribute, value) label of each
    item (values as text, sorted per attribute)."""
    labels: list[tuple[str, str]] = []
    columns = []
    offset = 0
    for attribute in sensitive_attributes:
        series = records[attribute]
        if isinstance(series.dtype, pd.CategoricalDtype):
            text = np.asarray(series.cat.categories.astype(str), dtype=object)
            uniques, inverse = np.unique(text, return_inverse=True)
            raw = series.cat.codes.to_numpy()
            if (raw < 0).any():
                codes = np.full(len(raw), -1)
            else:
                codes = inverse.reshape(-1)[raw]
                present = np.zeros(len(uniques), dtype=bool)
                present[codes] = True
                if not present.all():  # drop unused categories: an item exists only if it occurs
                    remap = np.cumsum(present) - 1
                    codes, uniques = remap[codes], uniques[present]
        else:
            codes, uniques = pd.factorize(series.astype(str).where(series.notna()), sort=True)
        if (codes < 0).any():
            raise ValueError(f"sensitive attribute {attribute!r} has missing values; apply the missing-value policy first")
        columns.append(codes.astype(np.int32) + offset)
        labels.extend((attribute, str(v)) for v in uniques)
        offset += len(uniques)
    return np.column_stack(columns), labels


PairCounts = tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]
"""``(item_counts, first_item, second_item, pair_count)``: support (records) of every item,
and of every co-occurring item pair (``first_item < second_item``, int64 arrays)."""


def _pairs_from_dict(item_counts: np.ndarray, pairs: dict[tuple[int, int], int]) -> PairCounts:
    keys = np.asarray(list(pairs), dtype=np.int64).reshape(-1, 2)
    counts = np.asarray(list(pairs.values()), dtype=np.int64)
    return item_counts, keys[:, 0], keys[:, 1], counts


def _one_hot(items: np.ndarray, n_items: int) -> pd.DataFrame:
    n = items.shape[0]
    one_hot = np.zeros((n, n_items), dtype=bool)
    rows = np.repeat(np.arange(n), items.shape[1])
    one_hot[rows, items.ravel()] = True
    return pd.DataFrame(one_hot)


def _pair_counts_mlxtend(items: np.ndarray, n_items: int, algorithm: str = "apriori") -> PairCounts:
    """Item and item-pair counts from mlxtend's Apriori or FP-growth with ``max_len=2``,
    ``min_support = 1 record``."""
    from mlxtend.frequent_patterns import apriori, fpgrowth

    n = items.shape[0]
    miner = apriori if algorithm == "apriori" else fpgrowth
    frequent = miner(_one_hot(items, n_items), min_support=1.0 / n, use_colnames=False, max_len=2)
    item_counts = np.zeros(n_items, dtype=np.int64)
    pairs: dict[tuple[int, int], int] = {}
    for support, itemset in zip(frequent["support"].to_numpy(), frequent["itemsets"], strict=True):
        count = int(round(support * n))
        members = sorted(itemset)
        if len(members) == 1:
            item_counts[members[0]] = count
        else:
            pairs[(members[0], members[1])] = count
    return _pairs_from_dict(item_counts, pairs)


def _pair_counts_counting(items: np.ndarray, n_items: int) -> PairCounts:
    """Item and item-pair counts by direct counting of value pairs per attribute pair (SPEC §2)."""
    item_counts = np.bincount(items.ravel(), minlength=n_items).astype(np.int64)
    firsts, seconds, counts = [], [], []
    m = items.shape[1]
    for i in range(m):
        for j in range(i + 1, m):
            key = items[:, i].astype(np.int64) * n_items + items[:, j]
            uniques, count = np.unique(key, return_counts=True)
            firsts.append(uniques // n_items)
            seconds.append(uniques % n_items)
            counts.append(count)
    return item_counts, np.concatenate(firsts), np.concatenate(seconds), np.concatenate(counts).astype(np.int64)


def _pair_counts_duckdb(items: np.ndarray, n_items: int) -> PairCounts:
    """Item and item-pair counts with DuckDB aggregates (one ``GROUP BY`` per attribute pair
    over the integer item codes; scales to tables of tens of millions of records)."""
    import duckdb

    m = items.shape[1]
    table = pd.DataFrame({f"i{k}": items[:, k] for k in range(m)})
    connection = duckdb.connect()
    try:
        connection.register("items", table)
        singles = " UNION ALL ".join(f"SELECT i{k} AS item, count(*) AS n FROM items GROUP BY i{k}" for k in range(m))
        single = connection.execute(singles).fetchnumpy()
        item_counts = np.zeros(n_items, dtype=np.int64)
        item_counts[single["item"].astype(np.int64)] = single["n"].astype(np.int64)
        pairs_sql = " UNION ALL ".join(
            f"SELECT i{i} AS first_item, i{j} AS second_item, count(*) AS n FROM items GROUP BY i{i}, i{j}"
            for i in range(m)
            for j in range(i + 1, m)
        )
        pairs = connection.execute(pairs_sql).fetchnumpy() if m > 1 else {"first_item": [], "second_item": [], "n": []}
    finally:
        connection.close()
    return (
        item_counts,
        np.asarray(pairs["first_item"], dtype=np.int64),
        np.asarray(pairs["second_item"], dtype=np.int64),
        np.asarray(pairs["n"], dtype=np.int64),
    )


#: Rule-mining back ends of :func:`mine_strong_rules` (all give the same rules).
MINING_BACKENDS = ("mlxtend-apriori", "mlxtend-fpgrowth", "duckdb", "counting")
_BACKEND_ALIASES = {"mlxtend": "mlxtend-apriori"}


#: Largest boolean array (bytes) mlxtend's Apriori may build: with ``max_len=2`` it materialises
#: candidate pairs x 2 x records (Adult's four sensitive attributes: about 0.36 GB); a sensitive
#: attribute with 10,000 distinct values in 10,000 records would need about 1 TB. ``"auto"`` keeps
#: this bound for its mlxtend back end too (the DuckDB aggregate gives the same rules).
APRIORI_MAX_BYTES = 1 << 30


def resolve_mining_backend(backend: str, n_records: int, *, duckdb_threshold: int, n_items: int | None = None) -> str:
    """The back end to use: ``backend`` itself, or for ``"auto"`` mlxtend's FP-growth below
    ``duckdb_threshold`` records and the DuckDB aggregate from there on. With ``n_items``
    (distinct values summed over the sensitive attributes), ``"auto"`` also takes the DuckDB
    aggregate when Apriori's candidate array would exceed ``APRIORI_MAX_BYTES``.

    Every back end gives the same rules (``tests/core/test_rules.py``). FP-growth (Han, Pei & Yin
    2000) is the default rather than Apriori (P1's wording) because it finds the same frequent item
    pairs without Apriori's candidate array: on Adult's 30,718 records 0.3 s of CPU instead of
    1.6 s, and no 0.5 GB peak (issue 18).

    Raises
    ------
    ValueError
        An unknown back end name.
    """
    backend = _BACKEND_ALIASES.get(backend, backend)
    if backend == "auto":
        too_large = n_items is not None and n_items * (n_items - 1) // 2 * 2 * n_records > APRIORI_MAX_BYTES
        return "duckdb" if n_records >= duckdb_threshold or too_large else "mlxtend-fpgrowth"
    if backend not in MINING_BACKENDS:
        raise ValueError(f"unknown rule-mining backend {backend!r}; use 'auto' or one of {list(MINING_BACKENDS)}")
    return backend


def mine_strong_rules(
    records: pd.DataFrame,
    sensitive_attributes: Sequence[str],
    *,
    min_confidence: float,
    backend: str = "mlxtend-fpgrowth",
    min_support: int = 1,
) -> pd.DataFrame:
    """Mine every strong 1-to-1 rule between values of two different sensitive attributes.

    Parameters
    ----------
    records
        One row per record; must contain every column of ``sensitive_attributes`` with no
        missing value (text, object or categorical dtype). Other columns are ignored
        (quasi-identifiers never enter rules).
    sensitive_attributes
        The sensitive attribute columns, in schema order (at least 2).
    min_confidence
        Threshold in (0, 1]; a rule is strong iff ``support_both / support_antecedent >=
        min_confidence`` in exact rational arithmetic (SPEC §1: 3/4 is strong at 0.75).
    backend
        How item and pair supports are counted; every back end gives the same rules:
        ``"mlxtend-fpgrowth"`` (the default): mlxtend's FP-growth
        (``mlxtend.frequent_patterns.fpgrowth``, ``max_len=2``) on a one-hot matrix of about
        ``n × items`` bytes. ``"mlxtend-apriori"`` (alias ``"mlxtend"``): Apriori
        (``mlxtend.frequent_patterns.apriori``), as P1 says, same output; its candidate array
        costs much more than the one-hot matrix (0.5 GB on Adult), so keep it below ~10^5 records.
        ``"duckdb"``: one DuckDB ``GROUP BY`` per attribute pair, ``O(n m^2)`` and
        out-of-core friendly (the choice for large tables). ``"counting"``: the same counts
        with numpy. ``"auto"`` is resolved by :func:`resolve_mining_backend` (callers).
    min_support
        Minimum support of a rule in records (``support_both >= min_support``, integer >= 1).
        SPEC §1 fixes it at 1 record (the default here, for the golden examples); releases use
        ``max(ℓ, 5)`` (issue 12): a rule held by one or two records is a fact about those
        records, not a pattern, and printing it ("the only 86-year-old's education") discloses
        them, while using it ties their cells to every other attribute of the cluster. Applied
        after counting, so every back end gives the same rules.

    Returns
    -------
    pandas.DataFrame
        One row per strong rule with columns ``RULE_COLUMNS``: ``antecedent_attribute``,
        ``antecedent_value``, ``consequent_attribute``, ``consequent_value`` (str),
        ``support_antecedent`` and ``support_both`` (int64, record counts) and ``confidence``
        (float64, for display; use the two counts for exact arithmetic). Both directions of a
        pair are separate rules. Sorted by antecedent attribute (schema order), antecedent
        value, consequent attribute (schema order), consequent value.

    Raises
    ------
    ValueError
        Fewer than 2 sensitive attributes, a missing column, a missing value in a sensitive
        attribute, ``min_confidence`` outside (0, 1], ``min_support`` below 1, or an unknown back end.

    References
    ----------
    P1 §3 (Apriori, strong rules); SPEC §2 and §15 rows 1-3; Agrawal & Srikant (VLDB 1994)
    for Apriori, Han, Pei & Yin (SIGMOD 2000) for FP-growth.
    """
    threshold = _validate(records, sensitive_attributes, min_confidence)
    if int(min_support) != min_support or min_support < 1:
        raise ValueError(f"min_support must be an integer number of records >= 1, got {min_support!r}")
    backend = _BACKEND_ALIASES.get(backend, backend)
    if backend not in MINING_BACKENDS:
        raise ValueError(f"unknown rule-mining backend {backend!r}; use one of {list(MINING_BACKENDS)}")
    if len(records) == 0:
        return pd.DataFrame({c: pd.Series(dtype=t) for c, t in _RULE_DTYPES.items()})
    items, labels = _item_table(records, sensitive_attributes)
    if backend == "mlxtend-apriori":
        counts = _pair_counts_mlxtend(items, len(labels), "apriori")
    elif backend == "mlxtend-fpgrowth":
        counts = _pair_counts_mlxtend(items, len(labels), "fpgrowth")
    elif backend == "duckdb":
        counts = _pair_counts_duckdb(items, len(labels))
    else:
        counts = _pair_counts_counting(items, len(labels))
    return _strong_rules_from_counts(counts, labels, sensitive_attributes, threshold, int(min_support))


def strong_rules_from_tuple_counts(
    tuple_counts: pd.DataFrame,
    sensitive_attributes: Sequence[str],
    *,
    min_confidence: float,
    min_support: int = 1,
    count_column: str = "n_records",
) -> pd.DataFrame:
    """The strong rules of a table from the counts of its distinct sensitive tuples (a ``GROUP BY`` over all records,
    e.g. summed over shards): exactly :func:`mine_strong_rules` on the table those counts describe.

    Parameters
    ----------
    tuple_counts
        One row per distinct tuple of ``sensitive_attributes`` (text, object or categorical; no missing value) and
        ``count_column`` (integer > 0: records holding the tuple). A tuple may appear on several rows (their counts
        add up).
    sensitive_attributes
        The sensitive attribute columns, in schema order (at least 2).
    min_confidence, min_support
        As :func:`mine_strong_rules`.
    count_column
        Name of the count column.

    Returns
    -------
    pandas.DataFrame
        ``RULE_COLUMNS``, sorted as :func:`mine_strong_rules` sorts them; supports are record counts (int64).

    Raises
    ------
    ValueError
        As :func:`mine_strong_rules`; a count that is not a positive integer; ``count_column`` missing.

    References
    ----------
    P1 §3; SPEC §2; design note SCALE.md §1 (item and pair counts add up over shards).
    """
    threshold = _validate(tuple_counts, sensitive_attributes, min_confidence)
    if int(min_support) != min_support or min_support < 1:
        raise ValueError(f"min_support must be an integer number of records >= 1, got {min_support!r}")
    if count_column not in tuple_counts.columns:
        raise ValueError(f"the tuple counts have no {count_column!r} column (columns: {list(tuple_counts.columns)})")
    weights = tuple_counts[count_column].to_numpy()
    if len(weights) and (not np.issubdtype(weights.dtype, np.integer) or int(weights.min()) < 1):
        raise ValueError(f"column {count_column!r} of the tuple counts must hold integers >= 1 (records per tuple)")
    weights = weights.astype(np.int64)
    if len(tuple_counts) == 0:
        return pd.DataFrame({c: pd.Series(dtype=t) for c, t in _RULE_DTYPES.items()})
    items, labels = _item_table(tuple_counts, sensitive_attributes)
    n_items = len(labels)
    item_counts = np.bincount(items.ravel(), weights=np.repeat(weights, items.shape[1]), minlength=n_items)
    firsts, seconds, counts = [], [], []
    for i in range(items.shape[1]):
        for j in range(i + 1, items.shape[1]):
            key = items[:, i].astype(np.int64) * n_items + items[:, j]
            uniques, inverse = np.unique(key, return_inverse=True)
            firsts.append(uniques // n_items)
            seconds.append(uniques % n_items)
            counts.append(np.bincount(inverse.reshape(-1), weights=weights, minlength=len(uniques)))
    pair_counts: PairCounts = (
        np.rint(item_counts).astype(np.int64),
        np.concatenate(firsts),
        np.concatenate(seconds),
        np.rint(np.concatenate(counts)).astype(np.int64),
    )
    return _strong_rules_from_counts(pair_counts, labels, sensitive_attributes, threshold, int(min_support))


def _strong_rules_from_counts(
    counts: PairCounts,
    labels: list[tuple[str, str]],
    sensitive_attributes: Sequence[str],
    threshold: Fraction,
    min_support: int = 1,
) -> pd.DataFrame:
    """Both directions of every counted pair, kept iff ``both / antecedent >= threshold`` exactly."""
    item_counts, first, second, both = counts
    item_attribute = np.asarray([attribute for attribute, _ in labels], dtype=object)
    item_value = np.asarray([value for _, value in labels], dtype=object)
    different = item_attribute[first] != item_attribute[second]  # always true; kept as a guard
    first, second, both = first[different], second[different], both[different]
    antecedent = np.concatenate([first, second])
    consequent = np.concatenate([second, first])
    support_both = np.concatenate([both, both]).astype(np.int64)
    support_antecedent = item_counts[antecedent].astype(np.int64)
    numerator, denominator = threshold.numerator, threshold.denominator
    if (
        denominator * max(int(support_both.max(initial=0)), 1) < 2**62
        and numerator * max(int(support_antecedent.max(initial=0)), 1) < 2**62
    ):
        strong = support_both * denominator >= numerator * support_antecedent
    else:  # exact arithmetic with Python integers for huge denominators
        strong = np.asarray(
            [int(b) * denominator >= numerator * int(a) for a, b in zip(support_antecedent, support_both, strict=True)],
            dtype=bool,
        )
    strong &= support_both >= min_support
    antecedent, consequent = antecedent[strong], consequent[strong]
    support_both, support_antecedent = support_both[strong], support_antecedent[strong]
    rules = pd.DataFrame(
        {
            "antecedent_attribute": item_attribute[antecedent],
            "antecedent_value": item_value[antecedent],
            "consequent_attribute": item_attribute[consequent],
            "consequent_value": item_value[consequent],
            "support_antecedent": support_antecedent,
            "support_both": support_both,
            "confidence": support_both / np.maximum(support_antecedent, 1),
        }
    ).astype(_RULE_DTYPES)
    order = {a: k for k, a in enumerate(sensitive_attributes)}
    rules = rules.sort_values(
        by=["antecedent_attribute", "antecedent_value", "consequent_attribute", "consequent_value"],
        key=lambda s: s.map(order) if s.name.endswith("attribute") else s,
        kind="stable",
    )
    return rules.reset_index(drop=True)


_RULE_DTYPES = {
    "antecedent_attribute": object,
    "antecedent_value": object,
    "consequent_attribute": object,
    "consequent_value": object,
    "support_antecedent": "int64",
    "support_both": "int64",
    "confidence": "float64",
}


def strong_values(rules: pd.DataFrame, sensitive_attributes: Sequence[str]) -> dict[str, set[str]]:
    """Strong values per sensitive attribute: values on either side of some strong rule.

    Parameters
    ----------
    rules
        Frame with ``RULE_COLUMNS`` (as returned by :func:`mine_strong_rules`).
    sensitive_attributes
        All sensitive attributes; each gets an entry (possibly empty).

    Returns
    -------
    dict
        ``{attribute: set of strong values (str)}``.

    References
    ----------
    P1 Definition of strong value; SPEC §2.
    """
    result: dict[str, set[str]] = {a: set() for a in sensitive_attributes}
    for side in ("antecedent", "consequent"):
        for attribute, value in zip(rules[f"{side}_attribute"], rules[f"{side}_value"], strict=True):
            result[attribute].add(str(value))
    return result
