"""(k, ℓ)-anonymity (P2, SPEC §14) as a plug-in: quasi-identifiers generalised along ARX hierarchies into equivalence
classes (``cluster_id``) of at least k records whose sensitive tuples have Diverse >= ℓ.

The stage tables come from ``assets/kl_model.py`` (validated hierarchies, :func:`pipeline.core.kl_anonymity.kl_anonymize`);
the released table from :func:`pipeline.core.kl_anonymity.kl_release_table`. No Dagster here.

References: P2; SPEC §14.
"""

from __future__ import annotations

import math

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from pipeline.settings import DEFAULT_MIN_CONFIDENCE, default_min_support
from pipeline.models.base import CandidateRelease, Frames, GateOutcome, GateVerdict, gate_status_verdict, utility_lines
from pipeline.models.mixed import dropped_line, gate_lines, input_cleaning_lines, query_workload_figures

__all__ = ["KL", "KLModel", "KLParameters", "discernibility", "render_kl_summary"]

#: Gates of the (k, ℓ) model (``checks/gates.py``).
KL_GATES = (
    "kl_clusters_are_k_anonymous",
    "kl_clusters_are_l_diverse",
    "kl_records_accounted_for",
    "utility_within_thresholds",
)
#: Settings the ``kl_release`` job reads besides ``COMMON_SETTINGS`` (:mod:`pipeline.models.base`): k, the method,
#: the hierarchies and their weights, and the slack of the adversaries measured on the release (the manifest's
#: ``attacks``).
KL_SETTINGS = ("k", "kl_method", "max_block_size", "hierarchies_dir", "generalization_weights", "posterior_slack")


@dataclass(frozen=True)
class KLParameters:
    """Typed parameters of the (k, ℓ) model; see :class:`pipeline.resources.ReleaseSettings` for each.

    Attributes
    ----------
    quasi_identifiers, sensitive_attributes
        Column names, in schema order.
    k, ell
        Minimum size and minimum Diverse of every equivalence class (k >= ℓ).
    kl_method, max_block_size
        ``blocked`` (blocks of at most ``max_block_size`` >= 2k records), ``greedy`` or ``exact``.
    generalization_weights
        Weight c_i >= 0 of every quasi-identifier in the cost S (1 when not configured), in quasi-identifier order.
    hierarchies_dir
        The hierarchy folder as configured (its base name goes into the manifest, never the path).
    posterior_slack
        Slack of the adversaries measured on the release (``attacks`` of the manifest).

    Raises
    ------
    ValueError
        ``k < ell``; ``max_block_size < 2k`` with ``blocked``; a weight of a column that is not a quasi-identifier,
        or a negative weight.
    """

    quasi_identifiers: tuple[str, ...]
    sensitive_attributes: tuple[str, ...]
    k: int
    ell: int
    kl_method: str
    max_block_size: int
    generalization_weights: dict[str, float]
    hierarchies_dir: str
    posterior_slack: float

    def __post_init__(self) -> None:
        if self.k < self.ell:
            raise ValueError(
                f"the (k, ℓ) model needs k >= ell (an equivalence class of k records cannot hold ℓ pairwise "
                f"totally different sensitive tuples otherwise), got k={self.k}, ell={self.ell}; raise k or lower ell"
            )
        if self.kl_method == "blocked" and self.max_block_size < 2 * self.k:
            raise ValueError(f"max_block_size={self.max_block_size} must be at least 2k={2 * self.k} for kl_method 'blocked'")


def discernibility(cluster_sizes: pd.Series) -> int:
    """Discernibility metric: sum of the squared equivalence-class sizes (Bayardo & Agrawal 2005)."""
    return int((cluster_sizes.astype("int64") ** 2).sum())


