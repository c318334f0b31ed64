"""The learned-model adversary (the deFinetti attack) and the posterior of every record's true values.

The adversary of Kifer ("Attacks on privacy and deFinetti's theorem", SIGMOD 2009, §4-§5) sees a
bucketized release — here P1's mixed release (SAC~ groups whose sensitive sub-tuples are permuted
per attribute cluster, plus the attribute table / ID table of improved Rating) or a Rating
release — and the victim's quasi-identifiers (published unchanged, so the victim's row is known).
It does not know which sensitive value belongs to which record inside a group or a SID, but the
release as a whole shows how sensitive values co-occur with quasi-identifiers. It learns that
dependence and uses it inside every group and SID.

Model
-----
One naive-Bayes classifier per sensitive attribute ``a`` (the class is the value ``v`` of ``a``,
the features are the published quasi-identifiers ``q_1..q_m``)::

    P(a = v | q) ∝ π_a(v) · Π_j θ_{a,j}(q_j | v)

with ``smoothing`` pseudo-counts (the prior π with add-``smoothing``; each conditional with a
Dirichlet prior of strength ``smoothing·|X_j|`` centred on the quasi-identifier's marginal, so a
rare value's conditional falls back to the marginal). Sensitive attributes are taken as independent given
the quasi-identifiers, so a cluster sub-tuple ``t`` has likelihood ``Π_{a in cluster} P(a = t_a | q)``.

Fitting (EM on the release itself)
    The latent variable is which candidate value belongs to which record. E-step: every record's
    distribution over its candidates (below) under the current model; M-step: the naive-Bayes
    counts from those expected assignments. Start: uniform assignment inside each group and SID
    (the "random worlds" start). EM alone drifts towards over-confident models on ℓ-diverse
    groups (the latent assignment explains noise; the naive-Bayes likelihood cannot express
    "values of a group are distinct"), so the number of rounds, 0 (no association) to
    ``n_iterations`` (default 15), is chosen by the adversary itself, without the truth: two-fold
    cross-validation over the groups, held-out log-likelihood of the members' quasi-identifiers
    given their group's values. Measured in docs/posterior.md.

Posterior inside a SAC~ group (exact)
    For a group of ℓ members and an attribute cluster ``c``, every one of the ℓ! assignments ``σ``
    of the group's ℓ cluster sub-tuples to its members has weight ``Π_i Π_{a in c} P(a = t_{σ(i),a}
    | q_i)``; the posterior that member ``i`` owns sub-tuple ``k`` is the normalised sum of the
    weights of the assignments with ``σ(i) = k``. Clusters are permuted independently by the
    release, so the posterior factorises over clusters. Groups of equal size are computed together
    (one array per size, in chunks). Groups larger than ``MAX_EXACT_GROUP_SIZE`` use Sinkhorn
    balancing of the ``ℓ × ℓ`` likelihood matrix instead (an approximation of the permanent's
    marginals; documented in docs/posterior.md).

Posterior inside a SID
    A record whose ``a``-SID is ``s`` draws its value from the multiset of ``s`` in the ID table,
    and each value occurrence belongs to exactly one record. When the number of attribute-table
    records naming ``s`` equals its total count and is at most ``MAX_EXACT_GROUP_SIZE`` (on Adult
    every SID: 3 or 4 records, one per value), the SID is computed EXACTLY like a group: every
    value occurrence is one slot, all assignments of slots to records are enumerated, and a
    value's posterior is the sum over its slots. Larger SIDs use the per-record independent
    approximation ``P(v) ∝ P(a = v | q) · count(v in s)``, which ignores the one-occurrence-per-
    record constraint (it is the constraint's first Sinkhorn half-step; the exact posterior is
    usually sharper, so the approximation can under-state the adversary on large SIDs).
    A suppressed cell (``NULL`` SID) gets ``P(a = v | q)`` over the attribute's released domain: the
    model alone (what the placement of suppressed values reveals is the suppression gate's business).

Population posterior
    The same naive-Bayes model fitted on the raw records (true values, no grouping, no EM): what an
    adversary learns from the population without the release. The gate compares every release
    posterior with ``max(1/ℓ, population posterior) + slack``.

Nothing here reads a release's order, and nothing returned carries a raw value: frames hold
release row ids, attribute names and probabilities.
"""

from __future__ import annotations

import dataclasses
import functools

import itertools
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from pipeline.core.columns import combine_codes, joint_text_codes, text_codes, values_mask
from pipeline.core.progress import Progress, no_progress

__all__ = [
    "DEFAULT_FIT_MAX_RECORDS",
    "HISTOGRAM_EDGES",
    "MAX_EXACT_GROUP_SIZE",
    "NaiveBayesModel",
    "PosteriorResult",
    "exact_group_marginals",
    "fit_naive_bayes",
    "fit_naive_bayes_on_release",
    "population_posterior",
    "release_posteriors",
]

#: Largest group whose ℓ! assignments are enumerated (7! = 5040); larger groups use Sinkhorn.
MAX_EXACT_GROUP_SIZE = 7
#: Bins of the posterior histograms (10 bins of 0.1 on [0, 1]).
HISTOGRAM_EDGES = np.linspace(0.0, 1.0, 11)
#: Releases with more records fit the adversary's model on a fixed sample of about this many records.
DEFAULT_FIT_MAX_RECORDS = 1_000_000
#: Cap on (groups × assignments × ℓ) numbers held at once by the exact group posterior.
_CHUNK_CELLS = 4_000_000


# --------------------------------------------------------------------------- naive Bayes


@dataclass(frozen=True)
class NaiveBayesModel:
    """Naive-Bayes classifiers P(sensitive value | quasi-identifiers), one per sensitive attribute.

    Attributes
    ----------
    log_prior
        attribute -> float64 array ``(|D_a|,)``, ``log π_a(v)``.
    log_conditional
        attribute -> list (one per quasi-identifier) of float64 arrays ``(|D_a|, |X_j|)``,
        ``log θ_{a,j}(x | v)``.
    """

    log_prior: Mapping[str, np.ndarray]
    log_conditional: Mapping[str, list[np.ndarray]]
    #: (attribute, id of the profiles' array) -> (that array, its (values x profiles) table): an E-step asks for the
    #: same table once per block (every group size, cluster and SID size); computed once per model
    _tables: dict[tuple[str, int], tuple[np.ndarray, np.ndarray]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def profile_table(self, attribute: str, profile_features: np.ndarray) -> np.ndarray:
        """``log P(a = v, profile)`` for every value and quasi-identifier profile: float64 ``(|D_a|, n_profiles)``
        (``profile_features``: int64 ``(n_profiles, m)``, each profile's codes). Cached on the model for the
        profiles' array it was given (the same numbers as computing it again: the same terms in the same order)."""
        key = (attribute, id(profile_features))
        cached = self._tables.get(key)
        if cached is not None and cached[0] is profile_features:
            return cached[1]
        table = np.repeat(self.log_prior[attribute][:, None], len(profile_features), axis=1)
        for j, conditional in enumerate(self.log_conditional[attribute]):
            table += conditional[:, profile_features[:, j]]
        self._tables[key] = (profile_features, table)
        return table

    def log_joint(self, attribute: str, feature_codes: np.ndarray) -> np.ndarray:
        """Unnormalised ``log P(a = v, q)`` for every record and value.

        Parameters
        ----------
        attribute
            A sensitive attribute of the model.
        feature_codes
            int64 ``(n, m)``: each record's quasi-identifier codes (in the model's code space).

        Returns
        -------
        numpy.ndarray
            float64 ``(n, |D_a|)``.
        """
        out = np.repeat(self.log_prior[attribute][None, :], len(feature_codes), axis=0)
        for j, table in enumerate(self.log_conditional[attribute]):
            out += table.T[feature_codes[:, j]]
        return out

    def pair_log_joint(self, attribute: str, feature_codes: np.ndarray, records: np.ndarray, values: np.ndarray) -> np.ndarray:
        """Unnormalised ``log P(a = values, q_records)`` for broadcastable int64 arrays ``records``
        (indices into ``feature_codes``) and ``values`` (value codes >= 0); float64, their broadcast shape.
        Only the requested pairs are computed (no records × values matrix). Records with the same
        quasi-identifier tuple (a *profile*) share their terms: when the (values × profiles) table is
        small it is computed once and each pair is one look-up instead of one per quasi-identifier."""
        profile, profile_features = _profiles(feature_codes)
        n_values = len(self.log_prior[attribute])
        n_pairs = int(np.prod(np.broadcast_shapes(np.shape(records), np.shape(values))))
        # the table only when it is smaller than the pairs asked for: with 100,000 distinct values (issue 14) a
        # (values x profiles) table per call cost more than all the pairs; both ways add the same terms in the
        # same order, so the numbers are the same
        if profile is not None and n_values * len(profile_features) <= min(_PROFILE_TABLE_CELLS, max(n_pairs, 1)):
            out = self.profile_table(attribute, profile_features)[values, profile[records]]
            shape = np.broadcast_shapes(np.shape(records), np.shape(values))
            # a look-up of the broadcast shape is already a new float64 array: no second copy
            return out if out.shape == shape else np.broadcast_to(out, shape).astype(np.float64)
        out = self.log_prior[attribute][values]
        for j, table in enumerate(self.log_conditional[attribute]):
            out = out + table[values, feature_codes[records, j]]
        return np.broadcast_to(out, np.broadcast_shapes(np.shape(records), np.shape(values))).astype(np.float64)

    def posterior(self, attribute: str, feature_codes: np.ndarray) -> np.ndarray:
        """``P(a = v | q)`` for every record and value: float64 ``(n, |D_a|)``, rows sum to 1."""
        return _softmax(self.log_joint(attribute, feature_codes), axis=1)


#: Largest (values × quasi-identifier profiles) table computed at once by the profile shortcut.
_PROFILE_TABLE_CELLS = 20_000_000
#: Up to this many (values × profiles) cells the M-step counts through the profiles whatever the number of pairs.
_PROFILE_SHORTCUT_FLOOR = 2_000_000
_PROFILE_CACHE: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}


