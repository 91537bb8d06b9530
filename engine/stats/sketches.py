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

from engine.stats import murmur
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


def theta_hashes(words: np.ndarray, seed: int = THETA_SEED) -> np.ndarray:
    """The 63-bit theta hash of each 8-byte word (int64 values or double bits)."""
    return murmur.hash_words(words, seed)


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


def theta_hashes_bytes(values: pa.Array, seed: int = THETA_SEED) -> np.ndarray:
    """MurmurHash3_x64_128 (h1 >> 1) of each non-null value's bytes, as theta computes for update(str)."""
    return murmur.hash_bytes(values, seed)


def _candidate_hashes(distinct: pa.Array) -> tuple[pa.Array, np.ndarray]:
    """(values as update() will see them, their theta hashes)."""
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
    return text, theta_hashes_bytes(text)


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
        values, hashes = _candidate_hashes(distinct)
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
