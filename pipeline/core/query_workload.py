"""Utility the way analysts measure it: the relative error of a workload of random COUNT queries.

The workload (Xiao & Tao, "Anatomy: Simple and Effective Privacy Preservation", VLDB 2006, §6)
-------------------------------------------------------------------------------------------------
Every query is ``SELECT COUNT(*) FROM T WHERE pred(Q_1) AND … AND pred(Q_d) AND pred(S_1) [AND pred(S_2)]``
over ``d`` ∈ {1, 2} quasi-identifiers chosen at random (uniformly, without replacement) and one sensitive attribute
(workload **W1**) or two (workload **W2**). Each predicate is ``A IN b`` as in Anatomy: for an attribute whose values
are all numbers, ``b`` is a random contiguous range of its sorted values; otherwise a random set of its values. The
size of ``b`` follows Anatomy's expected selectivity ``s``: ``|b| = max(1, round(|A| · s^(1/p)))`` with ``p`` the
number of predicates of the query and ``|A|`` the attribute's number of distinct values in the private table (so
every predicate keeps about the ``p``-th root of ``s`` and the whole query about ``s`` of the records when the
attributes are independent). Default ``s = 0.05``, 1,000 queries per workload, seed 0: the same seed gives the same
workload. (The same construction, ``s^(1/p)`` of each domain, is anonypyx's ``CountingQueryGenerator``,
github.com/questforwisdom/anonypyx, after Xiao & Tao, m-invariance, SIGMOD 2007; the Anatomy paper itself could not
be consulted here, so the definition follows these two secondary sources.) The values come from the private table, so the workload itself is private; only the error figures are
reported.

The exact answer is counted on the private table (the eligible records: every record the release stands for,
deleted ones included). Its estimate is what an analyst computes from the published tables alone:

* **(k, ℓ) release or a generalized table of another tool** (ARX, anjana, sdcMicro): every row counts with the
  probability that it satisfies each predicate, the product over the queried attributes of
  ``|cover(label) ∩ b| / |cover(label)|``: a generalized label spreads uniformly over the base values it covers in
  the attribute's hierarchy (``*`` over all values; an ungeneralized value covers itself). The row's own sensitive
  tuple stays linked to it (the class's tuples, read row by row). The naive per-attribute release of P2 §1 is the
  same estimator on each of its tables; a query is answered from the table of each queried sensitive attribute
  and the estimates are averaged.
* **Mixed model, SAC~ groups**: the quasi-identifier part as above, row by row; a group's released cluster
  sub-tuples are spread uniformly over its members, independently per attribute cluster (the release permutes them
  per cluster): a group contributes ``(Σ_rows P(quasi-identifier predicates)) · Π_clusters (share of the group's
  cluster sub-tuples satisfying the cluster's queried predicates)``.
* **Mixed model and Rating, attribute table**: the quasi-identifier part as above; each sensitive attribute
  independently, the value shares of the row's SID in ``id_table``. A suppressed cell (``NULL`` SID) gets the
  attribute's overall released distribution (SAC~ values + ``id_table`` counts), as the attacks' adversary does
  (:mod:`pipeline.core.attacks`): excluding the row would bias every count down.

A release that publishes fewer records than it stands for (the mixed model's deletions, a tool's suppressed
records) is scaled by ``n_records / n_published``: the manifest tells the analyst how many records the release
stands for. The deleted records are not random (Anatomy's eligibility deletes holders of dominant values), so the
scaled estimate keeps that bias: it is part of the error.

Relative error of a query ``|estimate − exact| / max(exact, floor)`` with the *sanity bound* ``floor = 0.1 % of n``
(at least 1), which keeps queries with tiny answers from dominating (Xiao, Wang & Gehrke, "Differential Privacy via
Wavelet Transforms", ICDE 2010, §6; used since by the query-workload evaluations of anonymized data). Reported per
workload: median, mean, 90th percentile and the number of queries.

Sources: Xiao & Tao, VLDB 2006, §6 (the workload and the relative error); P1 §3.3, §4.3 (what a mixed release
publishes); P2 §1, §3 (the naive and the (k, ℓ) release); SPEC §8, §14.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from pipeline.core.hierarchies import Hierarchy

__all__ = [
    "DEFAULT_N_QUERIES",
    "DEFAULT_SEED",
    "DEFAULT_SELECTIVITY",
    "FLOOR_SHARE",
    "MAX_REPORT_RECORDS",
    "CountQuery",
    "WorkloadEstimator",
    "Workload",
    "build_workload",
    "generalized_table_estimator",
    "mixed_release_estimator",
    "naive_release_estimator",
    "relative_errors",
    "release_workload_utility",
    "summarize_errors",
    "workload_utility",
]

#: Queries per workload (W1 and W2 each).
DEFAULT_N_QUERIES = 1_000
#: Seed of the workload (a measurement, not a protection: the workload is never published).
DEFAULT_SEED = 0
#: Anatomy's expected query selectivity ``s``.
DEFAULT_SELECTIVITY = 0.05
#: The sanity bound: the denominator is at least this share of the records (0.1 %).
FLOOR_SHARE = 0.001
#: Largest private table a release's report measures the workload on (the work grows with records × queries;
#: Adult's 30,718 records take about a second); above it the report says the figures were not computed.
MAX_REPORT_RECORDS = 200_000
#: A published label that stands for every value of its attribute.
ANY = "*"


@dataclass(frozen=True)
class CountQuery:
    """One COUNT query: attribute -> domain codes of the values its ``IN`` predicate accepts.

    Attributes
    ----------
    workload
        ``"W1"`` (1 sensitive attribute) or ``"W2"`` (2).
    predicates
        Attribute name -> int64 array of codes into :attr:`Workload.domains` ``[attribute]``.
    sensitive
        The queried sensitive attributes (a subset of ``predicates``' keys).
    """

    workload: str
    predicates: Mapping[str, np.ndarray]
    sensitive: tuple[str, ...]


@dataclass(frozen=True)
class Workload:
    """A workload and the private table it is counted on.

    Attributes
    ----------
    queries
        The W1 queries, then the W2 queries.
    domains
        Attribute -> its values (texts) in the private table, sorted (numerically when all are numbers).
    exact
        float64, one exact answer per query.
    n_records
        Records of the private table (``n``).
    floor
        ``max(1, FLOOR_SHARE · n)``.
    selectivity, seed
        The settings it was drawn with.
    """

    queries: tuple[CountQuery, ...]
    domains: Mapping[str, tuple[str, ...]]
    exact: np.ndarray
    n_records: int
    floor: float
    selectivity: float
    seed: int


#: An estimator: query -> estimated answer (records).
WorkloadEstimator = Callable[[CountQuery], float]


def _text(column: pd.Series) -> np.ndarray:
    """object array of the column's values as text (categoricals through their categories, missing as ``""``)."""
    if isinstance(column.dtype, pd.CategoricalDtype):
        categories = np.asarray([str(c) for c in column.cat.categories] + [""], dtype=object)
        return categories[column.cat.codes.to_numpy()]
    return column.astype(object).where(column.notna(), "").astype(str).to_numpy(dtype=object)


def _sorted_domain(values: np.ndarray) -> tuple[str, ...]:
    """Distinct values, numerically sorted when every value is a number, else as text."""
    distinct = [str(v) for v in pd.unique(values)]
    try:
        return tuple(sorted(distinct, key=float))
    except ValueError:
        return tuple(sorted(distinct))


def _is_numeric(domain: Sequence[str]) -> bool:
    try:
        [float(v) for v in domain]
    except ValueError:
        return False
    return bool(domain)


def _encode(values: np.ndarray, domain: Sequence[str]) -> np.ndarray:
    """int64 code of each value in ``domain``; ``len(domain)`` (an always-false slot) for a value outside it."""
    index = pd.Index(list(domain))
    codes = index.get_indexer(pd.Index(values.astype(str)))
    return np.where(codes < 0, len(domain), codes).astype(np.int64)


def _indicator(query: CountQuery, attribute: str, size: int) -> np.ndarray:
    """float64 ``(size + 1,)``: 1 on the codes the predicate accepts, 0 elsewhere and on the outside slot."""
    indicator = np.zeros(size + 1)
    indicator[query.predicates[attribute]] = 1.0
    return indicator


def build_workload(
    records: pd.DataFrame,
    quasi_identifiers: Sequence[str],
    sensitive_attributes: Sequence[str],
    *,
    n_queries: int = DEFAULT_N_QUERIES,
    seed: int = DEFAULT_SEED,
    selectivity: float = DEFAULT_SELECTIVITY,
) -> Workload:
    """Draw workloads W1 and W2 (``n_queries`` each) and count their exact answers on the private table.

    Parameters
    ----------
    records
        PRIVATE table: one row per eligible record, the quasi-identifier and sensitive columns (text or categorical;
        other columns ignored).
    quasi_identifiers, sensitive_attributes
        Column names; W2 needs at least 2 sensitive attributes (otherwise it is empty).
    n_queries
        Queries per workload (≥ 1).
    seed
        Seed of the draw (numpy ``default_rng``): the same seed, table and settings give the same workload.
    selectivity
        Anatomy's expected selectivity ``s`` in (0, 1] (module docstring).

    Returns
    -------
    Workload
        The queries (W1 first), the private domains, the exact answers (float64 records), ``n``, the floor.

    Raises
    ------
    ValueError
        No quasi-identifier or sensitive attribute, a column absent from ``records``, ``n_queries < 1`` or a
        selectivity outside (0, 1].
    """
    quasi_identifiers, sensitive_attributes = list(quasi_identifiers), list(sensitive_attributes)
    if not quasi_identifiers or not sensitive_attributes:
        raise ValueError("a query workload needs at least one quasi-identifier and one sensitive attribute")
    missing = [c for c in [*quasi_identifiers, *sensitive_attributes] if c not in records.columns]
    if missing:
        raise ValueError(f"the private table has no column {missing[0]!r}; pass the release's column names")
    if n_queries < 1:
        raise ValueError(f"n_queries must be at least 1, got {n_queries}")
    if not 0 < selectivity <= 1:
        raise ValueError(f"selectivity must be in (0, 1], got {selectivity}")
    rng = np.random.default_rng(seed)
    texts = {c: _text(records[c]) for c in [*quasi_identifiers, *sensitive_attributes]}
    domains = {c: _sorted_domain(values) for c, values in texts.items()}
    codes = {c: _encode(texts[c], domains[c]) for c in texts}
    queries: list[CountQuery] = []
    for name, n_sensitive in (("W1", 1), ("W2", 2)):
        if len(sensitive_attributes) < n_sensitive:
            continue
        for _ in range(n_queries):
            n_quasi = int(rng.integers(1, min(2, len(quasi_identifiers)) + 1))
            chosen_quasi = [quasi_identifiers[i] for i in sorted(rng.choice(len(quasi_identifiers), n_quasi, replace=False))]
            chosen_sensitive = [
                sensitive_attributes[i] for i in sorted(rng.choice(len(sensitive_attributes), n_sensitive, replace=False))
            ]
            n_predicates = n_quasi + n_sensitive
            predicates: dict[str, np.ndarray] = {}
            for attribute in [*chosen_quasi, *chosen_sensitive]:
                size = len(domains[attribute])
                width = max(1, round(size * selectivity ** (1.0 / n_predicates)))
                if _is_numeric(domains[attribute]):
                    start = int(rng.integers(0, size - width + 1))
                    predicates[attribute] = np.arange(start, start + width, dtype=np.int64)
                else:
                    predicates[attribute] = np.sort(rng.choice(size, width, replace=False)).astype(np.int64)
            queries.append(CountQuery(workload=name, predicates=predicates, sensitive=tuple(chosen_sensitive)))
    exact = _exact_answers(queries, codes, domains)
    n = len(records)
    return Workload(
        queries=tuple(queries),
        domains=domains,
        exact=exact,
        n_records=n,
        floor=max(1.0, FLOOR_SHARE * n),
        selectivity=float(selectivity),
        seed=int(seed),
    )


#: Largest histogram (cells) :func:`_exact_answers` builds for one set of queried attributes; a larger one (e.g.
#: two sensitive attributes of 10,000 values each) counts its queries record by record instead.
MAX_HISTOGRAM_CELLS = 1 << 22


def _exact_answers(
    queries: Sequence[CountQuery], codes: Mapping[str, np.ndarray], domains: Mapping[str, Sequence[str]]
) -> np.ndarray:
    """float64 ``(len(queries),)``: the records that satisfy every predicate of each query (its exact answer).

    The queries that name the same attributes are counted together from one histogram of the records over those
    attributes' codes (``np.bincount``), freed before the next set: an answer is the sum of the histogram's cells
    the predicates accept, the same integer as counting the records one by one (which a set whose histogram would
    exceed :data:`MAX_HISTOGRAM_CELLS` cells still does). On Adult's 2,000 queries about 0.2 -> 0.05 s (issue 18)."""
    exact = np.empty(len(queries))
    by_attributes: dict[tuple[str, ...], list[int]] = {}
    for q, query in enumerate(queries):
        by_attributes.setdefault(tuple(query.predicates), []).append(q)
    for attributes, members in by_attributes.items():
        shape = tuple(len(domains[a]) + 1 for a in attributes)  # + 1: _encode's outside slot
        cells = math.prod(shape)
        if cells <= MAX_HISTOGRAM_CELLS:
            flat = np.ravel_multi_index(tuple(codes[a] for a in attributes), shape)
            histogram = np.bincount(flat, minlength=cells).reshape(shape)
            for q in members:
                exact[q] = float(histogram[np.ix_(*(queries[q].predicates[a] for a in attributes))].sum())
            del histogram, flat
            continue
        for q in members:
            mask = np.ones(len(codes[attributes[0]]), dtype=bool)
            for attribute in attributes:
                mask &= _indicator(queries[q], attribute, len(domains[attribute]))[codes[attribute]] > 0
            exact[q] = float(mask.sum())
    return exact


class _LabelColumn:
    """One published column of labels: each row's label code and each label's coverage of the attribute's domain.

    ``coverage[label, value]`` = 1 / |cover(label)| for the values the label covers (uniform spread), 0 elsewhere;
    the last column is the outside slot of :func:`_encode` (a published base value the private table never holds).
    """

    def __init__(self, labels: np.ndarray, domain: Sequence[str], hierarchy: Hierarchy | None, attribute: str) -> None:
        distinct, self.codes = np.unique(labels.astype(str), return_inverse=True)
        index = {value: k for k, value in enumerate(domain)}
        nodes: dict[str, list[tuple[int, int]]] = {}
        if hierarchy is not None:
            for level, names in enumerate(hierarchy.labels):
                for node, name in enumerate(names):
                    nodes.setdefault(name, []).append((level, node))
            base = {value: k for k, value in enumerate(hierarchy.base_values)}
            in_hierarchy = np.array([base.get(v, -1) for v in domain], dtype=np.int64)
        cover = np.zeros((len(distinct), len(domain) + 1))
        for row, label in enumerate(distinct):
            label = str(label)
            if hierarchy is not None and label in nodes:
                known = in_hierarchy >= 0
                ancestors = hierarchy.codes[in_hierarchy[known]]
                hit = np.zeros(int(known.sum()), dtype=bool)
                for level, node in nodes[label]:
                    hit |= ancestors[:, level] == node
                # the label's base values of the hierarchy, not only those the private table holds
                n_covered = 0
                for level, node in nodes[label]:
                    n_covered = max(n_covered, int(np.sum(hierarchy.codes[:, level] == node)))
                cover[row, np.flatnonzero(known)[hit]] = 1.0 / max(n_covered, 1)
            elif label == ANY:
                cover[row, : len(domain)] = 1.0 / max(len(domain), 1)
            elif label in index:
                cover[row, index[label]] = 1.0
            elif hierarchy is None:
                cover[row, len(domain)] = 1.0  # a value the private table never holds: no predicate accepts it
            else:
                raise ValueError(
                    f"a published label of {attribute!r} is neither a value nor a node of hierarchy {hierarchy.source}"
                )
        self.coverage = cover

    def probability(self, indicator: np.ndarray) -> np.ndarray:
        """float64 per row: the probability that the row's value satisfies the predicate (``indicator`` over the
        domain plus the outside slot)."""
        return (self.coverage @ indicator)[self.codes]


def _label_columns(
    table: pd.DataFrame,
    attributes: Sequence[str],
    workload: Workload,
    hierarchies: Mapping[str, Hierarchy] | None,
) -> dict[str, _LabelColumn]:
    hierarchies = hierarchies or {}
    return {a: _LabelColumn(_text(table[a]), workload.domains[a], hierarchies.get(a), a) for a in attributes if a in table}


def _scale(workload: Workload, n_published: int) -> float:
    return workload.n_records / n_published if n_published else 0.0


def generalized_table_estimator(
    table: pd.DataFrame,
    workload: Workload,
    *,
    hierarchies: Mapping[str, Hierarchy] | None = None,
) -> WorkloadEstimator:
    """The estimator of a table of whole records with generalized labels: a (k, ℓ) release, ARX, anjana, sdcMicro.

    Parameters
    ----------
    table
        The published rows: every column the workload queries (labels as text; other columns ignored). A column
        the table lacks answers every predicate with probability 1 (a column removed is fully generalized).
    workload
        From :func:`build_workload`.
    hierarchies
        Attribute -> hierarchy for columns with generalized labels; ``*`` covers every value without one.

    Returns
    -------
    WorkloadEstimator
        Query -> ``n / n_published · Σ_rows Π_attributes P(row satisfies the predicate)`` (module docstring).

    Raises
    ------
    ValueError
        A label that is neither a value of the private table, ``*``, nor a node of the attribute's hierarchy.
    """
    columns = _label_columns(table, list(workload.domains), workload, hierarchies)
    scale = _scale(workload, len(table))

    def estimate(query: CountQuery) -> float:
        probability = np.ones(len(table))
        for attribute in query.predicates:
            if attribute in columns:
                probability *= columns[attribute].probability(_indicator(query, attribute, len(workload.domains[attribute])))
        return scale * float(probability.sum())

    return estimate


def mixed_release_estimator(
    *,
    attribute_table: pd.DataFrame,
    id_table: pd.DataFrame,
    workload: Workload,
    quasi_identifiers: Sequence[str],
    sensitive_attributes: Sequence[str],
    sac_released: pd.DataFrame | None = None,
    attribute_clusters: pd.DataFrame | None = None,
    hierarchies: Mapping[str, Hierarchy] | None = None,
) -> WorkloadEstimator:
    """The estimator of a mixed-model release (SAC~ groups + attribute table) or, without ``sac_released``, Rating.

    Parameters
    ----------
    attribute_table
        ``row_id``, the quasi-identifier columns (labels), one SID column (integer, NULL = suppressed) per sensitive
        attribute.
    id_table
        ``attribute``, ``sid``, ``value``, ``count``.
    workload
        From :func:`build_workload`.
    quasi_identifiers, sensitive_attributes
        The release's columns.
    sac_released
        ``group_id``, the quasi-identifier columns (labels), the sensitive columns (values permuted per attribute
        cluster inside a group); None or empty for Rating.
    attribute_clusters
        ``cluster_id``, ``attribute``; None = one cluster per attribute.
    hierarchies
        Attribute -> hierarchy for generalized quasi-identifier labels.

    Returns
    -------
    WorkloadEstimator
        Query -> estimated count (module docstring: groups spread uniformly per attribute cluster; SIDs' value
        shares, suppressed cells the attribute's overall released distribution), scaled to ``n`` records.

    Raises
    ------
    ValueError
        A SID of the attribute table absent from ``id_table``; a label neither a value, ``*`` nor a hierarchy node.
    """
    quasi_identifiers, sensitive_attributes = list(quasi_identifiers), list(sensitive_attributes)
    sac = sac_released if sac_released is not None else pd.DataFrame()
    n_published = len(sac) + len(attribute_table)
    scale = _scale(workload, n_published)
    # attribute table: quasi-identifier labels and, per sensitive attribute, a SID x value share matrix
    table_labels = _label_columns(attribute_table, quasi_identifiers, workload, hierarchies)
    sid_rows: dict[str, np.ndarray] = {}
    # per attribute, the ID table as sparse triples (SID index, value code, share of the SID); index len(SIDs) is the
    # suppressed cells' overall released distribution
    sid_entries: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray, int]] = {}
    for attribute in sensitive_attributes:
        domain = workload.domains[attribute]
        rows = id_table[id_table["attribute"].astype(str) == attribute]
        distinct_sids, sid_code = np.unique(rows["sid"].to_numpy(np.int64), return_inverse=True)
        value_code = _encode(_text(rows["value"]), domain)
        counts = rows["count"].to_numpy(float)
        overall = np.bincount(value_code, weights=counts, minlength=len(domain) + 1)
        if len(sac) and attribute in sac:
            overall += np.bincount(_encode(_text(sac[attribute]), domain), minlength=len(domain) + 1)
        sid_totals = np.bincount(sid_code, weights=counts, minlength=len(distinct_sids))
        overall_codes = np.flatnonzero(overall)
        sid_entries[attribute] = (
            np.concatenate([sid_code, np.full(len(overall_codes), len(distinct_sids))]).astype(np.int64),
            np.concatenate([value_code, overall_codes]).astype(np.int64),
            np.concatenate(
                [
                    np.divide(counts, sid_totals[sid_code], out=np.zeros_like(counts), where=sid_totals[sid_code] > 0),
                    overall[overall_codes] / overall.sum(),
                ]
            ),
            len(distinct_sids) + 1,
        )
        column = attribute_table[attribute]
        published = column.notna().to_numpy()
        published_sids = column[published].astype(np.int64).to_numpy()
        index = np.full(len(attribute_table), len(distinct_sids), dtype=np.int64)  # suppressed: the overall entry
        found = np.searchsorted(distinct_sids, published_sids)
        if not (found < len(distinct_sids)).all() or not np.array_equal(distinct_sids[found], published_sids):
            raise ValueError(f"attribute {attribute!r}: a SID of the attribute table is not in the ID table")
        index[published] = found
        sid_rows[attribute] = index
    # SAC~ groups: quasi-identifier labels per row; sensitive codes per row; clusters
    group_labels = _label_columns(sac, quasi_identifiers, workload, hierarchies) if len(sac) else {}
    if len(sac):
        _, group = np.unique(sac["group_id"].to_numpy(np.int64), return_inverse=True)
        group_sizes = np.bincount(group).astype(float)
        group_codes = {a: _encode(_text(sac[a]), workload.domains[a]) for a in sensitive_attributes}
    cluster_of: dict[str, int] = {}
    if attribute_clusters is not None and len(attribute_clusters):
        cluster_of = {str(a): int(c) for a, c in zip(attribute_clusters["attribute"], attribute_clusters["cluster_id"])}
    for k, attribute in enumerate(sensitive_attributes):
        cluster_of.setdefault(attribute, -1 - k)

    def estimate(query: CountQuery) -> float:
        size = {a: len(workload.domains[a]) for a in query.predicates}
        indicators = {a: _indicator(query, a, size[a]) for a in query.predicates}
        quasi = [a for a in query.predicates if a in quasi_identifiers]
        total = 0.0
        if len(attribute_table):
            probability = np.ones(len(attribute_table))
            for attribute in quasi:
                if attribute in table_labels:
                    probability *= table_labels[attribute].probability(indicators[attribute])
            for attribute in query.sensitive:
                sid_code, value_code, share, n_sids = sid_entries[attribute]
                per_sid = np.bincount(sid_code, weights=share * indicators[attribute][value_code], minlength=n_sids)
                probability *= per_sid[sid_rows[attribute]]
            total += float(probability.sum())
        if len(sac):
            quasi_probability = np.ones(len(sac))
            for attribute in quasi:
                if attribute in group_labels:
                    quasi_probability *= group_labels[attribute].probability(indicators[attribute])
            per_group = np.bincount(group, weights=quasi_probability, minlength=len(group_sizes))
            for cluster in sorted({cluster_of[a] for a in query.sensitive}):
                holds = np.ones(len(sac))
                for attribute in query.sensitive:
                    if cluster_of[attribute] == cluster:
                        holds *= indicators[attribute][group_codes[attribute]]
                per_group *= np.bincount(group, weights=holds, minlength=len(group_sizes)) / group_sizes
            total += float(per_group.sum())
        return scale * total

    return estimate


