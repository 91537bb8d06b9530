"""Published-state changes (refresh, poll, cache invalidation), streams across a publish, analyze
jobs through actions, graceful shutdown, and the serve/query CLI."""

from __future__ import annotations

import json
import shutil
import signal
import threading
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.flight as flight
import pytest
from flight_testkit import (
    GOOD_TOKEN,
    first_line,
    raw_client,
    running_server,
    same,
    serve_process,
    strip,
)

pytestmark = pytest.mark.ray


@pytest.fixture(scope="module")
def two_jobs(flight_data, tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A store of its own holding two published jobs of the sales table: A (1,000 bins) then B (10,000 bins).
    Yields the store and both job ids; CURRENT points at B."""
    from engine.api import analyze

    store = str(tmp_path_factory.mktemp("lifecycle") / "store")
    a = analyze(flight_data.sales_path, store=store, user_statistics=[])
    b = analyze(flight_data.sales_path, store=store, user_statistics=[], bins=10_000)
    return {"store": store, "a": a.job_id, "b": b.job_id}


def _point(store: str, table: str, job_id: str) -> None:
    """Publish an existing job again (what a concurrent analyze's final step does: a catalog commit)."""
    from engine.store import Store

    Store(store).republish(table, job_id)


def _job(table: pa.Table) -> str:
    return table.schema.metadata[b"metastore.job_id"].decode()


# ============================================================== refresh, poll, invalidation
def test_refresh_moves_to_the_new_state_and_forgets_the_old_run(two_jobs) -> None:
    from engine.lookup import files as lookup_files
    from flight_server.client import MetastoreClient

    store, a, b = two_jobs["store"], two_jobs["a"], two_jobs["b"]
    _point(store, "sales", a)
    with running_server(store, poll_interval=0) as server, MetastoreClient(server.location) as c:
        first = c.histogram("sales", "price")
        assert _job(first) == a and first.num_rows == 1000
        c.statistics("sales", ["price", "city"])
        old_run = server.resolver.resolve("sales").run_uri
        assert any(uri.startswith(old_run) for uri in list(lookup_files._files))
        _point(store, "sales", b)
        assert _job(c.histogram("sales", "price")) == a  # no poll: the held state (and result cache) stays
        assert c.refresh() == {"changed": ["sales"], "tables": {"sales": b}}
        second = c.histogram("sales", "price")
        assert _job(second) == b and second.num_rows == 10_000
        assert not any(uri.startswith(old_run + "/") for uri in list(lookup_files._files))
        assert not any(str(k[0]).startswith(old_run + "/") for k in list(lookup_files._row_groups))
        assert c.history("sales")["history"][0]["job_id"] == b
        assert c.refresh("sales")["changed"] == []


def test_a_hot_ticket_follows_a_published_state_change(two_jobs) -> None:
    """A ticket answered from the hot path (flight_server/hotpath.py: a cached result, a prepared
    entry) is answered from the new state as soon as the resolver holds it."""
    store, a, b = two_jobs["store"], two_jobs["a"], two_jobs["b"]
    _point(store, "sales", a)
    tickets = [
        flight.Ticket(json.dumps({"v": 1, "kind": "histogram", "table": "sales", "column": "price"}).encode()),
        flight.Ticket(json.dumps({"v": 1, "kind": "statistics", "table": "sales", "columns": ["price"]}).encode()),
    ]
    with running_server(store, poll_interval=0) as server:
        client = flight.FlightClient(server.location)
        for ticket in tickets:
            for _ in range(4):  # the ordinary path, then a prepared entry and a cached result
                assert _job(client.do_get(ticket).read_all()) == a
        assert server.results.info()["hits"] >= 2
        _point(store, "sales", b)
        server.resolver.refresh("sales")
        for ticket in tickets:
            assert _job(client.do_get(ticket).read_all()) == b
        assert client.do_get(tickets[0]).read_all().num_rows == 10_000


def test_a_cached_answer_gives_way_to_a_commit_seen_by_the_poll(two_jobs) -> None:
    """Over Flight on loopback, no refresh asked: the result cache's hit equals the uncached answer,
    and once the poll sees a catalog commit (a job published again, as an analyze's last step does)
    the same tickets answer the new state, again equal to the uncached answer."""
    from flight_server import requests

    store, a, b = two_jobs["store"], two_jobs["a"], two_jobs["b"]
    _point(store, "sales", a)
    docs = [
        {"v": 1, "kind": "statistics", "table": "sales", "columns": ["price", "city"]},
        {"v": 1, "kind": "top_frequencies", "table": "sales", "column": "city", "k": 5},
        {"v": 1, "kind": "histogram", "table": "sales", "column": "price"},
    ]
    tickets = [flight.Ticket(json.dumps(doc).encode()) for doc in docs]
    with running_server(store, poll_interval=0.2) as server:
        client = flight.FlightClient(server.location)

        def check(job: str) -> None:
            for doc, ticket in zip(docs, tickets, strict=True):
                uncached = server.service.execute_unprepared(requests.parse(json.dumps(doc)))
                assert _job(uncached) == job
                for _ in range(3):  # answered, prepared, then from the result cache
                    got = client.do_get(ticket).read_all()
                    assert got.schema.equals(uncached.schema, check_metadata=True) and same(got, uncached), doc

        hits = server.results.info()["hits"]
        check(a)
        assert server.results.info()["hits"] >= hits + len(docs)  # the last read of each came from the cache
        _point(store, "sales", b)
        deadline = time.monotonic() + 10
        while _job(client.do_get(tickets[2]).read_all()) != b:
            assert time.monotonic() < deadline, "the poll did not pick up the commit"
            time.sleep(0.05)
        check(b)
        assert client.do_get(tickets[2]).read_all().num_rows == 10_000


def test_poll_sees_a_newer_current(two_jobs) -> None:
    from flight_server.client import MetastoreClient

    store, a, b = two_jobs["store"], two_jobs["a"], two_jobs["b"]
    _point(store, "sales", a)
    with running_server(store, poll_interval=0.2) as server, MetastoreClient(server.location) as c:
        assert _job(c.statistics("sales", ["price"])) == a
        generation = server.resolver.generation
        _point(store, "sales", b)
        deadline = time.monotonic() + 10
        while _job(c.statistics("sales", ["price"])) != b:
            assert time.monotonic() < deadline, "the poll did not pick up the new CURRENT"
            time.sleep(0.05)
        assert server.resolver.generation > generation
        # a table published after the start is served too (poll, or the lookup of an unknown name)
        shutil.copytree(Path(store) / "sales", Path(store) / "sales_copy")
        deadline = time.monotonic() + 10
        while "sales_copy" not in c.tables().column("table").to_pylist():
            assert time.monotonic() < deadline, "the poll did not pick up the new table"
            time.sleep(0.05)
        assert _job(c.statistics("sales_copy", ["price"])) == b
        shutil.rmtree(Path(store) / "sales_copy")
        deadline = time.monotonic() + 10
        while "sales_copy" in c.tables().column("table").to_pylist():
            assert time.monotonic() < deadline
            time.sleep(0.05)


class _SlowStreams:
    """Makes every multi-partition statistics stream sleep ``delay`` s before each partition."""

    def __init__(self, server, delay: float) -> None:
        from flight_server.service import StatisticsService

        inner = server.service

        class Slow(StatisticsService):
            def execute(self, request):
                result = inner.execute(request)
                tables = result.tables

                def slow():
                    for t in tables:
                        time.sleep(delay)
                        yield t

                result.tables = slow()
                return result

        server.service = Slow(server.resolver)


def test_a_stream_in_flight_keeps_its_state_across_a_publish(two_jobs) -> None:
    from engine.lookup import open_statistics
    from flight_server.client import MetastoreClient

    store, a, b = two_jobs["store"], two_jobs["a"], two_jobs["b"]
    _point(store, "sales", a)
    oracle_a = open_statistics(store, "sales")
    assert oracle_a.job_id == a
    with running_server(store, poll_interval=0) as server, MetastoreClient(server.location) as c:
        _SlowStreams(server, 0.3)
        out: dict = {}
        reader = threading.Thread(target=lambda: out.setdefault("t", c.statistics("sales", ["price", "amount"], partitions="*")))
        reader.start()
        time.sleep(0.4)  # the stream has started on job A
        _point(store, "sales", b)
        assert c.refresh()["changed"] == ["sales"]
        reader.join(30)
        got = out["t"]
        assert _job(got) == a
        expected = pa.concat_tables([oracle_a.statistics(["price", "amount"], k) for k in [p.key for p in oracle_a.partitions()]])
        assert same(strip(got), expected)
        assert _job(c.statistics("sales", ["price"])) == b


# ============================================================== graceful shutdown
def test_shutdown_waits_for_streams_in_flight_and_refuses_new_calls(flight_data) -> None:
    from flight_server.client import MetastoreClient

    server_cm = running_server(flight_data.store, poll_interval=0)
    server = server_cm.__enter__()
    try:
        _SlowStreams(server, 0.4)
        c = MetastoreClient(server.location)
        other = MetastoreClient(server.location)
        other.health()  # connected before the shutdown
        out: dict = {}
        reader = threading.Thread(target=lambda: out.setdefault("t", c.statistics("sales", ["price"], partitions="*")))
        reader.start()
        time.sleep(0.3)
        stopped = threading.Event()
        stopper = threading.Thread(target=lambda: (server.shutdown(), stopped.set()))
        started = time.monotonic()
        stopper.start()
        time.sleep(0.2)
        assert not stopped.is_set()  # waiting for the stream
        with pytest.raises(flight.FlightUnavailableError, match="shutting down"):
            other.health()
        reader.join(30)
        stopper.join(30)
        assert stopped.is_set()
        assert out["t"].num_rows == 4  # the stream completed: one row per partition
        assert time.monotonic() - started >= 1.0
        with pytest.raises(flight.FlightError):
            MetastoreClient(server.location, timeout=2).health()
        server.shutdown()  # idempotent
    finally:
        server_cm.__exit__(None, None, None)


# ============================================================== analyze through actions
def test_analyze_action_reports_progress_and_publishes(flight_data, tmp_path: Path) -> None:
    from engine.lookup import open_statistics
    from flight_server.client import MetastoreClient

    store = str(tmp_path / "store")
    roots = (str(Path(flight_data.sales_path).parent), str(tmp_path))
    with running_server(store, poll_interval=0, analyze_roots=roots) as server, MetastoreClient(server.location) as c:
        assert c.tables().num_rows == 0
        job = c.analyze(flight_data.sales_path, name="sales2")
        seen_phases, status = set(), c.analyze_status(job)
        deadline = time.monotonic() + 300
        while status["state"] not in ("succeeded", "failed"):
            assert time.monotonic() < deadline
            if status["phase"]:
                seen_phases.add(status["phase"])
                assert 0 <= status["done"] <= max(status["total"], 0) or status["total"] == 0
            time.sleep(0.05)
            status = c.analyze_status(job)
        assert status["state"] == "succeeded", status
        assert status["result"]["table"] == "sales2" and status["result"]["partitions"] == 4
        assert seen_phases  # progress was reported while running
        oracle = open_statistics(store, "sales2")
        assert status["result"]["job_id"] == oracle.job_id
        assert c.tables().column("table").to_pylist() == ["sales2"]  # refreshed on success, no poll needed
        assert same(strip(c.statistics("sales2", ["price", "city"])), oracle.statistics(["price", "city"]))

        # again: the unchanged partitions are inherited, unless the action says not to
        again = c.wait_analyze(c.analyze(flight_data.sales_path, name="sales2"), timeout=300)
        assert again["state"] == "succeeded" and again["result"]["inherited"] == 4 and again["result"]["recomputed"] == 0
        fresh = c.wait_analyze(c.analyze(flight_data.sales_path, name="sales2", inherit=False), timeout=300)
        assert fresh["state"] == "succeeded" and fresh["result"]["inherited"] == 0 and fresh["result"]["recomputed"] == 4
        assert fresh["inherit"] is False
        with pytest.raises(flight.FlightServerError, match="inherit"):
            c.action("analyze", {"table_uri": flight_data.sales_path, "inherit": "no"})

        failed = c.wait_analyze(c.analyze(str(tmp_path / "no_such_table"), name="nothing"), timeout=120)
        assert failed["state"] == "failed" and "no_such_table" in failed["error"]
        with pytest.raises(flight.FlightServerError, match="bad table name"):
            c.analyze(flight_data.sales_path, name="../escape")
        with pytest.raises(flight.FlightServerError, match="bins"):
            c.analyze(flight_data.sales_path, bins=7)
        with pytest.raises(flight.FlightServerError, match="unknown analyze job"):
            c.analyze_status("analyze-nope")


def test_analyze_action_passes_value_partitions_through(flight_data, tmp_path: Path) -> None:
    import duckdb

    from engine.lookup import open_statistics
    from flight_server.client import MetastoreClient

    store = str(tmp_path / "store")
    roots = (str(Path(flight_data.sales_path).parent),)
    with running_server(store, poll_interval=0, analyze_roots=roots) as server, MetastoreClient(server.location) as c:
        status = c.wait_analyze(c.analyze(flight_data.sales_path, name="vp", value_partitions=True), timeout=300)
        assert status["state"] == "succeeded", status
        assert status["value_partitions"] is True
        got = open_statistics(store, "vp").value_partitions("city", c.top_frequencies("vp", "city", k=1)["value"][0].as_py())
        want = (
            duckdb.connect()
            .sql(
                f"SELECT regexp_extract(filename, '/(part=[0-9]+)/', 1) AS k, count(*) AS n FROM "
                f"read_parquet('{flight_data.sales_path}/*/*.parquet', filename=true, hive_partitioning=false) WHERE city = '{got.text}' GROUP BY ALL"
            )
            .fetchall()
        )
        assert dict(got.partitions) == dict(want) and got.frequency == sum(n for _, n in want)
        with pytest.raises(flight.FlightServerError, match="value_partitions"):
            c.action("analyze", {"table_uri": flight_data.sales_path, "value_partitions": 1})


def test_analyze_roots_restrict_what_may_be_analyzed(flight_data, tmp_path: Path) -> None:
    from flight_server.client import MetastoreClient

    with running_server(str(tmp_path / "store"), poll_interval=0, analyze_roots=(str(tmp_path / "allowed"),)) as server:
        with MetastoreClient(server.location) as c:
            with pytest.raises(flight.FlightServerError, match="outside the locations"):
                c.analyze(flight_data.sales_path)


# ============================================================== CLI
def test_query_command_against_the_server(flight_server, oracle_sales) -> None:
    from click.testing import CliRunner

    from engine.cli.console import metastore

    def run(*args: str):
        return CliRunner().invoke(metastore, ["query", *args, "--server", flight_server.location, "--token", GOOD_TOKEN])

    r = run("statistics", "sales", "-c", "price,city", "--output", "json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.stdout)
    assert [row["column"] for row in doc["rows"]] == ["price", "city"]
    assert doc["metadata"]["metastore.job_id"] == oracle_sales.job_id
    r = run("top", "sales", "-c", "city", "-k", "3", "--output", "json")
    assert [row["value"] for row in json.loads(r.stdout)["rows"]] == oracle_sales.top_frequencies("city", 3)["value"].to_pylist()
    r = run("histogram", "sales", "-c", "price", "--lo", "10", "--hi", "20")
    assert r.exit_code == 0 and "bin" in r.stdout
    r = run("partitions", "sales", "--where", "event_date >= 2024-10-01", "--output", "json")
    assert {row["partition"] for row in json.loads(r.stdout)["rows"]} == {"part=02", "part=03"}
    where = "city == Berlin and event_date >= 2024-10-01 and price > 5"  # one predicate, not a value "Berlin and ..."
    r = run("partitions", "sales", "--where", where, "--output", "json")
    assert r.exit_code == 0, r.output
    assert [row["partition"] for row in json.loads(r.stdout)["rows"]] == oracle_sales.prune_partitions(where).matching == ["part=02", "part=03"]
    bad = run("partitions", "sales", "--where", "city = 'Berlin' and (price > 5")
    assert bad.exit_code == 1 and len(bad.stderr.strip().splitlines()) == 1
    assert "unbalanced parentheses: '(' is never closed at character 21" in bad.stderr
    r = run("tables")
    assert r.exit_code == 0 and "sales" in r.stdout and "wide" in r.stdout
    r = run("health", "--output", "json")
    assert json.loads(r.stdout)["document"]["status"] == "ok"
    bad = run("partitions", "sales", "--where", "price >> 3")
    assert bad.exit_code == 1 and bad.stderr.startswith("error: ") and len(bad.stderr.strip().splitlines()) == 1
    bad = CliRunner().invoke(metastore, ["query", "health", "--server", flight_server.location, "--token", "wrong"])
    assert bad.exit_code == 1 and "invalid token" in bad.stderr


def test_serve_command_serves_and_stops_gracefully_on_sigterm(flight_data) -> None:
    with serve_process(["--store", flight_data.store, "--token", "cli-token"]) as (proc, location, lines):
        assert any("--token shows the token to every local user" in line for line in lines)  # and how to avoid it
        c, opts = raw_client(location, "cli-token")
        assert c.do_get(flight.Ticket(b'{"v":1,"kind":"statistics","table":"sales","columns":["price"]}'), opts).read_all().num_rows == 1
        with pytest.raises(flight.FlightUnauthenticatedError):
            raw_client(location)[0].do_get(flight.Ticket(b"{}")).read_all()
        with pytest.raises(flight.FlightServerError, match="analyze is disabled on this server: .*--analyze-root"):
            list(c.do_action(flight.Action("analyze", b'{"table_uri": "/tmp"}'), opts))  # off by default
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
        assert proc.returncode == 0, err
        assert "stopped" in err


def test_serve_refuses_a_public_address_without_tokens(flight_data) -> None:
    from click.testing import CliRunner

    from engine.cli.console import metastore

    r = CliRunner().invoke(metastore, ["serve", "--store", flight_data.store, "--host", "0.0.0.0", "--port", "0"])
    assert r.exit_code == 1
    assert "needs authentication" in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert first_line(Exception("x. Detail: y")) == "x"
