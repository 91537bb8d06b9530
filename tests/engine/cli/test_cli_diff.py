"""``metastore diff`` and ``history`` rows through the CLI on tables pandas and DuckDB wrote,
checked against DuckDB and numpy over each version's raw data (docs/DIFF.md)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import duckdb
import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from engine.cli.console import metastore

pytestmark = pytest.mark.ray
TABLE = "events"
COLUMNS = ("x", "k", "city")


def run(*args: str) -> Any:
    return CliRunner().invoke(metastore, list(args))


def doc(*args: str) -> dict[str, Any]:
    result = run(*args, "--output", "json")
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


def _write(root: Path, day: int, shift: int, rng: np.random.Generator) -> None:
    n = 3_000
    k = rng.integers(250 * shift, 1000, n)
    k[:2] = [0, 999]  # every partition holds the ends: the table's k bins never move
    x = rng.normal(10 + 3 * shift, 2, n)
    x[: 40 * (day % 3)] = np.nan  # pandas writes NaN of a float column as null
    cities = ["Berlin", "Paris", "Rome", "Oslo"] if not shift else ["Berlin", "Paris", "Lima"]
    city = rng.choice(cities, n, p=None)
    (root / f"day={day}").mkdir(parents=True, exist_ok=True)
    pd.DataFrame({"x": x, "k": k, "city": city}).to_parquet(root / f"day={day}" / "part-0.parquet", index=False)


def _oracle(root: Path) -> dict[str, Any]:
    """Per column rows, nulls, min, max by DuckDB, the raw values of k and the city counts."""
    con = duckdb.connect()
    src = f"read_parquet('{root}/*/*.parquet', hive_partitioning = true)"
    out: dict[str, Any] = {}
    for c in COLUMNS:
        rows, nulls, lo, hi = con.execute(f"select count(*), count(*) - count({c}), min({c}), max({c}) from {src}").fetchone()
        out[c] = {"rows": rows, "nulls": nulls, "min": lo, "max": hi}
    out["k_values"] = np.array([r[0] for r in con.execute(f"select k from {src}").fetchall()], dtype=np.int64)
    out["city_counts"] = dict(con.execute(f"select city, count(*) from {src} group by city").fetchall())
    out["partitions"] = dict(con.execute(f"select 'day=' || day, count(*) from {src} group by day").fetchall())
    return out


@pytest.fixture(scope="module")
def versions(ray_runtime: None, tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    """Three states: v1 days 1-3; v2 day 1 removed and day 4 appended with shifted values;
    v3 day 5 appended (one partition, an append)."""
    rng = np.random.default_rng(7)
    base = tmp_path_factory.mktemp("diff")
    root, store = base / TABLE, str(base / "store")
    for d in (1, 2, 3):
        _write(root, d, 0, rng)
    v1 = _oracle(root)
    assert run("--store", store, "analyze", str(root)).exit_code == 0
    shutil.rmtree(root / "day=1")
    _write(root, 4, 1, rng)
    v2 = _oracle(root)
    assert run("--store", store, "analyze", str(root)).exit_code == 0
    _write(root, 5, 1, rng)
    v3 = _oracle(root)
    assert run("--store", store, "analyze", str(root)).exit_code == 0
    return SimpleNamespace(store=store, root=root, v1=v1, v2=v2, v3=v3)


def _ks_at_edges(a: np.ndarray, b: np.ndarray, uppers: list[int]) -> float:
    """max |CDF_a - CDF_b| at the integer bins' inclusive upper edges, by numpy from the raw values."""
    edges = np.array(uppers, dtype=np.int64)
    fa = np.searchsorted(np.sort(a), edges, side="right") / len(a)
    fb = np.searchsorted(np.sort(b), edges, side="right") / len(b)
    return float(np.abs(fa - fb).max())


def test_diff_from_to_statistics_are_duckdbs(versions: SimpleNamespace) -> None:
    d = doc("--store", versions.store, "diff", TABLE, "--from", "1", "--to", "2")
    assert d["from"]["txn_id"] == 1 and d["to"]["txn_id"] == 2
    by = {c["column"]: c for c in d["columns"]}
    for c in COLUMNS:
        for side, oracle in (("from", versions.v1), ("to", versions.v2)):
            got = by[c][side]
            want = oracle[c]
            assert (got["rows"], got["nulls"]) == (want["rows"], want["nulls"]), (c, side)
            if c == "x":
                assert got["min"] == pytest.approx(want["min"], rel=0, abs=0) and got["max"] == want["max"]
            else:
                assert (got["min"], got["max"]) == (want["min"], want["max"]), (c, side)
    assert d["rows"] == {"from": 9_000, "to": 9_000, "change": 0}


