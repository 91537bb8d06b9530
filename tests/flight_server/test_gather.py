"""Rows gathered in C (flight_server/gather.py, flight_server/_gather.c) against pyarrow.compute's take.

The oracle is ``take_rows`` (``pc.take``): every gathered table must equal it, schema metadata
included, over random tables of every type the extension copies (nulls, sliced inputs, empty
and repeated rows, empty and non-ASCII strings, large offsets), and the extension must be
built in this checkout (were it not, the server would fall back to pc.take silently).
"""

from __future__ import annotations

import gc
import resource

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flight_server import gather
from flight_server.gather import RowsTable, take_rows

FIXED = [
    pa.int8(),
    pa.uint8(),
    pa.int16(),
    pa.uint16(),
    pa.int32(),
    pa.uint32(),
    pa.int64(),
    pa.uint64(),
    pa.float16(),
    pa.float32(),
    pa.float64(),
    pa.date32(),
    pa.date64(),
    pa.time32("s"),
    pa.time32("ms"),
    pa.time64("us"),
    pa.time64("ns"),
    pa.timestamp("s"),
    pa.timestamp("us", tz="UTC"),
    pa.timestamp("ns", tz="Europe/Paris"),
    pa.duration("ms"),
    pa.duration("ns"),
    pa.month_day_nano_interval(),
    pa.decimal128(20, 4),
    pa.decimal256(40, 2),
    pa.binary(3),
]
VARIABLE = [pa.string(), pa.binary(), pa.large_string(), pa.large_binary()]
SUPPORTED = [*FIXED, *VARIABLE, pa.bool_(), pa.null()]
UNSUPPORTED = [pa.list_(pa.int64()), pa.struct([("a", pa.int64())]), pa.dictionary(pa.int32(), pa.string()), pa.large_list(pa.utf8())]
TEXTS = st.lists(st.sampled_from(["a", "é", "ü", "日本", "\U0001f600", "x" * 40, "\x00"]), max_size=4).map("".join)  # "" too


def _values(draw: st.DrawFn, type_: pa.DataType, n: int) -> pa.Array:
    nulls = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    if pa.types.is_null(type_):
        return pa.nulls(n)
    if pa.types.is_boolean(type_):
        values: list[object] = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    elif pa.types.is_string(type_) or pa.types.is_large_string(type_):
        values = draw(st.lists(TEXTS, min_size=n, max_size=n))
    elif pa.types.is_binary(type_) or pa.types.is_large_binary(type_):
        values = [s.encode() for s in draw(st.lists(TEXTS, min_size=n, max_size=n))]
    else:  # fixed width: any bytes, through the same width of binary (the gather copies bytes)
        width = type_.bit_width // 8
        raw = bytearray(draw(st.binary(min_size=n * width, max_size=n * width)))
        if pa.types.is_floating(type_):  # no NaN (unequal to itself): the exponent's top bit cleared
            for i in range(n):
                raw[i * width + width - 1] &= 0xBF
        if pa.types.is_fixed_size_binary(type_):
            values = [bytes(raw[i * width : (i + 1) * width]) for i in range(n)]
        else:
            data = pa.py_buffer(bytes(raw))
            valid = pa.array([not x for x in nulls], pa.bool_()).buffers()[1]
            return pa.Array.from_buffers(type_, n, [valid, data], null_count=sum(nulls))
    return pa.array([None if null else v for v, null in zip(values, nulls, strict=True)], type_)


