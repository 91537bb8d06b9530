"""Statistics of a filtered subset (#16) against DuckDB on the filtered rows: random predicates
over a generated table (several partitions, nulls, NaN, -0.0, decimals, timestamps, a
low- and a high-cardinality string). Every ``stored`` answer equals DuckDB's value; every
``estimated`` answer lies within its stated bounds and the bounds hold DuckDB's value.

Rows are selected by DuckDB (predicate_oracle.sql of the NOT-free predicate: NaN equals NaN
and sorts above every other value, as docs/SUBSETS.md says), independently of the evaluators
under test; DuckDB then computes the statistics of those rows.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from predicate_oracle import sql
from predicate_strategies import leaves, trees

from engine import expressions as ex
from engine import values as value_forms
from engine.exceptions import ExpressionError, InvalidArgumentError, SubsetStatisticError
from engine.expressions.binding import comparable
from engine.subset import Method, methods_of

pytestmark = pytest.mark.ray

SCHEMA = pa.schema(
    [
        ("id", pa.int64()),
        ("k", pa.int32()),
        ("x", pa.float64()),
        ("city", pa.string()),
        ("name", pa.string()),
        ("amt", pa.decimal128(10, 2)),
        ("at", pa.timestamp("us", "UTC")),
    ]
)
CITIES = ["Berlin", "Paris", "Rome", "Oslo", "Lima", "Baku"]
PARTS = 5


def _partition(rng: random.Random, p: int, start: int, n: int) -> pa.Table:
    def maybe(v, q=0.1):
        return None if rng.random() < q else v

    return pa.table(
        {
            "id": list(range(start, start + n)),  # sorted: partitions hold disjoint ranges
            "k": [maybe(rng.randrange(0, 12) + 3 * p) for _ in range(n)],
            "x": [maybe(rng.choice([math.nan, -0.0, 0.0, round(rng.uniform(-50, 50), 1), round(rng.uniform(-50, 50), 1)])) for _ in range(n)],
            "city": [maybe(rng.choice(CITIES[: 3 + p % 3])) for _ in range(n)],
            "name": [maybe(f"n{rng.randrange(4 * n)}") for _ in range(n)],
            "amt": [maybe(Decimal(rng.randrange(-(10**5), 10**5)) / 100) for _ in range(n)],
            "at": pa.array([maybe(1_700_000_000_000_000 + p * 10**12 + rng.randrange(10**11)) for _ in range(n)], pa.int64()).view(
                pa.timestamp("us", "UTC")
            ),
        },
        schema=SCHEMA,
    )


@pytest.fixture(scope="module")
def subset_table(ray_runtime: None, tmp_path_factory) -> dict:
    from engine.api import analyze
    from engine.lookup import open_statistics

    root = tmp_path_factory.mktemp("subset")
    table = root / "t"
    rng = random.Random(16)
    start, parts = 0, []
    for p in range(PARTS):
        d = table / f"p={p}"
        d.mkdir(parents=True)
        n = 1500 if p == PARTS - 1 else rng.randrange(60, 160)  # the last: mostly distinct names (duplicates_only)
        t = _partition(rng, p, start, n)
        pq.write_table(t.slice(0, n // 3), d / "f0.parquet")  # id ranges: the file index proves whole files in or out
        pq.write_table(t.slice(n // 3), d / "f1.parquet")
        parts.append(t.append_column("p", pa.array([p] * n, pa.int64())))
        start += n + 100
    analyze(str(table), store=str(root / "store"), user_statistics=[])
    analyze(str(table), store=str(root / "store_vp"), user_statistics=[], value_partitions=True)
    ts = open_statistics(str(root / "store"), "t")
    data = pa.concat_tables(parts)
    return {
        "ts": ts,
        "ts_vp": open_statistics(str(root / "store_vp"), "t"),
        "data": data.cast(pa.schema([ts.schema.field(n) for n in data.schema.names])),
    }


def _values(name: str):
    return {
        "id": st.integers(-5, 2500),
        "k": st.integers(-1, 30),
        "x": st.sampled_from([math.nan, -0.0, 0.0, 10.5, -50.0, 50.0]) | st.floats(-60, 60).map(lambda v: round(v, 1)),
        "city": st.sampled_from([*CITIES, "Zagreb", "A"]),
        "name": st.integers(0, 700).map(lambda v: f"n{v}") | st.sampled_from(["n", "n1", "o"]),
        "amt": st.decimals(min_value=-1100, max_value=1100, places=2, allow_nan=False),
        "at": st.integers(1_700_000_000_000_000, 1_700_000_000_000_000 + 5 * 10**12).map(
            lambda v: pa.array([v], pa.int64()).view(pa.timestamp("us", "UTC"))[0]
        ),
        "p": st.integers(-1, PARTS),
    }[name]


NAMES = [*SCHEMA.names, "p"]


COLUMNS = {name: (SCHEMA.field(name).type if name in SCHEMA.names else pa.int64(), _values(name)) for name in NAMES}
#: prefixes that the generated strings share ("n1" with "n12", "Be" with "Berlin") or none does
PREFIXES = st.sampled_from(["n1", "n", "B", "Be", "o"])
TREES = trees(leaves(COLUMNS, typed=False, prefixes=PREFIXES), max_leaves=3)


def _filtered(data: pa.Table, expr: ex.Expression) -> pa.Table:
    """The rows matching ``expr`` per DuckDB (NaN equals NaN and sorts above every value), NOT
    pushed into the predicates first (docs/SUBSETS.md: NOT x < 5 is x >= 5)."""
    con = duckdb.connect()
    try:
        con.register("data", data)
        return con.sql(f"SELECT * FROM data WHERE {sql(ex.rewrite_not(expr))}").to_arrow_table().cast(data.schema)
    finally:
        con.close()


def _truth(con: duckdb.DuckDBPyConnection, rows: pa.Table, column: str) -> dict:
    """DuckDB's statistics of one column of the filtered rows (NaN apart, as the stored statistics)."""
    t = rows.schema.field(column).type
    q = f'"{column}"'
    valid = f"{q} IS NOT NULL" + (f" AND NOT isnan({q})" if pa.types.is_floating(t) else "")
    cur = con.cursor()
    cur.register("sub", rows)
    n, nulls = cur.execute(f"SELECT count(*), count(*) - count({q}) FROM sub").fetchone()
    nans = cur.execute(f"SELECT count(*) FROM sub WHERE isnan({q})").fetchone()[0] if pa.types.is_floating(t) else None  # stored: null
    numeric = pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)
    agg = f"min({q}), max({q}), count(DISTINCT {q})" + (f", sum({q}), avg({q})" if numeric else ", NULL, NULL")
    lo, hi, distinct, total, mean = cur.execute(f"SELECT {agg} FROM sub WHERE {valid}").fetchone()
    cur.close()
    return {"row_count": n, "null_count": nulls, "nan_count": nans, "min": lo, "max": hi, "distinct_count": distinct, "sum": total, "mean": mean}


