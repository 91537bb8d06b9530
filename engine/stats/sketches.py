"""Mergeable sketches kept beside the exact statistics, serialized as bytes.

- Theta (NDV): what ``update_theta_sketch(lg_k=12, p=1.0, seed=9001)`` compacted and
  serialized gives; the blob is the DataSketches compact theta serialization that
  Iceberg's Puffin ``apache-datasketches-theta-v1`` blob holds. Values are hashed
  as DataSketches' Python binding does: integers and temporal values as int64,
  floats as canonical doubles, strings as UTF-8, everything else by its text form
  (engine.values). So sketches of long and string columns merge with Iceberg's.
- KLL (quantiles): ``kll_doubles_sketch(k=200)`` over float64 values. A partition's
  whole sorted column is summarized without feeding it item by item
  (:func:`kll_of_sorted`), in the same serialization.

A partition's sketches are written straight from what its task already holds
(the distinct values' hashes, the sorted values) in DataSketches' serialization
(:func:`theta_of_hashes`, :func:`kll_of_sorted`): DataSketches' ``update`` is a
Python call per value for theta, and a pass over every value for KLL. Queries are
DataSketches' own; merges (:func:`merge_kll`) compact as DataSketches does but with a
coin of fixed seed, so that the same input gives the same bytes.
"""

from __future__ import annotations

import functools
import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import datasketches as ds
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine import types as mt
from engine.measures.base import Accumulator
from engine.stats import murmur

THETA_LG_K = 12
THETA_SEED = 9001  # DataSketches' default seed, required by Puffin's theta blob
KLL_K = 200


# ---------------------------------------------------------------- theta
def theta_hashes(words: np.ndarray, seed: int = THETA_SEED) -> np.ndarray:
    """The 63-bit theta hash of each 8-byte word (int64 values or double bits)."""
    return murmur.hash_words(words, seed)


def _words(values: pa.Array) -> np.ndarray | None:
    """The 8-byte words theta hashes for numeric and temporal values, or None (strings, decimals...)."""
    t = values.type
    if mt.is_floating(t):
        x = values.cast(pa.float64()).to_numpy(zero_copy_only=False).copy()
        x[x == 0] = 0.0  # canonical double: -0.0 hashes as 0.0 (NaN never reaches a sketch)
        return x.view(np.int64)
    if mt.is_integer(t) or mt.is_boolean(t) or mt.is_temporal(t):
        return np.asarray(_hashable_values_numpy(values), dtype=np.int64)
    return None


def _hashable_values_numpy(values: pa.Array) -> np.ndarray:
    t = values.type
    if mt.is_uint64(t):
        return values.to_numpy(zero_copy_only=False).view(np.int64)
    if mt.is_integer(t):
        return values.to_numpy(zero_copy_only=False).astype(np.int64)
    if mt.is_boolean(t):
        return values.cast(pa.int64()).to_numpy(zero_copy_only=False)
    storage = pa.int32() if mt.is_temporal32(t) else pa.int64()
    return values.view(storage).to_numpy(zero_copy_only=False).astype(np.int64)


def theta_hashes_bytes(values: pa.Array, seed: int = THETA_SEED) -> np.ndarray:
    """MurmurHash3_x64_128 (h1 >> 1) of each non-null value's bytes, as theta computes for update(str)."""
    return murmur.hash_bytes(values, seed)


def _candidate_hashes(distinct: pa.Array) -> tuple[pa.Array, np.ndarray]:
    """(values as update() will see them, their theta hashes)."""
    words = _words(distinct)
    if words is not None:
        return distinct, theta_hashes(words)
    t = distinct.type
    if mt.is_offset_string(t):
        text = distinct
    else:  # binary, decimals ...: update() gets their text form
        from engine import values as value_forms

        text = value_forms.encode(distinct)
    lengths = pc.binary_length(text)
    if text.null_count or not lengths.to_numpy(zero_copy_only=False).all():
        text = text.filter(pc.not_equal(lengths, 0))  # theta ignores empty strings (a copy: only when there are some)
    return text, theta_hashes_bytes(text)


#: An update sketch (lg_k=12) holds this many entries before its first rebuild to
#: 2^lg_k: up to here a sketch of distinct values is exact (theta = 1).
THETA_EXACT_MAX = 15 * (1 << (THETA_LG_K + 1)) // 16
_THETA_MAX = (1 << 63) - 1
_THETA_SERIAL_VERSION = 3
_THETA_FAMILY_COMPACT = 3
_THETA_FLAGS = (1 << 1) | (1 << 3) | (1 << 4)  # read-only, compact, ordered
_THETA_EMPTY = 1 << 2


