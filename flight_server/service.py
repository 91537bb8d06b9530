"""Requests to Arrow data, with the partial reads of engine.lookup (no Flight here).

:class:`StatisticsService` answers each do_get kind of :mod:`flight_server.requests`
(``HANDLERS``: one :class:`KindHandler` per kind) for the state a :class:`~flight_server.state.StateResolver` gives it:

- ``describe(request)``: the result schema and a row estimate, from file footers
  and the manifest only (no data pages), for ``get_flight_info``;
- ``execute(request)``: the result as a schema and an iterator of Arrow tables
  (one per partition for a multi-partition statistics request), for ``do_get``.

Everything a request names (table, partitions, columns, statistics, bounds) is
checked before the first table is produced, so a stream never fails half-way
over a bad request.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

import pyarrow as pa

from engine import expressions as ex
from engine import types as mt
from engine import values as value_forms
from engine.columns import display_name
from engine.exceptions import ExpressionError, InvalidArgumentError
from engine.expressions import Expression, comparable
from engine.files import layout
from engine.jsontypes import JSON
from engine.lookup import TableStatistics
from engine.stats.histograms import edge_type, storage_type, to_domain
from engine.subset.model import METADATA_KEY
from flight_server import requests
from flight_server.gather import RowsTable
from flight_server.prepared import MAX_DENSE_ROWS, TOP_HEAD, PreparedCache, StatisticsIndex
from flight_server.protocol import (
    ALL_PARTITIONS,
    Filter,
    HistogramRequest,
    PartitionsMatchingRequest,
    PlanFilesRequest,
    Request,
    RequestError,
    StatisticsRequest,
    TopFrequenciesRequest,
    short,
)
from flight_server.state import StateResolver, TableState

PARTITIONS_MATCHING_SCHEMA = pa.schema(
    [
        ("partition", pa.string()),
        ("rows", pa.int64()),
        ("null_count", pa.int64()),
        ("nan_count", pa.int64()),
        ("min", pa.string()),
        ("max", pa.string()),
    ]
)


#: how a prepared answer has its entry: PreparedCache.get (admits and builds) or .peek (built ones only)
Entry = Callable[[tuple[Any, ...], Callable[[], tuple[Any, int]]], Any]


@dataclass
class Plan:
    """What a request returns, known before reading any data page."""

    state: TableState
    schema: pa.Schema  # with the metastore.* metadata
    total_records: int  # an estimate (an upper bound for histograms and partitions_matching)


@dataclass
class Result:
    state: TableState
    schema: pa.Schema
    tables: Iterator[pa.Table]  # each already conforming to ``schema``
    count: int = 1  # how many tables ``tables`` yields (one per partition for a multi-partition request)


class StatisticsService:
    """``prepared_bytes``: the budget of prepared answers (:mod:`flight_server.prepared`; 0: off)."""

    def __init__(self, resolver: StateResolver, prepared_bytes: int = 64 * 1024 * 1024) -> None:
        self.resolver = resolver
        self.prepared = PreparedCache(prepared_bytes)

    # ------------------------------------------------------------ entry points
    def describe(self, request: Request) -> Plan:
        state = self.resolver.resolve(request.table, request.at)
        request = _stored_names(state, request)
        subset = _subset_answer(state, request)
        schema, rows = HANDLERS[request.kind].describe(state, request) if subset is None else (subset.schema, subset.num_rows)
        md = _metadata(state, request)
        methods = (schema.metadata or {}).get(_SUBSET_KEY)
        if methods is not None:  # a subset's methods (docs/SUBSETS.md) are part of its schema
            md[_SUBSET_KEY.decode()] = methods.decode()
        return Plan(state, schema.with_metadata(md), rows)

    def execute(self, request: Request) -> Result:
        state = self.resolver.resolve(request.table, request.at)
        request = _stored_names(state, request)
        table = self._prepared_answer(state, request)
        if table is not None:
            return Result(state, table.schema, iter((table,)), 1)
        return self._execute(state, request)

    def prepared_hit(self, state: TableState, request: Request) -> pa.Table | None:
        """The answer from a prepared entry already built, or None: the caller answers through
        ``execute`` (nothing is built here, nor counted towards an entry's admission, so that
        ``execute`` counts the request once). The hot path's (flight_server/hotpath.py)."""
        return self._prepared_answer(state, _stored_names(state, request), self.prepared.peek)

    def partitions_of(self, state: TableState, request: StatisticsRequest) -> list[str | None]:
        """The partitions a statistics request reads, in order (``[None]``: the table level)."""
        return _statistics_partitions(state.stats, request)

    def execute_table(self, request: Request) -> pa.Table:
        """The whole result as one table (tests and in-process callers)."""
        return _one_table(self.execute(request))

    def execute_unprepared(self, request: Request) -> pa.Table:
        """The whole result as one table, straight from the lookups (never a prepared answer)."""
        state = self.resolver.resolve(request.table, request.at)
        return _one_table(self._execute(state, _stored_names(state, request)))

    # ------------------------------------------------------------ the ordinary path
    def _execute(self, state: TableState, request: Request) -> Result:
        subset = _subset_answer(state, request)
        schema, tables = HANDLERS[request.kind].execute(state, request) if subset is None else (subset.schema, iter([subset]))
        schema = schema.with_metadata({**(schema.metadata or {}), **_metadata_bytes(state, request)})
        count = len(_statistics_partitions(state.stats, request)) if isinstance(request, StatisticsRequest) else 1
        return Result(state, schema, (_display_names(t).replace_schema_metadata(schema.metadata) for t in tables), count)

    # ------------------------------------------------------------ prepared answers
    def _prepared_answer(self, state: TableState, request: Request, entry: Entry | None = None) -> pa.Table | None:
        """The answer as a take or slice of a prepared one, or None: the ordinary path answers
        (also every request that fails, so errors stay those of the lookups). ``entry``: how an
        entry is had (default: ``self.prepared.get``, which admits and builds)."""
        if getattr(request, "where", None) is not None:
            return None  # a subset: answered by the lookups (engine/subset)
        entry = entry or self.prepared.get
        try:
            if isinstance(request, StatisticsRequest):
                return self._prepared_statistics(state, request, entry)
            if isinstance(request, TopFrequenciesRequest):
                return self._prepared_top(state, request, entry)
            if isinstance(request, HistogramRequest):
                return self._prepared_histogram(state, request, entry)
        except Exception:
            return None
        return None

    def _prepared_statistics(self, state: TableState, request: StatisticsRequest, entry: Entry) -> pa.Table | None:
        if request.partitions is not None:
            return None
        partition = request.partition
        ts = state.stats
        key = ("statistics", state.table, state.job_id, state.snapshot, ts.file_uri(layout.STATISTICS_FILE, partition), partition)
        index: StatisticsIndex | None = entry(key, lambda: self._statistics_index(state, partition))
        if index is None:
            return None
        rows = index.rows if request.statistics is None else index.select(request.statistics)
        if rows is None or request.columns is None:
            return None if rows is None else rows.table
        position = index.position
        return rows.take([position[c] for c in request.columns])  # KeyError: the lookups name the unknown columns

    def _statistics_index(self, state: TableState, partition: str | None) -> tuple[StatisticsIndex | None, int]:
        columns = state.stats.statistics_columns(partition)
        if len(columns) > MAX_DENSE_ROWS:
            return None, 0
        t = _one_table(self._execute(state, StatisticsRequest(table=state.table, partition=partition))).combine_chunks()
        batches = t.to_batches()
        batch = batches[0] if batches else pa.RecordBatch.from_arrays([pa.array([], f.type) for f in t.schema], schema=t.schema)
        if batch.num_rows != len(columns):
            return None, 0  # not one row per listed column: leave it to the lookups
        index = StatisticsIndex(
            rows=RowsTable(pa.Table.from_batches([batch])),
            position={c: i for i, c in enumerate(columns)},
            names=frozenset(n for n in batch.schema.names if n != "partition"),
            selections={},
        )
        return index, batch.nbytes + 120 * len(columns)

    def _prepared_top(self, state: TableState, request: TopFrequenciesRequest, entry: Entry) -> pa.Table | None:
        if request.k > TOP_HEAD:
            return None
        ts = state.stats
        uri = ts.file_uri(layout.FREQUENCIES_FILE, request.partition)
        key = ("top_frequencies", state.table, state.job_id, state.snapshot, uri, request.partition, request.column, request.typed)
        head = entry(key, lambda: self._whole(state, dataclasses.replace(request, k=TOP_HEAD)))
        return None if head is None else head.slice(0, request.k)

    def _prepared_histogram(self, state: TableState, request: HistogramRequest, entry: Entry) -> pa.Table | None:
        if request.value_range is not None:
            return None
        ts = state.stats
        uri = ts.file_uri(layout.HISTOGRAMS_FILE, request.partition)
        key = ("histogram", state.table, state.job_id, state.snapshot, uri, request.partition, request.column)
        full = entry(key, lambda: self._whole(state, dataclasses.replace(request, bins=None)))
        if full is None or request.bins is None:
            return full
        n = full.num_rows  # every bin of the column (none without a histogram spec)
        start, stop = max(0, request.bins[0]), min(n, request.bins[1])
        if start >= stop:
            start = stop = min(start, n)
        return full.slice(start, stop - start)

    def _whole(self, state: TableState, request: Request) -> tuple[pa.Table, int]:
        t = _one_table(self._execute(state, request)).combine_chunks()
        return t, t.nbytes + 1024


