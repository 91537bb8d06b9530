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

Performance (1M values, CPU ms, best of 7): encode int64 32, string <1, date32 11, timestamp[us] 40 (tz 42; years beyond 0..9999: 110), time64 21, float64 72, float32 65, float16 78, decimal128 110 (185 when an unscaled value exceeds int64), binary(16) 27; decode 1-4x that.

Here the public API and the classification of types; ``encoders`` and ``decoders`` (one per
type family), ``kernels`` (buffer helpers, digit rendering, calendar arithmetic).
"""

from __future__ import annotations

import builtins
from collections.abc import Callable, Sequence

import pyarrow as pa

from engine import arrowcompute as pc
from engine import types as mt
from engine.exceptions import InvalidArgumentError
from engine.types import is_binary_like, is_string_like
from engine.values.decoders import DECODERS
from engine.values.encoders import ENCODERS
from engine.values.kernels import BadText, as_string_array

__all__ = ["decode", "decode_scalar", "encode", "encode_scalar", "encode_scalars", "has_text_form"]

# --------------------------------------------------------------------------- public API


def has_text_form(type: pa.DataType) -> bool:
    """Whether values of `type` can be encoded (dictionaries count by their value type)."""
    if mt.is_dictionary(type):
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
    if mt.is_dictionary(values.type):
        _require_kind(values.type.value_type)
        return encode(values.dictionary_decode())
    if isinstance(values, pa.ExtensionArray):
        return encode(values.storage)
    kind = _require_kind(values.type)
    try:
        return ENCODERS[kind](values)
    except pa.ArrowException as exc:  # e.g. more than 2 GiB of text for one StringArray
        raise InvalidArgumentError(f"cannot encode values of type {values.type}: {exc}") from None


def decode(texts: pa.Array | pa.ChunkedArray, type: pa.DataType) -> pa.Array:
    """Decode texts written by `encode` back to an array of exactly `type`.

    Raises InvalidArgumentError naming `type` and the first text that is not a
    valid form (or does not fit the type), never a bare Arrow error.
    """
    if not isinstance(type, pa.DataType):
        raise InvalidArgumentError(f"decode needs a pyarrow DataType, got {type!r}")
    texts = as_string_array(texts)
    if mt.is_dictionary(type):
        values = decode(texts, type.value_type)
        try:
            return pc.cast(pc.dictionary_encode(values), type)
        except pa.ArrowInvalid as exc:  # e.g. more distinct values than an int8 index can address
            raise InvalidArgumentError(f"cannot decode texts as {type}: {exc}") from None
    if isinstance(type, pa.BaseExtensionType):
        return pa.ExtensionArray.from_storage(type, decode(texts, type.storage_type))
    kind = _require_kind(type)
    decoder = DECODERS[kind]
    try:
        return decoder(texts, type)
    except (pa.ArrowInvalid, BadText) as exc:
        row, reason = _first_bad_row(texts, type, decoder, exc)
        if row is None:
            raise InvalidArgumentError(f"cannot decode texts as {type}: {reason}") from None
        raise InvalidArgumentError(f"cannot decode {_show(row)} as {type}: {reason}") from None


def encode_scalar(value: pa.Scalar) -> str | None:
    """The text form of one value, None for null (same forms as `encode`)."""
    if not isinstance(value, pa.Scalar):
        raise InvalidArgumentError(f"encode_scalar needs a pyarrow Scalar, got {type(value).__name__}")
    if mt.is_dictionary(value.type):
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


def encode_scalars(values: Sequence[pa.Scalar | None]) -> list[str | None]:
    """``encode_scalar`` of each value (None for None), the values of one plain type encoded
    as one array: a wide table's extremes take one encode per type, not one per value."""
    out: list[str | None] = [None] * len(values)
    by_type: dict[pa.DataType, list[int]] = {}
    for i, value in enumerate(values):
        if value is None:
            continue
        if not isinstance(value, pa.Scalar) or mt.is_dictionary(value.type) or isinstance(value, pa.ExtensionScalar):
            out[i] = encode_scalar(value)
        else:
            by_type.setdefault(value.type, []).append(i)
    for t, rows in by_type.items():
        _require_kind(t)
        texts = encode(pa.array([values[i] for i in rows], t)).to_pylist()
        for i, text in zip(rows, texts, strict=True):
            out[i] = text
    return out


def decode_scalar(text: str | None, type: pa.DataType) -> pa.Scalar:
    """Decode one text (None gives a null scalar of `type`)."""
    if text is not None and not isinstance(text, str):
        raise InvalidArgumentError(f"decode_scalar needs a str or None, got {builtins.type(text).__name__}")
    return decode(pa.array([text], pa.string()), type)[0]


# --------------------------------------------------------------------------- classification


def _kind(t: pa.DataType) -> str | None:
    """The encoder family of a type, None when it has no text form."""
    if mt.is_null(t):
        return "null"
    if mt.is_boolean(t):
        return "bool"
    if mt.is_integer(t):
        return "int"
    if mt.is_floating(t):
        return "float16" if mt.is_float16(t) else "float"
    if mt.is_decimal(t):
        return "decimal"
    if mt.is_date32(t):
        return "date32"
    if mt.is_date64(t):
        return "date64"
    if mt.is_time(t):
        return "time"
    if mt.is_timestamp(t):
        return "timestamp"
    if mt.is_duration(t):
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
        except (pa.ArrowInvalid, BadText) as exc:
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
