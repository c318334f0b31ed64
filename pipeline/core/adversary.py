"""What can be learned from a release: rule confidences (Lemma 22 / expected supports) and the
strong-rule adversary of P1 §3.3.

Both work on released tables only (plus, for the adversary's evaluation, the private list of
which released records truly contain which rule). A release here is a mixed release
(``sac_released`` + ``attribute_table`` + ``id_table`` + ``attribute_clusters``) or a Rating
release (pass an empty ``sac_released``).

Sources: P1 §3.3 (attack), Lemma 12, Lemma 22; SPEC §8, §10, §11 (average confidence).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from pipeline.core.columns import sorted_text_codes, values_mask

__all__ = [
    "ADVERSARY_COLUMNS",
    "adversary_view",
    "attribute_table_disclosure",
    "candidate_adversary",
    "holders_disclosure",
    "released_records_view",
    "disclosure_probabilities",
    "per_record_disclosure",
    "recover_rule_confidences",
    "rule_bounds",
    "rule_holders",
    "rule_release_counts",
    "with_released_confidence",
]


def value_mask(column: pd.Series, value: str) -> np.ndarray:
    """Boolean array: which cells of ``column`` hold ``value`` (compared as text; see
    :func:`pipeline.core.columns.values_mask`)."""
    return values_mask(column, [value])


def _group_sums(group_index: np.ndarray, n_groups: int, *masks: np.ndarray) -> list[np.ndarray]:
    """Per group (dense ``group_index``): the number of rows where each mask is true."""
    return [np.bincount(group_index, weights=mask, minlength=n_groups).astype(np.int64) for mask in masks]


def _cluster_of(attribute_clusters: pd.DataFrame) -> dict[str, int]:
    return dict(zip(attribute_clusters["attribute"], attribute_clusters["cluster_id"], strict=True))


def _sid_value_shares(id_table: pd.DataFrame, rules: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per (attribute, sid, value): the value's count and the SID's total count; only the rows
    of values named by ``rules`` when given (one pass over the ID table instead of one per rule).
    ``value`` is text."""
    # SID totals on an integer (attribute, SID) key: a bincount, not a two-key pandas group-by; then only the rows
    # kept are copied (at 1M records the ID table has about 3.9M rows: copying all of them first added about
    # 200 MiB to the peak of report.html's Rating baseline, issue 18). The key is one int64 array (the attribute's
    # code from the categorical's own codes when it is one: any numbering of the attributes gives the same totals),
    # and counts that are all 1 (a Rating ID table's) are counted without a float64 copy (31 MiB each at 1M records)
    attribute = id_table["attribute"]
    attribute_codes = (
        attribute.cat.codes.to_numpy() if isinstance(attribute.dtype, pd.CategoricalDtype) else pd.factorize(attribute)[0]
    )
    sid = id_table["sid"].to_numpy()
    key = np.multiply(attribute_codes, int(sid.max(initial=0)) + 1, dtype=np.int64)
    np.add(key, sid, out=key)
    del attribute_codes
    count = id_table["count"].to_numpy()
    bins = int(key.max(initial=-1)) + 1
    if not len(key):
        totals = None
    elif bool((count == 1).all()):
        totals = np.bincount(key, minlength=bins).astype(np.int64)
    else:
        totals = np.bincount(key, weights=count, minlength=bins).astype(np.int64)
    if rules is not None:
        named = set(rules["antecedent_value"].astype(str)) | set(rules["consequent_value"].astype(str))
        kept = values_mask(id_table["value"], named)
        shares, key, count = id_table[kept], key[kept], count[kept]
    else:
        shares = id_table
    shares = shares.assign(sid_total=totals[key] if totals is not None else count.astype(np.int64))
    # the value as text, made once per distinct value; categorical, so comparisons with a value compare codes
    codes, texts = sorted_text_codes(shares["value"])
    return shares.assign(value=pd.Categorical.from_codes(codes, categories=texts)).reset_index(drop=True)


def _at_probability(
    attribute_table: pd.DataFrame,
    shares: pd.DataFrame,
    attribute: str,
    value: str,
    cache: dict[str, np.ndarray] | None = None,
) -> np.ndarray:
    """float64 ``(len(attribute_table),)``: P(AT record has ``value`` on ``attribute``) = count of value in its SID /
    SID total (0.0 for a SID without the value and a suppressed cell); one look-up per row in a table of the SIDs.
    ``cache``: see :func:`_sid_column`."""
    rows = shares[(shares["attribute"] == attribute) & (shares["value"] == value)]
    return _per_sid(
        _sid_column(attribute_table, attribute, cache),
        rows["sid"].to_numpy(np.int64),
        (rows["count"] / rows["sid_total"]).to_numpy(np.float64),
    )


