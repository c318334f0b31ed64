"""Plain Rating (P1 §6's baseline, SPEC §7) as a plug-in with its own job, ``rating_release``: every record is
bucketized by Rating (inside quasi-identifier strata with the ``qi_aware`` grouping), no SAC~ and no attribute
clusters are published.

Its stage tables come from ``assets/rating_model.py`` (the records Rating bucketizes, after the eligibility
deletions, and their SIDs); the release tables are assembled by the same core function as the mixed model's, with
an empty SAC~, so a Rating release is what the ``release`` job published for ``model: rating`` before Rating had a
job of its own. Its candidate tables are kept as ``candidate/rating_<table>`` (``table_assets``): the mixed model's
gates run on them unchanged (``checks.gates.gates_of``).

Three gates do not apply (their reasons below); the strong-rule adversary usually beats 1/ℓ on a Rating release, so
the disclosure gate refuses it unless ``allow_disclosure``. No Dagster here.

References: P1 §6 (plain Rating baseline); SPEC §7.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from pipeline.models.base import Frames
from pipeline.models.mixed import MixedModel, MixedParameters

if TYPE_CHECKING:
    from pipeline.core.mixed_model import ReleaseTables

__all__ = ["RATING", "RATING_NOT_APPLICABLE", "RATING_TABLE_ASSETS", "RatingModel"]

#: Gates of the mixed model that do not apply to plain Rating: gate -> the reason the manifest shows.
RATING_NOT_APPLICABLE = {
    "sac_released_is_l_diverse": "a Rating release has no SAC~ groups",
    "rule_confidence_preserved": "Rating does not promise rule confidences (SPEC §11 expected supports)",
    "no_probability_tilt": "Rating keeps strong values in its SIDs by design; the disclosure gate measures the effect",
}

#: Where the ``rating_release`` job keeps the tables the build, the publish step and the gates read.
RATING_TABLE_ASSETS = {
    "sac_released": "rating_sac_released",
    "attribute_table": "rating_attribute_table",
    "id_table": "rating_id_table",
    "attribute_clusters": "rating_attribute_clusters",
    "deleted_records": "rating_deleted_records",
}


@dataclass(frozen=True)
class RatingModel(MixedModel):
    """Plain Rating on the whole table: the mixed model's contract, gates, manifest and report without SAC~."""

    name: str = "rating"
    label: str = "rating (plain Rating baseline of P1)"
    compared_with: str | None = "mixed"
    baseline: bool = True
    job: str = "rating_release"
    tables: tuple[str, ...] = ("attribute_table", "id_table")
    candidate_inputs: tuple[str, ...] = ("raw_records", "rating_records", "rating_attribute_sids", "rating_id_table")
    table_assets: Mapping[str, str] = dataclasses.field(default_factory=lambda: dict(RATING_TABLE_ASSETS))
    stage_groups: tuple[str, ...] = ("ingest", "mining", "rating_model")
    candidate_asset: str = "rating_release_candidate"
    row_map_asset: str = "rating_release_row_map"
    publish_asset: str = "rating_release"
    publish_step: str = "publish_rating_release"
    not_applicable: Mapping[str, str] = dataclasses.field(default_factory=lambda: dict(RATING_NOT_APPLICABLE))
    source: str = "P1 §6 baseline (plain Rating); SPEC §7"
    docs: str = "docs/rating.md"
    publishes_sac: bool = False

    def release_tables(self, inputs: Frames, parameters: MixedParameters, *, secret: bytes | None) -> ReleaseTables:
        """The attribute table and ID table of every record Rating bucketizes, with an empty SAC~
        (:func:`pipeline.core.mixed_model.assemble_release_tables`; no generalization of groups, the stratum labels
        of ``rating_records`` as published quasi-identifiers).

        Parameters
        ----------
        inputs
            ``raw_records``; ``rating_records`` (``row_id`` per record Rating bucketizes, in table order, plus
            ``stratum`` and the quasi-identifier labels when stratified); ``rating_attribute_sids`` and
            ``rating_id_table`` (:func:`pipeline.core.rating.rating_tables`), the tables of ``assets/rating_model.py``.
        secret
            The home secret, or None with ``randomness: spec-reference``.

        Raises
        ------
        ValueError
            Inconsistent stage tables (see :func:`pipeline.core.mixed_model.assemble_release_tables`).
        """
        from pipeline.core.mixed_model import assemble_release_tables

        records, rating_records = inputs["raw_records"], inputs["rating_records"]
        columns = ["row_id", *parameters.quasi_identifiers, *parameters.sensitive_attributes]
        no_sac = records[columns].iloc[0:0].assign(group_id=np.zeros(0, dtype=np.int64))
        return assemble_release_tables(
            records,
            parameters.quasi_identifiers,
            parameters.sensitive_attributes,
            sac_permuted=no_sac,
            attribute_sids=inputs["rating_attribute_sids"].astype({a: "Int32" for a in parameters.sensitive_attributes}),
            id_table=inputs["rating_id_table"],
            clusters=[],
            secret=secret,
            generalize=False,
            attribute_table_labels=rating_records if "stratum" in rating_records.columns else None,
        )


#: The plain Rating plug-in.
RATING = RatingModel()
