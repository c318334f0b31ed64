"""The compiled (k, ℓ) kernels (issue 18) against the straightforward Python they replace, on random small tables
(hypothesis), and against SPEC §16.5's golden example.

References: the cost ``S`` of SPEC §14.2 written out here from the hierarchies (lowest common ancestor level per
attribute, ``|C| · Σ_i c_i · (h_i/H_i) · R_i``); ``Diverse`` by brute force over subsets; the greedy certificate and
witness by :func:`diverse_greedy` / :func:`diverse_witness` (numpy, unchanged); the §14.3 greedy by its numpy loop
over the ``n × n`` matrix (``compiled=False``, the implementation that reproduces SPEC §16.5)."""

from itertools import combinations

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.core import kl_anonymity as kl
from pipeline.core.kl_anonymity.diverse import records_diverse, records_diverse_at_least, records_witness
from pipeline.core.kl_anonymity.greedy import GREEDY_MAX_VALUE_COUNTS
from pipeline.core.kl_anonymity.kernels import (
    bipartition_costs,
    bipartition_diversity,
    cluster_cost_compiled,
    greedy_certificate_compiled,
    largest_totally_different_compiled,
)
from tests.core.test_kl_anonymity import (
    GOLDEN_RESULTS,
    QUASI_IDENTIFIERS,
    SENSITIVE_ATTRIBUTES,
    golden_frame,
    golden_hierarchies,
    random_table,
)

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def encoded(seed: int, n: int, n_sensitive: int) -> kl.EncodedTable:
    frame, hierarchies = random_table(seed, n, n_sensitive=n_sensitive)
    sensitive = [c for c in frame.columns if c.startswith("s")]
    return kl.encode_table(frame, ["zip", "age"], sensitive, hierarchies)


def reference_cost(table: kl.EncodedTable, positions: list[int]) -> float:
    """SPEC §14.2 by hand: every member climbs to the lowest level where all members share an ancestor."""
    total = 0.0
    for i, hierarchy in enumerate(table.hierarchies):
        chains = [hierarchy.codes[table.quasi_identifier_codes[p, i]] for p in positions]
        level = next(h for h in range(hierarchy.height + 1) if len({int(c[h]) for c in chains}) == 1)
        total += table.weights[i] * level / hierarchy.height * hierarchy.ranges[level][int(chains[0][level])]
    return len(positions) * total


def brute_force_diverse(rows: np.ndarray) -> int:
    distinct = {tuple(int(v) for v in row) for row in rows}
    for size in range(len(distinct), 0, -1):
        for subset in combinations(sorted(distinct), size):
            if all(all(a[j] != b[j] for j in range(len(a))) for a, b in combinations(subset, 2)):
                return size
    return 0


tables = st.tuples(st.integers(0, 100_000), st.integers(2, 40), st.integers(1, 3))


@SETTINGS
@given(tables, st.data())
def test_compiled_cost_equals_the_formula(spec, data):
    table = encoded(*spec)
    positions = data.draw(st.lists(st.integers(0, len(table) - 1), min_size=1, max_size=len(table), unique=True))
    expected = reference_cost(table, positions)
    assert kl.cluster_cost(table, positions) == pytest.approx(expected, rel=1e-12, abs=1e-12)
    levels = [level for level, _ in kl.cluster_generalization(table, positions)]
    for i, hierarchy in enumerate(table.hierarchies):
        chains = hierarchy.codes[table.quasi_identifier_codes[positions, i]]
        assert len(set(chains[:, levels[i]])) == 1
        assert levels[i] == 0 or len(set(chains[:, levels[i] - 1])) > 1


@SETTINGS
@given(tables, st.integers(2, 4))
def test_bipartition_costs_equal_the_cost_of_each_side(spec, k):
    table = encoded(*spec)
    cluster = np.arange(min(len(table), 9), dtype=np.int64)
    totals = bipartition_costs(table.ancestors, table.range_tensor, table.heights, table.weights, cluster, k)
    rest = cluster[1:]
    for mask in range(1, 1 << len(rest)):
        right = [int(rest[b]) for b in range(len(rest)) if mask >> b & 1]
        left = [int(cluster[0])] + [int(rest[b]) for b in range(len(rest)) if not mask >> b & 1]
        if len(left) < k or len(right) < k:
            assert totals[mask] == np.inf
        else:
            assert totals[mask] == pytest.approx(reference_cost(table, left) + reference_cost(table, right), rel=1e-12)


