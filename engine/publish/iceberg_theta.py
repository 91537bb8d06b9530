"""Theta sketches of a column as Iceberg's Puffin ``apache-datasketches-theta-v1`` blob holds them.

The spec feeds the sketch (DataSketches, default seed 9001) each distinct value *converted
to bytes by Iceberg's single-value serialization*, which DataSketches hashes with
MurmurHash3_x64_128 (seed 9001, ``h1 >> 1``): Trino unions a stored sketch with the values
of an INSERT, so a value must hash to the same 63 bits here as in Trino and Spark:

=========================================  =========================================
Iceberg type                               bytes hashed
=========================================  =========================================
boolean                                    1 byte, 0 or 1
int, date                                  4 bytes little-endian
long, time, timestamp(tz), timestamp_ns    8 bytes little-endian (micros / nanos)
float / double                             4 / 8 bytes little-endian IEEE 754
string                                     UTF-8
uuid                                       16 bytes big-endian
decimal(P, S)                              the unscaled value, big-endian two's
                                           complement, fewest bytes (Java's
                                           ``BigInteger.toByteArray``)
binary, fixed[L]                           the bytes
=========================================  =========================================

An empty value (string or binary) is not hashed: DataSketches' ``update`` of an empty
array rejects it. This differs from engine/stats/sketches.py, whose sketches hash as
DataSketches' Python ``update(int/float/str)`` does (every integer and time as an 8-byte
long, every float as a double): the same only for long and string columns.

Pure: Arrow arrays in, hashes and sketch bytes out (the serializer is
engine.stats.sketches.theta_of_hashes). :func:`value_hashes` hashes every value of a batch
as read, without deduplicating it first (the sketch keeps the smallest distinct hashes;
deduplicating values a batch at a time cost more than hashing them all): fixed-width values
as words (engine.stats.murmur.hash_fixed), the others from their bytes, decimals of up to 18
digits serialized in numpy. :func:`from_store_sketch` takes a column's blob from the store's
own theta sketch where that hashes as Iceberg does (no value read).
"""

from __future__ import annotations

import re
import struct

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine import types as mt
from engine.stats import murmur
from engine.stats.sketches import THETA_EXACT_MAX, THETA_LG_K, THETA_SEED, theta_of_hashes

THETA_BLOB = "apache-datasketches-theta-v1"

_FOUR = {"int", "date"}
_EIGHT = {"long", "time", "timestamp", "timestamptz", "timestamp_ns", "timestamptz_ns"}
_RAW = {"string", "binary", "uuid"}
_DECIMAL = re.compile(r"decimal\(\s*\d+\s*,\s*-?\d+\s*\)")
_FIXED = re.compile(r"fixed\[\s*\d+\s*\]")


def supported(iceberg_type: str) -> bool:
    """Whether values of this Iceberg primitive type (its spec name, ``str()`` of pyiceberg's
    type) have a single-value serialization here."""
    t = iceberg_type.strip().lower()
    return t in _FOUR or t in _EIGHT or t in _RAW or t in {"boolean", "float", "double"} or bool(_DECIMAL.fullmatch(t) or _FIXED.fullmatch(t))


