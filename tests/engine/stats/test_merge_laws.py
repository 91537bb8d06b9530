"""Merge laws of ColumnProfile (hypothesis): what lets partitions roll up to a table without a rescan.

For random arrays and a random split into k pieces, merging the pieces' folded
states finalizes to the statistics of folding the whole array; merge is
associative and commutative and zero is its identity.
"""

from __future__ import annotations

import math
from decimal import Decimal
from functools import reduce

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine import measures
from engine.stats import sortedvalues
from engine.stats.histograms import make_spec, to_domain
from engine.stats.profile import ColumnProfile
from engine.stats.user import TOP1_CAPACITY, TOP1_SHARE, ZERO_COUNT
from engine.stats.valuecounts import HASH, ValueCountsAccumulator, counts_hashed, hashed_counts, hashed_frequencies, merge_counts, sorted_counts
from engine.types import HistogramDomain, histogram_domain

INT64_MIN, INT64_MAX, UINT64_MAX = -(2**63), 2**63 - 1, 2**64 - 1
USER = [ZERO_COUNT, TOP1_SHARE]
SPECIAL_FLOATS = st.sampled_from([math.nan, math.inf, -math.inf, -0.0, 0.0])

#: kind -> (type, strategy of one non-null value, how the Python values become an array)
KINDS = {
    "int64": (pa.int64(), st.integers(INT64_MIN, INT64_MAX) | st.integers(-3, 3) | st.sampled_from([INT64_MIN, INT64_MAX])),
    "int32": (pa.int32(), st.integers(-(2**31), 2**31 - 1) | st.integers(-3, 3)),
    "uint64": (pa.uint64(), st.integers(0, UINT64_MAX) | st.sampled_from([0, UINT64_MAX])),
    "int8": (pa.int8(), st.integers(-128, 127)),
    "float64": (pa.float64(), st.floats(-1e6, 1e6) | SPECIAL_FLOATS),
    "float32": (pa.float32(), st.floats(-1e6, 1e6, width=32) | SPECIAL_FLOATS),
    "decimal": (pa.decimal128(12, 3), st.decimals(min_value=-(10**8), max_value=10**8, places=3, allow_nan=False, allow_infinity=False)),
    "string": (pa.string(), st.text(max_size=6) | st.sampled_from(["a", "é", "日本", ""])),
    "binary": (pa.binary(), st.binary(max_size=4)),
    "bool": (pa.bool_(), st.booleans()),
    "date32": (pa.date32(), st.integers(-(10**6), 10**6)),
    "timestamp": (pa.timestamp("us", tz="UTC"), st.integers(-(2**62), 2**62) | st.integers(0, 5)),
}


def to_array(values: list, t: pa.DataType) -> pa.Array:
    if pa.types.is_date32(t):
        return pa.array(values, pa.int32()).view(t)
    if pa.types.is_timestamp(t):
        return pa.array(values, pa.int64()).view(t)
    if pa.types.is_decimal(t):
        return pa.array([None if v is None else Decimal(v) for v in values], t)
    return pa.array(values, t)


@st.composite
def columns(draw, max_size: int = 60):
    kind = draw(st.sampled_from(sorted(KINDS)))
    t, value = KINDS[kind]
    values = draw(st.lists(st.none() | value, max_size=max_size))
    return to_array(values, t)


@st.composite
def splits(draw, n: int, max_pieces: int = 5) -> list[tuple[int, int]]:
    """A random split of range(n) into 1..max_pieces consecutive pieces (empty pieces allowed)."""
    k = draw(st.integers(1, max_pieces))
    cuts = sorted(draw(st.lists(st.integers(0, n), min_size=k - 1, max_size=k - 1)))
    bounds = [0, *cuts, n]
    return list(zip(bounds[:-1], bounds[1:]))


# ---------------------------------------------------------------- fold / merge / finalize
class Folded:
    """A column state and its exact values state (what a partition task ships)."""

    def __init__(self, state, values_state):
        self.state = state
        self.values = values_state


