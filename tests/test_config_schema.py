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
    with pytest.raises(KeyError, match="unknown model"):
        job_of_model("foo")
