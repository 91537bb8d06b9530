"""Digest of every file an analyze writes, to check that a refactoring changed no byte.

    .venv/bin/python scripts/output_digest.py --out before.json
    ... change the code ...
    .venv/bin/python scripts/output_digest.py --out after.json --compare before.json

Analyzes the benchmark table (bench/bench_analyze.py's sample, generated once
under bench/data) into a fresh store with a fixed job id and creation time, so
that two runs of the same code write identical files, then lists the sha256 of
every Parquet file below the run directory, by path relative to it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
from pathlib import Path
from unittest import mock

import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

JOB_ID = "20260101T000000-digest00"
CREATED = "2026-01-01T00:00:00.000+00:00"


def digest(data: Path, rows: int, partitions: int) -> dict[str, str]:
    import bench_analyze

    from engine.api import analyze
    from engine.files.layout import FileIdentity

    table_dir, _ = bench_analyze.ensure_data(data, rows, partitions)
    patches = [mock.patch.object(FileIdentity, "now", staticmethod(lambda: CREATED))]
    for target in ("engine.store.new_job_id", "engine.catalog.paths.new_job_id", "engine.runtime.job.driver.new_job_id"):
        try:
            patches.append(mock.patch(target, lambda: JOB_ID))
            patches[-1].start()
            patches[-1].stop()
        except (AttributeError, ModuleNotFoundError):
            patches.pop()
    with tempfile.TemporaryDirectory() as store:
        for p in patches:
            p.start()
        try:
            result = analyze(str(table_dir), store=store, name="bench", user_statistics=[])
        finally:
            for p in patches:
                p.stop()
        assert result.job_id == JOB_ID, f"job id not fixed: {result.job_id}"
        run = Path(store) / "bench" / "runs" / JOB_ID
        out = {}
        for f in sorted(run.rglob("*.parquet")):
            out[str(f.relative_to(run))] = hashlib.sha256(f.read_bytes()).hexdigest()
            # per column too: a difference is then named (the table level's KLL merges draw
            # random bits in DataSketches, so its sketch-derived columns differ run to run)
            table = pq.read_table(f)
            for name in table.column_names:
                col = table.column(name)
                out[f"{f.relative_to(run)}#{name}"] = hashlib.sha256(repr(col.to_pylist()).encode()).hexdigest()
        return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="write the digests here (JSON)")
    ap.add_argument("--compare", help="a digest file of an earlier run: exit 1 if any file differs")
    ap.add_argument("--data", default=str(REPO / "bench" / "data"))
    ap.add_argument("--rows", type=int, default=5_000_000)
    ap.add_argument("--partitions", type=int, default=16)
    args = ap.parse_args()
    got = digest(Path(args.data), args.rows, args.partitions)
    Path(args.out).write_text(json.dumps(got, indent=1) + "\n")
    print(f"{len(got)} files digested -> {args.out}")
    if args.compare:
        want = json.loads(Path(args.compare).read_text())
        differ = sorted(k for k in want.keys() | got.keys() if want.get(k) != got.get(k))
        for k in differ:
            print(f"DIFFERS: {k}")
        files = [k for k in want if "#" not in k]
        print("identical" if not differ else f"{len([k for k in differ if '#' not in k])} of {len(files)} files differ")
        return 1 if differ else 0
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
