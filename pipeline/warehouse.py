"""The private warehouse: DuckDB IO manager for intermediate tables.

The warehouse (``$MSA_RELEASE_HOME/warehouse.duckdb``) holds raw records: its directory (the
release home) is created with mode 0700 (an existing directory keeps its mode, with a warning when others can
enter it) and its files (the database and DuckDB's ``.wal``) at 0600;
files DuckDB creates are created under umask 077. The IO manager also holds the release lock
(:mod:`pipeline.release.locking`) for the whole run, so two runs never write the warehouse or publish
at the same time, whether launched from the CLI or the Dagster UI, and it carries the
``warehouse.*`` failpoints of the crash tests (:mod:`pipeline.release.failpoints`).

The stock ``DuckDBPandasTypeHandler`` skips zero-row frames (so "no deleted record" would
leave no table, or a stale one) and, on re-materialization, deletes rows and inserts the new
frame positionally into the old table, which would silently mislabel columns after a change of
configuration (e.g. another column order). This handler replaces the table every time.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd
from dagster import InputContext, OutputContext
from dagster._core.storage.db_io_manager import DbIOManager, DbTypeHandler, TableSlice
from dagster_duckdb import DuckDBIOManager
from dagster_duckdb.io_manager import DuckDbClient
from dagster_duckdb_pandas import DuckDBPandasTypeHandler
from pydantic import Field, PrivateAttr

from pipeline.release.failpoints import failpoint
from pipeline.release.locking import ReleaseLock, acquire_release_lock

__all__ = ["WAREHOUSE_DIRECTORY_MODE", "WAREHOUSE_FILE_MODE", "WarehouseIOManager", "restrict_warehouse"]

#: Mode of the directory holding the warehouse (the release home) and of the warehouse files.
WAREHOUSE_DIRECTORY_MODE, WAREHOUSE_FILE_MODE = 0o700, 0o600


def restrict_warehouse(database: Path | str) -> None:
    """Set mode 0600 on ``database`` and its ``.wal``.

    The warehouse's directory (the release home) keeps its mode: it is created 0700, but an existing directory such as
    a shared ``/tmp`` is never re-moded (issue 14; :func:`pipeline.resources.home_access_warning` warns instead).

    Parameters
    ----------
    database
        Path of ``warehouse.duckdb``; files that do not exist (yet) are skipped.
    """
    database = Path(database)
    for path in (database, database.with_name(database.name + ".wal")):
        try:
            os.chmod(path, WAREHOUSE_FILE_MODE)
        except FileNotFoundError:
            pass


#: Tables loaded with categorical text columns (sorted categories, exactly the values present), as the
#: loader made them: one Python string per distinct value instead of one per cell (10M input records
#: as object strings take about 5 GB, as categoricals about 0.2 GB).
CATEGORICAL_TABLES = frozenset(
    {
        ("private", "raw_records"),
        ("candidate", "sac_released"),
        ("candidate", "attribute_table"),
        ("candidate", "id_table"),
        ("candidate", "rating_attribute_table"),
        ("candidate", "rating_id_table"),
    }
)


def _categorical_frame(relation) -> pd.DataFrame:
    """A DuckDB relation as a pandas frame whose text columns are categorical with sorted categories."""
    frame = relation.to_arrow_table().to_pandas(strings_to_categorical=True, self_destruct=True)
    for column in frame.columns:
        if isinstance(frame[column].dtype, pd.CategoricalDtype):
            # the values present, sorted, by integer work on the codes (pandas' remove_unused_categories and
            # set_categories take seconds per column at 10M rows)
            values = frame[column].array
            codes = np.asarray(values.codes, dtype=np.int64)
            categories = values.categories
            used = np.bincount(codes[codes >= 0], minlength=len(categories)) > 0
            kept = categories[used]
            if used.all() and kept.is_monotonic_increasing:
                continue
            order = np.argsort(np.asarray(kept, dtype=object), kind="stable")
            new_code = np.full(len(categories), -1, dtype=np.int64)
            new_code[np.flatnonzero(used)[order]] = np.arange(len(kept), dtype=np.int64)
            frame[column] = pd.Categorical.from_codes(np.where(codes >= 0, new_code[codes], -1), categories=kept[order])
    return frame


class ReplacingPandasTypeHandler(DuckDBPandasTypeHandler):
    """Store a pandas frame as ``CREATE OR REPLACE TABLE schema.table`` (zero rows included); load the
    tables of :data:`CATEGORICAL_TABLES` with categorical text columns."""

    def load_input(self, context: InputContext, table_slice: TableSlice, connection) -> pd.DataFrame:
        if (table_slice.schema, table_slice.table) not in CATEGORICAL_TABLES or table_slice.partition_dimensions:
            return super().load_input(context, table_slice, connection)
        return _categorical_frame(connection.sql(DuckDbClient.get_select_statement(table_slice)))

    def handle_output(self, context: OutputContext, table_slice: TableSlice, obj: pd.DataFrame, connection):
        frame = obj
        if frame.empty:
            # typed empty columns: object columns would otherwise become NULL-typed
            frame = frame.astype({c: "string" for c in frame.columns if frame[c].dtype == object})
        connection.register("msa_output_frame", frame)
        try:
            connection.execute(
                f'CREATE OR REPLACE TABLE "{table_slice.schema}"."{table_slice.table}" AS SELECT * FROM msa_output_frame'
            )
        finally:
            connection.unregister("msa_output_frame")
        context.add_output_metadata({"dagster/row_count": int(obj.shape[0])})


class PrivateDuckDbClient(DuckDbClient):
    """DuckDB client whose files are created under umask 077 and chmod-ed 0600 after use."""

    @staticmethod
    @contextmanager
    def connect(context, table_slice) -> Iterator:
        previous = os.umask(0o077)
        try:
            with DuckDbClient.connect(context, table_slice) as connection:
                yield connection
        finally:
            os.umask(previous)
            restrict_warehouse(context.resource_config["database"])


def _table_name(context: OutputContext | InputContext) -> str:
    if context.has_asset_key:
        return ".".join(context.asset_key.path)
    return context.name


class FailpointDbIOManager(DbIOManager):
    """``DbIOManager`` with the ``warehouse.*`` failpoints around every store and load."""

    def handle_output(self, context: OutputContext, obj: object) -> None:
        name = _table_name(context)
        failpoint(f"warehouse.before_store.{name}")
        super().handle_output(context, obj)
        failpoint(f"warehouse.after_store.{name}")

    def load_input(self, context: InputContext) -> object:
        upstream = context.upstream_output
        failpoint(f"warehouse.before_load.{_table_name(upstream) if upstream is not None else context.name}")
        return super().load_input(context)


class WarehouseIOManager(DuckDBIOManager):
    """DuckDB IO manager whose tables are always replaced, never appended to.

    It holds the release lock of the home (the database's directory) from the setup of a run's
    resources to their teardown, keeps the warehouse files private (0700 / 0600) and carries
    the ``warehouse.*`` failpoints (see the module docstring).
    """

    @staticmethod
    def type_handlers() -> Sequence[DbTypeHandler]:
        return [ReplacingPandasTypeHandler()]

    @staticmethod
    def default_load_type() -> type | None:
        return pd.DataFrame

    lock_wait_seconds: float = Field(
        default=0.0,
        ge=0.0,
        description="When another run holds the release lock of this home: 0 fails at once with "
        "'another release is running'; > 0 waits up to this many seconds for it.",
    )
    _lock: ReleaseLock | None = PrivateAttr(default=None)

    def setup_for_execution(self, context) -> None:
        from pipeline.resources import home_access_warning

        home = Path(self.database).resolve().parent
        home.mkdir(parents=True, exist_ok=True, mode=WAREHOUSE_DIRECTORY_MODE)  # an existing home keeps its mode
        warning = home_access_warning(home)
        if warning is not None:
            context.log.warning(warning)
        self._lock = acquire_release_lock(
            home,
            wait_seconds=self.lock_wait_seconds,
            hint="wait for it, or launch with resources.io_manager.config {database: "
            f"{self.database}, lock_wait_seconds: <seconds>}} (msa-release run --wait) to wait for it",
        )
        try:
            restrict_warehouse(self.database)
        except BaseException:
            self._lock.release()
            self._lock = None
            raise

    def teardown_after_execution(self, context) -> None:
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def create_io_manager(self, context) -> DbIOManager:
        return FailpointDbIOManager(
            db_client=PrivateDuckDbClient(),
            database=self.database,
            schema=self.schema_,
            type_handlers=self.type_handlers(),
            default_load_type=self.default_load_type(),
            io_manager_name="DuckDBIOManager",
        )