def fold(p: ColumnProfile, arr: pa.Array, batches: int = 1) -> Folded:
    """A partition's fold: update batch by batch, then finalize the partition (which sets its theta sketch)."""
    state = p.zero()
    vs = p.values.zero() if p.values else None
    bounds = np.linspace(0, len(arr), batches + 1).astype(int)
    for a, b in zip(bounds[:-1], bounds[1:]):
        chunk = arr.slice(int(a), int(b - a))
        state = p.update(state, chunk)
        if p.values:
            vs = p.values.update(vs, chunk)
    p.finalize_partition(state, _copy_values(p, vs))
    return Folded(state, vs)


def _copy_values(p: ColumnProfile, vs):
    # finalize may compact the values state in place; keep the folded one pristine
    return p.values.merge(p.values.zero(), vs) if p.values else None


def merge(p: ColumnProfile, a: Folded, b: Folded) -> Folded:
    return Folded(p.merge(a.state, b.state), p.values.merge(a.values, b.values) if p.values else None)


def zero(p: ColumnProfile) -> Folded:
    return Folded(p.zero(), p.values.zero() if p.values else None)


def finalize(p: ColumnProfile, f: Folded) -> dict:
    """The table-level row of a (merged) state, with the exact reduction of its values."""
    exact = p.values.finalize(_copy_values(p, f.values)) if p.values else None
    row = p.finalize_table(f.state, exact)
    if p.values:
        counts = _value_counts(p, f.values)
        if counts is not None:
            row["value_counts"] = counts
    for key in ("theta_sketch", "kll_sketch"):  # sketch bytes depend on the order of updates
        row.pop(key, None)
    return row


def _value_counts(p: ColumnProfile, vs):
    if isinstance(p.values, ValueCountsAccumulator):
        return sorted_counts(p.values.table(_copy_values(p, vs)))
    return None


def theta_distinct(p: ColumnProfile, f: Folded) -> int | None:
    """The distinct count of the merged theta sketches (no exact reduction)."""
    return p.finalize_table(f.state, None).get("distinct_count")


def _same(a, b) -> bool:
    if isinstance(a, pa.Table):
        return a.equals(b)
    if isinstance(a, pa.Scalar) and isinstance(b, pa.Scalar) and not pa.types.is_floating(a.type):
        return a.equals(b)  # dates outside Python's range have no as_py()
    if isinstance(a, pa.Scalar):
        a = a.as_py() if a.is_valid else None
    if isinstance(b, pa.Scalar):
        b = b.as_py() if b.is_valid else None
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a) or math.isnan(b):
            return math.isnan(a) and math.isnan(b)
        return a == b
    return a == b and type(a) is type(b)


#: float statistics a merge gives up to rounding: the moments', and every registered
#: statistic's float columns (engine/measures: merged from float states too)
APPROX = {"mean", "stddev", "avg_len", *(f.name for f in measures.statistics_columns() if pa.types.is_floating(f.type))}


def assert_rows_equal(got: dict, want: dict, float_sum: bool) -> None:
    assert got.keys() == want.keys()
    for key in want:
        g, w = got[key], want[key]
        approx = key in APPROX or (key == "sum" and float_sum)
        if approx and isinstance(w, float) and isinstance(g, float) and math.isfinite(w):
            scale = max(1.0, abs(w))
            assert g == pytest.approx(w, rel=_rel(key, want), abs=1e-9 * scale), key
        elif key == "top1_share":
            continue  # checked separately: exact only while the summary holds every value
        else:
            assert _same(g, w), (key, g, w)


def _rel(key: str, row: dict) -> float:
    """The relative tolerance of a float statistic: skewness's error grows with |mean| / stddev
    (engine/measures/skewness.py: about 1e-15 of it), the others' stays near rounding."""
    mean, sd = row.get("mean"), row.get("stddev")
    if key != "skewness" or not mean or not sd or not math.isfinite(mean) or not math.isfinite(sd):
        return 1e-9
    return max(1e-9, 1e-14 * abs(mean) / sd)


