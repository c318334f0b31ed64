"""Figures 1-11 of P1 §6 redrawn from our measurements (matplotlib, PNG).

Inputs are the lists returned by :func:`pipeline.evaluation.experiments.run_sid_creation_timings` and
:func:`pipeline.evaluation.experiments.run_model_sweeps`. No Dagster here.
"""

from __future__ import annotations

from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path
from types import ModuleType

__all__ = [
    "FIGURE_TITLES",
    "figure_path",
    "plot_all",
    "plot_histogram_figures",
    "plot_model_figures",
    "plot_per_attribute_figure",
    "plot_timing_figures",
    "pyplot",
]

FIGURE_TITLES = {
    1: "SID creation time vs number of records",
    2: "SID creation time vs number of sensitive attributes",
    3: "AIL vs ℓ",
    4: "AIL vs min_confidence",
    5: "AIL vs number of sensitive attributes",
    6: "Average confidence of strong rules vs ℓ (first two sensitive attributes)",
    7: "Average confidence of strong rules vs ℓ (all sensitive attributes)",
    8: "Average confidence of strong rules vs min_confidence",
    9: "Average confidence of strong rules vs number of sensitive attributes",
    10: "Per-record disclosure probability, ℓ = {ell}",
    11: "Per-record disclosure probability, ℓ = {ell}",
    12: "AIL and suppressed cells per attribute: per-attribute ℓ_i vs uniform ℓ = max ℓ_i and ℓ = min ℓ_i",
}
#: The settings of Figure 12 (issue 16) and their bar colours.
SETTING_STYLE = {"per-attribute": "tab:green", "uniform max": "tab:red", "uniform min": "tab:gray"}
MODEL_STYLE = {
    "mixed": {"label": "mixed model (SAC~ + improved Rating)", "marker": "o", "color": "tab:blue"},
    "rating": {"label": "Rating (baseline)", "marker": "s", "color": "tab:orange"},
}
METHOD_STYLE = {
    "improved": {"label": "improved (dangerous buckets + Alg. 13)", "marker": "o", "color": "tab:green"},
    "plain": {"label": "old (stable bubble sort after every SID)", "marker": "s", "color": "tab:red"},
}


