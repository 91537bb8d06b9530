#!/usr/bin/env python
"""What reading a table's frequencies in segments costs (docs/FORMAT.md, "Segments").

A table-level column like the bench table's ``comment`` (``--rows`` stored string rows,
Zipf counts) and an int64 column, written twice in one local store:

- ``whole``: one frequencies.parquet holding the merged rows (what a full analyze writes);
- ``segments``: a base (the rows before an append) and one delta (the head of the merged
  rows and ``--changed`` values whose frequency grew), the catalog state naming both.

Measured in-process (CPU seconds by ``time.process_time``, median of ``--repeat``):
a cold top-10 lookup (caches cleared: the footer, the checksum pass over the file, one row
group), a cold full read (``top_frequencies(column, stored rows)``: every segment read,
checked and merged) and a warm full read (the merged column cached).

Usage: python bench/bench_segments.py [--rows 1500000] [--changed 20000] [--repeat 5] [--json OUT]
"""

from __future__ import annotations

import argparse
import base64
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "bench"))

import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
from common import load_avg, log, write_json  # noqa: E402

from engine import lookup  # noqa: E402
from engine.catalog import schema_fingerprint  # noqa: E402
from engine.catalog.job_output import JobOutput  # noqa: E402
from engine.catalog.model import FREQUENCY_SEGMENTS_PROPERTY, FileRef, StatisticsFiles  # noqa: E402
from engine.files import layout, writer  # noqa: E402
from engine.files.layout import FileIdentity  # noqa: E402
from engine.stats.valuecounts import frequency_order  # noqa: E402
from engine.store import Store  # noqa: E402

SCHEMA = pa.schema([("comment", pa.string()), ("user_id", pa.int64())])


def _columns(rows: int, changed: int, seed: int = 0) -> dict[str, tuple[pa.Table, pa.Table]]:
    """Per column: the counts before the append and after it (value, count), unordered."""
    rng = np.random.default_rng(seed)
    out = {}
    for name, values in (
        ("comment", pa.array([f"comment {i:09d} lorem ipsum dolor" for i in range(rows)])),
        ("user_id", pa.array(np.arange(rows, dtype=np.int64) * 7919 - 10**9)),
    ):
        before = rng.zipf(2.0, rows).clip(2, 10**6).astype(np.int64)
        after = before.copy()
        grow = rng.choice(rows, changed, replace=False)
        after[grow] += rng.integers(1, 4, changed)
        out[name] = (pa.table({"value": values, "count": before}), pa.table({"value": values, "count": after}))
    return out


def _publish(
    store: str, table: str, job: str, per_column: list[tuple[str, str, pa.Table]], older: list[FileRef], stored: dict[str, int] | None
) -> FileRef:
    st = Store(store)
    run = f"runs/{job}/table"
    root = st.table_uri(table)
    identity = FileIdentity(table, "/bench/" + table, "table", "", "s-" + job, job, FileIdentity.now())
    rows = [{"column": f.name, "type": str(f.type), "row_count": 0, "null_count": 0, "frequencies": layout.FREQ_COMPLETE} for f in SCHEMA]
    written = {
        "statistics": writer.write_statistics(f"{root}/{run}/{layout.STATISTICS_FILE}", rows, [], identity),
        "frequencies": writer.write_frequencies(
            f"{root}/{run}/{layout.FREQUENCIES_FILE}", [(c, k, writer.frequency_rows(c, t)) for c, k, t in per_column], identity, stored_rows=stored
        ),
        "histograms": writer.write_histograms(f"{root}/{run}/{layout.HISTOGRAMS_FILE}", [("user_id", pa.int64(), None, [])], identity),
    }
    files = StatisticsFiles(**{k: FileRef(f"{run}/{name}", w.size, w.checksum) for (k, w), name in zip(written.items(), layout.FILES)})  # type: ignore[arg-type]
    properties: dict[str, Any] = {
        "columns": [{"name": f.name, "type": str(f.type)} for f in SCHEMA],
        "schema": base64.b64encode(SCHEMA.serialize().to_pybytes()).decode(),
        "bins": 1000,
        "user_statistics": [],
    }
    if older:
        properties[FREQUENCY_SEGMENTS_PROPERTY] = [{"path": r.path, "size": r.size, "checksum": r.checksum} for r in older]
    st.publish(JobOutput(table, job, "s-" + job, schema_fingerprint(SCHEMA), (), files, properties, row_count=0))
    return files.frequencies


def build(store: str, rows: int, changed: int) -> None:
    cols = _columns(rows, changed)
    before = {c: frequency_order(b) for c, (b, _) in cols.items()}
    after = {c: frequency_order(a) for c, (_, a) in cols.items()}
    _publish(store, "whole", "whole", [(c, layout.FREQ_COMPLETE, t) for c, t in after.items()], [], None)
    base = _publish(store, "segments", "base", [(c, layout.FREQ_COMPLETE, t) for c, t in before.items()], [], None)
    deltas, stored = [], {}
    for c, now in after.items():
        old = dict(zip(before[c]["value"].to_pylist(), before[c]["count"].to_pylist()))
        values, counts = now["value"].to_pylist(), now["count"].to_pylist()
        head = min(layout.FREQUENCIES_HEAD_ROWS, now.num_rows)
        keep = list(range(head)) + [i for i in range(head, now.num_rows) if old.get(values[i]) != counts[i]]
        deltas.append((c, layout.FREQ_COMPLETE, now.take(pa.array(keep))))
        stored[c] = now.num_rows
    _publish(store, "segments", "delta", deltas, [base], stored)


def _cpu(fn: Any, repeat: int, cold: bool) -> float:
    times = []
    for _ in range(repeat):
        if cold:
            lookup.clear_cache()
        t0 = time.process_time()
        fn()
        times.append(time.process_time() - t0)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_500_000)
    ap.add_argument("--changed", type=int, default=20_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        store = str(Path(tmp) / "store")
        t0 = time.perf_counter()
        build(store, args.rows, args.changed)
        log(f"built the two tables in {time.perf_counter() - t0:.1f} s (load {load_avg()})")
        result: dict[str, Any] = {"rows": args.rows, "changed": args.changed, "load_avg_before": load_avg(), "columns": {}}
        for table in ("whole", "segments"):
            ts = lookup.open_statistics(store, table)
            files = [Path(u).stat().st_size for u in ts.frequency_segments()]
            for column in ("comment", "user_id"):
                n = ts.frequency_index()[column][2]
                figures = {
                    "files_bytes": files,
                    "cold_top10_cpu_s": _cpu(lambda: ts.top_frequencies(column, 10), args.repeat, True),
                    "cold_full_cpu_s": _cpu(lambda: ts.top_frequencies(column, n), args.repeat, True),
                    "warm_full_cpu_s": _cpu(lambda: ts.top_frequencies(column, n), args.repeat, False),
                }
                result["columns"][f"{table}.{column}"] = figures
                log(
                    f"{table:>8} {column:>8}: "
                    + ", ".join(f"{k} {v}" if k == "files_bytes" else f"{k} {v * 1000:.1f} ms" for k, v in figures.items())
                )
        result["load_avg_after"] = load_avg()
    if args.json:
        write_json(result, args.json)


if __name__ == "__main__":
    main()
