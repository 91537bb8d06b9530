"""The text form of column values, one lossless form per Arrow type.

statistics.parquet keeps `min`, `max` and the percentiles, and frequencies.parquet
keeps `value`, in a single Parquet string column whatever the column's type, so
every value needs a text form that decodes back to exactly the same Arrow value.
The forms below are the contract between the writers, the lookups and any
external reader; docs/VALUE_FORMS.md carries the same table for people who read
the files without this module.

==========================================  ==========================================  ===========================
Arrow type                                  Text form                                   Examples
==========================================  ==========================================  ===========================
null                                        always null                                 (null)
bool                                        ``true`` / ``false``                        ``true``
int8..int64, uint8..uint64                  base-10, ``-`` for negatives                ``-9223372036854775808``
float16, float32, float64                   shortest text that parses back to the same  ``0.1``, ``1.5``, ``1e+20``,
                                            bits *at that width*; ``nan``, ``inf``,     ``1e-7``, ``-0``, ``nan``,
                                            ``-inf``; ``-0`` for negative zero          ``-inf``, ``65500`` (f16)
decimal32/64/128/256(p, s), s > 0           positional, exactly ``s`` fraction digits   ``-0.050`` for (5, 3)
decimal(p, 0)                               base-10 integer                             ``12``
decimal(p, s), s < 0                        positional integer (unscaled + -s zeros)    ``12000`` for 12E+3
date32                                      ``YYYY-MM-DD``                              ``2024-02-29``
date64, whole days                          ``YYYY-MM-DD``                              ``1970-01-02``
date64, not whole days (invalid Arrow)      timestamp[ms] form, kept lossless           ``1970-01-01T00:00:00.001``
time32/time64 (s, ms, us, ns)               ``HH:MM:SS`` + ``.`` and the unit's digits  ``23:59:59.999999`` (us)
timestamp(unit) without zone                ``YYYY-MM-DDTHH:MM:SS`` + unit's digits     ``1970-01-01T00:00:00.000``
timestamp(unit, tz)                         the same, in UTC, with a ``Z`` suffix       ``2024-01-01T12:00:00Z``
duration(unit)                              base-10 count of the type's unit            ``-1500`` for -1.5 s in ms
string, large_string, string_view           the string itself                           ``héllo``
binary, large_binary, binary_view,          lowercase hex, two digits per byte          ``ff00``
fixed_size_binary
dictionary<T>                               encode: the form of T (decoded values)      ``a``
extension<name> (e.g. arrow.uuid)           the form of its storage type                ``00ff...`` (16 bytes)
==========================================  ==========================================  ===========================

Calendar fields: years use the proleptic Gregorian calendar with astronomical
numbering (year 0 is 1 BC), at least four digits, a leading ``-`` for years
before 0 and no sign after 9999 (``-0001-12-31``, ``10000-01-01``). This is the
text numpy's datetime64 parses, and it covers the full int64 range of every
timestamp unit, including int64 min, which numpy itself reserves for NaT.
Fractions always carry the unit's digits (3 ms, 6 us, 9 ns; none for s).

Floats: the digits are the shortest that parse back to the same value at the
column's own width (float32 0.1 is ``0.1``, not float64's 0.10000000149011612;
float16 65504 is ``65500``). They are written positionally when
1e-6 <= |x| < 1e10 and as ``<digits>e<+|-><exponent>`` otherwise (``1e+10``,
``1.25e-7``), with no trailing ``.0`` (``1``, ``-0``): Arrow's shortest-float
cast for float32/float64, and the same digits via a 65536-entry table for float16.

Decoding accepts the forms above and a few harmless variants: fewer fraction
digits for times and timestamps (the missing digits are zeros), any width of
decimal fraction that fits the scale without rounding, upper-case hex, and
leading zeros in integers, and whatever else Arrow's float parser reads
(``1e3``, ``Infinity``). A zone-aware timestamp must end in ``Z`` and a naive
one must not, so one kind is never silently read as the other. Anything else
raises InvalidArgumentError naming the type and the offending text.

Not lossless, by design: NaN sign and payload bits (every NaN is written
``nan`` and reads back as the canonical quiet NaN). Refused: time values outside
[00:00:00, 24:00:00) (invalid per the Arrow spec, there is no clock form for
them), nested, interval and run-end-encoded types; callers check
``engine.types.is_orderable`` / ``is_discrete`` first.

Performance (1M values, CPU ms, best of 7): encode int64 32, string <1, date32 11, timestamp[us] 40 (tz 42; years beyond 0..9999: 110), time64 21, float64 72, float32 65, float16 78, decimal128 185, binary(16) 27; decode 1-4x that.
"""

