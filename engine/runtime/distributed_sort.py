"""Exact ranks and quantiles of one column by a distributed sample sort on Ray.

The data never passes through the driver (but see "one round" below):

1. one *prepare* task per group of partitions (about one per CPU, balanced by
   rows; a large multi-file partition is read one file per task) reads the
   column, encodes its values as keys, sorts them (fixed-width keys) or counts
   them into (value, count) runs (few distinct values), keeps them in the object
   store and returns a small regular sample and its counts (values, nulls, NaN);
2. the driver picks R-1 split points from the samples, in the order of
   (value, partition, position) so that heavy ties spread over ranges;
3. one *merge* task per range merges its pieces into the range's sorted keys
   (kept in the object store) and returns its first and last key and the keys at
   the ranks asked for up front (a one-shot quantile query needs no further round).

Where the pieces come from (``shuffle``): on one node, with fixed-width keys,
each merge task cuts its piece out of every partition's sorted keys itself
(``"shared"``: the keys are shared memory, and every task can compute every
range's size, hence the global offsets). Otherwise a *split* round of one task
per partition (``num_returns=R+1``) cuts every partition into R objects first,
so only a range's own pieces travel to it (``"pieces"``).

One round (:func:`quantiles`, a one-shot query): when partitions were counted
into runs and all their keys are few (DRIVER_MERGE_MAX_ENTRIES), the driver
fetches them after the prepare round and merges them itself, as the one merge
task of a single range would: a column with tens of thousands of distinct values
then costs one round of tasks, not two. Otherwise its merge tasks return only the
picked keys and keep no sorted range.

Later queries (:meth:`SortedColumn.value_at_rank`, :meth:`SortedColumn.rank_of`,
:meth:`SortedColumn.quantiles`) send one small task to each range they touch.
The kernels, and the definitions of ranks, ties, NaN and nulls, are in
engine/stats/ranks.py; docs/QUANTILES.md describes the whole.
"""

from __future__ import annotations

import math
import operator
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import ray

from engine import config
from engine.exceptions import InvalidArgumentError, MetastoreError
from engine.runtime import sort_tasks
from engine.runtime.ray_runtime import environment_for_tasks
from engine.sources.base import TableSource
from engine.stats import ranks

__all__ = ["ColumnQuantiles", "SortedColumn", "quantiles", "sort_column"]

#: A range holds at least this many values (fewer ranges for small columns).
MIN_RANGE_VALUES = 100_000
#: Prepare tasks per CPU of the cluster (partitions are grouped to about this many,
#: balanced by rows). One: every task repeats some work per distinct value (the hash
#: table, the sort of the distinct values, the driver's merge of their runs) and
#: opens its files; measured on the sample table (2 CPUs, interleaved runs), one
#: task per CPU cost 10-25% less CPU and wall time than two on price and amount;
#: on the all-distinct event_time the same wall time, ~10% more CPU.
PREPARE_TASKS_PER_CPU = 1


# ============================================================== tasks
def _options(**options: Any) -> dict[str, Any]:
    env = environment_for_tasks(config.FORWARDED_PREFIXES)
    if env:
        options["runtime_env"] = {"env_vars": env}
    return options


#: the task bodies (engine/runtime/sort_tasks.py) as Ray tasks
_prepare_task = ray.remote(num_cpus=1)(sort_tasks.prepare_unit)
_split_task = ray.remote(num_cpus=1)(sort_tasks.split_unit)
_merge_task = ray.remote(num_cpus=1)(sort_tasks.merge_range)
_merge_shared_task = ray.remote(num_cpus=1)(sort_tasks.merge_shared_range)
_pick_task = ray.remote(num_cpus=1)(sort_tasks.pick)
_search_task = ray.remote(num_cpus=1)(sort_tasks.search)
#: which partitions each prepare task reads (a name the tests use)
_units = sort_tasks.units


