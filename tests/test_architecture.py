"""The pure algorithm package imports neither Dagster nor Great Expectations."""

import ast
from pathlib import Path

CORE = Path(__file__).resolve().parents[1] / "pipeline" / "core"
FORBIDDEN = ("dagster", "great_expectations")


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
    completed = subprocess.run([sys.executable, "-c", "import pipeline.definitions as d; assert d.defs"],
                               cwd=Path(__file__).resolve().parents[1], env=environment, capture_output=True, text=True,
                               timeout=300)
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
    from pipeline.errors import exit_status_of_class_name

    expected = {"InputError": 2, "HierarchyError": 2, "InfeasibleError": 2, "AuditError": 2, "RecompositionRefused": 1,
                "ReleaseLockBusy": 3, "HomeSecretError": 1, "UnusableInput": 2, "ReleaseLockBusyError": 3}
    assert {name: exit_status_of_class_name(name) for name in expected} == expected


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
