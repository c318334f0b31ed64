"""The refusal diagnosis (issue 15): what would be lost, the cause (rules, dominant values), and computed options.

The hand table has 20 records and three sensitive attributes; health = yes is held by 18 (90 %):

==========  =====  ===============  =================
rows        job    health           hobby
==========  =====  ===============  =================
r1-r8       a      yes              p (r1-r4), q (r5-r8)
r9-r14      b      yes, r14 no      q (r9-r11), p (r12-r14)
r15-r20     c      yes, r20 no      p (r15-r17), q (r18-r20)
==========  =====  ===============  =================

At min_confidence 0.8 its strong rules are exactly job = a ⇒ yes (8/8), job = b ⇒ yes (5/6), job = c ⇒ yes (5/6),
hobby = p ⇒ yes (9/10) and hobby = q ⇒ yes (9/10): every other direction stays at or below 1/2. Every record with
health = yes has a job, so the 18 yes records are the rule holders.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.core.diagnosis import (
    CandidateLoss,
    Diagnosis,
    DiagnosisSettings,
    diagnose,
    diagnosis_lines,
    diagnosis_paragraph,
    forced_deletions,
    merge_diagnoses,
)
from pipeline.core.eligibility import eligibility_deletions
from pipeline.core.rules import mine_strong_rules

ATTRIBUTES = ("health", "job", "hobby")


def hand_table() -> pd.DataFrame:
    job = ["a"] * 8 + ["b"] * 6 + ["c"] * 6
    health = ["yes"] * 13 + ["no"] + ["yes"] * 5 + ["no"]
    hobby = ["p"] * 4 + ["q"] * 4 + ["q"] * 3 + ["p"] * 3 + ["p"] * 3 + ["q"] * 3
    return pd.DataFrame(
        {"row_id": range(1, 21), "zip": [f"9{k:04d}" for k in range(20)], "health": health, "job": job, "hobby": hobby}
    )


def write_hand_table_csv(path: Path) -> Path:
    """:func:`hand_table` as the CSV a user would run (no ``row_id``; a distinct ``zip`` per record, the
    quasi-identifier), written to ``path``; returns ``path``. Run it with :data:`HAND_TABLE_OPTIONS`."""
    table = hand_table().drop(columns="row_id")
    table["zip"] = [f"Z{k:05d}" for k in range(20)]
    table.to_csv(path, index=False)
    return path


#: ``msa-release run``'s options for :func:`write_hand_table_csv`'s table (after ``--input``): 16 of its 20 records
#: are deleted at ℓ = 2.
HAND_TABLE_OPTIONS = (
    "--quasi-identifiers",
    "zip",
    "--sensitive-attributes",
    "health,job,hobby",
    "--ell",
    "2",
    "--min-confidence",
    "0.8",
    "--min-support",
    "1",
)


def hand_diagnosis(ell: int = 2, deviation: float | None = 0.3) -> Diagnosis:
    records = hand_table()
    rules = mine_strong_rules(records, list(ATTRIBUTES), min_confidence=0.8, backend="counting", min_support=1)
    return diagnose(
        records,
        rules,
        DiagnosisSettings(
            ell=ell,
            min_confidence=0.8,
            min_support=1,
            sensitive_attributes=ATTRIBUTES,
            confidence_tolerance=0.05,
            max_deleted_share=0.10,
        ),
        CandidateLoss(n_records=20, n_deleted=16, max_confidence_deviation=deviation),
    )


def test_hand_table_has_the_five_rules_of_the_docstring():
    records = hand_table()
    rules = mine_strong_rules(records, list(ATTRIBUTES), min_confidence=0.8, backend="counting", min_support=1)
    found = {(r.antecedent_attribute, r.antecedent_value, r.consequent_attribute, r.consequent_value) for r in rules.itertuples()}
    assert found == {
        ("job", "a", "health", "yes"),
        ("job", "b", "health", "yes"),
        ("job", "c", "health", "yes"),
        ("hobby", "p", "health", "yes"),
        ("hobby", "q", "health", "yes"),
    }


def test_names_the_loss_the_rules_and_the_dominant_value():
    diagnosis = hand_diagnosis()
    assert diagnosis.loss.n_deleted == 16 and diagnosis.deleted_share == 0.8
    assert diagnosis.n_strong_rules == 5
    assert diagnosis.rule_holders == 18  # the 18 yes records
    # strong values occur in 18 (health), 20 (job) and 20 (hobby) records: S_max = job (first of the tie), and every
    # record holds hobby p or q, so all 20 must be grouped (SPEC §3)
    assert diagnosis.records_to_group == 20
    # largest rule first: hobby = p or q ⇒ yes (support 9)
    assert (diagnosis.rules[0].consequent_attribute, diagnosis.rules[0].consequent_value) == ("health", "yes")
    assert diagnosis.rules[0].support == 9 and diagnosis.rules[0].consequent_share == 0.9
    # health = yes at 18 of 20 > 1/2: at least 2·18 − 20 = 16 deletions (ℓ − 1 = 1)
    assert [(d.attribute, d.value, d.count, d.forced_deletions) for d in diagnosis.dominant] == [("health", "yes", 18, 16)]
    text = "\n".join(diagnosis_lines(diagnosis))
    assert "health = yes" in text and "90.0 %" in text and "16 of 20 records (80.0 %) would be deleted" in text


def test_each_option_predicts_the_hand_counted_holders():
    options = {(o.setting, o.value): o for o in hand_diagnosis().options}
    # dropping health removes every rule (all have health = yes as consequent), and no value of job (a: 8 of 20) or
    # hobby (p, q: 10 of 20) is above 1/2
    drop_health = options[("sensitive_attributes", "health")]
    assert (drop_health.strong_rules, drop_health.rule_holders, drop_health.forced_deletions) == (0, 0, 0)
    # dropping job leaves hobby ⇒ yes (every yes record has hobby p or q: still 18 holders, health = yes still forces
    # 16), dropping hobby leaves job ⇒ yes (18 holders): neither helps, so neither is offered
    assert ("sensitive_attributes", "job") not in options and ("sensitive_attributes", "hobby") not in options
    # min_confidence 0.91 keeps only job = a ⇒ yes (8/8): its 8 holders r1-r8
    higher = options[("min_confidence", "0.91")]
    assert (higher.strong_rules, higher.rule_holders) == (1, 8)
    # a confidence-1 rule: no min_confidence in (0, 1] removes every rule; said, not offered
    assert any(o.setting == "min_confidence" and not o.available for o in options.values())
    assert options[("confidence_tolerance", "0.31")].last_resort
    assert options[("max_deleted_share", "0.80")].last_resort


def test_ell_2_never_advises_lowering_ell():
    diagnosis = hand_diagnosis(ell=2)
    ell_options = [o for o in diagnosis.options if o.setting == "ell"]
    assert ell_options and not any(o.available for o in ell_options)
    for vocabulary in ("cli", "config"):
        text = "\n".join(diagnosis_lines(diagnosis, vocabulary)) + diagnosis_paragraph(diagnosis, vocabulary)
        assert "already the minimum (2)" in text
        assert "--ell 1" not in text and "lower --ell" not in text and "`ell` = 1" not in text


def test_ell_3_offers_the_largest_lower_ell_with_its_bound():
    # ℓ = 3: health = yes forces ⌈(3·18 − 20) / 2⌉ = 17; at ℓ = 2 it forces 16 (no ℓ between makes it 0)
    diagnosis = hand_diagnosis(ell=3)
    assert diagnosis.forced_deletions == 17
    (option,) = [o for o in diagnosis.options if o.setting == "ell"]
    assert option.available and option.value == "2" and option.forced_deletions == 16


def test_vocabularies():
    diagnosis = hand_diagnosis()
    cli = "\n".join(diagnosis_lines(diagnosis, "cli"))
    config = diagnosis_paragraph(diagnosis, "config")
    assert "--min-confidence 0.91" in cli and "--confidence-tolerance" in cli
    assert "`min_confidence` ≥ 0.91" in config and "--" not in config


def test_round_trip_and_no_raw_values():
    diagnosis = hand_diagnosis()
    assert Diagnosis.from_dict(diagnosis.to_dict()) == diagnosis
    text = "\n".join(diagnosis_lines(diagnosis)) + diagnosis_paragraph(diagnosis) + str(diagnosis.to_dict())
    assert not any(f"9{k:04d}" in text for k in range(20))  # no quasi-identifier value


def test_a_dominant_value_in_no_rule_is_not_named():
    records = pd.DataFrame({"s1": ["secret"] * 8 + ["u", "v"], "s2": list("abcdefghij")})
    empty = mine_strong_rules(records, ["s1", "s2"], min_confidence=0.99, backend="counting", min_support=5)
    assert empty.empty
    diagnosis = diagnose(
        records,
        empty,
        DiagnosisSettings(ell=2, min_confidence=0.99, min_support=5, sensitive_attributes=("s1", "s2")),
        CandidateLoss(n_records=10, n_deleted=6),
    )
    assert [(d.attribute, d.value, d.forced_deletions) for d in diagnosis.dominant] == [("s1", None, 6)]
    assert "secret" not in "\n".join(diagnosis_lines(diagnosis)) + diagnosis_paragraph(diagnosis)


def test_forced_deletions_by_hand():
    assert forced_deletions(18, 20, 2) == 16
    assert forced_deletions(10, 20, 2) == 0  # exactly 1/2 is allowed
    assert forced_deletions(5, 9, 3) == 3  # tests/core/test_eligibility.py: 3 x holders go
    assert forced_deletions(7, 20, 3) == 1  # ⌈(21 − 20) / 2⌉


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from("xyz"), st.sampled_from("uvw")), min_size=2, max_size=40),
    st.integers(min_value=2, max_value=4),
)
def test_forced_deletions_is_a_lower_bound_of_the_eligibility_deletions(rows, ell):
    records = pd.DataFrame({"row_id": range(1, len(rows) + 1), "A": [a for a, _ in rows], "B": [b for _, b in rows]})
    bound = max(forced_deletions(int(records[a].value_counts().max()), len(records), ell) for a in ("A", "B"))
    assert len(eligibility_deletions(records, ["A", "B"], ell=ell)) >= bound


def test_refusal_html_names_the_cause_and_no_quasi_identifier(tmp_path):
    from pipeline.reporting.refusal_report import write_refusal_report

    path = write_refusal_report(tmp_path, "run-1", hand_diagnosis())
    assert path == tmp_path / "refusals" / "run-1" / "refusal.html"
    assert (path.stat().st_mode & 0o777) == 0o600 and (path.parent.stat().st_mode & 0o777) == 0o700
    page = path.read_text()
    assert "health = yes" in page and "90.0 %" in page and "already the minimum (2)" in page
    assert "<code>`min_confidence`" not in page and "`min_confidence` ≥ 0.91" in page and "--min-confidence 0.91" in page
    assert not any(f"9{k:04d}" in page for k in range(20))


def test_the_redacted_diagnosis_names_no_value():
    shown = hand_diagnosis().redacted()
    text = "\n".join(diagnosis_lines(shown)) + diagnosis_paragraph(shown) + str(shown.to_dict())
    assert "yes" not in text and "'a'" not in text
    assert "hobby ⇒ health" in text and "the most frequent value of health is held by 90.0 %" in text
    assert Diagnosis.from_dict(shown.to_dict()) == shown


def test_rating_has_no_grouping_clause():
    records = hand_table()
    rules = mine_strong_rules(records, list(ATTRIBUTES), min_confidence=0.8, backend="counting", min_support=1)
    diagnosis = diagnose(
        records,
        rules,
        DiagnosisSettings(ell=3, min_confidence=0.8, min_support=1, sensitive_attributes=ATTRIBUTES, model="rating"),
        CandidateLoss(n_records=20, n_deleted=17),
    )
    text = "\n".join(diagnosis_lines(diagnosis))
    assert "S_max" not in text and "partner" not in text and diagnosis.records_to_group == 0
    assert "at least 17 records must be deleted" in text  # health = yes at ℓ = 3: ⌈(54 − 20) / 2⌉


def test_two_data_loss_gates_refusing_the_same_loss_name_every_threshold_in_the_way():
    """Gate 4 (confidence off by 0.3) and the utility gate (16 of 20 deleted) refuse the same run: the merged
    diagnosis keeps gate 4's causes and options and adds the utility gate's last resort, each threshold once."""
    records = hand_table()
    rules = mine_strong_rules(records, list(ATTRIBUTES), min_confidence=0.8, backend="counting", min_support=1)
    settings_ = DiagnosisSettings(
        ell=2,
        min_confidence=0.8,
        min_support=1,
        sensitive_attributes=ATTRIBUTES,
        confidence_tolerance=0.05,
        max_deleted_share=0.10,
    )
    confidence = diagnose(records, rules, settings_, CandidateLoss(n_records=20, n_deleted=16, max_confidence_deviation=0.3))
    utility = diagnose(records, rules, settings_, CandidateLoss(n_records=20, n_deleted=16), gates=("utility_within_thresholds",))
    merged = merge_diagnoses(confidence, utility)
    assert merged.gates == ("rule_confidence_preserved", "utility_within_thresholds")
    last_resorts = [option.setting for option in merged.options if option.last_resort]
    assert sorted(last_resorts) == ["confidence_tolerance", "max_deleted_share"]
    assert merged.options[: len(confidence.options)] == confidence.options
    assert merged.loss.max_confidence_deviation == 0.3
    text = "\n".join(diagnosis_lines(merged))
    assert "--confidence-tolerance 0.31" in text and "--max-deleted-share 0.80" in text, text
    # the other order keeps the measured deviation too
    assert merge_diagnoses(utility, confidence).loss.max_confidence_deviation == 0.3


def test_the_lower_ell_offered_is_the_largest_whose_forced_deletions_the_loss_threshold_allows():
    # 100 records; 'x' is held by 26: at ℓ = 4 it forces ⌈(4·26 − 100) / 3⌉ = 2 deletions, within max_deleted_share
    # 0.10 (10 records), at ℓ = 3 none. The advice used to be the largest ℓ forcing none (3), a weaker protection than
    # needed (newcomer, session 40: ℓ = 4 published where the refusal of ℓ = 6 said ℓ = 3)
    records = pd.DataFrame(
        {
            "a": ["x"] * 26 + [f"v{k % 37}" for k in range(74)],
            "b": [f"w{k % 41}" for k in range(100)],
        }
    )
    rules = mine_strong_rules(records, ["a", "b"], min_confidence=0.8, backend="counting", min_support=5)
    common = dict(min_confidence=0.8, min_support=5, sensitive_attributes=("a", "b"), confidence_tolerance=0.05)
    loss = CandidateLoss(n_records=100, n_deleted=30)
    allowed = diagnose(records, rules, DiagnosisSettings(ell=5, max_deleted_share=0.10, **common), loss)
    (option,) = [o for o in allowed.options if o.setting == "ell"]
    assert option.value == "4" and option.forced_deletions == 2
    strict = diagnose(records, rules, DiagnosisSettings(ell=5, max_deleted_share=0.01, **common), loss)
    (option,) = [o for o in strict.options if o.setting == "ell"]
    assert option.value == "3" and option.forced_deletions == 0


def test_a_deviation_just_above_the_tolerance_is_not_written_as_the_tolerance():
    # diff review, session 40: 0.050187 read "by up to 0.05 (allowed: --confidence-tolerance 0.05)"
    from pipeline.core.diagnosis import deviation_text

    assert deviation_text(0.050187, 0.05) == "0.050"
    assert deviation_text(0.0549, 0.05) == "0.055"
    assert deviation_text(0.43, 0.05) == "0.43" and deviation_text(0.04, 0.05) == "0.04"
