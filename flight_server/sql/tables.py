"""The SQL face's read-only system tables, built as Arrow tables from the lookups.

``tables``, ``statistics``, ``frequencies``, ``histograms``, ``history`` and ``files``
(docs/FLIGHT_SQL.md has their columns). Each is the concatenation of one part per
published metastore table; :class:`SystemTables` builds only the parts a query needs
(``only``: the metastore tables its ``table_name`` predicates allow, see
flight_server/sql/guard.py) and keeps the built parts of immutable states (keyed by the
table's job) in a small LRU, so a repeated query reads no file. Values of a column's
type (histogram edges) are given in their lossless text form (docs/VALUE_FORMS.md), like
``min``/``max`` in statistics.parquet, so one column holds every table's values.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable

import numpy as np
import pyarrow as pa

from engine import values as value_forms
from engine.exceptions import MetastoreError
from engine.files import layout
from flight_server.state import StateResolver, TableState

NAMES = ("tables", "statistics", "frequencies", "histograms", "history", "files")

_S, _I = pa.string(), pa.int64()
_KEY = [pa.field("table_name", _S, nullable=False)]
_PART = [*_KEY, pa.field("partition", _S), pa.field("column_name", _S, nullable=False)]

TABLES_SCHEMA = pa.schema(
    [
        *_KEY,
        pa.field("rows", _I),
        pa.field("partitions", _I),
        pa.field("columns", _I),
        pa.field("job_id", _S),
        pa.field("snapshot", _S),
        pa.field("created_at", _S),
        pa.field("published_at", _S),
        pa.field("stale_by", _I),
    ]
)
FREQUENCIES_SCHEMA = pa.schema([*_PART, pa.field("value", _S), pa.field("frequency", _I)])
HISTOGRAMS_SCHEMA = pa.schema([*_PART, pa.field("bin", _I), pa.field("lower", _S), pa.field("upper", _S), pa.field("count", _I)])
HISTORY_SCHEMA = pa.schema(
    [
        *_KEY,
        pa.field("txn_id", _I),
        pa.field("uuid", _S),
        pa.field("job_id", _S),
        pa.field("snapshot", _S),
        pa.field("published_at", _S),
        pa.field("partitions_added", _I),
        pa.field("partitions_removed", _I),
        pa.field("partitions_tombstoned", _I),
        pa.field("current", pa.bool_()),
    ]
)
FILES_SCHEMA = pa.schema([*_KEY, pa.field("file", _I), pa.field("partition", _S), pa.field("path", _S), pa.field("rows", _I), pa.field("size", _I)])
#: statistics: these, then every statistics.parquet column but ``column`` and the binary sketches
STATISTICS_KEY = pa.schema(_PART)
STALE_BY_SECONDS = 60.0  # how long a table's stale_by (read from the source's history) is reused


class _Parts:
    """Built parts by key, least recently used dropped beyond ``max_bytes``."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes = max_bytes
        self._items: OrderedDict[tuple[Hashable, ...], tuple[pa.Table, int]] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, key: tuple[Hashable, ...], build: Callable[[], pa.Table]) -> pa.Table:
        with self._lock:
            hit = self._items.get(key)
            if hit is not None:
                self._items.move_to_end(key)
                return hit[0]
        part = build()
        size = part.get_total_buffer_size()
        if size <= self.max_bytes // 4:
            with self._lock:
                if key not in self._items:
                    self._items[key] = (part, size)
                    self._bytes += size
                while self._bytes > self.max_bytes and self._items:
                    _, (_, dropped) = self._items.popitem(last=False)
                    self._bytes -= dropped
        return part