def _smallest(hashes: np.ndarray, k: int) -> np.ndarray:
    """The k smallest hashes, ascending (k < len). Hashes are uniform over 63 bits, so
    about 2k of them lie below 2k/n of the range: select among those when they suffice."""
    cut = np.uint64(min(2**63, (2**63 // len(hashes)) * 2 * k))
    below = hashes[hashes < cut]
    if len(below) <= k:
        below = hashes
    return np.sort(np.partition(below, k)[: k + 1])


def theta_of_hashes(hashes: np.ndarray) -> bytes:
    """The compact, ordered theta sketch (DataSketches' serialization, version 3) of
    distinct values given by their theta hashes (``theta_hashes``/``theta_hashes_bytes``
    of what ``update`` would take).

    Written directly instead of calling ``update`` once per value from Python (up to
    8,192 calls, ~1.7 ms a column a partition). Up to ``THETA_EXACT_MAX`` distinct
    values the sketch is exact and byte for byte DataSketches' own; above, it keeps
    the 2^lg_k smallest hashes with theta the next one (what the update sketch's
    rebuild keeps: DataSketches' own sketch would hold between 2^lg_k and 7,680
    entries, depending on the order of the updates). Unions trim to 2^lg_k anyway.
    """
    h = hashes[hashes != 0] if not hashes.all() else hashes  # theta keeps no zero hash
    k = 1 << THETA_LG_K
    estimating = False
    if len(h) > THETA_EXACT_MAX:
        smallest = _smallest(h, k)  # the k + 1 smallest, ascending
        if bool((smallest[1:] != smallest[:-1]).all()):
            h, estimating = smallest, True
        else:  # a hash twice among them: count the distinct ones the exact way
            h = _sorted_unique(h)
            estimating = len(h) > THETA_EXACT_MAX
    else:
        h = _sorted_unique(h)
    seed = _theta_seed_hash()
    n = len(h)
    if n == 0:
        return struct.pack("<BBBBBBH", 1, _THETA_SERIAL_VERSION, _THETA_FAMILY_COMPACT, 0, 0, _THETA_FLAGS | _THETA_EMPTY, seed)
    if n == 1:
        return struct.pack("<BBBBBBHQ", 1, _THETA_SERIAL_VERSION, _THETA_FAMILY_COMPACT, 0, 0, _THETA_FLAGS, seed, int(h[0]))
    if not estimating:
        head = struct.pack("<BBBBBBHII", 2, _THETA_SERIAL_VERSION, _THETA_FAMILY_COMPACT, 0, 0, _THETA_FLAGS, seed, n, 0)
        return head + h.astype("<u8", copy=False).tobytes()
    theta = int(h[k])
    head = struct.pack("<BBBBBBHIIQ", 3, _THETA_SERIAL_VERSION, _THETA_FAMILY_COMPACT, 0, 0, _THETA_FLAGS, seed, k, 0, theta)
    return head + h[:k].astype("<u8", copy=False).tobytes()


def _sorted_unique(h: np.ndarray) -> np.ndarray:
    """np.unique without its hash table (numpy 2 hashes first: 10x slower on 5,000 hashes)."""
    s = np.sort(h)
    if len(s) > 1 and not bool((s[1:] != s[:-1]).all()):
        s = s[np.concatenate(([True], s[1:] != s[:-1]))]
    return s


_SEED_HASH: list[int] = []


def _theta_seed_hash() -> int:
    if not _SEED_HASH:
        _SEED_HASH.append(ds.compact_theta_sketch.get_seed_hash(ds.update_theta_sketch(THETA_LG_K, 1.0, THETA_SEED).compact()))
    return _SEED_HASH[0]


def theta_of_distinct(distinct: pa.Array) -> bytes:
    """A serialized compact theta sketch of the given (distinct, non-null) values."""
    if isinstance(distinct, pa.ChunkedArray):
        distinct = distinct.combine_chunks()
    return theta_of_hashes(_candidate_hashes(distinct)[1])


def theta_of_hashed(values: pa.Array, hashes: np.ndarray) -> bytes:
    """A serialized compact theta sketch of distinct strings and their theta hashes
    (``theta_hashes_bytes``); empty strings are left out, as ``update`` ignores them."""
    nonempty = pc.binary_length(values).to_numpy(zero_copy_only=False) != 0
    return theta_of_hashes(hashes if nonempty.all() else hashes[nonempty])


def merge_theta(blobs: list[bytes | None]) -> bytes | None:
    blobs = [b for b in blobs if b is not None]
    if not blobs:
        return None
    if len(blobs) == 1:
        return blobs[0]
    union = ds.theta_union(THETA_LG_K, 1.0, THETA_SEED)
    for b in blobs:
        union.update(ds.compact_theta_sketch.deserialize(b, THETA_SEED))
    return union.get_result().serialize()


def theta_estimate(blob: bytes | None) -> tuple[float, float, float] | None:
    """(estimate, lower bound, upper bound) at two standard deviations."""
    if blob is None:
        return None
    s = ds.compact_theta_sketch.deserialize(blob, THETA_SEED)
    return s.get_estimate(), s.get_lower_bound(2), s.get_upper_bound(2)


# ---------------------------------------------------------------- KLL
def as_float64(values: pa.Array) -> np.ndarray:
    """A float64 view of a numeric or temporal array's non-null, non-NaN values."""
    t = values.type
    valid = values.drop_null()
    if mt.is_floating(t):
        valid = valid.filter(pc.invert(pc.is_nan(valid)))
        return valid.cast(pa.float64()).to_numpy(zero_copy_only=False)
    if mt.is_integer(t):
        return valid.to_numpy(zero_copy_only=False).astype(np.float64)
    if mt.is_decimal(t):
        return valid.cast(pa.float64(), safe=False).to_numpy(zero_copy_only=False)
    if mt.is_temporal(t):
        storage = pa.int32() if mt.is_temporal32(t) else pa.int64()
        return valid.view(storage).to_numpy(zero_copy_only=False).astype(np.float64)
    raise TypeError(f"no float64 view of {t}")


@dataclass(frozen=True)
class Kll:
    blob: bytes | None = None


def kll_update(state: Kll, x: np.ndarray) -> Kll:
    """``state`` updated with float64 values (no NaN): the values' sketch built from
    them sorted (:func:`kll_of_sorted`), merged into ``state`` by :func:`merge_kll`.
    Deterministic, unlike DataSketches' update, whose compactions draw random bits."""
    if len(x) == 0:
        return state
    ordered = _sorted(np.asarray(x, dtype=np.float64))
    built = kll_of_sorted(len(ordered), lambda positions: ordered[positions])
    if not state.blob:
        return built
    if built.blob is None:  # no sketch of the values: nothing to merge
        return state
    return Kll(merge_kll([state.blob, built.blob]))


_KLL_M = 8  # DataSketches' minimum level width
_KLL_FAMILY = 15
_KLL_PREAMBLE_FULL = 5
_KLL_SERIAL_FULL = 1
_KLL_LEVEL_ZERO_SORTED = 1 << 1
_KLL_EMPTY = 1 << 0
_KLL_SINGLE_ITEM = 1 << 2
_KLL_HEADER = struct.Struct("<BBBBHBBQHBB")
#: the fixed seed of the coin :func:`merge_kll`'s compactions flip (with the merged count)
KLL_MERGE_SEED = 0x6B6C6C


def kll_of_sorted(n: int, at: Callable[[np.ndarray], np.ndarray], k: int = KLL_K) -> Kll:
    """The KLL sketch of ``n`` sorted values, built from a few of them.

    ``at(positions)`` gives the float64 values at ascending 0-based positions of
    the sorted values. Feeding 312,500 values through DataSketches' update costs
    ~4 ms a column a partition, the largest compute item of an analyze; a sketch
    is only a weighted sample, and from sorted values the best sample is direct:
    the top level ``h`` (weight 2^h, at most ``k`` items, the top level's
    capacity) holds the middle value of each block of 2^h consecutive values,
    and the remaining ``r < 2^h`` values go to lower levels by the bits of
    ``r`` (one middle value each), so the weights sum to ``n`` exactly.

    Every estimated rank is then within 2^(h-1) <= n/k of the true one (a
    deterministic bound, below KLL's own ~1.3% at k=200), the levels respect
    DataSketches' capacities, and the bytes are its serialization: it
    deserializes, merges and answers queries as any other KLL sketch
    (tests/engine/stats/test_kll_sorted.py checks all three). Unlike DataSketches'
    update, whose compactions draw random bits, the result is deterministic: the
    same partition gives the same bytes.
    """
    if n <= 0:
        return Kll()
    given = at
    at = lambda positions: np.asarray(given(positions), dtype=np.float64) + 0.0  # noqa: E731 - -0.0 as 0.0 (see merge_kll)
    if n <= k:  # DataSketches' first level holds them all: exact, as any update of them gives
        sketch = ds.kll_doubles_sketch(k)
        sketch.update(np.array(at(np.arange(n, dtype=np.int64)), dtype=np.float64))
        return Kll(sketch.serialize())
    h = 0
    while (n >> h) > k:
        h += 1
    block = 1 << h
    q = n >> h
    top = np.arange(q, dtype=np.int64) * block + (block // 2 - 1)  # the middle of each block
    # the leftover values [q*block, n), the largest blocks first: level b gets at most one value
    start = q * block
    lower: list[tuple[int, int]] = []  # (level, position)
    for b in range(h - 1, -1, -1):
        if (n - q * block) >> b & 1:
            size = 1 << b
            lower.append((b, start + max(size // 2 - 1, 0)))
            start += size
    ends = at(np.array([0, n - 1], dtype=np.int64))
    picked = at(np.concatenate([np.array([p for _, p in lower], dtype=np.int64), top]))
    by_level: list[np.ndarray] = [np.zeros(0)] * (h + 1)
    for i, (b, _) in enumerate(lower):
        by_level[b] = picked[i : i + 1]
    by_level[h] = picked[len(lower) :]
    return Kll(_kll_bytes(n, k, k, float(ends[0]), float(ends[1]), by_level))


def _kll_bytes(n: int, k: int, min_k: int, lo: float, hi: float, by_level: list[np.ndarray]) -> bytes:
    """DataSketches' full serialization of a sketch of ``n`` values (more than one) whose
    retained items are ``by_level`` (weight 2^h at level h; each level sorted)."""
    num_levels = len(by_level)
    capacity = _kll_total_capacity(k, num_levels)
    sizes = [len(v) for v in by_level]
    levels = []
    offset = capacity - sum(sizes)
    for size in sizes:
        levels.append(offset)
        offset += size
    header = _KLL_HEADER.pack(_KLL_PREAMBLE_FULL, _KLL_SERIAL_FULL, _KLL_FAMILY, _KLL_LEVEL_ZERO_SORTED, k, _KLL_M, 0, n, min_k, num_levels, 0)
    body = np.concatenate(by_level).astype("<f8", copy=False)
    return header + struct.pack(f"<{num_levels}I", *levels) + struct.pack("<dd", lo, hi) + body.tobytes()


@functools.lru_cache(maxsize=256)
def _kll_total_capacity(k: int, num_levels: int) -> int:
    """DataSketches' compute_total_capacity (kll_helper): level capacities shrink by 2/3 a level down."""
    total = 0
    for height in range(num_levels):
        depth = num_levels - height - 1
        total += max(_KLL_M, _kll_cap(k, depth))
    return total


def _kll_cap(k: int, depth: int) -> int:
    if depth > 30:
        half = depth // 2
        return _kll_cap(_kll_cap(k, half), depth - half)
    return (((2 * k) << depth) // 3**depth + 1) >> 1


class KllAccumulator(Accumulator[Kll]):
    def zero(self) -> Kll:
        return Kll()

    def update(self, state: Kll, batch: pa.Array) -> Kll:
        return kll_update(state, as_float64(batch))

    def merge(self, a: Kll, b: Kll) -> Kll:
        if a.blob is None:
            return b
        if b.blob is None:
            return a
        return Kll(merge_kll([a.blob, b.blob]))

    def finalize(self, state: Kll) -> dict[str, Any]:
        return {"kll_sketch": state.blob}


def merge_kll(blobs: list[bytes]) -> bytes:
    """One sketch of several serialized KLL sketches, deterministically: the same
    sketches in the same order give the same bytes.

    DataSketches' own merge compacts with random bits from a generator seeded by the
    clock (its Python binding takes no seed), so the table's percentiles moved from one
    analyze of the same data to the next. Here the sketches' levels are pooled (level
    h of every sketch, weight 2^h) and compacted as DataSketches' ``general_compress``
    does -- bottom up, a level over its capacity sorted, an odd item left behind, every
    other item promoted -- with the coin drawn from a generator seeded by
    ``KLL_MERGE_SEED`` and the merged count. The result is a valid KLL sketch in
    DataSketches' serialization, within KLL's error bounds (the compaction is KLL's);
    up to ``k`` values it holds them all (exact). Equal values are ordered -0.0 first,
    so neither the input's order of zeros nor np.sort's choice shows in the bytes.
    """
    kept = [(b, p) for b, p in zip(blobs, map(_kll_parts, blobs)) if p is not None]
    if not kept:
        return ds.kll_doubles_sketch(KLL_K).serialize()
    if len(kept) == 1:
        return kept[0][0]
    parts = [p for _, p in kept]
    k = parts[0].k
    n = sum(p.n for p in parts)
    height = max(len(p.levels) for p in parts)
    # + 0.0: -0.0 is 0.0 in every sketch (kll_of_sorted), so the order zeros came in never shows in the
    # bytes (DataSketches' update keeps the first of equal values as min/max, and level zero unsorted)
    levels = [_sorted(np.concatenate([p.levels[h] for p in parts if h < len(p.levels)]) + 0.0) for h in range(height)]
    if height > 1 or n > k:  # else all at weight 1 in one level: exact
        levels = _kll_compress(k, levels, np.random.Generator(np.random.PCG64([KLL_MERGE_SEED, n])))
    ends = _sorted(np.array([x for p in parts for x in (p.lo, p.hi)]) + 0.0)
    return _kll_bytes(n, k, min(p.min_k for p in parts), float(ends[0]), float(ends[-1]), levels)


def _sorted(x: np.ndarray) -> np.ndarray:
    """``x`` sorted, -0.0 before 0.0 (np.sort leaves equal values in any order): the
    same values give the same bytes whatever their order."""
    out = np.sort(x)
    a, b = np.searchsorted(out, 0.0, "left"), np.searchsorted(out, 0.0, "right")
    if b > a:
        negative = int(np.signbit(out[a:b]).sum())
        out[a : a + negative], out[a + negative : b] = -0.0, 0.0
    return out


@dataclass(frozen=True)
class _KllParts:
    """A serialized KLL sketch's count, k, extremes and retained items by level (each sorted)."""

    n: int
    k: int
    min_k: int
    lo: float
    hi: float
    levels: list[np.ndarray]


def _kll_parts(blob: bytes | None) -> _KllParts | None:
    """A blob's parts, or None for no blob or an empty sketch."""
    if blob is None or len(blob) < 8 or blob[3] & _KLL_EMPTY:
        return None
    k = struct.unpack_from("<H", blob, 4)[0]
    if blob[3] & _KLL_SINGLE_ITEM:
        (v,) = struct.unpack_from("<d", blob, 8)
        return _KllParts(1, k, k, v, v, [np.array([v])])
    _, _, _, _, k, _, _, n, min_k, num_levels, _ = _KLL_HEADER.unpack_from(blob)
    at = _KLL_HEADER.size
    offsets = list(struct.unpack_from(f"<{num_levels}I", blob, at)) + [_kll_total_capacity(k, num_levels)]
    at += 4 * num_levels
    lo, hi = struct.unpack_from("<dd", blob, at)
    items = np.frombuffer(blob, dtype="<f8", offset=at + 16, count=offsets[-1] - offsets[0])
    base = offsets[0]
    levels = [items[a - base : b - base] for a, b in zip(offsets[:-1], offsets[1:])]
    if not blob[3] & _KLL_LEVEL_ZERO_SORTED:
        levels[0] = _sorted(levels[0])
    return _KllParts(n, k, min_k, lo, hi, levels)


def _kll_level_capacity(k: int, num_levels: int, height: int) -> int:
    return max(_KLL_M, _kll_cap(k, num_levels - height - 1))


def _kll_compress(k: int, levels: list[np.ndarray], coin: np.random.Generator) -> list[np.ndarray]:
    """Sorted levels compacted until they fit a sketch's capacities: one pass bottom up,
    as DataSketches' ``general_compress`` (which can be shown to suffice), each
    compaction keeping the odd or the even items of its level by one flip of ``coin``."""
    levels = list(levels)
    num = len(levels)
    count = sum(len(v) for v in levels)
    target = _kll_total_capacity(k, num)
    h = 0
    while True:
        if h == num - 1:
            levels.append(np.zeros(0))
        pop = len(levels[h])
        if count >= target and pop >= _kll_level_capacity(k, num, h):
            odd = pop & 1
            kept, rest = levels[h][:odd], levels[h][odd:]
            promoted = rest[int(coin.integers(2)) :: 2]
            levels[h] = kept
            levels[h + 1] = _sorted(np.concatenate([promoted, levels[h + 1]]))
            count -= len(promoted)
            if h == num - 1:
                num += 1
                target += _kll_level_capacity(k, num, 0)
        if h == num - 1:
            break
        h += 1
    return levels[:num]


def kll_quantiles(blob: bytes | None, probabilities: tuple[float, ...]) -> tuple[list[float], float] | None:
    """Quantiles (inclusive ranks) and the sketch's normalized rank error."""
    if blob is None:
        return None
    s = ds.kll_doubles_sketch.deserialize(blob)
    return [s.get_quantile(p) for p in probabilities], s.normalized_rank_error(False)
