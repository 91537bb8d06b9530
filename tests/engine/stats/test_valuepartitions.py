"""The value-partitions kernel (engine.stats.valuepartitions) against a plain-Python oracle."""

from __future__ import annotations

import datetime as dt
from decimal import Decimal

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.stats import sketches, valuecounts
from engine.stats import valuepartitions as vp


def counts_table(d: dict, t: pa.DataType) -> pa.Table:
    return pa.table({"value": pa.array(list(d), t), "count": pa.array(list(d.values()), pa.int64())})


def hashed_table(d: dict, t: pa.DataType) -> pa.Table:
    """String counts as partitions give them: in theta-hash order, with the hashes."""
    values = pa.array(list(d), t)
    hashes = sketches.theta_hashes_bytes(values)
    order = np.argsort(hashes)
    return valuecounts.hashed_counts(values.take(pa.array(order)), np.array(list(d.values()), np.int64)[order], hashes[order])


def oracle(parts: list[dict], values: list) -> list[list[tuple[int, int]]]:
    return [[(j, p[v]) for j, p in enumerate(parts) if v in p] for v in values]


partitions_st = st.lists(st.dictionaries(st.integers(0, 30), st.integers(1, 1 << 40), max_size=20), min_size=1, max_size=9)


@settings(max_examples=300, deadline=None)
@given(parts=partitions_st, extra=st.lists(st.integers(0, 40), max_size=5), data=st.data())
def test_distributions_match_the_oracle(parts: list[dict], extra: list[int], data) -> None:
    universe = sorted(set().union(*parts) | set(extra))
    values = data.draw(st.permutations(universe)) if universe else []
    values = values[: data.draw(st.integers(0, len(values)))]  # a stored subset, in any order
    # ints (integer keys), strings by value (set lookup), strings by their hashes
    form = data.draw(st.sampled_from(["int", "string", "hashed"]))
    t = pa.int64() if form == "int" else pa.string()
    conv = (lambda v: v) if form == "int" else (lambda v: f"v{v}")
    make = hashed_table if form == "hashed" else counts_table
    tables = [make({conv(k): c for k, c in p.items()}, t) for p in parts]
    got = vp.distributions(tables, pa.array([conv(v) for v in values], t), hashed=form == "hashed")
    assert got.type == vp.DISTRIBUTION_TYPE and len(got) == len(values)
    want = oracle(parts, values)
    rows = got.to_pylist()
    assert [vp.decode(r, len(parts)) for r in rows] == want
    for r, w in zip(rows, want):
        # dense exactly when the value is in at least 2/3 of the partitions; a dense vector has one count per partition
        is_dense = r["index"] is None
        assert is_dense == (len(w) > 0 and 3 * len(w) >= 2 * len(parts))
        assert len(r["count"]) == (len(parts) if is_dense else len(w))
        assert sum(r["count"]) == sum(c for _, c in w)
    # flatten is build's inverse
    e = vp.flatten(got, len(parts))
    flat = [(r, p, c) for r, w in enumerate(want) for p, c in w]
    assert list(zip(e.rows.tolist(), e.partitions.tolist(), e.counts.tolist())) == flat


def test_threshold_boundaries() -> None:
    # a value in k of 6 partitions: dense from k = 4 (3k >= 2P)
    assert [bool(vp.dense(k, 6)) for k in range(1, 7)] == [False, False, False, True, True, True]
    assert bool(vp.dense(1, 1)) and not vp.dense(1, 2) and bool(vp.dense(2, 3))
    parts = [counts_table({f"k{k}": 1 for k in range(1, 7) if j < k}, pa.string()) for j in range(6)]
    rows = vp.distributions(parts, pa.array([f"k{k}" for k in range(1, 7)])).to_pylist()
    assert [r["index"] is None for r in rows] == [False, False, False, True, True, True]
    assert rows[3] == {"index": None, "count": [1, 1, 1, 1, 0, 0]}
    assert rows[0] == {"index": [0], "count": [1]}


