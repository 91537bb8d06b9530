"""Fixtures of the Flight server tests: two analyzed tables and one in-process server per session.

- ``flight_data``: the sample table (engine.sample.generate_table, 20,000 rows in 4
  partitions) and a 1,000-column wide table, analyzed once on the session's Ray
  into one store;
- ``flight_server``: a MetastoreFlightServer on 127.0.0.1, port 0, with bearer tokens
  (``GOOD_TOKEN``; ``EXPIRED_TOKEN`` configured with an expiry in the past);
- ``client``: a MetastoreClient of that server with the good token;
- ``oracle_sales`` / ``oracle_wide``: engine.lookup.TableStatistics read directly.

Tests that publish new states or stop servers start their own (see flight_testkit).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from flight_testkit import (
    EXPIRED_TOKEN,
    GOOD_TOKEN,
    SALES_PARTITIONS,
    SALES_ROWS,
    WIDE_COLUMNS,
    WIDE_ROWS,
)


@dataclass(frozen=True)
class FlightData:
    store: str
    sales_path: str
    wide_path: str
    sales: str = "sales"
    wide: str = "wide"


@pytest.fixture(scope="session")
def flight_data(ray_runtime: None, tmp_path_factory: pytest.TempPathFactory) -> FlightData:
    from engine.api import analyze
    from engine.sample import generate_table, generate_wide_table

    root = tmp_path_factory.mktemp("flight_data")
    sales, wide, store = root / "sales", root / "wide", root / "store"
    generate_table(str(sales), rows=SALES_ROWS, partitions=SALES_PARTITIONS, seed=0)
    generate_wide_table(str(wide), columns=WIDE_COLUMNS, rows=WIDE_ROWS, partitions=2, seed=0)
    analyze(str(sales), store=str(store), user_statistics=[])
    analyze(str(wide), store=str(store), user_statistics=[])
    return FlightData(store=str(store), sales_path=str(sales), wide_path=str(wide))


@pytest.fixture(scope="session")
def flight_server(flight_data: FlightData) -> Iterator:
    from engine.tokens import Token
    from flight_server.server import MetastoreFlightServer, ServerConfig

    expired = datetime.now(UTC) - timedelta(hours=1)
    config = ServerConfig(
        store=flight_data.store,
        host="127.0.0.1",
        port=0,
        tokens=[Token.of(GOOD_TOKEN), Token.of(EXPIRED_TOKEN, expired)],
        poll_interval=0.5,
        allow_analyze=False,  # this server's store must not change; lifecycle tests start their own
    )
    server = MetastoreFlightServer(config)
    try:
        yield server
    finally:
        server.shutdown()


@pytest.fixture(scope="session")
def client(flight_server) -> Iterator:
    from flight_server.client import MetastoreClient

    with MetastoreClient(flight_server.location, token=GOOD_TOKEN, timeout=60) as c:
        yield c


@pytest.fixture(scope="session")
def oracle_sales(flight_data: FlightData):
    from engine.lookup import open_statistics

    return open_statistics(flight_data.store, flight_data.sales)


@pytest.fixture(scope="session")
def oracle_wide(flight_data: FlightData):
    from engine.lookup import open_statistics

    return open_statistics(flight_data.store, flight_data.wide)


@pytest.fixture(scope="session")
def sales_partitions(flight_data: FlightData) -> dict[str, object]:
    """The raw data of each partition of the sales table (pyarrow Tables), by partition key."""
    import pyarrow.parquet as pq

    out = {}
    for d in sorted(Path(flight_data.sales_path).iterdir()):
        if d.is_dir() and "=" in d.name:
            out[d.name] = pq.read_table(str(d), partitioning=None)
    return out