def _key(value, t: pa.DataType):
    if value is None:
        return None
    if isinstance(value, str) and not pa.types.is_string(t):
        return comparable(value_forms.decode_scalar(value, t))
    return comparable(pa.scalar(value, type=t))


def _number(value, t: pa.DataType):
    if value is None:
        return None
    if isinstance(value, str):
        return Decimal(value) if pa.types.is_decimal(t) else (int(value) if pa.types.is_integer(t) else float(value))
    return value


def _close(a, b) -> bool:
    if isinstance(a, float) or isinstance(b, float):
        return math.isclose(float(a), float(b), rel_tol=1e-9, abs_tol=1e-9)
    return a == b


def _within(low, value, high, t=None, slack: float = 0.0) -> bool:
    if low is not None and value < low and not (slack and math.isclose(float(value), float(low), rel_tol=slack, abs_tol=slack)):
        return False
    if high is not None and value > high and not (slack and math.isclose(float(value), float(high), rel_tol=slack, abs_tol=slack)):
        return False
    return True


STATS = ["row_count", "null_count", "nan_count", "distinct_count", "min", "max", "sum", "mean"]


def _against_duckdb(ts, t: pa.Table, rows: pa.Table) -> Iterator[tuple[str, pa.DataType, str, Any, Any]]:
    """(column, its type, statistic, the answer's value, DuckDB's on ``rows``) for every column
    of the statistics answer ``t`` and every statistic of STATS."""
    con = duckdb.connect()
    try:
        for row in t.to_pylist():
            column = row["column"]
            ct = ts.column_type(column)
            truth = _truth(con, rows, column)
            for stat in STATS:
                yield column, ct, stat, row[stat], truth[stat]
    finally:
        con.close()


