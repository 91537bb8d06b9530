"""Shared kernels of the value text forms (engine/values): constants, numpy buffer helpers,
digit rendering and proleptic Gregorian calendar arithmetic."""

from __future__ import annotations

import builtins
import functools

import numpy as np
import pyarrow as pa

from engine import arrowcompute as pc
from engine import types as mt
from engine.exceptions import InvalidArgumentError
from engine.types import is_string_like

UNIT_DIGITS = {"s": 0, "ms": 3, "us": 6, "ns": 9}
SECONDS_PER_DAY = 86_400
MS_PER_DAY = 86_400_000
# Longest year accepted when decoding: 12 digits covers timestamp[s]'s
# +-292,277,026,596 years and keeps every intermediate day count well inside int64.
MAX_YEAR_DIGITS = 12

HEX_PAIRS = np.frombuffer(bytes(range(256)).hex().encode("ascii"), dtype=np.uint16)  # byte -> its two hex digits
UNHEX = np.full(256, 255, dtype=np.uint8)  # hex digit -> its value; 255 marks bytes that are not hex digits
for _digit in "0123456789abcdefABCDEF":
    UNHEX[ord(_digit)] = int(_digit, 16)
del _digit
# Same storage width, scale 0: a view that shows a decimal's unscaled integer.
UNSCALED = {32: pa.decimal32(9, 0), 64: pa.decimal64(18, 0), 128: pa.decimal128(38, 0), 256: pa.decimal256(76, 0)}


class BadText(Exception):
    """A text failed to decode; raised inside decoders, turned into InvalidArgumentError by `decode`.

    Decoders only need to notice that *some* row is bad; `decode` bisects to the
    first bad row so the user sees the actual text.
    """


# --------------------------------------------------------------------------- buffer helpers


def as_string_array(texts: pa.Array | pa.ChunkedArray) -> pa.StringArray:
    """Normalise decode input so decoders see one plain StringArray."""
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks() if texts.num_chunks else pa.array([], texts.type)
    if not isinstance(texts, pa.Array):
        raise InvalidArgumentError(f"decode needs a pyarrow string Array, got {builtins.type(texts).__name__}")
    if mt.is_dictionary(texts.type):
        texts = texts.dictionary_decode()
    if not (is_string_like(texts.type) or mt.is_null(texts.type)):
        raise InvalidArgumentError(f"decode needs string texts, got an array of {texts.type}")
    if not mt.is_string(texts.type):
        texts = pc.cast(texts, pa.string())
    return texts


def validity_of(arr: pa.Array) -> pa.Buffer | None:
    """A fresh offset-0 validity bitmap, so new arrays can be built over any slice."""
    if arr.null_count == 0:
        return None
    return pc.is_valid(arr).buffers()[1]


def _valid_mask(arr: pa.Array) -> np.ndarray:
    if arr.null_count == 0:
        return np.ones(len(arr), dtype=bool)
    return pc.is_valid(arr).to_numpy(zero_copy_only=False)


def physical(arr: pa.Array, dtype: type[np.generic]) -> np.ndarray:
    """Zero-copy numpy view of a fixed-width array's values buffer, honouring the slice offset."""
    n = len(arr)
    buf = arr.buffers()[1]
    if buf is None or n == 0:
        return np.zeros(n, dtype=dtype)
    return np.frombuffer(buf, dtype=dtype)[arr.offset : arr.offset + n]


def fixed_values(arr: pa.Array, dtype: type[np.generic]) -> np.ndarray:
    """The physical values of a fixed-width array as int64, null slots zeroed.

    Null slots may hold any garbage; zeroing them keeps range checks and fast
    paths from tripping over values nobody will see.
    """
    values = physical(arr, dtype).astype(np.int64)
    if arr.null_count:
        values[~_valid_mask(arr)] = 0
    return values


def from_values(type: pa.DataType, values: np.ndarray, validity: pa.Buffer | None) -> pa.Array:
    """Build a fixed-width array of `type` directly over numpy values (exact type, zone kept)."""
    return pa.Array.from_buffers(type, len(values), [validity, pa.py_buffer(np.ascontiguousarray(values))])


def _digit_table(width: int, dtype: type[np.generic]) -> np.ndarray:
    """ASCII of 0..10**width-1, zero-padded, read as integers so one gather writes `width` characters."""
    text = "".join(f"{i:0{width}d}" for i in range(10**width)).encode("ascii")
    return np.frombuffer(text, dtype=dtype)


@functools.cache
def _digits(width: int) -> np.ndarray:
    """The digit table of ``width`` 1, 2 or 4, built on first use (the 4-digit one takes 2 ms:
    a read command that decodes a few values need not pay it at import, issue #20)."""
    dtypes: dict[int, type[np.generic]] = {1: np.uint8, 2: np.uint16, 4: np.uint32}
    return _digit_table(width, dtypes[width])


Segment = bytes | np.ndarray  # a constant shared by every row, or per-row text from `_digits`


