"""X-axis ticks of a chart at readable values in the column's type: a pure function of the axis
range (domain numbers: the column's integer storage for temporal types, else floats) and the Arrow
type.

- numbers: steps of 1, 2 or 5 times a power of ten (integers: whole steps);
- dates and timestamps: round calendar units (years, months, weeks, days, hours, minutes, seconds)
  in the column's time zone, labelled as short as their unit allows; the zone and its UTC offset(s)
  in the axis note, each tick's full time with its offset in its title;
- durations: whole steps of one unit (ns … days), labelled with the unit;
- times of day: like timestamps within one day.

At most ``MAX_TICKS`` ticks whose labels, side by side, fit ``LABEL_BUDGET`` characters (the
narrowest chart, on a 390 px phone), the finest such step with at least ``MIN_TICKS``.
"""

from __future__ import annotations

import bisect
import functools
import math
import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta, timezone, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import pyarrow as pa

from engine import types as mt

MIN_TICKS, MAX_TICKS = 3, 8
#: characters of the width the narrowest chart holds (284 px at 390 px, 10 px monospace: 6 px a character;
#: less 1/16 for the widened range's empty end): ticks a step apart get step/span of it, each label and a gap (GAP)
LABEL_BUDGET = 44
GAP = 1  # a character (6 px) between labels at least
_PER_SECOND = {"s": 1, "ms": 10**3, "us": 10**6, "ns": 10**9}
_EPOCH = datetime(1970, 1, 1)


@dataclass(frozen=True)
class Tick:
    value: float | int  # a domain number (the column's integer storage for temporal types)
    label: str  # as drawn
    title: str  # in full (a date and time with its offset)


@dataclass(frozen=True)
class Axis:
    ticks: tuple[Tick, ...]
    note: str = ""  # what the labels leave out: the time zone and its offset, the first tick's date


# ============================================================== choosing a step
def label_centre(fraction: float, label: str, budget: float) -> float:
    """Where a label at ``fraction`` of a ``budget``-character chart is centred (in characters): at
    its tick, moved in just enough to stay inside the chart."""
    half = len(label) / 2
    return min(max(fraction * budget, half), max(budget - half, half))


def fits(ticks: Sequence[Tick], lo: float, hi: float, budget: float) -> bool:
    """Whether the labels of ``ticks`` on a chart of [lo, hi], ``budget`` characters wide, keep GAP
    characters apart (each at its ``label_centre``)."""
    right = -math.inf
    for t in ticks:
        c = label_centre((float(t.value) - lo) / (hi - lo) if hi > lo else 0.5, t.label, budget)
        if c - len(t.label) / 2 < right + GAP:
            return False
        right = c + len(t.label) / 2
    return True


def _choose(candidates: Iterator[tuple[float, Callable[[], list[Tick]]]], lo: float, hi: float, budget: int, scale: float = 1.0) -> list[Tick]:
    """The ticks of the finest candidate step (ascending sizes, in domain units / ``scale``) with
    MIN_TICKS..MAX_TICKS ticks whose labels fit ``budget``; else the most ticks that fit; else none."""
    fallback: list[Tick] = []
    span = (hi - lo) / scale
    for size, make in candidates:
        if size <= 0 or span / size > 4 * MAX_TICKS:
            continue
        ticks = make()
        if not ticks:
            continue
        if len(ticks) <= MAX_TICKS and fits(ticks, lo, hi, budget):
            if len(ticks) >= MIN_TICKS:
                return ticks
            if len(ticks) > len(fallback):
                fallback = ticks
    return fallback


def nice_steps(span: float, integer: bool = False) -> Iterator[float]:
    """1, 2 and 5 times powers of ten, ascending, from about span/1000 (integers: from 1)."""
    if not span > 0 or not math.isfinite(span):
        return
    k = math.floor(math.log10(span)) - 3
    if integer:
        k = max(k, 0)
    while True:
        for m in (1, 2, 5):
            yield m * 10.0**k if k < 0 else float(m * 10**k)
        k += 1
        if 10.0**k > span * 10:
            return


def _multiples(lo: float, hi: float, step: float) -> list[float]:
    """The multiples of ``step`` in [lo, hi] (computed as i*m/10^k, exact for round steps)."""
    first, last = math.ceil(lo / step - 1e-9), math.floor(hi / step + 1e-9)
    exp = math.floor(math.log10(step))
    mant = round(step / 10.0**exp)
    out = []
    for i in range(first, last + 1):
        v = i * mant / 10.0**-exp if exp < 0 else float(i * mant * 10**exp)
        if lo <= v <= hi:
            out.append(v)
    return out


