#!/usr/bin/env python
"""Exact quantiles by Metastore's distributed sort, side by side with its peers, in one run.

Systems, for each column (each run ``--repeat`` times; the median wall time is reported):

- ``numpy sort``: read the column from every file (pyarrow), drop nulls, one
  ``np.sort`` in this process, pick the quantile_disc ranks. The single-core floor.
- ``duckdb quantile_disc``: ``SELECT quantile_disc(col, [...]) FROM read_parquet(...)``
  (threads = 2, a fresh connection per run).
- ``spark percentile``: plain pyspark local[2]: ``SELECT percentile(col, array(...))``
  over the Parquet directory (Spark's exact percentile; timestamps as
  ``unix_micros``). Only the query is timed.
- ``metastore exact``: ``engine.api.exact_quantiles`` (read, sort and pick on Ray
  tasks) after Ray has started (its start is reported separately).

numpy, DuckDB and ours must agree exactly (the same quantile_disc
definition; a disagreement fails the run); Spark's percentile is exact too but
interpolates between neighbours, so its answers are recorded, not compared. Peers run first and Spark is stopped before Ray
starts. The machine is shared: beside wall time, CPU seconds of the processes
doing the work are recorded (this process for numpy and DuckDB, the driver JVM for
Spark, for ours the Ray tasks' process time plus the driver's), and the load
average before each system; wall times grow with the load.

Also timed: point queries on a column kept sorted (``sort_column``):
``value_at_rank`` and ``rank_of``, p50 in milliseconds.

Usage: python bench/bench_quantiles.py [--rows N] [--partitions P] [--columns price,...]
       [--repeat R] [--warmup W] [--data DIR] [--skip-spark] [--spark-repeat S] [--json OUT]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
from common import (
    CORES,
    busy,
    duckdb_query,
    ensure_data,
    load_avg,
    log,
    note_load,
    parse_table_args,
    proc_cpu,
    result_head,
    self_cpu,
    short_error,
    spark_jvm_pid,
    start_spark,
    summary,
    table_parser,
    write_json,
)

PROBABILITIES = [0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 0.999]
NUMPY = "numpy sort"
DUCKDB = "duckdb quantile_disc"
SPARK = "spark percentile"
OURS = "metastore exact"
SYSTEMS = (NUMPY, DUCKDB, SPARK, OURS)


def same(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float) and a != a and b != b:
        return True
    return a == b


# --------------------------------------------------------------------------- systems


@dataclass
class System:
    """One way to compute the quantiles: ``once`` returns them; ``cpu`` reads a CPU-seconds counter."""

    name: str
    once: Callable[[], list[Any]]
    cpu: Callable[[], float | None] = self_cpu
    extra: Callable[[], dict[str, Any]] = dict


def numpy_system(files: list[Path], column: str) -> System:
    from engine.stats import ranks

    def once() -> list[Any]:
        arr = pa.concat_arrays([c for f in files for c in pq.read_table(f, columns=[column])[column].chunks])
        codec = ranks.codec_for(arr.type)
        keys, _, _ = codec.encode(arr)  # the numpy view of the values (decimals: unscaled int64)
        s = np.sort(keys)
        return codec.to_python(s[list(ranks.ranks_for(len(s), PROBABILITIES))])

    return System(NUMPY, once)


def duckdb_system(table_dir: Path, column: str) -> System:
    import duckdb

    literal = "[" + ", ".join(repr(p) for p in PROBABILITIES) + "]"
    sql = f"SELECT quantile_disc(\"{column}\", {literal}) FROM read_parquet('{table_dir}/**/*.parquet', hive_partitioning = true)"

    return System(DUCKDB, lambda: duckdb_query(sql)[0][0], extra=lambda: {"duckdb_version": duckdb.__version__})


def spark_system(spark: Any, table_dir: Path, column: str, type_: pa.DataType) -> System:
    expr = f"unix_micros(`{column}`)" if pa.types.is_timestamp(type_) else f"`{column}`"
    ps = ", ".join(repr(p) for p in PROBABILITIES)
    spark.read.parquet(str(table_dir)).createOrReplaceTempView("bench_q")
    sql = f"SELECT percentile({expr}, array({ps})) FROM bench_q"
    jvm = spark_jvm_pid(spark)
    return System(SPARK, lambda: list(spark.sql(sql).collect()[0][0]), cpu=(lambda: proc_cpu(jvm)) if jvm else (lambda: None))


def ours_system(table_dir: Path, column: str) -> System:
    from engine.api import exact_quantiles

    details: list[dict[str, Any]] = []
    spent = [0.0]  # CPU seconds of every run so far: the tasks' process time plus the driver's

    def once() -> list[Any]:
        c0 = time.process_time()
        q = exact_quantiles(str(table_dir), column, PROBABILITIES)
        driver = time.process_time() - c0
        details.append({**q.timings, "driver_cpu_s": round(driver, 3)})
        spent[0] += q.timings["prepare_cpu_s"] + q.timings.get("split_cpu_s", 0.0) + q.timings["merge_cpu_s"] + driver
        return list(q.values)

    def extra() -> dict[str, Any]:
        keys = ("prepare_s", "split_s", "merge_s", "prepare_cpu_s", "read_cpu_s", "merge_cpu_s", "driver_cpu_s")
        last = details[-1]
        return {
            "phases_median": {k: round(statistics.median(d.get(k, 0.0) for d in details), 4) for k in keys},
            "ranges": last["ranges"],
            "tasks": last["tasks"],
            "shuffle": last["shuffle"],
            "merge": last.get("merge"),  # "driver": one task round (counted columns), "tasks": the distributed merge
        }

    return System(OURS, once, cpu=lambda: spent[0], extra=extra)


def interleaved(systems: list[System], repeat: int, warmup: int) -> dict[str, tuple[dict[str, Any], list[Any]]]:
    """Run the systems round-robin (the order rotating every round), so on a shared
    machine each round's runs see about the same load; a failing system drops out."""
    acc: dict[str, dict[str, list[Any]]] = {s.name: {"times": [], "cpus": [], "loads": [], "out": []} for s in systems}
    failed: dict[str, str] = {}
    for i in range(warmup + repeat):
        order = systems[i % len(systems) :] + systems[: i % len(systems)]
        for s in order:
            if s.name in failed:
                continue
            load = load_avg()
            try:
                c0, t0 = s.cpu(), time.perf_counter()
                out = s.once()
                dt, c1 = time.perf_counter() - t0, s.cpu()
            except Exception as exc:  # noqa: BLE001 - one system failing must not hide the others
                log(f"    {s.name}: FAILED ({short_error(exc)})")
                traceback.print_exc()
                failed[s.name] = short_error(exc)
                continue
            dc = (c1 - c0) if c0 is not None and c1 is not None else float("nan")
            label = "warm-up" if i < warmup else f"run {i - warmup + 1}/{repeat}"
            log(f"    {label:<10} {s.name:<22} {dt:7.3f} s  (cpu {dc:.2f} s, load {load})")
            if i >= warmup:
                a = acc[s.name]
                a["times"].append(dt)
                a["cpus"].append(dc)
                a["loads"].append(load)
                a["out"].append(out)
    results: dict[str, tuple[dict[str, Any], list[Any]]] = {}
    for s in systems:
        if s.name in failed:
            results[s.name] = ({"available": False, "failed": True, "error": failed[s.name]}, [])
            continue
        a = acc[s.name]
        loads = [x for x in a["loads"] if x is not None]
        results[s.name] = (summary(a["times"], a["cpus"], load_before=max(loads) if loads else None, **s.extra()), a["out"][-1])
    return results


