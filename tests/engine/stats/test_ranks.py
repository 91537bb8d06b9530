"""The rank kernel (engine/stats/ranks.py) without Ray: the sample sort run in one
process, checked against numpy / pyarrow sorts and DuckDB's quantile_disc;
hypothesis for the rank laws and for the balance of ranges under ties."""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal
from fractions import Fraction

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.exceptions import InvalidArgumentError
from engine.stats import ranks


# ----------------------------------------------------------------- the pipeline in one process
def local_sort(
    parts: list[pa.Array], n_ranges: int, sample_size: int = 64, representation: str | list[str] = "auto"
) -> tuple[ranks.KeyCodec, list, list[int], int, int]:
    """What the Ray edge does, in one process: (codec, sorted ranges, offsets, nulls, nans).

    ``representation``: per partition (a list) or for all: sorted values, count runs, or auto."""
    codec = ranks.codec_for(parts[0].type)
    reps = representation if isinstance(representation, list) else [representation] * len(parts)
    prepared = [ranks.prepare(codec, a, i, sample_size, rep) for i, (a, rep) in enumerate(zip(parts, reps))]
    cuts = ranks.splitters(codec, [p[1] for p in prepared], n_ranges)
    pieces = [ranks.split(p[0], i, cuts) for i, p in enumerate(prepared)]
    ranges = [ranks.merge_pieces(codec, [pc_[k] for pc_ in pieces], codec.kind == "numpy") for k in range(len(cuts) + 1)]
    offsets = [0]
    for r in ranges:
        offsets.append(offsets[-1] + len(r))
    return codec, ranges, offsets, sum(p[2] for p in prepared), sum(p[3] for p in prepared)


def concat(codec: ranks.KeyCodec, ranges: list) -> list:
    if codec.kind == "numpy":
        return codec.decode(np.concatenate([r.expand() if isinstance(r, ranks.Runs) else r for r in ranges])).to_pylist()
    return codec.decode(pa.concat_arrays(ranges)).to_pylist()


def last_keys(ranges: list) -> list:
    return [(r[len(r) - 1] if isinstance(r, (np.ndarray, ranks.Runs)) else r[len(r) - 1].as_py()) if len(r) else None for r in ranges]


def rank_of(codec, ranges, offsets, value, inclusive=False) -> int:
    key = codec.encode_value(value)
    k = ranks.ranges_for_count(last_keys(ranges), [len(r) for r in ranges], key, inclusive)
    if k is None:
        return offsets[-1]
    return offsets[k] + ranks.search(ranges[k], key, "right" if inclusive else "left")


def value_at(codec, ranges, offsets, r):
    k, local = ranks.ranges_for_rank(offsets, r)
    return codec.to_python(ranks.take(ranges[k], [local]))[0]


def sort_key(v):
    """Python sort key with NaN greatest (the order ranks defines)."""
    return (1, 0) if isinstance(v, float) and math.isnan(v) else (0, v)


def same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    return a == b


def split_random(values: list, parts: int, type_: pa.DataType, seed: int) -> list[pa.Array]:
    rng = np.random.default_rng(seed)
    cut = sorted(rng.integers(0, len(values) + 1, parts - 1).tolist()) if parts > 1 else []
    bounds = [0, *cut, len(values)]
    return [pa.array(values[a:b], type=type_) for a, b in zip(bounds[:-1], bounds[1:])]


# ----------------------------------------------------------------- quantile ranks
@pytest.mark.parametrize("n", [1, 2, 3, 7, 10, 100, 1001])
def test_quantile_rank_is_duckdbs_quantile_disc(n: int) -> None:
    con = duckdb.connect()
    con.execute(f"CREATE TABLE t AS SELECT range::BIGINT AS x FROM range({n})")
    ps = [0, 0.001, 0.01, 0.1, 0.2, 0.25, 0.3, 1 / 3, 0.5, 0.7, 0.9, 0.99, 0.999, 1]
    literal = "[" + ", ".join(repr(p) for p in ps) + "]"
    (expected,) = con.execute(f"SELECT quantile_disc(x, {literal}) FROM t").fetchone()
    assert [ranks.quantile_rank(n, p) for p in ps] == expected


