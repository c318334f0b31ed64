"""Reading the input table (CSV or Parquet, through DuckDB) and applying the missing-value policy.

No Dagster or Great Expectations here: the Dagster asset ``raw_records`` and the CLI call
:func:`load_records`.
"""

from __future__ import annotations

import csv
import difflib
import gzip
import hashlib
import io
import json
import re
import stat
import string
import unicodedata
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from contextvars import ContextVar
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from pipeline.core.values import canonical_spellings, merge_look_alike_values
from pipeline.home import GLOB_CHARACTERS
from pipeline.core.mixed_model import RESERVED_COLUMNS, validate_model_columns
from pipeline.errors import UnusableInputError
from pipeline.vocabulary import setting, setting_example

__all__ = [
    "DEFAULT_MAX_VALUE_LENGTH",
    "InfeasibleInput",
    "InputError",
    "InputScan",
    "LoadedRecords",
    "ValueTooLong",
    "check_ell_feasible",
    "check_value_lengths",
    "clean_value_table",
    "detect_csv_header",
    "check_file_unchanged",
    "file_sha256",
    "file_state",
    "input_connection",
    "load_records",
    "open_input_scan",
    "resolve_input_path",
]

PROJECT_ROOT = Path(__file__).resolve().parents[2]

#: Label that replaces every missing quasi-identifier value (kept as a value of its own).
MISSING_QUASI_IDENTIFIER = "?"

#: Default of the longest value accepted in a configured column, in bytes of UTF-8 (``max_value_length``, issue 14).
DEFAULT_MAX_VALUE_LENGTH = 4096


class InputError(UnusableInputError, ValueError):
    """The input file or the column configuration cannot be used; the message says what to do."""


class InfeasibleInput(InputError):
    """A readable table that no model can make ℓ-diverse (too few records or distinct values)."""


def input_cleaning_metadata(
    dropped_missing_by_attribute: Mapping[str, int],
    missing_quasi_identifier_by_column: Mapping[str, int],
    look_alike_values: Mapping[str, Mapping[str, int]],
) -> dict[str, int]:
    """The input step's numeric metadata of what reading changed, counts only (the same keys on both engines):
    records dropped per sensitive attribute, missing quasi-identifier values per column, look-alike spellings merged
    and records respelled, in all and per column."""
    return {
        **{f"n_dropped_missing_{column}": int(n) for column, n in dropped_missing_by_attribute.items()},
        **{f"n_missing_quasi_identifier_{column}": int(n) for column, n in missing_quasi_identifier_by_column.items()},
        "n_look_alike_values_merged": sum(int(c["n_values_merged"]) for c in look_alike_values.values()),
        "n_records_respelled": sum(int(c["n_records_respelled"]) for c in look_alike_values.values()),
        **{f"n_look_alike_values_merged_{column}": int(c["n_values_merged"]) for column, c in look_alike_values.items()},
    }


def look_alike_warning(look_alike_values: Mapping[str, Mapping[str, int]]) -> str | None:
    """The input step's warning about look-alike spellings merged (counts only, never a spelling); None when none."""
    if not look_alike_values:
        return None
    return (
        "look-alike spellings merged before counting diversity (case, Unicode compatibility forms, invisible "
        "characters): "
        + ", ".join(
            f"{column}: {c['n_values_merged']} spelling(s), {c['n_records_respelled']} record(s)"
            for column, c in look_alike_values.items()
        )
    )


def note_look_alikes(error: InfeasibleInput, spellings_merged: Mapping[str, int]) -> InfeasibleInput:
    """``error`` with a sentence saying that look-alike spellings of its column were merged before the values were
    counted, when they were (``spellings_merged``: column -> spellings merged into another); ``error`` itself
    otherwise. Red team, session 39: a column of ``yes``/``YES`` was refused as "the same value in all records", which
    is false of the file as written."""
    text = str(error)
    named = {c: int(n) for c, n in spellings_merged.items() if int(n) and (c == error.column or repr(str(c)) in text)}
    if not named:
        return error
    detail = "; ".join(f"in {c!r}, {n} spelling(s)" for c, n in named.items())
    return InfeasibleInput(
        f"{text} ({detail} differing from another only by upper/lower case, Unicode compatibility form or invisible "
        "characters were merged into it before the values were counted: they are one value; make them distinct in "
        "the input if they are not)",
        file=error.file,
        column=error.column,
    )


class ValueTooLong(InputError):
    """A value of a configured column longer than ``max_value_length`` bytes (UTF-8); refused when the input is read."""


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
    look_alike_values
        Per configured column with look-alike spellings (:mod:`pipeline.core.values`):
        ``n_values_merged`` and ``n_records_respelled`` (counts only). Empty when none.
    dropped_missing_by_attribute
        Sensitive attribute -> records read with a missing value in it (all dropped), for the attributes that had
        any, in schema order. A record missing several attributes counts under each, so the counts can add up to
        more than ``n_dropped_missing``. Counts only, never a value.
    missing_quasi_identifier_by_column
        Quasi-identifier -> kept records with a missing value in it (published as ``"?"``), for those that had any.
    """

    records: pd.DataFrame
    n_input: int
    n_dropped_missing: int
    n_missing_quasi_identifier: int
    input_sha256: str
    look_alike_values: dict = field(default_factory=dict)
    dropped_missing_by_attribute: dict[str, int] = field(default_factory=dict)
    missing_quasi_identifier_by_column: dict[str, int] = field(default_factory=dict)


def input_cleaning_counts(
    missing_quasi_identifier_by_column: Mapping[str, int], look_alike_values: Mapping[str, Mapping[str, int]]
) -> dict[str, str]:
    """The input summary's JSON columns of what reading changed, counts only, never a value: per quasi-identifier the
    records whose value was missing (published as ``?``), and per column the look-alike spellings merged into another
    (case, Unicode compatibility forms, invisible characters; :func:`pipeline.io.loading.load_records`)."""
    return {
        "missing_quasi_identifier_by_column": json.dumps({str(c): int(n) for c, n in missing_quasi_identifier_by_column.items()}),
        "look_alike_spellings_merged": json.dumps({str(c): int(v["n_values_merged"]) for c, v in look_alike_values.items()}),
    }


def resolve_input_path(path: str | Path) -> Path:
    """Resolve ``path`` against the working directory, then against the project root.

    Raises
    ------
    InputError
        If neither exists, if it is not a regular file, or if the resolved path holds a character of
        :data:`GLOB_CHARACTERS` (DuckDB would read every file the pattern matches).
    """
    candidate = Path(path).expanduser()
    if candidate.is_absolute() or candidate.exists():
        resolved = candidate
    else:
        resolved = PROJECT_ROOT / candidate
    if resolved.is_dir():
        raise InputError(f"input {str(path)!r} is a directory; pass a CSV or Parquet file with {setting('input_path')}")
    if resolved.exists() and not resolved.is_file():
        # a FIFO would block every read (and the SHA-256 of a stream is not a file's); a device is no table
        raise InputError(
            f"input {str(path)!r} is not a regular file (it is a {_special_file_kind(resolved)}); pass a regular CSV or "
            f"Parquet file with {setting('input_path')} (copy a pipe's or a device's content into a file first)"
        )
    if not resolved.is_file():
        if resolved.is_symlink():
            reason = "is a symbolic link to a file that does not exist, or a loop of links"
        elif candidate.is_absolute():
            reason = "not found"
        else:
            searched = list(dict.fromkeys([str(Path.cwd()), str(PROJECT_ROOT)]))  # each directory once
            reason = f"not found (looked in {' and '.join(searched)})"
        raise InputError(f"input file {str(path)!r} {reason}; pass an existing CSV or Parquet file with {setting('input_path')}")
    resolved = resolved.resolve()
    pattern = sorted({c for c in str(resolved) if c in GLOB_CHARACTERS})
    if pattern:
        # DuckDB's read_csv / read_parquet expand a path as a glob pattern: 'x?.csv' also read x1.csv, whose records
        # were published with the file's (red team, session 39)
        raise InputError(
            f"input file {str(path)!r}: its path holds {' '.join(pattern)}, which the reader takes as a file-name "
            "pattern (it would read every file the pattern matches, not this one alone); rename the file (or the "
            f"folder holding {' '.join(pattern)}), or copy it to a plain name, and pass that with {setting('input_path')}"
        )
    return resolved


def _special_file_kind(path: Path) -> str:
    """What a path that exists but is neither a directory nor a regular file is, for a message."""
    mode = path.stat().st_mode
    for test, kind in (
        (stat.S_ISFIFO, "named pipe (FIFO)"),
        (stat.S_ISSOCK, "socket"),
        (stat.S_ISCHR, "character device"),
        (stat.S_ISBLK, "block device"),
    ):
        if test(mode):
            return kind
    return "special file"


def file_sha256(path: Path) -> str:
    """SHA-256 hex digest of a file, read in 1 MiB blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _file_state(path: Path) -> tuple[int, int, str]:
    """(size in bytes, modification time in ns, SHA-256) of a file: compared before and after reading."""
    status = path.stat()
    return status.st_size, status.st_mtime_ns, file_sha256(path)


