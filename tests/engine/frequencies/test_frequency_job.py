"""The distributed frequency job on a real Ray and a real redis-server, against DuckDB.

Every scenario (Bloom, one hash, batched hashes) is checked against DuckDB's
GROUP BY and COUNT(DISTINCT) on generated tables; faults (a task killed
mid-stream, Redis restarted mid-job, the coordinator killed) must not change
the result; the job's keys are gone afterwards, also after a failure.
"""

from __future__ import annotations

import threading
import time
import uuid
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import ray
import redis

from engine.frequencies import redis_ops
from engine.frequencies.job import ColumnInput, FrequencyError, column_input, consolidate, start_coordinator, table_frequencies
from engine.frequencies.plan import BATCHED, BLOOM, HASH, HASH_FIELDS, VALUE_FIELDS, FrequencySettings, PartitionCounts
from engine.redis_server import RedisServer
from engine.sources import open_table

pytestmark = pytest.mark.ray

N = 120_000
PARTS = 4


@pytest.fixture(scope="module")
def table(tmp_path_factory: pytest.TempPathFactory) -> str:
    rng = np.random.default_rng(7)
    unique = rng.permutation(N).astype(np.int64) * 7 - 10**12
    almost = unique.copy()
    almost[10:40] = almost[N - 30 :]  # 30 values planted twice, across partitions
    almost[5] = almost[6]  # and one repeated inside partition 0
    skewed = (rng.zipf(1.4, N) % 3000).astype(np.int32)
    nulls = np.where(rng.random(N) < 0.3, None, rng.integers(0, 500, N))
    words = pa.array([f"w{x:06d}" for x in rng.integers(0, 20_000, N)])
    ukeys = pa.array([f"key-{x}-é" for x in unique])
    cols = {
        "uniq": unique,
        "almost": almost,
        "skewed": skewed,
        "equal": np.full(N, 42, np.int64),
        "nulls": pa.array(nulls, pa.int64()),
        "words": words,
        "ukeys": ukeys,
        "day": pa.array(rng.integers(0, 3000, N).astype(np.int32), pa.int32()).cast(pa.date32()),
    }
    root = tmp_path_factory.mktemp("freqtable")
    t = pa.table(cols)
    for p in range(PARTS):
        d = root / f"part={p}"
        d.mkdir()
        pq.write_table(t.slice(p * N // PARTS, N // PARTS), d / "data.parquet")
    return str(root)


def oracle(table: str, column: str, duplicates_only: bool) -> tuple[dict, int]:
    having = "having count(*) > 1" if duplicates_only else ""
    rows = (
        duckdb.connect()
        .sql(f"select {column} as v, count(*) as c from read_parquet('{table}/*/*.parquet') where {column} is not null group by 1 {having}")
        .fetchall()
    )
    distinct = duckdb.connect().sql(f"select count(distinct {column}) from read_parquet('{table}/*/*.parquet')").fetchall()[0][0]
    return dict(rows), distinct


def as_dict(result) -> dict:
    return dict(zip(result.stored["value"].to_pylist(), result.stored["count"].to_pylist()))


def check_order(result) -> None:
    counts = result.stored["count"].to_numpy()
    assert (np.diff(counts) <= 0).all(), "frequencies.parquet order is by decreasing count"


@pytest.mark.parametrize(
    "column, scenario, kind",
    [
        ("uniq", BLOOM, "all_distinct"),
        ("almost", BLOOM, "duplicates_only"),
        ("ukeys", BLOOM, "all_distinct"),
        ("skewed", HASH, "complete"),
        ("equal", HASH, "complete"),
        ("nulls", HASH, "complete"),
        ("words", HASH, "complete"),
        ("day", HASH, "complete"),
    ],
)
def test_scenarios_match_duckdb(table: str, coordinator, column: str, scenario: str, kind: str) -> None:
    r = table_frequencies(open_table(table), column, coordinator=coordinator)
    assert (r.scenario, r.kind) == (scenario, kind)
    assert r.fields == (HASH_FIELDS if column == "words" else VALUE_FIELDS), "strings outside the Bloom path stream their hashes"
    expected, distinct = oracle(table, column, duplicates_only=(scenario == BLOOM))
    assert as_dict(r) == expected
    assert r.distinct_count == distinct
    check_order(r)
    if column in ("uniq", "almost", "skewed", "day"):  # exact percentiles (lower nearest rank) vs numpy
        values = pq.read_table(table, columns=[column])[column].drop_null()
        ints = values.cast(pa.int32()).to_numpy() if column == "day" else values.to_numpy()
        got = r.percentiles["p95"].as_py()
        want = np.quantile(np.sort(ints), 0.95, method="lower")
        assert (got.toordinal() - 719163 if column == "day" else got) == want


def test_planted_duplicates_are_all_found(table: str, coordinator) -> None:
    r = table_frequencies(open_table(table), "almost", coordinator=coordinator)
    assert r.stored.num_rows == 31 and set(as_dict(r).values()) == {2}
    assert r.positives >= 31  # true positives, plus possibly a few false ones


def test_a_one_word_filter_makes_everything_positive_and_stays_exact(table: str, coordinator) -> None:
    """Hash collisions forced by a tiny filter: every value is a (mostly false) positive, confirmed away."""
    s = FrequencySettings(bloom_max_bytes=8)
    r = table_frequencies(open_table(table), "almost", s, coordinator=coordinator)
    assert r.bloom_bytes == 8
    assert r.positives > N // 2
    expected, distinct = oracle(table, "almost", duplicates_only=True)
    assert as_dict(r) == expected and r.distinct_count == distinct


@pytest.mark.parametrize("column", ["words", "skewed", "ukeys"])
def test_batched_hashes_beyond_the_limit(table: str, coordinator, column: str) -> None:
    # min_bloom_distinct out of reach: the unique column takes the batched path too
    s = FrequencySettings(hash_limit=1000, min_bloom_distinct=10**9)
    r = table_frequencies(open_table(table), column, s, coordinator=coordinator)
    assert r.scenario == BATCHED and r.batches > 1
    assert r.fields == (VALUE_FIELDS if column == "skewed" else HASH_FIELDS)  # strings: ranges of hashes
    expected, distinct = oracle(table, column, duplicates_only=False)
    got = as_dict(r)
    if r.kind == "complete":
        assert got == expected
    elif r.kind == "all_distinct":
        assert got == {} and distinct == sum(expected.values())
    else:
        assert got == {v: c for v, c in expected.items() if c > 1}
    assert r.distinct_count == distinct
    check_order(r)


def test_coordinator_filter_is_capped_and_released(table: str, coordinator) -> None:
    """120,000 values at 0.1 % would want ~200 KB; the cap holds the filter at 16 KB (and stays exact)."""
    r = table_frequencies(open_table(table), "uniq", FrequencySettings(bloom_max_bytes=16 * 1024), coordinator=coordinator)
    assert r.bloom_bytes == 16 * 1024
    assert r.kind == "all_distinct" and r.distinct_count == N
    assert ray.get(coordinator.memory.remote())["filters"] == 0  # released after the stage


def test_a_task_killed_mid_stream_does_not_double_count(table: str, coordinator, tmp_path: Path) -> None:
    marker = tmp_path / "crashed"
    s = FrequencySettings(batch_size=2000, crash_after_batches=3, crash_marker=str(marker), min_bloom_distinct=10**9)
    r = table_frequencies(open_table(table), "uniq", s, coordinator=coordinator)
    assert marker.exists(), "the fault was injected"
    assert r.scenario == HASH and r.kind == "all_distinct" and r.distinct_count == N
    # Bloom path: the killed task resends batches the coordinator already applied
    marker2 = tmp_path / "crashed2"
    s = FrequencySettings(batch_size=2000, bloom_batch_size=2000, crash_after_batches=3, crash_marker=str(marker2))
    r = table_frequencies(open_table(table), "almost", s, coordinator=coordinator)
    assert marker2.exists()
    expected, distinct = oracle(table, "almost", duplicates_only=True)
    assert as_dict(r) == expected and r.distinct_count == distinct


def test_redis_restarted_mid_job_still_gives_the_exact_result(table: str, ray_runtime: None) -> None:
    server = RedisServer().start()
    port = server.port
    actor = start_coordinator(server.url)
    job = uuid.uuid4().hex[:10]
    restarted = threading.Event()
    holder = {"server": server}

    def restart_when_streaming() -> None:
        client = redis.Redis(port=port)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if redis_ops.applied_batches(client, redis_ops.Stage(job, 0, col.index)) >= 2:
                    break
            except redis.RedisError:
                pass
            time.sleep(0.005)
        holder["server"].stop()
        holder["server"] = RedisServer(port=port).start()
        restarted.set()

    col = column_input(open_table(table), "words")
    watcher = threading.Thread(target=restart_when_streaming)
    watcher.start()
    try:
        r = consolidate([col], job, FrequencySettings(batch_size=200), coordinator=actor)["words"]
    finally:
        watcher.join()
        ray.kill(actor)
        holder["server"].stop()
    assert restarted.is_set()
    assert r.attempts >= 2, "the lost stage was detected and rerun"
    assert r.fields == HASH_FIELDS and r.collision == ""
    expected, distinct = oracle(table, "words", duplicates_only=False)
    assert as_dict(r) == expected and r.distinct_count == distinct


def test_keys_are_removed_after_the_job_and_after_a_failure(table: str, ray_runtime: None) -> None:
    with RedisServer() as server:
        client = redis.Redis.from_url(server.url)
        client.set("someone-else", "1")
        r = table_frequencies(open_table(table), "skewed", redis_url=server.url, job_id="jobok")
        assert r.kind == "complete"
        assert client.keys("metastore:*") == []
        # a failing column: its partition objects are not value-count tables
        bad = ColumnInput("x", pa.int64(), 0, (PartitionCounts(5, 5),), (ray.put({"x": "not a table"}),))
        with pytest.raises(FrequencyError, match="'x'"):
            consolidate([bad], "jobbad", FrequencySettings(max_attempts=2), redis_url=server.url)
        assert client.keys("metastore:*") == []
        assert client.get("someone-else") == b"1", "other keys are never touched"


def test_redis_holds_one_column_stage_at_a_time(table: str, ray_runtime: None) -> None:
    """A column's keys are gone once its result is read, before the next column starts."""
    src = open_table(table)
    cols = [column_input(src, c) for c in ("words", "skewed", "almost")]
    seen: list[list[bytes]] = []
    with RedisServer() as server:
        client = redis.Redis.from_url(server.url)

        def progress(label: str, done: int, total: int) -> None:
            seen.append(sorted(client.keys("metastore:*")))

        out = consolidate(cols, "onestage", FrequencySettings(), redis_url=server.url, progress=progress)
        assert client.keys("metastore:*") == []
    assert [r.kind for r in out.values()] == ["complete", "complete", "duplicates_only"]
    assert len(seen) == 4 and seen == [[]] * 4  # at the start of every column, and at the end


@pytest.mark.parametrize("column", ["almost", "words"])  # the Bloom path; one hash (hash fields)
def test_killed_coordinator_is_restarted_and_the_stage_rerun(table: str, ray_runtime: None, column: str) -> None:
    actor = start_coordinator()
    first = ray.get(actor.info.remote())
    job = uuid.uuid4().hex[:10]

    def kill_when_streaming() -> None:
        client = redis.Redis.from_url(first["url"])
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                if (
                    client.exists(redis_ops.Stage(job, 0, col.index).positives)
                    or redis_ops.applied_batches(client, redis_ops.Stage(job, 0, col.index)) >= 1
                ):
                    break
            except redis.RedisError:
                pass
            time.sleep(0.005)
        ray.kill(actor, no_restart=False)

    col = column_input(open_table(table), column)
    watcher = threading.Thread(target=kill_when_streaming)
    watcher.start()
    try:
        r = consolidate([col], job, FrequencySettings(batch_size=500, bloom_batch_size=500), coordinator=actor)[column]
        after = ray.get(actor.info.remote())
    finally:
        watcher.join()
        try:
            ray.get(actor.shutdown.remote())
        finally:
            ray.kill(actor)
    assert after["incarnation"] != first["incarnation"], "the actor was restarted"
    assert r.attempts >= 2
    assert r.fields == (HASH_FIELDS if column == "words" else VALUE_FIELDS)
    expected, distinct = oracle(table, column, duplicates_only=(column == "almost"))
    assert as_dict(r) == expected and r.distinct_count == distinct
    # the old embedded redis-server died with the old actor process
    assert not Path(f"/proc/{first['redis_pid']}").exists() or b"redis" not in Path(f"/proc/{first['redis_pid']}/cmdline").read_bytes()
