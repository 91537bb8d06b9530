#!/usr/bin/env python
"""Start-up time of the read-side commands, side by side with a bare Python, in one run.

Systems (fresh processes, interleaved round by round so both see the same load;
``--repeat`` rounds, medians and minimums reported):

- ``bare pyarrow``: ``python -c`` importing ``pyarrow.parquet`` and reading one row
  group of the table's ``statistics.parquet`` (the floor: any Python reader of the file);
- ``metastore show``: ``python -m engine.cli.console show TABLE --column c`` (the
  console script's code path: catalog read, lookups, text output) in a fresh process,
  its stdout a pipe (as a script reads it);
- ``metastore show, terminal``: the same with stdout a pseudo-terminal, where the
  text is drawn by rich, in colour (engine/cli/plain.py draws it only for pipes and files);
- ``metastore tables``: the same for ``metastore tables``;
- ``import engine.lookup``: the lookups API's import alone;
- ``flight server start``: a fresh process that starts ``MetastoreFlightServer`` on
  the store and answers one ``health`` action (time until it answered).

Each process's wall time and its CPU time (user + system of the child, all its threads,
from ``os.wait4``) are recorded. On a shared machine wall times grow with the load and
CPU times much less: the ratio by CPU is the steadier figure, the ratio by wall on a
quiet machine the one a user sees. The floor's CPU time includes pyarrow's reader
threads, so its CPU time is above its wall time on an idle machine.

Small table (issue #30): the work of a 10,000-row table from fresh processes, in rounds
of their own (``--small-repeat``), as ratios to DuckDB from a fresh process:

- ``analyze, runtime auto``: ``python -m engine.cli.console analyze`` into a new store
  each time (a first analyze, no inheritance), which runs in process (no Ray);
- ``analyze, runtime ray``: the same with ``--runtime ray`` (starts a local Ray);
- ``duckdb SUMMARIZE``: ``python -c`` importing duckdb and summarizing the same files;
- ``quantiles, runtime auto`` / ``runtime ray``: ``metastore quantiles TABLE price -q 0.5,0.99``;
- ``duckdb quantile_disc``: the same quantiles by DuckDB from a fresh process.

The table is a small engine.sample table analyzed once (Ray only for that, in
this process; the timed processes never start it). The machine's load average is
recorded.

``--baseline DIR``: another checkout of the project (e.g. ``git archive main | tar -x -C DIR``)
whose ``show``, ``tables`` and ``import engine.lookup`` are timed in the same rounds, on
the same store (labelled ``baseline: ...``): before and after, interleaved.

Usage: python bench/bench_startup.py [--repeat R] [--small-repeat R] [--small-only] [--column c] [--json OUT] [--baseline DIR]
"""

from __future__ import annotations

import argparse
import json
import os
import pty
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

PY = sys.executable


def _timed(cmd: list[str], env: dict[str, str], terminal: bool = False, cwd: Path = REPO) -> tuple[float, float]:
    """(wall s, CPU s of the child) of one fresh process; stdout a pipe, or a pseudo-terminal."""
    master = slave = -1
    if terminal:
        master, slave = pty.openpty()
        drain = threading.Thread(target=_drain, args=(master,), daemon=True)
        drain.start()
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=slave if terminal else subprocess.DEVNULL, env=env, cwd=str(cwd))
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(status)
    if terminal:
        os.close(slave)
        drain.join()
        os.close(master)
    if proc.returncode != 0:
        raise subprocess.CalledProcessError(proc.returncode, cmd)
    return wall, usage.ru_utime + usage.ru_stime


def _drain(fd: int) -> None:
    """Read a pseudo-terminal's output until the child closed it (a full buffer would block the child)."""
    while True:
        try:
            if not os.read(fd, 65536):
                return
        except OSError:  # EIO: the other side is closed
            return


_SERVER = """
import sys, time
t0 = time.perf_counter()
from flight_server.server import MetastoreFlightServer, ServerConfig
from flight_server.client import MetastoreClient
server = MetastoreFlightServer(ServerConfig(store=sys.argv[1], host="127.0.0.1", port=0))
with MetastoreClient(server.location) as c:
    c.health()
print(time.perf_counter() - t0)
server.shutdown()
"""


