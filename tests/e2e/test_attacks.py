"""The join and one-known-value adversaries (pipeline.core.attacks), the naive per-attribute
release, the utility measures and the attack report.

Hand-computed beliefs for every model, hypothesis invariants against brute-force reference
implementations, and a reduced Adult run of the whole evaluation."""

import itertools
import json
from fractions import Fraction
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipeline.core import attacks
from pipeline.core.hierarchies import Hierarchy
from pipeline.core.kl_anonymity import kl_anonymize, kl_release_table
from pipeline.core.mixed_model import assemble_release_tables, run_mixed_model
from pipeline.core.naive_release import naive_release
from pipeline.core.rating import rating_tables
from pipeline.core.release_utility import hiding_set_sizes_mixed, naive_rule_confidences, utility_measures

ADULT = Path(__file__).resolve().parents[2] / "data" / "adult"
SA = ["disease", "job"]

ZIP = Hierarchy.from_rows(
    [["1301", "130*", "*"], ["1302", "130*", "*"], ["1401", "140*", "*"], ["1402", "140*", "*"]], attribute="zip"
)
DISEASE = Hierarchy.from_rows(
    [["flu", "respiratory", "*"], ["cold", "respiratory", "*"], ["hiv", "std", "*"]], attribute="disease"
)
JOB = Hierarchy.from_rows([["nurse", "health", "*"], ["doctor", "health", "*"], ["clerk", "office", "*"]], attribute="job")
HIERARCHIES = {"zip": ZIP, "disease": DISEASE, "job": JOB}


def victims_frame(rows):
    """rows: (source_row_id, zip, disease, job)."""
    return pd.DataFrame(rows, columns=["source_row_id", "zip", *SA]).astype({"source_row_id": "int64"})


def probability_of(frame, source_row_id, column="probability"):
    return frame.set_index("source_row_id").loc[source_row_id, column]


# --------------------------------------------------------------------------- coverage


def test_label_coverage_follows_the_hierarchy_levels():
    covered = attacks.label_coverage(ZIP, ["130*", "*", "1401", "140*"], ["1301", "1401", "1402"])
    assert covered.tolist() == [[True, False, False], [True, True, True], [False, True, False], [False, True, True]]
    with pytest.raises(ValueError, match="not a node"):
        attacks.label_coverage(ZIP, ["15*"], ["1301"])


# --------------------------------------------------------------------------- mixed model by hand


def hand_mixed_release(clusters):
    """Two SAC~ groups (ℓ = 2) and one attribute-table row with the SIDs {flu, cancer} / {nurse, cook}."""
    sac = pd.DataFrame(
        [(1, 1, "A", "flu", "nurse"), (2, 1, "A", "cold", "clerk"), (3, 2, "B", "flu", "clerk"), (4, 2, "B", "hiv", "nurse")],
        columns=["row_id", "group_id", "zip", *SA],
    )
    at = pd.DataFrame({"row_id": [5], "zip": ["A"], "disease": [1], "job": [1]}).astype({"disease": "Int32", "job": "Int32"})
    ids = pd.DataFrame(
        [("disease", 1, "cancer", 1), ("disease", 1, "flu", 1), ("job", 1, "cook", 1), ("job", 1, "nurse", 1)],
        columns=["attribute", "sid", "value", "count"],
    )
    cluster_frame = pd.DataFrame([(k + 1, a) for k, c in enumerate(clusters) for a in c], columns=["cluster_id", "attribute"])
    return attacks.mixed_release_belief(
        sac_released=sac,
        attribute_table=at,
        id_table=ids,
        attribute_clusters=cluster_frame,
        quasi_identifiers=["zip"],
        sensitive_attributes=SA,
    )


