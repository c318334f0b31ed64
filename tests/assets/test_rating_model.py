"""Plain Rating's own stages (issue 13: Rating gets its own asset chain), called directly on tiny frames.

``assets/rating_model.py`` puts every record in Rating (no SAC~), deletes records until every value is ℓ-eligible
(``residual_policy: delete``) and gives the rest SIDs; a run of its job with another model's setting fails at once,
naming the job to run."""

from __future__ import annotations

import dagster as dg
import numpy as np
import pandas as pd
import pytest

from assets.rating_model import rating_records, rating_sids
from pipeline.resources import ReleaseSettings, ReleaseStore


def _records() -> pd.DataFrame:
    """12 records, two sensitive attributes; value 'x' of ``diagnosis`` is held by 8 of them, more than 1/ℓ = 1/2 of
    the table, so some of its records must be deleted before Rating."""
    rng = np.random.default_rng(7)
    frame = pd.DataFrame(
        {
            "row_id": np.arange(1, 13, dtype=np.int64),
            "sex": rng.choice(["F", "M"], 12),
            "diagnosis": ["x"] * 8 + ["y", "z", "w", "v"],
            "drug": rng.choice(["a", "b", "c"], 12),
        }
    )
    return frame.astype({c: "category" for c in ("sex", "diagnosis", "drug")})


def _settings(**overrides) -> ReleaseSettings:
    return ReleaseSettings(
        **{
            "model": "rating",
            "quasi_identifiers": ["sex"],
            "sensitive_attributes": ["diagnosis", "drug"],
            "ell": 2,
            "grouping": "p1",
            "residual_policy": "delete",
            **overrides,
        }
    )


def test_every_record_is_bucketized_by_rating_or_deleted_for_eligibility(tmp_path):
    records = _records()
    kept, deleted = rating_records(
        context=dg.build_asset_context(), settings=_settings(), store=ReleaseStore(home=str(tmp_path)), raw_records=records
    )
    assert sorted([*kept["row_id"], *deleted["row_id"]]) == list(records["row_id"])  # nobody lost, nobody twice
    assert set(deleted["reason"]) <= {"eligibility"} and len(deleted) > 0  # 8 of 12 'x' exceed 1/ℓ: some deleted
    shares = records.set_index("row_id").loc[kept["row_id"], "diagnosis"].value_counts(normalize=True)
    assert shares.max() <= 1 / 2  # every value ℓ-eligible in what Rating bucketizes


def test_the_sids_of_the_kept_records_are_l_diverse(tmp_path):
    records, store = _records(), ReleaseStore(home=str(tmp_path))
    kept, _ = rating_records(context=dg.build_asset_context(), settings=_settings(), store=store, raw_records=records)
    id_table, attribute_sids = rating_sids(
        context=dg.build_asset_context(), settings=_settings(), store=store, raw_records=records, rating_records=kept
    )
    assert sorted(attribute_sids["row_id"]) == sorted(kept["row_id"])
    distinct = id_table.groupby(["attribute", "sid"], observed=True)["value"].nunique()
    assert distinct.min() >= 2


def test_a_run_of_the_rating_job_with_the_mixed_setting_fails_naming_its_job(tmp_path):
    with pytest.raises(dg.Failure, match="run the `release` job"):
        rating_records(
            context=dg.build_asset_context(),
            settings=_settings(model="mixed"),
            store=ReleaseStore(home=str(tmp_path)),
            raw_records=_records(),
        )
