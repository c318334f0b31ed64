"""Mining: strong 1-to-1 rules between sensitive attributes (mlxtend FP-growth, or DuckDB on large tables)."""

import time

import dagster as dg
import pandas as pd

from pipeline.asset_keys import KINDS, MINING, PRIVATE, inputs, table_metadata
from pipeline.core.rules import mine_strong_rules, resolve_mining_backend, strong_values
from pipeline.resources import ReleaseSettings


@dg.asset(
    key_prefix=PRIVATE,
    ins=inputs(private=["raw_records"]),
    group_name=MINING,
    kinds=KINDS,
    description="PRIVATE: the strong rules (S_i = a) => (S_j = b) between sensitive attributes: confidence >= min_confidence (frequent item pairs by mlxtend FP-growth, or DuckDB on large tables).",
)
def strong_rules(context: dg.AssetExecutionContext, settings: ReleaseSettings, raw_records: pd.DataFrame) -> pd.DataFrame:
    """PRIVATE: every strong rule (S_i = a) => (S_j = b), frequent item pairs (max_len 2; back end: settings.mining_backend), support >= min_support records (default max(ℓ, 5)), confidence >= min_confidence."""
    started = time.monotonic()
    backend = resolve_mining_backend(
        settings.mining_backend,
        len(raw_records),
        duckdb_threshold=settings.duckdb_mining_threshold,
        n_items=sum(int(raw_records[a].nunique()) for a in settings.sensitive_attributes),
    )
    rules = mine_strong_rules(
        raw_records,
        settings.sensitive_attributes,
        min_confidence=settings.min_confidence,
        backend=backend,
        min_support=settings.effective_min_support(),
    )
    values = strong_values(rules, settings.sensitive_attributes)
    context.add_output_metadata(
        {
            "n_strong_rules": len(rules),
            "n_strong_values": sum(len(v) for v in values.values()),
            "min_confidence": settings.min_confidence,
            "min_support": settings.effective_min_support(),
            "mining_backend": backend,
            **table_metadata(rules, rows_in=len(raw_records), started=started),
        }
    )
    return rules
