"""The analyze job's seam to the distributed Bloom/Redis frequency algorithm (engine.frequencies).

``AnalyzeOptions.frequencies`` picks how table-level frequencies, exact distinct
counts and percentiles of discrete columns are computed:

- ``reduce`` (default): Ray tasks merge the partitions' value counts
  (engine.runtime.analyze.reduce_counts). On a 2-core machine this is several
  times faster than Redis in every scenario (docs/FREQUENCIES.md, measured).
- ``redis``: engine.frequencies.consolidate -- the Bloom filter for (almost)
  all-distinct columns, one Redis hash or value-range batches otherwise. Its
  partition inputs are the same phase-1 value counts, already in the object
  store. Columns it cannot take (decimals on the Bloom path, whose percentiles
  need the merge; types without a field encoding) stay on ``reduce``.
"""
from __future__ import annotations

from typing import Any, Sequence

import pyarrow as pa

from engine import types as mt
from engine.files import writer
from engine.frequencies import keys
from engine.frequencies.job import ColumnInput, consolidate
from engine.frequencies.plan import BLOOM, FrequencySettings, PartitionCounts, plan_column
from engine.stats import selection

STRATEGIES = ("reduce", "redis")


def redis_columns(
    names: Sequence[str],
    types: dict[str, pa.DataType],
    positions: dict[str, int],
    per_partition: dict[str, list[PartitionCounts]],
    settings: FrequencySettings,
) -> list[str]:
    """The discrete columns the Redis strategy takes (the others stay on the Ray reduction)."""
    out = []
    for name in names:
        t = types[name]
        if not keys.supported(t):
            continue
        if mt.has_percentiles(t) and not selection.supported(t) and plan_column(per_partition[name], settings).scenario == BLOOM:
            continue  # Bloom keeps no complete counts, and these percentiles need them
        out.append(name)
    return out


def run(
    columns: Sequence[str],
    types: dict[str, pa.DataType],
    positions: dict[str, int],
    per_partition: dict[str, list[PartitionCounts]],
    group_refs: dict[str, list[Any]],
    job_id: str,
    mostly_distinct_ratio: float,
    settings: FrequencySettings,
    redis_url: str | None,
    progress: Any = None,
) -> tuple[dict[str, dict[str, Any]], list[tuple[str, str, pa.Table]], dict[str, Any]]:
    """(exact statistics per column, frequency rows per column, a report) in reduce_counts' shape."""
    inputs = [
        ColumnInput(c, types[c], positions[c], tuple(per_partition[c]), tuple(group_refs[c]))
        for c in columns
    ]
    results = consolidate(inputs, job_id, settings, mostly_distinct_ratio, redis_url=redis_url, progress=progress)
    exact: dict[str, dict[str, Any]] = {}
    freq: list[tuple[str, str, pa.Table]] = []
    report: dict[str, Any] = {}
    for c in columns:
        r = results[c]
        stats: dict[str, Any] = {"distinct_count": r.distinct_count, "frequencies": r.kind}
        if mt.has_percentiles(types[c]):
            stats.update(r.percentiles)
        exact[c] = stats
        freq.append((c, r.kind, writer.frequency_rows(c, r.stored)))
        report[c] = {"scenario": r.scenario, "batches": r.batches, "positives": r.positives, "fields_sent": r.fields_sent,
                     "attempts": r.attempts, "seconds": {k: round(v, 3) for k, v in r.seconds.items()}}
    return exact, freq, report
