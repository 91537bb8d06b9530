"""The coordinator ("monostore"): a Ray actor that owns Redis and the Bloom filters.

In the embedded default it starts a private ``redis-server`` (engine.redis_server)
and stops it when the job ends: on loopback when the whole job runs on one node;
when Ray has more than one alive node, on this node's cluster address with a
generated password (tasks on other nodes must reach it; nothing else may), the
password travelling to the tasks inside the URL, through Ray. Given a URL it uses
that server and only ever touches its own job's keys.

Where the actor runs is chosen, not left to Ray (:func:`placement`): on a node that
advertises the custom resource ``metastore_coordinator`` when there is one (give it
to a node with memory to spare: ``ray start --resources='{"metastore_coordinator": 1}'``),
else on the driver's node, which outlives the job by definition. The Bloom filters live in the
actor's memory, one per column stage, each capped at
``FrequencySettings.bloom_max_bytes``: the coordinator never holds values,
only filter bits, so its memory does not grow with the number of distinct
values beyond that cap.

Each instance draws an ``incarnation`` id in its constructor. A restarted
actor (Ray reruns the constructor) has a new one and an empty filter; the
driver compares incarnations at the end of a stage and reruns the stage when
they differ.
"""

from __future__ import annotations

import os
import time
import uuid
from typing import Any

import numpy as np
import pyarrow as pa
import ray
from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

from engine.frequencies import bloom, redis_ops
from engine.frequencies.redis_ops import Stage
from engine.redis_server import RedisServer, generate_password, redact

#: a custom Ray resource: the node(s) that advertise it host the coordinator (and its Redis)
COORDINATOR_RESOURCE = "metastore_coordinator"


class Monostore:
    """Actor body (plain class: unit-testable without Ray; see :data:`MonostoreActor`)."""

    def __init__(self, redis_url: str | None = None, maxmemory: str = "4gb", cluster: bool = False) -> None:
        """``cluster``: the job's tasks may run on other nodes; an embedded server then
        listens on this node's cluster address, with a password."""
        self.incarnation = uuid.uuid4().hex
        self._server: RedisServer | None = None
        if redis_url is None:
            where = {"host": ray.util.get_node_ip_address(), "password": generate_password()} if cluster else {}
            self._server = RedisServer(maxmemory=maxmemory, die_with_parent=True, **where).start()
            redis_url = self._server.url
            _unnice(self._server.pid)
        self.url = redis_url
        self.client = redis_ops.connect(redis_url)
        self.scripts = redis_ops.Scripts(self.client)
        self._filters: dict[str, bloom.BlockedBloom] = {}
        self._applied: dict[str, set[str]] = {}
        self._bloom_cpu_s = 0.0  # process time spent in bloom_add (the serial part of scenario 1)
        self._stage_peak_anon = 0  # the most private memory seen after a Bloom batch, since the last bloom_open

    # -- identity -------------------------------------------------------------
    def info(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "redacted_url": redact(self.url),
            "incarnation": self.incarnation,
            "pid": os.getpid(),
            "owns_redis": self._server is not None,
            "redis_pid": self._server.pid if self._server else None,
            "node_id": _node_id(),
        }

    # -- stages ---------------------------------------------------------------
    def begin(self, stage: Stage) -> str:
        """Mark a stage as started (the epoch key) and return this coordinator's incarnation."""
        self.client.set(stage.epoch, self.incarnation)
        return self.incarnation

    def intact(self, stage: Stage, incarnation: str) -> bool:
        """Whether the stage's state survived: same coordinator, and Redis still has its epoch."""
        try:
            return incarnation == self.incarnation and self.client.get(stage.epoch) == incarnation.encode()
        except Exception:
            return False

    # -- Bloom filter -----------------------------------------------------------
    def bloom_open(self, stage: Stage, expected: int, fpr: float, max_bytes: int) -> dict[str, float]:
        words = bloom.words_for(expected, fpr, max_bytes)
        self._filters[stage.base] = bloom.BlockedBloom.create(words)
        self._applied[stage.base] = set()
        self._stage_peak_anon = 0
        return {"bytes": words * 8, "expected_fpr": bloom.expected_fpr(expected, words)}

    def bloom_add(self, stage: Stage, token: str, hashes: np.ndarray, forced: np.ndarray) -> int:
        """Test-and-insert a batch; record positives (and ``forced`` hashes: a partition's own repeats) in Redis.

        Returns the positives recorded, or -1 for a batch applied before (a retried task).
        """
        c0 = time.process_time()
        try:
            return self._bloom_add(stage, token, hashes, forced)
        finally:
            self._bloom_cpu_s += time.process_time() - c0
            self._stage_peak_anon = max(self._stage_peak_anon, _anon_bytes())

    def _bloom_add(self, stage: Stage, token: str, hashes: np.ndarray, forced: np.ndarray) -> int:
        filt = self._filters.get(stage.base)
        if filt is None:
            raise RuntimeError(f"no Bloom filter for {stage.base}: the coordinator restarted")
        applied = self._applied[stage.base]
        if token in applied:
            return -1
        present = filt.test_and_add(hashes, distinct=True)  # a partition sends its distinct values
        positives = np.concatenate([hashes[present], forced]) if len(forced) else hashes[present]
        applied.add(token)
        if len(positives):
            self.scripts.increment(stage.positives, stage.done, "bloom:" + token, pa.array(positives, pa.uint64()), None)
        return int(len(positives))

    def bloom_close(self, stage: Stage) -> None:
        self._filters.pop(stage.base, None)
        self._applied.pop(stage.base, None)

    def memory(self) -> dict[str, Any]:
        """Filter bytes held now; the coordinator's resident set, and its private (anonymous) part.

        Batches of hashes arrive as Ray objects mapped from the shared object store:
        the pages read count in the resident set (``rss_shmem``) but belong to the
        object store, which frees them with the objects; ``rss_anon`` is the memory
        this process itself holds.
        """
        out: dict[str, Any] = {
            "filters": sum(f.nbytes for f in self._filters.values()),
            "bloom_cpu_s": self._bloom_cpu_s,
            "stage_peak_anon": self._stage_peak_anon,
        }
        fields = {"VmRSS": "rss", "RssAnon": "rss_anon", "RssShmem": "rss_shmem", "VmHWM": "rss_peak"}
        try:
            with open(f"/proc/{os.getpid()}/status") as f:
                for line in f:
                    name, _, rest = line.partition(":")
                    if name in fields:
                        out[fields[name]] = int(rest.split()[0]) * 1024
        except OSError:
            pass
        out.setdefault("rss", 0)
        return out

    # -- end ----------------------------------------------------------------------
    def cleanup(self, job: str) -> int:
        """Remove every key of ``job``; on an embedded server nothing else lives there."""
        self._filters.clear()
        self._applied.clear()
        try:
            return redis_ops.delete_job_keys(self.client, job)
        except Exception:
            return 0

    def shutdown(self) -> None:
        try:
            self.client.close()
        finally:
            if self._server is not None:
                self._server.stop()
                self._server = None


