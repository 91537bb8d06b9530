"""Merge and phase 2: the table's states and histogram edges, then every partition's bin counts.

Partial states are merged on the driver (small), in partition order whether profiled or
inherited (an append with the table's merged state: it, then the new partitions; the merged
states and every partition's KLL sketch are what write.table_state keeps for the next append);
a guess of the edges from metadata (the second waves') is kept only if it equals the merged
edges, bit for bit. Profiled partitions without a right guess are binned;
inherited ones keep their histograms unless the table edges moved (then re-binned; those of the
merged state are not read when they stand: the table's bin counts stand for theirs).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field

import numpy as np

from engine.catalog import FileRef
from engine.files import layout, partial_state
from engine.runtime import inheritance
from engine.runtime.job.plan import JobPlan
from engine.runtime.job.profile import Profiles, Wave
from engine.runtime.job.refs import JobRefs
from engine.runtime.job.runner import ObjectRef, TaskRunner
from engine.runtime.tasks.bins import Rebin, bin_batch, rebin_batch, same_specs, table_spec
from engine.runtime.tasks.profile import partial_state_files
from engine.runtime.tasks.values import Binned
from engine.sources.base import Partition
from engine.stats import columnwise
from engine.stats.columnwise import StateColumns
from engine.stats.histograms import HistogramSpec
from engine.stats.profile import ColumnState

log = logging.getLogger("engine.analyze")


@dataclass(frozen=True)
class Merged:
    states: dict[str, ColumnState]  # the table's state of each column
    specs: dict[str, HistogramSpec | None]  # the table's histogram edges of each histogrammed column
    timings: dict[str, float] = field(default_factory=dict)
    #: the KLL sketches of every partition, in table order (the table's merged state keeps them)
    kll_parts: dict[str, list[bytes]] = field(default_factory=dict)


@dataclass(frozen=True)
class PendingBins:
    """Phase 2 as submitted."""

    started: float
    pending: tuple[tuple[tuple[str, ...], ObjectRef], ...]  # (a task's partitions, its list of Binned)
    kept: dict[str, Binned]  # inherited partitions whose histograms stand
    inherited_files: dict[str, dict[str, FileRef]]  # inherited partitions: file name -> ref
    guessed_ok: bool  # the second waves' guessed edges were right: their bins stand
    rebinned: int
    #: the table's bin counts of the kept partitions standing in the table's merged state (their
    #: own are not read: each of them is kept with no counts); empty without one
    base: dict[str, np.ndarray] = field(default_factory=dict)


@dataclass(frozen=True)
class Binning:
    """Phase 2 as fetched: every partition's bin counts (and files written), in table order."""

    binned: dict[str, Binned]
    inherited_files: dict[str, dict[str, FileRef]]
    guessed_ok: bool
    rebinned: int
    timings: dict[str, float]
    base: dict[str, np.ndarray] = field(default_factory=dict)  # PendingBins.base


def merge(plan: JobPlan, profiles: Profiles, wave: Wave) -> Merged:
    """Merge partial states on the driver (small), in partition order whether profiled or inherited.

    An append with the table's merged state (``wave.table``) merges it, then the new partitions
    (which come after every inherited one: plan.Append.state): the same left fold as over every
    partition, so the same bits; the KLL sketches from every partition's (kept in the state)."""
    t0 = time.perf_counter()
    merged: dict[str, ColumnState] = {}
    kll_parts: dict[str, list[bytes]] = {}
    loaded, table = wave.loaded, wave.table
    # every partition's states, column-wise: the batches' then the inherited ones', put in partition order
    inherited = [k for k in loaded if k not in profiles.computed] if table is None else []
    shipped = [k for batch in profiles.batches for k in batch.keys] + inherited
    position = {k: i for i, k in enumerate(shipped)}
    order = [position[p.key] for p in plan.partitions if p.key in position]
    if table is not None:  # the merged state first: one more "partition", before the new ones
        order = [len(shipped), *order]
    for leaf in plan.leaves:
        p = plan.probes[leaf.name]
        if not profiles.summaries:
            merged[leaf.name] = p.zero()
            continue
        parts = [batch.states[leaf.name] for batch in profiles.batches if len(batch)]
        theta = [batch.theta[leaf.name] for batch in profiles.batches if len(batch)]
        if inherited:
            states = [loaded[k].states[leaf.name] for k in inherited]
            parts.append(StateColumns.of(p, states))
            theta.append(columnwise.union_theta(states))
        if table is not None:
            parts.append(StateColumns.of(p, [table.states[leaf.name]]))
            theta.append(table.states[leaf.name].theta)
        cols = StateColumns.concat(parts).take(order)
        merged[leaf.name] = columnwise.merge(p, cols, theta)
        if cols.kll is not None:
            kll_parts[leaf.name] = [b for b in cols.kll if b is not None]
            if table is not None:  # the merged state has none: every partition's, pooled as a full analyze does
                kll_parts[leaf.name][:0] = table.kll_parts[leaf.name]
                merged[leaf.name].kll = columnwise.merge_kll_parts(kll_parts[leaf.name])
    specs = {leaf.name: table_spec(leaf, merged[leaf.name], plan.options.bins) for leaf in plan.hist_leaves}
    return Merged(merged, specs, {"merge_s": time.perf_counter() - t0}, kll_parts)


