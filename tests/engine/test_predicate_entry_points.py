"""Predicates through the CLI and the API on a table pyarrow and pandas wrote (tests/dotted_names.py),
DuckDB the oracle: quoted dotted names (#28 item 4), long AND/OR chains and deep trees
(#33 item 3), numbers beyond float64 (#33 item 12). Flight: tests/flight_server/test_flight_predicates.py."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from dotted_names import SPELLINGS, duckdb_count, duckdb_files, write_dotted_table

from engine import expressions as ex
from engine.cli.console import metastore
from engine.exceptions import ExpressionError
from engine.expressions.tree import MAX_DEPTH, MAX_TERMS

pytestmark = pytest.mark.ray


@pytest.fixture(scope="module")
def dotted(ray_runtime: None, tmp_path_factory: pytest.TempPathFactory) -> dict:
    from engine.api import analyze
    from engine.lookup import open_statistics

    root = tmp_path_factory.mktemp("dotted") / "dotted"
    paths = write_dotted_table(root)
    store = str(root.parent / "store")
    result = analyze(str(root), store=store, user_statistics=[])
    return {"root": root, "paths": paths, "store": store, "table": result.table, "ts": open_statistics(store, result.table)}


def cli(dotted: dict, *args: str):
    return CliRunner().invoke(metastore, ["--store", dotted["store"], *args])


def files_kept(dotted: dict, where: str) -> set[str]:
    r = cli(dotted, "files", dotted["table"], "--where", where, "-o", "json")
    assert r.exit_code == 0, r.output[-2000:]
    return {f["path"] for f in json.loads(r.stdout)["files"]}


def row_count_bounds(dotted: dict, where: str) -> tuple[int, int]:
    r = cli(dotted, "show", dotted["table"], "--where", where, "-o", "json")
    assert r.exit_code == 0, r.output[-2000:]
    rc = json.loads(r.stdout)["row_count"]
    return rc.get("low", rc["value"]), rc.get("high", rc["value"])


def one_error_line(r) -> str:
    assert r.exit_code == 1, r.output[-2000:]
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in r.output, r.stderr[-2000:]
    return lines[0]


# ------------------------------------------------------------------ quoted dotted names (#28 item 4)
@pytest.mark.parametrize("where,sql", SPELLINGS)
def test_each_spelling_reaches_its_column_in_files_and_show(dotted: dict, where: str, sql: str) -> None:
    want = duckdb_files(dotted["root"], sql)
    assert want and want != set(dotted["paths"])  # the case tells the files apart
    assert files_kept(dotted, where) == want  # min/max prune exactly on this table
    low, high = row_count_bounds(dotted, where)
    assert low <= duckdb_count(dotted["root"], sql) <= high


def test_the_bound_names_are_the_statistics_names(dotted: dict) -> None:
    ts = dotted["ts"]
    top = ts.bind("\"s.x\" = 'dot1'")
    assert (top.term.name, top.term.path, str(top.term.type)) == ("s\\.x", ("s.x",), "string")
    assert ts.bind("`s.x` = 'dot1'") == top
    leaf = ts.bind('"s"."x" = 1')
    assert (leaf.term.name, leaf.term.path, str(leaf.term.type)) == ("s.x", ("s", "x"), "int64")
    assert ts.bind("s.x = 1") == leaf
    assert ts.bind(ex.predicate(("s.x",), "=", "dot1")) == top  # the API: a path tuple, or the stored name
    assert ts.bind(ex.predicate("s\\.x", "=", "dot1")) == top
    units = ts.bind('"qty.units" > 40')
    assert (units.term.name, units.term.path) == ("qty\\.units", ("qty.units",))
    assert str(top) == "\"s.x\" = 'dot1'" and str(leaf) == "s.x = 1"  # prints back as it parses


@pytest.mark.parametrize(
    "where,words",
    [
        ('"s.x" = 5', "the number 5 does not fit column '\"s.x\"' (string)"),
        ("s.x = 'dot1'", "'dot1' is not a value of column 's.x' (int64)"),
        ('"qty.unit" > 1', "unknown column '\"qty.unit\"' (a quoted name is one column"),
        ('"s"."z" = 1', "unknown column 's.z'"),
    ],
)
def test_a_wrong_column_or_value_is_one_line_naming_it(dotted: dict, where: str, words: str) -> None:
    for command in ("files", "show"):
        assert words in one_error_line(cli(dotted, command, dotted["table"], "--where", where))


# ------------------------------------------------------------------ long chains (#33 item 3)
LONG = [
    (" or ".join(["id = 1"] * 1500), "id = 1"),
    (" or ".join(f"id = {k * 7}" for k in range(1500)), "id % 7 = 0 and id < 10500"),
    (" and ".join(f"id != {k}" for k in range(30, 1530)), "id < 30"),
    (" or ".join(f"(\"s.x\" = 'dot{k % 6}' and s.x > {k})" for k in range(400)), None),  # 800 predicates
    ("not " * 199 + "(" + " or ".join(f'"qty.units" = {k}' for k in range(1500)) + ")", "false"),  # odd: NOT (every row)
]


@pytest.mark.parametrize("where,sql", LONG, ids=["same-or", "distinct-or", "and", "or-of-ands", "nots-over-or"])
def test_a_1500_term_chain_gets_the_right_answer_not_a_traceback(dotted: dict, where: str, sql: str | None) -> None:
    sql = sql or where  # the language is SQL here
    assert files_kept(dotted, where) >= duckdb_files(dotted["root"], sql)
    low, high = row_count_bounds(dotted, where)
    assert low <= duckdb_count(dotted["root"], sql) <= high


def test_chains_prune_files_as_their_terms_do(dotted: dict) -> None:
    where = " or ".join(f"s.x = {k}" for k in range(100, 1600))  # only files 1..5 hold 100..539
    assert files_kept(dotted, where) == duckdb_files(dotted["root"], where) == set(dotted["paths"][1:])
    where = " and ".join(f"s.x != {k}" for k in range(1000, 2500)) + " and id < 40"
    assert files_kept(dotted, where) == duckdb_files(dotted["root"], where) == {dotted["paths"][0]}


def test_the_limits_refuse_absurd_expressions_in_one_line(dotted: dict) -> None:
    too_many = " or ".join(["id = 1"] * (MAX_TERMS + 1))
    deep = "id = 0"
    for k in range(MAX_DEPTH + 50):  # AND / OR alternating: every level a level of the tree
        deep = f"id = {k} {'or' if k % 2 else 'and'} ({deep})"
    for command in ("files", "show"):
        assert f"too many predicates (more than {MAX_TERMS:,}" in one_error_line(cli(dotted, command, dotted["table"], "--where", too_many))
        assert "nests too deeply (more than" in one_error_line(cli(dotted, command, dotted["table"], "--where", deep))


def within(answer, count: int) -> bool:
    """Whether a row-count answer (stored: its value; estimated: its bounds) holds ``count``."""
    low = answer.value if answer.low is None else answer.low
    high = answer.value if answer.high is None else answer.high
    return low <= count <= high


def _left_deep(kind, terms):
    out = terms[0]
    for t in terms[1:]:
        out = kind(out, t)
    return out


def test_api_built_deep_trees_evaluate_or_fail_clearly(dotted: dict) -> None:
    ts, root = dotted["ts"], dotted["root"]
    ors = _left_deep(ex.Or, [ex.predicate("id", "=", k) for k in range(3000)])  # 3,000 nested Or
    assert set(ts.plan_files(ors).paths()) == duckdb_files(root, "id < 3000")
    assert within(ts.subset(ors).row_count(), duckdb_count(root, "id < 3000"))
    assert all(p.might_match for p in ts.prune_partitions(ors).partitions)
    nots = ex.predicate(("s.x",), "=", "dot3")
    for _ in range(10_000):  # an even number of NOTs: the predicate itself
        nots = ex.Not(nots)
    assert set(ts.plan_files(nots).paths()) == duckdb_files(root, "\"s.x\" = 'dot3'")
    assert ts.bind(nots) == ts.bind("\"s.x\" = 'dot3'")
    odd = ex.Not(nots)
    assert within(ts.subset(odd).row_count(), duckdb_count(root, "not \"s.x\" = 'dot3'"))
    alternating = ex.predicate("id", "=", 0)
    for k in range(3000):
        alternating = (ex.And if k % 2 else ex.Or)(alternating, ex.predicate("id", "=", k))
    with pytest.raises(ExpressionError, match=f"nests too deeply \\(more than {MAX_DEPTH} levels"):
        ts.plan_files(alternating)
    with pytest.raises(ExpressionError, match=f"too many predicates \\(more than {MAX_TERMS:,}"):
        ts.subset(ex.or_(*[ex.predicate("id", "=", k) for k in range(MAX_TERMS + 1)]))


# ------------------------------------------------------------------ numbers beyond float64 (#33 item 12)
def test_a_number_beyond_float64_is_an_error_naming_it(dotted: dict) -> None:
    for where in ("price > 1e400", "price < -1e400", "price in (1, 2e308)"):
        line = one_error_line(cli(dotted, "files", dotted["table"], "--where", where))
        assert "is out of range (beyond float64" in line and "at character" in line, line
    # inf written as such is a value of a float column
    assert files_kept(dotted, "price < inf") == duckdb_files(dotted["root"], "price < 'inf'::double")
