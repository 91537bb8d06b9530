"""The typed values the analyze job's tasks take and return (small, picklable), and what every task body shares.

Tasks take a shared :class:`JobContext` (put in the object store once per job) and a
:class:`PartitionTask` (which partition, where its files go, what they say about
themselves), and return typed values: a :class:`PartitionSummary`, a :class:`Binned` or a
:class:`TaskResult`, each with the CPU time the task used and the sizes of the files it
wrote (the catalog records them). Every task body of engine/runtime/tasks/ is plain
Python, testable without Ray.
"""

from __future__ import annotations

import functools
import math
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import numpy as np
import pyarrow as pa

from engine import types as mt
from engine.columns import LeafColumn
from engine.exceptions import AnalyzeError, MetastoreError
from engine.fileindex.store import StoredPart
from engine.files import writer
from engine.files.layout import FileIdentity
from engine.options import AnalyzeOptions
from engine.runtime import abort
from engine.sources.base import Partition, TableSource
from engine.stats.columnwise import StateColumns, union_theta
from engine.stats.profile import ColumnProfile, ColumnState
from engine.stats.user import UserStatistic

#: a histogrammed column as phase 1 saw it: work type, sorted distinct values in
#: storage form, and their counts (None: every value once)
BinInput = tuple[pa.DataType, np.ndarray, "np.ndarray | None"]
T = TypeVar("T", covariant=True)  # TaskResult is frozen: a TaskResult[X] is a TaskResult[X | None]


@dataclass(frozen=True)
class TaskResult(Generic[T]):
    """A task's value and the CPU seconds it used (process time: comparable under load)."""

    value: T
    cpu_s: float


@dataclass(frozen=True)
class PartitionTask:
    """One partition of a job: where its files go and what they say about themselves."""

    partition: Partition
    out_uri: str  # the partition's directory in the job's run
    identity: FileIdentity


@dataclass(frozen=True)
class Binned:
    """Phase 2 of one partition: exact bin counts per histogrammed column."""

    counts: dict[str, np.ndarray]
    cpu_s: float
    files: dict[str, writer.WrittenFile] = field(default_factory=dict)  # file name -> size and checksum of each file written


@dataclass(frozen=True)
class PhaseTwoInputs:
    """What phase 2 of a profiled partition takes from phase 1: the partition's statistics
    rows (written beside its histograms) and the binning inputs (see :data:`BinInput`).

    A Ray object of its own, passed by reference from task to task and never fetched by
    the driver: the rows are ~19 KB a partition of the bench table (their KLL and theta
    sketches, percentiles as Arrow scalars) and took ~0.25 ms of the driver's CPU a
    partition to unpickle when they travelled in the :class:`PartitionSummary`.
    """

    stat_rows: list[dict[str, Any]]
    binnable: dict[str, BinInput] = field(default_factory=dict)


@dataclass
class PartitionSummary:
    """What the driver fetches of a partition's phase 1: the mergeable states (and what the
    catalog and the file index record); the rest stays in the object store (PhaseTwoInputs)."""

    key: str
    rows: int
    states: dict[str, ColumnState]
    cpu_s: float = 0.0  # CPU seconds the task used (process time: comparable under load)
    #: the first wave's guess of the histogrammed columns' ranges, from metadata
    #: (TableSource.column_bounds); None: not asked
    bounds: dict[str, tuple[pa.Scalar, pa.Scalar] | None] | None = None
    files: dict[str, writer.WrittenFile] = field(default_factory=dict)  # file name -> size and checksum of each file written
    #: the partition's part of the per-file column index, stored form (None: not built for this source)
    file_index: StoredPart | None = None
    #: the Ray nodes the partition's phase-1 tasks ran on (where the job went; "" outside Ray)
    nodes: tuple[str, ...] = ()


