from __future__ import annotations

import io
import json
import os
import pickle
import uuid
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine import fileio
from engine.exceptions import (
    InvalidArgumentError,
    InvalidFileError,
    InvalidTableLayoutError,
    SchemaDriftError,
    TableNotFoundError,
)
from engine.sources import ParquetDirectorySource, Partition, TableSource, open_table


def write(path: Path, table: pa.Table, **kwargs: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, path, **kwargs)
    return path


def read_all(source: TableSource, partition: Partition, columns: list[str], batch_size: int = 131072) -> pa.Table:
    batches = list(source.read_batches(partition, columns, batch_size=batch_size))
    target = pa.schema([source.schema().field(c) for c in columns])
    for batch in batches:
        assert batch.schema == target
        assert batch.schema.names == columns
    return pa.Table.from_batches(batches, schema=target)


HIVE = "__HIVE_DEFAULT_PARTITION__"

# ----------------------------------------------------------------------------- layouts


def test_flat_table(tmp_path: Path) -> None:
    root = tmp_path / "events"
    write(root / "part-0.parquet", pa.table({"id": [1, 2], "s": ["a", "b"]}))
    write(root / "part-1.parquet", pa.table({"id": [3], "s": ["c"]}))
    source = open_table(str(root))
    assert isinstance(source, ParquetDirectorySource)
    assert source.name == "events"
    assert open_table(str(root), name="custom").name == "custom"
    assert source.partition_fields() == []
    [partition] = source.partitions()
    assert (partition.key, partition.values, partition.row_count) == ("", (), 3)
    assert [os.path.basename(f.path) for f in partition.files] == ["part-0.parquet", "part-1.parquet"]
    assert all(f.size > 0 and f.mtime_ns for f in partition.files)
    assert source.schema() == pa.schema([("id", pa.int64()), ("s", pa.string())])
    assert read_all(source, partition, ["s", "id"]).to_pydict() == {"s": ["a", "b", "c"], "id": [1, 2, 3]}


def test_nested_hive_layout_with_encoded_and_default_values(tmp_path: Path) -> None:
    root = tmp_path / "sales"
    data = pa.table({"amount": [1.5, 2.5]})
    write(root / "year=2024" / "region=eu%2Fwest" / "part-0.parquet", data)
    write(root / "year=2024" / "region=us%20east" / "part-0.parquet", data)
    write(root / "year=2025" / "region=__HIVE_DEFAULT_PARTITION__" / "part-0.parquet", data)
    write(root / "year=__HIVE_DEFAULT_PARTITION__" / "region=x" / "part-0.parquet", data)
    source = open_table(f"file://{root}")
    assert source.partition_fields() == [pa.field("year", pa.int64()), pa.field("region", pa.string())]
    assert source.schema().names == ["amount", "year", "region"]
    partitions = source.partitions()
    assert [p.key for p in partitions] == [
        "year=2024/region=eu%2Fwest",
        "year=2024/region=us%20east",
        "year=2025/region=__HIVE_DEFAULT_PARTITION__",
        "year=__HIVE_DEFAULT_PARTITION__/region=x",
    ]
    assert [p.values for p in partitions] == [
        (("year", "2024"), ("region", "eu/west")),
        (("year", "2024"), ("region", "us east")),
        (("year", "2025"), ("region", None)),
        (("year", None), ("region", "x")),
    ]
    first = read_all(source, partitions[0], ["region", "amount", "year"])
    assert first.to_pydict() == {"region": ["eu/west"] * 2, "amount": [1.5, 2.5], "year": [2024, 2024]}
    assert first.schema.field("year").type == pa.int64()
    default = read_all(source, partitions[2], ["year", "region"])
    assert default.to_pydict() == {"year": [2025, 2025], "region": [None, None]}
    assert default.schema.field("region").type == pa.string()
    assert read_all(source, partitions[3], ["year"]).column("year").null_count == 2


def test_partition_type_inference(tmp_path: Path) -> None:
    root = tmp_path / "t"
    data = pa.table({"v": [1]})
    for folder in ("n=-3/c=007/d=2024-01-05", "n=%2B4/c=1/d=x", "n=9223372036854775807/c=1a/d=__HIVE_DEFAULT_PARTITION__"):
        write(root / folder / "f.parquet", data)
    write(root / "n=__HIVE_DEFAULT_PARTITION__/c=2/d=y" / "f.parquet", data)
    source = open_table(str(root))
    # n: integers (with sign, percent-encoded '+', int64 max) and nulls; c: one non-integer; d: dates stay strings.
    assert [(f.name, f.type) for f in source.partition_fields()] == [("n", pa.int64()), ("c", pa.string()), ("d", pa.string())]
    by_key = {p.key: p for p in source.partitions()}
    assert read_all(source, by_key["n=%2B4/c=1/d=x"], ["n", "c"]).to_pydict() == {"n": [4], "c": ["1"]}

    too_big = tmp_path / "big"
    write(too_big / "n=9223372036854775808" / "f.parquet", data)
    assert open_table(str(too_big)).partition_fields() == [pa.field("n", pa.string())]


