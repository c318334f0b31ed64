"""The floor under issue 18's Adult targets: the libraries ``msa-release run`` is built on, loaded as a release loads
them, and nothing else (no record read, no Dagster run, no gate, no figure).

The ``peers`` section of ``make bench`` times this module (``python -m benchmarks.stack_floor``) like every other
configuration, in the same sitting: whatever the whole release takes above it is the project's own work and Dagster's
run bookkeeping; what it takes itself no change inside ``pipeline/`` can remove, short of not using these libraries
for the CLI's release (Dagster for orchestration, Great Expectations for the gates, DuckDB for the warehouse,
pandas and pyarrow for the tables, matplotlib for report.html's figures).

What it loads (:data:`STACK_MODULES`, then :func:`checks.gx_runner.great_expectations_modules`, the release's own
lean import of Great Expectations, then one in-memory DuckDB connection, the library's initialization that the
release's warehouse check pays for first) is a subset of what a release of Adult loads:
``tests/benchmarks/test_stack_floor.py`` checks that every module :func:`load_stack` puts in ``sys.modules`` is in a
release's too, so the floor never counts an import the release does not make.
"""

from __future__ import annotations

import importlib
import sys

#: The libraries the release imports, by the module that loads each as the release does: pandas (with pyarrow),
#: pyarrow's Parquet, DuckDB, Dagster and its SQLite instance storage (the CLI's runs are recorded in $DAGSTER_HOME),
#: and the non-interactive matplotlib that draws report.html's figures (``pipeline/reporting/release_report.py``).
STACK_MODULES = (
    "pandas",
    "pyarrow.parquet",
    "duckdb",
    "dagster",
    "dagster._core.storage.sqlite_storage",
    "matplotlib.figure",
    "matplotlib.backends.backend_agg",
)


def load_stack() -> None:
    """Import :data:`STACK_MODULES`, Great Expectations as the gates import it, and open and close one in-memory
    DuckDB connection.

    Raises
    ------
    ImportError
        A library of the project's environment is missing (run ``make env``).
    """
    for name in STACK_MODULES:
        importlib.import_module(name)
    from checks.gx_runner import great_expectations_modules  # sets GX_ANALYTICS_ENABLED=false first, as in a release

    great_expectations_modules()
    import duckdb

    duckdb.connect(":memory:").close()


def main() -> int:
    """``python -m benchmarks.stack_floor``: load the stack (:func:`load_stack`); returns the exit status (0)."""
    load_stack()
    return 0


if __name__ == "__main__":
    sys.exit(main())
