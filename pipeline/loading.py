"""Reading the input table (CSV or Parquet, through DuckDB) and applying the missing-value policy.

No Dagster or Great Expectations here: the Dagster asset ``raw_records`` and the CLI call
:func:`load_records`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd

from pipeline.core.mixed_model import validate_model_columns

__all__ = ["InputError", "LoadedRecords", "file_sha256", "load_records", "resolve_input_path"]

PROJECT_ROOT = Path(__file__).resolve().parents[1]

#: Label that replaces every missing quasi-identifier value (kept as a value of its own).
MISSING_QUASI_IDENTIFIER = "?"


class InputError(ValueError):
    """The input file or the column configuration cannot be used; the message says what to do."""


@dataclass(frozen=True)
class LoadedRecords:
    """The input after the missing-value policy.

    Attributes
    ----------
    records
        ``row_id`` (int64, 1-based input line order; PRIVATE, never released) and the
        quasi-identifier and sensitive-attribute columns as text (object dtype).
    n_input
        Records read from the file.
    n_dropped_missing
        Records dropped because a sensitive attribute was missing.
    n_missing_quasi_identifier
        Kept records with at least one missing quasi-identifier (kept as ``"?"``).
    input_sha256
        SHA-256 of the input file's bytes.
    """

    records: pd.DataFrame
    n_input: int
    n_dropped_missing: int
    n_missing_quasi_identifier: int
    input_sha256: str


def resolve_input_path(path: str | Path) -> Path:
    """Resolve ``path`` against the working directory, then against the project root.

    Raises
    ------
    InputError
        If neither exists.
    """
    candidate = Path(path).expanduser()
    if candidate.is_absolute() or candidate.exists():
        resolved = candidate
    else:
        resolved = PROJECT_ROOT / candidate
    if not resolved.is_file():
        raise InputError(
            f"input file {str(path)!r} not found (looked in {Path.cwd()} and {PROJECT_ROOT}); "
            "pass an existing CSV or Parquet file with --input"
        )
    return resolved.resolve()


def file_sha256(path: Path) -> str:
    """SHA-256 hex digest of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _detect_format(path: Path, input_format: str) -> str:
    if input_format != "auto":
        return input_format
    return "parquet" if path.suffix.lower() in (".parquet", ".pq") else "csv"


def _read(
    path: Path,
    *,
    input_format: str,
    csv_header: bool,
    column_names: Sequence[str],
    delimiter: str,
) -> pd.DataFrame:
    connection = duckdb.connect()
    try:
        if input_format == "parquet":
            relation = connection.read_parquet(str(path))
            frame = relation.df()
            if column_names:
                if len(column_names) != frame.shape[1]:
                    raise InputError(
                        f"{path}: {len(column_names)} column names given but the Parquet file has {frame.shape[1]} columns"
                    )
                frame.columns = list(column_names)
            return frame
        if input_format != "csv":
            raise InputError(f"unknown input format {input_format!r}; use 'csv', 'parquet' or 'auto'")
        options: dict[str, object] = {
            "header": csv_header,
            "delim": delimiter,
            "quote": '"',
            "escape": '"',
            "all_varchar": True,
        }
        if column_names:
            options["names"] = list(column_names)
        elif not csv_header:
            raise InputError(
                f"{path}: a CSV without a header row needs the column names (--column-names a,b,c or config column_names)"
            )
        arguments = ", ".join(f"{k} := ${k}" for k in options)
        query = f"SELECT * FROM read_csv($path, {arguments})"
        return connection.execute(query, {"path": str(path), **options}).df()
    except duckdb.Error as error:
        raise InputError(f"cannot read {path} as {input_format}: {error}") from error
    finally:
        connection.close()


def load_records(
    path: str | Path,
    *,
    quasi_identifiers: Sequence[str],
    sensitive_attributes: Sequence[str],
    input_format: str = "auto",
    csv_header: bool = True,
    column_names: Sequence[str] = (),
    delimiter: str = ",",
    strip_whitespace: bool = True,
    missing_value_tokens: Sequence[str] = ("", "NULL", "?"),
) -> LoadedRecords:
    """Read the input table and apply the missing-value policy.

    Parameters
    ----------
    path
        CSV or Parquet file (relative paths: working directory, then project root).
    quasi_identifiers, sensitive_attributes
        Columns to keep; every other column is discarded at once.
    input_format
        ``"csv"``, ``"parquet"`` or ``"auto"`` (by extension).
    csv_header
        Whether the CSV's first row names the columns.
    column_names
        Names of all columns in file order (required for a CSV without header; renames a
        Parquet file's columns when given).
    delimiter
        CSV field separator.
    strip_whitespace
        Strip leading/trailing spaces of every value (Adult writes ``", "`` between fields).
    missing_value_tokens
        Values (after stripping) that mean "missing"; SQL NULL is always missing.

    Returns
    -------
    LoadedRecords
        Policy: records with a missing sensitive attribute are dropped (counted); a missing
        quasi-identifier is kept as the value ``"?"`` (counted).

    Raises
    ------
    InputError
        Missing or unreadable file, empty table, a configured column absent, duplicated or
        configured twice, fewer than 2 sensitive attributes, or no record left after the
        missing-value policy.
    """
    resolved = resolve_input_path(path)
    fmt = _detect_format(resolved, input_format)
    frame = _read(resolved, input_format=fmt, csv_header=csv_header, column_names=column_names, delimiter=delimiter)
    if len(set(frame.columns)) != len(frame.columns):
        duplicated = sorted({c for c in frame.columns if list(frame.columns).count(c) > 1})
        raise InputError(f"{resolved}: duplicate column names {duplicated}; rename them so that each is unique")
    try:
        validate_model_columns(list(frame.columns), quasi_identifiers, sensitive_attributes)
    except ValueError as error:
        raise InputError(f"{resolved}: {error}") from error
    n_input = len(frame)
    if n_input == 0:
        raise InputError(f"{resolved}: the table has no records")
    columns = [*quasi_identifiers, *sensitive_attributes]
    frame = frame[columns]
    tokens = set(missing_value_tokens)
    text = {}
    missing = {}
    for column in columns:
        series = frame[column]
        is_null = series.isna().to_numpy()
        values = series.astype(str)
        if strip_whitespace:
            values = values.str.strip()
        missing[column] = is_null | values.isin(tokens).to_numpy()
        text[column] = values.to_numpy(dtype=object)
    sensitive_missing = np.zeros(n_input, dtype=bool)
    for attribute in sensitive_attributes:
        sensitive_missing |= missing[attribute]
    quasi_missing = np.zeros(n_input, dtype=bool)
    for column in quasi_identifiers:
        text[column] = np.where(missing[column], MISSING_QUASI_IDENTIFIER, text[column])
        quasi_missing |= missing[column]
    keep = ~sensitive_missing
    records = pd.DataFrame({"row_id": np.arange(1, n_input + 1, dtype=np.int64)[keep]})
    for column in columns:
        records[column] = text[column][keep]
    if len(records) == 0:
        raise InputError(
            f"{resolved}: all {n_input} records have a missing value in a sensitive attribute "
            f"{list(sensitive_attributes)} (missing-value tokens {sorted(tokens)}); nothing can be published"
        )
    return LoadedRecords(
        records=records,
        n_input=n_input,
        n_dropped_missing=int(sensitive_missing.sum()),
        n_missing_quasi_identifier=int((quasi_missing & keep).sum()),
        input_sha256=file_sha256(resolved),
    )
