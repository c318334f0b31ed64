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
from typing import Any
from pathlib import Path

import pandas as pd
from dagster import InputContext, OutputContext
from dagster._core.storage.db_io_manager import DbIOManager, DbTypeHandler, TableSlice
from dagster_duckdb import DuckDBIOManager
from dagster_duckdb.io_manager import DuckDbClient
from dagster_duckdb_pandas import DuckDBPandasTypeHandler
from pydantic import Field, PrivateAttr

from pipeline.core.columns import present_sorted_categories
from pipeline.errors import UnusableInputError
from pipeline.release.failpoints import failpoint
from pipeline.release.locking import ReleaseLock, acquire_release_lock

__all__ = [
    "LOCK_WAIT_TAG",
    "WAREHOUSE_DIRECTORY_MODE",
    "WAREHOUSE_FILE_MODE",
    "WarehouseCorrupt",
    "WarehouseIOManager",
    "WarehouseUnusable",
    "check_warehouse",
    "home_preparation_message",
    "read_warehouse_columns",
    "remove_warehouse",
    "restrict_warehouse",
]

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


class WarehouseUnusable(UnusableInputError):
    """The warehouse file cannot be opened (not writable, owned by another user, a symlink loop, held open by another
    program): exit status 2, like a home that cannot be used; the message says what to do."""


class WarehouseCorrupt(WarehouseUnusable):
    """The warehouse file is not a valid DuckDB database (damaged, truncated, overwritten): exit status 2; the message
    says that it is a private cache and how to rebuild it."""


#: What DuckDB says about a file that is not, or no longer, a valid database (the first line of its error).
_CORRUPTION_MARKERS = (
    "not a valid DuckDB database file",
    "Corrupt database file",
    "Serialization Error",
    "INTERNAL Error",
    "database file was created by",  # another, incompatible storage version
)

#: How to rebuild the warehouse (the end of every message about it).
REBUILD_HINT = (
    "the warehouse is a private cache of this home's intermediate tables, rebuilt from the input by every run and never "
    "published, so nothing is lost: run again with `msa-release run --rebuild-warehouse` (or delete {database} and "
    "{database}.wal, then launch the job again)"
)


def warehouse_files(database: Path | str) -> list[Path]:
    """The warehouse's files: ``database``, its ``.wal`` and DuckDB's spill directory ``<database>.tmp``."""
    database = Path(database)
    return [database, database.with_name(database.name + ".wal"), database.with_name(database.name + ".tmp")]


def remove_warehouse(database: Path | str) -> list[Path]:
    """Delete the warehouse (``--rebuild-warehouse``): its file, ``.wal`` and spill directory; the next run rebuilds it.

    Only these paths are removed (a symlink itself, never its target). Call with the release lock held.

    Returns
    -------
    list of Path
        The paths that existed and were removed.

    Raises
    ------
    OSError
        A file cannot be removed (the directory is not writable).
    """
    import shutil

    removed = []
    for path in warehouse_files(database):
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path)
        elif path.is_symlink() or path.exists():
            path.unlink()
        else:
            continue
        removed.append(path)
    return removed


def home_preparation_message(home: Path | str, error: OSError) -> str:
    """One line saying why the release lock of ``home`` could not be taken, or the leftovers of a killed run removed,
    and what to do (``error``: the ``OSError`` of :func:`pipeline.release.locking.acquire_release_lock`)."""
    home = Path(home)
    path = Path(error.filename) if getattr(error, "filename", None) else home
    reason = error.strerror or str(error)
    if path.name == "release.lock":
        return (
            f"the release lock {path} cannot be opened ({reason}); it must be a regular file you can write: another "
            "user's file or a directory left there? Remove it when no run is using this home (the lock is the "
            "kernel's, held by a running process, never by the file) or use a home of your own (--home)"
        )
    if path.parent.name == "releases":
        return (
            f"{path} cannot be removed ({reason}): msa-release removes the leftovers of a killed run (.staging-*, "
            ".deleting-*, .LATEST.tmp) from releases/ before each run, and this one is not what a run leaves (a "
            "directory or another user's file?); move it out of releases/ and retry"
        )
    return f"the release home {home} cannot be prepared for a run ({path}: {reason}); make it a directory you can write"


