"""Bad requests get one-line Flight errors and the server keeps serving; a fuzz run of malformed
tickets, descriptors and action bodies leaves it healthy."""

from __future__ import annotations

import functools
import json
import random
import re
import string

import pyarrow as pa
import pyarrow.flight as flight
import pytest
from flight_testkit import GOOD_TOKEN, first_line, raw_client, same, strip

pytestmark = pytest.mark.ray

BAD = [
    # (ticket bytes, words the message must contain, code)
    (b"", "empty request", "bad_request"),
    (b"{", "malformed request JSON", "bad_request"),
    (b"\xff\xfe", "not UTF-8", "bad_request"),
    (b"[1, 2]", "must be a JSON object", "bad_request"),
    (b'{"kind":"statistics","table":"sales"}', "missing protocol version", "bad_request"),
    (b'{"v":2,"kind":"statistics","table":"sales"}', "unsupported protocol version v=2", "bad_request"),
    (b'{"v":"1","kind":"statistics","table":"sales"}', "unsupported protocol version", "bad_request"),
    (b'{"v":1,"kind":"everything","table":"sales"}', "unknown request kind", "bad_request"),
    (b'{"v":1,"kind":"statistics"}', 'missing "table"', "bad_request"),
    (b'{"v":1,"kind":"statistics","table":"nosuch"}', "unknown table 'nosuch'; tables: sales, wide", "not_found"),
    (b'{"v":1,"kind":"statistics","table":"../../etc"}', "unknown table", "not_found"),
    (b'{"v":1,"kind":"statistics","table":"sales","columns":["price","nosuch"]}', "no statistics for column(s): 'nosuch'", "bad_request"),
    (b'{"v":1,"kind":"statistics","table":"sales","columns":"price"}', "must be a list of strings", "bad_request"),
    (b'{"v":1,"kind":"statistics","table":"sales","colums":["price"]}', "unknown key(s) in a statistics request: 'colums'", "bad_request"),
    (b'{"v":1,"kind":"statistics","table":"sales","partition":"part=99"}', "has no partition 'part=99'", "bad_request"),
    (b'{"v":1,"kind":"statistics","table":"sales","partitions":["part=00","x"]}', "has no partition 'x'", "bad_request"),
    (b'{"v":1,"kind":"statistics","table":"sales","partition":"part=00","partitions":["part=01"]}', "not both", "bad_request"),
    (b'{"v":1,"kind":"statistics","table":"sales","statistics":["min","median"]}', "unknown statistic(s): median", "bad_request"),
    (b'{"v":1,"kind":"top_frequencies","table":"sales","column":"city","k":1000001}', "between 0 and 1,000,000", "bad_request"),
    (
        b'{"v":1,"kind":"top_frequencies","table":"sales","column":"city","k":10000000000000000000000000000000000}',
        "between 0 and 1,000,000",
        "bad_request",
    ),
    (b'{"v":1,"kind":"top_frequencies","table":"sales","column":"city","k":-1}', "between 0 and 1,000,000", "bad_request"),
    (b'{"v":1,"kind":"top_frequencies","table":"sales","column":"city","k":2.5}', '"k" must be a whole number', "bad_request"),
    (b'{"v":1,"kind":"top_frequencies","table":"sales","column":"city","k":true}', '"k" must be a whole number', "bad_request"),
    (b'{"v":1,"kind":"top_frequencies","table":"sales","column":"price"}', "has no frequencies", "bad_request"),
    (b'{"v":1,"kind":"top_frequencies","table":"sales","column":"nosuch"}', "has no column 'nosuch'", "bad_request"),
    (b'{"v":1,"kind":"histogram","table":"sales","column":"price","bins":[10,5]}', "bad bin range [10, 5)", "bad_request"),
    (b'{"v":1,"kind":"histogram","table":"sales","column":"price","bins":[-1,5]}', "bad bin range", "bad_request"),
    (b'{"v":1,"kind":"histogram","table":"sales","column":"price","bins":[1]}', '"bins" must be [start, stop]', "bad_request"),
    (b'{"v":1,"kind":"histogram","table":"sales","column":"price","value_range":[20,10]}', "lo 20 is above hi 10", "bad_request"),
    (b'{"v":1,"kind":"histogram","table":"sales","column":"price","value_range":["nan",10]}', "must not be NaN", "bad_request"),
    (b'{"v":1,"kind":"histogram","table":"sales","column":"event_time","value_range":["2024-01-01",null]}', "bad value_range bound", "bad_request"),
    (b'{"v":1,"kind":"histogram","table":"sales","column":"quantity","value_range":[1,NaN]}', "must not contain NaN", "bad_request"),
    (b'{"v":1,"kind":"histogram","table":"sales","column":"city"}', "has no histogram", "bad_request"),
    (b'{"v":1,"kind":"partitions_matching","table":"sales","filter":{"column":"price","op":"~","value":1}}', "unknown filter op", "bad_request"),
    (b'{"v":1,"kind":"partitions_matching","table":"sales","filter":{"column":"price","op":">"}}', "needs a value", "bad_request"),
    (b'{"v":1,"kind":"partitions_matching","table":"sales","filter":{"column":"price","op":"is_null","value":1}}', "takes no value", "bad_request"),
    (b'{"v":1,"kind":"partitions_matching","table":"sales","filter":{"column":"nosuch","op":">","value":1}}', "nosuch", "bad_request"),
    (
        b'{"v":1,"kind":"partitions_matching","table":"sales","filter":{"column":"city","op":">","value":3}}',
        "the number 3 does not fit column 'city' (string)",
        "bad_request",
    ),
    (
        b'{"v":1,"kind":"partitions_matching","table":"sales","filter":{"column":"quantity","op":">","value":"ten"}}',
        "'ten' is not a value of column 'quantity' (int32)",
        "bad_request",
    ),
    (
        b'{"v":1,"kind":"partitions_matching","table":"sales","filter":"price > 5 and (city = \'x\'"}',
        "'(' is never closed at character 15",
        "bad_request",
    ),
    (b'{"v":1,"kind":"partitions_matching","table":"sales","filter":"price ~ 5"}', "at character 7 in 'price ~ 5'", "bad_request"),
    (
        b'{"v":1,"kind":"partitions_matching","table":"sales","filter":"price > 5 or pricee < 1"}',
        "unknown column 'pricee' at character 14",
        "bad_request",
    ),
    (b'{"v":1,"kind":"partitions_matching","table":"sales","filter":"quantity > 1.5"}', "1.5 is not a whole number", "bad_request"),
    (b'{"v":1,"kind":"partitions_matching","table":"sales","filter":""}', '"filter" must not be empty', "bad_request"),
    (b'{"v":1,"kind":"statistics","table":"sales","at_transaction":-1}', '"at_transaction" must be a whole number', "bad_request"),
    (b"[" * 50_000 + b"]" * 50_000, "request too large", "bad_request"),
    (b"[" * 30_000 + b"]" * 30_000, "nested too deeply", "bad_request"),
    # value_range bounds that do not fit the column's type (issue #21: these were internal errors)
    (
        b'{"v":1,"kind":"histogram","table":"sales","column":"id","value_range":[9223372036854775808,null]}',
        "value_range bound 9223372036854775808 does not fit column 'id' (int64): outside -9223372036854775808..9223372036854775807",
        "bad_request",
    ),
    (
        b'{"v":1,"kind":"histogram","table":"sales","column":"id","value_range":[null,-9223372036854775809]}',
        "does not fit column 'id' (int64)",
        "bad_request",
    ),
    (
        b'{"v":1,"kind":"histogram","table":"sales","column":"quantity","value_range":[1e308,null]}',
        "value_range bound 1e+308 does not fit column 'quantity' (int32)",
        "bad_request",
    ),
    (
        b'{"v":1,"kind":"histogram","table":"sales","column":"quantity","value_range":[1.5,null]}',
        "value_range bound 1.5 does not fit column 'quantity' (int32)",
        "bad_request",
    ),
    (
        b'{"v":1,"kind":"histogram","table":"sales","column":"score","value_range":[null,1e308]}',
        "value_range bound 1e+308 does not fit column 'score' (float): out of its range",
        "bad_request",
    ),
    (
        b'{"v":1,"kind":"histogram","table":"sales","column":"amount","value_range":[100000000000000000000000000000,null]}',
        "value_range bound 100000000000000000000000000000 does not fit column 'amount' (decimal128(18, 2))",
        "bad_request",
    ),
    (
        b'{"v":1,"kind":"histogram","table":"sales","column":"amount","value_range":[1e308,null]}',
        "does not fit column 'amount' (decimal128(18, 2))",
        "bad_request",
    ),
    (
        b'{"v":1,"kind":"histogram","table":"sales","column":"amount","value_range":["100000000000000000000000000000",null]}',
        "bad value_range bound",
        "bad_request",
    ),
    (
        b'{"v":1,"kind":"histogram","table":"sales","column":"event_date","value_range":[null,9223372036854775807]}',
        "bad value_range bound",
        "bad_request",
    ),
    # JSON numbers beyond float64 (Python's reader made them infinity)
    (
        b'{"v":1,"kind":"histogram","table":"sales","column":"price","value_range":[1e400,null]}',
        "number 1e400 is out of range (beyond float64)",
        "bad_request",
    ),
    (
        b'{"v":1,"kind":"partitions_matching","table":"sales","filter":{"column":"price","op":">","value":-1e400}}',
        "number -1e400 is out of range",
        "bad_request",
    ),
    (b'{"v":1,"kind":"top_frequencies","table":"sales","column":"city","k":1e400}', "number 1e400 is out of range", "bad_request"),
    # lone surrogates as names
    (b'{"v":1,"kind":"top_frequencies","table":"sales","column":"\\ud800"}', "request JSON holds a lone surrogate in '\\ud800'", "bad_request"),
    (b'{"v":1,"kind":"statistics","table":"sales","columns":["price"],"statistics":["\\ud800"]}', "holds a lone surrogate", "bad_request"),
    (b'{"v":1,"kind":"statistics","table":"sales","columns":["a\\udfffb"]}', "holds a lone surrogate", "bad_request"),
    (b'{"v":1,"kind":"statistics","table":"\\ud800"}', "holds a lone surrogate", "bad_request"),
    (b'{"v":1,"kind":"statistics","table":"sales","\\ud800":1}', "holds a lone surrogate", "bad_request"),
]

