"""Error bounds of the approximate quantiles: KLL's reported normalized rank error
and the t-digest's empirical bound (engine/stats/tdigest.py), checked on data and
seeds other than those the bound was fitted on, after merging 16 partitions."""

from __future__ import annotations

import datasketches as ds
import numpy as np
import pyarrow as pa
import pytest

from engine.stats import tdigest
from engine.stats.sketches import KllAccumulator

PS = [0.0, 1e-4, 1e-3, 0.005, 0.01, 0.05, 0.1, 0.3, 0.5, 0.7, 0.9, 0.95, 0.99, 0.995, 0.999, 0.9999, 1.0]


def rank_error(sorted_x: np.ndarray, value: float, p: float) -> float:
    """Distance from p to the normalized ranks ``value`` occupies in the data."""
    n = len(sorted_x)
    lo = np.searchsorted(sorted_x, value, "left") / n
    hi = np.searchsorted(sorted_x, value, "right") / n
    return 0.0 if lo <= p <= hi else min(abs(p - lo), abs(p - hi))


def data(name: str, rng: np.random.Generator, n: int) -> np.ndarray:
    return {
        "uniform": lambda: rng.uniform(-5, 5, n),
        "normal": lambda: rng.normal(10, 3, n),
        "lognormal": lambda: rng.lognormal(0, 2, n),
        "weibull": lambda: rng.weibull(0.5, n),
        "student_t": lambda: rng.standard_t(2, n),
        "ties_20": lambda: rng.integers(0, 20, n).astype(float),
        "geometric": lambda: rng.geometric(0.01, n).astype(float),
        "clustered": lambda: np.concatenate([rng.normal(-1e3, 1, n // 3), rng.normal(0, 1e-3, n // 3), rng.normal(1e9, 10, n - 2 * (n // 3))]),
        "ascending": lambda: np.sort(rng.normal(0, 1, n)),
    }[name]()


DISTRIBUTIONS = ["uniform", "normal", "lognormal", "weibull", "student_t", "ties_20", "geometric", "clustered", "ascending"]


@pytest.mark.parametrize("name", DISTRIBUTIONS)
def test_sketch_errors_within_their_bounds(name: str) -> None:
    rng = np.random.default_rng(2024)
    x = data(name, rng, 400_000)
    parts = np.array_split(x, 16)
    td = None
    kll = KllAccumulator()
    kll_state = kll.zero()
    for part in parts:
        td = tdigest.merge_tdigests(td, tdigest.tdigest_of(pa.array(part)))
        kll_state = kll.merge(kll_state, kll.update(kll.zero(), pa.array(part)))
    s = np.sort(x)
    td_values, weight = tdigest.tdigest_quantiles(td, PS)
    assert weight == len(x)
    sketch = ds.kll_doubles_sketch.deserialize(kll_state.blob)
    kll_bound = sketch.normalized_rank_error(False)
    for p, v in zip(PS, td_values):
        assert rank_error(s, v, p) <= tdigest.rank_error_bound(p) + 1e-12, (name, p)
        assert rank_error(s, sketch.get_quantile(p), p) <= kll_bound, (name, p)


def test_tdigest_beats_kll_only_near_the_tails() -> None:
    kll_bound = ds.kll_doubles_sketch(200).normalized_rank_error(False)
    assert tdigest.rank_error_bound(0.01) < kll_bound and tdigest.rank_error_bound(0.99) < kll_bound
    assert tdigest.rank_error_bound(0.5) > kll_bound
    assert tdigest.rank_error_bound(0.0) == tdigest.rank_error_bound(1.0) == 0.0


def test_tdigest_ignores_nulls_and_nan_and_merges_with_none() -> None:
    blob = tdigest.tdigest_of(pa.array([1.0, None, float("nan"), 3.0]))
    assert tdigest.tdigest_quantiles(blob, [0.0, 1.0]) == ([1.0, 3.0], 2)
    assert tdigest.tdigest_of(pa.array([None, float("nan")], pa.float64())) is None
    assert tdigest.merge_tdigests(None, blob) == blob and tdigest.merge_tdigests(blob, None) == blob
    assert tdigest.TDIGEST.applies_to(pa.timestamp("us")) and not tdigest.TDIGEST.applies_to(pa.string())
