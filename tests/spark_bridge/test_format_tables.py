"""Delta and Iceberg tables of Spark's catalog: analyze_table reads them through the format sources.

The tables are real, written by ``deltalake`` and ``pyiceberg`` (appends, an overwrite,
a delete). Their catalog entries are registered as a Delta- or Iceberg-enabled Spark
records them (tests/spark_bridge/catalog_helpers.py says what and why: the Delta and
Iceberg Spark jars cannot be installed here, so Spark itself cannot read these tables).
Oracles: ``engine.api.analyze`` of the same location (the same statistics files, the
same snapshot) and DuckDB over the rows the format's own reader returns.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from tests.spark_bridge.catalog_helpers import ICEBERG_INPUT, ICEBERG_OUTPUT, ICEBERG_SERDE, register_table

pytestmark = [pytest.mark.spark, pytest.mark.ray]


def _pcts() -> list[str]:
    from engine.stats.valuecounts import PERCENTILES, percentile_column

    return [percentile_column(p) for p in PERCENTILES]


PCTS = _pcts()


def _statistics_files_equal(store_a: str, store_b: str, table: str) -> None:
    """Every statistics file of the two stores' ``table`` holds the same rows (table and partitions)."""
    from engine.api import open_statistics
    from engine.files import layout

    a, b = open_statistics(store_a, table), open_statistics(store_b, table)
    keys = [p.key for p in a.partitions()]
    assert keys == [p.key for p in b.partitions()]
    for key in [None, *keys]:
        for kind in (layout.STATISTICS_FILE, layout.FREQUENCIES_FILE, layout.HISTOGRAMS_FILE):
            ta, tb = pq.read_table(a.file_uri(kind, key)), pq.read_table(b.file_uri(kind, key))
            if kind == layout.STATISTICS_FILE:
                # KLL sketches compact at random: approximate percentiles differ between any two runs
                exact = ta["percentiles_exact"].to_pylist()
                assert exact == tb["percentiles_exact"].to_pylist()
                for c in PCTS:
                    assert [v for v, e in zip(ta[c].to_pylist(), exact) if e] == [v for v, e in zip(tb[c].to_pylist(), exact) if e], c
                ta, tb = ta.drop_columns([*PCTS, "kll_sketch"]), tb.drop_columns([*PCTS, "kll_sketch"])
            assert ta.equals(tb), (kind, key, [c for c in ta.column_names if not ta[c].equals(tb[c])])


def _by_part(data: pa.Table) -> dict[str, pa.Table]:
    return {f"part={p}": data.filter(pc.equal(data["part"], p)) for p in pc.unique(data["part"]).to_pylist()}


@pytest.fixture(scope="module")
def delta_table(spark, tmp_path_factory: pytest.TempPathFactory) -> str:
    """A Delta table (create, append, overwrite of part=1, delete) registered as ms_delta."""
    from deltalake import DeltaTable, write_deltalake

    from tests.engine.sources.lake_helpers import batch

    uri = str(tmp_path_factory.mktemp("spark_delta") / "orders")
    write_deltalake(uri, batch(1_500, seed=1), partition_by=["part"])
    write_deltalake(uri, batch(1_000, seed=2, start=1_500), partition_by=["part"], mode="append")
    part1 = batch(400, seed=3, start=10_000, parts=1).set_column(1, "part", pa.array([1] * 400, pa.int64()))
    write_deltalake(uri, part1, partition_by=["part"], mode="overwrite", predicate="part = 1")
    DeltaTable(uri).delete("id % 7 = 0")
    register_table(spark, "ms_delta", provider="delta", location=uri)
    return uri


def test_delta_table_is_analyzed_through_the_delta_source(spark, delta_table: str, tmp_path: Path) -> None:
    from deltalake import DeltaTable

    from engine.api import analyze
    from spark_bridge.api import analyze_table, plan_table
    from tests.engine.sources.lake_helpers import check_table

    plan = plan_table(spark, "ms_delta")
    assert (plan.method, plan.format, plan.location) == ("files", "delta", delta_table)
    spark_store, api_store = str(tmp_path / "spark"), str(tmp_path / "api")
    got = analyze_table(spark, "ms_delta", store=spark_store, user_statistics=[])
    want = analyze(delta_table, store=api_store, name="default.ms_delta", format="delta", user_statistics=[])
    live = DeltaTable(delta_table).to_pyarrow_table()
    assert got.table == "default.ms_delta" and got.timings["files_path"] == 1.0
    assert got.snapshot == want.snapshot == "3"  # the Delta version, as engine.api records it
    assert got.rows == want.rows == live.num_rows
    _statistics_files_equal(spark_store, api_store, "default.ms_delta")
    check_table(spark_store, "default.ms_delta", live, _by_part(live))  # DuckDB over delta-rs's rows


