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

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
from scipy import sparse

from pipeline.core.hierarchies import Hierarchy

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

#: Largest full-tuple code space (product of the domain sizes) the mixture beliefs accept.
MAX_CODE_SPACE = 2**62
#: Target number of dense cells per chunk of the sparse products (bounds memory).
CHUNK_CELLS = 8_000_000
#: Contexts per batch of the naive join (each batch holds a contexts × clusters matrix per table).
NAIVE_BATCH = 768
#: Histogram bin edges of :func:`summarize_attack` (probabilities).
HISTOGRAM_EDGES = (0.0, 0.05, 0.1, 0.2, 0.3, 1 / 3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)

# --------------------------------------------------------------------------- coverage and victims


def label_coverage(hierarchy: Hierarchy, labels: Sequence[str], values: Sequence[str]) -> np.ndarray:
    """Which generalised labels cover which base values.

    Parameters
    ----------
    hierarchy
        The attribute's hierarchy.
    labels
        Published labels (base values or generalised node labels).
    values
        Base values (raw data values).

    Returns
    -------
    numpy.ndarray
        bool, shape ``(len(labels), len(values))``: ``True`` iff the value's ancestor at some
        level ``h`` is a node of level ``h`` whose label is the given label (a label that
        appears at several levels covers the union).

    Raises
    ------
    ValueError
        A label that is no node of the hierarchy.
    pipeline.core.hierarchies.HierarchyError
        A value that is not a base value of the hierarchy.
    """
    nodes: dict[str, list[tuple[int, int]]] = {}
    for level, names in enumerate(hierarchy.labels):
        for node, name in enumerate(names):
            nodes.setdefault(name, []).append((level, node))
    ancestors = (
        hierarchy.codes[hierarchy.encode(list(values))] if len(values) else np.zeros((0, hierarchy.height + 1), dtype=np.int32)
    )
    covered = np.zeros((len(labels), len(values)), dtype=bool)
    for row, label in enumerate(labels):
        found = nodes.get(label)
        if found is None:
            raise ValueError(
                f"published label {label!r} of {hierarchy.attribute!r} is not a node of hierarchy {hierarchy.source}"
            )
        for level, node in found:
            covered[row] |= ancestors[:, level] == node
    return covered


def victim_table(
    records: pd.DataFrame,
    row_map: pd.DataFrame,
    quasi_identifiers: Sequence[str],
    sensitive_attributes: Sequence[str],
) -> pd.DataFrame:
    """The victims of a release: every released record, with its true values (PRIVATE).

    Parameters
    ----------
    records
        Raw table: ``row_id`` (input id) + quasi-identifiers + sensitive attributes.
    row_map
        ``source_row_id`` (input id) of every released row (a release's private row map;
        other columns ignored). Deleted / unpublished records are absent and are no victims.
    quasi_identifiers, sensitive_attributes
        Column names.

    Returns
    -------
    pandas.DataFrame
        ``source_row_id`` (int64, ascending) and the quasi-identifiers and sensitive
        attributes as text, one row per released record.
    """
    columns = [*quasi_identifiers, *sensitive_attributes]
    released = np.unique(row_map["source_row_id"].to_numpy(np.int64))
    chosen = records[records["row_id"].isin(released)]
    victims = chosen[["row_id", *columns]].rename(columns={"row_id": "source_row_id"})
    victims = victims.astype({c: str for c in columns}).astype({"source_row_id": "int64"})
    return victims.sort_values("source_row_id", kind="stable").reset_index(drop=True)


def _contexts(victims: pd.DataFrame, columns: Sequence[str]) -> tuple[pd.DataFrame, np.ndarray]:
    """Distinct value tuples of ``columns`` among the victims and each victim's context index."""
    columns = list(columns)
    codes = victims.groupby(columns, sort=True, dropna=False, observed=True).ngroup().to_numpy(np.int64)
    first = np.unique(codes, return_index=True)[1]
    contexts = victims.iloc[first][columns].reset_index(drop=True)
    return contexts, codes


def _encode(values: Iterable[str], domain: Sequence[str]) -> np.ndarray:
    """Domain index of each value, -1 for a value the release never shows."""
    index = {v: k for k, v in enumerate(domain)}
    return np.fromiter((index.get(str(v), -1) for v in values), dtype=np.int64)


# --------------------------------------------------------------------------- mixture beliefs


@dataclass(frozen=True, eq=False)
class _Block:
    """Independent block of a unit's distribution: ``entries`` has ``unit`` (int64), one int64
    code column per attribute of ``attributes`` and ``p`` (float64, sums to 1 per unit)."""

    attributes: tuple[str, ...]
    entries: pd.DataFrame


@dataclass(frozen=True, eq=False)
class _Part:
    """Units sharing one block structure (SAC~ groups, attribute-table rows or (k, ℓ) classes)."""

    units: np.ndarray
    blocks: tuple[_Block, ...]


