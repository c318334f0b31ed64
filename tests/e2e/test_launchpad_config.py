"""Issue 13: what the Dagster UI does with a publishing job's run config, through the webserver's own GraphQL layer
and a real code server (as ``make ui`` runs them): the editor's live check (``isPipelineConfigValid``, the schema
snapshot only) and the Launch button (``launchPipelineExecution``, which builds the execution plan in the code server
and so runs the job's config mapping). docs/adding-a-model.md, "Run config"."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

pytestmark = pytest.mark.e2e  # starts a code server (about 10 s)

DEFINITIONS = Path(__file__).resolve().parents[2] / "pipeline" / "definitions.py"

LIVE_CHECK = """
query LiveCheck($selector: PipelineSelector!, $runConfigData: RunConfigData) {
  isPipelineConfigValid(pipeline: $selector, runConfigData: $runConfigData, mode: "default") {
    __typename
    ... on RunConfigValidationInvalid { errors { message } }
  }
}"""


@pytest.fixture(scope="module")
def webserver(tmp_path_factory):
    """A GraphQL context over a code server of ``pipeline/definitions.py`` and a throw-away instance."""
    from dagster_graphql.test.utils import define_out_of_process_context

    home = tmp_path_factory.mktemp("launchpad") / "home"
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MSA_RELEASE_HOME", str(home))
        with dg.instance_for_test() as instance:
            with define_out_of_process_context(str(DEFINITIONS), "defs", instance) as context:
                yield context, instance, home


def _live_and_launch(webserver, job: str, settings: dict) -> tuple[str, str, str]:
    """(the live check's verdict, Launch's verdict, Launch's message)."""
    from dagster_graphql.client.query import LAUNCH_PIPELINE_EXECUTION_MUTATION
    from dagster_graphql.test.utils import execute_dagster_graphql, infer_job_selector

    context, _, _ = webserver
    selector = infer_job_selector(context, job)
    config = {"resources": {"settings": {"config": settings}}}
    live = execute_dagster_graphql(context, LIVE_CHECK, {"selector": selector, "runConfigData": config})
    launched = execute_dagster_graphql(
        context, LAUNCH_PIPELINE_EXECUTION_MUTATION, {"executionParams": {"selector": selector, "runConfigData": config}}
    ).data["launchPipelineExecution"]
    message = str(launched.get("message") or launched.get("errors") or "")
    return live.data["isPipelineConfigValid"]["__typename"], launched["__typename"], message


@pytest.mark.parametrize(
    ("job", "settings", "expected"),
    [
        ("release", {"ell": 1}, "ell: Input should be greater than or equal to 2 (allowed: 2 <= ell <= 1000)"),
        ("release", {"min_confidence": 1.5}, "min_confidence: Input should be less than or equal to 1"),
        ("kl_release", {"k": 2, "ell": 3}, "needs k >= ell"),
    ],
)
def test_a_value_out_of_range_shows_no_error_as_you_type_and_is_refused_at_launch(webserver, job, settings, expected):
    live, launch, message = _live_and_launch(webserver, job, settings)
    assert live == "PipelineConfigValidationValid"  # Dagster's schema has no ranges: "No errors" in the editor
    assert launch == "PythonError" and expected in message  # the Launch button's error dialog
    _, instance, home = webserver
    assert instance.get_runs() == [] and not home.exists()  # no run recorded, nothing created


@pytest.mark.parametrize(("job", "setting"), [("release", {"k": 5}), ("kl_release", {"seed": 1}), ("release", {"model": "kl"})])
def test_another_model_s_setting_is_flagged_as_you_type(webserver, job, setting):
    live, launch, message = _live_and_launch(webserver, job, setting)
    assert live == launch == "RunConfigValidationInvalid"
    assert next(iter(setting)) in message
    assert webserver[1].get_runs() == []


def test_a_good_config_passes_the_live_check(webserver):
    from dagster_graphql.test.utils import execute_dagster_graphql, infer_job_selector

    context, _, _ = webserver
    for job, settings in (("release", {"ell": 4, "seed": 1}), ("kl_release", {"k": 5, "ell": 3, "kl_method": "greedy"})):
        config = {"resources": {"settings": {"config": settings}}}
        live = execute_dagster_graphql(
            context, LIVE_CHECK, {"selector": infer_job_selector(context, job), "runConfigData": config}
        )
        assert live.data["isPipelineConfigValid"]["__typename"] == "PipelineConfigValidationValid", job
