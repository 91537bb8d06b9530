"""The radix sort of the sorted view (engine/stats/radixsort.py) against np.sort, bit for bit."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.stats import radixsort

INTS = [np.int32, np.int64, np.uint32, np.uint64]
FLOATS = [np.float32, np.float64]


@pytest.fixture(autouse=True)
def _radix_from_one_value(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(radixsort, "RADIX_MIN", 1)  # small drawn arrays take the radix path too


def _same(x: np.ndarray) -> None:
    got, want = radixsort.sort(x), np.sort(x)
    assert got.dtype == want.dtype and got.tobytes() == want.tobytes()


@settings(max_examples=150, deadline=None)
@given(dtype=st.sampled_from(INTS), data=st.data())
def test_integers_sort_as_numpy(dtype, data) -> None:
    info = np.iinfo(dtype)
    narrow = st.integers(-3, 3).map(lambda v: v % 7 if info.min == 0 else v)
    values = st.one_of(st.integers(int(info.min), int(info.max)), narrow, st.sampled_from([int(info.min), int(info.max), 0]))
    _same(np.array(data.draw(st.lists(values, max_size=300)), dtype))


@settings(max_examples=150, deadline=None)
@given(dtype=st.sampled_from(FLOATS), data=st.data())
def test_floats_sort_as_numpy(dtype, data) -> None:
    width = 32 if dtype == np.float32 else 64
    values = st.one_of(st.floats(width=width, allow_nan=False), st.sampled_from([0.0, -1.0, 1.0, np.inf, -np.inf, 5e-324 if width == 64 else 1e-45]))
    x = np.array(data.draw(st.lists(values, max_size=300)), dtype)
    _same(x + x.dtype.type(0))  # -0.0 folded into 0.0, as the sorted view has them


def test_bytes_every_value_shares_are_skipped_and_other_types_fall_back() -> None:
    x = (np.arange(10_000, dtype=np.int64) * 7919) % 10_007 + (1 << 40)  # the high bytes: all equal
    _same(x)
    _same(np.array([3, -1, 2], np.int16))  # 2-byte values: numpy's sort
    assert not radixsort.supports(np.dtype(np.int16))


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_hash_order_is_a_stable_argsort(data) -> None:
    values = st.one_of(st.integers(0, 2**64 - 1), st.integers(0, 5), st.sampled_from([2**63, 2**64 - 1]))
    hashes = np.array(data.draw(st.lists(values, max_size=300)), np.uint64)
    ordered, order = radixsort.hash_order(hashes)
    want = np.argsort(hashes, kind="stable")
    assert np.array_equal(order, want) and order.dtype == np.int64
    assert ordered.dtype == np.uint64 and ordered.tobytes() == hashes[want].tobytes()
