"""Lookups that read only what they return.

Statistics files are immutable (unique paths per job), so their Parquet
footers are cached per process by URI and never invalidated; a lookup then
reads only the row groups and the projected columns it needs:

- statistics of some columns: the row groups holding those rows (64 rows each),
  and only the statistic columns asked for (sketches are skipped by default);
- top-k frequencies: the column's head row group (1,024 rows), more only if k is larger;
  a table whose frequencies are in segments (appends, docs/FORMAT.md "Segments"): the
  newest segment's head, and beyond it every segment merged (cached);
- histogram bins: the one struct column, only the row groups of the bin range;
  a value range is turned into bins with the spec in the file's metadata;
- the partitions holding a value (``value_partitions``, tables analyzed with
  value partitions): the ``value`` column of the column's row groups whose
  min/max admit the value, then the distribution of the one row group that has it.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from engine import arrowcompute as pc
from engine import expressions as ex
from engine import fileio
from engine import values as value_forms
from engine.arrowcompute import contiguous
from engine.catalog.model import FREQUENCY_SEGMENTS_PROPERTY
from engine.columns import column_name, mark_leaf_schema, parse_display_name
from engine.exceptions import AccessDeniedError, InvalidArgumentError, StatisticsFileCorruptError, StatisticsNotFoundError
from engine.files import checksum, layout
from engine.stats.histograms import HistogramSpec, from_domain, to_domain
from engine.store import Store, partition_dirname

_FILE_CACHE_SIZE = 256  # open statistics files (footer parsed, metadata decoded)
_ROW_GROUP_CACHE_BYTES = 64 * 1024 * 1024  # decoded row groups of hot files


class _File:
    """An open statistics file: the parsed footer, its decoded metadata, a reader.

    Statistics files are immutable (unique paths per job), so everything here
    stays valid for as long as the file is cached.
    """

    def __init__(self, uri: str, expected_checksum: str = "") -> None:
        try:
            source: Any = None
            if expected_checksum and (uri, expected_checksum) not in _verified:
                # the first read of a file checks all of it against the checksum taken when it
                # was written (engine/files/checksum.py); files are immutable, so once is enough
                with fileio.open_input(uri) as f:
                    data = f.read_buffer()
                if checksum.of_bytes(memoryview(data)) != expected_checksum:
                    checksum.check(uri, expected_checksum)  # raises, naming the file
                _remember_verified(uri, expected_checksum)
                if data.size <= _KEEP_VERIFIED_BYTES:  # small (most): read from the bytes already here
                    source = pa.BufferReader(data)
            self.pf = pq.ParquetFile(source if source is not None else fileio.open_input(uri))
            self.kv = layout.decode_metadata(self.pf.metadata.metadata)
            self.schema = self.pf.schema_arrow
        except FileNotFoundError as exc:
            raise StatisticsNotFoundError(f"statistics file missing: {uri}") from exc
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, UnicodeDecodeError, ValueError, KeyError) as exc:
            raise damaged(uri, exc) from None
        self.uri = uri
        self._json: dict[str, Any] = {}
        self.lock = threading.Lock()  # a Parquet reader is not safe for concurrent reads

    def meta_json(self, key: str) -> Any:
        if key not in self._json:
            try:
                self._json[key] = json.loads(self.kv[key])
            except (KeyError, ValueError) as exc:
                raise damaged(self.uri, exc) from None
        return self._json[key]

    def read_row_group(self, group: int, columns: tuple[str, ...]) -> pa.Table:
        key = (self.uri, group, columns)
        with _lock:
            hit = _row_groups.get(key)
            if hit is not None:
                return hit
        try:
            with self.lock:
                t = self.pf.read_row_group(group, columns=list(columns))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowIOError) as exc:
            raise damaged(self.uri, exc) from None
        with _lock:
            _row_groups.remember(key, t)
        return t

    def read_row_groups(self, groups: list[int], columns: tuple[str, ...]) -> pa.Table:
        parts = [self.read_row_group(g, columns) for g in groups]
        if not parts:
            return self.schema.empty_table().select(list(columns))
        return pa.concat_tables(parts) if len(parts) > 1 else parts[0]


def damaged(uri: str, exc: BaseException) -> StatisticsFileCorruptError:
    """One line naming a statistics file that cannot be read (truncated, damaged pages or footer)."""
    detail = " ".join(str(exc).split()) or type(exc).__name__
    if len(detail) > 160:
        detail = detail[:159] + "…"
    return StatisticsFileCorruptError(f"statistics file damaged: {uri}: not a readable statistics file ({detail})", uri=uri)


_KEEP_VERIFIED_BYTES = 1024 * 1024  # a checked file up to this size is then read from memory
_verified: OrderedDict[tuple[str, str], None] = OrderedDict()  # (uri, checksum) checked this process
_VERIFIED_MAX = 65_536


def _remember_verified(uri: str, expected: str) -> None:
    with _lock:
        _verified[(uri, expected)] = None
        while len(_verified) > _VERIFIED_MAX:
            _verified.popitem(last=False)


_files: OrderedDict[str, _File] = OrderedDict()


class _TableCache:
    """Decoded tables by key, the least recently used dropped beyond ``max_bytes`` (the newest
    kept whatever its size). Callers hold ``_lock``."""

    def __init__(self, max_bytes: int) -> None:
        self.max_bytes, self.nbytes = max_bytes, 0
        self._items: OrderedDict[tuple[Any, ...], pa.Table] = OrderedDict()

    def get(self, key: tuple[Any, ...]) -> pa.Table | None:
        hit = self._items.get(key)
        if hit is not None:
            self._items.move_to_end(key)
        return hit

    def remember(self, key: tuple[Any, ...], t: pa.Table) -> None:
        if key in self._items:
            return
        self._items[key] = t
        self.nbytes += t.nbytes
        while self.nbytes > self.max_bytes and len(self._items) > 1:
            _, old = self._items.popitem(last=False)
            self.nbytes -= old.nbytes

    def forget(self, prefix: str) -> int:
        """Drop the entries whose key's first element (a URI) starts with ``prefix``; how many."""
        gone = [k for k in self._items if str(k[0]).startswith(prefix)]
        for k in gone:
            self.nbytes -= self._items.pop(k).nbytes
        return len(gone)

    def clear(self) -> None:
        self._items.clear()
        self.nbytes = 0

    def __len__(self) -> int:
        return len(self._items)

    def __iter__(self) -> Iterator[tuple[Any, ...]]:
        return iter(self._items)


_row_groups = _TableCache(_ROW_GROUP_CACHE_BYTES)
_lock = threading.Lock()


_sketches: OrderedDict[str, dict[str, dict[str, bytes | None]]] = OrderedDict()


