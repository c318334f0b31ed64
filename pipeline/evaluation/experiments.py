"""The experiments of P1 §6 (SPEC §12) as plain functions: model comparison sweeps and
SID-creation timings. No Dagster here: the ``evaluation`` assets and ``msa-release
experiments`` call these, ``pipeline.reporting.figures`` plots them and ``pipeline.reporting.experiments_report`` writes
REPORT.md.

Every number is computed from released tables only (plus, for the disclosure of the records
that truly contain a rule, the private row map), with the same functions the release gates
and ``msa-release audit`` use.

Sources: P1 §6 (Figures 1-11); SPEC §7, §10, §11, §12.
"""

from __future__ import annotations

import gc
import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from fractions import Fraction
from typing import Any

import numpy as np
import pandas as pd

from pipeline.core.adversary import disclosure_probabilities, per_record_disclosure, recover_rule_confidences, rule_holders
from pipeline.core.columns import as_text
from pipeline.core.metrics import additional_information_loss, domain_sizes, reconstruction_error
from pipeline.core.mixed_model import assemble_release_tables, run_mixed_model
from pipeline.core.query_workload import release_workload_utility
from pipeline.core.rating import create_sids, rating_tables
from pipeline.core.rules import mine_strong_rules
from pipeline.core.sensitivity import EllRequirement, ell_by_attribute
from pipeline.memory import release_free_memory

__all__ = [
    "ExperimentPlan",
    "evaluate_release",
    "run_model_sweeps",
    "run_sid_creation_timings",
]

MODELS = ("mixed", "rating")
Progress = Callable[[str], None]


@dataclass(frozen=True)
class ExperimentPlan:
    """Which points every figure has (defaults: SPEC §12 on the whole of Adult).

    Attributes
    ----------
    ell_values
        ℓ sweep of Figures 3, 6, 7 (each >= 2).
    min_confidence_values
        min_confidence sweep of Figures 4 and 8, each in (0, 1].
    record_counts
        Random-subset sizes of Figure 1 (0 = all records).
    attribute_set_sizes
        m values of Figures 2, 5, 9: the first m sensitive attributes in schema order.
    default_ell, default_min_confidence
        The fixed parameters while another one varies.
    histogram_ells
        ℓ of Figures 10 and 11.
    ell_per_attribute
        Figure 12 (issue 16, SPEC §6.7): a per-attribute ℓ_i, compared with uniform ℓ = max ℓ_i and ℓ = min ℓ_i
        (both models, all attributes, ``default_min_confidence``); pairs (attribute, ℓ_i). Skipped when it does not
        name exactly the sensitive attributes of the run. Default: issue 16's setting on Adult.
    timing_repeats
        Timed runs per point; figures show the median (and min-max).
    seed
        Seed of the random subsets and of the SAC~ permutation.
    """

    ell_values: tuple[int, ...] = (2, 3, 4, 5, 6)
    min_confidence_values: tuple[float, ...] = (0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95)
    record_counts: tuple[int, ...] = (2000, 5000, 10000, 15000, 20000, 25000, 0)
    attribute_set_sizes: tuple[int, ...] = (2, 3, 4)
    default_ell: int = 3
    default_min_confidence: float = 0.8
    histogram_ells: tuple[int, ...] = (3, 2)
    timing_repeats: int = 5
    seed: int = 0
    ell_per_attribute: tuple[tuple[str, int], ...] = (("education", 4), ("occupation", 3), ("age", 2), ("relationship", 2))

    def __post_init__(self) -> None:
        if any(ell < 2 for ell in (*self.ell_values, *self.histogram_ells, self.default_ell)):
            raise ValueError("every ℓ of the plan must be >= 2")
        if any(not 0 < c <= 1 for c in (*self.min_confidence_values, self.default_min_confidence)):
            raise ValueError("every min_confidence of the plan must be in (0, 1]")
        if any(m < 2 for m in self.attribute_set_sizes):
            raise ValueError("attribute_set_sizes must be >= 2 (the models need two sensitive attributes)")
        if self.timing_repeats < 1:
            raise ValueError("timing_repeats must be >= 1")
        if any(ell < 2 for _, ell in self.ell_per_attribute):
            raise ValueError("every ℓ_i of ell_per_attribute must be >= 2")

    def as_dict(self) -> dict:
        return asdict(self)


