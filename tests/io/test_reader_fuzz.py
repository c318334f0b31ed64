"""Fuzzing the input reader, the header and column-name handling and the CLI options (issue 14: "DuckDB and SQLite
fuzz their readers continuously").

Four hypothesis tests, derandomized (the same cases on every run, so CI is reproducible) and without an example
database, 1,150 cases in all:

- ``test_csv_reader`` (550): grammar-built CSV files (header cells from a pool of awkward names: case variants,
  reserved names, blanks, quotes, delimiters, line breaks, non-ASCII; rows of random width with quoted and unquoted
  values holding quotes, delimiters, CR/LF, NUL, BOMs, invalid UTF-8, long values), then sometimes mutated byte by
  byte, gzip-compressed or re-encoded in UTF-16, read by :func:`pipeline.io.loading.load_records` with a random
  header mode, ``--column-names``, delimiter, missing-value tokens, ``max_value_length`` and ℓ;
- ``test_parquet_reader`` (200): Parquet files with random column names (duplicates, case variants, reserved
  names) and types (text, integers with nulls, doubles with NaN, booleans, timestamps with a time zone, lists,
  structs, binary, dictionaries), sometimes truncated or with flipped bytes;
- ``test_run_options`` (300): ``msa-release run`` through click's CliRunner with random options and values (huge
  and negative integers, NaN and infinities, empty and non-ASCII text, unknown options); the command is stopped
  where it would read the input (``preflight``), so no release runs;
- ``test_latest_file`` (100): random content of ``releases/LATEST``.

Every case must end in one of: a result; an error of the project (:class:`pipeline.errors.MsaReleaseError`, e.g.
``InputError``); for the CLI, a usage error (exit status 2) or an exit status the project's errors carry. Never a
traceback of another exception. Every cell value written holds a token ``QV<n>Q`` and no message may contain one
(messages never echo a raw value). A case that reaches ``preflight`` must carry settings that validate, with finite
numbers and a seed that fits the manifest. No hang: each case runs under a watchdog (``faulthandler``) that dumps
every thread's stack and ends the test process after :data:`CASE_TIMEOUT_SECONDS` (a hang fails the CI run loudly;
no test asserts a duration). Marked ``slow`` (about 30-40 s on the 2-core machine); CI runs it in ``make test``.
"""

from __future__ import annotations

import contextlib
import faulthandler
import gzip
import math
import re
import sys
from pathlib import Path

import click
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import pipeline.cli.run as run_command
from pipeline.cli import main
from pipeline.errors import MsaReleaseError
from pipeline.io.loading import LoadedRecords, load_records
from pipeline.release.publish import InvalidLatest, read_latest
from pipeline.settings import MAX_SEED

pytestmark = pytest.mark.slow

#: Longest a single case may take before the watchdog ends the process (a hang, not a slow case: cases take ms).
CASE_TIMEOUT_SECONDS = 60
#: Every cell value holds one such token; none may appear in a message.
TOKEN = re.compile(r"QV\d+Q")
FUZZ = settings(
    derandomize=True,
    database=None,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture],
)


@contextlib.contextmanager
def watchdog():
    """End the process with every thread's stack if the block takes longer than :data:`CASE_TIMEOUT_SECONDS`."""
    faulthandler.dump_traceback_later(CASE_TIMEOUT_SECONDS, exit=True, file=sys.__stderr__)
    try:
        yield
    finally:
        faulthandler.cancel_dump_traceback_later()


def assert_no_token(text: str) -> None:
    found = TOKEN.search(text)
    assert found is None, f"a message echoes a cell value ({found.group()}): {text}"


def read_or_refuse(path: Path, **options) -> LoadedRecords | None:
    """``load_records``: its result, or None for an error of the project (whose message echoes no value)."""
    with watchdog():
        try:
            loaded = load_records(path, **options)
        except MsaReleaseError as error:
            assert_no_token(str(error))
            return None
    assert set(loaded.records.columns) == {"row_id", *options["quasi_identifiers"], *options["sensitive_attributes"]}
    assert loaded.n_input >= len(loaded.records) >= 1
    assert loaded.records["row_id"].is_monotonic_increasing
    return loaded


# ------------------------------------------------------------------------------------------------
# CSV: a grammar of awkward files, then byte-level mutations

