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
        quasi-identifier and sensitive-attribute columns as text, categorical dtype (sorted
        categories: exactly the values present).
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
    quasi_identifiers: Sequence[str],
    sensitive_attributes: Sequence[str],
) -> pd.DataFrame:
    """Read the configured columns as categorical text columns (one dictionary per column).

    The file's columns are checked first (duplicates, configured columns present); only the
    configured columns are then read, cast to text by DuckDB and handed over through Arrow as
    dictionary-encoded columns, so a table of millions of records never holds one Python
    string per cell.
    """
    connection = duckdb.connect()
    try:
        if input_format == "parquet":
            relation = connection.read_parquet(str(path))
            columns = list(relation.columns)
            if column_names:
                if len(column_names) != len(columns):
                    raise InputError(
                        f"{path}: {len(column_names)} column names given but the Parquet file has {len(columns)} columns"
                    )
                renamed = ", ".join(f"{_quote(old)} AS {_quote(new)}" for old, new in zip(columns, column_names))
                relation = relation.select(renamed) if len(set(column_names)) == len(column_names) else relation
                columns = list(column_names)
        elif input_format == "csv":
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
            relation = connection.sql(
                f"SELECT * FROM read_csv($path, {arguments})", params={"path": str(path), **options}
            )
            columns = list(relation.columns)
        else:
            raise InputError(f"unknown input format {input_format!r}; use 'csv', 'parquet' or 'auto'")
        if len(set(columns)) != len(columns):
            duplicated = sorted({c for c in columns if columns.count(c) > 1})
            raise InputError(f"{path}: duplicate column names {duplicated}; rename them so that each is unique")
        try:
            validate_model_columns(columns, quasi_identifiers, sensitive_attributes)
        except ValueError as error:
            raise InputError(f"{path}: {error}") from error
        wanted = [*quasi_identifiers, *sensitive_attributes]
        projection = ", ".join(f"CAST({_quote(c)} AS VARCHAR) AS {_quote(c)}" for c in wanted)
        table = relation.select(projection).to_arrow_table()
        return table.to_pandas(strings_to_categorical=True, self_destruct=True)
    except duckdb.Error as error:
        raise InputError(f"cannot read {path} as {input_format}: {error}") from error
    finally:
        connection.close()


def _quote(name: str) -> str:
    return '"' + str(name).replace('"', '""') + '"'


def _clean_column(series: pd.Series, *, strip_whitespace: bool, tokens: set[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(codes, categories, missing) of a categorical text column after stripping; ``missing``
    marks SQL NULLs and missing-value tokens. Work is done once per distinct value."""
    if not isinstance(series.dtype, pd.CategoricalDtype):
        series = series.astype("category")
    raw_categories = pd.Index(series.cat.categories.astype(str))
    cleaned = raw_categories.str.strip() if strip_whitespace else raw_categories
    categories, inverse = np.unique(np.asarray(cleaned, dtype=object), return_inverse=True)
    category_missing = np.isin(categories, list(tokens))
    codes = series.cat.codes.to_numpy()
    is_null = codes < 0
    new_codes = np.where(is_null, -1, inverse.reshape(-1)[np.where(is_null, 0, codes)]) if len(raw_categories) else np.full(len(codes), -1)
    missing = is_null | (category_missing[np.where(new_codes < 0, 0, new_codes)] if len(categories) else True)
    return new_codes.astype(np.int64), categories.astype(object), np.asarray(missing, dtype=bool)


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
    frame = _read(
        resolved, input_format=fmt, csv_header=csv_header, column_names=column_names, delimiter=delimiter,
        quasi_identifiers=quasi_identifiers, sensitive_attributes=sensitive_attributes,
    )
    n_input = len(frame)
    if n_input == 0:
        raise InputError(f"{resolved}: the table has no records")
    columns = [*quasi_identifiers, *sensitive_attributes]
    tokens = set(missing_value_tokens)
    cleaned = {}
    missing = {}
    for column in columns:
        codes, categories, missing[column] = _clean_column(frame[column], strip_whitespace=strip_whitespace, tokens=tokens)
        cleaned[column] = (codes, categories)
    del frame
    sensitive_missing = np.zeros(n_input, dtype=bool)
    for attribute in sensitive_attributes:
        sensitive_missing |= missing[attribute]
    quasi_missing = np.zeros(n_input, dtype=bool)
    for column in quasi_identifiers:
        quasi_missing |= missing[column]
    keep = ~sensitive_missing
    records = pd.DataFrame({"row_id": np.arange(1, n_input + 1, dtype=np.int64)[keep]})
    for column in columns:
        codes, categories = cleaned[column]
        is_missing = missing[column]
        if column in quasi_identifiers and is_missing.any():
            # a missing quasi-identifier is kept as a value of its own
            if MISSING_QUASI_IDENTIFIER not in set(categories.tolist()):
                categories = np.sort(np.append(categories, MISSING_QUASI_IDENTIFIER).astype(object))
                order = {value: k for k, value in enumerate(categories.tolist())}
                remap = np.asarray([order[v] for v in cleaned[column][1].tolist()], dtype=np.int64)
                codes = np.where(codes < 0, -1, remap[np.where(codes < 0, 0, codes)] if len(remap) else -1)
            codes = np.where(is_missing, categories.tolist().index(MISSING_QUASI_IDENTIFIER), codes)
        kept_codes = codes[keep]
        used = np.unique(kept_codes[kept_codes >= 0])
        # keep only the values present in the kept records (a dropped record leaves no trace)
        remap = np.full(len(categories), -1, dtype=np.int64)
        remap[used] = np.arange(len(used))
        records[column] = pd.Categorical.from_codes(remap[kept_codes], categories=pd.Index(categories[used], dtype=object))
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
