"""The file index through the CLI on every table format: `metastore analyze` builds it
(Parquet directories written by pandas, Iceberg tables written by pyiceberg, Hudi tables
written by Spark), a re-analyze with new `--bloom-columns` adds Bloom filters to the
inherited partitions' files too (and carries them over with the same options), and
`metastore files --where` keeps every data file the format's own reader finds a matching
row in (DuckDB over it), while pruning others."""

from __future__ import annotations

import json
import os
import shutil
import zipfile
from pathlib import Path

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner

from engine.cli.console import metastore

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_runtime")]

REPO = Path(__file__).resolve().parents[2]
HUDI = Path(os.environ.get("METASTORE_SHARED") or REPO.parent / "shared") / "lake-tables" / "hudi"


def _cli(*args: str) -> dict:
    r = CliRunner().invoke(metastore, [*args, "-o", "json"])
    assert r.exit_code == 0, r.output
    return json.loads(r.stdout)


def _analyze(table: Path | str, store: Path, *more: str) -> dict:
    return _cli("analyze", str(table), "--store", str(store), "--no-user-stats", *more)


def _files(name: str, store: Path, where: str) -> set[str]:
    return {f["path"] for f in _cli("files", name, "--store", str(store), "--where", where)["files"]}


def _index_dir(store: Path, name: str) -> str:
    from engine.lookup import open_statistics

    return open_statistics(str(store), name).file_index_directory()


def _bloom_rows(store: Path, name: str) -> list[tuple[str, int]]:
    t = pq.read_table(os.path.join(_index_dir(store, name), "file_blooms.parquet"))
    return sorted(zip(t.column("column").to_pylist(), t.column("file").to_pylist()))


# ---------------------------------------------------------------- Parquet directory (pandas)
def _pandas_partition(table: Path, p: int, start: int, salt: int = 0) -> None:
    d = table / f"p={p}"
    d.mkdir(parents=True, exist_ok=True)
    for f in range(2):
        ids = range(start + 100 * f, start + 100 * (f + 1))
        # names scattered over files: every file's [min, max] spans nearly all, only Bloom filters prune
        frame = pd.DataFrame({"id": list(ids), "name": [f"n{(i * 7919 + salt) % 1000:04d}" for i in ids]})
        frame.to_parquet(d / f"f{f}.parquet", engine="pyarrow", row_group_size=37, index=False)


def _holding(table: Path, name: str) -> set[str]:
    con = duckdb.connect()
    rows = con.execute(f"select distinct filename from read_parquet('{table}/*/*.parquet', filename=true) where name = ?", [name]).fetchall()
    return {r[0] for r in rows}


def _covering(table: Path, name: str) -> set[str]:
    """The files whose [min, max] of `name` holds ``name``."""
    con = duckdb.connect()
    sql = f"select filename from read_parquet('{table}/*/*.parquet', filename=true) group by filename having min(name) <= ? and max(name) >= ?"
    return {r[0] for r in con.execute(sql, [name, name]).fetchall()}


