"""Predicates over Flight on a table pyarrow and pandas wrote (tests/dotted_names.py), DuckDB the
oracle: quoted dotted names bind as in the CLI and the API (#28 item 4); long AND/OR chains get
the right answer or a bad_request, never an internal error, and a seeded fuzz of long chains
(#33 item 3); a number beyond float64 is a bad_request (#33 item 12)."""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from pathlib import Path

import pyarrow.flight as flight
import pytest
from dotted_names import SPELLINGS, duckdb_count, duckdb_files, write_dotted_table
from flight_testkit import running_server

from engine.expressions.tree import MAX_TERMS
from engine.subset import methods_of

pytestmark = pytest.mark.ray


@pytest.fixture(scope="module")
def served(ray_runtime: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict]:
    from engine.api import analyze
    from engine.lookup import open_statistics
    from flight_server.client import MetastoreClient

    root = tmp_path_factory.mktemp("flight_dotted") / "dotted"
    paths = write_dotted_table(root)
    store = str(root.parent / "store")
    table = analyze(str(root), store=store, user_statistics=[]).table
    with running_server(store, poll_interval=0) as server, MetastoreClient(server.location, timeout=120) as client:
        yield {"root": root, "paths": paths, "table": table, "client": client, "ts": open_statistics(store, table)}


def planned(served: dict, where: str) -> set[str]:
    return set(served["client"].plan_files(served["table"], where).column("path").to_pylist())


def row_count_bounds(served: dict, where: str) -> tuple[int, int]:
    """The subset's row count (column id has no nulls): its bounds when estimated, else its value."""
    got = served["client"].statistics(served["table"], ["id"], where=where)
    value = got.column("row_count")[0].as_py()
    answer = methods_of(got).of("id", "row_count")
    return (value, value) if answer.low is None else (int(answer.low), int(answer.high))


def bad_request(call) -> str:
    with pytest.raises(flight.FlightServerError) as info:
        call()
    text = str(info.value).split(". Detail:")[0]
    assert json.loads(info.value.extra_info)["code"] == "bad_request", (text, info.value.extra_info)
    assert "\n" not in text and "Traceback" not in str(info.value) and "internal error" not in text, text
    return text


@pytest.mark.parametrize("where,sql", SPELLINGS)
def test_each_spelling_reaches_its_column(served: dict, where: str, sql: str) -> None:
    want = duckdb_files(served["root"], sql)
    assert planned(served, where) == want
    low, high = row_count_bounds(served, where)
    assert low <= duckdb_count(served["root"], sql) <= high
    # the API on the same store agrees
    assert set(served["ts"].plan_files(where).paths()) == want


def partitions_of(files: set[str]) -> set[str]:
    return {p for p in ("p=0", "p=1") if any(f"/{p}/" in f for f in files)}


def test_the_old_filter_object_names_columns_as_the_statistics_do(served: dict) -> None:
    c, table, root = served["client"], served["table"], served["root"]
    top = c.partitions_matching(table, "s\\.x", "==", "dot4")  # the stored name of the column named s.x
    assert set(top.column("partition").to_pylist()) == partitions_of(duckdb_files(root, "\"s.x\" = 'dot4'")) == {"p=1"}
    assert top.select(["min", "max"]).to_pylist() == [{"min": "dot3", "max": "dot5z"}]  # that column's statistics
    leaf = c.partitions_matching(table, "s.x", "==", 103)  # field x of struct s
    assert set(leaf.column("partition").to_pylist()) == partitions_of(duckdb_files(root, "s.x = 103")) == {"p=0"}
    assert leaf.select(["min", "max"]).to_pylist() == [{"min": "0", "max": "239"}]


LONG = [
    (" or ".join(["id = 1"] * 1500), "id = 1"),
    (" or ".join(f"s.x = {k}" for k in range(100, 1600)), None),
    (" and ".join(f"id != {k}" for k in range(30, 1530)), "id < 30"),
    ("not (" + " or ".join(f"\"s.x\" = 'dot{k % 6}'" for k in range(1500)) + ")", "false"),
]


@pytest.mark.parametrize("where,sql", LONG, ids=["same-or", "distinct-or", "and", "not-or"])
def test_a_1500_term_chain_is_answered(served: dict, where: str, sql: str | None) -> None:
    sql = sql or where
    assert planned(served, where) >= duckdb_files(served["root"], sql)
    low, high = row_count_bounds(served, where)
    assert low <= duckdb_count(served["root"], sql) <= high
    got = served["client"].partitions_matching(served["table"], where)
    assert set(got.column("partition").to_pylist()) >= partitions_of(duckdb_files(served["root"], sql))


