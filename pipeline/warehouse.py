"""The private warehouse: DuckDB IO manager for intermediate tables.

The stock ``DuckDBPandasTypeHandler`` skips zero-row frames (so "no deleted record" would
leave no table, or a stale one) and, on re-materialization, deletes rows and inserts the new
frame positionally into the old table, which would silently mislabel columns after a change of
configuration (e.g. another column order). This handler replaces the table every time.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd
from dagster import OutputContext
from dagster._core.storage.db_io_manager import DbTypeHandler, TableSlice
from dagster_duckdb import DuckDBIOManager
from dagster_duckdb_pandas import DuckDBPandasTypeHandler

__all__ = ["WarehouseIOManager"]


class ReplacingPandasTypeHandler(DuckDBPandasTypeHandler):
    """Store a pandas frame as ``CREATE OR REPLACE TABLE schema.table`` (zero rows included)."""

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


class WarehouseIOManager(DuckDBIOManager):
    """DuckDB IO manager whose tables are always replaced, never appended to."""

    @staticmethod
    def type_handlers() -> Sequence[DbTypeHandler]:
        return [ReplacingPandasTypeHandler()]

    @staticmethod
    def default_load_type() -> type | None:
        return pd.DataFrame