def check_statistics(ts, data: pa.Table, expr: ex.Expression) -> dict[str, int]:
    """Every stored statistic equals DuckDB's, every estimate lies within bounds holding DuckDB's."""
    rows = _filtered(data, expr)
    t = ts.statistics(None, where=expr, statistics=None)
    methods = methods_of(t)
    assert methods is not None
    seen = {m: 0 for m in Method}
    for column, ct, stat, got, want in _against_duckdb(ts, t, rows):
        a = methods.of(column, stat)
        seen[a.method] += 1
        where = f"{stat} of {column} where {expr}: got {got} ({a}), DuckDB {want}"
        if a.method is Method.UNAVAILABLE:
            assert got is None, where
            continue
        if stat in ("min", "max"):
            if want is None:  # an empty subset: no bounds to check, stored says null
                if a.method is Method.STORED:
                    assert got is None, where
                continue
            w = _key(want, ct)
            if a.method is Method.STORED:
                assert _key(got, ct) == w, where
            else:
                assert _within(_key(a.low, ct), w, _key(a.high, ct)), where
            continue
        if stat in ("sum", "mean"):
            if want is None or (isinstance(want, float) and not math.isfinite(want)):
                continue
            w = _number(want, ct) if stat == "sum" else float(want)
            g = _number(got, ct) if stat == "sum" else got
            if a.method is Method.STORED:
                assert g is not None and _close(g, w), where
            else:
                lo = _number(a.low, ct) if stat == "sum" else a.low
                hi = _number(a.high, ct) if stat == "sum" else a.high
                assert _within(lo, w, hi, slack=1e-9), where
                assert g is None or _within(lo, g, hi, slack=1e-9), where
            continue
        if a.method is Method.STORED:
            assert got == want, where
        else:
            assert a.low <= want <= a.high, where
            assert a.low <= got <= a.high, where
    rc = methods.of("*", "row_count")
    if rc.method is Method.STORED:
        assert t.column("row_count")[0].as_py() == rows.num_rows
    else:
        assert rc.low <= rows.num_rows <= rc.high
    return {m.value: n for m, n in seen.items()}


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(tree=TREES)
def test_statistics_stored_equal_duckdb_and_estimates_hold_it(subset_table: dict, tree: ex.Expression) -> None:
    _check_statistics_stored_equal_duckdb_and_estimates_hold_it(subset_table, tree)


@pytest.mark.slow
@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(tree=TREES)
def test_statistics_stored_equal_duckdb_and_estimates_hold_it_many(subset_table: dict, tree: ex.Expression) -> None:
    _check_statistics_stored_equal_duckdb_and_estimates_hold_it(subset_table, tree)


def _check_statistics_stored_equal_duckdb_and_estimates_hold_it(subset_table: dict, tree: ex.Expression) -> None:
    ts = subset_table["ts"]
    check_statistics(ts, subset_table["data"], ts.bind(tree))


@pytest.mark.parametrize(
    "where",
    [
        "p >= 2",  # whole partitions: merged
        "p = 3",  # one whole partition: its own row
        "id < 0",  # nothing
        "true",  # the whole table
        "p in (0, 4) or id > 100000",
        "not (p = 1)",
    ],
)
def test_whole_partitions_are_stored(subset_table: dict, where: str) -> None:
    ts = subset_table["ts"]
    expr = ts.bind(where)
    check_statistics(ts, subset_table["data"], expr)
    m = methods_of(ts.statistics(None, where=expr))
    assert m.of("*", "row_count").method is Method.STORED
    # merged exactly; only the distinct count of a column without exact partition frequencies
    # (floats, timestamps, mostly distinct strings) over several partitions is a theta estimate
    for (column, stat), a in m.answers.items():
        if stat in STATS and stat != "distinct_count":
            assert a.method is Method.STORED, (column, stat, a)


