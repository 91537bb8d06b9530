"""The analyze job: one Ray task per partition, a reduction to table level, one atomic publish.

Data flow (the driver never holds table data, only small partial states)::

    plan                             which partitions are unchanged since the catalog's
                                     state (engine/runtime/inheritance.py)
    phase 1  profile_partition x P   read the partition column-wise in batches,
                                     fold every column's accumulators, write the
                                     partition's frequencies.parquet and its partial
                                     state (engine/files/partial_state.py); return the
                                     partial states, and the exact value counts of
                                     discrete columns into the object store
             load_partition x I      unchanged partitions: the same from their stored
                                     partial state, without reading data
    driver                           merge partial states -> table ranges -> bin specs
    phase 2  bin_partition x P       bin histogrammed columns on the table edges
                                     (from phase 1's sorted values; reads only columns without),
                                     write the partition's histograms.parquet and
                                     statistics.parquet; return bin counts
             rebin_partition         inherited partitions whose table edges moved
                                     (the others keep their histograms)
    reduce   reduce_counts x G       exact table frequencies, distinct counts and
                                     percentiles of discrete columns (G column groups);
                                     submitted with phase 1, each runs once its
                                     inputs exist (overlapping phase 2)
    write    write_frequencies       the table's frequencies.parquet
    driver                           table statistics.parquet and histograms.parquet,
                                     manifest, then one catalog transaction (atomic)
"""
from __future__ import annotations

import base64
import logging
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
    selected_percentiles,
)
from engine.frequencies.plan import FrequencySettings
from engine.runtime import frequency_strategy
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


@dataclass
class PartitionSummary:
    key: str
    rows: int
    states: dict[str, ColumnState]
    stat_rows: list[dict[str, Any]]
    cpu_s: float = 0.0  # CPU seconds the task used (process time: comparable under load)


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


def profile_partition(
    source: TableSource,
    partition: Partition,
    leaves: list[LeafColumn],
    user: list[UserStatistic],
    options: AnalyzeOptions,
    out_uri: str,
    identity: FileIdentity,
    groups: list[list[str]],
) -> PartitionSummary | tuple[Any, ...]:
    """Phase 1: all statistics of one partition but its histograms.

    Returns the summary, followed (as separate Ray objects) by one dict of exact
    value counts per group of discrete columns, so each reduce task fetches
    only its own group, and last by the binning inputs of phase 2: the sorted
    distinct values and counts of every histogrammed column that took the sorted
    path, so phase 2 bins those without reading the partition again.
    """
    cpu0 = time.process_time()
    states: dict[str, ColumnState] = {}
    rows: dict[str, dict[str, Any]] = {}
    freq: list[tuple[str, str, pa.Table]] = []
    discrete_counts: dict[str, pa.Table] = {}
    binnable: dict[str, BinInput] = {}
    all_profiles: dict[str, ColumnProfile] = {}
    n_rows = 0
    for group in _passes(leaves, options.columns_per_pass):
        profiles = {l.name: ColumnProfile(l.name, l.type, user) for l in group}
        all_profiles.update(profiles)
        tops = list(dict.fromkeys(l.top for l in group))
        chunks: dict[str, list[pa.Array]] = {l.name: [] for l in group}
        try:
            n = 0
            for batch in source.read_batches(partition, tops, batch_size=options.batch_size):
                n += batch.num_rows
                for leaf in group:
                    chunks[leaf.name].append(leaf.extract(batch.column(leaf.top)))
        except Exception as exc:
            raise _read_error(partition, exc) from exc
        n_rows = n
        for leaf in group:
            # one update per column over the whole partition: one hash pass, no merges
            p = profiles[leaf.name]
            parts = chunks.pop(leaf.name)
            column = pa.chunked_array(parts, type=leaf.type).combine_chunks() if parts else pa.array([], leaf.type)
            state, row, counts, view = p.profile_column_view(column)
            del column
            if view is not None and mt.histogram_domain(leaf.type):
                binnable[leaf.name] = (view.type, view.distinct, None if len(view.distinct) == view.n else view.counts)
            del view
            if p.discrete:
                kind, stored = writer.stored_frequencies(counts, row["row_count"] - row["null_count"], options.mostly_distinct_ratio)
                stored = writer.frequency_rows(leaf.name, stored)
                row["frequencies"] = kind
                freq.append((leaf.name, kind, stored))
                discrete_counts[leaf.name] = counts
            states[leaf.name] = state
            rows[leaf.name] = row
    order = {l.name: i for i, l in enumerate(leaves)}
    freq.sort(key=lambda f: order[f[0]])
    writer.write_frequencies(fileio.join(out_uri, layout.FREQUENCIES_FILE), freq, identity)
    if not partial_state.unserializable(user):  # what a later job loads instead of profiling again
        cfg = partial_state.config(options.mostly_distinct_ratio, user)
        partial_state.write(out_uri, identity, n_rows, [all_profiles[l.name] for l in leaves], states, discrete_counts, user, cfg)
    summary = PartitionSummary(partition.key, n_rows, states, [rows[l.name] for l in leaves], time.process_time() - cpu0)
    return (summary, *({c: discrete_counts[c] for c in g} for g in groups), binnable)


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
    writer.write_histograms(
        fileio.join(out_uri, layout.HISTOGRAMS_FILE),
        [(l.name, l.type, specs[l.name], counts.get(l.name)) for l in hist_leaves],
        identity,
    )
    for row in stat_rows:
        spec = specs.get(row["column"])
        row["histogram_bins"] = spec.bins if spec else None
    writer.write_statistics(fileio.join(out_uri, layout.STATISTICS_FILE), stat_rows, user, identity)
    counts["__cpu_s__"] = time.process_time() - cpu0
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
    writer.write_histograms(
        fileio.join(out_uri, layout.HISTOGRAMS_FILE),
        [(l.name, l.type, specs[l.name], counts.get(l.name)) for l in hist_leaves],
        identity,
    )
    if histogram_bins is not None:
        writer.rewrite_histogram_bins(statistics_uri, fileio.join(out_uri, layout.STATISTICS_FILE), histogram_bins, identity)
    counts["__cpu_s__"] = time.process_time() - cpu0
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
        parts = [g[name] for g in partition_groups]
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
) -> int:
    """``partitions``: the table's partition keys (in the order of the reductions'
    inputs) when the rows carry value partitions."""
    pos = {n: i for i, n in enumerate(order)}
    per_column = sorted((f for g in groups for f in g), key=lambda f: pos[f[0]])
    writer.write_frequencies(uri, per_column, identity, partitions=partitions)
    return sum(f[2].num_rows for f in per_column)


