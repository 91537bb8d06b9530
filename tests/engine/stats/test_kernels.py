"""The statistics kernels (engine.stats) against numpy / pyarrow.compute / Python on generated arrays.

Pure: no Ray, no files (but one histograms.parquet round trip in tmp_path).
"""

from __future__ import annotations

import datetime as dt
import math
import statistics as pystats
from decimal import Decimal, localcontext

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
from datasketches import kll_doubles_sketch
from hypothesis import given, settings
from hypothesis import strategies as st

from engine import measures
from engine.files import writer
from engine.files.layout import FileIdentity
from engine.measures.moments import MomentsMeasure
from engine.measures.value_lengths import LengthsMeasure
from engine.stats import sortedvalues
from engine.stats.histograms import HistogramSpec, from_domain, make_spec, storage_type, to_domain, widened_range
from engine.stats.moments import CountsAccumulator, MinMaxAccumulator
from engine.stats.profile import ColumnProfile
from engine.stats.sketches import theta_estimate
from engine.stats.user import TOP1_SHARE, ZERO_COUNT
from engine.stats.valuecounts import (
    PERCENTILES,
    ValueCountsAccumulator,
    by_frequency,
    exact_percentiles,
    percentile_column,
    sorted_counts,
)
from engine.types import HistogramDomain

INT64_MIN, INT64_MAX, UINT64_MAX = -(2**63), 2**63 - 1, 2**64 - 1
INT_TYPES = [pa.int8(), pa.int16(), pa.int32(), pa.int64(), pa.uint8(), pa.uint16(), pa.uint32(), pa.uint64()]


# ---------------------------------------------------------------- helpers
def chunks_of(arr: pa.Array, n: int) -> list[pa.Array]:
    """``arr`` cut into ``n`` consecutive slices (some may be empty)."""
    bounds = np.linspace(0, len(arr), n + 1).astype(int)
    return [arr.slice(int(a), int(b - a)) for a, b in zip(bounds[:-1], bounds[1:])]


def profile_row(arr: pa.Array, batches: int = 1, user=()) -> dict:
    """The partition statistics row of ``arr`` folded in ``batches`` batches.

    Also checks that the whole-column path (``profile_column``, what partition
    tasks run) gives the same statistics.
    """
    p = ColumnProfile("c", arr.type, list(user))
    state = p.zero()
    vc = p.values.zero() if p.values else None
    for chunk in chunks_of(arr, batches):
        state = p.update(state, chunk)
        if p.values:
            vc = p.values.update(vc, chunk)
    row = finalize_partition(p, state, vc)
    _, whole, _ = ColumnProfile("c", arr.type, list(user)).profile_column(arr)
    assert_same_statistics(whole, row)
    return row


#: float statistics that depend on the order of the float operations: the moments', and every
#: registered statistic's float columns (engine/measures: merged from float states too)
ROUNDED = {"mean", "stddev", "avg_len", "sum", "top1_share", *(f.name for f in measures.statistics_columns() if pa.types.is_floating(f.type))}


def assert_same_statistics(got: dict, want: dict) -> None:
    """Two statistics rows of the same values: equal, floats of sums within rounding,
    sketches by what they estimate (their bytes depend on the order of updates)."""
    assert got.keys() == want.keys()
    for key, w in want.items():
        g = got[key]
        if key == "theta_sketch":
            assert (g is None) == (w is None)
            if w is not None:
                assert theta_estimate(g) == theta_estimate(w)
        elif key == "kll_sketch":
            assert (g is None) == (w is None)
            if w is not None:
                gs, ws = kll_doubles_sketch.deserialize(g), kll_doubles_sketch.deserialize(w)
                assert (gs.n, gs.get_min_value(), gs.get_max_value()) == (ws.n, ws.get_min_value(), ws.get_max_value())
        elif isinstance(w, float) and key in ROUNDED:
            assert isinstance(g, float), key
            assert (math.isnan(g) and math.isnan(w)) or g == pytest.approx(w, rel=1e-9, abs=1e-12), key
        elif isinstance(w, pa.Scalar):
            assert isinstance(g, pa.Scalar) and g.type == w.type, key
            if pa.types.is_floating(w.type) and w.is_valid and math.isnan(w.as_py()):
                assert math.isnan(g.as_py()), key
            else:
                assert g.equals(w), (key, g, w)
        else:
            assert g == w and type(g) is type(w), (key, g, w)


def finalize_partition(p: ColumnProfile, state, values_state) -> dict:
    """``ColumnProfile.finalize_partition``'s row (it also returns the value counts)."""
    res = p.finalize_partition(state, values_state)
    return res[0] if isinstance(res, tuple) else res


def py(v):
    return v.as_py() if isinstance(v, pa.Scalar) else v


def lower_percentiles(values: np.ndarray) -> dict[str, object]:
    return {percentile_column(p): np.quantile(values, p, method="lower").item() for p in PERCENTILES}


def random_ints(rng: np.random.Generator, t: pa.DataType, n: int, null_share: float = 0.1) -> pa.Array:
    info = np.iinfo(t.to_pandas_dtype())
    if rng.random() < 0.5:  # the full range, extremes included
        x = rng.integers(info.min, info.max, n, dtype=info.dtype, endpoint=True)
        x[: min(n, 3)] = [info.min, info.max, info.max][: min(n, 3)]
    else:  # few distinct values (duplicates)
        x = rng.integers(max(info.min, -50), min(info.max, 50), n, dtype=info.dtype, endpoint=True)
    mask = rng.random(n) < null_share
    return pa.array(x, t, mask=mask)


# ---------------------------------------------------------------- integers
@pytest.mark.parametrize("t", INT_TYPES, ids=str)
@pytest.mark.parametrize("seed", range(4))
def test_integer_statistics_match_python(t, seed):
    rng = np.random.default_rng(seed)
    arr = random_ints(rng, t, 2_000)
    row = profile_row(arr, batches=3)
    values = [v for v in arr.to_pylist() if v is not None]

    assert row["row_count"] == len(arr)
    assert row["null_count"] == arr.null_count
    assert row["nan_count"] is None
    assert py(row["min"]) == min(values) and py(row["max"]) == max(values)
    assert row["min"].type == t
    assert row["sum"] == sum(values)  # exact, never wraps
    assert isinstance(row["sum"], int)
    assert row["mean"] == pytest.approx(sum(values) / len(values), rel=1e-12, abs=1e-12)
    assert row["stddev"] == pytest.approx(pystats.stdev(values), rel=1e-9)
    assert row["distinct_count"] == len(set(values))
    assert row["distinct_count_exact"] is True
    x = np.array(values, dtype=t.to_pandas_dtype())
    expected = lower_percentiles(x)
    assert {k: py(row[k]) for k in expected} == expected
    assert row["percentiles_exact"] is True


