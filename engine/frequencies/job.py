"""The distributed frequency job: partition tasks, the coordinator, one consolidation per column.

Per column, from its partitions' (non-null, distinct) counts, :func:`plan_column`
picks a scenario; then:

bloom    stream      every partition task sends the hashes of its distinct values through
                     the coordinator's Bloom filter (its own repeated values as forced
                     positives); positives land in a Redis hash
         broadcast   the positives go to every partition task (one Ray object)
         confirm     each task sends its values whose hash is a positive, with counts,
                     into one Redis hash; values counted more than once are the duplicates
hash     stream      every partition task sends its (value, count) into one Redis hash
batched  sample      tasks return samples; the driver picks split points
         stream      each task sends each value range into that range's hash
all      collect     a task reads the hash(es) back with HSCAN and orders by decreasing count

hash and batched, strings whose partition counts carry their theta hashes (hash fields):
         stream      every task sends (hash, count): 8-byte fields (batched: by hash range)
         collect     a task reads the hashes back and keeps those the table file stores
         resolve     each task returns its (hash, value) pairs of those hashes
         finish      a task checks that every hash stands for one value across partitions
                     and orders the stored rows; on a collision the column is rerun with
                     its values' bytes as fields

Partition tasks do not read data: they take their partition's exact value counts
from the Ray object store (the analyze job's phase-1 outputs, or
:func:`partition_counts` tasks). See docs/FREQUENCIES.md.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeAlias

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import ray

from engine import types as mt
from engine.arrowcompute import contiguous
from engine.exceptions import AnalyzeError, MetastoreError, ServiceError
from engine.files import layout, writer
from engine.frequencies import keys, plan, redis_ops
from engine.frequencies.coordinator import MonostoreActor, placement
from engine.frequencies.hashing import value_hashes
from engine.frequencies.plan import BATCHED, BLOOM, HASH_FIELDS, VALUE_FIELDS, ColumnPlan, FrequencySettings, PartitionCounts
from engine.frequencies.redis_ops import Stage
from engine.frequencies.resp import RespPipe
from engine.stats import selection, stringsort
from engine.stats.stringparts import SharedHash, StringParts
from engine.stats.valuecounts import HASH as HASH_COLUMN
from engine.stats.valuecounts import batch_value_counts, counts_hashed, exact_percentiles, frequency_order, hashed_counts, merge_counts, widen_counts

if TYPE_CHECKING:
    import redis

ProgressCallback = Callable[[str, int, int], None]


class FrequencyError(MetastoreError):
    """The distributed frequency job could not finish a column."""


class HashCollision(Exception):
    """Two different values of a column share a 64-bit hash: the hash-field stage cannot be exact.

    Not an error: the driver reruns the column with the values' bytes as fields."""


@dataclass(frozen=True)
class ColumnInput:
    """One column to consolidate: where each partition's exact (value, count) table is."""

    name: str
    type: pa.DataType
    index: int  # position in the table (Redis keys use it)
    parts: tuple[PartitionCounts, ...]
    refs: tuple[Any, ...]  # per partition: an ObjectRef of a (value, count) table or of {column: table}


@dataclass
class ColumnFrequencies:
    """The table-level result of one column, with how it was obtained."""

    name: str
    scenario: str
    batches: int
    kind: str  # layout.FREQ_*
    stored: pa.Table  # the rows frequencies.parquet keeps (value, count), by decreasing count
    distinct_count: int
    percentiles: dict[str, Any] = field(default_factory=dict)
    fields_sent: int = 0  # field updates sent to Redis
    positives: int = 0  # Bloom positives (true and false)
    bloom_bytes: int = 0  # the coordinator's filter for this column
    attempts: int = 1
    seconds: dict[str, float] = field(default_factory=dict)
    fields: str = VALUE_FIELDS  # what the Redis fields held (plan.VALUE_FIELDS or plan.HASH_FIELDS)
    resolved: int = 0  # hash fields: (hash, value) pairs the partition tasks returned to resolve the stored hashes
    collision: str = ""  # why a hash-field stage was given up for value fields (a hash collision), if it was