from __future__ import annotations

import builtins
import functools
from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pyarrow.types as pt

from engine import arrowcompute as pc
from engine.exceptions import InvalidArgumentError
from engine.types import is_binary_like, is_string_like

__all__ = ["decode", "decode_scalar", "encode", "encode_scalar", "has_text_form"]

_UNIT_DIGITS = {"s": 0, "ms": 3, "us": 6, "ns": 9}
_SECONDS_PER_DAY = 86_400
_MS_PER_DAY = 86_400_000
# Longest year accepted when decoding: 12 digits covers timestamp[s]'s
# +-292,277,026,596 years and keeps every intermediate day count well inside int64.
_MAX_YEAR_DIGITS = 12

_HEX_PAIRS = np.frombuffer(bytes(range(256)).hex().encode("ascii"), dtype=np.uint16)  # byte -> its two hex digits
_UNHEX = np.full(256, 255, dtype=np.uint8)  # hex digit -> its value; 255 marks bytes that are not hex digits
for _digit in "0123456789abcdefABCDEF":
    _UNHEX[ord(_digit)] = int(_digit, 16)
del _digit
# Same storage width, scale 0: a view that shows a decimal's unscaled integer.
_UNSCALED = {32: pa.decimal32(9, 0), 64: pa.decimal64(18, 0), 128: pa.decimal128(38, 0), 256: pa.decimal256(76, 0)}


class _BadText(Exception):
    """A text failed to decode; raised inside decoders, turned into InvalidArgumentError by `decode`.

    Decoders only need to notice that *some* row is bad; `decode` bisects to the
    first bad row so the user sees the actual text.
    """


# --------------------------------------------------------------------------- public API


def has_text_form(type: pa.DataType) -> bool:
    """Whether values of `type` can be encoded (dictionaries count by their value type)."""
    if pt.is_dictionary(type):
        return has_text_form(type.value_type)
    if isinstance(type, pa.BaseExtensionType):
        return has_text_form(type.storage_type)
    return _kind(type) is not None


def encode(values: pa.Array | pa.ChunkedArray) -> pa.StringArray:
    """Encode every value to its documented text form; nulls stay null.

    A dictionary array is encoded by its dictionary-decoded values, so the text
    is the same whether or not the writer happened to dictionary-encode a column.
    A ChunkedArray gives one StringArray so callers never juggle chunk boundaries.
    """
    if isinstance(values, pa.ChunkedArray):
        if values.num_chunks == 0:
            _require_kind(values.type)
            return pa.array([], pa.string())
        return pa.concat_arrays([encode(chunk) for chunk in values.chunks])
    if not isinstance(values, pa.Array):
        raise InvalidArgumentError(f"encode needs a pyarrow Array, got {type(values).__name__}")
    if pt.is_dictionary(values.type):
        _require_kind(values.type.value_type)
        return encode(values.dictionary_decode())
    if isinstance(values, pa.ExtensionArray):
        return encode(values.storage)
    kind = _require_kind(values.type)
    try:
        return _ENCODERS[kind](values)
    except pa.ArrowException as exc:  # e.g. more than 2 GiB of text for one StringArray
        raise InvalidArgumentError(f"cannot encode values of type {values.type}: {exc}") from None