def test_int64_sum_near_limits_is_exact():
    # pyarrow's own int64 sum wraps; the accumulator's must not
    arr = pa.array([INT64_MAX] * 1000 + [INT64_MAX - 1] * 7, pa.int64())
    acc = MomentsMeasure(pa.int64())
    state = acc.fold(chunks_of(arr, 5))
    assert acc.finalize(state)["sum"] == 1000 * INT64_MAX + 7 * (INT64_MAX - 1)
    assert acc.finalize(state)["mean"] == pytest.approx(float(INT64_MAX))

    neg = pa.array([INT64_MIN] * 1001, pa.int64())
    assert acc.finalize(acc.fold([neg]))["sum"] == 1001 * INT64_MIN
    mixed = pa.array([INT64_MIN, INT64_MAX, INT64_MIN, -1], pa.int64())
    assert acc.finalize(acc.fold([mixed]))["sum"] == 2 * INT64_MIN + INT64_MAX - 1

    u = pa.array([UINT64_MAX] * 513 + [0, 1], pa.uint64())
    uacc = MomentsMeasure(pa.uint64())
    res = uacc.finalize(uacc.fold(chunks_of(u, 4)))
    assert res["sum"] == 513 * UINT64_MAX + 1
    assert res["mean"] == pytest.approx((513 * UINT64_MAX + 1) / 515, rel=1e-15)
    assert res["stddev"] == pytest.approx(pystats.stdev([UINT64_MAX] * 513 + [0, 1]), rel=1e-9)


def test_single_value_and_empty_moments():
    acc = MomentsMeasure(pa.int32())
    assert acc.finalize(acc.zero()) == {"sum": None, "mean": None, "stddev": None}
    assert acc.finalize(acc.fold([pa.array([None, None], pa.int32())])) == {"sum": None, "mean": None, "stddev": None}
    one = acc.finalize(acc.fold([pa.array([7, None], pa.int32())]))
    assert one == {"sum": 7, "mean": 7.0, "stddev": 0.0}


# ---------------------------------------------------------------- floats
def random_floats(rng: np.random.Generator, n: int, *, nan=0.05, inf=0.0, null=0.1, dtype=np.float64) -> pa.Array:
    x = rng.normal(0, 1, n) * 10.0 ** rng.integers(-3, 6, n)
    x[rng.random(n) < 0.1] = 0.0
    x[rng.random(n) < 0.05] = -0.0
    x = np.round(x, 2).astype(dtype)
    x[rng.random(n) < nan] = np.nan
    pos = rng.random(n) < inf
    x[pos] = np.where(rng.random(pos.sum()) < 0.5, np.inf, -np.inf)
    return pa.array(x, mask=rng.random(n) < null)


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("seed", range(4))
def test_float_statistics_match_numpy(dtype, seed):
    rng = np.random.default_rng(seed)
    arr = random_floats(rng, 3_000, dtype=dtype)
    row = profile_row(arr, batches=4)
    x = arr.to_numpy(zero_copy_only=False)  # nulls -> NaN
    valid = arr.drop_null().to_numpy(zero_copy_only=False)
    finite = valid[~np.isnan(valid)]

    assert row["row_count"] == len(arr)
    assert row["null_count"] == arr.null_count
    assert row["nan_count"] == int(np.isnan(valid).sum())
    assert py(row["min"]) == finite.min() and py(row["max"]) == finite.max()
    assert row["sum"] == pytest.approx(float(finite.astype(np.float64).sum()), rel=1e-9)
    assert row["mean"] == pytest.approx(float(np.nanmean(x.astype(np.float64))), rel=1e-9, abs=1e-12)
    assert row["stddev"] == pytest.approx(float(np.nanstd(x.astype(np.float64), ddof=1)), rel=1e-9)
    # exact distinct values: IEEE equality (0.0 == -0.0), NaN excluded
    assert row["distinct_count"] == len(np.unique(finite))
    expected = lower_percentiles(finite)
    assert {k: py(row[k]) for k in expected} == expected


def test_float_infinities_and_nan():
    arr = pa.array([1.0, np.inf, -np.inf, np.nan, None, 2.0])
    row = profile_row(arr)
    assert (row["row_count"], row["null_count"], row["nan_count"]) == (6, 1, 1)
    assert py(row["min"]) == -np.inf and py(row["max"]) == np.inf  # infinities count, NaN does not
    assert math.isnan(row["sum"]) and math.isnan(row["mean"])  # inf + -inf as IEEE says
    pos = profile_row(pa.array([1.0, np.inf, np.nan]))
    assert pos["sum"] == np.inf and pos["mean"] == np.inf
    assert pos["distinct_count"] == 2
    assert {k: py(pos[k]) for k in ("p01", "p99")} == {"p01": 1.0, "p99": 1.0}  # floor(0.99 * 1) = 0
    many = profile_row(pa.array([np.inf] * 5 + [1.0] * 95 + [np.nan, -np.inf, -np.inf]))
    assert py(many["p99"]) == np.inf and py(many["p01"]) == -np.inf and py(many["p50"]) == 1.0


def test_only_nan_has_no_extremes():
    """NaN is excluded from min/max: a column of NaN (and nulls) has none."""
    row = profile_row(pa.array([np.nan, None, np.nan]), batches=2)
    assert row["nan_count"] == 2 and row["null_count"] == 1
    assert row["min"] is None and row["max"] is None
    assert row["sum"] is None and row["mean"] is None
    assert row["distinct_count"] == 0
    mm = MinMaxAccumulator(pa.float64())
    merged = mm.merge(mm.fold([pa.array([np.nan])]), mm.fold([pa.array([3.0, np.nan])]))
    assert py(merged.min) == 3.0 and py(merged.max) == 3.0


def test_counts_accumulator():
    acc = CountsAccumulator(pa.float32())
    arr = pa.array([np.nan, None, 1.0, np.nan], pa.float32())
    assert acc.finalize(acc.fold(chunks_of(arr, 3))) == {"row_count": 4, "null_count": 1, "nan_count": 2}
    iacc = CountsAccumulator(pa.int64())
    assert iacc.finalize(iacc.fold([pa.array([1, None], pa.int64())])) == {"row_count": 2, "null_count": 1, "nan_count": None}


# ---------------------------------------------------------------- decimals
@pytest.mark.parametrize("t", [pa.decimal128(18, 2), pa.decimal128(38, 10), pa.decimal256(50, 3)], ids=str)
def test_decimal_statistics_exact(t):
    rng_py = __import__("random").Random(3)
    top = 10**t.precision - 1  # the largest unscaled value of the type
    unscaled = [rng_py.randrange(-(10 ** min(t.precision, 30)), 10 ** min(t.precision, 30)) for _ in range(500)]
    unscaled[:2] = [top, -top]
    values = [Decimal(f"{u}e-{t.scale}") for u in unscaled]  # exact (no context rounding)
    values += values[:5]  # duplicates
    arr = pa.array(values + [None], t)
    row = profile_row(arr, batches=3)
    with localcontext() as ctx:
        ctx.prec = 200  # Python's default 28 digits would round the reference
        exact_sum = sum(values, Decimal(0))
        exact_mean = exact_sum / len(values)
        exact_sd = (sum(((v - exact_mean) ** 2 for v in values), Decimal(0)) / (len(values) - 1)).sqrt()
    assert row["sum"] == exact_sum  # exact Decimal
    assert isinstance(row["sum"], Decimal)
    assert py(row["min"]) == min(values) and py(row["max"]) == max(values)
    assert row["mean"] == pytest.approx(float(exact_mean), rel=1e-9, abs=1e-9)
    assert row["stddev"] == pytest.approx(float(exact_sd), rel=1e-6)
    assert row["distinct_count"] == len(set(values))
    s = sorted(values)
    for p in PERCENTILES:
        assert py(row[percentile_column(p)]) == s[int(math.floor(p * (len(s) - 1)))]


