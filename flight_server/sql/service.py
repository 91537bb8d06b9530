"""The Flight SQL face of ``metastore serve``: what each Flight SQL call answers.

The Flight server (flight_server/server.py) hands every descriptor, ticket, DoPut and
action that holds a Flight SQL message (flight_server/sql/protocol.py) to
:class:`FlightSqlService`:

- catalog browsing (GetFlightInfo / GetSchema of CommandGetSqlInfo, GetCatalogs,
  GetDbSchemas, GetTables, GetTableTypes): answered from the system tables' schemas;
- statements (CommandStatementQuery): checked (flight_server/sql/guard.py) and run
  (flight_server/sql/engine.py) by GetFlightInfo; the result waits, under an unguessable
  handle, for the one DoGet of its TicketStatementQuery;
- prepared statements: CreatePreparedStatement checks the query and returns a handle,
  DoPut of CommandPreparedStatementQuery binds parameter rows, GetFlightInfo runs it (once
  per bound row), ClosePreparedStatement forgets it.

Every refusal is a Flight error with a one-line message: PERMISSION_DENIED for what the
SQL face never runs, TIMED_OUT past the time limit, else a "bad request".
"""

from __future__ import annotations

import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

import pyarrow as pa
import pyarrow.flight as flight
from google.protobuf.message import Message

from flight_server.sql import flight_sql_pb2 as pb
from flight_server.sql import protocol
from flight_server.sql.engine import Limits, QueryTimeout, SqlEngine, TooManyRows
from flight_server.sql.guard import CATALOG, SCHEMA, BadQuery, Checked, Refused
from flight_server.sql.protocol import UnsupportedCommand
from flight_server.sql.tables import NAMES, SystemTables
from flight_server.state import StateResolver

TABLE_TYPE = "TABLE"
MAX_BOUND_ROWS = 1_000  # parameter rows bound at once (each is one run of the statement)
MAX_PREPARED = 1_000  # prepared statements held (the oldest is dropped beyond)
MAX_RESULTS = 256  # results waiting for their DoGet
MAX_RESULT_BYTES = 512 * 1024 * 1024
RESULT_TTL = 300.0  # seconds a result waits for its DoGet

CATALOGS_SCHEMA = pa.schema([pa.field("catalog_name", pa.string(), nullable=False)])
DB_SCHEMAS_SCHEMA = pa.schema([pa.field("catalog_name", pa.string()), pa.field("db_schema_name", pa.string(), nullable=False)])
TABLE_TYPES_SCHEMA = pa.schema([pa.field("table_type", pa.string(), nullable=False)])
_TABLES_FIELDS = [
    pa.field("catalog_name", pa.string()),
    pa.field("db_schema_name", pa.string()),
    pa.field("table_name", pa.string(), nullable=False),
    pa.field("table_type", pa.string(), nullable=False),
]
TABLES_SCHEMA = pa.schema(_TABLES_FIELDS)
PRIMARY_KEYS_SCHEMA = pa.schema(
    [
        pa.field("catalog_name", pa.string()),
        pa.field("db_schema_name", pa.string()),
        pa.field("table_name", pa.string(), nullable=False),
        pa.field("column_name", pa.string(), nullable=False),
        pa.field("key_name", pa.string()),
        pa.field("key_sequence", pa.int32(), nullable=False),
    ]
)
_KEY_SIDE = [("catalog_name", True), ("db_schema_name", True), ("table_name", False), ("column_name", False)]
FOREIGN_KEYS_SCHEMA = pa.schema(
    [pa.field(f"pk_{n}", pa.string(), nullable=ok) for n, ok in _KEY_SIDE]
    + [pa.field(f"fk_{n}", pa.string(), nullable=ok) for n, ok in _KEY_SIDE]
    + [
        pa.field("key_sequence", pa.int32(), nullable=False),
        pa.field("fk_key_name", pa.string()),
        pa.field("pk_key_name", pa.string()),
        pa.field("update_rule", pa.uint8(), nullable=False),
        pa.field("delete_rule", pa.uint8(), nullable=False),
    ]
)
TABLES_WITH_SCHEMA = pa.schema([*_TABLES_FIELDS, pa.field("table_schema", pa.binary(), nullable=False)])


