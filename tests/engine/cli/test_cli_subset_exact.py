"""``metastore show TABLE --where PRED --exact`` (issue #28 item 3): on a table DuckDB wrote and the
CLI analyzed with its defaults (the shipped user statistics on), the computed subset equals
DuckDB over the same predicate; the table's own user statistics are computed whatever process
runs the job (loaded from the definitions its analyze recorded), one that cannot be loaded is
``unavailable`` with the reason while the rest is answered; a failed computation leaves no
entry behind, and an entry computed without a statistic is computed again once it can be."""

from __future__ import annotations

import json
import operator
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from click.testing import CliRunner

from engine.api import analyze, open_statistics
from engine.cli.console import metastore
from engine.stats.user import ZERO_COUNT, UserStatistic, register, unregister
from engine.subset import Method, methods_of

pytestmark = pytest.mark.ray

COLUMNS = ("id", "x", "city", "d")
#: (ours, DuckDB's) spelling of each predicate
WHERES = [
    ("id between 100 and 700 and city = 'b'", "id between 100 and 700 and city = 'b'"),
    ("x > 0.5 or city is null", "x > 0.5 or city is null"),
    ("d >= 2024-03-01 and x <= 0", "d >= DATE '2024-03-01' and x <= 0"),
]


def write_with_duckdb(root: Path) -> str:
    """Hive partitions written by DuckDB (nulls, zeros, dates); the glob DuckDB reads them back by."""
    con = duckdb.connect()
    con.execute(
        f"""
        COPY (
            SELECT i AS id,
                   CASE WHEN i % 11 = 0 THEN NULL WHEN i % 7 = 0 THEN 0.0 ELSE round(sin(i) * 3, 2) END AS x,
                   CASE WHEN i % 13 = 0 THEN NULL ELSE ['a', 'b', 'c', 'dd'][1 + i % 4] END AS city,
                   DATE '2024-01-01' + CAST(i % 120 AS INTEGER) AS d,
                   i % 3 AS part
            FROM range(3000) t(i)
        ) TO '{root}' (FORMAT parquet, PARTITION_BY (part))
        """
    )
    con.close()
    return f"{root}/**/*.parquet"


def oracle(glob: str, where: str, column: str) -> dict:
    """DuckDB's row count, null count, min, max and distinct count of ``column`` over the rows matching ``where``."""
    con = duckdb.connect()
    q = f'"{column}"'
    row = con.execute(
        f"SELECT count(*), count(*) - count({q}), min({q}), max({q}), count(DISTINCT {q}) "
        f"FROM read_parquet('{glob}', hive_partitioning = true) WHERE {where}"
    ).fetchone()
    con.close()
    return dict(zip(("row_count", "null_count", "min", "max", "distinct_count"), row))


def duck_count(glob: str, where: str, condition: str) -> int:
    con = duckdb.connect()
    n = con.execute(f"SELECT count(*) FROM read_parquet('{glob}', hive_partitioning = true) WHERE ({where}) AND ({condition})").fetchone()[0]
    con.close()
    return n


@pytest.fixture(scope="module")
def lake(ray_runtime, tmp_path_factory) -> tuple[str, str, str]:
    """(data directory, store, DuckDB glob): the table analyzed by the CLI with its defaults."""
    base = tmp_path_factory.mktemp("exact_cli")
    data, store = base / "events", base / "store"
    glob = write_with_duckdb(data)
    result = CliRunner().invoke(metastore, ["--store", str(store), "analyze", str(data), "--name", "events"])
    assert result.exit_code == 0, result.output
    return str(data), str(store), glob


def show(store: str, *args: str):
    return CliRunner().invoke(metastore, ["--store", store, "show", *args])