def _profiles(feature_codes: np.ndarray) -> tuple[np.ndarray | None, np.ndarray]:
    """Each record's quasi-identifier *profile* (its distinct tuple of codes) and the profiles' codes.

    Cached for the last few arrays (the EM passes the same array many times). ``(None, empty)``
    for an empty array."""
    if not len(feature_codes):
        return None, np.zeros((0, feature_codes.shape[1] if feature_codes.ndim == 2 else 0), dtype=np.int64)
    key = id(feature_codes)
    cached = _PROFILE_CACHE.get(key)
    if cached is not None and cached[0] is feature_codes:
        return cached[1], cached[2]
    if feature_codes.ndim == 2 and feature_codes.shape[1] and feature_codes.min() >= -1:
        # one int per row (order-preserving mixed radix), then a 1-D unique: the same profiles, in the same
        # (lexicographic) order as a row-wise unique, several times faster on millions of records
        combined = combine_codes([feature_codes[:, j] for j in range(feature_codes.shape[1])])
        _, first, profile = np.unique(combined, return_index=True, return_inverse=True)
        profile_features = feature_codes[first]
    else:
        profile_features, profile = np.unique(feature_codes, axis=0, return_inverse=True)
    profile = profile.reshape(-1).astype(np.int64)
    if len(_PROFILE_CACHE) >= 4:
        _PROFILE_CACHE.clear()
    _PROFILE_CACHE[key] = (feature_codes, profile, profile_features)
    return profile, profile_features


def _forget_profiles(feature_codes: np.ndarray) -> None:
    """Drop the cached profiles of ``feature_codes`` (the cache would keep the array and its profiles alive after
    their last use)."""
    cached = _PROFILE_CACHE.get(id(feature_codes))
    if cached is not None and cached[0] is feature_codes:
        del _PROFILE_CACHE[id(feature_codes)]


def _softmax(log_weights: np.ndarray, axis: int) -> np.ndarray:
    shifted = log_weights - log_weights.max(axis=axis, keepdims=True)
    weights = np.exp(shifted)
    return weights / weights.sum(axis=axis, keepdims=True)


@dataclass(frozen=True)
class _CountPlan:
    """What the naive-Bayes M-step counts for one attribute, fixed while only the pairs' weights change (EM rounds):
    the pairs' value codes and, per the profile shortcut of :func:`_estimate`, the flat (value, profile) index or one
    flat (value, quasi-identifier value) index per quasi-identifier."""

    values: np.ndarray
    n_values: int
    n_features: tuple[int, ...]
    by_profile_index: np.ndarray | None  # values * n_profiles + profile of the pair's record
    profile_features: np.ndarray | None  # (n_profiles, m) when by_profile_index is set
    #: per quasi-identifier, when by_profile_index is set: the flat (value, x) bin of every (value, profile) cell,
    #: value-major (value * |X_j| + the profile's code)
    profile_bins: tuple[np.ndarray, ...]
    feature_index: tuple[np.ndarray, ...]  # per quasi-identifier: values * |X_j| + code (when by_profile_index is None)


def _count_plan(
    records: np.ndarray, values: np.ndarray, feature_codes: np.ndarray, n_values: int, n_features: Sequence[int]
) -> _CountPlan:
    """The index arrays :func:`_estimate_from` counts with (see :func:`_estimate`)."""
    profile, profile_features = _profiles(feature_codes)
    n_profiles = len(profile_features)
    # the (values x profiles) counts only when they are not much larger than the pairs (issue 14: 100,000 distinct
    # values made them the cost of the whole fit); up to _PROFILE_SHORTCUT_FLOOR cells always (Adult's models)
    cells = n_values * n_profiles
    if profile is not None and cells <= min(_PROFILE_TABLE_CELLS, max(_PROFILE_SHORTCUT_FLOOR, 4 * len(records))):
        bins = tuple(
            (np.arange(n_values, dtype=np.int64)[:, None] * size + profile_features[:, j][None, :]).reshape(-1)
            for j, size in enumerate(n_features)
        )
        return _CountPlan(
            values=_narrow(values, n_values),
            n_values=n_values,
            n_features=tuple(n_features),
            by_profile_index=_narrow(_flat_index(values, n_profiles, profile, records), n_values * n_profiles),
            profile_features=profile_features,
            profile_bins=bins,
            feature_index=(),
        )
    return _CountPlan(
        values=_narrow(values, n_values),
        n_values=n_values,
        n_features=tuple(n_features),
        by_profile_index=None,
        profile_features=None,
        profile_bins=(),
        feature_index=tuple(
            _narrow(values * size + feature_codes[records, j], n_values * size) for j, size in enumerate(n_features)
        ),
    )


def _flat_index(values: np.ndarray, n_profiles: int, profile: np.ndarray, records: np.ndarray) -> np.ndarray:
    """``values * n_profiles + profile[records]`` (``values`` in ``[0, n_values)``), in int32 when every position fits
    (the same integers, a third of the int64 temporaries of the first M-step)."""
    bound = (int(values.max(initial=0)) + 1) * max(n_profiles, 1)
    if bound >= np.iinfo(np.int32).max:
        return values * n_profiles + profile[records]
    index = profile.astype(np.int32)[records]
    index += values.astype(np.int32) * np.int32(n_profiles)
    return index


def _narrow(index: np.ndarray, bound: int) -> np.ndarray:
    """``index`` (non-negative, below ``bound``) in the narrowest of int8, int16 and int32 that holds ``bound``: the
    plan is kept for the whole fit, and ``np.bincount`` counts the same bins from any width."""
    for dtype in (np.int8, np.int16, np.int32):
        if bound < np.iinfo(dtype).max:
            return index.astype(dtype, copy=False)
    return index


def _estimate_from(plan: _CountPlan, weights: np.ndarray, smoothing: float) -> tuple[np.ndarray, list[np.ndarray]]:
    """Naive-Bayes M-step from the pairs of ``plan`` weighted by ``weights``: (log prior, log conditionals)."""
    n_values = plan.n_values
    prior = np.bincount(plan.values, weights=weights, minlength=n_values) + smoothing
    log_prior = np.log(prior / prior.sum())
    conditionals = []
    by_profile = None
    if plan.by_profile_index is not None and plan.profile_features is not None:
        # one weighted count per (value, profile), then summed per quasi-identifier value
        n_profiles = len(plan.profile_features)
        by_profile = np.bincount(plan.by_profile_index, weights=weights, minlength=n_values * n_profiles).reshape(
            n_values, n_profiles
        )
    for j, size in enumerate(plan.n_features):
        if by_profile is not None:
            # summed per quasi-identifier value: each bin adds its profiles in profile order from 0.0, as
            # np.add.at(counts.T, profile_features[:, j], by_profile.T) does (the same sums, bit for bit), in one pass
            counts: np.ndarray = np.bincount(
                plan.profile_bins[j], weights=by_profile.reshape(-1), minlength=n_values * size
            ).reshape(n_values, size)
        else:
            counts = np.bincount(plan.feature_index[j], weights=weights, minlength=n_values * size).reshape(n_values, size)
        # Dirichlet prior centred on the quasi-identifier's marginal (strength smoothing·|X_j|, the
        # same total as Laplace): a rare value's conditional falls back to the marginal, not to uniform
        marginal = counts.sum(axis=0) + smoothing
        marginal = marginal / marginal.sum()
        counts = counts + smoothing * size * marginal[None, :]
        conditionals.append(np.log(counts / counts.sum(axis=1, keepdims=True)))
    return log_prior, conditionals


def _estimate(
    records: np.ndarray,
    values: np.ndarray,
    weights: np.ndarray,
    feature_codes: np.ndarray,
    n_values: int,
    n_features: Sequence[int],
    smoothing: float,
) -> tuple[np.ndarray, list[np.ndarray]]:
    """Naive-Bayes M-step from weighted (record, value) pairs: (log prior, log conditionals)."""
    return _estimate_from(_count_plan(records, values, feature_codes, n_values, n_features), weights, smoothing)


def fit_naive_bayes(
    feature_codes: np.ndarray,
    value_codes: Mapping[str, np.ndarray],
    *,
    n_features: Sequence[int],
    n_values: Mapping[str, int],
    smoothing: float = 1.0,
) -> NaiveBayesModel:
    """Fit the naive-Bayes model on fully observed records (the population model).

    Parameters
    ----------
    feature_codes
        int64 ``(n, m)``: quasi-identifier codes, column j in ``[0, n_features[j])``.
    value_codes
        attribute -> int64 ``(n,)``: each record's value code in ``[0, n_values[a])``.
    n_features, n_values
        Domain sizes.
    smoothing
        Laplace pseudo-count (> 0).

    Returns
    -------
    NaiveBayesModel

    Raises
    ------
    ValueError
        ``smoothing <= 0`` or a code outside its domain.

    References
    ----------
    Kifer, SIGMOD 2009, §5 (naive Bayes as the adversary's model).
    """
    if not smoothing > 0:
        raise ValueError(f"smoothing must be > 0, got {smoothing}")
    n = len(feature_codes)
    records = np.arange(n)
    ones = np.ones(n)
    log_prior, log_conditional = {}, {}
    for attribute, codes in value_codes.items():
        codes = np.asarray(codes, dtype=np.int64)
        if len(codes) and (codes.min() < 0 or codes.max() >= n_values[attribute]):
            raise ValueError(f"a value code of {attribute!r} is outside [0, {n_values[attribute]})")
        log_prior[attribute], log_conditional[attribute] = _estimate(
            records, codes, ones, feature_codes, n_values[attribute], n_features, smoothing
        )
    return NaiveBayesModel(log_prior, log_conditional)


# --------------------------------------------------------------------------- exact group posterior


def _permutations(size: int) -> np.ndarray:
    return np.array(list(itertools.permutations(range(size))), dtype=np.int64).reshape(-1, size)