# ============================================================== numbers
def number_label(v: float, step: float, largest: float) -> str:
    """``v`` with the decimals ``step`` needs; thousands as K, M, B, T when the step is whole thousands."""
    if abs(v) < step * 1e-9:
        return "0"
    if largest >= 1e15 or step < 1e-4:
        exp = math.floor(math.log10(abs(v)))
        mantissa = f"{v / 10.0**exp:.{max(0, exp - math.floor(math.log10(step) + 1e-9))}f}"
        mantissa = mantissa.rstrip("0").rstrip(".") if "." in mantissa else mantissa
        return f"{mantissa}e{exp}"
    if step >= 1000 and largest >= 10_000:
        for size, suffix in ((10**12, "T"), (10**9, "B"), (10**6, "M"), (10**3, "K")):
            if largest >= size:
                d = max(0, -math.floor(math.log10(step / size) + 1e-9))
                return f"{v / size:,.{d}f}{suffix}"
    d = max(0, -math.floor(math.log10(step) + 1e-9))
    return f"{v:,.{d}f}"


def number_axis(lo: float, hi: float, integer: bool = False, budget: int = LABEL_BUDGET) -> Axis:
    span = hi - lo
    largest = max(abs(lo), abs(hi))

    def ticks(step: float) -> list[Tick]:
        return [_number_tick(v, step, largest, integer) for v in _multiples(lo, hi, step)]

    def candidates() -> Iterator[tuple[float, Callable[[], list[Tick]]]]:
        for step in nice_steps(span, integer):
            yield step, functools.partial(ticks, step)

    return Axis(tuple(_choose(candidates(), lo, hi, budget)))


def _number_tick(v: float, step: float, largest: float, integer: bool) -> Tick:
    label = number_label(v, step, largest)
    value: float | int = int(round(v)) if integer else v
    return Tick(value, label, f"{value:,}" if integer else repr(v))


# ============================================================== durations
_DURATION_UNITS = (  # (seconds, name, steps in the unit)
    (1e-9, "ns", (1, 2, 5, 10, 20, 50, 100, 200, 500)),
    (1e-6, "µs", (1, 2, 5, 10, 20, 50, 100, 200, 500)),
    (1e-3, "ms", (1, 2, 5, 10, 20, 50, 100, 200, 500)),
    (1.0, "s", (1, 2, 5, 10, 15, 30)),
    (60.0, "min", (1, 2, 5, 10, 15, 30)),
    (3600.0, "h", (1, 2, 3, 6, 12)),
)