@dataclass(frozen=True, eq=False)
class ReleaseBelief:
    """Belief model of a (k, ℓ), mixed or Rating release: units, their block distributions and
    the candidate rows by published QI tuple.

    Attributes
    ----------
    model
        ``"kl"``, ``"mixed"`` or ``"rating"``.
    quasi_identifiers, sensitive_attributes
        Column names.
    domains
        Attribute -> sorted tuple of the values the release shows (codes are indices).
    candidates
        ``unit`` (int64), one text column per quasi-identifier (published label) and
        ``n_rows`` (int64): how many published rows of the unit carry that QI tuple.
    parts
        Units grouped by block structure.
    n_units
        Units are ``0..n_units-1``.
    hierarchies
        QI hierarchies for coverage matching; ``None`` = exact matching (QIs published unchanged).
    """

    model: str
    quasi_identifiers: tuple[str, ...]
    sensitive_attributes: tuple[str, ...]
    domains: dict[str, tuple[str, ...]]
    candidates: pd.DataFrame
    parts: tuple[_Part, ...]
    n_units: int
    hierarchies: dict[str, Hierarchy] | None


def _code_frame(frame: pd.DataFrame, attributes: Sequence[str], domains: Mapping[str, Sequence[str]]) -> pd.DataFrame:
    return pd.DataFrame({a: _encode(frame[a].astype(str), domains[a]) for a in attributes}, index=frame.index)


def _tuple_block(
    units: np.ndarray, frame: pd.DataFrame, attributes: Sequence[str], domains: Mapping[str, Sequence[str]]
) -> _Block:
    """Block = the multiset of ``attributes`` sub-tuples of each unit's rows (``units`` aligned with ``frame``)."""
    codes = _code_frame(frame, attributes, domains)
    codes.insert(0, "unit", np.asarray(units, dtype=np.int64))
    counts = codes.groupby(["unit", *attributes], sort=True, observed=True).size().rename("n").reset_index()
    totals = counts.groupby("unit", observed=True)["n"].transform("sum")
    counts["p"] = counts["n"] / totals
    return _Block(tuple(attributes), counts.drop(columns="n"))


def _cluster_lists(attribute_clusters: pd.DataFrame, sensitive_attributes: Sequence[str]) -> list[list[str]]:
    if len(attribute_clusters) == 0:
        return [[a] for a in sensitive_attributes]
    listed = attribute_clusters["attribute"].tolist()
    if sorted(listed) != sorted(sensitive_attributes):
        raise ValueError(
            f"attribute_clusters {sorted(listed)} is not a partition of the sensitive attributes {sorted(sensitive_attributes)}"
        )
    return [list(g["attribute"]) for _, g in attribute_clusters.groupby("cluster_id", sort=True, observed=True)]


