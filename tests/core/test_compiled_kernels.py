"""The kernels compiled ahead of time (pipeline/core/compiled.py) compute what numba's just-in-time kernels compute,
are used only when built from the current sources, and spare a release numba's import (issue 18).

The module is built once for this file into a temporary folder (about 10 s), independently of ``make env``'s build.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.core import compiled
from pipeline.core.grouping import group_sac
from pipeline.core.rating import create_sids

PROJECT_ROOT = Path(__file__).resolve().parents[2]
ADULT = PROJECT_ROOT / "data" / "adult" / "adult.data"
ADULT_COLUMNS = [
    "age", "workclass", "fnlwgt", "education", "education-num", "marital-status", "occupation", "relationship", "race",
    "sex", "capital-gain", "capital-loss", "hours-per-week", "native-country", "income",
]  # fmt: skip


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("kernels")
    compiled.build(folder)
    return folder


def test_the_build_is_one_module_named_after_the_sources_that_imports_without_numba(built):
    modules = sorted(p.name for p in built.iterdir() if p.name.startswith("_kernels_"))
    assert len(modules) == 1 and modules[0].startswith(f"_kernels_{compiled.source_digest()}.")
    script = textwrap.dedent(
        f"""
        import sys
        from pathlib import Path
        from pipeline.core import compiled
        module = compiled.built_module(Path({str(built)!r}))
        assert module is not None
        assert sorted(n for n in compiled.KERNELS if hasattr(module, n)) == sorted(compiled.KERNELS)
        print("numba" in sys.modules, "llvmlite" in sys.modules)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=PROJECT_ROOT, capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "False"]


def test_a_module_built_from_other_sources_is_not_used(built, monkeypatch):
    assert compiled.built_module(built) is not None
    monkeypatch.setattr(compiled, "_numba_version", lambda: "0.0.0")  # a numba upgrade changes the digest
    assert compiled.built_module(built) is None
    monkeypatch.setattr(compiled, "_default_module", lambda: compiled.built_module(built))
    just_in_time = compiled.kernel("group_records")
    assert type(just_in_time).__module__.startswith("numba")  # numba's dispatcher, not the stale build


def test_an_edited_kernel_source_changes_the_digest(tmp_path, monkeypatch):
    before = compiled.source_digest()
    source = Path(compiled.__file__).with_name("rating_kernel.py")
    edited = tmp_path / "rating_kernel.py"
    edited.write_bytes(source.read_bytes() + b"\n# an edit\n")
    original = compiled._source_path
    monkeypatch.setattr(compiled, "_source_path", lambda name: edited if name.endswith("rating_kernel") else original(name))
    assert compiled.source_digest() != before


def test_kernel_refuses_an_unknown_name():
    with pytest.raises(KeyError):
        compiled.kernel("no_such_kernel")


@st.composite
def tables(draw):
    """Records with 2-4 sensitive attributes of skewed values, a SAC/IR split and two quasi-identifiers."""
    n = draw(st.integers(0, 150))
    m = draw(st.integers(2, 4))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    columns = {}
    for j in range(m):
        n_values = draw(st.integers(1, 8))
        weights = rng.dirichlet(np.full(n_values, draw(st.sampled_from([0.3, 1.0, 5.0]))))
        columns[f"S{j}"] = [f"v{k}" for k in rng.choice(n_values, size=n, p=weights)]
    frame = pd.DataFrame(
        {
            "row_id": rng.permutation(np.arange(1, n + 1)) * 5,
            "zone": [f"z{k}" for k in rng.integers(0, draw(st.integers(1, 5)), size=n)],
            **columns,
        }
    )
    in_sac = rng.random(n) < draw(st.sampled_from([0.2, 0.5, 0.9]))
    return frame, list(columns), in_sac


def _grouping(frame, attributes, in_sac, ell, quasi_identifiers):
    ids = frame["row_id"].to_numpy()
    result = group_sac(frame, attributes, ids[in_sac], ids[~in_sac], ell=ell, quasi_identifiers=quasi_identifiers)
    return result.groups, result.borrowed.tolist(), result.deleted.tolist(), result.ir_left.tolist()


def _sids(values, ell, method):
    result = create_sids(list(range(1, len(values) + 1)), values, ell=ell, method=method)
    arrays = (result.entry_sid, result.entry_bucket, result.entry_record, result.record_sid, result.suppressed_records)
    return [a.tolist() for a in arrays], result.n_sids, result.reorder_comparisons


@settings(max_examples=150, deadline=None)
@given(table=tables(), ell=st.integers(2, 4), qi_aware=st.booleans())
def test_ahead_of_time_grouping_equals_just_in_time(built, table, ell, qi_aware):
    frame, attributes, in_sac = table
    quasi_identifiers = ["zone"] if qi_aware else None
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(compiled, "_default_module", lambda: None)
        expected = _grouping(frame, attributes, in_sac, ell, quasi_identifiers)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(compiled, "_default_module", lambda: compiled.built_module(built))
        assert type(compiled.kernel("group_records")).__name__ != "CPUDispatcher"
        assert _grouping(frame, attributes, in_sac, ell, quasi_identifiers) == expected


@settings(max_examples=150, deadline=None)
@given(table=tables(), ell=st.integers(2, 6), method=st.sampled_from(["improved", "plain"]))
def test_ahead_of_time_sid_creation_equals_just_in_time(built, table, ell, method):
    frame, attributes, _ = table
    values = frame[attributes[0]].tolist()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(compiled, "_default_module", lambda: None)
        expected = _sids(values, ell, method)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(compiled, "_default_module", lambda: compiled.built_module(built))
        assert _sids(values, ell, method) == expected


@pytest.mark.slow
def test_on_adult_both_builds_group_and_rate_alike(built, monkeypatch):
    adult = pd.read_csv(ADULT, header=None, names=ADULT_COLUMNS, skipinitialspace=True, na_values="?").dropna()
    adult = adult.reset_index(drop=True).assign(row_id=lambda f: np.arange(1, len(f) + 1))
    attributes = ["education", "occupation", "relationship"]
    in_sac = (adult["age"] % 3 == 0).to_numpy()  # a third of the records as SAC, spread over the table
    outcomes = []
    for module in (None, compiled.built_module(built)):
        monkeypatch.setattr(compiled, "_default_module", lambda module=module: module)
        grouping = _grouping(adult, attributes, in_sac, 3, ["sex", "race"])
        sids = [_sids(adult[a].tolist(), 3, "improved") for a in attributes]
        outcomes.append((grouping, sids))
    assert outcomes[0] == outcomes[1]
    assert len(outcomes[0][0][0]) > 1000  # thousands of groups: the comparison is not vacuous
