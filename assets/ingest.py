"""Ingest: read the input table and apply the missing-value policy."""

import json
import time

import dagster as dg
import pandas as pd

from pipeline.asset_keys import INGEST, KINDS, PRIVATE, table_metadata
from pipeline.failures import structured_failures
from pipeline.io.loading import (
    InputError,
    input_cleaning_counts,
    input_cleaning_metadata,
    load_records,
    look_alike_warning,
)
from pipeline.core.keyed import input_hmac
from pipeline.resources import ReleaseSettings, ReleaseStore
from pipeline.run_events import INPUT_SHA256_TAG


def check_inbox_input(expected_sha256: str | None, input_sha256: str, *, input_path: str) -> None:
    """Refuse an input whose content is not the one the inbox sensor hashed when it started the run (the run's tag
    ``msa_release/input_sha256``, ``expected_sha256``; None for a run not started by the inbox: nothing to check). Used
    by the step that reads the input of every publishing job (``raw_records``, ``sharded_input``).

    Raises
    ------
    pipeline.io.loading.InputError
        (exit status 2) naming the file, never its content: the file changed or was replaced between the tick and the
        run; its current content gets a run of its own at the next tick.
    """
    if expected_sha256 is not None and input_sha256 != expected_sha256:
        raise InputError(
            f"{input_path}: the file is not the one the inbox sensor hashed when it started this run (its "
            "content changed or it was replaced since); nothing is published from it: the current content gets a "
            "run of its own at the next tick (write inbox files as <name>.part and rename them when complete)"
        )


@dg.multi_asset(
    outs={
        "raw_records": dg.AssetOut(
            key_prefix=PRIVATE,
            description="PRIVATE: the input records after the missing-value policy (quasi-identifiers and sensitive attributes, internal row ids).",
            kinds=KINDS,
        ),
        "input_summary": dg.AssetOut(
            key_prefix=PRIVATE,
            description="One row of input accounting: records read, dropped for a missing sensitive value (and per attribute), kept with a missing quasi-identifier, file hash.",
            kinds=KINDS,
        ),
    },
    group_name=INGEST,
)
def raw_records(context: dg.AssetExecutionContext, settings: ReleaseSettings, store: ReleaseStore):
    """Read the configured CSV/Parquet file through DuckDB and apply the missing-value policy.

    A run started by the inbox sensor carries the SHA-256 its tick computed (tag ``msa_release/input_sha256``); a file
    whose content read here differs (replaced between the tick and the run) fails the step: the new content has a run
    of its own."""
    started = time.monotonic()
    expected_sha256 = context.run.tags.get(INPUT_SHA256_TAG)  # an inbox run's
    with structured_failures(file=settings.input_path):
        loaded = load_records(
            settings.input_path,
            **settings.reading_options(),
            ell=settings.feasibility_ell(),
        )
        check_inbox_input(expected_sha256, loaded.input_sha256, input_path=settings.input_path)
    summary = pd.DataFrame(
        [
            {
                "n_input": loaded.n_input,
                "n_dropped_missing": loaded.n_dropped_missing,
                "n_missing_quasi_identifier": loaded.n_missing_quasi_identifier,
                "input_sha256": loaded.input_sha256,  # private table only
                "input_hmac": input_hmac(store.home_secret(), loaded.input_sha256),
                # JSON {sensitive attribute: records dropped that miss it} (counts only; the manifest's copy)
                "dropped_missing_by_attribute": json.dumps(loaded.dropped_missing_by_attribute),
                **input_cleaning_counts(loaded.missing_quasi_identifier_by_column, loaded.look_alike_values),
            }
        ]
    )
    figures = {
        "n_input": loaded.n_input,
        "n_dropped_missing": loaded.n_dropped_missing,
        "n_missing_quasi_identifier": loaded.n_missing_quasi_identifier,
        **input_cleaning_metadata(
            loaded.dropped_missing_by_attribute, loaded.missing_quasi_identifier_by_column, loaded.look_alike_values
        ),
        "n_records": len(loaded.records),
        **table_metadata(loaded.records, rows_in=loaded.n_input, started=started),
    }
    warning = look_alike_warning(loaded.look_alike_values)
    if warning:
        context.log.warning(warning)
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