def recover_rule_confidences(
    rules: pd.DataFrame,
    *,
    sac_released: pd.DataFrame,
    attribute_table: pd.DataFrame,
    id_table: pd.DataFrame,
    attribute_clusters: pd.DataFrame,
) -> pd.DataFrame:
    """Recover every rule's supports and confidence from released tables alone.

    Parameters
    ----------
    rules
        Rules to evaluate (``antecedent_attribute``, ``antecedent_value``,
        ``consequent_attribute``, ``consequent_value``; other columns are kept).
    sac_released, attribute_table, id_table, attribute_clusters
        Release tables (release contract). ``sac_released`` may be empty (Rating release).

    Returns
    -------
    pandas.DataFrame
        ``rules`` plus ``released_support_antecedent`` (float64, records),
        ``released_support_both`` (float64, records; integral when exact) and
        ``released_confidence`` (float64, NaN when the antecedent has zero released support).
        ``support(a)`` = SAC~ rows holding ``a`` + occurrences of ``a`` in the IDT (Lemma 22);
        ``support(a ∧ b)`` = SAC~ rows holding both when the attributes share a cluster, else
        the expected count ``Σ_groups #a·#b/|group|``, plus the attribute table's expected
        count ``Σ_t P(a ∈ t)·P(b ∈ t)`` (0 in a mixed release, SPEC §8; the Rating estimate
        of §11 otherwise).

    References
    ----------
    P1 Lemma 22; SPEC §8 and §11 ("average confidence").
    """
    cluster_of = _cluster_of(attribute_clusters) if len(attribute_clusters) else {}
    shares = _sid_value_shares(id_table, rules)
    idt_support = shares.groupby(["attribute", "value"], observed=True)["count"].sum()
    if len(sac_released):
        group_index, group_ids = pd.factorize(sac_released["group_id"].to_numpy(np.int64))
        n_groups = len(group_ids)
        group_size = np.bincount(group_index, minlength=n_groups)
    support_antecedent, support_both = [], []
    sid_columns: dict[str, np.ndarray] = {}  # each attribute's SID column, converted once for every rule
    for rule in rules.itertuples(index=False):
        a_attr, a_val = rule.antecedent_attribute, str(rule.antecedent_value)
        b_attr, b_val = rule.consequent_attribute, str(rule.consequent_value)
        supp_a = float(idt_support.get((a_attr, a_val), 0))
        supp_ab = 0.0
        if len(sac_released):
            has_a = value_mask(sac_released[a_attr], a_val)
            has_b = value_mask(sac_released[b_attr], b_val)
            supp_a += float(has_a.sum())
            if cluster_of.get(a_attr) is not None and cluster_of.get(a_attr) == cluster_of.get(b_attr):
                supp_ab += float((has_a & has_b).sum())
            else:
                count_a, count_b = _group_sums(group_index, n_groups, has_a, has_b)
                supp_ab += float((count_a * count_b / np.maximum(group_size, 1)).sum())
        if len(attribute_table):
            p_a = _at_probability(attribute_table, shares, a_attr, a_val, sid_columns)
            p_b = _at_probability(attribute_table, shares, b_attr, b_val, sid_columns)
            supp_ab += float((p_a * p_b).sum())
        support_antecedent.append(supp_a)
        support_both.append(supp_ab)
    return with_released_confidence(rules, support_antecedent, support_both)


def with_released_confidence(
    rules: pd.DataFrame, support_antecedent: Sequence[float] | np.ndarray, support_both: Sequence[float] | np.ndarray
) -> pd.DataFrame:
    """A copy of ``rules`` with ``released_support_antecedent``, ``released_support_both``
    (float64, expected record counts, one per rule in order) and ``released_confidence``
    (their ratio; NaN when the antecedent's released support is 0)."""
    result = rules.copy()
    result["released_support_antecedent"] = np.asarray(support_antecedent, dtype=float)
    result["released_support_both"] = np.asarray(support_both, dtype=float)
    with np.errstate(divide="ignore", invalid="ignore"):
        result["released_confidence"] = np.where(
            result["released_support_antecedent"] > 0,
            result["released_support_both"] / result["released_support_antecedent"],
            np.nan,
        )
    return result


