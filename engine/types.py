"""How Metastore classifies Arrow types.

One place decides which statistics apply to a column, so the kernels, the file
writers and the lookups never disagree.

- *discrete*: values are compared for equality and counted (frequencies, exact
  distinct counts): strings, binary, booleans, integers, dates, decimals.
- *numeric*: values have a magnitude (sum, mean, stddev): integers, floats, decimals.
- *histogrammed*: values fall on a line that bins can cut: numeric and temporal
  types except booleans.
- *nested*: struct, list and map columns; structs are flattened to their leaf
  fields, lists and maps are marked unsupported.

It is also the one place that asks pyarrow what a type is: engine/, flight_server/
and spark_bridge/ call the predicates below, never ``pyarrow.types`` (a test in
tests/engine/test_type_predicates.py fails on a raw call elsewhere). The one-type
predicates keep pyarrow's names and meaning (``is_string`` is utf8 only); the
families say in their docstring which types they take.
"""

from __future__ import annotations

import enum

import pyarrow as pa
import pyarrow.types as pt


class HistogramDomain(enum.Enum):
    """The number line a histogrammed column is binned on."""

    INTEGER = "integer"  # exact integer arithmetic on int64/uint64 (temporal types by their storage)
    FLOAT = "float"  # float64 arithmetic (floats, decimals)


# One Arrow type (or one type id) each: pyarrow's predicates under their own names.


def is_null(t: pa.DataType) -> bool:
    """The null type."""
    return pt.is_null(t)


def is_boolean(t: pa.DataType) -> bool:
    """bool."""
    return pt.is_boolean(t)


def is_integer(t: pa.DataType) -> bool:
    """Signed and unsigned integers, 8 to 64 bits."""
    return pt.is_integer(t)


def is_signed_integer(t: pa.DataType) -> bool:
    """int8, int16, int32, int64."""
    return pt.is_signed_integer(t)


def is_unsigned_integer(t: pa.DataType) -> bool:
    """uint8, uint16, uint32, uint64."""
    return pt.is_unsigned_integer(t)


def is_uint64(t: pa.DataType) -> bool:
    """uint64 only."""
    return pt.is_uint64(t)


def is_floating(t: pa.DataType) -> bool:
    """float16, float32, float64."""
    return pt.is_floating(t)


def is_float16(t: pa.DataType) -> bool:
    """float16 (half float) only."""
    return pt.is_float16(t)


def is_float32(t: pa.DataType) -> bool:
    """float32 only."""
    return pt.is_float32(t)


def is_float64(t: pa.DataType) -> bool:
    """float64 only."""
    return pt.is_float64(t)


def is_decimal(t: pa.DataType) -> bool:
    """decimal32, decimal64, decimal128, decimal256."""
    return pt.is_decimal(t)


def is_date(t: pa.DataType) -> bool:
    """date32 and date64."""
    return pt.is_date(t)


def is_date32(t: pa.DataType) -> bool:
    """date32 only."""
    return pt.is_date32(t)


def is_date64(t: pa.DataType) -> bool:
    """date64 only."""
    return pt.is_date64(t)


def is_time(t: pa.DataType) -> bool:
    """time32 and time64 (time of day)."""
    return pt.is_time(t)


def is_time32(t: pa.DataType) -> bool:
    """time32 only."""
    return pt.is_time32(t)


def is_time64(t: pa.DataType) -> bool:
    """time64 only."""
    return pt.is_time64(t)


def is_timestamp(t: pa.DataType) -> bool:
    """Timestamps, any unit, with or without a time zone."""
    return pt.is_timestamp(t)


def is_duration(t: pa.DataType) -> bool:
    """Durations, any unit."""
    return pt.is_duration(t)


def is_interval(t: pa.DataType) -> bool:
    """month_day_nano_interval (pyarrow's one interval type)."""
    return pt.is_interval(t)


def is_dictionary(t: pa.DataType) -> bool:
    """Dictionary-encoded types, whatever their value type."""
    return pt.is_dictionary(t)


def is_extension(t: pa.DataType) -> bool:
    """Extension types: Arrow's own (uuid, json, bool8, ...) and ones defined in Python alike."""
    return isinstance(t, pa.BaseExtensionType)


def is_struct(t: pa.DataType) -> bool:
    """Structs."""
    return pt.is_struct(t)


def is_map(t: pa.DataType) -> bool:
    """Maps."""
    return pt.is_map(t)


def is_union(t: pa.DataType) -> bool:
    """Unions, sparse and dense."""
    return pt.is_union(t)


def is_list(t: pa.DataType) -> bool:
    """list only (not large_list, fixed_size_list or the list views)."""
    return pt.is_list(t)


def is_large_list(t: pa.DataType) -> bool:
    """large_list only (not list, fixed_size_list or the list views)."""
    return pt.is_large_list(t)


def is_string(t: pa.DataType) -> bool:
    """utf8 (string) only: not large_string, not string_view."""
    return pt.is_string(t)


def is_large_string(t: pa.DataType) -> bool:
    """large_string only."""
    return pt.is_large_string(t)


def is_string_view(t: pa.DataType) -> bool:
    """string_view only."""
    return pt.is_string_view(t)


def is_binary(t: pa.DataType) -> bool:
    """binary only: not large_binary, fixed_size_binary or binary_view."""
    return pt.is_binary(t)


def is_large_binary(t: pa.DataType) -> bool:
    """large_binary only."""
    return pt.is_large_binary(t)


def is_binary_view(t: pa.DataType) -> bool:
    """binary_view only."""
    return pt.is_binary_view(t)


def is_fixed_size_binary(t: pa.DataType) -> bool:
    """fixed_size_binary (binary(n)) only."""
    return pt.is_fixed_size_binary(t)


