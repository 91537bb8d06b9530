from __future__ import annotations

import decimal

import pyarrow as pa
import pytest
from hypothesis import given
from hypothesis import strategies as st

from engine.exceptions import InvalidFileError, SchemaDriftError
from engine.sources.schema import (
    conform_array,
    conform_batch,
    is_promotable,
    normalize_type,
    promote,
    unify_schemas,
)

WIDENINGS = [
    (pa.int8(), pa.int16(), pa.int16()),
    (pa.int8(), pa.int64(), pa.int64()),
    (pa.int16(), pa.int32(), pa.int32()),
    (pa.int32(), pa.int64(), pa.int64()),
    (pa.uint8(), pa.uint32(), pa.uint32()),
    (pa.uint32(), pa.uint64(), pa.uint64()),
    (pa.uint8(), pa.int16(), pa.int16()),
    (pa.uint32(), pa.int64(), pa.int64()),
    (pa.uint8(), pa.int8(), pa.int16()),  # least common widening
    (pa.uint32(), pa.int32(), pa.int64()),
    (pa.float32(), pa.float64(), pa.float64()),
    (pa.float16(), pa.float32(), pa.float32()),
    (pa.decimal128(10, 2), pa.decimal128(12, 2), pa.decimal128(12, 2)),
    (pa.decimal128(10, 2), pa.decimal256(40, 2), pa.decimal256(40, 2)),
    (pa.decimal256(12, 2), pa.decimal128(20, 2), pa.decimal256(20, 2)),
    (pa.string(), pa.large_string(), pa.large_string()),
    (pa.binary(), pa.large_binary(), pa.large_binary()),
    (pa.string(), pa.string_view(), pa.string()),  # one logical type in three layouts (a view is read as its plain type)
    (pa.large_string(), pa.string_view(), pa.large_string()),
    (pa.binary_view(), pa.binary(), pa.binary()),
    (pa.binary_view(), pa.large_binary(), pa.large_binary()),
    (pa.uuid(), pa.binary(16), pa.uuid()),  # an extension and its bare storage
    (pa.opaque(pa.int64(), "c", "v"), pa.int64(), pa.opaque(pa.int64(), "c", "v")),
    (pa.null(), pa.string(), pa.string()),
    (pa.null(), pa.timestamp("us", "UTC"), pa.timestamp("us", "UTC")),
    (pa.dictionary(pa.int32(), pa.string()), pa.string(), pa.string()),
    (pa.dictionary(pa.int8(), pa.string()), pa.large_string(), pa.large_string()),
    (pa.list_(pa.int32()), pa.list_(pa.int32()), pa.list_(pa.int32())),
    (pa.struct([("a", pa.int32())]), pa.struct([("a", pa.int32())]), pa.struct([("a", pa.int32())])),
]

CONFLICTS = [
    (pa.int64(), pa.string()),
    (pa.int32(), pa.float64()),
    (pa.uint64(), pa.int64()),  # no signed type is wider than uint64
    (pa.uint64(), pa.int8()),
    (pa.decimal128(10, 2), pa.decimal128(12, 3)),  # scale change
    (pa.timestamp("ms"), pa.timestamp("us")),  # unit change
    (pa.timestamp("us"), pa.timestamp("us", "UTC")),  # time zone change
    (pa.date32(), pa.date64()),
    (pa.date32(), pa.timestamp("us")),
    (pa.string(), pa.binary()),
    (pa.string_view(), pa.binary_view()),
    (pa.uuid(), pa.binary()),  # only its own storage type
    (pa.uuid(), pa.opaque(pa.binary(16), "c", "v")),
    (pa.bool_(), pa.int8()),
    (pa.float64(), pa.decimal128(10, 2)),
    (pa.list_(pa.int32()), pa.list_(pa.int64())),  # nested types unify only if equal
    (pa.struct([("a", pa.int32())]), pa.struct([("a", pa.int32()), ("b", pa.int8())])),
    (pa.map_(pa.string(), pa.int32()), pa.map_(pa.string(), pa.int64())),
]


@pytest.mark.parametrize(("a", "b", "expected"), WIDENINGS, ids=lambda t: str(t))
def test_promote_widens_both_ways(a: pa.DataType, b: pa.DataType, expected: pa.DataType) -> None:
    assert promote(a, b) == expected
    assert promote(b, a) == expected
    assert is_promotable(normalize_type(a), expected)
    assert is_promotable(normalize_type(b), expected)


