"""Exact subsets over Flight (issue #28 item 3, issue #33 item 1), real servers on loopback.

- A default server (no ``--analyze-root``), ``--no-analyze`` and ``--no-exact`` refuse
  ``"exact": true`` with the code ``forbidden`` and write nothing under the store; the
  subset answers from stored statistics still work.
- With the permission, a table pandas wrote and the CLI analyzed with its defaults (shipped
  user statistics and t-digests) answers equal to DuckDB over the same predicate, its user
  statistics included; a table whose data lies outside the roots is refused.
- The limits: concurrent computations (``busy``), computations per client (``rate_limited``;
  answers already computed are served), the cache budget (least recently used predicates
  deleted); ``metastore serve``'s options reach them.
"""

from __future__ import annotations

import json
import operator
import os
import tempfile
import threading
import time
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.flight as flight
import pytest
from click.testing import CliRunner
from flight_testkit import first_line, raw_client, running_server, serve_process

from engine import values as value_forms
from engine.api import analyze, open_statistics
from engine.cli.console import metastore
from engine.runtime.subset import subset_location
from engine.stats.user import UserStatistic
from engine.subset import Method, methods_of
from flight_server.client import MetastoreClient

pytestmark = pytest.mark.ray

#: the directory of the gate the ``held`` statistic waits on (a file ``open`` in it opens the gate)
GATE = Path(tempfile.mkdtemp(prefix="pt-subsets-gate-"))


def _held_statistic() -> UserStatistic:
    """A string statistic that, on a batch holding the value 'hold', waits until the gate is open
    (at most 5 minutes): a computation that stays running until the test lets it finish.
    Made in a function, so Ray pickles it by value; bound to HELD, so analyze records
    ``test_flight_exact:HELD`` and the server loads it from there."""
    gate = str(GATE / "open")

    def compute(arr: pa.Array) -> int:
        if "hold" in arr.to_pylist():
            deadline = time.monotonic() + 300
            while not os.path.exists(gate) and time.monotonic() < deadline:
                time.sleep(0.05)
        return len(arr)

    return UserStatistic(name="held", compute=compute, merge=operator.add, result_type=pa.int64(), applies_to=pa.types.is_string)


HELD = _held_statistic()


def store_files(store: str) -> list[str]:
    return sorted(str(p.relative_to(store)) for p in Path(store).rglob("*"))


@pytest.fixture(scope="module")
def lake(ray_runtime, tmp_path_factory) -> dict[str, str]:
    """``events`` (pandas, Hive partitions; analyzed by the CLI with --tdigest and its default user
    statistics) and ``held`` (the HELD statistic) under ``root``; ``outside``: a table elsewhere."""
    base = tmp_path_factory.mktemp("exact_flight")
    root, store, elsewhere = base / "lake", base / "store", base / "elsewhere"
    rng = np.random.default_rng(7)
    n = 2000
    x = np.round(rng.normal(0, 2, n), 1)
    x[rng.random(n) < 0.05] = 0.0
    df = pd.DataFrame(
        {
            "id": np.arange(n, dtype=np.int64),
            "x": pd.array(np.where(rng.random(n) < 0.08, np.nan, x), dtype="Float64"),
            "city": pd.array(np.where(rng.random(n) < 0.1, None, rng.choice(["Berlin", "Rome", "Oslo"], n)), dtype="string"),
            "part": np.arange(n) % 4,
        }
    )
    df.to_parquet(root / "events", partition_cols=["part"])
    result = CliRunner().invoke(metastore, ["--store", str(store), "analyze", str(root / "events"), "--tdigest"])
    assert result.exit_code == 0, result.output
    tags = pd.DataFrame({"id": np.arange(1000, dtype=np.int64), "tag": ["free"] * 999 + ["hold"]})
    (root / "held").mkdir()
    tags.to_parquet(root / "held" / "data.parquet")
    (GATE / "open").touch()  # analyze passes the gate
    analyze(str(root / "held"), store=str(store), user_statistics=[HELD])
    (GATE / "open").unlink()
    elsewhere.mkdir()
    tags.to_parquet(elsewhere / "data.parquet")
    analyze(str(elsewhere), store=str(store), name="outside", user_statistics=[])
    return {"root": str(root), "store": str(store), "events": str(root / "events")}


def duck(path: str, where: str, column: str) -> dict:
    con = duckdb.connect()
    q = f'"{column}"'
    row = con.execute(
        f"SELECT count(*), count(*) - count({q}), min({q}), max({q}), count(DISTINCT {q}), count_if(TRY_CAST({q} AS DOUBLE) = 0) "
        f"FROM read_parquet('{path}/**/*.parquet', hive_partitioning = true) WHERE {where}"
    ).fetchone()
    con.close()
    return dict(zip(("row_count", "null_count", "min", "max", "distinct_count", "zero_count"), row))


def code(exc: flight.FlightError) -> str:
    return json.loads(exc.extra_info)["code"]


# ------------------------------------------------------------------ permission
EXACT = {"v": 1, "kind": "statistics", "table": "events", "columns": ["id"], "where": "id = 1000", "exact": True}


