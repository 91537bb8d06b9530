"""The analyze job: one Ray task per partition, a reduction to table level, one atomic publish.

Data flow (the driver never holds table data, only small partial states)::

    plan                             which partitions are unchanged since the catalog's
                                     state (engine/runtime/inheritance.py)
    phase 1  wave 1 x P              profile_partition(discrete_only): the discrete columns;
                                     the partition's frequencies.parquet; their exact value
                                     counts into the object store; footer ranges of the
                                     histogrammed columns
             guess_specs             after every wave 1 (a barrier): histogram edges guessed
                                     from the footer ranges
             wave 2 x P              profile_rest: the other columns, the partition's partial
                                     state (engine/files/partial_state.py); with a guess, also
                                     its phase 2 (bins, histograms and statistics files)
             (one profile_partition per partition when either side has no column)
             load_partition x I      unchanged partitions: the same from their stored
                                     partial state, without reading data
    reduce   reduce_counts x G       exact table frequencies, distinct counts and
                                     percentiles of discrete columns (G column groups);
                                     submitted before wave 2, so they run during it
    driver                           merge partial states -> table ranges -> bin specs;
                                     a guess is kept only if it equals them
    phase 2  bin_partition x P       without a right guess: bin histogrammed columns on the
                                     table edges (from phase 1's sorted values; reads only
                                     columns without), write the partition's
                                     histograms.parquet and statistics.parquet
             rebin_partition         inherited partitions whose table edges moved
                                     (the others keep their histograms)
    write    write_frequencies       the table's frequencies.parquet
    driver                           table statistics.parquet and histograms.parquet,
                                     manifest, then one catalog transaction (atomic)
"""
from __future__ import annotations

import base64
import logging
import math
import time
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import ray

from engine import fileio
from engine import types as mt
from engine.columns import LeafColumn
from engine.exceptions import AnalyzeError, MetastoreError, UnsupportedOptionsError
from engine.files import layout, partial_state, writer
from engine.files.layout import FileIdentity
from engine.sources.base import Partition, TableSource
from engine.stats.histograms import HistogramSpec, make_spec, to_domain
from engine.stats import sortedvalues, stringsort, valuepartitions
from engine.stats.profile import ColumnProfile, ColumnState
from engine.stats.user import UserStatistic
from engine.stats.valuecounts import (
    counts_hashed,
    counts_sorted,
    hashed_frequencies,
    exact_percentiles,
    frequency_order,
    merge_counts,
    narrow_counts,
    selected_percentiles,
    widen_counts,
)
from engine.frequencies.plan import FrequencySettings
from engine.runtime import abort, frequency_strategy
from engine.runtime import inheritance
from engine.runtime.ray_runtime import environment_for_tasks
from engine.files.writer import MIN_DUPLICATES_ONLY  # noqa: F401 - re-exported (tests read it here)
from engine.store import Store

ProgressCallback = Callable[[str, int, int], None]
#: a histogrammed column as phase 1 saw it: work type, sorted distinct values in
#: storage form, and their counts (None: every value once)
BinInput = tuple[pa.DataType, np.ndarray, "np.ndarray | None"]
log = logging.getLogger("engine.analyze")


@dataclass(frozen=True)
class AnalyzeOptions:
    bins: int = 1000  # requested bins per histogram
    #: a table-level column with distinct/non-null >= this ratio stores only duplicates
    mostly_distinct_ratio: float = 0.5
    batch_size: int = 128 * 1024
    #: top-level columns read per pass over a partition (bounds task memory)
    columns_per_pass: int = 64
    #: how table-level frequencies are consolidated: "reduce" (Ray tasks) or "redis"
    #: (the Bloom/Redis algorithm, engine.frequencies); see engine/runtime/frequency_strategy.py
    frequencies: str = "reduce"
    #: an existing Redis for the "redis" strategy (None: the coordinator starts its own)
    redis_url: str | None = None
    frequency_settings: FrequencySettings = field(default_factory=FrequencySettings)
    #: keep the statistics of partitions unchanged since the last analyze (docs/CATALOG.md)
    inherit: bool = True
    #: profile the discrete columns of every partition first, the other columns in a second
    #: wave, so the table reductions overlap the second wave (False: one task per partition)
    two_waves: bool = True
    #: table-level frequencies also keep each stored value's distribution over the partitions
    #: (engine/stats/valuepartitions.py, docs/FREQUENCIES.md); "reduce" strategy only
    value_partitions: bool = False

    def __post_init__(self) -> None:
        if self.value_partitions and self.frequencies != "reduce":
            raise UnsupportedOptionsError(
                f"value partitions (--value-partitions) need the 'reduce' frequency strategy, not {self.frequencies!r}: "
                "the Redis strategy does not keep per-partition counts (docs/FREQUENCIES.md)"
            )


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


