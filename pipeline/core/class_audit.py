"""Audit figures of a table of equivalence classes: a (k, ℓ) release, or a generalized table another tool wrote.

Such a table publishes every record whole: generalized (or suppressed, ``*``) quasi-identifier labels and the
sensitive values unchanged. An *equivalence class* is the set of records sharing one published quasi-identifier tuple
(or one ``cluster_id`` when the table carries it). The figures:

* **k**: the smallest class (Sweeney 2002; pycanon ``k_anonymity``).
* **distinct ℓ** and **entropy ℓ** per sensitive attribute (Machanavajjhala et al. 2007): the fewest distinct values
  of the attribute in a class, and the smallest ``exp(entropy)`` of its values in a class; "across attributes" is the
  minimum over the attributes (pycanon ``l_diversity`` / ``entropy_l_diversity`` with ``gen=True``; pycanon floors
  the entropy figure to an integer, here it is kept as a float).
* **Diverse over whole tuples** (P2; SPEC §14.1): the largest set of pairwise totally different sensitive tuples of a
  class; a class passes when ``Diverse ≥ ℓ``, decided exactly by
  :func:`pipeline.core.kl_anonymity.diverse_at_least_exact` wherever the greedy certificate is inconclusive. Distinct
  ℓ on every attribute does not imply it: the tuples (a, x, p), (a, y, q), (b, x, q) hold two values of every
  attribute, yet every two of them share a value (``Diverse = 1``).
* **one known value** (Li et al., Slicing, TKDE 2012): the share of records for which knowing one sensitive value
  pins another (:func:`pipeline.core.class_attacks.one_known_value_in_classes`).
* **learned model** (Kifer, SIGMOD 2009): members of a class are exchangeable for any model fitted on the table, so
  the posterior of a member's value is its share of the class; it is compared with the population baseline (the
  value's share of the whole table: what the adversary knows with no quasi-identifier), the bound being
  ``max(1/ℓ, baseline) + slack`` as for gate 9.
* **strong-rule adversary** (P1 §3.3 on whole records): knowing the victim's class and the antecedent value ``a`` of
  a strong rule ``a ⇒ b`` mined on the raw table, the adversary reads the share of ``b`` among the class's records
  holding ``a`` (:func:`whole_record_rule_adversary`).

Pure: pandas and numpy only, no I/O; counts and probabilities only, never a value.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from pipeline.core.class_attacks import one_known_value_in_classes
from pipeline.core.columns import as_text
from pipeline.core.kl_anonymity.diverse import diverse_at_least_exact, diverse_exact, diverse_greedy
from pipeline.core.kl_anonymity.table import DIVERSE_EXACT_LIMIT

__all__ = ["class_audit", "equivalence_class_codes", "smallest_diverse", "whole_record_rule_adversary"]


def equivalence_class_codes(table: pd.DataFrame, quasi_identifiers: Sequence[str]) -> np.ndarray:
    """The equivalence class of every row: rows with the same published quasi-identifier labels (compared as text; a
    suppressed ``*`` is a label like any other, as ARX, anjana and pycanon count it) share a code.

    Parameters
    ----------
    table
        One row per published record; must hold every column of ``quasi_identifiers``.
    quasi_identifiers
        Column names (none: the whole table is one class).

    Returns
    -------
    numpy.ndarray
        int64 class codes ``0..n_classes-1``, aligned with ``table``'s rows.

    Raises
    ------
    KeyError
        A quasi-identifier column is missing.
    """
    columns = list(quasi_identifiers)
    if not columns:
        return np.zeros(len(table), dtype=np.int64)
    return as_text(table[columns]).groupby(columns, sort=True, observed=True).ngroup().to_numpy(np.int64)


def _sensitive_codes(table: pd.DataFrame, sensitive_attributes: Sequence[str]) -> np.ndarray:
    columns = [pd.factorize(as_text(table[a]), use_na_sentinel=False)[0].astype(np.int64) for a in sensitive_attributes]
    return np.stack(columns, axis=1) if columns else np.zeros((len(table), 0), dtype=np.int64)


def _class_blocks(class_codes: np.ndarray, codes: np.ndarray) -> list[np.ndarray]:
    order = np.argsort(class_codes, kind="stable")
    bounds = np.flatnonzero(np.diff(class_codes[order])) + 1
    return [codes[rows] for rows in np.split(order, bounds)] if len(order) else []


def smallest_diverse(blocks: Sequence[np.ndarray]) -> int:
    """The smallest ``Diverse`` (SPEC §14.1) over the classes, exactly.

    Classes are visited by their greedy lower bound; a class whose lower bound already reaches the current minimum is
    skipped (its ``Diverse`` cannot be smaller), the others are raised one tuple at a time by
    :func:`pipeline.core.kl_anonymity.diverse_at_least_exact` (or computed by ``diverse_exact`` up to
    ``DIVERSE_EXACT_LIMIT`` distinct tuples).

    Parameters
    ----------
    blocks
        One ``(n_records, n_attributes)`` code array per class.

    Returns
    -------
    int
        0 when there is no class.
    """
    if not blocks:
        return 0
    lower = [diverse_greedy(block) for block in blocks]
    best: int | None = None
    for index in np.argsort(lower, kind="stable"):
        block, value = blocks[index], lower[index]
        if best is not None and value >= best:
            break
        if len(np.unique(block, axis=0)) <= DIVERSE_EXACT_LIMIT:
            value = diverse_exact(block)
        else:
            while (best is None or value + 1 < best) and diverse_at_least_exact(block, value + 1):
                value += 1
        best = value if best is None else min(best, value)
    return int(best if best is not None else 0)


def _entropy_ell(shares: np.ndarray) -> float:
    shares = shares[shares > 0]
    return float(np.exp(-(shares * np.log(shares)).sum()))


def class_audit(
    table: pd.DataFrame,
    quasi_identifiers: Sequence[str],
    sensitive_attributes: Sequence[str],
    *,
    ell: int,
    class_column: str | None = None,
    slack: float = 0.05,
) -> dict[str, Any]:
    """The privacy figures of a table of equivalence classes (see the module docstring).

    Parameters
    ----------
    table
        One row per published record: the quasi-identifier labels (text), the sensitive attributes (text or
        categorical; a missing value is a value of its own) and, optionally, ``class_column``.
    quasi_identifiers, sensitive_attributes
        Column names (at least one sensitive attribute).
    ell
        The ℓ the classes are checked against (``Diverse ≥ ell``, distinct ℓ, bound ``1/ell``), ``≥ 1``.
    class_column
        A column naming each record's class (``cluster_id`` of a (k, ℓ) release); None: classes are the distinct
        quasi-identifier tuples (:func:`equivalence_class_codes`).
    slack
        Added to the learned-model bound (gate 9's ``posterior_slack``).

    Returns
    -------
    dict
        JSON-safe, counts and probabilities only: ``n_records``, ``n_classes``, ``k`` (smallest class),
        ``per_attribute`` (attribute -> ``distinct_ell`` (int), ``entropy_ell`` (float), ``n_classes_below_ell``),
        ``across_attributes`` (``distinct_ell``, ``entropy_ell``: the minima over the attributes), ``diverse``
        (``ell``, ``smallest``, ``n_classes_below_ell``, ``n_records_in_classes_below_ell``,
        ``n_classes_decided_by_search``), ``one_known_value`` (``share_records_pinning_another_value``) and
        ``learned_model`` (``slack``, ``n_cells``, ``n_cells_above_bound``, ``n_records_above_bound``,
        ``max_posterior``, ``mean_posterior``, ``mean_population_baseline``, ``per_attribute`` -> ``max_posterior``,
        ``max_population_baseline``, ``n_cells_above_bound``).

    Raises
    ------
    ValueError
        No sensitive attribute, or ``ell < 1``.
    KeyError
        A missing column.
    """
    attributes = list(sensitive_attributes)
    if not attributes:
        raise ValueError("the audit needs at least one sensitive attribute")
    if ell < 1:
        raise ValueError(f"ell must be >= 1, got {ell}")
    n = len(table)
    classes = (
        pd.factorize(table[class_column], use_na_sentinel=False)[0].astype(np.int64)
        if class_column is not None
        else equivalence_class_codes(table, quasi_identifiers)
    )
    codes = _sensitive_codes(table, attributes)
    sizes = np.bincount(classes) if n else np.zeros(0, dtype=np.int64)
    n_classes = int((sizes > 0).sum())

    per_attribute: dict[str, dict[str, Any]] = {}
    posterior_columns, above = [], np.zeros((n, len(attributes)), dtype=bool)
    learned_per_attribute: dict[str, dict[str, Any]] = {}
    baselines = []
    for j, attribute in enumerate(attributes):
        keys = [classes, codes[:, j]]
        pair_counts = pd.Series(np.ones(n)).groupby(keys, sort=False).transform("sum").to_numpy() if n else np.zeros(0)
        share = pair_counts / sizes[classes] if n else np.zeros(0)
        distinct = pd.Series(codes[:, j]).groupby(classes).nunique().to_numpy() if n else np.zeros(0, dtype=np.int64)
        counts = pd.Series(np.ones(n)).groupby(keys).sum() if n else pd.Series(dtype=float)
        entropies = [_entropy_ell(group.to_numpy() / group.sum()) for _, group in counts.groupby(level=0)] if n else []
        per_attribute[attribute] = {
            "distinct_ell": int(distinct.min()) if len(distinct) else 0,
            "entropy_ell": round(min(entropies), 6) if entropies else 0.0,
            "n_classes_below_ell": int((distinct < ell).sum()),
        }
        value_counts = np.bincount(codes[:, j]) if n else np.zeros(0)
        baseline = value_counts[codes[:, j]] / n if n else np.zeros(0)
        above[:, j] = share > np.maximum(1.0 / ell, baseline) + slack + 1e-12
        posterior_columns.append(share)
        baselines.append(baseline)
        learned_per_attribute[attribute] = {
            "max_posterior": round(float(share.max()), 6) if n else 0.0,
            "max_population_baseline": round(float(baseline.max()), 6) if n else 0.0,
            "n_cells_above_bound": int(above[:, j].sum()),
        }

    blocks = _class_blocks(classes, codes)
    below, searched = [], 0
    for block in blocks:
        if diverse_greedy(block, stop_at=ell) >= ell:
            below.append(False)
            continue
        searched += 1
        below.append(not diverse_at_least_exact(block, ell))
    below_mask = np.array(below, dtype=bool)
    posteriors = np.concatenate(posterior_columns) if n else np.zeros(0)
    known = one_known_value_in_classes(
        pd.DataFrame({"class": classes, **{a: codes[:, j] for j, a in enumerate(attributes)}}), attributes, class_column="class"
    )
    return {
        "n_records": int(n),
        "n_classes": n_classes,
        "k": int(sizes[sizes > 0].min()) if n_classes else 0,
        "per_attribute": per_attribute,
        "across_attributes": {
            "distinct_ell": min(v["distinct_ell"] for v in per_attribute.values()),
            "entropy_ell": min(v["entropy_ell"] for v in per_attribute.values()),
        },
        "diverse": {
            "ell": int(ell),
            "smallest": smallest_diverse(blocks),
            "n_classes_below_ell": int(below_mask.sum()),
            "n_records_in_classes_below_ell": int(sum(len(b) for b, bad in zip(blocks, below, strict=True) if bad)),
            "n_classes_decided_by_search": searched,
        },
        "one_known_value": {
            "share_records_pinning_another_value": round(known["share_records_pinning_another_value"], 6),
            "share_records_whole_tuple_pinned": round(known["share_records_whole_tuple_pinned"], 6),
            "whole_tuple_pinned_by": {str(a): round(v, 6) for a, v in known["whole_tuple_pinned_by"].items()},
        },
        "learned_model": {
            "slack": float(slack),
            "n_cells": int(above.size),
            "n_cells_above_bound": int(above.sum()),
            "n_records_above_bound": int(above.any(axis=1).sum()),
            "max_posterior": round(float(posteriors.max()), 6) if n else 0.0,
            "mean_posterior": round(float(posteriors.mean()), 6) if n else 0.0,
            "mean_population_baseline": round(float(np.concatenate(baselines).mean()), 6) if n else 0.0,
            "per_attribute": learned_per_attribute,
        },
    }


def whole_record_rule_adversary(table: pd.DataFrame, class_codes: np.ndarray, rules: pd.DataFrame, *, ell: int) -> dict[str, Any]:
    """The strong-rule adversary (P1 §3.3) on a table of whole records grouped in equivalence classes.

    The adversary knows the victim's class (from its quasi-identifiers) and, for a strong rule ``(S_i = a) ⇒ (S_j =
    b)`` mined on the raw table, the victim's value ``a``; the class's records holding ``a`` are the candidates, so
    its belief in ``b`` is the share of them holding ``b``. A record holding both ``a`` and ``b`` is exposed by the
    rule with that probability; it is above the bound when the probability exceeds ``1/ell``.

    Parameters
    ----------
    table
        The published records: the sensitive attribute columns the rules name (text).
    class_codes
        Each row's class (:func:`equivalence_class_codes`).
    rules
        :func:`pipeline.core.rules.mine_strong_rules` output (``antecedent_attribute``, ``antecedent_value``,
        ``consequent_attribute``, ``consequent_value``, ``confidence``).
    ell
        The bound's ℓ (``≥ 1``).

    Returns
    -------
    dict
        ``n_rules``, ``bound`` (1/ℓ), ``max_probability``, ``n_records_exposed`` (hold some rule's both values),
        ``n_records_above_bound``, ``n_records_certain`` (probability 1), ``per_rule`` (the 20 rules with the
        highest probability: antecedent, consequent, confidence, max_probability, n_records_above_bound).
    """
    n = len(table)
    best = np.zeros(n)
    exposed = np.zeros(n, dtype=bool)
    per_rule: list[dict[str, Any]] = []
    text = {
        a: as_text(table[a]).to_numpy(dtype=object)
        for a in set(rules["antecedent_attribute"]) | set(rules["consequent_attribute"])
    }
    for rule in rules.itertuples(index=False):
        holds_a = text[rule.antecedent_attribute] == str(rule.antecedent_value)
        holds_both = holds_a & (text[rule.consequent_attribute] == str(rule.consequent_value))
        if not holds_both.any():
            continue
        n_a = np.bincount(class_codes[holds_a], minlength=int(class_codes.max()) + 1)
        n_both = np.bincount(class_codes[holds_both], minlength=len(n_a))
        probability = np.where(holds_both, n_both[class_codes] / np.maximum(n_a[class_codes], 1), 0.0)
        best = np.maximum(best, probability)
        exposed |= holds_both
        per_rule.append(
            {
                "antecedent": [str(rule.antecedent_attribute), str(rule.antecedent_value)],
                "consequent": [str(rule.consequent_attribute), str(rule.consequent_value)],
                "confidence": round(float(rule.confidence), 6),
                "max_probability": round(float(probability.max()), 6),
                "n_records_above_bound": int((probability > 1.0 / ell + 1e-12).sum()),
            }
        )
    per_rule.sort(key=lambda r: (-float(r["max_probability"]), -int(r["n_records_above_bound"])))
    return {
        "n_rules": int(len(rules)),
        "bound": 1.0 / ell,
        "max_probability": round(float(best.max()), 6) if n else 0.0,
        "n_records_exposed": int(exposed.sum()),
        "n_records_above_bound": int((best > 1.0 / ell + 1e-12).sum()),
        "n_records_certain": int((best >= 1.0 - 1e-12).sum()),
        "per_rule": per_rule[:20],
    }
