"""A discrete column's exact table-level counts after an append, in the size of the append.

A full analyze reduces every partition's value counts into the table's (a sort or a hash
merge of all of them) and writes the table's whole frequencies.parquet. After an append,
almost all of that is known: the table's counts at the last full analyze (the *base*,
``table_counts.arrow``), plus the partitions appended since. So an append re-analyze only
looks the appended values up in them (a binary search per value into key-sorted counts) and
derives, exactly as a full reduction would:

- the table's exact distinct count and non-null count;
- the frequencies' kind (``complete`` / ``duplicates_only`` / ``all_distinct``); a change of
  kind other than all distinct becoming duplicates only makes the older segments' rows of the
  column useless (rows a new kind does not store, or no rows for values it does), so the column
  is then merged in full and its segment holds it in full (``Appended.full``), as do small columns;
- a *delta segment* of the table's frequencies (docs/FORMAT.md, "Table frequencies in
  segments"): the new head (the first 1,024 rows a full file would have, from the previous
  head and the changed values: appends only raise frequencies, so nothing else can enter
  it) and every other changed stored value, all with their table frequencies now;
- exact percentiles of numeric columns, by a binary search over the values of the sorted
  counts (engine/stats/selection.py).

Pure: counts in, counts out (engine/runtime/tasks.py reads and writes the files).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine import types as mt
from engine.arrowcompute import contiguous
from engine.files import layout
from engine.stats import selection, sketches
from engine.stats.valuecounts import (
    HASH,
    counts_hashed,
    exact_of_merged,
    frequency_kind,
    frequency_order,
    merge_counts,
    widen_counts,
)

#: Columns whose counts at the base hold at most this many values are merged in full (cheap,
#: and needs no key order); larger ones take the binary searches.
SMALL = 65_536


@dataclass(frozen=True)
class Previous:
    """What the table's current statistics say of a column (the newest segment and the catalog)."""

    distinct: int
    kind: str  # frequencies kind
    stored_rows: int  # rows a full read of the merged frequencies returns
    head: pa.Table  # (value typed, count): the newest segment's head row group, in its order


@dataclass(frozen=True)
class Appended:
    """A column's table level after the append."""

    exact: dict[str, Any]  # distinct_count, frequencies (kind), percentiles where they apply
    rows: pa.Table  # (value, count): the delta segment's rows, head then changed, in file order
    stored_rows: int
    distinct: int
    non_null: int
    #: ``rows`` are every stored row of the column (its segment replaces the older ones for it)
    full: bool = False


@dataclass(frozen=True)
class _Keyed:
    """Value counts with a sortable key per value (the value's integer form, or its hash), ascending."""

    keys: np.ndarray
    counts: np.ndarray  # as stored: the narrowest unsigned type that holds them (a sum promotes)
    values: pa.Array
    hashed: bool  # keys are 64-bit hashes: equal keys must hold equal values


def _keyed(counts: pa.Table, type_: pa.DataType) -> _Keyed | None:
    """Key-sorted counts, or None when the column's values have no key here (booleans, binary
    without hashes, wide decimals) or two values share one (a hash collision)."""
    values = contiguous(counts["value"])
    # not widened: the table's counts are mostly 1s, stored as uint8 (5 MB, not 40 MB, for the
    # bench table's ids); only the counts of the appended values are taken from them
    n = counts["count"].to_numpy(zero_copy_only=False) if counts.num_rows else np.zeros(0, np.int64)
    hashed = counts_hashed(counts)
    if hashed:
        keys = np.asarray(counts[HASH].to_numpy(zero_copy_only=False))
    elif selection.supported(type_):
        keys = selection.sort_keys(values, type_)
    else:
        return None
    if len(keys) > 1 and not bool((keys[1:] > keys[:-1]).all()):  # (one pass when sorted, the usual case)
        order = np.argsort(keys, kind="stable")
        keys, n, values = keys[order], n[order], values.take(pa.array(order))
        if not bool((keys[1:] > keys[:-1]).all()):
            return None
    return _Keyed(keys, n, values, hashed)


def _among(values: pa.Array, added: _Keyed, chosen: np.ndarray) -> np.ndarray:
    """Which of ``values`` (a head: up to 1,024) are among ``added``'s values where ``chosen``, by
    their keys (a binary search; equal hashes checked to hold equal values), instead of a hash set
    of the chosen values (hundreds of thousands)."""
    keys = sketches.theta_hashes_bytes(values) if added.hashed else selection.sort_keys(values, values.type)
    if not len(added.keys) or not len(keys):
        return np.zeros(len(values), bool)
    pos = np.minimum(np.searchsorted(added.keys, keys), len(added.keys) - 1)
    found = (added.keys[pos] == keys) & chosen[pos]
    if added.hashed and found.any():
        at = np.flatnonzero(found)
        same = pc.equal(values.take(pa.array(at)), added.values.take(pa.array(pos[at]))).to_numpy(zero_copy_only=False)
        found[at] = same
    return found


def _old_totals(segments: Sequence[_Keyed], new: _Keyed) -> np.ndarray | None:
    """Each new value's count in the table before the append (0: a value not seen before);
    None if a hash matched a different value."""
    old = np.zeros(len(new.keys), np.int64)
    for seg in segments:
        if not len(seg.keys) or not len(new.keys):
            continue
        pos = np.minimum(np.searchsorted(seg.keys, new.keys), len(seg.keys) - 1)
        found = seg.keys[pos] == new.keys
        if not found.any():
            continue
        at = pos[found]
        if seg.hashed and not pc.all(pc.equal(seg.values.take(pa.array(at)), new.values.filter(pa.array(found)))).as_py():
            return None
        old[found] += seg.counts[at]
    return old


