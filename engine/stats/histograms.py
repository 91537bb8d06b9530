"""Exact histograms whose partition counts sum into the table's.

The analyze runs in two phases: phase one finds the table's range of every
histogrammed column (a merge of partition extremes), phase two bins every
partition on those table-level edges. Partition histograms therefore share
their edges and the table histogram is their exact sum, with no rescan at
table level and no approximation.

Bins are equal-width over the table range, its upper end widened to whole steps of a power of
two (:func:`widened_range`: 1/32 to 1/16 of the span), so an append within it re-bins nothing:
- integer domain (integers and temporal types by their integer storage): bins
  of whole units, ``width = ceil((max - min + 1) / requested)``, bin ``i`` holds
  ``lower + i*width .. lower + (i+1)*width - 1`` (inclusive); a narrow range gets
  fewer bins than requested (one per value at most).
- float domain (floats, decimals as float64): ``width = (max - min) / requested``
  over the finite range; a value goes to bin ``floor((v - lower) / width)``
  clamped to the bins, so ``-inf`` lands in the first bin and ``+inf`` in the
  last; NaN and nulls are in no bin.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import pyarrow as pa

from engine import arrowcompute as pc
from engine import types as mt
from engine.types import HistogramDomain, histogram_domain, integer_storage


def storage_type(t: pa.DataType) -> pa.DataType:
    """The integer type a column of the integer domain is binned as (engine.types.integer_storage)."""
    st = integer_storage(t)
    return pa.int64() if st is None else st


@dataclass(frozen=True)
class HistogramSpec:
    """Everything needed to place a value in a bin and to rebuild the edges."""

    domain: str  # HistogramDomain value
    lower: float | int
    width: float | int
    bins: int
    upper: float | int  # the upper end of the widened table range (inclusive; >= the table maximum)

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @staticmethod
    def from_json(text: str) -> HistogramSpec:
        return HistogramSpec(**json.loads(text))

    # ------------------------------------------------------------ binning
    def bin_counts(self, values: pa.Array) -> np.ndarray:
        """Exact counts of ``values`` per bin (nulls and NaN excluded)."""
        return np.bincount(self._bin_indices(values), minlength=self.bins).astype(np.int64)

    def weighted_bin_counts(self, distinct: pa.Array, counts: np.ndarray | None) -> np.ndarray:
        """Exact bin counts of a column given as sorted distinct values and their counts.

        What a partition's sorted view already holds, so phase 2 bins without
        reading the column again: the same bin of every value as ``bin_counts``,
        summed in O(distinct) integer arithmetic (``counts`` None: each value once).
        """
        if self.domain == HistogramDomain.INTEGER.value and distinct.null_count == 0:
            by_edges = self._integer_bin_counts(distinct, counts)
            if by_edges is not None:
                return by_edges
        idx = self._bin_indices(distinct)
        weights = np.ones(len(idx), np.int64) if counts is None else np.asarray(counts, np.int64)
        if len(idx) != len(weights):
            raise ValueError(f"{len(idx)} binnable values but {len(weights)} counts")
        if len(idx) > 1 and not bool(np.all(idx[1:] >= idx[:-1])):
            out = np.zeros(self.bins, np.int64)
            np.add.at(out, idx, weights)  # not sorted by bin: exact, slower
            return out
        # bins are non-decreasing along sorted values: cumulative counts at each bin's first value
        cum = np.concatenate(([0], np.cumsum(weights)))
        return np.diff(cum[np.searchsorted(idx, np.arange(self.bins + 1), side="left")]).astype(np.int64)

    def _integer_bin_counts(self, distinct: pa.Array, counts: np.ndarray | None) -> np.ndarray | None:
        """Bin counts of ascending integer-domain values by a binary search of each bin's
        lower edge (O(bins log n)) instead of a bin index per value (O(n), an integer
        division each); the edges are integers, so a value is in bin i exactly when
        it is at least edge i, as ``_bin_indices`` has it. None if not ascending."""
        st = storage_type(distinct.type)
        x = (distinct.view(st) if st != distinct.type else distinct).to_numpy(zero_copy_only=False)
        if len(x) > 1 and not bool((x[1:] > x[:-1]).all()):
            return None
        info = np.iinfo(x.dtype)
        lower, width = int(self.lower), int(self.width)
        if self.bins < 1 or not (info.min <= lower and lower + (self.bins - 1) * width <= info.max):
            return None  # edges beyond the values' type (not from this column's table range)
        # in uint64, modulo 2^64: exact wherever the edge itself fits (i * width alone may not)
        u = np.arange(1, self.bins, dtype=np.uint64) * np.uint64(width) + np.uint64(lower & 0xFFFFFFFFFFFFFFFF)
        edges = (u if x.dtype.kind == "u" else u.view(np.int64)).astype(x.dtype)
        cuts = np.concatenate(([0], np.searchsorted(x, edges, side="left"), [len(x)]))
        if counts is None:
            return np.diff(cuts).astype(np.int64)
        cum = np.concatenate(([0], np.cumsum(np.asarray(counts, np.int64))))
        if len(cum) != len(x) + 1:
            raise ValueError(f"{len(x)} binnable values but {len(cum) - 1} counts")
        return np.diff(cum[cuts]).astype(np.int64)

    def _bin_indices(self, values: pa.Array) -> np.ndarray:
        valid = values.drop_null() if values.null_count else values
        if self.domain == HistogramDomain.INTEGER.value:
            st = storage_type(values.type)
            x = valid.view(st).to_numpy(zero_copy_only=False) if st != values.type else valid.to_numpy(zero_copy_only=False)
            ux = x.astype(np.int64, copy=False).view(np.uint64) if x.dtype.kind == "i" else x.astype(np.uint64, copy=False)
            lo = np.uint64(int(self.lower) & 0xFFFFFFFFFFFFFFFF)
            idx = (ux - lo) // np.uint64(self.width)  # wraps to the true offset since x >= lower
            return np.minimum(idx, np.uint64(self.bins - 1)).astype(np.int64)
        x = float_view(valid)
        x = x[~np.isnan(x)]
        if self.width == 0:
            return np.zeros(len(x), dtype=np.int64)
        with np.errstate(all="ignore"):
            f = np.floor((x - self.lower) / self.width)
        f = np.nan_to_num(f, nan=0.0, posinf=self.bins - 1, neginf=0.0)
        return np.clip(f, 0, self.bins - 1).astype(np.int64)

    def counts_from(self, old: HistogramSpec, counts: np.ndarray) -> np.ndarray | None:
        """Exact counts on these bins from ``counts`` on ``old``'s, without the values, when every
        non-empty old bin lies inside one of these (integer domain: unit-width bins, say, as a
        year of dates or a partition number has); None otherwise. An append that moves a
        column's edges then re-bins such a column of an inherited partition without reading it."""
        if self.domain != HistogramDomain.INTEGER.value or old.domain != self.domain or len(counts) != old.bins:
            return None
        filled = np.flatnonzero(counts)
        start = old.lower + filled.astype(object) * old.width  # Python ints: no overflow at the int64 ends
        end = [min(s + old.width - 1, old.upper) for s in start]
        first = [(s - self.lower) // self.width for s in start]
        last = [(e - self.lower) // self.width for e in end]
        if any(f != l or f < 0 or f >= self.bins for f, l in zip(first, last)):
            return None
        out = np.zeros(self.bins, np.int64)
        np.add.at(out, np.asarray(first, np.int64), np.asarray(counts, np.int64)[filled])
        return out

    # ------------------------------------------------------------ edges
    def edges(self) -> tuple[list[Any], list[Any]]:
        """(lower edges, upper edges) in domain values, one per bin."""
        if self.domain == HistogramDomain.INTEGER.value:
            lows = [self.lower + i * self.width for i in range(self.bins)]
            ups = [min(lo + self.width - 1, self.upper) for lo in lows]
            return lows, ups
        lows = [self.lower + i * self.width for i in range(self.bins)]
        ups = [self.lower + (i + 1) * self.width for i in range(self.bins)]
        if self.bins:
            ups[-1] = self.upper
        return lows, ups

    def bin_of(self, value: float | int) -> int:
        """The bin a domain value falls in (clamped), for range lookups."""
        if self.domain == HistogramDomain.INTEGER.value:
            return int(min(max((int(value) - self.lower) // self.width, 0), self.bins - 1))
        if self.width == 0 or math.isnan(value):
            return 0
        if math.isinf(value):
            return 0 if value < 0 else self.bins - 1
        position = (value - self.lower) / self.width  # infinite for values far outside a narrow range (1e308)
        if position >= self.bins or math.isinf(position):
            return self.bins - 1 if position > 0 else 0
        return int(max(math.floor(position), 0))


def float_view(values: pa.Array) -> np.ndarray:
    t = values.type
    if mt.is_decimal(t):
        return pc.cast(values, pa.float64(), safe=False).to_numpy(zero_copy_only=False)
    return pc.cast(values, pa.float64()).to_numpy(zero_copy_only=False)


def to_domain(value: pa.Scalar) -> float | int:
    """A scalar of a histogrammed column as a domain number."""
    t = value.type
    if histogram_domain(t) == HistogramDomain.INTEGER:
        st = storage_type(t)
        return pa.array([value], type=t).view(st)[0].as_py() if st != t else value.as_py()
    return float(pc.cast(pa.array([value], type=t), pa.float64(), safe=False)[0].as_py())


def from_domain(values: list[Any], t: pa.DataType) -> pa.Array:
    """Domain numbers as an array of the column's type (integer domain) or float64."""
    if histogram_domain(t) == HistogramDomain.INTEGER:
        st = storage_type(t)
        arr = pa.array(values, type=st)
        return arr if st == t else arr.view(t)
    return pa.array(values, type=pa.float64())


def edge_type(t: pa.DataType) -> pa.DataType:
    return t if histogram_domain(t) == HistogramDomain.INTEGER else pa.float64()


#: The table range's upper end is widened to a whole number of steps from its lower end, a
#: step being a power of two between 1/32 and 1/16 of the span
#: (``2 ** (floor(log2(span)) - RANGE_STEP_LOG2)``), so values appended later up to the widened
#: end leave every bin where it was: an append re-analyze then re-bins no partition (re-binning
#: reads every partition's column: O(table) for each append that moves an extreme, which for a
#: table growing in time or in ids is every append). The edges move again only when a value falls
#: beyond the widened end or below the minimum, or the span passes a power of two; at most a
#: sixteenth of the range (the last bins) stays empty until then. The lower end stays the minimum.
RANGE_STEP_LOG2 = 4


def widened_range(lo: float | int, hi: float | int, integer: bool, type_max: int | None = None) -> tuple[float | int, float | int]:
    """[lo, hi] with ``hi`` widened to whole steps from ``lo`` (RANGE_STEP_LOG2); an integer range
    stays within ``type_max``."""
    if integer:
        ilo, ihi = int(lo), int(hi)
        ispan = ihi - ilo + 1
        istep = 1 << max(0, ispan.bit_length() - 1 - RANGE_STEP_LOG2)
        iwhi = ilo + -(-ispan // istep) * istep - 1
        return ilo, iwhi if type_max is None else min(iwhi, type_max)
    lo, hi = float(lo), float(hi)
    span = hi - lo
    if not span > 0 or not math.isfinite(span):
        return lo, hi
    step = 2.0 ** (math.floor(math.log2(span)) - RANGE_STEP_LOG2)
    whi = lo + math.ceil(span / step) * step
    if not math.isfinite(whi) or whi < hi:
        return lo, hi
    return lo, whi


def _type_max(t: pa.DataType) -> int:
    return int(np.iinfo(storage_type(t).to_pandas_dtype()).max)


def make_spec(t: pa.DataType, lo: float | int | None, hi: float | int | None, requested: int) -> HistogramSpec | None:
    """The spec for a column whose table range is [lo, hi] (finite range for floats), widened
    (:func:`widened_range`)."""
    if lo is None or hi is None:
        return None
    domain = histogram_domain(t)
    if domain == HistogramDomain.INTEGER:
        wlo, whi = widened_range(lo, hi, True, _type_max(t))
        ilo, ihi = int(wlo), int(whi)  # ints already: the integer domain
        span = ihi - ilo + 1
        width = -(-span // requested)
        bins = -(-span // width)
        return HistogramSpec(domain.value, ilo, width, bins, ihi)
    lo, hi = widened_range(lo, hi, False)
    if hi == lo:
        return HistogramSpec(HistogramDomain.FLOAT.value, lo, 0.0, 1, hi)
    step = hi / requested - lo / requested  # no overflow near the float64 limits
    return HistogramSpec(HistogramDomain.FLOAT.value, lo, step, requested, hi)


def finite_range(values: pa.Array) -> tuple[float, float] | None:
    """Finite min and max of a float or decimal array (the float histogram range)."""
    x = float_view(values.drop_null())
    x = x[np.isfinite(x)]
    if len(x) == 0:
        return None
    return float(x.min()), float(x.max())
