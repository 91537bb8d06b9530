"""Counts, extremes, moments and lengths: the cheap, exactly mergeable statistics.

Moments use Chan et al.'s pairwise update of (n, mean, M2) so that merging
partitions is numerically stable; integer sums are kept exact as Python ints
(pyarrow's int64 sum wraps silently on overflow).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.types as pt

import engine.scalars  # noqa: F401  (registers lossless pickling of date/time scalars beyond Python's datetime)
from engine.measures.base import Accumulator
from engine.types import is_string_like


# ---------------------------------------------------------------- counts
@dataclass(frozen=True)
class Counts:
    rows: int = 0
    nulls: int = 0
    nans: int = 0


class CountsAccumulator(Accumulator[Counts]):
    def __init__(self, type_: pa.DataType) -> None:
        self._floating = pt.is_floating(type_)

    def zero(self) -> Counts:
        return Counts()

    def update(self, state: Counts, batch: pa.Array) -> Counts:
        nans = 0
        if self._floating and len(batch) - batch.null_count:
            nans = pc.sum(pc.is_nan(batch)).as_py() or 0
        return Counts(state.rows + len(batch), state.nulls + batch.null_count, state.nans + nans)

    def merge(self, a: Counts, b: Counts) -> Counts:
        return Counts(a.rows + b.rows, a.nulls + b.nulls, a.nans + b.nans)

    def finalize(self, state: Counts) -> dict[str, Any]:
        return {
            "row_count": state.rows,
            "null_count": state.nulls,
            "nan_count": state.nans if self._floating else None,
        }


# ---------------------------------------------------------------- min / max
@dataclass(frozen=True)
class MinMax:
    min: pa.Scalar | None = None
    max: pa.Scalar | None = None


def _min_max_of(values: pa.Array) -> MinMax:
    if len(values) == values.null_count:
        return MinMax()
    if pt.is_duration(values.type):  # no min_max kernel for durations; their int64 storage orders them
        ends = pc.min_max(values.view(pa.int64()))
        both = pa.array([ends["min"].as_py(), ends["max"].as_py()], pa.int64()).view(values.type)
        return MinMax(both[0], both[1])
    mm = pc.min_max(values)  # skips nulls and NaN, but gives NaN when there is nothing else
    lo, hi = mm["min"], mm["max"]
    if not lo.is_valid or (pt.is_floating(values.type) and math.isnan(lo.as_py())):  # only NaN
        return MinMax()
    return MinMax(lo, hi)


class MinMaxAccumulator(Accumulator[MinMax]):
    """Exact extremes in the column's own type (NaN is excluded; infinities count)."""

    def __init__(self, type_: pa.DataType) -> None:
        self._type = type_

    def zero(self) -> MinMax:
        return MinMax()

    def update(self, state: MinMax, batch: pa.Array) -> MinMax:
        return self.merge(state, _min_max_of(batch))

    def merge(self, a: MinMax, b: MinMax) -> MinMax:
        if a.min is None:
            return b
        if b.min is None:
            return a
        both = _min_max_of(pa.array([a.min, b.min, a.max, b.max], type=self._type))
        return both

    def finalize(self, state: MinMax) -> dict[str, Any]:
        return {"min": state.min, "max": state.max}


# ---------------------------------------------------------------- moments
@dataclass(frozen=True)
class Moments:
    n: int = 0
    mean: float = 0.0
    m2: float = 0.0
    sum: Any = 0  # int for integers, float for floats, decimal.Decimal for decimals


def exact_int_sum(values: np.ndarray, bounds: tuple[int, int] | None = None) -> int:
    """Sum of int64/uint64 values with no overflow: split into 32-bit halves.

    ``bounds``: the values' (min, max), when known; if no partial sum can leave
    int64, one plain sum is exact (a third of the passes)."""
    if bounds is not None and len(values) * max(abs(int(bounds[0])), abs(int(bounds[1]))) < 2**63:
        return int(values.sum(dtype=np.int64))
    if values.dtype.kind == "u":
        v = values.astype(np.uint64, copy=False)
        hi = (v >> np.uint64(32)).astype(np.int64)
        lo = (v & np.uint64(0xFFFFFFFF)).astype(np.int64)
    else:
        v = values.astype(np.int64, copy=False)
        hi = v >> 32  # arithmetic shift keeps the sign
        lo = v & 0xFFFFFFFF
    return (int(hi.sum(dtype=np.int64)) << 32) + int(lo.sum(dtype=np.int64))


def moments_of(x: np.ndarray, exact_sum: Any = None) -> Moments:
    """The moments of valid float64 values (no NaN); ``exact_sum`` replaces the float sum
    (integers: a Python int, decimals: a Decimal)."""
    if len(x) == 0:
        return Moments()
    with np.errstate(all="ignore"):
        mean = float(x.mean())
        m2 = float(((x - mean) ** 2).sum()) if math.isfinite(mean) else math.nan
        if exact_sum is None:
            exact_sum = float(x.sum())
    return Moments(len(x), mean, m2, exact_sum)


