"""bench/compare.py and run_all.py --baseline: which figures moved between two runs.

Run through the scripts themselves (subprocesses), on two throwaway checkouts holding a
tiny benchmark whose figures the test chooses, so the flagged lines are known."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

TINY = """
import argparse, json
ap = argparse.ArgumentParser(); ap.add_argument("--json"); args = ap.parse_args()
doc = {"config": {"rows": 10}, "systems": {"ours": {"median_s": MEDIAN, "runs_s": [MEDIAN]},
       "peer": {"median_s": 2.0}}, "clients": {"16": {"throughput_per_s": RATE, "p50_ms": 1.0}}}
json.dump(doc, open(args.json, "w"))
"""


def checkout(root: Path, median: float, rate: float) -> Path:
    bench = root / "bench"
    bench.mkdir(parents=True)
    for name in ("run_all.py", "compare.py"):
        shutil.copy(REPO / "bench" / name, bench / name)
    (bench / "bench_tiny.py").write_text(TINY.replace("MEDIAN", str(median)).replace("RATE", str(rate)))
    return root


def test_run_all_with_a_baseline_runs_both_trees_and_flags_what_got_worse(tmp_path: Path) -> None:
    before = checkout(tmp_path / "before", median=1.0, rate=1000.0)
    after = checkout(tmp_path / "after", median=1.5, rate=700.0)
    out, base = tmp_path / "after.json", tmp_path / "before.json"
    proc = subprocess.run(
        [sys.executable, str(after / "bench" / "run_all.py"), "--baseline", str(before), "--out", str(out), "--baseline-out", str(base)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads(base.read_text())["benchmarks"]["bench_tiny"]["result"]["systems"]["ours"]["median_s"] == 1.0
    assert json.loads(out.read_text())["benchmarks"]["bench_tiny"]["result"]["systems"]["ours"]["median_s"] == 1.5
    flagged = [line for line in proc.stdout.splitlines() if "**worse**" in line]
    assert len(flagged) == 2, proc.stdout  # the time (1.5x) and the rate (0.7x); not the peer, not p50
    assert any("systems/ours/median_s" in line and "1.50" in line for line in flagged)
    assert any("throughput_per_s" in line and "0.70" in line for line in flagged)
    assert "4 figures in both; 2 moved the bad way" in proc.stdout


def test_compare_reads_no_configuration_as_a_figure_and_refuses_a_missing_file(tmp_path: Path) -> None:
    result = {"config": {"median_s": 9}, "machine": {"p50_ms": 1}, "load_avg_before": 2.0, "x": {"median_s": 1.0}, "by": {"median_s": {"show": 0.3}}}
    doc = {"benchmarks": {"b": {"elapsed_s": 12.0, "result": result}}}
    (tmp_path / "a.json").write_text(json.dumps(doc))
    proc = subprocess.run(
        [sys.executable, str(REPO / "bench" / "compare.py"), str(tmp_path / "a.json"), str(tmp_path / "a.json"), "--all"],
        capture_output=True,
        text=True,
    )
    assert proc.returncode == 0
    assert "2 figures in both; 0 moved" in proc.stdout and "`b/result/by/median_s/show`" in proc.stdout
    assert "config" not in proc.stdout and "load_avg" not in proc.stdout and "elapsed" not in proc.stdout
    missing = subprocess.run(
        [sys.executable, str(REPO / "bench" / "compare.py"), str(tmp_path / "nope.json"), str(tmp_path / "a.json")], capture_output=True, text=True
    )
    assert missing.returncode == 2 and "nope.json" in missing.stderr