#: get_schema's errors: pyarrow's server sends them with these client exception classes (see flight_server/server.py)
SCHEMA_ERRORS = {"bad_request": pa.ArrowInvalid, "not_found": KeyError, "time_travel_unavailable": pa.ArrowInvalid}


@pytest.mark.parametrize("ticket,words,code", BAD, ids=[f"bad{i:02d}" for i in range(len(BAD))])
def test_bad_ticket_gets_a_clear_one_line_error(flight_server, ticket: bytes, words: str, code: str) -> None:
    c, opts = raw_client(flight_server.location, GOOD_TOKEN)
    with pytest.raises(flight.FlightServerError) as info:
        c.do_get(flight.Ticket(ticket), opts).read_all()
    text = first_line(info.value)
    assert words in text, text
    assert "\n" not in text and "Traceback" not in str(info.value) and len(text) < 400
    assert json.loads(info.value.extra_info)["code"] == code
    # the same request as a descriptor command
    with pytest.raises(flight.FlightServerError) as info:
        c.get_flight_info(flight.FlightDescriptor.for_command(ticket), opts)
    assert words in first_line(info.value)
    # and for get_schema: the same message and code, never a traceback
    with pytest.raises(SCHEMA_ERRORS[code]) as info:
        c.get_schema(flight.FlightDescriptor.for_command(ticket), opts)
    text = str(info.value)
    assert words in text and text.endswith(f"Detail: Python exception: {code}"), text
    assert "\n" not in text and "Traceback" not in text and len(text) < 450, text


