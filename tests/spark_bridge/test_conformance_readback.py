"""The conformance matrix's Spark read-back cell (tests/conformance): every writer's table, as
analyzed into the matrix's shared store, read back in Spark through RayDP
(``spark_bridge.api.read_statistics``): one statistics row per leaf column with the reader's
row count, and a discrete column's frequencies as DuckDB counts them."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from engine.columns import column_path
from engine.files import layout
from engine.lookup import open_statistics
from tests.conformance.oracle import duckdb_connection, leaves
from tests.conformance.writers import WRITERS

pytestmark = [pytest.mark.spark, pytest.mark.ray]


@pytest.mark.parametrize("writer", list(WRITERS))
def test_spark_reads_back_the_statistics(spark, lake, writer: str) -> None:
    from spark_bridge.api import read_statistics

    a = lake.get(writer)
    assert a.exit_code == 0, a.output
    stats = read_statistics(spark, lake.store, writer).select("column", "row_count").collect()
    ours = pq.read_table(open_statistics(lake.store, writer).file_uri(layout.STATISTICS_FILE), columns=["column"])
    assert sorted(r["column"] for r in stats) == sorted(ours.column("column").to_pylist())
    assert {r["row_count"] for r in stats} == {a.data.num_rows}

    frequencies = read_statistics(spark, lake.store, writer, kind="frequencies")
    con, names = duckdb_connection(a.data)
    for path, column in leaves(a.data).items():
        if str(column.type) not in ("string", "large_string"):
            continue
        stored = {r["column"] for r in frequencies.select("column").distinct().collect()}
        name = next((c for c in stored if column_path(c) == path), None)
        if name is None:
            continue
        top = frequencies.filter(frequencies.column == name).agg({"frequency": "max"}).collect()[0][0]
        n = names[path]
        want = con.execute(f"SELECT max(k) FROM (SELECT count(*) AS k FROM t WHERE {n} IS NOT NULL GROUP BY {n})").fetchone()[0]
        assert top == want, (writer, path)
        break
