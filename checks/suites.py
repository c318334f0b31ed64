"""Great Expectations suites of the release gates (no Dagster here).

Each factory returns a new ``gx.ExpectationSuite`` for one derived frame of
``pipeline.core.verification``; the gate passes iff every expectation holds.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from checks.gx_runner import great_expectations_modules

if TYPE_CHECKING:
    import great_expectations as gx

__all__ = [
    "accounting_suite",
    "confidence_suite",
    "disclosure_suite",
    "kl_accounting_suite",
    "kl_diversity_suite",
    "kl_equivalence_class_suite",
    "no_certain_cell_suite",
    "no_input_order_suite",
    "no_probability_tilt_suite",
    "posterior_suite",
    "reduced_gate_suite",
    "shard_accounting_suite",
    "shard_summary_suite",
    "sac_diversity_suite",
    "sid_diversity_per_attribute_suite",
    "sid_diversity_suite",
    "utility_suite",
]


def sac_diversity_suite(*, ell: int) -> gx.ExpectationSuite:
    """Gate 1 on ``group_diversity_summary``: every group has exactly ℓ rows and ℓ distinct
    values on every sensitive attribute; cluster tuples are a permutation of the original."""
    gx, gxe = great_expectations_modules()
    return gx.ExpectationSuite(
        name="sac_released_is_l_diverse",
        expectations=[
            gxe.ExpectColumnValuesToBeBetween(column="n_rows", min_value=ell, max_value=ell),
            gxe.ExpectColumnValuesToBeBetween(column="min_distinct_values", min_value=ell, max_value=ell),
            gxe.ExpectColumnValuesToBeInSet(column="cluster_tuples_preserved", value_set=[True]),
        ],
    )


def sid_diversity_suite(*, ell: int) -> gx.ExpectationSuite:
    """Gate 2 on ``sid_diversity_summary``: every SID has >= ℓ distinct values, no value above
    1/ℓ of it, and one record per value occurrence."""
    gx, gxe = great_expectations_modules()
    return gx.ExpectationSuite(
        name="attribute_table_is_l_diverse",
        expectations=[
            gxe.ExpectColumnValuesToBeBetween(column="n_distinct_values", min_value=ell),
            gxe.ExpectColumnValuesToBeBetween(column="max_value_share", max_value=1.0 / ell + 1e-12),
            gxe.ExpectColumnValuesToBeInSet(column="records_match_occurrences", value_set=[True]),
        ],
    )


def sid_diversity_per_attribute_suite(*, ell: int) -> gx.ExpectationSuite:
    """Gate 2 with ℓ_i per attribute (SPEC §6.7) on :func:`pipeline.core.verification.sid_diversity_per_attribute`:
    every SID of attribute i has >= ℓ_i distinct values and no value above 1/ℓ_i of it (``meets_ell_required``),
    every SID >= ``ell`` (the smallest ℓ_i) values, and one record per value occurrence."""
    gx, gxe = great_expectations_modules()
    return gx.ExpectationSuite(
        name="attribute_table_is_l_diverse",
        expectations=[
            gxe.ExpectColumnValuesToBeBetween(column="n_distinct_values", min_value=ell),
            gxe.ExpectColumnValuesToBeInSet(column="meets_ell_required", value_set=[True]),
            gxe.ExpectColumnValuesToBeInSet(column="records_match_occurrences", value_set=[True]),
        ],
    )


def disclosure_suite(*, ell: int) -> gx.ExpectationSuite:
    """Gate 3 on ``disclosure_summary``: every record's disclosure probability is <= 1/ℓ
    (exact rational comparison)."""
    gx, gxe = great_expectations_modules()
    return gx.ExpectationSuite(
        name="disclosure_within_bound",
        expectations=[
            gxe.ExpectColumnValuesToBeInSet(column="within_bound", value_set=[True]),
        ],
    )


def posterior_suite() -> gx.ExpectationSuite:
    """Posterior gate on ``PosteriorResult.bound``: no (record, sensitive attribute) whose
    learned-model posterior of the true value exceeds max(1/ℓ, population posterior) + slack."""
    gx, gxe = great_expectations_modules()
    return gx.ExpectationSuite(
        name="posterior_within_bound",
        expectations=[
            gxe.ExpectColumnValuesToBeBetween(column="n_cells_above_bound", min_value=0, max_value=0),
        ],
    )


def confidence_suite(*, exact: bool, tolerance: float) -> gx.ExpectationSuite:
    """Gate 4 on ``confidence_summary``: recovered confidences equal the raw ones exactly
    (``exact=True``: nothing was deleted or suppressed) or within ``tolerance``."""
    gx, gxe = great_expectations_modules()
    expectations = [gxe.ExpectColumnValuesToBeBetween(column="deviation", min_value=0.0, max_value=tolerance)]
    if exact:
        expectations.append(gxe.ExpectColumnValuesToBeInSet(column="exact", value_set=[True]))
    return gx.ExpectationSuite(name="rule_confidence_preserved", expectations=expectations)


def accounting_suite() -> gx.ExpectationSuite:
    """Gate 5 on ``accounting_summary``: every input record is in exactly one place."""
    gx, gxe = great_expectations_modules()
    return gx.ExpectationSuite(
        name="records_accounted_for",
        expectations=[gxe.ExpectColumnValuesToBeBetween(column="n_places", min_value=1, max_value=1)],
    )


def no_probability_tilt_suite() -> gx.ExpectationSuite:
    """Gate 6 on ``strong_values_in_sids``: no SID of an attribute other than S_max holds a
    strong value."""
    gx, gxe = great_expectations_modules()
    return gx.ExpectationSuite(
        name="no_probability_tilt",
        expectations=[gxe.ExpectColumnValuesToBeBetween(column="n_strong_values", min_value=0, max_value=0)],
    )


def no_input_order_suite() -> gx.ExpectationSuite:
    """Gate 7 on the order frame (one row per published id/SID column and per attacked attribute):
    every observed figure is within its limit (|Spearman ρ| with the input position, and the
    order-replay adversary's accuracy on attribute-table cells)."""
    gx, gxe = great_expectations_modules()
    return gx.ExpectationSuite(
        name="release_carries_no_input_order",
        expectations=[gxe.ExpectColumnValuesToBeInSet(column="within_limit", value_set=[True])],
    )


def no_certain_cell_suite() -> gx.ExpectationSuite:
    """Gate 8 on ``suppressed_cell_certainty``: no attribute's suppressed cell is disclosed with
    probability above 1/ℓ by an adversary who knows how residuals are placed."""
    gx, gxe = great_expectations_modules()
    return gx.ExpectationSuite(
        name="no_certain_attribute_table_cell",
        expectations=[gxe.ExpectColumnValuesToBeInSet(column="within_bound", value_set=[True])],
    )


def kl_equivalence_class_suite(*, k: int) -> gx.ExpectationSuite:
    """(k, ℓ) gate on ``kl_equivalence_class_summary``: every equivalence class has at least
    ``k`` rows and exactly one generalised quasi-identifier tuple, and every published label
    generalises the member's own value."""
    gx, gxe = great_expectations_modules()
    return gx.ExpectationSuite(
        name="kl_clusters_are_k_anonymous",
        expectations=[
            gxe.ExpectColumnValuesToBeBetween(column="n_rows", min_value=k),
            gxe.ExpectColumnValuesToBeBetween(column="n_quasi_identifier_tuples", min_value=1, max_value=1),
            gxe.ExpectColumnValuesToBeInSet(column="generalization_truthful", value_set=[True]),
        ],
    )


def kl_diversity_suite(*, ell: int) -> gx.ExpectationSuite:
    """(k, ℓ) gate on ``kl_diversity_summary``: every equivalence class has at least ℓ distinct
    values on every sensitive attribute (necessary) and ``Diverse ≥ ℓ`` proven (the frame's
    ``diverse_at_least_ell`` flag, computed for the same ℓ)."""
    gx, gxe = great_expectations_modules()
    return gx.ExpectationSuite(
        name="kl_clusters_are_l_diverse",
        expectations=[
            gxe.ExpectColumnValuesToBeBetween(column="min_distinct_values", min_value=ell),
            gxe.ExpectColumnValuesToBeInSet(column="diverse_at_least_ell", value_set=[True]),
        ],
    )


def kl_accounting_suite() -> gx.ExpectationSuite:
    """(k, ℓ) gate on ``kl_accounting_summary``: every input record is released exactly once or
    reported suppressed."""
    gx, gxe = great_expectations_modules()
    return gx.ExpectationSuite(
        name="kl_records_accounted_for",
        expectations=[gxe.ExpectColumnValuesToBeBetween(column="n_places", min_value=1, max_value=1)],
    )


def utility_suite() -> gx.ExpectationSuite:
    """The utility gate on ``utility_summary``: the share of deleted records and, per sensitive attribute, the share
    of suppressed cells are each within their threshold (``max_deleted_share``, ``max_suppressed_share``)."""
    gx, gxe = great_expectations_modules()
    return gx.ExpectationSuite(
        name="utility_within_thresholds",
        expectations=[
            gxe.ExpectColumnValuesToBeBetween(column="share", min_value=0.0, max_value=1.0),
            gxe.ExpectColumnValuesToBeInSet(column="within_limit", value_set=[True]),
        ],
    )


def shard_summary_suite(*, n_shards: int) -> gx.ExpectationSuite:
    """A sharded release's S-row summary frame (:func:`pipeline.engines.summaries.summary_frame`): one row per shard
    0..S-1, each shard's counts non-negative (the frame every sharded gate reads)."""
    gx, gxe = great_expectations_modules()
    return gx.ExpectationSuite(
        name="shard_summary",
        expectations=[
            gxe.ExpectTableRowCountToEqual(value=n_shards),
            gxe.ExpectColumnValuesToBeUnique(column="shard"),
            gxe.ExpectColumnValuesToBeBetween(column="shard", min_value=0, max_value=max(n_shards - 1, 0)),
            gxe.ExpectColumnValuesToBeBetween(column="n_records", min_value=0),
            gxe.ExpectColumnValuesToBeBetween(column="n_deleted", min_value=0),
        ],
    )


def shard_accounting_suite() -> gx.ExpectationSuite:
    """Gate 5 per shard on :func:`pipeline.engines.summaries.accounting_frame`: every record of every shard is in
    exactly one of SAC~, the attribute table or the deleted list."""
    gx, gxe = great_expectations_modules()
    return gx.ExpectationSuite(
        name="records_accounted_for",
        expectations=[gxe.ExpectColumnValuesToBeInSet(column="accounted", value_set=[True])],
    )


def reduced_gate_suite(name: str) -> gx.ExpectationSuite:
    """A gate of a sharded release on its reduced figures (one row: the sums and maxima of the shards' partials,
    ``pipeline.core.sharding.reduce_gates``): the reduce's verdict ``passed`` holds."""
    gx, gxe = great_expectations_modules()
    return gx.ExpectationSuite(
        name=name,
        expectations=[
            gxe.ExpectTableRowCountToEqual(value=1),
            gxe.ExpectColumnValuesToBeInSet(column="passed", value_set=[True]),
        ],
    )
