"""Moments (engine/measures/moments.py): sum, mean and stddev against DuckDB over the same rows,
and their place in the files kept from before the registry (docs/FORMAT.md)."""

from __future__ import annotations

import decimal

import duckdb
import numpy as np
import pyarrow as pa
import pytest

from engine import measures
from engine.files import layout, partial_state
from engine.measures.moments import Moments, MomentsMeasure, decode_sum
from engine.stats import columnwise
from engine.stats.profile import ColumnProfile
from engine.subset.merge import merge_measures

TYPES = [pa.int64(), pa.uint8(), pa.float64(), pa.decimal128(12, 3), pa.decimal128(30, 3)]


def _parts(t: pa.DataType, seed: int) -> list[pa.Array]:
    """Partitions with nulls (one all null, one of one row), floats with a NaN."""
    rng = np.random.default_rng(seed)
    parts = []
    for n in (1500, 1, 900, 40):
        x = rng.normal(100.0, 30.0, n)
        nulls = rng.random(n) < 0.1
        if pa.types.is_integer(t):
            values = [None if z else int(abs(v)) % 250 for v, z in zip(x, nulls)]
        elif pa.types.is_decimal(t):
            values = [None if z else decimal.Decimal(f"{v:.3f}") for v, z in zip(x, nulls)]
        else:
            values = [None if z else float(v) for v, z in zip(x, nulls)]
            if n > 10:
                values[3] = float("nan")
        parts.append(pa.array(values, t))
    parts.append(pa.array([None] * 5, t))
    return parts


def _duckdb(values: pa.Array) -> tuple:
    """(sum, mean, stddev) of the non-null non-NaN values, by DuckDB."""
    con = duckdb.connect()
    try:
        con.register("t", pa.table({"x": values}))
        return con.execute("SELECT sum(x), avg(x::DOUBLE), stddev_samp(x::DOUBLE) FROM t WHERE NOT isnan(x::DOUBLE)").fetchone()
    finally:
        con.close()


def _check(row: dict, values: pa.Array, t: pa.DataType) -> None:
    want_sum, want_mean, want_sd = _duckdb(values)
    got_sum = decode_sum(row["sum"], t) if isinstance(row["sum"], str) else row["sum"]
    if want_sum is None:
        assert row["sum"] is None and row["mean"] is None and row["stddev"] is None
        return
    if pa.types.is_floating(t):
        assert got_sum == pytest.approx(want_sum, rel=1e-12)
    else:
        assert got_sum == want_sum  # integers and decimals: exact
    assert row["mean"] == pytest.approx(want_mean, rel=1e-12)
    assert row["stddev"] == pytest.approx(0.0 if want_sd is None else want_sd, rel=1e-9)


@pytest.mark.parametrize("t", TYPES, ids=str)
def test_table_and_partition_moments_are_duckdbs(t: pa.DataType) -> None:
    parts = _parts(t, 11)
    profile = ColumnProfile("x", t)
    # one part through update (batches), the others through the whole-column path (sorted view)
    states = [profile.update(profile.zero(), parts[0])]
    for p in parts[1:]:
        state, row, _ = profile.profile_column(p)
        states.append(state)
        _check(row, p, t)
    merged = profile.merge_all(states)
    _check(profile.finalize_table(merged, None), pa.concat_arrays(parts), t)
    # the driver's field-by-field merge gives the same bits
    cols = columnwise.StateColumns.of(profile, states)
    assert columnwise.merge(profile, cols, [s.theta for s in states]).measures == merged.measures


@pytest.mark.parametrize("t", TYPES, ids=str)
def test_subset_of_partitions_merges_their_stored_rows(t: pa.DataType) -> None:
    parts = _parts(t, 5)
    profile = ColumnProfile("x", t)
    rows = [profile.profile_column(p)[1] for p in parts]
    # as stored: the sum in its text form (engine/files/writer.py)
    stored = [{**r, "sum": None if r["sum"] is None else str(r["sum"]) if not isinstance(r["sum"], float) else repr(r["sum"])} for r in rows]
    picked = [0, 2, 4]
    got = merge_measures(t, [stored[i] for i in picked])
    _check(got, pa.concat_arrays([parts[i] for i in picked]), t)


def test_places_in_the_files_are_those_from_before_the_registry() -> None:
    """statistics.parquet keeps sum, mean, stddev after max; partial_state.arrow keeps the
    moments' fields after max, and its config does not name them, so partial states written
    before the moments moved to engine/measures are read (not recomputed)."""
    names = layout.STATISTICS_SCHEMA.names
    assert names[names.index("max") + 1 : names.index("max") + 4] == ["sum", "mean", "stddev"]
    state = partial_state.STATE_SCHEMA.names
    assert state[state.index("max") + 1 : state.index("max") + 5] == ["moments_n", "moments_mean", "moments_m2", "moments_sum"]
    assert "moments" in measures.names() and "moments" not in measures.configured()
    assert "moments" not in partial_state.config(0.5, []).get("statistics", [])
    acc = MomentsMeasure(pa.decimal128(30, 3))
    state_value = Moments(3, 1.5, 2.25, decimal.Decimal("4.500"))
    assert acc.decode(acc.encode(state_value)) == state_value


def test_placing_after_a_missing_column_fails() -> None:
    with pytest.raises(ValueError, match="no column"):
        measures._placed([pa.field("a", pa.int64())], [("b", [pa.field("c", pa.int64())])])
