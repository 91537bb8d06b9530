"""One sort of a number or time column's values, shared by the statistics that need order.

A partition task holds a whole column at once. For integers, dates, times,
timestamps, durations, floats and narrow decimals (precision <= 18) the exact
distinct count, the exact value counts (sorted by value, so the table-level
merge only has to merge sorted runs), the exact percentiles, the KLL sketch
(built from a few sorted positions: engine.stats.sketches.kll_of_sorted) and the theta sketch's
distinct values all derive from the same sorted valid values. Narrow integer
ranges are counted with ``np.bincount`` in O(n) instead of a sort, and the sort is
a radix sort (engine.stats.radixsort).

The values are kept in their storage form (numpy integers, float32/float64,
unscaled int64 for decimals), so nothing is converted twice and results are
exact: integers never pass through float64.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from engine import types as mt
from engine.stats import radixsort
from engine.stats.histograms import storage_type
from engine.types import is_native_number

#: Integer ranges up to this many times the number of values (plus a constant)
#: are counted with a bincount (O(n + range)) rather than a sort (O(n log n)).
#: numpy's sort is vectorised (AVX2): measured on 312,500 values, a bincount wins
#: below a range of about half the values (0.97 against 2.35 ms at a tenth) and
#: loses above it (int64 at 3x the values: 5.7 against 2.7 ms; the bench's
#: user_id, 1 M range: 10.4 against 2.9 ms). A sort also leaves every value in
#: order, which makes picking positions (percentiles, KLL) free.
BINCOUNT_RANGE_FACTOR = 0.5
BINCOUNT_RANGE_MIN = 1 << 10


def supports(t: pa.DataType) -> bool:
    """Whether a column of work type ``t`` takes the sorted path."""
    if is_native_number(t):
        return not mt.is_float16(t)
    if mt.is_integer_temporal(t):
        return True
    if mt.is_decimal(t):
        return t.precision <= 18 and t.scale >= 0 and t.byte_width in (16, 32)
    return False


@dataclass
class SortedValues:
    """The valid values of a column, and their sorted distinct values and counts.

    ``values``: non-null, non-NaN values in column order, in storage form (floats
    keep -0.0 here: sums see the values as they are). ``distinct``/``counts``:
    sorted distinct values (floats with -0.0 folded into 0.0, IEEE equality)
    and how often each occurs. ``ordered``: all values sorted, when the
    counting sorted them (None after a bincount).
    """

    type: pa.DataType
    values: np.ndarray
    nans: int
    distinct: np.ndarray
    counts: np.ndarray
    ordered: np.ndarray | None

    @property
    def n(self) -> int:
        return len(self.values)

    def sorted_values(self) -> np.ndarray:
        """Every valid value in ascending order (repeats included)."""
        if self.ordered is None:
            self.ordered = np.repeat(self.distinct, self.counts)
        return self.ordered

    def at_positions(self, positions: Sequence[int] | np.ndarray) -> np.ndarray:
        """The values at 0-based positions of the sorted values."""
        if self.ordered is not None:
            return self.ordered[positions]
        cum = np.cumsum(self.counts)
        return self.distinct[np.searchsorted(cum, positions, side="right")]

    def float64_at(self, positions: np.ndarray) -> np.ndarray:
        """The values at 0-based positions of the sorted values, as float64 (a monotone
        conversion: ascending positions give ascending floats)."""
        picked = self.at_positions(positions)
        if mt.is_decimal(self.type):
            return to_arrow(picked, self.type).cast(pa.float64(), safe=False).to_numpy(zero_copy_only=False)
        return picked.astype(np.float64)


def of(column: pa.Array) -> SortedValues:
    """The sorted view of a whole column (``supports(column.type)`` must hold)."""
    t = column.type
    valid = column.drop_null() if column.null_count else column
    x = storage(valid)
    nans = 0
    if x.dtype.kind == "f":
        nan = np.isnan(x)
        nans = int(nan.sum())
        if nans:
            x = x[~nan]
        key = x + x.dtype.type(0)  # -0.0 + 0.0 = 0.0: one zero, as IEEE equality has it
    else:
        key = x
    distinct, counts, ordered = _count(key)
    return SortedValues(t, x, nans, distinct, counts, ordered)


def storage(valid: pa.Array) -> np.ndarray:
    t = valid.type
    if mt.is_decimal(t):
        return unscaled(valid)
    if is_native_number(t):
        return valid.to_numpy(zero_copy_only=False)
    return valid.view(storage_type(t)).to_numpy(zero_copy_only=False)


def unscaled(valid: pa.Array) -> np.ndarray:
    """Unscaled values of a decimal array without nulls whose precision fits int64."""
    words = valid.type.byte_width // 8
    buf = valid.buffers()[1]
    # two's complement, little endian: the lowest word is the value when it fits in 63 bits
    return np.frombuffer(buf, dtype="<i8").reshape(-1, words)[valid.offset : valid.offset + len(valid), 0].copy()


def _count(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray | None]:
    n = len(x)
    if n == 0:
        return x[:0].copy(), np.zeros(0, np.int64), x[:0].copy()
    if x.dtype.kind in "iu":
        lo, hi = x.min(), x.max()
        span = int(hi) - int(lo) + 1
        if span <= BINCOUNT_RANGE_FACTOR * n + BINCOUNT_RANGE_MIN:
            # offsets in [0, span), computed in 64 bits so narrow types cannot wrap
            if x.dtype.kind == "u":
                offsets = (x.astype(np.uint64) - np.uint64(lo)).astype(np.intp)
            else:
                offsets = x.astype(np.int64) - np.int64(lo)
            bins = np.bincount(offsets, minlength=span)
            present = np.flatnonzero(bins)
            if x.dtype.kind == "u":
                distinct = (present.astype(np.uint64) + np.uint64(lo)).astype(x.dtype)
            else:
                distinct = (present + np.int64(lo)).astype(x.dtype)
            return distinct, bins[present].astype(np.int64), None
    s = radixsort.sort(x)  # np.sort's result (floats here have no NaN and one zero)
    new = s[1:] != s[:-1]
    if new.all():  # distinct (ids, timestamps): their starts are not listed
        return s, np.ones(n, np.int64), s
    starts = np.flatnonzero(np.concatenate(([True], new)))
    ends = np.append(starts[1:], n)
    return s[starts], (ends - starts).astype(np.int64), s


def to_arrow(x: np.ndarray, t: pa.DataType) -> pa.Array:
    """Storage-form values back as an Arrow array of type ``t``."""
    if mt.is_decimal(t):
        words = np.empty((len(x), t.byte_width // 8), dtype="<i8")
        words[:, 0] = x
        words[:, 1:] = (x >> 63)[:, None]  # sign extension
        return pa.Array.from_buffers(t, len(x), [None, pa.py_buffer(words)])  # the buffer keeps words alive: no copy
    if is_native_number(t):
        return pa.array(x, type=t)
    st = storage_type(t)
    return pa.array(x.astype(st.to_pandas_dtype(), copy=False), type=st).view(t)


def percentile_positions(n: int, probabilities: tuple[float, ...]) -> list[int]:
    """Lower nearest-rank positions floor(p * (n - 1)), as ``exact_percentiles`` takes them."""
    return [int(math.floor(p * (n - 1))) for p in probabilities]
