"""The analyze job's plan: everything decided before the first profile task, frozen.

:func:`plan_job` reads the source's snapshot and partitions, which partitions are
unchanged since the catalog's state (engine/runtime/inheritance.py), and the job's
mode, a type rather than a flag:

- :class:`CarryOver`: every partition inherited (their files checked), none gone, the
  same table-level options: the table level is named again, nothing merged or written;
- :class:`Append`: only new partitions since the catalog's state, which has the table's
  value counts: the discrete columns are reduced from them plus the new partitions'
  (engine/stats/appendcounts.py), the frequencies get a delta segment; with the table's
  merged state (``Append.state``: written by the last full reduction or append, covering
  every inherited partition, which all come before the new ones) the inherited partitions'
  states are that one file, not one each (an append's cost then does not grow with them);
- :class:`Full`: every other job, and an append that cannot append (``allow_append``
  False: the driver plans again after an :class:`engine.runtime.job.append.AppendFailed`).

It also holds the column groups of the reductions, the byte budget of a task
(engine/runtime/batching.py) and which inherited partitions' file-index parts are stale.
"""

from __future__ import annotations

import base64
import dataclasses
import hashlib
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from engine.catalog import FileRef, RunLayout
from engine.catalog.model import FILE_INDEX_PROPERTY, FREQUENCY_SEGMENTS_PROPERTY, TABLE_COUNTS_PROPERTY
from engine.columns import LeafColumn
from engine.fileindex import sources as fileindex_sources
from engine.fileindex import store as fileindex_store
from engine.fileindex.build import PartitionFileIndex, without_blooms
from engine.files import layout
from engine.files.layout import FileIdentity
from engine.options import AnalyzeOptions, FrequencyStrategy
from engine.runtime import batching, inheritance
from engine.runtime.job.runner import TaskRunner
from engine.runtime.tasks.values import PartitionTask, histogram_leaves
from engine.sources.base import Partition, TableSource
from engine.stats import stringsort
from engine.stats.profile import ColumnProfile
from engine.stats.user import UserStatistic
from engine.store import Store

log = logging.getLogger("engine.analyze")

#: table property: the options the table-level files depend on beyond the partitions' own
#: (inheritance.CONFIG_PROPERTY); a job carries the table level over only when they are equal
TABLE_OPTIONS_PROPERTY = "table_options"
#: table property: the job that wrote the table-level files (a carried-over state names them again)
TABLE_FILES_JOB_PROPERTY = "table_files_job"

#: table property: the table's exact value counts at its last full reduction, for append re-analyzes:
#: ``{"files": [{"path", "size", "checksum", "columns"}], "base_partitions": [...], "appended": [...],
#: "columns": {name: {"distinct": n}}, "state": ...}`` (engine/stats/appendcounts.py)
#: (the property's name is engine.catalog.model.TABLE_COUNTS_PROPERTY)

#: the table counts property's key naming the table's merged state, ``{"path", "size", "checksum",
#: "partitions"}`` (engine/files/partial_state.py, TABLE_STATE_FILE; "partitions": :func:`partitions_digest`)
TABLE_STATE_KEY = "state"

#: at most this many segments of the table's frequencies (a base and its deltas): an append beyond
#: them, or one whose partitions since the base outweigh the base (bytes), reduces the table in full
MAX_FREQUENCY_SEGMENTS = 8


@dataclass(frozen=True)
class Full:
    """Profile what changed, load what did not, reduce and merge the whole table."""


@dataclass(frozen=True)
class Append:
    """A re-analyze that only appends partitions to the catalog's table: the table's discrete
    columns are reduced from its counts at the base plus the appended ones (engine/stats/appendcounts.py)
    and its frequencies get a delta segment instead of a new file."""

    counts: dict[str, Any]  # the table_counts property
    segments: list[dict[str, Any]]  # the older segments after this job: the current ones, base first
    head: FileRef  # the current newest segment (its head row groups)
    new: tuple[str, ...]  # partitions appended now
    earlier: tuple[str, ...]  # partitions appended since the base
    #: the table's merged state of every inherited partition (the table counts' ``state``: loaded
    #: instead of each partition's state), or None: each partition's state is loaded
    state: dict[str, Any] | None = None


@dataclass(frozen=True)
class CarryOver:
    """Nothing changed: the catalog's table level is published again, its files named again."""

    table: inheritance.CarriedTable


Mode = Full | Append | CarryOver