def _partial_sketches(uri: str, expected_checksum: str = "") -> dict[str, dict[str, bytes | None]]:
    """column -> {"theta_sketch", "kll_sketch"} of a partition's partial state (immutable: cached),
    checked on this first read against ``expected_checksum`` (its statistics.parquet recorded it)."""
    with _lock:
        hit = _sketches.get(uri)
    if hit is not None:
        return hit
    try:
        data = fileio.read_bytes(uri)
        if expected_checksum and checksum.of_bytes(data) != expected_checksum:
            raise StatisticsFileCorruptError(
                f"statistics file damaged: {uri}: checksum {checksum.of_bytes(data)}, its partition's statistics.parquet recorded "
                f"{expected_checksum} when it was written",
                uri=uri,
            )
        t = pa.ipc.open_file(pa.BufferReader(data)).read_all().select(["column", "theta", "kll"])
    except FileNotFoundError as exc:
        raise StatisticsNotFoundError(f"the partition's sketches are in its partial state, which is missing: {uri}") from exc
    except pa.ArrowInvalid as exc:
        raise StatisticsNotFoundError(f"the partition's sketches are in its partial state, which is damaged: {uri}: {exc}") from exc
    out = {c: {"theta_sketch": th, "kll_sketch": k} for c, th, k in zip(t["column"].to_pylist(), t["theta"].to_pylist(), t["kll"].to_pylist())}
    with _lock:
        _sketches[uri] = out
        while len(_sketches) > 64:
            _sketches.popitem(last=False)
    return out


def _stored_rows(f: _File) -> dict[str, int]:
    """``{column: rows of the merged view}`` of a delta segment (``metastore.segment``); empty for
    a whole file (its stored rows are its own)."""
    if layout.SEGMENT_KEY not in f.kv:
        return {}
    hit = f._json.get("stored_rows")  # decoded once per open file (a wide table's footer names every column)
    if hit is None:
        value = f.meta_json(layout.SEGMENT_KEY)
        try:
            hit = f._json["stored_rows"] = {str(c): int(n) for c, n in value["stored_rows"].items()}
        except (TypeError, KeyError, ValueError, AttributeError) as exc:
            raise damaged(f.uri, exc) from None
    return hit


def _held_in_full(f: _File) -> set[str]:
    """The columns a segment of the table's frequencies holds in full: every column of a base (a
    whole file), and a delta's ``metastore.segment`` ``full`` list (docs/FORMAT.md)."""
    if layout.SEGMENT_KEY not in f.kv:
        return set(f.meta_json("metastore.frequencies"))
    return set(f.meta_json(layout.SEGMENT_KEY).get("full") or ())


def _column_rows(f: _File, first: int, n_groups: int) -> pa.Table:
    """(value, frequency) of one column's row groups, read past the row-group cache (a merged
    read keeps its result instead)."""
    if not n_groups:
        return pa.table({"value": pa.array([], pa.string()), "frequency": pa.array([], pa.int64())})
    try:
        with f.lock:
            return f.pf.read_row_groups(list(range(first, first + n_groups)), columns=["value", "frequency"])
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowIOError, OSError) as exc:
        raise damaged(f.uri, exc) from None


_MERGED_CACHE_BYTES = 256 * 1024 * 1024  # merged reads of columns in segments (the newest one kept whatever its size)
_merged = _TableCache(_MERGED_CACHE_BYTES)


def _open(uri: str, expected_checksum: str = "") -> _File:
    with _lock:
        f = _files.get(uri)
        if f is not None:
            _files.move_to_end(uri)
            return f
    f = _File(uri, expected_checksum)
    with _lock:
        _files[uri] = f
        while len(_files) > _FILE_CACHE_SIZE:
            _files.popitem(last=False)
    return f


def clear_cache() -> None:
    """Forget open files and decoded row groups (a cold start)."""
    with _lock:
        _files.clear()
        _row_groups.clear()
        _verified.clear()
        _sketches.clear()
        _merged.clear()


def forget(prefix: str) -> int:
    """Forget the open files and decoded row groups whose URI starts with ``prefix``
    (e.g. the run directory of a job that is no longer published); returns how many
    cache entries were dropped. Readers holding such a file keep a valid handle.
    """
    dropped = 0
    with _lock:
        for uri in [u for u in _files if u.startswith(prefix)]:
            del _files[uri]
            dropped += 1
        dropped += _merged.forget(prefix)
        for uri in [u for u in _sketches if u.startswith(prefix)]:
            del _sketches[uri]
            dropped += 1
        dropped += _row_groups.forget(prefix)
    return dropped


def cache_info() -> dict[str, int]:
    """Sizes of the per-process caches: open files, decoded row groups and their bytes."""
    with _lock:
        return {"files": len(_files), "row_groups": len(_row_groups), "row_group_bytes": _row_groups.nbytes}


@dataclass(frozen=True)
class PartitionInfo:
    key: str
    rows: int


#: ``ValuePartitions.status``: the value is stored with its distribution (or, unstored,
#: found in its partition's exact value counts)
FOUND = "found"
#: the value does not occur: the column's frequencies are complete and do not hold it, no
#: partition's min/max admits it, or those that do do not count it
ABSENT = "absent"
#: the column stores only values seen more than once (or none): an unstored value occurs
#: at most once, in a partition the table's frequencies do not name, and too many
#: partitions' min/max admit it to look it up in their value counts
AT_MOST_ONCE = "at_most_once"
#: an unstored value (of a mostly distinct column) is looked up in the exact value counts
#: of the partitions whose min/max admit it, up to this many (one file each); beyond, it
#: stays ``AT_MOST_ONCE``
RESOLVE_CANDIDATES = 64


@dataclass(frozen=True)
class ValuePartitions:
    """Which partitions hold a value of a column, and how often (``TableStatistics.value_partitions``).

    ``frequency`` is the value's count in the table: exact when ``status`` is
    ``found`` or ``absent`` (0), None when ``at_most_once`` (0 or 1). ``partitions``
    are (partition key, count) in table partition order, only where the value
    occurs (empty unless found). ``candidates`` (when asked for, for an
    ``at_most_once`` value) are the partitions whose min/max admit the value: if the
    value occurs, it is in one of them. ``note`` says in words what the answer means.
    """

    table: str
    column: str
    value: Any  # the value in its column's type (Python form)
    text: str  # its text form (docs/VALUE_FORMS.md), as stored
    kind: str  # the column's frequencies kind: complete, duplicates_only, all_distinct
    status: str  # FOUND, ABSENT or AT_MOST_ONCE
    frequency: int | None
    partitions: tuple[tuple[str, int], ...]
    table_partitions: int  # partitions of the table
    note: str
    candidates: tuple[str, ...] | None = None