def test_bloom_columns_added_to_inherited_partitions_and_carried_over(tmp_path: Path) -> None:
    table, store = tmp_path / "t", tmp_path / "store"
    for p in range(4):
        _pandas_partition(table, p, 200 * p)
    names = [f"n{v:04d}" for v in (7, 233, 500, 999, 42)]
    _analyze(table, store)
    assert _bloom_rows(store, "t") == []  # off by default
    for n in names:
        assert _files("t", store, f"name = '{n}'") == _covering(table, n)  # the ranges prune only files outside [min, max]

    # the same partitions, now with Bloom filters: every inherited partition's files get them
    doc = _analyze(table, store, "--bloom-columns", "name")
    assert doc["inherited"] == 4 and doc["recomputed"] == 0
    assert _bloom_rows(store, "t") == [("name", i) for i in range(8)]
    kept_total = 0
    for n in names:
        holding, kept = _holding(table, n), _files("t", store, f"name = '{n}'")
        assert holding and holding <= kept, n
        kept_total += len(kept)
    assert kept_total < sum(len(_covering(table, n)) for n in names)  # the filters prune inside the ranges (1% false positives)
    before = {n: _files("t", store, f"name = '{n}'") for n in names}

    # the same options again: carried over
    doc = _analyze(table, store, "--bloom-columns", "name")
    assert doc["inherited"] == 4
    assert {n: _files("t", store, f"name = '{n}'") for n in names} == before

    # one partition changed: recomputed with filters, the others' carried
    _pandas_partition(table, 0, 0, salt=3)
    doc = _analyze(table, store, "--bloom-columns", "name")
    assert doc["inherited"] == 3 and doc["recomputed"] == 1
    assert _bloom_rows(store, "t") == [("name", i) for i in range(8)]
    for n in names:
        assert _holding(table, n) <= _files("t", store, f"name = '{n}'"), n

    # automatic Bloom columns (high-cardinality: id and name), chosen for inherited partitions from their statistics
    _analyze(table, store, "--bloom-columns", "auto")
    assert _bloom_rows(store, "t") == sorted([("id", i) for i in range(8)] + [("name", i) for i in range(8)])
    # none asked for: the filters are dropped, nothing read again
    doc = _analyze(table, store)
    assert doc["inherited"] == 4 and _bloom_rows(store, "t") == []
    assert _files("t", store, "name = 'n0500'") == _covering(table, "n0500")


def test_an_index_missing_from_the_earlier_state_is_built_for_inherited_partitions(tmp_path: Path) -> None:
    table, store = tmp_path / "t", tmp_path / "store"
    for p in range(3):
        _pandas_partition(table, p, 200 * p)
    _analyze(table, store, "--no-file-index")
    doc = _analyze(table, store)
    assert doc["inherited"] == 3
    con = duckdb.connect()
    holding = {
        r[0] for r in con.execute(f"select distinct filename from read_parquet('{table}/*/*.parquet', filename=true) where id = 250").fetchall()
    }
    assert len(holding) == 1 and _files("t", store, "id = 250") == holding


def test_files_without_an_index_names_the_flag(tmp_path: Path) -> None:
    table, store = tmp_path / "t", tmp_path / "store"
    _pandas_partition(table, 0, 0)
    _analyze(table, store, "--no-file-index")
    r = CliRunner().invoke(metastore, ["files", "t", "--store", str(store), "--where", "id = 1"])
    assert r.exit_code == 1
    line = r.stderr.strip()
    assert len(line.splitlines()) == 1 and "has no file index" in line and "--index DIR" in line and "index=DIRECTORY" not in line


