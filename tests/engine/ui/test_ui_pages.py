"""The pages of issue #31 in a real browser: every page fits at 1400 and 390 px (no element wider
than the window, no number clipped, no console error; screenshots saved as test artifacts), the
overview table and the diff page against DuckDB over both versions of the data, the history page."""

from __future__ import annotations

import json
import re
import shutil
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import duckdb
import numpy as np
import pytest
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

pytestmark = [pytest.mark.ray, pytest.mark.browser]

WIDTHS = (1400, 390)
TABLE = "drift"

#: what does not fit, by the browser's own layout: the document wider than the window, an
#: element sticking out of the window (tables that scroll sideways inside their box excepted),
#: a number cell whose text is wider than the cell, an x-axis tick label outside its chart or over its neighbour
LAYOUT_PROBLEMS = """
var out = [], vw = document.documentElement.clientWidth;
if (document.documentElement.scrollWidth > vw) out.push(['page', document.documentElement.scrollWidth, vw]);
document.querySelectorAll('body *').forEach(function (el) {
  if (el.closest('.ms-scroll') || el.closest('svg') || el.closest('[hidden]')) return;
  var r = el.getBoundingClientRect();
  if (r.width > 0 && (r.right > vw + 1 || r.left < -1)) out.push(['wider than the window', el.tagName + '.' + el.className, Math.round(r.left), Math.round(r.right)]);
});
document.querySelectorAll('td.num, dd, .ms-edge, .ms-abbr').forEach(function (el) {
  if (el.scrollWidth > el.clientWidth + 1 && el.clientWidth > 0) out.push(['clipped', el.className, el.textContent.slice(0, 40), el.scrollWidth, el.clientWidth]);
});
document.querySelectorAll('svg.ms-xaxis').forEach(function (axis) {
  var box = (axis.closest('.ms-plot') || axis.parentElement).getBoundingClientRect(), prev = null;
  axis.querySelectorAll('text').forEach(function (t) {
    var r = t.getBoundingClientRect();
    if (r.left < box.left - 1 || r.right > box.right + 1) out.push(['tick label outside its chart', t.firstChild.textContent, Math.round(r.left), Math.round(r.right)]);
    if (prev && r.left < prev.right + 2) out.push(['tick labels overlap', t.firstChild.textContent, Math.round(r.left), Math.round(prev.right)]);
    prev = r;
  });
});
return out.slice(0, 10);
"""


