"""Issue 14, "Low" items of the input reader (:func:`pipeline.io.loading.load_records`), one test each:

- a FIFO (or a device) is "not a regular file", not "not found", and is refused before it is opened (no hang);
- a gzip-compressed CSV is read directly (by its bytes, whatever its name), giving the records of the plain file;
- a UTF-16 or UTF-32 file is named as such, with the ``iconv -f UTF-16`` command (not a latin1 hint); a zip, bzip2,
  xz or zstd file says to decompress it;
- ``ROW_ID`` (a case variant of a reserved column name) is refused up front, naming the column (DuckDB compares
  names ignoring case, so it failed late with a KeyError);
- column names that differ only in case (CSV header, ``--column-names``, Parquet schema) are refused naming them
  (DuckDB renamed the Parquet one silently, ``A`` -> ``A_1``); non-ASCII case variants are distinct in DuckDB and read;
- a constant sensitive attribute is refused as known for everyone (the message said it "discloses nothing").
"""

from __future__ import annotations

import bz2
import gzip
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.io.loading import InfeasibleInput, InputError, load_records
from pipeline.vocabulary import COMMAND_LINE, speaking

ROWS = "q,a,b\n1,x,p\n2,y,q\n3,z,r\n"


def load(path: Path, **options):
    options.setdefault("quasi_identifiers", ["q"])
    options.setdefault("sensitive_attributes", ["a", "b"])
    return load_records(path, **options)


def records_as_lists(loaded) -> list[list[str]]:
    return loaded.records.drop(columns="row_id").astype(str).to_numpy().tolist()


# ------------------------------------------------------------------------------------------------
# special files


def test_a_fifo_is_not_a_regular_file_and_is_never_opened(tmp_path):
    fifo = tmp_path / "incoming.csv"
    os.mkfifo(fifo)  # opening it for reading would block until a writer comes: the check must not open it
    with pytest.raises(InputError) as refused:
        load(fifo)
    message = str(refused.value)
    assert "is not a regular file" in message and "named pipe (FIFO)" in message
    assert "not found" not in message


def test_a_missing_absolute_path_names_no_directory_it_was_not_looked_for_in(tmp_path):
    # a red team's case: "not found (looked in /work/main and /work/main)" for an absolute path
    with pytest.raises(InputError) as refused:
        load(tmp_path / "nonexistent.csv")
    message = str(refused.value)
    assert "nonexistent.csv' not found;" in message and "looked in" not in message


def test_a_loop_of_symbolic_links_is_named_as_such(tmp_path):
    (tmp_path / "one.csv").symlink_to(tmp_path / "two.csv")
    (tmp_path / "two.csv").symlink_to(tmp_path / "one.csv")
    with pytest.raises(InputError, match="symbolic link to a file that does not exist, or a loop of links"):
        load(tmp_path / "one.csv")


def test_the_cli_refuses_a_fifo_with_exit_2(tmp_path):
    from click.testing import CliRunner

    from pipeline.cli import main

    fifo = tmp_path / "incoming.csv"
    os.mkfifo(fifo)
    arguments = ["run", "--input", str(fifo), "--quasi-identifiers", "q", "--sensitive-attributes", "a,b"]
    outcome = CliRunner().invoke(main, [*arguments, "--home", str(tmp_path / "home")])
    assert outcome.exit_code == 2, outcome.output
    assert "is not a regular file (it is a named pipe (FIFO))" in outcome.output


def test_a_character_device_is_not_a_regular_file():
    with pytest.raises(InputError, match=r"not a regular file \(it is a character device\)"):
        load(Path("/dev/null"))


# ------------------------------------------------------------------------------------------------
# compression and encodings


@pytest.mark.parametrize("name", ["table.csv.gz", "table.csv"], ids=["gz-suffix", "gzip-named-csv"])
def test_a_gzip_csv_is_read_directly(tmp_path, name):
    plain = tmp_path / "plain.csv"
    plain.write_text(ROWS)
    compressed = tmp_path / name
    compressed.write_bytes(gzip.compress(ROWS.encode()))
    expected = records_as_lists(load(plain))
    loaded = load(compressed, ell=3)
    assert records_as_lists(loaded) == expected == [["1", "x", "p"], ["2", "y", "q"], ["3", "z", "r"]]
    assert loaded.n_input == 3


def test_a_gzip_csv_with_a_ragged_row_gives_the_line(tmp_path):
    path = tmp_path / "ragged.csv.gz"
    path.write_bytes(gzip.compress(b"q,a,b\n1,x,p\n2,y\n"))
    with pytest.raises(InputError, match=r"ragged.csv.gz, line 3: the row has 2 fields"):
        load(path)


