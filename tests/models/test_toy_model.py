"""A fourth publication model written as a plug-in, defined only here (issue 13, docs/adding-a-model.md).

The toy model publishes the sensitive attributes alone (every quasi-identifier left out), one row per record, rows in
the keyed content order of :func:`pipeline.core.mixed_model.keyed_table_order`. It is a teaching example, not a
privacy model: it registers, gets its generated ``toy_release`` job (candidate asset, gate, publish asset), runs
through it, passes or fails its gate and publishes."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dagster as dg
import numpy as np
import pandas as pd
import pytest

from checks import suites
from checks.gates import GATE_CHECKS, register_gate
from checks.gx_runner import validate_frame
from pipeline.asset_keys import CANDIDATE, inputs
from pipeline.core import verification
from pipeline.core.class_attacks import class_candidate_sets
from pipeline.core.mixed_model import keyed_table_order
from pipeline.models import PUBLICATION_MODELS, CandidateRelease, GateVerdict, register, unregister
from pipeline.models.base import gate_status_verdict
from pipeline.release.publish import read_latest
from tests.jobs import run_job

pytestmark = pytest.mark.e2e  # runs a Dagster job (make test runs it; make test-fast leaves it out)


@dataclass(frozen=True)
class ToyParameters:
    """The toy's typed parameters: its columns and ℓ (recorded, not used)."""

    quasi_identifiers: tuple[str, ...]
    sensitive_attributes: tuple[str, ...]
    ell: int


