"""Issue 14: memory must not depend on the longest value.

pandas turns a categorical column into text (``astype(str)``) through a fixed-width numpy unicode array:
rows x longest value x 4 bytes. One 20,000-character value in a 3,000-row column makes such an array
240 MB; ``as_text``'s predecessor, ``one_known_value_in_classes``, ``kl_diversity_summary``, ``strong_values_in_sids``
and ``kl_rule_confidences`` each made at least one (peaks of 480 MB before issue 14). The candidate sets converted
one class at a time (arrays of 3 rows) and are here as a guard. Peak Python/numpy allocation (tracemalloc: exact,
not timing, so not noisy) must stay under 24 MB, a tenth of one such array.
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np
import pandas as pd
import pytest

from pipeline.core.class_attacks import class_candidate_sets, one_known_value_in_classes
from pipeline.core.columns import as_text
from pipeline.core.composition import candidate_sets
from pipeline.core.release_utility import kl_rule_confidences
from pipeline.core.verification import kl_diversity_summary, strong_values_in_sids

N_ROWS = 3_000
LONG = "L" * 19_991 + "-long-end"  # 20,000 characters (a release would need max_value_length >= 20,000)
FIXED_WIDTH_BYTES = N_ROWS * len(LONG) * 4  # one fixed-width unicode array of the column: 240 MB
BOUND_BYTES = FIXED_WIDTH_BYTES // 10


def _column(seed: int) -> pd.Series:
    values = np.asarray([f"v{i}" for i in np.random.default_rng(seed).integers(0, 30, N_ROWS)], dtype=object)
    values[N_ROWS // 2] = LONG
    return pd.Series(values, dtype="category")


@pytest.fixture(scope="module")
def released() -> pd.DataFrame:
    """A (k, ℓ)-release-shaped table: classes of 3 rows, two sensitive attributes holding one long value each."""
    return pd.DataFrame(
        {
            "row_id": np.arange(N_ROWS, dtype=np.int64),
            "cluster_id": np.arange(N_ROWS, dtype=np.int64) // 3,
            "group_id": np.arange(N_ROWS, dtype=np.int64) // 3,
            "a": _column(1),
            "b": _column(2),
        }
    )


def _peak(call: Callable[[], Any]) -> int:
    tracemalloc.start()
    try:
        call()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_the_bound_is_a_tenth_of_one_fixed_width_array():
    assert FIXED_WIDTH_BYTES >= 10 * BOUND_BYTES and len(LONG) == 20_000


def test_as_text_of_a_long_value(released):
    assert _peak(lambda: as_text(released[["a", "b"]])) < BOUND_BYTES
    assert as_text(released["a"]).tolist() == released["a"].astype(object).tolist()


def test_class_attacks_with_a_long_value(released):
    row_map = pd.DataFrame({"row_id": released["row_id"], "input_row_number": released["row_id"] + 1})
    assert _peak(lambda: one_known_value_in_classes(released, ["a", "b"])) < BOUND_BYTES
    assert _peak(lambda: class_candidate_sets(released, row_map, ["a", "b"])) < BOUND_BYTES
    sets = class_candidate_sets(released, row_map, ["a", "b"])
    assert LONG in sets["a"].loc[N_ROWS // 2 + 1]


def test_composition_with_a_long_value(released):
    row_map = pd.DataFrame({"row_id": released["row_id"], "input_row_number": released["row_id"] + 1})
    assert _peak(lambda: candidate_sets(["a", "b"], row_map=row_map, sac_released=released)) < BOUND_BYTES
    assert LONG in candidate_sets(["a", "b"], row_map=row_map, sac_released=released)["a"].loc[N_ROWS // 2 + 1]


def test_verification_with_a_long_value(released):
    assert _peak(lambda: kl_diversity_summary(released, ["a", "b"], ell=2)) < BOUND_BYTES
    id_table = pd.DataFrame(
        {"attribute": pd.Categorical(["a"] * N_ROWS), "sid": np.arange(N_ROWS) // 3 + 1, "value": released["a"]}
    )
    counted = strong_values_in_sids(id_table, {"a": {LONG}}, s_max="b")
    assert int(counted["n_strong_values"].sum()) == 1
    assert _peak(lambda: strong_values_in_sids(id_table, {"a": {LONG}}, s_max="b")) < BOUND_BYTES


def test_rule_confidences_with_a_long_value(released):
    rules = pd.DataFrame(
        {
            "antecedent_attribute": ["a"],
            "antecedent_value": [LONG],
            "consequent_attribute": ["b"],
            "consequent_value": ["v3"],
            "support": [1.0],
            "confidence": [1.0],
        }
    )
    assert _peak(lambda: kl_rule_confidences(rules, released)) < BOUND_BYTES