def test_a_truncated_gzip_file_is_refused_with_gzip_t(tmp_path):
    path = tmp_path / "cut.csv.gz"
    path.write_bytes(gzip.compress(ROWS.encode() * 50)[:20])
    with pytest.raises(InputError, match=r"cannot be decompressed .*gzip -t cut.csv.gz"):
        load(path)


@pytest.mark.parametrize(
    ("encoding", "named"),
    [("utf-16", "UTF-16"), ("utf-16-le", "UTF-16"), ("utf-16-be", "UTF-16"), ("utf-32", "UTF-32")],
)
def test_utf16_and_utf32_are_named_with_the_iconv_command(tmp_path, encoding, named):
    path = tmp_path / "wide.csv"
    path.write_bytes(ROWS.encode(encoding))
    with pytest.raises(InputError) as refused:
        load(path)
    message = str(refused.value)
    assert f"encoded in {named}, not UTF-8" in message
    assert f"iconv -f {named} -t UTF-8 wide.csv > wide-utf8.csv" in message
    assert "latin1" not in message


def test_utf16_inside_gzip_is_named_too(tmp_path):
    path = tmp_path / "wide.csv.gz"
    path.write_bytes(gzip.compress(ROWS.encode("utf-16")))
    with pytest.raises(InputError, match=r"UTF-16.*gzip -dc wide.csv.gz \| iconv -f UTF-16 -t UTF-8 > wide-utf8.csv"):
        load(path)


def test_latin1_keeps_its_latin1_hint(tmp_path):
    path = tmp_path / "latin.csv"
    path.write_bytes("q,a,b\n1,café,p\n2,y,q\n".encode("latin-1"))
    with pytest.raises(InputError, match="not UTF-8 encoded.*iconv -f latin1"):
        load(path)


@pytest.mark.parametrize(
    ("content", "kind"),
    [(bz2.compress(ROWS.encode()), "bzip2"), (b"PK\x03\x04" + b"\0" * 40, "zip"), (b"\x28\xb5\x2f\xfd" + b"\0" * 8, "zstd")],
    ids=["bzip2", "zip", "zstd"],
)
def test_other_compressions_say_decompress_first(tmp_path, content, kind):
    path = tmp_path / "packed.csv"
    path.write_bytes(content)
    with pytest.raises(InputError, match=f"the file is {kind}-compressed; decompress it first"):
        load(path)


# ------------------------------------------------------------------------------------------------
# reserved names and case variants


@pytest.mark.parametrize("name", ["ROW_ID", "Row_Id", "GROUP_ID"])
def test_a_case_variant_of_a_reserved_name_is_refused_up_front(tmp_path, name):
    path = tmp_path / "reserved.csv"
    path.write_text(f"q,{name},b\n1,x,p\n2,y,q\n")
    with pytest.raises(InputError) as refused:
        load(path, sensitive_attributes=[name, "b"])
    message = str(refused.value)
    assert f"[{name!r}]" in message and "reserved name(s)" in message and "rename" in message
    assert refused.value.column == name


def test_a_case_variant_of_a_reserved_name_in_parquet(tmp_path):
    path = tmp_path / "reserved.parquet"
    pq.write_table(pa.table({"q": ["1", "2"], "ROW_ID": ["x", "y"], "b": ["p", "q"]}), path)
    with pytest.raises(InputError, match=r"\['ROW_ID'\] differ from the release contract's reserved name\(s\) \['row_id'\]"):
        load(path, sensitive_attributes=["ROW_ID", "b"])


def test_parquet_case_duplicate_columns_are_refused_naming_them(tmp_path):
    path = tmp_path / "case.parquet"
    pq.write_table(pa.table({"q": ["1", "2"], "a": ["x", "y"], "A": ["u", "v"], "b": ["p", "q"]}), path)
    with pytest.raises(InputError) as refused:
        load(path)
    message = str(refused.value)
    assert "differ only in upper/lower case: [['a', 'A']]" in message and "positions [[2, 3]]" in message
    assert "A_1" not in message


def test_csv_header_case_duplicates_give_positions_and_the_no_header_hint(tmp_path):
    """The hint names the command line's options under ``msa-release`` and the run config's keys otherwise (a run
    launched from the Dagster launchpad or the inbox: issue 15, "errors in config-key vocabulary")."""
    path = tmp_path / "case.csv"
    path.write_text("q,a,b,QQX,qqx\n1,x,p,1,2\n2,y,q,3,4\n")
    with speaking(COMMAND_LINE), pytest.raises(InputError) as refused:
        load(path)
    message = str(refused.value)
    assert "differ only in upper/lower case at 1-based positions [[4, 5]]" in message
    assert "--no-header --column-names" in message
    with pytest.raises(InputError) as in_run_config:  # the default vocabulary: the run config's
        load(path)
    assert "`csv_header: false` and `column_names: [a, b, c]`" in str(in_run_config.value)
    assert "--" not in str(in_run_config.value).replace(str(path), "")
    assert "QQX" not in message and "qqx" not in message  # a header row may be a record: its cells are not quoted


