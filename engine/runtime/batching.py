"""Small partitions grouped into one Ray task: which partitions go together.

A Ray task costs the driver a few milliseconds whatever it does (submitting it,
tracking the objects it returns, fetching what it returns): ~6 ms of the driver's
CPU a partition when every partition had its own tasks (docs/PERFORMANCE.md
"Scaling"). A table of thousands of small partitions spends more on that than on
its data, so consecutive partitions in the job's scheduling order are packed into
one task until a byte budget is reached, the way Spark packs small files into one
input split (``spark.sql.files.maxPartitionBytes`` and ``openCostInBytes``). Each
partition still gets its own files and its own statistics; only the number of
tasks and Ray objects shrinks.

Pure: the job (engine/runtime/job/) gives the partitions' sizes and the
cluster's CPUs, and gets back the batches as ranges of positions.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

#: what a partition costs a task beyond its bytes, counted as bytes: the fixed work of each
#: partition (opening its files, writing its four statistics files); also caps a batch of
#: empty or tiny partitions at ``task_bytes / PARTITION_COST_BYTES`` partitions (64 by default)
PARTITION_COST_BYTES = 256 * 1024

#: the job keeps at least this many tasks per CPU of the cluster when it has the partitions
#: for them (the budget shrinks, never below one partition a task): without it a table of
#: 100 partitions of 100 KB would run as one task on one core
TASKS_PER_CPU = 2


def budget(sizes: Sequence[int], task_bytes: int, cpus: int, tasks_per_cpu: int | None = None) -> int:
    """The bytes one task takes (0: one partition a task).

    ``task_bytes`` (AnalyzeOptions.task_bytes), lowered so that the partitions fill
    at least ``tasks_per_cpu`` x ``cpus`` tasks, as Spark lowers its split size to
    the bytes per core.
    """
    if task_bytes <= 0 or not sizes:
        return 0
    per_cpu = TASKS_PER_CPU if tasks_per_cpu is None else tasks_per_cpu
    total = sum(max(0, s) + PARTITION_COST_BYTES for s in sizes)
    spread = math.ceil(total / max(1, cpus * per_cpu)) if per_cpu > 0 else total
    return max(PARTITION_COST_BYTES, min(task_bytes, spread))


def plan(sizes: Sequence[int], budget_bytes: int) -> list[range]:
    """Consecutive positions of ``sizes`` grouped into batches: each partition exactly once,
    in order; a batch takes the next partition while its bytes stay within ``budget_bytes``
    (each partition counted with :data:`PARTITION_COST_BYTES`); a partition as large as the
    budget is a batch of its own. ``budget_bytes`` 0: one partition a batch."""
    batches: list[range] = []
    start, filled = 0, 0
    for i, size in enumerate(sizes):
        cost = max(0, size) + PARTITION_COST_BYTES
        if i > start and (budget_bytes <= 0 or filled + cost > budget_bytes):
            batches.append(range(start, i))
            start, filled = i, 0
        filled += cost
    if start < len(sizes):
        batches.append(range(start, len(sizes)))
    return batches


def describe(keys: Sequence[str], key: str | None = None) -> str:
    """A batch for an error line: its partition (the one named, else its first) and how many
    others shared its task."""
    first = key if key is not None else (keys[0] if keys else "")
    text = f"partition {first or '(unpartitioned)'}"
    others = len(keys) - 1
    if others > 0:
        text += f" (with {others} other{'s' if others > 1 else ''} in its task)"
    return text
