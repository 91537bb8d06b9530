"""engine/publish/parquet_read.py: a partition's columns straight from its Parquet files, or None.

Oracles: pyiceberg's own scan (``scan().to_arrow()``) and pyarrow's read of the files.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.schema import Schema
from pyiceberg.types import IntegerType, LongType, NestedField, StringType

from engine.publish.parquet_read import direct_batches
from engine.sources import open_table

CATALOG = "parquetreadtest"


@pytest.fixture
def catalog(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> SqlCatalog:
    monkeypatch.setenv(f"PYICEBERG_CATALOG__{CATALOG.upper()}__TYPE", "sql")
    monkeypatch.setenv(f"PYICEBERG_CATALOG__{CATALOG.upper()}__URI", f"sqlite:///{tmp_path}/catalog.db")
    monkeypatch.setenv(f"PYICEBERG_CATALOG__{CATALOG.upper()}__WAREHOUSE", f"file://{tmp_path}/warehouse")
    c = SqlCatalog(CATALOG, uri=f"sqlite:///{tmp_path}/catalog.db", warehouse=f"file://{tmp_path}/warehouse")
    c.create_namespace_if_not_exists("db")
    return c


def _rows(n: int) -> pa.Table:
    return pa.table({"k": pa.array([i * 31 % 997 if i % 7 else None for i in range(n)], pa.int64()), "s": pa.array([f"v{i % 13}" for i in range(n)])})


def _direct(identifier: str, table: object, columns: list[str]) -> list[pa.Table | None]:
    source = open_table(identifier, catalog=CATALOG)
    out = []
    for partition in source.partitions():
        batches = direct_batches(source, partition, columns, table.name_mapping())  # type: ignore[attr-defined]
        out.append(None if batches is None else pa.Table.from_batches(list(batches)))
    return out


def _sorted(t: pa.Table) -> list[dict]:
    return sorted(t.to_pylist(), key=lambda r: (r["k"] is None, r["k"] or 0, r["s"]))


def test_files_with_field_ids_are_read_directly(catalog: SqlCatalog) -> None:
    schema = Schema(NestedField(1, "k", LongType(), required=False), NestedField(2, "s", StringType(), required=False))
    table = catalog.create_table("db.ids", schema=schema)
    table.append(_rows(500))
    table.append(_rows(300))
    (got,) = _direct("db.ids", table, ["s", "k"])
    assert got is not None and got.column_names == ["s", "k"]
    assert _sorted(got) == _sorted(table.scan().to_arrow().select(["s", "k"]))


def test_files_without_field_ids_are_matched_by_the_name_mapping(catalog: SqlCatalog, tmp_path: Path) -> None:
    data = tmp_path / "warehouse" / "db" / "added" / "data"
    data.mkdir(parents=True)
    files = []
    for i, n in enumerate((400, 250)):
        path = data / f"{i}.parquet"
        pq.write_table(_rows(n), path)
        files.append(str(path))
    table = catalog.create_table("db.added", schema=pq.read_schema(files[0]), location=f"file://{tmp_path}/warehouse/db/added")
    table.add_files(files)
    (got,) = _direct("db.added", table, ["k"])
    assert got is not None
    expected = pa.concat_tables([pq.read_table(f, columns=["k"]) for f in files])
    assert sorted(got["k"].to_pylist(), key=lambda v: (v is None, v or 0)) == sorted(expected["k"].to_pylist(), key=lambda v: (v is None, v or 0))


def test_a_promoted_column_goes_through_the_source(catalog: SqlCatalog) -> None:
    """An int column promoted to long: the snapshot after it reads its older file's int32 as long."""
    schema = Schema(NestedField(1, "n", IntegerType(), required=False))
    table = catalog.create_table("db.promoted", schema=schema)
    table.append(pa.table({"n": pa.array([1, 2, 3], pa.int32())}))
    with table.update_schema() as update:
        update.update_column("n", LongType())
    table = catalog.load_table("db.promoted")
    table.append(pa.table({"n": pa.array([4], pa.int64())}))
    assert _direct("db.promoted", table, ["n"]) == [None]


def test_a_column_added_later_goes_through_the_source(catalog: SqlCatalog) -> None:
    schema = Schema(NestedField(1, "k", LongType(), required=False))
    table = catalog.create_table("db.grown", schema=schema)
    table.append(pa.table({"k": pa.array([1, 2], pa.int64())}))
    with table.update_schema() as update:
        update.add_column("extra", StringType())
    table = catalog.load_table("db.grown")
    table.append(pa.table({"k": pa.array([3], pa.int64()), "extra": pa.array(["x"])}))
    assert _direct("db.grown", table, ["k", "extra"]) == [None]
    (got,) = _direct("db.grown", table, ["k"])
    assert got is not None and sorted(got["k"].to_pylist()) == sorted(table.scan().to_arrow()["k"].to_pylist()) == [1, 2, 3]


def test_a_missing_file_goes_through_the_source(catalog: SqlCatalog) -> None:
    """The source's reader, not this one, reports a missing data file."""
    schema = Schema(NestedField(1, "k", LongType(), required=False))
    table = catalog.create_table("db.missing", schema=schema)
    table.append(pa.table({"k": pa.array([1, 2], pa.int64())}))
    (path,) = [t.file.file_path for t in table.scan().plan_files()]
    Path(path.removeprefix("file://")).unlink()
    assert _direct("db.missing", table, ["k"]) == [None]
