"""Counts and extremes: the cheap, exactly mergeable statistics every column has (the
moments and lengths are registered statistics: engine/measures/moments.py, value_lengths.py)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

import engine.scalars  # noqa: F401  (registers lossless pickling of date/time scalars beyond Python's datetime)
from engine import types as mt
from engine.measures.base import Accumulator


# ---------------------------------------------------------------- counts
@dataclass(frozen=True)
class Counts:
    rows: int = 0
    nulls: int = 0
    nans: int = 0


class CountsAccumulator(Accumulator[Counts]):
    def __init__(self, type_: pa.DataType) -> None:
        self._floating = mt.is_floating(type_)

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
    if mt.is_duration(values.type):  # no min_max kernel for durations; their int64 storage orders them
        ends = pc.min_max(values.view(pa.int64()))
        both = pa.array([ends["min"].as_py(), ends["max"].as_py()], pa.int64()).view(values.type)
        return MinMax(both[0], both[1])
    mm = pc.min_max(values)  # skips nulls and NaN, but gives NaN when there is nothing else
    lo, hi = mm["min"], mm["max"]
    if not lo.is_valid or (mt.is_floating(values.type) and math.isnan(lo.as_py())):  # only NaN
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
