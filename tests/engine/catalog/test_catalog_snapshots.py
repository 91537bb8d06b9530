"""Statistics tied to snapshots: fingerprints and inheritance."""

from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from catalog_testkit import files_for

from engine.catalog import Catalog, inherit, partition_fingerprint, schema_fingerprint, source_partition_fingerprints
from engine.exceptions import IncompatibleSchemaError, InvalidArgumentError
from engine.sources.parquet import ParquetDirectorySource


def test_partition_fingerprint() -> None:
    files = [("p=1/a.parquet", 10, 1_000), ("p=1/b.parquet", 20, 2_000)]
    fp = partition_fingerprint(files)
    assert fp == partition_fingerprint(list(reversed(files)))  # order does not matter
    assert len(fp) == 32
    assert fp != partition_fingerprint([("p=1/a.parquet", 11, 1_000), files[1]])  # size
    assert fp != partition_fingerprint([("p=1/a.parquet", 10, 1_001), files[1]])  # mtime
    assert fp != partition_fingerprint([("p=1/c.parquet", 10, 1_000), files[1]])  # path
    assert fp != partition_fingerprint(files[:1])  # a file less
    assert partition_fingerprint([]) == partition_fingerprint([])


def test_schema_fingerprint_forms_agree() -> None:
    schema = pa.schema([("a", pa.int64()), ("s", pa.struct([("x", pa.string()), ("y", pa.float64())]))])
    pairs = [("a", "int64"), ("s.x", "string"), ("s.y", "double")]
    fp = schema_fingerprint(schema)
    assert fp == schema_fingerprint(pairs) == schema_fingerprint([{"name": n, "type": t} for n, t in pairs])
    assert fp != schema_fingerprint(pairs[:2])
    assert fp != schema_fingerprint([("a", "int32"), *pairs[1:]])


def test_source_fingerprints_follow_the_files(tmp_path) -> None:
    root = tmp_path / "tbl"
    for p in range(3):
        (root / f"part={p}").mkdir(parents=True)
        pq.write_table(pa.table({"v": [p, p + 1]}), root / f"part={p}" / "data.parquet")
    before = source_partition_fingerprints(ParquetDirectorySource(str(root)))
    assert sorted(before) == ["part=0", "part=1", "part=2"]
    f = root / "part=1" / "data.parquet"
    st = os.stat(f)
    os.utime(f, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))
    after = source_partition_fingerprints(ParquetDirectorySource(str(root)))
    assert [k for k in before if before[k] != after[k]] == ["part=1"]
    # paths are relative to the table: a copy of the table elsewhere with the same times fingerprints the same
    assert before["part=0"] == partition_fingerprint(
        [("part=0/data.parquet", os.stat(root / "part=0" / "data.parquet").st_size, os.stat(root / "part=0" / "data.parquet").st_mtime_ns)]
    )


def _previous(store: str, schema: str = "schemaA"):  # noqa: ANN202
    cat = Catalog.open(store, "t")
    txn = cat.begin("j1", "snap1")
    for i, key in enumerate(["p=0", "p=1", "p=2", "p=3"]):
        txn.add_partition(key, files_for("j1", key), 10 + i, schema_fingerprint=schema, data_fingerprint=f"fp{i}")
    txn.tombstone_partition("p=3")
    txn.commit()
    return cat.state()


def test_inherit_carries_unchanged_partitions(tmp_path) -> None:
    prev = _previous(str(tmp_path))
    plan = inherit(prev, {"p=0": "fp0", "p=1": "changed", "p=3": "fp3", "p=4": "fp4"}, "schemaA")
    assert sorted(plan.inherited) == ["p=0"] and plan.inherited["p=0"] == prev.partitions["p=0"]
    assert plan.recompute == ["p=1", "p=3", "p=4"]
    assert plan.reasons == {"p=1": "data changed", "p=3": "tombstoned", "p=4": "new partition"}
    assert plan.dropped == ["p=2"]
    # nothing to inherit from
    empty = inherit(None, {"p=0": "fp0"}, "schemaA")
    assert empty.inherited == {} and empty.recompute == ["p=0"]
    with pytest.raises(InvalidArgumentError):
        inherit(prev, {}, "")


def test_inherit_refuses_a_schema_change(tmp_path) -> None:
    prev = _previous(str(tmp_path))
    plan = inherit(prev, {"p=0": "fp0", "p=1": "fp1"}, "schemaB")
    assert plan.inherited == {} and plan.recompute == ["p=0", "p=1"]
    assert set(plan.reasons.values()) == {"schema changed"}
    with pytest.raises(IncompatibleSchemaError, match="cannot be inherited"):
        inherit(prev, {"p=0": "fp0"}, "schemaB", strict=True)


def test_partitions_without_data_fingerprint_are_recomputed(tmp_path) -> None:
    cat = Catalog.open(str(tmp_path), "t")
    txn = cat.begin("j", "s")
    txn.add_partition("p=0", files_for("j", "p=0"), 1, schema_fingerprint="A")  # e.g. rebuilt from files
    txn.commit()
    plan = inherit(cat.state(), {"p=0": "anything"}, "A")
    assert plan.reasons == {"p=0": "no data fingerprint"}
