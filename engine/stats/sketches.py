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


def theta_of_distinct(distinct: pa.Array) -> bytes:
    """A serialized compact theta sketch of the given (distinct, non-null) values."""
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