# ---------------------------------------------------------------- task bodies
#: what a partition task hands the frequency tasks: a column's value counts, or a table's by column
PartitionCountsObject: TypeAlias = "pa.Table | dict[str, pa.Table]"


def _counts_of(obj: PartitionCountsObject, column: str) -> pa.Table:
    """A column's value counts from a partition task's object (int64 counts: tasks ship them narrowed)."""
    return widen_counts(obj[column] if isinstance(obj, dict) else obj)


def _crash_hook(settings: FrequencySettings) -> Callable[[], None] | None:
    """Fault injection for tests: a per-batch callback that exits the worker once,
    after ``crash_after_batches`` batches, when a marker path is set."""
    marker = settings.crash_marker
    if not marker:
        return None
    sent = [0]

    def after_batch() -> None:
        sent[0] += 1
        if sent[0] == settings.crash_after_batches and not os.path.exists(marker):
            with open(marker, "w") as f:
                f.write(str(os.getpid()))
            os._exit(1)

    return after_batch


def bloom_stream(
    coordinator: Any, stage: Stage, part: int, column: str, settings: FrequencySettings, obj: PartitionCountsObject
) -> tuple[int, float]:
    """Returns (hashes sent, this task's CPU seconds)."""
    c0 = time.process_time()
    counts = _counts_of(obj, column)
    if counts.num_rows == 0:
        return 0, time.process_time() - c0
    hashes = value_hashes(contiguous(counts["value"]))
    repeated = hashes[counts["count"].to_numpy() > 1]
    bs = settings.bloom_batch_size
    hook = _crash_hook(settings)
    if hook is None:
        # every batch in flight at once: the actor applies them in order while this task waits once
        calls = [
            coordinator.bloom_add.remote(stage, f"{part}:{b}", hashes[start : start + bs], repeated if b == 0 else _NO_HASHES)
            for b, start in enumerate(range(0, len(hashes), bs))
        ]
        ray.get(calls)
        return len(hashes), time.process_time() - c0
    for b, start in enumerate(range(0, len(hashes), bs)):  # fault injection: one batch at a time
        ray.get(coordinator.bloom_add.remote(stage, f"{part}:{b}", hashes[start : start + bs], repeated if b == 0 else _NO_HASHES))
        hook()
    return len(hashes), time.process_time() - c0


_NO_HASHES = np.zeros(0, np.uint64)


def confirm(
    url: str, stage: Stage, part: int, column: str, settings: FrequencySettings, positives: pa.Array, obj: PartitionCountsObject
) -> tuple[int, float]:
    """Returns (fields sent, this task's CPU seconds)."""
    c0 = time.process_time()
    counts = _counts_of(obj, column)
    if counts.num_rows == 0 or len(positives) == 0:
        return 0, time.process_time() - c0
    hashes = value_hashes(contiguous(counts["value"]))
    # a hash-set probe per value (Arrow's is_in): ~6x faster than a binary search in the sorted positives
    candidates = counts.filter(pc.is_in(pa.array(hashes), value_set=positives))
    with RespPipe(url) as pipe:
        sent = redis_ops.stream_counts(pipe, stage, part, candidates, settings.batch_size, label="c", on_batch=_crash_hook(settings))
    return sent, time.process_time() - c0


def sample_values(column: str, size: int, seed: int, obj: PartitionCountsObject) -> pa.Array:
    return plan.sample(contiguous(_counts_of(obj, column)["value"]), size, seed)


def stream(
    url: str, stage: Stage, part: int, column: str, settings: FrequencySettings, points: pa.Array | None, obj: PartitionCountsObject
) -> tuple[int, float]:
    """Returns (fields sent, this task's CPU seconds)."""
    c0 = time.process_time()
    counts = _counts_of(obj, column)
    if counts.num_rows == 0:
        return 0, time.process_time() - c0
    sent = 0
    hook = _crash_hook(settings)
    with RespPipe(url) as pipe:
        if points is None or len(points) == 0:
            sent = redis_ops.stream_counts(pipe, stage, part, counts, settings.batch_size, on_batch=hook)
        else:
            ranges = plan.range_of(contiguous(counts["value"]), points)
            for r in range(len(points) + 1):
                subset = counts.filter(pa.array(ranges == r))
                if subset.num_rows:
                    sent += redis_ops.stream_counts(pipe, stage, part, subset, settings.batch_size, hash_batch=r, on_batch=hook)
    return sent, time.process_time() - c0


