"""SPEC §11 metrics (AIL, RCE): §16.1/§16.2 golden numbers, a row-by-row Fraction reference on random
tables, and the Lemma 23 closed forms."""

import math
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.core.metrics import additional_information_loss, domain_sizes, exact_sum, reconstruction_error
from pipeline.core.mixed_model import assemble_release_tables, run_mixed_model
from pipeline.core.rating import rating_tables
from tests.conftest import example_frame, example_quasi_identifiers

EXAMPLES = ["example_A", "example_B"]


def _mixed_release(frame, quasi_identifier_columns, sensitive_attribute_columns, *, ell, min_confidence, seed=0):
    result = run_mixed_model(frame, sensitive_attribute_columns, ell=ell, min_confidence=min_confidence, seed=seed)
    tables = assemble_release_tables(
        frame,
        quasi_identifier_columns,
        sensitive_attribute_columns,
        sac_permuted=result.sac_permuted,
        attribute_sids=result.attribute_sids,
        id_table=result.id_table,
        clusters=result.clusters,
    )
    return tables, len(result.grouping.deleted)


def _rating_release(frame, quasi_identifier_columns, sensitive_attribute_columns, *, ell):
    id_table, attribute_sids = rating_tables(frame, sensitive_attribute_columns, ell=ell)
    empty_sac = pd.DataFrame(columns=["group_id", "row_id", *quasi_identifier_columns, *sensitive_attribute_columns])
    tables = assemble_release_tables(
        frame,
        quasi_identifier_columns,
        sensitive_attribute_columns,
        sac_permuted=empty_sac,
        attribute_sids=attribute_sids,
        id_table=id_table,
        clusters=[],
    )
    return tables, 0


def _release(frame, quasi_identifier_columns, sensitive_attribute_columns, model, *, ell, min_confidence):
    if model == "mixed":
        return _mixed_release(
            frame, quasi_identifier_columns, sensitive_attribute_columns, ell=ell, min_confidence=min_confidence
        )
    return _rating_release(frame, quasi_identifier_columns, sensitive_attribute_columns, ell=ell)


def _ail(tables, sensitive_attribute_columns, ell, n_deleted):
    return additional_information_loss(
        sac_released=tables.sac_released,
        attribute_table=tables.attribute_table,
        id_table=tables.id_table,
        sensitive_attributes=sensitive_attribute_columns,
        ell=ell,
        n_deleted=n_deleted,
    )


def _rce(tables, sensitive_attribute_columns, domains, n_deleted):
    return reconstruction_error(
        sac_released=tables.sac_released,
        attribute_table=tables.attribute_table,
        id_table=tables.id_table,
        attribute_clusters=tables.attribute_clusters,
        sensitive_attributes=sensitive_attribute_columns,
        domain_sizes=domains,
        n_deleted=n_deleted,
    )


@pytest.mark.parametrize("name", EXAMPLES)
@pytest.mark.parametrize("model", ["mixed", "rating"])
def test_golden_ail_and_rce(golden, name, model):
    example = golden[name]
    frame, sensitive_attribute_columns, ell = example_frame(example), example["SA"], example["l"]
    tables, n_deleted = _release(
        frame, example_quasi_identifiers(example), sensitive_attribute_columns, model, ell=ell, min_confidence=example["min_conf"]
    )
    expected_ail = Fraction(example[f"AIL_{model}"])
    expected_rce = Fraction(example[f"RCE_{model}"])
    assert _ail(tables, sensitive_attribute_columns, ell, n_deleted) == pytest.approx(float(expected_ail), rel=1e-12, abs=1e-12)
    assert _rce(
        tables, sensitive_attribute_columns, domain_sizes(frame, sensitive_attribute_columns), n_deleted
    ) == pytest.approx(float(expected_rce), rel=1e-12, abs=1e-12)


def test_example_b_domain_sizes_are_the_raw_distinct_values(golden):
    example = golden["example_B"]
    frame = example_frame(example)
    assert domain_sizes(frame, example["SA"]) == {"S1": 5, "S2": 5, "S3": 4, "S4": 5}
    # the suppressed cells (S2 rows 13, 16, 17, 18; S3 row 18; S4 row 17) make RCE depend on them
    tables, n_deleted = _mixed_release(frame, example_quasi_identifiers(example), example["SA"], ell=3, min_confidence=0.8)
    other = _rce(tables, example["SA"], {"S1": 5, "S2": 4, "S3": 4, "S4": 5}, n_deleted)
    assert other != pytest.approx(float(Fraction(example["RCE_mixed"])), rel=1e-12)


# --------------------------------------------------------------------------------------------
# Row-by-row reference straight from SPEC §11, exact in Fractions


