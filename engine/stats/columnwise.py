"""Many partitions' states of one column, field by field: what a batch task ships and the driver merges.

A :class:`ColumnState` is a tree of small Python objects (counts, two Arrow scalars,
moments, sketches); a batch task's list of them took ~13 us a column and partition to
unpickle on the driver, and merging them one pair at a time ~25 us more (an Arrow
array and kernel call per pair for the extremes). :class:`StateColumns` holds the same
states as a few lists (and the extremes as two Arrow arrays), and :func:`merge` folds
them in one pass: the same result as ``ColumnProfile.merge_all`` of the states in the
same order, bit for bit (the registered statistics, engine/measures, fold with their
``merge_all``, the same left fold of the same float operations as their pairwise merge;
extremes and counts do not depend on the order, except a float extreme of
zero, where -0.0 and 0.0 tie and the pairwise fold decides).

The theta sketches are not among the fields: their union is a set operation (the k
smallest distinct hashes below the smallest theta), the same bytes in any order or
grouping, so a batch task ships one union of its partitions' (:func:`union_theta`)
instead of a ~40 KB sketch a partition and column of the bench table's 5,000 rows a
partition; :func:`merge` takes the union of those.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from engine import types as mt
from engine.stats import sketches
from engine.stats.moments import Counts, MinMax, MinMaxAccumulator
from engine.stats.profile import ColumnProfile, ColumnState, present
from engine.stats.sketches import Kll


@dataclass(frozen=True)
class StateColumns:
    """The states of one column in several partitions (in a given order), field by field.

    A field of an accumulator the column has not (``ColumnProfile``) is None.
    ``mins``/``maxs``: the extremes in the column's work type (null: no value).
    """

    rows: list[int]
    nulls: list[int]
    nans: list[int]
    mins: pa.Array | None
    maxs: pa.Array | None
    kll: list[bytes | None] | None
    finite_range: list[tuple[float, float] | None]
    user: list[dict[str, Any]]
    measures: list[dict[str, Any]]  # the registered statistics' states (engine/measures)

    def __len__(self) -> int:
        return len(self.rows)

    @staticmethod
    def of(profile: ColumnProfile, states: Sequence[ColumnState]) -> StateColumns:
        extremes = profile.minmax is not None
        return StateColumns(
            rows=[s.counts.rows for s in states],
            nulls=[s.counts.nulls for s in states],
            nans=[s.counts.nans for s in states],
            mins=pa.array([s.minmax.min for s in states], profile.work_type) if extremes else None,
            maxs=pa.array([s.minmax.max for s in states], profile.work_type) if extremes else None,
            kll=[s.kll.blob if s.kll is not None else None for s in states] if profile.kll else None,
            finite_range=[s.finite_range for s in states],
            user=[s.user for s in states],
            measures=[s.measures for s in states],
        )

    @staticmethod
    def concat(parts: Sequence[StateColumns]) -> StateColumns:
        """The partitions of ``parts``, one after the other (all of one column)."""
        if len(parts) == 1:
            return parts[0]
        first = parts[0]

        def lists(get: Any) -> list[Any]:
            return [x for p in parts for x in get(p)]

        def fields(get: Any, n: int) -> tuple[list[Any], ...] | None:
            if get(first) is None:
                return None
            return tuple(lists(lambda p, j=j: get(p)[j]) for j in range(n))

        return StateColumns(
            rows=lists(lambda p: p.rows),
            nulls=lists(lambda p: p.nulls),
            nans=lists(lambda p: p.nans),
            mins=pa.concat_arrays([p.mins for p in parts]) if first.mins is not None else None,
            maxs=pa.concat_arrays([p.maxs for p in parts]) if first.maxs is not None else None,
            kll=lists(lambda p: p.kll) if first.kll is not None else None,
            finite_range=lists(lambda p: p.finite_range),
            user=lists(lambda p: p.user),
            measures=lists(lambda p: p.measures),
        )

    def take(self, order: Sequence[int]) -> StateColumns:
        """The partitions at ``order`` (positions), in that order."""

        def pick(values: list[Any]) -> list[Any]:
            return [values[i] for i in order]

        index = pa.array(order, pa.int64())
        return StateColumns(
            rows=pick(self.rows),
            nulls=pick(self.nulls),
            nans=pick(self.nans),
            mins=self.mins.take(index) if self.mins is not None else None,
            maxs=self.maxs.take(index) if self.maxs is not None else None,
            kll=pick(self.kll) if self.kll is not None else None,
            finite_range=pick(self.finite_range),
            user=pick(self.user),
            measures=pick(self.measures),
        )


def _minmax_at(mins: pa.Array | None, maxs: pa.Array | None, i: int) -> MinMax:
    if mins is None or maxs is None or not mins[i].is_valid:
        return MinMax()
    return MinMax(mins[i], maxs[i])


def union_theta(states: Sequence[ColumnState]) -> bytes | None:
    """The union of the states' theta sketches (what ``merge_all`` gives them, in any order or grouping)."""
    return sketches.merge_theta([s.theta for s in states])


