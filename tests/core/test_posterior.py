"""The learned-model (deFinetti) adversary and the posterior gate (pipeline.core.posterior, checks.gates).

Expected numbers are computed here by hand from first principles (enumerated assignments,
fractions), never read from the code under test."""

from itertools import permutations

import numpy as np
import pandas as pd
import pytest

from checks import suites
from checks.gx_runner import validate_frame
from pipeline.core.posterior import (
    MAX_EXACT_GROUP_SIZE,
    exact_group_marginals,
    fit_naive_bayes_on_release,
    release_posteriors,
)


# --------------------------------------------------------------------------- exact group posterior


def test_exact_group_posterior_on_two_hand_computed_groups():
    # Group 1 (ℓ = 3): likelihood L[i][k] that member i owns tuple k.
    #   assignment (σ(0), σ(1), σ(2)) and its weight L[0][σ0]·L[1][σ1]·L[2][σ2]:
    #   (0,1,2): 4·2·1 = 8   (0,2,1): 4·1·1 = 4   (1,0,2): 1·1·1 = 1
    #   (1,2,0): 1·1·1 = 1   (2,0,1): 1·1·1 = 1   (2,1,0): 1·2·1 = 2        total 17
    # member 0 owns 0 in (0,1,2),(0,2,1): 12/17; owns 1: (1,0,2),(1,2,0): 2/17; owns 2: 3/17
    # member 1 owns 1 in (0,1,2),(2,1,0): 10/17; owns 0: (1,0,2),(2,0,1): 2/17; owns 2: 5/17
    # member 2 owns 2 in (0,1,2),(1,0,2): 9/17;  owns 0: (1,2,0),(2,1,0): 3/17; owns 1: 5/17
    group_1 = [[4, 1, 1], [1, 2, 1], [1, 1, 1]]
    expected_1 = [[12, 2, 3], [2, 10, 5], [3, 5, 9]]
    # Group 2 (ℓ = 3): a member whose likelihood is uniform learns nothing by itself;
    #   L = [[1,1,1],[3,1,1],[1,1,1]]; weights: (0,1,2): 1·1·1=1 (0,2,1): 1 (1,0,2): 3 (1,2,0): 1
    #   (2,0,1): 3 (2,1,0): 1 -> total 10. member 1 owns 0 in (1,0,2),(2,0,1): 6/10; owns 1: (0,1,2),(2,1,0) 2/10
    group_2 = [[1, 1, 1], [3, 1, 1], [1, 1, 1]]
    expected_2 = [[2, 4, 4], [6, 2, 2], [2, 4, 4]]
    marginals = exact_group_marginals(np.log(np.array([group_1, group_2], dtype=float)))
    assert marginals.shape == (2, 3, 3)
    np.testing.assert_allclose(marginals[0], np.array(expected_1) / 17, atol=1e-12)
    np.testing.assert_allclose(marginals[1], np.array(expected_2) / 10, atol=1e-12)


def test_exact_group_posterior_of_pairs_is_the_cross_product_ratio():
    # ℓ = 2: P(member 0 owns 0) = a·d / (a·d + b·c)
    likelihood = np.array([[[2.0, 1.0], [1.0, 3.0]], [[1.0, 1.0], [1.0, 1.0]]])
    marginals = exact_group_marginals(np.log(likelihood))
    assert marginals[0, 0, 0] == pytest.approx(6 / 7)
    assert marginals[0, 1, 0] == pytest.approx(1 / 7)
    assert marginals[1, 0, 0] == pytest.approx(1 / 2)


def test_exact_group_posterior_matches_brute_force_on_random_groups():
    rng = np.random.default_rng(5)
    likelihood = rng.uniform(0.1, 3.0, size=(4, 5, 5))
    marginals = exact_group_marginals(np.log(likelihood))
    for g in range(4):
        expected = np.zeros((5, 5))
        for sigma in permutations(range(5)):
            weight = np.prod([likelihood[g, i, sigma[i]] for i in range(5)])
            for i in range(5):
                expected[i, sigma[i]] += weight
        np.testing.assert_allclose(marginals[g], expected / expected.sum(axis=1, keepdims=True), rtol=1e-9)


def test_large_groups_fall_back_to_a_doubly_stochastic_approximation():
    size = MAX_EXACT_GROUP_SIZE + 1
    rng = np.random.default_rng(1)
    marginals = exact_group_marginals(np.log(rng.uniform(0.5, 2.0, size=(2, size, size))))
    np.testing.assert_allclose(marginals.sum(axis=2), 1.0, atol=1e-9)
    np.testing.assert_allclose(marginals.sum(axis=1), 1.0, atol=1e-6)


