"""The one table of Flight requests (flight_server/requests.py): the parser, the service, the
actions and ``metastore query`` all read it (no server started here)."""

from __future__ import annotations

import json

import pytest

from flight_server import actions, protocol, requests, service
from flight_server.protocol import RequestError

EXAMPLES = {  # one valid document per do_get kind (docs/reference/FLIGHT.md)
    "statistics": {"columns": ["price"], "partitions": "*"},
    "top_frequencies": {"column": "city", "k": 5},
    "histogram": {"column": "price", "bins": [0, 10], "value_range": [1, None]},
    "partitions_matching": {"filter": {"column": "price", "op": ">=", "value": 3}},
    "plan_files": {"filter": "price > 3"},
}


def test_every_request_has_exactly_one_handler() -> None:
    assert set(service.HANDLERS) == set(requests.KINDS) == set(EXAMPLES)
    assert set(actions.HANDLERS) == set(requests.ACTIONS)
    with pytest.raises(RuntimeError, match="not the requests"):
        requests.check_handlers(requests.ACTION, [*actions.HANDLERS, "reboot"])


@pytest.mark.parametrize("kind", list(EXAMPLES))
def test_each_kind_parses_round_trips_and_refuses_keys_outside_its_entry(kind: str) -> None:
    doc = {"v": 1, "kind": kind, "table": "sales", **EXAMPLES[kind]}
    request = requests.parse(json.dumps(doc).encode())
    assert request.kind == kind and request.table == "sales"
    assert requests.parse(protocol.encode(request)) == request
    entry = requests.of(requests.GET, kind)
    assert set(doc) <= entry.keyset
    stranger = next(k for k in ("where", "column", "filter") if k not in entry.keyset)
    with pytest.raises(RequestError, match=f"unknown key\\(s\\) in a {kind} request: '{stranger}'"):
        requests.parse({**doc, stranger: "x"})


def test_an_unknown_kind_or_action_names_the_tables() -> None:
    with pytest.raises(RequestError, match="expected one of statistics, top_frequencies, histogram, partitions_matching, plan_files"):
        requests.parse(b'{"v":1,"kind":"stats","table":"t"}')
    with pytest.raises(RequestError, match="unknown action 'reboot': expected one of health, history, refresh, staleness, analyze"):
        requests.action_body("reboot", b"")


def test_action_bodies_are_checked_against_their_entry() -> None:
    assert requests.action_body("health", b'{"anything": 1}') == {"anything": 1}  # health takes no body and ignores one
    assert requests.action_body("refresh", b"  ") == {}
    for name in requests.ACTIONS:
        keys = requests.of(requests.ACTION, name).keys
        if keys is not None:
            with pytest.raises(RequestError, match=f"unknown key\\(s\\) in the {name} action: 'bogus'"):
                requests.action_body(name, b'{"bogus": 1}')
            assert requests.action_body(name, json.dumps(dict.fromkeys(keys)).encode()) == dict.fromkeys(keys)


def test_metastore_query_offers_the_tables_cli_names() -> None:
    from engine.cli import flight
    from engine.cli.commands import query

    assert query.QUERY_KINDS == flight.QUERY_KINDS == tuple(r.cli for r in requests.REQUESTS if r.cli)
    assert set(flight.QUERY_KINDS) == {
        "tables", "health", "statistics", "top", "histogram", "partitions", "files", "history", "staleness", "refresh",
        "analyze", "analyze-status",
    }  # fmt: skip
    assert set(flight.ACTION_KINDS) == {"health", "history", "staleness", "refresh"}
    for name in flight.QUERY_KINDS:
        assert requests.BY_CLI[name].cli == name
