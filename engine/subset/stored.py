"""The stored statistics a subset reads: partitions' statistics rows, exact frequencies, bin
counts, value partitions and the file index, each read and decoded once (the I/O edge of
engine/subset: the other modules compute on what this one hands them).

``ts`` is any object with ``TableStatistics``'s lookups (engine.lookup delegates to this
package, so it cannot import it). Statistics files are immutable (unique paths per job), so
what is decoded from them is also kept per process, bounded by entries.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from engine import expressions as ex
from engine import measures
from engine.arrowcompute import contiguous
from engine.exceptions import InvalidArgumentError, MetastoreError
from engine.expressions.binding import comparable
from engine.expressions.statistics import PRUNING_STATISTICS, metrics_from_row
from engine.expressions.strict import StrictMetricsEvaluator
from engine.expressions.tree import BoundLiteral, BoundReference
from engine.files import layout
from engine.stats.histograms import HistogramSpec

#: the statistics a subset answers from stored files (others: computed, or the whole
#: table's / one partition's when the subset is exactly that), beside the registered
#: statistics' (engine/measures: sum, mean, stddev, ...; _measure_statistics)
MERGEABLE = ("row_count", "null_count", "nan_count", "distinct_count", "min", "max")
#: the partition statistics a subset reads (pruning and merging), in one read per partition
ROW_STATISTICS = tuple(dict.fromkeys([*PRUNING_STATISTICS, *MERGEABLE]))


@dataclass(frozen=True)
class Freq:
    """A partition's stored frequencies of one column: kind, typed distinct values, their counts."""

    kind: str
    values: pa.Array
    counts: np.ndarray

    @property
    def complete(self) -> bool:
        """Whether every value of the partition is stored (then any one-column predicate's
        rows are the matching values' counts, exactly)."""
        return self.kind == layout.FREQ_COMPLETE