def _stored_names(state: TableState, request: Request) -> Request:
    """The request with its columns as stored (engine/columns.py): a request may name a column
    by its stored name (``s.x``, ``qty\\.units``), as in the data (``qty.units``) or by its
    display form (``s > x``, what answers name it); unknown names stay as they are, for the error."""
    if isinstance(request, StatisticsRequest) and request.columns is not None:
        columns = state.stats.resolve_columns(request.columns)
        return request if columns == request.columns else dataclasses.replace(request, columns=columns)
    resolve = state.stats.resolve_column
    if isinstance(request, (TopFrequenciesRequest, HistogramRequest)):
        column = resolve(request.column)
        return request if column == request.column else dataclasses.replace(request, column=column)  # nearly always as stored
    if isinstance(request, PartitionsMatchingRequest) and isinstance(request.filter, Filter):
        return dataclasses.replace(request, filter=dataclasses.replace(request.filter, column=resolve(request.filter.column)))
    return request


def _display_names(t: pa.Table) -> pa.Table:
    """An answer with its ``column`` values as people read them (engine/columns.py ``display_name``:
    ``qty.units``, not the stored ``qty\\.units``; a struct leaf ``s > x``)."""
    i = t.schema.get_field_index("column")
    if i < 0 or t.num_rows == 0:
        return t
    names = t.column(i).to_pylist()
    if not any(n is not None and ("." in n or "\\" in n) for n in names):
        return t  # nearly every table: no name has another display form
    shown = pa.array([None if n is None else display_name(n) for n in names], t.schema.field(i).type)
    return t.set_column(i, t.schema.field(i), shown)


