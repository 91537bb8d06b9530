"""metastore publish / analyze --publish: statistics written into an Iceberg table's metadata.

Oracles: the Puffin file is parsed by a reader written here from the spec (not our writer's
code); theta blobs by DataSketches' own deserializer and union; hashes by ``mmh3`` of the
Java serialization packed here with ``struct``; distinct counts and partition counts by DuckDB
over pyiceberg's scan; the table's metadata by pyiceberg after a reload.
"""

from __future__ import annotations

import datetime as dt
import json
import struct
from decimal import Decimal
from pathlib import Path

import datasketches as ds
import duckdb
import mmh3
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from pyiceberg.catalog.sql import SqlCatalog
from pyiceberg.partitioning import PartitionField, PartitionSpec
from pyiceberg.schema import Schema
from pyiceberg.transforms import IdentityTransform
from pyiceberg.types import (
    DateType,
    DecimalType,
    DoubleType,
    IntegerType,
    LongType,
    NestedField,
    StringType,
    TimestampType,
)

from engine.cli.console import metastore

CATALOG = "pubtest"
SCHEMA = Schema(
    NestedField(1, "id", LongType(), required=False),
    NestedField(2, "n", IntegerType(), required=False),
    NestedField(3, "x", DoubleType(), required=False),
    NestedField(4, "s", StringType(), required=False),
    NestedField(5, "d", DateType(), required=False),
    NestedField(6, "ts", TimestampType(), required=False),
    NestedField(7, "amount", DecimalType(10, 2), required=False),
    NestedField(8, "part", StringType(), required=False),
)
BY_PART = PartitionSpec(PartitionField(source_id=8, field_id=1000, transform=IdentityTransform(), name="part"))
THETA = "apache-datasketches-theta-v1"


def _rows(start: int, n: int) -> pa.Table:
    ids = list(range(start, start + n))
    return pa.table(
        {
            "id": pa.array([i if i % 17 else None for i in ids], pa.int64()),
            "n": pa.array([(i * 7) % 113 - 50 for i in ids], pa.int32()),
            "x": pa.array([round((i % 97) * 0.25 - 3, 2) if i % 11 else None for i in ids], pa.float64()),
            "s": pa.array([f"v{(i * 13) % 301}é" for i in ids], pa.string()),
            "d": pa.array([dt.date(2024, 1, 1) + dt.timedelta(days=i % 45) for i in ids], pa.date32()),
            "ts": pa.array([dt.datetime(2024, 1, 1) + dt.timedelta(seconds=(i % 600) * 37) for i in ids], pa.timestamp("us")),
            "amount": pa.array([Decimal(((i * 31) % 2000) - 1000) / 100 for i in ids], pa.decimal128(10, 2)),
            "part": pa.array([("a", "b", "c")[i % 3] for i in ids], pa.string()),
        }
    )


def _cli(*args: str):
    return CliRunner().invoke(metastore, list(args))


@pytest.fixture(scope="module")
def env(ray_runtime: None, tmp_path_factory: pytest.TempPathFactory):
    root = tmp_path_factory.mktemp("publish")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(f"PYICEBERG_CATALOG__{CATALOG.upper()}__TYPE", "sql")
        mp.setenv(f"PYICEBERG_CATALOG__{CATALOG.upper()}__URI", f"sqlite:///{root}/catalog.db")
        mp.setenv(f"PYICEBERG_CATALOG__{CATALOG.upper()}__WAREHOUSE", f"file://{root}/warehouse")
        catalog = SqlCatalog(CATALOG, uri=f"sqlite:///{root}/catalog.db", warehouse=f"file://{root}/warehouse")
        catalog.create_namespace_if_not_exists("db")
        table = catalog.create_table("db.events", schema=SCHEMA, partition_spec=BY_PART)
        table.append(_rows(0, 2_000))
        store = str(root / "store")
        r = _cli("analyze", "db.events", "--catalog", CATALOG, "--publish", "--store", store)
        assert r.exit_code == 0, r.output
        yield {"root": root, "catalog": catalog, "store": store, "output": r.output}