def test_hidden_entries_are_ignored(tmp_path: Path) -> None:
    root = tmp_path / "t"
    write(root / "a=1" / "part-0.parquet", pa.table({"v": [1]}))
    (root / "_SUCCESS").write_bytes(b"")
    (root / "a=1" / ".part-0.parquet.crc").write_bytes(b"crc")
    (root / "a=1" / "_committed_123").write_text("{}")
    (root / "a=1" / "part-1.parquet._COPYING_").write_bytes(b"partial")
    (root / "_delta_log").mkdir()
    (root / "_delta_log" / "00000.json").write_text("{}")
    write(root / "_temporary" / "0" / "part-9.parquet", pa.table({"other": ["x"]}))
    (root / ".hive-staging").mkdir()
    (root / ".hive-staging" / "data.csv").write_text("a,b\n1,2\n")
    # a _delta_log/ makes the location a Delta table (detection); read as Parquet it is ignored
    source = open_table(str(root), format="parquet")
    [partition] = source.partitions()
    assert partition.key == "a=1"
    assert [os.path.basename(f.path) for f in partition.files] == ["part-0.parquet"]
    assert source.schema().names == ["v", "a"]


def test_underscore_partition_column_is_not_hidden(tmp_path: Path) -> None:
    write(tmp_path / "t" / "_k=1" / "f.parquet", pa.table({"v": [1]}))
    assert open_table(str(tmp_path / "t")).schema().names == ["v", "_k"]


def test_data_files_next_to_partition_folders(tmp_path: Path) -> None:
    root = tmp_path / "t"
    write(root / "a=1" / "f.parquet", pa.table({"v": [1]}))
    write(root / "stray.parquet", pa.table({"v": [1]}))
    with pytest.raises(InvalidTableLayoutError, match=str(root)):
        open_table(str(root))

    nested = tmp_path / "n"
    write(nested / "a=1" / "b=1" / "f.parquet", pa.table({"v": [1]}))
    write(nested / "a=1" / "mid.parquet", pa.table({"v": [1]}))
    with pytest.raises(InvalidTableLayoutError, match=f"{nested}/a=1 holds both"):
        open_table(str(nested))


def test_inconsistent_partition_keys(tmp_path: Path) -> None:
    root = tmp_path / "t"
    write(root / "a=1" / "b=1" / "f.parquet", pa.table({"v": [1]}))
    write(root / "a=2" / "c=1" / "f.parquet", pa.table({"v": [1]}))
    with pytest.raises(InvalidTableLayoutError, match="inconsistent partition keys") as info:
        open_table(str(root))
    assert f"{root}/a=1/b=1" in str(info.value) and f"{root}/a=2/c=1" in str(info.value)

    swapped = tmp_path / "s"
    write(swapped / "a=1" / "b=1" / "f.parquet", pa.table({"v": [1]}))
    write(swapped / "b=1" / "a=2" / "f.parquet", pa.table({"v": [1]}))
    with pytest.raises(InvalidTableLayoutError, match="inconsistent partition keys"):
        open_table(str(swapped))

    depth = tmp_path / "d"
    write(depth / "a=1" / "b=1" / "f.parquet", pa.table({"v": [1]}))
    write(depth / "a=2" / "f.parquet", pa.table({"v": [1]}))
    with pytest.raises(InvalidTableLayoutError, match="inconsistent partition depth"):
        open_table(str(depth))

    plain = tmp_path / "p"
    write(plain / "subdir" / "f.parquet", pa.table({"v": [1]}))
    with pytest.raises(InvalidTableLayoutError, match=f"{plain}/subdir is not a Hive partition folder"):
        open_table(str(plain))

    repeated = tmp_path / "r"
    write(repeated / "a=1" / "a=2" / "f.parquet", pa.table({"v": [1]}))
    with pytest.raises(InvalidTableLayoutError, match="repeated"):
        open_table(str(repeated))


def test_partition_column_the_files_hold_too(tmp_path: Path) -> None:
    """A partition column the files also hold (polars, DuckDB's write_partition_columns) is
    read as the files type it, from the files; a file that disagrees with its folder is named
    (this was refused as a collision before issue #28)."""
    root = tmp_path / "t"
    write(root / "v=1" / "f.parquet", pa.table({"v": pa.array([1, 1], pa.int8()), "x": [1.0, 2.0]}))
    write(root / "v=2" / "f.parquet", pa.table({"x": [3.0]}))  # a file without it: the folder's value
    write(root / f"v={HIVE}" / "f.parquet", pa.table({"v": pa.array([None], pa.int8()), "x": [4.0]}))
    source = open_table(str(root))
    assert source.schema() == pa.schema([pa.field("v", pa.int8()), pa.field("x", pa.float64())])
    assert [f.name for f in source.partition_fields()] == ["v"]
    got = {p.key: read_all(source, p, ["x", "v"]).to_pydict() for p in source.partitions()}
    assert got == {"v=1": {"x": [1.0, 2.0], "v": [1, 1]}, "v=2": {"x": [3.0], "v": [2]}, f"v={HIVE}": {"x": [4.0], "v": [None]}}

    write(root / "v=1" / "g.parquet", pa.table({"v": pa.array([1, 3], pa.int8()), "x": [5.0, 6.0]}))
    source = open_table(str(root))
    part = next(p for p in source.partitions() if p.key == "v=1")
    with pytest.raises(InvalidFileError, match=rf"^{root}/v=1/g.parquet: partition column 'v' holds 3 \(row 1\), its folder says 1$"):
        read_all(source, part, ["x", "v"])
    assert read_all(source, part, ["x"]).num_rows == 4  # the column not read: nothing to check

    bad = tmp_path / "b"
    write(bad / "v=abc" / "f.parquet", pa.table({"v": [1]}))
    with pytest.raises(InvalidTableLayoutError, match=rf"^{bad}/v=abc: partition value 'abc' of column 'v' is not a int64"):
        open_table(str(bad))


