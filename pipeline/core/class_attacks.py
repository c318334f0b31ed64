"""The attacks of issue 12 on a release of equivalence classes (the (k, ℓ) model, P2).

A (k, ℓ) release publishes every record whole: generalized quasi-identifiers, a ``cluster_id``
(its equivalence class) and its sensitive values unchanged. Members of a class share their
published quasi-identifiers, so an adversary who knows the victim's quasi-identifiers finds the
victim's class, not its row. What each adversary of ``docs/attacks.md`` gets:

* **learned model** (Kifer, SIGMOD 2009): whatever P(sensitive | quasi-identifiers) it learns from
  the release, the members of a class are exchangeable for it, so the exact posterior of the
  victim's value is the value's share of the class (:func:`class_posteriors`). ℓ-diversity of
  P2 (``Diverse ≥ ℓ``: distinct values) does not bound that share by ``1/ℓ``.
* **one known value** (Li et al., Slicing, TKDE 2012): rows are published whole, so knowing the
  victim's value on one attribute narrows the class to the rows holding it; when those rows agree
  on another attribute, that value is pinned (:func:`one_known_value_in_classes`).
* **strong rules** (P1 §3.3, SPEC §10): the adversary knows the strong rules mined on the input and the victim's
  class and antecedent value; the class's rows holding the antecedent are the candidates, so a class whose holders
  all hold the consequent discloses it with certainty
  (:func:`pipeline.core.class_audit.whole_record_rule_adversary`). Nothing in P2's model bounds it.
* **composition** (Ganta, Kasiviswanathan & Smith, KDD 2008): the candidate set of a record on an
  attribute is the set of values of its class (:func:`class_candidate_sets`), intersected with
  another release's by :func:`pipeline.core.composition.intersection_attack`.

Input order is measured by :func:`pipeline.core.order_attack.input_order_correlations` on
``row_id`` and ``cluster_id``; there are no SIDs to replay and no suppressed cells (whole records
are suppressed instead).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from pipeline.core.columns import as_text, combine_codes, distinct_per_group, sorted_text_codes
from pipeline.core.posterior import population_posterior

__all__ = ["class_attack_figures", "class_candidate_sets", "class_posteriors", "one_known_value_in_classes"]


def _input_rows(released: pd.DataFrame, row_map: pd.DataFrame) -> np.ndarray:
    to_input = pd.Series(row_map["input_row_number"].to_numpy(np.int64), index=row_map["row_id"].to_numpy(np.int64))
    return to_input.loc[released["row_id"].to_numpy(np.int64)].to_numpy()


def class_candidate_sets(
    released: pd.DataFrame, row_map: pd.DataFrame, sensitive_attributes: Sequence[str], *, class_column: str = "cluster_id"
) -> dict[str, pd.Series]:
    """Every released record's candidate set per sensitive attribute: the values of its class.

    Parameters
    ----------
    released
        The (k, ℓ) table: ``row_id``, ``class_column`` and the sensitive attributes.
    row_map
        PRIVATE: ``row_id`` (release) and ``input_row_number``.
    sensitive_attributes
        Attribute names.

    Returns
    -------
    dict
        attribute -> Series indexed by ``input_row_number`` of ``frozenset`` of value texts (the
        shape of :func:`pipeline.core.composition.candidate_sets`).

    Raises
    ------
    KeyError
        A missing column, or a row id absent from the row map.
    """
    index = _input_rows(released, row_map)
    out = {}
    for attribute in sensitive_attributes:
        sets = as_text(released[attribute]).groupby(released[class_column]).agg(lambda values: frozenset(values))
        out[attribute] = pd.Series(sets.reindex(released[class_column]).to_numpy(), index=index, dtype=object)
    return out


def one_known_value_in_classes(
    released: pd.DataFrame, sensitive_attributes: Sequence[str], *, class_column: str = "cluster_id"
) -> dict[str, Any]:
    """Share of released records for which one known sensitive value pins another one.

    A record is counted when, for some attribute ``a``, all rows of its class holding its value
    of ``a`` hold one and the same value of some other attribute ``b`` (so the adversary who knows
    the victim's ``a`` learns its ``b`` with certainty).

    Parameters
    ----------
    released
        ``class_column`` and the sensitive attributes, one row per released record.

    A record's whole tuple is pinned when all rows of its class holding its value of ``a`` hold one and the same
    value of every other attribute (red team, session 40: on Adult's (3, 3) release knowing the age pinned the whole
    tuple of 45.7 % of the records, where the report gave only "another value").

    Returns
    -------
    dict
        ``share_records_pinning_another_value`` (float in [0, 1]), ``share_records_whole_tuple_pinned`` (float in
        [0, 1]: by some known attribute), ``whole_tuple_pinned_by`` (attribute -> share pinned by knowing it),
        ``n_released`` (int).

    Raises
    ------
    ValueError
        A released row without a class (a missing ``class_column``).
    """
    n = len(released)
    if n == 0 or len(sensitive_attributes) < 2:
        return {
            "share_records_pinning_another_value": 0.0,
            "share_records_whole_tuple_pinned": 0.0,
            "whole_tuple_pinned_by": {str(a): 0.0 for a in sensitive_attributes},
            "n_released": int(n),
        }
    exposed = np.zeros(n, dtype=bool)
    whole = np.zeros(n, dtype=bool)
    whole_by: dict[str, float] = {}
    # integer codes of the values' texts and of the classes; distinct values per (class, known value) counted over
    # the codes (issue 18: a pandas groupby-nunique over the texts per pair of attributes took about 1 s on Adult)
    codes = {a: sorted_text_codes(released[a])[0].astype(np.int64) for a in sensitive_attributes}
    classes = _class_codes(released, class_column)
    for known in sensitive_attributes:
        _, group = np.unique(combine_codes([classes, codes[known]]), return_inverse=True)
        group = group.reshape(-1)
        n_groups = int(group.max(initial=-1)) + 1
        pinned_all = np.ones(n, dtype=bool)
        for other in sensitive_attributes:
            if other == known:
                continue
            pinned = distinct_per_group(group, codes[other], n_groups)[group] == 1
            exposed |= pinned
            pinned_all &= pinned
        whole |= pinned_all
        whole_by[str(known)] = float(pinned_all.mean())
    return {
        "share_records_pinning_another_value": float(exposed.mean()),
        "share_records_whole_tuple_pinned": float(whole.mean()),
        "whole_tuple_pinned_by": whole_by,
        "n_released": int(n),
    }


def class_posteriors(
    raw_records: pd.DataFrame,
    released: pd.DataFrame,
    row_map: pd.DataFrame,
    quasi_identifiers: Sequence[str],
    sensitive_attributes: Sequence[str],
    *,
    ell: int,
    slack: float = 0.05,
    class_column: str = "cluster_id",
    smoothing: float = 1.0,
) -> dict[str, Any]:
    """The learned-model adversary's posterior of every released record's true values, against the gate-9 bound.

    The posterior of a member's value is its share of the class (members are exchangeable for any
    model fitted on the release); the bound is ``max(1/ℓ, population posterior) + slack``, the
    population posterior being the naive-Bayes model fitted on the raw records (as for gate 9,
    :mod:`pipeline.core.posterior`).

    Parameters
    ----------
    raw_records
        The input table (``row_id`` = internal id, quasi-identifiers and sensitive attributes).
    released
        The (k, ℓ) table: ``row_id``, ``class_column``, the sensitive attributes.
    row_map
        PRIVATE: ``row_id`` (release) -> ``source_row_id`` (internal id of ``raw_records``).

    Returns
    -------
    dict
        ``n_cells``, ``n_cells_above_bound``, ``n_records_above_bound``, ``max_posterior``,
        ``mean_posterior`` (numbers only).

    Raises
    ------
    KeyError
        A missing column or a row id absent from the row map.
    ValueError
        A released row without a class (a missing ``class_column``).
    """
    n = len(released)
    if n == 0:
        return {"n_cells": 0, "n_cells_above_bound": 0, "n_records_above_bound": 0, "max_posterior": 0.0, "mean_posterior": 0.0}
    source = pd.Series(row_map["source_row_id"].to_numpy(np.int64), index=row_map["row_id"].to_numpy(np.int64))
    raw_positions = pd.Index(raw_records["row_id"].to_numpy(np.int64)).get_indexer(
        source.loc[released["row_id"].to_numpy(np.int64)].to_numpy()
    )
    if (raw_positions < 0).any():
        raise KeyError("a released row is not in the raw records")
    population = population_posterior(raw_records, quasi_identifiers, sensitive_attributes, smoothing)
    # a member's share of its class, counted over integer codes (issue 18: a pandas groupby over a MultiIndex of the
    # class and the value's text took about 0.8 s on Adult); the same numbers: both sides are counts of members
    classes = _class_codes(released, class_column)
    class_sizes = np.bincount(classes)[classes]
    above = np.zeros((n, len(sensitive_attributes)), dtype=bool)
    posteriors = []
    for j, attribute in enumerate(sensitive_attributes):
        values = sorted_text_codes(released[attribute])[0]  # the value's text, as as_text gives it
        pair = np.unique(combine_codes([classes, values]), return_inverse=True)[1].reshape(-1)
        share = np.bincount(pair)[pair] / class_sizes
        bound = np.maximum(1.0 / ell, population[attribute][raw_positions]) + slack
        above[:, j] = share > bound + 1e-12
        posteriors.append(share)
    stacked = np.concatenate(posteriors)
    return {
        "n_cells": int(above.size),
        "n_cells_above_bound": int(above.sum()),
        "n_records_above_bound": int(above.any(axis=1).sum()),
        "max_posterior": float(stacked.max()),
        "mean_posterior": float(stacked.mean()),
    }


def class_attack_figures(
    raw_records: pd.DataFrame,
    released: pd.DataFrame,
    row_map: pd.DataFrame,
    quasi_identifiers: Sequence[str],
    sensitive_attributes: Sequence[str],
    *,
    ell: int,
    slack: float = 0.05,
    class_column: str = "cluster_id",
    min_confidence: float | None = None,
    min_support: int = 5,
) -> dict[str, Any]:
    """The figures of the issue-12 adversaries on one (k, ℓ) release, for its manifest, report and metadata.

    Parameters
    ----------
    raw_records
        The input (``row_id`` = internal id = 1-based input position, configured columns).
    released
        The (k, ℓ) table (``row_id``, ``class_column``, sensitive attributes).
    row_map
        PRIVATE: ``row_id`` (release) -> ``source_row_id``.
    min_confidence, min_support
        With ``min_confidence``: the strong-rule adversary too, with the rules of at least ``min_support`` records
        and that confidence mined on ``raw_records`` (:func:`pipeline.core.rules.mine_strong_rules`, the mixed
        model's rules for the same settings), attacking the release's classes
        (:func:`pipeline.core.class_audit.whole_record_rule_adversary`, as ``msa-release audit --table``).

    Returns
    -------
    dict
        ``learned_model_cells_above_bound``, ``learned_model_cells``, ``learned_model_records_above_bound``,
        ``learned_model_max_posterior`` (:func:`class_posteriors`, bound ``max(1/ℓ, population) + slack``),
        ``one_known_value_share`` (:func:`one_known_value_in_classes`), ``max_abs_spearman_input_order`` (row and
        class ids against the input position, :func:`pipeline.core.order_attack.input_order_correlations`),
        ``slack``; with ``min_confidence`` also ``strong_rule_min_confidence``, ``strong_rule_min_support``,
        ``strong_rule_n_rules``, ``strong_rule_max_probability``, ``strong_rule_records_exposed`` (hold both
        values of a rule), ``strong_rule_records_above_bound`` (probability above 1/ℓ) and
        ``strong_rule_records_certain`` (probability 1). Numbers only; none of them is a gate.

    Raises
    ------
    ValueError
        A sensitive attribute of fewer than 2 (rules need 2) with ``min_confidence``, or ``min_confidence``
        outside (0, 1].
    """
    from pipeline.core.order_attack import input_order_correlations

    posterior = class_posteriors(
        raw_records, released, row_map, quasi_identifiers, sensitive_attributes, ell=ell, slack=slack, class_column=class_column
    )
    known = one_known_value_in_classes(released, sensitive_attributes, class_column=class_column)
    with_positions = row_map.assign(input_row_number=row_map["source_row_id"])
    order = (
        input_order_correlations({"released": released}, with_positions, {"released": ["row_id", class_column]})
        if len(released) >= 3
        else None
    )
    rules: dict[str, Any] = {}
    if min_confidence is not None:
        from pipeline.core.class_audit import whole_record_rule_adversary
        from pipeline.core.rules import mine_strong_rules

        mined = mine_strong_rules(
            raw_records, list(sensitive_attributes), min_confidence=min_confidence, backend="counting", min_support=min_support
        )
        classes = pd.factorize(released[class_column], sort=False)[0].astype(np.int64)
        exposure = whole_record_rule_adversary(released, classes, mined, ell=ell)
        rules = {
            "strong_rule_min_confidence": float(min_confidence),
            "strong_rule_min_support": int(min_support),
            "strong_rule_n_rules": exposure["n_rules"],
            "strong_rule_max_probability": exposure["max_probability"],
            "strong_rule_records_exposed": exposure["n_records_exposed"],
            "strong_rule_records_above_bound": exposure["n_records_above_bound"],
            "strong_rule_records_certain": exposure["n_records_certain"],
        }
    return {
        "learned_model_cells": posterior["n_cells"],
        "learned_model_cells_above_bound": posterior["n_cells_above_bound"],
        "learned_model_records_above_bound": posterior["n_records_above_bound"],
        "learned_model_max_posterior": round(posterior["max_posterior"], 6),
        "one_known_value_share": round(known["share_records_pinning_another_value"], 6),
        "one_known_value_whole_tuple_share": round(known["share_records_whole_tuple_pinned"], 6),
        "max_abs_spearman_input_order": round(float(order["spearman"].abs().max()), 6) if order is not None else 0.0,
        "slack": slack,
        **rules,
    }


def _class_codes(released: pd.DataFrame, class_column: str) -> np.ndarray:
    """int64 ``(len(released),)``: the class of every released row as a code (equal ids, equal code).

    Raises
    ------
    ValueError
        A row without a class: every released row belongs to one equivalence class, so a missing id is a malformed
        release (the class attacks would otherwise count it as a class of its own or leave it out)."""
    codes = pd.factorize(released[class_column], use_na_sentinel=True)[0].astype(np.int64)
    missing = int((codes < 0).sum())
    if missing:
        raise ValueError(
            f"{missing} released row(s) have no {class_column!r}: every row of a (k, ℓ) release belongs to one equivalence "
            "class; check the table passed as the release"
        )
    return codes
