#!/usr/bin/env python
"""Flight server under load: N concurrent clients on loopback against in-process lookups.

One run:

1. generates a wide table (1,000 mixed int/float/string columns, 4 partitions) and
   analyzes it on a local Ray (or reuses ``--work DIR`` from an earlier run), then
   stops Ray (the load test needs the cores);
2. baseline: the same requests answered by ``engine.lookup`` in this process
   (one thread; warm caches, and cold: caches cleared before each request);
3. starts the Flight server in this process on 127.0.0.1 (port 0, bearer token on),
   warms it (every column twice per request kind, as a server in service has seen them)
   and runs, one after another:

   - closed loop, for each concurrency in ``--clients`` (default 1, 4, 16, 64): every
     client sends its next request as soon as the last one is answered, which measures
     saturation (latency = queueing behind the other clients);
   - paced, for each ``CLIENTS:RATE`` in ``--paced`` (default 16:25, 64:10): Poisson
     arrivals at RATE requests/s per client, latency counted from the scheduled send
     time (no coordinated omission), which measures latency at a planner-like load.

   Clients are threads spread over up to ``--procs`` client processes (spawned), each
   with its own connection, for ``--seconds`` per run or ``--requests`` per client.
   Each client runs the same mix, the kinds interleaved, over 20,000 distinct
   requests of its own (random columns: results rarely repeat, so the server's result
   cache is measured as it is hit, see ``result_cache_hit_ratio``; ``--no-result-cache``
   turns it off):

   - ``statistics``: 10 random columns of the 1,000-column table (table level);
   - ``top_frequencies``: top 20 of a random discrete (int or string) column;
   - ``histogram``: 100 consecutive bins of a random numeric column.

4. unless ``--server-procs`` < 2: the same 16 closed-loop clients spread over
   ``metastore serve --processes N`` (N = ``--server-procs``, default 2; started as a user
   does, warmed over Flight, stopped by SIGTERM), client process i on process i mod N's port:
   Arrow Flight binds without SO_REUSEPORT (arrow/flight/transport/grpc/grpc_server.cc),
   so processes cannot share a port (engine/cli/processes.py); a deployment spreads its
   clients or puts a balancer in front. Then, unless ``--no-floor``, as many no-op floor
   servers in processes of their own, one port each, the same way (ratios printed); the
   pair ``--spread-repeats`` times;
5. the floor, unless ``--no-floor``: right after the closed-loop run of 16 clients (or of each
   count in ``--floor-clients``; a count we did not run: after ours), the same clients and
   mix against a pyarrow Flight server that does no work (each ``do_get`` returns a fixed answer of the
   kind asked, the same shapes as the real answers, behind the same bearer-token check,
   keeping its threads' Python thread states as the server does):
   what pyarrow, gRPC and the clients cost by themselves on this machine, measured in
   the same run. Its p50 bounds what a pyarrow Flight server can reach here with these clients;
   ours against it (p50 per kind, throughput) is printed as ratios (``against_floor`` in the JSON).

Reports throughput, p50/p99 latency per kind, CPU per request (server process and
clients), the errors seen (there must be none: exit code 1 otherwise), and checks the
target: statistics p50 < 5 ms and p99 < 50 ms at 16 clients. ``--json OUT`` writes it all.

Usage: python bench/bench_flight.py [--clients 1,4,16,64] [--paced 16:25,64:10] [--seconds 10] [--server-procs 2] [--spread-repeats 1] [--no-floor] [--floor-clients 16] [--json OUT] [--work DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import multiprocessing as mp
import os
import platform
import random
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

KINDS = ("statistics", "top_frequencies", "histogram")
TARGET_CLIENTS = 16
TARGET_P50_MS = 5.0
TARGET_P99_MS = 50.0
TABLE = "wide"
POOL = 20_000  # distinct requests per client (random columns: results repeat rarely)


# ============================================================== requests
def make_requests(catalog: dict[str, Any], seed: int, n: int) -> list[tuple[str, dict[str, Any]]]:
    """A deterministic mix of ``n`` requests (kind, JSON document), the kinds interleaved."""
    rng = random.Random(seed)
    columns, discrete, numeric = catalog["columns"], catalog["discrete"], catalog["numeric"]
    out = []
    for i in range(n):
        kind = KINDS[i % len(KINDS)]
        if kind == "statistics":
            doc = {"v": 1, "kind": "statistics", "table": TABLE, "columns": rng.sample(columns, 10)}
        elif kind == "top_frequencies":
            doc = {"v": 1, "kind": "top_frequencies", "table": TABLE, "column": rng.choice(discrete), "k": 20}
        else:
            column, bins = rng.choice(numeric)
            start = rng.randrange(0, max(1, bins - 100))
            doc = {"v": 1, "kind": "histogram", "table": TABLE, "column": column, "bins": [start, start + 100]}
        out.append((kind, doc))
    return out


def answer_in_process(ts: Any, doc: dict[str, Any]) -> Any:
    """The baseline: the same request through engine.lookup directly."""
    if doc["kind"] == "statistics":
        return ts.statistics(doc["columns"])
    if doc["kind"] == "top_frequencies":
        return ts.top_frequencies(doc["column"], doc["k"])
    return ts.histogram(doc["column"], bins=tuple(doc["bins"]))


def percentiles(samples: list[float]) -> dict[str, float]:
    if not samples:
        return {"n": 0}
    s = sorted(samples)
    return {
        "n": len(s),
        "p50_ms": round(statistics.median(s) * 1e3, 3),
        "p99_ms": round(s[min(len(s) - 1, int(0.99 * len(s)))] * 1e3, 3),
        "mean_ms": round(statistics.fmean(s) * 1e3, 3),
        "max_ms": round(s[-1] * 1e3, 3),
    }


# ============================================================== client processes
def client_process(
    location: str,
    token: str | None,
    catalog: dict[str, Any],
    threads: int,
    seed: int,
    seconds: float,
    max_requests: int,
    start_at: float,
    rate: float,
    out: Any,
) -> None:
    """``threads`` clients, each with its own connection; results to the queue ``out``.

    ``rate`` 0: closed loop (the next request as soon as the last one is answered);
    otherwise Poisson arrivals at ``rate`` requests/s per client, the latency counted from
    the scheduled time (so a late start counts: no coordinated omission).
    """
    sys.path.insert(0, str(REPO))
    import pyarrow.flight as flight

    from flight_server import protocol
    from flight_server.client import MetastoreClient

    results: list[dict[str, Any]] = []
    lock = threading.Lock()

    def run(index: int) -> None:
        client = MetastoreClient(location, token=token)
        mix = [(k, protocol.encode(d)) for k, d in make_requests(catalog, seed * 1000 + index, POOL)]
        arrivals = random.Random(seed * 1000 + index + 1)
        lat: dict[str, list[float]] = {k: [] for k in KINDS}
        errors: list[str] = []
        # warm the connection outside the measurement
        client.get(mix[0][1])
        while time.time() < start_at:
            time.sleep(0.001)
        begin = time.perf_counter()
        deadline = begin + seconds
        done = 0
        i = 0
        scheduled = begin
        while done < max_requests and time.perf_counter() < deadline:
            kind, ticket = mix[i % len(mix)]
            i += 1
            if rate > 0:
                scheduled += arrivals.expovariate(rate)
                pause = scheduled - time.perf_counter()
                if pause > 0:
                    time.sleep(pause)
                t0 = scheduled
            else:
                t0 = time.perf_counter()
            try:
                table = client.get(ticket)
                if table.num_rows == 0:
                    errors.append(f"{kind}: empty result")
            except flight.FlightError as exc:
                errors.append(f"{kind}: {type(exc).__name__}: {exc}")
            lat[kind].append(time.perf_counter() - t0)
            done += 1
        client.close()
        with lock:
            results.append({"latencies": lat, "errors": errors, "requests": done, "wall": time.perf_counter() - begin})

    workers = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    for w in workers:
        w.start()
    while time.time() < start_at:  # the clients' set-up (connections, 20,000 tickets each) is not counted
        time.sleep(0.001)
    cpu0 = time.process_time()
    for w in workers:
        w.join()
    if results:
        results[0]["cpu_s"] = time.process_time() - cpu0
    out.put(results)


def run_load(
    location: str | list[str],
    token: str | None,
    catalog: dict[str, Any],
    clients: int,
    procs: int,
    seconds: float,
    max_requests: int,
    rate: float = 0.0,
    server_pids: list[int] | None = None,
) -> dict[str, Any]:
    """One run; ``location`` a list: client process i talks to ``location[i % len]`` (servers in the
    processes ``server_pids``, whose CPU is counted; by default the server is this process)."""
    import psutil

    locations = [location] if isinstance(location, str) else list(location)
    servers = [psutil.Process(pid) for pid in server_pids] if server_pids else None

    def server_cpu_now() -> float:
        if servers is None:
            return time.process_time()
        return sum(sum(p.cpu_times()[:2]) for p in servers)

    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    n_procs = min(clients, procs)
    per_proc = [clients // n_procs + (1 if i < clients % n_procs else 0) for i in range(n_procs)]
    start_at = time.time() + 3.0 + 0.05 * clients  # time for the processes to start and connect
    ps = [
        ctx.Process(
            target=client_process,
            args=(locations[i % len(locations)], token, catalog, t, 100 * clients + i + int(rate * 7), seconds, max_requests, start_at, rate, queue),
        )
        for i, t in enumerate(per_proc)
    ]
    for p in ps:
        p.start()
    collected: list[dict[str, Any]] = []
    while time.time() < start_at:
        time.sleep(0.01)
    server_cpu0 = server_cpu_now()
    for _ in ps:
        collected.extend(queue.get(timeout=seconds + 120))
    server_cpu = server_cpu_now() - server_cpu0
    for p in ps:
        p.join(timeout=30)
    lat: dict[str, list[float]] = {k: [] for k in KINDS}
    errors: list[str] = []
    total = 0
    for r in collected:
        for k in KINDS:
            lat[k].extend(r["latencies"][k])
        errors.extend(r["errors"])
        total += r["requests"]
    measured = max((r["wall"] for r in collected), default=1e-9)
    return {
        "clients": clients,
        "mode": "closed loop" if rate <= 0 else f"paced {rate:g} req/s per client",
        "client_processes": n_procs,
        "server_processes": len(server_pids) if server_pids else 1,
        "requests": total,
        "seconds": round(measured, 3),
        "throughput_rps": round(total / measured, 1),
        "kinds": {k: {**percentiles(lat[k]), "throughput_rps": round(len(lat[k]) / measured, 1)} for k in KINDS},
        "errors": len(errors),
        "error_samples": errors[:5],
        "cpu_ms_per_request": {
            "server": round(server_cpu / max(total, 1) * 1e3, 3),
            "clients": round(sum(r.get("cpu_s", 0.0) for r in collected) / max(total, 1) * 1e3, 3),
        },
        "load_avg_1m_end": round(os.getloadavg()[0], 2),  # the machine is shared: our own threads count too
    }


# ============================================================== warm-up
def warm(service: Any, catalog: dict[str, Any]) -> None:
    """Every column twice through the server's service, as a long-running server has seen them:
    the measured runs then find the caches of a server in service, not a cold start."""
    from flight_server import requests

    docs = warm_docs(catalog)
    for _ in range(2):  # prepared answers are built on a key's second request
        for doc in docs:
            service.execute_table(requests.parse(doc))


# ============================================================== several server processes
def warm_docs(catalog: dict[str, Any]) -> list[dict[str, Any]]:
    """Every column's requests: what :func:`warm` sends (each twice)."""
    columns = catalog["columns"]
    docs = [{"v": 1, "kind": "statistics", "table": TABLE, "columns": columns[i : i + 10]} for i in range(0, len(columns), 10)]
    docs += [{"v": 1, "kind": "top_frequencies", "table": TABLE, "column": c, "k": 20} for c in catalog["discrete"]]
    docs += [{"v": 1, "kind": "histogram", "table": TABLE, "column": c, "bins": [0, 100]} for c, _ in catalog["numeric"]]
    return docs


