"""The compiled main loop of SID creation (pipeline/core/rating_kernel.py, the path of ``create_sids`` without a
trace) gives exactly what the straightforward reference gives (tests/core/reference_algorithms.py) and what the
readable loops of ``create_sids(trace=True)`` give, on random columns: skewed ones (dangerous buckets), ones with
many values of equal size (Algorithm 13's long moves) and ℓ close to the number of values."""

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.core.rating import create_sids
from pipeline.core.rating_kernel import improved_sid_loop, plain_sid_loop
from tests.core.reference_algorithms import reference_create_sids


@st.composite
def columns(draw):
    """(record ids, values): up to 200 records over 1-40 values, skewed or flat, ids in random order."""
    n = draw(st.integers(0, 200))
    n_values = draw(st.integers(1, 40))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    shape = draw(st.sampled_from(["skewed", "flat", "one_large", "distinct"]))
    if shape == "distinct":  # (almost) every value once: one size class holds them all
        codes = rng.permutation(n) % max(n_values, 1) if draw(st.booleans()) else np.arange(n)
    elif shape == "one_large":  # a dangerous bucket: ℓ·|B| >= |D|
        codes = np.where(rng.random(n) < draw(st.sampled_from([0.4, 0.6, 0.9])), 0, rng.integers(1, n_values + 1, n))
    else:
        concentration = 0.3 if shape == "skewed" else 50.0
        codes = rng.choice(n_values, size=n, p=rng.dirichlet(np.full(n_values, concentration)))
    record_ids = (rng.permutation(np.arange(1, n + 1)) * 3).tolist()
    return record_ids, [f"v{k}" for k in codes]


@settings(max_examples=600, deadline=None)
@given(column=columns(), ell=st.integers(2, 6), method=st.sampled_from(["improved", "plain"]))
def test_compiled_sid_creation_equals_the_reference(column, ell, method):
    record_ids, values = column
    expected = reference_create_sids(record_ids, values, ell=ell, method=method)
    readable = create_sids(record_ids, values, ell=ell, method=method, trace=True)
    compiled = create_sids(record_ids, values, ell=ell, method=method)
    assert compiled.trace is None
    assert compiled.sid_values == expected.sid_values
    assert compiled.sid_records == expected.sid_records
    assert compiled.record_to_sid == expected.record_to_sid
    assert compiled.suppressed == expected.suppressed
    assert compiled.reorder_comparisons == expected.reorder_comparisons
    assert compiled.dangerous == expected.dangerous
    assert compiled.initial_sequence == expected.initial_sequence
    for name in ("entry_sid", "entry_bucket", "entry_record", "record_sid", "suppressed_records"):
        assert np.array_equal(getattr(compiled, name), getattr(readable, name)), name
    assert compiled.n_sids == readable.n_sids


@settings(max_examples=200, deadline=None)
@given(column=columns(), ell=st.integers(2, 5))
def test_compiled_sid_creation_takes_categorical_and_text_alike(column, ell):
    record_ids, values = column
    as_text = create_sids(record_ids, values, ell=ell)
    as_categorical = create_sids(np.asarray(record_ids), pd.Series(values, dtype="category"), ell=ell)
    assert as_categorical.sid_values == as_text.sid_values
    assert as_categorical.record_to_sid == as_text.record_to_sid
    assert as_categorical.suppressed == as_text.suppressed


def test_kernels_on_a_hand_checked_sequence():
    """Sizes a:4, b:3, c:3, d:2 (ℓ = 2, no dangerous bucket: 2·4 < 12); each SID takes the two first buckets of the
    stable descending order: {a,b} (then a3 c3 b2 d2), {a,c} (a2 c2 b2 d2), {a,c} (b2 d2 a1 c1), {b,d}
    (b1 d1 a1 c1), {b,d} (a1 c1 b0 d0), {a,c}: every value used, nothing left."""
    sizes = np.array([4, 3, 3, 2], dtype=np.int64)
    left = sizes.copy()
    taken, comparisons, final = improved_sid_loop(left, np.arange(4, dtype=np.int64), np.zeros(0, dtype=np.int64), 2)
    assert taken.reshape(-1, 2).tolist() == [[0, 1], [0, 2], [0, 2], [1, 3], [1, 3], [0, 2]]
    assert left.tolist() == [0, 0, 0, 0] and sorted(final.tolist()) == [0, 1, 2, 3]
    assert len(comparisons) == 6
    left = sizes.copy()
    plain_taken, _ = plain_sid_loop(left, np.arange(4, dtype=np.int64), 2)
    assert plain_taken.tolist() == taken.tolist() and left.tolist() == [0, 0, 0, 0]
