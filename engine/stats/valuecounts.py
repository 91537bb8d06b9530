"""Exact value counts: the source of frequencies, exact distinct counts and exact percentiles.

Within a partition every orderable column keeps its value counts (O(distinct
values) memory): they give the exact distinct count, the frequencies of
discrete columns, and exact percentiles by a sort of the distinct values, so
no column is ever sorted row by row. Partial counts of several batches are kept
as a list and grouped once, so unique columns do not pay a merge per batch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine import types as mt
from engine.arrowcompute import contiguous
from engine.files import layout
from engine.files.layout import PERCENTILES, percentile_column  # noqa: F401 - the format's names, re-exported
from engine.measures.base import Accumulator
from engine.stats import runmerge, sortedvalues, stringsort
from engine.stats.stringparts import SharedHash, StringParts
from engine.types import has_percentiles, integer_storage


@dataclass
class ValueCounts:
    """A list of (value, count) tables; ``compact()`` groups them into one."""

    parts: list[pa.Table] = field(default_factory=list)

    def compact(self) -> pa.Table:
        if not self.parts:
            raise ValueError("compact() of empty value counts needs a type; use ValueCountsAccumulator.table")
        if len(self.parts) > 1:
            self.parts = [merge_counts(self.parts, self.parts[0].schema.field("value").type)]
        return self.parts[0]


def counted_integer_storage(t: pa.DataType) -> pa.DataType | None:
    """The integer type values of ``t`` are counted as in numpy (sort-based), or None:
    integers and dates (engine.types.integer_storage; other temporal types are not discrete)."""
    return integer_storage(t) if mt.is_integer(t) or mt.is_date(t) else None


def to_numpy_ints(values: pa.Array, storage: pa.DataType) -> np.ndarray:
    arr = values if values.type == storage else values.view(storage)
    return arr.to_numpy(zero_copy_only=False)


def from_numpy_ints(x: np.ndarray, storage: pa.DataType, t: pa.DataType) -> pa.Array:
    arr = pa.array(x, type=storage)
    return arr if storage == t else arr.view(t)


def _numpy_counts(x: np.ndarray, counts: np.ndarray | None, runs: list[int] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Sorted distinct values and their (summed) counts; sorting beats hashing for
    high-cardinality integers by a wide margin, and leaves the values in order.

    ``runs``: ``x`` is a concatenation of sorted runs of these lengths (partition counts),
    merged pairwise with the counts summed as they meet (engine/stats/runmerge.py).
    """
    if runs is not None:
        return runmerge.merge_counts(x, counts, runmerge.run_bounds(runs))
    if counts is None:
        s = np.sort(x)
        starts = np.flatnonzero(np.concatenate(([True], s[1:] != s[:-1]))) if len(s) else np.array([], np.int64)
        if len(starts) == len(s):
            return s, np.ones(len(s), np.int64)
        ends = np.append(starts[1:], len(s))
        return s[starts], (ends - starts).astype(np.int64)
    order = np.argsort(x)
    xs, cs = x[order], counts[order]
    starts = np.flatnonzero(np.concatenate(([True], xs[1:] != xs[:-1])))
    return xs[starts], np.add.reduceat(cs, starts).astype(np.int64)


_SORTED = {b"sorted": b"value"}


def narrow_count_array(counts: np.ndarray) -> pa.Array:
    """Counts in the narrowest unsigned type that holds them. Most counts are 1 in the
    columns whose counts are many, so 8 bytes a count is mostly zeros."""
    top = int(counts.max()) if len(counts) else 0
    for t in (np.uint8, np.uint16, np.uint32):
        if top <= np.iinfo(t).max:
            return pa.array(counts.astype(t, copy=False))
    return pa.array(counts.astype(np.int64, copy=False))


