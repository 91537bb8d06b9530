"""The analyze job's task bodies and the small typed values they return.

Each function here runs inside one Ray task (engine/runtime/analyze.py submits
them) but is plain Python, testable without Ray. Tasks take a shared
:class:`JobContext` (put in the object store once per job) and a
:class:`PartitionTask` (which partition, where its files go, what they say
about themselves), and return typed values: a :class:`PartitionSummary`, a
:class:`Binned` or a :class:`TaskResult`, each with the CPU time the task used
and the sizes of the files it wrote (the catalog records them).
"""

from __future__ import annotations

import json
import logging
import math
import time
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from engine import fileio
from engine import types as mt
from engine import values as value_forms
from engine.arrowcompute import contiguous
from engine.columns import LeafColumn
from engine.exceptions import AnalyzeError, InvalidArgumentError, MetastoreError
from engine.fileindex import sources as fileindex_sources
from engine.fileindex import store as fileindex_store
from engine.fileindex.build import choose_bloom_columns, unindexed_partition
from engine.fileindex.store import StoredPart
from engine.files import checksum, layout, partial_state, writer
from engine.files.layout import FileIdentity
from engine.options import AnalyzeOptions
from engine.runtime import abort
from engine.sources.base import Partition, TableSource
from engine.stats import sortedvalues, stringsort, valuepartitions
from engine.stats.columnwise import StateColumns, union_theta
from engine.stats.histograms import HistogramSpec, make_spec, to_domain
from engine.stats.profile import ColumnProfile, ColumnState
from engine.stats.user import UserStatistic
from engine.stats.valuecounts import (
    counts_hashed,
    counts_sorted,
    exact_of_merged,
    hashed_frequencies,
    merge_counts,
    narrow_counts,
    widen_counts,
)

#: a histogrammed column as phase 1 saw it: work type, sorted distinct values in
#: storage form, and their counts (None: every value once)
BinInput = tuple[pa.DataType, np.ndarray, "np.ndarray | None"]
T = TypeVar("T")
log = logging.getLogger("engine.analyze")


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
            states={l.name: StateColumns.of(ColumnProfile(l.name, l.type, user), [s.states[l.name] for s in summaries]) for l in names},
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
    """The Ray node this process runs on ("" outside Ray: the task bodies run without it in tests)."""
    import ray

    if not ray.is_initialized():
        return ""
    try:
        return ray.get_runtime_context().get_node_id()
    except Exception:
        return ""


def histogram_leaves(leaves: list[LeafColumn], user: list[UserStatistic]) -> list[LeafColumn]:
    return [l for l in leaves if ColumnProfile(l.name, l.type, user).unsupported is None and mt.histogram_domain(l.type)]


# ---------------------------------------------------------------- task bodies (pure Python, testable without Ray)
def _passes(leaves: list[LeafColumn], per_pass: int) -> list[list[LeafColumn]]:
    tops: list[str] = []
    for leaf in leaves:
        if leaf.top not in tops:
            tops.append(leaf.top)
    out = []
    for i in range(0, len(tops), per_pass):
        chunk = set(tops[i : i + per_pass])
        out.append([l for l in leaves if l.top in chunk])
    return out


def _read_error(partition: Partition, exc: Exception) -> MetastoreError:
    if isinstance(exc, MetastoreError):
        return exc
    files = ", ".join(f.path for f in partition.files[:3])
    return AnalyzeError(f"partition {partition.key or '(unpartitioned)'} ({files}): {type(exc).__name__}: {exc}")


@dataclass
class _Profiled:
    """What profiling a set of a partition's columns yields (inside one task)."""

    rows: int
    profiles: dict[str, ColumnProfile]
    states: dict[str, ColumnState]
    stat_rows: dict[str, dict[str, Any]]
    freq: list[tuple[str, str, pa.Table]]  # the partition's stored frequency rows of discrete columns
    counts: dict[str, pa.Table]  # exact value counts of discrete columns
    binnable: dict[str, BinInput]


def _profile_columns(
    source: TableSource, partition: Partition, leaves: list[LeafColumn], user: list[UserStatistic], options: AnalyzeOptions
) -> _Profiled:
    """Read ``leaves`` of one partition column-wise and profile each column in one update."""
    out = _Profiled(0, {}, {}, {}, [], {}, {})
    for group in _passes(leaves, options.columns_per_pass):
        profiles = {l.name: ColumnProfile(l.name, l.type, user) for l in group}
        out.profiles.update(profiles)
        tops = list(dict.fromkeys(l.top for l in group))
        # strings the files keep as small dictionary codes are counted from the codes
        coded = [l.name for l in group if l.name == l.top and profiles[l.name].counts_strings]
        chunks: dict[str, list[pa.Array]] = {l.name: [] for l in group}
        try:
            n = 0
            for batch in source.read_batches(partition, tops, batch_size=options.batch_size, dictionary=coded):
                n += batch.num_rows
                for leaf in group:
                    chunks[leaf.name].append(leaf.extract(batch.column(leaf.top)))
        except Exception as exc:
            raise _read_error(partition, exc) from exc
        out.rows = n
        for leaf in group:
            # one update per column over the whole partition: one hash pass, no merges
            p = profiles[leaf.name]
            parts = chunks.pop(leaf.name)
            if any(pa.types.is_dictionary(c.type) for c in parts):
                state, row, counts, view = p.profile_chunks(parts)
            else:
                column = pa.chunked_array(parts, type=leaf.type)
                # an unsupported column (lists, maps) is only counted: its chunks may not fit one
                # array (a map of 1 GiB strings: large_string_map.brotli.parquet)
                state, row, counts, view = p.profile_column_view(column if p.unsupported else contiguous(column))
                del column
            if view is not None and mt.histogram_domain(leaf.type):
                out.binnable[leaf.name] = (view.type, view.distinct, None if len(view.distinct) == view.n else view.counts)
            del view
            if p.discrete:
                kind, stored = writer.stored_frequencies(counts, row["row_count"] - row["null_count"], options.mostly_distinct_ratio)
                row["frequencies"] = kind
                out.freq.append((leaf.name, kind, writer.frequency_rows(leaf.name, stored)))
                out.counts[leaf.name] = counts
            out.states[leaf.name] = state
            out.stat_rows[leaf.name] = row
    return out


