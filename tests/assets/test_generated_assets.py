"""The assets the factory generates for each publishing job from the model registry (``assets/publish.py``): Rating's
own chain keeps its tables under its own keys and reads them under their contract names; the audit asset of a job
audits the release its own run published."""

from __future__ import annotations

import dagster as dg
import pandas as pd
import pytest

from assets.publish import job_assets
from pipeline.models import job_of_model, publication_model
from pipeline.models.mixed import MixedModel
from pipeline.models.rating import RATING


def _keys(assets) -> set[str]:
    return {key.to_user_string() for asset in assets for key in asset.keys}


def test_rating_s_generated_assets_are_its_own():
    candidate, publish, audit = job_assets(RATING.job, (RATING,))
    assert _keys([candidate]) == {
        "candidate/rating_sac_released",
        "candidate/rating_attribute_table",
        "candidate/rating_id_table",
        "candidate/rating_attribute_clusters",
        "candidate/rating_release_candidate",
        "private/rating_release_row_map",
        "private/rating_release_candidate_adversary",  # the adversary's one pass over the candidate
    }
    assert _keys([publish]) == {"rating_release"} and _keys([audit]) == {"audit/rating_release_disclosure"}
    # the publish step reads Rating's deleted records and candidate tables under their contract names
    read = {name: key.to_user_string() for name, key in publish.keys_by_input_name.items()}
    assert read["deleted_records"] == "private/rating_deleted_records"
    assert read["attribute_table"] == "candidate/rating_attribute_table"
    assert read["rating_release_row_map"] == "private/rating_release_row_map"
    assert dg.AssetKey("rating_release") in audit.asset_deps[dg.AssetKey(["audit", "rating_release_disclosure"])]
    # the audit reports the adversary's pass over Rating's own candidate: it does not re-run it on raw records
    audit_reads = {key.to_user_string() for key in audit.keys_by_input_name.values()}
    assert "private/rating_release_candidate_adversary" in audit_reads and "private/raw_records" not in audit_reads


def test_the_mixed_job_keeps_the_contract_names_and_its_audit_key():
    mixed = publication_model("mixed")
    candidate, publish, audit = job_assets(mixed.job, (mixed,))
    assert "candidate/attribute_table" in _keys([candidate]) and _keys([audit]) == {"audit/release_disclosure"}
    assert not any(key.startswith("candidate/rating_") for key in _keys([candidate, publish]))


def test_each_built_in_model_has_a_job_of_its_own():
    assert {name: job_of_model(name) for name in ("mixed", "rating", "kl")} == {
        "mixed": "release",
        "rating": "rating_release",
        "kl": "kl_release",
    }
    assert isinstance(RATING, MixedModel) and not RATING.publishes_sac


def test_rating_s_build_publishes_no_sac_and_no_clusters():
    records = pd.DataFrame(
        {"row_id": [1, 2, 3, 4], "sex": ["F", "M", "F", "M"], "diagnosis": ["x", "y", "x", "y"], "drug": ["a", "b", "b", "a"]}
    )
    parameters = RATING.parameters(
        type(
            "Settings",
            (),
            {
                "quasi_identifiers": ["sex"],
                "sensitive_attributes": ["diagnosis", "drug"],
                "ell": 2,
                "min_confidence": 0.8,
                "effective_min_support": lambda self: 5,
                "seed": 0,
                "randomness": "spec-reference",
                "grouping": "p1",
                "stratum_deletion_budget": 0.02,
                "residual_policy": "delete",
                "allow_disclosure": False,
                "confidence_tolerance": 0.05,
                "posterior_slack": 0.05,
                "posterior_gate": "block",
                "private_baseline_max_records": 0,
                "hierarchies_path": lambda self: "data/adult/hierarchies",
            },
        )()
    )
    sids = pd.DataFrame({"row_id": [1, 2, 3, 4], "diagnosis": [1, 1, 2, 2], "drug": [1, 1, 2, 2]})
    id_table = pd.DataFrame(
        {
            "attribute": ["diagnosis"] * 4 + ["drug"] * 4,
            "sid": [1, 1, 2, 2] * 2,
            "value": ["x", "y", "x", "y", "a", "b", "b", "a"],
            "count": [1] * 8,
        }
    )
    release = RATING.build(
        {
            "raw_records": records,
            "rating_records": records[["row_id"]],
            "rating_attribute_sids": sids,
            "rating_id_table": id_table,
        },
        parameters,
        secret=None,
    )
    assert len(release.tables["sac_released"]) == 0 and len(release.tables["attribute_clusters"]) == 0
    assert sorted(release.row_map["source_row_id"]) == [1, 2, 3, 4] and release.n_rows_out == 4
    assert list(release.tables["attribute_table"]["row_id"]) == [1, 2, 3, 4]


@pytest.mark.parametrize("name", ["rating"])
def test_rating_reads_only_its_own_stage_tables(name):
    model = publication_model(name)
    assert not {"sac_permuted", "ir_left", "ir_id_table", "sensitive_attribute_clusters"} & set(model.candidate_inputs)
    assert "mixed_model" not in model.stage_groups
