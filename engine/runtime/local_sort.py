"""Exact quantiles of a small table's column in this process, without Ray.

The same task bodies as the distributed sort (engine/runtime/sort_tasks.py) with one
range: a prepare per group of partitions (:func:`sort_tasks.units`, one per CPU as on a
local Ray), then the one range's merge, which picks the keys at the wanted ranks. The
answers are those of engine/runtime/distributed_sort.quantiles (DuckDB's
``quantile_disc``), whatever its ranges; engine/runtime/placement.py says when a table is
small enough (engine/quantiles.py chooses).
"""

from __future__ import annotations

import os
import time
from collections.abc import Sequence
from typing import Any

from engine.runtime import sort_tasks
from engine.sources.base import TableSource
from engine.stats import ranks


def quantiles(source: TableSource, column: str, probabilities: Sequence[object], *, representation: str = "auto") -> sort_tasks.ColumnQuantiles:
    """Exact quantiles of ``column`` (None each when it has no values), in this process."""
    ranks.ranks_for(0, probabilities)  # checks them before any work
    type_, codec = sort_tasks.column_codec(source, column, None, representation)
    started = time.perf_counter()
    units = sort_tasks.units(source, os.cpu_count() or 1)
    prepared = [sort_tasks.prepare_unit(source, u, i, column, codec, representation) for i, u in enumerate(units)]
    infos = [p for _, p in prepared]
    t1 = time.perf_counter()
    count = sum(p.count for p in infos)
    wanted = ranks.ranks_for(count, probabilities)
    picks = [r for r in wanted if r is not None]
    # the one range: every partition's keys whole (split with no cut), merged as a range task merges them
    pieces = [sort_tasks.split_unit(local, i, [])[0] for i, (local, info) in enumerate(prepared) if info.count]
    del prepared
    _, merged = sort_tasks.merge_range(codec, codec.kind == "numpy", picks, False, *pieces)
    values = codec.to_python(merged.picked) if count else [None] * len(wanted)
    t2 = time.perf_counter()
    timings: dict[str, Any] = {
        "prepare_s": t1 - started,
        "prepare_cpu_s": sum(p.cpu_s for p in infos),
        "read_cpu_s": sum(p.read_cpu_s for p in infos),
        "prepare_tasks": len(units),
        "runs_tasks": sum(1 for p in infos if p.runs >= 0),
        "split_s": 0.0,
        "merge_s": t2 - t1,
        "merge_cpu_s": merged.cpu_s,
        "total_s": t2 - started,
        "ranges": 1,
        "tasks": len(units) + 1,
        "shuffle": "none",
        "merge": "local",
    }
    return sort_tasks.ColumnQuantiles(type_, count, sum(p.nulls for p in infos), sum(p.nans for p in infos), wanted, values, timings)
