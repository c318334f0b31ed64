"""Run a Great Expectations suite on a pandas frame in an ephemeral context (no Dagster here)."""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
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


#: Modules that importing Great Expectations loads and that no suite of ours uses: SciPy's statistics (imported at
#: module level by GX's KL-divergence and KS-test expectations, for their metrics). They are loaded lazily
#: (:class:`importlib.util.LazyLoader`): on first use of an attribute, e.g. if a future suite used those
#: expectations, so nothing breaks, but an import of GX that does not use them does not pay for them. (Altair, which
#: the KL-divergence expectation imports for its charts, cannot be deferred this way: ``import altair as alt`` reads
#: the module's spec, which loads it at once.)
DEFERRED_MODULES = ("scipy.stats",)

#: An optional dependency that GX imports when it is installed (it is, for the Spark engine) and does without when it
#: is not (``great_expectations.compatibility.pyspark``): our suites validate pandas frames only.
UNUSED_OPTIONAL_MODULES = ("pyspark",)


def great_expectations_modules() -> tuple[ModuleType, ModuleType]:
    """``great_expectations`` and its ``expectations`` module, imported on first use (``checks.suites`` builds every
    suite with them), not when the checks are loaded.

    The first import defers :data:`DEFERRED_MODULES` and hides :data:`UNUSED_OPTIONAL_MODULES` when they are not
    loaded yet: on Adult's release that took GX's import from about 2.1 to 1.2 s and from about 155 to 70 MiB
    (measured after Dagster and pandas were loaded). A later ``import pyspark`` in the same process works as usual.
    LazyLoader is not thread-safe before Python 3.12: the steps run in one thread (the in-process executor).
    """
    if "great_expectations.expectations" not in sys.modules:
        with _lean_import():
            import great_expectations.expectations  # noqa: F401  (the first import, lean)
    import great_expectations
    import great_expectations.expectations

    return great_expectations, great_expectations.expectations


@contextmanager
def _lean_import() -> Iterator[None]:
    """Defer :data:`DEFERRED_MODULES` and hide :data:`UNUSED_OPTIONAL_MODULES` for the duration of the block."""
    for name in DEFERRED_MODULES:
        if name not in sys.modules:
            _import_lazily(name)
    hidden = [name for name in UNUSED_OPTIONAL_MODULES if name not in sys.modules]
    for name in hidden:
        sys.modules[name] = None  # type: ignore[assignment]  # an import of it raises ImportError (importlib docs)
    try:
        yield
    finally:
        for name in hidden:
            if sys.modules.get(name, ...) is None:
                del sys.modules[name]


def _import_lazily(name: str) -> None:
    """Put a lazily loaded ``name`` in ``sys.modules`` (the recipe of the :mod:`importlib` documentation,
    "Implementing lazy imports"); its code runs on first attribute access. Nothing when it is not installed."""
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        return
    loader = importlib.util.LazyLoader(spec.loader)
    spec.loader = loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    loader.exec_module(module)
    parent, _, child = name.rpartition(".")
    if parent:
        setattr(sys.modules[parent], child, module)


@lru_cache(maxsize=1)
def _whole_frame_batches():
    """The ephemeral context's one pandas data source, dataframe asset and whole-frame batch definition, which every
    :func:`validate_frame` call validates its frame through (``Batch.validate`` with an unsaved suite: nothing is
    added to or deleted from the context per call, about 15 ms less a suite)."""
    source = _context().data_sources.add_pandas("msa-release-gates")
    return source.add_dataframe_asset("derived gate frame").add_batch_definition_whole_dataframe("whole frame")


@lru_cache(maxsize=1)
def _context():
    great_expectations_modules()
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

    suite = gx.ExpectationSuite(name=suite.name, expectations=[e.copy() for e in suite.expectations])
    result = _whole_frame_batches().get_batch(batch_parameters={"dataframe": frame}).validate(suite)
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