def _node_id() -> str:
    try:
        return ray.get_runtime_context().get_node_id()
    except Exception:  # not in Ray (unit tests of the plain class)
        return ""


def alive_nodes() -> list[dict[str, Any]]:
    return [n for n in ray.nodes() if n.get("Alive")]


def placement() -> tuple[dict[str, Any], bool]:
    """(actor options, whether the job spans nodes) for this job's coordinator.

    One node: no constraint (there is nowhere else). Several: the nodes advertising
    :data:`COORDINATOR_RESOURCE` if any, else the driver's node (node affinity, not
    soft: a coordinator placed anywhere Ray likes could land on a node the autoscaler
    removes mid-job).
    """
    nodes = alive_nodes()
    if len(nodes) <= 1:
        return {}, False
    if any(n.get("Resources", {}).get(COORDINATOR_RESOURCE, 0) > 0 for n in nodes):
        return {"resources": {COORDINATOR_RESOURCE: 0.001}}, True
    driver = ray.get_runtime_context().get_node_id()
    return {"scheduling_strategy": NodeAffinitySchedulingStrategy(node_id=driver, soft=False)}, True


def _anon_bytes() -> int:
    """This process's private resident memory (RssAnon), 0 where /proc is missing."""
    try:
        with open(f"/proc/{os.getpid()}/status") as f:
            for line in f:
                if line.startswith("RssAnon:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def _unnice(pid: int | None) -> None:
    """Give the embedded redis-server normal CPU priority, where permitted.

    Ray starts worker processes (this actor among them) at niceness 15, and a
    child inherits it; but Redis is the job's one serial stage, which every
    partition task waits on: on a busy machine a niced server starves the whole
    job. Lowering a niceness needs CAP_SYS_NICE; without it the server stays niced.
    """
    if not pid:
        return
    try:
        if os.getpriority(os.PRIO_PROCESS, pid) > 0:
            os.setpriority(os.PRIO_PROCESS, pid, 0)
    except (PermissionError, OSError):
        pass


#: The Ray actor. ``max_restarts`` lets Ray bring it back after a crash; the
#: driver notices (new incarnation) and reruns the stage.
#: Any: Ray's annotations type a remote class's methods as plain methods, without ``.remote``.
MonostoreActor: Any = ray.remote(max_restarts=2, max_task_retries=0, num_cpus=0)(Monostore)