def collect(
    url: str, stage: Stage, scenario: str, batches: int, type_: pa.DataType, non_null: int, mostly_distinct_ratio: float
) -> tuple[str, pa.Table, int, dict[str, Any], float]:
    """Read the consolidated hash(es): (kind, stored rows by decreasing count, distinct count, percentiles, CPU seconds)."""
    c0 = time.process_time()
    client = redis_ops.connect(url)
    try:
        tables = [redis_ops.read_hash(client, stage.hash(b), type_) for b in range(batches)]
    finally:
        client.close()
    counts = pa.concat_tables(tables) if tables else pa.table({"value": pa.array([], type_), "count": pa.array([], pa.int64())})
    if scenario == BLOOM:
        dups = counts.filter(pc.greater(counts["count"], 1))
        extra = int(pc.sum(dups["count"]).as_py() or 0) - dups.num_rows
        distinct = non_null - extra
        if dups.num_rows == 0:
            return layout.FREQ_ALL_DISTINCT, dups, distinct, {}, time.process_time() - c0
        return layout.FREQ_DUPLICATES_ONLY, frequency_order(dups), distinct, {}, time.process_time() - c0
    kind, stored = writer.stored_frequencies(counts, non_null, mostly_distinct_ratio)  # the Ray reduction's rule
    pct = exact_percentiles(counts) if mt.has_percentiles(type_) else {}
    return kind, stored, counts.num_rows, pct, time.process_time() - c0


# ---- hash fields: strings consolidated by their theta hashes, then resolved to values
#: stream_hashes statuses
STREAMED, COLLIDED, UNHASHED = "streamed", "collided", "unhashed"


def _hashes_of(counts: pa.Table) -> np.ndarray:
    return contiguous(counts[HASH_COLUMN]).to_numpy(zero_copy_only=False)


def stream_hashes(
    url: str, stage: Stage, part: int, column: str, settings: FrequencySettings, points: np.ndarray | None, obj: PartitionCountsObject
) -> tuple[int, float, str]:
    """Send the partition's (theta hash, count) pairs: 8-byte fields. Returns (fields sent,
    this task's CPU seconds, status).

    Status ``collided`` (nothing sent) when two of the partition's values share a hash: its
    counts hold them as two rows of one hash, which Redis would merge. Across partitions
    a collision adds two counts under one hash, so that hash is counted at least twice
    and is among those :func:`resolve` returns. ``unhashed``: the counts carry no hashes.
    """
    c0 = time.process_time()
    counts = _counts_of(obj, column)
    if counts.num_rows == 0:
        return 0, time.process_time() - c0, STREAMED
    if not counts_hashed(counts):
        return 0, time.process_time() - c0, UNHASHED
    h = _hashes_of(counts)
    if len(h) > 1 and not bool((h[1:] > h[:-1]).all()):  # hash order, each hash once
        return 0, time.process_time() - c0, COLLIDED
    pairs = pa.table({"value": pa.array(h, pa.uint64()), "count": counts["count"]})
    hook = _crash_hook(settings)
    sent = 0
    with RespPipe(url) as pipe:
        if points is None or len(points) == 0:
            sent = redis_ops.stream_counts(pipe, stage, part, pairs, settings.batch_size, on_batch=hook)
        else:
            # range r holds points[r-1] <= hash < points[r]: a contiguous slice of hash-ordered counts
            edges = [0, *np.searchsorted(h, points, side="left").tolist(), len(h)]
            for r in range(len(points) + 1):
                if edges[r + 1] > edges[r]:
                    subset = pairs.slice(edges[r], edges[r + 1] - edges[r])
                    sent += redis_ops.stream_counts(pipe, stage, part, subset, settings.batch_size, hash_batch=r, on_batch=hook)
    return sent, time.process_time() - c0, STREAMED