def digit_groups(values: np.ndarray, width: int) -> list[Segment]:
    """Non-negative `values` (int64 or uint64) as `width` zero-padded digits, in table-sized groups
    (4, 2, 1), most significant first."""
    sizes = [4] * (width // 4) + [2] * (width % 4 // 2) + [1] * (width % 2)
    groups: list[Segment] = []
    remaining = width
    for size in sizes:
        remaining -= size
        if remaining:
            head = values // 10**remaining
            values = values - head * 10**remaining
        else:
            head = values
        groups.append(_digits(size)[head])
    return groups


def packed_rows(n: int, segments: list[Segment]) -> np.ndarray:
    """Fixed-width segments side by side in one packed record per row: an (n, width) uint8
    matrix of characters, each segment a single strided numpy store."""
    names: list[str] = []
    formats: list[str | np.dtype] = []
    offsets: list[int] = []
    width = 0
    for i, segment in enumerate(segments):
        names.append(f"f{i}")
        offsets.append(width)
        if isinstance(segment, bytes):
            formats.append(f"S{len(segment)}")
            width += len(segment)
        else:
            formats.append(segment.dtype)
            width += segment.dtype.itemsize
    if n * width >= 2**31:
        raise InvalidArgumentError(f"{n} values of {width} characters do not fit one string array")
    records = np.empty(n, dtype=np.dtype({"names": names, "formats": formats, "offsets": offsets, "itemsize": width}))
    for name, segment in zip(names, segments):
        records[name] = segment
    return records.view(np.uint8).reshape(n, width) if n else np.zeros((0, width), np.uint8)


def render_text(n: int, segments: list[Segment], validity: pa.Buffer | None) -> pa.StringArray:
    """Lay fixed-width segments side by side in one packed record per row and wrap it as strings.

    Every row has the same width, so offsets are an arange: no per-row Python and no
    per-character arithmetic.
    """
    rows = packed_rows(n, segments)
    width = rows.shape[1]
    value_offsets = np.arange(0, (n + 1) * width, width, dtype=np.int32)
    return pa.StringArray.from_buffers(n, pa.py_buffer(value_offsets), pa.py_buffer(rows.reshape(-1)), validity)


#: the digits of any int64's magnitude (2**63 < 10**19)
INT64_DIGITS = 19
_POWERS_OF_TEN = np.array([10**k for k in range(1, INT64_DIGITS + 1)], dtype=np.uint64)


def positional_decimals(unscaled: np.ndarray, scale: int, validity: pa.Buffer | None) -> pa.StringArray:
    """int64 unscaled values with ``0 <= scale < 19`` fraction digits as positional text
    (``-0.05``, ``12.30``): the decimal form of engine/values, built in numpy.

    Every row's digits are rendered right-aligned into one fixed-width character row
    (a sign slot, then as many digits as the largest magnitude has, at least ``scale + 1``,
    with the point before the last ``scale``); each text is the tail of its row that holds
    the integer part's digits (at least one), the point and the fraction, with the sign just
    before. A null's text is empty.
    """
    n = len(unscaled)
    valid = np.ones(n, bool) if validity is None else np.unpackbits(np.frombuffer(validity, np.uint8), count=n, bitorder="little").astype(bool)
    negative = (unscaled < 0) & valid
    magnitude = unscaled.astype(np.uint64)
    np.negative(magnitude, out=magnitude, where=negative)  # wraps: int64 min's magnitude is 2**63
    magnitude[~valid] = 0  # a null slot may hold anything
    digits = np.searchsorted(_POWERS_OF_TEN, magnitude, side="right") + 1  # of each magnitude
    places = max(scale + 1, int(digits.max()) if n else 1)  # the digits of a row
    whole = places - scale  # its integer digits
    width = 1 + places + (1 if scale else 0)
    if n * width >= 2**31:
        raise InvalidArgumentError(f"{n} decimals of up to {width} characters do not fit one string array")
    # the row laid out at once (sign slot, integer digits, point, fraction): no second copy to
    # put the point between the digits (that copy and the compress below were 3/4 of the time)
    if scale:
        power = np.uint64(10**scale)
        head = magnitude // power
        segments: list[Segment] = [b" ", *digit_groups(head, whole), b".", *digit_groups(magnitude - head * power, scale)]
    else:
        segments = [b" ", *digit_groups(magnitude, places)]
    matrix = packed_rows(n, segments)
    lengths = np.maximum(digits - scale, 1) + (1 + scale if scale else 0) + negative
    lengths[~valid] = 0
    sign = np.flatnonzero(negative)
    matrix[sign, width - lengths[sign]] = ord("-")
    offsets = np.zeros(n + 1, np.int32)
    np.cumsum(lengths, out=offsets[1:])
    return pa.StringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(_tails(matrix, lengths, offsets)), validity)


#: rows per run of equal text lengths from which the tails are copied run by run (a slice
#: copy each) rather than picked by one mask over every character
_ROWS_PER_RUN = 32


