"""Keyed randomness (pipeline.core.keyed) and the home secret (pipeline.release.home_secret)."""

import os
import stat

import numpy as np
import pandas as pd
import pytest

from pipeline.core.keyed import keyed_digest, keyed_generator, keyed_order, keyed_record_hashes
from pipeline.release.home_secret import HomeSecretError, load_or_create_secret

SECRET_A = bytes(range(32))
SECRET_B = bytes(range(1, 33))


def test_secret_is_created_once_with_mode_0600(tmp_path, monkeypatch):
    import secrets

    import pipeline.release.home_secret

    # the real generator (the suite's autouse fixture gives every home the same secret)
    monkeypatch.setattr(pipeline.release.home_secret, "_new_secret", lambda: secrets.token_bytes(32))
    first = load_or_create_secret(tmp_path)
    assert len(first) == 32
    assert stat.S_IMODE(os.stat(tmp_path / "secret.key").st_mode) == 0o600
    assert load_or_create_secret(tmp_path) == first
    assert load_or_create_secret(tmp_path / "other") != first


def test_truncated_secret_is_refused_with_its_path(tmp_path):
    (tmp_path / "secret.key").write_bytes(b"short")
    with pytest.raises(HomeSecretError, match="secret.key"):
        load_or_create_secret(tmp_path)


def test_record_hashes_depend_on_content_and_secret_not_on_row_order():
    frame = pd.DataFrame({"a": ["x", "y", "z", "x"], "b": pd.Categorical(["1", "2", "3", "1"])})
    hashes = keyed_record_hashes(frame, ["a", "b"], SECRET_A, "purpose")
    assert hashes[0] == hashes[3] and len(set(hashes[:3].tolist())) == 3
    reversed_hashes = keyed_record_hashes(frame.iloc[::-1].reset_index(drop=True), ["a", "b"], SECRET_A, "purpose")
    assert sorted(hashes.tolist()) == sorted(reversed_hashes.tolist())
    # categories as text: another category list with the same values hashes the same
    recoded = frame.assign(b=pd.Categorical(["1", "2", "3", "1"], categories=["3", "2", "1", "9"]))
    assert np.array_equal(keyed_record_hashes(recoded, ["a", "b"], SECRET_A, "purpose"), hashes)
    assert not np.array_equal(keyed_record_hashes(frame, ["a", "b"], SECRET_B, "purpose"), hashes)
    assert not np.array_equal(keyed_record_hashes(frame, ["a", "b"], SECRET_A, "other"), hashes)


def test_keyed_order_is_a_permutation_that_ignores_input_order():
    rng = np.random.default_rng(1)
    frame = pd.DataFrame({"a": rng.integers(0, 50, 500).astype(str), "b": rng.integers(0, 7, 500).astype(str)})
    order = keyed_order(frame, ["a", "b"], SECRET_A, "record-order")
    assert sorted(order.tolist()) == list(range(500))
    shuffled = frame.sample(frac=1, random_state=3).reset_index(drop=True)
    again = keyed_order(shuffled, ["a", "b"], SECRET_A, "record-order")
    as_tuples = lambda f, o: list(zip(f["a"].to_numpy()[o], f["b"].to_numpy()[o]))  # noqa: E731
    assert as_tuples(frame, order) == as_tuples(shuffled, again)
    # far from the input order
    assert abs(np.corrcoef(order, np.arange(500))[0, 1]) < 0.2


def test_digest_parts_do_not_run_together_and_generators_are_reproducible():
    assert keyed_digest(SECRET_A, "ab", "c") != keyed_digest(SECRET_A, "a", "bc")
    assert (
        keyed_generator(SECRET_A, "x").integers(0, 1 << 30, 5).tolist()
        == keyed_generator(SECRET_A, "x").integers(0, 1 << 30, 5).tolist()
    )
    with pytest.raises(ValueError):
        keyed_digest(b"short", "x")


def test_record_hashes_of_categorical_columns_equal_those_of_the_same_values_as_objects():
    secret = b"s" * 32
    frame = pd.DataFrame(
        {"text": ["b", "a", None, "b", "c"], "number": [3, 1, 2, 3, 1], "mixed": ["x", "y", "x", "z", None]}
    ).astype(object)
    as_categories = frame.astype("category")
    assert as_categories["number"].cat.categories.dtype != object  # the numeric branch is exercised
    expected = keyed_record_hashes(frame, list(frame.columns), secret, "purpose")
    assert np.array_equal(keyed_record_hashes(as_categories, list(frame.columns), secret, "purpose"), expected)
    # categories in another order and unused categories change nothing either
    shuffled = as_categories.assign(text=as_categories["text"].cat.set_categories(["c", "zz", "b", "a"]))
    assert np.array_equal(keyed_record_hashes(shuffled, list(frame.columns), secret, "purpose"), expected)


def test_a_lost_secret_is_not_replaced_while_the_registry_holds_releases(tmp_path):
    # a red team deleted secret.key between two runs: the second, different release of the same records was published
    # without the composition refusal (its fingerprints, keyed with a new secret, matched nothing)
    registry = tmp_path / "registry"
    registry.mkdir()
    (registry / "20261127T000000Z-00000000.parquet").write_bytes(b"an entry")
    with pytest.raises(HomeSecretError, match="restore secret.key") as raised:
        load_or_create_secret(tmp_path)
    assert str(registry) in str(raised.value) and "1 release(s)" in str(raised.value)
    assert not (tmp_path / "secret.key").exists()
    # moved aside on purpose: a new series starts
    registry.rename(tmp_path / "registry.old")
    assert len(load_or_create_secret(tmp_path)) == 32


def test_an_empty_registry_does_not_stop_the_first_secret(tmp_path):
    (tmp_path / "registry").mkdir()
    (tmp_path / "registry" / ".entry.tmp").write_bytes(b"")  # an interrupted write's temporary file
    assert len(load_or_create_secret(tmp_path)) == 32
