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
    k = k ^ (k >> np.uint64(33))
    k = k * np.uint64(0xFF51AFD7ED558CCD)
    k = k ^ (k >> np.uint64(33))
    k = k * np.uint64(0xC4CEB9FE1A85EC53)
    return k ^ (k >> np.uint64(33))


def theta_hashes(words: np.ndarray, seed: int = THETA_SEED) -> np.ndarray:
    """The 63-bit theta hash of each 8-byte word (int64 values or double bits)."""
    k1 = words.astype(np.int64, copy=False).view(np.uint64)
    with np.errstate(over="ignore"):
        h1 = np.full(len(k1), seed, np.uint64)
        h2 = h1.copy()
        k1 = k1 * _C1
        k1 = (k1 << np.uint64(31)) | (k1 >> np.uint64(33))
        h1 ^= k1 * _C2
        h1 ^= np.uint64(8)
        h2 ^= np.uint64(8)
        h1 = h1 + h2
        h2 = h2 + h1
        h1 = _fmix(h1) + _fmix(h2)
    return h1 >> np.uint64(1)


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


def theta_of_distinct(distinct: pa.Array) -> bytes:
    """A serialized compact theta sketch of the given (distinct, non-null) values."""
    if isinstance(distinct, pa.ChunkedArray):
        distinct = distinct.combine_chunks()
    if len(distinct) > _PREFILTER:
        words = _words(distinct)
        if words is not None:
            smallest = np.argpartition(theta_hashes(words), _PREFILTER)[:_PREFILTER]
            distinct = distinct.take(pa.array(np.sort(smallest)))
    sketch = ds.update_theta_sketch(THETA_LG_K, 1.0, THETA_SEED)
    update = sketch.update
    for v in _hashable_values(distinct):
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


class KllAccumulator(Accumulator[Kll]):
    def zero(self) -> Kll:
        return Kll()

    def update(self, state: Kll, batch: pa.Array) -> Kll:
        x = as_float64(batch)
        if len(x) == 0:
            return state
        sketch = ds.kll_doubles_sketch.deserialize(state.blob) if state.blob else ds.kll_doubles_sketch(KLL_K)
        if not x.flags.writeable or not x.flags.c_contiguous:
            x = np.array(x, dtype=np.float64)  # the binding takes writable, contiguous float64 only
        sketch.update(x)
        return Kll(sketch.serialize())

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
