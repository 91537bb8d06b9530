#!/usr/bin/env python
"""Preview page render times (metastore ui, issue #19): server time of a table page.

Two tables, analyzed once: the 13-column sample table (``--rows`` rows in ``--partitions``
partitions) and a 1,000-column wide table (``--wide-rows`` rows, one partition).
Measured in this process (server time: the view model's lookups + the Jinja2 render,
no HTTP), and once through the app over loopback HTTP (uvicorn, for the end-to-end figure):

- sales page warm: the page as the app sends it: the first 6 cards drawn (statistics, top-10
  values, a 50-bar histogram each), the other 7 with their statistics and a placeholder;
- "... all cards": that page plus the card fragments its script then loads (every card drawn);
- sales page with a partition beside the table, warm;
- wide first page (20 cards) cold (lookup caches cleared, the files reopened) and warm;
- wide column search (a query matching one column), warm;
- the peer: the same lookups the page makes, without the view model and templates
  (the floor; the ratio page / lookups is what rendering costs on top);
- the static report (``metastore preview --html``) of each table.

Targets (issue #19): the 13-column page under 200 ms warm, the 1,000-column first page under 300 ms.

Usage: python bench/bench_ui.py [--rows 200000] [--partitions 8] [--wide-rows 10000] [--repeat 30] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def _stats(samples: list[float]) -> dict[str, float]:
    s = sorted(samples)
    return {"p50_ms": statistics.median(s) * 1e3, "p90_ms": s[min(len(s) - 1, int(0.9 * len(s)))] * 1e3, "n": len(s)}


def _time(fn, repeat: int, before=None) -> dict[str, float]:
    out = []
    for _ in range(repeat):
        if before is not None:
            before()
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return _stats(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--wide-rows", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    from engine import lookup
    from engine.api import analyze, open_statistics
    from engine.runtime.ray_runtime import ensure_ray, shutdown_ray
    from engine.sample import generate_table, generate_wide_table
    from engine.ui import render
    from engine.ui import viewmodel as vm
    from engine.ui.app import UiServer

    work = Path(tempfile.mkdtemp(prefix="metastore-bench-ui-"))
    try:
        store = str(work / "store")
        generate_table(str(work / "sales"), rows=args.rows, partitions=args.partitions, seed=0)
        generate_wide_table(str(work / "wide"), columns=1000, rows=args.wide_rows, partitions=1, seed=0)
        ensure_ray()
        analyze(str(work / "sales"), store=store)
        analyze(str(work / "wide"), store=store, user_statistics=[])
        shutdown_ray()

        sales = open_statistics(store, "sales")
        wide = open_statistics(store, "wide")
        key = sales.partitions()[len(sales.partitions()) // 2].key

        def page(ts, **kw):  # noqa: ANN001, ANN003, ANN202
            """The page as the app sends it (the first EAGER_CARDS cards drawn, the others lazy)."""
            return render.table_page(vm.table_page(ts, eager=vm.EAGER_CARDS, **kw))

        def page_and_cards(ts, **kw):  # noqa: ANN001, ANN003, ANN202
            """The page, then each lazy card's fragment (what the browser fetches when scrolled to)."""
            p = vm.table_page(ts, eager=vm.EAGER_CARDS, **kw)
            render.table_page(p)
            for c in p.cards:
                if c.lazy:
                    render.card(vm.column_card(ts, c.column, kw.get("partition")))

        def lookups_only(ts, columns, partition=None):
            """The page's reads, nothing else: one statistics lookup, then each column's top-10 and bins."""
            rows = ts.statistics(list(columns)).to_pylist()
            if partition is not None:
                ts.statistics(list(columns), partition)
            for r in rows:
                if r["frequencies"] is not None:
                    ts.top_frequencies(r["column"], 10, typed=True)
                if r["histogram_bins"]:
                    ts.histogram(r["column"])
                    if partition is not None:
                        ts.histogram(r["column"], partition)

        def reopen_wide():
            lookup.clear_cache()
            nonlocal wide
            wide = open_statistics(store, "wide")

        sales_cols = vm.column_names(sales)
        wide_first = vm.column_names(wide)[: vm.PAGE_SIZE]
        page(sales)  # templates compiled, footers cached
        r: dict[str, object] = {
            "tables": {"sales": {"rows": args.rows, "partitions": args.partitions, "columns": len(sales_cols)},
                       "wide": {"rows": args.wide_rows, "columns": len(vm.column_names(wide))}},
            "sales_page_warm": _time(lambda: page(sales), args.repeat),
            "sales_page_all_cards_warm": _time(lambda: page_and_cards(sales), args.repeat),
            "sales_page_lookups_only_warm": _time(lambda: lookups_only(sales, sales_cols), args.repeat),
            "sales_page_with_partition_warm": _time(lambda: page(sales, partition=key), args.repeat),
            "sales_page_with_partition_lookups_only_warm": _time(lambda: lookups_only(sales, sales_cols, key), args.repeat),
        }  # fmt: skip
        r["wide_first_page_cold"] = _time(lambda: page(wide), max(5, args.repeat // 3), before=reopen_wide)
        r["wide_first_page_all_cards_cold"] = _time(lambda: page_and_cards(wide), max(5, args.repeat // 3), before=reopen_wide)
        r["wide_first_page_lookups_only_cold"] = _time(lambda: lookups_only(wide, wide_first), max(5, args.repeat // 3), before=reopen_wide)
        page(wide)
        r["wide_first_page_warm"] = _time(lambda: page(wide), args.repeat)
        r["wide_first_page_all_cards_warm"] = _time(lambda: page_and_cards(wide), args.repeat)
        r["wide_first_page_lookups_only_warm"] = _time(lambda: lookups_only(wide, wide_first), args.repeat)
        r["wide_search_warm"] = _time(lambda: page(wide, query="c0777"), args.repeat)

        def report(ts):
            names = vm.column_names(ts)
            p = vm.table_page(ts, page_size=0, cards=False)
            from dataclasses import replace

            return render.report(replace(p, cards=tuple(vm.column_cards(ts, names))))

        r["sales_report"] = _time(lambda: report(sales), 3)
        r["wide_report"] = _time(lambda: report(wide), 2)

        server = UiServer(store)
        url = server.start()
        try:

            def fetch(path: str) -> None:
                with urllib.request.urlopen(url + path, timeout=60) as resp:
                    resp.read()

            fetch("table/sales")
            fetch("table/wide")
            r["http_sales_page_warm"] = _time(lambda: fetch("table/sales"), args.repeat)
            r["http_wide_first_page_warm"] = _time(lambda: fetch("table/wide"), args.repeat)
        finally:
            server.stop()

        print(
            f"UI benchmark: sales {args.rows:,} rows x {len(sales_cols)} columns ({args.partitions} partitions), wide {args.wide_rows:,} rows x 1,001 columns"
        )
        for k, v in r.items():
            if k != "tables":
                print(f"  {k:46s} p50 {v['p50_ms']:8.1f} ms   p90 {v['p90_ms']:8.1f} ms")
        ratios = {
            "sales_all_cards_vs_lookups": r["sales_page_all_cards_warm"]["p50_ms"] / r["sales_page_lookups_only_warm"]["p50_ms"],
            "wide_first_page_all_cards_vs_lookups_warm": r["wide_first_page_all_cards_warm"]["p50_ms"]
            / r["wide_first_page_lookups_only_warm"]["p50_ms"],
            "wide_first_page_all_cards_vs_lookups_cold": r["wide_first_page_all_cards_cold"]["p50_ms"]
            / r["wide_first_page_lookups_only_cold"]["p50_ms"],
        }
        r["ratios"] = ratios
        for k, v in ratios.items():
            print(f"  ratio {k:40s} {v:5.2f}x")
        s, w = r["sales_page_all_cards_warm"]["p50_ms"], r["wide_first_page_all_cards_cold"]["p50_ms"]
        print(f"  target sales page, all cards, warm < 200 ms: {'PASS' if s < 200 else 'FAIL'} ({s:.1f} ms)   "
              f"target wide first page, all cards, cold < 300 ms: {'PASS' if w < 300 else 'FAIL'} ({w:.1f} ms)")  # fmt: skip
        if args.json:
            Path(args.json).write_text(json.dumps(r, indent=1))
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
