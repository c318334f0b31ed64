"""Issue 15: ``msa-release hierarchies`` makes a table other than Adult publishable with the (k, ℓ) model, and Adult's
hierarchies are never applied to another table silently: a kl run without hierarchies is refused (exit 2, naming
``msa-release hierarchies``; in run-config words when launched from the launchpad), and the mixed model's qi_aware
grouping says in its manifest and summary which quasi-identifiers it could only generalize to ``*``."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from click.testing import CliRunner

from pipeline.cli import main
from pipeline.core.hierarchies import load_hierarchies
from pipeline.failures import step_failures
from pipeline.io.loading import load_records
from pipeline.release.publish import read_latest
from tests.jobs import run_job

pytestmark = pytest.mark.e2e

QUASI_IDENTIFIERS = ["age", "zip", "sex"]  # 'age' and 'sex' are also Adult's column names: a match by chance
SENSITIVE_ATTRIBUTES = ["diagnosis", "drug"]


def write_patients(path: Path, n: int = 240) -> Path:
    """A synthetic table with a header row: ages 18-90, six ZIP codes (one missing), two sensitive attributes."""
    generator = random.Random(15)
    lines = ["age,zip,sex,diagnosis,drug"]
    for i in range(n):
        zip_code = "" if i == 7 else generator.choice(["02138", "02139", "02141", "10001", "10002", "94110"])
        lines.append(
            f"{generator.randint(18, 90)},{zip_code},{generator.choice('FM')},"
            f"{generator.choice(['flu', 'cold', 'asthma', 'diabetes', 'ulcer'])},{generator.choice('abcd')}"
        )
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def environment(tmp_path, monkeypatch):
    """The CLI writes MSA_RELEASE_HOME and DAGSTER_HOME into os.environ; restore them afterwards."""
    monkeypatch.setenv("MSA_RELEASE_HOME", str(tmp_path / "unused-home"))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "unused-dagster"))
    return tmp_path


def _run(csv: Path, home: Path, *extra: str):
    return CliRunner().invoke(
        main,
        [
            "run",
            "--input",
            str(csv),
            "--quasi-identifiers",
            ",".join(QUASI_IDENTIFIERS),
            "--sensitive-attributes",
            ",".join(SENSITIVE_ATTRIBUTES),
            "--ell",
            "2",
            "--home",
            str(home),
            *extra,
        ],
    )


def test_generated_hierarchies_cover_every_value_and_make_the_kl_run_publish(environment):
    tmp_path = environment
    csv = write_patients(tmp_path / "patients.csv")
    output = tmp_path / "generated"
    made = CliRunner().invoke(
        main, ["hierarchies", "--input", str(csv), "--quasi-identifiers", ",".join(QUASI_IDENTIFIERS), "--output", str(output)]
    )
    assert made.exit_code == 0, made.output
    assert sorted(p.name for p in output.iterdir()) == ["age.csv", "sex.csv", "zip.csv"]
    assert "zip.csv: mask" in made.output and "age.csv: interval" in made.output
    # read back with the run's reader: every value of the data (the missing ZIP as '?') is listed
    records = load_records(csv, quasi_identifiers=QUASI_IDENTIFIERS, sensitive_attributes=SENSITIVE_ATTRIBUTES).records
    hierarchies = load_hierarchies(output, QUASI_IDENTIFIERS, data_values={a: records[a] for a in QUASI_IDENTIFIERS})
    assert "?" in hierarchies["zip"].base_values and hierarchies["age"].labels[-1] == ("*",)
    # written again only with --overwrite, and every problem at once
    again = CliRunner().invoke(
        main, ["hierarchies", "--input", str(csv), "--quasi-identifiers", "age,sex", "--output", str(output)]
    )
    assert again.exit_code == 2 and "2 file(s) exist already" in again.output

    published = _run(csv, tmp_path / "home", "--model", "kl", "--k", "3", "--hierarchies", str(output))
    assert published.exit_code == 0, published.output
    release = read_latest(tmp_path / "home" / "releases")
    manifest = json.loads((release / "manifest.json").read_text())
    assert manifest["model"] == "kl" and manifest["n_released"] == 240
    assert manifest["hierarchies"]["directory"] == "generated"
    assert set(manifest["hierarchies"]["files"]) == set(QUASI_IDENTIFIERS)


def test_kl_without_hierarchies_on_another_table_is_refused_naming_the_command(environment):
    """Adult's hierarchies hold 'age' and 'sex' files: a table with those column names must not pick them up."""
    tmp_path = environment
    csv = write_patients(tmp_path / "patients.csv")
    refused = _run(csv, tmp_path / "home", "--model", "kl", "--k", "3")
    assert refused.exit_code == 2
    output = refused.output
    assert "msa-release hierarchies --input patients.csv --quasi-identifiers age,zip,sex" in output
    assert "--hierarchies DIR" in output and "hierarchies_dir" not in output  # the command line's words
    assert not (tmp_path / "home" / "releases" / "LATEST").exists()


def test_a_launchpad_run_names_the_run_config_key(tmp_path):
    """The same refusal in a job run through the definitions (what the launchpad or the inbox launches): the step's
    failure says which run-config key to set, not a command-line option."""
    csv = write_patients(tmp_path / "patients.csv")
    settings = {
        "model": "kl",
        "input_path": str(csv),  # csv_header unset: the header row is detected
        "quasi_identifiers": QUASI_IDENTIFIERS,
        "sensitive_attributes": SENSITIVE_ATTRIBUTES,
        "k": 3,
        "ell": 2,
    }
    result = run_job(tmp_path / "home", "kl_release", settings)
    assert not result.success
    failures = step_failures(result)
    assert [f.step for f in failures] == ["private__generalization_hierarchies"]
    message = failures[0].message
    assert "`hierarchies_dir: DIR`" in message and "msa-release hierarchies" in message
    assert "--hierarchies" not in message
    assert failures[0].exit_status == 2


def test_mixed_without_hierarchies_says_its_quasi_identifiers_are_generalized_to_root_only(environment):
    tmp_path = environment
    csv = write_patients(tmp_path / "patients.csv")
    published = _run(csv, tmp_path / "home", "--min-confidence", "0.9", "--confidence-tolerance", "1")
    assert published.exit_code == 0, published.output
    assert "hierarchies    none (no hierarchies_dir / --hierarchies) for age, zip, sex" in published.output
    manifest = json.loads((read_latest(tmp_path / "home" / "releases") / "manifest.json").read_text())
    assert manifest["hierarchies"] == {"directory": None, "generalized_to_root_only": QUASI_IDENTIFIERS}
