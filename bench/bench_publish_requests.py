#!/usr/bin/env python
"""Catalog: the requests one publish (commit + retention pass) makes on S3, counted, and its time on moto.

On S3 every listing is a LIST round trip (tens of ms, a page per 1,000 keys) and every read
a GET: a publish's cost there is its request count more than its CPU. This publishes
``--publishes`` synthetic job outputs of ``--partitions`` partitions into a fresh table on an
S3-compatible server on loopback (moto, in this process) through a counting wrapper around
the real catalog I/O, and reports per publish the LISTs by directory (``transactions/``,
``retention/``, the recursive one of ``runs/``), GETs, PUTs and DELETEs (means) and the wall
time (median) over the steady publishes (after the first, which runs the first gc; with
``--retain-last``, once at the bound). Twice: with
the default policy (keep 100: nothing expires) and with ``--retain-last`` (an expiry at
every publish once at the bound).

``BENCH_REPO=DIR`` imports the engine from another checkout (a before/after pair with the
same script). Usage: python bench/bench_publish_requests.py [--publishes 30] [--partitions 100] [--retain-last 10] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

REPO = Path(os.environ.get("BENCH_REPO") or Path(__file__).resolve().parents[1])
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from engine.catalog import Catalog, CatalogIO, JobOutput, JobPartition, io_for, publish_job  # noqa: E402
from engine.catalog.model import FileRef, StatisticsFiles  # noqa: E402
from engine.catalog.retention import RetentionPolicy, write_policy  # noqa: E402


class CountingIO(CatalogIO):
    """The real catalog I/O; counts each request by kind and directory."""

    def __init__(self, inner: CatalogIO) -> None:
        self.inner, self.remote = inner, inner.remote
        self.counts: Counter[str] = Counter()

    @staticmethod
    def _dir(uri: str) -> str:
        return uri.rstrip("/").rsplit("/", 2)[-2]

    def list_names(self, dir_uri: str, start_after: str | None = None) -> list[str]:
        self.counts[f"LIST {dir_uri.rstrip('/').rsplit('/', 1)[-1]}/"] += 1
        return self.inner.list_names(dir_uri, start_after)

    def list_files(self, dir_uri: str):  # noqa: ANN201
        self.counts[f"LIST {dir_uri.rstrip('/').rsplit('/', 1)[-1]}/ (recursive)"] += 1
        return self.inner.list_files(dir_uri)

    def read(self, uri: str) -> bytes:
        self.counts["GET"] += 1
        return self.inner.read(uri)

    def create(self, uri: str, data: bytes) -> None:
        self.counts["PUT"] += 1
        self.inner.create(uri, data)

    def delete(self, uri: str) -> None:
        self.counts["DELETE"] += 1
        self.inner.delete(uri)


def _files(base: str) -> StatisticsFiles:
    return StatisticsFiles(*(FileRef(f"{base}/{kind}.parquet", 1000) for kind in ("statistics", "frequencies", "histograms")))


def _output(i: int, partitions: int) -> JobOutput:
    job = f"job{i:04d}"
    parts = tuple(JobPartition(f"p={k:05d}", 10, _files(f"runs/{job}/partitions/p={k:05d}")) for k in range(partitions))
    return JobOutput("t", job, f"s{i}", "fp", parts, _files(f"runs/{job}/table"), {"columns": []})


def run(store: str, publishes: int, partitions: int, retain_last: int | None) -> dict[str, object]:
    if retain_last is not None:
        write_policy(Catalog(store, "t"), RetentionPolicy(retain_last=retain_last))
    rows = []
    for i in range(1, publishes + 1):
        io = CountingIO(io_for(store))
        t0 = time.perf_counter()
        publish_job(store, _output(i, partitions), io=io)
        rows.append((time.perf_counter() - t0, io.counts))
    steady = rows[1:] if retain_last is None else rows[retain_last + 1 :]
    kinds = sorted({k for _, c in steady for k in c})
    return {
        "policy": "default (keep 100)" if retain_last is None else f"retain-last {retain_last}",
        "publishes": len(steady),
        "requests": round(statistics.mean(sum(c.values()) for _, c in steady), 1),
        "by_kind": {k: round(statistics.mean(c.get(k, 0) for _, c in steady), 2) for k in kinds},
        "publish_ms_median": round(statistics.median(t for t, _ in steady) * 1000, 1),
        "first_publish": dict(rows[0][1]),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--publishes", type=int, default=30, help="publishes into each of the two tables")
    ap.add_argument("--partitions", type=int, default=100, help="partitions of every job output (all replaced each time)")
    ap.add_argument("--retain-last", type=int, default=10, help="the second table's policy: an expiry at every publish at the bound")
    ap.add_argument("--json", default=None, help="also write the results here")
    args = ap.parse_args()

    from moto_s3 import moto_s3  # bench/moto_s3.py

    with moto_s3("bench"):
        runs = [
            run("s3://bench/default", args.publishes, args.partitions, None),
            run("s3://bench/expiring", args.publishes, args.partitions, args.retain_last),
        ]
    text = json.dumps({"engine": str(REPO), "load_average": list(os.getloadavg()), "runs": runs}, indent=1)
    print(text)
    if args.json:
        Path(args.json).write_text(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