@dataclass
class _Cache:
    rules: dict = field(default_factory=dict)
    points: dict = field(default_factory=dict)


def _fraction_counts(per_record: pd.DataFrame) -> dict[str, int]:
    """Exact disclosure values -> number of records, e.g. ``{"1/3": 1451}``."""
    counts: dict[str, int] = {}
    for numerator, denominator in zip(per_record["numerator"], per_record["denominator"], strict=True):
        key = str(Fraction(int(numerator), int(denominator)))
        counts[key] = counts.get(key, 0) + 1
    return dict(sorted(counts.items(), key=lambda item: Fraction(item[0])))


def evaluate_release(
    records: pd.DataFrame,
    quasi_identifiers: Sequence[str],
    sensitive_attributes: Sequence[str],
    *,
    model: str,
    ell: EllRequirement,
    min_confidence: float,
    seed: int = 0,
    rules: pd.DataFrame | None = None,
    by_attribute: bool = False,
    query_workload: bool = False,
) -> dict:
    """Build one release in memory and measure it: privacy, utility, confidences, time.

    Parameters
    ----------
    records
        ``row_id`` + quasi-identifiers + sensitive attributes (text), no missing sensitive value.
    quasi_identifiers, sensitive_attributes
        Columns; at least 2 sensitive attributes.
    model
        ``"mixed"`` (P1) or ``"rating"`` (plain Rating on the whole table, SPEC §7).
    ell, min_confidence, seed
        Model parameters; ``ell`` may be a mapping attribute -> ℓ_i (SPEC §6.7: the bound of a rule is then 1/ℓ_j
        of its consequent's attribute).
    rules
        Strong rules of ``records`` at ``min_confidence`` (mined when None).
    by_attribute
        Also return ``additional_information_loss_by_attribute`` and ``n_suppressed_cells_by_attribute``
        (attribute -> figure, schema order).
    query_workload
        Also return ``query_workload``: the COUNT-query workload's relative errors (Xiao & Tao;
        :func:`pipeline.core.query_workload.release_workload_utility`, default workload).

    Returns
    -------
    dict
        JSON-safe: parameters, ``n_records``, ``n_strong_rules``, ``n_sac_released``,
        ``n_attribute_table``, ``n_deleted``, ``n_suppressed_cells``,
        ``additional_information_loss`` (0..1), ``reconstruction_error`` (sum over records)
        and ``reconstruction_error_per_record``, ``average_raw_confidence``,
        ``average_released_confidence`` (None without rules), ``n_rule_holders``,
        ``max_disclosure``, ``mean_disclosure``, ``n_holders_above_bound``,
        ``n_holders_certain``, ``disclosure_counts`` (exact probability -> records, over the
        published records that truly contain a rule) and ``seconds`` (model wall time).

    Raises
    ------
    ValueError
        Unknown model or invalid parameters (see the core functions).

    References
    ----------
    P1 §6; SPEC §10, §11.
    """
    if model not in MODELS:
        raise ValueError(f"unknown model {model!r}; known: {list(MODELS)}")
    quasi_identifier_columns, sensitive_attribute_columns = list(quasi_identifiers), list(sensitive_attributes)
    if rules is None:
        rules = mine_strong_rules(records, sensitive_attribute_columns, min_confidence=min_confidence)
    started = time.perf_counter()
    if model == "mixed":
        result = run_mixed_model(
            records, sensitive_attribute_columns, ell=ell, min_confidence=min_confidence, seed=seed, rules=rules
        )
        tables = assemble_release_tables(
            records,
            quasi_identifier_columns,
            sensitive_attribute_columns,
            sac_permuted=result.sac_permuted,
            attribute_sids=result.attribute_sids,
            id_table=result.id_table,
            clusters=result.clusters,
        )
        n_deleted = len(result.grouping.deleted)
    else:
        id_table, attribute_sids = rating_tables(records, sensitive_attribute_columns, ell=ell)
        empty = pd.DataFrame(
            {c: pd.Series(dtype=object) for c in ["group_id", "row_id", *quasi_identifier_columns, *sensitive_attribute_columns]}
        )
        tables = assemble_release_tables(
            records,
            quasi_identifier_columns,
            sensitive_attribute_columns,
            sac_permuted=empty,
            attribute_sids=attribute_sids,
            id_table=id_table,
            clusters=[],
        )
        n_deleted = 0
    seconds = time.perf_counter() - started
    # the model's temporaries are freed: give their pages back before the measures add theirs (at 1M records the
    # baseline of report.html peaked about 150 MiB higher without, issue 18)
    release_free_memory()
    release = {
        "sac_released": tables.sac_released,
        "attribute_table": tables.attribute_table,
        "id_table": tables.id_table,
        "attribute_clusters": tables.attribute_clusters,
    }
    recovered = recover_rule_confidences(rules, **release)
    release_free_memory()
    holders = rule_holders(records, rules, row_map=tables.row_map)
    per_record = per_record_disclosure(disclosure_probabilities(holders, rules, **release))
    release_free_memory()
    rce = reconstruction_error(
        **release,
        sensitive_attributes=sensitive_attribute_columns,
        domain_sizes=domain_sizes(records, sensitive_attribute_columns),
        n_deleted=n_deleted,
    )
    if isinstance(ell, Mapping):
        of_rule = rules["consequent_attribute"].astype(str).map(lambda a: int(ell[a]))
        required = of_rule.reindex(per_record["rule"].to_numpy(np.int64)).to_numpy(np.int64)
    else:
        required = np.full(len(per_record), int(ell), dtype=np.int64)
    above = per_record["numerator"].to_numpy(np.int64) * required > per_record["denominator"].to_numpy(np.int64)
    certain = per_record["numerator"] == per_record["denominator"]
    extra: dict[str, Any] = {}
    if by_attribute:
        ells = ell_by_attribute(ell, sensitive_attribute_columns)
        extra = {
            "additional_information_loss_by_attribute": {
                a: additional_information_loss(
                    sac_released=tables.sac_released,
                    attribute_table=tables.attribute_table,
                    id_table=tables.id_table,
                    sensitive_attributes=[a],
                    ell=ells[a],
                    n_deleted=n_deleted,
                )
                for a in sensitive_attribute_columns
            },
            "n_suppressed_cells_by_attribute": {
                a: int(tables.attribute_table[a].isna().sum()) for a in sensitive_attribute_columns
            },
        }
    if query_workload:
        extra["query_workload"] = release_workload_utility(
            records, quasi_identifier_columns, sensitive_attribute_columns, model=model, tables=release
        )
    return {
        **extra,
        "model": model,
        "ell": dict(ell) if isinstance(ell, Mapping) else ell,
        "min_confidence": min_confidence,
        "m": len(sensitive_attribute_columns),
        "sensitive_attributes": sensitive_attribute_columns,
        "n_records": len(records),
        "n_strong_rules": len(rules),
        "n_sac_released": len(tables.sac_released),
        "n_attribute_table": len(tables.attribute_table),
        "n_deleted": n_deleted,
        "n_suppressed_cells": int(tables.attribute_table[sensitive_attribute_columns].isna().sum().sum()),
        "additional_information_loss": additional_information_loss(
            sac_released=tables.sac_released,
            attribute_table=tables.attribute_table,
            id_table=tables.id_table,
            sensitive_attributes=sensitive_attribute_columns,
            ell=ell,
            n_deleted=n_deleted,
        ),
        "reconstruction_error": rce,
        "reconstruction_error_per_record": rce / len(records) if len(records) else 0.0,
        "average_raw_confidence": float((rules["support_both"] / rules["support_antecedent"]).mean()) if len(rules) else None,
        "average_released_confidence": float(recovered["released_confidence"].mean()) if len(rules) else None,
        "n_rules_recovered_exactly": int(
            sum(
                abs(row.released_support_both * row.support_antecedent - row.support_both * row.released_support_antecedent)
                < 1e-9
                for row in recovered.itertuples(index=False)
            )
        ),
        "n_rule_holders": len(per_record),
        "max_disclosure": float(per_record["probability"].max()) if len(per_record) else 0.0,
        "mean_disclosure": float(per_record["probability"].mean()) if len(per_record) else 0.0,
        "n_holders_above_bound": int(above.sum()),
        "n_holders_certain": int(certain.sum()),
        "disclosure_counts": _fraction_counts(per_record),
        "seconds": seconds,
    }


