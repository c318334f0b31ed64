"""Attacks: P2's join adversary and the one-known-value adversary against four releases of the
configured table (naive per-attribute, (k, ℓ), mixed, Rating), with their utility. A thin wrapper
over ``pipeline.reporting.attack_report``; the figures are attached to the asset as metadata and written,
with ``results.json`` and ``REPORT.md``, into ``$MSA_RELEASE_HOME/attacks/`` (configurable; ``make attacks`` names
``reports/attacks/``)."""

import base64
import time
from pathlib import Path

import dagster as dg
import pandas as pd

from pydantic import Field

from pipeline.asset_keys import EVALUATION, escape_markdown, inputs
from pipeline.core.columns import first_occurrences
from pipeline.core.hierarchies import load_hierarchies, missing_hierarchies_error
from pipeline.io.loading import PROJECT_ROOT
from pipeline.resources import ReleaseSettings, is_adult_input, release_home

ATTACKS = "attacks"
#: Defaults used when ``ReleaseSettings`` lacks the (k, ℓ) fields (``k``, ``hierarchies_dir``,
#: ``kl_method``, ``max_block_size``, ``generalization_weights``), read with ``getattr``.
DEFAULT_K = 3
DEFAULT_HIERARCHIES_DIR = "data/adult/hierarchies"
DEFAULT_KL_METHOD = "blocked"
DEFAULT_MAX_BLOCK_SIZE = 256


class AttackEvaluationConfig(dg.Config):
    """Run configuration of ``attacks/attack_evaluation`` (data and ℓ come from ``settings``)."""

    output_dir: str = Field(
        default="",
        description="Where results.json, REPORT.md and the PNG figures go (relative: project root; empty: "
        "$MSA_RELEASE_HOME/attacks, never the committed reports/ unless named).",
    )
    dataset_description: str = Field(default="UCI Adult (adult.data, CC BY 4.0)", description="Named in REPORT.md.")


def attack_output_dir(path: str) -> Path:
    """Where the attack report goes: ``path`` as :func:`_project_path` resolves it; empty: ``$MSA_RELEASE_HOME/attacks``."""
    return release_home() / "attacks" if not path else _project_path(path)


def _project_path(path: str) -> Path:
    """Relative paths: the working directory when it exists there, else the project root."""
    candidate = Path(path).expanduser()
    if candidate.is_absolute() or candidate.exists():
        return candidate.resolve()
    return (PROJECT_ROOT / candidate).resolve()


def _summary_frame(results: dict) -> pd.DataFrame:
    """One row per (model, attack, pair): the numbers of the report's tables."""
    rows = []
    for model, summary in results["join_attack"].items():
        rows.append({"model": model, "attack": "join", "known_attribute": None, "target_attribute": None, **_numbers(summary)})
    for model, pairs in results["one_known_value"].items():
        for pair, summary in pairs.items():
            known, target = pair.split("->")
            rows.append(
                {
                    "model": model,
                    "attack": "one_known_value",
                    "known_attribute": known,
                    "target_attribute": target,
                    **_numbers(summary),
                }
            )
    return pd.DataFrame(rows)


def _numbers(summary: dict) -> dict:
    keys = ("n_victims", "n_certain", "share_certain", "mean", "median", "p90", "max", "share_above_one_over_ell")
    return {key: summary[key] for key in keys}


def _figures_metadata(paths: dict) -> dict:
    metadata = {}
    for name in ("join", "one_known", "utility"):
        path = paths[name]
        encoded = base64.b64encode(path.read_bytes()).decode("ascii")
        metadata[f"figure_{name}"] = dg.MetadataValue.md(f"![{name}](data:image/png;base64,{encoded})")
        metadata[f"figure_{name}_path"] = dg.MetadataValue.path(str(path))
    return metadata


