"""Strings consolidated by their 64-bit theta hashes (hash fields), then resolved to values.

Checked against two independent oracles on a real Ray and a real redis-server:
DuckDB's GROUP BY over the Parquet files, and the default Ray reduction
(engine.runtime.tasks.reduce.reduce_counts) over the same partition counts, whose
stored rows must be identical (values, counts, order). Collisions are forced by
giving values hashes from a tiny range; the column must then fall back to its
values' bytes and still be exact.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
import ray
import redis

from engine.files import writer
from engine.frequencies import job, plan, redis_ops
from engine.frequencies.job import ColumnInput, FrequencyError, HashCollision, column_input, consolidate
from engine.frequencies.plan import BATCHED, HASH, HASH_FIELDS, VALUE_FIELDS, FrequencySettings, PartitionCounts
from engine.redis_server import RedisServer
from engine.runtime.tasks.reduce import reduce_counts
from engine.sources import open_table
from engine.stats.sketches import theta_hashes_bytes
from engine.stats.valuecounts import counts_hashed, hashed_counts

pytestmark = pytest.mark.ray

N = 60_000
PARTS = 4
#: the Bloom path out of reach: all-distinct strings take the hash path too
NO_BLOOM = FrequencySettings(min_bloom_distinct=10**9)


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> str:
    rng = np.random.default_rng(11)
    words = [f"w{x:05d}" for x in rng.integers(0, 8_000, N)]
    mostly = [f"m-{x}-é" for x in rng.integers(0, N, N)]  # ~63 % distinct: duplicates only
    pool = ["", "a", "bb", "ccc", "x" * 40] + [f"n{i}" for i in range(300)]
    nulls = [None if r < 0.3 else pool[i] for r, i in zip(rng.random(N), rng.integers(0, len(pool), N))]
    distinct = [f"d{x}" for x in rng.permutation(N)]
    binary = [int(x).to_bytes(3, "little") + b"\x00" for x in rng.integers(0, 5_000, N)]
    long_ = [("L" * 300 if i == 7 else "s") + str(x) for i, x in enumerate(rng.integers(0, 1_000, N))]  # one value too long to hash
    t = pa.table(
        {
            "words": pa.array(words),
            "mostly": pa.array(mostly),
            "nulls": pa.array(nulls, pa.string()),
            "distinct": pa.array(distinct),
            "equal": pa.array(["same"] * N),
            "binary": pa.array(binary, pa.binary()),
            "long": pa.array(long_),
        }
    )
    root = tmp_path_factory.mktemp("hashfields")
    for p in range(PARTS):
        d = root / f"part={p}"
        d.mkdir()
        pq.write_table(t.slice(p * N // PARTS, N // PARTS), d / "data.parquet")
    return str(root)


def duckdb_counts(table: str, column: str) -> tuple[dict, int, int]:
    """{value: count} of non-null values, distinct count, non-null count."""
    q = f'"{column}"'
    rows = duckdb.connect().sql(f"select {q}, count(*) from read_parquet('{table}/*/*.parquet') where {q} is not null group by 1").fetchall()
    counts = {bytes(v) if isinstance(v, (bytes, bytearray, memoryview)) else v: c for v, c in rows}
    return counts, len(counts), sum(counts.values())


def as_dict(r) -> dict:
    return dict(zip(r.stored["value"].to_pylist(), r.stored["count"].to_pylist()))


def expected_stored(counts: dict, kind: str) -> dict:
    if kind == "all_distinct":
        return {}
    if kind == "duplicates_only":
        return {v: c for v, c in counts.items() if c > 1}
    return counts


def ray_reduction(col: ColumnInput) -> tuple[dict, pa.Table]:
    """The default strategy's result on the same partition counts: (exact statistics, frequency rows)."""
    groups = [o if isinstance(o, dict) else {col.name: o} for o in ray.get(list(col.refs))]
    reduced, freq, _ = reduce_counts([(col.name, col.type, None)], 0.5, *groups)
    exact = reduced.value
    return exact[col.name], freq[0][2]


