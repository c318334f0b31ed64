"""Issue 15: a run configured in the launchpad (or the inbox) for a new CSV reads its header row without
``csv_header: true``: when ``csv_header`` is unset and the input is not Adult's headerless adult.data, the header is
detected (:func:`pipeline.io.loading.detect_csv_header`), and Adult's column names apply to Adult's file only."""

from __future__ import annotations

import gzip

import pytest

from pipeline.io.loading import InputError, detect_csv_header, load_records
from pipeline.resources import ADULT_COLUMNS, ReleaseSettings

ROWS = "34,F,02138,flu,aspirin\n51,M,02139,cold,none\n29,F,10001,asthma,inhaler\n"
COLUMNS = ["age", "sex", "zip", "diagnosis", "drug"]


def test_a_header_naming_the_configured_columns_is_detected(tmp_path):
    path = tmp_path / "patients.csv"
    path.write_text("age,sex,zip,diagnosis,drug\n" + ROWS)
    assert detect_csv_header(path, expected_columns=COLUMNS)
    gzipped = tmp_path / "patients.csv.gz"
    gzipped.write_bytes(gzip.compress(path.read_bytes()))
    assert detect_csv_header(gzipped, expected_columns=COLUMNS)


def test_a_first_row_of_records_is_not_a_header(tmp_path):
    path = tmp_path / "headerless.csv"
    path.write_text(ROWS)
    assert not detect_csv_header(path, expected_columns=COLUMNS)


def test_the_sniffer_decides_when_the_configured_names_are_not_all_in_the_first_row(tmp_path):
    """A header of other names over numeric columns: csv.Sniffer sees a first row unlike the rest."""
    path = tmp_path / "renamed.csv"
    path.write_text("years,weight\n34,71\n51,80\n29,66\n")
    assert detect_csv_header(path, expected_columns=["age"])
    headerless = tmp_path / "numbers.csv"
    headerless.write_text("34,71\n51,80\n29,66\n")
    assert not detect_csv_header(headerless, expected_columns=["age"])


def test_settings_without_csv_header_read_a_new_csv_with_its_header_and_adult_without(tmp_path):
    """What the launchpad's run config gives when only input_path and the columns are set."""
    path = tmp_path / "patients.csv"
    path.write_text("age,sex,zip,diagnosis,drug\n" + ROWS)
    settings = ReleaseSettings(
        input_path=str(path), quasi_identifiers=["age", "sex", "zip"], sensitive_attributes=["diagnosis", "drug"]
    )
    assert settings.csv_header is None and settings.column_names == []
    options = settings.reading_options()
    assert options["csv_header"] is True and options["column_names"] == []
    loaded = load_records(settings.input_path, **options)
    assert loaded.n_input == 3 and list(loaded.records["zip"].astype(str)) == ["02138", "02139", "10001"]
    adult = ReleaseSettings()
    assert adult.reading_options()["csv_header"] is False and adult.reading_options()["column_names"] == ADULT_COLUMNS


def test_a_headerless_new_csv_asks_for_its_column_names_in_run_config_words(tmp_path):
    path = tmp_path / "headerless.csv"
    path.write_text(ROWS)
    settings = ReleaseSettings(
        input_path=str(path), quasi_identifiers=["age", "sex", "zip"], sensitive_attributes=["diagnosis", "drug"]
    )
    assert settings.reading_options()["csv_header"] is False
    with pytest.raises(InputError) as refused:
        load_records(settings.input_path, **settings.reading_options())
    message = str(refused.value)
    assert "needs the column names (`column_names: [a, b, c]`)" in message and "`csv_header: true`" in message
    named = ReleaseSettings(
        input_path=str(path),
        column_names=COLUMNS,
        quasi_identifiers=["age", "sex", "zip"],
        sensitive_attributes=["diagnosis", "drug"],
    )
    assert load_records(named.input_path, **named.reading_options()).n_input == 3