def _one_table(result: Result) -> pa.Table:
    parts = list(result.tables)
    if len(parts) == 1:
        return parts[0]
    return pa.concat_tables(parts) if parts else result.schema.empty_table()


def _metadata(state: TableState, request: Request) -> dict[str, str]:
    return {
        "metastore.table": state.table,
        "metastore.job_id": state.job_id,
        "metastore.snapshot": state.snapshot,
        "metastore.request_kind": request.kind,
    }


def _metadata_bytes(state: TableState, request: Request) -> dict[bytes, bytes]:
    return {k.encode(): v.encode() for k, v in _metadata(state, request).items()}


# ============================================================== statistics
def _statistics_partitions(ts: TableStatistics, request: StatisticsRequest) -> list[str | None]:
    keys = [p.key for p in ts.state.partitions]
    if request.partitions == ALL_PARTITIONS:
        return list(keys)
    if isinstance(request.partitions, tuple):
        _check_partitions(ts, request.partitions, keys)
        return list(request.partitions)
    if request.partition is not None:
        _check_partitions(ts, (request.partition,), keys)
        return [request.partition]
    return [None]


def _check_partitions(ts: TableStatistics, asked: tuple[str, ...], keys: list[str]) -> None:
    known = set(keys)
    missing = [p for p in asked if p not in known]
    if missing:
        shown = ", ".join(keys[:5]) + (f", ... ({len(keys)} in all)" if len(keys) > 5 else "")
        raise InvalidArgumentError(f"table {ts.table!r} has no partition {short(missing[0])}; its partitions: {shown or '(none)'}")


_PARTITION_FIELD = pa.field("partition", pa.string())
_SUBSET_KEY = METADATA_KEY.encode()  # a subset answer's methods (engine/subset)
_schemas: dict[tuple[Any, ...], pa.Schema] = {}  # (run, partition, statistics) -> result schema; files are immutable