def submit(plan: JobPlan, refs: JobRefs, executor: TaskRunner, wave: Wave, profiles: Profiles, merged: Merged) -> PendingBins:
    """Phase 2: bin profiled partitions; inherited ones keep their histograms unless the edges moved."""
    t0 = time.perf_counter()
    specs = merged.specs
    specs_ref = executor.put(specs)
    inherited_files: dict[str, dict[str, FileRef]] = {}
    kept: dict[str, Binned] = {}
    pending: list[tuple[tuple[str, ...], ObjectRef]] = []
    new_bins = {name: (spec.bins if spec else None) for name, spec in specs.items()}
    # the second waves binned on edges guessed from metadata: right, or phase 2 does it again
    guessed = executor.get(wave.guess) if wave.guess is not None else None
    guessed_ok = guessed is not None and same_specs(specs, guessed)
    if guessed is not None and not guessed_ok:
        log.info("histogram edges guessed from metadata were wrong; binning again")
    for b in wave.batches:
        if b.loaded:
            continue
        if guessed_ok and b.guessed is not None:
            pending.append((b.keys, b.guessed))
            continue
        partials = [partial_state_files(profiles.computed[k].files) for k in b.keys]
        pending.append((b.keys, executor.submit(bin_batch, refs.context, b.tasks, specs_ref, b.phase_two, partials, owner=b.keys)))
    rebins: list[Partition] = []
    inherited = plan.inheritance.inherited
    for part in sorted((p for p in plan.partitions if p.key in wave.loaded), key=lambda p: -p.size):
        got, inh = wave.loaded[part.key], inherited[part.key]
        inherited_files[part.key] = {name: FileRef(f["path"], int(f["size"]), f.get("checksum", "")) for name, f in inh.files.items()}
        if inheritance.same_histograms(got.histogram_specs, specs):
            # merged (the table's state): its counts are in the table's, which stand (base below)
            kept[part.key] = Binned(dict(got.histogram_counts), 0.0)
        else:
            rebins.append(part)
    for batch in plan.batches(rebins):
        items = []
        for part in batch:
            got, inh = wave.loaded[part.key], inherited[part.key]
            changed = inheritance.stored_bins(got.histogram_specs) != new_bins
            checksum = inh.files.get(layout.STATISTICS_FILE, {}).get("checksum", "")
            if got.merged:  # its histograms and its counts' checksum are read by the task (Rebin.inherited)
                items.append(Rebin(plan.task(part), {}, inh.statistics_uri, changed, checksum, None, inh))
                continue
            counts = (inh.counts_uri, got.partial_checksums.get(partial_state.PARTIAL_COUNTS_FILE, ""))
            items.append(Rebin(plan.task(part), inheritance.unchanged_counts(got, specs), inh.statistics_uri, changed, checksum, counts))
        keys = tuple(p.key for p in batch)
        pending.append((keys, executor.submit(rebin_batch, refs.context, specs_ref, items, owner=keys)))
    # the merged partitions' histograms all stand or are all re-binned (they are on the same edges)
    base = wave.table.histogram_counts if wave.table is not None and kept else {}
    return PendingBins(t0, tuple(pending), kept, inherited_files, guessed_ok, len(rebins), base)


def collect(plan: JobPlan, executor: TaskRunner, bins: PendingBins) -> Binning:
    """Wait for phase 2; every partition's Binned in table order."""
    pending = bins.pending
    got_lists = executor.wait_all([ref for _, ref in pending], "histograms", [len(keys) for keys, _ in pending])
    done = {k: b for (keys, _), binned in zip(pending, got_lists) for k, b in zip(keys, binned, strict=True)}
    every = {**bins.kept, **done}
    binned = {p.key: every[p.key] for p in plan.partitions}
    timings = {"phase2_s": time.perf_counter() - bins.started, "cpu_histograms_s": sum(b.cpu_s for b in done.values())}
    return Binning(binned, bins.inherited_files, bins.guessed_ok, bins.rebinned, timings, bins.base)
