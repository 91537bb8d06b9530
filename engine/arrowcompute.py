"""The Arrow compute kernels the value forms and the lookups call, without importing pyarrow.compute.

Importing ``pyarrow.compute`` wraps every registered kernel (some 300) in a Python
function with a signature and a docstring parsed by numpydoc: 20 ms, a sixth of a
fresh ``metastore show`` (issue #20, start-up). The kernels themselves are reached
through ``pyarrow._compute.call_function``, which *is* ``pyarrow.compute.call_function``:
calling a kernel by name with its options class gives the same result, without the
wrappers. This module does that for the kernels engine/values/, engine/lookup/,
engine/columns.py, engine/stats and engine/measures use, with pyarrow.compute's names and argument
order, so ``from engine import arrowcompute as pc`` reads like the original.

pyarrow's own conveniences call pyarrow.compute too (``Array.cast``, ``Table.take``,
``Array.fill_null``, ...): the read path uses the functions here instead.
pyarrow is pinned (pyproject.toml); tests/engine/test_arrowcompute.py checks every
function here against pyarrow.compute.
"""

from __future__ import annotations

import functools
from typing import Any

import pyarrow as pa

from engine import types as mt

__all__ = [
    "add_checked", "all", "ascii_lpad", "ascii_ltrim", "ascii_rpad", "binary_join_element_wise", "binary_length",
    "byte_buffers", "call_function", "cast", "contiguous", "dictionary_encode", "equal", "extract_regex", "fill_null",
    "if_else", "index", "index_in", "invert", "is_in", "is_nan", "is_valid", "list_value_length", "match_substring",
    "match_substring_regex", "max", "multiply_checked", "or_", "starts_with", "struct_field", "sum", "take",
    "utf8_length", "utf8_slice_codeunits",
]  # fmt: skip


@functools.cache
def _c() -> Any:
    """pyarrow._compute, loaded on the first kernel call (4 ms: a command calling none, such as
    ``metastore tables``, does not load it)."""
    from pyarrow import _compute

    return _compute


def call_function(name: str, args: list[Any], options: Any = None) -> Any:
    """``pc.call_function``: the kernel ``name`` on ``args`` with its options object (or its defaults)."""
    return _c().call_function(name, args, options)


def _call(name: str, *args: Any, options: Any = None) -> Any:
    return _c().call_function(name, list(args), options)


# ----------------------------------------------------------------- conversions


def contiguous(values: pa.Array | pa.ChunkedArray) -> pa.Array:
    """One array of ``values``, without a copy where it is one already.

    ``ChunkedArray.combine_chunks`` copies even a single chunk (0.18 s for 10 million int64;
    a memory-mapped counts file's values copied into fresh memory), and most columns read
    here are one chunk.
    """
    if isinstance(values, pa.Array):
        return values
    if values.num_chunks == 1:
        return values.chunk(0)
    return values.combine_chunks()  # none: an empty array of the type


def cast(arr: Any, target_type: pa.DataType, safe: bool | None = None) -> Any:
    """``pc.cast``: checked unless ``safe=False``."""
    target_type = pa.lib.ensure_type(target_type)
    options = _c().CastOptions.unsafe(target_type) if safe is False else _c().CastOptions.safe(target_type)
    return _call("cast", arr, options=options)


def byte_buffers(values: pa.Array) -> tuple[Any, Any]:
    """(offsets, data) of a string or binary array, as numpy views (no copy).

    ``offsets`` has ``len(values) + 1`` entries (int32, or int64 for the large
    types) and indexes ``data``; a null's bytes are empty.
    """
    import numpy as np

    wide = mt.is_large_string(values.type) or mt.is_large_binary(values.type)
    buffers = values.buffers()
    offsets = np.frombuffer(buffers[1], dtype=np.int64 if wide else np.int32)[values.offset : values.offset + len(values) + 1]
    data = np.frombuffer(buffers[2], dtype=np.uint8) if buffers[2] is not None else np.zeros(0, np.uint8)
    return offsets, data


def dictionary_encode(values: Any) -> Any:
    return _call("dictionary_encode", values)


def fill_null(values: Any, fill_value: Any) -> Any:
    """``pc.fill_null``: a Python value becomes a scalar of the values' type."""
    if not isinstance(fill_value, (pa.Array, pa.ChunkedArray, pa.Scalar)):
        fill_value = pa.scalar(fill_value, type=values.type)
    elif values.type != fill_value.type:
        fill_value = pa.scalar(fill_value.as_py(), type=values.type)
    return _call("coalesce", values, fill_value)


def take(data: Any, indices: Any) -> Any:
    """``pc.take`` (also of a Table or RecordBatch), bounds checked."""
    return _call("take", data, indices, options=_c().TakeOptions(boundscheck=True))


