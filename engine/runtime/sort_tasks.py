"""The task bodies of the exact sort and quantiles (engine/runtime/distributed_sort.py runs
them as Ray tasks, engine/runtime/local_sort.py in this process) and what they tell the
driver; which partitions each prepare task reads (:func:`units`). Nothing here imports Ray.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa

from engine.exceptions import InvalidArgumentError
from engine.sources.base import DEFAULT_BATCH_SIZE, Partition, TableSource
from engine.stats import ranks

#: Regular samples per partition: the split points land within n / SAMPLE_SIZE
#: values of their target, so ranges stay balanced to about a percent.
SAMPLE_SIZE = 1024
#: A partition whose files together hold more rows is read by one task per file.
MAX_UNIT_ROWS = 2_000_000


def column_codec(source: TableSource, column: str, ranges: int | None, representation: str) -> tuple[pa.DataType, ranks.KeyCodec]:
    """The column's type and key codec, after checking the request (before any task)."""
    schema = source.schema()
    idx = schema.get_field_index(column)
    if idx < 0:
        raise InvalidArgumentError(f"{source.uri}: no column {column!r}; columns: {', '.join(schema.names)}")
    type_ = schema.field(idx).type
    codec = ranks.codec_for(type_, column)
    if ranges is not None and ranges < 1:
        raise InvalidArgumentError(f"ranges must be >= 1, got {ranges}")
    if representation not in ranks.REPRESENTATIONS:
        raise InvalidArgumentError(f"representation must be one of {', '.join(ranks.REPRESENTATIONS)}, not {representation!r}")
    return type_, codec


@dataclass(frozen=True)
class Prepared:
    """What a prepare task tells the driver (small)."""

    count: int
    nulls: int
    nans: int
    sample: ranks.Sample
    cpu_s: float
    runs: int = -1  # distinct values when the keys were counted into runs, -1 when sorted
    read_cpu_s: float = 0.0  # of cpu_s, reading the column


#: Rows a batch of a fixed-width column is read in: fewer, larger batches cost
#: less (~20% of reading a float column) and the keys are built from the whole anyway.
FIXED_WIDTH_BATCH_ROWS = 1 << 20


def read_column(source: TableSource, unit: tuple[Partition, ...], column: str, codec: ranks.KeyCodec) -> pa.ChunkedArray:
    batch = FIXED_WIDTH_BATCH_ROWS if codec.kind == "numpy" else DEFAULT_BATCH_SIZE
    return pa.chunked_array([b.column(0) for p in unit for b in source.read_batches(p, [column], batch)], type=codec.type)


def prepare_unit(
    source: TableSource, unit: tuple[Partition, ...], part: int, column: str, codec: ranks.KeyCodec, representation: str
) -> tuple[ranks.LocalKeys, Prepared]:
    c0 = time.process_time()
    values = read_column(source, unit, column, codec)
    c1 = time.process_time()
    local, sample, nulls, nans = ranks.prepare(codec, values, part, SAMPLE_SIZE, representation)
    runs = len(local.keys.values) if isinstance(local.keys, ranks.Runs) else -1
    return local, Prepared(len(local.keys), nulls, nans, sample, time.process_time() - c0, runs, c1 - c0)


def split_unit(local: ranks.LocalKeys, part: int, cuts: list[ranks.Splitter]) -> tuple[Any, ...]:
    c0 = time.process_time()
    pieces = ranks.split(local, part, cuts)
    return (*pieces, ([len(p) for p in pieces], time.process_time() - c0))


@dataclass(frozen=True)
class Merged:
    count: int
    first: Any
    last: Any
    picked: Any  # keys at the positions asked for
    cpu_s: float


