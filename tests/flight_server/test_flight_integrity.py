"""A damaged table over Flight: listed with its error, requests refused with one line naming the
file (code ``damaged``), the other tables served as before (issue #21, items 8 and 9)."""

from __future__ import annotations

import json
import os
import shutil

import pyarrow.flight as flight
import pytest
from flight_testkit import first_line, raw_client, running_server

from engine.catalog import Catalog
from flight_server.protocol import StatisticsRequest, encode

pytestmark = pytest.mark.ray


@pytest.fixture(scope="module")
def damaged_store(flight_data, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A copy of the Flight tests' store plus: ``truncated`` (the sales table, its table-level
    statistics.parquet cut in half), ``flipped`` (one bit of its histograms.parquet), ``lost``
    (every catalog transaction truncated: its state cannot be read)."""
    root = tmp_path_factory.mktemp("flight_integrity") / "store"
    shutil.copytree(flight_data.store, root)
    out = {"store": str(root), "healthy": flight_data.sales}
    for name in ("truncated", "flipped", "lost"):
        shutil.copytree(root / flight_data.sales, root / name)
    st = Catalog.open(str(root), "truncated").state()
    path = root / "truncated" / st.table_statistics.files.statistics.path
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    out["truncated_file"] = str(path)
    st = Catalog.open(str(root), "flipped").state()
    path = root / "flipped" / st.table_statistics.files.histograms.path
    data = bytearray(path.read_bytes())
    data[len(data) // 3] ^= 0x04
    path.write_bytes(bytes(data))
    out["flipped_file"] = str(path)
    for f in (root / "lost" / "catalog" / "transactions").glob("*.transaction"):
        f.write_bytes(f.read_bytes()[:-3])
    return out


def test_list_flights_lists_a_damaged_table_with_its_error(damaged_store) -> None:
    with running_server(damaged_store["store"], tokens=[], poll_interval=0) as server:
        c, opts = raw_client(server.location)
        infos = {json.loads(i.app_metadata)["table"]: json.loads(i.app_metadata) for i in c.list_flights(b"", opts)}
        assert {damaged_store["healthy"], "wide", "truncated", "flipped", "lost"} <= set(infos)
        assert "error" not in infos[damaged_store["healthy"]] and infos[damaged_store["healthy"]]["rows"] > 0
        # the file named relative to the store (its table first), never by its absolute path (issue #33)
        relative = os.path.relpath(damaged_store["truncated_file"], damaged_store["store"])
        assert relative in infos["truncated"]["error"] and damaged_store["store"] not in infos["truncated"]["error"]
        assert infos["truncated"]["code"] == "damaged"
        assert "catalog of table 'lost'" in infos["lost"]["error"]
        with pytest.raises(flight.FlightServerError) as info:  # a request on it says why, not "unknown table"
            c.do_get(flight.Ticket(encode(StatisticsRequest(table="lost"))), opts).read_all()
        assert "cannot be served" in first_line(info.value) and json.loads(info.value.extra_info)["code"] == "damaged"
        # the typed client shows the error column
        from flight_server.client import MetastoreClient

        with MetastoreClient(server.location, timeout=60) as mc:
            rows = {r["table"]: r for r in mc.tables().to_pylist()}
        assert rows["truncated"]["error"] and rows[damaged_store["healthy"]]["error"] is None


@pytest.mark.parametrize("table, file_key", [("truncated", "truncated_file"), ("flipped", "flipped_file")])
def test_a_request_on_a_damaged_file_is_one_line_naming_it(damaged_store, table, file_key) -> None:
    with running_server(damaged_store["store"], tokens=[], poll_interval=0) as server:
        c, opts = raw_client(server.location)
        if table == "truncated":
            ticket = flight.Ticket(encode(StatisticsRequest(table=table)))
        else:
            ticket = flight.Ticket(json.dumps({"v": 1, "kind": "histogram", "table": table, "column": "price"}).encode())
        with pytest.raises(flight.FlightServerError) as info:
            c.do_get(ticket, opts).read_all()
        line = first_line(info.value)
        relative = os.path.relpath(damaged_store[file_key], damaged_store["store"])
        assert "statistics damaged" in line and relative in line and damaged_store["store"] not in line and "internal" not in line
        assert json.loads(info.value.extra_info)["code"] == "damaged"
        # the healthy table is served as before
        ok = c.do_get(flight.Ticket(encode(StatisticsRequest(table=damaged_store["healthy"]))), opts).read_all()
        assert ok.num_rows > 0
