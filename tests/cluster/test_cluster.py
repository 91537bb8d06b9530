"""The job on a real three-node Ray cluster equals the one-node run (tests/cluster/conftest.py).

Run by tests/test_cluster_suite.py in its own process; the tests run in file order
and the ones that remove nodes come last.
"""

from __future__ import annotations

import copy
import threading
import time
from pathlib import Path
from typing import Any

import duckdb
import pyarrow.parquet as pq
import pytest
import ray
import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from engine.api import analyze, open_statistics
from engine.exceptions import NodeLostError
from engine.files import layout
from engine.stats.user import TOP1_SHARE, ZERO_COUNT
from tests.cluster.conftest import PARTITIONS, RayCluster
from tests.engine.test_inherit import assert_same_as_oracle

pytestmark = pytest.mark.cluster

USER = [ZERO_COUNT, TOP1_SHARE]


def _alive() -> set[str]:
    return {n["NodeID"] for n in ray.nodes() if n["Alive"]}


def _gone(node: str, timeout_s: float = 60.0) -> bool:
    """Whether Ray's control store marks ``node`` dead (it notices a removed node within seconds)."""
    deadline = time.monotonic() + timeout_s
    while node in _alive():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.5)
    return True


def _driver_node() -> str:
    return ray.get_runtime_context().get_node_id()


def test_the_driver_is_attached_to_a_three_node_cluster(ray_cluster: RayCluster) -> None:
    assert _alive() == {ray_cluster.head, *ray_cluster.workers}
    assert _driver_node() == ray_cluster.head
    assert ray.cluster_resources()["CPU"] == 3


def test_analyze_spreads_over_the_nodes_and_equals_the_one_node_run(
    ray_cluster: RayCluster, cluster_table: Path, single_node: Path, tmp_path: Path
) -> None:
    store = tmp_path / "store"
    result = analyze(str(cluster_table), str(store), user_statistics=USER)
    assert (result.partitions, result.recomputed) == (PARTITIONS, PARTITIONS)
    # every partition's tasks say where they ran: the scheduler spreads 24 tasks over
    # three 1-CPU nodes (where exactly is Ray's choice: at least two of them)
    assert set(result.nodes) <= _alive()
    assert len(result.nodes) >= 2 and set(result.nodes) & set(ray_cluster.workers), result.nodes
    assert sum(result.nodes.values()) == 2 * PARTITIONS  # two waves a partition
    assert_same_as_oracle(store, single_node, cluster_table)
    n = duckdb.connect().sql(f"select count(*) from read_parquet('{cluster_table}/*/*.parquet')").fetchall()[0][0]
    assert result.rows == n


def test_the_redis_coordinator_runs_on_another_node_with_a_password(ray_cluster: RayCluster) -> None:
    from engine.frequencies.job import start_coordinator

    actor = start_coordinator()
    try:
        info = ray.get(actor.info.remote())
        assert info["node_id"] == ray_cluster.coordinator_node != _driver_node()
        url = redis.connection.parse_url(info["url"])
        assert url["host"] == ray.util.get_node_ip_address() and not url["host"].startswith("127.")
        assert len(url["password"]) == 64 and url["password"] not in info["redacted_url"]
        refused = redis.Redis(host=url["host"], port=url["port"], socket_connect_timeout=2, retry=Retry(NoBackoff(), 0))
        with pytest.raises(redis.exceptions.AuthenticationError):
            refused.ping()

        # a task on the other worker reaches it with the URL it was handed
        @ray.remote(num_cpus=1)
        def ping(u: str) -> tuple[str, bool]:
            return ray.get_runtime_context().get_node_id(), bool(redis.Redis.from_url(u).ping())

        other = next(w for w in ray_cluster.workers if w != ray_cluster.coordinator_node)
        strategy = ray.util.scheduling_strategies.NodeAffinitySchedulingStrategy(node_id=other, soft=False)
        assert ray.get(ping.options(scheduling_strategy=strategy).remote(info["url"])) == (other, True)
    finally:
        ray.get(actor.shutdown.remote())
        ray.kill(actor)


