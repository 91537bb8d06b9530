"""Arrow values as Python values for people and JSON, exactly, without pandas.

``as_py()`` fails or loses digits on values Parquet holds validly: nanosecond
timestamps, times and durations (pandas' and DuckDB's ``TIMESTAMP_NS``; pyarrow
raises unless pandas is loaded, and then returns a ``pandas.Timestamp``), and dates,
timestamps and durations beyond Python's years 1..9999 (``OverflowError``). The
read commands keep pandas out of the process (start-up), so such values are
formatted here, from their storage integers: every value of a nanosecond type, and
any other value ``as_py()`` cannot give, becomes an :class:`engine.display.Exact`
(its JSON form and its form for people, both lossless); everything else is
``as_py()``'s value, as before.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import pyarrow as pa

from engine import types as mt
from engine import values as value_forms
from engine.display import Exact

_DIGITS = {"s": 0, "ms": 3, "us": 6, "ns": 9}
_EPOCH = dt.datetime(1970, 1, 1)
_FIXED_OFFSET = re.compile(r"^([+-])(\d\d):?(\d\d)$")


def python_values(array: pa.Array | pa.ChunkedArray) -> list[Any]:
    """The values of ``array`` as Python values (``to_pylist()`` where that is exact)."""
    if isinstance(array, pa.ChunkedArray):
        return [v for chunk in array.chunks for v in python_values(chunk)]
    t = array.type
    if mt.is_dictionary(t):
        array, t = array.dictionary_decode(), t.value_type
    if isinstance(t, pa.BaseExtensionType):
        array, t = array.storage, t.storage_type
    if not _temporal(t):
        return array.to_pylist()
    if getattr(t, "unit", None) == "ns":
        return [None if c is None else _exact(c, t) for c in _counts(array)]
    try:
        return array.to_pylist()
    except (OverflowError, ValueError):
        return [python_value(s) for s in array]


def python_value(scalar: object) -> Any:
    """One value as :func:`python_values` gives it; a value that is no Arrow scalar is returned as it is."""
    if not isinstance(scalar, pa.Scalar):
        return scalar
    if not scalar.is_valid:
        return None
    t = scalar.type
    if not _temporal(t):
        return python_values(pa.array([scalar], t))[0]
    if getattr(t, "unit", None) == "ns":
        return _exact(_count(scalar), t)
    try:
        return scalar.as_py()
    except (OverflowError, ValueError):
        return _exact(_count(scalar), t)


def _temporal(t: pa.DataType) -> bool:
    return mt.is_integer_temporal(t)


def _counts(array: pa.Array) -> list[int | None]:
    """The storage integers of a temporal array (days, ticks of the unit)."""
    return array.view(pa.int32() if array.type.bit_width == 32 else pa.int64()).to_pylist()


def _count(scalar: pa.Scalar) -> int:
    """The storage integer of one valid temporal scalar."""
    count = _counts(pa.array([scalar], scalar.type))[0]
    if count is None:
        raise ValueError(f"a null has no storage integer: {scalar!r}")
    return count


def _exact(count: int, t: pa.DataType) -> Exact:
    if mt.is_timestamp(t):
        return _timestamp(count, t)
    if mt.is_time(t):
        return _time(count, _DIGITS[t.unit])
    if mt.is_duration(t):
        return _duration(count, _DIGITS[t.unit])
    return _text_form(count, t)  # a date beyond Python's years: YYYYY-MM-DD


def _text_form(count: int, t: pa.DataType) -> Exact:
    """The lossless text form of docs/VALUE_FORMS.md (a ``T`` between date and clock: a space for people)."""
    storage = pa.int32() if t.bit_width == 32 else pa.int64()
    text = value_forms.encode(pa.array([count], storage).view(t))[0].as_py() or ""
    return Exact(text, text.replace("T", " "))


def _fraction(fraction: int, digits: int) -> str:
    return f".{fraction:0{digits}d}" if fraction else ""


def _timestamp(count: int, t: pa.TimestampType) -> Exact:
    digits = _DIGITS[t.unit]
    seconds, fraction = divmod(count, 10**digits)
    try:
        if t.tz is None:
            local = _EPOCH + dt.timedelta(seconds=seconds)
        else:
            utc = (_EPOCH + dt.timedelta(seconds=seconds)).replace(tzinfo=dt.UTC)
            local = utc.astimezone(_zone(t.tz))
    except (OverflowError, ValueError, LookupError):  # beyond Python's years, or a zone Python does not know
        return _text_form(count, t)
    clock = local.replace(tzinfo=None).isoformat() + _fraction(fraction, digits)
    if local.tzinfo is None:
        return Exact(clock, clock.replace("T", " "))
    offset = local.utcoffset() or dt.timedelta(0)
    iso_offset = local.isoformat()[19:]  # what isoformat() writes after the seconds: +HH:MM[:SS]
    return Exact(clock + iso_offset, clock.replace("T", " ") + ("Z" if not offset else local.strftime("%z")))


def _zone(name: str) -> dt.tzinfo:
    """The zone of a timestamp type: a fixed offset (``+02:00``) or an IANA name (``Europe/Berlin``)."""
    m = _FIXED_OFFSET.match(name)
    if m:
        delta = dt.timedelta(hours=int(m.group(2)), minutes=int(m.group(3)))
        return dt.timezone(-delta if m.group(1) == "-" else delta)
    if name.upper() in ("UTC", "Z"):
        return dt.UTC
    from zoneinfo import ZoneInfo

    return ZoneInfo(name)


def _time(count: int, digits: int) -> Exact:
    seconds, fraction = divmod(count, 10**digits)
    if not 0 <= seconds < 86_400:  # invalid per the Arrow spec: no clock form
        return Exact(f"{count}", f"{count} ({'s ms us ns'.split()[digits // 3]} since midnight)")
    h, rest = divmod(seconds, 3600)
    text = f"{h:02d}:{rest // 60:02d}:{rest % 60:02d}" + _fraction(fraction, digits)
    return Exact(text)


def _duration(count: int, digits: int) -> Exact:
    """As ``str(timedelta)`` writes it (``-1 day, 23:59:59.999999995``), with the unit's fraction digits."""
    seconds, fraction = divmod(count, 10**digits)
    days, rest = divmod(seconds, 86_400)
    h, rest = divmod(rest, 3600)
    text = f"{h}:{rest // 60:02d}:{rest % 60:02d}" + _fraction(fraction, digits)
    if days:
        text = f"{days} day{'' if abs(days) == 1 else 's'}, " + text
    return Exact(text)
