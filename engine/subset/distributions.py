"""A subset's value distributions: its top frequencies and its histogram bins, each value's
or bin's count as (surely, estimated, possibly) matching rows (docs/SUBSETS.md, step 4).

Both are built the same way: whole partitions add their stored counts; in a partition the
predicate cuts, the conjuncts on the column itself apply exactly to its stored values (or as
a range to its bins), and the conjuncts on other columns only as a share of the rows, with
Fréchet bounds per value or bin (``_and_rest``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from engine.exceptions import SubsetStatisticError
from engine.expressions.tree import BoundReference
from engine.stats.histograms import HistogramSpec
from engine.subset import counts as cnt
from engine.subset.counts import Count
from engine.subset.mask import mask
from engine.subset.model import INDEPENDENCE, PROPORTIONAL, UNIFORM_BIN
from engine.subset.predicates import interval_of, split_for
from engine.subset.rowcounts import RowCounts

#: the assumption of a count taken as a share of a partition's matching rows
SHARE = f"{PROPORTIONAL} ({INDEPENDENCE})"


@dataclass(frozen=True)
class Bins:
    """Per bin of the table's edges: the subset's surely, estimated and possibly matching
    values, and the assumptions of the estimate (None: it took none)."""

    low: np.ndarray
    estimate: np.ndarray
    high: np.ndarray
    assumption: str | None


@dataclass(frozen=True)
class ValueCount:
    """One value's matching rows in the subset (its typed Python value)."""

    value: Any
    low: float
    estimate: float
    high: float


def bins(column: str, spec: HistogramSpec, counts: RowCounts) -> Bins:
    """The subset's bins of ``column`` on the table's ``spec``."""
    stored, split = counts.stored, counts.split
    ref = BoundReference(column, (column,), stored.ts.column_type(column))
    lo = np.zeros(spec.bins, np.int64)
    hi = np.zeros(spec.bins, np.int64)
    est = np.zeros(spec.bins, np.float64)
    for key in split.partitions.all:
        stored_counts = stored.hist(ref, key)
        if stored_counts is not None:
            lo += stored_counts
            hi += stored_counts
            est += stored_counts
    own, rest = split_for(counts.nf, column)
    r = interval_of(own) if own is not None else None
    assumptions: set[str] = set()
    for key in split.partitions.some:
        stored_counts = stored.hist(ref, key)
        if stored_counts is None:
            continue
        n = split.rows[key]
        if own is None:
            b_lo, b_est, b_hi = stored_counts, stored_counts.astype(np.float64), stored_counts
        elif r is not None:  # ranges on this column: bins inside count whole, outside not at all
            b_lo, b_est, b_hi = cnt.range_bins(spec, stored_counts, r)
            if not np.array_equal(b_lo, b_hi):
                assumptions.add(UNIFORM_BIN)
        else:
            c = counts.of(own, key).clamp(n)
            b_lo, b_est, b_hi = np.zeros_like(stored_counts), stored_counts * _share(c, n), stored_counts
            assumptions.add(SHARE)
        if rest is not None:
            b_lo, b_est, b_hi = _and_rest(b_lo, b_est, b_hi, counts.of(rest, key).clamp(n), n)
            assumptions.add(SHARE)
        lo += b_lo
        hi += b_hi
        est += b_est
    return Bins(lo, est, hi, "; ".join(sorted(assumptions)) or None)


def top_values(column: str, k: int, counts: RowCounts, where: str) -> tuple[list[ValueCount], bool]:
    """The ``k`` values of ``column`` with the most estimated matching rows (ties by text),
    and whether every count is exact; an error where a partition the rows can come from keeps
    only its repeated values (the others' counts are unknown)."""
    stored, split = counts.stored, counts.split
    ref = BoundReference(column, (column,), stored.ts.column_type(column))
    totals: dict[Any, list[float]] = {}  # value -> [low, estimate, high]
    exact = True
    for key in split.contributing:
        f = stored.freq(ref, key)
        if f is None or not f.complete:
            raise SubsetStatisticError(
                f"top frequencies of column {column!r} are not stored for the subset where {where} (partition {key!r} "
                f"keeps only repeated values): exact=True (--exact) computes them"
            )
        vals, cnts = f.values, f.counts
        if key in split.partitions.all:
            lo = est = hi = cnts.astype(float)
        else:
            own, rest = split_for(counts.nf, column)
            kept = np.where(np.asarray(mask(vals, own)), cnts, 0) if own is not None else cnts
            if rest is None:  # the predicate names only this column: exact on the stored values
                lo = est = hi = kept.astype(float)
            else:  # the other columns' conjuncts: a share of the kept rows, Fréchet bounds
                exact = False
                n = split.rows[key]
                lo_i, est, hi_i = _and_rest(kept, kept, kept, counts.of(rest, key).clamp(n), n)
                lo, hi = lo_i.astype(float), hi_i.astype(float)
        for v, a, b, c_ in zip(vals.to_pylist(), lo, est, hi):
            acc = totals.setdefault(v, [0.0, 0.0, 0.0])
            acc[0] += a
            acc[1] += b
            acc[2] += c_
    items = [(v, x) for v, x in totals.items() if x[2] > 0]
    items.sort(key=lambda it: (-it[1][1], str(it[0])))
    return [ValueCount(v, x[0], x[1], x[2]) for v, x in items[:k]], exact


def round_keeping_total(est: np.ndarray) -> np.ndarray:
    """Whole counts whose running sums are the rounded running sums of ``est`` (many bins
    under one half would each round to 0 and lose the subset's rows)."""
    cum = np.round(np.cumsum(est))
    return np.diff(np.concatenate([[0.0], cum]))


def _share(c: Count, n: int) -> float:
    return c.estimate / n if n else 0.0


def _and_rest(low: np.ndarray, est: np.ndarray, high: np.ndarray, rest: Count, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-value (per-bin) counts of a partition ANDed with ``rest``, its ``n`` rows' count of
    the other columns' conjuncts: a share of each for the estimate (independence), Fréchet's
    bounds ``max(0, low - (n - rest.low)) .. min(high, rest.high)``."""
    return np.maximum(0, low - (n - rest.low)), est * _share(rest, n), np.minimum(high, rest.high)
