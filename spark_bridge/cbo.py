"""Metastore statistics as the column statistics of Spark's cost-based optimizer.

``ANALYZE TABLE t COMPUTE STATISTICS FOR ALL COLUMNS`` stores, for the table, a
size and a row count and, per column, a ``CatalogColumnStat``: distinct count,
min, max, null count, average and maximum length and an equi-height histogram.
:func:`write_statistics` stores the same from a Metastore store, so Spark plans
with statistics it did not have to compute.

Where they go. The session catalog's ``alterTableStats(TableIdentifier,
Option[CatalogStatistics])`` (reached through py4j) is the one call Spark's own
ANALYZE makes: it works for the in-memory catalog (which keeps the statistics
on the table object) and for the Hive metastore (which stores them as
``spark.sql.statistics.*`` table properties, keys Spark refuses in ``ALTER TABLE
SET TBLPROPERTIES``), and it refreshes the cached relation. With the in-memory
catalog, ``ALTER TABLE SET TBLPROPERTIES ('spark.sql.statistics.numRows'=...)``
is accepted but ignored by the optimizer, so it is not used.

How each statistic maps (Spark's conventions, ``CatalogColumnStat``, version 2):

- distinct count: ours (exact, or the theta estimate), at most the non-null count;
- min/max: Spark's external text form (``true``, ``12``, ``1.5``, ``Infinity``,
  ``2024-01-05``, ``2024-01-05 10:00:00.000000`` in UTC); none for strings and
  binary, as Spark;
- avg/max length: characters (strings) or bytes (binary), rounded up as Spark
  does; the type's fixed size for other types (8 for bigint, ...);
- histogram (numbers, dates, timestamps; ``num_bins`` bins of
  ``non-null rows / num_bins`` rows each, endpoints as doubles - days for dates,
  microseconds for timestamps). Built from what the store holds, the most
  accurate way available per column:
  ``exact`` from the complete value counts (frequencies.parquet, up to
  ``EXACT_MAX_VALUES`` distinct values): exact endpoints and exact distinct
  counts per bin; otherwise endpoints interpolated from our exact equal-width
  histogram (``equal-width``: rank error at most the fullest bin's share of
  rows) or read from the KLL sketch (``kll``: its normalized rank error),
  whichever bound is smaller, with per-bin distinct counts estimated as the
  column's distinct count spread evenly over its rows (capped by the bin's
  height and, for integers and dates, by its width). Spark's own histograms are
  approximate too (``ApproximatePercentile`` endpoints, HyperLogLog++ counts).

Partition-level statistics: for a partitioned table whose partitions the catalog
tracks, each registered partition gets what ``ANALYZE TABLE t PARTITION (...)
COMPUTE STATISTICS`` stores (Spark keeps only a size and a row count per
partition): its folder's size (``CommandUtils.calculateSingleLocationSize``, as
ANALYZE) and its row count from the store (``SessionCatalog.alterPartitions``).
Every call writes everything anew, so a re-analyze after an append refreshes
what the catalog holds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine import types as mt
from engine.exceptions import InvalidArgumentError, ServiceError
from spark_bridge.catalog import CatalogTableInfo, catalog_partition, lookup_table, table_identifier
from spark_bridge.session import first_line
from spark_bridge.table_source import catalog_partition_key

if TYPE_CHECKING:  # pyspark is imported where a session is used
    from pyspark.sql import SparkSession
    from pyspark.sql.types import DataType

__all__ = [
    "DEFAULT_BINS",
    "EXACT_MAX_VALUES",
    "SparkColumnStat",
    "SparkHistogram",
    "column_stat",
    "equi_height_exact",
    "equi_height_from_quantiles",
    "spark_text",
    "write_statistics",
]

#: Spark's default spark.sql.statistics.histogram.numBins
DEFAULT_BINS = 254
#: complete value counts up to this many distinct values give an exact histogram
EXACT_MAX_VALUES = 1_000_000
#: CatalogColumnStat.VERSION of Spark 2.4 - 3.5
STAT_VERSION = 2

_FIXED_SIZES = {"byte": 1, "short": 2, "integer": 4, "long": 8, "float": 4, "double": 8, "boolean": 1, "date": 4, "timestamp": 8, "timestamp_ntz": 8}
_VARIABLE_SIZES = {"string": 20, "binary": 100}  # Spark's defaultSize when a column is all null
_HISTOGRAMMED = {"byte", "short", "integer", "long", "float", "double", "decimal", "date", "timestamp", "timestamp_ntz"}
_INTEGER_VALUED = {"byte", "short", "integer", "long", "date"}


@dataclass(frozen=True)
class SparkHistogram:
    """Spark's equi-height histogram: ``height`` rows per bin, bins ``(lo, hi, distinct)``."""

    height: float
    bins: tuple[tuple[float, float, int], ...]
    method: str  # "exact", "equal-width" or "kll"


