"""The same cards everywhere: the notebook view and the static report against the app's card;
the CLI commands; the pure parts of the view model."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from engine.ui import viewmodel as vm

REPO = Path(__file__).resolve().parents[3]


def stats_table(html: str, column: str) -> str:
    """The statistics table of ``column``'s card in a page or fragment."""
    at = html.index(f'data-column="{column}"')
    start = html.index('<table class="ms-stats">', at)
    return html[start : html.index("</table>", start)]


# ---------------------------------------------------------------- the same cards
@pytest.mark.ray
def test_notebook_views_show_the_apps_cards(ui_store, ui_url) -> None:
    from engine.lookup import open_statistics

    ts = open_statistics(ui_store.store, "sales")
    page_html = ts._repr_html_()
    assert page_html.startswith('\n<div class="ms ms-notebook">') or '<div class="ms ms-notebook">' in page_html[:200]
    assert page_html.count('<section class="ms-card') == 13 and "<script" not in page_html
    with urllib.request.urlopen(f"{ui_url}/table/sales/card?column=price&partition=part%3D01", timeout=60) as r:
        app_card = r.read().decode()
    card = ts.card("price", partition="part=01")
    assert stats_table(card._repr_html_(), "price") == stats_table(app_card, "price")
    assert stats_table(page_html, "city") == stats_table(urllib.request.urlopen(f"{ui_url}/table/sales/card?column=city").read().decode(), "city")
    wide = open_statistics(ui_store.store, "wide")
    wide_html = wide._repr_html_()
    assert wide_html.count('<section class="ms-card') == 20 and "showing 20 of 301 columns" in wide_html
    chosen = wide.preview(columns=["c0299", "c0001"])
    assert [c.column for c in chosen.cards] == ["c0299", "c0001"]
    with pytest.raises(Exception, match="no column 'nope'"):
        wide.preview(columns=["nope"])


@pytest.mark.ray
def test_preview_cli_writes_one_self_contained_file(ui_store, tmp_path) -> None:
    from engine.cli.console import metastore

    out = tmp_path / "report.html"
    r = CliRunner().invoke(metastore, ["--store", ui_store.store, "preview", "sales", "--html", str(out), "-p", "part=01", "-c", "price,city"])
    assert r.exit_code == 0, r.output
    assert "wrote" in r.output and "2 column cards" in r.output
    html = out.read_text()
    assert html.count('<section class="ms-card') == 2 and "<style>" in html and "/static/" not in html
    assert oct(out.stat().st_mode & 0o777) != oct(0o600)
    assert [p.name for p in tmp_path.iterdir()] == ["report.html"]  # no temporary file left
    bad = CliRunner().invoke(metastore, ["--store", ui_store.store, "preview", "sales", "--html", str(tmp_path / "x.html"), "-c", "nope"])
    assert bad.exit_code == 1 and "error: table 'sales' has no column 'nope'" in bad.output
    assert not (tmp_path / "x.html").exists()
    bad = CliRunner().invoke(metastore, ["--store", ui_store.store, "preview", "nosuch", "--html", str(tmp_path / "x.html")])
    assert bad.exit_code == 1 and "nosuch" in bad.output and "tables in the store" in bad.output


@pytest.mark.ray
def test_ui_command_serves_the_store(ui_store) -> None:
    """``metastore ui --port 0`` in its own process: the URL it prints answers; Ctrl-C stops it."""
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen(
        [sys.executable, "-m", "engine", "--store", ui_store.store, "ui", "--port", "0"],
        stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env, cwd=str(REPO),
    )  # fmt: skip
    try:
        line = proc.stderr.readline()
        url = re.search(r"on (http://127\.0\.0\.1:\d+/)", line)
        assert url, line
        assert "4 tables" in line and "tokens off" in line
        with urllib.request.urlopen(url.group(1) + "api/tables", timeout=60) as r:
            assert {t["name"] for t in __import__("json").loads(r.read())["tables"]} == {"sales", "wide", "evil", "damaged"}
    finally:
        proc.send_signal(2)
        try:
            proc.wait(timeout=20)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 0  # Ctrl-C: a graceful stop
    assert "Traceback" not in proc.stderr.read()


def test_ui_command_refuses_a_public_address_without_tokens(tmp_path) -> None:
    from engine.cli.console import metastore

    start = time.monotonic()
    r = CliRunner().invoke(metastore, ["--store", str(tmp_path), "ui", "--host", "0.0.0.0", "--port", "0"], env={"METASTORE_FLIGHT_TOKEN": ""})
    assert r.exit_code == 1 and "not a loopback address: give --token" in r.output
    assert time.monotonic() - start < 30


# ---------------------------------------------------------------- pure parts
@given(st.lists(st.integers(min_value=0, max_value=10**12), min_size=1, max_size=300))
def test_bar_heights_follow_the_counts(counts: list[int]) -> None:
    geometry = vm.bar_geometry(counts)
    assert len(geometry) == len(counts)
    largest = max(counts)
    for c, (x, w, h) in zip(counts, geometry):
        assert 0 <= x and x + w <= vm.CHART_WIDTH + 1e-6
        if c == 0:
            assert h == 0
        else:
            assert h == pytest.approx(max(0.5, vm.CHART_HEIGHT * c / largest), abs=1e-3)
    xs = [g[0] for g in geometry]
    assert xs == sorted(xs)


@given(st.integers(min_value=0, max_value=5000), st.integers(min_value=1, max_value=300))
def test_display_groups_cover_the_bins_once(n: int, shown: int) -> None:
    groups = vm._groups(n, shown)
    assert len(groups) == min(n, shown)
    assert [i for a, b in groups for i in range(a, b)] == list(range(n))
    assert all(b > a for a, b in groups)


def test_column_search_matches_every_word_ignoring_case() -> None:
    names = ["Price", "price_eur", "unit price", "city", "<script>"]
    assert vm.search(names, "PRICE") == ["Price", "price_eur", "unit price"]
    assert vm.search(names, "price eur") == ["price_eur"]
    assert vm.search(names, "  ") == names
    assert vm.search(names, "<scr") == ["<script>"]


def test_table_urls_quote_names_and_keep_settings() -> None:
    from dataclasses import replace

    from engine.ui.render import table_url

    page = vm.TablePage(
        table="a b/<c>", store="s", rows=0, partitions=(), partition=None, partition_rows=None, at=None, txn_id=None,
        committed_at=None, snapshot="", job_id="", stale_by=None, history=(), query="", page=1, pages=1, page_size=20,
        matched=0, total_columns=0, columns=(), cards=(), bars=vm.DEFAULT_BARS, top=10,
    )  # fmt: skip
    assert table_url(page) == "/table/a%20b%2F%3Cc%3E"
    assert table_url(replace(page, partition="p=1&x", at=3), page=2) == "/table/a%20b%2F%3Cc%3E?partition=p%3D1%26x&at=3&page=2"