@dataclass(frozen=True)
class JobPlan:
    """One analyze of one source into one store, as decided before any profile task."""

    source: TableSource
    store: Store
    leaves: list[LeafColumn]
    user: list[UserStatistic]
    options: AnalyzeOptions
    job_id: str
    snapshot: str
    created: str
    partitions: list[Partition]
    inheritance: inheritance.Plan
    mode: Mode
    probes: dict[str, ColumnProfile]
    discrete: list[str]
    #: the reduced columns (ColumnProfile.reduced: the discrete ones, and numbers and times,
    #: whose frequencies are not stored) in reduction groups (strings and binary first: the longest)
    groups: list[list[str]]
    #: two waves of profiling: the reductions wait only for the first (reduced columns)
    two_waves: bool
    hist_leaves: list[LeafColumn]
    #: small partitions share a task up to this many bytes (engine/runtime/batching.py)
    task_budget: int
    #: inherited partitions' parts of the file index, from the state they are inherited from
    inherited_index: dict[str, PartitionFileIndex]
    #: inherited partitions whose part of that index is built again
    stale_index: tuple[str, ...]
    #: what planning found: partitions that cannot be inherited (warnings, reasons), its timings
    warnings: tuple[str, ...] = ()
    reasons: dict[str, str] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def table(self) -> str:
        return self.source.name

    @property
    def run_layout(self) -> RunLayout:
        return RunLayout(self.job_id)

    @property
    def by_key(self) -> dict[str, Partition]:
        return {p.key: p for p in self.partitions}

    @property
    def append(self) -> Append | None:
        return self.mode if isinstance(self.mode, Append) else None

    @property
    def counted(self) -> list[str]:
        """The reduced columns that are not discrete: exact table-level distinct counts and
        percentiles from the reductions, no frequencies (ColumnProfile.counted)."""
        return [l.name for l in self.leaves if self.probes[l.name].counted]

    def identity(self, level: str, key: str) -> FileIdentity:
        return FileIdentity(self.table, self.source.uri, level, key, self.snapshot, self.job_id, self.created)

    def task(self, part: Partition) -> PartitionTask:
        return PartitionTask(part, self.store.partition_uri(self.table, self.job_id, part.key), self.identity("partition", part.key))

    def batches(self, parts: Sequence[Partition]) -> list[list[Partition]]:
        """``parts`` (in scheduling order) grouped into tasks: engine/runtime/batching.py."""
        return [[parts[i] for i in r] for r in batching.plan([p.size for p in parts], self.task_budget)]

    def table_options(self) -> dict[str, Any]:
        return table_options(self.options)

    def schema_text(self) -> str:
        return schema_text(self.leaves)


def table_options(o: AnalyzeOptions) -> dict[str, Any]:
    """What the table-level files depend on beyond the partitions' statistics and their options."""
    return {
        "bins": o.bins,
        "value_partitions": o.value_partitions,
        "file_index": o.file_index,
        "bloom_columns": None if o.bloom_columns is None else list(o.bloom_columns),
        "bloom_fpr": o.bloom_fpr,
    }


def schema_text(leaves: list[LeafColumn]) -> str:
    return base64.b64encode(pa.schema([(l.name, l.type) for l in leaves]).serialize().to_pybytes()).decode()


def cannot_inherit(failure: inheritance.LoadFailure, warnings: list[str], reasons: dict[str, str]) -> None:
    """A partition whose partial state is unusable: recomputed, with a warning naming the file."""
    message = f"partition {failure.key or '(unpartitioned)'}: cannot inherit its statistics, recomputing it: {failure.message}"
    log.warning("%s", message)
    warnings.append(message)
    reasons[failure.key] = f"partial state unusable: {failure.message}"


