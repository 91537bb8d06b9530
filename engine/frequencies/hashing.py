"""64-bit hashes of column values, vectorised: what the Bloom filter and the positives are keyed by.

Equal values hash equal within a column type, which is the only property
exactness rests on (a Bloom filter then has no false negatives). Collisions
merely add false positives, which the confirmation round removes. MurmurHash3
(x64) over the value's storage words or bytes, by the compiled kernels of the
theta sketches (engine.stats.murmur). Values of at most 8 bytes
(integers, booleans, dates) skip MurmurHash's body: their 64-bit storage word
goes straight through MurmurHash3's finalizer, a bijection of 64-bit words
with full avalanche (equal values hash equal, distinct ones never collide),
at a quarter of the cost: the Bloom path hashes every value twice.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from engine import types as mt
from engine.frequencies import keys
from engine.stats.murmur import fmix
from engine.stats.sketches import theta_hashes_bytes

#: Seed of the value hashes (any fixed value; distinct from the theta seed so
#: Bloom positions are independent of theta's retained set).
SEED = 0x5EED_F00D
#: What 8-byte storage words are xor-ed with before the finalizer.
_WORD_SEED = 0x9E3779B97F4A7C15 ^ SEED


def _binary_view(values: pa.Array, width: int) -> pa.Array:
    """A fixed-width array's bytes as a binary array (decimals, fixed-size binary)."""
    data = keys.encode(values).data
    offsets = (np.arange(len(values) + 1, dtype=np.int32) * width).tobytes()
    return pa.Array.from_buffers(pa.binary(), len(values), [None, pa.py_buffer(offsets), pa.py_buffer(data)])


def value_hashes(values: pa.Array) -> np.ndarray:
    """uint64 hash of every (non-null) value."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    t = values.type
    if values.null_count:
        raise ValueError("value_hashes() needs non-null values")
    if mt.is_boolean(t):
        words = values.cast(pa.int64()).to_numpy(zero_copy_only=False)
    elif mt.is_integer(t):
        words = values.to_numpy(zero_copy_only=False)
        words = words.view(np.int64) if words.dtype == np.uint64 else words.astype(np.int64, copy=False)
    elif mt.is_date32(t):
        words = values.view(pa.int32()).to_numpy(zero_copy_only=False).astype(np.int64)
    elif mt.is_date64(t):
        words = values.view(pa.int64()).to_numpy(zero_copy_only=False)
    else:
        words = None
    if words is not None:
        # one bijective mix of the storage word (xor with the seed keeps 0 from hashing to 0)
        return fmix(words.view(np.uint64) ^ np.uint64(_WORD_SEED))
    width = keys.field_width(t)
    binary = _binary_view(values, width) if width else values
    # theta keeps 63 bits; remix to spread all 64 (block index and bit positions use different bits)
    return fmix(theta_hashes_bytes(binary, SEED) ^ np.uint64(0x9E3779B97F4A7C15))
