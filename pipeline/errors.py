"""One base for every error msa-release raises on purpose, each subclass carrying its exit status.

Exit statuses of the command line (README, "Two commands"): 0 published / PASS; 1 a release refused by a gate or
the registry, or an audit verdict FAIL; 2 an input, a home or a configuration that cannot be used (like a usage
error); 3 another run holds the release lock of the home.

This module imports nothing but the standard library, so the pure core (``pipeline/core``) may derive its errors
from it. An error may name the file and the column it is about (``file``, ``column``: configuration, never a value
of the input). Inside a Dagster step, ``pipeline.failures`` turns it into a ``dagster.Failure`` whose metadata carry
its class, exit status, file and column; the CLI reads that metadata to choose its exit status and message.

References: issue 13 ("one base error; each subclass carries its exit status"); polars ``exceptions.py`` (every
error derives from one base listed in ``__all__``).
"""

from __future__ import annotations

__all__ = [
    "MsaReleaseError",
    "ReleaseLockBusyBase",
    "ReleaseRefusedError",
    "UnusableInputError",
]


class MsaReleaseError(Exception):
    """Base of every error msa-release raises on purpose.

    Attributes
    ----------
    exit_status
        What the CLI exits with (class attribute).
    file, column
        The file and the column the error is about, when it names one (keyword-only; configuration, never a value of
        the input), else None.
    """

    exit_status: int = 1

    def __init__(self, *args: object, file: str | None = None, column: str | None = None) -> None:
        super().__init__(*args)
        self.file = file
        self.column = column


class UnusableInputError(MsaReleaseError):
    """An input file, column configuration, hierarchy, home or release directory that cannot be used (exit 2)."""

    exit_status = 2


class ReleaseRefusedError(MsaReleaseError):
    """A release that may not be published as asked (exit 1): a gate, or the release registry, refused it."""

    exit_status = 1


class ReleaseLockBusyBase(MsaReleaseError):
    """Another run holds the release lock of the home (exit 3)."""

    exit_status = 3