# --------------------------------------------------------------------------- ours: point queries


def bench_queries(table_dir: Path, column: str, count: int = 50) -> dict[str, Any]:
    from engine.api import sort_column

    t0 = time.perf_counter()
    sc = sort_column(str(table_dir), column)
    sort_s = time.perf_counter() - t0
    rng = np.random.default_rng(0)
    with sc:
        rs = rng.integers(0, sc.count, count).tolist()
        at, of = [], []
        values = []
        for r in rs:
            t = time.perf_counter()
            values.append(sc.value_at_rank(r))
            at.append(time.perf_counter() - t)
        for v in values:
            t = time.perf_counter()
            rank = sc.rank_of(v)
            of.append(time.perf_counter() - t)
            if not rank <= rs[values.index(v)]:
                raise RuntimeError(f"rank_of({v!r}) = {rank} > the rank it was drawn at")
    ms = lambda xs: round(1000 * statistics.median(xs), 2)  # noqa: E731
    log(f"  queries on the sorted column: value_at_rank p50 {ms(at)} ms, rank_of p50 {ms(of)} ms (sort {sort_s:.2f} s)")
    return {"sort_s": round(sort_s, 3), "value_at_rank_p50_ms": ms(at), "rank_of_p50_ms": ms(of), "queries": count}