def test_mixed_belief_with_one_cluster_by_hand():
    belief = hand_mixed_release([["disease", "job"]])
    # zip A: 2/3 from group 1 ((flu,nurse), (cold,clerk) each 1/2), 1/3 from the AT row (4 tuples, 1/4 each)
    distribution = attacks.belief_distribution(belief, {"zip": "A"})
    got = {(r.disease, r.job): r.probability for r in distribution.itertuples()}
    expected = {
        ("flu", "nurse"): 5 / 12,
        ("cold", "clerk"): 1 / 3,
        ("flu", "cook"): 1 / 12,
        ("cancer", "nurse"): 1 / 12,
        ("cancer", "cook"): 1 / 12,
    }
    assert got == pytest.approx(expected)
    victims = victims_frame(
        [
            (1, "A", "flu", "nurse"),
            (2, "A", "cold", "clerk"),
            (5, "A", "cancer", "cook"),
            (3, "B", "flu", "clerk"),
            (4, "B", "hiv", "nurse"),
        ]
    )
    join = attacks.join_attack(belief, victims)
    assert join["probability"].tolist() == pytest.approx([5 / 12, 1 / 3, 1 / 12, 1 / 2, 1 / 2])
    assert not join["certain"].any()
    assert join["n_candidate_rows"].tolist() == [3, 3, 3, 2, 2]
    # one known value: the SAC~ cluster keeps (cold, clerk) linked -> pinned; flu is in group 1 and the AT SID
    disease_to_job = attacks.one_known_value_attack(belief, victims, "disease", "job")
    assert disease_to_job["probability"].tolist() == pytest.approx([(1 + 0.25) / 1.5, 1.0, 0.25 / 0.5, 1.0, 1.0])
    assert disease_to_job["pinned"].tolist() == [False, True, False, True, True]
    job_to_disease = attacks.one_known_value_attack(belief, victims, "job", "disease")
    # known nurse (zip A): group row (flu, nurse) weight 2 x 1/2 = 1; AT row nurse 1/2 -> flu 1/4, cancer 1/4
    assert probability_of(job_to_disease, 1) == pytest.approx(1.25 / 1.5)
    assert probability_of(job_to_disease, 5) == pytest.approx(0.25 / 0.5)
    assert bool(probability_of(job_to_disease, 2, "pinned"))


def test_mixed_belief_with_two_clusters_by_hand():
    belief = hand_mixed_release([["disease"], ["job"]])
    # group 1 now spreads 1/4 over {flu, cold} x {nurse, clerk}
    got = {(r.disease, r.job): r.probability for r in attacks.belief_distribution(belief, {"zip": "A"}).itertuples()}
    expected = {
        ("flu", "nurse"): 1 / 4,
        ("flu", "clerk"): 1 / 6,
        ("cold", "nurse"): 1 / 6,
        ("cold", "clerk"): 1 / 6,
        ("cancer", "nurse"): 1 / 12,
        ("flu", "cook"): 1 / 12,
        ("cancer", "cook"): 1 / 12,
    }
    assert got == pytest.approx(expected)
    victims = victims_frame([(1, "A", "flu", "nurse"), (2, "A", "cold", "clerk"), (5, "A", "cancer", "cook")])
    one = attacks.one_known_value_attack(belief, victims, "disease", "job")
    # known flu: group rows 2 x (1/2 x {nurse 1/2, clerk 1/2}) + AT 1/2 x {nurse 1/2, cook 1/2}
    assert one["probability"].tolist() == pytest.approx([0.75 / 1.5, 0.5, 0.5])
    assert not one["pinned"].any()  # clusters are independent: nothing stays linked


# --------------------------------------------------------------------------- Rating by hand


def test_rating_belief_with_a_suppressed_cell_by_hand():
    at = pd.DataFrame({"row_id": [1, 2, 3], "zip": ["A", "A", "A"], "disease": [1, 2, None], "job": [1, 2, 1]})
    at = at.astype({"disease": "Int32", "job": "Int32"})
    ids = pd.DataFrame(
        [
            ("disease", 1, "cancer", 1),
            ("disease", 1, "flu", 1),
            ("disease", 2, "cold", 1),
            ("disease", 2, "flu", 1),
            ("job", 1, "cook", 1),
            ("job", 1, "nurse", 1),
            ("job", 2, "clerk", 1),
            ("job", 2, "nurse", 1),
        ],
        columns=["attribute", "sid", "value", "count"],
    )
    belief = attacks.rating_release_belief(attribute_table=at, id_table=ids, quasi_identifiers=["zip"], sensitive_attributes=SA)
    # suppressed disease cell: the overall released distribution flu 2/4, cancer 1/4, cold 1/4
    victims = victims_frame([(1, "A", "cancer", "cook"), (2, "A", "flu", "nurse"), (3, "A", "cold", "nurse")])
    join = attacks.join_attack(belief, victims)
    assert join["probability"].tolist() == pytest.approx(
        [(0.25 + 0 + 0.125) / 3, (0.25 + 0.25 + 0.25) / 3, (0 + 0.25 + 0.125) / 3]
    )
    assert abs(attacks.belief_distribution(belief, {"zip": "A"})["probability"].sum() - 1) < 1e-12
    one = attacks.one_known_value_attack(belief, victims, "disease", "job")
    # known cold: row 2 cold 1/2 x {clerk, nurse}, row 3 cold 1/4 x {cook, nurse}
    assert probability_of(one, 3) == pytest.approx((0.25 + 0.125) / 0.75)
    assert not one["pinned"].any()


