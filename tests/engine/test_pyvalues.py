"""engine/pyvalues.py: Arrow values Python cannot hold exactly, shown losslessly without pandas.
Oracles: numpy's and pandas' own parsers read the forms back to the same integers."""

from __future__ import annotations

import datetime as dt
from zoneinfo import ZoneInfo

import numpy as np
import pandas as pd
import pyarrow as pa
from hypothesis import example, given
from hypothesis import strategies as st

from engine.display import Exact, dumps, fmt_value
from engine.pyvalues import python_value, python_values

INT64 = st.integers(-(2**63) + 1, 2**63 - 1)  # int64 min is numpy's NaT
# 1950..2100: where pandas' zone rules agree with zoneinfo's (before 1901-12-13 pandas gives Berlin
# its LMT offset +00:53; St John's had offsets with seconds until 1935, which pandas cannot parse)
ZONED_NS = st.integers(-631_152_000 * 10**9, 4_102_444_800 * 10**9)


@given(INT64)
def test_timestamp_ns_reads_back_exactly(n: int) -> None:
    (v,) = python_values(pa.array([n], pa.timestamp("ns")))
    assert isinstance(v, Exact) and np.datetime64(v, "ns") == np.datetime64(n, "ns")
    assert fmt_value(v) == v.replace("T", " ")


@given(ZONED_NS, st.sampled_from(["Europe/Berlin", "America/St_Johns", "+05:30", "UTC", "Asia/Kathmandu"]))
@example(2_972_266_200_000_000_000, "America/St_Johns")  # the instant of a change, past 2037
def test_zoned_timestamp_ns_keeps_the_offset(n: int, zone: str) -> None:
    (v,) = python_values(pa.array([n], pa.timestamp("ns", zone)))
    ts = pd.Timestamp(str(v))
    expected = _utcoffset(n, zone)
    assert ts.value == n and ts.utcoffset() == expected, v
    offset = dt.datetime(2000, 1, 1, tzinfo=dt.timezone(expected)).strftime("%z")
    assert fmt_value(v).endswith("Z" if offset == "+0000" else offset)


def _utcoffset(n: int, zone: str) -> dt.timedelta:
    """The zone's offset at ``n`` ns after the epoch, by zoneinfo (the IANA rules). Not pandas':
    past 2037 it keeps the old offset at the very instant of a change (2064-03-09 05:30 UTC in
    America/St_Johns: 02:00-03:30 where the clocks read 03:00-02:30)."""
    if zone[0] in "+-":
        hours, minutes = zone[1:].split(":")
        sign = -1 if zone[0] == "-" else 1
        return sign * dt.timedelta(hours=int(hours), minutes=int(minutes))
    offset = dt.datetime.fromtimestamp(n // 10**9, ZoneInfo(zone)).utcoffset()  # changes fall on whole seconds
    assert offset is not None
    return offset


@given(st.integers(0, 86_400 * 10**9 - 1))
def test_time64_ns(n: int) -> None:
    v = python_value(pa.array([n], pa.time64("ns"))[0])
    assert np.datetime64(f"1970-01-01T{v}", "ns") == np.datetime64(n, "ns")


@given(st.integers(-(2**62), 2**62))  # pandas parses "-106752 days, ..." only inside its range
def test_duration_ns_as_timedelta_writes_it(n: int) -> None:
    (v,) = python_values(pa.array([n], pa.duration("ns")))
    assert pd.Timedelta(str(v)).value == n
    if n % 1000 == 0:  # whole microseconds: what str(timedelta) writes, fraction digits aside
        assert str(v).split(".")[0] == str(dt.timedelta(microseconds=n // 1000)).split(".")[0]


def test_values_python_holds_stay_python_values() -> None:
    assert python_values(pa.array([0], pa.timestamp("us"))) == [dt.datetime(1970, 1, 1)]
    assert python_values(pa.array([1], pa.date32())) == [dt.date(1970, 1, 2)]
    far = python_values(pa.array([3_000_000, None], pa.date32()))
    assert far == ["10183-09-21", None] and isinstance(far[0], Exact)
    assert dumps({"v": far[0]}) == '{\n  "v": "10183-09-21"\n}'


@given(st.integers(-(2**63) // 86_400_000 + 1, (2**63 - 1) // 86_400_000))
def test_date64_beyond_pythons_years(days: int) -> None:
    """date64 (pyarrow writes it to Parquet as date32; Arrow IPC and other writers keep it): any day, exactly."""
    (v,) = python_values(pa.array([days * 86_400_000], pa.date64()))
    assert np.datetime64(str(v), "D") == np.datetime64(days, "D")
    assert fmt_value(v) == str(v)
