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


# ---------------------------------------------------------------- parts in the stored form (issue #18)
def _reference_assemble(parts, schema=None, columns=None) -> store.FileIndexTables:
    """The assembly as it was before parts travelled in the stored form (per file and column in
    Python): the oracle the stored parts' assembly must match byte for byte once written."""
    parts = sorted(parts, key=lambda p: p.partition)
    order = list(columns) if columns is not None else list(dict.fromkeys(c for p in parts for c in p.columns))
    files = {name: [] for name in store.FILES_SCHEMA.names}
    per_column = {c: [] for c in order}
    per_bloom = {c: [] for c in order}
    file_id = 0
    for part in parts:
        for f in part.files:
            for name, value in zip(store.FILES_SCHEMA.names, (file_id, part.partition, f.path, f.rows, f.size)):
                files[name].append(value)
            for s in f.columns:
                if s.column in per_column:
                    per_column[s.column].append((file_id, s))
            for b in f.blooms:
                if b.column in per_bloom:
                    per_bloom[b.column].append((file_id, b))
            file_id += 1
    types = {leaf.name: leaf.type for leaf in __import__("engine.columns").columns.leaf_columns(schema)} if schema is not None else {}
    forms = {c: store.bound_form(types[c]) if c in types else store.TEXT for c in order}
    sections, range_sizes = [], {}
    for c in order:
        rows = per_column[c]
        range_sizes[c] = n = len(rows)
        if not n:
            continue
        section = {
            "column": [c] * n,
            "file": [fid for fid, _ in rows],
            "null_count": [st.nulls for _, st in rows],
            "nan_count": [st.nans for _, st in rows],
            "bytes": [st.bytes for _, st in rows],
            "bounded": [st.bounded for _, st in rows],
        }
        lows, highs = (pa.array([getattr(st, k) for _, st in rows], pa.string()) for k in ("lower", "upper"))
        ints, floats, texts = pa.nulls(n, pa.int64()), pa.nulls(n, pa.float64()), pa.nulls(n, pa.string())
        if forms[c] == store.TEXT:
            section.update(min=lows, max=highs, min_int=ints, max_int=ints, min_float=floats, max_float=floats)
        else:
            lo, hi = (store.to_number(value_forms.decode(a, types[c]), forms[c]) for a in (lows, highs))
            numbers = {"min_int": lo, "max_int": hi} if forms[c] == store.INT else {"min_float": lo, "max_float": hi}
            section.update({"min": texts, "max": texts, "min_int": ints, "max_int": ints, "min_float": floats, "max_float": floats, **numbers})
        sections.append(pa.table(section, schema=store.RANGES_SCHEMA))
    blooms = {name: [] for name in store.BLOOMS_SCHEMA.names}
    bloom_sizes = {c: len(per_bloom[c]) for c in order if per_bloom[c]}
    for c in order:
        for fid, b in per_bloom[c]:
            for name, value in zip(store.BLOOMS_SCHEMA.names, (c, fid, b.values, b.fpr, b.words)):
                blooms[name].append(value)
    range_groups, range_columns = store._groups(range_sizes, store.RANGE_ROW_GROUP_ROWS)
    bloom_groups, bloom_columns = store._groups(bloom_sizes, store.BLOOM_ROW_GROUP_ROWS)
    fprs = sorted({p.bloom_fpr for p in parts if p.bloom_columns})
    spans, first = [], 0
    for part in parts:
        spans.append([part.partition, first, len(part.files)])
        first += len(part.files)
    meta = {
        "columns": order,
        "bloom_columns": sorted({c for p in parts for c in p.bloom_columns}, key=lambda c: order.index(c) if c in order else len(order)),
        "bloom_fpr": fprs[0] if len(fprs) == 1 else fprs,
        "partitions": [p.partition for p in parts],
        "partition_files": spans,
        "forms": forms,
        "schema": __import__("base64").b64encode(pa.schema([(c, types[c]) for c in order if c in types]).serialize().to_pybytes()).decode(),
    }
    return store.FileIndexTables(
        pa.table(files, schema=store.FILES_SCHEMA),
        pa.concat_tables(sections) if sections else store.RANGES_SCHEMA.empty_table(),
        pa.table(blooms, schema=store.BLOOMS_SCHEMA),
        range_groups,
        bloom_groups,
        range_columns,
        bloom_columns,
        meta,
    )


