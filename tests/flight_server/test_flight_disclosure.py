"""What a Flight client learns of the server's file system: tables by name, never the store's or
a source's absolute path (issue #33, item 11), over loopback, on a server without tokens. The
operator still reads the paths in the server's log."""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.flight as flight
import pytest
from flight_testkit import raw_client, running_server

from engine.catalog import Catalog
from flight_server.protocol import StatisticsRequest, encode

pytestmark = pytest.mark.ray


@pytest.fixture(scope="module")
def disclosure_store(flight_data, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A copy of the Flight tests' store plus ``truncated`` (a damaged table-level statistics file)
    and ``lost`` (every catalog transaction cut: its state cannot be read)."""
    root = tmp_path_factory.mktemp("flight_disclosure") / "store"
    shutil.copytree(flight_data.store, root)
    for name in ("truncated", "lost"):
        shutil.copytree(root / flight_data.sales, root / name)
    st = Catalog.open(str(root), "truncated").state()
    path = root / "truncated" / st.table_statistics.files.statistics.path
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    for f in (root / "lost" / "catalog" / "transactions").glob("*.transaction"):
        f.write_bytes(f.read_bytes()[:-3])
    return {"store": str(root), "truncated_file": str(path), "sources": [flight_data.sales_path, flight_data.wide_path]}


def forbidden(store: dict) -> list[str]:
    """Absolute paths no answer may hold: the store's (as given and resolved) and the sources'."""
    out = set()
    for p in [store["store"], *store["sources"]]:
        out.update({p, os.path.realpath(p), Path(p).as_uri()})
    return sorted(out)


def answers(c: flight.FlightClient, opts: flight.FlightCallOptions, tables: list[str]) -> list[str]:
    """The text of every answer and error a client gets for ``tables``: list_flights, flight infos,
    schemas and their metadata, statistics streams, the actions (errors included)."""
    texts: list[str] = []

    def attempt(fn) -> object:
        try:
            return fn()
        except pa.ArrowException as exc:  # get_schema errors arrive as plain Arrow errors
            texts.append(str(exc))
            texts.append(str(getattr(exc, "extra_info", b"") or b""))
            return None

    for info in c.list_flights(b"", opts):
        texts.append(info.app_metadata.decode())
    for table in tables:
        ticket = flight.Ticket(encode(StatisticsRequest(table=table)))
        info = attempt(lambda t=table: c.get_flight_info(flight.FlightDescriptor.for_path(t), opts))
        if info is not None:
            texts.append(info.app_metadata.decode())
            texts.append(str(info.schema.metadata))
        attempt(lambda t=table: c.get_schema(flight.FlightDescriptor.for_path(t), opts))
        result = attempt(lambda tk=ticket: c.do_get(tk, opts).read_all())
        if result is not None:
            texts.append(str(result.schema.metadata))
            texts.append(json.dumps(result.slice(0, 50).to_pylist(), default=str))
        for action in ("history", "staleness", "refresh"):
            body = json.dumps({"table": table}).encode()
            for r in attempt(lambda a=action, b=body: list(c.do_action(flight.Action(a, b), opts))) or []:
                texts.append(r.body.to_pybytes().decode())
    for r in attempt(lambda: list(c.do_action(flight.Action("health", b""), opts))) or []:
        texts.append(r.body.to_pybytes().decode())
    return texts


def test_no_answer_names_an_absolute_store_or_source_path(flight_data, disclosure_store, caplog) -> None:
    tables = [flight_data.sales, flight_data.wide, "truncated", "lost", "nosuch"]
    with caplog.at_level(logging.WARNING), running_server(disclosure_store["store"], tokens=[], poll_interval=0) as server:
        c, opts = raw_client(server.location)
        texts = answers(c, opts, tables)
    joined = "\n".join(texts)
    assert joined.count("statistics damaged") >= 2 and "truncated" in joined  # the damaged table is named
    assert "cannot be served" in joined  # the lost one too
    for path in forbidden(disclosure_store):
        assert path not in joined, f"{path} in an answer: {[t for t in texts if path in t][:3]}"
    # the damaged file is named relative to the store: its table, run and file
    relative = os.path.relpath(disclosure_store["truncated_file"], disclosure_store["store"])
    assert relative in joined
    # the operator sees the full path in the log
    assert disclosure_store["truncated_file"] in caplog.text


def test_staleness_names_the_source_only_to_authenticated_callers(flight_data, disclosure_store) -> None:
    from flight_testkit import GOOD_TOKEN

    from engine.tokens import Token

    body = json.dumps({"table": flight_data.sales}).encode()
    with running_server(disclosure_store["store"], tokens=[], poll_interval=0) as server:
        c, opts = raw_client(server.location)
        doc = json.loads(next(iter(c.do_action(flight.Action("staleness", body), opts))).body.to_pybytes())
        assert doc["table"] == flight_data.sales and "stale_by" in doc and "table_uri" not in doc
    with running_server(disclosure_store["store"], tokens=[Token.of(GOOD_TOKEN)], poll_interval=0) as server:
        c, opts = raw_client(server.location, GOOD_TOKEN)
        doc = json.loads(next(iter(c.do_action(flight.Action("staleness", body), opts))).body.to_pybytes())
        assert doc["table_uri"] == flight_data.sales_path