# ============================================================== driver
@dataclass(frozen=True)
class _Range:
    ref: Any  # ObjectRef of the range's sorted keys
    count: int
    offset: int
    first: Any
    last: Any


@dataclass
class SortedColumn:
    """A column sorted across the cluster: its ranges live in Ray's object store.

    Valid while this Ray session runs; ``close()`` (or leaving a ``with`` block)
    frees the ranges. ``count`` is the number of non-null values (NaN included,
    ordered after every number); nulls are excluded and counted in ``null_count``.
    """

    column: str
    type: pa.DataType
    codec: ranks.KeyCodec
    count: int
    null_count: int
    nan_count: int
    _ranges: list[_Range]
    timings: dict[str, Any] = field(default_factory=dict)

    _closed: bool = False

    # ---------------------------------------------------------- lifetime
    def close(self) -> None:
        """Free the ranges (Ray frees an object once no reference to it is left)."""
        self._ranges = []
        self._closed = True

    def __enter__(self) -> SortedColumn:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _check(self) -> None:
        if self._closed:
            raise InvalidArgumentError(f"the sorted column {self.column!r} was closed")

    @property
    def offsets(self) -> list[int]:
        """The ranges' first global ranks, then the total."""
        return [r.offset for r in self._ranges] + [self.count]

    @property
    def range_counts(self) -> list[int]:
        return [r.count for r in self._ranges]

    # ---------------------------------------------------------- queries
    def values_at_ranks(self, rank_list: Sequence[int]) -> list[Any]:
        """The values at 0-based ranks (Python values of the column's type)."""
        self._check()
        wanted: dict[int, list[tuple[int, int]]] = {}
        for i, r in enumerate(rank_list):
            try:
                if isinstance(r, bool):
                    raise TypeError
                r = operator.index(r)
            except TypeError:
                raise InvalidArgumentError(f"rank {r!r} is not an integer") from None
            k, local = ranks.ranges_for_rank(self.offsets, r)
            wanted.setdefault(k, []).append((i, local))
        out: list[Any] = [None] * len(rank_list)
        refs = {k: _pick_task.options(**_options()).remote(self._ranges[k].ref, [p for _, p in items]) for k, items in wanted.items()}
        for k, ref in refs.items():
            values = self.codec.to_python(_get(ref))
            for (i, _), v in zip(wanted[k], values):
                out[i] = v
        return out

    def value_at_rank(self, rank: int) -> Any:
        """The rank-th smallest value (0-based; ``0 <= rank < count``)."""
        return self.values_at_ranks([rank])[0]

    def rank_of(self, value: object, inclusive: bool = False) -> int:
        """How many values are ``< value`` (``<= value`` with ``inclusive``)."""
        self._check()
        key = self.codec.encode_value(value)
        k = ranks.ranges_for_count([r.last for r in self._ranges], self.range_counts, key, inclusive)
        if k is None:
            return self.count
        r = self._ranges[k]
        within = _get(_search_task.options(**_options()).remote(r.ref, key, "right" if inclusive else "left"))
        return r.offset + int(within)

    def count_of(self, value: object) -> int:
        """How often ``value`` occurs."""
        return self.rank_of(value, inclusive=True) - self.rank_of(value)

    def quantile_ranks(self, probabilities: Sequence[object]) -> list[int | None]:
        """The 0-based ranks of the quantiles (None for each when there are no values)."""
        return ranks.ranks_for(self.count, probabilities)

    def quantiles(self, probabilities: Sequence[object]) -> list[Any]:
        """Exact quantiles (DuckDB's ``quantile_disc``); None for each when there are no values."""
        self._check()
        rs = self.quantile_ranks(probabilities)
        if self.count == 0:
            return [None] * len(rs)
        return self.values_at_ranks([r for r in rs if r is not None])

    def quantile(self, p: object) -> Any:
        return self.quantiles([p])[0]

    def __repr__(self) -> str:
        return (
            f"SortedColumn(column={self.column!r}, type={self.type}, count={self.count}, "
            f"null_count={self.null_count}, nan_count={self.nan_count}, ranges={len(self._ranges)})"
        )


