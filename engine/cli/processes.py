"""``metastore serve --processes N``: N Flight server processes, one port each, supervised.

One server process answers its gRPC calls on many threads that share one GIL; on two cores
under 16 closed-loop clients they spend much of a request waiting for it (bench/HISTORY.md,
"the hot path of do_get"). N processes hold N GILs.

They cannot share one port: Arrow Flight's gRPC server binds without SO_REUSEPORT (Arrow
sets ``GRPC_ARG_ALLOW_REUSEPORT`` to 0, and pyarrow offers no way to change it: a second
server on a taken port fails with "Address already in use"), which also means no other
process can take over a port a server holds. So process ``i`` (from 0) listens on
``PORT + i``, or on any free port of its own with ``--port 0``; clients are spread over the
ports, or a gRPC balancer (Envoy, nginx's ``grpc_pass``) listens in front of them.

Every process is an ordinary ``metastore serve`` (:func:`engine.cli.flight.serve`) of the
same store with the same settings: tokens (and token file, re-read by each), TLS, Flight
SQL and the health action, and its own limits and caches (docs/reference/FLIGHT.md,
"Several processes"). The analyze action (and with it exact subsets) is refused with more
than one process: each would start its own Ray.

Supervision: SIGINT or SIGTERM to this process stops every child gracefully (SIGTERM to
each, which waits for its calls in flight) and then exits 0. A child that exits by itself
(a crash, a port already taken at start-up) stops the others, and this process exits non-zero
naming it: no restart, so a supervisor above (systemd, Kubernetes) sees the failure.
A child whose parent is gone (``kill -9`` of this process) stops itself the same graceful way.
"""

from __future__ import annotations

import multiprocessing as mp
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from engine.exceptions import InvalidArgumentError, MetastoreError

if TYPE_CHECKING:
    from multiprocessing.context import SpawnProcess
    from types import FrameType

__all__ = ["serve_processes"]

#: seconds a child has to finish after SIGTERM before it is killed
STOP_TIMEOUT_S = 60.0
#: how often a child checks that its parent still runs
PARENT_POLL_S = 0.5


def _watch_parent(parent: int) -> None:
    """SIGTERM to this process (a graceful stop) once its parent is gone, however it ended
    (``kill -9`` included): a server process never outlives its supervisor."""
    while os.getppid() == parent:
        time.sleep(PARENT_POLL_S)
    os.kill(os.getpid(), signal.SIGTERM)


def _child(index: int, count: int, port: int, settings: dict[str, Any], parent: int) -> None:
    """One server process: :func:`engine.cli.flight.serve` on ``port``, its lines prefixed."""
    from engine.cli import flight as flight_cli

    threading.Thread(target=_watch_parent, args=(parent,), name="parent-watch", daemon=True).start()
    prefix = f"[process {index + 1}/{count}, pid {os.getpid()}] "

    def echo(line: str) -> None:
        print(prefix + line, file=sys.stderr, flush=True)

    try:
        flight_cli.serve(port=port, echo=echo, **settings)
    except MetastoreError as exc:
        echo(f"error: {exc}")
        sys.exit(1)


def _ports(port: int, count: int) -> list[int]:
    if port == 0:
        return [0] * count
    if port + count - 1 > 65535:
        raise InvalidArgumentError(f"--processes {count} from --port {port} needs ports up to {port + count - 1}: past 65535")
    return [port + i for i in range(count)]


def _stop(children: list[SpawnProcess]) -> None:
    """SIGTERM to every child still running, then wait (kill after :data:`STOP_TIMEOUT_S`)."""
    for child in children:
        if child.is_alive() and child.pid is not None:
            os.kill(child.pid, signal.SIGTERM)
    for child in children:
        child.join(STOP_TIMEOUT_S)
        if child.is_alive():
            child.kill()
            child.join()


def serve_processes(count: int, port: int, settings: dict[str, Any], echo: Callable[[str], None]) -> None:
    """Run ``count`` server processes (ports from ``port``) until SIGINT/SIGTERM; raise when one
    exits by itself. ``settings``: :func:`engine.cli.flight.serve`'s arguments but port and echo."""
    if settings.get("allow_analyze") and settings.get("analyze_roots"):
        raise InvalidArgumentError(
            f"--processes {count} cannot serve the analyze action (each process would start its own Ray): give --no-analyze or drop --analyze-root"
        )
    ports = _ports(port, count)
    ctx = mp.get_context("spawn")  # a fresh interpreter each: no gRPC or Arrow state forked
    children = [ctx.Process(target=_child, args=(i, count, p, settings, os.getpid()), name=f"metastore-serve-{i + 1}") for i, p in enumerate(ports)]
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    shown = "any free ports" if port == 0 else f"ports {ports[0]}-{ports[-1]}"
    echo(f"starting {count} server processes on {shown} (one port each: spread clients over them or put a gRPC balancer in front)")
    failed: SpawnProcess | None = None
    try:
        for child in children:
            child.start()
        while failed is None and not stop.wait(0.25):
            failed = next((c for c in children if not c.is_alive()), None)
        if stop.is_set():
            failed = None  # a Ctrl-C reaches the children too: one may end before this process sees it
    finally:
        _stop(children)
        for s, handler in previous.items():
            signal.signal(s, handler)
    if failed is not None:
        raise MetastoreError(
            f"server process {children.index(failed) + 1}/{count} (pid {failed.pid}) exited with code {failed.exitcode}: stopped the others"
        )
    echo(f"stopped all {count} server processes")
