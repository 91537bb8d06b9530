"""StringParts: the hash merge and gather of strings across several arrays, checked against Python."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.stats import sketches
from engine.stats.stringparts import SharedHash, StringParts
from engine.stats.valuecounts import hashed_counts, hashed_frequencies, merge_counts

TYPES = [pa.string(), pa.large_string(), pa.binary(), pa.large_binary()]


def _binary(type_: pa.DataType) -> bool:
    return pa.types.is_binary(type_) or pa.types.is_large_binary(type_)


def _part(values: list[str], type_: pa.DataType, pad: int) -> pa.Table:
    """Hash-ordered counts of one part, its values a slice of a larger array (an offset)."""
    counts = Counter(values)
    distinct = list(counts)
    raw = ["pad"] * pad + distinct
    arr = pa.array([v.encode() for v in raw] if _binary(type_) else raw, type_).slice(pad)
    hashes = sketches.theta_hashes_bytes(arr)
    order = np.argsort(hashes, kind="stable")
    return hashed_counts(arr.take(pa.array(order)), np.array([counts[distinct[i]] for i in order], np.int64), hashes[order])


words = st.text(alphabet="ab\u00e9\U0001f600 ", min_size=0, max_size=40)


@settings(max_examples=60, deadline=None)
@given(parts=st.lists(st.lists(words, max_size=40), min_size=1, max_size=6), type_=st.sampled_from(TYPES), pad=st.integers(0, 3))
def test_hash_merge_and_gather_equal_a_counter(parts, type_, pad) -> None:
    tables = [_part(p, type_, pad) for p in parts]
    want = Counter(v for p in parts for v in p)
    merged = merge_counts(tables, type_)
    decode = (lambda v: v.decode()) if _binary(type_) else (lambda v: v)
    got = {decode(v): c for v, c in zip(merged["value"].to_pylist(), merged["count"].to_pylist())}
    assert got == dict(want)
    assert merged["value"].type == type_
    n_all = sum(want.values())
    distinct, kind, stored = hashed_frequencies(tables, type_, lambda d: "complete")
    assert distinct == len(want) and kind == "complete"
    rows = [(decode(v), c) for v, c in zip(stored["value"].to_pylist(), stored["count"].to_pylist())]
    key = lambda r: (-r[1], r[0].encode())
    assert rows == sorted(want.items(), key=key) and sum(c for _, c in rows) == n_all


def test_take_gathers_rows_of_any_part_in_any_order() -> None:
    a = pa.array(["x", "", "yy", "zzz"]).slice(1)
    b = pa.array(["long " * 50, "q"])
    parts = StringParts([a, b, pa.array([], pa.string())], pa.string())
    assert len(parts) == 5
    rows = np.array([4, 0, 3, 2, 1, 4])
    assert parts.take(rows).to_pylist() == ["q", "", "long " * 50, "zzz", "yy", "q"]
    assert parts.take(np.zeros(0, np.int64)).to_pylist() == []


@pytest.mark.parametrize("type_", [pa.string(), pa.large_string()])
def test_different_values_sharing_a_hash_are_found(type_) -> None:
    """Forced collisions: equal hashes over different bytes make the group walk refuse,
    and the reduction then counts by value (still exact)."""
    parts = StringParts([pa.array(["ab", "cd"], type_), pa.array(["ab", "ce"], type_)], type_)
    same = np.zeros(4, np.uint64)
    with pytest.raises(SharedHash) as shared:
        parts.group(np.array([0, 2, 1, 3]), same, np.ones(4, np.int64))
    assert shared.value.position == 2  # "cd" (row 1) after the two "ab" rows
    hashes = np.array([5, 7, 5, 9], np.uint64)  # the two "ab" share a hash, the others do not
    order = np.argsort(hashes, kind="stable")
    rows, summed = parts.group(order, hashes[order], np.array([2, 1, 3, 1], np.int64)[order])
    assert rows.tolist() == [0, 1, 3] and summed.tolist() == [5, 1, 1]
    collided = [
        pa.table({"value": pa.array(["ab", "cd"], type_), "count": [2, 1], "hash": pa.array([1, 2], pa.uint64())}, metadata={"sorted": "hash"}),
        pa.table({"value": pa.array(["ce"], type_), "count": [4], "hash": pa.array([2], pa.uint64())}, metadata={"sorted": "hash"}),
    ]
    assert hashed_frequencies(collided, type_, lambda d: "complete") is None
    merged = merge_counts(collided, type_)
    assert dict(zip(merged["value"].to_pylist(), merged["count"].to_pylist())) == {"ab": 2, "cd": 1, "ce": 4}