def test_partial_partitions_estimate_with_bounds_and_assumptions(subset_table: dict) -> None:
    ts = subset_table["ts"]
    expr = ts.bind("x < 10 and city = 'Berlin'")  # x < 10: no NaN (NaN sorts above every value)
    check_statistics(ts, subset_table["data"], expr)
    m = methods_of(ts.statistics(["x"], where=expr))
    rc = m.of("*", "row_count")
    assert rc.method is Method.ESTIMATED and rc.low <= rc.high
    assert "independence between columns" in rc.assumption
    # the predicate column's nulls and NaN are ruled out by the predicate: exact
    assert m.of("x", "null_count").method is Method.STORED and m.of("x", "nan_count").method is Method.STORED


def test_equality_on_exact_frequencies_is_an_exact_row_count(subset_table: dict) -> None:
    ts, data = subset_table["ts"], subset_table["data"]
    for where in ("city = 'Berlin'", "city in ('Rome', 'Lima')", "k = 5", "city != 'Paris'", "k >= 7 and k < 10"):
        t = ts.statistics(["city"], where=where)
        rc = methods_of(t).of("*", "row_count")
        assert rc.method is Method.STORED, where
        assert t.column("row_count")[0].as_py() == _filtered(data, ts.bind(where)).num_rows, where