def test_absurd_filters_are_bad_requests_naming_the_limit(served: dict) -> None:
    c, table = served["client"], served["table"]
    many = " or ".join(["p=1"] * (MAX_TERMS + 1))  # within Flight's 32 KiB, past the predicate limit
    assert len(many) < 32 * 1024
    assert f"too many predicates (more than {MAX_TERMS:,}" in bad_request(lambda: c.plan_files(table, many))
    assert f"too many predicates (more than {MAX_TERMS:,}" in bad_request(lambda: c.statistics(table, ["id"], where=many))
    deep = "(" * 300 + "id = 1" + ")" * 300
    assert "nests too deeply" in bad_request(lambda: c.partitions_matching(table, deep))
    assert "nests too deeply" in bad_request(lambda: c.statistics(table, ["id"], where="not " * 300 + "id = 1"))


def test_a_number_beyond_float64_is_a_bad_request(served: dict) -> None:
    c, table = served["client"], served["table"]
    for where in ("price > 1e400", "price between -1e309 and 0"):
        for call in (lambda: c.plan_files(table, where), lambda: c.statistics(table, ["price"], where=where)):
            assert "is out of range (beyond float64" in bad_request(call)
    # the same rule as a JSON number in the old filter object
    assert "is out of range (beyond float64)" in bad_request(
        lambda: c.get(b'{"v":1,"kind":"partitions_matching","table":"%s","filter":{"column":"price","op":">","value":1e400}}' % table.encode())
    )


# ------------------------------------------------------------------ fuzz: long chains
_TERMS = [
    ("id = {n}", "id = {n}"),
    ("id < {n}", "id < {n}"),
    ("\"s.x\" = 'dot{d}'", "\"s.x\" = 'dot{d}'"),
    ("s.x >= {m}", "s.x >= {m}"),
    ('"qty.units" != {d}', '"qty.units" != {d}'),
    ("price is null", "price is null"),
    ("id in ({n}, {m})", "id in ({n}, {m})"),
    ("true", "true"),
]


def _chain(rng: random.Random, depth: int = 0) -> tuple[str, str]:
    """A random predicate (ours, DuckDB's) of long chains: thousands of terms, nested a little."""
    n = rng.choice([1, 2, 50, 700, 1500, 2500]) if depth == 0 else rng.choice([1, 2, 5])
    parts = []
    for _ in range(n):
        if depth < 2 and rng.random() < 0.01:
            ours, sql = _chain(rng, depth + 1)
            parts.append((f"({ours})", f"({sql})"))
            continue
        ours, sql = rng.choice(_TERMS)
        values = {"n": rng.randrange(-5, 260), "m": rng.randrange(0, 700), "d": rng.randrange(0, 7)}
        parts.append((ours.format(**values), sql.format(**values)))
    op = rng.choice([" or ", " and "])
    ours, sql = op.join(p[0] for p in parts), op.join(p[1] for p in parts)
    if rng.random() < 0.2:
        k = rng.choice([1, 2, 150, 199])
        ours, sql = "not " * k + f"({ours})", "not " * k + f"({sql})"
    return ours, sql


def test_fuzz_long_chains_answer_right_or_refuse_cleanly(served: dict) -> None:
    rng = random.Random(20261202)
    outcomes = {"answered": 0, "refused": 0}
    for _ in range(16):
        ours, sql = _chain(rng)
        if len(ours) > 32 * 1024:
            assert "too long" in bad_request(lambda ours=ours: served["client"].plan_files(served["table"], ours))
            outcomes["refused"] += 1
            continue
        try:
            kept = planned(served, ours)
        except flight.FlightServerError as exc:
            assert json.loads(exc.extra_info)["code"] == "bad_request", str(exc)[:300]
            text = str(exc).split(". Detail:")[0]
            assert "too many predicates" in text or "nests too deeply" in text, text[:300]
            outcomes["refused"] += 1
            continue
        assert kept >= duckdb_files(served["root"], sql), ours[:300]
        low, high = row_count_bounds(served, ours)
        assert low <= duckdb_count(served["root"], sql) <= high, ours[:300]
        outcomes["answered"] += 1
    assert outcomes["answered"] >= 8, outcomes
    health = served["client"].health()
    assert health["status"] == "ok"


def test_paths_in_results_are_the_written_files(served: dict) -> None:
    assert {str(Path(p)) for p in served["paths"]} == planned(served, "true")