@contextlib.contextmanager
def serve_cli(store: str, token: str | None, catalog: dict[str, Any], procs: int) -> Iterator[tuple[list[str], list[int]]]:
    """``metastore serve --processes PROCS`` as a user starts it (engine/cli/processes.py: one port
    each, Arrow Flight cannot share one), every process warmed over Flight as :func:`warm` does;
    yields (locations, the server processes' pids). SIGTERM at the end, as a deployment stops it."""
    import psutil

    from flight_server import protocol
    from flight_server.client import MetastoreClient

    path = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p)
    env = {**os.environ, "PYTHONPATH": path, "METASTORE_FLIGHT_TOKEN": token or ""}
    command = [sys.executable, "-m", "engine.cli.console", "serve", "--store", store, "--port", "0", "--poll-interval", "2s"]
    proc = subprocess.Popen([*command, "--processes", str(procs)], stderr=subprocess.PIPE, text=True, env=env, cwd=str(REPO))
    try:
        assert proc.stderr is not None
        locations: list[str] = []
        lines: list[str] = []
        while len(locations) < procs:
            line = proc.stderr.readline()
            if not line:
                raise RuntimeError("metastore serve --processes ended:\n" + "".join(lines))
            lines.append(line)
            m = re.search(r"^\[process .* on (grpc\+tcp://\S+) \(auth o", line)
            if m:
                locations.append(m.group(1))
        threading.Thread(target=proc.stderr.read, daemon=True).start()  # keep reading its lines
        pids = [c.pid for c in psutil.Process(proc.pid).children() if "resource_tracker" not in " ".join(c.cmdline())]
        docs = [protocol.encode(d) for d in warm_docs(catalog)]
        for location in locations:
            with MetastoreClient(location, token=token) as client:
                for _ in range(2):  # prepared answers are built on a key's second request
                    for ticket in docs:
                        client.get(ticket)
        yield locations, pids
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=90)
        except subprocess.TimeoutExpired:
            proc.kill()