def _statistics_schema(ts: TableStatistics, request: StatisticsRequest, first: str | None) -> pa.Schema:
    key = (ts.state.run_uri, first, request.statistics)
    schema = _schemas.get(key)
    if schema is None:
        inner = ts.statistics_schema(first, list(request.statistics) if request.statistics is not None else None)
        schema = pa.schema([_PARTITION_FIELD, *inner])
        if len(_schemas) > 4096:
            _schemas.clear()
        _schemas[key] = schema
    return schema


_column_sets: dict[str, frozenset[str]] = {}  # run -> the columns with statistics (manifest leaves)


def _check_columns(ts: TableStatistics, columns: tuple[str, ...] | None) -> None:
    if columns is None:
        return
    run = ts.state.run_uri
    known = _column_sets.get(run)
    if known is None:
        if len(_column_sets) > 1024:
            _column_sets.clear()
        known = _column_sets[run] = frozenset(c["name"] for c in ts.state.columns)
    missing = [c for c in columns if c not in known]
    if missing:
        shown = ", ".join(short(c, 40) for c in missing[:5]) + (f", ... ({len(missing)} in all)" if len(missing) > 5 else "")
        raise InvalidArgumentError(f"table {ts.table!r} has no statistics for column(s): {shown}")


def _subset_statistics(state: TableState, request: StatisticsRequest) -> pa.Table:
    """A statistics request with ``where``: one table-level answer, the methods in its schema metadata."""
    ts = state.stats
    _check_columns(ts, request.columns)
    columns = list(request.columns) if request.columns is not None else None
    statistics = list(request.statistics) if request.statistics is not None else None
    t = ts.statistics(columns, statistics=statistics, where=request.where, exact=request.exact)
    t = t.add_column(0, _PARTITION_FIELD, pa.nulls(t.num_rows, pa.string()))
    return _conform(t, _statistics_schema(ts, request, None)).replace_schema_metadata(t.schema.metadata)


def _describe_statistics(state: TableState, request: StatisticsRequest) -> tuple[pa.Schema, int]:
    ts = state.stats
    _check_columns(ts, request.columns)
    parts = _statistics_partitions(ts, request)
    n_columns = len(request.columns) if request.columns is not None else len(ts.state.columns)
    return _statistics_schema(ts, request, parts[0] if parts else None), n_columns * len(parts)


def _execute_statistics(state: TableState, request: StatisticsRequest) -> tuple[pa.Schema, Iterator[pa.Table]]:
    ts = state.stats
    parts = _statistics_partitions(ts, request)
    schema = _statistics_schema(ts, request, parts[0] if parts else None)
    columns = list(request.columns) if request.columns is not None else None
    statistics = list(request.statistics) if request.statistics is not None else None

    def one(partition: str | None) -> pa.Table:
        t = ts.statistics(columns, partition, statistics)
        n = t.num_rows
        label = pa.nulls(n, pa.string()) if partition is None else pa.array([partition] * n, pa.string())
        return t.add_column(0, _PARTITION_FIELD, label)

    if not parts:
        return schema, iter(())
    first = one(parts[0])  # unknown columns / statistics fail here, before the stream starts

    def rest() -> Iterator[pa.Table]:
        yield first
        for p in parts[1:]:
            yield one(p)

    return schema, rest()


# ============================================================== top frequencies
def _frequencies_schema(ts: TableStatistics, request: TopFrequenciesRequest) -> pa.Schema:
    value_type = _column_type(ts, request.column) if request.typed else pa.string()
    return pa.schema([("value", value_type), ("frequency", pa.int64())])


def _subset_top(state: TableState, request: TopFrequenciesRequest) -> pa.Table:
    ts = state.stats
    t = ts.top_frequencies(request.column, request.k, typed=request.typed, where=request.where, exact=request.exact)
    return _conform(t, _frequencies_schema(ts, request)).replace_schema_metadata(t.schema.metadata)


def _describe_top(state: TableState, request: TopFrequenciesRequest) -> tuple[pa.Schema, int]:
    ts = state.stats
    _check_partition(ts, request.partition)
    index = ts.frequency_index(request.partition)
    if request.column not in index:
        _column_type(ts, request.column)
        raise InvalidArgumentError(f"column {request.column!r} has no frequencies (only discrete columns do)")
    _, _, n_rows, kind = index[request.column]
    schema = _frequencies_schema(ts, request).with_metadata({"kind": kind, "stored_rows": str(n_rows)})
    return schema, min(request.k, n_rows)