def _table(env):
    return env["catalog"].load_table("db.events")


# ------------------------------------------------------------- a Puffin reader from the spec
def _read_puffin(path: str) -> tuple[dict, dict[int, bytes]]:
    """(file metadata, blob index -> uncompressed bytes), straight from the spec's layout."""
    data = Path(path.removeprefix("file://")).read_bytes()
    assert data[:4] == b"PFA1" and data[-4:] == b"PFA1"
    payload_size, flags = struct.unpack("<iI", data[-12:-4])
    assert flags & 1 == 0  # footer payload not compressed
    footer_start = len(data) - 12 - payload_size - 4
    assert data[footer_start : footer_start + 4] == b"PFA1"
    meta = json.loads(data[footer_start + 4 : footer_start + 4 + payload_size].decode("utf-8"))
    blobs = {}
    for i, b in enumerate(meta["blobs"]):
        raw = data[b["offset"] : b["offset"] + b["length"]]
        if b.get("compression-codec") == "zstd":
            # a zstd frame with its content size (the frame header says how many bytes it holds)
            import zstandard

            raw = zstandard.ZstdDecompressor().decompress(raw)
        blobs[i] = raw
    return meta, blobs


def _live(env) -> pa.Table:
    return _table(env).scan().to_arrow()


def test_statistics_entries_for_the_current_snapshot(env) -> None:
    table = _table(env)
    sid = table.current_snapshot().snapshot_id
    stats = [s for s in table.metadata.statistics if s.snapshot_id == sid]
    parts = [s for s in table.metadata.partition_statistics if s.snapshot_id == sid]
    assert len(stats) == 1 and len(parts) == 1
    entry = stats[0]
    assert entry.statistics_path.startswith(table.location().rstrip("/") + "/metadata/")
    size = Path(entry.statistics_path.removeprefix("file://")).stat().st_size
    assert entry.file_size_in_bytes == size
    meta, _ = _read_puffin(entry.statistics_path)
    # the footer's size: both magics, payload, size and flags
    assert entry.file_footer_size_in_bytes == 4 + len(json.dumps(meta, separators=(",", ":"))) + 12
    assert {tuple(b.fields) for b in entry.blob_metadata} == {(f.field_id,) for f in SCHEMA.fields}
    assert all(b.type == THETA and b.snapshot_id == sid for b in entry.blob_metadata)
    assert "published the statistics" in env["output"]


def test_theta_blobs_hold_the_distinct_values(env) -> None:
    table = _table(env)
    sid = table.current_snapshot().snapshot_id
    entry = next(s for s in table.metadata.statistics if s.snapshot_id == sid)
    meta, blobs = _read_puffin(entry.statistics_path)
    assert meta["properties"]["created-by"]
    names = {f.field_id: f.name for f in SCHEMA.fields}
    con = duckdb.connect()
    con.register("live", _live(env))
    table_ndv = {b.fields[0]: int(b.properties["ndv"]) for b in entry.blob_metadata}
    theta = [(i, b) for i, b in enumerate(meta["blobs"]) if b["type"] == THETA]
    assert len(theta) == len(SCHEMA.fields)
    for i, b in theta:
        assert b["snapshot-id"] == sid and b["sequence-number"] == table.current_snapshot().sequence_number
        assert b["compression-codec"] == "zstd"
        column = names[b["fields"][0]]
        expected = con.execute(f'SELECT count(DISTINCT "{column}") FROM live').fetchone()[0]
        sketch = ds.compact_theta_sketch.deserialize(blobs[i])
        assert not sketch.is_estimation_mode()
        assert sketch.get_estimate() == expected == int(b["properties"]["ndv"]) == table_ndv[b["fields"][0]], column
    other = {b["type"] for b in meta["blobs"]} - {THETA}
    assert other == {"metastore-kll-v1", "metastore-histogram-v1", "metastore-frequencies-v1"}