@dataclass(frozen=True)
class SparkColumnStat:
    """One column's CatalogColumnStat, as Spark's string map holds it."""

    distinct_count: int | None
    min: str | None
    max: str | None
    null_count: int | None
    avg_len: int
    max_len: int
    histogram: SparkHistogram | None = None

    def to_map(self, column: str) -> dict[str, str]:
        """``CatalogColumnStat.toMap(column)`` without the histogram (serialized by Spark's HistogramSerializer)."""
        out = {f"{column}.version": str(STAT_VERSION), f"{column}.avgLen": str(self.avg_len), f"{column}.maxLen": str(self.max_len)}
        for key, value in (("distinctCount", self.distinct_count), ("nullCount", self.null_count), ("min", self.min), ("max", self.max)):
            if value is not None:
                out[f"{column}.{key}"] = str(value)
        return out


# ---------------------------------------------------------------- pure conversions


def type_kind(spark_type: DataType) -> str:
    """A Spark type's name without parameters (``long``, ``decimal``, ``timestamp_ntz``); char/varchar are strings."""
    base = str(spark_type.typeName()).split("(", 1)[0]
    return "string" if base in ("varchar", "char") else base


def _utc_micros_text(value: datetime) -> str:
    if value.tzinfo is not None:
        value = value.astimezone(UTC).replace(tzinfo=None)
    return f"{value.year:04d}-{value.month:02d}-{value.day:02d} {value.hour:02d}:{value.minute:02d}:{value.second:02d}.{value.microsecond:06d}"


def spark_text(value: Any, kind: str) -> str | None:
    """A min/max value in Spark's external string form for a column of Spark type ``kind``."""
    if value is None or kind in ("string", "binary"):
        return None
    if hasattr(value, "to_pydatetime"):  # pandas Timestamp (nanosecond columns)
        value = value.to_pydatetime()
    if kind == "boolean":
        return "true" if value else "false"
    if kind in ("byte", "short", "integer", "long"):
        return str(int(value))
    if kind in ("float", "double"):
        f = float(value)
        if math.isnan(f):
            return "NaN"
        if math.isinf(f):
            return "Infinity" if f > 0 else "-Infinity"
        return repr(f)
    if kind == "decimal":
        return format(Decimal(value), "f")
    if kind == "date":
        if isinstance(value, datetime):
            value = value.date()
        return value.isoformat() if isinstance(value, date) else None
    if kind in ("timestamp", "timestamp_ntz"):
        if isinstance(value, datetime):
            if kind == "timestamp_ntz" and value.tzinfo is not None:
                value = value.replace(tzinfo=None)
            return _utc_micros_text(value)
        return None
    return None


def spark_sizes(kind: str, precision: int | None, avg_len: float | None, max_len: int | None) -> tuple[int, int]:
    """(avgLen, maxLen) as Spark's ANALYZE computes them."""
    if kind in _VARIABLE_SIZES:
        default = _VARIABLE_SIZES[kind]
        avg = default if avg_len is None else int(math.ceil(avg_len))
        return avg, default if max_len is None else int(max_len)
    if kind == "decimal":
        size = 8 if (precision or 38) <= 18 else 16
        return size, size
    size = _FIXED_SIZES[kind]
    return size, size