@dataclass(frozen=True)
class ToyModel:
    """A plug-in of :class:`pipeline.models.base.PublicationModel`: every part of the protocol, nothing more."""

    name: str = "toy"
    job: str = "toy_release"
    settings_fields: tuple[str, ...] = ()  # it reads the common settings only (columns, ℓ)
    tables: tuple[str, ...] = ("toy_released",)
    candidate_tables: tuple[str, ...] = ("toy_released",)
    candidate_inputs: tuple[str, ...] = ("raw_records",)
    publish_inputs: tuple[str, ...] = ()
    table_assets: Mapping[str, str] = field(default_factory=dict)
    stage_groups: tuple[str, ...] = ("ingest",)
    candidate_asset: str = "toy_release_candidate"
    row_map_asset: str = "toy_release_row_map"
    publish_asset: str = "toy_release"
    publish_step: str = "publish_toy_release"
    gates: tuple[str, ...] = ("toy_records_accounted_for",)
    not_applicable: Mapping[str, str] = field(default_factory=dict)
    audited: bool = False
    source: str = "tests/models/test_toy_model.py (teaching example)"
    docs: str = "docs/adding-a-model.md"
    guarantee: str = "toy-released"
    label: str = "toy (teaching example)"
    compared_with: str | None = None
    baseline: bool = False
    drop_one_record: bool = False  # a broken build, for the failing-gate test

    def parameters(self, settings: Any) -> ToyParameters:
        return ToyParameters(tuple(settings.quasi_identifiers), tuple(settings.sensitive_attributes), int(settings.ell))

    def report_parameters(self, manifest) -> list[tuple[str, Any]]:
        return []

    def report_accounting(self, manifest) -> tuple[list[tuple[str, int]], str, list[tuple[str, int]]]:
        return [("released", manifest.get("n_released") or 0)], "n_input − n_dropped_missing = n_released", []

    def report_sections(self, manifest, data, baseline) -> list[str]:
        return [f"<h2>Toy</h2><p>{int(manifest.get('n_released') or 0)} records released as they are.</p>"]

    def report_data_from_files(self, directory: Path, manifest) -> dict[str, Any] | None:
        return None

    def check_input(self, settings: Any, records: pd.DataFrame) -> None:
        """Nothing to check beyond the input's own checks."""

    def build(self, inputs: Mapping[str, pd.DataFrame], parameters: ToyParameters, *, secret: bytes | None) -> CandidateRelease:
        records = inputs["raw_records"]
        content = [*parameters.quasi_identifiers, *parameters.sensitive_attributes]
        order = keyed_table_order(records, content, secret) if secret is not None else np.arange(len(records))
        if self.drop_one_record:
            order = order[1:]
        chosen = records.iloc[order]
        released = pd.DataFrame(
            {"row_id": np.arange(1, len(chosen) + 1, dtype=np.int64)}
            | {a: chosen[a].astype(str).to_numpy() for a in parameters.sensitive_attributes}
        )
        row_map = pd.DataFrame({"row_id": released["row_id"], "source_row_id": chosen["row_id"].to_numpy(np.int64)})
        return CandidateRelease({"toy_released": released}, row_map, {"n_rows_toy_released": len(released)}, len(released))

    def verdict(self, gates: Sequence[Mapping[str, Any]], parameters: ToyParameters) -> GateVerdict:
        return gate_status_verdict(gates, refuse=lambda status: status != "passed")

    def candidate_sets(self, frames, row_map: pd.DataFrame, sensitive_attributes: Sequence[str]):
        return class_candidate_sets(
            frames["toy_released"].assign(cluster_id=frames["toy_released"]["row_id"]), row_map, list(sensitive_attributes)
        )

    def read_published(self, directory: Path) -> dict[str, pd.DataFrame]:
        return {"toy_released": pd.read_parquet(directory / "toy_released.parquet")}

    def published_tables(self, frames, parameters: ToyParameters) -> dict[str, pd.DataFrame]:
        return {"toy_released": frames["toy_released"]}

    def manifest_section(self, frames, parameters: ToyParameters, verdict: GateVerdict, settings: Any) -> dict[str, Any]:
        return {"n_released": len(frames["toy_released"])}

    def report_data(self, frames, manifest, parameters: ToyParameters, *, release_path: Path) -> dict[str, Any]:
        return {"model": self.name}

    def publish_figures(self, frames, manifest, report_data) -> dict[str, Any]:
        return {"n_released": manifest["n_released"]}

    def series_configuration(self, parameters: ToyParameters) -> dict[str, Any]:
        return {
            "model": self.name,
            "ell": parameters.ell,
            "quasi_identifiers": list(parameters.quasi_identifiers),
            "sensitive_attributes": list(parameters.sensitive_attributes),
        }

    def summary(self, manifest, path: Path, elapsed: float) -> str:
        return f"Published toy release {manifest['release_id']} ({manifest['n_released']} rows) at {path}"

    def table_schemas(self, quasi_identifiers: Sequence[str], sensitive_attributes: Sequence[str]) -> dict[str, dict[str, str]]:
        return {"toy_released": {"row_id": "BIGINT", **{a: "VARCHAR" for a in sensitive_attributes}}}


@dg.asset_check(
    asset=dg.AssetKey([CANDIDATE, "toy_release_candidate"]),
    blocking=True,
    additional_ins=inputs(private=["raw_records", "toy_release_row_map", "input_summary"], candidate=["toy_released"]),
    description="Toy gate: every input record is released exactly once.",
)
def toy_records_accounted_for(
    toy_released: pd.DataFrame, raw_records: pd.DataFrame, toy_release_row_map: pd.DataFrame, input_summary: pd.DataFrame
) -> dg.AssetCheckResult:
    to_source = toy_release_row_map.set_index("row_id")["source_row_id"]
    summary = verification.kl_accounting_summary(
        raw_records["row_id"],
        released_row_ids=to_source.reindex(toy_released["row_id"]).fillna(-1).astype("int64"),
        suppressed_row_ids=[],
    )
    outcome = validate_frame(summary, suites.kl_accounting_suite())
    return dg.AssetCheckResult(
        passed=outcome.success, metadata={"n_records_not_exactly_once": int((summary["n_places"] != 1).sum())}
    )


@pytest.fixture
def toy(request):
    """The toy registered (with its gate) for one test, then removed."""
    model = ToyModel(drop_one_record=getattr(request, "param", False))
    register(model)
    register_gate(toy_records_accounted_for)
    yield model
    unregister(model.name)
    GATE_CHECKS.pop("toy_records_accounted_for")