def _tails(matrix: np.ndarray, lengths: np.ndarray, offsets: np.ndarray) -> np.ndarray:
    """The last ``lengths[i]`` characters of each row of ``matrix``, concatenated.

    Rows of one length side by side (sorted values, as a partition's distinct decimals
    are: their lengths grow with their digits) are one rectangular slice of the matrix,
    copied whole; a mask over every character picks them otherwise."""
    n, width = matrix.shape
    if n == 0:
        return np.zeros(0, np.uint8)
    change = np.flatnonzero(lengths[1:] != lengths[:-1]) + 1
    if len(change) + 1 > max(n // _ROWS_PER_RUN, 1):
        tails = np.arange(width, dtype=np.uint8) >= (width - lengths).astype(np.uint8)[:, None]  # width <= 21
        return np.compress(tails.reshape(-1), matrix.reshape(-1))
    data = np.empty(int(offsets[-1]), np.uint8)
    bounds = [0, *change.tolist(), n]
    for a, b in zip(bounds[:-1], bounds[1:]):
        size = int(lengths[a])
        data[offsets[a] : offsets[b]].reshape(b - a, size)[:] = matrix[a:b, width - size :]
    return data


# --------------------------------------------------------------------------- calendar arithmetic


def _civil_from_days(days: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Proleptic Gregorian (year, month, day) of days since 1970-01-01.

    Howard Hinnant's algorithm, vectorised; exact for every day an int64
    timestamp of any unit can reach, unlike datetime (years 1..9999 only).
    """
    z = days + 719_468
    era = np.floor_divide(z, 146_097)
    doe = z - era * 146_097
    yoe = (doe - doe // 1460 + doe // 36_524 - doe // 146_096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = np.where(mp < 10, mp + 3, mp - 9)
    year = yoe + era * 400 + (month <= 2)
    return year, month, day


def days_from_civil(year: np.ndarray, month: np.ndarray, day: np.ndarray) -> np.ndarray:
    """Inverse of `_civil_from_days`; callers reject impossible dates (2023-02-30) first."""
    y = year - (month <= 2)
    era = np.floor_divide(y, 400)
    yoe = y - era * 400
    mp = (month + 9) % 12
    doy = (153 * mp + 2) // 5 + day - 1
    doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
    return era * 146_097 + doe - 719_468


# Day numbers whose year is 0..9999, the years a four-digit table covers.
_FIRST_4_DIGIT_DAY = -719_528  # 0000-01-01
_LAST_4_DIGIT_DAY = 2_932_896  # 9999-12-31


@functools.lru_cache(maxsize=1)
def _era_table() -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(year within era, month text, day text) of each of the 146097 days of a 400-year era.

    The Gregorian calendar repeats every 400 years, so after one floor division
    a date is three table lookups instead of a dozen array operations.
    """
    year, month, day = _civil_from_days(np.arange(146_097, dtype=np.int64) - 719_468)
    return year, _digits(2)[month], _digits(2)[day]


def format_datetimes(days: np.ndarray, clock: list[Segment], validity: pa.Buffer | None) -> pa.StringArray:
    """`YYYY-MM-DD` followed by the `clock` segments (``T...`` for timestamps, nothing for dates)."""
    z = days + 719_468
    era = z // 146_097
    day_of_era = z - era * 146_097
    year_of_era, month_text, day_text = _era_table()
    n = len(days)
    tail: list[Segment] = [b"-", month_text[day_of_era], b"-", day_text[day_of_era], *clock]
    if n == 0 or (days.min() >= _FIRST_4_DIGIT_DAY and days.max() <= _LAST_4_DIGIT_DAY):
        year = era * 400 + year_of_era[day_of_era]
        return render_text(n, [_digits(4)[year], *tail], validity)
    # Rare path: some year outside 0..9999 needs a sign or a fifth digit.
    year = era * 400 + year_of_era[day_of_era]
    years = pc.ascii_lpad(pc.cast(pa.array(np.abs(year)), pa.string()), width=4, padding="0")
    years = pc.if_else(pa.array(year < 0), pc.binary_join_element_wise("-", years, ""), years)
    return pc.binary_join_element_wise(years, render_text(n, tail, validity), "")


def clock_segments(time_of_day: np.ndarray, digits: int) -> list[Segment]:
    """`HH:MM:SS[.fraction]` segments for values in [0, one day) of a unit with `digits` fraction digits."""
    if digits:
        seconds = time_of_day // 10**digits
        fraction = time_of_day - seconds * 10**digits
    else:
        seconds = time_of_day
    hours = seconds // 3600
    seconds = seconds - hours * 3600
    minutes = seconds // 60
    seconds = seconds - minutes * 60
    segments: list[Segment] = [_digits(2)[hours], b":", _digits(2)[minutes], b":", _digits(2)[seconds]]
    if digits:
        segments += [b".", *digit_groups(fraction, digits)]
    return segments
