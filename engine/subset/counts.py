"""Row counts of a predicate in one partition as intervals: the pure kernels of subset estimation.

A ``Count`` is (low, estimate, high) with ``low <= true count <= high`` guaranteed and the
assumptions the estimate took. Combining rules (docs/SUBSETS.md):

- AND of two counts a, b of n rows: estimate a*b/n (independence between columns), bounds
  Fréchet's max(0, a.low + b.low - n) .. min(a.high, b.high);
- OR: estimate a + b - a*b/n, bounds max(a.low, b.low) .. min(n, a.high + b.high);
- a range over a histogram: the bins it covers for sure .. the bins it touches, uniform
  within the end bins for the estimate.

Bins are found with the bin function itself (``HistogramSpec.bin_of``), which is monotone in
the value: a value v <= a lies in a bin <= bin_of(a), so the bins strictly between the bins
of a range's ends hold only matching values, whatever the float rounding of the edges.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from engine.stats.histograms import HistogramSpec
from engine.subset.model import DEFAULT_SELECTIVITY, INDEPENDENCE, UNIFORM_BIN

#: a value on a histogram's number line (integers for whole-number domains)
Number = float | int


@dataclass(frozen=True)
class Count:
    """Matching rows: ``low <= true count <= high`` guaranteed, ``estimate`` between them,
    and the assumptions the estimate took."""

    low: int
    estimate: float
    high: int
    assumptions: frozenset[str] = frozenset()

    @property
    def exact(self) -> bool:
        return self.low == self.high

    @staticmethod
    def of(n: int) -> Count:
        """A count known exactly."""
        return Count(n, float(n), n)

    def clamp(self, n: int) -> Count:
        """The count within ``0 .. n`` (a unit's rows), its assumptions dropped once exact."""
        low, high = max(0, min(self.low, n)), max(0, min(self.high, n))
        return Count(low, min(max(self.estimate, low), high), high, frozenset() if low == high else self.assumptions)


ZERO = Count.of(0)


def and_(a: Count, b: Count, n: int) -> Count:
    """Rows of ``n`` in both ``a`` and ``b``: independence for the estimate, Fréchet's bounds."""
    if a.high == 0 or b.high == 0:
        return ZERO
    if a.exact and a.low == n:
        return b
    if b.exact and b.low == n:
        return a
    est = a.estimate * b.estimate / n if n else 0.0
    return Count(max(0, a.low + b.low - n), est, min(a.high, b.high), a.assumptions | b.assumptions | {INDEPENDENCE}).clamp(n)


def or_(a: Count, b: Count, n: int) -> Count:
    """Rows of ``n`` in ``a`` or ``b``: independence for the estimate, Fréchet's bounds."""
    if a.exact and a.low == 0:
        return b
    if b.exact and b.low == 0:
        return a
    if (a.exact and a.low == n) or (b.exact and b.low == n):
        return Count.of(n)
    est = a.estimate + b.estimate - (a.estimate * b.estimate / n if n else 0.0)
    return Count(max(a.low, b.low), est, min(n, a.high + b.high), a.assumptions | b.assumptions | {INDEPENDENCE}).clamp(n)


def complement(a: Count, n: int) -> Count:
    """The rows of ``n`` that are not in ``a``."""
    return Count(n - a.high, n - a.estimate, n - a.low, a.assumptions).clamp(n)


def default(candidates: int) -> Count:
    """Nothing known but that at most ``candidates`` rows can match."""
    return Count(0, candidates / 3.0, candidates, frozenset({DEFAULT_SELECTIVITY})).clamp(candidates)


@dataclass(frozen=True)
class Interval:
    """A range of domain values: ``lo`` .. ``hi``, each end open or closed, None for unbounded."""

    lo: float | int | None = None
    hi: float | int | None = None
    lo_open: bool = False
    hi_open: bool = False


def range_count(spec: HistogramSpec, counts: np.ndarray, r: Interval) -> Count:
    """Rows of a partition (its bin ``counts`` on the table's ``spec``) in the range ``r``:
    the bins wholly inside .. the bins touched, uniform within the touched end bins."""
    low, est, high = range_bins(spec, counts, r)
    inside, touched = int(low.sum()), int(high.sum())
    return Count(inside, float(est.sum()), touched, frozenset() if inside == touched else frozenset({UNIFORM_BIN}))


def range_bins(spec: HistogramSpec, counts: np.ndarray, r: Interval) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per bin: (rows surely in ``r``, estimated rows in ``r``, rows possibly in ``r``)."""
    counts = np.asarray(counts, np.int64)
    low = np.zeros(len(counts), np.int64)
    high = np.zeros(len(counts), np.int64)
    est = np.zeros(len(counts), np.float64)
    if spec.bins == 0 or len(counts) == 0:
        return low, est, high
    integer = spec.domain == "integer"
    lo, hi = r.lo, r.hi
    if integer:  # whole numbers (integers, temporal storage counts): open ends become closed ones
        if lo is not None and r.lo_open:
            lo = int(lo) + 1
        if hi is not None and r.hi_open:
            hi = int(hi) - 1
        if (lo is not None and hi is not None and lo > hi) or (lo is not None and lo > spec.upper) or (hi is not None and hi < spec.lower):
            return low, est, high
    b_lo = 0 if lo is None else spec.bin_of(lo)
    b_hi = spec.bins - 1 if hi is None else spec.bin_of(hi)
    if b_lo > b_hi:
        return low, est, high
    high[b_lo : b_hi + 1] = counts[b_lo : b_hi + 1]
    if b_hi - b_lo >= 2:
        low[b_lo + 1 : b_hi] = counts[b_lo + 1 : b_hi]
        est[b_lo + 1 : b_hi] = counts[b_lo + 1 : b_hi]
    for b in {b_lo, b_hi}:
        c = int(counts[b])
        if c == 0:
            continue
        lower_edge, upper_edge = bin_edges(spec, b)
        if _wholly_inside(integer, lower_edge, upper_edge, lo, hi, b, spec, r):
            low[b], est[b] = c, c
        else:
            est[b] = c * _overlap(integer, lower_edge, upper_edge, lo, hi)
    return low, est, high


def bin_edges(spec: HistogramSpec, b: int) -> tuple[float | int, float | int]:
    """Bin ``b``'s [lower, upper] (``HistogramSpec.edges`` for one bin)."""
    low = spec.lower + b * spec.width
    if spec.domain == "integer":
        return low, min(low + spec.width - 1, spec.upper)
    return low, spec.upper if b == spec.bins - 1 else spec.lower + (b + 1) * spec.width


def _wholly_inside(integer: bool, low: Number, up: Number, lo: Number | None, hi: Number | None, b: int, spec: HistogramSpec, r: Interval) -> bool:
    """Whether every value of bin ``b`` lies in the range: exact edges for whole numbers; for
    floats only the unbounded sides (the bin function's rounding decides the rest)."""
    if integer:
        return (lo is None or low >= lo) and (hi is None or up <= hi)
    left_ok = lo is None or (b == 0 and lo == -math.inf and not r.lo_open)
    right_ok = hi is None or (b == spec.bins - 1 and hi == math.inf and not r.hi_open)
    return left_ok and right_ok


def _overlap(integer: bool, low: Number, up: Number, lo: Number | None, hi: Number | None) -> float:
    """The share of a bin [low, up] inside [lo, hi] (uniform within the bin)."""
    a = low if lo is None else max(low, lo)
    b = up if hi is None else min(up, hi)
    if integer:
        width = up - low + 1
        return max(0, b - a + 1) / width if width > 0 else 1.0
    width = up - low
    if not (math.isfinite(width) and width > 0):
        return 0.5
    share = (b - a) / width
    return min(1.0, max(0.0, share)) if math.isfinite(share) else 0.5