def spread_cli_run(store: str, token: str | None, catalog: dict[str, Any], args: Any) -> dict[str, Any]:
    """16 closed-loop clients against ``metastore serve --processes N``, client process i on port i mod N."""
    with serve_cli(store, token, catalog, args.server_procs) as (locations, pids):
        return run_load(locations, token, catalog, TARGET_CLIENTS, max(args.procs, args.server_procs), args.seconds, args.requests, server_pids=pids)


def floor_process(answers: dict[str, Any], token: str | None, out: Any, stop: Any) -> None:
    """A no-op floor server (:func:`floor_server`) in its own process; its port to ``out``."""
    sys.path.insert(0, str(REPO))
    noop = floor_server(answers, token)
    out.put(f"grpc+tcp://127.0.0.1:{noop.port}")
    stop.wait()
    noop.shutdown()


def spread_run(target: Any, args_of: Any, procs: int, catalog: dict[str, Any], token: str | None, args: Any) -> dict[str, Any]:
    """16 closed-loop clients against ``procs`` server processes ``target(*args_of, out, stop)``, one port each."""
    ctx = mp.get_context("spawn")
    located, stop = ctx.Queue(), ctx.Event()
    servers = [ctx.Process(target=target, args=(*args_of, located, stop)) for _ in range(procs)]
    for p in servers:
        p.start()
    try:
        locations = [located.get(timeout=120) for _ in servers]
        return run_load(
            locations, token, catalog, TARGET_CLIENTS, max(args.procs, procs), args.seconds, args.requests, server_pids=[p.pid for p in servers]
        )
    finally:
        stop.set()
        for p in servers:
            p.join(timeout=60)


