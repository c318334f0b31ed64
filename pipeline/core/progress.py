"""Progress of a long computation, reported through a callback (no Dagster: the assets pass one that logs).

A long loop of the core (the (k, ℓ) model's blocks, the posterior adversary's EM rounds) calls
``progress(done, total)`` after each unit of work: ``done`` units of ``total`` finished, ``0 <= done <= total``,
``total >= 1``. The callback must be cheap and must not raise; the core never depends on what it does.
"""

from __future__ import annotations

from collections.abc import Callable

__all__ = ["Progress", "no_progress"]

#: ``progress(done, total)``: ``done`` of ``total`` units finished (integers, ``0 <= done <= total``).
Progress = Callable[[int, int], None]


def no_progress(done: int, total: int) -> None:
    """The default callback: reports nothing."""