# ---------------------------------------------------------------- planning
def plan_job(
    source: TableSource,
    store: Store,
    leaves: list[LeafColumn],
    user: list[UserStatistic],
    options: AnalyzeOptions,
    job_id: str,
    executor: TaskRunner,
    allow_append: bool = True,
) -> JobPlan:
    """The source's snapshot and partitions; which partitions are inherited; the mode; the column groups."""
    snapshot, created, partitions = source.snapshot_id(), FileIdentity.now(), source.partitions()
    t0 = time.perf_counter()
    inherit = inheritance.plan(source, store.root, source.name, leaves, user, options.mostly_distinct_ratio, enabled=options.inherit)
    timings = {"plan_s": time.perf_counter() - t0}
    warnings: list[str] = []
    reasons = dict(inherit.reasons)
    probes = {l.name: ColumnProfile(l.name, l.type, user) for l in leaves}
    discrete = [l.name for l in leaves if probes[l.name].discrete]
    reduced = [l.name for l in leaves if probes[l.name].reduced]
    n_groups = min(len(reduced), 16)
    # strings and binary first: their reductions are the longest (a mostly distinct string
    # column is the job's critical path), and Ray starts ready tasks in submission order
    heavy_first = sorted(reduced, key=lambda n: not stringsort.supports(probes[n].type))
    plan = JobPlan(
        source, store, leaves, user, options, job_id, snapshot, created, partitions, inherit, Full(), probes, discrete,
        groups=[heavy_first[i::n_groups] for i in range(n_groups)] if n_groups else [],
        two_waves=options.two_waves and 0 < len(discrete) < len(leaves),
        hist_leaves=histogram_leaves(leaves, user),
        task_budget=batching.budget([p.size for p in partitions], options.task_bytes, executor.cpus()),
        inherited_index={}, stale_index=(), warnings=(), reasons=reasons, timings=timings,
    )  # fmt: skip
    carried = _carried_table(plan)
    if carried is not None:
        failed = _check_carried(plan, executor, timings)
        for f in failed:
            cannot_inherit(f, warnings, reasons)
        if not failed:
            return dataclasses.replace(plan, mode=CarryOver(carried), warnings=tuple(warnings))
        gone = {f.key for f in failed}
        inherit = dataclasses.replace(
            inherit, inherited={k: v for k, v in inherit.inherited.items() if k not in gone}, reasons=dict(reasons), table=None
        )
        plan = dataclasses.replace(plan, inheritance=inherit)
    index = _previous_file_index(plan)
    stale = _stale_index_parts(plan, index)
    mode = (_append_mode(plan) if allow_append else None) or Full()
    return dataclasses.replace(plan, mode=mode, inherited_index=index, stale_index=tuple(stale), warnings=tuple(warnings))


def same_table_level(plan: JobPlan, p: dict[str, Any]) -> bool:
    """Whether the catalog's table level (its decoded properties) was made for this job's columns,
    statistics, source and table-level options."""
    return (
        p.get(TABLE_OPTIONS_PROPERTY) == plan.table_options()
        and p.get("format_version") == layout.FORMAT_VERSION
        and p.get("table_uri") == plan.source.uri
        and p.get("columns") == inheritance.manifest_columns(plan.leaves)
        and p.get("schema") == plan.schema_text()
        and p.get("user_statistics") == [u.name for u in plan.user]
    )


def _carried_table(plan: JobPlan) -> inheritance.CarriedTable | None:
    """The current table level, when this job would merge the same one: every partition
    inherited and none gone (the plan), the same columns, statistics, source and
    table-level options. A re-analyze of an unchanged table then costs its plan and a
    commit, instead of loading every partial state and merging the table again."""
    carried = plan.inheritance.table
    if carried is None:
        return None
    indexed = FILE_INDEX_PROPERTY in carried.properties or not plan.partitions
    if plan.options.file_index and fileindex_sources.indexable(plan.source) and not indexed:
        return None  # written before this source's format got a file index: its partitions are indexed now
    return carried if same_table_level(plan, carried.properties) else None


def _check_carried(plan: JobPlan, executor: TaskRunner, timings: dict[str, float]) -> list[inheritance.LoadFailure]:
    """The partitions whose files do not check out (inheritance.check_partition, in tasks: they
    read every partial state). Each is recomputed, with the warning a failed load gives, and
    the table level is merged as usual."""
    inherited = plan.inheritance.inherited
    ordered = sorted(plan.partitions, key=lambda p: -p.size)
    budget = batching.budget([p.size for p in ordered], plan.options.task_bytes, executor.cpus())
    discrete = any(plan.probes[l.name].reduced for l in plan.leaves)
    batches = [tuple(ordered[i].key for i in r) for r in batching.plan([p.size for p in ordered], budget)]
    refs = [executor.submit(inheritance.check_batch, [inherited[k] for k in keys], discrete, owner=keys) for keys in batches]
    got = executor.wait_all(refs, "inherit", [len(keys) for keys in batches])
    timings["cpu_inherit_s"] = sum(cpu for _, cpu in got)
    return [f for failures, _ in got for f in failures if f is not None]