# ============================================================== the floor
def floor_server(answers: dict[str, Any], token: str | None) -> Any:
    """A pyarrow Flight server on 127.0.0.1 that does no work: ``do_get`` returns ``answers[kind]``
    (the kind read from the ticket's canonical JSON), behind a bearer-token check like the real one."""
    import pyarrow as pa
    import pyarrow.flight as flight

    from flight_server.threadstate import keep_thread_state

    expected = f"Bearer {token}" if token else None
    marks = [(f'"kind":"{k}"'.encode(), k) for k in KINDS]
    options = pa.ipc.IpcWriteOptions()

    class TokenCheck(flight.ServerMiddlewareFactory):
        def start_call(self, info: Any, headers: dict[str, Any]) -> None:
            keep_thread_state()  # as the real server does
            if headers.get("authorization") != [expected]:
                raise flight.FlightUnauthenticatedError("invalid token")
            return None

    class Floor(flight.FlightServerBase):
        def do_get(self, context: Any, ticket: Any) -> Any:
            keep_thread_state()
            raw = ticket.ticket
            for mark, kind in marks:
                if mark in raw:
                    return flight.RecordBatchStream(answers[kind], options)
            raise flight.FlightServerError("unknown kind")

    return Floor("grpc://127.0.0.1:0", middleware={"auth": TokenCheck()} if expected else None)


