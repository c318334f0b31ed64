"""The query-workload utility measure (Xiao & Tao, Anatomy, VLDB 2006 §6): pipeline/core/query_workload.py.

Golden examples: tiny releases whose expected estimates are worked out by hand in the comments (never by the code
under test); a perfect release (the raw table) has error 0; an uninformative release (each sensitive attribute's
overall distribution for every record) has the error of the independence model, computed here with pandas.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pipeline.core.hierarchies import Hierarchy
from pipeline.core.query_workload import (
    CountQuery,
    Workload,
    build_workload,
    generalized_table_estimator,
    mixed_release_estimator,
    naive_release_estimator,
    relative_errors,
    workload_utility,
)

DOMAINS = {"sex": ("F", "M"), "zip": ("1", "2", "3"), "disease": ("flu", "hiv"), "job": ("a", "b")}


def workload_of(queries: list[CountQuery], exact: list[float], n_records: int) -> Workload:
    """A hand-made workload over DOMAINS (floor 1)."""
    return Workload(
        queries=tuple(queries),
        domains=DOMAINS,
        exact=np.asarray(exact, dtype=float),
        n_records=n_records,
        floor=1.0,
        selectivity=0.05,
        seed=0,
    )


def query(workload: str = "W1", **predicates: list[str]) -> CountQuery:
    codes = {a: np.array([DOMAINS[a].index(v) for v in values], dtype=np.int64) for a, values in predicates.items()}
    sensitive = tuple(a for a in predicates if a in ("disease", "job"))
    return CountQuery(workload=workload, predicates=codes, sensitive=sensitive)


ZIP_HIERARCHY = Hierarchy.from_rows([["1", "1-2", "*"], ["2", "1-2", "*"], ["3", "3-3", "*"]], attribute="zip")


def test_generalized_table_golden() -> None:
    table = pd.DataFrame(
        {
            "sex": ["*", "*", "M", "M"],
            "zip": ["1-2", "1-2", "3", "*"],
            "disease": ["flu", "hiv", "flu", "flu"],
            "job": ["a", "a", "b", "a"],
        }
    )
    q1 = query(sex=["M"], disease=["flu"])
    # rows: 1/2·1 + 1/2·0 + 1·1 + 1·1 = 2.5
    q2 = query("W2", zip=["1"], disease=["flu"], job=["a"])
    # zip 1 of label 1-2 (2 values): 1/2; of 3: 0; of * (3 values): 1/3 -> 1/2·1·1 + 0 + 0 + 1/3·1·1 = 5/6
    workload = workload_of([q1, q2], exact=[3.0, 0.0], n_records=4)
    estimate = generalized_table_estimator(table, workload, hierarchies={"zip": ZIP_HIERARCHY})
    assert estimate(q1) == pytest.approx(2.5)
    assert estimate(q2) == pytest.approx(5 / 6)
    # relative errors: |2.5 - 3| / 3 = 1/6; |5/6 - 0| / max(0, floor 1) = 5/6
    np.testing.assert_allclose(relative_errors(workload, estimate), [1 / 6, 5 / 6])


def test_generalized_table_scaled_to_the_records_it_stands_for() -> None:
    table = pd.DataFrame({"sex": ["M", "F"], "zip": ["1", "2"], "disease": ["flu", "flu"], "job": ["a", "b"]})
    q = query(sex=["M"], disease=["flu"])
    # 1 matching row of 2 published, the release stands for 6 records: 1 · 6/2 = 3
    workload = workload_of([q], exact=[3.0], n_records=6)
    assert generalized_table_estimator(table, workload)(q) == pytest.approx(3.0)


def test_generalized_table_rejects_an_unknown_label() -> None:
    table = pd.DataFrame({"sex": ["M"], "zip": ["4-5"], "disease": ["flu"], "job": ["a"]})
    with pytest.raises(ValueError, match="'zip'"):
        generalized_table_estimator(table, workload_of([], [], 1), hierarchies={"zip": ZIP_HIERARCHY})


def mixed_tables(*, one_cluster: bool) -> dict[str, pd.DataFrame]:
    sac = pd.DataFrame(
        {
            "row_id": [1, 2, 3],
            "group_id": [7, 7, 7],
            "sex": ["M", "M", "F"],
            "zip": ["1", "1", "1"],
            "disease": ["flu", "hiv", "flu"],
            "job": ["a", "a", "b"],
        }
    )
    attribute_table = pd.DataFrame(
        {
            "row_id": [4, 5, 6, 7],
            "sex": ["M", "M", "F", "F"],
            "zip": ["1", "1", "1", "1"],
            "disease": pd.array([1, 1, 2, 2], dtype="Int32"),
            "job": pd.array([1, None, 1, 1], dtype="Int32"),
        }
    )
    id_table = pd.DataFrame(
        {
            "attribute": ["disease", "disease", "disease", "job", "job"],
            "sid": [1, 1, 2, 1, 1],
            "value": ["flu", "hiv", "hiv", "a", "b"],
            "count": [1, 1, 2, 1, 2],
        }
    )
    clusters = pd.DataFrame(
        {"cluster_id": [0, 0] if one_cluster else [0, 1], "attribute": ["disease", "job"]},
    )
    return {"sac_released": sac, "attribute_table": attribute_table, "id_table": id_table, "attribute_clusters": clusters}


@pytest.mark.parametrize(
    ("one_cluster", "expected"),
    [
        # SAC~ group: 2 members publish sex M; cluster {disease, job}: tuples (flu,a) (hiv,a) (flu,b), 1 of 3 is
        # (flu, a) -> 2 · 1/3 = 2/3. Attribute table: row 4 (M): disease SID 1 = {flu 1, hiv 1} -> 1/2, job SID 1 =
        # {a 1, b 2} -> 1/3: 1/6; row 5 (M): 1/2 · job suppressed = overall released job (id_table a 1 b 2 + SAC~ a a b:
        # a 3 of 6) 1/2: 1/4; rows 6, 7 (F): 0. Total 2/3 + 1/6 + 1/4 = 13/12.
        (True, 13 / 12),
        # two clusters: flu 2/3 and a 2/3 independently -> 2 · 4/9 = 8/9; + 1/6 + 1/4 = 32/36 + 6/36 + 9/36 = 47/36
        (False, 47 / 36),
    ],
)
def test_mixed_release_golden(one_cluster: bool, expected: float) -> None:
    q = query("W2", sex=["M"], disease=["flu"], job=["a"])
    workload = workload_of([q], exact=[1.0], n_records=7)  # 3 SAC~ + 4 attribute-table rows: scale 1
    estimate = mixed_release_estimator(
        **mixed_tables(one_cluster=one_cluster),
        workload=workload,
        quasi_identifiers=["sex", "zip"],
        sensitive_attributes=["disease", "job"],
    )
    assert estimate(q) == pytest.approx(expected)


def test_rating_release_golden() -> None:
    tables = mixed_tables(one_cluster=True)
    q = query("W2", sex=["M"], disease=["flu"], job=["a"])
    # row 4: 1/2 · 1/3 = 1/6; row 5: 1/2 · overall job of the ID table (a 1 of 3) = 1/6; sum 1/3; the release stands
    # for 8 records, publishes 4: · 2 = 2/3
    workload = workload_of([q], exact=[1.0], n_records=8)
    estimate = mixed_release_estimator(
        attribute_table=tables["attribute_table"],
        id_table=tables["id_table"],
        workload=workload,
        quasi_identifiers=["sex", "zip"],
        sensitive_attributes=["disease", "job"],
    )
    assert estimate(q) == pytest.approx(2 / 3)


def test_mixed_release_rejects_a_sid_missing_from_the_id_table() -> None:
    tables = mixed_tables(one_cluster=True)
    tables["id_table"] = tables["id_table"][tables["id_table"]["sid"] != 2]
    with pytest.raises(ValueError, match="'disease'"):
        mixed_release_estimator(
            **tables,
            workload=workload_of([], [], 7),
            quasi_identifiers=["sex", "zip"],
            sensitive_attributes=["disease", "job"],
        )


def test_naive_release_averages_the_tables_of_the_queried_attributes() -> None:
    disease_table = pd.DataFrame({"sex": ["M", "M"], "zip": ["*", "*"], "disease": ["flu", "hiv"], "job": ["*", "*"]})
    job_table = pd.DataFrame({"sex": ["M", "*"], "zip": ["*", "*"], "disease": ["*", "*"], "job": ["a", "a"]})
    q = query("W2", sex=["M"], disease=["flu"], job=["a"])
    # disease table: 1·1·1/2 + 0 = 1/2; job table: 1·1/2·1 + 1/2·1/2·1 = 3/4; mean 5/8
    workload = workload_of([q], exact=[1.0], n_records=2)
    estimate = naive_release_estimator({"disease": disease_table, "job": job_table}, workload)
    assert estimate(q) == pytest.approx(5 / 8)


def random_records(n: int = 400, seed: int = 3) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    sex = rng.choice(["F", "M"], n)
    disease = np.where(rng.random(n) < 0.7, np.where(sex == "M", "flu", "hiv"), rng.choice(["flu", "hiv", "cold"], n))
    return pd.DataFrame(
        {
            "row_id": np.arange(1, n + 1),
            "sex": sex,
            "zip": rng.choice(["10", "11", "12", "13", "14"], n),
            "race": rng.choice(["x", "y", "z"], n),
            "disease": disease,
            "job": rng.choice(["a", "b", "c", "d"], n),
            "age": rng.integers(20, 60, n).astype(str),
        }
    )


QUASI, SENSITIVE = ["sex", "zip", "race"], ["disease", "job", "age"]


def test_workload_shape_and_exact_answers() -> None:
    records = random_records()
    workload = build_workload(records, QUASI, SENSITIVE, n_queries=50, seed=5)
    assert [q.workload for q in workload.queries] == ["W1"] * 50 + ["W2"] * 50
    for q, exact in zip(workload.queries, workload.exact):
        quasi = [a for a in q.predicates if a in QUASI]
        assert 1 <= len(quasi) <= 2
        assert len(q.sensitive) == (1 if q.workload == "W1" else 2)
        mask = np.ones(len(records), dtype=bool)
        for attribute, codes in q.predicates.items():
            mask &= records[attribute].isin([workload.domains[attribute][c] for c in codes]).to_numpy()
        assert exact == mask.sum()
    # age is numeric: its predicates are ranges of consecutive sorted values
    assert workload.domains["age"] == tuple(str(v) for v in sorted({int(v) for v in records["age"]}))
    for q in workload.queries:
        if "age" in q.predicates:
            assert np.array_equal(q.predicates["age"], np.arange(q.predicates["age"][0], q.predicates["age"][-1] + 1))
    assert workload.floor == 1.0  # 0.1 % of 400 = 0.4, at least 1


def test_exact_answers_without_histograms_are_the_same(monkeypatch) -> None:
    """Above MAX_HISTOGRAM_CELLS a set of attributes is counted record by record: the same answers (issue 18)."""
    import pipeline.core.query_workload as query_workload

    records = random_records()
    with_histograms = build_workload(records, QUASI, SENSITIVE, n_queries=60, seed=3)
    monkeypatch.setattr(query_workload, "MAX_HISTOGRAM_CELLS", 0)
    record_by_record = build_workload(records, QUASI, SENSITIVE, n_queries=60, seed=3)
    assert np.array_equal(with_histograms.exact, record_by_record.exact)
    assert with_histograms.exact.sum() > 0


def test_fixed_seed_gives_the_same_workload() -> None:
    records = random_records()
    first, second = (build_workload(records, QUASI, SENSITIVE, n_queries=40, seed=9) for _ in range(2))
    other = build_workload(records, QUASI, SENSITIVE, n_queries=40, seed=10)

    def key(w: Workload) -> list[tuple[str, tuple[tuple[str, tuple[int, ...]], ...]]]:
        return [(q.workload, tuple((a, tuple(int(c) for c in v)) for a, v in q.predicates.items())) for q in w.queries]

    assert key(first) == key(second)
    np.testing.assert_array_equal(first.exact, second.exact)
    assert key(first) != key(other)


def test_perfect_release_has_no_error() -> None:
    records = random_records()
    workload = build_workload(records, QUASI, SENSITIVE, n_queries=100, seed=1)
    figures = workload_utility(workload, generalized_table_estimator(records, workload))
    for name in ("W1", "W2"):
        assert figures[name]["n_queries"] == 100
        assert figures[name]["median"] == 0.0
        assert figures[name]["p90"] == 0.0


def test_uninformative_release_has_the_independence_error() -> None:
    records = random_records()
    workload = build_workload(records, QUASI, SENSITIVE, n_queries=100, seed=2)
    # a Rating-like release whose every record holds one SID per attribute = the attribute's whole column
    attribute_table = records[["row_id", *QUASI]].copy()
    for attribute in SENSITIVE:
        attribute_table[attribute] = pd.array([1] * len(records), dtype="Int32")
    id_table = pd.concat(
        [
            records[attribute].value_counts().rename_axis("value").reset_index(name="count").assign(attribute=attribute, sid=1)
            for attribute in SENSITIVE
        ],
        ignore_index=True,
    )
    estimate = mixed_release_estimator(
        attribute_table=attribute_table,
        id_table=id_table,
        workload=workload,
        quasi_identifiers=QUASI,
        sensitive_attributes=SENSITIVE,
    )
    # the independence model, with pandas: (records matching the quasi-identifier predicates) · Π share of the
    # sensitive predicate in the whole column
    expected = []
    for q, exact in zip(workload.queries, workload.exact):
        mask = np.ones(len(records), dtype=bool)
        share = 1.0
        for attribute, codes in q.predicates.items():
            accepted = records[attribute].isin([workload.domains[attribute][c] for c in codes])
            if attribute in QUASI:
                mask &= accepted.to_numpy()
            else:
                share *= accepted.mean()
        expected.append(abs(mask.sum() * share - exact) / max(exact, workload.floor))
    np.testing.assert_allclose(relative_errors(workload, estimate), expected, rtol=1e-9, atol=1e-12)
    assert np.median(expected) > 0  # the correlation sex -> disease is lost


def test_bad_settings_are_refused() -> None:
    records = random_records(20)
    with pytest.raises(ValueError, match="'nope'"):
        build_workload(records, ["nope"], SENSITIVE)
    with pytest.raises(ValueError, match="n_queries"):
        build_workload(records, QUASI, SENSITIVE, n_queries=0)
    with pytest.raises(ValueError, match="selectivity"):
        build_workload(records, QUASI, SENSITIVE, selectivity=0)