@dataclass(frozen=True)
class SummaryBatch:
    """The summaries of a batch's partitions (in the batch's order), as the driver fetches them:
    the per-partition values in lists, the states of each column field by field
    (:class:`engine.stats.columnwise.StateColumns`), which the driver merges without
    building a ColumnState a partition (a list of PartitionSummary objects took ~0.3 ms a
    partition of the bench table to unpickle, most of it in the states' small objects).
    """

    keys: list[str]
    rows: list[int]
    cpu_s: list[float]
    files: list[dict[str, writer.WrittenFile]]
    file_index: list[StoredPart | None]
    nodes: list[tuple[str, ...]]
    states: dict[str, StateColumns]
    theta: dict[str, bytes | None]  # column -> the union of the partitions' theta sketches (columnwise.union_theta)

    def __len__(self) -> int:
        return len(self.keys)

    @staticmethod
    def of(summaries: list[PartitionSummary], leaves: list[LeafColumn], user: list[UserStatistic]) -> SummaryBatch:
        names = [l for l in leaves if summaries and l.name in summaries[0].states]
        return SummaryBatch(
            keys=[s.key for s in summaries],
            rows=[s.rows for s in summaries],
            cpu_s=[s.cpu_s for s in summaries],
            files=[s.files for s in summaries],
            file_index=[s.file_index for s in summaries],
            nodes=[s.nodes for s in summaries],
            states={l.name: StateColumns.of(column_profile(l.name, l.type, user), [s.states[l.name] for s in summaries]) for l in names},
            theta={l.name: union_theta([s.states[l.name] for s in summaries]) for l in names},
        )

    def summary(self, i: int) -> PartitionSummary:
        """The ``i``-th partition's summary without its column states (the driver merges
        those from :attr:`states` and :attr:`theta`, column-wise)."""
        return PartitionSummary(
            self.keys[i],
            self.rows[i],
            {},
            self.cpu_s[i],
            files=self.files[i],
            file_index=self.file_index[i],
            nodes=self.nodes[i],
        )


def node_id() -> str:
    """The Ray node this process runs on ("" outside Ray: the task bodies run without it in
    process, engine/runtime/job/local_executor.py, and in tests; Ray is not imported for it)."""
    ray = sys.modules.get("ray")
    if ray is None or not ray.is_initialized():
        return ""
    try:
        return ray.get_runtime_context().get_node_id()
    except Exception:
        return ""


def histogram_leaves(leaves: list[LeafColumn], user: list[UserStatistic]) -> list[LeafColumn]:
    return [l for l in leaves if column_profile(l.name, l.type, user).unsupported is None and mt.histogram_domain(l.type)]


def column_profile(name: str, type_: pa.DataType, user: Sequence[UserStatistic]) -> ColumnProfile:
    """``ColumnProfile(name, type_, user)``, made once per process for the same arguments.

    A profile is not changed after it is made (its states are ColumnState objects), and the
    tasks ask for the same columns' profiles again and again (which are reduced, which have
    histograms, the summaries' merges): on a table of 200 columns making them cost ~5% of
    an analyze's CPU."""
    try:
        return _column_profile(name, type_, tuple(user))
    except TypeError:  # an unhashable type or user statistic: made anew
        return ColumnProfile(name, type_, user)


@functools.lru_cache(maxsize=4096)
def _column_profile(name: str, type_: pa.DataType, user: tuple[UserStatistic, ...]) -> ColumnProfile:
    return ColumnProfile(name, type_, user)


@dataclass(frozen=True)
class JobContext:
    """What every phase-1 task of a job shares (put in the object store once)."""

    source: TableSource
    leaves: list[LeafColumn]
    user: list[UserStatistic]
    options: AnalyzeOptions
    job_id: str = ""  # the job's stop flag (engine.runtime.abort): set when the job failed elsewhere

    def stopped(self) -> bool:
        return bool(self.job_id) and abort.requested(self.job_id)


# ---------------------------------------------------------------- batches: several partitions in one task
# engine/runtime/batching.py decides which partitions share a task. Each partition is
# still profiled, binned and written on its own (its files are the same as in a task of
# its own); a batch task returns one Ray object per kind for all of its partitions (a
# list, in the batch's order), so the driver submits and tracks objects per batch.

#: how often (seconds) a batch task asks whether its job was stopped (a GCS read each time)
STOP_CHECK_S = 0.5


class StopCheck:
    """``job.stopped()`` at the start and then at most every :data:`STOP_CHECK_S` seconds:
    a batch of many small partitions stops within a partition or two of the flag."""

    def __init__(self, job: JobContext) -> None:
        self.job, self.last = job, -math.inf

    def __call__(self) -> bool:
        now = time.monotonic()
        if now - self.last < STOP_CHECK_S:
            return False
        self.last = now
        return self.job.stopped()


# ---------------------------------------------------------------- shared by the task bodies
def column_passes(leaves: list[LeafColumn], per_pass: int) -> list[list[LeafColumn]]:
    tops: list[str] = []
    for leaf in leaves:
        if leaf.top not in tops:
            tops.append(leaf.top)
    out = []
    for i in range(0, len(tops), per_pass):
        chunk = set(tops[i : i + per_pass])
        out.append([l for l in leaves if l.top in chunk])
    return out


def read_error(partition: Partition, exc: Exception) -> MetastoreError:
    if isinstance(exc, MetastoreError):
        return exc
    files = ", ".join(f.path for f in partition.files[:3])
    return AnalyzeError(f"partition {partition.key or '(unpartitioned)'} ({files}): {type(exc).__name__}: {exc}")
