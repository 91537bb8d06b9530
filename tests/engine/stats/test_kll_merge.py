"""The deterministic KLL merge (sketches.merge_kll, issue #28) against DataSketches and numpy.

DataSketches' own merge compacts with random bits seeded by the clock, so the table's
percentiles of floats and times moved between analyzes of the same data. merge_kll
compacts as DataSketches does with a coin of fixed seed: the same sketches give the same
bytes, which DataSketches reads back unchanged, with the merged count and extremes, and
every rank within the sketch's own bound of numpy's exact rank.
"""

from __future__ import annotations

import datasketches as ds
import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.stats import sketches
from tests.engine.stats.test_kll_sorted import _max_rank_error


def _sorted_sketch(x: np.ndarray) -> bytes:
    s = np.sort(x)
    return sketches.kll_of_sorted(len(s), lambda p: s[p]).blob  # type: ignore[return-value]


def _own_sketch(x: np.ndarray) -> bytes:
    s = ds.kll_doubles_sketch(sketches.KLL_K)
    s.update(np.ascontiguousarray(x, dtype=np.float64))
    return s.serialize()


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    sizes=st.lists(st.sampled_from([0, 1, 2, 150, 200, 201, 1000, 12_500, 60_000]), min_size=2, max_size=12),
    own=st.lists(st.booleans(), min_size=12, max_size=12),
    shape=st.sampled_from(["normal", "lognormal", "few", "zeros"]),
)
def test_merge_is_deterministic_valid_and_within_its_bound(seed: int, sizes: list[int], own: list[bool], shape: str) -> None:
    rng = np.random.default_rng(seed)
    draw = {
        "normal": lambda n: rng.normal(size=n),
        "lognormal": lambda n: rng.lognormal(0, 2, n),
        "few": lambda n: rng.integers(0, 5, n).astype(np.float64),
        "zeros": lambda n: rng.choice([-0.0, 0.0, 1.0], n),
    }[shape]
    parts = [draw(n) for n in sizes]
    # partitions' sketches as analyze builds them, or DataSketches' own update (older partial states)
    blobs = [(_own_sketch(p) if o else _sorted_sketch(p)) if len(p) else None for p, o in zip(parts, own)]
    kept = [b for b in blobs if b is not None]
    if not kept:
        return
    merged = sketches.merge_kll(kept)
    assert sketches.merge_kll(list(kept)) == merged  # the same input, the same bytes
    s = ds.kll_doubles_sketch.deserialize(merged)
    assert s.serialize() == merged  # DataSketches reads and writes the very same bytes
    whole = np.sort(np.concatenate(parts))
    assert s.n == len(whole) and s.get_min_value() == whole[0] and s.get_max_value() == whole[-1]
    if len(whole) <= sketches.KLL_K:  # no compaction: every value kept
        assert not s.is_estimation_mode()
        assert sorted(v for v, _ in s) == whole.tolist()
    assert _max_rank_error(s, whole) <= s.normalized_rank_error(False)
    # and it keeps merging: with DataSketches' own merge, and by merge_kll again
    again = ds.kll_doubles_sketch.deserialize(merged)
    again.merge(ds.kll_doubles_sketch.deserialize(kept[0]))
    assert again.n == s.n + ds.kll_doubles_sketch.deserialize(kept[0]).n


def test_zeros_of_either_sign_give_the_same_bytes_in_any_order() -> None:
    """-0.0 and 0.0 compare equal, so a sort leaves them in any order; the sketches do not
    depend on it. (Sketches of up to k values: DataSketches' update keeps them all, no coin.)"""
    rng = np.random.default_rng(3)
    a = np.array([0.0, -0.0] * 70 + [1.0, 2.0])
    b = np.array([-0.0, 0.0] * 70 + [2.0, 1.0, 3.0])
    x = sketches.merge_kll([_own_sketch(a), _own_sketch(b)])
    y = sketches.merge_kll([_own_sketch(rng.permutation(a)), _own_sketch(rng.permutation(b))])
    assert ds.kll_doubles_sketch.deserialize(x).is_estimation_mode() and x == y
    many = np.concatenate([a, b, rng.normal(size=5000)])
    one = sketches.kll_update(sketches.Kll(), many)
    assert one == sketches.kll_update(sketches.Kll(), rng.permutation(many))


def test_merged_table_percentiles_beat_the_bound_on_many_partitions() -> None:
    """1,024 partitions merged at once (the driver's merge at the bench's scale)."""
    rng = np.random.default_rng(11)
    x = rng.lognormal(4, 1, 1024 * 300)
    blobs = [_sorted_sketch(p) for p in np.array_split(x, 1024)]
    s = ds.kll_doubles_sketch.deserialize(sketches.merge_kll(blobs))
    assert s.n == len(x) and s.num_retained <= 3 * sketches.KLL_K
    assert _max_rank_error(s, np.sort(x)) <= s.normalized_rank_error(False)
