"""Exact ranks and quantiles: the pure kernel of the distributed sort.

The Ray edge (engine/runtime/distributed_sort.py) sorts a column as a sample
sort: every partition task turns its values into *keys*, the driver picks
split points from small samples, every partition cuts its keys into ranges,
and one task per range merges its pieces. This module holds every step that
does not need Ray, so each is tested on its own.

Definitions (the same as DuckDB's, so DuckDB is an exact oracle):

- The values are the column's non-null values; nulls are excluded and counted.
  Floats: NaN is a value, greater than every number (``+inf`` included), and all
  NaNs are equal -- the order of DuckDB, numpy and Spark. ``-0.0 == 0.0``.
  Strings and binaries compare byte-wise (UTF-8 byte order is code point order).
- ``rank_of(v)`` is the number of values ``< v`` (0-based rank of ``v``'s first
  occurrence); ``rank_of(v, inclusive=True)`` is the number of values ``<= v``.
  Their difference is how often ``v`` occurs.
- ``value_at_rank(r)`` is the r-th smallest value (0-based), ``0 <= r < n``.
- ``quantile(p)`` is ``value_at_rank(max(ceil(n * p), 1) - 1)``: the smallest
  value whose cumulative share reaches ``p`` (DuckDB's ``quantile_disc``, numpy's
  ``method="inverted_cdf"``). ``p`` is read as the decimal it is written as
  (``0.1`` is one tenth, not the nearest double), exactly as DuckDB reads a
  literal, and the product is computed in exact rational arithmetic.

Keys: fixed-width types (integers, floats, booleans, dates, times, timestamps,
durations, decimals of precision <= 18) become numpy arrays of an order-keeping
dtype, sorted with numpy; everything else (strings, binaries, wide decimals)
stays an Arrow array sorted with pyarrow.compute.

Run-length keys: a partition whose values are mostly repeats (a price with a
few thousand distinct values over millions of rows) is *counted* instead of
sorted: a hash count (Arrow's ``value_counts``) plus a sort of the distinct
values costs a fraction of sorting every value, and every later step works on
``(value, count)`` runs (:class:`Runs`) that stand for the sorted values they
expand to: positions, cuts and ranks are counted in that expansion, so results
stay exact. The choice is per partition, from a small sample (:func:`prefer_runs`).
Floats are counted straight from the Arrow chunks (their keys are the values):
no copy of the column is made for them.

Ties and skew: ranges are cut in the total order of ``(value, partition,
position)``, so a value repeated in most rows is spread over as many ranges as
it fills instead of landing in one; since equal values are indistinguishable,
the ranges still concatenate into the sorted column.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Any, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine import types as mt
from engine.exceptions import InvalidArgumentError
from engine.stats import floatcount, stringsort
from engine.types import NUMPY_DTYPES, integer_storage, is_binary_like, is_string_like

#: np.searchsorted's side: values < key (left) or <= key (right) come before it
Side = Literal["left", "right"]

__all__ = [
    "KeyCodec",
    "LocalKeys",
    "Runs",
    "Sample",
    "Splitter",
    "codec_for",
    "cut_points",
    "merge_pieces",
    "prefer_runs",
    "prepare",
    "quantile_rank",
    "ranges_for_count",
    "ranges_for_rank",
    "ranks_for",
    "search",
    "split",
    "splitters",
    "take",
]


# ============================================================== keys
@dataclass(frozen=True)
class KeyCodec:
    """How values of one Arrow type become sortable keys, and back.

    ``kind`` is ``"numpy"`` (keys are an ndarray of ``dtype``) or ``"arrow"``
    (keys are an Arrow array of ``key_type``, compared by pyarrow.compute).
    """

    type: pa.DataType
    kind: str
    dtype: str | None = None  # numpy dtype name of the keys
    key_type: pa.DataType | None = None  # arrow type of the keys (kind == "arrow")

    # ---------------------------------------------------------- encode
    def encode(self, values: pa.Array | pa.ChunkedArray) -> tuple[Any, int, int]:
        """(keys of the non-null values, null count, NaN count), keys unsorted."""
        if isinstance(values, pa.ChunkedArray):
            values = values.combine_chunks() if values.num_chunks != 1 else values.chunk(0)
        nulls = values.null_count
        valid = values.drop_null() if nulls else values
        if self.kind == "arrow":
            keys = valid if valid.type == self.key_type else valid.cast(self.key_type)
            return keys, nulls, 0
        keys = _numpy_keys(valid, self.type, np.dtype(self.dtype))
        nans = int(np.count_nonzero(np.isnan(keys))) if keys.dtype.kind == "f" else 0
        return keys, nulls, nans

    def encode_value(self, value: Any) -> Any:
        """The key of one Python value of the column's type (for searches)."""
        if isinstance(value, pa.Scalar):
            value = value.as_py()
        if value is None:
            raise InvalidArgumentError("cannot rank a null: nulls are excluded from ranks (see null_count)")
        try:
            arr = pa.array([value], type=self.type)
        except (pa.ArrowException, TypeError, ValueError, OverflowError) as exc:
            raise InvalidArgumentError(f"{value!r} is not a value of type {self.type}: {exc}") from exc
        keys, _, _ = self.encode(arr)
        return keys[0] if self.kind == "numpy" else keys[0].as_py()

    # ---------------------------------------------------------- decode
    def decode(self, keys: Any) -> pa.Array:
        """Keys back to an Arrow array of the column's type."""
        if self.kind == "arrow":
            arr = keys if isinstance(keys, pa.Array) else pa.array(keys, type=self.key_type)
            return arr if arr.type == self.type else arr.cast(self.type)
        return _from_numpy_keys(np.asarray(keys, dtype=self.dtype), self.type)

    def to_python(self, keys: Any) -> list[Any]:
        """The values as Python values; one Python cannot hold (a date or timestamp beyond years
        1..9999, a nanosecond value without pandas) stays an Arrow scalar."""
        values = self.decode(keys)
        try:
            return values.to_pylist()
        except (OverflowError, ValueError):
            return [_py_or_scalar(s) for s in values]

    def empty(self) -> Any:
        if self.kind == "arrow":
            return pa.array([], type=self.key_type)
        return np.empty(0, dtype=self.dtype)


