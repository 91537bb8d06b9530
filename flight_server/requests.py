"""Every request the Flight server answers, declared once (docs/reference/FLIGHT.md, "Adding a request").

A request is one of three mechanisms:

- ``do_get`` (:data:`GET`): a question whose answer is Arrow record batches. Its JSON
  document (:mod:`flight_server.protocol`) is a ``do_get`` ticket or a
  ``get_flight_info`` / ``get_schema`` command; :func:`parse` reads it with the kind's
  parser into a request dataclass, and :mod:`flight_server.service` answers it
  (``HANDLERS``: describe, execute, and the subset answer of a kind with ``where``).
- ``do_action`` (:data:`ACTION`): a command, or a question whose answer is one JSON
  document (status, history, jobs). Its body is a JSON object of ``keys``;
  :mod:`flight_server.actions` answers it (``HANDLERS``).
- ``list_flights`` (:data:`LIST`): the tables served.

``metastore query`` (engine/cli) offers the entries with a ``cli`` name, in this order.
This module imports neither pyarrow nor the engine: the command line reads it at start-up.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from flight_server import protocol
from flight_server.protocol import COMMON_KEYS, SUBSET_KEYS, At, Request, RequestError

GET = "do_get"
ACTION = "do_action"
LIST = "list_flights"

#: a do_get kind's parser: the decoded document, its table and time travel -> the request
Parser = Callable[[dict[str, Any], str, At | None], Request]


@dataclass(frozen=True)
class RequestKind:
    """One request: ``name`` is its ``"kind"`` (do_get) or action type (do_action)."""

    name: str
    mechanism: str  # GET, ACTION or LIST
    description: str  # list_actions shows an action's
    keys: tuple[str, ...] | None = None  # do_get: the keys besides COMMON_KEYS; do_action: the body's (None: body ignored)
    parse: Parser | None = None  # do_get: the document's parser (flight_server/protocol.py)
    cli: str | None = None  # its name in ``metastore query`` (None: not offered there)

    @property
    def keyset(self) -> frozenset[str]:
        return frozenset((COMMON_KEYS if self.mechanism == GET else ()) + (self.keys or ()))


_SUBSET_NOTE = ' With "where": the rows matching a predicate ("exact": computed on the data).'

REQUESTS: tuple[RequestKind, ...] = (
    RequestKind("tables", LIST, "One FlightInfo per table with statistics.", cli="tables"),
    RequestKind("health", ACTION, "Server status: tables served, calls in flight, caches. Body: none.", cli="health"),
    RequestKind(
        "statistics",
        GET,
        "The statistics of columns, at table level or per partition." + _SUBSET_NOTE,
        ("columns", "partition", "partitions", "statistics") + SUBSET_KEYS,
        protocol.parse_statistics,
        cli="statistics",
    ),
    RequestKind(
        "top_frequencies",
        GET,
        "A column's most frequent values and their counts." + _SUBSET_NOTE,
        ("column", "k", "partition", "typed") + SUBSET_KEYS,
        protocol.parse_top_frequencies,
        cli="top",
    ),
    RequestKind(
        "histogram",
        GET,
        "A column's histogram bins, all or those of a bin or value range." + _SUBSET_NOTE,
        ("column", "bins", "value_range", "partition") + SUBSET_KEYS,
        protocol.parse_histogram,
        cli="histogram",
    ),
    RequestKind(
        "partitions_matching",
        GET,
        "The partitions that might hold rows matching a predicate.",
        ("filter",),
        protocol.parse_partitions_matching,
        cli="partitions",
    ),
    RequestKind("plan_files", GET, "The data files that might hold rows matching a predicate.", ("filter",), protocol.parse_plan_files, cli="files"),
    RequestKind("history", ACTION, 'Published states of a table from its catalog, newest first. Body: {"table": ...}.', ("table",), cli="history"),
    RequestKind(
        "refresh", ACTION, 'Re-read the published state now (all tables, or {"table": ...}); returns what changed.', ("table",), cli="refresh"
    ),
    RequestKind(
        "staleness",
        ACTION,
        "Which source snapshot the current statistics describe and how many snapshots the table (Iceberg, Delta, Hudi) "
        'has committed since, from its history (no data read). Body: {"table": ...}.',
        ("table",),
        cli="staleness",
    ),
    RequestKind(
        "analyze",
        ACTION,
        "Start engine.api.analyze on Ray (only under the server's --analyze-root locations). "
        'Body: {"table_uri": ..., "name": null, "bins": 1000, "columns": null, "inherit": true, "value_partitions": false, '
        '"format": null, "at_snapshot": null, "as_of": null, "catalog": null}; returns {"job": ...}.',
        ("table_uri", "name", "bins", "columns", "inherit", "value_partitions", "format", "at_snapshot", "as_of", "catalog"),
        cli="analyze",
    ),
    RequestKind(
        "analyze_status",
        ACTION,
        'Progress of an analyze job. Body: {"job": ...}; returns state, phase, done, total, result or error.',
        ("job",),
        cli="analyze-status",
    ),
    RequestKind(
        "diff",
        ACTION,
        'What changed between two states of a table (docs/DIFF.md). Body: {"table": ..., "from": null, "to": null, '
        '"from_partition": null, "to_partition": null, "columns": null, "top": 10}; returns metastore diff -o json\'s document.',
        ("table", "from", "to", "from_partition", "to_partition", "columns", "top"),
    ),
    RequestKind(
        "alerts",
        ACTION,
        "Alerts of a table's columns from its stored statistics (docs/DIFF.md). "
        'Body: {"table": ..., "columns": null, "partition": null, "thresholds": {}}; '
        "returns the table's and each column's alerts (kind, detail).",
        ("table", "columns", "partition", "thresholds"),
    ),
)

BY_NAME: dict[tuple[str, str], RequestKind] = {(r.mechanism, r.name): r for r in REQUESTS}
#: the do_get kinds and the actions, in the order of REQUESTS
KINDS: tuple[str, ...] = tuple(r.name for r in REQUESTS if r.mechanism == GET)
ACTIONS: tuple[str, ...] = tuple(r.name for r in REQUESTS if r.mechanism == ACTION)
#: ``metastore query``'s choices, and the request each names
CLI_NAMES: tuple[str, ...] = tuple(r.cli for r in REQUESTS if r.cli is not None)
BY_CLI: dict[str, RequestKind] = {r.cli: r for r in REQUESTS if r.cli is not None}


def of(mechanism: str, name: str) -> RequestKind:
    return BY_NAME[(mechanism, name)]


def parse(raw: bytes | str | dict[str, Any]) -> Request:
    """A ticket or descriptor command (bytes) or a decoded document to a request; RequestError if invalid."""
    doc = raw if isinstance(raw, dict) else protocol.decode(raw)
    kind = BY_NAME[(GET, protocol.parse_header(doc, KINDS))]
    protocol.check_keys(doc, kind.keyset, f"a {kind.name} request")
    table = protocol.required_name(doc, "table")
    at = protocol.at_keys(doc)
    assert kind.parse is not None  # every do_get entry has its parser
    return kind.parse(doc, table, at)


def action_body(name: str, raw: bytes) -> dict[str, Any]:
    """The body of action ``name`` (empty: ``{}``), its keys checked; RequestError for an unknown action."""
    kind = BY_NAME.get((ACTION, name))
    if kind is None:
        raise RequestError(f"unknown action {protocol.short(name)}: expected one of {', '.join(ACTIONS)}")
    body = protocol.decode(raw) if raw.strip() else {}
    if kind.keys is not None:
        protocol.check_keys(body, kind.keyset, f"the {name} action")
    return body


def check_handlers(mechanism: str, handlers: Iterable[str]) -> None:
    """Fails at import when a module's handlers are not exactly the table's requests of ``mechanism``."""
    want = [r.name for r in REQUESTS if r.mechanism == mechanism]
    have = list(handlers)
    if sorted(have) != sorted(want):
        raise RuntimeError(f"{mechanism} handlers {sorted(have)} are not the requests of flight_server/requests.py: {sorted(want)}")
