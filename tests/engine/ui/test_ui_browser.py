"""The UI in a real browser: Debian's headless Chromium driven by selenium against the session's
app (and the static report opened from a file, with no network)."""

from __future__ import annotations

import urllib.parse

import numpy as np
import pytest
import ui_testkit
from conftest import EVIL_COLUMN
from selenium.common.exceptions import NoAlertPresentException
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select, WebDriverWait

pytestmark = [pytest.mark.ray, pytest.mark.browser]


def number(text: str) -> int:
    """'3,000' or '167 (5.6%)' -> 3000 / 167."""
    return int(text.split("(")[0].strip().replace(",", ""))


def card(browser, column: str):
    """A column's card, scrolled to and fully loaded (a lazy card fetches its histogram and top values)."""
    selector = f'.ms-card[data-column="{column}"]'
    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", browser.find_element(By.CSS_SELECTOR, selector))
    WebDriverWait(browser, 30).until(lambda d: not d.find_elements(By.CSS_SELECTOR, f"{selector} .ms-lazy"))
    return browser.find_element(By.CSS_SELECTOR, selector)


def stat(card_el, key: str, other: bool = False) -> str:
    row = card_el.find_element(By.CSS_SELECTOR, f'tr[data-stat="{key}"]')
    return row.find_element(By.CSS_SELECTOR, "td.ms-other" if other else "td.ms-v").text


def no_alert(browser) -> None:
    with pytest.raises(NoAlertPresentException):
        browser.switch_to.alert.text  # noqa: B018


def test_table_list_shows_the_tables_and_their_rows(ui_store, ui_url, browser) -> None:
    from engine.lookup import open_statistics

    browser.get(ui_url + "/")
    rows = browser.find_elements(By.CSS_SELECTOR, "#tables tbody tr")
    shown = {r.get_attribute("data-table"): r for r in rows}
    assert set(shown) == {"sales", "wide", "evil", "damaged"}
    for name, row in shown.items():
        cells = row.find_elements(By.TAG_NAME, "td")
        assert number(cells[1].text) == open_statistics(ui_store.store, name).manifest["rows"]
        assert cells[6].text == "unknown"
    ui_testkit.screenshot(browser, "tables")


