"""The conformance matrix: writers (writers.py) x types (each writer's columns) x commands (one
test function each, below). Every cell either equals the oracle (oracle.py: the format's own
reader, pyarrow.compute, DuckDB) or is a column the CLI reports as unsupported with a one-line
reason; never a traceback (conftest.Cli fails a cell on one). A new writer is one function in
writers.py; a new command is one test function here; docs/ARCHITECTURE.md, "Conformance".
"""

from __future__ import annotations

import html
import json
import urllib.parse
import urllib.request
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from engine import values
from engine.columns import column_path
from tests.conformance.oracle import duckdb_connection, leaves, reference, same_scalar
from tests.conformance.writers import WRITERS

pytestmark = pytest.mark.ray

ALL = pytest.mark.parametrize("writer", list(WRITERS))
NESTED = (pa.types.is_list, pa.types.is_large_list, pa.types.is_map, pa.types.is_fixed_size_list)


def _path_of(entry: dict[str, Any]) -> tuple[str, ...]:
    """A column of the CLI's JSON by its path (the ``path`` list where the answer gives one)."""
    if entry.get("path"):
        return tuple(entry["path"])
    return column_path(entry["column"])


def _columns(doc: dict[str, Any]) -> dict[tuple[str, ...], dict[str, Any]]:
    return {_path_of(c): c for c in doc["columns"]}


def _analyzed(lake, writer: str):
    a = lake.get(writer)
    assert a.exit_code == 0, f"analyze of {writer}'s table failed: {a.output}"
    return a


def _discrete_leaf(a) -> tuple[str, ...]:
    """A string column of the table (the frequency and UI cells ask for one)."""
    for path, column in leaves(a.data).items():
        if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
            return path
    return (a.written.numeric,)


@ALL
def test_analyze(lake, cli, writer: str) -> None:
    """analyze succeeds and the table's row count is the reader's."""
    a = _analyzed(lake, writer)
    doc = cli.json("show", writer)
    assert doc["rows"] == a.data.num_rows


@ALL
def test_show_json(lake, cli, writer: str) -> None:
    """show -o json: every leaf column's rows, nulls, NaN and exact distinct count equal the
    oracle's; min and max are there exactly when the oracle has them; unsupported columns
    (lists, maps) say why in one line."""
    a = _analyzed(lake, writer)
    ours = _columns(cli.json("show", writer))
    for path, column in leaves(a.data).items():
        assert path in ours, f"{writer}: column {path} missing from show: {sorted(ours)}"
        c, ref = ours[path], reference(column)
        if c["unsupported"]:
            assert any(f(column.type) for f in NESTED), f"{writer}.{path}: {c['unsupported']}"
            assert "\n" not in c["unsupported"]
            continue
        assert (c["rows"], c["nulls"]) == (ref.rows, ref.nulls), f"{writer}.{path}"
        assert (c["nans"] or 0) == (ref.nans or 0), f"{writer}.{path}"
        if c["distinct_exact"] and path[0] not in a.written.skip_oracle:
            assert c["distinct"] == ref.distinct, f"{writer}.{path}"
        assert (c["min"] is None) == (ref.min is None) and (c["max"] is None) == (ref.max is None), f"{writer}.{path}"


@ALL
def test_statistics_file(lake, writer: str) -> None:
    """The table's statistics.parquet: min and max, decoded from their lossless text forms,
    equal pyarrow.compute's over the reader's table."""
    from engine.files import layout
    from engine.lookup import open_statistics

    a = _analyzed(lake, writer)
    ts = open_statistics(lake.store, writer)
    rows = {column_path(r["column"]): r for r in pq.read_table(ts.file_uri(layout.STATISTICS_FILE)).to_pylist()}
    for path, column in leaves(a.data).items():
        ref, row = reference(column), rows[path]
        if row.get("unsupported") or ref.min is None or path[0] in a.written.skip_oracle:
            continue
        t = ts.column_type(row["column"])
        for key, want in (("min", ref.min), ("max", ref.max)):
            got = values.decode_scalar(row[key], t)
            assert same_scalar(got, want), f"{writer}.{path} {key}: ours {got} != {want}"


