#!/usr/bin/env python
"""What value partitions (``analyze(value_partitions=True)``) cost: CPU and file size.

On the bench table (``engine.sample.generate_table``, the data of bench_analyze.py),
all measured in the same run:

- in-process (no Ray, one core, CPU seconds by ``time.process_time``): every
  partition is profiled once as analyze's phase 1 does (so string counts are
  hash-ordered, as in a fresh job); then per discrete column the table reduction
  ``reduce_counts`` with and without the setting (best of ``--repeat``), the
  kernel alone (``valuepartitions.distributions``), and writing the table's
  frequencies.parquet with and without the column (CPU and bytes);
- end to end on Ray: ``engine.api.analyze`` with and without the setting,
  alternately, ``--runs`` times each: the tasks' CPU seconds
  (``timings["cpu_s"]``, ``timings["cpu_reduce_s"]``), wall seconds (noisy on a
  shared machine) and the size of the table's frequencies.parquet;
- lookups (``TableStatistics.value_partitions``), cold (caches cleared) and warm,
  against the peer without the setting: reading the column's rows of every
  partition's frequencies.parquet (which answers only for values a partition stores).

Usage: python bench/bench_value_partitions.py [--rows 5000000] [--partitions 16]
       [--data DIR] [--repeat 3] [--runs 2] [--json OUT]
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
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))


def _best(fn, repeat: int) -> tuple[float, Any]:  # noqa: ANN001
    best, out = float("inf"), None
    for _ in range(repeat):
        t0 = time.process_time()
        out = fn()
        best = min(best, time.process_time() - t0)
    return best, out


def in_process(data: Path, repeat: int) -> dict[str, Any]:
    import pyarrow as pa

    from engine import values as value_forms
    from engine.columns import leaf_columns
    from engine.files.layout import FileIdentity
    from engine.options import AnalyzeOptions
    from engine.runtime.tasks.profile import profile_partition
    from engine.runtime.tasks.reduce import reduce_counts, write_table_frequencies
    from engine.runtime.tasks.values import JobContext, PartitionTask
    from engine.sources import open_table
    from engine.stats import valuepartitions
    from engine.stats.profile import ColumnProfile
    from engine.stats.valuecounts import counts_hashed

    source = open_table(str(data))
    leaves = leaf_columns(source.schema())
    probes = {l.name: ColumnProfile(l.name, l.type, []) for l in leaves}
    discrete = [l.name for l in leaves if probes[l.name].discrete]
    options = AnalyzeOptions()
    out_dir = Path(tempfile.mkdtemp(prefix="bench_vp_"))
    counts: list[dict[str, pa.Table]] = []
    keys = []
    try:
        t0 = time.process_time()
        for part in source.partitions():  # table order, as the job's reductions get them
            ident = FileIdentity("t", str(data), "partition", part.key, "s", "j", FileIdentity.now())
            got = profile_partition(JobContext(source, leaves, [], options), PartitionTask(part, str(out_dir / "p"), ident), [discrete])
            counts.append(got[1])
            keys.append(part.key)
        profile_s = time.process_time() - t0
        columns: dict[str, Any] = {}
        groups: dict[bool, list] = {False: [], True: []}
        for name in discrete:
            cols = [(name, probes[name].type, None)]
            parts = [{name: c[name]} for c in counts]
            off_s, off = _best(lambda: reduce_counts(cols, options.mostly_distinct_ratio, *parts), repeat)
            on_s, on = _best(lambda: reduce_counts(cols, options.mostly_distinct_ratio, *parts, value_partitions=True), repeat)
            groups[False].append(off[1])
            groups[True].append(on[1])
            _, kind, rows = on[1][0]
            # the kernel alone, on the stored values in their type (decoded from the rows' text: lossless)
            typed = value_forms.decode(rows["value"].combine_chunks(), probes[name].type)
            hashed = all(counts_hashed(c[name]) for c in counts)  # as reduce_counts (the hashed path)
            kernel_s, dist = _best(lambda: valuepartitions.distributions([c[name] for c in counts], typed, hashed), repeat)
            dense = int(sum(c.field("index").null_count for c in dist.chunks))
            columns[name] = {
                "kind": kind,
                "stored_rows": rows.num_rows,
                "partition_distinct": sum(c[name].num_rows for c in counts),
                "dense_rows": dense,
                "reduce_cpu_s_off": round(off_s, 4),
                "reduce_cpu_s_on": round(on_s, 4),
                "added_cpu_s": round(on_s - off_s, 4),
                "kernel_cpu_s": round(kernel_s, 4),
            }
        sizes, write_s = {}, {}
        for mode in (False, True):
            uri = str(out_dir / f"table-{mode}.parquet")
            ident = FileIdentity("t", str(data), "table", "", "s", "j", FileIdentity.now())
            write_s[mode], _ = _best(
                lambda: write_table_frequencies(uri, ident, [l.name for l in leaves], *groups[mode], partitions=keys if mode else None).value,
                repeat,
            )
            sizes[mode] = Path(uri).stat().st_size
    finally:
        shutil.rmtree(out_dir, ignore_errors=True)
    total_off = sum(c["reduce_cpu_s_off"] for c in columns.values())
    total_on = sum(c["reduce_cpu_s_on"] for c in columns.values())
    return {
        "profile_cpu_s_all_partitions": round(profile_s, 3),
        "columns": columns,
        "reduce_cpu_s_off": round(total_off, 3),
        "reduce_cpu_s_on": round(total_on, 3),
        "write_cpu_s_off": round(write_s[False], 3),
        "write_cpu_s_on": round(write_s[True], 3),
        "frequencies_bytes_off": sizes[False],
        "frequencies_bytes_on": sizes[True],
    }


def _peer_lookup(ts, column: str, text: str) -> list[tuple[str, int]]:  # noqa: ANN001
    """Without value partitions: the column's rows of each partition's frequencies.parquet."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from engine.files import layout

    out = []
    for p in ts.partitions():
        first, groups, _, _ = ts.frequency_index(p.key)[column]
        f = pq.ParquetFile(ts.file_uri(layout.FREQUENCIES_FILE, p.key))
        for g in range(first, first + groups):
            t = f.read_row_group(g, columns=["value", "frequency"])
            at = pc.index(t["value"], text).as_py()
            if at >= 0:
                out.append((p.key, t["frequency"][at].as_py()))
                break
    return out


