"""SPEC §16 golden examples A and B, stage by stage, and the Algorithm 13/19 traces U1-U3."""

from fractions import Fraction

import pytest

from pipeline.core.adversary import disclosure_probabilities, per_record_disclosure, recover_rule_confidences, rule_holders
from pipeline.core.mixed_model import assemble_release_tables, run_mixed_model
from pipeline.core.sac_split import cluster_sensitive_attributes
from pipeline.core.rating import create_sids, rating_tables
from pipeline.core.rules import mine_strong_rules
from tests.conftest import example_frame, example_quasi_identifiers

EXAMPLES = ["example_A", "example_B"]


def _run(example):
    frame = example_frame(example)
    result = run_mixed_model(frame, example["SA"], ell=example["l"], min_confidence=example["min_conf"], seed=0)
    return frame, result


@pytest.mark.parametrize("name", EXAMPLES)
def test_strong_rules(golden, name):
    example = golden[name]
    rules = mine_strong_rules(example_frame(example), example["SA"], min_confidence=example["min_conf"])
    got = [
        {
            "lhs": [r.antecedent_attribute, r.antecedent_value],
            "rhs": [r.consequent_attribute, r.consequent_value],
            "supp_ab": r.support_both,
            "supp_lhs": r.support_antecedent,
            "conf": str(Fraction(r.support_both, r.support_antecedent)),
        }
        for r in rules.itertuples()
    ]
    assert got == example["strong_rules"]


@pytest.mark.parametrize("name", EXAMPLES)
def test_split_clusters_groups(golden, name):
    example = golden[name]
    _, result = _run(example)
    assert result.split.strong_value_occurrences == example["strong_value_occurrences"]
    assert result.split.s_max == example["S_max"]
    assert result.split.sac_row_ids.tolist() == example["SAC_ids"]
    assert result.split.ir_row_ids.tolist() == example["IR_ids"]
    assert result.clusters == example["clusters"]
    assert result.grouping.groups == example["groups"]
    assert result.grouping.deleted.tolist() == example["deleted_ids"]
    assert result.grouping.ir_left.tolist() == example["IR_left_ids"]


@pytest.mark.parametrize("name", EXAMPLES)
def test_improved_rating_on_ir_left(golden, name):
    example = golden[name]
    frame, result = _run(example)
    ir_left = frame.set_index("row_id", drop=False).loc[example["IR_left_ids"]]
    for attribute, expected in example["improved_rating_on_IR"].items():
        assignment = create_sids(ir_left["row_id"].tolist(), ir_left[attribute].tolist(), ell=example["l"])
        assert assignment.dangerous == expected["SDB"]
        assert assignment.initial_sequence == expected["initial_sequence"]
        assert [sorted(v) for v in assignment.sid_values] == expected["SIDs"]
        assert {str(k): v for k, v in assignment.record_to_sid.items()} == expected["record_to_SID"]
        assert assignment.suppressed == expected["suppressed_ids"]
        # the tables built by the pipeline carry the same SIDs and suppressions
        table = result.attribute_sids.set_index("row_id")[attribute]
        assert {str(k): int(v) for k, v in table.dropna().items()} == expected["record_to_SID"]
        assert sorted(table[table.isna()].index.tolist()) == expected["suppressed_ids"]
        idt = result.id_table[result.id_table["attribute"] == attribute]
        assert [sorted(g["value"]) for _, g in idt.groupby("sid")] == expected["SIDs"]


@pytest.mark.parametrize("name", EXAMPLES)
@pytest.mark.parametrize("method", ["improved", "plain"])
def test_rating_on_full_table(golden, name, method):
    example = golden[name]
    frame = example_frame(example)
    for attribute, expected in example["plain_rating_full_table"].items():
        assignment = create_sids(frame["row_id"].tolist(), frame[attribute].tolist(), ell=example["l"], method=method)
        assert [sorted(v) for v in assignment.sid_values] == expected["SIDs"]
        assert {str(k): v for k, v in assignment.record_to_sid.items()} == expected["record_to_SID"]
        assert assignment.suppressed == expected["suppressed_ids"]


