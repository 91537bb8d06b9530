"""Skewness (engine/measures/skewness.py) against DuckDB's ``skewness`` over the same rows."""

from __future__ import annotations

import decimal

import duckdb
import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.files import layout, partial_state
from engine.measures.skewness import Skewness, ThirdMoments
from engine.stats import columnwise, sortedvalues
from engine.stats.profile import ColumnProfile


def _parts(t: pa.DataType, seed: int) -> list[pa.Array]:
    """Three partitions of skewed values with nulls (one partition all null, one of two rows)."""
    rng = np.random.default_rng(seed)
    parts = []
    for n in (1500, 2, 900, 40):
        x = rng.exponential(50.0, n) - 10
        nulls = rng.random(n) < 0.1
        if t == pa.int64():
            values = [None if z else int(v) for v, z in zip(x, nulls)]
        elif pa.types.is_decimal(t):
            values = [None if z else decimal.Decimal(f"{v:.3f}") for v, z in zip(x, nulls)]
        else:
            values = [None if z else float(v) for v, z in zip(x, nulls)]
        parts.append(pa.array(values, t))
    parts.append(pa.array([None] * 5, t))
    return parts


def _duckdb_skewness(values: pa.Array) -> float | None:
    con = duckdb.connect()
    try:
        con.register("t", pa.table({"x": values}))
        return con.execute("SELECT skewness(x::DOUBLE) FROM t").fetchone()[0]
    finally:
        con.close()


@pytest.mark.parametrize("t", [pa.int64(), pa.float64(), pa.decimal128(12, 3)], ids=str)
def test_table_skewness_is_duckdbs(t: pa.DataType) -> None:
    parts = _parts(t, 7)
    expected = _duckdb_skewness(pa.concat_arrays(parts))
    profile = ColumnProfile("x", t)
    # one part through update (batches), the others through the whole-column path
    states = [profile.update(profile.zero(), parts[0])] + [profile.profile_column(p)[0] for p in parts[1:]]
    merged = profile.merge_all(states)
    got = profile.finalize_table(merged, None)["skewness"]
    assert got == pytest.approx(expected, rel=1e-9)
    # the driver's field-by-field merge gives the same bits
    cols = columnwise.StateColumns.of(profile, states)
    by_fields = columnwise.merge(profile, cols, [s.theta for s in states])
    assert by_fields.measures == merged.measures


def test_partition_skewness_and_nulls() -> None:
    parts = _parts(pa.float64(), 3)
    profile = ColumnProfile("x", pa.float64())
    for p in parts:
        row = profile.profile_column(p)[1]
        expected = _duckdb_skewness(p)
        assert (row["skewness"] is None) == (expected is None)
        if expected is not None:
            assert row["skewness"] == pytest.approx(expected, rel=1e-9)


def test_no_skewness_for_equal_values_or_other_types() -> None:
    acc = Skewness(pa.float64())
    assert acc.finalize(acc.update(acc.zero(), pa.array([2.0, 2.0, 2.0, None]))) == {"skewness": None}
    assert _duckdb_skewness(pa.array([2.0, 2.0, 2.0])) is None
    assert "skewness" not in ColumnProfile("s", pa.string())._common(ColumnProfile("s", pa.string()).zero())


def test_state_in_the_files() -> None:
    assert layout.STATISTICS_SCHEMA.field("skewness").type == pa.float64()
    assert "skewness" in layout.BUILTIN_STATISTICS
    names = partial_state.STATE_SCHEMA.names
    assert [n for n in names if n.startswith("skewness_")] == ["skewness_n", "skewness_mean", "skewness_m2", "skewness_m3"]
    acc = Skewness(pa.int64())
    state = ThirdMoments(5, 1.5, 2.25, -0.5)
    assert acc.decode(acc.encode(state)) == state


@pytest.mark.parametrize("t", [pa.int64(), pa.float64()], ids=str)
def test_subset_of_partitions_merges_their_stored_rows(t: pa.DataType) -> None:
    from engine.subset.merge import merge_measures

    parts = _parts(t, 11)
    profile = ColumnProfile("x", t)
    rows = [profile.profile_column(p)[1] for p in parts]
    picked = [0, 2, 3]
    got = merge_measures(t, [rows[i] for i in picked])["skewness"]
    assert got == pytest.approx(_duckdb_skewness(pa.concat_arrays([parts[i] for i in picked])), rel=1e-9)
    # a row written before skewness was registered cannot be rebuilt: no answer
    old = {k: v for k, v in rows[0].items() if k != "skewness"}
    assert "skewness" not in merge_measures(t, [old, rows[2]])


_SORTED_TYPES = [pa.int8(), pa.int32(), pa.int64(), pa.uint64(), pa.float32(), pa.float64(), pa.decimal128(18, 3)]


@settings(max_examples=80, deadline=None)
@given(data=st.data(), t=st.sampled_from(_SORTED_TYPES))
def test_the_sorted_view_gives_the_bits_of_update(data, t: pa.DataType) -> None:
    """A column's state from the shared sorted view (profile_column_view) is update()'s, bit for bit."""
    if pa.types.is_floating(t):
        width = 32 if t == pa.float32() else 64
        item = st.one_of(st.none(), st.floats(width=width), st.sampled_from([0.0, -0.0, 1e300, -1e300]))
    elif pa.types.is_decimal(t):
        item = st.one_of(st.none(), st.decimals(min_value=-(10**14), max_value=10**14, places=3, allow_nan=False))
    else:
        info = np.iinfo(t.to_pandas_dtype())
        item = st.one_of(st.none(), st.integers(int(info.min), int(info.max)))
    column = pa.array(data.draw(st.lists(item, max_size=60)), t)
    m = Skewness(t)
    sv = sortedvalues.of(column)
    floats = sortedvalues.to_arrow(sv.values, t).cast(pa.float64(), safe=False).to_numpy(zero_copy_only=False) if pa.types.is_decimal(t) else None
    got, want = m.from_sorted(sv.values, sv.distinct, floats), m.update(m.zero(), column)
    assert got.n == want.n
    assert np.array([got.mean, got.m2, got.m3]).tobytes() == np.array([want.mean, want.m2, want.m3]).tobytes()


def test_a_spread_so_small_its_second_moment_underflows_has_no_skewness() -> None:
    # m2 > 0 but m2 / n rounds to 0.0 (subnormal): the formula would divide by zero
    state = ThirdMoments(3, 0.0, 5e-324, 0.0)
    assert Skewness(pa.float64()).finalize(state) == {"skewness": None}
