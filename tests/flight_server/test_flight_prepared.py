"""Prepared answers (flight_server/prepared.py) against the ordinary path through engine.lookup.

Every request the prepared path answers must be exactly (rows, types, schema metadata)
what the lookups answer; requests it does not take, and failing requests, must go the
ordinary way. The oracle here is ``StatisticsService.execute_unprepared``, itself checked
against engine.lookup read directly in test_flight_requests.py. Also: the byte-bounded
cache itself, and a republished job whose partitions are inherited (same statistics
files, another job) answering with the new job's metadata.
"""

from __future__ import annotations

import random
import threading

import pyarrow as pa
import pytest
from flight_testkit import SALES_PARTITIONS, same, strip

pytestmark = pytest.mark.ray

KEYS = [f"part={i:02d}" for i in range(SALES_PARTITIONS)]


@pytest.fixture(scope="module")
def service(flight_data):
    from flight_server.service import StatisticsService
    from flight_server.state import CurrentStateResolver

    resolver = CurrentStateResolver(flight_data.store, poll_interval=0)
    try:
        service = StatisticsService(resolver)
        service.prepared.admit_after = 1  # build on the first request (admission has its own test)
        yield service
    finally:
        resolver.close()


def _requests(oracle_wide) -> list:
    from flight_server.protocol import HistogramRequest, StatisticsRequest, TopFrequenciesRequest

    rng = random.Random(3)
    wide_columns = oracle_wide.statistics_columns()
    out = [
        StatisticsRequest("sales"),
        StatisticsRequest("sales", columns=("price", "city", "event_time", "amount")),
        StatisticsRequest("sales", columns=("price", "price", "id")),  # duplicates: two rows
        StatisticsRequest("sales", columns=()),
        StatisticsRequest("sales", columns=("price", "city"), statistics=("min", "max", "null_count")),
        StatisticsRequest("sales", columns=("price",), statistics=("column", "p50")),
        StatisticsRequest("sales", columns=("city",), statistics=()),
        StatisticsRequest("sales", columns=("price",), statistics=("min", "min")),  # the lookups decide
        StatisticsRequest("sales", columns=("price",), statistics=("theta_sketch",)),  # sketches: the lookups
        StatisticsRequest("sales", columns=("price", "city"), partitions=tuple(KEYS[:2])),
        StatisticsRequest("sales", columns=("price",), partitions="*"),
        StatisticsRequest("wide"),
        *[StatisticsRequest("wide", columns=tuple(rng.sample(wide_columns, 10))) for _ in range(5)],
        StatisticsRequest("wide", columns=tuple(rng.sample(wide_columns, 10)), statistics=("distinct_count", "avg_len")),
    ]
    for key in KEYS:
        out.append(StatisticsRequest("sales", columns=("quantity", "comment", "flag"), partition=key))
        out.append(StatisticsRequest("sales", partition=key))
    for column in ("city", "category", "quantity", "user_id", "comment"):
        for k in (0, 1, 20, 1023, 1024, 1025, 5000):
            out.append(TopFrequenciesRequest("sales", column, k=k))
        out.append(TopFrequenciesRequest("sales", column, k=20, typed=True))
        out.append(TopFrequenciesRequest("sales", column, k=7, partition=KEYS[1]))
    for column in ("price", "event_time", "event_date", "amount", "quantity", "score"):
        out.append(HistogramRequest("sales", column))
        for bins in [(0, 0), (0, 1), (10, 110), (990, 5000), (5, 5), (999, 1000), (1000, 1000), (4000, 5000)]:
            out.append(HistogramRequest("sales", column, bins=bins))
        out.append(HistogramRequest("sales", column, bins=(3, 40), partition=KEYS[2]))
        out.append(HistogramRequest("sales", column, partition=KEYS[3]))
    out.append(HistogramRequest("sales", "price", value_range=(10.0, 20.0)))  # value ranges: the lookups
    return out


def _equal(a: pa.Table, b: pa.Table) -> bool:
    return a.schema.equals(b.schema, check_metadata=True) and a.combine_chunks().equals(b.combine_chunks())


