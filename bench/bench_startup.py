#!/usr/bin/env python
"""Start-up time of the read-side commands, side by side with a bare Python, in one run.

Systems (fresh processes, interleaved round by round so both see the same load;
``--repeat`` rounds, medians reported):

- ``bare pyarrow``: ``python -c`` importing ``pyarrow.parquet`` and reading one row
  group of the table's ``statistics.parquet`` (the floor: any Python reader of the file);
- ``metastore show``: ``python -m engine.cli.console show TABLE --column c`` (the
  console script's code path: catalog read, lookups, rich text) in a fresh process;
- ``metastore tables``: the same for ``metastore tables``;
- ``import engine.lookup``: the lookups API's import alone;
- ``flight server start``: a fresh process that starts ``MetastoreFlightServer`` on
  the store and answers one ``health`` action (time until it answered).

The table is a small engine.sample table analyzed once (Ray only for that, in
this process; the timed processes never start it). The machine's load average is
recorded: on a shared machine wall times grow with it, the ratio much less.

Usage: python bench/bench_startup.py [--repeat R] [--column c] [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

PY = sys.executable


def _timed(cmd: list[str], env: dict[str, str]) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env, cwd=str(REPO))
    return time.perf_counter() - t0


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--column", default="price")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()

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

    # bytecode written and reused, as an installed package has it: a PYTHONDONTWRITEBYTECODE
    # in the caller's environment would make every timed process compile the engine's
    # modules from source (~40-60 ms of CPU, more than any import here)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPATH"] = str(REPO)
    systems = {
        "bare pyarrow": [PY, "-c", f"import pyarrow.parquet as pq; pq.ParquetFile({stats_file!r}).read_row_group(0)"],
        "metastore show": [PY, "-m", "engine.cli.console", "--store", str(store), "show", "sales", "--column", args.column],
        "metastore tables": [PY, "-m", "engine.cli.console", "--store", str(store), "tables"],
        "import engine.lookup": [PY, "-c", "import engine.lookup"],
    }
    times: dict[str, list[float]] = {k: [] for k in systems}
    times["flight server start"] = []
    loads = []
    for name, cmd in systems.items():  # one untimed run each: .pyc files and the page cache
        _timed(cmd, env)
    for _ in range(args.repeat):
        loads.append(os.getloadavg()[0])
        for name, cmd in systems.items():
            times[name].append(_timed(cmd, env))
        out = subprocess.run([PY, "-c", _SERVER, str(store)], check=True, capture_output=True, text=True, env=env, cwd=str(REPO))
        times["flight server start"].append(float(out.stdout.strip().splitlines()[-1]))
    med = {k: statistics.median(v) for k, v in times.items()}
    bare = med["bare pyarrow"]
    print(f"load average {min(loads):.1f}-{max(loads):.1f} (2 cores); {args.repeat} rounds, medians")
    for name, m in med.items():
        print(f"  {name:22s} {m:6.3f} s   {m / bare:5.2f}x bare   (min {min(times[name]):.3f})")
    if args.json:
        Path(args.json).write_text(json.dumps({"median_s": med, "times_s": times, "load": loads}, indent=1))


if __name__ == "__main__":
    main()