def test_quantile_rank_reads_probabilities_as_decimals() -> None:
    # 10 * 0.1 as doubles is 1.0000000000000000555: the exact float would give rank 1
    assert ranks.quantile_rank(10, 0.1) == 0
    assert ranks.quantile_rank(10, "0.1") == 0
    assert ranks.quantile_rank(10, Decimal("0.7")) == 6
    assert ranks.quantile_rank(3, Fraction(1, 3)) == 0
    assert ranks.quantile_rank(10, 0) == 0 and ranks.quantile_rank(10, 1) == 9


@pytest.mark.parametrize("bad", [-0.1, 1.5, math.nan, math.inf, "x", True, None])
def test_bad_probabilities_are_refused(bad) -> None:
    with pytest.raises(InvalidArgumentError):
        ranks.quantile_rank(10, bad)


def test_no_quantile_of_nothing() -> None:
    assert ranks.ranks_for(0, [0.5, 1]) == [None, None]
    with pytest.raises(InvalidArgumentError):
        ranks.quantile_rank(0, 0.5)


# ----------------------------------------------------------------- codecs
@pytest.mark.parametrize(
    "type_, values",
    [
        (pa.int8(), [-128, 127, 0, None]),
        (pa.uint64(), [0, 2**64 - 1, 2**63, None]),
        (pa.float16(), [np.float16(1.5), np.float16(-2), None]),
        (pa.float32(), [1.5, float("nan"), float("-inf"), None]),
        (pa.bool_(), [True, False, None]),
        (pa.date32(), [dt.date(1970, 1, 1), dt.date(2024, 2, 29), None]),
        (pa.date64(), [dt.date(1969, 12, 31), None]),
        (pa.timestamp("ns", tz="Europe/Paris"), [dt.datetime(2024, 1, 1, tzinfo=dt.UTC), None]),
        (pa.time32("s"), [dt.time(23, 59, 59), None]),
        (pa.time64("us"), [dt.time(0, 0, 0, 1), None]),
        (pa.duration("ms"), [dt.timedelta(days=-3), None]),
        (pa.decimal128(18, 2), [Decimal("-9999999999999999.99"), Decimal("0.01"), None]),
        (pa.decimal128(38, 10), [Decimal("1234567890123456789012345678.0123456789"), None]),
        (pa.decimal256(50, 5), [Decimal("-1.00001"), None]),
        (pa.string(), ["b", "", "日本", None]),
        (pa.large_string(), ["z", None]),
        (pa.binary(), [b"\x00", b"", None]),
        (pa.binary(3), [b"abc", None]),
    ],
)
def test_codec_round_trips(type_: pa.DataType, values: list) -> None:
    codec = ranks.codec_for(type_)
    arr = pa.array(values, type=type_)
    keys, nulls, nans = codec.encode(arr.slice(0))
    assert nulls == arr.null_count
    back = codec.decode(keys)
    assert back.type == type_
    expected = arr.drop_null().to_pylist()
    assert len(back) == len(expected) and all(same(a, b) for a, b in zip(back.to_pylist(), expected))
    assert nans == sum(1 for v in values if isinstance(v, float) and math.isnan(v))


def test_codec_of_a_sliced_decimal_array() -> None:
    arr = pa.array([Decimal("1.5"), Decimal("-2.25"), Decimal("3")], pa.decimal128(10, 2)).slice(1, 2)
    codec = ranks.codec_for(arr.type)
    keys, _, _ = codec.encode(arr)
    assert keys.tolist() == [-225, 300]


@pytest.mark.parametrize("type_", [pa.list_(pa.int64()), pa.struct([("a", pa.int64())]), pa.null(), pa.month_day_nano_interval()])
def test_types_without_order_are_refused(type_: pa.DataType) -> None:
    with pytest.raises(InvalidArgumentError, match="col.*no order"):
        ranks.codec_for(type_, "col")


