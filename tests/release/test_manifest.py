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


# --------------------------------------------------------------------------- utility and overrides (issue 15)


def test_overrides_list_every_setting_that_weakens_a_default_and_only_those():
    from pipeline.release.manifest import release_overrides

    defaults = {
        "max_deleted_share": 0.1,
        "max_suppressed_share": 0.1,
        "confidence_tolerance": 0.05,
        "allow_disclosure": False,
        "posterior_gate": "block",
        "posterior_slack": 0.05,
        "allow_recomposition": False,
        "randomness": "home-secret",
        "ell": 3,
    }
    weakened = {
        **defaults,
        "max_deleted_share": 0.25,
        "confidence_tolerance": 0.3,
        "allow_disclosure": True,
        "posterior_gate": "warn",
        "randomness": "spec-reference",
        "max_suppressed_share": 0.05,  # stricter than the default: not an override
        "ell": 5,  # not a protection threshold that this list covers
    }
    overrides = release_overrides(weakened, defaults, list(defaults))
    assert [o["setting"] for o in overrides] == [
        "max_deleted_share",
        "confidence_tolerance",
        "allow_disclosure",
        "posterior_gate",
        "randomness",
    ]
    first = overrides[0]
    assert (first["value"], first["default"]) == (0.25, 0.1) and "25.0 %" in first["effect"]
    assert release_overrides(defaults, defaults, list(defaults)) == []
    # a setting the job does not read (allow_disclosure for a (k, ℓ) job) is never an override
    assert "allow_disclosure" not in {o["setting"] for o in release_overrides(weakened, defaults, ["max_deleted_share"])}


def test_rule_thresholds_above_their_defaults_are_overrides():
    # red team, session 38: --min-support 1000 mined no rule, so the disclosure gate bounded nothing on a shared release
    from pipeline.release.manifest import release_overrides

    defaults = {"min_support": 0, "min_confidence": 0.8, "ell": 3}
    names = ["min_support", "min_confidence"]
    (support,) = release_overrides({**defaults, "min_support": 1000}, defaults, names)
    assert (support["value"], support["default"]) == (1000, 5) and "fewer than 1000 records" in support["effect"]
    (confidence,) = release_overrides({**defaults, "min_confidence": 0.9}, defaults, names)
    assert confidence["setting"] == "min_confidence" and "below 0.9" in confidence["effect"]
    # lower thresholds mine more rules: stricter, not overrides; 0 is max(ℓ, 5); at ℓ = 7 a support of 6 is stricter
    assert release_overrides({**defaults, "min_support": 1, "min_confidence": 0.7}, defaults, names) == []
    assert release_overrides({**defaults, "min_support": 5}, defaults, names) == []
    assert release_overrides({**defaults, "ell": 7, "min_support": 6}, {**defaults, "ell": 7}, names) == []
    assert [o["setting"] for o in release_overrides({**defaults, "min_support": 6}, defaults, names)] == ["min_support"]


def test_the_utility_section_is_typed_and_read_from_the_gate():
    from pipeline.release.manifest import utility_of_checks

    figures = {
        "records_eligible": 10,
        "records_deleted": 2,
        "deleted_share": 0.2,
        "suppressed_cells": {"a": 0},
        "attribute_cells": {"a": 8},
        "suppressed_share": {"a": 0.0},
        "max_deleted_share": 0.25,
        "max_suppressed_share": 0.1,
    }
    checks = [
        {
            "name": "utility_within_thresholds",
            "passed": True,
            "status": "passed",
            "observed": {**figures, "gx_success_percent": 100.0},
        }
    ]
    utility = utility_of_checks(checks)
    assert utility == {**figures, "passed": True}
    assert validate_manifest({"release_id": "r", "utility": utility}).utility is not None
    assert utility_of_checks([{"name": "records_accounted_for", "passed": True, "observed": {}}]) is None
    with pytest.raises(ValueError, match="utility.records_deleted"):
        validate_manifest({"release_id": "r", "utility": {**utility, "records_deleted": "two"}})
    with pytest.raises(ValueError, match="overrides.0.effect"):
        validate_manifest({"release_id": "r", "overrides": [{"setting": "x", "value": 1, "default": 0}]})


def test_sharding_is_optional_typed_and_never_carries_a_salt():
    sharding = {
        "n_shards": 3,
        "shard_rows": 100_000,
        "engine": "local",
        "workers": 2,
        "per_shard": {"n_records": [99_000, 100_000], "n_deleted": [0, 4], "n_suppressed_cells": [0, 12]},
    }
    assert validate_manifest({"release_id": "r"}).sharding is None  # an unsharded release (and every older one)
    typed = validate_manifest({"release_id": "r", "sharding": sharding})
    assert typed.sharding is not None and typed.sharding.n_shards == 3 and typed.sharding.per_shard.n_deleted == (0, 4)
    for key, value, kind in [
        ("salt", 12345, "extra_forbidden"),
        ("n_shards", 0, "greater_than"),
        ("engine", None, "string_type"),
    ]:
        with pytest.raises(ValueError, match=f"sharding.{key} \\({kind}\\)") as raised:
            validate_manifest({"release_id": "r", "sharding": {**sharding, key: value}})
        assert "12345" not in str(raised.value)
    with pytest.raises(ValueError, match="sharding.per_shard.n_records"):
        validate_manifest({"release_id": "r", "sharding": {**sharding, "per_shard": {**sharding["per_shard"], "n_records": [1]}}})