def test_diff_ks_of_a_column_whose_bins_did_not_move_is_numpys(versions: SimpleNamespace) -> None:
    from engine.lookup import open_statistics

    d = doc("--store", versions.store, "diff", TABLE, "--from", "1", "--to", "2", "--column", "k")
    k = d["columns"][0]
    assert k["drift"]["method"] == "histogram" and k["drift"]["ks_exact"] is True
    ts = open_statistics(versions.store, TABLE, at_transaction=2)
    ups = ts.histogram("k").column("upper").to_pylist()
    assert open_statistics(versions.store, TABLE, at_transaction=1).histogram("k").column("upper").to_pylist() == ups
    want = _ks_at_edges(versions.v1["k_values"], versions.v2["k_values"], ups)
    assert want > 0.05  # the shift is visible
    assert k["drift"]["ks"] == pytest.approx(want, abs=1e-12)
    assert k["drift"]["psi"] > 0.01


def test_diff_discrete_column_from_frequencies(versions: SimpleNamespace) -> None:
    d = doc("--store", versions.store, "diff", TABLE, "--from", "1", "--to", "2", "-c", "city", "--top", "5")
    city = d["columns"][0]
    assert city["drift"]["method"] == "frequencies"
    a, b = versions.v1["city_counts"], versions.v2["city_counts"]
    values = sorted(set(a) | set(b))
    ca, cb = np.array([a.get(v, 0) for v in values], float), np.array([b.get(v, 0) for v in values], float)
    assert city["drift"]["ks"] == pytest.approx(np.abs(np.cumsum(ca) / ca.sum() - np.cumsum(cb) / cb.sum()).max(), abs=1e-12)
    top = city["drift"]["top_values"]
    assert [g["value"] for g in top["gained"]] == ["Lima"] and top["gained"][0]["to_count"] == b["Lima"]
    assert sorted(r["value"] for r in top["lost"]) == []  # Rome and Oslo stay in days 2 and 3


def test_diff_partitions_added_removed_with_rows(versions: SimpleNamespace) -> None:
    d = doc("--store", versions.store, "diff", TABLE, "--from", "1", "--to", "2")
    p = d["partitions"]
    assert p["added"] == [{"key": "day=4", "rows": versions.v2["partitions"]["day=4"]}]
    assert p["removed"] == [{"key": "day=1", "rows": versions.v1["partitions"]["day=1"]}]
    assert p["changed"] == []


def test_diff_defaults_to_the_previous_and_the_newest_state(versions: SimpleNamespace) -> None:
    d = doc("--store", versions.store, "diff", TABLE)
    assert (d["from"]["txn_id"], d["to"]["txn_id"]) == (2, 3)
    assert d["partitions"]["added"] == [{"key": "day=5", "rows": 3_000}] and d["partitions"]["removed"] == []
    assert d["rows"]["change"] == 3_000
    d = doc("--store", versions.store, "diff", TABLE, "--to", "2")
    assert (d["from"]["txn_id"], d["to"]["txn_id"]) == (1, 2)
    text = run("--store", versions.store, "diff", TABLE)
    assert text.exit_code == 0 and "day=5 (3,000 rows)" in text.stdout and "KS" in text.stdout


def test_diff_partition_against_partition_and_the_table(versions: SimpleNamespace) -> None:
    d = doc("--store", versions.store, "diff", TABLE, "--from-partition", "day=2", "--to-partition", "day=4", "-c", "k")
    assert d["from"]["partition"] == "day=2" and d["to"]["partition"] == "day=4" and d["partitions"] is None
    assert d["columns"][0]["from"]["rows"] == 3_000 and d["columns"][0]["drift"]["ks"] > 0.1
    same = doc("--store", versions.store, "diff", TABLE, "--from-partition", "day=2", "--to-partition", "day=2")
    assert all(c["drift"]["ks"] == 0.0 and c["drift"]["psi"] == 0.0 and not c["changed"] for c in same["columns"])
    d = doc("--store", versions.store, "diff", TABLE, "--from-partition", "day=5")
    assert d["from"]["partition"] == "day=5" and d["to"]["partition"] is None and d["to"]["rows"] == 12_000
    by = {c["column"]: c for c in d["columns"]}
    con = duckdb.connect()
    src = f"read_parquet('{versions.root}/*/*.parquet', hive_partitioning = true)"
    lo, hi = con.execute(f"select min(k), max(k) from {src} where day = 5").fetchone()
    assert (by["k"]["from"]["min"], by["k"]["from"]["max"]) == (lo, hi)
    con.close()


def test_diff_errors_are_one_line(versions: SimpleNamespace, tmp_path: Path) -> None:
    for args in (["--from", "1", "--to", "9"], ["--from-partition", "day=9"], ["-c", "nosuch"]):
        result = run("--store", versions.store, "diff", TABLE, *args)
        assert result.exit_code == 1, (args, result.output)
        assert result.stderr.startswith("error: ") and result.stderr.count("\n") == 1 and "Traceback" not in result.output