#: Header cells: configured-looking names, case variants, reserved names and their variants, awkward text.
NAMES = ["q", "a", "b", "c", "A", "B", "Q", "row_id", "ROW_ID", "Group_Id", "", " a ", "a b", 'x"y', "x,y", "x;y",
         "line\nbreak", "é", "É", "e\u0301", "\ufeffq", "\u200ba", "東京", "column2", "a_1", "NULL", "?"]  # fmt: skip
#: Pieces of cell values around the token.
PIECES = ["", " ", "  ", "x", '"', '""', ",", ";", "\t", "|", "\r", "\n", "\r\n", "\x00", "é", "\ufeff", "\u200b",
          "NULL", "?", "NaN", "nan", "  padded  ", "7", "7.0", "😀", "\\", "'", "x" * 300]  # fmt: skip
DELIMITERS = [",", ";", "\t", "|", ":"]


@st.composite
def cell(draw, counter: list[int]) -> str:
    counter[0] += 1
    left = draw(st.sampled_from(PIECES))
    right = draw(st.sampled_from(PIECES))
    return f"{left}QV{counter[0]}Q{right}"


def render_field(text: str, delimiter: str, quote: bool) -> str:
    if quote:
        return '"' + text.replace('"', '""') + '"'
    return text


#: Plain header names: most cases use them, so that most files get past the header into the rows.
PLAIN_NAMES = ["q", "a", "b", "c", "d", "e"]


def mutate(draw, data: bytes, times: int) -> bytes:
    """``data`` with ``times`` random byte flips, insertions, deletions or a truncation."""
    for _ in range(times):
        if not data:
            break
        position = draw(st.integers(min_value=0, max_value=len(data) - 1))
        action = draw(st.sampled_from(["flip", "flip", "insert", "delete", "truncate"]))
        if action == "flip":
            data = data[:position] + bytes([data[position] ^ draw(st.integers(1, 255))]) + data[position + 1 :]
        elif action == "insert":
            data = data[:position] + draw(st.binary(min_size=1, max_size=4)) + data[position:]
        elif action == "delete":
            data = data[:position] + data[position + 1 :]
        else:
            data = data[: max(position, 1)]
    return data