def exact_group_marginals(log_likelihood: np.ndarray) -> np.ndarray:
    """Posterior that member ``i`` of a group owns candidate ``k``, for many groups of one size.

    Parameters
    ----------
    log_likelihood
        float64 ``(G, ℓ, ℓ)``: ``[g, i, k]`` = log-likelihood that member ``i`` of group ``g``
        owns candidate (sub-tuple) ``k`` of that group.

    Returns
    -------
    numpy.ndarray
        float64 ``(G, ℓ, ℓ)``, doubly stochastic per group: for ℓ <= ``MAX_EXACT_GROUP_SIZE``
        the exact marginals over all ℓ! one-to-one assignments (assignment weight = product of
        its members' likelihoods); beyond, Sinkhorn balancing of ``exp(log_likelihood)``.

    Raises
    ------
    ValueError
        ``log_likelihood`` is not ``(G, ℓ, ℓ)``.

    References
    ----------
    Kifer, SIGMOD 2009, §5 (exact inference inside small buckets).
    """
    log_likelihood = np.asarray(log_likelihood, dtype=np.float64)
    if log_likelihood.ndim != 3 or log_likelihood.shape[1] != log_likelihood.shape[2]:
        raise ValueError(f"log_likelihood must have shape (G, ℓ, ℓ), got {log_likelihood.shape}")
    n_groups, size, _ = log_likelihood.shape
    if n_groups == 0 or size == 0:
        return np.zeros_like(log_likelihood)
    if size > MAX_EXACT_GROUP_SIZE:
        return _sinkhorn(log_likelihood)
    perms = _permutations(size)  # (P, ℓ)
    one_hot = np.zeros((len(perms), size, size))
    one_hot[np.arange(len(perms))[:, None], np.arange(size)[None, :], perms] = 1.0
    out = np.empty_like(log_likelihood)
    chunk = max(1, _CHUNK_CELLS // (len(perms) * size))
    members = np.arange(size)
    for start in range(0, n_groups, chunk):
        block = log_likelihood[start : start + chunk]
        weights = block[:, members[None, :], perms].sum(axis=2)  # (g, P)
        out[start : start + chunk] = np.einsum("gp,pik->gik", _softmax(weights, axis=1), one_hot)
    return out


def _sinkhorn(log_likelihood: np.ndarray, n_rounds: int = 200) -> np.ndarray:
    """Doubly stochastic scaling of ``exp(log_likelihood)`` per group (large groups only)."""
    matrix = np.exp(log_likelihood - log_likelihood.max(axis=(1, 2), keepdims=True))
    matrix = np.maximum(matrix, 1e-300)
    for _ in range(n_rounds):
        matrix = matrix / matrix.sum(axis=2, keepdims=True)
        matrix = matrix / matrix.sum(axis=1, keepdims=True)
    return matrix / matrix.sum(axis=2, keepdims=True)


# --------------------------------------------------------------------------- the release as EM data


@dataclass
class _GroupBlock:
    """SAC~ groups of one size for one attribute cluster."""

    attributes: list[str]
    members: np.ndarray  # (G, ℓ) record index (into the release's records)
    candidate_values: dict[str, np.ndarray]  # attribute -> (G, ℓ) value code of candidate k
    kind: str = "sac"  # "sac" (a SAC~ group) or "sid" (a small SID computed exactly)
    #: (G,) 0/1: the half of the release this group belongs to (held-out selection); computed when not given
    fold: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))
    #: (G, ℓ, ℓ), set by the E-step; after a held-out fold's E-step (blocks of at most _FOLD_ONLY_GROUP_SIZE) only
    #: the fold's groups, in block order (:func:`_e_step`)
    marginals: np.ndarray = field(default_factory=lambda: np.zeros((0, 0, 0)))
    #: attribute -> :class:`_Lookup` (built before the held-out folds by :func:`_prepare_shared`, else on the first
    #: E-step or held-out score; read only afterwards)
    lookups: dict[str, Any] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if len(self.fold) != len(self.members):
            self.fold = (self.members.min(axis=1) % 2).astype(np.int64) if self.members.size else np.zeros(0, np.int64)


@dataclass
class _SidBlock:
    """Candidate (record, value, availability) triples of one attribute (attribute table)."""

    records: np.ndarray
    values: np.ndarray
    availability: np.ndarray
    #: one per entry, set by the E-step; after a held-out fold's E-step only the fold's entries, in entry order
    responsibility: np.ndarray = field(default_factory=lambda: np.zeros(0))
    lookup: Any = field(default=None, repr=False)  # :class:`_Lookup`, built by _prepare_shared or the first E-step


@dataclass
class _ReleaseData:
    feature_codes: np.ndarray  # (n, m) published quasi-identifier codes
    n_features: list[int]
    domains: dict[str, list[str]]  # attribute -> value texts (code order)
    groups: list[_GroupBlock] = field(default_factory=list)
    sids: dict[str, _SidBlock] = field(default_factory=dict)
    selected_iterations: int = 0
    held_out_scores: np.ndarray | None = None
    #: attribute -> the M-step's pairs (:func:`_m_step_pairs`), built by :func:`_prepare_shared` or the first M-step
    m_step_pairs: dict[str, Any] = field(default_factory=dict)
    #: (attribute, fold) -> the fold's M-step pairs (:func:`_fold_plan`), kept during that fold's EM path only
    fold_plans: dict[tuple[str, int], Any] = field(default_factory=dict)


def _exact_sids(sid_rows: pd.DataFrame, record_sids: np.ndarray) -> np.ndarray:
    """SIDs whose records can be matched to their value occurrences exactly: the number of
    attribute-table records naming the SID equals its total count and is <= MAX_EXACT_GROUP_SIZE."""
    totals = sid_rows.groupby("sid")["count"].sum()
    used = pd.Series(record_sids).value_counts()
    both = pd.concat([totals.rename("total"), used.rename("used")], axis=1).fillna(0)
    chosen = both[(both["total"] == both["used"]) & (both["total"] >= 1) & (both["total"] <= MAX_EXACT_GROUP_SIZE)]
    return chosen.index.to_numpy(np.int64)


def _sid_groups(records: np.ndarray, record_sids: np.ndarray, sid_rows: pd.DataFrame) -> Iterator[tuple[np.ndarray, np.ndarray]]:
    """(members (S, L), value slots (S, L)) per SID size L: every value occurrence of a SID is one slot."""
    if not len(records):
        return
    order = np.lexsort([records, record_sids])
    records, record_sids = records[order], record_sids[order]
    slot_rows = sid_rows.loc[sid_rows.index.repeat(sid_rows["count"].to_numpy(np.int64))]
    slot_rows = slot_rows.sort_values(["sid", "value"], kind="stable")
    slot_sids = slot_rows["sid"].to_numpy(np.int64)
    slot_values = slot_rows["value"].to_numpy(np.int64)
    unique, first, sizes = np.unique(record_sids, return_index=True, return_counts=True)
    slot_first = np.searchsorted(slot_sids, unique)
    for size in np.unique(sizes):
        chosen = np.flatnonzero(sizes == size)
        offsets = np.arange(size)[None, :]
        yield records[first[chosen][:, None] + offsets], slot_values[slot_first[chosen][:, None] + offsets]


def _distinct_text(values: pd.Series) -> set[str]:
    """The distinct texts of a column (missing values excluded), converted once per distinct value."""
    distinct = (
        values.cat.categories[np.unique(values.cat.codes[values.cat.codes >= 0])]
        if isinstance(values.dtype, pd.CategoricalDtype)
        else pd.unique(values.dropna())
    )
    return set(pd.Index(distinct).astype(str))


def _release_data(
    quasi_identifiers: Sequence[str],
    sensitive_attributes: Sequence[str],
    *,
    sac_released: pd.DataFrame,
    attribute_table: pd.DataFrame,
    id_table: pd.DataFrame,
    attribute_clusters: pd.DataFrame,
) -> tuple[_ReleaseData, np.ndarray]:
    """Encode a release for EM; returns the data and the release row id of every record index."""
    quasi_identifier_columns, sensitive_attribute_columns = list(quasi_identifiers), list(sensitive_attributes)
    # quasi-identifier codes in one text-ordered space shared by the two parts (no concatenation of text columns:
    # the parts' categories differ, and a concatenation would turn every cell into a Python string)
    features = []
    n_features = []
    for column in quasi_identifier_columns:
        sac_part, table_part = joint_text_codes(sac_released[column], attribute_table[column])
        codes = np.concatenate([sac_part, table_part])  # code order = text order; a missing value gets the last code
        size = int(codes.max(initial=-1)) + 1
        codes = np.where(codes < 0, size, codes)
        used = np.bincount(codes, minlength=size + 1) > 0  # dense codes over the values present (unused categories dropped)
        codes = (np.cumsum(used) - 1)[codes]
        features.append(codes.astype(np.int64))
        n_features.append(max(1, int(codes.max(initial=0)) + 1))
    n_published = len(sac_released) + len(attribute_table)
    feature_codes = np.stack(features, axis=1) if features else np.zeros((n_published, 0), dtype=np.int64)
    row_ids = np.concatenate([sac_released["row_id"].to_numpy(np.int64), attribute_table["row_id"].to_numpy(np.int64)])
    ids_of = {a: id_table[values_mask(id_table["attribute"], [a])] for a in sensitive_attribute_columns}
    domains = {}
    for attribute in sensitive_attribute_columns:
        seen = _distinct_text(sac_released[attribute]) | _distinct_text(ids_of[attribute]["value"])
        domains[attribute] = sorted(seen)
    lookup = {a: pd.Index(domains[a], dtype=object) for a in sensitive_attribute_columns}
    data = _ReleaseData(feature_codes, n_features, domains)

    n_sac = len(sac_released)
    if n_sac:
        cluster_of = dict(zip(attribute_clusters["attribute"], attribute_clusters["cluster_id"], strict=True))
        clusters: dict[str, list[str]] = {}
        for attribute in sensitive_attribute_columns:
            clusters.setdefault(cluster_of.get(attribute, f"alone:{attribute}"), []).append(attribute)
        group_codes, _ = pd.factorize(sac_released["group_id"])
        order = np.argsort(group_codes, kind="stable")
        sizes = np.bincount(group_codes)
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        sac_codes = {a: text_codes(sac_released[a], lookup[a]) for a in sensitive_attribute_columns}
        for size in np.unique(sizes):
            chosen = np.flatnonzero(sizes == size)
            positions = order[(starts[chosen][:, None] + np.arange(size)[None, :])]  # (G, ℓ) sac row positions
            for attributes in clusters.values():
                candidate_values = {a: sac_codes[a][positions] for a in attributes}
                data.groups.append(_GroupBlock(list(attributes), positions, candidate_values))
    for attribute in sensitive_attribute_columns:
        rows = ids_of[attribute]
        sid_values = text_codes(rows["value"], lookup[attribute])
        column = attribute_table[attribute]
        sids = column.astype("Int64").fillna(-1).to_numpy(np.int64)
        present = np.flatnonzero(sids >= 0)
        sid_rows = pd.DataFrame(
            {"sid": rows["sid"].to_numpy(np.int64), "value": sid_values, "count": rows["count"].to_numpy(np.int64)}
        )
        exact_sids = _exact_sids(sid_rows, sids[present])
        in_exact = np.isin(sids[present], exact_sids)
        for members, slots in _sid_groups(present[in_exact], sids[present][in_exact], sid_rows[sid_rows["sid"].isin(exact_sids)]):
            data.groups.append(_GroupBlock([attribute], members + n_sac, {attribute: slots}, kind="sid"))
        present = present[~in_exact]
        entries = pd.DataFrame({"record": present, "sid": sids[present]}).merge(
            sid_rows.astype({"count": np.float64}),
            on="sid",
            how="inner",
            sort=False,
        )
        record_part = entries["record"].to_numpy(np.int64)
        values = entries["value"].to_numpy(np.int64)
        availability = entries["count"].to_numpy(np.float64)
        keep = values >= 0
        record_part, values, availability = record_part[keep], values[keep], availability[keep]
        suppressed = np.flatnonzero(sids < 0)
        n_domain = len(domains[attribute])
        record_part = np.concatenate([record_part, np.repeat(suppressed, n_domain)])
        values = np.concatenate([values, np.tile(np.arange(n_domain), len(suppressed))])
        availability = np.concatenate([availability, np.ones(len(suppressed) * n_domain)])
        data.sids[attribute] = _SidBlock(record_part + n_sac, values.astype(np.int64), availability)
    return data, row_ids


