"""Laws of the drift kernels (engine/stats/drift.py) against numpy on raw values."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.stats import drift

counts = st.lists(st.integers(0, 50), min_size=1, max_size=30)


def _pair(draw_a: list[int], draw_b: list[int]) -> tuple[np.ndarray, np.ndarray]:
    n = max(len(draw_a), len(draw_b))
    return np.pad(draw_a, (0, n - len(draw_a))), np.pad(draw_b, (0, n - len(draw_b)))


def _hist(c: np.ndarray, lower: float = 0.0, width: float = 1.0) -> drift.Histogram:
    lows = [lower + i * width for i in range(len(c))]
    ups = [lower + (i + 1) * width for i in range(len(c))]
    return drift.Histogram.of(lows, ups, list(c), integer=False)


@given(counts)
def test_ks_and_psi_of_identical_histograms_are_zero(c: list[int]) -> None:
    h = _hist(np.array(c))
    ks, psi = drift.ks_histograms(h, h), drift.psi_histograms(h, h)
    if sum(c) == 0:
        assert ks.value is None and psi.value is None
    else:
        assert ks.value == 0.0 and ks.exact
        assert psi.value == 0.0


@given(counts, counts)
def test_ks_symmetric_and_bounded(a: list[int], b: list[int]) -> None:
    ca, cb = _pair(a, b)
    ab, ba = drift.ks_histograms(_hist(ca), _hist(cb)), drift.ks_histograms(_hist(cb), _hist(ca))
    assert ab.value == ba.value
    if ab.value is not None:
        assert 0.0 <= ab.value <= 1.0


@given(counts, counts)
def test_psi_non_negative(a: list[int], b: list[int]) -> None:
    ca, cb = _pair(a, b)
    p = drift.psi_counts(ca, cb)
    assert p is None or p >= 0.0


@settings(max_examples=60)
@given(
    st.lists(st.floats(-100, 100, allow_nan=False), min_size=1, max_size=200),
    st.lists(st.floats(-100, 100, allow_nan=False), min_size=1, max_size=200),
    st.integers(1, 40),
)
def test_ks_on_shared_edges_is_numpy_on_raw_values_at_the_edges(xa: list[float], xb: list[float], bins: int) -> None:
    """Bin raw values on shared edges; the kernel's KS equals max |CDF_a - CDF_b| over the
    edges computed by numpy from the raw values themselves."""
    a, b = np.array(xa), np.array(xb)
    lo, hi = min(a.min(), b.min()), max(a.max(), b.max()) + 1.0
    edges = np.linspace(lo, hi, bins + 1)
    ha = drift.Histogram(edges, np.histogram(a, edges)[0].astype(np.int64))
    hb = drift.Histogram(edges, np.histogram(b, edges)[0].astype(np.int64))
    # the oracle: the share of raw values below each upper edge (the last edge holds all)
    inner = edges[1:-1]
    fa = np.append(np.searchsorted(np.sort(a), inner, side="left") / len(a), 1.0)
    fb = np.append(np.searchsorted(np.sort(b), inner, side="left") / len(b), 1.0)
    ks = drift.ks_histograms(ha, hb)
    assert ks.exact
    assert abs(ks.value - np.abs(fa - fb).max()) < 1e-12


@given(counts, st.floats(0.1, 3.0), st.floats(-5, 5))
def test_rebinned_ks_is_bounded_and_zero_for_the_same_distribution_on_split_bins(c: list[int], width: float, lower: float) -> None:
    """A histogram against itself with every bin split in two (evenly): the interpolated KS is 0."""
    h = _hist(np.array(c), lower, width)
    split = np.repeat(np.array(c, dtype=np.float64) / 2, 2)
    if sum(c) == 0 or any(x % 2 for x in c):
        return
    h2 = _hist(split.astype(np.int64), lower, width / 2)
    ks = drift.ks_histograms(h, h2)
    assert not ks.exact
    assert ks.value is not None and ks.value < 1e-9


@given(st.lists(st.tuples(st.sampled_from("abcdefg"), st.integers(1, 20)), min_size=1, max_size=7, unique_by=lambda t: t[0]),
       st.lists(st.tuples(st.sampled_from("abcdefg"), st.integers(1, 20)), min_size=1, max_size=7, unique_by=lambda t: t[0]))  # fmt: skip
def test_discrete_ks_is_numpy_over_sorted_categories(a: list[tuple[str, int]], b: list[tuple[str, int]]) -> None:
    ks, psi = drift.discrete_drift(a, b)
    values = sorted({v for v, _ in a} | {v for v, _ in b})
    ca = np.array([dict(a).get(v, 0) for v in values], dtype=float)
    cb = np.array([dict(b).get(v, 0) for v in values], dtype=float)
    assert abs(ks.value - np.abs(np.cumsum(ca) / ca.sum() - np.cumsum(cb) / cb.sum()).max()) < 1e-12
    assert psi.value >= 0.0
    if sorted(a) == sorted(b):
        assert ks.value == 0.0 and psi.value == 0.0


def test_top_value_changes() -> None:
    ch = drift.top_value_changes([("a", 9), ("b", 5), ("c", 3)], [("b", 10), ("a", 8), ("d", 2)])
    assert [(r.value, r.to_rank, r.to_count) for r in ch.gained] == [("d", 3, 2)]
    assert [(r.value, r.from_rank) for r in ch.lost] == [("c", 3)]
    assert sorted((r.value, r.from_rank, r.to_rank) for r in ch.changed_rank) == [("a", 1, 2), ("b", 2, 1)]


def test_psi_groups_at_the_baselines_deciles() -> None:
    a = np.array([10] * 100)
    assert list(np.bincount(drift.decile_groups(a))) == [10] * 10
    # everything moved into the last bin: PSI is large
    b = np.zeros(100)
    b[-1] = 1000
    assert drift.psi_counts(a, b) > 1.0
