"""Phase 1: profile changed partitions, load the partial states of unchanged ones.

A batch of partitions (engine/runtime/batching.py) is one task returning one object per
kind (an append with the table's merged state loads that instead of the inherited
partitions' states: one task, :func:`_table_state`); with two waves, the first profiles the discrete columns (what the reductions wait
for) and the second, after a barrier, the others (with histogram edges guessed from
metadata, also the partition's phase 2).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from engine.runtime import inheritance
from engine.runtime.job.plan import JobPlan, cannot_inherit
from engine.runtime.job.refs import BatchRefs, JobRefs
from engine.runtime.job.runner import ObjectRef, TaskRunner
from engine.runtime.tasks.bins import guess_specs_batches
from engine.runtime.tasks.profile import index_batch, profile_batch, profile_rest_batch
from engine.runtime.tasks.values import PartitionSummary, SummaryBatch
from engine.sources.base import Partition


@dataclass(frozen=True)
class Wave:
    """Phase 1 as submitted: every partition's objects, by batch (profiled or loaded)."""

    batches: tuple[BatchRefs, ...]
    where: dict[str, tuple[int, int]]  # key -> (its batch in batches, its position there)
    loaded: dict[str, inheritance.LoadedPartition]
    #: inherited partitions whose partial state could not be loaded: profiled by :func:`recompute`
    failed: tuple[Partition, ...] = ()
    #: (partitions, their file index parts built again): inherited partitions of plan.stale_index
    index: tuple[tuple[tuple[str, ...], ObjectRef], ...] = ()
    warnings: tuple[str, ...] = ()
    reasons: dict[str, str] = field(default_factory=dict)
    guess: ObjectRef | None = None  # the histogram specs guessed from metadata (guess_specs)
    #: an append's inherited partitions merged (plan.Append.state): loaded in place of their states
    table: inheritance.TableState | None = None
    #: why the table's merged state cannot be used (the append is then reduced in full)
    table_failure: str = ""
    states_loaded: int = 0  # inherited partitions whose own partial state was loaded


@dataclass(frozen=True)
class Profiles:
    """Phase 1 as fetched: the profiled batches' summaries and every partition's, in table order."""

    batches: tuple[SummaryBatch, ...]
    computed: dict[str, PartitionSummary]
    summaries: tuple[PartitionSummary, ...]


def _with(batches: list[BatchRefs], where: dict[str, tuple[int, int]], batch: BatchRefs, keys: set[str] | None = None) -> None:
    """Register a batch's objects; ``keys``: the partitions it stands for (default all)."""
    batches.append(batch)
    at = len(batches) - 1
    for i, k in enumerate(batch.keys):
        if keys is None or k in keys:
            where[k] = (at, i)


def _profile(plan: JobPlan, refs: JobRefs, executor: TaskRunner, parts: list[Partition]) -> BatchRefs:
    keys = tuple(p.key for p in parts)
    tasks = [plan.task(p) for p in parts]
    got = executor.submit(
        profile_batch, refs.context, tasks, plan.groups, plan.two_waves, num_returns=2 + len(plan.groups), owner=keys
    )  # fmt: skip
    return BatchRefs.of_profile(keys, tasks, got)


def first_wave(plan: JobPlan, refs: JobRefs, executor: TaskRunner) -> Wave:
    """Profile changed partitions (the first wave), load the partial states of unchanged ones."""
    inherited, n = plan.inheritance.inherited, len(plan.groups)
    batches: list[BatchRefs] = []
    where: dict[str, tuple[int, int]] = {}
    # largest first: the last of the profile tasks are then the small ones, so the
    # cores finish phase 1 together (longest-processing-time-first scheduling)
    ordered = sorted(plan.partitions, key=lambda p: -p.size)
    for batch in plan.batches([p for p in ordered if p.key not in inherited]):
        _with(batches, where, _profile(plan, refs, executor, batch))
    loads: list[BatchRefs] = []
    appending = plan.append
    merged = appending is not None and appending.state is not None
    for batch in plan.batches([p for p in ordered if p.key in inherited and not merged]):
        keys = tuple(p.key for p in batch)
        got = executor.submit(
            inheritance.load_batch, [inherited[k] for k in keys], refs.leaves, refs.user, plan.inheritance.config, plan.groups,
            plan.append is None, num_returns=1 + n, owner=keys,
        )  # fmt: skip
        loads.append(BatchRefs.of_load(keys, got))
    index = []
    for batch in plan.batches([p for p in ordered if p.key in plan.stale_index]):
        keys = tuple(p.key for p in batch)
        uris = [inherited[k].statistics_uri for k in keys]
        index.append((keys, executor.submit(index_batch, refs.context, list(batch), uris, owner=keys)))
    got_loads = executor.wait_all([b.summaries for b in loads], "inherit", [len(b.keys) for b in loads]) if loads else []
    failed: list[Partition] = []
    loaded: dict[str, inheritance.LoadedPartition] = {}
    warnings: list[str] = []
    reasons: dict[str, str] = {}
    by_key = plan.by_key
    for load, results in zip(loads, got_loads):
        for key, res in zip(load.keys, results, strict=True):
            if isinstance(res, inheritance.LoadFailure):
                cannot_inherit(res, warnings, reasons)
                failed.append(by_key[key])
            else:
                loaded[key] = res
        _with(batches, where, load, {k for k in load.keys if k in loaded})
    wave = Wave(tuple(batches), where, loaded, tuple(failed), tuple(index), tuple(warnings), reasons, states_loaded=len(loaded))
    return _table_state(plan, refs, executor, wave) if merged else wave