def _float_sum(arr: pa.Array) -> bool:
    return pa.types.is_floating(arr.type)


SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@SETTINGS
@given(data=st.data())
def test_merge_of_pieces_equals_fold_of_whole(data):
    arr = data.draw(columns())
    pieces = data.draw(splits(len(arr)))
    p = ColumnProfile("c", arr.type, USER)
    whole = fold(p, arr, batches=data.draw(st.integers(1, 3)))
    parts = [fold(p, arr.slice(a, b - a)) for a, b in pieces]
    merged = reduce(lambda x, y: merge(p, x, y), parts, zero(p))

    want, got = finalize(p, whole), finalize(p, merged)
    assert_rows_equal(got, want, _float_sum(arr))
    # counts are exact whatever the split
    assert got["row_count"] == len(arr) and got["null_count"] == arr.null_count
    # Misra-Gries is exact while it holds every distinct value
    valid = arr.drop_null()
    if p.discrete and len(valid) and pc.count_distinct(valid).as_py() <= TOP1_CAPACITY:
        top = max(pa.table({"v": valid}).group_by("v").aggregate([("v", "count")])["v_count"].to_pylist())
        assert got["top1_share"] == pytest.approx(top / len(valid))
        assert want["top1_share"] == pytest.approx(top / len(valid))
    # the merged theta sketches are exact below their nominal size (the table's distinct
    # count of non-discrete columns; discrete ones get an exact reduction)
    if p.values is not None and not p.discrete:
        assert theta_distinct(p, merged) == want["distinct_count"]
    if p.discrete and not pa.types.is_unsigned_integer(arr.type):
        # discrete columns publish the merged sketch too; DataSketches ignores the empty string
        texts = valid.to_pylist() if (pa.types.is_string(arr.type) or pa.types.is_binary(arr.type)) else []
        empty = 1 if ("" in texts or b"" in texts) else 0
        assert theta_distinct(p, merged) == want["distinct_count"] - empty


@SETTINGS
@given(data=st.data())
def test_histogram_counts_of_pieces_sum_to_the_whole(data):
    arr = data.draw(columns())
    if histogram_domain(arr.type) is None:
        return
    pieces = data.draw(splits(len(arr)))
    p = ColumnProfile("c", arr.type, [])
    merged = p.merge_all(fold(p, arr.slice(a, b - a)).state for a, b in pieces)
    # one spec, from the merged table range (as the driver builds it)
    if histogram_domain(arr.type) == HistogramDomain.FLOAT:
        if merged.finite_range is None:
            return
        spec = make_spec(arr.type, *merged.finite_range, data.draw(st.sampled_from([1000, 10000, 3])))
    else:
        if merged.minmax.min is None:
            return
        spec = make_spec(arr.type, to_domain(merged.minmax.min), to_domain(merged.minmax.max), data.draw(st.sampled_from([1000, 10000, 3])))
    whole = spec.bin_counts(arr)
    summed = sum((spec.bin_counts(arr.slice(a, b - a)) for a, b in pieces), np.zeros(spec.bins, np.int64))
    assert summed.tolist() == whole.tolist()
    # phase 2 bins a partition from its sorted view (distinct values and counts) instead
    # of reading it again: the same counts as binning its rows
    for a, b in pieces:
        piece = arr.slice(a, b - a)
        view = p.profile_column_view(piece)[3]
        if view is not None:
            weights = None if len(view.distinct) == view.n else view.counts
            got = spec.weighted_bin_counts(sortedvalues.to_arrow(view.distinct, view.type), weights)
            assert got.tolist() == spec.bin_counts(piece).tolist()
    valid = arr.drop_null()
    n_nan = int(np.isnan(valid.cast(pa.float64()).to_numpy(zero_copy_only=False)).sum()) if pa.types.is_floating(arr.type) else 0
    assert whole.sum() == len(valid) - n_nan


