"""Starting or attaching to Ray, once per process.

Honours ``RAY_ADDRESS`` (a cluster); otherwise starts a local Ray with the
machine's cores. The JVM options RayDP needs on Java 17 are set on the job
config here, because a Ray job's JVM options can only be given at ``ray.init``.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from dataclasses import dataclass
from enum import Enum

from engine import config
from engine.exceptions import ServiceError

log = logging.getLogger("metastore.ray")

#: --add-opens the Ray Java workers and RayDP's app master need on Java 17.
JAVA17_OPENS = [
    "--add-opens=java.base/java.lang=ALL-UNNAMED",
    "--add-opens=java.base/java.lang.invoke=ALL-UNNAMED",
    "--add-opens=java.base/java.lang.reflect=ALL-UNNAMED",
    "--add-opens=java.base/java.math=ALL-UNNAMED",  # Ray's Java serializer reaches into BigDecimal
    "--add-opens=java.base/java.io=ALL-UNNAMED",
    "--add-opens=java.base/java.net=ALL-UNNAMED",
    "--add-opens=java.base/java.nio=ALL-UNNAMED",
    "--add-opens=java.base/java.util=ALL-UNNAMED",
    "--add-opens=java.base/java.util.concurrent=ALL-UNNAMED",
    "--add-opens=java.base/java.util.concurrent.atomic=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
    "--add-opens=java.base/sun.nio.cs=ALL-UNNAMED",
    "--add-opens=java.base/sun.security.action=ALL-UNNAMED",
    "--add-opens=java.base/sun.util.calendar=ALL-UNNAMED",
]


#: Allocator settings for local Ray workers (set unless the user set them).
#: - MIMALLOC_PURGE_DELAY=-1: Arrow's allocator (mimalloc) keeps freed pages;
#: - GLIBC_TUNABLES: numpy's allocator (glibc malloc) serves arrays up to 256 MiB from
#:   its heap instead of fresh mmaps and keeps up to 1 GiB of freed heap. Without it a
#:   profile task faulted in ~50 MB per partition (12,500 page faults, ~10% of its CPU)
#:   and the table reductions more.
WORKER_ALLOCATOR_ENV = {
    "MIMALLOC_PURGE_DELAY": "-1",
    "GLIBC_TUNABLES": "glibc.malloc.mmap_threshold=268435456:glibc.malloc.trim_threshold=1073741824",
}

#: The environment local Ray workers inherited (None when attached to a cluster,
#: whose workers inherit nothing from this process).
_worker_environment: dict[str, str] | None = None


def environment_for_tasks(prefixes: tuple[str, ...]) -> dict[str, str]:
    """Variables with these prefixes that this process's tasks would not see otherwise.

    Local workers inherited the environment of ``ray.init``; only what changed
    since needs forwarding (forwarding creates a separate worker pool). Cluster
    workers inherit nothing, so everything is forwarded.
    """
    current = {k: v for k, v in os.environ.items() if k.startswith(prefixes)}
    if _worker_environment is None:
        return current
    inherited = {k: v for k, v in _worker_environment.items() if k.startswith(prefixes)}
    if current == inherited:
        return {}
    return current


def ray_running() -> bool:
    """Whether this process already runs (or is attached to) Ray, without importing Ray:
    a process that never imported it has not started it."""
    ray = sys.modules.get("ray")
    return ray is not None and bool(ray.is_initialized())


def ensure_ray(num_cpus: int | None = None) -> float:
    """Start (or attach to) Ray if this process has not; returns the seconds it took."""
    import ray

    if ray.is_initialized():
        return 0.0
    started = time.perf_counter()
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # a local runtime on loopback
    job_config = ray.job_config.JobConfig(jvm_options=JAVA17_OPENS)
    try:
        address = config.get(config.RAY_ADDRESS)
        if address:
            ray.init(address=address, job_config=job_config, logging_level=logging.WARNING)
        else:
            global _worker_environment
            # local workers inherit this: Arrow's and numpy's allocators keep freed pages
            # instead of returning them to the OS and faulting them in again on the next
            # task. Fresh memory is expensive on VMs (on the machines of this project
            # ~1.6 ms per MB: the bench's largest reduce task spent 1.0 s of its 1.9 CPU-s
            # in the kernel, 0.08 s once its worker's heap was warm). The cost: an idle
            # worker keeps its peak heap (up to 1 GiB of it for numpy). Set
            # MIMALLOC_PURGE_DELAY or GLIBC_TUNABLES yourself to change it.
            for name, value in WORKER_ALLOCATOR_ENV.items():
                os.environ.setdefault(name, value)
            _worker_environment = dict(os.environ)
            if threading.current_thread() is not threading.main_thread():
                # Ray's processes get a parent-death signal tied to the *thread* that starts
                # them: when this thread ends, the raylet and GCS are killed and the next use of
                # Ray kills this process (a long-running caller should start Ray on its main thread)
                log.warning(
                    "starting a local Ray from thread %r: its processes die when that thread ends; "
                    "start Ray on the main thread (engine.runtime.ray_runtime.ensure_ray) in long-running programs",
                    threading.current_thread().name,
                )
            ray.init(
                # "local": always a new runtime of this process. Without an address, ray.init
                # joins the cluster named in /tmp/ray/ray_current_cluster, which any `ray start`
                # or ray.cluster_utils.Cluster on the machine writes (another user's, a test's)
                address="local",
                num_cpus=num_cpus or os.cpu_count() or 1,
                include_dashboard=False,
                job_config=job_config,
                logging_level=logging.WARNING,
                configure_logging=True,
            )
    except Exception as exc:  # ray raises many types; the user needs one line
        raise ServiceError(f"could not start or reach Ray: {exc}") from exc
    _warm_up_workers()
    return time.perf_counter() - started


def _warm_up_workers() -> None:
    """Import the engine in every worker once, as part of starting the runtime.

    A fresh worker pays ~1 s of imports and first kernel calls (pandas,
    pyarrow.compute, datasketches, the compiled hash kernels loaded from numba's
    cache); paying it here keeps it out of the first job.
    """
    import ray

    @ray.remote(num_cpus=1)
    def warm() -> int:
        import numpy as np
        import pyarrow as pa

        from engine.stats import floatcount, radixsort, runmerge, sketches
        from engine.stats.profile import ColumnProfile

        floatcount.count(pa.array([1.5, None, 1.5]))
        sketches.theta_hashes_bytes(pa.array(["a"]))
        sketches.theta_hashes(np.zeros(1, np.int64))
        for dtype in (np.int64, np.float32):  # the sorted view's radix sort: 8- and 4-byte keys
            radixsort.sort(np.zeros(radixsort.RADIX_MIN, dtype))
        radixsort.hash_order(np.zeros(radixsort.RADIX_MIN, np.uint64))  # strings grouped by hash
        runmerge.merge_order(np.zeros(2, np.uint64), runmerge.run_bounds([1, 1]))  # the reductions' merges of hashes
        runmerge.merge_order(np.arange(runmerge.BUCKET_AT, dtype=np.uint64), runmerge.run_bounds([runmerge.BUCKET_AT // 2] * 2))  # bucketed
        for t, values in ((pa.int64(), [1, 2, 2]), (pa.string(), ["a", "b", "b"]), (pa.float64(), [1.5, 2.5, None])):
            p = ColumnProfile("c", t)
            column = pa.array(values, t)
            p.finalize_partition(p.update(p.zero(), column), p.values_of(column), column)
        return os.getpid()

    cpus = int(ray.cluster_resources().get("CPU", 1))
    try:
        ray.get([warm.remote() for _ in range(max(1, min(cpus, 64)))], timeout=120)
    except Exception:  # a warm-up is an optimisation; the job reports real failures
        pass


class RayState(str, Enum):
    NOT_STARTED = "not_started"
    RUNNING = "running"
    DOWN = "down"


@dataclass(frozen=True)
class RayStatus:
    """Whether this process's Ray runtime can run a job, for health reports.

    ``mode`` is ``local`` (this process started Ray) or ``cluster`` (attached through
    ``RAY_ADDRESS``); ``problem`` says why it is down, in one line.
    """

    state: RayState
    mode: str | None = None
    problem: str | None = None

    def as_dict(self) -> dict[str, str | None]:
        return {"state": self.state.value, "mode": self.mode, "problem": self.problem}


def ray_status(timeout: float = 2.0) -> RayStatus:
    """The truth about this process's Ray runtime, cheaply.

    ``ray.is_initialized()`` stays true after Ray's processes die (nothing in the driver
    notices until the next task kills it). A local runtime is checked by polling the
    processes this process started (raylet, GCS, ...: a ``waitpid`` each, no RPC); an
    attached cluster by one key-value lookup in its GCS, bounded by ``timeout``.
    """
    import ray

    if not ray.is_initialized():
        return RayStatus(RayState.NOT_STARTED)
    node = getattr(ray._private.worker, "_global_node", None)
    if node is not None and getattr(node, "head", False):
        dead = sorted({str(kind) for kind, _ in node.dead_processes()})
        if dead:
            return RayStatus(RayState.DOWN, "local", f"Ray's processes exited: {', '.join(dead)}")
        return RayStatus(RayState.RUNNING, "local")
    try:
        gcs = ray._private.worker.global_worker.gcs_client  # type: ignore[attr-defined]  # a private Ray API, unannotated
        gcs.internal_kv_exists(b"metastore-health", b"metastore", timeout=timeout)
    except Exception as exc:  # the GCS client raises several types; one line for the report
        text = " ".join(str(exc).split())[:200] or type(exc).__name__
        return RayStatus(RayState.DOWN, "cluster", f"the Ray cluster does not answer: {text}")
    return RayStatus(RayState.RUNNING, "cluster")


def shutdown_ray() -> None:
    """Disconnect (a local runtime stops with it); the process may then attach to another Ray."""
    import ray

    global _worker_environment
    if ray.is_initialized():
        ray.shutdown()
    _worker_environment = None
