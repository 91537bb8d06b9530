"""The SQL face's engine: DuckDB, locked down, one connection per query.

One in-memory DuckDB database per server, configured before anything runs and then
locked (``lock_configuration``): no external access (no file, URL, ``ATTACH``, ``COPY``,
extension install or load), no extension auto-loading, a memory limit, no spilling.
Each query gets its own connection (``cursor()``: concurrent queries never see each
other's views) on which the system tables it references are registered as Arrow tables,
built for just the metastore tables its ``table_name`` predicates allow
(flight_server/sql/guard.py, tables.py). A timer interrupts a query past its time
limit; a result of more than ``max_rows`` rows is refused.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

import duckdb
import pyarrow as pa

from flight_server.sql import guard
from flight_server.sql.guard import BadQuery, Checked, Refused
from flight_server.sql.tables import SystemTables

DEFAULT_TIMEOUT = 30.0
DEFAULT_MAX_ROWS = 1_000_000
MEMORY_LIMIT = "512MB"


class QueryTimeout(Exception):
    """A query ran past the time limit and was interrupted."""


class TooManyRows(Refused):
    """A result larger than the row limit."""


@dataclass(frozen=True)
class Limits:
    timeout: float = DEFAULT_TIMEOUT  # seconds per query
    max_rows: int = DEFAULT_MAX_ROWS  # rows per result


def _database() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect(
        ":memory:",
        config={
            "enable_external_access": False,
            "autoinstall_known_extensions": False,
            "autoload_known_extensions": False,
            "allow_community_extensions": False,
            "allow_unsigned_extensions": False,
            "memory_limit": MEMORY_LIMIT,
            "temp_directory": "",
            "threads": 1,
            "python_enable_replacements": False,  # no scans of Python variables by name
        },
    )
    con.execute("SET lock_configuration = true")
    return con


_Fetch = Callable[[duckdb.DuckDBPyConnection, str, list[object]], "pa.Table | pa.Schema"]  # runs a query on a connection
K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class _Lru(Generic[K, V]):
    """A small least-recently-used map, bounded in entries and (for tables) bytes."""

    def __init__(self, max_entries: int, max_bytes: int = 0) -> None:
        self.max_entries, self.max_bytes = max_entries, max_bytes
        self._items: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: K) -> V | None:
        with self._lock:
            hit = self._items.get(key)
            if hit is None:
                return None
            self._items.move_to_end(key)
            return hit[0]

    def put(self, key: K, value: V, size: int = 0) -> None:
        if self.max_bytes and size > self.max_bytes // 16:
            return
        with self._lock:
            old = self._items.pop(key, None)
            self._bytes += size - (old[1] if old else 0)
            self._items[key] = (value, size)
            while self._items and (len(self._items) > self.max_entries or (self.max_bytes and self._bytes > self.max_bytes)):
                _, (_, dropped) = self._items.popitem(last=False)
                self._bytes -= dropped


class SqlEngine:
    """Checks and runs SQL over the system tables of ``tables``.

    Checked queries are kept by their text. Results are kept by (query, parameters) for the
    resolver's generation, like the Flight API's results (flight_server/server.py
    ResultCache): the statistics, frequencies, histograms and files of a published state
    never change; a query on ``tables`` or ``history`` (which change without a new state:
    stale_by, a pruned catalog) or calling a function whose value changes (time, random)
    is run every time.
    """

    def __init__(self, tables: SystemTables, limits: Limits | None = None, result_cache_bytes: int = 64 * 1024 * 1024) -> None:
        self.tables = tables
        self.limits = limits or Limits()
        self._db = _database()
        self._lock = threading.Lock()  # cursor() on the shared database
        self._checked: _Lru[Hashable, Checked | pa.Schema] = _Lru(1024, 16 * 1024 * 1024)  # checked queries and result schemas, by query text
        self._results: _Lru[Hashable, pa.Table] = _Lru(1024, result_cache_bytes)

    def _connection(self) -> duckdb.DuckDBPyConnection:
        with self._lock:
            return self._db.cursor()

    def check(self, sql: str) -> Checked:
        checked = self._checked.get(sql)
        if checked is not None:
            return checked
        con = self._connection()
        try:
            checked = guard.check(sql, con)
        finally:
            con.close()
        self._checked.put(sql, checked, len(sql))
        return checked

    def _result_key(self, checked: Checked, parameters: Sequence[object], empty: bool) -> Hashable | None:
        generation = getattr(self.tables.resolver, "generation", None)
        if generation is None or not checked.cacheable:
            return None
        key = (checked.sql, tuple((type(p).__name__, p) for p in parameters), empty, generation)
        try:
            hash(key)
        except TypeError:  # a list or dict parameter
            return None
        return key

    def schema(self, checked: Checked) -> pa.Schema:
        """A query's result schema: the query run on empty system tables, its parameters NULL."""
        key = ("schema", checked.sql, getattr(self.tables.resolver, "generation", None))
        held = self._checked.get(key)
        if held is None:
            held = self._schema(checked)
            self._checked.put(key, held, len(checked.sql))
        return held

    def _schema(self, checked: Checked) -> pa.Schema:
        return self._run(checked, [None] * checked.parameters, empty=True, fetch=_schema_only)

    def run(self, checked: Checked, parameters: Sequence[object] = (), empty: bool = False) -> pa.Table:
        """The result of a checked query (``parameters``: values of its ? placeholders;
        ``empty``: on empty system tables)."""
        if len(parameters) != checked.parameters:
            raise BadQuery(f"the query has {checked.parameters} parameter(s); {len(parameters)} given")
        key = self._result_key(checked, parameters, empty)
        hit = self._results.get(key) if key is not None else None
        if hit is not None:
            return hit
        result = self._run(checked, parameters, empty)
        if key is not None:
            self._results.put(key, result, result.get_total_buffer_size())
        return result

    def _run(self, checked: Checked, parameters: Sequence[object], empty: bool, fetch: _Fetch | None = None) -> pa.Table | pa.Schema:
        con = self._connection()
        timer = threading.Timer(self.limits.timeout, con.interrupt)
        timer.daemon = True
        try:
            for name, only in guard.table_filters(checked, parameters).items():
                con.register(name, self.tables.schema(name, only).empty_table() if empty else self.tables.build(name, only))
            timer.start()
            return (fetch or self._fetch)(con, checked.sql, list(parameters))
        except duckdb.InterruptException:
            raise QueryTimeout(f"the query ran longer than the time limit ({self.limits.timeout:g} s) and was stopped") from None
        except duckdb.PermissionException as exc:
            raise Refused(guard.one_line(exc)) from None
        except (duckdb.ParserException, duckdb.BinderException, duckdb.CatalogException, duckdb.ConversionException) as exc:
            raise BadQuery(guard.one_line(exc)) from None
        except duckdb.Error as exc:
            raise BadQuery(guard.one_line(exc)) from None
        finally:
            timer.cancel()
            con.close()

    def _fetch(self, con: duckdb.DuckDBPyConnection, sql: str, parameters: list[object]) -> pa.Table:
        reader = con.sql(sql, params=parameters or None).to_arrow_reader(64 * 1024)
        batches, rows = [], 0
        for batch in reader:
            rows += batch.num_rows
            if rows > self.limits.max_rows:
                raise TooManyRows(f"the result has more than {self.limits.max_rows:,} rows (the server's limit): add a LIMIT or a WHERE")
            batches.append(batch)
        return pa.Table.from_batches(batches, reader.schema)

    def close(self) -> None:
        self._db.close()


def _schema_only(con: duckdb.DuckDBPyConnection, sql: str, parameters: list[object]) -> pa.Schema:
    """A query's result schema without its rows (DuckDB plans ``LIMIT 0`` on the lazy relation)."""
    return con.sql(sql, params=parameters or None).limit(0).to_arrow_table().schema