def assert_like_reduce(col: ColumnInput, r) -> None:
    exact, rows = ray_reduction(col)
    assert (r.kind, r.distinct_count) == (exact["frequencies"], exact["distinct_count"])
    assert writer.frequency_rows(col.name, r.stored).equals(rows), "the same rows in the same order as the Ray reduction"


@pytest.mark.parametrize(
    "column, kind",
    [
        ("words", "complete"),  # duplicates across partitions
        ("mostly", "duplicates_only"),
        ("nulls", "complete"),  # nulls and the empty string
        ("distinct", "all_distinct"),  # nothing to resolve
        ("equal", "complete"),
        ("binary", "complete"),  # bytes with zeros
    ],
)
def test_hash_fields_match_duckdb_and_the_ray_reduction(table: str, coordinator, column: str, kind: str) -> None:
    col = column_input(open_table(table), column)
    assert all(p.hashed for p in col.parts), "partition counts of strings are in hash order"
    r = consolidate([col], uuid.uuid4().hex[:10], NO_BLOOM, coordinator=coordinator)[column]
    assert (r.scenario, r.fields, r.kind, r.collision) == (HASH, HASH_FIELDS, kind, "")
    counts, distinct, non_null = duckdb_counts(table, column)
    assert as_dict(r) == expected_stored(counts, kind)
    assert r.distinct_count == distinct
    assert r.fields_sent == sum(p.distinct for p in col.parts)
    # every stored hash is resolved by each partition holding it: at least one pair per stored row
    assert r.resolved >= r.stored.num_rows and (r.resolved == 0) == (kind == "all_distinct")
    assert_like_reduce(col, r)


def test_hash_and_value_fields_give_identical_results(table: str, coordinator) -> None:
    col = column_input(open_table(table), "mostly")
    by_hash = consolidate([col], uuid.uuid4().hex[:10], NO_BLOOM, coordinator=coordinator)["mostly"]
    by_value = consolidate([col], uuid.uuid4().hex[:10], FrequencySettings(min_bloom_distinct=10**9, hash_fields=False), coordinator=coordinator)[
        "mostly"
    ]
    assert (by_hash.fields, by_value.fields) == (HASH_FIELDS, VALUE_FIELDS)
    assert by_hash.stored.equals(by_value.stored) and by_hash.distinct_count == by_value.distinct_count and by_hash.kind == by_value.kind


def test_a_partition_without_hashes_keeps_value_fields(table: str, coordinator) -> None:
    """A partition inherited from an earlier job has stored counts without hashes: the column
    cannot be consolidated by hash, and takes value fields."""
    col = column_input(open_table(table), "words")
    first = ray.get(col.refs[0])
    plain = pa.table({"value": first["value"], "count": first["count"]})  # as partial_state loads them
    assert not counts_hashed(plain)
    col = ColumnInput(
        col.name,
        col.type,
        col.index,
        (PartitionCounts(col.parts[0].non_null, col.parts[0].distinct, False), *col.parts[1:]),
        (ray.put(plain), *col.refs[1:]),
    )
    r = consolidate([col], uuid.uuid4().hex[:10], coordinator=coordinator)["words"]
    assert (r.fields, r.collision) == (VALUE_FIELDS, "")
    counts, distinct, _ = duckdb_counts(table, "words")
    assert as_dict(r) == expected_stored(counts, r.kind) and r.distinct_count == distinct
    # a partition reported as hashed whose object is not: the stage falls back all the same
    col = ColumnInput(col.name, col.type, col.index, (PartitionCounts(col.parts[0].non_null, col.parts[0].distinct, True), *col.parts[1:]), col.refs)
    r = consolidate([col], uuid.uuid4().hex[:10], coordinator=coordinator)["words"]
    assert r.fields == VALUE_FIELDS and "no hashes" in r.collision
    assert as_dict(r) == expected_stored(counts, r.kind) and r.distinct_count == distinct