def run_model_sweeps(
    records: pd.DataFrame,
    quasi_identifiers: Sequence[str],
    sensitive_attributes: Sequence[str],
    plan: ExperimentPlan,
    *,
    progress: Progress | None = None,
) -> list[dict]:
    """Every model-comparison point of Figures 3-11, each configuration evaluated once.

    Sweeps (both models each): ``"ell"`` over ``plan.ell_values`` for the first 2 and for all
    sensitive attributes; ``"min_confidence"`` over ``plan.min_confidence_values`` with all
    attributes; ``"attributes"`` over ``plan.attribute_set_sizes``; ``"histogram"`` for
    ``plan.histogram_ells`` with all attributes. Fixed parameters: ``plan.default_*``.

    Returns
    -------
    list[dict]
        One :func:`evaluate_release` dict per (sweep, point, model) plus ``sweep``;
        configurations shared by several sweeps are computed once.

    Raises
    ------
    ValueError
        A plan asking for more sensitive attributes than configured.
    """
    sensitive_attribute_columns = list(sensitive_attributes)
    if max(plan.attribute_set_sizes, default=2) > len(sensitive_attribute_columns):
        raise ValueError(
            f"the plan asks for m up to {max(plan.attribute_set_sizes)}, only {len(sensitive_attribute_columns)} sensitive attributes"
        )
    m_all = len(sensitive_attribute_columns)
    wanted: list[tuple[str, int, float, int]] = []
    for ell in plan.ell_values:
        for m in sorted({2, m_all}):
            wanted.append(("ell", ell, plan.default_min_confidence, m))
    for confidence in plan.min_confidence_values:
        wanted.append(("min_confidence", plan.default_ell, confidence, m_all))
    for m in plan.attribute_set_sizes:
        wanted.append(("attributes", plan.default_ell, plan.default_min_confidence, m))
    for ell in plan.histogram_ells:
        wanted.append(("histogram", ell, plan.default_min_confidence, m_all))
    cache = _Cache()
    points = []
    for sweep, ell, confidence, m in wanted:
        attributes = sensitive_attribute_columns[:m]
        rules_key = (confidence, m)
        if rules_key not in cache.rules:
            cache.rules[rules_key] = mine_strong_rules(records, attributes, min_confidence=confidence)
        for model in MODELS:
            key = (model, ell, confidence, m)
            if key not in cache.points:
                if progress:
                    progress(f"{model} ell={ell} min_confidence={confidence} m={m}")
                cache.points[key] = evaluate_release(
                    records,
                    quasi_identifiers,
                    attributes,
                    model=model,
                    ell=ell,
                    min_confidence=confidence,
                    seed=plan.seed,
                    rules=cache.rules[rules_key],
                    # the query workload at the default point only (one table per model in REPORT.md)
                    query_workload=(ell, confidence, m) == (plan.default_ell, plan.default_min_confidence, m_all),
                )
            points.append({"sweep": sweep, **cache.points[key]})
    points += per_attribute_points(records, quasi_identifiers, sensitive_attribute_columns, plan, progress=progress)
    return points


