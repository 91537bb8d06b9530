#!/usr/bin/env python
"""Metastore's analyze side by side with its peers, on one sample table, in one run.

Systems (each run ``--repeat`` times; the median wall time is reported):

- ``pyarrow floor``: read every column of every file and compute count, null
  count, min, max and mean (numeric only) per column with pyarrow.compute. No
  distinct counts, no frequencies, no histograms: a lower bound for any analyze.
- ``duckdb summarize``: ``SUMMARIZE SELECT * FROM read_parquet(...)`` (2 threads).
- ``spark analyze`` / ``spark analyze+hist``: plain pyspark (local[2], in-memory
  catalog): ``CREATE TABLE ... USING parquet LOCATION``, ``MSCK REPAIR TABLE`` (without
  it Spark sees no partitions and ANALYZE silently computes nothing), then
  ``ANALYZE TABLE t COMPUTE STATISTICS FOR ALL COLUMNS`` with
  ``spark.sql.statistics.histogram.enabled`` false and true (254 bins, Spark's
  default). Only the ANALYZE statement is timed; Spark's start and the table setup
  are reported separately.
- ``metastore analyze``: ``engine.api.analyze`` into a fresh store per run, after
  Ray has been started (Ray's start reported separately); ``--runtime local``: its tasks
  in this process, one after the other, without Ray.

``--shape``: the bench table (default; 5,000,000 rows, 13 columns) or a table of another
shape (bench/shapes.py: ``wide``, 200 columns; ``longstrings``, 200-2,000 characters;
``mostlynull``, 95% nulls), with Spark skipped unless ``--spark``. Peak memory (unless
``--no-memory``): one more run of the floor, DuckDB and ours, each in a child process
(``--child``): its peak resident memory (VmHWM) and the sampled resident memory of it and
its descendants together (Ray's raylet and workers with Ray). ``--child ours --profile OUT``
cProfiles one analyze (with ``--runtime local``: the tasks too).

Peers run first (Spark is stopped before Ray starts), so no engine competes for the
two cores with the one being timed. The machine's load average is recorded before
each system, and beside wall time the CPU seconds of the process doing the work
(this process for pyarrow and DuckDB, the driver JVM for Spark; not measured for
Ray's workers): on a shared, busy machine wall times grow with the load.

The first run of a system in a process pays one-off costs (page faults on fresh
memory, JIT): with ``--repeat 1`` the medians are pessimistic; ``--warmup 1`` adds an
untimed run first.

Usage: python bench/bench_analyze.py [--shape S] [--runtime R] [--rows N] [--partitions P]
       [--repeat R] [--warmup W] [--data DIR] [--skip-spark|--spark] [--no-memory] [--json OUT]
"""

from __future__ import annotations

import argparse
import os
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

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
from common import (
    CORES,
    SPARK_DRIVER_MEMORY,
    SPARK_HISTOGRAM_BINS,
    TABLE_PARTITIONS,
    TABLE_ROWS,
    busy,
    duckdb_query,
    ensure_data,
    log,
    note_load,
    proc_cpu,
    result_head,
    runs,
    short_error,
    spark_jvm_pid,
    start_spark,
    summary,
    table_parser,
    write_json,
)
from shapes import DEFAULTS, ensure_shape

PYARROW = "pyarrow floor"
DUCKDB = "duckdb summarize"
SPARK = "spark analyze"
SPARK_HIST = "spark analyze+hist"
OURS = "metastore analyze"
#: issue #30: a full analyze within 2.5x the floor, on every shape
FLOOR_TARGET = 2.5


# --------------------------------------------------------------------------- pyarrow


