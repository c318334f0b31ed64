"""The kernels compiled ahead of time (pipeline/core/compiled.py) compute what numba's just-in-time kernels compute,
are used only when built from the current sources, and spare a release numba's import (issue 18).

The module is built once for this file into a temporary folder (about 10 s), independently of ``make env``'s build.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import textwrap
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pipeline.core import compiled
from pipeline.core import kl_anonymity as kl
from pipeline.core.grouping import group_sac
from pipeline.core.hierarchies import load_hierarchies
from pipeline.core.rating import create_sids
from tests.core.test_kl_anonymity import random_table
from tests.core.test_scale_equivalence import skewed_tables

PROJECT_ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> Path:
    """The folder of a module built from the current sources: ``make env``'s when it is current, else one built here
    (about 30 s)."""
    if compiled.built_module() is not None:
        return compiled.BUILD_DIRECTORY
    folder = tmp_path_factory.mktemp("kernels")
    try:
        compiled.build(folder)
    except RuntimeError as error:  # no C compiler: the kernels run just in time, which every other test covers
        pytest.skip(f"the ahead-of-time module cannot be built on this machine: {error}")
    return folder


@contextmanager
def serving(module):
    """``kernel()`` serves ``module``'s functions (None: numba's just-in-time ones) inside the block."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(compiled, "_default_module", lambda: module)
        compiled.kernel.cache_clear()
        try:
            yield
        finally:
            compiled.kernel.cache_clear()


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


