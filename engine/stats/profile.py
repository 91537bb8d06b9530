"""The statistics of one column: every applicable accumulator, folded together.

``ColumnProfile`` decides which accumulators apply to a column's type and
combines them into one mergeable state. A partition finalizes its state with
its exact value counts (exact distinct count and percentiles); the table
finalizes the merged state with the exact table-level reduction of the columns
whose value counts are reduced (``reduced``: discrete columns, and the numbers and
times that take the sorted view) and with the merged sketches for the others
(flagged approximate).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from functools import reduce
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine import measures as registry
from engine import types as mt
from engine import values as value_forms
from engine.arrowcompute import contiguous
from engine.stats import radixsort, sketches, sortedvalues
from engine.stats.histograms import finite_range, storage_type
from engine.stats.moments import (
    Counts,
    CountsAccumulator,
    MinMax,
    MinMaxAccumulator,
)
from engine.stats.sketches import Kll, KllAccumulator
from engine.stats.stringparts import SharedHash, StringParts
from engine.stats.user import UserStatistic
from engine.stats.valuecounts import (
    PERCENTILES,
    TEXT,
    DistinctValuesAccumulator,
    ValueCounts,
    ValueCountsAccumulator,
    Values,
    batch_value_counts,
    counts_sorted,
    exact_statistics,
    hashed_counts,
    percentile_column,
    selected_percentiles,
    sorted_counts,
    value_sorted_counts,
)


@dataclass
class ColumnState:
    """Picklable partial statistics of one column (a partition's or a merge of several)."""

    counts: Counts = field(default_factory=Counts)
    minmax: MinMax = field(default_factory=MinMax)
    kll: Kll | None = None
    finite_range: tuple[float, float] | None = None  # floats/decimals: histogram range
    theta: bytes | None = None  # set when a partition finalizes
    distinct: int | None = None  # exact, partition level
    user: dict[str, Any] = field(default_factory=dict)
    measures: dict[str, Any] = field(default_factory=dict)  # registered statistic -> its state (engine/measures)


def unsupported_reason(t: pa.DataType) -> str | None:
    if mt.is_list_like(t):
        return "list columns are not supported"
    if mt.is_map(t):
        return "map columns are not supported"
    if mt.is_union(t):
        return "union columns are not supported"
    if mt.is_interval(t):
        return "interval columns are not supported"
    if mt.is_dictionary(t):
        return None
    if mt.is_nested(t):
        return "nested columns are not supported"
    return None


P = TypeVar("P")


def present(value: P | None) -> P:
    """A statistic's state (or accumulator) that the column's kind guarantees: its
    accumulator is set exactly when zero() made the state."""
    if value is None:
        raise ValueError("a statistic's state is missing although the column keeps it")
    return value


def _values_pass(values: ValueCountsAccumulator | DistinctValuesAccumulator, column: pa.Array) -> ValueCounts | Values:
    """The value state of one whole column."""
    if isinstance(values, ValueCountsAccumulator):
        return values.update(values.zero(), column)
    return values.update(values.zero(), column)


class ColumnProfile:
    """All statistics of one column, as a single accumulator-like object."""

    def __init__(self, name: str, type_: pa.DataType, user_statistics: Sequence[UserStatistic] = ()) -> None:
        if mt.is_dictionary(type_):
            type_ = type_.value_type
        self.name = name
        self.type = type_
        # Arrow has few kernels for half floats: work in float32 (exact), report in float16.
        # An extension type (arrow.uuid, or any other) has no kernels at all: its statistics are
        # its storage type's, its values stay in that type, and `type` names the extension.
        self.extension = isinstance(type_, pa.BaseExtensionType)
        self.work_type = pa.float32() if mt.is_float16(type_) else type_.storage_type if self.extension else type_
        type_ = self.work_type
        self.unsupported = unsupported_reason(type_)
        ok = self.unsupported is None and not mt.is_null(type_)
        self.counts = CountsAccumulator(type_)
        self.minmax = MinMaxAccumulator(type_) if ok and mt.is_orderable(type_) else None
        self.kll = KllAccumulator() if ok and mt.has_percentiles(type_) else None
        self.values: ValueCountsAccumulator | DistinctValuesAccumulator | None = None
        if ok and mt.is_orderable(type_):
            # an extension column's exact distinct count, not frequencies (the table reduction
            # and frequencies files work in the column's own type, which has no kernels)
            self.values = (ValueCountsAccumulator if mt.is_discrete(type_) and not self.extension else DistinctValuesAccumulator)(type_)
        self.float_range = ok and mt.histogram_domain(type_) == mt.HistogramDomain.FLOAT
        #: whole columns of numbers and times take one shared sorted view (profile_column)
        self._sorted_path = ok and self.values is not None and self.kll is not None and sortedvalues.supports(type_)
        #: whole string columns keep their value counts in theta-hash order (profile_column)
        self._hashed_path = ok and isinstance(self.values, ValueCountsAccumulator) and mt.is_offset_string(type_)
        self.user = [u for u in user_statistics if ok and u.applies_to(type_)]
        #: the registered statistics (engine/measures) of this column's type
        self.measures = [m(type_) for m in registry.measures() if ok and m.applies_to(type_)]
        #: counted from dictionary codes when read so (profile_chunks); user and registered statistics need the rows or counts
        self.counts_strings = self._hashed_path and all(u.compute_counts is not None for u in self.user) and all(m.counted for m in self.measures)
        self.all_user = list(user_statistics)

    @property
    def discrete(self) -> bool:
        return self.values is not None and mt.is_discrete(self.type)

    @property
    def counted(self) -> bool:
        """A column whose exact value counts go to the table reduction (exact table-level
        distinct count and percentiles) though its frequencies are not stored: floats,
        timestamps, times and durations (their counts in the work type: float16 as float32)."""
        return self._sorted_path and not self.discrete and not self.extension

    @property
    def reduced(self) -> bool:
        """Whether the table reduction takes the column's exact value counts."""
        return self.discrete or self.counted

    # ------------------------------------------------------------ accumulate
    def values_of(self, column: pa.Array) -> ValueCounts | Values | None:
        """The value state of one whole column (None: the column keeps none)."""
        return _values_pass(self.values, column) if self.values else None

    def zero(self) -> ColumnState:
        return ColumnState(
            counts=self.counts.zero(),
            minmax=MinMax(),
            kll=self.kll.zero() if self.kll else None,
            measures={m.name: m.zero() for m in self.measures},
        )

    def prepare(self, batch: pa.Array) -> pa.Array:
        """A batch of this column as the accumulators take it (decoded, in the work type)."""
        if mt.is_dictionary(batch.type):
            batch = batch.dictionary_decode()
        if isinstance(batch, (pa.ExtensionArray, pa.ChunkedArray)) and isinstance(batch.type, pa.BaseExtensionType):
            batch = (
                batch.storage
                if isinstance(batch, pa.ExtensionArray)
                else pa.chunked_array([c.storage for c in batch.chunks], batch.type.storage_type)
            )
        if batch.type != self.work_type:
            batch = batch.cast(self.work_type)
        return batch

    def _restore(self, row: dict[str, Any]) -> dict[str, Any]:
        """Values computed in the work type, back in the column's type."""
        if self.work_type != self.type and not self.extension:  # extension values stay in their storage type
            for key, value in row.items():
                if isinstance(value, pa.Scalar) and value.type == self.work_type:
                    row[key] = value.cast(self.type)
        return row

    def update(self, state: ColumnState, batch: pa.Array) -> ColumnState:
        batch = self.prepare(batch)
        state.counts = self.counts.update(state.counts, batch)
        if self.unsupported or mt.is_null(self.type):
            return state
        if self.minmax:
            state.minmax = self.minmax.update(state.minmax, batch)
        if self.kll:
            state.kll = self.kll.update(present(state.kll), batch)
        if self.float_range:
            r = finite_range(batch)
            state.finite_range = _merge_range(state.finite_range, r)
        for u in self.user:
            part = u.compute(batch)
            state.user[u.name] = u.merge(state.user[u.name], part) if u.name in state.user else part
        self._update_measures(state, batch)
        return state

    def _update_measures(self, state: ColumnState, batch: pa.Array) -> None:
        for m in self.measures:
            state.measures[m.name] = m.update(state.measures.get(m.name, m.zero()), batch)

    def merge_measures(self, a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
        """The registered statistics' states of two states, merged (a missing one: no rows)."""
        return {m.name: m.merge(a.get(m.name, m.zero()), b.get(m.name, m.zero())) for m in self.measures}

    def merge_all_measures(self, states: Sequence[dict[str, Any]]) -> dict[str, Any]:
        """``merge_measures`` folded left from ``zero`` over ``states``, a statistic at a time
        (its ``merge_all``: the same bits)."""
        return {m.name: m.merge_all([s.get(m.name, m.zero()) for s in states]) for m in self.measures}

    def merge(self, a: ColumnState, b: ColumnState) -> ColumnState:
        return self._merge(a, b, sketches.merge_theta([a.theta, b.theta]))

    def _merge(self, a: ColumnState, b: ColumnState, theta: bytes | None) -> ColumnState:
        user = dict(a.user)
        for u in self.user:
            if u.name in b.user:
                user[u.name] = u.merge(user[u.name], b.user[u.name]) if u.name in user else b.user[u.name]
        return ColumnState(
            counts=self.counts.merge(a.counts, b.counts),
            minmax=self.minmax.merge(a.minmax, b.minmax) if self.minmax else MinMax(),
            kll=self.kll.merge(present(a.kll), present(b.kll)) if self.kll else None,
            finite_range=_merge_range(a.finite_range, b.finite_range),
            theta=theta,
            distinct=None,
            user=user,
            measures=self.merge_measures(a.measures, b.measures),
        )

    def merge_all(self, states: Iterable[ColumnState]) -> ColumnState:
        """All partitions' states at once: the theta sketches go through one union.

        Merging them pairwise deserialized and serialized the growing table sketch at
        every step: 0.46 ms a partition and column, the driver's largest cost per
        partition (bench/bench_scaling.py: 8 of its 9 ms a partition at 256 partitions).
        """
        states = list(states)
        merged = reduce(lambda a, b: self._merge(a, b, None), states, self.zero())
        merged.theta = sketches.merge_theta([self.zero().theta, *(s.theta for s in states)])
        return merged

    # ------------------------------------------------------------ finalize
    def _common(self, state: ColumnState) -> dict[str, Any]:
        row: dict[str, Any] = {"column": self.name, "type": mt.type_name(self.type), "unsupported": self.unsupported}
        row.update(self.counts.finalize(state.counts))
        if self.minmax:
            row.update(self.minmax.finalize(state.minmax))
        if self.kll:
            row.update(self.kll.finalize(present(state.kll)))
        row["theta_sketch"] = state.theta
        for m in self.measures:
            row.update(m.finalize(state.measures.get(m.name, m.zero())))
        for u in self.all_user:
            row[u.name] = u.finalize(state.user[u.name]) if u.name in state.user else None
        return row

    def finalize_partition(self, state: ColumnState, values_state: Any, raw: pa.Array | None = None) -> tuple[dict[str, Any], pa.Table | None]:
        """The partition's statistics row, and for discrete columns its exact value counts (unordered).

        ``values_state`` is the state of ``self.values`` (exact distinct values or
        counts); ``raw``, the partition's whole column if at hand, lets integer
        percentiles come from an O(n) selection instead of a sort.
        """
        by_value = None
        exact: dict[str, Any] = {}
        if self.values is not None:
            if isinstance(self.values, ValueCountsAccumulator):
                by_value = self.values.table(values_state)
                exact = {"distinct_count": by_value.num_rows}
                if self.kll:
                    if counts_sorted(by_value):
                        exact.update(exact_statistics(by_value, self.type))  # already in value order
                    elif raw is not None and not mt.is_decimal(self.type):
                        exact.update(selected_percentiles(raw.drop_null()))
                    else:
                        exact.update(exact_statistics(sorted_counts(by_value), self.type))
                distinct = by_value["value"]
            else:
                values = self.values.values(values_state)
                distinct = pc.unique(values)
                exact = {"distinct_count": len(distinct)}
                if self.kll:
                    exact.update(selected_percentiles(values))
            state.distinct = exact["distinct_count"]
            state.theta = sketches.theta_of_distinct(distinct) if len(distinct) else None
        row = self._common(state)
        if self.values is not None:
            row.update(exact)
            row["distinct_count_exact"] = True
            if self.kll:
                row["percentiles_exact"] = True
        return self._restore(row), by_value

    def profile_column(self, column: pa.Array) -> tuple[ColumnState, dict[str, Any], pa.Table | None]:
        """``profile_column_view`` without the sorted view."""
        return self.profile_column_view(column)[:3]

    def profile_column_view(self, column: pa.Array) -> tuple[ColumnState, dict[str, Any], pa.Table | None, sortedvalues.SortedValues | None]:
        """A partition's whole column at once: its state, its statistics row and (discrete
        columns) its exact value counts, sorted by value when the column took the sorted path.

        The same statistics as ``update`` then ``finalize_partition``; number and time
        columns compute them from one shared view of their values (engine.stats.sortedvalues):
        one conversion, one sort or bincount for distinct count, value counts, percentiles,
        KLL and theta. That view is returned too (None for other columns): its sorted
        distinct values and counts are all phase 2 needs to bin the column.
        """
        column = self.prepare(column)
        if self._hashed_path:
            return (*self._profile_strings(column), None)
        if not self._sorted_path:
            state = self.update(self.zero(), column)
            values_state = self.values_of(column)
            row, counts = self.finalize_partition(state, values_state, column)
            return state, row, counts, None
        t = self.work_type
        sv = sortedvalues.of(column)
        state = self.zero()
        state.counts = Counts(len(column), column.null_count, sv.nans)
        distinct = sortedvalues.to_arrow(sv.distinct, t)
        if mt.is_floating(t) and len(distinct) and (sv.distinct[0] == 0 or sv.distinct[-1] == 0):
            # a zero at an end: Arrow's extremes, with its choice between -0.0 and 0.0 (the
            # view folds them into 0.0); other ends are the sorted view's, no pass over the column
            state.minmax = present(self.minmax).update(state.minmax, column)
        elif len(distinct):
            state.minmax = MinMax(distinct[0], distinct[len(distinct) - 1])
        floats = None
        if mt.is_decimal(t) and sv.n:  # the moments' float view, in column order as update() has it
            floats = sortedvalues.to_arrow(sv.values, t).cast(pa.float64(), safe=False).to_numpy(zero_copy_only=False)
        if sv.n:
            state.kll = sketches.kll_of_sorted(sv.n, sv.float64_at)
        if self.float_range and sv.n:
            if floats is not None:  # decimals: no infinities, the ends of the sorted values
                lo, hi = sv.float64_at(np.array([0, sv.n - 1]))
                state.finite_range = (float(lo), float(hi))
            else:
                state.finite_range = _finite_range(sv.sorted_values())
        for u in self.user:
            state.user[u.name] = u.compute_counts(distinct, sv.counts) if u.compute_counts else u.compute(column)
        for m in self.measures:  # from the shared view where the statistic can, else from the column
            sorted_state = m.from_sorted(sv.values, sv.distinct, floats)
            state.measures[m.name] = sorted_state if sorted_state is not None else m.update(m.zero(), column)
        state.distinct = len(distinct)
        text = None
        if mt.is_decimal(t) and len(distinct):
            # theta hashes decimals by their text form, which the frequency rows need too: encode once
            text = value_forms.encode(distinct)
        state.theta = sketches.theta_of_distinct(text if text is not None else distinct) if len(distinct) else None
        row = self._common(state)
        row["distinct_count"] = len(distinct)
        names = [percentile_column(p) for p in PERCENTILES]
        if sv.n:
            picked = sortedvalues.to_arrow(sv.at_positions(sortedvalues.percentile_positions(sv.n, PERCENTILES)), t)
            row.update({name: picked[i] for i, name in enumerate(names)})
        else:
            row.update(dict.fromkeys(names))
        row["distinct_count_exact"] = True
        row["percentiles_exact"] = True
        counts = None
        if self.discrete or self.counted:
            counts = value_sorted_counts(distinct, sv.counts)
            if text is not None:
                counts = counts.append_column(TEXT, text)
        return state, self._restore(row), counts, sv

    def _profile_strings(self, column: pa.Array) -> tuple[ColumnState, dict[str, Any], pa.Table]:
        """A whole string column: value counts in theta-hash order, with the hashes.

        The hashes serve twice: the theta sketch takes its candidates from the
        front, and the table-level reduction merges the partitions' counts as runs
        sorted by hash instead of hashing every value again.
        """
        valid = column.drop_null() if column.null_count else column
        grouped = _group_by_hash(valid) if _mostly_distinct(valid) else None
        if grouped is None:  # few distinct values: Arrow's hash counting, then hash those
            by_value = batch_value_counts(valid)
            grouped = _in_hash_order(contiguous(by_value["value"]), by_value["count"].to_numpy())
        return self._profile_grouped(len(column), column.null_count, *grouped, column)

    def profile_chunks(self, chunks: list[pa.Array]) -> tuple[ColumnState, dict[str, Any], pa.Table | None, sortedvalues.SortedValues | None]:
        """``profile_column_view`` of a whole column given as chunks, some of them Arrow
        dictionaries (a source's ``read_batches(dictionary=...)``).

        A string column is then counted from its codes (a bincount per chunk, then the
        few distinct values merged), never decoded row by row; anything else, and a
        user statistic that needs the rows themselves, decodes the chunks first.
        """
        if not self.counts_strings:
            decoded = [c.dictionary_decode() if mt.is_dictionary(c.type) else c for c in chunks]
            column = contiguous(pa.chunked_array(decoded, self.type))
            return self.profile_column_view(column)
        values, counts = _chunk_value_counts(chunks, self.work_type)
        rows, nulls = sum(len(c) for c in chunks), sum(c.null_count for c in chunks)
        return (*self._profile_grouped(rows, nulls, *_in_hash_order(values, counts), None), None)

    def _profile_grouped(
        self, rows: int, nulls: int, values: pa.Array, counts: np.ndarray, hashes: np.ndarray, column: pa.Array | None
    ) -> tuple[ColumnState, dict[str, Any], pa.Table]:
        """The statistics of a string column from its distinct values, their counts and
        hashes (in hash order); ``column`` only for user statistics without counts."""
        # extremes and lengths from the distinct values (fewer, often far fewer, than rows)
        state = self.zero()
        state.counts = Counts(rows, nulls, 0)
        state.minmax = present(self.minmax).update(state.minmax, values)
        for u in self.user:
            state.user[u.name] = u.compute_counts(values, counts) if u.compute_counts else u.compute(column)
        for m in self.measures:  # column None only when counted from codes: every statistic takes counts (counts_strings)
            counted = m.from_counts(values, counts, rows - nulls)
            state.measures[m.name] = counted if counted is not None else m.update(m.zero(), present(column))
        state.distinct = len(values)
        state.theta = sketches.theta_of_hashed(values, hashes) if len(values) else None
        row = self._common(state)
        row["distinct_count"] = len(values)
        row["distinct_count_exact"] = True
        return state, self._restore(row), hashed_counts(values, counts, hashes)

    def finalize_table(self, state: ColumnState, exact: dict[str, Any] | None) -> dict[str, Any]:
        """The table's statistics row.

        ``exact`` holds the exact table-level reduction of a ``reduced`` column
        (distinct_count and percentiles); other columns use the merged sketches.
        """
        row = self._common(state)
        if exact is not None:
            row.update(exact)
            row["distinct_count_exact"] = True
            if self.kll:
                row["percentiles_exact"] = True
        elif self.values is not None:
            est = sketches.theta_estimate(state.theta)
            # an estimate never exceeds the values there are
            c = state.counts
            row["distinct_count"] = min(round(est[0]), c.rows - c.nulls - c.nans) if est else 0
            # theta is exact below its nominal size (no sampling happened)
            row["distinct_count_exact"] = est is None or est[1] == est[2]
            if self.kll:
                q = sketches.kll_quantiles(state.kll.blob if state.kll else None, PERCENTILES)
                if q is not None:
                    values, err = q
                    typed = _from_float64(values, self.work_type)
                    row.update({percentile_column(p): typed[i] for i, p in enumerate(PERCENTILES)})
                    row["percentiles_exact"] = False
                    row["percentiles_rank_error"] = err
        return self._restore(row)


def _in_hash_order(values: pa.Array, counts: np.ndarray) -> tuple[pa.Array, np.ndarray, np.ndarray]:
    """Distinct strings and their counts put in theta-hash order, with the hashes."""
    hashes = sketches.theta_hashes_bytes(values)
    order = np.argsort(hashes)
    return values.take(pa.array(order)), np.asarray(counts, np.int64)[order], hashes[order]


def _chunk_value_counts(chunks: list[pa.Array], t: pa.DataType) -> tuple[pa.Array, np.ndarray]:
    """(distinct non-null values, counts) of chunks that are Arrow dictionaries (their codes
    counted by a bincount) or plain arrays (Arrow's hash count), in type ``t``."""
    values: list[pa.Array] = []
    counts: list[np.ndarray] = []
    for c in chunks:
        if len(c) == c.null_count:
            continue
        if mt.is_dictionary(c.type):
            codes = c.indices.drop_null() if c.null_count else c.indices
            n = np.bincount(codes.to_numpy(zero_copy_only=False), minlength=len(c.dictionary))
            used = np.flatnonzero(n)
            values.append(c.dictionary.take(pa.array(used)) if len(used) < len(n) else c.dictionary)
            counts.append(n[used])
        else:
            by_value = batch_value_counts(c)
            values.append(contiguous(by_value["value"]))
            counts.append(by_value["count"].to_numpy())
    if not values:
        return pa.array([], t), np.zeros(0, np.int64)
    merged = pa.chunked_array([v.cast(t) for v in values], t).combine_chunks()
    summed = np.concatenate(counts).astype(np.int64, copy=False)
    if len(values) > 1 or merged.null_count:  # the same value in several chunks' dictionaries
        encoded = pc.dictionary_encode(merged)
        total = np.zeros(len(encoded.dictionary), np.int64)
        np.add.at(total, encoded.indices.to_numpy(zero_copy_only=False), summed)
        merged, summed = encoded.dictionary, total
        if merged.null_count:  # a null among a dictionary's values is no value
            keep = merged.is_valid()
            merged, summed = merged.filter(keep), summed[keep.to_numpy(zero_copy_only=False)]
    return merged, summed


#: Rows of a column sampled to guess whether most of its values are distinct.
_DISTINCT_SAMPLE = 8192


def _mostly_distinct(values: pa.Array) -> bool:
    """Whether most of the first values are distinct (a guess that picks the faster path)."""
    m = min(len(values), _DISTINCT_SAMPLE)
    return m > 0 and pc.count_distinct(values.slice(0, m)).as_py() > m // 2


def _group_by_hash(values: pa.Array) -> tuple[pa.Array, np.ndarray, np.ndarray] | None:
    """(distinct values, counts, hashes) in hash order, grouping non-null strings by their
    theta hash; every value is checked equal to its group's, and None is returned when a
    hash is shared by two values."""
    hashes = sketches.theta_hashes_bytes(values)
    ordered, order = radixsort.hash_order(hashes)
    strings = StringParts([values], values.type)
    try:  # the rows of a group but its first are compared with the row before, in place
        rows, counts = strings.group(order, ordered, np.ones(len(order), np.int64))
    except SharedHash:
        return None
    return strings.take(rows), counts, hashes[rows]


def _finite_range(ordered: np.ndarray) -> tuple[float, float] | None:
    """Finite min and max of ascending float values (the float histogram range)."""
    if ordered.dtype.kind != "f":
        return float(ordered[0]), float(ordered[-1])
    lo = int(np.searchsorted(ordered, -np.inf, side="right"))
    hi = int(np.searchsorted(ordered, np.inf, side="left"))
    if lo >= hi:
        return None
    return float(ordered[lo]), float(ordered[hi - 1])


def _merge_range(a: tuple[float, float] | None, b: tuple[float, float] | None) -> tuple[float, float] | None:
    if a is None:
        return b
    if b is None:
        return a
    return min(a[0], b[0]), max(a[1], b[1])


def _from_float64(values: list[float], t: pa.DataType) -> pa.Array:
    """Sketch quantiles (float64 items of the stream) back in the column's type."""
    arr = pa.array(values, type=pa.float64())
    if mt.is_fractional(t):
        return arr.cast(t, safe=False)
    st = storage_type(t)
    # float64(max of int64/uint64) rounds up past the type: clamp to the storage range
    lo, hi = (0, 2**64 - 1) if mt.is_unsigned_integer(st) else (-(2**63), 2**63 - 1)
    wide = pa.uint64() if mt.is_unsigned_integer(st) else pa.int64()
    ints = pa.array([min(max(int(round(v)), lo), hi) for v in values], type=wide).cast(st, safe=False)
    return ints if st == t else ints.view(t)