# --------------------------------------------------------------------------- report


def targets(column_results: dict[str, dict[str, Any]]) -> list[dict[str, str]]:
    out = []
    for column, systems in column_results.items():
        ours = systems.get(OURS, {})
        if not ours.get("available"):
            continue
        m = ours["median_s"]
        for peer, goal, label in (
            (NUMPY, lambda r: r <= 2.0, "within 2x of the numpy sort"),
            (SPARK, lambda r: r >= 10.0, "at least 10x faster than Spark percentile"),
        ):
            r = systems.get(peer, {})
            if not r.get("available"):
                out.append({"column": column, "target": label, "status": "n/a", "detail": r.get("skipped") or r.get("error") or "not run"})
                continue
            ratio = m / r["median_s"] if peer == NUMPY else r["median_s"] / m
            detail = f"ours {m:.3f} s, {peer} {r['median_s']:.3f} s: " + (f"{ratio:.2f}x the numpy time" if peer == NUMPY else f"{ratio:.1f}x faster")
            out.append({"column": column, "target": label, "status": "met" if goal(ratio) else "NOT met", "detail": detail})
    return out


def print_report(result: dict[str, Any]) -> None:
    log("")
    log(f"Exact quantiles of {result['config']['rows']:,} rows ({len(PROBABILITIES)} probabilities), median of {result['config']['repeat']} runs")
    for column, systems in result["columns"].items():
        ours = systems.get(OURS, {}).get("median_s") if systems.get(OURS, {}).get("available") else None
        log(f"\ncolumn {column}")
        log(f"{'system':<24}{'median s':>10}{'cpu s':>8}{'ours/system':>13}")
        for name in SYSTEMS:
            r = systems.get(name)
            if r is None:
                continue
            if not r.get("available"):
                log(f"{name:<24}{'-':>10}   ({r.get('skipped') or r.get('error') or 'not available'})")
                continue
            cpu = f"{r['median_cpu_s']:.2f}" if r.get("median_cpu_s") is not None else "-"
            ratio = f"{ours / r['median_s']:.2f}" if ours else "n/a"
            log(f"{name:<24}{r['median_s']:>10.3f}{cpu:>8}{ratio:>13}")
        if systems.get("queries", {}).get("value_at_rank_p50_ms") is not None:
            qd = systems["queries"]
            log(f"sorted column: value_at_rank p50 {qd['value_at_rank_p50_ms']} ms, rank_of p50 {qd['rank_of_p50_ms']} ms")
    if result.get("startup"):
        log("\n" + ", ".join(f"{k} {v:.2f} s" for k, v in result["startup"].items() if isinstance(v, float)) + " (not included above)")
    loads = [r.get("load_before") for s in result["columns"].values() for r in s.values() if isinstance(r, dict) and r.get("load_before") is not None]
    if loads and busy(max(loads)):
        log(f"note: the 1-min load average reached {max(loads)} on {os.cpu_count()} cores during the run; wall times are inflated")
    for t in result["targets"]:
        log(f"[{t['status']}] {t['column']}: {t['target']}: {t['detail']}")


