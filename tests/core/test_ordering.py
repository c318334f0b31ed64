"""pipeline/core/ordering.py gives exactly ``np.lexsort``'s permutation (its definition here), with fewer sorts."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.core.ordering import hash_first_order, packed_lexsort

# key kinds: small ranges (packed together), negative values (-1 = a suppressed SID), booleans, 64-bit hashes (never
# packed), floats (never packed) and ranges large enough to stop a run of packed keys
KINDS = {
    "small": lambda rng, n: rng.integers(0, 4, n),
    "suppressed": lambda rng, n: rng.integers(-1, 3, n),
    "bool": lambda rng, n: rng.integers(0, 2, n).astype(bool),
    "hash": lambda rng, n: rng.integers(0, 2**63, n, dtype=np.uint64) * np.uint64(2) + rng.integers(0, 2, n, dtype=np.uint64),
    "float": lambda rng, n: rng.integers(0, 3, n) / 2.0,
    "wide": lambda rng, n: rng.integers(-(2**40), 2**40, n),
    "int32": lambda rng, n: rng.integers(0, 300_000, n).astype(np.int32),
    # uint64 values above int64's range with a small span (a single 64-bit hash, or a few close ones): packed
    "high64": lambda rng, n: np.uint64(2**63) + rng.integers(0, 5, n, dtype=np.uint64),
}


@settings(max_examples=300, deadline=None)
@given(
    kinds=st.lists(st.sampled_from(sorted(KINDS)), min_size=1, max_size=10),
    n=st.integers(0, 60),
    seed=st.integers(0, 2**32 - 1),
)
def test_packed_lexsort_is_numpy_lexsort(kinds, n, seed):
    rng = np.random.default_rng(seed)
    keys = [KINDS[kind](rng, n) for kind in kinds]
    expected = np.lexsort(keys[::-1]) if n else np.zeros(0, dtype=np.int64)
    got = packed_lexsort(keys)
    assert got.dtype == np.int64
    assert got.tolist() == expected.tolist()


def test_packed_lexsort_refuses_no_key_and_keys_of_different_lengths():
    with pytest.raises(ValueError, match="at least one key"):
        packed_lexsort([])
    with pytest.raises(ValueError, match="different lengths"):
        packed_lexsort([np.zeros(3), np.zeros(2)])


@settings(max_examples=300, deadline=None)
@given(n=st.integers(0, 60), seed=st.integers(0, 2**32 - 1), distinct_hashes=st.integers(1, 8), collide=st.booleans())
def test_hash_first_order_is_lexsort_with_the_hash_first_even_when_hashes_collide(n, seed, distinct_hashes, collide):
    """Hashes of the keys' content (equal keys, equal hash) take one sort; a collision (equal hashes, different keys:
    ``collide``, few distinct hashes) falls back to the whole lexsort; both give ``np.lexsort``'s permutation."""
    rng = np.random.default_rng(seed)
    keys = [rng.integers(0, 3, n), rng.integers(-1, 2, n)]
    content = keys[0] * 3 + (keys[1] + 1)
    if collide:
        hashes = (rng.integers(0, distinct_hashes, 9)[content]).astype(np.uint64)  # different content, same hash
    else:
        hashes = (np.arange(9, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15))[content]  # a function of the content
    expected = np.lexsort([*keys[::-1], hashes]) if n else np.zeros(0, dtype=np.int64)
    assert hash_first_order(hashes, keys).tolist() == expected.tolist()