# ============================================================== setup
def prepare(work: Path, columns: int, rows: int, partitions: int) -> str:
    """The analyzed wide table's store (reused when ``work`` already has it)."""
    from engine.api import analyze
    from engine.runtime.ray_runtime import ensure_ray
    from engine.sample import SAMPLE_VERSION, generate_wide_table
    from engine.store import Store

    store = work / "store"
    stamp = work / "stamp.json"
    want = {"columns": columns, "rows": rows, "partitions": partitions, "sample_version": SAMPLE_VERSION}
    if stamp.exists() and json.loads(stamp.read_text()) == want and TABLE in Store(str(store)).tables():
        return str(store)
    shutil.rmtree(work / TABLE, ignore_errors=True)
    shutil.rmtree(store, ignore_errors=True)
    generate_wide_table(str(work / TABLE), columns=columns, rows=rows, partitions=partitions, seed=0)
    ensure_ray()
    analyze(str(work / TABLE), store=str(store), name=TABLE)
    stamp.write_text(json.dumps(want))
    return str(store)


def catalog_of(ts: Any) -> dict[str, Any]:
    """Which columns each request kind can use: all, discrete (with frequencies), numeric (with bins)."""
    from engine.files import layout

    rows = ts.statistics(statistics=["frequencies", "histogram_bins"]).to_pylist()
    columns = [r["column"] for r in rows if r["column"] != "part"]
    discrete = [r["column"] for r in rows if r["frequencies"] == layout.FREQ_COMPLETE and r["column"] != "part"]
    numeric = [(r["column"], r["histogram_bins"]) for r in rows if (r["histogram_bins"] or 0) > 100 and r["column"] != "part"]
    return {"columns": columns, "discrete": discrete, "numeric": numeric}


