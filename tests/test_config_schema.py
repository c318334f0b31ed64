"""Issue 13: each publishing job's run config takes the settings of its model only, and refuses unknown choices,
out-of-range values, inconsistent values (k < ℓ) and another model's settings before a run exists (instead of "No
errors" and a failed run); docs/adding-a-model.md, "Run config"."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from pipeline.definitions import build_definitions

#: Issue 16's per-attribute ℓ on Adult's sensitive attributes.
ELL_PER_ATTRIBUTE = {"education": 4, "occupation": 3, "age": 2, "relationship": 2}


@pytest.mark.parametrize(
    "job_name,key,bad,good",
    [
        ("release", "model", "foo", "mixed"),
        ("rating_release", "model", "foo", "rating"),
        ("release", "grouping", "qi-aware", "p1"),
        ("release", "residual_policy", "drop", "suppress"),
        ("release", "posterior_gate", "ignore", "warn"),
        ("kl_release", "kl_method", "fast", "greedy"),
    ],
)
def test_unknown_choices_are_config_errors_before_launch(tmp_path, job_name, key, bad, good):
    job = build_definitions(tmp_path / "home").resolve_job_def(job_name)
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


def _settings_schema(job: dg.JobDefinition) -> set[str]:
    """The settings the job's run config schema (what the launchpad shows) takes."""
    resources = job.run_config_schema.config_type.fields["resources"].config_type
    return set(resources.fields["settings"].config_type.fields["config"].config_type.fields)


def _run_config(**settings) -> dict:
    return {"resources": {"settings": {"config": settings}}}


def test_each_publishing_job_s_schema_holds_the_settings_of_its_model_only(tmp_path):
    """Issue 13: the launchpad of ``release`` shows no (k, ℓ) setting, that of ``kl_release`` no setting of SAC~,
    Rating or strong rules; ``hierarchies_dir`` serves both (qi_aware generalization; the (k, ℓ) hierarchies)."""
    definitions = build_definitions(tmp_path / "home")
    for job_name in ("release", "rating_release"):
        release = _settings_schema(definitions.resolve_job_def(job_name))
        assert not release & {"k", "kl_method", "max_block_size", "generalization_weights"}, job_name
        assert {"ell", "min_confidence", "seed", "grouping", "posterior_gate", "hierarchies_dir", "model"} <= release
    kl = _settings_schema(definitions.resolve_job_def("kl_release"))
    assert not kl & {"seed", "min_confidence", "min_support", "grouping", "randomness", "allow_disclosure", "mining_backend"}
    assert {"ell", "k", "kl_method", "max_block_size", "generalization_weights", "hierarchies_dir", "model"} <= kl
    assert not (tmp_path / "home").exists()


@pytest.mark.parametrize(
    ("job_name", "settings", "expected"),
    [
        ("release", {"ell": 1}, r"ell: Input should be greater than or equal to 2 \(allowed: 2 <= ell <= 1000\)"),
        ("release", {"ell": 1001}, r"ell: .*less than or equal to 1000"),
        ("release", {"min_confidence": 1.5}, r"min_confidence: .*\(allowed: 0.0 < min_confidence <= 1.0\)"),
        ("release", {"min_confidence": 0.0}, r"min_confidence: Input should be greater than 0"),
        ("rating_release", {"stratum_deletion_budget": 2.0}, r"stratum_deletion_budget: .*less than or equal to 1"),
        ("release", {"delimiter": ";;"}, r"delimiter must be one character"),
        ("release", {"quasi_identifiers": ["a"], "sensitive_attributes": ["a", "b"]}, r"both quasi-identifier and sensitive"),
        ("kl_release", {"k": 2, "ell": 3}, r"needs k >= ell.*got k=2, ell=3"),
        ("kl_release", {"k": 1}, r"k: Input should be greater than or equal to 2"),
        ("kl_release", {"k": 200, "max_block_size": 256}, r"max_block_size=256 must be at least 2k=400"),
        ("kl_release", {"generalization_weights": {"education": 2.0}}, r"not quasi-identifiers"),
        # issue 16: ℓ_i per sensitive attribute, every one of them, >= 2; not for the (k, ℓ) model
        ("release", {"ell_per_attribute": {"education": 4}}, r"`ell_per_attribute` gives no ℓ for sensitive attribute"),
        ("rating_release", {"ell_per_attribute": {**ELL_PER_ATTRIBUTE, "sex": 2}}, r"\['sex'\], which is not a sensitive"),
        ("release", {"ell_per_attribute": {**ELL_PER_ATTRIBUTE, "age": 1}}, r"the ℓ of \['age'\] must be an integer"),
        ("kl_release", {"ell_per_attribute": ELL_PER_ATTRIBUTE}, r"one ℓ for the whole sensitive tuple"),
    ],
)
def test_bad_values_are_config_errors_naming_the_setting_before_a_run_exists(tmp_path, job_name, settings, expected):
    """Issue 13: ``ell: 1``, ``min_confidence: 1.5``, k < ℓ are refused by the job's config mapping, i.e. whenever
    Dagster resolves the run config (``validate_run_config``, a launch), not when the run starts."""
    job = build_definitions(tmp_path / "home").resolve_job_def(job_name)
    with pytest.raises(dg.DagsterInvalidConfigError, match=expected):
        dg.validate_run_config(job, _run_config(**settings))
    assert not (tmp_path / "home").exists()  # validating a config creates nothing