@pytest.mark.parametrize(("a", "b"), CONFLICTS, ids=lambda t: str(t))
def test_promote_conflicts(a: pa.DataType, b: pa.DataType) -> None:
    assert promote(a, b) is None
    assert promote(b, a) is None


def test_narrowing_is_not_a_promotion() -> None:
    assert not is_promotable(pa.int64(), pa.int32())
    assert not is_promotable(pa.float64(), pa.float32())
    assert not is_promotable(pa.large_string(), pa.string())
    assert not is_promotable(pa.decimal128(12, 2), pa.decimal128(10, 2))
    assert is_promotable(pa.int32(), pa.int32())


_ATOMS = [
    pa.null(),
    pa.bool_(),
    pa.int8(),
    pa.int16(),
    pa.int32(),
    pa.int64(),
    pa.uint8(),
    pa.uint16(),
    pa.uint32(),
    pa.uint64(),
    pa.float16(),
    pa.float32(),
    pa.float64(),
    pa.string(),
    pa.large_string(),
    pa.binary(),
    pa.large_binary(),
    pa.decimal128(9, 2),
    pa.decimal128(20, 2),
    pa.decimal256(40, 2),
    pa.decimal128(9, 3),
    pa.date32(),
    pa.timestamp("us"),
    pa.timestamp("ns", "UTC"),
    pa.string_view(),
    pa.binary_view(),
    pa.uuid(),
    pa.binary(16),
]


@given(st.lists(st.sampled_from(_ATOMS), min_size=1, max_size=6))
def test_promotion_is_an_order_independent_upper_bound(types: list[pa.DataType]) -> None:
    forward: pa.DataType | None = types[0]
    for t in types[1:]:
        forward = None if forward is None else promote(forward, t)
    backward: pa.DataType | None = types[-1]
    for t in reversed(types[:-1]):
        backward = None if backward is None else promote(backward, t)
    assert (forward is None) == (backward is None)
    if forward is not None:
        assert forward == backward
        assert all(is_promotable(t, forward) for t in types)


def test_unify_order_nullability_and_metadata() -> None:
    s1 = pa.schema(
        [pa.field("id", pa.int32(), nullable=False, metadata={"PARQUET:field_id": "1"}), pa.field("s", pa.string())],
        metadata={"pandas": "{}"},
    )
    s2 = pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("new", pa.float32()), pa.field("s", pa.string())])
    s3 = pa.schema([pa.field("s", pa.large_string()), pa.field("id", pa.int16(), nullable=False), pa.field("new", pa.float64())])
    unified = unify_schemas([("f1", s1), ("f2", s2), ("f3", s3)])
    assert unified.names == ["id", "s", "new"]  # order of first appearance
    assert unified.field("id").type == pa.int64()
    assert not unified.field("id").nullable  # non-nullable everywhere and present everywhere
    assert unified.field("id").metadata == {b"PARQUET:field_id": b"1"}
    assert unified.field("s").type == pa.large_string()
    assert unified.field("new").type == pa.float64()
    assert unified.field("new").nullable  # missing from f1
    assert unified.metadata is None


def test_unify_missing_required_column_becomes_nullable() -> None:
    s1 = pa.schema([pa.field("a", pa.int32(), nullable=False)])
    s2 = pa.schema([pa.field("b", pa.int32(), nullable=False)])
    unified = unify_schemas([("f1", s1), ("f2", s2)])
    assert unified.field("a").nullable and unified.field("b").nullable


def test_drift_error_names_column_types_and_first_files() -> None:
    schemas = [
        ("part-0.parquet", pa.schema([("x", pa.int32())])),
        ("part-1.parquet", pa.schema([("x", pa.int64())])),
        ("part-2.parquet", pa.schema([("x", pa.int64())])),
        ("part-3.parquet", pa.schema([("x", pa.string())])),
    ]
    with pytest.raises(SchemaDriftError) as info:
        unify_schemas(schemas)
    message = str(info.value)
    assert "'x'" in message
    assert "int32" in message and "part-0.parquet" in message  # the first file with the conflicting type
    assert "string" in message and "part-3.parquet" in message
    assert "part-2.parquet" not in message


