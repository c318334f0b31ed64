"""The order-replay adversary and the order-free release (issue 12, item 1).

The leaky candidate is SPEC §6's reference Rating (``secret=None``): SIDs numbered in creation
order and filled first-in-first-out in table order. The keyed release (home secret) must leave the
adversary at chance and every published id/SID column uncorrelated with the input position.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pipeline.core.mixed_model import assemble_release_tables, run_mixed_model
from pipeline.core.order_attack import input_order_correlations, order_gate_limits, order_replay_attack
from pipeline.core.rating import rating_tables

SECRET = bytes(range(32))
QUASI_IDENTIFIERS = ["sex", "race", "marital-status", "native-country", "workclass"]
SENSITIVE = ["education", "occupation", "age", "relationship"]


def _rating_release(records: pd.DataFrame, secret: bytes | None):
    id_table, attribute_sids = rating_tables(
        records, SENSITIVE, ell=3, secret=secret, content_columns=[*QUASI_IDENTIFIERS, *SENSITIVE]
    )
    empty = pd.DataFrame({c: pd.Series(dtype=object) for c in ["group_id", "row_id", *QUASI_IDENTIFIERS, *SENSITIVE]})
    return assemble_release_tables(
        records,
        QUASI_IDENTIFIERS,
        SENSITIVE,
        sac_permuted=empty,
        attribute_sids=attribute_sids,
        id_table=id_table,
        clusters=[],
        secret=secret,
    )


def _truth(records: pd.DataFrame, tables) -> pd.DataFrame:
    source = tables.row_map.set_index("row_id").loc[tables.attribute_table["row_id"], "source_row_id"].to_numpy()
    truth = records.set_index("row_id").loc[source, SENSITIVE].reset_index(drop=True)
    truth.insert(0, "row_id", tables.attribute_table["row_id"].to_numpy())
    return truth


@pytest.fixture(scope="module")
def adult_slice(adult_records) -> pd.DataFrame:
    return adult_records.iloc[:6000].reset_index(drop=True)


def test_order_replay_breaks_the_reference_rating_and_not_the_keyed_one(adult_slice):
    leaky = _rating_release(adult_slice, None)
    result = order_replay_attack(leaky.attribute_table, leaky.id_table, SENSITIVE, _truth(adult_slice, leaky))
    assert not result.passed
    # the adversary does far better than the 1/3 of ℓ-diversity on the leaky candidate
    assert (result.per_attribute["accuracy"] > 0.4).all()
    assert (result.per_attribute["chance"].between(0.30, 0.34)).all()

    keyed = _rating_release(adult_slice, SECRET)
    result = order_replay_attack(keyed.attribute_table, keyed.id_table, SENSITIVE, _truth(adult_slice, keyed))
    assert result.passed, result.per_attribute
    assert result.max_excess < 0.02


def test_sid_columns_follow_the_input_order_only_in_the_reference(adult_slice):
    for secret, should_pass in ((None, False), (SECRET, True)):
        tables = _rating_release(adult_slice, secret)
        row_map = tables.row_map.rename(columns={"source_row_id": "input_row_number"})
        frame = input_order_correlations(
            {"attribute_table": tables.attribute_table}, row_map, {"attribute_table": ["row_id", *SENSITIVE]}
        )
        assert bool(frame["passed"].all()) is should_pass, frame
    assert order_gate_limits(10_001) == pytest.approx(0.05)
    assert order_gate_limits(101) == pytest.approx(0.4)


def test_row_ids_of_a_sorted_input_carry_no_order(adult_slice):
    """A file sorted by a quasi-identifier must not give row ids in input order (rows are ordered by a keyed hash)."""
    records = adult_slice.sort_values(["sex", "race"], kind="stable").reset_index(drop=True)
    records["row_id"] = np.arange(1, len(records) + 1, dtype=np.int64)
    tables = _rating_release(records, SECRET)
    row_map = tables.row_map.rename(columns={"source_row_id": "input_row_number"})
    frame = input_order_correlations({"attribute_table": tables.attribute_table}, row_map, {"attribute_table": ["row_id"]})
    assert frame["passed"].all(), frame


def test_keyed_release_does_not_depend_on_the_input_row_order(adult_slice):
    """Issue 12, release series (a): the same records in another order give the same release."""
    shuffled = adult_slice.sample(frac=1.0, random_state=5).reset_index(drop=True)

    def published(records):
        result = run_mixed_model(
            records, SENSITIVE, ell=3, min_confidence=0.8, seed=0, secret=SECRET, quasi_identifiers=QUASI_IDENTIFIERS
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
        )
        return tables

    first, second = published(adult_slice), published(shuffled)
    assert len(first.sac_released) > 0
    for name in ("sac_released", "attribute_table", "id_table"):
        a = getattr(first, name).astype(str).reset_index(drop=True)
        b = getattr(second, name).astype(str).reset_index(drop=True)
        pd.testing.assert_frame_equal(a, b, check_dtype=False)
    # another secret gives another release from the same records
    other = run_mixed_model(
        adult_slice, SENSITIVE, ell=3, min_confidence=0.8, seed=0, secret=bytes(32 * [7]), quasi_identifiers=QUASI_IDENTIFIERS
    )
    assert not other.id_table.equals(
        run_mixed_model(
            adult_slice, SENSITIVE, ell=3, min_confidence=0.8, seed=0, secret=SECRET, quasi_identifiers=QUASI_IDENTIFIERS
        ).id_table
    )


def test_keyed_rating_keeps_rating_invariants(adult_slice):
    """Same SID multiset per attribute as the reference (sizes, ℓ distinct values), only numbered and filled differently."""
    reference_ids, reference_sids = rating_tables(adult_slice, SENSITIVE, ell=3)
    keyed_ids, keyed_sids = rating_tables(
        adult_slice, SENSITIVE, ell=3, secret=SECRET, content_columns=[*QUASI_IDENTIFIERS, *SENSITIVE]
    )
    for attribute in SENSITIVE:
        ref = reference_ids[reference_ids["attribute"] == attribute]
        key = keyed_ids[keyed_ids["attribute"] == attribute]
        assert ref["sid"].nunique() == key["sid"].nunique()
        assert sorted(key["sid"].unique()) == list(range(1, key["sid"].nunique() + 1))
        assert (key.groupby("sid")["value"].nunique() >= 3).all()
        assert keyed_sids[attribute].isna().sum() == reference_sids[attribute].isna().sum()
        # every record's value is in its SID
        joined = (
            keyed_sids[["row_id", attribute]]
            .dropna()
            .merge(adult_slice[["row_id", attribute]].astype({attribute: str}), on="row_id", suffixes=("_sid", ""))
        )
        pairs = set(zip(key["sid"].astype(int), key["value"].astype(str)))
        assert all((int(s), v) in pairs for s, v in zip(joined[f"{attribute}_sid"], joined[attribute]))