def _write_partition_frequencies(out_uri: str, identity: FileIdentity, leaves: list[LeafColumn], got: _Profiled) -> writer.WrittenFile:
    order = {l.name: i for i, l in enumerate(leaves)}
    return writer.write_frequencies(fileio.join(out_uri, layout.FREQUENCIES_FILE), sorted(got.freq, key=lambda f: order[f[0]]), identity)


def _write_partial_state(
    out_uri: str, identity: FileIdentity, leaves: list[LeafColumn], user: list[UserStatistic], options: AnalyzeOptions, got: _Profiled
) -> dict[str, writer.WrittenFile]:
    """The partial-state files' sizes and checksums by name (none when a user statistic cannot be stored)."""
    if partial_state.unserializable(user):
        return {}
    cfg = partial_state.config(options.mostly_distinct_ratio, user)  # what a later job loads instead of profiling again
    return partial_state.write(out_uri, identity, got.rows, [got.profiles[l.name] for l in leaves], got.states, got.counts, user, cfg)


def partial_state_files(files: dict[str, writer.WrittenFile]) -> dict[str, writer.WrittenFile]:
    """The partial-state files among a summary's written files (its statistics.parquet records them)."""
    return {name: f for name, f in files.items() if name in partial_state.FILES}


def _summary(partition: Partition, got: _Profiled, cpu_s: float) -> PartitionSummary:
    return PartitionSummary(partition.key, got.rows, got.states, cpu_s, nodes=(node_id(),))


def _rows(leaves: list[LeafColumn], got: _Profiled) -> list[dict[str, Any]]:
    """The partition's statistics rows, in column order."""
    return [got.stat_rows[l.name] for l in leaves if l.name in got.stat_rows]


def _file_index(job: JobContext, partition: Partition, stat_rows: list[dict[str, Any]] | None) -> StoredPart | None:
    """The partition's part of the file index: every data file's statistics (footers; Iceberg's
    manifests) and Bloom filters of the chosen (``None``: this partition's high-cardinality)
    columns. Sources the index cannot describe get none. A partition whose index cannot be
    built gets its files listed without statistics: planning then keeps each of them (a file
    missing from the index would be missing from every plan)."""
    options = job.options
    if not options.file_index or not fileindex_sources.indexable(job.source):
        return None
    keys = {f.name for f in job.source.partition_fields()}  # constant per partition: the partition statistics prune them
    names = [l.name for l in job.leaves if l.top not in keys]
    try:
        bloom = options.bloom_columns if options.bloom_columns is not None else choose_bloom_columns(stat_rows or [], job.source.schema())
        bloom = [b for b in bloom if b in names]
        index = fileindex_sources.index_partition(job.source, partition, columns=names, bloom_columns=bloom, bloom_fpr=options.bloom_fpr)
    except InvalidArgumentError:  # the caller's --bloom-columns (checked before the job, too)
        raise
    except Exception:  # noqa: BLE001 - optional: planning then reads these files as candidates
        log.warning("no file index for partition %s", partition.key or "(unpartitioned)", exc_info=True)
        index = unindexed_partition(partition, names)
    # in the stored form, for the table's schema and the job's columns (what the driver assembles)
    return fileindex_store.encode(index, job.source.schema(), [l.name for l in job.leaves])


def index_batch(job: JobContext, partitions: list[Partition], statistics_uris: list[str]) -> list[StoredPart | None]:
    """The file index parts of inherited partitions whose part in the earlier index does not
    have this job's Bloom filters (or is missing): each built again from its files (with
    automatic Bloom columns, chosen from the partition's stored statistics at
    ``statistics_uris``)."""
    out = []
    for partition, uri in zip(partitions, statistics_uris, strict=True):
        rows = stored_statistics_rows(uri) if job.options.bloom_columns is None else None
        out.append(_file_index(job, partition, rows))
    return out


def stored_statistics_rows(uri: str) -> list[dict[str, Any]] | None:
    """A partition's statistics rows (column, row, null and distinct counts) from its
    statistics.parquet: what the automatic Bloom columns are chosen by."""
    try:
        return pq.read_table(fileio.open_input(uri), columns=["column", "row_count", "null_count", "distinct_count"]).to_pylist()
    except Exception:  # noqa: BLE001 - then no automatic Bloom filters for it
        log.warning("statistics unreadable for the file index's Bloom columns: %s", uri, exc_info=True)
        return None


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