def test_prepared_answers_are_exactly_the_lookups_answers(service, oracle_wide) -> None:
    from flight_server.prepared import StatisticsIndex
    from flight_server.protocol import HistogramRequest, StatisticsRequest, TopFrequenciesRequest

    prepared = 0
    for request in _requests(oracle_wide) * 2:  # the second time from the prepared entries
        state = service.resolver.resolve(request.table)
        fast = service._prepared_answer(state, request)
        expected = service.execute_unprepared(request)
        got = service.execute_table(request)
        assert _equal(got, expected), request
        if fast is not None:
            prepared += 1
            assert _equal(fast, expected), request
        takes = (
            (isinstance(request, StatisticsRequest) and request.partitions is None
             and (request.statistics is None or (len(set(request.statistics)) == len(request.statistics)
                                                 and "theta_sketch" not in request.statistics)))
            or (isinstance(request, TopFrequenciesRequest) and request.k <= 1024)
            or (isinstance(request, HistogramRequest) and request.value_range is None)
        )  # fmt: skip
        assert (fast is not None) == takes, request
    assert prepared > 100
    info = service.prepared.info()
    assert info["hits"] > 0 and info["builds"] > 0 and 0 < info["bytes"] <= service.prepared.max_bytes
    # the statistics entries' rows were taken in C (flight_server/gather.py), not by the
    # pc.take fallback: every column type of a statistics file is one _gather.c copies
    indexes = [value for value, _ in service.prepared._entries.values() if isinstance(value, StatisticsIndex)]
    assert indexes and all(i.rows.gathers and all(r.gathers for r in i.selections.values()) for i in indexes)


def test_failing_requests_fail_as_the_lookups_do(service) -> None:
    from engine.exceptions import InvalidArgumentError
    from flight_server.protocol import HistogramRequest, StatisticsRequest, TopFrequenciesRequest

    bad = [
        (StatisticsRequest("sales", columns=("price", "no_such_column")), "no statistics for column"),
        (StatisticsRequest("sales", columns=("price",), partition="part=99"), "has no partition"),
        (StatisticsRequest("sales", columns=("price",), statistics=("no_such_statistic",)), "unknown statistic"),
        (TopFrequenciesRequest("sales", "price", k=5), "has no frequencies"),
        (TopFrequenciesRequest("sales", "no_such_column", k=5), "no column"),
        (TopFrequenciesRequest("sales", "city", k=5, partition="part=99"), "has no partition"),
        (HistogramRequest("sales", "city", bins=(0, 10)), "has no histogram"),
        (HistogramRequest("sales", "price", bins=(0, 10), partition="nope"), "has no partition"),
    ]
    for request, message in bad:
        for _ in range(2):
            with pytest.raises(InvalidArgumentError, match=message):
                service.execute_table(request)


def test_the_flight_server_answers_from_prepared_entries(flight_data, oracle_sales) -> None:
    from flight_testkit import running_server

    from flight_server.client import MetastoreClient

    with running_server(flight_data.store, poll_interval=0) as server, MetastoreClient(server.location) as client:
        # distinct tickets (the result cache does not answer them) on the same files: the
        # entries are built on the second request and answer the third
        for columns in (["price", "city", "amount"], ["city", "amount", "price"], ["amount", "price", "city"]):
            for key in [None, *KEYS]:
                got = client.statistics("sales", columns, partition=key)
                assert same(strip(got), oracle_sales.statistics(columns, key))
        for k in (3, 4, 5):
            assert same(client.top_frequencies("sales", "city", k=k), oracle_sales.top_frequencies("city", k))
        info = server.service.prepared.info()
        assert info["builds"] == 5 + 1 and info["hits"] == 5 + 1  # statistics files (table, 4 partitions), city's head
        assert client.health()["prepared_cache"]["entries"] == 6


# ============================================================== the cache itself
def test_prepared_cache_is_bounded_in_bytes_and_least_recently_used_first_out() -> None:
    from flight_server.prepared import PreparedCache

    cache = PreparedCache(max_bytes=1000, admit_after=1)
    for i in range(10):
        assert cache.get(("k", i), lambda i=i: (f"v{i}", 200)) == f"v{i}"
    info = cache.info()
    assert info["bytes"] <= 1000 and info["entries"] == 5
    assert cache.get(("k", 5), lambda: ("rebuilt", 200)) == "v5"  # kept, and now the most recent
    cache.get(("k", 10), lambda: ("v10", 200))
    assert cache.get(("k", 6), lambda: ("rebuilt", 200)) == "rebuilt"  # the oldest went first
    assert cache.get(("k", 5), lambda: ("again", 200)) == "v5"