def equi_height_exact(values: np.ndarray, counts: np.ndarray, num_bins: int) -> SparkHistogram:
    """Spark's histogram from exact value counts (``values`` need not be sorted; no nulls).

    Endpoint i is the smallest value whose cumulative count reaches ``i * n / num_bins``
    (endpoint 0 is the minimum); bin i holds the values in ``(e_i, e_i+1]`` (the first
    ``[e_0, e_1]``) and its distinct count is exact (1 for a bin with ``lo == hi``).
    """
    order = np.argsort(values, kind="stable")
    v = np.asarray(values, dtype=np.float64)[order]
    c = np.asarray(counts, dtype=np.int64)[order]
    cum = np.cumsum(c)
    n = int(cum[-1])
    ranks = np.ceil(np.arange(1, num_bins + 1, dtype=np.float64) * n / num_bins)
    idx = np.minimum(np.searchsorted(cum, ranks, side="left"), len(v) - 1)
    ends = np.concatenate([v[:1], v[idx]])
    upto = np.searchsorted(v, ends, side="right")  # distinct values <= each endpoint
    ndv = np.diff(upto)
    ndv[0] = upto[1]  # the first bin includes its lower endpoint
    ndv = np.where(ends[1:] == ends[:-1], 1, np.maximum(ndv, 1))
    return SparkHistogram(n / num_bins, tuple(zip(ends[:-1].tolist(), ends[1:].tolist(), ndv.tolist())), "exact")


def equi_height_from_quantiles(endpoints: Sequence[float], non_null: int, distinct: int, integer_valued: bool, method: str) -> SparkHistogram:
    """Spark's histogram from ``num_bins + 1`` approximate endpoints, distinct counts estimated.

    A bin's distinct count is the column's, spread evenly over its rows
    (``distinct * height / non_null``), at least 1, at most the bin's height and,
    for integer-valued columns, the number of integers it spans; 1 when ``lo == hi``.
    """
    ends = np.maximum.accumulate(np.asarray(endpoints, dtype=np.float64))
    num_bins = len(ends) - 1
    height = non_null / num_bins
    even = max(1.0, min(height, distinct * height / non_null if non_null else 1.0))
    bins = []
    for i in range(num_bins):
        lo, hi = float(ends[i]), float(ends[i + 1])
        ndv: float
        if lo == hi:
            ndv = 1
        else:
            ndv = even
            if integer_valued:
                ndv = min(ndv, math.floor(hi) - math.floor(lo) + (1 if i == 0 else 0))
            ndv = max(1, int(round(ndv)))
        bins.append((lo, hi, ndv))
    return SparkHistogram(height, tuple(bins), method)


def width_quantiles(lowers: np.ndarray, uppers: np.ndarray, counts: np.ndarray, probabilities: np.ndarray) -> np.ndarray:
    """Quantiles read off an equal-width histogram: linear within the bin where the rank falls."""
    cum = np.concatenate([[0], np.cumsum(counts)]).astype(np.float64)
    n = cum[-1]
    ranks = probabilities * n
    j = np.clip(np.searchsorted(cum, ranks, side="left") - 1, 0, len(counts) - 1)
    inside = np.where(counts[j] > 0, (ranks - cum[j]) / np.maximum(counts[j], 1), 0.0)
    return lowers[j] + np.clip(inside, 0.0, 1.0) * (uppers[j] - lowers[j])


# ---------------------------------------------------------------- from a store


def _domain_scale(t: pa.DataType) -> float:
    """Multiplier from our histogram/KLL domain (the Arrow storage unit) to Spark's (days, microseconds)."""
    if mt.is_timestamp(t):
        return {"s": 1e6, "ms": 1e3, "us": 1.0, "ns": 1e-3}[t.unit]
    if mt.is_date64(t):
        return 1.0 / 86_400_000
    return 1.0


def _spark_domain(values: pa.Array) -> np.ndarray:
    """Typed values (ints, dates, decimals) as Spark's histogram doubles."""
    t = values.type
    if mt.is_date32(t):
        return values.view(pa.int32()).to_numpy(zero_copy_only=False).astype(np.float64)
    if mt.is_date64(t):
        return values.view(pa.int64()).to_numpy(zero_copy_only=False) / 86_400_000.0
    if mt.is_timestamp(t):
        return values.view(pa.int64()).to_numpy(zero_copy_only=False) * _domain_scale(t)
    return pc.cast(values, pa.float64(), safe=False).to_numpy(zero_copy_only=False)