def check_warehouse(database: Path | str) -> None:
    """Open the warehouse once, in under a second, and refuse it with a clear error if it cannot be used.

    Without this, the DuckDB IO manager retries a failed connection for about two minutes (``dagster_duckdb``'s
    back-off) and then fails with DuckDB's bare error. A missing file is fine (DuckDB creates it, under umask 077).

    Raises
    ------
    WarehouseCorrupt
        The file is not a valid DuckDB database (DuckDB's first line quoted; it never holds a value of the data).
    WarehouseUnusable
        The file cannot be opened: permission denied or read-only, a symlink loop, a directory, or another program
        holds it open.
    """
    import duckdb

    database = Path(database)
    try:
        if database.is_symlink():
            database.resolve(strict=True)  # a loop or a dangling link is an OSError / RuntimeError here
        if database.is_dir():
            raise IsADirectoryError(21, "Is a directory", str(database))
    except (OSError, RuntimeError) as error:
        reason = getattr(error, "strerror", None) or str(error)
        raise WarehouseUnusable(
            f"the warehouse {database} cannot be opened ({reason}); " + REBUILD_HINT.format(database=database),
            file=str(database),
        ) from error
    previous = os.umask(0o077)
    try:
        connection = duckdb.connect(str(database))
        try:
            connection.execute("SELECT count(*) FROM duckdb_tables()").fetchall()
        finally:
            connection.close()
    except duckdb.Error as error:
        first = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
        if any(marker in str(error) for marker in _CORRUPTION_MARKERS):
            raise WarehouseCorrupt(
                f"the warehouse {database} is damaged: DuckDB says {first!r}; " + REBUILD_HINT.format(database=database),
                file=str(database),
            ) from error
        if "no space left" in first.lower() or "disk is full" in first.lower():
            what = "the disk is full: free space under $MSA_RELEASE_HOME (old releases, the warehouse) and retry"
        elif "input/output error" in first.lower():
            what = "the machine reported an I/O error: check the disk (e.g. dmesg, free space) and retry"
        elif "lock" in first.lower():
            what = "another program holds it open (a DuckDB shell, a notebook?): close it and retry"
        elif "permission denied" in first.lower() or "read-only" in first.lower():
            what = (
                "it must be a file you own and can write: fix its owner and mode (chown, chmod 600) or point --home / "
                "$MSA_RELEASE_HOME at a home of your own; or " + REBUILD_HINT.format(database=database)
            )
        else:
            what = REBUILD_HINT.format(database=database)
        raise WarehouseUnusable(
            f"the warehouse {database} cannot be opened for writing (DuckDB says {first!r}); {what}", file=str(database)
        ) from error
    finally:
        os.umask(previous)


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
            tidy = present_sorted_categories(frame[column].array)
            if tidy is not frame[column].array:
                frame[column] = tidy
    return frame


def read_warehouse_columns(database: Path | str, schema: str, table: str, columns: Sequence[str]) -> pd.DataFrame:
    """``columns`` of the warehouse table ``schema.table`` (text columns categorical, as the IO manager loads them),
    read only when needed: gate 4 reads the sensitive attributes of ``private.raw_records`` only when it refuses
    (issue 15's diagnosis), instead of loading the whole table in every run. Call it inside a step (the release lock
    held by the run); the IO manager's connections are closed between loads.

    Raises
    ------
    duckdb.Error
        The table or a column is missing.
    """
    import duckdb

    selected = ", ".join('"' + column.replace('"', '""') + '"' for column in columns)
    previous = os.umask(0o077)
    try:
        with duckdb.connect(str(database)) as connection:
            return _categorical_frame(connection.sql(f'SELECT {selected} FROM "{schema}"."{table}"'))
    finally:
        os.umask(previous)
        restrict_warehouse(database)


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
    """DuckDB client of one run: one connection to the warehouse, opened at the run's first load or store and closed
    by :meth:`close` (the IO manager's teardown), instead of a connection per load and per store (a run loads and
    stores about 90 tables; each open and close of the file cost about 30 ms, 14 ms of CPU, on Adult: issue 18).

    Every use runs under umask 077 (files DuckDB creates meanwhile, e.g. the ``.wal``, are private) and chmods the
    warehouse files 0600 after it. The connection has the configuration ``connection_config`` gives (none by default,
    so :func:`read_warehouse_columns` inside a step shares its database instance). The run holds the release lock,
    so no other process opens the warehouse meanwhile; the connection is used by the run's steps one at a time
    (in-process executor)."""

    def __init__(self, database: str, connection_config: dict | None = None) -> None:
        self._database = database
        self._connection_config = dict(connection_config or {})
        self._connection = None

    @contextmanager
    def connect(self, context, table_slice) -> Iterator:  # type: ignore[override]
        import duckdb
        from dagster._utils.backoff import backoff

        previous = os.umask(0o077)
        try:
            if self._connection is None:
                self._connection = backoff(
                    fn=duckdb.connect,
                    retry_on=(RuntimeError, duckdb.IOException),
                    kwargs={"database": self._database, "read_only": False, "config": self._connection_config},
                    max_retries=10,
                )
            yield self._connection
        finally:
            os.umask(previous)
            restrict_warehouse(self._database)

    def close(self) -> None:
        """Close the run's connection (DuckDB checkpoints the ``.wal`` into the file); nothing when none was opened."""
        if self._connection is None:
            return
        connection, self._connection = self._connection, None
        previous = os.umask(0o077)
        try:
            connection.close()
        finally:
            os.umask(previous)
            restrict_warehouse(self._database)

    @staticmethod
    def delete_table_slice(context: OutputContext, table_slice: TableSlice, connection) -> None:
        """Nothing for a whole table: :class:`ReplacingPandasTypeHandler` replaces it (``CREATE OR REPLACE``), so
        deleting its rows first would write it twice; a partition is deleted as ``DuckDbClient`` does."""
        if table_slice.partition_dimensions:
            DuckDbClient.delete_table_slice(context, table_slice, connection)


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


