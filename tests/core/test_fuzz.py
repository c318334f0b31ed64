"""Fuzzing the pure algorithms (issue 6): random tables of random size, skew, number of sensitive
and quasi-identifier attributes, value vocabularies (shared across attributes, Unicode, blanks
inside values), ℓ, min_confidence and seed, through the mixed model
(:func:`pipeline.core.mixed_model.run_mixed_model` + :func:`assemble_release_tables`) and plain /
improved Rating (:func:`pipeline.core.rating.rating_tables`).

Every SPEC §9 invariant is checked on the output by an independent plain-Python checker (it does
not reuse the verification or adversary code under test; tests/core/test_properties.py checks
those on its own tables):

1. SAC~: every group has exactly ℓ rows and ℓ distinct values per sensitive attribute; the
   multiset of cluster tuples of each group equals the original one.
2. Lemma 12: a SAC~ group holds at most one row with both sides of any strong rule whose sides
   are in one cluster (so P ≤ 1/ℓ; across clusters P = 1/ℓ²); attribute-table records get 0
   (no record's SIDs hold both sides of a rule, which is claim 4 as SPEC states it).
3. Attribute table: every SID has ≥ ℓ distinct values and none above 1/ℓ of its occurrences; one
   record per value occurrence; suppressed cells are exactly the cells left without a SID.
4. No SID of an attribute other than S_max holds a strong value.
5. Every record is in exactly one SAC~ group, the attribute table, or the deleted list.

Plus: the strong rules equal a brute-force count (SPEC §2, exact rational threshold), every
record holding a strong value is in SAC~ or deleted, release row ids are unique, and released
values are the input's. Invalid parameters (ℓ < 2 or not an integer; min_confidence outside
(0, 1] or not finite) raise the documented ``ValueError`` naming the parameter.

1,000 examples in total (350 + 350 + 300), deadline None, tables of at most 36 records.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from decimal import Decimal
from fractions import Fraction
from itertools import permutations

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.core.mixed_model import assemble_release_tables, run_mixed_model
from pipeline.core.rating import rating_tables

#: Vocabularies of sensitive values: per-attribute prefixes, one shared by every attribute (the
#: same string in two attributes must stay two different items), and awkward text.
VOCABULARIES = {
    "prefixed": lambda attribute, k: f"{attribute}_{k}",
    "shared": lambda attribute, k: f"v{k}",
    "awkward": lambda attribute, k: ["é", "e\u0301", "東京", "a,b", 'q"q', "x y", "line\nbreak", "😀", "?x", "0", "00", "0.0"][k],
}


@st.composite
def wild_tables(draw, max_records=36):
    """A records frame: ``row_id``, 1-2 quasi-identifiers ``Q1``.., 2-4 sensitive attributes ``S1``..

    Sizes 0..max_records; each sensitive attribute has 1-8 values drawn with a Zipf-like skew
    (exponent 0-3) from one of the vocabularies; quasi-identifiers have 1-5 values.
    """
    n = draw(st.integers(min_value=0, max_value=max_records))
    m = draw(st.integers(min_value=2, max_value=4))
    n_quasi = draw(st.integers(min_value=1, max_value=2))
    vocabulary = VOCABULARIES[draw(st.sampled_from(sorted(VOCABULARIES)))]
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    frame = pd.DataFrame({"row_id": np.arange(1, n + 1, dtype=np.int64)})
    for q in range(n_quasi):
        frame[f"Q{q + 1}"] = rng.integers(0, draw(st.integers(1, 5)), n).astype(str)
    for j in range(m):
        k = draw(st.integers(min_value=1, max_value=8))
        skew = draw(st.floats(min_value=0.0, max_value=3.0))
        weights = 1.0 / np.arange(1, k + 1) ** skew
        attribute = f"S{j + 1}"
        frame[attribute] = [vocabulary(attribute, int(v)) for v in rng.choice(k, size=n, p=weights / weights.sum())]
    return frame


min_confidences = st.one_of(
    st.sampled_from([1.0, 0.8, 0.75, 0.5, 1 / 3]),
    st.floats(min_value=0.01, max_value=1.0, allow_nan=False),
)


def brute_force_rules(frame: pd.DataFrame, sensitive: list[str], min_confidence: float) -> set[tuple]:
    """SPEC §2 by counting: (S_i = a) => (S_j = b), i != j, support_both / support(a) >= min_confidence
    in exact rationals (the decimal the user wrote, not the binary double)."""
    threshold = Fraction(Decimal(str(min_confidence)))
    rules = set()
    for left, right in permutations(sensitive, 2):
        support = Counter(frame[left])
        both = Counter(zip(frame[left], frame[right]))
        for (a, b), count in both.items():
            if Fraction(count, support[a]) >= threshold:
                rules.add((left, a, right, b, support[a], count))
    return rules


def check_section_9(frame, quasi_identifiers, sensitive, *, ell, min_confidence, seed) -> None:
    """Run the mixed model and assert SPEC §9 with plain Python (see the module docstring)."""
    result = run_mixed_model(frame, sensitive, ell=ell, min_confidence=min_confidence, seed=seed)
    tables = assemble_release_tables(
        frame,
        quasi_identifiers,
        sensitive,
        sac_permuted=result.sac_permuted,
        attribute_sids=result.attribute_sids,
        id_table=result.id_table,
        clusters=result.clusters,
    )
    raw = {int(r["row_id"]): r for r in frame.to_dict("records")}
    rules = {
        (
            r.antecedent_attribute,
            r.antecedent_value,
            r.consequent_attribute,
            r.consequent_value,
            int(r.support_antecedent),
            int(r.support_both),
        )
        for r in result.rules.itertuples()
    }
    assert rules == brute_force_rules(frame, sensitive, min_confidence)
    strong = defaultdict(set)
    for left, a, right, b, _, _ in rules:
        strong[left].add(a)
        strong[right].add(b)

    source_of = dict(zip(tables.row_map["row_id"].astype(int), tables.row_map["source_row_id"].astype(int)))
    sac = tables.sac_released.to_dict("records")
    at = tables.attribute_table.to_dict("records")
    # release row ids unique; quasi-identifiers are the record's own
    release_ids = [int(r["row_id"]) for r in sac + at]
    assert len(release_ids) == len(set(release_ids))
    for row in sac + at:
        source = raw[source_of[int(row["row_id"])]]
        assert all(row[q] == str(source[q]) for q in quasi_identifiers)

    # 1. SAC~ groups
    cluster_of = {a: k for k, cluster in enumerate(result.clusters) for a in cluster}
    assert sorted(cluster_of) == sorted(sensitive)
    groups = defaultdict(list)
    for row in sac:
        groups[int(row["group_id"])].append(row)
    for members in groups.values():
        assert len(members) == ell
        for attribute in sensitive:
            assert len({row[attribute] for row in members}) == ell
        originals = [raw[source_of[int(row["row_id"])]] for row in members]
        for cluster in result.clusters:
            released_tuples = Counter(tuple(row[a] for a in cluster) for row in members)
            original_tuples = Counter(tuple(str(o[a]) for a in cluster) for o in originals)
            assert released_tuples == original_tuples
    # 2. Lemma 12 on SAC~: at most one row of a group holds both sides of a same-cluster rule
    for left, a, right, b, _, _ in rules:
        if cluster_of[left] == cluster_of[right]:
            for members in groups.values():
                assert sum(row[left] == a and row[right] == b for row in members) <= 1

    # 3. attribute table / ID table
    id_rows = tables.id_table.to_dict("records")
    sid_values = defaultdict(Counter)
    for row in id_rows:
        sid_values[(row["attribute"], int(row["sid"]))][row["value"]] += int(row["count"])
    for (attribute, sid), values in sid_values.items():
        occurrences = sum(values.values())
        assert len(values) >= ell
        assert max(values.values()) * ell <= occurrences
        pointing = [row for row in at if not pd.isna(row[attribute]) and int(row[attribute]) == sid]
        assert len(pointing) == occurrences
        # the records pointing at a SID hold exactly its values
        assert Counter(str(raw[source_of[int(r["row_id"])]][attribute]) for r in pointing) == values
    for attribute in sensitive:
        sids_used = {int(row[attribute]) for row in at if not pd.isna(row[attribute])}
        assert sids_used == {sid for (a, sid) in sid_values if a == attribute}
    # 2 (attribute table) and 4: no AT record's SIDs hold both sides of a rule; no strong value
    # in a SID of an attribute other than S_max
    for (attribute, sid), values in sid_values.items():
        if attribute != result.split.s_max:
            assert not set(values) & strong[attribute]
    for row in at:
        for left, a, right, b, _, _ in rules:
            if pd.isna(row[left]) or pd.isna(row[right]):
                continue
            assert not (a in sid_values[(left, int(row[left]))] and b in sid_values[(right, int(row[right]))])

    # 5. every record exactly once; SAC (SPEC §3: a strong value on an attribute other than
    #    S_max, hence every rule holder) is in SAC~ or deleted
    sac_sources = [source_of[int(r["row_id"])] for r in sac]
    at_sources = [source_of[int(r["row_id"])] for r in at]
    placed = Counter(sac_sources + at_sources + [int(d) for d in result.grouping.deleted])
    assert placed == Counter(list(raw))
    published_or_deleted = set(sac_sources) | set(result.grouping.deleted)
    for row_id, record in raw.items():
        if any(str(record[a]) in strong[a] for a in sensitive if a != result.split.s_max):
            assert row_id in published_or_deleted
        if any(record[left] == a and record[right] == b for left, a, right, b, _, _ in rules):
            assert row_id in published_or_deleted


@settings(max_examples=350, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(frame=wild_tables(), ell=st.integers(2, 5), min_confidence=min_confidences, seed=st.integers(0, 2**31 - 1))
def test_mixed_model_keeps_every_section_9_invariant(frame, ell, min_confidence, seed):
    sensitive = [c for c in frame.columns if c.startswith("S")]
    quasi_identifiers = [c for c in frame.columns if c.startswith("Q")]
    check_section_9(frame, quasi_identifiers, sensitive, ell=ell, min_confidence=min_confidence, seed=seed)


@settings(max_examples=350, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(frame=wild_tables(), ell=st.integers(2, 5))
def test_rating_keeps_the_attribute_table_invariants(frame, ell):
    """Plain Rating on the whole table (SPEC §7) and improved Rating give the same SIDs, every SID
    ℓ-diverse (§9.3), and every record exactly once, with a SID or a reported suppressed cell (§9.5)."""
    sensitive = [c for c in frame.columns if c.startswith("S")]
    plain_ids, plain_sids = rating_tables(frame, sensitive, ell=ell, method="plain")
    improved_ids, improved_sids = rating_tables(frame, sensitive, ell=ell, method="improved")
    pd.testing.assert_frame_equal(plain_ids, improved_ids)
    pd.testing.assert_frame_equal(plain_sids, improved_sids)
    assert list(plain_sids["row_id"]) == list(frame["row_id"])
    values_of = defaultdict(Counter)
    for row in plain_ids.to_dict("records"):
        values_of[(row["attribute"], int(row["sid"]))][row["value"]] += int(row["count"])
    for (attribute, sid), values in values_of.items():
        assert len(values) >= ell and max(values.values()) * ell <= sum(values.values())
        holders = frame.loc[(plain_sids[attribute] == sid).fillna(False).to_numpy(), attribute]
        assert Counter(holders) == values
    for attribute in sensitive:
        suppressed = int(plain_sids[attribute].isna().sum())
        in_sids = sum(sum(v.values()) for (a, _), v in values_of.items() if a == attribute)
        assert suppressed + in_sids == len(frame)
        # a cell is suppressed only when its value is in every SID (no SID can take it, SPEC §6.4)
        for value in frame.loc[plain_sids[attribute].isna().to_numpy(), attribute]:
            assert all(value in v for (a, _), v in values_of.items() if a == attribute)


bad_ells = st.one_of(st.integers(max_value=1), st.sampled_from([2.5, 3.25, -2.0]))
bad_min_confidences = st.one_of(
    st.floats(max_value=0.0, allow_nan=False), st.floats(min_value=1.0, exclude_min=True), st.just(float("nan"))
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    frame=wild_tables(max_records=12),
    bad=st.one_of(st.tuples(st.just("ell"), bad_ells), st.tuples(st.just("min_confidence"), bad_min_confidences)),
)
def test_invalid_parameters_raise_the_documented_error(frame, bad):
    sensitive = [c for c in frame.columns if c.startswith("S")]
    parameters = {"ell": 3, "min_confidence": 0.8, "seed": 0}
    name, value = bad
    parameters[name] = value
    expected = "ell" if name == "ell" else "min_confidence"
    with pytest.raises(ValueError, match=expected):
        run_mixed_model(frame, sensitive, **parameters)
    if name == "ell":
        with pytest.raises(ValueError, match="ell"):
            rating_tables(frame, sensitive, ell=value)