def _py_or_scalar(scalar: pa.Scalar) -> Any:
    try:
        return scalar.as_py()
    except (OverflowError, ValueError):
        return scalar


def _storage_dtype(t: pa.DataType) -> str | None:
    """The numpy dtype a column is sorted as (engine.types: integer storage, numpy dtypes)."""
    if t in NUMPY_DTYPES:
        return NUMPY_DTYPES[t]
    if mt.is_boolean(t):
        return "uint8"
    if integer_storage(t) is not None:
        return NUMPY_DTYPES[integer_storage(t)]
    if mt.is_decimal(t) and t.precision <= 18 and t.byte_width in (4, 8, 16):
        return "int32" if t.byte_width == 4 else "int64"
    return None


def codec_for(t: pa.DataType, column: str = "?") -> KeyCodec:
    """The codec of a column type; a clear error for types without an order."""
    dtype = _storage_dtype(t)
    if dtype is not None:
        return KeyCodec(t, "numpy", dtype=dtype)
    if is_string_like(t):
        return KeyCodec(t, "arrow", key_type=pa.large_string())
    if is_binary_like(t):
        return KeyCodec(t, "arrow", key_type=pa.large_binary())
    if mt.is_decimal(t):
        return KeyCodec(t, "arrow", key_type=t)
    raise InvalidArgumentError(
        f"column {column!r} has type {t}, which has no order: ranks and quantiles need numbers, times, decimals, strings or binaries"
    )


def _fixed_buffer(arr: pa.Array, dtype: np.dtype, per_value: int = 1) -> np.ndarray:
    """The data buffer of a fixed-width array (no nulls) as ``dtype``, offset applied."""
    data = np.frombuffer(arr.buffers()[1], dtype=dtype)
    start = arr.offset * per_value
    return data[start : start + len(arr) * per_value]


