"""The stack floor of the peers section (``benchmarks/stack_floor.py``) never counts an import that a release does not
make: every module it loads is loaded by ``msa-release run`` of Adult too, the default mixed release and ``--model kl``
at (3, 3) (issue 18's notes quote the floor as the
part of the release's time and memory that no change inside ``pipeline/`` removes; a floor loading more would
overstate it).

Both run in fresh interpreters: this process has imported everything already.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _modules(arguments: list[str], tmp_path: Path) -> set[str]:
    """The names in ``sys.modules`` that ``python <arguments>`` prints as its last line (a JSON list)."""
    environment = {
        **os.environ,
        "MSA_RELEASE_HOME": str(tmp_path / "home"),
        "DAGSTER_HOME": str(tmp_path / "home" / "dagster"),
        "GX_ANALYTICS_ENABLED": "false",
    }
    completed = subprocess.run(
        [sys.executable, *arguments], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=600
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    return set(json.loads(completed.stdout.strip().splitlines()[-1]))


@pytest.mark.slow
@pytest.mark.e2e
@pytest.mark.parametrize(
    "options",
    [
        pytest.param([], id="default mixed"),
        pytest.param(["--model", "kl", "--k", "3", "--ell", "3"], id="kl k=3 ell=3"),  # the notes compare it with anjana
    ],
)
def test_the_floor_loads_nothing_that_a_release_of_adult_does_not(tmp_path, options):
    floor = _modules(["-m", "benchmarks.stack_floor", "--modules"], tmp_path)
    release = _modules(
        [
            "-c",
            "import json, sys\n"
            "from pipeline.cli import main\n"
            "try:\n"
            f"    main(['run', '--max-deleted-share', '0.25', *{options!r}, '--quiet', '--home', {str(tmp_path / 'home')!r}])\n"
            "except SystemExit as exit:\n"
            "    assert not exit.code, exit.code\n"
            "print(json.dumps(sorted(sys.modules)))",
        ],
        tmp_path,
    )
    # the release's own process loads the stack (the probe can fail: these are what the floor stands for)
    assert {"dagster", "great_expectations", "duckdb", "matplotlib.backends.backend_agg"} <= release
    assert {"dagster", "great_expectations", "duckdb", "matplotlib.backends.backend_agg"} <= floor
    # beyond the floor's own module and what ``python -m`` itself loads (runpy)
    extra = sorted(name for name in floor - release if name.split(".")[0] != "benchmarks" and name not in ("__main__", "runpy"))
    assert extra == []
