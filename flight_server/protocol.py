"""The request protocol of the Flight service: versioned JSON in tickets and descriptor commands.

Every request is one JSON object (UTF-8, at most ``MAX_REQUEST_BYTES``) with the
protocol version ``"v": 1`` and a ``"kind"``::

    {"v":1, "kind":"statistics", "table":"sales", "columns":["price","city"],
     "partition":null, "partitions":null, "statistics":null}
    {"v":1, "kind":"top_frequencies", "table":"sales", "column":"city", "k":20, "partition":null}
    {"v":1, "kind":"histogram", "table":"sales", "column":"price",
     "bins":[0,100], "value_range":null, "partition":null}
    {"v":1, "kind":"partitions_matching", "table":"sales",
     "filter":"price >= 100 and city in ('Berlin', 'Paris')"}
    {"v":1, "kind":"partitions_matching", "table":"sales",
     "filter":{"column":"price", "op":">=", "value":100}}      (the first form, one comparison)
    {"v":1, "kind":"plan_files", "table":"sales", "filter":"event_date >= 2024-10-01 and id < 500"}

Optional keys default to null; unknown keys, wrong types and out-of-range values
are refused with a :class:`RequestError` naming the key. Every kind also accepts
``"at_transaction"`` (int) or ``"at_snapshot"`` (str) for time travel, which the
server refuses until the catalog resolves them. docs/reference/FLIGHT.md is the reference.

Each kind's keys and parser are declared in :mod:`flight_server.requests`, whose
``parse`` reads a ticket.

This module has no Flight or engine dependency: the client builds requests with
the same functions the server parses them with.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import asdict, dataclass, field
from typing import Any, NoReturn, Union

from engine.jsontypes import JSON, JSONObject

PROTOCOL_VERSION = 1
SUPPORTED_VERSIONS = (1,)
MAX_REQUEST_BYTES = 64 * 1024
MAX_K = 1_000_000
MAX_NAME_CHARS = 4096  # a table, column, partition or statistic name
MAX_LIST_ITEMS = 100_000  # columns, partitions or statistics in one request
MAX_FILTER_CHARS = 32 * 1024  # a predicate's text
ALL_PARTITIONS = "*"

COMPARISON_OPS = ("<", "<=", ">", ">=", "==", "!=")
NULL_OPS = ("is_null", "not_null")
OPS = COMPARISON_OPS + NULL_OPS


class RequestError(ValueError):
    """A request the server cannot act on: malformed, wrong version, bad value. One-line message."""


# ============================================================== requests
@dataclass(frozen=True)
class At:
    """A point in the table's history: a catalog transaction or a table snapshot (needs the catalog)."""

    transaction: int | None = None
    snapshot: str | None = None


@dataclass(frozen=True)
class StatisticsRequest:
    table: str
    columns: tuple[str, ...] | None = None  # None: every column
    partition: str | None = None  # one partition; None with partitions None: the table level
    partitions: tuple[str, ...] | str | None = None  # several partitions, or "*" for all
    statistics: tuple[str, ...] | None = None  # None: every statistic but the sketches
    at: At | None = None
    where: str | None = None  # the rows matching this predicate (docs/SUBSETS.md), table level
    exact: bool = False  # with where: computed on the data
    kind: str = field(default="statistics", init=False)


@dataclass(frozen=True)
class TopFrequenciesRequest:
    table: str
    column: str
    k: int = 20
    partition: str | None = None
    typed: bool = False  # values decoded to the column's type instead of the text form
    at: At | None = None
    where: str | None = None
    exact: bool = False
    kind: str = field(default="top_frequencies", init=False)


@dataclass(frozen=True)
class HistogramRequest:
    table: str
    column: str
    bins: tuple[int, int] | None = None  # [start, stop) bin indexes
    value_range: tuple[JSON, JSON] | None = None  # [lo, hi]: JSON numbers, text forms or null (open)
    partition: str | None = None
    at: At | None = None
    where: str | None = None
    exact: bool = False
    kind: str = field(default="histogram", init=False)


@dataclass(frozen=True)
class Filter:
    column: str
    op: str
    value: bool | int | float | str | None = None


@dataclass(frozen=True)
class PartitionsMatchingRequest:
    table: str
    filter: Filter | str  # a predicate (docs/PREDICATES.md) or one comparison
    at: At | None = None
    kind: str = field(default="partitions_matching", init=False)


@dataclass(frozen=True)
class PlanFilesRequest:
    table: str
    filter: str  # a predicate (docs/PREDICATES.md)
    at: At | None = None
    kind: str = field(default="plan_files", init=False)