# ---------------------------------------------------------------- strings and binary
ALPHABET = list("abcXYZ09 ") + ["é", "ß", "日本", "😀", "e\u0301", "\u00a0", "Ω"]


def random_strings(rng: np.random.Generator, n: int) -> list[str | None]:
    out: list[str | None] = []
    for _ in range(n):
        if rng.random() < 0.1:
            out.append(None)
            continue
        k = int(rng.integers(0, 12))
        out.append("".join(ALPHABET[int(i)] for i in rng.integers(0, len(ALPHABET), k)))
    return out


@pytest.mark.parametrize("t", [pa.string(), pa.large_string()], ids=str)
@pytest.mark.parametrize("seed", range(3))
def test_string_statistics(t, seed):
    rng = np.random.default_rng(seed)
    values = random_strings(rng, 1_500)
    arr = pa.array(values, t)
    row = profile_row(arr, batches=3)
    valid = [v for v in values if v is not None]
    assert row["row_count"] == len(values) and row["null_count"] == len(values) - len(valid)
    assert row["avg_len"] == pytest.approx(sum(map(len, valid)) / len(valid))  # characters, not bytes
    assert row["max_len"] == max(map(len, valid))
    assert py(row["min"]) == min(valid) and py(row["max"]) == max(valid)  # code point (= UTF-8 byte) order
    assert row["distinct_count"] == len(set(valid))
    assert "sum" not in row and "p50" not in row


def test_binary_lengths_are_bytes():
    values = [b"\xff\xfe\x00", b"", "日本".encode(), None, b"\x80"]
    row = profile_row(pa.array(values, pa.binary()))
    valid = [v for v in values if v is not None]
    assert row["max_len"] == 6 and row["avg_len"] == pytest.approx(sum(map(len, valid)) / len(valid))
    assert py(row["min"]) == b"" and py(row["max"]) == b"\xff\xfe\x00"
    assert row["distinct_count"] == 4
    acc = LengthsMeasure(pa.string())
    assert acc.finalize(acc.fold([pa.array([None], pa.string())])) == {"avg_len": None, "max_len": None}


# ---------------------------------------------------------------- temporal
def test_timestamp_and_date_statistics():
    rng = np.random.default_rng(11)
    us = rng.integers(1_600_000_000_000_000, 1_800_000_000_000_000, 2_000)
    us[:50] = us[50:100]  # duplicates
    ts = pa.array(us, pa.timestamp("us", tz="UTC"), mask=rng.random(2_000) < 0.05)
    row = profile_row(ts, batches=3)
    valid = ts.drop_null().view(pa.int64()).to_numpy()
    assert row["min"].type == ts.type
    assert row["min"].value == valid.min() and row["max"].value == valid.max()
    assert row["distinct_count"] == len(np.unique(valid))
    expected = lower_percentiles(valid)
    assert {k: row[k].value for k in expected} == expected
    assert "sum" not in row and "avg_len" not in row

    days = pa.array(rng.integers(-1000, 30000, 500).astype(np.int32), pa.date32())
    drow = profile_row(days, batches=2)
    d = days.view(pa.int32()).to_numpy()
    assert py(drow["min"]) == dt.date(1970, 1, 1) + dt.timedelta(days=int(d.min()))
    assert py(drow["max"]) == dt.date(1970, 1, 1) + dt.timedelta(days=int(d.max()))
    assert drow["distinct_count"] == len(np.unique(d))


def test_duration_column_is_profiled():
    # pyarrow round-trips duration through Parquet, so a table can hold one
    arr = pa.array([5, -3, None, 5, 10**12], pa.duration("ms"))
    row = profile_row(arr, batches=2)
    assert row["min"].type == arr.type
    assert row["min"].value == -3 and row["max"].value == 10**12
    assert row["distinct_count"] == 3
    assert row["p50"].value == 5


def test_bool_statistics():
    arr = pa.array([True, False, None, True, True])
    row = profile_row(arr)
    assert py(row["min"]) is False and py(row["max"]) is True
    assert row["distinct_count"] == 2 and row["null_count"] == 1
    assert "sum" not in row and "p50" not in row


def test_null_type_and_all_null_columns():
    row = profile_row(pa.nulls(5))
    assert (row["row_count"], row["null_count"]) == (5, 5)
    assert "min" not in row and "distinct_count" not in row
    typed = profile_row(pa.array([None] * 4, pa.int64()), batches=2)
    assert (typed["row_count"], typed["null_count"], typed["distinct_count"]) == (4, 4, 0)
    assert typed["min"] is None and typed["sum"] is None and typed["p50"] is None


def test_unsupported_nested_columns_only_counted():
    lst = pa.array([[1, 2], None, []], pa.list_(pa.int64()))
    row = profile_row(lst)
    assert row["unsupported"] and "list" in row["unsupported"]
    assert (row["row_count"], row["null_count"]) == (3, 1)
    m = pa.array([[("a", 1)], None], pa.map_(pa.string(), pa.int64()))
    assert "map" in profile_row(m)["unsupported"]


# ---------------------------------------------------------------- exact percentiles and value counts
@pytest.mark.parametrize("n", [1, 2, 3, 7, 100, 101, 1000, 1001, 4097])
def test_exact_percentiles_match_numpy_lower(n):
    rng = np.random.default_rng(n)
    x = rng.integers(-20, 20, n) if n % 2 else rng.permutation(n)
    vc = pc.value_counts(pa.array(x))
    counts = pa.table({"value": vc.field(0), "count": vc.field(1)})
    got = {k: v.as_py() for k, v in exact_percentiles(counts).items()}
    assert got == lower_percentiles(x)


def test_exact_percentiles_of_nothing():
    empty = pa.table({"value": pa.array([], pa.int64()), "count": pa.array([], pa.int64())})
    assert exact_percentiles(empty) == dict.fromkeys(percentile_column(p) for p in PERCENTILES)


def test_value_counts_accumulator_and_frequency_order():
    acc = ValueCountsAccumulator(pa.string())
    arr = pa.array(["b", "a", None, "b", "c", "a", "b", "é"])
    state = acc.fold(chunks_of(arr, 3))
    t = by_frequency(sorted_counts(acc.table(state)))
    assert t.to_pylist() == [
        {"value": "b", "count": 3},
        {"value": "a", "count": 2},
        {"value": "c", "count": 1},
        {"value": "é", "count": 1},
    ]
    assert acc.finalize(acc.zero()) == {"distinct_count": 0}
    f = ValueCountsAccumulator(pa.float64())
    res = f.finalize(f.fold([pa.array([1.0, np.nan, None, 1.0, 2.0])]))
    assert res["distinct_count"] == 2 and res["p99"].as_py() == 1.0 and res["p01"].as_py() == 1.0
    # floats keep their values (not their counts): the same statistics
    prof = ColumnProfile("c", pa.float64())
    res = prof.values.finalize(prof.values.fold(chunks_of(pa.array([1.0, np.nan, None, 1.0, 2.0, -0.0, 0.0]), 3)))
    assert res["distinct_count"] == 3 and res["p99"].as_py() == 1.0 and res["p01"].as_py() == 0.0


