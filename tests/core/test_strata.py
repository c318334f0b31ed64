"""Quasi-identifier strata for Rating (issue 12): members of a SID publish the same quasi-identifiers.

A hand-worked example fixes the result; properties hold on random tables; on an Adult slice plain
Rating (P1) is the learned-model gate's leaky candidate on the attribute table and stratified
Rating leaves no cell above the bound."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.core.hierarchies import Hierarchy, load_available_hierarchies
from pipeline.core.mixed_model import assemble_release_tables, run_mixed_model
from pipeline.core.posterior import release_posteriors
from pipeline.core.rating import rating_tables
from pipeline.core.rules import mine_strong_rules
from pipeline.core.strata import stratify_for_rating

CITY = Hierarchy.from_rows([["A1", "A", "*"], ["A2", "A", "*"], ["B1", "B", "*"], ["B2", "B", "*"]], attribute="city")


def _worked_example() -> pd.DataFrame:
    # sex determines x (M -> 1, F -> 2): no split on sex is ℓ-eligible at ℓ = 2.
    # A1 and A2 are each 2-eligible; B1 (x = 1, 1) and B2 (x = 2, 2) are not, B = B1 ∪ B2 is.
    rows = [
        (1, "M", "A1", "1", "p"),
        (2, "F", "A1", "2", "q"),
        (3, "M", "A2", "1", "p"),
        (4, "F", "A2", "2", "q"),
        (5, "M", "B1", "1", "p"),
        (6, "M", "B1", "1", "q"),
        (7, "F", "B2", "2", "p"),
        (8, "F", "B2", "2", "q"),
    ]
    return pd.DataFrame(rows, columns=["row_id", "sex", "city", "x", "y"])


def test_worked_example_generalizes_only_what_eligibility_needs():
    strata = stratify_for_rating(
        _worked_example(), ["sex", "city"], ["x", "y"], ell=2, hierarchies={"city": CITY}, deletion_budget=0.0
    )
    labels = strata.labels.set_index("row_id").sort_index()
    assert list(labels["sex"]) == ["*"] * 8
    assert list(labels["city"]) == ["A1", "A1", "A2", "A2", "B", "B", "B", "B"]
    assert strata.n_strata == 3
    assert len(strata.deleted) == 0
    assert strata.n_generalized_cells == 8 + 4  # every sex cell, the four B cities


def test_a_larger_budget_buys_specific_labels_with_deleted_records():
    strata = stratify_for_rating(
        _worked_example(), ["sex", "city"], ["x", "y"], ell=2, hierarchies={"city": CITY}, deletion_budget=1.0
    )
    assert len(strata.deleted) > 0
    kept = set(strata.labels["row_id"])
    assert kept.isdisjoint(set(strata.deleted.tolist())) and len(kept) + len(strata.deleted) == 8


def test_a_table_that_cannot_be_made_eligible_is_deleted_not_published():
    table = pd.DataFrame({"row_id": [1, 2, 3], "q": ["a", "b", "c"], "x": ["1", "1", "1"], "y": ["p", "q", "r"]})
    strata = stratify_for_rating(table, ["q"], ["x", "y"], ell=2)
    assert len(strata.labels) == 0 and sorted(strata.deleted.tolist()) == [1, 2, 3]


@st.composite
def _tables(draw):
    n = draw(st.integers(min_value=0, max_value=60))
    ell = draw(st.integers(min_value=2, max_value=3))
    letters = st.sampled_from(list("abcd"))
    rows = [
        (i + 1, draw(st.sampled_from(["M", "F"])), draw(st.sampled_from(["A1", "A2", "B1", "B2"])), draw(letters), draw(letters))
        for i in range(n)
    ]
    budget = draw(st.sampled_from([0.0, 0.02, 0.5]))
    return pd.DataFrame(rows, columns=["row_id", "sex", "city", "x", "y"]), ell, budget


@settings(max_examples=60, deadline=None)
@given(_tables())
def test_strata_are_eligible_uniform_and_account_for_every_record(case):
    table, ell, budget = case
    strata = stratify_for_rating(table, ["sex", "city"], ["x", "y"], ell=ell, hierarchies={"city": CITY}, deletion_budget=budget)
    kept = strata.labels["row_id"].tolist()
    assert sorted(kept + strata.deleted.tolist()) == table["row_id"].tolist()
    merged = strata.labels.merge(table, on="row_id", suffixes=("_published", ""))
    for _, stratum in merged.groupby("stratum"):
        assert stratum[["sex_published", "city_published"]].drop_duplicates().shape[0] == 1
        for attribute in ("x", "y"):
            assert ell * stratum[attribute].value_counts().max() <= len(stratum)
    # a published label is the value or one of its ancestors
    assert ((merged["sex_published"] == merged["sex"]) | (merged["sex_published"] == "*")).all()
    ancestors = {"A1": {"A1", "A", "*"}, "A2": {"A2", "A", "*"}, "B1": {"B1", "B", "*"}, "B2": {"B2", "B", "*"}}
    assert all(p in ancestors[v] for p, v in zip(merged["city_published"], merged["city"], strict=True))
    # Rating inside the strata: every SID's members are in one stratum, and nothing is suppressed
    records = table.set_index("row_id", drop=False).loc[kept].reset_index(drop=True)
    id_table, attribute_sids = rating_tables(
        records,
        ["x", "y"],
        ell=ell,
        strata=strata.labels["stratum"].to_numpy(),
        secret=bytes(range(32)),
        content_columns=["sex", "city", "x", "y"],
    )
    stratum_of = dict(zip(strata.labels["row_id"], strata.labels["stratum"], strict=True))
    for attribute in ("x", "y"):
        assert attribute_sids[attribute].notna().all()
        per_sid = attribute_sids.assign(stratum=attribute_sids["row_id"].map(stratum_of)).groupby(attribute)["stratum"].nunique()
        assert (per_sid == 1).all()
        distinct = id_table[id_table["attribute"] == attribute].groupby("sid", observed=True)["value"].nunique()
        assert (distinct >= ell).all()


QUASI_IDENTIFIERS = ["sex", "race", "marital-status", "native-country", "workclass"]
SENSITIVE = ["education", "occupation", "age", "relationship"]
HIERARCHIES = Path(__file__).resolve().parents[2] / "data" / "adult" / "hierarchies"
SECRET = bytes(range(32))


def _attribute_table_cells_above(records: pd.DataFrame, grouping: str) -> tuple[int, int, int]:
    rules = mine_strong_rules(records, SENSITIVE, min_confidence=0.8, min_support=5)
    hierarchies = load_available_hierarchies(HIERARCHIES, QUASI_IDENTIFIERS)
    result = run_mixed_model(
        records,
        SENSITIVE,
        ell=3,
        min_confidence=0.8,
        seed=0,
        rules=rules,
        secret=SECRET,
        quasi_identifiers=QUASI_IDENTIFIERS,
        grouping=grouping,
        residual_policy="delete",
        hierarchies=hierarchies,
    )
    tables = assemble_release_tables(
        records,
        QUASI_IDENTIFIERS,
        SENSITIVE,
        sac_permuted=result.sac_permuted,
        attribute_sids=result.attribute_sids,
        id_table=result.id_table,
        clusters=result.clusters,
        secret=SECRET,
        generalize=grouping == "qi_aware",
        hierarchies=hierarchies,
        attribute_table_labels=result.rating_records,
    )
    posterior = release_posteriors(
        records,
        tables.row_map,
        QUASI_IDENTIFIERS,
        SENSITIVE,
        ell=3,
        sac_released=tables.sac_released,
        attribute_table=tables.attribute_table,
        id_table=tables.id_table,
        attribute_clusters=tables.attribute_clusters,
    )
    suppressed = int(tables.attribute_table[SENSITIVE].isna().sum().sum())
    return int(posterior.summary["n_attribute_table_cells_above_bound"]), len(tables.attribute_table) * len(SENSITIVE), suppressed


@pytest.mark.slow
def test_plain_rating_on_adult_is_caught_and_strata_pass_the_posterior_gate(adult_records):
    records = adult_records.iloc[:8000].reset_index(drop=True)
    above_p1, cells_p1, _ = _attribute_table_cells_above(records, "p1")
    above_strata, cells_strata, suppressed = _attribute_table_cells_above(records, "qi_aware")
    assert cells_p1 > 0 and cells_strata > 0
    assert above_p1 > 0.1 * cells_p1  # SIDs mixing quasi-identifiers: the learned model tells members apart
    assert above_strata == 0 and suppressed == 0