# ---------------------------------------------------------------- Iceberg (pyiceberg)
@pytest.fixture(scope="module")
def iceberg_table(tmp_path_factory: pytest.TempPathFactory):
    """A pyiceberg table partitioned by `part`, 3 appends (3 data files a partition), `price`
    and `seq` renamed to `amount` and `pos` after the second (older files name them by their
    old names), and `id` with metrics mode `counts` (no bounds in the manifests: the footers
    give them), `small` an int widened to long before the third (older manifests hold
    4-byte bounds of it), and `added` a column added before the third (null in older files)."""
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.partitioning import PartitionField, PartitionSpec
    from pyiceberg.schema import Schema
    from pyiceberg.transforms import IdentityTransform
    from pyiceberg.types import DoubleType, IntegerType, LongType, NestedField, StringType

    root = tmp_path_factory.mktemp("iceberg")
    catalog = SqlCatalog("test", uri=f"sqlite:///{root}/catalog.db", warehouse=f"file://{root}/warehouse")
    catalog.create_namespace_if_not_exists("db")
    schema = Schema(
        NestedField(1, "id", LongType(), required=False),
        NestedField(2, "part", LongType(), required=False),
        NestedField(3, "price", DoubleType(), required=False),
        NestedField(4, "name", StringType(), required=False),
        NestedField(5, "seq", LongType(), required=False),
        NestedField(6, "small", IntegerType(), required=False),
    )
    spec = PartitionSpec(PartitionField(source_id=2, field_id=1000, transform=IdentityTransform(), name="part"))
    table = catalog.create_table("db.t", schema=schema, partition_spec=spec, properties={"write.metadata.metrics.column.id": "counts"})
    for k in range(3):
        ids = list(range(k * 1000, k * 1000 + 300))
        data = pa.table(
            {
                "id": pa.array(ids, pa.int64()),
                "part": pa.array([i % 2 for i in ids], pa.int64()),
                "price": pa.array([float(i % 97) + k * 1000 for i in ids], pa.float64()),
                "name": pa.array([f"n{(i * 7919) % 1000:04d}" for i in ids], pa.string()),
                "seq": pa.array([i // 10 for i in ids], pa.int64()),
                "small": pa.array([i // 7 for i in ids], pa.int64() if k == 2 else pa.int32()),
            }
        )
        if k == 2:
            with table.update_schema() as update:
                update.rename_column("price", "amount")
                update.rename_column("seq", "pos")
                update.update_column("small", LongType())
                update.add_column("added", LongType())
            data = data.rename_columns(["id", "part", "amount", "name", "pos", "small"])
            data = data.append_column("added", pa.array(ids, pa.int64()))
        table.append(data)
    return catalog.load_table("db.t"), root


def _iceberg_holding(table, where: str) -> tuple[set[str], set[str]]:
    """(every data file, those pyiceberg's own reader finds a row matching ``where`` in, by DuckDB)."""
    from pyiceberg.expressions import AlwaysTrue
    from pyiceberg.io.pyarrow import ArrowScan

    con = duckdb.connect()
    every, holding = set(), set()
    for task in table.scan().plan_files():
        rows = ArrowScan(table.metadata, table.io, table.schema(), AlwaysTrue()).to_table([task])
        every.add(task.file.file_path)
        con.register("f", rows)
        if con.execute(f"select count(*) from f where {where}").fetchall()[0][0]:
            holding.add(task.file.file_path)
        con.unregister("f")
    return every, holding


@pytest.mark.parametrize(
    "where",
    [
        "id = 1250",
        "id between 10 and 20",
        "pos >= 200",
        "pos < 5 and part = 1",
        "name = 'n0233'",
        "amount < 5 and pos > 150",
        "small = 150",
        "added = 2005",
        "added is null",
    ],
)
def test_iceberg_files_keep_every_file_holding_a_match(iceberg_table, tmp_path: Path, where: str) -> None:
    table, _ = iceberg_table
    store = tmp_path / "store"
    location = table.location().removeprefix("file://")
    _analyze(location, store, "--bloom-columns", "name")
    every, holding = _iceberg_holding(table, where)
    kept = _files("t", store, where)
    assert len(every) == 6 and kept <= every
    assert holding <= kept, where
    assert len(kept) < len(every), where  # pruned: manifests' bounds (pos), footers' (id), Bloom filters (name)
    if where.startswith("added"):  # the four older files do not hold the column: null in every row
        assert len(kept) == (4 if where == "added is null" else 2) and (where != "added is null" or kept == holding)


def test_iceberg_index_comes_from_manifests_and_footers_by_field_id(iceberg_table, tmp_path: Path) -> None:
    from engine.fileindex.plan import open_file_index
    from engine.lookup import open_statistics

    table, _ = iceberg_table
    store = tmp_path / "store"
    location = table.location().removeprefix("file://")
    _analyze(location, store)
    ts = open_statistics(str(store), "t")
    index = open_file_index(ts.file_index_directory())
    ranges = pq.read_table(os.path.join(ts.file_index_directory(), "file_ranges.parquet")).to_pylist()
    paths = pq.read_table(os.path.join(ts.file_index_directory(), "file_index.parquet")).column("path").to_pylist()
    # each file's bounds equal the ones of pyiceberg's read of it (ids: from the footers; amount: renamed, by field id)
    from pyiceberg.expressions import AlwaysTrue
    from pyiceberg.io.pyarrow import ArrowScan

    covering = set()
    for task in table.scan().plan_files():
        rows = ArrowScan(table.metadata, table.io, table.schema(), AlwaysTrue()).to_table([task])
        if min(rows["id"].to_pylist()) <= 1001 <= max(rows["id"].to_pylist()):
            covering.add(task.file.file_path)
        fid = paths.index(task.file.file_path)
        got = {r["column"]: r for r in ranges if r["file"] == fid}
        assert (got["id"]["min_int"], got["id"]["max_int"]) == (min(rows["id"].to_pylist()), max(rows["id"].to_pylist()))
        assert (got["amount"]["min_float"], got["amount"]["max_float"]) == (min(rows["amount"].to_pylist()), max(rows["amount"].to_pylist()))
        assert (got["pos"]["min_int"], got["pos"]["max_int"]) == (min(rows["pos"].to_pylist()), max(rows["pos"].to_pylist()))
        assert got["id"]["null_count"] == 0 and got["id"]["bounded"]
    # the index alone (no partition statistics): the files whose id range holds 1001 (the second append's two)
    plan = index.plan(ts.bind("id = 1001"))
    assert set(plan.paths()) == covering and len(covering) == 2


# ---------------------------------------------------------------- Hudi (Spark-written tables)
HUDI_TABLES = {
    "cow/v8_complexkeygen_hivestyle": "intField",
    "parquet/v6_simplekeygen_nonhivestyle": "intField",
    "avro/v6_trips_8i3d": "fare",
}


def _hudi_zip(name: str) -> Path | None:
    kind, stem = name.split("/")
    found = sorted(HUDI.rglob(f"{kind}/{stem}.zip")) if HUDI.is_dir() else []
    return found[0] if found else None


@pytest.mark.parametrize("name", sorted(HUDI_TABLES))
def test_hudi_files_keep_every_slice_holding_a_match(name: str, tmp_path: Path) -> None:
    import hudi

    from engine.fileindex.plan import open_file_index
    from engine.lookup import open_statistics

    zipped = _hudi_zip(name)
    if zipped is None:
        pytest.skip(f"the shared Hudi table {name} is not under {HUDI}")
    with zipfile.ZipFile(zipped) as z:
        z.extractall(tmp_path)
    shutil.rmtree(tmp_path / "__MACOSX", ignore_errors=True)
    path = tmp_path / zipped.stem
    store = tmp_path / "store"
    _analyze(path, store, "--name", "h")
    ts = open_statistics(str(store), "h")
    index = open_file_index(ts.file_index_directory())
    column = HUDI_TABLES[name]

    # the oracle: hudi-rs's own read of each file slice (log files merged), DuckDB over it
    hudi_table = hudi.HudiTableBuilder.from_base_uri(str(path)).build()
    reader = hudi_table.create_file_group_reader_with_options()
    con = duckdb.connect()
    slices = {}
    for s in hudi_table.get_file_slices():
        got = reader.read_file_slice_from_paths(s.base_file_relative_path(), list(s.log_files_relative_paths()))
        rows = pa.Table.from_batches(got if isinstance(got, list) else [got])
        slices[f"{path}/{s.base_file_relative_path()}"] = (rows, bool(s.log_files_relative_paths()))
    values = sorted({v for rows, _ in slices.values() for v in rows.column(column).to_pylist() if v is not None})
    pruned_somewhere = False
    for v in (values[0], values[len(values) // 2], values[-1]):
        where = f"{column} = {v}"
        holding = set()
        for p, (rows, _) in slices.items():
            con.register("f", rows)
            if con.execute(f"select count(*) from f where {where}").fetchall()[0][0]:
                holding.add(p)
            con.unregister("f")
        kept_cli = _files("h", store, where)
        kept_index = set(index.plan(ts.bind(where)).paths())  # the index alone, without the partitions' statistics
        assert holding <= kept_cli and holding <= kept_index, where
        assert {p for p, (_, logs) in slices.items() if logs} <= kept_index  # a slice with log files: no statistics
        pruned_somewhere |= len(kept_index) < len(slices)
    assert set(index.plan(ts.bind(f"{column} is not null")).paths()) <= set(slices)
    assert pruned_somewhere
    # the table form: a slice without statistics shows its rows as unknown
    r = CliRunner().invoke(metastore, ["files", "h", "--store", str(store), "--where", f"{column} is not null"])
    assert r.exit_code == 0, r.output
    assert ("?" in r.stdout) == any(logs for _, logs in slices.values())


def test_iceberg_manifest_entries_give_bounds_by_field_id(iceberg_table) -> None:
    """The manifest path alone (no footer): bounds of a renamed column and of an int widened to
    long (4-byte bounds in the older manifests) equal pyiceberg's read of each file; a column
    with metrics mode `counts` has counts and no bounds (the footer then gives them)."""
    from pyiceberg.expressions import AlwaysTrue
    from pyiceberg.io.pyarrow import ArrowScan

    from engine.columns import LeafColumn
    from engine.fileindex.iceberg import manifest_column_stats
    from engine.values import decode

    table, _ = iceberg_table
    schema = table.schema()
    for task in table.scan().plan_files():
        rows = ArrowScan(table.metadata, table.io, schema, AlwaysTrue()).to_table([task])
        for name in ("pos", "small", "amount", "name"):
            t = rows.schema.field(name).type
            t = pa.string() if t == pa.large_string() else t
            field = schema.find_field(name)
            got = manifest_column_stats(task.file, LeafColumn(name, name, (), t), field.field_id, field.field_type)
            assert got is not None and got.bounded and got.nulls == 0, name
            values = rows.column(name).to_pylist()
            lo, hi = decode(pa.array([got.lower, got.upper]), t).to_pylist()
            assert lo <= min(values) and max(values) <= hi, name
            if name != "name":  # strings may be truncated (still bounds); the others are exact
                assert (lo, hi) == (min(values), max(values)), name
        field = schema.find_field("id")
        counts_only = manifest_column_stats(task.file, LeafColumn("id", "id", (), pa.int64()), field.field_id, field.field_type)
        assert counts_only is not None and not counts_only.bounded and counts_only.nulls == 0


# ---------------------------------------------------------------- on S3 (moto)
def test_iceberg_and_hudi_file_indexes_on_s3(s3_server: str, tmp_path: Path) -> None:
    """The manifests, footers and Bloom values read through the object store, the store on it too."""
    import pyarrow.fs as pafs
    from pyiceberg.catalog.sql import SqlCatalog

    from engine import fileio

    catalog = SqlCatalog("s3fi", uri=f"sqlite:///{tmp_path}/catalog.db", warehouse="s3://bucket/fi", **fileio.pyiceberg_properties("s3://bucket"))
    catalog.create_namespace("db")
    table = catalog.create_table("db.s3t", schema=pa.schema([("id", pa.int64()), ("name", pa.string())]))
    for k in range(3):
        ids = list(range(k * 100, k * 100 + 100))
        table.append(pa.table({"id": pa.array(ids, pa.int64()), "name": [f"n{(i * 7919) % 1000:04d}" for i in ids]}))
    store = "s3://bucket/fistore"
    _cli("analyze", table.location(), "--store", store, "--no-user-stats", "--bloom-columns", "name")
    for where in ("id = 150", "name = 'n0233'"):
        every, holding = _iceberg_holding(catalog.load_table("db.s3t"), where)
        kept = {f["path"] for f in _cli("files", "s3t", "--store", store, "--where", where)["files"]}
        assert holding and holding <= kept and len(kept) < len(every) == 3, where

    zipped = _hudi_zip("avro/v6_trips_8i3d")
    if zipped is None:
        pytest.skip(f"the shared Hudi tables are not under {HUDI}")
    with zipfile.ZipFile(zipped) as z:
        z.extractall(tmp_path)
    fs, path = fileio.resolve("s3://bucket/fi/trips")
    pafs.copy_files(str(tmp_path / zipped.stem), path, source_filesystem=pafs.LocalFileSystem(), destination_filesystem=fs)
    _cli("analyze", "s3://bucket/fi/trips", "--store", store, "--no-user-stats")
    files = _cli("files", "trips", "--store", store, "--where", "fare is not null")["files"]
    assert len(files) == 3 and all(f["path"].startswith("bucket/fi/trips/city=") for f in files)
    # the base files' footers read from the object store; the one slice with a log file has no statistics
    assert sorted(f["rows"] is None for f in files) == [False, False, True]
