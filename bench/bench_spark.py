#!/usr/bin/env python
"""The Spark bridge on the shared sample table, against Spark's own ANALYZE, in one run.

One Spark on Ray (RayDP: ``--executors`` x ``--executor-cores``, 2 x 1 by default,
the machine's two cores) and one catalog table ``bench_t`` over the sample table
(``CREATE TABLE ... USING parquet LOCATION`` + ``MSCK REPAIR TABLE``). Timed, each
``--repeat`` times after ``--warmup`` untimed runs (medians reported):

- ``move``: the DataFrame ``spark.read.parquet(table)`` from Spark to Ray blocks
  (``ray.data.from_spark``): by ``part`` as analyze does it (the scan is partitioned
  by ``part``, so no shuffle; then the partition index), by ``part`` through a
  Spark shuffle (``df.repartition("part")``, what any other DataFrame costs), and
  unpartitioned;
- ``ours dataframe``: ``spark_bridge.api.analyze(df, partition_by=["part"])``
  end to end (the move included);
- ``ours files``: ``analyze_table(spark, "bench_t")``: the catalog table's
  Parquet files read directly (the Parquet path plus the catalog lookup);
- ``spark analyze`` / ``spark analyze+hist``: ``ANALYZE TABLE bench_t COMPUTE
  STATISTICS FOR ALL COLUMNS`` on the same executors, histograms off and on
  (254 bins);
- ``write cbo``: ``write_spark_statistics`` of our statistics into the catalog;
- ``read back``: the table-level statistics and frequencies files as Spark
  DataFrames, read by Spark from the Parquet files (what ``read_statistics``
  does) versus moved from a Ray Dataset (``ray.data.read_parquet(uri).to_spark``),
  each to ``count()`` and ``collect()`` (statistics) / ``count()`` (frequencies).

Beside wall time, CPU seconds: of the Spark JVMs (driver, executors, RayDP's app
master; from /proc) for Spark's work, and of our Ray tasks (the job's ``cpu_s``).
The machine may be shared: wall times grow with the load, recorded before each
system.

Usage: python bench/bench_spark.py [--data DIR] [--rows N] [--partitions P] [--repeat R] [--warmup W]
       [--executors E] [--executor-cores C] [--executor-memory M] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from common import REPO, TABLE_PARTITIONS, TABLE_ROWS, busy, ensure_data, load_avg, log, proc_cpu, short_error

TABLE = "bench_t"
SPARK_BINS = 254


def _jvm_pids(spark: Any) -> list[int]:
    """The Spark JVMs: the driver (pyspark's gateway) and RayDP's Java actors (executors, app master).

    The Java actors are children of this Ray node's raylet (Ray's state API needs
    the dashboard, which the local runtime does not start).
    """
    pids = []
    proc = getattr(getattr(spark.sparkContext, "_gateway", None), "proc", None)
    if getattr(proc, "pid", None):
        pids.append(proc.pid)
    try:
        import ray

        raylet = ray._private.worker._global_node.all_processes["raylet"][0].process.pid
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    with open(f"/proc/{entry}/stat") as fh:
                        ppid = int(fh.read().rsplit(")", 1)[1].split()[1])
                except (OSError, ValueError, IndexError):
                    continue
                if ppid == raylet:
                    pids.append(int(entry))
    except Exception as exc:  # noqa: BLE001 - CPU is a side figure
        log(f"  (no executor pids: {short_error(exc)})")
    out = []
    for pid in dict.fromkeys(pids):
        try:
            if "java" in Path(f"/proc/{pid}/exe").resolve().name:
                out.append(pid)
        except OSError:
            pass
    return out


def _jvm_cpu(pids: list[int]) -> float | None:
    values = [proc_cpu(p) for p in pids]
    return None if not values or any(v is None for v in values) else float(sum(values))  # type: ignore[arg-type]


def timed(name: str, fn: Callable[[], Any], repeat: int, pids: list[int], warmup: int = 0) -> dict[str, Any]:
    """Run fn warmup + repeat times; wall seconds, Spark JVM CPU seconds, and fn's result's own figures."""
    load = load_avg()
    log(f"{name}: (load {load})")
    for _ in range(warmup):
        t0 = time.perf_counter()
        fn()
        log(f"    warm-up: {time.perf_counter() - t0:.2f} s")
    walls, cpus, extras = [], [], []
    for i in range(repeat):
        c0 = _jvm_cpu(pids)
        t0 = time.perf_counter()
        extra = fn() or {}
        dt = time.perf_counter() - t0
        c1 = _jvm_cpu(pids)
        cpu = None if c0 is None or c1 is None else c1 - c0
        walls.append(dt)
        cpus.append(cpu)
        extras.append(extra)
        shown = ", ".join(f"{k} {v:.2f}" if isinstance(v, float) else f"{k} {v}" for k, v in extra.items())
        log(f"    run {i + 1}/{repeat}: {dt:.2f} s (Spark JVM cpu {cpu if cpu is None else round(cpu, 1)} s{'; ' + shown if shown else ''})")
    out: dict[str, Any] = {
        "runs_s": [round(w, 3) for w in walls],
        "median_s": round(statistics.median(walls), 3),
        "load_before": load,
    }
    if all(c is not None for c in cpus):
        out["median_jvm_cpu_s"] = round(statistics.median(cpus), 2)  # type: ignore[type-var]
    keys = [k for k in extras[0] if all(isinstance(e.get(k), (int, float)) for e in extras)]
    for k in keys:
        out[f"median_{k}"] = round(statistics.median(e[k] for e in extras), 3)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=TABLE_ROWS)
    ap.add_argument("--partitions", type=int, default=TABLE_PARTITIONS)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--warmup", type=int, default=1, help="untimed runs of each system first (JIT, caches)")
    ap.add_argument("--data", default=str(REPO / "bench" / "data"), help="where the sample table is cached (bench_analyze's)")
    ap.add_argument("--executors", type=int, default=2)
    ap.add_argument("--executor-cores", type=int, default=1)
    ap.add_argument("--executor-memory", default="2g")
    ap.add_argument("--json", metavar="OUT")
    args = ap.parse_args(argv)

    data_dir = Path(args.data).resolve()
    table_dir, data_info = ensure_data(data_dir, args.rows, args.partitions)
    work = Path(tempfile.mkdtemp(prefix="metastore-bench-spark-"))
    results: dict[str, Any] = {}
    failed: list[str] = []

    from engine.runtime.ray_runtime import ensure_ray

    t0 = time.perf_counter()
    ensure_ray()
    ray_s = time.perf_counter() - t0
    from spark_bridge.session import start_spark, stop_spark

    t0 = time.perf_counter()
    spark = start_spark(
        app_name="bench_spark",
        num_executors=args.executors,
        executor_cores=args.executor_cores,
        executor_memory=args.executor_memory,
        configs={"spark.sql.shuffle.partitions": str(args.partitions), "spark.sql.warehouse.dir": str(work / "warehouse")},
    )
    spark_s = time.perf_counter() - t0
    log(
        f"ray start {ray_s:.1f} s, spark start {spark_s:.1f} s ({args.executors} executor(s) x {args.executor_cores} core(s) x {args.executor_memory})"
    )
    pids = _jvm_pids(spark)
    log(f"Spark JVM pids: {pids}")

    def guarded(name: str, fn: Callable[[], dict[str, Any]]) -> None:
        try:
            results[name] = fn()
        except Exception as exc:  # noqa: BLE001 - one failure must not hide the others
            log(f"{name}: FAILED ({short_error(exc)})")
            traceback.print_exc()
            results[name] = {"failed": True, "error": short_error(exc)}
            failed.append(name)

    try:
        import ray

        from spark_bridge.api import analyze, analyze_table, read_statistics, write_spark_statistics
        from spark_bridge.source import RayDatasetSource

        spark.sql(f"DROP TABLE IF EXISTS {TABLE}")
        spark.sql(f"CREATE TABLE {TABLE} USING parquet LOCATION '{table_dir}'")
        spark.sql(f"MSCK REPAIR TABLE {TABLE}")
        df = spark.read.parquet(str(table_dir))

        def move(partition_by: list[str]) -> dict[str, Any]:
            source = RayDatasetSource(df, partition_by, name="move")
            try:
                return {"spark_to_ray_s": source.timings["spark_to_ray_s"], "blocks": len(source._refs)}
            finally:
                source.close()
                del source

        guarded("move by part", lambda: timed("move by part (files: no shuffle) + index", lambda: move(["part"]), args.repeat, pids, args.warmup))
        shuffled_df = df.repartition(args.partitions, "part")

        def move_shuffled() -> dict[str, Any]:
            source = RayDatasetSource(shuffled_df, [], name="move")
            try:
                return {"spark_to_ray_s": source.timings["spark_to_ray_s"], "blocks": len(source._refs)}
            finally:
                source.close()

        guarded("move by part, shuffled", lambda: timed("move by part through a shuffle", move_shuffled, args.repeat, pids, args.warmup))
        guarded("move unpartitioned", lambda: timed("move unpartitioned", lambda: move([]), args.repeat, pids, args.warmup))

        def ours(kind: str) -> dict[str, Any]:
            store = work / f"store-{kind}"
            shutil.rmtree(store, ignore_errors=True)
            if kind == "dataframe":
                r = analyze(df, partition_by=["part"], store=str(store), name="bench")
            else:
                r = analyze_table(
                    spark, TABLE, store=str(store), name="bench", spark_statistics=False
                )  # the analyze alone; "write cbo" times the rest
            out = {"cpu_s": r.timings.get("cpu_s", float("nan")), "rows": r.rows}
            if "spark_to_ray_s" in r.timings:
                out["spark_to_ray_s"] = r.timings["spark_to_ray_s"]
            return out

        guarded("ours dataframe", lambda: timed("ours via DataFrame (RayDP)", lambda: ours("dataframe"), args.repeat, pids, args.warmup))
        guarded("ours files", lambda: timed("ours via catalog table files", lambda: ours("files"), args.repeat, pids, args.warmup))

        excluded: list[str] = []

        def spark_analyze(hist: bool) -> dict[str, Any]:
            spark.conf.set("spark.sql.statistics.histogram.enabled", "true" if hist else "false")
            spark.conf.set("spark.sql.statistics.histogram.numBins", str(SPARK_BINS))
            if hist and excluded:
                kept = [c for c in spark.table(TABLE).columns if c not in excluded]
                spark.sql(f"ANALYZE TABLE {TABLE} COMPUTE STATISTICS FOR COLUMNS {', '.join(kept)}").collect()
                return {"excluded": ",".join(excluded)}
            try:
                spark.sql(f"ANALYZE TABLE {TABLE} COMPUTE STATISTICS FOR ALL COLUMNS").collect()
            except Exception as exc:
                if not hist or excluded:
                    raise
                # Spark 3.5's ApproxCountDistinctForIntervals fails (index 254 out of bounds for
                # length 254) on a double column holding NaN: measure the other columns
                from engine.lookup import open_statistics

                stats = open_statistics(str(work / "store-files"), "bench")
                excluded.extend(r["column"] for r in stats.statistics(statistics=["nan_count"]).to_pylist() if r["nan_count"])
                log(f"    failed ({short_error(exc)}); again without the column(s) holding NaN: {excluded}")
                return spark_analyze(hist)
            return {}

        guarded("spark analyze", lambda: timed("Spark ANALYZE ... FOR ALL COLUMNS", lambda: spark_analyze(False), args.repeat, pids, args.warmup))
        guarded("spark analyze+hist", lambda: timed("Spark ANALYZE, histograms", lambda: spark_analyze(True), args.repeat, pids, args.warmup))

        store = str(work / "store-files")
        if not (work / "store-files").exists():
            analyze_table(spark, TABLE, store=store, name="bench", spark_statistics=False)

        def cbo() -> dict[str, Any]:
            out = write_spark_statistics(spark, TABLE, store=store, name="bench")
            return {"columns": len(out["columns"])}

        guarded("write cbo", lambda: timed("write_spark_statistics", cbo, args.repeat, pids, args.warmup))

        from engine.lookup import open_statistics

        uris = {k: open_statistics(store, "bench").file_uri(f"{k}.parquet") for k in ("statistics", "frequencies")}

        def via_spark(kind: str, collect: bool) -> dict[str, Any]:
            sdf = read_statistics(spark, store, "bench", kind=kind)
            return {"rows": len(sdf.collect()) if collect else sdf.count()}

        def via_ray(kind: str, collect: bool) -> dict[str, Any]:
            # read here (pyarrow), put into Ray as a Dataset, handed to Spark by RayDP
            # (ray.data.read_parquet's footer actor fails to load next to RayDP's Java workers)
            import pyarrow.parquet as pq

            sdf = ray.data.from_arrow(pq.read_table(uris[kind])).to_spark(spark)
            return {"rows": len(sdf.collect()) if collect else sdf.count()}

        for kind, collect in (("statistics", True), ("frequencies", False)):
            what = "collect" if collect else "count"
            guarded(
                f"read {kind} spark",
                lambda: timed(
                    f"read back {kind} ({what}): Spark reads the file", lambda: via_spark(kind, collect), args.repeat, pids, max(1, args.warmup)
                ),
            )
            guarded(
                f"read {kind} ray",
                lambda: timed(
                    f"read back {kind} ({what}): Ray Dataset to Spark", lambda: via_ray(kind, collect), args.repeat, pids, max(1, args.warmup)
                ),
            )
    finally:
        try:
            stop_spark()
        finally:
            shutil.rmtree(work, ignore_errors=True)

    def median(name: str) -> float | None:
        r = results.get(name) or {}
        return r.get("median_s")

    log("")
    log(f"spark bridge benchmark: {args.rows:,} rows, {args.partitions} partitions, median of {args.repeat} run(s)")
    log(f"{'what':<26}{'median s':>10}{'JVM cpu s':>11}{'our cpu s':>11}")
    for name, r in results.items():
        if r.get("failed"):
            log(f"{name:<26}{'-':>10}   ({r['error']})")
            continue
        jvm = r.get("median_jvm_cpu_s")
        ours_cpu = r.get("median_cpu_s")
        log(f"{name:<26}{r['median_s']:>10.2f}{'' if jvm is None else f'{jvm:.1f}':>11}{'' if ours_cpu is None else f'{ours_cpu:.1f}':>11}")
    ratios = {}
    for a, b in (
        ("ours files", "spark analyze"),
        ("ours files", "spark analyze+hist"),
        ("ours dataframe", "spark analyze+hist"),
        ("ours dataframe", "ours files"),
    ):
        if median(a) and median(b):
            ratios[f"{a} / {b}"] = round(median(a) / median(b), 2)
            log(f"{a} / {b}: {ratios[f'{a} / {b}']}")
    loads = [r.get("load_before") for r in results.values() if r.get("load_before") is not None]
    if loads and busy(max(loads)):
        log(f"note: the 1-min load average reached {max(loads)} on {os.cpu_count()} cores: wall times are inflated")

    result = {
        "benchmark": "spark",
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "config": vars(args) | {"table": str(table_dir)},
        "machine": {"cpu_count": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version(), "load_avg_end": load_avg()},
        "data": data_info,
        "startup": {"ray_start_s": round(ray_s, 2), "spark_start_s": round(spark_s, 2)},
        "results": results,
        "ratios": ratios,
    }
    if args.json:
        out = Path(args.json)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(result, indent=2, default=str) + "\n")
        log(f"results written to {out}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
