"""The hot path of do_get (flight_server/hotpath.py): it reads exactly what the protocol parser
reads (or leaves the ticket to it), answers what the general path answers, counts its cache
hits, and skips none of the checks: a hot ticket is still refused to a caller the middleware
refuses (no, wrong, expired or revoked token), and a published state change is seen at once."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.flight as flight
import pytest
from flight_testkit import EXPIRED_TOKEN, GOOD_TOKEN, first_line, raw_client, running_server

from flight_server import requests
from flight_server.hotpath import common_request
from flight_server.protocol import RequestError

# ============================================================== the reading of a ticket
COMMON = [
    {"v": 1, "kind": "statistics", "table": "sales"},
    {"v": 1, "kind": "statistics", "table": "sales", "columns": ["price", "city", "price"]},
    {"v": 1, "kind": "statistics", "table": "sales", "columns": [], "partition": "part=01", "statistics": ["min", "max"]},
    {"v": 1, "kind": "statistics", "table": "sales", "columns": None, "partition": None, "statistics": None},
    {"v": 1, "kind": "statistics", "table": "t", "columns": ["qty.units", "s > x", "ü"]},
    {"v": 1, "kind": "top_frequencies", "table": "sales", "column": "city"},
    {"v": 1, "kind": "top_frequencies", "table": "sales", "column": "city", "k": 0, "typed": True, "partition": "part=00"},
    {"v": 1, "kind": "top_frequencies", "table": "sales", "column": "", "k": 1_000_000},
    {"v": 1, "kind": "histogram", "table": "sales", "column": "price"},
    {"v": 1, "kind": "histogram", "table": "sales", "column": "price", "bins": [0, 0], "partition": "part=03"},
    {"v": 1, "kind": "histogram", "table": "sales", "column": "price", "bins": [5, 100]},
]
LEFT_TO_THE_PARSER = [  # valid, but not a common shape
    {"v": 1, "kind": "statistics", "table": "sales", "partitions": "*"},
    {"v": 1, "kind": "statistics", "table": "sales", "partitions": ["part=00"]},
    {"v": 1, "kind": "statistics", "table": "sales", "columns": ["price"], "where": "price > 1"},
    {"v": 1, "kind": "statistics", "table": "sales", "columns": ["price"], "where": "price > 1", "exact": True},
    {"v": 1, "kind": "statistics", "table": "sales", "at_transaction": 1},
    {"v": 1, "kind": "top_frequencies", "table": "sales", "column": "city", "at_snapshot": "s1"},
    {"v": 1, "kind": "histogram", "table": "sales", "column": "price", "value_range": [1, 2]},
    {"v": 1, "kind": "partitions_matching", "table": "sales", "filter": "price > 1"},
    {"v": 1, "kind": "plan_files", "table": "sales", "filter": "price > 1"},
]
INVALID = [
    {"v": 2, "kind": "statistics", "table": "sales"},
    {"v": True, "kind": "statistics", "table": "sales"},
    {"kind": "statistics", "table": "sales"},
    {"v": 1, "kind": "nope", "table": "sales"},
    {"v": 1, "kind": ["statistics"], "table": "sales"},
    {"v": 1, "kind": "statistics", "table": ""},
    {"v": 1, "kind": "statistics", "table": 3},
    {"v": 1, "kind": "statistics", "table": "x" * 5000},
    {"v": 1, "kind": "statistics", "table": "sales", "columns": "price"},
    {"v": 1, "kind": "statistics", "table": "sales", "columns": ["price", 1]},
    {"v": 1, "kind": "statistics", "table": "sales", "partition": 1},
    {"v": 1, "kind": "statistics", "table": "sales", "partition": "p" * 5000},
    {"v": 1, "kind": "statistics", "table": "sales", "statistics": [None]},
    {"v": 1, "kind": "statistics", "table": "sales", "bogus": 1},
    {"v": 1, "kind": "top_frequencies", "table": "sales"},
    {"v": 1, "kind": "top_frequencies", "table": "sales", "column": "city", "k": -1},
    {"v": 1, "kind": "top_frequencies", "table": "sales", "column": "city", "k": 1_000_001},
    {"v": 1, "kind": "top_frequencies", "table": "sales", "column": "city", "k": 2.0},
    {"v": 1, "kind": "top_frequencies", "table": "sales", "column": "city", "k": True},
    {"v": 1, "kind": "top_frequencies", "table": "sales", "column": "city", "typed": 1},
    {"v": 1, "kind": "histogram", "table": "sales", "column": "price", "bins": [3, 2]},
    {"v": 1, "kind": "histogram", "table": "sales", "column": "price", "bins": [-1, 2]},
    {"v": 1, "kind": "histogram", "table": "sales", "column": "price", "bins": [1, 2, 3]},
    {"v": 1, "kind": "histogram", "table": "sales", "column": "price", "bins": [1, False]},
]
INVALID_BYTES = [
    b"",
    b"[1]",
    b"{",
    b'{"v":1,"kind":"statistics","table":"sales","columns":["\\ud800"]}',  # a lone surrogate
    b'{"v":1,"kind":"top_frequencies","table":"sales","column":"city","k":NaN}',
    b'{"v":1,"kind":"top_frequencies","table":"sales","column":"city","k":1e400}',
    b"\xef\xbb\xbf" + json.dumps(COMMON[0]).encode(),  # a BOM
    b'{"v":1,"kind":"statistics","table":"\xff"}',
    json.dumps({**COMMON[0], "columns": ["c"] * 20_000}).encode(),  # over the size limit
]


def _encodings(doc: dict) -> list[bytes]:
    """The canonical ticket and two other spellings of the same document."""
    return [
        json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode(),
        json.dumps(doc).encode(),  # spaces, \\u escapes
        json.dumps(dict(reversed(list(doc.items())))).encode(),
    ]


@pytest.mark.parametrize("doc", COMMON, ids=lambda d: json.dumps(d)[:60])
def test_a_common_ticket_reads_as_the_parser_reads_it(doc: dict) -> None:
    for raw in _encodings(doc):
        got = common_request(raw)
        assert got is not None, raw
        assert got == requests.parse(raw)


@pytest.mark.parametrize("doc", LEFT_TO_THE_PARSER, ids=lambda d: json.dumps(d)[:60])
def test_other_valid_tickets_are_left_to_the_parser(doc: dict) -> None:
    for raw in _encodings(doc):
        assert common_request(raw) is None
        requests.parse(raw)  # valid


@pytest.mark.parametrize("raw", [*(json.dumps(d).encode() for d in INVALID), *INVALID_BYTES], ids=lambda r: repr(r[:60]))
def test_invalid_tickets_are_left_to_the_parser_which_refuses_them(raw: bytes) -> None:
    assert common_request(raw) is None
    with pytest.raises(RequestError):
        requests.parse(raw)


# ============================================================== the answers
def _ticket(doc: dict) -> flight.Ticket:
    return flight.Ticket(json.dumps(doc, sort_keys=True, separators=(",", ":")).encode())


def _same(a: pa.Table, b: pa.Table) -> bool:
    return a.schema.equals(b.schema, check_metadata=True) and a.combine_chunks().equals(b.combine_chunks())


@pytest.mark.ray
def test_hot_tickets_answer_what_the_lookups_answer(flight_data) -> None:
    docs = [
        {"v": 1, "kind": "statistics", "table": "sales", "columns": ["price", "city", "price"]},
        {"v": 1, "kind": "statistics", "table": "sales", "columns": ["amount"], "statistics": ["min", "max"], "partition": "part=01"},
        {"v": 1, "kind": "statistics", "table": "sales", "columns": ["city", "price"]},
        {"v": 1, "kind": "statistics", "table": "sales"},
        {"v": 1, "kind": "top_frequencies", "table": "sales", "column": "city", "k": 3},
        {"v": 1, "kind": "top_frequencies", "table": "sales", "column": "city", "k": 5},
        {"v": 1, "kind": "top_frequencies", "table": "sales", "column": "city", "k": 5, "typed": True},
        {"v": 1, "kind": "histogram", "table": "sales", "column": "price", "bins": [10, 20]},
        {"v": 1, "kind": "histogram", "table": "sales", "column": "price", "bins": [15, 40]},
    ]
    with running_server(flight_data.store, poll_interval=0) as server:
        client = flight.FlightClient(server.location)
        for doc in docs:
            expected = server.service.execute_unprepared(requests.parse(json.dumps(doc)))
            before = server.results.info()
            for _ in range(3):  # from the ordinary path or a prepared entry (hot), then the cached result (hot)
                assert _same(client.do_get(_ticket(doc)).read_all(), expected), doc
            after = server.results.info()
            assert after["hits"] - before["hits"] == 1, doc  # kept from its second answer
            assert after["misses"] - before["misses"] == 2, doc  # looked up once per call, not again by the general path


@pytest.mark.ray
def test_the_prepared_hits_of_the_hot_path_are_counted_once(flight_data) -> None:
    with running_server(flight_data.store, poll_interval=0) as server:
        client = flight.FlightClient(server.location)
        for columns in (["price"], ["city"], ["amount", "price"], ["id"]):  # distinct tickets, one prepared entry
            client.do_get(_ticket({"v": 1, "kind": "statistics", "table": "sales", "columns": columns})).read_all()
        # 1: seen, 2: built, 3 and 4: hits (the hot path's lookup, not counted again by the general path)
        assert server.service.prepared.info() | {"bytes": 0} == {"entries": 1, "bytes": 0, "hits": 2, "builds": 1}
        health = json.loads(next(iter(client.do_action(flight.Action("health", b"")))).body.to_pybytes())
        assert health["prepared_cache"]["hits"] == 2


# ============================================================== no check skipped
HOT = {"v": 1, "kind": "statistics", "table": "sales", "columns": ["price", "city"]}


def _heat(location: str, token: str) -> None:
    c, opts = raw_client(location, token)
    for _ in range(4):  # a prepared entry, then a cached result
        assert c.do_get(_ticket(HOT), opts).read_all().num_rows == 2


@pytest.mark.ray
def test_a_hot_ticket_is_refused_to_a_caller_without_a_valid_token(flight_server) -> None:
    _heat(flight_server.location, GOOD_TOKEN)
    hits = flight_server.results.info()["hits"]
    for token, reason in [(None, "authentication required"), ("wrong-token-0123", "invalid token"), (EXPIRED_TOKEN, "token expired")]:
        c, opts = raw_client(flight_server.location, token)
        with pytest.raises(flight.FlightUnauthenticatedError) as info:
            c.do_get(_ticket(HOT), opts).read_all()
        assert reason in first_line(info.value)
    assert flight_server.results.info()["hits"] == hits  # refused before do_get: no answer looked up
    _heat(flight_server.location, GOOD_TOKEN)  # and the caller with a token is still served


@pytest.mark.ray
def test_a_hot_ticket_is_refused_once_its_token_is_revoked(flight_data, tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.txt"
    tokens.write_text("alpha-token\nbeta-token\n")
    with running_server(flight_data.store, token_file=str(tokens)) as server:
        _heat(server.location, "alpha-token")
        _heat(server.location, "beta-token")
        tokens.write_text("beta-token\n")  # alpha revoked
        os.utime(tokens, (time.time() + 5, time.time() + 5))
        time.sleep(1.2)  # the file is checked at most once a second
        c, opts = raw_client(server.location, "alpha-token")
        with pytest.raises(flight.FlightUnauthenticatedError, match="invalid token"):
            c.do_get(_ticket(HOT), opts).read_all()
        _heat(server.location, "beta-token")
