"""The analyze job's driver: plan, then the stages in order (the driver never holds table data,
only small partial states)::

    plan        engine/runtime/job/plan.py: the snapshot, the partitions unchanged since the
                catalog's state, the mode (Full, Append or CarryOver: the table level named
                again, straight to publish), the column groups, the byte budget of a task
    profile     profile.first_wave: changed partitions profiled (the discrete columns first
                with two waves), unchanged ones loaded from their partial state
    reduce      reduce.submit (or append.submit): the table reductions of discrete columns,
                submitted before the second wave so they run during it
    profile     profile.second_wave (after a barrier) and profile.collect
    merge, bin  bins.merge: the table's states and edges; bins.submit/collect: phase 2 (the
                Redis strategy's consolidation, reduce.redis, runs while they bin)
    write       write.table_state (the merged state the next append loads), write.table_files and
                write.file_index; publish.output, one catalog transaction

Each stage is a function of the plan and the earlier stages' frozen outputs. An append that
cannot append after all is an :class:`AppendFailed` result: the job is run again in full.
A failure anywhere stops every task of the job (engine/runtime/abort.py) and removes its
run directory: nothing is published.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import gc
import logging
import time
from collections.abc import Iterator

from engine.catalog.model import FREQUENCY_SEGMENTS_PROPERTY
from engine.catalog.paths import files_run, new_job_id
from engine.columns import LeafColumn
from engine.options import AnalyzeOptions
from engine.progress import ProgressCallback
from engine.runtime.job import append, bins, profile, publish, reduce, write
from engine.runtime.job.append import AppendFailed
from engine.runtime.job.plan import TABLE_FILES_JOB_PROPERTY, CarryOver, JobPlan, plan_job
from engine.runtime.job.refs import JobRefs
from engine.runtime.job.result import AnalyzeResult
from engine.runtime.job.runner import ExecutorFactory, TaskRunner
from engine.sources.base import TableSource
from engine.stats.user import UserStatistic
from engine.store import Store

log = logging.getLogger("engine.analyze")


def ray_executor(source_uri: str, task_retries: int, progress: ProgressCallback | None) -> TaskRunner:
    """The Ray executor (engine/runtime/job/executor.py), imported when a job runs on Ray only:
    a job in this process (LocalExecutor) never imports Ray."""
    from engine.runtime.job.executor import Executor

    return Executor(source_uri, task_retries, progress)


def run_job(
    source: TableSource,
    store: Store,
    leaves: list[LeafColumn],
    user: list[UserStatistic],
    options: AnalyzeOptions,
    progress: ProgressCallback | None = None,
    *,
    executor: ExecutorFactory | None = None,
    allow_append: bool = True,
) -> AnalyzeResult:
    """The job on already selected columns and statistics, its tasks run by what ``executor``
    makes (default engine/runtime/job/executor.Executor: Ray, which must be up;
    engine/runtime/job/local_executor.LocalExecutor: this process)."""
    executor = executor or ray_executor
    with _old_objects_frozen():
        outcome = _attempt(source, store, leaves, user, options, executor(source.uri, options.task_retries, progress), allow_append)
    if isinstance(outcome, AnalyzeResult):
        return outcome
    (log.warning if outcome.warn else log.info)("analyze of %s: %s; reducing the table in full", source.uri, outcome.why)
    result = run_job(source, store, leaves, user, options, progress, executor=executor, allow_append=False)
    result.timings["cpu_append_attempt_s"] = outcome.cpu_s
    result.timings["cpu_s"] = result.timings.get("cpu_s", 0.0) + outcome.cpu_s
    if outcome.warn:
        result.warnings.append(f"{outcome.why}; the table was reduced in full")
    return result


def _attempt(
    source: TableSource,
    store: Store,
    leaves: list[LeafColumn],
    user: list[UserStatistic],
    options: AnalyzeOptions,
    executor: TaskRunner,
    allow_append: bool,
) -> AnalyzeResult | AppendFailed:
    started, job_id = time.perf_counter(), new_job_id()
    try:
        # the job's lease on its run: gc and expire keep its files until it commits or fails (#33)
        store.begin(source.name, job_id)
        plan = plan_job(source, store, leaves, user, options, job_id, executor, allow_append)
        outcome = _carry_over(plan, started) if isinstance(plan.mode, CarryOver) else _stages(plan, executor, started)
        if isinstance(outcome, AppendFailed):
            _stop(store, source.name, job_id, executor)
        return outcome
    except BaseException as exc:
        # stop every task of this job before deleting its run directory, or a
        # task still running would write files into it after the delete
        _stop(store, source.name, job_id, executor)
        executor.raise_failure(exc)  # a task's failure, as the user sees it
        raise


def _stop(store: Store, table: str, job_id: str, executor: TaskRunner) -> None:
    executor.stop(job_id)
    store.abort(table, job_id)


def _stages(plan: JobPlan, ex: TaskRunner, started: float) -> AnalyzeResult | AppendFailed:
    """Profile, reduce, merge, bin, write and publish: the job of a Full or an Append plan."""
    timings = dict(plan.timings)
    refs = JobRefs.of(plan, ex)
    t0 = time.perf_counter()
    wave = profile.first_wave(plan, refs, ex)
    appending = plan.append
    if appending is not None and (failed := append.after_loads(wave)) is not None:
        return failed  # an unloadable partition's counts are needed after all
    wave = profile.recompute(plan, refs, ex, wave)
    appended = append.submit(plan, appending, ex, wave) if appending is not None else None
    reductions = reduce.submit(plan, ex, wave) if appending is None else None
    wave = profile.second_wave(plan, refs, ex, wave)
    profiles = profile.collect(plan, ex, wave)
    timings["phase1_s"] = time.perf_counter() - t0
    merged = bins.merge(plan, profiles, wave)
    timings.update(merged.timings)
    pending = bins.submit(plan, refs, ex, wave, profiles, merged)
    redis = reduce.redis(plan, ex, wave, reductions.via_redis if reductions is not None else [])
    timings.update(redis.timings)
    if reductions is not None and reductions.frequencies is None:
        reductions = dataclasses.replace(reductions, frequencies=reduce.write_frequencies(plan, ex, reductions, redis.rows))
    binning = bins.collect(plan, ex, pending)
    timings.update(binning.timings)
    t0 = time.perf_counter()
    cpu_profile = sum(s.cpu_s for s in profiles.computed.values())
    cpu_inherit = sum(l.cpu_s for l in wave.loaded.values()) + (wave.table.cpu_s if wave.table is not None else 0.0)
    exact, counts_files = dict(redis.exact), []
    if appended is not None:
        got = append.collect(ex, appended, cpu_profile + cpu_inherit)
        if isinstance(got, AppendFailed):
            return got
        exact.update(got.exact)
        frequencies, cpu_reduce = got.segment, got.cpu_s
    else:
        assert reductions is not None
        reduced = reduce.collect(ex, reductions)
        exact.update(reduced.exact)
        frequencies, cpu_reduce, counts_files = reduced.table_frequencies, reduced.cpu_s, reduced.counts_files
    cpu0 = time.process_time()
    rows = sum(s.rows for s in profiles.summaries)
    state = write.table_state(plan, merged, rows)
    # written on the driver (its CPU counted as the tasks' is): the table's merged state for the next append
    cpu_state = time.process_time() - cpu0
    cpu = cpu_profile + cpu_inherit + timings["cpu_histograms_s"] + cpu_reduce + cpu_state
    timings.update(cpu_profile_s=cpu_profile, cpu_inherit_s=cpu_inherit, cpu_reduce_s=cpu_reduce, cpu_table_state_s=cpu_state, cpu_s=cpu)
    timings["reduce_wait_s"] = time.perf_counter() - t0
    t0 = time.perf_counter()
    table_files = write.table_files(plan, merged, exact, binning, frequencies)
    index = write.file_index(plan, ex, wave, profiles)
    timings.update(index.timings)
    plan.store.publish(publish.output(plan, profiles, binning, table_files, index.refs, exact, counts_files, state))
    timings["table_files_s"] = time.perf_counter() - t0
    reasons = {k: v for k, v in {**plan.reasons, **wave.reasons}.items() if k in profiles.computed}
    return AnalyzeResult(
        table=plan.table, job_id=plan.job_id, store=plan.store.root, snapshot=plan.snapshot, partitions=len(plan.partitions),
        rows=rows, columns=len(plan.leaves), elapsed_s=time.perf_counter() - started,
        run_uri=plan.store.run_uri(plan.table, plan.job_id), timings=timings, frequencies=redis.report,
        inherited=len(wave.loaded), recomputed=len(profiles.computed), rebinned=binning.rebinned, recompute_reasons=reasons,
        warnings=[*plan.warnings, *wave.warnings], histograms_guessed=binning.guessed_ok,
        nodes=dict(collections.Counter(n for s in profiles.computed.values() for n in s.nodes if n)),
        frequency_segments=1 + len(appending.segments) if appending is not None else 1,
        states_loaded=wave.states_loaded, table_state=wave.table is not None,
    )  # fmt: skip


def _carry_over(plan: JobPlan, started: float) -> AnalyzeResult:
    """Publish the unchanged table: every partition inherited, the table files named again."""
    assert isinstance(plan.mode, CarryOver)
    carried = plan.mode.table
    timings = dict(plan.timings)
    cpu = timings.get("cpu_inherit_s", 0.0)  # the checks'
    timings.update(cpu_s=cpu, cpu_profile_s=0.0, cpu_inherit_s=cpu, cpu_histograms_s=0.0, cpu_reduce_s=0.0)
    plan.store.publish(publish.carried_output(plan, carried))
    run_uri = plan.store.layout(plan.table).absolute(files_run(carried.files.statistics.path, carried.job_id))
    return AnalyzeResult(
        table=plan.table, job_id=plan.job_id, store=plan.store.root, snapshot=plan.snapshot, partitions=len(plan.partitions),
        rows=carried.row_count, columns=len(plan.leaves), elapsed_s=time.perf_counter() - started, run_uri=run_uri,
        timings=timings, inherited=len(plan.partitions), recompute_reasons=dict(plan.reasons), warnings=list(plan.warnings),
        carried_over=carried.properties.get(TABLE_FILES_JOB_PROPERTY) or carried.job_id,
        frequency_segments=1 + len(carried.properties.get(FREQUENCY_SEGMENTS_PROPERTY) or []),
    )  # fmt: skip


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
