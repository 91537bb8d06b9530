"""The same table analyzed twice with the same options, each time by a fresh
``metastore analyze`` process (its own Ray runtime), gives the same statistics files
byte for byte (issue #28): every file of the job's run directory, at table and
partition level, differs only in the job id and the job's start time
(``metastore.job_id``, ``metastore.created_at`` and the run directory named in
``manifest.json``) and in the checksums of files that hold them (docs/FORMAT.md,
"Determinism"); so does the same table analyzed in process (``--runtime local``,
engine/runtime/job/local_executor.py) and on Ray. The percentiles of float and time columns come from KLL sketches,
whose merges drew random bits from the clock before (engine.stats.sketches.merge_kll).
"""

from __future__ import annotations

import decimal
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import datasketches as ds
import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from engine.sample import generate_table

pytestmark = pytest.mark.ray

REPO = Path(__file__).resolve().parents[2]
METASTORE = Path(sys.executable).parent / "metastore"
CHECKSUM = re.compile(rb"crc32:[0-9a-f]{8}")


def analyze(table: Path, store: Path, *options: str) -> Path:
    """``metastore analyze`` in a new process; the job's run directory."""
    env = {k: v for k, v in os.environ.items() if k != "RAY_ADDRESS"}
    env["PYTHONPATH"] = str(REPO)
    done = subprocess.run(
        [str(METASTORE), "--store", str(store), "-o", "json", "analyze", str(table), *options],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    (run,) = (store / table.name / "runs").iterdir()
    return run


def pandas_table(path: Path) -> Path:
    """A table pandas wrote (pyarrow engine, Hive partitions): floats with NaN and both
    zeros, float32, nanosecond timestamps, a decimal too wide for the sorted path."""
    rng = np.random.default_rng(7)
    n = 24_000
    price = rng.lognormal(4, 1, n)
    price[rng.random(n) < 0.01] = np.nan
    price[:40], price[40:80] = -0.0, 0.0
    frame = pd.DataFrame(
        {
            "region": rng.choice(["north", "south", "east", "west", "mid"], n),
            "price": price,
            "ratio": rng.normal(0, 1, n).astype(np.float32),
            "at": pd.Timestamp("2024-01-01") + pd.to_timedelta(rng.integers(0, 86_400 * 365 * 10**3, n), unit="ms"),
            "amount": [decimal.Decimal(int(v)) / 100 + decimal.Decimal("12345678901234567890") for v in rng.integers(0, 10**6, n)],
            "city": rng.choice(["Berlin", "Paris", "Rome", "Oslo"], n),
        }
    )
    frame.to_parquet(path, partition_cols=["region"], engine="pyarrow", index=False)
    return path


def files_of(run: Path) -> dict[str, bytes]:
    return {str(f.relative_to(run)): f.read_bytes() for f in sorted(run.rglob("*")) if f.is_file()}


def decoded_difference(name: str, a: bytes, b: bytes) -> str:
    """Which columns differ (for the failure message)."""
    if name.endswith(".parquet"):
        ta, tb = pq.read_table(pa.BufferReader(a)), pq.read_table(pa.BufferReader(b))
    elif name.endswith(".arrow"):
        ta, tb = pa.ipc.open_file(pa.BufferReader(a)).read_all(), pa.ipc.open_file(pa.BufferReader(b)).read_all()
    else:
        return "bytes"
    if ta.schema != tb.schema:
        return "schema"
    return ", ".join(c for c in ta.column_names if not ta[c].equals(tb[c])) or "metadata"


def assert_same_files(first: Path, second: Path) -> None:
    a, b = files_of(first), files_of(second)
    assert sorted(a) == sorted(b)
    manifest_a, manifest_b = json.loads(a["manifest.json"]), json.loads(b["manifest.json"])
    stamps = [
        (first.name.encode(), second.name.encode()),
        (manifest_a["created_at"].encode(), manifest_b["created_at"].encode()),
    ]
    assert all(x != y and len(x) == len(y) for x, y in stamps)
    differing = []
    for name in a:
        got = a[name]
        for x, y in stamps:
            got = got.replace(x, y)
        # the checksums of files that hold the job id (manifest, partial state): masked
        # here, and those files are compared themselves
        if CHECKSUM.sub(b"crc32:?", got) != CHECKSUM.sub(b"crc32:?", b[name]):
            differing.append(f"{name} ({decoded_difference(name, a[name], b[name])})")
        elif got != b[name]:  # only checksums differ: they must be of files that differ
            assert name in ("manifest.json",) or name.endswith("statistics.parquet"), name
    assert not differing, differing


@pytest.mark.parametrize("which", ["generated", "pandas"])
def test_analyzes_of_the_same_table_write_the_same_bytes(tmp_path: Path, which: str) -> None:
    """Two fresh Ray runtimes write the same bytes; and one code path for the results: the
    in-process executor runs the same task functions in the same order, so
    statistics.parquet, frequencies.parquet, histograms.parquet and every partition file
    are the bytes Ray's tasks write (job id and start time aside). Three analyzes, two
    comparisons, so each table pays two Ray start-ups, not three."""
    if which == "generated":
        table = tmp_path / "sales"
        generate_table(str(table), rows=40_000, partitions=4, seed=3)
        options: tuple[str, ...] = ()
    else:
        table = pandas_table(tmp_path / "lake")
        options = ("--tdigest", "--value-partitions", "--bloom-columns", "auto")
    # each its own fresh Ray runtime (a small table would run in process under --runtime auto)
    first = analyze(table, tmp_path / "store-1", *options, "--runtime", "ray")
    second = analyze(table, tmp_path / "store-2", *options, "--runtime", "ray")
    assert_same_files(first, second)
    local = analyze(table, tmp_path / "store-local", *options, "--runtime", "local")
    for name in ("statistics.parquet", "frequencies.parquet", "histograms.parquet"):
        assert (local / "table" / name).is_file(), name
    assert_same_files(local, first)
    # the table's float percentiles are exact (the reductions'); its KLL sketch is still the
    # merge of the partitions' (approximate_quantiles), which compacted
    stats = pq.read_table(first / "table" / "statistics.parquet").to_pylist()
    row = next(r for r in stats if r["column"] == "price")
    assert row["percentiles_exact"] is True and row["kll_sketch"] is not None
    merged = ds.kll_doubles_sketch.deserialize(row["kll_sketch"])
    assert merged.is_estimation_mode() and merged.n == row["row_count"] - row["null_count"] - row["nan_count"]