def check_file_unchanged(path: Path, before: tuple[int, int, str]) -> str:
    """Refuse a file that changed while it was read, as :func:`load_records` does; its SHA-256 when unchanged.

    Parameters
    ----------
    path
        The input file.
    before
        :func:`file_state` taken before the first read.

    Raises
    ------
    InputError
        Size, modification time or SHA-256 differ (naming which, and what to do).
    """
    after = _file_state(path)
    if after != before:
        changed = [what for what, b, a in zip(("size", "modification time", "content (SHA-256)"), before, after) if a != b]
        raise InputError(
            f"{path}: the file changed while it was being read ({', '.join(changed)} differ before and after); "
            "it is probably still being written or copied: wait until it is complete and stable, then retry"
        )
    return after[2]


def file_state(path: Path) -> tuple[int, int, str]:
    """(size in bytes, modification time in ns, SHA-256) of a file, for :func:`check_file_unchanged`."""
    return _file_state(path)


def _detect_format(path: Path, input_format: str) -> str:
    if input_format != "auto":
        return input_format
    return "parquet" if path.suffix.lower() in (".parquet", ".pq") else "csv"


def _check_columns(
    path: Path,
    names: Sequence[str],
    quasi_identifiers: Sequence[str],
    sensitive_attributes: Sequence[str],
    *,
    origin: str,
    delimiter: str | None = None,
    for_model: bool = True,
) -> None:
    """Check the configured columns against the file's column names, with hints for the usual mistakes.

    A CSV's header row may be a record (a headerless file read with a header), so its cells are
    never quoted but for the configured names: the messages give how many columns the row has,
    positions, and the ``--no-header`` / ``--column-names`` hint. Names from ``--column-names`` or a
    Parquet schema are configuration or schema, and are listed.

    Raises
    ------
    InputError
        A duplicated column name, a configured column absent (with a "did you mean" and a
        wrong-delimiter hint), or any error of
        :func:`pipeline.core.mixed_model.validate_model_columns`.
    """
    names = list(names)
    configured = [*quasi_identifiers, *sensitive_attributes]
    header_may_be_data = origin == "the header row"
    no_header_hint = f"if the file has no header row (its first line is a record), read it with {_without_header_example()}"
    advise = _ADVICE.get()  # off while an audit reads (without_settings_advice)
    or_no_header = f", or {no_header_hint}" if advise else ""
    columns_settings = f"{setting('quasi_identifiers')} / {setting('sensitive_attributes')}"
    duplicated = sorted({n for n in names if names.count(n) > 1})
    if duplicated:
        positions = {n: [k for k, m in enumerate(names, start=1) if m == n] for n in duplicated}
        if header_may_be_data:
            named = {n: p for n, p in positions.items() if n in configured}
            unnamed = sorted(p for n, p in positions.items() if n not in configured)
            described = " and ".join(
                [f"names column(s) {sorted(named)} more than once (1-based positions {named})"] * bool(named)
                + [f"repeats a name at 1-based positions {unnamed}"] * bool(unnamed)
            )
            raise InputError(f"{path}: {origin} {described}; rename them so that every column name is unique{or_no_header}")
        raise InputError(
            f"{path}: {origin} names column(s) {duplicated} more than once (1-based positions {positions}); "
            "rename them so that every column name is unique"
        )
    case_variants = _case_variants(names)
    if case_variants:
        # DuckDB (the reader and the warehouse) compares names ignoring ASCII case: 'a' and 'A' are one column there
        positions = [[k for k, m in enumerate(names, start=1) if _fold_case(m) == folded] for folded in case_variants]
        if header_may_be_data:
            named = sorted({n for n in names if n in configured and _fold_case(n) in case_variants})
            raise InputError(
                f"{path}: {origin} has column names that differ only in upper/lower case at 1-based positions "
                f"{positions}" + (f" (among them the configured {named})" if named else "") + "; DuckDB does not tell "
                f"such names apart: rename them so that every column name is unique ignoring case{or_no_header}"
            )
        listed = [[names[k - 1] for k in group] for group in positions]
        raise InputError(
            f"{path}: {origin} has column names that differ only in upper/lower case: {listed} (1-based positions "
            f"{positions}); DuckDB does not tell such names apart (it would rename one silently): rename them so that "
            "every column name is unique ignoring case"
        )
    missing = [c for c in dict.fromkeys(configured) if c not in names]
    if missing:
        hints = []
        for column in missing:
            folded = [n for n in names if _loose_name(n) == _loose_name(column)]
            # a close but different header cell may be a value: only case, space and Unicode-form variants are named
            close = folded or ([] if header_may_be_data else difflib.get_close_matches(column, names, n=1, cutoff=0.75))
            if close:
                form = (
                    " (the same letters written in another Unicode normalization form, NFC and NFD: configure the name "
                    "as the file writes it, or normalize the header)"
                    if unicodedata.normalize("NFC", close[0]) == unicodedata.normalize("NFC", column)
                    else ""
                )
                hints.append(f"{column!r}: did you mean {close[0]!r}?{form}")
        for name in names:
            # the command line splits its column lists at commas: a name that holds one cannot be given there
            parts = [part.strip() for part in name.split(",") if part.strip()]
            if "," in name and parts and all(part in missing for part in parts):
                hints.append(
                    f"the column {name!r} holds a comma, and the command line's column lists are split at commas: "
                    "rename that column in the file (a CSV's header row, a Parquet file's schema), or configure it "
                    "where names are a list: the Dagster launchpad's run config or the inbox's settings.json (a "
                    "JSON list)."
                )
        if delimiter is not None and len(names) == 1:
            found = [d for d in (";", "\t", "|", ",") if d != delimiter and d in names[0]]
            if found:
                set_it = f"{setting_example('delimiter', repr(found[0]))}; " if advise else ""
                hints.append(
                    f"the header was read as a single column: is the delimiter {found[0]!r}? "
                    f"({set_it}the current one is {delimiter!r})"
                )
        # each hint a sentence of its own, then the settings' advice (a sentence of its own after a hint)
        hinted = "".join(" " + (h if h.endswith((".", "?")) else h + ".") for h in hints)
        if header_may_be_data:
            present = [c for c in dict.fromkeys(configured) if c in names]
            advice = f"{no_header_hint}; otherwise fix {columns_settings}, or the file's column names"
            finding = (
                f"{path}: configured column(s) {missing} are not in the input (the header row has {len(names)} "
                f"column(s); of the configured ones it names {present if present else 'none'})"
            )
        else:
            advice = f"fix {columns_settings}, or the file's column names"
            finding = f"{path}: configured column(s) {missing} are not in the input (its columns, from {origin}: {names})"
        if not advise:
            raise InputError(finding + (";" + hinted if hinted else ""))
        raise InputError(finding + (";" + hinted + " " + advice[0].upper() + advice[1:] if hinted else "; " + advice))
    try:
        if for_model:  # the publication models' column rules (2 sensitive attributes, …); not for reading columns alone
            validate_model_columns(names, quasi_identifiers, sensitive_attributes)
    except ValueError as error:
        raise InputError(f"{path}: {error}") from error
    reserved = [c for c in dict.fromkeys(configured) if _fold_case(c) in RESERVED_COLUMNS]
    if reserved:
        raise InputError(
            f"{path}: configured column name(s) {reserved} differ from the release contract's reserved name(s) "
            f"{sorted({_fold_case(c) for c in reserved})} only in upper/lower case, and column names are compared "
            f"ignoring case (DuckDB); rename them in the input (or with {setting('column_names')})",
            file=str(path),
            column=reserved[0],
        )