def _small_table(root: Path, env: dict[str, str], repeat: int) -> dict[str, object]:
    """Fresh-process wall and CPU times of analyze and quantiles on a 10,000-row table
    (in process and on Ray) and of DuckDB on the same files, interleaved round by round."""
    from engine.sample import generate_table

    data = root / "small"
    generate_table(str(data), rows=10_000, partitions=1, seed=1)
    files = f"{data}/*/*.parquet"
    cli = [PY, "-m", "engine.cli.console", "-o", "json"]
    stores = iter(range(10**6))

    def analyze(runtime: str) -> list[str]:
        return [*cli, "--store", str(root / f"small-store-{next(stores)}"), "analyze", str(data), "--runtime", runtime]

    quantiles = [*cli, "quantiles", str(data), "price", "-q", "0.5,0.99", "--runtime"]
    duck = "import duckdb; duckdb.connect().execute({!r}).fetchall()"
    systems: dict[str, Callable[[], list[str]]] = {
        "duckdb SUMMARIZE": lambda: [PY, "-c", duck.format(f"SUMMARIZE SELECT * FROM read_parquet('{files}')")],
        "analyze, runtime auto": lambda: analyze("auto"),
        "analyze, runtime ray": lambda: analyze("ray"),
        "duckdb quantile_disc": lambda: [PY, "-c", duck.format(f"SELECT quantile_disc(price, [0.5, 0.99]) FROM read_parquet('{files}')")],
        "quantiles, runtime auto": lambda: [*quantiles, "auto"],
        "quantiles, runtime ray": lambda: [*quantiles, "ray"],
    }
    wall: dict[str, list[float]] = {k: [] for k in systems}
    cpu: dict[str, list[float]] = {k: [] for k in systems}
    loads = []
    for make in systems.values():  # one untimed run each: .pyc files, numba's cache and the page cache
        _timed(make(), env)
    for _ in range(repeat):
        loads.append(os.getloadavg()[0])
        for name, make in systems.items():
            w, c = _timed(make(), env)
            wall[name].append(w)
            cpu[name].append(c)
    median = {k: statistics.median(v) for k, v in wall.items()}
    cpu_median = {k: statistics.median(v) for k, v in cpu.items()}
    base = {k: "duckdb SUMMARIZE" if k.startswith("analyze") else "duckdb quantile_disc" for k in systems}
    ratios = {k: median[k] / median[base[k]] for k in systems}
    cpu_ratios = {k: cpu_median[k] / cpu_median[base[k]] for k in systems}
    print(f"small table, 10,000 rows: load average {min(loads):.1f}-{max(loads):.1f} (2 cores); {repeat} rounds; x = ratio to DuckDB")
    print(f"  {'':27s} {'wall median':>18s} {'wall min':>9s}   {'CPU median':>18s}")
    for name in systems:
        print(
            f"  {name:27s} {median[name]:7.3f} s {ratios[name]:6.2f}x {min(wall[name]):7.3f} s   {cpu_median[name]:7.3f} s {cpu_ratios[name]:6.2f}x"
        )
    return {"median_s": median, "min_s": {k: min(v) for k, v in wall.items()}, "cpu_median_s": cpu_median, "wall_ratio_to_duckdb": ratios,
            "cpu_ratio_to_duckdb": cpu_ratios, "times_s": wall, "cpu_s": cpu, "load": loads, "repeat": repeat, "rows": 10_000}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--column", default="price")
    ap.add_argument("--json", default=None)
    ap.add_argument("--baseline", default=None, help="another checkout timed in the same rounds")
    ap.add_argument("--small-repeat", type=int, default=3, help="rounds of the small-table analyze and quantiles (0: skip them)")
    ap.add_argument("--small-only", action="store_true", help="only the small-table analyze and quantiles")
    args = ap.parse_args()
    # bytecode written and reused, as an installed package has it: a PYTHONDONTWRITEBYTECODE
    # in the caller's environment would make every timed process compile the engine's
    # modules from source (~40-60 ms of CPU, more than any import here)
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONDONTWRITEBYTECODE", "FORCE_COLOR", "TTY_COMPATIBLE", "NO_COLOR")}
    env["PYTHONPATH"] = str(REPO)
    env["COLUMNS"] = "80"  # the same layout whatever terminal runs the bench
    small_env = {k: v for k, v in env.items() if k not in ("RAY_ADDRESS", "METASTORE_RUNTIME")}
    # --small-repeat 0: the read-side commands only
    small = _small_table(Path(tempfile.mkdtemp(prefix="bench_startup_small-")), small_env, args.small_repeat) if args.small_repeat > 0 else None
    if args.small_only:
        if args.json:
            Path(args.json).write_text(json.dumps({"small_table": small}, indent=1))
        return

    from engine.api import analyze
    from engine.lookup import open_statistics
    from engine.sample import generate_table

    root = Path(tempfile.mkdtemp(prefix="bench_startup-"))
    data, store = root / "sales", root / "store"
    generate_table(str(data), rows=20_000, partitions=4, seed=0)
    analyze(str(data), store=str(store), user_statistics=[])
    stats_file = open_statistics(str(store), "sales").file_uri("statistics.parquet")
    from engine.runtime.ray_runtime import shutdown_ray

    shutdown_ray()

    show = [PY, "-m", "engine.cli.console", "--store", str(store), "show", "sales", "--column", args.column]
    base_env = {**env, "PYTHONPATH": str(Path(args.baseline).resolve())} if args.baseline else env
    base_dir = Path(args.baseline).resolve() if args.baseline else REPO
    systems: dict[str, tuple[list[str], bool]] = {
        "bare pyarrow": ([PY, "-c", f"import pyarrow.parquet as pq; pq.ParquetFile({stats_file!r}).read_row_group(0)"], False),
        "metastore show": (show, False),
        "metastore show, terminal": (show, True),
        "metastore tables": ([PY, "-m", "engine.cli.console", "--store", str(store), "tables"], False),
        "import engine.lookup": ([PY, "-c", "import engine.lookup"], False),
    }
    if args.baseline:
        systems["baseline: metastore show"] = (show, False)
        systems["baseline: metastore tables"] = (systems["metastore tables"][0], False)
        systems["baseline: import engine.lookup"] = (systems["import engine.lookup"][0], False)
        order = ["bare pyarrow", "metastore show", "baseline: metastore show", "metastore show, terminal"]
        order += ["metastore tables", "baseline: metastore tables", "import engine.lookup", "baseline: import engine.lookup"]
        systems = {name: systems[name] for name in order}  # each next to its baseline in a round

    def run(name: str, cmd: list[str], terminal: bool) -> tuple[float, float]:
        if name.startswith("baseline: "):
            return _timed(cmd, base_env, terminal, base_dir)
        return _timed(cmd, env, terminal)

    names = [*systems, "flight server start"]
    wall: dict[str, list[float]] = {k: [] for k in names}
    cpu: dict[str, list[float]] = {k: [] for k in names}
    loads = []
    for name, (cmd, terminal) in systems.items():  # one untimed run each: .pyc files and the page cache
        run(name, cmd, terminal)
    for _ in range(args.repeat):
        loads.append(os.getloadavg()[0])
        for name, (cmd, terminal) in systems.items():
            w, c = run(name, cmd, terminal)
            wall[name].append(w)
            cpu[name].append(c)
        proc = subprocess.Popen([PY, "-c", _SERVER, str(store)], stdout=subprocess.PIPE, text=True, env=env, cwd=str(REPO))
        out = proc.stdout.read() if proc.stdout else ""
        _, status, usage = os.wait4(proc.pid, 0)
        if os.waitstatus_to_exitcode(status) != 0:
            raise SystemExit("the flight server process failed")
        wall["flight server start"].append(float(out.strip().splitlines()[-1]))
        cpu["flight server start"].append(usage.ru_utime + usage.ru_stime)  # the whole process, shutdown included
    stats = {
        "median_s": {k: statistics.median(v) for k, v in wall.items()},
        "min_s": {k: min(v) for k, v in wall.items()},
        "cpu_median_s": {k: statistics.median(v) for k, v in cpu.items()},
        "cpu_min_s": {k: min(v) for k, v in cpu.items()},
    }
    print(f"load average {min(loads):.1f}-{max(loads):.1f} (2 cores); {args.repeat} rounds; x bare = ratio to the bare pyarrow read")
    print(f"  {'':31s} {'wall median':>17s} {'wall min':>17s}   {'CPU median':>17s} {'CPU min':>17s}")
    for name in names:
        cells = []
        for key in ("median_s", "min_s", "cpu_median_s", "cpu_min_s"):
            v, b = stats[key][name], stats[key]["bare pyarrow"]
            cells.append(f"{v:6.3f} s {v / b:5.2f}x")
        print(f"  {name:31s} {cells[0]:>17s} {cells[1]:>17s}   {cells[2]:>17s} {cells[3]:>17s}")
    print("  (flight server: wall until it answered; CPU of the whole process, shutdown included)")
    if args.json:
        doc = {**stats, "times_s": wall, "cpu_s": cpu, "load": loads, "repeat": args.repeat, "column": args.column, "baseline": args.baseline}
        doc["small_table"] = small
        Path(args.json).write_text(json.dumps(doc, indent=1))


if __name__ == "__main__":
    main()