class MomentsAccumulator(Accumulator[Moments]):
    """Sum, mean and standard deviation of finite values (NaN and nulls excluded).

    Infinities propagate to sum and mean as IEEE arithmetic says.
    """

    def __init__(self, type_: pa.DataType) -> None:
        self._type = type_
        self._kind = "int" if pt.is_integer(type_) else "decimal" if pt.is_decimal(type_) else "float"

    def zero(self) -> Moments:
        return Moments(sum=0 if self._kind != "float" else 0.0)

    def update(self, state: Moments, batch: pa.Array) -> Moments:
        valid = batch.drop_null()
        if self._kind == "float":
            valid = valid.filter(pc.invert(pc.is_nan(valid)))
        n = len(valid)
        if n == 0:
            return state
        if self._kind == "int":
            ints = valid.to_numpy(zero_copy_only=False)
            return self.merge(state, moments_of(ints.astype(np.float64), exact_int_sum(ints)))
        if self._kind == "decimal":
            x = valid.cast(pa.float64(), safe=False).to_numpy(zero_copy_only=False)
            return self.merge(state, moments_of(x, _decimal_sum(valid)))
        return self.merge(state, moments_of(valid.cast(pa.float64()).to_numpy(zero_copy_only=False)))

    def merge(self, a: Moments, b: Moments) -> Moments:
        if a.n == 0:
            return b
        if b.n == 0:
            return a
        with np.errstate(all="ignore"):
            mean, m2 = _merged_mean_m2(a.n, a.mean, a.m2, b.n, b.mean, b.m2)
        return Moments(a.n + b.n, mean, m2, _exact_add(a.sum, b.sum))

    def finalize(self, state: Moments) -> dict[str, Any]:
        if state.n == 0:
            return {"sum": None, "mean": None, "stddev": None}
        # sample standard deviation (n - 1), as DuckDB's stddev and Spark's stddev
        stddev = math.sqrt(state.m2 / (state.n - 1)) if state.n > 1 and state.m2 >= 0 else (0.0 if state.n == 1 else math.nan)
        if self._kind == "int":
            mean = state.sum / state.n  # exact division of the exact sum
        elif self._kind == "decimal":
            mean = float(state.sum / state.n)
        else:
            mean = state.mean
        return {"sum": state.sum, "mean": float(mean), "stddev": stddev}


def fold_moments(zero: Moments, n: list[int], mean: list[float], m2: list[float], sums: list[Any]) -> Moments:
    """``MomentsAccumulator.merge`` folded left from ``zero`` over states given field by field
    (partition i: ``n[i]``, ``mean[i]``, ``m2[i]``, ``sums[i]``), in that order.

    The same float operations in the same order as the pairwise fold, so the same bits,
    without a Moments object a step (the driver merges every partition of every column).
    """
    acc_n, acc_mean, acc_m2, acc_sum = zero.n, zero.mean, zero.m2, zero.sum
    merged = _merged_mean_m2
    for i, b_n in enumerate(n):
        if acc_n == 0:  # as merge: an empty left side gives the right one, as it is
            acc_n, acc_mean, acc_m2, acc_sum = b_n, mean[i], m2[i], sums[i]
            continue
        if b_n == 0:
            continue
        acc_mean, acc_m2 = merged(acc_n, acc_mean, acc_m2, b_n, mean[i], m2[i])
        acc_n, acc_sum = acc_n + b_n, _exact_add(acc_sum, sums[i])
    return Moments(acc_n, acc_mean, acc_m2, acc_sum)


def _merged_mean_m2(a_n: int, a_mean: float, a_m2: float, b_n: int, b_mean: float, b_m2: float) -> tuple[float, float]:
    """The mean and M2 of two non-empty parts (Chan et al.): the one arithmetic of
    ``MomentsAccumulator.merge`` and ``fold_moments``, so both give the same bits."""
    if not (math.isfinite(a_mean) and math.isfinite(b_mean)):
        # inf - inf in delta would make the mean NaN; IEEE says inf + x = inf (and inf - inf = NaN)
        return a_mean + b_mean, math.nan
    n = a_n + b_n
    delta = b_mean - a_mean
    return a_mean + delta * (b_n / n), a_m2 + b_m2 + delta * delta * (a_n * b_n / n)


def _exact_add(a: Any, b: Any) -> Any:
    """a + b; decimals without rounding (Python's default context keeps only 28 digits)."""
    from decimal import Decimal, localcontext

    if isinstance(a, Decimal) or isinstance(b, Decimal):
        with localcontext() as ctx:
            ctx.prec = 200
            return a + b
    return a + b


def _decimal_sum(values: pa.Array) -> Any:
    from decimal import Decimal, localcontext

    try:
        # widened to 38 (or 76) digits by Arrow; raises rather than wraps on overflow
        total = pc.sum(values.cast(pa.decimal256(76, values.type.scale))).as_py()
        return total if total is not None else Decimal(0)
    except pa.ArrowInvalid:
        with localcontext() as ctx:
            ctx.prec = 200
            return sum(values.to_pylist(), Decimal(0))


# ---------------------------------------------------------------- lengths
@dataclass(frozen=True)
class Lengths:
    n: int = 0
    total: int = 0
    max: int | None = None


class LengthAccumulator(Accumulator[Lengths]):
    """Average and maximum length: characters for strings, bytes for binary."""

    def __init__(self, type_: pa.DataType) -> None:
        self._string = is_string_like(type_)

    def zero(self) -> Lengths:
        return Lengths()

    def update(self, state: Lengths, batch: pa.Array) -> Lengths:
        valid = batch.drop_null()
        if len(valid) == 0:
            return state
        lengths = pc.utf8_length(valid) if self._string else pc.binary_length(valid)
        mm = pc.max(lengths).as_py()
        return self.merge(state, Lengths(len(valid), pc.sum(lengths).as_py(), mm))

    def merge(self, a: Lengths, b: Lengths) -> Lengths:
        if a.max is None:
            return b
        if b.max is None:
            return a
        return Lengths(a.n + b.n, a.total + b.total, max(a.max, b.max))

    def finalize(self, state: Lengths) -> dict[str, Any]:
        if state.n == 0:
            return {"avg_len": None, "max_len": None}
        return {"avg_len": state.total / state.n, "max_len": state.max}
