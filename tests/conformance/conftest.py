"""Fixtures of the conformance matrix beyond ``lake`` and ``cli`` (tests/conftest.py): one UI
server and one Flight server over the matrix's store."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.conformance.lake import Lake
from tests.conformance.writers import WRITERS


@pytest.fixture(scope="session")
def ui_url(lake: Lake) -> Iterator[str]:
    from engine.ui.app import UiServer

    for name in WRITERS:  # the app lists the store's tables when it starts
        lake.get(name)
    server = UiServer(lake.store)
    url = server.start()
    try:
        yield url.rstrip("/")
    finally:
        server.stop()


@pytest.fixture(scope="session")
def flight_client(lake: Lake) -> Iterator[Any]:
    from flight_server.client import MetastoreClient
    from flight_server.server import MetastoreFlightServer, ServerConfig

    for name in WRITERS:
        lake.get(name)
    server = MetastoreFlightServer(ServerConfig(store=lake.store, host="127.0.0.1", port=0))
    try:
        with MetastoreClient(f"grpc+tcp://127.0.0.1:{server.port}") as client:
            yield client
    finally:
        server.shutdown()
