"""Asset-key conventions shared by the assets and the gates.

Asset key prefixes are DuckDB schemas of the warehouse: ``private`` (raw and intermediate
tables, never released) and ``candidate`` (the release tables before the gates).
"""

from collections.abc import Iterable

import dagster as dg

PRIVATE = "private"
CANDIDATE = "candidate"
#: Kinds shown in the UI for warehouse tables.
KINDS = {"duckdb", "pandas"}


def inputs(*, private: Iterable[str] = (), candidate: Iterable[str] = ()) -> dict[str, dg.AssetIn]:
    """``AssetIn`` per warehouse table, keyed by table name (the parameter name of the function)."""
    ins = {name: dg.AssetIn(key=[PRIVATE, name]) for name in private}
    ins.update({name: dg.AssetIn(key=[CANDIDATE, name]) for name in candidate})
    return ins
