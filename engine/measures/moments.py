"""Moments: the sum, mean and sample standard deviation of a number column's values
(``sum``, ``mean``, ``stddev``), nulls and NaN left out; infinities propagate to sum and
mean as IEEE arithmetic says.

The state is (n, mean, M2, sum), merged with Chan et al.'s pairwise update of (n, mean, M2)
so that merging partitions is numerically stable; integer sums are kept exact as Python
ints (pyarrow's int64 sum wraps silently on overflow) and decimal sums as exact
``Decimal``. ``stddev`` is the sample standard deviation (n - 1), as DuckDB's and Spark's.

A statistic from before the registry: its columns keep their place in statistics.parquet
(after ``max``) and its state its place in partial_state.arrow (after ``max``), so files
written before it moved here read the same (docs/FORMAT.md).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal, localcontext
from typing import Any

import numpy as np
import pyarrow as pa

from engine import arrowcompute as pc
from engine import types as mt
from engine.measures.base import Measure, nonnull
from engine.types import is_numeric

#: an exact sum: int for integers, float for floats, decimal.Decimal for decimals
Sum = int | float | Decimal


@dataclass(frozen=True)
class Moments:
    n: int = 0
    mean: float = 0.0
    m2: float = 0.0
    sum: Sum = 0


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


def moments_of(x: np.ndarray, exact_sum: int | Decimal | None = None) -> Moments:
    """The moments of valid float64 values (no NaN); ``exact_sum`` replaces the float sum
    (integers: a Python int, decimals: a Decimal)."""
    if len(x) == 0:
        return Moments()
    with np.errstate(all="ignore"):
        mean = float(x.mean())
        m2 = float(((x - mean) ** 2).sum()) if math.isfinite(mean) else math.nan
        total = float(x.sum()) if exact_sum is None else exact_sum
    return Moments(len(x), mean, m2, total)


class MomentsMeasure(Measure[Moments]):
    """Sum, mean and standard deviation of finite values (NaN and nulls excluded)."""

    name = "moments"
    columns = (pa.field("sum", pa.string()), pa.field("mean", pa.float64()), pa.field("stddev", pa.float64()))
    state_fields = (
        pa.field("n", pa.int64()),  # null: the column has no moments
        pa.field("mean", pa.float64()),
        pa.field("m2", pa.float64()),
        pa.field("sum", pa.string()),  # "i:<int>", "f:<float.hex>" or "d:<Decimal>": exact
    )
    display = (("mean", "mean"), ("stddev", "stddev"), ("sum", "sum"))
    column_after = "max"
    state_after = "max"

    def __init__(self, type_: pa.DataType) -> None:
        super().__init__(type_)
        self._kind = "int" if mt.is_integer(type_) else "decimal" if mt.is_decimal(type_) else "float"

    @staticmethod
    def applies_to(type_: pa.DataType) -> bool:
        return is_numeric(type_)

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

    def from_sorted(self, values: np.ndarray, distinct: np.ndarray, floats: np.ndarray | None) -> Moments:
        """The moments from a whole column's shared sorted view (engine/stats/sortedvalues.py),
        as ``update`` computes them from the column: ``values`` its valid values in column
        order in storage form (decimals unscaled), ``distinct`` their sorted distinct values,
        ``floats`` a decimal column's values as float64 in column order."""
        if len(values) == 0:
            return self.zero()
        integral = self._kind != "float"
        bounds = (int(distinct[0]), int(distinct[-1])) if integral and len(distinct) else None
        if self._kind == "decimal":
            if floats is None:
                raise ValueError("a decimal column's moments need its float view")
            total = exact_int_sum(values, bounds)
            return moments_of(floats, Decimal(f"{total}e-{self.type.scale}"))  # exact: no context rounding
        if self._kind == "int":
            return moments_of(values.astype(np.float64), exact_int_sum(values, bounds))
        return moments_of(values.astype(np.float64, copy=False))

    def merge(self, a: Moments, b: Moments) -> Moments:
        if a.n == 0:
            return b
        if b.n == 0:
            return a
        with np.errstate(all="ignore"):
            mean, m2 = _merged_mean_m2(a.n, a.mean, a.m2, b.n, b.mean, b.m2)
        return Moments(a.n + b.n, mean, m2, _exact_add(a.sum, b.sum))

    def merge_all(self, states: Iterable[Moments]) -> Moments:
        """``merge`` folded left from ``zero``: the same float operations in the same order,
        so the same bits, without a Moments object a step (the driver merges every
        partition of every column)."""
        zero = self.zero()
        acc_n, acc_mean, acc_m2, acc_sum = zero.n, zero.mean, zero.m2, zero.sum
        merged = _merged_mean_m2
        for b in states:
            if acc_n == 0:  # as merge: an empty left side gives the right one, as it is
                acc_n, acc_mean, acc_m2, acc_sum = b.n, b.mean, b.m2, b.sum
                continue
            if b.n == 0:
                continue
            acc_mean, acc_m2 = merged(acc_n, acc_mean, acc_m2, b.n, b.mean, b.m2)
            acc_n, acc_sum = acc_n + b.n, _exact_add(acc_sum, b.sum)
        return Moments(acc_n, acc_mean, acc_m2, acc_sum)

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

    def encode(self, state: Moments) -> dict[str, Any]:
        return {"n": state.n, "mean": state.mean, "m2": state.m2, "sum": _sum_text(state.sum)}

    def decode(self, fields: Mapping[str, Any]) -> Moments:
        if fields["n"] is None:
            raise ValueError("moments missing")
        return Moments(fields["n"], fields["mean"], fields["m2"], _sum_value(fields["sum"]))

    def from_statistics(self, row: Mapping[str, Any]) -> Moments:
        """The state behind a partition's stored row: n its non-null non-NaN values, the
        mean, M2 from ``stddev`` (NaN where a non-finite stddev of several values left it
        unknown) and the stored sum (text, exact); no rows or no sum: no values."""
        n = nonnull(row)
        if n <= 0 or row.get("sum") is None:
            return self.zero()
        sd = row.get("stddev")
        m2 = (sd * sd * (n - 1)) if sd is not None and n > 1 and math.isfinite(sd) else (0.0 if n == 1 else math.nan)
        return Moments(n, float(row["mean"]), m2, decode_sum(row["sum"], self.type))