def baseline(ts: Any, catalog: dict[str, Any], n: int) -> dict[str, Any]:
    from engine import lookup

    mix = make_requests(catalog, 7, n)
    for _, doc in mix[:300]:
        answer_in_process(ts, doc)  # warm
    lat: dict[str, list[float]] = {k: [] for k in KINDS}
    for kind, doc in mix:
        t0 = time.perf_counter()
        answer_in_process(ts, doc)
        lat[kind].append(time.perf_counter() - t0)
    cold: dict[str, list[float]] = {k: [] for k in KINDS}
    for kind, doc in mix[:90]:
        lookup.clear_cache()
        t0 = time.perf_counter()
        answer_in_process(ts, doc)
        cold[kind].append(time.perf_counter() - t0)
    return {
        "warm": {k: percentiles(v) for k, v in lat.items()},
        "cold": {k: percentiles(v) for k, v in cold.items()},
    }


def _print_extra_run(run: dict[str, Any], server_label: str) -> None:
    """One line per extra run (several servers, the no-op floor), then its latencies."""
    cpu = run["cpu_ms_per_request"]
    print(
        f"{run['clients']:>3} clients, {run['mode']}: {run['throughput_rps']:8.1f} req/s, errors {run['errors']}, "
        f"CPU/request: {server_label} {cpu['server']:.3f} ms, clients {cpu['clients']:.3f} ms, load avg {run['load_avg_1m_end']}"
    )
    for k in KINDS:
        st = run["kinds"][k]
        print(f"      {k:<16} p50 {st.get('p50_ms', float('nan')):7.3f} ms   p99 {st.get('p99_ms', float('nan')):7.3f} ms")


def _floor_run(noop: Any, token: str | None, catalog: dict[str, Any], clients: int, args: Any) -> dict[str, Any]:
    """``clients`` closed-loop clients against the no-op server ``noop``."""
    run = run_load(f"grpc+tcp://127.0.0.1:{noop.port}", token, catalog, clients, args.procs, args.seconds, args.requests)
    run["mode"] = "closed loop, no-op server (floor)"
    _print_extra_run(run, "server")
    return run