def test_empty_partition_folder(tmp_path: Path) -> None:
    root = tmp_path / "t"
    write(root / "a=1" / "b=x" / "f.parquet", pa.table({"v": [1, 2]}))
    (root / "a=2" / "b=y").mkdir(parents=True)
    (root / "a=3").mkdir()  # short of the partition depth: a leftover, not a partition
    source = open_table(str(root))
    assert [p.key for p in source.partitions()] == ["a=1/b=x", "a=2/b=y"]
    empty = source.partitions()[1]
    assert empty.files == () and empty.row_count == 0
    assert empty.values == (("a", "2"), ("b", "y"))
    assert list(source.read_batches(empty, ["v", "a"])) == []


def test_table_not_found(tmp_path: Path) -> None:
    with pytest.raises(TableNotFoundError, match=str(tmp_path / "missing")):
        open_table(str(tmp_path / "missing"))
    hollow = tmp_path / "hollow"
    (hollow / "a=1").mkdir(parents=True)
    (hollow / "_SUCCESS").write_bytes(b"")
    with pytest.raises(TableNotFoundError, match=str(hollow)):
        open_table(str(hollow))
    file_path = write(tmp_path / "single.parquet", pa.table({"v": [1]}))
    with pytest.raises(InvalidTableLayoutError, match="is a file"):
        open_table(str(file_path))


def test_zero_row_files_are_a_table(tmp_path: Path) -> None:
    root = tmp_path / "t"
    write(root / "f.parquet", pa.table({"v": pa.array([], pa.int64())}))
    source = open_table(str(root))
    [partition] = source.partitions()
    assert partition.row_count == 0
    assert read_all(source, partition, ["v"]).num_rows == 0


# ----------------------------------------------------------------------------- invalid files


def test_csv_file_is_invalid(tmp_path: Path) -> None:
    root = tmp_path / "t"
    write(root / "good.parquet", pa.table({"v": [1]}))
    (root / "data.csv").write_text("v\n1\n2\n")
    with pytest.raises(InvalidFileError) as info:
        open_table(str(root))
    assert f"{root}/data.csv" in str(info.value)
    assert "not a Parquet file" in str(info.value) and "magic" in str(info.value)


