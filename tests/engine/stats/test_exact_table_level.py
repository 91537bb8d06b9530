"""Table-level distinct counts and percentiles of floats and times are exact, against DuckDB.

Generated multi-partition tables with float64/float32 columns holding NaN, +inf, -inf,
-0.0 and 0.0 and nulls, and timestamp (with and without a time zone, ns and us), time and
duration columns. The rules (docs/FORMAT.md, the partitions' rules): nulls and NaN are no
values (NaN is counted in ``nan_count``), -0.0 == 0.0, infinities are values; a percentile
``pXX`` is the value at 0-based position floor(p * (n - 1)) of the sorted values.

The oracle is DuckDB over the same rows, as Arrow tables (times by their int64 instants, so
no precision is lost on the way): ``count(DISTINCT x)`` over the non-NaN values (DuckDB
counts NaN as a value; it takes -0.0 == 0.0 too), and ``quantile_disc(x, (k + 0.5) / n)``
for position k (``quantile_disc(x, q)`` is the value at position ceil(q * n) - 1, which is k
for that q, whatever the rounding of q).
"""

from __future__ import annotations

import math
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine import values as value_forms
from engine.api import analyze, open_statistics
from engine.stats.valuecounts import PERCENTILES, percentile_column

pytestmark = pytest.mark.ray

SPECIALS = [np.nan, np.inf, -np.inf, -0.0, 0.0]

#: the columns and their types; times compare by their int64 storage
TYPES = {
    "f64": pa.float64(),
    "f64_wide": pa.float64(),
    "f32": pa.float32(),
    "ts_ns_tz": pa.timestamp("ns", "Europe/Berlin"),
    "ts_us": pa.timestamp("us"),
    "t64": pa.time64("us"),
    "dur": pa.duration("ms"),
}