@pytest.mark.parametrize(
    "t, values",
    [
        (pa.decimal128(12, 2), [Decimal("1.50"), Decimal("-2.25"), Decimal("0.00")]),
        (pa.decimal256(40, 3), [Decimal("1.500"), Decimal("123456789012345678901234567890.125")]),
        (pa.date32(), [dt.date(2024, 2, 29), dt.date(1970, 1, 1)]),
        (pa.binary(), [b"\x00", b"ab", b""]),
        (pa.large_string(), ["a", "é", ""]),
        (pa.string_view(), ["x", "y"]),
        (pa.bool_(), [True, False]),
        (pa.uint64(), [0, 2**64 - 1]),
        (pa.int8(), [-128, 127]),
    ],
)
def test_types(t: pa.DataType, values: list) -> None:
    parts = [counts_table({values[0]: 3, values[-1]: 1}, t), counts_table({}, t), counts_table({v: 2 for v in values}, t)]
    got = vp.distributions(parts, pa.array(values[::-1], t)).to_pylist()
    want = oracle([{values[0]: 3, values[-1]: 1}, {}, {v: 2 for v in values}], values[::-1])
    assert [vp.decode(r, 3) for r in got] == want


@pytest.mark.parametrize("hashed", [False, True])
def test_string_forms_agree(hashed: bool) -> None:
    rng = np.random.default_rng(2)
    dicts = [{f"s{int(v)}": int(rng.integers(1, 5)) for v in rng.choice(3000, 1500, replace=False)} for _ in range(5)]
    values = pa.array([f"s{v}" for v in rng.permutation(3500)])
    by_value = vp.distributions([counts_table(d, pa.string()) for d in dicts], values)
    by_hash = vp.distributions([hashed_table(d, pa.string()) for d in dicts], values, hashed=hashed)
    assert by_hash.to_pylist() == by_value.to_pylist()
    assert [vp.decode(r, 5) for r in by_value.to_pylist()] == oracle(dicts, values.to_pylist())


def test_no_partitions_no_values_and_values_found_nowhere() -> None:
    assert len(vp.distributions([], pa.array([], pa.int64()))) == 0
    got = vp.distributions([counts_table({}, pa.int64())] * 2, pa.array([1, 2], pa.int64())).to_pylist()
    assert got == [{"index": [], "count": []}] * 2
    assert vp.distributions([counts_table({1: 1}, pa.int64())], pa.array([], pa.int64())).to_pylist() == []


def test_chunks_keep_int32_offsets(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(0)
    parts = [counts_table({int(v): int(rng.integers(1, 9)) for v in rng.choice(50, 30, replace=False)}, pa.int64()) for _ in range(7)]
    values = pa.array(np.arange(50), pa.int64())
    whole = vp.distributions(parts, values)
    assert whole.num_chunks == 1
    monkeypatch.setattr(vp, "_MAX_CHUNK_ENTRIES", 16)
    chunked = vp.distributions(parts, values)
    assert chunked.num_chunks > 5
    assert chunked.to_pylist() == whole.to_pylist()
    for chunk in chunked.chunks:
        assert len(chunk.field("count").flatten()) <= 16 or len(chunk) == 1


def test_build_takes_entries_in_any_order() -> None:
    rng = np.random.default_rng(1)
    rows, parts = np.divmod(rng.permutation(40 * 6)[:150], 6)  # distinct (row, partition) pairs
    e = vp.Entries(rows.astype(np.int64), parts.astype(np.int32), rng.integers(1, 100, 150))
    got = vp.flatten(vp.build(e, 40, 6), 6)
    order = np.lexsort((e.partitions, e.rows))
    assert got.rows.tolist() == e.rows[order].tolist() and got.partitions.tolist() == e.partitions[order].tolist()
    assert got.counts.tolist() == e.counts[order].tolist()
    assert vp.build(got, 40, 6).to_pylist() == vp.build(e, 40, 6).to_pylist()


def test_bad_entries() -> None:
    with pytest.raises(ValueError, match="same length"):
        vp.Entries(np.array([0]), np.array([], np.int32), np.array([1]))
    with pytest.raises(ValueError, match="dense"):
        vp.decode({"index": None, "count": [1, 2]}, 3)
