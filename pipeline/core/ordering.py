"""Sorting many integer keys at once: the orders of :func:`numpy.lexsort`, computed with fewer passes.

The release's row and group orders (:func:`pipeline.core.mixed_model.assemble_release_tables`) sort a million records
by ten keys (a keyed hash, five quasi-identifier ranks, four SIDs); ``np.lexsort`` makes one stable sort per key.
Both functions here return exactly ``np.lexsort``'s permutation (ties by position), for one or a few sorts.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

__all__ = ["hash_first_order", "packed_lexsort"]

#: a packed key stays below 2**62 (int64, with room for the arithmetic)
_PACKED_LIMIT = 1 << 62


def packed_lexsort(keys: Sequence[np.ndarray]) -> np.ndarray:
    """``np.lexsort(keys[::-1])``: positions sorted by ``keys[0]``, ties by ``keys[1]``, … then by position.

    Runs of consecutive integer keys whose value ranges multiply to less than 2**62 are packed into one int64 key
    (mixed radix: ``(k0 - min0) * span1 + (k1 - min1)``…), which orders exactly as the run does; the packed keys are
    then sorted as ``np.lexsort`` would (one stable sort when a single key is left). Other keys (floats, a range of
    2**62 or more, as 64-bit hashes usually have) are sorted as given.

    Parameters
    ----------
    keys
        Arrays of one length ``n``, most significant first (at least one).

    Returns
    -------
    numpy.ndarray
        int64 ``(n,)``, a permutation of ``range(n)``.

    Raises
    ------
    ValueError
        No key, or keys of different lengths.
    """
    if not len(keys):
        raise ValueError("packed_lexsort needs at least one key")
    arrays = [np.asarray(key) for key in keys]
    n = len(arrays[0])
    if any(len(key) != n for key in arrays):
        raise ValueError(f"the keys have different lengths: {[len(key) for key in arrays]}")
    if n == 0:
        return np.zeros(0, dtype=np.int64)
    packed: list[np.ndarray] = []
    current: np.ndarray | None = None
    current_span = 1
    for key in arrays:
        if key.dtype.kind not in "iub":
            span = None
        else:
            low, high = int(key.min()), int(key.max())
            span = high - low + 1
        if span is None or span >= _PACKED_LIMIT:
            if current is not None:
                packed.append(current)
                current, current_span = None, 1
            packed.append(key)
            continue
        # the offset from the smallest value, in int64 (a uint64 key is shifted in its own type first: its values
        # may lie above int64's range while their span does not)
        shifted = (key - key.dtype.type(low)).astype(np.int64) if key.dtype == np.uint64 else key.astype(np.int64) - low
        if current is not None and current_span * span < _PACKED_LIMIT:
            current = current * span + shifted
            current_span *= span
        else:
            if current is not None:
                packed.append(current)
            current, current_span = shifted, span
    if current is not None:
        packed.append(current)
    if len(packed) == 1:
        return np.argsort(packed[0], kind="stable").astype(np.int64)
    return np.lexsort(packed[::-1]).astype(np.int64)


def hash_first_order(hashes: np.ndarray, keys: Sequence[np.ndarray]) -> np.ndarray:
    """``np.lexsort([*keys[::-1], hashes])``: positions sorted by ``hashes``, ties by ``keys`` in order, then by
    position; by one stable sort of the hashes when every tie of equal hashes also has equal keys (the hashes are of
    the keys' content, so only a 64-bit collision breaks this), else by :func:`packed_lexsort` of all of them. The
    same permutation either way.

    Parameters
    ----------
    hashes
        uint64 ``(n,)``, e.g. :func:`pipeline.core.keyed.keyed_record_hashes` of the content the keys rank.
    keys
        Arrays of length ``n``, most significant first.

    Returns
    -------
    numpy.ndarray
        int64 ``(n,)``, a permutation of ``range(n)``.
    """
    order = np.argsort(hashes, kind="stable").astype(np.int64)
    ordered = hashes[order]
    ties = np.flatnonzero(ordered[1:] == ordered[:-1])
    if len(ties) and any(not np.array_equal(np.asarray(key)[order[ties]], np.asarray(key)[order[ties + 1]]) for key in keys):
        return packed_lexsort([hashes, *keys])
    return order