@pytest.mark.parametrize(
    ("job_name", "settings", "expected"),
    [
        ("release", {"k": 5}, r"k: a setting of model kl \(job kl_release\), not of model mixed \(job release\)"),
        ("release", {"kl_method": "greedy"}, r"kl_method: a setting of model kl \(job kl_release\)"),
        ("rating_release", {"max_block_size": 8}, r"max_block_size: a setting of model kl \(job kl_release\)"),
        ("kl_release", {"seed": 1}, r"seed: a setting of model mixed \(job release\), rating \(job rating_release\)"),
        ("kl_release", {"min_confidence": 0.5}, r"min_confidence: a setting of model mixed"),
        ("kl_release", {"colour": "red"}, r"colour: not a setting of any publication model"),
        ("release", {"model": "kl"}, r"model: kl is published by job kl_release, not by release"),
        ("kl_release", {"model": "foo"}, r"model"),
    ],
)
def test_a_setting_of_another_model_is_a_config_error_naming_its_model_and_job(tmp_path, job_name, settings, expected):
    job = build_definitions(tmp_path / "home").resolve_job_def(job_name)
    with pytest.raises(dg.DagsterInvalidConfigError, match=expected):
        dg.validate_run_config(job, _run_config(**settings))


@pytest.mark.parametrize(
    ("job_name", "settings", "model"),
    [
        ("release", {}, "mixed"),
        ("release", {"ell": 2, "min_confidence": 1.0, "seed": 7, "model": "mixed", "hierarchies_dir": "h"}, "mixed"),
        ("rating_release", {"allow_disclosure": True, "grouping": "p1"}, "rating"),
        ("kl_release", {"k": 5, "ell": 5, "kl_method": "greedy", "posterior_slack": 0.1}, "kl"),
        ("kl_release", {"model": "kl", "generalization_weights": {"sex": 2.0}}, "kl"),
        ("release", {"ell_per_attribute": ELL_PER_ATTRIBUTE}, "mixed"),
        ("rating_release", {"ell_per_attribute": ELL_PER_ATTRIBUTE}, "rating"),
    ],
)
def test_good_values_pass_and_the_job_sets_its_model(tmp_path, job_name, settings, model):
    job = build_definitions(tmp_path / "home").resolve_job_def(job_name)
    resolved = dg.validate_run_config(job, _run_config(**settings))
    applied = resolved["resources"]["settings"]["config"]
    assert applied["model"] == model
    assert all(applied[key] == value for key, value in settings.items())
    assert not (tmp_path / "home").exists()


def test_other_resources_loggers_and_execution_still_pass_through(tmp_path):
    """What callers put beside the settings today (tests/e2e/test_release_safety.py: the io_manager's config;
    pipeline/privacy_report.py and the CLI: the console logger's level) is still accepted, and still checked
    against the job's own schema."""
    job = build_definitions(tmp_path / "home").resolve_job_def("release")
    config = {
        **_run_config(ell=4),
        "loggers": {"console": {"config": {"log_level": "CRITICAL"}}},
        "execution": {"config": {}},
    }
    config["resources"]["io_manager"] = {"config": {"database": str(tmp_path / "elsewhere.duckdb")}}
    resolved = dg.validate_run_config(job, config)
    assert resolved["resources"]["io_manager"]["config"]["database"] == str(tmp_path / "elsewhere.duckdb")
    assert resolved["loggers"]["console"]["config"]["log_level"] == "CRITICAL"
    with pytest.raises(dg.DagsterInvalidConfigError, match="io_manager"):
        dg.validate_run_config(job, {"resources": {"io_manager": {"config": {"no_such_key": 1}}}})