def pyplot() -> ModuleType:
    """``matplotlib.pyplot`` on the non-interactive ``Agg`` backend, imported when a figure is drawn, not when a
    module that draws is imported: matplotlib costs about 26 MiB and 0.2 s, which the Dagster code location and a
    sharded release's parent process would otherwise hold without drawing anything."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def figure_path(out_dir: Path, number: int) -> Path:
    return Path(out_dir) / f"figure_{number:02d}.png"


def _save(fig, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    pyplot().close(fig)
    return path


def _timing_figure(timings: Sequence[dict], figure: int, x_key: str, xlabel: str, path: Path) -> Path:
    fig, ax = pyplot().subplots(figsize=(6.4, 4.2))
    for method, style in METHOD_STYLE.items():
        points = sorted((p for p in timings if p["figure"] == figure and p["method"] == method), key=lambda p: p[x_key])
        if not points:
            continue
        x = [p[x_key] for p in points]
        median = [p["median_seconds"] for p in points]
        low = [p["median_seconds"] - p["min_seconds"] for p in points]
        high = [p["max_seconds"] - p["median_seconds"] for p in points]
        ax.errorbar(x, median, yerr=[low, high], capsize=3, marker=style["marker"], color=style["color"], label=style["label"])
    ax.set_xlabel(xlabel)
    ax.set_ylabel("SID creation time (s, median; bars: min-max)")
    ax.set_title(f"Figure {figure}. {FIGURE_TITLES[figure]}")
    if figure == 2:
        ax.set_xticks(sorted({p["m"] for p in timings if p["figure"] == 2}))
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend()
    return _save(fig, path)


def _sweep(points: Sequence[dict], sweep: str, model: str, m: int | None = None) -> list[dict]:
    chosen = [p for p in points if p["sweep"] == sweep and p["model"] == model and (m is None or p["m"] == m)]
    key = {"ell": "ell", "min_confidence": "min_confidence", "attributes": "m"}[sweep]
    return sorted(chosen, key=lambda p: p[key])


def _ail_figure(points, figure, sweep, x_key, xlabel, path, m=None) -> Path:
    fig, ax = pyplot().subplots(figsize=(6.4, 4.2))
    for model, style in MODEL_STYLE.items():
        chosen = _sweep(points, sweep, model, m)
        ax.plot(
            [p[x_key] for p in chosen],
            [100 * p["additional_information_loss"] for p in chosen],
            marker=style["marker"],
            color=style["color"],
            label=style["label"],
        )
    ax.set_xlabel(xlabel)
    ax.set_ylabel("AIL (% of published cells)")
    ax.set_title(f"Figure {figure}. {FIGURE_TITLES[figure]}")
    if x_key in ("ell", "m"):
        ax.set_xticks(sorted({p[x_key] for p in points if p["sweep"] == sweep}))
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend()
    return _save(fig, path)


def _confidence_figure(points, figure, sweep, x_key, xlabel, path, m=None) -> Path:
    fig, ax = pyplot().subplots(figsize=(6.4, 4.2))
    mixed = _sweep(points, sweep, "mixed", m)
    ax.plot(
        [p[x_key] for p in mixed],
        [p["average_raw_confidence"] if p["average_raw_confidence"] is not None else float("nan") for p in mixed],
        marker="^",
        color="black",
        linestyle="--",
        label="raw table",
    )
    for model, style in MODEL_STYLE.items():
        chosen = _sweep(points, sweep, model, m)
        ax.plot(
            [p[x_key] for p in chosen],
            [p["average_released_confidence"] if p["average_released_confidence"] is not None else float("nan") for p in chosen],
            marker=style["marker"],
            color=style["color"],
            label=f"recovered from {style['label']}",
        )
    for p in mixed:
        ax.annotate(f"{p['n_strong_rules']} rules", (p[x_key], 0.02), fontsize=7, ha="center", color="gray")
    ax.set_xlabel(xlabel)
    ax.set_ylabel("average confidence of the strong rules")
    ax.set_ylim(0, 1.05)
    ax.set_title(f"Figure {figure}. {FIGURE_TITLES[figure]}", fontsize=10)
    if x_key in ("ell", "m"):
        ax.set_xticks(sorted({p[x_key] for p in points if p["sweep"] == sweep}))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return _save(fig, path)


def _histogram_figure(points, figure, ell, path) -> Path:
    fig, ax = pyplot().subplots(figsize=(6.4, 4.2))
    chosen = {p["model"]: p for p in points if p["sweep"] == "histogram" and p["ell"] == ell}
    values = sorted({Fraction(v) for p in chosen.values() for v in p["disclosure_counts"]})
    width = 0.4
    positions = range(len(values))
    for offset, (model, style) in zip((-width / 2, width / 2), MODEL_STYLE.items(), strict=True):
        counts = chosen.get(model, {}).get("disclosure_counts", {})
        heights = [counts.get(str(v), 0) for v in values]
        ax.bar([x + offset for x in positions], heights, width=width, color=style["color"], label=style["label"])
    ax.set_xticks(list(positions))
    ax.set_xticklabels([f"{str(v)}\n({float(v):.2f})" for v in values], fontsize=7, rotation=0)
    ax.axvline(-0.5, color="white")
    ax.set_xlabel("disclosure probability of the record (exact value; adversary of SPEC §10)")
    ax.set_ylabel("records that contain a strong rule")
    ax.set_title(f"Figure {figure}. " + FIGURE_TITLES[figure].format(ell=ell) + f" (bound 1/ℓ = {1 / ell:.3f})", fontsize=10)
    ax.grid(alpha=0.3, axis="y")
    ax.legend(fontsize=8)
    return _save(fig, path)


def plot_timing_figures(timings: Sequence[dict], out_dir: Path) -> dict[int, Path]:
    """Figures 1-2 (SID creation time) into ``out_dir``; returns figure number -> path."""
    out_dir = Path(out_dir)
    return {
        1: _timing_figure(timings, 1, "n_records", "number of records (random subset)", figure_path(out_dir, 1)),
        2: _timing_figure(timings, 2, "m", "number of sensitive attributes m", figure_path(out_dir, 2)),
    }


def plot_model_figures(points: Sequence[dict], out_dir: Path) -> dict[int, Path]:
    """Figures 3-9 (AIL and average confidence; 6 and 7 use m = 2 and m = all of the ℓ sweep) and 12 (per-attribute ℓ,
    when the points have it)."""
    out_dir = Path(out_dir)
    m_all = max((p["m"] for p in points), default=2)
    return {
        3: _ail_figure(points, 3, "ell", "ell", "ℓ", figure_path(out_dir, 3), m=m_all),
        4: _ail_figure(points, 4, "min_confidence", "min_confidence", "min_confidence", figure_path(out_dir, 4)),
        5: _ail_figure(points, 5, "attributes", "m", "number of sensitive attributes m", figure_path(out_dir, 5)),
        6: _confidence_figure(points, 6, "ell", "ell", "ℓ", figure_path(out_dir, 6), m=2),
        7: _confidence_figure(points, 7, "ell", "ell", "ℓ", figure_path(out_dir, 7), m=m_all),
        8: _confidence_figure(points, 8, "min_confidence", "min_confidence", "min_confidence", figure_path(out_dir, 8)),
        9: _confidence_figure(points, 9, "attributes", "m", "number of sensitive attributes m", figure_path(out_dir, 9)),
        **plot_per_attribute_figure(points, out_dir),
    }


def plot_per_attribute_figure(points: Sequence[dict], out_dir: Path) -> dict[int, Path]:
    """Figure 12 (issue 16): per sensitive attribute, AIL (top) and suppressed attribute-table cells (bottom) of each
    model, one bar per setting (``sweep == "ell_per_attribute"`` points); nothing when there is no such point."""
    chosen = [p for p in points if p["sweep"] == "ell_per_attribute"]
    if not chosen:
        return {}
    attributes = list(chosen[0]["sensitive_attributes"])
    mapping = next(p["ell_per_attribute"] for p in chosen if p["setting"] == "per-attribute")
    fig, axes = pyplot().subplots(2, 2, figsize=(11, 7), sharex=True)
    width = 0.8 / len(SETTING_STYLE)
    for column, model in enumerate(MODEL_STYLE):
        for offset, (setting, color) in enumerate(SETTING_STYLE.items()):
            point = next((p for p in chosen if p["model"] == model and p["setting"] == setting), None)
            if point is None:
                continue
            x = [k + (offset - 1) * width for k in range(len(attributes))]
            label = setting if setting == "per-attribute" else f"{setting} (ℓ = {point['ell']})"
            axes[0][column].bar(
                x,
                [100 * point["additional_information_loss_by_attribute"][a] for a in attributes],
                width,
                color=color,
                label=label,
            )
            axes[1][column].bar(
                x, [point["n_suppressed_cells_by_attribute"][a] for a in attributes], width, color=color, label=label
            )
        axes[0][column].set_title(MODEL_STYLE[model]["label"], fontsize=9)
        axes[0][column].set_ylabel("AIL of the attribute (% of its cells)")
        axes[1][column].set_ylabel("suppressed attribute-table cells")
        axes[1][column].set_xticks(range(len(attributes)), [f"{a}\nℓ_i = {mapping[a]}" for a in attributes], fontsize=8)
        for row in (0, 1):
            axes[row][column].grid(alpha=0.3, axis="y")
        axes[0][column].legend(fontsize=7)
    fig.suptitle(f"Figure 12. {FIGURE_TITLES[12]}", fontsize=10)
    return {12: _save(fig, figure_path(Path(out_dir), 12))}


def plot_histogram_figures(points: Sequence[dict], out_dir: Path, histogram_ells: Sequence[int]) -> dict[int, Path]:
    """Figures 10-11 (disclosure histograms) for the first two values of ``histogram_ells``."""
    return {
        figure: _histogram_figure(points, figure, ell, figure_path(Path(out_dir), figure))
        for figure, ell in zip((10, 11), list(histogram_ells)[:2], strict=False)
    }


def plot_all(
    timings: Sequence[dict], points: Sequence[dict], out_dir: Path, *, histogram_ells: Sequence[int] = (3, 2)
) -> dict[int, Path]:
    """Write figure_01.png … figure_11.png (and figure_12.png with per-attribute points) into ``out_dir``; returns
    figure number -> path."""
    return {
        **plot_timing_figures(timings, out_dir),
        **plot_model_figures(points, out_dir),
        **plot_histogram_figures(points, out_dir, histogram_ells),
    }