def per_attribute_points(
    records: pd.DataFrame,
    quasi_identifiers: Sequence[str],
    sensitive_attributes: Sequence[str],
    plan: ExperimentPlan,
    *,
    progress: Progress | None = None,
) -> list[dict]:
    """Figure 12 (issue 16): both models with ``plan.ell_per_attribute`` against uniform ℓ = max ℓ_i and ℓ = min ℓ_i.

    Returns
    -------
    list[dict]
        One :func:`evaluate_release` dict (``by_attribute``) per (setting, model), with ``sweep`` =
        ``"ell_per_attribute"``, ``setting`` (``"per-attribute"``, ``"uniform max"``, ``"uniform min"``), ``ell``
        (int: L for the per-attribute setting) and ``ell_per_attribute`` (attribute -> ℓ_i of the point). Empty when
        the plan's mapping does not name exactly ``sensitive_attributes``.
    """
    mapping = dict(plan.ell_per_attribute)
    if sorted(mapping) != sorted(sensitive_attributes):
        return []
    mapping = {a: int(mapping[a]) for a in sensitive_attributes}
    largest, smallest = max(mapping.values()), min(mapping.values())
    settings: list[tuple[str, EllRequirement]] = [("per-attribute", mapping), ("uniform max", largest), ("uniform min", smallest)]
    rules = mine_strong_rules(records, list(sensitive_attributes), min_confidence=plan.default_min_confidence)
    points = []
    for label, ell in settings:
        for model in MODELS:
            if progress:
                progress(f"{model} {label} ell={ell} min_confidence={plan.default_min_confidence}")
            point = evaluate_release(
                records,
                quasi_identifiers,
                sensitive_attributes,
                model=model,
                ell=ell,
                min_confidence=plan.default_min_confidence,
                seed=plan.seed,
                rules=rules,
                by_attribute=True,
            )
            points.append(
                {
                    **point,
                    "sweep": "ell_per_attribute",
                    "setting": label,
                    "ell": largest if isinstance(ell, dict) else int(ell),
                    "ell_per_attribute": ell_by_attribute(ell, sensitive_attributes),
                }
            )
    return points


