"""The public attacks on any belief: the join, one known value, a victim's distribution, summaries (:mod:`pipeline.core.attacks`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from pipeline.core.attacks.mixture import ReleaseBelief, _candidate_weights, _mixture_join, _mixture_one_known, _unit_distribution
from pipeline.core.attacks.naive import NaiveBelief, _naive_beliefs, _naive_join, _naive_one_known
from pipeline.core.attacks.victims import HISTOGRAM_EDGES
from pipeline.core.columns import as_text


def _check_victims(belief: ReleaseBelief | NaiveBelief, victims: pd.DataFrame) -> pd.DataFrame:
    missing = [c for c in ("source_row_id", *belief.quasi_identifiers, *belief.sensitive_attributes) if c not in victims.columns]
    if missing:
        raise ValueError(f"column(s) {missing} not in the victims table (see victim_table)")
    return victims.reset_index(drop=True)


def join_attack(belief: ReleaseBelief | NaiveBelief, victims: pd.DataFrame) -> pd.DataFrame:
    """P2's join attack: the adversary knows the victim's quasi-identifiers and infers the
    victim's full sensitive tuple from every published table.

    Parameters
    ----------
    belief
        From :func:`kl_release_belief`, :func:`mixed_release_belief`,
        :func:`rating_release_belief` or :func:`naive_release_belief`.
    victims
        ``source_row_id`` + quasi-identifiers + sensitive attributes (true values, text), one
        row per victim (:func:`victim_table`). PRIVATE: used only to score.

    Returns
    -------
    pandas.DataFrame
        One row per victim, in the order of ``victims``: ``source_row_id`` (int64),
        ``probability`` (float64 in [0, 1]: the belief's probability of the true tuple; naive
        release: the product of the per-attribute probabilities), ``certain`` (bool: the belief
        is a point mass, necessarily on the truth) and ``n_candidates`` (int64: tuples with
        positive belief; naive: product of the per-attribute counts, an upper bound). Mixture
        beliefs add ``n_candidate_rows`` (int64).

    Raises
    ------
    ValueError
        Missing victim columns; a joint space larger than ``MAX_CODE_SPACE``.
    """
    victims = _check_victims(belief, victims)
    if isinstance(belief, NaiveBelief):
        return _naive_join(belief, victims)
    return _mixture_join(belief, victims)


def one_known_value_attacks(
    belief: ReleaseBelief | NaiveBelief, victims: pd.DataFrame, pairs: Sequence[tuple[str, str]] | None = None
) -> dict[tuple[str, str], pd.DataFrame]:
    """The one-known-value adversary for several ordered pairs (known attribute, target attribute).

    The adversary knows the victim's quasi-identifiers and its true value ``a`` of the known
    attribute ``A`` and infers its value of ``B`` (Bayes inside the mixture of candidate rows;
    the naive release: the join with ``S_A`` fixed to ``a``; see the module docstring).

    Parameters
    ----------
    belief, victims
        As :func:`join_attack`.
    pairs
        Ordered pairs ``(A, B)``, ``A != B``; default every ordered pair of sensitive attributes.

    Returns
    -------
    dict
        ``(A, B)`` -> frame with one row per victim: ``source_row_id`` (int64),
        ``probability`` (float64: belief in the true ``B`` value), ``pinned`` (bool: a single
        ``B`` value has positive belief) and ``n_candidates`` (int64: ``B`` values with
        positive belief).

    Raises
    ------
    ValueError
        Missing columns or an invalid pair.
    """
    victims = _check_victims(belief, victims)
    sensitive_attribute_columns = belief.sensitive_attributes
    if pairs is None:
        pairs = [(a, b) for a in sensitive_attribute_columns for b in sensitive_attribute_columns if a != b]
    pairs = [(p[0], p[1]) for p in pairs]
    bad = [p for p in pairs if p[0] == p[1] or p[0] not in sensitive_attribute_columns or p[1] not in sensitive_attribute_columns]
    if bad:
        raise ValueError(
            f"invalid (known, target) pair(s) {bad}; both must be distinct sensitive attributes of {list(sensitive_attribute_columns)}"
        )
    if isinstance(belief, NaiveBelief):
        return _naive_one_known(belief, victims, pairs)
    return _mixture_one_known(belief, victims, pairs)


def one_known_value_attack(
    belief: ReleaseBelief | NaiveBelief, victims: pd.DataFrame, known_attribute: str, target_attribute: str
) -> pd.DataFrame:
    """:func:`one_known_value_attacks` for one ordered pair (known attribute, target attribute)."""
    return one_known_value_attacks(belief, victims, [(known_attribute, target_attribute)])[(known_attribute, target_attribute)]


def belief_distribution(belief: ReleaseBelief | NaiveBelief, quasi_identifier_values: Mapping[str, str]) -> pd.DataFrame:
    """The join adversary's whole belief for one QI tuple (for inspection and tests).

    Returns
    -------
    pandas.DataFrame
        One row per sensitive tuple with positive belief: the sensitive attributes (text) and
        ``probability`` (float64; sums to 1 when some row is a candidate, empty otherwise).
        Naive release: the product of the per-attribute beliefs (the independence
        approximation of :func:`join_attack`).
    """
    sensitive_attribute_columns = list(belief.sensitive_attributes)
    context = pd.DataFrame([{q: str(quasi_identifier_values[q]) for q in belief.quasi_identifiers}])
    if isinstance(belief, NaiveBelief):
        counts = _naive_beliefs(belief, context)
        frame = pd.DataFrame({"probability": [1.0]})
        for j in sensitive_attribute_columns:
            row = counts[j][0]
            if row.sum() == 0:
                return pd.DataFrame(
                    {**{a: pd.Series(dtype=object) for a in sensitive_attribute_columns}, "probability": pd.Series(dtype=float)}
                )
            values = pd.DataFrame({j: [belief.domains[j][k] for k in np.flatnonzero(row)], "p": row[row > 0] / row.sum()})
            frame = frame.merge(values, how="cross")
            frame["probability"] *= frame.pop("p")
        return frame[[*sensitive_attribute_columns, "probability"]]
    weights = _candidate_weights(belief, context)
    total = weights.sum()
    units, codes, probabilities, radices = _unit_distribution(belief, sensitive_attribute_columns)
    if total == 0:
        return pd.DataFrame(
            {**{a: pd.Series(dtype=object) for a in sensitive_attribute_columns}, "probability": pd.Series(dtype=float)}
        )
    per_unit = np.asarray(weights.todense()).ravel()[units] * probabilities
    grouped = pd.Series(per_unit).groupby(codes, observed=True).sum()
    grouped = grouped[grouped > 0] / total
    result = {}
    for a, radix in zip(sensitive_attribute_columns, radices, strict=True):
        result[a] = [belief.domains[a][(int(code) // radix) % len(belief.domains[a])] for code in grouped.index]
    return pd.DataFrame({**result, "probability": grouped.to_numpy()})


def summarize_attack(probability: np.ndarray, certain: np.ndarray, *, ell: int) -> dict[str, Any]:
    """Summary numbers of one attack on one release (JSON-safe).

    Parameters
    ----------
    probability
        float, the belief in the truth per victim.
    certain
        bool, the belief is a point mass (``certain`` / ``pinned``).
    ell
        ℓ of the comparison (``share_above_one_over_ell`` counts ``probability > 1/ℓ``).

    Returns
    -------
    dict
        ``n_victims``; ``n_certain`` and ``share_certain``; ``mean``, ``median``, ``p90``,
        ``max`` of the probability; ``share_above_one_over_ell``; ``quantiles`` (probability at
        every percent 0..100); ``histogram`` (``edges`` = :data:`HISTOGRAM_EDGES`, ``counts``
        per bin, the last bin closed, and ``exactly_one`` = victims at probability 1).
    """
    p = np.asarray(probability, dtype=float)
    certain = np.asarray(certain, dtype=bool)
    n = len(p)
    if n == 0:
        return {
            "n_victims": 0,
            "n_certain": 0,
            "share_certain": 0.0,
            "mean": 0.0,
            "median": 0.0,
            "p90": 0.0,
            "max": 0.0,
            "share_above_one_over_ell": 0.0,
            "quantiles": [],
            "histogram": {"edges": list(HISTOGRAM_EDGES), "counts": [], "exactly_one": 0},
        }
    counts, _ = np.histogram(p, bins=np.asarray(HISTOGRAM_EDGES))
    return {
        "n_victims": n,
        "n_certain": int(certain.sum()),
        "share_certain": float(certain.mean()),
        "mean": float(p.mean()),
        "median": float(np.median(p)),
        "p90": float(np.quantile(p, 0.9)),
        "max": float(p.max()),
        "share_above_one_over_ell": float((p > 1.0 / ell + 1e-12).mean()),
        "quantiles": [float(x) for x in np.quantile(p, np.linspace(0, 1, 101))],
        "histogram": {
            "edges": [float(e) for e in HISTOGRAM_EDGES],
            "counts": [int(c) for c in counts],
            "exactly_one": int(certain.sum()),
        },
    }


def population_baseline(
    victims: pd.DataFrame, sensitive_attributes: Sequence[str], pairs: Sequence[tuple[str, str]] | None = None
) -> tuple[pd.DataFrame, dict[tuple[str, str], pd.DataFrame]]:
    """Reference adversary without any release: the victims' own joint distribution (no QIs).

    The belief in a full tuple is its frequency among the victims; knowing ``A = a``, the belief
    in ``B = b`` is ``#(a, b) / #a``. This is what the population statistics alone give away
    (e.g. a value ``a`` held by one record pins everything); a release adds to it.

    Returns
    -------
    (join, one_known)
        Frames in the formats of :func:`join_attack` and :func:`one_known_value_attacks`.
    """
    sensitive_attribute_columns = list(sensitive_attributes)
    if pairs is None:
        pairs = [(a, b) for a in sensitive_attribute_columns for b in sensitive_attribute_columns if a != b]
    text = as_text(victims[sensitive_attribute_columns])
    tuple_count = (
        text.groupby(sensitive_attribute_columns, sort=False, observed=True)[sensitive_attribute_columns[0]]
        .transform("size")
        .to_numpy(float)
    )
    n_tuples = len(text.drop_duplicates())
    join = pd.DataFrame(
        {
            "source_row_id": victims["source_row_id"].to_numpy(np.int64),
            "probability": tuple_count / max(1, len(text)),
            "certain": np.full(len(text), n_tuples == 1),
            "n_candidates": np.full(len(text), n_tuples, dtype=np.int64),
        }
    )
    one_known = {}
    for known, target in pairs:
        both = text.groupby([known, target], sort=False, observed=True)[known].transform("size").to_numpy(float)
        single = text.groupby(known, sort=False, observed=True)[known].transform("size").to_numpy(float)
        n_values = text.groupby(known, sort=False, observed=True)[target].transform("nunique").to_numpy(np.int64)
        one_known[(known, target)] = pd.DataFrame(
            {
                "source_row_id": victims["source_row_id"].to_numpy(np.int64),
                "probability": both / single,
                "pinned": n_values == 1,
                "n_candidates": n_values,
            }
        )
    return join, one_known
