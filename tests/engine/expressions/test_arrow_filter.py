"""The row filter of computed subsets (engine/expressions/arrow.py) against the row-level
truth: DuckDB's ``WHERE`` (SQL three-valued logic, NaN the largest value and equal to
itself), on generated tables with nulls, NaN, -0.0, extreme integers, decimals, zoned
timestamps, shared string prefixes and a struct leaf; row-group pruning over Parquet
statistics (pyarrow's with this filter, and engine/fileindex/rowgroups.py's) never drops a
matching row; the canonical form selects the same rows."""

from __future__ import annotations

import math

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from predicate_oracle import sql
from predicate_strategies import DEC, F32, F64, I64, STR, TS, arrow_array, leaves, trees

from engine import expressions as ex
from engine.columns import leaf_columns
from engine.expressions.arrow import to_arrow
from engine.expressions.normal import canonical, digest, normalise
from engine.fileindex.rowgroups import matching_row_groups

SMALL = st.integers(-3, 3)

COLUMNS = {
    "i64": (pa.int64(), I64),
    "f64": (pa.float64(), F64),
    "f32": (pa.float32(), F32),
    "dec": (pa.decimal128(10, 2), DEC),
    "ts": (pa.timestamp("us", "UTC"), TS),
    "s": (pa.string(), STR),
    "b": (pa.bool_(), st.booleans()),
}
STRUCT = pa.struct([("x", pa.int32()), ("y", pa.string())])
SCHEMA = pa.schema([(n, t) for n, (t, _) in COLUMNS.items()] + [("st", STRUCT)])
LEAVES = {**{n: (t, v) for n, (t, v) in COLUMNS.items()}, "st.x": (pa.int32(), SMALL), "st.y": (pa.string(), STR)}


TREES = trees(leaves(LEAVES), max_leaves=5)


@st.composite
def tables(draw, max_rows: int = 12) -> pa.Table:
    n = draw(st.integers(0, max_rows))
    cols = {}
    for name, (t, values) in COLUMNS.items():
        cols[name] = arrow_array(t, draw(st.lists(st.one_of(st.none(), values), min_size=n, max_size=n)))
    xs = draw(st.lists(st.one_of(st.none(), SMALL), min_size=n, max_size=n))
    ys = draw(st.lists(st.one_of(st.none(), STR), min_size=n, max_size=n))
    mask = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    cols["st"] = pa.StructArray.from_arrays(
        [pa.array(xs, pa.int32()), pa.array(ys, pa.string())], fields=list(STRUCT), mask=pa.array(mask, pa.bool_())
    )
    return pa.table(cols, schema=SCHEMA)


def _with_row(t: pa.Table) -> pa.Table:
    return t.append_column("__row", pa.array(range(len(t)), pa.int64()))


def duckdb_rows(con: duckdb.DuckDBPyConnection, t: pa.Table, expr: ex.Expression) -> list[int]:
    cur = con.cursor()
    try:
        cur.register("unit", _with_row(t))
        return sorted(r[0] for r in cur.execute(f"SELECT __row FROM unit WHERE {sql(expr)}").fetchall())
    finally:
        cur.close()


def arrow_rows(t: pa.Table, expr: ex.Expression) -> list[int]:
    return sorted(_with_row(t).filter(to_arrow(expr)).column("__row").to_pylist())


SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


@SETTINGS
@given(t=tables(), tree=TREES)
def test_the_filter_keeps_exactly_the_rows_duckdb_finds_true(con, t: pa.Table, tree: ex.Expression) -> None:
    expr = ex.bind(tree, SCHEMA)
    want = duckdb_rows(con, t, expr)
    assert arrow_rows(t, expr) == want, (str(expr), t.to_pylist())
    # the canonical form (the cache's key) selects the same rows
    assert arrow_rows(t, normalise(expr)) == want, (str(expr), str(normalise(expr)))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(t=tables(max_rows=40), tree=TREES)
def test_row_group_pruning_by_parquet_statistics_drops_no_matching_row(tmp_path_factory, t: pa.Table, tree: ex.Expression) -> None:
    """The metrics evaluator over each row group's statistics (engine/fileindex/rowgroups.py),
    the computed subsets' row-group pruning."""
    expr = ex.bind(tree, SCHEMA)
    path = tmp_path_factory.mktemp("rg") / "f.parquet"
    pq.write_table(_with_row(t), path, row_group_size=3)
    md = pq.ParquetFile(path).metadata
    ours = matching_row_groups(expr, md, leaf_columns(SCHEMA))
    read = pq.ParquetFile(path).read_row_groups(ours) if ours else _with_row(t).slice(0, 0)
    assert sorted(read.filter(to_arrow(expr)).column("__row").to_pylist()) == arrow_rows(t, expr), (str(expr), ours)


def test_pyarrow_pruning_drops_nan_rows_ours_keeps_them(tmp_path) -> None:
    """Why the computed subsets do not use pyarrow's row-group pruning: Parquet's min/max leave
    NaN out, and pyarrow 26 prunes by them as if they bounded every non-null value (found by the
    property test above when it still checked pyarrow's pruning too)."""
    schema = pa.schema([("f", pa.float64())])
    path = tmp_path / "nan.parquet"
    pq.write_table(pa.table({"f": [None, None, None, math.nan, math.nan, 1.5]}, schema=schema), path, row_group_size=3)
    md = pq.ParquetFile(path).metadata
    fragment = ds.ParquetFileFormat().make_fragment(str(path), filesystem=pafs.LocalFileSystem())
    for text in ("f is nan", "f > 2"):  # NaN is above every value
        expr = ex.bound(text, schema)
        assert [rg.id for rg in fragment.subset(filter=to_arrow(expr), schema=fragment.physical_schema).row_groups] == []  # pyarrow's: wrong
        assert matching_row_groups(expr, md, leaf_columns(schema)) == [1]  # ours keeps the NaN rows' group


