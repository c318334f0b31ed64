"""``checks.gates.gates_of``: each gate attached to the candidate of every model that names it (issue 13: Rating runs
the mixed model's gates on its own tables in its own job)."""

from __future__ import annotations

import dagster as dg

import pytest

from checks.gates import MEASURED_WHEN_NOT_APPLICABLE, PlannedGate, evaluate_planned_gates, gate_plan, gates_of
from pipeline.models import publication_model

MIXED, RATING = publication_model("mixed"), publication_model("rating")


def _by_candidate(checks) -> dict[str, dict[str, set[str]]]:
    """candidate -> gate name -> the assets the gate reads (its spec's dependencies besides the candidate)."""
    found: dict[str, dict[str, set[str]]] = {}
    for check in checks:
        for spec in check.check_specs:
            reads = {dep.asset_key.to_user_string() for dep in spec.additional_deps}
            found.setdefault(spec.asset_key.path[-1], {})[spec.name] = reads
    return found


def test_the_gates_of_each_candidate_run_in_one_step_each_its_own_blocking_check():
    from pipeline.models import PUBLICATION_MODELS

    checks = gates_of(list(PUBLICATION_MODELS.values()))
    steps = {check.node_def.name: check for check in checks}
    assert set(steps) == {f"{m.candidate_asset}_gates" for m in PUBLICATION_MODELS.values()}
    for model in PUBLICATION_MODELS.values():
        step = steps[f"{model.candidate_asset}_gates"]
        assert {key.name for key in step.check_keys} == set(model.gates)
        assert all(spec.blocking and spec.description for spec in step.check_specs)
        # the step loads every table its gates read, each once
        reads = {key for spec in step.check_specs for key in (dep.asset_key for dep in spec.additional_deps)}
        assert set(step.node_keys_by_input_name.values()) - {dg.AssetKey(["candidate", model.candidate_asset])} == reads


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
    for name, read in rating_checks.items():
        assert not read & mixed_only, name
    disclosure = rating_checks["disclosure_within_bound"]
    # the adversary's one pass over Rating's own candidate (issue 13: the adversary runs once per run), and the
    # strong rules for each rule's consequent attribute (issue 16: its bound is 1/ℓ_j of that attribute)
    assert disclosure - {"candidate/rating_release_candidate"} == {
        "private/rating_release_candidate_adversary",
        "private/strong_rules",
    }


def test_a_gate_that_does_not_apply_and_measures_nothing_reads_no_table():
    rating_checks = _by_candidate(gates_of([RATING]))["rating_release_candidate"]
    candidate = dg.AssetKey(["candidate", RATING.candidate_asset])
    plan, own_steps = gate_plan(RATING)
    assert own_steps == []
    for name in RATING.not_applicable:
        if name in MEASURED_WHEN_NOT_APPLICABLE:
            assert rating_checks[name], name  # still measures (its figures are shown beside the reason)
            continue
        assert rating_checks[name] == set(), name
        (gate,) = [gate for gate in plan if gate.name == name]
        results = list(  # runs without any table, settings or context
            evaluate_planned_gates(
                [gate], candidate=candidate, model=RATING.name, context=None, settings=None, store=None, tables={}
            )
        )
        assert [r.check_name for r in results] == [name]
        assert results[0].passed and results[0].metadata["applicable"].value is False
        assert results[0].metadata["reason"].value == RATING.not_applicable[name]


def test_a_gate_that_raises_lets_the_later_gates_report_then_fails_the_step():
    """A refusal for data loss raises after its result (checks/refusal.py); the gates after it in the same step
    still report, and the step then fails with that error, as the gate's own step did."""
    candidate = dg.AssetKey(["candidate", "release_candidate"])

    def refused(table):
        yield dg.AssetCheckResult(passed=False, metadata={"rows": len(table)})
        raise dg.Failure(description="refused")

    def passes(table):
        return dg.AssetCheckResult(passed=True, metadata={"rows": len(table)})

    plan = [PlannedGate("first", "", {}, refused), PlannedGate("second", "", {}, passes)]
    seen = []
    with pytest.raises(dg.Failure, match="refused"):
        for result in evaluate_planned_gates(
            plan, candidate=candidate, model="mixed", context=None, settings=None, store=None, tables={"table": [1, 2]}
        ):
            seen.append((result.check_name, result.passed, result.metadata["rows"].value, result.asset_key))
    assert seen == [("first", False, 2, candidate), ("second", True, 2, candidate)]


def test_the_utility_gate_is_attached_to_every_built_in_model_and_reads_its_own_tables():
    from pipeline.models import PUBLICATION_MODELS

    found = _by_candidate(gates_of(list(PUBLICATION_MODELS.values())))
    assert {candidate for candidate, checks in found.items() if "utility_within_thresholds" in checks} == {
        "release_candidate",
        "rating_release_candidate",
        "kl_release_candidate",
    }

    def read(candidate: str) -> set[str]:
        return found[candidate]["utility_within_thresholds"]

    assert {"private/deleted_records", "candidate/attribute_table"} <= read("release_candidate")
    assert {"private/rating_deleted_records", "candidate/rating_attribute_table"} <= read("rating_release_candidate")
    assert {"private/kl_suppressed_records", "candidate/kl_released"} <= read("kl_release_candidate")
