"""Exact ranks and quantiles by the distributed sort on the session's Ray, checked
against DuckDB's quantile_disc and numpy / Python sorts on a generated table:
skewed, all-distinct, almost-distinct, all-equal and mostly-one-value columns,
nulls, NaN and infinities, strings, binaries, timestamps, dates, decimals, booleans,
uneven partitions, an empty file and a partition whose column is all null."""

from __future__ import annotations

import datetime as dt
import math
from decimal import Decimal
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine.api import exact_quantiles, sort_column
from engine.exceptions import InvalidArgumentError
from engine.runtime import distributed_sort
from engine.sources import open_table

pytestmark = pytest.mark.ray

PS = [0, 0.001, 0.01, 0.1, 0.25, 0.3, 0.5, 0.7, 0.9, 0.99, 0.999, 1]
SIZES = [9_000, 0, 12_000, 3_000, 6_000]  # rows per partition; one empty file


def _columns(rng: np.random.Generator, n: int, part: int) -> dict[str, pa.Array]:
    base = sum(SIZES[:part])
    floats = rng.lognormal(3, 1, n)
    floats[rng.random(n) < 0.02] = np.nan
    floats[rng.random(n) < 0.001] = np.inf
    floats[rng.random(n) < 0.001] = -0.0
    words = np.array(["", "a", "ab", "b", "é", "日本", "Z", "a\x00", "zz"], dtype=object)
    return {
        "skewed": pa.array(rng.zipf(1.3, n), pa.int64()),
        "all_distinct": pa.array(np.arange(base, base + n)[::-1] * 7919 % 100_003, pa.int64()),
        "almost_distinct": pa.array(np.where(rng.random(n) < 0.01, 0, np.arange(base, base + n)), pa.int64()),
        "all_equal": pa.array(np.full(n, 42, np.int32), pa.int32()),
        "mostly_one": pa.array(np.where(rng.random(n) < 0.9, 5, rng.integers(-100, 100, n)), pa.int16()),
        "price": pa.array(floats, pa.float64(), mask=rng.random(n) < 0.05),
        "score": pa.array(rng.normal(0, 1, n).astype(np.float32), pa.float32()),
        "nulls_in_one_part": pa.array(rng.integers(0, 1000, n), pa.int64(), mask=np.full(n, part == 2)),
        "word": pa.array(words[rng.integers(0, len(words), n)].tolist(), pa.string(), mask=rng.random(n) < 0.03),
        "comment": pa.array([f"{k:x}-{k % 97}" for k in rng.integers(0, 10**9, n)], pa.string()),
        # each value about twice, distinct values sharing their first 8 bytes: the string sort's repeat path
        "twice": pa.array([f"{k:09d}" for k in rng.integers(0, 15_000, n)], pa.string()),
        "blob": pa.array([bytes([k % 5, k % 3]) for k in rng.integers(0, 1000, n)], pa.binary()),
        "at": pa.array(rng.integers(1_600_000_000_000_000, 1_700_000_000_000_000, n), pa.timestamp("us", tz="UTC")),
        "day": pa.array(rng.integers(18_000, 19_000, n).astype(np.int32), pa.date32()),
        "amount": pa.array([Decimal(int(c)) / 100 for c in rng.integers(-(10**6), 10**6, n)], pa.decimal128(18, 2)),
        "wide": pa.array([Decimal(int(c)) * 10**15 / 10**6 for c in rng.integers(-(10**6), 10**6, n)], pa.decimal128(38, 6)),
        "flag": pa.array(rng.random(n) < 0.3, pa.bool_()),
        "big": pa.array(rng.integers(0, 2**63, n, dtype=np.uint64) * np.uint64(2) + np.uint64(1), pa.uint64()),
    }


