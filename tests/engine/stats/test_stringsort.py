"""The word-by-word string sort (engine.stats.stringsort) against Python's sort of bytes."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.stats import stringsort
from engine.stats.valuecounts import by_frequency, frequency_order, sorted_counts

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

#: few symbols, so values share prefixes of every length; NUL, multi-byte and long values
TEXT = st.text(alphabet=st.sampled_from(["a", "b", "\x00", "é", "日", "\U0001f600", "\x7f"]), max_size=30) | st.text(max_size=3)


def _key(v: str | bytes) -> bytes:
    return v.encode() if isinstance(v, str) else v


@SETTINGS
@given(
    values=st.lists(TEXT, max_size=120),
    t=st.sampled_from([pa.string(), pa.large_string(), pa.binary(), pa.large_binary()]),
    with_major=st.booleans(),
    offset=st.integers(0, 2),
    data=st.data(),
)
def test_sort_matches_python_byte_order(values, t, with_major, offset, data):
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        values = [v.encode() for v in values]
    arr = pa.array(["pad"] * offset + values, t).slice(offset)  # offsets into the buffers
    major = np.array(data.draw(st.lists(st.integers(-3, 3), min_size=len(values), max_size=len(values))), np.int64) if with_major else None
    words_only = data.draw(st.booleans())  # never fall back to the comparison sort
    saved = stringsort.FALLBACK_TIED_SHARE
    stringsort.FALLBACK_TIED_SHARE = 2.0 if words_only else saved
    try:
        order = stringsort.sort_indices(arr, major)
    finally:
        stringsort.FALLBACK_TIED_SHARE = saved
    assert sorted(order.tolist()) == list(range(len(values)))
    got = [((int(major[i]),) if with_major else ()) + (_key(values[i]),) for i in order]
    assert got == sorted(got)


@pytest.mark.parametrize("n", [5_000, 20_000])
def test_long_shared_prefixes_take_the_comparison_sort(n):
    """URL-like values (one long shared prefix) and random ones give the same order either way."""
    rng = np.random.default_rng(n)
    urls = [f"https://example.com/a/long/shared/path/{int(i)}" for i in rng.integers(0, 10**9, n)]
    words = ["".join(chr(97 + int(c)) for c in rng.integers(0, 26, int(k))) for k in rng.integers(0, 40, n)]
    for values in (urls, words):
        arr = pa.array(values)
        major = -rng.integers(1, 5, n)
        order = stringsort.sort_indices(arr, major)
        got = [(int(major[i]), values[i].encode()) for i in order]
        assert got == sorted(got)


def test_tiny_buffers_and_empty_values():
    for values in ([], [""], ["", ""], ["b", "", "a"], ["\x00", "", "\x00\x00"]):
        order = stringsort.sort_indices(pa.array(values, pa.string()))
        assert [values[i] for i in order] == sorted(values, key=str.encode)
    with pytest.raises(ValueError):
        stringsort.sort_indices(pa.array(["a", None]))


@SETTINGS
@given(values=st.lists(TEXT, max_size=80), data=st.data())
def test_frequency_order_equals_sort_by_value_then_count(values, data):
    distinct = sorted(set(values))
    counts = data.draw(st.lists(st.integers(1, 4), min_size=len(distinct), max_size=len(distinct)))
    table = pa.table({"value": pa.array(distinct, pa.string()), "count": pa.array(counts, pa.int64())})
    shuffled = table.take(pa.array(np.random.default_rng(len(values)).permutation(len(distinct)), pa.int64()))
    want = by_frequency(sorted_counts(shuffled))
    assert frequency_order(shuffled).equals(want)


def test_repeated_values_are_settled_by_equality_not_the_comparison_sort(monkeypatch):
    """Every value twice or three times, some distinct values sharing their first 8 bytes:
    the word sort handles it (repeats settled by one equality test), in byte order."""
    rng = np.random.default_rng(5)
    base = [f"{int(k):07x}-{'x' * int(k % 3)}{int(k % 5)}" for k in rng.integers(0, 10**6, 30_000)]
    values = base + base + base[:10_000] + [b + "\x00" for b in base[:50]] + ["", "", "\x00"]
    rng.shuffle(values)

    def refuse(*_: object) -> None:
        raise AssertionError("fell back to the comparison sort")

    monkeypatch.setattr(stringsort, "_comparison_sort", refuse)
    for t in (pa.string(), pa.large_binary()):
        arr = pa.array([v.encode() for v in values] if t == pa.large_binary() else values, t)
        order = stringsort.sort_indices(arr)
        assert [values[i].encode() for i in order] == sorted(v.encode() for v in values)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.integers(0, 2**64 - 1) | st.integers(0, 7) | st.sampled_from([2**63, 2**63 + 1, 2**64 - 1, (2**20 - 1) << 44]), max_size=300),
    st.integers(0, 5),
)
def test_packed_argsort_sorts_the_words(words: list[int], shift: int) -> None:
    """The packed sort (high bits and index in one word) orders words as an argsort does,
    words equal in their high bits but not their low ones included (small values, shifted)."""
    w = np.array(words, dtype=np.uint64) << np.uint64(shift)
    order = stringsort._argsort_words(w)
    assert sorted(order.tolist()) == list(range(len(w)))
    assert np.array_equal(w[order], np.sort(w))