def _reference(tables, sensitive_attribute_columns, ell, domains, n_deleted):
    sac, at, idt = tables.sac_released, tables.attribute_table, tables.id_table
    sid_values = {(a, int(s)): set(g["value"]) for (a, s), g in idt.groupby(["attribute", "sid"], observed=True)}
    clusters = [list(g["attribute"]) for _, g in tables.attribute_clusters.groupby("cluster_id")] or [
        [a] for a in sensitive_attribute_columns
    ]
    ail, rce = Fraction(0), Fraction(0)
    for _, row in at.iterrows():
        n_t = 1
        for a in sensitive_attribute_columns:
            if pd.isna(row[a]):
                ail += 1
                n_t *= domains[a]
            else:
                g = len(sid_values[(a, int(row[a]))])
                ail += Fraction(g - ell, g)
                n_t *= g
        rce += 1 - Fraction(1, n_t)
    for _, group in sac.groupby("group_id"):
        n_t = math.prod(len(set(map(tuple, group[c].to_numpy().tolist()))) for c in clusters)
        for a in sensitive_attribute_columns:
            g = group[a].nunique()
            ail += len(group) * Fraction(g - ell, g)
        rce += len(group) * (1 - Fraction(1, n_t))
    n = len(sac) + len(at) + n_deleted
    ail += n_deleted * len(sensitive_attribute_columns)
    rce += n_deleted
    return (ail / (n * len(sensitive_attribute_columns)) if n else Fraction(0)), rce


@st.composite
def random_tables(draw):
    n = draw(st.integers(min_value=0, max_value=40))
    m = draw(st.integers(min_value=2, max_value=4))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    frame = pd.DataFrame({"row_id": np.arange(1, n + 1, dtype=np.int64), "qi": rng.integers(0, 5, n).astype(str)})
    for j in range(m):
        k = draw(st.integers(min_value=1, max_value=7))
        skew = draw(st.floats(min_value=0.0, max_value=2.0))
        weights = 1.0 / np.arange(1, k + 1) ** skew
        frame[f"S{j + 1}"] = [f"s{j + 1}_{v}" for v in rng.choice(k, size=n, p=weights / weights.sum())]
    return frame


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    frame=random_tables(),
    ell=st.integers(2, 4),
    min_confidence=st.sampled_from([0.5, 0.75, 1.0]),
    model=st.sampled_from(["mixed", "rating"]),
)
def test_metrics_match_row_by_row_reference(frame, ell, min_confidence, model):
    sensitive_attribute_columns = [c for c in frame.columns if c.startswith("S")]
    tables, n_deleted = _release(frame, ["qi"], sensitive_attribute_columns, model, ell=ell, min_confidence=min_confidence)
    domains = domain_sizes(frame, sensitive_attribute_columns)
    ail, rce = (
        _ail(tables, sensitive_attribute_columns, ell, n_deleted),
        _rce(tables, sensitive_attribute_columns, domains, n_deleted),
    )
    expected_ail, expected_rce = _reference(tables, sensitive_attribute_columns, ell, domains, n_deleted)
    assert ail == pytest.approx(float(expected_ail), rel=1e-12, abs=1e-12)
    assert rce == pytest.approx(float(expected_rce), rel=1e-12, abs=1e-12)
    # SPEC §11 ranges; AIL is 0 exactly when nothing was deleted, suppressed or enlarged beyond ℓ
    assert 0.0 <= ail <= 1.0
    assert 0.0 <= rce <= len(frame)
    sid_sizes = tables.id_table.groupby(["attribute", "sid"], observed=True)["value"].nunique()
    lossless = (
        n_deleted == 0 and not tables.attribute_table[sensitive_attribute_columns].isna().any().any() and (sid_sizes == ell).all()
    )
    assert (ail == 0.0) == lossless


@st.composite
def balanced_tables(draw):
    """Every attribute has ℓ·j values, each c times: Rating makes SIDs of exactly ℓ values, no residual."""
    ell = draw(st.integers(2, 4))
    j = draw(st.integers(1, 3))
    c = draw(st.integers(1, 4))
    m = draw(st.integers(1, 4))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    n = ell * j * c
    frame = pd.DataFrame({"row_id": np.arange(1, n + 1, dtype=np.int64), "qi": rng.integers(0, 3, n).astype(str)})
    for i in range(m):
        frame[f"S{i + 1}"] = rng.permutation(np.repeat([f"v{i}_{k}" for k in range(ell * j)], c))
    return frame, ell