#: Whether the reader's messages end with what to change in the run's settings (``--no-header``,
#: ``--quasi-identifiers`` …): off while ``msa-release audit`` reads a raw table as a release's manifest says, where
#: the remedy is the release's own input file (newcomer, session 40: the audit named options it does not have).
_ADVICE: ContextVar[bool] = ContextVar("msa_release_reader_advice", default=True)


@contextmanager
def without_settings_advice() -> Iterator[None]:
    """Read without the run-settings advice in the messages (:data:`_ADVICE`); the caller adds its own."""
    token = _ADVICE.set(False)
    try:
        yield
    finally:
        _ADVICE.reset(token)


def _loose_name(name: str) -> str:
    """``name`` without surrounding spaces, in Unicode NFC and case-folded: how a configured name is matched to a
    header cell for a "did you mean" hint (red team, session 39: ``diagnosé`` written in NFD in the header, NFC in the
    configuration, got no hint)."""
    return unicodedata.normalize("NFC", name.strip()).casefold()


def _fold_case(name: str) -> str:
    """``name`` as DuckDB compares identifiers: ASCII letters lowered, every other character kept ('É' != 'é')."""
    return name.translate(_ASCII_LOWER)


_ASCII_LOWER = str.maketrans(string.ascii_uppercase, string.ascii_lowercase)


def _case_variants(names: Sequence[str]) -> list[str]:
    """Folded names (:func:`_fold_case`) that two or more different ``names`` share, in order of first occurrence."""
    spellings: dict[str, set[str]] = {}
    for name in names:
        spellings.setdefault(_fold_case(name), set()).add(name)
    return [folded for folded, seen in spellings.items() if len(seen) > 1]


#: Leading bytes of compressed files DuckDB's CSV reader is not asked to open (gzip is read directly).
_OTHER_COMPRESSIONS = {b"PK\x03\x04": "zip", b"BZh": "bzip2", b"\xfd7zXZ\x00": "xz", b"\x28\xb5\x2f\xfd": "zstd"}
#: Byte-order marks of the UTF-16 and UTF-32 encodings (UTF-32 first: its little-endian mark starts like UTF-16's).
_WIDE_BOMS = {
    b"\xff\xfe\x00\x00": "UTF-32",
    b"\x00\x00\xfe\xff": "UTF-32",
    b"\xff\xfe": "UTF-16",
    b"\xfe\xff": "UTF-16",
}


def _ends_with_parquet_magic(path: Path) -> bool:
    """Whether the file's last 4 bytes are Parquet's magic ``PAR1`` (a Parquet file starts and ends with it; a CSV
    whose first column is named ``PAR1…`` does not end with it)."""
    with path.open("rb") as handle:
        handle.seek(0, 2)
        if handle.tell() < 8:
            return False
        handle.seek(-4, 2)
        return handle.read(4) == b"PAR1"


def _csv_compression(path: Path) -> str:
    """``"gzip"`` for a gzip-compressed CSV (read directly, whatever its name), else ``"none"``.

    Looks at the first bytes (of the decompressed stream for gzip) and refuses, naming what it
    found and the command that converts it, a file in UTF-16 or UTF-32 (a byte-order mark, or a
    NUL byte in every other position) and a file compressed with zip, bzip2, xz or zstd.

    Raises
    ------
    InputError
        As above, or a gzip file that cannot be decompressed.
    """
    with path.open("rb") as handle:
        head = handle.read(64)
    if head.startswith(b"PAR1") and _ends_with_parquet_magic(path):  # red team, session 39: "iconv -f latin1" before
        raise InputError(
            f"{path}: the file is Parquet, not CSV (it starts with Parquet's magic bytes); read it as Parquet with "
            f"{setting_example('input_format', 'parquet')}, or name it .parquet"
        )
    compression = "gzip" if head.startswith(b"\x1f\x8b") else "none"
    if compression == "gzip":
        try:
            with gzip.open(path, "rb") as handle:
                head = handle.read(64)
        except (OSError, EOFError) as error:  # gzip.BadGzipFile is an OSError
            raise InputError(
                f"{path}: the file starts like a gzip file but cannot be decompressed ({error}); check that the copy "
                f"is complete (gzip -t {path.name}), or pass the uncompressed CSV"
            ) from error
    for magic, name in _OTHER_COMPRESSIONS.items():
        if head.startswith(magic):
            raise InputError(
                f"{path}: the file is {name}-compressed; decompress it first and pass the CSV file (gzip-compressed "
                "CSV is read directly)"
            )
    encoding = next((name for bom, name in _WIDE_BOMS.items() if head.startswith(bom)), None)
    if encoding is None and len(head) >= 4 and (head[1::2].count(0) * 2 >= len(head) or head[0::2].count(0) * 2 >= len(head)):
        encoding = "UTF-16"  # text of ASCII characters in UTF-16 without a byte-order mark
    if encoding is not None:
        stem = path.name.removesuffix(".gz")
        source = (
            f"gzip -dc {path.name} | iconv -f {encoding} -t UTF-8"
            if compression == "gzip"
            else (f"iconv -f {encoding} -t UTF-8 {path.name}")
        )
        raise InputError(
            f"{path}: the file is encoded in {encoding}, not UTF-8; convert it to UTF-8 (e.g. {source} > "
            f"{Path(stem).stem}-utf8{Path(stem).suffix})"
        )
    return compression


def _csv_header(path: Path, delimiter: str, *, compression: str = "none") -> list[str]:
    """The first record of a CSV file (its header row), read with Python's csv module.

    Read here rather than by DuckDB, which renames duplicated names silently (``a``, ``a_1``).
    A byte-order mark is ignored; names are stripped; an empty name becomes ``column<k>``.
    ``compression`` ``"gzip"`` reads a gzip-compressed file.
    """
    try:
        if compression == "gzip":
            opened = gzip.open(path, "rt", newline="", encoding="utf-8-sig")
        else:
            opened = path.open(newline="", encoding="utf-8-sig")
        with opened as handle:
            header = next(csv.reader(handle, delimiter=delimiter, quotechar='"', doublequote=True), None)
    except UnicodeDecodeError:
        raise InputError(
            f"{path}, line {_first_line_not_utf8(path, compression)}: the file is not UTF-8 encoded; convert it to UTF-8 "
            f"(e.g. iconv -f latin1 -t utf-8 {path.name} > {path.stem}-utf8{path.suffix})"
        ) from None
    except csv.Error as error:
        raise InputError(
            f"{path}, line 1: the header row cannot be parsed ({error}); check {setting('delimiter')} and the quoting"
        ) from error
    except (OSError, EOFError) as error:  # a truncated or corrupt gzip stream
        raise InputError(f"{path}: cannot be decompressed ({error}); check that the gzip file is complete") from error
    if not header:
        raise InputError(
            f"{path}: the first line is blank, so there is no header row; remove the blank line, or use "
            f"{_without_header_example()} for a file without header"
        )
    return [name.strip() or f"column{k}" for k, name in enumerate(header, start=1)]