@dg.asset(
    key_prefix=ATTACKS,
    ins=inputs(private=["raw_records"]),
    group_name=EVALUATION,
    kinds={"duckdb", "pandas", "matplotlib"},
    description="Join attack (P2) and one-known-value attack on four releases of the configured table (naive, (k, ℓ), "
    "mixed, Rating) with their utility; writes $MSA_RELEASE_HOME/attacks/ (or its output_dir).",
)
def attack_evaluation(
    context: dg.AssetExecutionContext, config: AttackEvaluationConfig, settings: ReleaseSettings, raw_records: pd.DataFrame
) -> pd.DataFrame:
    """Join attack (P2) and one-known-value attack on the naive per-attribute, (k, ℓ), mixed and
    Rating releases of the configured table, plus their utility; writes $MSA_RELEASE_HOME/attacks/ (or output_dir).

    Parameters come from ``settings``: columns, ℓ, min_confidence, seed, and the (k, ℓ) fields k,
    hierarchies_dir (hierarchies of every quasi-identifier AND sensitive attribute: the naive
    release generalises the sensitive attributes too), kl_method, max_block_size and
    generalization_weights (quasi-identifiers only; sensitive attributes weigh 1)."""
    # the four releases, the attacks (scipy.sparse), the (k, ℓ) kernels (numba) and the figures (matplotlib): imported
    # when the evaluation runs, not when the code location is loaded
    from pipeline.reporting.attack_report import MODELS, run_attack_evaluation, write_attack_report

    started = time.monotonic()
    quasi_identifier_columns, sensitive_attribute_columns = list(settings.quasi_identifiers), list(settings.sensitive_attributes)
    k = int(getattr(settings, "k", DEFAULT_K))
    configured = str(getattr(settings, "hierarchies_dir", "") or "")
    if configured.strip():
        hierarchies_dir = _project_path(configured)
    elif is_adult_input(settings.input_path):
        hierarchies_dir = _project_path(DEFAULT_HIERARCHIES_DIR)
    else:  # Adult's hierarchies are never applied to another table
        raise missing_hierarchies_error([*quasi_identifier_columns, *sensitive_attribute_columns], Path(settings.input_path).name)
    kl_method = str(getattr(settings, "kl_method", DEFAULT_KL_METHOD))
    max_block_size = int(getattr(settings, "max_block_size", DEFAULT_MAX_BLOCK_SIZE))
    weights = dict(getattr(settings, "generalization_weights", {}) or {})
    firsts = {
        a: first_occurrences(raw_records[a], raw_records["row_id"])
        for a in [*quasi_identifier_columns, *sensitive_attribute_columns]
    }
    hierarchies = load_hierarchies(
        hierarchies_dir,
        [*quasi_identifier_columns, *sensitive_attribute_columns],
        data_values={a: values for a, (values, _) in firsts.items()},
        data_source=settings.input_path,
        data_record_numbers={a: numbers for a, (_, numbers) in firsts.items()},
    )
    evaluation = run_attack_evaluation(
        raw_records,
        quasi_identifier_columns,
        sensitive_attribute_columns,
        hierarchies,
        ell=settings.ell,
        k=k,
        min_confidence=settings.min_confidence,
        seed=settings.seed,
        kl_method=kl_method,
        max_block_size=max_block_size,
        generalization_weights=weights,
        dataset_description=config.dataset_description,
        progress=context.log.info,
    )
    paths = write_attack_report(evaluation, attack_output_dir(config.output_dir))
    results = evaluation.results
    metadata: dict = {
        "k": k,
        "ell": int(settings.ell),
        "kl_method": kl_method,
        "hierarchies_dir": dg.MetadataValue.path(str(hierarchies_dir)),
        "n_records": int(results["dataset"]["n_records"]),
        "wall_seconds": round(time.monotonic() - started, 1),
        "results": dg.MetadataValue.path(str(paths["results"])),
        "report": dg.MetadataValue.path(str(paths["report"])),
    }
    raw_confidence = results["utility"]["mixed"]["rule_confidence"]["average_raw_confidence"]
    metadata["average_raw_rule_confidence"] = float(raw_confidence) if raw_confidence is not None else 0.0
    for model in (*MODELS, "population"):
        join = results["join_attack"][model]
        metadata[f"{model}_join_share_certain"] = float(join["share_certain"])
        metadata[f"{model}_join_n_certain"] = int(join["n_certain"])
        metadata[f"{model}_join_mean_probability"] = float(join["mean"])
        metadata[f"{model}_join_share_above_one_over_ell"] = float(join["share_above_one_over_ell"])
        pinned = [s["share_certain"] for s in results["one_known_value"][model].values()]
        means = [s["mean"] for s in results["one_known_value"][model].values()]
        metadata[f"{model}_one_known_mean_share_pinned"] = float(sum(pinned) / len(pinned)) if pinned else 0.0
        metadata[f"{model}_one_known_max_share_pinned"] = float(max(pinned, default=0.0))
        metadata[f"{model}_one_known_mean_probability"] = float(sum(means) / len(means)) if means else 0.0
    for model in MODELS:
        utility = results["utility"][model]
        metadata[f"{model}_generalization_cost"] = float(utility["generalization_cost"])
        metadata[f"{model}_average_cluster_size"] = float(utility["average_cluster_size"])
        metadata[f"{model}_discernibility"] = float(utility["discernibility"])
        metadata[f"{model}_discernibility_per_record"] = float(utility["discernibility_per_record"])
        metadata[f"{model}_share_suppressed_cells"] = float(utility["share_suppressed_cells"])
        confidence = utility["rule_confidence"]["average_released_confidence"]
        metadata[f"{model}_average_rule_confidence"] = float(confidence) if confidence is not None else 0.0
        for name, figures in utility["query_workload"].items():
            if name in ("W1", "W2"):  # the COUNT-query workload's relative errors (pipeline/core/query_workload.py)
                metadata[f"{model}_query_workload_{name.lower()}_median"] = float(figures["median"])
                metadata[f"{model}_query_workload_{name.lower()}_p90"] = float(figures["p90"])
    verdicts = results["verdicts"]
    metadata["verdicts"] = dg.MetadataValue.md(  # sentences escaped: they name configured columns (escape_markdown)
        "\n".join(
            f"**{escape_markdown(section)}**\n\n" + "\n".join(f"- {escape_markdown(line)}" for line in lines) + "\n"
            for section, lines in verdicts.items()
        )
    )
    context.add_output_metadata({**metadata, **_figures_metadata(paths)})
    return _summary_frame(results)