def mixed_release_belief(
    *,
    sac_released: pd.DataFrame,
    attribute_table: pd.DataFrame,
    id_table: pd.DataFrame,
    attribute_clusters: pd.DataFrame,
    quasi_identifiers: Sequence[str],
    sensitive_attributes: Sequence[str],
    model: str = "mixed",
) -> ReleaseBelief:
    """Belief model of a mixed release (P1) from its published tables.

    Parameters
    ----------
    sac_released
        ``row_id``, ``group_id`` (int64), quasi-identifiers (text), sensitive attributes (text,
        permuted within attribute cluster per group). May be empty (Rating release).
    attribute_table
        ``row_id``, quasi-identifiers, one nullable integer SID column per sensitive attribute
        (``<NA>`` = suppressed cell).
    id_table
        ``attribute``, ``sid``, ``value``, ``count`` (records behind the value in that SID).
    attribute_clusters
        ``cluster_id``, ``attribute``: a partition of the sensitive attributes, or empty (each
        attribute its own cluster).
    quasi_identifiers, sensitive_attributes
        Column names.
    model
        Name stored in the result (``"mixed"`` or ``"rating"``).

    Returns
    -------
    ReleaseBelief
        Units: SAC~ groups (one block per attribute cluster: the group's cluster sub-tuples),
        then attribute-table rows (one block per attribute: the SID's value shares; a
        suppressed cell: the attribute's overall released value distribution). QIs matched
        exactly.

    Raises
    ------
    ValueError
        Missing columns, clusters that are not a partition, or a SID absent from ``id_table``.
    """
    quasi_identifier_columns, sensitive_attribute_columns = tuple(quasi_identifiers), tuple(sensitive_attributes)
    missing = [c for c in ("row_id", *quasi_identifier_columns, *sensitive_attribute_columns) if c not in attribute_table.columns]
    if missing:
        raise ValueError(f"column(s) {missing} not in attribute_table")
    has_sac = len(sac_released) > 0
    if has_sac:
        missing = [
            c for c in ("group_id", *quasi_identifier_columns, *sensitive_attribute_columns) if c not in sac_released.columns
        ]
        if missing:
            raise ValueError(f"column(s) {missing} not in sac_released")
    ids = id_table.assign(attribute=id_table["attribute"].astype(str), value=id_table["value"].astype(str))
    domains: dict[str, tuple[str, ...]] = {}
    overall: dict[str, pd.Series] = {}
    for attribute in sensitive_attribute_columns:
        counts = ids.loc[ids["attribute"] == attribute].groupby("value", observed=True)["count"].sum().astype(float)
        if has_sac:
            counts = counts.add(sac_released[attribute].astype(str).value_counts().astype(float), fill_value=0.0)
        domains[attribute] = tuple(sorted(counts.index))
        overall[attribute] = counts
    parts: list[_Part] = []
    candidate_frames: list[pd.DataFrame] = []
    n_units = 0
    if has_sac:
        groups, unit_of_row = np.unique(sac_released["group_id"].to_numpy(np.int64), return_inverse=True)
        blocks = tuple(
            _tuple_block(unit_of_row, sac_released, cluster, domains)
            for cluster in _cluster_lists(attribute_clusters, sensitive_attribute_columns)
        )
        parts.append(_Part(np.arange(len(groups), dtype=np.int64), blocks))
        frame = sac_released[list(quasi_identifier_columns)].astype(str).assign(unit=unit_of_row.astype(np.int64))
        candidate_frames.append(
            frame.groupby(["unit", *quasi_identifier_columns], sort=True, observed=True).size().rename("n_rows").reset_index()
        )
        n_units = len(groups)
    n_at = len(attribute_table)
    at_units = np.arange(n_units, n_units + n_at, dtype=np.int64)
    if n_at:
        sid_blocks: list[_Block] = []
        for attribute in sensitive_attribute_columns:
            chosen = ids.loc[ids["attribute"] == attribute, ["sid", "value", "count"]]
            chosen = chosen.assign(sid=chosen["sid"].astype(np.int64), code=_encode(chosen["value"], domains[attribute]))
            chosen["p"] = chosen["count"] / chosen.groupby("sid", observed=True)["count"].transform("sum")
            sids = attribute_table[attribute]
            published = sids.notna().to_numpy()
            cells = pd.DataFrame({"unit": at_units[published], "sid": sids[published].astype(np.int64).to_numpy()})
            known = cells.merge(chosen[["sid", "code", "p"]], on="sid", how="left")
            if known["code"].isna().any():
                unknown = sorted(set(known.loc[known["code"].isna(), "sid"].tolist()))[:5]
                raise ValueError(f"attribute {attribute!r}: SID(s) {unknown} of the attribute table are not in the ID table")
            pieces = [known[["unit", "code", "p"]]]
            if (~published).any():
                shares = overall[attribute] / overall[attribute].sum()
                suppressed_units = at_units[~published]
                pieces.append(
                    pd.DataFrame(
                        {
                            "unit": np.repeat(suppressed_units, len(shares)),
                            "code": np.tile(_encode(shares.index, domains[attribute]), len(suppressed_units)),
                            "p": np.tile(shares.to_numpy(float), len(suppressed_units)),
                        }
                    )
                )
            entries = pd.concat(pieces, ignore_index=True).rename(columns={"code": attribute})
            entries = entries.astype({"unit": np.int64, attribute: np.int64, "p": float})
            sid_blocks.append(_Block((attribute,), entries[["unit", attribute, "p"]]))
        parts.append(_Part(at_units, tuple(sid_blocks)))
        frame = attribute_table[list(quasi_identifier_columns)].astype(str).assign(unit=at_units, n_rows=1)
        candidate_frames.append(frame[["unit", *quasi_identifier_columns, "n_rows"]])
        n_units += n_at
    candidates = (
        pd.concat(candidate_frames, ignore_index=True)
        if candidate_frames
        else pd.DataFrame(
            {
                c: pd.Series(dtype=t)
                for c, t in [("unit", "int64"), *((q, object) for q in quasi_identifier_columns), ("n_rows", "int64")]
            }
        )
    )
    return ReleaseBelief(
        model,
        quasi_identifier_columns,
        sensitive_attribute_columns,
        domains,
        candidates.astype({"unit": np.int64, "n_rows": np.int64}),
        tuple(parts),
        n_units,
        None,
    )


def rating_release_belief(
    *,
    attribute_table: pd.DataFrame,
    id_table: pd.DataFrame,
    quasi_identifiers: Sequence[str],
    sensitive_attributes: Sequence[str],
) -> ReleaseBelief:
    """Belief model of a Rating release (attribute table + ID table; no SAC~): every row's
    attributes are independent blocks with its SIDs' value shares. See :func:`mixed_release_belief`."""
    empty = pd.DataFrame({c: pd.Series(dtype=object) for c in ["row_id", "group_id", *quasi_identifiers, *sensitive_attributes]})
    return mixed_release_belief(
        sac_released=empty,
        attribute_table=attribute_table,
        id_table=id_table,
        attribute_clusters=pd.DataFrame({"cluster_id": [], "attribute": []}),
        quasi_identifiers=quasi_identifiers,
        sensitive_attributes=sensitive_attributes,
        model="rating",
    )