def test_launching_a_bad_config_on_an_instance_creates_no_run(tmp_path):
    """The launch path: ``DagsterInstance.create_run_for_job`` builds the execution plan (and so runs the config
    mapping) before it records a run, as the launchpad's Launch button does through the code server."""
    (tmp_path / "dagster").mkdir()
    with dg.instance_for_test(temp_dir=str(tmp_path / "dagster")) as instance:
        job = build_definitions(tmp_path / "home").resolve_job_def("kl_release")
        for settings in ({"k": 2, "ell": 3}, {"ell": 1}, {"seed": 3}):
            with pytest.raises(dg.DagsterInvalidConfigError):
                instance.create_run_for_job(job_def=job, run_config=_run_config(**settings))
        assert instance.get_runs() == []
        run = instance.create_run_for_job(job_def=job, run_config=_run_config(k=4, ell=3))  # a good one is recorded
        assert [r.run_id for r in instance.get_runs()] == [run.run_id]
    assert not (tmp_path / "home").exists()


def test_what_the_live_launchpad_checks(tmp_path):
    """The webserver checks a config as you type against the job's schema snapshot only
    (dagster_graphql/implementation/run_config_schema.py: ``validate_config_from_snap``), which has no ranges:
    it flags another model's setting, an unknown choice or a wrong type, but shows "No errors" for ``ell: 1``,
    which is refused when Launch builds the execution plan (the test above). docs/adding-a-model.md says so."""
    from dagster._config import validate_config_from_snap

    job = build_definitions(tmp_path / "home").resolve_job_def("release")
    snapshot = job.get_job_snapshot()
    root = snapshot.mode_def_snaps[0].root_config_key
    assert root is not None

    def live(**settings) -> bool:
        return validate_config_from_snap(snapshot.config_schema_snapshot, root, _run_config(**settings)).success

    assert not live(k=5) and not live(model="kl") and not live(grouping="qi-aware") and not live(ell="three")
    assert live(ell=4) and live(ell=1)  # the range is not in the schema: refused at Launch, not as you type


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


@pytest.mark.parametrize(
    ("chosen", "job"),
    [
        ({}, "sharded_release"),
        ({"model": "mixed"}, "sharded_release"),
        ({"engine": "local"}, "sharded_release"),
        ({"engine": "memory"}, "release"),
        ({"model": "rating"}, "rating_release"),
        ({"model": "kl"}, "kl_release"),
    ],
)
def test_the_inbox_sensor_routes_each_model_to_its_own_job(tmp_path, chosen, job):
    """Issue 13: an inbox file runs the job of its ``model`` setting; issue 17: the mixed model's default engine is
    local (``sharded_release``), ``"engine": "memory"`` runs the in-memory ``release`` job, whose run config then
    holds no ``engine`` (it has no such setting)."""
    from pipeline.jobs import inbox_run_request

    path = tmp_path / "in.csv"
    path.write_text("q,a,b\n1,x,y\n")
    settings = {"quasi_identifiers": ["q"], "sensitive_attributes": ["a", "b"], **chosen}
    request = inbox_run_request(path, settings, sha256="0" * 64)
    assert request.job_name == job
    run_settings = request.run_config["resources"]["settings"]["config"]
    assert ("engine" in run_settings) == ("engine" in chosen and job == "sharded_release")


@pytest.mark.parametrize(
    ("settings", "expected"),
    [
        ({"k": 5}, r"k: a setting of model kl \(job kl_release\), not of model mixed \(job sharded_release\)"),
        ({"engine": "memory", "k": 5}, r"k: a setting of model kl \(job kl_release\), not of model mixed \(job release\)"),
        ({"model": "rating", "workers": 3}, r"workers: a setting of sharded releases"),
        ({"model": "kl", "seed": 1}, r"seed: a setting of model mixed \(job release\)"),
        ({"ell": 1}, r"ell: Input should be greater than or equal to 2"),
        ({"model": "kl", "k": 2, "ell": 3}, r"k >= ell"),
        ({"model": "foo"}, r"model: unknown model 'foo'"),
    ],
)
def test_the_inbox_sensor_skips_settings_its_job_would_refuse(tmp_path, settings, expected):
    """The inbox's settings file is checked like the job's run config, so a bad file is skipped with the reason in
    the sensor's log (evaluate_inbox) instead of a run request that Dagster refuses."""
    from pipeline.jobs import inbox_run_request

    path = tmp_path / "in.csv"
    path.write_text("q,a,b\n1,x,y\n")
    with pytest.raises(ValueError, match=expected):
        inbox_run_request(path, {"quasi_identifiers": ["q"], "sensitive_attributes": ["a", "b"], **settings}, sha256="0" * 64)


