"""Skewness: the sample skewness of a number column's values, as DuckDB's ``skewness``.

The state is (n, mean, M2, M3) of the values, nulls and NaN left out, merged with the
pairwise formulas of Chan et al. and Pébay (2008), so partitions roll up to the table
as one pass over all rows would (up to float rounding); with ``d = mean_b - mean_a``:

    n    = na + nb
    mean = mean_a + d nb / n
    M2   = M2a + M2b + d² na nb / n
    M3   = M3a + M3b + d³ na nb (na - nb) / n² + 3 d (na M2b - nb M2a) / n

finalized as ``sqrt(n (n - 1)) / (n - 2) · (M3 / n) / (M2 / n)^1.5``; null for two values
or fewer, for equal values (M2 = 0, or a variance within the rounding of their mean: the
one pass over a whole column and the merged batches then agree) and where infinities
leave no finite result. Its float error grows with |mean| / stddev (the deviations are
differences of nearby numbers): relative about 1e-15 of that ratio.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from engine import arrowcompute
from engine import types as mt
from engine.measures.base import Measure, nonnull
from engine.types import is_numeric

#: A variance below (this times the mean)² is the rounding of the mean of equal values
#: (x - mean is then a few ulps of the mean, not a deviation): a few float64 epsilons.
_ROUNDING = 4 * 2.0**-52


@dataclass(frozen=True)
class ThirdMoments:
    n: int = 0
    mean: float = 0.0
    m2: float = 0.0
    m3: float = 0.0


def third_moments(x: np.ndarray) -> ThirdMoments:
    """The state of float64 values without NaN: one subtraction, the squares once (the
    cubes are the squares times the deviations, as ``d * d * d`` multiplies)."""
    if len(x) == 0:
        return ThirdMoments()
    with np.errstate(all="ignore"):
        mean = float(x.mean())
        d = x - mean
        d2 = d * d
        m2 = float(d2.sum())
        d2 *= d
        return ThirdMoments(len(x), mean, m2, float(d2.sum()))


class Skewness(Measure[ThirdMoments]):
    name = "skewness"
    columns = (pa.field("skewness", pa.float64()),)
    state_fields = (pa.field("n", pa.int64()), pa.field("mean", pa.float64()), pa.field("m2", pa.float64()), pa.field("m3", pa.float64()))
    display = (("skewness", "skewness"),)

    @staticmethod
    def applies_to(type_: pa.DataType) -> bool:
        return is_numeric(type_)

    def zero(self) -> ThirdMoments:
        return ThirdMoments()

    def update(self, state: ThirdMoments, batch: pa.Array) -> ThirdMoments:
        x = arrowcompute.cast(batch, pa.float64(), safe=False).to_numpy(zero_copy_only=False)  # nulls: NaN
        return self.merge(state, third_moments(x[~np.isnan(x)]))

    def from_sorted(self, values: np.ndarray, distinct: np.ndarray, floats: np.ndarray | None) -> ThirdMoments:
        """The state of a whole column from its shared sorted view (engine/stats/sortedvalues.py):
        ``values`` its valid values in column order, ``floats`` a decimal column's as float64
        (Arrow's cast, as ``update`` has them); the float64 of an integer or float is numpy's
        conversion, Arrow's too (round to nearest), so the bits are ``update``'s."""
        if len(values) == 0:
            return ThirdMoments()
        if mt.is_decimal(self.type):
            if floats is None:
                raise ValueError("a decimal column's skewness needs its float view")
            return third_moments(floats)
        return third_moments(values.astype(np.float64, copy=False))

    def merge(self, a: ThirdMoments, b: ThirdMoments) -> ThirdMoments:
        if a.n == 0:
            return b
        if b.n == 0:
            return a
        n = a.n + b.n
        d = b.mean - a.mean
        with np.errstate(all="ignore"):
            mean = a.mean + d * b.n / n
            m2 = a.m2 + b.m2 + d * d * a.n * b.n / n
            m3 = a.m3 + b.m3 + d**3 * a.n * b.n * (a.n - b.n) / (n * n) + 3 * d * (a.n * b.m2 - b.n * a.m2) / n
        return ThirdMoments(n, mean, m2, m3)

    def finalize(self, state: ThirdMoments) -> dict[str, Any]:
        n = state.n
        if n <= 2 or not state.m2 > 0 or not math.isfinite(state.m2) or not math.isfinite(state.m3):
            return {"skewness": None}
        if state.m2 / n <= (_ROUNDING * state.mean) ** 2:  # equal values but for the rounding of their mean
            return {"skewness": None}
        scale = (state.m2 / n) ** 1.5
        if not scale > 0:  # m2 / n underflowed (subnormal spreads): no meaningful skewness
            return {"skewness": None}
        value = math.sqrt(n * (n - 1)) / (n - 2) * (state.m3 / n) / scale
        return {"skewness": value if math.isfinite(value) else None}

    def encode(self, state: ThirdMoments) -> dict[str, Any]:
        return {"n": state.n, "mean": state.mean, "m2": state.m2, "m3": state.m3}

    def decode(self, fields: Mapping[str, Any]) -> ThirdMoments:
        if fields["n"] is None:
            raise ValueError("skewness missing")
        return ThirdMoments(fields["n"], fields["mean"], fields["m2"], fields["m3"])

    def from_statistics(self, row: Mapping[str, Any]) -> ThirdMoments | None:
        """The state behind a partition's stored row: n its non-null non-NaN values, M2 from
        ``stddev``, M3 from ``skewness`` (zero where two values or fewer, or equal ones, left
        it null); None where the row cannot tell (no mean, or infinities)."""
        n = nonnull(row)
        if n <= 0:
            return ThirdMoments()
        mean, sd, skew = row.get("mean"), row.get("stddev"), row.get("skewness")
        if mean is None or sd is None or not (math.isfinite(mean) and math.isfinite(sd)):
            return None
        m2 = sd * sd * (n - 1)
        if skew is None:
            return ThirdMoments(n, mean, m2, 0.0) if n <= 2 or m2 == 0 else None
        return ThirdMoments(n, mean, m2, skew * (n - 2) / math.sqrt(n * (n - 1)) * n * (m2 / n) ** 1.5)


MEASURE = Skewness