def test_long_values_are_exact(table: str, coordinator) -> None:
    """A 300-byte value among short ones (beyond the numpy hash's 256 bytes: value fields there;
    a hash that takes any length: hash fields); exact either way."""
    col = column_input(open_table(table), "long")
    r = consolidate([col], uuid.uuid4().hex[:10], coordinator=coordinator)["long"]
    assert r.fields == (HASH_FIELDS if all(p.hashed for p in col.parts) else VALUE_FIELDS)
    counts, distinct, _ = duckdb_counts(table, "long")
    assert as_dict(r) == expected_stored(counts, r.kind) and r.distinct_count == distinct
    assert_like_reduce(col, r)


@pytest.mark.parametrize("column", ["words", "mostly", "distinct"])
def test_batched_by_hash_ranges(table: str, coordinator, column: str) -> None:
    s = FrequencySettings(hash_limit=1000, min_bloom_distinct=10**9)
    col = column_input(open_table(table), column)
    r = consolidate([col], uuid.uuid4().hex[:10], s, coordinator=coordinator)[column]
    assert (r.scenario, r.fields) == (BATCHED, HASH_FIELDS) and r.batches > 1
    assert "sample_s" not in r.seconds, "hash ranges need no sampling round"
    counts, distinct, _ = duckdb_counts(table, column)
    assert as_dict(r) == expected_stored(counts, r.kind) and r.distinct_count == distinct
    assert_like_reduce(col, r)


def test_hash_ranges_are_balanced_and_cover_every_hash() -> None:
    hashes = np.sort(theta_hashes_bytes(pa.array([f"value {i}" for i in range(100_000)])))
    points = plan.hash_split_points(8)
    assert len(points) == 7 and (np.diff(points.astype(object)) > 0).all()
    sizes = np.diff([0, *np.searchsorted(hashes, points, side="left"), len(hashes)])
    assert sizes.sum() == len(hashes)
    assert (np.abs(sizes - len(hashes) / 8) < 0.05 * len(hashes) / 8).all(), sizes
    assert len(plan.hash_split_points(1)) == 0


def test_a_task_killed_mid_stream_does_not_double_count_hashes(table: str, coordinator, tmp_path: Path) -> None:
    marker = tmp_path / "crashed"
    s = FrequencySettings(batch_size=1000, crash_after_batches=3, crash_marker=str(marker), min_bloom_distinct=10**9)
    col = column_input(open_table(table), "mostly")
    r = consolidate([col], uuid.uuid4().hex[:10], s, coordinator=coordinator)["mostly"]
    assert marker.exists(), "the fault was injected"
    assert r.fields == HASH_FIELDS
    counts, distinct, _ = duckdb_counts(table, "mostly")
    assert as_dict(r) == expected_stored(counts, r.kind) and r.distinct_count == distinct
    assert_like_reduce(col, r)


# ---------------------------------------------------------------- forced collisions
def forced(values_per_partition: list[list[str]], hash_of: dict[str, int]) -> ColumnInput:
    """A column whose partitions' counts carry the given (tiny) hashes instead of theta's."""
    parts, refs = [], []
    for vals in values_per_partition:
        vc = pc.value_counts(pa.array(vals, pa.string()))
        values, counts = vc.field(0), vc.field(1).to_numpy()
        h = np.array([hash_of[v] for v in values.to_pylist()], np.uint64)
        order = np.argsort(h, kind="stable")
        t = hashed_counts(values.take(pa.array(order)), counts[order].astype(np.int64), h[order])
        assert counts_hashed(t)
        parts.append(PartitionCounts(len(vals), t.num_rows, True))
        refs.append(ray.put({"s": t}))
    return ColumnInput("s", pa.string(), 0, tuple(parts), tuple(refs))


def oracle(values_per_partition: list[list[str]]) -> dict:
    vc = pc.value_counts(pa.array([v for vals in values_per_partition for v in vals], pa.string()))
    return dict(zip(vc.field(0).to_pylist(), vc.field(1).to_pylist()))