def profile_partition(job: JobContext, task: PartitionTask, groups: list[list[str]], discrete_only: bool = False) -> tuple[Any, ...]:
    """Phase 1: all statistics of one partition but its histograms.

    Returns the summary, followed (as separate Ray objects) by one dict of exact
    value counts per group of discrete columns, so each reduce task fetches
    only its own group, and last by phase 2's inputs (:class:`PhaseTwoInputs`): the
    statistics rows and the sorted distinct values and counts of every histogrammed
    column that took the sorted path, so phase 2 bins those without reading the
    partition again.

    ``discrete_only``: the first of two waves (see :func:`profile_rest`): only the
    discrete columns, whose value counts the table reductions wait for, and the
    partition's frequencies.parquet (which holds only those); the summary is
    partial, no partial state is written, and no binning inputs are returned (the
    second wave rebuilds them from the value counts: :func:`bin_inputs_of_counts`),
    only the statistics rows of those columns.
    """
    if job.stopped():  # the job failed elsewhere before this task started
        return (None,) * (2 + len(groups))
    return _profile_one(job, task, groups, discrete_only)


def _profile_one(job: JobContext, task: PartitionTask, groups: list[list[str]], discrete_only: bool) -> tuple[Any, ...]:
    source, leaves, user, options = job.source, job.leaves, job.user, job.options
    partition, out_uri, identity = task.partition, task.out_uri, task.identity
    cpu0 = time.process_time()
    bounds = None
    if discrete_only:
        try:
            bounds = source.column_bounds(partition, [l.name for l in histogram_leaves(leaves, user) if l.name == l.top])
        except Exception:  # noqa: BLE001 - only a guess: phase 2 bins without it
            log.debug("no column bounds for partition %s", partition.key, exc_info=True)
        leaves = [l for l in leaves if ColumnProfile(l.name, l.type, user).discrete]
    got = _profile_columns(source, partition, leaves, user, options)
    written = _write_partition_frequencies(out_uri, identity, leaves, got)
    partial = {} if discrete_only else _write_partial_state(out_uri, identity, leaves, user, options, got)
    rows = _rows(leaves, got)
    index = None if discrete_only else _file_index(job, partition, rows)
    summary = _summary(partition, got, time.process_time() - cpu0)
    summary.bounds = bounds
    summary.file_index = index
    summary.files[layout.FREQUENCIES_FILE] = written
    summary.files.update(partial)
    # counts narrowed for the object store; every consumer widens them (valuecounts.widen_counts)
    phase_two = PhaseTwoInputs(rows, {} if discrete_only else got.binnable)
    return (summary, *({c: narrow_counts(got.counts[c]) for c in g} for g in groups), phase_two)


def profile_rest(
    job: JobContext,
    task: PartitionTask,
    first: PartitionSummary,
    first_rows: PhaseTwoInputs,
    guessed: dict[str, HistogramSpec | None] | None,
    *first_groups: dict[str, pa.Table],
) -> tuple[PartitionSummary, PhaseTwoInputs, Binned | None]:
    """Phase 1, second wave: the columns the first wave (``discrete_only``) left.

    Splitting phase 1 lets the table reductions of the discrete columns (the
    longest is a mostly distinct string column's) run while this wave profiles
    the other columns, instead of after the whole phase. Combines both waves
    into the partition's summary and writes its partial state.

    ``first_rows``: the first wave's phase-2 inputs (its statistics rows).
    ``guessed``: histogram specs the driver derived from every partition's
    metadata bounds (see :func:`guess_specs`), or None. With them this task also
    does phase 2 for its partition (bins, histograms.parquet, statistics.parquet),
    and returns the bin counts; phase 2 then runs only if the guess proves wrong,
    and reads the histogrammed columns again: the binning inputs are returned only
    without a guess (copying them into the object store cost ~12 ms a task for a
    phase 2 that rarely runs).
    """
    if job.stopped():
        return None, PhaseTwoInputs([]), None  # type: ignore[return-value]
    return _rest_one(job, task, first, first_rows, guessed, *first_groups)


def _rest_one(
    job: JobContext,
    task: PartitionTask,
    first: PartitionSummary,
    first_rows: PhaseTwoInputs,
    guessed: dict[str, HistogramSpec | None] | None,
    *first_groups: dict[str, pa.Table],
) -> tuple[PartitionSummary, PhaseTwoInputs, Binned | None]:
    source, leaves, user, options = job.source, job.leaves, job.user, job.options
    partition, out_uri, identity = task.partition, task.out_uri, task.identity
    cpu0 = time.process_time()
    got = _profile_columns(source, partition, [l for l in leaves if l.name not in first.states], user, options)
    got.profiles.update({l.name: ColumnProfile(l.name, l.type, user) for l in leaves if l.name in first.states})
    got.states.update(first.states)
    got.stat_rows.update((r["column"], r) for r in first_rows.stat_rows)
    for g in first_groups:
        got.counts.update((c, widen_counts(t)) for c, t in g.items())
    got.binnable.update(bin_inputs_of_counts({l.name: got.counts[l.name] for l in histogram_leaves(leaves, user) if l.name in first.states}))
    got.rows = first.rows
    partial = _write_partial_state(out_uri, identity, leaves, user, options, got)
    rows = _rows(leaves, got)
    index = _file_index(job, partition, rows)
    summary = _summary(partition, got, first.cpu_s + time.process_time() - cpu0)  # the index's CPU included
    summary.files.update(first.files)
    summary.files.update(partial)
    summary.file_index = index
    summary.nodes = first.nodes + summary.nodes
    if guessed is None:
        return summary, PhaseTwoInputs(rows, got.binnable), None
    # phase 2 can run again only if the guess was wrong; it then needs the rows, not the inputs
    return summary, PhaseTwoInputs(rows), bin_partition(job, task, guessed, PhaseTwoInputs([dict(r) for r in rows], got.binnable), partial)