def test_a_card_shows_the_api_numbers_and_the_histogram_follows_the_counts(ui_store, ui_url, browser) -> None:
    from engine.lookup import open_statistics

    ts = open_statistics(ui_store.store, "sales")
    browser.get(f"{ui_url}/table/sales?bars=25")
    for column in ("quantity", "price", "city"):
        s = ts.column_statistics(column)
        el = card(browser, column)
        assert number(stat(el, "row_count")) == s["row_count"]
        assert number(stat(el, "null_count")) == s["null_count"]
        assert number(stat(el, "distinct_count")) == s["distinct_count"]
    el = card(browser, "quantity")
    s = ts.column_statistics("quantity")
    assert number(stat(el, "min")) == s["min"] and number(stat(el, "max")) == s["max"]
    # 25 bars, each the sum of its stored bins (numpy over the lookup's bins as the oracle)
    bars = el.find_elements(By.CSS_SELECTOR, "svg.ms-chart rect.ms-bar")
    assert len(bars) == 25
    counts = np.array(ts.histogram("quantity")["count"].to_pylist())
    expected = np.add.reduceat(counts, [i * len(counts) // 25 for i in range(25)])
    shown = np.array([int(b.get_attribute("data-count")) for b in bars])
    assert shown.tolist() == expected.tolist() and shown.sum() == s["row_count"] - s["null_count"]
    heights = np.array([float(b.get_attribute("height")) for b in bars])
    assert heights.max() == pytest.approx(120.0)
    np.testing.assert_allclose(heights, 120.0 * expected / expected.max(), atol=0.51)  # min height 0.5 for tiny counts
    rendered = np.array([b.rect["height"] for b in bars])  # the browser's layout follows the same ratios
    np.testing.assert_allclose(rendered / rendered.max(), heights / heights.max(), atol=0.02)
    # top values: bars as long as the counts say
    city = card(browser, "city")
    rows = city.find_elements(By.CSS_SELECTOR, "table.ms-topk tr[data-count]")
    top = ts.top_frequencies("city", 10)
    assert [int(r.get_attribute("data-count")) for r in rows] == top["frequency"].to_pylist()
    assert [r.find_element(By.CSS_SELECTOR, ".ms-val").text for r in rows] == top["value"].to_pylist()
    ui_testkit.screenshot(browser, "table", full_page=True)


def test_clicking_a_bar_zooms_into_its_bins(ui_store, ui_url, browser) -> None:
    from engine.lookup import open_statistics

    ts = open_statistics(ui_store.store, "sales")
    browser.get(f"{ui_url}/table/sales?bars=10")
    figure = card(browser, "price").find_element(By.CSS_SELECTOR, "figure.ms-hist")
    bar = figure.find_elements(By.CSS_SELECTOR, "rect.ms-bar")[0]
    start, stop = int(bar.get_attribute("data-start")), int(bar.get_attribute("data-stop"))
    assert (start, stop) == (0, 100)
    bar.click()
    wait = WebDriverWait(browser, 20)
    zoomed = wait.until(lambda d: card(d, "price").find_element(By.CSS_SELECTOR, 'figure.ms-hist[data-zoomed="true"]'))
    assert (zoomed.get_attribute("data-start"), zoomed.get_attribute("data-stop")) == ("0", "100")
    bars = zoomed.find_elements(By.CSS_SELECTOR, "rect.ms-bar")
    raw = ts.histogram("price", bins=(0, 100))["count"].to_pylist()
    assert [int(b.get_attribute("data-count")) for b in bars] == [sum(raw[i * 10 : (i + 1) * 10]) for i in range(10)]
    browser.execute_script("arguments[0].scrollIntoView()", card(browser, "price"))
    ui_testkit.screenshot(browser, "zoom")
    card(browser, "price").find_element(By.CSS_SELECTOR, "button.ms-reset").click()
    wait.until(lambda d: card(d, "price").find_element(By.CSS_SELECTOR, 'figure.ms-hist[data-zoomed="false"]'))


def test_partition_selector_and_time_travel(ui_store, ui_url, browser) -> None:
    from engine.lookup import open_statistics

    ts = open_statistics(ui_store.store, "sales")
    key = ts.partitions()[2].key
    browser.get(f"{ui_url}/table/sales")
    Select(browser.find_element(By.NAME, "partition")).select_by_value(key)  # submits the form
    WebDriverWait(browser, 20).until(lambda d: "partition=" in d.current_url)
    el = card(browser, "id")
    assert number(stat(el, "row_count", other=True)) == ts.column_statistics("id", key)["row_count"] == ts.partitions()[2].rows
    assert number(stat(el, "row_count")) == ui_store.second.rows
    assert len(el.find_elements(By.CSS_SELECTOR, "rect.ms-bar-other")) > 0
    ui_testkit.screenshot(browser, "partition", full_page=False)
    Select(browser.find_element(By.NAME, "at")).select_by_value("1")
    WebDriverWait(browser, 20).until(lambda d: "at=1" in d.current_url)
    # the old state had other partitions: the chosen one is gone -> a 404 naming it
    assert "404" in browser.title and key in browser.find_element(By.CSS_SELECTOR, ".ms-message").text
    browser.get(f"{ui_url}/table/sales?at=1")
    assert number(browser.find_element(By.ID, "rows").text) == ui_store.first.rows
    assert "time travel" in browser.find_element(By.CSS_SELECTOR, ".ms-facts").text


def test_searching_a_wide_table_finds_a_column(ui_url, browser) -> None:
    browser.get(f"{ui_url}/table/wide")
    assert "page 1 of" in browser.find_element(By.ID, "matched").text
    assert len(browser.find_elements(By.CSS_SELECTOR, ".ms-card")) == 20
    # the last card of the page is lazy: scrolled to, it loads its histogram or top values
    last = browser.find_elements(By.CSS_SELECTOR, ".ms-card")[-1].get_attribute("data-column")
    assert browser.find_elements(By.CSS_SELECTOR, f'.ms-card[data-column="{last}"] .ms-lazy')
    loaded = card(browser, last)
    assert loaded.find_elements(By.CSS_SELECTOR, "figure.ms-hist, .ms-top-values"), loaded.get_attribute("outerHTML")[-500:]
    box = browser.find_element(By.NAME, "q")
    box.send_keys("c0277", Keys.ENTER)
    WebDriverWait(browser, 20).until(lambda d: "q=c0277" in d.current_url)
    cards = browser.find_elements(By.CSS_SELECTOR, ".ms-card")
    assert [c.get_attribute("data-column") for c in cards] == ["c0277"]
    assert browser.find_element(By.ID, "matched").text.startswith("1 of 301 columns")
    ui_testkit.screenshot(browser, "search")


def test_html_in_a_column_name_is_shown_as_text(ui_url, browser) -> None:
    browser.get(f"{ui_url}/table/evil")
    el = card(browser, EVIL_COLUMN)
    assert el.find_element(By.CSS_SELECTOR, "h3.ms-col").text == EVIL_COLUMN
    values = [v.text for v in el.find_elements(By.CSS_SELECTOR, ".ms-topk .ms-val")]
    assert "<img src=x onerror=alert(2)>" in values and "<b>bold</b>" in values
    assert browser.find_elements(By.CSS_SELECTOR, "main script, main img, main b") == []
    no_alert(browser)
    assert stat(card(browser, "x"), "zero_count") == "4"  # a user-defined statistic
    ui_testkit.screenshot(browser, "escaping")


def test_a_damaged_file_shows_an_error_card(ui_store, ui_url, browser) -> None:
    browser.get(f"{ui_url}/table/damaged")
    error = card(browser, "price").find_element(By.CSS_SELECTOR, ".ms-error")
    assert "histogram" in error.text and ui_store.damaged_histograms_shown in error.text
    assert number(stat(card(browser, "price"), "row_count")) == 6
    assert card(browser, "city").find_elements(By.CSS_SELECTOR, ".ms-error") == []
    ui_testkit.screenshot(browser, "damaged")


def test_unknown_table_is_a_404_page(ui_url, browser) -> None:
    browser.get(f"{ui_url}/table/{urllib.parse.quote('no<such>table')}")
    assert browser.title.startswith("404")
    assert "no<such>table" in browser.find_element(By.CSS_SELECTOR, ".ms-message").text


def test_screenshots_are_not_blank(ui_url, browser) -> None:
    browser.get(f"{ui_url}/table/sales")
    png = ui_testkit.screenshot(browser, "sales").read_bytes()
    colours, dominant = ui_testkit.colour_stats(png)
    assert colours > 50 and dominant < 0.9, (colours, dominant)
    browser.get("about:blank")
    blank = ui_testkit.colour_stats(browser.get_screenshot_as_png())
    assert blank[0] <= 2  # the check does tell a blank page


def test_the_static_report_opens_without_network_and_shows_the_same_numbers(ui_store, browser, tmp_path) -> None:
    import re

    from click.testing import CliRunner

    from engine.cli.console import metastore
    from engine.lookup import open_statistics

    out = tmp_path / "sales.html"
    result = CliRunner().invoke(metastore, ["--store", ui_store.store, "preview", "sales", "--html", str(out), "--bars", "20"])
    assert result.exit_code == 0, result.output
    html = out.read_text()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", html)  # nothing to fetch
    assert "default-src 'none'" in html
    browser.get(out.as_uri())
    ts = open_statistics(ui_store.store, "sales")
    for column in ts.statistics_columns():
        s = ts.column_statistics(column)
        el = card(browser, column)
        assert number(stat(el, "row_count")) == s["row_count"]
        assert number(stat(el, "null_count")) == s["null_count"]
    bars = card(browser, "quantity").find_elements(By.CSS_SELECTOR, "svg.ms-chart rect.ms-bar")
    counts = np.array(ts.histogram("quantity")["count"].to_pylist())
    assert [int(b.get_attribute("data-count")) for b in bars] == np.add.reduceat(counts, [i * len(counts) // 20 for i in range(20)]).tolist()
    # its search box filters in the page
    browser.find_element(By.ID, "ms-filter").send_keys("price")
    visible = [c.get_attribute("data-column") for c in browser.find_elements(By.CSS_SELECTOR, ".ms-card") if c.is_displayed()]
    assert visible == ["price"]
    no_alert(browser)
    ui_testkit.screenshot(browser, "report")


def test_names_as_in_the_data_and_exact_values_in_the_app_and_the_report(ray_runtime, browser, tmp_path) -> None:  # noqa: ANN001
    """Issue #28: cards name columns as in the data (a struct leaf `s > x`), filter by those names,
    and show nanosecond timestamps and dates beyond year 9999 exactly, in the app and the report."""
    import json
    import urllib.request

    import pyarrow as pa
    import pyarrow.parquet as pq
    from click.testing import CliRunner

    from engine.api import analyze
    from engine.cli.console import metastore
    from engine.ui.app import UiServer

    (tmp_path / "names").mkdir()
    ts_ns = pa.array([1_704_067_200_000_000_001, 1_704_153_600_000_000_000], pa.timestamp("ns"))
    far = pa.array([-1_000_000, 3_000_000], pa.date32())
    pq.write_table(
        pa.table({"qty.units": [5, 7], "s": pa.array([{"x": 1}, {"x": 2}]), "s.x": ["a", "b"], "ts": ts_ns, "far": far}),
        tmp_path / "names" / "a.parquet",
    )
    store = str(tmp_path / "store")
    analyze(str(tmp_path / "names"), store=store, user_statistics=[])
    # the oracle: numpy's rendering of pyarrow's min/max (datetime_as_string writes ns as 9 digits)
    expected = {
        "ts": (np.datetime_as_string(np.datetime64(ts_ns[0].value, "ns")).replace("T", " "), "2024-01-02 00:00:00"),
        "far": ("-0768-02-04", np.datetime_as_string(np.datetime64(3_000_000, "D"))),
    }
    shown = ["qty.units", "s > x", "s.x", "ts", "far"]
    out = tmp_path / "names.html"
    assert CliRunner().invoke(metastore, ["--store", store, "preview", "names", "--html", str(out)]).exit_code == 0
    server = UiServer(store)
    url = server.start().rstrip("/")
    try:
        for page in (out.as_uri(), f"{url}/table/names"):
            browser.get(page)
            cards = browser.find_elements(By.CSS_SELECTOR, ".ms-card")
            assert [c.find_element(By.CSS_SELECTOR, "h3.ms-col").text for c in cards] == shown, page
            by_name = {c.get_attribute("data-name"): c for c in cards}
            for column, (lo, hi) in expected.items():
                assert (stat(by_name[column], "min"), stat(by_name[column], "max")) == (lo, hi), (page, column)
        browser.get(out.as_uri())  # the report's search box filters by the names shown
        browser.find_element(By.ID, "ms-filter").send_keys("s > x")
        assert [c.get_attribute("data-name") for c in browser.find_elements(By.CSS_SELECTOR, ".ms-card") if c.is_displayed()] == ["s > x"]
        with urllib.request.urlopen(f"{url}/api/tables/names/columns", timeout=60) as r:
            listed = json.loads(r.read())["columns"]
        assert [(c["name"], c["path"]) for c in listed] == [(n, n.split(" > ")) for n in shown]
        with urllib.request.urlopen(f"{url}/api/tables/names/card?column=qty.units", timeout=60) as r:
            assert json.loads(r.read())["name"] == "qty.units"
        # a zoom by value range on them: the values in the range (numpy reads the bounds) are counted
        for column, values, unit, lo, hi in (
            ("ts", ts_ns, "ns", "2024-01-01T00:00:00", "2024-01-01T12:00:00.000000001"),
            ("far", far, "D", "-0500-01-01", "12000-01-01"),
        ):
            ints = np.array(values.view(pa.int64() if unit == "ns" else pa.int32()).to_pylist())
            inside = int(((ints >= np.datetime64(lo, unit).astype(np.int64)) & (ints <= np.datetime64(hi, unit).astype(np.int64))).sum())
            query = urllib.parse.urlencode({"column": column, "lo": lo, "hi": hi})
            with urllib.request.urlopen(f"{url}/api/tables/names/histogram?{query}", timeout=60) as r:
                assert json.loads(r.read())["counted"] == inside == 1, column
    finally:
        server.stop()
    no_alert(browser)
