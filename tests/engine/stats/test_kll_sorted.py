"""KLL sketches built from sorted values (sketches.kll_of_sorted) against DataSketches and numpy.

The construction writes DataSketches' serialization itself, so these tests hold
it to what the library expects: the bytes deserialize and serialize back
unchanged, the sketch keeps updating and merging, and every rank it answers is
within its bound of numpy's exact rank.
"""

from __future__ import annotations

from decimal import Decimal

import datasketches as ds
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.stats import sketches
from engine.stats.profile import ColumnProfile


def _built(x: np.ndarray, **kw) -> ds.kll_doubles_sketch:
    blob = sketches.kll_of_sorted(len(x), lambda p: x[p], **kw).blob
    s = ds.kll_doubles_sketch.deserialize(blob)
    assert s.serialize() == blob  # DataSketches reads and writes the very same bytes
    return s


def _max_rank_error(s: ds.kll_doubles_sketch, ordered: np.ndarray) -> float:
    """Largest gap between the sketch's rank and the exact (inclusive) rank, over distinct values."""
    distinct = np.unique(ordered)
    probe = distinct if len(distinct) <= 5000 else distinct[np.linspace(0, len(distinct) - 1, 5000).astype(int)]
    exact = np.searchsorted(ordered, probe, side="right") / len(ordered)
    return float(np.max(np.abs(np.array([s.get_rank(v, True) for v in probe]) - exact)))


DATA = {
    "normal": lambda rng, n: rng.normal(size=n),
    "few distinct": lambda rng, n: rng.integers(0, 7, n).astype(np.float64),
    "all equal": lambda rng, n: np.full(n, 3.25),
    "with infinities": lambda rng, n: np.concatenate([[-np.inf, np.inf], rng.exponential(size=n - 2)]),
}


@pytest.mark.parametrize("n", [201, 4097, 5_000, 312_500, 1 << 20, 2_000_003])
@pytest.mark.parametrize("shape", list(DATA))
def test_sketch_of_sorted_values_is_a_valid_kll_within_its_bound(n, shape):
    x = np.sort(DATA[shape](np.random.default_rng(n), n))
    s = _built(x)
    assert s.n == n and s.k == sketches.KLL_K
    assert s.get_min_value() == x[0] and s.get_max_value() == x[-1]
    assert s.is_estimation_mode() and s.num_retained <= 3 * sketches.KLL_K
    # deterministic bound of the construction: 1/k; DataSketches' own bound is larger
    assert _max_rank_error(s, x) <= 1 / sketches.KLL_K
    assert x[0] <= s.get_quantile(0.0) <= s.get_quantile(0.5) <= s.get_quantile(1.0) <= x[-1]


def test_small_inputs_are_exactly_datasketches_own_update_and_larger_ones_deterministic():
    x = np.sort(np.random.default_rng(1).normal(size=sketches.KLL_K))
    ref = ds.kll_doubles_sketch(sketches.KLL_K)
    ref.update(x.copy())
    assert sketches.kll_of_sorted(len(x), lambda p: x[p]).blob == ref.serialize()  # no compaction yet: exact
    assert (
        sketches.kll_of_sorted(1, lambda p: x[p]).blob
        == ds.kll_doubles_sketch.deserialize(sketches.kll_of_sorted(1, lambda p: x[p]).blob).serialize()
    )
    assert sketches.kll_of_sorted(0, lambda p: x[p]).blob is None
    y = np.sort(np.random.default_rng(2).normal(size=100_000))
    # DataSketches' compactions draw random bits; this construction gives the same bytes every time
    assert sketches.kll_of_sorted(len(y), lambda p: y[p]).blob == sketches.kll_of_sorted(len(y), lambda p: y[p].copy()).blob


def test_built_sketches_keep_updating_and_merge_with_datasketches_own():
    rng = np.random.default_rng(7)
    parts = [np.sort(rng.normal(loc=i % 3, size=size)) for i, size in enumerate([300_000, 5_000, 123_457, 4_097, 250_000])]
    merged = ds.kll_doubles_sketch(sketches.KLL_K)
    for i, p in enumerate(parts):
        if i % 2:
            own = ds.kll_doubles_sketch(sketches.KLL_K)
            own.update(p.copy())
            merged.merge(own)
        else:
            merged.merge(_built(p))
    whole = np.sort(np.concatenate(parts))
    assert merged.n == len(whole)
    assert merged.get_min_value() == whole[0] and merged.get_max_value() == whole[-1]
    assert _max_rank_error(merged, whole) <= merged.normalized_rank_error(False)
    more = _built(parts[0])
    more.update(rng.normal(size=10_000))
    assert more.n == len(parts[0]) + 10_000
    assert _built(parts[2]).get_rank(0.0, True) == pytest.approx(np.searchsorted(parts[2], 0.0, side="right") / len(parts[2]), abs=1 / sketches.KLL_K)


@settings(max_examples=200, deadline=None)
@given(
    n=st.integers(1, 3000),
    k=st.sampled_from([8, 9, 12, 50, 200]),
    distinct=st.integers(1, 50),
    seed=st.integers(0, 2**32 - 1),
)
def test_any_size_and_k_gives_exact_weights_and_the_bound(n, k, distinct, seed):
    """Small k: many levels, and every bit pattern of the leftover values."""
    x = np.sort(np.random.default_rng(seed).integers(0, distinct, n).astype(np.float64))
    s = _built(x, k=k)
    assert s.n == n and s.k == k  # the level weights sum to n, or DataSketches' ranks would not reach 1
    assert s.get_min_value() == x[0] and s.get_max_value() == x[-1]
    assert s.get_rank(x[-1], True) == 1.0
    assert _max_rank_error(s, x) <= 1 / k + 1e-12


@pytest.mark.parametrize(
    "t, make",
    [
        (pa.int64(), lambda rng, n: pa.array(rng.integers(-(10**12), 10**12, n))),
        (pa.int32(), lambda rng, n: pa.array(rng.integers(0, 500, n).astype(np.int32))),
        (pa.float64(), lambda rng, n: pa.array(np.where(rng.random(n) < 0.05, np.nan, rng.normal(size=n)))),
        (pa.timestamp("us", "UTC"), lambda rng, n: pa.array(rng.integers(0, 10**15, n)).cast(pa.timestamp("us", "UTC"))),
        (pa.decimal128(18, 2), lambda rng, n: pa.array([Decimal(int(v)).scaleb(-2) for v in rng.integers(-(10**9), 10**9, n)], pa.decimal128(18, 2))),
    ],
    ids=lambda v: str(v) if isinstance(v, pa.DataType) else "values",  # stable across processes (pytest-xdist)
)
def test_a_partition_profile_keeps_the_sorted_sketch(t, make):
    rng = np.random.default_rng(11)
    column = make(rng, 60_000)
    _, row, _, _ = ColumnProfile("c", t, []).profile_column_view(column)
    s = ds.kll_doubles_sketch.deserialize(row["kll_sketch"])
    floats = sketches.as_float64(column)  # numpy oracle of what the sketch summarizes
    ordered = np.sort(floats)
    assert s.n == len(ordered) and s.get_min_value() == ordered[0] and s.get_max_value() == ordered[-1]
    assert _max_rank_error(s, ordered) <= 1 / sketches.KLL_K
