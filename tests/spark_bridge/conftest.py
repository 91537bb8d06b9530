"""The Spark session of the test run: started once (RayDP on the session's Ray), stopped at the end."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture(scope="session")
def spark(ray_runtime: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    from spark_bridge.session import start_spark, stop_spark

    warehouse = tmp_path_factory.mktemp("spark-warehouse")  # not ./spark-warehouse
    session = start_spark(
        app_name="metastore-tests",
        num_executors=1,
        executor_cores=1,
        executor_memory="1g",
        configs={"spark.sql.warehouse.dir": str(warehouse)},
    )
    try:
        yield session
    finally:
        stop_spark()