@pytest.fixture(scope="module")
def iceberg_table(tmp_path_factory: pytest.TempPathFactory):
    """A pyiceberg table (SQL catalog on sqlite) partitioned by part: two appends and a delete.
    Returns (table location, metadata file of that state, pyiceberg table)."""
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.expressions import EqualTo
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.transforms import IdentityTransform

    from tests.engine.sources.lake_helpers import batch
    from tests.engine.sources.test_iceberg import SCHEMA, _arrow

    root = tmp_path_factory.mktemp("spark_iceberg")
    catalog = SqlCatalog("t", uri=f"sqlite:///{root}/catalog.db", warehouse=f"file://{root}/warehouse")
    catalog.create_namespace_if_not_exists("db")
    spec = PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="part"))
    table = catalog.create_table("db.orders", schema=SCHEMA, partition_spec=spec)
    arrow_schema = table.schema().as_arrow()
    table.append(_arrow(batch(1_200, seed=5), arrow_schema))
    table.append(_arrow(batch(800, seed=6, start=1_200), arrow_schema))
    table.delete(EqualTo("part", 2))
    return table.location().removeprefix("file://"), table.metadata_location, table


def test_iceberg_table_of_a_hive_catalog_is_read_at_its_metadata_location(spark, iceberg_table, tmp_path: Path) -> None:
    """The catalog's ``metadata_location`` decides the snapshot: a commit Spark's catalog has
    not recorded (a newer metadata file in the folder) is not read."""
    from engine.api import analyze
    from spark_bridge.api import analyze_table, plan_table
    from tests.engine.sources.lake_helpers import batch, check_table
    from tests.engine.sources.test_iceberg import _arrow

    location, metadata, table = iceberg_table
    register_table(
        spark,
        "ms_iceberg_hive",
        provider="hive",
        location=location,
        schema_ddl="id INT, part BIGINT, price DOUBLE, city STRING, ts TIMESTAMP, day DATE",
        properties={"table_type": "ICEBERG", "metadata_location": metadata},
        serde=ICEBERG_SERDE,
        input_format=ICEBERG_INPUT,
        output_format=ICEBERG_OUTPUT,
    )
    committed = table.scan().to_arrow()
    snapshot = str(table.current_snapshot().snapshot_id)
    # a later commit the Spark catalog does not point at (the newest metadata file on disk)
    table.append(_arrow(batch(300, seed=7, start=5_000), table.schema().as_arrow()))
    assert table.metadata_location != metadata

    plan = plan_table(spark, "ms_iceberg_hive")
    assert (plan.method, plan.format, plan.location) == ("files", "iceberg", metadata.removeprefix("file://"))
    spark_store, api_store = str(tmp_path / "spark"), str(tmp_path / "api")
    got = analyze_table(spark, "ms_iceberg_hive", store=spark_store, user_statistics=[])
    want = analyze(metadata, store=api_store, name="default.ms_iceberg_hive", format="iceberg", user_statistics=[])
    assert got.snapshot == want.snapshot == snapshot
    assert got.rows == want.rows == committed.num_rows
    _statistics_files_equal(spark_store, api_store, "default.ms_iceberg_hive")
    committed = committed.cast(pa.schema([f.with_type(pa.string()) if f.type == pa.large_string() else f for f in committed.schema]))
    check_table(spark_store, "default.ms_iceberg_hive", committed, _by_part(committed))


def test_iceberg_table_with_only_a_location_reads_its_newest_metadata(spark, iceberg_table, tmp_path: Path) -> None:
    from engine.api import analyze
    from spark_bridge.api import analyze_table, plan_table

    location, _, table = iceberg_table
    register_table(spark, "ms_iceberg", provider="iceberg", location=location)
    plan = plan_table(spark, "ms_iceberg")
    assert (plan.method, plan.format, plan.location) == ("files", "iceberg", location)
    spark_store, api_store = str(tmp_path / "spark"), str(tmp_path / "api")
    got = analyze_table(spark, "ms_iceberg", store=spark_store, user_statistics=[])
    want = analyze(location, store=api_store, name="default.ms_iceberg", format="iceberg", user_statistics=[])
    assert got.snapshot == want.snapshot == str(table.refresh().current_snapshot().snapshot_id)
    assert got.rows == table.scan().to_arrow().num_rows
    _statistics_files_equal(spark_store, api_store, "default.ms_iceberg")


def test_tables_without_a_location_are_one_clear_error(spark) -> None:
    from engine.exceptions import InvalidArgumentError
    from spark_bridge.api import analyze_table, plan_table

    register_table(spark, "ms_delta_nowhere", provider="delta", location=None)
    register_table(spark, "ms_jdbc", provider="org.apache.spark.sql.jdbc", location=None, schema_ddl="a INT")
    cases = {
        "ms_delta_nowhere": r"^default\.ms_delta_nowhere is a delta table but Spark's catalog records no location for it; ",
        "ms_jdbc": r"^default\.ms_jdbc is a org\.apache\.spark\.sql\.jdbc table; analyze_table reads Parquet, Delta, Iceberg and Hudi tables",
    }
    for table, message in cases.items():
        for call in (lambda: plan_table(spark, table), lambda: analyze_table(spark, table)):
            with pytest.raises(InvalidArgumentError, match=message) as err:
                call()
            assert "\n" not in str(err.value)
