"""Histogram task bodies: guess edges from metadata, the table's bin specs, phase 2 (bin a
profiled partition, re-bin an inherited one whose table edges moved).
"""

from __future__ import annotations

import dataclasses
import logging
import math
import time
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from engine import fileio
from engine import types as mt
from engine import values as value_forms
from engine.arrowcompute import contiguous
from engine.columns import LeafColumn
from engine.exceptions import MetastoreError
from engine.files import checksum, layout, partial_state, writer
from engine.options import AnalyzeOptions
from engine.runtime import inheritance
from engine.runtime.inheritance import InheritedPartition
from engine.runtime.tasks.values import (
    BinInput,
    Binned,
    JobContext,
    PartitionSummary,
    PartitionTask,
    PhaseTwoInputs,
    StopCheck,
    column_passes,
    column_profile,
    histogram_leaves,
    read_error,
)
from engine.sources.base import Partition, TableSource
from engine.stats import sortedvalues
from engine.stats.histograms import HistogramSpec, make_spec, to_domain
from engine.stats.profile import ColumnProfile, ColumnState
from engine.stats.valuecounts import (
    widen_counts,
)

log = logging.getLogger("engine.analyze")


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
        if (
            mt.histogram_domain(leaf.type) == mt.HistogramDomain.FLOAT
            and lo is not None
            and hi is not None
            and not (math.isfinite(lo) and math.isfinite(hi))
        ):
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
    live = {name: spec for name, spec in specs.items() if spec is not None}
    counts = {l.name: np.zeros(live[l.name].bins, np.int64) for l in hist_leaves if l.name in live}
    for name, (work_type, distinct, weights) in binnable.items():
        if name in live:
            counts[name] = live[name].weighted_bin_counts(sortedvalues.to_arrow(distinct, work_type), weights)
    binned = [l for l in hist_leaves if l.name in live and l.name not in binnable]
    for group in column_passes(binned, options.columns_per_pass):
        tops = list(dict.fromkeys(l.top for l in group))
        try:
            for batch in source.read_batches(partition, tops, batch_size=options.batch_size):
                for leaf in group:
                    counts[leaf.name] += live[leaf.name].bin_counts(leaf.extract(batch.column(leaf.top)))
        except Exception as exc:
            raise read_error(partition, exc) from exc
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
    # (a partition's histogram_bins are its histograms.parquet's: writer.write_statistics)
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
    copy_statistics: bool,
    statistics_checksum: str = "",
    statistics: bytes | pa.Table | None = None,
    hist_leaves: list[LeafColumn] | None = None,
) -> Binned:
    """Phase 2 of an inherited partition whose table edges moved (its CPU seconds: the caller's,
    :func:`rebin_batch`).

    Only the columns whose edges moved are read and binned again; ``kept`` holds the
    inherited counts of the others. Its new histograms.parquet carries its ``histogram_bins``
    (docs/FORMAT.md); its other files stay where they are. ``copy_statistics``: its
    statistics.parquet was written before that (it holds ``histogram_bins``, and the count
    changed): it is copied once without them (checked against ``statistics_checksum``, the
    one recorded when it was written; ``statistics``: its bytes or table, read and checked
    already). ``hist_leaves``: the job's histogrammed columns, if the caller has them (a
    batch finds them once).
    """
    hist_leaves = histogram_leaves(job.leaves, job.user) if hist_leaves is None else hist_leaves
    missing = [l for l in hist_leaves if l.name not in kept]
    counts = _bin_counts(job.source, task.partition, missing, specs, job.options) if missing else {}
    counts.update(kept)
    files = {
        layout.HISTOGRAMS_FILE: writer.write_histograms(
            fileio.join(task.out_uri, layout.HISTOGRAMS_FILE),
            [(l.name, l.type, specs[l.name], counts.get(l.name)) for l in hist_leaves],
            task.identity,
        )
    }
    if copy_statistics:
        files[layout.STATISTICS_FILE] = writer.rewrite_histogram_bins(
            statistics_uri, fileio.join(task.out_uri, layout.STATISTICS_FILE), task.identity, statistics_checksum, statistics
        )
    return Binned(counts, 0.0, files)


