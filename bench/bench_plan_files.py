#!/usr/bin/env python
"""File pruning over a per-file column index, side by side with its peers, in one run.

Cases (synthetic footers: int64 columns whose per-file ranges follow the file order with
some overlap, ~100-character object-store paths, 64 partitions):

- ``65,536 files x 100 columns``, a 2-column predicate ``c3 >= A and c57 < B``;
- the Hudi RFC-27 case, ``1,288 files x 2,078 columns``, a 10-column predicate.

Systems:

- ``metastore``: ``engine.fileindex.plan.FileIndex.plan`` over the three index files
  (docs/FORMAT.md) written by ``engine.fileindex.store.write_file_index``: warm (the
  index open, its footers parsed and the predicate's column vectors decoded once before)
  and cold (a fresh ``FileIndex`` per run: footers parsed, row groups read and decoded;
  the OS page cache warm). Candidates include path, partition, rows, size.
- ``duckdb naive``: DuckDB (2 threads) over a naive Parquet range index, one row per
  (file, column) with the full path in every record (path, column, min, max, null_count),
  a query intersecting the files each conjunct admits; warm: one connection reused;
  cold: a new connection per run.
- ``pyarrow dataset``: ``pyarrow.dataset`` filtering of the same naive index
  (``to_table(filter=...)`` per conjunct, then the intersection of the paths).

Every system's candidate set is checked equal to Metastore's. The partition-level
pruning that ``TableStatistics.plan_files`` does first (from partition statistics files)
is not part of this benchmark: it needs an analyzed table, and bench_flight measures
statistics lookups.

Usage: python bench/bench_plan_files.py [--repeat R] [--dir DIR] [--json OUT] [--skip-rfc]
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import duckdb  # noqa: E402
import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.dataset as ds  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

from engine import expressions as ex  # noqa: E402
from engine.fileindex import plan as fplan  # noqa: E402
from engine.fileindex import store  # noqa: E402

PARTITIONS = 64
SPAN = 1_000  # each file covers [f * SPAN + jitter, f * SPAN + jitter + SPAN) of a column


def synthetic(n_files: int, n_columns: int, seed: int = 0) -> tuple[store.FileIndexTables, pa.Table, list[str]]:
    """Our index's three tables (as ``store.assemble`` lays them out) and the naive index."""
    rng = np.random.default_rng(seed)
    per_part = -(-n_files // PARTITIONS)
    ids = np.arange(n_files, dtype=np.int64)
    partition = np.array([f"day={i // per_part:04d}" for i in range(n_files)], dtype=object)
    paths = [
        f"s3://warehouse-bucket/analytics/events/{partition[i]}/part-{i:06d}-{rng.integers(1 << 62):016x}-c000.zstd.parquet" for i in range(n_files)
    ]
    rows = rng.integers(50_000, 200_000, n_files)
    files = pa.table(
        {
            "file": pa.array(ids, pa.int32()),
            "partition": pa.array(partition, pa.string()),
            "path": pa.array(paths, pa.string()),
            "rows": pa.array(rows, pa.int64()),
            "size": pa.array(rows * 40, pa.int64()),
        },
        schema=store.FILES_SCHEMA,
    )
    names = [f"c{i}" for i in range(n_columns)]
    lows = []
    for i in range(n_columns):
        jitter = rng.integers(-SPAN // 2, SPAN // 2, n_files)
        lows.append(ids * SPAN + jitter + i * 7)
    lo = np.concatenate(lows)
    hi = lo + SPAN - 1
    column = np.repeat(np.arange(n_columns), n_files)
    nulls = rng.integers(0, 10, n_files * n_columns)
    ranges = pa.table(
        {
            "column": pa.DictionaryArray.from_arrays(pa.array(column, pa.int32()), pa.array(names)).cast(pa.string()),
            "file": pa.array(np.tile(ids, n_columns), pa.int32()),
            "null_count": pa.array(nulls, pa.int64()),
            "nan_count": pa.array(np.zeros(n_files * n_columns, np.int64)),
            "min": pa.nulls(n_files * n_columns, pa.string()),
            "max": pa.nulls(n_files * n_columns, pa.string()),
            "min_int": pa.array(lo),  # int64 columns: bounds stored as numbers (store.bound_form)
            "max_int": pa.array(hi),
            "min_float": pa.nulls(n_files * n_columns, pa.float64()),
            "max_float": pa.nulls(n_files * n_columns, pa.float64()),
            "bytes": pa.array(rows.repeat(1)[np.tile(ids, n_columns)] * 4, pa.int64()),
            "bounded": pa.array(np.ones(n_files * n_columns, bool)),
        },
        schema=store.RANGES_SCHEMA,
    )
    groups, where = store._groups({c: n_files for c in names}, store.RANGE_ROW_GROUP_ROWS)
    # (store.write_file_index cuts the file table into FILES_ROW_GROUP_ROWS groups itself)
    tables = store.FileIndexTables(
        files=files,
        ranges=ranges,
        blooms=store.BLOOMS_SCHEMA.empty_table(),
        range_groups=groups,
        bloom_groups=[0],
        range_columns=where,
        bloom_columns={},
        meta={
            "columns": names,
            "bloom_columns": [],
            "bloom_fpr": 0.01,
            "partitions": sorted(set(partition)),
            "forms": dict.fromkeys(names, store.INT),
            "partition_files": [[f"day={k:04d}", k * per_part, min(per_part, n_files - k * per_part)] for k in range(-(-n_files // per_part))],
            "schema": base64.b64encode(pa.schema([(c, pa.int64()) for c in names]).serialize().to_pybytes()).decode(),
        },  # fmt: skip
    )
    naive = pa.table(
        {
            "path": pa.array(np.array(paths, dtype=object)[np.tile(ids, n_columns)], pa.string()),
            "column": pa.array(np.array(names, dtype=object)[column], pa.string()),
            "min": pa.array(lo),
            "max": pa.array(hi),
            "null_count": pa.array(nulls, pa.int64()),
        }
    )
    return tables, naive, names


def timed(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    out, times = None, []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times) * 1000, out


def mib(paths: list[Path]) -> float:
    return sum(p.stat().st_size for p in paths) / 2**20


def run_case(label: str, n_files: int, n_columns: int, conjuncts: list[tuple[str, str, int]], base: Path, repeat: int) -> dict[str, Any]:
    print(f"\n== {label}: {n_files:,} files x {n_columns:,} columns, {len(conjuncts)}-column predicate", flush=True)
    t0 = time.perf_counter()
    tables, naive, names = synthetic(n_files, n_columns)
    ours = base / f"{label}-index"
    ours.mkdir(parents=True, exist_ok=True)
    store.write_file_index(tables, str(ours))
    naive_path = base / f"{label}-naive.parquet"
    pq.write_table(naive, naive_path, compression="zstd", row_group_size=1 << 20)
    del naive
    print(f"   built in {time.perf_counter() - t0:.1f} s", flush=True)
    where = " and ".join(f"{c} {op} {v}" for c, op, v in conjuncts)
    schema = pa.schema([(c, pa.int64()) for c in names])
    expr = ex.bound(where, schema)

    def metastore_cold() -> set[str]:
        fplan.clear_cache()
        return set(fplan.open_file_index(str(ours)).plan(expr).paths())

    index = fplan.open_file_index(str(ours))
    index.plan(expr)  # decode the vectors once: the warm state

    def metastore_warm() -> set[str]:
        return set(index.plan(expr).paths())

    sql = " INTERSECT ".join(
        f"SELECT path FROM read_parquet('{naive_path}') WHERE \"column\" = '{c}' AND "
        + {">=": f"max >= {v}", ">": f"max > {v}", "<": f"min < {v}", "<=": f"min <= {v}"}[op]
        for c, op, v in conjuncts
    )
    con = duckdb.connect(config={"threads": 2})

    def duck_warm() -> set[str]:
        return {r[0] for r in con.execute(sql).fetchall()}

    def duck_cold() -> set[str]:
        c = duckdb.connect(config={"threads": 2})
        try:
            return {r[0] for r in c.execute(sql).fetchall()}
        finally:
            c.close()

    dataset = ds.dataset(str(naive_path), format="parquet")

    def arrow_filter() -> set[str]:
        out: set[str] | None = None
        for c, op, v in conjuncts:
            bound = (
                ds.field("max") >= v
                if op == ">="
                else ds.field("max") > v
                if op == ">"
                else ds.field("min") < v
                if op == "<"
                else ds.field("min") <= v
            )
            got = set(dataset.to_table(columns=["path"], filter=(ds.field("column") == c) & bound).column("path").to_pylist())
            out = got if out is None else out & got
        return out or set()

    results: dict[str, Any] = {"files": n_files, "columns": n_columns, "predicate": where}
    want = metastore_cold()
    for name, fn in [
        ("metastore warm", metastore_warm),
        ("metastore cold", metastore_cold),
        ("duckdb naive warm", duck_warm),
        ("duckdb naive cold", duck_cold),
        ("pyarrow dataset", arrow_filter),
    ]:
        ms, got = timed(fn, repeat)
        assert got == want, (name, len(got), len(want))
        results[name] = round(ms, 2)
        print(f"   {name:<20} {ms:9.2f} ms   ({len(got):,} candidates)", flush=True)
    con.close()
    results["candidates"] = len(want)
    results["index_mib"] = round(mib([ours / n for n in store.INDEX_FILES]), 2)
    results["naive_mib"] = round(mib([naive_path]), 2)
    print(f"   index: metastore {results['index_mib']:.2f} MiB, naive {results['naive_mib']:.2f} MiB", flush=True)
    return results


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--dir", help="Where the indexes are written (default: a temporary directory).")
    ap.add_argument("--json", help="Write the results here.")
    ap.add_argument("--skip-rfc", action="store_true")
    args = ap.parse_args()
    base = Path(args.dir or tempfile.mkdtemp(prefix="bench_plan_files_"))
    out = {"load_avg": os.getloadavg()}
    out["65k"] = run_case("65k", 65_536, 100, [("c3", ">=", 40_000_000), ("c57", "<", 41_000_000)], base, args.repeat)
    if not args.skip_rfc:
        conj = [(f"c{i}", ">=" if i % 2 == 0 else "<", 600_000 if i % 2 == 0 else 700_000) for i in range(0, 2_078, 208)][:10]
        out["rfc"] = run_case("rfc", 1_288, 2_078, conj, base, args.repeat)
    out["load_avg_after"] = os.getloadavg()
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=2))
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
