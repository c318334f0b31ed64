"""Attacks on equivalence-class releases ((k, ℓ) model), on hand-made classes whose answers are worked out here."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.core.class_attacks import (
    class_attack_figures,
    class_candidate_sets,
    class_posteriors,
    one_known_value_in_classes,
)
from pipeline.core.composition import intersection_attack


def _raw() -> pd.DataFrame:
    # 8 records, one quasi-identifier that says nothing (the same for everybody): population posterior
    # of a value = its share of the table, with add-one smoothing.
    return pd.DataFrame(
        {
            "row_id": range(1, 9),
            "q": ["x"] * 8,
            "a": ["1", "1", "1", "2", "3", "4", "5", "6"],
            "b": ["p", "q", "r", "s", "p", "q", "r", "s"],
        }
    )


def _release(raw: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    # class 1: rows 1-4 (a = 1, 1, 1, 2: two distinct values, value 1 holds 3 of 4 rows);
    # class 2: rows 5-8 (a all distinct)
    released = raw.assign(row_id=range(101, 109), cluster_id=[1, 1, 1, 1, 2, 2, 2, 2])[["row_id", "cluster_id", "q", "a", "b"]]
    row_map = pd.DataFrame({"row_id": range(101, 109), "source_row_id": range(1, 9), "input_row_number": range(1, 9)})
    return released, row_map


def test_a_skewed_class_is_above_the_bound_and_a_uniform_one_is_not():
    raw = _raw()
    released, row_map = _release(raw)
    result = class_posteriors(raw, released, row_map, ["q"], ["a", "b"], ell=2, slack=0.05)
    # a = 1 holds 3 of class 1's 4 rows: posterior 0.75; bound max(1/2, population) + 0.05, and the population
    # posterior of a = 1 is (3 + 1) / (8 + 6) ≈ 0.29 (add-one over 6 values): 0.55 < 0.75 for those 3 records.
    # Every other cell has posterior 1/4 (class 2 on a; b in both classes) and passes.
    assert result["n_cells"] == 16
    assert result["n_cells_above_bound"] == 3
    assert result["n_records_above_bound"] == 3
    assert result["max_posterior"] == pytest.approx(0.75)


def test_one_known_value_pins_another_in_a_class():
    raw = _raw()
    released, _ = _release(raw)
    # class 2: a is unique per row, so knowing a pins b (4 records); class 1: b is unique per row, so knowing b
    # pins a (4 records): every record is exposed.
    assert one_known_value_in_classes(released, ["a", "b"])["share_records_pinning_another_value"] == 1.0
    # two rows with equal (a, b) and two with a value shared by different b: nobody pinned
    table = pd.DataFrame({"cluster_id": [1, 1, 1, 1], "a": ["1", "1", "2", "2"], "b": ["p", "q", "p", "q"]})
    assert one_known_value_in_classes(table, ["a", "b"])["share_records_pinning_another_value"] == 0.0


def test_one_known_value_pins_the_whole_tuple_only_when_every_other_value_is_pinned():
    """Three attributes, one class of four rows. Knowing a = 1 pins b = p (both rows with a = 1 hold p) but not c (x
    and y): another value pinned, not the whole tuple. Every c value is held by one row, so knowing c pins that
    row's a and b: its whole tuple. Then c is made to repeat across a-values (x, y, x, y): nothing pins a whole tuple,
    while a and b still pin each other."""
    table = pd.DataFrame(
        {
            "cluster_id": [1, 1, 1, 1],
            "a": ["1", "1", "2", "2"],
            "b": ["p", "p", "q", "q"],
            "c": ["x", "y", "z", "w"],
        }
    )
    got = one_known_value_in_classes(table, ["a", "b", "c"])
    assert got["share_records_pinning_another_value"] == 1.0
    # knowing c pins a and b for every row (each c value is held by one row): every whole tuple, by c
    assert got["whole_tuple_pinned_by"] == {"a": 0.0, "b": 0.0, "c": 1.0}
    assert got["share_records_whole_tuple_pinned"] == 1.0
    table["c"] = ["x", "y", "x", "y"]  # now no c value is unique to a row: c pins nothing, a and b pin only each other
    got = one_known_value_in_classes(table, ["a", "b", "c"])
    assert got["share_records_pinning_another_value"] == 1.0 and got["share_records_whole_tuple_pinned"] == 0.0


def test_candidate_sets_are_the_class_values_and_compose():
    raw = _raw()
    released, row_map = _release(raw)
    sets = class_candidate_sets(released, row_map, ["a", "b"])
    assert sets["a"].loc[1] == frozenset({"1", "2"}) and sets["b"].loc[5] == frozenset({"p", "q", "r", "s"})
    # a second release that puts record 4 in a class of its own on a, and pairs on b
    other = {
        "a": pd.Series([frozenset({"2"}) if i == 4 else frozenset({"1", "2", "3", "4"}) for i in range(1, 9)], index=range(1, 9)),
        "b": pd.Series([frozenset({"s", "q"}) if i == 4 else frozenset({"p", "q"}) for i in range(1, 9)], index=range(1, 9)),
    }
    composed = intersection_attack(sets, other, ["a", "b"])
    # record 4: a = {1, 2} ∩ {2} = {2}; b = {p, q, r, s} ∩ {s, q} = {q, s}: a pinned, not the whole tuple;
    # class 2 on a: {3, 4, 5, 6} ∩ {1, 2, 3, 4} = {3, 4}, not pinned
    assert composed["n_records"] == 8 and composed["share_pinned_a"] == pytest.approx(1 / 8)
    assert composed["share_whole_tuple_pinned"] == 0.0


@settings(max_examples=100, deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            st.integers(1, 4),
            st.sampled_from(["x", "y", "z", None, 1, 1.0, True]),  # 1, 1.0 and True: equal values, three texts
            st.sampled_from(["p", "q", "r"]),
            st.sampled_from(["1", "2", 0.0, -0.0]),  # 0.0 and -0.0 likewise
        ),
        min_size=1,
        max_size=30,
    ),
    categorical=st.booleans(),
)
def test_one_known_value_equals_pandas_nunique_over_the_texts(rows, categorical):
    """The share of records pinned is what pandas' groupby-nunique over the values' texts gives (the definition:
    all rows of the class holding the record's known value hold one value of another attribute), a missing value
    counted as one more value, categorical columns as their texts."""
    table = pd.DataFrame(rows, columns=["cluster_id", "a", "b", "c"])
    if categorical:
        table = table.astype({"a": str, "b": str}).astype({"a": "category", "b": "category"})
    texts = {column: table[column].astype(str).to_numpy(dtype=object) for column in ("a", "b", "c")}
    exposed = np.zeros(len(table), dtype=bool)
    whole = np.zeros(len(table), dtype=bool)
    whole_by = {}
    for known in ("a", "b", "c"):
        keys = pd.MultiIndex.from_arrays([table["cluster_id"].to_numpy(), texts[known]])
        pinned_all = np.ones(len(table), dtype=bool)
        for other in ("a", "b", "c"):
            if other != known:
                pinned = pd.Series(texts[other]).groupby(keys, sort=False).transform("nunique").to_numpy() == 1
                exposed |= pinned
                pinned_all &= pinned
        whole |= pinned_all
        whole_by[known] = float(pinned_all.mean())
    got = one_known_value_in_classes(table, ["a", "b", "c"])
    assert got["share_records_pinning_another_value"] == pytest.approx(float(exposed.mean()))
    # the whole tuple: every other attribute pinned by the same known value (red team, session 40)
    assert got["share_records_whole_tuple_pinned"] == pytest.approx(float(whole.mean()))
    assert got["whole_tuple_pinned_by"] == pytest.approx(whole_by)
    assert got["n_released"] == len(table)


@settings(max_examples=100, deadline=None)
@given(
    rows=st.lists(
        st.tuples(
            st.integers(1, 4),
            st.sampled_from(["x", "y", "z", None, 1, 1.0, True]),  # 1, 1.0 and True: equal values, three texts
            st.sampled_from(["p", "q", "r", 0.0, -0.0]),  # 0.0 and -0.0 likewise
            st.sampled_from(["u", "v"]),
        ),
        min_size=1,
        max_size=30,
    ),
    categorical=st.booleans(),
    ell=st.integers(1, 3),
)
def test_class_posteriors_equal_the_shares_pandas_counts_over_the_texts(rows, categorical, ell):
    """Every member's posterior is its value's share of its class, as pandas counts it over the values' texts (a
    missing value is one more value, categorical columns count as their texts): the cells above the bound, the records
    above it, the largest and the mean posterior are those of that definition."""
    n = len(rows)
    released = pd.DataFrame(rows, columns=["cluster_id", "a", "b", "q"]).assign(row_id=range(101, 101 + n))
    if categorical:
        released = released.astype({"a": str, "b": str}).astype({"a": "category", "b": "category"})
    raw = pd.DataFrame(
        {"row_id": range(1, n + 1), "q": released["q"], "a": released["a"].astype(str), "b": released["b"].astype(str)}
    )
    row_map = pd.DataFrame({"row_id": range(101, 101 + n), "source_row_id": range(1, n + 1)})
    got = class_posteriors(raw, released, row_map, ["q"], ["a", "b"], ell=ell, slack=0.05)
    from pipeline.core.posterior import population_posterior

    population = population_posterior(raw, ["q"], ["a", "b"], 1.0)
    shares, above = [], []
    for attribute in ("a", "b"):
        keys = pd.MultiIndex.from_arrays(
            [released["cluster_id"].to_numpy(), released[attribute].astype(str).to_numpy(dtype=object)]
        )
        share = (
            pd.Series(np.ones(n)).groupby(keys, sort=False).transform("sum")
            / pd.Series(np.ones(n)).groupby(released["cluster_id"].to_numpy(), sort=False).transform("sum")
        ).to_numpy()
        shares.append(share)
        above.append(share > np.maximum(1.0 / ell, population[attribute]) + 0.05 + 1e-12)
    stacked, above_cells = np.concatenate(shares), np.column_stack(above)
    assert got["n_cells"] == 2 * n
    assert got["n_cells_above_bound"] == int(above_cells.sum())
    assert got["n_records_above_bound"] == int(above_cells.any(axis=1).sum())
    assert got["max_posterior"] == float(stacked.max())
    assert got["mean_posterior"] == pytest.approx(float(stacked.mean()), rel=1e-15)


def test_a_released_row_without_a_class_is_refused():
    raw = _raw()
    released, row_map = _release(raw)
    released = released.astype({"cluster_id": "Int64"})
    released.loc[2, "cluster_id"] = pd.NA
    with pytest.raises(ValueError, match="have no 'cluster_id'"):
        class_posteriors(raw, released, row_map, ["q"], ["a", "b"], ell=2)
    with pytest.raises(ValueError, match="have no 'cluster_id'"):
        one_known_value_in_classes(released, ["a", "b"])


def test_the_strong_rule_adversary_is_measured_on_the_classes():
    # a = 1 ⇒ b = p (4 of the 5 holders of a = 1: confidence 0.8) and b = p ⇒ a = 1 (4 of 4); every other pair of
    # values is held by one record, below min_support 2: two strong rules
    raw = pd.DataFrame(
        {
            "row_id": range(1, 11),
            "q": ["x"] * 10,
            "a": ["1", "1", "1", "1", "1", "2", "3", "4", "5", "6"],
            "b": ["p", "p", "p", "p", "q", "r", "s", "t", "u", "v"],
        }
    )
    # class 1: rows 1, 2, 3, 6 (the holders of a = 1 all hold p: certain for rows 1-3); class 2: rows 4, 5, 7-10 (a = 1
    # is held by rows 4 and 5, p by row 4 alone: b = p ⇒ a = 1 pins row 4's a, a = 1 ⇒ b = p gives it 1/2)
    order = [1, 2, 3, 6, 4, 5, 7, 8, 9, 10]
    released = (
        raw.set_index("row_id")
        .loc[order]
        .reset_index()
        .assign(cluster_id=[1, 1, 1, 1, 2, 2, 2, 2, 2, 2], release_row_id=range(101, 111))
    )
    row_map = pd.DataFrame({"row_id": range(101, 111), "source_row_id": order})
    released = released.drop(columns="row_id").rename(columns={"release_row_id": "row_id"})
    figures = class_attack_figures(raw, released, row_map, ["q"], ["a", "b"], ell=2, min_confidence=0.8, min_support=2)
    assert figures["strong_rule_n_rules"] == 2
    assert figures["strong_rule_records_exposed"] == 4
    assert figures["strong_rule_records_above_bound"] == 4
    assert figures["strong_rule_records_certain"] == 4
    assert figures["strong_rule_max_probability"] == 1.0
    assert (figures["strong_rule_min_confidence"], figures["strong_rule_min_support"]) == (0.8, 2)
    # without min_confidence the figures are not measured
    assert "strong_rule_n_rules" not in class_attack_figures(raw, released, row_map, ["q"], ["a", "b"], ell=2)
