import json
import os
from pathlib import Path

import pandas as pd
import pytest

os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="session")
def golden() -> dict:
    """SPEC §16 golden examples (copied from shared/golden/golden_expected.json)."""
    return json.loads((FIXTURES / "golden_expected.json").read_text())


def example_frame(example: dict) -> pd.DataFrame:
    """Golden example input as a records frame: row_id, quasi-identifiers (text), sensitive attributes."""
    rows = [{"row_id": r["id"], **{k: str(v) for k, v in r["qi"].items()}, **r["sa"]} for r in example["input"]]
    return pd.DataFrame(rows)


def example_quasi_identifiers(example: dict) -> list[str]:
    return list(example["input"][0]["qi"])


def example_release_settings(example: dict, directory: Path, **overrides) -> dict:
    """The ``settings`` config of a release of a golden example: its CSV written to ``directory``, its columns and
    min_confidence, every rule mined (min_support 1), ℓ = 2 and any deletion accepted, then ``overrides``."""
    path = directory / "example.csv"
    example_frame(example).drop(columns="row_id").to_csv(path, index=False)
    return {
        "input_path": str(path),
        "quasi_identifiers": example_quasi_identifiers(example),
        "sensitive_attributes": list(example["SA"]),
        "min_confidence": float(example["min_conf"]),
        "min_support": 1,
        "ell": 2,
        "max_deleted_share": 1.0,
        **overrides,
    }


#: ``msa-release run`` option of each setting :func:`example_release_settings` gives
RUN_OPTIONS = {
    "input_path": "--input",
    "quasi_identifiers": "--quasi-identifiers",
    "sensitive_attributes": "--sensitive-attributes",
    "min_confidence": "--min-confidence",
    "min_support": "--min-support",
    "ell": "--ell",
    "max_deleted_share": "--max-deleted-share",
    "hierarchies_dir": "--hierarchies",
}


def run_arguments(settings: dict) -> list[str]:
    """``msa-release run`` and the options of ``settings`` (keys of :data:`RUN_OPTIONS`)."""
    arguments = ["run"]
    for key, value in settings.items():
        arguments += [
            RUN_OPTIONS[key],
            ",".join(value) if isinstance(value, list) else f"{value:g}" if isinstance(value, float) else str(value),
        ]
    return arguments


ADULT_COLUMNS = (
    "age,workclass,fnlwgt,education,education-num,marital-status,occupation,relationship,race,sex,"
    "capital-gain,capital-loss,hours-per-week,native-country,income"
).split(",")


@pytest.fixture(scope="session")
def adult_records() -> pd.DataFrame:
    """UCI Adult after the default missing-value policy (30,718 records), default columns."""
    from pipeline.io.loading import load_records

    loaded = load_records(
        Path(__file__).resolve().parents[1] / "data" / "adult" / "adult.data",
        quasi_identifiers=["sex", "race", "marital-status", "native-country", "workclass"],
        sensitive_attributes=["education", "occupation", "age", "relationship"],
        csv_header=False,
        column_names=ADULT_COLUMNS,
    )
    assert len(loaded.records) == 30718
    return loaded.records


#: The secret every home created by an in-process test gets (pipeline.release.home_secret._new_secret is replaced):
#: releases made with the home secret are then reproducible from run to run. Subprocess runs
#: (tests/e2e/test_release_safety.py) still get a random secret, as users do.
TEST_HOME_SECRET = bytes(range(101, 133))


@pytest.fixture(autouse=True)
def reproducible_home_secret(monkeypatch):
    import pipeline.release.home_secret

    monkeypatch.setattr(pipeline.release.home_secret, "_new_secret", lambda: TEST_HOME_SECRET)


#: Tests under ``tests/e2e/`` run a Dagster job, the CLI or a subprocess end to end (marker ``e2e``); the browser test
#: there has its own marker. ``make test-fast`` deselects both and ``slow``; ``make test`` (CI) runs everything.
E2E_DIRECTORY = Path(__file__).resolve().parent / "e2e"


def pytest_collection_modifyitems(config, items):
    for item in items:
        path = Path(str(item.fspath)).resolve()
        if E2E_DIRECTORY not in path.parents:
            continue
        item.add_marker(pytest.mark.browser if path.name == "test_browser.py" else pytest.mark.e2e)