# --------------------------------------------------------------------------- (k, ℓ) by hand


def hand_kl_release():
    rows = [
        (1, 1, "130*", "flu", "nurse"),
        (2, 1, "130*", "flu", "nurse"),
        (3, 1, "130*", "cold", "clerk"),
        (4, 2, "1401", "hiv", "doctor"),
        (5, 2, "1401", "flu", "clerk"),
        (6, 2, "1401", "cold", "nurse"),
        (7, 3, "*", "flu", "doctor"),
        (8, 3, "*", "cold", "nurse"),
        (9, 3, "*", "hiv", "clerk"),
    ]
    return pd.DataFrame(rows, columns=["row_id", "cluster_id", "zip", *SA])


def test_kl_belief_mixes_every_covering_class_by_hand():
    belief = attacks.kl_release_belief(hand_kl_release(), ["zip"], SA, HIERARCHIES)
    victims = victims_frame(
        [
            (1, "1301", "flu", "nurse"),
            (3, "1302", "cold", "clerk"),
            (4, "1401", "hiv", "doctor"),
            (7, "1302", "flu", "doctor"),
            (8, "1402", "cold", "nurse"),
        ]
    )
    join = attacks.join_attack(belief, victims)
    # 1301/1302: classes 1 and 3 (6 rows); 1401: classes 2 and 3; 1402: class 3 only
    assert join["probability"].tolist() == pytest.approx([2 / 6, 1 / 6, 1 / 6, 1 / 6, 1 / 3])
    assert join["n_candidate_rows"].tolist() == [6, 6, 6, 6, 3]
    assert not join["certain"].any()
    one = attacks.one_known_value_attack(belief, victims, "disease", "job")
    # 1301 knows flu: (flu, nurse) x2, (flu, doctor) -> 2/3; 1402 knows cold: class 3 only -> nurse pinned
    assert one["probability"].tolist() == pytest.approx([2 / 3, 1 / 2, 1 / 2, 1 / 3, 1.0])
    assert one["pinned"].tolist() == [False, False, False, False, True]
    job_to_disease = attacks.one_known_value_attack(belief, victims, "job", "disease")
    # 1302 knows doctor: only (flu, doctor) in classes 1 and 3 -> flu pinned
    assert bool(probability_of(job_to_disease, 7, "pinned")) and probability_of(job_to_disease, 7) == 1.0


def test_kl_class_with_repeated_tuples_pins_the_linked_value():
    # Diverse = 2 ((flu, nurse) vs (cold, clerk)) but both flu holders are nurses
    rows = [(1, 1, "130*", "flu", "nurse"), (2, 1, "130*", "flu", "nurse"), (3, 1, "130*", "cold", "clerk")]
    belief = attacks.kl_release_belief(pd.DataFrame(rows, columns=["row_id", "cluster_id", "zip", *SA]), ["zip"], SA, HIERARCHIES)
    victims = victims_frame([(1, "1301", "flu", "nurse"), (3, "1302", "cold", "clerk")])
    assert attacks.join_attack(belief, victims)["probability"].tolist() == pytest.approx([2 / 3, 1 / 3])
    assert attacks.one_known_value_attack(belief, victims, "disease", "job")["pinned"].tolist() == [True, True]


# --------------------------------------------------------------------------- naive release by hand


def hand_naive_tables():
    """P2's join attack: every table is 2-diverse on its attribute, the intersection pins victim 1.

    Records: 1 (1301, flu, nurse), 2 (1302, hiv, nurse), 3 (1302, flu, clerk), 4 (1302, cold, doctor),
    5 (1302, hiv, clerk). Disease table: {1, 2} and {3, 4, 5}; job table: {1, 3} and {2, 4, 5}.
    """
    disease = pd.DataFrame(
        [
            (1, 1, "130*", "nurse", "flu"),
            (2, 1, "130*", "nurse", "hiv"),
            (3, 2, "1302", "*", "flu"),
            (4, 2, "1302", "*", "cold"),
            (5, 2, "1302", "*", "hiv"),
        ],
        columns=["row_id", "cluster_id", "zip", "job", "disease"],
    )
    job = pd.DataFrame(
        [
            (1, 1, "130*", "flu", "nurse"),
            (2, 1, "130*", "flu", "clerk"),
            (3, 2, "1302", "*", "nurse"),
            (4, 2, "1302", "*", "doctor"),
            (5, 2, "1302", "*", "clerk"),
        ],
        columns=["row_id", "cluster_id", "zip", "disease", "job"],
    )
    return {"disease": disease, "job": job}