@st.composite
def tables(draw: st.DrawFn) -> pa.Table:
    types = draw(st.lists(st.sampled_from(SUPPORTED), min_size=1, max_size=6))
    n = draw(st.integers(0, 40))
    head, tail = draw(st.integers(0, 9)), draw(st.integers(0, 9))  # sliced: offsets into the buffers
    columns = [_values(draw, t, head + n + tail).slice(head, n) for t in types]
    table = pa.table(columns, names=[f"c{i}" for i in range(len(types))])
    if draw(st.booleans()):
        table = table.replace_schema_metadata({"metastore.table": "t", "k": "ü"})
    if draw(st.booleans()) and n > 1:  # a table of two chunks: prepared as one
        table = pa.concat_tables([table.slice(0, n // 2), table.slice(n // 2)])
    return table


def _same(got: pa.Table, want: pa.Table) -> None:
    assert got.schema.equals(want.schema, check_metadata=True)
    assert got.equals(want, check_metadata=True)
    assert all(c.num_chunks == 1 for c in got.columns)
    got.validate()  # not full: the fixed-width values are any bytes (dates, decimals out of range)


def test_the_extension_is_built_in_this_checkout() -> None:
    # without it the server would answer through pc.take (and warn once): CI must not fall back silently
    from flight_server._gather import Gatherer

    assert gather.AVAILABLE and Gatherer is gather.Gatherer


@settings(max_examples=300, deadline=None)
@given(table=tables(), data=st.data())
def test_gathered_rows_are_pc_takes_rows(table: pa.Table, data: st.DataObject) -> None:
    prepared = RowsTable(table)
    assert prepared.gathers == (table.num_rows > 0)
    rows = data.draw(st.lists(st.integers(0, table.num_rows - 1), max_size=30)) if table.num_rows else []
    _same(prepared.take(rows), take_rows(table, rows))


def test_large_offsets_and_bit_offsets() -> None:
    big = "x" * 70_000
    base = pa.table(
        {
            "s": pa.array([big, None, "é", ""] * 40, pa.large_string()).slice(3),
            "b": pa.array([True, None, False, True, True] * 32).slice(3),
            "z": pa.array([None, b"\x00\x01", b"", big.encode()] * 40, pa.large_binary()).slice(3),
        }
    )
    rows = [0, 5, 5, 150, 1, 149, 7, 0, 0, 33]
    _same(RowsTable(base).take(rows), take_rows(base, rows))


@pytest.mark.parametrize("type_", UNSUPPORTED, ids=str)
def test_other_types_are_taken_by_pyarrow(type_: pa.DataType) -> None:
    values = {
        "list<item: int64>": [[1], None, []],
        "struct<a: int64>": [{"a": 1}, None, {"a": 3}],
        "dictionary<values=string, indices=int32, ordered=0>": ["a", None, "b"],
        "large_list<item: string>": [["a"], None, []],
    }[str(type_)]
    table = pa.table({"k": pa.array([1, 2, 3]), "v": pa.array(values, type_)})
    prepared = RowsTable(table)
    assert not prepared.gathers
    _same(prepared.take([2, 0, 2]), take_rows(table, [2, 0, 2]))


def test_rows_outside_the_table_are_refused() -> None:
    prepared = RowsTable(pa.table({"a": [1, 2, 3]}).slice(1))
    assert prepared.gathers
    for rows in ([2], [-1], [0, 1, 2**40], [2**70]):
        with pytest.raises((IndexError, OverflowError)):
            prepared.take(rows)
    with pytest.raises(TypeError):
        prepared.take(["0"])  # type: ignore[list-item]
    with pytest.raises(TypeError):
        prepared.take([True])  # exact ints only (no __index__ runs Python code mid-gather)
    assert prepared.take([1, 0]).column("a").to_pylist() == [3, 2]


def test_many_gathers_free_their_buffers() -> None:
    # every answer's buffers are freed by its release callback: RSS stays flat over 200k gathers
    table = pa.table({"s": pa.array(["value %d" % i for i in range(1000)]), "x": pa.array(range(1000), pa.float64())})
    prepared = RowsTable(table)
    rows = list(range(0, 1000, 100))

    def rss_kib() -> int:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * resource.getpagesize() // 1024

    for _ in range(20_000):
        prepared.take(rows)
    gc.collect()
    before = rss_kib()
    for _ in range(200_000):
        prepared.take(rows)
    gc.collect()
    assert rss_kib() - before < 4096  # a leak of one answer (~0.5 KiB) per call would be ~100 MiB


def test_a_table_not_exported_is_taken_by_pyarrow() -> None:
    table = pa.table({"a": [1, 2, 3]})
    prepared = RowsTable(table, export=False)
    assert not prepared.gathers
    _same(prepared.take([2, 2]), take_rows(table, [2, 2]))


def test_without_the_extension_rows_are_taken_by_pyarrow(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gather, "Gatherer", None)  # as after an install without a C compiler
    table = pa.table({"a": ["x", None, "z"]})
    prepared = RowsTable(table)
    assert not prepared.gathers
    _same(prepared.take([2, 1]), take_rows(table, [2, 1]))