# --------------------------------------------------------------------------- synthetic releases


def _sac_release(records: pd.DataFrame, groups: list[list[int]], seed: int) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """A SAC~ release of ``groups`` (lists of record positions), tuples permuted inside each
    group (one attribute cluster); returns (sac_released, row_map, attribute_clusters)."""
    rng = np.random.default_rng(seed)
    rows = []
    for group_id, members in enumerate(groups, start=1):
        tuples = records.iloc[members][["S1", "S2"]].to_numpy()
        tuples = tuples[rng.permutation(len(members))]
        for member, (s1, s2) in zip(members, tuples, strict=True):
            rows.append(
                {
                    "source_row_id": int(records["row_id"].iloc[member]),
                    "group_id": group_id,
                    "zone": records["zone"].iloc[member],
                    "S1": s1,
                    "S2": s2,
                }
            )
    sac = pd.DataFrame(rows)
    sac["row_id"] = np.arange(1, len(sac) + 1, dtype=np.int64)
    row_map = sac[["source_row_id", "row_id"]].copy()
    clusters = pd.DataFrame({"cluster_id": np.array([1, 1], dtype=np.int32), "attribute": ["S1", "S2"]})
    return sac[["row_id", "group_id", "zone", "S1", "S2"]], row_map, clusters


EMPTY_ATTRIBUTE_TABLE = pd.DataFrame(
    {
        "row_id": pd.Series(dtype="int64"),
        "zone": pd.Series(dtype=object),
        "S1": pd.Series(dtype="Int32"),
        "S2": pd.Series(dtype="Int32"),
    }
)
EMPTY_ID_TABLE = pd.DataFrame(
    {
        "attribute": pd.Series(dtype=object),
        "sid": pd.Series(dtype="int32"),
        "value": pd.Series(dtype=object),
        "count": pd.Series(dtype="int32"),
    }
)


def _candidate(*, leaky: bool, n_groups: int = 400, seed: int = 0):
    """Groups of ℓ = 3 records, zones out of 4 with unequal frequencies. Leaky: 3 distinct zones
    per group, S1 is a function of the zone (S1 = 'v' + zone) and S2 is random — the QIs name the
    tuple inside its group although S2 alone is not predictable from the zone. Independent: zones
    drawn independently of everything (QI-blind grouping, as P1's), S1 and S2 drawn independently
    of the zone (distinct inside each group, as SAC~ requires)."""
    rng = np.random.default_rng(seed)
    zones = np.array(["z0", "z1", "z2", "z3"])
    zone_weights = np.array([0.4, 0.3, 0.2, 0.1])
    s2_values = np.array([f"w{i}" for i in range(8)])
    rows, groups = [], []
    for _ in range(n_groups):
        chosen = rng.choice(4, size=3, replace=not leaky, p=zone_weights)
        s1 = [f"v{z}" for z in chosen] if leaky else list(rng.choice([f"v{z}" for z in range(4)], size=3, replace=False))
        s2 = rng.choice(s2_values, size=3, replace=False)
        members = []
        for k in range(3):
            members.append(len(rows))
            rows.append({"row_id": 1000 + len(rows), "zone": zones[chosen[k]], "S1": s1[k], "S2": s2[k]})
        groups.append(members)
    records = pd.DataFrame(rows)
    sac, row_map, clusters = _sac_release(records, groups, seed=seed + 1)
    return records, sac, row_map, clusters


def _posteriors(records, sac, row_map, clusters, **kwargs):
    return release_posteriors(
        records,
        row_map,
        ["zone"],
        ["S1", "S2"],
        ell=3,
        sac_released=sac,
        attribute_table=EMPTY_ATTRIBUTE_TABLE,
        id_table=EMPTY_ID_TABLE,
        attribute_clusters=clusters,
        **kwargs,
    )