@dataclass(frozen=True)
class _Lookup:
    """What :meth:`NaiveBayesModel.pair_log_joint` does for a fixed set of (record, value) pairs, prepared once per
    block and attribute (the pairs do not change during a fit; only the model does): the pairs' flat positions in the
    model's (values × profiles) table when ``pair_log_joint`` would take the table path (the same condition), and the
    rest of :func:`_group_log_likelihood`'s terms. Looking the pairs up at those positions gives the numbers of
    ``pair_log_joint``, bit for bit."""

    #: value codes as pair_log_joint receives them (clipped at 0), or, with ``clip``, the codes before clipping (a view
    #: of the block's candidates, no copy: only a look-up whose model has another domain needs them)
    values: np.ndarray
    missing: Any  # -inf where a candidate is missing, 0.0 elsewhere: an array, or the scalar 0.0 when none is missing
    n_values: int
    profile_features: np.ndarray | None
    flat: np.ndarray | None  # value * n_profiles + the record's profile; None: pair_log_joint's pair-by-pair path
    clip: bool = False  # ``values`` are still to be clipped at 0


def _table_path(n_values: int, n_profiles: int, n_pairs: int) -> bool:
    """Whether :meth:`NaiveBayesModel.pair_log_joint` looks ``n_pairs`` pairs up in the (values × profiles) table."""
    return n_values * n_profiles <= min(_PROFILE_TABLE_CELLS, max(n_pairs, 1))


def _lookup(data: _ReleaseData, n_values: int, records: np.ndarray, values: np.ndarray, *, clip: bool = True) -> _Lookup:
    """The :class:`_Lookup` of the pairs ``(records, values)`` (broadcastable int64 arrays). ``clip``: a group's
    candidates, whose missing ones (-1) are looked up as value 0 and then set to -inf; without it (a SID's entries,
    all >= 0) the values are looked up as given (a negative one: pair_log_joint's own path)."""
    missing: Any = np.where(values < 0, -np.inf, 0.0) if clip and (values < 0).any() else 0.0
    profile, profile_features = _profiles(data.feature_codes)
    n_pairs = int(np.prod(np.broadcast_shapes(np.shape(records), np.shape(values))))
    table_path = profile is not None and _table_path(n_values, len(profile_features), n_pairs)
    if profile is None or not table_path or (not clip and (values < 0).any()):
        return _Lookup(np.maximum(values, 0) if clip else values, missing, n_values, None, None)
    flat = (np.maximum(values, 0) if clip else values) * len(profile_features) + profile[records]
    if n_values * len(profile_features) < np.iinfo(np.int32).max:
        flat = flat.astype(np.int32)  # half the memory, the same positions
    return _Lookup(values, missing, n_values, profile_features, flat, clip=clip)


def _looked_up(
    model: NaiveBayesModel,
    data: _ReleaseData,
    attribute: str,
    records: np.ndarray,
    lookup: _Lookup,
    rows: np.ndarray | None = None,
) -> np.ndarray:
    """``model.pair_log_joint(attribute, data.feature_codes, records, lookup.values)``, through the prepared positions
    when there are some; with ``rows`` (indices along the first axis of ``records`` and the look-up) only those pairs."""
    if lookup.flat is None or lookup.profile_features is None or len(model.log_prior[attribute]) != lookup.n_values:
        values = lookup.values if rows is None else lookup.values[rows]
        records = records if rows is None else records[rows]
        return model.pair_log_joint(attribute, data.feature_codes, records, np.maximum(values, 0) if lookup.clip else values)
    flat = lookup.flat if rows is None else lookup.flat[rows]
    return np.take(model.profile_table(attribute, lookup.profile_features).reshape(-1), flat)


def _group_log_likelihood(
    model: NaiveBayesModel, data: _ReleaseData, block: _GroupBlock, rows: np.ndarray | None = None
) -> np.ndarray:
    """(G, ℓ, ℓ): log-likelihood that member i owns the cluster sub-tuple of member k; with ``rows`` (int64 indices of
    groups of the block) only those groups, ``(len(rows), ℓ, ℓ)``: the block's look-ups taken at ``rows``, the same
    numbers, bit for bit, as a block of those groups alone (each number is its own pair's terms, added in the same
    order), without a copy of the block's arrays."""
    total: Any = 0.0
    members = block.members[:, :, None]
    for attribute in block.attributes:
        lookup = _block_lookup(data, block, attribute, len(model.log_prior[attribute]))
        if rows is None:
            joint = _looked_up(model, data, attribute, members, lookup)
            missing = lookup.missing
        else:
            joint = _looked_up(model, data, attribute, members, lookup, rows)
            missing = lookup.missing[rows] if isinstance(lookup.missing, np.ndarray) else lookup.missing
        # adding the scalar 0.0 when nothing is missing gives what adding an array of 0.0 gives, bit for bit
        total = total + joint + missing
    return total


def _block_lookup(data: _ReleaseData, block: _GroupBlock, attribute: str, n_values: int) -> _Lookup:
    """The block's :class:`_Lookup` of ``attribute`` (every member against every candidate), built on first use."""
    lookup = block.lookups.get(attribute)
    if lookup is None:
        lookup = block.lookups[attribute] = _lookup(
            data, n_values, block.members[:, :, None], block.candidate_values[attribute][:, None, :]
        )
    return lookup


def _sid_lookup(data: _ReleaseData, sid: _SidBlock, n_values: int) -> _Lookup:
    """The SID entries' :class:`_Lookup` (each entry's record against its value), built on first use."""
    if sid.lookup is None:
        sid.lookup = _lookup(data, n_values, sid.records, sid.values, clip=False)
    return sid.lookup


#: Largest group size whose fold's groups are updated alone by a held-out fold's E-step (:func:`_e_step`)
_FOLD_ONLY_GROUP_SIZE = 3


def _e_step(model: NaiveBayesModel | None, data: _ReleaseData, fold: int | None = None) -> None:
    """Update every block's responsibilities (uniform inside groups and SIDs when ``model`` is None).

    With ``fold`` (0 or 1), only the responsibilities of that half of the release are computed and kept: the groups
    with ``block.fold == fold`` of the blocks of at most :data:`_FOLD_ONLY_GROUP_SIZE` members (``block.marginals``
    then holds those groups only, in block order) and the SID entries of records ``record % 2 == fold``
    (``sid.responsibility`` holds those entries only, in entry order): the pairs the fold's M-step counts
    (:func:`_m_step` with the same ``fold``), which reads nothing else. Each such group's and record's numbers are its
    own (a group's marginals from its own look-ups and at most 3! = 6 assignments, summed one after the other
    whatever the batch; a record's from its own entries, all in its half, added in the same order), so they are the
    numbers, bit for bit, of updating everything. Larger groups are updated whole: with 24 assignments or more,
    numpy sums a group alone (a one-group batch) in another order than inside a batch of several, so a group's last
    bits would depend on which other groups share its batch."""
    for block in data.groups:
        n_groups, size = block.members.shape
        rows = np.flatnonzero(block.fold == fold) if fold is not None and size <= _FOLD_ONLY_GROUP_SIZE else None
        if model is None:
            block.marginals = np.full((n_groups if rows is None else len(rows), size, size), 1.0 / size)
        elif rows is None:
            block.marginals = exact_group_marginals(_group_log_likelihood(model, data, block))
        elif len(rows):
            block.marginals = exact_group_marginals(_group_log_likelihood(model, data, block, rows))
        else:
            block.marginals = np.zeros((0, size, size))
    for attribute, sid in data.sids.items():
        entries = None if fold is None else np.flatnonzero(sid.records % 2 == fold)
        records = sid.records if entries is None else sid.records[entries]
        availability = sid.availability if entries is None else sid.availability[entries]
        if model is None:
            weights = availability.copy()
        else:
            lookup = _sid_lookup(data, sid, len(model.log_prior[attribute]))
            log_w = _looked_up(model, data, attribute, sid.records, lookup, entries) + np.log(availability)
            peak = np.full(len(data.feature_codes), -np.inf)
            np.maximum.at(peak, records, log_w)
            weights = np.exp(log_w - peak[records])
        totals = np.bincount(records, weights=weights, minlength=len(data.feature_codes))
        sid.responsibility = weights / totals[records]


