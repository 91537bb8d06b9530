#!/usr/bin/env python
"""Stored and estimated statistics of a filtered subset (``TableStatistics.statistics(where=...)``,
docs/SUBSETS.md) on the analyze benchmark's table (``bench/data``: 5,000,000 rows, 16
partitions), warm (files opened and footers cached by one untimed call), against DuckDB
counting the same rows (``SELECT count(*) ... WHERE``, 2 threads) in the same run.

Predicates (each answered from stored files only: no data read):

- ``whole partitions``: ``part >= 12`` (4 partitions whose every row matches: an exact merge);
- ``exact frequencies``: ``city = 'Berlin'`` (the row count from stored exact frequencies);
- ``estimated``: ``city = 'Berlin' and price > 100`` (histograms and frequencies, independence);
- ``one partition's range``: an ``event_time`` range inside one partition (as bench_subset_computed.py).

Each is timed for three columns and for every column of the table. Target (issue #16):
under 10 ms warm. ``--stored-only`` is this script's only part: the computed path is
bench/bench_subset_computed.py.

Usage: python bench/bench_subset.py --stored-only [--repeat R] [--data DIR] [--store DIR] [--json OUT]
(``--store``: an analyzed store of the table, reused when it holds it; analyzed there if not)
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from common import CORES, REPO, TABLE_PARTITIONS, TABLE_ROWS, duckdb_query, ensure_data, load_avg, log, note_load, runs, summary

THREE = ["price", "city", "quantity"]


def predicates(ts: Any) -> dict[str, str]:
    from bench_subset_computed import predicate_bounds

    lo, hi = predicate_bounds(ts)
    return {
        "whole partitions": "part >= 12",
        "exact frequencies": "city = 'Berlin'",
        "estimated": "city = 'Berlin' and price > 100",
        "one partition's range": f"event_time >= '{lo}' and event_time < '{hi}'",
    }


def duckdb_where(where: str) -> str:
    """The same predicate in DuckDB's SQL (hive partition values are read as text there)."""
    return (
        where.replace("part >= 12", "CAST(part AS INTEGER) >= 12")
        .replace("event_time >= '", "event_time >= TIMESTAMPTZ '")
        .replace("event_time < '", "event_time < TIMESTAMPTZ '")
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--stored-only", action="store_true", help="stored/estimated answers only (the only part of this script)")
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--data", default=str(REPO / "bench" / "data"))
    ap.add_argument("--store", help="an analyzed store of the table, kept (default: a temporary one, analyzed here and removed)")
    ap.add_argument("--json", metavar="OUT")
    args = ap.parse_args(argv)
    table_dir, _ = ensure_data(Path(args.data).resolve(), TABLE_ROWS, TABLE_PARTITIONS)
    started = datetime.now(UTC)

    from engine.lookup import open_statistics
    from engine.subset import methods_of

    store = Path(args.store or tempfile.mkdtemp(prefix="bench-subset-stored-"))
    try:
        ts = open_statistics(str(store), "table")
    except Exception:  # noqa: BLE001 -- not analyzed there yet
        from engine.api import analyze

        log(f"analyze({table_dir}) into {store}")
        analyze(str(table_dir), str(store), user_statistics=[], file_index=True)
        ts = open_statistics(str(store), "table")

    results: dict[str, Any] = {}
    for label, where in predicates(ts).items():
        for cols_label, cols in (("3 columns", THREE), ("all columns", None)):
            name = f"{label}, {cols_label}"
            ts.statistics(cols, where=where)  # warm: files opened, footers and row groups cached
            load = note_load(name)
            times, outs, cpus = runs(lambda cols=cols, where=where: ts.statistics(cols, where=where), args.repeat, warmup=2, cpu=time.process_time)
            m = methods_of(outs[-1])
            rc = m.of("*", "row_count")
            methods = sorted({a.method.value for a in m.answers.values()})
            results[name] = summary(
                times, cpus, load_before=load, where=where, partitions=m.partitions, row_count=outs[-1].column("row_count")[0].as_py(),
                row_count_method=rc.method.value, row_count_bounds=[rc.low, rc.high], methods=methods,
            )  # fmt: skip
            cpu_ms = statistics.median(cpus) * 1000
            log(
                f"{name:40s} wall {statistics.median(times) * 1000:7.2f} ms, cpu {cpu_ms:6.2f} ms  rows {rc.method.value} {results[name]['row_count']:,}  {m.partitions}"
            )

    for label, where in predicates(ts).items():
        sql = f"SELECT count(*) FROM read_parquet('{table_dir}/**/*.parquet', hive_partitioning=true) WHERE {duckdb_where(where)}"

        load = note_load(f"duckdb {label}")
        times, outs, cpus = runs(lambda sql=sql: duckdb_query(sql)[0][0], 5, warmup=1)
        results[f"duckdb count, {label}"] = summary(times, cpus, load_before=load, rows=outs[-1], sql=sql)
        ours = results[f"{label}, 3 columns"]
        log(
            f"duckdb count, {label:30s} {statistics.median(times) * 1000:7.1f} ms  rows {outs[-1]:,}  (ours {ours['row_count']:,} {ours['row_count_method']})"
        )

    if args.store is None:
        import shutil

        shutil.rmtree(store, ignore_errors=True)  # the temporary store analyzed here
    doc = {
        "benchmark": "subset statistics, stored/estimated (warm)",
        "started": started.isoformat(timespec="seconds"),
        "host": platform.node(),
        "cores": CORES,
        "load_after": load_avg(),
        "rows": TABLE_ROWS,
        "partitions": TABLE_PARTITIONS,
        "results": results,
    }
    if args.json:
        Path(args.json).write_text(json.dumps(doc, indent=2) + "\n")
    else:
        print(json.dumps(doc, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
