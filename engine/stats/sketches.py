"""Mergeable sketches kept beside the exact statistics, serialized as bytes.

- Theta (NDV): ``update_theta_sketch(lg_k=12, p=1.0, seed=9001)`` compacted and
  serialized; the blob is the DataSketches compact theta serialization that
  Iceberg's Puffin ``apache-datasketches-theta-v1`` blob holds. Values are hashed
  as DataSketches' Python binding does: integers and temporal values as int64,
  floats as canonical doubles, strings as UTF-8, everything else by its text form
  (engine.values). So sketches of long and string columns merge with Iceberg's.
- KLL (quantiles): ``kll_doubles_sketch(k=200)`` over float64 values.

Sketches are fed distinct values only (from the exact value counts), because
theta's update is a Python call per value.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import datasketches as ds
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.types as pt

from engine.stats.accumulator import Accumulator

THETA_LG_K = 12
THETA_SEED = 9001  # DataSketches' default seed, required by Puffin's theta blob
KLL_K = 200


# ---------------------------------------------------------------- theta
def _hashable_values(values: pa.Array) -> list[Any]:
    """Python values in the form theta's update() hashes (int, float or str)."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    t = values.type
    if pt.is_integer(t):
        if pt.is_uint64(t):
            return values.view(pa.int64()).to_pylist() if hasattr(values, "view") else values.cast(pa.int64(), safe=False).to_pylist()
        return values.cast(pa.int64()).to_pylist()
    if pt.is_boolean(t):
        return values.cast(pa.int64()).to_pylist()
    if pt.is_floating(t):
        return values.cast(pa.float64()).to_pylist()
    if pt.is_date32(t) or pt.is_timestamp(t) or pt.is_time(t) or pt.is_duration(t) or pt.is_date64(t):
        storage = pa.int32() if (pt.is_date32(t) or pt.is_time32(t)) else pa.int64()
        return values.view(storage).cast(pa.int64()).to_pylist()
    if pt.is_string(t) or pt.is_large_string(t) or pt.is_string_view(t):
        return values.to_pylist()
    from engine import values as value_forms

    return value_forms.encode(values).to_pylist()


# MurmurHash3_x64_128 of one 8-byte word, vectorised: what DataSketches computes
# for update(int) and update(float) (the canonical double's bits), seed 9001.
_C1 = np.uint64(0x87C37B91114253D5)
_C2 = np.uint64(0x4CF5AD432745937F)


def _fmix(k: np.ndarray) -> np.ndarray:
    """MurmurHash3's finalizer, in place (``k`` is overwritten and returned)."""
    k ^= k >> np.uint64(33)
    k *= np.uint64(0xFF51AFD7ED558CCD)
    k ^= k >> np.uint64(33)
    k *= np.uint64(0xC4CEB9FE1A85EC53)
    k ^= k >> np.uint64(33)
    return k


def theta_hashes(words: np.ndarray, seed: int = THETA_SEED) -> np.ndarray:
    """The 63-bit theta hash of each 8-byte word (int64 values or double bits)."""
    k1 = words.astype(np.int64, copy=False).view(np.uint64)
    with np.errstate(over="ignore"):
        h1 = k1 * _C1
        h1 = _rotl(h1, 31)
        h1 *= _C2
        # h1 and h2 start at the seed; one 8-byte word, so the length 8 is mixed into both
        h2 = np.uint64(seed ^ 8)
        h1 ^= h2
        h1 += h2
        h2 = h1 + h2
        _fmix(h1)
        h1 += _fmix(h2)
    h1 >>= np.uint64(1)
    return h1


def _words(values: pa.Array) -> np.ndarray | None:
    """The 8-byte words theta hashes for numeric and temporal values, or None (strings, decimals...)."""
    t = values.type
    if pt.is_floating(t):
        x = values.cast(pa.float64()).to_numpy(zero_copy_only=False).copy()
        x[x == 0] = 0.0  # canonical double: -0.0 hashes as 0.0 (NaN never reaches a sketch)
        return x.view(np.int64)
    if pt.is_integer(t) or pt.is_boolean(t) or pt.is_temporal(t):
        return np.asarray(_hashable_values_numpy(values), dtype=np.int64)
    return None


def _hashable_values_numpy(values: pa.Array) -> np.ndarray:
    t = values.type
    if pt.is_uint64(t):
        return values.to_numpy(zero_copy_only=False).view(np.int64)
    if pt.is_integer(t):
        return values.to_numpy(zero_copy_only=False).astype(np.int64)
    if pt.is_boolean(t):
        return values.cast(pa.int64()).to_numpy(zero_copy_only=False)
    storage = pa.int32() if (pt.is_date32(t) or pt.is_time32(t)) else pa.int64()
    return values.view(storage).to_numpy(zero_copy_only=False).astype(np.int64)


