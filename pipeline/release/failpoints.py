"""Named fault-injection points for the crash tests (no Dagster here).

A failpoint is a named place in the code where the process kills itself with SIGKILL when the
environment variable ``MSA_RELEASE_FAILPOINT`` holds exactly that name. Unset (always, outside
the tests), a failpoint costs one dictionary lookup and does nothing. SIGKILL cannot be caught:
no ``finally``, no ``atexit``, no Dagster failure event; the kernel only closes the process's
files and releases its ``flock`` locks, exactly as after a power cut of the process (not of the
machine: unflushed page cache survives).

Names in use (``<schema>.<table>`` is a warehouse asset key such as ``private.raw_records``):

- ``lock.acquired``: the release lock is held, stale staging directories not yet removed.
- ``warehouse.before_store.<schema>.<table>`` / ``warehouse.after_store.<schema>.<table>``:
  around the write of an asset's table into the private warehouse (end of each stage).
- ``warehouse.before_load.<schema>.<table>``: before a stage reads an upstream table (start of
  each stage).
- ``publish.staging_created``, ``publish.table_written.<table>`` (after each table of
  ``release.duckdb`` and its Parquet file), ``publish.database_closed``,
  ``publish.manifest_written``, ``publish.fsynced`` (before the rename), ``publish.renamed``
  (before LATEST), ``publish.latest_staged`` (``.LATEST.tmp`` written, not yet renamed),
  ``publish.latest_replaced`` (LATEST names the new release).
- ``sharded_publish.staging_created``, ``sharded_publish.part_written.<table>.<s:05d>`` (after each part file of a
  sharded release: between parts), ``sharded_publish.parts_written`` (before the manifest files),
  ``sharded_publish.manifest_written`` (after ``manifest.json`` and the extra files), ``sharded_publish.fsynced``,
  ``sharded_publish.renamed`` (before LATEST), ``sharded_publish.latest_staged``, ``sharded_publish.latest_replaced``
  (after LATEST) (:mod:`pipeline.release.sharded_publish`); ``sharded_publish.registry_written`` (after the sharded
  release's registry entry, before its publish starts: ``assets/sharded.py``).
- ``retention.renamed`` (an old release renamed to ``.deleting-<id>``), ``retention.deleting``
  (after its first file is removed), ``retention.done``.

With ``MSA_RELEASE_PAUSEPOINT=<name>=<seconds>`` the process sleeps at that point instead (the
concurrency tests use it to hold the release lock long enough).

Errors rather than kills (a full disk, an I/O error at every call in turn) are injected by the test harness
``tests/io_faults.py``, which needs no point in the code.
"""

from __future__ import annotations

import os
import signal
import time

__all__ = ["ENVIRONMENT_VARIABLE", "PAUSE_ENVIRONMENT_VARIABLE", "failpoint"]

#: Environment variable naming the failpoint at which the process kills itself.
ENVIRONMENT_VARIABLE = "MSA_RELEASE_FAILPOINT"
#: ``<name>=<seconds>``: the process sleeps that long at failpoint ``name`` (concurrency tests).
PAUSE_ENVIRONMENT_VARIABLE = "MSA_RELEASE_PAUSEPOINT"


def failpoint(name: str) -> None:
    """Kill this process with SIGKILL if ``$MSA_RELEASE_FAILPOINT`` equals ``name``.

    Parameters
    ----------
    name
        Dotted name of the point (see the module docstring).
    """
    if os.environ.get(ENVIRONMENT_VARIABLE) == name:
        os.kill(os.getpid(), signal.SIGKILL)
    pause = os.environ.get(PAUSE_ENVIRONMENT_VARIABLE)
    if pause:
        paused_name, _, seconds = pause.rpartition("=")
        if paused_name == name:
            time.sleep(float(seconds))
