"""Drift between two distributions of one column, from their stored summaries (pure numpy).

Two exact histograms of a column (engine/stats/histograms.py) give:

- the **Kolmogorov-Smirnov distance** ``max |F_a(x) - F_b(x)|`` over the bin edges. When
  both histograms have the same edges (the table's bins did not move between the two
  states) the cumulative counts at every edge are exact, so the distance is the exact KS
  distance of the raw values evaluated at the edges (within a bin the values are not
  known). With different edges each side's CDF is exact at its own edges and linearly
  interpolated at the other's (values spread evenly within a bin): ``exact`` is False.
- the **population stability index** ``sum (q_i - p_i) ln(q_i / p_i)`` over
  ``PSI_GROUPS`` groups of consecutive bins cut at the deciles of the ``from``
  distribution (the usual PSI over ten groups of the baseline; 1,000 bins would measure
  noise), each share floored at ``PSI_FLOOR`` so that an empty group counts instead of
  dividing by zero.

A discrete column without a histogram (strings, booleans, binary) compares its value
counts: KS over the values in the column's order, PSI over the values themselves.
``top_value_changes`` compares two top-k lists. Everything here is pure: arrays in,
numbers out.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

#: groups of the PSI: the ``from`` distribution's deciles
PSI_GROUPS = 10
#: the smallest share a PSI group counts with (an empty group would divide by zero)
PSI_FLOOR = 1e-4


@dataclass(frozen=True)
class Histogram:
    """Bin counts on increasing breaks: bin i holds the values in ``[breaks[i], breaks[i+1])``
    (``len(breaks) == len(counts) + 1``); for an integer domain bin i's inclusive upper edge
    ``u`` gives the break ``u + 1``."""

    breaks: np.ndarray  # float64, non-decreasing
    counts: np.ndarray  # int64

    @staticmethod
    def of(lowers: Sequence[float], uppers: Sequence[float], counts: Sequence[int] | np.ndarray, integer: bool) -> Histogram:
        """From the stored bins' lower and upper edges (domain numbers) and counts."""
        if len(counts) == 0:
            return Histogram(np.zeros(1), np.zeros(0, dtype=np.int64))
        last = float(uppers[-1]) + (1.0 if integer else 0.0)
        breaks = np.array([float(v) for v in lowers] + [last], dtype=np.float64)
        return Histogram(breaks, np.asarray(counts, dtype=np.int64))

    @property
    def total(self) -> int:
        return int(self.counts.sum())

    def cdf_at(self, points: np.ndarray) -> np.ndarray:
        """The share of values below each point: exact at the breaks, linear within a bin."""
        cum = np.concatenate([[0.0], np.cumsum(self.counts, dtype=np.float64)]) / max(self.total, 1)
        return np.interp(points, self.breaks, cum, left=0.0, right=1.0)

    def same_edges(self, other: Histogram) -> bool:
        return self.breaks.shape == other.breaks.shape and bool(np.array_equal(self.breaks, other.breaks))


@dataclass(frozen=True)
class Distance:
    """A drift measure and whether it is exact at the points it was evaluated at."""

    value: float | None  # None: one side has no values
    exact: bool


def ks_counts(a: np.ndarray, b: np.ndarray) -> float | None:
    """KS distance of two count vectors over the same ordered cells: max |CDF_a - CDF_b|."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    ta, tb = a.sum(), b.sum()
    if ta <= 0 or tb <= 0:
        return None
    diff = np.abs(np.cumsum(a) / ta - np.cumsum(b) / tb)
    return float(min(1.0, diff.max())) if diff.size else 0.0


def ks_histograms(a: Histogram, b: Histogram) -> Distance:
    """KS distance of two histograms: exact at the edges when they share them, else interpolated."""
    if a.same_edges(b):
        return Distance(ks_counts(a.counts, b.counts), True)
    if a.total == 0 or b.total == 0:
        return Distance(None, False)
    points = np.union1d(a.breaks, b.breaks)
    return Distance(float(min(1.0, np.abs(a.cdf_at(points) - b.cdf_at(points)).max())), False)


def rebin(h: Histogram, breaks: np.ndarray) -> np.ndarray:
    """``h``'s counts (as float shares of its total) on other breaks, values spread evenly within a bin."""
    cdf = h.cdf_at(np.asarray(breaks, dtype=np.float64))
    cdf[0], cdf[-1] = 0.0, 1.0  # values outside the new range stay in its end bins
    return np.diff(cdf)


