"""The ``msa-release`` command group (the commands register themselves on it, one module each)."""

from __future__ import annotations

import atexit
import os
import sys
import threading
from typing import NoReturn

import click

#: ``-h`` is ``--help`` on the group and on every command (the commands' contexts inherit it).
CONTEXT_SETTINGS = {"help_option_names": ["-h", "--help"]}


class Commands(click.Group):
    """The command group: a project error (:class:`pipeline.errors.MsaReleaseError`) that a command does not report
    itself ends the command with its message on one line and its exit status (2 unusable input, 1 otherwise), as
    click reports its own errors, never with a traceback. Its message is safe to print: the project's errors name
    files, columns, lines and settings, never a value."""

    def invoke(self, ctx: click.Context):
        from pipeline.errors import MsaReleaseError

        try:
            return super().invoke(ctx)
        except MsaReleaseError as error:
            if isinstance(error, click.ClickException):
                raise
            failure = click.ClickException(str(error).strip() or type(error).__name__)
            failure.exit_code = int(getattr(error, "exit_status", 1))
            raise failure from None


@click.group(cls=Commands, context_settings=CONTEXT_SETTINGS)
@click.version_option(package_name="msa-release", prog_name="msa-release", message="%(prog)s %(version)s")
@click.pass_context
def main(context: click.Context) -> None:
    """Publish microdata with several sensitive attributes (strong-rule mixed model, Rating
    baseline, (k, ℓ)-anonymity)."""
    from pipeline.vocabulary import COMMAND_LINE, speaking

    # messages name options (--ell), not run-config keys (ell), for as long as the command runs
    context.with_resource(speaking(COMMAND_LINE))


def entry_point() -> NoReturn:
    """The ``msa-release`` console script (pyproject.toml): run :func:`main`, then leave without the interpreter's
    final garbage collection.

    After a release the process holds a few hundred thousand objects (Great Expectations, Dagster, pandas), and the
    collections of the interpreter's shutdown took 1.0 to 1.9 s of an 8 s Adult release, only to free memory that
    the operating system takes back anyway. So once the command has returned, standard output and error are flushed,
    the ``atexit`` handlers run (logging's, multiprocessing's, ``tempfile``'s finalizers), the streams are flushed
    again and the process ends with the command's exit status (``os._exit``). Everything the commands write is closed
    by then (files by their ``with`` blocks, DuckDB connections and the Dagster instance by theirs).

    The interpreter's own exit is kept (``sys.exit``) when a thread that is not a daemon is still running (the
    interpreter would wait for it, and ``concurrent.futures`` cleans up its executors then) and under a profiler or
    tracer (``python -m cProfile``, coverage: they write their output when the script returns).

    The exit status is click's: 0, 1 for an error (:class:`pipeline.errors.MsaReleaseError`, click's own, Ctrl-C's
    "Aborted!"), 2 for a usage error. An exception that escapes the command propagates as without this function
    (traceback, status 1). Tests call :func:`main` (click's runner) and are not affected.

    First of all, the process's threads are made to share one heap (:func:`pipeline.memory.share_one_heap`).
    """
    from pipeline.memory import share_one_heap

    share_one_heap()
    try:
        main()
        status = 0
    except SystemExit as stop:
        status = _exit_status(stop.code)
    if sys.getprofile() is not None or sys.gettrace() is not None or _other_threads_running():
        sys.exit(status)
    status = _flush(status)
    atexit._run_exitfuncs()
    status = _flush(status)
    os._exit(status)


def _other_threads_running() -> bool:
    """Whether a thread that is not a daemon, other than this one, is alive (the interpreter's exit would join it)."""
    current = threading.current_thread()
    return any(thread is not current and not thread.daemon and thread.is_alive() for thread in threading.enumerate())


def _flush(status: int) -> int:
    """Flush standard output and error; ``status``, or 1 when a stream cannot be written any more (a closed pipe:
    ``msa-release list | head``)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            status = status or 1
    return status


def _exit_status(code: object) -> int:
    """``SystemExit.code`` as the process's exit status, as the interpreter maps it (None → 0; a message → printed
    on stderr, 1)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1