def test_user_statistics_kernels():
    rng = np.random.default_rng(5)
    x = rng.integers(-3, 4, 1_000)
    arr = pa.array(x, pa.int64(), mask=rng.random(1_000) < 0.1)
    row = profile_row(arr, batches=4, user=[ZERO_COUNT, TOP1_SHARE])
    valid = arr.drop_null().to_numpy()
    assert row["zero_count"] == int((valid == 0).sum())
    # 7 distinct values < the summary's capacity: the share is exact
    assert row["top1_share"] == pytest.approx(np.unique(valid, return_counts=True)[1].max() / len(valid))
    srow = profile_row(pa.array(["a", "b"]), user=[ZERO_COUNT, TOP1_SHARE])
    assert srow["zero_count"] is None  # does not apply to strings
    drow = profile_row(pa.array([Decimal("0.00"), Decimal("1.50")], pa.decimal128(5, 2)), user=[ZERO_COUNT])
    assert drow["zero_count"] == 1


# ---------------------------------------------------------------- histograms
def integer_bins_check(spec: HistogramSpec, arr: pa.Array, t: pa.DataType) -> np.ndarray:
    """Bin counts, checked: they sum to the non-null count and every value lies in its bin's edges."""
    counts = spec.bin_counts(arr)
    valid = [to_domain(v) for v in arr.drop_null()]
    assert counts.sum() == len(valid)
    assert len(counts) == spec.bins
    lows, ups = spec.edges()
    assert lows[0] == spec.lower and ups[-1] == spec.upper
    manual = np.zeros(spec.bins, np.int64)
    for v in valid:
        b = spec.bin_of(v)
        assert lows[b] <= v <= ups[b], (v, b, lows[b], ups[b])
        manual[b] += 1
    assert (manual == counts).all()
    # edges are contiguous whole units and representable in the column's type
    assert all(ups[i] + 1 == lows[i + 1] for i in range(spec.bins - 1))
    assert from_domain(lows, t).type == t and from_domain(ups, t).type == t
    return counts


@pytest.mark.parametrize("t", INT_TYPES, ids=str)
@pytest.mark.parametrize("requested", [1000, 10000, 7])
def test_integer_histogram_bins(t, requested):
    rng = np.random.default_rng(requested)
    arr = random_ints(rng, t, 3_000)
    lo, hi = pc.min_max(arr).values()
    spec = make_spec(t, lo.as_py(), hi.as_py(), requested)
    assert spec.domain == HistogramDomain.INTEGER.value
    assert spec.bins <= requested
    integer_bins_check(spec, arr, t)


def test_integer_histogram_narrow_range_one_bin_per_value():
    spec = make_spec(pa.int32(), 10, 14, 1000)
    assert (spec.bins, spec.width) == (5, 1)
    counts = spec.bin_counts(pa.array([10, 10, 11, 14, None], pa.int32()))
    assert counts.tolist() == [2, 1, 0, 0, 1]
    single = make_spec(pa.int64(), 3, 3, 1000)
    assert single.bins == 1 and single.bin_counts(pa.array([3, 3], pa.int64())).tolist() == [2]