@dataclass(frozen=True)
class _MStepPairs:
    """The (record, value) pairs the M-step counts for one attribute, in the order of :func:`_m_step` (every group
    block naming the attribute, then its SIDs), pairs with a missing candidate (value < 0) left out: fixed for a
    release, only their weights change from round to round."""

    plan: _CountPlan
    keep: np.ndarray | None  # bool over all pairs: value >= 0; None when every pair is kept
    pair_fold: np.ndarray  # int8 over all pairs: the fold of the pair's group (block.fold) or record (SIDs: record % 2)


def _m_step_pairs(data: _ReleaseData, attribute: str) -> _MStepPairs:
    """The pairs of ``attribute`` (cached on ``data``: the blocks do not change during a fit)."""
    cached = data.m_step_pairs.get(attribute)
    if cached is not None:
        return cached
    records, values, folds = [], [], []
    for block in data.groups:
        if attribute not in block.attributes:
            continue
        n_groups, size = block.members.shape
        records.append(np.repeat(block.members.reshape(-1), size))
        values.append(np.broadcast_to(block.candidate_values[attribute][:, None, :], (n_groups, size, size)).reshape(-1))
        folds.append(np.repeat(block.fold.astype(np.int8), size * size))
    sid = data.sids.get(attribute)
    if sid is not None:
        records.append(sid.records)
        values.append(sid.values)
        folds.append((sid.records % 2).astype(np.int8))
    # the pieces are freed as soon as they are joined (the first M-step's peak: a few int64 arrays of every pair)
    pair_fold = np.concatenate(folds) if folds else np.zeros(0, np.int8)
    del folds
    records_all = np.concatenate(records) if records else np.zeros(0, np.int64)
    del records
    values_all = np.concatenate(values) if values else np.zeros(0, np.int64)
    del values
    keep: np.ndarray | None = values_all >= 0
    if keep is not None and keep.all():
        keep = None  # nothing to leave out: no gather of the weights every round
    else:
        records_all, values_all = records_all[keep], values_all[keep]
    pairs = _MStepPairs(
        _count_plan(records_all, values_all, data.feature_codes, len(data.domains[attribute]), data.n_features),
        keep,
        pair_fold,
    )
    data.m_step_pairs[attribute] = pairs
    _share_lookups(data, attribute, pairs)
    return pairs


def _share_lookups(data: _ReleaseData, attribute: str, pairs: _MStepPairs) -> None:
    """Give the blocks naming ``attribute`` their E-step look-ups (:class:`_Lookup`) as views of the M-step's
    (value, profile) index instead of arrays of their own: a group block's pairs, in the M-step's order (group, member,
    candidate), sit at ``value * n_profiles + profile of the member``, exactly the look-up's positions, and a SID's
    entries likewise; so the E-step looks up the same positions and computes the same numbers. Only when no pair is
    left out (every candidate present) and where :func:`_lookup` would take the table path; the other blocks build
    their look-ups as before."""
    plan = pairs.plan
    index = plan.by_profile_index
    if index is None or plan.profile_features is None or pairs.keep is not None:
        return
    n_values, n_profiles = plan.n_values, len(plan.profile_features)
    offset = 0
    for block in data.groups:
        if attribute not in block.attributes:
            continue
        n_groups, size = block.members.shape
        n_pairs = n_groups * size * size
        if attribute not in block.lookups and _table_path(n_values, n_profiles, n_pairs):
            flat = index[offset : offset + n_pairs].reshape(n_groups, size, size)
            candidates = block.candidate_values[attribute][:, None, :]
            block.lookups[attribute] = _Lookup(candidates, 0.0, n_values, plan.profile_features, flat, clip=True)
        offset += n_pairs
    sid = data.sids.get(attribute)
    if sid is not None and sid.lookup is None and _table_path(n_values, n_profiles, len(sid.records)):
        flat = index[offset : offset + len(sid.records)]
        sid.lookup = _Lookup(sid.values, 0.0, n_values, plan.profile_features, flat)


@dataclass(frozen=True)
class _FoldPairs:
    """The M-step's pairs of one half of the release (:func:`_fold_plan`): ``plan`` is the attribute's plan cut to
    the fold's kept pairs; their weights are gathered block by block, in the order of :func:`_m_step_pairs`."""

    plan: _CountPlan
    block_rows: tuple[np.ndarray, ...]  # per group block naming the attribute: the fold's groups (int64 indices)
    sid_entries: np.ndarray | None  # the SID entries of the fold's records (int64 indices), None without SIDs
    keep: np.ndarray | None  # bool over the fold's pairs: value >= 0; None when every pair is kept


def _fold_plan(data: _ReleaseData, attribute: str, pairs: _MStepPairs, fold: int) -> _FoldPairs:
    """:class:`_FoldPairs` of ``attribute`` and ``fold`` (cached on ``data`` until :func:`_em_path` ends the fold's
    path). A group's pairs are contiguous in :func:`_m_step_pairs`'s order and a fold takes whole groups (SIDs: whole
    records' entries), so the fold's pairs, gathered block by block, are the pairs of ``pair_fold == fold`` in the
    same order."""
    cached = data.fold_plans.get((attribute, fold))
    if cached is not None:
        return cached
    in_fold = pairs.pair_fold == fold
    chosen = in_fold if pairs.keep is None else in_fold[pairs.keep]  # the fold's pairs among the kept ones
    keep = None if pairs.keep is None else pairs.keep[in_fold]
    del in_fold
    plan = pairs.plan
    fold_plan = dataclasses.replace(
        plan,
        values=plan.values[chosen],
        by_profile_index=None if plan.by_profile_index is None else plan.by_profile_index[chosen],
        feature_index=tuple(index[chosen] for index in plan.feature_index),
    )
    sid = data.sids.get(attribute)
    result = _FoldPairs(
        fold_plan,
        tuple(np.flatnonzero(block.fold == fold) for block in data.groups if attribute in block.attributes),
        None if sid is None else np.flatnonzero(sid.records % 2 == fold),
        keep,
    )
    data.fold_plans[(attribute, fold)] = result
    return result


def _m_step(data: _ReleaseData, smoothing: float, fold: int | None = None) -> NaiveBayesModel:
    """Naive-Bayes counts from the current responsibilities (only the rows of ``fold`` when given).

    The pairs and their count indices are built once per release (:func:`_m_step_pairs`); each round gathers the
    weights in the same order and counts them with the same ``np.bincount`` calls, so the model is the same, bit for
    bit, as counting freshly built pairs every round. With ``fold``, only the fold's pairs are gathered and counted
    (:func:`_fold_plan`): the other pairs' weights would count as 0.0, and adding 0.0 changes no sum, so the model is
    the one of weighting every pair by its fold, bit for bit, with half the work. With ``fold``, the responsibilities
    must be those :func:`_e_step` with the same ``fold`` keeps (only the fold's groups of the blocks of at most
    :data:`_FOLD_ONLY_GROUP_SIZE` members, only the fold's SID entries)."""
    log_prior, log_conditional = {}, {}
    for attribute in data.domains:
        pairs = _m_step_pairs(data, attribute)
        blocks = [block for block in data.groups if attribute in block.attributes]
        sid = data.sids.get(attribute)
        if fold is None:
            plan, keep = pairs.plan, pairs.keep
            pieces = [block.marginals.reshape(-1) for block in blocks]
            if sid is not None:
                pieces.append(sid.responsibility)
        else:
            half = _fold_plan(data, attribute, pairs, fold)
            plan, keep = half.plan, half.keep
            # the fold's E-step kept only the fold's groups (blocks of at most _FOLD_ONLY_GROUP_SIZE) and SID entries
            pieces = [
                (block.marginals if block.members.shape[1] <= _FOLD_ONLY_GROUP_SIZE else block.marginals[rows]).reshape(-1)
                for block, rows in zip(blocks, half.block_rows, strict=True)
            ]
            if sid is not None and half.sid_entries is not None:
                pieces.append(sid.responsibility)
        weights = np.concatenate(pieces) if pieces else np.zeros(0)
        del pieces
        kept = weights if keep is None else weights[keep]
        log_prior[attribute], log_conditional[attribute] = _estimate_from(plan, kept, smoothing)
    return NaiveBayesModel(log_prior, log_conditional)


def _no_association(model: NaiveBayesModel, data: _ReleaseData, smoothing: float, fold: int | None = None) -> NaiveBayesModel:
    """``model``'s value priors with every conditional replaced by the quasi-identifiers' marginal:
    the model that learned nothing (inside a group every assignment is equally likely)."""
    rows = np.arange(len(data.feature_codes)) if fold is None else np.flatnonzero(np.arange(len(data.feature_codes)) % 2 == fold)
    conditional = {}
    for attribute, tables in model.log_conditional.items():
        flat = []
        for j, table in enumerate(tables):
            counts = np.bincount(data.feature_codes[rows, j], minlength=data.n_features[j]) + smoothing
            flat.append(np.repeat(np.log(counts / counts.sum())[None, :], table.shape[0], axis=0))
        conditional[attribute] = flat
    return NaiveBayesModel(model.log_prior, conditional)


def _held_out_log_likelihood(model: NaiveBayesModel, data: _ReleaseData, fold: int) -> float:
    """log P(quasi-identifiers of the group members | the group's values) summed over the groups
    (SAC~ and exactly computed SIDs, at most MAX_EXACT_GROUP_SIZE) of ``fold``: every assignment
    of the group's candidates to its members, value priors left out (the values are given)."""
    total: Any = 0.0
    for block in data.groups:
        rows = np.flatnonzero(block.fold == fold)
        size = block.members.shape[1]
        if not len(rows) or size > MAX_EXACT_GROUP_SIZE:
            continue
        # the fold's groups through the block's own look-ups (no copy of the fold's arrays kept between rounds)
        log_likelihood = _group_log_likelihood(model, data, block, rows)
        perms = _permutations(size)
        weights = log_likelihood[:, np.arange(size)[None, :], perms].sum(axis=2)
        peak = weights.max(axis=1, keepdims=True)
        per_group = peak[:, 0] + np.log(np.exp(weights - peak).sum(axis=1))
        for attribute in block.attributes:
            per_group -= model.log_prior[attribute][np.maximum(block.candidate_values[attribute][rows], 0)].sum(axis=1)
        total += float(per_group[np.isfinite(per_group)].sum())
    return total