def kl_release_belief(
    kl_released: pd.DataFrame,
    quasi_identifiers: Sequence[str],
    sensitive_attributes: Sequence[str],
    hierarchies: Mapping[str, Hierarchy],
) -> ReleaseBelief:
    """Belief model of a (k, ℓ) release (P2; SPEC §14).

    Parameters
    ----------
    kl_released
        ``row_id``, ``cluster_id`` (int64), the generalised quasi-identifier labels (text) and
        the sensitive attributes (text, unchanged), as returned by
        :func:`pipeline.core.kl_anonymity.kl_release_table`.
    quasi_identifiers, sensitive_attributes
        Column names.
    hierarchies
        Quasi-identifier -> hierarchy (for label coverage).

    Returns
    -------
    ReleaseBelief
        One unit per equivalence class, one block holding its multiset of full sensitive
        tuples; candidate rows = classes whose labels cover the victim's QIs.

    Raises
    ------
    ValueError
        A missing column or hierarchy, or a class whose rows carry different QI labels.
    """
    quasi_identifier_columns, sensitive_attribute_columns = tuple(quasi_identifiers), tuple(sensitive_attributes)
    missing = [c for c in ("cluster_id", *quasi_identifier_columns, *sensitive_attribute_columns) if c not in kl_released.columns]
    if missing:
        raise ValueError(f"column(s) {missing} not in kl_released")
    absent = [a for a in quasi_identifier_columns if a not in hierarchies]
    if absent:
        raise ValueError(f"no hierarchy for quasi-identifier(s) {absent}")
    domains = {a: tuple(sorted(kl_released[a].astype(str).unique())) for a in sensitive_attribute_columns}
    clusters, units = np.unique(kl_released["cluster_id"].to_numpy(np.int64), return_inverse=True)
    labels = kl_released[list(quasi_identifier_columns)].astype(str).assign(unit=units.astype(np.int64))
    candidates = (
        labels.groupby(["unit", *quasi_identifier_columns], sort=True, observed=True).size().rename("n_rows").reset_index()
    )
    if candidates["unit"].duplicated().any():
        raise ValueError("a (k, ℓ) equivalence class has rows with different quasi-identifier labels")
    block = _tuple_block(units, kl_released, sensitive_attribute_columns, domains)
    part = _Part(np.arange(len(clusters), dtype=np.int64), (block,))
    return ReleaseBelief(
        "kl",
        quasi_identifier_columns,
        sensitive_attribute_columns,
        domains,
        candidates.astype({"unit": np.int64, "n_rows": np.int64}),
        (part,),
        len(clusters),
        {a: hierarchies[a] for a in quasi_identifier_columns},
    )