def decode(texts: pa.Array | pa.ChunkedArray, type: pa.DataType) -> pa.Array:
    """Decode texts written by `encode` back to an array of exactly `type`.

    Raises InvalidArgumentError naming `type` and the first text that is not a
    valid form (or does not fit the type), never a bare Arrow error.
    """
    if not isinstance(type, pa.DataType):
        raise InvalidArgumentError(f"decode needs a pyarrow DataType, got {type!r}")
    texts = _as_string_array(texts)
    if pt.is_dictionary(type):
        values = decode(texts, type.value_type)
        try:
            return pc.cast(pc.dictionary_encode(values), type)
        except pa.ArrowInvalid as exc:  # e.g. more distinct values than an int8 index can address
            raise InvalidArgumentError(f"cannot decode texts as {type}: {exc}") from None
    if isinstance(type, pa.BaseExtensionType):
        return pa.ExtensionArray.from_storage(type, decode(texts, type.storage_type))
    kind = _require_kind(type)
    decoder = _DECODERS[kind]
    try:
        return decoder(texts, type)
    except (pa.ArrowInvalid, _BadText) as exc:
        row, reason = _first_bad_row(texts, type, decoder, exc)
        if row is None:
            raise InvalidArgumentError(f"cannot decode texts as {type}: {reason}") from None
        raise InvalidArgumentError(f"cannot decode {_show(row)} as {type}: {reason}") from None


def encode_scalar(value: pa.Scalar) -> str | None:
    """The text form of one value, None for null (same forms as `encode`)."""
    if not isinstance(value, pa.Scalar):
        raise InvalidArgumentError(f"encode_scalar needs a pyarrow Scalar, got {type(value).__name__}")
    if pt.is_dictionary(value.type):
        _require_kind(value.type.value_type)
        if not value.is_valid:
            return None
        value = value.value
    if isinstance(value, pa.ExtensionScalar):
        value = value.value if value.is_valid else pa.scalar(None, value.type.storage_type)
    _require_kind(value.type)
    if not value.is_valid:
        return None
    return encode(pa.array([value], value.type))[0].as_py()


def decode_scalar(text: str | None, type: pa.DataType) -> pa.Scalar:
    """Decode one text (None gives a null scalar of `type`)."""
    if text is not None and not isinstance(text, str):
        raise InvalidArgumentError(f"decode_scalar needs a str or None, got {builtins.type(text).__name__}")
    return decode(pa.array([text], pa.string()), type)[0]


# --------------------------------------------------------------------------- classification


def _kind(t: pa.DataType) -> str | None:
    """The encoder family of a type, None when it has no text form."""
    if pt.is_null(t):
        return "null"
    if pt.is_boolean(t):
        return "bool"
    if pt.is_integer(t):
        return "int"
    if pt.is_floating(t):
        return "float16" if pt.is_float16(t) else "float"
    if pt.is_decimal(t):
        return "decimal"
    if pt.is_date32(t):
        return "date32"
    if pt.is_date64(t):
        return "date64"
    if pt.is_time(t):
        return "time"
    if pt.is_timestamp(t):
        return "timestamp"
    if pt.is_duration(t):
        return "duration"
    if is_string_like(t):
        return "string"
    if is_binary_like(t):
        return "binary"
    return None


def _require_kind(t: pa.DataType) -> str:
    kind = _kind(t)
    if kind is None:
        raise InvalidArgumentError(
            f"values of type {t} have no text form (nested, interval and run-end-encoded "
            "types are not stored as text; check engine.types.is_orderable first)"
        )
    return kind


# --------------------------------------------------------------------------- buffer helpers


