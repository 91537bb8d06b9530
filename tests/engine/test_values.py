"""engine.values: every supported Arrow type has one text form that decodes back exactly.

Property tests draw arbitrary arrays (extremes, nulls, NaNs, subnormals, slices)
per type and require decode(encode(a)) to give back the same values and type;
example tests pin the exact text so the documented forms cannot drift.
"""

from __future__ import annotations

import decimal
import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.exceptions import InvalidArgumentError, MetastoreError
from engine.values import decode, decode_scalar, encode, encode_scalar, encode_scalars, has_text_form
from engine.values.kernels import digit_groups

INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
UNIT_DIGITS = {"s": 0, "ms": 3, "us": 6, "ns": 9}
EXACT = decimal.Context(prec=200)  # the default 28 digits would round 38- and 76-digit decimals
PROPERTY = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# --------------------------------------------------------------------------- strategies per type

INT_TYPES = [pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint16(), pa.uint32(), pa.uint64()]
FLOAT_TYPES = [pa.float16(), pa.float32(), pa.float64()]
DECIMAL_TYPES = [
    pa.decimal32(9, 0),
    pa.decimal32(9, 4),
    pa.decimal32(9, 9),
    pa.decimal64(18, 2),
    pa.decimal64(18, 18),
    pa.decimal128(1, 0),
    pa.decimal128(5, 3),
    pa.decimal128(38, 0),
    pa.decimal128(38, 10),
    pa.decimal128(38, 37),
    pa.decimal128(38, 38),
    pa.decimal128(5, -3),
    pa.decimal256(76, 0),
    pa.decimal256(76, 38),
    pa.decimal256(76, 76),
    pa.decimal256(40, -10),
]
TIMESTAMP_TYPES = [pa.timestamp(u, tz) for u in UNIT_DIGITS for tz in (None, "UTC", "America/New_York")]
TIME_TYPES = [pa.time32("s"), pa.time32("ms"), pa.time64("us"), pa.time64("ns")]
DURATION_TYPES = [pa.duration(u) for u in UNIT_DIGITS]
STRING_TYPES = [pa.string(), pa.large_string(), pa.string_view()]
BINARY_TYPES = [pa.binary(), pa.large_binary(), pa.binary_view(), pa.binary(1), pa.binary(16)]


def ints_of(t: pa.DataType) -> st.SearchStrategy[int]:
    if pa.types.is_signed_integer(t):
        lo, hi = -(2 ** (t.bit_width - 1)), 2 ** (t.bit_width - 1) - 1
    else:
        lo, hi = 0, 2**t.bit_width - 1
    return st.one_of(st.sampled_from([lo, hi, 0, -1 if lo else 1]), st.integers(lo, hi))


def with_nulls(values: st.SearchStrategy) -> st.SearchStrategy[list]:
    return st.lists(st.one_of(st.none(), values), max_size=12)


@st.composite
def int_arrays(draw: st.DrawFn, t: pa.DataType) -> pa.Array:
    return pa.array(draw(with_nulls(ints_of(t))), t)


@st.composite
def float_arrays(draw: st.DrawFn, t: pa.DataType) -> pa.Array:
    width = t.bit_width
    np_type = {16: np.float16, 32: np.float32, 64: np.float64}[width]
    bits_type = {16: np.uint16, 32: np.uint32, 64: np.uint64}[width]
    finfo = np.finfo(np_type)
    specials = [
        np.nan,
        np.inf,
        -np.inf,
        -0.0,
        0.0,
        float(finfo.max),
        -float(finfo.max),
        float(finfo.tiny),
        float(finfo.smallest_subnormal),
        -float(finfo.smallest_subnormal),
        0.1,
        1.5,
    ]
    values = draw(st.lists(st.one_of(st.sampled_from(specials), st.floats(width=width)), max_size=12))
    raw = np.array(values, dtype=np_type)
    # Arbitrary bit patterns reach every NaN payload and subnormal.
    patterns = draw(st.lists(st.integers(0, 2**width - 1), max_size=4))
    raw = np.concatenate([raw, np.array(patterns, dtype=bits_type).view(np_type)])
    mask = np.array(draw(st.lists(st.booleans(), min_size=len(raw), max_size=len(raw))), dtype=bool)
    return pa.array(raw, t, mask=mask)