def _numpy_keys(valid: pa.Array, t: pa.DataType, dtype: np.dtype) -> np.ndarray:
    if mt.is_boolean(t):
        return valid.cast(pa.uint8()).to_numpy(zero_copy_only=False)
    if mt.is_decimal(t):
        if t.byte_width == 16:  # two's complement 128-bit; precision <= 18 fits the low word
            return _fixed_buffer(valid, np.dtype("<i8"), 2)[::2].copy()
        return _fixed_buffer(valid, dtype).copy()
    if t in NUMPY_DTYPES:
        return valid.to_numpy(zero_copy_only=False)
    return _fixed_buffer(valid, dtype).copy()  # temporal: its integer storage


def _from_numpy_keys(keys: np.ndarray, t: pa.DataType) -> pa.Array:
    n = len(keys)
    if mt.is_boolean(t):
        return pa.array(keys.astype(bool), pa.bool_())
    if mt.is_decimal(t) and t.byte_width == 16:
        words = np.empty((n, 2), dtype=np.int64)
        words[:, 0] = keys
        words[:, 1] = np.where(keys < 0, -1, 0)
        return pa.Array.from_buffers(t, n, [None, pa.py_buffer(words)])
    if t in NUMPY_DTYPES:
        return pa.array(keys, type=t)
    return pa.Array.from_buffers(t, n, [None, pa.py_buffer(np.ascontiguousarray(keys))])


# ============================================================== run-length keys
#: A partition whose sample suggests at most this share of distinct values is
#: counted instead of sorted (hashing costs ~15-35 ns a value at low cardinality,
#: sorting ~55-70 ns; at high cardinality a hash count costs several times a sort).
RUNS_MAX_DISTINCT_SHARE = 0.1
#: Values drawn to estimate a partition's distinct share.
DISTINCT_SAMPLE = 16_384
#: Integer keys spanning fewer values than this (or than twice their number) are
#: counted by np.bincount instead of hashing.
COUNTING_SORT_MIN_SPAN = 1 << 16


def _same_as_next(v: np.ndarray) -> np.ndarray:
    """For sorted keys: whether each key equals the next one (NaNs equal each other)."""
    same = v[1:] == v[:-1]
    if v.dtype.kind == "f":
        same |= np.isnan(v[1:]) & np.isnan(v[:-1])
    return same


