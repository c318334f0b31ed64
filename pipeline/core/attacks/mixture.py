"""Mixture beliefs: what an adversary believes from a mixed, Rating or (k, ℓ) release (:mod:`pipeline.core.attacks`)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from scipy import sparse

from pipeline.core.attacks.victims import CHUNK_CELLS, MAX_CODE_SPACE, _contexts, _encode, label_coverage
from pipeline.core.columns import as_text
from pipeline.core.hierarchies import Hierarchy


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
    return pd.DataFrame({a: _encode(as_text(frame[a]), domains[a]) for a in attributes}, index=frame.index)


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
    ids = id_table.assign(attribute=as_text(id_table["attribute"]), value=as_text(id_table["value"]))
    domains: dict[str, tuple[str, ...]] = {}
    overall: dict[str, pd.Series] = {}
    for attribute in sensitive_attribute_columns:
        counts = ids.loc[ids["attribute"] == attribute].groupby("value", observed=True)["count"].sum().astype(float)
        if has_sac:
            counts = counts.add(as_text(sac_released[attribute]).value_counts().astype(float), fill_value=0.0)
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
        frame = as_text(sac_released[list(quasi_identifier_columns)]).assign(unit=unit_of_row.astype(np.int64))
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
        frame = as_text(attribute_table[list(quasi_identifier_columns)]).assign(unit=at_units, n_rows=1)
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
    domains = {a: tuple(sorted(as_text(kl_released[a]).unique())) for a in sensitive_attribute_columns}
    clusters, units = np.unique(kl_released["cluster_id"].to_numpy(np.int64), return_inverse=True)
    labels = as_text(kl_released[list(quasi_identifier_columns)]).assign(unit=units.astype(np.int64))
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
        label_values, label_codes = np.unique(as_text(labels[column]).to_numpy(), return_inverse=True)
        context_values, context_codes = np.unique(as_text(contexts[column]).to_numpy(), return_inverse=True)
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
        keyed = as_text(contexts[quasi_identifier_columns]).assign(context=np.arange(len(contexts), dtype=np.int64))
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
        value = _encode(as_text(victims[a]), domains[a])
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
        known_code = _encode(as_text(victims[known]), belief.domains[known])
        target_code = _encode(as_text(victims[target]), belief.domains[target])
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