def tiny_hashes(values: list[str], bits: int) -> dict[str, int]:
    """Each value's theta hash cut to ``bits`` bits: a hash function of a tiny range (still one hash per value)."""
    h = theta_hashes_bytes(pa.array(values))
    return dict(zip(values, (h & np.uint64((1 << bits) - 1)).tolist()))


def test_a_collision_across_partitions_falls_back_to_value_fields(coordinator) -> None:
    # v0..v15 hashed to 3 bits: v0 and v8 share hash 0, ...; each partition holds at most
    # one value per hash, so only the merge across partitions can see the collision
    names = [f"v{i}" for i in range(16)]
    hash_of = {v: i % 8 for i, v in enumerate(names)}
    data = [names[0:8] * 3, names[4:12] * 2 + ["v5"], names[8:16]]
    col = forced(data, hash_of)
    r = consolidate([col], uuid.uuid4().hex[:10], coordinator=coordinator)["s"]
    assert r.fields == VALUE_FIELDS and "two different values" in r.collision
    assert r.attempts == 2, "one hash-field stage, then one value-field stage"
    assert r.kind == "complete" and as_dict(r) == oracle(data) and r.distinct_count == 16
    assert_like_reduce(col, r)


def test_a_collision_inside_a_partition_falls_back_to_value_fields(coordinator) -> None:
    names = [f"x{i}" for i in range(2000)]
    rng = np.random.default_rng(5)
    data = [list(rng.choice(names, 3000)) for _ in range(3)]
    col = forced(data, tiny_hashes(names, 6))  # 2,000 values on 64 hashes
    r = consolidate([col], uuid.uuid4().hex[:10], coordinator=coordinator)["s"]
    assert r.fields == VALUE_FIELDS and "partition" in r.collision
    assert as_dict(r) == oracle(data) and r.distinct_count == len(oracle(data))


def test_a_collision_among_values_stored_only_when_repeated_is_caught(coordinator) -> None:
    """duplicates_only: the file stores only values seen twice; a collision of two values
    seen once each (in two partitions) looks like one value seen twice and must be caught."""
    a = [f"a{i}" for i in range(3000)]
    b = [f"b{i}" for i in range(3000)]
    hash_of = {v: i for i, v in enumerate(a)} | {v: 10_000 + i for i, v in enumerate(b)}
    hash_of["b17"] = hash_of["a2999"]  # a2999 once in partition 0, b17 once in partition 1
    data = [a + a[:100], b]
    col = forced(data, hash_of)
    r = consolidate([col], uuid.uuid4().hex[:10], coordinator=coordinator)["s"]
    assert r.fields == VALUE_FIELDS and r.collision
    want = oracle(data)
    assert r.kind == "duplicates_only" and r.distinct_count == len(want) == 6000
    assert as_dict(r) == {v: c for v, c in want.items() if c > 1}
    assert_like_reduce(col, r)
    # without the collision the same data stays on hash fields
    del hash_of["b17"]
    hash_of["b17"] = 10_017
    r = consolidate([forced(data, hash_of)], uuid.uuid4().hex[:10], coordinator=coordinator)["s"]
    assert (r.fields, r.collision) == (HASH_FIELDS, "") and as_dict(r) == {v: c for v, c in want.items() if c > 1}


# ---------------------------------------------------------------- the task bodies on a real redis-server, without Ray
@pytest.fixture
def server():
    with RedisServer() as s:
        yield s


def test_stream_hashes_sends_8_byte_fields_once(server) -> None:
    values = pa.array(["", "a", "é" * 20, "x" * 255])
    h = theta_hashes_bytes(values)
    order = np.argsort(h)
    counts = hashed_counts(values.take(pa.array(order)), np.array([3, 1, 7, 2], np.int64)[order], h[order])
    stage = redis_ops.Stage("unit", 0, 0)
    s = FrequencySettings(batch_size=3)
    for _ in range(2):  # a retried task: its batches are applied once
        sent, _, status = job.stream_hashes(server.url, stage, 0, "c", s, None, {"c": counts})
        assert (sent, status) == (4, job.STREAMED)
    got = redis.Redis.from_url(server.url).hgetall(stage.hash())
    assert all(len(f) == 8 for f in got)
    want = {int(hh): c for hh, c in zip(h, [3, 1, 7, 2])}
    assert {int.from_bytes(f, "little"): int(c) for f, c in got.items()} == want


