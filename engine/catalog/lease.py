"""A running job's lease on its run directory: gc and expire keep its files (issue #33).

A job's files are referenced by no transaction until it commits, and gc deletes the
unreferenced files older than its grace period: ``metastore expire --grace-period 0s`` during
an analyze deleted the job's new files. So a job holds a lease while it runs,
``runs/<job>/LEASE.json``, naming its process (pid, host) and rewritten every
:data:`HEARTBEAT_S` (the file's modification time is the heartbeat). gc keeps every file of
a run whose lease is fresh. A lease is **stale** (ignored: its job is taken for dead) when its
heartbeat is older than :data:`STALE_AFTER_S`, or at once when it names a process of this
host that no longer runs.

``Store.publish`` takes the lease (if the job has not) before it writes ``manifest.json``,
and deletes it after the commit and the ``CURRENT`` write; ``Store.abort`` stops the
heartbeat before it deletes the run. So a run's lease tells the integrity checks what a
``manifest.json`` with no transaction means: with a lease, a job that has not committed
(yet: fresh; never: stale, its leftovers, which gc collects after the grace period);
without one, a job that committed and let go: its transaction is lost.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime

from engine import fileio
from engine.catalog.paths import RUNS_DIR

__all__ = ["HEARTBEAT_S", "LEASE", "STALE_AFTER_S", "JobLease", "LeaseInfo", "acquire", "leases", "release", "stop"]

log = logging.getLogger("engine.catalog.lease")

LEASE = "LEASE.json"
#: how often a job rewrites its lease
HEARTBEAT_S = 30.0
#: a lease whose heartbeat is older than this is stale (its job is taken for dead)
STALE_AFTER_S = 600.0

_HOST = socket.gethostname()


def lease_uri(table_uri: str, job_id: str) -> str:
    return fileio.join(table_uri, RUNS_DIR, job_id, LEASE)


class JobLease:
    """This process's lease on one job's run: written at once, then rewritten every
    :data:`HEARTBEAT_S` by a daemon thread until :meth:`stop` or :meth:`release`."""

    def __init__(self, table_uri: str, job_id: str) -> None:
        self.uri = lease_uri(table_uri, job_id)
        self.job_id = job_id
        self.started_at = datetime.now(UTC).isoformat()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def _write(self) -> None:
        doc = {"job_id": self.job_id, "pid": os.getpid(), "host": _HOST, "started_at": self.started_at, "heartbeat_at": datetime.now(UTC).isoformat()}
        fileio.write_bytes_atomic(self.uri, json.dumps(doc).encode())

    def start(self) -> JobLease:
        self._write()
        self._thread = threading.Thread(target=self._beat, name=f"lease-{self.job_id}", daemon=True)
        self._thread.start()
        return self

    def _beat(self) -> None:
        while not self._stop.wait(HEARTBEAT_S):
            try:
                self._write()
            except Exception as exc:  # noqa: BLE001 - a missed heartbeat only brings staleness closer
                log.warning("job %s: its lease %s was not renewed: %s", self.job_id, self.uri, exc)

    def stop(self) -> None:
        """No more heartbeats; the file stays (it goes stale)."""
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join()

    def release(self) -> None:
        """No more heartbeats, and the file is deleted (the job committed)."""
        self.stop()
        fs, path = fileio.resolve(self.uri)
        try:
            fs.delete_file(path)
        except FileNotFoundError:
            pass


_held: dict[str, JobLease] = {}
_held_lock = threading.Lock()


def acquire(table_uri: str, job_id: str) -> JobLease:
    """Take the lease of ``job_id``'s run (the one this process holds already, if it does)."""
    uri = lease_uri(table_uri, job_id)
    with _held_lock:
        held = _held.get(uri)
        if held is None:
            held = _held[uri] = JobLease(table_uri, job_id).start()
    return held


def _take(table_uri: str, job_id: str) -> JobLease | None:
    with _held_lock:
        return _held.pop(lease_uri(table_uri, job_id), None)


def stop(table_uri: str, job_id: str) -> None:
    """Stop the heartbeat of this process's lease on the run (before the run is deleted, or
    after a publish failed: the file stays and goes stale)."""
    held = _take(table_uri, job_id)
    if held is not None:
        held.stop()


def release(table_uri: str, job_id: str) -> None:
    """Delete this process's lease on the run (after the job's commit); no-op if it holds none."""
    held = _take(table_uri, job_id)
    if held is not None:
        held.release()


# --------------------------------------------------------------------------- reading


@dataclass(frozen=True)
class LeaseInfo:
    """A lease found below ``runs/``: whose, its heartbeat and whether it is fresh."""

    job_id: str
    uri: str
    heartbeat_ns: int | None  # the file's modification time
    pid: int | None
    host: str
    fresh: bool
    why: str  # why it is stale ("" when fresh)

    def describe(self) -> str:
        beat = datetime.fromtimestamp(self.heartbeat_ns / 1e9, tz=UTC).isoformat(timespec="seconds") if self.heartbeat_ns else "unknown"
        who = f"process {self.pid} on {self.host or 'an unknown host'}" if self.pid else "an unknown process"
        return f"job {self.job_id} ({who}, last heartbeat {beat})"


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # PermissionError: it runs, as another user
        return True
    return True


def _info(entry: fileio.FileEntry, job_id: str, now: float) -> LeaseInfo:
    try:
        doc = json.loads(fileio.read_bytes(entry.uri))
    except (OSError, ValueError):
        doc = {}  # being rewritten, or damaged: its modification time decides
    doc = doc if isinstance(doc, dict) else {}
    pid = doc.get("pid") if isinstance(doc.get("pid"), int) else None
    host = str(doc.get("host") or "")
    why = ""
    if entry.mtime_ns is not None and now - entry.mtime_ns / 1e9 > STALE_AFTER_S:
        why = f"no heartbeat for over {STALE_AFTER_S:g} s"
    elif pid is not None and host == _HOST and not _alive(pid):
        why = f"its process {pid} on this host is gone"
    return LeaseInfo(job_id, entry.uri, entry.mtime_ns, pid, host, not why, why)


def leases(entries: list[fileio.FileEntry], now: float | None = None) -> dict[str, LeaseInfo]:
    """The leases in a listing of ``runs/`` (recursive), by job id; reads each lease found."""
    now = time.time() if now is None else now
    found = {}
    for e in entries:
        parts = e.path.rsplit("/", 3)
        if len(parts) == 4 and parts[3] == LEASE and parts[1] == RUNS_DIR:
            found[parts[2]] = _info(e, parts[2], now)
    return found
