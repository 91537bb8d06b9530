"""Which of the three scenarios a column takes, from its partitions' counts alone.

1. ``bloom``: every partition is (almost) all distinct. Values stream through
   a Bloom filter; only positives are confirmed and counted, so the result
   holds just the duplicates (often nothing).
2. ``hash``: the partitions' distinct counts sum to at most ``hash_limit``
   (4,294,967,295, one Redis hash's capacity): one hash takes them all.
3. ``batched``: above that, ``ceil(total / hash_limit)`` hashes, each for one
   range of values, split at points drawn from samples of the partitions.

Fields (scenarios 2 and 3): a value's storage bytes, or, for strings and
binaries whose partition counts carry their 64-bit theta hashes in hash order,
that hash (8 bytes), resolved back to values afterwards (:func:`fields_for`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine.frequencies.settings import FrequencySettings
from engine.stats import stringsort

BLOOM, HASH, BATCHED = "bloom", "hash", "batched"

#: What a Redis field holds: the value's storage bytes, or its 64-bit theta hash.
VALUE_FIELDS, HASH_FIELDS = "value", "hash"

#: Theta hashes are MurmurHash3's h1 >> 1: uniform over [0, 2^63).
THETA_HASH_DOMAIN = 1 << 63


@dataclass(frozen=True)
class PartitionCounts:
    """What a partition task reports of one column: non-null rows and distinct values."""

    non_null: int
    distinct: int
    #: the counts carry each value's theta hash and are in hash order (valuecounts.counts_hashed)
    hashed: bool = False


@dataclass(frozen=True)
class ColumnPlan:
    scenario: str
    batches: int  # hashes the column is consolidated in (1 unless batched)
    total_distinct: int  # sum of the partitions' distinct counts (an upper bound of the table's)
    non_null: int


def plan_column(parts: Sequence[PartitionCounts], settings: FrequencySettings) -> ColumnPlan:
    non_null = sum(p.non_null for p in parts)
    total = sum(p.distinct for p in parts)
    nonempty = [p for p in parts if p.non_null]
    if total >= settings.min_bloom_distinct and nonempty and all(p.distinct >= settings.distinct_ratio * p.non_null for p in nonempty):
        return ColumnPlan(BLOOM, 1, total, non_null)
    if total <= settings.hash_limit:
        return ColumnPlan(HASH, 1, total, non_null)
    return ColumnPlan(BATCHED, math.ceil(total / settings.hash_limit), total, non_null)


def fields_for(cplan: ColumnPlan, type_: pa.DataType, parts: Sequence[PartitionCounts], settings: FrequencySettings) -> str:
    """What the column's Redis fields hold: its values, or their 64-bit theta hashes.

    Hashes when the column streams (value, count) pairs (not the Bloom path), holds
    strings or binaries, and every non-empty partition's counts carry their hashes
    in hash order: Redis, the serial stage, pays for field length on every update
    and read-back (8-byte fields took ~18% less of its CPU per update than the
    bench's ~35-byte strings; docs/PERFORMANCE.md, "Frequencies"). Hashes are no
    identity: the stored ones are resolved to values and checked for collisions
    afterwards (engine.frequencies.job).
    """
    if not settings.hash_fields or cplan.scenario == BLOOM or not stringsort.supports(type_):
        return VALUE_FIELDS
    nonempty = [p for p in parts if p.non_null]
    return HASH_FIELDS if nonempty and all(p.hashed for p in nonempty) else VALUE_FIELDS


def hash_split_points(batches: int) -> np.ndarray:
    """``batches - 1`` split points of the theta-hash domain, at equal fractions.

    Scenario 3 with hash fields splits by hash, not by value: the batches exist
    only to keep each Redis hash under its capacity, and nothing downstream needs
    a batch to be a range of values (strings have no percentiles; the result is
    re-ordered by count, then value). Hashes are uniform, so equal fractions
    balance the batches without a sampling round, and a partition's hash-ordered
    counts fall into them as contiguous slices. A hash outside the domain lands in
    the last batch: balance, never correctness, depends on the points.
    """
    return np.array([(i * THETA_HASH_DOMAIN) // batches for i in range(1, batches)], np.uint64)


def split_points(samples: Sequence[pa.Array], batches: int) -> pa.Array:
    """``batches - 1`` increasing split points from the pooled samples of all partitions.

    Range ``i`` holds the values v with ``points[i-1] <= v < points[i]``. Points
    are distinct, so a heavy value cannot straddle two ranges; fewer points come
    back when the sample has fewer distinct values.
    """
    pooled = pa.chunked_array([s for s in samples if len(s)]).combine_chunks() if any(len(s) for s in samples) else None
    if pooled is None or batches <= 1:
        t = samples[0].type if samples else pa.int64()
        return pa.array([], t)
    uniq = pc.unique(pooled)
    uniq = uniq.take(pc.sort_indices(uniq))
    n = len(uniq)
    idx = sorted({int(round(i * n / batches)) for i in range(1, batches)} - {0, n})
    return uniq.take(pa.array(idx, pa.int64())) if idx else uniq.slice(0, 0)


def range_of(values: pa.Array, points: pa.Array) -> np.ndarray:
    """For every value, the index of its range among ``len(points) + 1`` ranges."""
    if len(points) == 0:
        return np.zeros(len(values), np.int64)
    # the count of points <= v, one comparison pass per point (few points)
    out = np.zeros(len(values), np.int64)
    for p in points:
        out += pc.greater_equal(values, p).to_numpy(zero_copy_only=False).astype(np.int64)
    return out


def sample(values: pa.Array, size: int, seed: int) -> pa.Array:
    """A uniform sample of distinct values, deterministic per (partition, seed) so a retry sends the same."""
    if len(values) <= size:
        return values
    rng = np.random.default_rng(seed)
    return values.take(pa.array(np.sort(rng.choice(len(values), size, replace=False))))