def table_spec(leaf: LeafColumn, state: ColumnState, bins: int) -> HistogramSpec | None:
    """A histogrammed column's bins on the table's edges, from its merged state (None: no values)."""
    if mt.histogram_domain(leaf.type) == mt.HistogramDomain.FLOAT:
        if state.finite_range is None:
            return None
        return make_spec(leaf.type, state.finite_range[0], state.finite_range[1], bins)
    if state.minmax.min is None:
        return None
    return make_spec(leaf.type, to_domain(state.minmax.min), to_domain(state.minmax.max), bins)


def bin_batch(
    job: JobContext,
    tasks: list[PartitionTask],
    specs: dict[str, HistogramSpec | None],
    inputs: list[PhaseTwoInputs],
    partials: list[dict[str, writer.WrittenFile]],
) -> list[Binned] | None:
    """:func:`bin_partition` of each partition of a batch."""
    stop = StopCheck(job)
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
    #: its bin count changed: a statistics.parquet that holds ``histogram_bins`` (written before
    #: they moved to histograms.parquet) is copied without them (:func:`rebin_partition`)
    bins_changed: bool
    statistics_checksum: str = ""
    #: the partition's value counts (its partial_counts.arrow and the checksum its statistics
    #: file recorded): a reduced column (not a float) whose edges moved is re-binned from them, not read
    counts: tuple[str, str] | None = None
    #: a partition standing in the table's merged state (no load read its files): ``kept`` and
    #: ``counts`` are found here, from its histograms.parquet and statistics.parquet
    inherited: InheritedPartition | None = None


def _merged_kept(specs: dict[str, HistogramSpec | None], inh: InheritedPartition) -> dict[str, np.ndarray]:
    """A merged partition's bin counts that stand, as a load would have found them: its
    histograms', on edges that did not move or derived exactly. A file that cannot be read
    gives none: those columns are read from the data."""
    try:
        stored, counts = inheritance.read_histograms(inh.histograms_uri, (inh.files.get(layout.HISTOGRAMS_FILE) or {}).get("checksum", ""))
        return inheritance.unchanged_bin_counts(stored, counts, specs)
    except Exception:  # noqa: BLE001 - re-binned from the data instead
        log.warning("histograms unreadable, re-binning from the data: %s", inh.histograms_uri, exc_info=True)
        return {}


def _statistics_of(r: Rebin) -> tuple[pa.Table | None, str]:
    """A merged partition's statistics.parquet, read (checked against the catalog's checksum)
    when a column whose edges moved is not derived from its histograms: for what it records
    of its partial state, its constant columns (:func:`_constant_bins`) and, for an older
    file, its copy without ``histogram_bins``; and the checksum of its value counts it
    records ("": unknown: the counts are then not used)."""
    if r.inherited is None:
        return None, ""
    try:
        table = writer.read_small(checksum.read_checked(r.inherited.statistics_uri, r.statistics_checksum))
        recorded = layout.partial_state_checksums(layout.decode_metadata(table.schema.metadata))
    except (MetastoreError, OSError, pa.ArrowException):
        return None, ""  # the copy reads it again and says what is wrong with it
    return table, recorded.get(partial_state.PARTIAL_COUNTS_FILE, "")


def _copies_statistics(r: Rebin, statistics: pa.Table | None) -> bool:
    """Whether a re-binned partition's statistics.parquet is copied (:func:`rebin_partition`):
    its bin count changed and the file holds it (no ``layout.HISTOGRAM_BINS_KEY``: written
    before). Only the file's footer is read when the table is not at hand (a footer that cannot
    be read: copied, and the copy says what is wrong with the file)."""
    if not r.bins_changed:
        return False
    try:
        md = statistics.schema.metadata if statistics is not None else pq.read_metadata(pa.BufferReader(fileio.read_bytes(r.statistics_uri))).metadata
    except (OSError, pa.ArrowException):
        return True
    return not layout.histogram_bins_in_histograms(layout.decode_metadata(md))