def _first_line_not_utf8(path: Path, compression: str) -> int:
    """The line (1-based) of the first byte sequence of ``path`` that is not UTF-8, among its first MiB (Python's text
    reader decodes a whole block at once, so its error does not say which line); 1 when none is found there."""
    try:
        opened = gzip.open(path, "rb") if compression == "gzip" else path.open("rb")
        with opened as handle:
            data = handle.read(1 << 20)
    except (OSError, EOFError):
        return 1
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as error:
        return data.count(b"\n", 0, error.start) + 1
    return 1


#: Bytes of a CSV file's beginning that :func:`detect_csv_header` looks at.
HEADER_SAMPLE_BYTES = 64 * 1024


def detect_csv_header(path: str | Path, delimiter: str = ",", *, expected_columns: Sequence[str] = ()) -> bool:
    """Whether a CSV file's first row is a header row (the setting ``csv_header`` left unset for an input other than
    Adult's headerless ``adult.data``).

    Decided on the first 64 KiB (decompressed for gzip): a header when the first row names every column of
    ``expected_columns`` (the configured quasi-identifiers and sensitive attributes, each a cell of the row, after
    stripping), else Python's :meth:`csv.Sniffer.has_header` on that sample (a header when, in most columns whose
    values share a type or a length, the first row's cell does not). A file of text columns of varying lengths
    gives the sniffer nothing to vote on: it says "no header", and the reader then asks for the column names.

    Parameters
    ----------
    path
        The CSV file (resolved, readable).
    delimiter
        Its field separator.
    expected_columns
        Column names the run will read.

    Raises
    ------
    InputError
        The file cannot be read or decompressed (the same messages as the reader's).
    """
    path = Path(path)
    compression = _csv_compression(path)
    try:
        opened = (
            gzip.open(path, "rt", newline="", encoding="utf-8-sig", errors="replace")
            if compression == "gzip"
            else path.open(newline="", encoding="utf-8-sig", errors="replace")
        )
        with opened as handle:
            sample = handle.read(HEADER_SAMPLE_BYTES)
    except (OSError, EOFError) as error:
        raise InputError(f"{path}: cannot be read ({error}); check that the file is complete and readable") from error
    lines = sample.splitlines(keepends=True)
    if len(lines) > 1 and not sample.endswith(("\n", "\r")):
        sample = "".join(lines[:-1])  # the last line of the sample may be cut
    try:
        first = next(csv.reader(io.StringIO(sample), delimiter=delimiter, quotechar='"', doublequote=True), [])
    except csv.Error:
        return False
    cells = {cell.strip() for cell in first}
    if expected_columns and set(expected_columns) <= cells:
        return True
    try:
        return bool(csv.Sniffer().has_header(sample))
    except csv.Error:
        return False


def _without_header_example() -> str:
    """How to read a file without header row, in the vocabulary of the caller (:mod:`pipeline.vocabulary`):
    ``--no-header --column-names a,b,c`` or ``csv_header: false`` and ``column_names: [a, b, c]``."""
    header, names = setting_example("csv_header", False), setting_example("column_names", ["a", "b", "c"])
    return f"{header} {names}" if header.startswith("--") else f"{header} and {names}"


def parquet_error(path: Path, error: BaseException) -> InputError:
    """The :class:`InputError` of a Parquet file DuckDB or Arrow cannot read, from the error's first line with every
    quoted span blanked: DuckDB quotes a cell it cannot decode (``value "…" is not valid UTF8!``), so its text is
    never repeated as it is (review, session 39). A string that is not UTF-8 gets its own advice."""
    text = str(error).strip()
    first = text.splitlines()[0] if text else type(error).__name__
    if "not valid utf8" in first.lower() or "invalid string encoding" in first.lower():
        return InputError(
            f"{path}: a text value of the Parquet file is not valid UTF-8; write its strings as UTF-8 (or as binary "
            "columns left out of the configuration)"
        )
    blanked = re.sub(r'"[^"]*"', '"…"', re.sub(r"'[^']*'", "'…'", first))
    return InputError(f"{path}: cannot be read as Parquet ({blanked}); check that the file is complete and valid Parquet")


def _csv_error(path: Path, error: Exception) -> InputError:
    """A short, actionable message for a DuckDB CSV error (raised as :class:`duckdb.Error` by the query, or as
    :class:`OSError` / :class:`pyarrow.ArrowException` by the Arrow reader when the parser meets the row while the
    batches are fetched). The offending line is NOT repeated (it may hold sensitive values): the message gives its
    number and what to do."""
    text = str(error)
    line = re.search(r"CSV Error on Line: (\d+)", text)
    where = f"{path}, line {line.group(1)}" if line else str(path)
    ragged = re.search(r"Expected Number of Columns: (\d+) Found: (\d+)", text)
    lowered = text.lower()
    if ragged:
        expected, found = int(ragged.group(1)), int(ragged.group(2))
        # DuckDB stops counting one field past the expected number: a longer row says expected + 1
        fields = f"more than {expected}" if found == expected + 1 else str(found)
        return InputError(
            f"{where}: the row has {fields} fields but the header (or {setting('column_names')}) has {expected}; "
            "every row must have the same number of fields: fix the row, or quote a value that contains the "
            'delimiter ("a,b")'
        )
    if "unterminated quote" in lowered:
        return InputError(
            f"{where}: a quoted value is not closed; close the quote, and write a quote inside a quoted value as "
            'two quotes ("say ""hi""")'
        )
    if "invalid unicode" in lowered or "utf-8" in lowered:
        return InputError(
            f"{where}: the file is not UTF-8 encoded; convert it to UTF-8 (e.g. iconv -f latin1 -t utf-8 "
            f"{path.name} > {path.stem}-utf8{path.suffix})"
        )
    if "invalid state" in lowered:
        return InputError(
            f"{where}: the CSV parser stopped in an invalid state, usually a carriage return (CR) or line break inside "
            "an unquoted value, or line endings mixed within the file; quote values that hold line breaks, or "
            f"normalise the line endings (e.g. dos2unix), and check {setting('delimiter')}"
        )
    if "maximum line size" in lowered:
        return InputError(
            f"{where}: a record is longer than DuckDB's line limit (2,097,152 bytes); check the quoting (an unclosed "
            "quote swallows the rest of the file) or shorten the values"
        )
    first = text.strip().splitlines()[0] if text.strip() else type(error).__name__
    header = "--header/--no-header" if setting("csv_header") == "--header" else setting("csv_header")
    return InputError(f"{where}: cannot be read as CSV ({first}); check {setting('delimiter')}, {header} and the quoting")


