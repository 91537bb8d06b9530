"""Which partitions hold a value, and how often: per-value partition distributions.

An optional part of the table-level frequencies (``AnalyzeOptions.value_partitions``,
docs/FREQUENCIES.md). For every stored frequency row the table's reduction already
holds the partitions' exact value counts, in partition order; this module turns
them into one distribution per stored value, so a lookup finds the partitions
containing a value from one row of the table file instead of one file per
partition.

Representation (one Arrow struct per value, ``DISTRIBUTION_TYPE``):

- ``count``: list<int64>; ``index``: list<int32> or null.
- *dense* (``index`` null): ``count`` has one entry per partition of the table,
  zeros included. Chosen when the value is in at least ``DENSE_NUMERATOR /
  DENSE_DENOMINATOR`` (2/3) of the partitions: a sparse entry costs 12 bytes (an
  int32 index and an int64 count), a dense one 8, so 2/3 is where the two take
  the same raw size. A value in most partitions is then a plain vector; one in
  a few a short map. Either way a value costs at most 1.5x the entries it
  had in the partitions' value counts, so the column is bounded by 1.5x the
  partitions' distinct values.
- *sparse*: ``index`` holds the partitions (increasing) that hold the value and
  ``count`` the counts there, pairwise.

Partition numbers index a list of partition keys (the file's metadata,
``metastore.partitions``, in table order). Pure functions; no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from engine import arrowcompute as pc
from engine import types as mt
from engine.arrowcompute import contiguous
from engine.files import layout

# the kernels (sketches: numba) are imported where used: lookups import this module for
# COLUMN, FIELD and decode, and must start without them

#: the column of the table-level frequencies.parquet that holds the distributions (the format's)
COLUMN, DISTRIBUTION_TYPE, FIELD = layout.VALUE_PARTITIONS_COLUMN, layout.DISTRIBUTION_TYPE, layout.VALUE_PARTITIONS_FIELD
#: a value in at least this share of the partitions is stored dense
DENSE_NUMERATOR, DENSE_DENOMINATOR = 2, 3
#: list entries per built chunk: list offsets are int32
_MAX_CHUNK_ENTRIES = 1 << 30


def dense(present: np.ndarray | int, partitions: int) -> np.ndarray | bool:
    """Whether a value present in ``present`` of ``partitions`` partitions is stored dense."""
    return DENSE_DENOMINATOR * np.asarray(present) >= DENSE_NUMERATOR * partitions


def _probe_type(t: pa.DataType) -> pa.DataType:
    """The type values are matched in (Arrow's set lookup has no view kernels)."""
    if mt.is_string_view(t):
        return pa.large_string()
    if mt.is_binary_view(t):
        return pa.large_binary()
    return t


@dataclass(frozen=True)
class Entries:
    """(row, partition, count) triples, each (row, partition) at most once: a
    distribution column in its flat form (``entries`` gives them grouped by
    partition, ``flatten`` by row)."""

    rows: np.ndarray  # int64
    partitions: np.ndarray  # int32
    counts: np.ndarray  # int64

    def __post_init__(self) -> None:
        if not (len(self.rows) == len(self.partitions) == len(self.counts)):
            raise ValueError("rows, partitions and counts must have the same length")


def entries(parts: Sequence[pa.Table], values: pa.Array | pa.ChunkedArray, hashed: bool = False) -> Entries:
    """Where each of ``values`` (distinct) occurs in the partitions' value counts.

    ``parts``: one (value, count) table per partition, in partition order, each
    value at most once per table (exact value counts). Values of a partition that
    are not among ``values`` are skipped (e.g. values stored only implicitly).

    Values are matched by integer keys where there are some: the storage integers
    of integers, dates and narrow decimals, or, with ``hashed``, the 64-bit theta
    hashes string counts carry (``valuecounts.HASH``). ``hashed`` is the caller's
    promise that no two distinct values of ``parts`` share a hash (what
    ``valuecounts.hashed_frequencies`` checks when it returns a result); the
    values' own hashes are computed here. The keys are matched by a binary search
    in the sorted keys of ``values``; other types by one Arrow set lookup over every
    partition's values (``values`` hashed once).
    """
    values = values.combine_chunks() if isinstance(values, pa.ChunkedArray) else values
    lengths = np.array([p.num_rows for p in parts], np.int64)
    if not len(values) or not lengths.sum():
        return Entries(np.zeros(0, np.int64), np.zeros(0, np.int32), np.zeros(0, np.int64))
    nonempty = [p for p in parts if p.num_rows]
    keys = _keys(nonempty, values, hashed)
    if keys is not None:
        part_keys, value_keys = keys
        order = np.argsort(value_keys, kind="stable")
        ordered = value_keys[order]
        found = []
        for k in part_keys:
            at = np.searchsorted(ordered, k)
            np.minimum(at, len(ordered) - 1, out=at)
            found.append(np.where(ordered[at] == k, order[at], -1))
        rows = np.concatenate(found).astype(np.int64, copy=False)
    else:
        rows = _set_lookup(nonempty, values)
    partition = np.repeat(np.arange(len(parts), dtype=np.int32), lengths)
    counts = np.concatenate([p["count"].to_numpy().astype(np.int64, copy=False) for p in nonempty])
    keep = rows >= 0
    if not keep.all():
        rows, partition, counts = rows[keep], partition[keep], counts[keep]
    return Entries(rows, partition, counts)


def _integer_keys(values: pa.Array) -> np.ndarray | None:
    """Values as distinct integers with the same equality (None: no such form here)."""
    t = values.type
    if mt.is_integer(t):
        return values.to_numpy(zero_copy_only=False)
    if mt.is_date32(t):
        return values.view(pa.int32()).to_numpy(zero_copy_only=False)
    if mt.is_date64(t):
        return values.view(pa.int64()).to_numpy(zero_copy_only=False)
    if mt.is_decimal(t) and t.byte_width in (16, 32) and t.precision <= 18 and not values.null_count:
        from engine.stats import sortedvalues

        return sortedvalues.unscaled(values)
    return None


def _keys(parts: list[pa.Table], values: pa.Array, hashed: bool) -> tuple[list[np.ndarray], np.ndarray] | None:
    """Integer keys of every part's values and of ``values``, or None (match by value)."""
    from engine.stats import sketches
    from engine.stats.valuecounts import HASH, counts_hashed

    if hashed and all(counts_hashed(p) for p in parts):
        return [p[HASH].to_numpy() for p in parts], sketches.theta_hashes_bytes(values)
    value_keys = _integer_keys(values)
    if value_keys is None:
        return None
    part_keys = []
    for p in parts:
        v = contiguous(p["value"])
        if v.type != values.type:
            return None
        k = _integer_keys(v)
        if k is None:
            return None
        part_keys.append(k)
    return part_keys, value_keys


def _set_lookup(parts: list[pa.Table], values: pa.Array) -> np.ndarray:
    """Row of ``values`` each part value equals (-1: none), by Arrow's set lookup."""
    probe = _probe_type(values.type)
    column = pa.chunked_array([c for p in parts for c in p["value"].chunks], type=parts[0]["value"].type)
    if column.type != probe:
        column = column.cast(probe)
    if values.type != probe:
        values = values.cast(probe)
    found = pc.index_in(column, value_set=values)
    if found.null_count:
        found = pc.fill_null(found, -1)
    return found.to_numpy().astype(np.int64, copy=False)


def build(e: Entries, n_rows: int, n_partitions: int) -> pa.ChunkedArray:
    """The distribution column (``DISTRIBUTION_TYPE``) of ``n_rows`` values from their
    entries; O(entries) with one numpy pass per partition (entries not grouped by
    increasing partition, as ``entries`` gives them, are first sorted so)."""
    if len(e.partitions) and not (np.diff(e.partitions) >= 0).all():
        order = np.argsort(e.partitions, kind="stable")
        e = Entries(e.rows[order], e.partitions[order], e.counts[order])
    present = np.bincount(e.rows, minlength=n_rows).astype(np.int64) if len(e.rows) else np.zeros(n_rows, np.int64)
    is_dense = dense(present, n_partitions) & (present > 0)
    count_len = np.where(is_dense, n_partitions, present)
    index_len = np.where(is_dense, 0, present)
    count_start = np.concatenate(([0], np.cumsum(count_len)))
    index_start = np.concatenate(([0], np.cumsum(index_len)))
    count_values = np.zeros(int(count_start[-1]), np.int64)
    index_values = np.empty(int(index_start[-1]), np.int32)
    fill = np.zeros(n_rows, np.int64)  # sparse entries placed so far per row
    # entries are grouped by partition (increasing): one vectorised step per partition, in
    # which a row occurs at most once, so ``fill`` gives each entry its rank within its row
    bounds = np.flatnonzero(np.diff(e.partitions)) + 1 if len(e.partitions) else np.zeros(0, np.int64)
    for lo, hi in zip(np.concatenate(([0], bounds)), np.concatenate((bounds, [len(e.partitions)]))):
        if lo == hi:
            continue
        r, c, j = e.rows[lo:hi], e.counts[lo:hi], int(e.partitions[lo])
        d = is_dense[r]
        rd, rs = r[d], r[~d]
        count_values[count_start[rd] + j] = c[d]
        slot = fill[rs]
        count_values[count_start[rs] + slot] = c[~d]
        index_values[index_start[rs] + slot] = j
        fill[rs] = slot + 1
    chunks = []
    for lo, hi in _row_chunks(count_start, index_start):
        co = (count_start[lo : hi + 1] - count_start[lo]).astype(np.int32)
        io = (index_start[lo : hi + 1] - index_start[lo]).astype(np.int32)
        counts = pa.ListArray.from_arrays(
            pa.array(co), pa.array(count_values[count_start[lo] : count_start[hi]]), type=DISTRIBUTION_TYPE.field("count").type
        )
        index = pa.ListArray.from_arrays(  # null (dense) rows have no entries
            pa.array(io), pa.array(index_values[index_start[lo] : index_start[hi]]), type=DISTRIBUTION_TYPE.field("index").type,
            mask=pa.array(is_dense[lo:hi]),
        )  # fmt: skip
        chunks.append(pa.StructArray.from_arrays([index, counts], fields=list(DISTRIBUTION_TYPE)))
    return pa.chunked_array(chunks, type=DISTRIBUTION_TYPE)


def _row_chunks(count_start: np.ndarray, index_start: np.ndarray) -> list[tuple[int, int]]:
    """Row ranges [lo, hi) whose list entries fit int32 offsets (one range but for huge columns)."""
    n = len(count_start) - 1
    if n == 0:
        return [(0, 0)]
    out, lo = [], 0
    while lo < n:
        hi_c = int(np.searchsorted(count_start, count_start[lo] + _MAX_CHUNK_ENTRIES, "right")) - 1
        hi_i = int(np.searchsorted(index_start, index_start[lo] + _MAX_CHUNK_ENTRIES, "right")) - 1
        hi = max(min(hi_c, hi_i, n), lo + 1)
        out.append((lo, hi))
        lo = hi
    return out


def distributions(parts: Sequence[pa.Table], values: pa.Array | pa.ChunkedArray, hashed: bool = False) -> pa.ChunkedArray:
    """The distribution of each of ``values`` over the partitions whose value counts are ``parts``
    (partition order): one ``DISTRIBUTION_TYPE`` row per value, aligned with ``values``
    (``hashed``: see ``entries``)."""
    return build(entries(parts, values, hashed), len(values), len(parts))


def decode(row: Mapping[str, Sequence[int] | None] | None, n_partitions: int) -> list[tuple[int, int]]:
    """(partition number, count) pairs of one distribution (``pyarrow`` ``as_py()`` form),
    partitions increasing, only where the value occurs."""
    if row is None:
        return []
    counts = row["count"] or []
    if row["index"] is None:
        if len(counts) != n_partitions:
            raise ValueError(f"a dense distribution has {len(counts)} counts for {n_partitions} partitions")
        return [(i, int(c)) for i, c in enumerate(counts) if c]
    return [(int(i), int(c)) for i, c in zip(row["index"], counts)]


def flatten(column: pa.Array | pa.ChunkedArray, n_partitions: int) -> Entries:
    """The entries of a distribution column (the inverse of ``build``; zeros of dense rows dropped)."""
    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if isinstance(arr, pa.ChunkedArray):  # an empty chunked array
        arr = pa.array([], DISTRIBUTION_TYPE)
    index, counts = arr.field("index"), arr.field("count")
    is_dense = index.is_null().to_numpy(zero_copy_only=False)
    count_len = pc.list_value_length(counts).to_numpy(zero_copy_only=False).astype(np.int64)
    rows = np.repeat(np.arange(len(arr), dtype=np.int64), count_len)
    c = counts.flatten().to_numpy().astype(np.int64)
    within = np.arange(len(c), dtype=np.int64) - np.repeat(np.concatenate(([0], np.cumsum(count_len)))[:-1], count_len)
    part = np.empty(len(c), np.int32)
    dense_entry = np.repeat(is_dense, count_len)
    part[dense_entry] = within[dense_entry]
    part[~dense_entry] = index.flatten().to_numpy().astype(np.int32)
    if dense_entry.any() and (count_len[is_dense] != n_partitions).any():
        raise ValueError(f"a dense distribution without {n_partitions} counts")
    keep = c != 0
    order = np.lexsort((part[keep], rows[keep]))
    return Entries(rows[keep][order], part[keep][order], c[keep][order])