def bin_inputs_of_counts(counts: dict[str, pa.Table]) -> dict[str, BinInput]:
    """The binning inputs of discrete columns, rebuilt from their value-sorted counts.

    A first wave's sorted view of a number or time column held its sorted distinct
    values and their counts, which are exactly its value counts: shipping both
    through the object store copied ~8 MB more per partition of the bench table.
    Columns whose counts are not value-sorted (they took no sorted view) are left
    out, as the first wave left them out: phase 2 reads those.
    """
    out: dict[str, BinInput] = {}
    for name, c in counts.items():
        t = c.schema.field("value").type
        if not (counts_sorted(c) and sortedvalues.supports(t)):
            continue
        values = contiguous(c["value"])
        weights = c["count"].to_numpy().astype(np.int64, copy=False)
        n = int(weights.sum())
        out[name] = (t, sortedvalues.storage(values), None if len(values) == n else weights)
    return out


def guess_specs(hist_leaves: list[LeafColumn], bins: int, *firsts: PartitionSummary, enabled: bool = True) -> dict[str, HistogramSpec | None] | None:
    """Histogram specs from the first waves' metadata bounds, or None if any is unknown.

    The table edges depend only on each column's table range; the footers of the
    files usually tell it before the data is read, so the second wave can bin at
    once. The driver checks the guess against the ranges phase 1 computed.
    """
    if not enabled:
        return None
    try:
        return _guess_specs(hist_leaves, bins, firsts)
    except Exception:  # noqa: BLE001 - only a guess: phase 2 bins without it
        log.debug("no histogram guess", exc_info=True)
        return None


def _guess_specs(hist_leaves: list[LeafColumn], bins: int, firsts: tuple[PartitionSummary, ...]) -> dict[str, HistogramSpec | None] | None:
    specs: dict[str, HistogramSpec | None] = {}
    for leaf in hist_leaves:
        lo = hi = None
        for first in firsts:
            if first.bounds is None or leaf.name not in first.bounds:
                return None
            b = first.bounds[leaf.name]
            if b is None:
                continue
            a, z = to_domain(b[0]), to_domain(b[1])
            lo = a if lo is None else min(lo, a)
            hi = z if hi is None else max(hi, z)
        if mt.histogram_domain(leaf.type) == mt.HistogramDomain.FLOAT and lo is not None and not (math.isfinite(lo) and math.isfinite(hi)):
            return None  # the edges are on the finite range, which the footers do not give
        specs[leaf.name] = make_spec(leaf.type, lo, hi, bins)
    return specs


def same_specs(a: dict[str, HistogramSpec | None], b: dict[str, HistogramSpec | None]) -> bool:
    """Equal in every field, bit for bit (-0.0 is not 0.0: the edges are written as text)."""
    return a.keys() == b.keys() and all(repr(a[k]) == repr(b[k]) for k in a)


def _bin_counts(
    source: TableSource,
    partition: Partition,
    hist_leaves: list[LeafColumn],
    specs: dict[str, HistogramSpec | None],
    options: AnalyzeOptions,
    binnable: dict[str, BinInput] | None = None,
) -> dict[str, np.ndarray]:
    """Exact bin counts of the histogrammed columns of one partition.

    Columns in ``binnable`` are binned from phase 1's sorted distinct values;
    only the others are read (only those columns).
    """
    binnable = binnable or {}
    counts = {l.name: np.zeros(specs[l.name].bins, np.int64) for l in hist_leaves if specs[l.name]}
    for name, (work_type, distinct, weights) in binnable.items():
        if specs.get(name):
            counts[name] = specs[name].weighted_bin_counts(sortedvalues.to_arrow(distinct, work_type), weights)
    binned = [l for l in hist_leaves if specs[l.name] and l.name not in binnable]
    for group in _passes(binned, options.columns_per_pass):
        tops = list(dict.fromkeys(l.top for l in group))
        try:
            for batch in source.read_batches(partition, tops, batch_size=options.batch_size):
                for leaf in group:
                    counts[leaf.name] += specs[leaf.name].bin_counts(leaf.extract(batch.column(leaf.top)))
        except Exception as exc:
            raise _read_error(partition, exc) from exc
    return counts