def test_em_recovers_a_planted_deterministic_dependence():
    records, sac, _, clusters = _candidate(leaky=True)
    model, data, _ = fit_naive_bayes_on_release(
        ["zone"],
        ["S1", "S2"],
        sac_released=sac,
        attribute_table=EMPTY_ATTRIBUTE_TABLE,
        id_table=EMPTY_ID_TABLE,
        attribute_clusters=clusters,
        n_iterations=30,
    )
    zone_codes = {z: i for i, z in enumerate(sorted(sac["zone"].unique()))}  # the model factorizes sorted
    domain = data.domains["S1"]
    for zone, code in zone_codes.items():
        posterior = model.posterior("S1", np.array([[code]]))[0]
        assert domain[int(np.argmax(posterior))] == "v" + zone[1:]
        assert posterior.max() > 0.9
    # uniform EM start (random worlds) would give every zone the same S1 distribution: the
    # planted dependence is learned, not assumed
    assert not np.allclose(model.posterior("S1", np.array([[0]])), model.posterior("S1", np.array([[1]])), atol=0.1)


def test_posterior_gate_fails_on_a_group_whose_quasi_identifiers_determine_its_tuples():
    records, sac, row_map, clusters = _candidate(leaky=True)
    result = _posteriors(records, sac, row_map, clusters)
    frame = result.frame
    s2 = frame[frame["attribute"] == "S2"]
    # S2 is not predictable from the zone (population ≈ 1/8) but rides on S1 inside the group
    assert s2["population_posterior"].mean() < 0.25
    assert s2["posterior"].mean() > 0.8
    assert result.summary["n_cells_above_bound"] > 0.5 * len(s2)
    assert result.summary["max_excess"] > 0.3
    assert result.summary["share_sac_rows_tuple_above_half"] > 0.8
    outcome = validate_frame(result.bound, suites.posterior_suite())
    assert not outcome.success


def test_posterior_gate_passes_when_quasi_identifiers_are_independent_of_the_values():
    records, sac, row_map, clusters = _candidate(leaky=False, n_groups=1000)
    result = _posteriors(records, sac, row_map, clusters)
    assert result.summary["n_cells_above_bound"] == 0, result.summary
    assert result.summary["max_posterior"] < 1 / 3 + 0.05
    assert abs(result.summary["mean_posterior"] - 1 / 3) < 0.02
    outcome = validate_frame(result.bound, suites.posterior_suite())
    assert outcome.success
    # the histogram counts every (record, attribute) once, all near 1/3
    assert result.histogram.sum() == 2 * len(sac) and result.histogram[3] == 2 * len(sac)


def test_slack_and_ell_are_checked():
    records, sac, row_map, clusters = _candidate(leaky=False, n_groups=20)
    with pytest.raises(ValueError, match="slack"):
        _posteriors(records, sac, row_map, clusters, slack=1.5)
    with pytest.raises(ValueError, match="ell"):
        release_posteriors(
            records,
            row_map,
            ["zone"],
            ["S1", "S2"],
            ell=1,
            sac_released=sac,
            attribute_table=EMPTY_ATTRIBUTE_TABLE,
            id_table=EMPTY_ID_TABLE,
            attribute_clusters=clusters,
        )


