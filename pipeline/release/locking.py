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

import errno
import fcntl
import json
import math
import os
import socket
import stat
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime, UTC
from pathlib import Path

from pipeline.release.failpoints import failpoint
from pipeline.errors import ReleaseLockBusyBase, UnusableInputError

__all__ = ["LOCK_FILE_NAME", "ReleaseLock", "ReleaseLockBusy", "UnusableLockFile", "acquire_release_lock", "lock_holder"]

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


class UnusableLockFile(UnusableInputError, OSError):
    """``<home>/release.lock`` is a symbolic link or not a regular file: the home cannot be used (exit 2)."""


def lock_holder(home: Path) -> dict:
    """What the current (or last) holder wrote in ``<home>/release.lock``; ``{}`` if unreadable (a symbolic link is
    not followed)."""
    try:
        descriptor = os.open(Path(home) / LOCK_FILE_NAME, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError:
        return {}
    try:
        if not stat.S_ISREG(os.fstat(descriptor).st_mode):
            return {}
        return json.loads(os.pread(descriptor, 65536, 0).decode("utf-8", "replace") or "{}")
    except (OSError, ValueError):
        return {}
    finally:
        os.close(descriptor)


def _open_lock_file(path: Path) -> int:
    """Open (or create, mode 0600) the lock file without following a symbolic link; refuse anything but a regular file.

    A symbolic link planted at ``release.lock`` would make every run create, truncate and write the file it points to
    (``O_NOFOLLOW``); a FIFO would block the open (``O_NONBLOCK``, then refused).

    Raises
    ------
    UnusableLockFile
        A symbolic link, a directory, a FIFO or another special file.
    OSError
        Any other reason the file cannot be opened (e.g. the home is not writable).
    """
    try:
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, 0o600)
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.EISDIR, errno.ENXIO) or path.is_symlink() or path.is_dir():
            kind = "a symbolic link" if path.is_symlink() else "a directory" if path.is_dir() else "not a regular file"
            raise UnusableLockFile(
                f"{path} is {kind}, not the lock file msa-release writes; remove it (no run holds it: msa-release "
                "only ever creates a regular file there) and run again",
                file=str(path),
            ) from error
        raise
    if not stat.S_ISREG(os.fstat(descriptor).st_mode):
        os.close(descriptor)
        raise UnusableLockFile(
            f"{path} is not a regular file (a FIFO or a device), not the lock file msa-release writes; remove it and run again",
            file=str(path),
        )
    os.set_blocking(descriptor, True)
    return descriptor


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
    UnusableLockFile
        ``release.lock`` is a symbolic link (never followed), a directory or another non-regular file.
    ValueError
        ``wait_seconds`` negative, NaN or infinite.
    OSError
        The lock file cannot be created (e.g. the home is not writable).
    """
    if not math.isfinite(wait_seconds) or wait_seconds < 0:
        raise ValueError(f"wait_seconds must be a finite number >= 0, got {wait_seconds!r}")
    home = Path(home).expanduser().resolve()
    home.mkdir(parents=True, exist_ok=True, mode=0o700)
    path = home / LOCK_FILE_NAME
    key = (str(path), threading.get_ident())
    with _registry_guard:
        if key in _held:
            _held[key][1] += 1
            return ReleaseLock(path, key)
    descriptor = _open_lock_file(path)
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
        remove_stale_entries(home / "comparisons")  # comparisons are published with the same protocol
    except BaseException:
        lock.release()
        raise
    return lock