@ALL
def test_show_text(lake, cli, writer: str) -> None:
    """show (text): exit 0, no traceback, every short column name shown as in the data."""
    a = _analyzed(lake, writer)
    out = cli.run("show", writer).stdout
    for name in a.data.column_names:
        if len(name) <= 12:
            assert name in out, f"{writer}: {name!r} not in:\n{out}"


@ALL
def test_show_each_column(lake, cli, writer: str) -> None:
    """show -c for every column (details: statistics, top values, histogram): the complete top
    frequencies of a discrete column equal DuckDB's GROUP BY counts."""
    a = _analyzed(lake, writer)
    flat = leaves(a.data)
    args = []
    for path in flat:
        args += ["--column", _cli_name(path)]
    doc = cli.json("show", writer, *args, "--top", "5")
    got = _columns(doc)
    con, names = duckdb_connection(a.data)
    for path, c in got.items():
        top = c.get("top_frequencies")
        if not top or top.get("kind") != "complete" or not top["values"]:
            continue
        n = names[path]
        counts = [r[0] for r in con.execute(f"SELECT count(*) AS k FROM t WHERE {n} IS NOT NULL GROUP BY {n} ORDER BY k DESC LIMIT 5").fetchall()]
        assert [v["frequency"] for v in top["values"]] == counts, f"{writer}.{path}"


def _cli_name(path: tuple[str, ...]) -> str:
    from engine.columns import column_name

    return column_name(path)


def _subset_truth(a) -> tuple[Any, str, dict[tuple[str, ...], str], int]:
    """DuckDB over the oracle's table, the numeric column's DuckDB name, every column's, and
    the number of rows the ``--where`` cells' predicate matches."""
    con, names = duckdb_connection(a.data)
    n = names[(a.written.numeric,)]
    count = con.execute(f"SELECT count(*) FROM t WHERE {n} >= {a.written.threshold}").fetchone()[0]
    return con, n, names, count


def _contains(entry: dict[str, Any], truth: Any) -> bool:
    if entry["method"] in ("stored", "exact"):
        return entry["value"] == truth
    return entry["low"] <= truth <= entry["high"]


@ALL
def test_where_stored_or_estimated(lake, cli, writer: str) -> None:
    """show --where: the subset's row count is DuckDB's (stored) or its bounds hold it (estimated)."""
    a = _analyzed(lake, writer)
    _, _, _, count = _subset_truth(a)
    doc = cli.json("show", writer, "--where", a.written.where)
    assert _contains(doc["row_count"], count), doc["row_count"]


@ALL
def test_where_exact(lake, writer: str) -> None:
    """show --where --exact (a Ray job on the data): row count, and per column nulls, min and
    max of the subset, equal DuckDB's over the same rows."""
    from click.testing import CliRunner

    from engine.cli.console import metastore

    a = _analyzed(lake, writer)
    con, n, _, count = _subset_truth(a)
    w = a.written
    result = CliRunner().invoke(metastore, ["--store", lake.store, "-o", "json", "show", writer, "--where", w.where, "--exact", "-c", w.numeric])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.output)
    assert doc["row_count"]["value"] == count
    got = _columns(doc)[(w.numeric,)]["statistics"]
    lo, hi = con.execute(f"SELECT min({n}), max({n}) FROM t WHERE {n} >= {w.threshold}").fetchone()
    assert (got["min"]["value"], got["max"]["value"], got["null_count"]["value"]) == (lo, hi, 0)


@ALL
def test_files_where(lake, cli, writer: str) -> None:
    """files --where: every data file holding a matching row is kept; a pruned file holds none."""
    a = _analyzed(lake, writer)
    doc = cli.json("files", writer, "--where", a.written.where)
    kept = [f["path"] for f in doc["files"]]
    pruned = [f["path"] if isinstance(f, dict) else f for f in doc["pruned"]]
    assert kept or pruned
    w = a.written
    for path in pruned:
        column = pq.read_table(path.removeprefix("file://"), columns=[w.numeric])[w.numeric]
        assert not pc.any(pc.greater_equal(column, w.threshold)).as_py(), f"{writer}: pruned {path} holds matching rows"


