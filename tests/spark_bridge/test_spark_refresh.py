"""Spark's catalog statistics kept current: analyze_table writes them, a re-analyze after an append refreshes them.

A partitioned Parquet table of the session catalog; the oracles are DuckDB over the
table's files (row counts, distinct counts, min, max, null counts per table and per
partition) and the files' sizes on disk. What is checked is what Spark shows:
``DESCRIBE EXTENDED t``, ``DESCRIBE EXTENDED t col``, ``DESCRIBE EXTENDED t PARTITION (...)``
and the optimizer's row count estimate.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

pytestmark = [pytest.mark.spark, pytest.mark.ray]

TABLE = "ms_refresh"
COLUMNS = ("id", "price", "city")


def _sql(spark, sql: str) -> list:
    return spark.sql(sql).collect()


def _write(root: Path, part: int, name: str, ids: np.ndarray, seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = len(ids)
    price = pa.array(rng.uniform(1, 100, n).round(2), mask=rng.random(n) < 0.1)
    city = pa.array(rng.choice(["Berlin", "Paris", "Rome", "Oslo"], n), mask=rng.random(n) < 0.05)
    folder = root / f"part={part}"
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table({"id": pa.array(ids, pa.int64()), "price": price, "city": city}), folder / name)


def _truth(root: Path) -> dict:
    """Per column: distinct, min, max, nulls; rows per partition and in all; DuckDB over the files."""
    con = duckdb.connect()
    try:
        src = f"read_parquet('{root}/*/*.parquet', hive_partitioning = true)"
        out: dict = {"rows": con.execute(f"SELECT count(*) FROM {src}").fetchone()[0]}
        out["partitions"] = dict(con.execute(f"SELECT part::INT, count(*) FROM {src} GROUP BY 1").fetchall())
        for c in COLUMNS:
            q = f"SELECT count(DISTINCT {c}), min({c}), max({c}), count(*) - count({c}) FROM {src}"
            out[c] = con.execute(q).fetchone()
        return out
    finally:
        con.close()


def _size(folder: Path) -> int:
    """Bytes of the data files below ``folder`` (Spark leaves out names starting with _ or .)."""
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file() and not p.name.startswith(("_", ".")))


def _describe(spark, what: str) -> dict[str, str]:
    return {r[0]: r[1] for r in _sql(spark, f"DESCRIBE EXTENDED {what}")}


def _check(spark, root: Path) -> None:
    """Spark's catalog holds the files' truth: table, columns, partitions, the optimizer's estimate."""
    truth = _truth(root)
    assert _describe(spark, TABLE)["Statistics"] == f"{_size(root)} bytes, {truth['rows']} rows"
    for column in COLUMNS:
        got = _describe(spark, f"{TABLE} {column}")
        distinct, lo, hi, nulls = truth[column]
        assert int(got["distinct_count"]) == distinct, column
        assert int(got["num_nulls"]) == nulls, column
        if column == "city":  # Spark keeps no min/max for strings
            assert got["min"] == got["max"] == "NULL"
        else:
            assert float(got["min"]) == lo and float(got["max"]) == hi, column
    for part, rows in truth["partitions"].items():
        got = _describe(spark, f"{TABLE} PARTITION (part={part})")
        assert got["Partition Statistics"] == f"{_size(root / f'part={part}')} bytes, {rows} rows", part
    spark.conf.set("spark.sql.cbo.enabled", "true")
    try:
        plan = spark.table(TABLE)._jdf.queryExecution().optimizedPlan()
        assert plan.stats().rowCount().get() == truth["rows"]
    finally:
        spark.conf.unset("spark.sql.cbo.enabled")


def test_analyze_and_reanalyze_refresh_spark_statistics(spark, tmp_path: Path) -> None:
    from spark_bridge.api import analyze_table

    root = tmp_path / "refresh"
    store = str(tmp_path / "store")
    _write(root, 0, "a.parquet", np.arange(0, 800), 1)
    _write(root, 1, "a.parquet", np.arange(800, 1500), 2)
    _sql(spark, f"DROP TABLE IF EXISTS {TABLE}")
    _sql(spark, f"CREATE TABLE {TABLE} USING parquet LOCATION '{root}'")
    _sql(spark, f"MSCK REPAIR TABLE {TABLE}")

    first = analyze_table(spark, TABLE, store=store, user_statistics=[])
    assert first.warnings == [] and first.timings["spark_statistics_s"] > 0
    _check(spark, root)

    # an append: a file in an existing partition and a new partition, larger ids
    _write(root, 1, "b.parquet", np.arange(5000, 5600), 3)
    _write(root, 2, "a.parquet", np.arange(9000, 9300), 4)
    _sql(spark, f"MSCK REPAIR TABLE {TABLE}")
    _sql(spark, f"REFRESH TABLE {TABLE}")
    second = analyze_table(spark, TABLE, store=store, user_statistics=[])
    assert second.rows == first.rows + 900 and second.warnings == []
    _check(spark, root)

    # without the refresh, the catalog keeps what it had
    _write(root, 2, "b.parquet", np.arange(20000, 20010), 5)
    _sql(spark, f"REFRESH TABLE {TABLE}")
    before = _describe(spark, TABLE)["Statistics"]
    analyze_table(spark, TABLE, store=store, user_statistics=[], spark_statistics=False)
    assert _describe(spark, TABLE)["Statistics"] == before
    _sql(spark, f"DROP TABLE {TABLE}")


def test_unpartitioned_table_and_dataframe_path(spark, tmp_path: Path) -> None:
    from spark_bridge.api import analyze_table

    root = tmp_path / "flat"
    root.mkdir()
    rng = np.random.default_rng(7)
    pq.write_table(pa.table({"id": pa.array(np.arange(300), pa.int64()), "v": pa.array(rng.integers(0, 40, 300))}), root / "a.parquet")
    _sql(spark, "DROP TABLE IF EXISTS ms_refresh_flat")
    _sql(spark, f"CREATE TABLE ms_refresh_flat USING parquet LOCATION '{root}'")
    analyze_table(spark, "ms_refresh_flat", store=str(tmp_path / "s"), method="dataframe", user_statistics=[])
    assert _describe(spark, "ms_refresh_flat")["Statistics"] == f"{_size(root)} bytes, 300 rows"
    pq.write_table(pa.table({"id": pa.array(np.arange(300, 350), pa.int64()), "v": pa.array(np.full(50, 99))}), root / "b.parquet")
    _sql(spark, "REFRESH TABLE ms_refresh_flat")
    analyze_table(spark, "ms_refresh_flat", store=str(tmp_path / "s"), method="dataframe", user_statistics=[])
    assert _describe(spark, "ms_refresh_flat")["Statistics"] == f"{_size(root)} bytes, 350 rows"
    got = _describe(spark, "ms_refresh_flat v")
    con = duckdb.connect()
    distinct, hi = con.execute(f"SELECT count(DISTINCT v), max(v) FROM read_parquet('{root}/*.parquet')").fetchone()
    con.close()
    assert (int(got["distinct_count"]), int(got["max"])) == (distinct, hi)
    _sql(spark, "DROP TABLE ms_refresh_flat")