@SETTINGS
@given(data=st.data())
def test_value_counts_of_pieces_merge_exactly(data):
    arr = data.draw(columns())
    pieces = data.draw(splits(len(arr)))
    acc = ValueCountsAccumulator(arr.type)
    states = [acc.fold([arr.slice(a, b - a)]) for a, b in pieces]
    merged = sorted_counts(acc.table(acc.merge_all(states)))
    whole = sorted_counts(acc.table(acc.fold([arr])))
    assert merged.equals(whole)
    assert sum(merged["count"].to_pylist()) == len(arr.drop_null()) - (
        int(np.isnan(arr.drop_null().cast(pa.float64()).to_numpy(zero_copy_only=False)).sum()) if pa.types.is_floating(arr.type) else 0
    )


@SETTINGS
@given(data=st.data())
def test_merge_is_associative_and_commutative(data):
    t_arr = data.draw(columns(max_size=40))
    p = ColumnProfile("c", t_arr.type, USER)
    pieces = data.draw(splits(len(t_arr), max_pieces=3))
    while len(pieces) < 3:
        pieces.append((len(t_arr), len(t_arr)))
    a, b, c = (fold(p, t_arr.slice(x, y - x)) for x, y in pieces[:3])
    float_sum = _float_sum(t_arr)
    left = finalize(p, merge(p, merge(p, a, b), c))
    right = finalize(p, merge(p, a, merge(p, b, c)))
    assert_rows_equal(left, right, float_sum)
    assert_rows_equal(finalize(p, merge(p, a, b)), finalize(p, merge(p, b, a)), float_sum)
    assert_rows_equal(finalize(p, merge(p, c, merge(p, a, b))), left, float_sum)


@SETTINGS
@given(arr=columns())
def test_zero_is_the_identity(arr):
    p = ColumnProfile("c", arr.type, USER)
    a = fold(p, arr)
    want = finalize(p, a)
    for got in (finalize(p, merge(p, zero(p), a)), finalize(p, merge(p, a, zero(p)))):
        for key in want:  # exactly the same, floats included: nothing was added
            if key == "top1_share" and want[key] is not None:
                assert got[key] == pytest.approx(want[key])
            else:
                assert _same(got[key], want[key]), key
    z = finalize(p, merge(p, zero(p), zero(p)))
    assert z["row_count"] == 0 and z["null_count"] == 0
    assert z.get("min") is None and z.get("sum") is None and z.get("distinct_count", 0) == 0


def test_merge_all_of_nothing_is_zero():
    p = ColumnProfile("c", pa.int64(), USER)
    row = finalize(p, Folded(p.merge_all([]), p.values.merge_all([])))
    assert (row["row_count"], row["null_count"], row["distinct_count"]) == (0, 0, 0)
    assert row["sum"] is None and row["min"] is None and row["p50"] is None


# ---------------------------------------------------------------- the whole-column path
#: kinds the sorted view handles beyond KINDS: narrow decimals, 8-bit full ranges, times, durations
WHOLE_KINDS = {
    **KINDS,
    "decimal18": (pa.decimal128(18, 2), st.integers(-(10**18) + 1, 10**18 - 1) | st.integers(-3, 3)),
    "uint8": (pa.uint8(), st.integers(0, 255)),
    "duration": (pa.duration("ms"), st.integers(INT64_MIN, INT64_MAX) | st.integers(-3, 3)),
    "time64": (pa.time64("us"), st.integers(0, 86_400 * 10**6 - 1) | st.integers(0, 3)),
}


@st.composite
def whole_columns(draw, max_size: int = 80):
    kind = draw(st.sampled_from(sorted(WHOLE_KINDS)))
    t, value = WHOLE_KINDS[kind]
    values = draw(st.lists(st.none() | value, max_size=max_size))
    if kind == "decimal18":
        return pa.array([None if v is None else Decimal(v).scaleb(-2) for v in values], t)
    if kind in ("duration", "time64"):
        return pa.array(values, pa.int64()).view(t)
    return to_array(values, t)