@dataclass(frozen=True)
class KLModel:
    """The (k, ℓ) model: its own ``kl_release`` job, three gates, no override."""

    name: str = "kl"
    job: str = "kl_release"
    settings_fields: tuple[str, ...] = KL_SETTINGS
    tables: tuple[str, ...] = ("kl_released",)
    candidate_tables: tuple[str, ...] = ("kl_released",)
    candidate_inputs: tuple[str, ...] = ("raw_records", "kl_assignments", "kl_clusters")
    publish_inputs: tuple[str, ...] = ("kl_suppressed_records", "kl_clusters", "generalization_hierarchies")
    table_assets: Mapping[str, str] = dataclasses.field(default_factory=dict)
    stage_groups: tuple[str, ...] = ("ingest", "kl_model")
    candidate_asset: str = "kl_release_candidate"
    row_map_asset: str = "kl_release_row_map"
    publish_asset: str = "kl_release"
    publish_step: str = "publish_kl_release"
    gates: tuple[str, ...] = KL_GATES
    not_applicable: Mapping[str, str] = dataclasses.field(default_factory=dict)
    audited: bool = False
    source: str = "P2; SPEC §14"
    docs: str = "docs/kl.md"

    guarantee: str = "(k, ℓ)-anonymous"
    label: str = "kl ((k, ℓ)-anonymity by generalisation, P2)"
    compared_with: str | None = None
    baseline: bool = False

    def check_input(self, settings: Any, records: pd.DataFrame) -> None:
        """The hierarchies of ``hierarchies_dir`` cover every quasi-identifier value of the input (the run's
        ``generalization_hierarchies`` step would fail otherwise).

        Raises
        ------
        pipeline.core.hierarchies.HierarchyError
            No hierarchies for a table other than Adult's adult.data (:func:`pipeline.core.hierarchies.
            missing_hierarchies_error`); a file missing or malformed, or a value of the data absent from its
            hierarchy (named by column and line, never by value).
        """
        from pipeline.core.hierarchies import load_hierarchies, missing_hierarchies_error

        directory = settings.hierarchies_path()
        if directory is None:
            raise missing_hierarchies_error(settings.quasi_identifiers, Path(settings.input_path).name)
        load_hierarchies(
            directory,
            settings.quasi_identifiers,
            data_values={a: records[a] for a in settings.quasi_identifiers},
            data_source=f"input {settings.input_path}",
            data_record_numbers={a: records["row_id"].to_numpy() for a in settings.quasi_identifiers},
        )

    def parameters(self, settings: Any) -> KLParameters:
        """The typed parameters of ``settings`` (:class:`pipeline.resources.ReleaseSettings`), checked.

        Raises
        ------
        ValueError
            See :class:`KLParameters`.
        """
        if getattr(settings, "ell_per_attribute", None):
            from pipeline.vocabulary import setting

            raise ValueError(
                f"the (k, ℓ) model has one ℓ for the whole sensitive tuple (P2: Diverse counts pairwise totally different "
                f"tuples), not one ℓ per attribute: give a single integer {setting('ell')} (e.g. the largest of your "
                f"ℓ_i) instead of {setting('ell_per_attribute')}, or use --model rating / mixed for per-attribute ℓ"
            )
        quasi_identifiers = tuple(settings.quasi_identifiers)
        configured = dict(settings.generalization_weights)
        parameters = KLParameters(
            quasi_identifiers=quasi_identifiers,
            sensitive_attributes=tuple(settings.sensitive_attributes),
            k=int(settings.k),
            ell=int(settings.ell),
            kl_method=str(settings.kl_method),
            max_block_size=int(settings.max_block_size),
            generalization_weights={name: float(configured.get(name, 1.0)) for name in quasi_identifiers},
            hierarchies_dir=str(settings.hierarchies_path() or settings.hierarchies_dir),
            posterior_slack=float(settings.posterior_slack),
        )
        unknown = sorted(set(configured) - set(quasi_identifiers))
        if unknown:
            raise ValueError(f"generalization_weights names {unknown}, which are not quasi-identifiers {list(quasi_identifiers)}")
        negative = sorted(name for name, weight in configured.items() if not 0 <= weight < math.inf)
        if negative:
            raise ValueError(f"generalization_weights must be finite numbers >= 0; {negative} are not")
        return parameters

    def build(self, inputs: Frames, parameters: KLParameters, *, secret: bytes | None) -> CandidateRelease:
        """The candidate (k, ℓ) table: classes numbered by content, rows by class, so that neither id carries the input
        order (:func:`pipeline.core.kl_anonymity.kl_release_table`).

        Parameters
        ----------
        inputs
            ``raw_records``, ``kl_assignments`` (record -> class), ``kl_clusters`` (one row per class with its
            generalised labels, cost and naive cost).
        secret
            Not used: the (k, ℓ) model takes no random decision.
        """
        from pipeline.core.kl_anonymity import KLAnonymization, kl_release_table

        clusters = inputs["kl_clusters"]
        anonymization = KLAnonymization(
            assignments=inputs["kl_assignments"],
            clusters=clusters,
            total_cost=float(clusters["cost"].sum()),
            total_naive_cost=int(clusters["naive_cost"].sum()),
            n_blocks=1,  # not stored in the warehouse; kl_release_table does not read it
            method=parameters.kl_method,
            k=parameters.k,
            ell=parameters.ell,
        )
        released, row_map = kl_release_table(
            inputs["raw_records"], anonymization, parameters.quasi_identifiers, parameters.sensitive_attributes
        )
        return CandidateRelease(
            tables={"kl_released": released},
            row_map=row_map,
            figures={"n_rows_kl_released": len(released), "n_clusters": int(released["cluster_id"].nunique())},
            n_rows_out=len(released),
        )

    def verdict(self, gates: Sequence[GateOutcome], parameters: KLParameters) -> GateVerdict:
        """Any gate that did not pass refuses the release (the (k, ℓ) model has no override)."""
        return gate_status_verdict(gates, refuse=lambda status: status != "passed")

    def candidate_sets(
        self, frames: Frames, row_map: pd.DataFrame, sensitive_attributes: Sequence[str]
    ) -> Mapping[str, pd.Series]:
        """Candidate sets of the equivalence classes (:func:`pipeline.core.class_attacks.class_candidate_sets`)."""
        from pipeline.core.class_attacks import class_candidate_sets

        return class_candidate_sets(frames["kl_released"], row_map, list(sensitive_attributes))

    def read_published(self, directory: Path) -> Frames:
        """``kl_released`` of a published release."""
        return {"kl_released": pd.read_parquet(Path(directory) / "kl_released.parquet")}

    def published_tables(self, frames: Frames, parameters: KLParameters) -> dict[str, pd.DataFrame]:
        """``kl_released`` as assembled."""
        return {"kl_released": frames["kl_released"]}

    def hierarchies_manifest(self, parameters: KLParameters, generalization_hierarchies: pd.DataFrame) -> dict[str, Any]:
        """The manifest's ``hierarchies``: the directory's base name (never a path: the manifest is published) and,
        per quasi-identifier, the file name, its SHA-256 and height."""
        return {
            "directory": Path(parameters.hierarchies_dir).name,
            "files": {
                row.attribute: {"file": row.file, "sha256": row.sha256, "height": int(row.height)}
                for row in generalization_hierarchies.itertuples(index=False)
            },
        }

    def manifest_section(self, frames: Frames, parameters: KLParameters, verdict: GateVerdict, settings: Any) -> dict[str, Any]:
        """Parameters, hierarchies, counts, costs and the adversaries measured on the release (not gated, issue 12)."""
        from pipeline.core.class_attacks import class_attack_figures

        released, clusters = frames["kl_released"], frames["kl_clusters"]
        return {
            "allow_disclosure": None,  # not a setting of this model
            "disclosure_override_used": False,
            "k": parameters.k,
            "kl_method": parameters.kl_method,
            "max_block_size": parameters.max_block_size if parameters.kl_method == "blocked" else None,
            "hierarchies": self.hierarchies_manifest(parameters, frames["generalization_hierarchies"]),
            "generalization_weights": dict(parameters.generalization_weights),
            "n_released": len(released),
            "n_suppressed_records": len(frames["kl_suppressed_records"]),
            "n_clusters": int(released.groupby("cluster_id", observed=True).size().shape[0]),
            "total_generalization_cost": float(clusters["cost"].sum()),
            "total_naive_cost": int(clusters["naive_cost"].sum()),
            "attacks": class_attack_figures(
                frames["raw_records"],
                released,
                frames[self.row_map_asset],
                parameters.quasi_identifiers,
                parameters.sensitive_attributes,
                ell=parameters.ell,
                slack=parameters.posterior_slack,
                # the strong rules the mixed model bounds by default (P1 §6: min_confidence 0.8, support ≥ max(ℓ, 5)),
                # as `msa-release audit --table` mines them: the (k, ℓ) model does not bound this adversary
                min_confidence=DEFAULT_MIN_CONFIDENCE,
                min_support=default_min_support(parameters.ell),
            ),
        }

    def report_data(
        self, frames: Frames, manifest: Mapping[str, Any], parameters: KLParameters, *, release_path: Path
    ) -> dict[str, Any]:
        """``report.json``: class sizes, average generalization levels and the identity risk on the published
        (generalised) quasi-identifiers."""
        from pipeline.reporting.release_report import kl_report_data, query_workload_data

        from pipeline.core.identity_risk import identity_risk

        data: dict[str, Any] = kl_report_data(frames["kl_released"], frames["kl_clusters"], parameters.quasi_identifiers)
        data["identity_risk"] = identity_risk([frames["kl_released"]], parameters.quasi_identifiers)
        # the COUNT-query workload of Xiao & Tao answered from the release, against the private records (aggregates)
        data["query_workload"] = query_workload_data(
            frames["raw_records"],
            parameters.quasi_identifiers,
            parameters.sensitive_attributes,
            model="kl",
            tables={"table": frames["kl_released"]},
            hierarchies_dir=Path(parameters.hierarchies_dir),
        )
        return data

    def publish_figures(self, frames: Frames, manifest: Mapping[str, Any], report_data: Mapping[str, Any]) -> dict[str, Any]:
        """Sizes, costs, discernibility and the adversaries' figures (stable names)."""
        sizes = frames["kl_released"].groupby("cluster_id", observed=True).size()
        clusters = frames["kl_clusters"]
        return {
            "k": manifest["k"],
            "ell": manifest["ell"],
            "n_input": manifest["n_input"],
            "n_dropped_missing": manifest["n_dropped_missing"],
            "n_released": manifest["n_released"],
            "n_suppressed_records": manifest["n_suppressed_records"],
            "n_clusters": manifest["n_clusters"],
            "average_cluster_size": float(sizes.mean()) if len(sizes) else 0.0,
            "total_generalization_cost": manifest["total_generalization_cost"],
            "total_naive_cost": manifest["total_naive_cost"],
            "discernibility": discernibility(sizes),
            **{f"attack_{key}": value for key, value in manifest["attacks"].items()},
            "n_rows_in": manifest["n_input"],
            "n_rows_out": manifest["n_released"],
            "min_diverse": int(clusters["diverse"].min()) if len(clusters) else 0,
            **query_workload_figures(report_data),
        }

    def series_configuration(self, parameters: KLParameters) -> dict[str, Any]:
        """The settings that change what the release says about a record; the mixed/Rating keys None;
        ``hierarchies`` the digests of the generalization hierarchy files."""
        from pipeline.core.hierarchies import hierarchy_digests

        return {
            "model": self.name,
            "ell": parameters.ell,
            "min_confidence": None,
            "min_support": None,
            "grouping": None,
            "stratum_deletion_budget": None,
            "residual_policy": None,
            "randomness": None,
            "quasi_identifiers": list(parameters.quasi_identifiers),
            "sensitive_attributes": list(parameters.sensitive_attributes),
            "k": parameters.k,
            "kl_method": parameters.kl_method,
            "max_block_size": parameters.max_block_size,
            "generalization_weights": dict(parameters.generalization_weights),
            "hierarchies": hierarchy_digests(parameters.hierarchies_dir, parameters.quasi_identifiers),
        }

    def table_schemas(self, quasi_identifiers: Sequence[str], sensitive_attributes: Sequence[str]) -> dict[str, dict[str, str]]:
        """The contract's column types of ``tables`` (:func:`pipeline.release.publish.standard_table_schemas`)."""
        from pipeline.release.publish import standard_table_schemas

        every = standard_table_schemas(quasi_identifiers, sensitive_attributes)
        return {name: every[name] for name in self.tables}

    def report_parameters(self, manifest: Mapping[str, Any]) -> list[tuple[str, Any]]:
        """k, the method, the block size, the hierarchies and the generalisation weights."""
        weights = manifest.get("generalization_weights") or {}
        hierarchies = manifest.get("hierarchies") or {}
        return [
            ("k", manifest.get("k")),
            ("method", manifest.get("kl_method")),
            ("max_block_size", manifest.get("max_block_size")),
            ("hierarchies directory", hierarchies.get("directory")),
            ("generalisation weights", ", ".join(f"{n}={w:g}" for n, w in weights.items()) or "all 1"),
        ]

    def report_accounting(self, manifest: Mapping[str, Any]) -> tuple[list[tuple[str, int]], str, list[tuple[str, int]]]:
        """Released and suppressed records; then the number of equivalence classes."""
        parts = [("released", manifest.get("n_released") or 0), ("suppressed", manifest.get("n_suppressed_records") or 0)]
        equation = "n_input − n_dropped_missing = n_released + n_suppressed_records"
        return parts, equation, [("equivalence classes", manifest.get("n_clusters") or 0)]

    def report_sections(
        self, manifest: Mapping[str, Any], data: Mapping[str, Any] | None, baseline: Mapping[str, Any] | None
    ) -> list[str]:
        """Classes, diversity, generalisation cost and the adversaries measured on the release."""
        from pipeline.reporting.release_report import kl_section

        return [kl_section(manifest, data)]

    def report_data_from_files(self, directory: Path, manifest: Mapping[str, Any]) -> dict[str, Any] | None:
        """Class sizes from ``kl_released.parquet`` (the average generalisation levels need the private
        ``kl_clusters``; left out)."""
        from pipeline.reporting.release_report import kl_report_data

        table = Path(directory) / "kl_released.parquet"
        if not table.is_file():
            return None
        released = pd.read_parquet(table, columns=["cluster_id"])
        data: dict[str, Any] = kl_report_data(released, None, manifest.get("quasi_identifiers") or [])
        return data

    def summary(self, manifest: Mapping[str, Any], path: Path, elapsed: float) -> str:
        """One screen of text about a published (k, ℓ) release (:func:`render_kl_summary`)."""
        return render_kl_summary(manifest, path, elapsed)