def test_duplicate_column_in_one_file() -> None:
    schema = pa.schema([("a", pa.int32()), ("a", pa.int64())])
    with pytest.raises(InvalidFileError, match="dup.parquet.*'a'"):
        unify_schemas([("dup.parquet", schema)])


def test_null_typed_column_unifies_and_casts() -> None:
    unified = unify_schemas([("f1", pa.schema([("a", pa.null())])), ("f2", pa.schema([("a", pa.int32())]))])
    assert unified.field("a").type == pa.int32() and unified.field("a").nullable
    out = conform_array(pa.nulls(3), pa.int32())
    assert out.type == pa.int32() and out.null_count == 3


def test_conform_batch_casts_fills_and_orders() -> None:
    batch = pa.record_batch(
        {
            "d": pa.array([decimal.Decimal("1.25")], pa.decimal128(5, 2)),
            "i": pa.array([7], pa.int32()),
            "s": pa.array(["x"]).dictionary_encode(),
            "extra": pa.array([1]),
        }
    )
    target = pa.schema(
        [
            ("s", pa.large_string()),
            ("missing", pa.float64()),
            ("i", pa.int64()),
            ("d", pa.decimal128(20, 2)),
        ]
    )
    out = conform_batch(batch, target)
    assert out.schema == target
    assert out.to_pydict() == {"s": ["x"], "missing": [None], "i": [7], "d": [decimal.Decimal("1.25")]}


def test_string_and_binary_views_are_read_as_plain_types() -> None:
    """delta-rs may store string_view / binary_view in a Parquet file's Arrow schema."""
    assert normalize_type(pa.string_view()) == pa.string() and normalize_type(pa.binary_view()) == pa.binary()
    assert promote(pa.string_view(), pa.string()) == pa.string()
    assert promote(pa.string_view(), pa.large_string()) == pa.large_string()
    assert promote(pa.binary_view(), pa.large_binary()) == pa.large_binary()
    assert promote(pa.string_view(), pa.binary_view()) is None
    schema = unify_schemas([("a.parquet", pa.schema([("s", pa.string_view())])), ("b.parquet", pa.schema([("s", pa.string())]))])
    assert schema.field("s").type == pa.string()
    views = pa.array(["x", None, "yz"], pa.string_view())
    assert conform_array(views, pa.string()).equals(pa.array(["x", None, "yz"], pa.string()))
    assert conform_array(pa.array([b"\x00", None], pa.binary_view()), pa.large_binary()).to_pylist() == [b"\x00", None]


_FILE_SCHEMAS = [
    pa.schema([pa.field("id", pa.int32(), nullable=False, metadata={"k": "1"}), pa.field("s", pa.string())]),
    pa.schema([pa.field("id", pa.int32(), nullable=False), pa.field("s", pa.string())], metadata={"pandas": "{}"}),
    pa.schema([pa.field("id", pa.int64(), nullable=False), pa.field("new", pa.float32())]),
    pa.schema([pa.field("s", pa.large_string()), pa.field("id", pa.int16(), nullable=False)]),
    pa.schema([pa.field("id", pa.int32()), pa.field("s", pa.binary())]),  # s: a conflict
    pa.schema([pa.field("id", pa.int32()), pa.field("id", pa.int32())]),  # a repeated column
]


def _unified(items: list) -> tuple[str, object]:
    try:
        schema = unify_schemas(items)
    except (SchemaDriftError, InvalidFileError) as exc:
        return type(exc).__name__, str(exc)
    return "ok", (schema, [f.metadata for f in schema], [f.nullable for f in schema])


@given(st.lists(st.tuples(st.integers(0, len(_FILE_SCHEMAS) - 1), st.integers(1, 4)), min_size=1, max_size=8))
def test_runs_of_files_unify_as_the_files_one_by_one(runs: list[tuple[int, int]]) -> None:
    """A listing hands unify_schemas runs of consecutive files of one schema; the result (or the
    error, naming the same files) is that of the files one by one."""
    files, items, n = [], [], 0
    for which, count in runs:
        items.append((f"f{n}", _FILE_SCHEMAS[which], count))
        files += [(f"f{n + i}", _FILE_SCHEMAS[which]) for i in range(count)]
        n += count
    assert _unified(items) == _unified(files)