def test_truncated_parquet_file_is_invalid(tmp_path: Path) -> None:
    root = tmp_path / "t"
    full = write(root / "a=1" / "part-0.parquet", pa.table({"v": list(range(1000))})).read_bytes()
    (root / "a=1" / "part-0.parquet").write_bytes(full[: len(full) // 2])
    with pytest.raises(InvalidFileError) as info:
        open_table(str(root))
    assert f"{root}/a=1/part-0.parquet" in str(info.value)
    assert "truncated" in str(info.value)


def test_empty_and_corrupt_footer_files_are_invalid(tmp_path: Path) -> None:
    empty = tmp_path / "e"
    empty.mkdir()
    (empty / "f.parquet").write_bytes(b"")
    with pytest.raises(InvalidFileError, match=f"{empty}/f.parquet: .*empty"):
        open_table(str(empty))

    corrupt = tmp_path / "c"
    full = write(corrupt / "f.parquet", pa.table({"v": [1, 2, 3]})).read_bytes()
    # Keep both magics, garble the footer's thrift bytes.
    footer_len = int.from_bytes(full[-8:-4], "little")
    start = len(full) - 8 - footer_len
    garbled = full[:start] + b"\xff" * footer_len + full[-8:]
    (corrupt / "f.parquet").write_bytes(garbled)
    with pytest.raises(InvalidFileError, match=f"{corrupt}/f.parquet: unreadable Parquet footer"):
        open_table(str(corrupt))


# ----------------------------------------------------------------------------- schema drift


def test_widened_and_added_columns_unify_and_read(tmp_path: Path) -> None:
    root = tmp_path / "t"
    write(
        root / "p=1" / "old.parquet",
        pa.table(
            {
                "id": pa.array([1, 2], pa.int32()),
                "price": pa.array([1.5, None], pa.float32()),
                "name": pa.array(["a", "b"]),
            }
        ),
    )
    write(
        root / "p=2" / "new.parquet",
        pa.table(
            {
                "id": pa.array([3, 2**40], pa.int64()),
                "price": pa.array([2.25, 3.0], pa.float64()),
                "name": pa.array(["c", None], pa.large_string()),
                "added": pa.array([True, False]),
            }
        ),
    )
    source = open_table(str(root))
    assert source.schema() == pa.schema(
        [
            ("id", pa.int64()),
            ("price", pa.float64()),
            ("name", pa.large_string()),
            ("added", pa.bool_()),
            ("p", pa.int64()),
        ]
    )
    assert source.schema().field("added").nullable
    old, new = source.partitions()
    columns = ["added", "id", "name", "price", "p"]
    expected_old = pa.table(
        {
            "added": pa.array([None, None], pa.bool_()),
            "id": pa.array([1, 2], pa.int64()),
            "name": pa.array(["a", "b"], pa.large_string()),
            "price": pa.array([1.5, None], pa.float64()),
            "p": pa.array([1, 1], pa.int64()),
        }
    )
    assert read_all(source, old, columns).equals(expected_old)
    expected_new = pa.table(
        {
            "added": [True, False],
            "id": pa.array([3, 2**40], pa.int64()),
            "name": pa.array(["c", None], pa.large_string()),
            "price": [2.25, 3.0],
            "p": pa.array([2, 2], pa.int64()),
        }
    )
    assert read_all(source, new, columns).equals(expected_new)


def test_dictionary_encoded_column_reads_as_values(tmp_path: Path) -> None:
    root = tmp_path / "t"
    write(root / "a.parquet", pa.table({"s": pa.array(["x", "y"]).dictionary_encode()}))
    write(root / "b.parquet", pa.table({"s": pa.array(["z"])}))
    source = open_table(str(root))
    assert source.schema().field("s").type == pa.string()
    assert read_all(source, source.partitions()[0], ["s"]).column("s").to_pylist() == ["x", "y", "z"]


def test_incompatible_drift_names_both_files(tmp_path: Path) -> None:
    root = tmp_path / "t"
    write(root / "a=1" / "f.parquet", pa.table({"code": pa.array([1], pa.int64())}))
    write(root / "a=2" / "f.parquet", pa.table({"code": pa.array([2], pa.int64())}))
    write(root / "a=3" / "f.parquet", pa.table({"code": pa.array(["x"])}))
    with pytest.raises(SchemaDriftError) as info:
        open_table(str(root))
    message = str(info.value)
    assert "'code'" in message and "int64" in message and "string" in message
    assert f"{root}/a=1/f.parquet" in message and f"{root}/a=3/f.parquet" in message


def test_file_rewritten_with_incompatible_type_after_listing(tmp_path: Path) -> None:
    root = tmp_path / "t"
    path = write(root / "f.parquet", pa.table({"v": pa.array([1], pa.int32())}))
    source = open_table(str(root))
    write(path, pa.table({"v": pa.array(["now a string"])}))
    with pytest.raises(SchemaDriftError, match="f.parquet"):
        list(source.read_batches(source.partitions()[0], ["v"]))


# ----------------------------------------------------------------------------- names and width


def test_unusual_column_names(tmp_path: Path) -> None:
    root = tmp_path / "t"
    table = pa.table(
        {
            "a.b": [1, 2],
            "a": pa.array([{"b": 10}, {"b": 20}]),  # a nested path "a.b" shadowing the top-level name
            "with space": ["x", "y"],
            "größe": [1.0, 2.0],
            "列": ["u", "v"],
        }
    )
    write(root / "k=é%20x" / "f.parquet", table)
    source = open_table(str(root))
    assert source.schema().names == ["a.b", "a", "with space", "größe", "列", "k"]
    [partition] = source.partitions()
    assert partition.values == (("k", "é x"),)
    out = read_all(source, partition, ["列", "a.b", "größe", "with space", "k"])
    assert out.to_pydict() == {
        "列": ["u", "v"],
        "a.b": [1, 2],
        "größe": [1.0, 2.0],
        "with space": ["x", "y"],
        "k": ["é x", "é x"],
    }
    assert read_all(source, partition, ["a"]).column("a").to_pylist() == [{"b": 10}, {"b": 20}]


def test_two_thousand_columns(tmp_path: Path) -> None:
    root = tmp_path / "wide"
    rows = 10
    columns = {f"c{i:04d}": np.arange(rows, dtype=np.int64) * i for i in range(2000)}
    write(root / "f.parquet", pa.table(columns))
    source = open_table(str(root))
    assert len(source.schema()) == 2000
    out = read_all(source, source.partitions()[0], ["c1999", "c0000", "c0500"])
    assert out.column("c1999").to_pylist() == [i * 1999 for i in range(rows)]
    assert out.column("c0500").to_pylist() == [i * 500 for i in range(rows)]
    assert len(pickle.dumps(source)) < 200_000


# ----------------------------------------------------------------------------- reading


def test_read_batches_projection_and_batch_size(tmp_path: Path) -> None:
    root = tmp_path / "t"
    write(root / "a=1" / "f0.parquet", pa.table({"v": list(range(250)), "w": ["x"] * 250}), row_group_size=100)
    write(root / "a=1" / "f1.parquet", pa.table({"v": list(range(30))}))
    source = open_table(str(root))
    [partition] = source.partitions()
    batches = list(source.read_batches(partition, ["v"], batch_size=64))
    assert max(b.num_rows for b in batches) <= 64
    assert sum(b.num_rows for b in batches) == 280
    # Only partition columns: rows still come out, from the files' row counts.
    only_partition = list(source.read_batches(partition, ["a"], batch_size=64))
    assert sum(b.num_rows for b in only_partition) == 280
    assert all(b.schema.names == ["a"] for b in only_partition)
    assert sum(b.num_rows for b in source.read_batches(partition, [])) == 280
    with pytest.raises(InvalidArgumentError, match="nope"):
        list(source.read_batches(partition, ["v", "nope"]))
    with pytest.raises(InvalidArgumentError, match="twice"):
        list(source.read_batches(partition, ["v", "v"]))


def test_pickled_source_reads_in_another_process_shape(tmp_path: Path) -> None:
    root = tmp_path / "t"
    for i in range(200):
        write(root / f"a={i % 4}" / f"part-{i:03d}.parquet", pa.table({"v": [i]}))
    source = open_table(str(root))
    payload = pickle.dumps(source)
    assert len(payload) < 100_000  # a listing and a schema, no file contents or handles
    clone = pickle.loads(payload)
    assert clone.snapshot_id() == source.snapshot_id()
    assert clone.partitions() == source.partitions()
    assert clone.schema() == source.schema()
    assert read_all(clone, clone.partitions()[1], ["v", "a"]).equals(read_all(source, source.partitions()[1], ["v", "a"]))
    assert [p.row_count for p in clone.partitions()] == [50, 50, 50, 50]


def test_partitions_pickle_as_columns_and_come_back_equal() -> None:
    from ray import cloudpickle

    from engine.sources import DataFile

    files = (DataFile("/t/a=1/x.parquet", 10, 123, 5, None), DataFile("s3/b/t/a=1/y.parquet", 0, None, None, "etag-1"))
    for part in (Partition("a=1", (("a", "1"),), files), Partition("", (), ()), Partition("a=__HIVE_DEFAULT_PARTITION__", (("a", None),), files[:1])):
        for dumps in (pickle.dumps, cloudpickle.dumps):  # Ray's pickler too
            back = pickle.loads(dumps(part))
            assert back == part and back.files == part.files and all(type(f) is DataFile for f in back.files)


def test_many_files_are_listed_with_one_footer_read_each(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """1,500 files: every footer read once (no re-reads that grow with the table); timing is bench/'s."""
    from engine.sources.parquet import ParquetDirectorySource

    root = tmp_path / "t"
    buffer = io.BytesIO()
    pq.write_table(pa.table({"v": [1, 2, 3]}), buffer)
    for i in range(1500):
        directory = root / f"d={i % 30}"
        directory.mkdir(parents=True, exist_ok=True)
        (directory / f"part-{i:05d}.parquet").write_bytes(buffer.getvalue())
    reads: list[str] = []
    original = ParquetDirectorySource._read_footer

    def counted(self, data_file):  # noqa: ANN001, ANN202
        reads.append(data_file.path)
        return original(self, data_file)

    monkeypatch.setattr(ParquetDirectorySource, "_read_footer", counted)
    source = open_table(str(root))
    assert sum(p.row_count or 0 for p in source.partitions()) == 4500
    assert len(source.partitions()) == 30
    assert len(reads) == len(set(reads)) == 1500


# ----------------------------------------------------------------------------- snapshot id


def test_snapshot_id(tmp_path: Path) -> None:
    root = tmp_path / "t"
    path = write(root / "a=1" / "f.parquet", pa.table({"v": [1, 2]}))
    write(root / "a=2" / "f.parquet", pa.table({"v": [3]}))
    first = open_table(str(root))
    snapshot = first.snapshot_id()
    assert len(snapshot) == 32 and int(snapshot, 16) >= 0
    assert first.snapshot_id() == snapshot
    assert open_table(str(root)).snapshot_id() == snapshot
    assert open_table(f"file://{root}").snapshot_id() == snapshot  # relative paths only

    write(path, pa.table({"v": [1, 2, 3]}))  # rewritten: new size and mtime
    rewritten = open_table(str(root)).snapshot_id()
    assert rewritten != snapshot

    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))  # same size, new mtime
    touched = open_table(str(root)).snapshot_id()
    assert touched != rewritten

    (root / "a=3").mkdir()  # an empty partition is part of the table
    assert open_table(str(root)).snapshot_id() != touched


def test_footers_of_unchanged_local_files_are_read_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Reopening a local table reads only the footers of new or rewritten files
    (a rewrite changes the size or the modification time)."""
    root = tmp_path / "t"
    a = write(root / "p=1" / "a.parquet", pa.table({"v": [1, 2]}))
    write(root / "p=2" / "b.parquet", pa.table({"v": [3]}))
    read: list[str] = []
    original = ParquetDirectorySource._read_footer
    monkeypatch.setattr(ParquetDirectorySource, "_read_footer", lambda self, f: read.append(Path(f.path).name) or original(self, f))
    assert open_table(str(root)).partitions()[0].row_count == 2
    assert sorted(read) == ["a.parquet", "b.parquet"]
    read.clear()
    again = open_table(str(root))
    assert read == [] and [p.row_count for p in again.partitions()] == [2, 1] and again.schema().names == ["v", "p"]
    write(a, pa.table({"v": [1, 2, 3], "w": ["x", "y", "z"]}))  # rewritten: new size and mtime
    stat = a.stat()
    os.utime(a, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000))  # and a time no earlier listing saw
    rewritten = open_table(str(root))
    assert read == ["a.parquet"]
    assert [p.row_count for p in rewritten.partitions()] == [3, 1] and rewritten.schema().names == ["v", "w", "p"]


# ----------------------------------------------------------------------------- S3


def test_s3_hive_table(s3_server: str) -> None:
    table_uri = f"s3://bucket/warehouse-{uuid.uuid4().hex[:8]}/sales"
    for year, region, amounts in [(2024, "eu", [1.0, 2.0]), (2024, "us west", [3.0]), (2025, "eu", [4.0])]:
        buffer = pa.BufferOutputStream()
        pq.write_table(pa.table({"amount": amounts, "qty": pa.array([1] * len(amounts), pa.int32())}), buffer)
        encoded = region.replace(" ", "%20")
        fileio.write_bytes(fileio.join(table_uri, f"year={year}", f"region={encoded}", "part-0.parquet"), buffer.getvalue().to_pybytes())
    fileio.write_bytes(fileio.join(table_uri, "_SUCCESS"), b"")
    fileio.makedirs(fileio.join(table_uri, "year=2026", "region=eu"))  # empty partition (marker object)

    source = open_table(table_uri)
    assert source.name == "sales"
    assert source.schema() == pa.schema([("amount", pa.float64()), ("qty", pa.int32()), ("year", pa.int64()), ("region", pa.string())])
    partitions = source.partitions()
    assert [p.key for p in partitions] == ["year=2024/region=eu", "year=2024/region=us%20west", "year=2025/region=eu", "year=2026/region=eu"]
    assert [p.row_count for p in partitions] == [2, 1, 1, 0]
    assert partitions[0].files[0].path.startswith("bucket/warehouse-")
    out = read_all(source, partitions[1], ["region", "amount", "year"])
    assert out.to_pydict() == {"region": ["us west"], "amount": [3.0], "year": [2024]}

    clone = pickle.loads(pickle.dumps(source))
    assert read_all(clone, partitions[0], ["qty"]).column("qty").to_pylist() == [1, 1]
    assert clone.snapshot_id() == source.snapshot_id()

    fileio.write_bytes(fileio.join(table_uri, "year=2025", "region=eu", "part-1.csv"), b"a,b\n")
    with pytest.raises(InvalidFileError, match=f"{table_uri}/year=2025/region=eu/part-1.csv"):
        open_table(table_uri)
    with pytest.raises(TableNotFoundError):
        open_table(f"s3://bucket/missing-{uuid.uuid4().hex[:8]}")
    fileio.delete_dir(table_uri)


def test_s3_files_carry_their_etags_and_a_same_size_rewrite_changes_the_identity(s3_server: str) -> None:
    """S3 reports modification times in whole seconds: a rewrite of the same size within
    a second would leave (path, size, mtime) unchanged, so the ETag is part of a file's
    identity (snapshot id and partition fingerprint) on S3."""
    import dataclasses
    import hashlib

    from engine.catalog.snapshots import source_partition_fingerprints

    table_uri = f"s3://bucket/etags-{uuid.uuid4().hex[:8]}/t"

    def put(value: int) -> bytes:
        buffer = pa.BufferOutputStream()  # fixed width, no statistics: the size does not depend on the value
        pq.write_table(pa.table({"x": pa.array([value], pa.int64())}), buffer, compression="none", use_dictionary=False, write_statistics=False)
        data = buffer.getvalue().to_pybytes()
        fileio.write_bytes(fileio.join(table_uri, "k=1", "a.parquet"), data)
        return data

    first = put(1)
    source = open_table(table_uri)
    f = source.partitions()[0].files[0]
    assert f.etag == hashlib.md5(first).hexdigest()  # a single-part upload's ETag
    second = put(2)
    assert len(second) == len(first) and second != first
    again = open_table(table_uri)
    g = again.partitions()[0].files[0]
    assert g.etag == hashlib.md5(second).hexdigest() and g.size == f.size
    assert again.snapshot_id() != source.snapshot_id()
    assert source_partition_fingerprints(again) != source_partition_fingerprints(source)
    # the same path, size and time with another ETag alone changes both identities
    same_time = dataclasses.replace(g, mtime_ns=f.mtime_ns)
    part = dataclasses.replace(again.partitions()[0], files=(same_time,))
    again._partitions = [part]  # noqa: SLF001 - the listing, as if S3 had reported the old time
    assert source_partition_fingerprints(again) != source_partition_fingerprints(source)
    assert again._fingerprint() != source.snapshot_id()  # noqa: SLF001
    fileio.delete_dir(table_uri)


# ---------------------------------------------------------------- column bounds from footers
def test_column_bounds_equal_the_data_min_max(tmp_path: Path) -> None:
    """Footer bounds per partition against pyarrow.compute over the data (the oracle):
    several files and row groups, nulls, NaN, an all-null column, partition columns,
    int32 files in an int64 table, decimals, dates and timestamps."""
    from decimal import Decimal

    import pyarrow.compute as pc

    rng = np.random.default_rng(7)
    root = tmp_path / "t"
    for key in ("a", "b"):
        for f, int_type in enumerate((pa.int32(), pa.int64())):
            n = 3_000
            x = rng.normal(size=n)
            x[::50] = np.nan
            t = pa.table(
                {
                    "i": pa.array(rng.integers(-1000, 1000, n), int_type),
                    "x": pa.array(x, mask=rng.random(n) < 0.1),
                    "d": pa.array([Decimal(int(v)) / 100 for v in rng.integers(-(10**6), 10**6, n)], pa.decimal128(12, 2)),
                    "day": pa.array(rng.integers(0, 20_000, n).astype("int32"), pa.int32()).cast(pa.date32()),
                    "ts": pa.array(rng.integers(0, 10**15, n), pa.timestamp("us", tz="UTC")),
                    "empty": pa.nulls(n, pa.float64()),
                    "s": pa.array([str(v) for v in rng.integers(0, 9, n)]),
                }
            )
            (root / f"k={key}").mkdir(parents=True, exist_ok=True)
            pq.write_table(t, root / f"k={key}" / f"{f}.parquet", row_group_size=1_000)
    src = open_table(str(root))
    names = ["i", "x", "d", "day", "ts", "empty", "s", "k"]
    for part in src.partitions():
        data = pa.concat_tables(
            pq.read_table(f.path).cast(pa.schema([src.schema().field(n) for n in pq.read_schema(f.path).names])) for f in part.files
        )
        got = src.column_bounds(part, names)
        assert "s" not in got  # strings: no histogram, not asked for
        assert got["empty"] is None
        assert got["k"] == (pa.scalar(dict(part.values)["k"]),) * 2
        for name in ("i", "x", "d", "day", "ts"):
            col = data[name]
            if pa.types.is_floating(col.type):
                col = pc.filter(col, pc.invert(pc.is_nan(col)))
            want = pc.min_max(col)
            lo, hi = got[name]
            assert lo.type == src.schema().field(name).type
            assert (lo, hi) == (want["min"].cast(lo.type), want["max"].cast(lo.type)), name


def test_column_bounds_are_unknown_without_statistics(tmp_path: Path) -> None:
    root = tmp_path / "t"
    root.mkdir()
    pq.write_table(pa.table({"i": [1, 2, 3]}), root / "a.parquet")
    pq.write_table(pa.table({"i": [7, 8]}), root / "b.parquet", write_statistics=False)
    src = open_table(str(root))
    assert src.column_bounds(src.partitions()[0], ["i"]) == {}
    (root / "b.parquet").unlink()
    src = open_table(str(root))
    assert src.column_bounds(src.partitions()[0], ["i"]) == {"i": (pa.scalar(1), pa.scalar(3))}
    # nanosecond timestamps are never guessed (footer statistics come back as microseconds)
    ns = tmp_path / "ns"
    ns.mkdir()
    pq.write_table(pa.table({"t": pa.array([1, 2], pa.timestamp("ns")), "i": [1, 2]}), ns / "c.parquet")
    src = open_table(str(ns))
    assert src.column_bounds(src.partitions()[0], ["t", "i"]) == {"i": (pa.scalar(1), pa.scalar(2))}


def test_small_dictionary_codes_come_as_dictionaries_when_asked(tmp_path: Path) -> None:
    """read_batches(dictionary=...): a string column whose every row group is small
    dictionary codes comes as an Arrow dictionary; a high-cardinality one (plain pages
    after the dictionary overflowed), a file written without dictionaries and other
    types come decoded; either way the values are the column's."""
    rng = np.random.default_rng(0)
    n = 20_000
    low = pa.array([f"cat-{i}" for i in rng.integers(0, 300, n)])
    high = pa.array([f"unique-value-{i:09d}-{'x' * 30}" for i in range(n)])
    with_nulls = pa.array([None if i % 7 == 0 else f"v{i % 5}" for i in range(n)])
    table = pa.table({"low": low, "high": high, "nulls": with_nulls, "num": pa.array(np.arange(n))})
    root = tmp_path / "t"
    write(root / "a.parquet", table, row_group_size=6_000, dictionary_pagesize_limit=64 * 1024)
    write(root / "b.parquet", table.slice(0, 500), use_dictionary=False)
    source = open_table(str(root))
    (part,) = source.partitions()
    columns = ["low", "high", "nulls", "num"]
    batches = list(source.read_batches(part, columns, batch_size=4_096, dictionary=["low", "high", "nulls", "num"]))
    first_file = [b for b in batches[:-1]]  # b.parquet's 500 rows are the last batch
    assert all(pa.types.is_dictionary(b.schema.field("low").type) for b in first_file)
    assert all(pa.types.is_dictionary(b.schema.field("nulls").type) for b in first_file)
    assert all(b.schema.field("high").type == pa.string() and b.schema.field("num").type == pa.int64() for b in batches)
    assert batches[-1].schema == pa.schema([source.schema().field(c) for c in columns])  # written without dictionaries
    for name in columns:
        got = pa.chunked_array(
            [b.column(name).dictionary_decode() if pa.types.is_dictionary(b.column(name).type) else b.column(name) for b in batches]
        )
        assert got.to_pylist() == table[name].to_pylist() + table[name].slice(0, 500).to_pylist(), name
    # without the option nothing changes
    assert read_all(source, part, columns).equals(pa.concat_tables([table, table.slice(0, 500)]))


def test_dictionary_reads_keep_the_table_type(tmp_path: Path) -> None:
    """A file's string dictionary read for a large_string table column has large_string values."""
    root = tmp_path / "t"
    write(root / "a.parquet", pa.table({"s": pa.array(["x", "y", "x"] * 100, pa.large_string())}))
    write(root / "b.parquet", pa.table({"s": pa.array(["z", "x"] * 100, pa.string())}))
    source = open_table(str(root))
    (part,) = source.partitions()
    batches = list(source.read_batches(part, ["s"], dictionary=["s"]))
    types = {b.schema.field("s").type for b in batches}
    assert types == {pa.dictionary(pa.int32(), source.schema().field("s").type)}
    assert sorted(v for b in batches for v in b.column("s").dictionary_decode().to_pylist()) == sorted(["x", "y", "x"] * 100 + ["z", "x"] * 100)


def test_dictionary_reads_of_odd_column_names(tmp_path: Path) -> None:
    """Dotted, spaced and non-ASCII names: the values read are the column's, dictionary or not."""
    names = ["a.b", "with space", "größe"]
    table = pa.table({n: pa.array([f"{n}-{i % 3}" for i in range(3_000)]) for n in names})
    root = tmp_path / "t"
    write(root / "f.parquet", table)
    source = open_table(str(root))
    (part,) = source.partitions()
    batches = list(source.read_batches(part, names, dictionary=names))
    for n in names:
        col = pa.chunked_array([b.column(n) for b in batches])
        decoded = col.cast(pa.string()) if pa.types.is_dictionary(col.type) else col
        assert decoded.to_pylist() == table[n].to_pylist(), n
    assert not any(pa.types.is_dictionary(b.schema.field("a.b").type) for b in batches)
    assert all(pa.types.is_dictionary(b.schema.field("größe").type) for b in batches)


# ----------------------------------------------------------------------------- nested columns over 2 GiB

CHUNKED_NESTED = "Nested data conversions not implemented for chunked array outputs"


def _maps(rows: int) -> pa.Table:
    keys = pa.array([f"k{i}" for i in range(rows)])
    return pa.table({"m": pa.MapArray.from_arrays(pa.array(range(rows + 1), pa.int32()), keys, pa.array(range(rows), pa.int32())), "i": range(rows)})


def test_a_batch_pyarrow_cannot_assemble_is_read_in_smaller_ones(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A nested column of over 2 GiB of strings in a batch (apache/parquet-testing's
    large_string_map.brotli.parquet) makes pyarrow's reader fail with "Nested data conversions
    not implemented for chunked array outputs": the file is read again in smaller batches,
    from the first row not yet read. The failure is forced here (only the reader call is
    replaced: it fails on a batch of more than 8 rows after yielding one); the real file is
    the slow test below."""
    table = _maps(100)
    root = tmp_path / "t"
    write(root / "f.parquet", table, row_group_size=30)
    original = pq.ParquetFile.iter_batches
    sizes: list[int] = []

    def iter_batches(self: pq.ParquetFile, batch_size: int = 65536, **kwargs: object):
        sizes.append(batch_size)
        batches = original(self, batch_size=batch_size, **kwargs)
        if batch_size > 8:
            yield next(batches)
            raise pa.ArrowNotImplementedError(CHUNKED_NESTED)
        yield from batches

    monkeypatch.setattr(pq.ParquetFile, "iter_batches", iter_batches)
    source = open_table(str(root))
    (part,) = source.partitions()
    got = read_all(source, part, ["m", "i"], batch_size=20)
    assert got.equals(table.cast(source.schema()))
    assert sizes[0] == 20 and sizes[-1] <= 8  # halved until the reads succeed

    def other_error(self: pq.ParquetFile, batch_size: int = 65536, **kwargs: object):
        raise pa.ArrowNotImplementedError("something else")
        yield

    monkeypatch.setattr(pq.ParquetFile, "iter_batches", other_error)
    with pytest.raises(InvalidFileError, match=f"^{root}/f.parquet: cannot be read: something else"):
        read_all(source, part, ["m"])


@pytest.mark.slow
def test_a_map_of_two_one_gib_strings_is_read(tmp_path: Path, ray_runtime: None) -> None:
    """The shape of large_string_map.brotli.parquet, written here: a map<string, int32> column
    of 2 rows whose keys are 1 GiB strings, in one row group (the column chunk holds over
    2 GiB; measured: 10 GB of memory and 6 minutes to write and read it)."""
    one_gib = 1 << 30
    data = pa.py_buffer(b"a" * one_gib)
    key = pa.StringArray.from_buffers(1, pa.py_buffer(np.array([0, one_gib], np.int32).tobytes()), data)
    chunk = pa.MapArray.from_arrays(pa.array([0, 1], pa.int32()), key, pa.array([1], pa.int32()))
    table = pa.table({"arr": pa.chunked_array([chunk, chunk])})
    root = tmp_path / "t"
    write(root / "large_string_map.parquet", table, compression="zstd", row_group_size=2)
    del table, chunk, key, data
    with pytest.raises(pa.ArrowNotImplementedError, match=CHUNKED_NESTED):
        pq.read_table(root / "large_string_map.parquet")
    source = open_table(str(root))
    (part,) = source.partitions()
    lengths, rows = [], 0
    for batch in source.read_batches(part, ["arr"]):
        rows += batch.num_rows
        lengths += pa.compute.binary_length(batch.column("arr").keys).to_pylist()
    assert (rows, lengths) == (2, [one_gib, one_gib])
    del lengths
    from click.testing import CliRunner

    from engine.cli.console import metastore

    store = str(tmp_path / "store")
    result = CliRunner().invoke(metastore, ["--store", store, "analyze", str(root), "--no-file-index"])
    assert result.exit_code == 0, result.output
    (column,) = json.loads(CliRunner().invoke(metastore, ["--store", store, "-o", "json", "show", "t"]).output)["columns"]
    assert (column["rows"], column["nulls"], column["unsupported"]) == (2, 0, "map columns are not supported")
