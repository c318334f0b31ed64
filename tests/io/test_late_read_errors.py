"""Errors the reader meets after the first records (red team, session 39).

DuckDB parses a table's first 2,048 records when the query runs and the rest while the Arrow reader fetches the
batches; there its errors arrive as ``OSError`` (or an Arrow exception) carrying DuckDB's text, which for a CSV quotes
the whole offending line. Both formats now give the same :class:`~pipeline.io.loading.InputError` at any depth: the
file, the line (CSV) and what to do, never a value, nothing chained."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from pipeline.io.loading import InputError, load_records


def _table(n_records: int, header: str = "q,a,b") -> str:
    """A CSV text of ``n_records`` records under ``header`` (three columns: 7, 13 and 11 distinct values)."""
    return header + "\n" + "".join(f"{i % 7},v{i % 13},w{i % 11}\n" for i in range(n_records))


def _invoke(home: Path, arguments: list[str], dagster_home: Path | None = None):
    """``msa-release`` run in-process with ``home`` as $MSA_RELEASE_HOME (Dagster's home inside it unless given)."""
    from click.testing import CliRunner

    from pipeline.cli import main

    return CliRunner().invoke(
        main, arguments, env={"MSA_RELEASE_HOME": str(home), "DAGSTER_HOME": str(dagster_home or home / "dagster")}
    )


def _csv(path: Path, n_records: int, *, ragged_record: int) -> Path:
    rows = ["q,a,b"] + [f"{i % 7},v{i % 13},w{i % 11}" for i in range(n_records)]
    rows[ragged_record] += ",SECRET-VALUE-QQ"  # rows[k] is record k, on line k + 1 of the file
    path.write_text("\n".join(rows) + "\n")
    return path


@pytest.mark.parametrize("record", [10, 2_100, 9_990])
def test_a_ragged_row_gives_its_line_at_any_depth(tmp_path, record):
    path = _csv(tmp_path / "ragged.csv", 10_000, ragged_record=record)
    with pytest.raises(InputError) as raised:
        load_records(path, quasi_identifiers=["q"], sensitive_attributes=["a", "b"])
    message = str(raised.value)
    assert message.startswith(f"{path}, line {record + 1}: the row has more than 3 fields but the header")
    assert "SECRET" not in message and "v1" not in message
    assert raised.value.__cause__ is None and raised.value.__suppress_context__


def test_a_damaged_later_row_group_of_a_parquet_file_is_named(tmp_path):
    n = 20_000
    table = pa.table(
        {"q": [str(i % 7) for i in range(n)], "a": [f"v{i % 13}" for i in range(n)], "b": [f"w{i % 11}" for i in range(n)]}
    )
    path = tmp_path / "damaged.parquet"
    pq.write_table(table, path, row_group_size=4_000, compression="none", use_dictionary=False)
    offset = pq.ParquetFile(path).metadata.row_group(4).column(1).data_page_offset  # the last row group's column a
    data = bytearray(path.read_bytes())
    data[offset : offset + 64] = b"\xff" * 64
    path.write_bytes(bytes(data))
    with pytest.raises(InputError, match=r"damaged.parquet: cannot be read as Parquet \(") as raised:
        load_records(path, quasi_identifiers=["q"], sensitive_attributes=["a", "b"])
    assert raised.value.__cause__ is None


@pytest.mark.parametrize("name", ["x?.csv", "x*.csv", "x[1].csv", "p?.parquet"])
def test_a_file_name_duckdb_would_expand_as_a_pattern_is_refused(tmp_path, name):
    # red team, session 39: 'x?.csv' read x?.csv and x1.csv (10,000 records from a 5,000-record file), all published
    rows = _table(50)
    for file in (name, name.replace("?", "1").replace("*", "1").replace("[1]", "1")):
        target = tmp_path / file
        if target.suffix == ".parquet":
            pq.write_table(pa.table({"q": ["1"] * 5, "a": ["x"] * 5, "b": ["y"] * 5}), target)
        else:
            target.write_text(rows)
    with pytest.raises(InputError, match="which the reader takes as a file-name pattern") as raised:
        load_records(tmp_path / name, quasi_identifiers=["q"], sensitive_attributes=["a", "b"])
    assert "rename the file" in str(raised.value)


def test_the_cli_refuses_a_pattern_name_with_exit_2_and_publishes_nothing(tmp_path):
    rows = _table(50)
    (tmp_path / "x?.csv").write_text(rows)
    (tmp_path / "x1.csv").write_text(rows)
    home = tmp_path / "home"
    outcome = _invoke(
        home,
        [
            "run",
            "--input",
            str(tmp_path / "x?.csv"),
            "--quasi-identifiers",
            "q",
            "--sensitive-attributes",
            "a,b",
            "--home",
            str(home),
        ],
    )
    assert outcome.exit_code == 2, outcome.output
    assert "file-name pattern" in outcome.output
    assert not (home / "releases").exists() or not any((home / "releases").iterdir())


def test_negative_zero_is_the_value_zero_in_a_floating_point_parquet_column(tmp_path):
    # red team, session 39: -0.0 and 0.0 were two sensitive values, so a SID holding only them passed ℓ = 2
    values = [0.0, -0.0, 1.5, -0.0, 0.0, 2.25]
    path = tmp_path / "zeros.parquet"
    pq.write_table(
        pa.table(
            {
                "q": ["a", "b", "c", "d", "e", "f"],
                "f": pa.array(values, pa.float64()),
                "g": pa.array(values, pa.float32()),
                "h": ["x"] * 3 + ["y"] * 3,
            }
        ),
        path,
    )
    records = load_records(path, quasi_identifiers=["q"], sensitive_attributes=["f", "g", "h"]).records
    for column in ("f", "g"):
        assert records[column].astype(str).tolist() == ["0.0", "0.0", "1.5", "0.0", "0.0", "2.25"]


@pytest.mark.parametrize("role", ["quasi-identifier", "sensitive attribute"])
def test_a_column_named_like_the_models_working_column_is_refused_up_front(tmp_path, role):
    # red team, session 39: a quasi-identifier named 'stratum' gave a traceback from plan ("cannot insert stratum,
    # already exists") and a withheld shard error from run
    path = tmp_path / "stratum.csv"
    path.write_text(_table(50, "stratum,a,b"))
    columns = {"quasi_identifiers": ["stratum"], "sensitive_attributes": ["a", "b"]}
    if role == "sensitive attribute":
        path.write_text(_table(50, "q,stratum,b"))
        columns = {"quasi_identifiers": ["q"], "sensitive_attributes": ["stratum", "b"]}
    with pytest.raises(InputError, match=r"column name\(s\) \['stratum'\] are used by the models' working tables"):
        load_records(path, **columns)


def test_plan_refuses_a_stratum_column_with_exit_2(tmp_path):
    path = tmp_path / "stratum.csv"
    path.write_text(_table(50, "stratum,a,b"))
    home = tmp_path / "home"
    outcome = _invoke(
        home,
        ["plan", "--input", str(path), "--quasi-identifiers", "stratum", "--sensitive-attributes", "a,b", "--home", str(home)],
    )
    assert outcome.exit_code == 2, outcome.output
    assert "working tables" in outcome.output


@pytest.mark.parametrize("same", ["name", "link"])
def test_synthesize_refuses_to_write_over_its_input(tmp_path, same):
    # red team, session 39: --output equal to --input replaced the source CSV with the Parquet sample (exit 0)
    from click.testing import CliRunner

    from pipeline.cli import main

    source = tmp_path / "source.csv"
    text = _table(50)
    source.write_text(text)
    output = source
    if same == "link":
        output = tmp_path / "link.csv"
        output.symlink_to(source)
    outcome = CliRunner().invoke(
        main,
        [
            "synthesize",
            "--rows",
            "10",
            "--input",
            str(source),
            "--output",
            str(output),
            "--quasi-identifiers",
            "q",
            "--sensitive-attributes",
            "a,b",
        ],
    )
    assert outcome.exit_code == 2, outcome.output
    assert "is the input file" in outcome.output
    assert source.read_text() == text


def test_a_row_longer_than_the_column_names_is_not_given_a_made_up_length(tmp_path):
    # red team, session 39: 3 --column-names on a 15-field file said "the row has 4 fields" (DuckDB stops counting one
    # past the expected number)
    path = tmp_path / "wide.csv"
    path.write_text("".join(",".join(f"c{j}{i % 5}" for j in range(15)) + "\n" for i in range(20)))
    with pytest.raises(InputError, match=r"wide.csv, line 1: the row has more than 3 fields but the header \(or"):
        load_records(
            path, quasi_identifiers=["q"], sensitive_attributes=["a", "b"], csv_header=False, column_names=["q", "a", "b"]
        )


def test_a_short_row_keeps_its_exact_length(tmp_path):
    path = tmp_path / "short.csv"
    path.write_text("q,a,b\n1,x,p\n2,y\n")
    with pytest.raises(InputError, match=r"short.csv, line 3: the row has 2 fields but the header"):
        load_records(path, quasi_identifiers=["q"], sensitive_attributes=["a", "b"])


def test_a_parquet_file_named_csv_is_named_parquet(tmp_path):
    path = tmp_path / "table.csv"
    pq.write_table(pa.table({"q": ["1", "2"], "a": ["x", "y"], "b": ["p", "q"]}), path)
    with pytest.raises(InputError, match=r"table.csv: the file is Parquet, not CSV") as raised:
        load_records(path, quasi_identifiers=["q"], sensitive_attributes=["a", "b"])
    assert "iconv" not in str(raised.value)


@pytest.mark.parametrize("engine", ["local", "memory"])
def test_a_refusal_for_too_few_values_says_when_look_alike_spellings_were_merged(tmp_path, engine):
    # red team, session 39: a column of yes/YES was refused as "the same value in all 5000 records", false of the file

    path = tmp_path / "answers.csv"
    path.write_text("q,a,b\n" + "".join(f"{i % 7},{'yes' if i % 2 else 'YES'},w{i % 11}\n" for i in range(60)))
    home = tmp_path / "home"
    outcome = _invoke(
        home,
        [
            "run",
            "--input",
            str(path),
            "--quasi-identifiers",
            "q",
            "--sensitive-attributes",
            "a,b",
            "--engine",
            engine,
            "--home",
            str(home),
        ],
    )
    assert outcome.exit_code == 2, outcome.output
    assert "have the same value in all 60 records" in outcome.output
    assert "in 'a', 1 spelling(s) differing from another only by upper/lower case" in outcome.output


def test_a_home_whose_path_duckdb_would_take_as_a_pattern_is_refused_up_front(tmp_path):
    # session 39: a home 'h[1]' failed the default engine's second step with DuckDB's "No files found that match the
    # pattern" (the staged shards under the home)

    path = tmp_path / "table.csv"
    path.write_text(_table(60))
    home = tmp_path / "h[1]"
    outcome = _invoke(
        home,
        ["run", "--input", str(path), "--quasi-identifiers", "q", "--sensitive-attributes", "a,b", "--home", str(home)],
        dagster_home=tmp_path / "dagster",
    )
    assert outcome.exit_code == 2, outcome.output
    assert "holds [ in its path, which the release's file reader (DuckDB) takes as a file-name pattern" in outcome.output
    assert not home.exists()


@pytest.mark.parametrize("record", [5, 15_000])
def test_a_parquet_string_that_is_not_utf8_is_refused_without_quoting_it(tmp_path, record):
    # review, session 39: DuckDB quotes the cell it cannot decode ('value "SECRETVALUE\xff\xfe" is not valid UTF8!'),
    # and the message repeated DuckDB's first line on both engines
    from pipeline.engines.staging import stage_input

    n = 20_000
    cells = [f"v{i % 13}".encode() for i in range(n)]
    cells[record] = b"SECRETVALUE\xff\xfe"
    path = tmp_path / "bytes.parquet"
    pq.write_table(
        pa.table(
            {
                "q": [str(i % 7) for i in range(n)],
                "a": pa.array(cells, pa.binary()).view(pa.string()),
                "b": [f"w{i % 11}" for i in range(n)],
            }
        ),
        path,
        row_group_size=4_000,
    )
    with pytest.raises(InputError) as raised:
        load_records(path, quasi_identifiers=["q"], sensitive_attributes=["a", "b"])
    assert "not valid UTF-8" in str(raised.value) and "SECRET" not in str(raised.value)
    assert raised.value.__cause__ is None
    with pytest.raises(InputError) as staged:
        stage_input(
            path, tmp_path / "staging", quasi_identifiers=["q"], sensitive_attributes=["a", "b"], salt=1, min_shard_rows=1
        )
    assert "SECRET" not in str(staged.value)


def test_a_directory_input_refuses_a_file_name_duckdb_would_expand(tmp_path):
    # review, session 39: a directory holding x?.csv and x1.csv read x1.csv twice (the directory listing skipped the check)
    from pipeline.engines.staging import input_files

    folder = tmp_path / "delivery"
    folder.mkdir()
    rows = _table(50)
    (folder / "x?.csv").write_text(rows)
    (folder / "x1.csv").write_text(rows)
    with pytest.raises(InputError, match="which the reader takes as a file-name pattern"):
        input_files(folder)


def test_a_csv_whose_first_column_is_named_par1_is_a_csv(tmp_path):
    # review, session 39: the Parquet check looked at the first 4 bytes only
    path = tmp_path / "par.csv"
    path.write_text("PAR1,a,b\n" + "".join(f"{i % 7},v{i % 13},w{i % 11}\n" for i in range(50)))
    loaded = load_records(path, quasi_identifiers=["PAR1"], sensitive_attributes=["a", "b"])
    assert len(loaded.records) == 50


def test_the_look_alike_note_covers_every_column_the_refusal_names(tmp_path):
    # review, session 39: with 'a' constant and 'b' holding yes/YES, the note named only the first column
    path = tmp_path / "two.csv"
    path.write_text("q,a,b,c\n" + "".join(f"{i % 7},x,{'yes' if i % 2 else 'YES'},w{i % 11}\n" for i in range(60)))
    with pytest.raises(InputError) as raised:
        load_records(path, quasi_identifiers=["q"], sensitive_attributes=["a", "b", "c"], ell=2)
    message = str(raised.value)
    assert "['a', 'b']" in message and "in 'b', 1 spelling(s)" in message and "in 'a'" not in message


def test_a_column_named_in_another_unicode_form_gets_a_hint(tmp_path):
    # red team, session 39: a header in NFD ('diagnosé' as e + combining accent) with the name configured in NFC got
    # "not in the input" and no hint
    import unicodedata

    nfd, nfc = unicodedata.normalize("NFD", "diagnosé"), unicodedata.normalize("NFC", "diagnosé")
    path = tmp_path / "nfd.csv"
    path.write_text(f"q,{nfd},b\n" + "".join(f"{i % 7},v{i % 13},w{i % 11}\n" for i in range(20)))
    with pytest.raises(InputError, match="another Unicode normalization form, NFC and NFD"):
        load_records(path, quasi_identifiers=["q"], sensitive_attributes=[nfc, "b"])