@dataclass
class PartitionSummary:
    key: str
    rows: int
    states: dict[str, ColumnState]
    stat_rows: list[dict[str, Any]]
    cpu_s: float = 0.0  # CPU seconds the task used (process time: comparable under load)
    #: the first wave's guess of the histogrammed columns' ranges, from metadata
    #: (TableSource.column_bounds); None: not asked
    bounds: dict[str, tuple[pa.Scalar, pa.Scalar] | None] | None = None
    #: checksums (#21): file name -> size and checksum of the files this partition's phase-1 tasks wrote
    files: dict[str, writer.WrittenFile] = field(default_factory=dict)


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
                column = pa.chunked_array(parts, type=leaf.type).combine_chunks() if parts else pa.array([], leaf.type)
                state, row, counts, view = p.profile_column_view(column)
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
) -> None:
    if not partial_state.unserializable(user):  # what a later job loads instead of profiling again
        cfg = partial_state.config(options.mostly_distinct_ratio, user)
        partial_state.write(out_uri, identity, got.rows, [got.profiles[l.name] for l in leaves], got.states, got.counts, user, cfg)


def _summary(partition: Partition, leaves: list[LeafColumn], got: _Profiled, cpu_s: float) -> PartitionSummary:
    return PartitionSummary(partition.key, got.rows, got.states, [got.stat_rows[l.name] for l in leaves if l.name in got.stat_rows], cpu_s)


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


def profile_partition(
    job: JobContext, partition: Partition, out_uri: str, identity: FileIdentity, groups: list[list[str]], discrete_only: bool = False
) -> tuple[Any, ...]:
    """Phase 1: all statistics of one partition but its histograms.

    Returns the summary, followed (as separate Ray objects) by one dict of exact
    value counts per group of discrete columns, so each reduce task fetches
    only its own group, and last by the binning inputs of phase 2: the sorted
    distinct values and counts of every histogrammed column that took the sorted
    path, so phase 2 bins those without reading the partition again.

    ``discrete_only``: the first of two waves (see :func:`profile_rest`): only the
    discrete columns, whose value counts the table reductions wait for, and the
    partition's frequencies.parquet (which holds only those); the summary is
    partial, no partial state is written, and no binning inputs are returned (the
    second wave rebuilds them from the value counts: :func:`bin_inputs_of_counts`).
    """
    if job.stopped():  # the job failed elsewhere before this task started
        return (None,) * (2 + len(groups))
    source, leaves, user, options = job.source, job.leaves, job.user, job.options
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
    if not discrete_only:
        _write_partial_state(out_uri, identity, leaves, user, options, got)
    summary = _summary(partition, leaves, got, time.process_time() - cpu0)
    summary.bounds = bounds
    summary.files = {layout.FREQUENCIES_FILE: written}  # checksums (#21)
    # counts narrowed for the object store; every consumer widens them (valuecounts.widen_counts)
    return (summary, *({c: narrow_counts(got.counts[c]) for c in g} for g in groups), {} if discrete_only else got.binnable)


def profile_rest(
    job: JobContext,
    partition: Partition,
    out_uri: str,
    identity: FileIdentity,
    first: PartitionSummary,
    guessed: dict[str, HistogramSpec | None] | None,
    *first_groups: dict[str, pa.Table],
) -> tuple[PartitionSummary, dict[str, BinInput], dict[str, np.ndarray] | None]:
    """Phase 1, second wave: the columns the first wave (``discrete_only``) left.

    Splitting phase 1 lets the table reductions of the discrete columns (the
    longest is a mostly distinct string column's) run while this wave profiles
    the other columns, instead of after the whole phase. Combines both waves
    into the partition's summary and writes its partial state.

    ``guessed``: histogram specs the driver derived from every partition's
    metadata bounds (see :func:`guess_specs`), or None. With them this task also
    does phase 2 for its partition (bins, histograms.parquet, statistics.parquet),
    and returns the bin counts; phase 2 then runs only if the guess proves wrong,
    and reads the histogrammed columns again: the binning inputs are returned only
    without a guess (copying them into the object store cost ~12 ms a task for a
    phase 2 that rarely runs).
    """
    if job.stopped():
        return None, {}, None  # type: ignore[return-value]
    source, leaves, user, options = job.source, job.leaves, job.user, job.options
    cpu0 = time.process_time()
    got = _profile_columns(source, partition, [l for l in leaves if l.name not in first.states], user, options)
    got.profiles.update({l.name: ColumnProfile(l.name, l.type, user) for l in leaves if l.name in first.states})
    got.states.update(first.states)
    got.stat_rows.update((r["column"], r) for r in first.stat_rows)
    for g in first_groups:
        got.counts.update((c, widen_counts(t)) for c, t in g.items())
    got.binnable.update(bin_inputs_of_counts({l.name: got.counts[l.name] for l in histogram_leaves(leaves, user) if l.name in first.states}))
    got.rows = first.rows
    _write_partial_state(out_uri, identity, leaves, user, options, got)
    summary = _summary(partition, leaves, got, first.cpu_s + time.process_time() - cpu0)
    summary.files = dict(first.files)  # checksums (#21)
    if guessed is None:
        return summary, got.binnable, None
    counts = bin_partition(
        source, partition, histogram_leaves(leaves, user), guessed, [dict(r) for r in summary.stat_rows], user, options,
        out_uri, identity, got.binnable,
    )
    return summary, {}, counts


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
        values = c["value"].combine_chunks()
        weights = c["count"].to_numpy().astype(np.int64, copy=False)
        n = int(weights.sum())
        out[name] = (t, sortedvalues.storage(values), None if len(values) == n else weights)
    return out