def test_bad_actions_and_descriptors(flight_server) -> None:
    c, opts = raw_client(flight_server.location, GOOD_TOKEN)
    cases = [
        (lambda: list(c.do_action(flight.Action("reboot", b""), opts)), "unknown action 'reboot'"),
        (lambda: list(c.do_action(flight.Action("history", b"{}"), opts)), 'history needs {"table": ...}'),
        (lambda: list(c.do_action(flight.Action("history", b'{"table":"nosuch"}'), opts)), "unknown table 'nosuch'"),
        (lambda: list(c.do_action(flight.Action("history", b"{oops"), opts)), "malformed request JSON"),
        (lambda: list(c.do_action(flight.Action("refresh", b'{"tables":1}'), opts)), "unknown key(s) in the refresh action"),
        (lambda: list(c.do_action(flight.Action("analyze_status", b'{"job":"nope"}'), opts)), "unknown analyze job 'nope'"),
        (lambda: c.get_flight_info(flight.FlightDescriptor.for_path("a", "b"), opts), "a path descriptor must be [table]"),
        (lambda: c.get_flight_info(flight.FlightDescriptor.for_path("nosuch"), opts), "unknown table 'nosuch'"),
    ]
    for call, words in cases:
        with pytest.raises(flight.FlightServerError) as info:
            call()
        assert words in first_line(info.value), first_line(info.value)
    with pytest.raises(flight.FlightError, match="read-only"):
        writer, _ = c.do_put(flight.FlightDescriptor.for_path("sales"), __import__("pyarrow").schema([("x", "int64")]), opts)
        writer.close()


