"""Encoders of the value text forms (engine/values): one per type family, an Arrow array to
its texts (``ENCODERS``)."""

from __future__ import annotations

import functools
from collections.abc import Callable

import numpy as np
import pyarrow as pa

from engine import arrowcompute as pc
from engine import types as mt
from engine.exceptions import InvalidArgumentError
from engine.values.kernels import (
    HEX_PAIRS,
    INT64_DIGITS,
    MS_PER_DAY,
    SECONDS_PER_DAY,
    UNIT_DIGITS,
    UNSCALED,
    clock_segments,
    fixed_values,
    format_datetimes,
    from_values,
    physical,
    positional_decimals,
    render_text,
    validity_of,
)

# --------------------------------------------------------------------------- encoders


def _encode_null(values: pa.Array) -> pa.StringArray:
    return pa.nulls(len(values), pa.string())


def _encode_cast(values: pa.Array) -> pa.StringArray:
    """Arrow's own casts where they are exact: bool (true/false), integers, strings, float32/64.

    Arrow formats float32 and float64 with double-conversion's shortest mode for
    that width, so float32 0.1 is written ``0.1``, not float64's 0.10000000149011612.
    """
    return pc.cast(values, pa.string())


@functools.lru_cache(maxsize=1)
def _half_table() -> np.ndarray:
    """float64 holding the shortest float16 digits of every one of the 65536 half bit patterns.

    numpy renders float16 with the shortest digits that round-trip at half
    width; any decimal of <= 15 significant digits survives float64 exactly, so
    Arrow's shortest float64 text of these values repeats those digits in the
    same style as float32/float64 (``65500``, ``1e-7``, ``-0``).
    """
    halves = np.arange(65_536, dtype=np.uint16).view(np.float16)
    return halves.astype(str).astype(np.float64)


def _encode_float16(values: pa.Array) -> pa.StringArray:
    # Arrow's float16 cast prints the widened float32 value (0.0999755859375), not the shortest.
    wide = from_values(pa.float64(), _half_table()[physical(values, np.uint16)], validity_of(values))
    return pc.cast(wide, pa.string())


def _unscaled_int64(values: pa.Array) -> np.ndarray | None:
    """The unscaled integers of a decimal array as int64 (null slots zeroed), None when some
    value does not fit int64 (a wide decimal128 or decimal256)."""
    width = values.type.bit_width
    if width <= 64:
        return fixed_values(values, np.int32 if width == 32 else np.int64)
    words = width // 64  # little-endian int64 words, the lowest first
    n = len(values)
    buf = values.buffers()[1]
    if buf is None or n == 0:
        return np.zeros(n, np.int64)
    rows = np.frombuffer(buf, np.int64)[values.offset * words : (values.offset + n) * words].reshape(n, words)
    low = rows[:, 0].copy()
    fits = (rows[:, 1:] == (low >> 63)[:, None]).all(axis=1)  # the high words only extend the sign
    if values.null_count:
        valid = pc.is_valid(values).to_numpy(zero_copy_only=False)
        low[~valid] = 0
        fits |= ~valid
    return low if fits.all() else None


def _encode_decimal(values: pa.Array) -> pa.StringArray:
    """Positional text from the unscaled integer: rendered in numpy when it fits int64 and the
    scale is 0-18, else with the point placed by string kernels.

    Arrow's own decimal cast switches to exponent notation (``1E-37``, ``1.2E+4``)
    for small values and negative scales; the unscaled integer never does.
    """
    if 0 <= values.type.scale < INT64_DIGITS:
        small = _unscaled_int64(values)
        if small is not None:
            return positional_decimals(small, values.type.scale, validity_of(values))
    unscaled = pc.cast(values.view(UNSCALED[values.type.bit_width]), pa.string())
    scale = values.type.scale
    if scale == 0:
        return unscaled
    if scale < 0:
        shifted = pc.binary_join_element_wise(unscaled, "0" * -scale, "")
        return pc.if_else(pc.equal(unscaled, "0"), unscaled, shifted)
    negative = pc.starts_with(unscaled, "-")
    digits = pc.ascii_lpad(pc.ascii_ltrim(unscaled, "-"), width=scale + 1, padding="0")
    body = pc.binary_join_element_wise(pc.utf8_slice_codeunits(digits, 0, -scale), pc.utf8_slice_codeunits(digits, -scale), ".")
    return pc.if_else(negative, pc.binary_join_element_wise("-", body, ""), body)