def _as_string_array(texts: pa.Array | pa.ChunkedArray) -> pa.StringArray:
    """Normalise decode input so decoders see one plain StringArray."""
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks() if texts.num_chunks else pa.array([], texts.type)
    if not isinstance(texts, pa.Array):
        raise InvalidArgumentError(f"decode needs a pyarrow string Array, got {builtins.type(texts).__name__}")
    if pt.is_dictionary(texts.type):
        texts = texts.dictionary_decode()
    if not (is_string_like(texts.type) or pt.is_null(texts.type)):
        raise InvalidArgumentError(f"decode needs string texts, got an array of {texts.type}")
    if not pt.is_string(texts.type):
        texts = pc.cast(texts, pa.string())
    return texts


def _validity(arr: pa.Array) -> pa.Buffer | None:
    """A fresh offset-0 validity bitmap, so new arrays can be built over any slice."""
    if arr.null_count == 0:
        return None
    return pc.is_valid(arr).buffers()[1]


def _valid_mask(arr: pa.Array) -> np.ndarray:
    if arr.null_count == 0:
        return np.ones(len(arr), dtype=bool)
    return pc.is_valid(arr).to_numpy(zero_copy_only=False)


def _physical(arr: pa.Array, dtype: type[np.generic]) -> np.ndarray:
    """Zero-copy numpy view of a fixed-width array's values buffer, honouring the slice offset."""
    n = len(arr)
    buf = arr.buffers()[1]
    if buf is None or n == 0:
        return np.zeros(n, dtype=dtype)
    return np.frombuffer(buf, dtype=dtype)[arr.offset : arr.offset + n]


def _fixed_values(arr: pa.Array, dtype: type[np.generic]) -> np.ndarray:
    """The physical values of a fixed-width array as int64, null slots zeroed.

    Null slots may hold any garbage; zeroing them keeps range checks and fast
    paths from tripping over values nobody will see.
    """
    values = _physical(arr, dtype).astype(np.int64)
    if arr.null_count:
        values[~_valid_mask(arr)] = 0
    return values


def _from_values(type: pa.DataType, values: np.ndarray, validity: pa.Buffer | None) -> pa.Array:
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
    return _digit_table(width, {1: np.uint8, 2: np.uint16, 4: np.uint32}[width])


Segment = bytes | np.ndarray  # a constant shared by every row, or per-row text from `_digits`


def _digit_groups(values: np.ndarray, width: int) -> list[Segment]:
    """Non-negative `values` as `width` zero-padded digits, in table-sized groups (4, 2, 1)."""
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


def _render(n: int, segments: list[Segment], validity: pa.Buffer | None) -> pa.StringArray:
    """Lay fixed-width segments side by side in one packed record per row and wrap it as strings.

    Every row has the same width, so offsets are an arange and each segment is a
    single strided numpy store: no per-row Python and no per-character arithmetic.
    """
    names, formats, offsets = [], [], []
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
    value_offsets = np.arange(0, (n + 1) * width, width, dtype=np.int32)
    data = records.view(np.uint8) if n else np.zeros(0, np.uint8)
    return pa.StringArray.from_buffers(n, pa.py_buffer(value_offsets), pa.py_buffer(data), validity)


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


def _days_from_civil(year: np.ndarray, month: np.ndarray, day: np.ndarray) -> np.ndarray:
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


def _format_datetimes(days: np.ndarray, clock: list[Segment], validity: pa.Buffer | None) -> pa.StringArray:
    """`YYYY-MM-DD` followed by the `clock` segments (``T...`` for timestamps, nothing for dates)."""
    z = days + 719_468
    era = z // 146_097
    day_of_era = z - era * 146_097
    year_of_era, month_text, day_text = _era_table()
    n = len(days)
    tail: list[Segment] = [b"-", month_text[day_of_era], b"-", day_text[day_of_era], *clock]
    if n == 0 or (days.min() >= _FIRST_4_DIGIT_DAY and days.max() <= _LAST_4_DIGIT_DAY):
        year = era * 400 + year_of_era[day_of_era]
        return _render(n, [_digits(4)[year], *tail], validity)
    # Rare path: some year outside 0..9999 needs a sign or a fifth digit.
    year = era * 400 + year_of_era[day_of_era]
    years = pc.ascii_lpad(pc.cast(pa.array(np.abs(year)), pa.string()), width=4, padding="0")
    years = pc.if_else(pa.array(year < 0), pc.binary_join_element_wise("-", years, ""), years)
    return pc.binary_join_element_wise(years, _render(n, tail, validity), "")


