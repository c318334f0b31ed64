"""The linear-time Algorithm 11 and SID creation give exactly what the straightforward
versions give (tests/core/reference_algorithms.py), on random tables with skewed values."""

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.core.grouping import group_sac
from pipeline.core.rating import create_sids
from tests.core.reference_algorithms import reference_create_sids, reference_group_sac, reference_group_sac_qi_aware


@st.composite
def skewed_tables(draw):
    n = draw(st.integers(0, 120))
    m = draw(st.integers(2, 4))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    columns = {}
    for j in range(m):
        n_values = draw(st.integers(1, 7))
        weights = rng.dirichlet(np.full(n_values, draw(st.sampled_from([0.3, 1.0, 5.0]))))
        columns[f"S{j}"] = [f"v{k}" for k in rng.choice(n_values, size=n, p=weights)]
    frame = pd.DataFrame({"row_id": rng.permutation(np.arange(1, n + 1)) * 7, **columns})
    in_sac = rng.random(n) < draw(st.sampled_from([0.2, 0.5, 0.9]))
    return frame, list(columns), in_sac


@settings(max_examples=400, deadline=None)
@given(table=skewed_tables(), ell=st.integers(2, 4), categorical=st.booleans())
def test_index_based_grouping_equals_the_rescan(table, ell, categorical):
    frame, attributes, in_sac = table
    sac_ids = frame["row_id"].to_numpy()[in_sac]
    ir_ids = frame["row_id"].to_numpy()[~in_sac]
    expected = reference_group_sac(frame, attributes, sac_ids, ir_ids, ell=ell)
    if categorical:
        frame = frame.astype({a: "category" for a in attributes})
    result = group_sac(frame, attributes, sac_ids, ir_ids, ell=ell)
    assert result.groups == expected.groups
    assert result.borrowed.tolist() == expected.borrowed
    assert result.deleted.tolist() == expected.deleted
    assert result.ir_left.tolist() == expected.ir_left


@settings(max_examples=300, deadline=None)
@given(table=skewed_tables(), ell=st.integers(2, 4), n_zones=st.integers(1, 6), categorical=st.booleans())
def test_qi_aware_grouping_equals_the_rescan(table, ell, n_zones, categorical):
    frame, attributes, in_sac = table
    rng = np.random.default_rng(len(frame) * 31 + ell)
    frame = frame.assign(zone=[f"z{k}" for k in rng.integers(0, n_zones, size=len(frame))], band=rng.integers(0, 2, len(frame)))
    sac_ids = frame["row_id"].to_numpy()[in_sac]
    ir_ids = frame["row_id"].to_numpy()[~in_sac]
    expected = reference_group_sac_qi_aware(frame, attributes, sac_ids, ir_ids, ell=ell, quasi_identifiers=["zone", "band"])
    if categorical:
        frame = frame.astype({a: "category" for a in [*attributes, "zone"]})
    result = group_sac(frame, attributes, sac_ids, ir_ids, ell=ell, quasi_identifiers=["zone", "band"])
    assert result.groups == expected.groups
    assert result.borrowed.tolist() == expected.borrowed
    assert result.deleted.tolist() == expected.deleted
    assert result.ir_left.tolist() == expected.ir_left


@settings(max_examples=400, deadline=None)
@given(table=skewed_tables(), ell=st.integers(2, 5), method=st.sampled_from(["improved", "plain"]))
def test_array_sid_creation_equals_the_straightforward_one(table, ell, method):
    frame, attributes, _ = table
    ids = frame["row_id"].tolist()
    values = frame[attributes[0]].tolist()
    expected = reference_create_sids(ids, values, ell=ell, method=method, trace=True)
    result = create_sids(ids, values, ell=ell, method=method, trace=True)
    assert result.sid_values == expected.sid_values
    assert result.sid_records == expected.sid_records
    assert result.record_to_sid == expected.record_to_sid
    assert result.suppressed == expected.suppressed
    assert result.reorder_comparisons == expected.reorder_comparisons
    assert result.trace == expected.trace