def lookups(store: Path, table: str) -> dict[str, Any]:
    from engine import lookup
    from engine.api import open_statistics
    from engine.lookup import files as lookup_files

    ts = open_statistics(str(store), table)
    top = {c: ts.top_frequencies(c, 1)["value"][0].as_py() for c in ("category", "comment", "user_id")}
    idx = ts.frequency_index()
    # a repeated comment from the column's last row group, and one that occurs once (not stored)
    f = lookup_files.open_file(ts.file_uri("frequencies.parquet"))
    first, groups, _, _ = idx["comment"]
    late = f.read_row_group(first + groups - 1, ("value",))["value"][-1].as_py()
    cases = [("category", top["category"]), ("comment", top["comment"]), ("comment", late), ("user_id", top["user_id"]),
             ("comment", "no such comment")]  # fmt: skip
    out = []
    for column, text in cases:
        row: dict[str, Any] = {"column": column, "value": text[:40]}
        for label in ("cold", "warm"):
            if label == "cold":
                lookup.clear_cache()
            t0, c0 = time.perf_counter(), time.process_time()
            got = ts.value_partitions(column, text)
            row[f"{label}_ms"] = round((time.perf_counter() - t0) * 1e3, 2)
            row[f"{label}_cpu_ms"] = round((time.process_time() - c0) * 1e3, 2)
        row["status"], row["partitions"] = got.status, len(got.partitions)
        t0 = time.process_time()
        peer = _peer_lookup(ts, column, got.text)
        row["peer_cpu_ms"] = round((time.process_time() - t0) * 1e3, 2)
        # the peer misses partitions where the value occurs once in a mostly distinct partition column
        row["peer_agrees"] = dict(peer) == dict(got.partitions)
        out.append(row)
        print(f"  lookup {column}={text[:30]!r}: {row['status']}, {row['partitions']} partitions; cold {row['cold_ms']} ms "
              f"({row['cold_cpu_ms']} CPU-ms), warm {row['warm_ms']} ms; peer (partition files) {row['peer_cpu_ms']} CPU-ms, "
              f"{'same answer' if row['peer_agrees'] else 'a different (incomplete) answer'}", flush=True)  # fmt: skip
    return {"cases": out}