def rule_holders(records: pd.DataFrame, rules: pd.DataFrame, *, row_map: pd.DataFrame | None = None) -> pd.DataFrame:
    """Which records truly contain which rule (the ground truth of the attack evaluation).

    Parameters
    ----------
    records
        The raw table (``row_id`` + sensitive attributes). PRIVATE.
    rules
        Strong rules (index = rule number).
    row_map
        Optional ``source_row_id`` -> ``row_id`` map; records not in it (deleted) are dropped
        and ids are translated to release row ids.

    Returns
    -------
    pandas.DataFrame
        ``row_id`` (int64, release id when ``row_map`` is given) and ``rule`` (int64, index
        into ``rules``), one row per (record, rule it contains).
    """
    pieces = []
    row_ids = records["row_id"].to_numpy(np.int64)
    for rule_index, rule in zip(rules.index, rules.itertuples(index=False), strict=True):
        holds = value_mask(records[rule.antecedent_attribute], str(rule.antecedent_value)) & value_mask(
            records[rule.consequent_attribute], str(rule.consequent_value)
        )
        rows = row_ids[holds]
        pieces.append(pd.DataFrame({"row_id": rows, "rule": np.full(len(rows), rule_index, dtype=np.int64)}))
    holders = (
        pd.concat(pieces, ignore_index=True)
        if pieces
        else pd.DataFrame({"row_id": pd.Series(dtype="int64"), "rule": pd.Series(dtype="int64")})
    )
    if row_map is not None:
        holders = holders.merge(row_map, left_on="row_id", right_on="source_row_id", suffixes=("_source", ""))
        holders = holders[["row_id", "rule"]]
    return holders.astype({"row_id": "int64", "rule": "int64"}).sort_values(["row_id", "rule"]).reset_index(drop=True)


def disclosure_probabilities(
    holders: pd.DataFrame,
    rules: pd.DataFrame,
    *,
    sac_released: pd.DataFrame,
    attribute_table: pd.DataFrame,
    id_table: pd.DataFrame,
    attribute_clusters: pd.DataFrame,
) -> pd.DataFrame:
    """The strong-rule adversary: P(record t contains rule r) for given (t, r) pairs.

    The adversary knows the release, the victim's row (through its quasi-identifiers) and
    every strong rule with its exact confidence ``support_both / support_antecedent``.

    Parameters
    ----------
    holders
        ``row_id`` (release ids) and ``rule`` (index into ``rules``): the pairs to evaluate.
    rules
        Strong rules with ``support_antecedent`` and ``support_both`` (int counts).
    sac_released, attribute_table, id_table, attribute_clusters
        The release (``sac_released`` empty for a Rating release).

    Returns
    -------
    pandas.DataFrame
        ``holders`` plus ``numerator``, ``denominator`` (int64) and ``probability`` (float64).
        SAC~ row: (#rows of its group holding both sides, cluster tuples kept) / group size
        (Lemma 12), or the product of the two marginal shares when the attributes are in
        different clusters. Attribute-table row: ``N_r / |M_r|`` if the record's SIDs contain
        both sides, else 0, where ``n_a`` = occurrences of ``a`` in the antecedent's SIDs plus
        SAC~ rows holding ``a``, ``N_r = ⌈conf·n_a⌉`` minus the holders visible in SAC~, and
        ``M_r`` = attribute-table rows whose SIDs contain ``a`` and ``b`` (capped at 1).

    References
    ----------
    P1 §3.3 and Lemma 12; SPEC §9.2 and §10.
    """
    return _disclosure_probabilities(
        holders,
        rules,
        _sid_value_shares(id_table, rules),
        sac_released=sac_released,
        attribute_table=attribute_table,
        attribute_clusters=attribute_clusters,
    )