def test_grouping_rating_and_the_kl_model_run_without_numba_when_built(built):
    """A release's algorithms reach their kernels through ``kernel()`` only: with the module built, a fresh
    interpreter that groups, rates and runs the (k, ℓ) model never imports numba or LLVM."""
    script = textwrap.dedent(
        f"""
        import sys
        from pathlib import Path
        import numpy as np
        import pandas as pd
        from pipeline.core import compiled
        compiled.BUILD_DIRECTORY = Path({str(built)!r})
        from pipeline.core import kl_anonymity as kl
        from pipeline.core.grouping import group_sac
        from pipeline.core.rating import create_sids
        from tests.core.test_kl_anonymity import random_table
        frame, hierarchies = random_table(7, 60, n_sensitive=2)
        sensitive = [c for c in frame.columns if c.startswith("s")]
        frame = frame.assign(row_id=np.arange(1, len(frame) + 1))
        groups = group_sac(frame, sensitive, frame["row_id"][:30], frame["row_id"][30:], ell=2, quasi_identifiers=["zip"])
        sids = create_sids(frame["row_id"].tolist(), frame[sensitive[0]].tolist(), ell=2)
        table = kl.encode_table(frame, ["zip", "age"], sensitive, hierarchies)
        clusters, _ = kl.blocked_clusters(table, k=3, ell=2, max_block_size=16, whole_table_tuples=0)
        assert len(groups.groups) and sids.n_sids and len(clusters)
        print("numba" in sys.modules, "llvmlite" in sys.modules)
        """
    )
    done = subprocess.run([sys.executable, "-c", script], cwd=PROJECT_ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["False", "False"]


def test_a_module_built_from_other_sources_is_not_used(built, monkeypatch):
    assert compiled.built_module(built) is not None
    monkeypatch.setattr(compiled, "_numba_version", lambda: "0.0.0")  # a numba upgrade changes the digest
    assert compiled.built_module(built) is None
    monkeypatch.setattr(compiled, "BUILD_DIRECTORY", built)
    compiled._default_module.cache_clear()
    compiled.kernel.cache_clear()
    try:
        served = compiled.kernel("group_records")
    finally:
        compiled._default_module.cache_clear()
        compiled.kernel.cache_clear()
    assert type(served).__module__.startswith("numba")  # numba's dispatcher, not the stale build


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
    """The equivalence tests' skewed tables (``tests/core/test_scale_equivalence.py``) with a quasi-identifier."""
    frame, attributes, in_sac = draw(skewed_tables())
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    return frame.assign(zone=[f"z{k}" for k in rng.integers(0, draw(st.integers(1, 5)), size=len(frame))]), attributes, in_sac


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
    with serving(None):
        expected = _grouping(frame, attributes, in_sac, ell, quasi_identifiers)
    with serving(compiled.built_module(built)):
        assert type(compiled.kernel("group_records")).__name__ != "CPUDispatcher"
        assert _grouping(frame, attributes, in_sac, ell, quasi_identifiers) == expected


@settings(max_examples=150, deadline=None)
@given(table=tables(), ell=st.integers(2, 6), method=st.sampled_from(["improved", "plain"]))
def test_ahead_of_time_sid_creation_equals_just_in_time(built, table, ell, method):
    frame, attributes, _ = table
    values = frame[attributes[0]].tolist()
    with serving(None):
        expected = _sids(values, ell, method)
    with serving(compiled.built_module(built)):
        assert _sids(values, ell, method) == expected


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(6, 120), n_sensitive=st.integers(2, 3), k=st.integers(2, 4))
def test_ahead_of_time_kl_clustering_equals_just_in_time(built, seed, n, n_sensitive, k):
    frame, hierarchies = random_table(seed, n, n_sensitive=n_sensitive)
    sensitive = [c for c in frame.columns if c.startswith("s")]
    table = kl.encode_table(frame, ["zip", "age"], sensitive, hierarchies)
    outcomes = []
    for module in (None, compiled.built_module(built)):
        with serving(module):
            served = {type(compiled.kernel(name)).__name__ for name in ("greedy_labels", "bipartition_costs")}
            assert ("CPUDispatcher" in served) == (module is None)
            try:  # the whole-table greedy (compiled), then blocks of at most 16 records (bipartitions, certificates)
                whole = kl.blocked_clusters(table, k=k, ell=2)
                blocked = kl.blocked_clusters(table, k=k, ell=2, max_block_size=16, whole_table_tuples=0)
                outcome = ([c.tolist() for c in whole[0]], whole[1], [c.tolist() for c in blocked[0]], blocked[1])
            except kl.InfeasibleError as error:
                outcome = str(error)
            cost = kl.cluster_cost(table, np.arange(len(table)))
        outcomes.append((outcome, cost))
    assert outcomes[0] == outcomes[1]


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n_tuples=st.integers(1, 90), m=st.integers(2, 4), n_values=st.integers(2, 9))
def test_ahead_of_time_diversity_kernels_equal_just_in_time(built, seed, n_tuples, m, n_values):
    """Diverse's certificate, its exact search and the greedy witness (which no (k, ℓ) run of the tests above
    reaches: it serves sets of more than DIVERSE_EXACT_LIMIT distinct tuples) on random distinct tuples."""
    rng = np.random.default_rng(seed)
    tuples = np.unique(rng.integers(0, n_values, size=(n_tuples, m)), axis=0).astype(np.int64)
    chosen = rng.integers(0, len(tuples), size=rng.integers(1, 3 * len(tuples) + 1)).astype(np.int64)
    results = []
    for module in (None, compiled.built_module(built)):
        with serving(module):
            results.append(
                (
                    [int(compiled.kernel("greedy_certificate_compiled")(chosen, tuples, stop)) for stop in (0, 2, 3)],
                    compiled.kernel("greedy_witness_compiled")(tuples).tolist(),
                    compiled.kernel("largest_totally_different_compiled")(tuples[:12]).tolist(),
                )
            )
    assert results[0] == results[1]


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ((np.zeros(3, dtype=np.int32), np.zeros((2, 2), dtype=np.int64), 0), "argument 1 must be int64[:], got int32[1d]"),
        ((np.zeros(3, dtype=np.int64), np.zeros(4, dtype=np.int64), 0), "argument 2 must be int64[:, :], got int64[1d]"),
        ((np.zeros(3, dtype=np.int64), np.zeros((2, 2), dtype=np.int64), 2.7), "argument 3 must be int64, got float"),
        ((np.zeros(3, dtype=np.int64), np.zeros((2, 2), dtype=np.int64), True), "argument 3 must be int64, got bool"),
        ((np.zeros(3, dtype=np.int64), [[0, 1]], 0), "argument 2 must be int64[:, :], got list"),
        ((np.zeros(3, dtype=np.int64),), "takes 3 arguments"),
    ],
)
def test_the_ahead_of_time_kernel_refuses_arguments_outside_its_signature(built, arguments, message):
    """The compiled function would misread them (a crash or a wrong answer); numba's dispatcher compiles another
    specialization instead. The check names the argument and what it must be."""
    with serving(compiled.built_module(built)):
        certificate = compiled.kernel("greedy_certificate_compiled")
        with pytest.raises(TypeError, match=re.escape(message)):
            certificate(*arguments)
        tuples = np.array([[0, 0], [1, 1], [2, 2]], dtype=np.int64)
        assert certificate(np.array([0, 1, 2], dtype=np.int64), tuples, np.int64(0)) == 3  # the signature's types pass