def _connection() -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection whose session time zone is UTC, so that a ``TIMESTAMP WITH TIME ZONE`` is
    turned into the same text on every machine (DuckDB's default is the machine's time zone, ``TZ``: under
    ``TZ=Asia/Tokyo`` 2020-01-01 20:00 UTC would read as ``2020-01-02 05:00:00+09``, another date)."""
    connection = duckdb.connect()
    connection.execute("SET TimeZone = 'UTC'")
    return connection


@dataclass(frozen=True)
class InputScan:
    """How DuckDB reads one input file's configured columns as text, after the checks that need no record.

    Attributes
    ----------
    path, input_format
        The file (resolved) and ``"csv"`` or ``"parquet"``.
    sql, params
        ``SELECT <quasi-identifiers, sensitive attributes as VARCHAR, in that order> FROM read_…($path, …)``: one
        row per record, in file order under DuckDB's ``preserve_insertion_order`` (the order :func:`load_records`
        numbers records in); run it as ``connection.sql(sql, params=params)``.
    first_line
        Line of the file holding the first record (CSV: 2 after a header row, else 1); None for Parquet.
    """

    path: Path
    input_format: str
    sql: str
    params: dict[str, object]
    first_line: int | None

    def error(self, error: duckdb.Error) -> InputError:
        """The :class:`InputError` :func:`load_records` raises for a DuckDB error while reading this file (the
        offending line is never quoted)."""
        if self.input_format == "csv":
            return _csv_error(self.path, error)
        return parquet_error(self.path, error)


def open_input_scan(
    path: Path,
    *,
    connection: duckdb.DuckDBPyConnection,
    quasi_identifiers: Sequence[str],
    sensitive_attributes: Sequence[str],
    input_format: str = "auto",
    csv_header: bool = True,
    column_names: Sequence[str] = (),
    delimiter: str = ",",
    for_model: bool = True,
) -> InputScan:
    """The checks :func:`load_records` makes before reading any record, and the query that reads the records.

    For a reader that does not hold the table in memory (the sharded staging, :mod:`pipeline.engines.staging`):
    the same refusals, with the same messages, as :func:`load_records` up to the reading itself.

    Parameters
    ----------
    path
        A resolved input file (:func:`resolve_input_path`).
    connection
        The DuckDB connection the query will run on (its time zone must be UTC, as :func:`_connection` sets it).
    quasi_identifiers, sensitive_attributes, input_format, csv_header, column_names, delimiter, for_model
        As :func:`load_records`.

    Raises
    ------
    InputError
        An empty file (0 bytes), an unknown format, and what :func:`load_records` raises for the file's encoding,
        compression, header or columns (CSV) or its schema (Parquet), before a record is read.
    """
    fmt = _detect_format(path, input_format)
    if path.stat().st_size == 0:
        raise InputError(f"{path}: the file is empty (0 bytes); pass the file that holds the table")
    if fmt == "parquet":
        try:
            return _parquet_scan(
                connection,
                path,
                column_names=column_names,
                quasi_identifiers=quasi_identifiers,
                sensitive_attributes=sensitive_attributes,
                for_model=for_model,
            )
        except duckdb.Error as error:
            raise parquet_error(path, error) from None
    if fmt != "csv":
        raise InputError(f"unknown input format {input_format!r}; use 'csv', 'parquet' or 'auto'")
    return _csv_scan(
        path,
        csv_header=csv_header,
        column_names=column_names,
        delimiter=delimiter,
        quasi_identifiers=quasi_identifiers,
        sensitive_attributes=sensitive_attributes,
        for_model=for_model,
    )


def input_connection() -> duckdb.DuckDBPyConnection:
    """A DuckDB connection as :func:`load_records` reads with (in memory; session time zone UTC)."""
    return _connection()


def check_value_lengths(
    path: Path,
    distinct_values: Mapping[str, tuple[Sequence[str], Sequence[int], Sequence[int]]],
    *,
    max_value_length: int | None,
    first_line: int | None,
) -> None:
    """Refuse a value longer than ``max_value_length`` bytes (UTF-8), from tables of DISTINCT values per column,
    with :func:`load_records`'s message (first column in the mapping's order, number of records holding a longer
    value, the longest length, the first such row), never the value.

    Parameters
    ----------
    path
        The input, for the message.
    distinct_values
        Column -> (distinct non-NULL raw values, records holding each, 0-based row of the first record holding each),
        in table order.
    max_value_length
        Largest accepted length in bytes; None accepts any length.
    first_line
        As :attr:`InputScan.first_line`.

    Raises
    ------
    ValueTooLong
        Naming the first column that holds a longer value.
    """
    if max_value_length is None:
        return
    for name, (values, counts, first_rows) in distinct_values.items():
        lengths = np.fromiter((len(str(v).encode("utf-8")) for v in values), dtype=np.int64, count=len(values))
        long = lengths > max_value_length
        if long.any():
            _raise_value_too_long(
                path,
                name,
                max_value_length,
                count=int(np.asarray(counts, dtype=np.int64)[long].sum()),
                longest=int(lengths.max()),
                index=int(np.asarray(first_rows, dtype=np.int64)[long].min()),
                first_line=first_line,
            )


def clean_value_table(
    values: Sequence[str],
    counts: Sequence[int],
    *,
    quasi_identifier: bool,
    strip_whitespace: bool = True,
    missing_value_tokens: Sequence[str] = ("", "NULL", "?"),
) -> tuple[list[str | None], list[bool], dict[str, int]]:
    """:func:`load_records`'s per-value rules on a table of DISTINCT raw values of one column.

    Stripping, missing-value tokens and look-alike merging (:func:`pipeline.core.values.canonical_spellings`, the
    canonical spelling chosen by the records holding each cleaned value, dropped records and missing-value tokens
    included, exactly as :func:`load_records` counts them); a missing quasi-identifier becomes
    :data:`MISSING_QUASI_IDENTIFIER`. SQL NULL is not in the table: it is always missing.

    Parameters
    ----------
    values
        The distinct non-NULL raw values (text as read).
    counts
        Records holding each (int64 > 0).
    quasi_identifier
        Whether the column is a quasi-identifier (missing → ``"?"``) or a sensitive attribute (missing → None: the
        record is dropped).
    strip_whitespace, missing_value_tokens
        As :func:`load_records`.

    Returns
    -------
    (staged, missing, look_alikes)
        ``staged[i]``: the value a record holding ``values[i]`` is staged with (None: missing sensitive value);
        ``missing[i]``: whether ``values[i]`` is a missing value (a missing-value token after stripping);
        ``look_alikes``: ``n_values_merged``, ``n_records_respelled`` (counts only).
    """
    if not len(values):
        return [], [], {"n_values_merged": 0, "n_records_respelled": 0}
    raw = pd.Index(np.asarray(values, dtype=object).astype(str), dtype=object)
    cleaned = raw.str.strip() if strip_whitespace else raw
    categories, inverse = np.unique(np.asarray(cleaned, dtype=object), return_inverse=True)
    inverse = inverse.reshape(-1)
    category_missing = np.isin(categories, list(set(missing_value_tokens)))
    sizes = np.zeros(len(categories), dtype=np.int64)
    np.add.at(sizes, inverse, np.asarray(counts, dtype=np.int64))
    target, look_alikes = canonical_spellings(categories, sizes)
    canonical = categories[target]
    missing_value = MISSING_QUASI_IDENTIFIER if quasi_identifier else None
    staged = [missing_value if category_missing[k] else str(canonical[k]) for k in inverse.tolist()]
    return staged, [bool(category_missing[k]) for k in inverse.tolist()], look_alikes


def _csv_scan(
    path: Path,
    *,
    csv_header: bool,
    column_names: Sequence[str],
    delimiter: str,
    quasi_identifiers: Sequence[str],
    sensitive_attributes: Sequence[str],
    for_model: bool = True,
) -> InputScan:
    """The checks of a CSV file before any record is read (encoding, compression, header, columns) and the DuckDB
    query that reads its configured columns as text, with the dialect given, not sniffed: DuckDB's sniffer can take
    a ragged file's last row for its header and return no record. Every row is still parsed, so a ragged row
    anywhere is refused (map a DuckDB error of the query with :func:`_csv_error`)."""
    compression = _csv_compression(path)
    if column_names:
        names, origin = list(column_names), setting("column_names")
    elif csv_header:
        names, origin = _csv_header(path, delimiter, compression=compression), "the header row"
    else:
        raise InputError(
            f"{path}: a CSV without a header row needs the column names ({setting_example('column_names', ['a', 'b', 'c'])}"
            f"), or {setting_example('csv_header', True)} if its first row names the columns"
        )
    _check_columns(path, names, quasi_identifiers, sensitive_attributes, origin=origin, delimiter=delimiter, for_model=for_model)
    options: dict[str, object] = {
        "header": csv_header,
        "delim": delimiter,
        "quote": '"',
        "escape": '"',
        "auto_detect": False,
        "strict_mode": True,
        "null_padding": False,
        "columns": {name: "VARCHAR" for name in names},
        "compression": compression,
    }
    arguments = ", ".join(f"{k} := ${k}" for k in options)
    wanted = ", ".join(_quote(c) for c in [*quasi_identifiers, *sensitive_attributes])
    return InputScan(
        path=path,
        input_format="csv",
        sql=f"SELECT {wanted} FROM read_csv($path, {arguments})",
        params={"path": str(path), **options},
        first_line=2 if csv_header else 1,
    )


def _read_csv(
    path: Path,
    *,
    csv_header: bool,
    column_names: Sequence[str],
    delimiter: str,
    quasi_identifiers: Sequence[str],
    sensitive_attributes: Sequence[str],
    max_value_length: int | None,
    for_model: bool = True,
) -> pd.DataFrame:
    """The configured columns of a CSV file as categorical text (NaN = SQL NULL), read by :func:`_csv_scan`'s query."""
    scan = _csv_scan(
        path,
        csv_header=csv_header,
        column_names=column_names,
        delimiter=delimiter,
        quasi_identifiers=quasi_identifiers,
        sensitive_attributes=sensitive_attributes,
        for_model=for_model,
    )
    connection = _connection()
    try:
        relation = connection.sql(scan.sql, params=scan.params)
        return _to_categorical_frame(relation, path=path, max_value_length=max_value_length, first_line=scan.first_line)
    except _READ_ERRORS as error:
        # DuckDB's message quotes the offending line ("Original Line: …"): never chained, never shown (red team,
        # session 39: a ragged row met while the batches were fetched came as an OSError, whose traceback printed the
        # whole raw record and was stored in the run's Dagster events)
        raise _csv_error(path, error) from None
    finally:
        connection.close()


