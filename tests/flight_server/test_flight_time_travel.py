"""Time travel over Flight: ``at_transaction`` / ``at_snapshot`` and the ``history`` action, served from
the catalog of a real store (a small engine.sample table analyzed twice on Ray with different data)."""

from __future__ import annotations

import json
import shutil

import pyarrow.flight as flight
import pytest
from flight_testkit import running_server, same, strip

from flight_server.protocol import At

TABLE = "sales"


@pytest.fixture(scope="module")
def tt_client(two_jobs):
    from flight_server.client import MetastoreClient

    with running_server(two_jobs.store, poll_interval=0) as server, MetastoreClient(server.location, timeout=60) as c:
        yield c


def _metadata(table) -> dict[str, str]:
    return {k.decode(): v.decode() for k, v in (table.schema.metadata or {}).items()}


def test_at_transaction_returns_the_older_jobs_statistics(two_jobs, tt_client) -> None:
    from engine.lookup import open_statistics

    old = open_statistics(two_jobs.store, TABLE, at_transaction=1)
    for at in (At(transaction=1), At(snapshot=two_jobs.first.snapshot)):
        got = tt_client.statistics(TABLE, ["price", "category"], at=at)
        assert got.column("row_count").to_pylist() == [2_000, 2_000]
        assert same(strip(got), old.statistics(["price", "category"]))
        md = _metadata(got)
        assert md["metastore.job_id"] == two_jobs.first.job_id and md["metastore.snapshot"] == two_jobs.first.snapshot
        parts = tt_client.statistics(TABLE, ["price"], partitions="*", at=at)
        assert sorted(parts.column("partition").to_pylist()) == ["part=00", "part=01"]
    now = tt_client.statistics(TABLE, ["price"])
    assert now.column("row_count").to_pylist() == [3_000]
    assert _metadata(now)["metastore.job_id"] == two_jobs.second.job_id
    assert tt_client.statistics(TABLE, ["price"], at=At(transaction=2)).column("row_count").to_pylist() == [3_000]
    info = tt_client.flight_info({"v": 1, "kind": "histogram", "table": TABLE, "column": "price", "at_transaction": 1})
    assert info.total_records > 0


def test_unknown_states_are_not_found(tt_client) -> None:
    for at in (At(transaction=99), At(snapshot="nosuch")):
        with pytest.raises(flight.FlightServerError, match="has no state at") as info:
            tt_client.statistics(TABLE, ["price"], at=at)
        assert json.loads(info.value.extra_info)["code"] == "not_found"
    with pytest.raises(flight.FlightServerError, match="unknown table"):
        tt_client.statistics("nosuch", ["price"], at=At(transaction=1))


def test_history_action_returns_the_catalog_history(two_jobs, tt_client) -> None:
    h = tt_client.history(TABLE)
    assert h["complete"] is True
    assert [e["txn_id"] for e in h["history"]] == [2, 1]  # newest first
    assert [e["job_id"] for e in h["history"]] == [two_jobs.second.job_id, two_jobs.first.job_id]
    assert [e["snapshot"] for e in h["history"]] == [two_jobs.second.snapshot, two_jobs.first.snapshot]
    assert [e["current"] for e in h["history"]] == [True, False]
    assert [e["partitions_added"] for e in h["history"]] == [3, 2]


def test_a_table_without_a_catalog_still_refuses_time_travel(two_jobs, tmp_path) -> None:
    from flight_server.client import MetastoreClient

    store = tmp_path / "store"
    shutil.copytree(two_jobs.store, store)
    shutil.rmtree(store / TABLE / "catalog")  # as published before the catalog: CURRENT and manifest.json only
    with running_server(str(store), poll_interval=0) as server, MetastoreClient(server.location, timeout=60) as c:
        assert c.statistics(TABLE, ["price"]).column("row_count").to_pylist() == [3_000]
        with pytest.raises(flight.FlightServerError, match="time travel needs the catalog") as info:
            c.statistics(TABLE, ["price"], at=At(transaction=1))
        assert json.loads(info.value.extra_info)["code"] == "time_travel_unavailable"
        assert c.history(TABLE)["complete"] is False
