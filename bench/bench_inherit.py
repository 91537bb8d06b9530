#!/usr/bin/env python
"""Inheritance of unchanged partitions: what a re-analyze costs against a full one, and what the
partial state costs to write.

On the sample table (``--rows``, ``--partitions``), all measured in the same run:

- a first analyze (every partition profiled, partial states written);
- a re-analyze of the unchanged table (every partition inherited, the table level carried over);
- one data file rewritten: re-analyze with inheritance, and the same with ``inherit=False``
  (the peer: a full recomputation of the same snapshot);
- a new partition of new rows appended (the generator's next partition, held back until then:
  the table's values as a real append adds them; the histogram edges of the partition column
  move, so the inherited partitions re-bin that column only), against ``inherit=False``:
  the discrete columns are reduced from the table's counts at its last full reduction plus the
  new partition's, and the table's frequencies get a delta segment (docs/FORMAT.md);
- a copy of partition 0 appended as one more partition (every value of it now twice: the
  ``comment`` column's share of distinct values falls below ``mostly_distinct_ratio``, so its
  frequencies change kind and are written in full), against ``inherit=False``;
- in-process (no Ray), the CPU seconds of ``profile_partition`` on the largest partition
  with and without writing the partial state, and the files' sizes.

CPU seconds are the tasks' process time (``AnalyzeResult.timings["cpu_s"]``): comparable
on a shared machine. Wall-clock seconds are reported too, and are noisy.

Usage: python bench/bench_inherit.py [--rows 1000000] [--partitions 16] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def _job(result) -> dict:  # noqa: ANN001
    t = result.timings
    return {
        "cpu_s": round(t["cpu_s"], 3),
        "cpu_profile_s": round(t["cpu_profile_s"], 3),
        "cpu_inherit_s": round(t.get("cpu_inherit_s", 0.0), 3),
        "cpu_histograms_s": round(t["cpu_histograms_s"], 3),
        "cpu_reduce_s": round(t["cpu_reduce_s"], 3),
        "wall_s": round(result.elapsed_s, 3),
        "inherited": result.inherited,
        "recomputed": result.recomputed,
        "rebinned": result.rebinned,
        "carried_over": bool(result.carried_over),  # an unchanged table: nothing merged (docs/CATALOG.md)
        "frequency_segments": result.frequency_segments,  # > 1: an append wrote a delta segment
    }


def _partial_state_cost(data: Path, repeats: int = 3) -> dict:
    """profile_partition of the largest partition in this process, with and without the partial state."""
    from engine.columns import leaf_columns
    from engine.files import partial_state
    from engine.files.layout import FileIdentity
    from engine.options import AnalyzeOptions
    from engine.runtime.tasks.profile import profile_partition
    from engine.runtime.tasks.values import JobContext, PartitionTask
    from engine.sources import open_table
    from engine.stats.profile import ColumnProfile
    from engine.stats.user import register_examples, registered

    register_examples()
    user = registered()
    source = open_table(str(data))
    leaves = leaf_columns(source.schema())
    part = max(source.partitions(), key=lambda p: p.size)
    options = AnalyzeOptions()
    ident = FileIdentity("t", str(data), "partition", part.key, "s", "j", FileIdentity.now())
    out = Path(tempfile.mkdtemp(prefix="bench_inherit_"))
    real = partial_state.write
    timings: dict[str, list[float]] = {"with": [], "without": []}
    try:
        for _ in range(repeats):
            for mode in ("without", "with"):
                partial_state.write = real if mode == "with" else (lambda *a, **k: {})
                target = out / mode
                shutil.rmtree(target, ignore_errors=True)
                target.mkdir()
                t0 = time.process_time()
                profile_partition(JobContext(source, leaves, user, options), PartitionTask(part, str(target), ident), [])
                timings[mode].append(time.process_time() - t0)
        sizes = {p.name: p.stat().st_size for p in (out / "with").iterdir()}
        t0 = time.process_time()
        profiles = [ColumnProfile(l.name, l.type, user) for l in leaves]
        cfg = partial_state.config(options.mostly_distinct_ratio, user)
        s_uri, c_uri = partial_state.uris(str(out / "with"))
        partial_state.read_states(s_uri, profiles, user, cfg)
        partial_state.read_counts(c_uri, [p for p in profiles if p.reduced], cfg)
        read_s = time.process_time() - t0
    finally:
        partial_state.write = real
        shutil.rmtree(out, ignore_errors=True)
    w, wo = min(timings["with"]), min(timings["without"])
    return {
        "partition": part.key,
        "rows": part.row_count,
        "data_bytes": part.size,
        "profile_cpu_s_without": round(wo, 3),
        "profile_cpu_s_with": round(w, 3),
        "overhead": round(w / wo - 1, 3),
        "read_cpu_s": round(read_s, 3),
        "file_bytes": sizes,
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--partitions", type=int, default=16)
    ap.add_argument("--json")
    args = ap.parse_args()

    import pyarrow.parquet as pq

    from engine.api import analyze
    from engine.runtime.ray_runtime import ensure_ray
    from engine.sample import generate_table, partition_names
    from engine.stats.user import register_examples, registered

    register_examples()
    user = registered()
    root = Path(tempfile.mkdtemp(prefix="bench_inherit_"))
    out: dict = {"rows": args.rows, "partitions": args.partitions}
    try:
        data = root / "sales"
        # one partition more than analyzed first: the last is held back and appended later
        per = args.rows // args.partitions
        generate_table(str(data), rows=per * (args.partitions + 1), partitions=args.partitions + 1, seed=0)
        names = partition_names(args.partitions + 1)  # the generator's directory names (zero-padded)
        held = root / "held"
        shutil.move(str(data / f"part={names[-1]}"), str(held))
        ensure_ray()
        out["partial_state"] = _partial_state_cost(data)
        store = root / "store"
        out["first"] = _job(analyze(str(data), store=str(store), user_statistics=user))
        out["unchanged"] = _job(analyze(str(data), store=str(store), user_statistics=user))
        f = data / f"part={names[1]}" / "data-0.parquet"
        t = pq.read_table(f)
        pq.write_table(t.slice(0, t.num_rows - 1), f)
        out["one_file_changed"] = _job(analyze(str(data), store=str(store), user_statistics=user))
        out["one_file_changed_full"] = _job(analyze(str(data), store=str(root / "full1"), user_statistics=user, inherit=False))
        shutil.move(str(held), str(data / f"part={names[-1]}"))
        out["partition_appended"] = _job(analyze(str(data), store=str(store), user_statistics=user))
        out["partition_appended_full"] = _job(analyze(str(data), store=str(root / "full2"), user_statistics=user, inherit=False))
        new = data / f"part={args.partitions + 1:0{len(names[0])}d}"
        new.mkdir()
        shutil.copy(data / f"part={names[0]}" / "data-0.parquet", new / "data-0.parquet")
        out["partition_copied"] = _job(analyze(str(data), store=str(store), user_statistics=user))
        out["partition_copied_full"] = _job(analyze(str(data), store=str(root / "full3"), user_statistics=user, inherit=False))
        for name, peer in (
            ("unchanged", "first"),
            ("one_file_changed", "one_file_changed_full"),
            ("partition_appended", "partition_appended_full"),
            ("partition_copied", "partition_copied_full"),
        ):
            out[f"{name}_cpu_ratio"] = round(out[name]["cpu_s"] / out[peer]["cpu_s"], 3)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    text = json.dumps(out, indent=1)
    print(text)
    if args.json:
        Path(args.json).write_text(text)


if __name__ == "__main__":
    main()