def _written(tables: store.FileIndexTables, directory: Path) -> dict[str, bytes]:
    directory.mkdir(parents=True)
    store.write_file_index(tables, str(directory))
    return {name: (directory / name).read_bytes() for name in store.INDEX_FILES}


@pytest.mark.parametrize("typed", [False, True])
def test_stored_parts_assemble_byte_for_byte_as_before(table_dir: Path, tmp_path: Path, typed: bool) -> None:
    """Parts encoded in the tasks, plain parts, or a mix: the written index is the previous
    assembly's, byte for byte."""
    source = ParquetDirectorySource(str(table_dir))
    parts = [
        build_file_index(source, p, bloom_columns=["name"] if i != 1 else [], exact_columns=["price"]) for i, p in enumerate(source.partitions())
    ]
    schema = source.schema() if typed else None
    columns = [leaf.name for leaf in __import__("engine.columns").columns.leaf_columns(source.schema())]  # the partition column too, as the job's
    stored = [store.encode(p, schema, columns) for p in parts]
    expected = _written(_reference_assemble(parts, schema, columns), tmp_path / "reference")
    assert _written(store.assemble(stored[::-1], schema, columns), tmp_path / "stored") == expected
    assert _written(store.assemble([stored[0], parts[1], stored[2]], schema, columns), tmp_path / "mixed") == expected
    assert _written(store.assemble(parts, schema), tmp_path / "plain") == _written(_reference_assemble(parts, schema), tmp_path / "reference2")
    assert [(p.partition, p.files) for p in store.read_file_index(str(tmp_path / "stored"))] == [(p.partition, p.files) for p in parts]
    with pytest.raises(InvalidArgumentError, match="encoded for other columns"):
        store.assemble(stored, schema, columns[::-1])


def test_stored_parts_of_many_files_cut_pages_as_before(tmp_path: Path) -> None:
    """8,000 files: two string columns' long bounds share a row group of more than one data
    page, whose cuts follow the chunks written (one a column): the stored parts' assembly
    keeps that chunking, so the bytes are the previous assembly's."""
    from engine.fileindex.build import FileBloom, FileColumnStats, IndexedFile, PartitionFileIndex

    rng = random.Random(3)
    schema = pa.schema([("n", pa.int64()), ("s", pa.string()), ("t", pa.string()), ("x", pa.float64()), ("p", pa.string())])

    def word() -> str:
        return "".join(rng.choice("abcdefgh") for _ in range(rng.randrange(70, 90)))

    parts = []
    for p in range(1_600):
        files = []
        for f in range(5):
            lo, s, t = rng.randrange(-(10**9), 10**9), word(), word()
            columns = (
                FileColumnStats("n", 0, 0, str(lo), str(lo + rng.randrange(10**6)), rng.randrange(10**4), True),
                FileColumnStats("s", rng.randrange(3), 0, s, s + "z", rng.randrange(10**4), True),
                FileColumnStats("t", 0, 0, t, t + "z", rng.randrange(10**4), True),
                FileColumnStats("x", None, None, None, None, None, False) if f == 3 else FileColumnStats("x", 1, 2, "-0.5", "1e300", 77, True),
            )
            blooms = (FileBloom("n", rng.randbytes(64), 9, 0.01),) if p % 7 == 0 else ()
            files.append(IndexedFile(f"/t/p={p:05d}/part-{f}-{s}.parquet", rng.randrange(10**6), rng.randrange(10**8), columns, blooms))
        parts.append(PartitionFileIndex(f"p={p:05d}", tuple(files), ("n", "s", "t", "x"), ("n",) if p % 7 == 0 else (), 0.01))
    columns = ["s", "t", "n", "x", "p"]
    stored = [store.encode(p, schema, columns) for p in parts]
    assembled = store.assemble(stored, schema, columns)
    assert assembled.range_groups == [16_000, 16_000]  # s and t share a row group (its min: 1.3 MB of text)
    assert _written(assembled, tmp_path / "stored") == _written(_reference_assemble(parts, schema, columns), tmp_path / "reference")


