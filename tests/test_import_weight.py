"""What loading the code location and the CLI imports (issues 17 and 18): the heavy packages only the steps that use
them import.

matplotlib (about 26 MiB: the figures), numba with the (k, ℓ) kernels (about 60 MiB), scipy (the attack
evaluation), mlxtend (Apriori) and Great Expectations (about 170 MiB: the gates) are imported inside the functions
that draw, run the (k, ℓ) model, evaluate attacks, mine or validate. A process that only loads the Dagster code
location (the sharded release's parent while its workers release the shards, ``dagster dev``'s code server) or
runs ``msa-release list`` does not hold them.

Each case runs in a fresh interpreter: the test process itself has imported everything already.
"""

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: Packages that no module of the code location, the CLI or the sharding core imports at module level.
HEAVY = ("matplotlib", "numba", "llvmlite", "great_expectations", "scipy", "mlxtend", "sklearn", "pyspark")


def _run_probe(code: str, tmp_path: Path) -> Any:
    """Run ``code`` (which prints one JSON line last) in a fresh interpreter, home and Dagster home under
    ``tmp_path``; its parsed last line."""
    environment = {
        **os.environ,
        "MSA_RELEASE_HOME": str(tmp_path / "home"),
        "DAGSTER_HOME": str(tmp_path / "dagster"),
        "GX_ANALYTICS_ENABLED": "false",
    }
    completed = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=300
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    return json.loads(completed.stdout.strip().splitlines()[-1])


def _heavy_modules_after(code: str, tmp_path: Path, packages: tuple[str, ...] = HEAVY) -> list[str]:
    """The ``packages`` in ``sys.modules`` after running ``code`` in a fresh interpreter (:func:`_run_probe`)."""
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}} & set({packages!r}))))"
    return _run_probe(probe, tmp_path)


def test_the_probe_sees_a_heavy_import(tmp_path):
    """The probe itself can fail: importing a kernel's numba source does bring numba (the release itself imports the
    kernels compiled ahead of time, ``pipeline.core.compiled``, when ``make env`` built them)."""
    assert "numba" in _heavy_modules_after("import pipeline.core.kl_anonymity.kernels", tmp_path)


@pytest.mark.parametrize(
    "code",
    [
        pytest.param("import pipeline.definitions as d\nd.defs.get_repository_def()", id="code location"),
        pytest.param("import pipeline.cli", id="cli"),
        pytest.param(
            "from pipeline.cli import main\ntry:\n    main(['list'])\nexcept SystemExit as exit:\n    assert not exit.code",
            id="msa-release list",
        ),
        pytest.param("import pipeline.resources", id="settings resource"),
    ],
)
def test_loading_imports_no_heavy_package(code, tmp_path):
    assert _heavy_modules_after(code, tmp_path) == []


def test_listing_the_releases_imports_neither_dagster_nor_pandas(tmp_path):
    """``msa-release list`` reads directory names and manifests only (pipeline/release/listing.py, pipeline/home.py):
    it starts in a fraction of a second instead of importing Dagster, pandas and DuckDB (about 1.2 s of CPU), and
    the CLI's modules import no pydantic model at module level."""
    code = "from pipeline.cli import main\ntry:\n    main(['list'])\nexcept SystemExit as exit:\n    assert not exit.code"
    assert _heavy_modules_after(code, tmp_path, ("dagster", "pandas", "duckdb", "pyarrow", "numpy", "pydantic")) == []


def test_the_sharding_core_does_not_import_numba(tmp_path):
    """The mixed model's shard release needs no (k, ℓ) kernel: the sharded parent and workers do not hold numba."""
    heavy = _heavy_modules_after("import pipeline.core.sharding, pipeline.core.verification, pipeline.engines.worker", tmp_path)
    assert "numba" not in heavy and "llvmlite" not in heavy


def test_great_expectations_is_imported_without_scipy_stats_or_pyspark_and_still_validates(tmp_path):
    """The gates' first import of Great Expectations defers SciPy's statistics and hides pyspark (checks/gx_runner.py,
    issue 18: about 0.9 s and 85 MiB of Adult's release): after a suite has validated a frame (a failing expectation
    included), neither has run; a later ``import pyspark`` and ``scipy.stats`` work as usual."""
    code = """
import json, sys
import pandas as pd
from checks.gx_runner import validate_frame
from checks.suites import sac_diversity_suite
frame = pd.DataFrame({"n_rows": [3, 2], "min_distinct_values": [3, 3], "cluster_tuples_preserved": [True, True]})
outcome = validate_frame(frame, sac_diversity_suite(ell=3))
loaded = {
    "stats_ran": type(sys.modules.get("scipy.stats")).__name__ == "module",
    "pyspark": "pyspark" in sys.modules,
    "failed": outcome.failed_expectations,
}
from scipy import stats
loaded["entropy"] = round(float(stats.entropy([0.5, 0.5], base=2)), 6)
try:
    import pyspark
    loaded["pyspark_after"] = pyspark.__name__
except ImportError:
    loaded["pyspark_after"] = "not installed"
print(json.dumps(loaded))
"""
    outcome = _run_probe(code, tmp_path)
    assert outcome["failed"] == ["expect_column_values_to_be_between"]
    assert outcome["stats_ran"] is False and outcome["pyspark"] is False
    assert outcome["entropy"] == 1.0
    assert outcome["pyspark_after"] in ("pyspark", "not installed")