def _execute_top(state: TableState, request: TopFrequenciesRequest) -> tuple[pa.Schema, Iterator[pa.Table]]:
    ts = state.stats
    _check_partition(ts, request.partition)
    t = ts.top_frequencies(request.column, request.k, request.partition, typed=request.typed)
    schema = _frequencies_schema(ts, request).with_metadata(t.schema.metadata)
    return schema, iter([_conform(t, schema)])


# ============================================================== histograms
def _histogram_schema(ts: TableStatistics, column: str) -> pa.Schema:
    et = edge_type(_column_type(ts, column))
    return pa.schema([("bin", pa.int64()), ("lower", et), ("upper", et), ("count", pa.int64())])


def _subset_histogram(state: TableState, request: HistogramRequest) -> pa.Table:
    ts = state.stats
    spec = ts.histogram_spec(request.column)
    value_range = _value_range(ts, request)
    t = ts.histogram(request.column, bins=request.bins, value_range=value_range, where=request.where, exact=request.exact)
    md = {b"domain": spec.domain.encode(), b"bins": str(spec.bins).encode()} if spec else {b"domain": b""}
    return _conform(t, _histogram_schema(ts, request.column)).replace_schema_metadata({**md, **(t.schema.metadata or {})})


def _describe_histogram(state: TableState, request: HistogramRequest) -> tuple[pa.Schema, int]:
    ts = state.stats
    _check_partition(ts, request.partition)
    spec = ts.histogram_spec(request.column, request.partition)
    schema = _histogram_schema(ts, request.column)
    _value_range(ts, request)
    if spec is None:
        return schema.with_metadata({"domain": ""}), 0
    start, stop = (0, spec.bins) if request.bins is None else (min(request.bins[0], spec.bins), min(request.bins[1], spec.bins))
    return schema.with_metadata({"domain": spec.domain, "bins": str(spec.bins)}), max(0, stop - start)


def _execute_histogram(state: TableState, request: HistogramRequest) -> tuple[pa.Schema, Iterator[pa.Table]]:
    ts = state.stats
    _check_partition(ts, request.partition)
    spec = ts.histogram_spec(request.column, request.partition)
    schema = _histogram_schema(ts, request.column)
    schema = schema.with_metadata({"domain": spec.domain, "bins": str(spec.bins)} if spec else {"domain": ""})
    bins = request.bins
    t = ts.histogram(request.column, request.partition, bins=bins, value_range=_value_range(ts, request))
    return schema, iter([_conform(t, schema)])


def _conform(t: pa.Table, schema: pa.Schema) -> pa.Table:
    """``t`` with exactly ``schema``'s types (a cast only when they differ, e.g. the null-typed edges of an empty histogram)."""
    return t if t.schema.equals(schema, check_metadata=False) else t.cast(schema)


def _value_range(ts: TableStatistics, request: HistogramRequest) -> tuple[Any, Any] | None:
    """The request's value range as values of the column's type; each bound must fit the type
    (``2**63`` in an int64 column, ``1e308`` in a float32 one, ``10**29`` in a decimal(18, 2) do not)."""
    if request.value_range is None:
        return None
    t = _column_type(ts, request.column)
    bounds: list[tuple[Any, Any]] = []  # (value, domain number) per bound; (None, None) when open
    for raw in request.value_range:
        value = _typed_value(ts, request.column, t, raw, "value_range bound")
        if value is None:
            bounds.append((None, None))
            continue
        if isinstance(value, float) and math.isnan(value):
            raise RequestError("a value_range bound must not be NaN")
        if mt.is_integer(t) and isinstance(value, float):
            if not value.is_integer():  # Arrow would truncate it (1.5 -> 1) and widen the range
                raise RequestError(f"value_range bound {short(raw)} does not fit column {request.column!r} ({t}): not a whole number")
            value = int(value)
        if mt.is_integer(t) and isinstance(value, int):
            width, signed = t.bit_width, mt.is_signed_integer(t)
            low, high = (-(1 << (width - 1)), (1 << (width - 1)) - 1) if signed else (0, (1 << width) - 1)
            if not low <= value <= high:
                raise RequestError(f"value_range bound {short(raw)} does not fit column {request.column!r} ({t}): outside {low}..{high}")
        try:
            if mt.is_floating(t) and isinstance(value, int):
                value = float(value)  # Arrow takes Python ints for floats only within int64
            scalar = pa.scalar(value, type=t)
            domain = to_domain(scalar)
        except (pa.ArrowException, TypeError, ValueError, OverflowError, InvalidOperation) as exc:
            raise RequestError(f"value_range bound {short(raw)} does not fit column {request.column!r} ({t}): {_one_line(exc)}") from None
        if mt.is_floating(t) and not math.isinf(value) and math.isinf(scalar.as_py()):
            raise RequestError(f"value_range bound {short(raw)} does not fit column {request.column!r} ({t}): out of its range")
        bounds.append((value, domain))
    (lo, dlo), (hi, dhi) = bounds
    if dlo is not None and dhi is not None and dlo > dhi:
        raise RequestError(f"bad value_range: lo {short(request.value_range[0])} is above hi {short(request.value_range[1])}")
    return lo, hi