def _get(ref: Any) -> Any:
    """ray.get that re-raises a Metastore error from inside a task as itself."""
    try:
        return ray.get(ref)
    except ray.exceptions.RayTaskError as exc:
        cause = getattr(exc, "cause", None)
        while isinstance(cause, ray.exceptions.RayTaskError):
            cause = getattr(cause, "cause", None)
        if isinstance(cause, MetastoreError):
            raise type(cause)(str(cause)) from None
        raise


def _single_node() -> bool:
    return sum(1 for n in ray.nodes() if n.get("Alive")) <= 1


def _cpus() -> int:
    return int(ray.cluster_resources().get("CPU", 1)) or 1


def default_ranges(count: int) -> int:
    """Two ranges per CPU of the cluster (load balance), fewer for small columns."""
    return max(1, min(2 * _cpus(), math.ceil(count / MIN_RANGE_VALUES)))


@dataclass
class _PrepareRound:
    """The first round's outcome: every partition's keys in the object store, and what the driver learnt."""

    column: str
    type: pa.DataType
    codec: ranks.KeyCodec
    prepared: list[Any]  # per unit: [ref of its LocalKeys, ref of its Prepared]
    infos: list[sort_tasks.Prepared]
    options: dict[str, Any]
    timings: dict[str, Any]
    started: float

    @property
    def count(self) -> int:
        return sum(p.count for p in self.infos)

    @property
    def live(self) -> list[int]:
        return [i for i, p in enumerate(self.infos) if p.count]


def _prepare_round(source: TableSource, column: str, ranges: int | None, representation: str) -> _PrepareRound:
    type_, codec = sort_tasks.column_codec(source, column, ranges, representation)
    timings: dict[str, Any] = {}
    t0 = time.perf_counter()
    options = _options()  # once: it reads the environment
    units = _units(source, PREPARE_TASKS_PER_CPU * _cpus())
    source_ref = ray.put(source)  # the listing travels once, not once per task
    # Any: two refs per call (num_returns=2), which Ray's annotations do not express
    prepared: list[Any] = [
        _prepare_task.options(**options, num_returns=2).remote(source_ref, u, i, column, codec, representation) for i, u in enumerate(units)
    ]
    infos: list[sort_tasks.Prepared] = _get([r[1] for r in prepared])
    t1 = time.perf_counter()
    timings["prepare_s"], timings["prepare_cpu_s"] = t1 - t0, sum(p.cpu_s for p in infos)
    timings["read_cpu_s"] = sum(p.read_cpu_s for p in infos)
    timings["prepare_tasks"] = len(units)
    timings["runs_tasks"] = sum(1 for p in infos if p.runs >= 0)  # prepare tasks that counted instead of sorting
    return _PrepareRound(column, type_, codec, prepared, infos, options, timings, t0)


def sort_column(
    source: TableSource,
    column: str,
    *,
    ranges: int | None = None,
    probabilities: Sequence[object] = (),
    shuffle: str | None = None,
    representation: str = "auto",
) -> tuple[SortedColumn, list[Any]]:
    """Sort ``column`` of ``source`` on Ray; also return its quantiles at
    ``probabilities`` (fetched by the merge tasks themselves: no extra round;
    None each when the column has no values).

    ``shuffle``: ``"pieces"`` cuts every partition into per-range objects (any
    cluster, any type); ``"shared"`` lets every range task cut its piece out of
    every partition's sorted keys itself (fixed-width types on one node, where
    the keys are shared memory: one round and P x R objects fewer). Default:
    ``"shared"`` where it applies.

    ``representation`` (fixed-width types): ``"values"`` sorts every value,
    ``"runs"`` counts each partition into sorted (value, count) runs, ``"auto"``
    (default) chooses per partition from a sample (engine.stats.ranks.prefer_runs):
    runs where a partition has few distinct values. Answers are the same."""
    ranks.ranks_for(0, probabilities)  # checks them before any work
    return _sort_rounds(_prepare_round(source, column, ranges, representation), ranges, probabilities, shuffle)