def struct_field(values: Any, indices: Any) -> Any:
    """A field of a struct array (by name, index or path), nulls of the struct included."""
    return _call("struct_field", values, options=_c().StructFieldOptions(indices))


# ----------------------------------------------------------------- comparisons and logic


def equal(x: Any, y: Any) -> Any:
    return _call("equal", x, y)


def or_(x: Any, y: Any) -> Any:
    return _call("or", x, y)


def invert(x: Any) -> Any:
    return _call("invert", x)


def if_else(cond: Any, left: Any, right: Any) -> Any:
    return _call("if_else", cond, left, right)


def is_valid(values: Any) -> Any:
    return _call("is_valid", values)


def all(array: Any, *, skip_nulls: bool = True, min_count: int = 1) -> Any:  # noqa: A001 - pyarrow.compute's name
    return _call("all", array, options=_c().ScalarAggregateOptions(skip_nulls=skip_nulls, min_count=min_count))


def sum(array: Any, *, skip_nulls: bool = True, min_count: int = 1) -> Any:  # noqa: A001 - pyarrow.compute's name
    return _call("sum", array, options=_c().ScalarAggregateOptions(skip_nulls=skip_nulls, min_count=min_count))


def max(array: Any, *, skip_nulls: bool = True, min_count: int = 1) -> Any:  # noqa: A001 - pyarrow.compute's name
    return _call("max", array, options=_c().ScalarAggregateOptions(skip_nulls=skip_nulls, min_count=min_count))


def is_nan(values: Any) -> Any:
    return _call("is_nan", values)


def is_in(values: Any, value_set: Any, *, skip_nulls: bool = False) -> Any:
    return _call("is_in", values, options=_c().SetLookupOptions(value_set, skip_nulls=skip_nulls))


def index_in(values: Any, value_set: Any, *, skip_nulls: bool = False) -> Any:
    return _call("index_in", values, options=_c().SetLookupOptions(value_set, skip_nulls=skip_nulls))


def index(data: Any, value: Any) -> Any:
    """``pc.index`` of a whole array: the first position of ``value``, -1 if absent."""
    if not isinstance(value, pa.Scalar):
        value = pa.scalar(value, type=data.type)
    elif data.type != value.type:
        value = pa.scalar(value.as_py(), type=data.type)
    return _call("index", data, options=_c().IndexOptions(value=value))


# ----------------------------------------------------------------- arithmetic


def add_checked(x: Any, y: Any) -> Any:
    return _call("add_checked", x, y)


def multiply_checked(x: Any, y: Any) -> Any:
    return _call("multiply_checked", x, y)


# ----------------------------------------------------------------- strings and binary


def match_substring(strings: Any, pattern: str, *, ignore_case: bool = False) -> Any:
    return _call("match_substring", strings, options=_c().MatchSubstringOptions(pattern, ignore_case=ignore_case))


def match_substring_regex(strings: Any, pattern: str, *, ignore_case: bool = False) -> Any:
    return _call("match_substring_regex", strings, options=_c().MatchSubstringOptions(pattern, ignore_case=ignore_case))


def starts_with(strings: Any, pattern: str, *, ignore_case: bool = False) -> Any:
    return _call("starts_with", strings, options=_c().MatchSubstringOptions(pattern, ignore_case=ignore_case))


def extract_regex(strings: Any, pattern: str) -> Any:
    return _call("extract_regex", strings, options=_c().ExtractRegexOptions(pattern))


def ascii_lpad(strings: Any, width: int, padding: str = " ") -> Any:
    return _call("ascii_lpad", strings, options=_c().PadOptions(width, padding))


def ascii_rpad(strings: Any, width: int, padding: str = " ") -> Any:
    return _call("ascii_rpad", strings, options=_c().PadOptions(width, padding))


def ascii_ltrim(strings: Any, characters: str) -> Any:
    return _call("ascii_ltrim", strings, options=_c().TrimOptions(characters))


def utf8_slice_codeunits(strings: Any, start: int, stop: int | None = None, step: int = 1) -> Any:
    return _call("utf8_slice_codeunits", strings, options=_c().SliceOptions(start, stop, step))


def binary_join_element_wise(*strings: Any) -> Any:
    """Join each row's strings with the last argument as the separator (a null anywhere: null)."""
    return _call("binary_join_element_wise", *strings)


def utf8_length(strings: Any) -> Any:
    return _call("utf8_length", strings)


def binary_length(strings: Any) -> Any:
    return _call("binary_length", strings)


def list_value_length(lists: Any) -> Any:
    return _call("list_value_length", lists)