def naive_release_estimator(
    tables: Mapping[str, pd.DataFrame],
    workload: Workload,
    *,
    hierarchies: Mapping[str, Hierarchy] | None = None,
) -> WorkloadEstimator:
    """The naive per-attribute release (P2 §1): each table is a generalized table (its own sensitive attribute raw,
    the others generalized along their hierarchies); a query is answered from the table of each queried sensitive
    attribute and the answers are averaged.

    Parameters
    ----------
    tables
        Sensitive attribute -> its table (labels as text).
    workload, hierarchies
        As for :func:`generalized_table_estimator` (hierarchies of the quasi-identifiers and of the sensitive
        attributes the tables generalize).

    Raises
    ------
    ValueError
        As :func:`generalized_table_estimator`; a queried sensitive attribute without a table.
    """
    estimators = {a: generalized_table_estimator(t, workload, hierarchies=hierarchies) for a, t in tables.items()}

    def estimate(query: CountQuery) -> float:
        missing = [a for a in query.sensitive if a not in estimators]
        if missing:
            raise ValueError(f"the naive release has no table for sensitive attribute {missing[0]!r}")
        return float(np.mean([estimators[a](query) for a in query.sensitive]))

    return estimate


def relative_errors(workload: Workload, estimator: WorkloadEstimator) -> np.ndarray:
    """float64, one per query: ``|estimate − exact| / max(exact, floor)``."""
    estimates = np.fromiter((estimator(q) for q in workload.queries), dtype=float, count=len(workload.queries))
    return np.abs(estimates - workload.exact) / np.maximum(workload.exact, workload.floor)