def merge(profile: ColumnProfile, cols: StateColumns, theta: Sequence[bytes | None]) -> ColumnState:
    """``profile.merge_all`` of the states ``cols`` holds, in their order (the same bits);
    ``theta``: their theta sketches, or unions of them (:func:`union_theta`) covering them all."""
    zero = profile.zero()
    out = ColumnState(
        counts=Counts(sum(cols.rows), sum(cols.nulls), sum(cols.nans)),
        minmax=_merge_extremes(profile.minmax, cols.mins, cols.maxs) if profile.minmax else MinMax(),
        kll=_merge_kll(cols.kll) if profile.kll and cols.kll is not None else zero.kll,
        finite_range=_merge_ranges(cols.finite_range),
        theta=sketches.merge_theta([zero.theta, *theta]),
        distinct=None,
        user=_merge_user(profile, cols.user),
        measures=profile.merge_all_measures(cols.measures),
    )
    return out


def _merge_extremes(acc: MinMaxAccumulator, mins: pa.Array | None, maxs: pa.Array | None) -> MinMax:
    """The smallest min and largest max: what the pairwise fold gives, as long as no two
    different values tie (only a float zero can: -0.0 and 0.0, where the fold decides)."""
    if mins is None or maxs is None or mins.null_count == len(mins):
        return MinMax()
    valid = mins.is_valid()
    got = acc.update(MinMax(), pa.concat_arrays([mins.filter(valid), maxs.filter(valid)]))
    if mt.is_floating(mins.type) and (present(got.min).as_py() == 0 or present(got.max).as_py() == 0):
        merged = MinMax()
        for i in range(len(mins)):
            merged = acc.merge(merged, _minmax_at(mins, maxs, i))
        return merged
    return got


def merge_kll_parts(blobs: Sequence[bytes | None]) -> Kll:
    """The KLL sketch :func:`merge` gives states with these sketches, in this order (None: none)."""
    return _merge_kll(list(blobs))


def _merge_kll(blobs: list[bytes | None]) -> Kll:
    """KllAccumulator.merge folded, in one sketch (no serialization between merges)."""
    kept = [b for b in blobs if b is not None]
    if len(kept) <= 1:
        return Kll(kept[0] if kept else None)
    return Kll(sketches.merge_kll(kept))


def _merge_ranges(ranges: list[tuple[float, float] | None]) -> tuple[float, float] | None:
    """profile._merge_range folded: min and max keep the first of equal values, as the fold does."""
    kept = [r for r in ranges if r is not None]
    if not kept:
        return None
    if len(kept) == 1:
        return kept[0]
    return min(r[0] for r in kept), max(r[1] for r in kept)


def _merge_user(profile: ColumnProfile, states: list[dict[str, Any]]) -> dict[str, Any]:
    merged: dict[str, Any] = {}
    if not profile.user:
        return merged
    for b in states:
        for u in profile.user:
            if u.name in b:
                merged[u.name] = u.merge(merged[u.name], b[u.name]) if u.name in merged else b[u.name]
    return merged