def _em_path(
    data: _ReleaseData, smoothing: float, n_iterations: int, fold: int | None, on_round: Callable[[], None] | None = None
) -> list[NaiveBayesModel]:
    """Models after 0 (no association), 1, …, ``n_iterations`` EM rounds, trained on ``fold`` (all when None);
    ``on_round()`` is called after each round."""
    _e_step(None, data, fold)
    model = _m_step(data, smoothing, fold)
    path = [_no_association(model, data, smoothing, fold), model]
    if on_round is not None:
        on_round()
    for _ in range(n_iterations - 1):
        _e_step(model, data, fold)
        model = _m_step(data, smoothing, fold)
        path.append(model)
        if on_round is not None:
            on_round()
    data.fold_plans.clear()  # a fold's pairs serve its own path only
    return path


def _fold_scores(
    data: _ReleaseData, smoothing: float, n_iterations: int, fold: int, on_round: Callable[[], None] | None = None
) -> np.ndarray:
    """float64 ``(n_iterations + 1,)``: the held-out log-likelihood, on the groups of the OTHER half, of each model of
    ``fold``'s EM path (0 rounds … ``n_iterations``)."""
    scores = np.zeros(n_iterations + 1)
    for rounds, model in enumerate(_em_path(data, smoothing, n_iterations, fold, on_round)):
        scores[rounds] = _held_out_log_likelihood(model, data, 1 - fold)
    return scores


def _prepare_shared(data: _ReleaseData) -> None:
    """Build now what the EM paths would build on first use and then only read: every attribute's M-step pairs
    (:func:`_m_step_pairs`, which shares its index with the blocks as look-ups) and every block's and SID's
    look-up (:func:`_block_lookup`, :func:`_sid_lookup`, as :func:`_group_log_likelihood` and :func:`_e_step` would,
    with the model's number of values, which is the domain's). Afterwards an EM path writes only responsibilities and fold plans, so two
    paths can share ``data`` through :func:`_fold_view`."""
    for attribute in data.domains:
        _m_step_pairs(data, attribute)
    for block in data.groups:
        for attribute in block.attributes:
            _block_lookup(data, block, attribute, len(data.domains[attribute]))
    for attribute, sid in data.sids.items():
        _sid_lookup(data, sid, len(data.domains[attribute]))


def _fold_view(data: _ReleaseData) -> _ReleaseData:
    """``data`` for one fold's EM path on a thread of its own: the same records, candidates, M-step pairs and
    look-ups (prepared by :func:`_prepare_shared`, read only), its own responsibilities and fold plans (which an EM
    path writes)."""
    view = _ReleaseData(data.feature_codes, data.n_features, data.domains)
    view.groups = [
        _GroupBlock(
            block.attributes, block.members, block.candidate_values, kind=block.kind, fold=block.fold, lookups=block.lookups
        )
        for block in data.groups
    ]
    view.sids = {
        attribute: _SidBlock(sid.records, sid.values, sid.availability, lookup=sid.lookup) for attribute, sid in data.sids.items()
    }
    view.m_step_pairs = data.m_step_pairs
    return view


def _held_out_scores(
    data: _ReleaseData, smoothing: float, n_iterations: int, threads: int, on_round: Callable[[], None]
) -> np.ndarray:
    """The two-fold held-out score of every number of EM rounds (:func:`_fold_scores` of fold 0 plus that of fold 1).

    The two folds' paths are independent (each starts from uniform responsibilities and writes only its own), so
    with ``threads`` >= 2 they run at the same time on two threads, each on a :func:`_fold_view` of ``data`` (numpy
    releases the GIL in its array loops, so the second thread uses a second core). Every number is the same, bit for
    bit, as one path after the other: the same operations on the same arrays, the scores added in the same order."""
    _prepare_shared(data)
    if threads >= 2:
        from concurrent.futures import ThreadPoolExecutor

        # fold 1 on a thread of its own, fold 0 on this one (one thread more, not two: each thread that allocates
        # may get a heap arena of its own, which the others' free memory does not serve); leaving the block waits
        # for fold 1 even when fold 0 fails
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix="held-out-fold") as pool:
            second = pool.submit(_fold_scores, _fold_view(data), smoothing, n_iterations, 1, on_round)
            first = _fold_scores(_fold_view(data), smoothing, n_iterations, 0, on_round)
            per_fold = [first, second.result()]
    else:
        per_fold = [_fold_scores(data, smoothing, n_iterations, fold, on_round) for fold in (0, 1)]
    scores = np.zeros(n_iterations + 1)
    for fold_scores in per_fold:
        scores += fold_scores
    return scores


