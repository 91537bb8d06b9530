"""The strict metrics evaluator (rows must match) never claims a unit whose every row matches
when one does not: checked against DuckDB (NaN largest, NOT pushed in: the subset semantics)
and Arrow (IEEE) on generated units, with nulls, NaN, -0.0, extreme integers, decimals,
timestamps and strings with shared prefixes (the generators of the inclusive evaluator's test)."""

from __future__ import annotations

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, event, given, settings
from predicate_oracle import arrow_mask, sql
from test_predicate_soundness import SCHEMA, TREES, unit_metrics, unit_statistics, units

from engine import expressions as ex
from engine.expressions.strict import StrictMetricsEvaluator, must_match


def _all_match_duckdb(con: duckdb.DuckDBPyConnection, t: pa.Table, expr: ex.Expression) -> bool:
    cur = con.cursor()
    try:
        cur.register("unit", t)
        return cur.execute(f"SELECT count(*) FROM unit WHERE {sql(ex.rewrite_not(expr))}").fetchall()[0][0] == len(t)
    finally:
        cur.close()


def _all_match_arrow(t: pa.Table, expr: ex.Expression) -> bool:
    return len(t) == 0 or bool(pc.all(pc.fill_null(arrow_mask(t, ex.rewrite_not(expr)), False)).as_py())


_SETTINGS = dict(deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])


@settings(max_examples=120, **_SETTINGS)
@given(files=units(), tree=TREES)
def test_a_unit_proved_to_match_has_every_row_matching(con, files: list[pa.Table], tree: ex.Expression) -> None:
    _check_proved_to_match(con, files, tree)


@pytest.mark.slow
@settings(max_examples=1500, **_SETTINGS)
@given(files=units(), tree=TREES)
def test_a_unit_proved_to_match_has_every_row_matching_many(con, files: list[pa.Table], tree: ex.Expression) -> None:
    _check_proved_to_match(con, files, tree)


def _check_proved_to_match(con, files: list[pa.Table], tree: ex.Expression) -> None:
    expr = ex.bind(tree, SCHEMA)
    strict = StrictMetricsEvaluator(expr)
    inclusive = ex.InclusiveMetricsEvaluator(expr)
    for t in files:
        stats = unit_statistics(t)
        metrics = unit_metrics(stats)
        verdict = strict.eval(lambda ref, m=metrics: m[ref.name], rows=len(t))
        event("must match" if verdict else "might not")
        if verdict:
            assert _all_match_duckdb(con, t, expr), (str(expr), t.to_pylist(), stats)
            assert _all_match_arrow(t, expr), (str(expr), t.to_pylist(), stats)
            if len(t):  # a non-empty unit where every row matches is never pruned
                assert inclusive.eval(lambda ref, m=metrics: m[ref.name], rows=len(t))
        assert strict.eval(lambda ref: None) is False  # nothing known: nothing proved


def _metrics(rows=10, nulls=0, nans=0, lower=None, upper=None):
    return ex.ColumnMetrics(rows=rows, nulls=nulls, nans=nans, lower=lower, upper=upper)


@pytest.mark.parametrize(
    ("where", "metrics", "expected"),
    [
        ("i64 > 5", _metrics(lower=6, upper=9), True),
        ("i64 > 5", _metrics(lower=5, upper=9), False),
        ("i64 > 5", _metrics(nulls=1, lower=6, upper=9), False),  # a null row does not match
        ("i64 between 1 and 9", _metrics(lower=1, upper=9), True),
        ("i64 = 3", _metrics(lower=3, upper=3), True),
        ("i64 != 3", _metrics(lower=4, upper=8), True),
        ("i64 not in (1, 2)", _metrics(lower=0, upper=3), False),
        ("i64 is null", _metrics(nulls=10), True),
        ("i64 is not null", _metrics(nulls=0, lower=1, upper=2), True),
        ("f64 < 1.5", _metrics(nans=1, lower=0.0, upper=1.0), False),  # NaN: not below anything
        ("f64 is not nan", _metrics(nans=0, lower=0.0, upper=1.0), True),
        ("s starts with 'ab'", _metrics(lower="ab", upper="abé"), True),
        ("s starts with 'ab'", _metrics(lower="a", upper="abé"), False),
        ("s not starts with 'b'", _metrics(lower="a", upper="ab"), True),
        ("i64 > 5 or i64 < 0", _metrics(lower=6, upper=7), True),
        ("i64 > 5 and s = 'a'", _metrics(lower=6, upper=7), False),  # s unknown
    ],
)
def test_hand_built_units(where: str, metrics: ex.ColumnMetrics, expected: bool) -> None:
    expr = ex.bound(where, SCHEMA)
    name = ex.references(expr)[0].name
    assert must_match(expr, lambda ref: metrics if ref.name == name else None, rows=metrics.rows) is expected