NAIVE_VICTIMS = [
    (1, "1301", "flu", "nurse"),
    (2, "1302", "hiv", "nurse"),
    (3, "1302", "flu", "clerk"),
    (4, "1302", "cold", "doctor"),
    (5, "1302", "hiv", "clerk"),
]


def test_naive_join_attack_pins_a_tuple_no_single_table_reveals():
    tables = hand_naive_tables()
    for attribute, table in tables.items():  # each table alone is 2-diverse on its attribute
        assert table.groupby("cluster_id")[attribute].nunique().min() >= 2
    belief = attacks.naive_release_belief(tables, ["zip"], SA, HIERARCHIES)
    join = attacks.join_attack(belief, victims_frame(NAIVE_VICTIMS))
    # victim 1: disease table -> {flu, hiv} with job label 'nurse'; job table -> {nurse, clerk} with disease label 'flu'
    assert bool(join.loc[0, "certain"]) and join.loc[0, "probability"] == 1.0
    # victims at 1302: every class is a candidate, nothing is excluded: disease flu 2/5, hiv 2/5, cold 1/5; jobs alike
    assert join["probability"].tolist()[1:] == pytest.approx([4 / 25, 4 / 25, 1 / 25, 4 / 25])
    assert not join["certain"].iloc[1:].any()
    distribution = attacks.belief_distribution(belief, {"zip": "1301"})
    assert distribution[["disease", "job"]].values.tolist() == [["flu", "nurse"]]


def test_naive_one_known_value_by_hand():
    belief = attacks.naive_release_belief(hand_naive_tables(), ["zip"], SA, HIERARCHIES)
    victims = victims_frame(NAIVE_VICTIMS)
    one = attacks.one_known_value_attack(belief, victims, "disease", "job")
    # victim 3 knows flu: job table classes 1 ('flu') and 2 ('*') both survive -> nurse 2, clerk 2, doctor 1
    assert probability_of(one, 3) == pytest.approx(2 / 5)
    # victim 4 knows cold: job class 1 ('flu') cannot hold it -> class 2 only: nurse, doctor, clerk
    assert probability_of(one, 4) == pytest.approx(1 / 3)
    assert bool(probability_of(one, 1, "pinned"))


def test_naive_join_is_sound_against_exhaustive_consistency():
    """The arc-consistent join keeps the truth for every victim of a random naive release."""
    rng = np.random.default_rng(3)
    records = pd.DataFrame(
        {
            "row_id": np.arange(1, 61),
            "zip": rng.choice(["1301", "1302", "1401", "1402"], 60),
            "disease": rng.choice(["flu", "cold", "hiv"], 60),
            "job": rng.choice(["nurse", "doctor", "clerk"], 60),
        }
    )
    release = naive_release(records, ["zip"], SA, HIERARCHIES, ell=2, method="greedy")
    for table in release.tables.values():
        assert table.released.groupby("cluster_id")[table.attribute].nunique().min() >= 2
    belief = attacks.naive_release_belief({a: t.released for a, t in release.tables.items()}, ["zip"], SA, HIERARCHIES)
    victims = attacks.victim_table(records, release.tables["disease"].row_map, ["zip"], SA)
    join = attacks.join_attack(belief, victims)
    assert (join["probability"] > 0).all() and (join["probability"] <= 1).all()
    reference = brute_force_naive(release, records)
    for victim, row in zip(victims.itertuples(index=False), join.itertuples(index=False), strict=True):
        solutions = reference[victim.zip]
        assert (victim.disease, victim.job) in solutions
        if row.certain:
            assert solutions == {(victim.disease, victim.job)}


def brute_force_naive(release, records):
    """QI value -> set of (disease, job) tuples consistent with both tables (exhaustive)."""
    out = {}
    for zip_value in records["zip"].unique():
        solutions = set()
        for disease, job in itertools.product(DISEASE.base_values, JOB.base_values):
            ok = True
            for attribute, other, value, other_value, hierarchy, other_h in (
                ("disease", "job", disease, job, DISEASE, JOB),
                ("job", "disease", job, disease, JOB, DISEASE),
            ):
                table = release.tables[attribute].released
                covers_zip = attacks.label_coverage(ZIP, table["zip"].tolist(), [zip_value])[:, 0]
                covers_other = attacks.label_coverage(other_h, table[other].tolist(), [other_value])[:, 0]
                ok &= bool((covers_zip & covers_other & (table[attribute] == value).to_numpy()).any())
            if ok:
                solutions.add((disease, job))
        out[zip_value] = solutions
    return out


# --------------------------------------------------------------------------- invariants


