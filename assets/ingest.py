"""Ingest: read the input table and apply the missing-value policy."""

import time

import dagster as dg
import pandas as pd

from pipeline.asset_keys import INGEST, KINDS, PRIVATE, table_metadata
from pipeline.failures import structured_failures
from pipeline.io.loading import load_records
from pipeline.core.keyed import input_hmac
from pipeline.resources import ReleaseSettings, ReleaseStore


@dg.multi_asset(
    outs={
        "raw_records": dg.AssetOut(
            key_prefix=PRIVATE,
            description="PRIVATE: the input records after the missing-value policy (quasi-identifiers and sensitive attributes, internal row ids).",
            kinds=KINDS,
        ),
        "input_summary": dg.AssetOut(
            key_prefix=PRIVATE,
            description="One row of input accounting: records read, dropped for a missing sensitive value, kept with a missing quasi-identifier, file hash.",
            kinds=KINDS,
        ),
    },
    group_name=INGEST,
)
def raw_records(context: dg.AssetExecutionContext, settings: ReleaseSettings, store: ReleaseStore):
    """Read the configured CSV/Parquet file through DuckDB and apply the missing-value policy."""
    started = time.monotonic()
    with structured_failures(file=settings.input_path):
        loaded = load_records(
            settings.input_path,
            **settings.reading_options(),
            ell=settings.ell,
        )
    summary = pd.DataFrame(
        [
            {
                "n_input": loaded.n_input,
                "n_dropped_missing": loaded.n_dropped_missing,
                "n_missing_quasi_identifier": loaded.n_missing_quasi_identifier,
                "input_sha256": loaded.input_sha256,  # private table only
                "input_hmac": input_hmac(store.home_secret(), loaded.input_sha256),
            }
        ]
    )
    figures = {
        "n_input": loaded.n_input,
        "n_dropped_missing": loaded.n_dropped_missing,
        "n_missing_quasi_identifier": loaded.n_missing_quasi_identifier,
        "n_records": len(loaded.records),
        # look-alike spellings merged (counts only; the spellings are never shown)
        "n_look_alike_values_merged": sum(c["n_values_merged"] for c in loaded.look_alike_values.values()),
        "n_records_respelled": sum(c["n_records_respelled"] for c in loaded.look_alike_values.values()),
        **{f"n_look_alike_values_merged_{column}": c["n_values_merged"] for column, c in loaded.look_alike_values.items()},
        **table_metadata(loaded.records, rows_in=loaded.n_input, started=started),
    }
    if loaded.look_alike_values:
        context.log.warning(
            "look-alike spellings merged before counting diversity (case, Unicode compatibility forms, invisible "
            "characters): "
            + ", ".join(
                f"{column}: {c['n_values_merged']} spelling(s), {c['n_records_respelled']} record(s)"
                for column, c in loaded.look_alike_values.items()
            )
        )
    context.add_output_metadata(figures, output_name="raw_records")
    context.add_output_metadata(
        {
            "input_hmac": str(summary["input_hmac"].iloc[0]),
            "n_input": loaded.n_input,
            "n_dropped_missing": loaded.n_dropped_missing,
        },
        output_name="input_summary",
    )
    return loaded.records, summary