def _sort_rounds(
    pr: _PrepareRound, ranges: int | None, probabilities: Sequence[object], shuffle: str | None, keep: bool = True
) -> tuple[SortedColumn, list[Any]]:
    """The rounds after the prepare round: split points, (split,) merge. ``keep``:
    keep the sorted ranges in the object store (False: only the values at the
    probabilities' ranks come back, and the returned column is closed)."""
    codec, infos, prepared, options, timings = pr.codec, pr.infos, pr.prepared, pr.options, pr.timings
    t0 = pr.started
    t1 = time.perf_counter()
    count = pr.count
    ranks_wanted = ranks.ranks_for(count, probabilities)
    n_ranges = ranges or default_ranges(count)
    cuts = ranks.splitters(codec, [p.sample for p in infos], n_ranges)
    n_ranges = len(cuts) + 1
    live = pr.live
    mode = shuffle or ("shared" if codec.kind == "numpy" and _single_node() else "pieces")
    if mode not in ("shared", "pieces") or (mode == "shared" and codec.kind != "numpy"):
        raise InvalidArgumentError(f"shuffle must be 'pieces' or (for fixed-width types) 'shared', not {mode!r}")
    wanted = [r for r in ranks_wanted if r is not None]
    if mode == "shared":
        merged = [
            _merge_shared_task.options(**options, num_returns=3).remote(codec, cuts, k, wanted, live, keep, *[prepared[i][0] for i in live])
            for k in range(n_ranges)
        ]
        minfo: list[sort_tasks.Merged] = _get([m[1] for m in merged])
        range_counts = _get(merged[0][2]) if merged else []
        t2 = t1
    else:
        splits: list[Any] = [_split_task.options(**options, num_returns=n_ranges + 1).remote(prepared[i][0], i, cuts) for i in live]
        split_info = _get([s[n_ranges] for s in splits])
        t2 = time.perf_counter()
        timings["split_cpu_s"] = sum(c for _, c in split_info)
        range_counts = [sum(counts[k] for counts, _ in split_info) for k in range(n_ranges)]
    timings["split_s"] = t2 - t1
    del prepared  # the partitions' keys are no longer needed once cut (pieces) or merged (shared)
    pr.prepared = []
    offsets = [0]
    for c in range_counts:
        offsets.append(offsets[-1] + c)
    want: list[list[int]] = [[] for _ in range(n_ranges)]
    where: list[tuple[int, int]] = []  # (range, index among that range's picks) of each wanted rank
    for r in wanted:
        k, local = ranks.ranges_for_rank(offsets, r)
        where.append((k, len(want[k])))
        want[k].append(local)
    if mode == "pieces":
        merged = [
            _merge_task.options(**options, num_returns=2).remote(codec, codec.kind == "numpy", want[k], keep, *[s[k] for s in splits])
            for k in range(n_ranges)
        ]
        minfo = _get([m[1] for m in merged])
        del splits
    t3 = time.perf_counter()
    timings["merge_s"], timings["merge_cpu_s"] = t3 - t2, sum(m.cpu_s for m in minfo)
    timings["total_s"] = t3 - t0
    timings["ranges"] = n_ranges
    timings["tasks"] = len(infos) + (len(live) if mode == "pieces" else 0) + n_ranges
    timings["shuffle"] = mode
    timings["merge"] = "tasks"

    sorted_col = SortedColumn(
        column=pr.column,
        type=pr.type,
        codec=codec,
        count=count,
        null_count=sum(p.nulls for p in infos),
        nan_count=sum(p.nans for p in infos),
        _ranges=[_Range(m[0], mi.count, offsets[k], mi.first, mi.last) for k, (m, mi) in enumerate(zip(merged, minfo))],
        timings=timings,
    )
    if not keep:
        sorted_col.close()
    decoded = {k: codec.to_python(minfo[k].picked) for k in {k for k, _ in where}}
    values = [decoded[k][j] for k, j in where]
    return sorted_col, values if count else [None] * len(ranks_wanted)


