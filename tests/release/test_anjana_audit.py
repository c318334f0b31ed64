"""`msa-release audit --table` on a release of Adult made by anjana itself (issue 16).

anjana cannot be installed beside this project's pins (see ``tests/release/anjana_adult.py``), so the test runs it in
its own throw-away environment with uv (``uv run --isolated --no-project --with anjana==1.2.3``; uv caches the
packages, so only the first run downloads them): k = 5 and distinct ℓ = 3 for every sensitive attribute, one anjana
call per attribute, at most 5 % of the records suppressed. Expected figures: the requirement anjana met (checked by
pycanon, which anjana itself uses, on the same file) and what ℓ-diversity one attribute at a time does not bound
(an adversary who knows one sensitive value, or learns the classes' joint distribution, or knows the strong rules).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from pipeline.cli import main

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]
HIERARCHIES = ROOT / "data" / "adult" / "hierarchies"
QUASI_IDENTIFIERS = ["sex", "race", "marital-status", "native-country", "workclass"]
SENSITIVE_ATTRIBUTES = ["education", "occupation", "age", "relationship"]
ANJANA = "anjana==1.2.3"
UV = ROOT / ".tools" / "bin" / "uv"


@pytest.fixture(scope="module")
def anjana_release(adult_records, tmp_path_factory) -> dict:
    base = tmp_path_factory.mktemp("anjana")
    raw = base / "adult_raw.csv"
    adult_records[[*QUASI_IDENTIFIERS, *SENSITIVE_ATTRIBUTES]].astype(str).to_csv(raw, index=False)
    out = base / "adult_anjana_k5_l3.csv"
    uv = str(UV) if UV.exists() else "uv"
    command = [
        uv,
        "run",
        "--isolated",
        "--no-project",
        "--python",
        "3.11",
        "--with",
        ANJANA,
        "python",
        str(ROOT / "tests" / "release" / "anjana_adult.py"),
        str(raw),
        str(HIERARCHIES),
        ",".join(QUASI_IDENTIFIERS),
        ",".join(SENSITIVE_ATTRIBUTES),
        "5",
        "3",
        "5",
        str(out),
    ]
    environment = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "UV_PROJECT_ENVIRONMENT")}
    done = subprocess.run(command, capture_output=True, text=True, timeout=900, env=environment, check=False)
    assert done.returncode == 0 and out.is_file(), (
        f"anjana could not be run in its own environment ({' '.join(command)}): needs uv and PyPI\n{done.stderr[-3000:]}"
    )
    home = base / "home"
    outcome = CliRunner().invoke(
        main,
        [
            "audit",
            "--table",
            str(out),
            "--quasi-identifiers",
            ",".join(QUASI_IDENTIFIERS),
            "--sensitive-attributes",
            ",".join(SENSITIVE_ATTRIBUTES),
            "--k",
            "5",
            "--ell",
            "3",
            "--hierarchies",
            str(HIERARCHIES),
            "--raw",
            str(raw),
            "--home",
            str(home),
        ],
    )
    (report,) = (home / "audits").glob("table-*/audit.json")
    return {"path": out, "outcome": outcome, "report": json.loads(report.read_text()), "n_raw": len(adult_records)}


def test_anjana_meets_its_requirement_and_the_audit_agrees_with_pycanon(anjana_release):
    anonymity = pytest.importorskip("pycanon.anonymity")
    table = pd.read_csv(anjana_release["path"], dtype=str, keep_default_na=False)
    classes = anjana_release["report"]["classes"]
    assert 0.95 * anjana_release["n_raw"] <= classes["n_records"] == len(table) <= anjana_release["n_raw"]
    assert classes["k"] == anonymity.k_anonymity(table, QUASI_IDENTIFIERS) >= 5
    for attribute in SENSITIVE_ATTRIBUTES:
        figures = classes["per_attribute"][attribute]
        assert figures["distinct_ell"] == anonymity.l_diversity(table, QUASI_IDENTIFIERS, [attribute]) >= 3
    assert anjana_release["outcome"].exit_code == 0, anjana_release["outcome"].output  # k and Diverse hold here


def test_what_anjana_per_attribute_does_not_bound_is_measured(anjana_release):
    """ℓ = 3 one attribute at a time: the audit's adversaries across attributes still learn values."""
    report = anjana_release["report"]
    assert report["classes"]["one_known_value"]["share_records_pinning_another_value"] > 0
    assert report["classes"]["learned_model"]["max_posterior"] > 1 / 3 + 0.05
    adversary = report["strong_rule_adversary"]
    assert adversary["n_rules"] > 0 and adversary["n_records_certain"] > 0