def _floor_ratios(runs: list[dict[str, Any]], floors: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Ours against the floor at the same concurrency (closed loop): p50 per kind and throughput, as ratios."""
    out = []
    by_clients = {f["clients"]: f for f in floors}
    for r in runs:
        f = by_clients.get(r["clients"])
        if f is None or r["mode"] != "closed loop":
            continue
        p50 = {
            k: round(r["kinds"][k]["p50_ms"] / f["kinds"][k]["p50_ms"], 2)
            for k in KINDS
            if r["kinds"][k].get("p50_ms") and f["kinds"][k].get("p50_ms")
        }
        ratio = {"clients": r["clients"], "p50_over_floor": p50, "throughput_over_floor": round(r["throughput_rps"] / f["throughput_rps"], 2)}
        out.append(ratio)
        shown = ", ".join(f"{k} {v}x" for k, v in p50.items())
        print(f"against the floor at {r['clients']} clients: p50 {shown}; throughput {ratio['throughput_over_floor']}x")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--clients", default="1,4,16,64", help="concurrencies, comma-separated")
    ap.add_argument("--procs", type=int, default=4, help="client processes at most (threads share them)")
    ap.add_argument("--seconds", type=float, default=10.0, help="per concurrency")
    ap.add_argument("--requests", type=int, default=100_000, help="per client at most")
    ap.add_argument("--columns", type=int, default=1000)
    ap.add_argument("--rows", type=int, default=10_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--baseline-requests", type=int, default=3000)
    ap.add_argument(
        "--paced", default="16:25,64:10", metavar="CLIENTS:RATE,...",
        help="paced runs: that many clients each sending RATE requests/s (Poisson arrivals); '' for none",
    )  # fmt: skip
    ap.add_argument("--no-result-cache", action="store_true", help="serve every request from the lookups")
    ap.add_argument("--no-floor", action="store_true", help="skip the run against a no-op Flight server")
    ap.add_argument("--floor-clients", default=str(TARGET_CLIENTS), help="closed-loop concurrencies run against the no-op server, comma-separated")
    ap.add_argument(
        "--server-procs", type=int, default=2, help="also run 16 closed-loop clients against this many server processes, one port each (<2: skip)"
    )
    ap.add_argument("--spread-repeats", type=int, default=1, help="runs of the several-processes pair (ours, then the floor's)")
    ap.add_argument("--token", default="bench-token", help="bearer token the clients send ('' for no auth)")
    ap.add_argument("--work", default=None, help="keep the generated table and store here (reused by later runs)")
    ap.add_argument("--json", default=None, help="write the results here")
    args = ap.parse_args()

    from engine.lookup import open_statistics
    from engine.tokens import Token
    from flight_server import requests
    from flight_server.server import MetastoreFlightServer, ServerConfig

    started = datetime.now(UTC)
    load_start = round(os.getloadavg()[0], 2)
    temp = args.work is None
    work = Path(args.work or tempfile.mkdtemp(prefix="metastore-bench-flight-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        t0 = time.perf_counter()
        store = prepare(work, args.columns, args.rows, args.partitions)
        setup_s = time.perf_counter() - t0
        try:
            from engine.runtime.ray_runtime import shutdown_ray

            shutdown_ray()  # the load test needs the cores
        except Exception:
            pass
        ts = open_statistics(store, TABLE)
        catalog = catalog_of(ts)
        base = baseline(ts, catalog, args.baseline_requests)
        print(f"table: {args.columns:,} columns, {args.rows:,} rows, {args.partitions} partitions (setup {setup_s:.1f} s)")
        print("baseline, engine.lookup in process (warm, one thread):")
        for k in KINDS:
            b = base["warm"][k]
            print(f"  {k:<16} p50 {b['p50_ms']:7.3f} ms   p99 {b['p99_ms']:7.3f} ms   (cold p50 {base['cold'][k]['p50_ms']:.2f} ms)")

        token = args.token or None
        config = ServerConfig(
            store=store,
            host="127.0.0.1",
            port=0,
            tokens=[Token.of(token)] if token else [],
            poll_interval=2.0,
            result_cache_bytes=0 if args.no_result_cache else 64 * 1024 * 1024,
        )
        server = MetastoreFlightServer(config)
        warm(server.service, catalog)
        answers = {kind: server.service.execute_table(requests.parse(doc)) for kind, doc in make_requests(catalog, 5, len(KINDS))}
        noop = floor_server(answers, token) if not args.no_floor else None
        floor_counts = {int(c) for c in args.floor_clients.split(",") if c.strip()}
        floors: list[dict[str, Any]] = []
        plan = [(int(c), 0.0) for c in args.clients.split(",") if c.strip()]
        for item in [p for p in args.paced.split(",") if p.strip()]:
            clients, rate = item.split(":")
            plan.append((int(clients), float(rate)))
        runs = []
        try:
            for n, rate in plan:
                before = server.results.info()
                r = run_load(server.location, token, catalog, n, args.procs, args.seconds, args.requests, rate)
                after = server.results.info()
                looked = (after["hits"] - before["hits"]) + (after["misses"] - before["misses"])
                r["result_cache_hit_ratio"] = round((after["hits"] - before["hits"]) / looked, 4) if looked else None
                runs.append(r)
                cpu = r["cpu_ms_per_request"]
                print(
                    f"{n:>3} clients, {r['mode']} ({r['client_processes']} procs): {r['throughput_rps']:8.1f} req/s, "
                    f"errors {r['errors']}, CPU/request: server {cpu['server']:.3f} ms, clients {cpu['clients']:.3f} ms, "
                    f"result-cache hits {r['result_cache_hit_ratio']}, load avg {r['load_avg_1m_end']}"
                )
                for k in KINDS:
                    st = r["kinds"][k]
                    print(
                        f"      {k:<16} p50 {st.get('p50_ms', float('nan')):7.3f} ms   p99 {st.get('p99_ms', float('nan')):7.3f} ms   {st['throughput_rps']:8.1f} req/s"
                    )
                for e in r["error_samples"]:
                    print(f"      error: {e}")
                if noop is not None and rate <= 0 and n in floor_counts:  # the floor right after, at the same load
                    floors.append(_floor_run(noop, token, catalog, n, args))
            if noop is not None:  # counts with no closed-loop run of ours: the floor alone
                done = {f["clients"] for f in floors}
                floors += [_floor_run(noop, token, catalog, n, args) for n in sorted(floor_counts - done)]
            health = server._action_health({})
        finally:
            server.shutdown()
            if noop is not None:
                noop.shutdown()
        spread = spread_floor = None
        spread_pairs: list[dict[str, Any]] = []  # every repeat's pair (the last one also as before)
        if args.server_procs >= 2:
            for _ in range(args.spread_repeats):
                spread, spread_floor = spread_cli_run(store, token, catalog, args), None
                spread["mode"] = f"closed loop, metastore serve --processes {args.server_procs} (one port each)"
                _print_extra_run(spread, "servers")
                if not args.no_floor:
                    spread_floor = spread_run(floor_process, (answers, token), args.server_procs, catalog, token, args)
                    spread_floor["mode"] = f"closed loop, {args.server_procs} no-op server processes (floor, one port each)"
                    _print_extra_run(spread_floor, "servers")
                    _floor_ratios([{**spread, "mode": "closed loop"}], [spread_floor])
                spread_pairs.append({"ours": spread, "floor": spread_floor})
        floor = next((f for f in floors if f["clients"] == TARGET_CLIENTS), None)
        ratios = _floor_ratios(runs, floors)
        verdicts = []
        for r in runs:
            if r["clients"] != TARGET_CLIENTS:
                continue
            st = r["kinds"]["statistics"]
            met = bool(st.get("p50_ms", 1e9) < TARGET_P50_MS and st.get("p99_ms", 1e9) < TARGET_P99_MS and r["errors"] == 0)
            verdicts.append(
                {
                    "clients": TARGET_CLIENTS,
                    "mode": r["mode"],
                    "statistics_p50_ms": st.get("p50_ms"),
                    "statistics_p99_ms": st.get("p99_ms"),
                    "p50_target_ms": TARGET_P50_MS,
                    "p99_target_ms": TARGET_P99_MS,
                    "met": met,
                }
            )
            print(
                f"target at {TARGET_CLIENTS} clients, {r['mode']}: statistics p50 {st.get('p50_ms')} ms (< {TARGET_P50_MS}), "
                f"p99 {st.get('p99_ms')} ms (< {TARGET_P99_MS}), errors {r['errors']}: {'MET' if met else 'NOT MET'}"
            )
        doc = {
            "benchmark": "flight",
            "started_at": started.isoformat(timespec="seconds"),
            "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "config": {k: v for k, v in vars(args).items() if k not in ("json", "token")} | {"auth": bool(token)},
            "machine": {
                "cpu_count": os.cpu_count(),
                "platform": platform.platform(),
                "python": platform.python_version(),
                "load_avg_start": load_start,
                "load_avg_end": round(os.getloadavg()[0], 2),
            },
            "table": {"columns": args.columns, "rows": args.rows, "partitions": args.partitions, "setup_s": round(setup_s, 2)},
            "baseline_in_process": base,
            "load": runs,
            "target": verdicts,
            "several_server_processes": spread,
            "several_floor_processes": spread_floor,
            "several_processes_pairs": spread_pairs,
            "floor_noop_server": floor,
            "floor_noop_server_runs": floors,
            "against_floor": ratios,
            "server_health_end": health,
        }
        if args.json:
            Path(args.json).parent.mkdir(parents=True, exist_ok=True)
            Path(args.json).write_text(json.dumps(doc, indent=1, default=str) + "\n")
            print(f"wrote {args.json}")
        return 0 if all(r["errors"] == 0 for r in runs + floors + [x for x in (spread,) if x]) else 1
    finally:
        if temp:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
