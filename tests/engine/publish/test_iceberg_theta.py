"""Iceberg's single-value serialization and theta hashes (engine/publish/iceberg_theta.py), against
values packed here with ``struct`` / ``int.to_bytes`` and hashed by ``mmh3``."""

from __future__ import annotations

import struct
from decimal import Decimal

import datasketches as ds
import mmh3
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.publish import iceberg_theta
from engine.stats import sketches


def _theta_hash(b: bytes) -> int:
    return mmh3.hash64(b, seed=9001, signed=False)[0] >> 1


@settings(deadline=None, max_examples=40)
@given(st.lists(st.integers(-(10**18), 10**18 - 1), min_size=1, max_size=50), st.integers(0, 6))
def test_decimal_bytes_are_minimal_twos_complement(unscaled: list[int], scale: int) -> None:
    arr = pa.array([Decimal(u).scaleb(-scale) for u in unscaled], pa.decimal128(38, scale))
    got = set(iceberg_theta.serialized(arr, f"decimal(38, {scale})").to_pylist())
    expected = set()
    for u in unscaled:
        size = 1
        while not -(1 << (8 * size - 1)) <= u < (1 << (8 * size - 1)):
            size += 1
        expected.add(u.to_bytes(size, "big", signed=True))
    assert got == expected


@settings(deadline=None, max_examples=40)
@given(st.lists(st.integers(-(2**31), 2**31 - 1) | st.none(), max_size=60))
def test_int_hashes_are_of_four_little_endian_bytes(values: list[int | None]) -> None:
    serial = iceberg_theta.serialized(pa.array(values, pa.int32()), "int")
    expected = {struct.pack("<i", v) for v in values if v is not None}
    assert set(serial.to_pylist()) == expected
    assert set(iceberg_theta.hashes(serial).tolist()) == {_theta_hash(b) for b in expected}


@settings(deadline=None, max_examples=40)
@given(st.lists(st.floats(allow_nan=False, width=32), max_size=40))
def test_float_hashes_are_of_four_ieee_bytes(values: list[float]) -> None:
    serial = iceberg_theta.serialized(pa.array(values, pa.float32()), "float")
    assert set(serial.to_pylist()) == {struct.pack("<f", v) for v in values}


@settings(deadline=None, max_examples=40)
@given(st.lists(st.text(max_size=8), max_size=40))
def test_string_sketch_equals_datasketches_own(values: list[str]) -> None:
    theirs = ds.update_theta_sketch(12, 1.0, 9001)
    for v in values:
        theirs.update(v)  # UTF-8; empty strings ignored
    ours = ds.compact_theta_sketch.deserialize(iceberg_theta.theta_blob(iceberg_theta.serialized(pa.array(values, pa.string()), "string")))
    assert sorted(ours) == sorted(theirs.compact()) and ours.get_estimate() == theirs.get_estimate()


def test_uuid_is_its_sixteen_bytes() -> None:
    raw = bytes(range(16))
    assert iceberg_theta.serialized(pa.array([raw, None], pa.binary(16)), "uuid").to_pylist() == [raw]
    assert iceberg_theta.supported("decimal(9, 2)") and iceberg_theta.supported("fixed[4]") and not iceberg_theta.supported("struct<...>")


def test_an_estimating_sketch_keeps_the_smallest_hashes_and_unions_with_datasketches() -> None:
    values = list(range(-10_000, 20_000, 3))  # 10,000 distinct longs: estimation mode
    blob = iceberg_theta.theta_blob(iceberg_theta.serialized(pa.array(values, pa.int64()), "long"))
    ours = ds.compact_theta_sketch.deserialize(blob)
    every = sorted(_theta_hash(struct.pack("<q", v)) for v in values)
    assert ours.is_estimation_mode() and sorted(ours) == every[:4096] and ours.theta64 == every[4096]
    theirs = ds.update_theta_sketch(12, 1.0, 9001)
    for v in values:
        theirs.update(v)
    union = ds.theta_union(12, 1.0, 9001)
    union.update(ours)
    union.update(theirs.compact())
    # the same values: the union is the smaller sketch's view of them, not twice as many
    assert abs(union.get_result().get_estimate() - len(values)) <= 3 * 0.016 * len(values)
    assert sorted(union.get_result()) == sorted(h for h in every if h < union.get_result().theta64)