def bin_partition(
    job: JobContext,
    task: PartitionTask,
    specs: dict[str, HistogramSpec | None],
    inputs: PhaseTwoInputs,
    partial: dict[str, writer.WrittenFile] | None = None,
) -> Binned:
    """Phase 2: histograms on the table's edges; then the partition's statistics file
    (recording ``partial``, the partial-state files profiling wrote)."""
    cpu0 = time.process_time()
    hist_leaves = histogram_leaves(job.leaves, job.user)
    counts = _bin_counts(job.source, task.partition, hist_leaves, specs, job.options, inputs.binnable)
    stat_rows = inputs.stat_rows
    files = {
        layout.HISTOGRAMS_FILE: writer.write_histograms(
            fileio.join(task.out_uri, layout.HISTOGRAMS_FILE),
            [(l.name, l.type, specs[l.name], counts.get(l.name)) for l in hist_leaves],
            task.identity,
        )
    }
    for row in stat_rows:
        spec = specs.get(row["column"])
        row["histogram_bins"] = spec.bins if spec else None
    files[layout.STATISTICS_FILE] = writer.write_statistics(
        fileio.join(task.out_uri, layout.STATISTICS_FILE), stat_rows, job.user, task.identity, partial_state=partial
    )
    return Binned(counts, time.process_time() - cpu0, files)


def rebin_partition(
    job: JobContext,
    task: PartitionTask,
    specs: dict[str, HistogramSpec | None],
    kept: dict[str, np.ndarray],
    statistics_uri: str,
    histogram_bins: dict[str, int | None] | None,
    statistics_checksum: str = "",
) -> Binned:
    """Phase 2 of an inherited partition whose table edges moved.

    Only the columns whose edges moved are read and binned again; ``kept`` holds the
    inherited counts of the others. The partition's statistics.parquet is rewritten
    (from the inherited one) only when a column's ``histogram_bins`` changes
    (``histogram_bins`` not None; checked against ``statistics_checksum``, the one
    recorded when it was written); its other files stay where they are.
    """
    cpu0 = time.process_time()
    hist_leaves = histogram_leaves(job.leaves, job.user)
    counts = _bin_counts(job.source, task.partition, [l for l in hist_leaves if l.name not in kept], specs, job.options)
    counts.update(kept)
    files = {
        layout.HISTOGRAMS_FILE: writer.write_histograms(
            fileio.join(task.out_uri, layout.HISTOGRAMS_FILE),
            [(l.name, l.type, specs[l.name], counts.get(l.name)) for l in hist_leaves],
            task.identity,
        )
    }
    if histogram_bins is not None:
        files[layout.STATISTICS_FILE] = writer.rewrite_histogram_bins(
            statistics_uri, fileio.join(task.out_uri, layout.STATISTICS_FILE), histogram_bins, task.identity, statistics_checksum
        )
    return Binned(counts, time.process_time() - cpu0, files)


@dataclass(frozen=True)
class TableCountsOut:
    """Where a full reduction writes its group's exact table counts (the base of later append
    re-analyzes, engine/stats/appendcounts.py), and what the file's metadata says."""

    uri: str
    path: str  # relative to the table's directory (what the catalog names)
    identity: FileIdentity
    rows: int  # the table's
    cfg: dict[str, Any]  # engine.files.partial_state.config


def reduce_counts(
    columns: list[tuple[str, pa.DataType, int | None]],
    mostly_distinct_ratio: float,
    *partition_groups: dict[str, pa.Table],
    value_partitions: bool = False,
    keep_counts: bool = False,
) -> tuple[TaskResult[dict[str, dict[str, Any]]], list[tuple[str, str, pa.Table]], dict[str, pa.Table]]:
    """Exact table-level value counts of a group of discrete columns.

    ``columns``: (name, type, non-null count at table level, or None: the sum of
    the counts, which cover every non-null value of a discrete column). Returns
    the exact statistics per column (with the task's CPU time) and its frequency
    rows for the table file, as two Ray objects (the table file's writer fetches
    only the rows). ``partition_groups`` are in the table's partition order; with ``value_partitions``
    the rows also carry each stored value's distribution over them. With ``keep_counts`` the
    merged counts are a third object (:func:`write_table_counts` writes them, in a task of its
    own: off the reduction's path to the table's frequencies); else it is empty.
    """
    cpu0 = time.process_time()
    exact: dict[str, dict[str, Any]] = {}
    freq: list[tuple[str, str, pa.Table]] = []
    keep: dict[str, pa.Table] | None = {} if keep_counts else None
    for name, type_, non_null in columns:
        parts = [widen_counts(g[name]) for g in partition_groups]
        if non_null is None:
            non_null = sum(int(pc.sum(p["count"]).as_py() or 0) for p in parts)
        if stringsort.supports(type_) and all(counts_hashed(p) for p in parts):
            # strings counted in hash order: merged and stored without copying the column
            out: list[pa.Table] | None = [] if keep is not None else None
            got = hashed_frequencies(parts, type_, lambda d: writer.frequency_kind(d, non_null, mostly_distinct_ratio), out)
            if got is not None:
                distinct, kind, stored = got
                exact[name] = {"distinct_count": distinct, "frequencies": kind}
                if keep is not None and out:
                    keep[name] = out[0]
                # hashed: no two values of the parts share a hash (hashed_frequencies checked it)
                freq.append((name, kind, _frequency_rows(name, stored, parts if value_partitions else None, hashed=True)))
                continue
        merged = merge_counts(parts, type_)
        if keep is not None:
            keep[name] = merged
        exact[name], stored = exact_of_merged(merged, type_, non_null, mostly_distinct_ratio)
        kind = exact[name]["frequencies"]
        freq.append((name, kind, _frequency_rows(name, stored, parts if value_partitions else None)))
    return TaskResult(exact, time.process_time() - cpu0), freq, keep or {}


