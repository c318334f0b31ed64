"""The typed release manifest (pipeline/release/manifest.py): every column of ``release_manifest`` has a type, and a
manifest with a wrong type or an unknown key is refused before anything is published."""

from __future__ import annotations

import json

import pandas as pd
import pytest

from pipeline.release.manifest import Manifest, validate_manifest
from pipeline.release.publish import MANIFEST_COLUMNS, publish_release

#: Only the manifest table: the test publishes no data table.
SCHEMAS = {"release_manifest": dict(MANIFEST_COLUMNS)}


def test_the_typed_manifest_and_the_table_columns_name_the_same_keys():
    assert set(Manifest.model_fields) == set(MANIFEST_COLUMNS)


def test_a_mixed_manifest_with_json_values_validates():
    manifest = {
        "release_id": "20261125T000000Z-0000",
        "created_at": "2026-11-25T00:00:00+00:00",
        "model": "mixed",
        "ell": 3,
        "allow_disclosure": False,
        "quasi_identifiers": ["age"],
        "sensitive_attributes": ["a", "b"],
        "n_input": 10,
        "checks": [{"name": "gate", "passed": True}],
        "stage_seconds": {"load": 0.5},
        "min_confidence": 0.8,
        "posterior_gate": "block",
        "posterior_gate_warned": False,
        "k": None,
    }
    typed = validate_manifest(manifest)
    assert typed.ell == 3 and typed.model == "mixed" and typed.k is None


@pytest.mark.parametrize(
    ("key", "value", "kind"),
    [
        ("ell", "three", "int_parsing"),
        ("allow_disclosure", "yes", "bool_type"),
        ("model", "foo", "enum"),
        ("quasi_identifiers", "age", "list_type"),
        ("unexpected_key", 1, "extra_forbidden"),
    ],
)
def test_a_wrong_type_or_an_unknown_key_is_refused_naming_the_key_not_the_value(key, value, kind):
    with pytest.raises(ValueError) as raised:
        validate_manifest({"release_id": "r", key: value})
    message = str(raised.value)
    assert key in message and kind in message
    assert repr(value) not in message


def test_publish_refuses_a_manifest_of_the_wrong_type_before_writing(tmp_path):
    releases = tmp_path / "releases"
    with pytest.raises(ValueError, match="n_input"):
        publish_release(releases, "r1", {}, SCHEMAS, {"release_id": "r1", "n_input": "many"})
    assert not (releases / "r1").exists() and not (releases / "LATEST").exists()
    published = publish_release(releases, "r2", {}, SCHEMAS, {"release_id": "r2", "n_input": 4})
    assert json.loads((published / "manifest.json").read_text())["n_input"] == 4
    assert pd.read_parquet(published / "release_manifest.parquet")["n_input"].tolist() == [4]


def test_input_reading_names_the_unconfigured_columns_by_position():
    """A headerless CSV of 5 columns whose configured columns sit at positions 0, 2 and 4."""
    from pipeline.release.manifest import InputReading

    reading = InputReading.model_validate(
        {"input_file": "t.csv", "csv_header": False, "column_count": 5, "column_positions": {"age": 0, "sex": 2, "job": 4}}
    )
    assert reading.all_column_names() == ["age", "column_2", "sex", "column_4", "job"]
    assert InputReading.model_validate({"column_names": ["a", "b"]}).all_column_names() == ["a", "b"]


def test_a_manifest_whose_input_reading_has_a_wrong_type_is_refused():
    with pytest.raises(ValueError, match="input_reading.column_positions"):
        validate_manifest({"release_id": "r", "input_reading": {"column_positions": {"age": "first"}}})
    with pytest.raises(ValueError, match="input_reading.source_path"):
        validate_manifest({"release_id": "r", "input_reading": {"source_path": "/private/raw.csv"}})
