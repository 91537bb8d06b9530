"""The per-file column index: built from footers (and values for Bloom / exact columns), checked
against pyarrow on each file; assembled, written laid out for partial reads, read back."""

from __future__ import annotations

import math
import random
from decimal import Decimal
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from engine import values as value_forms
from engine.exceptions import InvalidArgumentError
from engine.fileindex import store
from engine.fileindex.build import (
    BloomProbe,
    bloom_hashes,
    bloom_of,
    build_file_index,
    choose_bloom_columns,
)
from engine.files import checksum
from engine.sources.parquet import ParquetDirectorySource

SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("u", pa.uint64()),
        ("price", pa.float64()),
        ("amount", pa.decimal128(12, 2)),
        ("at", pa.timestamp("ns", "UTC")),
        ("sec", pa.timestamp("s")),
        ("name", pa.string()),
        ("addr", pa.struct([("city", pa.string()), ("zip", pa.int32())])),
        ("tags", pa.list_(pa.string())),
    ]
)


def _file(rng: random.Random, start: int, n: int) -> pa.Table:
    def maybe(v):
        return None if rng.random() < 0.1 else v

    return pa.table(
        {
            "id": [start + i for i in range(n)],  # sorted across files: ranges prune
            "u": [maybe(rng.choice([0, 2**64 - 1, rng.randrange(2**64)])) for _ in range(n)],
            "price": [maybe(rng.choice([math.nan, -0.0, rng.uniform(-1e6, 1e6)])) for _ in range(n)],
            "amount": [maybe(Decimal(rng.randrange(-(10**9), 10**9)) / 100) for _ in range(n)],
            "at": pa.array([maybe(rng.randrange(-(2**62), 2**62)) for _ in range(n)], pa.int64()).view(pa.timestamp("ns", "UTC")),
            "sec": pa.array([maybe(rng.randrange(-(10**9), 10**9)) for _ in range(n)], pa.int64()).view(pa.timestamp("s")),
            "name": [maybe(rng.choice(["ab", "abc", "abd", "b", "é"]) + str(rng.randrange(100))) for _ in range(n)],
            "addr": [maybe({"city": rng.choice(["Berlin", "Bern"]), "zip": rng.randrange(10**5)}) for _ in range(n)],
            "tags": [["x"] * rng.randrange(3) for _ in range(n)],
        },
        schema=SCHEMA,
    )


@pytest.fixture(scope="module")
def table_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("fileindex") / "t"
    rng = random.Random(7)
    start = 0
    for p in range(3):
        d = root / f"p={p}"
        d.mkdir(parents=True)
        for f in range(3):
            n = rng.randrange(1, 200)
            pq.write_table(_file(rng, start, n), d / f"f{f}.parquet", row_group_size=rng.choice([7, 50, 1000]))
            start += n
    return root


def _oracle(arr: pa.Array) -> tuple[int, int, str | None, str | None]:
    valid = pc.drop_null(arr)
    nans = 0
    if pa.types.is_floating(arr.type):
        nans = int(pc.sum(pc.is_nan(valid)).as_py() or 0)
        valid = pc.filter(valid, pc.invert(pc.is_nan(valid)))
    if len(valid) == 0:
        return arr.null_count, nans, None, None
    if pa.types.is_timestamp(arr.type):
        ints = valid.view(pa.int64())
        mm = pc.min_max(ints)
        lo, hi = (pa.array([mm[k].as_py()], pa.int64()).view(arr.type)[0] for k in ("min", "max"))
    else:
        mm = pc.min_max(valid)
        lo, hi = mm["min"], mm["max"]
    return arr.null_count, nans, value_forms.encode_scalar(lo), value_forms.encode_scalar(hi)


def test_footer_statistics_match_each_file(table_dir: Path) -> None:
    source = ParquetDirectorySource(str(table_dir))
    checked = 0
    for partition in source.partitions():
        part = build_file_index(source, partition)
        assert part.partition == partition.key
        assert part.columns == ("id", "u", "price", "amount", "at", "sec", "name", "addr.city", "addr.zip", "tags")
        for f in part.files:
            data = pq.read_table(f.path)
            assert f.rows == data.num_rows
            stats = {s.column: s for s in f.columns}
            for name in ("id", "u", "price", "amount", "at", "sec", "name", "addr.city", "addr.zip"):
                col = data.column(name.split(".")[0]).combine_chunks()
                if "." in name:
                    col = pc.struct_field(col, name.split(".")[1])
                nulls, _, lo, hi = _oracle(col)
                s = stats[name]
                assert (s.nulls, s.lower, s.upper) == (nulls, lo, hi), (f.path, name)
                assert s.nans == (None if name == "price" else 0)  # footers count no NaN
                assert s.bounded and s.bytes > 0
                checked += 1
            assert "tags" not in stats  # a list: nothing known, the evaluators keep the file
    assert checked == 9 * 9