def test_prepared_cache_remembers_nothing_to_prepare_and_never_an_error() -> None:
    from flight_server.prepared import PreparedCache

    cache = PreparedCache(max_bytes=1000, admit_after=1)
    calls = []

    def nothing():
        calls.append("n")
        return None, 0

    assert cache.get(("none",), nothing) is None
    assert cache.get(("none",), nothing) is None
    assert calls == ["n"]  # remembered: the next request goes the ordinary way at once

    def too_large():
        calls.append("big")
        return "big", 600  # more than a quarter of the budget

    assert cache.get(("big",), too_large) is None and cache.get(("big",), too_large) is None
    assert calls.count("big") == 1

    def failing():
        calls.append("f")
        raise ValueError("bad request")

    for _ in range(2):
        with pytest.raises(ValueError):
            cache.get(("f",), failing)
    assert calls.count("f") == 2  # an error is never cached

    off = PreparedCache(max_bytes=0, admit_after=1)
    assert off.get(("x",), lambda: pytest.fail("built with the cache off")) is None


def test_prepared_cache_builds_an_entry_once_under_concurrency() -> None:
    from flight_server.prepared import PreparedCache

    cache = PreparedCache(max_bytes=10_000, admit_after=1)
    built = []
    start = threading.Barrier(8)

    def build():
        built.append(1)
        threading.Event().wait(0.05)  # hold the gate so that the others queue behind it
        return "value", 10

    results = []

    def worker():
        start.wait()
        results.append(cache.get(("same",), build))

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == ["value"] * 8 and len(built) == 1


def test_prepared_cache_builds_an_entry_on_its_second_request_only() -> None:
    from flight_server.prepared import PreparedCache

    cache = PreparedCache(max_bytes=10_000, admit_after=2, seen_keys=3)
    built = []

    def build(name: str):
        return lambda: (built.append(name), (name, 10))[1]

    for i in range(5):  # a scan of keys asked once builds nothing
        assert cache.get(("scan", i), build(f"scan{i}")) is None
    assert built == [] and cache.info()["entries"] == 0
    assert cache.get(("scan", 4), build("scan4")) == "scan4"  # its second request: built
    assert cache.get(("scan", 4), build("again")) == "scan4" and built == ["scan4"]
    assert cache.get(("scan", 0), build("scan0")) is None  # forgotten (only 3 keys remembered): a first request again
    assert cache.get(("scan", 0), build("scan0")) == "scan0"


# ============================================================== republish with inherited files
def test_a_republished_job_sharing_statistics_files_answers_with_its_own_metadata(flight_data, tmp_path) -> None:
    from flight_testkit import running_server

    from engine.api import analyze
    from engine.lookup import open_statistics
    from engine.store import Store
    from flight_server.client import MetastoreClient

    store = str(tmp_path / "store")
    a = analyze(flight_data.sales_path, store=store, user_statistics=[])
    b = analyze(flight_data.sales_path, store=store, user_statistics=[])  # unchanged data: partitions inherited
    oracle_b = open_statistics(store, "sales")
    key = KEYS[1]
    assert oracle_b.job_id == b.job_id != a.job_id
    shared = oracle_b.file_uri("statistics.parquet", key)
    Store(store).republish("sales", a.job_id)
    with running_server(store, poll_interval=0) as server, MetastoreClient(server.location) as c:
        assert server.resolver.resolve("sales").stats.file_uri("statistics.parquet", key) == shared  # the same file
        first = c.statistics("sales", ["price", "city"], partition=key)
        assert first.schema.metadata[b"metastore.job_id"].decode() == a.job_id
        Store(store).republish("sales", b.job_id)
        assert c.refresh()["changed"] == ["sales"]
        second = c.statistics("sales", ["price", "city"], partition=key)
        assert second.schema.metadata[b"metastore.job_id"].decode() == b.job_id
        assert same(strip(second), oracle_b.statistics(["price", "city"], key))