@dataclass(frozen=True)
class PartitionMatch:
    """One partition under a predicate: whether it might hold a matching row and, if
    not, the conjunct its statistics proved empty (in the NOT-free form)."""

    partition: str
    rows: int
    might_match: bool
    refuted_by: str | None  # the conjunct's text when pruned
    #: the pruning statistics read (row_count, null_count, nan_count, min, max as text) per column
    statistics: dict[str, dict[str, Any]]


@dataclass(frozen=True)
class PartitionPruning:
    """``TableStatistics.prune_partitions``: every partition in table order, with its verdict."""

    table: str
    predicate: str  # the bound predicate as text
    columns: tuple[str, ...]  # the columns it names (statistics names)
    partitions: tuple[PartitionMatch, ...]

    @property
    def matching(self) -> list[str]:
        return [p.partition for p in self.partitions if p.might_match]

    @property
    def pruned(self) -> list[tuple[str, str]]:
        return [(p.partition, p.refuted_by or "") for p in self.partitions if not p.might_match]


def struct_fields_hint(missing: Sequence[str], stored: Sequence[str], shown: int = 8) -> str:
    """For a missing name that is a struct (its fields are stored as ``name.field``): the fields to ask for."""
    notes = []
    for name in missing:
        fields = [c for c in stored if c.startswith(name + ".")]
        if fields:
            more = f", ... ({len(fields)} in all)" if len(fields) > shown else ""
            notes.append(f"{name!r} is a struct: ask for its fields {', '.join(map(repr, fields[:shown]))}{more}")
    return "; " + "; ".join(notes) if notes else ""