def _follows(before: str, now: str) -> bool:
    """Whether a segment of kind ``now`` can follow ones of kind ``before``: the same kind, or
    all distinct (no rows stored) becoming duplicates only (every value seen twice is a value this
    append touched, so the new segment holds them all). Any other change would leave rows in the
    older segments that the new kind does not store (or need rows none of them has)."""
    return now == before or (before == layout.FREQ_ALL_DISTINCT and now == layout.FREQ_DUPLICATES_ONLY)


def _full(type_: pa.DataType, parts: Sequence[pa.Table], ratio: float) -> Appended:
    """The column in full: the base, the earlier appends and the new partitions merged (what
    engine.runtime.tasks.reduce_counts does with every partition's counts). For small columns,
    and for a column whose frequencies change kind (its segment then replaces the older ones)."""
    parts = [widen_counts(p) for p in parts]
    if sum(p.num_rows for p in parts) <= SMALL:
        # by value, not by hash: a small column's merge is cheap either way, and the hash merge's
        # compiled kernels cost a worker that has not loaded them yet more than the merge itself
        parts = [p.select(["value", "count"]).replace_schema_metadata(None) for p in parts]
    merged = merge_counts(parts, type_)
    non_null = int(pc.sum(merged["count"]).as_py() or 0) if merged.num_rows else 0
    exact, stored = exact_of_merged(merged, type_, non_null, ratio)
    rows = stored.select(["value", "count"])
    return Appended(exact, rows, rows.num_rows, merged.num_rows, non_null, full=True)


def append(
    type_: pa.DataType,
    base: pa.Table,
    earlier: Sequence[pa.Table],
    new: Sequence[pa.Table],
    previous: Previous,
    mostly_distinct_ratio: float,
) -> Appended:
    """A column's table level after appending partitions with value counts ``new``.

    ``base``: the table's counts at the last full analyze; ``earlier``: the counts of the
    partitions appended since (each already in a segment).
    """
    parts = [base, *earlier]
    if sum(p.num_rows for p in parts) <= SMALL:
        return _full(type_, [*parts, *new], mostly_distinct_ratio)
    segments = [_keyed(p, type_) for p in parts]
    merged_new = merge_counts([widen_counts(p) for p in new], type_) if len(new) != 1 else new[0]
    added = _keyed(merged_new, type_) if merged_new.num_rows else None
    if added is None or any(s is None for s in segments):
        return _full(type_, [*parts, *new], mostly_distinct_ratio)
    keyed = [s for s in segments if s is not None]
    old = _old_totals(keyed, added)
    if old is None:  # a hash shared by two values: the full merge compares them by value
        return _full(type_, [*parts, *new], mostly_distinct_ratio)
    total = old + added.counts.astype(np.int64, copy=False)
    non_null = int(sum(int(s.counts.sum(dtype=np.int64)) for s in keyed) + int(added.counts.sum(dtype=np.int64)))
    distinct = previous.distinct + int((old == 0).sum())
    kind = frequency_kind(distinct, non_null, mostly_distinct_ratio)
    if not _follows(previous.kind, kind):  # the older segments' rows of the column are of no use now
        return _full(type_, [*parts, *new], mostly_distinct_ratio)
    if kind == layout.FREQ_ALL_DISTINCT:
        stored = np.zeros(len(total), bool)
        newly = 0
    elif kind == layout.FREQ_DUPLICATES_ONLY:
        stored = total > 1
        newly = int((stored & (old <= 1)).sum())
    else:
        stored = np.ones(len(total), bool)
        newly = int((old == 0).sum())
    stored_rows = previous.stored_rows + newly
    touched = pa.table(
        {
            "value": added.values.filter(pa.array(stored)),
            "count": pa.array(total[stored], pa.int64()),
            "touched": pa.array(np.ones(int(stored.sum()), bool)),
        }
    )
    head = previous.head
    if head.num_rows and touched.num_rows:  # the previous head's values with new frequencies are in ``touched``
        head = head.filter(pa.array(~_among(contiguous(head["value"]).cast(type_), added, stored)))
    head = pa.table({"value": head["value"].cast(type_), "count": head["count"].cast(pa.int64()), "touched": pa.array(np.zeros(head.num_rows, bool))})
    candidates = pa.concat_tables([head, touched.cast(head.schema)]) if head.num_rows else touched
    ordered = frequency_order(candidates) if candidates.num_rows else candidates
    n_head = min(layout.FREQUENCIES_HEAD_ROWS, stored_rows)
    rest = ordered.slice(n_head)
    rows = pa.concat_tables([ordered.slice(0, n_head), rest.filter(rest["touched"])]).select(["value", "count"])
    exact: dict[str, Any] = {"distinct_count": distinct}
    if mt.has_percentiles(type_):  # a binary search over the values of the sorted runs
        exact.update(selection.percentiles_of_runs([*parts, merged_new], type_))
    exact["frequencies"] = kind
    return Appended(exact, rows, stored_rows, distinct, non_null)


__all__ = ["SMALL", "Appended", "Previous", "append"]
