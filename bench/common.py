"""What the side-by-side benchmarks share, so that they measure, and report, alike.

- measuring: ``runs`` (wall and CPU time of warm-up plus timed runs), ``summary`` (their
  medians), CPU counters (``self_cpu``, ``proc_cpu``) and the load average (``note_load``:
  a warning when other processes are busy);
- the bench table: ``ensure_data`` (the sample table under bench/data, generated once and
  reused while its parameters stand), read by bench_analyze, bench_quantiles, bench_subset*,
  bench_frequencies and bench_spark;
- the peers: ``duckdb_connect`` and ``start_spark`` (local[CORES]) set up as every benchmark
  times them;
- the result document: ``result_head`` (what ran, when, on which table and machine) and
  ``write_json`` (written whole or not at all).

Not a benchmark (``run_all.py`` runs bench_*.py only). Importing it puts the repository on
``sys.path`` (the benchmarks run as scripts from bench/).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import pyarrow as pa  # noqa: E402

from engine.sample import SAMPLE_VERSION, generate_table  # noqa: E402

CORES = 2  # the machine the targets are set for; DuckDB threads and Spark local[N]
TABLE_ROWS = 5_000_000  # the bench table's size, unless a benchmark is told otherwise
TABLE_PARTITIONS = 16
SEED = 0
ROW_GROUP_SIZE = 128 * 1024
SPARK_DRIVER_MEMORY = "4g"
SPARK_HISTOGRAM_BINS = 254


# --------------------------------------------------------------------------- measuring


def log(msg: str) -> None:
    print(msg, flush=True)


def load_avg() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except OSError:
        return None


def busy(load: float | None) -> bool:
    """Whether a 1-min load average says other processes take a share of the cores (wall times grow)."""
    return load is not None and load > 0.5 * (os.cpu_count() or CORES)


def note_load(name: str) -> float | None:
    load = load_avg()
    if busy(load):
        log(f"  warning: 1-min load average is {load} before {name}: other processes are busy, timings will be noisy")
    return load


def self_cpu() -> float:
    """CPU seconds (user + system, all threads) this process has used."""
    t = os.times()
    return t.user + t.system


def proc_cpu(pid: int) -> float | None:
    """CPU seconds (user + system, with reaped children) of another process, from /proc."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
        return sum(int(x) for x in fields[11:15]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def runs(
    fn: Callable[[], Any], repeat: int, warmup: int = 0, cpu: Callable[[], float | None] = self_cpu
) -> tuple[list[float], list[Any], list[float]]:
    """Call fn warmup + repeat times; return the timed wall times, fn's results and CPU times.

    CPU time is reported beside wall time because this machine is often shared: on a
    busy machine wall time grows with the load, CPU time much less."""
    times, outs, cpus = [], [], []
    for i in range(warmup + repeat):
        c0 = cpu()
        t0 = time.perf_counter()
        out = fn()
        dt = time.perf_counter() - t0
        c1 = cpu()
        dc = (c1 - c0) if c0 is not None and c1 is not None else float("nan")
        if i >= warmup:
            times.append(dt)
            outs.append(out)
            cpus.append(dc)
            log(f"    run {i - warmup + 1}/{repeat}: {dt:.2f} s (cpu {dc:.1f} s)")
        else:
            log(f"    warm-up: {dt:.2f} s (cpu {dc:.1f} s)")
    return times, outs, cpus


def summary(times: list[float], cpus: list[float] | None = None, **extra: Any) -> dict[str, Any]:
    out = {
        "available": True,
        "runs_s": [round(t, 4) for t in times],
        "median_s": round(statistics.median(times), 4),
        "min_s": round(min(times), 4),
    }
    if cpus and not any(math.isnan(c) for c in cpus):
        out["cpu_runs_s"] = [round(c, 3) for c in cpus]
        out["median_cpu_s"] = round(statistics.median(cpus), 3)
    return {**out, **extra}


def short_error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}".splitlines()[0][:300]


# --------------------------------------------------------------------------- the bench table