def _partition(rng: np.random.Generator, n: int, i: int) -> pa.Table:
    """One partition: floats on a grid shared across partitions (repeats) with the special
    values, a mostly distinct float column, and times with repeats; about 10% nulls."""
    nulls = rng.random(n) < 0.1
    grid = np.round(rng.normal(50, 30, n), 1)
    grid[rng.random(n) < 0.05] = rng.choice(SPECIALS, size=int((rng.random(n) < 0.05).sum()) or 1)[0]
    special_rows = rng.choice(n, size=min(n, 40), replace=False)
    grid[special_rows] = np.resize(np.array(SPECIALS), len(special_rows))
    wide = rng.normal(0, 1e6, n)
    if i == 1:  # one partition of NaN and nulls only in the wide column
        wide[:] = np.nan
    ns = rng.integers(0, 5_000, n).astype(np.int64) * 1_000_003 + 1_600_000_000_000_000_000
    us = rng.integers(-(10**12), 10**12, n)
    cols = {
        "f64": pa.array(grid, pa.float64(), mask=nulls),
        "f64_wide": pa.array(wide, pa.float64(), mask=nulls if i != 2 else np.ones(n, bool)),  # a partition of nulls only
        "f32": pa.array(grid.astype(np.float32), pa.float32(), mask=nulls),
        "ts_ns_tz": pa.array(ns, pa.int64(), mask=nulls).view(TYPES["ts_ns_tz"]),
        "ts_us": pa.array(us, pa.int64(), mask=nulls).view(TYPES["ts_us"]),
        "t64": pa.array(rng.integers(0, 86_400 * 10**6, n) // 1000 * 1000, pa.int64(), mask=nulls).view(TYPES["t64"]),
        "dur": pa.array(rng.integers(-(10**6), 10**6, n), pa.int64(), mask=nulls).view(TYPES["dur"]),
    }
    return pa.table(cols)


def _write_table(root: Path, seed: int, parts: int, with_strings: bool) -> list[pa.Table]:
    rng = np.random.default_rng(seed)
    tables = []
    for i in range(parts):
        t = _partition(rng, int(rng.integers(1_500, 3_000)), i)
        if with_strings:  # a discrete column: the reductions then run beside a second wave
            t = t.append_column("city", pa.array([f"c{v}" for v in rng.integers(0, 50, t.num_rows)]))
        d = root / f"part={i:02d}"
        d.mkdir(parents=True)
        pq.write_table(t, d / "data.parquet")
        tables.append(t)
    return tables


def _oracle(con: duckdb.DuckDBPyConnection, rows: pa.Table, name: str) -> tuple[int, list[float | int | None]]:
    """DuckDB's exact distinct count (NaN excluded) and percentiles (floor(p * (n - 1)))."""
    t = rows.column(name).type
    col = rows.column(name)
    if not pa.types.is_floating(t):
        col = col.combine_chunks().view(pa.int64())  # the instants or durations, exactly
    con.register("rel", pa.table({"x": col}))
    valid = "x IS NOT NULL" + (" AND NOT isnan(x)" if pa.types.is_floating(t) else "")
    [(distinct, n)] = con.execute(f"SELECT count(DISTINCT x), count(*) FROM rel WHERE {valid}").fetchall()
    if n == 0:
        return distinct, [None] * len(PERCENTILES)
    picks = ", ".join(f"quantile_disc(x, {(math.floor(p * (n - 1)) + 0.5) / n!r})" for p in PERCENTILES)
    [got] = con.execute(f"SELECT {picks} FROM rel WHERE {valid}").fetchall()
    return distinct, list(got)


def _ours(row: dict, t: pa.DataType) -> list[float | int | None]:
    out = []
    for p in PERCENTILES:
        text = row[percentile_column(p)]
        if text is None:
            out.append(None)
            continue
        s = value_forms.decode_scalar(text, t)
        out.append(s.as_py() if pa.types.is_floating(t) else s.value)
    return out


def _check(store: str, table: str, rows: pa.Table) -> None:
    ts = open_statistics(store, table)
    got = {r["column"]: r for r in ts.statistics().to_pylist()}
    con = duckdb.connect()
    try:
        for name, t in TYPES.items():
            row = got[name]
            distinct, percentiles = _oracle(con, rows, name)
            assert row["distinct_count"] == distinct, name
            assert row["distinct_count_exact"] is True, name
            assert row["percentiles_exact"] is True, name
            assert _ours(row, t) == percentiles, name
    finally:
        con.close()


@pytest.mark.parametrize("with_strings", [False, True], ids=["numbers-only", "with-strings"])
def test_table_level_exact_against_duckdb(ray_runtime: None, tmp_path: Path, with_strings: bool) -> None:
    root = tmp_path / "t"
    tables = _write_table(root, seed=7 if with_strings else 8, parts=4, with_strings=with_strings)
    store = str(tmp_path / "store")
    result = analyze(str(root), store=store, name="t")
    rows = pa.concat_tables(tables)
    _check(store, result.table, rows)
    # a changed partition: the others are inherited (their value counts loaded from their
    # partial state), the table level is reduced again and still exact
    rng = np.random.default_rng(99)
    changed = _partition(rng, 2_222, 0)
    if with_strings:
        changed = changed.append_column("city", pa.array([f"d{v}" for v in rng.integers(0, 9, changed.num_rows)]))
    pq.write_table(changed, root / "part=00" / "data.parquet")
    again = analyze(str(root), store=store, name="t")
    assert again.inherited == 3
    rows = pa.concat_tables([changed, *tables[1:]])
    _check(store, again.table, rows)
    # a new partition: an append (the table's counts at the base plus the new partition's;
    # the Hive key ``part`` is a discrete column), exact too
    added = _partition(rng, 1_111, 4)
    if with_strings:
        added = added.append_column("city", pa.array([f"e{v}" for v in rng.integers(0, 9, added.num_rows)]))
    (root / "part=04").mkdir()
    pq.write_table(added, root / "part=04" / "data.parquet")
    third = analyze(str(root), store=store, name="t")
    assert (third.inherited, third.frequency_segments) == (4, 2)
    _check(store, third.table, pa.concat_tables([rows, added]))