# ============================================================== fuzz
def _mutations(rng: random.Random) -> bytes:
    """One malformed (or occasionally valid) request: random bytes, broken JSON, or a valid request mutated."""
    valid = [
        {"v": 1, "kind": "statistics", "table": "sales", "columns": ["price", "city"], "partition": None, "partitions": None, "statistics": None},
        {"v": 1, "kind": "top_frequencies", "table": "sales", "column": "city", "k": 20, "partition": "part=01"},
        {"v": 1, "kind": "histogram", "table": "sales", "column": "price", "bins": [0, 100], "value_range": None, "partition": None},
        {"v": 1, "kind": "histogram", "table": "sales", "column": "event_time", "value_range": ["2024-01-01T00:00:00Z", None]},
        {"v": 1, "kind": "partitions_matching", "table": "sales", "filter": {"column": "price", "op": ">=", "value": 10}},
        {"v": 1, "kind": "statistics", "table": "wide", "columns": ["c0001", "c0500"], "partitions": "*"},
        {"v": 1, "kind": "histogram", "table": "sales", "column": "quantity", "value_range": [1, 10]},
        {"v": 1, "kind": "histogram", "table": "sales", "column": "id", "value_range": [None, 1000]},
        {"v": 1, "kind": "histogram", "table": "sales", "column": "score", "value_range": [0.25, None]},
        {"v": 1, "kind": "histogram", "table": "sales", "column": "amount", "value_range": ["1.00", 20]},
        {"v": 1, "kind": "histogram", "table": "sales", "column": "event_date", "value_range": ["2024-01-01", "2024-06-30"]},
        {"v": 1, "kind": "partitions_matching", "table": "sales", "filter": {"column": "amount", "op": "<", "value": "10.50"}},
    ]
    choice = rng.randrange(11)
    if choice == 0:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(0, 200)))
    if choice == 1:
        text = json.dumps(rng.choice(valid))
        cut = rng.randrange(0, len(text))
        return text[:cut].encode()
    if choice == 2:
        text = bytearray(json.dumps(rng.choice(valid)).encode())
        for _ in range(rng.randrange(1, 6)):
            text[rng.randrange(len(text))] = rng.randrange(256)
        return bytes(text)
    if choice == 3:
        return "".join(rng.choice(string.printable) for _ in range(rng.randrange(1, 300))).encode()
    doc = json.loads(json.dumps(rng.choice(valid)))
    if choice == 4:  # a key's value replaced
        key = rng.choice(list(doc))
        doc[key] = rng.choice(WEIRD_VALUES)
    elif choice == 5:  # a key removed or added
        if rng.random() < 0.5 and doc:
            doc.pop(rng.choice(list(doc)))
        else:
            doc[rng.choice(["extra", "k", "bins", "filter", "at_snapshot", "at_transaction", "typed", "V"])] = rng.choice(WEIRD_VALUES)
    elif choice == 6:  # nested filter, value_range bound or list contents
        if "filter" in doc:
            doc["filter"][rng.choice(["column", "op", "value", "other"])] = rng.choice(WEIRD_VALUES)
        elif doc.get("value_range") is not None:
            doc["value_range"][rng.randrange(2)] = rng.choice(WEIRD_VALUES)
        else:
            doc["columns"] = [rng.choice(WEIRD_VALUES) for _ in range(rng.randrange(0, 5))]
    elif choice == 7:  # several values replaced
        for key in rng.sample(list(doc), min(len(doc), rng.randrange(1, 4))):
            doc[key] = rng.choice(WEIRD_VALUES)
    elif choice == 8:  # deep nesting or a huge document
        depth = rng.choice([10, 500, 5000, 40_000])
        return (
            (b"[" * depth + b"]" * depth)
            if rng.random() < 0.5
            else json.dumps({"v": 1, "kind": "statistics", "table": "sales", "columns": ["x" * 100] * depth}).encode()
        )
    elif choice == 9:  # a number of the text replaced by one JSON allows but float64 does not hold
        text = json.dumps(doc)
        numbers = list(re.finditer(r"(?<![\w\"])-?\d+(\.\d+)?(?![\w\"])", text))
        if numbers:
            m = rng.choice(numbers)
            text = text[: m.start()] + rng.choice(["1e400", "-1e400", "1e309", "2e308", "1E+999", "-0e-999"]) + text[m.end() :]
        return text.encode()
    else:  # a string of the document (a name, a text form) replaced by one with a lone surrogate
        strings = [k for k, v in doc.items() if isinstance(v, str) and k not in ("kind",)]
        if strings:
            doc[rng.choice(strings)] = rng.choice(["\ud800", "\udfff", "a\udc80b", "\ud83d", "\ud83d\ude00"])
    return json.dumps(doc, allow_nan=True).encode("utf-8", "surrogatepass")


