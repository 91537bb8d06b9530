"""Infinities as bars of their own: the statistics count -inf in the first bin and +inf in the last and
apart (``neginf_count``, ``posinf_count``), so a bar shows that exact count; a file written before
those counts has none of its own, so a bar shows the bounds what is stored gives (min/max, the end
bin, the exact percentiles); checked against numpy and DuckDB, through the page."""

from __future__ import annotations

import math
from collections.abc import Iterator
from types import SimpleNamespace

import duckdb
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from selenium.webdriver.common.by import By

from engine.stats.valuecounts import PERCENTILES, percentile_column
from engine.ui.specials import infinities


def _stats(x: np.ndarray, nulls: int = 0) -> dict[str, object]:
    """A statistics row as docs/FORMAT.md defines it (numpy: quantile ``method="lower"``)."""
    finite = x[~np.isnan(x)]
    out: dict[str, object] = {"row_count": len(x) + nulls, "null_count": nulls, "nan_count": int(np.isnan(x).sum()), "percentiles_exact": True}
    if len(finite):
        out["min"], out["max"] = float(finite.min()), float(finite.max())
        for p in PERCENTILES:
            out[percentile_column(p)] = float(np.quantile(finite, p, method="lower"))
    return out


@settings(max_examples=300, deadline=None)
@given(st.integers(0, 200), st.integers(0, 30), st.integers(0, 30), st.integers(0, 5), st.integers(0, 2**32 - 1))
def test_the_bounds_hold_the_true_counts(finite: int, pos: int, neg: int, nans: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = np.concatenate([rng.normal(size=finite), np.full(pos, np.inf), np.full(neg, -np.inf), np.full(nans, np.nan)])
    rng.shuffle(x)
    first = neg + int((x[np.isfinite(x)] < np.quantile(x[np.isfinite(x)], 0.1)).sum()) if finite else neg  # an end bin holds finite values too
    last = pos + (int(rng.integers(0, finite + 1)) if finite else 0)
    got = {s.kind: s for s in infinities(_stats(x), first, last)}
    assert set(got) == {k for k, n in (("-inf", neg), ("+inf", pos)) if n}
    for kind, true, end in (("-inf", neg, first), ("+inf", pos, last)):
        if true:
            s = got[kind]
            assert 1 <= s.low <= true <= s.high <= end, (kind, s, true)
    n = finite + pos + neg
    if pos and _stats(x)["p99"] == math.inf:  # p99 at +inf: the percentiles bound it from below
        assert got["+inf"].low >= n - (99 * (n - 1)) // 100
    if finite and neg == 0 and pos == 0:
        assert infinities(_stats(x), first, last) == ()


def test_without_exact_percentiles_or_an_end_bin_the_bounds_are_wide() -> None:
    s = {"row_count": 10, "null_count": 0, "min": -math.inf, "max": 3.0, "percentiles_exact": False, "p50": -math.inf}
    assert infinities(s, None, None)[0].low == 1 and infinities(s, None, None)[0].high == 10
    assert infinities(s, 4, None)[0].high == 4 and not infinities(s, 4, None)[0].exact


def test_stored_counts_are_shown_exactly() -> None:
    x = np.array([1.0, -np.inf, np.inf, np.inf, np.nan, 2.0, np.inf])
    s = _stats(x) | {"posinf_count": int(np.isposinf(x).sum()), "neginf_count": int(np.isneginf(x).sum())}
    got = {sp.kind: sp for sp in infinities(s, 5, 6)}
    assert (got["+inf"].low, got["+inf"].high, got["-inf"].low, got["-inf"].high) == (3, 3, 1, 1)
    assert got["+inf"].exact and "posinf_count" in got["+inf"].why
    # a zoom (no end bin) does not matter; a stored zero: no bar
    assert infinities(s, None, None) == infinities(s, 5, 6)
    assert [sp.kind for sp in infinities(s | {"neginf_count": 0}, 5, 6)] == ["+inf"]
    # without the counts (a file written before them): the bounds
    old = _stats(x) | {"percentiles_exact": False}
    assert (lambda sp: (sp.low, sp.high, sp.exact))({sp.kind: sp for sp in infinities(old, 5, 6)}["+inf"]) == (1, 6, False)


@pytest.fixture(scope="module")
def infinite(ray_runtime: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[SimpleNamespace]:
    """A table whose ``v`` holds +inf, -inf, NaN and nulls among normal values (``w``: finite only),
    analyzed, and the app over it."""
    from engine.api import analyze
    from engine.ui.app import UiServer

    base = tmp_path_factory.mktemp("ui-inf")
    data, store = base / "inf", str(base / "store")
    data.mkdir()
    con = duckdb.connect()
    con.execute(
        f"""COPY (SELECT CASE WHEN i % 29 = 0 THEN 'inf'::DOUBLE WHEN i % 37 = 0 THEN '-inf'::DOUBLE WHEN i % 41 = 0 THEN 'nan'::DOUBLE
                              WHEN i % 43 = 0 THEN NULL ELSE (hash(i) % 10000) / 100.0 END AS v,
                         (hash(i * 3) % 1000) / 10.0 AS w
                  FROM range(3000) t(i)) TO '{data}/part-0.parquet' (FORMAT parquet)"""
    )
    src = f"read_parquet('{data}/*.parquet')"
    pos, neg = con.execute(f"select count(*) filter (where v = 'inf'::double), count(*) filter (where v = '-inf'::double) from {src}").fetchone()
    values = np.array([r[0] for r in con.execute(f"select v from {src} where v is not null").fetchall()], dtype=np.float64)
    analyze(str(data), store=store, user_statistics=[])
    server = UiServer(store)
    url = server.start().rstrip("/")
    try:
        yield SimpleNamespace(store=store, url=url, pos=pos, neg=neg, values=values)
    finally:
        server.stop()


@pytest.mark.ray
@pytest.mark.browser
def test_the_page_draws_infinities_as_bars_of_duckdbs_counts(infinite, browser) -> None:
    from engine.lookup import open_statistics

    ts = open_statistics(infinite.store, "inf")
    h = ts.histogram("v")
    counts, lower, upper = h["count"].to_pylist(), h["lower"].to_pylist(), h["upper"].to_pylist()
    x = infinite.values[~np.isnan(infinite.values)]
    # what is stored: -inf counted in the first bin, +inf in the last (numpy over DuckDB's values)
    assert counts[0] == int((x < upper[0]).sum()) and counts[-1] == int((x >= lower[-1]).sum())
    browser.get(f"{infinite.url}/table/inf/column?column=v")
    figure = browser.find_element(By.CSS_SELECTOR, "figure.ms-hist")
    bars = {r.get_attribute("data-kind"): r for r in figure.find_elements(By.CSS_SELECTOR, "rect.ms-bar-inf")}
    assert set(bars) == {"-inf", "+inf"}
    for kind, true, end in (("-inf", infinite.neg, counts[0]), ("+inf", infinite.pos, counts[-1])):
        low, high = int(bars[kind].get_attribute("data-count")), int(bars[kind].get_attribute("data-high"))
        assert 1 <= low <= true <= high <= end, (kind, low, true, high, end)
        assert kind in bars[kind].get_attribute("textContent")
    # a fresh analyze stores the counts: each bar is numpy's count, exactly (no outline)
    s = ts.column_statistics("v")
    for kind, key, true in (("-inf", "neginf_count", int(np.isneginf(x).sum())), ("+inf", "posinf_count", int(np.isposinf(x).sum()))):
        assert s[key] == true
        assert int(bars[kind].get_attribute("data-count")) == int(bars[kind].get_attribute("data-high")) == true, kind
    assert not figure.find_elements(By.CSS_SELECTOR, "rect.ms-bar-inf-high")
    browser.get(f"{infinite.url}/table/inf/column?column=w")
    assert not browser.find_elements(By.CSS_SELECTOR, "rect.ms-bar-inf")


@pytest.mark.ray
@pytest.mark.browser
@pytest.mark.parametrize("width", (1400, 390))
def test_the_infinity_bars_fit_the_window(infinite, browser, width) -> None:
    from test_ui_pages import LAYOUT_PROBLEMS

    browser.set_window_size(width, 1000)
    try:
        for column in ("v", "w"):
            browser.get(f"{infinite.url}/table/inf/column?column={column}")
            assert browser.execute_script(LAYOUT_PROBLEMS) == [], (width, column)
        # the bars of -inf, the values and +inf side by side, in that order
        browser.get(f"{infinite.url}/table/inf/column?column=v")
        parts = ("svg.ms-special-left", "svg.ms-chart", ".ms-specials")
        left = [
            browser.execute_script("return arguments[0].getBoundingClientRect().left", browser.find_element(By.CSS_SELECTOR, f"figure.ms-hist {p}"))
            for p in parts
        ]
        assert left == sorted(left) and len(left) == 3
    finally:
        browser.set_window_size(1400, 1000)