def merge_range(codec: ranks.KeyCodec, presorted: bool, positions: list[int], keep: bool, *pieces: Any) -> tuple[Any, Merged]:
    """Range k's sorted keys (None unless ``keep``: a one-shot quantile query needs only the picks)."""
    c0 = time.process_time()
    if not keep:
        n, first, last, picked = ranks.merged_picks(codec, pieces, presorted, positions)
        return None, Merged(n, first, last, picked, time.process_time() - c0)
    keys = ranks.merge_pieces(codec, pieces, presorted)
    n = len(keys)
    first = scalar(keys, 0) if n else None
    last = scalar(keys, n - 1) if n else None
    return keys, Merged(n, first, last, ranks.take(keys, positions), time.process_time() - c0)


def merge_shared_range(
    codec: ranks.KeyCodec, cuts: list[ranks.Splitter], k: int, ranks_wanted: list[int], parts: list[int], keep: bool, *locals_: ranks.LocalKeys
) -> tuple[Any, Merged, list[int]]:
    """Range k straight from every partition's sorted keys (one node: the keys are
    read in place from shared memory, so no pieces are written). Every task finds
    every partition's cut points (log n each), hence all ranges' sizes and offsets,
    and picks the wanted global ranks that fall in its range."""
    c0 = time.process_time()
    bounds = [[0, *ranks.cut_points(l.keys, part, cuts), len(l.keys)] for part, l in zip(parts, locals_)]
    sizes = [sum(b[j + 1] - b[j] for b in bounds) for j in range(len(cuts) + 1)]
    offset = sum(sizes[:k])
    keys = ranks.merge_pieces(codec, [l.keys[b[k] : b[k + 1]] for l, b in zip(locals_, bounds)], True)
    n = len(keys)
    mine = [r - offset for r in ranks_wanted if offset <= r < offset + n]
    first = scalar(keys, 0) if n else None
    last = scalar(keys, n - 1) if n else None
    return keys if keep else None, Merged(n, first, last, ranks.take(keys, mine), time.process_time() - c0), sizes


def pick(keys: Any, positions: list[int]) -> Any:
    return ranks.take(keys, positions)


def search(keys: Any, key: Any, side: str) -> int:
    return ranks.search(keys, key, side)


def scalar(keys: Any, i: int) -> Any:
    return keys[i] if not isinstance(keys, pa.Array) else keys[i].as_py()


def units(source: TableSource, tasks: int) -> list[tuple[Partition, ...]]:
    """What each prepare task reads: about ``tasks`` groups of consecutive
    partitions of about equal row counts (a task costs a few milliseconds of
    scheduling and serialization, so small partitions are read together; the
    slowest worker sets the round's time, so groups are balanced: a piece joins
    the group its middle row falls in); a partition of several files holding
    more than MAX_UNIT_ROWS rows is read one file per task. Partitions of
    unknown size are read one per task."""
    pieces: list[tuple[Partition, int | None]] = []
    for p in source.partitions():
        if not p.files:
            continue
        rows = p.row_count
        if len(p.files) > 1 and (rows is None or rows > MAX_UNIT_ROWS):
            pieces.extend((replace(p, files=(f,)), f.num_rows) for f in p.files)
        else:
            pieces.append((p, rows))
    known = [r for _, r in pieces if r is not None]
    target = max(1.0, sum(known) / max(1, tasks))
    units: list[tuple[Partition, ...]] = []
    group: list[Partition] = []
    group_index = -1
    before = 0  # rows of the known-size pieces before this one
    for p, rows in pieces:
        if rows is None:
            units.append((p,))
            continue
        index = int((before + rows / 2) // target)
        before += rows
        if group and index != group_index:
            units.append(tuple(group))
            group = []
        group.append(p)
        group_index = index
    if group:
        units.append(tuple(group))
    return units


@dataclass(frozen=True)
class ColumnQuantiles:
    """Exact quantiles of one column (DuckDB's ``quantile_disc``) and how they were found."""

    type: pa.DataType
    count: int
    null_count: int
    nan_count: int
    ranks: list[int | None]  # the 0-based ranks of the answers (None each when there are no values)
    values: list[Any]
    timings: dict[str, Any]
