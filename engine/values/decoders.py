"""Decoders of the value text forms (engine/values): one per type family, texts back to an
Arrow array of exactly the type (``DECODERS``); a bad text raises ``BadText``."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa

from engine import arrowcompute as pc
from engine import types as mt
from engine.values.kernels import MAX_YEAR_DIGITS, MS_PER_DAY, SECONDS_PER_DAY, UNHEX, UNIT_DIGITS, BadText, days_from_civil, from_values, validity_of

# --------------------------------------------------------------------------- decoders


def _all_true(mask: pa.Array) -> bool:
    """True when no row is False (nulls are null texts, which are always fine; empty is fine)."""
    return pc.all(mask, skip_nulls=True, min_count=0).as_py() is not False


def _require_pattern(texts: pa.StringArray, pattern: str, expected: str) -> None:
    """Reject any non-null text not matching `pattern`; Arrow's casts alone accept too much (``0x10``)."""
    if len(texts) == texts.null_count:
        return
    if not _all_true(pc.match_substring_regex(texts, pattern)):
        raise BadText(f"expected {expected}")


def _decode_null(texts: pa.StringArray, type: pa.DataType) -> pa.Array:
    if texts.null_count != len(texts):
        raise BadText("a null column has only null values")
    return pa.nulls(len(texts))


def _decode_bool(texts: pa.StringArray, type: pa.DataType) -> pa.Array:
    # Arrow's cast also takes 1/0/TRUE/True; only the documented spelling is valid.
    is_true = pc.equal(texts, "true")
    known = pc.or_(is_true, pc.equal(texts, "false"))
    if not _all_true(known):
        raise BadText("expected true or false")
    return is_true


def _require_base_10(texts: pa.StringArray, expected: str) -> None:
    """Arrow's integer parse takes [-]digits and also 0x hex; hex is the one form to refuse.

    A substring test is several times cheaper than a full regex over a million texts.
    """
    if not _all_true(pc.invert(pc.match_substring(texts, "x", ignore_case=True))):
        raise BadText(f"expected {expected}")


def _decode_int(texts: pa.StringArray, type: pa.DataType) -> pa.Array:
    _require_base_10(texts, "a base-10 integer")
    return pc.cast(texts, type)  # anything else, and range errors, come from Arrow's checked parse


def _decode_float(texts: pa.StringArray, type: pa.DataType) -> pa.Array:
    # Arrow parses at the target width (float32 "0.1" -> nearest float32), never via float64 text.
    return pc.cast(texts, type)


def _decode_decimal(texts: pa.StringArray, type: pa.DataType) -> pa.Array:
    scale = type.scale
    if scale >= 0:
        _require_pattern(texts, r"^-?[0-9]+(\.[0-9]+)?$", "a positional decimal such as -12.50")
        return pc.cast(texts, type)  # Arrow refuses lost digits and precision overflow
    # Arrow cannot cast text to a negative scale; strip the implied zeros and reinterpret.
    zeros = -scale
    _require_pattern(texts, rf"^-?(0+|[0-9]*[1-9][0-9]*0{{{zeros}}})$", f"an integer that is a multiple of 1e{zeros}")
    is_zero = pc.match_substring_regex(texts, r"^-?0+$")
    unscaled = pc.if_else(is_zero, "0", pc.utf8_slice_codeunits(texts, 0, -zeros))
    same_precision = {32: pa.decimal32, 64: pa.decimal64, 128: pa.decimal128, 256: pa.decimal256}[type.bit_width]
    return pc.cast(unscaled, same_precision(type.precision, 0)).view(type)  # precision checked by the cast


_DATE_PATTERN = rf"(?P<year>-?[0-9]{{4,{MAX_YEAR_DIGITS}}})-(?P<month>[0-9]{{2}})-(?P<day>[0-9]{{2}})"

# Letters of the canonical fixed-width layouts (``YYYY-mm-ddTHH:NN:SS.fff``): the digits of each field.
_FIELD_LETTERS = {"Y": "year", "m": "month", "d": "day", "H": "hour", "N": "minute", "S": "second", "f": "fraction"}


def _clock_pattern(digits: int) -> str:
    fraction = rf"(?:\.(?P<fraction>[0-9]{{1,{digits}}}))?" if digits else ""
    return rf"(?P<hour>[0-9]{{2}}):(?P<minute>[0-9]{{2}}):(?P<second>[0-9]{{2}}){fraction}"


def _clock_layout(digits: int) -> str:
    return "HH:NN:SS" + ("." + "f" * digits if digits else "")