def collect_hashes(url: str, stage: Stage, batches: int, non_null: int, mostly_distinct_ratio: float) -> tuple[tuple[str, int, int, float], pa.Table]:
    """Read the consolidated hash(es) of hash fields: ((kind, distinct, hashes kept, CPU
    seconds), the kept (hash, count) in hash order).

    Kept: the hashes whose values the table file stores (the Ray reduction's rule:
    all, those counted more than once, or none). They include every hash counted
    more than once, hence every hash two partitions share, so resolving them checks
    every possible collision across partitions.
    """
    c0 = time.process_time()
    client = redis_ops.connect(url)
    try:
        tables = [redis_ops.read_hash(client, stage.hash(b), pa.uint64()) for b in range(batches)]
    finally:
        client.close()
    h = np.concatenate([t["value"].to_numpy() for t in tables]) if tables else np.zeros(0, np.uint64)
    c = np.concatenate([t["count"].to_numpy() for t in tables]) if tables else np.zeros(0, np.int64)
    order = np.argsort(h)
    h, c = h[order], c[order]
    kind = writer.frequency_kind(len(h), non_null, mostly_distinct_ratio)
    if kind == layout.FREQ_ALL_DISTINCT:
        keep = np.zeros(0, np.int64)
    elif kind == layout.FREQ_DUPLICATES_ONLY:
        keep = np.flatnonzero(c > 1)
    else:
        keep = np.arange(len(h))
    kept = pa.table({"hash": pa.array(h[keep], pa.uint64()), "count": pa.array(c[keep], pa.int64())})
    return (kind, len(h), len(keep), time.process_time() - c0), kept


def resolve(column: str, wanted: pa.Table, obj: PartitionCountsObject) -> tuple[pa.Table, float]:
    """The partition's (hash, value) pairs of the ``wanted`` hashes (both in hash order), and
    this task's CPU seconds: what the table file needs of its values, and what the
    collision check compares."""
    c0 = time.process_time()
    counts = _counts_of(obj, column)
    if counts.num_rows == 0 or wanted.num_rows == 0:
        t = counts.schema.field("value").type
        return pa.table({"hash": pa.array([], pa.uint64()), "value": pa.array([], t)}), time.process_time() - c0
    h = _hashes_of(counts)
    w = contiguous(wanted["hash"]).to_numpy(zero_copy_only=False)
    at = np.minimum(np.searchsorted(w, h), len(w) - 1)
    hits = np.flatnonzero(w[at] == h)
    values = contiguous(counts["value"]).take(pa.array(hits))
    return pa.table({"hash": pa.array(h[hits], pa.uint64()), "value": values}), time.process_time() - c0


def finish_hashes(type_: pa.DataType, wanted: pa.Table, *hits: pa.Table) -> tuple[pa.Table, int, float]:
    """The stored (value, count) rows by decreasing count, then value, from the kept hashes
    and the partitions' (hash, value) pairs; returns (rows, pairs compared, CPU seconds).

    Raises :class:`HashCollision` when one hash stands for two different values
    (compared byte for byte where the pairs lie: engine.stats.stringparts), and
    FrequencyError when a kept hash
    is held by no partition (the hash was written by someone else).
    """
    c0 = time.process_time()
    parts = [t for t in hits if t.num_rows]
    w = contiguous(wanted["hash"]).to_numpy(zero_copy_only=False)
    if not parts:
        if len(w):
            raise FrequencyError(f"{len(w)} consolidated hashes are held by no partition")
        return pa.table({"value": pa.array([], type_), "count": pa.array([], pa.int64())}), 0, time.process_time() - c0
    hashes = np.concatenate([contiguous(t["hash"]).to_numpy(zero_copy_only=False) for t in parts])
    strings = StringParts([t["value"] for t in parts], type_)
    order = np.argsort(hashes, kind="stable")  # the partitions' runs are in hash order: a merge
    h = hashes[order]
    try:  # every pair but the first of its hash must hold the value of the pair before it
        rows, _ = strings.group(order, h, np.ones(len(h), np.int64))
    except SharedHash as exc:
        raise HashCollision(f"a hash stands for two different values, e.g. {int(h[exc.position]):#018x}") from None
    kept = hashes[rows]
    if not np.array_equal(kept, w):
        raise FrequencyError(f"{len(w) - len(np.intersect1d(kept, w))} consolidated hashes are held by no partition")
    stored = pa.table({"value": strings.take(rows), "count": wanted["count"]})
    return frequency_order(stored), len(h), time.process_time() - c0