#: records per Arrow batch fetched from DuckDB (each batch is dictionary-encoded before the next is read)
_BATCH_ROWS = 1 << 18
#: What reading a table can raise for its content: DuckDB's errors from the query, and the same errors as the Arrow
#: reader re-raises them while the batches are fetched (an ``OSError`` or an Arrow exception carrying DuckDB's text)
_READ_ERRORS = (duckdb.Error, OSError, pa.ArrowException)


def _to_categorical_frame(relation, *, path: Path, max_value_length: int | None, first_line: int | None) -> pd.DataFrame:
    """A DuckDB relation of text columns as a pandas frame of categorical columns, through Arrow
    (dictionary-encoded: millions of records never hold one Python string per cell), after the value-length check
    (:class:`_ValueLengths`) over all rows.

    Read in batches of :data:`_BATCH_ROWS` records, each dictionary-encoded at once, so the peak holds the codes of
    the whole table and the text of one batch, not the text of every cell."""
    reader = relation.to_arrow_reader(_BATCH_ROWS)
    encoded: list[pa.Table] = []
    lengths = _ValueLengths(reader.schema.names, max_value_length)
    for batch in reader:
        lengths.add(batch)
        encoded.append(pa.Table.from_arrays([pc.dictionary_encode(column) for column in batch.columns], names=batch.schema.names))
    lengths.check(path, first_line=first_line)
    if not encoded:
        return reader.schema.empty_table().to_pandas(strings_to_categorical=True)
    table = pa.concat_tables(encoded).unify_dictionaries()
    del encoded
    return table.to_pandas(self_destruct=True)


class _ValueLengths:
    """Refuse a value longer than ``max_value_length`` bytes (UTF-8) in any column, batch by batch.

    Vectorised (Arrow's byte length of every value, one pass per column and batch), accumulated over the batches:
    per column, how many values are longer, the longest length and the first row holding one. :meth:`check` names
    the file, the first column (in table order) that holds a longer value, where the first such value is and the
    longest length, never the value.

    Parameters
    ----------
    names
        The columns, in table order (the configured columns as text, one row per record in file order).
    max_value_length
        Largest accepted length in bytes; None accepts any length.
    """

    def __init__(self, names: Sequence[str], max_value_length: int | None) -> None:
        self.names = list(names)
        self.limit = max_value_length
        self.rows = 0
        self.found: dict[str, list[int]] = {}  # column -> [count, longest, first row (0-based)]

    def add(self, batch: pa.RecordBatch) -> None:
        """Count the longer values of the next batch of rows."""
        if self.limit is not None:
            for name, column in zip(batch.schema.names, batch.columns):
                lengths = pc.binary_length(column)  # bytes per value; null for SQL NULL
                longest = pc.max(lengths).as_py()
                if longest is None or longest <= self.limit:
                    continue
                too_long = pc.fill_null(pc.greater(lengths, self.limit), False)
                seen = self.found.setdefault(name, [0, 0, self.rows + int(pc.index(too_long, True).as_py())])
                seen[0] += int(pc.sum(too_long).as_py())
                seen[1] = max(seen[1], int(longest))
        self.rows += batch.num_rows

    def check(self, path: Path, *, first_line: int | None) -> None:
        """Raise for the first column holding a longer value.

        Parameters
        ----------
        path
            The input, for the message.
        first_line
            Line of the file that holds the first record (CSV: 2 after a header row, else 1); None for a
            file without lines (Parquet: the message gives the row number).

        Raises
        ------
        ValueTooLong
            Naming the first column (in table order) that holds a longer value.
        """
        for name in self.names:
            if name in self.found:
                count, longest, index = self.found[name]
                _raise_value_too_long(path, name, self.limit, count=count, longest=longest, index=index, first_line=first_line)


def _raise_value_too_long(
    path: Path, name: str, max_value_length: int | None, *, count: int, longest: int, index: int, first_line: int | None
) -> None:
    """Raise :class:`ValueTooLong` for column ``name`` (first such value at 0-based row ``index``); never the value."""
    where = f"{path}, line {first_line + index}" if first_line is not None else f"{path}, row {index + 1}"
    raise ValueTooLong(
        f"{where}: column {name!r} holds a value longer than max_value_length = {max_value_length} bytes (UTF-8) "
        f"({count} such value(s) in the column, the longest {longest} bytes); values this long are refused when "
        f"the input is read: shorten or remove them, leave the column out, or raise the limit "
        f"({setting_example('max_value_length', str(longest))})",
        file=str(path),
        column=name,
    )


#: DuckDB type ids whose cells are not one categorical value each (refused in a configured column).
NESTED_TYPE_IDS = ("list", "struct", "map", "union", "array", "blob", "bit")


def _parquet_scan(
    connection: duckdb.DuckDBPyConnection,
    path: Path,
    *,
    column_names: Sequence[str],
    quasi_identifiers: Sequence[str],
    sensitive_attributes: Sequence[str],
    for_model: bool = True,
) -> InputScan:
    """The checks of a Parquet file before any record is read (schema, columns, nested types) and the DuckDB query
    that reads its configured columns as text, cast by DuckDB (an integer column with NULLs stays ``"39"``, not
    ``"39.0"``; a floating-point NaN is missing, like a NULL, not the text ``"nan"``; a timestamp with time zone is
    written in UTC, whatever the machine's time zone, when ``connection`` is :func:`_connection`'s). Nested and
    binary columns are refused."""
    try:
        relation = connection.read_parquet(str(path))
    except duckdb.Error as error:
        reason = str(parquet_error(path, error)).removeprefix(f"{path}: ")
        raise InputError(
            f"{path}: {reason}; or, if it is a CSV file, read it with {setting_example('input_format', 'csv')}"
        ) from None
    stored = list(relation.columns)
    # the names as written: DuckDB renames a repeated or case-variant name ('A' after 'a' becomes 'A_1')
    written = _parquet_schema_names(path, fallback=stored)
    if column_names:
        if len(column_names) != len(stored):
            raise InputError(
                f"{path}: {len(column_names)} column names given but the Parquet file has {len(stored)} columns "
                f"({written}); give one name per column, or leave {setting('column_names')} out to use the file's names"
            )
        names, origin = list(column_names), setting("column_names")
    else:
        names, origin = written, "the Parquet schema"
    _check_columns(path, names, quasi_identifiers, sensitive_attributes, origin=origin, for_model=for_model)
    configured = {*quasi_identifiers, *sensitive_attributes}
    nested = [(n, str(t)) for n, t in zip(names, relation.types) if n in configured and t.id in NESTED_TYPE_IDS]
    if nested:
        described = ", ".join(f"{n!r} ({t})" for n, t in nested)
        raise InputError(
            f"{path}: column(s) {described} hold nested or binary values, not one value per cell; flatten them "
            "into text or number columns (e.g. one column per field) before publishing"
        )
    source_of = dict(zip(names, stored))
    floating = {n for n, t in zip(names, relation.types) if t.id in FLOATING_TYPE_IDS}
    selected = ", ".join(
        _as_text(_quote(source_of[n]), floating=n in floating) + f" AS {_quote(n)}"
        for n in [*quasi_identifiers, *sensitive_attributes]
    )
    return InputScan(
        path=path,
        input_format="parquet",
        sql=f"SELECT {selected} FROM read_parquet($path)",
        params={"path": str(path)},
        first_line=None,
    )