# ----------------------------------------------------------------- the sample sort
SCENARIOS = {
    "skewed": lambda rng, n: rng.zipf(1.3, n).astype(np.int64).tolist(),
    "all_distinct": lambda rng, n: rng.permutation(n).astype(np.int64).tolist(),
    "almost_distinct": lambda rng, n: np.concatenate([rng.permutation(n - n // 50), rng.integers(0, n, n // 50)]).astype(np.int64).tolist(),
    "all_equal": lambda rng, n: [7] * n,
    "one_value_in_most_rows": lambda rng, n: np.where(rng.random(n) < 0.9, 5, rng.integers(0, 100, n)).tolist(),
}


REPRESENTATIONS = ["values", "runs", "auto", ["runs", "values", "auto", "values", "runs", "runs"]]


@pytest.mark.parametrize("scenario", sorted(SCENARIOS))
@pytest.mark.parametrize("n_ranges", [1, 3, 8])
@pytest.mark.parametrize("representation", REPRESENTATIONS, ids=["values", "runs", "auto", "mixed"])
def test_sample_sort_sorts_and_balances(scenario: str, n_ranges: int, representation) -> None:
    rng = np.random.default_rng(3)
    n = 20_000
    values = SCENARIOS[scenario](rng, n)
    parts = split_random(values, 6, pa.int64(), seed=1)
    codec, ranges, offsets, _, _ = local_sort(parts, n_ranges, sample_size=256, representation=representation)
    assert concat(codec, ranges) == sorted(values)
    # balance: no range holds much more than its share, ties included
    # (regular samples: within n / sample_size per partition of the target)
    assert max(len(r) for r in ranges) <= n / n_ranges + 6 * (n / 6) / 256 + 6
    for r in {0, n // 3, n - 1} if n else set():
        assert value_at(codec, ranges, offsets, r) == sorted(values)[r]


@pytest.mark.parametrize("representation", ["values", "runs"])
def test_all_equal_values_spread_over_every_range(representation: str) -> None:
    parts = [pa.array([1] * 10_000, pa.int64()) for _ in range(4)]
    codec, ranges, offsets, _, _ = local_sort(parts, 4, sample_size=128, representation=representation)
    assert len(ranges) == 4
    assert all(9_000 <= len(r) <= 11_000 for r in ranges)
    assert rank_of(codec, ranges, offsets, 1) == 0
    assert rank_of(codec, ranges, offsets, 1, inclusive=True) == 40_000
    assert rank_of(codec, ranges, offsets, 0, inclusive=True) == 0
    assert rank_of(codec, ranges, offsets, 2) == 40_000


@pytest.mark.parametrize("representation", ["values", "runs", ["runs", "values", "runs"]])
def test_floats_nan_last_nulls_counted(representation) -> None:
    values = [3.0, None, float("nan"), -0.0, float("-inf"), 0.0, float("inf"), None, float("nan"), 1.5]
    parts = split_random(values, 3, pa.float64(), seed=0)
    codec, ranges, offsets, nulls, nans = local_sort(parts, 2, sample_size=4, representation=representation)
    got = concat(codec, ranges)
    assert nulls == 2 and nans == 2 and len(got) == 8
    assert got[:2] == [float("-inf"), 0.0] and got[4:6] == [3.0, float("inf")] and all(math.isnan(v) for v in got[6:])
    assert rank_of(codec, ranges, offsets, float("nan")) == 6
    assert rank_of(codec, ranges, offsets, float("nan"), inclusive=True) == 8
    assert rank_of(codec, ranges, offsets, 0.0) == 1 and rank_of(codec, ranges, offsets, -0.0, inclusive=True) == 3
    assert rank_of(codec, ranges, offsets, float("inf"), inclusive=True) == 6


def test_strings_sort_bytewise_and_ties_split() -> None:
    values = ["b", "a", "", "é", "日本", "a", "ab", "B", "a\x00", "a"] * 300
    parts = split_random(values, 5, pa.string(), seed=2)
    codec, ranges, offsets, _, _ = local_sort(parts, 4, sample_size=50)
    assert concat(codec, ranges) == sorted(values, key=lambda s: s.encode())
    assert rank_of(codec, ranges, offsets, "a") == 600  # "" and "B" sort first
    assert rank_of(codec, ranges, offsets, "a", inclusive=True) == 1500


def test_empty_partitions_and_no_values() -> None:
    parts = [pa.array([], pa.int64()), pa.array([None, None], pa.int64()), pa.array([5, 1], pa.int64()), pa.array([], pa.int64())]
    codec, ranges, offsets, nulls, _ = local_sort(parts, 3)
    assert concat(codec, ranges) == [1, 5] and nulls == 2
    codec, ranges, offsets, nulls, _ = local_sort([pa.array([None], pa.string()), pa.array([], pa.string())], 4)
    assert offsets[-1] == 0 and nulls == 1 and concat(codec, ranges) == []
    assert rank_of(codec, ranges, offsets, "x") == 0
    with pytest.raises(InvalidArgumentError):
        ranks.ranges_for_rank(offsets, 0)


@pytest.mark.parametrize(
    "type_, values",
    [
        (pa.timestamp("us", tz="UTC"), [dt.datetime(2024, 1, d % 28 + 1, tzinfo=dt.UTC) for d in range(200)] + [None] * 5),
        (pa.decimal128(18, 2), [Decimal(v) / 100 for v in range(-150, 150, 7)] * 3),
        (pa.decimal128(38, 4), [Decimal(v) / 10**4 * 10**20 for v in range(-50, 50, 3)] * 3 + [None]),
        (pa.date32(), [dt.date(2000 + v % 30, 1 + v % 12, 1) for v in range(120)]),
        (pa.binary(), [bytes([v % 7, v % 3]) for v in range(100)]),
        (pa.bool_(), [v % 3 == 0 for v in range(100)] + [None]),
    ],
)
@pytest.mark.parametrize("representation", ["values", "runs"])
def test_other_types_sort_like_python(type_: pa.DataType, values: list, representation: str) -> None:
    parts = split_random(values, 4, type_, seed=5)
    codec, ranges, offsets, nulls, _ = local_sort(parts, 3, sample_size=8, representation=representation)
    expected = sorted(v for v in values if v is not None)
    assert concat(codec, ranges) == expected and nulls == values.count(None)
    for v in expected[:: max(1, len(expected) // 7)]:
        assert rank_of(codec, ranges, offsets, v) == sum(1 for x in expected if x < v)


def test_ranking_a_value_of_another_type_is_refused() -> None:
    codec = ranks.codec_for(pa.int32())
    with pytest.raises(InvalidArgumentError, match="not a value of type int32"):
        codec.encode_value("abc")
    with pytest.raises(InvalidArgumentError, match="null"):
        codec.encode_value(None)


# ----------------------------------------------------------------- laws (hypothesis)
VALUE_STRATEGIES = {
    "int": (pa.int64(), st.integers(-5, 5) | st.integers(-(2**63), 2**63 - 1)),
    "float": (pa.float64(), st.floats(-10, 10, allow_nan=False) | st.sampled_from([math.nan, math.inf, -math.inf, -0.0, 0.0])),
    "string": (pa.string(), st.text(alphabet="ab\x00é", max_size=3)),
}


@st.composite
def partitioned(draw):
    kind = draw(st.sampled_from(sorted(VALUE_STRATEGIES)))
    type_, values = VALUE_STRATEGIES[kind]
    data = draw(st.lists(values | st.none(), max_size=120))
    n_parts = draw(st.integers(1, 6))
    reps = draw(st.lists(st.sampled_from(["values", "runs", "auto"]), min_size=n_parts, max_size=n_parts))
    return type_, data, n_parts, draw(st.integers(1, 5)), draw(st.integers(0, 2**32 - 1)), reps


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(partitioned())
def test_rank_laws(case) -> None:
    type_, values, n_parts, n_ranges, seed, reps = case
    parts = split_random(values, n_parts, type_, seed)
    codec, ranges, offsets, nulls, _ = local_sort(parts, n_ranges, sample_size=3, representation=reps)
    expected = sorted(
        (v for v in values if v is not None), key=sort_key if type_ == pa.float64() else (lambda s: s.encode()) if type_ == pa.string() else None
    )
    got = concat(codec, ranges)
    n = len(expected)
    assert nulls == len(values) - n and offsets[-1] == n
    assert all(same(a, b) for a, b in zip(got, expected)) and len(got) == n
    for r in range(n):
        v = value_at(codec, ranges, offsets, r)
        below = rank_of(codec, ranges, offsets, v)
        at_most = rank_of(codec, ranges, offsets, v, inclusive=True)
        # rank_of(value_at_rank(r)) <= r < rank_of(v) + count(v)
        assert below <= r < at_most
        assert at_most - below == sum(1 for x in expected if same(x, v))
    for p in (0, 0.25, 0.5, 0.99, 1):
        if n:
            r = ranks.quantile_rank(n, p)
            assert same(value_at(codec, ranges, offsets, r), expected[r])


# ----------------------------------------------------------------- run-length keys
FLOATS = st.floats(-3, 3, allow_nan=False, width=64) | st.sampled_from([math.nan, -0.0, 0.0, math.inf])


def _runs_and_expanded(values: list) -> tuple[ranks.Runs, np.ndarray]:
    keys = np.array(values, dtype=np.float64)
    return ranks.Runs.count(keys), np.sort(keys)


def _eq(a: np.ndarray, b: np.ndarray) -> bool:
    return a.shape == b.shape and bool(np.all((a == b) | (np.isnan(a) & np.isnan(b))))


@settings(max_examples=200, deadline=None)
@given(st.lists(FLOATS, max_size=60), st.integers(0, 70), st.integers(0, 70))
def test_runs_act_as_the_sorted_array_they_stand_for(values: list, a: int, b: int) -> None:
    runs, expanded = _runs_and_expanded(values)
    assert len(runs) == len(expanded) and _eq(runs.expand(), expanded)
    assert np.all(runs.counts > 0) and len(runs.values) == len(np.unique(expanded))  # NaNs and zeros merged
    assert _eq(runs[a:b].expand(), expanded[a:b])
    if len(expanded):
        pos = np.arange(len(expanded))
        assert _eq(runs.take(pos), expanded)
        assert _eq(np.array([runs[int(i)] for i in pos]), expanded)
    for v in [*values[:5], -1e9, 1e9, math.nan]:
        for side in ("left", "right"):
            assert ranks.search(runs, v, side) == int(np.searchsorted(expanded, v, side))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(st.integers(-4, 4), max_size=30), min_size=1, max_size=5), st.lists(st.booleans(), min_size=5, max_size=5))
def test_merging_runs_and_sorted_pieces_is_sorting_their_union(pieces: list[list[int]], as_runs: list[bool]) -> None:
    """The merge law: pieces (runs or sorted arrays, in any mix) merge into the sort of their concatenation."""
    codec = ranks.codec_for(pa.int64())
    arrays = [np.sort(np.array(p, np.int64)) for p in pieces]
    given_ = [ranks.Runs.encode(a) if r else a for a, r in zip(arrays, as_runs)]
    merged = ranks.merge_pieces(codec, given_, True)
    expected = np.sort(np.concatenate(arrays))
    got = merged.expand() if isinstance(merged, ranks.Runs) else merged
    assert np.array_equal(got, expected)
    if isinstance(merged, ranks.Runs):
        assert np.all(np.diff(merged.values) > 0)  # each value once


@pytest.mark.parametrize(
    "make, counted",
    [
        (lambda rng, n: rng.integers(0, n // 400, n), True),  # 0.25% distinct
        (lambda rng, n: rng.integers(0, n // 20, n), True),  # 5%
        (lambda rng, n: rng.permutation(n), False),  # all distinct
        (lambda rng, n: rng.integers(0, n // 2, n), False),  # ~40% distinct
        (lambda rng, n: np.concatenate([np.zeros(n // 2, np.int64), rng.permutation(n // 2) + 1]), False),  # half one value, half distinct
    ],
)
def test_prefer_runs_counts_only_low_cardinality(make, counted: bool) -> None:
    rng = np.random.default_rng(0)
    for n in (5_000, 400_000):
        keys = np.asarray(make(rng, n), np.int64)
        rng.shuffle(keys)
        assert ranks.prefer_runs(keys) == counted, n


def test_distinct_estimate_recovers_the_population() -> None:
    rng = np.random.default_rng(1)
    half = lambda d: np.where(rng.random(2 * d) < 0.5, 0, rng.permutation(2 * d) + 1)  # noqa: E731  half one value
    for d, population in ((500, None), (20_000, None), (300_000, None), (200_000, half(200_000))):
        drawn = rng.integers(0, d, ranks.DISTINCT_SAMPLE) if population is None else rng.choice(population, ranks.DISTINCT_SAMPLE)
        _, counts = np.unique(drawn, return_counts=True)
        est = ranks._distinct_estimate(counts)
        assert 0.7 * d < est < 1.4 * d, (d, est)


# ----------------------------------------------------------------- floats counted from the Arrow chunks
def _chunked(values: list, type_: pa.DataType, cuts: list[int]) -> pa.ChunkedArray:
    bounds = sorted({0, len(values), *(c % (len(values) + 1) for c in cuts)})
    return pa.chunked_array([pa.array(values[a:b], type=type_) for a, b in zip(bounds[:-1], bounds[1:])], type=type_)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(FLOATS | st.none(), max_size=80),
    st.lists(st.integers(0, 80), max_size=4),
    st.sampled_from([pa.float64(), pa.float32()]),
)
def test_floats_counted_in_place_are_the_sorted_values(values: list, cuts: list[int], type_: pa.DataType) -> None:
    """Counting floats straight from Arrow chunks (nulls, NaN, -0.0, inf, ties; any chunking)
    gives the runs of the sorted non-null values, and the same counts as sorting them."""
    codec = ranks.codec_for(type_)
    arr = _chunked(values, type_, cuts)
    counted, _, nulls, nans = ranks.prepare(codec, arr, 0, 8, "runs")
    sorted_, _, nulls2, nans2 = ranks.prepare(codec, arr, 0, 8, "values")
    assert isinstance(counted.keys, ranks.Runs) and isinstance(sorted_.keys, np.ndarray)
    assert _eq(counted.keys.expand(), sorted_.keys)
    assert np.all(counted.keys.counts > 0) and len(counted.keys.values) == len(np.unique(sorted_.keys))  # -0.0 and 0.0 merged, NaNs merged
    assert nulls == nulls2 == values.count(None)
    assert nans == nans2 == sum(1 for v in values if v is not None and math.isnan(v))


@pytest.mark.parametrize(
    "make, counted",
    [
        (lambda rng, n: rng.integers(0, n // 400, n) / 7, True),  # 0.25% distinct
        (lambda rng, n: rng.integers(0, n // 20, n) / 7, True),  # 5%
        (lambda rng, n: rng.random(n), False),  # all distinct
        (lambda rng, n: np.concatenate([np.zeros(n // 2), rng.random(n // 2)]), False),  # half one value, half distinct
    ],
)
def test_prefer_runs_drawn_from_arrow_chunks(make, counted: bool) -> None:
    """The decision drawn from Arrow chunks with nulls (no copy) matches the one drawn from numpy keys."""
    rng = np.random.default_rng(0)
    for n in (5_000, 400_000):
        keys = np.asarray(make(rng, n), np.float64)
        rng.shuffle(keys)
        mask = rng.random(n) < 0.1
        arr = _chunked(pa.array(keys, mask=mask).to_pylist(), pa.float64(), [n // 3, n // 2, n - 7])
        assert ranks._few_distinct(ranks._distinct_estimate_arrow(arr, 0), arr) == counted == ranks.prefer_runs(keys[~mask]), n
        local, _, _, _ = ranks.prepare(ranks.codec_for(pa.float64()), arr, 0, 64, "auto")
        assert isinstance(local.keys, ranks.Runs) == counted


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.lists(FLOATS, max_size=40), min_size=1, max_size=5),
    st.lists(st.booleans(), min_size=5, max_size=5),
    st.lists(st.floats(0, 1), min_size=1, max_size=6),
)
def test_one_merge_of_every_partition_answers_every_rank(pieces: list[list[float]], as_runs: list[bool], ps: list[float]) -> None:
    """The driver's merge (one range holding every partition: runs and sorted values in any mix)
    holds, at every quantile's rank, what numpy's sort of the union holds there."""
    codec = ranks.codec_for(pa.float64())
    arrays = [np.sort(np.array(p, np.float64)) for p in pieces]
    given_ = [ranks.Runs.encode(a) if r else a for a, r in zip(arrays, as_runs)]
    union = np.sort(np.concatenate(arrays))
    merged = ranks.merge_pieces(codec, given_, True)
    assert len(merged) == len(union)
    if len(union):
        rs = ranks.ranks_for(len(union), ps)
        got = ranks.take(merged, rs)
        assert _eq(np.asarray(got, np.float64), union[rs])