class SystemTables:
    """The system tables of a resolver's published states."""

    def __init__(self, resolver: StateResolver, max_bytes: int = 128 * 1024 * 1024) -> None:
        self.resolver = resolver
        self._parts = _Parts(max_bytes)
        self._stale: dict[str, tuple[float, str, int | None]] = {}  # table -> (when, job, stale_by)

    # ------------------------------------------------------------ schemas
    def schema(self, name: str, only: frozenset[str] | None = None) -> pa.Schema:
        """System table ``name``'s schema (``statistics``: its user statistics columns are
        those of the tables in ``only``, all if None)."""
        if name == "statistics":
            return self._statistics_schema(s for s in self.resolver.tables() if only is None or s.table in only)
        return {
            "tables": TABLES_SCHEMA,
            "frequencies": FREQUENCIES_SCHEMA,
            "histograms": HISTOGRAMS_SCHEMA,
            "history": HISTORY_SCHEMA,
            "files": FILES_SCHEMA,
        }[name]

    @staticmethod
    def _statistics_schema(states: Iterable[TableState]) -> pa.Schema:
        fields = list(STATISTICS_KEY)
        seen = {"column", *layout.SKETCH_COLUMNS}
        for state in states:
            try:
                schema = state.stats.statistics_schema()  # the footer (cached); a damaged file fails when its rows are read
            except (MetastoreError, OSError):
                continue
            for f in schema:
                if f.name not in seen:
                    seen.add(f.name)
                    fields.append(f)
        return pa.schema(fields)

    # ------------------------------------------------------------ building
    def build(self, name: str, only: frozenset[str] | None = None) -> pa.Table:
        """System table ``name`` over every published table (``only``: just those named)."""
        states = [s for s in self.resolver.tables() if only is None or s.table in only]
        schema = self.schema(name, only)
        if name == "tables":
            return pa.Table.from_pylist([self._table_row(s) for s in states], schema)
        if name == "history":
            parts = [self._history(s) for s in states]
        else:
            builder = {"statistics": self._statistics, "frequencies": self._frequencies, "histograms": self._histograms, "files": self._files}[name]
            parts = [self._parts.get((name, s.table, s.job_id), lambda s=s: builder(s)) for s in states]  # type: ignore[misc]  # the lambda binds s per item (a lazy builder)
        parts = [_conform(p, schema) for p in parts if p.num_rows]
        return pa.concat_tables(parts) if parts else schema.empty_table()

    def _table_row(self, state: TableState) -> dict[str, object]:
        st = state.stats.state
        return {
            "table_name": state.table,
            "rows": st.rows,
            "partitions": len(st.partitions),
            "columns": len(state.stats.schema),
            "job_id": state.job_id,
            "snapshot": state.snapshot,
            "created_at": None if st.created_at is None else str(st.created_at),
            "published_at": None if state.published_at is None else str(state.published_at),
            "stale_by": self._stale_by(state),
        }

    def _stale_by(self, state: TableState) -> int | None:
        held = self._stale.get(state.table)
        now = time.monotonic()
        if held is not None and held[1] == state.job_id and now - held[0] < STALE_BY_SECONDS:
            return held[2]
        try:
            stale = state.stats.stale_by()
        except (MetastoreError, OSError, ValueError):
            stale = None
        self._stale[state.table] = (now, state.job_id, stale)
        return stale

    @staticmethod
    def _levels(state: TableState) -> list[str | None]:
        return [None, *(p.key for p in state.stats.state.partitions)]

    def _statistics(self, state: TableState) -> pa.Table:
        parts = []
        for partition in self._levels(state):
            t = state.stats.statistics(partition=partition)
            t = t.drop_columns([c for c in layout.SKETCH_COLUMNS if c in t.schema.names])
            names = t.column("column")
            t = t.drop_columns(["column"])
            n = t.num_rows
            for i, (field_name, values) in enumerate(
                (("table_name", pa.array([state.table] * n, _S)), ("partition", pa.array([partition] * n, _S)), ("column_name", names))
            ):
                t = t.add_column(i, field_name, values)
            parts.append(t.replace_schema_metadata(None))
        return pa.concat_tables(parts, promote_options="default")

    def _frequencies(self, state: TableState) -> pa.Table:
        parts = []
        for partition in self._levels(state):
            for column, (_, _, stored, _) in state.stats.frequency_index(partition).items():
                t = state.stats.top_frequencies(column, k=stored, partition=partition)
                parts.append(_keyed(t.replace_schema_metadata(None), state.table, partition, column))
        return pa.concat_tables(parts) if parts else FREQUENCIES_SCHEMA.empty_table()

    def _histograms(self, state: TableState) -> pa.Table:
        parts = []
        for partition in self._levels(state):
            for column in state.stats.schema.names:
                try:
                    t = state.stats.histogram(column, partition=partition)
                except MetastoreError:  # no histogram for this column (not numeric or temporal)
                    continue
                if t.num_rows == 0:
                    continue
                t = t.set_column(1, "lower", value_forms.encode(t.column("lower"))).set_column(2, "upper", value_forms.encode(t.column("upper")))
                parts.append(_keyed(t, state.table, partition, column))
        return pa.concat_tables(parts) if parts else HISTOGRAMS_SCHEMA.empty_table()

    def _history(self, state: TableState) -> pa.Table:
        doc = self.resolver.history(state.table)
        rows = [{"table_name": state.table, **{k: e.get(k) for k in HISTORY_SCHEMA.names[1:]}} for e in doc["history"]]
        return pa.Table.from_pylist(rows, HISTORY_SCHEMA)

    def _files(self, state: TableState) -> pa.Table:
        from engine.fileindex.plan import open_file_index

        try:
            index = open_file_index(state.stats.file_index_directory())
        except MetastoreError:  # no file index (not Parquet files, or --no-file-index)
            return FILES_SCHEMA.empty_table()
        t = index.file_rows(np.arange(index.n))
        n = t.num_rows
        return pa.table(
            {
                "table_name": pa.array([state.table] * n, _S),
                "file": pa.array(np.arange(n), _I),
                "partition": t.column("partition").cast(_S),
                "path": t.column("path"),
                "rows": t.column("rows"),
                "size": t.column("size"),
            }
        )


def _keyed(t: pa.Table, table: str, partition: str | None, column: str) -> pa.Table:
    n = t.num_rows
    t = t.add_column(0, "column_name", pa.array([column] * n, _S))
    t = t.add_column(0, "partition", pa.array([partition] * n, _S))
    return t.add_column(0, "table_name", pa.array([table] * n, _S))


def _conform(t: pa.Table, schema: pa.Schema) -> pa.Table:
    """``t`` with ``schema``'s columns in its order (missing ones null), cast to its types."""
    columns = []
    for f in schema:
        if f.name in t.schema.names:
            col = t.column(f.name)
            columns.append(col if col.type == f.type else col.cast(f.type))
        else:
            columns.append(pa.nulls(t.num_rows, f.type))
    return pa.Table.from_arrays(columns, schema=schema)
