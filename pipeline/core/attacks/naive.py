"""The belief from the naive per-attribute release: the join of P2 §1 (:mod:`pipeline.core.attacks`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from pipeline.core.attacks.victims import NAIVE_BATCH, _contexts, _encode, label_coverage
from pipeline.core.columns import as_text
from pipeline.core.hierarchies import Hierarchy


@dataclass(frozen=True, eq=False)
class _NaiveTableModel:
    """Table ``attribute`` of a naive release at equivalence-class level.

    ``histogram``: float64 ``(n_classes, |D_attribute|)`` raw value counts; ``qi_labels``: per
    quasi-identifier, the class's label index into ``NaiveBelief.qi_labels``; ``cover``: per
    other sensitive attribute, bool ``(n_classes, |D_other|)`` label coverage."""

    attribute: str
    histogram: np.ndarray
    qi_labels: dict[str, np.ndarray]
    cover: dict[str, np.ndarray]


@dataclass(frozen=True, eq=False)
class NaiveBelief:
    """Belief model of a naive per-attribute release (P2 §1).

    Attributes
    ----------
    quasi_identifiers, sensitive_attributes
        Column names.
    domains
        Sensitive attribute -> sorted values published raw in its table.
    qi_labels
        Quasi-identifier -> tuple of the labels used by any table.
    hierarchies
        Hierarchies of the quasi-identifiers (coverage of the victim's QIs).
    tables
        Sensitive attribute -> its table at equivalence-class level.
    """

    quasi_identifiers: tuple[str, ...]
    sensitive_attributes: tuple[str, ...]
    domains: dict[str, tuple[str, ...]]
    qi_labels: dict[str, tuple[str, ...]]
    hierarchies: dict[str, Hierarchy]
    tables: dict[str, _NaiveTableModel]
    model: str = "naive"


def naive_release_belief(
    tables: Mapping[str, pd.DataFrame],
    quasi_identifiers: Sequence[str],
    sensitive_attributes: Sequence[str],
    hierarchies: Mapping[str, Hierarchy],
) -> NaiveBelief:
    """Belief model of the naive per-attribute release.

    Parameters
    ----------
    tables
        Sensitive attribute ``S_j`` -> its published table: ``cluster_id`` (int), one text
        column per quasi-identifier and per other sensitive attribute (generalised labels),
        and ``S_j`` (text, raw) — :attr:`pipeline.core.naive_release.NaiveTable.released`.
        Rows sharing a ``cluster_id`` must share their labels.
    quasi_identifiers, sensitive_attributes
        Column names; one table per sensitive attribute.
    hierarchies
        Hierarchy of every quasi-identifier and sensitive attribute.

    Returns
    -------
    NaiveBelief

    Raises
    ------
    ValueError
        A missing table, column or hierarchy, or an unknown label.
    """
    quasi_identifier_columns, sensitive_attribute_columns = tuple(quasi_identifiers), tuple(sensitive_attributes)
    absent = [a for a in (*quasi_identifier_columns, *sensitive_attribute_columns) if a not in hierarchies]
    if absent:
        raise ValueError(f"no hierarchy for {absent}")
    if sorted(tables) != sorted(sensitive_attribute_columns):
        raise ValueError(
            f"the naive release needs one table per sensitive attribute {list(sensitive_attribute_columns)}, got {sorted(tables)}"
        )
    domains = {a: tuple(sorted(as_text(tables[a][a]).unique())) for a in sensitive_attribute_columns}
    qi_labels = {
        q: tuple(sorted(set().union(*(set(as_text(tables[a][q])) for a in sensitive_attribute_columns))))
        for q in quasi_identifier_columns
    }
    models = {}
    for attribute in sensitive_attribute_columns:
        table = tables[attribute]
        others = [a for a in sensitive_attribute_columns if a != attribute]
        missing = [c for c in ("cluster_id", *quasi_identifier_columns, *others, attribute) if c not in table.columns]
        if missing:
            raise ValueError(f"column(s) {missing} not in the table of {attribute!r}")
        clusters, unit = np.unique(table["cluster_id"].to_numpy(np.int64), return_inverse=True)
        labels = as_text(table[[*quasi_identifier_columns, *others]]).assign(unit=unit)
        first = labels.drop_duplicates("unit").sort_values("unit")
        if len(labels.drop_duplicates()) != len(first):
            raise ValueError(f"table of {attribute!r}: rows of one cluster_id carry different labels")
        histogram = np.zeros((len(clusters), len(domains[attribute])))
        np.add.at(histogram, (unit, _encode(as_text(table[attribute]), domains[attribute])), 1.0)
        qi_index = {q: _encode(first[q], qi_labels[q]) for q in quasi_identifier_columns}
        cover = {}
        for other in others:
            distinct, inverse = np.unique(first[other].to_numpy(), return_inverse=True)
            cover[other] = label_coverage(hierarchies[other], list(distinct), list(domains[other]))[inverse]
        models[attribute] = _NaiveTableModel(attribute, histogram, qi_index, cover)
    return NaiveBelief(
        quasi_identifier_columns,
        sensitive_attribute_columns,
        domains,
        qi_labels,
        {q: hierarchies[q] for q in quasi_identifier_columns},
        models,
    )


def _naive_candidates(belief: NaiveBelief, contexts: pd.DataFrame) -> dict[str, np.ndarray]:
    """bool ``(n_contexts, n_classes)`` per table: classes whose QI labels cover the context."""
    covers = {}
    for q in belief.quasi_identifiers:
        values, codes = np.unique(as_text(contexts[q]).to_numpy(), return_inverse=True)
        covers[q] = (label_coverage(belief.hierarchies[q], list(belief.qi_labels[q]), list(values)), codes)
    result = {}
    for attribute, table in belief.tables.items():
        mask = np.ones((len(contexts), len(table.histogram)), dtype=bool)
        for q, (cover, codes) in covers.items():
            mask &= cover[table.qi_labels[q][None, :], codes[:, None]]
        result[attribute] = mask
    return result


def _naive_fixpoint(
    belief: NaiveBelief, alive: dict[str, np.ndarray], allowed: dict[str, np.ndarray], max_rounds: int = 1000
) -> dict[str, np.ndarray]:
    """Arc-consistent join of the tables for a batch of contexts (see the module docstring).

    ``alive[j]``: bool ``(b, n_classes_j)`` candidate classes; ``allowed[j]``: bool ``(b, |D_j|)``
    values still possible. Returns per attribute the float64 ``(b, |D_j|)`` counts of alive rows
    per allowed value (the belief's numerators)."""
    sensitive_attribute_columns = belief.sensitive_attributes
    present = {j: (belief.tables[j].histogram > 0).astype(np.float32) for j in sensitive_attribute_columns}
    cover = {j: {i: c.astype(np.float32) for i, c in belief.tables[j].cover.items()} for j in sensitive_attribute_columns}
    alive = {j: alive[j].copy() for j in sensitive_attribute_columns}
    allowed = {j: allowed[j].copy() for j in sensitive_attribute_columns}
    for _ in range(max_rounds):
        changed = False
        for j in (
            sensitive_attribute_columns
        ):  # a class stays alive iff it holds an allowed value and each label covers an allowed value
            keep = alive[j] & ((allowed[j].astype(np.float32) @ present[j].T) > 0)
            for i, c in cover[j].items():
                keep &= (allowed[i].astype(np.float32) @ c.T) > 0
            changed |= bool((keep != alive[j]).any())
            alive[j] = keep
        for j in sensitive_attribute_columns:  # a value stays iff its own table and every other table support it
            keep = allowed[j] & ((alive[j].astype(np.float32) @ present[j]) > 0)
            for i in sensitive_attribute_columns:
                if i != j:
                    keep &= (alive[i].astype(np.float32) @ cover[i][j]) > 0
            changed |= bool((keep != allowed[j]).any())
            allowed[j] = keep
        if not changed:
            break
    return {j: (alive[j].astype(np.float64) @ belief.tables[j].histogram) * allowed[j] for j in sensitive_attribute_columns}


def _naive_beliefs(belief: NaiveBelief, contexts: pd.DataFrame, known: str | None = None) -> dict[str, np.ndarray]:
    """Counts ``(n_contexts, |D_j|)`` per attribute after the join; with ``known``, the
    contexts carry a column ``known`` whose value restricts that attribute from the start."""
    sensitive_attribute_columns = belief.sensitive_attributes
    counts = {j: np.zeros((len(contexts), len(belief.domains[j]))) for j in sensitive_attribute_columns}
    for start in range(0, len(contexts), NAIVE_BATCH):
        batch = contexts.iloc[start : start + NAIVE_BATCH]
        alive = _naive_candidates(belief, batch)
        allowed = {j: np.ones((len(batch), len(belief.domains[j])), dtype=bool) for j in sensitive_attribute_columns}
        if known is not None:
            code = _encode(as_text(batch[known]), belief.domains[known])
            restricted = np.zeros_like(allowed[known])
            rows = np.flatnonzero(code >= 0)
            restricted[rows, code[rows]] = True
            allowed[known] = restricted
        for j, values in _naive_fixpoint(belief, alive, allowed).items():
            counts[j][start : start + len(batch)] = values
    return counts


def _naive_scores(counts: np.ndarray, context_of: np.ndarray, true_codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(probability of the true value, number of values with positive belief) per victim."""
    rows = counts[context_of]
    totals = rows.sum(axis=1)
    mass = np.where(true_codes >= 0, rows[np.arange(len(rows)), np.where(true_codes < 0, 0, true_codes)], 0.0)
    probability = np.divide(mass, totals, out=np.zeros_like(mass), where=totals > 0)
    return probability, (rows > 0).sum(axis=1).astype(np.int64)


def _naive_join(belief: NaiveBelief, victims: pd.DataFrame) -> pd.DataFrame:
    contexts, context_of = _contexts(victims, belief.quasi_identifiers)
    counts = _naive_beliefs(belief, contexts)
    probability = np.ones(len(victims))
    certain = np.ones(len(victims), dtype=bool)
    n_tuples = np.ones(len(victims), dtype=np.int64)
    for j in belief.sensitive_attributes:
        p, n_values = _naive_scores(counts[j], context_of, _encode(as_text(victims[j]), belief.domains[j]))
        probability *= p
        certain &= (n_values == 1) & (p > 0)
        n_tuples *= n_values
    return pd.DataFrame(
        {
            "source_row_id": victims["source_row_id"].to_numpy(np.int64),
            "probability": np.clip(probability, 0.0, 1.0),
            "certain": certain,
            "n_candidates": n_tuples,
        }
    )


def _naive_one_known(
    belief: NaiveBelief, victims: pd.DataFrame, pairs: Sequence[tuple[str, str]]
) -> dict[tuple[str, str], pd.DataFrame]:
    results = {}
    for known in dict.fromkeys(a for a, _ in pairs):
        contexts, context_of = _contexts(victims, [*belief.quasi_identifiers, known])
        counts = _naive_beliefs(belief, contexts, known=known)
        for target in [b for a, b in pairs if a == known]:
            p, n_values = _naive_scores(counts[target], context_of, _encode(as_text(victims[target]), belief.domains[target]))
            results[(known, target)] = pd.DataFrame(
                {
                    "source_row_id": victims["source_row_id"].to_numpy(np.int64),
                    "probability": np.clip(p, 0.0, 1.0),
                    "pinned": (n_values == 1) & (p > 0),
                    "n_candidates": n_values,
                }
            )
    return {pair: results[pair] for pair in pairs}
