"""Plain Rating stages (P1 §6 baseline, SPEC §7; the ``rating_release`` job): which records Rating bucketizes, and
their SIDs. No SAC/IR split, no SAC~ groups: every record goes to Rating."""

import time

import dagster as dg
import numpy as np
import pandas as pd

from assets.mixed_model import in_keyed_order, rating_records_of, release_secret, sid_tables
from pipeline.asset_keys import KINDS, PRIVATE, RATING_MODEL, inputs, model_of_run, table_metadata
from pipeline.failures import with_structured_failures
from pipeline.models.rating import RATING
from pipeline.resources import ReleaseSettings, ReleaseStore


@dg.multi_asset(
    outs={
        "rating_records": dg.AssetOut(
            key_prefix=PRIVATE,
            kinds=KINDS,
            description="PRIVATE: the records plain Rating bucketizes (every record but those deleted for "
            "eligibility), in the keyed table order; with the qi_aware grouping also each record's quasi-identifier "
            "stratum and the stratum's published (generalized) quasi-identifiers.",
        ),
        "rating_deleted_records": dg.AssetOut(
            key_prefix=PRIVATE,
            kinds=KINDS,
            description="PRIVATE: records plain Rating does not publish: deleted so that no value exceeds 1/ℓ of "
            "the attribute table (reason eligibility, residual_policy 'delete').",
        ),
    },
    ins=inputs(private=["raw_records"]),
    group_name=RATING_MODEL,
)
@with_structured_failures
def rating_records(context: dg.AssetExecutionContext, settings: ReleaseSettings, store: ReleaseStore, raw_records: pd.DataFrame):
    """Every record goes to Rating (SPEC §7), in the keyed content order of the records (home secret); with
    residual_policy 'delete' records are deleted until every value is ℓ-eligible, inside quasi-identifier strata with
    the qi_aware grouping (:func:`pipeline.core.mixed_model.records_for_rating`)."""
    started = time.monotonic()
    model_of_run(RATING.job, settings)  # a run of this job with another model's setting fails here, by name
    secret = release_secret(settings, store)
    (row_ids,) = in_keyed_order(raw_records, [np.sort(raw_records["row_id"].to_numpy(np.int64))], settings, secret)
    records, eligibility, strata_metadata = rating_records_of(raw_records, row_ids, settings, secret)
    deleted = pd.DataFrame(
        {
            "row_id": np.asarray(eligibility, dtype=np.int64),
            # the categories of the mixed model's deleted_records (one contract for both)
            "reason": pd.Categorical(["eligibility"] * len(eligibility), categories=["no_partners", "eligibility"]),
        }
    )
    context.add_output_metadata(
        {
            "n_deleted_for_eligibility": len(eligibility),
            **strata_metadata,
            **table_metadata(records, rows_in=len(raw_records), started=started),
        },
        output_name="rating_records",
    )
    context.add_output_metadata(
        {"n_deleted": len(deleted), "n_deleted_for_eligibility": len(eligibility), **table_metadata(deleted)},
        output_name="rating_deleted_records",
    )
    return records, deleted


@dg.multi_asset(
    outs={
        "rating_id_table": dg.AssetOut(
            key_prefix=PRIVATE,
            kinds=KINDS,
            description="PRIVATE candidate: SIDs of the records plain Rating bucketizes, per sensitive attribute "
            "(improved Rating, Algorithms 13 and 19).",
        ),
        "rating_attribute_sids": dg.AssetOut(
            key_prefix=PRIVATE,
            kinds=KINDS,
            description="PRIVATE candidate: each such record's SID per sensitive attribute (NULL = suppressed cell).",
        ),
    },
    ins=inputs(private=["raw_records", "rating_records"]),
    group_name=RATING_MODEL,
)
def rating_sids(
    context: dg.AssetExecutionContext,
    settings: ReleaseSettings,
    store: ReleaseStore,
    raw_records: pd.DataFrame,
    rating_records: pd.DataFrame,
):
    """SID creation on the whole table (P1 §6 baseline): dangerous buckets, Algorithm 13 reordering, residuals and
    suppression; every attribute in its own keyed content order, keyed random SID numbers (home secret)."""
    return sid_tables(context, settings, store, raw_records, rating_records, outputs=("rating_id_table", "rating_attribute_sids"))