# ============================================================== partitions matching
def _filter_expression(ts: TableStatistics, flt: Filter | str) -> Expression:
    """A request's filter bound to the table: a predicate's text, or the old one-comparison
    form of partitions_matching."""
    try:
        if isinstance(flt, str):
            return ts.bind(flt)
        _check_columns(ts, (flt.column,))
        op = ex.op_from_symbol(flt.op)
        values = () if flt.value is None else (_filter_literal(flt.value),)
        return ts.bind(ex.predicate(ex.col(flt.column), op, *values))
    except ExpressionError as exc:
        raise RequestError(f"bad filter: {exc}") from None


def _filter_literal(value: bool | int | float | str) -> ex.Literal:
    """A JSON filter value as the language's literal: a string is the value's text form,
    a number is read exactly (temporal columns: the storage count), a boolean a boolean."""
    if isinstance(value, bool):
        return ex.Literal(ex.LiteralKind.BOOLEAN, value)
    if isinstance(value, str):
        return ex.Literal(ex.LiteralKind.STRING, value)
    return ex.Literal(ex.LiteralKind.NUMBER, repr(value) if isinstance(value, float) else str(value))


def _describe_matching(state: TableState, request: PartitionsMatchingRequest) -> tuple[pa.Schema, int]:
    _filter_expression(state.stats, request.filter)
    return PARTITIONS_MATCHING_SCHEMA, len(state.stats.state.partitions)


def _execute_matching(state: TableState, request: PartitionsMatchingRequest) -> tuple[pa.Schema, Iterator[pa.Table]]:
    """The partitions that might match (engine.lookup's evaluator, the one copy of the logic).
    With a predicate on one column the rows carry that column's statistics, else nulls."""
    ts = state.stats
    pruning = ts.prune_partitions(_filter_expression(ts, request.filter))
    one = pruning.columns[0] if len(pruning.columns) == 1 else None
    rows: dict[str, list[Any]] = {name: [] for name in PARTITIONS_MATCHING_SCHEMA.names}
    for p in pruning.partitions:
        if not p.might_match:
            continue
        s = p.statistics.get(one, {}) if one is not None else {}
        rows["partition"].append(p.partition)
        rows["rows"].append(s["row_count"] if s.get("row_count") is not None else p.rows)
        for name in ("null_count", "nan_count", "min", "max"):
            rows[name].append(s.get(name))
    return PARTITIONS_MATCHING_SCHEMA, iter([pa.table(rows, schema=PARTITIONS_MATCHING_SCHEMA)])


# ============================================================== plan files
PLAN_FILES_SCHEMA = pa.schema([("path", pa.string()), ("partition", pa.string()), ("rows", pa.int64()), ("size", pa.int64())])
PLAN_FILES_BATCH = 65_536  # candidates per streamed batch


def _describe_plan(state: TableState, request: PlanFilesRequest) -> tuple[pa.Schema, int]:
    _filter_expression(state.stats, request.filter)
    from engine.fileindex.plan import open_file_index

    return PLAN_FILES_SCHEMA, open_file_index(state.stats.file_index_directory()).n


def _execute_plan(state: TableState, request: PlanFilesRequest) -> tuple[pa.Schema, Iterator[pa.Table]]:
    """The candidate files (engine.lookup's plan_files: partitions, then the file index), in
    index order, streamed in batches of PLAN_FILES_BATCH."""
    ts = state.stats
    candidates = ts.plan_files(_filter_expression(ts, request.filter)).candidates.select(PLAN_FILES_SCHEMA.names)
    candidates = candidates.cast(PLAN_FILES_SCHEMA)
    n = candidates.num_rows
    return PLAN_FILES_SCHEMA, (candidates.slice(i, PLAN_FILES_BATCH) for i in range(0, max(n, 1), PLAN_FILES_BATCH))