def _java_bytes(value, kind: str) -> bytes:
    """Iceberg's single-value serialization, packed here (Conversions.toByteBuffer)."""
    if kind in ("int", "date"):
        return struct.pack("<i", value if kind == "int" else (value - dt.date(1970, 1, 1)).days)
    if kind == "timestamp":
        return struct.pack("<q", (value - dt.datetime(1970, 1, 1)) // dt.timedelta(microseconds=1))
    if kind == "double":
        return struct.pack("<d", value)
    if kind == "decimal":
        unscaled = int(value.scaleb(2))
        return unscaled.to_bytes((unscaled if unscaled >= 0 else ~unscaled).bit_length() // 8 + 1, "big", signed=True)
    raise AssertionError(kind)


@pytest.mark.parametrize("column,kind", [("n", "int"), ("d", "date"), ("ts", "timestamp"), ("x", "double"), ("amount", "decimal")])
def test_hashes_are_icebergs_serialization(env, column: str, kind: str) -> None:
    table = _table(env)
    entry = next(s for s in table.metadata.statistics if s.snapshot_id == table.current_snapshot().snapshot_id)
    meta, blobs = _read_puffin(entry.statistics_path)
    fid = next(f.field_id for f in SCHEMA.fields if f.name == column)
    i = next(i for i, b in enumerate(meta["blobs"]) if b["type"] == THETA and b["fields"] == [fid])
    values = {v for v in _live(env)[column].to_pylist() if v is not None}
    expected = {mmh3.hash64(_java_bytes(v, kind), seed=9001, signed=False)[0] >> 1 for v in values}
    assert set(ds.compact_theta_sketch.deserialize(blobs[i])) == expected


@pytest.mark.parametrize("column", ["id", "s"])
def test_union_with_datasketches_own_sketch_does_not_double_count(env, column: str) -> None:
    table = _table(env)
    entry = next(s for s in table.metadata.statistics if s.snapshot_id == table.current_snapshot().snapshot_id)
    meta, blobs = _read_puffin(entry.statistics_path)
    fid = next(f.field_id for f in SCHEMA.fields if f.name == column)
    i = next(i for i, b in enumerate(meta["blobs"]) if b["type"] == THETA and b["fields"] == [fid])
    values = [v for v in _live(env)[column].to_pylist() if v is not None]
    more = [v + 10_000_000 for v in values[:50]] if column == "id" else [v + "-new" for v in values[:50]]
    theirs = ds.update_theta_sketch(12, 1.0, 9001)
    for v in values + more:  # update(int): an 8-byte long; update(str): UTF-8, Iceberg's serialization
        theirs.update(v)
    union = ds.theta_union(12, 1.0, 9001)
    union.update(ds.compact_theta_sketch.deserialize(blobs[i]))
    union.update(theirs.compact())
    assert union.get_result().get_estimate() == len(set(values) | set(more))


def test_partition_statistics_file(env) -> None:
    table = _table(env)
    sid = table.current_snapshot().snapshot_id
    entry = next(s for s in table.metadata.partition_statistics if s.snapshot_id == sid)
    path = entry.statistics_path.removeprefix("file://")
    assert Path(path).stat().st_size == entry.file_size_in_bytes
    got = pq.read_table(path)
    ids = {f.name: int(f.metadata[b"PARQUET:field_id"]) for f in got.schema}
    assert ids["partition"] == 1 and ids["spec_id"] == 2 and ids["data_record_count"] == 3 and ids["last_updated_snapshot_id"] == 12
    assert int(got.schema.field("partition").type.field("part").metadata[b"PARQUET:field_id"]) == 1000
    con = duckdb.connect()
    con.register("live", _live(env))
    expected = dict(con.execute("SELECT part, count(*) FROM live GROUP BY part").fetchall())
    files = table.inspect.files().to_pylist()
    rows = got.to_pylist()
    assert {r["partition"]["part"]: r["data_record_count"] for r in rows} == expected
    assert sum(r["data_file_count"] for r in rows) == len(files)
    assert sum(r["total_data_file_size_in_bytes"] for r in rows) == sum(f["file_size_in_bytes"] for f in files)
    assert all(r["last_updated_snapshot_id"] == sid and r["last_updated_at"] == table.current_snapshot().timestamp_ms for r in rows)


def test_append_then_publish_adds_the_new_snapshot_and_keeps_the_old(env) -> None:
    table = _table(env)
    first = table.current_snapshot().snapshot_id
    table.append(_rows(2_000, 500))
    table = _table(env)
    second = table.current_snapshot().snapshot_id
    snapshots = [s.snapshot_id for s in table.snapshots()]
    r = _cli("analyze", "db.events", "--catalog", CATALOG, "--publish", "--store", env["store"], "--output", "json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)  # one document: the analyze's, with what was published
    assert doc["snapshot"] == str(second) and doc["published"]["snapshot_id"] == second
    # the double (zeros among its values: the store hashes -0.0 as 0.0) is read from the data;
    # the long and the timestamp take the store's own sketch (hashed as Iceberg does), the
    # other discrete columns' distinct values come from the store's complete frequencies
    assert "x" in set(doc["published"]["read_from_data"])
    assert not {"id", "ts", "s", "n", "d", "part"} & set(doc["published"]["read_from_data"])
    table = _table(env)
    assert [s.snapshot_id for s in table.snapshots()] == snapshots  # publishing created no snapshot
    assert {s.snapshot_id for s in table.metadata.statistics} == {first, second}
    assert {s.snapshot_id for s in table.metadata.partition_statistics} == {first, second}
    entry = next(s for s in table.metadata.statistics if s.snapshot_id == second)
    con = duckdb.connect()
    con.register("live", _live(env))
    for b in entry.blob_metadata:
        column = next(f.name for f in SCHEMA.fields if f.field_id == b.fields[0])
        assert int(b.properties["ndv"]) == con.execute(f'SELECT count(DISTINCT "{column}") FROM live').fetchone()[0], column
    # publish alone, again: the same snapshot's entry replaced, no snapshot created
    r = _cli("publish", "db.events", "--catalog", CATALOG, "--store", env["store"])
    assert r.exit_code == 0, r.output
    table = _table(env)
    assert [s.snapshot_id for s in table.snapshots()] == snapshots
    assert sorted(s.snapshot_id for s in table.metadata.statistics) == sorted([first, second])


def test_expire_and_gc_leave_the_tables_statistics_files(env) -> None:
    table = _table(env)
    named = [s.statistics_path for s in table.metadata.statistics] + [s.statistics_path for s in table.metadata.partition_statistics]
    for args in (("expire", "events", "--keep-last", "1", "--grace-period", "0s"), ("gc", "events", "--grace-period", "0")):
        r = _cli(*args, "--store", env["store"])
        assert r.exit_code == 0, r.output
    assert named and all(Path(p.removeprefix("file://")).exists() for p in named)


def test_commit_over_a_concurrent_commit(env, monkeypatch: pytest.MonkeyPatch) -> None:
    from pyiceberg.exceptions import CommitFailedException

    from engine.publish import commit

    stale = _table(env)  # loaded before another writer commits
    sid = stale.current_snapshot().snapshot_id
    entry = next(s for s in stale.metadata.statistics if s.snapshot_id == sid)
    part = next(s for s in stale.metadata.partition_statistics if s.snapshot_id == sid)
    blobs = [b.model_dump(by_alias=True) for b in entry.blob_metadata]
    args = (
        "db.events", sid, entry.statistics_path, entry.file_size_in_bytes, entry.file_footer_size_in_bytes, blobs,
        part.statistics_path, part.file_size_in_bytes,
    )  # fmt: skip
    _table(env).transaction().set_properties({"written.by": "someone else"}).commit_transaction()
    # the SQL catalog applies a metadata-only update to its current metadata: one attempt
    assert commit._commit(stale, *args) == 1
    # a commit that loses the race (another writer between the catalog's read and its swap;
    # a REST catalog's 409) is refused once: the table is reloaded and the commit made again
    real = stale.catalog.commit_table
    refused = []

    def race(table, requirements, updates):  # type: ignore[no-untyped-def]
        if not refused:
            refused.append(True)
            _table(env).transaction().set_properties({"written.by": "a racer"}).commit_transaction()
            raise CommitFailedException("metadata location changed")
        return real(table, requirements, updates)

    monkeypatch.setattr(stale.catalog, "commit_table", race)
    assert commit._commit(stale, *args) == 2
    table = _table(env)
    assert table.properties["written.by"] == "a racer"  # the other commits kept
    assert [s.statistics_path for s in table.metadata.statistics if s.snapshot_id == sid] == [entry.statistics_path]


def test_a_commit_refused_every_time_leaves_the_metadata_and_no_files(env, monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    from pyiceberg.exceptions import CommitFailedException

    from engine.exceptions import CommitConflictError
    from engine.publish import commit

    table = _table(env)
    sid = table.current_snapshot().snapshot_id
    before = sorted(s.statistics_path for s in table.metadata.statistics)
    entry = next(s for s in table.metadata.statistics if s.snapshot_id == sid)
    part = next(s for s in table.metadata.partition_statistics if s.snapshot_id == sid)
    copies = []
    for p in (entry.statistics_path, part.statistics_path):
        local = p.removeprefix("file://")
        shutil.copy(local, local + ".copy")
        copies.append(local + ".copy")

    def refuse(table, requirements, updates):  # type: ignore[no-untyped-def]
        raise CommitFailedException("metadata location changed")

    monkeypatch.setattr(table.catalog, "commit_table", refuse)
    blobs = [b.model_dump(by_alias=True) for b in entry.blob_metadata]
    with pytest.raises(CommitConflictError, match="publish again"):
        commit._commit(table, "db.events", sid, "file://" + copies[0], entry.file_size_in_bytes, entry.file_footer_size_in_bytes, blobs,
                       "file://" + copies[1], part.file_size_in_bytes)  # fmt: skip
    assert not any(Path(c).exists() for c in copies)
    assert sorted(s.statistics_path for s in _table(env).metadata.statistics) == before


def test_a_table_opened_by_location_is_one_line_naming_the_catalog(env) -> None:
    location = _table(env).location().removeprefix("file://")
    for args in (("publish", location), ("analyze", location, "--publish")):
        r = _cli(*args, "--store", env["store"])
        assert r.exit_code != 0
        lines = [line for line in r.output.splitlines() if line.strip()]
        assert len(lines) == 1 and "--catalog NAME" in lines[0] and "Traceback" not in r.output, r.output


def test_unknown_store_table_is_one_line(env) -> None:
    r = _cli("publish", "db.events", "--catalog", CATALOG, "--name", "nothing_here", "--store", env["store"])
    assert r.exit_code != 0 and "Traceback" not in r.output and len(r.output.strip().splitlines()) == 1, r.output


def test_unpartitioned_table_gets_statistics_and_no_partition_file(env) -> None:
    """An unpartitioned table: the Puffin statistics only (Iceberg writes no partition
    statistics for it); mostly-distinct columns read from the data, every value hashed:
    ndv and sketches against DuckDB."""
    catalog = env["catalog"]
    schema = Schema(NestedField(1, "k", LongType(), required=False), NestedField(2, "s", StringType(), required=False))
    table = catalog.create_table("db.flat", schema=schema)
    n = 6000
    rows = pa.table(
        {
            "k": pa.array([i * 7919 % 10007 if i % 5 else None for i in range(n)], pa.int64()),
            "s": pa.array(["" if i % 97 == 0 else f"w{i % 5003}" for i in range(n)], pa.string()),
        }
    )
    table.append(rows.slice(0, n // 2))
    table.append(rows.slice(n // 2))
    r = _cli("analyze", "db.flat", "--catalog", CATALOG, "--publish", "--store", env["store"], "--output", "json")
    assert r.exit_code == 0, r.output
    table = catalog.load_table("db.flat")
    sid = table.current_snapshot().snapshot_id
    assert [s.snapshot_id for s in table.metadata.statistics] == [sid] and table.metadata.partition_statistics == []
    entry = table.metadata.statistics[0]
    meta, blobs = _read_puffin(entry.statistics_path)
    con = duckdb.connect()
    con.register("live", table.scan().to_arrow())
    for i, b in enumerate(meta["blobs"]):
        if b["type"] != THETA:
            continue
        column = {1: "k", 2: "s"}[b["fields"][0]]
        distinct = con.execute(f"SELECT count(DISTINCT {column}) FROM live").fetchone()[0]
        hashed = con.execute(f"SELECT count(DISTINCT {column}) FROM live WHERE {column}::VARCHAR <> ''").fetchone()[0]
        assert int(b["properties"]["ndv"]) == distinct, column
        sketch = ds.compact_theta_sketch.deserialize(blobs[i])
        assert sketch.get_estimate() == hashed, column  # the empty string is not hashed
        expected = {mmh3.hash64(_java_bytes_flat(v), seed=9001, signed=False)[0] >> 1 for v in rows[column].to_pylist() if v not in (None, "")}
        assert set(sketch) == expected, column
    con.close()
    text = _cli("publish", "db.flat", "--catalog", CATALOG, "--store", env["store"])
    assert text.exit_code == 0, text.output
    assert "partition statistics  none (the table is unpartitioned)" in text.output, text.output


def _java_bytes_flat(value: object) -> bytes:
    return value.encode() if isinstance(value, str) else struct.pack("<q", value)


def test_sketches_taken_from_the_store_are_those_of_the_values_read(env, monkeypatch: pytest.MonkeyPatch) -> None:
    """Columns whose store sketch hashes as Iceberg does (long, string, timestamp, a double
    with no NaN or zero) are published from it, without reading the data: byte for byte the
    theta blobs of the same publish with every column's values read and hashed."""
    from engine.publish import commit, iceberg_theta

    catalog = env["catalog"]
    schema = Schema(
        NestedField(1, "k", LongType(), required=False),
        NestedField(2, "s", StringType(), required=False),
        NestedField(3, "ts", TimestampType(), required=False),
        NestedField(4, "x", DoubleType(), required=False),
        NestedField(5, "part", StringType(), required=False),
    )
    spec = PartitionSpec(PartitionField(source_id=5, field_id=1000, transform=IdentityTransform(), name="part"))
    table = catalog.create_table("db.wide", schema=schema, partition_spec=spec)
    n = 12_000
    table.append(
        pa.table(
            {
                "k": pa.array([i * 7919 if i % 13 else None for i in range(n)], pa.int64()),
                "s": pa.array([f"w{i % 9_500}" if i % 41 else "" for i in range(n)], pa.string()),
                "ts": pa.array([dt.datetime(2024, 1, 1) + dt.timedelta(seconds=i * 3) for i in range(n)], pa.timestamp("us")),
                "x": pa.array([0.5 + i % 8_000 for i in range(n)], pa.float64()),
                "part": pa.array([("a", "b", "c")[i % 3] for i in range(n)], pa.string()),
            }
        )
    )
    r = _cli("analyze", "db.wide", "--catalog", CATALOG, "--store", env["store"])
    assert r.exit_code == 0, r.output

    def theta_blobs(published: commit.Published) -> dict[int, bytes]:
        meta, blobs = _read_puffin(published.statistics_path)
        return {b["fields"][0]: blobs[i] for i, b in enumerate(meta["blobs"]) if b["type"] == THETA}

    from_store = commit.publish(env["store"], "db.wide", CATALOG)
    assert not {"k", "s", "ts", "x"} & set(from_store.read_from_data)
    monkeypatch.setattr(iceberg_theta, "from_store_sketch", lambda kind, row: None)
    read = commit.publish(env["store"], "db.wide", CATALOG)
    assert {"k", "s", "ts", "x"} <= set(read.read_from_data)
    assert theta_blobs(from_store) == theta_blobs(read)
    assert from_store.ndv == read.ndv
    con = duckdb.connect()
    con.register("live", catalog.load_table("db.wide").scan().to_arrow())
    for column in ("k", "s", "ts", "x"):
        assert from_store.ndv[column] == con.execute(f"SELECT count(DISTINCT {column}) FROM live").fetchone()[0], column
    con.close()
