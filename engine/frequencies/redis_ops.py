"""Namespaced Redis keys and the idempotent server-side scripts the partition tasks call.

Idempotency (Ray retries tasks; a retried task resends what it sent before):
every batch carries a token ``<partition>:<batch>``, deterministic for the
partition's data, and the script that applies it first adds the token to the
stage's ``done`` set, all in one atomic script: a batch applied once is never
applied again, and a batch is either fully applied or not at all.

Loss of state (Redis restarted, or the coordinator lost its Bloom filter) is
detected, not prevented: each stage writes an epoch key at its start and checks
it at its end; when it is gone the driver reruns the stage under a new attempt
number. Keys live under ``metastore:<job>:`` and are unlinked when the job ends.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import cast

import numpy as np
import pyarrow as pa
import redis
from redis.backoff import ExponentialBackoff
from redis.retry import Retry

from engine.arrowcompute import contiguous
from engine.exceptions import ServiceError
from engine.frequencies import keys, resp
from engine.frequencies.resp import RespPipe

PREFIX = "metastore"

# KEYS: hash, done-set. ARGV: token, width (0 = variable), n, data, offsets, counts ('' = all ones)
_INCR = """
if redis.call('SADD', KEYS[2], ARGV[1]) == 0 then return -1 end
local w = tonumber(ARGV[2]); local n = tonumber(ARGV[3])
local data = ARGV[4]; local offs = ARGV[5]; local cnts = ARGV[6]
local ones = (cnts == '')
local call = redis.call
local key = KEYS[1]
for i = 0, n - 1 do
  local field
  if w > 0 then
    field = string.sub(data, i * w + 1, (i + 1) * w)
  else
    local a = struct.unpack('<I4', offs, i * 4 + 1)
    local b = struct.unpack('<I4', offs, i * 4 + 5)
    field = string.sub(data, a + 1, b)
  end
  if ones then
    call('HINCRBY', key, field, 1)
  else
    call('HINCRBY', key, field, string.format('%.0f', (struct.unpack('<d', cnts, i * 8 + 1))))
  end
end
return n
"""


@dataclass(frozen=True)
class Stage:
    """The keys of one column's consolidation under one attempt."""

    job: str
    attempt: int
    column: int  # the column's position (names may hold any character)

    @property
    def base(self) -> str:
        return f"{PREFIX}:{self.job}:a{self.attempt}:c{self.column}"

    def hash(self, batch: int = 0) -> str:
        return f"{self.base}:h{batch}"

    @property
    def done(self) -> str:
        return f"{self.base}:done"

    def progress(self, part: int) -> str:
        """A partition task's own progress hash (stream -> batches applied), watched by its transactions."""
        return f"{self.base}:done:p{part}"

    @property
    def positives(self) -> str:
        return f"{self.base}:pos"

    @property
    def epoch(self) -> str:
        return f"{self.base}:epoch"


def job_pattern(job: str) -> str:
    return f"{PREFIX}:{job}:*"


def connect(url: str) -> redis.Redis:
    """A client that rides out a short outage (a restart) before giving up."""
    return redis.Redis.from_url(
        url,
        socket_timeout=120,
        socket_connect_timeout=5,
        retry=Retry(ExponentialBackoff(cap=1.0, base=0.05), 8),
        retry_on_error=[redis.exceptions.ConnectionError, redis.exceptions.TimeoutError],
    )


class Scripts:
    """The scripts registered on one client (EVALSHA, reloaded after a restart)."""

    def __init__(self, client: redis.Redis) -> None:
        self.client = client
        self._incr = client.register_script(_INCR)

    def increment(self, hash_key: str, done_key: str, token: str, values: pa.Array, counts: np.ndarray | None) -> int:
        """HINCRBY every value by its count (or 1), once per token. Returns fields applied, -1 if already done."""
        enc = keys.encode(values)
        if counts is not None and len(counts) and bool((counts == 1).all()):
            counts = None
        cnt = b"" if counts is None else np.asarray(counts, dtype="<f8").tobytes()
        return int(self._incr(keys=[hash_key, done_key], args=[token, enc.width, enc.n, enc.data, enc.offsets, cnt]))


