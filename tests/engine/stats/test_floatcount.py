"""The compiled float count (engine.stats.floatcount) against numpy and Arrow."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.stats import floatcount, ranks


def _by_bits(values: np.ndarray, counts: np.ndarray) -> dict[int, int]:
    words = values.view(np.uint32 if values.dtype == np.float32 else np.uint64)
    return dict(zip(words.tolist(), counts.tolist()))


def _oracle(arr: pa.Array | pa.ChunkedArray) -> dict[int, int]:
    """numpy's unique over the bit patterns of the valid values."""
    valid = (
        arr.drop_null().to_numpy(zero_copy_only=False)
        if isinstance(arr, pa.Array)
        else np.concatenate([c.drop_null().to_numpy(zero_copy_only=False) for c in arr.chunks] or [np.zeros(0, arr.type.to_pandas_dtype())])
    )
    words, counts = np.unique(valid.view(np.uint32 if valid.dtype == np.float32 else np.uint64), return_counts=True)
    return dict(zip(words.tolist(), counts.tolist()))


NAN_PAYLOAD = np.array([0x7FF8000000000001], np.uint64).view(np.float64)[0]  # a NaN with another payload


@settings(max_examples=150, deadline=None)
@given(
    values=st.lists(
        st.one_of(
            st.none(),
            st.sampled_from([0.0, -0.0, np.inf, -np.inf, np.nan, NAN_PAYLOAD, 1.5, 2.25]),
            st.floats(allow_nan=False, width=64),
        ),
        max_size=400,
    ),
    float32=st.booleans(),
    cut=st.integers(0, 400),
    offset=st.integers(0, 9),
    expected=st.one_of(st.none(), st.floats(0, 5000)),
)
def test_counts_equal_numpy_unique_over_bits(values, float32, cut, offset, expected):
    t = pa.float32() if float32 else pa.float64()
    whole = pa.array([None] * offset + values, t).slice(offset)  # an offset into the validity bits
    arr = pa.chunked_array([whole.slice(0, cut), whole.slice(cut)], t)
    distinct, counts = floatcount.count(arr, expected)
    assert distinct.dtype == (np.float32 if float32 else np.float64) and counts.dtype == np.int64
    assert len(set(distinct.view(np.uint32 if float32 else np.uint64).tolist())) == len(distinct)
    assert _by_bits(distinct, counts) == _oracle(arr)


@pytest.mark.parametrize("expected", [None, 10.0, 1e6])
def test_growth_past_the_first_tables_matches_arrow(expected):
    rng = np.random.default_rng(0)
    x = np.round(rng.normal(size=300_000), 3)  # ~6,000 distinct, repeated
    x = np.concatenate([x, rng.normal(size=100_000)])  # and 100,000 more, all distinct
    arr = pa.array(np.where(rng.random(len(x)) < 0.05, np.nan, x), mask=rng.random(len(x)) < 0.03)
    distinct, counts = floatcount.count(arr, expected)
    ref_values, ref_counts = pc.value_counts(arr).flatten()
    keep = ref_values.is_valid()
    ref = _by_bits(ref_values.filter(keep).to_numpy(zero_copy_only=False), ref_counts.filter(keep).to_numpy())
    assert _by_bits(distinct, counts) == ref
    assert counts.sum() == len(arr) - arr.null_count


def test_only_float32_and_float64():
    assert floatcount.supports(pa.float32()) and floatcount.supports(pa.float64())
    assert not floatcount.supports(pa.float16()) and not floatcount.supports(pa.int64())
    with pytest.raises(TypeError, match="float32 or float64"):
        floatcount.count(pa.array([1, 2]))
    d, c = floatcount.count(pa.array([None, None], pa.float64()))
    assert len(d) == 0 and len(c) == 0


def test_runs_of_a_float_column_fold_zeros_and_nans_as_ieee_equality():
    """What the quantile prepare task keeps: sorted runs, -0.0 with 0.0, every NaN in one run."""
    values = [0.0, -0.0, NAN_PAYLOAD, np.nan, None, 3.5, -np.inf, 3.5, 0.0]
    arr = pa.chunked_array([pa.array(values[:4]), pa.array(values[4:])])
    runs, nulls, nans = ranks._count_arrow(arr)
    assert nulls == 1 and nans == 2
    got = list(zip(runs.values.tolist(), runs.counts.tolist()))
    assert got[:3] == [(-np.inf, 1), (0.0, 3), (3.5, 2)] and np.isnan(got[3][0]) and got[3][1] == 2
    assert ranks._count_arrow(pa.array([1, 2])) is None  # integers take the numpy keys
