"""Release series (issue 12): the private registry refuses a release that would compose with an earlier,
different release of the same records, unless allowed (and then recorded).

The composition figures themselves (what an intersection pins) are measured in tests/core/test_composition.py
and docs/attacks.md; here: the refusal, the override, the same-release case and where the registry lives."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from pipeline.cli import main
from pipeline.core.series import INPUT_KEY, changed_settings, find_recompositions, record_fingerprints
from pipeline.release.publish import list_releases, read_latest
from tests.conftest import example_frame, example_quasi_identifiers

SECRET = bytes(range(32))


def test_find_recompositions_by_hand():
    records = pd.DataFrame({"q": ["a", "b", "c", "c"], "s": ["x", "y", "z", "z"]})
    base = record_fingerprints(records, ["q", "s"], SECRET)
    config = {"model": "mixed", "ell": 3}
    # the same records and settings: the same release, allowed
    assert find_recompositions(base, config, [("r1", base, config)]) == []
    # unrelated records: nothing shared, allowed
    other = record_fingerprints(pd.DataFrame({"q": ["d"], "s": ["w"]}), ["q", "s"], SECRET)
    assert find_recompositions(other, config, [("r1", base, config)]) == []
    # another ℓ on the same records
    (found,) = find_recompositions(base, {"model": "mixed", "ell": 2}, [("r1", base, config)])
    assert (found.release_id, found.n_shared_records, found.changed_settings) == ("r1", 4, ("ell",))
    # one record appended (same settings): 4 shared, 1 new; one of the duplicates removed: 3 shared, 1 gone
    appended = record_fingerprints(pd.concat([records, pd.DataFrame({"q": ["e"], "s": ["v"]})]), ["q", "s"], SECRET)
    (found,) = find_recompositions(appended, config, [("r1", base, config)])
    assert (found.n_shared_records, found.n_only_new, found.n_only_earlier, found.changed_settings) == (4, 1, 0, ())
    fewer = record_fingerprints(records.iloc[:3], ["q", "s"], SECRET)
    (found,) = find_recompositions(fewer, config, [("r1", base, config)])
    assert (found.n_shared_records, found.n_only_new, found.n_only_earlier) == (3, 0, 1)
    # the fingerprints do not depend on the row order, and depend on the secret
    assert np.array_equal(base, record_fingerprints(records.iloc[::-1], ["q", "s"], SECRET))
    assert not np.array_equal(base, record_fingerprints(records, ["q", "s"], bytes(32)))


def test_the_same_input_file_with_other_settings_is_a_recomposition_even_with_no_fingerprint_in_common():
    # a newcomer's case: the same file over other columns (or another column order) gives other fingerprints; the
    # input's keyed digest (input_hmac) still names the same file
    records = pd.DataFrame({"q": ["a", "b"], "s": ["x", "y"], "t": ["u", "v"]})
    earlier = record_fingerprints(records, ["q", "s", "t"], SECRET)
    new = record_fingerprints(records, ["q", "t", "s"], SECRET)  # another order: no fingerprint in common
    assert not set(earlier.tolist()) & set(new.tolist())
    old_configuration = {"model": "mixed", "sensitive_attributes": ["s", "t"], INPUT_KEY: "digest-1"}
    new_configuration = {"model": "mixed", "sensitive_attributes": ["t", "s"], INPUT_KEY: "digest-1"}
    (found,) = find_recompositions(new, new_configuration, [("r1", earlier, old_configuration)])
    assert (found.n_shared_records, found.changed_settings, found.same_input_file) == (0, ("sensitive_attributes",), True)
    assert found.describe() == "release r1 was made from the same input file with other settings (sensitive_attributes)"
    # another file (or an entry whose input is unknown): nothing shared, nothing found
    assert find_recompositions(new, {**new_configuration, INPUT_KEY: "digest-2"}, [("r1", earlier, old_configuration)]) == []
    assert find_recompositions(new, {**new_configuration, INPUT_KEY: None}, [("r1", earlier, old_configuration)]) == []
    # the same file and the same settings: the same release
    assert find_recompositions(earlier, old_configuration, [("r1", earlier, old_configuration)]) == []
    # the same file and settings but no record in common (read with other missing-value tokens, say): refused, so named
    (found,) = find_recompositions(new, old_configuration, [("r1", earlier, old_configuration)])
    assert found.describe() == "release r1 was made from the same input file read with other reading options"


def test_a_key_added_later_is_unknown_in_older_entries_not_a_change():
    # registry entries written before "hierarchies" was recorded lack it: not known, so not a change (else every
    # release after the upgrade would be refused against its own earlier release); recorded on both sides, compared
    old = {"model": "mixed", "ell": 3}
    new = {"model": "mixed", "ell": 3, "hierarchies": {"age": "d1", "sex": None}}
    assert changed_settings(new, old) == () and changed_settings(old, new) == ()
    assert changed_settings(new, {**new, "hierarchies": {"age": "d2", "sex": None}}) == ("hierarchies",)
    assert changed_settings(new, {**new, "hierarchies": {"age": None, "sex": None}}) == ("hierarchies",)
    assert changed_settings(new, dict(new)) == ()


@pytest.fixture
def example_csv(golden, tmp_path, monkeypatch) -> tuple[dict, Path]:
    monkeypatch.setenv("MSA_RELEASE_HOME", str(tmp_path / "unused-home"))
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path / "unused-dagster"))
    monkeypatch.setenv("GX_ANALYTICS_ENABLED", "false")
    example = golden["example_A"]
    path = tmp_path / "example_a.csv"
    example_frame(example).drop(columns="row_id").to_csv(path, index=False)
    return example, path


def _run(example, path, home, *extra):
    return CliRunner().invoke(main, [*_arguments(example, path, home), *extra])


def _arguments(example, path, home) -> list[str]:
    return [
        "run",
        "--input",
        str(path),
        "--quasi-identifiers",
        ",".join(example_quasi_identifiers(example)),
        "--sensitive-attributes",
        ",".join(example["SA"]),
        "--min-confidence",
        str(example["min_conf"]),
        "--min-support",
        "1",
        "--home",
        str(home),
    ]


def test_a_second_release_with_another_ell_is_refused_unless_allowed(example_csv, tmp_path):
    """The in-memory job (--engine memory): its refusal measures what an intersection would pin, from the candidate
    tables in memory; the sharded default's refusal does not (README, "Scaling out"; tests/e2e/test_sharded_series.py)."""
    example, path = example_csv
    home = tmp_path / "home"
    first = _run(example, path, home, "--engine", "memory", "--ell", "2")
    assert first.exit_code == 0, first.output
    published = read_latest(home / "releases")
    # the same records and settings again: the same release, allowed (another seed too: it only permutes)
    again = _run(example, path, home, "--engine", "memory", "--ell", "2", "--seed", "5")
    assert again.exit_code == 0, again.output
    latest = read_latest(home / "releases")

    refused = _run(example, path, home, "--engine", "memory", "--ell", "3")
    assert refused.exit_code == 1, refused.output
    assert "would compose with 2 earlier release(s)" in refused.output and "(ell)" in refused.output
    assert "--allow-recomposition" in refused.output
    assert "publish this one as a comparison that is never shared (--no-promote" in refused.output  # newcomer, s40
    # the refusal says what the intersection with each earlier release would pin (from its published files)
    import re

    measured = re.findall(
        r"intersected with release (\S+), it would pin the whole sensitive tuple of (\d+) of the "
        r"(\d+) records published in both",
        " ".join(refused.output.split()),
    )
    assert {m[0] for m in measured} == {published.name, latest.name}
    earlier = json.loads((published / "manifest.json").read_text())
    assert earlier["n_sac_released"] + earlier["n_attribute_table"] == len(example["input"])  # ℓ = 2 publishes all
    assert read_latest(home / "releases") == latest  # nothing published

    allowed = _run(example, path, home, "--engine", "memory", "--ell", "3", "--allow-recomposition")
    assert allowed.exit_code == 0, allowed.output
    manifest = json.loads((read_latest(home / "releases") / "manifest.json").read_text())
    # every record of the ℓ = 3 release (the same release as the refused one: same home, records and settings) is in both
    for _, pinned, in_both in measured:
        assert int(in_both) == manifest["n_sac_released"] + manifest["n_attribute_table"]
        assert 0 <= int(pinned) <= int(in_both)
    assert manifest["allow_recomposition"] is True
    assert {r["release_id"] for r in manifest["recomposition"]} == {published.name, latest.name}
    assert all(
        r["changed_settings"] == ["ell"] and r["n_shared_records"] == len(example["input"]) for r in manifest["recomposition"]
    )
    first_manifest = json.loads((published / "manifest.json").read_text())
    assert first_manifest["allow_recomposition"] is False and first_manifest["recomposition"] == []

    # the registry is private: in the home, 0700 / 0600, never inside a release directory
    registry = home / "registry"
    assert stat.S_IMODE(registry.stat().st_mode) == 0o700
    entries = sorted(registry.glob("*.parquet"))
    assert len(entries) == 3 and all(stat.S_IMODE(p.stat().st_mode) == 0o600 for p in entries)
    for release in (home / "releases").iterdir():
        if release.is_dir():
            assert not any(p.name.endswith(".parquet") and p.stem.startswith("2026") for p in release.iterdir())