def _temporal_fields(texts: pa.StringArray, layout: str, pattern: str, expected: str, fraction_digits: int) -> dict[str, np.ndarray]:
    """The numeric calendar/clock fields of every text (null texts read as the epoch).

    Texts written by `encode` for years 0..9999 all have the layout's width, and
    are parsed straight from the bytes; anything else goes through the regex.
    """
    placeholder = layout.replace("YYYY", "1970").replace("mm", "01").replace("dd", "01")
    placeholder = placeholder.translate(str.maketrans("HNSf", "0000"))
    filled = pc.fill_null(texts, placeholder) if texts.null_count else texts
    fields = _fixed_width_fields(filled, layout)
    if fields is not None:
        return fields
    parts = pc.extract_regex(filled, f"^{pattern}$")
    if parts.null_count:
        raise BadText(f"expected {expected}")
    fields = {}
    for field in parts.type:
        column = parts.field(field.name)
        if field.name == "fraction":  # fewer digits than the unit: the missing ones are zeros
            column = pc.ascii_rpad(column, width=fraction_digits, padding="0")
        else:  # optional groups that did not take part are empty
            column = pc.ascii_lpad(column, width=1, padding="0")
        fields[field.name] = pc.cast(column, pa.int64()).to_numpy()
    return fields


def _fixed_width_fields(texts: pa.StringArray, layout: str) -> dict[str, np.ndarray] | None:
    """Fields read from an (n, width) view of the text bytes, or None when any text is not in `layout`."""
    n, width = len(texts), len(layout)
    _, offsets_buf, data_buf = texts.buffers()
    if n == 0 or data_buf is None:
        return None
    offsets = np.frombuffer(offsets_buf, dtype=np.int32)[texts.offset : texts.offset + n + 1]
    if int(offsets[-1]) - int(offsets[0]) != n * width or (np.diff(offsets) != width).any():
        return None
    chars = np.frombuffer(data_buf, dtype=np.uint8)[offsets[0] : offsets[-1]].reshape(n, width)
    literal = [i for i, c in enumerate(layout) if c not in _FIELD_LETTERS]
    expected = np.frombuffer("".join(layout[i] for i in literal).encode("ascii"), dtype=np.uint8)
    if literal and (chars[:, literal] != expected).any():
        return None
    fields = {}
    for letter, name in _FIELD_LETTERS.items():
        positions = [i for i, c in enumerate(layout) if c == letter]
        if not positions:
            continue
        digits = chars[:, positions] - np.uint8(48)  # wraps around for bytes below "0"
        if (digits > 9).any():
            return None
        value = np.zeros(n, dtype=np.int64)
        for j in range(len(positions)):
            value = value * 10 + digits[:, j]
        fields[name] = value
    return fields


_DAYS_IN_MONTH = np.array([0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31], dtype=np.int64)


def _parse_days(fields: dict[str, np.ndarray]) -> np.ndarray:
    """Days since the epoch; dates like 2023-02-30 are refused, not rolled over into March."""
    year, month, day = fields["year"], fields["month"], fields["day"]
    if ((month < 1) | (month > 12) | (day < 1)).any():
        raise BadText("month or day out of range")
    leap = (year % 4 == 0) & ((year % 100 != 0) | (year % 400 == 0))
    if (day > _DAYS_IN_MONTH[month] + (leap & (month == 2))).any():
        raise BadText("no such day in the calendar")
    return days_from_civil(year, month, day)


def _parse_time_of_day(fields: dict[str, np.ndarray], digits: int) -> np.ndarray:
    hour, minute, second = fields["hour"], fields["minute"], fields["second"]
    if ((hour > 23) | (minute > 59) | (second > 59)).any():
        raise BadText("hour, minute or second out of range")
    ticks = ((hour * 60 + minute) * 60 + second) * 10**digits
    if digits:
        ticks = ticks + fields["fraction"]
    return ticks


def _combine(days: np.ndarray, time_of_day: np.ndarray, per_day: int) -> np.ndarray:
    """days * per_day + time_of_day, overflow-checked by Arrow.

    Negative days go through (days + 1) * per_day + (time_of_day - per_day) so
    that int64 min, whose days * per_day alone overflows, still decodes.
    """
    negative = days < 0
    try:
        whole = pc.multiply_checked(pa.array(np.where(negative, days + 1, days)), per_day)
        ticks = pc.add_checked(whole, pa.array(np.where(negative, time_of_day - per_day, time_of_day)))
    except pa.ArrowInvalid:
        raise BadText("outside the int64 range of the type's unit") from None
    return ticks.to_numpy()