def _reduce_sorted(values: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted (value, count) pairs with equal neighbours merged (-0.0 and 0.0, NaN payloads, pieces)."""
    if len(values) <= 1:
        return values, counts
    starts = np.flatnonzero(np.concatenate(([True], ~_same_as_next(values))))
    if len(starts) == len(values):
        return values, counts
    return values[starts], np.add.reduceat(counts, starts)


@dataclass(frozen=True)
class Runs:
    """Sorted numpy keys in run-length form: ``values[i]`` repeated ``counts[i]`` times.

    It acts as the sorted array it expands to, without expanding: ``len``,
    integer and slice indexing and :meth:`searchsorted` all count positions in
    the expansion (a slice may cut a run, keeping part of its count).
    """

    values: np.ndarray  # increasing, no two equal
    counts: np.ndarray  # int64, > 0
    ends: np.ndarray  # cumulative counts: ends[i] is the expanded position after run i

    @classmethod
    def of(cls, values: np.ndarray, counts: np.ndarray) -> Runs:
        counts = np.asarray(counts, np.int64)
        return cls(values, counts, np.cumsum(counts))

    @classmethod
    def count(cls, keys: np.ndarray) -> Runs:
        """Count unsorted keys: integers spanning a range not much wider than their
        number by ``np.bincount`` (a counting sort: two passes, no comparisons);
        anything else by hashing (Arrow's ``value_counts``), then a sort of the
        distinct values only."""
        n = len(keys)
        if n and keys.dtype.kind in "iu":
            lo, hi = keys.min(), keys.max()
            if int(hi) - int(lo) < max(2 * n, COUNTING_SORT_MIN_SPAN):
                bins = np.bincount((keys - lo).astype(np.intp, copy=False))
                present = np.flatnonzero(bins)
                return cls.of((present + int(lo)).astype(keys.dtype), bins[present])
        vc = pc.value_counts(pa.array(keys)).flatten()
        values = vc[0].to_numpy(zero_copy_only=False)
        order = np.argsort(values, kind="stable")
        v, c = _reduce_sorted(values[order], vc[1].to_numpy(zero_copy_only=False)[order])
        return cls.of(v, c)

    @classmethod
    def encode(cls, sorted_keys: np.ndarray) -> Runs:
        """Run-length encode sorted keys (linear)."""
        n = len(sorted_keys)
        if n == 0:
            return cls.of(sorted_keys, np.zeros(0, np.int64))
        starts = np.flatnonzero(np.concatenate(([True], ~_same_as_next(sorted_keys))))
        return cls.of(sorted_keys[starts], np.diff(np.append(starts, n)))

    def __len__(self) -> int:
        return int(self.ends[-1]) if len(self.ends) else 0

    @property
    def dtype(self) -> np.dtype:
        return self.values.dtype

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            a, b, step = i.indices(len(self))
            if step != 1:
                raise ValueError("Runs slices take a step of 1")
            return self._slice(a, max(a, b))
        i = int(i)
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError(f"position {i} outside [0, {len(self)})")
        return self.values[np.searchsorted(self.ends, i, side="right")]

    def take(self, positions: Sequence[int] | np.ndarray) -> np.ndarray:
        return self.values[np.searchsorted(self.ends, np.asarray(positions, np.int64), side="right")]

    def searchsorted(self, value: Any, side: Side) -> int:
        """Expanded position: values < ``value`` (``left``) or <= ``value`` (``right``)."""
        j = int(np.searchsorted(self.values, value, side=side))
        return int(self.ends[j - 1]) if j else 0

    def _slice(self, a: int, b: int) -> Runs:
        if a >= b:
            return Runs.of(self.values[:0], np.zeros(0, np.int64))
        i = int(np.searchsorted(self.ends, a, side="right"))  # run holding position a
        j = int(np.searchsorted(self.ends, b - 1, side="right")) + 1  # one past the run holding b - 1
        counts = self.counts[i:j].copy()
        start_i = int(self.ends[i] - self.counts[i])
        counts[0] -= a - start_i
        counts[-1] -= int(self.ends[j - 1]) - b
        return Runs.of(self.values[i:j], counts)

    def expand(self) -> np.ndarray:
        return np.repeat(self.values, self.counts)


def _distinct_estimate(sample_counts: np.ndarray) -> float:
    """Distinct values of a population from how often each value came up in a
    random sample: Chao1, ``d + f1 (f1 - 1) / (2 (f2 + 1))`` (bias-corrected),
    where f1 and f2 count the values seen once and twice. Unlike estimators that
    assume equally frequent values, it holds for skewed columns (half one value,
    half distinct), where the rare values show up as singletons."""
    f1 = int(np.count_nonzero(sample_counts == 1))
    f2 = int(np.count_nonzero(sample_counts == 2))
    return len(sample_counts) + f1 * (f1 - 1) / (2 * (f2 + 1))


def prefer_runs(keys: np.ndarray, seed: int = 0) -> bool:
    """Whether counting beats sorting for these (unsorted numpy) keys: their
    estimated number of distinct values is at most RUNS_MAX_DISTINCT_SHARE of them.

    From DISTINCT_SAMPLE values drawn at random (a few milliseconds); a wrong
    guess costs time only, never exactness.
    """
    n = len(keys)
    if n < 2:
        return False
    if n <= DISTINCT_SAMPLE:
        return len(np.unique(keys)) <= RUNS_MAX_DISTINCT_SHARE * n
    drawn = keys[np.random.default_rng(seed).integers(0, n, DISTINCT_SAMPLE)]
    _, counts = np.unique(drawn, return_counts=True)
    return _distinct_estimate(counts) <= RUNS_MAX_DISTINCT_SHARE * n


def _few_distinct(estimate: float | None, values: pa.Array | pa.ChunkedArray) -> bool:
    """:func:`prefer_runs`'s decision for Arrow values, from :func:`_distinct_estimate_arrow`."""
    return estimate is not None and estimate <= RUNS_MAX_DISTINCT_SHARE * (len(values) - values.null_count)


def _distinct_estimate_arrow(values: pa.Array | pa.ChunkedArray, seed: int) -> float | None:
    """Estimated distinct valid values (exact for small arrays), drawn from the chunks in
    place (no copy of the column): rows are drawn, the nulls among them dropped. None
    below two valid values."""
    valid = len(values) - values.null_count
    if valid < 2:
        return None
    if len(values) <= DISTINCT_SAMPLE:
        return float(len(np.unique(values.drop_null().to_numpy())))
    rows = np.sort(np.random.default_rng(seed).integers(0, len(values), DISTINCT_SAMPLE))
    chunks = values.chunks if isinstance(values, pa.ChunkedArray) else [values]
    starts = np.cumsum([0, *(len(c) for c in chunks)])
    cuts = np.searchsorted(rows, starts)  # rows[cuts[j]:cuts[j + 1]] fall in chunk j (taking from a ChunkedArray would combine it)
    drawn = np.concatenate(
        [
            chunks[j].take(pa.array(rows[cuts[j] : cuts[j + 1]] - starts[j])).drop_null().to_numpy(zero_copy_only=False)
            for j in range(len(chunks))
            if cuts[j + 1] > cuts[j]
        ]
    )
    _, counts = np.unique(drawn, return_counts=True)
    return _distinct_estimate(counts)


def _counts_in_place(codec: KeyCodec, values: pa.Array | pa.ChunkedArray) -> bool:
    """Whether these values are counted straight from their Arrow chunks (floats,
    whose keys are the values themselves) rather than from a numpy copy of them."""
    return codec.dtype in ("float32", "float64") and values.type == codec.type


def _count_arrow(values: pa.Array | pa.ChunkedArray, expected: float | None = None) -> tuple[Runs, int, int] | None:
    """Float values counted into runs straight from their Arrow chunks (a compiled
    hash count, engine.stats.floatcount): no combined copy and no copy without the
    nulls, which numpy keys need (~30% of a price column's prepare time).
    ``expected``: the estimated distinct values (sizes the hash table). (runs,
    nulls, NaN), or None if the values are not float32/float64."""
    if not floatcount.supports(values.type):
        return None
    keys, counts = floatcount.count(values, expected)
    order = np.argsort(keys, kind="stable")  # NaN last; -0.0 next to 0.0, NaN payloads together: merged below
    v, c = _reduce_sorted(keys[order], counts[order])
    nans = int(c[-1]) if len(v) and np.isnan(v[-1]) else 0
    return Runs.of(v, c), values.null_count, nans


# ============================================================== samples and splitters
@dataclass(frozen=True)
class Sample:
    """Sampled keys of one partition, each standing for ``weight`` values.

    ``positions`` index the partition's local keys (sorted keys for numpy
    codecs, the original order for Arrow codecs): with the partition id they
    make every value distinct, which is what lets ties be split.
    """

    part: int
    keys: Any
    positions: np.ndarray
    weight: float


@dataclass(frozen=True)
class Splitter:
    """A cut in the total order of (key, partition, position)."""

    key: Any
    part: int
    position: int


@dataclass(frozen=True)
class LocalKeys:
    """One partition's keys, with whether they are already sorted (numpy keys: a
    sorted array or :class:`Runs`; Arrow keys: unsorted)."""

    keys: Any
    sorted: bool


REPRESENTATIONS = ("auto", "values", "runs")


def prepare(
    codec: KeyCodec, values: pa.Array | pa.ChunkedArray, part: int, sample_size: int, representation: str = "auto"
) -> tuple[LocalKeys, Sample, int, int]:
    """Encode a partition's values; sort (or count) them and sample them.

    Numpy keys are sorted here (so the range tasks only merge sorted runs, which
    numpy's timsort does in a few linear passes) and sampled regularly; with
    ``representation`` ``"runs"`` (or ``"auto"`` when :func:`prefer_runs` says so)
    they are counted into :class:`Runs` instead. Arrow keys are not sorted here
    (Arrow has no merge: they are sorted once, in their range) and are sampled
    at random positions.
    Returns (local keys, sample, null count, NaN count).
    """
    if representation not in REPRESENTATIONS:
        raise InvalidArgumentError(f"representation must be one of {', '.join(REPRESENTATIONS)}, not {representation!r}")
    if codec.kind == "numpy":
        counted: tuple[Runs, int, int] | None = None
        in_place = _counts_in_place(codec, values)
        estimate = _distinct_estimate_arrow(values, part) if in_place else None  # also sizes the count's table
        count = representation == "runs" or (representation == "auto" and _few_distinct(estimate, values))
        if count and in_place:
            counted = _count_arrow(values, estimate)
        ordered: Runs | np.ndarray | None
        if counted is not None:
            ordered, nulls, nans = counted
        else:
            keys, nulls, nans = codec.encode(values)
            ordered = None
            if count or (representation == "auto" and not in_place and prefer_runs(keys, part)):
                try:
                    ordered = Runs.count(keys)
                except pa.ArrowNotImplementedError:  # a dtype Arrow cannot hash: sort it
                    ordered = None
            if ordered is None:
                ordered = np.sort(keys)
        n = len(ordered)
        s = min(n, sample_size)
        positions = (np.arange(s, dtype=np.int64) * n) // s if s else np.zeros(0, np.int64)
        local = LocalKeys(ordered, True)
        sampled = take(ordered, positions)
    else:
        keys, nulls, nans = codec.encode(values)
        n = len(keys)
        s = min(n, sample_size)
        rng = np.random.default_rng(part)
        positions = np.sort(rng.choice(n, size=s, replace=False)) if s else np.zeros(0, np.int64)
        local = LocalKeys(keys, False)
        sampled = keys.take(pa.array(positions))
    return local, Sample(part, sampled, positions, (n / s) if s else 0.0), nulls, nans


def _sample_order(codec: KeyCodec, samples: Sequence[Sample]) -> tuple[list[Any], np.ndarray, np.ndarray, np.ndarray]:
    """All samples in (key, part, position) order: keys (Python list), parts, positions, weights."""
    samples = [s for s in samples if len(s.positions)]
    if not samples:
        return [], np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0)
    parts = np.concatenate([np.full(len(s.positions), s.part, np.int64) for s in samples])
    positions = np.concatenate([s.positions for s in samples])
    weights = np.concatenate([np.full(len(s.positions), s.weight) for s in samples])
    if codec.kind == "numpy":
        keys = np.concatenate([s.keys for s in samples])
        order = np.lexsort((positions, parts, keys))
        return list(keys[order]), parts[order], positions[order], weights[order]
    keys = pa.concat_arrays([s.keys for s in samples])
    table = pa.table({"k": keys, "p": parts, "i": positions})
    order = pc.sort_indices(table, sort_keys=[("k", "ascending"), ("p", "ascending"), ("i", "ascending")]).to_numpy()
    return keys.take(pa.array(order)).to_pylist(), parts[order], positions[order], weights[order]


def splitters(codec: KeyCodec, samples: Sequence[Sample], ranges: int) -> list[Splitter]:
    """``ranges - 1`` cuts that divide the sampled weight evenly (fewer if samples are few)."""
    if ranges < 1:
        raise InvalidArgumentError(f"ranges must be >= 1, got {ranges}")
    keys, parts, positions, weights = _sample_order(codec, samples)
    if not keys or ranges == 1:
        return []
    cum = np.cumsum(weights)
    total = cum[-1]
    chosen: list[int] = []
    for k in range(1, ranges):
        i = int(np.searchsorted(cum, total * k / ranges, side="left"))
        i = min(i + 1, len(keys) - 1)  # the cut starts the next range at the sample after the target weight
        if not chosen or i > chosen[-1]:
            chosen.append(i)
    return [Splitter(keys[i], int(parts[i]), int(positions[i])) for i in chosen]


# ============================================================== split
def _searchsorted_arrow(keys: pa.Array, value: Any, side: Side) -> int:
    """Binary search in sorted Arrow keys with Python comparisons (log n scalar reads)."""
    lo, hi = 0, len(keys)
    while lo < hi:
        mid = (lo + hi) // 2
        k = keys[mid].as_py()
        if k < value or (side == "right" and k == value):
            lo = mid + 1
        else:
            hi = mid
    return lo


def search(keys: Any, value: Any, side: Side) -> int:
    """``np.searchsorted`` on sorted keys of either kind (NaN is the largest float)."""
    if isinstance(keys, Runs):
        return keys.searchsorted(value, side)
    if isinstance(keys, np.ndarray):
        return int(np.searchsorted(keys, value, side=side))
    return _searchsorted_arrow(keys, value, side)


def cut_points(keys: Any, part: int, cuts: Sequence[Splitter]) -> list[int]:
    """Where each splitter cuts a partition's *sorted* keys: the count of its
    elements before the splitter in (key, partition, position) order."""
    out = []
    for s in cuts:
        if part == s.part:
            out.append(s.position)  # the splitter is one of this partition's own keys
        else:
            out.append(search(keys, s.key, "left" if part > s.part else "right"))
    return out


def split(local: LocalKeys, part: int, cuts: Sequence[Splitter]) -> list[Any]:
    """A partition's keys cut into ``len(cuts) + 1`` ranges (each sorted iff ``local.sorted``)."""
    keys = local.keys
    if local.sorted:
        bounds = [0, *cut_points(keys, part, cuts), len(keys)]
        return [keys[a:b] for a, b in zip(bounds[:-1], bounds[1:])]
    n = len(keys)
    bucket: np.ndarray = np.zeros(n, dtype=np.uint8 if len(cuts) < 255 else np.int32)
    for s in cuts:  # bucket = how many splitters the element is at or above
        if part > s.part:  # an equal element comes after the splitter in (key, part, position) order
            above = pc.greater_equal(keys, s.key).to_numpy(zero_copy_only=False)
        elif part < s.part:
            above = pc.greater(keys, s.key).to_numpy(zero_copy_only=False)
        else:  # the splitter is one of this partition's own keys: equal ones from its position on
            above = pc.greater(keys, s.key).to_numpy(zero_copy_only=False)
            equal = pc.equal(keys, s.key).to_numpy(zero_copy_only=False)
            above |= equal & (np.arange(n) >= s.position)
        bucket += above
    sizes = np.bincount(bucket, minlength=len(cuts) + 1)
    ordered = keys.take(pa.array(np.argsort(bucket, kind="stable")))  # a radix sort for uint8
    starts = np.concatenate([[0], np.cumsum(sizes)])
    return [ordered.slice(int(a), int(b - a)) for a, b in zip(starts[:-1], starts[1:])]


def merge_pieces(codec: KeyCodec, pieces: Sequence[Any], presorted: bool) -> Any:
    """One range's pieces (from every partition) as one sorted key array."""
    pieces = [p for p in pieces if len(p)]
    if not pieces:
        return codec.empty()
    if codec.kind == "numpy" and any(isinstance(p, Runs) for p in pieces):
        return _merge_runs(pieces, presorted)
    if codec.kind == "numpy":
        merged = np.concatenate(pieces)
        # timsort finds the sorted runs and merges them: a few linear passes
        return np.sort(merged, kind="stable" if presorted else "quicksort")
    merged = pa.concat_arrays(pieces)
    if stringsort.supports(merged.type):
        # strings and binaries by their bytes, word by word in numpy (engine.stats.stringsort):
        # a few times faster than Arrow's comparison sort; same byte order
        return merged.take(pa.array(stringsort.sort_indices(merged)))
    return merged.take(pc.sort_indices(merged))


def merged_picks(codec: KeyCodec, pieces: Sequence[Any], presorted: bool, positions: Sequence[int]) -> tuple[int, Any, Any, Any]:
    """What :func:`merge_pieces` then :func:`take` give, without keeping the merged
    range: (values, first key, last key, keys at ``positions``). Arrow keys are then
    never gathered into sorted order (the sort's indices are read instead): a gather
    of every string of the range, and its copy into the object store, saved."""
    pieces = [p for p in pieces if len(p)]
    if codec.kind == "numpy" or not pieces:
        keys = merge_pieces(codec, pieces, presorted)
        n = len(keys)
        return n, _key_at(keys, 0) if n else None, _key_at(keys, n - 1) if n else None, take(keys, positions)
    merged = pa.concat_arrays(pieces)
    if not stringsort.supports(merged.type):
        keys = merge_pieces(codec, [merged], presorted)
        n = len(keys)
        return n, keys[0].as_py(), keys[n - 1].as_py(), take(keys, positions)
    order = stringsort.sort_indices(merged)
    n = len(order)
    ends = merged.take(pa.array(order[[0, n - 1]]))
    return n, ends[0].as_py(), ends[1].as_py(), take(merged, order[np.asarray(positions, np.int64)].tolist())


def _key_at(keys: Any, i: int) -> Any:
    return keys[i] if not isinstance(keys, pa.Array) else keys[i].as_py()


def _merge_runs(pieces: Sequence[Any], presorted: bool) -> Runs:
    """Pieces of which some are Runs: every piece as runs (sorted arrays encoded in one
    pass), the runs merged by value (timsort over sorted runs) and equal values summed."""
    as_runs = [p if isinstance(p, Runs) else Runs.encode(p if presorted else np.sort(p)) for p in pieces]
    values = np.concatenate([r.values for r in as_runs])
    counts = np.concatenate([r.counts for r in as_runs])
    order = np.argsort(values, kind="stable")
    return Runs.of(*_reduce_sorted(values[order], counts[order]))


def take(keys: Any, positions: Sequence[int] | np.ndarray) -> Any:
    if isinstance(keys, Runs):
        return keys.take(positions)
    if isinstance(keys, np.ndarray):
        return keys[np.asarray(positions, dtype=np.int64)]
    return keys.take(pa.array(positions, pa.int64()))


# ============================================================== rank arithmetic
def _exact_probability(p: Any) -> Fraction:
    """``p`` as an exact fraction, a float read as its shortest decimal (as DuckDB reads ``0.1``)."""
    if isinstance(p, bool):
        raise InvalidArgumentError(f"probability {p!r} is not a number")
    try:
        if isinstance(p, float):
            if not math.isfinite(p):
                raise ValueError
            q = Fraction(repr(p))
        elif isinstance(p, (int, Fraction, Decimal)):
            q = Fraction(p)
        elif isinstance(p, str):
            q = Fraction(Decimal(p.strip()))
        else:
            q = Fraction(repr(float(p)))
    except (ValueError, ArithmeticError, TypeError) as exc:
        raise InvalidArgumentError(f"probability {p!r} is not a number in [0, 1]") from exc
    if not 0 <= q <= 1:
        raise InvalidArgumentError(f"probability {p} is outside [0, 1]")
    return q


def quantile_rank(n: int, p: Any) -> int:
    """The 0-based rank of the quantile ``p`` of ``n`` values (DuckDB's ``quantile_disc``)."""
    if n <= 0:
        raise InvalidArgumentError("no quantile of zero values")
    q = _exact_probability(p)
    return max(math.ceil(n * q), 1) - 1


def ranks_for(n: int, probabilities: Sequence[Any]) -> list[int | None]:
    """Quantile ranks of several probabilities (None for all when ``n == 0``); checks them all."""
    for p in probabilities:
        _exact_probability(p)
    return [None if n == 0 else quantile_rank(n, p) for p in probabilities]


def ranges_for_rank(offsets: Sequence[int], rank: int) -> tuple[int, int]:
    """(range index, position within it) of a global rank; ``offsets`` are the
    ranges' start ranks followed by the total."""
    if not 0 <= rank < offsets[-1]:
        raise InvalidArgumentError(f"rank {rank} is outside [0, {offsets[-1]})")
    k = bisect.bisect_right(offsets, rank) - 1
    while offsets[k + 1] == offsets[k]:  # never land in an empty range
        k += 1
    return k, rank - offsets[k]


def _less(a: Any, b: Any) -> bool:
    """a < b in key order (NaN greatest, NaNs equal)."""
    if isinstance(a, float) or isinstance(a, np.floating):
        if np.isnan(a):
            return False
        if np.isnan(b):
            return True
    return bool(a < b)


def ranges_for_count(lasts: Sequence[Any], counts: Sequence[int], key: Any, inclusive: bool) -> int | None:
    """The range whose search answers "how many values are < key" (``<=`` if
    ``inclusive``): the first non-empty range not wholly below the key. Every
    range before it counts whole, none after it counts. None: every range is below.

    ``lasts`` are the ranges' largest keys (anything for empty ranges).
    """
    for i, (last, c) in enumerate(zip(lasts, counts)):
        if not c:
            continue
        below = not _less(key, last) if inclusive else _less(last, key)
        if not below:
            return i
    return None