@st.composite
def csv_files(draw):
    """(bytes, options) of a CSV case: one case in four is messy (awkward names, ragged rows, byte mutations,
    another wrapping), the others are well-formed files with awkward values, so most cases reach the rows."""
    counter = [0]
    messy = draw(st.integers(0, 3)) == 0
    delimiter = draw(st.sampled_from(DELIMITERS))
    width = draw(st.integers(min_value=3, max_value=6))
    if messy:
        header = draw(st.lists(st.sampled_from(NAMES + PLAIN_NAMES), min_size=width, max_size=width))
    else:
        header = draw(st.lists(st.sampled_from(PLAIN_NAMES), min_size=width, max_size=width, unique=True))
    has_header = draw(st.booleans())
    lines = []
    if has_header:
        lines.append(delimiter.join(render_field(h, delimiter, draw(st.booleans())) for h in header))
    for _ in range(draw(st.integers(min_value=0 if messy else 2, max_value=12))):
        row_width = width if not messy or draw(st.integers(0, 3)) else draw(st.integers(min_value=0, max_value=8))
        fields = []
        for _ in range(row_width):
            value = draw(cell(counter))
            # a value holding the delimiter, a quote or a line break must be quoted in a well-formed file
            needs_quotes = any(c in value for c in (delimiter, '"', "\r", "\n"))
            fields.append(
                render_field(value, delimiter, needs_quotes or draw(st.booleans()) if not messy else draw(st.booleans()))
            )
        lines.append(delimiter.join(fields))
    newline = draw(st.sampled_from(["\n", "\r\n"] + ["\r"] * messy))
    text = newline.join(lines) + draw(st.sampled_from(["", newline, newline * 2]))
    data = text.encode("utf-8")
    if draw(st.integers(0, 4)) == 0:
        data = b"\xef\xbb\xbf" + data
    if messy:
        data = mutate(draw, data, draw(st.integers(min_value=0, max_value=3)))
    wrapping = draw(st.sampled_from(["plain"] * 6 + ["gzip"] + ["utf-16", "gzip-truncated"] * messy))
    if wrapping == "gzip":
        data = gzip.compress(data)
    elif wrapping == "gzip-truncated":
        data = gzip.compress(data)[: max(len(data) // 2, 3)]
    elif wrapping == "utf-16":
        data = data.decode("utf-8", "replace").encode("utf-16")
    distinct = list(dict.fromkeys(header))
    roles = draw(st.permutations(distinct + ["z"] * messy))  # 'z': a configured column the file does not have
    quasi_identifiers = list(roles[: draw(st.integers(min_value=0, max_value=min(2, len(roles) - 2)))])
    sensitive_attributes = list(roles[len(quasi_identifiers) : len(quasi_identifiers) + draw(st.integers(2, 3))])
    if messy and draw(st.booleans()):
        sensitive_attributes = sensitive_attributes[:1] + quasi_identifiers[:1]  # one role twice, or one attribute
    options = {
        "quasi_identifiers": quasi_identifiers,
        "sensitive_attributes": sensitive_attributes,
        "input_format": "csv",
        "csv_header": has_header if not messy or draw(st.booleans()) else not has_header,
        "column_names": header if not has_header and (not messy or draw(st.booleans())) else [],
        "delimiter": delimiter if not messy or draw(st.booleans()) else draw(st.sampled_from(DELIMITERS)),
        "strip_whitespace": draw(st.booleans()),
        "missing_value_tokens": draw(st.sampled_from([("", "NULL", "?"), (), ("NULL",), ("QV1Q",)])),
        "max_value_length": draw(st.sampled_from([None, 4096, 4096, 40, 1])),
        "ell": draw(st.sampled_from([None, 2, 3])),
    }
    return data, options


@settings(FUZZ, max_examples=550)
@given(case=csv_files(), suffix=st.sampled_from([".csv", ".csv.gz", ".txt"]))
def test_csv_reader(tmp_path_factory, case, suffix):
    data, options = case
    path = tmp_path_factory.mktemp("csv") / f"input{suffix}"
    path.write_bytes(data)
    read_or_refuse(path, **options)


# ------------------------------------------------------------------------------------------------
# Parquet: random schemas and types, sometimes damaged


@st.composite
def parquet_columns(draw, counter: list[int], messy: bool):
    """One column of ``counter[1]`` values (each holding a token) of a random type: text mostly, any type when messy."""
    kinds = (
        ["text", "int", "double", "bool", "timestamp", "list", "struct", "binary", "dict"]
        if messy
        else ["text"] * 4
        + [
            "int",
            "double",
            "dict",
        ]
    )
    kind = draw(st.sampled_from(kinds))
    values = []
    for _ in range(counter[1]):  # every column of a table has the same length
        counter[0] += 1
        values.append(counter[0])
    nulls = [draw(st.integers(0, 5)) == 0 for _ in values]
    if kind == "text":
        return pa.array([None if z else f"{draw(st.sampled_from(PIECES))}QV{v}Q" for v, z in zip(values, nulls)])
    if kind == "int":
        return pa.array([None if z else v for v, z in zip(values, nulls)], type=pa.int64())
    if kind == "double":
        return pa.array([math.nan if z else v + 0.5 for v, z in zip(values, nulls)], type=pa.float64())
    if kind == "bool":
        return pa.array([None if z else bool(v % 2) for v, z in zip(values, nulls)])
    if kind == "timestamp":
        return pa.array([None if z else v * 10**9 for v, z in zip(values, nulls)], type=pa.timestamp("ns", tz="UTC"))
    if kind == "list":
        return pa.array([None if z else [f"QV{v}Q"] for v, z in zip(values, nulls)])
    if kind == "struct":
        return pa.array([None if z else {"f": f"QV{v}Q"} for v, z in zip(values, nulls)])
    if kind == "binary":
        return pa.array([None if z else f"QV{v}Q".encode() for v, z in zip(values, nulls)], type=pa.binary())
    return pa.array([None if z else f"QV{v % 3}Q" for v, z in zip(values, nulls)]).dictionary_encode()


@st.composite
def parquet_files(draw, directory: Path):
    """(path, options) of a Parquet case: one in three is messy (awkward names and types, damaged bytes, wrong
    --column-names, a missing configured column)."""
    messy = draw(st.integers(0, 2)) == 0
    counter = [0, draw(st.integers(min_value=0 if messy else 2, max_value=8))]
    width = draw(st.integers(min_value=3, max_value=5))
    if messy:
        names = draw(st.lists(st.sampled_from(NAMES[:12] + ["é", "東京", " a "]), min_size=width, max_size=width))
    else:
        names = draw(st.lists(st.sampled_from(PLAIN_NAMES), min_size=width, max_size=width, unique=True))
    columns = [draw(parquet_columns(counter, messy)) for _ in names]
    path = directory / "input.parquet"
    pq.write_table(pa.Table.from_arrays(columns, names=names), path)
    data = path.read_bytes()
    damage = draw(st.sampled_from(["none"] * 3 + ["truncate", "flip"])) if messy else "none"
    if damage == "truncate":
        data = data[: draw(st.integers(min_value=0, max_value=len(data) - 1))]
    elif damage == "flip":
        position = draw(st.integers(min_value=0, max_value=len(data) - 1))
        data = data[:position] + bytes([data[position] ^ 0xFF]) + data[position + 1 :]
    path.write_bytes(data)
    renamed = draw(st.sampled_from([[], [], [f"c{k}" for k in range(width)]] + [["q", "a"]] * messy))
    distinct = list(dict.fromkeys(renamed or names))
    roles = draw(st.permutations(distinct + ["z"] * messy))
    quasi_identifiers = list(roles[: draw(st.integers(min_value=0, max_value=min(2, len(roles) - 2)))])
    sensitive_attributes = list(roles[len(quasi_identifiers) : len(quasi_identifiers) + draw(st.integers(2, 3))])
    options = {
        "quasi_identifiers": quasi_identifiers,
        "sensitive_attributes": sensitive_attributes,
        "input_format": draw(st.sampled_from(["parquet", "auto"])),
        "column_names": renamed,
        "missing_value_tokens": draw(st.sampled_from([("", "NULL", "?"), ("nan",)])),
        "max_value_length": draw(st.sampled_from([None, 4096, 4096, 3])),
        "ell": draw(st.sampled_from([None, 2])),
    }
    return path, options


@settings(FUZZ, max_examples=200)
@given(data=st.data())
def test_parquet_reader(tmp_path_factory, data):
    path, options = data.draw(parquet_files(tmp_path_factory.mktemp("parquet")))
    read_or_refuse(path, **options)


# ------------------------------------------------------------------------------------------------
# CLI options of `msa-release run`, stopped before the input is read


class ReachedPreflight(Exception):
    """Raised by the stand-in for ``preflight``: the options were accepted."""

    def __init__(self, config: dict):
        super().__init__("reached preflight")
        self.config = config


OPTION_VALUES = {
    "--ell": "int",
    "--min-confidence": "float",
    "--seed": "int",
    "--model": ["mixed", "rating", "kl", "KL", "", "foo"],
    "--confidence-tolerance": "float",
    "--posterior-slack": "float",
    "--posterior-gate": ["block", "warn", "x"],
    "--grouping": ["qi_aware", "p1", "P1"],
    "--stratum-deletion-budget": "float",
    "--residual-policy": ["delete", "suppress", ""],
    "--min-support": "int",
    "--randomness": ["home-secret", "spec-reference", "home_secret"],
    "--k": "int",
    "--kl-method": ["blocked", "greedy", "exact", "fast"],
    "--max-block-size": "int",
    "--generalization-weights": ["sex=2,race=0.5", "sex", "sex=1,sex=2", "=3", "sex=nan", "sex=inf", "é=1", ","],
    "--mining-backend": ["auto", "duckdb", "counting", "none"],
    "--duckdb-mining-threshold": "int",
    "--keep-releases": "int",
    "--wait-timeout": "float",
    "--max-value-length": "int",
    "--input": ["x.csv", "", "é.parquet", "/dev/null"],
    "--input-format": ["auto", "csv", "parquet", "json"],
    "--column-names": ["a,b,c", "", ",", "a,a", "ROW_ID,a"],
    "--delimiter": [",", ";", "", ";;", "\t", "é"],
    "--quasi-identifiers": ["sex,race", "", ",", "a", "row_id"],
    "--sensitive-attributes": ["education,occupation", "", "a", "a,a", "a,A"],
    "--missing-tokens": ["", ",", "NULL,?", "é"],
    "--profile-output": ["p.json", ""],
    "--hierarchies": ["data/adult/hierarchies", "", "nowhere"],
    "--unknown-option": ["1"],
}
FLAGS = ["--allow-disclosure", "--allow-recomposition", "--wait", "--no-wait", "--profile", "--header", "--no-header",
         "--verbose", "--help", "--", "-x"]  # fmt: skip
INTEGERS = st.one_of(
    st.integers(min_value=-3, max_value=10),
    st.sampled_from([2**31, 2**63 - 1, 2**63, 2**64, 2**70, -(2**63)]),
).map(str) | st.sampled_from(["", "1.5", "1e3", "0x10", "٣", " 3", "3 ", "nan"])
FLOATS = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True).map(repr),
    st.sampled_from(["nan", "NaN", "inf", "-inf", "Infinity", "1e309", "-0.0", "0", "1", "", "0.5.5", "½", "1_0"]),
)