def _read_parquet(
    path: Path,
    *,
    column_names: Sequence[str],
    quasi_identifiers: Sequence[str],
    sensitive_attributes: Sequence[str],
    max_value_length: int | None,
    for_model: bool = True,
) -> pd.DataFrame:
    """The configured columns of a Parquet file as categorical text, read by :func:`_parquet_scan`'s query."""
    connection = _connection()
    try:
        scan = _parquet_scan(
            connection,
            path,
            column_names=column_names,
            quasi_identifiers=quasi_identifiers,
            sensitive_attributes=sensitive_attributes,
            for_model=for_model,
        )
        return _to_categorical_frame(
            connection.sql(scan.sql, params=scan.params),
            path=path,
            max_value_length=max_value_length,
            first_line=None,
        )
    except _READ_ERRORS as error:
        raise parquet_error(path, error) from None
    finally:
        connection.close()


def _parquet_schema_names(path: Path, *, fallback: list[str]) -> list[str]:
    """The top-level column names of a Parquet file as stored in its schema (pyarrow reads the footer only);
    ``fallback`` (DuckDB's names) when the footer cannot be read that way or has another number of columns."""
    import pyarrow.parquet as pq

    try:
        names = list(pq.read_schema(path).names)
    except (OSError, pa.ArrowException):
        return fallback
    return names if len(names) == len(fallback) else fallback


#: DuckDB type ids of floating-point columns, whose NaN is a missing value (not the text ``"nan"``).
FLOATING_TYPE_IDS = ("float", "double")


def _as_text(column: str, *, floating: bool) -> str:
    """SQL turning the (quoted) Parquet column ``column`` into text; when ``floating``, NaN becomes NULL and negative
    zero the text of zero (``-0.0`` is ``0.0``: one number, so one value; as two, a SID holding only ``-0.0`` and
    ``0.0`` was certified ℓ-diverse at ℓ = 2, red team, session 39).

    The tests are on the text (``nan``, ``-nan``, ``-0.0``), not ``isnan`` or a comparison: DuckDB folds ``isnan`` to
    false from the Parquet column statistics, which leave NaN out of their minimum and maximum (found with a NaN in
    the first row)."""
    text = f"CAST({column} AS VARCHAR)"
    if floating:
        return f"CASE WHEN {text} IN ('nan', '-nan') THEN NULL WHEN {text} = '-0.0' THEN '0.0' ELSE {text} END"
    return text


def _read(
    path: Path,
    *,
    input_format: str,
    csv_header: bool,
    column_names: Sequence[str],
    delimiter: str,
    quasi_identifiers: Sequence[str],
    sensitive_attributes: Sequence[str],
    max_value_length: int | None,
    for_model: bool = True,
) -> pd.DataFrame:
    """The configured columns as categorical text columns (one dictionary per column); NaN = SQL NULL."""
    if input_format == "parquet":
        return _read_parquet(
            path,
            column_names=column_names,
            quasi_identifiers=quasi_identifiers,
            sensitive_attributes=sensitive_attributes,
            max_value_length=max_value_length,
            for_model=for_model,
        )
    if input_format != "csv":
        raise InputError(f"unknown input format {input_format!r}; use 'csv', 'parquet' or 'auto'")
    return _read_csv(
        path,
        csv_header=csv_header,
        column_names=column_names,
        delimiter=delimiter,
        quasi_identifiers=quasi_identifiers,
        sensitive_attributes=sensitive_attributes,
        max_value_length=max_value_length,
        for_model=for_model,
    )


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
    new_codes = (
        np.where(is_null, -1, inverse.reshape(-1)[np.where(is_null, 0, codes)])
        if len(raw_categories)
        else np.full(len(codes), -1)
    )
    missing = is_null | (category_missing[np.where(new_codes < 0, 0, new_codes)] if len(categories) else True)
    return new_codes.astype(np.int64), categories.astype(object), np.asarray(missing, dtype=bool)


class LargestEll(int):
    """ℓ = L = max ℓ_i as an int (the mixed model's SAC~ group size with per-attribute ℓ), carrying the ℓ_i it came
    from so that :func:`check_ell_feasible` names them (red team, session 38: "ℓ = 20 … 'education'" where education's
    ℓ_i was 2 and age's 20 made the groups need 20 distinct values of every attribute)."""

    per_attribute: dict[str, int]

    def __new__(cls, per_attribute: Mapping[str, int]) -> LargestEll:
        value = super().__new__(cls, max(int(v) for v in per_attribute.values()))
        value.per_attribute = {str(k): int(v) for k, v in per_attribute.items()}
        return value

    def __reduce__(self):  # pickled (the Spark job file) as what it is
        return (LargestEll, (self.per_attribute,))


