"""engine.stats.appendcounts against an independent oracle (numpy over all the raw values).

A table is reduced once at a base, then partitions are appended one at a time; after each,
the kernel's exact statistics must equal numpy's over every value, its head must be the
oracle's first rows, and the segments merged newest-wins must be the oracle's stored rows.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.files import layout, writer
from engine.stats import appendcounts
from engine.stats.profile import _in_hash_order
from engine.stats.valuecounts import batch_value_counts, hashed_counts, merge_counts, narrow_counts, sorted_counts

RATIO = 0.5


def partition_counts(values: pa.Array) -> pa.Table:
    """A partition's value counts as a profile task ships them: strings in hash order with
    their hashes, integers by value."""
    vc = batch_value_counts(values)
    if pa.types.is_string(values.type):
        v, c, h = _in_hash_order(vc["value"].combine_chunks(), vc["count"].to_numpy())
        return hashed_counts(v, c, h)
    return sorted_counts(vc)


def oracle(values: list, type_: pa.DataType) -> dict:
    """Exact statistics and stored rows (value, count in file order) of the raw values."""
    vals = [v for v in values if v is not None]
    uniq, counts = np.unique(np.array(vals, dtype=object if pa.types.is_string(type_) else np.int64), return_counts=True)
    distinct, non_null = len(uniq), len(vals)
    kind = writer.frequency_kind(distinct, non_null, RATIO)
    rows = [(u, int(c)) for u, c in zip(uniq.tolist(), counts.tolist())]
    if kind == layout.FREQ_ALL_DISTINCT:
        rows = []
    elif kind == layout.FREQ_DUPLICATES_ONLY:
        rows = [r for r in rows if r[1] > 1]
    rows.sort(key=lambda r: (-r[1], r[0]))
    out = {"distinct": distinct, "non_null": non_null, "kind": kind, "rows": rows}
    if not pa.types.is_string(type_) and non_null:
        s = np.sort(np.array(vals, np.int64))
        out["percentiles"] = {layout.percentile_column(p): int(s[int(np.floor(p * (non_null - 1)))]) for p in layout.PERCENTILES}
    return out


def _rows(t: pa.Table) -> list[tuple]:
    return list(zip(t["value"].to_pylist(), t["count"].to_pylist()))


def run_appends(parts: list[list], type_: pa.DataType, n_base: int, head_rows: int, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(layout, "FREQUENCIES_HEAD_ROWS", head_rows)
    arrays = [pa.array(p, type_) for p in parts]
    counts = [partition_counts(a) for a in arrays]
    # the base and the earlier appends' counts as the append task reads them: not widened
    # (uint8 when every count is under 256), the new partitions' widened
    base = narrow_counts(merge_counts(counts[:n_base], type_))
    first = oracle([v for p in parts[:n_base] for v in p], type_)
    merged_view = {v: c for v, c in first["rows"]}  # what a reader merging the segments sees
    previous = appendcounts.Previous(
        first["distinct"],
        first["kind"],
        len(first["rows"]),
        pa.table(
            {
                "value": pa.array([r[0] for r in first["rows"][:head_rows]], type_),
                "count": pa.array([r[1] for r in first["rows"][:head_rows]], pa.int64()),
            }
        ),
    )
    for i in range(n_base, len(parts)):
        got = appendcounts.append(type_, base, [narrow_counts(c) for c in counts[n_base:i]], [counts[i]], previous, RATIO)
        want = oracle([v for p in parts[: i + 1] for v in p], type_)
        if got.full:  # the segment replaces the column (small, or its kind changed)
            assert got.rows.num_rows == got.stored_rows
            merged_view = {}
        else:
            assert got.exact["frequencies"] == previous.kind or previous.kind == layout.FREQ_ALL_DISTINCT
        assert got.distinct == got.exact["distinct_count"] == want["distinct"]
        assert got.non_null == want["non_null"]
        assert got.exact["frequencies"] == want["kind"]
        assert got.stored_rows == len(want["rows"])
        for name, value in want.get("percentiles", {}).items():
            assert got.exact[name].as_py() == value, name
        rows = _rows(got.rows)
        n_head = min(head_rows, len(want["rows"]))
        assert rows[:n_head] == want["rows"][:n_head]  # the head is exactly the full file's
        assert len({v for v, _ in rows}) == len(rows)  # no value twice in a segment
        merged_view.update(dict(rows))  # newest wins
        assert sorted(merged_view.items(), key=lambda r: (-r[1], r[0])) == want["rows"]
        previous = appendcounts.Previous(got.distinct, got.exact["frequencies"], got.stored_rows, got.rows.slice(0, n_head))


ints = st.lists(st.integers(-50, 50), min_size=0, max_size=60)
wide_ints = st.lists(st.integers(-(2**62), 2**62), min_size=1, max_size=60)
strings = st.lists(st.sampled_from([f"s{i}" for i in range(40)]), min_size=0, max_size=60)


@pytest.mark.parametrize("small", [0, appendcounts.SMALL], ids=["binary-search", "full-merge"])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=st.lists(ints, min_size=2, max_size=6), n_base=st.integers(1, 3), head_rows=st.sampled_from([1, 3, 8, 1024]))
def test_integers_match_numpy(parts, n_base, head_rows, small, monkeypatch):
    monkeypatch.setattr(appendcounts, "SMALL", small)
    run_appends(parts, pa.int64(), min(n_base, len(parts) - 1), head_rows, monkeypatch)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=st.lists(wide_ints, min_size=2, max_size=5), head_rows=st.sampled_from([2, 1024]))
def test_mostly_distinct_integers_match_numpy(parts, head_rows, monkeypatch):
    monkeypatch.setattr(appendcounts, "SMALL", 0)
    run_appends(parts, pa.int64(), 1, head_rows, monkeypatch)


@pytest.mark.parametrize("small", [0, appendcounts.SMALL], ids=["binary-search", "full-merge"])
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(parts=st.lists(strings, min_size=2, max_size=6), n_base=st.integers(1, 3), head_rows=st.sampled_from([1, 4, 1024]))
def test_strings_match_python(parts, n_base, head_rows, small, monkeypatch):
    monkeypatch.setattr(appendcounts, "SMALL", small)
    run_appends(parts, pa.string(), min(n_base, len(parts) - 1), head_rows, monkeypatch)


def test_a_value_seen_once_then_again_is_stored_when_duplicates_only(monkeypatch):
    """duplicates_only: a value at frequency 1 is in no segment; appended again it must be."""
    monkeypatch.setattr(appendcounts, "SMALL", 0)
    base = list(range(5000)) + [0, 1]  # mostly distinct: only 0 and 1 stored
    run_appends([base, [4999, 7000, 7001]], pa.int64(), 1, 1024, monkeypatch)
    got = appendcounts.append(
        pa.int64(),
        merge_counts([partition_counts(pa.array(base, pa.int64()))], pa.int64()),
        [],
        [partition_counts(pa.array([4999, 7000], pa.int64()))],
        appendcounts.Previous(
            5000, layout.FREQ_DUPLICATES_ONLY, 2, pa.table({"value": pa.array([0, 1], pa.int64()), "count": pa.array([2, 2], pa.int64())})
        ),
        RATIO,
    )
    assert got is not None and _rows(got.rows) == [(0, 2), (1, 2), (4999, 2)]
    assert got.stored_rows == 3 and got.distinct == 5001


def test_all_distinct_becoming_duplicates_only_appends(monkeypatch):
    """The bench's append (a copy of a partition) makes a unique key duplicated: every value
    now stored is one the append touched, so the new segment holds them all."""
    monkeypatch.setattr(appendcounts, "SMALL", 0)
    base = list(range(3000))  # all distinct: nothing stored
    got = appendcounts.append(
        pa.int64(),
        merge_counts([partition_counts(pa.array(base, pa.int64()))], pa.int64()),
        [],
        [partition_counts(pa.array([5, 9, 9000], pa.int64()))],
        appendcounts.Previous(3000, layout.FREQ_ALL_DISTINCT, 0, pa.table({"value": pa.array([], pa.int64()), "count": pa.array([], pa.int64())})),
        RATIO,
    )
    assert got is not None and got.exact["frequencies"] == layout.FREQ_DUPLICATES_ONLY
    assert _rows(got.rows) == [(5, 2), (9, 2)] and got.stored_rows == 2 and got.distinct == 3001


def test_complete_becoming_duplicates_only_holds_the_column_in_full(monkeypatch):
    """Rows stored as complete would stay in the older segments: the segment replaces the column."""
    monkeypatch.setattr(appendcounts, "SMALL", 0)
    base = [v % 1500 for v in range(3000)]  # each twice: complete
    got = appendcounts.append(
        pa.int64(),
        merge_counts([partition_counts(pa.array(base, pa.int64()))], pa.int64()),
        [],
        [partition_counts(pa.array(range(10_000, 20_000), pa.int64()))],
        appendcounts.Previous(1500, layout.FREQ_COMPLETE, 1500, pa.table({"value": pa.array([0], pa.int64()), "count": pa.array([2], pa.int64())})),
        RATIO,
    )
    assert got.full and got.exact["frequencies"] == layout.FREQ_DUPLICATES_ONLY
    assert got.stored_rows == got.rows.num_rows == 1500 and got.distinct == 11_500


@settings(max_examples=40, deadline=None)
@given(parts=st.lists(st.lists(st.integers(-5000, 5000), min_size=1, max_size=40), min_size=2, max_size=4))
def test_decimal_percentiles_match_a_sort(parts):
    """Narrow decimals take the binary search by their unscaled values."""
    from decimal import Decimal

    t = pa.decimal128(12, 2)
    arrays = [pa.array([Decimal(v).scaleb(-2) for v in p], t) for p in parts]
    counts = [sorted_counts(batch_value_counts(a)) for a in arrays]
    base = merge_counts(counts[:1], t)
    d = len(set(parts[0]))
    kind = writer.frequency_kind(d, len(parts[0]), RATIO)
    got = appendcounts.append(
        t,
        base,
        counts[1:-1],
        [counts[-1]],
        appendcounts.Previous(d, kind, 0, pa.table({"value": pa.array([], t), "count": pa.array([], pa.int64())})),
        RATIO,
    )
    everything = sorted(v for p in parts for v in p)
    n = len(everything)
    for p in layout.PERCENTILES:
        assert got.exact[layout.percentile_column(p)].as_py() == Decimal(everything[int(np.floor(p * (n - 1)))]).scaleb(-2)
