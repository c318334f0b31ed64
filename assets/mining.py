"""Mining: strong 1-to-1 rules between sensitive attributes (mlxtend Apriori)."""


import dagster as dg
import pandas as pd

from assets.keys import KINDS, PRIVATE, inputs
from pipeline.core.rules import choose_backend, mine_strong_rules, strong_values
from pipeline.resources import ReleaseSettings


@dg.asset(
    key_prefix=PRIVATE,
    ins=inputs(private=["raw_records"]),
    group_name="mining",
    kinds=KINDS,
)
def strong_rules(context: dg.AssetExecutionContext, settings: ReleaseSettings, raw_records: pd.DataFrame) -> pd.DataFrame:
    """PRIVATE: every strong rule (S_i = a) => (S_j = b), Apriori with max_len 2, min_support 1 record, confidence >= min_confidence."""
    backend = choose_backend(raw_records, settings.sensitive_attributes)
    rules = mine_strong_rules(raw_records, settings.sensitive_attributes, min_confidence=settings.min_confidence, backend=backend)
    values = strong_values(rules, settings.sensitive_attributes)
    context.add_output_metadata(
        {
            "n_strong_rules": len(rules),
            "n_strong_values": sum(len(v) for v in values.values()),
            "min_confidence": settings.min_confidence,
        }
    )
    return rules
