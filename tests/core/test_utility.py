"""The utility figures of issue 15 (``pipeline.core.verification``): records deleted out of the eligible ones and,
per sensitive attribute, suppressed cells out of the attribute's cells in the release; the expected figures are
counted by hand on a small frame."""

from __future__ import annotations

import pandas as pd
import pytest

from pipeline.core.verification import suppressed_cells_per_attribute, utility_figures, utility_summary

#: A small attribute table (SID numbers, NA = suppressed): education 2 of 5 cells suppressed, occupation 1, age none.
ATTRIBUTE_TABLE = pd.DataFrame(
    {
        "row_id": [1, 2, 3, 4, 5],
        "education": pd.array([1, None, 2, None, 1], dtype="Int32"),
        "occupation": pd.array([None, 1, 1, 2, 2], dtype="Int32"),
        "age": pd.array([1, 1, 2, 2, 3], dtype="Int32"),
    }
)
SENSITIVE = ["education", "occupation", "age"]


def test_suppressed_cells_per_attribute_counted_by_hand():
    # 5 attribute-table rows + 3 SAC~ rows: every attribute has 8 cells in the release
    suppressed, cells = suppressed_cells_per_attribute(ATTRIBUTE_TABLE, SENSITIVE, n_other_released=3)
    assert suppressed == {"education": 2, "occupation": 1, "age": 0}
    assert cells == {"education": 8, "occupation": 8, "age": 8}


def test_utility_figures_and_summary_against_hand_computed_shares():
    suppressed, cells = suppressed_cells_per_attribute(ATTRIBUTE_TABLE, SENSITIVE, n_other_released=3)
    # 12 records read, 2 dropped for a missing value: 10 eligible; 8 published, so 2 deleted
    figures = utility_figures(
        records_eligible=10,
        records_deleted=2,
        suppressed_cells=suppressed,
        attribute_cells=cells,
        max_deleted_share=0.25,
        max_suppressed_share=0.2,
    )
    assert figures["deleted_share"] == pytest.approx(0.2)
    assert figures["suppressed_share"] == pytest.approx({"education": 0.25, "occupation": 0.125, "age": 0.0})
    summary = utility_summary(figures)
    assert list(summary["measure"]) == ["deleted_records", "suppressed_cells", "suppressed_cells", "suppressed_cells"]
    assert list(summary["attribute"]) == ["", "education", "occupation", "age"]
    assert list(summary["count"]) == [2, 2, 1, 0]
    assert list(summary["total"]) == [10, 8, 8, 8]
    # 20 % deleted <= 25 %; education 25 % > 20 %: only education is above its threshold
    assert list(summary["within_limit"]) == [True, False, True, True]


def test_empty_release_has_zero_shares():
    figures = utility_figures(
        records_eligible=0,
        records_deleted=0,
        suppressed_cells={"education": 0},
        attribute_cells={"education": 0},
        max_deleted_share=0.1,
        max_suppressed_share=0.1,
    )
    assert figures["deleted_share"] == 0.0 and figures["suppressed_share"] == {"education": 0.0}
    assert utility_summary(figures)["within_limit"].all()
