"""The release lock: one run at a time on a release home (no Dagster here).

Every run that writes the private warehouse or publishes a release holds an exclusive
``fcntl.flock`` on ``$MSA_RELEASE_HOME/release.lock`` from its start to its end: the
``msa-release`` CLI takes it before starting Dagster, and the warehouse IO manager takes it when
a run's resources are set up (so runs launched from the Dagster UI are covered too). A second
run fails fast with :class:`ReleaseLockBusy` ("another release is running (pid …, since …) on
<home>; …") or waits up to a timeout when asked to.

The kernel releases a ``flock`` when its holder exits, however it exits (SIGKILL included), so a
killed run never leaves a stale lock; the file itself stays (deleting a lock file races with
other openers). It holds the holder's pid, start time, host and command, for the message only.
Inside one thread the lock is re-entrant (the CLI holds it and the IO manager of the same run
takes it again); another thread or process conflicts.

Source: issue 6 ("Concurrency and load"); ``flock(2)``.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, UTC
from pathlib import Path

from pipeline.release.failpoints import failpoint
from pipeline.errors import ReleaseLockBusyBase

__all__ = ["LOCK_FILE_NAME", "ReleaseLock", "ReleaseLockBusy", "acquire_release_lock", "lock_holder"]

#: Name of the lock file inside the release home.
LOCK_FILE_NAME = "release.lock"

_registry_guard = threading.Lock()
#: (lock file, thread id) -> [file descriptor, re-entry count]
_held: dict[tuple[str, int], list[int]] = {}


class ReleaseLockBusy(ReleaseLockBusyBase, RuntimeError):
    """Another process (or thread) holds the release lock of this home.

    Attributes
    ----------
    home : Path
        The release home.
    holder : dict
        What the holder wrote in the lock file (``pid``, ``started_at``, ``host``, ``command``);
        empty when unreadable.
    """

    def __init__(self, home: Path, holder: dict, *, waited_seconds: float, hint: str):
        self.home = home
        self.holder = holder
        pid = holder.get("pid", "unknown")
        since = holder.get("started_at", "unknown time")
        waited = f" (waited {waited_seconds:g} s)" if waited_seconds > 0 else ""
        super().__init__(f"another release is running (pid {pid}, since {since}) on {home}{waited}; {hint}")


@dataclass
class ReleaseLock:
    """A held release lock; :meth:`release` (or leaving the ``with`` block) gives it back."""

    path: Path
    _key: tuple[str, int] = field(repr=False)
    _released: bool = field(default=False, repr=False)

    def release(self) -> None:
        """Give the lock back (once; the last re-entry closes the file and unlocks)."""
        if self._released:
            return
        self._released = True
        with _registry_guard:
            entry = _held.get(self._key)
            if entry is None:
                return
            entry[1] -= 1
            if entry[1] == 0:
                del _held[self._key]
                try:
                    fcntl.flock(entry[0], fcntl.LOCK_UN)
                finally:
                    os.close(entry[0])

    def __enter__(self) -> ReleaseLock:
        return self

    def __exit__(self, *exc) -> None:
        self.release()


def lock_holder(home: Path) -> dict:
    """What the current (or last) holder wrote in ``<home>/release.lock``; ``{}`` if unreadable."""
    try:
        return json.loads((Path(home) / LOCK_FILE_NAME).read_text() or "{}")
    except (OSError, ValueError):
        return {}


def acquire_release_lock(
    home: Path | str,
    *,
    wait_seconds: float = 0.0,
    poll_seconds: float = 0.2,
    hint: str = "wait for it or use --wait",
) -> ReleaseLock:
    """Take the exclusive lock of ``home``; on first entry, remove what killed runs left behind.

    Parameters
    ----------
    home
        The release home (``$MSA_RELEASE_HOME``); created (mode 0700) if missing.
    wait_seconds
        0: fail at once when the lock is busy; > 0: retry every ``poll_seconds`` for up to this
        many seconds.
    poll_seconds
        Delay between two attempts while waiting.
    hint
        What the user can do, appended to the busy message.

    Returns
    -------
    ReleaseLock
        Release it (or use it as a context manager) when the run ends.

    Raises
    ------
    ReleaseLockBusy
        Another process or thread holds the lock (after ``wait_seconds``).
    OSError
        The lock file cannot be created (e.g. the home is not writable).
    """
    home = Path(home).expanduser().resolve()
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = home / LOCK_FILE_NAME
    key = (str(path), threading.get_ident())
    with _registry_guard:
        if key in _held:
            _held[key][1] += 1
            return ReleaseLock(path, key)
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    started = time.monotonic()
    try:
        while True:
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                waited = time.monotonic() - started
                if waited >= wait_seconds:
                    raise ReleaseLockBusy(home, lock_holder(home), waited_seconds=wait_seconds, hint=hint) from None
                time.sleep(min(poll_seconds, max(wait_seconds - waited, 0.01)))
    except BaseException:
        os.close(descriptor)
        raise
    holder = {
        "pid": os.getpid(),
        "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "host": socket.gethostname(),
        "command": " ".join(sys.argv)[:500],
    }
    try:
        os.ftruncate(descriptor, 0)
        os.pwrite(descriptor, (json.dumps(holder) + "\n").encode(), 0)
    except BaseException:
        os.close(descriptor)  # closing drops the flock: a failed write (disk full, I/O error) leaves no stale lock
        raise
    with _registry_guard:
        _held[key] = [descriptor, 1]
    lock = ReleaseLock(path, key)
    try:
        failpoint("lock.acquired")
        from pipeline.release.publish import remove_stale_entries  # heavy imports only once locked

        remove_stale_entries(home / "releases")
    except BaseException:
        lock.release()
        raise
    return lock
