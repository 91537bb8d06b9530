"""Raw RESP batches of HINCRBY (engine.frequencies.resp) against a real redis-server.

The oracle is plain arithmetic on the generated counts, read back with redis-py
(an independent RESP client); idempotency and error paths are exercised on the
same server.
"""

from __future__ import annotations

import decimal
from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
import redis
from hypothesis import given, settings
from hypothesis import strategies as st

from engine.exceptions import ServiceError
from engine.frequencies import redis_ops, resp
from engine.redis_server import RedisServer


@pytest.fixture(scope="module")
def server() -> Iterator[RedisServer]:
    with RedisServer() as s:
        yield s


@pytest.fixture
def client(server: RedisServer) -> Iterator[redis.Redis]:
    c = redis.Redis.from_url(server.url)
    c.flushall()
    yield c
    c.close()


RNG = np.random.default_rng(3)
ARRAYS = [
    pa.array(RNG.integers(-(2**63), 2**63 - 1, 500, dtype=np.int64)),
    pa.array(RNG.integers(0, 40, 500).astype(np.int8)),
    pa.array(RNG.integers(0, 2**64 - 1, 500, dtype=np.uint64)),
    pa.array(RNG.integers(0, 30_000, 500).astype(np.int32), pa.int32()).cast(pa.date32()),
    pa.array([decimal.Decimal(int(x)) / 100 for x in RNG.integers(-(10**9), 10**9, 300)], pa.decimal128(12, 2)),
    pa.array([True, False] * 5),
    pa.array([f"v{x}\r\n*3\r\né" for x in RNG.integers(0, 300, 500)]),  # CRLF and RESP syntax inside fields
    pa.array([b"", b"\x00", b"\r\n", b"$-1\r\n", b"\xff" * 70], pa.binary()),
    pa.array(["a", "", "ccc" * 200], pa.large_string()),
]


@pytest.mark.parametrize("arr", ARRAYS, ids=lambda a: str(a.type))
def test_batches_add_the_counts_exactly(client: redis.Redis, server: RedisServer, arr: pa.Array) -> None:
    values = pc.unique(arr)
    counts = RNG.integers(1, 10**15, len(values))  # up to 16 digits: every digit group
    counts[:3] = [1, 9, 10][: len(counts[:3])]
    with resp.RespPipe(server.url) as pipe:
        assert pipe.apply_once("prog", "s", 0, resp.hincrby_records("h", values, counts), len(values))
        assert pipe.apply_once("prog", "s", 1, resp.hincrby_records("h", values.slice(1), counts[1:]), len(values) - 1)
    got = redis_ops.read_hash(client, "h", arr.type)
    expected = {v: int(c) * (1 if i == 0 else 2) for i, (v, c) in enumerate(zip(values.to_pylist(), counts))}
    assert dict(zip(got["value"].to_pylist(), got["count"].to_pylist())) == expected


def test_a_batch_is_applied_once_however_often_it_is_sent(client: redis.Redis, server: RedisServer) -> None:
    values = pa.array(np.arange(1000, dtype=np.int64))
    records = resp.hincrby_records("h", values, np.full(1000, 3))
    with resp.RespPipe(server.url) as pipe:
        assert pipe.apply_once("prog", "s", 0, records, 1000)
    with resp.RespPipe(server.url) as retry:  # a retried task: a new connection, the same batches again
        assert not retry.apply_once("prog", "s", 0, records, 1000)
        assert retry.apply_once("prog", "s", 1, records, 1000)
        assert not retry.apply_once("prog", "s", 1, records, 1000)
        assert retry.apply_once("prog", "other", 0, records, 1000)  # another stream of the same task
    assert set(client.hvals("h")) == {b"9"}
    assert client.hgetall("prog") == {b"s": b"2", b"other": b"1"}


def test_an_error_reply_is_raised_with_the_servers_message(client: redis.Redis, server: RedisServer) -> None:
    client.set("notahash", "x")
    with resp.RespPipe(server.url) as pipe:
        with pytest.raises(resp.RespError, match="WRONGTYPE"):
            pipe.apply_once("prog", "s", 0, resp.hincrby_records("notahash", pa.array([1, 2]), np.array([1, 1])), 2)
        # the connection is still in step: the next batch works
        assert pipe.apply_once("prog2", "s", 0, resp.hincrby_records("h", pa.array([1, 2]), np.array([1, 1])), 2)
    assert client.hlen("h") == 2


def test_a_full_server_refuses_the_whole_batch(server: RedisServer) -> None:
    with RedisServer(maxmemory="2mb") as small:
        c = redis.Redis.from_url(small.url)
        values = pa.array([f"{i:0200d}" for i in range(20_000)])  # ~5 MB of fields
        with resp.RespPipe(small.url) as pipe:
            with pytest.raises(resp.RespError, match="(?i)memory|OOM"):
                pipe.apply_once("prog", "s", 0, resp.hincrby_records("h", values, np.ones(20_000, np.int64)), 20_000)
        assert c.exists("h") == 0 and c.exists("prog") == 0, "nothing of a refused batch is applied"


def test_password_and_database_in_the_url(server: RedisServer) -> None:
    with RedisServer() as s:
        admin = redis.Redis.from_url(s.url)
        admin.config_set("requirepass", "s3cr:t")
        url = f"redis://:s3cr%3At@127.0.0.1:{s.port}/3"
        with resp.RespPipe(url) as pipe:
            assert pipe.apply_once("prog", "s", 0, resp.hincrby_records("h", pa.array([7]), np.array([5])), 1)
        c = redis.Redis.from_url(url)
        assert c.hgetall("h") == {(7).to_bytes(8, "little"): b"5"}