def _release(example):
    frame, result = _run(example)
    tables = assemble_release_tables(
        frame,
        example_quasi_identifiers(example),
        example["SA"],
        sac_permuted=result.sac_permuted,
        attribute_sids=result.attribute_sids,
        id_table=result.id_table,
        clusters=result.clusters,
    )
    return frame, result, tables


def _key(rule):
    return f"{rule.antecedent_attribute}={rule.antecedent_value}=>{rule.consequent_attribute}={rule.consequent_value}"


@pytest.mark.parametrize("name", EXAMPLES)
def test_recovered_confidences_mixed(golden, name):
    example = golden[name]
    _, result, tables = _release(example)
    recovered = recover_rule_confidences(
        result.rules,
        sac_released=tables.sac_released,
        attribute_table=tables.attribute_table,
        id_table=tables.id_table,
        attribute_clusters=tables.attribute_clusters,
    )
    got = {_key(r): Fraction(int(r.released_support_both), int(r.released_support_antecedent)) for r in recovered.itertuples()}
    assert got == {k: Fraction(v) for k, v in example["conf_recovered_mixed"].items()}


@pytest.mark.parametrize("name", EXAMPLES)
def test_attack_on_mixed_release(golden, name):
    example = golden[name]
    frame, result, tables = _release(example)
    holders = rule_holders(frame, result.rules, row_map=tables.row_map)
    per_record = per_record_disclosure(
        disclosure_probabilities(
            holders,
            result.rules,
            sac_released=tables.sac_released,
            attribute_table=tables.attribute_table,
            id_table=tables.id_table,
            attribute_clusters=tables.attribute_clusters,
        )
    ).merge(tables.row_map, on="row_id")
    got = {str(r.source_row_id): Fraction(int(r.numerator), int(r.denominator)) for r in per_record.itertuples()}
    assert got == {k: Fraction(v) for k, v in example["attack_mixed"].items()}


@pytest.mark.parametrize("name", EXAMPLES)
def test_attack_and_confidence_on_plain_rating_release(golden, name):
    example = golden[name]
    frame, result, tables = _release(example)
    id_table, attribute_sids = rating_tables(frame, example["SA"], ell=example["l"], method="plain")
    empty_sac = tables.sac_released.iloc[:0]
    no_clusters = tables.attribute_clusters.iloc[:0]
    recovered = recover_rule_confidences(
        result.rules, sac_released=empty_sac, attribute_table=attribute_sids, id_table=id_table, attribute_clusters=no_clusters
    )
    got = {_key(r): Fraction(r.released_confidence).limit_denominator(10_000) for r in recovered.itertuples()}
    assert got == {k: Fraction(v) for k, v in example["conf_estimated_rating"].items()}
    probabilities = disclosure_probabilities(
        rule_holders(frame, result.rules),
        result.rules,
        sac_released=empty_sac,
        attribute_table=attribute_sids,
        id_table=id_table,
        attribute_clusters=no_clusters,
    )
    per_record = per_record_disclosure(probabilities)
    assert {str(r.row_id): Fraction(int(r.numerator), int(r.denominator)) for r in per_record.itertuples()} == {
        k: Fraction(v) for k, v in example["attack_rating"].items()
    }
    for rule_key, expected in example["attack_rating_candidates"].items():
        rule_index = [i for i, r in enumerate(result.rules.itertuples()) if _key(r) == rule_key][0]
        rows = probabilities[probabilities["rule"] == rule_index]
        assert set(rows["denominator"]) == {len(expected["M_r"])}
        assert set(rows["numerator"]) == {expected["N_r"]}