def _clock(time_of_day: np.ndarray, digits: int) -> list[Segment]:
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
        segments += [b".", *_digit_groups(fraction, digits)]
    return segments


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
    wide = _from_values(pa.float64(), _half_table()[_physical(values, np.uint16)], _validity(values))
    return pc.cast(wide, pa.string())


def _encode_decimal(values: pa.Array) -> pa.StringArray:
    """Positional text from the unscaled integer, with the point placed by string kernels.

    Arrow's own decimal cast switches to exponent notation (``1E-37``, ``1.2E+4``)
    for small values and negative scales; the unscaled integer never does.
    """
    unscaled = pc.cast(values.view(_UNSCALED[values.type.bit_width]), pa.string())
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
    return _format_datetimes(_fixed_values(values, np.int32), [], _validity(values))


def _encode_date64(values: pa.Array) -> pa.StringArray:
    """Whole days as dates; values the Arrow spec forbids (not whole days) keep their milliseconds."""
    ms = _fixed_values(values, np.int64)
    days = ms // _MS_PER_DAY
    rest = ms - days * _MS_PER_DAY
    validity = _validity(values)
    dates = _format_datetimes(days, [], validity)
    if not rest.any():
        return dates
    exact = _format_datetimes(days, [b"T", *_clock(rest, 3)], validity)
    return pc.if_else(pa.array(rest == 0), dates, exact)


def _encode_time(values: pa.Array) -> pa.StringArray:
    digits = _UNIT_DIGITS[values.type.unit]
    ticks = _fixed_values(values, np.int32 if pt.is_time32(values.type) else np.int64)
    per_day = _SECONDS_PER_DAY * 10**digits
    outside = (ticks < 0) | (ticks >= per_day)
    if outside.any():
        bad = int(ticks[np.argmax(outside)])
        raise InvalidArgumentError(f"cannot encode {values.type} value {bad}: times must lie in [00:00:00, 24:00:00)")
    return _render(len(ticks), _clock(ticks, digits), _validity(values))


def _encode_timestamp(values: pa.Array) -> pa.StringArray:
    """Split into (day, time of day) with floor division so negative instants and int64 min work."""
    digits = _UNIT_DIGITS[values.type.unit]
    ticks = _fixed_values(values, np.int64)
    per_day = _SECONDS_PER_DAY * 10**digits
    days = ticks // per_day
    clock = [b"T", *_clock(ticks - days * per_day, digits)]
    if values.type.tz is not None:
        clock.append(b"Z")
    return _format_datetimes(days, clock, _validity(values))


def _encode_duration(values: pa.Array) -> pa.StringArray:
    return pc.cast(values.view(pa.int64()), pa.string())


def _encode_binary(values: pa.Array) -> pa.StringArray:
    """Hex through a 256-entry table over the whole data buffer: no Python per value."""
    if not pt.is_binary(values.type):
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
    chars = _HEX_PAIRS[data].view(np.uint8)
    new_offsets = ((offsets - start) * 2).astype(np.int32)
    return pa.StringArray.from_buffers(n, pa.py_buffer(new_offsets), pa.py_buffer(chars), _validity(values))