# ------------------------------------------------------------------ hand-picked cases
F = pa.schema([("x", pa.float64()), ("h", pa.float16()), ("bin", pa.binary()), ("s", pa.string())])
ROWS = pa.table(
    {
        "x": pa.array([1.0, math.nan, None, -0.0, 0.0, math.inf], pa.float64()),
        "h": pa.array([1.0, math.nan, None, -0.0, 0.0, 2.0], pa.float16()),
        "bin": pa.array([b"\xff\x00", b"\xff", None, b"", b"\xff\x01", b"a"], pa.binary()),
        "s": pa.array(["Berlin", "Bern", None, "", "berlin", "Be"], pa.string()),
    },
    schema=F,
)


@pytest.mark.parametrize(
    "where,rows",
    [
        ("x > 0", [0, 1, 5]),  # NaN is above every value
        ("x >= inf", [1, 5]),
        ("x < 1", [3, 4]),
        ("x = 0", [3, 4]),  # -0.0 = 0.0
        ("x = nan", [1]),
        ("x != nan", [0, 3, 4, 5]),
        ("x < nan", [0, 3, 4, 5]),
        ("x <= nan", [0, 1, 3, 4, 5]),
        ("x > nan", []),
        ("x != 1", [1, 3, 4, 5]),
        ("x not in (1, 0)", [1, 5]),
        ("x in (nan, -0.0)", [1, 3, 4]),
        ("x is nan", [1]),
        ("x is not nan", [0, 3, 4, 5]),  # null is not "not NaN": unknown
        ("not x is nan", [0, 3, 4, 5]),
        ("x is null", [2]),
        ("not (x > 0)", [3, 4]),  # NOT of unknown is unknown
        ("h > 0.5", [0, 1, 5]),  # float16: compared as float32
        ("h = nan or h < 0.5", [1, 3, 4]),
        ("bin starts with 'ff'", [0, 1, 4]),  # binary literals as hex
        ("bin starts with 'ff00'", [0]),
        ("bin not starts with 'ff'", [3, 5]),
        ("bin starts with ''", [0, 1, 3, 4, 5]),
        ("s like 'Ber%'", [0, 1]),
        ("s starts with 'Be'", [0, 1, 5]),
        ("s not like 'Ber%'", [3, 4, 5]),
        ("s starts with ''", [0, 1, 3, 4, 5]),
        ("true", [0, 1, 2, 3, 4, 5]),
        ("false", []),
    ],
)
def test_hand_picked_rows(where: str, rows: list[int]) -> None:
    expr = ex.bound(where, F)
    assert arrow_rows(ROWS, expr) == rows


def test_constants_decide_their_predicates() -> None:
    schema = pa.schema([("part", pa.string()), ("n", pa.int64())])
    t = pa.table({"n": pa.array([1, 2, 3], pa.int64())})
    expr = ex.bound("part = 'a' and n > 1", schema)
    assert t.filter(to_arrow(expr, constants={"part": pa.scalar("a")})).column("n").to_pylist() == [2, 3]
    assert t.filter(to_arrow(expr, constants={"part": pa.scalar("b")})).num_rows == 0
    assert to_arrow(expr, constants={"part": pa.scalar("b")}).equals(pc.scalar(False))
    # a null partition value (or a column the file lacks) matches only IS NULL
    nulls = {"part": pa.scalar(None, pa.string())}
    assert t.filter(to_arrow(ex.bound("part is null or n = 1", schema), constants=nulls)).num_rows == 3
    assert t.filter(to_arrow(ex.bound("part != 'a' or n = 1", schema), constants=nulls)).num_rows == 1
    # a struct leaf reads through its path in the data
    leaf = ex.bound("st.x = 1", SCHEMA)
    assert to_arrow(leaf, path_of=lambda ref: ("st", "x")).equals(pc.field("st", "x") == pa.scalar(1, pa.int32()))


S2 = pa.schema([("a", pa.int64()), ("b", pa.string()), ("c", pa.float64())])


@pytest.mark.parametrize(
    "one,other",
    [
        ("a = 1 and b = 'x'", "b = 'x' and a = 1"),
        ("a = 1 and (b = 'x' and c > 2)", "(c > 2 and a = 1) and b = 'x'"),
        ("a = 1 or b = 'x' or a = 1", "b = 'x' or a = 1"),
        ("not (a < 5)", "a >= 5"),
        ("not (a = 1 or b = 'x')", "b != 'x' and a != 1"),
        ("a in (3, 1, 2)", "a in (1, 2, 3)"),
        ("a in (1)", "a = 1"),
        ("a = 1 and true", "a = 1"),
        ("a = 1 or false", "a = 1"),
        ("a = 1 and false", "false"),
        ("a = 1 or (b = 'x' or true)", "true"),
        ("a between 1 and 5", "a <= 5 and a >= 1"),
    ],
)
def test_equal_predicates_share_a_canonical_form(one: str, other: str) -> None:
    x, y = ex.bound(one, S2), ex.bound(other, S2)
    assert canonical(x) == canonical(y)
    assert digest(x) == digest(y)


def test_different_predicates_have_different_canonical_forms() -> None:
    texts = ["a = 1", "a = 2", "a != 1", "a = 1 and b = 'x'", "a = 1 or b = 'x'", "c > 2", "c >= 2", "b = 'a = 1'"]
    assert len({canonical(ex.bound(t, S2)) for t in texts}) == len(texts)