@pytest.fixture(scope="module")
def artifacts(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The screenshots of this module: under pytest's base temporary folder, not in the repository."""
    return tmp_path_factory.mktemp("ui-artifacts")


def _write(path: Path, seed: int, shift: int) -> None:
    con = duckdb.connect()
    path.mkdir(parents=True, exist_ok=True)
    con.execute(
        f"""COPY (SELECT CASE WHEN i = 0 THEN 0 WHEN i = 1 THEN 999 ELSE (hash(i + {seed}) % (1000 - {shift}))::BIGINT + {shift} END AS k,
                         CASE WHEN i % 17 = 0 THEN NULL ELSE (hash(i * 7 + {seed}) % 10000) / 100.0 + {shift} END AS x,
                         ['Oslo', 'Rome', 'Lima'][1 + (i % (2 + {1 if shift else 0}))] AS city
                  FROM range(4000) t(i)) TO '{path}/part-0.parquet' (FORMAT parquet)"""
    )


def _oracle(path: Path) -> dict[str, object]:
    con = duckdb.connect()
    src = f"read_parquet('{path}/*.parquet')"
    out: dict[str, object] = {}
    for c in ("k", "x"):
        rows, nulls, lo, hi, mean = con.execute(f"select count(*), count(*) - count({c}), min({c}), max({c}), avg({c}) from {src}").fetchone()
        out[c] = {"rows": rows, "nulls": nulls, "min": lo, "max": hi, "mean": mean}
    out["k_values"] = np.array([r[0] for r in con.execute(f"select k from {src}").fetchall()], dtype=np.int64)
    return out


@pytest.fixture(scope="module")
def versions(ray_runtime: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimpleNamespace]:
    """Two analyzed versions of one table (``k`` shifted up, ``city`` gains a value) and the app over them."""
    from engine.api import analyze
    from engine.ui.app import UiServer

    base = tmp_path_factory.mktemp("ui-drift")
    data, store = base / TABLE, str(base / "store")
    _write(data, 1, 0)
    v1 = _oracle(data)
    analyze(str(data), store=store, user_statistics=[])
    shutil.rmtree(data)
    _write(data, 2, 300)
    v2 = _oracle(data)
    analyze(str(data), store=store, user_statistics=[])
    server = UiServer(store)
    url = server.start().rstrip("/")
    try:
        yield SimpleNamespace(store=store, url=url, v1=v1, v2=v2)
    finally:
        server.stop()


def _pages(ui_store: SimpleNamespace) -> list[str]:
    from engine.lookup import open_statistics

    key = open_statistics(ui_store.store, "sales").partitions()[0].key
    return [
        "/",
        "/table/sales",
        "/table/sales?" + urllib.parse.urlencode({"partition": key}),
        "/table/sales/column?column=price",
        "/table/sales/history",
        "/table/sales/history?column=price",
        "/table/sales/diff",
        "/table/wide",
        "/table/evil",
        "/table/damaged",
    ]


@pytest.mark.parametrize("width", WIDTHS)
def test_every_page_fits_the_window_without_clipped_numbers_or_console_errors(ui_store, ui_url, versions, browser, artifacts, width) -> None:
    from engine.ui.viewmodel import EAGER_CARDS

    browser.set_window_size(width, 1000)
    try:
        pages = [ui_url + p for p in _pages(ui_store)] + [versions.url + f"/table/{TABLE}/diff", versions.url + f"/table/{TABLE}"]
        browser.get_log("browser")  # drop what earlier tests logged
        for i, url in enumerate(pages):
            browser.get(url)
            assert not browser.title.startswith(("4", "5")), (url, browser.title)
            for k in range(EAGER_CARDS + 2):  # a few lazy cards loaded too (a loaded card replaces its element)
                browser.execute_script("var c = document.querySelectorAll('.ms-card')[arguments[0]]; if (c) c.scrollIntoView()", k)
            WebDriverWait(browser, 30).until(lambda d: not d.find_elements(By.CSS_SELECTOR, ".ms-lazy[data-loading]"))
            assert browser.execute_script(LAYOUT_PROBLEMS) == [], (width, url)
            errors = [e for e in browser.get_log("browser") if e["level"] == "SEVERE"]
            assert errors == [], (url, errors)
            browser.execute_script("window.scrollTo(0, 0)")
            browser.save_screenshot(str(artifacts / f"page{i:02d}-{width}.png"))
    finally:
        browser.set_window_size(1400, 1000)


def test_the_favicon_and_a_card_url_opened_in_a_tab_is_the_styled_column_page(ui_url, browser) -> None:
    with urllib.request.urlopen(ui_url + "/favicon.ico", timeout=30) as r:
        assert r.headers["content-type"].startswith("image/svg+xml") and b"<svg" in r.read()
    browser.get(ui_url + "/table/sales/card?column=price")
    assert "/table/sales/column?column=price" in browser.current_url
    assert browser.find_element(By.CSS_SELECTOR, "link[rel=icon]").get_attribute("href").endswith("/favicon.ico")
    card = browser.find_element(By.CSS_SELECTOR, '.ms-card[data-column="price"]')
    assert card.value_of_css_property("border-top-style") == "solid"  # the stylesheet applies
    assert card.find_elements(By.CSS_SELECTOR, "figure.ms-hist rect.ms-bar")


def test_the_overview_is_duckdbs_summary_and_sorts(versions, browser) -> None:
    browser.get(f"{versions.url}/table/{TABLE}")
    rows = {r.get_attribute("data-column"): r for r in browser.find_elements(By.CSS_SELECTOR, "#overview tbody tr")}
    assert list(rows) == ["k", "x", "city"]
    for c in ("k", "x"):
        want = versions.v2[c]

        def cell(stat: str, c: str = c) -> str:
            return rows[c].find_element(By.CSS_SELECTOR, f'td[data-stat="{stat}"]').get_attribute("data-sort")

        assert float(cell("rows")) == want["rows"] and float(cell("nulls")) == want["nulls"]
        assert float(cell("min")) == pytest.approx(float(want["min"])) and float(cell("max")) == pytest.approx(float(want["max"]))
        assert float(cell("mean")) == pytest.approx(float(want["mean"]), rel=1e-9)
    # a click on "max" sorts descending by it (numbers, missing last), another ascending
    heads = browser.find_elements(By.CSS_SELECTOR, "#overview thead th")
    head = next(h for h in heads if h.text.strip().lower().startswith("max"))
    head.click()
    order = [r.get_attribute("data-column") for r in browser.find_elements(By.CSS_SELECTOR, "#overview tbody tr")]
    assert order == ["k", "x", "city"] and versions.v2["k"]["max"] > versions.v2["x"]["max"]
    head.click()
    order = [r.get_attribute("data-column") for r in browser.find_elements(By.CSS_SELECTOR, "#overview tbody tr")]
    assert order == ["x", "k", "city"]


def _counts_on(values: np.ndarray, lowers: list[int], uppers: list[int]) -> np.ndarray:
    """How many of ``values`` fall in each inclusive integer bin (numpy)."""
    s = np.sort(values)
    return np.searchsorted(s, np.array(uppers), side="right") - np.searchsorted(s, np.array(lowers), side="left")


def test_the_diff_page_shows_ks_and_psi_of_duckdbs_histograms(versions, browser, artifacts) -> None:
    from engine.lookup import open_statistics

    browser.get(f"{versions.url}/table/{TABLE}/diff")
    rows = browser.find_elements(By.CSS_SELECTOR, ".ms-diff-table tbody tr")
    ks = [r.get_attribute("data-column") for r in rows]
    shown = {r.get_attribute("data-column"): r.find_element(By.CSS_SELECTOR, "td[data-ks]").get_attribute("data-ks") for r in rows}
    values = [float(shown[c]) for c in ks if shown[c]]
    assert values == sorted(values, reverse=True)  # sorted by KS, largest first
    # k: the stored bins of both states (the ends 0 and 999 in both: the bins did not move);
    # the oracle counts DuckDB's values of each version in them
    h = open_statistics(versions.store, TABLE, at_transaction=2).histogram("k")
    lowers, uppers = h["lower"].to_pylist(), h["upper"].to_pylist()
    ca, cb = _counts_on(versions.v1["k_values"], lowers, uppers), _counts_on(versions.v2["k_values"], lowers, uppers)
    want_ks = float(np.abs(np.cumsum(ca) / ca.sum() - np.cumsum(cb) / cb.sum()).max())
    assert float(shown["k"]) == pytest.approx(want_ks, abs=1e-12) and want_ks > 0.2
    # PSI (docs/DIFF.md): the baseline's deciles as groups, shares floored at 1e-4
    before = (np.cumsum(ca) - ca) / ca.sum()
    groups = np.minimum((before * 10).astype(int), 9)
    p = np.maximum(np.bincount(groups, weights=ca, minlength=10) / ca.sum(), 1e-4)
    q = np.maximum(np.bincount(groups, weights=cb, minlength=10) / cb.sum(), 1e-4)
    psi_cell = next(r for r in rows if r.get_attribute("data-column") == "k").find_element(By.CSS_SELECTOR, 'td[data-cell="psi"]').text
    assert float(psi_cell) == pytest.approx(float(np.sum((q - p) * np.log(q / p))), abs=5e-5)
    # the overlaid histograms count each version's non-null values
    k_row = next(r for r in rows if r.get_attribute("data-column") == "k")
    titles = [t.get_attribute("textContent") for t in k_row.find_elements(By.CSS_SELECTOR, "svg.ms-overlay title")]
    assert titles == [f"from: {len(versions.v1['k_values']):,} values", f"to: {len(versions.v2['k_values']):,} values"]
    # the rows and nulls of both sides are DuckDB's
    x_row = next(r for r in rows if r.get_attribute("data-column") == "x")
    a, b = versions.v1["x"]["nulls"], versions.v2["x"]["nulls"]
    assert x_row.find_element(By.CSS_SELECTOR, 'td[data-cell="nulls"]').text == (f"{a:,}" if a == b else f"{a:,} → {b:,}")
    browser.save_screenshot(str(artifacts / "diff.png"))


def test_the_history_page_draws_every_state_and_links_to_the_diff(versions, browser) -> None:
    browser.get(f"{versions.url}/table/{TABLE}/history?column=x")
    states = browser.find_elements(By.CSS_SELECTOR, "#states tbody tr")
    assert [s.get_attribute("data-txn") for s in states] == ["2", "1"]
    points = browser.find_elements(By.CSS_SELECTOR, 'figure[data-series="null_count"] circle')
    assert [p.get_attribute("textContent").split(": ")[-1] for p in points] == [f"{versions.v1['x']['nulls']:,}", f"{versions.v2['x']['nulls']:,}"]
    means = [
        float(p.get_attribute("textContent").split(": ")[-1].replace(",", ""))
        for p in browser.find_elements(By.CSS_SELECTOR, 'figure[data-series="mean"] circle')
    ]
    np.testing.assert_allclose(means, [versions.v1["x"]["mean"], versions.v2["x"]["mean"]], rtol=1e-5)
    browser.find_element(By.CSS_SELECTOR, "form[action$='/diff'] button").click()
    WebDriverWait(browser, 30).until(lambda d: "/diff?" in d.current_url)
    assert "from=1" in browser.current_url and "to=2" in browser.current_url
    assert browser.find_elements(By.CSS_SELECTOR, ".ms-diff-table tbody tr")


def test_big_counts_are_abbreviated_with_the_exact_value_in_the_tooltip() -> None:
    from engine.ui.render import abbreviated, fit

    assert str(abbreviated(688_123_456)) == '<span class="ms-abbr" title="688,123,456">688M</span>'
    assert str(fit("1,234,567 (12.3%)")) == '<span class="ms-abbr" title="1,234,567 (12.3%)">1.2M (12.3%)</span>'
    assert abbreviated(9_999) == "9,999" and fit("3.5") == "3.5"
    assert json.loads(json.dumps(str(abbreviated(999_999_999)))).endswith(">1B</span>")


def test_a_histogram_has_a_count_axis_the_data_ends_a_log_scale_and_a_nan_bar(ui_store, ui_url, browser) -> None:
    from engine.lookup import open_statistics

    ts = open_statistics(ui_store.store, "sales")
    s = ts.column_statistics("price")
    browser.get(f"{ui_url}/table/sales/column?column=price&bars=25")
    figure = browser.find_element(By.CSS_SELECTOR, "figure.ms-hist")
    bars = figure.find_elements(By.CSS_SELECTOR, "svg.ms-chart rect.ms-bar")
    counts = np.array([int(b.get_attribute("data-count")) for b in bars])
    stored = np.array(ts.histogram("price")["count"].to_pylist())
    assert counts.tolist() == np.add.reduceat(stored, [i * len(stored) // 25 for i in range(25)]).tolist()
    ticks = figure.find_elements(By.CSS_SELECTOR, ".ms-yaxis .ms-ytick")
    assert int(ticks[0].text.replace(",", "")) == counts.max() and ticks[-1].text == "0"  # the largest bar is below 10,000: exact
    edges = figure.find_elements(By.CSS_SELECTOR, "figcaption .ms-edge")
    assert (float(edges[0].text.replace(",", "")), float(edges[-1].text.replace(",", ""))) == pytest.approx((s["min"], s["max"]), rel=1e-5)
    figure.find_element(By.CSS_SELECTOR, "button.ms-log").click()
    heights = np.array([float(b.get_attribute("height")) for b in figure.find_elements(By.CSS_SELECTOR, "svg.ms-chart rect.ms-bar")])
    want = np.where(counts > 0, np.maximum(0.5, 120 * np.log1p(counts) / np.log1p(counts.max())), 0)
    np.testing.assert_allclose(heights, want, atol=1e-3)
    nan = figure.find_elements(By.CSS_SELECTOR, "rect.ms-bar-nan")
    assert [int(r.get_attribute("data-count")) for r in nan] == ([s["nan_count"]] if s.get("nan_count") else [])
    figure.find_element(By.CSS_SELECTOR, "button.ms-log").click()  # back to linear
    heights = np.array([float(b.get_attribute("height")) for b in figure.find_elements(By.CSS_SELECTOR, "svg.ms-chart rect.ms-bar")])
    np.testing.assert_allclose(heights, np.where(counts > 0, np.maximum(0.5, 120 * counts / counts.max()), 0), atol=1e-3)


def test_the_quantile_view_draws_the_stored_percentiles(ui_store, ui_url, browser) -> None:
    from engine.lookup import open_statistics
    from engine.stats.valuecounts import PERCENTILES, percentile_column

    s = open_statistics(ui_store.store, "sales").column_statistics("price")
    browser.get(f"{ui_url}/table/sales/column?column=price")
    points = browser.find_elements(By.CSS_SELECTOR, ".ms-quantiles svg circle")
    shown = [float(p.get_attribute("textContent").split(": ")[1].replace(",", "")) for p in points]
    assert shown == pytest.approx([s[percentile_column(p)] for p in PERCENTILES], rel=1e-5)
    xs = [float(p.get_attribute("cx")) for p in points]
    np.testing.assert_allclose(xs, [6 + 348 * p for p in PERCENTILES], atol=0.01)  # placed at their quantile
    ys = [float(p.get_attribute("cy")) for p in points]
    assert ys == sorted(ys, reverse=True)  # a higher quantile is never lower


def test_the_value_axis_has_round_ticks_inside_the_data_under_their_bars(ui_store, ui_url, browser) -> None:
    from engine.lookup import open_statistics

    ts = open_statistics(ui_store.store, "sales")
    s = ts.column_statistics("price")
    stored = ts.histogram("price")
    lower, upper = np.array(stored["lower"].to_pylist()), np.array(stored["upper"].to_pylist())
    for width in WIDTHS:
        browser.set_window_size(width, 1000)
        try:
            browser.get(f"{ui_url}/table/sales/column?column=price&bars=25")
            figure = browser.find_element(By.CSS_SELECTOR, "figure.ms-hist")
            texts = figure.find_elements(By.CSS_SELECTOR, "svg.ms-xaxis text")
            values = np.array([float(browser.execute_script("return arguments[0].firstChild.textContent", t).replace(",", "")) for t in texts])
            assert 3 <= len(values) <= 8 and np.all(np.diff(values) > 0) and values[0] >= s["min"] and values[-1] <= s["max"]
            step = np.diff(values)
            np.testing.assert_allclose(step, step[0])
            exp = np.floor(np.log10(step[0]))
            assert round(step[0] / 10**exp, 9) in (1, 2, 5) and np.allclose(values / step[0], np.round(values / step[0]))
            # each tick stands over the bar whose stored bins hold its value
            bars = figure.find_elements(By.CSS_SELECTOR, "svg.ms-chart rect.ms-bar")
            marks = figure.find_elements(By.CSS_SELECTOR, "svg.ms-xaxis line")
            for m, v in zip(marks, values):
                x = float(m.get_attribute("x1").rstrip("%")) / 100 * 360
                bar = next(
                    b for b in bars if float(b.get_attribute("x")) - 1 <= x <= float(b.get_attribute("x")) + float(b.get_attribute("width")) + 1
                )
                first, stop = int(bar.get_attribute("data-start")), int(bar.get_attribute("data-stop"))
                assert lower[first] - 1e-9 <= v <= upper[stop - 1] + 1e-9, (v, first, stop)
            assert browser.execute_script(LAYOUT_PROBLEMS) == []
        finally:
            browser.set_window_size(1400, 1000)


def test_a_wide_overview_comes_in_part_and_fills_itself_in(ui_store, ui_url, browser) -> None:
    from engine.lookup import open_statistics
    from engine.ui.overview import EAGER_ROWS
    from engine.ui.viewmodel import column_names

    columns = column_names(open_statistics(ui_store.store, "wide"))
    assert len(columns) > EAGER_ROWS

    with urllib.request.urlopen(ui_url + "/table/wide", timeout=60) as r:
        html = r.read().decode()
    first = html[html.index('id="overview"') :]
    assert first[: first.index("</table>")].count("<tr data-column=") == EAGER_ROWS  # the page brings the first rows
    with urllib.request.urlopen(ui_url + "/table/wide/overview?" + urllib.parse.urlencode({"q": "c029", "offset": 3}), timeout=60) as r:
        rest = r.read().decode()
    assert rest.count("<tr data-column=") == 10 - 3  # c0290 … c0299 matched, from the fourth on
    browser.get(ui_url + "/table/wide")
    WebDriverWait(browser, 60).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#overview tbody tr")) == len(columns))
    names = [r.get_attribute("data-column") for r in browser.find_elements(By.CSS_SELECTOR, "#overview tbody tr")]
    assert names == columns  # every column, in table order, once
    head = next(h for h in browser.find_elements(By.CSS_SELECTOR, "#overview thead th") if h.text.strip().lower().startswith("max"))
    head.click()  # sorts every row, not only the first ones
    keys = browser.execute_script(
        "return Array.prototype.map.call(document.querySelectorAll('#overview tbody tr td[data-stat=\"max\"]'), function (c) { return c.getAttribute('data-sort'); })"
    )
    # as the page's script reads a key (JavaScript's parseFloat: a number's prefix, else missing: last)
    parsed = [float(m.group(0)) if (m := re.match(r"\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?", k or "")) else None for k in keys]
    numbers = [x for x in parsed if x is not None]
    assert len(keys) == len(columns) and numbers == sorted(numbers, reverse=True) and parsed[: len(numbers)] == numbers