def _java_bytes(kind: str, v: object) -> bytes:
    """Iceberg's single-value serialization, packed here."""
    if kind == "long":
        return struct.pack("<q", v)
    if kind == "int":
        return struct.pack("<i", v)
    if kind == "double":
        return struct.pack("<d", v)
    if kind == "float":
        return struct.pack("<f", v)
    if kind == "boolean":
        return b"\x01" if v else b"\x00"
    if kind.startswith("decimal"):
        u = int(Decimal(v).scaleb(2))
        size = 1
        while not -(1 << (8 * size - 1)) <= u < (1 << (8 * size - 1)):
            size += 1
        return u.to_bytes(size, "big", signed=True)
    return v.encode() if isinstance(v, str) else bytes(v)


_VALUE_CASES = [
    ("long", pa.int64(), st.integers(-(2**63), 2**63 - 1)),
    ("int", pa.int32(), st.integers(-(2**31), 2**31 - 1)),
    ("double", pa.float64(), st.floats(allow_nan=False)),
    ("float", pa.float32(), st.floats(allow_nan=False, width=32)),
    ("boolean", pa.bool_(), st.booleans()),
    ("decimal(10, 2)", pa.decimal128(10, 2), st.integers(-(10**10) + 1, 10**10 - 1).map(lambda u: Decimal(u).scaleb(-2))),
    ("decimal(18, 2)", pa.decimal128(18, 2), st.integers(-(10**18) + 1, 10**18 - 1).map(lambda u: Decimal(u).scaleb(-2))),
    ("decimal(38, 2)", pa.decimal128(38, 2), st.integers(-(10**30), 10**30).map(lambda u: Decimal(u).scaleb(-2))),
    ("string", pa.string(), st.text(max_size=20)),
    ("binary", pa.binary(), st.binary(max_size=20)),
]


@settings(deadline=None, max_examples=25)
@given(st.sampled_from(range(len(_VALUE_CASES))).flatmap(lambda i: st.tuples(st.just(i), st.lists(_VALUE_CASES[i][2] | st.none(), max_size=60))))
def test_value_hashes_hash_every_value_as_iceberg_serializes_it(case: tuple[int, list]) -> None:
    i, values = case
    kind, arrow_type, _ = _VALUE_CASES[i]
    hashed, empty = iceberg_theta.value_hashes(pa.array(values, arrow_type), kind)
    packed = [_java_bytes(kind, v) for v in values if v is not None]
    assert empty == any(len(b) == 0 for b in packed)
    assert sorted(hashed.tolist()) == sorted(_theta_hash(b) for b in packed if b)  # every value, duplicates kept


# ------------------------------------------- the blob taken from the store's theta sketch
def _store_row(parts: list[pa.Array]) -> dict:
    """A table-level statistics row as analyze writes it: each partition's sketch of its
    distinct values (engine.stats.sketches, as the profile makes it), merged by DataSketches'
    union; the exact distinct count."""
    blobs = [sketches.theta_of_distinct(pc.unique(p.drop_null())) if len(p.drop_null()) else None for p in parts]
    every = pa.chunked_array(parts).combine_chunks()
    return {
        "type": str(every.type),
        "theta_sketch": sketches.merge_theta(blobs),
        "distinct_count": len(pc.unique(every.drop_null())),
        "distinct_count_exact": True,
        "nan_count": int(pc.sum(pc.is_nan(every)).as_py() or 0) if pa.types.is_floating(every.type) else 0,
        "min": str(pc.min(every).as_py()),
        "max": str(pc.max(every).as_py()),
    }


def _reread(parts: list[pa.Array], kind: str) -> bytes:
    """The blob of the path that reads the values: every value hashed, the sketch of the hashes."""
    return iceberg_theta.theta_blob_of_hashes(np.concatenate([iceberg_theta.value_hashes(p, kind)[0] for p in parts]))


def _oracle(parts: list[pa.Array], kind: str) -> tuple[list[int], int | None]:
    """(the sketch's hashes, theta when estimating) from mmh3 of the values packed here."""
    every = sorted({_theta_hash(_java_bytes(kind, v)) for p in parts for v in p.to_pylist() if v not in (None, "")})
    return (every, None) if len(every) <= 7680 else (every[:4096], every[4096])


