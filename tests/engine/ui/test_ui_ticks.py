"""X-axis ticks (engine/ui/ticks.py): monotonic, inside the range, 3 to 8 of them, at round values of
their step (numbers: a multiple of 1, 2 or 5 times a power of ten; times: round calendar units in
the column's zone), labels that fit the narrowest chart; checked against numpy and datetime."""

from __future__ import annotations

import math
from datetime import UTC, date, datetime, timedelta
from zoneinfo import ZoneInfo

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.ui import ticks

finite = st.floats(min_value=-1e12, max_value=1e12, allow_nan=False, allow_infinity=False)


def _fits(ax: ticks.Axis, lo: float, hi: float, distinct: bool = True) -> None:
    """Distinct labels (times of day repeat on other days), each (and a gap) no wider than the ticks'
    spacing on a LABEL_BUDGET-character chart of [lo, hi]."""
    labels = [t.label for t in ax.ticks]
    assert len(set(labels)) == len(labels) or not distinct, labels
    placed = ticks.place(ax.ticks, lambda v: (float(v) - lo) / (hi - lo))
    for p in placed:  # inside the chart
        assert len(p.label) / 2 - 1e-3 <= p.label_x / 100 * ticks.LABEL_BUDGET <= ticks.LABEL_BUDGET - len(p.label) / 2 + 1e-3
    for a, b in zip(placed, placed[1:]):  # a gap apart
        assert (b.label_x - a.label_x) / 100 * ticks.LABEL_BUDGET >= (len(a.label) + len(b.label)) / 2 + ticks.GAP - 1e-3, labels


def _enough(ax: ticks.Axis, lo: float, hi: float, t: pa.DataType) -> None:
    """3 to 8 ticks; fewer only when the labels of every step with 3 or more would not
    fit the narrowest chart (long labels over a narrow range: a large id, a far date)."""
    assert len(ax.ticks) <= 8, [x.label for x in ax.ticks]
    if len(ax.ticks) < 3:
        wide = ticks.axis(lo, hi, t, budget=10**9)
        if len(wide.ticks) < 3:
            assert not pa.types.is_integer(t) and not pa.types.is_floating(t)  # between two calendar steps (2 days: 9, weeks: 2)
            return
        assert not ticks.fits(wide.ticks, lo, hi, ticks.LABEL_BUDGET)


def _round_step(values: np.ndarray) -> float:
    """The ticks' common step, checked to be 1, 2 or 5 times a power of ten."""
    steps = np.diff(values)
    np.testing.assert_allclose(steps, steps[0], rtol=1e-9)
    exp = math.floor(math.log10(steps[0]))
    assert round(steps[0] / 10.0**exp, 9) in (1, 2, 5, 10), steps[0]
    return float(steps[0])


@settings(max_examples=300, deadline=None)
@given(finite, finite)
def test_number_ticks_are_round_inside_the_range_and_3_to_8(a: float, b: float) -> None:
    lo, hi = min(a, b), max(a, b)
    if hi - lo < 1e-6 * max(1.0, abs(lo), abs(hi)):
        return
    ax = ticks.axis(lo, hi, pa.float64())
    v = np.array([t.value for t in ax.ticks])
    _enough(ax, lo, hi, pa.float64())
    assert np.all(np.diff(v) > 0) and v[0] >= lo and v[-1] <= hi
    if len(v) < 2:
        return
    step = _round_step(v)
    np.testing.assert_allclose(v / step, np.round(v / step), atol=1e-6)  # multiples of the step
    np.testing.assert_allclose(
        [float(t.label.replace(",", "").replace("K", "e3").replace("M", "e6").replace("B", "e9").replace("T", "e12")) for t in ax.ticks],
        v,
        rtol=1e-9,
        atol=step * 1e-6,
    )
    _fits(ax, lo, hi)


@settings(max_examples=200, deadline=None)
@given(st.integers(-(10**15), 10**15), st.integers(2, 10**12))
def test_integer_ticks_are_whole_steps(lo: int, span: int) -> None:
    hi = lo + span
    ax = ticks.axis(lo, hi, pa.int64())
    v = np.array([t.value for t in ax.ticks], dtype=object)
    _enough(ax, lo, hi, pa.int64())
    assert all(isinstance(x, int) for x in v)
    assert all(lo <= x <= hi for x in v) and all(b > a for a, b in zip(v, v[1:]))
    if len(v) < 2:
        return
    step = v[1] - v[0]
    assert step >= 1 and all(x % step == 0 for x in v) and all(b - a == step for a, b in zip(v, v[1:]))
    _round_step(np.array(v, dtype=np.float64))
    _fits(ax, lo, hi)


