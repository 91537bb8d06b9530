"""Alerts in ``metastore show`` (JSON and text) on a table DuckDB wrote with one column crafted
per alert kind; the expected kinds derived from DuckDB's own numbers (docs/DIFF.md "Alerts")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import duckdb
import numpy as np
import pytest
from click.testing import CliRunner

from engine.cli.console import metastore
from engine.stats.alerts import AlertThresholds

pytestmark = pytest.mark.ray
TABLE = "crafted"
N = 1_000
COLUMNS = {
    "const_col": "7",
    "null_col": "NULL::INTEGER",
    "id": "i",
    "mostly_null": "CASE WHEN i < 600 THEN NULL ELSE i % 3 END",
    "with_nan": "CASE WHEN i % 10 = 0 THEN 'NaN'::DOUBLE ELSE (i % 7)::DOUBLE END",
    "with_inf": "CASE WHEN i = 0 THEN 'inf'::DOUBLE ELSE (i % 7)::DOUBLE END",
    "skewed": "round(-ln(1 - (i + 0.5) / 1000), 1)",
    "high_card": "'v' || (i % 200)",
    "imbalanced": "CASE WHEN i < 900 THEN 'a' ELSE 'b' || (i % 10) END",
    "plain": "(i % 100)::DOUBLE - 49.5",
}
EXPECTED = {
    "const_col": ["constant"], "null_col": ["all_null"], "id": ["unique"], "mostly_null": ["high_nulls"], "with_nan": ["nan"],
    "with_inf": ["infinite"], "skewed": ["skewed"], "high_card": ["high_cardinality"], "imbalanced": ["imbalanced"], "plain": [],
}  # fmt: skip


def run(*args: str) -> Any:
    return CliRunner().invoke(metastore, list(args))


@pytest.fixture(scope="module")
def crafted(ray_runtime: None, tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    base = tmp_path_factory.mktemp("alerts")
    (base / TABLE).mkdir()
    path = base / TABLE / "data.parquet"
    select = ", ".join(f"{expr} AS {name}" for name, expr in COLUMNS.items())
    duckdb.connect().execute(f"COPY (SELECT {select} FROM range({N}) t(i)) TO '{path}' (FORMAT parquet)")
    store = str(base / "store")
    result = run("--store", store, "analyze", str(base / TABLE))
    assert result.exit_code == 0, result.output
    return store, str(path)


def _oracle_kinds(path: str, column: str, t: AlertThresholds) -> list[str]:
    """The alerts DuckDB's numbers call for (the order of engine/stats/alerts.py's table)."""
    con = duckdb.connect()
    src = f"read_parquet('{path}')"
    typ = con.execute(f"select typeof({column}) from {src} limit 1").fetchone()[0]
    floating = typ in ("DOUBLE", "FLOAT")
    rows, nulls = con.execute(f"select count(*), count(*) - count({column}) from {src}").fetchone()
    if nulls == rows:
        return ["all_null"]
    nans = con.execute(f"select count(*) from {src} where isnan({column})").fetchone()[0] if floating else 0
    distinct = con.execute(f"select count(DISTINCT {column}) from {src} where {'not isnan(' + column + ')' if floating else 'true'}").fetchone()[0]
    values = rows - nulls - nans
    kinds = []
    if distinct == 1:
        kinds.append("constant")
    unique = distinct == values and values > 1  # a one-partition table: every distinct count is exact
    if unique:
        kinds.append("unique")
    if nulls / rows >= t.high_nulls:
        kinds.append("high_nulls")
    if nans:
        kinds.append("nan")
    if floating and con.execute(f"select count(*) from {src} where isinf({column})").fetchone()[0]:
        kinds.append("infinite")
    if typ != "VARCHAR":
        x = np.array([r[0] for r in con.execute(f"select {column}::DOUBLE from {src} where {column} is not null").fetchall()], float)
        x = np.sort(x[~np.isnan(x)])
        if np.isfinite(x).all() and x.std(ddof=1) > 0:
            median = x[int(0.5 * (len(x) - 1))]  # the stored p50: position floor(p (n - 1))
            if abs(3 * (x.mean() - median) / x.std(ddof=1)) >= t.skewed and distinct != 1:
                kinds.append("skewed")
    if typ == "VARCHAR" and distinct >= t.high_cardinality and not unique:
        kinds.append("high_cardinality")
    if not floating and distinct > 1:
        top = con.execute(f"select max(c) from (select count(*) c from {src} where {column} is not null group by {column})").fetchone()[0]
        if top / (rows - nulls) >= t.imbalanced:
            kinds.append("imbalanced")
    con.close()
    return kinds


def test_each_alert_on_its_column_and_no_other(crafted: tuple[str, str]) -> None:
    store, path = crafted
    result = run("--store", store, "show", TABLE, "--output", "json")
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    got = {c["column"]: [a["kind"] for a in c["alerts"]] for c in doc["columns"]}
    for column in COLUMNS:
        assert _oracle_kinds(path, column, AlertThresholds()) == EXPECTED[column], column
        assert got[column] == EXPECTED[column], (column, doc["columns"])
    assert all(a["detail"] for c in doc["columns"] for a in c["alerts"])
    assert doc["alerts"] == []  # a Parquet directory: no snapshot history, the state is fresh


def test_thresholds_on_the_command_line(crafted: tuple[str, str]) -> None:
    store, path = crafted
    t = AlertThresholds().with_settings({"high_nulls": "0.7", "imbalanced": "0.95", "high_cardinality": "500"})
    result = run("--store", store, "show", TABLE, "-o", "json", "--alert-threshold", "high_nulls=0.7",
                 "--alert-threshold", "imbalanced=0.95", "--alert-threshold", "high_cardinality=500",
                 "--alert-threshold", "stale_age_s=0")  # fmt: skip
    doc = json.loads(result.stdout)
    got = {c["column"]: [a["kind"] for a in c["alerts"]] for c in doc["columns"]}
    for column in ("mostly_null", "imbalanced", "high_card"):
        assert got[column] == _oracle_kinds(path, column, t) == [], column
    assert [a["kind"] for a in doc["alerts"]] == ["stale"]
    bad = run("--store", store, "show", TABLE, "--alert-threshold", "nope=1")
    assert bad.exit_code == 1 and bad.stderr.startswith("error: ") and bad.stderr.count("\n") == 1 and "nope" in bad.stderr


def test_alerts_in_text_and_column_details(crafted: tuple[str, str]) -> None:
    store, _ = crafted
    text = run("--store", store, "show", TABLE).stdout
    assert "alerts" in text and "id: unique" in text and "null_col: all_null" in text
    doc = json.loads(run("--store", store, "show", TABLE, "-c", "skewed", "-o", "json").stdout)
    assert [a["kind"] for a in doc["columns"][0]["alerts"]] == ["skewed"]
    from engine.lookup import open_statistics

    api = open_statistics(store, TABLE).alerts()
    assert {c: [a.kind for a in v] for c, v in api.items()} == EXPECTED


def test_stale_when_the_delta_table_moved_on(ray_runtime: None, tmp_path: Path) -> None:
    """A Delta table committed to after the analyze: ``stale`` with the count of new versions
    from the table's own log (deltalake's history), none before."""
    import pyarrow as pa
    from deltalake import DeltaTable, write_deltalake

    uri, store = str(tmp_path / "events"), str(tmp_path / "store")
    write_deltalake(uri, pa.table({"v": pa.array(range(100), pa.int64())}))
    assert run("--store", store, "analyze", uri).exit_code == 0
    assert json.loads(run("--store", store, "show", "events", "-o", "json").stdout)["alerts"] == []
    for _ in range(2):
        write_deltalake(uri, pa.table({"v": pa.array(range(10), pa.int64())}), mode="append")
    moved = DeltaTable(uri).version() - 0  # versions committed since the analyzed version 0
    doc = json.loads(run("--store", store, "show", "events", "-o", "json").stdout)
    assert [a["kind"] for a in doc["alerts"]] == ["stale"] and f"{moved:,} snapshots" in doc["alerts"][0]["detail"]
    assert run("--store", store, "show", "events", "--alert-threshold", "stale_snapshots=3", "-o", "json").stdout.count('"stale"') == 0
    assert "alerts" in run("--store", store, "show", "events").stdout


def test_alerts_on_the_html_cards(crafted: tuple[str, str], tmp_path: Path) -> None:
    """metastore preview --html: each card lists its column's alerts (the web app draws the same macro)."""
    import re

    store, _ = crafted
    out = tmp_path / "page.html"
    result = run("--store", store, "preview", TABLE, "--html", str(out))
    assert result.exit_code == 0, result.output
    html = out.read_text()
    for column, kinds in EXPECTED.items():
        card = re.search(rf'<section class="ms-card[^"]*" data-column="{column}"[^>]*>(.*?)</section>', html, re.S)
        assert card is not None, column
        assert re.findall(r'data-alert="([a-z_]+)"', card.group(1)) == kinds, column