def _disclosure_probabilities(
    holders: pd.DataFrame,
    rules: pd.DataFrame,
    shares: pd.DataFrame,
    *,
    sac_released: pd.DataFrame,
    attribute_table: pd.DataFrame,
    attribute_clusters: pd.DataFrame,
) -> pd.DataFrame:
    """:func:`disclosure_probabilities` with the ID table's value shares (:func:`_sid_value_shares`) given, so that a
    caller evaluating rule after rule computes them once."""
    cluster_of = _cluster_of(attribute_clusters) if len(attribute_clusters) else {}
    numerators = np.zeros(len(holders), dtype=np.int64)
    denominators = np.ones(len(holders), dtype=np.int64)
    holder_rules = holders["rule"].to_numpy()
    holder_rows = holders["row_id"].to_numpy(np.int64)
    if len(sac_released):
        sac_row_ids = sac_released["row_id"].to_numpy(np.int64)
        sac_position = pd.Index(sac_row_ids)
        group_index, group_ids = pd.factorize(sac_released["group_id"].to_numpy(np.int64))
        n_groups = len(group_ids)
        group_size = np.bincount(group_index, minlength=n_groups).astype(np.int64)
    if len(attribute_table):
        at_position = pd.Index(attribute_table["row_id"].to_numpy(np.int64))
    sid_columns: dict[str, np.ndarray] = {}  # each attribute's SID column, converted once for every rule
    for rule_index in np.unique(holder_rules):
        rule = rules.loc[int(rule_index)]
        a_attr, a_val = rule["antecedent_attribute"], str(rule["antecedent_value"])
        b_attr, b_val = rule["consequent_attribute"], str(rule["consequent_value"])
        select = np.flatnonzero(holder_rules == rule_index)
        rows = holder_rows[select]
        sac_place = sac_position.get_indexer(rows) if len(sac_released) else np.full(len(rows), -1)
        sac_mask = sac_place >= 0
        visible = 0
        sac_support_a = 0
        if len(sac_released):
            has_a = value_mask(sac_released[a_attr], a_val)
            has_b = value_mask(sac_released[b_attr], b_val)
            same_cluster = cluster_of.get(a_attr) is not None and cluster_of.get(a_attr) == cluster_of.get(b_attr)
            count_a, count_b, count_ab = _group_sums(group_index, n_groups, has_a, has_b, has_a & has_b)
            sac_support_a = int(has_a.sum())
            visible = int((has_a & has_b).sum()) if same_cluster else 0
            if sac_mask.any():
                groups = group_index[sac_place[sac_mask]]
                if same_cluster:
                    numerators[select[sac_mask]] = count_ab[groups]
                    denominators[select[sac_mask]] = group_size[groups]
                else:
                    numerators[select[sac_mask]] = count_a[groups] * count_b[groups]
                    denominators[select[sac_mask]] = group_size[groups] * group_size[groups]
        at_mask = ~sac_mask
        if at_mask.any() and len(attribute_table):
            a_rows = (shares["attribute"] == a_attr) & (shares["value"] == a_val)
            b_rows = (shares["attribute"] == b_attr) & (shares["value"] == b_val)
            a_sids = shares.loc[a_rows, "sid"].to_numpy(np.int64)
            b_sids = shares.loc[b_rows, "sid"].to_numpy(np.int64)
            n_a = int(shares.loc[a_rows, "count"].sum())
            n_a += sac_support_a
            in_m = _in_candidates(attribute_table, a_attr, a_sids, b_attr, b_sids, sid_columns)
            size_m = int(in_m.sum())
            at_place = at_position.get_indexer(rows[at_mask])
            member = np.where(at_place >= 0, in_m[np.clip(at_place, 0, None)], False)
            target = select[at_mask]
            if size_m > 0:
                numerator, denominator = attribute_table_disclosure(
                    support_both=int(rule["support_both"]),
                    support_antecedent=int(rule["support_antecedent"]),
                    n_antecedent=n_a,
                    n_visible=visible,
                    n_candidates=size_m,
                )
                numerators[target] = np.where(member, numerator, 0)
                denominators[target] = denominator
    result = holders.copy()
    result["numerator"] = numerators
    result["denominator"] = denominators
    result["probability"] = numerators / denominators
    return result


def _sid_column(attribute_table: pd.DataFrame, attribute: str, cache: dict[str, np.ndarray] | None = None) -> np.ndarray:
    """int64 ``(len(attribute_table),)``: the SID column of ``attribute``, -1 where the cell is suppressed (``<NA>``);
    kept in ``cache`` (attribute -> array) when given, for a caller evaluating rule after rule."""
    if cache is not None and attribute in cache:
        return cache[attribute]
    column = attribute_table[attribute]
    sids = column.fillna(-1).to_numpy(np.int64) if column.hasnans else column.to_numpy(np.int64)
    if cache is not None:
        cache[attribute] = sids
    return sids


def _per_sid(sids: np.ndarray, chosen: np.ndarray, values: np.ndarray | bool) -> np.ndarray:
    """``values`` (one per SID of ``chosen``, non-negative ints; or one scalar for all) at every row whose SID is
    chosen, 0 / False elsewhere and at -1 (suppressed): one look-up per row in a table of the SIDs (what mapping the
    column through a SID -> value dict, or ``np.isin`` for booleans, gives, without sorting or hashing the column).
    Returns an array of ``sids.shape`` with the dtype of ``values``."""
    dtype = np.asarray(values).dtype
    chosen = np.asarray(chosen, dtype=np.int64)
    if not len(sids):
        return np.zeros(0, dtype=dtype)
    table = np.zeros(max(int(sids.max()), int(chosen.max(initial=0))) + 2, dtype=dtype)  # the last slot is -1's
    table[chosen] = values
    return table[sids]