@SETTINGS
@given(tables, st.integers(1, 4), st.integers(1, 4), st.data())
def test_bipartition_diversity_decides_each_side_as_the_allowable_test(spec, k, ell, data):
    """The refinement's batched certificates (issue 18): every side marked allowable (1) has at least k records and
    Diverse >= ell by brute force, every side marked not allowable (0) has fewer than k records or Diverse < ell, and
    a side left undecided (2) has at least k records; so deciding the undecided ones exactly gives the allowable test
    of the refinement, side by side."""
    table = encoded(*spec)
    size = data.draw(st.integers(2, min(len(table), 10)))
    cluster = np.array(data.draw(st.permutations(range(len(table))))[:size], dtype=np.int64)
    tuple_ids, tuples = table.sensitive_tuples
    masks = np.arange(1, 1 << (size - 1), dtype=np.int64)
    statuses = bipartition_diversity(cluster, tuple_ids, tuples, masks, k, ell)
    rest = cluster[1:]
    for mask, (left_status, right_status) in zip(masks, statuses, strict=True):
        right = [int(rest[b]) for b in range(len(rest)) if mask >> b & 1]
        left = [int(cluster[0])] + [int(rest[b]) for b in range(len(rest)) if not mask >> b & 1]
        for status, side in ((left_status, left), (right_status, right)):
            allowable = len(side) >= k and brute_force_diverse(table.sensitive_codes[side]) >= ell
            assert status in (0, 1, 2)
            if status == 1:
                assert allowable
            elif status == 0:
                assert not allowable
            else:
                assert len(side) >= k


@SETTINGS
@given(tables, st.integers(1, 4), st.data())
def test_compiled_diverse_certificate_and_witness_equal_numpy(spec, ell, data):
    table = encoded(*spec)
    positions = np.array(
        sorted(data.draw(st.lists(st.integers(0, len(table) - 1), min_size=1, max_size=len(table), unique=True))),
        dtype=np.int64,
    )
    codes = table.sensitive_codes[positions]
    tuple_ids, tuples = table.sensitive_tuples
    assert records_diverse_at_least(table, positions, ell) == kl.diverse_at_least(codes, ell)
    assert records_diverse(table, positions) == kl.diverse(codes)
    assert greedy_certificate_compiled(tuple_ids[positions], tuples, 0) == kl.diverse_greedy(codes)
    witness = records_witness(table, positions)
    assert witness.tolist() == kl.diverse_witness(codes).tolist()
    distinct = np.unique(tuple_ids[positions])
    exact = largest_totally_different_compiled(tuples[distinct])
    assert len(exact) == brute_force_diverse(codes)
    chosen = tuples[distinct][exact]
    assert all((a != b).all() for a, b in combinations(chosen, 2))


def assert_compiled_greedy_equals_numpy(table: kl.EncodedTable, k: int, ell: int) -> None:
    """The compiled greedy gives the numpy reference's clusters, or both refuse the table: with its partner search's
    table of counts (the default cap) and without it (cap 0, the path of tables above the cap)."""
    try:
        expected = kl.greedy_clusters(table, k=k, ell=ell, compiled=False)
    except kl.InfeasibleError:
        for cap in (GREEDY_MAX_VALUE_COUNTS, 0):
            with pytest.raises(kl.InfeasibleError):
                kl.greedy_clusters(table, k=k, ell=ell, max_value_counts=cap)
        return
    for cap in (GREEDY_MAX_VALUE_COUNTS, 0):
        got = kl.greedy_clusters(table, k=k, ell=ell, max_value_counts=cap)
        assert [c.tolist() for c in got] == [c.tolist() for c in expected], f"max_value_counts={cap}"


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 100_000), st.integers(3, 90), st.integers(1, 3), st.integers(1, 5), st.integers(1, 4))
def test_compiled_greedy_equals_the_numpy_greedy(seed, n, n_sensitive, k, ell):
    table = encoded(seed, n, n_sensitive)
    assert_compiled_greedy_equals_numpy(table, k, min(ell, k))