def test_stream_hashes_refuses_a_partition_with_a_shared_hash(server) -> None:
    counts = hashed_counts(pa.array(["a", "b"]), np.array([1, 1], np.int64), np.array([5, 5], np.uint64))
    stage = redis_ops.Stage("unit", 0, 1)
    assert job.stream_hashes(server.url, stage, 0, "c", FrequencySettings(), None, {"c": counts})[2] == job.COLLIDED
    assert redis.Redis.from_url(server.url).exists(stage.hash()) == 0, "nothing sent"
    plain = pa.table({"value": pa.array(["a"]), "count": pa.array([1], pa.int64())})
    assert job.stream_hashes(server.url, stage, 0, "c", FrequencySettings(), None, {"c": plain})[2] == job.UNHASHED


def test_finish_checks_values_exactly_and_orders_like_the_file() -> None:
    wanted = pa.table({"hash": pa.array([1, 2, 9], pa.uint64()), "count": pa.array([2, 5, 2], pa.int64())})
    p0 = pa.table({"hash": pa.array([1, 2], pa.uint64()), "value": pa.array(["b", "x"])})
    p1 = pa.table({"hash": pa.array([1, 9], pa.uint64()), "value": pa.array(["b", "a"])})
    stored, pairs, _ = job.finish_hashes(pa.string(), wanted, p0, p1)
    assert stored.to_pydict() == {"value": ["x", "a", "b"], "count": [5, 2, 2]} and pairs == 4
    p2 = pa.table({"hash": pa.array([9], pa.uint64()), "value": pa.array(["a\x00"])})  # differs by one trailing byte
    with pytest.raises(HashCollision):
        job.finish_hashes(pa.string(), wanted, p0, p1, p2)
    with pytest.raises(FrequencyError, match="held by no partition"):
        job.finish_hashes(pa.string(), wanted, p0)


def test_resolve_returns_the_pairs_of_wanted_hashes() -> None:
    values = pa.array([f"v{i}" for i in range(10)])
    h = np.arange(10, dtype=np.uint64) * 3
    counts = hashed_counts(values, np.ones(10, np.int64), h)
    wanted = pa.table({"hash": pa.array([0, 4, 9, 27, 100], pa.uint64()), "count": pa.array([1] * 5, pa.int64())})
    pairs, _ = job.resolve("c", wanted, {"c": counts})
    assert pairs.to_pydict() == {"hash": [0, 9, 27], "value": ["v0", "v3", "v9"]}


def test_an_abandoned_stage_loses_its_keys_and_nothing_else(server) -> None:
    client = redis.Redis.from_url(server.url)
    old, new, other = redis_ops.Stage("j", 0, 1), redis_ops.Stage("j", 1, 1), redis_ops.Stage("j", 0, 10)
    for st in (old, new, other):
        client.hset(st.hash(), "f", 1)
        client.hset(st.progress(0), "h0", 1)
        client.set(st.epoch, "x")
    assert redis_ops.delete_stage_keys(client, old) == 3
    assert sorted(client.keys("*")) == sorted(k.encode() for st in (new, other) for k in (st.hash(), st.progress(0), st.epoch))


def test_keys_are_removed_after_a_collision_fallback(ray_runtime: None) -> None:
    names = [f"v{i}" for i in range(16)]
    data = [names[0:8], names[4:12]]
    with RedisServer() as server:
        client = redis.Redis.from_url(server.url)
        r = consolidate([forced(data, {v: i % 8 for i, v in enumerate(names)})], "jobcoll", redis_url=server.url)["s"]
        assert r.fields == VALUE_FIELDS and as_dict(r) == oracle(data)
        assert client.keys("metastore:*") == []
