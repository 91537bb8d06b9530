"""``kill -9`` of ``metastore serve`` with analyze enabled leaves no Ray process behind (issue #33):
the server's Ray processes (GCS, raylet, its agents and workers) are gone within a bounded wait."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest
from flight_testkit import serve_process

from engine.runtime.reaper import _processes, descendants

pytestmark = pytest.mark.ray


def command(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except OSError:
        return ""


def alive(procs: dict[int, str]) -> dict[int, str]:
    """Those of ``procs`` (pid -> start time) still running: same pid, same start time."""
    table = _processes()
    return {pid: command(pid) for pid, start in procs.items() if pid in table and table[pid][1] == start}


@pytest.mark.skipif(not os.path.isdir("/proc/self/task"), reason="Linux /proc")
def test_kill_9_of_serve_leaves_no_ray_process(tmp_path: Path) -> None:
    root = tmp_path / "lake"
    root.mkdir()
    with serve_process(["--store", str(tmp_path / "store"), "--analyze-root", str(root)]) as (proc, _, _):
        deadline = time.monotonic() + 60
        while True:  # the Ray processes, once the agents are up
            ours = descendants(proc.pid, _processes())
            names = " ".join(command(p) for p in ours)
            if all(n in names for n in ("raylet", "gcs_server", "RuntimeEnvAgent", "engine.runtime.reaper")) or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert "raylet" in names and "gcs_server" in names, names
        assert "engine.runtime.reaper" in names  # the watcher
        time.sleep(1.5)  # the watcher's last look came after every process above started
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
        deadline = time.monotonic() + 30
        while alive(ours) and time.monotonic() < deadline:
            time.sleep(0.5)
        left = alive(ours)
        for pid in left:  # do not leave them to the next test
            os.kill(pid, signal.SIGKILL)
        assert not left, left