def test_exact_columns_and_bloom_columns_read_values(table_dir: Path) -> None:
    source = ParquetDirectorySource(str(table_dir))
    partition = source.partitions()[0]
    part = build_file_index(source, partition, columns=["id", "price", "name"], bloom_columns=["name"], exact_columns=["price"])
    assert part.columns == ("id", "price", "name") and part.bloom_columns == ("name",)
    for f in part.files:
        data = pq.read_table(f.path)
        price = {s.column: s for s in f.columns}["price"]
        assert (price.nulls, price.nans, price.lower, price.upper) == _oracle(data.column("price").combine_chunks())
        (bloom,) = f.blooms
        probe = BloomProbe(bloom.words)
        names = pc.unique(pc.drop_null(data.column("name"))).to_pylist()
        assert bloom.values == len(names)
        assert all(probe.might_contain(pa.scalar(v)) for v in names)  # no false negative
    with pytest.raises(InvalidArgumentError, match="unknown column 'nope'"):
        build_file_index(source, partition, bloom_columns=["nope"])
    with pytest.raises(InvalidArgumentError, match="cannot have a Bloom filter"):
        build_file_index(source, partition, bloom_columns=["tags"])


@pytest.mark.parametrize("typed", [False, True])
def test_assembled_index_round_trips_and_is_laid_out_by_column(table_dir: Path, tmp_path: Path, typed: bool) -> None:
    source = ParquetDirectorySource(str(table_dir))
    parts = [build_file_index(source, p, bloom_columns=["name"]) for p in source.partitions()]
    tables = store.assemble(parts, source.schema() if typed else None)
    forms = tables.meta["forms"]
    if typed:  # bounds as numbers where the type allows, text for the rest
        assert (forms["id"], forms["price"], forms["at"], forms["sec"], forms["addr.zip"]) == ("int", "float", "int", "int", "int")
        assert (forms["u"], forms["amount"], forms["name"]) == ("text", "text", "text")
        assert tables.ranges.filter(pc.equal(tables.ranges["column"], "id"))["min"].null_count == 9
    else:
        assert set(forms.values()) == {"text"}
    assert tables.files.num_rows == 9 and tables.files.column("path").to_pylist() == [f.path for p in parts for f in p.files]
    written = store.write_file_index(tables, str(tmp_path))
    assert sorted(written) == sorted(store.INDEX_FILES)
    uris = {name: uri for name, (uri, _) in written.items()}
    for uri, f in written.values():  # the size and checksum the catalog records: those of the bytes on disk
        assert (f.checksum, f.size) == checksum.of_file(uri)
    back = store.read_file_index(str(tmp_path))
    assert back == parts
    ranges = pq.ParquetFile(uris[store.RANGES_FILE])
    where = {k: tuple(v) for k, v in __import__("json").loads(ranges.metadata.metadata[store.COLUMNS_KEY.encode()]).items()}
    for column, (group, offset, count, _form) in where.items():  # one column's rows: one row group, a slice
        rows = ranges.read_row_group(group, columns=["column", "file"]).slice(offset, count)
        assert set(rows.column("column").to_pylist()) == {column} and rows.column("file").to_pylist() == list(range(9))
    assert pq.ParquetFile(uris[store.BLOOMS_FILE]).metadata.num_rows == 9  # only the Bloom column


def test_columns_are_packed_whole_into_row_groups() -> None:
    groups, where = store._groups({f"c{i}": 1288 for i in range(30)}, 16_384)
    assert groups == [12 * 1288, 12 * 1288, 6 * 1288]
    assert where["c12"] == (1, 0, 1288) and where["c13"] == (1, 1288, 1288)
    groups, where = store._groups({"a": 65_536, "b": 65_536}, 16_384)
    assert groups == [65_536, 65_536] and where["b"] == (1, 0, 65_536)


@pytest.mark.parametrize("fpr", [0.01, 0.05])
def test_bloom_false_positive_rate_is_within_twice_the_configured_one(fpr: float) -> None:
    rng = np.random.default_rng(3)
    present = np.unique(rng.integers(0, 10**9, 20_000))
    absent = np.setdiff1d(rng.integers(10**9, 2 * 10**9, 50_000), present)
    strings = pa.array([f"user-{i}" for i in range(20_000)])
    other = pa.array([f"other-{i}" for i in range(50_000)])
    for values, missing in ((pa.array(present), pa.array(absent)), (strings, other)):
        probe = BloomProbe(bloom_of(values, "c", fpr).words)
        assert probe.bloom.contains(bloom_hashes(values)).all()  # no false negative
        measured = float(probe.bloom.contains(bloom_hashes(missing)).mean())
        assert measured <= 2 * fpr, (values.type, measured)
        assert measured > 0  # the filter is sized for the rate, not larger
    assert BloomProbe(bloom_of(strings, "c", fpr).words).might_contain(pa.scalar("user-7"))


def test_float_zero_signs_hash_alike_and_nan_is_never_added() -> None:
    probe = BloomProbe(bloom_of(pa.array([-0.0, 1.5, math.nan, None]), "x").words)
    assert probe.might_contain(pa.scalar(0.0)) and probe.might_contain(pa.scalar(-0.0)) and probe.might_contain(pa.scalar(1.5))


def test_high_cardinality_columns_are_chosen_by_default() -> None:
    schema = pa.schema([("id", pa.int64()), ("city", pa.string()), ("price", pa.float64()), ("flag", pa.bool_())])
    rows = [
        {"column": "id", "row_count": 1000, "null_count": 0, "distinct_count": 1000},
        {"column": "city", "row_count": 1000, "null_count": 0, "distinct_count": 12},
        {"column": "price", "row_count": 1000, "null_count": 0, "distinct_count": 990},
        {"column": "flag", "row_count": 1000, "null_count": 0, "distinct_count": 2},
    ]
    assert choose_bloom_columns(rows, schema) == ("id",)
