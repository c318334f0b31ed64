"""How good and how fast the (k, ℓ) approximation is (issue: "report its cost against the exact
optimum on many small random tables (ratio distribution) and against the naive greedy on medium
tables"). No Dagster here; ``msa-release kl-quality`` and ``make kl-quality`` call :func:`main`.

Three measurements, all on random samples of the configured table (UCI Adult by default) with
its hierarchies:

1. small tables (8-10 records): SPEC §14.3 greedy vs the SPEC §14.4 exact optimum (subset DP);
2. medium tables (500-3,000 records): the blocked method (Mondrian-style blocks + greedy inside)
   vs the greedy on the whole table (``O(n²)`` memory, what the blocks avoid);
3. the whole table: the blocked method's wall time and cost.

Writes ``results.json``, ``REPORT.md`` and two PNG figures.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from pipeline.core import kl_anonymity as kl
from pipeline.core.hierarchies import Hierarchy

__all__ = ["QualityPlan", "compare_blocked_with_greedy", "compare_with_exact", "main", "time_whole_table", "write_quality_report"]


@dataclass(frozen=True)
class QualityPlan:
    """Points of the measurement; the defaults are the committed ``reports/kl_quality`` run."""

    small_sizes: tuple[int, ...] = (8, 9, 10)
    small_tables_per_point: int = 60
    small_parameters: tuple[tuple[int, int], ...] = ((2, 2), (3, 2), (3, 3))
    medium_sizes: tuple[int, ...] = (500, 1000, 2000, 3000)
    medium_parameters: tuple[tuple[int, int], ...] = ((3, 3), (5, 3))
    whole_parameters: tuple[tuple[int, int], ...] = ((3, 3), (5, 3), (10, 3))
    max_block_size: int = 256
    seed: int = 0


def _cost_ratio(cost: float, reference: float) -> float:
    """``cost / reference``; 1.0 when both are 0, ``inf`` when only the reference is 0."""
    if reference > 0:
        return cost / reference
    return 1.0 if cost == 0 else float("inf")


def _sample(records: pd.DataFrame, n: int, rng: np.random.Generator) -> pd.DataFrame:
    return records.iloc[np.sort(rng.choice(len(records), size=n, replace=False))]


def compare_with_exact(
    records: pd.DataFrame,
    quasi_identifiers: Sequence[str],
    sensitive_attributes: Sequence[str],
    hierarchies: dict[str, Hierarchy],
    plan: QualityPlan,
) -> list[dict]:
    """Greedy (SPEC §14.3) vs exact (SPEC §14.4) total cost on random small samples.

    Returns
    -------
    list of dict
        One per feasible sample: ``n``, ``k``, ``ell``, ``exact_cost``, ``greedy_cost``,
        ``ratio`` (greedy / exact; 1.0 when both are 0, ``inf`` when only exact is 0),
        ``greedy_optimal`` (bool), the same for the product's ``blocked`` method (one block here,
        so greedy + :func:`~pipeline.core.kl_anonymity.refine_clusters`): ``blocked_cost``,
        ``blocked_ratio``, ``blocked_optimal``; ``exact_seconds``, ``greedy_seconds``.
    """
    rng = np.random.default_rng(plan.seed)
    rows = []
    for n in plan.small_sizes:
        for k, ell in plan.small_parameters:
            made = 0
            attempts = 0
            while made < plan.small_tables_per_point and attempts < 20 * plan.small_tables_per_point:
                attempts += 1
                table = kl.encode_table(_sample(records, n, rng), quasi_identifiers, sensitive_attributes, hierarchies)
                try:
                    started = time.perf_counter()
                    exact = kl.exact_clusters(table, k=k, ell=ell)
                    exact_seconds = time.perf_counter() - started
                except kl.InfeasibleError:
                    continue  # Diverse(sample) < ℓ: no (k, ℓ) table exists
                started = time.perf_counter()
                greedy = kl.greedy_clusters(table, k=k, ell=ell)
                greedy_seconds = time.perf_counter() - started
                blocked, _ = kl.blocked_clusters(table, k=k, ell=ell, max_block_size=plan.max_block_size)
                exact_cost = sum(kl.cluster_cost(table, c) for c in exact)
                greedy_cost = sum(kl.cluster_cost(table, c) for c in greedy)
                blocked_cost = sum(kl.cluster_cost(table, c) for c in blocked)
                rows.append(
                    {
                        "n": n,
                        "k": k,
                        "ell": ell,
                        "exact_cost": exact_cost,
                        "greedy_cost": greedy_cost,
                        "ratio": _cost_ratio(greedy_cost, exact_cost),
                        "greedy_optimal": bool(greedy_cost <= exact_cost + 1e-9),
                        "blocked_cost": blocked_cost,
                        "blocked_ratio": _cost_ratio(blocked_cost, exact_cost),
                        "blocked_optimal": bool(blocked_cost <= exact_cost + 1e-9),
                        "exact_seconds": exact_seconds,
                        "greedy_seconds": greedy_seconds,
                    }
                )
                made += 1
    return rows


def compare_blocked_with_greedy(
    records: pd.DataFrame,
    quasi_identifiers: Sequence[str],
    sensitive_attributes: Sequence[str],
    hierarchies: dict[str, Hierarchy],
    plan: QualityPlan,
) -> list[dict]:
    """Blocked vs whole-table greedy on random medium samples: cost, clusters and wall time (s)."""
    rng = np.random.default_rng(plan.seed + 1)
    rows = []
    for n in plan.medium_sizes:
        sample = _sample(records, n, rng)
        table = kl.encode_table(sample, quasi_identifiers, sensitive_attributes, hierarchies)
        for k, ell in plan.medium_parameters:
            started = time.perf_counter()
            greedy = kl.greedy_clusters(table, k=k, ell=ell)
            greedy_seconds = time.perf_counter() - started
            started = time.perf_counter()  # blocks forced (the default before issue 18)
            blocked, n_blocks = kl.blocked_clusters(table, k=k, ell=ell, max_block_size=plan.max_block_size, whole_table_tuples=0)
            blocked_seconds = time.perf_counter() - started
            started = time.perf_counter()  # the default: the whole table when its distinct tuples fit
            default, _ = kl.blocked_clusters(table, k=k, ell=ell, max_block_size=plan.max_block_size)
            default_seconds = time.perf_counter() - started
            greedy_cost = sum(kl.cluster_cost(table, c) for c in greedy)
            blocked_cost = sum(kl.cluster_cost(table, c) for c in blocked)
            default_cost = sum(kl.cluster_cost(table, c) for c in default)
            n_tuples = len(np.unique(table.quasi_identifier_codes, axis=0))
            rows.append(
                {
                    "n": n,
                    "k": k,
                    "ell": ell,
                    "greedy_cost": greedy_cost,
                    "blocked_cost": blocked_cost,
                    "ratio": _cost_ratio(blocked_cost, greedy_cost),
                    "default_cost": default_cost,
                    "default_ratio": _cost_ratio(default_cost, greedy_cost),
                    "default_seconds": default_seconds,
                    "greedy_clusters": len(greedy),
                    "blocked_clusters": len(blocked),
                    "n_blocks": n_blocks,
                    "greedy_seconds": greedy_seconds,
                    "blocked_seconds": blocked_seconds,
                    "greedy_matrix_megabytes": n_tuples * n_tuples * 8 / 1e6,
                    "blocked_matrix_megabytes": plan.max_block_size**2 * 8 / 1e6,
                }
            )
    return rows


def time_whole_table(
    records: pd.DataFrame,
    quasi_identifiers: Sequence[str],
    sensitive_attributes: Sequence[str],
    hierarchies: dict[str, Hierarchy],
    plan: QualityPlan,
) -> list[dict]:
    """The blocked method on the whole table: wall time (s), clusters, cost S, naive cost."""
    rows = []
    for k, ell in plan.whole_parameters:
        started = time.perf_counter()
        result = kl.kl_anonymize(
            records, quasi_identifiers, sensitive_attributes, hierarchies, k=k, ell=ell, max_block_size=plan.max_block_size
        )
        seconds = time.perf_counter() - started
        sizes = result.clusters["n_records"]
        rows.append(
            {
                "n": len(records),
                "k": k,
                "ell": ell,
                "seconds": seconds,
                "n_blocks": result.n_blocks,
                "n_clusters": len(result.clusters),
                "average_cluster_size": float(sizes.mean()),
                "largest_cluster": int(sizes.max()),
                "total_cost": result.total_cost,
                "total_naive_cost": result.total_naive_cost,
                "discernibility": int((sizes**2).sum()),
            }
        )
    return rows


def _figures(small: list[dict], medium: list[dict], out_dir: Path) -> list[Path]:
    import matplotlib  # imported when the figures are drawn (about 26 MiB)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    frame = pd.DataFrame(small)
    fig, ax = plt.subplots(figsize=(7, 4))
    for color, ((k, ell), part) in zip(
        plt.rcParams["axes.prop_cycle"].by_key()["color"], frame.groupby(["k", "ell"], observed=True)
    ):
        for column, style, name in (("ratio", "--", "§14.3 greedy"), ("blocked_ratio", "-", "blocked (greedy + refinement)")):
            finite = np.sort(part[column].replace(np.inf, np.nan).dropna().to_numpy())
            ax.step(
                finite,
                np.arange(1, len(finite) + 1) / len(part),
                where="post",
                color=color,
                linestyle=style,
                label=f"{name}, k={k}, ℓ={ell}",
            )
    ax.set_xlabel("cost / exact optimum")
    ax.set_ylabel("share of tables (cumulative)")
    ax.set_title("SPEC §14.3 greedy vs §14.4 exact on random Adult samples of 8-10 records")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    path = out_dir / "greedy_vs_exact_ratio.png"
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    paths.append(path)
    frame = pd.DataFrame(medium)
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    for (k, ell), part in frame.groupby(["k", "ell"], observed=True):
        left.plot(part["n"], part["ratio"], marker="o", label=f"k={k}, ℓ={ell}")
        right.plot(part["n"], part["greedy_seconds"], marker="s", label=f"whole-table greedy, k={k}")
        right.plot(part["n"], part["blocked_seconds"], marker="o", label=f"blocked, k={k}")
    left.axhline(1.0, color="grey", lw=0.8)
    left.set_xlabel("records")
    left.set_ylabel("blocked cost / whole-table greedy cost")
    left.legend()
    left.grid(alpha=0.3)
    right.set_xlabel("records")
    right.set_ylabel("seconds")
    right.legend(fontsize=8)
    right.grid(alpha=0.3)
    fig.suptitle("Blocked method vs the whole-table greedy on random Adult samples")
    path = out_dir / "blocked_vs_greedy.png"
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    paths.append(path)
    return paths


def write_quality_report(small: list[dict], medium: list[dict], whole: list[dict], out_dir: Path, *, description: str) -> Path:
    """Write ``results.json``, the figures and ``REPORT.md`` (verdicts computed from the rows)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "results.json").write_text(
        json.dumps({"small": small, "medium": medium, "whole": whole}, indent=1, default=float) + "\n"
    )
    _figures(small, medium, out_dir)
    frame = pd.DataFrame(small)
    lines = [
        "# (k, ℓ) approximation: quality and speed",
        "",
        f"Data: {description}. Generated by `msa-release kl-quality`; every number below is in `results.json`.",
        "",
        "## 1. Greedy (SPEC §14.3) vs the exact optimum (SPEC §14.4) on small random tables",
        "",
        "![ratio](greedy_vs_exact_ratio.png)",
        "",
        "| k | ℓ | method | tables | optimal | median ratio | 90th pct ratio | worst ratio | optimum 0, method > 0 |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for (k, ell), part in frame.groupby(["k", "ell"], observed=True):
        for prefix, name in (("", "§14.3 greedy"), ("blocked_", "blocked (greedy + refinement)")):
            ratio = part[f"{prefix}ratio" if prefix else "ratio"]
            finite = ratio.replace(np.inf, np.nan).dropna()
            optimal = part["blocked_optimal" if prefix else "greedy_optimal"]
            lines.append(
                f"| {k} | {ell} | {name} | {len(part)} | {optimal.mean():.0%} | {finite.median():.3f} | "
                f"{finite.quantile(0.9):.3f} | {finite.max():.3f} | {int(np.isinf(ratio).sum())} |"
            )
    optimal_share = frame["greedy_optimal"].mean()
    lines += [
        "",
        f"Over all {len(frame)} feasible tables the §14.3 greedy finds the optimum in {optimal_share:.0%} of cases, "
        f"the product's blocked method (the greedy followed by the refinement that splits clusters of ≥ 2k records "
        f"while S does not grow) in {frame['blocked_optimal'].mean():.0%}, with median ratio "
        f"{frame['ratio'].replace(np.inf, np.nan).median():.2f} vs {frame['blocked_ratio'].replace(np.inf, np.nan).median():.2f}. "
        "The greedy "
        "is a heuristic without a guarantee: SPEC §16.5 already shows a (3, 2) case at 2.3× the optimum, "
        "and rounds that merge a too-small cluster into its nearest neighbour can overshoot k.",
        "",
        "## 2. Blocks and the default vs the whole-table greedy on medium tables",
        "",
        "![blocked](blocked_vs_greedy.png)",
        "",
        "Blocks: the blocked method with its blocks forced (the default before issue 18); default: the whole-table "
        "greedy and the refinement (the default when the distinct quasi-identifier tuples fit).",
        "",
        "| records | k | ℓ | whole-table greedy cost | blocked cost | ratio | default cost | default ratio | blocks | greedy s "
        "| blocked s | default s | greedy matrix MB |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in medium:
        lines.append(
            f"| {row['n']} | {row['k']} | {row['ell']} | {row['greedy_cost']:.0f} | {row['blocked_cost']:.0f} | {row['ratio']:.3f} | "
            f"{row['default_cost']:.0f} | {row['default_ratio']:.3f} | "
            f"{row['n_blocks']} | {row['greedy_seconds']:.1f} | {row['blocked_seconds']:.1f} | {row['default_seconds']:.1f} | "
            f"{row['greedy_matrix_megabytes']:.0f} |"
        )
    ratios = [row["ratio"] for row in medium]
    better = sum(r < 1 for r in ratios)
    lines += [
        "",
        f"The blocked method costs between {min(ratios):.2f}× and {max(ratios):.2f}× the whole-table greedy "
        f"({better} of {len(ratios)} points cheaper). "
        + (
            "That is the price of bounded memory: a block cannot borrow a partner from another block, and the "
            "top-down split fixes some generalisations before the greedy runs. "
            if max(ratios) > 1
            else ""
        )
        + f"The default (whole-table greedy and refinement) costs between {min(r['default_ratio'] for r in medium):.2f}× "
        f"and {max(r['default_ratio'] for r in medium):.2f}× the whole-table greedy. "
        "The compiled greedy keeps the edge weights between the distinct quasi-identifier tuples (last column; "
        f"above {kl.GREEDY_MAX_TUPLES} tuples the blocks are used) while a block's matrix stays at "
        f"{medium[0]['blocked_matrix_megabytes'] if medium else 0:.1f} MB.",
        "",
        "## 3. The whole table",
        "",
        "| records | k | ℓ | seconds | blocks | clusters | average size | largest | cost S | naive cost | discernibility |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in whole:
        lines.append(
            f"| {row['n']} | {row['k']} | {row['ell']} | {row['seconds']:.1f} | {row['n_blocks']} | {row['n_clusters']} | "
            f"{row['average_cluster_size']:.1f} | {row['largest_cluster']} | {row['total_cost']:.0f} | {row['total_naive_cost']} | {row['discernibility']} |"
        )
    lines += [
        "",
        "Large equivalence classes are the data's, not the algorithm's: with Adult's default columns the "
        "sensitive attribute relationship is nearly determined by the quasi-identifiers sex and marital-status "
        "(married men are husbands), so ℓ totally different tuples exist only in classes that mix them; S does "
        "not charge for size, and merging records with identical quasi-identifiers is free.",
        "",
    ]
    path = out_dir / "REPORT.md"
    path.write_text("\n".join(lines))
    return path


def main(
    *,
    records: pd.DataFrame,
    quasi_identifiers: Sequence[str],
    sensitive_attributes: Sequence[str],
    hierarchies: dict[str, Hierarchy],
    out_dir: Path,
    plan: QualityPlan | None = None,
    description: str = "UCI Adult",
) -> Path:
    """Run the three measurements and write the report (``plan``: default :class:`QualityPlan`); returns the REPORT.md path."""
    plan = plan if plan is not None else QualityPlan()
    small = compare_with_exact(records, quasi_identifiers, sensitive_attributes, hierarchies, plan)
    medium = compare_blocked_with_greedy(records, quasi_identifiers, sensitive_attributes, hierarchies, plan)
    whole = time_whole_table(records, quasi_identifiers, sensitive_attributes, hierarchies, plan)
    return write_quality_report(small, medium, whole, out_dir, description=description)