def guess_specs(
    hist_leaves: list[LeafColumn], bins: int, *firsts: PartitionSummary, enabled: bool = True
) -> dict[str, HistogramSpec | None] | None:
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
    source: TableSource,
    partition: Partition,
    hist_leaves: list[LeafColumn],
    specs: dict[str, HistogramSpec | None],
    stat_rows: list[dict[str, Any]],
    user: list[UserStatistic],
    options: AnalyzeOptions,
    out_uri: str,
    identity: FileIdentity,
    binnable: dict[str, BinInput] | None = None,
) -> dict[str, np.ndarray]:
    """Phase 2: histograms on the table's edges; then the partition's statistics file."""
    cpu0 = time.process_time()
    counts = _bin_counts(source, partition, hist_leaves, specs, options, binnable)
    hist_file = writer.write_histograms(
        fileio.join(out_uri, layout.HISTOGRAMS_FILE),
        [(l.name, l.type, specs[l.name], counts.get(l.name)) for l in hist_leaves],
        identity,
    )
    for row in stat_rows:
        spec = specs.get(row["column"])
        row["histogram_bins"] = spec.bins if spec else None
    stat_file = writer.write_statistics(fileio.join(out_uri, layout.STATISTICS_FILE), stat_rows, user, identity)
    counts["__cpu_s__"] = time.process_time() - cpu0
    counts[_FILES] = {layout.HISTOGRAMS_FILE: hist_file, layout.STATISTICS_FILE: stat_file}  # checksums (#21)
    return counts


def rebin_partition(
    source: TableSource,
    partition: Partition,
    hist_leaves: list[LeafColumn],
    specs: dict[str, HistogramSpec | None],
    kept: dict[str, np.ndarray],
    options: AnalyzeOptions,
    out_uri: str,
    identity: FileIdentity,
    statistics_uri: str,
    histogram_bins: dict[str, int | None] | None,
    statistics_checksum: str = "",
) -> dict[str, np.ndarray]:
    """Phase 2 of an inherited partition whose table edges moved.

    Only the columns whose edges moved are read and binned again; ``kept`` holds the
    inherited counts of the others. The partition's statistics.parquet is rewritten
    (from the inherited one) only when a column's ``histogram_bins`` changes
    (``histogram_bins`` not None); its other files stay where they are.
    """
    cpu0 = time.process_time()
    counts = _bin_counts(source, partition, [l for l in hist_leaves if l.name not in kept], specs, options)
    counts.update(kept)
    files = {}  # checksums (#21)
    files[layout.HISTOGRAMS_FILE] = writer.write_histograms(
        fileio.join(out_uri, layout.HISTOGRAMS_FILE),
        [(l.name, l.type, specs[l.name], counts.get(l.name)) for l in hist_leaves],
        identity,
    )
    if histogram_bins is not None:
        files[layout.STATISTICS_FILE] = writer.rewrite_histogram_bins(
            statistics_uri, fileio.join(out_uri, layout.STATISTICS_FILE), histogram_bins, identity, statistics_checksum
        )
    counts["__cpu_s__"] = time.process_time() - cpu0
    counts[_FILES] = files
    return counts


