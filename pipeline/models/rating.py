"""Plain Rating (P1 §6's baseline, SPEC §7) as a plug-in: the mixed model's ``release`` job with every record in IR,
so the whole table is bucketized by Rating and no SAC~ or attribute clusters are published.

Three gates run but do not apply (their reasons below); the strong-rule adversary usually beats 1/ℓ on a Rating
release, so the disclosure gate refuses it unless ``allow_disclosure``. No Dagster here.

References: P1 §6 (plain Rating baseline); SPEC §7.
"""

from __future__ import annotations

from pipeline.models.mixed import MixedModel

__all__ = ["RATING", "RATING_NOT_APPLICABLE"]

#: Gates of the ``release`` job that do not apply to plain Rating: gate -> the reason the manifest shows.
RATING_NOT_APPLICABLE = {
    "sac_released_is_l_diverse": "a Rating release has no SAC~ groups",
    "rule_confidence_preserved": "Rating does not promise rule confidences (SPEC §11 expected supports)",
    "no_probability_tilt": "Rating keeps strong values in its SIDs by design; the disclosure gate measures the effect",
}

#: The plain Rating plug-in.
RATING = MixedModel(
    name="rating",
    tables=("attribute_table", "id_table"),
    not_applicable=RATING_NOT_APPLICABLE,
    source="P1 §6 baseline (plain Rating); SPEC §7",
    docs="docs/rating.md",
    publishes_sac=False,
)