def summarize_errors(workload: Workload, errors: np.ndarray) -> dict[str, Any]:
    """JSON-able figures of a workload's relative errors (aggregates only, never a query or a value).

    Returns
    -------
    dict
        ``W1`` and ``W2`` (absent when the workload has none): ``n_queries``, ``median``, ``mean``, ``p90``; and
        ``floor`` (records), ``floor_share``, ``n_records``, ``selectivity``, ``seed``.
    """
    names = np.array([q.workload for q in workload.queries])
    result: dict[str, Any] = {}
    for name in ("W1", "W2"):
        chosen = errors[names == name]
        if len(chosen):
            result[name] = {
                "n_queries": int(len(chosen)),
                "median": float(np.median(chosen)),
                "mean": float(np.mean(chosen)),
                "p90": float(np.percentile(chosen, 90)),
            }
    result.update(
        floor=float(workload.floor),
        floor_share=FLOOR_SHARE,
        n_records=int(workload.n_records),
        selectivity=float(workload.selectivity),
        seed=int(workload.seed),
    )
    return result


def workload_utility(workload: Workload, estimator: WorkloadEstimator) -> dict[str, Any]:
    """:func:`summarize_errors` of :func:`relative_errors`: the figures a report shows."""
    return summarize_errors(workload, relative_errors(workload, estimator))


