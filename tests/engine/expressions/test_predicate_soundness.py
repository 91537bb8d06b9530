"""The metrics evaluator never prunes a unit holding a matching row (DuckDB's and Arrow's semantics
both: NaN largest and NaN unordered), and prunes exactly what min/max, null and NaN counts prove
on hand-built units."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from predicate_oracle import arrow_matches, duckdb_matches
from predicate_strategies import DEC, F64, I64, STR, TS, U64, arrow_array, leaves, trees

from engine import expressions as ex
from engine import values as value_forms
from engine.expressions.statistics import metrics_from_row
from engine.expressions.vector import ColumnVectors, VectorMetricsEvaluator

COLUMNS = {
    "i64": (pa.int64(), I64),
    "u64": (pa.uint64(), U64),
    "f64": (pa.float64(), F64),
    "dec": (pa.decimal128(10, 2), DEC),
    "ts": (pa.timestamp("us", "UTC"), TS),
    "s": (pa.string(), STR),
}
SCHEMA = pa.schema([(name, t) for name, (t, _) in COLUMNS.items()])
TREES = trees(leaves(COLUMNS), max_leaves=5)


@st.composite
def units(draw) -> list[pa.Table]:
    """Several files' worth of rows (some empty, some all null)."""
    out = []
    for _ in range(draw(st.integers(1, 4))):
        n = draw(st.integers(0, 6))
        cols = {}
        for name, (t, values) in COLUMNS.items():
            cols[name] = arrow_array(t, draw(st.lists(st.one_of(st.none(), values), min_size=n, max_size=n)))
        out.append(pa.table(cols, schema=SCHEMA))
    return out


def statistics_row(arr: pa.Array) -> dict:
    """What analyze stores for a column: counts, and min/max of the non-null, non-NaN values as text."""
    valid = pc.drop_null(arr)
    nans = 0
    if pa.types.is_floating(arr.type):
        is_nan = pc.is_nan(valid)
        nans = pc.sum(is_nan).as_py() or 0
        valid = pc.filter(valid, pc.invert(is_nan))
    if len(valid) == 0:
        lo = hi = None
    else:
        key = ex.comparable
        values = sorted((valid[i] for i in range(len(valid))), key=key)
        lo, hi = value_forms.encode_scalar(values[0]), value_forms.encode_scalar(values[-1])
    return {"row_count": len(arr), "null_count": arr.null_count, "nan_count": nans, "min": lo, "max": hi}


def unit_statistics(t: pa.Table) -> dict[str, dict]:
    """Every column's statistics row of one unit."""
    return {name: statistics_row(t.column(name).combine_chunks()) for name in COLUMNS}


def unit_metrics(stats: dict[str, dict]) -> dict[str, ex.ColumnMetrics]:
    """A unit's statistics rows as the evaluators read them."""
    return {name: metrics_from_row(stats[name], COLUMNS[name][0]) for name in COLUMNS}


_SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


@settings(max_examples=120, **_SETTINGS)
@given(files=units(), tree=TREES)
def test_a_unit_holding_a_matching_row_is_never_pruned(con, files: list[pa.Table], tree: ex.Expression) -> None:
    _check_never_pruned(con, files, tree)


@pytest.mark.slow
@settings(max_examples=1500, **_SETTINGS)
@given(files=units(), tree=TREES)
def test_a_unit_holding_a_matching_row_is_never_pruned_many(con, files: list[pa.Table], tree: ex.Expression) -> None:
    _check_never_pruned(con, files, tree)


def _check_never_pruned(con, files: list[pa.Table], tree: ex.Expression) -> None:
    expr = ex.bind(tree, SCHEMA)
    evaluator = ex.InclusiveMetricsEvaluator(expr)
    for t in files:
        stats = unit_statistics(t)
        metrics = unit_metrics(stats)
        verdict = evaluator.eval(lambda ref, m=metrics: m[ref.name], rows=len(t))
        refuted = evaluator.refuting_conjunct(lambda ref, m=metrics: m[ref.name], rows=len(t))
        assert verdict == (refuted is None)
        event("pruned" if not verdict else "kept")
        if not verdict:
            assert not arrow_matches(t, expr), (str(expr), t.to_pylist(), stats, str(refuted))
            assert not duckdb_matches(con, t, expr), (str(expr), t.to_pylist(), stats, str(refuted))
        # with nothing known, nothing is pruned
        assert evaluator.eval(lambda ref: None) is True
    # the vectorised evaluator (file indexes) gives the same verdict for every unit at once
    all_stats = [unit_statistics(t) for t in files]
    vectors = {name: column_vectors([s[name] for s in all_stats], COLUMNS[name][0]) for name in COLUMNS}
    rows = np.array([len(t) for t in files], np.int64)
    vector = VectorMetricsEvaluator(expr)
    got = vector.eval(lambda ref: vectors[ref.name], len(files), rows)
    want = [evaluator.eval(lambda ref, st=st: metrics_from_row(st[ref.name], COLUMNS[ref.name][0]), rows=int(n)) for st, n in zip(all_stats, rows)]
    assert got.tolist() == want, str(expr)
    first = vector.refuting_conjuncts(lambda ref: vectors[ref.name], len(files), rows)
    assert ((first == -1) == got).all()


def column_vectors(rows: list[dict], t: pa.DataType) -> ColumnVectors:
    """Statistics rows of n units as the vectorised evaluator's input (-1: unknown count)."""

    def counts(key: str) -> np.ndarray:
        return np.array([-1 if r[key] is None else r[key] for r in rows], np.int64)

    return ColumnVectors(
        rows=counts("row_count"),
        nulls=counts("null_count"),
        nans=counts("nan_count") if pa.types.is_floating(t) else np.zeros(len(rows), np.int64),
        lower=value_forms.decode(pa.array([r["min"] for r in rows], pa.string()), t),
        upper=value_forms.decode(pa.array([r["max"] for r in rows], pa.string()), t),
        known=np.ones(len(rows), bool),
    )


