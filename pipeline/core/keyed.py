"""Keyed (secret-derived) randomness and digests: the only source of randomness that protects a release.

Nothing published (the seed, the input, the release) is enough to replay these: every function
takes a ``secret`` (bytes kept in the private home, see :mod:`pipeline.release.home_secret`) or a key
derived from it, so the same home + the same input + the same configuration give byte-identical
releases, and another home gives an unrelated one.

Record-level keys hash a record's *content* (its configured columns), never its input position,
so a release does not depend on the input row order (issue 12, "release series" (a)).

References: HMAC (RFC 2104) with SHA-256; SipHash-2-4 (Aumasson & Bernstein 2012), which pandas'
``hash_pandas_object`` uses with a 16-byte key.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence

import numpy as np
import pandas as pd

__all__ = [
    "derive_hash_key",
    "input_hmac",
    "keyed_digest",
    "keyed_generator",
    "keyed_order",
    "keyed_record_hashes",
    "record_hashes_with_key",
]

# 64 ASCII characters: a 16-character key over this alphabet is 16 bytes in UTF-8 (96 bits of key)
_KEY_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"


def keyed_digest(secret: bytes, *parts: str | bytes) -> bytes:
    """HMAC-SHA256 of ``parts`` under ``secret`` (each part length-prefixed, so parts never run together).

    Parameters
    ----------
    secret
        The home secret (at least 16 bytes).
    parts
        Strings (UTF-8) or bytes naming the purpose and its inputs, e.g. ``("sid-numbers", "age")``.

    Returns
    -------
    bytes
        32 bytes.

    Raises
    ------
    ValueError
        If ``secret`` is shorter than 16 bytes.
    """
    if len(secret) < 16:
        raise ValueError("the home secret must be at least 16 bytes")
    mac = hmac.new(secret, digestmod=hashlib.sha256)
    for part in parts:
        data = part.encode("utf-8") if isinstance(part, str) else bytes(part)
        mac.update(len(data).to_bytes(8, "big"))
        mac.update(data)
    return mac.digest()


def keyed_generator(secret: bytes, *parts: str | bytes) -> np.random.Generator:
    """A numpy ``Generator`` (PCG64) seeded from :func:`keyed_digest` of ``parts`` (256 bits of seed)."""
    digest = keyed_digest(secret, *parts)
    return np.random.Generator(np.random.PCG64(int.from_bytes(digest, "big")))


def derive_hash_key(secret: bytes, *parts: str | bytes) -> str:
    """A 16-character ASCII key for pandas' SipHash (``hash_pandas_object(hash_key=…)``), derived from ``parts``."""
    digest = keyed_digest(secret, "siphash-key", *parts)
    return "".join(_KEY_ALPHABET[b % 64] for b in digest[:16])


def keyed_record_hashes(records: pd.DataFrame, columns: Sequence[str], secret: bytes, *purpose: str) -> np.ndarray:
    """A keyed 64-bit hash of every record's content (``columns``), independent of row order.

    Parameters
    ----------
    records
        One row per record; must hold ``columns`` (text, categorical or numeric).
    columns
        The columns that make up a record's content (the configured quasi-identifiers and
        sensitive attributes; never ``row_id`` or an input position).
    secret
        The home secret.
    purpose
        Names the use (e.g. ``"record-order"``, ``"sid-order", attribute``): different purposes
        give independent hashes.

    Returns
    -------
    numpy.ndarray
        uint64, one per row of ``records``; equal content gives equal hashes.

    Raises
    ------
    KeyError
        If a column is missing.
    """
    return record_hashes_with_key(records, columns, derive_hash_key(secret, *purpose))


def record_hashes_with_key(records: pd.DataFrame, columns: Sequence[str], hash_key: str) -> np.ndarray:
    """:func:`keyed_record_hashes` with the derived key itself (``derive_hash_key(secret, *purpose)``), for a process
    that must not hold the home secret (a shard worker, a Spark executor): equal results for equal keys.

    Parameters
    ----------
    records, columns
        As :func:`keyed_record_hashes`.
    hash_key
        16 ASCII characters, :func:`derive_hash_key` of the home secret and the purpose.

    Returns
    -------
    numpy.ndarray
        uint64, one per row of ``records``.

    Raises
    ------
    KeyError
        If a column is missing.
    ValueError
        If ``hash_key`` is not 16 bytes in UTF-8.
    """
    if len(hash_key.encode("utf-8")) != 16:
        raise ValueError("a record hash key must be 16 bytes (derive_hash_key)")
    key = hash_key
    frame = records[list(columns)]
    # the hash must depend on values, not on codes. pandas hashes a categorical by hashing its categories and
    # taking them by code, which is exactly what it does for an object column (categorize=True), so text
    # categories are hashed as they are (one hash per distinct value, 12x faster at 10M rows); other categories
    # (numbers) would hash differently from their object values and are converted
    converted = {
        column: frame[column].astype(object)
        for column in frame.columns
        if isinstance(frame[column].dtype, pd.CategoricalDtype) and frame[column].cat.categories.dtype != object
    }
    if converted:
        frame = frame.assign(**converted)
    return pd.util.hash_pandas_object(frame, index=False, hash_key=key, categorize=True).to_numpy(np.uint64)


def keyed_order(records: pd.DataFrame, columns: Sequence[str], secret: bytes, *purpose: str) -> np.ndarray:
    """Positions of ``records`` in a secret-keyed pseudo-random order that depends only on content.

    Records are sorted by :func:`keyed_record_hashes`; records with equal content (equal hashes) keep
    their relative order, which cannot change what is published since they are interchangeable.

    Returns
    -------
    numpy.ndarray
        int64 positions (a permutation of ``range(len(records))``).
    """
    hashes = keyed_record_hashes(records, columns, secret, *purpose)
    return np.argsort(hashes, kind="stable").astype(np.int64)


def input_hmac(secret: bytes, input_sha256: str) -> str:
    """The published fingerprint of an input file: HMAC-SHA256 (home secret) of its SHA-256, hex.

    A plain SHA-256 in a manifest is an oracle: someone who knows the file except one victim's
    cells can confirm a guess by hashing (issue 12, item 5). The keyed digest identifies the
    input only for whoever holds the home secret (the custodian's own audits, the release
    registry), and is stable across releases of one home.

    Parameters
    ----------
    secret
        The home secret (>= 16 bytes).
    input_sha256
        Hex SHA-256 of the input file's bytes.

    Returns
    -------
    str
        64 hex characters.
    """
    return keyed_digest(secret, "input-hmac", input_sha256).hex()