def on_ray(data: Path, runs: int) -> dict[str, Any]:
    from engine.api import analyze, open_statistics
    from engine.files import layout
    from engine.runtime.ray_runtime import ensure_ray

    ensure_ray()
    root = Path(tempfile.mkdtemp(prefix="bench_vp_store_"))
    res: dict[bool, list[dict[str, float]]] = {False: [], True: []}
    try:
        analyze(str(data), store=str(root / "warm"), user_statistics=[], inherit=False)  # warm the workers
        for i in range(runs):
            for mode in (False, True):
                store = root / f"{mode}-{i}"
                r = analyze(str(data), store=str(store), user_statistics=[], inherit=False, value_partitions=mode)
                size = Path(open_statistics(str(store), r.table).file_uri(layout.FREQUENCIES_FILE)).stat().st_size
                res[mode].append(
                    {"cpu_s": r.timings["cpu_s"], "cpu_reduce_s": r.timings["cpu_reduce_s"], "wall_s": r.elapsed_s, "frequencies_bytes": size}
                )
                print(f"  ray run {i + 1} value_partitions={mode}: cpu {r.timings['cpu_s']:.2f} s, reduce cpu "
                      f"{r.timings['cpu_reduce_s']:.2f} s, wall {r.elapsed_s:.2f} s, table frequencies {size / 2**20:.1f} MiB", flush=True)  # fmt: skip
        looked = lookups(root / f"True-{runs - 1}", r.table)
    finally:
        shutil.rmtree(root, ignore_errors=True)

    def med(mode: bool, key: str) -> float:
        return round(statistics.median(x[key] for x in res[mode]), 3)

    return {
        "runs": {str(k): v for k, v in res.items()},
        **{f"median_{key}_{'on' if m else 'off'}": med(m, key) for m in (False, True) for key in ("cpu_s", "cpu_reduce_s", "wall_s")},
        "frequencies_bytes_off": res[False][0]["frequencies_bytes"],
        "frequencies_bytes_on": res[True][0]["frequencies_bytes"],
        "lookups": looked,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=5_000_000)
    ap.add_argument("--partitions", type=int, default=16)
    ap.add_argument("--data", help="reuse bench_analyze's data directory (DIR/table)")
    ap.add_argument("--repeat", type=int, default=3, help="in-process repeats (best taken)")
    ap.add_argument("--runs", type=int, default=2, help="analyze runs on Ray per mode")
    ap.add_argument("--skip-ray", action="store_true")
    ap.add_argument("--json")
    args = ap.parse_args()

    from common import ensure_data

    tmp = None
    if args.data:
        data, _ = ensure_data(Path(args.data), args.rows, args.partitions)
    else:
        tmp = Path(tempfile.mkdtemp(prefix="bench_vp_data_"))
        data, _ = ensure_data(tmp, args.rows, args.partitions)
    try:
        out: dict[str, Any] = {"rows": args.rows, "partitions": args.partitions}
        print("in-process reductions ...", flush=True)
        out["in_process"] = in_process(data, args.repeat)
        ip = out["in_process"]
        for name, c in ip["columns"].items():
            print(f"  {name:<12} {c['kind']:<16} stored {c['stored_rows']:>9,}  dense {c['dense_rows']:>7,}  reduce {c['reduce_cpu_s_off']:.3f} -> "
                  f"{c['reduce_cpu_s_on']:.3f} CPU-s (kernel {c['kernel_cpu_s']:.3f})")  # fmt: skip
        print(f"  all reductions {ip['reduce_cpu_s_off']:.3f} -> {ip['reduce_cpu_s_on']:.3f} CPU-s; write {ip['write_cpu_s_off']:.3f} -> "
              f"{ip['write_cpu_s_on']:.3f} CPU-s; table frequencies.parquet {ip['frequencies_bytes_off'] / 2**20:.2f} -> "
              f"{ip['frequencies_bytes_on'] / 2**20:.2f} MiB")  # fmt: skip
        if not args.skip_ray:
            print("analyze on Ray ...", flush=True)
            out["ray"] = on_ray(data, args.runs)
        if args.json:
            Path(args.json).parent.mkdir(parents=True, exist_ok=True)
            Path(args.json).write_text(json.dumps(out, indent=2) + "\n")
        print(
            json.dumps(
                {k: v for k, v in out.items() if k != "in_process"} | {"in_process": {k: v for k, v in ip.items() if k != "columns"}}, indent=2
            )
        )
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