@pytest.mark.parametrize(
    "options,words",
    [
        ({}, "--analyze-root"),
        ({"allow_analyze": False, "with_roots": True}, "(--no-analyze)"),
        ({"allow_exact": False, "with_roots": True}, "(--no-exact)"),
    ],
)
def test_a_server_without_the_permission_refuses_exact_and_writes_nothing(lake, options: dict, words: str) -> None:
    store = lake["store"]
    before = store_files(store)
    options = dict(options)
    if options.pop("with_roots", False):
        options["analyze_roots"] = (lake["root"],)
    with running_server(store, poll_interval=0, **options) as server:
        c, opts = raw_client(server.location)
        for call in (
            lambda: c.do_get(flight.Ticket(json.dumps(EXACT).encode()), opts).read_all(),
            lambda: c.get_flight_info(flight.FlightDescriptor.for_command(json.dumps(EXACT).encode()), opts),
            lambda: c.get_schema(flight.FlightDescriptor.for_command(json.dumps(EXACT).encode()), opts),
        ):
            with pytest.raises((flight.FlightError, pa.ArrowException)) as info:  # get_schema: an Arrow error (docs/reference/FLIGHT.md)
                call()
            text = first_line(info.value)
            assert "exact subsets are disabled on this server" in text and words in text and "disclose" in text, text
            assert "Traceback" not in str(info.value)
        with pytest.raises(flight.FlightUnauthorizedError) as info:
            c.do_get(flight.Ticket(json.dumps(EXACT).encode()), opts).read_all()
        assert code(info.value) == "forbidden"
        with MetastoreClient(server.location) as client:
            health = client.action("health")
            assert health["exact"]["enabled"] is False and health["exact"]["running"] == 0
            # stored and estimated subset answers are not data access: still served
            t = client.statistics("events", ["id"], where="id = 1000")
            assert methods_of(t).of("*", "row_count").method is not Method.COMPUTED
    assert store_files(store) == before


def test_with_the_permission_exact_equals_duckdb(lake) -> None:
    store = lake["store"]
    where = "x > 0.5 or city = 'Oslo'"
    with running_server(store, poll_interval=0, analyze_roots=(lake["root"],)) as server, MetastoreClient(server.location, timeout=300) as c:
        assert c.action("health")["exact"]["enabled"] is True
        t = c.statistics("events", ["id", "x", "city"], where=where, exact=True)
        m = methods_of(t)
        ts = open_statistics(store, "events")
        for row in t.to_pylist():
            want = duck(lake["events"], where, row["column"])
            for s in ("row_count", "null_count", "min", "max", "distinct_count"):
                got = row[s]
                if s in ("min", "max"):  # their text forms (docs/VALUE_FORMS.md)
                    got = value_forms.decode_scalar(got, ts.column_type(row["column"])).as_py()
                assert got == want[s], (row["column"], s)
                assert m.of(row["column"], s).method is Method.COMPUTED
        x = next(r for r in t.to_pylist() if r["column"] == "x")
        assert x["zero_count"] == duck(lake["events"], where, "x")["zero_count"]
        assert m.of("x", "zero_count").method is Method.COMPUTED and m.of("x", "tdigest_sketch").method is Method.COMPUTED
        # one statistic by name (was: KeyError 'Field "row_count" does not exist in schema')
        only = c.statistics("events", ["x"], statistics=["min"], where=where, exact=True)
        assert only.column_names == ["partition", "column", "min"]
        assert float(only.column("min")[0].as_py()) == duck(lake["events"], where, "x")["min"]
        # the API on the same store agrees (the server's answer came from the cache it shares)
        api = open_statistics(store, "events").statistics(["x"], where=where, exact=True)
        assert api.column("zero_count").to_pylist() == [x["zero_count"]]
        # a table whose data lies outside the roots: refused, and its location is not named
        with pytest.raises(flight.FlightUnauthorizedError) as info:
            c.statistics("outside", ["id"], where="id = 1", exact=True)
        assert code(info.value) == "forbidden" and "outside the locations" in str(info.value)
        assert "elsewhere" not in str(info.value)


# ------------------------------------------------------------------ limits
def test_concurrent_computations_beyond_the_limit_are_refused(lake) -> None:
    store = lake["store"]
    gate = GATE / "open"
    results: dict[str, object] = {}
    with running_server(store, poll_interval=0, analyze_roots=(lake["root"],), max_exact_jobs=1) as server:

        def held() -> None:
            with MetastoreClient(server.location, timeout=600) as c:
                try:
                    results["held"] = c.statistics("held", ["tag"], where="tag = 'hold'", exact=True)
                except Exception as exc:  # noqa: BLE001 - reported by the assertion below
                    results["held"] = exc

        worker = threading.Thread(target=held)
        worker.start()
        try:
            with MetastoreClient(server.location, timeout=60) as c:
                deadline = time.monotonic() + 240
                while c.action("health")["exact"]["running"] == 0 and worker.is_alive() and time.monotonic() < deadline:
                    time.sleep(0.1)
                assert c.action("health")["exact"]["running"] == 1, results
                with pytest.raises(flight.FlightUnavailableError) as info:
                    c.statistics("held", ["id"], where="id < 5", exact=True)
                assert code(info.value) == "busy" and "retry later" in str(info.value)
        finally:
            gate.touch()
            worker.join(600)
            gate.unlink()
        got = results["held"]
        assert isinstance(got, pa.Table), got
        assert got.column("row_count").to_pylist() == [1] and got.column("held").to_pylist() == [1]
        with MetastoreClient(server.location, timeout=300) as c:  # the slot is free again
            assert c.statistics("held", ["id"], where="id < 5", exact=True).column("row_count").to_pylist() == [5]


