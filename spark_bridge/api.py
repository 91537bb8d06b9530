"""Statistics of Spark DataFrames and catalog tables, and the statistics back in Spark.

from spark_bridge.session import start_spark
from spark_bridge.api import analyze, analyze_table, read_statistics, register_views, write_spark_statistics
spark = start_spark()
df = spark.read.parquet("data/sales")
result = analyze(df, partition_by=["city"], store=".metastore", name="sales")
result = analyze_table(spark, "db.sales", store=".metastore")        # a catalog table, its partitions
write_spark_statistics(spark, "db.sales", store=".metastore")        # into Spark's cost-based optimizer
read_statistics(spark, ".metastore", "sales").show()
register_views(spark, ".metastore", "sales")
spark.sql("SELECT column, null_count FROM metastore_statistics").show()
plan = plan_files(df.where(F.col("city") == "Berlin"), store=".metastore")  # the files to read (file index)
plan.read(spark).where(F.col("city") == "Berlin")
subset_statistics(df.where(F.col("city") == "Berlin"), store=".metastore", columns=["price"])
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine.exceptions import InvalidArgumentError, InvalidTableLayoutError, ServiceError
from engine.files.layout import FREQUENCIES_FILE, HISTOGRAMS_FILE, STATISTICS_FILE
from engine.lookup import open_statistics
from engine.options import AnalyzeOptions
from engine.progress import ProgressCallback, progress_callback
from engine.runtime.analyze import analyze_source
from engine.runtime.job.result import AnalyzeResult
from engine.runtime.ray_runtime import ensure_ray
from engine.sources.base import TableSource
from engine.stats.user import UserStatistic
from spark_bridge.catalog import lookup_table
from spark_bridge.filters import DataFrameSubset, SparkFilePlan, dataframe_subset, plan_files, subset_statistics

if TYPE_CHECKING:  # pyspark is imported where a session is used
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "KINDS",
    "METHODS",
    "VIEWS",
    "DataFrameSubset",
    "SparkFilePlan",
    "TablePlan",
    "analyze",
    "analyze_table",
    "dataframe_subset",
    "plan_files",
    "plan_table",
    "read_statistics",
    "register_views",
    "subset_statistics",
    "write_spark_statistics",
]

DEFAULT_STORE = ".metastore"

#: kind -> file name
KINDS = {"statistics": STATISTICS_FILE, "frequencies": FREQUENCIES_FILE, "histograms": HISTOGRAMS_FILE}
#: kind -> temp view name
VIEWS = {kind: f"metastore_{kind}" for kind in KINDS}
#: how analyze_table reads a table: decide, the Parquet files directly, or through Spark
METHODS = ("auto", "files", "dataframe")


def _options(options: AnalyzeOptions | None, bins: int, mostly_distinct_ratio: float, name: str) -> AnalyzeOptions:
    if not name or "/" in name:
        raise InvalidArgumentError(f"name must be a non-empty table name without '/', not {name!r}")
    return options or AnalyzeOptions(bins=bins, mostly_distinct_ratio=mostly_distinct_ratio)


def _run(
    source: TableSource,
    store: str,
    options: AnalyzeOptions,
    *,
    columns: list[str] | None,
    progress: bool | ProgressCallback,
    user_statistics: list[UserStatistic] | None,
) -> AnalyzeResult:
    """The one analyze entry (engine.runtime.analyze.analyze_source) on a Spark-side source."""
    with progress_callback(progress) as callback:
        return analyze_source(source, store, options, columns=columns, user_statistics=user_statistics, progress=callback)


def analyze(
    df: DataFrame,
    partition_by: Sequence[str] | str | None = None,
    store: str = DEFAULT_STORE,
    name: str = "dataframe",
    *,
    bins: int = AnalyzeOptions.bins,
    columns: list[str] | None = None,
    progress: bool | ProgressCallback = False,
    user_statistics: list[UserStatistic] | None = None,
    mostly_distinct_ratio: float = AnalyzeOptions.mostly_distinct_ratio,
    options: AnalyzeOptions | None = None,
) -> AnalyzeResult:
    """Compute and publish the statistics files of a Spark DataFrame as table ``name``.

    The DataFrame moves once from Spark to the Ray object store (RayDP), then the
    same job as :func:`engine.api.analyze` runs on it (``options``: every option
    that one takes; ``bins`` and ``mostly_distinct_ratio`` are shorthands);
    ``partition_by`` columns define the partitions (else the DataFrame's own
    partitions). ``result.timings`` gains ``spark_to_ray_s``.
    """
    from spark_bridge.source import RayDatasetSource

    options = _options(options, bins, mostly_distinct_ratio, name)
    ray_s = ensure_ray()
    source = RayDatasetSource(df, partition_by, name=name)
    try:
        result = _run(source, store, options, columns=columns, progress=progress, user_statistics=user_statistics)
    finally:
        source.close()
    result.timings["ray_start_s"] = ray_s
    result.timings.update(source.timings)
    return result


@dataclass(frozen=True)
class TablePlan:
    """How :func:`analyze_table` reads a catalog table, and why."""

    table: str  # db.table
    method: str  # "files" or "dataframe"
    reason: str  # why the DataFrame path, when it is taken
    partition_columns: tuple[str, ...]
    partitions: int | None  # registered partitions (None: not tracked in the catalog)
    location: str | None  # for a table format: where its library opens it (Iceberg: the metadata file the catalog names)
    format: str = "parquet"  # what the files path reads: parquet, or the table format (delta, iceberg, hudi)


def plan_table(spark: SparkSession, table: str, method: str = "auto") -> TablePlan:
    """Which path :func:`analyze_table` takes for ``table``; raises its errors without analyzing.

    ``files``: the table's Parquet files are read directly (a ``USING parquet``
    table whose partition folders are at their Hive paths under its location, on
    a local or S3 filesystem). ``dataframe``: ``spark.table(table)`` moves to Ray
    through RayDP, partitioned by the table's partition columns. A Delta, Iceberg or Hudi
    table (``format``) is ``files`` too: its library reads the live files of its current
    snapshot at the location the catalog records (Iceberg: the committed
    ``metadata_location`` property when there is one).
    """
    return _plan(spark, table, method)[0]


def _plan(spark: SparkSession, table: str, method: str) -> tuple[TablePlan, Any, dict[str, Any] | None]:
    from spark_bridge.table_source import check_registered, plan_files

    if method not in METHODS:
        raise InvalidArgumentError(f"method must be one of {', '.join(METHODS)}, not {method!r}")
    info = lookup_table(spark, table)
    if info.table_format is not None and method != "dataframe":
        return _plan_format(info), info, None
    if not info.is_parquet and method != "dataframe":
        raise InvalidArgumentError(
            f"{info.name} is a {info.provider or 'non-file'} table; analyze_table reads Parquet, Delta, Iceberg and Hudi "
            f"tables (method='dataframe' analyzes any table's rows through Spark)"
        )
    check_registered(info)
    registered, why = None, "method='dataframe' was asked for"
    if method != "dataframe":
        registered, why = plan_files(info)
        if registered is None and method == "files":
            raise InvalidArgumentError(f"{info.name}: its files cannot be read directly: {why}")
    chosen = "files" if registered is not None else "dataframe"
    plan = TablePlan(
        table=info.name,
        method=chosen,
        reason="" if chosen == "files" else why,
        partition_columns=info.partition_columns,
        partitions=None if info.partitions is None else len(info.partitions),
        location=info.location,
    )
    return plan, info, registered


def _plan_format(info: Any) -> TablePlan:
    """A Delta, Iceberg or Hudi table of the catalog: read by the format's own library at the
    location the catalog records (the same source as ``engine.api.analyze(location, format=...)``)."""
    fmt = info.table_format
    location = info.format_location
    if not location:
        raise InvalidArgumentError(
            f"{info.name} is a {fmt} table but Spark's catalog records no location for it"
            + (" (nor a metadata_location property)" if fmt == "iceberg" else "")
            + f"; analyze_table reads {fmt} tables through the {fmt} library at their location: "
            f"analyze the location with engine.api.analyze(LOCATION, format={fmt!r}), or use method='dataframe'"
        )
    return TablePlan(info.name, "files", "", info.partition_columns, None, location, fmt)


def analyze_table(
    spark: SparkSession,
    table: str,
    store: str = DEFAULT_STORE,
    name: str | None = None,
    *,
    method: str = "auto",
    spark_statistics: bool | None = None,
    bins: int = AnalyzeOptions.bins,
    columns: list[str] | None = None,
    progress: bool | ProgressCallback = False,
    user_statistics: list[UserStatistic] | None = None,
    mostly_distinct_ratio: float = AnalyzeOptions.mostly_distinct_ratio,
    options: AnalyzeOptions | None = None,
) -> AnalyzeResult:
    """Compute and publish the statistics of a table of Spark's catalog, per catalog partition.

    ``name`` (the table's name in the store) defaults to ``db.table``. ``method``:
    ``auto`` reads the Parquet files directly when the table is a plain Parquet
    data-source table or a Delta, Iceberg or Hudi table with a location (the same source,
    snapshot and statistics as ``engine.api.analyze(location, format=...)``; see
    :func:`plan_table`) and through Spark otherwise;
    ``files`` insists on the files, ``dataframe`` on Spark (any format).
    Then the statistics go into Spark's catalog for its cost-based optimizer
    (:func:`write_spark_statistics`: table size and row count, column statistics
    and, for a table whose partitions the catalog tracks, each partition's size and
    row count), every time, so a re-analyze refreshes them. ``spark_statistics``:
    None (default) writes them unless the table is a Delta, Iceberg or Hudi table
    (Spark takes those tables' statistics from the format's own metadata: see
    docs/PLANNERS.md), and a failure to write becomes a warning in
    ``result.warnings``; True writes them for any table and raises
    ServiceError on failure; False leaves the catalog alone.
    ``result.timings`` gains ``catalog_s`` (reading the catalog) and
    ``files_path`` (1.0 when the files were read directly, else 0.0).
    """
    from spark_bridge.source import RayDatasetSource
    from spark_bridge.table_source import CatalogParquetSource, catalog_partition_keys

    started = time.perf_counter()
    plan, info, registered = _plan(spark, table, method)
    name = name or info.name
    job_options = _options(options, bins, mostly_distinct_ratio, name)
    source: Any = None
    if plan.method == "files" and plan.format != "parquet":
        from engine.sources import open_table

        assert plan.location is not None
        source = open_table(plan.location, name, format=plan.format)
    elif plan.method == "files":
        try:
            source = CatalogParquetSource(info, name, registered)
        except InvalidTableLayoutError as exc:
            if method == "files":
                raise
            plan = TablePlan(plan.table, "dataframe", str(exc), plan.partition_columns, plan.partitions, plan.location)
    catalog_s = time.perf_counter() - started
    ray_s = ensure_ray()
    run_options: dict[str, Any] = dict(columns=columns, progress=progress, user_statistics=user_statistics)
    if source is not None:
        result = _run(source, store, job_options, **run_options)
    else:
        moved = RayDatasetSource(spark.table(info.name), list(info.partition_columns), name=name, partition_keys=catalog_partition_keys(info))
        try:
            result = _run(moved, store, job_options, **run_options)
        finally:
            moved.close()
        result.timings.update(moved.timings)
    result.timings["ray_start_s"] = ray_s
    result.timings["catalog_s"] = catalog_s
    result.timings["files_path"] = 1.0 if source is not None else 0.0
    _refresh_spark_statistics(spark, info.name, store, name, info.table_format, spark_statistics, result)
    return result


def _refresh_spark_statistics(
    spark: SparkSession, table: str, store: str, name: str, table_format: str | None, asked: bool | None, result: AnalyzeResult
) -> None:
    """Write the fresh statistics into Spark's catalog (see :func:`analyze_table`'s ``spark_statistics``)."""
    if asked is False or (asked is None and table_format is not None):
        return
    t0 = time.perf_counter()
    try:
        write_spark_statistics(spark, table, store, name)
    except ServiceError as exc:
        if asked:
            raise
        result.warnings.append(f"Spark's catalog statistics of {table} were not refreshed: {exc}")
        return
    result.timings["spark_statistics_s"] = time.perf_counter() - t0


def write_spark_statistics(
    spark: SparkSession,
    table: str,
    store: str = DEFAULT_STORE,
    name: str | None = None,
    *,
    histograms: bool = True,
    histogram_bins: int | None = None,
) -> dict[str, Any]:
    """Write the store's statistics of ``name`` (default ``db.table``) into Spark's catalog for ``table``.

    What ``ANALYZE TABLE ... COMPUTE STATISTICS FOR ALL COLUMNS`` would write: the
    row count and size, and per supported column distinct count, min, max, null
    count, average and maximum length and (``histograms``) an equi-height
    histogram of ``histogram_bins`` bins (default: the session's
    ``spark.sql.statistics.histogram.numBins``, 254). ``DESCRIBE EXTENDED t col``
    shows them; Spark's optimizer uses them with ``spark.sql.cbo.enabled=true``.
    Returns a summary (see :func:`spark_bridge.cbo.write_statistics`).
    """
    from spark_bridge.cbo import write_statistics

    return write_statistics(spark, table, store, name, histograms=histograms, histogram_bins=histogram_bins)


def _spark_path(uri: str) -> str:
    """A path Spark's Hadoop filesystems understand (s3:// is s3a:// there)."""
    if uri.startswith("s3://"):
        return "s3a://" + uri[len("s3://") :]
    return uri


