"""Lookups that read only what they return.

Statistics files are immutable (unique paths per job), so their Parquet
footers are cached per process by URI and never invalidated; a lookup then
reads only the row groups and the projected columns it needs:

- statistics of some columns: the row groups holding those rows (64 rows each),
  and only the statistic columns asked for (sketches are skipped by default);
- top-k frequencies: the column's head row group (1,024 rows), more only if k is larger;
- histogram bins: the one struct column, only the row groups of the bin range;
  a value range is turned into bins with the spec in the file's metadata.
"""
from __future__ import annotations

import base64
import json
import threading
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
from engine.stats.histograms import HistogramSpec, to_domain
from engine.store import Store, partition_dirname

_FOOTER_CACHE_SIZE = 512
_footers: OrderedDict[str, pq.FileMetaData] = OrderedDict()
_lock = threading.Lock()


def _open(uri: str) -> pq.ParquetFile:
    with _lock:
        md = _footers.get(uri)
        if md is not None:
            _footers.move_to_end(uri)
    try:
        f = fileio.open_input(uri)
    except FileNotFoundError as exc:
        raise StatisticsNotFoundError(f"statistics file missing: {uri}") from exc
    pf = pq.ParquetFile(f, metadata=md)
    if md is None:
        with _lock:
            _footers[uri] = pf.metadata
            while len(_footers) > _FOOTER_CACHE_SIZE:
                _footers.popitem(last=False)
    return pf


def _kv(pf: pq.ParquetFile) -> dict[str, str]:
    return layout.decode_metadata(pf.metadata.metadata)


def clear_cache() -> None:
    with _lock:
        _footers.clear()


@dataclass(frozen=True)
class PartitionInfo:
    key: str
    rows: int


class TableStatistics:
    """The published statistics of one table (the state at open time; ``refresh()`` to move on)."""

    def __init__(self, store: Store, table: str) -> None:
        self.store = store
        self.table = table
        self.refresh()

    def refresh(self) -> None:
        self.manifest = self.store.current(self.table)
        self._run = self.manifest["run_uri"]
        self.schema = pa.ipc.read_schema(pa.py_buffer(base64.b64decode(self.manifest["schema"])))
        self._keys = {p["key"] for p in self.manifest["partitions"]}

    # ------------------------------------------------------------ helpers
    @property
    def job_id(self) -> str:
        return self.manifest["job_id"]

    @property
    def snapshot(self) -> str:
        return self.manifest["snapshot"]

    def partitions(self) -> list[PartitionInfo]:
        return [PartitionInfo(p["key"], p["rows"]) for p in self.manifest["partitions"]]

    def column_type(self, column: str) -> pa.DataType:
        idx = self.schema.get_field_index(column)
        if idx < 0:
            raise InvalidArgumentError(f"table {self.table!r} has no column {column!r}")
        return self.schema.field(idx).type

    def file_uri(self, name: str, partition: str | None = None) -> str:
        if partition is None:
            return fileio.join(self._run, "table", name)
        if partition not in self._keys:
            raise InvalidArgumentError(f"table {self.table!r} has no partition {partition!r}")
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
        pf = _open(self.file_uri(layout.STATISTICS_FILE, partition))
        kv = _kv(pf)
        order: list[str] = json.loads(kv["metastore.columns"])
        rg_rows = int(kv["metastore.row_group_rows"])
        names = pf.schema_arrow.names
        if statistics is None:
            proj = [n for n in names if sketches or n not in layout.SKETCH_COLUMNS]
        else:
            unknown = [s for s in statistics if s not in names]
            if unknown:
                raise InvalidArgumentError(f"unknown statistic(s): {', '.join(unknown)}")
            proj = ["column", *[s for s in statistics if s != "column"]]
        if columns is None:
            return pf.read(columns=proj)
        position = {c: i for i, c in enumerate(order)}
        missing = [c for c in columns if c not in position]
        if missing:
            raise InvalidArgumentError(f"table {self.table!r} has no statistics for column(s): {', '.join(map(repr, missing))}")
        rows = [position[c] for c in columns]
        groups = sorted({r // rg_rows for r in rows})
        t = pf.read_row_groups(groups, columns=proj)
        base = {g: i * rg_rows for i, g in enumerate(groups)}  # every group but the last is full
        take = [base[r // rg_rows] + r % rg_rows for r in rows]
        return t.take(pa.array(take, pa.int64()))

    def column_statistics(self, column: str, partition: str | None = None) -> dict[str, Any]:
        """One column's statistics as a dict, values decoded to the column's type."""
        row = self.statistics([column], partition).to_pylist()[0]
        t = self.column_type(column)
        for key in layout.VALUE_STATISTICS:
            if row.get(key) is not None:
                row[key] = value_forms.decode_scalar(row[key], t).as_py()
        return row

    # ------------------------------------------------------------ frequencies
    def frequency_index(self, partition: str | None = None) -> dict[str, tuple[int, int, int, str]]:
        pf = _open(self.file_uri(layout.FREQUENCIES_FILE, partition))
        return {k: tuple(v) for k, v in json.loads(_kv(pf)["metastore.frequencies"]).items()}

    def top_frequencies(self, column: str, k: int = 10, partition: str | None = None, typed: bool = False) -> pa.Table:
        """The k most frequent values of a discrete column: (value, frequency), by decreasing frequency.

        An empty result with kind ``all_distinct`` means every value occurs once.
        The kind is in the result's schema metadata (``kind``).
        """
        if k < 0:
            raise InvalidArgumentError("k must be >= 0")
        pf = _open(self.file_uri(layout.FREQUENCIES_FILE, partition))
        kv = _kv(pf)
        index = json.loads(kv["metastore.frequencies"])
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
            covered += pf.metadata.row_group(g).num_rows
        if groups:
            t = pf.read_row_groups(groups, columns=["value", "frequency"]).slice(0, want)
        else:
            t = pa.table({"value": pa.array([], pa.string()), "frequency": pa.array([], pa.int64())})
        if typed:
            t = t.set_column(0, "value", value_forms.decode(t["value"].combine_chunks(), self.column_type(column)))
        return t.replace_schema_metadata({"kind": kind, "rows": str(n_rows)})

    # ------------------------------------------------------------ histograms
    def histogram_spec(self, column: str, partition: str | None = None) -> HistogramSpec | None:
        pf = _open(self.file_uri(layout.HISTOGRAMS_FILE, partition))
        specs = json.loads(_kv(pf)["metastore.histograms"])
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
            if lo is not None:
                start = max(start, spec.bin_of(to_domain(pa.scalar(lo, type=t))))
            if hi is not None:
                stop = min(stop, spec.bin_of(to_domain(pa.scalar(hi, type=t))) + 1)
        if start >= stop:
            start = stop = min(start, spec.bins)
        pf = _open(uri)
        rg_rows = layout.HISTOGRAM_ROW_GROUP
        groups = list(range(start // rg_rows, (stop - 1) // rg_rows + 1)) if stop > start else []
        if groups:
            col = pf.read_row_groups(groups, columns=[column])[column].combine_chunks()
            col = col.slice(start - groups[0] * rg_rows, stop - start)
        else:
            col = pa.array([], pf.schema_arrow.field(column).type)
        return pa.table(
            {
                "bin": pa.array(range(start, stop), pa.int64()),
                "lower": pc.struct_field(col, "lower"),
                "upper": pc.struct_field(col, "upper"),
                "count": pc.struct_field(col, "count"),
            }
        )


def open_statistics(store: str, table: str) -> TableStatistics:
    return TableStatistics(Store(store), table)
