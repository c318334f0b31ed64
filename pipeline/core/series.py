"""Release series: which earlier releases a new one would compose with (issue 12, "release series").

Two releases of overlapping records made differently can be intersected: the candidate values of a
record in one release, intersected with its candidates in the other, pin values that neither pins
alone (Ganta, Kasiviswanathan & Smith, KDD 2008). The red team measured it on Adult: ℓ = 2 after
ℓ = 3 pins the whole sensitive tuple of 48.7 % of the records; the mixed release plus a Rating
release of the same input, 43.3 %; a second release of the same 3,000 records in reversed row
order pinned a value for 97 of 100 targets, and one with 10 appended records for 22 of 146. Two
seeds of one configuration leak nothing (the permutations are independent and uniform), and
since a release made with the home secret does not depend on the input row order, the same
records with the same configuration give the same release.

The rule implemented here: a new release may share records with an earlier release of the same
home only if it is the *same* release, i.e. the same configuration (:data:`CONFIGURATION_KEYS`;
the seed excluded) and the same multiset of records. Anything else is a recomposition, refused
unless the custodian allows it explicitly. Records are compared by keyed fingerprints (home
secret) of their values in the release's columns, never stored in clear; a release made from the
same input file (the same content, :data:`INPUT_KEY`) with another configuration is a
recomposition too, whatever its columns (its fingerprints, over other columns or another column
order, match none of the earlier release's).

The safe way to publish updates of a growing table (keep earlier groups fixed and group only the
new records, in the spirit of m-invariance, Xiao & Tao, SIGMOD 2007) is documented in
``docs/series.md`` and not implemented yet.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from pipeline.core.keyed import keyed_record_hashes

__all__ = [
    "CONFIGURATION_KEYS",
    "INPUT_KEY",
    "REGISTRY_PURPOSE",
    "Recomposition",
    "changed_settings",
    "find_recompositions",
    "record_fingerprints",
    "recomposition_of",
    "same_input_file",
]

#: Settings that change what a release publishes about a record. The seed is not one of them: two
#: seeds permute the same groups independently, which an intersection cannot exploit.
CONFIGURATION_KEYS = (
    "model",
    "ell",
    "min_confidence",
    "min_support",
    "grouping",
    "stratum_deletion_budget",
    "residual_policy",
    "randomness",
    "quasi_identifiers",
    "sensitive_attributes",
    "k",
    "kl_method",
    "max_block_size",
    "generalization_weights",
    # a sharded release (issue 17) with S > 1 groups each shard on its own: another release than the in-memory one of
    # the same records, and than one with another assignment of the records to the shards (the shard key hashes the
    # input row id, so the same records in another order land in other shards). Both keys are absent (None) for the
    # in-memory job and for S = 1, which reproduces the in-memory release byte for byte
    "n_shards",
    "shard_assignment",
    # the generalization hierarchies (quasi-identifier -> SHA-256 of its file, None without one): they decide the
    # qi_aware strata, hence the groups, SIDs and deletions, and the (k, ℓ) classes (red team, session 38: two releases
    # of Adult with and without two hierarchy files were published from one home, their intersection pinning age for
    # 0.84 % of the records)
    "hierarchies",
)

#: Keys added to :data:`CONFIGURATION_KEYS` after registry entries were first written: an earlier entry without one
#: does not say what it was, so it is compared as equal (not a change) rather than as None.
KEYS_ADDED_LATER = frozenset({"hierarchies"})


#: The configuration entry that names the release's input file by content: its keyed digest (``input_hmac`` of the
#: manifest; the home secret keys it). Not a setting (not in :data:`CONFIGURATION_KEYS`): two releases of the same file
#: are the same release only with the same settings and records, and another release of it is a recomposition even
#: when their record fingerprints, over other columns, share nothing. Registry entries written before it was recorded
#: lack it (the registry then reads it from the release's manifest).
INPUT_KEY = "input_hmac"

#: the purpose of the registry's keyed record hashes (:func:`pipeline.core.keyed.derive_hash_key`): the same key in
#: every job and engine, so that a record has the same fingerprint in all of them
REGISTRY_PURPOSE = "release-registry"


def record_fingerprints(records: pd.DataFrame, content_columns: Sequence[str], secret: bytes) -> np.ndarray:
    """Keyed 64-bit fingerprints of the records' content (quasi-identifiers and sensitive attributes).

    Returns
    -------
    numpy.ndarray
        uint64, sorted (a multiset: equal records give equal fingerprints).

    Raises
    ------
    KeyError
        A column is missing.
    """
    return np.sort(keyed_record_hashes(records, list(content_columns), secret, REGISTRY_PURPOSE))


@dataclass(frozen=True)
class Recomposition:
    """An earlier release the new one would compose with.

    ``release_id``: the earlier release; ``n_shared_records``: records in both (multiset
    intersection of their fingerprints); ``n_only_new`` / ``n_only_earlier``: records in one of them only;
    ``changed_settings``: configuration keys whose values differ (names only); ``same_input_file``: both were made
    from the same input file (:data:`INPUT_KEY`).
    """

    release_id: str
    n_shared_records: int
    n_only_new: int
    n_only_earlier: int
    changed_settings: tuple[str, ...]
    same_input_file: bool = False

    def describe(self) -> str:
        if self.same_input_file and self.n_shared_records == 0:  # other columns: no fingerprint in common
            if self.changed_settings:
                return (
                    f"release {self.release_id} was made from the same input file with other settings "
                    f"({', '.join(self.changed_settings)})"
                )
            # the same settings, yet no record in common: the file was read otherwise (missing-value tokens, …)
            return f"release {self.release_id} was made from the same input file read with other reading options"
        what = []
        if self.changed_settings:
            what.append("other settings (" + ", ".join(self.changed_settings) + ")")
        if self.n_only_new or self.n_only_earlier:
            what.append(f"other records ({self.n_only_new} new, {self.n_only_earlier} no longer present)")
        return f"release {self.release_id} holds {self.n_shared_records} of the same records with " + " and ".join(what)


def _shared(a: np.ndarray, b: np.ndarray) -> int:
    """Size of the multiset intersection of two sorted uint64 arrays."""
    values_a, counts_a = np.unique(a, return_counts=True)
    values_b, counts_b = np.unique(b, return_counts=True)
    common, index_a, index_b = np.intersect1d(values_a, values_b, assume_unique=True, return_indices=True)
    return int(np.minimum(counts_a[index_a], counts_b[index_b]).sum())


def changed_settings(configuration: Mapping[str, Any], earlier_configuration: Mapping[str, Any]) -> tuple[str, ...]:
    """The :data:`CONFIGURATION_KEYS` whose values differ between two configurations (missing keys count as None,
    except a key of :data:`KEYS_ADDED_LATER` missing from either, which is not known and so not a change; values
    compared as JSON would compare them), in that order."""
    return tuple(
        k
        for k in CONFIGURATION_KEYS
        if not (k in KEYS_ADDED_LATER and (k not in configuration or k not in earlier_configuration))
        and _normal(configuration.get(k)) != _normal(earlier_configuration.get(k))
    )


def recomposition_of(
    release_id: str,
    *,
    n_shared_records: int,
    n_records: int,
    n_earlier_records: int,
    configuration: Mapping[str, Any],
    earlier_configuration: Mapping[str, Any],
) -> Recomposition | None:
    """The decision of :func:`find_recompositions` for one earlier release, from counts (and the two inputs' digests) alone (so that a caller that
    counts the multiset intersection out of core, e.g. DuckDB over a sharded release's fingerprint files, decides
    exactly as the in-memory job does).

    Parameters
    ----------
    release_id
        The earlier release.
    n_shared_records
        Size of the multiset intersection of the two releases' record fingerprints.
    n_records, n_earlier_records
        Records (fingerprints, duplicates counted) the new and the earlier release cover.
    configuration, earlier_configuration
        The two releases' configurations (:data:`CONFIGURATION_KEYS`).

    Returns
    -------
    Recomposition or None
        None when nothing is shared and the inputs differ (or either digest is unknown), or when it is the same
        release (same configuration, same multiset of records).
    """
    same_input = same_input_file(configuration, earlier_configuration)
    if n_shared_records == 0 and not same_input:
        return None
    changed = changed_settings(configuration, earlier_configuration)
    only_new, only_earlier = n_records - n_shared_records, n_earlier_records - n_shared_records
    if changed or only_new or only_earlier:
        return Recomposition(release_id, n_shared_records, only_new, only_earlier, changed, same_input)
    return None


def same_input_file(configuration: Mapping[str, Any], earlier_configuration: Mapping[str, Any]) -> bool:
    """Whether both configurations name their input by the same keyed digest (:data:`INPUT_KEY`); False when either
    lacks it."""
    new, earlier = configuration.get(INPUT_KEY), earlier_configuration.get(INPUT_KEY)
    return bool(new) and new == earlier


def find_recompositions(
    fingerprints: np.ndarray,
    configuration: Mapping[str, Any],
    earlier: Sequence[tuple[str, np.ndarray, Mapping[str, Any]]],
) -> list[Recomposition]:
    """The earlier releases that share records with the new one without being the same release.

    Parameters
    ----------
    fingerprints
        :func:`record_fingerprints` of the new release's records (all records the release
        covers: published and deleted).
    configuration
        The new release's configuration (:data:`CONFIGURATION_KEYS`; missing keys count as None).
    earlier
        ``(release_id, fingerprints, configuration)`` of every registered release of the home.

    Returns
    -------
    list of Recomposition
        Empty when the release may be published without ``allow_recomposition``.

    References
    ----------
    Ganta, Kasiviswanathan & Smith (KDD 2008), composition attacks; Xiao & Tao (SIGMOD 2007),
    m-invariance; issue 12, "release series" (b).
    """
    found = []
    for release_id, other, other_configuration in earlier:
        recomposition = recomposition_of(
            release_id,
            n_shared_records=_shared(fingerprints, other),
            n_records=len(fingerprints),
            n_earlier_records=len(other),
            configuration=configuration,
            earlier_configuration=other_configuration,
        )
        if recomposition is not None:
            found.append(recomposition)
    return found


def _normal(value: Any) -> Any:
    """Configuration values compared as JSON would compare them (lists and tuples alike, 3 == 3.0)."""
    if isinstance(value, (list, tuple)):
        return tuple(_normal(v) for v in value)
    if isinstance(value, Mapping):
        return tuple(sorted((k, _normal(v)) for k, v in value.items()))
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value
