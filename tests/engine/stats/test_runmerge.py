"""Run merges (engine/stats/runmerge.py) against numpy: a stable argsort of the runs laid end
to end, and a sort with equal neighbours' counts summed."""

from __future__ import annotations

from unittest.mock import patch

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.stats import runmerge

DTYPES = [np.int8, np.int32, np.int64, np.uint16, np.uint64, np.float32, np.float64]


def _runs(draw_runs: list[list[int]], dtype: type, sort: bool = True) -> tuple[np.ndarray, np.ndarray]:
    runs = [np.sort(np.array(r, dtype)) if sort else np.array(r, dtype) for r in draw_runs]
    keys = np.concatenate(runs) if runs else np.zeros(0, dtype)
    return keys, runmerge.run_bounds([len(r) for r in runs])


def _fit(runs: list[list[int]], dtype: type) -> list[list[int]]:
    """Drawn integers as the dtype holds them: narrow types modulo 100, unsigned ones positive."""
    if np.dtype(dtype).itemsize < 8:
        return [[v % 100 for v in r] for r in runs]
    return [[abs(v) for v in r] for r in runs] if np.dtype(dtype).kind == "u" else runs


small = st.lists(st.lists(st.integers(-5, 5), max_size=30), max_size=9)
wide = st.lists(st.lists(st.integers(0, 2**62), max_size=30), max_size=9)


@settings(max_examples=150, deadline=None)
@given(runs=st.one_of(small, wide), dtype=st.sampled_from(DTYPES), sort=st.booleans())
def test_merge_order_is_a_stable_argsort(runs, dtype, sort) -> None:
    runs = _fit(runs, dtype)
    keys, bounds = _runs(runs, dtype, sort)
    got_keys, order = runmerge.merge_order(keys, bounds)
    want = np.argsort(keys, kind="stable")
    assert np.array_equal(order, want)
    assert np.array_equal(got_keys, keys[want]) and got_keys.dtype == keys.dtype


@settings(max_examples=150, deadline=None)
@given(runs=st.one_of(small, wide), dtype=st.sampled_from(DTYPES), sort=st.booleans(), ones=st.booleans(), data=st.data())
def test_merge_counts_sums_equal_keys(runs, dtype, sort, ones, data) -> None:
    runs = _fit(runs, dtype)
    keys, bounds = _runs(runs, dtype, sort)
    counts = None if ones else np.array(data.draw(st.lists(st.integers(1, 2**40), min_size=len(keys), max_size=len(keys))), np.int64)
    got_keys, got_counts = runmerge.merge_counts(keys, counts, bounds)
    want_keys, inverse = np.unique(keys, return_inverse=True)
    want_counts = np.zeros(len(want_keys), np.int64)
    np.add.at(want_counts, inverse.ravel(), np.ones(len(keys), np.int64) if counts is None else counts)
    assert np.array_equal(got_keys, want_keys) and got_keys.dtype == keys.dtype
    assert np.array_equal(got_counts, want_counts) and got_counts.dtype == np.int64


def test_float_runs_with_infinities_and_nan() -> None:
    keys = np.array([-np.inf, 0.5, np.inf, -1.0, 0.5, np.inf], np.float64)
    bounds = runmerge.run_bounds([3, 3])
    assert runmerge.merge_counts(keys, None, bounds)[1].tolist() == [1, 1, 2, 2]
    nan = np.array([0.0, np.nan, 1.0, 2.0])  # not runs of numbers: numpy's order, NaN last
    got, order = runmerge.merge_order(nan, runmerge.run_bounds([2, 2]))
    assert np.array_equal(order, np.argsort(nan, kind="stable"))


def _bucketed(draw_runs: list[list[float]], dtype: type) -> tuple[np.ndarray, np.ndarray]:
    return _runs([list(r) for r in draw_runs], dtype)


#: keys that defeat an even split into buckets: a few far apart (one bucket holds nearly
#: all), many equal (crowded slots), both zeros and infinities among floats
skewed_ints = st.lists(
    st.lists(st.sampled_from([0, 1, 2, 3, 7, 2**40, 2**40 + 1, 2**62, 2**63 - 1]) | st.integers(0, 2**63 - 1), max_size=120), max_size=9
)
crowded = st.lists(st.lists(st.integers(0, 3), max_size=200), max_size=6)
signed = st.lists(st.lists(st.sampled_from([-(2**63), -(2**40), -1, 0, 1, 2**63 - 1]) | st.integers(-(2**63), 2**63 - 1), max_size=60), max_size=9)
narrow = st.lists(st.lists(st.integers(-128, 127), max_size=100), max_size=9)
floats = st.lists(
    st.lists(st.sampled_from([-0.0, 0.0, 1.5, -2.25, 1e-300, 3.0e38, np.inf, -np.inf]) | st.floats(-1e6, 1e6, allow_nan=False), max_size=60),
    max_size=9,
)


@settings(max_examples=200, deadline=None)
@given(draw=st.data())
def test_bucket_merges_equal_a_stable_sort(draw) -> None:
    """The bucketed merges (every size, as if large) against numpy's stable argsort and
    np.unique's counts: skewed high bits, crowded slots, one-element and empty runs."""
    dtype, runs = draw.draw(
        st.sampled_from(
            [
                (np.uint64, skewed_ints),
                (np.int64, skewed_ints),
                (np.int32, crowded),
                (np.int64, signed),
                (np.int8, narrow),
                (np.int32, narrow),
                (np.uint64, crowded),
                (np.float64, floats),
                (np.float32, floats),
            ]
        )
    )
    runs = draw.draw(runs)
    keys, bounds = _bucketed(runs, dtype)
    counts = np.array(draw.draw(st.lists(st.integers(1, 5), min_size=len(keys), max_size=len(keys))), np.int64)
    with patch.object(runmerge, "BUCKET_AT", 0), patch.object(runmerge, "_MERGE_AT", 0):
        got_keys, order = runmerge.merge_order(keys, bounds)
        folded, summed = runmerge.merge_counts(keys, counts, bounds)
    want = np.argsort(keys, kind="stable")
    assert np.array_equal(order, want) and np.array_equal(got_keys.view(np.uint8), keys[want].view(np.uint8))  # bits: -0.0 apart from 0.0
    starts = np.flatnonzero(np.concatenate(([True], keys[want][1:] != keys[want][:-1]))) if len(keys) else np.zeros(0, np.int64)
    assert np.array_equal(folded.view(np.uint8), keys[want][starts].view(np.uint8))  # each group's first key, as the fold keeps
    assert np.array_equal(summed, np.add.reduceat(counts[want], starts) if len(keys) else summed[:0])


def test_bucket_merge_of_many_hashes() -> None:
    """Realistic sizes without the patch: 16 runs of random 63-bit hashes, some shared."""
    rng = np.random.default_rng(3)
    shared = rng.integers(0, 2**63 - 1, 20_000, dtype=np.uint64)
    runs = [np.sort(np.concatenate([rng.integers(0, 2**63 - 1, 10_000, dtype=np.uint64), shared[rng.random(len(shared)) < 0.5]])) for _ in range(16)]
    keys, bounds = np.concatenate(runs), runmerge.run_bounds([len(r) for r in runs])
    assert len(keys) >= runmerge.BUCKET_AT
    got_keys, order = runmerge.merge_order(keys, bounds)
    want = np.argsort(keys, kind="stable")
    assert np.array_equal(order, want) and np.array_equal(got_keys, keys[want])
