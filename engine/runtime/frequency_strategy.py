"""The analyze job's seam to the distributed Bloom/Redis frequency algorithm (engine.frequencies).

``AnalyzeOptions.frequencies`` picks how table-level frequencies, exact distinct
counts and percentiles of discrete columns are computed:

- ``reduce`` (default): Ray tasks merge the partitions' value counts
  (engine.runtime.tasks.reduce.reduce_counts). On a 2-core machine this is several
  times faster than Redis in every scenario (docs/FREQUENCIES.md, measured).
- ``redis``: engine.frequencies.consolidate -- the Bloom filter for (almost)
  all-distinct columns, one Redis hash or value-range batches otherwise. Its
  partition inputs are the same phase-1 value counts, already in the object
  store; string counts there carry their theta hashes in hash order, so strings
  are consolidated by those 8-byte hashes and resolved to values afterwards.
  Columns it cannot take (decimals on the Bloom path, whose percentiles need the
  merge; types without a field encoding) stay on ``reduce``.

The ``redis`` strategy runs on Ray only (engine/runtime/placement.py never runs it in
process): Ray and the consolidation (engine.frequencies.job, which imports Ray) are
imported in :func:`run`, so the ``reduce`` strategy's jobs in this process never load them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from engine import types as mt
from engine.files import writer
from engine.frequencies import keys
from engine.frequencies.plan import FrequencySettings, PartitionCounts
from engine.stats import selection
from engine.stats.valuecounts import counts_hashed

STRATEGIES = ("reduce", "redis")


def redis_columns(names: Sequence[str], types: dict[str, pa.DataType]) -> list[str]:
    """The discrete columns the Redis strategy takes (the others stay on the Ray reduction).

    Decimals stay: on the Bloom path no complete counts exist, and their exact
    percentiles need the merge.
    """
    return [n for n in names if keys.supported(types[n]) and (not mt.has_percentiles(types[n]) or selection.supported(types[n]))]


def _partition_counts(columns: list[str], obj: dict[str, pa.Table]) -> dict[str, PartitionCounts]:
    """A partition's (non-null, distinct) per column, from its phase-1 value counts (profiled or inherited)."""
    out = {}
    for c in columns:
        t = obj[c]
        out[c] = PartitionCounts(int(pc.sum(t["count"]).as_py() or 0), t.num_rows, counts_hashed(t))
    return out


#: _partition_counts as a Ray remote function, made once per process (by run)
_REMOTE: list[Any] = []


def run(
    columns: Sequence[str],
    types: dict[str, pa.DataType],
    positions: dict[str, int],
    group_refs: dict[str, list[Any]],
    job_id: str,
    mostly_distinct_ratio: float,
    settings: FrequencySettings,
    redis_url: str | None,
    progress: Any = None,
) -> tuple[dict[str, dict[str, Any]], list[tuple[str, str, pa.Table]], dict[str, Any]]:
    """(exact statistics per column, frequency rows per column, a report) in reduce_counts' shape.

    ``group_refs``: per column, one object per partition holding ``{column: (value, count)}``.
    """
    import ray

    from engine.frequencies.job import ColumnInput, consolidate

    if not _REMOTE:
        _REMOTE.append(ray.remote(_partition_counts))
    # one small task per (partition, column group) object, however many of its columns go through Redis
    wanted: dict[Any, list[str]] = {}
    for c in columns:
        for ref in group_refs[c]:
            wanted.setdefault(ref, []).append(c)
    refs = list(wanted)
    sizes = dict(zip(refs, ray.get([_REMOTE[0].remote(wanted[r], r) for r in refs])))
    per_partition = {c: [sizes[r][c] for r in group_refs[c]] for c in columns}
    inputs = [ColumnInput(c, types[c], positions[c], tuple(per_partition[c]), tuple(group_refs[c])) for c in columns]
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
        report[c] = {
            "scenario": r.scenario,
            "batches": r.batches,
            "positives": r.positives,
            "fields_sent": r.fields_sent,
            "fields": r.fields,
            "resolved": r.resolved,
            "collision": r.collision,
            "attempts": r.attempts,
            "seconds": {k: round(v, 3) for k, v in r.seconds.items()},
        }
    return exact, freq, report