def reduce_counts(
    columns: list[tuple[str, pa.DataType, int | None]],
    mostly_distinct_ratio: float,
    *partition_groups: dict[str, pa.Table],
    value_partitions: bool = False,
) -> tuple[dict[str, dict[str, Any]], list[tuple[str, str, pa.Table]]]:
    """Exact table-level value counts of a group of discrete columns.

    ``columns``: (name, type, non-null count at table level, or None: the sum of
    the counts, which cover every non-null value of a discrete column). Returns
    the exact statistics per column and its frequency rows for the table file.
    ``partition_groups`` are in the table's partition order; with ``value_partitions``
    the rows also carry each stored value's distribution over them.
    """
    cpu0 = time.process_time()
    exact: dict[str, dict[str, Any]] = {}
    freq: list[tuple[str, str, pa.Table]] = []
    for name, type_, non_null in columns:
        parts = [widen_counts(g[name]) for g in partition_groups]
        if non_null is None:
            non_null = sum(int(pc.sum(p["count"]).as_py() or 0) for p in parts)
        if stringsort.supports(type_) and all(counts_hashed(p) for p in parts):
            # strings counted in hash order: merged and stored without copying the column
            got = hashed_frequencies(parts, type_, lambda d: writer.frequency_kind(d, non_null, mostly_distinct_ratio))
            if got is not None:
                distinct, kind, stored = got
                exact[name] = {"distinct_count": distinct, "frequencies": kind}
                # hashed: no two values of the parts share a hash (hashed_frequencies checked it)
                freq.append((name, kind, _frequency_rows(name, stored, parts if value_partitions else None, hashed=True)))
                continue
        merged = merge_counts(parts, type_)
        stats: dict[str, Any] = {"distinct_count": merged.num_rows}
        if mt.has_percentiles(type_):
            if merged.num_rows == non_null and not counts_sorted(merged) and not pa.types.is_decimal(type_):
                stats.update(selected_percentiles(merged["value"].combine_chunks()))  # all distinct: no sort
            else:
                stats.update(exact_percentiles(merged))
        kind, stored = writer.stored_frequencies(merged, non_null, mostly_distinct_ratio)
        stats["frequencies"] = kind
        exact[name] = stats
        freq.append((name, kind, _frequency_rows(name, stored, parts if value_partitions else None)))
    exact["__cpu_s__"] = {"cpu_s": time.process_time() - cpu0}
    return exact, freq


def _frequency_rows(name: str, stored: pa.Table, parts: list[pa.Table] | None, hashed: bool = False) -> pa.Table:
    """A column's rows of the table file; with ``parts`` (partition value counts) each
    stored value's partition distribution too."""
    rows = writer.frequency_rows(name, stored)
    if parts is None:
        return rows
    return rows.append_column(valuepartitions.FIELD, valuepartitions.distributions(parts, stored["value"], hashed))


def write_table_frequencies(
    uri: str, identity: FileIdentity, order: list[str], *groups: list[tuple[str, str, pa.Table]], partitions: list[str] | None = None
) -> writer.WrittenFile:
    """``partitions``: the table's partition keys (in the order of the reductions'
    inputs) when the rows carry value partitions."""
    pos = {n: i for i, n in enumerate(order)}
    per_column = sorted((f for g in groups for f in g), key=lambda f: pos[f[0]])
    return writer.write_frequencies(uri, per_column, identity, partitions=partitions)  # checksums (#21): was the row count


#: checksums (#21): the key of a phase-2 result holding {file name: WrittenFile} of the files it wrote
_FILES = "__files__"

_profile_task = ray.remote(profile_partition)
_rest_task = ray.remote(profile_rest)


_guess_task = ray.remote(guess_specs)
_bin_task = ray.remote(bin_partition)
_rebin_task = ray.remote(rebin_partition)
_load_task = ray.remote(inheritance.load_partition)
_reduce_task = ray.remote(reduce_counts)
_write_freq_task = ray.remote(write_table_frequencies)

#: Environment variables a driver forwards to its tasks: object-store settings
#: (endpoint, region, credentials) must reach workers that were started before
#: the driver set them, or on other nodes of a cluster.
_FORWARDED_ENV_PREFIXES = ("AWS_",)


def _task_options(**options: Any) -> dict[str, Any]:
    env = environment_for_tasks(_FORWARDED_ENV_PREFIXES)
    if env:
        options["runtime_env"] = {"env_vars": env}
    return options


# ---------------------------------------------------------------- driver
def _wait_all(refs: list[Any], phase: str, progress: ProgressCallback | None) -> list[Any]:
    """ray.get with progress; a failing task fails the job with its own message."""
    pending = list(refs)
    results: dict[Any, Any] = {}
    if progress:
        progress(phase, 0, len(refs))
    while pending:
        ready, pending = ray.wait(pending, num_returns=1, timeout=None)
        for r in ready:
            results[r] = ray.get(r)  # raises early on failure; fetched (and deserialized) once
        if progress:
            progress(phase, len(results), len(refs))
    return [results[r] for r in refs]