def stream_counts(
    pipe: RespPipe,
    stage: Stage,
    part: int,
    counts: pa.Table,
    batch_size: int,
    hash_batch: int = 0,
    label: str = "",
    on_batch: Callable[[], None] | None = None,
) -> int:
    """Send a (value, count) table in batches of raw pipelined HINCRBY (engine.frequencies.resp),
    each applied once; returns the fields sent. ``on_batch`` runs after each batch."""
    values = contiguous(counts["value"])
    cnt = counts["count"].to_numpy()
    key = stage.hash(hash_batch)

    def batches() -> Iterator[tuple[bytes, int]]:
        for start in range(0, len(values), batch_size):
            chunk = values.slice(start, batch_size)
            yield resp.hincrby_records(key, chunk, cnt[start : start + batch_size]), len(chunk)

    pipe.apply_stream(stage.progress(part), f"{label}{hash_batch}", batches(), on_batch=on_batch)
    return len(values)


def server_cpu_seconds(client: redis.Redis) -> float:
    """redis-server's CPU seconds so far (INFO cpu, main thread and children); nan if unavailable."""
    try:
        cpu = client.info("cpu")
        return float(cpu.get("used_cpu_sys", 0.0)) + float(cpu.get("used_cpu_user", 0.0))
    except redis.RedisError:
        return float("nan")


def applied_batches(client: redis.Redis, stage: Stage) -> int:
    """Batches applied so far in a stage, over all its partition tasks (progress and monitoring)."""
    total = 0
    for key in client.scan_iter(match=f"{stage.base}:done:p*", count=1000):
        total += sum(int(v) for v in client.hvals(key))
    return total


def read_hash(client: redis.Redis, key: str, type_: pa.DataType, scan_count: int = 50_000) -> pa.Table:
    """A frequency hash as a (value, count) table, read with HSCAN (bounded replies).

    Replies stay hiredis's flat lists (no dict per reply, as redis-py's HSCAN
    callback would build); counts are parsed by Arrow's string-to-int cast.
    """
    fields: list[bytes] = []
    counts: list[bytes] = []
    cursor: bytes | int = 0
    conn = client.connection_pool.get_connection()
    try:
        while True:
            conn.send_command("HSCAN", key, cursor, "COUNT", scan_count)
            cursor, items = conn.read_response(disable_decoding=True)
            fields.extend(items[0::2])
            counts.extend(items[1::2])
            if int(cursor) == 0:
                break
    finally:
        client.connection_pool.release(conn)
    count_arr = pa.array(counts, pa.binary()).cast(pa.string()).cast(pa.int64()) if counts else pa.array([], pa.int64())
    return pa.table({"value": keys.decode(fields, type_), "count": count_arr})


def read_positive_hashes(client: redis.Redis, key: str) -> np.ndarray:
    fields = cast(list[bytes], client.hkeys(key))  # our clients decode no responses: bytes, never str
    return np.frombuffer(b"".join(fields), dtype="<u8").astype(np.uint64) if fields else np.zeros(0, np.uint64)


def _unlink_matching(client: redis.Redis, pattern: str) -> int:
    """UNLINK the keys matching a pattern (SCAN, so a big keyspace is not blocked)."""
    n = 0
    batch: list[bytes] = []
    for k in client.scan_iter(match=pattern, count=1000):
        batch.append(k)
        if len(batch) >= 500:
            n += client.unlink(*batch)
            batch = []
    if batch:
        n += client.unlink(*batch)
    return n


def delete_job_keys(client: redis.Redis, job: str) -> int:
    """UNLINK every key of a job."""
    return _unlink_matching(client, job_pattern(job))


def delete_stage_keys(client: redis.Redis, stage: Stage) -> int:
    """UNLINK one stage's keys, once its result is read or when it is given up for
    value fields: Redis then holds one column stage at a time, not every column's
    hashes until the job ends."""
    return _unlink_matching(client, f"{stage.base}:*")


def wait_until_up(url: str, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    client = redis.Redis.from_url(url, socket_connect_timeout=1, socket_timeout=2)
    try:
        while True:
            try:
                if client.ping():
                    return
            except redis.exceptions.RedisError:
                pass
            if time.monotonic() > deadline:
                raise ServiceError(f"Redis at {url} did not come back within {timeout_s:g}s")
            time.sleep(0.1)
    finally:
        client.close()