def test_api_diff_matches_the_cli(versions: SimpleNamespace) -> None:
    from engine.lookup import open_statistics

    a = open_statistics(versions.store, TABLE, at_transaction=1)
    b = open_statistics(versions.store, TABLE, at_transaction=2)
    result = a.diff(b)
    assert (
        result.column("k").drift.ks
        == doc("--store", versions.store, "diff", TABLE, "--from", "1", "--to", "2", "-c", "k")["columns"][0]["drift"]["ks"]
    )
    assert json.loads(json.dumps(result.to_json()))["partitions"]["added"][0]["key"] == "day=4"


def test_history_rows_added_and_removed(versions: SimpleNamespace) -> None:
    h = doc("--store", versions.store, "history", TABLE)
    rows = {r["txn_id"]: r for r in h["transactions"]}
    assert (rows[1]["partitions_new"], rows[1]["rows_added"], rows[1]["rows_removed"]) == (3, 9_000, 0)
    assert (rows[2]["partitions_new"], rows[2]["partitions_gone"], rows[2]["partitions_changed"]) == (1, 1, 0)
    assert (rows[2]["rows_added"], rows[2]["rows_removed"], rows[2]["rows"]) == (3_000, 3_000, 9_000)
    # a one-partition append: one new partition, its rows; the others named again are not counted
    assert (rows[3]["partitions_new"], rows[3]["partitions_changed"], rows[3]["rows_added"], rows[3]["rows_removed"]) == (1, 0, 3_000, 0)
    assert rows[3]["partitions_added"] >= 1  # the actions' count stays in JSON
    text = run("--store", versions.store, "history", TABLE).stdout
    assert "+1 ~0 -0" in text and "+3,000 -0" in text


@pytest.fixture(scope="module")
def schema_change(ray_runtime: None, tmp_path_factory: pytest.TempPathFactory) -> SimpleNamespace:
    """A flat table DuckDB wrote twice: column b dropped, c added, a kept, e all null then filled."""
    base = tmp_path_factory.mktemp("diff_schema")
    root, store = base / "flat", str(base / "store")
    root.mkdir()
    path = root / "data.parquet"
    duckdb.connect().execute(f"COPY (SELECT i AS a, i % 7 AS b, NULL::DOUBLE AS e FROM range(500) t(i)) TO '{path}' (FORMAT parquet)")
    assert run("--store", store, "analyze", str(root)).exit_code == 0
    duckdb.connect().execute(f"COPY (SELECT i AS a, 'x' || (i % 3) AS c, i / 2 AS e FROM range(700) t(i)) TO '{path}' (FORMAT parquet)")
    assert run("--store", store, "analyze", str(root)).exit_code == 0
    return SimpleNamespace(store=store, path=str(path))


def test_diff_columns_added_and_removed(schema_change: SimpleNamespace) -> None:
    d = doc("--store", schema_change.store, "diff", "flat")
    assert d["columns_added"] == [{"column": "c", "type": "string"}]
    assert d["columns_removed"] == [{"column": "b", "type": "int64"}]
    by = {c["column"]: c for c in d["columns"]}
    assert set(by) == {"a", "e"}
    rows, lo, hi = duckdb.connect().execute(f"select count(*), min(a), max(a) from read_parquet('{schema_change.path}')").fetchone()
    assert (by["a"]["to"]["rows"], by["a"]["to"]["min"], by["a"]["to"]["max"]) == (rows, lo, hi) and by["a"]["from"]["max"] == 499
    # e had no values before: no histogram to compare, one line saying why, no error
    assert by["e"]["from"]["nulls"] == 500 and by["e"]["to"]["nulls"] == 0
    assert by["e"]["drift"]["ks"] is None and by["e"]["drift"]["note"]
    assert d["partitions"]["changed"] == [{"key": d["partitions"]["changed"][0]["key"], "from_rows": 500, "to_rows": 700}]
    text = run("--store", schema_change.store, "diff", "flat").stdout
    assert "columns added: c (string)" in text and "columns removed: b (int64)" in text


def test_diff_html_page(versions: SimpleNamespace, tmp_path: Path) -> None:
    """--html: one self-contained page; each column's KS is the JSON's, the partitions listed."""
    import re

    out = tmp_path / "diff.html"
    result = run("--store", versions.store, "diff", TABLE, "--from", "1", "--to", "2", "--html", str(out))
    assert result.exit_code == 0 and str(out) in result.stdout
    html = out.read_text()
    assert "<link" not in html and "<script src" not in html  # nothing loaded from elsewhere
    d = doc("--store", versions.store, "diff", TABLE, "--from", "1", "--to", "2")
    for c in d["columns"]:
        row = re.search(rf'<tr data-column="{c["column"]}"[^>]*>(.*?)</tr>', html, re.S)
        assert row is not None, c["column"]
        ks = re.search(r'data-ks="([^"]*)"', row.group(1)).group(1)
        assert float(ks) == pytest.approx(c["drift"]["ks"], abs=1e-12)
    assert 'data-partition="day=4" data-change="added"' in html and 'data-partition="day=1" data-change="removed"' in html