def _append_mode(plan: JobPlan) -> Append | None:
    """An append re-analyze when the catalog's table has every partition of this snapshot but
    some new ones, all inherited, with the same table-level options, and its table counts."""
    o, inherit = plan.options, plan.inheritance
    prev = inherit.previous
    if prev is None or not plan.discrete or o.value_partitions or o.frequencies is not FrequencyStrategy.REDUCE or not inherit.write_partial_state:
        return None
    counts = prev.properties.get(TABLE_COUNTS_PROPERTY)
    if not counts or not same_table_level(plan, prev.properties):
        return None
    if {c for f in counts.get("files", []) for c in f.get("columns", [])} != {c for g in plan.groups for c in g}:
        return None
    by_key = plan.by_key
    if set(inherit.inherited) != inherit.previous_keys or not inherit.previous_keys < set(by_key):
        return None  # a partition changed or went: reduced in full
    base, earlier = set(counts.get("base_partitions", [])), tuple(counts.get("appended", []))
    if base | set(earlier) != inherit.previous_keys:
        return None
    segments = list(prev.properties.get(FREQUENCY_SEGMENTS_PROPERTY) or [])
    if len(segments) + 2 > MAX_FREQUENCY_SEGMENTS:
        return None
    new = tuple(p.key for p in plan.partitions if p.key not in inherit.previous_keys)
    if sum(by_key[k].size for k in (*earlier, *new)) > sum(by_key[k].size for k in base):
        return None
    head = prev.files.frequencies
    segments.append({"path": head.path, "size": head.size, "checksum": head.checksum})
    return Append(counts, segments, head, new, earlier, _merged_state(plan, counts.get(TABLE_STATE_KEY)))


def _merged_state(plan: JobPlan, state: Any) -> dict[str, Any] | None:
    """The table's merged state when this append can merge the new partitions into it and get a
    full analyze's bits: it covers every inherited partition, and they come first in the table's
    order (the moments and user statistics are folded left in that order: the stored state is the
    fold's value after them). None (older stores; a partition appended before others): each
    inherited partition's state is loaded, as before."""
    if not isinstance(state, dict) or not {"path", "checksum", "partitions"} <= set(state):
        return None
    n = len(plan.inheritance.previous_keys)
    keys = [p.key for p in plan.partitions]
    if set(keys[:n]) != plan.inheritance.previous_keys or state["partitions"] != partitions_digest(keys[:n]):
        return None
    return state


def partitions_digest(keys: Sequence[str]) -> dict[str, Any]:
    """What the table's merged state records of the partitions it covers, in their order."""
    return {"count": len(keys), "sha256": hashlib.sha256("\n".join(keys).encode()).hexdigest()[:32]}


def _previous_file_index(plan: JobPlan) -> dict[str, PartitionFileIndex]:
    """Inherited partitions' parts of the file index, from the state they are inherited from."""
    if not plan.options.file_index or not plan.inheritance.inherited:
        return {}
    try:
        state = plan.store.state(plan.table)
        refs = state.properties.get(FILE_INDEX_PROPERTY) or {}
        if fileindex_store.FILES_FILE not in refs:
            return {}
        where = plan.store.layout(plan.table)
        directory = where.absolute(refs[fileindex_store.FILES_FILE]["path"]).rsplit("/", 1)[0]
        return {p.partition: p for p in fileindex_store.read_file_index(directory) if p.partition in plan.inheritance.inherited}
    except Exception as exc:  # noqa: BLE001 - the index is then built without them: their files stay candidates
        log.warning("the previous file index is unreadable (%s); inherited partitions' files are left out of it", exc)
        return {}


def _stale_index_parts(plan: JobPlan, index: dict[str, PartitionFileIndex]) -> list[str]:
    """Inherited partitions whose part of the earlier index cannot be carried over: missing
    from it, listed without any statistics (its build failed, or Hudi slices with log files:
    cheap to list again), or without Bloom filters this job's options ask for (other Bloom
    columns or rate; automatic ones chosen anew). Bloom filters it no longer asks for are dropped
    from the carried part (in ``index``). With the earlier job's Bloom options, every part carries over."""
    o = plan.options
    if not o.file_index or not fileindex_sources.indexable(plan.source):
        return []
    previous = plan.inheritance.previous.properties.get(TABLE_OPTIONS_PROPERTY) if plan.inheritance.previous is not None else None
    wanted = None if o.bloom_columns is None else list(o.bloom_columns)
    same = isinstance(previous, dict) and previous.get("bloom_columns") == wanted and previous.get("bloom_fpr") == o.bloom_fpr
    keys = {f.name for f in plan.source.partition_fields()}
    names = {l.name for l in plan.leaves if l.top not in keys}
    stale = []
    for key in plan.inheritance.inherited:
        part = index.get(key)
        unlisted = bool(part is not None and part.files and all(f.rows is None for f in part.files))
        if part is None or unlisted or (not same and wanted is None):
            stale.append(key)
        elif not same:
            asked = {c for c in wanted or () if c in names}
            have = set(part.bloom_columns)
            if asked - have or (asked and part.bloom_fpr != o.bloom_fpr):
                stale.append(key)
            elif have - asked:
                index[key] = without_blooms(part, asked)
    return stale