def test_the_redis_strategy_on_the_cluster_equals_the_one_node_reduction(
    ray_cluster: RayCluster, cluster_table: Path, single_node: Path, tmp_path: Path
) -> None:
    from tests.engine.frequencies.test_analyze_redis import exact_rows

    result = analyze(str(cluster_table), str(tmp_path / "store"), frequencies="redis", user_statistics=USER)
    assert result.frequencies and all(r["attempts"] == 1 for r in result.frequencies.values())
    assert len(result.nodes) >= 2, result.nodes  # not all on the driver's node
    a, b = open_statistics(str(single_node), "sales"), open_statistics(str(tmp_path / "store"), "sales")
    assert exact_rows(pq.read_table(a.file_uri(layout.STATISTICS_FILE))) == exact_rows(pq.read_table(b.file_uri(layout.STATISTICS_FILE)))
    fa, fb = (pq.read_table(x.file_uri(layout.FREQUENCIES_FILE)).select(["column", "value", "frequency"]) for x in (a, b))
    assert fa.equals(fb)


def test_the_exact_distributed_sort_on_the_cluster_matches_duckdb(ray_cluster: RayCluster, cluster_table: Path) -> None:
    from engine.quantiles import exact_quantiles
    from tests.engine.test_distributed_sort import duckdb_quantiles, same

    ps = [0.0, 0.01, 0.25, 0.5, 0.75, 0.99, 1.0]
    for column, ranges in (("id", 3), ("amount", 3), ("city", 2)):
        got = exact_quantiles(str(cluster_table), column, ps, ranges=ranges, representation="values")
        want = duckdb_quantiles(cluster_table, column, ps)
        assert all(same(g, w) for g, w in zip(got.values, want)), (column, got.values, want)


def test_inheritance_on_the_cluster(ray_cluster: RayCluster, table_copy: Path, tmp_path: Path) -> None:
    from tests.engine.test_inherit import _oracle, _rewrite

    store = tmp_path / "store"
    first = analyze(str(table_copy), str(store), user_statistics=USER)
    assert first.recomputed == PARTITIONS
    _rewrite(table_copy / "part=03" / "data-0.parquet", lambda t: t.slice(0, t.num_rows - 7))
    second = analyze(str(table_copy), str(store), user_statistics=USER)
    assert (second.inherited, second.recomputed) == (PARTITIONS - 1, 1)
    assert second.recompute_reasons == {"part=03": "data changed"}
    assert sum(second.nodes.values()) == 2  # the changed partition's two waves, nothing else profiled
    assert_same_as_oracle(store, _oracle(table_copy, tmp_path, user_statistics=USER), table_copy)


# ---------------------------------------------------------------- nodes lost (last: they shrink the cluster)
def test_the_flight_analyze_action_on_the_cluster_equals_the_one_node_run(
    ray_cluster: RayCluster, cluster_table: Path, single_node: Path, tmp_path: Path
) -> None:
    """A Flight server in this process (attached to the cluster) runs the analyze action as
    `metastore serve --analyze-root` does: the job's tasks go to the cluster's nodes, its
    statistics equal the one-node run's, and the server answers lookups of them."""
    from flight_server.client import MetastoreClient
    from flight_server.server import MetastoreFlightServer, ServerConfig

    store = tmp_path / "store"
    config = ServerConfig(store=str(store), host="127.0.0.1", port=0, poll_interval=0, analyze_roots=(str(cluster_table.parent),))
    server = MetastoreFlightServer(config)
    try:
        with MetastoreClient(server.location, timeout=120) as client:
            status = client.wait_analyze(client.analyze(str(cluster_table), name="sales"), timeout=600)
            assert status["state"] == "succeeded", status
            result = status["result"]
            assert (result["partitions"], result["recomputed"]) == (PARTITIONS, PARTITIONS)
            assert set(result["nodes"]) <= _alive() and sum(result["nodes"].values()) == 2 * PARTITIONS
            served = client.statistics("sales", ["id"]).to_pylist()
    finally:
        server.shutdown()
    # the server's defaults are the shipped user statistics: the one-node run's (USER)
    assert [u.name for u in USER] == ["zero_count", "top1_share"]
    assert_same_as_oracle(store, single_node, cluster_table)
    want = open_statistics(str(single_node), "sales").column_statistics("id")
    assert (served[0]["row_count"], served[0]["distinct_count"]) == (want["row_count"], want["distinct_count"])


