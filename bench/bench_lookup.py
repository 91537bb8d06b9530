#!/usr/bin/env python
"""Lookup latency: statistics of 10 columns out of a 1,000-column table, top-k and histogram bins.

- cold: a new process-level state each time (footer cache cleared, file reopened);
  the OS page cache stays warm, as on a serving host.
- warm: footers cached (the steady state of a long-lived reader such as the Flight server).
Beside ours, the same 10 rows read naively with ``pyarrow.parquet.read_table``
(whole file, filter) as a floor for "no partial reads".

Usage: python bench/bench_lookup.py [--columns 1000] [--rows 10000] [--repeat 200] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import pyarrow.compute as pc  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402


def _percentiles(samples: list[float]) -> dict[str, float]:
    s = sorted(samples)
    return {
        "p50_ms": statistics.median(s) * 1e3,
        "p99_ms": s[min(len(s) - 1, int(0.99 * len(s)))] * 1e3,
        "mean_ms": statistics.fmean(s) * 1e3,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--columns", type=int, default=1000)
    ap.add_argument("--rows", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=200)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    from engine import lookup
    from engine.api import analyze, open_statistics
    from engine.runtime.ray_runtime import ensure_ray, shutdown_ray
    from engine.sample import generate_wide_table

    work = Path(tempfile.mkdtemp(prefix="metastore-bench-lookup-"))
    try:
        table = work / "wide"
        generate_wide_table(str(table), columns=args.columns, rows=args.rows, partitions=1, seed=0)
        ensure_ray()
        t0 = time.perf_counter()
        result = analyze(str(table), store=str(work / "store"))
        analyze_s = time.perf_counter() - t0
        shutdown_ray()

        stats = open_statistics(str(work / "store"), result.table)
        names = [f.name for f in stats.schema]
        rng = random.Random(0)
        pick = [rng.sample(names, 10) for _ in range(args.repeat)]

        cold, warm, naive = [], [], []
        for cols in pick:
            lookup.clear_cache()
            t = time.perf_counter()
            s = open_statistics(str(work / "store"), result.table)
            s.statistics(cols)
            cold.append(time.perf_counter() - t)
        for cols in pick:
            t = time.perf_counter()
            stats.statistics(cols)
            warm.append(time.perf_counter() - t)
        stats_file = stats.file_uri("statistics.parquet")
        for cols in pick[: max(10, args.repeat // 10)]:
            t = time.perf_counter()
            full = pq.read_table(stats_file)
            full.filter(pc.is_in(full["column"], value_set=__import__("pyarrow").array(cols)))
            naive.append(time.perf_counter() - t)

        top, hist = [], []
        discrete = [n for n in names if n in stats.frequency_index()]
        histo = list(
            json.loads(
                __import__("pyarrow").parquet.ParquetFile(stats.file_uri("histograms.parquet")).schema_arrow.metadata[b"metastore.histograms"]
            ).keys()
        )
        for i in range(args.repeat):
            if discrete:
                t = time.perf_counter()
                stats.top_frequencies(discrete[i % len(discrete)], k=20)
                top.append(time.perf_counter() - t)
            if histo:
                t = time.perf_counter()
                stats.histogram(histo[i % len(histo)], bins=(100, 200))
                hist.append(time.perf_counter() - t)

        results = {
            "table": {"columns": args.columns, "rows": args.rows, "analyze_s": analyze_s},
            "statistics_10_columns_cold": _percentiles(cold),
            "statistics_10_columns_warm": _percentiles(warm),
            "statistics_10_columns_read_whole_file": _percentiles(naive),
            "top20_frequencies_warm": _percentiles(top) if top else None,
            "histogram_100_bins_warm": _percentiles(hist) if hist else None,
        }
        print(f"lookup benchmark: {args.columns} columns x {args.rows} rows (analyze {analyze_s:.1f} s)")
        for k, v in results.items():
            if k != "table" and v:
                print(f"  {k:42s} p50 {v['p50_ms']:7.3f} ms   p99 {v['p99_ms']:7.3f} ms")
        c, w = results["statistics_10_columns_cold"], results["statistics_10_columns_warm"]
        print(f"  target warm < 2 ms: {'PASS' if w['p50_ms'] < 2 else 'FAIL'}   target cold < 20 ms: {'PASS' if c['p50_ms'] < 20 else 'FAIL'}")
        if args.json:
            Path(args.json).write_text(json.dumps(results, indent=1))
        return 0
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
