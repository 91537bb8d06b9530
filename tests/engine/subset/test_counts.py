"""The pure interval kernels of subset estimation (engine/subset/counts.py): every interval
holds the true count, checked on generated rows (numpy as the oracle)."""

from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.stats.histograms import make_spec
from engine.subset import counts as cnt
from engine.subset.counts import Count, Interval


def _loosen(true: int, n: int, slack_lo: int, slack_hi: int) -> Count:
    low, high = max(0, true - slack_lo), min(n, true + slack_hi)
    return Count(low, (low + high) / 2, high, frozenset({"x"}))


@settings(max_examples=300, deadline=None)
@given(
    n=st.integers(1, 60),
    seed=st.integers(0, 2**32 - 1),
    slack=st.tuples(st.integers(0, 5), st.integers(0, 5), st.integers(0, 5), st.integers(0, 5)),
)
def test_and_or_bounds_hold_the_true_counts(n: int, seed: int, slack: tuple[int, int, int, int]) -> None:
    rng = np.random.default_rng(seed)
    a, b = rng.random(n) < rng.random(), rng.random(n) < rng.random()
    ca, cb = _loosen(int(a.sum()), n, *slack[:2]), _loosen(int(b.sum()), n, *slack[2:])
    both, either = cnt.and_(ca, cb, n), cnt.or_(ca, cb, n)
    assert both.low <= int((a & b).sum()) <= both.high
    assert either.low <= int((a | b).sum()) <= either.high
    assert both.low <= both.estimate <= both.high and either.low <= either.estimate <= either.high
    assert cnt.complement(ca, n).low <= int((~a).sum()) <= cnt.complement(ca, n).high
    # exact inputs: exact results where the rule is exact
    assert cnt.and_(Count.of(n), Count.of(int(b.sum())), n) == Count.of(int(b.sum()))
    assert cnt.or_(Count.of(0), Count.of(int(b.sum())), n) == Count.of(int(b.sum()))


VALUES = st.one_of(
    st.lists(st.integers(-1000, 1000), min_size=1, max_size=80).map(lambda v: pa.array(v, pa.int64())),
    st.lists(
        st.one_of(st.floats(-1e6, 1e6, allow_nan=False), st.sampled_from([0.1, 0.2, 0.30000000000000004, -0.0, math.inf, -math.inf])),
        min_size=1,
        max_size=80,
    ).map(lambda v: pa.array(v, pa.float64())),
)


@settings(max_examples=300, deadline=None)
@given(values=VALUES, bins=st.sampled_from([1, 3, 10, 1000]), data=st.data())
def test_range_bins_hold_the_true_count(values: pa.Array, bins: int, data) -> None:
    x = values.to_numpy(zero_copy_only=False)
    finite = x[np.isfinite(x)] if values.type == pa.float64() else x
    if len(finite) == 0:
        return
    spec = make_spec(values.type, finite.min(), finite.max(), bins)
    counts = spec.bin_counts(values)
    pool = list(x) + [float(v) + d for v in x[:5] for d in (-0.5, 0.5)] + [None]
    lo, hi = data.draw(st.sampled_from(pool)), data.draw(st.sampled_from(pool))
    if values.type == pa.int64():
        lo = None if lo is None else int(math.floor(lo))
        hi = None if hi is None else int(math.ceil(hi))
    r = Interval(lo, hi, data.draw(st.booleans()), data.draw(st.booleans()))
    inside = np.ones(len(x), bool)
    if lo is not None:
        inside &= (x > lo) if r.lo_open else (x >= lo)
    if hi is not None:
        inside &= (x < hi) if r.hi_open else (x <= hi)
    c = cnt.range_count(spec, counts, r)
    assert c.low <= int(inside.sum()) <= c.high, (r, c, spec)
    assert c.low <= c.estimate <= c.high
    low, est, high = cnt.range_bins(spec, counts, r)
    assert (low <= counts).all() and (high <= counts).all() and (low <= high).all()