def check_ell_feasible(
    records: pd.DataFrame,
    sensitive_attributes: Sequence[str],
    *,
    ell: int | Mapping[str, int],
    source: str,
    n_input: int,
    n_records: int | None = None,
) -> None:
    """Refuse a table that no model can make ℓ-diverse, naming the reason.

    Every SAC~ group and every SID of the mixed and Rating models, and every (k, ℓ) equivalence
    class, needs ℓ distinct values of every sensitive attribute (SPEC §5.1, §6.4, §14.1). A table
    with fewer than ℓ records, or a sensitive attribute with fewer than ℓ distinct values, could
    only be published by deleting or suppressing everything.

    Parameters
    ----------
    records
        The records after the missing-value policy (text columns; no missing sensitive value).
    sensitive_attributes
        Columns of ``records``.
    ell
        ℓ >= 2, or ℓ_i per sensitive attribute (SPEC §6.7; Rating: every SID of attribute i needs ℓ_i distinct
        values, so an attribute is checked against its own ℓ_i and the table needs max ℓ_i records).
    source
        The input's name, for the message.
    n_input
        Records read before the missing-value policy, for the message.
    n_records
        The records ``records`` stands for when it holds one row per distinct sensitive tuple (the sharded job's
        counts; the distinct values are the same); None: ``len(records)``.

    Raises
    ------
    InfeasibleInput
        Fewer than ℓ records; a sensitive attribute with a single distinct value (known for everyone:
        refused, never published, whatever ℓ); a sensitive
        attribute with fewer than ℓ distinct values (each named with its count). No value of
        the data is quoted.
    """
    per_attribute = {a: int(ell[a]) for a in sensitive_attributes} if isinstance(ell, Mapping) else None
    if per_attribute is not None:
        ell = max(per_attribute.values())
    n = len(records) if n_records is None else int(n_records)
    if n < ell:
        what_to_do = (
            f"options: (1) add records; (2) lower {setting('ell')} to at most {n}"
            if n >= 2
            else "add records (ℓ is already the minimum, 2, below which nothing is protected)"
            if ell == 2
            else "add records (ℓ cannot go below 2)"
        )
        raise InfeasibleInput(
            f"{source}: {n} record(s) remain after the missing-value policy ({n_input} read, {n_input - n} dropped for a "
            f"missing sensitive value), fewer than ℓ = {ell}: no group of ℓ records with distinct sensitive values can "
            f"be formed; {what_to_do}"
        )
    distinct = {a: int(records[a].nunique()) for a in sensitive_attributes}
    constant = [a for a, count in distinct.items() if count == 1]
    if constant:
        raise InfeasibleInput(
            f"{source}: sensitive attribute(s) {constant} have the same value in all {n} records (after the "
            "missing-value policy): a constant sensitive attribute is known for everyone, since whoever learns the one "
            "value (from a single released record, or from knowing the table's subject) knows every person's value, "
            f"and no grouping can make it ℓ-diverse; nothing is published. Remove it from {setting('sensitive_attributes')} and "
            "keep it out of the release (publishing it discloses it for everyone), or check its missing-value tokens "
            "and the column choice",
            column=constant[0],
        )
    if per_attribute is not None:
        short = {a: count for a, count in distinct.items() if count < per_attribute[a]}
        if short:
            listed = ", ".join(f"{a!r} ({count} distinct values, ℓ_i = {per_attribute[a]})" for a, count in short.items())
            raise InfeasibleInput(
                f"{source}: sensitive attribute(s) {listed} have fewer distinct values than their ℓ_i; every SID of an "
                f"attribute needs ℓ_i distinct values. Options: (1) lower their ℓ_i in {setting('ell_per_attribute')}; "
                f"(2) remove these attributes from {setting('sensitive_attributes')}",
                column=next(iter(short)),
            )
        return
    short = {a: count for a, count in distinct.items() if count < ell}
    if short and isinstance(ell, LargestEll):
        listed = ", ".join(f"{a!r} ({count} distinct values)" for a, count in short.items())
        largest = ", ".join(f"{a}={v}" for a, v in ell.per_attribute.items() if v == int(ell))
        raise InfeasibleInput(
            f"{source}: the mixed model's SAC~ groups hold L = max ℓ_i = {int(ell)} records ({largest}) with L distinct "
            f"values of every sensitive attribute, more than sensitive attribute(s) {listed} have. Options: (1) lower "
            f"the largest ℓ_i in {setting('ell_per_attribute')} to at most {min(short.values())}; (2) --model rating, "
            f"whose SIDs need only each attribute's own ℓ_i; (3) remove these attributes from "
            f"{setting('sensitive_attributes')}",
            column=next(iter(short)),
        )
    if short:
        listed = ", ".join(f"{a!r} ({count} distinct values)" for a, count in short.items())
        raise InfeasibleInput(
            f"{source}: ℓ = {ell} is larger than the number of distinct values of sensitive attribute(s) {listed}; every "
            f"group and SID needs ℓ distinct values of every sensitive attribute. Options: (1) lower {setting('ell')} to "
            f"at most {min(short.values())}; (2) remove these attributes from {setting('sensitive_attributes')}",
            column=next(iter(short)),
        )


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
    ell: int | Mapping[str, int] | None = None,
    max_value_length: int | None = DEFAULT_MAX_VALUE_LENGTH,
    for_model: bool = True,
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
    ell
        When given, also refuse a table that cannot be ℓ-diverse (:func:`check_ell_feasible`).
    max_value_length
        Longest accepted value of a configured column, in bytes of UTF-8 (before stripping); a longer
        one is refused (:class:`ValueTooLong`) before any per-value work. None: no limit.
    for_model
        False reads the configured columns without the publication models' column rules (at least 2
        sensitive attributes, none also a quasi-identifier): ``msa-release hierarchies`` reads the
        quasi-identifiers alone (``sensitive_attributes`` empty: no record is dropped).

    Returns
    -------
    LoadedRecords
        Policy: records with a missing sensitive attribute are dropped (counted); a missing
        quasi-identifier is kept as the value ``"?"`` (counted).

    Raises
    ------
    InputError
        Each names the file (and line, column or option) and says what to do: a missing file or
        a directory; an empty file or no header row; a file that is not UTF-8; a ragged row or
        an unclosed quote (line number; the line itself is never quoted); a duplicated column
        name; a configured column absent (with "did you mean" and wrong-delimiter hints),
        configured twice, as both quasi-identifier and sensitive attribute, or reserved; fewer
        than 2 sensitive attributes; a nested or binary Parquet column among the configured
        ones; a table without records; no record left after the missing-value policy; a file
        that changed while it was read (size, modification time or SHA-256 differ before and
        after); a value longer than ``max_value_length`` bytes (:class:`ValueTooLong`: file,
        column and line or row, never the value); with ``ell``, a table that cannot be ℓ-diverse
        (:class:`InfeasibleInput`).

    Notes
    -----
    Values are read as text exactly as written (no type inference): ``7``, ``7.0`` and ``seven``
    are three values of a column, and Unicode text is kept byte for byte, except that spellings of
    one value that differ only by case, Unicode compatibility form (NFKC) or invisible format
    characters (zero-width, bidi controls) are merged into the most frequent spelling
    (:func:`pipeline.core.values.merge_look_alike_values`; counted in ``look_alike_values``), so
    that ℓ-diversity counts values as a reader sees them.
    """
    resolved = resolve_input_path(path)
    fmt = _detect_format(resolved, input_format)
    before = _file_state(resolved)
    if before[0] == 0:
        raise InputError(f"{resolved}: the file is empty (0 bytes); pass the file that holds the table")
    frame = _read(
        resolved,
        input_format=fmt,
        csv_header=csv_header,
        column_names=column_names,
        delimiter=delimiter,
        quasi_identifiers=quasi_identifiers,
        sensitive_attributes=sensitive_attributes,
        max_value_length=max_value_length,
        for_model=for_model,
    )
    input_sha256 = check_file_unchanged(resolved, before)
    n_input = len(frame)
    if n_input == 0:
        raise InputError(
            f"{resolved}: the table has no records (only a header row, or blank lines); pass a file with at least one record"
        )
    columns = [*quasi_identifiers, *sensitive_attributes]
    tokens = set(missing_value_tokens)
    cleaned = {}
    missing = {}
    look_alikes = {}
    for column in columns:
        codes, categories, missing[column] = _clean_column(frame[column], strip_whitespace=strip_whitespace, tokens=tokens)
        # look-alike spellings (case, NFKC forms, zero-width and bidi characters) are one value
        codes, categories, merged = merge_look_alike_values(codes, categories)
        if merged["n_values_merged"]:
            look_alikes[column] = merged
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
        used = np.flatnonzero(np.bincount(kept_codes[kept_codes >= 0], minlength=len(categories)))
        # keep only the values present in the kept records (a dropped record leaves no trace)
        remap = np.full(len(categories), -1, dtype=np.int64)
        remap[used] = np.arange(len(used))
        records[column] = pd.Categorical.from_codes(remap[kept_codes], categories=pd.Index(categories[used], dtype=object))
    if len(records) == 0:
        per_attribute = {a: int(missing[a].sum()) for a in sensitive_attributes}
        raise InputError(
            f"{resolved}: all {n_input} records have a missing value in a sensitive attribute (missing values per "
            f"attribute: {per_attribute}; missing-value tokens {sorted(tokens)} and SQL NULL), so the missing-value "
            f"policy drops every record and nothing can be published; check the {setting('sensitive_attributes')} columns "
            f"and {setting('missing_value_tokens')} (a token may match real values)"
        )
    if ell is not None:
        try:
            check_ell_feasible(records, sensitive_attributes, ell=ell, source=str(resolved), n_input=n_input)
        except InfeasibleInput as error:
            raise note_look_alikes(error, {c: int(v["n_values_merged"]) for c, v in look_alikes.items()}) from None
    return LoadedRecords(
        records=records,
        n_input=n_input,
        n_dropped_missing=int(sensitive_missing.sum()),
        n_missing_quasi_identifier=int((quasi_missing & keep).sum()),
        input_sha256=input_sha256,
        look_alike_values=look_alikes,
        dropped_missing_by_attribute={
            attribute: int(missing[attribute].sum()) for attribute in sensitive_attributes if missing[attribute].any()
        },
        missing_quasi_identifier_by_column={
            column: int((missing[column] & keep).sum()) for column in quasi_identifiers if (missing[column] & keep).any()
        },
    )
