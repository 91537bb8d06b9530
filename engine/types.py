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
"""

from __future__ import annotations

import enum

import pyarrow as pa
import pyarrow.types as pt


class HistogramDomain(enum.Enum):
    """The number line a histogrammed column is binned on."""

    INTEGER = "integer"  # exact integer arithmetic on int64/uint64 (temporal types by their storage)
    FLOAT = "float"  # float64 arithmetic (floats, decimals)


def is_string_like(t: pa.DataType) -> bool:
    return pt.is_string(t) or pt.is_large_string(t) or pt.is_string_view(t)


def is_binary_like(t: pa.DataType) -> bool:
    return pt.is_binary(t) or pt.is_large_binary(t) or pt.is_fixed_size_binary(t) or pt.is_binary_view(t)


def is_temporal(t: pa.DataType) -> bool:
    return pt.is_temporal(t)


def is_nested(t: pa.DataType) -> bool:
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
    if pt.is_integer(t) or pt.is_date(t) or pt.is_timestamp(t) or pt.is_time(t) or pt.is_duration(t):
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


#: numpy dtype names of the fixed-width Arrow types numpy holds as they are
NUMPY_DTYPES = {
    pa.int8(): "int8", pa.int16(): "int16", pa.int32(): "int32", pa.int64(): "int64",
    pa.uint8(): "uint8", pa.uint16(): "uint16", pa.uint32(): "uint32", pa.uint64(): "uint64",
    pa.float16(): "float16", pa.float32(): "float32", pa.float64(): "float64",
}  # fmt: skip


def type_name(t: pa.DataType) -> str:
    """The canonical text form of a type, as stored in the `type` column of statistics.parquet."""
    return str(t)
