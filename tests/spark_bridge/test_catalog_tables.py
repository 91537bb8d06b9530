"""Tables of Spark's catalog: analyze_table (files and DataFrame paths), CBO statistics, identities, errors.

One Spark session for the run (conftest). The table is the shared sample table
(engine.sample), small; the oracles are the Parquet path on the same files,
Spark's own ANALYZE and SQL aggregates, pyarrow and a brute-force histogram.
"""

from __future__ import annotations

import os
import re
from types import SimpleNamespace

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pytest
from statistics_oracle import equi_height_histogram

pytestmark = [pytest.mark.spark, pytest.mark.ray]

ROWS = 6000
PARTS = 3
COMPARED = ["row_count", "null_count", "nan_count", "min", "max", "distinct_count", "sum", "avg_len", "max_len"]
TABLE = "ms_sales"


def _ddl(spark, sql: str) -> None:
    spark.sql(sql).collect()


@pytest.fixture(scope="session")
def sales(spark, tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    """The sample table as catalog table ms_sales (partitions registered) and its files."""
    from engine.sample import generate_table

    root = tmp_path_factory.mktemp("catalog") / "sales"
    generate_table(str(root), rows=ROWS, partitions=PARTS, seed=0)
    _ddl(spark, f"DROP TABLE IF EXISTS {TABLE}")
    _ddl(spark, f"CREATE TABLE {TABLE} USING parquet LOCATION '{root}'")
    _ddl(spark, f"MSCK REPAIR TABLE {TABLE}")
    return SimpleNamespace(root=str(root), table=TABLE, arrow=ds.dataset(str(root), partitioning="hive").to_table())


@pytest.fixture(scope="session")
def analyzed(spark, sales, tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    """ms_sales analyzed three ways: files path, DataFrame path (analyze_table), Parquet path (engine.api)."""
    from engine.api import analyze
    from spark_bridge.api import analyze_table

    stores = {k: str(tmp_path_factory.mktemp(f"store_{k}")) for k in ("files", "frame", "parquet")}
    files = analyze_table(spark, TABLE, store=stores["files"], user_statistics=[])
    frame = analyze_table(spark, TABLE, store=stores["frame"], method="dataframe", user_statistics=[])
    parquet = analyze(sales.root, store=stores["parquet"], name="default.ms_sales", user_statistics=[])
    return SimpleNamespace(stores=stores, files=files, frame=frame, parquet=parquet)


def _rows(store: str, table: str, partition: str | None = None) -> dict[str, dict]:
    from engine.api import open_statistics

    stats = open_statistics(store, table)
    return {r["column"]: r for r in stats.statistics(partition=partition, statistics=COMPARED).to_pylist()}


def test_files_path_equals_the_parquet_path(spark, sales, analyzed) -> None:
    from engine.api import open_statistics
    from spark_bridge.api import plan_table

    plan = plan_table(spark, TABLE)
    assert (plan.method, plan.partitions, plan.partition_columns) == ("files", PARTS, ("part",))
    files, parquet = analyzed.files, analyzed.parquet
    assert files.table == "default.ms_sales" and files.timings["files_path"] == 1.0
    assert files.rows == parquet.rows == ROWS and files.partitions == parquet.partitions == PARTS
    assert files.snapshot == parquet.snapshot  # the same files fingerprint alike
    f, p = open_statistics(analyzed.stores["files"], files.table), open_statistics(analyzed.stores["parquet"], files.table)
    keys = [pi.key for pi in f.partitions()]
    assert keys == [pi.key for pi in p.partitions()] == [f"part={i:02d}" for i in range(PARTS)]
    assert _rows(analyzed.stores["files"], files.table) == _rows(analyzed.stores["parquet"], files.table)
    for key in keys:
        assert _rows(analyzed.stores["files"], files.table, key) == _rows(analyzed.stores["parquet"], files.table, key)
    # the catalog's type for the partition column (int), where the folder inference gives int64
    assert f.column_type("part") == pa.int32() and p.column_type("part") == pa.int64()
    for column in ("city", "quantity", "event_date"):
        assert f.top_frequencies(column, k=20).to_pylist() == p.top_frequencies(column, k=20).to_pylist()


def test_dataframe_path_equals_the_files_path(analyzed) -> None:
    from engine.api import open_statistics

    frame, files = analyzed.frame, analyzed.files
    assert frame.timings["files_path"] == 0.0 and frame.timings["spark_to_ray_s"] > 0
    assert frame.timings["spark_shuffle"] == 0.0  # a scan of files partitioned by part: blocks follow the files
    f, d = open_statistics(analyzed.stores["files"], files.table), open_statistics(analyzed.stores["frame"], frame.table)
    assert [pi.key for pi in d.partitions()] == [pi.key for pi in f.partitions()]  # part=00, not part=0
    got, want = _rows(analyzed.stores["frame"], frame.table), _rows(analyzed.stores["files"], files.table)
    # Spark reads the timestamps and the rest as the files hold them: everything equal
    assert got == want
    assert _rows(analyzed.stores["frame"], frame.table, "part=01") == _rows(analyzed.stores["files"], files.table, "part=01")


def test_statistics_match_pyarrow(sales, analyzed) -> None:
    """An independent oracle for the catalog path: pyarrow over the same files."""
    got = _rows(analyzed.stores["files"], analyzed.files.table)
    t = sales.arrow
    for column in ("id", "category", "quantity", "comment", "event_date", "amount", "user_id"):
        assert got[column]["distinct_count"] == pc.count_distinct(t[column], mode="only_valid").as_py(), column
        assert got[column]["null_count"] == t[column].null_count, column
    assert got["price"]["null_count"] == t["price"].null_count
    assert got["quantity"]["sum"] == str(pc.sum(t["quantity"]).as_py())


def test_catalog_partition_types_and_escaped_values(spark, tmp_path) -> None:
    """Typed partition columns (date), escaped values and nulls, as the catalog registers them."""
    from engine.api import open_statistics
    from spark_bridge.api import analyze_table, plan_table

    root = tmp_path / "typed"
    rows = [(1, "a", None), (2, None, "2024-01-02"), (3, "b/c=d", "2024-01-03"), (4, "b/c=d", "2024-01-03")]
    (
        spark.createDataFrame(rows, "x int, s string, d string")
        .selectExpr("x", "s", "cast(d as date) d")
        .write.partitionBy("s", "d")
        .parquet(str(root))
    )
    _ddl(spark, "DROP TABLE IF EXISTS ms_typed")
    _ddl(spark, f"CREATE TABLE ms_typed (x int, s string, d date) USING parquet PARTITIONED BY (s, d) LOCATION '{root}'")
    _ddl(spark, "MSCK REPAIR TABLE ms_typed")
    assert plan_table(spark, "ms_typed").method == "files"
    files = analyze_table(spark, "ms_typed", store=str(tmp_path / "f"), user_statistics=[], spark_statistics=True)
    assert files.timings["spark_statistics_s"] > 0
    described = _describe(spark, "ms_typed", "d")  # the date partition column, from our statistics
    assert (described["min"], described["max"], described["num_nulls"], described["distinct_count"]) == ("2024-01-02", "2024-01-03", "1", "2")
    assert _bins(described)[0] == (19724.0, 19724.0, 1)  # days since 1970; 2 values in 254 bins: lo == hi
    frame = analyze_table(spark, "ms_typed", store=str(tmp_path / "d"), method="dataframe", user_statistics=[])
    f = open_statistics(str(tmp_path / "f"), files.table)
    d = open_statistics(str(tmp_path / "d"), frame.table)
    keys = sorted(pi.key for pi in f.partitions())
    assert keys == sorted(["s=a/d=__HIVE_DEFAULT_PARTITION__", "s=__HIVE_DEFAULT_PARTITION__/d=2024-01-02", "s=b%2Fc%3Dd/d=2024-01-03"])
    assert sorted(pi.key for pi in d.partitions()) == keys
    assert f.column_type("d") == pa.date32()
    oracle = spark.sql(
        "SELECT count(d) AS nd, min(d) AS lo, max(d) AS hi, count(s) AS ns, count(DISTINCT s) AS ds, sum(x) AS sx FROM ms_typed"
    ).collect()[0]
    for stats in (f, d):
        dd, ss, xx = stats.column_statistics("d"), stats.column_statistics("s"), stats.column_statistics("x")
        assert dd["row_count"] == ss["row_count"] == len(rows)
        assert (len(rows) - dd["null_count"], dd["min"], dd["max"]) == (oracle["nd"], oracle["lo"], oracle["hi"])
        assert (len(rows) - ss["null_count"], ss["distinct_count"]) == (oracle["ns"], oracle["ds"])
        assert xx["sum"] == oracle["sx"]
    assert f.statistics(["x"], partition="s=b%2Fc%3Dd/d=2024-01-03", statistics=["row_count"]).to_pylist() == [{"column": "x", "row_count": 2}]


def test_unregistered_partitions_ask_for_msck_repair(spark, sales) -> None:
    from engine.exceptions import TableNotFoundError
    from spark_bridge.api import analyze_table, plan_table

    _ddl(spark, "DROP TABLE IF EXISTS ms_unrepaired")
    _ddl(spark, f"CREATE TABLE ms_unrepaired USING parquet LOCATION '{sales.root}'")
    for method in ("auto", "dataframe"):
        with pytest.raises(TableNotFoundError, match=r"MSCK REPAIR TABLE default\.ms_unrepaired"):
            plan_table(spark, "ms_unrepaired", method=method)
    with pytest.raises(TableNotFoundError, match="no partition is registered"):
        analyze_table(spark, "ms_unrepaired", store="/nonexistent-store")


def test_partition_outside_the_table_falls_back_to_spark(spark, sales, tmp_path) -> None:
    from engine.exceptions import InvalidArgumentError
    from spark_bridge.api import plan_table

    _ddl(spark, "DROP TABLE IF EXISTS ms_moved")
    _ddl(spark, f"CREATE TABLE ms_moved USING parquet LOCATION '{sales.root}'")
    _ddl(spark, "MSCK REPAIR TABLE ms_moved")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    _ddl(spark, f"ALTER TABLE ms_moved ADD PARTITION (part=7) LOCATION '{elsewhere}'")
    plan = plan_table(spark, "ms_moved")
    assert plan.method == "dataframe" and "outside the table location" in plan.reason
    with pytest.raises(InvalidArgumentError, match="cannot be read directly.*outside the table location"):
        plan_table(spark, "ms_moved", method="files")


def test_bad_tables_are_clear_errors(spark, sales, tmp_path) -> None:
    import pyarrow.csv as pcsv

    from engine.exceptions import InvalidArgumentError, TableNotFoundError
    from spark_bridge.api import analyze_table, plan_table

    with pytest.raises(TableNotFoundError, match=r"Spark's catalog has no table default\.no_such_table"):
        analyze_table(spark, "no_such_table")
    with pytest.raises(TableNotFoundError, match="no table nodb.t"):
        plan_table(spark, "nodb.t")
    _ddl(spark, f"CREATE OR REPLACE VIEW ms_view AS SELECT * FROM {TABLE}")
    with pytest.raises(InvalidArgumentError, match=r"default\.ms_view is a view"):
        plan_table(spark, "ms_view")
    spark.range(3).createOrReplaceTempView("ms_temp")
    with pytest.raises(InvalidArgumentError, match="ms_temp is a temporary view"):
        plan_table(spark, "ms_temp")
    csv_dir = tmp_path / "csv"
    csv_dir.mkdir()
    pcsv.write_csv(pa.table({"a": [1, 2], "b": ["x", "y"]}), str(csv_dir / "part-0.csv"))
    _ddl(spark, "DROP TABLE IF EXISTS ms_csv")
    _ddl(spark, f"CREATE TABLE ms_csv (a int, b string) USING csv OPTIONS (header 'true') LOCATION '{csv_dir}'")
    for method in ("auto", "files"):
        with pytest.raises(InvalidArgumentError, match=r"default\.ms_csv is a csv table; analyze_table reads Parquet"):
            plan_table(spark, "ms_csv", method=method)
    assert plan_table(spark, "ms_csv", method="dataframe").method == "dataframe"
    with pytest.raises(InvalidArgumentError, match="method must be one of"):
        plan_table(spark, TABLE, method="fast")
    with pytest.raises(InvalidArgumentError, match="only tables of Spark's session catalog"):
        plan_table(spark, "other_catalog.db.t")


def test_unsupported_types(spark, tmp_path) -> None:
    from engine.api import open_statistics
    from engine.exceptions import InvalidArgumentError
    from spark_bridge.api import analyze

    df = spark.range(40).selectExpr(
        "id",
        "array(id, id + 1) AS a",
        "map('k', id) AS m",
        "named_struct('x', id % 4, 'y', cast(id AS string)) AS s",
        "make_dt_interval(0, 0, 0, id) AS dt",
    )
    result = analyze(df, store=str(tmp_path), name="nested", user_statistics=[])
    stats = open_statistics(str(tmp_path), "nested")
    rows = {r["column"]: r for r in stats.statistics(statistics=["unsupported", "distinct_count", "max"]).to_pylist()}
    assert result.rows == 40
    assert rows["a"]["unsupported"] and rows["m"]["unsupported"]  # a marker per column, not an error
    assert rows["s.x"]["unsupported"] is None and rows["s.x"]["distinct_count"] == 4
    assert rows["dt"]["unsupported"] is None and rows["dt"]["distinct_count"] == 40
    # interval types Spark cannot hand to Arrow: refused by name before anything moves
    bad = spark.range(3).selectExpr("id", "make_interval(0, 0, 0, 0, 0, 0, id) AS ci", "make_ym_interval(1, 2) AS ym")
    with pytest.raises(InvalidArgumentError, match=r"ci \(interval\).*ym \(interval year to month\).*df\.drop\('ci', 'ym'\)"):
        analyze(bad, store=str(tmp_path), name="bad")
    with pytest.raises(InvalidArgumentError, match="partition_by column 'a' is of type array<bigint>"):
        analyze(df, partition_by=["a"], store=str(tmp_path), name="bad")


def test_dataframe_identity_is_content_based(spark, sales, tmp_path) -> None:
    import shutil

    from spark_bridge.identity import dataframe_identity

    copy = tmp_path / "copy"
    shutil.copytree(sales.root, copy)

    def ident(df):
        return dataframe_identity(df, ["part"], df.schema.json())

    a = ident(spark.read.parquet(str(copy)).where("quantity > 10"))
    b = ident(spark.read.parquet(str(copy)).where("quantity > 10"))  # a new DataFrame, new expression ids
    assert a.content_based and a.files == PARTS + PARTS // 2 and a.snapshot_id == b.snapshot_id
    assert ident(spark.read.parquet(str(copy)).where("quantity > 11")).snapshot_id != a.snapshot_id
    victim = next(copy.rglob("*.parquet"))
    os.utime(victim, ns=(victim.stat().st_atime_ns, victim.stat().st_mtime_ns + 10**9))  # touched: another snapshot
    assert ident(spark.read.parquet(str(copy)).where("quantity > 10")).snapshot_id != a.snapshot_id
    table = ident(spark.table(TABLE))
    assert table.content_based and table.snapshot_id == ident(spark.table(TABLE)).snapshot_id
    local = ident(spark.createDataFrame([(1,)], "part int"))
    assert not local.content_based and "LogicalRDD" in local.reason
    assert local.snapshot_id != ident(spark.createDataFrame([(1,)], "part int")).snapshot_id
    random = ident(spark.range(5).selectExpr("id AS part", "rand() AS r"))
    assert not random.content_based and "not deterministic" in random.reason


# ------------------------------------------------------------------ Spark's cost-based optimizer


def _describe(spark, table: str, column: str) -> dict[str, str]:
    return {r[0]: r[1] for r in spark.sql(f"DESCRIBE EXTENDED {table} {column}").collect()}


_BIN = re.compile(r"lower_bound: (\S+), upper_bound: (\S+), distinct_count: (\d+)")


def _bins(described: dict[str, str]) -> list[tuple[float, float, int]]:
    out = []
    for i in range(10_000):
        text = described.get(f"bin_{i}")
        if text is None:
            return out
        lo, hi, ndv = _BIN.fullmatch(text).groups()
        out.append((float(lo), float(hi), int(ndv)))
    return out


@pytest.fixture
def cbo_conf(spark):
    keys = ("spark.sql.cbo.enabled",)
    before = {k: spark.conf.get(k, None) for k in keys}
    yield
    for k, v in before.items():
        if v is None:
            spark.conf.unset(k)
        else:
            spark.conf.set(k, v)


def test_cbo_statistics_in_describe_and_the_optimizer(spark, sales, analyzed, cbo_conf) -> None:
    from engine.api import open_statistics
    from spark_bridge.api import write_spark_statistics

    # Spark's own ANALYZE on a twin table over the same files: the oracle for the exact statistics
    _ddl(spark, "DROP TABLE IF EXISTS ms_sales_spark")
    _ddl(spark, f"CREATE TABLE ms_sales_spark USING parquet LOCATION '{sales.root}'")
    _ddl(spark, "MSCK REPAIR TABLE ms_sales_spark")
    _ddl(spark, "ANALYZE TABLE ms_sales_spark COMPUTE STATISTICS FOR ALL COLUMNS")  # no histograms: oracle below

    out = write_spark_statistics(spark, TABLE, store=analyzed.stores["files"])
    assert out["rows"] == ROWS and out["skipped"] == {}
    assert out["columns"]["event_date"] == "exact" and out["columns"]["part"] == "exact"
    assert out["columns"]["category"] is None  # strings: no histogram, as Spark
    ours_stats = open_statistics(analyzed.stores["files"], analyzed.files.table)
    table_line = {r[0]: r[1] for r in spark.sql(f"DESCRIBE EXTENDED {TABLE}").collect()}["Statistics"]
    assert table_line == f"{out['size_in_bytes']} bytes, {ROWS} rows"
    t = sales.arrow
    for column in spark.table(TABLE).columns:
        ours, theirs = _describe(spark, TABLE, column), _describe(spark, "ms_sales_spark", column)
        row = ours_stats.column_statistics(column)
        for key in ("num_nulls", "avg_col_len", "max_col_len"):
            assert ours[key] == theirs[key], (column, key)
        if not row["nan_count"]:  # Spark's max of a column holding NaN is NaN
            for key in ("min", "max"):
                if column == "score":  # a float: Spark prints it as a float, ours is the same value as a double
                    assert np.float32(float(ours[key])) == np.float32(float(theirs[key])), (column, key)
                else:
                    assert ours[key] == theirs[key], (column, key)
        assert int(ours["distinct_count"]) == row["distinct_count"]
        if row["distinct_count_exact"]:
            values = t[column]
            if pa.types.is_floating(values.type):  # NaN is not a distinct value for us
                values = pc.filter(values, pc.invert(pc.is_nan(values)))
            assert int(ours["distinct_count"]) == pc.count_distinct(values, mode="only_valid").as_py(), column
        bins = _bins(ours)
        if column in ("category", "city", "comment", "flag"):
            assert ours["histogram"] == "NULL" and not bins
            continue
        assert ours["histogram"].endswith("num_of_bins: 254") and len(bins) == 254, column
        # the domain Spark uses: days for dates, microseconds for timestamps, the value otherwise
        values = t[column].drop_null().combine_chunks()
        if pa.types.is_date32(values.type):
            x = values.view(pa.int32()).to_numpy().astype(float)
        elif pa.types.is_timestamp(values.type):
            x = values.cast(pa.timestamp("us", "UTC")).view(pa.int64()).to_numpy().astype(float)
        else:
            x = pc.cast(values, pa.float64()).to_numpy()
        x = x[~np.isnan(x)]
        if out["columns"][column] == "exact":
            assert bins == equi_height_histogram(x, 254), column
        else:  # approximate endpoints: every endpoint within 3% of its rank
            ends = np.array([b[1] for b in bins[:-1]])
            ranks = np.searchsorted(np.sort(x), ends, side="right") / len(x)
            assert np.max(np.abs(ranks - np.arange(1, 254) / 254)) < 0.03, column
            assert bins[0][0] == x.min() and bins[-1][1] == x.max(), column

    spark.conf.set("spark.sql.cbo.enabled", "true")
    plan = spark.table(TABLE)._jdf.queryExecution().optimizedPlan()
    assert plan.stats().rowCount().get() == ROWS
    actual = spark.table(TABLE).where("quantity < 10000").count()
    estimate = spark.table(TABLE).where("quantity < 10000")._jdf.queryExecution().optimizedPlan().stats().rowCount().get()
    assert abs(estimate - actual) <= 0.1 * actual