def narrow_counts(counts: pa.Table) -> pa.Table:
    """Value counts as a partition task ships them through the object store: the count
    column narrowed (:func:`narrow_count_array`; int64 counts were a quarter of the
    28 MB a bench partition's first wave puts). Consumers take them back with
    :func:`widen_counts` before any arithmetic."""
    i = counts.schema.get_field_index("count")
    if i < 0 or counts.num_rows == 0:
        return counts
    return counts.set_column(i, "count", narrow_count_array(counts["count"].to_numpy()))


def widen_counts(counts: pa.Table) -> pa.Table:
    """Value counts with int64 counts again (a no-op when they are)."""
    i = counts.schema.get_field_index("count")
    if i < 0 or counts.schema.field(i).type == pa.int64():
        return counts
    return counts.set_column(i, "count", counts["count"].cast(pa.int64()))


def value_sorted_counts(values: pa.Array, counts: np.ndarray) -> pa.Table:
    """A value counts table from values already in ascending order (marked as such)."""
    return pa.table({"value": values, "count": pa.array(counts, pa.int64())}, metadata=_SORTED)


#: Value counts may carry each value's text form (engine.values), when it was computed anyway.
TEXT = "text"

#: Value counts of strings carry each value's 64-bit hash (the theta hash) and are in hash order.
HASH = "hash"
_HASHED = {b"sorted": b"hash"}


def hashed_counts(values: pa.Array, counts: np.ndarray | pa.Array, hashes: np.ndarray) -> pa.Table:
    """A value counts table in ascending hash order, with the hashes (``hashes`` sorted);
    ``counts`` int64, or an Arrow array kept in its own integer type."""
    count = counts if isinstance(counts, pa.Array) else pa.array(counts, pa.int64())
    return pa.table({"value": values, "count": count, HASH: pa.array(hashes, pa.uint64())}, metadata=_HASHED)


def counts_hashed(counts: pa.Table) -> bool:
    """Whether value counts carry hashes and are in hash order (strings of partitions)."""
    return (counts.schema.metadata or {}).get(b"sorted") == b"hash" and HASH in counts.column_names


def all_ones(counts: pa.Table) -> bool:
    """Whether every count is 1 (a unique key's), read in the type they are in (narrowed, a
    partition's): their least and largest, in one pass."""
    if counts.num_rows == 0:
        return True
    extremes = pc.min_max(counts["count"])
    return extremes["min"].as_py() == 1 and extremes["max"].as_py() == 1


def _concatenated(parts: list[pa.Table], type_: pa.DataType) -> tuple[pa.Array, np.ndarray | None]:
    """The values (one contiguous array) and counts (int64) of several partial value counts
    (counts in any integer type), or None for the counts when every one is 1: an all-distinct
    column's are then neither widened, concatenated nor summed (engine.stats.runmerge)."""
    values = contiguous(pa.chunked_array([c for p in parts for c in p["value"].chunks], type=type_))
    if all(all_ones(p) for p in parts):
        return values, None
    return values, np.concatenate([p["count"].to_numpy() for p in parts], dtype=np.int64)


def _merge_hashed(parts: list[pa.Table], type_: pa.DataType) -> tuple[StringParts, np.ndarray, np.ndarray, np.ndarray] | None:
    """Merge value counts that are runs sorted by hash, without copying their values.

    A merge of the runs (engine.stats.runmerge: what a stable argsort of them gives),
    then one walk that checks equal hashes hold equal values, in place in
    the parts' buffers (engine.stats.stringparts). Returns the values, the global
    row of each distinct value (in hash order), its total count and its hash; None
    if two values share a hash (the caller then merges by value).
    """
    strings = StringParts([p["value"] for p in parts], type_)
    try:
        rows, summed, hashes = strings.merge_runs(
            np.concatenate([p[HASH].to_numpy() for p in parts]), np.concatenate([p["count"].to_numpy() for p in parts], dtype=np.int64)
        )
    except SharedHash:
        return None
    return strings, rows, summed, hashes


