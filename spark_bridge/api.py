"""Statistics of Spark DataFrames, and the statistics files back as Spark DataFrames.

    from spark_bridge.session import start_spark
    from spark_bridge.api import analyze, read_statistics, register_views
    spark = start_spark()
    df = spark.read.parquet("data/sales")
    result = analyze(df, partition_by=["city"], store=".metastore", name="sales")
    read_statistics(spark, ".metastore", "sales").show()
    register_views(spark, ".metastore", "sales")
    spark.sql("SELECT column, null_count FROM metastore_statistics").show()
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from engine.columns import leaf_columns, select
from engine.exceptions import InvalidArgumentError
from engine.files.layout import FREQUENCIES_FILE, HISTOGRAMS_FILE, STATISTICS_FILE
from engine.runtime.analyze import AnalyzeOptions, AnalyzeResult, ProgressCallback
from engine.stats.histograms import ALLOWED_BINS
from engine.stats.user import UserStatistic, registered
from engine.store import Store

__all__ = ["KINDS", "VIEWS", "analyze", "read_statistics", "register_views"]

DEFAULT_STORE = ".metastore"

#: kind -> file name
KINDS = {"statistics": STATISTICS_FILE, "frequencies": FREQUENCIES_FILE, "histograms": HISTOGRAMS_FILE}
#: kind -> temp view name
VIEWS = {kind: f"metastore_{kind}" for kind in KINDS}


def analyze(
    df: Any,
    partition_by: Sequence[str] | str | None = None,
    store: str = DEFAULT_STORE,
    name: str = "dataframe",
    *,
    bins: int = 1000,
    columns: list[str] | None = None,
    progress: bool | ProgressCallback = False,
    user_statistics: list[UserStatistic] | None = None,
    mostly_distinct_ratio: float = 0.5,
) -> AnalyzeResult:
    """Compute and publish the statistics files of a Spark DataFrame as table ``name``.

    The DataFrame moves once from Spark to the Ray object store (RayDP), then the
    same job as :func:`engine.api.analyze` runs on it; ``partition_by`` columns
    define the partitions (else the DataFrame's own partitions). ``result.timings``
    gains ``spark_to_ray_s``.
    """
    from engine.api import _rich_progress
    from engine.runtime import analyze as job
    from engine.runtime.ray_runtime import ensure_ray
    from spark_bridge.source import RayDatasetSource

    if bins not in ALLOWED_BINS:
        raise InvalidArgumentError(f"bins must be one of {', '.join(map(str, ALLOWED_BINS))}, not {bins}")
    if not 0 < mostly_distinct_ratio <= 1:
        raise InvalidArgumentError("mostly_distinct_ratio must be in (0, 1]")
    if not name or "/" in name:
        raise InvalidArgumentError(f"name must be a non-empty table name without '/', not {name!r}")
    ray_s = ensure_ray()
    source = RayDatasetSource(df, partition_by, name=name)
    try:
        leaves = select(leaf_columns(source.schema()), columns)
        user = registered() if user_statistics is None else list(user_statistics)
        callback = _rich_progress() if progress is True else (progress or None)
        try:
            result = job.run(
                source, Store(store), leaves, user,
                AnalyzeOptions(bins=bins, mostly_distinct_ratio=mostly_distinct_ratio), callback,
            )
        finally:
            if progress is True and callback is not None:
                callback.close()  # type: ignore[attr-defined]
    finally:
        source.close()
    result.timings["ray_start_s"] = ray_s
    result.timings.update(source.timings)
    return result


def _spark_path(uri: str) -> str:
    """A path Spark's Hadoop filesystems understand (s3:// is s3a:// there)."""
    if uri.startswith("s3://"):
        return "s3a://" + uri[len("s3://"):]
    return uri


def read_statistics(spark: Any, store: str, table: str, kind: str = "statistics", partition: str | None = None) -> Any:
    """One statistics file of ``table`` (the table's, or ``partition``'s) as a Spark DataFrame.

    Spark reads the Parquet file itself; nothing passes through Python.
    """
    from engine.lookup import open_statistics

    if kind not in KINDS:
        raise InvalidArgumentError(f"kind must be one of {', '.join(KINDS)}, not {kind!r}")
    uri = open_statistics(store, table).file_uri(KINDS[kind], partition)
    return spark.read.parquet(_spark_path(uri))


def register_views(spark: Any, store: str, table: str, partition: str | None = None) -> dict[str, str]:
    """Temp views ``metastore_statistics``, ``metastore_frequencies``, ``metastore_histograms`` over the files.

    Returns view name -> file URI. Replaces views of the same name.
    """
    from engine.lookup import open_statistics

    stats = open_statistics(store, table)
    out = {}
    for kind, file_name in KINDS.items():
        uri = stats.file_uri(file_name, partition)
        spark.read.parquet(_spark_path(uri)).createOrReplaceTempView(VIEWS[kind])
        out[VIEWS[kind]] = uri
    return out