@pytest.fixture
def table(tmp_path) -> Path:
    rng = np.random.default_rng(0)
    frame = pd.DataFrame(
        {
            "sex": rng.choice(["F", "M"], 40),
            "education": rng.choice(["HS", "BSc", "MSc", "PhD"], 40),
            "occupation": rng.choice(["a", "b", "c"], 40),
        }
    )
    path = tmp_path / "toy.csv"
    frame.to_csv(path, index=False)
    return path


def _settings(path: Path) -> dict:
    return {
        "input_path": str(path),
        "csv_header": True,
        "column_names": [],
        "quasi_identifiers": ["sex"],
        "sensitive_attributes": ["education", "occupation"],
        "ell": 2,
    }


def test_a_registered_plug_in_gets_its_generated_job_and_publishes(toy, table, tmp_path):
    home = tmp_path / "home"
    result = run_job(home, "toy_release", _settings(table))
    assert result.success
    (evaluation,) = result.get_asset_check_evaluations()
    assert evaluation.check_name == "toy_records_accounted_for" and evaluation.passed
    release = read_latest(home / "releases")
    manifest = json.loads((release / "manifest.json").read_text())
    assert manifest["model"] == "toy" and manifest["n_released"] == 40 and manifest["n_input"] == 40
    assert [c["name"] for c in manifest["checks"]] == ["toy_records_accounted_for"]
    published = pd.read_parquet(release / "toy_released.parquet")
    assert list(published.columns) == ["row_id", "education", "occupation"]  # no quasi-identifier
    assert sorted(published["education"]) == sorted(pd.read_csv(table)["education"])
    assert toy.summary(manifest, release, 0.0).startswith("Published toy release")
    page = (release / "report.html").read_text()  # its own page: label, accounting and section from the plug-in
    assert "toy (teaching example)" in page and "<h2>Toy</h2><p>40 records released as they are.</p>" in page
    assert "n_input − n_dropped_missing = n_released" in page


@pytest.mark.parametrize("toy", [True], indirect=True)
def test_the_plug_in_s_failing_gate_blocks_its_publish(toy, table, tmp_path):
    home = tmp_path / "home"
    result = run_job(home, "toy_release", _settings(table))
    assert not result.success
    (evaluation,) = result.get_asset_check_evaluations()
    assert not evaluation.passed and evaluation.metadata["n_records_not_exactly_once"].value == 1
    assert dg.AssetKey("toy_release") not in {e.asset_key for e in result.get_asset_materialization_events()}
    assert read_latest(home / "releases") is None


def test_the_registry_refuses_a_second_model_of_the_same_name_and_forgets_the_toy(toy):
    with pytest.raises(ValueError, match="already registered"):
        register(ToyModel())
    with pytest.raises(ValueError, match="does not implement"):
        register(object())  # type: ignore[arg-type]
    assert "toy" in PUBLICATION_MODELS


def test_the_plug_in_s_job_takes_the_common_settings_only(toy, tmp_path):
    """Its run config schema comes from its ``settings_fields`` (none) and the common settings: ``seed`` (the
    mixed model's) is refused before a run, naming the jobs that take it."""
    from pipeline.definitions import build_definitions
    from pipeline.models import COMMON_SETTINGS

    job = build_definitions(tmp_path / "home").resolve_job_def("toy_release")
    settings = job.run_config_schema.config_type.fields["resources"].config_type.fields["settings"]
    assert set(settings.config_type.fields["config"].config_type.fields) == {*COMMON_SETTINGS, "model"}
    with pytest.raises(dg.DagsterInvalidConfigError, match=r"seed: a setting of model mixed \(job release\)"):
        dg.validate_run_config(job, {"resources": {"settings": {"config": {"seed": 1}}}})
    assert dg.validate_run_config(job, {"resources": {"settings": {"config": {"ell": 2}}}})
    assert not (tmp_path / "home").exists()
