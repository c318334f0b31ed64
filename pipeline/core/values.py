"""Look-alike values are one value: diversity is counted after Unicode normalisation.

ℓ-diversity counts distinct values. Counted byte for byte, a table in which every diagnosis is
HIV, spelled ``HIV``, ``hiv``, ``HIV`` + zero-width space and right-to-left override + ``HIV``,
passes as "4-diverse" while every record holds the same value (issue 12, item "look-alike
values"). Before any counting, every value is mapped to a *key*: Unicode NFKC (compatibility
composition: ligatures, full-width forms, combining accents), removal of format characters
(category Cf: zero-width spaces and joiners, bidirectional controls such as U+202E, soft
hyphen, byte-order mark), case folding (``str.casefold``) and removal of surrounding white
space. Values with the same key are one value, published under one canonical spelling: the
spelling held by the most records, ties broken by code-point order. A value that has no
look-alike is kept byte for byte.

Semantic synonyms (``VIH`` for ``HIV``, ``Ca.`` for ``carcinoma``) cannot be recognised this
way; they need a custodian's dictionary.

Sources: Unicode Standard Annex #15 (normalisation forms), Unicode §5.18 (case folding) and
§23.2 (format characters); Machanavajjhala et al., ℓ-diversity (ICDE 2006), which assumes
values are compared as the adversary compares them.
"""

from __future__ import annotations

import unicodedata

import numpy as np

__all__ = ["canonical_spellings", "merge_look_alike_values", "value_key"]


def value_key(value: str) -> str:
    """The comparison key of a value: NFKC, without format (Cf) characters, case-folded, stripped.

    >>> value_key("\\u202eHIV\\u200b") == value_key("hiv")
    True
    """
    text = unicodedata.normalize("NFKC", str(value))
    text = "".join(ch for ch in text if unicodedata.category(ch) != "Cf")
    return text.casefold().strip()


def merge_look_alike_values(codes: np.ndarray, categories: np.ndarray) -> tuple[np.ndarray, np.ndarray, dict[str, int]]:
    """Merge the categories of one column that have the same :func:`value_key`.

    Parameters
    ----------
    codes
        int64 codes into ``categories`` (one per record; ``-1`` = missing).
    categories
        Object array of distinct text values.

    Returns
    -------
    (codes, categories, counts)
        New codes and categories (sorted by text; one per key, the canonical spelling: the
        spelling with the most records, ties by code-point order), and ``counts``:
        ``n_values_merged`` (spellings that were folded into another one) and
        ``n_records_respelled`` (records whose published value differs from what they held).
        Numbers only: the spellings themselves are never reported. Cost: one pass over the
        categories plus one array look-up over the codes, so memory does not grow with the
        number of records times the length of a value.

    Raises
    ------
    ValueError
        A code outside ``[-1, len(categories))``.
    """
    categories = np.asarray(categories, dtype=object)
    if len(codes) and (codes.max(initial=-1) >= len(categories) or codes.min(initial=0) < -1):
        raise ValueError("a code is outside the categories")
    if len(categories) < 2:
        return codes, categories, {"n_values_merged": 0, "n_records_respelled": 0}
    sizes = np.bincount(codes[codes >= 0], minlength=len(categories))
    target, counts = canonical_spellings(categories, sizes)
    if not counts["n_values_merged"]:
        return codes, categories, counts
    merged_text = categories[target]
    new_categories = np.asarray(sorted(set(merged_text.tolist())), dtype=object)
    position = {value: k for k, value in enumerate(new_categories.tolist())}
    remap = np.asarray([position[v] for v in merged_text.tolist()], dtype=np.int64)
    new_codes = np.where(codes >= 0, remap[np.where(codes >= 0, codes, 0)], -1)
    return new_codes, new_categories, counts


def canonical_spellings(categories: np.ndarray, sizes: np.ndarray) -> tuple[np.ndarray, dict[str, int]]:
    """The canonical spelling of every distinct value of one column, from the records holding each (the rule of
    :func:`merge_look_alike_values`, on a table of distinct values instead of one code per record).

    Parameters
    ----------
    categories
        Object array of distinct text values.
    sizes
        int64, records holding each value (same length).

    Returns
    -------
    (target, counts)
        ``target`` (int64, same length): the index in ``categories`` of each value's canonical spelling (the
        spelling of its :func:`value_key` held by the most records, ties by code-point order; itself when it has no
        look-alike); ``counts``: ``n_values_merged`` and ``n_records_respelled``, as
        :func:`merge_look_alike_values` (numbers only).
    """
    categories = np.asarray(categories, dtype=object)
    sizes = np.asarray(sizes, dtype=np.int64)
    identity = np.arange(len(categories), dtype=np.int64)
    if len(categories) < 2:
        return identity, {"n_values_merged": 0, "n_records_respelled": 0}
    keys = [value_key(v) for v in categories.tolist()]
    if len(set(keys)) == len(keys):
        return identity, {"n_values_merged": 0, "n_records_respelled": 0}
    canonical: dict[str, int] = {}
    for index, key in enumerate(keys):
        best = canonical.get(key)
        if (
            best is None
            or sizes[index] > sizes[best]
            or (sizes[index] == sizes[best] and str(categories[index]) < str(categories[best]))
        ):
            canonical[key] = index
    target = np.asarray([canonical[k] for k in keys], dtype=np.int64)
    changed = target != identity
    return target, {"n_values_merged": int(changed.sum()), "n_records_respelled": int(sizes[changed].sum())}