def write_table_counts(
    outs: list[TableCountsOut], columns: list[list[tuple[str, pa.DataType, int | None]]], *counts: dict[str, pa.Table]
) -> TaskResult[list[dict[str, Any]]]:
    """The reductions' merged counts as the table's counts files, one a reduction (one task for
    all: they are written while the table's frequencies are): ``{"path", "size", "checksum",
    "columns"}`` each, as the ``table_counts`` property names them (engine/stats/appendcounts.py)."""
    cpu0 = time.process_time()
    refs = []
    for out, cols, got in zip(outs, columns, counts, strict=True):
        named = [_Named(name, type_) for name, type_, _ in cols]
        written = partial_state.write_counts(out.uri, out.identity, out.rows, named, got, out.cfg, kind=TABLE_COUNTS_KIND)  # type: ignore[arg-type]
        refs.append({"path": out.path, "size": written.size, "checksum": written.checksum, "columns": [name for name, _, _ in cols]})
    return TaskResult(refs, time.process_time() - cpu0)


#: the kind of a table counts file (engine.files.partial_state.write_counts)
TABLE_COUNTS_KIND = "table_counts"


@dataclass(frozen=True)
class _Named:
    """What a counts file's metadata needs of a column."""

    name: str
    type: pa.DataType


def _frequency_rows(name: str, stored: pa.Table, parts: list[pa.Table] | None, hashed: bool = False) -> pa.Table:
    """A column's rows of the table file; with ``parts`` (partition value counts) each
    stored value's partition distribution too."""
    rows = writer.frequency_rows(name, stored)
    if parts is None:
        return rows
    return rows.append_column(valuepartitions.FIELD, valuepartitions.distributions(parts, stored["value"], hashed))


def write_table_frequencies(
    uri: str,
    identity: FileIdentity,
    order: list[str],
    *groups: list[tuple[str, str, pa.Table]],
    partitions: list[str] | None = None,
    stored_rows: dict[str, int] | None = None,
    full: list[str] | tuple[str, ...] = (),
) -> TaskResult[writer.WrittenFile]:
    """Returns the file's size and checksum, and the task's CPU. ``partitions``: the table's partition
    keys (in the order of the reductions' inputs) when the rows carry value partitions;
    ``stored_rows`` and ``full``: a delta segment's (writer.write_frequencies)."""
    cpu0 = time.process_time()
    pos = {n: i for i, n in enumerate(order)}
    per_column = sorted((f for g in groups for f in g), key=lambda f: pos[f[0]])
    written = writer.write_frequencies(uri, per_column, identity, partitions=partitions, stored_rows=stored_rows, full=full)
    return TaskResult(written, time.process_time() - cpu0)


def table_spec(leaf: LeafColumn, state: ColumnState, bins: int) -> HistogramSpec | None:
    """A histogrammed column's bins on the table's edges, from its merged state (None: no values)."""
    if mt.histogram_domain(leaf.type) == mt.HistogramDomain.FLOAT:
        if state.finite_range is None:
            return None
        return make_spec(leaf.type, state.finite_range[0], state.finite_range[1], bins)
    if state.minmax.min is None:
        return None
    return make_spec(leaf.type, to_domain(state.minmax.min), to_domain(state.minmax.max), bins)


# ---------------------------------------------------------------- batches: several partitions in one task
# engine/runtime/batching.py decides which partitions share a task. Each partition is
# still profiled, binned and written on its own (its files are the same as in a task of
# its own); a batch task returns one Ray object per kind for all of its partitions (a
# list, in the batch's order), so the driver submits and tracks objects per batch.

#: how often (seconds) a batch task asks whether its job was stopped (a GCS read each time)
STOP_CHECK_S = 0.5


class _StopCheck:
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


def profile_batch(job: JobContext, tasks: list[PartitionTask], groups: list[list[str]], discrete_only: bool = False) -> tuple[Any, ...]:
    """:func:`profile_partition` of each partition of a batch: their summaries (a
    :class:`SummaryBatch`, or with ``discrete_only`` the list of the first wave's, which
    only tasks read), one list per column group (each partition's value counts of the
    group), and the list of their phase-2 inputs (None each, the job was stopped)."""
    stop = _StopCheck(job)
    summaries: list[PartitionSummary] = []
    per_group: list[list[dict[str, pa.Table]]] = [[] for _ in groups]
    phase_two: list[PhaseTwoInputs] = []
    for task in tasks:
        if stop():
            return (None,) * (2 + len(groups))
        summary, *counts, inputs = _profile_one(job, task, groups, discrete_only)
        summaries.append(summary)
        for got, c in zip(per_group, counts, strict=True):
            got.append(c)
        phase_two.append(inputs)
    return (summaries if discrete_only else SummaryBatch.of(summaries, job.leaves, job.user), *per_group, phase_two)


