"""Two adversaries against releases of microdata with several sensitive attributes.

Both adversaries know the published tables and the victim's quasi-identifiers (QIs); the
second one also knows **one** of the victim's sensitive values. Four release models are
supported, each turned into a *belief model* by a builder:

* :func:`kl_release_belief` — the (k, ℓ) release of P2 (SPEC §14): generalised QIs, full
  sensitive tuples kept linked inside a record;
* :func:`mixed_release_belief` — P1's mixed model: ``sac_released`` (SAC~ groups, tuples
  permuted per attribute cluster) + ``attribute_table``/``id_table`` (improved Rating);
* :func:`rating_release_belief` — the plain Rating baseline (attribute table only);
* :func:`naive_release_belief` — the naive per-attribute release of P2 §1 (one table per
  sensitive attribute, the other sensitive attributes generalised as QIs; see
  :mod:`pipeline.core.naive_release`).

Modelling choices (documented here once; the report repeats them)
----------------------------------------------------------------
Victims
    Every released record. The adversary's belief is computed from the published tables only;
    the victim's true values come from the raw records (through the PRIVATE row map) and are
    used only to *score* the belief.
Score
    The probability the belief gives to the victim's TRUE value(s). "Inferred with probability
    1" (``certain`` / ``pinned``) means the belief puts all its mass on one tuple (value). The
    belief always gives the truth a positive probability (the victim's own row is a candidate
    and its distribution contains the truth; exception: a suppressed attribute-table cell whose
    value never appears anywhere else in the release), so a certain belief is certain *of the
    truth*. Certainty is decided by counting the tuples with positive mass (exact), not by
    comparing a float with 1.
Candidate rows
    Published rows whose (possibly generalised) QI tuple covers the victim's original QIs:
    equality for the mixed and Rating releases (QIs are published unchanged); hierarchy
    coverage for the (k, ℓ) and naive releases — a generalised label covers a value iff the
    value's ancestor at the level of a node carrying that label is that node
    (:func:`label_coverage`).
Belief (mixed, Rating, (k, ℓ))
    The uniform mixture over the candidate rows; each row's distribution is a product of
    independent blocks:

    * (k, ℓ) row: its equivalence class's multiset of full sensitive tuples (one block);
    * SAC~ row: for every attribute cluster, the group's multiset of cluster sub-tuples (the
      release permutes sub-tuples of a cluster inside a group, so a row is equally likely to
      own each of them, independently per cluster);
    * attribute-table row (mixed and Rating): for every attribute independently, the value
      shares of its SID in ``id_table``; a suppressed cell (``NULL`` SID) gets the attribute's
      overall released value distribution (SAC~ values + ``id_table`` counts; none at all when
      every cell of the attribute is suppressed, then the row carries no belief).

    Rows of one SAC~ group (or one (k, ℓ) class) share their distribution, so the computation
    works on *units* (a group, a class, an attribute-table row) weighted by their number of
    candidate rows. This is the simple "uniform over candidate rows" adversary; it ignores
    the global constraint that each SID occurrence belongs to exactly one record (SPEC §10
    calls that exact posterior optional and infeasible beyond tiny tables).
One-known-value attack (known attribute ``A`` with the victim's true ``a``, target ``B``)
    Bayes inside the mixture: ``P(B=b | A=a) = Σ_rows P_row(A=a, B=b) / Σ_rows P_row(A=a)``
    (rows with ``P_row(A=a) = 0`` drop out). ``A`` and ``B`` in one block (same SAC~ cluster,
    a (k, ℓ) class) use the block's joint counts; in different blocks the product of marginals.
Naive release
    Table ``j`` publishes ``S_j`` raw and the QIs and other sensitive attributes generalised.
    The adversary joins the tables on the victim's QIs and keeps only what is *consistent*
    across tables (P2 §1): a row of table ``i`` is alive iff its QI labels cover the victim's
    QIs, its raw ``S_i`` value is still allowed, and each of its generalised labels covers at
    least one allowed value of that attribute; a value ``v`` of ``S_j`` stays allowed iff an
    alive row of table ``j`` holds it and, for every other table ``i``, an alive row of table
    ``i`` has an ``S_j`` label covering ``v``. The two rules are applied alternately until
    nothing changes (arc consistency; the agreed single pass is its first round — iterating
    only removes more impossible values, and never the truth: the victim's own rows stay
    alive). The belief on ``S_j`` is then the share of each value among the alive rows of
    table ``j``; the full-tuple probability is the **product** of the per-attribute
    probabilities (an independence approximation: the alive rows of different tables are not
    linked row by row). A tuple is certain iff every attribute keeps exactly one value, which
    is exact (then only one tuple is consistent). The one-known-value adversary runs the same
    join with ``S_A`` restricted to ``{a}`` from the start (table ``A`` keeps only its rows
    holding ``a``, the other tables only rows whose ``A`` label covers ``a``), and reads the
    belief on ``B`` from table ``B``'s alive rows.

Performance: victims sharing a QI tuple (and, for the second attack, a known value) share
their candidates, so everything is computed once per *context* with sparse matrix products
(scipy.sparse; mixed, Rating, (k, ℓ)) or batched boolean matrix products (naive), in chunks
so that memory stays bounded.

Sources: P2 §1 (the join attack on per-attribute releases) and §3 (the (k, ℓ) model); P1 §3.3,
§4.3 (what is released); SPEC §8, §10, §14.
"""

from __future__ import annotations

from pipeline.core.attacks.mixture import ReleaseBelief, kl_release_belief, mixed_release_belief, rating_release_belief
from pipeline.core.attacks.naive import NaiveBelief, naive_release_belief
from pipeline.core.attacks.scores import (
    belief_distribution,
    join_attack,
    one_known_value_attack,
    one_known_value_attacks,
    population_baseline,
    summarize_attack,
)
from pipeline.core.attacks.victims import label_coverage, victim_table

__all__ = [
    "NaiveBelief",
    "ReleaseBelief",
    "belief_distribution",
    "join_attack",
    "kl_release_belief",
    "label_coverage",
    "mixed_release_belief",
    "naive_release_belief",
    "population_baseline",
    "one_known_value_attack",
    "one_known_value_attacks",
    "rating_release_belief",
    "summarize_attack",
    "victim_table",
]