def _constant_bins(
    specs: dict[str, HistogramSpec | None], statistics: pa.Table | None, leaves: dict[str, LeafColumn], wanted: list[str]
) -> dict[str, np.ndarray]:
    """Bin counts of the ``wanted`` columns (histogrammed, not floats) that hold one value in the
    partition (its statistics row: min = max), from that row: every non-null row in the value's
    bin, as binning the data gives (a partition column of a Hive table; its value counts are
    not read)."""
    if statistics is None or not wanted:
        return {}
    rows = statistics.select(["column", "row_count", "null_count", "min", "max"]).to_pylist()
    out = {}
    for row in rows:
        name, spec = row["column"], specs.get(row["column"])
        if name not in wanted or spec is None or row["min"] is None or row["min"] != row["max"] or row["row_count"] is None:
            continue
        try:
            value = value_forms.decode(pa.array([row["min"]], pa.string()), leaves[name].type)
        except Exception:  # noqa: BLE001 - a type the text form does not round-trip: binned from the value counts instead
            continue
        out[name] = spec.bin_counts(value) * (int(row["row_count"]) - int(row["null_count"] or 0))
    return out


def _binned_from_counts(
    job: JobContext, specs: dict[str, HistogramSpec | None], r: Rebin, reduced: list[ColumnProfile], wanted: list[str]
) -> dict[str, np.ndarray]:
    """Bin counts of the reduced columns (but floats) whose edges moved, from the partition's exact value counts
    (memory-mapped: cheaper than reading and decoding the column); {} if they cannot be read (the
    column is then read from the data, as before). ``reduced``: the columns of the counts file
    (ColumnProfile.reduced); ``wanted``: the histogrammed ones to bin from them (:func:`rebin_batch`)."""
    if r.counts is None:
        return {}
    if not wanted:
        return {}
    try:
        cfg = partial_state.config(job.options.mostly_distinct_ratio, job.user)
        counts = partial_state.read_counts(r.counts[0], reduced, cfg, r.counts[1])
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
    """:func:`rebin_partition` of each inherited partition of a batch (each one's CPU seconds
    including what it took to find the counts that stand and to bin its value counts)."""
    stop = StopCheck(job)
    hist_leaves = histogram_leaves(job.leaves, job.user)
    hist = {l.name for l in hist_leaves}
    leaves = {l.name: l for l in hist_leaves}
    reduced = [p for l in job.leaves if (p := column_profile(l.name, l.type, job.user)).reduced]  # the columns of a counts file
    # discrete columns, and counted ones but floats (times: their counts are in the work type phase 2
    # bins a profiled partition's sorted values in; floats' infinities and NaN are left to the data)
    from_counts = [p.name for p in reduced if (p.discrete or mt.histogram_domain(p.type) != mt.HistogramDomain.FLOAT) and p.name in hist]
    out = []
    for item in items:
        if stop():
            return None
        cpu0 = time.process_time()
        r, statistics = _inputs(specs, item, from_counts)
        wanted = [name for name in from_counts if name not in r.kept and specs.get(name) is not None]
        kept = {**r.kept, **_constant_bins(specs, statistics, leaves, wanted)}
        kept.update(_binned_from_counts(job, specs, r, reduced, [name for name in wanted if name not in kept]))
        copy = _copies_statistics(r, statistics)
        got = rebin_partition(job, r.task, specs, kept, r.statistics_uri, copy, r.statistics_checksum, statistics, hist_leaves)
        out.append(dataclasses.replace(got, cpu_s=time.process_time() - cpu0))
    return out


def _inputs(specs: dict[str, HistogramSpec | None], item: Rebin, from_counts: list[str]) -> tuple[Rebin, pa.Table | None]:
    """``item`` with what a load would have found for a merged partition (:func:`_merged_kept`,
    and its value counts when needed), and its statistics.parquet if it was read: only when a
    column binned from counts (``from_counts``) is not derived from its histograms."""
    inh = item.inherited
    if inh is None:
        return item, None
    kept = _merged_kept(specs, inh)
    r = dataclasses.replace(item, kept=kept, inherited=None)
    if not any(name not in kept and specs.get(name) is not None for name in from_counts):
        return r, None
    statistics, counts_checksum = _statistics_of(item)
    return dataclasses.replace(r, counts=(inh.counts_uri, counts_checksum) if counts_checksum else None), statistics


def guess_specs_batches(
    hist_leaves: list[LeafColumn], bins: int, *batches: list[PartitionSummary], enabled: bool = True
) -> dict[str, HistogramSpec | None] | None:
    """:func:`guess_specs` over the first waves' summaries, a list per batch."""
    return guess_specs(hist_leaves, bins, *(s for batch in batches for s in batch), enabled=enabled)