# --------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = table_parser(__doc__.split("\n\n")[0], repeat=3, warmup=1)
    ap.add_argument("--columns", default="price,event_time,amount", help="columns to rank (default price,event_time,amount)")
    ap.add_argument("--skip-spark", action="store_true", help="do not run Spark")
    ap.add_argument("--spark-repeat", type=int, default=1, help="timed runs of Spark's percentile, after one warm-up (default 1: it is slow)")
    ap.add_argument("--json", metavar="OUT", help="also write the results as JSON to OUT")
    args = parse_table_args(ap, argv)
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    data_dir = Path(args.data).resolve()
    started = datetime.now(UTC)
    table_dir, data_info = ensure_data(data_dir, args.rows, args.partitions)
    files = sorted(table_dir.rglob("*.parquet"))
    schema = pq.read_schema(files[0])
    columns = [c.strip() for c in args.columns.split(",") if c.strip()]
    unknown = [c for c in columns if c not in schema.names]
    if unknown:
        log(f"unknown column(s) {unknown}; the table has {schema.names}")
        return 2

    results: dict[str, dict[str, Any]] = {c: {} for c in columns}
    answers: dict[str, dict[str, list[Any]]] = {c: {} for c in columns}
    startup: dict[str, Any] = {}

    def record(column: str, got: dict[str, tuple[dict[str, Any], list[Any]]]) -> None:
        for name, (res, out) in got.items():
            results[column][name] = res
            if out:
                answers[column][name] = out

    if args.skip_spark:
        for column in columns:
            results[column][SPARK] = {"available": False, "skipped": "skipped (--skip-spark)"}
    else:  # Spark first, alone, and stopped before Ray starts: no engine competes with the one timed
        import pyspark

        t0 = time.perf_counter()
        spark = start_spark(data_dir)
        startup["spark_start_s"] = round(time.perf_counter() - t0, 3)
        startup["pyspark_version"] = pyspark.__version__
        try:
            for column in columns:
                t = schema.field(column).type
                if not (pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t) or pa.types.is_timestamp(t)):
                    results[column][SPARK] = {"available": False, "skipped": f"percentile takes numbers, not {t}"}
                    continue
                log(f"column {column}: {SPARK}, local[{CORES}]")
                note_load(SPARK)
                record(column, interleaved([spark_system(spark, table_dir, column, schema.field(column).type)], args.spark_repeat, 1))
        finally:
            spark.stop()

    from engine.runtime.ray_runtime import ensure_ray

    startup["ray_start_s"] = round(ensure_ray(), 3)
    for column in columns:
        log(f"column {column} ({schema.field(column).type}): {NUMPY}, {DUCKDB} (threads={CORES}), {OURS}, round-robin")
        note_load(column)
        systems = [numpy_system(files, column), duckdb_system(table_dir, column), ours_system(table_dir, column)]
        record(column, interleaved(systems, args.repeat, args.warmup))
        try:
            results[column]["queries"] = bench_queries(table_dir, column)
        except Exception as exc:  # noqa: BLE001
            log(f"  queries: FAILED ({short_error(exc)})")
            results[column]["queries"] = {"available": False, "failed": True, "error": short_error(exc)}

    # every exact system must agree; Spark (interpolating) must lie between the neighbouring exact values
    for column in columns:
        got = answers[column]
        exact = [n for n in (NUMPY, DUCKDB, OURS) if n in got]
        for n in exact[1:]:
            if not all(same(a, b) for a, b in zip(got[n], got[exact[0]])):
                msg = f"{n} disagrees with {exact[0]} on {column}: {got[n]} vs {got[exact[0]]}"
                log(f"  MISMATCH: {msg}")
                results[column][n] = {**results[column][n], "failed": True, "error": msg}
        results[column]["answers"] = {n: [str(v) for v in vals] for n, vals in got.items()}

    result = {
        **result_head("quantiles", started, args, table_dir, probabilities=PROBABILITIES),
        "data": data_info,
        "startup": startup,
        "columns": results,
    }
    result["targets"] = targets(results)
    print_report(result)
    if args.json:
        write_json(result, args.json)
    failed = any(isinstance(r, dict) and r.get("failed") for s in results.values() for r in s.values())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