def _table_state(plan: JobPlan, refs: JobRefs, executor: TaskRunner, wave: Wave) -> Wave:
    """An append's inherited partitions from the table's merged state (plan.Append.state) and its
    histograms: one task reads both, in place of a load task a batch of partitions. Each inherited
    partition then stands as a :class:`inheritance.LoadedPartition` with ``merged`` set: its rows
    (the catalog's), the table's histogram edges (its own, as every partition's), no state."""
    mode = plan.append
    assert mode is not None and mode.state is not None and plan.inheritance.previous is not None
    where = plan.store.layout(plan.table)
    histograms = plan.inheritance.previous.files.histograms
    ref = executor.submit(
        inheritance.load_table_state, where.absolute(mode.state["path"]), mode.state["checksum"], where.absolute(histograms.path),
        histograms.checksum, refs.leaves, refs.user, plan.inheritance.config,
    )  # fmt: skip
    inherited = plan.inheritance.inherited
    [got] = executor.wait_all([ref], "inherit", [len(inherited)])
    if isinstance(got, inheritance.LoadFailure):
        return dataclasses.replace(wave, table_failure=got.message)
    loaded = {
        k: inheritance.LoadedPartition(k, inh.rows, {}, got.histogram_specs, {}, merged=True)
        for k, inh in inherited.items()
    }  # fmt: skip
    return dataclasses.replace(wave, loaded=loaded, table=got)


def recompute(plan: JobPlan, refs: JobRefs, executor: TaskRunner, wave: Wave) -> Wave:
    """Profile the inherited partitions that could not be loaded, as changed ones."""
    batches, where = list(wave.batches), dict(wave.where)
    for batch in plan.batches(list(wave.failed)):
        _with(batches, where, _profile(plan, refs, executor, batch))
    return dataclasses.replace(wave, batches=tuple(batches), where=where, failed=())


def second_wave(plan: JobPlan, refs: JobRefs, executor: TaskRunner, wave: Wave) -> Wave:
    """Second waves start when every first wave has ended (a barrier), after the
    reductions were submitted: Ray would otherwise run a partition's second wave
    as soon as its first ends, ahead of other partitions' first waves, and the
    reductions could start only at the end of phase 1."""
    if not plan.two_waves:
        return wave
    firsts = [i for i, b in enumerate(wave.batches) if not b.loaded]
    if not firsts:
        return wave
    # the guess needs every partition's bounds: with inherited partitions, no guess
    guess = executor.submit(
        guess_specs_batches, plan.hist_leaves, plan.options.bins, *[wave.batches[i].summaries for i in firsts], enabled=not wave.loaded
    )
    batches = list(wave.batches)
    for i in firsts:
        b = batches[i]
        summaries, phase_two, binned = executor.submit(
            profile_rest_batch, refs.context, b.tasks, b.summaries, b.phase_two, guess, *b.groups, num_returns=3, owner=b.keys
        )
        batches[i] = dataclasses.replace(b, summaries=summaries, phase_two=phase_two, first=b.summaries, guessed=binned)
    return dataclasses.replace(wave, batches=tuple(batches), guess=guess)


def collect(plan: JobPlan, executor: TaskRunner, wave: Wave) -> Profiles:
    """Wait for every profiled batch's last wave; every partition's summary in table order."""
    profiled = [b for b in wave.batches if not b.loaded]
    # the progress counts partitions, each once its last wave has ended (the first waves
    # weigh nothing: counting both waves showed "16/16 partitions" for 8); the first waves'
    # summaries are only waited for (the second waves took them)
    firsts = [b.first for b in profiled if b.first is not None]
    weights = [0 for _ in firsts] + [len(b.keys) for b in profiled]
    fetch = [False] * len(firsts) + [True] * len(profiled)
    got: list[SummaryBatch] = executor.wait_all([*firsts, *(b.summaries for b in profiled)], "profile", weights, fetch)[len(firsts) :]
    computed: dict[str, PartitionSummary] = {}
    for b, batch in zip(profiled, got):
        for i, k in enumerate(b.keys):
            computed[k] = batch.summary(i)
    loaded = wave.loaded
    summaries = tuple(
        computed[p.key] if p.key in computed else PartitionSummary(p.key, loaded[p.key].rows, loaded[p.key].states, loaded[p.key].cpu_s)
        for p in plan.partitions
    )
    return Profiles(tuple(got), computed, summaries)