WEIRD_VALUES = [
    None, True, False, 0, -1, 1, 2**63, 2**63 - 1, -(2**63), -(2**63) - 1, 2**31, 10**29, 10**40, 1.5, -0.0, 1e308, -1e308,
    3.5e38, 1.7976931348623157e308, "", " ", "\x00", "nosuch", "part=99", "é" * 10, "\ud7ff", "\ud800", "\udfff",
    "x" * 5000, [], [None], ["price"] * 3, {}, {"a": 1}, [[1, 2]], "NaN", "inf", "-inf", "1e999", "1e400",
    "100000000000000000000000000000", "2024-13-45T99:99:99Z", "*", ["*"], 1e-320, [0, 10**12], [5, 1], ["a", "b"],
    [None, None], [2**63, None], [None, 1e308], [10**29, None], ["\ud800", None], "../../../../etc/passwd",
]  # fmt: skip


def _do_get(c: flight.FlightClient, opts: flight.FlightCallOptions, payload: bytes) -> None:
    c.do_get(flight.Ticket(payload), opts).read_all()


def _do_action(c: flight.FlightClient, opts: flight.FlightCallOptions, action: str, payload: bytes) -> None:
    list(c.do_action(flight.Action(action, payload), opts))


def _utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def _check_outcome(call, schema: bool = False) -> str:
    """'ok' or 'error' for a call that returned or raised a clear one-line error; anything else fails
    (an internal error, a traceback). get_schema's errors come as Arrow errors (see flight_server/server.py)."""
    try:
        call()
        return "ok"
    except (flight.FlightServerError, flight.FlightUnavailableError) as exc:
        text = first_line(exc)
        assert text and "\n" not in text and "Traceback" not in str(exc), str(exc)[:500]
        assert "internal error" not in text, text
        return "error"
    except (pa.ArrowException, OSError) as exc:
        if not schema or isinstance(exc, flight.FlightError):
            raise
        text = str(exc)
        assert "\n" not in text and "Traceback" not in text, text[:500]
        assert re.search(r"Detail: Python exception: (bad_request|not_found|time_travel_unavailable)$", text), text[:500]
        return "error"


