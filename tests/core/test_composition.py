"""Composition (intersection of two releases) and one known value at row level, on releases built by hand."""

from __future__ import annotations

import pandas as pd

from pipeline.core.composition import candidate_sets, intersection_attack, one_known_value_at_row_level

SENSITIVE = ["A", "B"]


def _release_one():
    # SAC~ group 1 holds records 1, 2 (A: a1/a2, B: b1/b2); records 3, 4 in the attribute table:
    # A SID 7 = {a3, a4}; B: record 3 in SID 2 = {b3, b4}, record 4 suppressed (b3 is the value in every SID)
    sac = pd.DataFrame({"row_id": [10, 11], "group_id": [1, 1], "A": ["a2", "a1"], "B": ["b2", "b1"]})
    at = pd.DataFrame({"row_id": [12, 13], "A": pd.array([7, 7], dtype="Int32"), "B": pd.array([2, pd.NA], dtype="Int32")})
    ids = pd.DataFrame({"attribute": ["A", "A", "B", "B"], "sid": [7, 7, 2, 2], "value": ["a3", "a4", "b3", "b4"], "count": 1})
    row_map = pd.DataFrame({"row_id": [10, 11, 12, 13], "input_row_number": [1, 2, 3, 4]})
    return candidate_sets(SENSITIVE, row_map=row_map, sac_released=sac, attribute_table=at, id_table=ids)


def _release_two():
    # another grouping of the same records: group 5 = records 1, 3; group 6 = records 2, 4
    sac = pd.DataFrame(
        {
            "row_id": [1, 2, 3, 4],
            "group_id": [5, 5, 6, 6],
            "A": ["a3", "a1", "a4", "a2"],
            "B": ["b1", "b3", "b2", "b3"],
        }
    )
    row_map = pd.DataFrame({"row_id": [1, 2, 3, 4], "input_row_number": [1, 3, 2, 4]})
    return candidate_sets(SENSITIVE, row_map=row_map, sac_released=sac)


def test_candidate_sets_by_hand():
    first = _release_one()
    assert first["A"].loc[1] == {"a1", "a2"} and first["A"].loc[3] == {"a3", "a4"}
    assert first["B"].loc[3] == {"b3", "b4"}
    assert first["B"].loc[4] == {"b3", "b4"}  # suppressed: both b3 and b4 are in the only SID


def test_intersection_pins_what_neither_release_pins_alone():
    first, second = _release_one(), _release_two()
    # record 1: A {a1,a2} ∩ {a1,a3} = {a1}; B {b1,b2} ∩ {b1,b3} = {b1}: whole tuple pinned
    # record 2: A {a1,a2} ∩ {a2,a4} = {a2}; B {b1,b2} ∩ {b2,b3} = {b2}: pinned
    # record 3: A {a3,a4} ∩ {a1,a3} = {a3}; B {b3,b4} ∩ {b1,b3} = {b3}: pinned
    # record 4: A {a3,a4} ∩ {a2,a4} = {a4}; B {b3,b4} ∩ {b2,b3} = {b3}: pinned
    result = intersection_attack(first, second, SENSITIVE)
    assert result["n_records"] == 4
    assert result["share_whole_tuple_pinned"] == 1.0
    assert result["share_whole_tuple_pinned_first"] == 0.0 and result["share_whole_tuple_pinned_second"] == 0.0
    # the same release twice pins nothing
    same = intersection_attack(first, first, SENSITIVE)
    assert same["share_whole_tuple_pinned"] == 0.0 and same["share_pinned_A"] == 0.0


def test_one_known_value_pins_the_cluster_partners_of_sac_rows_only():
    sac = pd.DataFrame({"row_id": [1, 2, 3, 4], "group_id": [1, 1, 2, 2]})
    one_cluster = pd.DataFrame({"cluster_id": [1, 1], "attribute": ["A", "B"]})
    split = pd.DataFrame({"cluster_id": [1, 2], "attribute": ["A", "B"]})
    assert one_known_value_at_row_level(sac, one_cluster, 10) == {
        "share_records_pinning_another_value": 0.4,
        "largest_cluster": 2,
        "n_released": 10,
    }
    assert one_known_value_at_row_level(sac, split, 10)["share_records_pinning_another_value"] == 0.0
    assert one_known_value_at_row_level(None, None, 10)["share_records_pinning_another_value"] == 0.0