@settings(max_examples=150, deadline=None)
@given(
    st.datetimes(min_value=datetime(1900, 1, 1), max_value=datetime(2200, 1, 1)),
    st.integers(60, 200 * 365 * 86400),
    st.sampled_from([None, "UTC", "Europe/Paris", "America/New_York", "Asia/Kolkata", "+05:45"]),
)
def test_timestamp_ticks_are_round_calendar_units_in_the_zone(start: datetime, seconds: int, tz: str | None) -> None:
    t = pa.timestamp("us", tz)
    lo = int(pa.scalar(start, pa.timestamp("us")).value)
    hi = lo + seconds * 10**6
    ax = ticks.axis(lo, hi, t)
    v = [int(x.value) for x in ax.ticks]
    _enough(ax, lo, hi, t)
    assert v == sorted(set(v)) and lo <= v[0] and v[-1] <= hi, [x.label for x in ax.ticks]
    zone = ticks.zone(tz) or UTC
    walls = [(datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=x)).astimezone(zone) for x in v]
    # round: every tick at the start of a calendar unit (its finer fields zero) in the zone, the
    # same unit for all but the coarser ones among them (midnight, the first of a month)
    order = ["microsecond", "second", "minute", "hour", "day", "month", "year"]

    def unit(w: datetime) -> str:
        return next((u for u, v in zip(order, (w.microsecond, w.second, w.minute, w.hour, w.day - 1, w.month - 1)) if v), "year")

    finest = min((unit(w) for w in walls), key=order.index)
    if seconds >= 10:
        assert finest != "microsecond", [x.label for x in ax.ticks]
    if seconds >= 8 * 86400:
        assert finest in ("day", "month", "year"), [x.label for x in ax.ticks]
    for x, w in zip(ax.ticks, walls):
        if tz:  # the title is the time in the zone, with its offset
            assert x.title.endswith(w.isoformat()[-6:]) and datetime.fromisoformat(x.title) == w
    if tz and tz != "UTC":
        assert "UTC" in ax.note
    _fits(ax, lo, hi, distinct=False)


def test_date_ticks_label_months_days_and_years() -> None:
    def days(s: str) -> int:
        return (date.fromisoformat(s) - date(1970, 1, 1)).days

    ax = ticks.axis(days("2020-01-17"), days("2024-06-03"), pa.date32())
    assert [t.label for t in ax.ticks] == ["2021", "2022", "2023", "2024"] and [t.value for t in ax.ticks] == [
        days(f"{y}-01-01") for y in range(2021, 2025)
    ]
    ax = ticks.axis(days("2024-01-17"), days("2024-06-03"), pa.date32())
    assert all(date(1970, 1, 1) + timedelta(days=t.value) == date(2024, int(t.label[5:]), 1) for t in ax.ticks) and len(ax.ticks) >= 2
    ax = ticks.axis(days("2024-01-17"), days("2024-01-27"), pa.date32())
    assert ax.note == "2024" and all(t.label == (date(1970, 1, 1) + timedelta(days=t.value)).strftime("%m-%d") for t in ax.ticks)
    assert 3 <= len(ax.ticks) <= 8


def test_a_day_across_a_dst_change_is_labelled_in_its_zone_with_both_offsets() -> None:
    paris = ZoneInfo("Europe/Paris")
    lo = int(datetime(2024, 3, 30, 23, 10, tzinfo=paris).timestamp()) * 10**9
    hi = int(datetime(2024, 3, 31, 16, 0, tzinfo=paris).timestamp()) * 10**9
    ax = ticks.axis(lo, hi, pa.timestamp("ns", "Europe/Paris"))
    walls = [datetime.fromtimestamp(t.value / 1e9, paris) for t in ax.ticks]
    assert all(w.minute == 0 and w.second == 0 for w in walls)
    assert [t.label for t in ax.ticks] == [("03-31" if w.hour == 0 else w.strftime("%H:%M")) for w in walls]
    assert "Europe/Paris (UTC+01:00/+02:00)" in ax.note


def test_durations_are_whole_steps_of_a_unit_and_times_of_day_are_clock_times() -> None:
    ax = ticks.axis(0, 5400 * 10**3, pa.duration("ms"))
    assert [t.label for t in ax.ticks] == [f"{m} min" for m in range(0, 91, 30)]
    assert [t.value for t in ax.ticks] == list(np.arange(0, 91, 30) * 60_000)
    ax = ticks.axis(0, 30 * 86400 * 10**6, pa.duration("us"))
    assert all(t.label.endswith(" d") and t.value % (86400 * 10**6) == 0 for t in ax.ticks) and 3 <= len(ax.ticks) <= 8
    ax = ticks.axis(8 * 3600, 17 * 3600 + 120, pa.time32("s"))
    assert [t.label for t in ax.ticks] == ["08:00", "10:00", "12:00", "14:00", "16:00"]


def test_no_ticks_for_an_infinite_or_empty_range_and_positions_follow_the_bars() -> None:
    far = (date(9999, 12, 31) - date(1970, 1, 1)).days
    assert ticks.axis(-(2**31) + 1, 2**31 - 1, pa.date32()).ticks == ()  # beyond Python's calendar: no labels, no error
    assert len(years := [int(t.label) for t in ticks.axis(far - 3000, far, pa.date32()).ticks]) >= 3 and 9991 <= years[0] and years[-1] <= 9999
    assert ticks.axis(-math.inf, 3.0, pa.float64()).ticks == () and ticks.axis(3.0, 1.0, pa.float64()).ticks == ()
    # 10 stored bins drawn as 4 bars of 3, 2, 3, 2 bins (as the histogram groups them)
    firsts = [i * 10 // 4 for i in range(4)]
    assert ticks.bar_fraction(0, firsts, 10) == 0 and ticks.bar_fraction(10, firsts, 10) == 1
    assert ticks.bar_fraction(firsts[2], firsts, 10) == pytest.approx(0.5)
    assert ticks.bar_fraction(firsts[1] + 1.5, firsts, 10) == pytest.approx((1 + 1.5 / (firsts[2] - firsts[1])) / 4)