@settings(max_examples=50, deadline=None)
@given(case=balanced_tables())
def test_lemma_23_rating_release_without_residuals(case):
    frame, ell = case
    sensitive_attribute_columns = [c for c in frame.columns if c.startswith("S")]
    tables, _ = _rating_release(frame, ["qi"], sensitive_attribute_columns, ell=ell)
    assert _ail(tables, sensitive_attribute_columns, ell, 0) == 0.0
    expected = len(frame) * (1 - Fraction(1, ell ** len(sensitive_attribute_columns)))
    assert _rce(tables, sensitive_attribute_columns, domain_sizes(frame, sensitive_attribute_columns), 0) == pytest.approx(
        float(expected), rel=1e-12
    )


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(frame=random_tables(), ell=st.integers(2, 4), min_confidence=st.sampled_from([0.5, 0.75, 1.0]))
def test_lemma_23_per_row_costs_in_mixed_release(frame, ell, min_confidence):
    """SAC~ rows cost exactly 1 − ℓ^−|Cluster_Set|. AT rows cost 1 − ℓ^−m when no SID is enlarged and no
    cell suppressed, else more — except that a suppressed cell's factor |D(S_i)| may be below ℓ, so the
    general floor per row is 1 − 1/Π_i min(ℓ, |D(S_i)|), reached iff every factor is that minimum."""
    sensitive_attribute_columns = [c for c in frame.columns if c.startswith("S")]
    tables, n_deleted = _mixed_release(frame, ["qi"], sensitive_attribute_columns, ell=ell, min_confidence=min_confidence)
    n_clusters = tables.attribute_clusters["cluster_id"].nunique()
    domains = domain_sizes(frame, sensitive_attribute_columns)
    sac_only = _rce(_sac_only(tables), sensitive_attribute_columns, domains, 0)
    assert sac_only == pytest.approx(len(tables.sac_released) * (1 - ell**-n_clusters), rel=1e-12, abs=1e-12)
    at = tables.attribute_table
    at_only = _rce(_at_only(tables), sensitive_attribute_columns, domains, 0)
    sid_sizes = tables.id_table.groupby(["attribute", "sid"], observed=True)["value"].nunique()
    suppressed = at[sensitive_attribute_columns].isna().any()
    if not suppressed.any() and (sid_sizes == ell).all():
        assert at_only == pytest.approx(len(at) * (1 - ell ** -len(sensitive_attribute_columns)), rel=1e-12, abs=1e-12)
    if len(at):
        floor = len(at) * (1 - 1 / math.prod(min(ell, domains[a]) for a in sensitive_attribute_columns))
        above_floor = (sid_sizes > ell).any() or any(suppressed[a] and domains[a] > ell for a in sensitive_attribute_columns)
        if above_floor:
            assert at_only > floor + 1e-12
        else:
            assert at_only == pytest.approx(floor, rel=1e-12, abs=1e-12)
    total = _rce(tables, sensitive_attribute_columns, domains, n_deleted)
    assert total == pytest.approx(sac_only + at_only + n_deleted, rel=1e-12, abs=1e-12)


def _sac_only(tables):
    return tables.__class__(
        tables.sac_released, tables.attribute_table.iloc[:0], tables.id_table, tables.attribute_clusters, tables.row_map
    )


def _at_only(tables):
    return tables.__class__(
        tables.sac_released.iloc[:0], tables.attribute_table, tables.id_table, tables.attribute_clusters, tables.row_map
    )


# --------------------------------------------------------------------------------------------
# Hand-made releases: cluster fallback, empty and large releases, errors


def _idt(attribute, sizes):
    rows = [(attribute, sid, f"{attribute}_{k}", 1) for sid, size in enumerate(sizes, 1) for k in range(size)]
    return pd.DataFrame(rows, columns=["attribute", "sid", "value", "count"]).astype({"sid": "int32", "count": "int32"})


def _at(**columns):
    n = len(next(iter(columns.values())))
    return pd.DataFrame(
        {"row_id": np.arange(1, n + 1, dtype=np.int64), **{a: pd.array(v, dtype="Int32") for a, v in columns.items()}}
    )


SAC = pd.DataFrame({"row_id": [1, 2], "group_id": [1, 1], "S1": ["a", "b"], "S2": ["x", "y"], "S3": ["p", "q"]})
NO_AT = _at(S1=[], S2=[], S3=[])
NO_IDT = pd.DataFrame(columns=["attribute", "sid", "value", "count"])


def test_sac_rows_use_clusters_and_fall_back_to_singletons():
    # P1's example: 2-record group, clusters {S1,S2},{S3} -> 2x2 = 4 tuples, Err = 3/4 per row
    clusters = pd.DataFrame({"cluster_id": [1, 1, 2], "attribute": ["S1", "S2", "S3"]})
    kwargs = dict(
        sac_released=SAC,
        attribute_table=NO_AT,
        id_table=NO_IDT,
        sensitive_attributes=["S1", "S2", "S3"],
        domain_sizes={"S1": 9, "S2": 9, "S3": 9},
        n_deleted=0,
    )
    assert reconstruction_error(attribute_clusters=clusters, **kwargs) == pytest.approx(2 * 3 / 4, rel=1e-12)
    no_clusters = pd.DataFrame({"cluster_id": pd.Series([], dtype="int32"), "attribute": pd.Series([], dtype=object)})
    assert reconstruction_error(attribute_clusters=no_clusters, **kwargs) == pytest.approx(2 * 7 / 8, rel=1e-12)
    with pytest.raises(ValueError, match="partition"):
        reconstruction_error(attribute_clusters=clusters.iloc[:2], **kwargs)