RECORDS = st.lists(
    st.tuples(
        st.sampled_from(["1301", "1302", "1401"]),
        st.sampled_from(["flu", "cold", "hiv"]),
        st.sampled_from(["nurse", "doctor", "clerk"]),
    ),
    min_size=6,
    max_size=40,
)


def as_records(rows):
    frame = pd.DataFrame(rows, columns=["zip", *SA])
    frame.insert(0, "row_id", np.arange(1, len(frame) + 1, dtype=np.int64))
    return frame


def reference_mixture(tables, sensitive_attribute_columns, victim):
    """Brute force: average over the victim's candidate rows of each row's tuple distribution."""
    sac, at, ids, clusters = tables.sac_released, tables.attribute_table, tables.id_table, tables.attribute_clusters
    cluster_lists = (
        [list(g["attribute"]) for _, g in clusters.groupby("cluster_id")]
        if len(clusters)
        else [[a] for a in sensitive_attribute_columns]
    )
    overall = {}
    for a in sensitive_attribute_columns:
        counts = ids[ids["attribute"] == a].groupby("value")["count"].sum().astype(float)
        if len(sac):
            counts = counts.add(sac[a].value_counts().astype(float), fill_value=0)
        overall[a] = (counts / counts.sum()).to_dict()
    distributions = []
    for _, row in sac[sac["zip"] == victim["zip"]].iterrows():
        group = sac[sac["group_id"] == row["group_id"]]
        blocks = [group[c].value_counts(normalize=True).to_dict() for c in cluster_lists]
        distributions.append((blocks, cluster_lists))
    for _, row in at[at["zip"] == victim["zip"]].iterrows():
        blocks = []
        for a in sensitive_attribute_columns:
            if pd.isna(row[a]):
                blocks.append({(v,): p for v, p in overall[a].items()})
            else:
                sid = ids[(ids["attribute"] == a) & (ids["sid"] == row[a])]
                blocks.append({(v,): c / sid["count"].sum() for v, c in zip(sid["value"], sid["count"], strict=True)})
        distributions.append((blocks, [[a] for a in sensitive_attribute_columns]))
    return distributions


def reference_probability(distributions, assignment):
    """P(all attributes of ``assignment`` take their values) under the uniform mixture, exactly."""
    total = Fraction(0)
    for blocks, cluster_lists in distributions:
        p = Fraction(1)
        for block, cluster in zip(blocks, cluster_lists, strict=True):
            inside = [a for a in cluster if a in assignment]
            if not inside:
                continue
            p *= sum(
                (
                    Fraction(q).limit_denominator(10**6)
                    for key, q in block.items()
                    if all((key if isinstance(key, tuple) else (key,))[cluster.index(a)] == assignment[a] for a in inside)
                ),
                Fraction(0),
            )
        total += p
    return total / len(distributions)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(RECORDS, st.sampled_from(["mixed", "rating"]))
def test_mixture_beliefs_match_a_brute_force_reference(rows, model):
    records = as_records(rows)
    if model == "mixed":
        result = run_mixed_model(records, SA, ell=2, min_confidence=0.6, seed=1)
        tables = assemble_release_tables(
            records,
            ["zip"],
            SA,
            sac_permuted=result.sac_permuted,
            attribute_sids=result.attribute_sids,
            id_table=result.id_table,
            clusters=result.clusters,
        )
        belief = attacks.mixed_release_belief(
            sac_released=tables.sac_released,
            attribute_table=tables.attribute_table,
            id_table=tables.id_table,
            attribute_clusters=tables.attribute_clusters,
            quasi_identifiers=["zip"],
            sensitive_attributes=SA,
        )
    else:
        id_table, sids = rating_tables(records, SA, ell=2)
        empty = pd.DataFrame({c: pd.Series(dtype=object) for c in ["group_id", "row_id", "zip", *SA]})
        tables = assemble_release_tables(
            records, ["zip"], SA, sac_permuted=empty, attribute_sids=sids, id_table=id_table, clusters=[]
        )
        belief = attacks.rating_release_belief(
            attribute_table=tables.attribute_table, id_table=tables.id_table, quasi_identifiers=["zip"], sensitive_attributes=SA
        )
    victims = attacks.victim_table(records, tables.row_map, ["zip"], SA)
    join = attacks.join_attack(belief, victims)
    one = attacks.one_known_value_attack(belief, victims, "job", "disease")
    assert join["probability"].between(0, 1).all() and one["probability"].between(0, 1).all()
    # the truth keeps some mass unless a suppressed cell holds a value the release shows nowhere (documented)
    shown = np.logical_and.reduce([victims[a].isin(belief.domains[a]).to_numpy() for a in SA])
    assert (join["probability"].to_numpy()[shown] > 0).all()
    if all(belief.domains[a] for a in SA):  # (an attribute suppressed everywhere gives the adversary nothing)
        for zip_value in victims["zip"].unique():
            assert attacks.belief_distribution(belief, {"zip": zip_value})["probability"].sum() == pytest.approx(1.0)
    for k in np.flatnonzero(shown)[:8]:
        victim = victims.iloc[k]
        reference = reference_mixture(tables, SA, victim)
        expected_join = reference_probability(reference, {"disease": victim["disease"], "job": victim["job"]})
        assert join["probability"].iloc[k] == pytest.approx(float(expected_join), abs=1e-6)
        expected_one = expected_join / reference_probability(reference, {"job": victim["job"]})
        assert one["probability"].iloc[k] == pytest.approx(float(expected_one), abs=1e-6)
        if one["pinned"].iloc[k]:
            assert one["probability"].iloc[k] == pytest.approx(1.0)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(RECORDS, st.integers(min_value=2, max_value=4))