def _same_sids(first, second) -> bool:
    """Same SIDs (as value sets, in creation order), record→SID map and suppressed records."""
    return first.same_sids_as(second)


def _time_sid_creation(record_ids: list[int], columns: list[list[str]], ell: int, method: str) -> float:
    """Seconds to create the SIDs of every column, with the garbage collector paused (as
    ``timeit`` does: a collection triggered by earlier allocations would be billed to
    whichever method happens to be running)."""
    collecting = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        started = time.perf_counter()
        for values in columns:
            create_sids(record_ids, values, ell=ell, method=method)
        return time.perf_counter() - started
    finally:
        if collecting:
            gc.enable()


def run_sid_creation_timings(
    records: pd.DataFrame,
    sensitive_attributes: Sequence[str],
    plan: ExperimentPlan,
    *,
    progress: Progress | None = None,
) -> list[dict]:
    """Wall time of SID creation, improved (Algorithms 13 + 19) vs the old stable bubble sort.

    Figure 1: all sensitive attributes, random subsets of ``plan.record_counts`` records
    (kept in table order). Figure 2: all records, the first m attributes for each m of
    ``plan.attribute_set_sizes``. Each point is timed ``plan.timing_repeats`` times per
    method, the methods interleaved; the identical output of both methods (SIDs, record→SID
    map, suppressions) is checked once per point, as the comparison requires (SPEC §11).

    Returns
    -------
    list[dict]
        ``figure`` (1 or 2), ``n_records``, ``m``, ``ell``, ``method``, ``seconds`` (list of
        every run, s), ``median_seconds``, ``min_seconds``, ``max_seconds``,
        ``identical_output`` (bool).
    """
    sensitive_attribute_columns = list(sensitive_attributes)
    rng = np.random.default_rng(plan.seed)
    configurations = []
    for count in plan.record_counts:
        n = len(records) if count == 0 or count >= len(records) else count
        configurations.append((1, n, len(sensitive_attribute_columns)))
    for m in plan.attribute_set_sizes:
        configurations.append((2, len(records), m))
    points = []
    for figure, n, m in configurations:
        if n == len(records):
            subset = records
        else:
            chosen = np.sort(rng.choice(len(records), size=n, replace=False))
            subset = records.iloc[chosen]
        record_ids = subset["row_id"].astype("int64").tolist()
        columns = [as_text(subset[a]).tolist() for a in sensitive_attribute_columns[:m]]
        identical = all(
            _same_sids(
                create_sids(record_ids, values, ell=plan.default_ell, method="improved"),
                create_sids(record_ids, values, ell=plan.default_ell, method="plain"),
            )
            for values in columns
        )
        if progress:
            progress(f"SID creation timing: figure {figure}, n={n}, m={m}")
        runs: dict[str, list[float]] = {"improved": [], "plain": []}
        for _ in range(plan.timing_repeats):
            for method in ("improved", "plain"):
                runs[method].append(_time_sid_creation(record_ids, columns, plan.default_ell, method))
        for method, seconds in runs.items():
            points.append(
                {
                    "figure": figure,
                    "n_records": n,
                    "m": m,
                    "ell": plan.default_ell,
                    "method": method,
                    "seconds": seconds,
                    "median_seconds": statistics.median(seconds),
                    "min_seconds": min(seconds),
                    "max_seconds": max(seconds),
                    "identical_output": bool(identical),
                }
            )
    return points
