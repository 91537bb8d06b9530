#!/usr/bin/env python
"""Run every benchmark in bench/ (bench_*.py) and collect the results in one file.

Each script is run with its default arguments plus ``--json <file>`` (the convention
every bench_*.py follows), one after the other, in a subprocess of this Python, from
the repository root; its output streams through. The collected results go to
bench/results/latest.json:

    {"started_at": ..., "finished_at": ..., "python": ..., "machine": {...},
     "benchmarks": {"bench_analyze": {"returncode": 0, "elapsed_s": 123.4,
                                       "command": [...], "result": {...}}, ...}}

``--baseline DIR``: also run every benchmark in another checkout (DIR, e.g. a ``git worktree``
of the commit before a change), script by script, the two trees alternating which goes
first; its results go to bench/results/baseline.json, and bench/compare.py prints which
figures moved (after / before). Same machine, same hour: what "nothing else slower" needs.

Usage: python bench/run_all.py [--only NAME ...] [--out FILE] [--baseline DIR] [-- EXTRA ARGS FOR EVERY SCRIPT]
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
from typing import Any

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


def _python(repo: Path) -> str:
    """The checkout's own interpreter if it has one (its .venv), else this one."""
    own = repo / ".venv" / "bin" / "python"
    return str(own) if repo != REPO and own.exists() else sys.executable


def run_one(script: Path, extra: list[str], repo: Path = REPO) -> dict[str, Any]:
    """Run one benchmark script of checkout ``repo`` (its code first on the path) and read its JSON."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(repo), os.environ.get("PYTHONPATH", "")) if p)}
    with tempfile.TemporaryDirectory(prefix=f"{script.stem}-") as tmp:
        out = Path(tmp) / "result.json"
        cmd = [_python(repo), str(script), *extra, "--json", str(out)]
        where = "" if repo == REPO else f" (in {repo})"
        print(f"=== {script.stem}{where}: {' '.join(cmd[1:])}", flush=True)
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, cwd=repo, env=env)
        elapsed = time.perf_counter() - t0
        entry: dict[str, Any] = {
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
    ap.add_argument("--baseline", type=Path, help="another checkout: run its bench scripts too, alternating, and compare")
    ap.add_argument("--baseline-out", default=str(BENCH / "results" / "baseline.json"), help="where --baseline's results go")
    ap.add_argument("extra", nargs=argparse.REMAINDER, help="after --: arguments passed to every script")
    args = ap.parse_args(argv)
    extra = args.extra[1:] if args.extra[:1] == ["--"] else args.extra

    scripts = discover(args.only)
    if not scripts:
        print("no bench_*.py scripts found", file=sys.stderr)
        return 1
    if args.baseline is not None and not (args.baseline / "bench").is_dir():
        raise SystemExit(f"--baseline {args.baseline}: not a checkout of this repository (no bench/ there)")
    started = datetime.now(UTC)
    benchmarks: dict[str, dict[str, Any]] = {}
    baseline: dict[str, dict[str, Any]] = {}
    for i, script in enumerate(scripts):
        theirs = args.baseline / "bench" / script.name if args.baseline is not None else None
        if theirs is not None and not theirs.exists():
            print(f"=== {script.stem}: not in {args.baseline} (no baseline)", flush=True)
            theirs = None
        if theirs is not None and i % 2 == 0:  # alternate which tree goes first: drift falls on both
            baseline[script.stem] = run_one(theirs, extra, args.baseline)
        benchmarks[script.stem] = run_one(script, extra)
        if theirs is not None and i % 2 == 1:
            baseline[script.stem] = run_one(theirs, extra, args.baseline)
    finished = datetime.now(UTC)
    out = _write(Path(args.out), started, finished, benchmarks)
    failed = [name for name, b in benchmarks.items() if b["returncode"] != 0]
    print(f"results of {len(benchmarks)} benchmark(s) written to {out}" + (f"; failed: {', '.join(failed)}" if failed else ""))
    if args.baseline is not None:
        base = _write(Path(args.baseline_out), started, finished, baseline, checkout=str(args.baseline))
        print(f"the baseline's results written to {base}; after / before:", flush=True)
        subprocess.run([sys.executable, str(BENCH / "compare.py"), str(base), str(out)], cwd=REPO)
    return 1 if failed else 0


def _write(out: Path, started: datetime, finished: datetime, benchmarks: dict[str, dict[str, Any]], **extra: str) -> Path:
    """The collected results as one JSON document, written whole or not at all."""
    result = {
        "started_at": started.isoformat(timespec="seconds"),
        "finished_at": finished.isoformat(timespec="seconds"),
        "python": sys.executable,
        **extra,
        "machine": {"cpu_count": os.cpu_count(), "platform": platform.platform(), "python": platform.python_version()},
        "benchmarks": benchmarks,
    }
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(out.suffix + ".tmp")
    tmp.write_text(json.dumps(result, indent=2, default=str) + "\n")
    os.replace(tmp, out)
    return out


if __name__ == "__main__":
    sys.exit(main())