def test_small_sid_posterior_is_the_exact_assignment_posterior():
    # Two attribute-table records share a SID holding {a, b}; record 1 is in zone z0, record 2 in z1.
    # A SAC~ part teaches the model: z0 holds a, z1 holds b (groups of 2 whose members differ).
    rows = []
    for i in range(200):
        rows += [
            {"row_id": 2 * i, "zone": "z0", "S1": "a", "S2": f"x{i % 2}"},
            {"row_id": 2 * i + 1, "zone": "z1", "S1": "b", "S2": f"x{(i + 1) % 2}"},
        ]
    rows += [{"row_id": 900, "zone": "z0", "S1": "a", "S2": "x0"}, {"row_id": 901, "zone": "z1", "S1": "b", "S2": "x1"}]
    records = pd.DataFrame(rows)
    # every SAC~ group: {z0, z0} or {z1, z1} or {z0, z1}, unequal mix, so the dependence is learnable
    groups = [[4 * i, 4 * i + 2] if i % 3 == 0 else [4 * i, 4 * i + 1] for i in range(100)]
    sac, row_map, clusters = _sac_release(records.iloc[:400], groups, seed=3)
    attribute_table = pd.DataFrame(
        {
            "row_id": np.array([5001, 5002], dtype=np.int64),
            "zone": ["z0", "z1"],
            "S1": pd.array([1, 1], dtype="Int32"),
            "S2": pd.array([2, 2], dtype="Int32"),
        }
    )
    id_table = pd.DataFrame(
        {
            "attribute": ["S1", "S1", "S2", "S2"],
            "sid": np.array([1, 1, 2, 2], dtype=np.int32),
            "value": ["a", "b", "x0", "x1"],
            "count": np.array([1, 1, 1, 1], dtype=np.int32),
        }
    )
    row_map = pd.concat([row_map, pd.DataFrame({"source_row_id": [900, 901], "row_id": [5001, 5002]})], ignore_index=True)
    result = release_posteriors(
        records,
        row_map,
        ["zone"],
        ["S1", "S2"],
        ell=2,
        sac_released=sac,
        attribute_table=attribute_table,
        id_table=id_table,
        attribute_clusters=clusters,
    )
    frame = result.frame.set_index(["row_id", "attribute"])
    # exact 2-record SID: P(record 5001 holds a) = p0a·p1b / (p0a·p1b + p0b·p1a), p = the learned
    # P(S1 | zone); the per-record approximation would give p0a / (p0a + p0b) instead
    model, data, _ = fit_naive_bayes_on_release(
        ["zone"], ["S1", "S2"], sac_released=sac, attribute_table=attribute_table, id_table=id_table, attribute_clusters=clusters
    )
    zone = {z: i for i, z in enumerate(sorted(["z0", "z1"]))}
    a, b = data.domains["S1"].index("a"), data.domains["S1"].index("b")
    p0 = model.posterior("S1", np.array([[zone["z0"]]]))[0]
    p1 = model.posterior("S1", np.array([[zone["z1"]]]))[0]
    exact = p0[a] * p1[b] / (p0[a] * p1[b] + p0[b] * p1[a])
    assert frame.loc[(5001, "S1"), "posterior"] == pytest.approx(exact)
    assert frame.loc[(5002, "S1"), "posterior"] == pytest.approx(exact)
    assert exact > 0.6 and abs(exact - p0[a] / (p0[a] + p0[b])) > 1e-3
    assert frame.loc[(5001, "S1"), "part"] == "attribute_table"


# --------------------------------------------------------------------------- the Dagster gate


def _gate(leaky: bool, **settings):
    from checks.gates import posterior_within_bound
    from pipeline.resources import ReleaseSettings

    records, sac, row_map, clusters = _candidate(leaky=leaky, n_groups=400 if leaky else 1000)
    config = ReleaseSettings(quasi_identifiers=["zone"], sensitive_attributes=["S1", "S2"], ell=3, **settings)
    return posterior_within_bound(
        settings=config,
        sac_released=sac,
        raw_records=records,
        release_row_map=row_map,
        attribute_table=EMPTY_ATTRIBUTE_TABLE,
        id_table=EMPTY_ID_TABLE,
        attribute_clusters=clusters,
    )


def test_the_gate_blocks_a_leaky_candidate_and_reports_numbers_only():
    import dagster as dg

    result = _gate(leaky=True, posterior_gate="block")
    assert not result.passed and result.severity == dg.AssetCheckSeverity.ERROR
    figures = {key: value.value for key, value in result.metadata.items()}
    assert figures["n_cells_above_bound"] > 0 and figures["posterior_gate"] == "block"
    assert sum(figures["histogram_bins_0_to_1_step_0.1"]) == figures["n_cells"]
    # numbers only: no value of the table ("z0", "v1", "w3", ...) in the metadata
    assert not any(token in str(figures) for token in ("'z0'", "'v1'", "'w3'", "vz"))


def test_the_gate_only_warns_when_told_and_passes_an_independent_candidate():
    import dagster as dg

    warned = _gate(leaky=True, posterior_gate="warn")
    assert not warned.passed and warned.severity == dg.AssetCheckSeverity.WARN
    assert _gate(leaky=False).passed


def test_posterior_settings_are_validated():
    from pydantic import ValidationError

    from pipeline.resources import ReleaseSettings

    # issue 12: the gate blocks by default (the default Adult release passes it)
    assert ReleaseSettings().posterior_slack == 0.05 and ReleaseSettings().posterior_gate == "block"
    with pytest.raises(ValidationError):
        ReleaseSettings(posterior_gate="ignore")
    with pytest.raises(ValidationError):
        ReleaseSettings(posterior_slack=1.5)


