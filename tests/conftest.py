"""Shared pytest fixtures.

Each fixture is self-contained (its own imports and clean-up) so fixtures can be
added here independently.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

#: the test modules that run first: the longest single tests, so a parallel run
#: (pytest-xdist, `make test`) does not end waiting for one of them on one worker
_FIRST = ("tests/test_cluster_suite.py",)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Order and group the collected tests for `make test`'s two workers (``-n 2 --dist
    loadgroup``); in one process only the order changes.

    - the modules of ``_FIRST`` go to the front: the cluster suite alone takes 1.5-2 minutes;
    - every test that uses the ``spark`` fixture (tests/spark_bridge/conftest.py: a JVM
      through RayDP, ~1 GiB and tens of seconds to start) joins the group ``spark``, which
      runs on one worker, so only one worker starts Spark.
    """
    first = [i for i in items if i.nodeid.startswith(_FIRST)]
    if first:
        items[:] = first + [i for i in items if not i.nodeid.startswith(_FIRST)]
    group = pytest.mark.xdist_group("spark")
    for item in items:
        if "spark" in getattr(item, "fixturenames", ()):
            item.add_marker(group)


@pytest.fixture(scope="session")
def s3_server() -> Iterator[str]:
    """An S3-compatible server (moto, in-process) with an empty bucket named ``bucket``.

    For the whole session the standard AWS environment variables point at it, so
    anything that configures S3 from the environment (engine.fileio, boto3) talks
    to it. Yields the endpoint URL (``http://127.0.0.1:<port>``).
    """
    import boto3
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    try:
        with pytest.MonkeyPatch.context() as mp:
            for name in ("AWS_ENDPOINT_URL_S3", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_REGION"):
                mp.delenv(name, raising=False)
            mp.setenv("AWS_ENDPOINT_URL", endpoint)
            mp.setenv("AWS_ACCESS_KEY_ID", "testing")
            mp.setenv("AWS_SECRET_ACCESS_KEY", "testing")
            mp.setenv("AWS_DEFAULT_REGION", "us-east-1")
            boto3.client("s3", endpoint_url=endpoint).create_bucket(Bucket="bucket")
            yield endpoint
    finally:
        server.stop()


@pytest.fixture(scope="session", autouse=True)
def batched_small_partitions() -> Iterator[None]:
    """Every analyze of the tests batches its partitions into as few tasks as the byte budget
    allows (engine/runtime/batching.py): the test tables' partitions are small, and at the
    job's default of at least two tasks per CPU most of them would have a task of their own.
    The cluster tests (tests/cluster/conftest.py) keep the default: batches of two there."""
    from engine.runtime import batching

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(batching, "TASKS_PER_CPU", 0)
        yield


@pytest.fixture(scope="session")
def ray_runtime() -> Iterator[None]:
    """The session's local Ray runtime (2 CPUs), started once and shut down at the end."""
    from engine.runtime.ray_runtime import ensure_ray, shutdown_ray

    ensure_ray(num_cpus=2)
    try:
        yield None
    finally:
        shutdown_ray()


#: Size of the shared sample table (engine.sample.generate_table).
SAMPLE_ROWS = 60_000
SAMPLE_PARTITIONS = 4


@pytest.fixture(scope="session")
def sample_table(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The sample table (60,000 rows in 4 Hive partitions), written once per session; its path."""
    from engine.sample import generate_table

    root = tmp_path_factory.mktemp("sample_table") / "sales"
    generate_table(str(root), rows=SAMPLE_ROWS, partitions=SAMPLE_PARTITIONS, seed=0)
    return str(root)


@pytest.fixture(scope="session")
def analyzed_sample(ray_runtime: None, sample_table: str, tmp_path_factory: pytest.TempPathFactory):
    """``(table path, store path, AnalyzeResult)`` of one analyze of ``sample_table``
    with the shipped example user statistics (zero_count, top1_share)."""
    from engine.api import analyze
    from engine.stats.user import register_examples, registered

    register_examples()
    store = str(tmp_path_factory.mktemp("sample_store"))
    user = [u for u in registered() if u.name in ("zero_count", "top1_share")]
    result = analyze(sample_table, store=store, user_statistics=user)
    return sample_table, store, result


@pytest.fixture(scope="session")
def two_jobs(ray_runtime: None, tmp_path_factory: pytest.TempPathFactory):
    """A store where the table ``sales`` was analyzed twice with different data.

    ``.store``; ``.first`` (2,000 rows in 2 partitions) and ``.second`` (3,000 rows
    in 3 partitions) are the AnalyzeResults: two catalog transactions to travel between.
    Tests that change the store work on a copy.
    """
    import shutil
    from types import SimpleNamespace

    from engine.api import analyze
    from engine.sample import generate_table

    root = tmp_path_factory.mktemp("two_jobs")
    data, store = root / "sales", root / "store"
    generate_table(str(data), rows=2_000, partitions=2, seed=0)
    first = analyze(str(data), store=str(store), user_statistics=[])
    shutil.rmtree(data)
    generate_table(str(data), rows=3_000, partitions=3, seed=1)
    second = analyze(str(data), store=str(store), user_statistics=[])
    assert first.job_id != second.job_id and first.snapshot != second.snapshot
    return SimpleNamespace(store=str(store), first=first, second=second)


@pytest.fixture(scope="session")
def lake(ray_runtime: None, tmp_path_factory: pytest.TempPathFactory):
    """The conformance matrix's tables (tests/conformance/lake.py), written and analyzed on
    first use into one store shared by every test folder."""
    from tests.conformance.lake import Lake

    root = tmp_path_factory.mktemp("conformance")
    return Lake(root / "tables", str(root / "store"))


@pytest.fixture(scope="session")
def cli(lake):
    """``metastore`` as a fresh process over the conformance store (tests/conformance/lake.py)."""
    from tests.conformance.lake import Cli

    return Cli(lake.store)
