"""Issue 15, "The tool's own advice makes a leaky release the shared one": which release is shared and which is a
comparison (pipeline/release/promotion.py), and a comparison's publish (the same atomic protocol, never LATEST, kept
and cleaned up in comparisons/ on its own)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from pipeline.release.locking import acquire_release_lock
from pipeline.release.promotion import COMPARISON_NOTICE, decide_promotion, is_comparison, loosened_bounds
from pipeline.release.publish import (
    MANIFEST_COLUMNS,
    OWNER_MARK_SUFFIX,
    OWNER_MARK_TEXT,
    publish_release,
    read_latest,
)

SCHEMAS = {"release_manifest": dict(MANIFEST_COLUMNS)}
IDS = ["20260101T000000Z-00000001", "20260102T000000Z-00000002", "20260103T000000Z-00000003"]


def _decide(promote, *, baseline=False, overridden=(), warned=(), **settings):
    return decide_promotion(
        promote=promote,
        baseline=baseline,
        model="rating" if baseline else "mixed",
        overridden=overridden,
        warned=warned,
        settings=settings,
    )


@pytest.mark.parametrize(
    ("promote", "baseline", "overridden", "warned", "promoted"),
    [
        (None, False, (), (), True),  # the mixed model within every bound: shared
        (None, True, (), (), False),  # a baseline: a comparison by default
        (True, True, (), (), True),  # --promote shares a baseline that passed every gate
        (None, True, ("disclosure_within_bound",), (), False),  # Rating above 1/ℓ by allow_disclosure
        (True, True, ("disclosure_within_bound",), (), False),  # --promote never shares a release above a bound
        (None, False, (), ("posterior_within_bound",), False),  # posterior_gate warn that warned
        (True, False, (), ("posterior_within_bound",), False),
        (False, False, (), (), False),  # --no-promote
        (False, True, (), (), False),
    ],
)
def test_who_is_shared(promote, baseline, overridden, warned, promoted):
    decision = _decide(promote, baseline=baseline, overridden=overridden, warned=warned)
    assert decision.promoted is promoted
    assert decision.area == ("releases" if promoted else "comparisons")
    assert decision.requested is promote
    entry = decision.manifest_entry()
    assert entry["promoted"] is promoted and entry["reason"] == decision.reason and decision.reason


def test_a_refused_promote_says_why_and_a_promoted_release_lists_the_overrides_it_set():
    refused = _decide(True, baseline=True, overridden=("disclosure_within_bound",), allow_disclosure=True)
    assert refused.reason.startswith("--promote refused: gate(s) disclosure_within_bound failed")
    # allow_disclosure set but not needed (the gate passed): shared, and the manifest shows the override
    shared = _decide(True, baseline=True, allow_disclosure=True, posterior_gate="warn")
    assert shared.promoted and shared.manifest_entry()["overrides_set"] == ["allow_disclosure", "posterior_gate: warn"]
    assert _decide(None).manifest_entry()["overrides_set"] == []


def test_is_comparison_reads_the_manifest():
    assert is_comparison({"promotion": {"promoted": False}})
    assert not is_comparison({"promotion": {"promoted": True}})
    assert not is_comparison({})  # a release made before issue 15 is shared


def _publish_comparison(comparisons: Path, release_id: str, **options) -> Path:
    created = f"2026-01-0{IDS.index(release_id) + 1}T00:00:00+00:00"
    manifest = {"release_id": release_id, "created_at": created, "notice": COMPARISON_NOTICE}
    return publish_release(comparisons, release_id, {}, SCHEMAS, manifest, update_latest=False, **options)


def test_a_comparison_is_published_atomically_without_latest_and_kept_on_its_own(tmp_path):
    releases, comparisons = tmp_path / "releases", tmp_path / "comparisons"
    publish_release(releases, "shared", {}, SCHEMAS, {"release_id": "shared"})
    for release_id in IDS:
        _publish_comparison(comparisons, release_id, keep_releases=2)
    assert sorted(p.name for p in comparisons.iterdir()) == IDS[1:]  # no LATEST, no staging, retention per area
    assert read_latest(releases).name == "shared" and sorted(p.name for p in releases.iterdir()) == ["LATEST", "shared"]
    text = (comparisons / IDS[2] / "manifest.json").read_text(encoding="utf-8")
    assert text.startswith('{\n  "notice": "COMPARISON — not for sharing'), text[:80]
    assert json.loads(text)["release_id"] == IDS[2]


def test_a_failed_comparison_publish_leaves_nothing_and_latest_untouched(tmp_path):
    releases, comparisons = tmp_path / "releases", tmp_path / "comparisons"
    publish_release(releases, "shared", {}, SCHEMAS, {"release_id": "shared"})
    bad = {"release_manifest": dict(MANIFEST_COLUMNS), "extra": {"x": "VARCHAR"}}
    with pytest.raises(ValueError, match="differ from the contract"):
        publish_release(
            comparisons, IDS[0], {"extra": pd.DataFrame({"y": ["1"]})}, bad, {"release_id": IDS[0]}, update_latest=False
        )
    assert list(comparisons.iterdir()) == []
    assert read_latest(releases).name == "shared"


def test_the_lock_removes_what_a_killed_comparison_publish_left(tmp_path):
    home = tmp_path / "home"
    comparisons = home / "comparisons"
    comparisons.mkdir(parents=True)
    stale = comparisons / f".staging-{IDS[0]}"
    stale.mkdir()
    (comparisons / f"{stale.name}{OWNER_MARK_SUFFIX}").write_text(OWNER_MARK_TEXT)
    lock = acquire_release_lock(home)
    try:
        assert list(comparisons.iterdir()) == []
    finally:
        lock.release()


def test_the_report_advice_suggests_a_comparison_never_a_shared_leaky_release():
    """Issue 15: a page without a comparison told the steward to publish `--model rating --allow-disclosure`, which
    replaced LATEST with a release of maximum disclosure 1.0. The advice now says the run is a comparison
    (comparisons/, never LATEST); a Rating page suggests the mixed run, not another override."""
    from pipeline.reporting.release_report import baseline_section, render_report

    mixed = baseline_section({"model": "mixed"}, None, None)
    assert "Not available" in mixed and "msa-release run --model rating --allow-disclosure" in mixed
    assert "<code>comparisons/</code>" in mixed and "never moves <code>releases/LATEST</code>" in mixed
    assert "--allow-recomposition" not in mixed  # a comparison needs no recomposition override
    rating = baseline_section({"model": "rating"}, None, None)
    assert "msa-release run --model mixed" in rating and "--allow-disclosure" not in rating
    not_computed = baseline_section({"model": "mixed"}, {"private_rating_baseline": {"not_computed": True}}, None)
    assert "never moves <code>releases/LATEST</code>" in not_computed
    # the banner: first on a comparison's page, absent on a shared one
    comparison = {"model": "toy-unknown", "ell": 2, "release_id": "x", "promotion": {"promoted": False, "reason": "a baseline"}}
    page = render_report(comparison, None)
    assert page.index("COMPARISON — not for sharing") < page.index("<h1>")
    shared = render_report({**comparison, "promotion": {"promoted": True, "overrides_set": []}}, None)
    assert "COMPARISON" not in shared.split("<h1>")[0]


def test_a_loosened_posterior_bound_that_let_an_excess_through_is_never_shared():
    # max_excess is the largest posterior minus its bound max(1/ℓ, population) + posterior_slack
    passed = [{"name": "posterior_within_bound", "status": "passed", "observed": {"max_excess": -0.69}}]  # 0.31 above
    within = [{"name": "posterior_within_bound", "status": "passed", "observed": {"max_excess": -0.98}}]  # 0.02 above
    assert loosened_bounds(0.05, passed) == []  # the default slack: nothing loosened
    assert loosened_bounds(1.0, within) == []  # raised, but every posterior is within the default bound
    (why,) = loosened_bounds(1.0, passed)
    assert why.startswith(
        "posterior_within_bound passed only with posterior_slack 1 (the largest posterior of a true value is 0.310 above"
    )
    assert loosened_bounds(1.0, [{"name": "posterior_within_bound", "status": "passed", "observed": {}}])  # unknown
    for promote in (None, True):
        decision = decide_promotion(
            promote=promote, baseline=False, model="mixed", settings={"posterior_slack": 1.0}, loosened=[why]
        )
        assert not decision.promoted and "above the default bound" in decision.reason
        assert decision.overrides_set == ("posterior_slack",)
    assert decide_promotion(promote=None, baseline=False, model="mixed", settings={"posterior_slack": 1.0}).promoted
