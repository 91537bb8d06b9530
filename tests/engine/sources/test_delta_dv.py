"""Delta deletion vectors, applied by DeltaSource from delta-rs's own reading of them.

delta-rs cannot write deletion vectors (and Spark's jars are out of reach here), so the
tests write them per the Delta protocol ("Deletion Vector Format"): a RoaringBitmapArray
(magic number, one 32-bit roaring bitmap per high key in pyroaring's portable
serialization), stored inline (``i``: Z85 in the add action) or in a
``deletion_vector_<uuid>.bin`` file (``u``: version byte, big-endian size, the bitmap,
its CRC-32), referenced from an ``add`` action that replaces the file's previous one in
a new commit of a table whose protocol has the ``deletionVectors`` reader and writer
features. The oracle is independent of delta-rs: each data file read with pyarrow
without the positions the test deleted; delta-rs's own query engine must agree.
"""

from __future__ import annotations

import json
import struct
import time
import uuid
import zlib
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable, QueryBuilder, write_deltalake
from pyroaring import BitMap

from engine.api import analyze
from engine.exceptions import InvalidTableLayoutError
from engine.sources import open_table
from tests.engine.sources.lake_helpers import analyze_source, batch, check_table, counting, reads

pytestmark = [pytest.mark.ray, pytest.mark.usefixtures("ray_runtime")]

_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
_MAGIC = 1681511377


def z85(data: bytes) -> str:
    """Z85 (ZeroMQ's base 85), as the Delta protocol encodes inline vectors and UUIDs; padded
    with zero bytes to a multiple of 4 (``sizeInBytes`` says how many count)."""
    data += b"\0" * (-len(data) % 4)
    out = []
    for i in range(0, len(data), 4):
        v, chunk = int.from_bytes(data[i : i + 4], "big"), []
        for _ in range(5):
            v, r = divmod(v, 85)
            chunk.append(_Z85[r])
        out.append("".join(reversed(chunk)))
    return "".join(out)


def roaring_bitmap_array(rows: list[int]) -> bytes:
    """The protocol's serialized RoaringBitmapArray of 64-bit row positions."""
    by_high: dict[int, list[int]] = {}
    for r in rows:
        by_high.setdefault(r >> 32, []).append(r & 0xFFFFFFFF)
    out = struct.pack("<iq", _MAGIC, len(by_high))
    for high in sorted(by_high):
        out += struct.pack("<i", high) + BitMap(by_high[high]).serialize()
    return out


def delete_rows(uri: str, deletions: dict[str, list[int]], storage: str) -> None:
    """Commit a new version whose add actions give the files in ``deletions`` (paths as in
    their add actions) deletion vectors of those row positions (inline or in a file)."""
    log = Path(uri) / "_delta_log"
    version = max(int(p.stem) for p in log.glob("*.json"))
    dt = DeltaTable(uri)
    adds = {a["path"]: a for a in _live_adds(uri)}
    now = int(time.time() * 1000)
    actions = []
    for path, rows in deletions.items():
        add = adds[path]
        data = roaring_bitmap_array(sorted(rows))
        if storage == "i":
            dv = {"storageType": "i", "pathOrInlineDv": z85(data), "sizeInBytes": len(data), "cardinality": len(rows)}
        else:
            u = uuid.uuid4()
            with open(Path(uri) / f"deletion_vector_{u}.bin", "wb") as f:
                f.write(b"\x01" + struct.pack(">i", len(data)) + data + struct.pack(">I", zlib.crc32(data)))
            dv = {"storageType": "u", "pathOrInlineDv": z85(u.bytes), "offset": 1, "sizeInBytes": len(data), "cardinality": len(rows)}
        remove = {"path": path, "deletionTimestamp": now, "dataChange": True, "extendedFileMetadata": True}
        remove.update(partitionValues=add["partitionValues"], size=add["size"])
        if "deletionVector" in add:
            remove["deletionVector"] = add["deletionVector"]
        actions += [{"remove": remove}, {"add": {**add, "dataChange": True, "deletionVector": dv}}]
    actions.append({"commitInfo": {"timestamp": now, "operation": "DELETE", "operationParameters": {}}})
    (log / f"{version + 1:020d}.json").write_text("\n".join(json.dumps(a) for a in actions) + "\n")
    assert DeltaTable(uri).version() == dt.version() + 1


