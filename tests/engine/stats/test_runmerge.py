"""Run merges (engine/stats/runmerge.py) against numpy: a stable argsort of the runs laid end
to end, and a sort with equal neighbours' counts summed."""

from __future__ import annotations

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