def ensure_data(data_dir: Path, rows: int, partitions: int) -> tuple[Path, dict[str, Any]]:
    """The sample table under data_dir/table, generated only when missing or stale."""
    table_dir = data_dir / "table"
    stamp_path = data_dir / "table.json"
    wanted = {
        "rows": rows,
        "partitions": partitions,
        "seed": SEED,
        "row_group_size": ROW_GROUP_SIZE,
        "sample_version": SAMPLE_VERSION,
    }
    try:
        stamp = json.loads(stamp_path.read_text())
    except (OSError, ValueError):
        stamp = None
    have_files = table_dir.is_dir() and any(table_dir.rglob("*.parquet"))
    if stamp is not None and stamp.get("params") == wanted and have_files:
        log(f"data: reusing {table_dir} ({rows:,} rows, {partitions} partitions)")
        return table_dir, {**stamp, "generated_now": False}

    log(f"data: generating {rows:,} rows in {partitions} partitions under {table_dir} ...")
    data_dir.mkdir(parents=True, exist_ok=True)
    stamp_path.unlink(missing_ok=True)  # a crash half-way must not leave a valid stamp
    t0 = time.perf_counter()
    generate_table(str(table_dir), rows=rows, partitions=partitions, seed=SEED, row_group_size=ROW_GROUP_SIZE)
    elapsed = time.perf_counter() - t0
    files = sorted(table_dir.rglob("*.parquet"))
    stamp = {
        "params": wanted,
        "files": len(files),
        "bytes": sum(f.stat().st_size for f in files),
        "generate_s": round(elapsed, 3),
        "generated_at": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    stamp_path.write_text(json.dumps(stamp, indent=2) + "\n")
    log(f"data: {len(files)} files, {stamp['bytes'] / 2**20:.0f} MiB in {elapsed:.1f} s")
    return table_dir, {**stamp, "generated_now": True}


# --------------------------------------------------------------------------- peers


def duckdb_query(sql: str) -> list[tuple[Any, ...]]:
    """``sql``'s rows from a fresh DuckDB connection (one per timed run: no cached metadata) on
    CORES threads, in UTC (timestamps with a time zone read as the engine writes them)."""
    import duckdb

    con = duckdb.connect()
    try:
        con.execute(f"SET threads={CORES}")
        con.execute("SET enable_progress_bar=false")
        con.execute("SET TimeZone='UTC'")
        return con.execute(sql).fetchall()
    finally:
        con.close()


def start_spark(data_dir: Path) -> Any:
    """A local[CORES] Spark session (in-memory catalog, no UI, errors only in the log) with its
    warehouse and scratch space under data_dir."""
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    log4j = data_dir / "log4j2-bench.properties"
    log4j.write_text(
        "rootLogger.level = error\n"
        # pyspark's driver logs as the gateway's "REPL": give it the root's level, so
        # Spark prints no "Setting default log level" banner.
        "logger.gateway.name = org.apache.spark.api.python.PythonGatewayServer\n"
        "logger.gateway.level = error\n"
        "rootLogger.appenderRef.stderr.ref = console\n"
        "appender.console.type = Console\n"
        "appender.console.name = console\n"
        "appender.console.target = SYSTEM_ERR\n"
        "appender.console.layout.type = PatternLayout\n"
        "appender.console.layout.pattern = %d{yy/MM/dd HH:mm:ss} %p %c{1}: %m%n\n"
    )
    from pyspark.sql import SparkSession

    builder = (
        SparkSession.builder.master(f"local[{CORES}]")
        .appName("bench_analyze")
        .config("spark.driver.memory", SPARK_DRIVER_MEMORY)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.catalogImplementation", "in-memory")
        .config("spark.sql.warehouse.dir", str(data_dir / "spark-warehouse"))
        .config("spark.local.dir", str(data_dir / "spark-tmp"))
        .config("spark.driver.extraJavaOptions", f"-Dlog4j2.configurationFile=file:{log4j}")
        .config("spark.sql.statistics.histogram.numBins", str(SPARK_HISTOGRAM_BINS))
    )
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def spark_jvm_pid(spark: Any) -> int | None:
    """The driver JVM's pid (pyspark's launcher execs java in the process it starts)."""
    proc = getattr(getattr(spark.sparkContext, "_gateway", None), "proc", None)
    pid = getattr(proc, "pid", None)
    try:
        if pid and "java" in Path(f"/proc/{pid}/exe").resolve().name:
            return pid
    except OSError:
        pass
    return None


# --------------------------------------------------------------------------- arguments and the result document


def table_parser(description: str, *, repeat: int, warmup: int) -> argparse.ArgumentParser:
    """The arguments of a benchmark on the bench table (--rows, --partitions, --repeat, --warmup,
    --data); the benchmark adds its own and parses with :func:`parse_table_args`."""
    ap = argparse.ArgumentParser(description=description)
    ap.add_argument("--rows", type=int, default=TABLE_ROWS, help=f"rows of the sample table (default {TABLE_ROWS:,})")
    ap.add_argument("--partitions", type=int, default=TABLE_PARTITIONS, help=f"partitions of the sample table (default {TABLE_PARTITIONS})")
    ap.add_argument("--repeat", type=int, default=repeat, help=f"timed runs per system; the median is reported (default {repeat})")
    ap.add_argument("--warmup", type=int, default=warmup, help=f"untimed runs per system before the timed ones (default {warmup})")
    ap.add_argument("--data", default=str(REPO / "bench" / "data"), help="where the sample table is cached (default bench/data)")
    return ap


def parse_table_args(ap: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    args = ap.parse_args(argv)
    if args.rows < 1 or args.partitions < 1 or args.repeat < 1 or args.warmup < 0:
        ap.error("--rows, --partitions and --repeat must be >= 1, --warmup >= 0")
    return args


def result_head(benchmark: str, started: datetime, args: argparse.Namespace, table_dir: Path, **config: Any) -> dict[str, Any]:
    """The opening of a benchmark's result on the bench table: its name, when it ran, its
    settings (``args``' rows, partitions, repeat and warmup; ``config`` beside them) and the machine."""
    return {
        "benchmark": benchmark,
        "started_at": started.isoformat(timespec="seconds"),
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "config": {
            "rows": args.rows,
            "partitions": args.partitions,
            "repeat": args.repeat,
            "warmup": args.warmup,
            "cores": CORES,
            **config,
            "table": str(table_dir),
        },
        "machine": {
            "cpu_count": os.cpu_count(),
            "platform": platform.platform(),
            "python": platform.python_version(),
            "pyarrow": pa.__version__,
            "load_avg_end": load_avg(),
        },
    }


def write_json(result: dict[str, Any], path: str | Path) -> None:
    """``result`` as JSON at ``path``, replacing it whole (an interrupted run leaves the old file)."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile("w", dir=out.parent, delete=False, suffix=".tmp") as fh:
        json.dump(result, fh, indent=2, default=str)
        fh.write("\n")
    os.replace(fh.name, out)
    log(f"results written to {out}")
