"""Iceberg tables written with pyiceberg (SQL catalog on sqlite, local warehouse), analyzed
end to end on Ray.

The oracle is DuckDB over what pyiceberg itself returns for the same snapshot
(``table.scan(snapshot_id=...).to_arrow()``): every statistic of every column, at table
level and per partition, for the latest and an older snapshot, through appends, an
overwrite, a delete, an added column, a widened int and a partition spec change.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.expressions import EqualTo
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import (
    DateType,
    DoubleType,
    IntegerType,
    LongType,
    NestedField,
    StringType,
    TimestamptzType,
)

from engine.api import analyze, open_statistics
from engine.exceptions import (
    InvalidTableLayoutError,
    TableNotFoundError,
)
from engine.sources import TableFormat, detect_format, open_table, snapshots_since
from engine.sources.iceberg import IcebergSource
from tests.engine.sources.lake_helpers import (
    analyze_source,
    assert_analyze_refused,
    assert_bad_input_refused,
    assert_same_files,
    assert_same_statistics,
    batch,
    check_table,
    counting,
    reads,
)

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_runtime")]

SCHEMA = Schema(
    NestedField(1, "id", IntegerType(), required=False),
    NestedField(2, "part", LongType(), required=False),
    NestedField(3, "price", DoubleType(), required=False),
    NestedField(4, "city", StringType(), required=False),
    NestedField(5, "ts", TimestamptzType(), required=False),
    NestedField(6, "day", DateType(), required=False),
)
BY_PART = PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="part"))


def _catalog(root: Path) -> SqlCatalog:
    root.mkdir(parents=True, exist_ok=True)
    catalog = SqlCatalog("test", uri=f"sqlite:///{root}/catalog.db", warehouse=f"file://{root}/warehouse")
    catalog.create_namespace_if_not_exists("db")
    return catalog


def _arrow(t: pa.Table, schema: pa.Schema) -> pa.Table:
    return t.select(schema.names).cast(schema)


def _location(table) -> str:
    return table.location().removeprefix("file://")


def _partitions(data: pa.Table, key) -> dict[str, pa.Table]:
    return {key(v): data.filter(pc.equal(data["part"], v)) for v in pc.unique(data["part"]).to_pylist()}


@pytest.fixture(scope="module")
def history(tmp_path_factory: pytest.TempPathFactory):
    """Snapshots: append, append, overwrite of part=1, delete, (widen id, add column) append,
    (partition by city too) append. Returns (table, [snapshot ids])."""
    catalog = _catalog(tmp_path_factory.mktemp("iceberg"))
    table = catalog.create_table("db.orders", schema=SCHEMA, partition_spec=BY_PART)
    arrow = table.schema().as_arrow()
    table.append(_arrow(batch(3_000, seed=1), arrow))
    table.append(_arrow(batch(2_000, seed=2, start=3_000), arrow))
    part1 = batch(800, seed=3, start=10_000, parts=1).set_column(1, "part", pa.array([1] * 800, pa.int64()))
    table.overwrite(_arrow(part1, arrow), overwrite_filter=EqualTo("part", 1))
    table.delete("id < 1000 and price > 100")
    with table.update_schema() as update:
        update.update_column("id", LongType())
        update.add_column("note", StringType())
    table = catalog.load_table("db.orders")
    extra = batch(1_000, seed=4, start=20_000, id_type=pa.int64()).append_column("note", pa.array([f"n{i % 13}" for i in range(1_000)]))
    table.append(_arrow(extra, table.schema().as_arrow()))
    with table.update_spec() as spec:
        spec.add_identity("city")
    table = catalog.load_table("db.orders")
    more = batch(500, seed=5, start=30_000, id_type=pa.int64()).append_column("note", pa.nulls(500, pa.string()))
    table.append(_arrow(more, table.schema().as_arrow()))
    table = catalog.load_table("db.orders")
    return table, [s.snapshot_id for s in table.snapshots()]


def test_latest_snapshot_statistics_equal_duckdb_over_pyiceberg(history, tmp_path: Path) -> None:
    table, snapshots = history
    location = _location(table)
    assert detect_format(location) is TableFormat.ICEBERG
    store = str(tmp_path / "store")
    result = analyze(location, store=store, user_statistics=[])
    data = table.scan().to_arrow()
    assert result.snapshot == str(snapshots[-1]) and result.rows == data.num_rows
    check_table(store, "orders", data)
    ts = open_statistics(store, "orders")
    assert ts.column_type("id") == pa.int64()  # widened
    # partitions: one per partition of the old spec, one per (part, city) of the new spec
    keys = {p.key for p in ts.partitions()}
    assert "part=0" in keys and any(k.startswith("part=0/city=") for k in keys)
    source = open_table(location)
    for p in source.partitions():
        rows = sum(b.num_rows for b in source.read_batches(p, []))
        assert rows == next(q.rows for q in ts.partitions() if q.key == p.key)
    # per partition of the old spec: the rows of its files (those appended before the spec change)
    old_spec = table.scan(snapshot_id=snapshots[-2]).to_arrow()
    check_table(store, "orders", data, {f"part={v}": old_spec.filter(pc.equal(old_spec["part"], v)) for v in range(4)})


def test_older_snapshot_statistics_equal_duckdb_over_that_snapshot(history, tmp_path: Path) -> None:
    table, snapshots = history
    location = _location(table)
    store = str(tmp_path / "store")
    # after the overwrite and the delete, before the schema change: id is still int32
    result = analyze(location, store=store, user_statistics=[], at_snapshot=snapshots[3])
    data = table.scan(snapshot_id=snapshots[3]).to_arrow()
    assert result.snapshot == str(snapshots[3]) and result.rows == data.num_rows
    check_table(store, "orders", data, _partitions(data, lambda v: f"part={v}"))
    ts = open_statistics(store, "orders")
    assert ts.column_type("id") == pa.int32() and "note" not in ts.schema.names
    assert snapshots_since(location, str(snapshots[3])) == len(snapshots) - 4
    assert snapshots_since(location, str(snapshots[-1])) == 0


def test_catalog_table_by_pyiceberg_configuration(history, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    table, snapshots = history
    root = Path(_location(table)).parents[2]
    # pyiceberg's own configuration; the SQL catalog keeps its tables under its name ("test")
    monkeypatch.setenv("PYICEBERG_CATALOG__TEST__TYPE", "sql")
    monkeypatch.setenv("PYICEBERG_CATALOG__TEST__URI", f"sqlite:///{root}/catalog.db")
    monkeypatch.setenv("PYICEBERG_CATALOG__TEST__WAREHOUSE", f"file://{root}/warehouse")
    source = open_table("db.orders", catalog="test", at_snapshot=snapshots[0])
    assert isinstance(source, IcebergSource) and source.name == "orders" and source.snapshot_id() == str(snapshots[0])
    assert sum(sum(b.num_rows for b in source.read_batches(p, [])) for p in source.partitions()) == 3_000
    with pytest.raises(TableNotFoundError, match="no table"):
        open_table("db.nope", catalog="test")


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=st.lists(st.tuples(st.sampled_from(["append", "overwrite", "delete"]), st.integers(0, 3), st.integers(1, 200)), min_size=1, max_size=4))
def test_property_overwrite_and_delete_leave_no_removed_rows(tmp_path_factory: pytest.TempPathFactory, ops) -> None:
    catalog = _catalog(tmp_path_factory.mktemp("iprop"))
    table = catalog.create_table("db.t", schema=SCHEMA, partition_spec=BY_PART)
    arrow = table.schema().as_arrow()
    table.append(_arrow(batch(400, seed=0), arrow))
    start = 1_000
    for op, part, n in ops:
        if op == "append":
            table.append(_arrow(batch(n, seed=start, start=start), arrow))
        elif op == "overwrite":
            data = batch(n, seed=start, start=start, parts=1).set_column(1, "part", pa.array([part] * n, pa.int64()))
            table.overwrite(_arrow(data, arrow), overwrite_filter=EqualTo("part", part))
        else:
            table.delete(f"id < {start // 2 + n} and part = {part}")
        start += 1_000
    source = open_table(_location(table))
    live = table.scan().to_arrow()
    ids = [i for p in source.partitions() for b in source.read_batches(p, ["id"]) for i in b.column(0).to_pylist()]
    assert sorted(ids) == sorted(live["id"].to_pylist())


def test_reanalyze_after_an_append_reads_only_the_changed_partition(tmp_path: Path) -> None:
    catalog = _catalog(tmp_path / "cat")
    table = catalog.create_table("db.wide", schema=SCHEMA, partition_spec=BY_PART)
    arrow = table.schema().as_arrow()
    table.append(_arrow(batch(16_000, seed=5, parts=16), arrow))
    location = _location(table)
    # column bounds from the manifests equal the partitions' data (the histogram guess)
    source, data = IcebergSource(location), table.scan().to_arrow()
    for p in source.partitions()[:4]:
        rows = data.filter(pc.equal(data["part"], int(p.key.split("=")[1])))
        bounds = source.column_bounds(p, ["id", "part", "price", "ts", "day", "city"])
        assert "city" not in bounds  # strings: not from manifests (truncated there)
        for name in ("id", "part", "ts", "day"):
            assert bounds[name] == tuple(pc.min_max(rows[name]).values()), (p.key, name)
        finite = pc.filter(rows["price"], pc.invert(pc.is_nan(rows["price"])))
        assert bounds["price"] == tuple(pc.min_max(finite).values()), p.key
    store = str(tmp_path / "store")
    first_log = tmp_path / "reads-1"
    first = analyze_source(counting(IcebergSource(location), first_log), store)
    assert first.partitions == 16 and reads(first_log) == {f"part={i}" for i in range(16)}
    # rows inside the table's ranges: no histogram edge moves (no inherited partition re-binned)
    original = table.scan().to_arrow()
    table.append(original.filter(pc.equal(original["part"], 5)).slice(0, 300))
    log = tmp_path / "reads-2"
    second = analyze_source(counting(IcebergSource(location), log), store)
    assert reads(log) == {"part=5"}
    assert (second.inherited, second.recomputed, second.rebinned) == (15, 1, 0)
    full = str(tmp_path / "full")
    analyze_source(IcebergSource(location), full, inherit=False)
    assert_same_statistics(store, full, "wide")
    # every file, table level and per partition (but KLL's)
    assert_same_files(store, full, "wide")
    check_table(store, "wide", catalog.load_table("db.wide").scan().to_arrow())


def test_strings_stored_as_small_codes_come_as_codes_matched_by_field_id(tmp_path: Path) -> None:
    """The profile's dictionary hint: a string column every row group of a file stores as
    small dictionary codes comes as an Arrow dictionary (as from a Parquet directory), found
    by field id - after ``city`` is renamed ``town`` and a new ``city`` added, the old files'
    ``city`` is ``town``'s codes - with the values pyiceberg itself reads; and the analyze of
    the renamed table equals DuckDB over pyiceberg's scan."""
    catalog = _catalog(tmp_path / "cat")
    table = catalog.create_table("db.coded", schema=SCHEMA, partition_spec=BY_PART)
    table.append(_arrow(batch(4_000, seed=7), table.schema().as_arrow()))
    with table.update_schema() as update:
        update.rename_column("city", "town")
    with table.update_schema() as update:
        update.add_column("city", StringType())
    table = catalog.load_table("db.coded")
    later = batch(2_000, seed=8, start=4_000).rename_columns(["id", "part", "price", "town", "ts", "day"])
    later = later.append_column("city", pa.array([f"c{i % 7}" for i in range(2_000)]))
    table.append(_arrow(later, table.schema().as_arrow()))
    location = _location(table)
    source = open_table(location)
    expected = catalog.load_table("db.coded").scan().to_arrow()
    files = 0
    for p in source.partitions():
        batches = list(source.read_batches(p, ["id", "town", "city"], dictionary=["id", "town", "city"]))
        plain = pa.Table.from_batches(source.read_batches(p, ["id", "town", "city"]))
        assert all(not pa.types.is_dictionary(b.schema.field(n).type) for b in plain.to_batches() for n in plain.column_names)
        coded = [b for b in batches if pa.types.is_dictionary(b.schema.field("town").type)]
        assert len(coded) == len(batches), p.key  # old files' "city" is town by field id: coded too
        assert any(pa.types.is_dictionary(b.schema.field("city").type) for b in batches), p.key
        assert all(b.schema.field("id").type == pa.int64() or b.schema.field("id").type == pa.int32() for b in batches)
        decoded = pa.Table.from_batches(
            [
                pa.RecordBatch.from_arrays([c.cast(pa.string()) if pa.types.is_dictionary(c.type) else c for c in b.columns], names=b.schema.names)
                for b in batches
            ]
        )
        assert decoded.equals(plain), p.key
        rows = expected.filter(pc.equal(expected["part"], int(p.key.split("=")[1])))
        assert sorted(decoded["town"].to_pylist(), key=str) == sorted(rows["town"].to_pylist(), key=str)
        assert sorted(decoded["city"].to_pylist(), key=str) == sorted(rows["city"].to_pylist(), key=str)
        files += len(p.files)
    assert files == 8  # both appends' files in every partition
    store = str(tmp_path / "store")
    analyze(location, store=store, user_statistics=[])
    check_table(store, "coded", expected)


def test_bad_input_is_one_clear_error(history, tmp_path: Path) -> None:
    table, _ = history
    location = _location(table)
    assert_bad_input_refused(location, "iceberg", 12345, "snapshot 12345 does not exist", tmp_path)
    broken = tmp_path / "broken"
    shutil.copytree(location, broken)
    newest = max((broken / "metadata").glob("*.metadata.json"), key=lambda p: int(p.name.split("-")[0]))
    newest.write_text('{"format-version": 2, "table-uuid": ')
    with pytest.raises(InvalidTableLayoutError, match="Iceberg metadata .* unreadable"):
        open_table(str(broken))
    assert_analyze_refused(broken, tmp_path / "store")
