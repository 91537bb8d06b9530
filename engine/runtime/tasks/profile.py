"""Phase 1 task bodies: profile a partition (or a batch of them, in one or two waves), its
partial state and frequencies files, its part of the per-file column index.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from engine import fileio
from engine import types as mt
from engine.arrowcompute import contiguous
from engine.columns import LeafColumn
from engine.exceptions import InvalidArgumentError
from engine.fileindex import sources as fileindex_sources
from engine.fileindex import store as fileindex_store
from engine.fileindex.build import choose_bloom_columns, unindexed_partition
from engine.fileindex.store import StoredPart
from engine.files import layout, partial_state, writer
from engine.files.layout import FileIdentity
from engine.options import AnalyzeOptions
from engine.runtime.tasks.bins import bin_partition
from engine.runtime.tasks.values import (
    BinInput,
    Binned,
    JobContext,
    PartitionSummary,
    PartitionTask,
    PhaseTwoInputs,
    StopCheck,
    SummaryBatch,
    column_passes,
    column_profile,
    histogram_leaves,
    node_id,
    read_error,
)
from engine.sources.base import Partition, TableSource
from engine.stats import sortedvalues
from engine.stats.histograms import HistogramSpec
from engine.stats.profile import ColumnProfile, ColumnState
from engine.stats.user import UserStatistic
from engine.stats.valuecounts import counts_sorted, narrow_counts

log = logging.getLogger("engine.analyze")


@dataclass
class _Profiled:
    """What profiling a set of a partition's columns yields (inside one task)."""

    rows: int
    profiles: dict[str, ColumnProfile]
    states: dict[str, ColumnState]
    stat_rows: dict[str, dict[str, Any]]
    freq: list[tuple[str, str, pa.Table]]  # the partition's stored frequency rows of discrete columns
    counts: dict[str, pa.Table]  # exact value counts of the columns the table reduces (ColumnProfile.reduced)
    binnable: dict[str, BinInput]


def _profile_columns(
    source: TableSource, partition: Partition, leaves: list[LeafColumn], user: list[UserStatistic], options: AnalyzeOptions
) -> _Profiled:
    """Read ``leaves`` of one partition column-wise and profile each column in one update."""
    out = _Profiled(0, {}, {}, {}, [], {}, {})
    for group in column_passes(leaves, options.columns_per_pass):
        profiles = {l.name: column_profile(l.name, l.type, user) for l in group}
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
            raise read_error(partition, exc) from exc
        out.rows = n
        for leaf in group:
            # one update per column over the whole partition: one hash pass, no merges
            p = profiles[leaf.name]
            parts = chunks.pop(leaf.name)
            if any(mt.is_dictionary(c.type) for c in parts):
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
            if p.reduced:
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
        chosen = [b for b in bloom if b in names]
        index = fileindex_sources.index_partition(job.source, partition, columns=names, bloom_columns=chosen, bloom_fpr=options.bloom_fpr)
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


def profile_partition(job: JobContext, task: PartitionTask, groups: list[list[str]], discrete_only: bool = False) -> tuple[Any, ...]:
    """Phase 1: all statistics of one partition but its histograms.

    Returns the summary, followed (as separate Ray objects) by one dict of exact
    value counts per group of reduced columns (discrete ones, and numbers and times:
    ``ColumnProfile.reduced``), so each reduce task fetches
    only its own group, and last by phase 2's inputs (:class:`PhaseTwoInputs`): the
    statistics rows and the sorted distinct values and counts of every histogrammed
    column that took the sorted path, so phase 2 bins those without reading the
    partition again.

    ``discrete_only``: the first of two waves (see :func:`profile_rest`): only the
    reduced columns, whose value counts the table reductions wait for, and the
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
        leaves = [l for l in leaves if column_profile(l.name, l.type, user).reduced]
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
    # counts narrowed for the object store; consumers widen what they sum (valuecounts.merge_counts)
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
        return None, PhaseTwoInputs([]), None  # type: ignore[return-value]  # a stopped job: the caller drops the result unread
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
    got.profiles.update({l.name: column_profile(l.name, l.type, user) for l in leaves if l.name in first.states})
    got.states.update(first.states)
    got.stat_rows.update((r["column"], r) for r in first_rows.stat_rows)
    for g in first_groups:
        # kept narrowed: the partial state stores them narrowed, the binning inputs widen theirs
        got.counts.update(g)
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
        weights = c["count"].to_numpy()  # narrowed (the first wave's): widened only if not all 1
        n = int(weights.sum())
        out[name] = (t, sortedvalues.storage(values), None if len(values) == n else weights.astype(np.int64, copy=False))
    return out


def profile_batch(job: JobContext, tasks: list[PartitionTask], groups: list[list[str]], discrete_only: bool = False) -> tuple[Any, ...]:
    """:func:`profile_partition` of each partition of a batch: their summaries (a
    :class:`SummaryBatch`, or with ``discrete_only`` the list of the first wave's, which
    only tasks read), one list per column group (each partition's value counts of the
    group), and the list of their phase-2 inputs (None each, the job was stopped)."""
    stop = StopCheck(job)
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
    stop = StopCheck(job)
    summaries, inputs, binned = [], [], []
    for i, task in enumerate(tasks):
        if stop():
            return None, None, None
        s, p, b = _rest_one(job, task, firsts[i], first_rows[i], guessed, *(g[i] for g in first_groups))
        summaries.append(s)
        inputs.append(p)
        binned.append(b)
    return SummaryBatch.of(summaries, job.leaves, job.user), inputs, binned