TRACES = {
    "U1": (
        [
            (1, "a"),
            (2, "a"),
            (3, "a"),
            (4, "a"),
            (5, "b"),
            (6, "b"),
            (7, "b"),
            (8, "c"),
            (9, "c"),
            (10, "d"),
            (11, "d"),
            (12, "e"),
        ],
        [
            ("init", ["a:4"], ["b:3", "c:2", "d:2", "e:1"]),
            ("sid", ["a", "b", "c"], ["b:2", "d:2", "c:1", "e:1"]),
            ("sid", ["a", "b", "d"], ["b:1", "d:1", "c:1", "e:1"]),
            ("sid", ["a", "b", "d"], ["c:1", "e:1", "b:0", "d:0"]),
            ("sid", ["a", "c", "e"], ["c:0", "e:0", "b:0", "d:0"]),
        ],
        [["a", "b", "c"], ["a", "b", "d"], ["a", "b", "d"], ["a", "c", "e"]],
        [],
        [1, 1, 3, 1],
        {1: 1, 5: 1, 8: 1, 2: 2, 6: 2, 10: 2, 3: 3, 7: 3, 11: 3, 4: 4, 9: 4, 12: 4},
    ),
    "U2": (
        [(1, "a"), (2, "a"), (3, "a"), (4, "b"), (5, "b"), (6, "b"), (7, "c"), (8, "c"), (9, "d"), (10, "d"), (11, "e")],
        [
            ("init", [], ["a:3", "b:3", "c:2", "d:2", "e:1"]),
            ("sid", ["a", "b", "c"], ["a:2", "b:2", "d:2", "c:1", "e:1"]),
            ("sid", ["a", "b", "d"], ["a:1", "b:1", "d:1", "c:1", "e:1"]),
            ("sid", ["a", "b", "d"], ["c:1", "e:1", "a:0", "b:0", "d:0"]),
            ("residual", "c", 8, 2),
            ("residual", "e", 11, 1),
        ],
        [["a", "b", "c", "e"], ["a", "b", "d", "c"], ["a", "b", "d"]],
        [],
        [1, 1, 4],
        {1: 1, 4: 1, 7: 1, 11: 1, 2: 2, 5: 2, 9: 2, 8: 2, 3: 3, 6: 3, 10: 3},
    ),
    "U3": (
        [
            (1, "a"),
            (2, "a"),
            (3, "a"),
            (4, "a"),
            (5, "a"),
            (6, "b"),
            (7, "b"),
            (8, "b"),
            (9, "c"),
            (10, "c"),
            (11, "c"),
            (12, "d"),
            (13, "d"),
            (14, "e"),
        ],
        [
            ("init", ["a:5"], ["b:3", "c:3", "d:2", "e:1"]),
            ("sid", ["a", "b", "c"], ["b:2", "c:2", "d:2", "e:1"]),
            ("sid", ["a", "b", "c"], ["d:2", "b:1", "c:1", "e:1"]),
            ("sid", ["a", "d", "b"], ["d:1", "c:1", "e:1", "b:0"]),
            ("sid", ["a", "d", "c"], ["e:1", "d:0", "c:0", "b:0"]),
            ("suppress", "a", 5),
            ("residual", "e", 14, 1),
        ],
        [["a", "b", "c", "e"], ["a", "b", "c"], ["a", "d", "b"], ["a", "d", "c"]],
        [5],
        [1, 2, 2, 2],
        {1: 1, 6: 1, 9: 1, 14: 1, 2: 2, 7: 2, 10: 2, 3: 3, 12: 3, 8: 3, 4: 4, 13: 4, 11: 4},
    ),
}


@pytest.mark.parametrize("name", sorted(TRACES))
def test_algorithm_13_and_19_traces(name):
    records, trace, sids, suppressed, comparisons, record_to_sid = TRACES[name]
    result = create_sids([r for r, _ in records], [v for _, v in records], ell=3, trace=True)
    assert result.trace == trace
    assert result.sid_values == sids
    assert result.suppressed == suppressed
    assert result.reorder_comparisons == comparisons
    assert result.record_to_sid == record_to_sid


def test_clustering_single_pass_vs_fixpoint():
    import pandas as pd

    rules = pd.DataFrame({"antecedent_attribute": ["S1", "S2"], "consequent_attribute": ["S3", "S3"]})
    assert cluster_sensitive_attributes(["S1", "S2", "S3"], rules, fixpoint=False) == [["S1", "S3"], ["S2"]]
    assert cluster_sensitive_attributes(["S1", "S2", "S3"], rules) == [["S1", "S3", "S2"]]
