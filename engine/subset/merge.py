"""Statistics of a union of whole partitions, merged from their stored rows (docs/SUBSETS.md,
step 2): counts summed, min and max of theirs, sum, mean and standard deviation by Chan's
merge (as analyze merges partitions), lengths weighted; the distinct count exact from the
partitions' complete frequencies, else estimated from their theta sketches.

Exact because no partition is cut: what analyze would compute for these rows, but for the
distinct count where a partition does not store all its values.
"""

from __future__ import annotations

import math
from functools import reduce
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from engine import measures
from engine import types as mt
from engine.expressions.tree import BoundReference
from engine.stats import sketches
from engine.stats.moments import Moments, MomentsAccumulator
from engine.subset.model import THETA, Answer, Method
from engine.subset.stored import StoredInputs
from engine.subset.textforms import decode_sum, extreme, nonnull, sum_or_none, sum_text
from engine.types import is_numeric


def merged(
    column: str, t: pa.DataType, rows: list[dict[str, Any]], keys: list[str], stored: StoredInputs
) -> tuple[dict[str, Any], dict[str, Answer]]:
    """The merged statistics of ``column`` (of type ``t``) over the partitions' ``rows``, and
    their answers; ``keys``: the non-empty partitions among them (whose frequencies and
    sketches the distinct count reads)."""
    values: dict[str, Any] = {}
    values["row_count"] = sum(r["row_count"] or 0 for r in rows)
    values["null_count"] = sum(r["null_count"] or 0 for r in rows)
    values["nan_count"] = sum_or_none([r["nan_count"] for r in rows]) if mt.is_floating(t) else None
    lo, hi = extreme([r["min"] for r in rows], t, min), extreme([r["max"] for r in rows], t, max)
    values["min"], values["max"] = lo, hi
    moments = merge_moments(t, rows)
    if moments is not None:
        values.update(moments)
    values.update(merge_measures(t, rows))
    lens = [(r["avg_len"], nonnull(r)) for r in rows if r.get("avg_len") is not None]
    if lens and sum(w for _, w in lens):
        values["avg_len"] = sum(a * w for a, w in lens) / sum(w for _, w in lens)
    values["max_len"] = max((r["max_len"] for r in rows if r.get("max_len") is not None), default=None)
    answers = {s: Answer(column, s, values.get(s), Method.STORED) for s in values}
    answers.update(_merged_distinct(column, rows, keys, values, stored))
    return values, answers


def _merged_distinct(column: str, rows: list[dict[str, Any]], keys: list[str], values: dict[str, Any], stored: StoredInputs) -> dict[str, Answer]:
    """The distinct count of the union (set into ``values``), if every partition knows its own."""
    ds = [r["distinct_count"] for r in rows if r["row_count"]]
    if not keys:
        values["distinct_count"] = 0
        return {"distinct_count": Answer(column, "distinct_count", 0, Method.STORED)}
    if any(d is None for d in ds):
        return {}
    ref = BoundReference(column, (column,), stored.ts.column_type(column))
    freqs = [stored.freq(ref, k) for k in keys]
    if all(f is not None and f.complete for f in freqs):
        union = pa.chunked_array([f.values for f in freqs if f is not None and len(f.values)], type=ref.type)
        d = len(pc.unique(union)) if union.length() else 0
        values["distinct_count"] = d
        return {"distinct_count": Answer(column, "distinct_count", d, Method.STORED)}
    low, high = max(ds), min(sum(ds), sum(nonnull(r) for r in rows))
    blobs = stored.theta_sketches(column, keys)
    est = sketches.theta_estimate(sketches.merge_theta(blobs)) if all(b is not None for b in blobs) else None
    d = int(round(min(max(est[0], low), high))) if est is not None else high
    values["distinct_count"] = d
    return {"distinct_count": Answer(column, "distinct_count", d, Method.ESTIMATED, low, high, THETA if est is not None else "at most the sum")}


def merge_measures(t: pa.DataType, rows: list[dict[str, Any]]) -> dict[str, Any]:
    """The registered statistics (engine/measures) of the partitions' rows together, merged
    from the states their stored rows rebuild; one a row cannot rebuild is left out."""
    out: dict[str, Any] = {}
    for measure in measures.measures():
        if not measure.applies_to(t):
            continue
        m = measure(t)
        states = [m.from_statistics(r) for r in rows if r.get("row_count")]
        if all(s is not None for s in states):
            out.update(m.finalize(reduce(m.merge, states, m.zero())))
    return out


def merge_moments(t: pa.DataType, rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Sum (stored text form), mean and standard deviation of the partitions' rows together,
    rebuilt as the accumulator's states so the merge is analyze's own; None for a type
    without them."""
    if not is_numeric(t):
        return None
    acc = MomentsAccumulator(t)
    state = acc.zero()
    for r in rows:
        n = nonnull(r)
        if n <= 0 or r.get("sum") is None:
            continue
        sd = r.get("stddev")
        m2 = (sd * sd * (n - 1)) if sd is not None and n > 1 and math.isfinite(sd) else (0.0 if n == 1 else math.nan)
        state = acc.merge(state, Moments(n, float(r["mean"]), m2, decode_sum(r["sum"], t)))
    out = acc.finalize(state)
    return {"sum": sum_text(out["sum"], t) if out["sum"] is not None else None, "mean": out["mean"], "stddev": out["stddev"]}
