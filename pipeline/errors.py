"""One base for every error msa-release raises on purpose, each subclass carrying its exit status.

Exit statuses of the command line (README, "Two commands"): 0 published / PASS; 1 a release refused by a gate or
the registry, or an audit verdict FAIL; 2 an input, a home or a configuration that cannot be used (like a usage
error); 3 another run holds the release lock of the home.

This module imports nothing but the standard library, so the pure core (``pipeline/core``) may derive its errors
from it. Errors that cross a Dagster step boundary arrive in the CLI as serialized errors that carry only their
class name: :func:`exit_status_of_class_name` maps those names back to an exit status.

References: issue 13 ("one base error; each subclass carries its exit status"); polars ``exceptions.py`` (every
error derives from one base listed in ``__all__``).
"""

from __future__ import annotations

__all__ = [
    "MsaReleaseError",
    "ReleaseLockBusyBase",
    "ReleaseRefusedError",
    "UnusableInputError",
    "exit_status_of_class_name",
]


class MsaReleaseError(Exception):
    """Base of every error msa-release raises on purpose. ``exit_status``: what the CLI exits with."""

    exit_status: int = 1


class UnusableInputError(MsaReleaseError):
    """An input file, column configuration, hierarchy, home or release directory that cannot be used (exit 2)."""

    exit_status = 2


class ReleaseRefusedError(MsaReleaseError):
    """A release that may not be published as asked (exit 1): a gate, or the release registry, refused it."""

    exit_status = 1


class ReleaseLockBusyBase(MsaReleaseError):
    """Another run holds the release lock of the home (exit 3)."""

    exit_status = 3


def _subclasses(cls: type[MsaReleaseError]) -> list[type[MsaReleaseError]]:
    found: list[type[MsaReleaseError]] = []
    for sub in cls.__subclasses__():
        found += [sub, *_subclasses(sub)]
    return found


def exit_status_of_class_name(name: str) -> int | None:
    """The exit status of the msa-release error class called ``name`` (as a serialized Dagster error names it), or
    None when no such class is loaded. Classes are found among the loaded subclasses of :class:`MsaReleaseError`."""
    for cls in _subclasses(MsaReleaseError):
        if cls.__name__ == name:
            return int(cls.exit_status)
    return None