COLUMNS = list(_columns(np.random.default_rng(0), 1, 0))
#: columns DuckDB reads with the same type semantics (all of them)
NUMPY_SORTED = {"skewed", "all_distinct", "almost_distinct", "all_equal", "mostly_one", "price", "score", "nulls_in_one_part", "big"}


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("ranks") / "t"
    rng = np.random.default_rng(7)
    for part, n in enumerate(SIZES):
        d = root / f"part={part}"
        d.mkdir(parents=True)
        t = pa.table(_columns(rng, n, part))
        if part == 2:  # two files in one partition
            pq.write_table(t.slice(0, n // 3), d / "a.parquet")
            pq.write_table(t.slice(n // 3), d / "b.parquet")
        else:
            pq.write_table(t, d / "data.parquet")
    return root


@pytest.fixture(scope="module")
def whole(table: Path) -> pa.Table:
    return pa.concat_tables(pq.read_table(f) for f in sorted(table.rglob("*.parquet")))


def duckdb_quantiles(table: Path, column: str, ps: list[float]) -> list:
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    literal = "[" + ", ".join(repr(p) for p in ps) + "]"
    (row,) = con.execute(
        f"SELECT quantile_disc(\"{column}\", {literal}) FROM read_parquet('{table}/**/*.parquet', hive_partitioning = true)"
    ).fetchall()
    return row[0] or [None] * len(ps)


def same(a, b) -> bool:
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, dt.datetime) and isinstance(b, dt.datetime):
        return a == b and (a.tzinfo is None) == (b.tzinfo is None)
    return a == b and type(a) is type(b)


def python_sorted(values: list) -> list:
    return sorted(
        (v for v in values if v is not None),
        key=lambda v: (1, 0) if isinstance(v, float) and math.isnan(v) else (0, v.encode() if isinstance(v, str) else v),
    )


@pytest.mark.parametrize("column", COLUMNS)
def test_exact_quantiles_match_duckdb(ray_runtime: None, table: Path, whole: pa.Table, column: str) -> None:
    q = exact_quantiles(str(table), column, PS)
    expected = duckdb_quantiles(table, column, PS)
    assert all(same(a, b) for a, b in zip(q.values, expected)), (q.values, expected)
    col = whole[column]
    assert q.null_count == col.null_count
    assert q.count == len(col) - col.null_count
    assert q.exact and q.rank_errors == (0.0,) * len(PS) and q.table == "t"
    if pa.types.is_floating(col.type):
        assert q.nan_count == int(np.isnan(col.drop_null().to_numpy()).sum())


#: the fixed-width columns (numpy keys), which may be counted into runs
FIXED_WIDTH = sorted(NUMPY_SORTED | {"at", "day", "amount", "flag"})


@pytest.mark.parametrize("representation", ["runs", "values"])
@pytest.mark.parametrize("column", FIXED_WIDTH)
def test_counted_and_sorted_partitions_match_duckdb(ray_runtime: None, table: Path, column: str, representation: str) -> None:
    """Every partition counted into (value, count) runs, or every one sorted: DuckDB's answers either way."""
    q = exact_quantiles(str(table), column, PS, representation=representation)
    expected = duckdb_quantiles(table, column, PS)
    assert all(same(a, b) for a, b in zip(q.values, expected)), (q.values, expected)
    assert q.timings["runs_tasks"] == (0 if representation == "values" else q.timings["prepare_tasks"])


@pytest.mark.parametrize("merge", ["driver", "tasks"])
@pytest.mark.parametrize("representation", ["auto", "runs", "values"])
@pytest.mark.parametrize("column", FIXED_WIDTH)
def test_driver_and_task_merges_match_duckdb(ray_runtime: None, table: Path, whole: pa.Table, column: str, representation: str, merge: str) -> None:
    """The one-round path (the driver merges every partition's keys) and the distributed
    merge give DuckDB's answers, counts, nulls and NaN, whatever the partitions hold."""
    q = exact_quantiles(str(table), column, PS, representation=representation, merge=merge)
    expected = duckdb_quantiles(table, column, PS)
    assert all(same(a, b) for a, b in zip(q.values, expected)), (q.values, expected)
    assert q.timings["merge"] == merge
    col = whole[column]
    assert q.count == len(col) - col.null_count and q.null_count == col.null_count
    if pa.types.is_floating(col.type):
        assert q.nan_count == int(np.isnan(col.drop_null().to_numpy()).sum())


@pytest.mark.parametrize(
    "column, shuffle",
    [(c, s) for c in ("price", "amount", "at") for s in ("shared", "pieces")] + [(c, "pieces") for c in ("comment", "twice", "wide", "blob")],
)
def test_one_shot_quantiles_without_keeping_the_ranges(ray_runtime: None, table: Path, column: str, shuffle: str) -> None:
    """The range tasks of a one-shot query return only the picks (strings: never gathered
    into sorted order); both shuffles (Arrow keys: pieces only), against DuckDB."""
    q = distributed_sort.quantiles(open_table(str(table)), column, PS, ranges=3, merge="tasks", shuffle=shuffle, representation="values")
    expected = duckdb_quantiles(table, column, PS)
    assert all(same(a, b) for a, b in zip(q.values, expected)), (q.values, expected)
    assert q.timings["shuffle"] == shuffle and q.timings["ranges"] == 3


def test_auto_merges_on_the_driver_only_when_counted_and_small(ray_runtime: None, table: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    counted = exact_quantiles(str(table), "mostly_one", PS)
    assert counted.timings["merge"] == "driver" and counted.timings["runs_tasks"] > 0
    assert counted.timings["merged_entries"] < 1_000
    # no partition counted: the distributed sort
    assert exact_quantiles(str(table), "mostly_one", PS, representation="values").timings["merge"] == "tasks"
    assert exact_quantiles(str(table), "all_distinct", PS).timings["merge"] == "tasks"
    assert exact_quantiles(str(table), "word", PS).timings["merge"] == "tasks"  # strings: always
    # more runs than the driver takes: the distributed sort, same answers
    monkeypatch.setattr(distributed_sort, "DRIVER_MERGE_MAX_ENTRIES", counted.timings["merged_entries"] - 1)
    big = exact_quantiles(str(table), "mostly_one", PS)
    assert big.timings["merge"] == "tasks" and big.values == counted.values


def test_driver_merge_of_nothing_and_of_one_value(ray_runtime: None, tmp_path: Path) -> None:
    """All-null and all-equal columns (one partition empty) on the one-round path."""
    root = tmp_path / "edge"
    for part, n in enumerate([0, 50_000, 20_000]):
        d = root / f"part={part}"
        d.mkdir(parents=True)
        pq.write_table(pa.table({"none": pa.nulls(n, pa.float64()), "same": pa.array(np.full(n, -0.0), pa.float64())}), d / "a.parquet")
    for merge in ("driver", "tasks"):
        q = exact_quantiles(str(root), "none", [0, 0.5, 1], merge=merge)
        assert q.values == (None, None, None) and q.count == 0 and q.null_count == 70_000
        q = exact_quantiles(str(root), "same", [0, 0.5, 1], merge=merge)
        assert q.values == (0.0, 0.0, 0.0) and q.count == 70_000 and q.timings["merge"] == merge
    assert exact_quantiles(str(root), "same", [0.5]).timings["merge"] == "driver"


def test_bad_merge_requests(ray_runtime: None, table: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="merge must be one of"):
        exact_quantiles(str(table), "price", [0.5], merge="somewhere")
    with pytest.raises(InvalidArgumentError, match="fixed-width"):
        exact_quantiles(str(table), "word", [0.5], merge="driver")


def test_auto_counts_the_partitions_with_few_distinct_values(ray_runtime: None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Per partition: low-cardinality partitions are counted, high-cardinality ones sorted, in one column."""
    monkeypatch.setattr(distributed_sort, "PREPARE_TASKS_PER_CPU", 64)  # one task per partition
    root = tmp_path / "mixed"
    rng = np.random.default_rng(11)
    for part in range(4):
        d = root / f"part={part}"
        d.mkdir(parents=True)
        n = 60_000
        x = rng.integers(0, 50, n) if part % 2 == 0 else rng.permutation(n) * 3 + part
        mask = rng.random(n) < 0.01
        pq.write_table(pa.table({"x": pa.array(x.astype(np.float64), pa.float64(), mask=mask)}), d / "data.parquet")
    ps = [0.001, 0.1, 0.3, 0.5, 0.77, 0.999, 1]
    q = exact_quantiles(str(root), "x", ps, ranges=3)
    assert q.timings["runs_tasks"] == 2, q.timings
    assert list(q.values) == duckdb_quantiles(root, "x", ps)
    with sort_column(str(root), "x", ranges=3) as sc:
        x = np.sort(pa.concat_arrays([pq.read_table(f)["x"].combine_chunks() for f in sorted(root.rglob("*.parquet"))]).drop_null().to_numpy())
        for v in (0.0, 7.0, 49.0, 50.0, 3.0 * 1000 + 1, 1e9):
            assert sc.rank_of(v) == int(np.searchsorted(x, v, "left"))
            assert sc.rank_of(v, inclusive=True) == int(np.searchsorted(x, v, "right"))
        rs = [0, 1, 1000, len(x) // 2, len(x) - 1]
        assert sc.values_at_ranks(rs) == x[rs].tolist()


@pytest.mark.parametrize("representation", ["auto", "runs"])
@pytest.mark.parametrize("shuffle", ["shared", "pieces"])
@pytest.mark.parametrize("ranges", [1, 3, None])
@pytest.mark.parametrize("column", ["mostly_one", "price", "amount", "at"])
def test_sorted_column_against_numpy(
    ray_runtime: None, table: Path, whole: pa.Table, column: str, ranges: int | None, shuffle: str, representation: str
) -> None:
    source = open_table(str(table))
    sc, values = distributed_sort.sort_column(source, column, ranges=ranges, probabilities=[0.5], shuffle=shuffle, representation=representation)
    with sc:
        expected = python_sorted(whole[column].to_pylist())
        n = len(expected)
        assert sc.count == n and sc.offsets[-1] == n and sum(sc.range_counts) == n
        assert same(values[0], expected[math.ceil(n * 0.5) - 1])
        rs = [0, 1, n // 7, n // 2, n - 2, n - 1]
        assert all(same(a, expected[r]) for a, r in zip(sc.values_at_ranks(rs), rs))
        probe = [expected[0], expected[n // 3], expected[-1]]
        for v in probe:
            if isinstance(v, float) and math.isnan(v):
                below, at_most = n - sc.nan_count, n
            else:
                below = sum(1 for x in expected if not (isinstance(x, float) and math.isnan(x)) and x < v)
                at_most = below + sum(1 for x in expected if same(x, v))
            assert sc.rank_of(v) == below and sc.rank_of(v, inclusive=True) == at_most
            assert sc.count_of(v) == at_most - below
            assert sc.rank_of(v) <= expected.index(v) < sc.rank_of(v) + sc.count_of(v)


def test_ties_of_a_dominant_value_are_spread(ray_runtime: None, table: Path) -> None:
    # 90% of mostly_one is the value 5: no range may hold much more than its share
    sc = sort_column(str(table), "mostly_one", ranges=4)
    with sc:
        assert len(sc.range_counts) == 4
        assert max(sc.range_counts) < 0.3 * sc.count
        assert sc.count_of(5) > 0.85 * sc.count


def test_values_beyond_the_column(ray_runtime: None, table: Path, whole: pa.Table) -> None:
    sc = sort_column(str(table), "skewed")
    with sc:
        assert sc.rank_of(-1) == 0 and sc.rank_of(0, inclusive=True) == 0
        assert sc.rank_of(2**62) == sc.count
        with pytest.raises(InvalidArgumentError, match="outside"):
            sc.value_at_rank(sc.count)
        with pytest.raises(InvalidArgumentError, match="not a value of type int64"):
            sc.rank_of("seven")
    with pytest.raises(InvalidArgumentError, match="closed"):
        sc.value_at_rank(0)


def test_a_column_of_nulls_has_no_quantiles(ray_runtime: None, tmp_path: Path) -> None:
    d = tmp_path / "nulls"
    d.mkdir()
    pq.write_table(pa.table({"x": pa.array([None] * 10, pa.float64())}), d / "a.parquet")
    q = exact_quantiles(str(d), "x", [0.5, 1])
    assert q.values == (None, None) and q.count == 0 and q.null_count == 10 and q.ranks == (None, None)


def test_bad_requests(ray_runtime: None, table: Path, tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="no column 'nope'"):
        exact_quantiles(str(table), "nope", [0.5])
    with pytest.raises(InvalidArgumentError, match="outside"):
        exact_quantiles(str(table), "price", [1.5])
    d = tmp_path / "lists"
    d.mkdir()
    pq.write_table(pa.table({"l": pa.array([[1], [2]])}), d / "a.parquet")
    with pytest.raises(InvalidArgumentError, match="'l'.*no order"):
        exact_quantiles(str(d), "l", [0.5])


def test_partitions_are_grouped_into_tasks(table: Path) -> None:
    source = open_table(str(table))
    units = distributed_sort._units(source, 2)
    assert [p.key for u in units for p in u] == [p.key for p in source.partitions() if p.files]
    assert len(units) <= 3
    assert len(distributed_sort._units(source, 100)) == len([p for p in source.partitions() if p.files])


@pytest.mark.parametrize("tasks", [1, 2, 3, 4, 5, 8, 16])
def test_groups_are_balanced(tmp_path: Path, tasks: int) -> None:
    """Consecutive partitions grouped so that no group exceeds its share by more than one
    partition: the slowest prepare task sets the round's time. The bench's layout:
    alternately one file of 2k rows and two files of 1k."""
    root = tmp_path / "layout"
    for part in range(16):
        d = root / f"part={part:02d}"
        d.mkdir(parents=True)
        for f in range(1 if part % 2 == 0 else 2):
            pq.write_table(pa.table({"x": np.arange(2_000 // (1 if part % 2 == 0 else 2))}), d / f"{f}.parquet")
    source = open_table(str(root))
    units = distributed_sort._units(source, tasks)
    assert [p.key for u in units for p in u] == [p.key for p in source.partitions()]
    rows = [sum(p.row_count for p in u) for u in units]
    assert len(units) == min(tasks, 16) and max(rows) <= 32_000 / tasks + 2_000, rows
    if 16 % tasks == 0:
        assert set(rows) == {32_000 // tasks}
