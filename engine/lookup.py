"""Lookups that read only what they return.

Statistics files are immutable (unique paths per job), so their Parquet
footers are cached per process by URI and never invalidated; a lookup then
reads only the row groups and the projected columns it needs:

- statistics of some columns: the row groups holding those rows (64 rows each),
  and only the statistic columns asked for (sketches are skipped by default);
- top-k frequencies: the column's head row group (1,024 rows), more only if k is larger;
- histogram bins: the one struct column, only the row groups of the bin range;
  a value range is turned into bins with the spec in the file's metadata;
- the partitions holding a value (``value_partitions``, tables analyzed with
  value partitions): the ``value`` column of the column's row groups whose
  min/max admit the value, then the distribution of the one row group that has it.
"""
from __future__ import annotations

import base64
import json
import threading
from decimal import Decimal
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from engine import fileio
from engine import values as value_forms
from engine.exceptions import InvalidArgumentError, StatisticsNotFoundError
from engine.files import layout
from engine.stats import valuepartitions
from engine.stats.histograms import HistogramSpec, to_domain
from engine.store import Store, partition_dirname

_FILE_CACHE_SIZE = 256  # open statistics files (footer parsed, metadata decoded)
_ROW_GROUP_CACHE_BYTES = 64 * 1024 * 1024  # decoded row groups of hot files


class _File:
    """An open statistics file: the parsed footer, its decoded metadata, a reader.

    Statistics files are immutable (unique paths per job), so everything here
    stays valid for as long as the file is cached.
    """

    def __init__(self, uri: str) -> None:
        try:
            self.pf = pq.ParquetFile(fileio.open_input(uri))
        except FileNotFoundError as exc:
            raise StatisticsNotFoundError(f"statistics file missing: {uri}") from exc
        self.uri = uri
        self.kv = layout.decode_metadata(self.pf.metadata.metadata)
        self.schema = self.pf.schema_arrow
        self._json: dict[str, Any] = {}
        self.lock = threading.Lock()  # a Parquet reader is not safe for concurrent reads

    def meta_json(self, key: str) -> Any:
        if key not in self._json:
            self._json[key] = json.loads(self.kv[key])
        return self._json[key]

    def read_row_group(self, group: int, columns: tuple[str, ...]) -> pa.Table:
        key = (self.uri, group, columns)
        with _lock:
            hit = _row_groups.get(key)
            if hit is not None:
                _row_groups.move_to_end(key)
                return hit
        with self.lock:
            t = self.pf.read_row_group(group, columns=list(columns))
        _remember(key, t)
        return t

    def read_row_groups(self, groups: list[int], columns: tuple[str, ...]) -> pa.Table:
        parts = [self.read_row_group(g, columns) for g in groups]
        if not parts:
            return self.schema.empty_table().select(list(columns))
        return pa.concat_tables(parts) if len(parts) > 1 else parts[0]


_files: OrderedDict[str, _File] = OrderedDict()
_row_groups: OrderedDict[tuple[Any, ...], pa.Table] = OrderedDict()
_row_group_bytes = 0
_lock = threading.Lock()


def _remember(key: tuple[Any, ...], t: pa.Table) -> None:
    global _row_group_bytes
    with _lock:
        if key in _row_groups:
            return
        _row_groups[key] = t
        _row_group_bytes += t.nbytes
        while _row_group_bytes > _ROW_GROUP_CACHE_BYTES and len(_row_groups) > 1:
            _, old = _row_groups.popitem(last=False)
            _row_group_bytes -= old.nbytes


def _open(uri: str) -> _File:
    with _lock:
        f = _files.get(uri)
        if f is not None:
            _files.move_to_end(uri)
            return f
    f = _File(uri)
    with _lock:
        _files[uri] = f
        while len(_files) > _FILE_CACHE_SIZE:
            _files.popitem(last=False)
    return f


def clear_cache() -> None:
    """Forget open files and decoded row groups (a cold start)."""
    global _row_group_bytes
    with _lock:
        _files.clear()
        _row_groups.clear()
        _row_group_bytes = 0


