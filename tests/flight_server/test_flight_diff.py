"""The ``diff`` action over Flight (loopback): the same document as ``metastore diff -o json``
on a store whose table was analyzed twice (docs/FLIGHT.md)."""

from __future__ import annotations

import json

import pyarrow.flight as flight
import pytest
from click.testing import CliRunner
from flight_testkit import running_server

from engine.cli.console import metastore

TABLE = "sales"


@pytest.fixture(scope="module")
def client(two_jobs):
    from flight_server.client import MetastoreClient

    with running_server(two_jobs.store, poll_interval=0) as server, MetastoreClient(server.location, timeout=60) as c:
        yield c


def _cli(store: str, *args: str) -> dict:
    result = CliRunner().invoke(metastore, ["--store", store, "diff", TABLE, *args, "-o", "json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def test_diff_action_is_the_cli_document(two_jobs, client) -> None:
    got = client.diff(TABLE)
    assert got == _cli(two_jobs.store)
    assert (got["from"]["txn_id"], got["to"]["txn_id"]) == (1, 2)
    assert got["from"]["rows"] == 2_000 and got["to"]["rows"] == 3_000
    assert [p["key"] for p in got["partitions"]["added"]] == ["part=02"]
    price = next(c for c in got["columns"] if c["column"] == "price")
    assert 0.0 <= price["drift"]["ks"] <= 1.0
    one = client.diff(TABLE, from_partition="part=00", to_partition="part=01", columns=["price"], top=3)
    assert one == _cli(two_jobs.store, "--from-partition", "part=00", "--to-partition", "part=01", "-c", "price", "-k", "3")


@pytest.mark.parametrize(
    "body, message",
    [
        ({"table": TABLE, "bogus": 1}, "unknown key"),
        ({"table": TABLE, "from": 0}, "transaction id"),
        ({"table": TABLE, "top": -1}, "top"),
        ({"table": TABLE, "columns": "price"}, "columns"),
        ({"table": "nosuch"}, "unknown table"),
        ({"table": TABLE, "from": 1, "to": 99}, "no state"),
    ],
)
def test_bad_diff_requests_are_errors(client, body: dict, message: str) -> None:
    with pytest.raises(flight.FlightError, match=message):
        client.action("diff", body)


def test_alerts_action_is_show_json(two_jobs, client) -> None:
    result = CliRunner().invoke(metastore, ["--store", two_jobs.store, "show", TABLE, "-o", "json", "--alert-threshold", "high_nulls=0.01"])
    assert result.exit_code == 0, result.output
    shown = json.loads(result.stdout)
    got = client.alerts(TABLE, thresholds={"high_nulls": 0.01})
    assert got["alerts"] == shown["alerts"]
    assert got["columns"] == [{"column": c["column"], "alerts": c["alerts"]} for c in shown["columns"]]
    assert any(c["alerts"] for c in got["columns"])  # the sample table has columns with nulls
    one = client.alerts(TABLE, columns=["price"], partition="part=00")
    assert [c["column"] for c in one["columns"]] == ["price"] and one["partition"] == "part=00"
    for body, message in (
        ({"thresholds": {"nope": 1}}, "unknown alert threshold"),
        ({"partition": "x=1"}, "no partition"),
        ({"bogus": 1}, "unknown key"),
    ):
        with pytest.raises(flight.FlightError, match=message):
            client.action("alerts", {"table": TABLE, **body})