def release_workload_utility(
    records: pd.DataFrame,
    quasi_identifiers: Sequence[str],
    sensitive_attributes: Sequence[str],
    *,
    model: str,
    tables: Mapping[str, pd.DataFrame],
    hierarchies: Mapping[str, Hierarchy] | None = None,
    n_queries: int = DEFAULT_N_QUERIES,
    seed: int = DEFAULT_SEED,
    selectivity: float = DEFAULT_SELECTIVITY,
    workload: Workload | None = None,
) -> dict[str, Any]:
    """The query-workload figures of one release (what report.html, ``make experiments`` and ``make attacks`` show).

    Parameters
    ----------
    records
        PRIVATE table the release stands for (see :func:`build_workload`).
    quasi_identifiers, sensitive_attributes
        The release's columns.
    model
        ``"mixed"`` (``tables``: ``sac_released``, ``attribute_table``, ``id_table``, ``attribute_clusters``),
        ``"rating"`` (``attribute_table``, ``id_table``), ``"kl"`` or ``"table"`` (``table``: whole records with
        generalized labels, e.g. ``kl_released`` or another tool's output), ``"naive"`` (one table per sensitive
        attribute, keyed by it).
    tables
        The published tables, as above.
    hierarchies
        Attribute -> hierarchy of the generalized labels.
    n_queries, seed, selectivity
        Of the workload (:func:`build_workload`); ignored when ``workload`` is given (one workload for several
        releases of the same records).

    Returns
    -------
    dict
        :func:`summarize_errors`.

    Raises
    ------
    ValueError
        An unknown ``model``; the estimators' errors.
    """
    if workload is None:
        workload = build_workload(
            records, quasi_identifiers, sensitive_attributes, n_queries=n_queries, seed=seed, selectivity=selectivity
        )
    estimator: WorkloadEstimator
    if model in ("mixed", "rating"):
        estimator = mixed_release_estimator(
            attribute_table=tables["attribute_table"],
            id_table=tables["id_table"],
            workload=workload,
            quasi_identifiers=quasi_identifiers,
            sensitive_attributes=sensitive_attributes,
            sac_released=tables.get("sac_released") if model == "mixed" else None,
            attribute_clusters=tables.get("attribute_clusters") if model == "mixed" else None,
            hierarchies=hierarchies,
        )
    elif model in ("kl", "table"):
        estimator = generalized_table_estimator(tables["table"], workload, hierarchies=hierarchies)
    elif model == "naive":
        estimator = naive_release_estimator(tables, workload, hierarchies=hierarchies)
    else:
        raise ValueError(f"no query-workload estimator for model {model!r}; use mixed, rating, kl, table or naive")
    return workload_utility(workload, estimator)
