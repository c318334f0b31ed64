"""Import directions between the layers (issue 13), and no side effect at import.

``pipeline/core`` (the algorithms) and the framework-free layers ``pipeline/io``, ``pipeline/release``,
``pipeline/reporting``, ``pipeline/evaluation``, ``pipeline/models`` (the publication-model plug-ins) and ``pipeline/engines`` (the executors of sharded releases) import neither Dagster nor Great Expectations nor the Dagster
wiring (``assets``, ``checks``, ``pipeline.jobs`` …), at module level or inside a function; ``checks`` never
imports ``assets``."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CORE = ROOT / "pipeline" / "core"
FORBIDDEN = ("dagster", "great_expectations")
#: The Dagster wiring: the framework-free layers must not reach it.
WIRING = (
    "dagster",
    "dagster_duckdb",
    "dagster_duckdb_pandas",
    "great_expectations",
    "assets",
    "checks",
    "pipeline.jobs",
    "pipeline.resources",
    "pipeline.definitions",
    "pipeline.warehouse",
    "pipeline.run_events",
    "pipeline.asset_keys",
    "pipeline.privacy_report",
    "pipeline.failures",
    "pipeline.cli",
)
FRAMEWORK_FREE = ("core", "io", "release", "reporting", "evaluation", "models", "engines")


def _imported_modules(path: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names += [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
    return names


def _reaches(name: str, forbidden: tuple[str, ...]) -> bool:
    return any(name == f or name.startswith(f + ".") for f in forbidden)


@pytest.mark.parametrize("layer", FRAMEWORK_FREE)
def test_framework_free_layers_do_not_import_the_dagster_wiring(layer):
    files = sorted((ROOT / "pipeline" / layer).rglob("*.py"))
    assert files, f"pipeline/{layer} not found"
    offenders = [
        (path.relative_to(ROOT).as_posix(), name) for path in files for name in _imported_modules(path) if _reaches(name, WIRING)
    ]
    assert offenders == []


def test_checks_never_import_assets():
    offenders = [
        (path.name, name)
        for path in sorted((ROOT / "checks").rglob("*.py"))
        for name in _imported_modules(path)
        if _reaches(name, ("assets",))
    ]
    assert offenders == []


def test_core_has_no_orchestration_or_validation_imports():
    offenders = []
    for path in CORE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            offenders += [(path.name, n) for n in names if n.split(".")[0] in FORBIDDEN]
    assert list(CORE.rglob("*.py")), "pipeline/core not found"
    assert offenders == []


def test_importing_the_definitions_creates_nothing(tmp_path):
    """Issue 13: no side effect at import; the home is created when a run needs it."""
    import os
    import subprocess
    import sys

    home = tmp_path / "not-yet"
    environment = {**os.environ, "MSA_RELEASE_HOME": str(home), "DAGSTER_HOME": str(tmp_path / "dagster-not-yet")}
    completed = subprocess.run(
        [sys.executable, "-c", "import pipeline.definitions as d; assert d.defs"],
        cwd=Path(__file__).resolve().parents[1],
        env=environment,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert completed.returncode == 0, completed.stderr[-2000:]
    assert not home.exists() and not (tmp_path / "dagster-not-yet").exists()


def test_every_error_of_the_project_derives_from_the_base():
    """Issue 13: one base error (pipeline/errors.py), each subclass with its exit status."""
    import importlib
    import inspect

    from pipeline.errors import MsaReleaseError

    root = Path(__file__).resolve().parents[1]
    offenders = []
    for path in sorted((root / "pipeline").rglob("*.py")):
        module = importlib.import_module(".".join(path.relative_to(root).with_suffix("").parts))
        for name, cls in inspect.getmembers(module, inspect.isclass):
            if cls.__module__ == module.__name__ and issubclass(cls, BaseException) and not issubclass(cls, MsaReleaseError):
                offenders.append(f"{module.__name__}.{name}")
    assert offenders == []
    from pipeline.cli.common import ReleaseLockBusyError, UnusableInput
    from pipeline.core.hierarchies import HierarchyError
    from pipeline.core.kl_anonymity import InfeasibleError
    from pipeline.io.loading import InputError
    from pipeline.jobs import ScheduleConfigError
    from pipeline.release.audit import AuditError
    from pipeline.release.home_secret import HomeSecretError
    from pipeline.release.locking import ReleaseLockBusy
    from pipeline.release.registry import RecompositionRefused

    expected = {
        InputError: 2,
        HierarchyError: 2,
        InfeasibleError: 2,
        AuditError: 2,
        RecompositionRefused: 1,
        ReleaseLockBusy: 3,
        HomeSecretError: 1,
        UnusableInput: 2,
        ReleaseLockBusyError: 3,
        ScheduleConfigError: 2,
    }
    assert {cls: cls.exit_status for cls in expected} == expected


def _imports(path: Path) -> list[str]:
    names = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.append(node.module)
    return names


def test_import_directions():
    """Issue 13: checks/ never imports assets/; in pipeline/ only the Dagster wiring that assembles the code location
    (definitions.py, jobs.py) imports assets/."""
    root = Path(__file__).resolve().parents[1]
    offenders = []
    for path in sorted((root / "checks").rglob("*.py")):
        offenders += [(str(path.relative_to(root)), n) for n in _imports(path) if n.split(".")[0] == "assets"]
    for path in sorted((root / "pipeline").rglob("*.py")):
        if path.name in ("definitions.py", "jobs.py"):
            continue
        offenders += [(str(path.relative_to(root)), n) for n in _imports(path) if n.split(".")[0] == "assets"]
    assert offenders == []
