"""The Spark bridge end to end: RayDP on the session's Ray, one Spark start for the run (conftest)."""

from __future__ import annotations

import datetime

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytestmark = [pytest.mark.spark, pytest.mark.ray]

ROWS = 3000
REGIONS = ["east", "north", "south", "west"]
COMPARED = ("row_count", "null_count", "min", "max", "distinct_count", "sum")


def _table() -> pa.Table:
    """Deterministic rows: ints, strings with nulls, doubles with nulls, a date, a string partition column."""
    base = datetime.date(2024, 1, 1)
    rows = range(ROWS)
    return pa.table(
        {
            "id": pa.array(list(rows), pa.int64()),
            "qty": pa.array([(i * 7) % 101 - 50 for i in rows], pa.int32()),
            "city": pa.array([None if i % 11 == 0 else f"city{(i * 13) % 37}" for i in rows], pa.string()),
            "price": pa.array([None if i % 9 == 0 else round((i % 250) * 1.25 + 0.5, 2) for i in rows], pa.float64()),
            "day": pa.array([base + datetime.timedelta(days=(i * 3) % 120) for i in rows], pa.date32()),
            "region": pa.array([REGIONS[(i * 5) % 4] for i in rows], pa.string()),
        }
    )


@pytest.fixture(scope="session")
def spark_df(spark):
    from pyspark.sql.types import DateType, DoubleType, IntegerType, LongType, StringType, StructField, StructType

    schema = StructType(
        [
            StructField("id", LongType()),
            StructField("qty", IntegerType()),
            StructField("city", StringType()),
            StructField("price", DoubleType()),
            StructField("day", DateType()),
            StructField("region", StringType()),
        ]
    )
    rows = [tuple(r.values()) for r in _table().to_pylist()]
    return spark.createDataFrame(rows, schema).repartition(3)


@pytest.fixture(scope="session")
def both_analyzed(spark_df, tmp_path_factory: pytest.TempPathFactory):
    """(spark store, spark result, parquet store, parquet result) of the same data."""
    from engine.api import analyze as analyze_parquet
    from spark_bridge.api import analyze as analyze_spark

    root = tmp_path_factory.mktemp("spark_parquet") / "events"
    pq.write_to_dataset(_table(), str(root), partition_cols=["region"])
    parquet_store = str(tmp_path_factory.mktemp("parquet_store"))
    parquet_result = analyze_parquet(str(root), store=parquet_store, name="events", user_statistics=[])
    spark_store = str(tmp_path_factory.mktemp("spark_store"))
    spark_result = analyze_spark(spark_df, partition_by=["region"], store=spark_store, name="events", user_statistics=[])
    return spark_store, spark_result, parquet_store, parquet_result


def test_table_statistics_equal_the_parquet_path(both_analyzed) -> None:
    from engine.api import open_statistics

    spark_store, spark_result, parquet_store, parquet_result = both_analyzed
    assert spark_result.rows == parquet_result.rows == ROWS
    assert spark_result.partitions == parquet_result.partitions == len(REGIONS)
    assert spark_result.timings["spark_to_ray_s"] > 0
    assert spark_result.timings["spark_shuffle"] == 1.0  # rows from local data: hash-partitioned by region first
    s, p = open_statistics(spark_store, "events"), open_statistics(parquet_store, "events")
    assert sorted(pi.key for pi in s.partitions()) == sorted(pi.key for pi in p.partitions()) == [f"region={r}" for r in REGIONS]
    columns = ["id", "qty", "city", "price", "day", "region"]
    got = s.statistics(columns, statistics=list(COMPARED)).to_pylist()
    want = p.statistics(columns, statistics=list(COMPARED)).to_pylist()
    assert got == want
    for column in ("qty", "city", "region", "day"):
        top_s = sorted(map(tuple, (r.values() for r in s.top_frequencies(column, k=10).to_pylist())))
        top_p = sorted(map(tuple, (r.values() for r in p.top_frequencies(column, k=10).to_pylist())))
        assert top_s == top_p, column
    # a partition too
    assert (
        s.statistics(["price"], partition="region=north", statistics=list(COMPARED)).to_pylist()
        == p.statistics(["price"], partition="region=north", statistics=list(COMPARED)).to_pylist()
    )


def test_read_statistics_and_views(spark, both_analyzed) -> None:
    from spark_bridge.api import read_statistics, register_views

    spark_store = both_analyzed[0]
    stats = read_statistics(spark, spark_store, "events")
    assert stats.count() == 6  # one row per column
    assert read_statistics(spark, spark_store, "events", kind="statistics", partition="region=east").count() == 6
    assert read_statistics(spark, spark_store, "events", kind="frequencies").count() > 0
    views = register_views(spark, spark_store, "events")
    assert set(views) == {"metastore_statistics", "metastore_frequencies", "metastore_histograms"}
    nulls = {r["column"]: r["null_count"] for r in spark.sql("SELECT column, null_count FROM metastore_statistics ORDER BY column").collect()}
    assert nulls == {"id": 0, "qty": 0, "city": ROWS // 11 + 1, "price": ROWS // 9 + 1, "day": 0, "region": 0}
    top = spark.sql("SELECT value, frequency FROM metastore_frequencies WHERE column = 'region' ORDER BY frequency DESC, value").collect()
    assert sum(r["frequency"] for r in top) == ROWS
    assert spark.sql("SELECT count(*) AS n FROM metastore_histograms").collect()[0]["n"] > 0


def test_unpartitioned_dataframe_uses_spark_partitions(spark_df, tmp_path) -> None:
    from engine.api import open_statistics
    from spark_bridge.api import analyze

    result = analyze(spark_df, store=str(tmp_path), name="plain", columns=["id", "price"], user_statistics=[])
    assert result.rows == ROWS
    keys = [p.key for p in open_statistics(str(tmp_path), "plain").partitions()]
    assert keys == [f"spark_partition={i:05d}" for i in range(3)]


def test_bad_arguments_are_one_line_errors(spark_df) -> None:
    from engine.exceptions import InvalidArgumentError
    from spark_bridge.api import analyze, read_statistics

    with pytest.raises(InvalidArgumentError, match="no column"):
        analyze(spark_df, partition_by=["nope"])
    with pytest.raises(InvalidArgumentError, match="kind"):
        read_statistics(None, ".metastore", "events", kind="sketches")


def test_jvm_errors_become_one_line() -> None:
    from spark_bridge.session import first_line

    exc = RuntimeError("An error occurred while calling z:Foo.bar.\n: java.lang.IllegalStateException: boom\n\tat a.b.C(D.java:1)")
    line = first_line(exc)
    assert "IllegalStateException: boom" in line and "\tat" not in line and "\n" not in line