@st.composite
def decimal_arrays(draw: st.DrawFn, t: pa.DataType) -> pa.Array:
    largest = 10**t.precision - 1
    unscaled = st.one_of(st.sampled_from([largest, -largest, 0, 1, -1]), st.integers(-largest, largest))
    values = draw(with_nulls(unscaled))
    return pa.array([None if v is None else decimal.Decimal(v).scaleb(-t.scale, EXACT) for v in values], t)


def _view_ints(values: list[int | None], storage: pa.DataType, t: pa.DataType) -> pa.Array:
    return pa.array(values, storage).view(t)


@st.composite
def timestamp_arrays(draw: st.DrawFn, t: pa.DataType) -> pa.Array:
    ticks = st.one_of(st.sampled_from([INT64_MIN, INT64_MAX, INT64_MIN + 1, 0, -1, 1]), st.integers(INT64_MIN, INT64_MAX))
    return _view_ints(draw(with_nulls(ticks)), pa.int64(), t)


@st.composite
def time_arrays(draw: st.DrawFn, t: pa.DataType) -> pa.Array:
    per_day = 86_400 * 10 ** UNIT_DIGITS[t.unit]
    ticks = st.one_of(st.sampled_from([0, per_day - 1]), st.integers(0, per_day - 1))
    storage = pa.int32() if t.bit_width == 32 else pa.int64()
    return _view_ints(draw(with_nulls(ticks)), storage, t)


@st.composite
def date32_arrays(draw: st.DrawFn) -> pa.Array:
    days = st.one_of(st.sampled_from([-(2**31), 2**31 - 1, 0, -719_529, 2_932_897]), st.integers(-(2**31), 2**31 - 1))
    return _view_ints(draw(with_nulls(days)), pa.int32(), pa.date32())