def test_the_file_index_narrows_a_partial_partition(subset_table: dict) -> None:
    ts, data = subset_table["ts"], subset_table["data"]
    first = data.filter(pa.compute.equal(data.column("p"), 0))
    cut = first.column("id")[first.num_rows // 3].as_py()  # the first id of partition 0's second file
    expr = ts.bind(f"id >= {cut} and id <= 2500 and p <= 0")
    sub = ts.subset(expr)
    assert sub.partitions.some == ("p=0",) or "p=0" in sub.partitions.some
    c = sub.partition_count("p=0")
    truth = _filtered(first, expr).num_rows
    assert c.low <= truth <= c.high
    assert c.exact and c.low == first.num_rows - first.num_rows // 3  # its second file, whole


def test_value_partitions_make_equality_on_a_mostly_distinct_column_exact(subset_table: dict) -> None:
    """The last partition keeps only repeated names; the table's value partitions give every
    stored value's count per partition (analyze --value-partitions)."""
    ts, ts_vp, data = subset_table["ts"], subset_table["ts_vp"], subset_table["data"]
    last = data.filter(pa.compute.equal(data.column("p"), PARTS - 1))
    counts = pa.compute.value_counts(last.column("name").drop_null())
    repeated = [c["values"] for c in counts.to_pylist() if c["counts"] > 1]
    table_counts = {c["values"]: c["counts"] for c in pa.compute.value_counts(data.column("name").drop_null()).to_pylist()}
    once_here = [v for v in last.column("name").drop_null().to_pylist() if v not in set(repeated) and table_counts[v] > 1]
    names = [*repeated[:1], *once_here[:1]]  # a value the last partition does not store, the table does (with its partitions)
    assert len(names) == 2
    where = "name in (" + ", ".join(f"'{n}'" for n in names) + ")"
    truth = _filtered(data, ts.bind(where)).num_rows
    plain = methods_of(ts.statistics(["name"], where=where)).of("*", "row_count")
    with_vp = ts_vp.statistics(["name"], where=where)
    a = methods_of(with_vp).of("*", "row_count")
    assert plain.method is Method.ESTIMATED and plain.low <= truth <= plain.high  # without: a value seen once is 0..1 there
    assert a.method is Method.STORED and with_vp.column("row_count")[0].as_py() == truth


def test_is_null_is_exact(subset_table: dict) -> None:
    ts, data = subset_table["ts"], subset_table["data"]
    for where in ("x is null", "x is not null", "x is nan", "x is not nan"):
        t = ts.statistics(["x"], where=where)
        assert methods_of(t).of("*", "row_count").method is Method.STORED, where
        assert t.column("row_count")[0].as_py() == _filtered(data, ts.bind(where)).num_rows, where


# ------------------------------------------------------------------ top frequencies
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(tree=TREES, column=st.sampled_from(["city", "k"]), k=st.integers(1, 8))
def test_top_frequencies(subset_table: dict, tree: ex.Expression, column: str, k: int) -> None:
    _check_top_frequencies(subset_table, tree, column, k)


@pytest.mark.slow
@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(tree=TREES, column=st.sampled_from(["city", "k"]), k=st.integers(1, 8))
def test_top_frequencies_many(subset_table: dict, tree: ex.Expression, column: str, k: int) -> None:
    _check_top_frequencies(subset_table, tree, column, k)


def _check_top_frequencies(subset_table: dict, tree: ex.Expression, column: str, k: int) -> None:
    ts, data = subset_table["ts"], subset_table["data"]
    expr = ts.bind(tree)
    t = ts.top_frequencies(column, k, where=expr)
    m = methods_of(t)
    rows = _filtered(data, expr)
    con = duckdb.connect()
    try:
        con.register("sub", rows)
        truth = dict(con.execute(f'SELECT CAST("{column}" AS VARCHAR), count(*) FROM sub WHERE "{column}" IS NOT NULL GROUP BY 1').fetchall())
    finally:
        con.close()
    got = list(zip(t.column("value").to_pylist(), t.column("frequency").to_pylist()))
    assert len(got) <= k
    exact = all(m.of(column, v).method is Method.STORED for v, _ in got)
    for v, f in got:
        a = m.of(column, v)
        if a.method is Method.STORED:
            assert truth.get(v, 0) == f, (v, f, expr)
        else:
            assert a.low <= truth.get(v, 0) <= a.high, (v, a, truth.get(v), expr)
    if exact:  # the stored top k: the k largest counts of DuckDB (ties in any order)
        want = sorted(truth.values(), reverse=True)[:k]
        assert [f for _, f in got] == want, (got, want, expr)


# ------------------------------------------------------------------ histograms
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(tree=TREES, column=st.sampled_from(["x", "k", "amt", "id"]))
def test_histogram_counts(subset_table: dict, tree: ex.Expression, column: str) -> None:
    _check_histogram_counts(subset_table, tree, column)


@pytest.mark.slow
@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(tree=TREES, column=st.sampled_from(["x", "k", "amt", "id"]))
def test_histogram_counts_many(subset_table: dict, tree: ex.Expression, column: str) -> None:
    _check_histogram_counts(subset_table, tree, column)


def _check_histogram_counts(subset_table: dict, tree: ex.Expression, column: str) -> None:
    ts, data = subset_table["ts"], subset_table["data"]
    expr = ts.bind(tree)
    t = ts.histogram(column, where=expr)
    m = methods_of(t)
    spec = ts.histogram_spec(column)
    rows = _filtered(data, expr)
    # DuckDB bins the filtered values on the stored edges (the bin function of docs/FORMAT.md)
    q = f'"{column}"'
    if spec.domain == "integer":
        bin_expr = f"least(greatest(({q}::HUGEINT - {spec.lower}) // {spec.width}, 0), {spec.bins - 1})"
        valid = f"{q} IS NOT NULL"
    else:
        bin_expr = f"least(greatest(floor(({q}::DOUBLE - {spec.lower!r}) / {spec.width!r}), 0), {spec.bins - 1})"
        valid = f"{q} IS NOT NULL AND NOT isnan({q}::DOUBLE)"
    con = duckdb.connect()
    try:
        con.register("sub", rows)
        truth = {int(b): c for b, c in con.execute(f"SELECT {bin_expr} AS b, count(*) FROM sub WHERE {valid} GROUP BY b").fetchall()}
    finally:
        con.close()
    assert t.num_rows == spec.bins
    for b, c in zip(t.column("bin").to_pylist(), t.column("count").to_pylist()):
        a = m.of(column, f"bin:{b}")
        if a.method is Method.STORED:
            assert c == truth.get(b, 0), (b, c, truth.get(b), expr)
        else:
            assert a.low <= truth.get(b, 0) <= a.high, (b, a, truth.get(b), expr)
            assert a.low <= c <= a.high


# ------------------------------------------------------------------ API shape and bad input
def test_without_where_nothing_changes(subset_table: dict) -> None:
    ts = subset_table["ts"]
    assert ts.statistics(["k", "x"]).equals(ts.statistics(["k", "x"], where=None))
    assert methods_of(ts.statistics(["k"])) is None
    assert ts.top_frequencies("city", 3).equals(ts.top_frequencies("city", 3, where=None))
    assert ts.histogram("k").equals(ts.histogram("k", where=None))


def test_subset_object(subset_table: dict) -> None:
    ts = subset_table["ts"]
    sub = ts.subset("p = 2 or p = 3")
    assert sub.whole_partitions and len(sub.partitions.all) == 2
    assert sub.row_count().method is Method.STORED
    assert sub.statistics(["k"]).column("row_count")[0].as_py() == sub.row_count().value
    assert sub.statistics(["k"]).schema.names == ts.statistics(["k"]).schema.names


def test_bad_input(subset_table: dict) -> None:
    ts = subset_table["ts"]
    with pytest.raises(ExpressionError, match="unknown column 'nope'"):
        ts.statistics(["k"], where="nope = 1")
    with pytest.raises(ExpressionError):
        ts.statistics(["k"], where="k = (")
    with pytest.raises(InvalidArgumentError, match="no statistics for column"):
        ts.statistics(["nope"], where="k = 1")
    with pytest.raises(InvalidArgumentError, match="give no partition"):
        ts.statistics(["k"], "p=1", where="k = 1")
    # a statistic asked for by name that stored files cannot give for part of a partition
    with pytest.raises(SubsetStatisticError, match=r"statistic 'p50' of column 'x' .*exact=True \(--exact\) computes it"):
        ts.statistics(["x"], where="x > 1", statistics=["row_count", "p50"])
    # top frequencies of a column whose partitions keep only repeated values
    with pytest.raises(SubsetStatisticError, match=r"column 'name'.*exact=True"):
        ts.top_frequencies("name", 3, where="k > 4")


# ------------------------------------------------------------------ computed (engine.runtime.subset)
@pytest.mark.parametrize("where", ["x > 10 and city = 'Berlin'", "name starts with 'n1' or k is null"])
def test_exact_is_computed_and_equals_duckdb(subset_table: dict, where: str) -> None:
    ts, data = subset_table["ts"], subset_table["data"]
    expr = ts.bind(where)
    t = ts.statistics(["k", "x", "city", "amt"], where=expr, exact=True)
    m = methods_of(t)
    assert m.exact and m.of("*", "row_count").method is Method.COMPUTED
    rows = _filtered(data, expr)
    for column, ct, stat, got, want in _against_duckdb(ts, t, rows):
        assert m.of(column, stat).method is Method.COMPUTED
        if stat in ("min", "max"):
            assert _key(got, ct) == _key(want, ct), (stat, column, got, want)
        elif stat in ("sum", "mean"):
            if want is not None:
                assert _close(_number(got, ct) if stat == "sum" else got, _number(want, ct) if stat == "sum" else float(want)), (stat, column)
        else:
            assert got == want, (stat, column, got, want)
    # a statistic stored files cannot give for the subset, asked by name: computed with exact=True
    p50 = ts.statistics(["x"], where=expr, statistics=["row_count", "p50"], exact=True)
    assert methods_of(p50).of("x", "p50").method is Method.COMPUTED
    top = ts.top_frequencies("name", 3, where=expr, exact=True)
    assert all(a.method is Method.COMPUTED for a in methods_of(top).answers.values())
    hist = ts.histogram("k", where=expr, exact=True)
    assert sum(hist.column("count").to_pylist()) == rows.num_rows - rows.column("k").null_count


def test_histogram_where_takes_bins_and_value_ranges(subset_table: dict) -> None:
    ts = subset_table["ts"]
    full = ts.histogram("k", where="k > 4")
    part = ts.histogram("k", bins=(2, 5), where="k > 4")
    assert part.column("bin").to_pylist() == [2, 3, 4]
    assert part.column("count").to_pylist() == full.column("count").to_pylist()[2:5]
    ranged = ts.histogram("k", value_range=(10, 12), where="k > 4")
    assert ranged.column("bin").to_pylist() == ts.histogram("k", value_range=(10, 12)).column("bin").to_pylist()