def profile_rest_batch(
    job: JobContext,
    tasks: list[PartitionTask],
    firsts: list[PartitionSummary],
    first_rows: list[PhaseTwoInputs],
    guessed: dict[str, HistogramSpec | None] | None,
    *first_groups: list[dict[str, pa.Table]],
) -> tuple[SummaryBatch | None, list[PhaseTwoInputs] | None, list[Binned | None] | None]:
    """:func:`profile_rest` of each partition of a batch (the first wave's lists as :func:`profile_batch` returned them)."""
    stop = _StopCheck(job)
    summaries, inputs, binned = [], [], []
    for i, task in enumerate(tasks):
        if stop():
            return None, None, None
        s, p, b = _rest_one(job, task, firsts[i], first_rows[i], guessed, *(g[i] for g in first_groups))
        summaries.append(s)
        inputs.append(p)
        binned.append(b)
    return SummaryBatch.of(summaries, job.leaves, job.user), inputs, binned


def bin_batch(
    job: JobContext,
    tasks: list[PartitionTask],
    specs: dict[str, HistogramSpec | None],
    inputs: list[PhaseTwoInputs],
    partials: list[dict[str, writer.WrittenFile]],
) -> list[Binned] | None:
    """:func:`bin_partition` of each partition of a batch."""
    stop = _StopCheck(job)
    out = []
    for task, got, partial in zip(tasks, inputs, partials, strict=True):
        if stop():
            return None
        out.append(bin_partition(job, task, specs, got, partial))
    return out


@dataclass(frozen=True)
class Rebin:
    """The arguments of :func:`rebin_partition` for one inherited partition of a batch."""

    task: PartitionTask
    kept: dict[str, np.ndarray]
    statistics_uri: str
    histogram_bins: dict[str, int | None] | None
    statistics_checksum: str = ""
    #: the partition's value counts (its partial_counts.arrow and the checksum its statistics
    #: file recorded): a discrete column whose edges moved is re-binned from them, not read
    counts: tuple[str, str] | None = None


def _binned_from_counts(job: JobContext, specs: dict[str, HistogramSpec | None], r: Rebin) -> dict[str, np.ndarray]:
    """Bin counts of the discrete columns whose edges moved, from the partition's exact value counts
    (memory-mapped: cheaper than reading and decoding the column); {} if they cannot be read (the
    column is then read from the data, as before)."""
    if r.counts is None:
        return {}
    hist = {l.name for l in histogram_leaves(job.leaves, job.user)}
    discrete = [ColumnProfile(l.name, l.type, job.user) for l in job.leaves]
    discrete = [p for p in discrete if p.discrete]
    wanted = [p.name for p in discrete if p.name in hist and p.name not in r.kept and specs.get(p.name) is not None]
    if not wanted:
        return {}
    try:
        cfg = partial_state.config(job.options.mostly_distinct_ratio, job.user)
        counts = partial_state.read_counts(r.counts[0], discrete, cfg, r.counts[1])
    except MetastoreError:
        return {}
    out = {}
    for name in wanted:
        c = widen_counts(counts[name])
        spec = specs[name]
        assert spec is not None
        out[name] = spec.weighted_bin_counts(contiguous(c["value"]), c["count"].to_numpy()) if c.num_rows else np.zeros(spec.bins, np.int64)
    return out


def rebin_batch(job: JobContext, specs: dict[str, HistogramSpec | None], items: list[Rebin]) -> list[Binned] | None:
    """:func:`rebin_partition` of each inherited partition of a batch."""
    stop = _StopCheck(job)
    out = []
    for r in items:
        if stop():
            return None
        kept = {**r.kept, **_binned_from_counts(job, specs, r)}
        out.append(rebin_partition(job, r.task, specs, kept, r.statistics_uri, r.histogram_bins, r.statistics_checksum))
    return out


def reduce_batches(
    columns: list[tuple[str, pa.DataType, int | None]],
    mostly_distinct_ratio: float,
    order: list[tuple[int, int]],
    *batch_groups: list[dict[str, pa.Table]],
    value_partitions: bool = False,
    keep_counts: bool = False,
) -> tuple[TaskResult[dict[str, dict[str, Any]]], list[tuple[str, str, pa.Table]], dict[str, pa.Table]]:
    """:func:`reduce_counts` over batches' group objects: ``order`` names, for each partition
    of the table in its order, (which of ``batch_groups``, which position in it)."""
    groups = (batch_groups[b][i] for b, i in order)
    return reduce_counts(columns, mostly_distinct_ratio, *groups, value_partitions=value_partitions, keep_counts=keep_counts)


def guess_specs_batches(
    hist_leaves: list[LeafColumn], bins: int, *batches: list[PartitionSummary], enabled: bool = True
) -> dict[str, HistogramSpec | None] | None:
    """:func:`guess_specs` over the first waves' summaries, a list per batch."""
    return guess_specs(hist_leaves, bins, *(s for batch in batches for s in batch), enabled=enabled)


def unbatch(items: list[Any]) -> Any:
    """A batch's list as one Ray object per partition (the Redis strategy takes a partition's
    value counts as an object of their own): the items as a tuple, or the one item."""
    return items[0] if len(items) == 1 else tuple(items)


