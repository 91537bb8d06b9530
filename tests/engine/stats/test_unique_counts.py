"""Value counts whose counts are all 1 (unique keys: ids, timestamps) through the table
reduction, and the reduction of counts in their narrowed types (as partitions ship them),
against numpy: the merged counts are ``np.unique`` of every row's value, the percentiles
``np.quantile(method="lower")``."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.files.layout import PERCENTILES, percentile_column
from engine.runtime.tasks.reduce import reduce_counts
from engine.stats.valuecounts import all_ones, exact_percentiles, merge_counts, narrow_counts, value_sorted_counts

TYPES = [pa.int64(), pa.int32(), pa.float64(), pa.timestamp("us", tz="UTC"), pa.date32()]


def _numpy_type(t: pa.DataType) -> type:
    return np.float64 if pa.types.is_floating(t) else np.int64


def _storage(t: pa.DataType) -> pa.DataType:
    return pa.int64() if pa.types.is_timestamp(t) else pa.int32() if pa.types.is_date(t) else t


def _part(values: list[int], repeats: list[int], t: pa.DataType) -> pa.Table:
    """A partition's value counts as a profile task ships them: value-sorted, counts narrowed."""
    keys, first = np.unique(np.array(values, _numpy_type(t)), return_index=True)
    counts = np.array(repeats, np.int64)[first] if repeats else np.ones(len(keys), np.int64)
    arr = pa.array(keys).cast(_storage(t))
    return narrow_counts(value_sorted_counts(arr if arr.type == t else arr.view(t), counts))


def _numbers(values: pa.Array | pa.ChunkedArray, t: pa.DataType) -> np.ndarray:
    """Values as numbers (timestamps and dates as their integer storage)."""
    values = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    return (values if _storage(t) == t else values.view(_storage(t))).to_numpy(zero_copy_only=False)


def _rows(part: pa.Table, t: pa.DataType) -> np.ndarray:
    """Every row's value of a part (each value repeated its count), as numbers."""
    if not part.num_rows:
        return np.zeros(0, _numpy_type(t))
    return np.repeat(_numbers(part["value"], t), part["count"].to_numpy().astype(np.int64))


@st.composite
def parts_of(draw: st.DrawFn) -> tuple[pa.DataType, list[pa.Table]]:
    t = draw(st.sampled_from(TYPES))
    span = draw(st.sampled_from([20, 10_000]))  # few values (shared by parts) or many (mostly unique)
    unique = draw(st.booleans())  # every count 1 (a unique key), or drawn counts (up to 300: uint16)
    parts = []
    for _ in range(draw(st.integers(1, 6))):
        values = draw(st.lists(st.integers(-span, span), max_size=40, unique=True))
        repeats = [] if unique else draw(st.lists(st.integers(1, 300), min_size=len(values), max_size=len(values)))
        parts.append(_part(values, repeats, t))
    return t, parts


@settings(max_examples=200, deadline=None)
@given(drawn=parts_of())
def test_merge_of_narrowed_counts_is_numpy_unique(drawn) -> None:
    t, parts = drawn
    merged = merge_counts(parts, t)
    rows = np.concatenate([_rows(p, t) for p in parts])
    want_values, want_counts = np.unique(rows, return_counts=True)
    assert merged.schema.field("count").type == pa.int64()
    assert merged.schema.field("value").type == t
    got = _numbers(merged["value"], t) if merged.num_rows else np.zeros(0, want_values.dtype)
    order = np.argsort(got, kind="stable")
    assert np.array_equal(got[order], want_values)
    assert np.array_equal(merged["count"].to_numpy()[order], want_counts)
    assert all_ones(merged) == bool((want_counts == 1).all())


@settings(max_examples=200, deadline=None)
@given(values=st.lists(st.integers(-(2**40), 2**40), min_size=1, max_size=300, unique=True))
def test_percentiles_of_distinct_values_need_no_cumulative_counts(values) -> None:
    keys = np.sort(np.array(values, np.int64))
    counts = value_sorted_counts(pa.array(keys), np.ones(len(keys), np.int64))
    fast = exact_percentiles(counts, presorted=True, distinct=True)
    assert fast == exact_percentiles(counts, presorted=True)
    for p in PERCENTILES:
        assert fast[percentile_column(p)].as_py() == int(np.quantile(keys, p, method="lower"))


@settings(max_examples=100, deadline=None)
@given(drawn=parts_of(), counted=st.booleans())
def test_reduction_of_narrowed_counts_equals_that_of_widened_ones(drawn, counted) -> None:
    """The reduction takes the partitions' counts as shipped (narrowed; unique keys' counts of 1
    neither widened nor concatenated): the same statistics, rows and table counts as of int64 counts."""
    t, parts = drawn
    wide = [p.set_column(1, "count", p["count"].cast(pa.int64())) for p in parts]
    cols = [("c", t, None)]
    names = ["c"] if counted else []
    a = reduce_counts(cols, 0.5, *[{"c": p} for p in parts], keep_counts=True, counted=names)
    b = reduce_counts(cols, 0.5, *[{"c": p} for p in wide], keep_counts=True, counted=names)
    assert a[0].value == b[0].value
    assert [(n, k, r.to_pylist()) for n, k, r in a[1]] == [(n, k, r.to_pylist()) for n, k, r in b[1]]
    assert a[2]["c"].equals(b[2]["c"]) and a[2]["c"].schema.field("count").type == pa.int64()
    rows = np.concatenate([_rows(p, t) for p in parts])
    assert a[0].value["c"]["distinct_count"] == len(np.unique(rows))
    if len(rows) and not pa.types.is_floating(t):
        want = int(np.quantile(rows, 0.5, method="lower"))
        got = a[0].value["c"][percentile_column(0.5)]
        assert _numbers(pa.array([got.as_py()], t), t)[0] == want


@settings(max_examples=100, deadline=None)
@given(drawn=parts_of())
def test_binning_inputs_of_narrowed_counts(drawn) -> None:
    """A second wave rebuilds the binning inputs from the first wave's counts as shipped
    (narrowed): the weights are None exactly when every count is 1, else the int64 counts."""
    from engine.runtime.tasks.profile import bin_inputs_of_counts

    t, parts = drawn
    for p in parts:
        if not p.num_rows:
            continue
        got = bin_inputs_of_counts({"c": p})["c"]
        counts = p["count"].to_numpy().astype(np.int64)
        assert got[0] == t
        assert np.array_equal(got[1], _numbers(p["value"], t))
        if bool((counts == 1).all()):
            assert got[2] is None
        else:
            assert got[2].dtype == np.int64 and np.array_equal(got[2], counts)


def test_all_ones_reads_the_narrowed_counts_and_both_ends() -> None:
    table = pa.table({"value": pa.array([1, 2, 3]), "count": pa.array([1, 1, 1], pa.uint8())})
    assert all_ones(table) and all_ones(table.slice(0, 0))
    assert not all_ones(table.set_column(1, "count", pa.array([1, 2, 1], pa.uint8())))
    assert not all_ones(table.set_column(1, "count", pa.array([1, 0, 1], pa.uint8())))
