"""Per-attribute ℓ (P0's sensitivity coefficients, SPEC §6.7; issue 16): attribute A with ℓ_A = 3 and B with
ℓ_B = 2 on hand-made tables. Expected numbers are counted by hand in the comments, never by the code under test."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from pydantic import ValidationError

import pipeline.cli.run as run_command
from checks import suites
from checks.gx_runner import validate_frame
from pipeline.cli import main
from pipeline.core import verification
from pipeline.core.eligibility import eligibility_deletions, is_ell_eligible, suppressed_cell_certainty
from pipeline.core.metrics import additional_information_loss
from pipeline.core.mixed_model import run_mixed_model
from pipeline.core.rating import rating_tables
from pipeline.core.sensitivity import ell_by_attribute, group_size
from pipeline.resources import ReleaseSettings

ELLS = {"A": 3, "B": 2}


def twelve_records() -> pd.DataFrame:
    """12 records: A holds a..f twice each (share 1/6), B holds x and y six times each (share 1/2)."""
    return pd.DataFrame(
        {
            "row_id": np.arange(12, dtype=np.int64),
            "A": list("abcdefabcdef"),
            "B": list("xyxyxyxyxyxy"),
        }
    )


def sid_sizes(id_table: pd.DataFrame, attribute: str) -> list[int]:
    entries = id_table[id_table["attribute"].astype(str) == attribute]
    return sorted(entries.groupby("sid")["value"].nunique().tolist())


def test_rating_builds_sids_of_each_attribute_with_its_own_ell():
    id_table, attribute_sids = rating_tables(twelve_records(), ["A", "B"], ell=ELLS)
    # A: 12 values, 3 per SID -> 4 SIDs of 3 distinct values; B: 2 per SID -> 6 SIDs of x and y
    assert sid_sizes(id_table, "A") == [3, 3, 3, 3]
    assert sid_sizes(id_table, "B") == [2, 2, 2, 2, 2, 2]
    assert attribute_sids[["A", "B"]].notna().all().all()  # nothing suppressed


def test_the_uniform_mapping_gives_the_same_tables_as_the_integer():
    records = twelve_records()
    by_integer = rating_tables(records, ["A", "B"], ell=2)
    by_mapping = rating_tables(records, ["A", "B"], ell={"A": 2, "B": 2})
    pd.testing.assert_frame_equal(by_integer[0], by_mapping[0])
    pd.testing.assert_frame_equal(by_integer[1], by_mapping[1])


def test_eligibility_uses_each_attribute_s_own_ell():
    records = twelve_records()
    # B's x holds 6 of 12 records: 2·6 <= 12 is eligible for ℓ_B = 2 ...
    assert is_ell_eligible(records, ["A", "B"], ELLS)
    assert len(eligibility_deletions(records, ["A", "B"], ell=ELLS)) == 0
    # ... but B has 2 distinct values, fewer than ℓ = 3: no subset is 3-eligible, every record goes
    assert not is_ell_eligible(records, ["A", "B"], 3)
    assert len(eligibility_deletions(records, ["A", "B"], ell=3)) == 12
    # with ℓ_B = 2 and x on 8 of 14 records: 2·(8 − d) <= 14 − d needs d = 2 deletions
    more_x = pd.concat([records, pd.DataFrame({"row_id": [12, 13], "A": ["a", "b"], "B": ["x", "x"]})], ignore_index=True)
    assert len(eligibility_deletions(more_x, ["A", "B"], ell=ELLS)) == 2


def correlated_records() -> pd.DataFrame:
    """24 records. A = 'p' always comes with B = 'q' (4 records: the strong rules p => q and q => p); the other
    20 records hold every pair of A in a..e and B in r..u once (confidences 1/4 and 1/5: no other strong rule)."""
    a_values = ["p"] * 4 + [list("abcde")[i % 5] for i in range(20)]
    b_values = ["q"] * 4 + [list("rstu")[i % 4] for i in range(20)]
    return pd.DataFrame({"row_id": np.arange(24, dtype=np.int64), "A": a_values, "B": b_values})


def test_sac_groups_have_size_max_ell_with_that_many_distinct_values_on_every_attribute():
    records = correlated_records()
    result = run_mixed_model(records, ["A", "B"], ell=ELLS, min_confidence=0.9, seed=0)
    members = result.grouping.members
    assert len(members) == 4  # one group per 'p' record, partners borrowed from IR
    assert members.shape[1] == 3  # L = max(3, 2)
    by_id = records.set_index("row_id")
    for group in members:
        assert by_id.loc[group, "A"].nunique() == 3
        assert by_id.loc[group, "B"].nunique() == 3
    # the attribute table's SIDs: A with 3 distinct values, B with (at least) 2
    assert min(sid_sizes(result.id_table, "A")) >= 3
    assert min(sid_sizes(result.id_table, "B")) >= 2
    assert 2 in sid_sizes(result.id_table, "B")


def leaky_candidate() -> tuple[pd.DataFrame, pd.DataFrame]:
    """An attribute table of 4 records whose SIDs hold 2 values on A and 2 on B: meets ℓ_B = 2, not ℓ_A = 3."""
    attribute_table = pd.DataFrame(
        {
            "row_id": np.arange(4, dtype=np.int64),
            "A": pd.array([1, 1, 2, 2], dtype="Int32"),
            "B": pd.array([1, 1, 2, 2], dtype="Int32"),
        }
    )
    id_table = pd.DataFrame(
        {
            "attribute": ["A", "A", "A", "A", "B", "B", "B", "B"],
            "sid": np.array([1, 1, 2, 2, 1, 1, 2, 2], dtype=np.int32),
            "value": ["a", "b", "c", "d", "x", "y", "x", "y"],
            "count": np.ones(8, dtype=np.int32),
        }
    )
    return attribute_table, id_table


def test_the_sid_gate_refuses_a_candidate_that_meets_ell_b_but_not_ell_a():
    attribute_table, id_table = leaky_candidate()
    summary = verification.sid_diversity_summary(attribute_table, id_table, ["A", "B"])
    checked = verification.sid_diversity_per_attribute(summary, ELLS)
    outcome = validate_frame(checked, suites.sid_diversity_per_attribute_suite(ell=min(ELLS.values())))
    assert not outcome.success
    failed = {e["column"] for e in outcome.expectations if not e["success"]}
    assert failed == {"meets_ell_required"}
    per_attribute = verification.sid_diversity_by_attribute(checked, attribute_table, ELLS)
    assert per_attribute["A"]["n_sids_below_ell"] == 2  # both SIDs of A hold 2 < 3 values
    assert per_attribute["B"]["n_sids_below_ell"] == 0
    # the same candidate with ℓ_A = 2 passes
    relaxed = verification.sid_diversity_per_attribute(summary, {"A": 2, "B": 2})
    assert validate_frame(relaxed, suites.sid_diversity_per_attribute_suite(ell=2)).success


def test_the_disclosure_bound_of_a_rule_is_one_over_ell_of_its_consequent():
    rules = pd.DataFrame({"consequent_attribute": ["A", "B"]})  # rule 0 infers A, rule 1 infers B
    per_record = pd.DataFrame(
        {
            "row_id": np.array([10, 11], dtype=np.int64),
            "rule": np.array([0, 1], dtype=np.int64),
            "numerator": np.array([1, 1], dtype=np.int64),
            "denominator": np.array([2, 2], dtype=np.int64),
            "probability": [0.5, 0.5],
        }
    )
    summary = verification.disclosure_summary(per_record, ell=3, rules=rules, ell_per_attribute=ELLS)
    # 1/2 > 1/3 for the rule inferring A; 1/2 <= 1/2 for the rule inferring B
    assert summary["within_bound"].tolist() == [False, True]
    by_rule = verification.disclosure_by_rule(summary, rules)
    assert [(r["consequent_attribute"], r["bound"], r["max_probability"]) for r in by_rule] == [
        ("A", 1 / 3, 0.5),
        ("B", 1 / 2, 0.5),
    ]


def test_a_suppressed_cell_is_bounded_by_its_attribute_s_ell():
    attribute_table, id_table = leaky_candidate()
    attribute_table.loc[0, "B"] = pd.NA  # B's candidates: x and y are in every SID -> 1/2
    certainty = suppressed_cell_certainty(attribute_table, id_table, ["A", "B"], {"A": 3, "B": 2}).set_index("attribute")
    assert certainty.loc["B", "max_probability"] == 0.5
    assert bool(certainty.loc["B", "within_bound"])
    certainty = suppressed_cell_certainty(attribute_table, id_table, ["A", "B"], {"A": 2, "B": 3}).set_index("attribute")
    assert not bool(certainty.loc["B", "within_bound"])


def test_additional_information_loss_counts_beyond_each_attribute_s_ell():
    attribute_table, id_table = leaky_candidate()
    empty = pd.DataFrame({"row_id": [], "group_id": [], "A": [], "B": []})
    # every SID holds 2 values: with ℓ = 2 on both no loss; 4 cells of A with |G| = 2 and ℓ_A = 2, B the same
    assert (
        additional_information_loss(
            sac_released=empty,
            attribute_table=attribute_table,
            id_table=id_table,
            sensitive_attributes=["A", "B"],
            ell={"A": 2, "B": 2},
            n_deleted=0,
        )
        == 0.0
    )
    # one deleted record: 2 of its cells cost 1 each over 5 records × 2 attributes
    assert additional_information_loss(
        sac_released=empty,
        attribute_table=attribute_table,
        id_table=id_table,
        sensitive_attributes=["A", "B"],
        ell={"A": 2, "B": 2},
        n_deleted=1,
    ) == pytest.approx(2 / 10)
    with pytest.raises(ValueError, match="fewer than"):
        additional_information_loss(
            sac_released=empty,
            attribute_table=attribute_table,
            id_table=id_table,
            sensitive_attributes=["A", "B"],
            ell=ELLS,
            n_deleted=0,
        )


# --------------------------------------------------------------------------- settings and usage errors


@pytest.mark.parametrize(
    ("mapping", "expected"),
    [
        ({"A": 3}, r"no ℓ for sensitive attribute\(s\) \['B'\]"),
        ({"A": 3, "B": 2, "C": 2}, r"\['C'\], which is not a sensitive attribute"),
        ({"A": 3, "B": 1}, r"ℓ of sensitive attribute 'B' must be an integer >= 2"),
    ],
)
def test_the_core_names_a_missing_unknown_or_too_small_attribute(mapping, expected):
    with pytest.raises(ValueError, match=expected):
        ell_by_attribute(mapping, ["A", "B"])


def test_group_size_is_the_largest_ell():
    assert group_size({"A": 3, "B": 2}) == 3
    assert group_size(4) == 4


SENSITIVE = {"education": 4, "occupation": 3, "age": 2, "relationship": 2}


def test_settings_take_the_mapping_and_ell_becomes_its_largest_value():
    settings = ReleaseSettings(ell=3, ell_per_attribute=SENSITIVE)
    assert settings.ell == 4
    assert settings.ell_by_attribute() == SENSITIVE
    assert ReleaseSettings(ell=3).ell_by_attribute() == dict.fromkeys(SENSITIVE, 3)


@pytest.mark.parametrize(
    ("mapping", "expected"),
    [
        ({"education": 4, "occupation": 3, "age": 2}, r"no ℓ for sensitive attribute\(s\) \['relationship'\]"),
        ({**SENSITIVE, "sex": 2}, r"gives an ℓ for \['sex'\], which is not a sensitive attribute"),
        ({**SENSITIVE, "age": 1}, r"the ℓ of \['age'\] must be an integer in \[2, 1000\]"),
    ],
)
def test_settings_refuse_a_missing_unknown_or_too_small_attribute(mapping, expected):
    with pytest.raises(ValidationError, match=expected):
        ReleaseSettings(ell_per_attribute=mapping)


def test_the_kl_model_refuses_the_mapping():
    with pytest.raises(ValidationError, match=r"\(k, ℓ\) model has one ℓ for the whole sensitive tuple"):
        ReleaseSettings(model="kl", k=5, ell_per_attribute=SENSITIVE)


@pytest.fixture
def nothing_runs(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the command read its input although its options were refused")

    monkeypatch.setattr(run_command, "preflight", refuse)


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        (["--ell", "education=4,occupation=3,age=2"], "--ell gives no ℓ for sensitive attribute(s) ['relationship']"),
        (["--ell", "education=4,occupation=3,age=2,relationship=2,sex=2"], "['sex'], which is not a sensitive attribute"),
        (
            ["--ell", "education=4,occupation=3,age=2,relation=2"],
            "no ℓ for sensitive attribute(s) ['relationship'] and gives one for ['relation'], which is not a sensitive "
            "attribute (misspelt?)",
        ),
        (["--ell", "education=4,occupation=3,age=1,relationship=2"], "the ℓ of sensitive attribute 'age' must be"),
        (["--ell", "education=4,education=3"], "'education' is given twice"),
        (["--ell", "education"], "'education' is neither an integer nor name=integer pairs"),
        (
            ["--model", "kl", "--k", "5", "--ell", "education=4,occupation=3,age=2,relationship=2"],
            "(k, ℓ) model has one ℓ for the whole sensitive tuple",
        ),
    ],
    ids=["missing", "unknown", "misspelt", "below-2", "twice", "not-a-pair", "kl"],
)
def test_the_command_line_refuses_a_bad_mapping_with_exit_2(nothing_runs, tmp_path, arguments, expected):
    outcome = CliRunner().invoke(main, ["run", *arguments, "--home", str(tmp_path / "home")])
    assert outcome.exit_code == 2, outcome.output
    assert expected in outcome.output.replace("\n", " ").replace("  ", " ")


def test_the_early_check_holds_each_attribute_to_its_own_ell_for_rating():
    """B has 3 distinct values: enough for ℓ_B = 2 (Rating's SIDs of B), not for L = 4 on every attribute (SAC~)."""
    from pipeline.io.loading import InfeasibleInput, check_ell_feasible

    records = pd.DataFrame({"A": list("abcdabcd"), "B": list("xyzxyzxy")})
    check_ell_feasible(records, ["A", "B"], ell={"A": 4, "B": 2}, source="t.csv", n_input=8)
    with pytest.raises(InfeasibleInput, match=r"'B' \(3 distinct values, ℓ_i = 4\)"):
        check_ell_feasible(records, ["A", "B"], ell={"A": 2, "B": 4}, source="t.csv", n_input=8)
    with pytest.raises(InfeasibleInput, match="larger than the number of distinct values"):
        check_ell_feasible(records, ["A", "B"], ell=4, source="t.csv", n_input=8)
    assert ReleaseSettings(model="rating", ell_per_attribute=SENSITIVE).feasibility_ell() == SENSITIVE
    assert ReleaseSettings(ell_per_attribute=SENSITIVE).feasibility_ell() == 4


def test_the_mixed_model_s_refusal_names_the_largest_ell_i_it_comes_from():
    # red team, session 38: "ℓ = 20 is larger than … 'education'" when education's ℓ_i was 2 and age's 20 made the
    # SAC~ groups need 20 distinct values of every attribute
    import pickle

    from pipeline.io.loading import InfeasibleInput, LargestEll, check_ell_feasible

    records = pd.DataFrame({"a": list("xyzw") * 5, "b": [str(i) for i in range(20)]})
    ell = LargestEll({"a": 2, "b": 5})
    assert ell == 5 and isinstance(ell, int) and pickle.loads(pickle.dumps(ell)).per_attribute == {"a": 2, "b": 5}
    with pytest.raises(InfeasibleInput) as raised:
        check_ell_feasible(records, ["a", "b"], ell=ell, source="t.csv", n_input=20)
    message = str(raised.value)
    assert "SAC~ groups hold L = max ℓ_i = 5 records (b=5)" in message and "'a' (4 distinct values)" in message
    assert "lower the largest ℓ_i" in message and "--model rating" in message
    check_ell_feasible(records, ["a", "b"], ell=LargestEll({"a": 2, "b": 4}), source="t.csv", n_input=20)  # feasible