@SETTINGS
@given(data=st.data())
def test_whole_column_equals_the_batched_fold(data):
    """profile_column (what partition tasks run) gives update + finalize_partition's statistics."""
    arr = data.draw(whole_columns())
    if data.draw(st.booleans()) and len(arr):
        arr = arr.slice(1)  # an offset into the buffers
    p = ColumnProfile("c", arr.type, USER)
    state = p.zero()
    vs = p.values.zero() if p.values else None
    for a, b in data.draw(splits(len(arr))):
        state = p.update(state, arr.slice(a, b - a))
        if p.values:
            vs = p.values.update(vs, arr.slice(a, b - a))
    want, want_counts = p.finalize_partition(state, vs)
    got_state, got, got_counts = ColumnProfile("c", arr.type, USER).profile_column(arr)
    for row in (want, got):  # sketch bytes depend on the order of updates
        row.pop("kll_sketch", None)
        row.pop("theta_sketch", None)
    assert_rows_equal(got, want, _float_sum(arr))
    assert got_state.distinct == want.get("distinct_count")
    if want_counts is None and p.counted:  # floats, times: the value counts the table reduction takes
        valid = arr.drop_null()
        if pa.types.is_float16(valid.type):  # counted in float32 (exact)
            valid = valid.cast(pa.float32())
        if pa.types.is_floating(valid.type):  # NaN is no value, -0.0 == 0.0
            valid = pc.add(valid.filter(pc.invert(pc.is_nan(valid))), pa.scalar(0.0, valid.type))
        vc = pc.value_counts(valid)
        # compared as Arrow arrays: durations and timestamps beyond Python's range have no to_pylist()
        oracle = pa.table({"value": vc.field(0), "count": vc.field(1).cast(pa.int64())}).sort_by("value")
        counted = pa.table({"value": got_counts["value"], "count": pc.cast(got_counts["count"], pa.int64())})
        assert counted.equals(oracle), (counted, oracle)
    elif want_counts is None:
        assert got_counts is None
    else:
        assert sorted_counts(got_counts).select(["value", "count"]).equals(sorted_counts(want_counts).select(["value", "count"]))
    # the state merges at table level as the batched one does
    assert got_state.finite_range == state.finite_range
    assert got_state.counts == state.counts
    if state.kll is not None and state.kll.blob is not None:
        from datasketches import kll_doubles_sketch

        assert kll_doubles_sketch.deserialize(got_state.kll.blob).n == kll_doubles_sketch.deserialize(state.kll.blob).n


@SETTINGS
@given(data=st.data())
def test_hashed_string_counts_merge_exactly(data):
    """Partitions' string counts in hash order merge (as sorted runs) to the exact counts,
    and merged counts merge again (what a tree of reductions does)."""
    values = data.draw(st.lists(st.none() | KINDS["string"][1], max_size=80))
    arr = pa.array(values, pa.string())
    pieces = data.draw(splits(len(arr)))
    p = ColumnProfile("c", pa.string())
    parts = [p.profile_column(arr.slice(a, b - a))[2] for a, b in pieces]
    merged = merge_counts(parts, pa.string())
    want = ValueCountsAccumulator(pa.string())
    want = sorted_counts(want.table(want.fold([arr])))
    assert sorted_counts(merged).select(["value", "count"]).equals(want.select(["value", "count"]))
    if merged.num_rows and len(parts) > 1:
        assert counts_hashed(merged)
        h = merged[HASH].to_numpy()
        assert (h[1:] > h[:-1]).all()
        cut = len(parts) // 2
        again = merge_counts([merge_counts(parts[:cut], pa.string()), merge_counts(parts[cut:], pa.string())], pa.string())
        assert sorted_counts(again).select(["value", "count"]).equals(want.select(["value", "count"]))


