"""Small server-rendered chart geometry shared by the history and diff pages: a line over the
kept states, and two histograms overlaid on one value axis (as densities: bins of any width)."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine import types as mt
from engine.ui import ticks

LINE_WIDTH, LINE_HEIGHT = 360.0, 80.0
OVERLAY_WIDTH, OVERLAY_HEIGHT = 360.0, 110.0


@dataclass(frozen=True)
class LinePoint:
    x: float
    y: float
    label: str  # the state (transaction)
    value: str  # as shown


@dataclass(frozen=True)
class Line:
    points: tuple[LinePoint, ...]
    path: str  # the SVG polyline's points
    low: str  # the axis ends as shown
    high: str


def line(values: Sequence[float | None], labels: Sequence[str], shown: Sequence[str], width: float = LINE_WIDTH, height: float = LINE_HEIGHT) -> Line:
    """Points of ``values`` evenly spaced over the states, scaled between their min and max (a
    missing value: no point)."""
    known = [v for v in values if v is not None and math.isfinite(v)]
    lo, hi = (min(known), max(known)) if known else (0.0, 0.0)
    span = hi - lo
    n = len(values)
    pts = []
    for i, (v, lab, text) in enumerate(zip(values, labels, shown)):
        if v is None or not math.isfinite(v):
            continue
        x = width / 2 if n == 1 else 6 + (width - 12) * i / (n - 1)
        y = height / 2 if span == 0 else 6 + (height - 12) * (1 - (v - lo) / span)
        pts.append(LinePoint(round(x, 2), round(y, 2), lab, text))
    low = next((t for v, t in zip(values, shown) if v == lo), "")
    high = next((t for v, t in zip(values, shown) if v == hi), "")
    return Line(tuple(pts), " ".join(f"{p.x},{p.y}" for p in pts), low, high)


def edges_as_numbers(arr: pa.ChunkedArray | pa.Array) -> np.ndarray | None:
    """Histogram edges as float64 (temporal as their integer ticks); None when they are not numbers."""
    t = arr.type
    try:
        if mt.is_integer_temporal(t):
            arr = pc.cast(arr, pa.int64() if t.bit_width == 64 else pa.int32())
        return np.asarray(pc.cast(arr, pa.float64()).to_numpy(zero_copy_only=False), dtype=np.float64)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, TypeError):
        return None


@dataclass(frozen=True)
class Overlay:
    """Two histograms on one value axis: each an SVG path of its density steps."""

    from_path: str
    to_path: str
    from_counted: int
    to_counted: int
    ticks: tuple[ticks.Placed, ...] = ()  # the value axis (engine/ui/ticks.py)
    axis_note: str = ""


OVERLAY_BARS = 60  # consecutive bins summed into at most this many steps per side
OVERLAY_LABELS = 34  # characters of tick labels the overlay's 220 px hold (ticks.LABEL_BUDGET)


def _density(lower: np.ndarray, upper: np.ndarray, counts: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    ok = np.isfinite(lower) & np.isfinite(upper)
    lower, upper, counts = lower[ok], upper[ok], counts[ok].astype(np.float64)
    n = len(counts)
    if n > OVERLAY_BARS:
        firsts = np.array([i * n // OVERLAY_BARS for i in range(OVERLAY_BARS)], dtype=np.int64)
        lasts = np.append(firsts[1:], n) - 1
        lower, upper, counts = lower[firsts], upper[lasts], np.add.reduceat(counts, firsts)
    width = np.maximum(upper - lower, 1e-12)
    total = counts.sum() or 1.0
    return lower, upper, counts / total / width


def overlay(
    a: tuple[np.ndarray, np.ndarray, np.ndarray], b: tuple[np.ndarray, np.ndarray, np.ndarray], t: pa.DataType | None = None
) -> Overlay | None:
    """The overlay of two histograms given as (lower edges, upper edges, counts), or None when
    neither has a finite bin; with the column's type ``t``, the value axis's ticks."""
    da, db = _density(*a), _density(*b)
    if not len(da[0]) and not len(db[0]):
        return None
    lo = min(x.min() for x in (da[0], db[0]) if len(x))
    hi = max(x.max() for x in (da[1], db[1]) if len(x))
    top = max(float(d[2].max()) for d in (da, db) if len(d[2])) or 1.0
    span = (hi - lo) or 1.0

    def path(d: tuple[np.ndarray, np.ndarray, np.ndarray]) -> str:
        parts = []
        for lower, upper, dens in zip(*d):
            x0 = (lower - lo) / span * OVERLAY_WIDTH
            x1 = (upper - lo) / span * OVERLAY_WIDTH
            y = OVERLAY_HEIGHT - dens / top * (OVERLAY_HEIGHT - 4)
            parts.append(f"M{x0:.2f},{OVERLAY_HEIGHT:.0f}V{y:.2f}H{x1:.2f}V{OVERLAY_HEIGHT:.0f}")
        return "".join(parts)

    axis = (
        ticks.axis(int(lo) if _integer(t) else float(lo), int(hi) if _integer(t) else float(hi), t, OVERLAY_LABELS)
        if t is not None
        else ticks.Axis(())
    )
    placed = ticks.place(axis.ticks, lambda v: (float(v) - lo) / span, OVERLAY_LABELS)
    return Overlay(path(da), path(db), int(a[2].sum()), int(b[2].sum()), placed, axis.note)


def _integer(t: pa.DataType | None) -> bool:
    return t is not None and (mt.is_integer(t) or mt.is_temporal(t))


QUANTILE_WIDTH, QUANTILE_HEIGHT = 360.0, 70.0


@dataclass(frozen=True)
class Quantiles:
    """A column's stored percentiles as a line: value over the quantile (x at p, not evenly)."""

    points: tuple[LinePoint, ...]
    path: str
    low: str
    high: str
    estimate: bool


def quantiles(stats: dict[str, object] | None, shown: Callable[[object], str]) -> Quantiles | None:
    """The percentiles of a statistics row (numbers only), or None when it has fewer than two."""
    from engine.stats.valuecounts import PERCENTILES, percentile_column

    if not stats:
        return None
    pairs = []
    for p in PERCENTILES:
        raw = stats.get(percentile_column(p))
        if raw is None or isinstance(raw, (bool, str, bytes)):
            return None
        try:
            v = float(raw)  # type: ignore[arg-type]  # int, float, Decimal; a date or time is not drawn
        except (TypeError, ValueError):
            return None
        if not math.isfinite(v):
            return None
        pairs.append((p, v, raw))
    if len(pairs) < 2:
        return None
    lo, hi = min(v for _, v, _ in pairs), max(v for _, v, _ in pairs)
    span = (hi - lo) or 1.0
    pts = tuple(
        LinePoint(
            round(6 + (QUANTILE_WIDTH - 12) * p, 2),
            round(QUANTILE_HEIGHT - 6 - (QUANTILE_HEIGHT - 12) * (v - lo) / span, 2),
            f"p{round(p * 100)}",
            shown(raw),
        )
        for p, v, raw in pairs
    )
    return Quantiles(pts, " ".join(f"{q.x},{q.y}" for q in pts), pts[0].value, pts[-1].value, stats.get("percentiles_exact") is False)