def _live_adds(uri: str) -> list[dict]:
    """The add actions live at the latest version, from the JSON log (no checkpoints here)."""
    live: dict[str, dict] = {}
    for p in sorted((Path(uri) / "_delta_log").glob("*.json")):
        for line in p.read_text().splitlines():
            action = json.loads(line)
            if "add" in action:
                live[action["add"]["path"]] = action["add"]
            elif "remove" in action:
                live.pop(action["remove"]["path"], None)
    return list(live.values())


def _oracle(uri: str, deleted: dict[str, set[int]], schema: pa.Schema) -> pa.Table:
    """Every live file read with pyarrow, partition value added, without the deleted positions."""
    tables = []
    for add in _live_adds(uri):
        t = pq.read_table(Path(uri) / add["path"])
        gone = deleted.get(add["path"], set())
        t = t.filter(pa.array([i not in gone for i in range(t.num_rows)], pa.bool_()))
        t = t.append_column("part", pa.array([int(add["partitionValues"]["part"])] * t.num_rows, pa.int64()))
        tables.append(t.select(schema.names).cast(schema))
    return pa.concat_tables(tables)


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory):
    """Version 0: 4 partitions (delta-rs, deletion vectors enabled); version 1: inline
    vectors on part=0's file and part=1's; version 2: a vector file on part=2's file and a
    larger one replacing part=0's. Returns (uri, {version: oracle})."""
    uri = str(tmp_path_factory.mktemp("delta-dv") / "orders")
    data = batch(2_000, seed=7)
    write_deltalake(uri, data, partition_by=["part"], configuration={"delta.enableDeletionVectors": "true"})
    schema = pa.schema(DeltaTable(uri).schema().to_arrow())
    by_part = {a["partitionValues"]["part"]: a["path"] for a in _live_adds(uri)}
    oracles = {0: _oracle(uri, {}, schema)}
    v1 = {by_part["0"]: {0, 3, 7, 499}, by_part["1"]: set(range(0, 500, 5))}
    delete_rows(uri, {p: sorted(r) for p, r in v1.items()}, "i")
    oracles[1] = _oracle(uri, v1, schema)
    v2 = {**v1, by_part["2"]: {1, 2, 250}, by_part["0"]: {0, 3, 7, 499} | set(range(100, 200))}
    delete_rows(uri, {p: sorted(v2[p]) for p in (by_part["2"], by_part["0"])}, "u")
    oracles[2] = _oracle(uri, v2, schema)
    assert oracles[2].num_rows == 2_000 - 104 - 100 - 3
    return uri, oracles


def test_delta_rs_reads_the_vectors_as_the_oracle(table) -> None:
    """The hand-written vectors are valid: delta-rs's own query engine applies them and
    returns the oracle's rows."""
    uri, oracles = table
    for version, oracle in oracles.items():
        dt = DeltaTable(uri, version=version)
        got = pa.table(QueryBuilder().register("t", dt).execute("select * from t").read_all())
        assert got.num_rows == oracle.num_rows, version
        assert sorted(got["id"].to_pylist()) == sorted(oracle["id"].to_pylist()), version


@pytest.mark.parametrize("version", [2, 1, 0])
def test_statistics_without_deleted_rows_equal_duckdb(table, tmp_path: Path, version: int) -> None:
    uri, oracles = table
    store = str(tmp_path / "store")
    oracle = oracles[version]
    result = analyze(uri, store=store, user_statistics=[], at_snapshot=str(version))
    assert result.rows == oracle.num_rows
    parts = {f"part={p}": oracle.filter(pc.equal(oracle["part"], p)) for p in range(4)}
    check_table(store, "orders", oracle, parts)