def test_a_partition_listed_without_statistics_is_always_a_candidate(table_dir: Path, tmp_path: Path) -> None:
    """A partition whose index could not be built (``unindexed_partition``) keeps its files in
    every plan, rows unknown; the others are pruned by their ranges as usual."""
    from engine import expressions as ex
    from engine.fileindex.build import unindexed_partition
    from engine.fileindex.plan import FileIndex

    source = ParquetDirectorySource(str(table_dir))
    first, *rest = source.partitions()
    parts = [unindexed_partition(first, ["id"])] + [build_file_index(source, p) for p in rest]
    store.write_file_index(store.assemble(parts, source.schema()), str(tmp_path / "ix"))
    index = FileIndex(str(tmp_path / "ix"))
    schema = source.schema()
    for where in ("id = -5", "id is null", "name = 'a'", "id > 1000000"):
        plan = index.plan(ex.bind(ex.parse(where), schema))
        assert set(plan.paths()) == {f.path for f in first.files}, where
        assert plan.candidates.column("rows").null_count == len(first.files)
    everything = index.plan(ex.bind(ex.parse("id >= 0"), schema))
    assert everything.candidates.num_rows == sum(len(p.files) for p in source.partitions())


def _iceberg_cases():
    from hypothesis import strategies as st
    from pyiceberg.types import (
        BinaryType,
        BooleanType,
        DateType,
        DecimalType,
        DoubleType,
        FloatType,
        IntegerType,
        LongType,
        StringType,
        TimestampType,
        TimestamptzType,
        TimeType,
    )

    micros = st.integers(-(2**62) // 1000, 2**62 // 1000)
    return st.one_of(
        st.tuples(st.just(LongType()), st.just(pa.int64()), st.integers(-(2**63), 2**63 - 1)),
        st.tuples(st.just(IntegerType()), st.just(pa.int32()), st.integers(-(2**31), 2**31 - 1)),
        st.tuples(st.just(DoubleType()), st.just(pa.float64()), st.floats(allow_nan=False)),
        st.tuples(st.just(FloatType()), st.just(pa.float32()), st.floats(width=32, allow_nan=False)),
        st.tuples(st.just(StringType()), st.just(pa.string()), st.text(max_size=40)),
        st.tuples(st.just(BinaryType()), st.just(pa.binary()), st.binary(max_size=40)),
        st.tuples(st.just(BooleanType()), st.just(pa.bool_()), st.booleans()),
        st.tuples(st.just(DateType()), st.just(pa.date32()), st.integers(-(10**6), 10**6)),
        st.tuples(st.just(TimeType()), st.just(pa.time64("us")), st.integers(0, 86_400_000_000 - 1)),
        st.tuples(st.just(TimestampType()), st.just(pa.timestamp("us")), micros),
        st.tuples(st.just(TimestamptzType()), st.just(pa.timestamp("us", "UTC")), micros),
        st.tuples(
            st.just(DecimalType(12, 2)),
            st.just(pa.decimal128(12, 2)),
            st.decimals(min_value=-(10**9), max_value=10**9, places=2, allow_nan=False, allow_infinity=False),
        ),
    )


def test_iceberg_manifest_bounds_decode_to_the_values_they_serialize() -> None:
    """Law: a value in Iceberg's single-value serialization (pyiceberg's ``to_bytes``) becomes
    the text form of the same value of the column's Arrow type (dates, times and timestamps
    by their storage integers), or nothing, never another value."""
    from hypothesis import given, settings
    from pyiceberg.conversions import to_bytes

    from engine.fileindex.iceberg import _bound

    cases = _iceberg_cases()

    @settings(max_examples=300, deadline=None)
    @given(case=cases)
    def check(case) -> None:
        iceberg_type, arrow_type, value = case
        text = _bound(iceberg_type, to_bytes(iceberg_type, value), arrow_type)
        assert text is not None
        got = value_forms.decode(pa.array([text]), arrow_type)
        storage = {pa.date32(): pa.int32()}.get(arrow_type, pa.int64())
        if pa.types.is_temporal(arrow_type):
            assert got.view(storage)[0].as_py() == value
        else:
            assert got[0].as_py() == value

    check()