def _unwrap(exc: Exception) -> Exception:
    """The user's error inside a Ray task error."""
    cause = getattr(exc, "cause", None)
    while isinstance(cause, ray.exceptions.RayTaskError):
        cause = getattr(cause, "cause", None)
    return cause if isinstance(cause, Exception) else exc


def run(
    source: TableSource,
    store: Store,
    leaves: list[LeafColumn],
    user: list[UserStatistic],
    options: AnalyzeOptions,
    progress: ProgressCallback | None = None,
) -> AnalyzeResult:
    started = time.perf_counter()
    timings: dict[str, float] = {}
    table = source.name
    from engine.store import new_job_id, partition_dirname

    job_id = new_job_id()
    snapshot = source.snapshot_id()
    created = FileIdentity.now()
    partitions = source.partitions()
    by_key = {p.key: p for p in partitions}
    t0 = time.perf_counter()
    plan = inheritance.plan(source, store.root, table, leaves, user, options.mostly_distinct_ratio, enabled=options.inherit)
    timings["plan_s"] = time.perf_counter() - t0
    counters = inheritance.Counters(reasons=dict(plan.reasons))
    # a cheap, explicit reference for every task instead of re-pickling per call
    source_ref = ray.put(source)
    leaves_ref = ray.put(leaves)
    user_ref = ray.put(user)
    context_ref = ray.put(JobContext(source, leaves, user, options, job_id))

    def identity(level: str, key: str) -> FileIdentity:
        return FileIdentity(table, source.uri, level, key, snapshot, job_id, created)

    def run_rel(key: str, name: str) -> str:  # a file of this job, relative to the table directory
        return f"runs/{job_id}/partitions/{partition_dirname(key)}/{name}"

    probes = {l.name: ColumnProfile(l.name, l.type, user) for l in leaves}
    discrete = [l.name for l in leaves if probes[l.name].discrete]
    n_groups = min(len(discrete), 16)
    # strings and binary first: their reductions are the longest (a mostly distinct string
    # column is the job's critical path), and Ray starts ready tasks in submission order
    heavy_first = sorted(discrete, key=lambda n: not stringsort.supports(probes[n].type))
    groups = [heavy_first[i::n_groups] for i in range(n_groups)] if n_groups else []
    p1: dict[str, list[Any]] = {}  # key -> refs of the partition's phase 1 (profile or load): summary, then one per group
    launched: list[Any] = []  # every task ref, to cancel on failure
    p2: list[Any] = []
    reduce_refs: list[Any] = []
    freq_ref = None
    frequencies_report: dict[str, Any] = {}

    # two waves when there is something on each side: the reductions wait only for the first
    two_waves = options.two_waves and 0 < len(discrete) < len(leaves)
    first_wave: dict[str, list[Any]] = {}  # key -> refs of a partition's first wave, until its second is submitted
    guess_ref = None  # the histogram specs guessed from metadata (guess_specs)
    guessed_counts: dict[str, Any] = {}  # key -> the bin counts of a second wave on the guessed specs
    wave1_summaries: dict[str, Any] = {}  # key -> the (partial) summary of a partition's first wave

    def profile(part: Partition) -> list[Any]:
        out = store.partition_uri(table, job_id, part.key)
        refs = _profile_task.options(**_task_options(num_returns=2 + len(groups))).remote(
            context_ref, part, out, identity("partition", part.key), groups, two_waves
        )
        launched.extend(refs)
        if two_waves:
            first_wave[part.key] = refs
            wave1_summaries[part.key] = refs[0]
        return refs

    def profile_second_waves() -> None:
        """Second waves start when every first wave has ended (a barrier), after the
        reductions were submitted: Ray would otherwise run a partition's second wave
        as soon as its first ends, ahead of other partitions' first waves, and the
        reductions could start only at the end of phase 1."""
        nonlocal guess_ref
        if not first_wave:
            return
        # the guess needs every partition's bounds: with inherited partitions, no guess
        guess_ref = _guess_task.options(**_task_options()).remote(
            histogram_leaves(leaves, user), options.bins, *[refs[0] for refs in first_wave.values()], enabled=not loaded
        )
        launched.append(guess_ref)
        for key, refs in first_wave.items():
            out = store.partition_uri(table, job_id, key)
            summary, binnable, counts = _rest_task.options(**_task_options(num_returns=3)).remote(
                context_ref, by_key[key], out, identity("partition", key), refs[0], guess_ref, *refs[1:-1]
            )
            launched.extend((summary, binnable, counts))
            p1[key] = [summary, *refs[1:-1], binnable]
            guessed_counts[key] = counts
        first_wave.clear()

    try:
        # ---- phase 1: profile changed partitions, load the partial states of unchanged ones
        t0 = time.perf_counter()
        loads: dict[str, list[Any]] = {}
        # largest first: the last of the profile tasks are then the small ones, so the
        # cores finish phase 1 together (longest-processing-time-first scheduling)
        for part in sorted(partitions, key=lambda p: -p.size):
            inh = plan.inherited.get(part.key)
            if inh is None:
                p1[part.key] = profile(part)
                continue
            refs = _load_task.options(**_task_options(num_returns=1 + len(groups))).remote(inh, leaves_ref, user_ref, plan.config, groups)
            loads[part.key] = refs if groups else [refs]
            launched.extend(loads[part.key])
        loaded: dict[str, inheritance.LoadedPartition] = {}
        for key, res in zip(loads, _wait_all([r[0] for r in loads.values()], "inherit", progress) if loads else []):
            if isinstance(res, inheritance.LoadFailure):
                message = f"partition {key or '(unpartitioned)'}: cannot inherit its statistics, recomputing it: {res.message}"
                log.warning("%s", message)
                counters.warnings.append(message)
                counters.reasons[key] = f"partial state unusable: {res.message}"
                p1[key] = profile(by_key[key])
            else:
                loaded[key] = res
                p1[key] = loads[key]
        # every partition's phase-1 objects exist now (as refs): the reductions go in
        # before the wait, so each starts as soon as its inputs are ready, ahead of phase 2
        via_redis: list[str] = []
        if options.frequencies == "redis" and discrete:
            via_redis = frequency_strategy.redis_columns(discrete, {l.name: probes[l.name].type for l in leaves})
        for g_index, group in enumerate(groups):
            cols = [(name, probes[name].type, None) for name in group if name not in via_redis]
            if not cols:
                continue
            group_objs = [p1[part.key][1 + g_index] for part in partitions]
            reduce_refs.append(
                _reduce_task.options(**_task_options(num_returns=2)).remote(
                    cols, options.mostly_distinct_ratio, *group_objs, value_partitions=options.value_partitions
                )
            )
            launched.extend(reduce_refs[-1])
        table_uri = store.table_level_uri(table, job_id)

        def write_frequencies(more: list[tuple[str, str, pa.Table]]) -> Any:
            ref = _write_freq_task.options(**_task_options()).remote(
                fileio.join(table_uri, layout.FREQUENCIES_FILE),
                identity("table", ""),
                [l.name for l in leaves],
                more,
                *[r[1] for r in reduce_refs],
                partitions=[p.key for p in partitions] if options.value_partitions else None,
            )
            launched.append(ref)
            return ref

        if not via_redis:  # written as soon as the reductions end, while phase 1 or 2 goes on
            freq_ref = write_frequencies([])
        profile_second_waves()
        profiled = [p.key for p in partitions if p.key not in loaded]
        # the progress bar counts both waves' tasks (with two waves, half of phase 1 is the first)
        firsts = [wave1_summaries[k] for k in profiled if k in wave1_summaries]
        computed = dict(zip(profiled, _wait_all(firsts + [p1[k][0] for k in profiled], "profile", progress)[len(firsts) :]))
        summaries: list[PartitionSummary] = [
            computed[p.key] if p.key in computed else PartitionSummary(p.key, loaded[p.key].rows, loaded[p.key].states, [], loaded[p.key].cpu_s)
            for p in partitions
        ]
        counters.inherited, counters.recomputed = len(loaded), len(profiled)
        counters.reasons = {k: v for k, v in counters.reasons.items() if k in computed}
        timings["phase1_s"] = time.perf_counter() - t0

        # ---- merge partial states on the driver (small), in partition order whether profiled or inherited
        t0 = time.perf_counter()
        merged: dict[str, ColumnState] = {}
        for leaf in leaves:
            p = probes[leaf.name]
            merged[leaf.name] = p.merge_all(s.states[leaf.name] for s in summaries) if summaries else p.zero()
        specs: dict[str, HistogramSpec | None] = {}
        hist_leaves = [l for l in leaves if probes[l.name].unsupported is None and mt.histogram_domain(l.type)]
        for leaf in hist_leaves:
            specs[leaf.name] = _spec(leaf, merged[leaf.name], options.bins)
        timings["merge_s"] = time.perf_counter() - t0

        t0 = time.perf_counter()

        # ---- phase 2: bin profiled partitions; inherited ones keep their histograms unless the edges moved
        hist_ref = ray.put(hist_leaves)
        specs_ref = ray.put(specs)
        files: dict[str, dict[str, Any]] = {}  # inherited partitions: file name -> {"path", "size"}
        phase2: dict[str, Any] = {}  # key -> task ref or the inherited bin counts
        new_bins = {name: (spec.bins if spec else None) for name, spec in specs.items()}
        # the second waves binned on edges guessed from metadata: right, or phase 2 does it again
        guessed = ray.get(guess_ref) if guess_ref is not None else None
        guessed_ok = guessed is not None and same_specs(specs, guessed)
        if guessed is not None and not guessed_ok:
            log.info("histogram edges guessed from metadata were wrong; binning again")
        for part, summary in zip(partitions, summaries):
            out = store.partition_uri(table, job_id, part.key)
            ident = identity("partition", part.key)
            if guessed_ok and part.key in guessed_counts:
                phase2[part.key] = guessed_counts[part.key]
                p2.append(phase2[part.key])
                continue
            if part.key not in loaded:
                phase2[part.key] = _bin_task.options(**_task_options()).remote(
                    source_ref, part, hist_ref, specs_ref, summary.stat_rows, user_ref, options, out, ident, p1[part.key][-1]
                )
                p2.append(phase2[part.key])
                continue
            got, inh = loaded[part.key], plan.inherited[part.key]
            files[part.key] = dict(inh.files)
            if inheritance.same_histograms(got.histogram_specs, specs):
                phase2[part.key] = dict(got.histogram_counts)
                continue
            counters.rebinned += 1
            rewrite = new_bins if inheritance.stored_bins(got.histogram_specs) != new_bins else None
            kept = inheritance.unchanged_counts(got, specs)
            phase2[part.key] = _rebin_task.options(**_task_options()).remote(
                source_ref, part, hist_ref, specs_ref, kept, options, out, ident, inh.statistics_uri, rewrite,
                inh.files.get(layout.STATISTICS_FILE, {}).get("checksum", ""),  # checksums (#21)
            )
            p2.append(phase2[part.key])
            files[part.key][layout.HISTOGRAMS_FILE] = {"path": run_rel(part.key, layout.HISTOGRAMS_FILE), "size": None}
            if rewrite is not None:
                files[part.key][layout.STATISTICS_FILE] = {"path": run_rel(part.key, layout.STATISTICS_FILE), "size": None}
        redis_exact: dict[str, dict[str, Any]] = {}
        redis_freq: list[tuple[str, str, pa.Table]] = []
        if via_redis:
            # consolidates while the phase-2 tasks bin; its inputs are the phase-1 objects (profiled or inherited)
            t1 = time.perf_counter()
            group_of = {name: gi for gi, g in enumerate(groups) for name in g}
            redis_exact, redis_freq, frequencies_report = frequency_strategy.run(
                via_redis,
                {l.name: probes[l.name].type for l in leaves},
                {l.name: i for i, l in enumerate(leaves)},
                {name: [p1[part.key][1 + group_of[name]] for part in partitions] for name in via_redis},
                job_id,
                options.mostly_distinct_ratio,
                options.frequency_settings,
                options.redis_url,
                progress,
            )
            timings["redis_frequencies_s"] = time.perf_counter() - t1
        if freq_ref is None:
            freq_ref = write_frequencies(redis_freq)
        binned = dict(zip([k for k, v in phase2.items() if not isinstance(v, dict)], _wait_all(p2, "histograms", progress)))
        written2 = {k: binned[k].pop(_FILES, {}) for k in binned}  # checksums (#21)
        bin_counts = [binned[p.key] if p.key in binned else phase2[p.key] for p in partitions]
        timings["phase2_s"] = time.perf_counter() - t0

        t0 = time.perf_counter()
        exact: dict[str, dict[str, Any]] = dict(redis_exact)
        reduce_cpu = 0.0
        for e in ray.get([r[0] for r in reduce_refs]):
            reduce_cpu += e.pop("__cpu_s__")["cpu_s"]
            exact.update(e)
        timings["cpu_profile_s"] = sum(computed[k].cpu_s for k in computed)
        timings["cpu_inherit_s"] = sum(l.cpu_s for l in loaded.values())
        timings["cpu_histograms_s"] = sum(binned[k].pop("__cpu_s__") for k in binned)
        timings["cpu_reduce_s"] = reduce_cpu
        timings["cpu_s"] = timings["cpu_profile_s"] + timings["cpu_inherit_s"] + timings["cpu_histograms_s"] + reduce_cpu
        table_freq_file = ray.get(freq_ref)
        timings["reduce_wait_s"] = time.perf_counter() - t0

        # ---- table level files
        t0 = time.perf_counter()
        rows = []
        for leaf in leaves:
            p = probes[leaf.name]
            row = p.finalize_table(merged[leaf.name], exact.get(leaf.name) if p.discrete else None)
            if p.discrete:
                row["frequencies"] = exact[leaf.name]["frequencies"]
            spec = specs.get(leaf.name)
            row["histogram_bins"] = spec.bins if spec else None
            rows.append(row)
        table_counts = {
            l.name: (np.sum([c[l.name] for c in bin_counts], axis=0) if bin_counts else np.zeros(specs[l.name].bins, np.int64))
            for l in hist_leaves
            if specs[l.name]
        }
        table_written = {  # checksums (#21)
            layout.STATISTICS_FILE: writer.write_statistics(fileio.join(table_uri, layout.STATISTICS_FILE), rows, user, identity("table", "")),
            layout.HISTOGRAMS_FILE: writer.write_histograms(
                fileio.join(table_uri, layout.HISTOGRAMS_FILE),
                [(l.name, l.type, specs[l.name], table_counts.get(l.name)) for l in hist_leaves],
                identity("table", ""),
            ),
            layout.FREQUENCIES_FILE: table_freq_file,
        }
        total_rows = sum(s.rows for s in summaries)
        manifest_partitions = []
        for s in summaries:
            entry: dict[str, Any] = {"key": s.key, "rows": s.rows, "data_fingerprint": plan.fingerprints.get(s.key, "")}
            if s.key in loaded:
                inh = plan.inherited[s.key]
                for name, wf in written2.get(s.key, {}).items():  # checksums (#21): the re-binned files
                    files[s.key][name] = wf.ref(run_rel(s.key, name))
                rebinned = files[s.key] != inh.files
                entry.update(
                    files=files[s.key],
                    # kept as they are: the catalog's entry carries over; re-binned: a new entry naming old and new files
                    inherited=not rebinned,
                    job_id=inh.job_id if not rebinned else job_id,
                    snapshot=inh.snapshot if not rebinned else snapshot,
                )
            else:  # checksums (#21): the three files this job wrote, with their sizes and checksums
                written = {**s.files, **written2.get(s.key, {})}
                if set(written) == set(layout.FILES):
                    entry["files"] = {name: wf.ref(run_rel(s.key, name)) for name, wf in written.items()}
            manifest_partitions.append(entry)
        manifest = {
            "format_version": layout.FORMAT_VERSION,
            "table": table,
            "table_uri": source.uri,
            "snapshot": snapshot,
            "job_id": job_id,
            "created_at": created,
            "rows": total_rows,
            "bins": options.bins,
            "columns": inheritance.manifest_columns(leaves),
            "schema": base64.b64encode(pa.schema([(l.name, l.type) for l in leaves]).serialize().to_pybytes()).decode(),
            "partitions": manifest_partitions,
            "user_statistics": [u.name for u in user],
            # checksums (#21): the table-level files with their sizes and checksums
            "table_file_refs": {name: wf.ref(f"runs/{job_id}/table/{name}") for name, wf in table_written.items()},
        }
        if plan.write_partial_state:
            manifest[inheritance.CONFIG_PROPERTY] = plan.config
        store.publish(table, job_id, manifest)
        timings["table_files_s"] = time.perf_counter() - t0
    except BaseException as exc:
        # stop every task of this job before deleting its run directory, or a
        # task still running would write files into it after the delete
        abort.stop_tasks(job_id, launched + p2)
        store.abort(table, job_id)
        if isinstance(exc, ray.exceptions.RayTaskError):
            inner = _unwrap(exc)
            if isinstance(inner, MetastoreError):
                raise type(inner)(str(inner)) from None
            raise AnalyzeError(f"analyze of {source.uri} failed: {type(inner).__name__}: {inner}") from exc
        raise
    return AnalyzeResult(
        table=table,
        job_id=job_id,
        store=store.root,
        snapshot=snapshot,
        partitions=len(partitions),
        rows=total_rows,
        columns=len(leaves),
        elapsed_s=time.perf_counter() - started,
        run_uri=store.run_uri(table, job_id),
        timings=timings,
        frequencies=frequencies_report,
        inherited=counters.inherited,
        recomputed=counters.recomputed,
        rebinned=counters.rebinned,
        recompute_reasons=counters.reasons,
        warnings=counters.warnings,
        histograms_guessed=guessed_ok,
    )


def _spec(leaf: LeafColumn, state: ColumnState, bins: int) -> HistogramSpec | None:
    if mt.histogram_domain(leaf.type) == mt.HistogramDomain.FLOAT:
        if state.finite_range is None:
            return None
        return make_spec(leaf.type, state.finite_range[0], state.finite_range[1], bins)
    if state.minmax.min is None:
        return None
    return make_spec(leaf.type, to_domain(state.minmax.min), to_domain(state.minmax.max), bins)