def test_hashed_merge_falls_back_when_two_values_share_a_hash():
    """A 63-bit collision (forced here) must not merge two different values."""
    a = hashed_counts(pa.array(["x", "y"]), np.array([2, 1]), np.array([5, 9], np.uint64))
    b = hashed_counts(pa.array(["z", "y"]), np.array([1, 4]), np.array([5, 9], np.uint64))  # "z" collides with "x"
    merged = sorted_counts(merge_counts([a, b], pa.string()))
    assert merged.select(["value", "count"]).to_pylist() == [{"value": "x", "count": 2}, {"value": "y", "count": 5}, {"value": "z", "count": 1}]


@SETTINGS
@given(data=st.data())
def test_hashed_frequencies_store_the_exact_rows_in_frequency_order(data):
    """The table reduction of hash-ordered string counts (merge, collision check, stored
    rows in (decreasing count, value) order) against counts of the whole column."""
    from collections import Counter

    values = data.draw(
        st.lists(st.none() | st.sampled_from(["a", "b", "é", "日本", "", "longer than eight bytes"]) | KINDS["string"][1], max_size=120)
    )
    arr = pa.array(values, pa.string())
    pieces = data.draw(splits(len(arr)))
    p = ColumnProfile("c", pa.string())
    parts = [p.profile_column(arr.slice(a, b - a))[2] for a, b in pieces]
    kind = data.draw(st.sampled_from(["all_distinct", "duplicates_only", "complete"]))
    exact = Counter(v for v in values if v is not None)
    got = hashed_frequencies(parts, pa.string(), lambda distinct: kind)
    assert got is not None
    distinct, got_kind, rows = got
    assert (distinct, got_kind) == (len(exact), kind)
    keep = {"all_distinct": lambda c: False, "duplicates_only": lambda c: c > 1, "complete": lambda c: True}[kind]
    want = sorted(((v, c) for v, c in exact.items() if keep(c)), key=lambda vc: (-vc[1], vc[0].encode()))
    assert list(zip(rows["value"].to_pylist(), rows["count"].to_pylist())) == want


def test_hashed_frequencies_refuse_two_values_sharing_a_hash():
    """A forced 64-bit collision: no merged answer (reduce_counts then merges by value)."""
    from engine.runtime.tasks.reduce import reduce_counts

    a = hashed_counts(pa.array(["x", "y"]), np.array([2, 1]), np.array([5, 9], np.uint64))
    b = hashed_counts(pa.array(["z", "y"]), np.array([1, 4]), np.array([5, 9], np.uint64))  # "z" collides with "x"
    assert hashed_frequencies([a, b], pa.string(), lambda d: "complete") is None
    reduced, freq, _ = reduce_counts([("c", pa.string(), 8)], 0.5, {"c": a}, {"c": b})
    exact = reduced.value
    assert exact["c"]["distinct_count"] == 3 and exact["c"]["frequencies"] == "complete"
    assert freq[0][2].select(["value", "frequency"]).to_pylist() == [
        {"value": "y", "frequency": 5},
        {"value": "x", "frequency": 2},
        {"value": "z", "frequency": 1},
    ]


@SETTINGS
@given(values=st.lists(st.integers(0, 300), min_size=0, max_size=2000))
def test_top1_share_summary_is_the_misra_gries_trim_of_the_exact_counts(values):
    """The partition summary (trimmed in numpy) is the textbook trim of all exact counts."""
    from collections import Counter

    from engine.stats.user import _mg_trim

    n, counters = TOP1_SHARE.compute(pa.array(values, pa.int64()))
    assert n == len(values)
    assert counters == _mg_trim(dict(Counter(values)))
    assert len(counters) <= TOP1_CAPACITY


@SETTINGS
@given(data=st.data())
def test_user_statistics_from_value_counts_equal_their_definition(data):
    """compute_counts (from a partition's value counts) gives compute's state, column by column."""
    arr = data.draw(columns())
    p = ColumnProfile("c", arr.type, USER)
    got = p.profile_column(arr)[0].user
    prepared = p.prepare(arr)
    for u in p.user:
        assert got[u.name] == u.compute(prepared), u.name