Request = Union[StatisticsRequest, TopFrequenciesRequest, HistogramRequest, PartitionsMatchingRequest, PlanFilesRequest]


# ============================================================== encoding (client side)
def request_dict(request: Request) -> JSONObject:
    """The JSON document of a request (null optional keys left out)."""
    doc: JSONObject = {"v": PROTOCOL_VERSION, "kind": request.kind}
    for key, value in asdict(request).items():
        if key in ("kind", "at") or value is None:
            continue
        if isinstance(value, tuple):
            value = list(value)
        doc[key] = value
    if request.at is not None:
        if request.at.transaction is not None:
            doc["at_transaction"] = request.at.transaction
        if request.at.snapshot is not None:
            doc["at_snapshot"] = request.at.snapshot
    if isinstance(request, TopFrequenciesRequest) and not request.typed:
        doc.pop("typed", None)
    if doc.get("exact") is False:  # the requests without a subset keep their tickets
        doc.pop("exact")
    return doc


def encode(request: Request | JSONObject) -> bytes:
    """Canonical bytes of a request: compact JSON with sorted keys (equal requests, equal tickets)."""
    doc = request if isinstance(request, dict) else request_dict(request)
    return json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


# ============================================================== parsing (server side)
COMMON_KEYS = ("v", "kind", "table", "at_transaction", "at_snapshot")  # of every request kind
SUBSET_KEYS = ("where", "exact")  # of the kinds that may describe a subset