@pytest.mark.parametrize("where,sql", WHERES)
def test_exact_equals_duckdb_on_a_table_analyzed_with_the_cli_defaults(lake, where: str, sql: str) -> None:
    data, store, glob = lake
    ts = open_statistics(store, "events")
    assert {"zero_count", "top1_share"} <= set(ts.state.properties["user_statistics"])  # the defaults the issue names
    result = show(store, "events", "--where", where, "--exact", "-o", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["exact"] is True and doc["unavailable"] == []
    by_column = {c["column"]: c["statistics"] for c in doc["columns"]}
    for column in COLUMNS:
        want = oracle(glob, sql, column)
        got = by_column[column]
        assert doc["row_count"] == {"value": want["row_count"], "method": "computed"}
        assert got["row_count"] == {"value": want["row_count"], "method": "computed"}
        assert got["null_count"]["value"] == want["null_count"]
        if want["row_count"] > want["null_count"]:
            assert str(got["min"]["value"]) == str(want["min"]) and str(got["max"]["value"]) == str(want["max"]), column
            assert got["distinct_count"]["value"] == want["distinct_count"], column
        assert {e["method"] for e in got.values()} == {"computed"}
    # the text form runs too (one line per column, no note about missing statistics)
    text = show(store, "events", "--where", where, "--exact")
    assert text.exit_code == 0 and "not computed" not in text.output, text.output


def test_the_tables_user_statistics_are_computed_for_the_subset(lake) -> None:
    data, store, glob = lake
    where = WHERES[1][0]
    t = open_statistics(store, "events").statistics(["x", "city"], where=where, exact=True)
    m = methods_of(t)
    rows = {r["column"]: r for r in t.to_pylist()}
    assert rows["x"]["zero_count"] == duck_count(glob, where, "x = 0")
    assert m.of("x", "zero_count").method is Method.COMPUTED and m.of("city", "top1_share").method is Method.COMPUTED
    con = duckdb.connect()
    top = con.execute(
        f"SELECT max(c) / sum(c) FROM (SELECT count(*) c FROM read_parquet('{glob}', hive_partitioning = true) "
        f"WHERE ({where}) AND city IS NOT NULL GROUP BY city)"
    ).fetchone()[0]
    con.close()
    assert rows["city"]["top1_share"] == pytest.approx(top)  # few values: Misra-Gries is exact
    # one statistic asked by name: the row count is still answered (it was a KeyError)
    only = open_statistics(store, "events").statistics(["id"], statistics=["min"], where=where, exact=True)
    assert only.column_names == ["column", "min"]
    assert methods_of(only).of("*", "row_count").method is Method.COMPUTED


def _local_statistic(name: str) -> UserStatistic:
    """A statistic defined in a function: its definition has no module-level name, so analyze
    cannot record where it lives (the closure also makes Ray pickle it by value)."""

    def count_negative(arr: pa.Array) -> int:
        return int(pc.sum(pc.less(arr, 0)).as_py() or 0)

    return UserStatistic(name=name, compute=count_negative, merge=operator.add, result_type=pa.int64(), applies_to=pa.types.is_floating)


def test_a_statistic_this_process_cannot_load_is_unavailable_with_its_reason(lake, tmp_path) -> None:
    data, _, glob = lake
    store = str(tmp_path / "store")
    local = _local_statistic("negative_count")
    analyze(data, store=store, name="events", user_statistics=[ZERO_COUNT, local])
    where = "x < 1 and id < 2000"
    result = show(store, "events", "--where", where, "--exact", "-o", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert [u["statistic"] for u in doc["unavailable"]] == ["negative_count"]
    assert "not recorded" in doc["unavailable"][0]["reason"]
    x = next(c["statistics"] for c in doc["columns"] if c["column"] == "x")
    assert x["row_count"]["value"] == oracle(glob, where, "x")["row_count"]
    text = show(store, "events", "--where", where, "--exact")
    assert text.exit_code == 0 and "negative_count not computed" in text.output, text.output
    t = open_statistics(store, "events").statistics(["x"], where=where, exact=True)
    a = methods_of(t).of("x", "negative_count")
    assert a.method is Method.UNAVAILABLE and "not recorded" in a.reason and t.column("negative_count")[0].as_py() is None
    assert t.column("zero_count")[0].as_py() == duck_count(glob, where, "x = 0")
    # once this process can compute it, the entry computed without it is a miss: computed again, not failed
    register(local)
    try:
        t = open_statistics(store, "events").statistics(["x"], where=where, exact=True)
    finally:
        unregister(local.name)
    assert methods_of(t).of("x", "negative_count").method is Method.COMPUTED
    assert t.column("negative_count")[0].as_py() == duck_count(glob, where, "x < 0")


def test_a_failed_computation_is_not_cached(lake, tmp_path) -> None:
    data, _, glob = lake
    store, marker = tmp_path / "store", tmp_path / "fail"

    def compute(arr: pa.Array) -> int:
        if marker.exists():
            raise ValueError("refusing to count")
        return len(arr)

    failing = UserStatistic(name="failing_count", compute=compute, merge=operator.add, result_type=pa.int64())
    register(failing)
    try:
        analyze(data, store=str(store), name="events")
        marker.touch()
        where = "id < 50"
        result = show(str(store), "events", "--where", where, "--exact")
        assert result.exit_code != 0 and "Traceback" not in result.output, result.output
        assert len(result.output.strip().splitlines()) == 1, result.output
        subsets = store / "events" / "subsets"
        assert not subsets.exists() or not any(subsets.iterdir()), sorted(subsets.rglob("*"))
        marker.unlink()
        result = show(str(store), "events", "--where", where, "--exact", "-o", "json")
        assert result.exit_code == 0, result.output
        assert json.loads(result.output)["row_count"]["value"] == oracle(glob, where, "id")["row_count"]
    finally:
        unregister(failing.name)