def _stalled_on(victim: str, marker: Path, table: Path) -> Any:
    """The table as a source whose reads stall on ``victim`` (after touching ``marker``):
    a task that lands there is still running when the node is removed; its retry, on
    another node, reads at once."""
    from engine.sources import open_table

    source = open_table(str(table))

    class StallOnVictim(type(source)):  # pickled by value into the tasks
        def read_batches(self, partition, columns, *args, **kwargs):  # noqa: ANN001, ANN002, ANN003, ANN201
            if ray.get_runtime_context().get_node_id() == victim:
                marker.touch()
                time.sleep(300)
            return super().read_batches(partition, columns, *args, **kwargs)

    stalling = copy.copy(source)
    stalling.__class__ = StallOnVictim
    return stalling


@ray.remote(num_cpus=1)
class _Hold:
    """Holds one CPU of a node: with every other node's CPU held, the job's first task can only run on the victim."""

    def ready(self) -> str:
        return ray.get_runtime_context().get_node_id()


def _hold_all_but(victim: str) -> list[Any]:
    """One `_Hold` on every live node but ``victim`` (each node has one CPU), placed and running."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    nodes = sorted(_alive() - {victim})
    holds = [_Hold.options(scheduling_strategy=NodeAffinitySchedulingStrategy(node_id=n, soft=False)).remote() for n in nodes]
    assert sorted(ray.get([h.ready.remote() for h in holds], timeout=120)) == nodes
    return holds


def _remove_when_stalled(ray_cluster: RayCluster, victim: str, marker: Path) -> threading.Thread:
    """Make the job's first task land on ``victim`` (the other nodes' CPUs held), remove the
    victim (raylet and workers killed) as soon as it runs there, then free the other nodes
    for the retries. Ray's own placement would leave the victim idle now and then (seen in CI)."""
    holds = _hold_all_but(victim)

    def remove() -> None:
        deadline = time.monotonic() + 120
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        if marker.exists():
            ray_cluster.remove_worker(victim)
        for hold in holds:
            ray.kill(hold)

    thread = threading.Thread(target=remove, daemon=True)
    thread.start()
    return thread


def _analyze_source(source: Any, store: Path, **options: Any) -> Any:
    from engine.options import AnalyzeOptions
    from engine.runtime.analyze import analyze_source

    return analyze_source(source, str(store), AnalyzeOptions(**options), user_statistics=USER)


def test_a_worker_node_removed_mid_job_and_the_results_are_still_exact(
    ray_cluster: RayCluster, cluster_table: Path, single_node: Path, tmp_path: Path
) -> None:
    victim = next(w for w in ray_cluster.workers if w != ray_cluster.coordinator_node)
    marker = tmp_path / "stalled"
    remover = _remove_when_stalled(ray_cluster, victim, marker)
    store = tmp_path / "store"
    result = _analyze_source(_stalled_on(victim, marker, cluster_table), store)
    remover.join()
    assert marker.exists(), "a task ran on the removed node"
    assert _gone(victim) and victim not in result.nodes  # its tasks were rerun elsewhere
    assert result.partitions == PARTITIONS
    assert_same_as_oracle(store, single_node, cluster_table)
    ray_cluster.add_worker()  # back to three nodes


def test_a_node_lost_for_good_fails_the_job_in_one_line_and_publishes_nothing(ray_cluster: RayCluster, cluster_table: Path, tmp_path: Path) -> None:
    """No retries left (task_retries=0): the job names the partition and the node, and nothing is published."""
    victim = ray_cluster.coordinator_node
    marker = tmp_path / "stalled"
    remover = _remove_when_stalled(ray_cluster, victim, marker)
    store = tmp_path / "store"
    with pytest.raises(NodeLostError) as info:
        _analyze_source(_stalled_on(victim, marker, cluster_table), store, task_retries=0)
    remover.join()
    text = str(info.value)
    assert marker.exists() and _gone(victim)
    assert "\n" not in text and "partition part=" in text and f"Ray node {victim}" in text and "after 0 retries" in text, text
    assert not (store / "sales" / "catalog").exists(), "nothing published"
    runs = store / "sales" / "runs"
    assert not runs.exists() or not any(runs.iterdir()), "the failed job's run directory is removed"
