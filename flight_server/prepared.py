"""Prepared answers: per-file Arrow structures that turn the common requests into a slice or one take.

A request through :mod:`engine.lookup` costs a few hundred microseconds of Python
and Arrow calls (open-file and row-group caches, a concat of row groups, a take over
chunked columns, a new partition column, schema metadata). The Flight server answers
thousands of them a second, so for the three hot request shapes it keeps, per
statistics file and served state, the whole answer once in its final form (result
schema and ``metastore.*`` metadata included), contiguous in memory:

- statistics (default statistics, or a subset of them): every row of the file as one
  one-chunk table with the ``partition`` column, and the row of each column: a request is
  a dict lookup per column and one take of those rows (:class:`~flight_server.gather.RowsTable`:
  a copy of the rows in C, with the GIL held, through the Arrow C Data Interface; the table
  is exported to it once, here, when the entry is built);
- top-k frequencies (k up to :data:`TOP_HEAD`): the column's first ``TOP_HEAD`` rows:
  a request is a slice;
- histogram bin ranges: the column's bins as a table: a request is a slice.

Entries are keyed by the file's URI and the served state's identity (table, job id,
snapshot): statistics files are immutable (unique paths per job), so an entry is never
stale, whatever the state. They are kept in one LRU bounded in bytes, and built on the
second request for them; entries of a state no longer served are never asked for again
and age out. Anything else (a value
range, sketches, k beyond the head, a statistics file of more than :data:`MAX_DENSE_ROWS`
columns, time-travel requests) goes through ``engine.lookup`` as before, and so does
every request that would fail: the errors stay those of the lookups.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import TypeVar, cast

from flight_server.gather import RowsTable

T = TypeVar("T")
TOP_HEAD = 1024  # top-k answers prepared per column: k up to this many rows is a slice
MAX_DENSE_ROWS = 20_000  # statistics files with more rows (columns) are served by the lookups


@dataclass(frozen=True)
class StatisticsIndex:
    """Every statistics row of one file (default statistics), as one contiguous, one-chunk table."""

    rows: RowsTable  # partition, column, statistics...; schema metadata: the answer's
    position: dict[str, int]  # column name -> row
    names: frozenset[str]  # the statistic columns (to serve a subset by ``select``)
    selections: dict[tuple[str, ...], RowsTable]  # statistics subsets served so far (bounded)

    def select(self, statistics: tuple[str, ...]) -> RowsTable | None:
        """The table with only ``partition``, ``column`` and ``statistics`` (None: not a plain subset)."""
        hit = self.selections.get(statistics)
        if hit is not None:
            return hit
        wanted = [s for s in statistics if s != "column"]
        if len(set(wanted)) != len(wanted) or not all(s in self.names for s in wanted):
            return None  # duplicates, sketches or unknown names: the lookups decide
        keep = len(self.selections) < 64
        rows = RowsTable(self.rows.table.select(["partition", "column", *wanted]), export=keep)
        if keep:
            self.selections[statistics] = rows
        return rows


class PreparedCache:
    """Prepared answers by key, least recently used first out, bounded in bytes.

    An entry is built on the second request for its key (``admit_after`` requests; the keys
    seen once are remembered in a bounded list): building one costs more than answering one
    request the ordinary way (a whole statistics file, every bin of a column), so a scan of
    keys asked once never builds, nor pushes the entries in use out of the LRU.
    """

    def __init__(self, max_bytes: int = 64 * 1024 * 1024, admit_after: int = 2, seen_keys: int = 65_536) -> None:
        self.max_bytes = max_bytes
        self.admit_after = admit_after
        self.seen_keys = seen_keys
        self._seen: OrderedDict[tuple[Hashable, ...], int] = OrderedDict()  # key -> requests so far (not built yet)
        self._entries: OrderedDict[tuple[Hashable, ...], tuple[object, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()
        self._building: dict[tuple[Hashable, ...], threading.Lock] = {}
        self.hits = 0
        self.builds = 0

    def get(self, key: tuple[Hashable, ...], build: Callable[[], tuple[T | None, int]]) -> T | None:
        """The entry for ``key``, built once (whatever the concurrency) by ``build`` -> (value, bytes),
        or None: the caller serves the request the ordinary way.

        None until the key's ``admit_after``-th request. A value of None (nothing to prepare),
        or one too large to keep, is remembered as None. Errors of ``build`` propagate and
        nothing is remembered.
        """
        entries = self._entries
        entry = entries.get(key)
        if entry is not None:
            self.hits += 1  # unlocked: a lost increment under a race only blurs a statistic
            try:
                entries.move_to_end(key)
            except KeyError:  # evicted meanwhile
                pass
            return cast("T | None", entry[0])  # a key's entry is what its build returned
        if self.max_bytes <= 0:
            return None
        with self._lock:
            seen = self._seen.get(key, 0) + 1
            if seen < self.admit_after:
                self._seen[key] = seen
                self._seen.move_to_end(key)
                while len(self._seen) > self.seen_keys:
                    self._seen.popitem(last=False)
                return None
            self._seen.pop(key, None)
            gate = self._building.setdefault(key, threading.Lock())
        with gate:
            entry = entries.get(key)
            if entry is not None:
                return cast("T | None", entry[0])
            try:
                value, size = build()
                self.builds += 1
                if value is not None and size > self.max_bytes // 4:
                    value = None
                self._put(key, value, size if value is not None else 64)
            finally:
                with self._lock:
                    self._building.pop(key, None)
            return value

    def peek(self, key: tuple[Hashable, ...], build: Callable[[], tuple[T | None, int]] | None = None) -> T | None:
        """The entry for ``key`` if it is built (a hit, counted), else None; never counts a request
        towards admission nor builds (``build`` is ignored: the signature is ``get``'s). The hot
        path (flight_server/hotpath.py) looks here first; on None the ordinary path's ``get`` counts
        the request once."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        self.hits += 1  # unlocked, as in get
        try:
            self._entries.move_to_end(key)
        except KeyError:  # evicted meanwhile
            pass
        return cast("T | None", entry[0])

    def _put(self, key: tuple[Hashable, ...], value: object, size: int) -> None:
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= old[1]
            self._entries[key] = (value, size)
            self._bytes += size
            while self._bytes > self.max_bytes and self._entries:
                _, (_, dropped) = self._entries.popitem(last=False)
                self._bytes -= dropped

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0

    def info(self) -> dict[str, int]:
        with self._lock:
            return {"entries": len(self._entries), "bytes": self._bytes, "hits": self.hits, "builds": self.builds}


__all__ = ["MAX_DENSE_ROWS", "TOP_HEAD", "PreparedCache", "StatisticsIndex"]