def _table_max(row: dict[str, Any], t: pa.DataType, default: float) -> float:
    """The column's maximum (finite) as a histogram domain number, from its statistics row."""
    from engine import values as value_forms
    from engine.stats.histograms import to_domain

    value = row.get("max")
    if value is None:
        return float(default)
    got = float(to_domain(value_forms.decode_scalar(value, t) if isinstance(value, str) else pa.scalar(value, type=t)))
    return got if math.isfinite(got) else float(default)


def histogram(stats: Any, column: str, kind: str, row: dict[str, Any], num_bins: int) -> SparkHistogram | None:
    """The equi-height histogram of ``column`` from a store's table-level files (None if it has no values)."""
    non_null = int(row["row_count"] or 0) - int(row["null_count"] or 0)
    if kind not in _HISTOGRAMMED or non_null <= 0:
        return None
    t = stats.column_type(column)
    if row.get("frequencies") == "complete":
        index = stats.frequency_index()
        stored = index.get(column, (0, 0, 0, ""))[2]
        if 0 < stored <= EXACT_MAX_VALUES:
            freq = stats.top_frequencies(column, k=stored, typed=True)
            keep = pc.is_valid(freq["value"])
            values = _spark_domain(pc.filter(freq["value"], keep).combine_chunks())
            counts = pc.filter(freq["frequency"], keep).to_numpy()
            if len(values):
                return equi_height_exact(values, counts, num_bins)
    spec = stats.histogram_spec(column)
    distinct = int(row.get("distinct_count") or non_null)
    lo_end = hi_end = None
    best: tuple[float, np.ndarray, str] | None = None
    probabilities = np.arange(num_bins + 1, dtype=np.float64) / num_bins
    scale = _domain_scale(t)
    if spec is not None:
        h = stats.histogram(column)
        counts = h["count"].to_numpy().astype(np.float64)
        lower = spec.lower + spec.width * np.arange(spec.bins, dtype=np.float64)
        upper = lower + spec.width
        upper[-1] = spec.upper + (1 if spec.domain == "integer" else 0)
        # the bins' range ends at the widened upper end (engine.stats.histograms.widened_range):
        # Spark's histogram ends at the column's maximum
        lo_end, hi_end = float(spec.lower) * scale, min(float(spec.upper), _table_max(row, t, spec.upper)) * scale
        ends = width_quantiles(lower, upper, counts, probabilities)
        if spec.domain == "integer":
            ends = np.floor(ends)
        total = counts.sum()
        if total > 0:
            best = (float(counts.max() / total), ends * scale, "equal-width")
    kll = row.get("kll_sketch")
    if kll:
        import datasketches as ds

        sketch = ds.kll_doubles_sketch.deserialize(kll)
        error = float(sketch.normalized_rank_error(False))
        if best is None or error < best[0]:
            best = (error, np.asarray([sketch.get_quantile(float(p)) for p in probabilities]) * scale, "kll")
            if lo_end is None:
                lo_end, hi_end = float(sketch.get_min_value()) * scale, float(sketch.get_max_value()) * scale
    if best is None:
        return None
    ends = best[1].copy()
    ends[0], ends[-1] = lo_end, hi_end
    ends = np.clip(ends, lo_end, hi_end)
    return equi_height_from_quantiles(ends, non_null, distinct, kind in _INTEGER_VALUED, best[2])


def column_stat(stats: Any, column: str, spark_type: DataType, num_bins: int | None) -> SparkColumnStat:
    """A column's CatalogColumnStat from a store's table-level statistics (``num_bins`` None: no histogram)."""
    kind = type_kind(spark_type)
    row = stats.column_statistics(column, sketches=num_bins is not None)
    non_null = int(row["row_count"] or 0) - int(row["null_count"] or 0)
    distinct = row.get("distinct_count")
    avg, mx = spark_sizes(kind, getattr(spark_type, "precision", None), row.get("avg_len"), row.get("max_len"))
    hist = histogram(stats, column, kind, row, num_bins) if num_bins else None
    return SparkColumnStat(
        distinct_count=None if distinct is None else min(int(distinct), non_null),
        min=spark_text(row.get("min"), kind),
        max=spark_text(row.get("max"), kind),
        null_count=None if row.get("null_count") is None else int(row["null_count"]),
        avg_len=avg,
        max_len=mx,
        histogram=hist,
    )


