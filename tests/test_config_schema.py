"""Issue 13: the Dagster config schema itself refuses unknown choices, so the launchpad shows the error before a
run starts (instead of "No errors" and a failed run)."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from pipeline.definitions import build_definitions


@pytest.mark.parametrize(
    "key,bad,good",
    [
        ("model", "foo", "rating"),
        ("grouping", "qi-aware", "p1"),
        ("residual_policy", "drop", "suppress"),
        ("posterior_gate", "ignore", "warn"),
        ("kl_method", "fast", "greedy"),
    ],
)
def test_unknown_choices_are_config_errors_before_launch(tmp_path, key, bad, good):
    job = build_definitions(tmp_path / "home").resolve_job_def("release")
    with pytest.raises(dg.DagsterInvalidConfigError, match=key):
        dg.validate_run_config(job, {"resources": {"settings": {"config": {key: bad}}}})
    assert dg.validate_run_config(job, {"resources": {"settings": {"config": {key: good}}}})
    assert not (tmp_path / "home").exists()  # validating a config creates nothing


def test_the_model_registry_matches_the_settings_and_the_code_location(tmp_path):
    from pipeline.models import PUBLICATION_MODELS, job_of_model
    from pipeline.settings import Model

    assert set(PUBLICATION_MODELS) == {m.value for m in Model}
    definitions = build_definitions(tmp_path / "home")
    for name, model in PUBLICATION_MODELS.items():
        assert definitions.resolve_job_def(model.job).name == job_of_model(name)
        assert (Path(__file__).resolve().parents[1] / model.docs).is_file()
    assert job_of_model("kl") == "kl_release" and job_of_model(None) == "release"
    assert job_of_model("rating") == "rating_release"  # Rating has its own asset chain (issue 13)
    with pytest.raises(KeyError, match="unknown model"):
        job_of_model("foo")


def test_what_the_dagster_config_schema_can_express():
    """Issue 13, item 3, checked on the real ``release`` job (Dagster 1.13; docs/adding-a-model.md, "Run config"):
    the schema holds enums (``model: foo`` is refused before launch), but not pydantic's numeric bounds: ``ell: 1``
    and ``min_confidence: 1.5`` pass the launchpad's schema and are refused when the run starts (the resource's
    pydantic validation; ``msa-release run`` checks the same before running anything)."""
    from pydantic import ValidationError

    from pipeline.resources import ReleaseSettings

    job = build_definitions(Path("/nonexistent-home")).resolve_job_def("release")
    with pytest.raises(dg.DagsterInvalidConfigError, match="model"):
        dg.validate_run_config(job, {"resources": {"settings": {"config": {"model": "foo"}}}})
    for key, value in (("ell", 1), ("min_confidence", 1.5)):
        assert dg.validate_run_config(job, {"resources": {"settings": {"config": {key: value}}}})  # schema: no bound
        with pytest.raises(ValidationError, match=key):  # refused at run start
            ReleaseSettings(**{key: value})


def test_every_publishing_job_is_generated_from_the_registry(tmp_path):
    """Issue 13: each job, its publish asset and its gates come from the plug-ins (pipeline/models)."""
    from pipeline.models import jobs

    definitions = build_definitions(tmp_path / "home")
    graph = definitions.resolve_asset_graph()
    for job_name, models in jobs().items():
        job = definitions.resolve_job_def(job_name)
        owner = models[0]
        assert dg.AssetKey(owner.publish_asset) in graph.get_all_asset_keys()
        checks = {key.name for key in job.asset_layer.asset_graph.asset_check_keys}
        assert checks == {gate for model in models for gate in model.gates}, job_name


@pytest.mark.parametrize(("model", "job"), [(None, "release"), ("rating", "rating_release"), ("kl", "kl_release")])
def test_the_inbox_sensor_routes_each_model_to_its_own_job(tmp_path, model, job):
    """Issue 13: an inbox file runs the job of its ``model`` setting (the registry's ``job_of_model``)."""
    from pipeline.jobs import inbox_run_request

    path = tmp_path / "in.csv"
    path.write_text("q,a,b\n1,x,y\n")
    settings = {"quasi_identifiers": ["q"], "sensitive_attributes": ["a", "b"], **({"model": model} if model else {})}
    request = inbox_run_request(path, settings, sha256="0" * 64)
    assert request.job_name == job