def _sample_mask(n: int, fraction: float) -> np.ndarray:
    """bool ``(n,)``: a fixed, content-free choice of about ``fraction`` of the record indices (a
    multiplicative hash of the index; record indices follow the release's keyed row order)."""
    hashed = (np.arange(n, dtype=np.uint64) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(40)
    return hashed < np.uint64(int(min(1.0, fraction) * 2**24))


def _fit_sample(data: _ReleaseData, max_records: int | None) -> _ReleaseData:
    """The part of ``data`` the model is fitted on: everything when the release has at most
    ``max_records`` records, else about ``max_records`` of them, taken as whole SAC~ groups and
    exactly computed SIDs (a group is kept when its first member's index is) and single records of
    the other SIDs. The blocks share ``data.feature_codes``."""
    n = len(data.feature_codes)
    if max_records is None or n <= max_records:
        return data
    keep = _sample_mask(n, max_records / n)
    sample = _ReleaseData(data.feature_codes, data.n_features, data.domains)
    for block in data.groups:
        chosen = keep[block.members.min(axis=1)] if block.members.size else np.zeros(0, dtype=bool)
        sample.groups.append(
            _GroupBlock(
                block.attributes,
                block.members[chosen],
                {a: v[chosen] for a, v in block.candidate_values.items()},
                kind=block.kind,
                fold=block.fold[chosen],
            )
        )
    for attribute, sid in data.sids.items():
        chosen = keep[sid.records]
        sample.sids[attribute] = _SidBlock(sid.records[chosen], sid.values[chosen], sid.availability[chosen])
    return sample


def fit_naive_bayes_on_release(
    quasi_identifiers: Sequence[str],
    sensitive_attributes: Sequence[str],
    *,
    sac_released: pd.DataFrame,
    attribute_table: pd.DataFrame,
    id_table: pd.DataFrame,
    attribute_clusters: pd.DataFrame,
    n_iterations: int = 15,
    smoothing: float = 1.0,
    select_iterations: bool = True,
    fit_max_records: int | None = DEFAULT_FIT_MAX_RECORDS,
    progress: Progress = no_progress,
    threads: int = 1,
) -> tuple[NaiveBayesModel, _ReleaseData, np.ndarray]:
    """Fit the adversary's naive-Bayes model by EM on a mixed or Rating release (published tables only).

    Parameters
    ----------
    quasi_identifiers, sensitive_attributes
        Column names of the release.
    sac_released
        ``row_id``, ``group_id``, quasi-identifiers, sensitive attributes (empty for Rating).
    attribute_table
        ``row_id``, quasi-identifiers, one SID column per sensitive attribute (``<NA>`` = suppressed).
    id_table
        ``attribute``, ``sid``, ``value``, ``count``.
    attribute_clusters
        ``cluster_id``, ``attribute`` (an attribute not listed is permuted alone).
    n_iterations
        Largest number of EM rounds (>= 1).
    smoothing
        Laplace pseudo-count (> 0).
    select_iterations
        True (default): use the number of rounds in ``0..n_iterations`` with the best two-fold
        held-out likelihood (0 = the model without association); False: exactly ``n_iterations``.
    fit_max_records
        Releases with more records fit the model (EM and the choice of rounds) on a fixed sample of
        about this many records, taken as whole groups and SIDs (:func:`_fit_sample`); the final
        E-step, and so every posterior, is still computed on every record. ``None``: fit on all.
        The model has |D_a| × Σ_j |X_j| parameters per attribute (a few thousand on Adult), which a
        million records estimate as well as ten (measured in docs/posterior.md).
    threads
        With 2 or more (and ``select_iterations``), the two held-out folds' EM paths run at the same time on two
        threads (:func:`_held_out_scores`; about 30 % less wall time on two idle cores, one more set of
        responsibilities in memory); the model is the same, bit for bit. 1 (default): one after the other.
    progress
        Called with (EM rounds done, EM rounds in all) after each round (:mod:`pipeline.core.progress`; from either
        fold's thread, one call at a time); the total
        is an upper bound until the number of rounds is chosen.

    Returns
    -------
    tuple
        (model, encoded release with the final E-step's responsibilities, release row id of every
        record index (int64; SAC~ rows first, then attribute-table rows)).

    Raises
    ------
    ValueError
        ``n_iterations < 1``, ``smoothing <= 0`` or ``threads < 1``.

    References
    ----------
    Kifer, SIGMOD 2009, §5 (EM over the bucketized table; the latent variable is the assignment).
    """
    if n_iterations < 1:
        raise ValueError(f"n_iterations must be >= 1, got {n_iterations}")
    if not smoothing > 0:
        raise ValueError(f"smoothing must be > 0, got {smoothing}")
    if threads < 1:
        raise ValueError(f"threads must be >= 1, got {threads}")
    data, row_ids = _release_data(
        quasi_identifiers,
        sensitive_attributes,
        sac_released=sac_released,
        attribute_table=attribute_table,
        id_table=id_table,
        attribute_clusters=attribute_clusters,
    )
    # How many EM rounds to trust: EM on a release drifts towards over-confident models (the
    # latent assignment lets it explain noise; docs/posterior.md), so the adversary itself picks
    # the number of rounds (0 = no association) that best predicts the quasi-identifiers of the
    # OTHER half of the groups, from the values, trained on one half (two-fold, summed).
    fit = _fit_sample(data, fit_max_records)
    scores = np.zeros(n_iterations + 1)
    # progress in EM rounds: two folds of n_iterations, then the selected number (at most n_iterations) on all
    rounds_done, rounds_total = 0, (3 if select_iterations else 1) * n_iterations
    progress_lock = threading.Lock()  # the two folds' paths may report from two threads

    def round_done() -> None:
        nonlocal rounds_done
        with progress_lock:
            rounds_done += 1
            progress(rounds_done, max(rounds_total, rounds_done))

    if select_iterations:
        scores = _held_out_scores(fit, smoothing, n_iterations, threads, round_done)
    selected = int(np.argmax(scores)) if select_iterations else n_iterations
    rounds_total = rounds_done + max(selected, 1)
    path = _em_path(fit, smoothing, max(selected, 1), None, round_done)
    model = path[selected]
    # the fit's prepared pairs are not needed by the final E-step and the posteriors
    fit.m_step_pairs.clear()
    del fit, path
    _e_step(model, data)
    # the look-ups served the E-steps; the posteriors need only the responsibilities (the blocks' marginals)
    for block in data.groups:
        block.lookups.clear()
    for sid in data.sids.values():
        sid.lookup = None
    data.selected_iterations = selected
    data.held_out_scores = scores
    return model, data, row_ids


# --------------------------------------------------------------------------- per-record posteriors


@dataclass(frozen=True)
class PosteriorResult:
    """Per record and sensitive attribute: the adversary's posterior of the TRUE value (PRIVATE use).

    Attributes
    ----------
    row_ids
        int64 ``(n_records,)``: release row ids, SAC~ rows first, then attribute-table rows.
    n_sac
        Number of SAC~ rows among them.
    posterior, population_posterior, self_expected_posterior
        Sensitive attribute -> float64 ``(n_records,)``: the release adversary's posterior of the true value, the
        population posterior (model fitted on the raw records) and Σ_v P(v)² of the adversary's belief (its own
        expectation of the posterior of the truth; compare means to judge calibration).
    bound
        ``(n_parts × attributes)`` frame, the gate's derived frame: one row per (part, sensitive attribute) with
        ``part``, ``attribute``, ``n_cells`` (int64), ``n_cells_above_bound`` (int64), ``max_excess``,
        ``mean_posterior``, ``mean_population_posterior`` (float64); numbers only. Computed attribute by attribute
        without the per-cell frame (tests compare it with the straightforward summary of :attr:`frame`).
    tuple_posterior
        One row per SAC~ row: ``row_id``, ``posterior`` (of the record's whole true tuple: product
        over attribute clusters of the cluster sub-tuple's group posterior).
    histogram
        int64 counts of the posteriors in ``HISTOGRAM_EDGES`` bins.
    summary
        Numbers only: ``n_cells``, ``n_cells_above_bound``, ``n_records_above_bound``,
        ``max_excess``, ``mean_posterior``, ``mean_population_posterior``, ``max_posterior``,
        ``n_sac_cells_above_bound``, ``n_attribute_table_cells_above_bound``,
        ``share_sac_rows_tuple_above_half``, ``mean_self_expected_posterior``, ``calibration_gap``,
        ``em_iterations_max``, ``em_iterations_selected``, ``slack``, ``ell``.
    ell, slack
        The bound's parameters: bound = max(1/ℓ, population posterior) + slack.
    """

    row_ids: np.ndarray
    n_sac: int
    posterior: dict[str, np.ndarray]
    population_posterior: dict[str, np.ndarray]
    self_expected_posterior: dict[str, np.ndarray]
    bound: pd.DataFrame
    tuple_posterior: pd.DataFrame
    histogram: np.ndarray
    summary: dict[str, Any]
    ell: int
    slack: float

    @functools.cached_property
    def frame(self) -> pd.DataFrame:
        """One row per (released record, sensitive attribute), built on first use (1.7 GB at 10M records):
        ``row_id`` (int64, release id), ``part`` (categorical ``"sac"`` / ``"attribute_table"``), ``attribute``
        (categorical), ``posterior``, ``population_posterior``, ``bound`` (= max(1/ℓ, population_posterior) + slack),
        ``excess`` (posterior - bound), ``above_bound``, ``self_expected_posterior``."""
        attributes = list(self.posterior)
        n_records = len(self.row_ids)
        posterior = np.concatenate([self.posterior[a] for a in attributes]) if attributes else np.zeros(0)
        population = np.concatenate([self.population_posterior[a] for a in attributes]) if attributes else np.zeros(0)
        ells = self.summary.get("ell_per_attribute") or {}
        inverse = np.repeat([1.0 / int(ells.get(a, self.ell)) for a in attributes], n_records) if attributes else np.zeros(0)
        bound = np.maximum(inverse, population) + self.slack
        frame = pd.DataFrame(
            copy=False,
            data={  # the columns are fresh arrays: no copy into one 2-D block
                "row_id": np.tile(self.row_ids, len(attributes)),
                "part": pd.Categorical.from_codes(
                    np.tile((np.arange(n_records) >= self.n_sac).astype(np.int8), len(attributes)),
                    categories=["sac", "attribute_table"],
                ),
                "attribute": pd.Categorical.from_codes(
                    np.repeat(np.arange(len(attributes), dtype=np.int16), n_records), categories=attributes
                ),
                "posterior": posterior,
                "population_posterior": population,
                "self_expected_posterior": np.concatenate([self.self_expected_posterior[a] for a in attributes])
                if attributes
                else np.zeros(0),
                "bound": bound,
                "excess": posterior - bound,
            },
        )
        frame["above_bound"] = frame["excess"] > 1e-12
        return frame


def population_posterior(
    raw: pd.DataFrame, quasi_identifiers: Sequence[str], sensitive_attributes: Sequence[str], smoothing: float
) -> dict[str, np.ndarray]:
    """P(true value | raw quasi-identifiers) per raw record: the naive-Bayes model fitted on the raw
    table (true values, no release); attribute -> float64 array aligned with ``raw``'s rows.

    Records with the same quasi-identifier tuple share one normalised (values × profiles) table, so
    the cost is one look-up per record (chunks of records × values beyond ``_PROFILE_TABLE_CELLS``)."""

    def codes_of(column: pd.Series) -> tuple[np.ndarray, int]:
        codes, uniques = pd.factorize(column, use_na_sentinel=False)  # a missing value is a value of its own
        return codes.astype(np.int64), max(1, len(uniques))

    features, sizes = [], []
    for column in quasi_identifiers:
        codes, size = codes_of(raw[column])
        features.append(codes)
        sizes.append(size)
    feature_codes = np.stack(features, axis=1) if features else np.zeros((len(raw), 0), dtype=np.int64)
    value_codes, n_values = {}, {}
    for attribute in sensitive_attributes:
        value_codes[attribute], n_values[attribute] = codes_of(raw[attribute])
    model = fit_naive_bayes(feature_codes, value_codes, n_features=sizes, n_values=n_values, smoothing=smoothing)
    profile, profile_features = _profiles(feature_codes)
    out = {}
    for attribute in sensitive_attributes:
        truth_codes = value_codes[attribute]
        if profile is None:
            out[attribute] = np.zeros(0)
            continue
        if n_values[attribute] * len(profile_features) <= _PROFILE_TABLE_CELLS:
            out[attribute] = np.exp(_normalised_profile_table(model, attribute, profile_features)[truth_codes, profile])
            continue
        # many values (issue 14: 100,000 distinct values in one attribute): the same table, a slice of profiles
        # at a time, at most _PROFILE_TABLE_CELLS numbers (never records x values)
        per_slice = max(1, _PROFILE_TABLE_CELLS // n_values[attribute])
        order = np.argsort(profile, kind="stable")
        bounds = np.searchsorted(profile[order], np.arange(0, len(profile_features) + per_slice, per_slice))
        truth = np.empty(len(raw))
        for k, start in enumerate(range(0, len(profile_features), per_slice)):
            rows = order[bounds[k] : bounds[k + 1]]
            table = _normalised_profile_table(model, attribute, profile_features[start : start + per_slice])
            truth[rows] = np.exp(table[truth_codes[rows], profile[rows] - start])
        out[attribute] = truth
    _forget_profiles(feature_codes)  # the raw records' codes are not used again (the release's model is fitted next)
    return out


def _normalised_profile_table(model: NaiveBayesModel, attribute: str, profile_features: np.ndarray) -> np.ndarray:
    """float64 ``(|D_a|, len(profile_features))``: log P(value | profile), each column normalised."""
    table = model.log_joint(attribute, profile_features).T  # (values, profiles)
    table = table - table.max(axis=0, keepdims=True)
    return table - np.log(np.exp(table).sum(axis=0, keepdims=True))


def _truth_posteriors(data: _ReleaseData, attribute: str, truth: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per record index: the adversary's posterior of the true value (``truth``: int64 value code per
    record, -1 unknown) and its own expectation Σ_v P(v)² of that posterior, straight from the blocks
    (a record belongs to exactly one group, exact SID or SID entry list per attribute)."""
    n = len(data.feature_codes)
    posterior, self_expected = np.zeros(n), np.zeros(n)
    for block in data.groups:
        if attribute not in block.attributes:
            continue
        candidates = block.candidate_values[attribute]  # (G, L)
        marginals = block.marginals * (candidates >= 0)[:, None, :]  # [g, i, k]
        hit = candidates[:, None, :] == truth[block.members][:, :, None]
        posterior[block.members] = (marginals * hit).sum(axis=2)
        # P(value of candidate k) for member i = Σ over candidates k' with the same value; Σ_v P(v)² = Σ_k M_k P(v_k)
        same = (candidates[:, :, None] == candidates[:, None, :]).astype(np.float64)
        self_expected[block.members] = (marginals * np.matmul(marginals, same)).sum(axis=2)
    sid = data.sids.get(attribute)
    if sid is not None and len(sid.records):
        keep = sid.values >= 0
        records, values, weights = sid.records[keep], sid.values[keep], sid.responsibility[keep]
        hit = values == truth[records]
        posterior += np.bincount(records[hit], weights=weights[hit], minlength=n)
        self_expected += np.bincount(records, weights=weights**2, minlength=n)  # one entry per (record, value)
    return posterior, self_expected


def release_posteriors(
    raw_records: pd.DataFrame,
    row_map: pd.DataFrame,
    quasi_identifiers: Sequence[str],
    sensitive_attributes: Sequence[str],
    *,
    ell: int,
    sac_released: pd.DataFrame,
    attribute_table: pd.DataFrame,
    id_table: pd.DataFrame,
    attribute_clusters: pd.DataFrame,
    slack: float = 0.05,
    ell_per_attribute: Mapping[str, int] | None = None,
    n_iterations: int = 15,
    smoothing: float = 1.0,
    select_iterations: bool = True,
    fit_max_records: int | None = DEFAULT_FIT_MAX_RECORDS,
    progress: Progress = no_progress,
    threads: int = 1,
) -> PosteriorResult:
    """Run the learned-model adversary on a mixed or Rating release and score every true value.

    Parameters
    ----------
    raw_records
        PRIVATE: ``row_id`` (internal id) + quasi-identifiers + sensitive attributes; every input
        record (the population model is fitted on all of them).
    row_map
        PRIVATE: ``source_row_id`` (internal id) -> ``row_id`` (release id).
    quasi_identifiers, sensitive_attributes
        Column names.
    ell
        ℓ >= 2 (the bound's 1/ℓ).
    sac_released, attribute_table, id_table, attribute_clusters
        The candidate release (see :func:`fit_naive_bayes_on_release`).
    slack
        Tolerance added to the bound, in [0, 1].
    ell_per_attribute
        Optional ℓ_i per sensitive attribute (SPEC §6.7): the bound of attribute i is then max(1/ℓ_i, population
        posterior) + slack (``summary`` gains ``ell_per_attribute``); None: 1/ℓ for every attribute.
    n_iterations, smoothing, select_iterations, fit_max_records, progress, threads
        See :func:`fit_naive_bayes_on_release`.

    Returns
    -------
    PosteriorResult

    Raises
    ------
    ValueError
        ``ell < 2``, ``slack`` outside [0, 1], a released row missing from ``row_map`` or bad EM
        parameters.

    References
    ----------
    Kifer, SIGMOD 2009 (deFinetti attack); Machanavajjhala et al. 2007 (the 1/ℓ bound).
    """
    if ell < 2:
        raise ValueError(f"ell must be >= 2, got {ell}")
    if not 0.0 <= slack <= 1.0:
        raise ValueError(f"slack must be in [0, 1], got {slack}")
    quasi_identifier_columns, sensitive_attribute_columns = list(quasi_identifiers), list(sensitive_attributes)
    # the true side first (row ids -> raw records, the population posterior reduced to the released records), so
    # that the model fitted on the release below is the only large thing alive while it is fitted
    row_ids = np.concatenate([sac_released["row_id"].to_numpy(np.int64), attribute_table["row_id"].to_numpy(np.int64)])
    to_source = row_map.set_index("row_id")["source_row_id"]
    source = to_source.reindex(row_ids)
    if source.isna().any():
        raise ValueError("a released row is missing from the row map")
    raw_position = pd.Index(raw_records["row_id"].to_numpy(np.int64)).get_indexer(source.to_numpy(np.int64))
    if (raw_position < 0).any():
        raise ValueError("the row map names a record that is not in raw_records")
    del to_source, source
    population = {
        attribute: values[raw_position]
        for attribute, values in population_posterior(
            raw_records, quasi_identifier_columns, sensitive_attribute_columns, smoothing
        ).items()
    }
    model, data, fitted_row_ids = fit_naive_bayes_on_release(
        quasi_identifier_columns,
        sensitive_attribute_columns,
        sac_released=sac_released,
        attribute_table=attribute_table,
        id_table=id_table,
        attribute_clusters=attribute_clusters,
        n_iterations=n_iterations,
        smoothing=smoothing,
        select_iterations=select_iterations,
        fit_max_records=fit_max_records,
        progress=progress,
        threads=threads,
    )
    if not np.array_equal(fitted_row_ids, row_ids):  # pragma: no cover - the fit keeps the release's order
        raise AssertionError("the fitted records are not the released records in release order")
    n_records = len(row_ids)
    n_sac = len(sac_released)

    truth = {
        attribute: text_codes(raw_records[attribute], pd.Index(data.domains[attribute], dtype=object))[raw_position]
        for attribute in sensitive_attribute_columns
    }
    posterior, self_expected = {}, {}  # self_expected: the adversary's own expectation of its posterior of the truth
    for attribute in sensitive_attribute_columns:
        posterior[attribute], self_expected[attribute] = _truth_posteriors(data, attribute, truth[attribute])
    tuple_posterior = np.ones(n_sac)
    for block in data.groups:
        if block.kind != "sac":
            continue
        truth_match = np.ones(block.marginals.shape, dtype=bool)
        for attribute in block.attributes:
            truth_match &= block.candidate_values[attribute][:, None, :] == truth[attribute][block.members][:, :, None]
        tuple_posterior[block.members] *= (block.marginals * truth_match).sum(axis=2)
    selected_iterations = int(data.selected_iterations)
    _forget_profiles(data.feature_codes)
    del model, data, truth  # the model's blocks (gigabytes at 10M records) are not needed for the figures

    # figures attribute by attribute (no frame of every cell: 32 million rows at 10M records)
    histogram = np.zeros(len(HISTOGRAM_EDGES) - 1, dtype=np.int64)
    record_above = np.zeros(n_records, dtype=bool)
    in_sac = np.arange(n_records) < n_sac
    bound_rows = []
    n_cells = n_above = n_sac_above = 0
    max_excess = max_posterior = -np.inf
    sums = {"posterior": 0.0, "population": 0.0, "self_expected": 0.0}
    for attribute in sensitive_attribute_columns:
        values, prior = posterior[attribute], population[attribute]
        attribute_ell = ell if ell_per_attribute is None else int(ell_per_attribute[attribute])
        excess = values - (np.maximum(1.0 / attribute_ell, prior) + slack)
        above = excess > 1e-12
        record_above |= above
        histogram += np.histogram(np.clip(values, 0.0, 1.0), bins=HISTOGRAM_EDGES)[0]
        n_cells += n_records
        n_above += int(above.sum())
        n_sac_above += int(above[in_sac].sum())
        if n_records:
            max_excess, max_posterior = max(max_excess, float(excess.max())), max(max_posterior, float(values.max()))
        sums["posterior"] += float(values.sum())
        sums["population"] += float(prior.sum())
        sums["self_expected"] += float(self_expected[attribute].sum())
        for part, rows in (("attribute_table", ~in_sac), ("sac", in_sac)):
            if rows.any():
                bound_rows.append(
                    {
                        "part": part,
                        "attribute": attribute,
                        "n_cells": int(rows.sum()),
                        "n_cells_above_bound": int(above[rows].sum()),
                        "max_excess": float(excess[rows].max()),
                        "mean_posterior": float(values[rows].mean()),
                        "mean_population_posterior": float(prior[rows].mean()),
                    }
                )
    bound = _bound_frame(bound_rows, sensitive_attribute_columns)
    tuple_frame = pd.DataFrame({"row_id": row_ids[:n_sac], "posterior": tuple_posterior})
    mean_posterior = sums["posterior"] / n_cells if n_cells else 0.0
    summary: dict[str, Any] = {
        "ell": int(ell),
        "slack": float(slack),
        "em_iterations_max": int(n_iterations),
        "em_iterations_selected": selected_iterations,
        "n_records": int(n_records),
        "n_cells": int(n_cells),
        "n_cells_above_bound": int(n_above),
        "n_records_above_bound": int(record_above.sum()),
        "n_sac_cells_above_bound": int(n_sac_above),
        "n_attribute_table_cells_above_bound": int(n_above - n_sac_above),
        "max_excess": float(max_excess) if n_cells else 0.0,
        "max_posterior": float(max_posterior) if n_cells else 0.0,
        "mean_posterior": float(mean_posterior),
        "mean_population_posterior": float(sums["population"] / n_cells) if n_cells else 0.0,
        # calibration: a well-calibrated adversary's mean posterior of the truth equals its own
        # expectation of it; a large positive gap means over-confidence (then failures are noise)
        "mean_self_expected_posterior": float(sums["self_expected"] / n_cells) if n_cells else 0.0,
        "calibration_gap": float(sums["self_expected"] / n_cells - mean_posterior) if n_cells else 0.0,
        "share_sac_rows_tuple_above_half": float((tuple_posterior > 0.5).mean()) if n_sac else 0.0,
    }
    if ell_per_attribute is not None:
        summary["ell_per_attribute"] = {a: int(ell_per_attribute[a]) for a in sensitive_attribute_columns}
    return PosteriorResult(
        row_ids=row_ids,
        n_sac=n_sac,
        posterior=posterior,
        population_posterior=population,
        self_expected_posterior=self_expected,
        bound=bound,
        tuple_posterior=tuple_frame,
        histogram=histogram,
        summary=summary,
        ell=int(ell),
        slack=float(slack),
    )


def _bound_frame(rows: list[dict[str, Any]], attributes: Sequence[str]) -> pd.DataFrame:
    """The rows of :attr:`PosteriorResult.bound` in its order and dtypes (part, then attribute in column order)."""
    columns = ["part", "attribute", "n_cells", "n_cells_above_bound", "max_excess", "mean_posterior", "mean_population_posterior"]
    frame = pd.DataFrame(rows, columns=columns)
    frame["part"] = pd.Categorical(frame["part"], categories=["sac", "attribute_table"])
    frame["attribute"] = pd.Categorical(frame["attribute"], categories=list(attributes))
    frame = frame.sort_values(["part", "attribute"]).reset_index(drop=True)
    return frame.astype({"n_cells": "int64", "n_cells_above_bound": "int64"})
