"""The pieces of the out-of-core audit that need no release (pipeline/release/sharded_audit.py): the identity risk
counted by DuckDB over part files must equal :func:`pipeline.core.identity_risk.identity_risk` of the pooled frames,
and the class-size histogram must give identity_risk's figures."""

from __future__ import annotations

import pandas as pd
import pytest

from pipeline.core.identity_risk import identity_risk, identity_risk_from_class_sizes
from pipeline.release.sharded_audit import sharded_identity_risk

QUASI_IDENTIFIERS = ["sex", "zip"]


def _part(rows: list[tuple[str | None, str | None]]) -> pd.DataFrame:
    return pd.DataFrame(rows, columns=QUASI_IDENTIFIERS)


def test_the_identity_risk_over_part_files_equals_that_of_the_pooled_tables(tmp_path):
    # a class crosses parts and tables ("F", "1" in three parts), a missing value is one value, a unique record
    parts = {
        "sac_released": [_part([("F", "1"), ("M", "2"), ("M", "2")]), _part([("F", "1"), (None, "3")])],
        "attribute_table": [_part([("F", "1"), ("M", None)]), _part([(None, "3"), ("M", None), ("X", "9")])],
    }
    files: dict[str, list[str]] = {}
    for table, frames in parts.items():
        for position, frame in enumerate(frames):
            path = tmp_path / table / f"part-{position:05d}.parquet"
            path.parent.mkdir(exist_ok=True)
            frame.to_parquet(path)
            files.setdefault(table, []).append(str(path))
    expected = identity_risk([pd.concat(f, ignore_index=True) for f in parts.values()], QUASI_IDENTIFIERS)
    assert sharded_identity_risk(files, QUASI_IDENTIFIERS) == expected
    # hand-counted: classes F1 (3), M2 (2), nan3 (2), Mnan (2), X9 (1)
    assert expected["n_classes"] == 5 and expected["n_unique"] == 1 and expected["smallest_class"] == 1
    assert expected["records_in_classes_smaller_than"] == {"2": 1, "5": 10, "10": 10}


def test_figures_from_the_class_size_histogram():
    risk = identity_risk_from_class_sizes([1, 3, 12], [2, 1, 1], QUASI_IDENTIFIERS)
    assert risk["n_records"] == 17 and risk["n_classes"] == 4 and risk["n_unique"] == 2
    assert risk["smallest_class"] == 1
    assert risk["records_in_classes_smaller_than"] == {"2": 2, "5": 5, "10": 5}
    assert risk["unique_share"] == pytest.approx(2 / 17)
    empty = identity_risk_from_class_sizes([], [], QUASI_IDENTIFIERS)
    assert empty["n_records"] == 0 and empty["smallest_class"] is None and empty["unique_share"] == 0.0
    with pytest.raises(ValueError, match="same length"):
        identity_risk_from_class_sizes([1, 2], [1], QUASI_IDENTIFIERS)
