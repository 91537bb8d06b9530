"""The analyze job: one Ray task per partition (or batch of small ones), a reduction to table level, one atomic publish.

:func:`analyze_source` is the one entry the API, the CLI, Spark and the Flight
``analyze`` action start a job through. The job is an :class:`AnalyzeJob` whose
stages are methods, run in this order (the driver never holds table data, only
small partial states)::

    plan        which partitions are unchanged since the catalog's state
                (engine/runtime/inheritance.py): when all are, none is gone and the
                table-level options are the same, the table level is carried over
                (its files named again, nothing merged or written) and the job goes
                straight to publish; the column groups of the reductions;
                the byte budget of a task (engine/runtime/batching.py): consecutive small
                partitions (largest first) share a task, and every "x P" below is a task
                per batch, which returns one object per kind for its partitions (a list)
    profile     phase 1, wave 1 x P: profile_partition(discrete_only): the discrete
                columns; the partition's frequencies.parquet; their exact value counts
                into the object store; footer ranges of the histogrammed columns
                (one profile_partition per partition when either side has no column);
                load_partition x I: unchanged partitions from their partial state
    reduce      reduce_counts x G: exact table frequencies, distinct counts and
                percentiles of discrete columns, submitted before wave 2 so they run
                during it; the table's frequencies.parquet written when they end
    profile     phase 1, wave 2 x P (after a barrier): profile_rest, the other columns
                and the partial state; with histogram edges guessed from the footers
                (guess_specs), also the partition's phase 2
    merge       partial states -> table ranges -> bin specs; a guess is kept only if
                it equals them, bit for bit
    bin         phase 2: bin_partition x P without a right guess; rebin_partition for
                inherited partitions whose table edges moved; the Redis strategy's
                consolidation (engine/frequencies) runs here, while they bin
    write       the table's statistics.parquet and histograms.parquet; the per-file column
                index (engine/fileindex) from the partitions' parts (profiled or inherited)
    publish     the typed job output (engine/catalog/job_output.py), one catalog
                transaction (atomic)

Task bodies and the typed values they return are in engine/runtime/tasks.py.
"""

from __future__ import annotations

import base64
import collections
import contextlib
import dataclasses
import gc
import logging
import re
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import ray

from engine import config, fileio, redis_server
from engine.catalog import FileRef, JobOutput, JobPartition, RunLayout, StatisticsFiles, schema_fingerprint
from engine.catalog.model import FILE_INDEX_PROPERTY, FILE_NAMES, FREQUENCY_SEGMENTS_PROPERTY, KINDS, TABLE_COUNTS_PROPERTY
from engine.catalog.paths import files_run, new_job_id
from engine.columns import LeafColumn, leaf_columns, select
from engine.exceptions import AccessDeniedError, AnalyzeError, InvalidArgumentError, MetastoreError, NodeLostError
from engine.fileindex import sources as fileindex_sources
from engine.fileindex import store as fileindex_store
from engine.fileindex.build import PartitionFileIndex, without_blooms
from engine.files import layout, partial_state, writer
from engine.files.layout import FileIdentity
from engine.files.writer import (
    MIN_DUPLICATES_ONLY,  # noqa: F401 - re-exported (tests read it here)
    WrittenFile,
)
from engine.names import check_table_name
from engine.options import AnalyzeOptions, FrequencyStrategy
from engine.progress import ProgressCallback
from engine.runtime import abort, batching, frequency_strategy, inheritance
from engine.runtime.ray_runtime import ensure_ray, environment_for_tasks
from engine.runtime.tasks import (  # noqa: F401 - re-exported: tests and benchmarks call the task bodies here
    AppendInputs,
    Binned,
    JobContext,
    PartitionSummary,
    PartitionTask,
    PhaseTwoInputs,
    Rebin,
    SummaryBatch,
    TableCountsOut,
    TaskResult,
    append_table,
    bin_batch,
    bin_inputs_of_counts,
    bin_partition,
    guess_specs,
    guess_specs_batches,
    histogram_leaves,
    index_batch,
    partial_state_files,
    profile_batch,
    profile_partition,
    profile_rest,
    profile_rest_batch,
    rebin_batch,
    rebin_partition,
    reduce_batches,
    reduce_counts,
    same_specs,
    table_spec,
    unbatch,
    write_segment,
    write_table_counts,
    write_table_frequencies,
)
from engine.sources.base import Partition, TableSource
from engine.stats import columnwise, stringsort
from engine.stats.columnwise import StateColumns
from engine.stats.histograms import HistogramSpec
from engine.stats.profile import ColumnProfile, ColumnState
from engine.stats.user import UserStatistic, default_statistics
from engine.stats.userdefs import PROPERTY as USER_DEFINITIONS_PROPERTY
from engine.stats.userdefs import reference_of
from engine.store import Store

log = logging.getLogger("engine.analyze")


@dataclass
class AnalyzeResult:
    table: str
    job_id: str
    store: str
    snapshot: str
    partitions: int
    rows: int
    columns: int
    elapsed_s: float
    run_uri: str = ""  # where this job's files are
    timings: dict[str, float] = field(default_factory=dict)
    #: per column consolidated by the "redis" frequency strategy: scenario, positives, fields sent, attempts
    frequencies: dict[str, Any] = field(default_factory=dict)
    inherited: int = 0  # partitions whose statistics carried over from an earlier job (not profiled)
    recomputed: int = 0  # partitions profiled by this job
    rebinned: int = 0  # inherited partitions whose histograms were re-binned on new table edges
    recompute_reasons: dict[str, str] = field(default_factory=dict)  # partition key -> why it was profiled
    warnings: list[str] = field(default_factory=list)  # e.g. a damaged partial state (the partition was recomputed)
    #: the histograms were binned in phase 1 on edges guessed from metadata, which proved right
    histograms_guessed: bool = False
    #: Ray node id -> phase-1 tasks of this job that ran there (how far the job spread)
    nodes: dict[str, int] = field(default_factory=dict)
    #: the job whose table-level files this job carried over, nothing having changed ("": merged anew)
    carried_over: str = ""
    #: segments of the table's frequencies now: 1 after a full reduction, more after appends
    #: (only the appended values were reduced: docs/FORMAT.md, "Table frequencies in segments")
    frequency_segments: int = 1


# ---------------------------------------------------------------- the one entry
def analyze_source(
    source: TableSource,
    store: str | Store,
    options: AnalyzeOptions | None = None,
    *,
    columns: Sequence[str] | None = None,
    user_statistics: Sequence[UserStatistic] | None = None,
    progress: ProgressCallback | None = None,
) -> AnalyzeResult:
    """Compute and publish the statistics of ``source``: the job every entry point runs.

    ``columns``: top-level columns or dotted struct leaves (None: all).
    ``user_statistics``: None takes the defaults (engine.stats.user.default_statistics:
    the shipped examples and any registered statistic), the same whichever entry
    point started the job, so a table analyzed by one and re-analyzed by another
    keeps its columns and inherits its unchanged partitions.
    Starts (or attaches to, via RAY_ADDRESS) Ray if this process has not.
    """
    options = options or AnalyzeOptions()
    check_table_name(source.name)  # the store's directory of the table: nothing is written under a bad name
    if options.bloom_columns:
        known = {l.name for l in leaf_columns(source.schema())}
        unknown = [c for c in options.bloom_columns if c not in known]
        if unknown:
            raise InvalidArgumentError(f"--bloom-columns: table {source.name!r} has no column(s) {', '.join(map(repr, unknown))}")
    if options.frequencies is FrequencyStrategy.REDIS:
        # --redis (redis_url) wins; else REDIS_URL; else the coordinator starts its own server
        named = "--redis"
        if options.redis_url is None and config.get(config.REDIS_URL):
            options, named = dataclasses.replace(options, redis_url=config.get(config.REDIS_URL)), config.REDIS_URL.name
        if options.redis_url is not None:
            # an unusable server fails the job here, in one line, before any task starts
            redis_server.check_reachable(options.redis_url, named)
    leaves = select(leaf_columns(source.schema()), list(columns) if columns is not None else None)
    user = default_statistics() if user_statistics is None else list(user_statistics)
    ray_s = ensure_ray()
    store = store if isinstance(store, Store) else Store(store)
    try:
        result = AnalyzeJob(source, store, leaves, user, options, progress).run()
    except Exception as exc:
        # the store's catalog read or commit refused (or unsigned): one line naming the store
        problem = fileio.access_problem(store.root) if fileio.is_io_error(exc) else None
        if problem is None:
            raise
        raise AccessDeniedError(f"store {store.root}: {problem}") from None
    result.timings["ray_start_s"] = ray_s
    return result