@st.composite
def run_arguments(draw):
    arguments = []
    for _ in range(draw(st.integers(min_value=0, max_value=6))):
        if draw(st.integers(0, 5)) == 0:
            arguments.append(draw(st.sampled_from(FLAGS)))
            continue
        option = draw(st.sampled_from(sorted(OPTION_VALUES)))
        kind = OPTION_VALUES[option]
        if kind == "int":
            value = draw(INTEGERS)
        elif kind == "float":
            value = draw(FLOATS)
        else:
            value = draw(st.sampled_from(kind))
        arguments += [option, value] if draw(st.integers(0, 9)) else [option]
    return arguments


@pytest.fixture(scope="module")
def stopped_before_reading():
    """``preflight`` replaced by a stand-in that stops the command with the settings it would have read."""

    def stand_in(config, *, home_option):
        raise ReachedPreflight(config)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(run_command, "preflight", stand_in)
        yield


@settings(FUZZ, max_examples=300)
@given(arguments=run_arguments())
def test_run_options(stopped_before_reading, tmp_path_factory, arguments):
    home = tmp_path_factory.mktemp("cli") / "home"
    with watchdog():
        outcome = CliRunner().invoke(main, ["run", *arguments, "--home", str(home)], catch_exceptions=True)
    assert_no_token(outcome.output)
    error = outcome.exception
    if isinstance(error, ReachedPreflight):
        from pipeline.resources import ReleaseSettings

        settings_ = ReleaseSettings(**error.config)  # what reached the reader validates
        assert 0 <= settings_.seed <= MAX_SEED and 0 <= settings_.min_support <= MAX_SEED
        for name in ("min_confidence", "confidence_tolerance", "posterior_slack", "stratum_deletion_budget"):
            assert math.isfinite(getattr(settings_, name)), name
        return
    if error is None or isinstance(error, SystemExit):
        # --help (0), a usage error (2), or an error of the project with its exit status
        assert outcome.exit_code in (0, 2), (arguments, outcome.output)
        assert "Traceback" not in outcome.output
        return
    if isinstance(error, MsaReleaseError | click.ClickException):
        return
    raise AssertionError(f"msa-release run {arguments} raised {type(error).__name__}: {error}") from error


# ------------------------------------------------------------------------------------------------
# releases/LATEST


@settings(FUZZ, max_examples=100)
@given(
    content=st.one_of(
        st.binary(max_size=40),
        st.sampled_from([b"../../victim", b"/etc", b"..", b".", b".staging-x", b"20260101T000000Z-00000001\n", b"a/b"]),
        st.text(max_size=30).map(str.encode),
    )
)
def test_latest_file(tmp_path_factory, content):
    releases = tmp_path_factory.mktemp("latest") / "releases"
    (releases / "20260101T000000Z-00000001").mkdir(parents=True)
    (releases / "LATEST").write_bytes(content)
    try:
        latest = read_latest(releases)
    except InvalidLatest:
        return
    assert latest is not None and latest.parent == releases and latest.is_dir() and not latest.name.startswith(".")


def test_the_token_check_catches_an_echoed_value():
    """The leak assertion of these tests can fail."""
    with pytest.raises(AssertionError, match="echoes a cell value"):
        assert_no_token("line 3: bad value 'QV17Q'")
    assert_no_token("line 3: bad value")