def hashed_frequencies(
    parts: list[pa.Table], type_: pa.DataType, kind_of: Callable[[int], str], merged_out: list[pa.Table] | None = None
) -> tuple[int, str, pa.Table] | None:
    """A column's exact distinct count and its stored frequency rows, from partition
    counts that are all hash-ordered runs (``counts_hashed``); None if two values share
    a hash (the caller then merges by value).

    ``kind_of(distinct)`` says which rows are stored (files.writer.frequency_kind):
    none, those seen more than once, or all. Only the stored rows are copied out of
    the parts: the runs are merged by hash, equal hashes checked in place, the stored
    rows gathered, then put in (decreasing count, value) order.
    ``merged_out``: a list the whole merged counts (hash order, with hashes) are appended to
    (the table's counts at a full analyze: engine/stats/appendcounts.py); every value is then
    gathered once, and the stored ones are taken from those.
    """
    parts = [p for p in parts if p.num_rows]
    if not parts:
        kind = kind_of(0)
        empty = pa.table({"value": pa.array([], type_), "count": pa.array([], pa.int64())})
        if merged_out is not None:
            merged_out.append(empty)
        return 0, kind, empty
    merged = _merge_hashed(parts, type_)
    if merged is None:
        return None
    strings, rows, summed, hashes = merged
    distinct = len(rows)
    kind = kind_of(distinct)
    keep = None  # the positions (in hash order) of the stored values; None: all of them
    if kind == layout.FREQ_ALL_DISTINCT:
        keep = np.zeros(0, np.int64)
    elif kind == layout.FREQ_DUPLICATES_ONLY:
        keep = np.flatnonzero(summed > 1)
    if merged_out is not None:
        # every value, in hash order (the table's counts); the stored ones are taken from them:
        # a take from one array, where one from the parts (a chunk per partition) took 10x longer
        everything = strings.take(rows)
        merged_out.append(hashed_counts(everything, summed, hashes))
        values = everything if keep is None else everything.take(pa.array(keep))
    else:
        values = strings.take(rows if keep is None else rows[keep])
    if keep is not None:
        summed = summed[keep]
    if len(values) > 1:
        by_frequency_then_value = stringsort.sort_indices(values, major=-summed)
        values, summed = values.take(pa.array(by_frequency_then_value)), summed[by_frequency_then_value]
    return distinct, kind, pa.table({"value": values, "count": pa.array(summed, pa.int64())})


def counts_sorted(counts: pa.Table) -> bool:
    """Whether value counts are known to be in value order (the integer path sorts)."""
    return (counts.schema.metadata or {}).get(b"sorted") == b"value"


def _sorted_runs(parts: list[pa.Table]) -> list[int] | None:
    """The parts' lengths when every one is in value order (runs to merge), else None."""
    return [p.num_rows for p in parts] if all(counts_sorted(p) for p in parts) else None