def short(value: object, limit: int = 60) -> str:
    """A value for an error message: repr, cut to ``limit`` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _reject_constant(name: str) -> NoReturn:
    raise RequestError(f"request JSON must not contain {name}")


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):  # 1e400: Python's JSON reader would make it infinity
        raise RequestError(f"number {text[:40]} is out of range (beyond float64)")
    return value


# built once (json.loads with options builds one per call)
_DECODER = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_finite_float)
_SURROGATE_ESCAPE = re.compile(r"\\[uU][dD][89a-fA-F]")  # a \uD800-\uDFFF escape: maybe a lone surrogate


def _check_unicode(value: object) -> None:
    """RequestError if a string in the document holds a lone surrogate (JSON's \\ud800 escape allows one;
    names and values must be text that UTF-8 can carry)."""
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise RequestError(f"request JSON holds a lone surrogate in {short(value)}: not valid Unicode text") from None
    elif isinstance(value, dict):
        for k, v in value.items():
            _check_unicode(k)
            _check_unicode(v)
    elif isinstance(value, list):
        for v in value:
            _check_unicode(v)


def decode(raw: bytes | str) -> dict[str, Any]:
    """Bytes to a JSON object, or a RequestError (size, encoding, syntax, not an object)."""
    if isinstance(raw, str):
        raw = raw.encode("utf-8", "surrogatepass")
    if not raw:
        raise RequestError('empty request: expected a JSON object such as {"v":1,"kind":"statistics","table":...}')
    if len(raw) > MAX_REQUEST_BYTES:
        raise RequestError(f"request too large: {len(raw):,} bytes (at most {MAX_REQUEST_BYTES:,})")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        raise RequestError("request is not UTF-8 JSON") from None
    try:
        if text.startswith("\ufeff"):  # as json.loads
            raise json.JSONDecodeError("Unexpected UTF-8 BOM (decode using utf-8-sig)", text, 0)
        doc = _DECODER.decode(text)
    except RequestError:
        raise
    except RecursionError:
        raise RequestError("malformed request JSON: nested too deeply") from None
    except ValueError as exc:
        raise RequestError(f"malformed request JSON: {str(exc).splitlines()[0][:120]}") from None
    if not isinstance(doc, dict):
        raise RequestError(f"request must be a JSON object, not {type(doc).__name__}")
    if _SURROGATE_ESCAPE.search(text) is not None:  # only then can a string hold one (UTF-8 input cannot)
        try:
            _check_unicode(doc)
        except RecursionError:
            raise RequestError("malformed request JSON: nested too deeply") from None
    return doc


def _predicate_text(value: object, key: str, of: str = "") -> str:
    """The text of a predicate (docs/PREDICATES.md) under ``key``: a non-empty string, at most
    ``MAX_FILTER_CHARS`` long (the parser is not asked to read more); ``of`` names the request."""
    if not isinstance(value, str) or not value.strip():
        raise RequestError(f'"{key}"{of} must be a predicate (a non-empty string), not {short(value)}')
    if len(value) > MAX_FILTER_CHARS:
        raise RequestError(f'"{key}" is too long ({len(value):,} characters; at most {MAX_FILTER_CHARS:,})')
    return value


def _subset(doc: dict[str, Any]) -> tuple[str | None, bool]:
    """``where`` (a predicate, docs/PREDICATES.md) and ``exact`` of a statistics, top_frequencies or histogram request."""
    where = doc.get("where")
    if where is not None:
        where = _predicate_text(where, "where")
    exact = doc.get("exact", False)
    if not isinstance(exact, bool):
        raise RequestError(f'"exact" must be true or false, not {short(exact)}')
    if exact and where is None:
        raise RequestError('"exact" needs "where" (the subset to compute)')
    return where, exact


def subset_keys(doc: dict[str, Any]) -> tuple[str | None, bool]:
    """``where`` and ``exact`` of a request that may describe a subset; neither with a partition."""
    where, exact = _subset(doc)
    if where is not None and (doc.get("partition") is not None or doc.get("partitions") is not None):
        raise RequestError('"where" describes rows of the whole table: give no "partition" or "partitions" with it')
    return where, exact


def parse_statistics(doc: dict[str, Any], table: str, at: At | None) -> StatisticsRequest:
    where, exact = subset_keys(doc)
    partition = name_key(doc, "partition")
    partitions = doc.get("partitions")
    if partitions is not None and partitions != ALL_PARTITIONS:
        partitions = _names(doc, "partitions")
    if partition is not None and partitions is not None:
        raise RequestError('give either "partition" or "partitions", not both')
    return StatisticsRequest(
        table=table,
        columns=_names(doc, "columns"),
        partition=partition,
        partitions=partitions,
        statistics=_names(doc, "statistics"),
        at=at,
        where=where,
        exact=exact,
    )


def parse_top_frequencies(doc: dict[str, Any], table: str, at: At | None) -> TopFrequenciesRequest:
    where, exact = subset_keys(doc)
    k = doc.get("k", 20)
    if not _is_int(k):
        raise RequestError(f'"k" must be a whole number, not {short(k)}')
    if k < 0 or k > MAX_K:
        raise RequestError(f'"k" must be between 0 and {MAX_K:,}, not {k:,}' if abs(k) < 10**30 else f'"k" must be between 0 and {MAX_K:,}')
    typed = doc.get("typed", False)
    if not isinstance(typed, bool):
        raise RequestError(f'"typed" must be true or false, not {short(typed)}')
    return TopFrequenciesRequest(
        table=table,
        column=required_name(doc, "column"),
        k=k,
        partition=name_key(doc, "partition"),
        typed=typed,
        at=at,
        where=where,
        exact=exact,
    )


def parse_histogram(doc: dict[str, Any], table: str, at: At | None) -> HistogramRequest:
    where, exact = subset_keys(doc)
    bins = doc.get("bins")
    if bins is not None:
        if not isinstance(bins, list) or len(bins) != 2 or not all(_is_int(b) for b in bins):
            raise RequestError(f'"bins" must be [start, stop] (whole numbers), not {short(bins)}')
        if bins[0] < 0 or bins[1] < bins[0]:
            raise RequestError(f"bad bin range [{short(bins[0], 30)}, {short(bins[1], 30)}): need 0 <= start <= stop")
        bins = (bins[0], bins[1])
    value_range = doc.get("value_range")
    if value_range is not None:
        if not isinstance(value_range, list) or len(value_range) != 2:
            raise RequestError(f'"value_range" must be [lo, hi] (numbers, text forms or null), not {short(value_range)}')
        for bound in value_range:
            if bound is not None and (not isinstance(bound, (int, float, str)) or isinstance(bound, bool)):
                raise RequestError(f'a "value_range" bound must be a number, a text form or null, not {short(bound)}')
            if isinstance(bound, str) and len(bound) > MAX_NAME_CHARS:
                raise RequestError('a "value_range" bound is too long')
        value_range = (value_range[0], value_range[1])
    return HistogramRequest(
        table=table,
        column=required_name(doc, "column"),
        bins=bins,
        value_range=value_range,
        partition=name_key(doc, "partition"),
        at=at,
        where=where,
        exact=exact,
    )


def parse_plan_files(doc: dict[str, Any], table: str, at: At | None) -> PlanFilesRequest:
    return PlanFilesRequest(table=table, filter=_predicate_text(doc.get("filter"), "filter", " of a plan_files request"), at=at)


def parse_partitions_matching(doc: dict[str, Any], table: str, at: At | None) -> PartitionsMatchingRequest:
    flt = doc.get("filter")
    if isinstance(flt, str):
        if not flt.strip():
            raise RequestError('"filter" must not be empty')
        return PartitionsMatchingRequest(table=table, filter=_predicate_text(flt, "filter"), at=at)
    if not isinstance(flt, dict):
        raise RequestError(f'"filter" must be a predicate (a string) or an object {{"column":..., "op":..., "value":...}}, not {short(flt)}')
    extra = sorted(str(k) for k in flt if k not in ("column", "op", "value"))
    if extra:
        raise RequestError(f'unknown key(s) in "filter": {", ".join(short(k, 40) for k in extra[:5])}')
    column = required_name(flt, "column", where="filter.column")
    op = flt.get("op")
    if op not in OPS:
        raise RequestError(f"unknown filter op {short(op)}: expected one of {' '.join(OPS)}")
    value = flt.get("value")
    if op in NULL_OPS:
        if value is not None:
            raise RequestError(f"filter op {op} takes no value")
    else:
        if value is None:
            raise RequestError(f"filter op {op} needs a value (use is_null / not_null for nulls)")
        if not isinstance(value, (bool, int, float, str)):
            raise RequestError(f"a filter value must be a number, a boolean or a text form, not {short(value)}")
        if isinstance(value, str) and len(value) > MAX_NAME_CHARS:
            raise RequestError("the filter value is too long")
    return PartitionsMatchingRequest(table=table, filter=Filter(column, op, value), at=at)


def parse_header(doc: dict[str, Any], kinds: tuple[str, ...]) -> str:
    """The request kind of a document after its protocol version is checked (``kinds``: those served)."""
    if "v" not in doc:
        raise RequestError(f'missing protocol version "v" (this server speaks v{PROTOCOL_VERSION})')
    v = doc["v"]
    if not _is_int(v) or v not in SUPPORTED_VERSIONS:
        raise RequestError(f"unsupported protocol version v={short(v)}: this server speaks v{', v'.join(map(str, SUPPORTED_VERSIONS))}")
    kind = doc.get("kind")
    if kind not in kinds:
        raise RequestError(f"unknown request kind {short(kind)}: expected one of {', '.join(kinds)}")
    return str(kind)


def check_keys(body: dict[str, Any], keys: frozenset[str], what: str) -> None:
    """RequestError naming the keys of ``body`` outside ``keys`` (``what``: "a statistics request", "the diff action")."""
    if not keys.issuperset(body):
        unknown = sorted(str(k) for k in body if k not in keys)
        raise RequestError(f"unknown key(s) in {what}: {', '.join(short(k, 40) for k in unknown[:5])}")


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def name_key(doc: dict[str, Any], key: str, required: bool = False, where: str | None = None) -> str | None:
    value = doc.get(key)
    label = where or key
    if value is None:
        if required:
            raise RequestError(f'missing "{label}"')
        return None
    if not isinstance(value, str):
        raise RequestError(f'"{label}" must be a string, not {short(value)}')
    if len(value) > MAX_NAME_CHARS:
        raise RequestError(f'"{label}" is too long ({len(value):,} characters)')
    if required and not value and key == "table":
        raise RequestError(f'"{label}" must not be empty')
    return value


def required_name(doc: dict[str, Any], key: str, where: str | None = None) -> str:
    """``name_key`` of a key the request must give."""
    value = name_key(doc, key, required=True, where=where)
    assert value is not None  # name_key refused a missing one
    return value


def _names(doc: dict[str, Any], key: str) -> tuple[str, ...] | None:
    value = doc.get(key)
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise RequestError(f'"{key}" must be a list of strings or null, not {short(value)}')
    if len(value) > MAX_LIST_ITEMS:
        raise RequestError(f'"{key}" has too many items ({len(value):,}; at most {MAX_LIST_ITEMS:,})')
    return tuple(value)


def at_keys(doc: dict[str, Any]) -> At | None:
    transaction, snapshot = doc.get("at_transaction"), doc.get("at_snapshot")
    if transaction is None and snapshot is None:
        return None
    if transaction is not None and snapshot is not None:
        raise RequestError('give either "at_transaction" or "at_snapshot", not both')
    if transaction is not None and (not _is_int(transaction) or transaction < 0):
        raise RequestError(f'"at_transaction" must be a whole number >= 0, not {short(transaction)}')
    if snapshot is not None and (not isinstance(snapshot, str) or not snapshot or len(snapshot) > MAX_NAME_CHARS):
        raise RequestError(f'"at_snapshot" must be a snapshot id (a non-empty string), not {short(snapshot)}')
    return At(transaction=transaction, snapshot=snapshot)