def test_the_fit_sample_keeps_whole_groups_and_about_the_asked_share():
    """_fit_sample: every kept SAC~ group keeps all its members; the SID entries of a kept record are all
    kept; about max_records / n of the records are kept; a release at most max_records is not sampled."""
    from pipeline.core.posterior import _fit_sample, _GroupBlock, _ReleaseData, _SidBlock

    n_groups, size = 3_000, 3
    members = np.arange(n_groups * size).reshape(n_groups, size)
    n = members.size + 3_000
    records = np.repeat(np.arange(members.size, n), 2)
    data = _ReleaseData(np.zeros((n, 1), dtype=np.int64), [1], {"S": ["a", "b"]})
    data.groups.append(_GroupBlock(["S"], members, {"S": members % 2}))
    data.sids["S"] = _SidBlock(records, np.tile([0, 1], len(records) // 2), np.ones(len(records)))
    assert _fit_sample(data, n) is data and _fit_sample(data, None) is data
    sample = _fit_sample(data, n // 4)
    kept = sample.groups[0].members
    assert kept.shape[1] == size and 0.2 * n_groups < len(kept) < 0.3 * n_groups
    assert np.array_equal(sample.groups[0].candidate_values["S"], kept % 2)
    kept_records, counts = np.unique(sample.sids["S"].records, return_counts=True)
    assert (counts == 2).all() and 0.2 * 3_000 < len(kept_records) < 0.3 * 3_000


def _release_with_small_exact_sids(seed: int, size: int):
    """An attribute-table release (no SAC~ group): two exact SIDs of ``size`` records each, one per held-out fold
    (SID 0 holds even record indices, SID 1 odd ones: one "sid" block of shape (2, size), a single group in each
    fold), and 30 records in larger SIDs (attribute-table entries); quasi-identifiers q and r loosely tied to the
    value."""
    rng = np.random.default_rng(seed)
    sid = np.concatenate([np.array([0, 1] * size), rng.integers(2, 5, 30)])
    value_of = rng.integers(0, 6, len(sid))
    attribute_table = pd.DataFrame(
        {
            "row_id": np.arange(1, len(sid) + 1),
            **{c: pd.Categorical([f"{c}{(v + rng.integers(0, 2)) % 4}" for v in value_of]) for c in ("q", "r")},
            "s": pd.array(sid, dtype="Int32"),
        }
    )
    rows = [
        ("s", s, f"v{v}", int((value_of[sid == s] == v).sum()) + (0 if s < 2 else 1))
        for s in range(5)
        for v in sorted(set(value_of[sid == s].tolist()))
    ]
    sac = pd.DataFrame(
        {
            "row_id": pd.Series([], dtype=np.int64),
            "group_id": pd.Series([], dtype=np.int64),
            "q": pd.Categorical([]),
            "r": pd.Categorical([]),
            "s": pd.Categorical([]),
        }
    )
    return {
        "sac_released": sac,
        "attribute_table": attribute_table,
        "id_table": pd.DataFrame(rows, columns=["attribute", "sid", "value", "count"]),
        "attribute_clusters": pd.DataFrame({"cluster_id": [0], "attribute": ["s"]}),
    }


@pytest.mark.parametrize("size", [3, 4])
def test_held_out_fold_paths_equal_the_definition_when_a_fold_has_one_group(size):
    """A group alone in its fold (3 members: updated alone; 4: numpy sums the 24 assignments of a one-group batch in
    another order than inside a batch of several, so the fold's E-step updates such blocks whole): the fold paths must
    be the definition's (every responsibility updated, every pair weighted by its fold), bit for bit (review of
    session 31: updating a 4-member group alone differed by about 4e-16 from round 2 on)."""
    from pipeline.core import posterior as module
    from tests.core.reference_algorithms import reference_fold_em_path

    checked = 0
    for seed in range(12):
        tables = _release_with_small_exact_sids(seed, size)
        probe, _ = module._release_data(["q", "r"], ["s"], **tables)
        if [(b.kind, b.members.shape, b.fold.tolist()) for b in probe.groups] != [("sid", (2, size), [0, 1])]:
            continue
        checked += 1
        for fold in (0, 1):
            path = module._em_path(module._release_data(["q", "r"], ["s"], **tables)[0], 1.0, 6, fold)[1:]
            reference = reference_fold_em_path(module._release_data(["q", "r"], ["s"], **tables)[0], 1.0, 6, fold)
            for model, expected in zip(path, reference, strict=True):
                np.testing.assert_array_equal(model.log_prior["s"], expected.log_prior["s"])
                for table, expected_table in zip(model.log_conditional["s"], expected.log_conditional["s"], strict=True):
                    np.testing.assert_array_equal(table, expected_table)
    assert checked >= 3  # the construction gives the one-group folds it is about
