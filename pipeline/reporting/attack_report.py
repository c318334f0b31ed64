"""Attack evaluation: the join adversary and the one-known-value adversary against four releases
of the same table, and their utility, as ``results.json``, ``REPORT.md`` and PNG figures.

Releases (built in memory, never published):

* ``naive``: the naive per-attribute release of P2 §1 (one table per sensitive attribute, the
  other sensitive attributes generalised as quasi-identifiers, distinct ℓ-diversity, ``k = ℓ``;
  :mod:`pipeline.core.naive_release`);
* ``kl``: the (k, ℓ) release of P2 (SPEC §14; :func:`pipeline.core.kl_anonymity.kl_anonymize`);
* ``mixed``: P1's mixed model, built exactly as :func:`pipeline.evaluation.experiments.evaluate_release` does;
* ``rating``: the plain Rating baseline (SPEC §7), likewise.

The adversaries and the modelling choices are those of :mod:`pipeline.core.attacks`; the
utility measures those of :mod:`pipeline.core.release_utility`. Every verdict sentence of the
report is computed from the measurements. No Dagster here: ``assets/attacks.py`` calls
:func:`run_attack_evaluation` and :func:`write_attack_report`.

Sources: P2 §1 and §3; P1 §3.3 and §6; SPEC §7, §10, §11, §14.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, UTC
from pathlib import Path

import numpy as np
import pandas as pd

from pipeline.core.adversary import recover_rule_confidences
from pipeline.core.attacks import (
    join_attack,
    kl_release_belief,
    mixed_release_belief,
    naive_release_belief,
    one_known_value_attacks,
    population_baseline,
    rating_release_belief,
    summarize_attack,
    victim_table,
)
from pipeline.core.hierarchies import Hierarchy
from pipeline.core.mixed_model import assemble_release_tables, run_mixed_model
from pipeline.core.naive_release import naive_release
from pipeline.core.query_workload import build_workload, release_workload_utility
from pipeline.core.rating import rating_tables
from pipeline.core.release_utility import (
    average_confidence,
    hiding_set_sizes_kl,
    hiding_set_sizes_mixed,
    hiding_set_sizes_naive,
    kl_rule_confidences,
    naive_rule_confidences,
    utility_measures,
)
from pipeline.core.rules import mine_strong_rules
from pipeline.reporting.experiments_report import machine_description
from pipeline.reporting.figures import pyplot

__all__ = [
    "FIGURES",
    "MODELS",
    "MODEL_LABELS",
    "AttackEvaluation",
    "pair_key",
    "run_attack_evaluation",
    "write_attack_report",
]

#: Releases compared, in report order.
MODELS = ("naive", "kl", "mixed", "rating")
MODEL_LABELS = {
    "naive": "naive per-attribute (P2 §1)",
    "kl": "(k, ℓ) (P2)",
    "mixed": "mixed model (P1)",
    "rating": "Rating (baseline)",
    "population": "no release: population prior",
}
MODEL_COLORS = {"naive": "tab:red", "kl": "tab:green", "mixed": "tab:blue", "rating": "tab:orange", "population": "gray"}
#: File names of the figures.
FIGURES = {"join": "join_attack.png", "one_known": "one_known_value.png", "utility": "utility.png"}
Progress = Callable[[str], None]


def pair_key(known: str, target: str) -> str:
    """JSON key of an ordered pair: ``"education->occupation"``."""
    return f"{known}->{target}"


@dataclass
class AttackEvaluation:
    """Outcome of :func:`run_attack_evaluation`.

    Attributes
    ----------
    results
        JSON-safe: ``parameters``, ``dataset``, ``releases``, ``join_attack`` (model ->
        :func:`pipeline.core.attacks.summarize_attack`), ``one_known_value`` (model -> pair key ->
        summary, plus ``n_pinned_sac``/``n_pinned_attribute_table`` for the mixed model),
        ``utility`` (model -> measures and rule confidences), ``seconds`` (wall time per stage),
        ``verdicts`` (computed sentences), ``modelling_choices``.
    join
        Model -> per-victim frame of :func:`pipeline.core.attacks.join_attack` (PRIVATE: victim ids).
    one_known
        Model -> ``(A, B)`` -> per-victim frame (PRIVATE).
    """

    results: dict
    join: dict[str, pd.DataFrame] = field(default_factory=dict)
    one_known: dict[str, dict[tuple[str, str], pd.DataFrame]] = field(default_factory=dict)


MODELLING_CHOICES = [
    "Victims are all released records; the adversary's belief uses the published tables only, the raw values only score it.",
    "Score = the belief's probability of the victim's TRUE tuple (join) or TRUE value of the target (one-known-value). "
    "'Certain'/'pinned' = the belief is a point mass (one tuple/value with positive probability), decided by counting, "
    "so it is always the truth.",
    "Candidate rows = published rows whose QI tuple covers the victim's QIs: equality for mixed and Rating (QIs "
    "unchanged), hierarchy coverage for (k, ℓ) and naive (a label covers a value iff it is the value's ancestor at "
    "that label's level).",
    "Belief (mixed, Rating, (k, ℓ)) = uniform mixture over candidate rows; a (k, ℓ) row = its class's multiset of full "
    "tuples; a SAC~ row = per attribute cluster the group's multiset of cluster sub-tuples (independent across "
    "clusters); an attribute-table row = per attribute its SID's value shares (suppressed cell: the attribute's "
    "overall released distribution). The adversary ignores the global 'each SID value belongs to exactly one record' "
    "constraint.",
    "One-known-value = Bayes inside that mixture: P(B=b|A=a) = Σ_rows P_row(a, b) / Σ_rows P_row(a).",
    "Naive release: the tables are joined on the victim's QIs by arc consistency (a row is alive iff its QI labels "
    "cover the victim, its raw value is still possible and each generalised label covers a possible value; a value "
    "stays possible iff an alive row of its own table holds it and every other table has an alive row whose label "
    "covers it), iterated to a fixed point. Per-attribute belief = value shares among the alive rows of its table; "
    "full-tuple probability = product over attributes (independence approximation); certain iff every attribute keeps "
    "one value (exact). One-known-value: the same join with the known attribute fixed to the victim's value.",
    "Naive tables: per sensitive attribute S_j, QIs + the other sensitive attributes generalised, distinct ℓ-diversity "
    "of S_j, k = ℓ, built with the same (k, ℓ) algorithm (blocked greedy, SPEC §14).",
    "Reference 'no release: population prior': the victims' own joint distribution without QIs (tuple frequency; "
    "#(a, b)/#a); what population statistics alone give away.",
    "Utility: see pipeline/core/release_utility.py — hiding set of a cell = its (k, ℓ)/naive class, SAC~ group or SID "
    "(records behind it); average cluster size = mean hiding-set size per attribute (cells / distinct sets), averaged "
    "over attributes; discernibility = Σ_records |hiding set| per attribute (suppressed cell or deleted record: n), "
    "mean over attributes; suppressed cells = NULL SIDs / (n·m); S = SPEC §14.2 cost (naive: sum over its tables; "
    "mixed/Rating: 0). Rule confidence: (k, ℓ) counted on released tuples (exact); mixed and Rating via Lemma 22 / "
    "SPEC §11 expected supports; naive: support(a) in table A, support(a ∧ b) = Σ over table A's rows holding a of "
    "[b covered by its B label] / |base values of B covered|.",
]


def _lap(seconds: dict, name: str, started: float) -> float:
    now = time.perf_counter()
    seconds[name] = round(now - started, 3)
    return now


def _one_known_summary(frames: Mapping[tuple[str, str], pd.DataFrame], ell: int, sac_victims: np.ndarray | None = None) -> dict:
    summary = {}
    for (known, target), frame in frames.items():
        item = summarize_attack(frame["probability"].to_numpy(), frame["pinned"].to_numpy(), ell=ell)
        if sac_victims is not None:
            in_sac = frame["source_row_id"].isin(sac_victims).to_numpy()
            item["n_victims_sac"] = int(in_sac.sum())
            item["n_pinned_sac"] = int((frame["pinned"].to_numpy() & in_sac).sum())
            item["n_pinned_attribute_table"] = int((frame["pinned"].to_numpy() & ~in_sac).sum())
        summary[pair_key(known, target)] = item
    return summary


def run_attack_evaluation(
    records: pd.DataFrame,
    quasi_identifiers: Sequence[str],
    sensitive_attributes: Sequence[str],
    hierarchies: Mapping[str, Hierarchy],
    *,
    ell: int,
    k: int,
    min_confidence: float,
    seed: int = 0,
    kl_method: str = "blocked",
    max_block_size: int = 256,
    generalization_weights: Mapping[str, float] | None = None,
    dataset_description: str = "",
    progress: Progress | None = None,
) -> AttackEvaluation:
    """Build the four releases in memory, run both adversaries on each and measure utility.

    Parameters
    ----------
    records
        ``row_id`` + quasi-identifiers + sensitive attributes (text), no missing sensitive
        value (:func:`pipeline.io.loading.load_records`). PRIVATE.
    quasi_identifiers, sensitive_attributes
        Columns; at least 2 sensitive attributes.
    hierarchies
        Hierarchy of every quasi-identifier and every sensitive attribute (the naive release
        generalises the sensitive attributes too).
    ell
        ℓ of every release (mixed/Rating: SAC~ group size and SID diversity; (k, ℓ): Diverse;
        naive: distinct ℓ-diversity with ``k = ℓ``).
    k
        k of the (k, ℓ) release (``k >= ell``).
    min_confidence
        Threshold of the strong rules (mixed model; the confidence comparison of every release).
    seed
        Seed of the SAC~ permutation.
    kl_method, max_block_size
        Algorithm of the (k, ℓ) and naive releases (see ``kl_anonymize``).
    generalization_weights
        Cost weight ``c_i`` per quasi-identifier (default 1) of the (k, ℓ) and naive releases;
        the sensitive attributes the naive tables generalise weigh 1.
    dataset_description
        Named in the report.
    progress
        Called with a short message before each stage.

    Returns
    -------
    AttackEvaluation

    Raises
    ------
    ValueError, pipeline.core.kl_anonymity.InfeasibleError, pipeline.core.hierarchies.HierarchyError
        Invalid parameters or data (from the core functions).
    """
    from pipeline.core.kl_anonymity import kl_anonymize, kl_release_table  # numba's kernels: imported when they run

    quasi_identifier_columns, sensitive_attribute_columns = list(quasi_identifiers), list(sensitive_attributes)
    say = progress or (lambda message: None)
    seconds: dict[str, float] = {}
    started_all = started = time.perf_counter()
    say("mining strong rules")
    rules = mine_strong_rules(records, sensitive_attribute_columns, min_confidence=min_confidence)
    started = _lap(seconds, "rules", started)

    say("building the mixed release")
    mixed = run_mixed_model(records, sensitive_attribute_columns, ell=ell, min_confidence=min_confidence, seed=seed, rules=rules)
    mixed_tables = assemble_release_tables(
        records,
        quasi_identifier_columns,
        sensitive_attribute_columns,
        sac_permuted=mixed.sac_permuted,
        attribute_sids=mixed.attribute_sids,
        id_table=mixed.id_table,
        clusters=mixed.clusters,
    )
    started = _lap(seconds, "release_mixed", started)
    say("building the Rating release")
    id_table, attribute_sids = rating_tables(records, sensitive_attribute_columns, ell=ell)
    empty = pd.DataFrame(
        {c: pd.Series(dtype=object) for c in ["group_id", "row_id", *quasi_identifier_columns, *sensitive_attribute_columns]}
    )
    rating = assemble_release_tables(
        records,
        quasi_identifier_columns,
        sensitive_attribute_columns,
        sac_permuted=empty,
        attribute_sids=attribute_sids,
        id_table=id_table,
        clusters=[],
    )
    started = _lap(seconds, "release_rating", started)
    say(f"building the (k, ℓ) release (k={k}, ℓ={ell})")
    weights = {a: float((generalization_weights or {}).get(a, 1.0)) for a in quasi_identifier_columns}
    kl = kl_anonymize(
        records,
        quasi_identifier_columns,
        sensitive_attribute_columns,
        {a: hierarchies[a] for a in quasi_identifier_columns},
        k=k,
        ell=ell,
        weights=weights,
        method=kl_method,
        max_block_size=max_block_size,
    )
    kl_released, kl_row_map = kl_release_table(records, kl, quasi_identifier_columns, sensitive_attribute_columns)
    started = _lap(seconds, "release_kl", started)
    say(f"building the naive per-attribute release ({len(sensitive_attribute_columns)} tables)")
    naive = naive_release(
        records,
        quasi_identifier_columns,
        sensitive_attribute_columns,
        hierarchies,
        ell=ell,
        weights=weights,
        method=kl_method,
        max_block_size=max_block_size,
    )
    naive_tables = {a: t.released for a, t in naive.tables.items()}
    started = _lap(seconds, "release_naive", started)

    beliefs = {
        "naive": naive_release_belief(naive_tables, quasi_identifier_columns, sensitive_attribute_columns, hierarchies),
        "kl": kl_release_belief(kl_released, quasi_identifier_columns, sensitive_attribute_columns, hierarchies),
        "mixed": mixed_release_belief(
            sac_released=mixed_tables.sac_released,
            attribute_table=mixed_tables.attribute_table,
            id_table=mixed_tables.id_table,
            attribute_clusters=mixed_tables.attribute_clusters,
            quasi_identifiers=quasi_identifier_columns,
            sensitive_attributes=sensitive_attribute_columns,
        ),
        "rating": rating_release_belief(
            attribute_table=rating.attribute_table,
            id_table=rating.id_table,
            quasi_identifiers=quasi_identifier_columns,
            sensitive_attributes=sensitive_attribute_columns,
        ),
    }
    common = set(naive.tables[sensitive_attribute_columns[0]].row_map["source_row_id"])
    for table in naive.tables.values():
        common &= set(table.row_map["source_row_id"])
    row_maps = {
        "naive": pd.DataFrame({"source_row_id": sorted(common)}),
        "kl": kl_row_map,
        "mixed": mixed_tables.row_map,
        "rating": rating.row_map,
    }
    sac_ids = mixed_tables.row_map.loc[
        mixed_tables.row_map["row_id"].isin(mixed_tables.sac_released["row_id"]), "source_row_id"
    ].to_numpy()
    pairs = [(a, b) for a in sensitive_attribute_columns for b in sensitive_attribute_columns if a != b]
    evaluation = AttackEvaluation(results={})
    join_summary, one_known_summary = {}, {}
    for model in MODELS:
        victims = victim_table(records, row_maps[model], quasi_identifier_columns, sensitive_attribute_columns)
        say(f"join attack on the {model} release ({len(victims)} victims)")
        evaluation.join[model] = join_attack(beliefs[model], victims)
        started = _lap(seconds, f"join_{model}", started)
        say(f"one-known-value attack on the {model} release ({len(pairs)} ordered pairs)")
        evaluation.one_known[model] = one_known_value_attacks(beliefs[model], victims, pairs)
        started = _lap(seconds, f"one_known_{model}", started)
        frame = evaluation.join[model]
        join_summary[model] = summarize_attack(frame["probability"].to_numpy(), frame["certain"].to_numpy(), ell=ell)
        join_summary[model]["mean_candidate_rows"] = (
            float(frame["n_candidate_rows"].mean()) if "n_candidate_rows" in frame else None
        )
        one_known_summary[model] = _one_known_summary(evaluation.one_known[model], ell, sac_ids if model == "mixed" else None)
    victims_all = victim_table(
        records, pd.DataFrame({"source_row_id": records["row_id"]}), quasi_identifier_columns, sensitive_attribute_columns
    )
    base_join, base_one_known = population_baseline(victims_all, sensitive_attribute_columns, pairs)
    evaluation.join["population"] = base_join
    evaluation.one_known["population"] = base_one_known
    join_summary["population"] = summarize_attack(base_join["probability"].to_numpy(), base_join["certain"].to_numpy(), ell=ell)
    one_known_summary["population"] = _one_known_summary(base_one_known, ell)

    say("utility")
    n = len(records)
    utility = {
        "naive": utility_measures(
            hiding_set_sizes_naive(naive_tables, {a: t.row_map for a, t in naive.tables.items()}, sensitive_attribute_columns),
            n_records=n,
            generalization_cost=naive.total_cost,
        )
        | {"generalization_cost_per_table": {a: float(t.anonymization.total_cost) for a, t in naive.tables.items()}},
        "kl": utility_measures(
            hiding_set_sizes_kl(kl_released, sensitive_attribute_columns), n_records=n, generalization_cost=kl.total_cost
        ),
        "mixed": utility_measures(
            hiding_set_sizes_mixed(
                sac_released=mixed_tables.sac_released,
                attribute_table=mixed_tables.attribute_table,
                id_table=mixed_tables.id_table,
                sensitive_attributes=sensitive_attribute_columns,
            ),
            n_records=n,
            n_deleted=len(mixed.grouping.deleted),
        ),
        "rating": utility_measures(
            hiding_set_sizes_mixed(
                sac_released=empty,
                attribute_table=rating.attribute_table,
                id_table=rating.id_table,
                sensitive_attributes=sensitive_attribute_columns,
            ),
            n_records=n,
        ),
    }
    release = {
        "mixed": {
            "sac_released": mixed_tables.sac_released,
            "attribute_table": mixed_tables.attribute_table,
            "id_table": mixed_tables.id_table,
            "attribute_clusters": mixed_tables.attribute_clusters,
        },
        "rating": {
            "sac_released": rating.sac_released,
            "attribute_table": rating.attribute_table,
            "id_table": rating.id_table,
            "attribute_clusters": rating.attribute_clusters,
        },
    }
    confidences = {
        "naive": naive_rule_confidences(rules, naive_tables, hierarchies),
        "kl": kl_rule_confidences(rules, kl_released),
        "mixed": recover_rule_confidences(rules, **release["mixed"]),
        "rating": recover_rule_confidences(rules, **release["rating"]),
    }
    for model in MODELS:
        utility[model]["rule_confidence"] = average_confidence(confidences[model])
        utility[model]["rules"] = [
            {
                "rule": f"{r.antecedent_attribute}={r.antecedent_value} => {r.consequent_attribute}={r.consequent_value}",
                "raw_confidence": float(r.support_both / r.support_antecedent),
                "released_confidence": None if pd.isna(r.released_confidence) else float(r.released_confidence),
            }
            for r in confidences[model].itertuples(index=False)
        ]
    say("query workload")
    # Xiao & Tao's COUNT-query workload (pipeline/core/query_workload.py): one workload for the four releases
    workload = build_workload(records, quasi_identifier_columns, sensitive_attribute_columns)
    workload_tables: dict[str, tuple[str, Mapping[str, pd.DataFrame]]] = {
        "naive": ("naive", naive_tables),
        "kl": ("kl", {"table": kl_released}),
        "mixed": ("mixed", release["mixed"]),
        "rating": ("rating", release["rating"]),
    }
    for model, (estimator, tables) in workload_tables.items():
        utility[model]["query_workload"] = release_workload_utility(
            records,
            quasi_identifier_columns,
            sensitive_attribute_columns,
            model=estimator,
            tables=tables,
            hierarchies=hierarchies,
            workload=workload,
        )
    started = _lap(seconds, "utility", started)
    seconds["total"] = round(time.perf_counter() - started_all, 3)

    releases = {
        "naive": {
            "n_published_records": len(common),
            "n_tables": len(naive.tables),
            "k": ell,
            "ell": ell,
            "n_classes_per_table": {a: int(len(t.anonymization.clusters)) for a, t in naive.tables.items()},
        },
        "kl": {
            "n_published_records": len(kl_released),
            "k": k,
            "ell": ell,
            "n_classes": int(len(kl.clusters)),
            "n_blocks": int(kl.n_blocks),
            "method": kl.method,
            "min_diverse": int(kl.clusters["diverse"].min()),
        },
        "mixed": {
            "n_published_records": len(mixed_tables.row_map),
            "n_sac_released": len(mixed_tables.sac_released),
            "n_attribute_table": len(mixed_tables.attribute_table),
            "n_groups": int(mixed_tables.sac_released["group_id"].nunique()),
            "n_deleted": len(mixed.grouping.deleted),
            "attribute_clusters": [list(c) for c in mixed.clusters],
            "n_strong_rules": len(rules),
        },
        "rating": {"n_published_records": len(rating.row_map), "n_attribute_table": len(rating.attribute_table)},
    }
    evaluation.results = {
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "parameters": {
            "ell": ell,
            "k": k,
            "min_confidence": min_confidence,
            "seed": seed,
            "kl_method": kl_method,
            "max_block_size": max_block_size,
            "generalization_weights": weights,
        },
        "dataset": {
            "description": dataset_description,
            "n_records": n,
            "quasi_identifiers": quasi_identifier_columns,
            "sensitive_attributes": sensitive_attribute_columns,
        },
        "machine": machine_description(),
        "seconds": seconds,
        "releases": releases,
        "join_attack": join_summary,
        "one_known_value": one_known_summary,
        "utility": utility,
        "modelling_choices": MODELLING_CHOICES,
    }
    evaluation.results["verdicts"] = verdicts(evaluation.results)
    return evaluation


# --------------------------------------------------------------------------- verdicts


def _pct(x: float) -> str:
    return f"{100 * x:.2f} %"


def _mean_pinned(results: dict, model: str) -> float:
    values = [v["share_certain"] for v in results["one_known_value"][model].values()]
    return float(np.mean(values)) if values else 0.0


def _worst_pair(results: dict, model: str) -> tuple[str, dict]:
    items = results["one_known_value"][model]
    return max(items.items(), key=lambda kv: (kv[1]["share_certain"], kv[1]["mean"]))


def verdicts(results: dict) -> dict[str, list[str]]:
    """Sentences computed from the numbers: ``join``, ``one_known``, ``leaks``, ``trade_off``, ``utility``."""
    join, utility = results["join_attack"], results["utility"]
    out: dict[str, list[str]] = {"join": [], "one_known": [], "leaks": [], "trade_off": [], "utility": []}
    for model in MODELS:
        s = join[model]
        out["join"].append(
            f"{MODEL_LABELS[model]}: {s['n_certain']} of {s['n_victims']} victims ({_pct(s['share_certain'])}) have their "
            f"full tuple inferred with probability 1; belief in the true tuple: mean {s['mean']:.4f}, median "
            f"{s['median']:.4f}, p90 {s['p90']:.4f}, max {s['max']:.3f}; {_pct(s['share_above_one_over_ell'])} above 1/ℓ."
        )
    certain_models = [m for m in MODELS if join[m]["n_certain"] > 0]
    safe_models = [m for m in MODELS if join[m]["n_certain"] == 0]
    if certain_models:
        out["join"].append(
            "The join attack pins full tuples in: "
            + ", ".join(f"{MODEL_LABELS[m]} ({join[m]['n_certain']} victims)" for m in certain_models)
            + (". It pins none in: " + ", ".join(MODEL_LABELS[m] for m in safe_models) if safe_models else "")
            + "."
        )
    else:
        out["join"].append("The join attack pins no full tuple in any release.")
    if "naive" in certain_models:
        out["join"].append(
            "Naive release: each table alone is ℓ-diverse, yet intersecting the tables on the victim's QIs leaves a single "
            f"consistent tuple for {join['naive']['n_certain']} victims — P2's join attack, reproduced."
        )
    for model in MODELS:
        worst_key, worst = _worst_pair(results, model)
        out["one_known"].append(
            f"{MODEL_LABELS[model]}: knowing one sensitive value pins another for {_pct(_mean_pinned(results, model))} of victims "
            f"on average over the {len(results['one_known_value'][model])} ordered pairs; worst pair {worst_key}: "
            f"{_pct(worst['share_certain'])} pinned, mean belief in the true value {worst['mean']:.3f}."
        )
    base = _mean_pinned(results, "population")
    base_cases = sum(v["n_certain"] for v in results["one_known_value"]["population"].values())
    out["one_known"].append(
        f"Reference without any release (population prior, no QIs): {_pct(base)} pinned on average ({base_cases} "
        "(victim, pair) cases in all: a known value pins the other one only when all its holders in the table share it)"
        + (
            ", so the pinning above comes from the releases."
            if all(base <= 0.1 * _mean_pinned(results, m) for m in MODELS if _mean_pinned(results, m) > 0)
            else "; part of the pinning above is already in the data."
        )
    )
    # where our models leak
    mixed_items = results["one_known_value"]["mixed"]
    pinned_sac = sum(v.get("n_pinned_sac", 0) for v in mixed_items.values())
    pinned_at = sum(v.get("n_pinned_attribute_table", 0) for v in mixed_items.values())
    if pinned_sac + pinned_at:
        clusters = results["releases"]["mixed"]["attribute_clusters"]
        linked = [c for c in clusters if len(c) > 1]
        n_sac = next(iter(mixed_items.values())).get("n_victims_sac", 0)
        n_at = next(iter(mixed_items.values()))["n_victims"] - n_sac
        share_sac = float(np.mean([v["n_pinned_sac"] / n_sac for v in mixed_items.values()])) if n_sac else 0.0
        share_at = float(np.mean([v["n_pinned_attribute_table"] / n_at for v in mixed_items.values()])) if n_at else 0.0
        out["leaks"].append(
            f"Mixed model: averaged over the ordered pairs, the one-known-value adversary pins the other value of "
            f"{_pct(share_sac)} of the {n_sac} SAC~ rows and of {_pct(share_at)} of the {n_at} attribute-table rows. "
            + (
                f"SAC~ keeps the attribute cluster(s) {linked} linked inside a record by design (that is what keeps every "
                "rule confidence exact, Lemma 22), so when only one candidate row of the victim's QI tuple can hold the "
                "known value, the linked values come with it; P1's threat model (an adversary who knows the rules, not a "
                "value of the victim) does not cover this."
                if linked
                else ""
            )
        )
    else:
        out["leaks"].append("Mixed model: the one-known-value adversary pins no value.")
    kl_mean = _mean_pinned(results, "kl")
    if kl_mean > 0:
        worst_key, worst = _worst_pair(results, "kl")
        out["leaks"].append(
            f"(k, ℓ) model: full tuples stay linked and a class only needs ℓ pairwise totally different tuples, so the other "
            f"rows of a class may repeat or correlate values: knowing one value pins another for {_pct(kl_mean)} of victims "
            f"on average (worst {worst_key}: {_pct(worst['share_certain'])}). The join attack alone never reaches "
            f"certainty there (max {join['kl']['max']:.3f})."
        )
    rating_pinned = sum(v["n_certain"] for v in results["one_known_value"]["rating"].values())
    if rating_pinned == 0:
        confidence = utility["rating"]["rule_confidence"]
        lost = (
            f"; it keeps an average rule confidence of only {confidence['average_released_confidence']:.3f} "
            f"(raw {confidence['average_raw_confidence']:.3f})"
            if confidence["n_rules"]
            else ""
        )
        out["leaks"].append(
            "Rating: no value is ever pinned (every attribute is bucketized independently into SIDs of ≥ ℓ values), and "
            f"its join-attack belief never exceeds {join['rating']['max']:.4f}{lost}. Its known weakness is another "
            "adversary, the strong-rule adversary of SPEC §10 (reports/experiments, Figures 10-11)."
        )
    else:
        out["leaks"].append(f"Rating: the one-known-value adversary pins {rating_pinned} (victim, pair) cases.")
    # trade-off: rule confidence vs one-known resistance
    for model in MODELS:
        c = utility[model]["rule_confidence"]
        if c["n_rules"]:
            out["trade_off"].append(
                f"{MODEL_LABELS[model]}: average rule confidence {c['average_released_confidence']:.4f} vs raw "
                f"{c['average_raw_confidence']:.4f} ({c['n_rules_exact']} of {c['n_rules']} rules exact); one-known-value "
                f"pinned {_pct(_mean_pinned(results, model))} on average."
            )
    exact = [
        m
        for m in MODELS
        if utility[m]["rule_confidence"]["n_rules"]
        and utility[m]["rule_confidence"]["n_rules_exact"] == utility[m]["rule_confidence"]["n_rules"]
    ]
    if exact:
        least = min(exact, key=lambda m: _mean_pinned(results, m))
        out["trade_off"].append(
            "Among the releases that keep every strong-rule confidence exact ("
            + ", ".join(MODEL_LABELS[m] for m in exact)
            + f"), the {MODEL_LABELS[least]} resists the one-known-value adversary best "
            f"({_pct(_mean_pinned(results, least))} pinned on average)."
        )
    for model in MODELS:
        u = utility[model]
        out["utility"].append(
            f"{MODEL_LABELS[model]}: S = {u['generalization_cost']:.0f}, average cluster size {u['average_cluster_size']:.2f}, "
            f"discernibility {u['discernibility']:.4g} ({u['discernibility_per_record']:.1f} per record, "
            f"{_pct(u['discernibility_share_from_suppression'])} of it from suppressed cells and deleted records), "
            f"{_pct(u['share_suppressed_cells'])} suppressed cells, {u['n_deleted']} deleted records."
        )
    return out


# --------------------------------------------------------------------------- figures


def _save(fig, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    pyplot().close(fig)
    return path


def _join_figure(evaluation: AttackEvaluation, path: Path) -> Path:
    results = evaluation.results
    ell = results["parameters"]["ell"]
    models = [*MODELS, "population"]
    fig, (left, right) = pyplot().subplots(1, 2, figsize=(12, 5.4), gridspec_kw={"width_ratios": [3, 2]})
    for model in models:
        p = np.sort(evaluation.join[model]["probability"].to_numpy())
        if len(p) == 0:
            continue
        y = np.arange(1, len(p) + 1) / len(p)
        left.step(
            np.maximum(p, 1e-6),
            y,
            where="post",
            color=MODEL_COLORS[model],
            linestyle="--" if model == "population" else "-",
            label=f"{MODEL_LABELS[model]} (certain: {_pct(results['join_attack'][model]['share_certain'])})",
        )
    left.axvline(1 / ell, color="black", linewidth=0.8, linestyle=":")
    left.text(1 / ell, 0.02, " 1/ℓ", fontsize=8)
    left.set_xscale("log")
    left.set_xlim(1e-6, 1.05)
    left.set_ylim(0, 1.01)
    left.set_xlabel("belief in the victim's true full tuple (log scale; values < 1e-6 drawn at 1e-6)")
    left.set_ylabel("share of victims with belief ≤ x (CDF)")
    left.set_title("(a) Join attack: distribution of inference probabilities", fontsize=10)
    left.grid(alpha=0.3)
    left.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, frameon=False)
    x = np.arange(len(models))
    width = 0.38
    certain = [100 * results["join_attack"][m]["share_certain"] for m in models]
    above = [100 * results["join_attack"][m]["share_above_one_over_ell"] for m in models]
    right.bar(x - width / 2, certain, width, color=[MODEL_COLORS[m] for m in models], label="inferred with probability 1")
    right.bar(x + width / 2, above, width, color=[MODEL_COLORS[m] for m in models], alpha=0.45, hatch="//", label="belief > 1/ℓ")
    for xi, (c, a) in enumerate(zip(certain, above, strict=True)):
        right.text(
            xi - width / 2,
            c,
            f"{c:.2f}\n({results['join_attack'][models[xi]]['n_certain']})",
            ha="center",
            va="bottom",
            fontsize=7,
        )
        right.text(xi + width / 2, a, f"{a:.2f}", ha="center", va="bottom", fontsize=7)
    right.set_xticks(x)
    right.set_xticklabels([MODEL_LABELS[m].replace(" (", "\n(").replace(": ", ":\n") for m in models], fontsize=7)
    right.set_ylabel("% of victims (in brackets: number certain)")
    right.set_title("(b) Join attack: share of victims certain / above 1/ℓ", fontsize=10)
    right.grid(alpha=0.3, axis="y")
    right.legend(fontsize=7)
    return _save(fig, path)


def _one_known_figure(results: dict, path: Path) -> Path:
    models = [*MODELS, "population"]
    pairs = list(results["one_known_value"][MODELS[0]])
    pinned = np.array([[100 * results["one_known_value"][m][p]["share_certain"] for p in pairs] for m in models])
    mean = np.array([results["one_known_value"][m][p]["mean"] for m in models for p in pairs]).reshape(len(models), len(pairs))
    fig, axes = pyplot().subplots(2, 1, figsize=(12, 7.4))
    for ax, values, title, fmt, vmax, cmap in (
        (
            axes[0],
            pinned,
            "(a) One-known-value attack: % of victims whose other value is pinned (probability 1)",
            "{:.1f}",
            max(1.0, float(pinned.max())),
            "Reds",
        ),
        (
            axes[1],
            mean,
            "(b) One-known-value attack: mean belief in the victim's true value of the target attribute",
            "{:.2f}",
            1.0,
            "Blues",
        ),
    ):
        image = ax.imshow(values, aspect="auto", cmap=cmap, vmin=0, vmax=vmax)
        for i in range(values.shape[0]):
            for j in range(values.shape[1]):
                ax.text(
                    j,
                    i,
                    fmt.format(values[i, j]),
                    ha="center",
                    va="center",
                    fontsize=7,
                    color="white" if values[i, j] > 0.6 * vmax else "black",
                )
        ax.set_yticks(range(len(models)))
        ax.set_yticklabels([MODEL_LABELS[m] for m in models], fontsize=8)
        ax.set_xticks(range(len(pairs)))
        ax.set_xticklabels([p.replace("->", " →\n") for p in pairs], fontsize=7)
        ax.set_title(title, fontsize=10)
        fig.colorbar(image, ax=ax, fraction=0.025)
    axes[1].set_xlabel("known attribute → inferred attribute")
    return _save(fig, path)


def _utility_figure(results: dict, path: Path) -> Path:
    utility = results["utility"]
    panels = [
        ("generalization cost S", lambda u: u["generalization_cost"], "{:.3g}"),
        ("average cluster size", lambda u: u["average_cluster_size"], "{:.2f}"),
        ("discernibility per record", lambda u: u["discernibility_per_record"], "{:.1f}"),
        ("suppressed cells (%)", lambda u: 100 * u["share_suppressed_cells"], "{:.2f}"),
        (
            "average rule confidence\n(dashed: raw)",
            lambda u: u["rule_confidence"]["average_released_confidence"] or 0.0,
            "{:.3f}",
        ),
    ]
    fig, axes = pyplot().subplots(1, len(panels), figsize=(14, 3.8))
    x = np.arange(len(MODELS))
    for ax, (title, getter, fmt) in zip(axes, panels, strict=True):
        values = [getter(utility[m]) for m in MODELS]
        ax.bar(x, values, color=[MODEL_COLORS[m] for m in MODELS])
        for xi, v in enumerate(values):
            ax.text(xi, v, fmt.format(v), ha="center", va="bottom", fontsize=7)
        ax.set_xticks(x)
        ax.set_xticklabels(["naive", "(k, ℓ)", "mixed", "Rating"], fontsize=8)
        ax.set_title(title, fontsize=9)
        ax.grid(alpha=0.3, axis="y")
    raw = utility["mixed"]["rule_confidence"]["average_raw_confidence"]
    if raw is not None:
        axes[-1].axhline(raw, color="black", linestyle="--", linewidth=0.9)
        axes[-1].set_ylim(0, 1.05)
    fig.suptitle("Utility of the four releases (same data, same ℓ)", fontsize=10)
    return _save(fig, path)


# --------------------------------------------------------------------------- report


def _markdown_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    return ["| " + " | ".join(header) + " |", "|" + "---|" * len(header), *("| " + " | ".join(r) + " |" for r in rows)]


def _report_markdown(results: dict) -> str:
    p, d, r = results["parameters"], results["dataset"], results["releases"]
    ell = p["ell"]
    v = results["verdicts"]
    lines = [
        "# Attacks on multi-sensitive-attribute releases: join and one-known-value adversaries",
        "",
        f"Generated on {results['generated_at'][:10]} by `pipeline.reporting.attack_report` (Dagster asset `attacks/attack_evaluation`). "
        "Every number below is measured by the code of this repository; `results.json` holds all of them (with the "
        "percentiles and histograms of every distribution). Verdict sentences are computed from the numbers.",
        "",
        "## Setup",
        "",
        f"- Data: {d['description'] or 'input table'} — {d['n_records']} records; quasi-identifiers "
        f"{', '.join(d['quasi_identifiers'])}; sensitive attributes {', '.join(d['sensitive_attributes'])}.",
        f"- Parameters: ℓ = {ell}, k = {p['k']} ((k, ℓ) release), min_confidence = {p['min_confidence']}, seed = {p['seed']}; "
        f"(k, ℓ) and naive tables built with the `{p['kl_method']}` method (the whole table when its distinct quasi-identifier tuples fit, else blocks of at most "
        f"{p['max_block_size']} records).",
        f"- Releases: naive — {r['naive']['n_tables']} tables, k = ℓ = {ell}, classes per table "
        f"{r['naive']['n_classes_per_table']}; (k, ℓ) — {r['kl']['n_classes']} classes (smallest Diverse {r['kl']['min_diverse']}); "
        f"mixed — {r['mixed']['n_sac_released']} SAC~ rows in {r['mixed']['n_groups']} groups, {r['mixed']['n_attribute_table']} "
        f"attribute-table rows, {r['mixed']['n_deleted']} deleted, {r['mixed']['n_strong_rules']} strong rules, attribute clusters "
        f"{r['mixed']['attribute_clusters']}; Rating — {r['rating']['n_attribute_table']} attribute-table rows.",
        f"- Wall time: total {results['seconds']['total']:.0f} s ("
        + ", ".join(f"{k} {s:.1f} s" for k, s in results["seconds"].items() if k != "total")
        + f") on {results['machine']['platform']}, {results['machine']['cpu_count']} CPUs.",
        "",
        "## Join attack (P2): the adversary knows the victim's quasi-identifiers",
        "",
        "The adversary intersects the candidate rows of every published table and infers the victim's full sensitive "
        "tuple. *Certain* = the belief is a point mass (then on the true tuple).",
        "",
        f"![Join attack]({FIGURES['join']})",
        "",
    ]
    rows = []
    for model in [*MODELS, "population"]:
        s = results["join_attack"][model]
        rows.append(
            [
                MODEL_LABELS[model],
                str(s["n_victims"]),
                f"{s['n_certain']} ({_pct(s['share_certain'])})",
                f"{s['mean']:.5f}",
                f"{s['median']:.5f}",
                f"{s['p90']:.5f}",
                f"{s['max']:.4f}",
                _pct(s["share_above_one_over_ell"]),
            ]
        )
    lines += _markdown_table(
        ["release", "victims", "certain (probability 1)", "mean", "median", "p90", "max", "share > 1/ℓ"], rows
    )
    lines += ["", *("- " + s for s in v["join"]), ""]
    lines += [
        "## One-known-value attack: the adversary also knows one sensitive value of the victim",
        "",
        "Per ordered pair *known → inferred*: share of victims whose inferred value is pinned (probability 1) and the "
        "mean belief in the true value. P1's threat model does not include this adversary; the numbers show the "
        "trade-off between keeping values linked (rule confidence) and resisting it.",
        "",
        f"![One-known-value attack]({FIGURES['one_known']})",
        "",
    ]
    pairs = list(results["one_known_value"][MODELS[0]])
    header = ["known → inferred", *(MODEL_LABELS[m] for m in [*MODELS, "population"])]
    rows = []
    for pair in pairs:
        cells = [pair.replace("->", " → ")]
        for model in [*MODELS, "population"]:
            s = results["one_known_value"][model][pair]
            cells.append(f"{_pct(s['share_certain'])} / {s['mean']:.3f}")
        rows.append(cells)
    mean_row = ["**mean over pairs**"] + [
        f"**{_pct(_mean_pinned(results, m))}** / {np.mean([s['mean'] for s in results['one_known_value'][m].values()]):.3f}"
        for m in [*MODELS, "population"]
    ]
    lines += ["Cells: share pinned / mean belief in the true value.", ""]
    lines += _markdown_table(header, [*rows, mean_row])
    lines += ["", *("- " + s for s in v["one_known"]), ""]
    lines += ["## Where our models leak", "", *("- " + s for s in v["leaks"]), ""]
    lines += ["## Utility", "", f"![Utility]({FIGURES['utility']})", ""]
    rows = []
    for model in MODELS:
        u = results["utility"][model]
        c = u["rule_confidence"]
        rows.append(
            [
                MODEL_LABELS[model],
                f"{u['generalization_cost']:.0f}",
                f"{u['average_cluster_size']:.2f}",
                f"{u['discernibility']:.4g}",
                f"{u['discernibility_per_record']:.1f}",
                f"{u['mean_hiding_set_size']:.2f}",
                _pct(u["share_suppressed_cells"]),
                str(u["n_deleted"]),
                "—" if c["average_released_confidence"] is None else f"{c['average_released_confidence']:.4f}",
                "—" if c["average_raw_confidence"] is None else f"{c['average_raw_confidence']:.4f}",
                f"{c['n_rules_exact']} / {c['n_rules']}",
            ]
        )
    lines += _markdown_table(
        [
            "release",
            "cost S",
            "avg cluster size",
            "discernibility",
            "per record",
            "mean set size of a published cell",
            "suppressed cells",
            "deleted records",
            "avg rule confidence (release)",
            "raw",
            "rules exact",
        ],
        rows,
    )
    lines += ["", *("- " + s for s in v["utility"]), ""]
    lines += _workload_markdown(results)
    lines += ["## Trade-off", "", *("- " + s for s in v["trade_off"]), ""]
    lines += ["## Modelling choices", "", *("- " + s for s in results["modelling_choices"]), ""]
    return "\n".join(lines)


def _workload_markdown(results: dict) -> list[str]:
    """The query-workload table (W1/W2 median and p90 relative error per release), when measured."""
    figures = {m: results["utility"][m].get("query_workload") for m in MODELS}
    if not all(figures.values()):
        return []
    first = next(iter(figures.values()))
    rows = [
        [
            MODEL_LABELS[model],
            *(f"{f[name]['median']:.3f} / {f[name]['p90']:.3f}" if f.get(name) else "—" for name in ("W1", "W2")),
        ]
        for model, f in figures.items()
    ]
    return [
        "### Query workload (Xiao & Tao, Anatomy, VLDB 2006)",
        "",
        f"{first['W1']['n_queries'] if first.get('W1') else 0} random COUNT queries per workload (seed {first['seed']}, "
        f"expected selectivity {first['selectivity']:g}): `WHERE` 1–2 quasi-identifiers and 1 sensitive attribute (W1) or "
        "2 (W2), each condition a random value set (a range for numeric attributes). Each release answers as an analyst "
        "would (pipeline/core/query_workload.py); relative error = |estimate − exact| / max(exact, "
        f"{first['floor']:.1f}) (0.1 % of the records). Cells: median / 90th percentile; lower is better.",
        "",
        *_markdown_table(["release", "W1", "W2"], rows),
        "",
    ]


def write_attack_report(evaluation: AttackEvaluation, output_dir: str | Path) -> dict[str, Path]:
    """Write ``results.json``, ``REPORT.md`` and the figures into ``output_dir``.

    Parameters
    ----------
    evaluation
        From :func:`run_attack_evaluation`.
    output_dir
        Created if missing (e.g. ``reports/attacks``).

    Returns
    -------
    dict
        ``results``, ``report`` and one entry per figure of :data:`FIGURES` -> path.
    """
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    paths = {
        "join": _join_figure(evaluation, out / FIGURES["join"]),
        "one_known": _one_known_figure(evaluation.results, out / FIGURES["one_known"]),
        "utility": _utility_figure(evaluation.results, out / FIGURES["utility"]),
    }
    results_path = out / "results.json"
    results_path.write_text(json.dumps(evaluation.results, indent=1, default=str) + "\n")
    report_path = out / "REPORT.md"
    report_path.write_text(_report_markdown(evaluation.results))
    return {"results": results_path, "report": report_path, **paths}