def test_unreachable_server_is_a_clear_error() -> None:
    with socket_free_port() as port:
        pipe = resp.RespPipe(f"redis://127.0.0.1:{port}", attempts=2)
        with pytest.raises(ServiceError, match=f"127.0.0.1:{port}"):
            pipe.apply_once("prog", "s", 0, resp.hincrby_records("h", pa.array([1]), np.array([1])), 1)


def test_url_forms() -> None:
    a = resp.Address.from_url("redis://user:p%40ss@example.org:6380/2")
    assert (a.host, a.port, a.username, a.password, a.db, a.tls) == ("example.org", 6380, "user", "p@ss", 2, False)
    assert resp.Address.from_url("rediss://h").tls
    assert resp.Address.from_url("unix:///tmp/r.sock?db=4") == resp.Address(path="/tmp/r.sock", db=4)
    with pytest.raises(ServiceError, match="scheme"):
        resp.Address.from_url("http://h")


def test_records_reject_bad_counts() -> None:
    with pytest.raises(ValueError, match="positive"):
        resp.hincrby_records("h", pa.array([1]), np.array([0]))
    assert resp.hincrby_records("h", pa.array([], pa.int64()), np.array([], np.int64)) == b""


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(-(2**63), 2**63 - 1), st.integers(1, 2**62)), max_size=50, unique_by=lambda t: t[0]))
def test_records_are_well_formed_resp(pairs: list[tuple[int, int]]) -> None:
    """Parsed back by an independent reading of the RESP grammar, every record is HINCRBY key field count."""
    values = pa.array([v for v, _ in pairs], pa.int64())
    counts = np.array([c for _, c in pairs], np.int64)
    blob = resp.hincrby_records("k", values, counts)
    got = []
    pos = 0
    while pos < len(blob):
        assert blob[pos : pos + 4] == b"*4\r\n"
        pos += 4
        args = []
        for _ in range(4):
            end = blob.index(b"\r\n", pos)
            n = int(blob[pos + 1 : end])
            args.append(blob[end + 2 : end + 2 + n])
            assert blob[end + 2 + n : end + 4 + n] == b"\r\n"
            pos = end + 4 + n
        assert args[:2] == [b"HINCRBY", b"k"]
        got.append((int.from_bytes(args[2], "little", signed=True), int(args[3])))
    assert sorted(got) == sorted(pairs)


class socket_free_port:
    def __enter__(self) -> int:
        import socket

        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        return self.sock.getsockname()[1]  # bound, never listening: connections are refused

    def __exit__(self, *exc: object) -> None:
        self.sock.close()


def _stream(values: pa.Array, counts: np.ndarray, size: int) -> list[tuple[bytes, int]]:
    return [(resp.hincrby_records("h", values.slice(i, size), counts[i : i + size]), len(values.slice(i, size))) for i in range(0, len(values), size)]


def test_a_stream_resumes_where_a_dead_attempt_stopped(client: redis.Redis, server: RedisServer) -> None:
    values = pa.array(np.arange(10_000, dtype=np.int64))
    batches = _stream(values, np.full(10_000, 2), 1_000)

    class Died(Exception):
        pass

    seen = [0]

    def die_after_four() -> None:
        seen[0] += 1
        if seen[0] == 4:
            raise Died

    with resp.RespPipe(server.url) as first, pytest.raises(Died):
        first.apply_stream("prog", "s", batches, on_batch=die_after_four)
    assert client.hget("prog", "s") == b"4"
    with resp.RespPipe(server.url) as retry:
        assert retry.apply_stream("prog", "s", batches) == 6  # the other 4 were counted
        assert retry.apply_stream("prog", "s", batches) == 0
    assert set(client.hvals("h")) == {b"2"} and client.hlen("h") == 10_000


def test_a_batch_landing_from_elsewhere_mid_stream_is_counted_once(client: redis.Redis, server: RedisServer) -> None:
    """While this connection's batch b is in flight, an 'earlier attempt' applies batch b + 1 on
    another connection: whichever order Redis sees, b + 1 counts once (skipped, or the WATCH aborts)."""
    values = pa.array(np.arange(6_000, dtype=np.int64))
    batches = _stream(values, np.ones(6_000, np.int64), 1_000)
    other = resp.RespPipe(server.url)

    def stream():
        for b, batch in enumerate(batches):
            if b == 3:  # batch 2 was sent; before this one is, the other connection applies it
                assert other.apply_once("prog", "s", 3, *batch) or True
            yield batch

    with resp.RespPipe(server.url) as pipe:
        mine = pipe.apply_stream("prog", "s", stream())
    other.close()
    assert mine in (5, 6) and set(client.hvals("h")) == {b"1"} and client.hlen("h") == 6_000
    assert client.hget("prog", "s") == b"6"


def test_a_connection_killed_mid_stream_is_reopened(client: redis.Redis, server: RedisServer) -> None:
    values = pa.array(np.arange(8_000, dtype=np.int64))
    batches = _stream(values, np.full(8_000, 3), 1_000)

    me = client.client_id()
    killed = [0]

    def stream():
        for b, batch in enumerate(batches):
            if b == 5:  # batch 4's transaction is in flight
                for c in client.client_list():
                    if int(c["id"]) != me:
                        killed[0] += client.client_kill_filter(_id=c["id"])
            yield batch

    with resp.RespPipe(server.url) as pipe:
        pipe.apply_stream("prog", "s", stream())
    assert killed[0] == 1
    assert set(client.hvals("h")) == {b"3"} and client.hlen("h") == 8_000
