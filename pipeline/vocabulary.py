"""The words an error message uses for a setting: the command line's option (``--ell``) or the run config's key
(``ell``), depending on who started the work.

A steward who launched a run from the Dagster launchpad (or whose file the inbox sensor or the schedule released)
edits ``resources.settings.config``; one who typed ``msa-release run`` edits options. Messages built by the reader
(:mod:`pipeline.io.loading`), the settings' validation (:mod:`pipeline.resources`) and the hierarchies
(:mod:`pipeline.core.hierarchies`) name a setting through :func:`setting` and :func:`setting_example`, which follow the
vocabulary in force: :data:`RUN_CONFIG` by default (the code server, the daemon, a job run in-process by a test), and
:data:`COMMAND_LINE` while a command of ``msa-release`` runs (``pipeline/cli/app.py`` sets it for the command; its
in-process Dagster steps run in the same thread and inherit it).

Standard library only (the pure core may import it).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from enum import StrEnum

__all__ = ["COMMAND_LINE", "RUN_CONFIG", "Vocabulary", "current", "setting", "setting_example", "speaking"]


class Vocabulary(StrEnum):
    """Who reads the message: the command line's user or the run config's editor."""

    command_line = "command line"
    run_config = "run config"


COMMAND_LINE = Vocabulary.command_line
RUN_CONFIG = Vocabulary.run_config

#: Options whose name is not their setting's with ``-`` for ``_`` (``pipeline.resources.ReleaseSettings``).
OPTION_OF_SETTING = {
    "hierarchies_dir": "--hierarchies",
    "csv_header": "--header",
    "missing_value_tokens": "--missing-tokens",
    "input_path": "--input",
    "ell_per_attribute": "--ell",
}

_CURRENT: ContextVar[Vocabulary] = ContextVar("msa_release_vocabulary", default=RUN_CONFIG)


def current() -> Vocabulary:
    """The vocabulary in force."""
    return _CURRENT.get()


@contextmanager
def speaking(vocabulary: Vocabulary) -> Iterator[None]:
    """Use ``vocabulary`` for the messages built inside (restored afterwards)."""
    token = _CURRENT.set(vocabulary)
    try:
        yield
    finally:
        _CURRENT.reset(token)


def option_of(name: str) -> str:
    """The command-line option of setting ``name`` (``ell`` -> ``--ell``)."""
    return OPTION_OF_SETTING.get(name, "--" + name.replace("_", "-"))


def setting(name: str) -> str:
    """Setting ``name`` as the reader of the message knows it: ``--ell`` on the command line, ``ell`` in the run
    config (quoted with backticks, as the launchpad's editor shows keys)."""
    return option_of(name) if current() is COMMAND_LINE else f"`{name}`"


def setting_example(name: str, value: str | bool | Sequence[str]) -> str:
    """Setting ``name`` given ``value``, as the reader would write it: ``--column-names a,b,c`` / ``--no-header``
    on the command line, ``column_names: [a, b, c]`` / ``csv_header: false`` in the run config."""
    if current() is COMMAND_LINE:
        if isinstance(value, bool):
            flag = option_of(name)
            return flag if value else "--no-" + flag.removeprefix("--")
        text = ",".join(value) if not isinstance(value, str) else value
        return f"{option_of(name)} {text}"
    if isinstance(value, bool):
        rendered = "true" if value else "false"
    elif isinstance(value, str):
        rendered = value
    else:
        rendered = "[" + ", ".join(value) + "]"
    return f"`{name}: {rendered}`"