_profile_task = ray.remote(profile_partition)
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
    done = 0
    if progress:
        progress(phase, 0, len(refs))
    while pending:
        ready, pending = ray.wait(pending, num_returns=1, timeout=None)
        for r in ready:
            ray.get(r)  # raise early on failure
        done += len(ready)
        if progress:
            progress(phase, done, len(refs))
    return ray.get(refs)


def _cancel_and_wait(refs: list[Any], timeout_s: float = 60.0) -> None:
    """Cancel a failed job's tasks and wait until none of them runs any more."""
    for r in refs:
        try:
            ray.cancel(r)
        except Exception:  # already finished, or not cancellable
            pass
    if refs:
        try:
            ray.wait(refs, num_returns=len(refs), timeout=timeout_s, fetch_local=False)
        except Exception:
            pass


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

    def profile(part: Partition) -> list[Any]:
        out = store.partition_uri(table, job_id, part.key)
        refs = _profile_task.options(**_task_options(num_returns=2 + len(groups))).remote(
            source_ref, part, leaves_ref, user_ref, options, out, identity("partition", part.key), groups
        )
        launched.extend(refs)
        return refs

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
        profiled = [p.key for p in partitions if p.key not in loaded]
        computed = dict(zip(profiled, _wait_all([p1[k][0] for k in profiled], "profile", progress)))
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
        table_uri = store.table_level_uri(table, job_id)

        # ---- phase 2: bin profiled partitions; inherited ones keep their histograms unless the edges moved
        hist_ref = ray.put(hist_leaves)
        specs_ref = ray.put(specs)
        files: dict[str, dict[str, Any]] = {}  # inherited partitions: file name -> {"path", "size"}
        phase2: dict[str, Any] = {}  # key -> task ref or the inherited bin counts
        new_bins = {name: (spec.bins if spec else None) for name, spec in specs.items()}
        for part, summary in zip(partitions, summaries):
            out = store.partition_uri(table, job_id, part.key)
            ident = identity("partition", part.key)
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
                source_ref, part, hist_ref, specs_ref, kept, options, out, ident, inh.statistics_uri, rewrite
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
        freq_ref = _write_freq_task.options(**_task_options()).remote(
            fileio.join(table_uri, layout.FREQUENCIES_FILE),
            identity("table", ""),
            [l.name for l in leaves],
            redis_freq,
            *[r[1] for r in reduce_refs],
            partitions=[p.key for p in partitions] if options.value_partitions else None,
        )
        launched.append(freq_ref)
        binned = dict(zip([k for k, v in phase2.items() if not isinstance(v, dict)], _wait_all(p2, "histograms", progress)))
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
        ray.get(freq_ref)
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
        writer.write_statistics(fileio.join(table_uri, layout.STATISTICS_FILE), rows, user, identity("table", ""))
        writer.write_histograms(
            fileio.join(table_uri, layout.HISTOGRAMS_FILE),
            [(l.name, l.type, specs[l.name], table_counts.get(l.name)) for l in hist_leaves],
            identity("table", ""),
        )
        total_rows = sum(s.rows for s in summaries)
        manifest_partitions = []
        for s in summaries:
            entry: dict[str, Any] = {"key": s.key, "rows": s.rows, "data_fingerprint": plan.fingerprints.get(s.key, "")}
            if s.key in loaded:
                inh = plan.inherited[s.key]
                rebinned = files[s.key] != inh.files
                entry.update(
                    files=files[s.key],
                    # kept as they are: the catalog's entry carries over; re-binned: a new entry naming old and new files
                    inherited=not rebinned,
                    job_id=inh.job_id if not rebinned else job_id,
                    snapshot=inh.snapshot if not rebinned else snapshot,
                )
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
        }
        if plan.write_partial_state:
            manifest[inheritance.CONFIG_PROPERTY] = plan.config
        store.publish(table, job_id, manifest)
        timings["table_files_s"] = time.perf_counter() - t0
    except BaseException as exc:
        # stop every task of this job before deleting its run directory, or a
        # task still running would write files into it after the delete
        _cancel_and_wait(launched + p2)
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
    )


def _spec(leaf: LeafColumn, state: ColumnState, bins: int) -> HistogramSpec | None:
    if mt.histogram_domain(leaf.type) == mt.HistogramDomain.FLOAT:
        if state.finite_range is None:
            return None
        return make_spec(leaf.type, state.finite_range[0], state.finite_range[1], bins)
    if state.minmax.min is None:
        return None
    return make_spec(leaf.type, to_domain(state.minmax.min), to_domain(state.minmax.max), bins)