_ENCODERS: dict[str, Callable[[pa.Array], pa.StringArray]] = {
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


# --------------------------------------------------------------------------- decoders


def _all_true(mask: pa.Array) -> bool:
    """True when no row is False (nulls are null texts, which are always fine; empty is fine)."""
    return pc.all(mask, skip_nulls=True, min_count=0).as_py() is not False


def _require_pattern(texts: pa.StringArray, pattern: str, expected: str) -> None:
    """Reject any non-null text not matching `pattern`; Arrow's casts alone accept too much (``0x10``)."""
    if len(texts) == texts.null_count:
        return
    if not _all_true(pc.match_substring_regex(texts, pattern)):
        raise _BadText(f"expected {expected}")


def _decode_null(texts: pa.StringArray, type: pa.DataType) -> pa.Array:
    if texts.null_count != len(texts):
        raise _BadText("a null column has only null values")
    return pa.nulls(len(texts))


def _decode_bool(texts: pa.StringArray, type: pa.DataType) -> pa.Array:
    # Arrow's cast also takes 1/0/TRUE/True; only the documented spelling is valid.
    is_true = pc.equal(texts, "true")
    known = pc.or_(is_true, pc.equal(texts, "false"))
    if not _all_true(known):
        raise _BadText("expected true or false")
    return is_true


def _require_base_10(texts: pa.StringArray, expected: str) -> None:
    """Arrow's integer parse takes [-]digits and also 0x hex; hex is the one form to refuse.

    A substring test is several times cheaper than a full regex over a million texts.
    """
    if not _all_true(pc.invert(pc.match_substring(texts, "x", ignore_case=True))):
        raise _BadText(f"expected {expected}")


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


_DATE_PATTERN = rf"(?P<year>-?[0-9]{{4,{_MAX_YEAR_DIGITS}}})-(?P<month>[0-9]{{2}})-(?P<day>[0-9]{{2}})"

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
        raise _BadText(f"expected {expected}")
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
        raise _BadText("month or day out of range")
    leap = (year % 4 == 0) & ((year % 100 != 0) | (year % 400 == 0))
    if (day > _DAYS_IN_MONTH[month] + (leap & (month == 2))).any():
        raise _BadText("no such day in the calendar")
    return _days_from_civil(year, month, day)


def _parse_time_of_day(fields: dict[str, np.ndarray], digits: int) -> np.ndarray:
    hour, minute, second = fields["hour"], fields["minute"], fields["second"]
    if ((hour > 23) | (minute > 59) | (second > 59)).any():
        raise _BadText("hour, minute or second out of range")
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
        raise _BadText("outside the int64 range of the type's unit") from None
    return ticks.to_numpy()


def _decode_date32(texts: pa.StringArray, type: pa.DataType) -> pa.Array:
    days = _parse_days(_temporal_fields(texts, "YYYY-mm-dd", _DATE_PATTERN, "YYYY-MM-DD", 0))
    if ((days < -(2**31)) | (days >= 2**31)).any():
        raise _BadText("date out of the date32 range")
    return _from_values(type, days.astype(np.int32), _validity(texts))


def _decode_date64(texts: pa.StringArray, type: pa.DataType) -> pa.Array:
    # Dates, or timestamp[ms] texts for the non-whole-day values encode keeps.
    pattern = rf"{_DATE_PATTERN}(?:T{_clock_pattern(3)})?"
    fields = _temporal_fields(texts, "YYYY-mm-dd", pattern, "YYYY-MM-DD (or YYYY-MM-DDTHH:MM:SS.fff)", 3)
    days = _parse_days(fields)
    time_of_day = _parse_time_of_day(fields, 3) if "hour" in fields else np.zeros(len(texts), dtype=np.int64)
    return _from_values(type, _combine(days, time_of_day, _MS_PER_DAY), _validity(texts))


def _decode_time(texts: pa.StringArray, type: pa.DataType) -> pa.Array:
    digits = _UNIT_DIGITS[type.unit]
    layout = _clock_layout(digits)
    fields = _temporal_fields(texts, layout, _clock_pattern(digits), layout.replace("N", "M"), digits)
    ticks = _parse_time_of_day(fields, digits)
    return _from_values(type, ticks.astype(np.int32 if pt.is_time32(type) else np.int64), _validity(texts))


def _decode_timestamp(texts: pa.StringArray, type: pa.DataType) -> pa.Array:
    digits = _UNIT_DIGITS[type.unit]
    zone = "Z" if type.tz is not None else ""
    layout = f"YYYY-mm-ddT{_clock_layout(digits)}{zone}"
    expected = layout.replace("m", "M").replace("N", "M").replace("d", "D") + (" (UTC)" if zone else "")
    pattern = f"{_DATE_PATTERN}T{_clock_pattern(digits)}{zone}"
    fields = _temporal_fields(texts, layout, pattern, expected, digits)
    ticks = _combine(_parse_days(fields), _parse_time_of_day(fields, digits), _SECONDS_PER_DAY * 10**digits)
    return _from_values(type, ticks, _validity(texts))


def _decode_duration(texts: pa.StringArray, type: pa.DataType) -> pa.Array:
    _require_base_10(texts, f"a base-10 count of {type.unit}")
    return pc.cast(texts, pa.int64()).view(type)


def _decode_string(texts: pa.StringArray, type: pa.DataType) -> pa.Array:
    return texts if pt.is_string(type) else pc.cast(texts, type)


def _decode_binary(texts: pa.StringArray, type: pa.DataType) -> pa.Array:
    validity = _validity(texts)
    if texts.null_count:
        texts = pc.fill_null(texts, "")  # null slots may hold any bytes; make them empty
    n = len(texts)
    if n == 0:
        return pa.array([], type)
    _, offsets_buf, data_buf = texts.buffers()
    offsets = np.frombuffer(offsets_buf, dtype=np.int32)[texts.offset : texts.offset + n + 1]
    start, end = int(offsets[0]), int(offsets[-1])
    data = np.frombuffer(data_buf, dtype=np.uint8)[start:end] if data_buf is not None else np.zeros(0, np.uint8)
    nibbles = _UNHEX[data]
    if (np.diff(offsets) % 2).any() or (nibbles > 15).any():
        raise _BadText("expected an even number of hex digits")
    pairs = nibbles.reshape(-1, 2)
    raw = (pairs[:, 0] << 4) | pairs[:, 1]
    new_offsets = ((offsets - start) // 2).astype(np.int32)
    binary = pa.Array.from_buffers(pa.binary(), n, [validity, pa.py_buffer(new_offsets), pa.py_buffer(raw)])
    if pt.is_fixed_size_binary(type):
        lengths = pc.binary_length(binary)
        if not _all_true(pc.equal(lengths, type.byte_width)):
            raise _BadText(f"expected exactly {type.byte_width} bytes ({2 * type.byte_width} hex digits)")
    return binary if pt.is_binary(type) else pc.cast(binary, type)


_DECODERS: dict[str, Callable[[pa.StringArray, pa.DataType], pa.Array]] = {
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


# --------------------------------------------------------------------------- error reporting


def _first_bad_row(
    texts: pa.StringArray,
    type: pa.DataType,
    decoder: Callable[[pa.StringArray, pa.DataType], pa.Array],
    error: Exception,
) -> tuple[str | None, str]:
    """Bisect to the first text the decoder rejects, so the message shows that text.

    Decoders check whole arrays at once; every failure is a property of a single
    row, so halving keeps the total extra work to about one more decode.
    """

    def fails(start: int, length: int) -> Exception | None:
        try:
            decoder(texts.slice(start, length), type)
        except (pa.ArrowInvalid, _BadText) as exc:
            return exc
        return None

    lo, hi = 0, len(texts)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if fails(lo, mid - lo) is not None:
            hi = mid
        else:
            lo = mid
    single = fails(lo, 1) if hi > lo else None
    if single is None:
        return None, str(error)
    return texts[lo].as_py(), str(single)


def _show(text: str) -> str:
    """The bad text for an error message, cut short so a megabyte string cannot flood a log."""
    return repr(text) if len(text) <= 200 else repr(text[:200]) + f"... ({len(text)} characters)"
