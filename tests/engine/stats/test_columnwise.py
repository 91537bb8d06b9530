"""The driver's column-wise merge (engine/stats/columnwise.py) against the pairwise fold (hypothesis).

For random columns split into random partitions, the states put field by field
(StateColumns), in batches and put back in partition order (concat, take), with one
theta union a batch, merge to the state ``ColumnProfile.merge_all`` folds, field for
field and bit for bit: the statistics files must not change with the way the driver
merges, nor with the batches.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import struct

import numpy as np
import pyarrow as pa
from hypothesis import given
from hypothesis import strategies as st

from engine.measures.moments import Moments, MomentsMeasure
from engine.stats import columnwise, sketches
from engine.stats.columnwise import StateColumns
from engine.stats.profile import ColumnProfile, ColumnState
from tests.engine.stats.test_merge_laws import SETTINGS, USER, columns, fold, splits


def _bits(x: object) -> object:
    """Floats by their bits (-0.0 is not 0.0, NaN is NaN), anything else as is."""
    return struct.pack("<d", x) if isinstance(x, float) else x


def _same_scalar(a: pa.Scalar | None, b: pa.Scalar | None) -> bool:
    if a is None or b is None:
        return a is b
    if a.type != b.type or not a.equals(b):
        return False
    return not pa.types.is_floating(a.type) or _bits(float(a.as_py())) == _bits(float(b.as_py()))


def assert_same_state(got: ColumnState, want: ColumnState) -> None:
    assert got.counts == want.counts
    assert _same_scalar(got.minmax.min, want.minmax.min) and _same_scalar(got.minmax.max, want.minmax.max), (got.minmax, want.minmax)
    # the registered statistics (engine/measures: moments, skewness, ...), field by field and bit for bit
    assert got.measures.keys() == want.measures.keys()
    for name in want.measures:
        g, w = dataclasses.astuple(got.measures[name]), dataclasses.astuple(want.measures[name])
        assert [(_bits(x), type(x)) for x in g] == [(_bits(x), type(x)) for x in w], name
    # KLL: the same sketch (no compaction below k items: the merge draws no random bits here)
    assert (got.kll.blob if got.kll else None) == (want.kll.blob if want.kll else None)
    assert tuple(map(_bits, got.finite_range or ())) == tuple(map(_bits, want.finite_range or ()))
    assert got.theta == want.theta
    assert got.distinct == want.distinct
    assert got.user.keys() == want.user.keys()
    for name in want.user:
        assert repr(got.user[name]) == repr(want.user[name])


@SETTINGS
@given(data=st.data())
def test_columnwise_merge_equals_pairwise_fold(data):
    arr = data.draw(columns())
    pieces = data.draw(splits(len(arr), max_pieces=8))
    p = ColumnProfile("c", arr.type, USER)
    states = [fold(p, arr.slice(a, b - a)).state for a, b in pieces]
    want = p.merge_all(states)

    # the partitions as batch tasks ship them: shuffled into batches, then put back in order
    order = data.draw(st.permutations(range(len(states))))
    cut = sorted(data.draw(st.lists(st.integers(0, len(order)), max_size=3)))
    bounds = [0, *cut, len(order)]
    ranges = [(a, b) for a, b in zip(bounds[:-1], bounds[1:]) if b > a]
    batches = [StateColumns.of(p, [states[i] for i in order[a:b]]) for a, b in ranges]
    theta = [columnwise.union_theta([states[i] for i in order[a:b]]) for a, b in ranges]
    shipped = [i for a, b in ranges for i in order[a:b]]
    position = {i: k for k, i in enumerate(shipped)}
    cols = StateColumns.concat(batches).take([position[i] for i in range(len(states))])

    assert_same_state(columnwise.merge(p, cols, theta), want)


@SETTINGS
@given(
    seed=st.integers(0, 2**32 - 1),
    sizes=st.lists(st.sampled_from([0, 1, 3, 100, 4000, 4096, 4097, 7680, 7681, 12000]), min_size=1, max_size=10),
    pool=st.sampled_from([50, 5000, 20000, 200000]),
    data=st.data(),
)
def test_theta_union_is_the_same_in_any_order_or_grouping(seed, sizes, pool, data):
    """What lets a batch task ship one union of its partitions' sketches: partitions' sketches
    (exact and sampled, overlapping) unioned in batches of a shuffled order, then the unions
    unioned, give the bytes of one union of all in partition order."""
    rng = np.random.default_rng(seed)
    hashes = rng.integers(1, 2**63 - 1, size=pool, dtype=np.int64).astype(np.uint64)
    blobs = [sketches.theta_of_hashes(np.unique(rng.choice(hashes, size=n))) if n else None for n in sizes]
    order = data.draw(st.permutations(range(len(blobs))))
    cuts = sorted(data.draw(st.lists(st.integers(0, len(order)), max_size=4)))
    bounds = [0, *cuts, len(order)]
    unions = [sketches.merge_theta([blobs[i] for i in order[a:b]]) for a, b in zip(bounds[:-1], bounds[1:]) if b > a]
    assert sketches.merge_theta(unions) == sketches.merge_theta(blobs)


FLOATS = st.floats(allow_nan=True, allow_infinity=True, width=64) | st.sampled_from([0.0, -0.0, math.inf, -math.inf, 1e308])


@SETTINGS
@given(
    parts=st.lists(
        st.tuples(st.integers(0, 2**40) | st.sampled_from([0, 1]), FLOATS, st.floats(0, 1e300) | st.sampled_from([math.nan, math.inf]), FLOATS),
        max_size=12,
    )
)
def test_moments_merge_all_equals_pairwise_merge(parts):
    acc = MomentsMeasure(pa.float64())
    states = [Moments(n, mean, m2, s) for n, mean, m2, s in parts]
    want = functools.reduce(acc.merge, states, acc.zero())
    got = acc.merge_all(states)
    assert (got.n, _bits(got.mean), _bits(got.m2), _bits(got.sum)) == (want.n, _bits(want.mean), _bits(want.m2), _bits(want.sum))


def test_zero_extremes_keep_the_folds_choice():
    """-0.0 and 0.0 tie: the merged min is whichever the pairwise fold keeps."""
    p = ColumnProfile("c", pa.float64(), [])
    states = [fold(p, pa.array(v, pa.float64())).state for v in ([0.0, 1.0], [-0.0, 2.0], [0.0, -0.0], [None])]
    want = p.merge_all(states)
    got = columnwise.merge(p, StateColumns.of(p, states), [columnwise.union_theta(states)])
    assert_same_state(got, want)