def test_empty_release_and_deleted_only():
    empty_sac = pd.DataFrame()
    at = _at(S1=[], S2=[])
    common = dict(sac_released=empty_sac, attribute_table=at, id_table=NO_IDT, sensitive_attributes=["S1", "S2"])
    assert additional_information_loss(**common, ell=2, n_deleted=0) == 0.0
    assert additional_information_loss(**common, ell=2, n_deleted=3) == 1.0
    clusters = pd.DataFrame(columns=["cluster_id", "attribute"])
    assert reconstruction_error(**common, attribute_clusters=clusters, domain_sizes={"S1": 2, "S2": 2}, n_deleted=0) == 0.0
    assert reconstruction_error(**common, attribute_clusters=clusters, domain_sizes={"S1": 2, "S2": 2}, n_deleted=3) == 3.0


def test_attribute_table_cells_suppressed_and_enlarged():
    idt = pd.concat([_idt("S1", [2, 3]), _idt("S2", [2])], ignore_index=True)
    at = _at(S1=[1, 2, None], S2=[1, None, 1])
    common = dict(sac_released=pd.DataFrame(), attribute_table=at, id_table=idt, sensitive_attributes=["S1", "S2"])
    # cells: (0, 0), (1/3, 1), (1, 0); one deleted record adds 2 cells of 1 -> 13/3 over 8 cells
    assert additional_information_loss(**common, ell=2, n_deleted=1) == pytest.approx(13 / 24, rel=1e-12)
    clusters = pd.DataFrame(columns=["cluster_id", "attribute"])
    rce = reconstruction_error(**common, attribute_clusters=clusters, domain_sizes={"S1": 7, "S2": 5}, n_deleted=1)
    assert rce == pytest.approx(float(Fraction(3, 4) + Fraction(14, 15) + Fraction(13, 14) + 1), rel=1e-12)
    with pytest.raises(ValueError, match="not in the ID table"):
        additional_information_loss(**{**common, "attribute_table": _at(S1=[3], S2=[1])}, ell=2, n_deleted=0)
    with pytest.raises(ValueError, match="fewer than"):
        additional_information_loss(**common, ell=3, n_deleted=0)
    with pytest.raises(ValueError, match="domain size"):
        reconstruction_error(**common, attribute_clusters=clusters, domain_sizes={"S1": 7}, n_deleted=0)
    with pytest.raises(ValueError, match="ell"):
        additional_information_loss(**common, ell=1, n_deleted=0)


def test_many_attributes_and_rows_do_not_overflow():
    n, m, ell = 30_000, 40, 3
    sensitive_attribute_columns = [f"S{i}" for i in range(m)]
    idt = pd.concat([_idt(a, [ell] * 10) for a in sensitive_attribute_columns], ignore_index=True)
    rng = np.random.default_rng(0)
    columns = {a: rng.integers(1, 11, n).tolist() for a in sensitive_attribute_columns}
    columns["S0"] = [None] * n  # suppressed: factor 10**9 on top of 3**39 overflows int64
    at = _at(**columns)
    common = dict(sac_released=pd.DataFrame(), attribute_table=at, id_table=idt, sensitive_attributes=sensitive_attribute_columns)
    assert additional_information_loss(**common, ell=ell, n_deleted=0) == pytest.approx(1 / m, rel=1e-12)
    rce = reconstruction_error(
        **common,
        attribute_clusters=pd.DataFrame(columns=["cluster_id", "attribute"]),
        domain_sizes={a: 10**9 for a in sensitive_attribute_columns},
        n_deleted=0,
    )
    assert rce == pytest.approx(n * float(1 - Fraction(1, 10**9 * 3**39)), rel=1e-12)


@settings(max_examples=50, deadline=None)
@given(
    st.lists(
        st.lists(st.floats(min_value=-1e12, max_value=1e12, allow_nan=False, allow_infinity=False), max_size=300),
        max_size=4,
    ),
    st.integers(1, 64),
)
def test_exact_sum_is_fsum_of_every_element_in_chunks(parts, chunk):
    """The metrics' chunked exact sum (issue 18: no list of every cell at once) is math.fsum of all the elements,
    whatever the chunk size and however the elements are split into arrays."""
    arrays = [np.asarray(part, dtype=float) for part in parts]
    expected = math.fsum(value for part in parts for value in part)
    assert exact_sum(*arrays, chunk=chunk) == expected