def run(
    source: TableSource,
    store: Store,
    leaves: list[LeafColumn],
    user: list[UserStatistic],
    options: AnalyzeOptions,
    progress: ProgressCallback | None = None,
) -> AnalyzeResult:
    """The job on already selected columns and statistics (Ray must be up)."""
    return AnalyzeJob(source, store, leaves, user, options, progress).run()


# ---------------------------------------------------------------- remote tasks
# each takes a batch of partitions (engine/runtime/batching.py; a large partition is a batch of one)
_profile_task = ray.remote(profile_batch)
_rest_task = ray.remote(profile_rest_batch)
_guess_task = ray.remote(guess_specs_batches)
_bin_task = ray.remote(bin_batch)
_rebin_task = ray.remote(rebin_batch)
_load_task = ray.remote(inheritance.load_batch)
_check_task = ray.remote(inheritance.check_batch)
_reduce_task = ray.remote(reduce_batches)
_counts_task = ray.remote(write_table_counts)
_write_freq_task = ray.remote(write_table_frequencies)
_append_task = ray.remote(append_table)
_segment_task = ray.remote(write_segment)
_unbatch_task = ray.remote(unbatch)
_index_task = ray.remote(index_batch)

#: table property: the options the table-level files depend on beyond the partitions' own
#: (inheritance.CONFIG_PROPERTY); a job carries the table level over only when they are equal
TABLE_OPTIONS_PROPERTY = "table_options"
#: table property: the job that wrote the table-level files (a carried-over state names them again)
TABLE_FILES_JOB_PROPERTY = "table_files_job"

#: table property: the table's exact value counts at its last full reduction, for append re-analyzes:
#: ``{"files": [{"path", "size", "checksum", "columns"}], "base_partitions": [...], "appended": [...],
#: "columns": {name: {"distinct": n}}}`` (engine/stats/appendcounts.py)
#: at most this many segments of the table's frequencies (a base and its deltas): an append beyond
#: them, or one whose partitions since the base outweigh the base (bytes), reduces the table in full
MAX_FREQUENCY_SEGMENTS = 8

#: how many of the oldest pending refs the driver waits on at a time (AnalyzeJob._wait_all)
_WAIT_WINDOW = 32

#: what Ray raises when a task's worker or node died and its retries are spent, or an
#: object it made was lost with its node and could not be made again
_LOST = (
    ray.exceptions.WorkerCrashedError,
    ray.exceptions.NodeDiedError,
    ray.exceptions.LocalRayletDiedError,
    ray.exceptions.ObjectLostError,
)


def _task_options(**options: Any) -> dict[str, Any]:
    env = environment_for_tasks(config.FORWARDED_PREFIXES)
    if env:
        options["runtime_env"] = {"env_vars": env}
    return options


@dataclass(frozen=True)
class AppendPlan:
    """A re-analyze that only appends partitions to the catalog's table: the table's discrete
    columns are reduced from its counts at the base plus the appended ones (engine/stats/appendcounts.py)
    and its frequencies get a delta segment instead of a new file."""

    counts: dict[str, Any]  # the table_counts property
    segments: list[dict[str, Any]]  # the older segments after this job: the current ones, base first
    head: FileRef  # the current newest segment (its head row groups)
    new: tuple[str, ...]  # partitions appended now
    earlier: tuple[str, ...]  # partitions appended since the base


class AppendFallback(Exception):
    """An append re-analyze found it cannot append (an inherited partition must be recomputed:
    its value counts are needed after all; the table's counts are missing or damaged): the job is
    run again with a full reduction (``warn``: say so in the result's warnings)."""

    def __init__(self, why: str, cpu_s: float = 0.0, warn: bool = False) -> None:
        super().__init__(why)
        self.cpu_s, self.warn = cpu_s, warn


@dataclass(frozen=True)
class BatchRefs:
    """The Ray objects of one task's partitions (a batch: engine/runtime/batching.py), by
    name: each object is a list with one item per partition of ``keys``, in that order."""

    keys: tuple[str, ...]
    #: the PartitionTask of each, passed by value to the profile, second-wave and bin tasks (a few KB
    #: a batch, inlined in the task's spec: a ray.put cost the driver ~1.6 ms of CPU an object)
    tasks: list[PartitionTask] | None
    summaries: Any  # PartitionSummary each, or the LoadedPartition / LoadFailure of an inherited one
    groups: tuple[Any, ...]  # per column group: {column: value counts} each (what each reduction fetches)
    phase_two: Any = None  # PhaseTwoInputs each: phase 2's statistics rows and binning inputs (profiled only)
    loaded: bool = False  # the batch's partitions are inherited (loaded, not profiled)
    first: Any = None  # with two waves: the first wave's (partial) summaries
    guessed: Any = None  # with edges guessed from metadata: the second wave's Binned each

    @staticmethod
    def of_profile(keys: tuple[str, ...], tasks: list[PartitionTask], refs: Sequence[Any], n_groups: int) -> BatchRefs:
        """profile_batch's returns: the summaries, one object per group, phase 2's inputs."""
        return BatchRefs(keys, tasks, refs[0], tuple(refs[1 : 1 + n_groups]), refs[1 + n_groups])

    @staticmethod
    def of_load(keys: tuple[str, ...], refs: Any, n_groups: int) -> BatchRefs:
        """load_batch's returns (one object when there are no groups)."""
        refs = list(refs) if n_groups else [refs]
        return BatchRefs(keys, None, refs[0], tuple(refs[1 : 1 + n_groups]), loaded=True)


