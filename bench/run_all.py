#!/usr/bin/env python
"""Run every benchmark in bench/ (bench_*.py) and collect the results in one file.

Each script is run with its default arguments plus ``--json <file>`` (the convention
every bench_*.py follows), one after the other, in a subprocess of this Python, from
the repository root; its output streams through. The collected results go to
bench/results/latest.json:

    {"started_at": ..., "finished_at": ..., "python": ..., "machine": {...},
     "benchmarks": {"bench_analyze": {"returncode": 0, "elapsed_s": 123.4,
                                       "command": [...], "result": {...}}, ...}}

Usage: python bench/run_all.py [--only NAME ...] [--out FILE] [-- EXTRA ARGS FOR EVERY SCRIPT]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent


def discover(only: list[str] | None) -> list[Path]:
    scripts = sorted(BENCH.glob("bench_*.py"))
    if only:
        wanted = {name.removesuffix(".py") for name in only}
        unknown = wanted - {s.stem for s in scripts}
        if unknown:
            raise SystemExit(f"no such benchmark: {', '.join(sorted(unknown))} (have: {', '.join(s.stem for s in scripts)})")
        scripts = [s for s in scripts if s.stem in wanted]
    return scripts


def run_one(script: Path, extra: list[str]) -> dict:
    with tempfile.TemporaryDirectory(prefix=f"{script.stem}-") as tmp:
        out = Path(tmp) / "result.json"
        cmd = [sys.executable, str(script), *extra, "--json", str(out)]
        print(f"=== {script.stem}: {' '.join(cmd[1:])}", flush=True)
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, cwd=REPO)
        elapsed = time.perf_counter() - t0
        entry: dict = {
            "command": [Path(cmd[0]).name, *cmd[1:-2]],
            "returncode": proc.returncode,
            "elapsed_s": round(elapsed, 2),
        }
        try:
            entry["result"] = json.loads(out.read_text())
        except (OSError, ValueError) as exc:
            entry["result"] = None
            entry["error"] = f"no JSON result ({type(exc).__name__}: {exc})"
    status = "ok" if proc.returncode == 0 else f"exit code {proc.returncode}"
    print(f"=== {script.stem}: {status} in {elapsed:.1f} s", flush=True)
    return entry


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Run all bench/bench_*.py and write bench/results/latest.json.")
    ap.add_argument("--only", nargs="+", metavar="NAME", help="run only these benchmarks (e.g. bench_analyze)")
    ap.add_argument("--out", default=str(BENCH / "results" / "latest.json"), help="where to write the results")
    ap.add_argument("extra", nargs=argparse.REMAINDER, help="after --: arguments passed to every script")
    args = ap.parse_args(argv)
    extra = args.extra[1:] if args.extra[:1] == ["--"] else args.extra

    scripts = discover(args.only)
    if not scripts:
        print("no bench_*.py scripts found", file=sys.stderr)
        return 1
    started = datetime.now(UTC)
    benchmarks = {s.stem: run_one(s, extra) for s in scripts}
    result = {
        "started_at": started.isoformat(timespec="seconds"),
        "finished_at": datetime.now(UTC).isoformat(timespec="seconds"),
        "python": sys.executable,
        "machine": {"cpu_count": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
        "benchmarks": benchmarks,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(out.suffix + ".tmp")
    tmp.write_text(json.dumps(result, indent=2, default=str) + "\n")
    os.replace(tmp, out)
    failed = [name for name, b in benchmarks.items() if b["returncode"] != 0]
    print(f"results of {len(benchmarks)} benchmark(s) written to {out}" + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