def _ranges(spans: list[tuple[int, int, int]]) -> list[pa.Array]:
    return [pa.array(range(start, start + step * n, step), pa.int64()) for start, n, step in spans]


@pytest.mark.parametrize(
    "spans",
    [
        [(0, 20_000, 3), (5, 500, 7), (100_000, 9_000, 1)],  # estimating, partitions of every size
        [(0, 3_000, 1), (1_000, 1_000, 1)],  # exact, overlapping
        [(0, 6_000, 1)],  # one partition, exact above 2^12 (the table's sketch is the partition's)
        [(0, 9_000, 1), (3_000, 1_000, 2)],  # one partition estimating alone
    ],
)
def test_store_sketch_of_longs_is_the_blob_of_the_values(spans: list[tuple[int, int, int]]) -> None:
    parts = _ranges(spans)
    blob = iceberg_theta.from_store_sketch("long", _store_row(parts))
    assert blob is not None and blob == _reread(parts, "long")
    hashes, theta = _oracle(parts, "long")
    sketch = ds.compact_theta_sketch.deserialize(blob)
    assert sorted(sketch) == hashes and (sketch.theta64 if sketch.is_estimation_mode() else None) == theta


@settings(deadline=None, max_examples=15)
@given(st.lists(st.tuples(st.integers(-50_000, 50_000), st.integers(1, 9_000), st.integers(1, 5)), min_size=1, max_size=5))
def test_store_sketch_of_any_partitions_is_the_blob_of_the_values_or_none(spans: list[tuple[int, int, int]]) -> None:
    parts = _ranges(spans)
    row = _store_row(parts)
    blob = iceberg_theta.from_store_sketch("long", row)
    if blob is None:  # only where the union is estimating and the values' sketch would not be
        assert 4096 < row["distinct_count"] <= 7680 + 16
    else:
        assert blob == _reread(parts, "long")


def test_store_sketch_of_strings_and_timestamps() -> None:
    words = [pa.array([f"w{i * 7 % 13_001}" if i % 50 else "" for i in range(k, k + 9_000)]) for k in (0, 4_000, 20_000)]
    assert iceberg_theta.from_store_sketch("string", _store_row(words)) == _reread(words, "string")
    hashes, theta = _oracle(words, "string")
    sketch = ds.compact_theta_sketch.deserialize(_reread(words, "string"))
    assert sorted(sketch) == hashes and sketch.theta64 == theta
    times = [pa.array(range(k, k + 5_000_000, 997), pa.timestamp("us", "UTC")) for k in (0, 1_000_000)]
    assert iceberg_theta.from_store_sketch("timestamptz", _store_row(times)) == _reread(times, "timestamptz")


def test_store_sketch_is_not_taken_where_the_store_hashes_otherwise() -> None:
    longs = _ranges([(1, 9_000, 1)])
    # 7,000 distinct in two partitions: the union is estimating, the values' sketch exact
    assert iceberg_theta.from_store_sketch("long", _store_row(_ranges([(0, 4_000, 1), (3_000, 4_000, 1)]))) is None
    assert iceberg_theta.from_store_sketch("int", _store_row([p.cast(pa.int32()) for p in longs])) is None  # 8 bytes, not 4
    assert iceberg_theta.from_store_sketch("date", _store_row([p.cast(pa.int32()).cast(pa.date32()) for p in longs])) is None
    assert iceberg_theta.from_store_sketch("long", _store_row(longs) | {"distinct_count_exact": False}) is None
    doubles = [pa.array(np.arange(1, 9_001) * 0.5)]
    assert iceberg_theta.from_store_sketch("double", _store_row(doubles)) == _reread(doubles, "double")  # no NaN, no zero
    with_nan = [pa.array(np.append(np.arange(1, 9_001) * 0.5, np.nan))]
    assert iceberg_theta.from_store_sketch("double", _store_row(with_nan)) is None  # the store leaves NaN out
    with_zero = [pa.array(np.arange(-100, 9_000) * 0.5)]
    assert iceberg_theta.from_store_sketch("double", _store_row(with_zero)) is None  # -0.0 hashes as 0.0 there
    assert iceberg_theta.from_store_sketch("float", _store_row([p.cast(pa.float32()) for p in doubles])) is None