def percentiles_task(column: str, type_: pa.DataType, *objs: PartitionCountsObject) -> dict[str, Any]:
    return selection.percentiles_of_runs([_counts_of(o, column) for o in objs], type_)


_bloom_task = ray.remote(max_retries=3)(bloom_stream)
_confirm_task = ray.remote(max_retries=3)(confirm)
_sample_task = ray.remote(sample_values)
_stream_task = ray.remote(max_retries=3)(stream)
_collect_task = ray.remote(num_returns=1)(collect)
_stream_hashes_task = ray.remote(max_retries=3)(stream_hashes)
# Any: Ray's annotations give one ObjectRef per call whatever ``num_returns`` says (here two refs)
_collect_hashes_task: Any = ray.remote(num_returns=2)(collect_hashes)
_resolve_task: Any = ray.remote(num_returns=2, max_retries=3)(resolve)
_finish_hashes_task = ray.remote(finish_hashes)
_percentiles_task = ray.remote(percentiles_task)


# ---------------------------------------------------------------- driver
def start_coordinator(redis_url: str | None = None) -> Any:
    """The job's coordinator actor (it starts its own redis-server unless given a URL),
    placed by :func:`engine.frequencies.coordinator.placement`."""
    options, cluster = placement()
    actor = MonostoreActor.options(**options).remote(redis_url, cluster=cluster)
    ray.get(actor.info.remote())  # surface start-up errors (no redis-server binary...) here
    return actor


def _alive(coordinator: Any, timeout_s: float = 60.0) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            return ray.get(coordinator.info.remote(), timeout=10)
        except (ray.exceptions.RayActorError, ray.exceptions.GetTimeoutError) as exc:
            if time.monotonic() > deadline:
                raise FrequencyError(f"the frequency coordinator did not come back: {exc}") from exc
            time.sleep(0.2)


@dataclass(frozen=True)
class StageRun:
    """One attempt at one column's stage: what its steps read. A rerun (lost state, or a
    hash collision that falls back to value fields) is a new ``StageRun``, never a changed one."""

    col: ColumnInput
    cplan: ColumnPlan
    stage: Stage
    coordinator: Any
    url: str
    settings: FrequencySettings
    mostly_distinct_ratio: float
    fields: str = VALUE_FIELDS


def _run_stage(run: StageRun) -> ColumnFrequencies:
    client = redis_ops.connect(run.url)
    try:
        return _run_stage_with(client, run)
    finally:
        client.close()