def _coverage_pairs(
    labels: pd.DataFrame, contexts: pd.DataFrame, columns: Sequence[str], hierarchies: Mapping[str, Hierarchy]
) -> tuple[np.ndarray, np.ndarray]:
    """(context index, label-row index) of every label row covering a context, by chunks."""
    label_index, value_index, covers = [], [], []
    for column in columns:
        label_values, label_codes = np.unique(labels[column].astype(str).to_numpy(), return_inverse=True)
        context_values, context_codes = np.unique(contexts[column].astype(str).to_numpy(), return_inverse=True)
        covers.append(label_coverage(hierarchies[column], list(label_values), list(context_values)))
        label_index.append(label_codes)
        value_index.append(context_codes)
    n_labels = len(labels)
    step = max(1, CHUNK_CELLS // max(1, n_labels))
    rows, cols = [], []
    for start in range(0, len(contexts), step):
        stop = min(len(contexts), start + step)
        mask = np.ones((stop - start, n_labels), dtype=bool)
        for cover, lab, val in zip(covers, label_index, value_index, strict=True):
            mask &= cover[lab[None, :], val[start:stop, None]]
        r, c = np.nonzero(mask)
        rows.append(r + start)
        cols.append(c)
    return np.concatenate(rows) if rows else np.array([], dtype=np.int64), np.concatenate(cols) if cols else np.array(
        [], dtype=np.int64
    )


def _candidate_weights(belief: ReleaseBelief, contexts: pd.DataFrame) -> sparse.csr_matrix:
    """``W[context, unit]`` = number of the unit's published rows that are candidates of the context."""
    quasi_identifier_columns = list(belief.quasi_identifiers)
    candidates = belief.candidates
    if belief.hierarchies is None:
        keyed = contexts[quasi_identifier_columns].astype(str).assign(context=np.arange(len(contexts), dtype=np.int64))
        matched = (
            keyed.merge(candidates, on=quasi_identifier_columns, how="inner")
            if quasi_identifier_columns
            else keyed.merge(candidates, how="cross")
        )
        rows, units, weights = matched["context"].to_numpy(), matched["unit"].to_numpy(), matched["n_rows"].to_numpy(float)
    else:
        rows, label_rows = _coverage_pairs(candidates, contexts, quasi_identifier_columns, belief.hierarchies)
        units = candidates["unit"].to_numpy()[label_rows]
        weights = candidates["n_rows"].to_numpy(float)[label_rows]
    weights_matrix = sparse.coo_matrix((weights, (rows, units)), shape=(len(contexts), belief.n_units)).tocsr()
    weights_matrix.sum_duplicates()
    return weights_matrix


def _radices(sizes: Sequence[int]) -> list[int]:
    radices, running = [], 1
    for size in reversed(list(sizes)):
        radices.append(running)
        running *= max(1, int(size))
    if running > MAX_CODE_SPACE:
        raise ValueError(
            f"the joint space of the sensitive attributes has {running} tuples, more than {MAX_CODE_SPACE}; "
            "run the join attack on fewer attributes"
        )
    return list(reversed(radices))


def _unit_distribution(belief: ReleaseBelief, attributes: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray, list[int]]:
    """Every unit's distribution over ``attributes`` (mixed-radix codes): (unit, code, p, radices)."""
    attributes = list(attributes)
    radices = _radices([len(belief.domains[a]) for a in attributes])
    radix = dict(zip(attributes, radices, strict=True))
    units, codes, probabilities = [], [], []
    for part in belief.parts:
        frame = pd.DataFrame(
            {"unit": part.units, "code": np.zeros(len(part.units), dtype=np.int64), "p": np.ones(len(part.units))}
        )
        for block in part.blocks:
            inside = [a for a in block.attributes if a in radix]
            if not inside:
                continue
            marginal = block.entries.groupby(["unit", *inside], sort=False, observed=True)["p"].sum().reset_index()
            sub = np.zeros(len(marginal), dtype=np.int64)
            for a in inside:
                sub += marginal[a].to_numpy(np.int64) * radix[a]
            piece = pd.DataFrame({"unit": marginal["unit"].to_numpy(np.int64), "sub": sub, "q": marginal["p"].to_numpy(float)})
            frame = frame.merge(piece, on="unit")
            frame["code"] = frame["code"] + frame["sub"]
            frame["p"] = frame["p"] * frame["q"]
            frame = frame.drop(columns=["sub", "q"])
        units.append(frame["unit"].to_numpy(np.int64))
        codes.append(frame["code"].to_numpy(np.int64))
        probabilities.append(frame["p"].to_numpy(float))
    if not units:
        return np.array([], dtype=np.int64), np.array([], dtype=np.int64), np.array([], dtype=float), radices
    return np.concatenate(units), np.concatenate(codes), np.concatenate(probabilities), radices


def _victim_codes(
    victims: pd.DataFrame, attributes: Sequence[str], domains: Mapping[str, Sequence[str]], radices: Sequence[int]
) -> np.ndarray:
    """Mixed-radix code of each victim's true sub-tuple, -1 when a value is unknown to the release."""
    code = np.zeros(len(victims), dtype=np.int64)
    unknown = np.zeros(len(victims), dtype=bool)
    for a, radix in zip(attributes, radices, strict=True):
        value = _encode(victims[a].astype(str), domains[a])
        unknown |= value < 0
        code += np.where(value < 0, 0, value) * radix
    return np.where(unknown, -1, code)


def _sparse_lookup(matrix: sparse.csr_matrix, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
    """``matrix[rows[i], cols[i]]`` for every i (0 where absent or ``cols[i] < 0``)."""
    matrix = matrix.tocsr()
    matrix.sort_indices()
    n_cols = max(1, matrix.shape[1])
    row_of_entry = np.repeat(np.arange(matrix.shape[0], dtype=np.int64), np.diff(matrix.indptr))
    keys = row_of_entry * n_cols + matrix.indices.astype(np.int64)
    wanted = rows.astype(np.int64) * n_cols + np.where(cols < 0, 0, cols)
    position = np.searchsorted(keys, wanted)
    position = np.minimum(position, max(0, len(keys) - 1))
    found = (len(keys) > 0) & (cols >= 0)
    found = found & (keys[position] == wanted) if len(keys) else np.zeros(len(rows), dtype=bool)
    return np.where(found, matrix.data[position] if len(keys) else 0.0, 0.0)


def _chunks(n_contexts: int, n_cols: int) -> Iterable[tuple[int, int]]:
    step = max(1, min(4096, CHUNK_CELLS // max(1, n_cols)))
    for start in range(0, n_contexts, step):
        yield start, min(n_contexts, start + step)


def _mixture_join(belief: ReleaseBelief, victims: pd.DataFrame) -> pd.DataFrame:
    sensitive_attribute_columns = list(belief.sensitive_attributes)
    contexts, context_of = _contexts(victims, belief.quasi_identifiers)
    weights = _candidate_weights(belief, contexts)
    totals = np.asarray(weights.sum(axis=1)).ravel()
    units, codes, probabilities, radices = _unit_distribution(belief, sensitive_attribute_columns)
    victim_codes = _victim_codes(victims, sensitive_attribute_columns, belief.domains, radices)
    columns, inverse = np.unique(np.concatenate([codes, victim_codes[victim_codes >= 0]]), return_inverse=True)
    entry_cols = inverse[: len(codes)]
    victim_cols = np.full(len(victims), -1, dtype=np.int64)
    victim_cols[victim_codes >= 0] = inverse[len(codes) :]
    distribution = sparse.csr_matrix((probabilities, (units, entry_cols)), shape=(belief.n_units, max(1, len(columns))))
    mass = np.zeros(len(victims))
    n_tuples = np.zeros(len(victims), dtype=np.int64)
    order = np.argsort(context_of, kind="stable")
    boundaries = np.searchsorted(context_of[order], np.arange(len(contexts) + 1))
    for start, stop in _chunks(len(contexts), len(columns)):
        chosen = order[boundaries[start] : boundaries[stop]]
        if len(chosen) == 0:
            continue
        belief_rows = (weights[start:stop] @ distribution).tocsr()
        belief_rows.eliminate_zeros()
        local = context_of[chosen] - start
        mass[chosen] = _sparse_lookup(belief_rows, local, victim_cols[chosen])
        n_tuples[chosen] = np.diff(belief_rows.indptr)[local]
    total = totals[context_of]
    probability = np.divide(mass, total, out=np.zeros_like(mass), where=total > 0)
    return pd.DataFrame(
        {
            "source_row_id": victims["source_row_id"].to_numpy(np.int64),
            "probability": np.clip(probability, 0.0, 1.0),
            "certain": (n_tuples == 1) & (mass > 0),
            "n_candidates": n_tuples,
            "n_candidate_rows": total.astype(np.int64),
        }
    )


def _mixture_one_known(
    belief: ReleaseBelief, victims: pd.DataFrame, pairs: Sequence[tuple[str, str]]
) -> dict[tuple[str, str], pd.DataFrame]:
    contexts, context_of = _contexts(victims, belief.quasi_identifiers)
    weights = _candidate_weights(belief, contexts)
    results = {}
    for known, target in pairs:
        units, codes, probabilities, radices = _unit_distribution(belief, [known, target])
        n_known, n_target = len(belief.domains[known]), len(belief.domains[target])
        distribution = sparse.csr_matrix((probabilities, (units, codes)), shape=(belief.n_units, max(1, n_known * n_target)))
        joint = (weights @ distribution).tocsr()
        joint.eliminate_zeros()
        row_of_entry = np.repeat(np.arange(joint.shape[0], dtype=np.int64), np.diff(joint.indptr))
        known_key = row_of_entry * n_known + joint.indices.astype(np.int64) // max(1, n_target)
        grouped = pd.DataFrame({"key": known_key, "p": joint.data}).groupby("key", observed=True)["p"].agg(["sum", "size"])
        known_code = _encode(victims[known].astype(str), belief.domains[known])
        target_code = _encode(victims[target].astype(str), belief.domains[target])
        victim_key = context_of * n_known + np.where(known_code < 0, 0, known_code)
        denominator = grouped["sum"].reindex(victim_key).fillna(0.0).to_numpy()
        n_values = grouped["size"].reindex(victim_key).fillna(0).to_numpy(np.int64)
        valid = (known_code >= 0) & (target_code >= 0)
        cols = np.where(valid, np.where(known_code < 0, 0, known_code) * n_target + np.where(target_code < 0, 0, target_code), -1)
        numerator = _sparse_lookup(joint, context_of, cols)
        denominator = np.where(known_code >= 0, denominator, 0.0)
        n_values = np.where(known_code >= 0, n_values, 0)
        probability = np.divide(numerator, denominator, out=np.zeros_like(numerator), where=denominator > 0)
        results[(known, target)] = pd.DataFrame(
            {
                "source_row_id": victims["source_row_id"].to_numpy(np.int64),
                "probability": np.clip(probability, 0.0, 1.0),
                "pinned": (n_values == 1) & (numerator > 0),
                "n_candidates": n_values.astype(np.int64),
            }
        )
    return results


# --------------------------------------------------------------------------- naive release


@dataclass(frozen=True, eq=False)
class _NaiveTableModel:
    """Table ``attribute`` of a naive release at equivalence-class level.

    ``histogram``: float64 ``(n_classes, |D_attribute|)`` raw value counts; ``qi_labels``: per
    quasi-identifier, the class's label index into ``NaiveBelief.qi_labels``; ``cover``: per
    other sensitive attribute, bool ``(n_classes, |D_other|)`` label coverage."""

    attribute: str
    histogram: np.ndarray
    qi_labels: dict[str, np.ndarray]
    cover: dict[str, np.ndarray]


@dataclass(frozen=True, eq=False)
class NaiveBelief:
    """Belief model of a naive per-attribute release (P2 §1).

    Attributes
    ----------
    quasi_identifiers, sensitive_attributes
        Column names.
    domains
        Sensitive attribute -> sorted values published raw in its table.
    qi_labels
        Quasi-identifier -> tuple of the labels used by any table.
    hierarchies
        Hierarchies of the quasi-identifiers (coverage of the victim's QIs).
    tables
        Sensitive attribute -> its table at equivalence-class level.
    """

    quasi_identifiers: tuple[str, ...]
    sensitive_attributes: tuple[str, ...]
    domains: dict[str, tuple[str, ...]]
    qi_labels: dict[str, tuple[str, ...]]
    hierarchies: dict[str, Hierarchy]
    tables: dict[str, _NaiveTableModel]
    model: str = "naive"


def naive_release_belief(
    tables: Mapping[str, pd.DataFrame],
    quasi_identifiers: Sequence[str],
    sensitive_attributes: Sequence[str],
    hierarchies: Mapping[str, Hierarchy],
) -> NaiveBelief:
    """Belief model of the naive per-attribute release.

    Parameters
    ----------
    tables
        Sensitive attribute ``S_j`` -> its published table: ``cluster_id`` (int), one text
        column per quasi-identifier and per other sensitive attribute (generalised labels),
        and ``S_j`` (text, raw) — :attr:`pipeline.core.naive_release.NaiveTable.released`.
        Rows sharing a ``cluster_id`` must share their labels.
    quasi_identifiers, sensitive_attributes
        Column names; one table per sensitive attribute.
    hierarchies
        Hierarchy of every quasi-identifier and sensitive attribute.

    Returns
    -------
    NaiveBelief

    Raises
    ------
    ValueError
        A missing table, column or hierarchy, or an unknown label.
    """
    quasi_identifier_columns, sensitive_attribute_columns = tuple(quasi_identifiers), tuple(sensitive_attributes)
    absent = [a for a in (*quasi_identifier_columns, *sensitive_attribute_columns) if a not in hierarchies]
    if absent:
        raise ValueError(f"no hierarchy for {absent}")
    if sorted(tables) != sorted(sensitive_attribute_columns):
        raise ValueError(
            f"the naive release needs one table per sensitive attribute {list(sensitive_attribute_columns)}, got {sorted(tables)}"
        )
    domains = {a: tuple(sorted(tables[a][a].astype(str).unique())) for a in sensitive_attribute_columns}
    qi_labels = {
        q: tuple(sorted(set().union(*(set(tables[a][q].astype(str)) for a in sensitive_attribute_columns))))
        for q in quasi_identifier_columns
    }
    models = {}
    for attribute in sensitive_attribute_columns:
        table = tables[attribute]
        others = [a for a in sensitive_attribute_columns if a != attribute]
        missing = [c for c in ("cluster_id", *quasi_identifier_columns, *others, attribute) if c not in table.columns]
        if missing:
            raise ValueError(f"column(s) {missing} not in the table of {attribute!r}")
        clusters, unit = np.unique(table["cluster_id"].to_numpy(np.int64), return_inverse=True)
        labels = table[[*quasi_identifier_columns, *others]].astype(str).assign(unit=unit)
        first = labels.drop_duplicates("unit").sort_values("unit")
        if len(labels.drop_duplicates()) != len(first):
            raise ValueError(f"table of {attribute!r}: rows of one cluster_id carry different labels")
        histogram = np.zeros((len(clusters), len(domains[attribute])))
        np.add.at(histogram, (unit, _encode(table[attribute].astype(str), domains[attribute])), 1.0)
        qi_index = {q: _encode(first[q], qi_labels[q]) for q in quasi_identifier_columns}
        cover = {}
        for other in others:
            distinct, inverse = np.unique(first[other].to_numpy(), return_inverse=True)
            cover[other] = label_coverage(hierarchies[other], list(distinct), list(domains[other]))[inverse]
        models[attribute] = _NaiveTableModel(attribute, histogram, qi_index, cover)
    return NaiveBelief(
        quasi_identifier_columns,
        sensitive_attribute_columns,
        domains,
        qi_labels,
        {q: hierarchies[q] for q in quasi_identifier_columns},
        models,
    )


def _naive_candidates(belief: NaiveBelief, contexts: pd.DataFrame) -> dict[str, np.ndarray]:
    """bool ``(n_contexts, n_classes)`` per table: classes whose QI labels cover the context."""
    covers = {}
    for q in belief.quasi_identifiers:
        values, codes = np.unique(contexts[q].astype(str).to_numpy(), return_inverse=True)
        covers[q] = (label_coverage(belief.hierarchies[q], list(belief.qi_labels[q]), list(values)), codes)
    result = {}
    for attribute, table in belief.tables.items():
        mask = np.ones((len(contexts), len(table.histogram)), dtype=bool)
        for q, (cover, codes) in covers.items():
            mask &= cover[table.qi_labels[q][None, :], codes[:, None]]
        result[attribute] = mask
    return result


def _naive_fixpoint(
    belief: NaiveBelief, alive: dict[str, np.ndarray], allowed: dict[str, np.ndarray], max_rounds: int = 1000
) -> dict[str, np.ndarray]:
    """Arc-consistent join of the tables for a batch of contexts (see the module docstring).

    ``alive[j]``: bool ``(b, n_classes_j)`` candidate classes; ``allowed[j]``: bool ``(b, |D_j|)``
    values still possible. Returns per attribute the float64 ``(b, |D_j|)`` counts of alive rows
    per allowed value (the belief's numerators)."""
    sensitive_attribute_columns = belief.sensitive_attributes
    present = {j: (belief.tables[j].histogram > 0).astype(np.float32) for j in sensitive_attribute_columns}
    cover = {j: {i: c.astype(np.float32) for i, c in belief.tables[j].cover.items()} for j in sensitive_attribute_columns}
    alive = {j: alive[j].copy() for j in sensitive_attribute_columns}
    allowed = {j: allowed[j].copy() for j in sensitive_attribute_columns}
    for _ in range(max_rounds):
        changed = False
        for j in (
            sensitive_attribute_columns
        ):  # a class stays alive iff it holds an allowed value and each label covers an allowed value
            keep = alive[j] & ((allowed[j].astype(np.float32) @ present[j].T) > 0)
            for i, c in cover[j].items():
                keep &= (allowed[i].astype(np.float32) @ c.T) > 0
            changed |= bool((keep != alive[j]).any())
            alive[j] = keep
        for j in sensitive_attribute_columns:  # a value stays iff its own table and every other table support it
            keep = allowed[j] & ((alive[j].astype(np.float32) @ present[j]) > 0)
            for i in sensitive_attribute_columns:
                if i != j:
                    keep &= (alive[i].astype(np.float32) @ cover[i][j]) > 0
            changed |= bool((keep != allowed[j]).any())
            allowed[j] = keep
        if not changed:
            break
    return {j: (alive[j].astype(np.float64) @ belief.tables[j].histogram) * allowed[j] for j in sensitive_attribute_columns}


def _naive_beliefs(belief: NaiveBelief, contexts: pd.DataFrame, known: str | None = None) -> dict[str, np.ndarray]:
    """Counts ``(n_contexts, |D_j|)`` per attribute after the join; with ``known``, the
    contexts carry a column ``known`` whose value restricts that attribute from the start."""
    sensitive_attribute_columns = belief.sensitive_attributes
    counts = {j: np.zeros((len(contexts), len(belief.domains[j]))) for j in sensitive_attribute_columns}
    for start in range(0, len(contexts), NAIVE_BATCH):
        batch = contexts.iloc[start : start + NAIVE_BATCH]
        alive = _naive_candidates(belief, batch)
        allowed = {j: np.ones((len(batch), len(belief.domains[j])), dtype=bool) for j in sensitive_attribute_columns}
        if known is not None:
            code = _encode(batch[known].astype(str), belief.domains[known])
            restricted = np.zeros_like(allowed[known])
            rows = np.flatnonzero(code >= 0)
            restricted[rows, code[rows]] = True
            allowed[known] = restricted
        for j, values in _naive_fixpoint(belief, alive, allowed).items():
            counts[j][start : start + len(batch)] = values
    return counts


def _naive_scores(counts: np.ndarray, context_of: np.ndarray, true_codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(probability of the true value, number of values with positive belief) per victim."""
    rows = counts[context_of]
    totals = rows.sum(axis=1)
    mass = np.where(true_codes >= 0, rows[np.arange(len(rows)), np.where(true_codes < 0, 0, true_codes)], 0.0)
    probability = np.divide(mass, totals, out=np.zeros_like(mass), where=totals > 0)
    return probability, (rows > 0).sum(axis=1).astype(np.int64)


def _naive_join(belief: NaiveBelief, victims: pd.DataFrame) -> pd.DataFrame:
    contexts, context_of = _contexts(victims, belief.quasi_identifiers)
    counts = _naive_beliefs(belief, contexts)
    probability = np.ones(len(victims))
    certain = np.ones(len(victims), dtype=bool)
    n_tuples = np.ones(len(victims), dtype=np.int64)
    for j in belief.sensitive_attributes:
        p, n_values = _naive_scores(counts[j], context_of, _encode(victims[j].astype(str), belief.domains[j]))
        probability *= p
        certain &= (n_values == 1) & (p > 0)
        n_tuples *= n_values
    return pd.DataFrame(
        {
            "source_row_id": victims["source_row_id"].to_numpy(np.int64),
            "probability": np.clip(probability, 0.0, 1.0),
            "certain": certain,
            "n_candidates": n_tuples,
        }
    )


def _naive_one_known(
    belief: NaiveBelief, victims: pd.DataFrame, pairs: Sequence[tuple[str, str]]
) -> dict[tuple[str, str], pd.DataFrame]:
    results = {}
    for known in dict.fromkeys(a for a, _ in pairs):
        contexts, context_of = _contexts(victims, [*belief.quasi_identifiers, known])
        counts = _naive_beliefs(belief, contexts, known=known)
        for target in [b for a, b in pairs if a == known]:
            p, n_values = _naive_scores(counts[target], context_of, _encode(victims[target].astype(str), belief.domains[target]))
            results[(known, target)] = pd.DataFrame(
                {
                    "source_row_id": victims["source_row_id"].to_numpy(np.int64),
                    "probability": np.clip(p, 0.0, 1.0),
                    "pinned": (n_values == 1) & (p > 0),
                    "n_candidates": n_values,
                }
            )
    return {pair: results[pair] for pair in pairs}


# --------------------------------------------------------------------------- public attacks


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
    text = victims[sensitive_attribute_columns].astype(str)
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
