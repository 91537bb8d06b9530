"""The Spark examples of README.md and docs/ run, in the test run's Spark session.

The blocks marked ``<!-- run with Spark: tests/spark_bridge/test_doc_examples.py -->``
(tests/docs/examples.py finds them; tests/docs/test_examples.py does not run them and fails
when one has no check here) need Spark and the table ``db.sales`` of its catalog. Each runs
as written (``exec``) in a directory of its own, the one the docs assume: the sample table
at ``data/sales`` (engine.sample, 4,000 rows in 4 partitions, as tests/docs makes it),
registered as the Parquet table ``db.sales`` (its ``part`` folders as partitions, ``part``
a string as engine.sample makes it, MSCK REPAIR), the store at ``.metastore``. The block's relative paths ``"data/sales"`` and
``".metastore"`` are made absolute (in that directory) before it runs: Spark's JVM and Ray's
workers keep the working directory the test run started in, which a chdir of the test does
not change (tests/docs starts its Ray in the examples' directory instead; a Spark session
cannot be moved). ``start_spark()`` needs no patch: it returns the session already started (the
``spark`` fixture's). ``stop_spark()`` is made a no-op for the block, which would stop the
session the other Spark tests share. Afterwards db.sales and db are dropped, the temporary
views and ``spark.sql.cbo.enabled`` put back: the catalog and the conf are the session's.

The oracles: DuckDB over data/sales (row count, min and max), the files of data/sales.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from urllib.parse import unquote, urlparse

import pytest

from tests.docs.examples import Example, spark_examples

pytestmark = [pytest.mark.spark, pytest.mark.ray]

THIS = "tests/spark_bridge/test_doc_examples.py"
ROWS, PARTITIONS = 4_000, 4
VIEWS = ("metastore_statistics", "metastore_frequencies", "metastore_histograms")


@pytest.fixture
def doc_dir(spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[SimpleNamespace]:
    """The examples' directory (the working directory while the test runs) with data/sales
    as db.sales; the oracle's figures of it."""
    import duckdb

    from engine.sample import generate_table

    root = tmp_path / "data" / "sales"
    generate_table(str(root), rows=ROWS, partitions=PARTITIONS, seed=0)
    monkeypatch.chdir(tmp_path)
    inference = "spark.sql.sources.partitionColumnTypeInference.enabled"
    conf = {key: spark.conf.get(key, None) for key in ("spark.sql.cbo.enabled", inference)}
    try:
        spark.sql("CREATE DATABASE IF NOT EXISTS db").collect()
        spark.sql("DROP TABLE IF EXISTS db.sales").collect()
        spark.conf.set(inference, "false")  # part is a string, as in the files' folders ("03", not 3)
        spark.sql(f"CREATE TABLE db.sales USING parquet LOCATION '{root}'").collect()  # partitions: the part= folders
        _restore(spark, inference, conf[inference])
        spark.sql("MSCK REPAIR TABLE db.sales").collect()
        count, low, high = duckdb.sql(f"SELECT count(*), min(quantity), max(quantity) FROM read_parquet('{root}/*/*.parquet')").fetchall()[0]
        files = {os.path.realpath(p) for p in root.rglob("*.parquet")}
        yield SimpleNamespace(root=root, store=tmp_path / ".metastore", rows=count, quantity=(low, high), files=files)
    finally:
        spark.sql("DROP TABLE IF EXISTS db.sales").collect()
        spark.sql("DROP DATABASE IF EXISTS db CASCADE").collect()
        for view in VIEWS:
            spark.catalog.dropTempView(view)
        for key, value in conf.items():
            _restore(spark, key, value)


def _restore(spark: Any, key: str, value: str | None) -> None:
    if value is None:
        spark.conf.unset(key)
    else:
        spark.conf.set(key, value)


def _describe(spark: Any, what: str) -> dict[str, str]:
    return {r[0]: r[1] for r in spark.sql(f"DESCRIBE EXTENDED {what}").collect()}


def _check_db_sales(spark: Any, sales: SimpleNamespace) -> None:
    """The store holds db.sales as DuckDB counts it, and Spark's catalog got those statistics."""
    from engine.api import open_statistics

    quantity = open_statistics(str(sales.store), "db.sales").column_statistics("quantity")
    assert quantity["row_count"] == sales.rows == ROWS
    assert (quantity["min"], quantity["max"]) == sales.quantity
    assert _describe(spark, "db.sales")["Statistics"].endswith(f" bytes, {ROWS} rows")
    described = _describe(spark, "db.sales quantity")
    assert (int(described["min"]), int(described["max"])) == sales.quantity


def _check_plan(namespace: dict[str, Any], sales: SimpleNamespace) -> None:
    """plan_files chose files of data/sales, and left some out (Berlin and price > 5 prune)."""
    plan = namespace["plan"]
    chosen = {os.path.realpath(unquote(urlparse(f).path)) for f in plan.files}
    assert chosen and chosen <= sales.files, (chosen, sales.files)
    assert plan.pruned + len(plan.files) == len(sales.files)


def _readme(spark: Any, namespace: dict[str, Any], sales: SimpleNamespace) -> None:
    _check_db_sales(spark, sales)
    _check_plan(namespace, sales)


def _spark_md(spark: Any, namespace: dict[str, Any], sales: SimpleNamespace) -> None:
    from engine.api import open_statistics

    _check_db_sales(spark, sales)
    _check_plan(namespace, sales)
    by_city = open_statistics(str(sales.store), "sales")  # the DataFrame analyzed partitioned by city
    assert "city=Paris" in {p.key for p in by_city.partitions()}
    assert by_city.column_statistics("quantity")["row_count"] == sales.rows
    assert namespace["stopped"] == [True]  # the block's stop_spark() ran (and left the session)


def _planners_md(spark: Any, namespace: dict[str, Any], sales: SimpleNamespace) -> None:
    _check_db_sales(spark, sales)
    partition = _describe(spark, "db.sales PARTITION (part='03')")
    assert partition["Partition Statistics"].endswith(f" bytes, {ROWS // PARTITIONS} rows"), partition


#: What each marked block (by its key, tests/docs/examples.spark_examples) must have done.
CHECKS: dict[str, Callable[[Any, dict[str, Any], SimpleNamespace], None]] = {
    "README.md#1": _readme,
    "docs/SPARK.md#1": _spark_md,
    "docs/PLANNERS.md#1": _planners_md,
}

MARKED = {key: e for key, e in spark_examples().items() if e.spark_test == THIS}


@pytest.mark.parametrize("key", sorted(MARKED), ids=lambda key: f"{key} ({MARKED[key].id})")
def test_spark_example(key: str, spark: Any, doc_dir: SimpleNamespace, monkeypatch: pytest.MonkeyPatch) -> None:
    import spark_bridge.session

    example: Example = MARKED[key]
    assert key in CHECKS, f"{example.id} is marked to run here but has no check in CHECKS"
    stopped: list[bool] = []
    monkeypatch.setattr(spark_bridge.session, "stop_spark", lambda: stopped.append(True))
    namespace: dict[str, Any] = {"__name__": "__doc_example__"}
    code = example.code.replace('"data/sales"', f'"{doc_dir.root}"').replace('".metastore"', f'"{doc_dir.store}"')
    exec(compile(code, example.id, "exec"), namespace)
    assert spark_bridge.session.active_spark() is spark
    CHECKS[key](spark, {**namespace, "stopped": stopped}, doc_dir)