def render_kl_summary(manifest: Mapping[str, Any], path: Path, elapsed: float) -> str:
    """One screen of text about a published (k, ℓ) release (from its manifest)."""
    observed = {g["name"]: g.get("observed", {}) for g in manifest["checks"]}
    classes = observed.get("kl_clusters_are_k_anonymous", {})
    diversity = observed.get("kl_clusters_are_l_diverse", {})
    n_released, n_clusters = manifest["n_released"], manifest["n_clusters"]
    weights = manifest.get("generalization_weights") or {}
    weighted = {name: w for name, w in weights.items() if w != 1.0}
    lines = [
        f"Published release {manifest['release_id']}",
        f"  directory      {path}",
        f"  model          kl ((k, ℓ)-anonymity)  k={manifest['k']}  ell={manifest['ell']}  method={manifest['kl_method']}"
        + (f"  max_block_size={manifest['max_block_size']}" if manifest.get("max_block_size") else ""),
        f"  QIs            {', '.join(manifest['quasi_identifiers'])} (generalised; hierarchies in {manifest['hierarchies']['directory']})",
        f"  sensitive      {', '.join(manifest['sensitive_attributes'])} (unchanged)",
        f"  report         {path / 'report.html'}",
        f"  records        {manifest['n_input']} read, {dropped_line(manifest)}",
        *input_cleaning_lines(manifest),
        f"                 {n_released} released, {manifest['n_suppressed_records']} suppressed",
        *utility_lines(manifest),
        f"  clusters       {n_clusters} equivalence classes, average size {n_released / n_clusters if n_clusters else 0:.2f} "
        f"(min {classes.get('min_cluster_size', '?')}, max {classes.get('max_cluster_size', '?')}); "
        f"min Diverse {diversity.get('min_diverse_observed', '?')}",
        f"  cost           S = {manifest['total_generalization_cost']:.1f} "
        f"({manifest['total_generalization_cost'] / n_released if n_released else 0:.3f} per record), "
        f"naive (levels climbed) = {manifest['total_naive_cost']}"
        + (f"; weights {', '.join(f'{n}={w:g}' for n, w in weighted.items())}" if weighted else ""),
        "  gates",
    ]
    lines.extend(gate_lines(manifest["checks"]))
    lines.append(f"  time           {elapsed:.1f} s")
    return "\n".join(lines)


#: The (k, ℓ) model's plug-in.
KL = KLModel()
