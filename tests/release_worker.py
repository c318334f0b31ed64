"""Crash-test harness process: imports the pipeline once, then forks one release process per request.

Protocol (one JSON object per line on stdin, one answer per line on stdout):

- ``{"kind": "cli", "args": [...], "env": {...}, "log": path, "kill_after": seconds | null}``:
  fork a child that runs ``msa-release <args>`` (``pipeline.cli.main``) with ``env`` added to its
  environment (e.g. ``MSA_RELEASE_FAILPOINT``) and its stdout/stderr in ``log``; with
  ``kill_after``, the harness SIGKILLs the child after that many seconds if it still runs.
- ``{"kind": "publish", "home": path, "keep": N, "env": {...}, "log": path}``: fork a child that
  runs the publish step alone under the release lock: it republishes the tables of the release
  ``LATEST`` names under a new release id with ``publish_release(..., keep_releases=N)``.

Answer: ``{"returncode": int, "seconds": float}``; a negative return code is the signal that
ended the child (-9 for SIGKILL). Forking after the imports saves the ~5 s of importing Dagster
and Great Expectations per release, so the kill tests can afford many real processes.
"""

import json
import os
import secrets
import signal
import sys
import time
from datetime import datetime, UTC
from pathlib import Path

import duckdb  # noqa: F401  (imported before forking)
import pandas  # noqa: F401

import pipeline.cli  # noqa: F401
import pipeline.definitions  # noqa: F401


def _publish_latest_again(home: Path, keep: int) -> None:
    """The publish step alone: the LATEST release's tables under a new id, under the release lock."""

    from pipeline.release.locking import acquire_release_lock
    from pipeline.release.publish import MANIFEST_JSON_COLUMNS, contract_schemas, publish_release, read_latest

    with acquire_release_lock(home):
        releases_dir = home / "releases"
        latest = read_latest(releases_dir)
        manifest = json.loads((latest / "manifest.json").read_text())
        connection = duckdb.connect(str(latest / "release.duckdb"), read_only=True)
        try:
            schemas = contract_schemas(manifest["quasi_identifiers"], manifest["sensitive_attributes"], model=manifest["model"])
            tables = {name: connection.execute(f'SELECT * FROM "{name}"').df() for name in schemas if name != "release_manifest"}
        finally:
            connection.close()
        now = datetime.now(UTC)
        release_id = f"{now.strftime('%Y%m%dT%H%M%S')}Z-{secrets.token_hex(4)}"
        manifest.update(release_id=release_id, created_at=now.isoformat(timespec="seconds"))
        assert set(MANIFEST_JSON_COLUMNS) <= set(manifest)
        tables = {
            name: frame.astype({c: "Int32" for c, t in schemas[name].items() if t == "INTEGER"}) for name, frame in tables.items()
        }
        publish_release(releases_dir, release_id, tables, schemas, manifest, keep_releases=keep)


def _child(request: dict) -> int:
    os.environ.update(request.get("env", {}))
    log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(log, 1)
    os.dup2(log, 2)
    sys.stdout = os.fdopen(1, "w", buffering=1)
    sys.stderr = os.fdopen(2, "w", buffering=1)
    if request["kind"] == "publish":
        _publish_latest_again(Path(request["home"]), int(request["keep"]))
        return 0
    try:
        pipeline.cli.main(request["args"], prog_name="msa-release", standalone_mode=True)
    except SystemExit as exit_:
        return exit_.code if isinstance(exit_.code, int) else 1
    return 0


def main() -> None:
    for line in sys.stdin:
        request = json.loads(line)
        started = time.monotonic()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                code = _child(request)
            except BaseException:  # noqa: BLE001 - report and exit with 1
                import traceback

                traceback.print_exc()
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        kill_after = request.get("kill_after")
        if kill_after is not None:
            deadline = started + float(kill_after)
            while time.monotonic() < deadline:
                finished, status = os.waitpid(pid, os.WNOHANG)
                if finished:
                    break
                time.sleep(0.01)
            else:
                os.kill(pid, signal.SIGKILL)
                _, status = os.waitpid(pid, 0)
        else:
            _, status = os.waitpid(pid, 0)
        returncode = -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)
        print(json.dumps({"returncode": returncode, "seconds": round(time.monotonic() - started, 3)}), flush=True)


if __name__ == "__main__":
    main()
