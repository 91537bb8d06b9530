"""The CLI on table formats: --format, --at-snapshot, --as-of, and show's "stale by N snapshots";
the Flight server's analyze options and staleness action. End to end on Ray (Delta tables
written with deltalake)."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from deltalake import DeltaTable, write_deltalake

from engine.cli.console import metastore
from tests.engine.sources.lake_helpers import batch

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_runtime")]


def run(*args: str):
    return CliRunner().invoke(metastore, list(args))


def one_error_line(result) -> str:
    assert result.exit_code == 1, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.fixture
def delta(tmp_path: Path) -> str:
    uri = str(tmp_path / "orders")
    write_deltalake(uri, batch(1_000, seed=1), partition_by=["part"])
    write_deltalake(uri, batch(500, seed=2, start=1_000), partition_by=["part"], mode="append")
    DeltaTable(uri).delete("id < 100")
    return uri


def test_analyze_an_older_version_then_show_how_stale_it_is(delta: str, tmp_path: Path, ray_runtime: None) -> None:
    store = str(tmp_path / "store")
    result = run("--store", store, "--output", "json", "analyze", delta, "--at-snapshot", "1", "--no-user-stats")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    assert doc["snapshot"] == "1" and doc["rows"] == 1_500
    shown = json.loads(run("--store", store, "--output", "json", "show", "orders").stdout)
    assert shown["source"] == {"table_uri": delta, "snapshot": "1", "stale_by": 1}
    text = run("--store", store, "show", "orders")
    assert "stale by 1 snapshot of the table" in text.stdout
    # the latest version: the delete is applied, and show says it is up to date
    again = json.loads(run("--store", store, "--output", "json", "analyze", delta, "--no-user-stats").stdout)
    assert again["snapshot"] == "2" and again["rows"] == 1_400
    shown = json.loads(run("--store", store, "--output", "json", "show", "orders").stdout)
    assert shown["source"]["stale_by"] == 0


def test_format_override_and_bad_options_are_one_line(delta: str, tmp_path: Path) -> None:
    store = str(tmp_path / "store")
    line = one_error_line(run("--store", store, "analyze", delta, "--at-snapshot", "7"))
    assert "Delta version 7 does not exist" in line and delta in line
    line = one_error_line(run("--store", store, "analyze", delta, "--format", "hudi"))
    assert "no Hudi table here" in line
    line = one_error_line(run("--store", store, "analyze", delta, "--as-of", "yesterday"))
    assert "as_of" in line
    line = one_error_line(run("--store", store, "analyze", delta, "--at-snapshot", "1", "--as-of", "2024-01-01"))
    assert "exclusive" in line
    assert not (tmp_path / "store" / "orders").exists()  # nothing published


def test_flight_analyze_with_source_options_and_staleness(delta: str, tmp_path: Path, ray_runtime: None) -> None:
    """An analyze server of its own (the session's Flight server does not analyze)."""
    from pyarrow import flight

    from flight_server.server import MetastoreFlightServer, ServerConfig

    roots = (str(Path(delta).resolve().parent),)  # analyze is off unless the operator names what it may read
    server = MetastoreFlightServer(ServerConfig(store=str(tmp_path / "store"), port=0, poll_interval=0, analyze_roots=roots))
    client = flight.connect(server.location)

    def action(kind: str, body: dict) -> dict:
        return json.loads(list(client.do_action(flight.Action(kind, json.dumps(body).encode())))[0].body.to_pybytes())

    try:
        job = action("analyze", {"table_uri": delta, "at_snapshot": "1"})
        deadline = time.monotonic() + 300
        while (status := action("analyze_status", {"job": job["job"]}))["state"] not in ("succeeded", "failed"):
            assert time.monotonic() < deadline
            time.sleep(0.2)
        assert status["state"] == "succeeded", status
        assert status["result"]["snapshot"] == "1" and status["result"]["rows"] == 1_500
        assert str(tmp_path / "store") not in json.dumps(status)  # the store named to no client (issue #33)
        action("refresh", {})
        # no tokens: the source location is not told (issue #33); the staleness is
        assert action("staleness", {"table": "orders"}) == {"table": "orders", "snapshot": "1", "stale_by": 1}
        with pytest.raises(flight.FlightError, match="format"):
            action("analyze", {"table_uri": delta, "format": "orc"})
    finally:
        client.close()
        server.shutdown()
