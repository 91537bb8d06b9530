#!/usr/bin/env python
"""Catalog: open latency with and without checkpoints, commit latency, time travel, on 10,000 transactions.

Builds a catalog of ``--transactions`` commits (checkpoint every ``--interval``)
for a table of ``--partitions`` partitions; each commit is an analyze-like job
replacing two partitions and the table-level files. Then measures:

- commit latency (every commit of the build; the local store fsyncs file and directory);
- the listing alone (``--transactions`` + checkpoints names);
- opening the current state with checkpoints (one LIST, one checkpoint, the transactions after it)
  and without (replaying every transaction);
- time travel to an old transaction id, and to an old snapshot;
- the reads opening does (counted);
- opening in the worst case: ``--interval`` - 1 transactions after the newest checkpoint.

``--s3`` repeats it on an S3-compatible server on loopback (moto; ``--s3-transactions``,
default 1,000, as every request is a round trip through moto's Python server).

Usage: python bench/bench_catalog.py [--transactions 10000] [--interval 100] [--partitions 100] [--s3] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from engine.catalog import Catalog, CatalogIO, io_for  # noqa: E402


class _Counting(CatalogIO):
    def __init__(self, inner: CatalogIO) -> None:
        self.inner, self.remote = inner, inner.remote
        self.lists, self.reads = 0, 0

    def list_names(self, dir_uri, start_after=None):  # noqa: ANN001, ANN201
        self.lists += 1
        return self.inner.list_names(dir_uri, start_after)

    def read(self, uri):  # noqa: ANN001, ANN201
        self.reads += 1
        return self.inner.read(uri)


def _ms(samples: list[float]) -> dict[str, float]:
    s = sorted(samples)
    return {
        "p50_ms": round(statistics.median(s) * 1e3, 3),
        "p99_ms": round(s[min(len(s) - 1, int(0.99 * len(s)))] * 1e3, 3),
        "min_ms": round(s[0] * 1e3, 3),
        "n": len(s),
    }


def _timed(fn, repeat: int) -> tuple[list[float], object]:  # noqa: ANN001
    out, result = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        result = fn()
        out.append(time.perf_counter() - t0)
    return out, result


def run(store: str, transactions: int, interval: int, partitions: int, repeat: int) -> dict[str, object]:
    table = "bench"
    files = lambda job, key: {
        k: (f"runs/{job}/partitions/{key}/{k}.parquet", 1000 + i) for i, k in enumerate(("statistics", "frequencies", "histograms"))
    }  # noqa: E731
    cat = Catalog.open(store, table, checkpoint_interval=interval)
    commit_s = []
    t_build = time.perf_counter()
    for i in range(transactions):
        job = f"job-{i:06d}"
        txn = cat.begin(job, f"snap-{i:06d}")
        for key in (f"part={(2 * i) % partitions:04d}", f"part={(2 * i + 1) % partitions:04d}"):
            txn.add_partition(key, files(job, key), 1000 + i, schema_fingerprint="fp", data_fingerprint=f"d{i}")
        txn.set_table_statistics(
            {k: (f"runs/{job}/table/{k}.parquet", 2000) for k in ("statistics", "frequencies", "histograms")},
            100_000,
            schema_fingerprint="fp",
            properties={"bins": "1000"},
        )
        t0 = time.perf_counter()
        txn.commit()
        commit_s.append(time.perf_counter() - t0)
        if (i + 1) % 2000 == 0:
            print(f"  built {i + 1} transactions ({time.perf_counter() - t_build:.1f} s)", file=sys.stderr)
    build_s = time.perf_counter() - t_build
    head = cat.state()
    io = io_for(store)

    list_s, names = _timed(lambda: io.list_names(cat.transactions_uri), repeat)
    open_s, opened = _timed(lambda: Catalog.open(store, table), repeat)
    assert opened.state() == head
    counting = _Counting(io)
    Catalog.open(store, table, io=counting)
    open_counts = {"lists": counting.lists, "reads": counting.reads}
    no_cp_s, replayed = _timed(lambda: Catalog.open(store, table, use_checkpoints=False), max(1, min(3, repeat)))
    assert replayed.state() == head
    old_id = min(150, transactions)
    travel_s, old = _timed(lambda: Catalog.open(store, table).state_at(old_id), repeat)
    assert old.txn_id == old_id
    reader = Catalog.open(store, table)
    travel_warm_s, _ = _timed(lambda: reader.state_at(old_id), repeat)
    snap = f"snap-{old_id - 1:06d}"
    snap_s, by_snap = _timed(lambda: Catalog.open(store, table).state_at_snapshot(snap), max(1, min(3, repeat)))
    assert by_snap.txn_id == old_id
    reader.state_at_snapshot(snap)  # reads and caches every transaction header once
    snap_warm_s, _ = _timed(lambda: reader.state_at_snapshot(snap), repeat)
    refresh_s, _ = _timed(reader.refresh, repeat)
    # worst case for opening: interval - 1 transactions after the newest checkpoint
    extra = (interval - 1 - transactions % interval) % interval if interval else 0
    for i in range(transactions, transactions + extra):
        job = f"job-{i:06d}"
        txn = cat.begin(job, f"snap-{i:06d}")
        txn.add_partition(f"part={i % partitions:04d}", files(job, f"part={i % partitions:04d}"), 1)
        txn.commit()
    worst_s, worst = _timed(lambda: Catalog.open(store, table), repeat)
    assert worst.state() == cat.state()
    counting = _Counting(io)
    Catalog.open(store, table, io=counting)
    return {
        "store": "local" if "://" not in store else store.split("://", 1)[0],
        "transactions": transactions,
        "checkpoint_interval": interval,
        "partitions": partitions,
        "files_in_transactions_dir": len(names),  # type: ignore[arg-type]
        "build_s": round(build_s, 2),
        "commit": _ms(commit_s),
        "list_names": _ms(list_s),
        "open_with_checkpoints": {**_ms(open_s), **open_counts},
        "open_without_checkpoints": _ms(no_cp_s),
        f"state_at_{old_id}_cold": _ms(travel_s),
        f"state_at_{old_id}_warm": _ms(travel_warm_s),
        "state_at_snapshot_old_cold": _ms(snap_s),
        "state_at_snapshot_old_warm": _ms(snap_warm_s),
        "refresh_no_change": _ms(refresh_s),
        "open_worst_case": {**_ms(worst_s), "transactions": transactions + extra, "lists": counting.lists, "reads": counting.reads},
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--transactions", type=int, default=10_000)
    ap.add_argument("--interval", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--store", default=None, help="local directory to build in (default: a temporary one)")
    ap.add_argument("--s3", action="store_true", help="also run on an S3-compatible server on loopback (moto)")
    ap.add_argument("--s3-transactions", type=int, default=1_000)
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

    results: dict[str, object] = {}
    work = Path(args.store) if args.store else Path(tempfile.mkdtemp(prefix="metastore-bench-catalog-"))
    try:
        print(f"local: {args.transactions} transactions, checkpoint every {args.interval}", file=sys.stderr)
        results["local"] = run(str(work / "store"), args.transactions, args.interval, args.partitions, args.repeat)
    finally:
        if not args.store:
            shutil.rmtree(work, ignore_errors=True)
    if args.s3:
        from moto_s3 import moto_s3  # bench/moto_s3.py

        with moto_s3("bench"):
            print(f"s3 (moto): {args.s3_transactions} transactions, checkpoint every {args.interval}", file=sys.stderr)
            results["s3_moto"] = run("s3://bench/store", args.s3_transactions, args.interval, args.partitions, max(3, args.repeat // 3))
    print(json.dumps(results, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