def _fixed_width(words: np.ndarray) -> pa.Array:
    """Each little-endian word of ``words`` as a binary value of its width."""
    width = words.dtype.itemsize
    data = np.ascontiguousarray(words.astype(words.dtype.newbyteorder("<"), copy=False)).view(np.uint8)
    offsets = (np.arange(len(words) + 1, dtype=np.int64) * width).astype(np.int64)
    return pa.Array.from_buffers(pa.large_binary(), len(words), [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def _storage(values: pa.Array) -> pa.Array:
    if mt.is_extension(values.type):
        values = values.storage
    return values


def width(iceberg_type: str) -> int | None:
    """The bytes of a fixed-width type's serialization (1, 4 or 8), None for the others."""
    t = iceberg_type.strip().lower()
    if t == "boolean":
        return 1
    if t in _FOUR or t == "float":
        return 4
    if t in _EIGHT or t == "double":
        return 8
    return None


_WORD = {1: np.int8, 4: np.int32, 8: np.int64}


def words(values: pa.Array | pa.ChunkedArray, iceberg_type: str) -> np.ndarray:
    """The storage integers of a fixed-width column's non-null values (floats: their bits, as
    Java writes them: -0.0 and 0.0 differ, as do NaNs), in the type's width; not deduplicated."""
    n = width(iceberg_type)
    if n is None:
        raise ValueError(f"Iceberg type {iceberg_type!r} is not of fixed width")
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    values = _storage(values)
    if values.null_count:
        values = values.drop_null()
    t = values.type
    if mt.is_timestamp(t) and iceberg_type.strip().lower() in {"timestamp", "timestamptz"} and t.unit != "us":
        values = values.cast(pa.timestamp("us", t.tz))
    if mt.is_timestamp(t) or mt.is_time(t) or mt.is_date(t):
        values = values.view(pa.int64() if t.bit_width == 64 else pa.int32())
    elif mt.is_floating(t):
        x = values.cast(pa.float32() if n == 4 else pa.float64()).to_numpy(zero_copy_only=False)
        return x.view(_WORD[n])
    elif mt.is_boolean(t):
        values = values.cast(pa.int8())
    return values.cast(pa.from_numpy_dtype(_WORD[n])).to_numpy(zero_copy_only=False)


def sorted_unique(a: np.ndarray) -> np.ndarray:
    """np.unique by a sort (numpy 2's hash-based unique is several times slower on integers)."""
    s = np.sort(a)
    return s[np.concatenate(([True], s[1:] != s[:-1]))] if len(s) > 1 else s


def from_words(distinct: np.ndarray, iceberg_type: str) -> pa.Array:
    """Distinct storage integers (:func:`words`) in Iceberg's serialization."""
    n = width(iceberg_type)
    assert n is not None
    return _fixed_width(distinct.astype(_WORD[n], copy=False))


def _unscaled_bytes(values: pa.Array) -> pa.Array:
    """Decimals as Java's ``BigInteger.toByteArray`` of their unscaled values (distinct, non-null)."""
    distinct = pc.unique(values.cast(pa.decimal128(values.type.precision, values.type.scale)))
    words = np.frombuffer(distinct.buffers()[1], dtype="<u8")[2 * distinct.offset : 2 * (distinct.offset + len(distinct))]
    out = []
    for lo, hi in zip(words[0::2].tolist(), words[1::2].tolist(), strict=True):
        n = (hi << 64 | lo) - ((1 << 128) if hi >> 63 else 0)  # the 128-bit two's complement
        size = (n if n >= 0 else ~n).bit_length() // 8 + 1
        out.append(n.to_bytes(size, "big", signed=True))
    return pa.array(out, pa.large_binary())


def serialized(values: pa.Array | pa.ChunkedArray, iceberg_type: str) -> pa.Array:
    """The distinct non-null values of a column in Iceberg's single-value serialization
    (``large_binary``; for floats, distinct by bits)."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    values = _storage(values)
    if values.null_count:
        values = values.drop_null()
    t = iceberg_type.strip().lower()
    if width(t) is not None:
        return from_words(sorted_unique(words(values, t)), t)
    if _DECIMAL.fullmatch(t):
        return _unscaled_bytes(values)
    if t in _RAW or _FIXED.fullmatch(t):
        return pc.unique(values.cast(pa.large_binary()))
    raise ValueError(f"no Iceberg single-value serialization for type {iceberg_type!r}")


def hashes(serial: pa.Array) -> np.ndarray:
    """Theta's hash (MurmurHash3_x64_128, seed 9001, ``h1 >> 1``) of each value's bytes;
    empty values are left out, as DataSketches' ``update`` leaves them."""
    nonempty = pc.greater(pc.binary_length(serial), 0)
    if not pc.all(nonempty).as_py():
        serial = serial.filter(nonempty)
    return murmur.hash_bytes(serial, THETA_SEED)


def _short_decimal_bytes(values: pa.Array) -> pa.Array:
    """Decimals of precision <= 18 (non-null) as Java's ``BigInteger.toByteArray`` of their
    unscaled values, vectorised: each value's big-endian 8 bytes, cut to the fewest that keep
    its sign."""
    raw = np.frombuffer(values.buffers()[1], dtype="<i8")[2 * values.offset : 2 * (values.offset + len(values))]
    n = np.ascontiguousarray(raw[0::2])  # the low words: the whole value at precision <= 18
    magnitude = np.where(n < 0, ~n, n)  # >= 0; fits in k signed bytes iff < 2 ** (8k - 1)
    size = np.ones(len(n), np.int64)
    for k in range(1, 8):
        size += magnitude >= (1 << (8 * k - 1))
    big_endian = n.astype(">i8").view(np.uint8).reshape(-1, 8)
    keep = np.arange(8)[None, :] >= (8 - size)[:, None]
    data = big_endian[keep]
    offsets = np.concatenate([[0], np.cumsum(size)]).astype(np.int64)
    return pa.Array.from_buffers(pa.large_binary(), len(n), [None, pa.py_buffer(offsets), pa.py_buffer(np.ascontiguousarray(data))])


def value_hashes(values: pa.Array | pa.ChunkedArray, iceberg_type: str) -> tuple[np.ndarray, bool]:
    """Theta's hash of every non-null value of a batch in Iceberg's serialization (not
    deduplicated), and whether an empty string or binary was among them (left out: see
    :func:`hashes`)."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    values = _storage(values)
    if values.null_count:
        values = values.drop_null()
    t = iceberg_type.strip().lower()
    n = width(t)
    if n is not None:
        return murmur.hash_fixed(words(values, t).astype(_WORD[n], copy=False), THETA_SEED), False
    if _DECIMAL.fullmatch(t):
        wide = values.cast(pa.decimal128(values.type.precision, values.type.scale))
        if values.type.precision <= 18:
            return murmur.hash_bytes(_short_decimal_bytes(wide), THETA_SEED), False
        # wider: each distinct value serialized once (a Python loop), its hash given to every copy
        distinct = pc.unique(wide)
        hashed = murmur.hash_bytes(_unscaled_bytes(distinct), THETA_SEED)
        return hashed[pc.index_in(wide, distinct).to_numpy(zero_copy_only=False)], False
    if t in _RAW or _FIXED.fullmatch(t):
        if not (mt.is_offset_string(values.type) or mt.is_offset_binary(values.type)):
            values = values.cast(pa.large_binary())
        lengths = pc.binary_length(values)
        empty = not pc.all(pc.greater(lengths, 0)).as_py() if len(values) else False
        if empty:
            values = values.filter(pc.greater(lengths, 0))
        return murmur.hash_bytes(values, THETA_SEED), empty
    raise ValueError(f"no Iceberg single-value serialization for type {iceberg_type!r}")


def theta_blob(serial: pa.Array) -> bytes:
    """The compact theta sketch (DataSketches serial version 3, lg_k 12, seed 9001) of the
    serialized distinct values."""
    return theta_of_hashes(hashes(serial))


def theta_blob_of_hashes(value_hashes: np.ndarray) -> bytes:
    """The same sketch from the values' hashes (duplicates allowed)."""
    return theta_of_hashes(value_hashes)


#: Iceberg type -> the store's column types (engine.types.type_name) whose theta sketch
#: (engine/stats/sketches.py) hashes every value exactly as Iceberg serializes it: an
#: 8-byte little-endian long (integers, microseconds or nanoseconds), or UTF-8
_SAME_HASHES = {
    "long": {"int64"},
    "string": {"string", "large_string", "string_view"},
    "time": {"time64[us]"},
    "timestamp": {"timestamp[us]"},
    "timestamptz": {"timestamp[us, tz=UTC]", "timestamp[us, tz=+00:00]", "timestamp[us, tz=Etc/UTC]"},
    "timestamp_ns": {"timestamp[ns]"},
    "timestamptz_ns": {"timestamp[ns, tz=UTC]", "timestamp[ns, tz=+00:00]", "timestamp[ns, tz=Etc/UTC]"},
}
#: distinct values above THETA_EXACT_MAX the store's count must show for its sketch to be
#: taken when estimating: the sketch hashes the distinct non-empty values, up to one fewer
#: (an empty string) and fewer still if two values shared a hash (about one chance in 10^6
#: for 5,000,000 values); this margin covers both
_MARGIN = 16


def _double_same(row: dict[str, object]) -> bool:
    """A double column whose store sketch hashes as Iceberg does: no NaN (the store leaves NaN
    out, Iceberg hashes its bits) and no zero (the store hashes -0.0 as 0.0)."""
    try:
        nans = int(row.get("nan_count") or 0)  # type: ignore[call-overload]
        lo, hi = float(str(row["min"])), float(str(row["max"]))
    except (KeyError, TypeError, ValueError):
        return False
    return nans == 0 and (lo > 0 or hi < 0)


def from_store_sketch(iceberg_type: str, row: dict[str, object]) -> bytes | None:
    """The theta blob of a column straight from the store's table-level theta sketch (its
    statistics row ``row``: ``type``, ``theta_sketch``, an exact ``distinct_count``) when that
    sketch is byte for byte the one :func:`theta_blob_of_hashes` makes of the column's
    Iceberg hashes; else None (the values must be hashed).

    It is when the store hashes each value as Iceberg serializes it (``_SAME_HASHES``;
    doubles without NaN or zero), and the sketch holds what ``theta_of_hashes`` keeps: every
    hash when exact, or when estimating (more than THETA_EXACT_MAX distinct values) the 2^lg_k
    smallest with theta the next one, which the union of the partitions' sketches keeps
    (each holds every hash of its partition below its theta, itself a hash of the partition;
    the union keeps every hash below the least theta, at least 2^lg_k of them, and trims to
    the 2^lg_k smallest with theta the next). A union of between 2^lg_k and THETA_EXACT_MAX
    distinct values is estimating where ``theta_of_hashes`` is exact: None.
    """
    t = iceberg_type.strip().lower()
    store_type = str(row.get("type") or "")
    if not (store_type in _SAME_HASHES.get(t, ()) or (t == "double" and store_type == "double" and _double_same(row))):
        return None
    blob, distinct = row.get("theta_sketch"), row.get("distinct_count")
    if not row.get("distinct_count_exact") or not isinstance(distinct, int) or not isinstance(blob, bytes | bytearray) or len(blob) < 8:
        return None
    blob = bytes(blob)
    preamble, serial, family, _, _, flags, seed = struct.unpack_from("<BBBBBBH", blob)
    if serial != 3 or family != 3 or flags & 0x1A != 0x1A:  # compact, ordered, read-only, version 3
        return None
    if preamble == 3:
        count, _, theta = struct.unpack_from("<IIQ", blob, 8)
        if count != 1 << THETA_LG_K or len(blob) != 24 + 8 * count or distinct <= THETA_EXACT_MAX + _MARGIN:
            return None
        return blob if theta < (1 << 63) - 1 else None
    # exact: every hash; re-serialized the way theta_of_hashes writes an exact sketch
    hashes: np.ndarray | None = None
    if preamble == 1:
        hashes = np.frombuffer(blob, "<u8", offset=8) if len(blob) == 16 else np.zeros(0, np.uint64)
    elif preamble == 2:
        (count,) = struct.unpack_from("<I", blob, 8)
        if len(blob) == 16 + 8 * count:
            hashes = np.frombuffer(blob, "<u8", count=count, offset=16)
    if hashes is None or len(hashes) > distinct:
        return None
    return theta_of_hashes(hashes.astype(np.uint64))