def _in_candidates(
    attribute_table: pd.DataFrame,
    a_attr: str,
    a_sids: np.ndarray,
    b_attr: str,
    b_sids: np.ndarray,
    cache: dict[str, np.ndarray] | None = None,
) -> np.ndarray:
    """Attribute-table rows whose SID of ``a_attr`` is one of ``a_sids`` and whose SID of ``b_attr`` one of ``b_sids``
    (the set ``M_r`` of a rule; a suppressed cell is in neither). ``cache``: see :func:`_sid_column`."""
    a_member = _per_sid(_sid_column(attribute_table, a_attr, cache), a_sids, True)
    return a_member & _per_sid(_sid_column(attribute_table, b_attr, cache), b_sids, True)


def rule_bounds(rules: pd.DataFrame, rule_numbers: np.ndarray, ell: int, ell_per_attribute: Mapping[str, int]) -> np.ndarray:
    """int64, one per entry of ``rule_numbers``: the bound's ℓ_j of the rule's consequent attribute (SPEC §6.7:
    ``ell_per_attribute``, else ``ell``), and ``ell`` for a number that is no rule's (-1: the record holds none).
    One look-up per rule, then one per record."""
    of_rule = pd.Series(
        [int(ell_per_attribute.get(str(attribute), ell)) for attribute in rules["consequent_attribute"]],
        index=rules.index.astype(np.int64),
        dtype=np.int64,
    )
    return of_rule.reindex(np.asarray(rule_numbers, dtype=np.int64)).fillna(ell).to_numpy(np.int64)


