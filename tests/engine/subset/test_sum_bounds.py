"""The bounds of an estimated subset's sum (engine/subset/estimates.py) against DuckDB, and the
sign the predicate gives them (issue #28): where every matching value is >= 0 (a predicate
``x > c`` or ``x >= c`` with c >= 0) the sum's lower bound is >= 0, where every one is <= 0
the upper bound is <= 0. A zero bound widened outwards for float rounding came out
``-1e-300`` before (``show --where "city = 'Berlin' and price > 100"``).

The table is written by pandas (Hive partitions); rows are selected and summed by DuckDB.
"""

from __future__ import annotations

import json
import math
from decimal import Decimal
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.cli.console import metastore
from engine.subset import Method, methods_of

pytestmark = pytest.mark.ray

CITIES = ["Berlin", "Paris", "Rome", "Oslo"]


@pytest.fixture(scope="module")
def lake(ray_runtime: None, tmp_path_factory: pytest.TempPathFactory) -> dict:
    from engine.api import analyze
    from engine.lookup import open_statistics

    root = tmp_path_factory.mktemp("sum_bounds")
    rng = np.random.default_rng(5)
    n = 1600
    x = np.round(rng.uniform(-50, 50, n), 1)
    x[rng.random(n) < 0.03] = np.nan
    pos = np.round(rng.uniform(10, 1000, n), 2)
    pos[rng.random(n) < 0.05] = np.nan  # pandas writes these NaN: stored as NaN, not null
    frame = pd.DataFrame(
        {
            "part": rng.choice(["a", "b", "c", "d"], n),
            "x": x,
            "pos": pos,
            "k": pd.array(rng.integers(-20, 21, n), dtype="Int64"),
            "city": rng.choice(CITIES, n),
        }
    )
    frame.loc[rng.random(n) < 0.05, "k"] = pd.NA
    table = root / "lake"
    frame.to_parquet(table, partition_cols=["part"], engine="pyarrow", index=False)
    store = root / "store"
    analyze(str(table), store=str(store), user_statistics=[])
    return {"ts": open_statistics(str(store), "lake"), "table": str(table), "store": str(store)}


def duckdb_sum(table: str, column: str, where: str):
    """DuckDB's sum of the column's non-null, non-NaN values of the matching rows (None: none)."""
    valid = f"{column} IS NOT NULL" + (f" AND NOT isnan({column})" if column != "k" else "")
    con = duckdb.connect()
    try:
        q = f"SELECT sum({column}) FROM read_parquet('{table}/*/*.parquet', hive_partitioning = true) WHERE ({where}) AND {valid}"
        return con.execute(q).fetchone()[0]
    finally:
        con.close()


def number(text: str | None, column: str):
    if text is None:
        return None
    return int(text) if column == "k" else float(text)


def check_sum(low, value, high, truth, column: str, op: str, c: float, where: str) -> None:
    at = f"sum of {column} where {where}: [{low}, {high}] ~{value}, DuckDB {truth}"
    assert low is not None and high is not None and low <= value <= high, at
    if truth is not None:
        assert low <= truth <= high, at
    if op in (">", ">=") and c >= 0:  # every matching value >= 0
        assert low >= 0 and not (isinstance(low, float) and math.copysign(1, low) < 0), at
    if op in ("<", "<=") and c <= 0:  # every matching value <= 0
        assert high <= 0, at


EXTRA = st.sampled_from(["", "city = 'Berlin'", "city <> 'Rome'", "city IN ('Oslo', 'Paris')", "part >= 'b'"])


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(
    column=st.sampled_from(["x", "pos", "k"]),
    op=st.sampled_from([">", ">=", "<", "<="]),
    c=st.sampled_from([0, 0.0, 5, 100, -5, -100]) | st.integers(-60, 1100),
    extra=EXTRA,
)
def test_sum_bounds_hold_duckdb_and_the_predicates_sign(lake: dict, column: str, op: str, c: float, extra: str) -> None:
    where = f"{column} {op} {c}" + (f" and {extra}" if extra else "")
    ts = lake["ts"]
    t = ts.statistics([column], where=where)
    answer = methods_of(t).of(column, "sum")
    got = t.column("sum")[0].as_py()
    truth = duckdb_sum(lake["table"], column, where.replace(" and ", " AND "))
    if answer.method is Method.STORED:
        assert (got is None and truth is None) or math.isclose(float(got), float(truth), rel_tol=1e-9, abs_tol=1e-9), (where, got, truth)
        return
    if answer.method is Method.UNAVAILABLE:
        return
    check_sum(number(answer.low, column), number(got, column), number(answer.high, column), truth, column, op, float(c), where)


def test_show_where_sum_of_values_over_100_is_not_negative(analyzed_sample, tmp_path: Path) -> None:
    """The issue's command on the sample table: every matching price is > 100, so the sum's
    lower bound is >= 0 (it was -1e-300), and the bounds hold DuckDB's sum."""
    table, store, _ = analyzed_sample
    where = "city = 'Berlin' and price > 100"
    r = CliRunner().invoke(metastore, ["--store", store, "-o", "json", "show", "sales", "--where", where, "-c", "price"])
    assert r.exit_code == 0, r.output
    (col,) = json.loads(r.output)["columns"]
    s = col["statistics"]["sum"]
    assert s["method"] == "estimated"
    truth = duckdb_sum(table, "price", where.replace(" and ", " AND "))
    low, value, high = Decimal(s["low"]), Decimal(s["value"]), Decimal(s["high"])
    assert Decimal(0) <= low <= Decimal(repr(truth)) <= high and low <= value <= high
    assert not s["low"].startswith("-")
