#!/usr/bin/env python
"""Cost as the work grows: the same rows analyzed as more and more partitions.

For each partition count (``--partitions 16,256,1024,4096,10000``) the sample table
of ``--rows`` rows is written as that many Hive partitions and analyzed once (a
fresh store, the reduce strategy, no user statistics), on the local Ray. Reported
per step:

- ``wall_s``: the job's wall time;
- ``driver_cpu_ms_per_partition``: the driver process's own CPU time (process time
  of this process during the job: planning, submitting, merging, writing the table
  files, the catalog commit) divided by the partitions: the number that must stay
  flat for the driver not to be the job's bottleneck;
- ``driver_main_ms_per_partition`` / ``driver_ray_ms_per_partition``: that CPU time split
  into the driver's main (Python) thread, where the job's own code runs, and Ray's
  threads in the driver process (``worker.io`` and the others: submitting tasks,
  tracking the objects the driver owns, receiving the tasks' replies), by
  /proc/self/task (any other thread of the driver counts as Ray's: until 2026-11-28 the
  listing's footer pool did, 1.7 ms a partition of 10 files); the benchmark's own
  object-store probe (below) is left out of both (``probe_cpu_s``);
- ``merge_ms_per_partition`` and ``plan_ms_per_partition``: two stages of it;
- ``tasks`` and ``scheduling_ms_per_task``: the tasks the job submitted, and the cores'
  time not spent inside them, per task: (wall x CPUs - the tasks' CPU) / tasks (what
  one task costs beyond its own work: scheduling, worker start-up, the driver's waits;
  inflated by other load on the machine);
- ``object_store_peak_mb``: the most the object store held (Ray's memory summary,
  sampled at the job's progress callbacks);
- ``summary_bytes``: what the driver holds a partition until the merge (:func:`summary_bytes`);
- ``txn_bytes`` and ``commit_ms``: the catalog transaction file the job committed,
  and the time publish_job took;
- ``lookup_partition_ms`` / ``lookup_table_ms``: one partition's statistics of one
  column, and the table's, read through ``open_statistics`` (median of 20 after a
  first, cold, one; ``open_ms``: opening the table's statistics);
- ``flight_partitions_matching_ms``: Flight's ``partitions_matching`` of a range filter
  on one column, from an in-process server of the store over loopback (median of 10).

CPU times are process time (comparable on a shared machine); wall times are noisy.

``--catalog 10000,100000`` measures the catalog alone, without Ray: ``publish_job`` of a
synthetic job output of that many partitions into a fresh store, ``--commits`` times
(2: each after the first replaces every partition, as a full re-analyze does), and
opening the state after each (``catalog_commit_ms`` / ``..._cpu_ms``,
``catalog_open_cpu_ms``, ``txn_bytes``; ``retention_cpu_ms``: the part of the commit's CPU
spent in the retention pass after the publish, expiry and gc).

``--task-bytes`` sets AnalyzeOptions.task_bytes (small partitions share a task up to it:
engine/runtime/batching.py; 0: one task per partition, as before batching);
``--files-per-partition 10`` rewrites every partition as 10 files before the job.

Usage: python bench/bench_scaling.py [--rows 200000] [--partitions 16,256,1024] [--task-bytes N] [--catalog N,...] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def _object_store_mb() -> float:
    """Bytes in the object store now (Ray's memory summary), in MB."""
    import ray
    from ray._private.internal_api import memory_summary

    text = memory_summary(address=ray.get_runtime_context().gcs_address, stats_only=True)
    m = re.search(r"Plasma memory usage (\d+) MiB", text)
    return float(m.group(1)) if m else float("nan")


def _thread_cpu() -> dict[str, float]:
    """CPU seconds of each thread of this process so far, by thread id (name, seconds)."""
    tick = os.sysconf("SC_CLK_TCK")
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            fields = Path(f"/proc/self/task/{tid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # the thread ended
            continue
        out[tid] = (int(fields[11]) + int(fields[12])) / tick
    return out


def _main_thread_cpu(before: dict[str, float], after: dict[str, float]) -> float:
    main = str(os.getpid())  # the main thread's id is the process id
    return after.get(main, 0.0) - before.get(main, 0.0)


def _flight_partitions_matching_ms(store: Path) -> float:
    from flight_server.client import MetastoreClient
    from flight_server.server import MetastoreFlightServer, ServerConfig

    server = MetastoreFlightServer(ServerConfig(store=str(store), host="127.0.0.1", port=0, poll_interval=0))
    try:
        with MetastoreClient(server.location, timeout=120) as client:
            client.partitions_matching("sales", "quantity >= 100")  # cold
            return _median_ms(lambda: client.partitions_matching("sales", "quantity >= 100"), repeat=10)
    finally:
        server.shutdown()


def _median_ms(fn, repeat: int = 20) -> float:  # noqa: ANN001
    samples = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1000)
    return round(statistics.median(samples), 3)


def summary_bytes(data: Path, batch: int = 8) -> int:
    """What the driver holds a partition until the merge: the pickled size of the summaries of
    ``batch`` middle partitions as a batch task returns them (tasks.SummaryBatch: their columns'
    mergeable states, field by field, with one theta union a column), divided by ``batch``;
    profiled in this process."""
    import pickle

    from engine.columns import leaf_columns
    from engine.files.layout import FileIdentity
    from engine.options import AnalyzeOptions
    from engine.runtime.tasks.profile import profile_partition
    from engine.runtime.tasks.values import JobContext, PartitionTask, SummaryBatch
    from engine.sources import open_table

    source = open_table(str(data))
    leaves = leaf_columns(source.schema())
    parts = source.partitions()
    middle = parts[len(parts) // 2 : len(parts) // 2 + batch]
    context = JobContext(source, leaves, [], AnalyzeOptions())
    summaries = []
    with tempfile.TemporaryDirectory(prefix="bench-scaling-summary-") as out:
        for part in middle:
            ident = FileIdentity("t", str(data), "partition", part.key, "s", "j", FileIdentity.now())
            summaries.append(profile_partition(context, PartitionTask(part, f"{out}/{len(summaries)}", ident), [])[0])
    return len(pickle.dumps(SummaryBatch.of(summaries, leaves, []), protocol=5)) // len(summaries)


def split_files(data: Path, files: int) -> None:
    """Rewrite every partition of ``data`` as ``files`` files of consecutive rows (the issue's
    "10,000 partitions of 10 files each": what the catalog, the file index and lookups hold)."""
    import pyarrow.parquet as pq

    for part in sorted(p for p in data.iterdir() if p.is_dir()):
        old = sorted(part.glob("*.parquet"))
        table = pq.read_table(old, partitioning=None) if len(old) > 1 else pq.read_table(old[0])
        for f in old:
            f.unlink()
        n = table.num_rows
        for i in range(files):
            lo, hi = n * i // files, n * (i + 1) // files
            pq.write_table(table.slice(lo, hi - lo), part / f"data-{i}.parquet", compression="zstd")


def step(rows: int, partitions: int, work: Path, cpus: int, task_bytes: int | None = None, files: int = 0) -> dict:
    import engine.store as store_module
    from engine.api import analyze, open_statistics
    from engine.options import AnalyzeOptions
    from engine.sample import generate_table

    data, store = work / f"p{partitions}" / "sales", work / f"p{partitions}" / "store"
    t0 = time.perf_counter()
    generate_table(str(data), rows=rows, partitions=partitions, seed=0, row_group_size=64 * 1024)
    if files:
        split_files(data, files)
    generate_s = time.perf_counter() - t0
    options = AnalyzeOptions() if task_bytes is None else AnalyzeOptions(task_bytes=task_bytes)

    peak = [0.0]
    last = [0.0]
    probe = [0.0, 0.0]  # CPU seconds of this process and of its main thread spent in the probe below

    def progress(phase: str, done: int, total: int) -> None:
        now = time.perf_counter()
        if now - last[0] > 0.5 or done == total:
            last[0] = now
            c0, m0 = time.process_time(), time.thread_time()
            peak[0] = max(peak[0], _object_store_mb())
            probe[0] += time.process_time() - c0
            probe[1] += time.thread_time() - m0

    commit: dict = {}
    real_publish = store_module.publish_job

    def timed_publish(root, output, **kw):  # noqa: ANN001, ANN003, ANN202
        c0, t0 = time.process_time(), time.perf_counter()
        info = real_publish(root, output, **kw)
        commit.update(ms=(time.perf_counter() - t0) * 1000, cpu_ms=(time.process_time() - c0) * 1000, uri=info.uri)
        return info

    from engine.runtime.job.executor import Executor

    tasks = [0]
    real_submit = Executor.submit

    def counted_submit(self, *args, **kw):  # noqa: ANN001, ANN002, ANN003, ANN202
        tasks[0] += 1
        return real_submit(self, *args, **kw)

    store_module.publish_job = timed_publish
    Executor.submit = counted_submit  # type: ignore[method-assign]
    try:
        threads0 = _thread_cpu()
        c0 = time.process_time()
        result = analyze(str(data), str(store), user_statistics=[], progress=progress, options=options)
        # the object-store probe is this benchmark's, not the job's: ~5-10 ms of CPU every 0.5 s of
        # wall time (Ray's memory summary), which would count a longer run's driver dearer a partition
        driver_cpu = time.process_time() - c0 - probe[0]
        main_cpu = _main_thread_cpu(threads0, _thread_cpu()) - probe[1]
    finally:
        store_module.publish_job = real_publish
        Executor.submit = real_submit  # type: ignore[method-assign]
    txn_bytes = Path(commit["uri"]).stat().st_size if commit.get("uri") and Path(commit["uri"]).exists() else -1

    t0 = time.perf_counter()
    stats = open_statistics(str(store), "sales")
    open_ms = (time.perf_counter() - t0) * 1000
    key = stats.partitions()[len(stats.partitions()) // 2].key
    stats.column_statistics("id", partition=key)  # cold
    stats.column_statistics("id")
    t = result.timings
    return {
        "partitions": partitions,
        "files_per_partition": files or None,
        "task_bytes": options.task_bytes,
        "rows": result.rows,
        "generate_s": round(generate_s, 1),
        "wall_s": round(result.elapsed_s, 2),
        "driver_cpu_s": round(driver_cpu, 2),
        "probe_cpu_s": round(probe[0], 2),
        "driver_cpu_ms_per_partition": round(driver_cpu * 1000 / partitions, 3),
        "driver_main_ms_per_partition": round(main_cpu * 1000 / partitions, 3),
        "driver_ray_ms_per_partition": round((driver_cpu - main_cpu) * 1000 / partitions, 3),
        "tasks": tasks[0],
        "scheduling_ms_per_task": round((result.elapsed_s * cpus - t["cpu_s"]) * 1000 / max(1, tasks[0]), 2),
        "merge_ms_per_partition": round(t.get("merge_s", 0) * 1000 / partitions, 3),
        "plan_ms_per_partition": round(t.get("plan_s", 0) * 1000 / partitions, 3),
        "task_cpu_s": round(t["cpu_s"], 2),
        "object_store_peak_mb": peak[0],
        "txn_bytes": txn_bytes,
        "commit_ms": round(commit.get("ms", float("nan")), 1),
        "commit_cpu_ms": round(commit.get("cpu_ms", float("nan")), 1),
        "summary_bytes": summary_bytes(data),
        "open_ms": round(open_ms, 2),
        "lookup_partition_ms": _median_ms(lambda: stats.column_statistics("id", partition=key)),
        "lookup_table_ms": _median_ms(lambda: stats.column_statistics("id")),
        "flight_partitions_matching_ms": _flight_partitions_matching_ms(store),
        "load_average": [round(x, 2) for x in os.getloadavg()],
    }


def catalog_step(partitions: int, commits: int = 2, retain_last: int | None = None) -> list[dict]:
    """``commits`` full publishes of ``partitions`` partitions into a fresh store, and opening the state after each
    (``retain_last``: a retention policy set first, so that the later publishes expire a state each);
    the last row also has a full gc's CPU (``full_gc_cpu_ms``: what the periodic pass costs at that history)."""
    from engine.catalog import Catalog, JobOutput, JobPartition, publish_job, retention, schema_fingerprint
    from engine.catalog.model import FileRef, StatisticsFiles
    from engine.catalog.paths import RunLayout
    from engine.catalog.reading import current_state

    names = ("statistics.parquet", "frequencies.parquet", "histograms.parquet")
    columns = [{"name": "id", "type": "int64"}]
    out = []
    spent = [0.0]  # the retention pass's CPU in the commit (publish_job calls it last)
    real_pass = retention.apply_after_publish

    def timed_pass(catalog):  # noqa: ANN001, ANN202
        c = time.process_time()
        try:
            return real_pass(catalog)
        finally:
            spent[0] += time.process_time() - c

    retention.apply_after_publish = timed_pass
    with tempfile.TemporaryDirectory(prefix="bench-scaling-catalog-") as store:
        if retain_last:
            retention.write_policy(Catalog(store, "sales"), retention.RetentionPolicy(retain_last=retain_last))
        for attempt in range(commits):
            run = RunLayout(f"20260101T{attempt:06d}-bench{attempt:03d}")
            parts = tuple(
                JobPartition(
                    f"part={i:07d}", 500, StatisticsFiles(*(FileRef(run.partition_file(f"part={i:07d}", n), 1000, "crc32:0000abcd") for n in names))
                )
                for i in range(partitions)
            )
            table = StatisticsFiles(*(FileRef(run.table_file(n), 1000, "crc32:0000abcd") for n in names))
            output = JobOutput("sales", run.job_id, "snapshot", schema_fingerprint(columns), parts, table, {"columns": columns})
            spent[0] = 0.0
            c0, t0 = time.process_time(), time.perf_counter()
            info = publish_job(store, output)
            c1, t1 = time.process_time(), time.perf_counter()
            current_state(store, "sales")
            out.append(
                {
                    "catalog_partitions": partitions,
                    "commit": attempt + 1,
                    "txn_bytes": Path(info.uri).stat().st_size,
                    "catalog_commit_ms": round((t1 - t0) * 1000, 1),
                    "catalog_commit_cpu_ms": round((c1 - c0) * 1000, 1),
                    "retention_cpu_ms": round(spent[0] * 1000, 1),
                    "catalog_open_cpu_ms": round((time.process_time() - c1) * 1000, 1),
                    "load_average": [round(x, 2) for x in os.getloadavg()],
                }
            )
        retention.apply_after_publish = real_pass
        cat = Catalog.open(store, "sales")
        c = time.process_time()
        cat.gc(3600)
        out[-1]["full_gc_cpu_ms"] = round((time.process_time() - c) * 1000, 1)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=200_000)
    ap.add_argument("--partitions", default="16,256,1024")
    ap.add_argument("--cpus", type=int, default=2)
    ap.add_argument("--catalog", default="", help="partition counts of the catalog-only measurement (no analyze)")
    ap.add_argument("--commits", type=int, default=2, help="publishes a partition count of --catalog")
    ap.add_argument("--retain-last", type=int, default=None, help="--catalog: a retention policy keeping that many states")
    ap.add_argument("--json", default=None)
    ap.add_argument("--task-bytes", type=int, default=None, help="AnalyzeOptions.task_bytes (default: its default; 0: one task per partition)")
    ap.add_argument("--files-per-partition", type=int, default=0, help="rewrite each partition as this many files (0: as generated)")
    args = ap.parse_args()
    if args.catalog:
        got = [r for n in args.catalog.split(",") for r in catalog_step(int(n), args.commits, args.retain_last)]
        for r in got:
            print(json.dumps(r), flush=True)
        if args.json:
            Path(args.json).write_text(json.dumps(got, indent=2))
        return 0

    from engine.runtime.ray_runtime import ensure_ray, shutdown_ray

    ensure_ray(num_cpus=args.cpus)
    out = []
    try:
        with tempfile.TemporaryDirectory(prefix="bench-scaling-") as tmp:
            for p in (int(x) for x in args.partitions.split(",")):
                r = step(args.rows, p, Path(tmp), args.cpus, args.task_bytes, args.files_per_partition)
                out.append(r)
                print(json.dumps(r), flush=True)
    finally:
        shutdown_ray()
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
