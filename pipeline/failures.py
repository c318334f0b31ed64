"""Failures of a Dagster step as the CLI reads them back (issue 13: "assets turn errors into ``dg.Failure`` with
structured metadata that the CLI reads").

Inside an asset, :func:`structured_failures` turns an error that msa-release raises on purpose
(:class:`pipeline.errors.MsaReleaseError`) into a ``dagster.Failure`` whose description is the error's message and whose
metadata (:data:`FAILURE_KEYS`) say what it is: ``error_class``, ``exit_status``, and the ``file`` and ``column`` it
names (configuration, never a value of the input). An ``OSError`` of the machine (no space left, not writable) becomes
one too, with its ``errno``. :func:`step_failures` reads every failed step of a finished run back, so the CLI chooses
its exit status and message from the metadata rather than from class names or message text.

Dagster wiring (imported by ``assets/`` and ``pipeline/cli``); the framework-free layers raise the errors.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import dagster as dg

from pipeline.errors import MsaReleaseError

__all__ = [
    "FAILURE_KEYS",
    "error_chain",
    "RUN_STEP",
    "StepFailure",
    "failure_of",
    "run_failures",
    "step_failures",
    "structured_failures",
    "with_structured_failures",
    "without_foreign_causes",
]

#: The metadata keys of a structured failure (``errno`` only for an ``OSError``).
FAILURE_KEYS = ("error_class", "exit_status", "file", "column", "errno")

F = TypeVar("F", bound=Callable[..., Any])


def failure_of(error: BaseException, *, file: str | Path | None = None) -> dg.Failure:
    """The ``dagster.Failure`` that reports ``error``: its message as description, :data:`FAILURE_KEYS` as metadata.

    Parameters
    ----------
    error
        A :class:`pipeline.errors.MsaReleaseError` (its class's ``exit_status``, its ``file`` and ``column``) or an
        ``OSError`` (exit status 1, its ``errno``).
    file
        The file the step was reading, named when the error names none itself.
    """
    metadata: dict[str, Any] = {
        "error_class": type(error).__name__,
        "exit_status": int(getattr(error, "exit_status", 1)),
    }
    named = getattr(error, "file", None) or getattr(error, "filename", None) or file
    if named is not None:
        metadata["file"] = str(named)
    column = getattr(error, "column", None)
    if column is not None:
        metadata["column"] = str(column)
    if isinstance(error, OSError) and error.errno is not None:
        metadata["errno"] = int(error.errno)
    return dg.Failure(description=str(error).strip(), metadata=metadata, allow_retries=False)


@contextmanager
def structured_failures(*, file: str | Path | None = None) -> Iterator[None]:
    """Raise :func:`failure_of` (chained to the original) for an ``MsaReleaseError`` or ``OSError`` raised inside.

    The original's chain is cut at the first cause that is neither (:func:`without_foreign_causes`): Dagster stores the
    whole chain, messages included, in the run's event log, and a library's message can quote the input (DuckDB's
    CSV errors quote the offending line, "Original Line: …")."""
    try:
        yield
    except (MsaReleaseError, OSError) as error:
        raise failure_of(error, file=file) from without_foreign_causes(error)


def error_chain(error: BaseException | None) -> list[BaseException]:
    """``error``, its cause, the cause's cause… (``__cause__`` or ``__context__``), each once; [] for None."""
    chain: list[BaseException] = []
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def without_foreign_causes(error: BaseException) -> BaseException:
    """``error`` with its chain of causes (:func:`error_chain`) cut before the first one that is not an
    ``MsaReleaseError`` or an ``OSError`` (whose messages never quote a value: the project's own say which file, column
    or line, an ``OSError`` its errno text and path). Changes the chain in place; returns ``error``."""
    chain = error_chain(error)
    for previous, cause in zip(chain, chain[1:], strict=False):
        if not isinstance(cause, (MsaReleaseError, OSError)):
            previous.__cause__ = None
            previous.__context__ = None
            previous.__suppress_context__ = True
            break
    return error


def with_structured_failures(function: F) -> F:
    """Decorate an asset's function (under ``@dg.asset``) so that its errors leave it as :func:`structured_failures`."""

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with structured_failures():
            return function(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


@dataclass(frozen=True)
class StepFailure:
    """One failed step of a run, as its structured failure describes it.

    Attributes
    ----------
    step
        The step key.
    message
        The failure's description (structured) or the message of the error that stopped the step.
    exit_status
        The ``exit_status`` of a structured failure, else None (an unexpected error, or one raised outside an asset's
        body, e.g. by the IO manager).
    metadata
        The structured failure's metadata (:data:`FAILURE_KEYS`), plain values; empty when not structured.
    error_text
        The whole error chain as text (class names and messages), for failures that carry no metadata.
    """

    step: str
    message: str
    exit_status: int | None
    metadata: dict[str, Any]
    error_text: str


def step_failures(result: Any) -> list[StepFailure]:
    """Every failed step of ``result`` (``dagster.ExecuteInProcessResult``), in event order."""
    failures = []
    for event in result.all_events:
        if not (event.is_step_failure and event.step_failure_data):
            continue
        data = event.step_failure_data
        user = data.user_failure_data
        metadata = {key: getattr(value, "value", value) for key, value in (user.metadata if user else {}).items()}
        texts, error = [], data.error
        while error is not None:
            texts.append(f"{error.cls_name}: {error.message}")
            error = error.cause or error.context
        cause = (data.error.cause or data.error) if data.error else None
        if user is not None and "exit_status" in metadata:
            message, status = str(user.description or "").strip(), int(metadata["exit_status"])
        else:
            message, status = (cause.message.strip() if cause else ""), None
        failures.append(StepFailure(str(event.step_key), message, status, metadata, " ".join(texts)))
    return failures


#: The ``step`` of a :class:`StepFailure` that stopped the run outside any step (its resources could not be set up).
RUN_STEP = "resources"


def _exit_status_of_class() -> dict[str, int]:
    """``exit_status`` of every :class:`pipeline.errors.MsaReleaseError` subclass imported so far, by class name."""
    statuses: dict[str, int] = {}
    pending: list[type] = [MsaReleaseError]
    while pending:
        cls = pending.pop()
        statuses.setdefault(cls.__name__, int(cls.exit_status))  # type: ignore[attr-defined]
        pending.extend(cls.__subclasses__())
    return statuses


def _without_class_prefix(message: str, class_name: str) -> str:
    """``"pipeline.warehouse.WarehouseCorrupt: the warehouse …"`` -> ``"the warehouse …"``."""
    head, separator, rest = message.partition(": ")
    if separator and head.rsplit(".", 1)[-1] == class_name:
        return rest.strip()
    return message.strip()


def run_failures(result: Any) -> list[StepFailure]:
    """Failures that stopped ``result``'s run outside any step: its resources could not be set up (the warehouse IO
    manager refused a damaged or unwritable warehouse, the release lock could not be opened, …).

    Dagster reports those as the run's failure, not as a step's, and an error there cannot carry metadata; the
    exit status is the ``exit_status`` of the first :class:`pipeline.errors.MsaReleaseError` in the error chain
    (found by its class name), else None; the ``errno`` of an ``OSError`` in the chain is read from its text.

    Returns
    -------
    list of StepFailure
        One per failed run (at most one), with ``step`` :data:`RUN_STEP`; empty when the run failed in its steps
        (:func:`step_failures`) or succeeded.
    """
    import re

    statuses = _exit_status_of_class()
    failures = []
    for event in result.all_events:
        if not event.is_run_failure:
            continue
        data = event.event_specific_data
        reason = getattr(getattr(data, "failure_reason", None), "value", None)
        if reason == "STEP_FAILURE":  # the run failed because a step did: step_failures reports it
            continue
        error = getattr(data, "error", None)
        chain = []
        while error is not None:
            chain.append(error)
            error = error.cause or error.context
        if not chain:
            continue
        texts = [f"{e.cls_name}: {e.message.strip()}" for e in chain]
        ours = next((e for e in chain if e.cls_name in statuses), None)
        metadata: dict[str, Any] = {}
        if ours is not None:
            message, status = _without_class_prefix(ours.message, ours.cls_name), statuses[ours.cls_name]
            metadata = {"error_class": ours.cls_name, "exit_status": status}
        else:
            last = chain[-1]
            message, status = _without_class_prefix(last.message, last.cls_name), None
        found = re.search(r"\[Errno (\d+)\]", " ".join(texts))
        if found:
            metadata["errno"] = int(found.group(1))
        failures.append(StepFailure(RUN_STEP, message, status, metadata, " ".join(texts)))
    return failures