def forget(prefix: str) -> int:
    """Forget the open files and decoded row groups whose URI starts with ``prefix``
    (e.g. the run directory of a job that is no longer published); returns how many
    cache entries were dropped. Readers holding such a file keep a valid handle.
    """
    global _row_group_bytes
    dropped = 0
    with _lock:
        for uri in [u for u in _files if u.startswith(prefix)]:
            del _files[uri]
            dropped += 1
        for key in [k for k in _row_groups if str(k[0]).startswith(prefix)]:
            _row_group_bytes -= _row_groups.pop(key).nbytes
            dropped += 1
    return dropped


def cache_info() -> dict[str, int]:
    """Sizes of the per-process caches: open files, decoded row groups and their bytes."""
    with _lock:
        return {"files": len(_files), "row_groups": len(_row_groups), "row_group_bytes": _row_group_bytes}


@dataclass(frozen=True)
class PartitionInfo:
    key: str
    rows: int


#: ``ValuePartitions.status``: the value is stored with its distribution
FOUND = "found"
#: the value does not occur: the column's frequencies are complete and do not hold it (or,
#: with ``candidates``, no partition's min/max admits it)
ABSENT = "absent"
#: the column stores only values seen more than once (or none): an unstored value occurs
#: at most once, in a partition the table's frequencies do not name
AT_MOST_ONCE = "at_most_once"


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
        return (self.manifest.get("catalog") or {}).get("txn_id")

    def refresh(self) -> None:
        if self.time_travel:
            from engine.catalog.publish import manifest_at

            self.manifest = manifest_at(self.store.root, self.table, txn_id=self.at_transaction, snapshot=self.at_snapshot)
        else:
            self.manifest = self.store.current(self.table)
        self._run = self.manifest["run_uri"]
        self.schema = pa.ipc.read_schema(pa.py_buffer(base64.b64decode(self.manifest["schema"])))
        self._keys = {p["key"] for p in self.manifest["partitions"]}
        # the catalog names every partition's files: with inherited statistics
        # partitions live in different runs
        self._partition_files = {p["key"]: p["files"] for p in self.manifest["partitions"] if p.get("files")}
        self._table_files = self.manifest.get("table_files") or {}

    # ------------------------------------------------------------ helpers
    @property
    def job_id(self) -> str:
        return self.manifest["job_id"]

    @property
    def snapshot(self) -> str:
        return self.manifest["snapshot"]

    def stale_by(self) -> int | None:
        """How many snapshots the analyzed table (Iceberg, Delta, Hudi) has committed since the
        snapshot these statistics describe, from the format's history (no data read; None for
        a Parquet directory or a snapshot no longer in the history; docs/FORMATS.md)."""
        from engine.sources import snapshots_since

        uri = self.manifest.get("table_uri")
        return snapshots_since(uri, self.snapshot) if uri else None

    def partitions(self) -> list[PartitionInfo]:
        return [PartitionInfo(p["key"], p["rows"]) for p in self.manifest["partitions"]]

    def column_type(self, column: str) -> pa.DataType:
        idx = self.schema.get_field_index(column)
        if idx < 0:
            raise InvalidArgumentError(f"table {self.table!r} has no column {column!r}")
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

    # ------------------------------------------------------------ statistics
    def statistics(
        self,
        columns: Sequence[str] | None = None,
        partition: str | None = None,
        statistics: Sequence[str] | None = None,
        sketches: bool = False,
    ) -> pa.Table:
        """Rows of statistics.parquet for ``columns`` (all if None), in the order asked."""
        f = _open(self.file_uri(layout.STATISTICS_FILE, partition))
        order: list[str] = f.meta_json("metastore.columns")
        rg_rows = int(f.kv["metastore.row_group_rows"])
        proj = _projection(f, statistics, sketches)
        if columns is None:
            with f.lock:
                return f.pf.read(columns=proj)
        position = f._json.get("position")
        if position is None:
            position = f._json["position"] = {c: i for i, c in enumerate(order)}
        missing = [c for c in columns if c not in position]
        if missing:
            raise InvalidArgumentError(f"table {self.table!r} has no statistics for column(s): {', '.join(map(repr, missing))}")
        rows = [position[c] for c in columns]
        groups = sorted({r // rg_rows for r in rows})
        t = f.read_row_groups(groups, tuple(proj))
        base = {g: i * rg_rows for i, g in enumerate(groups)}  # every group but the last is full
        take = [base[r // rg_rows] + r % rg_rows for r in rows]
        return t.take(pa.array(take, pa.int64()))

    def statistics_columns(self, partition: str | None = None) -> list[str]:
        """The columns described by a statistics file, in row order (row i is column i), from its footer."""
        f = _open(self.file_uri(layout.STATISTICS_FILE, partition))
        return list(f.meta_json("metastore.columns"))

    def column_statistics(self, column: str, partition: str | None = None, sketches: bool = False) -> dict[str, Any]:
        """One column's statistics as a dict, values decoded to Python values of the column's type."""
        row = self.statistics([column], partition, sketches=sketches).to_pylist()[0]
        t = self.column_type(column)
        for key in layout.VALUE_STATISTICS:
            if row.get(key) is not None:
                row[key] = value_forms.decode_scalar(row[key], t).as_py()
        if row.get("sum") is not None:
            row["sum"] = decode_sum(row["sum"], t)
        return row

    def statistics_schema(
        self, partition: str | None = None, statistics: Sequence[str] | None = None, sketches: bool = False
    ) -> pa.Schema:
        """The schema ``statistics()`` returns for these arguments, from the file footer only."""
        f = _open(self.file_uri(layout.STATISTICS_FILE, partition))
        proj = _projection(f, statistics, sketches)
        return pa.schema([f.schema.field(n) for n in proj])

    # ------------------------------------------------------------ frequencies
    def frequency_index(self, partition: str | None = None) -> dict[str, tuple[int, int, int, str]]:
        f = _open(self.file_uri(layout.FREQUENCIES_FILE, partition))
        return {k: tuple(v) for k, v in f.meta_json("metastore.frequencies").items()}

    def top_frequencies(self, column: str, k: int = 10, partition: str | None = None, typed: bool = False) -> pa.Table:
        """The k most frequent values of a discrete column: (value, frequency), by decreasing frequency.

        An empty result with kind ``all_distinct`` means every value occurs once.
        The kind is in the result's schema metadata (``kind``).
        """
        if k < 0:
            raise InvalidArgumentError("k must be >= 0")
        f = _open(self.file_uri(layout.FREQUENCIES_FILE, partition))
        index = f.meta_json("metastore.frequencies")
        if column not in index:
            self.column_type(column)  # unknown column -> clear error
            raise InvalidArgumentError(f"column {column!r} has no frequencies (only discrete columns do)")
        first, n_groups, n_rows, kind = index[column]
        want = min(k, n_rows)
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
            t = t.set_column(0, "value", value_forms.decode(t["value"].combine_chunks(), self.column_type(column)))
        return t.replace_schema_metadata({"kind": kind, "stored_rows": str(n_rows)})

    # ------------------------------------------------------------ value partitions
    def value_text(self, column: str, value: Any) -> tuple[pa.Scalar, str]:
        """A value of ``column`` given in its type (a Python value or pyarrow scalar) or,
        as a str, in its text form (docs/VALUE_FORMS.md): the typed scalar and its
        canonical text form (what frequencies.parquet stores)."""
        t = self.column_type(column)
        if value is None:
            raise InvalidArgumentError(f"column {column!r}: frequencies count no nulls (the null count is in the column's statistics)")
        try:
            if isinstance(value, pa.Scalar):
                scalar = value if value.type == t else value.cast(t)
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
        column) gives ``AT_MOST_ONCE``: its partition is not recorded; with
        ``candidates`` the partitions whose min/max admit it are listed (one
        statistics lookup per partition).
        """
        scalar, text = self.value_text(column, value)
        f = _open(self.file_uri(layout.FREQUENCIES_FILE))
        index = f.meta_json("metastore.frequencies")
        if column not in index:
            raise InvalidArgumentError(f"column {column!r} has no frequencies (only discrete columns do)")
        if valuepartitions.COLUMN not in f.schema.names or layout.PARTITIONS_KEY not in f.kv:
            raise StatisticsNotFoundError(
                f"table {self.table!r} (job {self.job_id}) was analyzed without value partitions: "
                f"analyze it again with value partitions (metastore analyze --value-partitions) to look values up by partition"
            )
        keys: list[str] = f.meta_json(layout.PARTITIONS_KEY)
        first, n_groups, _, kind = index[column]
        common = dict(table=self.table, column=column, value=scalar.as_py(), text=text, kind=kind, table_partitions=len(keys))
        found = self._find_value(f, text, range(first, first + n_groups))
        if found is not None:
            frequency, dist = found
            pairs = tuple((keys[i], c) for i, c in valuepartitions.decode(dist, len(keys)))
            where = f"{len(pairs)} of {len(keys)} partition{'s' if len(keys) != 1 else ''}"
            return ValuePartitions(**common, status=FOUND, frequency=frequency, partitions=pairs, note=f"occurs {frequency:,} times, in {where}")
        if kind == layout.FREQ_COMPLETE:
            return ValuePartitions(**common, status=ABSENT, frequency=0, partitions=(), note="does not occur in the table (its frequencies are complete)")
        why = (
            "every value of the column occurs exactly once"
            if kind == layout.FREQ_ALL_DISTINCT
            else "the column stores only values that occur more than once"
        )
        note = f"occurs at most once in the table ({why}): if it occurs, its one partition is not recorded"
        found_in = self._candidates(column, scalar, keys) if candidates else None
        if found_in == ():
            note = "does not occur in the table (no partition's min/max admits it)"
            return ValuePartitions(**common, status=ABSENT, frequency=0, partitions=(), note=note, candidates=found_in)
        if found_in is not None:
            note += f"; partitions whose min/max admit it: {len(found_in)} of {len(keys)}"
        return ValuePartitions(**common, status=AT_MOST_ONCE, frequency=None, partitions=(), note=note, candidates=found_in)

    def _find_value(self, f: _File, text: str, groups: range) -> tuple[int, dict[str, Any]] | None:
        """(frequency, distribution) of the row holding ``text``; row groups whose
        ``value`` statistics exclude it are not read."""
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
        """Partitions whose min <= value <= max (from their statistics)."""
        out = []
        for key in keys:
            row = self.statistics([column], partition=key, statistics=["min", "max"]).to_pylist()[0]
            if row["min"] is None or row["max"] is None:
                continue  # no non-null value there
            t = scalar.type
            lo, hi = value_forms.decode_scalar(row["min"], t), value_forms.decode_scalar(row["max"], t)
            if pc.less_equal(lo, scalar).as_py() and pc.less_equal(scalar, hi).as_py():
                out.append(key)
        return tuple(out)

    # ------------------------------------------------------------ histograms
    def histogram_spec(self, column: str, partition: str | None = None) -> HistogramSpec | None:
        f = _open(self.file_uri(layout.HISTOGRAMS_FILE, partition))
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
    ) -> pa.Table:
        """Bins (lower, upper, count) of a column: all, a bin range [start, stop), or those overlapping a value range."""
        uri = self.file_uri(layout.HISTOGRAMS_FILE, partition)
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
        f = _open(uri)
        rg_rows = layout.HISTOGRAM_ROW_GROUP
        groups = list(range(start // rg_rows, (stop - 1) // rg_rows + 1)) if stop > start else []
        if groups:
            col = f.read_row_groups(groups, (column,))[column].combine_chunks()
            col = col.slice(start - groups[0] * rg_rows, stop - start)
        else:
            col = pa.array([], f.schema.field(column).type)
        return pa.table(
            {
                "bin": pa.array(range(start, stop), pa.int64()),
                "lower": pc.struct_field(col, "lower"),
                "upper": pc.struct_field(col, "upper"),
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
    return TableStatistics(Store(store), table, at_transaction=at_transaction, at_snapshot=at_snapshot)
