"""The hot path of ``do_get``: the common tickets answered before the general dispatch.

Nearly every ticket a planner fleet sends is one of three shapes: the statistics of some
columns, the top frequencies of a column, or a bin range of its histogram, at table level
or of one partition, of the current state. The general path reads such a ticket with the
full protocol parser (:func:`flight_server.requests.parse`: every key checked, errors
worded) and answers it through :class:`~flight_server.service.StatisticsService`, whose
prepared answers (flight_server/prepared.py) make the answer itself one take or slice.
Under load (16 closed-loop clients on two cores) the Python calls around that take were
most of a request's cost over a no-op pyarrow server: each one holds the GIL the other
handlers wait for. :class:`HotPath` answers the same tickets with fewer:

1. the ticket's bytes in the result cache (flight_server/results.py), valid for the
   resolver's generation: a ticket answered before costs no parse at all;
2. else :func:`common_request`: the JSON read and the request built with type checks only,
   for exactly the shapes above (any other key, type or value: None);
3. else (None) or when no prepared entry is built yet: the general path, unchanged, which
   also words every error (the hot path never answers a request that would fail).

What it answers is what the general path answers: the same request dataclass
(``common_request(raw)`` is ``requests.parse(raw)`` or None; tests/flight_server/test_hotpath.py),
the same state (``resolver.resolve``), the same prepared entry (``StatisticsService.prepared_hit``),
and the same result cache (its hits and misses counted once per ticket: the general path
does not look again).

Authentication and disclosure are not this module's, and it cannot skip them: the
middleware (flight_server/auth.py) checks every call's token before ``do_get`` runs, and the
answers are the statistics any accepted token may read (engine/tokens.py has no per-token
scope), so the cache key needs no caller. Were tokens ever scoped (a table per token),
the scope would have to be part of every key here and in the result cache. Exact subsets
(``where``/``exact``: rate-limited per client, flight_server/exact.py) and time travel
(``at_*``) never take this path.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import Any, TypeGuard

import pyarrow as pa

from flight_server.protocol import (
    MAX_K,
    MAX_LIST_ITEMS,
    MAX_NAME_CHARS,
    MAX_REQUEST_BYTES,
    PROTOCOL_VERSION,
    HistogramRequest,
    Request,
    StatisticsRequest,
    TopFrequenciesRequest,
)
from flight_server.results import ResultCache
from flight_server.service import StatisticsService
from flight_server.state import StateResolver

__all__ = ["HotPath", "common_request"]

_DECODER = json.JSONDecoder()  # no floats or constants get through the type checks below
_SURROGATE_ESCAPE = re.compile(rb"\\[uU][dD][89a-fA-F]")  # maybe a lone surrogate: the parser's to refuse
_STR = {str}
_STATISTICS_KEYS = frozenset(("v", "kind", "table", "columns", "partition", "statistics"))
_TOP_KEYS = frozenset(("v", "kind", "table", "column", "k", "partition", "typed"))
_HISTOGRAM_KEYS = frozenset(("v", "kind", "table", "column", "bins", "partition"))


def _name(value: object) -> TypeGuard[str]:
    return type(value) is str and len(value) <= MAX_NAME_CHARS


def _names(value: object) -> bool:
    """Whether ``value`` is null or a list of strings (the parser's ``_names``)."""
    if value is None:
        return True
    if type(value) is not list or len(value) > MAX_LIST_ITEMS:
        return False
    return not value or set(map(type, value)) == _STR  # in C: no Python call per name


def _statistics(doc: dict[str, Any], table: str) -> StatisticsRequest | None:
    if not _STATISTICS_KEYS.issuperset(doc):
        return None  # partitions, where, at_*, unknown keys: the parser's
    columns, statistics, partition = doc.get("columns"), doc.get("statistics"), doc.get("partition")
    if not _names(columns) or not _names(statistics) or (partition is not None and not _name(partition)):
        return None
    return StatisticsRequest(
        table=table,
        columns=None if columns is None else tuple(columns),
        partition=partition,
        statistics=None if statistics is None else tuple(statistics),
    )


def _top(doc: dict[str, Any], table: str) -> TopFrequenciesRequest | None:
    if not _TOP_KEYS.issuperset(doc):
        return None
    column, k, typed, partition = doc.get("column"), doc.get("k", 20), doc.get("typed", False), doc.get("partition")
    if not _name(column) or type(k) is not int or not 0 <= k <= MAX_K or type(typed) is not bool:
        return None
    if partition is not None and not _name(partition):
        return None
    return TopFrequenciesRequest(table=table, column=column, k=k, partition=partition, typed=typed)


def _histogram(doc: dict[str, Any], table: str) -> HistogramRequest | None:
    if not _HISTOGRAM_KEYS.issuperset(doc):
        return None  # value_range too: the parser checks its bounds
    column, bins, partition = doc.get("column"), doc.get("bins"), doc.get("partition")
    if not _name(column) or (partition is not None and not _name(partition)):
        return None
    if bins is not None:
        if type(bins) is not list or len(bins) != 2:
            return None
        start, stop = bins
        if type(start) is not int or type(stop) is not int or not 0 <= start <= stop:
            return None
        bins = (start, stop)
    return HistogramRequest(table=table, column=column, bins=bins, partition=partition)


_KINDS: dict[str, Callable[[dict[str, Any], str], Request | None]] = {
    "statistics": _statistics,
    "top_frequencies": _top,
    "histogram": _histogram,
}


def common_request(raw: bytes) -> Request | None:
    """The request of a ticket of one of the common shapes (what ``requests.parse`` returns for
    it), or None: any other ticket, valid or not, which the general path reads."""
    if len(raw) > MAX_REQUEST_BYTES or _SURROGATE_ESCAPE.search(raw) is not None:
        return None
    try:
        doc = _DECODER.decode(raw.decode("utf-8"))  # a BOM, bad UTF-8 or bad JSON raise
    except (ValueError, RecursionError):
        return None
    if type(doc) is not dict:
        return None
    v, kind, table = doc.get("v"), doc.get("kind"), doc.get("table")
    parse = _KINDS.get(kind) if type(kind) is str else None
    if parse is None or type(v) is not int or v != PROTOCOL_VERSION or type(table) is not str or not table or len(table) > MAX_NAME_CHARS:
        return None
    return parse(doc, table)


class HotPath:
    """Answers the common tickets from the result cache or a prepared entry (see the module docstring)."""

    def __init__(self, resolver: StateResolver, service: StatisticsService, results: ResultCache) -> None:
        self.resolver = resolver
        self.service = service
        self.results = results

    def answer(self, raw: bytes, generation: int | None) -> pa.Table | None:
        """The answer to ticket ``raw``, or None: the general path answers it (the result cache
        already looked up: the general path does not look again). ``generation``: the resolver's,
        read before anything is resolved (None: a resolver without one, no result cache)."""
        if generation is not None:
            hit = self.results.get(raw, generation)
            if hit is not None:
                return hit
        request = common_request(raw)
        if request is None:
            return None
        try:
            table = self.service.prepared_hit(self.resolver.resolve(request.table), request)
        except Exception:  # an unknown table...: the general path says so
            return None
        if table is not None and generation is not None:
            self.results.put(raw, generation, table)
        return table