@st.composite
def date64_arrays(draw: st.DrawFn) -> pa.Array:
    ms_per_day = 86_400_000
    whole = st.integers(INT64_MIN // ms_per_day + 1, INT64_MAX // ms_per_day).map(lambda d: d * ms_per_day)
    # Not whole days is invalid per the Arrow spec but must survive too.
    ms = st.one_of(whole, st.integers(INT64_MIN, INT64_MAX), st.sampled_from([INT64_MIN, INT64_MAX, 1, -1]))
    return _view_ints(draw(with_nulls(ms)), pa.int64(), pa.date64())


@st.composite
def duration_arrays(draw: st.DrawFn, t: pa.DataType) -> pa.Array:
    return _view_ints(draw(with_nulls(ints_of(pa.int64()))), pa.int64(), t)


@st.composite
def string_arrays(draw: st.DrawFn, t: pa.DataType) -> pa.Array:
    return pa.array(draw(with_nulls(st.text())), t)


@st.composite
def binary_arrays(draw: st.DrawFn, t: pa.DataType) -> pa.Array:
    if pa.types.is_fixed_size_binary(t):
        values = st.binary(min_size=t.byte_width, max_size=t.byte_width)
    else:
        values = st.one_of(st.binary(), st.sampled_from([b"\xff\x00", b"\x80", b""]))
    return pa.array(draw(with_nulls(values)), t)


@st.composite
def bool_arrays(draw: st.DrawFn) -> pa.Array:
    return pa.array(draw(with_nulls(st.booleans())), pa.bool_())


def strategy_for(t: pa.DataType) -> st.SearchStrategy[pa.Array]:
    if pa.types.is_integer(t):
        return int_arrays(t)
    if pa.types.is_floating(t):
        return float_arrays(t)
    if pa.types.is_decimal(t):
        return decimal_arrays(t)
    if pa.types.is_timestamp(t):
        return timestamp_arrays(t)
    if pa.types.is_time(t):
        return time_arrays(t)
    if pa.types.is_date32(t):
        return date32_arrays()
    if pa.types.is_date64(t):
        return date64_arrays()
    if pa.types.is_duration(t):
        return duration_arrays(t)
    if t in STRING_TYPES:
        return string_arrays(t)
    if t in BINARY_TYPES:
        return binary_arrays(t)
    if pa.types.is_boolean(t):
        return bool_arrays()
    if pa.types.is_null(t):
        return st.integers(0, 5).map(pa.nulls)
    raise AssertionError(t)


ALL_TYPES = [
    pa.null(),
    pa.bool_(),
    *INT_TYPES,
    *FLOAT_TYPES,
    *DECIMAL_TYPES,
    pa.date32(),
    pa.date64(),
    *TIME_TYPES,
    *TIMESTAMP_TYPES,
    *DURATION_TYPES,
    *STRING_TYPES,
    *BINARY_TYPES,
]


# --------------------------------------------------------------------------- comparison


def assert_same(actual: pa.Array, expected: pa.Array) -> None:
    """Equal values and type; floats compared by bit pattern, NaNs only as NaNs (payload is not kept)."""
    assert actual.type == expected.type
    assert len(actual) == len(expected)
    if not pa.types.is_floating(expected.type):
        assert actual.equals(expected), (actual, expected)
        return
    assert pc.is_valid(actual).equals(pc.is_valid(expected))
    nan_actual = pc.fill_null(pc.is_nan(actual), False)
    assert nan_actual.equals(pc.fill_null(pc.is_nan(expected), False))
    keep = pc.and_(pc.is_valid(expected), pc.invert(nan_actual))
    bits = {16: pa.uint16(), 32: pa.uint32(), 64: pa.uint64()}[expected.type.bit_width]
    assert actual.filter(keep).view(bits).equals(expected.filter(keep).view(bits))


def check_round_trip(array: pa.Array) -> pa.StringArray:
    texts = encode(array)
    assert texts.type == pa.string()
    assert len(texts) == len(array)
    assert pc.is_null(texts).equals(pc.is_null(array))
    assert_same(decode(texts, array.type), array)
    if len(array) > 1:  # slices (non-zero offsets) encode and decode the same rows
        assert encode(array.slice(1)).equals(texts.slice(1))
        assert_same(decode(texts.slice(1), array.type), array.slice(1))
    for i in range(min(len(array), 3)):
        text = encode_scalar(array[i])
        assert text == texts[i].as_py()
        back = decode_scalar(text, array.type)
        assert isinstance(back, pa.Scalar)
        assert_same(pa.array([back], array.type), array.slice(i, 1))
    return texts


# --------------------------------------------------------------------------- round trips


@pytest.mark.parametrize("t", ALL_TYPES, ids=str)
@PROPERTY
@given(data=st.data())
def test_round_trip(t: pa.DataType, data: st.DataObject) -> None:
    check_round_trip(data.draw(strategy_for(t)))


@pytest.mark.parametrize("t", ALL_TYPES, ids=str)
def test_extremes_round_trip(t: pa.DataType) -> None:
    """The boundary values hypothesis may or may not draw, all in one array per type."""
    if pa.types.is_integer(t):
        info = np.iinfo(t.to_pandas_dtype())
        array = pa.array([int(info.min), int(info.max), 0, None], t)
    elif pa.types.is_floating(t):
        finfo = np.finfo(t.to_pandas_dtype())
        raw = [np.nan, np.inf, -np.inf, -0.0, finfo.max, -finfo.max, finfo.tiny, finfo.smallest_subnormal, 0.1]
        array = pa.array(np.array(raw, t.to_pandas_dtype()), t)
    elif pa.types.is_decimal(t):
        largest = decimal.Decimal(10**t.precision - 1).scaleb(-t.scale, EXACT)
        array = pa.array([largest, largest.copy_negate(), decimal.Decimal(0), decimal.Decimal(1).scaleb(-t.scale, EXACT), None], t)
    elif pa.types.is_timestamp(t) or pa.types.is_duration(t) or pa.types.is_date64(t):
        array = _view_ints([INT64_MIN, INT64_MAX, 0, -1, None], pa.int64(), t)
    elif pa.types.is_date32(t):
        array = _view_ints([-(2**31), 2**31 - 1, 0, -1, None], pa.int32(), t)
    elif pa.types.is_time(t):
        per_day = 86_400 * 10 ** UNIT_DIGITS[t.unit]
        array = _view_ints([0, per_day - 1, None], pa.int32() if t.bit_width == 32 else pa.int64(), t)
    elif t in STRING_TYPES:
        array = pa.array(["", "é日本\U0001f600", "\x00", "x" * 1_000_000, None], t)
    elif t in BINARY_TYPES:
        width = t.byte_width if pa.types.is_fixed_size_binary(t) else 3
        array = pa.array([b"\x00" * width, b"\xff" * width, bytes(range(width)), None], t)
    elif pa.types.is_boolean(t):
        array = pa.array([True, False, None])
    else:
        array = pa.nulls(3)
    check_round_trip(array)


@st.composite
def int64_edge_decimals(draw: st.DrawFn, t: pa.DataType) -> pa.Array:
    """Unscaled values about int64's ends (where the numpy rendering hands over to Arrow's
    string kernels) and of every length, within the type's precision."""
    largest = 10**t.precision - 1
    near = st.integers(-(2**63) - 3, -(2**63) + 3) | st.integers(2**63 - 4, 2**63 + 2)
    lengths = st.integers(0, t.precision).flatmap(lambda k: st.integers(-(10**k) + 1, 10**k - 1))
    unscaled = (near | lengths).filter(lambda v: -largest <= v <= largest)
    values = draw(with_nulls(unscaled))
    return pa.array([None if v is None else decimal.Decimal(v).scaleb(-t.scale, EXACT) for v in values], t)


@pytest.mark.parametrize("t", DECIMAL_TYPES, ids=str)
@PROPERTY
@given(data=st.data())
def test_decimal_text_is_pythons_positional_form(t: pa.DataType, data: st.DataObject) -> None:
    """An independent oracle for the decimal form: Python's Decimal written positionally
    (``format(d, "f")``), for values that fit int64 (rendered in numpy) and those that do not."""
    array = data.draw(st.one_of(decimal_arrays(t), int64_edge_decimals(t)))
    start = data.draw(st.integers(0, len(array)))
    for part in (array, array.slice(start)):
        assert encode(part).to_pylist() == [None if v is None else format(v, "f") for v in part.to_pylist()]


@PROPERTY
@given(values=st.lists(st.integers(0, 2**63), max_size=20), width=st.integers(19, 20))
def test_digit_groups_are_zero_padded_digits(values: list[int], width: int) -> None:
    groups = digit_groups(np.array(values, np.uint64), width)
    rows = [b"".join(g if isinstance(g, bytes) else g[i].tobytes() for g in groups).decode() for i in range(len(values))]
    assert rows == [f"{v:0{width}d}" for v in values]


def test_encode_scalars_equal_encode_scalar() -> None:
    """One array a type, in any order, with nulls, None, dictionaries and extension values."""
    d = decimal.Decimal
    arrays = [
        pa.array([1, -5, None], pa.int64()),
        pa.array([d("1.25"), d("-0.05"), None], pa.decimal128(10, 2)),
        pa.array([0.1, float("nan"), None], pa.float64()),
        pa.array([0.1, None], pa.float32()),
        pa.array([86_400_001, None], pa.int64()).view(pa.date64()),
        pa.array([INT64_MIN, 0, None], pa.int64()).view(pa.timestamp("ns", tz="UTC")),
        pa.array(["x", None, "x"]).dictionary_encode(),
        pa.ExtensionArray.from_storage(pa.uuid(), pa.array([bytes(range(16)), None], pa.binary(16))),
        pa.array([b"\x00\xff", None], pa.binary()),
        pa.nulls(2),
    ]
    scalars: list[pa.Scalar | None] = [a[i] for a in arrays for i in range(len(a))]
    scalars = scalars[::2] + [None] + scalars[1::2]
    assert encode_scalars(scalars) == [None if s is None else encode_scalar(s) for s in scalars]
    assert encode_scalars([]) == []
    with pytest.raises(InvalidArgumentError):
        encode_scalars([pa.scalar([1], pa.list_(pa.int64()))])


def test_float16_every_bit_pattern_round_trips_with_shortest_text() -> None:
    halves = np.arange(2**16, dtype=np.uint16).view(np.float16)
    array = pa.array(halves, pa.float16())
    texts = check_round_trip(array)
    finite = np.isfinite(halves)
    ours = np.array(texts.to_pylist(), dtype=object)[finite]
    # numpy prints the shortest float16 digits; ours must carry the same value.
    assert np.array_equal(ours.astype(np.float64), halves[finite].astype(str).astype(np.float64))


@PROPERTY
@given(st.lists(st.floats(width=32, allow_nan=False, allow_infinity=False), min_size=1, max_size=20))
def test_float32_text_is_shortest_for_float32(values: list[float]) -> None:
    """float32 0.1 is written "0.1" (float32's shortest), not float64's 0.10000000149011612."""
    raw = np.array(values, np.float32)
    texts = encode(pa.array(raw)).to_pylist()
    for value, text in zip(raw, texts):
        shortest = np.format_float_scientific(value, unique=True)
        assert float(text) == float(shortest)
        assert np.float32(text) == value or (value == 0 and float(text) == 0)
        assert len(re.sub(r"e.*|[-.]", "", text).strip("0")) <= len(re.sub(r"e.*|[-.]", "", shortest).strip("0"))


def _numpy_datetime_text(ticks: int, unit: str) -> str:
    """numpy's text with the year rewritten to our four-digit signed form (numpy prints -1 as -001)."""
    text = np.datetime_as_string(np.datetime64(ticks, unit), unit=unit)
    year, rest = re.match(r"^(-?\d+)(-.*)$", text).groups()
    year_number = int(year)
    return (f"-{-year_number:04d}" if year_number < 0 else f"{year_number:04d}") + rest


@pytest.mark.parametrize("unit", list(UNIT_DIGITS))
@PROPERTY
@given(ticks=st.lists(st.integers(INT64_MIN + 1, INT64_MAX), min_size=1, max_size=10))
def test_timestamps_agree_with_numpy(unit: str, ticks: list[int]) -> None:
    """numpy datetime64 is exact over the whole int64 range (except int64 min, its NaT)."""
    texts = encode(pa.array(ticks, pa.timestamp(unit))).to_pylist()
    assert texts == [_numpy_datetime_text(t, unit) for t in ticks]
    assert [int(np.datetime64(text, unit).astype(np.int64)) for text in texts] == ticks
    zoned = encode(pa.array(ticks, pa.timestamp(unit, "Asia/Tokyo"))).to_pylist()
    assert zoned == [text + "Z" for text in texts]


@PROPERTY
@given(days=st.lists(st.integers(-(2**31), 2**31 - 1), min_size=1, max_size=10))
def test_dates_agree_with_numpy(days: list[int]) -> None:
    texts = encode(pa.array(days, pa.int32()).view(pa.date32())).to_pylist()
    assert texts == [_numpy_datetime_text(d, "D") for d in days]


def test_wide_and_narrow_years_in_one_array() -> None:
    """Mixing four-digit years with signed or five-digit ones takes the slow path for the whole array."""
    array = pa.array([0, -62_167_219_200 - 86_400, 253_402_300_800, None, 1], pa.timestamp("s"))
    texts = check_round_trip(array)
    assert texts.to_pylist() == [
        "1970-01-01T00:00:00",
        "-0001-12-31T00:00:00",
        "10000-01-01T00:00:00",
        None,
        "1970-01-01T00:00:01",
    ]


@pytest.mark.parametrize("t", [pa.int64(), pa.string(), pa.date32(), pa.timestamp("ms", "UTC"), pa.binary()], ids=str)
def test_chunked_arrays(t: pa.DataType) -> None:
    chunks = {
        pa.int64(): [[1, None], [], [3]],
        pa.string(): [["a", None], [], ["c"]],
        pa.date32(): [[0, None], [], [2]],
        pa.timestamp("ms", "UTC"): [[0, None], [], [2]],
        pa.binary(): [[b"a", None], [], [b"c"]],
    }[t]
    chunked = pa.chunked_array([pa.array(c, t) for c in chunks], t)
    assert encode(chunked).equals(encode(chunked.combine_chunks()))
    assert encode(pa.chunked_array([], t)).equals(pa.array([], pa.string()))
    assert_same(decode(pa.chunked_array([encode(chunked)]), t), chunked.combine_chunks())


def test_dictionary_arrays_encode_their_values() -> None:
    values = pa.array(["b", "a", None, "b"])
    dictionary = values.dictionary_encode()
    assert encode(dictionary).equals(encode(values))
    assert encode(pa.chunked_array([dictionary, pa.array(["z"]).dictionary_encode()])).to_pylist() == ["b", "a", None, "b", "z"]
    assert encode_scalar(dictionary[0]) == "b"
    assert encode_scalar(dictionary[2]) is None
    decoded = decode(encode(dictionary), pa.dictionary(pa.int8(), pa.string()))
    assert decoded.type == pa.dictionary(pa.int8(), pa.string())
    assert decoded.dictionary_decode().equals(values)
    assert has_text_form(dictionary.type)


def test_decode_accepts_other_string_containers() -> None:
    for texts in (pa.array(["1", None], pa.large_string()), pa.array(["1", None], pa.string_view()), pa.array(["1", None]).dictionary_encode()):
        assert decode(texts, pa.int8()).equals(pa.array([1, None], pa.int8()))
    assert decode(pa.nulls(2), pa.int8()).equals(pa.array([None, None], pa.int8()))


# --------------------------------------------------------------------------- exact texts

D = decimal.Decimal
EXAMPLES = [
    (pa.array([True, False, None]), ["true", "false", None]),
    (pa.array([INT64_MIN, INT64_MAX], pa.int64()), ["-9223372036854775808", "9223372036854775807"]),
    (pa.array([2**64 - 1], pa.uint64()), ["18446744073709551615"]),
    (pa.array([1.5], pa.float32()), ["1.5"]),
    (pa.array(np.array([0.1], np.float32)), ["0.1"]),
    (
        pa.array([0.1, 1.0, 1e20, 1e-7, -0.0, float("nan"), float("inf"), -float("inf"), 5e-324]),
        ["0.1", "1", "1e+20", "1e-7", "-0", "nan", "inf", "-inf", "5e-324"],
    ),
    (pa.array(np.array([0.1, 65504, -0.0], np.float16)), ["0.1", "65500", "-0"]),
    (pa.array([D("-0.050"), D("12.345"), D(0)], pa.decimal128(5, 3)), ["-0.050", "12.345", "0.000"]),
    (pa.array([D("1E-37")], pa.decimal128(38, 37)), ["0.0000000000000000000000000000000000001"]),
    (pa.array([D("12E+3"), D(0)], pa.decimal128(5, -3)), ["12000", "0"]),
    (pa.array([D("-" + "9" * 76)], pa.decimal256(76, 0)), ["-" + "9" * 76]),
    (pa.array([D("1.5")], pa.decimal32(5, 2)), ["1.50"]),
    (pa.array([0, 19_782, -719_529, 2_932_897], pa.int32()).view(pa.date32()), ["1970-01-01", "2024-02-29", "-0001-12-31", "10000-01-01"]),
    (pa.array([86_400_000, 1], pa.date64()), ["1970-01-02", "1970-01-01T00:00:00.001"]),
    (pa.array([45_296], pa.time32("s")), ["12:34:56"]),
    (pa.array([45_296_789], pa.time32("ms")), ["12:34:56.789"]),
    (pa.array([1], pa.time64("us")), ["00:00:00.000001"]),
    (pa.array([86_399_999_999_999], pa.time64("ns")), ["23:59:59.999999999"]),
    (pa.array([0, -1], pa.timestamp("ms")), ["1970-01-01T00:00:00.000", "1969-12-31T23:59:59.999"]),
    (pa.array([1_704_110_400], pa.timestamp("s", "Europe/Paris")), ["2024-01-01T12:00:00Z"]),
    (pa.array([INT64_MIN, INT64_MAX], pa.timestamp("ns")), ["1677-09-21T00:12:43.145224192", "2262-04-11T23:47:16.854775807"]),
    (pa.array([INT64_MIN, INT64_MAX], pa.timestamp("s", "UTC")), ["-292277022657-01-27T08:29:52Z", "292277026596-12-04T15:30:07Z"]),
    (pa.array([-1500], pa.duration("ms")), ["-1500"]),
    (pa.array(["héllo", ""], pa.large_string()), ["héllo", ""]),
    (pa.array([b"\xff\x00", b""], pa.binary()), ["ff00", ""]),
    (pa.array([b"\xab\xcd"], pa.binary(2)), ["abcd"]),
    (pa.nulls(2), [None, None]),
]


@pytest.mark.parametrize(("array", "expected"), EXAMPLES, ids=lambda v: str(v.type) if isinstance(v, pa.Array) else None)
def test_exact_text(array: pa.Array, expected: list[str | None]) -> None:
    assert encode(array).to_pylist() == expected
    assert_same(decode(pa.array(expected, pa.string()), array.type), array)


@pytest.mark.parametrize(
    ("text", "t", "expected"),
    [
        ("2020-01-01T00:00:00.5", pa.timestamp("ms"), 1_577_836_800_500),  # fewer fraction digits
        ("12:00:00", pa.time64("us"), 43_200_000_000),
        ("1.5", pa.decimal128(5, 2), D("1.50")),
        ("1.500", pa.decimal128(5, 2), D("1.50")),
        ("FF", pa.binary(), b"\xff"),
        ("1e3", pa.float64(), 1000.0),
        ("2020-01-01T00:00:00.000", pa.date64(), 1_577_836_800_000),
    ],
)
def test_decode_variants(text: str, t: pa.DataType, expected: object) -> None:
    value = decode_scalar(text, t)
    assert value.type == t
    got = value.cast(pa.int64()).as_py() if pa.types.is_temporal(t) else value.as_py()
    assert got == expected


def test_null_scalars() -> None:
    assert encode_scalar(pa.scalar(None, pa.int64())) is None
    assert encode_scalar(pa.scalar(None)) is None
    assert decode_scalar(None, pa.timestamp("ns", "UTC")).equals(pa.scalar(None, pa.timestamp("ns", "UTC")))


# --------------------------------------------------------------------------- errors


def test_decode_error_names_type_and_text() -> None:
    with pytest.raises(InvalidArgumentError) as info:
        decode(pa.array(["1", None, "abc", "2"]), pa.int64())
    assert "int64" in str(info.value)
    assert "'abc'" in str(info.value)
    assert isinstance(info.value, MetastoreError)


@pytest.mark.parametrize(
    ("text", "t"),
    [
        ("abc", pa.int64()),
        ("0x10", pa.int64()),
        ("+5", pa.int64()),
        (" 5", pa.int64()),
        ("1.0", pa.int64()),
        ("9223372036854775808", pa.int64()),
        ("300", pa.uint8()),
        ("-1", pa.uint64()),
        ("TRUE", pa.bool_()),
        ("1", pa.bool_()),
        ("one", pa.float64()),
        ("1.505", pa.decimal128(5, 2)),
        ("1e2", pa.decimal128(5, 2)),
        ("123456", pa.decimal128(5, 2)),
        ("1" + "0" * 76, pa.decimal256(76, 0)),
        ("12345", pa.decimal128(5, -3)),
        ("2023-02-30", pa.date32()),
        ("2023-13-01", pa.date32()),
        ("2023-1-1", pa.date32()),
        ("9999999-01-01", pa.date32()),
        ("2020-01-01T00:00:00.0001", pa.date64()),
        ("24:00:00", pa.time32("s")),
        ("12:00:00.5", pa.time32("s")),
        ("12:00:00.1234", pa.time32("ms")),
        ("2020-01-01 00:00:00", pa.timestamp("s")),
        ("2020-01-01T00:00:00Z", pa.timestamp("s")),
        ("2020-01-01T00:00:00", pa.timestamp("s", "UTC")),
        ("2020-01-01T00:00:00+01:00", pa.timestamp("s", "UTC")),
        ("2263-01-01T00:00:00.000000000", pa.timestamp("ns")),
        ("1677-09-21T00:12:43.145224191", pa.timestamp("ns")),
        ("1500ms", pa.duration("ms")),
        ("abc", pa.binary()),
        ("f", pa.binary()),
        ("ff", pa.binary(2)),
        ("x", pa.null()),
    ],
)
def test_bad_text_raises(text: str, t: pa.DataType) -> None:
    with pytest.raises(InvalidArgumentError) as info:
        decode(pa.array([None, text]), t)
    assert str(t) in str(info.value)
    assert repr(text) in str(info.value)


def test_long_bad_text_is_shortened_in_message() -> None:
    with pytest.raises(InvalidArgumentError) as info:
        decode(pa.array(["x" * 100_000]), pa.int64())
    assert len(str(info.value)) < 400


@pytest.mark.parametrize(
    "array",
    [
        pa.array([[1]]),
        pa.array([{"a": 1}]),
        pa.array([pa.MonthDayNano([1, 2, 3])], pa.month_day_nano_interval()),
        pa.array([[("k", 1)]], pa.map_(pa.string(), pa.int8())),
    ],
    ids=str,
)
def test_unsupported_types_raise(array: pa.Array) -> None:
    assert not has_text_form(array.type)
    with pytest.raises(InvalidArgumentError, match=str(array.type).split("<")[0]):
        encode(array)
    with pytest.raises(InvalidArgumentError):
        encode_scalar(array[0])
    with pytest.raises(InvalidArgumentError):
        decode(pa.array(["x"]), array.type)


def test_out_of_range_time_is_refused() -> None:
    with pytest.raises(InvalidArgumentError, match="time32"):
        encode(pa.array([86_400], pa.time32("s")))
    with pytest.raises(InvalidArgumentError, match="-1"):
        encode(pa.array([-1], pa.time64("us")))
    # Garbage behind a null slot is not a value and must not be refused.
    hidden = pa.Array.from_buffers(pa.time32("s"), 1, [pa.array([False]).buffers()[1], pa.array([-5], pa.int32()).buffers()[1]])
    assert encode(hidden).to_pylist() == [None]


def test_wrong_argument_kinds() -> None:
    with pytest.raises(InvalidArgumentError):
        encode([1, 2])  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        decode(pa.array([1]), pa.int64())
    with pytest.raises(InvalidArgumentError):
        decode_scalar(1, pa.int64())  # type: ignore[arg-type]
    with pytest.raises(InvalidArgumentError):
        encode_scalar(1)  # type: ignore[arg-type]


@pytest.mark.parametrize("scale", [0, 2, 9, 18])
@pytest.mark.parametrize("nulls", [False, True])
def test_sorted_decimal_text_is_pythons_positional_form(scale: int, nulls: bool) -> None:
    """Sorted decimals (a partition's distinct values, encoded for theta and the frequency rows)
    lay rows of one text length side by side, whose texts are copied a run at a time: the
    oracle is Python's Decimal written positionally, as for any order."""
    from engine.values.kernels import positional_decimals

    rng = np.random.default_rng(scale)
    for high in (10, 10**7, 10**18):
        unscaled = np.sort(rng.integers(-high // 3, high, 5_000))
        valid = rng.random(len(unscaled)) > 0.05 if nulls else np.ones(len(unscaled), bool)
        validity = pa.array(valid).buffers()[1] if nulls else None
        text = positional_decimals(unscaled, scale, validity)
        want = [format(decimal.Decimal(int(v)).scaleb(-scale, EXACT), "f") if ok else None for v, ok in zip(unscaled.tolist(), valid)]
        assert text.to_pylist() == want
