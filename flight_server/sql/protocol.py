"""Flight SQL on the wire: commands packed as ``google.protobuf.Any`` (flight_sql.proto).

A Flight SQL client puts an ``Any`` holding one of the messages of package
``arrow.flight.protocol.sql`` in a descriptor's cmd, a ticket or an action body;
:func:`unpack` tells them from the server's own JSON requests (flight_server/protocol.py)
by the ``Any``'s type URL. :func:`sql_info` answers GetSqlInfo in its dense-union schema.
"""

from __future__ import annotations

import pyarrow as pa
from google.protobuf import any_pb2
from google.protobuf.message import DecodeError, Message

from flight_server.sql import flight_sql_pb2 as pb

PACKAGE = "arrow.flight.protocol.sql"
TYPE_URL_PREFIX = f"type.googleapis.com/{PACKAGE}."
ACTION_CREATE = "CreatePreparedStatement"
ACTION_CLOSE = "ClosePreparedStatement"
#: Flight SQL actions a client may send that this read-only server refuses by name
REFUSED_ACTIONS = frozenset({"BeginTransaction", "EndTransaction", "BeginSavepoint", "EndSavepoint", "CreatePreparedSubstraitPlan", "CancelQuery"})
ACTION_NAMES = frozenset({ACTION_CREATE, ACTION_CLOSE}) | REFUSED_ACTIONS


class UnsupportedCommand(Exception):
    """A Flight SQL message this server does not implement (the message names it)."""


def unpack(raw: bytes) -> Message | None:
    """The Flight SQL message in ``raw`` (an ``Any``), None if ``raw`` is not Flight SQL."""
    if not raw or raw[:1] != b"\n":  # an Any starts with field 1 (type_url), length-delimited
        return None
    packed = any_pb2.Any()
    try:
        packed.ParseFromString(raw)
    except DecodeError:
        return None
    if not packed.type_url.startswith(TYPE_URL_PREFIX):
        return None
    name = packed.type_url[len(TYPE_URL_PREFIX) :]
    cls = getattr(pb, name, None)
    if not (isinstance(cls, type) and issubclass(cls, Message)):
        raise UnsupportedCommand(
            f"the Flight SQL command {name[:80]} is not supported by this server (read-only: SELECT queries and catalog browsing)"
        )
    message = cls()
    try:
        packed.Unpack(message)
    except DecodeError:
        raise UnsupportedCommand(f"a malformed Flight SQL {name} message") from None
    return message


def pack(message: Message) -> bytes:
    packed = any_pb2.Any()
    packed.Pack(message)
    return packed.SerializeToString()


# ================================================================ GetSqlInfo
SERVER_NAME, SERVER_VERSION, SERVER_ARROW_VERSION, SERVER_READ_ONLY, SERVER_SQL, SERVER_SUBSTRAIT = 0, 1, 2, 3, 4, 5
SERVER_TRANSACTION, SERVER_CANCEL, SERVER_STATEMENT_TIMEOUT = 8, 9, 100
SQL_DDL_CATALOG, SQL_DDL_SCHEMA, SQL_DDL_TABLE, SQL_IDENTIFIER_QUOTE_CHAR, SQL_CATALOG_TERM = 500, 501, 502, 504, 531

_STRING, _BOOL, _BIGINT, _INT32, _STRING_LIST, _MAP = range(6)
VALUE_TYPE = pa.dense_union(
    [
        pa.field("string_value", pa.string()),
        pa.field("bool_value", pa.bool_()),
        pa.field("bigint_value", pa.int64()),
        pa.field("int32_bitmask", pa.int32()),
        pa.field("string_list", pa.list_(pa.string())),
        pa.field("int32_to_int32_list_map", pa.map_(pa.int32(), pa.list_(pa.int32()))),
    ],
    type_codes=list(range(6)),
)
SQL_INFO_SCHEMA = pa.schema([pa.field("info_name", pa.uint32(), nullable=False), pa.field("value", VALUE_TYPE, nullable=False)])


def sql_info(requested: list[int], values: dict[int, tuple[int, object]]) -> pa.Table:
    """GetSqlInfo's answer: one row per requested (known) info id, all if none is requested."""
    ids = [i for i in (requested or sorted(values)) if i in values]
    children: list[list[object]] = [[] for _ in range(6)]
    codes, offsets = [], []
    for i in ids:
        code, value = values[i]
        codes.append(code)
        offsets.append(len(children[code]))
        children[code].append(value)
    arrays = [pa.array(children[k], VALUE_TYPE.field(k).type) for k in range(6)]
    union = pa.UnionArray.from_dense(
        pa.array(codes, pa.int8()),
        pa.array(offsets, pa.int32()),
        arrays,
        [VALUE_TYPE.field(k).name for k in range(6)],
        list(range(6)),
    )
    return pa.Table.from_arrays([pa.array(ids, pa.uint32()), union], schema=SQL_INFO_SCHEMA)


def server_info(version: str, timeout: float) -> dict[int, tuple[int, object]]:
    return {
        SERVER_NAME: (_STRING, "metastore"),
        SERVER_VERSION: (_STRING, version),
        SERVER_ARROW_VERSION: (_STRING, pa.__version__),
        SERVER_READ_ONLY: (_BOOL, True),
        SERVER_SQL: (_BOOL, True),
        SERVER_SUBSTRAIT: (_BOOL, False),
        SERVER_TRANSACTION: (_INT32, 0),  # SQL_SUPPORTED_TRANSACTION_NONE
        SERVER_CANCEL: (_BOOL, False),
        SERVER_STATEMENT_TIMEOUT: (_INT32, 0),  # prepared statement handles do not time out (they are bounded in number)
        SQL_DDL_CATALOG: (_BOOL, False),
        SQL_DDL_SCHEMA: (_BOOL, False),
        SQL_DDL_TABLE: (_BOOL, False),
        SQL_IDENTIFIER_QUOTE_CHAR: (_STRING, '"'),
        SQL_CATALOG_TERM: (_STRING, "catalog"),
    }
