"""The append stage: the table's discrete columns from its counts at the base, the earlier appends'
and the new partitions' (engine/stats/appendcounts.py), and the delta segment of its frequencies.

What cannot be known while planning is an :class:`AppendFailed` result (never an exception):
an inherited partition that cannot be loaded (its value counts are needed after all), or table
counts that cannot be read. The driver then runs the job again with a full reduction.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.files import layout
from engine.files.writer import WrittenFile
from engine.runtime import batching
from engine.runtime.job.plan import Append, JobPlan
from engine.runtime.job.profile import Wave
from engine.runtime.job.runner import ObjectRef, TaskRunner
from engine.runtime.tasks.append import AppendInputs, append_table, write_segment


@dataclass(frozen=True)
class AppendFailed:
    """Why this job cannot append after all: it is run again with a full reduction (``warn``:
    say so in the result's warnings); ``cpu_s``: what the attempt spent."""

    why: str
    cpu_s: float = 0.0
    warn: bool = False


@dataclass(frozen=True)
class AppendRefs:
    result: ObjectRef  # TaskResult of AppendedTable, or of why the table's counts cannot be read
    segment: ObjectRef  # TaskResult of the delta segment written


@dataclass(frozen=True)
class Appended:
    exact: dict[str, dict[str, Any]]
    segment: WrittenFile  # the table's frequencies now: this job's delta segment
    cpu_s: float


def after_loads(wave: Wave) -> AppendFailed | None:
    """An inherited partition that could not be loaded: its counts are needed after all; or the
    table's merged state (or histograms) that cannot be read."""
    if wave.table_failure:
        return AppendFailed(f"the table's merged state cannot be read ({wave.table_failure})", warn=True)
    if not wave.failed:
        return None
    return AppendFailed(f"{batching.describe(tuple(p.key for p in wave.failed))} cannot be inherited")


def submit(plan: JobPlan, mode: Append, executor: TaskRunner, wave: Wave) -> AppendRefs:
    """The append task and the writer of the delta segment it yields."""
    where = plan.store.layout(plan.table)
    # counted columns (floats, times) in their work type, as the reductions counted them
    types = {l.name: plan.probes[l.name].work_type if plan.probes[l.name].counted else l.type for l in plan.leaves}
    base = [(where.absolute(f["path"]), f.get("checksum", ""), [(c, types[c]) for c in f["columns"]]) for f in mode.counts["files"]]
    distinct = {c: int(v["distinct"]) for c, v in mode.counts.get("columns", {}).items()}
    inherited = plan.inheritance.inherited
    inputs = AppendInputs(
        base, [inherited[k] for k in mode.earlier], where.absolute(mode.head.path), mode.head.checksum, distinct, plan.inheritance.config,
        [(l.name, l.type) for l in plan.leaves if plan.probes[l.name].reduced], [(c, types[c]) for c in plan.counted],
    )  # fmt: skip
    objects: list[ObjectRef] = []
    at: dict[tuple[int, int], int] = {}
    new: list[list[tuple[int, int]]] = []
    for key in mode.new:
        batch, pos = wave.where[key]
        per_group = []
        for gi in range(len(plan.groups)):
            if (batch, gi) not in at:
                at[(batch, gi)] = len(objects)
                objects.append(wave.batches[batch].groups[gi])
            per_group.append((at[(batch, gi)], pos))
        new.append(per_group)
    group_of = {name: gi for gi, g in enumerate(plan.groups) for name in g}
    columns = [(name, types[name]) for name in plan.discrete]
    result, rows = executor.submit(append_table, columns, plan.options.mostly_distinct_ratio, inputs, new, group_of, *objects, num_returns=2)
    uri = where.absolute(plan.run_layout.table_file(layout.FREQUENCIES_FILE))
    segment = executor.submit(write_segment, uri, plan.identity("table", ""), [l.name for l in plan.leaves], result, rows)
    return AppendRefs(result, segment)


def collect(executor: TaskRunner, refs: AppendRefs, spent: float) -> Appended | AppendFailed:
    """The appended table's exact statistics, or why the table's counts cannot be read
    (``spent``: the CPU seconds of the job so far, counted in the failed attempt)."""
    appended, segment = executor.get([refs.result, refs.segment])
    if isinstance(appended.value, str):  # a file of the table's counts is missing or damaged
        return AppendFailed(f"the table's value counts cannot be read ({appended.value})", spent + appended.cpu_s, warn=True)
    return Appended(appended.value.exact, segment.value, appended.cpu_s + segment.cpu_s)
