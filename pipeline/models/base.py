"""The protocol every publication model follows (issue 13: "publication models as typed plug-ins").

A publication model is one object (a plug-in) that says, without Dagster:

- who it is: ``name`` (the ``model`` setting), ``source`` (paper and SPEC sections), ``docs`` (its page);
- its typed parameters: :meth:`PublicationModel.parameters` turns the run's settings into a frozen dataclass and
  refuses inconsistent values (``ValueError``); ``settings_fields`` names the settings it reads besides
  :data:`COMMON_SETTINGS`, so that its job's run config schema shows only those (``pipeline/jobs.py``);
- how it builds its release tables: :meth:`PublicationModel.build` takes the warehouse tables it names in
  ``candidate_inputs`` and delegates to the pure functions of :mod:`pipeline.core`;
- its release contract: ``tables`` (published) and ``candidate_tables`` (what its gates read);
- its gates: ``gates`` (the names of the asset checks of ``checks/gates.py`` that its job runs),
  ``not_applicable`` (gates that run but do not apply, with the reason) and :meth:`PublicationModel.verdict`
  (which failed gates refuse the release);
- its manifest section, report data, Dagster metadata figures and CLI summary;
- its job: ``job`` and the asset names the Dagster factory (``assets/publish.py``, ``pipeline/jobs.py``) generates
  for it: ``candidate_asset``, ``row_map_asset``, ``publish_asset``, ``publish_step``, plus ``stage_groups``, the
  asset groups its job runs before the candidate, and ``table_assets``, the assets that hold the tables it reads
  under their contract names when its job keeps them under other names (Rating's ``rating_attribute_table`` is
  its ``attribute_table``), so that gates written for one model run on another model's tables.

Several models may share one job: they then share its assets and name the same ``candidate_inputs``; the run's
``model`` setting picks the plug-in at run time. The built-in models have a job each (``release``,
``rating_release``, ``kl_release``).

No Dagster and no Great Expectations here (``tests/test_architecture.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar, runtime_checkable

import pandas as pd

__all__ = [
    "COMMON_SETTINGS",
    "CandidateRelease",
    "Frames",
    "GateOutcome",
    "GateVerdict",
    "ParametersT",
    "PublicationModel",
    "adversary_asset",
    "gate_status_verdict",
    "runs_strong_rule_adversary",
    "utility_lines",
]

#: The gate that checks the strong-rule adversary's figures on the candidate (``checks/gates.py``).
DISCLOSURE_GATE = "disclosure_within_bound"

ParametersT = TypeVar("ParametersT")

#: Settings (fields of :class:`pipeline.resources.ReleaseSettings`) that every publishing job reads, whatever its
#: model: how the input is read (ingest), its columns, ℓ (the ingest's early ℓ-diversity check), the utility gate's
#: thresholds (every model runs ``utility_within_thresholds``) and the publish step's own settings. A model's ``settings_fields`` adds its own; ``model`` is set by the job.
COMMON_SETTINGS = (
    "input_path",
    "input_format",
    "csv_header",
    "column_names",
    "delimiter",
    "strip_whitespace",
    "max_value_length",
    "missing_value_tokens",
    "missing_value_policy",
    "quasi_identifiers",
    "sensitive_attributes",
    "ell",
    "max_deleted_share",
    "max_suppressed_share",
    "ell_per_attribute",
    "allow_recomposition",
    "keep_releases",
    "promote",
    "profile",
)

#: Warehouse tables by name (``raw_records``, ``sac_released``, …), as the Dagster assets hand them over.
Frames = Mapping[str, pd.DataFrame]
#: One gate's outcome as the publish step reads it from the run: ``name``, ``passed``, ``status`` (``passed``,
#: ``failed``, ``failed_overridden``, ``not_applicable``) and ``observed`` (its figures).
GateOutcome = Mapping[str, Any]


@dataclass(frozen=True)
class CandidateRelease:
    """What :meth:`PublicationModel.build` returns: the candidate tables before the gates.

    Attributes
    ----------
    tables
        Candidate table name -> frame, one per name of ``candidate_tables`` (the published tables and whatever
        else the gates read, e.g. an empty ``sac_released`` for Rating).
    row_map
        PRIVATE: release ``row_id`` -> ``source_row_id`` (the input's internal row id), never published.
    figures
        One row of sizes for the candidate asset (counts only, never a value of a table).
    n_rows_out
        Records the release publishes (the candidate asset's ``n_rows_out``).
    """

    tables: dict[str, pd.DataFrame]
    row_map: pd.DataFrame
    figures: dict[str, int | float]
    n_rows_out: int


@dataclass(frozen=True)
class GateVerdict:
    """Which gates refuse the release, after the model's overrides.

    Attributes
    ----------
    refusal
        None when the release may be published, else the message of the refusal (``release refused: …``).
    overridden
        Gates that failed with WARN severity and were accepted by an explicit setting (``allow_disclosure``).
    warned
        Gates that failed with WARN severity by a setting that only warns (``posterior_gate: warn``).
    """

    refusal: str | None
    overridden: tuple[str, ...] = ()
    warned: tuple[str, ...] = ()


def gate_status_verdict(gates: Sequence[GateOutcome], *, refuse: Callable[[str], bool]) -> GateVerdict:
    """The verdict of a model that accepts no override: a gate whose status ``refuse`` says is refusing blocks.

    Parameters
    ----------
    gates
        This run's gate outcomes.
    refuse
        Status -> whether it refuses the release.
    """
    failed = [str(g["name"]) for g in gates if refuse(str(g["status"]))]
    return GateVerdict(refusal=f"release refused: gate(s) {failed} failed" if failed else None)


@runtime_checkable
class PublicationModel(Protocol[ParametersT]):
    """One publication model, as a plug-in (see the module docstring; ``docs/adding-a-model.md``)."""

    @property
    def name(self) -> str:
        """The ``model`` setting that selects it (``mixed``, ``rating``, ``kl``, …)."""
        ...

    @property
    def job(self) -> str:
        """The Dagster job that publishes it."""
        ...

    @property
    def settings_fields(self) -> tuple[str, ...]:
        """The settings (fields of :class:`pipeline.resources.ReleaseSettings`) its job reads besides
        :data:`COMMON_SETTINGS`: its :meth:`parameters`, its stages' and its gates' settings. Its job's run config
        schema holds these and the common ones only; any other setting is refused before a run starts."""
        ...

    @property
    def label(self) -> str:
        """Its name on report.html ("mixed (SAC~ + improved Rating, P1)")."""
        ...

    @property
    def compared_with(self) -> str | None:
        """The model whose release of the same records report.html compares it with, when one is in the same
        ``releases/`` directory (P1's comparison: mixed with rating and back), or None."""
        ...

    @property
    def baseline(self) -> bool:
        """Whether it is a baseline to compare with (Rating): its releases are comparisons unless ``promote`` is set
        and every gate passed (:mod:`pipeline.release.promotion`)."""
        ...

    @property
    def guarantee(self) -> str:
        """What it makes of a table, in a few words for messages ("ℓ-diverse", "(k, ℓ)-anonymous"): a refusal
        before running says "the table cannot be made <guarantee>"."""
        ...

    @property
    def tables(self) -> tuple[str, ...]:
        """Published tables besides ``release_manifest`` (the release contract, README)."""
        ...

    @property
    def candidate_tables(self) -> tuple[str, ...]:
        """Candidate tables its build returns and its gates read (a superset of ``tables``)."""
        ...

    @property
    def candidate_inputs(self) -> tuple[str, ...]:
        """PRIVATE warehouse tables :meth:`build` reads (``raw_records`` and the model's own stage tables)."""
        ...

    @property
    def publish_inputs(self) -> tuple[str, ...]:
        """PRIVATE warehouse tables the publish step reads besides ``raw_records``, ``input_summary`` and the row map."""
        ...

    @property
    def table_assets(self) -> Mapping[str, str]:
        """Warehouse table name (as :meth:`build`, the publish step and the gates read it) -> the asset of this
        model's job that holds it, for tables kept under another name; a table not listed is the asset of its name."""
        ...

    @property
    def stage_groups(self) -> tuple[str, ...]:
        """Asset groups its job runs before the candidate (``ingest`` first)."""
        ...

    @property
    def candidate_asset(self) -> str:
        """The candidate asset (one row of sizes) its gates are attached to."""
        ...

    @property
    def row_map_asset(self) -> str:
        """The private row-map asset (release row id -> input row id) of its job."""
        ...

    @property
    def publish_asset(self) -> str:
        """The publish asset's key."""
        ...

    @property
    def publish_step(self) -> str:
        """The publish asset's step (op) name."""
        ...

    @property
    def gates(self) -> tuple[str, ...]:
        """Names of the gate checks its job runs (``checks/gates.py``), in the order of the manifest."""
        ...

    @property
    def not_applicable(self) -> Mapping[str, str]:
        """Gates that run in its job but do not apply to it: gate name -> the reason shown in the manifest."""
        ...

    @property
    def audited(self) -> bool:
        """Whether its job ends with the audit of the release its run published (``audit/<publish_asset>_disclosure``)."""
        ...

    @property
    def source(self) -> str:
        """The paper and SPEC sections it implements."""
        ...

    @property
    def docs(self) -> str:
        """Its page under ``docs/``."""
        ...

    def parameters(self, settings: Any) -> ParametersT:
        """Its typed parameters, from the run's settings (any object with the settings' attributes).

        Raises
        ------
        ValueError
            Inconsistent values (e.g. ``k < ell`` for the (k, ℓ) model); the message says what to change.
        """
        ...

    def check_input(self, settings: Any, records: pd.DataFrame) -> None:
        """Checks of the input its job would fail on, run by ``msa-release run`` before anything starts (after the
        input was read and validated; ``records``: the quasi-identifier and sensitive attribute columns as
        :func:`pipeline.io.loading.load_records` returns them). Does nothing when it needs nothing more.

        Raises
        ------
        pipeline.errors.MsaReleaseError
            A subclass with exit status 2 naming the file and what to do (e.g. the (k, ℓ) model's
            ``HierarchyError``: a hierarchy that does not cover a value of the data).
        """
        ...

    def build(self, inputs: Frames, parameters: ParametersT, *, secret: bytes | None) -> CandidateRelease:
        """The candidate release from the tables named in ``candidate_inputs`` (pure functions of the core)."""
        ...

    def verdict(self, gates: Sequence[GateOutcome], parameters: ParametersT) -> GateVerdict:
        """Whether this run's gate outcomes let the release be published."""
        ...

    def candidate_sets(
        self, frames: Frames, row_map: pd.DataFrame, sensitive_attributes: Sequence[str]
    ) -> Mapping[str, pd.Series]:
        """Every released record's candidate set per sensitive attribute (the release-series check), from its
        candidate tables (``frames``) or from a published release's (:meth:`read_published`)."""
        ...

    def read_published(self, directory: Path) -> Frames:
        """The contract tables of a release of this model published in ``directory``, as :meth:`candidate_sets`
        takes them (the release-series check compares a new release with earlier ones from their files).

        Raises
        ------
        OSError, ValueError
            A file missing or unreadable.
        """
        ...

    def published_tables(self, frames: Frames, parameters: ParametersT) -> dict[str, pd.DataFrame]:
        """The candidate tables in the form they are published (the contract's columns are selected later)."""
        ...

    def manifest_section(self, frames: Frames, parameters: ParametersT, verdict: GateVerdict, settings: Any) -> dict[str, Any]:
        """The model's keys of ``manifest.json`` (:class:`pipeline.release.manifest.Manifest`)."""
        ...

    def report_data(
        self, frames: Frames, manifest: Mapping[str, Any], parameters: ParametersT, *, release_path: Path
    ) -> dict[str, Any]:
        """``report.json`` of the release (aggregate figures only)."""
        ...

    def publish_figures(self, frames: Frames, manifest: Mapping[str, Any], report_data: Mapping[str, Any]) -> dict[str, Any]:
        """Numeric figures of the publish asset's metadata, stable names (the Dagster UI charts them)."""
        ...

    def report_parameters(self, manifest: Mapping[str, Any]) -> list[tuple[str, Any]]:
        """Its rows of report.html's parameter table (after model and ℓ; before the columns and the input)."""
        ...

    def report_accounting(self, manifest: Mapping[str, Any]) -> tuple[list[tuple[str, int]], str, list[tuple[str, int]]]:
        """report.html's record accounting: where the kept records went (label, count; they must add up to the
        kept records), the equation that says so, and further rows (label, count) shown after them."""
        ...

    def report_sections(
        self, manifest: Mapping[str, Any], data: Mapping[str, Any] | None, baseline: Mapping[str, Any] | None
    ) -> list[str]:
        """Its HTML sections of report.html after the parameters, the accounting and the gates (from the manifest,
        ``report.json`` as ``data`` when there is one, and the release of :attr:`compared_with`, if found)."""
        ...

    def report_data_from_files(self, directory: Path, manifest: Mapping[str, Any]) -> dict[str, Any] | None:
        """``report.json``'s content rebuilt from a published release's own files when it has none (``msa-release
        report`` on an older release), or None when the files alone cannot give it."""
        ...

    def series_configuration(self, parameters: ParametersT) -> dict[str, Any]:
        """What the release registry compares (``pipeline.core.series.CONFIGURATION_KEYS``)."""
        ...

    def summary(self, manifest: Mapping[str, Any], path: Path, elapsed: float) -> str:
        """One screen of text about a published release (``msa-release run``)."""
        ...

    def table_schemas(self, quasi_identifiers: Sequence[str], sensitive_attributes: Sequence[str]) -> dict[str, dict[str, str]]:
        """Column -> DuckDB type of every published table (the release contract; ``release_manifest`` is added)."""
        ...


def _percent(share: float) -> str:
    return f"{100 * share:.1f} %"


def utility_lines(manifest: Mapping[str, Any]) -> list[str]:
    """The summary's lines about what the release loses and which settings weaken a default (issue 15): deleted
    records out of the eligible ones, the suppressed share of every sensitive attribute's cells, each against its
    threshold, then one ``override`` line per entry of the manifest's ``overrides``. Nothing when the manifest has
    neither (a release made before the utility gate)."""
    lines = []
    utility = manifest.get("utility")
    if utility:
        lines.append(
            f"  utility        deleted {utility['records_deleted']} of {utility['records_eligible']} eligible records "
            f"({_percent(utility['deleted_share'])}; limit {_percent(utility['max_deleted_share'])})"
        )
        suppressed = utility["suppressed_share"]
        order = [a for a in manifest.get("sensitive_attributes") or [] if a in suppressed]
        shares = ", ".join(f"{a} {_percent(suppressed[a])}" for a in [*order, *(a for a in suppressed if a not in order)])
        lines.append(
            f"                 suppressed cells per attribute: {shares} (limit {_percent(utility['max_suppressed_share'])})"
        )
    for override in manifest.get("overrides") or []:
        lines.append(
            f"  override       {override['setting']} = {override['value']} (default {override['default']}): {override['effect']}"
        )
    return lines


def runs_strong_rule_adversary(model: PublicationModel[Any]) -> bool:
    """Whether ``model``'s candidate step runs the strong-rule adversary (SPEC §10) once, for its disclosure gate and
    the audit of the release its run publishes (issue 13: the adversary runs once per run)."""
    return DISCLOSURE_GATE in model.gates or model.audited


def adversary_asset(model: PublicationModel[Any]) -> str:
    """The private asset holding the adversary's one pass over ``model``'s candidate
    (:func:`pipeline.core.adversary.candidate_adversary`): ``<candidate_asset>_adversary``."""
    return f"{model.candidate_asset}_adversary"