@pytest.mark.parametrize("engine", ["memory", "local"])
def test_a_release_of_the_same_file_over_other_columns_is_refused(example_csv, tmp_path, engine):
    """A newcomer published the default Adult release, then the same file with one sensitive attribute fewer (and a red
    team the same attributes in another order): both were published (exit 0, "recomposition": []), since records are
    fingerprinted over the release's columns. The input's keyed digest now names the same file: refused."""
    example, path = example_csv
    home = tmp_path / "home"
    first = _run(example, path, home, "--engine", engine, "--ell", "2")
    assert first.exit_code == 0, first.output
    published = read_latest(home / "releases")
    reordered = [*example["SA"][1:], example["SA"][0]]
    for columns in (reordered, example["SA"][:-1]):
        arguments = [*_arguments(example, path, home), "--engine", engine]
        arguments[arguments.index("--sensitive-attributes") + 1] = ",".join(columns)
        refused = CliRunner().invoke(main, [*arguments, "--ell", "2"])
        assert refused.exit_code == 1, refused.output
        said = " ".join(refused.output.split())
        assert f"release {published.name} was made from the same input file with other settings (sensitive_attributes)" in said
        assert read_latest(home / "releases") == published


def test_a_comparison_is_neither_refused_by_nor_refusing_shared_releases(example_csv, tmp_path):
    """Issue 15: the series check compares with the home's shared releases only. A shared release after a comparison
    of the same records with another ℓ is not refused because of it; a comparison (--no-promote) with another ℓ than
    the shared release is published (not refused: it is not shared), its overlap recorded in its manifest; LATEST
    never names a comparison."""
    example, path = example_csv
    home = tmp_path / "home"
    first = _run(example, path, home, "--ell", "3", "--no-promote")
    assert first.exit_code == 0, first.output
    assert read_latest(home / "releases") is None and len(list_releases(home / "comparisons")) == 1
    shared_run = _run(example, path, home, "--ell", "2")
    assert shared_run.exit_code == 0, shared_run.output  # the comparison does not refuse it
    shared = read_latest(home / "releases")
    assert json.loads((shared / "manifest.json").read_text())["recomposition"] == []
    again = _run(example, path, home, "--ell", "3", "--no-promote")
    assert again.exit_code == 0, again.output  # composes with the shared ℓ = 2 release: recorded, not refused
    assert read_latest(home / "releases") == shared
    comparison = list_releases(home / "comparisons")[-1]
    manifest = json.loads((comparison / "manifest.json").read_text())
    assert manifest["allow_recomposition"] is False and manifest["promotion"]["promoted"] is False
    assert [(r["release_id"], r["changed_settings"]) for r in manifest["recomposition"]] == [(shared.name, ["ell"])]