#: Above this many distinct values only the values with the smallest hashes are
#: fed to the sketch: a full update sketch (lg_k=12) rebuilds at 7,680 entries,
#: so feeding the 8,192 smallest hashes forces that rebuild and leaves every
#: hash below the resulting theta in the sketch -- the same retained set a full
#: pass keeps, for a few thousand Python calls instead of one per value.
_PREFILTER = 8192


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << np.uint64(r)) | (x >> np.uint64(64 - r))


#: Longest value hashed in numpy; longer strings are hashed by the sketch itself.
_MAX_VECTOR_BYTES = 256


#: masks of the first t bytes of a little-endian word, t = 0..8
_TAIL_MASKS = np.array([(1 << (8 * t)) - 1 for t in range(9)], dtype=np.uint64)


def theta_hashes_bytes(values: pa.Array, seed: int = THETA_SEED) -> np.ndarray | None:
    """MurmurHash3_x64_128 (h1 >> 1) of each value's bytes, as theta computes for update(str).

    Values are ordered by their number of 16-byte blocks (a counting sort), so
    the values still in their body at block b are a prefix and every block is
    mixed for all of them at once on array slices; the tail is read as two
    zero-masked words, which equals murmur's byte-wise tail. Returns None when a
    value is longer than ``_MAX_VECTOR_BYTES``.
    """
    n = len(values)
    if n == 0:
        return np.zeros(0, np.uint64)
    if values.null_count:
        values = values.drop_null()
        n = len(values)
    wide = pt.is_large_string(values.type) or pt.is_large_binary(values.type)
    offsets = np.frombuffer(values.buffers()[1], dtype=np.int64 if wide else np.int32)[values.offset : values.offset + n + 1]
    offsets = offsets.astype(np.int64)
    lengths = np.diff(offsets)
    if n and int(lengths.max()) > _MAX_VECTOR_BYTES:
        return None
    data_buf = values.buffers()[2]
    data = np.frombuffer(data_buf, dtype=np.uint8) if data_buf is not None else np.zeros(0, np.uint8)
    lo, hi = int(offsets[0]), int(offsets[-1])
    padded = np.zeros(hi - lo + 16, np.uint8)  # room for a full-word read of any tail
    padded[: hi - lo] = data[lo:hi]
    # every byte offset seen as the start of an (unaligned) little-endian word
    at = np.ndarray(shape=(len(padded) - 7,), dtype="<u8", buffer=padded, strides=(1,))
    nblocks = lengths >> 4
    perm = np.argsort((_MAX_VECTOR_BYTES // 16 - nblocks).astype(np.uint8), kind="stable")  # most blocks first
    starts = offsets[:-1][perm] - lo
    plen = lengths[perm]
    active = np.bincount(nblocks, minlength=_MAX_VECTOR_BYTES // 16 + 1)[::-1].cumsum()[::-1]  # values with > b blocks
    c1, c2 = _C1, _C2
    with np.errstate(over="ignore"):
        h1 = np.full(n, seed, np.uint64)
        h2 = h1.copy()
        for b in range(int(nblocks.max())):
            m = int(active[b + 1])
            s = starts[:m] + 16 * b
            k1 = at[s]
            k1 *= c1
            k1 = _rotl(k1, 31)
            k1 *= c2
            x1 = h1[:m]
            x1 ^= k1
            x1[:] = _rotl(x1, 27)
            x1 += h2[:m]
            x1 *= np.uint64(5)
            x1 += np.uint64(0x52DCE729)
            k2 = at[s + 8]
            k2 *= c2
            k2 = _rotl(k2, 33)
            k2 *= c1
            x2 = h2[:m]
            x2 ^= k2
            x2[:] = _rotl(x2, 31)
            x2 += x1
            x2 *= np.uint64(5)
            x2 += np.uint64(0x38495AB5)
        tail = plen & 15
        body = starts + (plen - tail)
        k1 = at[body] & _TAIL_MASKS[np.minimum(tail, 8)]
        k2 = at[body + 8] & _TAIL_MASKS[np.maximum(tail - 8, 0)]
        k2 *= c2
        k2 = _rotl(k2, 33)
        k2 *= c1
        h2 ^= np.where(tail > 8, k2, np.uint64(0))
        k1 *= c1
        k1 = _rotl(k1, 31)
        k1 *= c2
        h1 ^= np.where(tail > 0, k1, np.uint64(0))
        ln = plen.astype(np.uint64)
        h1 ^= ln
        h2 ^= ln
        h1 += h2
        h2 += h1
        h1 = _fmix(h1)
        h1 += _fmix(h2)
    h1 >>= np.uint64(1)
    out = np.empty(n, np.uint64)
    out[perm] = h1
    return out


def _candidate_hashes(distinct: pa.Array) -> tuple[pa.Array, np.ndarray] | None:
    """(values as update() will see them, their theta hashes), or None if not vectorisable."""
    words = _words(distinct)
    if words is not None:
        return distinct, theta_hashes(words)
    t = distinct.type
    if pt.is_string(t) or pt.is_large_string(t):
        text = distinct
    else:  # binary, decimals ...: update() gets their text form
        from engine import values as value_forms

        text = value_forms.encode(distinct)
    text = text.filter(pc.not_equal(pc.binary_length(text), 0))  # theta ignores empty strings
    hashes = theta_hashes_bytes(text)
    return (text, hashes) if hashes is not None else None


def _smallest(hashes: np.ndarray, k: int) -> np.ndarray:
    """Indices of the k smallest hashes (k < len). Hashes are uniform over 63 bits, so
    about 2k of them lie below 2k/n of the range: select among those when they suffice."""
    cut = np.uint64(min(2**63, (2**63 // len(hashes)) * 2 * k))
    below = np.flatnonzero(hashes < cut)
    if len(below) > k:
        return below[np.argpartition(hashes[below], k)[:k]]
    return np.argpartition(hashes, k)[:k]


def theta_of_distinct(distinct: pa.Array) -> bytes:
    """A serialized compact theta sketch of the given (distinct, non-null) values."""
    if isinstance(distinct, pa.ChunkedArray):
        distinct = distinct.combine_chunks()
    if len(distinct) > _PREFILTER:
        candidates = _candidate_hashes(distinct)
        if candidates is not None:
            values, hashes = candidates
            if len(values) > _PREFILTER:
                values = values.take(pa.array(np.sort(_smallest(hashes, _PREFILTER))))
            distinct = values
    sketch = ds.update_theta_sketch(THETA_LG_K, 1.0, THETA_SEED)
    update = sketch.update
    for v in _hashable_values(distinct):
        update(v)
    return sketch.compact().serialize()


def theta_of_hashed(values: pa.Array, hashes: np.ndarray) -> bytes:
    """A serialized compact theta sketch of distinct strings given in ascending order of
    their theta hashes (``theta_hashes_bytes``): the candidates are the first values."""
    nonempty = np.flatnonzero(pc.binary_length(values).to_numpy(zero_copy_only=False) != 0)  # theta ignores ""
    candidates = values.take(pa.array(nonempty[:_PREFILTER]))
    sketch = ds.update_theta_sketch(THETA_LG_K, 1.0, THETA_SEED)
    update = sketch.update
    for v in candidates.to_pylist():
        update(v)
    return sketch.compact().serialize()


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
    if pt.is_floating(t):
        valid = valid.filter(pc.invert(pc.is_nan(valid)))
        return valid.cast(pa.float64()).to_numpy(zero_copy_only=False)
    if pt.is_integer(t):
        return valid.to_numpy(zero_copy_only=False).astype(np.float64)
    if pt.is_decimal(t):
        return valid.cast(pa.float64(), safe=False).to_numpy(zero_copy_only=False)
    if pt.is_temporal(t):
        storage = pa.int32() if (pt.is_date32(t) or pt.is_time32(t)) else pa.int64()
        return valid.view(storage).to_numpy(zero_copy_only=False).astype(np.float64)
    raise TypeError(f"no float64 view of {t}")


@dataclass(frozen=True)
class Kll:
    blob: bytes | None = None


def kll_update(state: Kll, x: np.ndarray) -> Kll:
    """``state`` updated with float64 values (no NaN). Sorted input is folded about
    twice as fast (fewer moves in each compaction); the sketch's error bound holds for
    any order."""
    if len(x) == 0:
        return state
    sketch = ds.kll_doubles_sketch.deserialize(state.blob) if state.blob else ds.kll_doubles_sketch(KLL_K)
    if x.dtype != np.float64 or not x.flags.writeable or not x.flags.c_contiguous:
        x = np.array(x, dtype=np.float64)  # the binding takes writable, contiguous float64 only
    sketch.update(x)
    return Kll(sketch.serialize())


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
        s = ds.kll_doubles_sketch.deserialize(a.blob)
        s.merge(ds.kll_doubles_sketch.deserialize(b.blob))
        return Kll(s.serialize())

    def finalize(self, state: Kll) -> dict[str, Any]:
        return {"kll_sketch": state.blob}


def kll_quantiles(blob: bytes | None, probabilities: tuple[float, ...]) -> tuple[list[float], float] | None:
    """Quantiles (inclusive ranks) and the sketch's normalized rank error."""
    if blob is None:
        return None
    s = ds.kll_doubles_sketch.deserialize(blob)
    return [s.get_quantile(p) for p in probabilities], s.normalized_rank_error(False)