class StoredInputs:
    """What one subset reads of ``ts``'s files, read on first use and kept for the subset's life."""

    def __init__(self, ts: Any, columns: Sequence[str] | None) -> None:
        """``columns``: the columns the caller will ask for, read with the predicate's (one
        read per partition); None: not known yet."""
        self.ts = ts
        #: partition key -> its rows
        self.rows: dict[str, int] = {p.key: p.rows for p in ts.partitions()}
        self._hint = [ts.resolve_column(c) for c in columns] if columns is not None else []
        self._part_rows: dict[str, dict[str, dict[str, Any] | None]] = {}
        self._freqs: dict[tuple[str, str], Freq | None] = {}
        self._hists: dict[tuple[str, str], np.ndarray | None] = {}
        self._no_value_partitions: set[str] = set()

    # ------------------------------------------------------------ statistics rows
    def column_metrics(self, partition: str, refs: Sequence[BoundReference]) -> dict[str, ex.ColumnMetrics]:
        """The evaluators' metrics of the predicate's columns ``refs`` in one partition (a
        column the partition's file lacks: absent)."""
        names = list(dict.fromkeys(r.name for r in refs))
        rows = self.rows_of(partition, [*names, *self._hint])
        stats = {n: row for n in names if (row := rows.get(n)) is not None}
        uri = self.ts.file_uri(layout.STATISTICS_FILE, partition) if stats else ""
        return {r.name: _metrics(uri, r, stats[r.name]) for r in refs if r.name in stats}

    def rows_of(self, partition: str, names: Sequence[str]) -> dict[str, dict[str, Any] | None]:
        """A partition's statistics rows of ``names`` (None: not in its file), read once for
        all the names not read yet (one partial read per partition)."""
        cache = self._part_rows.setdefault(partition, {})
        missing = [n for n in dict.fromkeys(names) if n not in cache]
        if missing:
            known = _known_columns(self.ts, partition)
            present = [n for n in missing if n in known]
            if present:
                for n, row in zip(
                    present, self.ts.statistics(present, partition, [*ROW_STATISTICS, *_measure_statistics(self.ts, partition)]).to_pylist()
                ):
                    cache[n] = row
            for n in missing:
                cache.setdefault(n, None)
        return cache

    def row(self, column: str, partition: str) -> dict[str, Any]:
        """A partition's statistics row of ``column``; an error where its file has none."""
        row = self.rows_of(partition, [column]).get(column)
        if row is None:
            raise InvalidArgumentError(f"table {self.ts.table!r} has no statistics for column {column!r} in partition {partition!r}")
        return row

    def distinct_count(self, ref: BoundReference, partition: str) -> float:
        """A partition's distinct count of a column, at least 1 (a divisor)."""
        row = self.ts.statistics([ref.name], partition, ["distinct_count"]).column("distinct_count")[0].as_py()
        return float(row) if row else 1.0

    def table_distinct_count(self, column: str) -> int | None:
        """The table's distinct count of ``column``: no subset has more."""
        return self.ts.statistics([column], None, ["distinct_count"]).column("distinct_count")[0].as_py()

    def theta_sketches(self, column: str, partitions: Sequence[str]) -> list[bytes | None]:
        """The partitions' theta sketches of ``column`` (None where one has none): their union
        estimates the distinct count of partitions that do not store all their values."""
        return [self.ts.statistics([column], k, ["theta_sketch"]).column("theta_sketch")[0].as_py() for k in partitions]

    # ------------------------------------------------------------ histograms
    def histogrammed(self, ref: Any) -> bool:
        """Whether ``ref`` is a column with bins (a histogram spec that is not None)."""
        if not isinstance(ref, BoundReference):
            return False
        try:
            return self.ts.histogram_spec(ref.name) is not None
        except InvalidArgumentError:
            return False

    def spec(self, column: str) -> HistogramSpec | None:
        """The table's bin edges of ``column``: every partition's bins are on them."""
        return self.ts.histogram_spec(column)

    def hist(self, ref: BoundReference, partition: str) -> np.ndarray | None:
        """A partition's bin counts of ``ref`` on the table's edges (None: no histogram)."""
        k = (ref.name, partition)
        if k not in self._hists:
            uri = (self.ts.file_uri(layout.HISTOGRAMS_FILE, partition), ref.name)
            hit = _decoded.get(uri, _MISSING)
            if hit is _MISSING:
                try:
                    t = self.ts.histogram(ref.name, partition)
                    hit = t.column("count").to_numpy(zero_copy_only=False).astype(np.int64)
                except InvalidArgumentError:
                    hit = None
                _remember(uri, hit)
            self._hists[k] = hit
        return self._hists[k]

    # ------------------------------------------------------------ frequencies
    def freq(self, ref: BoundReference, partition: str | None) -> Freq | None:
        """A partition's (None: the table's) stored frequencies of ``ref``, typed; None for a
        column without them."""
        k = (ref.name, partition or "")
        if k not in self._freqs:
            uri = (self.ts.file_uri(layout.FREQUENCIES_FILE, partition), ref.name)
            hit = _decoded.get(uri, _MISSING)
            if hit is _MISSING:
                index = self.ts.frequency_index(partition)
                if ref.name not in index:
                    hit = None
                else:
                    _, _, n_rows, kind = index[ref.name]
                    t = self.ts.top_frequencies(ref.name, n_rows, partition, typed=True)
                    values = contiguous(t.column("value"))
                    hit = Freq(kind, values, t.column("frequency").to_numpy(zero_copy_only=False).astype(np.int64))
                _remember(uri, hit)
            self._freqs[k] = hit
        return self._freqs[k]

    def value_partition_count(self, ref: BoundReference, lit: BoundLiteral, partition: str) -> int | None:
        """A value's exact count in one partition from the table's value partitions (tables
        analyzed with ``--value-partitions``), None when they do not say."""
        if ref.name in self._no_value_partitions:
            return None
        try:
            vp = self.ts.value_partitions(ref.name, lit.scalar)
        except MetastoreError:  # analyzed without value partitions (or the column has no frequencies)
            self._no_value_partitions.add(ref.name)
            return None
        if vp.status == "found":
            return dict(vp.partitions).get(partition, 0)
        if vp.status == "absent":
            return 0
        return None

    # ------------------------------------------------------------ file index
    def file_bounds(self, expr: ex.Expression, metrics: Mapping[str, Mapping[str, ex.ColumnMetrics]]) -> dict[str, tuple[int, int]]:
        """Per partition of ``metrics``: (surely matching rows, possibly matching rows) from
        its files' index statistics: the inclusive evaluator over all files at once, the strict
        one per file. A column the index does not hold (a partition column) takes the
        partition's metrics: they bound every row of its files too. A partition whose files'
        indexed rows are not its live rows (Iceberg delete files, Delta deletion vectors) or
        unknown (a Hudi slice with log files) is left out. Errors when the table has no index
        (``MetastoreError``)."""
        from engine.expressions.vector import VectorMetricsEvaluator
        from engine.fileindex.plan import open_file_index

        index = open_file_index(self.ts.file_index_directory())
        refs = {r.name: r for r in ex.references(expr) if isinstance(r, BoundReference)}
        vectors = {name: index.vectors(ref) for name, ref in refs.items()}
        might = VectorMetricsEvaluator(expr).eval(lambda ref: vectors.get(ref.name), index.n, index.rows)
        strict = StrictMetricsEvaluator(expr)
        out: dict[str, tuple[int, int]] = {}
        for key, first, count in index.partition_files:
            if key not in metrics:
                continue
            if int(index.rows[first : first + count].sum()) != self.rows.get(key) or (index.rows[first : first + count] < 0).any():
                continue  # rows the files were written with, not the live ones (deletes), or unknown: no bound
            low = high = 0
            for i in range(first, first + count):
                rows = int(index.rows[i])
                if not might[i]:
                    continue
                high += rows
                part = metrics[key]
                if strict.eval(lambda ref: _file_metrics(vectors.get(ref.name), i) or part.get(ref.name), rows):
                    low += rows
            out[key] = (low, high)
        return out