def psi_shares(p: np.ndarray, q: np.ndarray, floor: float = PSI_FLOOR) -> float:
    """PSI of two share vectors over the same groups, each share floored at ``floor``."""
    p = np.maximum(np.asarray(p, dtype=np.float64), floor)
    q = np.maximum(np.asarray(q, dtype=np.float64), floor)
    return float(np.sum((q - p) * np.log(q / p)))


def decile_groups(counts: np.ndarray, groups: int = PSI_GROUPS) -> np.ndarray:
    """Group index per cell: consecutive cells cut where the cumulative share of ``counts``
    passes k/groups (the baseline's quantiles); a cell is never split."""
    counts = np.asarray(counts, dtype=np.float64)
    total = counts.sum()
    if total <= 0:
        return np.zeros(len(counts), dtype=np.int64)
    before = (np.cumsum(counts) - counts) / total  # share strictly below each cell
    return np.minimum((before * groups).astype(np.int64), groups - 1)


def psi_counts(a: np.ndarray, b: np.ndarray, groups: int | None = PSI_GROUPS) -> float | None:
    """PSI from ``a`` (the baseline) to ``b`` over the same ordered cells, grouped at ``a``'s
    deciles (``groups`` None: every cell its own group, as for categories)."""
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    ta, tb = a.sum(), b.sum()
    if ta <= 0 or tb <= 0:
        return None
    if groups is not None:
        g = decile_groups(a, groups)
        a = np.bincount(g, weights=a, minlength=groups)
        b = np.bincount(g, weights=b, minlength=groups)
    return psi_shares(a / ta, b / tb)


def psi_histograms(a: Histogram, b: Histogram) -> Distance:
    """PSI from ``a`` to ``b``: on shared edges exactly, else ``b`` re-binned on ``a``'s edges."""
    if a.same_edges(b):
        return Distance(psi_counts(a.counts, b.counts), True)
    if a.total == 0 or b.total == 0:
        return Distance(None, False)
    return Distance(psi_counts(a.counts, rebin(b, a.breaks) * b.total), False)


def aligned_counts(a: Sequence[tuple[Any, int]], b: Sequence[tuple[Any, int]]) -> tuple[list[Any], np.ndarray, np.ndarray]:
    """Two value-count lists on the union of their values, in the values' order (the values
    must compare with each other: one column's decoded values)."""
    ca: dict[Any, int] = {}
    cb: dict[Any, int] = {}
    for v, c in a:
        ca[v] = ca.get(v, 0) + int(c)
    for v, c in b:
        cb[v] = cb.get(v, 0) + int(c)
    values = sorted(set(ca) | set(cb))
    return values, np.array([ca.get(v, 0) for v in values], dtype=np.int64), np.array([cb.get(v, 0) for v in values], dtype=np.int64)


def discrete_drift(a: Sequence[tuple[Any, int]], b: Sequence[tuple[Any, int]]) -> tuple[Distance, Distance]:
    """(KS, PSI) of two complete value-count lists: KS over the values in order, PSI per value."""
    _, ca, cb = aligned_counts(a, b)
    return Distance(ks_counts(ca, cb), True), Distance(psi_counts(ca, cb, groups=None), True)


@dataclass(frozen=True)
class RankChange:
    value: Any
    from_rank: int | None  # 1-based; None: not in that top-k
    to_rank: int | None
    from_count: int | None
    to_count: int | None


@dataclass(frozen=True)
class TopChanges:
    """How two top-k lists differ: values that entered, left, or moved within them."""

    gained: tuple[RankChange, ...]
    lost: tuple[RankChange, ...]
    changed_rank: tuple[RankChange, ...]


def top_value_changes(a: Sequence[tuple[Hashable, int]], b: Sequence[tuple[Hashable, int]]) -> TopChanges:
    """Compare two top-k lists (value, count), most frequent first."""
    ra = {v: (i + 1, int(c)) for i, (v, c) in enumerate(a)}
    rb = {v: (i + 1, int(c)) for i, (v, c) in enumerate(b)}
    gained = tuple(RankChange(v, None, r, None, c) for v, (r, c) in rb.items() if v not in ra)
    lost = tuple(RankChange(v, r, None, c, None) for v, (r, c) in ra.items() if v not in rb)
    moved = tuple(RankChange(v, ra[v][0], r, ra[v][1], c) for v, (r, c) in rb.items() if v in ra and ra[v][0] != r)
    return TopChanges(gained, lost, moved)


def finite_or_none(x: float | None) -> float | None:
    return None if x is None or not math.isfinite(x) else x