SUPPORTED = frozenset(_FIXED_SIZES) | frozenset(_VARIABLE_SIZES) | {"decimal"}


# ---------------------------------------------------------------- into the JVM


def _big_int_option(jvm: Any, n: int) -> Any:
    """A JVM ``Some(scala.math.BigInt(n))``.

    py4j turns a scala BigInt it returns into a Python int (and a Python int sent
    back is an Integer or Long), so a BigInt is only ever made, and kept, inside
    the JVM: CatalogColumnStat.fromMap parses it from text.
    """
    utils = jvm.org.apache.spark.api.python.PythonUtils
    stat = jvm.org.apache.spark.sql.catalyst.catalog.CatalogColumnStat.fromMap(
        "metastore", "n", utils.toScalaMap({"n.version": str(STAT_VERSION), "n.distinctCount": str(int(n))})
    )
    return stat.get().distinctCount()


def _catalog_statistics(jvm: Any, size_in_bytes: int, row_count: int, col_stats: Any) -> Any:
    """``new CatalogStatistics(BigInt(size), Some(BigInt(rows)), colStats)`` without a BigInt crossing py4j."""
    size = jvm.scala.collection.JavaConverters.seqAsJavaListConverter(_big_int_option(jvm, size_in_bytes).toList()).asJava()
    args = jvm.java.util.ArrayList()
    args.addAll(size)
    args.add(_big_int_option(jvm, row_count))
    args.add(col_stats)
    cls = jvm.java.lang.Thread.currentThread().getContextClassLoader().loadClass("org.apache.spark.sql.catalyst.catalog.CatalogStatistics")
    (ctor,) = [c for c in cls.getConstructors() if len(c.getParameterTypes()) == 3]
    return ctor.newInstance(args.toArray())


def _serialize_histogram(spark: SparkSession, h: SparkHistogram) -> str:
    jvm: Any = spark._jvm  # py4j's view of the JVM: untyped (Optional in pyspark's types; set on a live session)
    logical = jvm.org.apache.spark.sql.catalyst.plans.logical
    gateway: Any = spark.sparkContext._gateway  # py4j's gateway: untyped (Optional in pyspark's types)
    bins = gateway.new_array(logical.HistogramBin, len(h.bins))
    for i, (lo, hi, ndv) in enumerate(h.bins):
        bins[i] = logical.HistogramBin(float(lo), float(hi), int(ndv))
    return str(logical.HistogramSerializer.serialize(logical.Histogram(float(h.height), bins)))