def _is_numeric(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_decimal(t)


def pyarrow_floor_once(table_dir: Path) -> dict[str, dict[str, Any]]:
    table = ds.dataset(table_dir, format="parquet", partitioning="hive").to_table(use_threads=True)
    out = {}
    for name in table.column_names:
        col = table[name]
        mm = pc.min_max(col)
        stats = {"count": len(col), "nulls": col.null_count, "min": mm["min"], "max": mm["max"]}
        if _is_numeric(col.type):
            stats["mean"] = pc.mean(col)
        out[name] = stats
    return out


def bench_pyarrow(table_dir: Path, rows: int, repeat: int, warmup: int) -> dict[str, Any]:
    log(f"{PYARROW}: read all columns + count/nulls/min/max/mean")
    load = note_load(PYARROW)
    times, outs, cpus = runs(lambda: pyarrow_floor_once(table_dir), repeat, warmup)
    got = outs[-1]["id"]["count"]
    if got != rows:
        raise RuntimeError(f"pyarrow floor read {got} rows, expected {rows}")
    return summary(times, cpus, load_before=load, columns=len(outs[-1]))


# --------------------------------------------------------------------------- duckdb


def bench_duckdb(table_dir: Path, partitions: int, repeat: int, warmup: int) -> dict[str, Any]:
    import duckdb

    log(f"{DUCKDB}: SUMMARIZE, threads={CORES}")
    load = note_load(DUCKDB)
    sql = f"SUMMARIZE SELECT * FROM read_parquet('{table_dir}/**/*.parquet', hive_partitioning=true)"

    times, outs, cpus = runs(lambda: duckdb_query(sql), repeat, warmup)
    result = outs[-1]
    names = [r[0] for r in result]
    if "id" not in names or "part" not in names:
        raise RuntimeError(f"DuckDB SUMMARIZE returned unexpected columns: {names}")
    return summary(times, cpus, load_before=load, duckdb_version=duckdb.__version__, columns=len(result))


# --------------------------------------------------------------------------- spark


def _describe(spark, what: str) -> dict[str, str | None]:
    return {r[0].strip(): (r[1].strip() if r[1] is not None else None) for r in spark.sql(f"DESCRIBE EXTENDED {what}").collect()}


def _spark_setup(spark, table_dir: Path, partitions: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    spark.sql("DROP TABLE IF EXISTS bench_t")
    spark.sql(f"CREATE TABLE bench_t USING parquet LOCATION '{table_dir.as_uri()}'")
    before = spark.sql("SHOW PARTITIONS bench_t").count()
    spark.sql("MSCK REPAIR TABLE bench_t")
    after = spark.sql("SHOW PARTITIONS bench_t").count()
    if after != partitions:
        raise RuntimeError(f"Spark registered {after} partitions after MSCK REPAIR TABLE, expected {partitions}")
    return {"setup_s": time.perf_counter() - t0, "partitions_before_repair": before, "partitions": after}


def _spark_verify(spark, rows: int, histogram: bool) -> dict[str, Any]:
    table = _describe(spark, "bench_t")
    stats_line = table.get("Statistics") or ""
    if f"{rows} rows" not in stats_line:
        raise RuntimeError(f"Spark ANALYZE did not record {rows} rows: Statistics = {stats_line!r}")
    col = _describe(spark, "bench_t id")
    if col.get("distinct_count") in (None, "NULL"):
        raise RuntimeError(f"Spark ANALYZE computed no column statistics: DESCRIBE EXTENDED bench_t id = {col}")
    hist = col.get("histogram")
    if histogram and hist in (None, "NULL"):
        raise RuntimeError(f"Spark ANALYZE computed no histogram: DESCRIBE EXTENDED bench_t id = {col}")
    return {"table_statistics": stats_line, "id_distinct_count": col.get("distinct_count"), "id_histogram": hist}


def _bench_spark_analyze(spark, name: str, histogram: bool, table_dir: Path, rows: int, partitions: int, repeat: int, warmup: int) -> dict[str, Any]:
    spark.conf.set("spark.sql.statistics.histogram.enabled", "true" if histogram else "false")
    log(f"{name}: ANALYZE TABLE ... FOR ALL COLUMNS, histogram.enabled={str(histogram).lower()}")
    load = note_load(name)
    setups: list[dict[str, Any]] = []
    verified: list[dict[str, Any]] = []
    times: list[float] = []
    cpus: list[float] = []
    jvm_pid = spark_jvm_pid(spark)
    for i in range(warmup + repeat):
        setups.append(_spark_setup(spark, table_dir, partitions))  # untimed: fresh table, partitions registered
        c0 = proc_cpu(jvm_pid) if jvm_pid else None
        t0 = time.perf_counter()
        spark.sql("ANALYZE TABLE bench_t COMPUTE STATISTICS FOR ALL COLUMNS")
        dt = time.perf_counter() - t0
        c1 = proc_cpu(jvm_pid) if jvm_pid else None
        dc = (c1 - c0) if c0 is not None and c1 is not None else float("nan")
        verified.append(_spark_verify(spark, rows, histogram))
        if i >= warmup:
            times.append(dt)
            cpus.append(dc)
            log(f"    run {i - warmup + 1}/{repeat}: {dt:.2f} s (JVM cpu {dc:.1f} s; table setup {setups[-1]['setup_s']:.2f} s)")
        else:
            log(f"    warm-up: {dt:.2f} s (JVM cpu {dc:.1f} s)")
    s0, v = setups[0], verified[-1]
    log(
        f"    partitions registered: {s0['partitions_before_repair']} before MSCK REPAIR, {s0['partitions']} after; "
        f"Statistics: {v['table_statistics']}; id distinct_count={v['id_distinct_count']}"
    )
    return summary(
        times,
        cpus,
        load_before=load,
        setup_s=[round(s["setup_s"], 3) for s in setups],
        partitions_before_repair=s0["partitions_before_repair"],
        partitions=s0["partitions"],
        histogram_bins=SPARK_HISTOGRAM_BINS if histogram else None,
        verified=v,
    )


def bench_spark(table_dir: Path, data_dir: Path, rows: int, partitions: int, repeat: int, warmup: int) -> dict[str, Any]:
    import pyspark

    log(f"spark: starting local[{CORES}] (pyspark {pyspark.__version__}, driver memory {SPARK_DRIVER_MEMORY})")
    t0 = time.perf_counter()
    spark = start_spark(data_dir)
    start_s = time.perf_counter() - t0
    log(f"  spark start: {start_s:.2f} s")
    out: dict[str, Any] = {"start_s": round(start_s, 3), "pyspark_version": pyspark.__version__}
    try:
        for name, histogram in ((SPARK, False), (SPARK_HIST, True)):
            try:
                out[name] = _bench_spark_analyze(spark, name, histogram, table_dir, rows, partitions, repeat, warmup)
            except Exception as exc:  # noqa: BLE001 - keep the other setting's result
                log(f"{name}: FAILED ({short_error(exc)})")
                traceback.print_exc()
                out[name] = {"available": False, "failed": True, "error": short_error(exc)}
        spark.sql("DROP TABLE IF EXISTS bench_t")
    finally:
        spark.stop()
    return out


# --------------------------------------------------------------------------- metastore


#: what our analyze computes: the built-in statistics (no user statistics, as in every figure
#: since the first), and the per-file column index unless --no-file-index
ANALYZE_OPTIONS: dict[str, Any] = {"user_statistics": [], "file_index": True}


def _start_ray(runtime: str) -> float:
    """Ray's start (seconds; 0 with ``--runtime local``: the tasks run in this process)."""
    if runtime == "local":
        return 0.0
    from engine.runtime.ray_runtime import ensure_ray

    log("metastore: starting Ray")
    ray_start = float(ensure_ray(num_cpus=None))
    log(f"  ray start: {ray_start:.2f} s")
    return ray_start


def analyze_once(table_dir: Path, store: Path, runtime: str) -> Any:
    """One analyze of ``table_dir`` into a fresh ``store`` (removed afterwards)."""
    from engine.api import analyze

    shutil.rmtree(store, ignore_errors=True)
    try:
        return analyze(str(table_dir), str(store), runtime=runtime, **ANALYZE_OPTIONS)
    finally:
        shutil.rmtree(store, ignore_errors=True)


def bench_metastore(table_dir: Path, data_dir: Path, repeat: int, warmup: int, runtime: str = "auto") -> dict[str, Any]:
    try:
        import engine.api  # noqa: F401 - available?
    except ImportError as exc:
        msg = f"ImportError: {exc}"
        log(f"metastore: not available ({msg})")
        return {"available": False, "error": msg}

    try:
        ray_start = _start_ray(runtime)
    except Exception as exc:  # noqa: BLE001 - report, keep the peers' results
        log(f"metastore: Ray failed to start ({short_error(exc)})")
        traceback.print_exc()
        return {"available": False, "failed": True, "error": f"ensure_ray failed: {short_error(exc)}"}
    log(f"{OURS}: analyze({table_dir}, store, runtime={runtime})")
    load = note_load(OURS)
    details: list[dict[str, Any]] = []
    times: list[float] = []
    try:
        for i in range(warmup + repeat):
            t0 = time.perf_counter()
            res = analyze_once(table_dir, data_dir / f"store-{os.getpid()}-{i}", runtime)  # pid: runs side by side do not share a store
            dt = time.perf_counter() - t0
            info = {
                "job_id": str(getattr(res, "job_id", None)),
                "elapsed_s": getattr(res, "elapsed_s", None),
                "timings": dict(getattr(res, "timings", {}) or {}),
            }
            if i >= warmup:
                times.append(dt)
                details.append(info)
                log(f"    run {i - warmup + 1}/{repeat}: {dt:.2f} s (reported elapsed_s={info['elapsed_s']})")
            else:
                log(f"    warm-up: {dt:.2f} s")
    except Exception as exc:  # noqa: BLE001 - report, keep the peers' results
        log(f"metastore: analyze failed ({short_error(exc)})")
        traceback.print_exc()
        return {"available": False, "failed": True, "error": f"analyze failed: {short_error(exc)}", "ray_start_s": round(ray_start, 3)}
    finally:
        if runtime != "local":
            import ray

            ray.shutdown()
    timings = _median_timings([d["timings"] for d in details])
    # CPU seconds of the Ray tasks (process time, reported by the job), comparable to the peers' CPU
    cpus = [float(d["timings"]["cpu_s"]) for d in details if "cpu_s" in d["timings"]]
    return summary(
        times,
        cpus if len(cpus) == len(times) else None,
        load_before=load,
        runtime=runtime,
        ray_start_s=round(ray_start, 3),
        runs=details,
        median_timings=timings,
    )


def _median_timings(all_timings: list[dict[str, float]]) -> dict[str, float]:
    keys: list[str] = []
    for t in all_timings:
        keys += [k for k in t if k not in keys]
    out = {}
    for k in keys:
        vals = [float(t[k]) for t in all_timings if isinstance(t.get(k), (int, float))]
        if vals:
            out[k] = round(statistics.median(vals), 4)
    return out


# --------------------------------------------------------------------------- report


def _median(results: dict[str, Any], name: str) -> float | None:
    r = results.get(name) or {}
    return r.get("median_s") if r.get("available") else None


def targets(results: dict[str, Any]) -> list[dict[str, Any]]:
    ours, duck, hist, floor = (_median(results, n) for n in (OURS, DUCKDB, SPARK_HIST, PYARROW))

    def check(desc: str, a: float | None, b: float | None, ok: Callable[[float, float], bool], detail: Callable[[float, float], str]):
        if a is None or b is None:
            return {"target": desc, "status": "n/a", "detail": "not measured"}
        return {"target": desc, "status": "PASS" if ok(a, b) else "FAIL", "detail": detail(a, b)}

    return [
        check(
            "ours faster than DuckDB SUMMARIZE",
            ours,
            duck,
            lambda o, d: o < d,
            lambda o, d: f"ours {o:.2f} s vs DuckDB {d:.2f} s (ours/DuckDB = {o / d:.2f})",
        ),
        check(
            "Spark ANALYZE with histograms at least 3x slower than ours",
            ours,
            hist,
            lambda o, h: h >= 3 * o,
            lambda o, h: f"Spark+hist {h:.2f} s / ours {o:.2f} s = {h / o:.2f}x",
        ),
        check(
            f"ours within {FLOOR_TARGET}x of the pyarrow floor",
            ours,
            floor,
            lambda o, f: o <= FLOOR_TARGET * f,
            lambda o, f: f"ours {o:.2f} s / floor {f:.2f} s = {o / f:.2f}x",
        ),
    ]


def print_report(result: dict[str, Any]) -> None:
    systems = result["systems"]
    ours = _median(systems, OURS)
    floor = _median(systems, PYARROW)
    cfg = result["config"]
    log("")
    log(
        f"analyze benchmark ({cfg['shape']}): {cfg['rows']:,} rows, {cfg['partitions']} partitions, median of {cfg['repeat']} run(s), runtime {cfg['runtime']}"
    )
    log(f"{'system':<22}{'median s':>10}{'ours/system':>13}{'system/floor':>14}{'cpu s':>9}")
    for name in (PYARROW, DUCKDB, SPARK, SPARK_HIST, OURS):
        r = systems.get(name)
        if r is None:
            continue
        if not r.get("available"):
            why = r.get("error") or r.get("skipped") or "not available"
            log(f"{name:<22}{'-':>10}   ({why})")
            continue
        m = r["median_s"]
        ratio = f"{ours / m:.2f}" if ours is not None else "n/a"
        vs_floor = f"{m / floor:.1f}x" if floor else "n/a"
        cpu = f"{r['median_cpu_s']:.1f}" if r.get("median_cpu_s") is not None else "-"
        log(f"{name:<22}{m:>10.2f}{ratio:>13}{vs_floor:>14}{cpu:>9}")
    starts = result.get("startup", {})
    for k, label in (("spark_start_s", "spark start"), ("ray_start_s", "ray start")):
        if starts.get(k) is not None:
            log(f"{label:<22}{starts[k]:>10.2f}   (not included above)")
    log("")
    loads = [r.get("load_before") for r in systems.values() if r.get("load_before") is not None]
    if loads and busy(max(loads)):
        log(
            f"note: the 1-min load average reached {max(loads)} on {os.cpu_count()} cores during the run; "
            "wall times are inflated (cpu s = CPU seconds of the process doing the work, where measurable)"
        )
    cpu_ours, cpu_floor = ((systems.get(n) or {}).get("median_cpu_s") for n in (OURS, PYARROW))
    if cpu_ours and cpu_floor:  # steadier than wall time on a busy machine
        log(f"ours / floor by CPU seconds: {cpu_ours:.1f} / {cpu_floor:.1f} = {cpu_ours / cpu_floor:.2f}x (ours: the tasks' CPU)")
    for name, m in result.get("peak_memory", {}).items():
        if "hwm_mib" in m:
            log(f"peak memory {name:<22}{m['hwm_mib']:>8.0f} MiB (VmHWM)   process tree {m['tree_peak_mib']:>8.0f} MiB")
    for t in result["targets"]:
        log(f"[{t['status']}] {t['target']}: {t['detail']}")


# --------------------------------------------------------------------------- peak memory

#: the systems whose peak memory is measured, each run once in a process of its own
MEMORY_SYSTEMS = (PYARROW, DUCKDB, OURS)
_CHILD = {PYARROW: "floor", DUCKDB: "duckdb", OURS: "ours"}


def run_child(kind: str, table_dir: Path, data_dir: Path, runtime: str, profile: str | None) -> None:
    """One run of a system in this (child) process: what ``--memory`` measures."""
    if kind == "floor":
        pyarrow_floor_once(table_dir)
    elif kind == "duckdb":
        import duckdb  # noqa: F401 - imported before, as in the timed runs

        duckdb_query(f"SUMMARIZE SELECT * FROM read_parquet('{table_dir}/**/*.parquet', hive_partitioning=true)")
    else:
        _start_ray(runtime)
        if profile:
            import cProfile
            import pstats

            prof = cProfile.Profile(time.process_time)  # CPU time: on a busy machine wall time mostly waits
            prof.runcall(analyze_once, table_dir, data_dir / f"store-{os.getpid()}-profile", runtime)
            prof.dump_stats(profile)
            pstats.Stats(prof).sort_stats("cumulative").print_stats(40)
        else:
            analyze_once(table_dir, data_dir / f"store-{os.getpid()}-memory", runtime)


def _tree_rss(proc: Any) -> int:
    """Resident bytes of a process and all its descendants (Ray's raylet and workers included)."""
    import psutil

    total = 0
    for p in [proc, *proc.children(recursive=True)]:
        try:
            total += p.memory_info().rss
        except psutil.Error:
            pass
    return total


def peak_memory(kind: str, argv: list[str]) -> dict[str, Any]:
    """Peak memory of one run of ``kind`` in a child process: ``hwm_mib`` (the child's own peak
    resident memory, VmHWM: the figure with ``--runtime local`` and for DuckDB and the floor),
    ``tree_peak_mib`` (the sum of the resident memory of the child and its descendants, sampled
    every 20 ms: with Ray, driver, raylet and workers together) and ``maxrss_mib`` (wait4's
    ru_maxrss: never below this process's own peak at the fork, kept for reference)."""
    import subprocess

    import psutil

    hwm = Path(tempfile.mkdtemp(prefix="bench-hwm-")) / "hwm"
    cmd = [sys.executable, str(Path(__file__).resolve()), *argv, "--child", kind, "--hwm-out", str(hwm)]
    t0 = time.perf_counter()
    child = subprocess.Popen(cmd, stdout=subprocess.DEVNULL)
    proc = psutil.Process(child.pid)
    peak, status, usage = 0, 0, None
    while usage is None:
        try:
            peak = max(peak, _tree_rss(proc))
        except psutil.Error:
            pass
        time.sleep(0.02)
        pid, status, ru = os.wait4(child.pid, os.WNOHANG)  # this child's own rusage, once it ends
        if pid:
            usage = ru
    child.returncode = os.waitstatus_to_exitcode(status)
    if child.returncode != 0:
        raise RuntimeError(f"{kind} child exited with {child.returncode}")
    hwm_kib = int(hwm.read_text())
    shutil.rmtree(hwm.parent, ignore_errors=True)
    return {
        "hwm_mib": round(hwm_kib / 1024, 1),
        "tree_peak_mib": round(peak / 2**20, 1),
        "maxrss_mib": round(usage.ru_maxrss / 1024, 1),
        "wall_s": round(time.perf_counter() - t0, 3),
    }


def _write_hwm(path: str) -> None:
    """This process's peak resident memory (VmHWM, kB) into ``path``: the high-water mark of its
    own address space (ru_maxrss would keep the forking parent's, which Linux carries over exec)."""
    status = Path("/proc/self/status").read_text()
    (line,) = [x for x in status.splitlines() if x.startswith("VmHWM:")]
    Path(path).write_text(line.split()[1])


def bench_memory(child_argv: list[str]) -> dict[str, Any]:
    """The peak memory of the floor, DuckDB and ours, each in a process of its own."""
    out: dict[str, Any] = {}
    for name in MEMORY_SYSTEMS:
        log(f"{name}: peak memory of one run in a process of its own")
        try:
            out[name] = peak_memory(_CHILD[name], child_argv)
        except Exception as exc:  # noqa: BLE001 - one system failing must not hide the others
            log(f"    FAILED ({short_error(exc)})")
            out[name] = {"failed": True, "error": short_error(exc)}
            continue
        log(f"    peak {out[name]['hwm_mib']:.0f} MiB (VmHWM), process tree peak {out[name]['tree_peak_mib']:.0f} MiB")
    return out


# --------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    ap = table_parser(__doc__.split("\n\n")[0], repeat=3, warmup=0)
    ap.set_defaults(rows=None, partitions=None)  # each shape has its own
    ap.add_argument(
        "--shape", choices=["bench", *DEFAULTS], default="bench", help="the table: the bench table (default) or another shape (bench/shapes.py)"
    )
    ap.add_argument(
        "--runtime", choices=["auto", "ray", "local"], default="auto", help="where our tasks run (auto: Ray, started before the timed runs)"
    )
    ap.add_argument("--skip-spark", action="store_true", default=None, help="do not run Spark (the default for shapes other than bench)")
    ap.add_argument("--spark", dest="skip_spark", action="store_false", help="run Spark on any shape")
    ap.add_argument(
        "--no-memory",
        action="store_true",
        help="do not measure peak memory (one more run of the floor, DuckDB and ours, each in a process of its own)",
    )
    ap.add_argument("--no-file-index", action="store_true", help="analyze without the per-file column index (its overhead: run both)")
    ap.add_argument("--json", metavar="OUT", help="also write the results as JSON to OUT")
    ap.add_argument("--child", choices=sorted(_CHILD.values()), help=argparse.SUPPRESS)  # one run, for --memory
    ap.add_argument("--hwm-out", help=argparse.SUPPRESS)  # with --child: where its peak memory goes
    ap.add_argument("--profile", metavar="OUT", help="with --child ours: cProfile the run into OUT (and print its top)")
    args = ap.parse_args(argv)
    rows, partitions = DEFAULTS.get(args.shape, (TABLE_ROWS, TABLE_PARTITIONS))
    args.rows = rows if args.rows is None else args.rows
    args.partitions = partitions if args.partitions is None else args.partitions
    args.skip_spark = args.shape != "bench" if args.skip_spark is None else args.skip_spark
    if args.rows < 1 or args.partitions < 1 or args.repeat < 1 or args.warmup < 0:
        ap.error("--rows, --partitions and --repeat must be >= 1, --warmup >= 0")
    return args


def _table(args: argparse.Namespace, data_dir: Path) -> tuple[Path, dict[str, Any]]:
    if args.shape == "bench":
        return ensure_data(data_dir, args.rows, args.partitions)
    return ensure_shape(data_dir, args.shape, args.rows, args.partitions)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    ANALYZE_OPTIONS["file_index"] = not args.no_file_index
    data_dir = Path(args.data).resolve()
    started = datetime.now(UTC)
    table_dir, data_info = _table(args, data_dir)
    if args.child:
        run_child(args.child, table_dir, data_dir, args.runtime, args.profile)
        if args.hwm_out:
            _write_hwm(args.hwm_out)
        return 0

    systems: dict[str, Any] = {}
    startup: dict[str, Any] = {}

    def guarded(name: str, fn: Callable[[], dict[str, Any]]) -> dict[str, Any] | None:
        try:
            return fn()
        except Exception as exc:  # noqa: BLE001 - one system failing must not hide the others
            log(f"{name}: FAILED ({short_error(exc)})")
            traceback.print_exc()
            systems[name] = {"available": False, "failed": True, "error": short_error(exc)}
            return None

    r = guarded(PYARROW, lambda: bench_pyarrow(table_dir, args.rows, args.repeat, args.warmup))
    if r:
        systems[PYARROW] = r
    r = guarded(DUCKDB, lambda: bench_duckdb(table_dir, args.partitions, args.repeat, args.warmup))
    if r:
        systems[DUCKDB] = r
    if args.skip_spark:
        systems[SPARK] = systems[SPARK_HIST] = {"available": False, "skipped": "skipped (--skip-spark)"}
    else:
        r = guarded(SPARK, lambda: bench_spark(table_dir, data_dir, args.rows, args.partitions, args.repeat, args.warmup))
        if r:
            startup["spark_start_s"] = r.pop("start_s")
            startup["pyspark_version"] = r.pop("pyspark_version")
            systems.update(r)
        elif SPARK_HIST not in systems:
            systems[SPARK_HIST] = systems[SPARK]
    r = guarded(OURS, lambda: bench_metastore(table_dir, data_dir, args.repeat, args.warmup, args.runtime))
    if r:
        if "ray_start_s" in r:
            startup["ray_start_s"] = r["ray_start_s"]
        systems[OURS] = r

    memory = {} if args.no_memory else bench_memory(_child_argv(args))

    head = result_head("analyze", started, args, table_dir, shape=args.shape, runtime=args.runtime)
    result = {**head, "data": data_info, "startup": startup, "systems": systems, "peak_memory": memory}
    result["targets"] = targets(systems)
    print_report(result)
    if args.json:
        write_json(result, args.json)
    # A system that is merely not there (engine.api not written yet, --skip-spark) is no failure.
    return 1 if any(r.get("failed") for r in systems.values()) else 0


def _child_argv(args: argparse.Namespace) -> list[str]:
    argv = ["--shape", args.shape, "--rows", str(args.rows), "--partitions", str(args.partitions), "--data", args.data, "--runtime", args.runtime]
    return argv + (["--no-file-index"] if args.no_file_index else [])


if __name__ == "__main__":
    sys.exit(main())