@pytest.mark.parametrize("engine", ["memory", "local"])
def test_a_release_with_other_hierarchies_is_refused(example_csv, tmp_path, engine):
    """Red team, session 38: the default Adult release, then the same file with two hierarchy files removed from a
    copy of the folder (--hierarchies), were both published from one home ("recomposition": []): the hierarchies
    decide the qi_aware strata, so the groups, SIDs and deletions, and the two releases' intersection pinned age for
    0.84 % of the records. The registry now compares the hierarchy files' digests."""
    example, path = example_csv
    home = tmp_path / "home"
    countries = sorted({str(r["qi"]["Country"]) for r in example["input"]})
    asia = {"China", "India", "Japan"}
    coarse, fine = tmp_path / "coarse", tmp_path / "fine"
    for folder, lines in (
        (coarse, [f"{c};*" for c in countries]),
        (fine, [f"{c};{'Asia' if c in asia else 'Elsewhere'};*" for c in countries]),
    ):
        folder.mkdir()
        (folder / "Country.csv").write_text("\n".join(lines) + "\n")
    first = _run(example, path, home, "--engine", engine, "--ell", "2", "--hierarchies", str(coarse))
    assert first.exit_code == 0, first.output
    published = read_latest(home / "releases")
    # the same hierarchies again: the same release, allowed
    again = _run(example, path, home, "--engine", engine, "--ell", "2", "--hierarchies", str(coarse))
    assert again.exit_code == 0, again.output
    latest = read_latest(home / "releases")
    refused = _run(example, path, home, "--engine", engine, "--ell", "2", "--hierarchies", str(fine))
    assert refused.exit_code == 1, refused.output
    said = " ".join(refused.output.split())
    assert "(hierarchies)" in said and "release refused: it would compose with" in said
    assert read_latest(home / "releases") == latest and published.name in said