# ---------------------------------------------------------------- append re-analyze
@dataclass(frozen=True)
class AppendInputs:
    """What the append task reads besides the new partitions' counts (engine/stats/appendcounts.py)."""

    base: list[tuple[str, str, list[tuple[str, pa.DataType]]]]  # table counts files: (uri, checksum, their columns)
    earlier: list[Any]  # inheritance.InheritedPartition: the partitions appended since the base
    head_uri: str  # the newest segment of the table's frequencies (its head row groups)
    head_checksum: str
    distinct: dict[str, int]  # each column's exact table distinct count now (the catalog's)
    cfg: dict[str, Any]


@dataclass(frozen=True)
class AppendedTable:
    """The append task's result: per column, its exact statistics and its merged stored rows."""

    exact: dict[str, dict[str, Any]]
    stored_rows: dict[str, int]
    full: list[str]  # columns the segment holds in full (small, or their kind changed)


def _segment_heads(uri: str, expected_checksum: str, types: dict[str, pa.DataType]) -> dict[str, tuple[str, int, pa.Table]]:
    """{column: (kind, stored rows of the merged read, head as (value typed, count))} of a segment."""
    import pyarrow.parquet as pq

    pf = pq.ParquetFile(pa.BufferReader(checksum.read_checked(uri, expected_checksum)))
    kv = layout.decode_metadata(pf.metadata.metadata)
    index = json.loads(kv["metastore.frequencies"])
    merged_rows = json.loads(kv[layout.SEGMENT_KEY])["stored_rows"] if layout.SEGMENT_KEY in kv else {}
    out = {}
    for name, type_ in types.items():
        first, groups, rows, kind = index[name]
        if groups:
            t = pf.read_row_group(first, columns=["value", "frequency"])
            head = pa.table({"value": value_forms.decode(contiguous(t["value"]), type_), "count": contiguous(t["frequency"])})
        else:
            head = pa.table({"value": pa.array([], type_), "count": pa.array([], pa.int64())})
        out[name] = (kind, int(merged_rows.get(name, rows)), head)
    return out


def append_table(
    columns: list[tuple[str, pa.DataType]],
    mostly_distinct_ratio: float,
    inputs: AppendInputs,
    new: list[list[tuple[int, int]]],
    group_of: dict[str, int],
    *group_objects: list[dict[str, pa.Table]],
) -> tuple[TaskResult[AppendedTable | str], list[tuple[str, str, pa.Table]]]:
    """The table's discrete columns after an append, from their counts at the base, the earlier
    appends' and the new partitions' (``new``: per new partition, per column group, (which of
    ``group_objects``, position in it); a group object is a batch's list of per-partition counts
    by column; ``group_of``: each column's group). Returns the exact statistics and the delta segment's
    rows; or, when a file it reads is missing or damaged, why (a str: the job then reduces in full)."""
    from engine.runtime import inheritance
    from engine.stats import appendcounts

    cpu0 = time.process_time()
    types = dict(columns)
    base: dict[str, pa.Table] = {}
    try:
        for uri, expected, file_columns in inputs.base:
            named = [_Named(n, t) for n, t in file_columns]
            base.update(partial_state.read_counts(uri, named, inputs.cfg, expected, kind=TABLE_COUNTS_KIND, widen=False))  # type: ignore[arg-type]
        discrete = [_Named(n, t) for n, t in columns]
        earlier = []
        for inh in inputs.earlier:
            expected = inheritance.partial_state_checksums(inh).get(partial_state.PARTIAL_COUNTS_FILE, "")
            earlier.append(partial_state.read_counts(inh.counts_uri, discrete, inputs.cfg, expected, widen=False))  # type: ignore[arg-type]
        heads = _segment_heads(inputs.head_uri, inputs.head_checksum, types)
    except (MetastoreError, OSError, pa.ArrowException, KeyError, ValueError) as exc:  # the job reduces the table in full instead
        return TaskResult(f"{type(exc).__name__}: {exc}" if not isinstance(exc, MetastoreError) else str(exc), time.process_time() - cpu0), []
    exact: dict[str, dict[str, Any]] = {}
    stored: dict[str, int] = {}
    full: list[str] = []
    rows: list[tuple[str, str, pa.Table]] = []
    for name, type_ in columns:
        kind, stored_rows, head = heads[name]
        added = [widen_counts(group_objects[per_group[group_of[name]][0]][per_group[group_of[name]][1]][name]) for per_group in new]
        previous = appendcounts.Previous(inputs.distinct[name], kind, stored_rows, head)
        got = appendcounts.append(type_, base[name], [e[name] for e in earlier], added, previous, mostly_distinct_ratio)
        if got.full:
            full.append(name)
        exact[name] = got.exact
        stored[name] = got.stored_rows
        rows.append((name, got.exact["frequencies"], writer.frequency_rows(name, got.rows)))
    return TaskResult(AppendedTable(exact, stored, full), time.process_time() - cpu0), rows


def write_segment(
    uri: str, identity: FileIdentity, order: list[str], appended: TaskResult[AppendedTable | str], rows: list[tuple[str, str, pa.Table]]
) -> TaskResult[writer.WrittenFile | None]:
    """The delta segment of the table's frequencies (docs/FORMAT.md), columns in table order;
    nothing when the append task found it cannot append."""
    if not isinstance(appended.value, AppendedTable):
        return TaskResult(None, 0.0)
    return write_table_frequencies(uri, identity, order, rows, stored_rows=appended.value.stored_rows, full=appended.value.full)
