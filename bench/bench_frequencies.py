#!/usr/bin/env python
"""Exact table-level frequencies: the Bloom/Redis algorithm versus the plain Ray reduction and peers.

In one run, per column of the shared 5,000,000-row table (and of a 20,000,000-row
unique int64 key, --unique-rows):

- ``partition counts``: the partition tasks' exact (value, count) tables, built
  once and shared by both strategies (the analyze job's phase 1 holds them);
- ``ray reduce``: one task merges them (engine.stats.valuecounts.merge_counts),
  then the storage rule: what analyze does today;
- ``redis``: engine.frequencies.consolidate (Bloom for all-distinct columns, one
  hash or batched hashes otherwise), coordinator already running;
- DuckDB ``GROUP BY`` (and ``COUNT(DISTINCT)`` for the unique key) over the Parquet
  files, Spark ``groupBy().count()`` (local[2], --skip-spark to leave it out);
- the consolidation rate into Redis versus a raw pipelined HINCRBY floor and
  HSET-with-mapping, measured on the same server in the same run;
- the size of frequencies.parquet for the primary-key column, and the
  coordinator's memory.

Usage: python bench/bench_frequencies.py [--repeat N] [--unique-rows N] [--skip-spark] [--json OUT]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
import ray  # noqa: E402

from bench_analyze import ensure_data, log  # noqa: E402

COLUMNS = ("id", "user_id", "category", "comment")


def timed(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), out


def ensure_unique(data_dir: Path, rows: int, partitions: int = 8) -> Path:
    d = data_dir / f"unique_{rows}"
    if d.is_dir() and len(list(d.rglob("*.parquet"))) == partitions:
        return d
    log(f"data: generating a {rows:,}-row unique key in {partitions} partitions under {d}")
    rng = np.random.default_rng(0)
    keys = rng.permutation(rows).astype(np.int64) * 11 + 5
    per = rows // partitions
    for p in range(partitions):
        (d / f"part={p:02d}").mkdir(parents=True, exist_ok=True)
        chunk = keys[p * per : (p + 1) * per if p < partitions - 1 else rows]
        pq.write_table(pa.table({"key": chunk}), d / f"part={p:02d}" / "data.parquet", row_group_size=1 << 20)
    return d


def partition_counts(table_dir: Path, column: str):
    from engine.frequencies.job import column_input
    from engine.sources import open_table

    return column_input(open_table(str(table_dir)), column)


def _reduce(column: str, type_: pa.DataType, non_null: int, *tables: pa.Table) -> tuple[str, int, int]:
    from engine.files.writer import stored_frequencies
    from engine.stats.valuecounts import merge_counts

    merged = merge_counts(list(tables), type_)
    kind, stored = stored_frequencies(merged, non_null, 0.5)
    return kind, stored.num_rows, merged.num_rows


_reduce_task = ray.remote(_reduce)


def bench_column(table_dir: Path, column: str, coordinator: Any, repeat: int, duckdb_mod: Any, spark: Any) -> dict[str, Any]:
    from engine.files import writer
    from engine.files.layout import FileIdentity
    from engine.frequencies import consolidate
    from engine.frequencies.plan import FrequencySettings

    out: dict[str, Any] = {"column": column}
    t0 = time.perf_counter()
    col = partition_counts(table_dir, column)
    out["partition_counts_s"] = round(time.perf_counter() - t0, 3)
    non_null = sum(p.non_null for p in col.parts)
    out["rows"], out["sum_partition_distinct"] = non_null, sum(p.distinct for p in col.parts)

    s, red = timed(lambda: ray.get(_reduce_task.remote(column, col.type, non_null, *col.refs)), repeat)
    out["ray_reduce_s"] = round(s, 3)
    out["ray_reduce_kind"], out["ray_reduce_rows"], out["distinct"] = red

    job = [0]

    def run_redis():
        job[0] += 1
        return consolidate([col], f"bench{os.getpid()}x{job[0]}", FrequencySettings(), coordinator=coordinator)[column]

    s, r = timed(run_redis, repeat)
    out["redis_s"] = round(s, 3)
    out["redis_scenario"], out["redis_kind"], out["redis_rows"] = r.scenario, r.kind, r.stored.num_rows
    out["redis_phases_s"] = {k: round(v, 3) for k, v in r.seconds.items()}
    out["fields_sent"], out["positives"], out["bloom_bytes"] = r.fields_sent, r.positives, r.bloom_bytes
    if r.fields_sent and "stream_s" in r.seconds:
        out["consolidation_fields_per_s"] = round(r.fields_sent / r.seconds["stream_s"])
    assert r.distinct_count == out["distinct"], (column, r.distinct_count, out["distinct"])
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "frequencies.parquet")
        ident = FileIdentity("bench", str(table_dir), "table", "", "snapshot", "job", FileIdentity.now())
        writer.write_frequencies(path, [(column, r.kind, writer.frequency_rows(column, r.stored))], ident)
        out["frequencies_parquet_bytes"] = os.path.getsize(path)

    glob = f"{table_dir}/*/*.parquet"
    s, _ = timed(lambda: duckdb_mod.sql(f"select {column}, count(*) from read_parquet('{glob}') group by 1").arrow().read_all(), repeat)
    out["duckdb_group_by_s"] = round(s, 3)
    s, _ = timed(lambda: duckdb_mod.sql(f"select count(distinct {column}) from read_parquet('{glob}')").fetchall(), repeat)
    out["duckdb_count_distinct_s"] = round(s, 3)
    if spark is not None:
        df = spark.read.parquet(str(table_dir))
        s, _ = timed(lambda: df.groupBy(column).count().write.format("noop").mode("overwrite").save(), repeat)
        out["spark_group_by_s"] = round(s, 3)
    out["redis_over_ray_reduce"] = round(out["redis_s"] / out["ray_reduce_s"], 2)
    out["redis_over_duckdb_group_by"] = round(out["redis_s"] / out["duckdb_group_by_s"], 2)
    log(f"  {column}: {json.dumps(out)}")
    return out


def bench_floor(url: str, fields: int = 500_000) -> dict[str, Any]:
    """Raw redis-py rates on the same server: pipelined HINCRBY, HSET with mappings, our script."""
    import redis

    from engine.frequencies import redis_ops

    client = redis.Redis.from_url(url)
    keys = np.arange(fields, dtype=np.int64)
    raw = [k.tobytes() for k in keys]
    client.delete("floor:a", "floor:b", "floor:c", "floor:done")
    t0 = time.perf_counter()
    pipe = client.pipeline(transaction=False)
    for i, k in enumerate(raw):
        pipe.hincrby("floor:a", k, 1)
        if i % 10_000 == 9_999:
            pipe.execute()
    pipe.execute()
    hincrby = fields / (time.perf_counter() - t0)
    t0 = time.perf_counter()
    for i in range(0, fields, 10_000):
        client.hset("floor:b", mapping=dict.fromkeys(raw[i : i + 10_000], 1))
    hset = fields / (time.perf_counter() - t0)
    scripts = redis_ops.Scripts(client)
    arr = pa.array(keys)
    t0 = time.perf_counter()
    for b, i in enumerate(range(0, fields, 50_000)):
        scripts.increment("floor:c", "floor:done", str(b), arr.slice(i, 50_000), None)
    ours = fields / (time.perf_counter() - t0)
    client.delete("floor:a", "floor:b", "floor:c", "floor:done")
    out = {"pipelined_hincrby_per_s": round(hincrby), "hset_mapping_per_s": round(hset), "script_batches_per_s": round(ours)}
    log(f"  floor: {out}")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default=str(REPO / "bench" / "data"))
    ap.add_argument("--rows", type=int, default=5_000_000)
    ap.add_argument("--partitions", type=int, default=16)
    ap.add_argument("--unique-rows", type=int, default=20_000_000, help="rows of the unique key table (0: skip)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--columns", nargs="*", default=list(COLUMNS))
    ap.add_argument("--skip-spark", action="store_true")
    ap.add_argument("--json", metavar="OUT")
    args = ap.parse_args()

    import duckdb

    from engine.frequencies.job import start_coordinator
    from engine.runtime.ray_runtime import ensure_ray

    data_dir = Path(args.data)
    table_dir, _ = ensure_data(data_dir, args.rows, args.partitions)
    unique_dir = ensure_unique(data_dir, args.unique_rows) if args.unique_rows else None
    ray_start = ensure_ray()
    t0 = time.perf_counter()
    coordinator = start_coordinator()
    coord_start = time.perf_counter() - t0
    info = ray.get(coordinator.info.remote())
    spark = None
    if not args.skip_spark:
        from bench_analyze import _start_spark

        spark = _start_spark(data_dir)
    result: dict[str, Any] = {"ray_start_s": round(ray_start, 2), "coordinator_start_s": round(coord_start, 2), "columns": [], "repeat": args.repeat}
    try:
        result["floor"] = bench_floor(info["url"])
        mem0 = ray.get(coordinator.memory.remote())
        for column in args.columns:
            result["columns"].append(bench_column(table_dir, column, coordinator, args.repeat, duckdb, spark))
        if unique_dir is not None:
            result["columns"].append(bench_column(unique_dir, "key", coordinator, args.repeat, duckdb, spark))
        mem1 = ray.get(coordinator.memory.remote())
        result["coordinator_rss_mb"] = {"before": round(mem0["rss"] / 2**20, 1), "after": round(mem1["rss"] / 2**20, 1)}
    finally:
        ray.get(coordinator.shutdown.remote())
        ray.kill(coordinator)
        if spark is not None:
            spark.stop()
    print(json.dumps(result, indent=2))
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