# ============================================================== values
def _column_type(ts: TableStatistics, column: str) -> pa.DataType:
    """The Arrow type of a column, struct leaves (``parent.child``) included."""
    idx = ts.schema.get_field_index(column)
    if idx >= 0:
        return ts.schema.field(idx).type
    parts = column.split(".")
    fields: Any = ts.schema
    t = None
    for i, part in enumerate(parts):
        names = [f.name for f in fields] if fields is not None else []
        if part not in names:
            break
        t = next(f for f in fields if f.name == part).type
        if i == len(parts) - 1:
            return t
        fields = list(t) if mt.is_struct(t) else None
    raise InvalidArgumentError(f"table {ts.table!r} has no column {short(column)}")


def _typed_value(ts: TableStatistics, column: str, t: pa.DataType, value: JSON, what: str) -> Any:
    """A JSON value (number, boolean or the text form) as a Python value comparable with the
    column's values (engine.expressions ``comparable``); temporal values may be given as their storage count."""
    if value is None:
        return None
    try:
        if isinstance(value, str):
            if not value_forms.has_text_form(t):
                raise RequestError(f"column {column!r} ({t}) has no comparable values")
            return comparable(value_forms.decode_scalar(value, t))
        if isinstance(value, bool):
            if mt.is_boolean(t):
                return value
            raise RequestError(f"a boolean {what} does not fit column {column!r} ({t})")
        if mt.is_native_number(t):
            return value  # Python compares ints and floats exactly
        if mt.is_decimal(t):
            if isinstance(value, float) and not math.isfinite(value):
                raise RequestError(f"{what} {short(value)} does not fit column {column!r} ({t})")
            return Decimal(value) if isinstance(value, int) else Decimal(repr(value))
        if mt.is_temporal(t) and isinstance(value, int):
            pa.scalar(value, type=storage_type(t))  # range check
            return value  # the storage count of the type's unit
        raise RequestError(f"{what} for column {column!r} ({t}) must be its text form (a string), not {short(value)}")
    except RequestError:
        raise
    except (InvalidArgumentError, pa.ArrowException, TypeError, ValueError, OverflowError, InvalidOperation) as exc:
        raise RequestError(f"bad {what} {short(value)} for column {column!r} ({t}): {_one_line(exc)}") from None


def _check_partition(ts: TableStatistics, partition: str | None) -> None:
    if partition is not None:
        _check_partitions(ts, (partition,), [p.key for p in ts.state.partitions])


def _one_line(exc: BaseException) -> str:
    text = " ".join(line.strip() for line in str(exc).splitlines() if line.strip()) or type(exc).__name__
    return text if len(text) <= 200 else text[:199] + "…"


def _subset_answer(state: TableState, request: Request) -> pa.Table | None:
    """A request with ``where`` (docs/SUBSETS.md): its one table-level answer, which describe and
    execute both take whole (its schema carries the methods); None for any other request, which
    the kind's ``describe`` and ``execute`` answer."""
    subset = HANDLERS[request.kind].subset
    if getattr(request, "where", None) is None or subset is None:
        return None
    return subset(state, request)


@dataclass(frozen=True)
class KindHandler:
    """How the service answers one do_get kind of flight_server/requests.py."""

    describe: Callable[[TableState, Any], tuple[pa.Schema, int]]  # schema and row estimate, no data page read
    execute: Callable[[TableState, Any], tuple[pa.Schema, Iterator[pa.Table]]]
    subset: Callable[[TableState, Any], pa.Table] | None = None  # the one answer of a request with "where"


HANDLERS: dict[str, KindHandler] = {
    "statistics": KindHandler(_describe_statistics, _execute_statistics, _subset_statistics),
    "top_frequencies": KindHandler(_describe_top, _execute_top, _subset_top),
    "histogram": KindHandler(_describe_histogram, _execute_histogram, _subset_histogram),
    "partitions_matching": KindHandler(_describe_matching, _execute_matching),
    "plan_files": KindHandler(_describe_plan, _execute_plan),
}
requests.check_handlers(requests.GET, HANDLERS)
