"""Processes that die with a long-running server, however it ends (``kill -9`` included).

Ray kills the processes it starts itself (GCS, raylet, ...) when the thread that started
them dies, but the raylet's agents (``ray::DashboardAgent``, ``ray::RuntimeEnvAgent``) only
watch the raylet, and when the GCS is gone too they hang in their exit path: after a
``kill -9`` of ``metastore serve`` they were left running, reparented to init.

``start_reaper`` starts a small watcher process holding one end of a pipe whose other end
only the server holds. The watcher notes the server's descendant processes twice a second
(pid and start time, from /proc); when the pipe closes (the server ended, by any signal),
it kills those still running (same pid and start time: never a reused pid) and exits.
Linux only (a no-op elsewhere).
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time

POLL_S = 0.5
_reaper: subprocess.Popen[bytes] | None = None


def start_reaper() -> subprocess.Popen[bytes] | None:
    """Watch this process's descendants and kill them when it ends (once per process)."""
    global _reaper
    if _reaper is not None and _reaper.poll() is None:
        return _reaper
    if not os.path.isdir("/proc/self/task"):
        return None
    _reaper = subprocess.Popen(
        [sys.executable, "-m", "engine.runtime.reaper", str(os.getpid())],
        stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        start_new_session=True,  # not in the server's process group: a Ctrl-C there does not stop it first
    )  # fmt: skip
    return _reaper


# ============================================================== the watcher process
def _processes() -> dict[int, tuple[int, str]]:
    """Every process: pid -> (parent pid, start time in clock ticks since boot)."""
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        out[int(name)] = (int(fields[1]), fields[19].decode())  # ppid (4th field), starttime (22nd)
    return out


def descendants(root: int, table: dict[int, tuple[int, str]]) -> dict[int, str]:
    """The descendants of ``root`` in a process table: pid -> start time."""
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    out, pending = {}, list(children.get(root, []))
    while pending:
        pid = pending.pop()
        if pid not in out:
            out[pid] = table[pid][1]
            pending.extend(children.get(pid, []))
    return out


def watch(parent: int, pipe: int) -> None:
    """Note ``parent``'s descendants until ``pipe`` reads end-of-file, then kill them."""
    me = os.getpid()
    known: dict[int, str] = {}
    while True:
        ready, _, _ = select.select([pipe], [], [], POLL_S)
        table = _processes()
        known.update(descendants(parent, table))
        known.pop(me, None)
        if ready and not os.read(pipe, 4096):
            break
    for _ in range(3):  # their own children, started since the last look, are theirs to kill too
        table = _processes()
        alive = {pid for pid, start in known.items() if pid in table and table[pid][1] == start}
        if not alive:
            return
        for pid in alive:
            known.update(descendants(pid, table))
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.2)


if __name__ == "__main__":
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    watch(int(sys.argv[1]), sys.stdin.fileno())