def test_kl_join_probability_never_reaches_certainty(rows, k):
    records = as_records(rows)
    ell = 2
    try:
        anonymization = kl_anonymize(records, ["zip"], SA, HIERARCHIES, k=k, ell=ell, method="greedy")
    except ValueError:
        return  # infeasible input (Diverse(table) < ℓ or too few records)
    released, row_map = kl_release_table(records, anonymization, ["zip"], SA)
    belief = attacks.kl_release_belief(released, ["zip"], SA, HIERARCHIES)
    victims = attacks.victim_table(records, row_map, ["zip"], SA)
    join = attacks.join_attack(belief, victims)
    # every covering class holds ℓ pairwise totally different tuples, so at most n_rows - (ℓ - 1) rows share the truth
    bound = 1 - (ell - 1) / join["n_candidate_rows"]
    assert (join["probability"] <= bound + 1e-12).all()
    assert not join["certain"].any()
    tuples = released.assign(t=released["disease"] + "|" + released["job"])
    for victim, p in zip(victims.itertuples(index=False), join["probability"], strict=True):
        covering = released[attacks.label_coverage(ZIP, released["zip"].tolist(), [victim.zip])[:, 0]]
        multiplicity = tuples.loc[covering.index, "t"].value_counts().max()
        assert p <= multiplicity / len(covering) + 1e-12
    for frame in attacks.one_known_value_attacks(belief, victims).values():
        assert frame["probability"].between(0, 1).all()
        assert (frame.loc[frame["pinned"], "probability"] == 1.0).all()


def test_summary_and_population_baseline():
    summary = attacks.summarize_attack(np.array([0.1, 0.5, 1.0, 1.0]), np.array([False, False, True, True]), ell=3)
    assert summary["n_certain"] == 2 and summary["share_certain"] == 0.5
    assert summary["share_above_one_over_ell"] == 0.75 and summary["max"] == 1.0
    assert sum(summary["histogram"]["counts"]) == 4 and len(summary["quantiles"]) == 101
    victims = victims_frame([(1, "A", "flu", "nurse"), (2, "A", "flu", "clerk"), (3, "B", "hiv", "clerk")])
    join, one = attacks.population_baseline(victims, SA)
    assert join["probability"].tolist() == pytest.approx([1 / 3] * 3)
    assert one[("disease", "job")]["probability"].tolist() == pytest.approx([0.5, 0.5, 1.0])
    assert one[("disease", "job")]["pinned"].tolist() == [False, False, True]


# --------------------------------------------------------------------------- utility


def test_utility_measures_by_hand():
    sizes = np.array([[3, 3], [3, 4], [3, 4], [3, np.nan]], dtype=float)
    u = utility_measures(sizes, n_records=5, n_deleted=1, generalization_cost=7.0)
    # attribute 1: 4 cells in sets of 3 -> 4/(4/3) = 3; attribute 2: 3 cells (sizes 3, 4, 4) -> 3 / (1/3 + 1/2) = 3.6
    assert u["average_cluster_size_per_attribute"] == pytest.approx([3.0, 3.6])
    # DM: attribute 1: 12 + 1 deleted x 5 = 17; attribute 2: 11 + (1 suppressed + 1 deleted) x 5 = 21
    assert u["discernibility"] == pytest.approx(19.0)
    assert u["n_suppressed_cells"] == 1 and u["share_suppressed_cells"] == pytest.approx(1 / 10)
    assert u["generalization_cost"] == 7.0


