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