def _fuzz(server, client, oracle_sales, seed: int, count: int) -> dict[str, int]:
    """``count`` seeded malformed requests over every request-taking method, then a healthy server."""
    rng = random.Random(seed)
    c, opts = raw_client(server.location, GOOD_TOKEN)
    outcomes = {"ok": 0, "error": 0}
    for i in range(count):
        payload = _mutations(rng)
        kind = i % 5
        schema = False
        if kind == 0:
            call = functools.partial(_do_get, c, opts, payload)
        elif kind == 1:
            call = functools.partial(c.get_flight_info, flight.FlightDescriptor.for_command(payload), opts)
        elif kind == 2:
            parts = [bytes(rng.randrange(256) for _ in range(rng.randrange(0, 12))) for _ in range(rng.randrange(0, 3))]
            if rng.random() < 0.7:
                parts = [p.decode("utf-8", "replace").encode() for p in parts]
            call = functools.partial(c.get_flight_info, flight.FlightDescriptor.for_path(*parts), opts)
            if not all(_utf8(p) for p in parts):
                # a path is a protobuf string: gRPC refuses non-UTF-8 before any handler runs
                with pytest.raises(flight.FlightInternalError):
                    call()
                outcomes["error"] += 1
                continue
        elif kind == 3:
            call = functools.partial(c.get_schema, flight.FlightDescriptor.for_command(payload), opts)
            schema = True
        else:
            action = rng.choice(["health", "history", "refresh", "analyze", "analyze_status", "nope", ""])
            call = functools.partial(_do_action, c, opts, action, payload)
        outcomes[_check_outcome(call, schema)] += 1
    assert outcomes["error"] >= count * 0.7, outcomes
    health = client.health()
    assert health["status"] == "ok" and health["tables"] == 2 and health["in_flight"] == 1  # this call
    assert same(strip(client.statistics("sales", ["price", "city"])), oracle_sales.statistics(["price", "city"]))
    return outcomes


def test_fuzz_malformed_tickets_descriptors_and_actions(flight_server, client, oracle_sales) -> None:
    _fuzz(flight_server, client, oracle_sales, seed=20261121, count=5_000)


@pytest.mark.slow
@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_fuzz_longer(flight_server, client, oracle_sales, seed: int) -> None:
    _fuzz(flight_server, client, oracle_sales, seed=seed, count=50_000)


def test_health_counts_calls_and_errors_of_every_method(flight_data) -> None:
    """The handlers count themselves (no middleware instance per call): calls, errors and in_flight."""
    from flight_testkit import running_server

    from flight_server.client import MetastoreClient

    with running_server(flight_data.store, poll_interval=0) as server, MetastoreClient(server.location) as c:
        start = c.health()
        c.statistics("sales", ["price"])
        c.statistics("sales", ["price"], partitions="*")  # a generated stream
        c.tables()
        c.flight_info({"v": 1, "kind": "statistics", "table": "sales", "columns": ["price"]})
        for bad in ({"v": 1, "kind": "statistics", "table": "sales", "columns": ["nope"]}, {"v": 9}):
            with pytest.raises(flight.FlightServerError):
                c.get(bad)
        with pytest.raises(flight.FlightServerError):
            c.action("nope")
        end = c.health()
        assert end["calls"] - start["calls"] == 8  # the seven calls above and this health
        assert end["errors"] - start["errors"] == 3
        assert end["in_flight"] == 1 and end["rejected"] == start["rejected"] == 0