def write_statistics(
    spark: SparkSession,
    table: str,
    store: str,
    name: str | None = None,
    *,
    histograms: bool = True,
    histogram_bins: int | None = None,
) -> dict[str, Any]:
    """Write the store's table-level statistics of ``name`` as Spark's statistics of catalog table ``table``.

    Columns of other types (structs, arrays, maps, intervals) and columns the store
    has no statistics for keep what the catalog had. The registered partitions of a
    partitioned table get their size and row count (:func:`_write_partition_statistics`).
    Returns ``{"table", "rows", "size_in_bytes", "columns": {column: histogram method
    or None}, "skipped": {column: why}, "partitions": {partition key: rows written}}``.
    """
    from engine.lookup import open_statistics

    info = lookup_table(spark, table)
    stats = open_statistics(store, name or info.name)
    if histogram_bins is None:
        histogram_bins = int(cast(str, spark.conf.get("spark.sql.statistics.histogram.numBins", str(DEFAULT_BINS))))  # a str, given a default
    if histogram_bins < 2:
        raise InvalidArgumentError(f"histogram_bins must be >= 2, not {histogram_bins}")
    ours = {c.lower(): c for c in stats.schema.names}
    rows = {p.key: p.rows for p in stats.partitions()}
    row_count = sum(rows.values())
    written: dict[str, Any] = {}
    skipped: dict[str, str] = {}
    maps: dict[str, dict[str, str]] = {}
    hists: dict[str, SparkHistogram] = {}
    for field in info.spark_schema.fields:
        kind = type_kind(field.dataType)
        if kind not in SUPPORTED:
            skipped[field.name] = f"Spark keeps no column statistics for type {field.dataType.simpleString()}"
            continue
        column = ours.get(stats.resolve_column(field.name).lower())  # a dotted top-level name is stored escaped
        if column is None:
            skipped[field.name] = "no statistics in the store"
            continue
        stat = column_stat(stats, column, field.dataType, histogram_bins if histograms else None)
        maps[field.name] = stat.to_map(field.name)
        if stat.histogram is not None:
            hists[field.name] = stat.histogram
        written[field.name] = None if stat.histogram is None else stat.histogram.method

    jvm: Any = spark._jvm  # py4j's view of the JVM: untyped (Optional in pyspark's types; set on a live session)
    try:
        ident, qualified, _ = table_identifier(spark, info.name)
        catalog = spark._jsparkSession.sessionState().catalog()
        meta = catalog.getTableMetadata(ident)
        size = int(jvm.org.apache.spark.sql.execution.command.CommandUtils.calculateTotalSize(spark._jsparkSession, meta)._1())
        utils = jvm.org.apache.spark.api.python.PythonUtils
        col_stats: dict[str, Any] = {}
        old = meta.stats()
        if old.isDefined():  # columns we do not write keep what the catalog had
            old_cols = old.get().colStats()
            for field in info.spark_schema.fields:
                if field.name not in maps and old_cols.contains(field.name):
                    col_stats[field.name] = old_cols.apply(field.name)
        ccs = jvm.org.apache.spark.sql.catalyst.catalog.CatalogColumnStat
        for column, values in maps.items():
            if column in hists:
                values = {**values, f"{column}.histogram": _serialize_histogram(spark, hists[column])}
            parsed = ccs.fromMap(qualified, column, utils.toScalaMap(values))
            if not parsed.isDefined():
                raise ServiceError(f"Spark did not accept the statistics of column {column!r}: {values}")
            col_stats[column] = parsed.get()
        new = _catalog_statistics(jvm, size, row_count, utils.toScalaMap(col_stats))
        catalog.alterTableStats(ident, jvm.scala.Option.apply(new))
        partitions = _write_partition_statistics(spark, info, ident, rows)
    except ServiceError:
        raise
    except Exception as exc:
        raise ServiceError(f"could not write statistics of {info.name} into Spark's catalog: {first_line(exc)}") from exc
    return {"table": info.name, "rows": row_count, "size_in_bytes": size, "columns": written, "skipped": skipped, "partitions": partitions}


def _write_partition_statistics(spark: SparkSession, info: CatalogTableInfo, ident: Any, rows: dict[str, int]) -> dict[str, int]:
    """Size and row count of every registered partition the store holds (``rows``: store partition key -> rows).

    What ``ANALYZE TABLE t PARTITION (...) COMPUTE STATISTICS`` stores: a
    ``CatalogStatistics`` of the partition folder's size and its row count, no
    column statistics, on the partition (``SessionCatalog.alterPartitions``, one
    call for all). A partition is matched to the store's by its key (its folder
    below the table location, else the Hive path of its values: the keys both
    analyze paths give). Partitions the store does not hold keep what they had.
    Returns partition key -> rows written.
    """
    if not info.partition_columns or not info.tracks_partitions:
        return {}
    jvm: Any = spark._jvm  # py4j's view of the JVM: untyped (Optional in pyspark's types; set on a live session)
    session_state = spark._jsparkSession.sessionState()
    catalog = session_state.catalog()
    command_utils = jvm.org.apache.spark.sql.execution.command.CommandUtils
    utils = jvm.org.apache.spark.api.python.PythonUtils
    no_columns = utils.toScalaMap({})
    changed = jvm.java.util.ArrayList()
    written: dict[str, int] = {}
    listed = catalog.listPartitions(ident, jvm.scala.Option.empty())
    for i in range(listed.size()):
        jp = listed.apply(i)
        key = catalog_partition_key(info, catalog_partition(jp, info.partition_columns))
        if key not in rows:
            continue
        size = int(command_utils.calculateSingleLocationSize(session_state, ident, jp.storage().locationUri()))
        stats = jvm.scala.Option.apply(_catalog_statistics(jvm, size, rows[key], no_columns))
        changed.add(jp.copy(jp.spec(), jp.storage(), jp.parameters(), jp.createTime(), jp.lastAccessTime(), stats))
        written[key] = rows[key]
    if written:
        catalog.alterPartitions(ident, utils.toSeq(changed))
    return written