#: A column whose partitions' keys come to at most this many entries in all
#: (runs of a counted partition, values of a sorted one) is merged on the driver
#: right after the prepare round, when at least one partition was counted:
#: ~12 ns an entry (1M: ~12 ms), less than a round of range tasks (~15-25 ms).
DRIVER_MERGE_MAX_ENTRIES = 1_000_000
MERGES = ("auto", "driver", "tasks")


ColumnQuantiles = sort_tasks.ColumnQuantiles


def quantiles(
    source: TableSource,
    column: str,
    probabilities: Sequence[object],
    *,
    ranges: int | None = None,
    representation: str = "auto",
    merge: str = "auto",
    shuffle: str | None = None,
) -> ColumnQuantiles:
    """Exact quantiles of ``column``: the prepare round, then either the range
    tasks of :func:`sort_column` or, for a column counted into few runs, one
    merge on the driver.

    ``merge``: ``"tasks"`` always sorts on range tasks (the distributed sort);
    ``"driver"`` fetches every partition's keys (numpy keys only) and merges them
    in this process; ``"auto"`` (default) takes the driver when some partition was
    counted into runs and the partitions' runs and values come to at most
    DRIVER_MERGE_MAX_ENTRIES (a column with tens of thousands of distinct values:
    one task round instead of two). ``shuffle``: as for :func:`sort_column`, on
    the range tasks. Answers are the same; the sorted ranges are not kept."""
    if merge not in MERGES:
        raise InvalidArgumentError(f"merge must be one of {', '.join(MERGES)}, not {merge!r}")
    ranks.ranks_for(0, probabilities)  # checks them before any work
    idx = source.schema().get_field_index(column)
    if merge == "driver" and idx >= 0 and ranks.codec_for(source.schema().field(idx).type, column).kind != "numpy":
        raise InvalidArgumentError(f"merge='driver' takes fixed-width columns; {column!r} has type {source.schema().field(idx).type}")
    pr = _prepare_round(source, column, ranges, representation)
    infos = pr.infos
    null_count, nan_count = sum(p.nulls for p in infos), sum(p.nans for p in infos)
    entries = sum(p.runs if p.runs >= 0 else p.count for p in infos)
    counted = any(p.runs >= 0 for p in infos)
    if merge == "tasks" or (merge == "auto" and not (pr.codec.kind == "numpy" and counted and entries <= DRIVER_MERGE_MAX_ENTRIES)):
        sorted_col, values = _sort_rounds(pr, ranges, probabilities, shuffle, keep=False)
        return ColumnQuantiles(pr.type, sorted_col.count, null_count, nan_count, ranks.ranks_for(sorted_col.count, probabilities), values, pr.timings)
    t1 = time.perf_counter()
    c1 = time.process_time()
    count = pr.count
    wanted = ranks.ranks_for(count, probabilities)
    if count:
        live = pr.live
        keys = [local.keys for local in _get([pr.prepared[i][0] for i in live])]
        merged = ranks.merge_pieces(pr.codec, keys, True)
        del keys
        values = pr.codec.to_python(ranks.take(merged, [r for r in wanted if r is not None]))
    else:
        values = [None] * len(wanted)
    pr.prepared = []  # frees the partitions' keys
    t2 = time.perf_counter()
    timings = pr.timings
    timings.update(
        split_s=0.0,
        merge_s=t2 - t1,
        merge_cpu_s=0.0,  # in this process (the caller's CPU time)
        driver_merge_cpu_s=time.process_time() - c1,
        total_s=t2 - pr.started,
        ranges=1,
        tasks=len(infos),
        shuffle="none",
        merge="driver",
        merged_entries=entries,
    )
    return ColumnQuantiles(pr.type, count, null_count, nan_count, wanted, values, timings)
