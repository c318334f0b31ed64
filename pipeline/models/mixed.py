"""The mixed model of P1 (SAC~ + improved Rating) as a plug-in; :mod:`pipeline.models.rating` configures it as the plain
Rating baseline.

The release tables come from the mixed model's stage tables (``assets/mixed_model.py``: the SAC/IR split, attribute
clusters, SAC~ groups and their permutation, improved Rating) through
:func:`pipeline.core.mixed_model.assemble_release_tables`. No Dagster here.

References: P1 §4-§5 (Algorithms 7, 10, 11, 13, 19); SPEC §1-§8.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd

from pipeline.models.base import CandidateRelease, Frames, GateOutcome, GateVerdict, utility_lines

if TYPE_CHECKING:
    from pipeline.core.mixed_model import ReleaseTables

__all__ = ["MIXED", "MixedModel", "MixedParameters", "render_summary"]

#: Gates of the mixed and Rating models (``checks/gates.py``), in manifest order.
MIXED_GATES = (
    "attribute_table_is_l_diverse",
    "disclosure_within_bound",
    "no_certain_attribute_table_cell",
    "no_probability_tilt",
    "posterior_within_bound",
    "records_accounted_for",
    "release_carries_no_input_order",
    "rule_confidence_preserved",
    "sac_released_is_l_diverse",
    "utility_within_thresholds",
)
#: Settings the mixed and Rating jobs read besides ``COMMON_SETTINGS`` (:mod:`pipeline.models.base`): strong rules
#: (mining), SAC~ and Rating (grouping, strata, residuals, randomness; ``hierarchies_dir`` for the qi_aware
#: generalization), the gates' settings and the private Rating baseline of report.html.
MIXED_SETTINGS = (
    "min_confidence",
    "min_support",
    "mining_backend",
    "duckdb_mining_threshold",
    "seed",
    "randomness",
    "grouping",
    "stratum_deletion_budget",
    "residual_policy",
    "hierarchies_dir",
    "allow_disclosure",
    "confidence_tolerance",
    "posterior_slack",
    "posterior_gate",
    "private_baseline_max_records",
)
#: The gate that ``posterior_gate: warn`` turns into a warning.
POSTERIOR_GATE = "posterior_within_bound"


@dataclass(frozen=True)
class MixedParameters:
    """Typed parameters of the mixed model (and of Rating); see :class:`pipeline.resources.ReleaseSettings` for each.

    Attributes
    ----------
    quasi_identifiers, sensitive_attributes
        Column names, in schema order.
    ell
        ℓ: size of every SAC~ group, minimum number of distinct values per SID.
    min_confidence, min_support
        Strong rules: confidence >= min_confidence, support >= min_support records (already resolved: 0 -> max(ℓ, 5)).
    seed, randomness
        The SAC~ permutation's seed; ``home-secret`` or ``spec-reference``.
    grouping, stratum_deletion_budget, residual_policy
        ``qi_aware`` / ``p1``; the strata's budget (qi_aware); ``delete`` / ``suppress``.
    allow_disclosure, confidence_tolerance, posterior_slack, posterior_gate
        Gate settings (disclosure override, rule-confidence tolerance, learned-model gate).
    private_baseline_max_records
        Largest table whose private Rating baseline report.html shows.
    ell_per_attribute
        ℓ_i per sensitive attribute when set (SPEC §6.7; ``ell`` is then L = max ℓ_i), else None.
    hierarchies_path
        The hierarchy folder, resolved (qi_aware generalization); None when there is none (a table other than
        Adult's adult.data without ``hierarchies_dir``): every quasi-identifier is then generalized to ``*`` only.
    """

    quasi_identifiers: tuple[str, ...]
    sensitive_attributes: tuple[str, ...]
    ell: int
    min_confidence: float
    min_support: int
    seed: int
    randomness: str
    grouping: str
    stratum_deletion_budget: float
    residual_policy: str
    allow_disclosure: bool
    confidence_tolerance: float
    posterior_slack: float
    posterior_gate: str
    private_baseline_max_records: int
    hierarchies_path: Path | None
    ell_per_attribute: Mapping[str, int] | None = None

    @property
    def qi_aware(self) -> bool:
        """Whether the grouping is the quasi-identifier-aware one."""
        return self.grouping == "qi_aware"


@dataclass(frozen=True)
class MixedModel:
    """The mixed model (``publishes_sac``); :class:`pipeline.models.rating.RatingModel` (``publishes_sac`` False) is
    plain Rating on the whole table, with its own job and stage tables.
    """

    name: str = "mixed"
    job: str = "release"
    settings_fields: tuple[str, ...] = MIXED_SETTINGS
    tables: tuple[str, ...] = ("sac_released", "attribute_table", "id_table", "attribute_clusters")
    candidate_tables: tuple[str, ...] = ("sac_released", "attribute_table", "id_table", "attribute_clusters")
    candidate_inputs: tuple[str, ...] = (
        "raw_records",
        "sac_permuted",
        "ir_attribute_sids",
        "ir_id_table",
        "sensitive_attribute_clusters",
        "ir_left",
    )
    publish_inputs: tuple[str, ...] = ("deleted_records", "strong_rules")
    table_assets: Mapping[str, str] = dataclasses.field(default_factory=dict)
    stage_groups: tuple[str, ...] = ("ingest", "mining", "mixed_model", "rating")
    candidate_asset: str = "release_candidate"
    row_map_asset: str = "release_row_map"
    publish_asset: str = "release"
    publish_step: str = "publish_release"
    gates: tuple[str, ...] = MIXED_GATES
    not_applicable: Mapping[str, str] = dataclasses.field(default_factory=dict)
    audited: bool = True
    source: str = "P1 §4-§5 (Algorithms 7, 10, 11, 13, 19); SPEC §1-§8"
    docs: str = "docs/mixed.md"
    #: False for plain Rating: every record goes to IR, no SAC~ and no attribute clusters are published.
    publishes_sac: bool = True

    guarantee: str = "ℓ-diverse"
    label: str = "mixed (SAC~ + improved Rating, P1)"
    compared_with: str | None = "rating"
    baseline: bool = False

    def check_input(self, settings: Any, records: pd.DataFrame) -> None:
        """:func:`check_hierarchy_folder` (the hierarchies themselves are optional: a quasi-identifier without one is
        published as ``*`` where group or stratum members differ)."""
        check_hierarchy_folder(settings)

    # ------------------------------------------------------------------ parameters
    def parameters(self, settings: Any) -> MixedParameters:
        """The typed parameters of ``settings`` (:class:`pipeline.resources.ReleaseSettings`)."""
        return MixedParameters(
            quasi_identifiers=tuple(settings.quasi_identifiers),
            sensitive_attributes=tuple(settings.sensitive_attributes),
            ell=int(settings.ell),
            min_confidence=float(settings.min_confidence),
            min_support=int(settings.effective_min_support()),
            seed=int(settings.seed),
            randomness=str(settings.randomness),
            grouping=str(settings.grouping),
            stratum_deletion_budget=float(settings.stratum_deletion_budget),
            residual_policy=str(settings.residual_policy),
            allow_disclosure=bool(settings.allow_disclosure),
            confidence_tolerance=float(settings.confidence_tolerance),
            posterior_slack=float(settings.posterior_slack),
            posterior_gate=str(settings.posterior_gate),
            private_baseline_max_records=int(settings.private_baseline_max_records),
            hierarchies_path=settings.hierarchies_path(),
            ell_per_attribute=settings.ell_by_attribute() if getattr(settings, "ell_per_attribute", None) else None,
        )

    # ------------------------------------------------------------------ build
    def build(self, inputs: Frames, parameters: MixedParameters, *, secret: bytes | None) -> CandidateRelease:
        """Assemble the candidate release from the stage tables: contract tables with fresh row ids that carry no
        input order (:meth:`release_tables`).

        Parameters
        ----------
        inputs
            The tables named in ``candidate_inputs`` (the warehouse tables of ``assets/mixed_model.py``, or of
            ``assets/rating_model.py`` for Rating).
        secret
            The home secret, or None with ``randomness: spec-reference``.

        Returns
        -------
        CandidateRelease
            ``sac_released``, ``attribute_table``, ``id_table``, ``attribute_clusters`` (the last empty for Rating);
            the row map with ``input_row_number``; sizes and generalization counts.
        """
        tables = self.release_tables(inputs, parameters, secret=secret)
        # the custodian's audit map (private, never released): release row id -> input line
        row_map = tables.row_map.assign(input_row_number=tables.row_map["source_row_id"])
        frames = {
            "sac_released": tables.sac_released,
            "attribute_table": tables.attribute_table,
            "id_table": tables.id_table,
            "attribute_clusters": tables.attribute_clusters,
        }
        if not self.publishes_sac:  # plain Rating publishes no SAC~ and no clusters (SPEC §7)
            frames["attribute_clusters"] = tables.attribute_clusters.iloc[0:0]
        sizes: dict[str, int | float] = {f"n_rows_{name}": len(frames[name]) for name in self.candidate_tables}
        return CandidateRelease(
            tables=frames,
            row_map=row_map,
            figures={**sizes, **tables.generalization},
            n_rows_out=len(tables.sac_released) + len(tables.attribute_table),
        )

    def release_tables(self, inputs: Frames, parameters: MixedParameters, *, secret: bytes | None) -> ReleaseTables:
        """The release tables of the mixed model (:func:`pipeline.core.mixed_model.assemble_release_tables`).

        Parameters
        ----------
        inputs
            ``raw_records``, ``sac_permuted``, ``ir_attribute_sids``, ``ir_id_table``,
            ``sensitive_attribute_clusters``, ``ir_left`` (the warehouse tables of ``assets/mixed_model.py``).
        secret
            The home secret, or None with ``randomness: spec-reference``.

        Raises
        ------
        ValueError
            Inconsistent stage tables (see :func:`pipeline.core.mixed_model.assemble_release_tables`).
        """
        from pipeline.core.hierarchies import load_available_hierarchies
        from pipeline.core.mixed_model import assemble_release_tables
        from pipeline.io.tables import clusters_from_frame

        ir_left = inputs["ir_left"]
        return assemble_release_tables(
            inputs["raw_records"],
            parameters.quasi_identifiers,
            parameters.sensitive_attributes,
            sac_permuted=inputs["sac_permuted"],
            attribute_sids=inputs["ir_attribute_sids"].astype({a: "Int32" for a in parameters.sensitive_attributes}),
            id_table=inputs["ir_id_table"],
            clusters=clusters_from_frame(inputs["sensitive_attribute_clusters"]),
            secret=secret,
            generalize=self.publishes_sac and parameters.qi_aware,
            hierarchies=load_available_hierarchies(parameters.hierarchies_path, parameters.quasi_identifiers)
            if parameters.qi_aware and parameters.hierarchies_path is not None
            else ({} if parameters.qi_aware else None),
            attribute_table_labels=ir_left if "stratum" in ir_left.columns else None,
        )

    # ------------------------------------------------------------------ gates
    def verdict(self, gates: Sequence[GateOutcome], parameters: MixedParameters) -> GateVerdict:
        """Refuse on a failed gate; a WARN gate (``allow_disclosure``, ``posterior_gate: warn``) refuses unless its
        setting accepts it."""
        failed = [str(g["name"]) for g in gates if g["status"] == "failed"]
        if failed:  # blocking checks already stop the publish step; this is a second lock on the door
            return GateVerdict(refusal=f"release refused: gate(s) {failed} failed")
        overridden = [str(g["name"]) for g in gates if g["status"] == "failed_overridden"]
        posterior_warned = POSTERIOR_GATE in overridden and parameters.posterior_gate == "warn"
        overridden = [name for name in overridden if not (name == POSTERIOR_GATE and posterior_warned)]
        if overridden and not parameters.allow_disclosure:
            return GateVerdict(refusal=f"release refused: gate(s) {overridden} failed and allow_disclosure is off")
        return GateVerdict(refusal=None, overridden=tuple(overridden), warned=(POSTERIOR_GATE,) if posterior_warned else ())

    # ------------------------------------------------------------------ publish
    def candidate_sets(
        self, frames: Frames, row_map: pd.DataFrame, sensitive_attributes: Sequence[str]
    ) -> Mapping[str, pd.Series]:
        """Candidate sets of the SAC~ groups and SIDs (:func:`pipeline.core.composition.candidate_sets`)."""
        from pipeline.core.composition import candidate_sets

        return candidate_sets(
            list(sensitive_attributes),
            row_map=row_map,
            sac_released=frames["sac_released"],
            attribute_table=frames["attribute_table"],
            id_table=frames["id_table"],
        )

    def read_published(self, directory: Path) -> Frames:
        """``sac_released``, ``attribute_table`` (SID columns ``Int32``) and ``id_table`` of a published release
        (:func:`pipeline.release.audit.read_release`; Rating's empty SAC~ table has the contract's columns)."""
        from pipeline.release.audit import read_release

        release = read_release(directory)
        return {"sac_released": release.sac_released, "attribute_table": release.attribute_table, "id_table": release.id_table}

    def published_tables(self, frames: Frames, parameters: MixedParameters) -> dict[str, pd.DataFrame]:
        """The candidate tables; SID columns of the attribute table as nullable ``Int32`` (NULL = suppressed)."""
        published = {name: frames[name] for name in self.candidate_tables}
        published["attribute_table"] = frames["attribute_table"].astype({a: "Int32" for a in parameters.sensitive_attributes})
        return published

    def manifest_section(
        self, frames: Frames, parameters: MixedParameters, verdict: GateVerdict, settings: Any
    ) -> dict[str, Any]:
        """Settings, counts and the generalization figures of the candidate (``Manifest``'s mixed/Rating part)."""
        deleted, candidate = frames["deleted_records"], frames[self.candidate_asset]
        attribute_table = self.published_tables(frames, parameters)["attribute_table"]

        def candidate_count(name: str) -> int:
            return int(candidate[name].iloc[0]) if name in candidate else 0

        return {
            "allow_disclosure": parameters.allow_disclosure,
            "disclosure_override_used": bool(verdict.overridden),
            "posterior_slack": parameters.posterior_slack,
            "posterior_gate": parameters.posterior_gate,
            "posterior_gate_warned": POSTERIOR_GATE in verdict.warned,
            "min_confidence": parameters.min_confidence,
            "min_support": parameters.min_support,
            "seed": parameters.seed,
            "randomness": parameters.randomness,
            "grouping": parameters.grouping,
            "stratum_deletion_budget": parameters.stratum_deletion_budget if parameters.qi_aware else None,
            "residual_policy": parameters.residual_policy,
            "n_deleted_for_eligibility": int((deleted["reason"] == "eligibility").sum()) if "reason" in deleted else 0,
            "n_generalized_groups": candidate_count("n_generalized_groups"),
            "n_generalized_cells": candidate_count("n_generalized_cells"),
            "n_strata": candidate_count("n_strata"),
            "n_generalized_attribute_table_cells": candidate_count("n_generalized_attribute_table_cells"),
            "n_sac_released": len(frames["sac_released"]),
            "n_attribute_table": len(attribute_table),
            "n_deleted": len(deleted),
            "n_suppressed_cells": int(attribute_table[list(parameters.sensitive_attributes)].isna().sum().sum()),
            "hierarchies": quasi_identifier_hierarchies(parameters) if parameters.qi_aware else None,
        }

    def report_data(
        self, frames: Frames, manifest: Mapping[str, Any], parameters: MixedParameters, *, release_path: Path
    ) -> dict[str, Any]:
        """``report.json``: the utility metrics, rule confidences and supports, the identity risk on the published
        quasi-identifiers, and for the mixed model the private Rating baseline (computed from the same records, never
        published; aggregate figures only)."""
        from pipeline.core.identity_risk import identity_risk
        from pipeline.core.metrics import domain_sizes
        from pipeline.release.audit import PublishedRelease
        from pipeline.reporting.release_report import mixed_report_data, private_rating_baseline, query_workload_data

        raw_records, strong_rules = frames["raw_records"], frames["strong_rules"]
        in_memory = PublishedRelease(
            path=release_path,
            manifest=dict(manifest),
            sac_released=frames["sac_released"],
            attribute_table=self.published_tables(frames, parameters)["attribute_table"],
            id_table=frames["id_table"],
            attribute_clusters=frames["attribute_clusters"],
        )
        data: dict[str, Any] = mixed_report_data(
            in_memory, strong_rules, domain=domain_sizes(raw_records, list(parameters.sensitive_attributes))
        )
        # who can be singled out by the published quasi-identifiers (both tables: an adversary looks in each)
        data["identity_risk"] = identity_risk([in_memory.sac_released, in_memory.attribute_table], parameters.quasi_identifiers)
        # the COUNT-query workload of Xiao & Tao answered from the release, against the private records (aggregates)
        data["query_workload"] = query_workload_data(
            raw_records,
            parameters.quasi_identifiers,
            parameters.sensitive_attributes,
            model=self.name,
            tables={
                "sac_released": in_memory.sac_released,
                "attribute_table": in_memory.attribute_table,
                "id_table": in_memory.id_table,
                "attribute_clusters": in_memory.attribute_clusters,
            },
            hierarchies_dir=parameters.hierarchies_path,
        )
        if not self.publishes_sac:
            return data
        if len(raw_records) <= parameters.private_baseline_max_records:
            # issue 12, series (c): never published as a release, so it cannot be intersected with this one
            data["private_rating_baseline"] = private_rating_baseline(
                raw_records,
                parameters.quasi_identifiers,
                parameters.sensitive_attributes,
                ell=dict(parameters.ell_per_attribute) if parameters.ell_per_attribute else parameters.ell,
                min_confidence=parameters.min_confidence,
                rules=strong_rules,
            )
        else:
            data["private_rating_baseline"] = {
                "model": "rating",
                "published": False,
                "not_computed": True,
                "n_records": len(raw_records),
                "max_records": parameters.private_baseline_max_records,
            }
        return data

    def publish_figures(self, frames: Frames, manifest: Mapping[str, Any], report_data: Mapping[str, Any]) -> dict[str, Any]:
        """Counts of the manifest, the disclosure and utility figures (stable names: the UI charts them)."""
        observed = {g["name"]: g.get("observed", {}) for g in manifest["checks"]}
        disclosure = observed.get("disclosure_within_bound", {})
        groups = observed.get("sac_released_is_l_diverse", {})
        from pipeline.release.reports import validate_report_data

        report = validate_report_data(report_data)
        metrics, rules = report.metrics, report.rules
        if metrics is None or rules is None:
            raise ValueError(f"report.json of a {self.name} release has no metrics or rules")
        counts = (
            "n_input",
            "n_dropped_missing",
            "n_sac_released",
            "n_attribute_table",
            "n_deleted",
            "n_deleted_for_eligibility",
            "n_generalized_groups",
            "n_generalized_cells",
            "n_strata",
            "n_generalized_attribute_table_cells",
            "n_suppressed_cells",
        )
        return {
            **{name: manifest[name] for name in counts},
            "disclosure_override_used": int(bool(manifest["disclosure_override_used"])),
            "n_rows_in": manifest["n_input"],
            "n_rows_out": manifest["n_sac_released"] + manifest["n_attribute_table"],
            "n_strong_rules": len(rules),
            "n_groups": int(groups.get("n_groups", 0)),
            "max_disclosure_probability": float(disclosure.get("max_disclosure_probability", 0.0)),
            "n_records_above_bound": int(disclosure.get("n_records_above_bound", 0)),
            "additional_information_loss": float(metrics.additional_information_loss),
            "reconstruction_error": float(metrics.reconstruction_error),
            "reconstruction_error_per_record": float(metrics.reconstruction_error_per_record),
            "average_raw_confidence": float(metrics.average_raw_confidence or 0.0),
            "average_released_confidence": float(metrics.average_released_confidence or 0.0),
            **query_workload_figures(report_data),
        }

    def series_configuration(self, parameters: MixedParameters) -> dict[str, Any]:
        """The settings that change what the release says about a record (never the seed); the (k, ℓ) keys None;
        ``hierarchies`` the digests of the qi_aware grouping's hierarchy files (None for each without one)."""
        from pipeline.core.hierarchies import hierarchy_digests

        return {
            "model": self.name,
            # ℓ_i per attribute change what the release says of a record as much as ℓ does
            "ell": dict(parameters.ell_per_attribute) if parameters.ell_per_attribute else parameters.ell,
            "min_confidence": parameters.min_confidence,
            "min_support": parameters.min_support,
            "grouping": parameters.grouping,
            "stratum_deletion_budget": parameters.stratum_deletion_budget if parameters.qi_aware else None,
            "residual_policy": parameters.residual_policy,
            "randomness": parameters.randomness,
            "quasi_identifiers": list(parameters.quasi_identifiers),
            "sensitive_attributes": list(parameters.sensitive_attributes),
            "k": None,
            "kl_method": None,
            "max_block_size": None,
            "generalization_weights": None,
            "hierarchies": hierarchy_digests(
                parameters.hierarchies_path if parameters.qi_aware else None, parameters.quasi_identifiers
            ),
        }

    def table_schemas(self, quasi_identifiers: Sequence[str], sensitive_attributes: Sequence[str]) -> dict[str, dict[str, str]]:
        """The contract's column types of ``tables`` (:func:`pipeline.release.publish.standard_table_schemas`)."""
        from pipeline.release.publish import standard_table_schemas

        every = standard_table_schemas(quasi_identifiers, sensitive_attributes)
        return {name: every[name] for name in self.tables}

    def report_parameters(self, manifest: Mapping[str, Any]) -> list[tuple[str, Any]]:
        """Rules, seed, randomness and the disclosure override."""
        return [
            ("min_confidence", manifest.get("min_confidence")),
            ("min_support", manifest.get("min_support")),
            ("seed", manifest.get("seed")),
            ("randomness", manifest.get("randomness")),
            ("allow_disclosure", manifest.get("allow_disclosure")),
            ("disclosure override used", manifest.get("disclosure_override_used")),
        ]

    def report_accounting(self, manifest: Mapping[str, Any]) -> tuple[list[tuple[str, int]], str, list[tuple[str, int]]]:
        """SAC~ rows, attribute-table rows and deleted records; then the suppressed attribute-table cells."""
        parts = [
            ("in SAC~ groups", manifest.get("n_sac_released") or 0),
            ("in the attribute table", manifest.get("n_attribute_table") or 0),
            ("deleted", manifest.get("n_deleted") or 0),
        ]
        equation = "n_input − n_dropped_missing = n_sac_released + n_attribute_table + n_deleted"
        return parts, equation, [("suppressed attribute-table cells", manifest.get("n_suppressed_cells") or 0)]

    def report_sections(
        self, manifest: Mapping[str, Any], data: Mapping[str, Any] | None, baseline: Mapping[str, Any] | None
    ) -> list[str]:
        """The strong-rule adversary's disclosure, the rules, utility (AIL, RCE) and the comparison with Rating."""
        from pipeline.reporting.release_report import baseline_section, disclosure_section, rules_section, utility_section

        return [
            disclosure_section(manifest),
            rules_section(manifest, data),
            utility_section(manifest, data),
            baseline_section(manifest, data, baseline),
        ]

    def report_data_from_files(self, directory: Path, manifest: Mapping[str, Any]) -> dict[str, Any] | None:
        """None: the utility figures need the raw table (``msa-release report --raw``)."""
        return None

    def summary(self, manifest: Mapping[str, Any], path: Path, elapsed: float) -> str:
        """One screen of text about a published mixed or Rating release (:func:`render_summary`)."""
        return render_summary(manifest, path, elapsed)


def query_workload_figures(report_data: Mapping[str, Any]) -> dict[str, float]:
    """The query workload's W1/W2 median and 90th-percentile relative errors as numeric metadata
    (``query_workload_w1_median``, …; none when report.json holds no workload)."""
    workload = report_data.get("query_workload") or {}
    return {
        f"query_workload_{name.lower()}_{figure}": float(workload[name][figure])
        for name in ("W1", "W2")
        if workload.get(name)
        for figure in ("median", "p90")
    }


def check_hierarchy_folder(settings: Any) -> None:
    """The hierarchy folder the qi_aware grouping reads, when one is set, is a folder (its files are read by the run).

    Raises
    ------
    pipeline.core.hierarchies.HierarchyError
        ``hierarchies_dir`` names no folder.
    """
    from pipeline.core.hierarchies import require_hierarchy_folder

    directory = settings.hierarchies_path() if str(getattr(settings, "grouping", "qi_aware")) == "qi_aware" else None
    if directory is not None:
        require_hierarchy_folder(directory)


def quasi_identifier_hierarchies(parameters: MixedParameters) -> dict[str, Any]:
    """The manifest's ``hierarchies`` of a qi_aware mixed or Rating release: which hierarchy folder the grouping
    generalized along (its base name, never a path: the manifest is published; None when there is none) and the
    quasi-identifiers it had no hierarchy for, which a group or stratum whose members differ publishes as ``*``."""
    from pipeline.core.hierarchies import find_hierarchy_file

    directory = parameters.hierarchies_path
    found = directory is not None and directory.is_dir()
    return {
        "directory": directory.name if directory is not None and found else None,
        "generalized_to_root_only": [
            name
            for name in parameters.quasi_identifiers
            if not found or find_hierarchy_file(directory, name) is None  # type: ignore[arg-type]
        ],
    }


def hierarchies_line(manifest: Mapping[str, Any]) -> list[str]:
    """The summary's line about quasi-identifiers without a hierarchy (a qi_aware release), or none."""
    hierarchies = manifest.get("hierarchies")
    if not isinstance(hierarchies, Mapping) or not hierarchies.get("generalized_to_root_only"):
        return []
    names = ", ".join(hierarchies["generalized_to_root_only"])
    where = f"in {hierarchies['directory']}" if hierarchies.get("directory") else "(no hierarchies_dir / --hierarchies)"
    return [
        f"  hierarchies    none {where} for {names}: a group or stratum whose members differ there publishes '*' "
        "(make hierarchies with: msa-release hierarchies)"
    ]


def render_summary(manifest: Mapping[str, Any], path: Path, elapsed: float) -> str:
    """One screen of text about a published mixed or Rating release (from its manifest)."""
    from pipeline.reporting.formatting import format_figure
    from pipeline.reporting.release_report import no_strong_rules_sentence

    gates = manifest["checks"]
    lines = [
        f"Published release {manifest['release_id']}",
        f"  directory      {path}",
        f"  model          {manifest['model']}  ell={manifest['ell']}  min_confidence={manifest['min_confidence']}  "
        + (f"min_support={manifest['min_support']}  " if manifest.get("min_support") is not None else "")
        + f"seed={manifest['seed']}",
        f"  QIs            {', '.join(manifest['quasi_identifiers'])}",
        f"  sensitive      {', '.join(manifest['sensitive_attributes'])}",
        *ell_per_attribute_line(manifest),
        f"  report         {path / 'report.html'}",
        f"  records        {manifest['n_input']} read, {dropped_line(manifest)}",
        *input_cleaning_lines(manifest),
        f"                 {manifest['n_sac_released']} in SAC~, {manifest['n_attribute_table']} in the attribute table, "
        f"{manifest['n_deleted']} deleted",
        f"  suppressed     {manifest['n_suppressed_cells']} attribute-table cells",
        *hierarchies_line(manifest),
        *utility_lines(manifest),
    ]
    observed = {g["name"]: g.get("observed", {}) for g in gates}
    rules = observed.get("rule_confidence_preserved", {})
    disclosure = observed.get("disclosure_within_bound", {})
    groups = observed.get("sac_released_is_l_diverse", {})
    lines.append(
        f"  strong rules   {rules.get('n_strong_rules', '?')} (recovered exactly: {rules.get('n_rules_exact', '?')}, "
        f"max deviation {format_figure(rules['max_confidence_deviation']) if 'max_confidence_deviation' in rules else '?'})"
    )
    n_rules = rules.get("n_strong_rules")
    if n_rules == 0 or (n_rules is None and disclosure.get("n_records_with_strong_rules") == 0):
        lines.append(f"                 {no_strong_rules_sentence(str(manifest['model']))}")
    if groups.get("applicable", True) and "n_groups" in groups:
        lines.append(f"  groups         {groups.get('n_groups', '?')} SAC~ groups of {manifest['ell']}")
    lines.append(disclosure_line(disclosure, int(manifest["ell"])))
    if manifest.get("disclosure_override_used"):
        lines.append(
            "  WARNING        published with --allow-disclosure: the disclosure bound "
            f"{'1/ℓ_j' if disclosure.get('ell_per_attribute') else '1/ell'} does NOT hold"
        )
    posterior = observed.get("posterior_within_bound", {})
    if posterior:
        lines.append(
            f"  posterior      {posterior.get('n_cells_above_bound', '?')} of {posterior.get('n_cells', '?')} (record, attribute) "
            f"cells above max({'1/ℓ_i' if posterior.get('ell_per_attribute') else '1/ell'}, population) + "
            f"{posterior.get('slack', '?')} (learned-model adversary)"
        )
    if manifest.get("posterior_gate_warned"):
        lines.append("  WARNING        published with --posterior-gate warn: the posterior bound does NOT hold")
    lines.append("  gates")
    lines.extend(gate_lines(gates))
    lines.append(f"  time           {elapsed:.1f} s")
    return "\n".join(lines)


def ell_per_attribute_line(manifest: Mapping[str, Any]) -> list[str]:
    """The summary's line of the ℓ_i per sensitive attribute when they differ (SPEC §6.7), else none."""
    per_attribute = manifest.get("ell_per_attribute") or {}
    if len(set(per_attribute.values())) <= 1:
        return []
    order = [a for a in manifest.get("sensitive_attributes") or [] if a in per_attribute] or list(per_attribute)
    listed = ", ".join(f"{attribute}={per_attribute[attribute]}" for attribute in order)
    return [f"  ell per attr   {listed} (SIDs of attribute i: >= ℓ_i values, bound 1/ℓ_i; SAC~ groups of L = {manifest['ell']})"]


def disclosure_line(disclosure: Mapping[str, Any], ell: int) -> str:
    """The summary's line about the strong-rule adversary on the rule holders (the gate's figures), in the words the
    audit uses for its own count (:func:`pipeline.cli.audit.render_audit`: released records)."""
    from pipeline.reporting.formatting import format_figure

    def figure(key: str) -> str:
        return format_figure(disclosure[key]) if key in disclosure else "?"

    per_attribute = disclosure.get("ell_per_attribute")
    bound = f"1/ell = {format_figure(1 / ell)}" if not per_attribute else "of their rule, 1/ℓ_j of its consequent's attribute"
    return (
        f"  disclosure     max {figure('max_disclosure_probability')} over {figure('n_records_with_strong_rules')} rule "
        f"holders (records that hold a strong rule); {figure('n_records_above_bound')} rule holders above the bound "
        f"{bound}, {figure('n_records_certain')} certain"
    )


def input_cleaning_lines(manifest: Mapping[str, Any]) -> list[str]:
    """The summary's lines about what reading the input changed (the manifest's ``missing_quasi_identifier_by_column``
    and ``look_alike_spellings_merged``; none when nothing changed or the manifest predates them). Counts only."""
    lines = []
    missing = manifest.get("missing_quasi_identifier_by_column") or {}
    if missing:
        detail = ", ".join(f"{column} {n}" for column, n in missing.items())
        lines.append(f"                 missing quasi-identifier values kept as '?': {detail}")
    merged = manifest.get("look_alike_spellings_merged") or {}
    if merged:
        detail = ", ".join(f"{column} {n}" for column, n in merged.items())
        lines.append(
            f"                 look-alike spellings merged into another before counting diversity (case, Unicode forms, "
            f"invisible characters): {detail}"
        )
    return lines


def dropped_line(manifest: Mapping[str, Any]) -> str:
    """``"1843 dropped (missing sensitive value: occupation 1843)"``: the records dropped for a missing sensitive
    value, and per sensitive attribute that had missing values how many records miss it (the manifest's
    ``dropped_missing_by_attribute``; a record missing two attributes counts under both). Counts only. A manifest
    made before that field gives the total alone."""
    by_attribute = manifest.get("dropped_missing_by_attribute") or {}
    detail = ", ".join(f"{attribute} {n}" for attribute, n in by_attribute.items())
    return f"{manifest['n_dropped_missing']} dropped (missing sensitive value{': ' + detail if detail else ''})"


#: How the summaries label a gate's status.
STATUS_LABELS = {"passed": "PASS", "failed": "FAIL", "failed_overridden": "FAIL (overridden)", "not_applicable": "n/a "}


def gate_lines(gates: Sequence[Mapping[str, Any]]) -> list[str]:
    """One summary line per gate: its status label and name."""
    return [
        f"    {STATUS_LABELS.get(str(gate.get('status', '')), 'PASS' if gate['passed'] else 'FAIL')}  {gate['name']}"
        for gate in gates
    ]


#: The mixed model's plug-in.
MIXED = MixedModel()