def test_hiding_sets_and_naive_confidences():
    at = pd.DataFrame({"row_id": [1, 2], "zip": ["A", "A"], "disease": [1, None], "job": [1, 1]}).astype(
        {"disease": "Int32", "job": "Int32"}
    )
    ids = pd.DataFrame(
        [("disease", 1, "flu", 2), ("disease", 1, "hiv", 1), ("job", 1, "nurse", 1), ("job", 1, "clerk", 1)],
        columns=["attribute", "sid", "value", "count"],
    )
    empty = pd.DataFrame({c: pd.Series(dtype=object) for c in ["row_id", "group_id", "zip", *SA]})
    sizes = hiding_set_sizes_mixed(sac_released=empty, attribute_table=at, id_table=ids, sensitive_attributes=SA)
    assert np.array_equal(sizes, np.array([[3, 2], [np.nan, 2]]), equal_nan=True)
    rules = pd.DataFrame(
        [
            {
                "antecedent_attribute": "disease",
                "antecedent_value": "hiv",
                "consequent_attribute": "job",
                "consequent_value": "nurse",
                "support_antecedent": 2,
                "support_both": 1,
            }
        ]
    )
    # disease table: the two hiv holders have job labels 'health' (nurse or doctor) and '*' (any of 3 jobs)
    recovered = naive_rule_confidences(
        rules,
        hand_naive_tables() | {"disease": hand_naive_tables()["disease"].assign(job=["nurse", "health", "*", "*", "*"])},
        HIERARCHIES,
    )
    assert recovered["released_support_antecedent"].iloc[0] == 2
    assert recovered["released_support_both"].iloc[0] == pytest.approx(1 / 2 + 1 / 3)  # rows 2 ('health') and 5 ('*')


# --------------------------------------------------------------------------- reduced Adult run


@pytest.fixture(scope="module")
def adult_evaluation(tmp_path_factory):
    from pipeline.reporting.attack_report import run_attack_evaluation, write_attack_report
    from pipeline.core.hierarchies import load_hierarchies
    from pipeline.resources import ADULT_COLUMNS

    quasi_identifier_columns = ["sex", "race", "marital-status", "native-country", "workclass"]
    sensitive_attribute_columns = ["education", "occupation", "age", "relationship"]
    raw = pd.read_csv(ADULT / "adult.data", header=None, names=ADULT_COLUMNS, skipinitialspace=True, dtype=str, nrows=1500)
    raw = raw[raw["occupation"] != "?"].reset_index(drop=True)
    records = raw[quasi_identifier_columns + sensitive_attribute_columns].copy()
    records.insert(0, "row_id", np.arange(1, len(records) + 1, dtype=np.int64))
    hierarchies = load_hierarchies(ADULT / "hierarchies", quasi_identifier_columns + sensitive_attribute_columns)
    evaluation = run_attack_evaluation(
        records, quasi_identifier_columns, sensitive_attribute_columns, hierarchies, ell=3, k=3, min_confidence=0.8, seed=0
    )
    paths = write_attack_report(evaluation, tmp_path_factory.mktemp("attacks"))
    return evaluation, paths, records