def read_statistics(spark: SparkSession, store: str, table: str, kind: str = "statistics", partition: str | None = None) -> DataFrame:
    """One statistics file of ``table`` (the table's, or ``partition``'s) as a Spark DataFrame.

    Spark reads the Parquet file itself; nothing passes through Python. The table's
    frequencies kept in several segments (appends analyzed since its last full analyze,
    docs/FORMAT.md) are their merged view: the rows a single whole file would hold.
    """
    if kind not in KINDS:
        raise InvalidArgumentError(f"kind must be one of {', '.join(KINDS)}, not {kind!r}")
    stats = open_statistics(store, table)
    if kind == "frequencies" and partition is None:
        return _frequencies_frame(spark, stats.frequency_segments())
    return spark.read.parquet(_spark_path(stats.file_uri(KINDS[kind], partition)))


def _frequencies_frame(spark: SparkSession, segments: list[str]) -> DataFrame:
    """The table's frequencies of its segments (oldest first): one file as it is; several as
    their union with a segment number, keeping per (column, value) the newest segment's row
    (a value's frequency only grows from one segment to the next, and its row moves to the
    newest segment it changed in). Unordered, as any DataFrame."""
    if len(segments) == 1:
        return spark.read.parquet(_spark_path(segments[0]))
    from pyspark.sql import functions as F

    frames = [spark.read.parquet(_spark_path(uri)).withColumn("_segment", F.lit(i)) for i, uri in enumerate(segments)]
    union = frames[0]
    for frame in frames[1:]:
        union = union.unionByName(frame)
    # max of a struct compares its fields in order: the newest segment's (segment, frequency)
    newest = union.groupBy("column", "value").agg(F.max(F.struct("_segment", "frequency")).alias("_newest"))
    return newest.select("column", "value", F.col("_newest.frequency").alias("frequency"))


def register_views(spark: SparkSession, store: str, table: str, partition: str | None = None) -> dict[str, str]:
    """Temp views ``metastore_statistics``, ``metastore_frequencies``, ``metastore_histograms`` over the files.

    Returns view name -> file URI (the table's frequencies in several segments: the view is their
    merged view, and the URI the newest segment's). Replaces views of the same name.
    """
    stats = open_statistics(store, table)
    out = {}
    for kind, file_name in KINDS.items():
        uri = stats.file_uri(file_name, partition)
        if kind == "frequencies" and partition is None:
            frame = _frequencies_frame(spark, stats.frequency_segments())
        else:
            frame = spark.read.parquet(_spark_path(uri))
        frame.createOrReplaceTempView(VIEWS[kind])
        out[VIEWS[kind]] = uri
    return out