def _bad(message: str) -> flight.FlightError:
    return flight.FlightServerError(f"bad request: {message}", b'{"code": "bad_request"}')


def _refused(message: str) -> flight.FlightError:
    return flight.FlightUnauthorizedError(f"refused: {message}", b'{"code": "refused"}')


def to_flight_error(exc: BaseException) -> BaseException:
    if isinstance(exc, QueryTimeout):
        return flight.FlightTimedOutError(str(exc), b'{"code": "timeout"}')
    if isinstance(exc, Refused):
        return _refused(str(exc))
    if isinstance(exc, (BadQuery, UnsupportedCommand)):
        return _bad(str(exc))
    return exc


@dataclass
class Prepared:
    checked: Checked
    rows: list[tuple[Any, ...]] | None = None  # bound parameter rows (DoPut)
    lock: threading.Lock = field(default_factory=threading.Lock)


class _Results:
    """Results waiting for their one DoGet, by handle (bounded in number, bytes and age)."""

    def __init__(self) -> None:
        self._items: OrderedDict[bytes, tuple[float, pa.Table, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def put(self, table: pa.Table) -> bytes:
        handle = secrets.token_bytes(16)
        size = table.get_total_buffer_size()
        now = time.monotonic()
        with self._lock:
            self._items[handle] = (now, table, size)
            self._bytes += size
            while self._items and (
                len(self._items) > MAX_RESULTS or self._bytes > MAX_RESULT_BYTES or now - next(iter(self._items.values()))[0] > RESULT_TTL
            ):
                _, (_, _, dropped) = self._items.popitem(last=False)
                self._bytes -= dropped
        return handle

    def take(self, handle: bytes) -> pa.Table:
        with self._lock:
            entry = self._items.pop(handle, None)
            if entry is not None:
                self._bytes -= entry[2]
        if entry is None:
            raise BadQuery("unknown or already read statement result: execute the query again")
        return entry[1]


class FlightSqlService:
    """The Flight SQL calls over a resolver's published statistics."""

    action_names = protocol.ACTION_NAMES

    def __init__(self, resolver: StateResolver, limits: Limits | None = None) -> None:
        self.tables = SystemTables(resolver)
        self.engine = SqlEngine(self.tables, limits)
        self.results = _Results()
        self._prepared: OrderedDict[bytes, Prepared] = OrderedDict()
        self._lock = threading.Lock()
        try:
            version = metadata.version("metastore")
        except metadata.PackageNotFoundError:
            version = "unknown"
        self._info = protocol.server_info(version, self.engine.limits.timeout)

    def close(self) -> None:
        self.engine.close()

    # ------------------------------------------------------------ GetFlightInfo / GetSchema
    def flight_info(self, descriptor: flight.FlightDescriptor, message: Message) -> flight.FlightInfo:
        try:
            table = self._answer(message)
        except Exception as exc:
            raise to_flight_error(exc) from None
        ticket = protocol.pack(pb.TicketStatementQuery(statement_handle=self.results.put(table)))
        return flight.FlightInfo(table.schema, descriptor, [flight.FlightEndpoint(ticket, [])], table.num_rows, -1)

    def schema(self, message: Message) -> pa.Schema:
        try:
            if isinstance(message, pb.CommandStatementQuery):
                return self._schema_of(self.engine.check(message.query))
            if isinstance(message, pb.CommandPreparedStatementQuery):
                return self._schema_of(self._statement(message.prepared_statement_handle).checked)
            return self._answer(message).schema
        except Exception as exc:
            raise to_flight_error(exc) from None

    def _answer(self, message: Message) -> pa.Table:
        if isinstance(message, pb.CommandStatementQuery):
            return self.engine.run(self.engine.check(message.query))
        if isinstance(message, pb.CommandPreparedStatementQuery):
            return self._run_prepared(message.prepared_statement_handle)
        if isinstance(message, pb.CommandGetSqlInfo):
            return protocol.sql_info(list(message.info), self._info)
        if isinstance(message, pb.CommandGetCatalogs):
            return pa.Table.from_pylist([{"catalog_name": CATALOG}], CATALOGS_SCHEMA)
        if isinstance(message, pb.CommandGetDbSchemas):
            return self._db_schemas(message)
        if isinstance(message, pb.CommandGetTables):
            return self._get_tables(message)
        if isinstance(message, pb.CommandGetTableTypes):
            return pa.Table.from_pylist([{"table_type": TABLE_TYPE}], TABLE_TYPES_SCHEMA)
        if isinstance(message, pb.CommandGetPrimaryKeys):  # the system tables have no keys
            return PRIMARY_KEYS_SCHEMA.empty_table()
        if isinstance(message, (pb.CommandGetExportedKeys, pb.CommandGetImportedKeys)):
            return FOREIGN_KEYS_SCHEMA.empty_table()
        if isinstance(message, (pb.CommandStatementUpdate, pb.CommandPreparedStatementUpdate)):
            raise Refused("updates are refused: this SQL face is read-only")
        raise UnsupportedCommand(f"{type(message).__name__} is not a query: send it with the call it belongs to")

    def _schema_of(self, checked: Checked) -> pa.Schema:
        return self.engine.schema(checked)

    @staticmethod
    def _matches(pattern: str | None, name: str) -> bool:
        if pattern is None:
            return True
        import fnmatch

        translated = pattern.replace("[", "[[]").replace("%", "*").replace("_", "?")
        return fnmatch.fnmatchcase(name, translated)

    def _db_schemas(self, message: pb.CommandGetDbSchemas) -> pa.Table:
        catalog = message.catalog if message.HasField("catalog") else None
        pattern = message.db_schema_filter_pattern if message.HasField("db_schema_filter_pattern") else None
        rows = []
        if catalog in (None, CATALOG) and self._matches(pattern, SCHEMA):
            rows.append({"catalog_name": CATALOG, "db_schema_name": SCHEMA})
        return pa.Table.from_pylist(rows, DB_SCHEMAS_SCHEMA)

    def _get_tables(self, message: pb.CommandGetTables) -> pa.Table:
        catalog = message.catalog if message.HasField("catalog") else None
        schema_pattern = message.db_schema_filter_pattern if message.HasField("db_schema_filter_pattern") else None
        name_pattern = message.table_name_filter_pattern if message.HasField("table_name_filter_pattern") else None
        types = set(message.table_types)
        rows: list[dict[str, object]] = []
        if catalog in (None, CATALOG) and self._matches(schema_pattern, SCHEMA) and (not types or TABLE_TYPE in types):
            for name in sorted(NAMES):
                if self._matches(name_pattern, name):
                    row: dict[str, object] = {"catalog_name": CATALOG, "db_schema_name": SCHEMA, "table_name": name, "table_type": TABLE_TYPE}
                    if message.include_schema:
                        row["table_schema"] = self.tables.schema(name).serialize().to_pybytes()
                    rows.append(row)
        return pa.Table.from_pylist(rows, TABLES_WITH_SCHEMA if message.include_schema else TABLES_SCHEMA)

    # ------------------------------------------------------------ DoGet
    def do_get(self, message: Message) -> flight.FlightDataStream:
        if not isinstance(message, pb.TicketStatementQuery):
            raise _bad(f"a Flight SQL ticket must be a TicketStatementQuery, not {type(message).__name__}")
        try:
            return flight.RecordBatchStream(self.results.take(message.statement_handle))
        except Exception as exc:
            raise to_flight_error(exc) from None

    # ------------------------------------------------------------ prepared statements
    def _statement(self, handle: bytes) -> Prepared:
        with self._lock:
            prepared = self._prepared.get(handle)
            if prepared is not None:
                self._prepared.move_to_end(handle)
        if prepared is None:
            raise BadQuery("unknown prepared statement (closed, or dropped: the server keeps the newest 1,000): prepare it again")
        return prepared

    def _run_prepared(self, handle: bytes) -> pa.Table:
        prepared = self._statement(handle)
        with prepared.lock:
            rows = prepared.rows
        if prepared.checked.parameters and not rows:
            raise BadQuery(f"the prepared statement has {prepared.checked.parameters} parameter(s) and none are bound")
        results, total = [], 0
        for row in rows or [()]:
            results.append(self.engine.run(prepared.checked, list(row)))
            total += results[-1].num_rows
            if total > self.engine.limits.max_rows:
                raise TooManyRows(f"the results have more than {self.engine.limits.max_rows:,} rows (the server's limit): bind fewer rows")
        return results[0] if len(results) == 1 else pa.concat_tables(results)

    def do_put(self, message: Message, reader: flight.MetadataRecordBatchReader, writer: flight.FlightMetadataWriter) -> None:
        try:
            if not isinstance(message, pb.CommandPreparedStatementQuery):
                if isinstance(message, (pb.CommandStatementUpdate, pb.CommandPreparedStatementUpdate)):
                    raise Refused("updates are refused: this SQL face is read-only")
                raise UnsupportedCommand(f"DoPut of {type(message).__name__} is not supported (only binding parameters of a prepared statement)")
            handle = message.prepared_statement_handle
            prepared = self._statement(handle)
            table = _bound_rows(reader)
            if table.num_columns != prepared.checked.parameters:
                raise BadQuery(f"the prepared statement has {prepared.checked.parameters} parameter(s); {table.num_columns} bound")
            rows = [tuple(r.values()) for r in table.to_pylist()]
            with prepared.lock:
                prepared.rows = rows
            writer.write(pb.DoPutPreparedStatementResult(prepared_statement_handle=handle).SerializeToString())
        except Exception as exc:
            raise to_flight_error(exc) from None

    # ------------------------------------------------------------ actions
    def action(self, kind: str, body: bytes) -> Iterator[bytes]:
        try:
            if kind in protocol.REFUSED_ACTIONS:
                raise Refused(f"{kind} is not supported: this SQL face is read-only, without transactions")
            message = protocol.unpack(body)
            if kind == protocol.ACTION_CREATE and isinstance(message, pb.ActionCreatePreparedStatementRequest):
                return iter([self._create(message.query)])
            if kind == protocol.ACTION_CLOSE and isinstance(message, pb.ActionClosePreparedStatementRequest):
                with self._lock:
                    self._prepared.pop(message.prepared_statement_handle, None)
                return iter([])
            raise BadQuery(f"the {kind} action needs its Flight SQL request message in the body")
        except Exception as exc:
            raise to_flight_error(exc) from None

    def _create(self, query: str) -> bytes:
        checked = self.engine.check(query)
        dataset = self._schema_of(checked)
        parameters = pa.schema([pa.field(f"parameter_{i + 1}", pa.null()) for i in range(checked.parameters)])
        handle = secrets.token_bytes(16)
        with self._lock:
            self._prepared[handle] = Prepared(checked)
            while len(self._prepared) > MAX_PREPARED:
                self._prepared.popitem(last=False)
        result = pb.ActionCreatePreparedStatementResult(
            prepared_statement_handle=handle,
            dataset_schema=dataset.serialize().to_pybytes(),
            parameter_schema=parameters.serialize().to_pybytes() if checked.parameters else b"",
        )
        return protocol.pack(result)


def _bound_rows(reader: flight.MetadataRecordBatchReader) -> pa.Table:
    """The parameter rows a DoPut sends, read batch by batch: more than MAX_BOUND_ROWS is refused."""
    batches, rows = [], 0
    while True:
        try:
            chunk = reader.read_chunk()
        except StopIteration:
            break
        if chunk.data is None:
            continue
        rows += chunk.data.num_rows
        if rows > MAX_BOUND_ROWS:
            raise Refused(f"more than {MAX_BOUND_ROWS:,} parameter rows bound at once")
        batches.append(chunk.data)
    return pa.Table.from_batches(batches, reader.schema)