def merge_counts(parts: list[pa.Table], type_: pa.DataType) -> pa.Table:
    """Exact (value, count) of several partial value counts, in no particular order; their
    counts in any integer type (narrowed: :func:`narrow_counts`), the merged ones int64.

    Uses Arrow's hash kernels rather than an Acero group-by (several times
    faster): when every partial count is 1 (the common case of high-cardinality
    columns) the merged counts are the value counts of the values themselves;
    otherwise the values are dictionary-encoded and the counts summed per code.
    """
    parts = [p for p in parts if p.num_rows]
    if not parts:
        return pa.table({"value": pa.array([], type_), "count": pa.array([], pa.int64())})
    if len(parts) == 1:
        return widen_counts(parts[0])
    if all(counts_hashed(p) for p in parts):
        merged = _merge_hashed(parts, type_)
        if merged is not None:
            strings, rows, summed, hashes = merged
            return hashed_counts(strings.take(rows), summed, hashes)
    values, counts = _concatenated(parts, type_)
    # integers and dates, and the times, timestamps and durations counted for their exact table
    # level (ColumnProfile.counted): sorted as their integer storage, whose order is theirs
    storage = integer_storage(type_)
    if storage is not None:
        u, c = _numpy_counts(to_numpy_ints(values, storage), counts, runs=_sorted_runs(parts))
        return pa.table({"value": from_numpy_ints(u, storage, type_), "count": pa.array(c)}, metadata=_SORTED)
    if sortedvalues.supports(type_) and mt.is_decimal(type_):  # narrow decimals: by their unscaled int64
        u, c = _numpy_counts(sortedvalues.unscaled(values), counts, runs=_sorted_runs(parts))
        return value_sorted_counts(sortedvalues.to_arrow(u, type_), c)
    if (mt.is_float32(type_) or mt.is_float64(type_)) and values.null_count == 0 and not pc.any(pc.is_nan(values)).as_py():
        # partitions' float counts (no NaN, -0.0 folded into 0.0): numpy's order is IEEE's
        x = values.to_numpy(zero_copy_only=False)
        u, c = _numpy_counts(x + x.dtype.type(0), counts, runs=_sorted_runs(parts))
        return value_sorted_counts(pa.array(u, type_), c)
    if counts is None:
        vc = pc.value_counts(values)
        return pa.table({"value": vc.field(0), "count": vc.field(1)})
    encoded = pc.dictionary_encode(values)
    codes = encoded.indices.to_numpy(zero_copy_only=False)
    # integer sums: np.add.at is exact where float bincount weights would round beyond 2^53
    summed = np.zeros(len(encoded.dictionary), dtype=np.int64)
    np.add.at(summed, codes, counts)
    return pa.table({"value": encoded.dictionary, "count": pa.array(summed)})