def _run_stage_with(client: redis.Redis, run: StageRun) -> ColumnFrequencies:
    col, cplan, stage, coordinator, url, settings = run.col, run.cplan, run.stage, run.coordinator, run.url, run.settings
    t0 = time.perf_counter()
    seconds: dict[str, float] = {}
    positives = 0
    sent = 0
    cpu0 = redis_ops.server_cpu_seconds(client)  # Redis's own CPU per phase: the load-independent cost

    def redis_cpu(phase: str) -> None:
        nonlocal cpu0
        now = redis_ops.server_cpu_seconds(client)
        seconds[f"{phase}_redis_cpu_s"] = now - cpu0
        cpu0 = now

    if run.fields == HASH_FIELDS:
        return _run_hash_fields(run, t0, seconds, redis_cpu)

    if cplan.scenario == BLOOM:
        sized = ray.get(coordinator.bloom_open.remote(stage, cplan.total_distinct, settings.bloom_fpr, settings.bloom_max_bytes))
        done = ray.get([_bloom_task.remote(coordinator, stage, i, col.name, settings, ref) for i, ref in enumerate(col.refs)])
        seconds["bloom_s"] = time.perf_counter() - t0
        seconds["bloom_tasks_cpu_s"] = sum(c for _, c in done)
        ray.get(coordinator.bloom_close.remote(stage))
        # the driver, not the coordinator, reads the positives: the coordinator never holds values or hashes
        pos = redis_ops.read_positive_hashes(client, stage.positives)
        redis_cpu("bloom")
        positives = len(pos)
        t1 = time.perf_counter()
        if positives:
            pos_ref = ray.put(pa.array(pos, pa.uint64()))  # broadcast once; every task reads the same object
            done = ray.get([_confirm_task.remote(url, stage, i, col.name, settings, pos_ref, ref) for i, ref in enumerate(col.refs)])
            sent = sum(n for n, _ in done)
            seconds["confirm_tasks_cpu_s"] = sum(c for _, c in done)
        seconds["confirm_s"] = time.perf_counter() - t1
        redis_cpu("confirm")
    else:
        points = None
        if cplan.scenario == BATCHED:
            t1 = time.perf_counter()
            samples = ray.get([_sample_task.remote(col.name, settings.sample_size, i, ref) for i, ref in enumerate(col.refs)])
            points = plan.split_points(samples, cplan.batches)
            seconds["sample_s"] = time.perf_counter() - t1
        t1 = time.perf_counter()
        redis_cpu("setup")
        done = ray.get([_stream_task.remote(url, stage, i, col.name, settings, points, ref) for i, ref in enumerate(col.refs)])
        sent = sum(n for n, _ in done)
        seconds["stream_s"] = time.perf_counter() - t1
        seconds["stream_tasks_cpu_s"] = sum(c for _, c in done)
        redis_cpu("stream")
    batches = 1 if cplan.scenario != BATCHED else len(points) + 1  # type: ignore[arg-type]  # points is set in the batched scenario (sampled above)
    t1 = time.perf_counter()
    pct_ref = None
    if cplan.scenario == BLOOM and mt.has_percentiles(col.type) and selection.supported(col.type):
        pct_ref = _percentiles_task.remote(col.name, col.type, *col.refs)
    kind, stored, distinct, pct, collect_cpu = ray.get(
        _collect_task.remote(url, stage, cplan.scenario, batches, col.type, cplan.non_null, run.mostly_distinct_ratio)
    )
    if pct_ref is not None:
        pct = ray.get(pct_ref)
    seconds["collect_s"] = time.perf_counter() - t1
    seconds["collect_task_cpu_s"] = collect_cpu
    redis_cpu("collect")
    seconds["total_s"] = time.perf_counter() - t0
    result = ColumnFrequencies(col.name, cplan.scenario, batches, kind, stored, distinct, pct, sent, positives, seconds=seconds)
    if cplan.scenario == BLOOM:
        result.bloom_bytes = int(sized["bytes"])
    return result


