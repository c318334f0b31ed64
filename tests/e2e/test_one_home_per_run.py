"""A run publishes in the home of its warehouse and release lock (red team of the Dagster UI, session 38): a Launchpad
run config with ``resources.store.config.home`` elsewhere published in a fresh home (a new secret, an empty registry:
a second, different release of the same records, never refused); one with ``resources.io_manager.config.database``
elsewhere took another home's lock, so two runs published overlapping releases in one home at once."""

from __future__ import annotations


import dagster as dg
import pytest

from tests.conftest import example_release_settings


@pytest.mark.parametrize(
    ("resource", "config"),
    [("store", lambda other: {"home": str(other)}), ("io_manager", lambda other: {"database": str(other / "warehouse.duckdb")})],
)
@pytest.mark.parametrize("job_name", ["release", "sharded_release"])
def test_a_run_config_moving_the_store_or_the_warehouse_alone_is_refused(
    golden, tmp_path, monkeypatch, resource, config, job_name
):
    from pipeline.definitions import build_definitions

    monkeypatch.setenv("GX_ANALYTICS_ENABLED", "false")
    home, other = tmp_path / "home", tmp_path / "other"
    job = build_definitions(home).resolve_job_def(job_name)
    run_config = {
        "resources": {
            "settings": {"config": example_release_settings(golden["example_A"], tmp_path)},
            resource: {"config": config(other)},
        }
    }
    with pytest.raises(dg.DagsterResourceFunctionError) as raised:
        job.execute_in_process(run_config=run_config, instance=dg.DagsterInstance.ephemeral())
    message = " ".join(str(raised.value.__cause__ or raised.value).split())
    assert "one run uses one home" in message and str(other.resolve()) in message
    assert not (other / "releases").exists() and not (home / "releases").exists()
    # both moved to the same other home: that home's own lock and registry (a separate series, documented)
    both = {
        **run_config["resources"],
        "store": {"config": {"home": str(other)}},
        "io_manager": {"config": {"database": str(other / "warehouse.duckdb")}},
    }
    result = job.execute_in_process(run_config={"resources": both}, instance=dg.DagsterInstance.ephemeral())
    assert result.success and (other / "releases" / "LATEST").exists() and not (home / "releases").exists()
