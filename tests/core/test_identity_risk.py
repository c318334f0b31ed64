"""Identity risk on the published quasi-identifiers (pipeline/core/identity_risk.py), against counts made by hand."""

from __future__ import annotations

import pandas as pd
import pytest

from pipeline.core.identity_risk import identity_risk

QUASI_IDENTIFIERS = ["sex", "zip"]


def published() -> tuple[pd.DataFrame, pd.DataFrame]:
    """Two published tables (as a mixed release's SAC~ and attribute table) whose pooled records form, by hand:

    - (F, 1000): 1 record (SAC~)                      -> unique
    - (M, 1000): 2 records (1 SAC~ + 1 attribute table) -> class of 2: pooled across the tables
    - (M, *):   3 records (attribute table)           -> a generalised value is one value
    - (F, *):   6 records (attribute table)
    - (M, 2000): 1 record (attribute table)           -> unique
    - (F, None): 1 record (attribute table)           -> a missing value is one value, unique

    14 records, 6 classes; unique: 3; classes below 2: 3 records, below 5: 3 + 2 + 3 = 8, below 10: all 14.
    """
    sac = pd.DataFrame({"row_id": [1, 2], "sex": ["F", "M"], "zip": ["1000", "1000"], "age": ["30", "40"]})
    attribute_table = pd.DataFrame(
        {
            "row_id": range(3, 15),
            "sex": ["M", "M", "M", "M", "F", "F", "F", "F", "F", "F", "M", "F"],
            "zip": ["1000", "*", "*", "*", "*", "*", "*", "*", "*", "*", "2000", None],
            "age": ["1"] * 12,  # not a quasi-identifier: ignored
        }
    )
    attribute_table["sex"] = attribute_table["sex"].astype("category")  # as read back from Parquet
    return sac, attribute_table


def test_counts_by_hand_on_two_published_tables():
    risk = identity_risk(published(), QUASI_IDENTIFIERS)
    assert risk == {
        "quasi_identifiers": ["sex", "zip"],
        "n_records": 14,
        "n_classes": 6,
        "smallest_class": 1,
        "n_unique": 3,
        "unique_share": 3 / 14,
        "records_in_classes_smaller_than": {"2": 3, "5": 8, "10": 14},
        "share_in_classes_smaller_than": {"2": 3 / 14, "5": 8 / 14, "10": 1.0},
    }


def test_one_quasi_identifier_and_other_thresholds():
    """On sex alone: F 8 records, M 6 records; k = 6, nobody unique."""
    risk = identity_risk(published(), ["sex"], thresholds=(7, 9))
    assert risk["n_classes"] == 2 and risk["smallest_class"] == 6 and risk["n_unique"] == 0
    assert risk["records_in_classes_smaller_than"] == {"7": 6, "9": 14}


def test_a_table_made_k_anonymous_has_k_as_its_smallest_class_and_no_unique_record():
    table = pd.DataFrame({"sex": ["F"] * 3 + ["M"] * 5, "zip": ["*"] * 8})
    risk = identity_risk([table], QUASI_IDENTIFIERS)
    assert (risk["smallest_class"], risk["n_unique"], risk["records_in_classes_smaller_than"]) == (
        3,
        0,
        {"2": 0, "5": 3, "10": 8},
    )


def test_no_record_and_empty_tables():
    empty = pd.DataFrame({"row_id": pd.Series([], dtype="int64")})  # Rating's empty SAC~: no column needed
    risk = identity_risk([empty], QUASI_IDENTIFIERS)
    assert risk["n_records"] == 0 and risk["smallest_class"] is None and risk["unique_share"] == 0.0


def test_bad_arguments_are_named():
    sac, _ = published()
    with pytest.raises(ValueError, match=r"no quasi-identifier column\(s\) \['race'\]"):
        identity_risk([sac], ["sex", "race"])
    with pytest.raises(ValueError, match="at least one quasi-identifier"):
        identity_risk([sac], [])
    with pytest.raises(ValueError, match="integers >= 2"):
        identity_risk([sac], ["sex"], thresholds=(1,))
