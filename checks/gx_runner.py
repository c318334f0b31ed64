"""Run a Great Expectations suite on a pandas frame in an ephemeral context (no Dagster here)."""

from __future__ import annotations

import os
import uuid
from dataclasses import dataclass
from functools import lru_cache
from types import ModuleType
from typing import TYPE_CHECKING

import pandas as pd

# set before Great Expectations is imported; it is imported on first use (:func:`_context`), not when the checks are
# loaded, so that a process that runs no suite (the sharded job's driver while the shards are released) does not
# hold it (about 170 MiB)
os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")

if TYPE_CHECKING:
    import great_expectations as gx

__all__ = ["SuiteOutcome", "great_expectations_modules", "validate_frame"]


@dataclass(frozen=True)
class SuiteOutcome:
    """Outcome of one suite: overall success, GX statistics, and per expectation its type,
    success and observed figures (counts only; never values from the frame)."""

    success: bool
    statistics: dict[str, float]
    expectations: list[dict]

    @property
    def failed_expectations(self) -> list[str]:
        return [e["type"] for e in self.expectations if not e["success"]]


def great_expectations_modules() -> tuple[ModuleType, ModuleType]:
    """``great_expectations`` and its ``expectations`` module, imported on first use (``checks.suites`` builds every
    suite with them), not when the checks are loaded."""
    import great_expectations
    import great_expectations.expectations

    return great_expectations, great_expectations.expectations


@lru_cache(maxsize=1)
def _context():
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    return context


#: Arguments of an expectation shown with its result (the suites' own bounds, never data).
_BOUND_KEYS = ("min_value", "max_value", "value_set")
_SAFE_RESULT_KEYS = ("observed_value", "element_count", "unexpected_count", "unexpected_percent", "missing_count")


def validate_frame(frame: pd.DataFrame, suite: gx.ExpectationSuite) -> SuiteOutcome:
    """Validate ``frame`` against ``suite``.

    Parameters
    ----------
    frame
        A derived gate frame (ids, counts, flags; see ``pipeline.core.verification``).
    suite
        A fresh suite from ``checks.suites``.

    Returns
    -------
    SuiteOutcome
    """
    import great_expectations as gx

    context = _context()
    name = f"{suite.name}-{uuid.uuid4().hex[:8]}"
    source = context.data_sources.add_pandas(name)
    batch_definition = source.add_dataframe_asset(name).add_batch_definition_whole_dataframe(name)
    suite = context.suites.add(gx.ExpectationSuite(name=name, expectations=[e.copy() for e in suite.expectations]))
    definition = context.validation_definitions.add(gx.ValidationDefinition(name=name, data=batch_definition, suite=suite))
    try:
        result = definition.run(batch_parameters={"dataframe": frame})
    finally:
        context.validation_definitions.delete(name)
        context.suites.delete(name)
        context.data_sources.delete(name)
    expectations = []
    for item in result.results:
        figures = {k: item.result.get(k) for k in _SAFE_RESULT_KEYS if item.result.get(k) is not None}
        bounds = {
            k: item.expectation_config.kwargs.get(k) for k in _BOUND_KEYS if item.expectation_config.kwargs.get(k) is not None
        }
        expectations.append(
            {
                "type": item.expectation_config.type,
                "column": item.expectation_config.kwargs.get("column"),
                "success": bool(item.success),
                **bounds,
                **figures,
            }
        )
    return SuiteOutcome(success=bool(result.success), statistics=dict(result.statistics), expectations=expectations)