@pytest.mark.parametrize(
    "t, lo, hi",
    [
        (pa.int64(), INT64_MIN, INT64_MAX),
        (pa.uint64(), 0, UINT64_MAX),
        (pa.int64(), INT64_MIN, INT64_MIN + 5),
        (pa.uint64(), UINT64_MAX - 2000, UINT64_MAX),
    ],
    ids=["int64-full", "uint64-full", "int64-bottom", "uint64-top"],
)
def test_full_range_64bit_histograms_do_not_overflow(t, lo, hi, tmp_path):
    rng = np.random.default_rng(0)
    values = [lo, hi, hi, lo, None]
    span = hi - lo
    values += [lo + int(f * span) for f in rng.random(500)]
    arr = pa.array(values, t)
    spec = make_spec(t, lo, hi, 1000)
    wlo, whi = widened_range(lo, hi, True, int(np.iinfo(t.to_pandas_dtype()).max))
    assert wlo <= lo and whi >= hi and (spec.lower, spec.upper) == (wlo, whi)
    wspan = whi - wlo
    width = -(-(wspan + 1) // 1000)
    assert (spec.width, spec.bins) == (width, -(-(wspan + 1) // width))
    counts = integer_bins_check(spec, arr, t)
    bin_of = {v: int(np.flatnonzero(spec.bin_counts(pa.array([v], t)))[0]) for v in (lo, hi)}
    assert counts[bin_of[lo]] >= 2 and counts[bin_of[hi]] >= 2
    # the file writer turns the edges into the column's type without overflow
    uri = str(tmp_path / "histograms.parquet")
    ident = FileIdentity("t", "t", "table", "", "s", "j", FileIdentity.now())
    writer.write_histograms(uri, [("c", t, spec, counts)], ident)
    col = pq.read_table(uri)["c"].combine_chunks()
    assert pc.struct_field(col, "lower")[0].as_py() == wlo
    assert pc.struct_field(col, "upper")[spec.bins - 1].as_py() == whi
    assert pc.struct_field(col, "count").to_pylist() == counts.tolist()


def test_temporal_histograms_use_integer_storage():
    rng = np.random.default_rng(1)
    ts = pa.array(rng.integers(0, 10**15, 1_000), pa.timestamp("us", tz="UTC"))
    lo, hi = pc.min_max(ts).values()
    spec = make_spec(ts.type, to_domain(lo), to_domain(hi), 1000)
    integer_bins_check(spec, ts, ts.type)
    d = pa.array(rng.integers(0, 400, 1_000).astype(np.int32), pa.date32())
    lo, hi = pc.min_max(d).values()
    dspec = make_spec(d.type, to_domain(lo), to_domain(hi), 1000)
    assert dspec.width == 1
    integer_bins_check(dspec, d, d.type)


@pytest.mark.parametrize("seed", range(4))
def test_float_histogram_counts(seed):
    rng = np.random.default_rng(seed)
    arr = random_floats(rng, 5_000, inf=0.01)
    valid = arr.drop_null().to_numpy(zero_copy_only=False)
    valid = valid[~np.isnan(valid)]
    finite = valid[np.isfinite(valid)]
    spec = make_spec(pa.float64(), finite.min(), finite.max(), 1000)
    counts = spec.bin_counts(arr)
    assert counts.sum() == len(valid)  # every non-null non-NaN value, infinities included
    # -inf in the first bin, +inf in the last (the extremes in theirs: the range is widened)
    assert counts[0] >= (valid == -np.inf).sum() and counts[-1] >= (valid == np.inf).sum()
    bin_of = {v: int(np.flatnonzero(spec.bin_counts(pa.array([v])))[0]) for v in (finite.min(), finite.max())}
    assert counts[bin_of[finite.min()]] >= (finite == finite.min()).sum() + (valid == -np.inf).sum() * (bin_of[finite.min()] == 0)
    lows, ups = spec.edges()
    assert (lows[0], ups[-1]) == widened_range(finite.min(), finite.max(), False)
    assert lows[0] <= finite.min() and ups[-1] >= finite.max()
    # away from the edges (float rounding), a value lies in [lower, upper) of its bin
    idx = np.clip(np.floor((finite - spec.lower) / spec.width), 0, spec.bins - 1).astype(int)
    lows_a, ups_a = np.array(lows), np.array(ups)
    tol = spec.width * 1e-9
    assert (finite >= lows_a[idx] - tol).all() and (finite <= ups_a[idx] + tol).all()
    assert np.bincount(idx, minlength=spec.bins)[1:-1].sum() <= counts.sum()


@pytest.mark.parametrize("t", [pa.int64(), pa.float64()])
def test_weighted_bin_counts_match_the_rows_in_any_order(t):
    """Distinct values with counts bin like the rows they stand for, sorted or not."""
    rng = np.random.default_rng(3)
    distinct = np.unique(rng.integers(-500, 500, 300)).astype(t.to_pandas_dtype())
    counts = rng.integers(1, 5, len(distinct))
    rows = pa.array(np.repeat(distinct, counts), t)
    spec = make_spec(t, int(distinct.min()) if pa.types.is_integer(t) else float(distinct.min()), distinct.max().item(), 37)
    want = spec.bin_counts(rows)
    assert spec.weighted_bin_counts(pa.array(distinct, t), counts).tolist() == want.tolist()
    shuffled = rng.permutation(len(distinct))  # the exact fallback for values not in order
    assert spec.weighted_bin_counts(pa.array(distinct[shuffled], t), counts[shuffled]).tolist() == want.tolist()
    assert spec.weighted_bin_counts(pa.array(distinct, t), None).tolist() == spec.bin_counts(pa.array(distinct, t)).tolist()
    with pytest.raises(ValueError):
        spec.weighted_bin_counts(pa.array(distinct, t), counts[:-1])


def test_float_histogram_infinities_only_at_the_ends():
    spec = make_spec(pa.float64(), -1.0, 1.0, 1000)
    counts = spec.bin_counts(pa.array([-np.inf, np.inf, np.inf, np.nan, None, 0.0, 1.0, -1.0]))
    assert counts[0] == 2 and counts[-1] == 3 and counts[500] == 1 and counts.sum() == 6
    assert spec.bin_of(-np.inf) == 0 and spec.bin_of(np.inf) == 999


@pytest.mark.parametrize("value", [1e308, -1e308, 1.7976931348623157e308, -1.7976931348623157e308, 1e300, 474.9, 0.55, 0.0, 200.123])
def test_float_bin_of_values_far_outside_a_narrow_range(value: float):
    """(value - lower) / width overflows to infinity for values far outside a range narrower than
    its bin count (the Flight server's value_range bounds): clamped like any value outside."""
    from fractions import Fraction

    spec = HistogramSpec("float", 0.55, 0.47435, 1000, 474.9)
    exact = math.floor((Fraction(value) - Fraction(spec.lower)) / Fraction(spec.width))  # the oracle: exact arithmetic
    assert spec.bin_of(value) == min(max(exact, 0), spec.bins - 1)


def test_float_histogram_single_value_and_extreme_range():
    one = make_spec(pa.float32(), 2.5, 2.5, 1000)
    assert (one.bins, one.width) == (1, 0.0)
    assert one.bin_counts(pa.array([2.5, np.inf, -np.inf, np.nan], pa.float32())).tolist() == [3]
    big = np.finfo(np.float64).max
    wide = make_spec(pa.float64(), -big, big, 1000)
    assert math.isfinite(wide.width)
    counts = wide.bin_counts(pa.array([-big, big, 0.0, np.inf]))
    assert counts[0] == 1 and counts[-1] == 2 and counts[500] == 1


def test_decimal_histogram_float_domain():
    arr = pa.array([Decimal("-1.50"), Decimal("0.00"), Decimal("2.25"), None], pa.decimal128(10, 2))
    spec = make_spec(arr.type, -1.5, 2.25, 1000)
    assert spec.domain == HistogramDomain.FLOAT.value
    counts = spec.bin_counts(arr)
    assert counts.sum() == 3 and counts[0] == 1 and counts[-1] == 1


# ---------------------------------------------------------------- regressions
def test_moments_merge_keeps_infinite_mean():
    acc = MomentsMeasure(pa.float64())
    a, b = acc.fold([pa.array([np.inf])]), acc.fold([pa.array([1.0, 2.0])])
    for merged in (acc.merge(a, b), acc.merge(b, a)):
        assert acc.finalize(merged)["mean"] == np.inf and acc.finalize(merged)["sum"] == np.inf
    c = acc.fold([pa.array([-np.inf])])
    assert math.isnan(acc.finalize(acc.merge(a, c))["mean"])


def test_top1_share_of_dates_outside_python_range():
    days = pa.array([-800_000, -800_000, 3_000_000, None], pa.int32()).view(pa.date32())  # years -220 and 10183
    row = profile_row(days, batches=2, user=[TOP1_SHARE])
    assert row["top1_share"] == pytest.approx(2 / 3)


def test_sketch_percentiles_of_timestamps_near_int64_max():
    """The table's approximate percentiles (KLL, float64) come back in range of the type."""
    p = ColumnProfile("c", pa.timestamp("ns"))
    arr = pa.array([INT64_MAX, INT64_MAX - 1, 0], pa.int64()).view(pa.timestamp("ns"))
    state = p.update(p.zero(), arr)
    row = p.finalize_table(state, None)
    assert row["p99"].value == INT64_MAX and row["percentiles_exact"] is False


# ---------------------------------------------------------------- the sorted view of whole columns
@pytest.mark.parametrize("t", INT_TYPES, ids=str)
@pytest.mark.parametrize("wide", [False, True], ids=["bincount", "sort"])
def test_sorted_view_counts_match_numpy_unique(t, wide):
    """Narrow ranges are counted by a bincount, wide ones by a sort: both give numpy's unique."""
    rng = np.random.default_rng(7)
    info = np.iinfo(t.to_pandas_dtype())
    if wide and info.bits >= 32:
        x = rng.integers(info.min, info.max, 5_000, dtype=info.dtype, endpoint=True)
        x[:2] = [info.min, info.max]
    else:  # the full range of 8- and 16-bit types is narrow: offsets must not wrap
        x = rng.integers(
            max(info.min, -300) if info.bits > 8 else info.min,
            min(info.max, 300) if info.bits > 8 else info.max,
            5_000,
            dtype=info.dtype,
            endpoint=True,
        )
    arr = pa.array(x, t, mask=rng.random(len(x)) < 0.1)
    view = sortedvalues.of(arr)
    valid = arr.drop_null().to_numpy()
    u, c = np.unique(valid, return_counts=True)
    assert view.distinct.dtype == valid.dtype
    assert view.distinct.tolist() == u.tolist() and view.counts.tolist() == c.tolist()
    assert view.sorted_values().tolist() == np.sort(valid).tolist()
    positions = sortedvalues.percentile_positions(len(valid), PERCENTILES)
    assert view.at_positions(positions).tolist() == np.sort(valid)[positions].tolist()
    assert sortedvalues.to_arrow(view.distinct, t).equals(pa.array(u, t))


def test_sorted_view_of_floats_folds_zeros_and_drops_nan():
    arr = pa.array([0.0, -0.0, np.nan, None, 1.5, -np.inf, 1.5], pa.float32())
    view = sortedvalues.of(arr)
    assert view.nans == 1 and view.n == 5
    assert view.distinct.tolist() == [-np.inf, 0.0, 1.5] and view.counts.tolist() == [1, 2, 2]
    assert not np.signbit(view.distinct[view.distinct == 0]).any()
    assert np.signbit(view.values).sum() == 2  # -0.0 and -inf kept as they are for the sums
    assert view.float64_at(np.arange(view.n)).tolist() == [-np.inf, 0.0, 0.0, 1.5, 1.5]


@pytest.mark.parametrize("t", [pa.decimal128(18, 2), pa.decimal128(9, 0), pa.decimal256(18, 4)], ids=str)
def test_sorted_view_of_decimals_round_trips(t):
    top = 10**t.precision - 1
    unscaled = [top, -top, 0, -1, 1, 12345, -12345, 12345]
    values = [Decimal(u).scaleb(-t.scale) for u in unscaled]
    arr = pa.array(values + [None], t).slice(1)  # an offset, and a null
    view = sortedvalues.of(arr)
    assert view.values.tolist() == unscaled[1:]
    assert view.distinct.tolist() == sorted(set(unscaled[1:]))
    back = sortedvalues.to_arrow(view.distinct, t)
    assert back.type == t and back.to_pylist() == sorted(set(values[1:]))
    # Arrow's cast, as the other accumulators convert decimals (not always correctly rounded)
    assert view.float64_at(np.arange(view.n)).tolist() == pa.array(sorted(values[1:]), t).cast(pa.float64(), safe=False).to_pylist()
    assert sortedvalues.supports(t) and not sortedvalues.supports(pa.decimal128(19, 2))


def test_whole_column_counts_are_sorted_value_counts():
    rng = np.random.default_rng(3)
    for arr in (
        pa.array(rng.integers(0, 50, 1_000), pa.int64()),
        pa.array(rng.integers(-(2**62), 2**62, 1_000), pa.int64()),
        pa.array(rng.integers(0, 9_999, 1_000) / 100, pa.float64()).cast(pa.decimal128(10, 2)),
        pa.array(rng.integers(0, 60, 1_000).astype(np.int32), pa.int32()).view(pa.date32()),
    ):
        p = ColumnProfile("c", arr.type)
        _, row, counts = p.profile_column(arr)
        want = sorted_counts(ValueCountsAccumulator(arr.type).table(ValueCountsAccumulator(arr.type).fold([arr])))
        assert counts.select(["value", "count"]).equals(want.select(["value", "count"]))
        assert row["distinct_count"] == counts.num_rows


def test_theta_of_hash_ordered_strings_equals_a_full_pass():
    """Feeding only the front of the hash order builds the sketch a full pass in that order builds."""
    from datasketches import update_theta_sketch

    from engine.stats.sketches import THETA_LG_K, THETA_SEED, theta_hashes_bytes, theta_of_hashed

    values = pa.array([""] + [f"value {i}" for i in range(30_000)])
    h = theta_hashes_bytes(values)
    order = np.argsort(h)
    ordered = values.take(pa.array(order))
    full = update_theta_sketch(THETA_LG_K, 1.0, THETA_SEED)
    for v in ordered.to_pylist():
        full.update(v)
    blob = theta_of_hashed(ordered, h[order])
    assert blob == full.compact().serialize()
    est, lo, hi = theta_estimate(blob)
    assert lo <= 30_000 <= hi


def test_long_strings_take_the_hash_path():
    """No length limit: a 1 MB value is hashed like any other (its hash equals DataSketches')."""
    long = "a" * 1_000_000
    arr = pa.array([long, "b", None, "b", ""])
    row = profile_row(arr)
    _, _, counts = ColumnProfile("c", arr.type).profile_column(arr)
    assert row["distinct_count"] == 3 and "hash" in counts.column_names
    got = dict(zip(counts["value"].to_pylist(), counts["hash"].to_pylist()))
    assert got[long] == _datasketches_hash(long) and got["b"] == _datasketches_hash("b")
    assert dict(zip(counts["value"].to_pylist(), counts["count"].to_pylist())) == {long: 1, "b": 2, "": 1}


def _datasketches_hash(value) -> int:
    """The 63-bit hash DataSketches' theta keeps for one value (a one-entry compact sketch ends with it)."""
    from datasketches import update_theta_sketch

    from engine.stats.sketches import THETA_LG_K, THETA_SEED

    s = update_theta_sketch(THETA_LG_K, 1.0, THETA_SEED)
    s.update(value)
    return int.from_bytes(s.compact().serialize()[-8:], "little")


def test_vectorised_theta_hashes_equal_datasketches():
    from engine.stats.sketches import theta_hashes, theta_hashes_bytes

    rng = np.random.default_rng(12)
    symbols = ["a", "Z", "é", "日", "\U0001f600", "\x00", " "]
    lengths = list(range(1, 70)) + list(rng.integers(70, 5_000, 40))  # every tail and block count, and long values
    texts = ["".join(symbols[int(i)] for i in rng.integers(0, len(symbols), int(k))) for k in lengths]
    want = [_datasketches_hash(t) for t in texts]
    for string_type in (pa.string(), pa.large_string(), pa.string_view()):
        arr = pa.array(["skip"] + texts + [None], string_type).slice(1)  # an offset and a null
        assert theta_hashes_bytes(arr).tolist() == want, string_type
    assert theta_hashes_bytes(pa.array([], pa.string())).tolist() == []
    ints = np.array([0, 1, -1, 12345, 2**63 - 1, -(2**63)], np.int64)
    assert theta_hashes(ints).tolist() == [_datasketches_hash(int(v)) for v in ints]
    assert theta_hashes(ints.astype(np.int32)[:4]).tolist() == [_datasketches_hash(int(v)) for v in ints[:4]]


def test_string_counts_stay_exact_when_hashes_collide(monkeypatch):
    """Every hash forced equal: grouping by hash must notice and count by value."""
    from engine.stats import sketches
    from engine.stats.valuecounts import merge_counts

    real = sketches.theta_hashes_bytes
    monkeypatch.setattr(sketches, "theta_hashes_bytes", lambda v, seed=sketches.THETA_SEED: np.zeros(len(real(v)), np.uint64))
    arr = pa.array([f"v{i % 700}" for i in range(1_000)] + [None])  # mostly distinct: the group-by-hash path first
    p = ColumnProfile("c", arr.type)
    _, row, counts = p.profile_column(arr)
    want = sorted_counts(ValueCountsAccumulator(arr.type).fold([arr]).compact())
    assert row["distinct_count"] == 700
    assert sorted_counts(counts).select(["value", "count"]).equals(want)
    _, _, other = p.profile_column(arr.slice(0, 10))
    merged = merge_counts([counts, other], arr.type)
    assert dict(zip(*sorted_counts(merged).select(["value", "count"]).to_pydict().values()))["v3"] == 3


def test_statistics_rows_encode_value_statistics_as_one_array_per_type(monkeypatch):
    """The batched text forms of min/max/percentiles (one array a type, across the rows) equal
    the one-scalar-at-a-time forms."""
    arrays = [
        pa.array(np.arange(1000)),
        pa.array(np.random.default_rng(0).random(1000)),
        pa.array(np.arange(1000), pa.int64()).view(pa.timestamp("us", tz="UTC")),
        pa.array([Decimal("1.25"), Decimal("-3.50")] * 10, pa.decimal128(10, 2)),
        pa.array(["a", "b"]),
        pa.array(np.arange(100, dtype=np.int32)).view(pa.date32()),
        pa.array(np.arange(10, dtype=np.float16)),
        pa.array([True, False]),
        pa.array([5, -3, None], pa.duration("ms")),
        pa.array([1, 2], pa.time64("ns")),
        pa.array([None, None], pa.int64()),
    ]
    rows = [ColumnProfile(f"c{i}", a.type).profile_column(a)[1] for i, a in enumerate(arrays)]
    batched = writer.statistics_table(rows, [])
    monkeypatch.setattr(writer, "_value_texts", lambda rows: [{} for _ in rows])
    assert batched.equals(writer.statistics_table(rows, []))
    assert batched["p50"].to_pylist()[:3] == ["499", repr(rows[1]["p50"].as_py()), "1970-01-01T00:00:00.000499Z"]


def test_fmix_kernel_equals_murmurs_finalizer():
    """The compiled finalizer against a Python transcription of MurmurHash3's fmix64."""
    from engine.stats.murmur import fmix

    def reference(k: int) -> int:
        m = (1 << 64) - 1
        k ^= k >> 33
        k = (k * 0xFF51AFD7ED558CCD) & m
        k ^= k >> 33
        k = (k * 0xC4CEB9FE1A85EC53) & m
        return k ^ (k >> 33)

    words = np.array([0, 1, 2, 12345, 2**63, 2**64 - 1] + list(np.random.default_rng(5).integers(0, 2**63, 50)), np.uint64)
    assert fmix(words).tolist() == [reference(int(w)) for w in words]
    assert fmix(words.view(np.int64)).tolist() == fmix(words).tolist()


@pytest.mark.parametrize(
    "values",
    [
        np.array([2**62, 2**62, 2**62, -5], np.int64),  # the plain sum would wrap: bounds say so
        np.array([-(2**63), 2**63 - 1, -(2**63)], np.int64),
        np.array([2**64 - 1, 2**63, 1], np.uint64),
        np.random.default_rng(0).integers(-(10**12), 10**12, 100_000),  # bounds allow one plain sum
        np.arange(-1000, 1000, dtype=np.int64),
        np.zeros(0, np.int64),
    ],
    ids=["wraps", "extremes", "uint64", "random", "small", "empty"],
)
def test_exact_int_sum_equals_python_with_and_without_bounds(values):
    from engine.measures.moments import exact_int_sum

    expected = sum(int(v) for v in values)
    assert exact_int_sum(values) == expected
    if len(values):
        assert exact_int_sum(values, (int(values.min()), int(values.max()))) == expected


@pytest.mark.parametrize("text", [["abc", "", "héllo", "日本語", "a\u00e9"], ["plain", "ascii", ""], []], ids=["utf8", "ascii", "empty"])
def test_string_lengths_count_characters_ascii_or_not(text):
    from engine.measures.value_lengths import char_lengths as _char_lengths

    arr = pa.array(["zzzzzz", *text, "日本"], pa.string()).slice(1, len(text))  # buffer bytes outside the slice
    assert _char_lengths(arr).tolist() == [len(t) for t in text]
    assert _char_lengths(pa.array(text, pa.large_string())).tolist() == [len(t) for t in text]


def _dictionary_chunks(values: list, t: pa.DataType, rng: np.random.Generator) -> list[pa.Array]:
    """``values`` cut into chunks: dictionaries (with unused and shuffled entries, as files
    give them) and plain arrays, as a source's read_batches(dictionary=...) may mix them."""
    cuts = sorted(set(rng.integers(0, len(values), 4).tolist()) | {0, len(values)})
    chunks = []
    for i, (a, b) in enumerate(zip(cuts, cuts[1:])):
        piece = pa.array(values[a:b], t)
        if i % 3 == 2:
            chunks.append(piece)  # a plain chunk (a file without dictionary pages)
            continue
        distinct = sorted({v for v in values[a:b] if v is not None} | {"never-used"})
        rng.shuffle(distinct)
        codes = pa.array([None if v is None else distinct.index(v) for v in values[a:b]], pa.int32())
        chunks.append(pa.DictionaryArray.from_arrays(codes, pa.array(distinct, t)))
    return chunks


@pytest.mark.parametrize("t", [pa.string(), pa.large_string()], ids=str)
@pytest.mark.parametrize("seed", range(4))
def test_string_counts_from_dictionary_codes_equal_the_decoded_profile(t, seed):
    from engine.stats.user import TOP1_SHARE

    rng = np.random.default_rng(seed)
    pool = ["a", "b", "日本", "", "zz", "héllo", "x" * 40]
    values = [None if rng.random() < 0.1 else pool[int(rng.integers(0, len(pool)))] for _ in range(2_000)]
    if seed == 3:
        values = [None] * 300  # all null
    chunks = _dictionary_chunks(values, t, rng)
    whole = pa.array(values, t)
    for user in ([], [TOP1_SHARE]):
        p = ColumnProfile("s", t, user)
        assert p.counts_strings
        state, row, counts, view = p.profile_chunks(chunks)
        ref_state, ref_row, ref_counts, _ = ColumnProfile("s", t, user).profile_column_view(whole)
        assert view is None
        assert row == ref_row  # every statistic, theta sketch and user statistic included
        assert counts.equals(ref_counts)  # value counts in hash order, with the hashes
        assert state.distinct == ref_state.distinct and state.counts == ref_state.counts


def test_dictionary_chunks_decode_for_statistics_that_need_rows():
    from engine.stats.user import UserStatistic

    rows_only = UserStatistic(name="rows_seen", compute=lambda a: len(a), merge=lambda a, b: a + b, result_type=pa.int64())
    values = ["p", "q", None, "p"] * 50
    chunks = _dictionary_chunks(values, pa.string(), np.random.default_rng(0))
    p = ColumnProfile("s", pa.string(), [rows_only])
    assert not p.counts_strings
    _, row, counts, _ = p.profile_chunks(chunks)
    _, ref_row, ref_counts, _ = ColumnProfile("s", pa.string(), [rows_only]).profile_column_view(pa.array(values))
    assert row == ref_row and row["rows_seen"] == 200 and counts.equals(ref_counts)


@pytest.mark.parametrize("top", [1, 255, 256, 65_536, 2**32, 2**40])
def test_counts_narrowed_for_transit_widen_back_unchanged(top):
    from engine.stats.valuecounts import hashed_counts, narrow_counts, value_sorted_counts, widen_counts

    counts = np.array([1, 2, top, 1], np.int64)
    expected_width = 1 if top < 256 else 2 if top < 65_536 else 4 if top < 2**32 else 8
    for table in (
        value_sorted_counts(pa.array([1, 2, 3, 4]), counts),
        hashed_counts(pa.array(["a", "b", "c", "d"]), counts, np.arange(4, dtype=np.uint64)),
    ):
        narrow = narrow_counts(table)
        assert narrow["count"].type.bit_width // 8 == expected_width
        assert narrow.schema.metadata == table.schema.metadata  # the sorted-by flags survive
        back = widen_counts(narrow)
        assert back.equals(table) and back.schema == table.schema
    empty = value_sorted_counts(pa.array([], pa.int64()), np.zeros(0, np.int64))
    assert widen_counts(narrow_counts(empty)).equals(empty)


_INT_TYPES = [pa.int8(), pa.int32(), pa.int64(), pa.uint64(), pa.date32(), pa.timestamp("us", "UTC"), pa.duration("s")]


@pytest.mark.parametrize("t", _INT_TYPES, ids=str)
@pytest.mark.parametrize("bins", [1000, 10000, 3])
def test_integer_bin_counts_by_edges_equal_a_bin_per_row_at_the_type_extremes(t, bins):
    """Sorted integer-domain values are binned by a binary search of the edges; a bin per
    value (``bin_counts`` of the rows) is the oracle, up to the type's extremes, with a
    table range wider than the partition's values."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    st_type = storage_type(t)
    info = np.iinfo(st_type.to_pandas_dtype())

    @settings(max_examples=40, deadline=None)
    @given(
        a=st.integers(int(info.min), int(info.max)),
        b=st.integers(int(info.min), int(info.max)),
        picks=st.lists(st.floats(0, 1), min_size=1, max_size=60),
        weights=st.lists(st.integers(1, 9), min_size=60, max_size=60),
    )
    def check(a, b, picks, weights):
        lo, hi = min(a, b), max(a, b)
        values = sorted({min(hi, lo + int((hi - lo) * f)) for f in picks} | {lo, hi})  # float rounding may overshoot
        arr = pa.array(values, st_type)
        arr = arr if st_type == t else arr.view(t)
        spec = make_spec(t, lo, hi, bins) if not pa.types.is_temporal(t) else make_spec(t, to_domain(arr[0]), to_domain(arr[-1]), bins)
        w = np.array(weights[: len(values)], np.int64)
        rows = pa.array(np.repeat(np.array(values, dtype=st_type.to_pandas_dtype()), w), st_type)
        rows = rows if st_type == t else rows.view(t)
        assert spec.weighted_bin_counts(arr, w).tolist() == spec.bin_counts(rows).tolist()
        assert spec.weighted_bin_counts(arr, None).tolist() == spec.bin_counts(arr).tolist()
        inner = arr.slice(1, max(len(arr) - 2, 0))  # a partition inside the table's range
        if len(inner):
            assert spec.weighted_bin_counts(inner, None).tolist() == spec.bin_counts(inner).tolist()

    check()


@pytest.mark.parametrize("integer", [True, False])
@settings(max_examples=200, deadline=None)
@given(lo=st.integers(-(10**12), 10**12), span=st.integers(0, 10**12), grow=st.floats(0, 1))
def test_the_widened_range_holds_the_values_and_appends_within_it_keep_it(integer, lo, span, grow):
    """The range's upper end is widened to whole power-of-two steps (1/32 to 1/16 of the span)
    from the minimum: it holds [lo, hi], wastes less than a step, and a new maximum inside it
    leaves it as it is unless the span passes a power of two (a new step)."""
    hi = lo + span
    wlo, whi = widened_range(lo, hi, integer)
    assert wlo == lo and whi >= hi
    unit = 1 if integer else 0
    if span >= 32:
        assert (whi - wlo) - span <= (span + unit) / 16 + 1
        new_hi = hi + int(grow * (whi - hi)) if integer else hi + grow * (whi - hi)
        if math.floor(math.log2(new_hi - lo + unit)) == math.floor(math.log2(span + unit)):
            assert widened_range(lo, new_hi, integer) == (wlo, whi)


@settings(max_examples=200, deadline=None)
@given(
    values=st.lists(st.integers(-3000, 3000), min_size=1, max_size=200),
    more=st.lists(st.integers(-6000, 6000), max_size=50),
    bins=st.sampled_from([7, 100, 1000]),
)
def test_counts_from_old_bins_equal_binning_the_values(values, more, bins):
    """An inherited partition re-binned from its stored counts (no data read) gets exactly what
    binning its values on the new edges gives, whenever every old bin lies in one new bin; unit
    bins always do."""
    t = pa.int64()
    old = make_spec(t, min(values), max(values), bins)
    everything = values + more
    new = make_spec(t, min(everything), max(everything), bins)
    arr = pa.array(values, t)
    got = new.counts_from(old, old.bin_counts(arr))
    if old.width == 1:
        assert got is not None
    if got is not None:
        assert got.tolist() == new.bin_counts(arr).tolist()
    assert make_spec(pa.float64(), 0.0, 1.0, 10).counts_from(make_spec(pa.float64(), 0.0, 0.5, 10), np.ones(10, np.int64)) is None


@pytest.mark.parametrize(
    "type_",
    [pa.timestamp("us", tz="UTC"), pa.timestamp("ns"), pa.time64("us"), pa.time32("ms"), pa.duration("s"), pa.date64()],
    ids=str,
)
def test_merge_counts_of_times_sorts_their_integer_storage(type_):
    """Times, timestamps and durations (counted for their exact table level) merge as their
    integer storage: the value counts of all their rows (pyarrow.compute's, the oracle), in value order."""
    from engine.stats.valuecounts import counts_sorted, merge_counts

    rng = np.random.default_rng(11)
    storage = pa.int32() if pa.types.is_time32(type_) else pa.int64()
    pieces = [pa.array(rng.integers(-500 if not pa.types.is_time(type_) else 0, 2_000, 3_000), storage).view(type_) for _ in range(4)]
    parts = [ColumnProfile("t", type_).profile_column(p)[2] for p in pieces]
    assert all(counts_sorted(p) for p in parts)
    merged = merge_counts(parts, type_)
    oracle = pc.value_counts(pa.chunked_array(pieces))
    want = pa.table({"value": oracle.field(0), "count": oracle.field(1)})
    want = want.take(pc.sort_indices(want["value"]))
    assert counts_sorted(merged) and merged.schema.field("value").type == type_
    assert merged.select(["value", "count"]).equals(want)


def _float_bits(x: float) -> bytes:
    import struct

    return struct.pack("<d", x)


@settings(max_examples=80, deadline=None)
@given(
    values=st.lists(st.none() | st.floats(allow_nan=True, allow_infinity=True) | st.sampled_from([0.0, -0.0, math.nan]), max_size=30),
    t=st.sampled_from([pa.float32(), pa.float64()]),
)
def test_whole_column_float_extremes_are_arrows_min_max(values: list, t: pa.DataType) -> None:
    """A whole float column's extremes come from the sorted view's ends, and from Arrow only when
    a zero is an end (the view folds -0.0 into 0.0): the oracle is Arrow's min_max, bit for bit
    (its choice between -0.0 and 0.0 kept), none when only NaN or nulls are there."""
    arr = pa.array(values, pa.float64()).cast(t)
    _, row, _ = ColumnProfile("c", t).profile_column(arr)
    mm = pc.min_max(arr)
    lo, hi = mm["min"].as_py(), mm["max"].as_py()
    if lo is None or math.isnan(lo):
        assert row["min"] is None and row["max"] is None
    else:
        assert row["min"].type == t and row["max"].type == t
        assert _float_bits(row["min"].as_py()) == _float_bits(lo) and _float_bits(row["max"].as_py()) == _float_bits(hi)
