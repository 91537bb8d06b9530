"""The table reductions of reduced columns (discrete ones, numbers and times), the table's
frequencies file and its counts files.

Submitted as soon as every partition's phase-1 objects exist (as refs), before any
wait: each reduction starts as soon as its inputs are ready, ahead of phase 2. The
Redis strategy (engine/frequencies) consolidates its columns instead, while phase 2 bins.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from engine.files import layout
from engine.files.writer import WrittenFile
from engine.options import FrequencyStrategy
from engine.runtime import frequency_strategy
from engine.runtime.job.plan import JobPlan
from engine.runtime.job.profile import Wave
from engine.runtime.job.runner import ObjectRef, TaskRunner
from engine.runtime.tasks.reduce import TableCountsOut, reduce_batches, unbatch, write_table_frequencies


@dataclass(frozen=True)
class Reductions:
    """The submitted reductions: per column group, its exact statistics and its frequency rows."""

    via_redis: list[str]  # columns the Redis strategy consolidates instead
    exact: tuple[ObjectRef, ...] = ()  # TaskResult of {column: exact statistics} each
    rows: tuple[ObjectRef, ...] = ()  # the group's frequency rows each
    counts: tuple[ObjectRef, ...] = ()  # the table counts files each reduction wrote (kept for appends): a list of one or none
    frequencies: ObjectRef | None = None  # TaskResult of the table frequencies file written


@dataclass(frozen=True)
class RedisFrequencies:
    """The Redis strategy's columns: exact statistics, frequency rows and its report."""

    exact: dict[str, dict[str, Any]] = field(default_factory=dict)
    rows: list[tuple[str, str, pa.Table]] = field(default_factory=list)
    report: dict[str, Any] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Reduced:
    """The reductions' results, fetched."""

    exact: dict[str, dict[str, Any]]
    counts_files: list[dict[str, Any]]  # the table counts files this job's reductions wrote
    table_frequencies: WrittenFile
    cpu_s: float  # the reductions', the counts' and the table frequencies' writers'


def submit(plan: JobPlan, executor: TaskRunner, wave: Wave) -> Reductions:
    """Submit the table reductions of reduced columns, and the table frequencies' writer.
    Each takes every batch's object of its group and the table's partition order in them."""
    options = plan.options
    via_redis: list[str] = []
    if options.frequencies is FrequencyStrategy.REDIS and plan.discrete:
        via_redis = frequency_strategy.redis_columns(plan.discrete, {l.name: plan.probes[l.name].type for l in plan.leaves})
    order = [wave.where[p.key] for p in plan.partitions]
    # the table's counts are kept for later append re-analyzes (plan.Append) when one could use them
    keep_counts = plan.inheritance.write_partial_state and not via_redis and not options.value_partitions
    where = plan.store.layout(plan.table)
    rows = sum(p.row_count or 0 for p in plan.partitions)
    exact_refs, rows_refs = [], []
    counts_refs: list[ObjectRef] = []
    for g_index, group in enumerate(plan.groups):
        # counted columns (floats, times) in their work type: their counts are (float16 as float32)
        cols = [(name, plan.probes[name].work_type, None) for name in group if name not in via_redis]
        if not cols:
            continue
        counted = [name for name, _, _ in cols if plan.probes[name].counted]
        group_objs = [b.groups[g_index] for b in wave.batches]
        counts_out = None
        if keep_counts:
            path = plan.run_layout.table_file(f"table_counts-{g_index}.arrow")
            counts_out = TableCountsOut(where.absolute(path), path, plan.identity("table", ""), rows, plan.inheritance.config)
        exact, rows_ref, counts = executor.submit(
            reduce_batches, cols, options.mostly_distinct_ratio, order, *group_objs,
            value_partitions=options.value_partitions, counts_out=counts_out, counted=counted, num_returns=3,
        )  # fmt: skip
        exact_refs.append(exact)
        rows_refs.append(rows_ref)
        counts_refs.append(counts)
    reductions = Reductions(via_redis, tuple(exact_refs), tuple(rows_refs), tuple(counts_refs))
    if via_redis:
        return reductions
    # written as soon as the reductions end, while phase 1 or 2 goes on
    return Reductions(via_redis, reductions.exact, reductions.rows, reductions.counts, write_frequencies(plan, executor, reductions, []))


def write_frequencies(plan: JobPlan, executor: TaskRunner, reductions: Reductions, more: list[tuple[str, str, pa.Table]]) -> ObjectRef:
    """The table frequencies' writer: the reductions' rows and ``more`` (the Redis strategy's)."""
    return executor.submit(
        write_table_frequencies,
        plan.store.layout(plan.table).absolute(plan.run_layout.table_file(layout.FREQUENCIES_FILE)),
        plan.identity("table", ""),
        [l.name for l in plan.leaves],
        more,
        *reductions.rows,
        partitions=[p.key for p in plan.partitions] if plan.options.value_partitions else None,
    )


def redis(plan: JobPlan, executor: TaskRunner, wave: Wave, columns: list[str]) -> RedisFrequencies:
    """The Redis strategy consolidates while the phase-2 tasks bin; its inputs are the
    phase-1 objects (profiled or inherited), one per partition: a batch's object of a
    column group is split into its partitions' by one small task."""
    if not columns:
        return RedisFrequencies()
    t1 = time.perf_counter()
    group_of = {name: gi for gi, g in enumerate(plan.groups) for name in g}
    split: dict[tuple[int, int], list[ObjectRef]] = {}

    def partition_ref(key: str, gi: int) -> ObjectRef:
        at, pos = wave.where[key]
        if (at, gi) not in split:
            b = wave.batches[at]
            refs = executor.submit(unbatch, b.groups[gi], num_returns=len(b.keys), owner=b.keys)
            split[(at, gi)] = list(refs) if len(b.keys) > 1 else [refs]
        return split[(at, gi)][pos]

    exact, rows, report = frequency_strategy.run(
        columns,
        {l.name: plan.probes[l.name].type for l in plan.leaves},
        {l.name: i for i, l in enumerate(plan.leaves)},
        {name: [partition_ref(part.key, group_of[name]) for part in plan.partitions] for name in columns},
        plan.job_id,
        plan.options.mostly_distinct_ratio,
        plan.options.frequency_settings,
        plan.options.redis_url,
        executor.progress,
    )
    return RedisFrequencies(exact, rows, report, {"redis_frequencies_s": time.perf_counter() - t1})


def collect(executor: TaskRunner, reductions: Reductions) -> Reduced:
    """Fetch the reductions, the counts files' and the table frequencies' writers."""
    exact: dict[str, dict[str, Any]] = {}
    cpu = 0.0
    for result in executor.get(list(reductions.exact)):
        cpu += result.cpu_s
        exact.update(result.value)
    counts_files: list[dict[str, Any]] = []
    for written in executor.get(list(reductions.counts)):
        counts_files.extend(written)
    assert reductions.frequencies is not None
    frequencies = executor.get(reductions.frequencies)
    return Reduced(exact, counts_files, frequencies.value, cpu + frequencies.cpu_s)
