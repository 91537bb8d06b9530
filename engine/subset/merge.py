"""Statistics of a union of whole partitions, merged from their stored rows (docs/SUBSETS.md,
step 2): counts summed, min and max of theirs, sum, mean and standard deviation by Chan's
merge (as analyze merges partitions), lengths weighted; the distinct count exact from the
partitions' complete frequencies, else estimated from their theta sketches.

Exact because no partition is cut: what analyze would compute for these rows, but for the
distinct count where a partition does not store all its values.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from engine import measures
from engine import types as mt
from engine.expressions.tree import BoundReference
from engine.measures.base import Measure, nonnull
from engine.measures.moments import MomentsMeasure
from engine.stats import sketches
from engine.subset.model import THETA, Answer, Method
from engine.subset.stored import StoredInputs
from engine.subset.textforms import extreme, sum_or_none, sum_text


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
    values.update(merge_measures(t, rows))
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
    from the states their stored rows rebuild (as analyze merges partitions); one a row
    cannot rebuild is left out."""
    out: dict[str, Any] = {}
    for measure in measures.measures():
        if measure.applies_to(t):
            out.update(_merged_measure(measure(t), t, rows) or {})
    return out


def merge_moments(t: pa.DataType, rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Sum (stored text form), mean and standard deviation of the partitions' rows together;
    None for a type without them."""
    return _merged_measure(MomentsMeasure(t), t, rows) if MomentsMeasure.applies_to(t) else None


def _merged_measure(m: Measure[Any], t: pa.DataType, rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """``m``'s columns of the rows' states merged (a number column stored as text, as a sum,
    in its text form); None when a row cannot rebuild its state."""
    states = [m.from_statistics(r) for r in rows if r.get("row_count")]
    if any(s is None for s in states):
        return None
    out = m.finalize(m.merge_all(states))
    for f in m.columns:
        if f.type == pa.string() and out.get(f.name) is not None:
            out[f.name] = sum_text(out[f.name], t)
    return out
