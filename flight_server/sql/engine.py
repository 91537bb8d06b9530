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

import json
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

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
        },
    )
    con.execute("SET lock_configuration = true")
    return con


class SqlEngine:
    """Checks and runs SQL over the system tables of ``tables``."""

    def __init__(self, tables: SystemTables, limits: Limits | None = None) -> None:
        self.tables = tables
        self.limits = limits or Limits()
        self._db = _database()
        self._lock = threading.Lock()  # cursor() on the shared database

    def _connection(self) -> duckdb.DuckDBPyConnection:
        with self._lock:
            return self._db.cursor()

    def check(self, sql: str) -> Checked:
        con = self._connection()
        try:
            return guard.check(sql, con)
        finally:
            con.close()

    def schema(self, checked: Checked) -> pa.Schema:
        """A query's result schema: the query run on empty system tables, its parameters NULL."""
        con = self._connection()
        try:
            row = con.execute("SELECT json_deserialize_sql(?::JSON)", [json.dumps(checked.tree)]).fetchone()
        finally:
            con.close()
        probe = Checked(
            sql=f"SELECT * FROM ({row[0] if row else checked.sql}) LIMIT 0", tree=checked.tree, tables=checked.tables, parameters=checked.parameters
        )
        return self.run(probe, [None] * checked.parameters, empty=True).schema

    def run(self, checked: Checked, parameters: Sequence[Any] = (), empty: bool = False) -> pa.Table:
        """The result of a checked query (``parameters``: values of its ? placeholders;
        ``empty``: on empty system tables)."""
        if len(parameters) != checked.parameters:
            raise BadQuery(f"the query has {checked.parameters} parameter(s); {len(parameters)} given")
        con = self._connection()
        timer = threading.Timer(self.limits.timeout, con.interrupt)
        timer.daemon = True
        try:
            for name, only in guard.table_filters(checked, parameters).items():
                con.register(name, self.tables.schema(name).empty_table() if empty else self.tables.build(name, only))
            timer.start()
            return self._fetch(con, checked.sql, list(parameters))
        except duckdb.InterruptException:
            raise QueryTimeout(f"the query ran longer than the time limit ({self.limits.timeout:g} s) and was stopped") from None
        except duckdb.PermissionException as exc:
            raise Refused(guard._first_line(exc)) from None
        except (duckdb.ParserException, duckdb.BinderException, duckdb.CatalogException, duckdb.ConversionException) as exc:
            raise BadQuery(guard._first_line(exc)) from None
        except duckdb.Error as exc:
            raise BadQuery(guard._first_line(exc)) from None
        finally:
            timer.cancel()
            con.close()

    def _fetch(self, con: duckdb.DuckDBPyConnection, sql: str, parameters: list[Any]) -> pa.Table:
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
