"""The stack floor of the peers section (``benchmarks/stack_floor.py``) never counts an import that a release does not
make: every module it loads is loaded by ``msa-release run`` of Adult too, the default mixed release and ``--model kl``
at (3, 3) (issue 18's notes quote the floor as the part of the release's time and memory that no change inside
``pipeline/`` removes; a floor loading more would overstate it).

Both run in fresh interpreters (``tests/test_import_weight.py``'s probe): this process has imported everything already.
"""

import pytest

from tests.test_import_weight import _run_probe

#: Appended to a probe's code: the names in ``sys.modules`` as its last line.
_PRINT_MODULES = "\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"


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
    floor = set(_run_probe("from benchmarks.stack_floor import load_stack\nload_stack()" + _PRINT_MODULES, tmp_path))
    release = set(
        _run_probe(
            "from pipeline.cli import main\n"
            "try:\n"
            f"    main(['run', '--max-deleted-share', '0.25', *{options!r}, '--quiet', '--home', {str(tmp_path / 'home')!r}])\n"
            "except SystemExit as exit:\n"
            "    assert not exit.code, exit.code" + _PRINT_MODULES,
            tmp_path,
        )
    )
    # the release's own process loads the stack (the probe can fail: these are what the floor stands for)
    assert {"dagster", "great_expectations", "duckdb", "matplotlib.backends.backend_agg"} <= release
    assert {"dagster", "great_expectations", "duckdb", "matplotlib.backends.backend_agg"} <= floor
    extra = sorted(name for name in floor - release if name.split(".")[0] != "benchmarks")  # beyond the floor's own module
    assert extra == []