def test_computations_per_client_are_rate_limited(lake) -> None:
    store = lake["store"]
    with (
        running_server(store, poll_interval=0, analyze_roots=(lake["root"],), exact_rate=2, exact_rate_window=3600) as server,
        MetastoreClient(server.location, timeout=300) as c,
    ):
        for k in (1, 2):
            assert c.statistics("held", ["id"], where=f"id = {k} and tag = 'free'", exact=True).column("row_count").to_pylist() == [1]
        with pytest.raises(flight.FlightUnavailableError) as info:
            c.statistics("held", ["id"], where="id = 3 and tag = 'free'", exact=True)
        assert code(info.value) == "rate_limited" and "at most 2 in 3600 s" in str(info.value)
        # an answer already computed is served: it reads no data
        assert c.statistics("held", ["id"], where="id = 1 and tag = 'free'", exact=True).column("row_count").to_pylist() == [1]


def test_the_subsets_cache_keeps_its_budget_by_evicting_the_least_recently_used(lake, tmp_path) -> None:
    store = str(tmp_path / "store")
    analyze(str(Path(lake["root"]) / "held"), store=store, name="held", user_statistics=[])
    ts = open_statistics(store, "held")
    wheres = [f"id = {k}" for k in (11, 12, 13, 14)]
    roots = {w: subset_location(ts, w) for w in wheres}

    def size(w: str) -> int:
        return sum(p.stat().st_size for p in Path(roots[w]).rglob("*") if p.is_file())

    def kept() -> set[str]:
        return {w for w in wheres if Path(roots[w]).exists()}

    roots_ = (lake["root"],)
    with running_server(store, poll_interval=0, analyze_roots=roots_) as server, MetastoreClient(server.location, timeout=300) as c:
        c.statistics("held", ["id"], where=wheres[0], exact=True)
    budget = int(size(wheres[0]) * 2.5)
    with (
        running_server(store, poll_interval=0, analyze_roots=roots_, exact_cache_bytes=budget) as server,
        MetastoreClient(server.location, timeout=300) as c,
    ):
        c.statistics("held", ["id"], where=wheres[1], exact=True)
        assert kept() == set(wheres[:2])
        c.statistics("held", ["id"], where=wheres[2], exact=True)
        assert kept() == set(wheres[1:3])  # the oldest (from before this server started) went
        c.statistics("held", ["id"], where=wheres[1], exact=True)  # a cache hit: now the most recent
        c.statistics("held", ["id"], where=wheres[3], exact=True)
        assert kept() == {wheres[1], wheres[3]}
        health = c.action("health")["exact"]
        assert health["evicted"] == 2 and health["cached_bytes"] <= budget
        # an evicted predicate is computed again, from the data
        assert c.statistics("held", ["id"], where=wheres[0], exact=True).column("row_count").to_pylist() == [1]
        assert Path(roots[wheres[0]]).exists()


def test_serve_takes_the_exact_options(lake, tmp_path) -> None:
    """``metastore serve``'s options reach the server (health); ``--no-exact`` turns exact subsets
    off on a server with roots (analyze stays on)."""
    args = ["--store", str(tmp_path / "store"), "--analyze-root", lake["root"], "--poll-interval", "0"]
    limits = ["--max-exact-jobs", "3", "--exact-rate", "5", "--exact-cache-mb", "1"]
    with serve_process([*args, *limits, "--no-exact"]) as (proc, location, lines):
        assert not any("exact subsets are on" in line for line in lines), lines
        with MetastoreClient(location, timeout=60) as c:
            health = c.action("health")
        got = health["exact"]
        assert got["enabled"] is False and (got["max_jobs"], got["rate"], got["window_s"], got["cache_bytes"]) == (3, 5, 60, 1024 * 1024)
        assert health["analyze"]["enabled"] is True
        with pytest.raises(flight.FlightUnauthorizedError, match=r"\(--no-exact\)"), MetastoreClient(location, timeout=60) as c:
            c.statistics("events", ["id"], where="id = 1", exact=True)
    help_text = " ".join(CliRunner().invoke(metastore, ["serve", "--help"]).output.split())
    for option in ("--no-exact", "--max-exact-jobs", "--exact-rate", "--exact-cache-mb", "disclose rows"):
        assert option in help_text, option