@ALL
def test_quantiles_exact(lake, writer: str) -> None:
    """quantiles (exact, a distributed sort): p50 and p99 of n equal DuckDB's quantile_disc."""
    from click.testing import CliRunner

    from engine.cli.console import metastore

    a = _analyzed(lake, writer)
    con, n, _, _ = _subset_truth(a)
    result = CliRunner().invoke(metastore, ["--store", lake.store, "-o", "json", "quantiles", a.written.path, a.written.numeric, "-q", "0.5,0.99"])
    assert result.exit_code == 0, result.output
    got = [q["value"] for q in json.loads(result.output)["quantiles"]]
    want = list(con.execute(f"SELECT quantile_disc({n}, 0.5), quantile_disc({n}, 0.99) FROM t").fetchone())
    assert got == want


@ALL
def test_quantiles_approximate(lake, cli, writer: str) -> None:
    """quantiles --approximate (from the stored sketches): every answer lies within [min, max]
    and its rank is within the stated error of the exact rank."""
    a = _analyzed(lake, writer)
    doc = cli.json("quantiles", writer, a.written.numeric, "--approximate", "-q", "0.1,0.5,0.9")
    n = pc.drop_null(a.data[a.written.numeric]).to_numpy()
    for q in doc["quantiles"]:
        assert n.min() <= q["value"] <= n.max()
        rank = (n < q["value"]).sum() / len(n)
        assert abs(rank - q["p"]) <= q["rank_error"] + 1 / len(n) + 0.02, q


@ALL
def test_preview_html(lake, cli, writer: str, tmp_path) -> None:
    """preview --html: one page naming every column as in the data (HTML-escaped)."""
    a = _analyzed(lake, writer)
    out = tmp_path / f"{writer}.html"
    cli.run("preview", writer, "--html", str(out))
    page = html.unescape(out.read_text())
    for name in a.data.column_names:
        assert name in page, f"{writer}: {name!r}"


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=60) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


@ALL
def test_ui_pages(lake, ui_url: str, writer: str) -> None:
    """The web app: the table page, its JSON, and a card and histogram of a column answer 200."""
    a = _analyzed(lake, writer)
    t = urllib.parse.quote(writer)
    column = _cli_name(_discrete_leaf(a))
    for path in (f"/table/{t}", f"/api/tables/{t}", f"/api/tables/{t}/columns"):
        status, body = _get(ui_url + path)
        assert status == 200, (path, body[:300])
    for kind in ("card", "histogram"):
        for col in (column, a.written.numeric):
            status, body = _get(f"{ui_url}/api/tables/{t}/{kind}?" + urllib.parse.urlencode({"column": col}))
            assert status == 200 or (kind == "histogram" and status == 404), (kind, col, body[:300])


@ALL
def test_flight_requests(lake, flight_client, writer: str) -> None:
    """Each Flight request kind on the table: statistics (row count), top frequencies (DuckDB's
    counts), histogram (its counts sum to the non-null rows), partitions_matching and plan_files."""
    a = _analyzed(lake, writer)
    con, _, names, _ = _subset_truth(a)
    stats = flight_client.statistics(writer, columns=[a.written.numeric])
    assert stats.column("row_count").to_pylist() == [a.data.num_rows]
    path = _discrete_leaf(a)
    top = flight_client.top_frequencies(writer, _cli_name(path), k=3)
    want = [
        r[0]
        for r in con.execute(f"SELECT count(*) k FROM t WHERE {names[path]} IS NOT NULL GROUP BY {names[path]} ORDER BY k DESC LIMIT 3").fetchall()
    ]
    assert top.column("frequency").to_pylist() == want
    hist = flight_client.histogram(writer, a.written.numeric)
    assert sum(hist.column("count").to_pylist()) == pc.count(a.data[a.written.numeric]).as_py()
    flight_client.partitions_matching(writer, a.written.where)
    flight_client.plan_files(writer, a.written.where)
