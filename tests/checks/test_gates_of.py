"""``checks.gates.gates_of``: each gate attached to the candidate of every model that names it (issue 13: Rating runs
the mixed model's gates on its own tables in its own job)."""

from __future__ import annotations

import dagster as dg

from checks.gates import MEASURED_WHEN_NOT_APPLICABLE, gates_of
from pipeline.models import publication_model

MIXED, RATING = publication_model("mixed"), publication_model("rating")


def _by_candidate(checks) -> dict[str, dict[str, dg.AssetChecksDefinition]]:
    found: dict[str, dict[str, dg.AssetChecksDefinition]] = {}
    for check in checks:
        (key,) = check.check_keys
        found.setdefault(key.asset_key.path[-1], {})[key.name] = check
    return found


def test_every_model_gets_every_gate_it_names_on_its_own_candidate():
    found = _by_candidate(gates_of([MIXED, RATING]))
    assert set(found["release_candidate"]) == set(MIXED.gates)
    assert set(found["rating_release_candidate"]) == set(RATING.gates)


def test_rating_s_gates_read_rating_s_tables_only():
    rating_checks = _by_candidate(gates_of([MIXED, RATING]))["rating_release_candidate"]
    mixed_only = {
        "candidate/sac_released",
        "candidate/attribute_table",
        "candidate/id_table",
        "candidate/attribute_clusters",
        "candidate/release_candidate",
        "private/release_row_map",
        "private/deleted_records",
        "private/strong_value_occurrences",
        "private/release_candidate_adversary",
    }
    for name, check in rating_checks.items():
        read = {key.to_user_string() for key in check.node_keys_by_input_name.values()}
        assert not read & mixed_only, name
    disclosure = {key.to_user_string() for key in rating_checks["disclosure_within_bound"].node_keys_by_input_name.values()}
    # the adversary's one pass over Rating's own candidate (issue 13: the adversary runs once per run), and the
    # strong rules for each rule's consequent attribute (issue 16: its bound is 1/ℓ_j of that attribute)
    assert disclosure - {"candidate/rating_release_candidate"} == {
        "private/rating_release_candidate_adversary",
        "private/strong_rules",
    }


def test_a_gate_that_does_not_apply_and_measures_nothing_reads_no_table():
    rating_checks = _by_candidate(gates_of([RATING]))["rating_release_candidate"]
    candidate = dg.AssetKey(["candidate", RATING.candidate_asset])
    for name in RATING.not_applicable:
        read = {k: v for k, v in rating_checks[name].node_keys_by_input_name.items() if v != candidate}
        if name in MEASURED_WHEN_NOT_APPLICABLE:
            assert read, name  # still measures (its figures are shown beside the reason)
        else:
            assert read == {}, name
            result = rating_checks[name]()  # runs without any table
            assert result.passed and result.metadata["applicable"].value is False
            assert result.metadata["reason"].value == RATING.not_applicable[name]


def test_the_utility_gate_is_attached_to_every_built_in_model_and_reads_its_own_tables():
    from pipeline.models import PUBLICATION_MODELS

    found = _by_candidate(gates_of(list(PUBLICATION_MODELS.values())))
    assert {candidate for candidate, checks in found.items() if "utility_within_thresholds" in checks} == {
        "release_candidate",
        "rating_release_candidate",
        "kl_release_candidate",
    }

    def read(candidate: str) -> set[str]:
        check = found[candidate]["utility_within_thresholds"]
        return {key.to_user_string() for key in check.node_keys_by_input_name.values()}

    assert {"private/deleted_records", "candidate/attribute_table"} <= read("release_candidate")
    assert {"private/rating_deleted_records", "candidate/rating_attribute_table"} <= read("rating_release_candidate")
    assert {"private/kl_suppressed_records", "candidate/kl_released"} <= read("kl_release_candidate")