def test_the_inbox_s_shared_settings_serve_each_file_s_model():
    """``inbox/settings.json`` may hold settings of several models (one inbox, files of each model): a file gets
    those of its own model; its own settings file is taken as written (another model's setting there is refused)."""
    from pipeline.jobs import inbox_file_settings

    shared = {"min_confidence": 0.7, "seed": 2, "k": 4, "ell": 3}
    assert inbox_file_settings(shared, {"model": "kl"}) == {"k": 4, "ell": 3, "model": "kl"}
    assert inbox_file_settings(shared, {}) == {"min_confidence": 0.7, "seed": 2, "ell": 3}
    assert inbox_file_settings({**shared, "model": "rating"}, {"seed": 5}) == {
        "min_confidence": 0.7,
        "seed": 5,
        "ell": 3,
        "model": "rating",
    }
    assert inbox_file_settings({"colour": "red"}, {}) == {"colour": "red"}  # not a setting at all: refused later
    assert inbox_file_settings({}, {"model": "kl", "seed": 1}) == {"model": "kl", "seed": 1}  # refused later


@pytest.mark.parametrize("job_name", ["kl_release", "release"])
def test_the_launchpad_scaffold_shows_every_setting_of_the_job_with_its_default_and_validates(tmp_path, job_name):
    """Issue 15 ("a full scaffold for kl_release"): the launchpad's "Scaffold all default config" (the webserver's
    ``rootDefaultYaml``, built by dagster-graphql's ``default_values_yaml_from_type_snap`` from the job's schema) holds
    every setting the job takes (k, hierarchies_dir, kl_method, max_block_size, generalization_weights... for
    kl_release) with its ReleaseSettings default, and launching it unchanged passes the job's checks."""
    import yaml
    from dagster._core.snap import JobSnap
    from dagster_graphql.schema.run_config import default_values_yaml_from_type_snap

    from pipeline.models import settings_of_job
    from pipeline.resources import ReleaseSettings

    job = build_definitions(tmp_path / "home").resolve_job_def(job_name)
    snapshot = JobSnap.from_job_def(job)
    schema = snapshot.config_schema_snapshot
    root = schema.get_config_snap(snapshot.mode_def_snaps[0].root_config_key)
    scaffold = yaml.safe_load(default_values_yaml_from_type_snap(schema, root))
    settings = scaffold["resources"]["settings"]["config"]
    # csv_header's, promote's and (mixed, Rating) max_deleted_share's defaults are "unset" (null: detected; the
    # model's rule; the Adult example's 0.25 or else 0.10), and Dagster's scaffold leaves out null defaults: the config
    # reference beside the editor describes them; every other setting is shown
    expected = set(settings_of_job(job_name)) | {"model"}
    missing = expected - set(settings)
    assert "csv_header" in missing and missing <= {"csv_header", "promote", "max_deleted_share"}, missing
    assert set(settings) <= expected
    if job_name == "kl_release":
        assert {"k", "hierarchies_dir", "kl_method", "max_block_size", "generalization_weights", "posterior_slack"} <= set(
            settings
        )
    defaults = ReleaseSettings()
    for name, value in settings.items():
        if name != "model":
            assert value == getattr(defaults, name), name  # typed choices compare equal to their text
    resolved = dg.validate_run_config(job, scaffold)
    assert resolved["resources"]["settings"]["config"]["model"] == ("kl" if job_name == "kl_release" else "mixed")


@pytest.mark.parametrize(
    ("job_name", "settings", "expected"),
    [
        # issue 15: the Adult example (input_path left at Adult's) accepts 25 % deleted records explicitly ...
        ("release", {}, 0.25),
        ("rating_release", {"allow_disclosure": True}, 0.25),
        # ... any other input keeps the default 10 %, a value the run sets is kept, and (k, ℓ) has no example value
        ("release", {"input_path": "/data/patients.csv"}, 0.1),
        ("release", {"max_deleted_share": 0.1}, 0.1),
        ("release", {"input_path": "/data/patients.csv", "max_deleted_share": 0.3}, 0.3),
        ("kl_release", {}, 0.1),
    ],
)
def test_the_adult_example_sets_its_utility_override_and_nothing_else_does(tmp_path, job_name, settings, expected):
    job = build_definitions(tmp_path / "home").resolve_job_def(job_name)
    applied = dg.validate_run_config(job, _run_config(**settings))["resources"]["settings"]["config"]
    assert applied.get("max_deleted_share", 0.1) == expected
    assert applied.get("max_suppressed_share", 0.1) == 0.1
