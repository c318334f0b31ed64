"""Look-alike values are one value (issue 12): normalisation keys and the merge, by hand."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from pipeline.core.values import merge_look_alike_values, value_key


@pytest.mark.parametrize(
    ("left", "right"),
    [
        ("HIV", "hiv"),  # case
        ("HIV", "HIV\u200b"),  # zero-width space (Cf)
        ("HIV", "\u202eHIV"),  # right-to-left override (Cf)
        ("HIV", "\uff28\uff29\uff36"),  # full-width letters (NFKC)
        ("office", "o\ufb03ce"),  # ffi ligature (NFKC)
        ("été", "e\u0301te\u0301"),  # combining accents (NFKC composes)
        ("Straße", "STRASSE"),  # case folding of ß
        (" HIV ", "HIV"),
    ],
)
def test_look_alikes_share_a_key(left, right):
    assert value_key(left) == value_key(right)


def test_different_values_keep_different_keys():
    assert len({value_key(v) for v in ["HIV", "VIH", "7", "7.0", "seven", "Zürich", "Zurich"]}) == 7


def test_merge_publishes_the_most_frequent_spelling():
    categories = np.asarray(["HIV", "HIV\u200b", "TB", "\u202eHIV", "hiv"], dtype=object)
    # HIV twice, HIV+ZWSP once, TB three times, RLO+HIV once, hiv three times, one missing
    codes = np.asarray([0, 0, 1, 2, 2, 2, 3, 4, 4, 4, -1], dtype=np.int64)
    new_codes, new_categories, counts = merge_look_alike_values(codes, categories)
    assert list(new_categories) == ["TB", "hiv"]  # 'hiv' (3 records) is the canonical spelling
    assert list(new_categories[new_codes[new_codes >= 0]]) == ["hiv"] * 3 + ["TB"] * 3 + ["hiv"] * 4
    assert new_codes[-1] == -1
    assert counts == {"n_values_merged": 3, "n_records_respelled": 4}


def test_ties_go_to_the_first_spelling_in_code_point_order_and_singletons_stay_byte_for_byte():
    categories = np.asarray(["hiv", "HIV", "e\u0301te\u0301"], dtype=object)
    codes = np.asarray([0, 1, 2], dtype=np.int64)
    new_codes, new_categories, counts = merge_look_alike_values(codes, categories)
    assert list(new_categories[new_codes]) == ["HIV", "HIV", "e\u0301te\u0301"]
    assert counts == {"n_values_merged": 1, "n_records_respelled": 1}


def test_hiv_table_is_one_value_and_cannot_be_three_diverse(tmp_path):
    """The red team's table: every diagnosis is HIV under four spellings; byte for byte it looked 4-diverse."""
    from pipeline.io.loading import InfeasibleInput, load_records

    spellings = ["HIV", "hiv", "HIV\u200b", "\u202eHIV"]
    frame = pd.DataFrame(
        {
            "zip": [f"z{i % 3}" for i in range(24)],
            "diagnosis": [spellings[i % 4] for i in range(24)],
            "drug": [f"d{i % 6}" for i in range(24)],
        }
    )
    path = tmp_path / "hiv.csv"
    frame.to_csv(path, index=False)
    loaded = load_records(path, quasi_identifiers=["zip"], sensitive_attributes=["diagnosis", "drug"])
    assert loaded.records["diagnosis"].nunique() == 1
    assert loaded.look_alike_values["diagnosis"] == {"n_values_merged": 3, "n_records_respelled": 18}
    with pytest.raises(InfeasibleInput):
        load_records(path, quasi_identifiers=["zip"], sensitive_attributes=["diagnosis", "drug"], ell=3)