#: Run tag asking the warehouse IO manager to wait this many seconds for the release lock (the inbox sensor's runs:
#: the run queue starts them one at a time, and they wait for anything outside the queue, e.g. a CLI run).
LOCK_WAIT_TAG = "msa_release/lock_wait_seconds"


def _tagged_lock_wait(context) -> float:
    """``LOCK_WAIT_TAG`` of the run being set up, in seconds; 0 when absent or not a finite number >= 0."""
    run = getattr(context, "dagster_run", None)
    try:
        seconds = float(run.tags.get(LOCK_WAIT_TAG, 0)) if run is not None else 0.0
    except ValueError:
        return 0.0
    return seconds if 0.0 <= seconds < float("inf") else 0.0


class HomeMismatch(UnusableInputError):
    """A run whose configuration puts the releases (``store.home``) in another home than the warehouse and its release
    lock (``io_manager.database``): its publish would bypass the lock that serializes the home's runs and, with
    another home's registry, the refusal of a recomposition (exit 2)."""


def run_config_override(context: Any, resource: str, field: str) -> str | None:
    """The value the run's config gives ``resources.<resource>.config.<field>``, or None when the run config does not
    set it (the code location's value then applies). ``context``: a resource's init context."""
    run = getattr(context, "dagster_run", None)
    config = getattr(run, "run_config", None) or {}
    section = ((config.get("resources") or {}).get(resource) or {}) if isinstance(config, dict) else {}
    value = (section.get("config") or {}).get(field) if isinstance(section, dict) else None
    return None if value is None else str(value)


def check_one_home(releases_home: str | Path, database: str | Path) -> None:
    """Refuse a run whose releases would go to another home than its warehouse's (red team, session 38: a Launchpad
    run config with ``store: {config: {home: other}}`` published in a fresh home, outside the first home's registry
    and lock; one with ``io_manager: {config: {database: other/warehouse.duckdb}}`` took another lock, so two runs
    published overlapping releases in one home at once).

    Raises
    ------
    HomeMismatch
        ``releases_home`` is not the directory of ``database``.
    """
    releases, warehouse = Path(releases_home).expanduser().resolve(), Path(database).expanduser().resolve().parent
    if releases != warehouse:
        raise HomeMismatch(
            f"this run would publish under {releases} but keep its warehouse and release lock in {warehouse}: one run "
            "uses one home, whose lock serializes its runs and whose registry refuses a second, different release of "
            "the same records. Set resources.store.config.home and resources.io_manager.config.database "
            "(<home>/warehouse.duckdb) to the same home, or leave both to the code location (msa-release --home, "
            "$MSA_RELEASE_HOME)"
        )


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
    _client: PrivateDuckDbClient | None = PrivateAttr(default=None)

    def setup_for_execution(self, context) -> None:
        from pipeline.resources import home_access_warning

        releases_home = run_config_override(context, "store", "home")
        if releases_home is not None:  # the store's home set by the run: it must be this warehouse's home
            check_one_home(releases_home, self.database)
        home = Path(self.database).resolve().parent
        home.mkdir(parents=True, exist_ok=True, mode=WAREHOUSE_DIRECTORY_MODE)  # an existing home keeps its mode
        warning = home_access_warning(home)
        if warning is not None:
            context.log.warning(warning)
        try:
            self._lock = acquire_release_lock(
                home,
                wait_seconds=max(self.lock_wait_seconds, _tagged_lock_wait(context)),
                hint="wait for it, or launch with resources.io_manager.config {database: "
                f"{self.database}, lock_wait_seconds: <seconds>}} (msa-release run --wait) to wait for it",
            )
        except OSError as error:
            raise WarehouseUnusable(home_preparation_message(home, error)) from error
        try:
            check_warehouse(self.database)
            restrict_warehouse(self.database)
        except BaseException:
            self._lock.release()
            self._lock = None
            raise

    def teardown_after_execution(self, context) -> None:
        try:
            if self._client is not None:
                client, self._client = self._client, None
                client.close()  # before the lock is released: the next run opens a checkpointed file
        finally:
            if self._lock is not None:
                self._lock.release()
                self._lock = None

    def create_io_manager(self, context) -> DbIOManager:
        self._client = PrivateDuckDbClient(self.database, self.connection_config)
        return FailpointDbIOManager(
            db_client=self._client,
            database=self.database,
            schema=self.schema_,
            type_handlers=self.type_handlers(),
            default_load_type=self.default_load_type(),
            io_manager_name="DuckDBIOManager",
        )