# ------------------------------------------------------------------ effectiveness on hand-built units
RANGES = {  # three sorted "files" of one int64 column and one string column
    "f0": {"row_count": 10, "null_count": 0, "nan_count": None, "min": "0", "max": "9"},
    "f1": {"row_count": 10, "null_count": 2, "nan_count": None, "min": "10", "max": "19"},
    "f2": {"row_count": 10, "null_count": 10, "nan_count": None, "min": None, "max": None},
}
STRINGS = {
    "f0": {"row_count": 10, "null_count": 0, "min": "apple", "max": "apricot"},
    "f1": {"row_count": 10, "null_count": 0, "min": "banana", "max": "berry"},
    "f2": {"row_count": 10, "null_count": 0, "min": "cherry", "max": "cherry"},
}
FLOATS = {
    "f0": {"row_count": 10, "null_count": 0, "nan_count": 0, "min": "-0", "max": "1.5"},
    "f1": {"row_count": 10, "null_count": 0, "nan_count": 3, "min": "2", "max": "3"},
    "f2": {"row_count": 10, "null_count": 0, "nan_count": 10, "min": None, "max": None},
}
HAND = pa.schema([("n", pa.int64()), ("s", pa.string()), ("x", pa.float64())])


@pytest.mark.parametrize(
    "where,candidates",
    [
        ("n = 5", {"f0"}),
        ("n < 10", {"f0"}),
        ("n <= 10", {"f0", "f1"}),
        ("n > 9", {"f1"}),
        ("n >= 20", set()),
        ("n between 8 and 12", {"f0", "f1"}),
        ("n in (3, 25)", {"f0"}),
        ("n in (25, 30)", set()),
        ("n is null", {"f1", "f2"}),
        ("n is not null", {"f0", "f1"}),
        ("n != 5", {"f0", "f1"}),
        ("not n < 10", {"f1"}),
        ("n < 3 or n > 15", {"f0", "f1"}),
        ("n < 3 and n > 15", set()),
        ("s like 'ap%'", {"f0"}),
        ("s starts with 'b'", {"f1"}),
        ("s like 'c%'", {"f2"}),
        ("s not like 'c%'", {"f0", "f1"}),
        ("s not like 'ap%'", {"f1", "f2"}),
        ("s = 'cherry'", {"f2"}),
        ("s != 'cherry'", {"f0", "f1"}),
        ("s not in ('cherry', 'x')", {"f0", "f1"}),
        ("s > 'berry'", {"f2"}),
        ("x = 0", {"f0"}),  # -0 = 0
        ("x < 0", {"f1", "f2"}),  # NaN may sort anywhere: files holding NaN stay
        ("x = 2.5", {"f1"}),  # NaN equals nothing: f2 (only NaN) goes
        ("x is nan", {"f1", "f2"}),
        ("x is not nan", {"f0", "f1"}),
        ("x != 1", {"f0", "f1", "f2"}),
        ("x > 5", {"f1", "f2"}),
        ("n = 5 and s = 'banana'", set()),
        ("n = 5 or s = 'banana'", {"f0", "f1"}),
    ],
)
def test_hand_built_units_prune_exactly_what_the_statistics_prove(where: str, candidates: set[str]) -> None:
    expr = ex.bound(where, HAND)
    evaluator = ex.InclusiveMetricsEvaluator(expr)
    got = set()
    for f in ("f0", "f1", "f2"):
        rows = {"n": RANGES[f], "s": {**STRINGS[f], "nan_count": None}, "x": FLOATS[f]}
        metrics = {name: metrics_from_row(rows[name], HAND.field(name).type) for name in rows}
        if evaluator.eval(lambda ref, m=metrics: m[ref.name], rows=10):
            got.add(f)
    assert got == candidates


def test_the_refuting_conjunct_is_named() -> None:
    expr = ex.bound("n >= 0 and s = 'zebra' and n < 100", HAND)
    evaluator = ex.InclusiveMetricsEvaluator(expr)
    metrics = {"n": metrics_from_row(RANGES["f0"], pa.int64()), "s": metrics_from_row(STRINGS["f0"], pa.string())}
    assert str(evaluator.refuting_conjunct(lambda ref: metrics.get(ref.name), rows=10)) == "s = 'zebra'"
    assert str(evaluator.refuting_conjunct(lambda ref: None, rows=0)) == str(ex.rewrite_not(expr))  # an empty unit


class _Bloom:
    def __init__(self, values) -> None:
        self.values = set(values)

    def might_contain(self, value) -> bool:
        return value in self.values


def test_a_membership_filter_prunes_equality_and_in_inside_the_range() -> None:
    expr_eq, expr_in = ex.bound("n = 5", HAND), ex.bound("n in (4, 6)", HAND)
    base = metrics_from_row(RANGES["f0"], pa.int64())
    with_bloom = ex.ColumnMetrics(base.rows, base.nulls, base.nans, base.lower, base.upper, _Bloom([1, 4, 9]))
    assert ex.might_match(expr_eq, lambda ref: base) is True
    assert ex.might_match(expr_eq, lambda ref: with_bloom) is False
    assert ex.might_match(expr_in, lambda ref: with_bloom) is True
    assert ex.might_match(ex.bound("n != 5", HAND), lambda ref: with_bloom) is True  # only = and IN use it
