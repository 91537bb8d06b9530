"""A real multi-node Ray cluster for the `cluster` tests, and the single-node run they are compared with.

Why a separate process: a process is connected to one Ray at a time, and the
default run's session holds a local Ray for its whole length (tests/conftest.py,
``ray_runtime``). So these tests are excluded from the default selection
(``-m 'not slow and not cluster'`` in pyproject.toml) and tests/test_cluster_suite.py
runs them, in the default run, as ``pytest -m cluster tests/cluster`` in a child
process. They can be run alone the same way.

In that process, first a local one-node Ray analyzes the table (the reference, then
shut down), then ``ray.cluster_utils.Cluster`` starts a head and two worker nodes on
this machine: three raylets, each with its own CPU, object store (200 MB) and worker
processes, the driver attached through ``RAY_ADDRESS`` as a user's would be. The
second worker advertises ``metastore_coordinator``: the Redis coordinator goes there,
to another node than the driver's.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

#: the table of the cluster tests: 12 partitions (odd ones in two files), every type of the sample
ROWS, PARTITIONS = 24_000, 12
OBJECT_STORE = 200 * 1024 * 1024


@dataclass
class RayCluster:
    cluster: Any  # ray.cluster_utils.Cluster
    head: str  # node ids
    workers: list[str]
    coordinator_node: str  # the worker that advertises metastore_coordinator
    worker_nodes: dict[str, Any] = field(default_factory=dict)  # node id -> the Cluster's node handle

    def add_worker(self) -> str:
        import ray

        handle = self.cluster.add_node(num_cpus=1, object_store_memory=OBJECT_STORE)
        self.cluster.wait_for_nodes()
        node_id = handle.node_id
        self.worker_nodes[node_id] = handle
        self.workers.append(node_id)
        assert any(n["NodeID"] == node_id and n["Alive"] for n in ray.nodes())
        return node_id

    def remove_worker(self, node_id: str) -> None:
        self.cluster.remove_node(self.worker_nodes.pop(node_id), allow_graceful=False)
        self.workers.remove(node_id)


@pytest.fixture(scope="session", autouse=True)
def batched_small_partitions() -> Iterator[None]:
    """The job's default batching here (tests/conftest.py packs whole tables): at two tasks
    per CPU the 12 small partitions on three 1-CPU nodes go two to a task, 6 tasks a wave,
    enough to spread over the nodes."""
    yield


@pytest.fixture(scope="session")
def cluster_table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from engine.sample import generate_table

    data = tmp_path_factory.mktemp("cluster_table") / "sales"
    generate_table(str(data), rows=ROWS, partitions=PARTITIONS, seed=3)
    return data


@pytest.fixture(scope="session")
def single_node(cluster_table: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The store of a one-node analyze of ``cluster_table`` (reduce strategy, the shipped user statistics),
    run in this process (``runtime="local"``: the same files as a one-node Ray run, byte for byte,
    tests/engine/test_determinism.py), so the child starts no Ray of its own before the cluster."""
    import ray

    from engine.api import analyze
    from engine.stats.user import TOP1_SHARE, ZERO_COUNT

    assert not ray.is_initialized(), "the cluster tests run in their own process (tests/test_cluster_suite.py)"
    store = tmp_path_factory.mktemp("single_node") / "store"
    result = analyze(str(cluster_table), str(store), user_statistics=[ZERO_COUNT, TOP1_SHARE], runtime="local")
    assert result.partitions == PARTITIONS and not ray.is_initialized()
    return store


#: Ray's control store marks a node dead after this many failed health checks this far apart
#: (default 5 x 3 s): a removed node's tasks are rerun, or its job fails, that much sooner. A
#: check fails when the raylet does not answer within health_check_timeout_ms (10 s, kept), so
#: a busy machine does not lose a live node.
HEALTH_CHECKS = {"health_check_period_ms": 1000, "health_check_failure_threshold": 3}


@pytest.fixture(scope="session")
def ray_cluster(single_node: Path) -> Iterator[RayCluster]:
    """Head (1 CPU) + 2 workers (1 CPU each), 200 MB object store each; the driver attached by RAY_ADDRESS."""
    import ray
    from ray.cluster_utils import Cluster

    from engine.frequencies.coordinator import COORDINATOR_RESOURCE
    from engine.runtime.ray_runtime import ensure_ray, shutdown_ray

    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, "object_store_memory": OBJECT_STORE, "include_dashboard": False, "_system_config": HEALTH_CHECKS},
    )
    try:
        w1 = cluster.add_node(num_cpus=1, object_store_memory=OBJECT_STORE)
        w2 = cluster.add_node(num_cpus=1, object_store_memory=OBJECT_STORE, resources={COORDINATOR_RESOURCE: 1})
        cluster.wait_for_nodes()
        previous = os.environ.get("RAY_ADDRESS")
        os.environ["RAY_ADDRESS"] = cluster.address  # what a user of a cluster sets (cluster.yaml, README)
        try:
            ensure_ray()
        finally:
            if previous is None:
                os.environ.pop("RAY_ADDRESS", None)
            else:
                os.environ["RAY_ADDRESS"] = previous
        assert sum(1 for n in ray.nodes() if n["Alive"]) == 3
        yield RayCluster(cluster, cluster.head_node.node_id, [w1.node_id, w2.node_id], w2.node_id, {w1.node_id: w1, w2.node_id: w2})
    finally:
        shutdown_ray()
        cluster.shutdown()


@pytest.fixture
def table_copy(cluster_table: Path, tmp_path: Path) -> Path:
    """A copy of the cluster table a test may change."""
    data = tmp_path / "data" / "sales"
    shutil.copytree(cluster_table, data)
    return data