def batch_value_counts(values: pa.Array) -> pa.Table:
    """(value, count) of the non-null, non-NaN values of one batch."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if mt.is_dictionary(values.type):
        values = values.dictionary_decode()
    valid = values.drop_null()
    if mt.is_floating(valid.type):
        valid = valid.filter(pc.invert(pc.is_nan(valid)))
        valid = pc.add(valid, pa.scalar(0.0, valid.type))  # -0.0 + 0.0 = 0.0: one zero (IEEE equality)
    vc = pc.value_counts(valid)
    return pa.table({"value": vc.field(0), "count": vc.field(1)})


class ValueCountsAccumulator(Accumulator[ValueCounts]):
    """Exact (value, count) pairs: discrete columns."""

    def __init__(self, type_: pa.DataType) -> None:
        self._type = type_

    def zero(self) -> ValueCounts:
        return ValueCounts()

    def update(self, state: ValueCounts, batch: pa.Array) -> ValueCounts:
        state.parts.append(batch_value_counts(batch))
        return state

    def merge(self, a: ValueCounts, b: ValueCounts) -> ValueCounts:
        return ValueCounts(a.parts + b.parts)

    def table(self, state: ValueCounts) -> pa.Table:
        """Value counts, in no particular order."""
        if not state.parts:
            return pa.table({"value": pa.array([], self._type), "count": pa.array([], pa.int64())})
        return state.compact()

    def finalize(self, state: ValueCounts) -> dict[str, Any]:
        return exact_statistics(sorted_counts(self.table(state)), self._type)


def exact_statistics(by_value: pa.Table, type_: pa.DataType, distinct: bool = False) -> dict[str, Any]:
    """Distinct count and (where they apply) exact percentiles from value-sorted counts
    (``distinct``: every count is 1, :func:`exact_percentiles`)."""
    out: dict[str, Any] = {"distinct_count": by_value.num_rows}
    if _has_exact_percentiles(type_):
        out.update(exact_percentiles(by_value, presorted=True, distinct=distinct))
    return out


@dataclass
class Values:
    parts: list[pa.Array] = field(default_factory=list)


class DistinctValuesAccumulator(Accumulator[Values]):
    """Exact distinct count and percentiles of continuous columns (floats, times).

    Keeps the partition's valid values (their frequencies are not stored), so a
    selection gives exact percentiles in O(n) instead of a sort.
    """

    def __init__(self, type_: pa.DataType) -> None:
        self._type = type_

    def zero(self) -> Values:
        return Values()

    def update(self, state: Values, batch: pa.Array) -> Values:
        if isinstance(batch, pa.ChunkedArray):
            batch = batch.combine_chunks()
        valid = batch.drop_null()
        if mt.is_floating(valid.type):
            valid = valid.filter(pc.invert(pc.is_nan(valid)))
            valid = pc.add(valid, pa.scalar(0.0, valid.type))  # -0.0 + 0.0 = 0.0: one zero (IEEE equality)
        state.parts.append(valid)
        return state

    def merge(self, a: Values, b: Values) -> Values:
        return Values(a.parts + b.parts)

    def values(self, state: Values) -> pa.Array:
        if not state.parts:
            return pa.array([], self._type)
        return pa.concat_arrays(state.parts) if len(state.parts) > 1 else state.parts[0]

    def finalize(self, state: Values) -> dict[str, Any]:
        values = self.values(state)
        out: dict[str, Any] = {"distinct_count": pc.count_distinct(values).as_py() if len(values) else 0}
        out.update(selected_percentiles(values))
        return out


def selected_percentiles(values: pa.Array, probabilities: tuple[float, ...] = PERCENTILES) -> dict[str, pa.Scalar | None]:
    """Lower nearest-rank percentiles of raw values by selection (np.partition)."""
    from engine.stats.histograms import storage_type

    names = [percentile_column(p) for p in probabilities]
    n = len(values)
    if n == 0:
        return dict.fromkeys(names)
    t = values.type
    if mt.is_floating(t):
        x = values.to_numpy(zero_copy_only=False)
    else:
        st = storage_type(t)
        x = (values.view(st) if st != t else values).to_numpy(zero_copy_only=False)
    positions = sorted({int(np.floor(p * (n - 1))) for p in probabilities})
    part = np.partition(x, positions)
    picked = {pos: part[pos] for pos in positions}
    out = [picked[int(np.floor(p * (n - 1)))] for p in probabilities]
    arr = pa.array(np.array(out, dtype=x.dtype))
    if not mt.is_floating(t):
        st = storage_type(t)
        arr = arr.cast(st)
        arr = arr if st == t else arr.view(t)
    else:
        arr = arr.cast(t)
    return {name: arr[i] for i, name in enumerate(names)}


def _has_exact_percentiles(t: pa.DataType) -> bool:
    from engine.types import has_percentiles

    return has_percentiles(t)


def sorted_counts(counts: pa.Table) -> pa.Table:
    """Value counts sorted by value ascending."""
    if counts_sorted(counts):
        return counts
    order = pc.sort_indices(counts["value"])
    return counts.take(order).replace_schema_metadata(_SORTED)


def by_frequency(by_value: pa.Table) -> pa.Table:
    """Decreasing count, ties by increasing value, from value-sorted counts (a stable sort)."""
    counts = by_value["count"].to_numpy()
    top = int(counts.max()) if len(counts) else 0
    # counts below 2^16 sort as uint16, which numpy's stable sort does by radix (O(n))
    key = (top - counts).astype(np.uint16) if top < (1 << 16) else -counts
    order = np.argsort(key, kind="stable")
    return by_value.take(pa.array(order)).replace_schema_metadata(None)


def frequency_order(counts: pa.Table) -> pa.Table:
    """Decreasing count, ties by increasing value, from counts in any order.

    Strings and binary values are ordered by a numpy word-by-word sort
    (engine.stats.stringsort), several times faster than a comparison sort by
    value followed by a stable sort by count.
    """
    if not counts_sorted(counts) and counts.num_rows > 1:
        values = contiguous(counts["value"])
        if stringsort.supports(values.type) and not values.null_count:
            order = stringsort.sort_indices(values, major=-counts["count"].to_numpy())
            return counts.take(pa.array(order)).replace_schema_metadata(None)
    return by_frequency(sorted_counts(counts))


def exact_percentiles(
    counts: pa.Table, probabilities: tuple[float, ...] = PERCENTILES, presorted: bool = False, distinct: bool = False
) -> dict[str, pa.Scalar | None]:
    """Lower nearest-rank percentiles: the value at 0-based position floor(p * (n - 1)).

    That is numpy's ``quantile(method="lower")``; DuckDB's ``quantile_disc`` is not
    (it takes position ceil(p * n) - 1, numpy's ``method="inverted_cdf"``).
    ``distinct``: every count is 1 (the caller knows: as many values as non-null rows), so a
    position is its value's row; the cumulative counts (40 MB for 5 M keys) are not summed.
    """
    names = [percentile_column(p) for p in probabilities]
    if counts.num_rows == 0:
        return dict.fromkeys(names)
    s = counts if presorted else sorted_counts(counts)
    cum = None if distinct else np.cumsum(s["count"].to_numpy())
    n = s.num_rows if cum is None else int(cum[-1])
    positions = np.array([int(np.floor(p * (n - 1))) for p in probabilities], dtype=np.int64)
    # the value whose cumulative count first exceeds the position
    idx = positions if cum is None else np.searchsorted(cum, positions, side="right")
    values = s["value"].take(pa.array(idx))
    return {name: values[i] for i, name in enumerate(names)}


#: Below this many distinct values a column keeps complete frequencies, however
#: distinct: they are small, and a top-k over few values should show them all.
MIN_DUPLICATES_ONLY = 1024


def stored_frequencies(counts: pa.Table, non_null: int, mostly_distinct_ratio: float) -> tuple[str, pa.Table]:
    """What frequencies.parquet keeps of a column's exact counts, sorted for storage.

    All distinct: nothing. Mostly distinct (distinct >= ratio * non-null): only
    the values seen more than once, every other value being implicitly unique.
    Otherwise: every value. Only the stored rows are sorted.
    """
    kind = frequency_kind(counts.num_rows, non_null, mostly_distinct_ratio)
    if kind == layout.FREQ_ALL_DISTINCT:
        return kind, counts.slice(0, 0)
    if kind == layout.FREQ_DUPLICATES_ONLY:
        return kind, frequency_order(counts.filter(pc.greater(counts["count"], 1)))
    return kind, frequency_order(counts)


def frequency_kind(distinct: int, non_null: int, mostly_distinct_ratio: float) -> str:
    """Which rows of a column's exact counts frequencies.parquet keeps (``stored_frequencies``)."""
    if distinct and distinct == non_null:
        return layout.FREQ_ALL_DISTINCT
    if distinct >= MIN_DUPLICATES_ONLY and distinct >= mostly_distinct_ratio * non_null:
        return layout.FREQ_DUPLICATES_ONLY
    return layout.FREQ_COMPLETE


def exact_of_merged(merged: pa.Table, type_: pa.DataType, non_null: int, mostly_distinct_ratio: float) -> tuple[dict[str, Any], pa.Table]:
    """A discrete column's exact table statistics (distinct count, percentiles where they apply,
    the frequencies' kind) and its stored frequency rows, from its merged value counts (a full
    reduction's, engine/runtime/tasks.py; an append's small or re-kinded column, appendcounts)."""
    exact: dict[str, Any] = {"distinct_count": merged.num_rows}
    if has_percentiles(type_):
        if merged.num_rows == non_null and not counts_sorted(merged) and not mt.is_decimal(type_):
            exact.update(selected_percentiles(contiguous(merged["value"])))  # all distinct: no sort
        else:
            exact.update(exact_percentiles(merged, distinct=merged.num_rows == non_null))
    kind, stored = stored_frequencies(merged, non_null, mostly_distinct_ratio)
    exact["frequencies"] = kind
    return exact, stored
