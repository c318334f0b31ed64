"""The home secret: 32 random bytes in ``$MSA_RELEASE_HOME/secret.key`` (mode 0600), created on first use.

Every piece of randomness that protects a release (record order before grouping and SID creation,
SAC~ permutations, SID numbers, release row ids) and every keyed digest (manifest input digest,
release-series registry) derives from it through :mod:`pipeline.core.keyed`. It never leaves the
private home: it is not published, not logged and not shown in Dagster metadata. Losing it means
that later releases cannot be compared with earlier ones by the registry, so a home whose registry
holds releases refuses to create a new one (restore the file, or move the registry aside to start
a new series on purpose); copying it to another home makes that home's releases replay this one's.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from pipeline.errors import MsaReleaseError

__all__ = ["SECRET_FILE", "HomeSecretError", "load_or_create_secret"]

SECRET_FILE = "secret.key"
SECRET_BYTES = 32


class HomeSecretError(MsaReleaseError, RuntimeError):
    """The home secret exists but cannot be used (wrong size or unreadable)."""


def _new_secret() -> bytes:
    """32 bytes from the operating system's CSPRNG (``secrets``); the test suite replaces this one
    function so that its homes are reproducible."""
    return secrets.token_bytes(SECRET_BYTES)


def load_or_create_secret(home: str | Path) -> bytes:
    """Read ``<home>/secret.key``, creating it (0600, atomically) when absent.

    Parameters
    ----------
    home
        The private release home (``$MSA_RELEASE_HOME``).

    Returns
    -------
    bytes
        32 bytes.

    Raises
    ------
    HomeSecretError
        If the file exists with another size, or cannot be read or written; or if it is missing while the home's
        release registry (``<home>/registry``) holds releases: they were fingerprinted with the lost secret, so a
        new one would let a release of the same records through the composition refusal without a word.
    """
    home = Path(home)
    path = home / SECRET_FILE
    try:
        if not path.exists():
            _refuse_a_new_secret_beside_registered_releases(home, path)
            home.mkdir(parents=True, exist_ok=True, mode=0o700)
            temporary = home / f".{SECRET_FILE}.{os.getpid()}.tmp"
            fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            try:
                os.write(fd, _new_secret())
                os.fsync(fd)
            finally:
                os.close(fd)
            try:
                os.link(temporary, path)  # never replaces a secret another process created meanwhile
            except FileExistsError:
                pass
            finally:
                temporary.unlink(missing_ok=True)
        data = path.read_bytes()
    except OSError as error:
        raise HomeSecretError(f"cannot read or create the home secret {path}: {error.strerror or error}") from error
    if len(data) != SECRET_BYTES:
        raise HomeSecretError(
            f"the home secret {path} holds {len(data)} bytes, not {SECRET_BYTES}; restore it from a backup, or remove it "
            "to start a new release series (earlier releases can then no longer be recognised)"
        )
    return data


def _refuse_a_new_secret_beside_registered_releases(home: Path, path: Path) -> None:
    """Raise :class:`HomeSecretError` when ``<home>/registry`` holds a release's entry (the secret was lost, not never
    created)."""
    from pipeline.release.registry import registry_dir  # only when the secret is missing: a rare path

    registry = registry_dir(home)
    try:
        entries = [entry for entry in registry.iterdir() if not entry.name.startswith(".")]
    except FileNotFoundError:
        return
    if entries:
        raise HomeSecretError(
            f"the home secret {path} is missing, but the home's release registry {registry} holds {len(entries)} "
            "release(s) fingerprinted with it; restore secret.key from a backup. To start a new release series on "
            f"purpose, move {registry} aside first: releases made with a new secret cannot be compared with the "
            "earlier ones, so a release of the same records would no longer be refused as a recomposition"
        )


def read_secret_if_present(home: str | Path) -> bytes | None:
    """``<home>/secret.key`` if it exists and is valid, else None (never creates one).

    Used where a missing secret only means "cannot recognise": the audit's check that a raw
    table is the release's input (the manifest publishes an HMAC, not a plain hash)."""
    path = Path(home) / SECRET_FILE
    try:
        data = path.read_bytes()
    except OSError:
        return None
    return data if len(data) == SECRET_BYTES else None