def crowded(
    seed: int, n: int, n_sensitive: int, n_zip: int, n_age: int, n_values: int, weights: tuple[float, float] = (1.0, 1.0)
) -> kl.EncodedTable:
    """A random table whose records share few quasi-identifier tuples (``n_zip`` x ``n_age`` at most), so every tuple
    holds many records: the case of the compiled greedy's shortcut (records still alone, clusters of one tuple,
    clusters of several tuples per tuple), with ``n_values`` values per sensitive attribute and the cost weights of
    zip and age (0 makes many costs tie)."""
    frame, hierarchies = random_table(seed, n, n_sensitive=n_sensitive)
    rng = np.random.default_rng(seed + 1)
    frame["zip"] = rng.choice(["11", "12", "21", "22"][:n_zip], n)
    frame["age"] = rng.integers(0, n_age, n).astype(str)
    for j in range(n_sensitive):
        frame[f"s{j}"] = rng.choice(list("abcdef")[:n_values], n)
    return kl.encode_table(
        frame, ["zip", "age"], [f"s{j}" for j in range(n_sensitive)], hierarchies, weights=dict(zip(["zip", "age"], weights))
    )


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.integers(0, 100_000),
    st.integers(6, 150),
    st.integers(1, 3),
    st.integers(1, 4),
    st.integers(1, 3),
    st.integers(2, 6),
    st.integers(1, 6),
    st.integers(1, 4),
    st.tuples(st.sampled_from([0.0, 0.5, 1.0, 3.0]), st.sampled_from([0.0, 1.0, 2.5])),
)
def test_compiled_greedy_equals_the_numpy_greedy_on_crowded_tuples(seed, n, n_sensitive, n_zip, n_age, n_values, k, ell, weights):
    """Many records per quasi-identifier tuple, few sensitive values (partners that do not extend a witness set are
    common, and every round and the repair run), weights of 0 included (ties): the compiled loop's shortcut takes
    the reference's decisions."""
    table = crowded(seed, n, n_sensitive, n_zip, n_age, n_values, weights)
    assert_compiled_greedy_equals_numpy(table, k, min(ell, k))


def test_compiled_cost_reproduces_the_golden_edge_weights():
    table = kl.encode_table(golden_frame(), QUASI_IDENTIFIERS, SENSITIVE_ATTRIBUTES, golden_hierarchies())
    # SPEC §16.5: S({1, 3}) = 20, S({2, 5}) = 480, S({4, 7}) = 16,480 (records are 1-based there)
    for (u, v), expected in {(0, 2): 20.0, (1, 4): 480.0, (3, 6): 16480.0}.items():
        positions = np.array([u, v], dtype=np.int64)
        assert cluster_cost_compiled(table.ancestors, table.range_tensor, table.heights, table.weights, positions) == expected


@pytest.mark.parametrize("k,ell", sorted(GOLDEN_RESULTS))
def test_compiled_greedy_reproduces_the_golden_example(k, ell):
    table = kl.encode_table(golden_frame(), QUASI_IDENTIFIERS, SENSITIVE_ATTRIBUTES, golden_hierarchies())
    expected = GOLDEN_RESULTS[(k, ell)]
    clusters = kl.greedy_clusters(table, k=k, ell=ell)
    assert [sorted(int(table.row_ids[p]) for p in c) for c in clusters] == expected["approximate"]
    assert sum(kl.cluster_cost(table, c) for c in clusters) == pytest.approx(expected["approximate_cost"])


@SETTINGS
@given(
    st.integers(1, 120),
    st.integers(1, 3),
    st.integers(1, 4),
    st.integers(2, 6),
    st.integers(1, 30),
    st.integers(0, 10_000),
)
def test_the_diversity_gate_summary_equals_the_numpy_definitions_class_by_class(n, n_sensitive, ell, n_values, n_classes, seed):
    """Gate kl_clusters_are_l_diverse's summary (issue 18: computed with the compiled kernels, not class by class in
    numpy) against Diverse and the ≥ ℓ test of kl_anonymity.diverse and plain counts, for every class."""
    from pipeline.core.verification import kl_diversity_summary

    rng = np.random.default_rng(seed)
    released = pd.DataFrame({f"s{j}": rng.integers(0, n_values, n).astype(str) for j in range(n_sensitive)})
    released["cluster_id"] = rng.integers(0, n_classes, n) * 7 + 3
    attributes = [f"s{j}" for j in range(n_sensitive)]
    summary = kl_diversity_summary(released, attributes, ell=ell)
    expected = []
    for cluster_id, members in released.groupby("cluster_id", sort=True):
        codes = np.column_stack([members[a].astype(int).to_numpy() for a in attributes])
        expected.append(
            (
                int(cluster_id),
                len(members),
                len({tuple(row) for row in codes}),
                min(len(set(codes[:, j])) for j in range(n_sensitive)),
                kl.diverse(codes),
                bool(kl.diverse_at_least(codes, ell)),
            )
        )
    assert [tuple(row) for row in summary.itertuples(index=False)] == expected
