"""Exact value counts of float columns by a compiled hash table over their bits.

An exact quantile query on a float column with few distinct values (prices,
scores rounded to a grid) counts each partition's values into (value, count)
runs instead of sorting them. Arrow's ``value_counts`` did that in 17.7 CPU-ms
for 2.5 M doubles (8 partitions of the bench table's ``price``), a third of the
query's task; this open-addressing table keyed by the values' bits, reading
Arrow's buffers and validity bits in place, takes about half of that (numbers
in docs/PERFORMANCE.md, "Quantiles").

Keys are bit patterns: -0.0 and 0.0, and NaNs with different payloads, are
different keys here. The caller sorts the distinct values and merges equal
neighbours (engine.stats.ranks), which folds them as IEEE equality has it.
Compiled with numba and cached on disk, like engine.stats.murmur.
"""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
from numba import njit

from engine import types as mt

#: table slots without an estimate of the distinct values (doubles when half full)
_INITIAL_SLOTS = 1 << 12


# Every index below is uint64: numba turns int64-uint64 arithmetic into float64,
# which cost a quarter of the kernel's time.
_ONE = np.uint64(1)


@njit(inline="always")
def _slot(k, shift):
    """Fibonacci hashing: the top bits of the product depend on every bit of the key."""
    return ((k ^ (k >> np.uint64(29))) * np.uint64(0x9E3779B97F4A7C15)) >> shift


@njit(cache=True, nogil=True)
def _insert(bits, validity, offset, start, table, shift, size):
    """Count ``bits[start:]`` (skipping invalid rows when ``validity`` has bytes) into
    ``table`` (slot i: key at 2i, count at 2i+1, so a probe touches one cache line);
    stops after the row that fills it to half. Returns (next row, size)."""
    mask = np.uint64(len(table) // 2 - 1)
    limit = len(table) >> 2
    check = len(validity) > 0
    sh = np.uint64(shift)
    for i in range(start, len(bits)):
        if check:
            j = np.uint64(offset + i)
            if not (validity[j >> np.uint64(3)] >> (j & np.uint64(7))) & np.uint8(1):
                continue
        k = np.uint64(bits[i])
        slot = _slot(k, sh)
        while True:
            at = slot + slot
            c = table[at + _ONE]
            if c == 0:
                table[at] = k
                table[at + _ONE] = _ONE
                size += 1
                if size >= limit:
                    return i + 1, size
                break
            if table[at] == k:
                table[at + _ONE] = c + _ONE
                break
            slot = (slot + _ONE) & mask
    return len(bits), size


@njit(cache=True, nogil=True)
def _rehash(old, table, shift):
    mask = np.uint64(len(table) // 2 - 1)
    sh = np.uint64(shift)
    for i in range(0, len(old), 2):
        if old[i + 1] == 0:
            continue
        slot = _slot(old[i], sh)
        while table[slot + slot + _ONE] != 0:
            slot = (slot + _ONE) & mask
        table[slot + slot] = old[i]
        table[slot + slot + _ONE] = old[i + 1]


@njit(cache=True, nogil=True)
def _compact(table, keys, counts):
    at = 0
    for i in range(0, len(table), 2):
        if table[i + 1] != 0:
            keys[at] = table[i]
            counts[at] = table[i + 1]
            at += 1


def _shift(table: np.ndarray) -> int:
    return 64 - (len(table) // 2).bit_length() + 1


def supports(t: pa.DataType) -> bool:
    return mt.is_float32(t) or mt.is_float64(t)


def count(values: pa.Array | pa.ChunkedArray, expected: float | None = None) -> tuple[np.ndarray, np.ndarray]:
    """(distinct values, their counts) of the valid values of a float32/float64 array, in no order.

    ``expected``: an estimate of the distinct values; the table starts with three
    slots for each, sparing the rehashes of growing (~1.3 ms of 10 on 2.5 M values
    with 35 k distinct)."""
    t = values.type
    if not supports(t):
        raise TypeError(f"floatcount takes float32 or float64 values, not {t}")
    word = np.uint32 if mt.is_float32(t) else np.uint64
    slots = _INITIAL_SLOTS
    if expected is not None and math.isfinite(expected):
        slots = max(slots, 1 << max(0, int(3 * expected) - 1).bit_length())  # load <= 1/3 at the estimate
    table = np.zeros(2 * slots, np.uint64)
    size = 0
    no_validity = np.zeros(0, np.uint8)
    for chunk in values.chunks if isinstance(values, pa.ChunkedArray) else [values]:
        if len(chunk) == 0 or chunk.null_count == len(chunk):
            continue
        validity_buf, data_buf = chunk.buffers()[:2]
        bits = np.frombuffer(data_buf, dtype=word)[chunk.offset : chunk.offset + len(chunk)]
        validity = np.frombuffer(validity_buf, dtype=np.uint8) if chunk.null_count and validity_buf is not None else no_validity
        start = 0
        while start < len(bits):
            start, size = _insert(bits, validity, chunk.offset, start, table, _shift(table), size)
            if size >= len(table) >> 2:
                bigger = np.zeros(2 * len(table), np.uint64)
                _rehash(table, bigger, _shift(bigger))
                table = bigger
    keys = np.empty(size, np.uint64)
    counts = np.empty(size, np.int64)
    _compact(table, keys, counts)
    return keys.astype(word).view(np.float32 if word is np.uint32 else np.float64), counts