def _encode_date32(values: pa.Array) -> pa.StringArray:
    return format_datetimes(fixed_values(values, np.int32), [], validity_of(values))


def _encode_date64(values: pa.Array) -> pa.StringArray:
    """Whole days as dates; values the Arrow spec forbids (not whole days) keep their milliseconds."""
    ms = fixed_values(values, np.int64)
    days = ms // MS_PER_DAY
    rest = ms - days * MS_PER_DAY
    validity = validity_of(values)
    dates = format_datetimes(days, [], validity)
    if not rest.any():
        return dates
    exact = format_datetimes(days, [b"T", *clock_segments(rest, 3)], validity)
    return pc.if_else(pa.array(rest == 0), dates, exact)


def _encode_time(values: pa.Array) -> pa.StringArray:
    digits = UNIT_DIGITS[values.type.unit]
    ticks = fixed_values(values, np.int32 if mt.is_time32(values.type) else np.int64)
    per_day = SECONDS_PER_DAY * 10**digits
    outside = (ticks < 0) | (ticks >= per_day)
    if outside.any():
        bad = int(ticks[np.argmax(outside)])
        raise InvalidArgumentError(f"cannot encode {values.type} value {bad}: times must lie in [00:00:00, 24:00:00)")
    return render_text(len(ticks), clock_segments(ticks, digits), validity_of(values))


def _encode_timestamp(values: pa.Array) -> pa.StringArray:
    """Split into (day, time of day) with floor division so negative instants and int64 min work."""
    digits = UNIT_DIGITS[values.type.unit]
    ticks = fixed_values(values, np.int64)
    per_day = SECONDS_PER_DAY * 10**digits
    days = ticks // per_day
    clock = [b"T", *clock_segments(ticks - days * per_day, digits)]
    if values.type.tz is not None:
        clock.append(b"Z")
    return format_datetimes(days, clock, validity_of(values))


def _encode_duration(values: pa.Array) -> pa.StringArray:
    return pc.cast(values.view(pa.int64()), pa.string())


def _encode_binary(values: pa.Array) -> pa.StringArray:
    """Hex through a 256-entry table over the whole data buffer: no Python per value."""
    if not mt.is_binary(values.type):
        values = pc.cast(values, pa.binary())
    n = len(values)
    if n == 0:
        return pa.array([], pa.string())
    _, offsets_buf, data_buf = values.buffers()
    offsets = np.frombuffer(offsets_buf, dtype=np.int32)[values.offset : values.offset + n + 1].astype(np.int64)
    start, end = int(offsets[0]), int(offsets[-1])
    if 2 * (end - start) >= 2**31:
        raise InvalidArgumentError(f"{end - start} bytes of binary do not fit one hex string array")
    data = np.frombuffer(data_buf, dtype=np.uint8)[start:end] if data_buf is not None else np.zeros(0, np.uint8)
    chars = HEX_PAIRS[data].view(np.uint8)
    new_offsets = ((offsets - start) * 2).astype(np.int32)
    return pa.StringArray.from_buffers(n, pa.py_buffer(new_offsets), pa.py_buffer(chars), validity_of(values))


ENCODERS: dict[str, Callable[[pa.Array], pa.StringArray]] = {
    "null": _encode_null,
    "bool": _encode_cast,
    "int": _encode_cast,
    "float": _encode_cast,
    "float16": _encode_float16,
    "decimal": _encode_decimal,
    "date32": _encode_date32,
    "date64": _encode_date64,
    "time": _encode_time,
    "timestamp": _encode_timestamp,
    "duration": _encode_duration,
    "string": _encode_cast,
    "binary": _encode_binary,
}
