"""QI-aware SAC~ grouping and the generalization of a group's quasi-identifiers (issue 12).

Expected groups are worked out by hand from Algorithm 11's rule ("first compatible record in
table order") and the QI-aware preference (same quasi-identifier tuple first).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from pipeline.core.grouping import generalize_group_quasi_identifiers, group_sac
from pipeline.core.hierarchies import load_available_hierarchies
from pipeline.core.mixed_model import assemble_release_tables, run_mixed_model

HIERARCHIES = Path(__file__).resolve().parents[2] / "data" / "adult" / "hierarchies"


def _table() -> pd.DataFrame:
    # r1..r4 in SAC (table order), r5, r6 in IR; every record differs from every other on A and B
    return pd.DataFrame(
        {
            "row_id": [1, 2, 3, 4, 5, 6],
            "zone": ["X", "Y", "X", "Y", "X", "Z"],
            "A": ["a1", "a2", "a3", "a4", "a5", "a6"],
            "B": ["b1", "b2", "b3", "b4", "b5", "b6"],
        }
    )


def test_p1_takes_the_next_record_and_qi_aware_the_next_with_the_same_quasi_identifiers():
    records = _table()
    p1 = group_sac(records, ["A", "B"], [1, 2, 3, 4], [5, 6], ell=2)
    assert p1.groups == [[1, 2], [3, 4]]  # seed 1 takes 2, seed 3 takes 4
    aware = group_sac(records, ["A", "B"], [1, 2, 3, 4], [5, 6], ell=2, quasi_identifiers=["zone"])
    assert aware.groups == [[1, 3], [2, 4]]  # seed 1 (X) takes 3 (X); seed 2 (Y) takes 4 (Y)
    assert list(aware.ir_left) == [5, 6] and len(aware.borrowed) == 0


def test_qi_aware_borrows_a_same_zone_ir_record_before_a_sac_record_of_another_zone():
    records = _table()
    # SAC: 1 (X), 2 (Y); IR: 5 (X), 6 (Z). Seed 1: no other X in SAC -> IR record 5 (X), not SAC record 2.
    aware = group_sac(records, ["A", "B"], [1, 2], [5, 6], ell=2, quasi_identifiers=["zone"])
    assert aware.groups[0] == [1, 5]
    # seed 2 (Y): no Y anywhere else -> as P1: first compatible SAC (none left), then first IR (6)
    assert aware.groups[1] == [2, 6]
    assert list(aware.borrowed) == [5, 6]


def test_qi_aware_respects_compatibility():
    records = _table()
    records.loc[records["row_id"] == 3, "A"] = "a1"  # 3 (X) now shares A with seed 1: incompatible
    aware = group_sac(records, ["A", "B"], [1, 2, 3, 4], [5, 6], ell=2, quasi_identifiers=["zone"])
    # seed 1 (X): SAC X record 3 is incompatible -> IR X record 5
    assert aware.groups[0] == [1, 5]
    for group in aware.groups:
        members = records.set_index("row_id").loc[group]
        assert members["A"].nunique() == 2 and members["B"].nunique() == 2


def test_generalization_to_the_lowest_common_ancestor_of_the_adult_hierarchy():
    hierarchies = load_available_hierarchies(HIERARCHIES, ["marital-status", "sex"])
    released = pd.DataFrame(
        {
            "group_id": [1, 1, 2, 2, 3, 3],
            # hierarchy file: Married-civ-spouse and Married-AF-spouse -> "spouse present"; Divorced -> "spouse not present"
            "marital-status": [
                "Married-civ-spouse",
                "Married-AF-spouse",
                "Married-civ-spouse",
                "Divorced",
                "Divorced",
                "Divorced",
            ],
            "sex": ["Male", "Male", "Male", "Female", "Female", "Female"],
            "zone": ["p", "q", "p", "p", "p", "p"],  # no hierarchy: '*' where members differ
        }
    )
    out, counts = generalize_group_quasi_identifiers(released, ["marital-status", "sex", "zone"], hierarchies)
    assert list(out["marital-status"]) == ["spouse present", "spouse present", "*", "*", "Divorced", "Divorced"]
    assert list(out["sex"]) == ["Male", "Male", "*", "*", "Female", "Female"]
    assert list(out["zone"]) == ["*", "*", "p", "p", "p", "p"]
    assert counts == {"n_generalized_groups": 2, "n_generalized_cells": 2 + 2 + 2 + 2}


def test_qi_aware_release_on_adult_keeps_sac_invariants_and_makes_members_indistinguishable(adult_records):
    quasi_identifiers = ["sex", "race", "marital-status", "native-country", "workclass"]
    sensitive = ["education", "occupation", "age", "relationship"]
    records = adult_records.iloc[:5000].reset_index(drop=True)
    secret = bytes(range(32))
    result = run_mixed_model(
        records,
        sensitive,
        ell=3,
        min_confidence=0.8,
        seed=0,
        secret=secret,
        quasi_identifiers=quasi_identifiers,
        grouping="qi_aware",
    )
    tables = assemble_release_tables(
        records,
        quasi_identifiers,
        sensitive,
        sac_permuted=result.sac_permuted,
        attribute_sids=result.attribute_sids,
        id_table=result.id_table,
        clusters=result.clusters,
        secret=secret,
        generalize=True,
        hierarchies=load_available_hierarchies(HIERARCHIES, quasi_identifiers),
    )
    sac = tables.sac_released
    assert len(sac) > 0 and len(sac) % 3 == 0
    assert (sac.groupby("group_id")[quasi_identifiers].nunique() == 1).all().all()
    assert (sac.groupby("group_id")[sensitive].nunique() == 3).all().all()
    # the same records under P1 keep exact quasi-identifiers and most groups mix them
    p1 = run_mixed_model(
        records, sensitive, ell=3, min_confidence=0.8, seed=0, secret=secret, quasi_identifiers=quasi_identifiers, grouping="p1"
    )
    members = records.set_index("row_id").loc[p1.grouping.members.ravel(), quasi_identifiers]
    mixed_groups = members.astype(str).agg("|".join, axis=1).to_numpy().reshape(-1, 3)
    assert np.mean([len(set(g)) > 1 for g in mixed_groups]) > 0.5
    assert tables.generalization["n_generalized_groups"] < p1.grouping.n_groups