def _run_hash_fields(run: StageRun, t0: float, seconds: dict[str, float], redis_cpu: Callable[[str], None]) -> ColumnFrequencies:
    """Scenarios 2 and 3 with theta-hash fields: stream, collect, resolve, finish.

    Raises :class:`HashCollision` when the hashes cannot stand for the values
    (two values of a partition, or of two partitions, share one).
    """
    col, cplan, stage, url, settings = run.col, run.cplan, run.stage, run.url, run.settings
    points = plan.hash_split_points(cplan.batches) if cplan.scenario == BATCHED else None
    batches = 1 if points is None else len(points) + 1
    redis_cpu("setup")
    t1 = time.perf_counter()
    done = ray.get([_stream_hashes_task.remote(url, stage, i, col.name, settings, points, ref) for i, ref in enumerate(col.refs)])
    sent = sum(n for n, _, _ in done)
    seconds["stream_s"] = time.perf_counter() - t1
    seconds["stream_tasks_cpu_s"] = sum(c for _, c, _ in done)
    redis_cpu("stream")
    statuses = [st for _, _, st in done]
    if COLLIDED in statuses:
        raise HashCollision(f"two values of partition {statuses.index(COLLIDED)} share a hash")
    if UNHASHED in statuses:  # the plan said hashed, the object is not: fall back all the same
        raise HashCollision(f"partition {statuses.index(UNHASHED)}'s counts carry no hashes")
    t1 = time.perf_counter()
    meta_ref, wanted_ref = _collect_hashes_task.remote(url, stage, batches, cplan.non_null, run.mostly_distinct_ratio)
    kind, distinct, kept, collect_cpu = ray.get(meta_ref)
    seconds["collect_s"] = time.perf_counter() - t1
    seconds["collect_task_cpu_s"] = collect_cpu
    redis_cpu("collect")
    t1 = time.perf_counter()
    resolved = 0
    if kept:
        pairs = [_resolve_task.remote(col.name, wanted_ref, ref) for ref in col.refs]
        finish_ref = _finish_hashes_task.remote(col.type, wanted_ref, *[p[0] for p in pairs])
        try:
            stored, resolved, finish_cpu = ray.get(finish_ref)
        except ray.exceptions.RayTaskError as exc:
            if isinstance(getattr(exc, "cause", None), HashCollision):
                raise HashCollision(str(exc.cause)) from None
            raise
        seconds["resolve_tasks_cpu_s"] = sum(ray.get([p[1] for p in pairs]))
        seconds["finish_task_cpu_s"] = finish_cpu
    else:
        stored = pa.table({"value": pa.array([], col.type), "count": pa.array([], pa.int64())})
    seconds["resolve_s"] = time.perf_counter() - t1
    seconds["total_s"] = time.perf_counter() - t0
    result = ColumnFrequencies(
        col.name, cplan.scenario, batches, kind, stored, distinct, {}, sent, seconds=seconds, fields=HASH_FIELDS, resolved=resolved
    )
    return result


def _drop_stage(url: str, stage: Stage) -> None:
    """Best effort: the job's clean-up removes whatever this leaves."""
    try:
        client = redis_ops.connect(url)
        try:
            redis_ops.delete_stage_keys(client, stage)
        finally:
            client.close()
    except Exception:
        pass


def consolidate(
    columns: Sequence[ColumnInput],
    job_id: str,
    settings: FrequencySettings = FrequencySettings(),
    mostly_distinct_ratio: float = 0.5,
    coordinator: Any = None,
    redis_url: str | None = None,
    progress: ProgressCallback | None = None,
) -> dict[str, ColumnFrequencies]:
    """Exact table-level frequencies of ``columns``; Redis keys of ``job_id`` are removed at the end, also on failure."""
    own = coordinator is None
    if own:
        coordinator = start_coordinator(redis_url)
    results: dict[str, ColumnFrequencies] = {}
    try:
        url = _alive(coordinator)["url"]
        for done, col in enumerate(columns):
            if not keys.supported(col.type):
                raise FrequencyError(f"column {col.name!r}: type {col.type} has no Redis frequency encoding")
            cplan = plan.plan_column(col.parts, settings)
            fields = plan.fields_for(cplan, col.type, col.parts, settings)
            if progress:
                progress(f"frequencies {col.name} ({cplan.scenario})", done, len(columns))
            last: Exception | None = None
            collision = ""
            attempt = failures = 0
            while True:
                stage = Stage(job_id, attempt, col.index)  # every attempt has its own keys
                attempt += 1
                try:
                    incarnation = ray.get(coordinator.begin.remote(stage))
                    result = _run_stage(StageRun(col, cplan, stage, coordinator, url, settings, mostly_distinct_ratio, fields))
                    if ray.get(coordinator.intact.remote(stage, incarnation)):
                        result.attempts = attempt
                        result.collision = collision
                        results[col.name] = result
                        _drop_stage(url, stage)  # Redis holds one column stage at a time
                        break
                    last = FrequencyError(f"column {col.name!r}: Redis or the coordinator lost the stage's state")
                except HashCollision as exc:
                    # exact fallback: the values' bytes as fields; not a failure, the data says so
                    collision, fields = str(exc), VALUE_FIELDS
                    _drop_stage(url, stage)
                    continue
                except (ray.exceptions.RayActorError, ray.exceptions.RayTaskError) as exc:
                    cause = getattr(exc, "cause", None)
                    # a task that lost Redis for good (its coordinator died with the embedded
                    # server, which comes back on another port) fails the stage, not the job
                    if isinstance(cause, MetastoreError) and not isinstance(cause, ServiceError):
                        raise type(cause)(str(cause)) from None
                    last = exc
                failures += 1
                if failures >= settings.max_attempts:
                    raise FrequencyError(f"column {col.name!r}: frequencies failed after {settings.max_attempts} attempts: {last}")
                # rerun the stage from scratch under a new attempt (its keys are namespaced)
                url = _alive(coordinator)["url"]
                redis_ops.wait_until_up(url)
        if progress:
            progress("frequencies", len(columns), len(columns))
        return results
    finally:
        try:
            ray.get(coordinator.cleanup.remote(job_id), timeout=60)
        except Exception:
            pass
        if own:
            try:
                ray.get(coordinator.shutdown.remote(), timeout=30)
            except Exception:
                pass
            ray.kill(coordinator)