def test_reduced_adult_evaluation_structure_and_sanity(adult_evaluation):
    evaluation, paths, records = adult_evaluation
    results = evaluation.results
    n = len(records)
    assert set(results["join_attack"]) == {"naive", "kl", "mixed", "rating", "population"}
    n_deleted = results["releases"]["mixed"]["n_deleted"]
    for model, summary in results["join_attack"].items():
        assert summary["n_victims"] == (n - n_deleted if model == "mixed" else n), model
        assert 0 <= summary["share_certain"] <= 1 and 0 <= summary["mean"] <= summary["max"] <= 1
        assert len(results["one_known_value"][model]) == 12
    # (k, ℓ), mixed and Rating beliefs of the full tuple stay bounded; Rating never pins one value
    assert results["join_attack"]["kl"]["n_certain"] == 0
    assert results["join_attack"]["mixed"]["max"] <= 1 / 3 + 1e-12
    assert results["join_attack"]["rating"]["max"] <= (1 / 3) ** 4 + 1e-12
    assert all(s["n_certain"] == 0 for s in results["one_known_value"]["rating"].values())
    # the mixed model pins only SAC~ rows (attribute-table SIDs are ℓ-diverse and independent)
    assert all(s["n_pinned_attribute_table"] == 0 for s in results["one_known_value"]["mixed"].values())
    assert sum(s["n_pinned_sac"] for s in results["one_known_value"]["mixed"].values()) > 0
    utility = results["utility"]
    confidence = utility["kl"]["rule_confidence"]
    assert confidence["n_rules_exact"] == confidence["n_rules"] > 0  # tuples published unchanged
    if n_deleted == 0:
        assert utility["mixed"]["rule_confidence"]["n_rules_exact"] == confidence["n_rules"]  # Lemma 22
    assert utility["mixed"]["n_deleted"] == n_deleted
    assert (
        utility["rating"]["rule_confidence"]["average_released_confidence"]
        < utility["kl"]["rule_confidence"]["average_released_confidence"]
    )
    assert utility["mixed"]["generalization_cost"] == 0 and utility["kl"]["generalization_cost"] > 0
    assert utility["kl"]["average_cluster_size"] >= 3 and utility["naive"]["average_cluster_size"] >= 3
    assert utility["kl"]["share_suppressed_cells"] == 0
    # the query workload (issue 18): one workload for the four releases, both workloads measured on each
    for model in ("naive", "kl", "mixed", "rating"):
        workload = utility[model]["query_workload"]
        assert workload["n_records"] == n and workload["floor"] == max(1.0, 0.001 * n)
        for name in ("W1", "W2"):
            assert workload[name]["n_queries"] == 1000
            assert 0 <= workload[name]["median"] <= workload[name]["p90"]

    # (k, ℓ) keeps whole sensitive tuples, Rating's SIDs are independent per attribute: a second sensitive condition
    # costs Rating more than (k, ℓ) (on this 1,400-record sample (k, ℓ)'s W2 is not below Rating's in absolute terms:
    # its classes of ~16 records spread the quasi-identifiers; on all of Adult it is, see README)
    def second_attribute_cost(model):
        workload = utility[model]["query_workload"]
        return workload["W2"]["median"] / workload["W1"]["median"]

    assert second_attribute_cost("kl") < second_attribute_cost("rating")
    # files
    for name in ("join", "one_known", "utility"):
        assert paths[name].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    saved = json.loads(paths["results"].read_text())
    assert saved["join_attack"]["naive"]["n_certain"] == results["join_attack"]["naive"]["n_certain"]
    report = paths["report"].read_text()
    for heading in (
        "## Join attack",
        "## One-known-value attack",
        "## Where our models leak",
        "## Utility",
        "### Query workload",
        "## Modelling choices",
    ):
        assert heading in report
    assert "mixed model (P1)" in report and "(join_attack.png)" in report
    assert any("SAC~" in line for line in results["verdicts"]["leaks"])


def test_attack_asset_materializes_with_numeric_metadata_and_figures(tmp_path):
    import dagster as dg

    from assets import attacks as attack_assets
    from assets import ingest
    from pipeline.resources import ADULT_COLUMNS, ReleaseSettings, ReleaseStore
    from pipeline.warehouse import WarehouseIOManager

    raw = pd.read_csv(ADULT / "adult.data", header=None, names=ADULT_COLUMNS, skipinitialspace=True, dtype=str, nrows=800)
    raw.to_csv(tmp_path / "adult_800.csv", index=False)
    result = dg.materialize(
        dg.load_assets_from_modules([ingest, attack_assets]),
        resources={
            "settings": ReleaseSettings(
                input_path=str(tmp_path / "adult_800.csv"),
                csv_header=True,
                column_names=[],
                hierarchies_dir="data/adult/hierarchies",  # a sample of Adult is another file (issue 15)
            ),
            "io_manager": WarehouseIOManager(database=str(tmp_path / "warehouse.duckdb")),
            "store": ReleaseStore(home=str(tmp_path / "home")),
        },
        run_config={"ops": {"attacks__attack_evaluation": {"config": {"output_dir": str(tmp_path / "out")}}}},
    )
    assert result.success
    metadata = result.asset_materializations_for_node("attacks__attack_evaluation")[0].metadata
    for model in ("naive", "kl", "mixed", "rating"):
        for key in (
            "join_share_certain",
            "join_mean_probability",
            "one_known_mean_share_pinned",
            "generalization_cost",
            "average_cluster_size",
            "discernibility",
            "share_suppressed_cells",
            "average_rule_confidence",
        ):
            assert isinstance(metadata[f"{model}_{key}"].value, (int, float)), (model, key)
    assert metadata["figure_join"].value.startswith("![join](data:image/png;base64,")
    summary = result.output_for_node("attacks__attack_evaluation")
    assert set(summary["model"]) == {"naive", "kl", "mixed", "rating", "population"}
    assert len(summary) == 5 * (1 + 12)
    assert {p.name for p in (tmp_path / "out").iterdir()} == {
        "results.json",
        "REPORT.md",
        "join_attack.png",
        "one_known_value.png",
        "utility.png",
    }