def _decode_date32(texts: pa.StringArray, type: pa.DataType) -> pa.Array:
    days = _parse_days(_temporal_fields(texts, "YYYY-mm-dd", _DATE_PATTERN, "YYYY-MM-DD", 0))
    if ((days < -(2**31)) | (days >= 2**31)).any():
        raise BadText("date out of the date32 range")
    return from_values(type, days.astype(np.int32), validity_of(texts))


def _decode_date64(texts: pa.StringArray, type: pa.DataType) -> pa.Array:
    # Dates, or timestamp[ms] texts for the non-whole-day values encode keeps.
    pattern = rf"{_DATE_PATTERN}(?:T{_clock_pattern(3)})?"
    fields = _temporal_fields(texts, "YYYY-mm-dd", pattern, "YYYY-MM-DD (or YYYY-MM-DDTHH:MM:SS.fff)", 3)
    days = _parse_days(fields)
    time_of_day = _parse_time_of_day(fields, 3) if "hour" in fields else np.zeros(len(texts), dtype=np.int64)
    return from_values(type, _combine(days, time_of_day, MS_PER_DAY), validity_of(texts))


def _decode_time(texts: pa.StringArray, type: pa.DataType) -> pa.Array:
    digits = UNIT_DIGITS[type.unit]
    layout = _clock_layout(digits)
    fields = _temporal_fields(texts, layout, _clock_pattern(digits), layout.replace("N", "M"), digits)
    ticks = _parse_time_of_day(fields, digits)
    return from_values(type, ticks.astype(np.int32 if mt.is_time32(type) else np.int64), validity_of(texts))


def _decode_timestamp(texts: pa.StringArray, type: pa.DataType) -> pa.Array:
    digits = UNIT_DIGITS[type.unit]
    zone = "Z" if type.tz is not None else ""
    layout = f"YYYY-mm-ddT{_clock_layout(digits)}{zone}"
    expected = layout.replace("m", "M").replace("N", "M").replace("d", "D") + (" (UTC)" if zone else "")
    pattern = f"{_DATE_PATTERN}T{_clock_pattern(digits)}{zone}"
    fields = _temporal_fields(texts, layout, pattern, expected, digits)
    ticks = _combine(_parse_days(fields), _parse_time_of_day(fields, digits), SECONDS_PER_DAY * 10**digits)
    return from_values(type, ticks, validity_of(texts))


def _decode_duration(texts: pa.StringArray, type: pa.DataType) -> pa.Array:
    _require_base_10(texts, f"a base-10 count of {type.unit}")
    return pc.cast(texts, pa.int64()).view(type)


def _decode_string(texts: pa.StringArray, type: pa.DataType) -> pa.Array:
    return texts if mt.is_string(type) else pc.cast(texts, type)


def _decode_binary(texts: pa.StringArray, type: pa.DataType) -> pa.Array:
    validity = validity_of(texts)
    if texts.null_count:
        texts = pc.fill_null(texts, "")  # null slots may hold any bytes; make them empty
    n = len(texts)
    if n == 0:
        return pa.array([], type)
    _, offsets_buf, data_buf = texts.buffers()
    offsets = np.frombuffer(offsets_buf, dtype=np.int32)[texts.offset : texts.offset + n + 1]
    start, end = int(offsets[0]), int(offsets[-1])
    data = np.frombuffer(data_buf, dtype=np.uint8)[start:end] if data_buf is not None else np.zeros(0, np.uint8)
    nibbles = UNHEX[data]
    if (np.diff(offsets) % 2).any() or (nibbles > 15).any():
        raise BadText("expected an even number of hex digits")
    pairs = nibbles.reshape(-1, 2)
    raw = (pairs[:, 0] << 4) | pairs[:, 1]
    new_offsets = ((offsets - start) // 2).astype(np.int32)
    binary = pa.Array.from_buffers(pa.binary(), n, [validity, pa.py_buffer(new_offsets), pa.py_buffer(raw)])
    if mt.is_fixed_size_binary(type):
        lengths = pc.binary_length(binary)
        if not _all_true(pc.equal(lengths, type.byte_width)):
            raise BadText(f"expected exactly {type.byte_width} bytes ({2 * type.byte_width} hex digits)")
    return binary if mt.is_binary(type) else pc.cast(binary, type)


DECODERS: dict[str, Callable[[pa.StringArray, pa.DataType], pa.Array]] = {
    "null": _decode_null,
    "bool": _decode_bool,
    "int": _decode_int,
    "float": _decode_float,
    "float16": _decode_float,
    "decimal": _decode_decimal,
    "date32": _decode_date32,
    "date64": _decode_date64,
    "time": _decode_time,
    "timestamp": _decode_timestamp,
    "duration": _decode_duration,
    "string": _decode_string,
    "binary": _decode_binary,
}
