#!/usr/bin/env python
"""An exact computed subset (``engine.runtime.subset.compute_subset``) against a full analyze
and against DuckDB computing the same statistics of the same rows, in one run.

The table is the analyze benchmark's (``bench/data``: 5,000,000 rows, 16 partitions, its
``event_time`` clustered by partition: each partition covers 1/16 of a year). The
predicate is an ``event_time`` range of 16% of one partition's span: about 1% of the rows,
which the partition statistics localise to that one partition (checked with
``plan_files``: one candidate partition). No layout change is needed.

Systems (``--repeat`` timed runs each after ``--warmup`` untimed ones; medians reported):

- ``duckdb summarize where``: ``SUMMARIZE SELECT * FROM read_parquet(...) WHERE <range>``
  (2 threads, a fresh connection per run);
- ``metastore analyze``: a full analyze of the table (the store the subsets are computed from);
- ``metastore subset``: ``compute_subset(ts, where, cache=False)`` (a Ray job over the
  candidate files, published into the subset's store);
- ``metastore subset, cached``: the same request answered from the cache (no data read).

Ray's start is not included. Targets (issue #16): the computed subset at most 1/8 of the
full analyze's time, and within 1.5x of DuckDB's.

Usage: python bench/bench_subset_computed.py [--repeat R] [--warmup W] [--data DIR] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
from common import CORES, REPO, TABLE_PARTITIONS, TABLE_ROWS, duckdb_query, ensure_data, load_avg, log, note_load, runs, summary

PARTITION = "part=05"
SPAN_SHARE = 0.16  # of the partition's event_time span: ~1% of the table's rows
DUCKDB = "duckdb summarize where"
FULL = "metastore analyze"
SUBSET = "metastore subset"
CACHED = "metastore subset, cached"


def predicate_bounds(ts: Any) -> tuple[str, str]:
    """An event_time range of SPAN_SHARE of PARTITION's span (text forms, UTC)."""
    row = ts.column_statistics("event_time", partition=PARTITION)
    lo, hi = row["min"], row["max"]
    start = lo + (hi - lo) * 0.42
    end = start + (hi - lo) * SPAN_SHARE
    fmt = "%Y-%m-%dT%H:%M:%S.%fZ"
    return start.strftime(fmt), end.strftime(fmt)