# Families of Arrow types.


def is_offset_string(t: pa.DataType) -> bool:
    """string and large_string (strings with an offsets buffer), not string_view."""
    return pt.is_string(t) or pt.is_large_string(t)


def is_offset_binary(t: pa.DataType) -> bool:
    """binary and large_binary (binaries with an offsets buffer), not fixed_size_binary or binary_view."""
    return pt.is_binary(t) or pt.is_large_binary(t)


def is_variable_binary(t: pa.DataType) -> bool:
    """binary, large_binary and binary_view: binaries of any length, not fixed_size_binary."""
    return pt.is_binary(t) or pt.is_large_binary(t) or pt.is_binary_view(t)


def is_list_like(t: pa.DataType) -> bool:
    """list, large_list, fixed_size_list, list_view and large_list_view (not map, not struct)."""
    return pt.is_list(t) or pt.is_large_list(t) or pt.is_fixed_size_list(t) or pt.is_list_view(t) or pt.is_large_list_view(t)


def is_integer_temporal(t: pa.DataType) -> bool:
    """date, time, timestamp and duration: the temporal types held as integer ticks (intervals not)."""
    return pt.is_date(t) or pt.is_time(t) or pt.is_timestamp(t) or pt.is_duration(t)


def is_temporal32(t: pa.DataType) -> bool:
    """date32 and time32: the temporal types held as int32 (the others as int64)."""
    return pt.is_date32(t) or pt.is_time32(t)


def is_string_like(t: pa.DataType) -> bool:
    """string, large_string and string_view."""
    return pt.is_string(t) or pt.is_large_string(t) or pt.is_string_view(t)


def is_binary_like(t: pa.DataType) -> bool:
    """binary, large_binary, fixed_size_binary and binary_view."""
    return pt.is_binary(t) or pt.is_large_binary(t) or pt.is_fixed_size_binary(t) or pt.is_binary_view(t)


def is_temporal(t: pa.DataType) -> bool:
    """date, time, timestamp, duration and month_day_nano_interval (pyarrow's is_temporal)."""
    return pt.is_temporal(t)


def is_nested(t: pa.DataType) -> bool:
    """struct, map, the lists, unions and run_end_encoded (pyarrow's is_nested); dictionaries not."""
    return pt.is_nested(t)


def is_discrete(t: pa.DataType) -> bool:
    """Columns whose frequencies are stored (not floats, not timestamps/times/durations)."""
    return is_string_like(t) or is_binary_like(t) or pt.is_boolean(t) or pt.is_integer(t) or pt.is_date(t) or pt.is_decimal(t)


def is_numeric(t: pa.DataType) -> bool:
    """Columns with sum, mean and standard deviation: integers, floats, decimals."""
    return pt.is_integer(t) or pt.is_floating(t) or pt.is_decimal(t)


def is_native_number(t: pa.DataType) -> bool:
    """Integers and floats: the numbers numpy holds as they are (decimals not)."""
    return pt.is_integer(t) or pt.is_floating(t)


def is_fractional(t: pa.DataType) -> bool:
    """Floats and decimals: the numbers binned, cut and estimated as float64."""
    return pt.is_floating(t) or pt.is_decimal(t)


def is_exact_number(t: pa.DataType) -> bool:
    """Integers and decimals: numbers a float literal fits only when whole (and exact)."""
    return pt.is_integer(t) or pt.is_decimal(t)


def has_length(t: pa.DataType) -> bool:
    """Columns with avg_len and max_len (in bytes for binary, in characters for strings)."""
    return is_string_like(t) or is_binary_like(t)


def is_orderable(t: pa.DataType) -> bool:
    """Columns with min and max."""
    return not (is_nested(t) or pt.is_null(t) or pt.is_interval(t) or pt.is_dictionary(t))


def histogram_domain(t: pa.DataType) -> HistogramDomain | None:
    """The domain a column is binned on, or None if it gets no histogram."""
    if pt.is_integer(t) or is_integer_temporal(t):
        return HistogramDomain.INTEGER
    if is_fractional(t):
        return HistogramDomain.FLOAT
    return None


def has_percentiles(t: pa.DataType) -> bool:
    """Percentiles are computed for histogrammed columns (numbers and time)."""
    return histogram_domain(t) is not None


def integer_storage(t: pa.DataType) -> pa.DataType | None:
    """The integer type whose values are the column's own buffer values, or None.

    Integers are their own storage; dates, times, timestamps and durations are
    int32 or int64 underneath. Kernels that count, sort, bin or hash such columns
    work on this view (numpy, Redis fields, histogram edges) and view the result
    back; each decides for itself which of these types it takes.
    """
    if pt.is_integer(t):
        return t
    if pt.is_date32(t) or pt.is_time32(t):
        return pa.int32()
    if pt.is_date64(t) or pt.is_timestamp(t) or pt.is_time64(t) or pt.is_duration(t):
        return pa.int64()
    return None


def without_dictionary(t: pa.DataType) -> pa.DataType:
    """A dictionary type's value type; any other type as it is."""
    return t.value_type if pt.is_dictionary(t) else t


#: numpy dtype names of the fixed-width Arrow types numpy holds as they are
NUMPY_DTYPES = {
    pa.int8(): "int8", pa.int16(): "int16", pa.int32(): "int32", pa.int64(): "int64",
    pa.uint8(): "uint8", pa.uint16(): "uint16", pa.uint32(): "uint32", pa.uint64(): "uint64",
    pa.float16(): "float16", pa.float32(): "float32", pa.float64(): "float64",
}  # fmt: skip


def type_name(t: pa.DataType) -> str:
    """The canonical text form of a type, as stored in the `type` column of statistics.parquet."""
    return str(t)
