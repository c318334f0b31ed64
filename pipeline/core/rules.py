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
from typing import Literal

import numpy as np
import pandas as pd

__all__ = [
    "APRIORI_MAX_BYTES",
    "RULE_COLUMNS",
    "choose_backend",
    "exact_fraction",
    "mine_strong_rules",
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
    """Integer item codes per record (n x m) and the (attribute, value) label of each item."""
    labels: list[tuple[str, str]] = []
    columns = []
    offset = 0
    for attribute in sensitive_attributes:
        codes, uniques = pd.factorize(records[attribute], sort=True)
        if (codes < 0).any():
            raise ValueError(f"sensitive attribute {attribute!r} has missing values; apply the missing-value policy first")
        columns.append(codes.astype(np.int64) + offset)
        labels.extend((attribute, str(v)) for v in uniques)
        offset += len(uniques)
    return np.column_stack(columns), labels


def _pair_counts_mlxtend(items: np.ndarray, n_items: int) -> tuple[np.ndarray, dict[tuple[int, int], int]]:
    """Item and item-pair counts from mlxtend's Apriori with ``max_len=2``, ``min_support = 1 record``."""
    from mlxtend.frequent_patterns import apriori

    n = items.shape[0]
    one_hot = np.zeros((n, n_items), dtype=bool)
    rows = np.repeat(np.arange(n), items.shape[1])
    one_hot[rows, items.ravel()] = True
    frequent = apriori(pd.DataFrame(one_hot), min_support=1.0 / n, use_colnames=False, max_len=2)
    item_counts = np.zeros(n_items, dtype=np.int64)
    pairs: dict[tuple[int, int], int] = {}
    for support, itemset in zip(frequent["support"].to_numpy(), frequent["itemsets"], strict=True):
        count = int(round(support * n))
        members = sorted(itemset)
        if len(members) == 1:
            item_counts[members[0]] = count
        else:
            pairs[(members[0], members[1])] = count
    return item_counts, pairs


def _pair_counts_counting(items: np.ndarray, n_items: int) -> tuple[np.ndarray, dict[tuple[int, int], int]]:
    """Item and item-pair counts by direct counting of value pairs per attribute pair (SPEC §2)."""
    item_counts = np.bincount(items.ravel(), minlength=n_items).astype(np.int64)
    pairs: dict[tuple[int, int], int] = {}
    m = items.shape[1]
    for i in range(m):
        for j in range(i + 1, m):
            key = items[:, i] * n_items + items[:, j]
            uniques, counts = np.unique(key, return_counts=True)
            for code, count in zip(uniques.tolist(), counts.tolist(), strict=True):
                pairs[(code // n_items, code % n_items)] = count
    return item_counts, pairs


def mine_strong_rules(
    records: pd.DataFrame,
    sensitive_attributes: Sequence[str],
    *,
    min_confidence: float,
    backend: Literal["mlxtend", "counting"] = "mlxtend",
) -> pd.DataFrame:
    """Mine every strong 1-to-1 rule between values of two different sensitive attributes.

    Parameters
    ----------
    records
        One row per record; must contain every column of ``sensitive_attributes`` with no
        missing value. Other columns are ignored (quasi-identifiers never enter rules).
    sensitive_attributes
        The sensitive attribute columns, in schema order (at least 2).
    min_confidence
        Threshold in (0, 1]; a rule is strong iff ``support_both / support_antecedent >=
        min_confidence`` in exact rational arithmetic (SPEC §1: 3/4 is strong at 0.75).
        ``min_support`` is fixed at 1 record (SPEC §1).
    backend
        ``"mlxtend"``: Apriori (``mlxtend.frequent_patterns.apriori``, ``max_len=2``), as P1 says;
        ``"counting"``: direct counting of value pairs, ``O(n m^2)``, identical output.

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
        attribute, or ``min_confidence`` outside (0, 1].

    References
    ----------
    P1 §3 (Apriori, strong rules); SPEC §2 and §15 rows 1-3.
    """
    threshold = _validate(records, sensitive_attributes, min_confidence)
    if len(records) == 0:
        return pd.DataFrame({c: pd.Series(dtype=t) for c, t in _RULE_DTYPES.items()})
    if backend not in ("mlxtend", "counting"):
        raise ValueError(f"unknown rule-mining backend {backend!r}; use 'mlxtend' or 'counting'")
    items, labels = _item_table(records, sensitive_attributes)
    counter = _pair_counts_mlxtend if backend == "mlxtend" else _pair_counts_counting
    item_counts, pairs = counter(items, len(labels))
    order = {a: k for k, a in enumerate(sensitive_attributes)}
    rows = []
    numerator, denominator = threshold.numerator, threshold.denominator
    for (x, y), both in pairs.items():
        if labels[x][0] == labels[y][0]:
            continue  # impossible (one value per cell), kept as a guard
        for antecedent, consequent in ((x, y), (y, x)):
            support_antecedent = int(item_counts[antecedent])
            if both * denominator >= numerator * support_antecedent:
                rows.append(
                    (
                        labels[antecedent][0],
                        labels[antecedent][1],
                        labels[consequent][0],
                        labels[consequent][1],
                        support_antecedent,
                        both,
                        both / support_antecedent,
                    )
                )
    rules = pd.DataFrame(rows, columns=RULE_COLUMNS).astype(_RULE_DTYPES)
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


#: Largest boolean array (bytes) mlxtend's Apriori may build: with ``max_len=2`` it materialises
#: candidate pairs x 2 x records (Adult's four sensitive attributes: about 0.36 GB). A sensitive
#: attribute with 10,000 distinct values would need about 1 TB.
APRIORI_MAX_BYTES = 1 << 30


def choose_backend(records: pd.DataFrame, sensitive_attributes: Sequence[str]) -> Literal["mlxtend", "counting"]:
    """``"mlxtend"`` (Apriori, as P1 says) unless its candidate array would exceed
    ``APRIORI_MAX_BYTES``; then ``"counting"``, whose rules are identical (tests/core/test_rules.py).

    Parameters
    ----------
    records
        The table rules are mined on (every column of ``sensitive_attributes``).
    sensitive_attributes
        Column names.
    """
    n_items = sum(int(records[a].nunique()) for a in sensitive_attributes)
    candidate_bytes = n_items * (n_items - 1) // 2 * 2 * len(records)
    return "mlxtend" if candidate_bytes <= APRIORI_MAX_BYTES else "counting"