def _file_metrics(v: Any, i: int) -> ex.ColumnMetrics | None:
    """One file's ColumnMetrics from the index's vectors (None: the file has none)."""
    if v is None or not v.known[i]:
        return None
    lower, upper = v.lower[i], v.upper[i]
    return ex.ColumnMetrics(
        rows=int(v.rows[i]),
        nulls=int(v.nulls[i]) if v.nulls[i] >= 0 else None,
        nans=int(v.nans[i]) if v.nans[i] >= 0 else None,
        lower=comparable(lower) if lower.is_valid else None,
        upper=comparable(upper) if upper.is_valid else None,
    )


# ------------------------------------------------------------------ per-process caches
# A partition's decoded frequencies and bin counts stay valid for as long as they are kept
# (a few MB at most: bounded by entries).
_MISSING = object()
_DECODED_ENTRIES = 512
_decoded: OrderedDict[tuple[str, str], Any] = OrderedDict()
_lock = threading.Lock()
_known: OrderedDict[str, frozenset[str]] = OrderedDict()
_metrics_cache: OrderedDict[tuple[str, str, str], ex.ColumnMetrics] = OrderedDict()


def _remember(key: tuple[str, str], value: object) -> None:
    with _lock:
        _decoded[key] = value
        while len(_decoded) > _DECODED_ENTRIES:
            _decoded.popitem(last=False)


def _measure_statistics(ts: Any, partition: str) -> list[str]:
    """The registered statistics' columns (engine/measures) a partition's file holds (a file
    written before one was registered has not its column)."""
    wanted = measures.statistics_columns()
    names = set(ts.statistics_schema(partition).names) if wanted else set()
    return [f.name for f in wanted if f.name in names]


def _known_columns(ts: Any, partition: str) -> frozenset[str]:
    """The columns a partition's statistics file holds (asking for others is an error)."""
    uri = ts.file_uri(layout.STATISTICS_FILE, partition)
    hit = _known.get(uri)
    if hit is None:
        hit = frozenset(ts.statistics_columns(partition))
        with _lock:
            _known[uri] = hit
            while len(_known) > _DECODED_ENTRIES:
                _known.popitem(last=False)
    return hit


def _metrics(uri: str, ref: BoundReference, row: dict[str, Any]) -> ex.ColumnMetrics:
    """``metrics_from_row`` of a partition's column, kept per file (immutable) and type."""
    key = (uri, ref.name, str(ref.type))
    hit = _metrics_cache.get(key)
    if hit is None:
        hit = metrics_from_row(row, ref.type)
        with _lock:
            _metrics_cache[key] = hit
            while len(_metrics_cache) > 4 * _DECODED_ENTRIES:
                _metrics_cache.popitem(last=False)
    return hit