# ---------------------------------------------------------------- standalone use (tests, benchmarks, CLI)
def partition_counts(source: Any, partition: Any, column: str, batch_size: int = 128 * 1024) -> tuple[PartitionCounts, pa.Table]:
    """A partition's exact (value, count) of one column: what a partition task holds.

    Strings and binaries are in theta-hash order with their hashes, as analyze's
    phase 1 leaves them (engine.stats.profile), so that standalone runs and the
    benchmark take the same path as analyze.
    """
    parts = []
    t = None
    for batch in source.read_batches(partition, [column], batch_size=batch_size):
        arr = batch.column(0)
        t = arr.type
        parts.append(batch_value_counts(arr))
    if t is None:
        t = source.schema().field(column).type
    counts = merge_counts(parts, t) if parts else pa.table({"value": pa.array([], t), "count": pa.array([], pa.int64())})
    if stringsort.supports(t) and counts.num_rows:
        counts = _in_hash_order(counts)
    non_null = int(pc.sum(counts["count"]).as_py() or 0)
    return PartitionCounts(non_null, counts.num_rows, counts_hashed(counts)), counts


def _in_hash_order(counts: pa.Table) -> pa.Table:
    """Value counts in theta-hash order with the hashes."""
    from engine.stats.sketches import theta_hashes_bytes

    values = contiguous(counts["value"])
    hashes = theta_hashes_bytes(values)
    order = np.argsort(hashes)
    return hashed_counts(values.take(pa.array(order)), counts["count"].to_numpy()[order], hashes[order])


# Any: two refs per call (``num_returns=2``), which Ray's annotations do not express
_partition_counts_task: Any = ray.remote(num_returns=2)(partition_counts)


def column_input(source: Any, column: str) -> ColumnInput:
    """One column of a table source, its partitions' value counts computed by one task each."""
    schema = source.schema()
    if column not in schema.names:
        raise AnalyzeError(f"{source.uri}: no column {column!r} (columns: {', '.join(schema.names)})")
    src = ray.put(source)
    pairs = [_partition_counts_task.remote(src, p, column) for p in source.partitions()]
    parts = tuple(ray.get([p[0] for p in pairs]))
    return ColumnInput(column, schema.field(column).type, schema.names.index(column), parts, tuple(p[1] for p in pairs))


def table_frequencies(
    source: Any,
    column: str,
    settings: FrequencySettings = FrequencySettings(),
    redis_url: str | None = None,
    job_id: str | None = None,
    coordinator: Any = None,
) -> ColumnFrequencies:
    """Exact table-level frequencies of one column of a table source (one task per partition)."""
    import uuid

    col = column_input(source, column)
    return consolidate([col], job_id or uuid.uuid4().hex[:12], settings, coordinator=coordinator, redis_url=redis_url)[column]
