"""Values as Redis hash fields, and back: fixed-width bytes for numbers, raw bytes for strings.

A Redis field is a byte string. Encoding a whole batch as one blob (plus
offsets for variable-width values) lets a server-side script walk thousands of
fields per round trip, instead of redis-py building one argument per value.
The encoding is the value's storage: little-endian integers (dates and
booleans as their integer storage, decimals as their 16 or 32 bytes), strings
and binaries as their bytes. It is injective per column type, which is all a
hash field needs, and decodes without parsing text.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from engine import types as mt
from engine.exceptions import MetastoreError
from engine.types import integer_storage


class UnsupportedFieldType(MetastoreError):
    """A column type the Redis frequency strategy has no field encoding for."""


@dataclass(frozen=True)
class EncodedBatch:
    """``n`` values as one blob: fixed ``width`` bytes each, or ``offsets`` (n + 1 uint32) into ``data``."""

    n: int
    width: int  # 0: variable width, see offsets
    data: bytes
    offsets: bytes  # little-endian uint32, n + 1 entries; empty when width > 0

    def fields(self) -> list[bytes]:
        """The fields one by one (for tests and small batches)."""
        if self.width:
            return [self.data[i * self.width : (i + 1) * self.width] for i in range(self.n)]
        off = np.frombuffer(self.offsets, dtype="<u4")
        return [self.data[off[i] : off[i + 1]] for i in range(self.n)]


def _storage(t: pa.DataType) -> pa.DataType | None:
    """The fixed-width storage type a column's values are encoded as, or None for variable width."""
    if mt.is_boolean(t):
        return pa.uint8()
    if mt.is_integer(t) or mt.is_date(t):
        return integer_storage(t)
    if mt.is_decimal(t):
        return t
    if mt.is_offset_string(t) or mt.is_offset_binary(t):
        return None
    if mt.is_fixed_size_binary(t):
        return t
    raise UnsupportedFieldType(f"no Redis field encoding for type {t}")


def supported(t: pa.DataType) -> bool:
    try:
        _storage(t)
    except UnsupportedFieldType:
        return False
    return True


def field_width(t: pa.DataType) -> int:
    s = _storage(t)
    if s is None:
        return 0
    if mt.is_decimal(s) or mt.is_fixed_size_binary(s):
        return s.byte_width
    return s.bit_width // 8


def _fixed_bytes(values: pa.Array, width: int) -> bytes:
    """The values' fixed-width storage bytes, contiguous (no nulls)."""
    t = values.type
    if mt.is_boolean(t):
        return values.cast(pa.uint8()).to_numpy(zero_copy_only=False).tobytes()
    buf = values.buffers()[1]
    start = values.offset * width
    return buf.to_pybytes()[start : start + len(values) * width] if buf is not None else b""


def encode(values: pa.Array) -> EncodedBatch:
    """Encode non-null values (nulls are never frequencies: callers drop them)."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if values.null_count:
        raise ValueError("encode() needs non-null values")
    t = values.type
    width = field_width(t)
    n = len(values)
    if width:
        return EncodedBatch(n, width, _fixed_bytes(values, width), b"")
    if mt.is_string(t):
        values = values.cast(pa.binary())
    elif mt.is_large_string(t):
        values = values.cast(pa.large_binary())
    wide = mt.is_large_binary(values.type)
    offs = np.frombuffer(values.buffers()[1], dtype=np.int64 if wide else np.int32)[values.offset : values.offset + n + 1]
    base = int(offs[0]) if n else 0
    end = int(offs[-1]) if n else 0
    data_buf = values.buffers()[2]
    data = data_buf.to_pybytes()[base:end] if data_buf is not None else b""
    if end - base >= 2**32:
        raise UnsupportedFieldType("a batch of more than 4 GiB of string data; use smaller batches")
    return EncodedBatch(n, 0, data, (offs - base).astype("<u4").tobytes())


def decode(fields: list[bytes], t: pa.DataType) -> pa.Array:
    """The values of ``fields`` (as returned by HSCAN) as an Arrow array of type ``t``."""
    width = field_width(t)
    if width:
        for f in fields:
            if len(f) != width:
                raise MetastoreError(f"a Redis field of {len(f)} bytes where {t} needs {width}: wrong key or type")
        blob = b"".join(fields)
        s = _storage(t)
        if mt.is_boolean(t):
            return pa.array(np.frombuffer(blob, dtype=np.uint8).astype(bool), type=pa.bool_())
        if mt.is_decimal(s) or mt.is_fixed_size_binary(s):
            return pa.Array.from_buffers(t, len(fields), [None, pa.py_buffer(blob)])
        arr = pa.Array.from_buffers(s, len(fields), [None, pa.py_buffer(blob)])
        return arr if s == t else arr.view(t)
    binary = pa.large_binary() if (mt.is_large_string(t) or mt.is_large_binary(t)) else pa.binary()
    arr = pa.array(fields, type=binary)
    if mt.is_offset_string(t):
        return arr.cast(t)  # validates UTF-8: a corrupted field is an error, not garbage
    return arr
