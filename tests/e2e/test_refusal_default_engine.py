"""The default engine's refusal names gate 4's confidence deviation and offers ``--confidence-tolerance``, as the
in-memory jobs' refusal does (newcomer, session 40: on a hospital table at ℓ = 6, refused by gate 4 and the utility
gate, the default engine's "why" left gate 4 out, and its last resort, a higher ``--max-deleted-share``, was refused
again by gate 4 with no option that could work).

The table is synthetic, made here: 4,000 patients whose department follows their diagnosis with probability 0.93 (12
diagnoses, 9 departments), 2-3 medications per diagnosis; ℓ = 6 deletes about a fifth of the records and moves the
recovered confidences of the diagnosis-department rules by 0.05 to 0.11 (depending on the home secret), above the
tolerance 0.01 the test sets."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from pipeline.cli import main

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

DIAGNOSES = {  # diagnosis: (share of patients, department, medications)
    "hypertension": (0.205, "cardiology", ["amlodipine", "lisinopril"]),
    "diabetes": (0.14, "endocrinology", ["metformin", "insulin"]),
    "depression": (0.11, "psychiatry", ["fluoxetine", "sertraline"]),
    "pneumonia": (0.085, "pulmonology", ["amoxicillin", "azithromycin"]),
    "asthma": (0.08, "pulmonology", ["salbutamol", "budesonide"]),
    "arthritis": (0.078, "rheumatology", ["ibuprofen", "methotrexate"]),
    "heart failure": (0.06, "cardiology", ["furosemide", "bisoprolol"]),
    "migraine": (0.059, "neurology", ["sumatriptan", "ibuprofen"]),
    "copd": (0.056, "pulmonology", ["salbutamol", "tiotropium"]),
    "cancer": (0.051, "oncology", ["tamoxifen", "cisplatin"]),
    "ckd": (0.048, "nephrology", ["furosemide", "epoetin"]),
    "hiv": (0.028, "infectious disease", ["tenofovir", "efavirenz"]),
}


def _patients(path: Path, n: int = 4_000) -> Path:
    generator = np.random.default_rng(20261127)
    names = list(DIAGNOSES)
    shares = np.array([DIAGNOSES[d][0] for d in names])
    diagnosis = generator.choice(names, size=n, p=shares / shares.sum())
    departments = sorted({d[1] for d in DIAGNOSES.values()})
    department = np.where(generator.random(n) < 0.93, [DIAGNOSES[d][1] for d in diagnosis], generator.choice(departments, size=n))
    medication = [DIAGNOSES[d][2][k] for d, k in zip(diagnosis, generator.integers(0, 2, size=n))]
    pd.DataFrame(
        {
            "age": generator.integers(18, 96, size=n),
            "sex": generator.choice(["F", "M"], size=n),
            "zip": [f"021{k:02d}" for k in generator.integers(0, 20, size=n)],
            "diagnosis": diagnosis,
            "medication": medication,
            "department": department,
        }
    ).to_csv(path, index=False)
    return path


def test_the_default_engines_refusal_names_gate_4_and_offers_the_tolerance(tmp_path, monkeypatch):
    monkeypatch.setenv("GX_ANALYTICS_ENABLED", "false")
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "home" / "dagster"))
    table = _patients(tmp_path / "patients.csv")
    outcome = CliRunner().invoke(
        main,
        [
            "run",
            "--quiet",
            "--home",
            str(tmp_path / "home"),
            "--input",
            str(table),
            "--quasi-identifiers",
            "age,sex,zip",
            "--sensitive-attributes",
            "diagnosis,medication,department",
            "--ell",
            "6",
            # the deviation depends on the home secret's choices (0.05–0.11 in the homes measured): a tolerance well
            # below it makes gate 4 refuse in any home (diff review, session 40)
            "--confidence-tolerance",
            "0.01",
        ],
    )
    assert outcome.exit_code == 1, outcome.output
    assert "gate rule_confidence_preserved: FAILED" in outcome.output, outcome.output
    assert "the deletions change the strong rules' confidences recovered from the release by up to" in outcome.output
    assert "(allowed: --confidence-tolerance 0.01)" in outcome.output
    assert "last resort, --confidence-tolerance" in outcome.output, outcome.output
    assert "last resort, --max-deleted-share" in outcome.output
