"""Theta sketches written directly from hashes (sketches.theta_of_hashes) against DataSketches' own.

Up to the update sketch's first rebuild the bytes must be DataSketches' to the
byte, for every type analyze hashes (so Puffin readers and Iceberg's sketches
see the same thing); above it the sketch must be valid, within its own bounds,
and union exactly as DataSketches' own sketches of the same values do.
"""

from __future__ import annotations

from decimal import Decimal

import datasketches as ds
import numpy as np
import pyarrow as pa
import pytest

from engine import values as value_forms
from engine.stats import sketches


def _hashable_values(values: pa.Array) -> list:
    """Python values in the form DataSketches' Python update() takes them for each type, as
    analyze fed it before it wrote sketches itself: the definition these tests hold it to."""
    t = values.type
    if pa.types.is_uint64(t):
        return values.view(pa.int64()).to_pylist()
    if pa.types.is_integer(t) or pa.types.is_boolean(t):
        return values.cast(pa.int64()).to_pylist()
    if pa.types.is_floating(t):
        return values.cast(pa.float64()).to_pylist()
    if pa.types.is_temporal(t):
        storage = pa.int32() if (pa.types.is_date32(t) or pa.types.is_time32(t)) else pa.int64()
        return values.view(storage).cast(pa.int64()).to_pylist()
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return values.to_pylist()
    return value_forms.encode(values).to_pylist()  # binary, decimals: their text form


def _own(values: pa.Array) -> bytes:
    """DataSketches' sketch of the values, fed one by one as analyze used to."""
    s = ds.update_theta_sketch(sketches.THETA_LG_K, 1.0, sketches.THETA_SEED)
    for v in _hashable_values(values):
        s.update(v)
    return s.compact().serialize()


def _distinct(t: pa.DataType, n: int, rng: np.random.Generator) -> pa.Array:
    ints = rng.choice(10**9, size=n, replace=False)
    if pa.types.is_boolean(t):
        return pa.array([True, False][:n], t)
    if pa.types.is_floating(t):
        x = ints.astype(np.float64) / 7 - 10**8
        if n > 1:
            x[0] = -0.0  # hashed as 0.0
        return pa.array(x.astype(np.float32 if t == pa.float32() else np.float64), t)
    if pa.types.is_decimal(t):
        return pa.array([Decimal(int(v)).scaleb(-2) for v in ints], t)
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return pa.array(["" if i == 0 else f"v{v}" for i, v in enumerate(ints)], t)  # "" is ignored by theta
    if pa.types.is_binary(t):
        return pa.array([b"\xff" + int(v).to_bytes(8, "little") for v in ints], t)
    if pa.types.is_date32(t):
        return pa.array((ints % 2_000_000).astype(np.int32), pa.int32()).view(t) if n <= 2_000_000 else None
    if pa.types.is_temporal(t):
        return pa.array(ints.astype(np.int64), pa.int64()).view(t)
    if t == pa.uint64():
        return pa.array(ints.astype(np.uint64) + np.uint64(2**63), t)
    if t == pa.int8():
        return pa.array(np.arange(-128, -128 + min(n, 256)), t)
    return pa.array(ints - 5 * 10**8, t)


TYPES = [
    pa.int64(),
    pa.int8(),
    pa.uint64(),
    pa.float64(),
    pa.float32(),
    pa.bool_(),
    pa.date32(),
    pa.timestamp("us", "UTC"),
    pa.time64("ns"),
    pa.duration("ms"),
    pa.decimal128(18, 2),
    pa.string(),
    pa.large_string(),
    pa.binary(),
]


@pytest.mark.parametrize("n", [1, 2, 3, 100, 7_680, 7_681])
@pytest.mark.parametrize("t", TYPES, ids=str)
def test_bytes_are_datasketches_own_up_to_the_first_rebuild(t, n):
    values = _distinct(t, n, np.random.default_rng(n))
    assert sketches.theta_of_distinct(values) == _own(values)


def test_strings_by_their_hashes_and_the_empty_sketch():
    values = pa.array(["", "a", "b", "日本"])
    hashes = sketches.theta_hashes_bytes(values)
    assert sketches.theta_of_hashed(values, hashes) == _own(values)
    assert sketches.theta_of_hashed(pa.array([""]), sketches.theta_hashes_bytes(pa.array([""]))) == _own(pa.array([""]))
    empty = ds.compact_theta_sketch.deserialize(sketches.theta_of_hashes(np.zeros(0, np.uint64)), sketches.THETA_SEED)
    assert empty.is_empty() and empty.get_estimate() == 0


@pytest.mark.parametrize("t", [pa.int64(), pa.float64(), pa.string()], ids=str)
def test_above_the_rebuild_estimates_within_bounds_and_unions_as_datasketches(t):
    rng = np.random.default_rng(5)
    parts = [_distinct(t, n, rng) for n in (50_000, 9_000, 120_000)]
    union_ours = ds.theta_union(sketches.THETA_LG_K, 1.0, sketches.THETA_SEED)
    union_own = ds.theta_union(sketches.THETA_LG_K, 1.0, sketches.THETA_SEED)
    for p in parts:
        blob = sketches.theta_of_distinct(p)
        s = ds.compact_theta_sketch.deserialize(blob, sketches.THETA_SEED)
        assert s.is_estimation_mode() and s.is_ordered() and s.num_retained == 1 << sketches.THETA_LG_K
        assert s.get_lower_bound(3) <= len(p) - (1 if pa.types.is_string(t) else 0) <= s.get_upper_bound(3)
        assert ds.compact_theta_sketch.deserialize(s.serialize(), sketches.THETA_SEED).serialize() == blob
        union_ours.update(s)
        union_own.update(ds.compact_theta_sketch.deserialize(_own(p), sketches.THETA_SEED))
    # DataSketches' own partition sketches keep more entries; a union trims both to the same k smallest
    assert union_ours.get_result().serialize() == union_own.get_result().serialize()


def test_a_repeated_hash_is_counted_once():
    hashes = np.concatenate([np.arange(1, 9_001, dtype=np.uint64) * np.uint64(2**40)] * 2)
    s = ds.compact_theta_sketch.deserialize(sketches.theta_of_hashes(hashes), sketches.THETA_SEED)
    assert s.num_retained == 1 << sketches.THETA_LG_K and s.is_estimation_mode()
    exact = ds.compact_theta_sketch.deserialize(sketches.theta_of_hashes(hashes[:6_000].repeat(2)), sketches.THETA_SEED)
    assert not exact.is_estimation_mode() and exact.get_estimate() == 6_000