def decode_sum(text: str, t: pa.DataType) -> int | float | Decimal:
    """A stored sum (statistics.parquet's text form) as a number that adds exactly where
    the column's sums are exact: an int for integers, a Decimal for decimals, else a float.
    The one decoder: the subset merge (engine/subset) and the lookups (engine/lookup) use it."""
    if mt.is_integer(t):
        return int(text)
    if mt.is_decimal(t):
        return Decimal(text)
    return float(text)


def _merged_mean_m2(a_n: int, a_mean: float, a_m2: float, b_n: int, b_mean: float, b_m2: float) -> tuple[float, float]:
    """The mean and M2 of two non-empty parts (Chan et al.): the one arithmetic of
    ``merge`` and ``merge_all``, so both give the same bits."""
    if not (math.isfinite(a_mean) and math.isfinite(b_mean)):
        # inf - inf in delta would make the mean NaN; IEEE says inf + x = inf (and inf - inf = NaN)
        return a_mean + b_mean, math.nan
    n = a_n + b_n
    delta = b_mean - a_mean
    return a_mean + delta * (b_n / n), a_m2 + b_m2 + delta * delta * (a_n * b_n / n)


def _exact_add(a: Sum, b: Sum) -> Sum:
    """a + b; decimals without rounding (Python's default context keeps only 28 digits)."""
    if isinstance(a, Decimal) or isinstance(b, Decimal):
        if isinstance(a, float) or isinstance(b, float):
            raise TypeError("a decimal sum and a float sum")  # as Decimal + float raises
        with localcontext() as ctx:
            ctx.prec = 200
            return a + b
    return a + b


def _decimal_sum(values: pa.Array) -> Decimal:
    try:
        # widened to 38 (or 76) digits by Arrow; raises rather than wraps on overflow
        total = pc.sum(values.cast(pa.decimal256(76, values.type.scale))).as_py()
        return total if total is not None else Decimal(0)
    except pa.ArrowInvalid:
        with localcontext() as ctx:
            ctx.prec = 200
            return sum(values.to_pylist(), Decimal(0))


def _sum_text(value: Sum) -> str:
    """A sum in partial_state.arrow's exact text form."""
    if isinstance(value, bool):  # never a sum, but bool is an int
        raise TypeError("a boolean sum")
    if isinstance(value, int):
        return f"i:{value}"
    if isinstance(value, float):
        return f"f:{value.hex()}"
    if isinstance(value, Decimal):
        return f"d:{value}"
    raise TypeError(f"cannot store a sum of type {type(value).__name__}")


def _sum_value(text: str) -> Sum:
    tag, _, body = text.partition(":")
    if tag == "i":
        return int(body)
    if tag == "f":
        return float.fromhex(body)
    if tag == "d":
        return Decimal(body)
    raise ValueError(f"unknown sum tag {tag!r}")


MEASURE = MomentsMeasure