def test_every_module_a_kernel_imports_from_this_package_is_in_the_digest():
    """An edit of a module whose names a kernel compiles in (constants, helpers) must change the digest."""
    covered = {signature.module for signature in compiled.KERNELS.values()} | set(compiled.EXTRA_SOURCES)
    for module in sorted(covered):
        tree = ast.parse(compiled._source_path(module).read_text(encoding="utf-8"))
        imported = {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module}
        imported |= {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
        ours = {name for name in imported if name.startswith("pipeline.")}
        assert ours <= covered, f"{module} imports {sorted(ours - covered)}, which the digest does not cover"


def test_a_module_from_a_zip_archive_runs_just_in_time(monkeypatch):
    """Sources that cannot be read as files (the package zipped, e.g. Spark's --py-files): no digest, no build."""

    def unreadable(module_name):
        raise NotADirectoryError(f"{module_name} is inside a zip archive")

    monkeypatch.setattr(compiled, "_source_path", unreadable)
    assert compiled.built_module() is None


@pytest.mark.slow
def test_on_adult_both_builds_group_and_rate_alike(built, adult_records):
    adult = adult_records
    attributes = ["education", "occupation", "relationship"]
    in_sac = np.arange(len(adult)) % 3 == 0  # a third of the records as SAC, spread over the table
    outcomes = []
    for module in (None, compiled.built_module(built)):
        with serving(module):
            grouping = _grouping(adult, attributes, in_sac, 3, ["sex", "race"])
            sids = [_sids(adult[a].tolist(), 3, "improved") for a in attributes]
        outcomes.append((grouping, sids))
    assert outcomes[0] == outcomes[1]
    assert len(outcomes[0][0][0]) > 1000  # thousands of groups: the comparison is not vacuous


@pytest.mark.slow
def test_on_adult_both_builds_give_the_same_kl_release(built, adult_records):
    adult = adult_records
    quasi_identifiers = ["sex", "race", "marital-status", "native-country", "workclass"]
    sensitive_attributes = ["education", "occupation", "relationship"]
    hierarchies = load_hierarchies(PROJECT_ROOT / "data" / "adult" / "hierarchies", quasi_identifiers)
    outcomes = []
    for module in (None, compiled.built_module(built)):
        with serving(module):
            result = kl.kl_anonymize(adult, quasi_identifiers, sensitive_attributes, hierarchies, k=3, ell=3)
        outcomes.append((result.assignments, result.clusters, result.total_cost, result.n_blocks))
    pd.testing.assert_frame_equal(outcomes[0][0], outcomes[1][0])
    pd.testing.assert_frame_equal(outcomes[0][1], outcomes[1][1])
    assert outcomes[0][2:] == outcomes[1][2:]
    assert len(outcomes[0][1]) > 1000  # thousands of clusters