def test_rows_and_counts_of_files_with_vectors(table) -> None:
    uri, oracles = table
    source = open_table(uri)
    got = pa.concat_tables(pa.Table.from_batches(list(source.read_batches(p, ["id", "part"]))) for p in source.partitions())
    assert sorted(got["id"].to_pylist()) == sorted(oracles[2]["id"].to_pylist())
    # a count-only read, and the files' row counts (the add actions' minus the deleted)
    assert sum(b.num_rows for p in source.partitions() for b in source.read_batches(p, [])) == oracles[2].num_rows
    assert sum(p.row_count for p in source.partitions()) == oracles[2].num_rows
    # small batches: the deleted positions are found across batch boundaries
    small = sum(b.num_rows for p in source.partitions() for b in source.read_batches(p, ["id"], batch_size=7))
    assert small == oracles[2].num_rows


def test_a_new_vector_recomputes_only_its_partitions(table, tmp_path: Path) -> None:
    """A vector leaves the file's path, size and time as they were: the fingerprint still
    changes (the deleted rows are part of it), so only the partitions whose files got a
    vector are profiled again."""
    uri, oracles = table
    store = str(tmp_path / "store")
    analyze(uri, store=store, user_statistics=[], at_snapshot="1")
    log = tmp_path / "reads.log"
    result = analyze_source(counting(open_table(uri, at_snapshot="2"), log), store)
    assert set(result.recompute_reasons) == {"part=0", "part=2"}
    assert {"part=0", "part=2"} <= reads(log) and (result.rebinned or reads(log) == {"part=0", "part=2"})
    check_table(store, "orders", oracles[2])


def test_a_missing_vector_file_fails_in_one_line(tmp_path: Path) -> None:
    uri = str(tmp_path / "gone")
    write_deltalake(uri, batch(200, seed=9), partition_by=["part"], configuration={"delta.enableDeletionVectors": "true"})
    delete_rows(uri, {_live_adds(uri)[0]["path"]: [1, 2]}, "u")
    (vector,) = list(Path(uri).glob("deletion_vector_*.bin"))
    vector.unlink()
    store = tmp_path / "store"
    with pytest.raises(InvalidTableLayoutError, match="Delta deletion vectors of version 1 unreadable") as err:
        analyze(uri, store=str(store), user_statistics=[])
    assert "\n" not in str(err.value)
    assert not (store / "gone" / "catalog").exists()  # nothing published


def test_vectors_on_s3(s3_server: str, tmp_path: Path) -> None:
    """A table with a vector file and an inline vector, on a real S3-compatible server
    (moto): delta-rs reads the vectors from S3, the statistics equal the oracle's."""
    import pyarrow.fs as pafs

    from engine import fileio
    from engine.api import open_statistics
    from tests.engine.sources.lake_helpers import check_statistics

    local = str(tmp_path / "dv_orders")
    write_deltalake(local, batch(800, seed=13), partition_by=["part"], configuration={"delta.enableDeletionVectors": "true"})
    schema = pa.schema(DeltaTable(local).schema().to_arrow())
    a, b = sorted(add["path"] for add in _live_adds(local))[:2]
    delete_rows(local, {a: [0, 5, 9]}, "u")
    delete_rows(local, {b: list(range(0, 100, 2))}, "i")
    oracle = _oracle(local, {a: {0, 5, 9}, b: set(range(0, 100, 2))}, schema)
    uri = "s3://bucket/lake/dv_orders"
    fs, path = fileio.resolve(uri)
    pafs.copy_files(local, path, source_filesystem=pafs.LocalFileSystem(), destination_filesystem=fs)
    result = analyze(uri, store="s3://bucket/dvstats", user_statistics=[])
    assert result.snapshot == "2" and result.rows == oracle.num_rows == 800 - 3 - 50
    assert check_statistics(open_statistics("s3://bucket/dvstats", "dv_orders"), oracle) > 0