class TableStatistics:
    """The published statistics of one table (the state at open time; ``refresh()`` to move on).

    ``at_transaction`` / ``at_snapshot``: an earlier state from the table's catalog
    (time travel, docs/CATALOG.md): the state right after that transaction, or after
    the newest transaction describing that table snapshot. Such a state is pinned:
    ``refresh()`` reads the same state again.
    """

    def __init__(self, store: Store, table: str, at_transaction: int | None = None, at_snapshot: str | None = None) -> None:
        if at_transaction is not None and at_snapshot is not None:
            raise InvalidArgumentError("give at_transaction or at_snapshot, not both")
        self.store = store
        self.table = table
        self.at_transaction = at_transaction
        self.at_snapshot = at_snapshot
        self.refresh()

    @property
    def time_travel(self) -> bool:
        return self.at_transaction is not None or self.at_snapshot is not None

    @property
    def txn_id(self) -> int | None:
        """The catalog transaction this state is (None for a table without a catalog)."""
        return self.state.catalog.txn_id if self.state.catalog is not None else None

    def refresh(self) -> None:
        if self.time_travel:
            from engine.catalog.publish import state_at

            self.state = state_at(self.store.root, self.table, txn_id=self.at_transaction, snapshot=self.at_snapshot)
        else:
            self.state = self.store.state(self.table)
        self._manifest: dict[str, Any] | None = None
        self._run = self.state.run_uri
        self.schema = mark_leaf_schema(self.state.schema)  # leaf names: the binder reads s\\.x as column "s.x"
        self._keys = {p.key for p in self.state.partitions}
        self._names = frozenset(self.schema.names)
        # the catalog names every partition's files: with inherited statistics
        # partitions live in different runs
        self._partition_files = {p.key: p.files for p in self.state.partitions if p.files}
        self._table_files = self.state.table_files
        self._checksums: Mapping[str, str] = self.state.checksums  # file URI -> checksum (#21)
        # the older segments of the table's frequencies, oldest (the base) first, as (URI, checksum);
        # empty (one segment, the triple's file) unless an append re-analyze wrote deltas
        named = self.state.properties.get(FREQUENCY_SEGMENTS_PROPERTY) or ()
        table_uri = self.store.table_uri(self.table) if named else ""
        self._segments: tuple[tuple[str, str], ...] = tuple((fileio.join(table_uri, s["path"]), str(s.get("checksum") or "")) for s in named)

    @property
    def manifest(self) -> dict[str, Any]:
        """The state in its JSON form (``PublishedState.as_manifest``)."""
        if self._manifest is None:
            self._manifest = self.state.as_manifest()
        return self._manifest

    # ------------------------------------------------------------ helpers
    @property
    def job_id(self) -> str:
        return self.state.job_id

    @property
    def snapshot(self) -> str:
        return self.state.snapshot_id

    def stale_by(self) -> int | None:
        """How many snapshots the analyzed table (Iceberg, Delta, Hudi) has committed since the
        snapshot these statistics describe, from the format's history (no data read; None for
        a Parquet directory or a snapshot no longer in the history; docs/FORMATS.md)."""
        from engine.sources import snapshots_since

        uri = self.manifest.get("table_uri")
        return snapshots_since(uri, self.snapshot) if uri else None

    def partitions(self) -> list[PartitionInfo]:
        return [PartitionInfo(p.key, p.rows) for p in self.state.partitions]

    def resolve_column(self, column: str | Sequence[str]) -> str:
        """The stored name of a column (engine/columns.py): a stored name as it is, a path
        (a tuple of names: ``("s.x",)`` is a top-level column ``s.x``, ``("s", "x")`` field
        ``x`` of a struct ``s``), a top-level column's name as in the data (``s.x``
        when no struct leaf is stored under that name), or a display form
        (engine/columns.py ``display_name``: ``s > x``). Unknown names come back as
        they are, for the caller's error."""
        if not isinstance(column, str):
            return column_name(tuple(column))
        names = self._names
        if column in names:
            return column
        escaped = column_name((column,))
        if escaped in names:
            return escaped
        path = parse_display_name(column)  # a struct leaf as people read it: "s > x"
        if path is not None and column_name(path) in names:
            return column_name(path)
        return column

    def column_type(self, column: str) -> pa.DataType:
        column = self.resolve_column(column)
        idx = self.schema.get_field_index(column)
        if idx < 0:
            raise InvalidArgumentError(f"table {self.table!r} has no column {column!r}{struct_fields_hint([column], self.schema.names)}")
        return self.schema.field(idx).type

    def file_uri(self, name: str, partition: str | None = None) -> str:
        if partition is None:
            return self._table_files.get(name) or fileio.join(self._run, "table", name)
        if partition not in self._keys:
            raise InvalidArgumentError(f"table {self.table!r} has no partition {partition!r}")
        files = self._partition_files.get(partition)
        if files and name in files:
            return files[name]
        return fileio.join(self._run, "partitions", partition_dirname(partition), name)

    def _file(self, name: str, partition: str | None = None) -> _File:
        """An open statistics file of this state, its checksum checked on its first read."""
        uri = self.file_uri(name, partition)
        return _open(uri, self._checksums.get(uri, ""))

    # ------------------------------------------------------------ notebook view
    def card(self, column: str, partition: str | None = None, bars: int = 50, top: int = 10) -> Any:
        """One column's card (``engine.ui.viewmodel.ColumnCard``): Jupyter draws it (``_repr_html_``)
        as ``metastore ui`` does; ``partition``: that partition's statistics beside the table's."""
        from engine.ui import viewmodel

        return viewmodel.column_card(self, column, partition, bars, top)

    def preview(
        self, columns: Sequence[str] | None = None, partition: str | None = None, bars: int = 50, top: int = 10, max_columns: int = 20
    ) -> Any:
        """The table's page (``engine.ui.viewmodel.TablePage``) with the cards of ``columns``
        (default: the first ``max_columns``); Jupyter draws it (``_repr_html_``)."""
        from dataclasses import replace

        from engine.ui import viewmodel

        page = viewmodel.table_page(self, partition=partition, page_size=max_columns, bars=bars, top=top, cards=columns is None)
        if columns is not None:
            columns = [viewmodel.check_column(self, name) for name in columns]  # stored names
            page = replace(page, columns=tuple(columns), cards=tuple(viewmodel.column_cards(self, list(columns), partition, bars, top)))
        return page

    def _repr_html_(self) -> str:
        return self.preview()._repr_html_()

    # ------------------------------------------------------------ review (docs/DIFF.md)
    def diff(
        self,
        other: TableStatistics,
        partition: str | None = None,
        other_partition: str | None = None,
        columns: Sequence[str] | None = None,
        top: int = 10,
    ) -> Any:
        """From this state (its ``partition``, or the table level) to ``other`` (its
        ``other_partition``, or table level): each common column's statistics on both sides,
        its drift (KS distance, PSI, top values gained, lost and moved), columns and
        partitions added and removed (``engine.review.diff.TableDiff``; ``.as_dict()``)."""
        from engine.review.diff import diff_states

        return diff_states(self, other, partition, other_partition, list(columns) if columns is not None else None, top)

    def alerts(self, partition: str | None = None, columns: Sequence[str] | None = None, thresholds: Any = None) -> dict[str, list[Any]]:
        """``{column: [Alert(kind, detail), ...]}`` from the stored statistics (no data read;
        ``thresholds``: an ``engine.stats.alerts.AlertThresholds``; docs/DIFF.md)."""
        from engine.review.alerts import column_alerts_of

        return column_alerts_of(self, partition, list(columns) if columns is not None else None, thresholds)

    def __repr__(self) -> str:
        """What is loaded already (no file read): the table, its rows, columns and partitions,
        the job and snapshot, the store, and the catalog transaction when time travelling."""
        state = self.state
        n = len(state.partitions)
        parts = [
            f"{state.rows:,} rows" if isinstance(state.rows, int) else "rows unknown",
            f"{len(self.schema.names):,} column{'s' if len(self.schema.names) != 1 else ''}",
            f"{n:,} partition{'s' if n != 1 else ''}",
        ]
        at = f", at transaction {self.txn_id}" if self.time_travel else ""
        return f"<TableStatistics {self.table!r}: {', '.join(parts)}; job {state.job_id}, snapshot {state.snapshot_id}{at}; store {self.store.root}>"

    # ------------------------------------------------------------ statistics
    def statistics(
        self,
        columns: Sequence[str] | None = None,
        partition: str | None = None,
        statistics: Sequence[str] | None = None,
        sketches: bool = False,
        *,
        where: Any = None,
        exact: bool = False,
    ) -> pa.Table:
        """Rows of statistics.parquet for ``columns`` (all if None), in the order asked.

        A partition's sketches kept in its partial state (``metastore.sketches``) are read
        from there: the result is the same either way.

        ``where``: the statistics of the rows matching that predicate instead (docs/SUBSETS.md):
        the same columns, each statistic's method (stored, estimated with bounds, computed) in
        the schema metadata (``engine.subset.methods_of``); ``exact=True`` computes them."""
        if where is not None:
            return self._subset(where, exact, partition, columns).statistics(columns, statistics)
        f = self._file(layout.STATISTICS_FILE, partition)
        proj = _projection(f, statistics, sketches)
        t = self._statistics_rows(f, columns, proj)
        if partition is not None and f.kv.get(layout.SKETCHES_KEY) == layout.SKETCHES_IN_PARTIAL_STATE:
            wanted = [c for c in layout.SKETCH_COLUMNS if c in proj]
            if wanted:
                t = self._with_sketches(t, partition, wanted, layout.partial_state_checksums(f.kv).get(layout.PARTIAL_STATE_FILE, ""))
        return t

    def _with_sketches(self, t: pa.Table, partition: str, wanted: list[str], expected_checksum: str = "") -> pa.Table:
        frequencies = self.file_uri(layout.FREQUENCIES_FILE, partition)
        by_column = _partial_sketches(
            fileio.join(frequencies.rsplit("/", 1)[0], layout.PARTIAL_STATE_FILE),
            expected_checksum,
        )
        names = t.column("column").to_pylist()
        for name in wanted:
            i = t.schema.get_field_index(name)
            values = [by_column.get(c, {}).get(name) for c in names]
            t = t.set_column(i, t.schema.field(i), pa.array(values, pa.binary()))
        return t

    def _statistics_rows(self, f: _File, columns: Sequence[str] | None, proj: list[str]) -> pa.Table:
        order: list[str] = f.meta_json("metastore.columns")
        rg_rows = int(f.kv["metastore.row_group_rows"])
        if columns is None:
            try:
                with f.lock:
                    return f.pf.read(columns=proj)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowIOError) as exc:
                raise damaged(f.uri, exc) from None
        columns = [self.resolve_column(c) for c in columns]
        position = f._json.get("position")
        if position is None:
            position = f._json["position"] = {c: i for i, c in enumerate(order)}
        missing = [c for c in columns if c not in position]
        if missing:
            raise InvalidArgumentError(
                f"table {self.table!r} has no statistics for column(s): {', '.join(map(repr, missing))}{struct_fields_hint(missing, order)}"
            )
        rows = [position[c] for c in columns]
        groups = sorted({r // rg_rows for r in rows})
        t = f.read_row_groups(groups, tuple(proj))
        base = {g: i * rg_rows for i, g in enumerate(groups)}  # every group but the last is full
        take = [base[r // rg_rows] + r % rg_rows for r in rows]
        return pc.take(t, pa.array(take, pa.int64()))

    def statistics_columns(self, partition: str | None = None) -> list[str]:
        """The columns described by a statistics file, in row order (row i is column i), from its footer."""
        f = self._file(layout.STATISTICS_FILE, partition)
        return list(f.meta_json("metastore.columns"))

    def column_statistics(self, column: str, partition: str | None = None, sketches: bool = False) -> dict[str, Any]:
        """One column's statistics as a dict, values decoded to Python values of the column's type
        (a date or time beyond Python's years 1..9999 stays an Arrow scalar: Python has no value for it;
        so does a nanosecond value without pandas, which ``as_py()`` needs for it: engine/pyvalues.py
        formats both exactly)."""
        column = self.resolve_column(column)
        row = self.statistics([column], partition, sketches=sketches).to_pylist()[0]
        t = self.column_type(column)
        for key in layout.VALUE_STATISTICS:
            if row.get(key) is not None:
                row[key] = _py_or_scalar(value_forms.decode_scalar(row[key], t))
        if row.get("sum") is not None:
            row["sum"] = decode_sum(row["sum"], t)
        return row

    def statistics_schema(self, partition: str | None = None, statistics: Sequence[str] | None = None, sketches: bool = False) -> pa.Schema:
        """The schema ``statistics()`` returns for these arguments, from the file footer only."""
        f = self._file(layout.STATISTICS_FILE, partition)
        proj = _projection(f, statistics, sketches)
        return pa.schema([f.schema.field(n) for n in proj])

    # ------------------------------------------------------------ frequencies
    def frequency_index(self, partition: str | None = None) -> dict[str, tuple[int, int, int, str]]:
        """``{column: (first row group, row groups, stored rows, kind)}`` of the frequencies file.
        The table's frequencies in several segments: the newest segment's row groups, the rows a
        full read of the merged column returns (``metastore.segment``) and the kind."""
        f = self._file(layout.FREQUENCIES_FILE, partition)
        index = {k: tuple(v) for k, v in f.meta_json("metastore.frequencies").items()}
        if partition is None and self._segments:
            stored = _stored_rows(f)
            index = {k: (v[0], v[1], stored.get(k, v[2]), v[3]) for k, v in index.items()}
        return index  # type: ignore[return-value]

    def frequency_segments(self) -> list[str]:
        """The URIs of the table's frequencies segments, oldest (the base) first, the newest (the
        file ``file_uri("frequencies.parquet")`` names) last; one URI when they are one file."""
        return [uri for uri, _ in self._segments] + [self.file_uri(layout.FREQUENCIES_FILE)]

    def top_frequencies(
        self, column: str, k: int = 10, partition: str | None = None, typed: bool = False, *, where: Any = None, exact: bool = False
    ) -> pa.Table:
        """The k most frequent values of a discrete column: (value, frequency), by decreasing frequency.

        An empty result with kind ``all_distinct`` means every value occurs once.
        The kind is in the result's schema metadata (``kind``). ``where``: of the rows matching
        that predicate (docs/SUBSETS.md; each value's method in ``metastore.subset``).
        """
        if where is not None:
            return self._subset(where, exact, partition).top_frequencies(column, k, typed)
        if k < 0:
            raise InvalidArgumentError("k must be >= 0")
        column = self.resolve_column(column)
        f = self._file(layout.FREQUENCIES_FILE, partition)
        index = f.meta_json("metastore.frequencies")
        if column not in index:
            self.column_type(column)  # unknown column -> clear error
            raise InvalidArgumentError(f"column {column!r} has no frequencies (only discrete columns do)")
        first, n_groups, n_rows, kind = index[column]
        stored = n_rows
        if partition is None and self._segments:
            stored = _stored_rows(f).get(column, n_rows)
        want = min(k, stored)
        if want > min(n_rows, layout.FREQUENCIES_HEAD_ROWS) and stored > n_rows:
            # beyond the newest segment's head (its first min(1,024, stored) rows are the merged
            # view's): every segment merged, newest per value (engine/stats/segments.py)
            t = self._merged_frequencies(column, f, first, n_groups).slice(0, want)
        else:
            groups, covered = [], 0
            for g in range(first, first + n_groups):
                if covered >= want:
                    break
                groups.append(g)
                covered += f.pf.metadata.row_group(g).num_rows
            if groups:
                t = f.read_row_groups(groups, ("value", "frequency")).slice(0, want)
            else:
                t = pa.table({"value": pa.array([], pa.string()), "frequency": pa.array([], pa.int64())})
        if typed:
            t = t.set_column(0, "value", value_forms.decode(contiguous(t["value"]), self.column_type(column)))
        return t.replace_schema_metadata({"kind": kind, "stored_rows": str(stored)})

    def top_counts(self, partition: str | None = None) -> dict[str, int | None]:
        """Each discrete column's most frequent value's count: the first row of its frequencies
        (the newest segment's head is the merged view's), 1 when every value occurs once, None
        without values; one read of the ``frequency`` column of every column's first row group
        (the alerts' ``imbalanced``, docs/DIFF.md)."""
        f = self._file(layout.FREQUENCIES_FILE, partition)
        stored = _stored_rows(f) if partition is None and self._segments else {}
        out: dict[str, int | None] = {}
        heads: list[tuple[str, int]] = []
        for column, (first, n_groups, n_rows, kind) in f.meta_json("metastore.frequencies").items():
            if n_rows and n_groups:
                heads.append((column, first))
            else:  # nothing stored: all distinct (or only singles), or no values
                out[column] = 1 if kind != "complete" and stored.get(column, n_rows) == 0 else None
        if heads:
            groups = [g for _, g in heads]
            try:
                with f.lock:
                    freq = f.pf.read_row_groups(groups, columns=["frequency"]).column("frequency").to_numpy()
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowIOError) as exc:
                raise damaged(f.uri, exc) from None
            at = 0
            for (column, g), n in zip(heads, (f.pf.metadata.row_group(g).num_rows for g in groups)):
                out[column] = int(freq[at])
                at += n
        return out

    def _merged_frequencies(self, column: str, newest: _File, first: int, n_groups: int) -> pa.Table:
        """All stored rows of ``column`` (value text, frequency) merged from the table's segments,
        in the order of a whole file; each segment's checksum checked on its first read. Cached
        per (newest segment, column): segments are immutable."""
        key = (newest.uri, column)
        with _lock:
            hit = _merged.get(key)
            if hit is not None:
                return hit
        from engine.stats import segments  # here: only reads beyond the head need it (start-up, #20)

        # newest first, back to the segment that holds the column in full (the base holds every
        # column in full; a delta may, when the column was small or changed kind): older ones are
        # of no use for it
        parts = [_column_rows(newest, first, n_groups)]
        held = _held_in_full(newest)
        for uri, expected in reversed(self._segments):
            if column in held:
                break
            f = _open(uri, expected)
            held = _held_in_full(f)
            index = f.meta_json("metastore.frequencies")
            if column in index:
                parts.insert(0, _column_rows(f, *index[column][:2]))
        try:
            t = parts[0] if len(parts) == 1 else segments.merge(parts, self.column_type(column))
        except (pa.ArrowInvalid, InvalidArgumentError) as exc:
            raise damaged(newest.uri, exc) from None
        with _lock:
            _merged.remember(key, t)
        return t

    # ------------------------------------------------------------ value partitions
    def value_text(self, column: str, value: Any) -> tuple[pa.Scalar, str]:
        """A value of ``column`` given in its type (a Python value or pyarrow scalar) or,
        as a str, in its text form (docs/VALUE_FORMS.md): the typed scalar and its
        canonical text form (what frequencies.parquet stores)."""
        column = self.resolve_column(column)
        t = self.column_type(column)
        if value is None:
            raise InvalidArgumentError(f"column {column!r}: frequencies count no nulls (the null count is in the column's statistics)")
        try:
            if isinstance(value, pa.Scalar):
                scalar = value if value.type == t else pc.cast(value, t)
            elif isinstance(value, str) and not (pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_string_view(t)):
                scalar = value_forms.decode_scalar(value, t)
            else:
                scalar = pa.scalar(value, type=t)
        except InvalidArgumentError as exc:
            raise InvalidArgumentError(f"column {column!r} ({t}): {exc}") from None
        except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
            raise InvalidArgumentError(f"column {column!r} ({t}): {value!r} is not a value of this column: {exc}") from None
        if not scalar.is_valid:
            raise InvalidArgumentError(f"column {column!r}: frequencies count no nulls (the null count is in the column's statistics)")
        text = value_forms.encode_scalar(scalar)
        assert text is not None
        return scalar, text

    def value_partitions(self, column: str, value: Any, candidates: bool = False) -> ValuePartitions:
        """The partitions holding ``value`` in ``column``, with its count in each
        (tables analyzed with value partitions: ``analyze(value_partitions=True)``).

        ``value``: in the column's type, or its text form as a str. Reads the footer,
        the ``value`` column of the column's row groups whose statistics admit the
        value (the head group first), and the distribution of the row group holding
        it. A value the table stores only implicitly (a mostly or all distinct
        column) occurs at most once: it is looked up in the exact value counts
        (``partial_counts.arrow``) of the partitions whose min/max admit it (one
        statistics lookup per partition, then one file per candidate), giving
        ``FOUND`` (once, in its partition) or ``ABSENT``; with more than
        ``RESOLVE_CANDIDATES`` candidates, ``AT_MOST_ONCE`` (its partition is not
        recorded). ``candidates`` lists the partitions whose min/max admit it.
        """
        from engine.stats import valuepartitions  # here: the other lookups do not need it (start-up, #20)

        column = self.resolve_column(column)
        scalar, text = self.value_text(column, value)
        f = self._file(layout.FREQUENCIES_FILE)
        index = f.meta_json("metastore.frequencies")
        if column not in index:
            raise InvalidArgumentError(f"column {column!r} has no frequencies (only discrete columns do)")
        if self._segments:  # an append re-analyze wrote deltas: those never carry value partitions
            raise StatisticsNotFoundError(
                f"table {self.table!r} (job {self.job_id}) keeps its frequencies in {len(self._segments) + 1} segments (appends "
                f"analyzed since its last full analyze), which carry no value partitions: analyze it again with value partitions "
                f"(metastore analyze --value-partitions) to look values up by partition"
            )
        if valuepartitions.COLUMN not in f.schema.names or layout.PARTITIONS_KEY not in f.kv:
            raise StatisticsNotFoundError(
                f"table {self.table!r} (job {self.job_id}) was analyzed without value partitions: "
                f"analyze it again with value partitions (metastore analyze --value-partitions) to look values up by partition"
            )
        keys: list[str] = f.meta_json(layout.PARTITIONS_KEY)
        first, n_groups, _, kind = index[column]
        common = dict(table=self.table, column=column, value=_py_or_scalar(scalar), text=text, kind=kind, table_partitions=len(keys))
        found = self._find_value(f, text, range(first, first + n_groups))
        if found is not None:
            frequency, dist = found
            pairs = tuple((keys[i], c) for i, c in valuepartitions.decode(dist, len(keys)))
            where = f"{len(pairs)} of {len(keys)} partition{'s' if len(keys) != 1 else ''}"
            return ValuePartitions(**common, status=FOUND, frequency=frequency, partitions=pairs, note=f"occurs {frequency:,} times, in {where}")
        if kind == layout.FREQ_COMPLETE:
            return ValuePartitions(
                **common, status=ABSENT, frequency=0, partitions=(), note="does not occur in the table (its frequencies are complete)"
            )
        why = (
            "every value of the column occurs exactly once"
            if kind == layout.FREQ_ALL_DISTINCT
            else "the column stores only values that occur more than once"
        )
        found_in = self._candidates(column, scalar, keys)
        asked = found_in if candidates else None
        if found_in == ():
            note = "does not occur in the table (no partition's min/max admits it)"
            return ValuePartitions(**common, status=ABSENT, frequency=0, partitions=(), note=note, candidates=asked)
        held = self._held_in(column, scalar, found_in) if len(found_in) <= RESOLVE_CANDIDATES else None
        if held is not None:  # the candidates' exact value counts say where (and whether) it occurs
            if not held:
                note = f"does not occur in the table (not in the exact value counts of the {len(found_in)} partitions whose min/max admit it)"
                return ValuePartitions(**common, status=ABSENT, frequency=0, partitions=(), note=note, candidates=asked)
            frequency = sum(c for _, c in held)
            note = f"occurs {frequency:,} time{'s' if frequency != 1 else ''}, in {len(held)} of {len(keys)} partition{'s' if len(keys) != 1 else ''} (from the partitions' exact value counts: {why})"
            return ValuePartitions(**common, status=FOUND, frequency=frequency, partitions=held, note=note, candidates=asked)
        note = f"occurs at most once in the table ({why}): if it occurs, its one partition is not recorded"
        note += f"; partitions whose min/max admit it: {len(found_in)} of {len(keys)}"
        return ValuePartitions(**common, status=AT_MOST_ONCE, frequency=None, partitions=(), note=note, candidates=asked)

    def _held_in(self, column: str, scalar: pa.Scalar, partitions: Sequence[str]) -> tuple[tuple[str, int], ...] | None:
        """(partition, count) of those of ``partitions`` whose exact value counts (their
        ``partial_counts.arrow``) hold ``scalar``; None when one of them keeps none for the column."""
        held = []
        for key in partitions:
            counts = self._partition_counts(key, column)
            if counts is None:
                return None
            values = counts.field("value")
            try:
                probe = scalar if scalar.type == values.type else scalar.cast(values.type)
            except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
                return None
            at = pc.index(values, probe).as_py()
            if at >= 0:
                held.append((key, int(counts.field("count")[at].as_py())))
        return tuple(held)

    def _partition_counts(self, partition: str, column: str) -> pa.StructArray | None:
        """A partition's exact (value, count) entries of ``column`` from its partial state
        (checked against the checksum its statistics.parquet recorded), or None without them."""
        from engine.files.partial_state import PARTIAL_COUNTS_FILE

        f = self._file(layout.STATISTICS_FILE, partition)
        expected = layout.partial_state_checksums(f.kv).get(PARTIAL_COUNTS_FILE, "")
        uri = fileio.join(self.file_uri(layout.FREQUENCIES_FILE, partition).rsplit("/", 1)[0], PARTIAL_COUNTS_FILE)
        try:
            data = fileio.read_bytes(uri)
        except FileNotFoundError:
            return None
        if expected and checksum.of_bytes(data) != expected:
            raise StatisticsFileCorruptError(
                f"statistics file damaged: {uri}: checksum {checksum.of_bytes(data)}, its partition's statistics.parquet recorded {expected}",
                uri=uri,
            )
        try:
            t = pa.ipc.open_file(pa.BufferReader(data)).read_all()
        except pa.ArrowInvalid as exc:
            raise damaged(uri, exc) from None
        if column not in t.schema.names or t.num_rows != 1:
            return None
        return t.column(column).combine_chunks().flatten()

    def _find_value(self, f: _File, text: str, groups: range) -> tuple[int, dict[str, Any]] | None:
        """(frequency, distribution) of the row holding ``text``; row groups whose
        ``value`` statistics exclude it are not read."""
        from engine.stats import valuepartitions

        col = f.schema.get_field_index("value")
        for g in groups:
            stats = f.pf.metadata.row_group(g).column(col).statistics
            if stats is not None and stats.has_min_max and isinstance(stats.min, str) and isinstance(stats.max, str):
                if text < stats.min or text > stats.max:  # code point order = UTF-8 byte order
                    continue
            values = f.read_row_group(g, ("value",))["value"]
            at = pc.index(values, text).as_py()
            if at >= 0:
                with f.lock:  # the row group's distributions: not kept in the row-group cache (they can be large)
                    t = f.pf.read_row_group(g, columns=["frequency", valuepartitions.COLUMN])
                row = t.slice(at, 1).to_pylist()[0]
                return int(row["frequency"]), row[valuepartitions.COLUMN]
        return None

    def _candidates(self, column: str, scalar: pa.Scalar, keys: list[str]) -> tuple[str, ...]:
        """Partitions whose statistics admit ``column = value`` (the predicate evaluator)."""
        expr = self.bind(ex.predicate(ex.col(column), ex.Op.EQ, scalar))
        wanted = set(keys)
        return tuple(p.partition for p in self.prune_partitions(expr).partitions if p.might_match and p.partition in wanted)

    # ------------------------------------------------------------ predicates
    def bind(self, where: Any) -> ex.Expression:
        """A predicate bound to this table's schema: its text (docs/PREDICATES.md), a tree of
        ``engine.expressions`` (bound or not) or a pyiceberg expression. ExpressionError
        (one line, with the position) if it does not parse or fit the schema. A bound tree
        is reshaped too (chains balanced: the evaluators recurse over it)."""
        return ex.bound(where, self.schema)

    def prune_partitions(self, where: Any) -> PartitionPruning:
        """Which partitions might hold a row matching ``where``, from each partition's
        statistics (row count, null and NaN counts, min, max of the columns it names):
        a partition is pruned only when its statistics prove no row can match, and the
        conjunct that proved it is named. Reads the named columns' rows of every
        partition's statistics file (footers cached)."""
        from engine.expressions.statistics import metrics_from_row

        expr = self.bind(where)
        evaluator = ex.InclusiveMetricsEvaluator(expr)
        refs = [r for r in ex.references(expr) if isinstance(r, ex.BoundReference)]
        names = list(dict.fromkeys(r.name for r in refs))
        out = []
        for p in self.manifest["partitions"]:
            key, rows = p["key"], p["rows"]
            stats = self._pruning_rows(names, key)
            metrics = {r.name: metrics_from_row(stats[r.name], r.type) for r in refs if r.name in stats}
            refuted = evaluator.refuting_conjunct(lambda ref, m=metrics: m.get(ref.name), rows=rows)
            out.append(PartitionMatch(key, rows, refuted is None, None if refuted is None else str(refuted), stats))
        return PartitionPruning(self.table, str(expr), tuple(names), tuple(out))

    def file_index_directory(self) -> str:
        """Where this state's file index lives (docs/FORMAT.md, "File index"); StatisticsNotFoundError if none."""
        from engine.fileindex.store import FILES_FILE

        named = (self.state.properties.get("file_index") or {}).get(FILES_FILE)
        uri = fileio.join(self.store.root, self.table, named["path"]) if named else self.file_uri(FILES_FILE)
        if not fileio.exists(uri):
            raise StatisticsNotFoundError(
                f"table {self.table!r} (job {self.job_id}) has no file index: it was analyzed with --no-file-index, or from a "
                f"source whose data files the index cannot describe (a DataFrame); analyze it again without --no-file-index, "
                f"or name an index directory (metastore files --index DIR; plan_files(where, index=DIR))"
            )
        return uri.rsplit("/", 1)[0]

    def plan_files(self, where: Any, index: str | None = None) -> Any:
        """The data files that might hold rows matching ``where`` (``FilePlan``: candidates with
        path, partition, rows, size; each pruned file with the conjunct that proved it empty).
        Partitions are pruned first from their statistics; then the remaining files from the file
        index (``index``: its directory; default: the one this state names). A file the index has
        no statistics for is a candidate."""
        from engine.fileindex.plan import open_file_index

        expr = self.bind(where)
        pruning = self.prune_partitions(expr)
        gone = {p.partition: p.refuted_by or "" for p in pruning.partitions if not p.might_match}
        return open_file_index(index or self.file_index_directory()).plan(expr, gone)

    def _pruning_rows(self, names: list[str], partition: str) -> dict[str, dict[str, Any]]:
        """The pruning statistics of those ``names`` the partition's statistics file describes."""
        from engine.expressions.statistics import PRUNING_STATISTICS

        if not names:
            return {}
        f = self._file(layout.STATISTICS_FILE, partition)
        known = set(f.meta_json("metastore.columns"))
        present = [n for n in names if n in known]
        if not present:
            return {}
        rows = self.statistics(present, partition, list(PRUNING_STATISTICS)).to_pylist()
        return {n: row for n, row in zip(present, rows)}

    # ------------------------------------------------------------ subsets
    def subset(self, where: Any, exact: bool = False) -> Any:
        """The rows matching ``where`` (``engine.subset.Subset``): ``.statistics()``,
        ``.top_frequencies()``, ``.histogram()``, ``.row_count()``, ``.partitions``, each
        answer with its method (docs/SUBSETS.md). ``exact=True``: computed on the data."""
        from engine.subset import Subset

        return Subset(self, where, exact)

    def _subset(self, where: Any, exact: bool, partition: str | None, columns: Sequence[str] | None = None) -> Any:
        if partition is not None:
            raise InvalidArgumentError("where= describes rows of the whole table: give no partition with it")
        from engine.subset import Subset

        return Subset(self, where, exact, columns)

    # ------------------------------------------------------------ histograms
    def histogram_spec(self, column: str, partition: str | None = None) -> HistogramSpec | None:
        column = self.resolve_column(column)
        f = self._file(layout.HISTOGRAMS_FILE, partition)
        specs = f.meta_json("metastore.histograms")
        if column not in specs:
            self.column_type(column)
            raise InvalidArgumentError(f"column {column!r} has no histogram (only numeric and temporal columns do)")
        return HistogramSpec(**specs[column]) if specs[column] else None

    def histogram(
        self,
        column: str,
        partition: str | None = None,
        bins: tuple[int, int] | None = None,
        value_range: tuple[Any, Any] | None = None,
        *,
        where: Any = None,
        exact: bool = False,
    ) -> pa.Table:
        """Bins (lower, upper, count) of a column: all, a bin range [start, stop), or those overlapping a value range.

        ``where``: the counts of the rows matching that predicate, on the table's edges
        (docs/SUBSETS.md; each bin's method in ``metastore.subset``)."""
        if where is not None:
            sub = self._subset(where, exact, partition)
            t = sub.histogram(column)
            if bins is not None or value_range is not None:  # on the table's edges, or the computed subset's own
                edges = sub.computed([self.resolve_column(column)]) if exact else self
                keep = edges.histogram(column, bins=bins, value_range=value_range).column("bin")
                t = t.filter(pc.is_in(t.column("bin"), value_set=keep.combine_chunks()))
            return t
        column = self.resolve_column(column)
        spec = self.histogram_spec(column, partition)
        if spec is None:
            return pa.table({"bin": pa.array([], pa.int64()), "lower": pa.array([]), "upper": pa.array([]), "count": pa.array([], pa.int64())})
        start, stop = 0, spec.bins
        if bins is not None:
            start, stop = max(0, bins[0]), min(spec.bins, bins[1])
        if value_range is not None:
            t = self.column_type(column)
            lo, hi = value_range
            dlo = to_domain(pa.scalar(lo, type=t)) if lo is not None else -float("inf")
            dhi = to_domain(pa.scalar(hi, type=t)) if hi is not None else float("inf")
            if lo is not None:
                start = max(start, spec.bin_of(dlo))
            if hi is not None:
                stop = min(stop, spec.bin_of(dhi) + 1)
            # a range wholly below or above the table's range overlaps no bin (bin_of clamps);
            # float infinities sit in the end bins, so an unbounded side still reaches them
            integer = spec.domain == "integer"
            if (dhi < spec.lower and (integer or dlo > -float("inf"))) or (dlo > spec.upper and (integer or dhi < float("inf"))):
                start = stop = 0
        if start >= stop:
            start = stop = min(start, spec.bins)
        f = self._file(layout.HISTOGRAMS_FILE, partition)
        rg_rows = layout.HISTOGRAM_ROW_GROUP
        groups = list(range(start // rg_rows, (stop - 1) // rg_rows + 1)) if stop > start else []
        if groups:
            col = contiguous(f.read_row_groups(groups, (column,))[column])
            col = col.slice(start - groups[0] * rg_rows, stop - start)
        else:
            col = pa.array([], f.schema.field(column).type)
        lower, upper = pc.struct_field(col, "lower"), pc.struct_field(col, "upper")
        if f.kv.get(layout.EDGES_KEY) == layout.EDGES_IN_SPEC:  # a partition's: the table's edges
            lows, ups = spec.edges()
            t = self.column_type(column)
            lower, upper = from_domain(lows[start:stop], t), from_domain(ups[start:stop], t)
        return pa.table(
            {
                "bin": pa.array(range(start, stop), pa.int64()),
                "lower": lower,
                "upper": upper,
                "count": pc.struct_field(col, "count"),
            }
        )


def _projection(f: _File, statistics: Sequence[str] | None, sketches: bool) -> list[str]:
    """The statistics.parquet columns a lookup reads: all but the sketches, or those asked for."""
    names = f.schema.names
    if statistics is None:
        return [n for n in names if sketches or n not in layout.SKETCH_COLUMNS]
    unknown = [s for s in statistics if s not in names]
    if unknown:
        raise InvalidArgumentError(f"unknown statistic(s): {', '.join(unknown)}")
    return ["column", *[s for s in statistics if s != "column"]]


def _py_or_scalar(scalar: pa.Scalar) -> Any:
    """``scalar.as_py()``, or the scalar itself where that fails (years beyond 1..9999; a
    nanosecond value without pandas)."""
    try:
        return scalar.as_py()
    except (OverflowError, ValueError):
        return scalar


def decode_sum(text: str, t: pa.DataType) -> int | float | Decimal:
    """The `sum` statistic: an exact int for integers, a Decimal for decimals, else a float."""
    if pa.types.is_integer(t):
        return int(text)
    if pa.types.is_decimal(t):
        return Decimal(text)
    return float(text)


def value_partitions(
    store: str,
    table: str,
    column: str,
    value: Any,
    *,
    candidates: bool = False,
    at_transaction: int | None = None,
    at_snapshot: str | None = None,
) -> ValuePartitions:
    """Which partitions of ``table`` hold ``value`` in ``column``, and how often
    (``TableStatistics.value_partitions``; ``result.partitions`` is the list of
    (partition key, count))."""
    return open_statistics(store, table, at_transaction=at_transaction, at_snapshot=at_snapshot).value_partitions(
        column, value, candidates=candidates
    )


def open_statistics(store: str, table: str, at_transaction: int | None = None, at_snapshot: str | None = None) -> TableStatistics:
    """The statistics of ``table``: the current state, or an earlier one (``at_transaction`` / ``at_snapshot``)."""
    try:
        return TableStatistics(Store(store), table, at_transaction=at_transaction, at_snapshot=at_snapshot)
    except Exception as exc:
        problem = fileio.access_problem(store) if fileio.is_io_error(exc) else None
        if problem is None:
            raise
        raise AccessDeniedError(f"store {store}: {problem}") from None
