"""The Flight server's result cache (flight_server/results.py): admission from a ticket's second
answer, one generation's entries only, the byte bound."""

from __future__ import annotations

import pyarrow as pa

from flight_server.results import ResultCache


def _table(n: int) -> pa.Table:
    return pa.table({"x": pa.array(range(n), pa.int64())})


def test_a_result_is_kept_from_its_tickets_second_answer() -> None:
    cache = ResultCache()
    t = _table(10)
    cache.put(b"a", 1, t)
    assert cache.get(b"a", 1) is None  # answered once: not kept
    cache.put(b"a", 1, t)
    got = cache.get(b"a", 1)
    assert got is not None and got.equals(t)
    assert cache.get(b"b", 1) is None  # another ticket: nothing
    assert cache.info()["hits"] == 1


def test_an_older_generation_is_never_served() -> None:
    cache = ResultCache(admit_after=1)
    cache.put(b"a", 1, _table(3))
    assert cache.get(b"a", 2) is None  # the state moved: stale, and dropped
    assert cache.get(b"a", 1) is None
    assert cache.info()["entries"] == 0


def test_the_byte_bound_drops_the_least_recent() -> None:
    one = _table(1000)
    size = one.get_total_buffer_size()
    cache = ResultCache(max_bytes=2 * size, admit_after=1)
    for key in (b"a", b"b", b"c"):
        cache.put(key, 1, one)
    assert cache.get(b"a", 1) is None
    assert cache.get(b"b", 1) is not None and cache.get(b"c", 1) is not None
    assert cache.info()["bytes"] == 2 * size


def test_the_seen_tickets_are_bounded() -> None:
    cache = ResultCache(seen_keys=2)
    t = _table(2)
    cache.put(b"a", 1, t)
    cache.put(b"b", 1, t)
    cache.put(b"c", 1, t)  # a's sighting is forgotten
    cache.put(b"a", 1, t)
    assert cache.get(b"a", 1) is None
    cache.put(b"c", 1, t)
    assert cache.get(b"c", 1) is not None