def test_column_names_option_case_duplicates_are_refused(tmp_path):
    path = tmp_path / "headerless.csv"
    path.write_text("1,x,p,0\n2,y,q,0\n")
    with (
        speaking(COMMAND_LINE),
        pytest.raises(
            InputError, match=r"--column-names has column names that differ only in upper/lower case: \[\['b', 'B'\]\]"
        ),
    ):
        load(path, csv_header=False, column_names=["q", "a", "b", "B"])


def test_non_ascii_case_variants_are_distinct_names(tmp_path):
    # DuckDB folds ASCII letters only: 'É' and 'é' are two columns there, so both are read
    path = tmp_path / "accents.csv"
    path.write_text("q,É,é\n1,x,p\n2,y,q\n")
    loaded = load(path, sensitive_attributes=["É", "é"])
    assert list(loaded.records.columns) == ["row_id", "q", "É", "é"]


# ------------------------------------------------------------------------------------------------
# a constant sensitive attribute


def test_a_constant_sensitive_attribute_is_refused_as_known_for_everyone(tmp_path):
    path = tmp_path / "constant.csv"
    path.write_text("q,a,b\n1,x,HIV\n2,y,HIV\n3,z,HIV\n4,w,?\n")
    with speaking(COMMAND_LINE), pytest.raises(InfeasibleInput) as refused:
        load(path, ell=2)
    message = str(refused.value)
    assert "['b'] have the same value in all 3 records" in message
    assert "known for everyone" in message and "nothing is published" in message
    assert "discloses nothing" not in message
    assert "Remove it from --sensitive-attributes" in message
    assert "HIV" not in message
    assert refused.value.column == "b"


def test_the_comma_hint_names_only_a_column_made_of_configured_names(tmp_path):
    """A header cell holding a comma gets the command line's comma hint only when its parts are configured names that
    are missing (diff review, session 40: a cell ',' or ' , ' got it, although it names none)."""
    from pipeline.io.loading import _check_columns

    def message(names: list[str]) -> str:
        with pytest.raises(InputError) as error:
            _check_columns(tmp_path / "f.csv", names, ["q"], ["a", "b"], origin="the header row", delimiter=",")
        return str(error.value)

    assert "holds a comma" not in message(["q", ",", "b", "x"])
    assert "holds a comma" not in message(["q", " , ", "b", "x"])
    assert "the column 'a,b' holds a comma" in message(["q", "a,b", "x"])


def test_a_did_you_mean_hint_is_its_own_sentence_before_the_advice(tmp_path):
    """Newcomer, session 40: "did you mean 'sex'? if the file has no header…" ran two sentences together."""
    from pipeline.io.loading import _check_columns

    with speaking(COMMAND_LINE), pytest.raises(InputError) as error:
        _check_columns(tmp_path / "f.csv", ["q", "A", "b"], ["q"], ["a", "b"], origin="the header row", delimiter=",")
    assert "it names ['q', 'b']); 'a': did you mean 'A'? If the file has no header row" in str(error.value)


def test_without_settings_advice_no_message_names_a_reading_option(tmp_path):
    """While an audit reads its raw table (diff review, session 40), the reader names no run option: not in the
    wrong-delimiter hint, nor in the refusals of repeated or case-variant header names."""
    from pipeline.io.loading import _check_columns, without_settings_advice

    cases = [
        (["q;a;b"], ["q"], ["a", "b"]),  # one column: the delimiter hint
        (["q", "a", "a", "b"], ["q"], ["a", "b"]),  # a repeated name
        (["q", "a", "A", "b"], ["q"], ["a", "b"]),  # names differing only in case
    ]
    for names, quasi_identifiers, sensitive_attributes in cases:
        for advice in (True, False):
            with speaking(COMMAND_LINE), pytest.raises(InputError) as error:
                if advice:
                    _check_columns(
                        tmp_path / "f.csv", names, quasi_identifiers, sensitive_attributes, origin="the header row", delimiter=","
                    )
                else:
                    with without_settings_advice():
                        _check_columns(
                            tmp_path / "f.csv",
                            names,
                            quasi_identifiers,
                            sensitive_attributes,
                            origin="the header row",
                            delimiter=",",
                        )
            options = [
                o for o in ("--delimiter", "--no-header", "--column-names", "--quasi-identifiers") if o in str(error.value)
            ]
            assert bool(options) is advice, (names, advice, str(error.value))