def bench_duckdb(table_dir: Path, where_sql: str, repeat: int, warmup: int) -> dict[str, Any]:
    import duckdb

    log(f"{DUCKDB}: threads={CORES}")
    load = note_load(DUCKDB)
    sql = f"SUMMARIZE SELECT * FROM read_parquet('{table_dir}/**/*.parquet', hive_partitioning=true) WHERE {where_sql}"
    count_sql = f"SELECT count(*) FROM read_parquet('{table_dir}/**/*.parquet', hive_partitioning=true) WHERE {where_sql}"

    times, outs, cpus = runs(lambda: duckdb_query(sql), repeat, warmup)
    rows = duckdb_query(count_sql)[0][0]
    return summary(times, cpus, load_before=load, duckdb_version=duckdb.__version__, columns=len(outs[-1]), rows=rows, sql=sql)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--data", default=str(REPO / "bench" / "data"))
    ap.add_argument("--store", help="where the statistics go (default: a temporary directory, removed at the end)")
    ap.add_argument("--json", metavar="OUT")
    args = ap.parse_args(argv)
    data_dir = Path(args.data).resolve()
    table_dir, data_info = ensure_data(data_dir, TABLE_ROWS, TABLE_PARTITIONS)
    started = datetime.now(UTC)
    systems: dict[str, Any] = {}

    from engine.api import analyze, open_statistics
    from engine.runtime.ray_runtime import ensure_ray
    from engine.runtime.subset import compute_subset

    ray_start = float(ensure_ray(num_cpus=None))
    log(f"ray start: {ray_start:.2f} s")
    scratch = None if args.store else Path(tempfile.mkdtemp(prefix="bench-subset-"))
    store = Path(args.store) if args.store else scratch / "store"  # type: ignore[operator]
    log(f"{FULL}: analyze({table_dir})")
    load = note_load(FULL)
    full_times = []
    for i in range(args.warmup + args.repeat):
        shutil.rmtree(store, ignore_errors=True)
        t0 = time.perf_counter()
        analyze(str(table_dir), str(store), user_statistics=[], file_index=True)
        dt = time.perf_counter() - t0
        if i >= args.warmup:
            full_times.append(dt)
        log(f"    {'warm-up' if i < args.warmup else f'run {i - args.warmup + 1}/{args.repeat}'}: {dt:.2f} s")
    systems[FULL] = summary(full_times, load_before=load)

    ts = open_statistics(str(store), "table")
    lo, hi = predicate_bounds(ts)
    where = f"event_time >= '{lo}' and event_time < '{hi}'"
    plan = ts.plan_files(where)
    partitions = sorted(set(plan.candidates.column("partition").to_pylist()))
    log(f"predicate: {where}; candidate partitions {partitions}, files {plan.candidates.num_rows} of {plan.files}")

    log(f"{SUBSET}: compute_subset(cache=False)")
    load = note_load(SUBSET)
    subs: list[Any] = []
    times, subs, _ = runs(lambda: compute_subset(ts, where, cache=False), args.repeat, args.warmup)
    sub = subs[-1]
    subset_rows = sub.statistics(["id"], statistics=["row_count"]).column("row_count")[0].as_py()
    systems[SUBSET] = summary(times, load_before=load, rows=subset_rows, candidate_files=sub.subset.candidate_files)
    log(f"{CACHED}")
    times, outs, _ = runs(lambda: compute_subset(ts, where), args.repeat, args.warmup)
    assert all(o.subset.cached for o in outs)
    systems[CACHED] = summary(times)
    import ray

    ray.shutdown()

    where_sql = (
        f"event_time >= TIMESTAMPTZ '{lo.replace('T', ' ').rstrip('Z')}+00' AND event_time < TIMESTAMPTZ '{hi.replace('T', ' ').rstrip('Z')}+00'"
    )
    systems[DUCKDB] = bench_duckdb(table_dir, where_sql, args.repeat, args.warmup)
    if systems[DUCKDB]["rows"] != subset_rows:
        raise SystemExit(f"DuckDB selected {systems[DUCKDB]['rows']} rows, the subset has {subset_rows}")

    ours = systems[SUBSET]["median_s"]
    ratios = {
        "subset / full analyze": round(ours / systems[FULL]["median_s"], 4),
        "subset / duckdb": round(ours / systems[DUCKDB]["median_s"], 3),
    }
    result = {
        "benchmark": "subset_computed",
        "started_at": started.isoformat(timespec="seconds"),
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "config": {"rows": TABLE_ROWS, "partitions": TABLE_PARTITIONS, "repeat": args.repeat, "warmup": args.warmup, "predicate": where},
        "selectivity": round(subset_rows / TABLE_ROWS, 5),
        "candidate_partitions": partitions,
        "machine": {"cpu_count": os.cpu_count(), "platform": platform.platform(), "pyarrow": pa.__version__, "load_avg_end": load_avg()},
        "data": data_info,
        "ray_start_s": round(ray_start, 3),
        "systems": systems,
        "ratios": ratios,
        "targets": {
            "at most 1/8 of a full analyze": ratios["subset / full analyze"] <= 1 / 8,
            "within 1.5x of DuckDB": ratios["subset / duckdb"] <= 1.5,
        },
    }
    log("")
    log(f"rows matching: {subset_rows:,} ({result['selectivity']:.2%}), candidate partitions {partitions}")
    for name, s in systems.items():
        log(f"  {name:28s} median {s['median_s']:.3f} s  runs {s['runs_s']}")
    for k, v in ratios.items():
        log(f"  {k}: {v}")
    for k, v in result["targets"].items():
        log(f"  target {k}: {'met' if v else 'NOT met'}")
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    shutil.rmtree(scratch or store, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