def attribute_table_disclosure(
    *, support_both: int, support_antecedent: int, n_antecedent: int, n_visible: int, n_candidates: int
) -> tuple[int, int]:
    """The strong-rule adversary's probability, as ``(numerator, denominator)``, that an attribute-table record of
    ``M_r`` (its SIDs contain both sides of rule r) holds r: ``min(N_r, |M_r|) / |M_r|`` with
    ``N_r = max(0, ⌈conf · n_a⌉ − visible)`` and ``conf = support_both / support_antecedent`` exactly.

    Parameters
    ----------
    support_both, support_antecedent
        The rule's raw supports (records; ``support_antecedent`` >= 1).
    n_antecedent
        ``n_a``: occurrences of the antecedent value in its attribute's SIDs plus SAC~ rows holding it (the whole
        release: a sharded release sums them over shards).
    n_visible
        SAC~ rows visibly holding both sides (attributes in one cluster), else 0.
    n_candidates
        ``|M_r|`` (>= 1; (0, 1) is returned for 0).

    References
    ----------
    P1 §3.3; SPEC §10.
    """
    if n_candidates <= 0:
        return 0, 1
    required = -(-int(support_both) * int(n_antecedent) // int(support_antecedent))  # ⌈conf · n_a⌉
    required = max(0, required - int(n_visible))
    return min(required, int(n_candidates)), int(n_candidates)


def rule_release_counts(
    rules: pd.DataFrame,
    *,
    sac_released: pd.DataFrame,
    attribute_table: pd.DataFrame,
    id_table: pd.DataFrame,
    attribute_clusters: pd.DataFrame,
) -> tuple[pd.DataFrame, dict[int, np.ndarray]]:
    """What the strong-rule adversary counts in a release for every rule, before dividing: the parts of
    :func:`attribute_table_disclosure` that add up over the shards of a sharded release (SCALE.md §1).

    Parameters
    ----------
    rules
        Strong rules (index = rule number), with ``antecedent_*`` and ``consequent_*``.
    sac_released, attribute_table, id_table, attribute_clusters
        A release (or one shard of it).

    Returns
    -------
    (counts, members)
        ``counts``: one row per rule (index = rule number) with ``n_antecedent``, ``n_visible`` and
        ``n_candidates`` (int64, see :func:`attribute_table_disclosure`). ``members``: rule number -> bool array over
        the rows of ``attribute_table`` (in its order): the row is in ``M_r``.
    """
    cluster_of = _cluster_of(attribute_clusters) if len(attribute_clusters) else {}
    shares = _sid_value_shares(id_table, rules)
    rows: list[tuple[int, int, int]] = []
    members: dict[int, np.ndarray] = {}
    sid_columns: dict[str, np.ndarray] = {}  # each attribute's SID column, converted once for every rule
    for rule_index, rule in zip(rules.index.to_numpy(np.int64), rules.itertuples(index=False), strict=True):
        a_attr, a_val = str(rule.antecedent_attribute), str(rule.antecedent_value)
        b_attr, b_val = str(rule.consequent_attribute), str(rule.consequent_value)
        a_rows = (shares["attribute"] == a_attr) & (shares["value"] == a_val)
        b_rows = (shares["attribute"] == b_attr) & (shares["value"] == b_val)
        n_a = int(shares.loc[a_rows, "count"].sum())
        visible = 0
        if len(sac_released):
            has_a = value_mask(sac_released[a_attr], a_val)
            n_a += int(has_a.sum())
            if cluster_of.get(a_attr) is not None and cluster_of.get(a_attr) == cluster_of.get(b_attr):
                visible = int((has_a & value_mask(sac_released[b_attr], b_val)).sum())
        if len(attribute_table):
            in_m = _in_candidates(
                attribute_table,
                a_attr,
                shares.loc[a_rows, "sid"].to_numpy(np.int64),
                b_attr,
                shares.loc[b_rows, "sid"].to_numpy(np.int64),
                sid_columns,
            )
        else:
            in_m = np.zeros(0, dtype=bool)
        members[int(rule_index)] = in_m
        rows.append((n_a, visible, int(in_m.sum())))
    counts = pd.DataFrame(rows, columns=["n_antecedent", "n_visible", "n_candidates"], index=rules.index, dtype="int64")
    return counts, members


def per_record_disclosure(probabilities: pd.DataFrame) -> pd.DataFrame:
    """Per-record disclosure probability: the maximum over the rules the record contains.

    Parameters
    ----------
    probabilities
        Output of :func:`disclosure_probabilities`.

    Returns
    -------
    pandas.DataFrame
        One row per record that contains at least one strong rule: ``row_id`` (int64),
        ``rule`` (int64, the maximising rule), ``numerator``, ``denominator`` (int64) and
        ``probability``.

    References
    ----------
    P1 Figures 10-11; SPEC §10 and §15 row 20.
    """
    if len(probabilities) == 0:
        return pd.DataFrame(
            {
                c: pd.Series(dtype=t)
                for c, t in [
                    ("row_id", "int64"),
                    ("rule", "int64"),
                    ("numerator", "int64"),
                    ("denominator", "int64"),
                    ("probability", "float64"),
                ]
            }
        )
    order = probabilities.sort_values(["row_id", "probability"], ascending=[True, False], kind="stable")
    best = order.drop_duplicates("row_id", keep="first")
    return best[["row_id", "rule", "numerator", "denominator", "probability"]].reset_index(drop=True)


def adversary_view(
    rules: pd.DataFrame,
    *,
    sac_released: pd.DataFrame,
    attribute_table: pd.DataFrame,
    id_table: pd.DataFrame,
    attribute_clusters: pd.DataFrame,
    ell_per_attribute: Mapping[str, int] | None = None,
) -> pd.DataFrame:
    """The adversary's belief for every released record and every known rule (no ground truth).

    Unlike :func:`disclosure_probabilities` on the true rule holders, this needs only the
    release and the rules, so it can audit a published release directory: it is what an
    adversary who knows the rules computes for each released row.

    Parameters
    ----------
    rules
        Known strong rules with ``antecedent_*``, ``consequent_*`` and the integer counts
        ``support_antecedent`` and ``support_both`` (index = rule number).
    sac_released, attribute_table, id_table, attribute_clusters
        A release (``sac_released`` / ``attribute_clusters`` empty for a Rating release).
    ell_per_attribute
        Optional ℓ_j per sensitive attribute (SPEC §6.7): the record's rule is then the one whose probability is
        largest relative to its bound 1/ℓ_j of its consequent's attribute (``probability · ℓ_j``), so that the record
        is above some rule's bound iff it is above this one's. None: the most likely rule.

    Returns
    -------
    pandas.DataFrame
        One row per released record (``row_id``, int64, ascending) with ``numerator``,
        ``denominator`` (int64) and ``probability`` (float64) of the most likely rule, and
        ``rule`` (int64, index into ``rules``; -1 when no rule has a positive probability,
        then the probability is 0 over 1).

    References
    ----------
    P1 §3.3; SPEC §10 (ratio adversary, per-record maximum of §15 row 20).
    """
    released = np.concatenate(
        [
            sac_released["row_id"].to_numpy(np.int64) if len(sac_released) else np.array([], dtype=np.int64),
            attribute_table["row_id"].to_numpy(np.int64) if len(attribute_table) else np.array([], dtype=np.int64),
        ]
    )
    released.sort()
    if len(rules) == 0 or len(released) == 0:
        return pd.DataFrame(
            {
                "row_id": released,
                "rule": np.full(len(released), -1, dtype=np.int64),
                "numerator": np.zeros(len(released), dtype=np.int64),
                "denominator": np.ones(len(released), dtype=np.int64),
                "probability": np.zeros(len(released)),
            }
        )
    # one rule at a time over every released row, keeping the running maximum per row (the
    # first rule in index order wins ties, as in per_record_disclosure): memory O(rows), not
    # O(rows × rules)
    best_rule = np.full(len(released), -1, dtype=np.int64)
    best_numerator = np.zeros(len(released), dtype=np.int64)
    best_denominator = np.ones(len(released), dtype=np.int64)
    best_probability = np.zeros(len(released), dtype=np.float64)
    best_score = np.zeros(len(released), dtype=np.float64)
    shares = _sid_value_shares(id_table, rules)  # once for every rule
    for rule_index in rules.index.to_numpy(np.int64):
        pairs = pd.DataFrame({"row_id": released, "rule": np.full(len(released), rule_index, dtype=np.int64)})
        result = _disclosure_probabilities(
            pairs,
            rules,
            shares,
            sac_released=sac_released,
            attribute_table=attribute_table,
            attribute_clusters=attribute_clusters,
        )
        probability = result["probability"].to_numpy(np.float64)
        score = probability * _rule_weight(rules, rule_index, ell_per_attribute)
        better = score > best_score
        best_rule[better] = rule_index
        best_numerator[better] = result["numerator"].to_numpy(np.int64)[better]
        best_denominator[better] = result["denominator"].to_numpy(np.int64)[better]
        best_probability[better] = probability[better]
        best_score[better] = score[better]
    return pd.DataFrame(
        {
            "row_id": released,
            "rule": best_rule,
            "numerator": best_numerator,
            "denominator": best_denominator,
            "probability": best_probability,
        }
    )


#: Columns of :func:`candidate_adversary` (and their dtypes).
ADVERSARY_COLUMNS = {
    "row_id": "int64",
    "rule": "int64",
    "numerator": "int64",
    "denominator": "int64",
    "probability": "float64",
    "holds_rule": "bool",
    "held_rule": "int64",
    "held_numerator": "int64",
    "held_denominator": "int64",
    "held_probability": "float64",
}


def _rule_weight(rules: pd.DataFrame, rule_index: int, ell_per_attribute: Mapping[str, int] | None) -> int:
    """ℓ_j of the consequent's attribute of rule ``rule_index`` (1 without per-attribute ℓ): a probability times it is
    the probability relative to the rule's bound 1/ℓ_j."""
    if ell_per_attribute is None:
        return 1
    return int(ell_per_attribute[str(rules.loc[rule_index, "consequent_attribute"])])


def candidate_adversary(
    rules: pd.DataFrame,
    holders: pd.DataFrame,
    *,
    sac_released: pd.DataFrame,
    attribute_table: pd.DataFrame,
    id_table: pd.DataFrame,
    attribute_clusters: pd.DataFrame,
    ell_per_attribute: Mapping[str, int] | None = None,
) -> pd.DataFrame:
    """The strong-rule adversary run once on a release: what it believes of every released record (the audit's view,
    :func:`adversary_view`) and what it learns of the records that truly hold a rule (the disclosure gate's figures,
    :func:`per_record_disclosure` of :func:`disclosure_probabilities` on ``holders``), from one pass over the rules.

    ``P(t contains r)`` depends only on the release, the record's row and the rule, not on whether ``t`` holds ``r``, so
    both maxima are taken over the same probabilities: the view over every rule, the holders' over the rules each holds.

    Parameters
    ----------
    rules
        Strong rules with ``antecedent_*``, ``consequent_*`` and the integer counts ``support_antecedent`` and
        ``support_both`` (index = rule number).
    holders
        PRIVATE ground truth: ``row_id`` (release ids) and ``rule`` (index into ``rules``), one row per (released
        record, rule it contains), as :func:`rule_holders` with the release's row map gives it.
    sac_released, attribute_table, id_table, attribute_clusters
        A release (``sac_released`` / ``attribute_clusters`` empty for a Rating release).
    ell_per_attribute
        Optional ℓ_j per sensitive attribute (SPEC §6.7): a rule's bound is then 1/ℓ_j of its consequent's attribute,
        and the view's rule and the ``held_*`` rule of a record are the ones whose probability is largest **relative
        to their bound** (``probability · ℓ_j``), so that the disclosure gate and the audit check the rule nearest to,
        or furthest above, its own bound. None: the most likely rule (every bound the same).

    Returns
    -------
    pandas.DataFrame
        PRIVATE (it says which records hold a rule). One row per released record, ``row_id`` ascending, with the
        columns of :data:`ADVERSARY_COLUMNS`: ``rule``, ``numerator``, ``denominator``, ``probability`` as
        :func:`adversary_view` (the most likely rule over every rule; -1 and 0/1 when none has a positive
        probability); ``holds_rule`` (whether the record holds at least one rule); ``held_rule``, ``held_numerator``,
        ``held_denominator``, ``held_probability`` as :func:`per_record_disclosure` (the maximum over the rules the
        record holds, the lowest rule number among ties), -1, 0, 1 and 0.0 when it holds none.

    References
    ----------
    P1 §3.3, Figures 10-11; SPEC §10 and §15 row 20.
    """
    released = np.concatenate(
        [
            sac_released["row_id"].to_numpy(np.int64) if len(sac_released) else np.array([], dtype=np.int64),
            attribute_table["row_id"].to_numpy(np.int64) if len(attribute_table) else np.array([], dtype=np.int64),
        ]
    )
    released.sort()
    n = len(released)
    best = [np.full(n, -1, dtype=np.int64), np.zeros(n, dtype=np.int64), np.ones(n, dtype=np.int64), np.zeros(n)]
    held = [np.full(n, -1, dtype=np.int64), np.zeros(n, dtype=np.int64), np.ones(n, dtype=np.int64), np.full(n, -1.0)]
    best_score = np.zeros(n)
    held_score = np.full(n, -1.0)  # the held rule's probability relative to its bound (times ℓ_j), or the probability
    holder_rows = holders["row_id"].to_numpy(np.int64)
    holder_rules = holders["rule"].to_numpy(np.int64)
    if len(rules) and n:
        shares = _sid_value_shares(id_table, rules)  # once for every rule
        for rule_index in rules.index.to_numpy(np.int64):
            pairs = pd.DataFrame({"row_id": released, "rule": np.full(n, rule_index, dtype=np.int64)})
            result = _disclosure_probabilities(
                pairs,
                rules,
                shares,
                sac_released=sac_released,
                attribute_table=attribute_table,
                attribute_clusters=attribute_clusters,
            )
            probability = result["probability"].to_numpy(np.float64)
            numerator = result["numerator"].to_numpy(np.int64)
            denominator = result["denominator"].to_numpy(np.int64)
            # the view: the first rule in index order wins ties (as adversary_view)
            weight = _rule_weight(rules, rule_index, ell_per_attribute)
            better = probability * weight > best_score
            for column, values in zip(best, (np.full(n, rule_index), numerator, denominator, probability), strict=True):
                column[better] = values[better]
            best_score[better] = (probability * weight)[better]
            # the holders: the rules each holds, the lowest rule number among ties (as per_record_disclosure)
            holds = np.isin(released, holder_rows[holder_rules == rule_index])
            score = probability * weight
            better = holds & ((score > held_score) | ((score == held_score) & (rule_index < held[0])))
            for column, values in zip(held, (np.full(n, rule_index), numerator, denominator, probability), strict=True):
                column[better] = values[better]
            held_score[better] = score[better]
    holds_rule = held[0] >= 0
    held[3][~holds_rule] = 0.0
    return pd.DataFrame(
        {
            "row_id": released,
            "rule": best[0],
            "numerator": best[1],
            "denominator": best[2],
            "probability": best[3],
            "holds_rule": holds_rule,
            "held_rule": held[0],
            "held_numerator": held[1],
            "held_denominator": held[2],
            "held_probability": held[3],
        }
    )


def released_records_view(adversary: pd.DataFrame) -> pd.DataFrame:
    """The audit's view in :func:`candidate_adversary`'s frame: ``row_id``, ``rule``, ``numerator``, ``denominator``,
    ``probability`` of every released record (as :func:`adversary_view` returns it)."""
    columns = ["row_id", "rule", "numerator", "denominator", "probability"]
    return adversary[columns].astype({c: ADVERSARY_COLUMNS[c] for c in columns}).reset_index(drop=True)


def holders_disclosure(adversary: pd.DataFrame) -> pd.DataFrame:
    """The disclosure gate's frame in :func:`candidate_adversary`'s frame: one row per record holding a rule, ``row_id``
    ascending, with ``rule``, ``numerator``, ``denominator`` (int64) and ``probability`` (float64) of the rule it holds
    that the adversary finds most likely (as :func:`per_record_disclosure` returns it)."""
    chosen = adversary[adversary["holds_rule"].astype(bool)]
    frame = pd.DataFrame(
        {
            "row_id": chosen["row_id"].to_numpy(np.int64),
            "rule": chosen["held_rule"].to_numpy(np.int64),
            "numerator": chosen["held_numerator"].to_numpy(np.int64),
            "denominator": chosen["held_denominator"].to_numpy(np.int64),
            "probability": chosen["held_probability"].to_numpy(np.float64),
        }
    )
    return frame.sort_values("row_id", kind="stable").reset_index(drop=True)