def duration_axis(lo: int, hi: int, unit: str, budget: int = LABEL_BUDGET) -> Axis:
    """Whole steps of one unit (ns … min, h, then days by 1-2-5), in the column's ``unit`` ticks."""
    per = _PER_SECOND[unit]
    span = (hi - lo) / per

    def ticks(step: int, size: float, name: str) -> list[Tick]:
        return [
            Tick(v, f"{number_label(v / per / size, step / per / size, max(abs(lo), abs(hi)) / per / size)} {name}", f"{v:,} {unit}")
            for v in range(-(-lo // step) * step, hi + 1, step)
        ]

    def candidates() -> Iterator[tuple[float, Callable[[], list[Tick]]]]:
        steps = [(s * n, s, name) for s, name, ns in _DURATION_UNITS for n in ns]
        steps += [(86400.0 * d, 86400.0, "d") for d in nice_steps(span / 86400.0, integer=True)]
        for seconds, size, name in steps:
            step = round(seconds * per)
            if step < 1 or abs(step - seconds * per) > 1e-6:
                continue  # finer than the column's unit
            yield seconds, functools.partial(ticks, step, size, name)

    return Axis(tuple(_choose(candidates(), lo, hi, budget, per)))


# ============================================================== calendar
_FIXED = (  # sub-day calendar steps: (seconds, label format)
    *((n, "%H:%M:%S") for n in (1, 2, 5, 10, 15, 30)),
    *((60 * n, "%H:%M") for n in (1, 2, 5, 10, 15, 30)),
    *((3600 * n, "%H:%M") for n in (1, 2, 3, 6, 12)),
)


def zone(tz: str | None) -> tzinfo | None:
    """The time zone of an Arrow timestamp type (a name or a fixed offset); None for naive times."""
    if not tz:
        return None
    m = re.fullmatch(r"([+-])(\d{2}):?(\d{2})", tz)
    if m:
        sign = -1 if m.group(1) == "-" else 1
        return timezone(sign * timedelta(hours=int(m.group(2)), minutes=int(m.group(3))))
    try:
        return ZoneInfo(tz)
    except (ZoneInfoNotFoundError, ValueError):
        return UTC


class _Clock:
    """Conversions between a column's integer ticks and wall-clock times in its zone."""

    def __init__(self, per_tick: float, tz: tzinfo | None) -> None:
        self.per_tick, self.tz = per_tick, tz  # ticks per second

    def wall(self, v: float) -> datetime:
        """The wall-clock time (naive) of a tick value (floor to the microsecond)."""
        seconds = math.floor(v / self.per_tick * 1e6) / 1e6
        utc = _EPOCH + timedelta(seconds=seconds)
        if self.tz is None:
            return utc
        return utc.replace(tzinfo=UTC).astimezone(self.tz).replace(tzinfo=None)

    def aware(self, wall: datetime) -> datetime | None:
        """The instant of a wall-clock time in the zone; None when the zone skips it (a DST gap)."""
        if self.tz is None:
            return wall
        a = wall.replace(tzinfo=self.tz)
        return a if a.astimezone(UTC).astimezone(self.tz).replace(tzinfo=None) == wall else None

    def value(self, wall: datetime) -> int | None:
        a = self.aware(wall)
        if a is None:
            return None
        naive = a if self.tz is None else a.astimezone(UTC).replace(tzinfo=None)
        d = naive - _EPOCH
        micros = (d.days * 86400 + d.seconds) * 10**6 + d.microseconds
        if self.per_tick >= 1:
            return micros * int(self.per_tick) // 10**6
        return micros // 86_400_000_000  # days (date32)

    def title(self, wall: datetime) -> str:
        a = self.aware(wall)
        text = wall.isoformat(sep=" ")
        return text if a is None or self.tz is None else a.isoformat(sep=" ")


def _walls(first: datetime, last: datetime, step: int) -> Iterator[datetime]:
    """Wall-clock times at whole multiples of ``step`` seconds of the day, from ``first`` to ``last``."""
    day = datetime(first.year, first.month, first.day)
    offset = (first - day).total_seconds()
    t = day + timedelta(seconds=math.ceil(offset / step) * step)
    while t <= last:
        yield t
        if t > datetime.max - timedelta(seconds=step):
            return
        nxt = t + timedelta(seconds=step)
        if nxt.date() != t.date() and step < 86400:  # steps restart at each midnight
            nxt = datetime(nxt.year, nxt.month, nxt.day)
        t = nxt


def _months(first: datetime, last: datetime, n: int) -> Iterator[datetime]:
    i = first.year * 12 + first.month - 1
    i += -i % n
    while i // 12 <= 9999:  # Python's last year
        t = datetime(i // 12, i % 12 + 1, 1)
        if t > last:
            return
        if t >= first:
            yield t
        i += n


def _days(first: datetime, last: datetime, n: int) -> Iterator[datetime]:
    t = datetime(first.year, first.month, first.day)
    ordinal = t.toordinal() if n != 7 else t.toordinal() - t.weekday()  # weeks from Mondays
    if n != 7:
        ordinal += -ordinal % n
    t = datetime.fromordinal(ordinal)
    while t <= last:
        if t >= first:
            yield t
        if t > datetime.max - timedelta(days=n):
            return
        t += timedelta(days=n)


def calendar_axis(lo: float, hi: float, per_tick: float, tz: str | None, whole_days: bool = False, budget: int = LABEL_BUDGET) -> Axis:
    """Ticks at round calendar units between ``lo`` and ``hi`` (integer ticks, ``per_tick`` a second)."""
    clock = _Clock(per_tick, zone(tz))
    first, last = clock.wall(lo), clock.wall(hi)
    span = (hi - lo) / per_tick

    def make(walls: Iterator[datetime], fmt: Callable[[datetime], str]) -> list[Tick]:
        out = []
        for w in walls:
            v = clock.value(w)
            if v is not None and lo <= v <= hi:
                out.append(Tick(v, fmt(w), clock.title(w)))
        return out

    def fixed(step: int, f: str) -> list[Tick]:
        return make(_walls(first, last, step), lambda w: w.strftime("%m-%d") if (w.hour, w.minute, w.second) == (0, 0, 0) else w.strftime(f))

    def days(n: int) -> list[Tick]:
        return make(_days(first, last, n), lambda w: w.strftime("%m-%d"))

    def months(n: int, label: Callable[[datetime], str]) -> list[Tick]:
        return make(_months(first, last, n), label)

    def candidates() -> Iterator[tuple[float, Callable[[], list[Tick]]]]:
        if not whole_days:
            for step in (0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5):
                if step * per_tick >= 1:
                    d = round(-math.log10(step) + 0.49)
                    yield step, functools.partial(_subsecond, lo, hi, step, per_tick, clock, d)
            for seconds, f in _FIXED:
                yield seconds, functools.partial(fixed, seconds, f)
        for n in (1, 2, 7):
            yield 86400.0 * n, functools.partial(days, n)
        for n in (1, 2, 3, 6):
            yield 86400.0 * 30 * n, functools.partial(months, n, _month_label)
        for years in nice_steps(span / 86400 / 365, integer=True):
            yield 86400.0 * 365 * years, functools.partial(months, 12 * int(years), _year_label)

    ticks = _choose(candidates(), lo, hi, budget, per_tick)
    return Axis(tuple(ticks), _calendar_note(ticks, clock, tz))


def _month_label(w: datetime) -> str:
    return w.strftime("%Y-%m")


def _year_label(w: datetime) -> str:
    return str(w.year)


def _subsecond(lo: float, hi: float, step: float, per_tick: float, clock: _Clock, digits: int) -> list[Tick]:
    size = round(step * per_tick)
    out = []
    for v in range(math.ceil(lo / size) * size, math.floor(hi) + 1, size):
        w = clock.wall(v)
        out.append(Tick(v, w.strftime("%M:%S.%f")[: 6 + digits], clock.title(w)))
    return out


def _calendar_note(ticks: Sequence[Tick], clock: _Clock, tz: str | None) -> str:
    """The date the short labels (times of day) leave out, and the zone with its offset(s)."""
    parts = []
    if ticks and re.fullmatch(r"\d{2}-\d{2}", ticks[0].label):
        parts.append(ticks[0].title[:4])  # days as month-day: their year
    elif ticks and not re.match(r"\d{4}", ticks[0].label):
        parts.append(ticks[0].title[:10])  # times of day: their date
    if tz and clock.tz is not None:
        offsets = []
        for t in ticks:
            m = re.search(r"([+-]\d{2}:\d{2})$", t.title)
            if m and m.group(1) not in offsets:
                offsets.append(m.group(1))
        shown = "/".join(offsets) if offsets else ""
        if tz.upper() in ("UTC", "Z", "ETC/UTC", "+00:00"):
            parts.append("UTC")
        else:
            parts.append(f"{tz} (UTC{shown})" if not re.fullmatch(r"[+-]\d{2}:?\d{2}", tz) else f"UTC{tz}")
    return ", ".join(parts)


# ============================================================== any type
def axis(lo: float | int, hi: float | int, t: pa.DataType | None, budget: int = LABEL_BUDGET) -> Axis:
    """The ticks of [lo, hi] (domain numbers; infinities and NaN: no ticks) for a column of type ``t``."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi < lo:
        return Axis(())
    try:
        return _axis(lo, hi, t, budget)
    except (OverflowError, ValueError):  # a time beyond Python's calendar (years 1 … 9999): no labels to give
        return Axis(())


def _axis(lo: float | int, hi: float | int, t: pa.DataType | None, budget: int) -> Axis:
    if t is None:
        return number_axis(float(lo), float(hi), False, budget)
    if mt.is_timestamp(t):
        return calendar_axis(lo, hi, _PER_SECOND[t.unit], t.tz, budget=budget)
    if mt.is_date32(t):
        return calendar_axis(lo, hi, 1 / 86400, None, whole_days=True, budget=budget)
    if mt.is_date64(t):
        return calendar_axis(lo, hi, 1000, None, whole_days=True, budget=budget)
    if mt.is_time(t):
        return calendar_axis(lo, hi, _PER_SECOND[t.unit], None, budget=budget)
    if mt.is_duration(t):
        return duration_axis(int(lo), int(hi), t.unit, budget)
    return number_axis(float(lo), float(hi), mt.is_integer(t), budget)


# ============================================================== positions
def bar_fraction(position: float, firsts: Sequence[int], n: int) -> float:
    """Where a stored-bin ``position`` (0 = the first shown bin's start, n = the last's end) is
    drawn, as a fraction of the chart's width, when bins ``firsts[j]:firsts[j+1]`` are bar ``j``
    of ``len(firsts)`` equal slots."""
    if n <= 0 or not firsts:
        return 0.5
    position = min(max(position, 0.0), float(n))
    j = max(0, min(bisect.bisect_right(firsts, math.floor(position)) - 1, len(firsts) - 1))
    a, b = firsts[j], firsts[j + 1] if j + 1 < len(firsts) else n
    return (j + (position - a) / max(b - a, 1)) / len(firsts)


@dataclass(frozen=True)
class Placed:
    """A tick where it is drawn: ``x`` its mark and ``label_x`` its label's centre, in percent of the chart's width."""

    label: str
    title: str
    x: float
    label_x: float


def place(ticks: Sequence[Tick], fraction: Callable[[float | int], float], budget: float = LABEL_BUDGET) -> tuple[Placed, ...]:
    """``ticks`` at ``fraction(value)`` of the width (0 … 1), each label moved in to stay inside a
    chart of ``budget`` characters."""
    out = []
    for t in ticks:
        f = min(max(fraction(t.value), 0.0), 1.0)
        out.append(Placed(t.label, t.title, round(100 * f, 3), round(100 * label_centre(f, t.label, budget) / budget, 3)))
    return tuple(out)