# ---------------------------------------------------------------- the job
class AnalyzeJob:
    """One analyze of one source into one store; :meth:`run` calls the stages in order.

    State that flows between stages is kept on the object (named fields), never in
    positional lists of Ray refs; a failure anywhere stops every task of the job
    (engine/runtime/abort.py) and removes its run directory: nothing is published.
    """

    def __init__(
        self,
        source: TableSource,
        store: Store,
        leaves: list[LeafColumn],
        user: list[UserStatistic],
        options: AnalyzeOptions,
        progress: ProgressCallback | None = None,
        allow_append: bool = True,
    ) -> None:
        self.source, self.store, self.leaves, self.user = source, store, leaves, user
        self.options, self.progress = options, progress
        self.allow_append = allow_append
        self.append: AppendPlan | None = None
        self.table = source.name
        self.job_id = new_job_id()
        self.run_layout = RunLayout(self.job_id)
        self.timings: dict[str, float] = {}
        self.launched: list[Any] = []  # every task ref, to stop on failure
        #: (a task's refs, the partitions it works for): a failure names them (looked up only then)
        self.owners: list[tuple[list[Any], tuple[str, ...]]] = []
        #: the remote functions with this job's task options, by (function, number of returns)
        self._remotes: dict[tuple[Any, int], Any] = {}
        self.frequencies_report: dict[str, Any] = {}

    # ------------------------------------------------------------ helpers
    def _identity(self, level: str, key: str) -> FileIdentity:
        return FileIdentity(self.table, self.source.uri, level, key, self.snapshot, self.job_id, self.created)

    def _task(self, part: Partition) -> PartitionTask:
        return PartitionTask(part, self.store.partition_uri(self.table, self.job_id, part.key), self._identity("partition", part.key))

    def _tasks(self, keys: Sequence[str]) -> list[PartitionTask]:
        return [self._task(self.by_key[k]) for k in keys]

    def _submit(self, remote: Any, *args: Any, num_returns: int = 1, owner: Sequence[str] | None = None, **kwargs: Any) -> Any:
        # the options (and the environment they forward) are the same for every task of the
        # job: built once per function, not per task (Ray validates them at each .options())
        function = self._remotes.get((remote, num_returns))
        if function is None:
            function = remote.options(**_task_options(num_returns=num_returns, max_retries=self.options.task_retries))
            self._remotes[(remote, num_returns)] = function
        refs = function.remote(*args, **kwargs)
        listed = refs if num_returns > 1 else [refs]
        self.launched.extend(listed)
        if owner is not None:  # the partitions the task works for
            self.owners.append((listed, tuple(owner)))
        return refs

    def _lost(self, exc: BaseException, ref: Any = None) -> NodeLostError:
        """One line for a task lost with its worker or node: which partition (and how many
        others shared its task), which node."""
        hexes = [h for h in (ref.hex() if ref is not None else None, getattr(exc, "object_ref_hex", None)) if h]
        owners = {r.hex(): keys for refs, keys in self.owners for r in refs}
        keys = next((owners[h] for h in hexes if h in owners), None)
        what = batching.describe(keys) if keys is not None else "a table-level task"
        # Ray's error names the node it lost (NodeDiedError, a lost object's locations) ...
        named = set(re.findall(r"[0-9a-f]{56}", str(exc)))
        gone = [f"{node} ({ip})" for node, ip in self.nodes_at_start.items() if node in named]
        # ... else the node that left: Ray's control store marks it dead within seconds
        # (on one node there is no other to leave: a worker died, not its node)
        deadline = time.monotonic() + (10.0 if len(self.nodes_at_start) > 1 else 0.0)
        while not gone and time.monotonic() < deadline:
            alive = {n["NodeID"] for n in ray.nodes() if n.get("Alive")}
            gone = [f"{node} ({ip})" for node, ip in self.nodes_at_start.items() if node not in alive]
            if not gone:
                time.sleep(0.5)
        where = f"with Ray node {', '.join(gone)}, which left the cluster" if gone else f"with its worker ({type(exc).__name__})"
        return NodeLostError(
            f"analyze of {self.source.uri} failed: {what}: its task was lost {where}, after {self.options.task_retries} retries; "
            "nothing was published"
        )

    def _wait_all(self, refs: list[Any], phase: str, weights: Sequence[int] | None = None, fetch: Sequence[bool] | None = None) -> list[Any]:
        """ray.get with progress; a failing task fails the job with its own message.

        The driver's cost here must grow linearly with the tasks: ``ray.wait`` costs time
        in the length of the list it is given (~0.2 us a pending ref), so it is given a
        window of the ``_WAIT_WINDOW`` oldest pending refs (Ray starts tasks in submission
        order: the oldest end first); every ref of the window that is ready is taken at
        once and fetched (deserialized) once, with one ``ray.get`` for all of them.
        ``weights``: the partitions each ref stands for (a batch's), which the progress
        counts (default one each), so the bar means the same whatever the batches.
        ``fetch``: False for a ref only waited for (its place in the result is None; its
        failure shows in the refs that depend on it).
        """
        queue, taken = list(refs), 0
        window: list[Any] = []
        results: dict[Any, Any] = {}
        weight = dict(zip(refs, weights, strict=True)) if weights is not None else {}
        skip = {r for r, f in zip(refs, fetch, strict=True) if not f} if fetch is not None else set()
        total, done = sum(weight.values()) if weights is not None else len(refs), 0
        if self.progress:
            self.progress(phase, 0, total)
        while window or taken < len(queue):
            room = _WAIT_WINDOW - len(window)
            if room > 0 and taken < len(queue):
                window.extend(queue[taken : taken + room])
                taken = min(len(queue), taken + room)
            ready, window = ray.wait(window, num_returns=1, timeout=None)
            if window:
                more, window = ray.wait(window, num_returns=len(window), timeout=0)
                ready = ready + more
            try:
                wanted = [r for r in ready if r not in skip] if skip else ready
                results.update(zip(wanted, ray.get(wanted)))  # raises early on failure
                done += sum(weight.get(r, 1) for r in ready)
            except _LOST:
                for r in ready:  # which task was lost: its partition is named
                    try:
                        ray.get(r)
                    except _LOST as exc:
                        raise self._lost(exc, r) from exc
                raise
            if self.progress:
                self.progress(phase, done, total)
        return [results.get(r) for r in refs]

    # ------------------------------------------------------------ run
    def run(self) -> AnalyzeResult:
        with _old_objects_frozen():
            try:
                return self._run()
            except AppendFallback as exc:
                (log.warning if exc.warn else log.info)("analyze of %s: %s; reducing the table in full", self.source.uri, exc)
                spent, warning = exc.cpu_s, (f"{exc}; the table was reduced in full" if exc.warn else "")
        again = AnalyzeJob(self.source, self.store, self.leaves, self.user, self.options, self.progress, allow_append=False)
        result = again.run()
        result.timings["cpu_append_attempt_s"] = spent
        result.timings["cpu_s"] = result.timings.get("cpu_s", 0.0) + spent
        if warning:
            result.warnings.append(warning)
        return result

    def _run(self) -> AnalyzeResult:
        started = time.perf_counter()
        try:
            # the job's lease on its run: gc and expire keep its files until it commits or fails (#33)
            self.store.begin(self.table, self.job_id)
            self.plan()
            if self.carried is not None:
                return self.carry_over(started)
            t0 = time.perf_counter()
            self.profile_first()
            self.reduce()
            self.profile_second_waves()
            self.collect_profiles()
            self.timings["phase1_s"] = time.perf_counter() - t0
            self.merge()
            self.bin()
            self.collect_reductions()
            t0 = time.perf_counter()
            self.write()
            self.publish()
            self.timings["table_files_s"] = time.perf_counter() - t0
        except BaseException as exc:
            # stop every task of this job before deleting its run directory, or a
            # task still running would write files into it after the delete
            abort.stop_tasks(self.job_id, self.launched)
            self.store.abort(self.table, self.job_id)
            if isinstance(exc, _LOST):
                raise self._lost(exc) from exc
            if isinstance(exc, ray.exceptions.RayTaskError):
                inner = _unwrap(exc)
                if isinstance(inner, MetastoreError):
                    raise type(inner)(str(inner)) from None
                raise AnalyzeError(f"analyze of {self.source.uri} failed: {type(inner).__name__}: {inner}") from exc
            raise
        return self.result(time.perf_counter() - started)

    # ------------------------------------------------------------ plan
    def plan(self) -> None:
        """The source's snapshot and partitions; which partitions are inherited; the column groups."""
        source, leaves, user, options = self.source, self.leaves, self.user, self.options
        self.nodes_at_start = {n["NodeID"]: n.get("NodeManagerAddress", "") for n in ray.nodes() if n.get("Alive")}
        self.snapshot = source.snapshot_id()
        self.created = FileIdentity.now()
        self.partitions = source.partitions()
        self.by_key = {p.key: p for p in self.partitions}
        t0 = time.perf_counter()
        self.inheritance = inheritance.plan(source, self.store.root, self.table, leaves, user, options.mostly_distinct_ratio, enabled=options.inherit)
        self.timings["plan_s"] = time.perf_counter() - t0
        self.counters = inheritance.Counters(reasons=dict(self.inheritance.reasons))
        self.carried = self._carried_table()
        if self.carried is not None and self._check_carried():
            return
        self.carried = None
        # a cheap, explicit reference for every task instead of re-pickling per call
        self.leaves_ref = ray.put(leaves)
        self.user_ref = ray.put(user)
        self.context_ref = ray.put(JobContext(source, leaves, user, options, self.job_id))
        self.probes = {l.name: ColumnProfile(l.name, l.type, user) for l in leaves}
        self.discrete = [l.name for l in leaves if self.probes[l.name].discrete]
        n_groups = min(len(self.discrete), 16)
        # strings and binary first: their reductions are the longest (a mostly distinct string
        # column is the job's critical path), and Ray starts ready tasks in submission order
        heavy_first = sorted(self.discrete, key=lambda n: not stringsort.supports(self.probes[n].type))
        self.groups = [heavy_first[i::n_groups] for i in range(n_groups)] if n_groups else []
        # two waves when there is something on each side: the reductions wait only for the first
        self.two_waves = options.two_waves and 0 < len(self.discrete) < len(leaves)
        self.hist_leaves = histogram_leaves(leaves, user)
        # small partitions share a task up to this many bytes (engine/runtime/batching.py)
        cpus = int(ray.cluster_resources().get("CPU", 1) or 1)
        self.task_budget = batching.budget([p.size for p in self.partitions], options.task_bytes, cpus)
        self.batches: list[BatchRefs] = []  # every phase-1 task's objects (profiled or loaded), as submitted
        self.where: dict[str, tuple[int, int]] = {}  # key -> (its batch in self.batches, its position there)
        self.guess_ref: Any = None  # the histogram specs guessed from metadata (guess_specs)
        self.loaded: dict[str, inheritance.LoadedPartition] = {}
        self.reduce_refs: list[tuple[Any, Any]] = []  # per column group: (TaskResult of exact statistics, frequency rows)
        self.freq_ref: Any = None  # the table frequencies file's writer (its size)
        self.inherited_index = self._previous_file_index()
        self.stale_index = self._stale_index_parts()
        self.index_refs: list[tuple[tuple[str, ...], Any]] = []  # (partitions, their parts built again)
        self.append = self._append_plan() if self.allow_append else None
        self.append_refs: tuple[Any, Any] | None = None  # (TaskResult of AppendedTable or why not, the segment writer's)
        self.counts_files: list[dict[str, Any]] = []  # the table counts files this job's reductions wrote
        self.counts_refs: list[Any] = []  # their writers' results

    def _append_plan(self) -> AppendPlan | None:
        """An append re-analyze when the catalog's table has every partition of this snapshot but
        some new ones, all inherited, with the same table-level options, and its table counts."""
        o, plan = self.options, self.inheritance
        prev = plan.previous
        if prev is None or not self.discrete or o.value_partitions or o.frequencies is not FrequencyStrategy.REDUCE or not plan.write_partial_state:
            return None
        counts = prev.properties.get(TABLE_COUNTS_PROPERTY)
        if not counts or not self._same_table_level(prev.properties):
            return None
        if {c for f in counts.get("files", []) for c in f.get("columns", [])} != set(self.discrete):
            return None
        keys = set(self.by_key)
        if set(plan.inherited) != plan.previous_keys or not plan.previous_keys < keys:
            return None  # a partition changed or went: reduced in full
        base, earlier = set(counts.get("base_partitions", [])), tuple(counts.get("appended", []))
        if base | set(earlier) != plan.previous_keys:
            return None
        segments = list(prev.properties.get(FREQUENCY_SEGMENTS_PROPERTY) or [])
        if len(segments) + 2 > MAX_FREQUENCY_SEGMENTS:
            return None
        new = tuple(p.key for p in self.partitions if p.key not in plan.previous_keys)
        if sum(self.by_key[k].size for k in (*earlier, *new)) > sum(self.by_key[k].size for k in base):
            return None
        head = prev.files.frequencies
        return AppendPlan(counts, [*segments, {"path": head.path, "size": head.size, "checksum": head.checksum}], head, new, earlier)

    def _previous_file_index(self) -> dict[str, PartitionFileIndex]:
        """Inherited partitions' parts of the file index, from the state they are inherited from."""
        if not self.options.file_index or not self.inheritance.inherited:
            return {}
        try:
            state = self.store.state(self.table)
            refs = state.properties.get(FILE_INDEX_PROPERTY) or {}
            if fileindex_store.FILES_FILE not in refs:
                return {}
            where = self.store.layout(self.table)
            directory = where.absolute(refs[fileindex_store.FILES_FILE]["path"]).rsplit("/", 1)[0]
            return {p.partition: p for p in fileindex_store.read_file_index(directory) if p.partition in self.inheritance.inherited}
        except Exception as exc:  # noqa: BLE001 - the index is then built without them: their files stay candidates
            log.warning("the previous file index is unreadable (%s); inherited partitions' files are left out of it", exc)
            return {}

    def _stale_index_parts(self) -> list[str]:
        """Inherited partitions whose part of the earlier index cannot be carried over: missing
        from it, listed without any statistics (its build failed, or Hudi slices with log files:
        cheap to list again), or without Bloom filters this job's options ask for (other Bloom
        columns or rate; automatic ones chosen anew). Bloom filters it no longer asks for are dropped
        from the carried part. With the earlier job's Bloom options, every part carries over."""
        o = self.options
        if not o.file_index or not fileindex_sources.indexable(self.source):
            return []
        previous = self.inheritance.previous.properties.get(TABLE_OPTIONS_PROPERTY) if self.inheritance.previous is not None else None
        wanted = None if o.bloom_columns is None else list(o.bloom_columns)
        same = isinstance(previous, dict) and previous.get("bloom_columns") == wanted and previous.get("bloom_fpr") == o.bloom_fpr
        keys = {f.name for f in self.source.partition_fields()}
        names = {l.name for l in self.leaves if l.top not in keys}
        stale = []
        for key in self.inheritance.inherited:
            part = self.inherited_index.get(key)
            unlisted = bool(part is not None and part.files and all(f.rows is None for f in part.files))
            if part is None or unlisted or (not same and wanted is None):
                stale.append(key)
            elif not same:
                asked = {c for c in wanted or () if c in names}
                have = set(part.bloom_columns)
                if asked - have or (asked and part.bloom_fpr != o.bloom_fpr):
                    stale.append(key)
                elif have - asked:
                    self.inherited_index[key] = without_blooms(part, asked)
        return stale

    def _table_options(self) -> dict[str, Any]:
        """What the table-level files depend on beyond the partitions' statistics and their options."""
        o = self.options
        return {
            "bins": o.bins,
            "value_partitions": o.value_partitions,
            "file_index": o.file_index,
            "bloom_columns": None if o.bloom_columns is None else list(o.bloom_columns),
            "bloom_fpr": o.bloom_fpr,
        }

    def _schema_text(self) -> str:
        return base64.b64encode(pa.schema([(l.name, l.type) for l in self.leaves]).serialize().to_pybytes()).decode()

    def _carried_table(self) -> inheritance.CarriedTable | None:
        """The current table level, when this job would merge the same one: every partition
        inherited and none gone (the plan), the same columns, statistics, source and
        table-level options. A re-analyze of an unchanged table then costs its plan and a
        commit, instead of loading every partial state and merging the table again."""
        carried = self.inheritance.table
        if carried is None:
            return None
        indexed = FILE_INDEX_PROPERTY in carried.properties or not self.partitions
        if self.options.file_index and fileindex_sources.indexable(self.source) and not indexed:
            return None  # written before this source's format got a file index: its partitions are indexed now
        return carried if self._same_table_level(carried.properties) else None

    def _same_table_level(self, p: dict[str, Any]) -> bool:
        """Whether the catalog's table level (its decoded properties) was made for this job's columns,
        statistics, source and table-level options."""
        return (
            p.get(TABLE_OPTIONS_PROPERTY) == self._table_options()
            and p.get("format_version") == layout.FORMAT_VERSION
            and p.get("table_uri") == self.source.uri
            and p.get("columns") == inheritance.manifest_columns(self.leaves)
            and p.get("schema") == self._schema_text()
            and p.get("user_statistics") == [u.name for u in self.user]
        )

    def _check_carried(self) -> bool:
        """Whether every partition's files check out (inheritance.check_partition, in tasks: they
        read every partial state). A partition that does not is recomputed, with the warning a
        failed load gives, and the table level is merged as usual."""
        plan = self.inheritance
        cpus = int(ray.cluster_resources().get("CPU", 1) or 1)
        ordered = sorted(self.partitions, key=lambda p: -p.size)
        budget = batching.budget([p.size for p in ordered], self.options.task_bytes, cpus)
        discrete = any(ColumnProfile(l.name, l.type, self.user).discrete for l in self.leaves)
        batches = [tuple(ordered[i].key for i in r) for r in batching.plan([p.size for p in ordered], budget)]
        refs = [self._submit(_check_task, [plan.inherited[k] for k in keys], discrete, owner=keys) for keys in batches]
        got = self._wait_all(refs, "inherit", [len(keys) for keys in batches])
        self.timings["cpu_inherit_s"] = sum(cpu for _, cpu in got)
        failed = [f for failures, _ in got for f in failures if f is not None]
        for f in failed:
            self._cannot_inherit(f)
        if failed:
            gone = {f.key for f in failed}
            self.inheritance = dataclasses.replace(
                plan,
                inherited={k: v for k, v in plan.inherited.items() if k not in gone},
                reasons={**plan.reasons, **self.counters.reasons},
                table=None,
            )
        return not failed

    def _cannot_inherit(self, failure: inheritance.LoadFailure) -> None:
        """A partition whose partial state is unusable: recomputed, with a warning naming the file."""
        message = f"partition {failure.key or '(unpartitioned)'}: cannot inherit its statistics, recomputing it: {failure.message}"
        log.warning("%s", message)
        self.counters.warnings.append(message)
        self.counters.reasons[failure.key] = f"partial state unusable: {failure.message}"

    def carry_over(self, started: float) -> AnalyzeResult:
        """Publish the unchanged table: every partition inherited, the table files named again."""
        carried = self.carried
        assert carried is not None
        self.computed, self.loaded, self.guessed_ok = {}, {}, False
        self.counters.inherited = len(self.partitions)
        self.total_rows = carried.row_count
        cpu = self.timings.get("cpu_inherit_s", 0.0)  # the checks'
        self.timings.update(cpu_s=cpu, cpu_profile_s=0.0, cpu_inherit_s=cpu, cpu_histograms_s=0.0, cpu_reduce_s=0.0)
        self.publish()
        return self.result(time.perf_counter() - started)

    def _carried_output(self, carried: inheritance.CarriedTable) -> JobOutput:
        plan = self.inheritance
        partitions = []
        for part in self.partitions:
            inh = plan.inherited[part.key]
            refs = {name: FileRef(f["path"], int(f["size"]), f.get("checksum", "")) for name, f in inh.files.items()}
            files = self._files(lambda name: name, {}, refs)
            partitions.append(
                JobPartition(
                    part.key, inh.rows, files, plan.fingerprints.get(part.key, ""), inherited=True, job_id=inh.job_id, snapshot_id=inh.snapshot
                )
            )
        properties = dict(carried.properties)
        properties[TABLE_FILES_JOB_PROPERTY] = carried.properties.get(TABLE_FILES_JOB_PROPERTY) or carried.job_id
        properties["created_at"] = self.created  # the state's (its files keep their own, in their metadata)
        return self._job_output(partitions, carried.files, properties, carried.row_count)

    def _job_output(
        self, partitions: Sequence[JobPartition], table_files: StatisticsFiles, properties: dict[str, Any], row_count: int | None = None
    ) -> JobOutput:
        return JobOutput(
            table=self.table,
            job_id=self.job_id,
            snapshot_id=self.snapshot,
            schema_fingerprint=schema_fingerprint(properties["columns"]),
            partitions=tuple(partitions),
            table_files=table_files,
            properties=properties,
            row_count=row_count,
        )

    # ------------------------------------------------------------ profile
    def _batches(self, parts: Sequence[Partition]) -> list[list[Partition]]:
        """``parts`` (in scheduling order) grouped into tasks: engine/runtime/batching.py."""
        return [[parts[i] for i in r] for r in batching.plan([p.size for p in parts], self.task_budget)]

    def _add(self, batch: BatchRefs, keys: Sequence[str] | None = None) -> None:
        """Register a batch's objects; ``keys``: the partitions it stands for (default all)."""
        self.batches.append(batch)
        at = len(self.batches) - 1
        for i, k in enumerate(batch.keys):
            if keys is None or k in keys:
                self.where[k] = (at, i)

    def _profile(self, parts: Sequence[Partition]) -> None:
        keys = tuple(p.key for p in parts)
        tasks = self._tasks(keys)
        refs = self._submit(_profile_task, self.context_ref, tasks, self.groups, self.two_waves, num_returns=2 + len(self.groups), owner=keys)
        self._add(BatchRefs.of_profile(keys, tasks, refs, len(self.groups)))

    def profile_first(self) -> None:
        """Profile changed partitions (the first wave), load the partial states of unchanged ones."""
        plan, n = self.inheritance, len(self.groups)
        # largest first: the last of the profile tasks are then the small ones, so the
        # cores finish phase 1 together (longest-processing-time-first scheduling)
        ordered = sorted(self.partitions, key=lambda p: -p.size)
        for batch in self._batches([p for p in ordered if p.key not in plan.inherited]):
            self._profile(batch)
        loads: list[BatchRefs] = []
        for batch in self._batches([p for p in ordered if p.key in plan.inherited]):
            keys = tuple(p.key for p in batch)
            refs = self._submit(
                _load_task, [plan.inherited[k] for k in keys], self.leaves_ref, self.user_ref, plan.config, self.groups, self.append is None,
                num_returns=1 + n, owner=keys,
            )  # fmt: skip
            loads.append(BatchRefs.of_load(keys, refs, n))
        self._submit_index([p for p in ordered if p.key in self.stale_index])
        got = self._wait_all([b.summaries for b in loads], "inherit", [len(b.keys) for b in loads]) if loads else []
        failed: list[Partition] = []
        for batch, results in zip(loads, got):
            for key, res in zip(batch.keys, results, strict=True):
                if isinstance(res, inheritance.LoadFailure):
                    self._cannot_inherit(res)
                    failed.append(self.by_key[key])
                else:
                    self.loaded[key] = res
            self._add(batch, {k for k in batch.keys if k in self.loaded})
        if failed and self.append is not None:  # their counts are needed after all: reduce in full
            raise AppendFallback(f"{batching.describe(tuple(p.key for p in failed))} cannot be inherited")
        for batch in self._batches(failed):
            self._profile(batch)

    def _submit_index(self, parts: Sequence[Partition]) -> None:
        """Tasks building the file index parts of inherited partitions again (``stale_index``)."""
        inherited = self.inheritance.inherited
        for batch in self._batches(parts):
            keys = tuple(p.key for p in batch)
            uris = [inherited[k].statistics_uri for k in keys]
            self.index_refs.append((keys, self._submit(_index_task, self.context_ref, list(batch), uris, owner=keys)))

    # ------------------------------------------------------------ reduce
    def reduce(self) -> None:
        """Submit the table reductions of discrete columns, and the table frequencies' writer.

        Every partition's phase-1 objects exist now (as refs): the reductions go in
        before any wait, so each starts as soon as its inputs are ready, ahead of phase 2.
        Each takes every batch's object of its group and the table's partition order in them.
        """
        self.via_redis: list[str] = []
        if self.append is not None:
            self._submit_append()
            return
        if self.options.frequencies is FrequencyStrategy.REDIS and self.discrete:
            self.via_redis = frequency_strategy.redis_columns(self.discrete, {l.name: self.probes[l.name].type for l in self.leaves})
        order = [self.where[p.key] for p in self.partitions]
        # the table's counts are kept for later append re-analyzes (AppendPlan) when one could use them
        keep_counts = self.inheritance.write_partial_state and not self.via_redis and not self.options.value_partitions
        where = self.store.layout(self.table)
        rows = sum(p.row_count or 0 for p in self.partitions)
        outs: list[TableCountsOut] = []
        kept: list[tuple[list[Any], Any]] = []  # (a reduction's columns, its merged counts)
        for g_index, group in enumerate(self.groups):
            cols = [(name, self.probes[name].type, None) for name in group if name not in self.via_redis]
            if not cols:
                continue
            group_objs = [b.groups[g_index] for b in self.batches]
            exact, rows_ref, counts = self._submit(
                _reduce_task,
                cols,
                self.options.mostly_distinct_ratio,
                order,
                *group_objs,
                value_partitions=self.options.value_partitions,
                keep_counts=keep_counts,
                num_returns=3,
            )  # fmt: skip
            self.reduce_refs.append((exact, rows_ref))
            if keep_counts:
                path = self.run_layout.table_file(f"table_counts-{g_index}.arrow")
                outs.append(TableCountsOut(where.absolute(path), path, self._identity("table", ""), rows, self.inheritance.config))
                kept.append((cols, counts))
        if kept:  # written beside the table's frequencies, not before them
            self.counts_refs.append(self._submit(_counts_task, outs, [c for c, _ in kept], *[r for _, r in kept]))
        if not self.via_redis:  # written as soon as the reductions end, while phase 1 or 2 goes on
            self.freq_ref = self._write_frequencies([])

    def _submit_append(self) -> None:
        """The append task (the table's discrete columns from its counts at the base, the earlier
        appends' and the new partitions') and the writer of the delta segment it yields."""
        a = self.append
        assert a is not None
        where = self.store.layout(self.table)
        types = {l.name: l.type for l in self.leaves}
        base = [(where.absolute(f["path"]), f.get("checksum", ""), [(c, types[c]) for c in f["columns"]]) for f in a.counts["files"]]
        distinct = {c: int(v["distinct"]) for c, v in a.counts.get("columns", {}).items()}
        inputs = AppendInputs(
            base, [self.inheritance.inherited[k] for k in a.earlier], where.absolute(a.head.path), a.head.checksum, distinct, self.inheritance.config
        )
        objects: list[Any] = []
        at: dict[tuple[int, int], int] = {}
        new: list[list[tuple[int, int]]] = []
        for key in a.new:
            batch, pos = self.where[key]
            per_group = []
            for gi in range(len(self.groups)):
                if (batch, gi) not in at:
                    at[(batch, gi)] = len(objects)
                    objects.append(self.batches[batch].groups[gi])
                per_group.append((at[(batch, gi)], pos))
            new.append(per_group)
        group_of = {name: gi for gi, g in enumerate(self.groups) for name in g}
        columns = [(name, types[name]) for name in self.discrete]
        result, rows = self._submit(_append_task, columns, self.options.mostly_distinct_ratio, inputs, new, group_of, *objects, num_returns=2)
        uri = where.absolute(self.run_layout.table_file(layout.FREQUENCIES_FILE))
        segment = self._submit(_segment_task, uri, self._identity("table", ""), [l.name for l in self.leaves], result, rows)
        self.append_refs = (result, segment)

    def _write_frequencies(self, more: list[tuple[str, str, pa.Table]]) -> Any:
        return self._submit(
            _write_freq_task,
            self.store.layout(self.table).absolute(self.run_layout.table_file(layout.FREQUENCIES_FILE)),
            self._identity("table", ""),
            [l.name for l in self.leaves],
            more,
            *[r[1] for r in self.reduce_refs],
            partitions=[p.key for p in self.partitions] if self.options.value_partitions else None,
        )

    # ------------------------------------------------------------ profile (second wave)
    def profile_second_waves(self) -> None:
        """Second waves start when every first wave has ended (a barrier), after the
        reductions were submitted: Ray would otherwise run a partition's second wave
        as soon as its first ends, ahead of other partitions' first waves, and the
        reductions could start only at the end of phase 1."""
        if not self.two_waves:
            return
        firsts = [i for i, b in enumerate(self.batches) if not b.loaded]
        if not firsts:
            return
        # the guess needs every partition's bounds: with inherited partitions, no guess
        self.guess_ref = self._submit(
            _guess_task, self.hist_leaves, self.options.bins, *[self.batches[i].summaries for i in firsts], enabled=not self.loaded
        )
        for i in firsts:
            b = self.batches[i]
            summaries, phase_two, binned = self._submit(
                _rest_task, self.context_ref, b.tasks, b.summaries, b.phase_two, self.guess_ref, *b.groups,
                num_returns=3, owner=b.keys,
            )  # fmt: skip
            self.batches[i] = dataclasses.replace(b, summaries=summaries, phase_two=phase_two, first=b.summaries, guessed=binned)

    def collect_profiles(self) -> None:
        profiled = [b for b in self.batches if not b.loaded]
        # the progress counts partitions, each once its last wave has ended (the first waves
        # weigh nothing: counting both waves showed "16/16 partitions" for 8); the first waves'
        # summaries are only waited for (the second waves took them)
        firsts = [b for b in profiled if b.first is not None]
        refs = [b.first for b in firsts] + [b.summaries for b in profiled]
        weights = [0 for _ in firsts] + [len(b.keys) for b in profiled]
        got: list[SummaryBatch] = self._wait_all(refs, "profile", weights, fetch=[False] * len(firsts) + [True] * len(profiled))[len(firsts) :]
        self.profiled_batches = got
        self.computed: dict[str, PartitionSummary] = {}
        for b, batch in zip(profiled, got):
            for i, k in enumerate(b.keys):
                self.computed[k] = batch.summary(i)
        self.summaries: list[PartitionSummary] = [
            self.computed[p.key]
            if p.key in self.computed
            else PartitionSummary(p.key, self.loaded[p.key].rows, self.loaded[p.key].states, self.loaded[p.key].cpu_s)
            for p in self.partitions
        ]
        self.counters.inherited, self.counters.recomputed = len(self.loaded), len(self.computed)
        self.counters.reasons = {k: v for k, v in self.counters.reasons.items() if k in self.computed}

    # ------------------------------------------------------------ merge
    def merge(self) -> None:
        """Merge partial states on the driver (small), in partition order whether profiled or inherited."""
        t0 = time.perf_counter()
        self.merged: dict[str, ColumnState] = {}
        # every partition's states, column-wise: the batches' then the inherited ones', put in partition order
        inherited = [k for k in self.loaded if k not in self.computed]
        shipped = [k for batch in self.profiled_batches for k in batch.keys] + inherited
        position = {k: i for i, k in enumerate(shipped)}
        order = [position[p.key] for p in self.partitions]
        for leaf in self.leaves:
            p = self.probes[leaf.name]
            if not self.summaries:
                self.merged[leaf.name] = p.zero()
                continue
            parts = [batch.states[leaf.name] for batch in self.profiled_batches if len(batch)]
            theta = [batch.theta[leaf.name] for batch in self.profiled_batches if len(batch)]
            if inherited:
                states = [self.loaded[k].states[leaf.name] for k in inherited]
                parts.append(StateColumns.of(p, states))
                theta.append(columnwise.union_theta(states))
            self.merged[leaf.name] = columnwise.merge(p, StateColumns.concat(parts).take(order), theta)
        self.specs: dict[str, HistogramSpec | None] = {
            leaf.name: table_spec(leaf, self.merged[leaf.name], self.options.bins) for leaf in self.hist_leaves
        }
        self.timings["merge_s"] = time.perf_counter() - t0

    # ------------------------------------------------------------ bin
    def bin(self) -> None:
        """Phase 2: bin profiled partitions; inherited ones keep their histograms unless the edges moved."""
        t0 = time.perf_counter()
        specs_ref = ray.put(self.specs)
        self.inherited_files: dict[str, dict[str, FileRef]] = {}  # inherited partitions: file name -> ref
        self.binned: dict[str, Binned] = {}
        pending: list[tuple[tuple[str, ...], Any]] = []  # (a task's partitions, its list of Binned)
        new_bins = {name: (spec.bins if spec else None) for name, spec in self.specs.items()}
        # the second waves binned on edges guessed from metadata: right, or phase 2 does it again
        guessed = ray.get(self.guess_ref) if self.guess_ref is not None else None
        self.guessed_ok = guessed is not None and same_specs(self.specs, guessed)
        if guessed is not None and not self.guessed_ok:
            log.info("histogram edges guessed from metadata were wrong; binning again")
        for b in self.batches:
            if b.loaded:
                continue
            if self.guessed_ok and b.guessed is not None:
                pending.append((b.keys, b.guessed))
                continue
            partials = [partial_state_files(self.computed[k].files) for k in b.keys]
            ref = self._submit(_bin_task, self.context_ref, b.tasks, specs_ref, b.phase_two, partials, owner=b.keys)
            pending.append((b.keys, ref))
        rebins: list[Partition] = []
        for part in sorted((p for p in self.partitions if p.key in self.loaded), key=lambda p: -p.size):
            got, inh = self.loaded[part.key], self.inheritance.inherited[part.key]
            self.inherited_files[part.key] = {name: FileRef(f["path"], int(f["size"]), f.get("checksum", "")) for name, f in inh.files.items()}
            if inheritance.same_histograms(got.histogram_specs, self.specs):
                self.binned[part.key] = Binned(dict(got.histogram_counts), 0.0)
            else:
                rebins.append(part)
        self.counters.rebinned += len(rebins)
        for batch in self._batches(rebins):
            items = []
            for part in batch:
                got, inh = self.loaded[part.key], self.inheritance.inherited[part.key]
                rewrite = new_bins if inheritance.stored_bins(got.histogram_specs) != new_bins else None
                checksum = inh.files.get(layout.STATISTICS_FILE, {}).get("checksum", "")
                counts = (inh.counts_uri, got.partial_checksums.get(partial_state.PARTIAL_COUNTS_FILE, ""))
                items.append(Rebin(self._task(part), inheritance.unchanged_counts(got, self.specs), inh.statistics_uri, rewrite, checksum, counts))
            keys = tuple(p.key for p in batch)
            pending.append((keys, self._submit(_rebin_task, self.context_ref, specs_ref, items, owner=keys)))
        self._redis_frequencies()
        if self.freq_ref is None and self.append is None:
            self.freq_ref = self._write_frequencies(self.redis_freq)
        got_lists = self._wait_all([ref for _, ref in pending], "histograms", [len(keys) for keys, _ in pending])
        done = {k: b for (keys, _), binned in zip(pending, got_lists) for k, b in zip(keys, binned, strict=True)}
        self.binned.update(done)
        self.binned = {p.key: self.binned[p.key] for p in self.partitions}
        self.timings["phase2_s"] = time.perf_counter() - t0
        self.timings["cpu_histograms_s"] = sum(b.cpu_s for b in done.values())

    def _redis_frequencies(self) -> None:
        """The Redis strategy consolidates while the phase-2 tasks bin; its inputs are the
        phase-1 objects (profiled or inherited), one per partition: a batch's object of a
        column group is split into its partitions' by one small task."""
        self.redis_exact: dict[str, dict[str, Any]] = {}
        self.redis_freq: list[tuple[str, str, pa.Table]] = []
        if not self.via_redis:
            return
        t1 = time.perf_counter()
        group_of = {name: gi for gi, g in enumerate(self.groups) for name in g}
        split: dict[tuple[int, int], list[Any]] = {}

        def partition_ref(key: str, gi: int) -> Any:
            at, pos = self.where[key]
            if (at, gi) not in split:
                b = self.batches[at]
                refs = self._submit(_unbatch_task, b.groups[gi], num_returns=len(b.keys), owner=b.keys)
                split[(at, gi)] = list(refs) if len(b.keys) > 1 else [refs]
            return split[(at, gi)][pos]

        self.redis_exact, self.redis_freq, self.frequencies_report = frequency_strategy.run(
            self.via_redis,
            {l.name: self.probes[l.name].type for l in self.leaves},
            {l.name: i for i, l in enumerate(self.leaves)},
            {name: [partition_ref(part.key, group_of[name]) for part in self.partitions] for name in self.via_redis},
            self.job_id,
            self.options.mostly_distinct_ratio,
            self.options.frequency_settings,
            self.options.redis_url,
            self.progress,
        )
        self.timings["redis_frequencies_s"] = time.perf_counter() - t1

    def collect_reductions(self) -> None:
        t0 = time.perf_counter()
        self.exact: dict[str, dict[str, Any]] = dict(self.redis_exact)
        reduce_cpu = 0.0
        if self.append_refs is not None:
            appended, segment = ray.get(list(self.append_refs))
            if isinstance(appended.value, str):  # a file of the table's counts is missing or damaged
                spent = sum(s.cpu_s for s in self.computed.values()) + sum(l.cpu_s for l in self.loaded.values()) + appended.cpu_s
                raise AppendFallback(f"the table's value counts cannot be read ({appended.value})", spent, warn=True)
            self.exact.update(appended.value.exact)
            reduce_cpu += appended.cpu_s + segment.cpu_s
            self.freq_ref = None
            self.table_frequencies_segment = segment.value
        for result in ray.get([r[0] for r in self.reduce_refs]):
            reduce_cpu += result.cpu_s
            self.exact.update(result.value)
        for written in ray.get(self.counts_refs):
            reduce_cpu += written.cpu_s
            self.counts_files.extend(written.value)
        t = self.timings
        t["cpu_profile_s"] = sum(s.cpu_s for s in self.computed.values())
        t["cpu_inherit_s"] = sum(l.cpu_s for l in self.loaded.values())
        t["cpu_reduce_s"] = reduce_cpu
        t["cpu_s"] = t["cpu_profile_s"] + t["cpu_inherit_s"] + t["cpu_histograms_s"] + reduce_cpu
        if self.freq_ref is not None:
            written = ray.get(self.freq_ref)
            self.table_frequencies: WrittenFile = written.value
            t["cpu_reduce_s"] += written.cpu_s  # the table frequencies' writing is part of the reduction
            t["cpu_s"] += written.cpu_s
        else:
            self.table_frequencies = self.table_frequencies_segment
        t["reduce_wait_s"] = time.perf_counter() - t0

    # ------------------------------------------------------------ write
    def write(self) -> None:
        """The table-level statistics and histograms files."""
        rows = []
        for leaf in self.leaves:
            p = self.probes[leaf.name]
            row = p.finalize_table(self.merged[leaf.name], self.exact.get(leaf.name) if p.discrete else None)
            if p.discrete:
                row["frequencies"] = self.exact[leaf.name]["frequencies"]
            spec = self.specs.get(leaf.name)
            row["histogram_bins"] = spec.bins if spec else None
            rows.append(row)
        bin_counts = [self.binned[p.key].counts for p in self.partitions]
        table_counts = {
            l.name: (np.sum([c[l.name] for c in bin_counts], axis=0) if bin_counts else np.zeros(self.specs[l.name].bins, np.int64))
            for l in self.hist_leaves
            if self.specs[l.name]
        }
        where = self.store.layout(self.table)
        ident = self._identity("table", "")
        written = {
            layout.STATISTICS_FILE: writer.write_statistics(
                where.absolute(self.run_layout.table_file(layout.STATISTICS_FILE)), rows, self.user, ident
            ),
            layout.HISTOGRAMS_FILE: writer.write_histograms(
                where.absolute(self.run_layout.table_file(layout.HISTOGRAMS_FILE)),
                [(l.name, l.type, self.specs[l.name], table_counts.get(l.name)) for l in self.hist_leaves],
                ident,
            ),
            layout.FREQUENCIES_FILE: self.table_frequencies,
        }
        self.table_files = self._files(lambda name: self.run_layout.table_file(name), written)
        self.total_rows = sum(s.rows for s in self.summaries)
        self.file_index_refs = self._write_file_index()

    def _write_file_index(self) -> dict[str, dict[str, Any]]:
        """The table's per-file column index from its partitions' parts (profiled now or
        inherited), beside the table files; named in the table's properties (gc keeps it)."""
        t0 = time.perf_counter()
        rebuilt: dict[str, Any] = {}
        if self.index_refs:
            got = self._wait_all([r for _, r in self.index_refs], "file index", [len(k) for k, _ in self.index_refs])
            for (keys, _), batch in zip(self.index_refs, got):
                rebuilt.update((k, part) for k, part in zip(keys, batch) if part is not None)
        parts = [s.file_index for s in self.computed.values() if s.file_index is not None]
        parts += [rebuilt.get(k) or self.inherited_index[k] for k in self.loaded if k in rebuilt or k in self.inherited_index]
        if not self.options.file_index or not parts:
            return {}
        tables = fileindex_store.assemble(parts, schema=self.source.schema(), columns=[l.name for l in self.leaves])
        where = self.store.layout(self.table)
        written = fileindex_store.write_file_index(tables, where.absolute(self.run_layout.table_dir))
        refs = {name: f.ref(self.run_layout.table_file(name)) for name, (_, f) in written.items()}
        self.timings["file_index_s"] = time.perf_counter() - t0
        return refs

    def _files(self, path: Callable[[str], str], written: dict[str, WrittenFile], given: dict[str, FileRef] | None = None) -> StatisticsFiles:
        """The three files: ``given`` refs where named, else this job's files by ``path``, with the
        sizes and checksums taken when they were ``written``."""
        given = given or {}
        refs = {}
        for kind in KINDS:
            name = FILE_NAMES[kind]
            refs[kind] = given.get(name) or FileRef(path(name), written[name].size, written[name].checksum)
        return StatisticsFiles(**refs)

    # ------------------------------------------------------------ publish
    def output(self) -> JobOutput:
        """The job's typed output: every partition with its files and their sizes."""
        plan, run = self.inheritance, self.run_layout
        partitions = []
        for s in self.summaries:
            fingerprint = plan.fingerprints.get(s.key, "")
            if s.key not in self.loaded:
                written = {**s.files, **self.binned[s.key].files}
                files = self._files(lambda name, k=s.key: run.partition_file(k, name), written)
                partitions.append(JobPartition(s.key, s.rows, files, fingerprint))
                continue
            inh = plan.inherited[s.key]
            own = self.binned[s.key].files  # re-binned: new histograms (and statistics) of this job
            files = self._files(
                lambda name, k=s.key: run.partition_file(k, name), own, {n: r for n, r in self.inherited_files[s.key].items() if n not in own}
            )
            rebinned = bool(own)
            # kept as they are: the catalog's entry carries over; re-binned: a new entry naming old and new files
            partitions.append(
                JobPartition(
                    s.key,
                    s.rows,
                    files,
                    fingerprint,
                    inherited=not rebinned,
                    job_id=inh.job_id if not rebinned else "",
                    snapshot_id=inh.snapshot if not rebinned else "",
                )  # fmt: skip
            )
        properties: dict[str, Any] = {
            "format_version": layout.FORMAT_VERSION,
            "table_uri": self.source.uri,
            "created_at": self.created,
            "rows": self.total_rows,
            "bins": self.options.bins,
            "columns": inheritance.manifest_columns(self.leaves),
            "schema": self._schema_text(),
            "user_statistics": [u.name for u in self.user],
            TABLE_OPTIONS_PROPERTY: self._table_options(),
        }
        definitions = {u.name: ref for u in self.user if (ref := reference_of(u)) is not None}
        if definitions:  # where each user statistic's definition lives: subsets computed elsewhere load them
            properties[USER_DEFINITIONS_PROPERTY] = definitions
        if plan.write_partial_state:
            properties[inheritance.CONFIG_PROPERTY] = plan.config
        if self.file_index_refs:
            properties[FILE_INDEX_PROPERTY] = self.file_index_refs
        properties.update(self._counts_properties())
        return self._job_output(partitions, self.table_files, properties)

    def _counts_properties(self) -> dict[str, Any]:
        """The table counts property (and, after an append, the older frequency segments)."""
        distinct = {name: {"distinct": int(self.exact[name]["distinct_count"])} for name in self.discrete if name in self.exact}
        a = self.append
        if a is not None:
            counts = {**a.counts, "appended": [*a.counts.get("appended", []), *a.new], "columns": distinct}
            return {TABLE_COUNTS_PROPERTY: counts, FREQUENCY_SEGMENTS_PROPERTY: a.segments}
        if not self.counts_files or {c for f in self.counts_files for c in f["columns"]} != set(self.discrete):
            return {}  # none written (value partitions, the redis strategy, no partial states)
        base = [p.key for p in self.partitions]
        return {TABLE_COUNTS_PROPERTY: {"files": self.counts_files, "base_partitions": base, "appended": [], "columns": distinct}}

    def publish(self) -> None:
        self.store.publish(self.output() if self.carried is None else self._carried_output(self.carried))

    def result(self, elapsed_s: float) -> AnalyzeResult:
        c = self.counters
        return AnalyzeResult(
            table=self.table,
            job_id=self.job_id,
            store=self.store.root,
            snapshot=self.snapshot,
            partitions=len(self.partitions),
            rows=self.total_rows,
            columns=len(self.leaves),
            elapsed_s=elapsed_s,
            run_uri=self._run_uri(),
            timings=self.timings,
            frequencies=self.frequencies_report,
            inherited=c.inherited,
            recomputed=c.recomputed,
            rebinned=c.rebinned,
            recompute_reasons=c.reasons,
            warnings=c.warnings,
            histograms_guessed=self.guessed_ok,
            nodes=dict(collections.Counter(n for s in self.computed.values() for n in s.nodes if n)),
            carried_over=(self.carried.properties.get(TABLE_FILES_JOB_PROPERTY) or self.carried.job_id) if self.carried else "",
            frequency_segments=self._segments(),
        )

    def _segments(self) -> int:
        props = self.carried.properties if self.carried is not None else {}
        older = self.append.segments if self.append is not None else props.get(FREQUENCY_SEGMENTS_PROPERTY) or []
        return 1 + len(older)

    def _run_uri(self) -> str:
        """Where the table files are: this job's run, or the run whose files it carried over."""
        if self.carried is None:
            return self.store.run_uri(self.table, self.job_id)
        return self.store.layout(self.table).absolute(files_run(self.carried.files.statistics.path, self.carried.job_id))


@contextlib.contextmanager
def _old_objects_frozen() -> Iterator[None]:
    """Python's collector skips the objects that exist when the job starts, until it ends.

    The driver allocates a few hundred objects a partition (the summaries it fetches),
    which triggers full collections; each of them walked every object of the process
    (Ray, pyarrow, pandas: ~0.13 s each on the bench machine), ~0.7 ms of the driver's
    CPU a partition at 1,024 partitions. ``gc.freeze`` moves them out of the collector's
    generations; ``gc.unfreeze`` puts them back (in the oldest). Objects of the job are
    still collected as usual. Process-wide: a job running beside this one in another
    thread unfreezes early at worst, which costs time, never correctness.
    """
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _unwrap(exc: Exception) -> Exception:
    """The user's error inside a Ray task error."""
    cause = getattr(exc, "cause", None)
    while isinstance(cause, ray.exceptions.RayTaskError):
        cause = getattr(cause, "cause", None)
    return cause if isinstance(cause, Exception) else exc


__all__ = ["AnalyzeJob", "AnalyzeOptions", "AnalyzeResult", "BatchRefs", "ProgressCallback", "analyze_source", "run"]
