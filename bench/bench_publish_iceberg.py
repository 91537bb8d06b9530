#!/usr/bin/env python
"""Publish to an Iceberg table against the analyze it publishes: the ratio of their wall times, in one run.

The bench table (engine.sample, ``--rows`` rows, default 5,000,000) becomes an unpartitioned
Iceberg table of a SQLite-backed pyiceberg catalog under ``--work`` (its Parquet files linked
or copied into the table's location and added as they are, ``add_files``: no data rewritten). Then, in this one process and one run (the
machine's load moves both alike):

- ``analyze``: ``engine.api.analyze(identifier, catalog=...)`` into a fresh store, ``--repeat``
  times (each a full job: ``inherit=False``), median wall time;
- ``publish``: ``engine.publish.commit.publish(store, identifier, catalog)`` of that store,
  ``--repeat`` times (each commits another statistics file for the same snapshot), median
  wall time, and which columns were read from the data files.

Reports both, their ratio (issue #29's target: publish within 10% of analyze) and the load
average. ``--profile`` also prints a cProfile of one more publish (cumulative time, top 30).

Usage: python bench/bench_publish_iceberg.py [--rows 5000000] [--repeat 3] [--work DIR] [--json OUT] [--profile]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.common import TABLE_PARTITIONS, TABLE_ROWS, ensure_data, load_avg, log, write_json  # noqa: E402

CATALOG = "benchpublish"
IDENTIFIER = "bench.sales"


def make_iceberg(table_dir: Path, work: Path) -> None:
    """The bench table's files as Iceberg table ``bench.sales`` of catalog CATALOG (recreated)."""
    import pyarrow.parquet as pq
    from pyiceberg.catalog.sql import SqlCatalog

    shutil.rmtree(work / "warehouse", ignore_errors=True)
    (work / "catalog.db").unlink(missing_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    os.environ[f"PYICEBERG_CATALOG__{CATALOG.upper()}__TYPE"] = "sql"
    os.environ[f"PYICEBERG_CATALOG__{CATALOG.upper()}__URI"] = f"sqlite:///{work}/catalog.db"
    os.environ[f"PYICEBERG_CATALOG__{CATALOG.upper()}__WAREHOUSE"] = f"file://{work}/warehouse"
    catalog = SqlCatalog(CATALOG, uri=f"sqlite:///{work}/catalog.db", warehouse=f"file://{work}/warehouse")
    catalog.create_namespace_if_not_exists("bench")
    # the files inside the table's location (analyze and publish read no file outside it):
    # hard links where the filesystem allows, else copies
    data = work / "warehouse" / "bench" / "sales" / "data"
    files = []
    for i, src in enumerate(sorted(table_dir.rglob("*.parquet"))):
        dst = data / f"{i:05d}-{src.parent.name}-{src.name}"
        dst.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.link(src, dst)
        except OSError:
            shutil.copyfile(src, dst)
        files.append(str(dst))
    table = catalog.create_table(IDENTIFIER, schema=pq.read_schema(files[0]), location=f"file://{work}/warehouse/bench/sales")
    table.add_files(files)


def median_time(fn: object, repeat: int) -> tuple[float, list[float], object]:
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()  # type: ignore[operator]
        times.append(time.perf_counter() - t0)
    return statistics.median(times), times, out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=TABLE_ROWS)
    ap.add_argument("--partitions", type=int, default=TABLE_PARTITIONS)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--data", default=str(Path(__file__).resolve().parent / "data"))
    ap.add_argument("--work", default="/tmp/metastore-bench-publish")
    ap.add_argument("--json", metavar="OUT")
    ap.add_argument("--profile", action="store_true", help="print a cProfile of one more publish")
    args = ap.parse_args(argv)
    started = datetime.now(UTC)
    table_dir, data = ensure_data(Path(args.data), args.rows, args.partitions)
    work = Path(args.work)
    make_iceberg(table_dir, work)

    from engine.api import analyze
    from engine.publish.commit import publish
    from engine.runtime.ray_runtime import ensure_ray

    ensure_ray()
    store = str(work / "store")
    load_start = load_avg()

    def one_analyze() -> object:
        return analyze(IDENTIFIER, store=store, catalog=CATALOG, user_statistics=[], inherit=False)

    analyze_s, analyze_times, _ = median_time(one_analyze, args.repeat)
    log(f"analyze: median {analyze_s:.2f} s {[round(t, 2) for t in analyze_times]}")
    publish_s, publish_times, published = median_time(lambda: publish(store, IDENTIFIER, CATALOG), args.repeat)
    read = list(published.read_from_data)  # type: ignore[attr-defined]
    log(f"publish: median {publish_s:.2f} s {[round(t, 2) for t in publish_times]}; read from the data: {read}")
    ratio = publish_s / analyze_s
    log(f"publish / analyze = {ratio:.3f} (target <= 0.10)")
    if args.profile:
        import cProfile
        import pstats

        with cProfile.Profile() as profiler:
            publish(store, IDENTIFIER, CATALOG)
        pstats.Stats(profiler).sort_stats("cumulative").print_stats(30)
    result = {
        "benchmark": "publish_iceberg",
        "started_at": started.isoformat(timespec="seconds"),
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "config": {"rows": args.rows, "partitions": args.partitions, "repeat": args.repeat, "files": data.get("files")},
        "machine": {"cpu_count": os.cpu_count(), "load_avg_start": load_start, "load_avg_end": load_avg()},
        "analyze_s": {"median": round(analyze_s, 3), "runs": [round(t, 3) for t in analyze_times]},
        "publish_s": {"median": round(publish_s, 3), "runs": [round(t, 3) for t in publish_times]},
        "read_from_data": read,
        "ratio": round(ratio, 4),
        "target": 0.10,
    }
    if args.json:
        write_json(result, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
