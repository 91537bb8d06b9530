"""Exact value counts: the source of frequencies, exact distinct counts and exact percentiles.

Within a partition every orderable column keeps its value counts (O(distinct
values) memory): they give the exact distinct count, the frequencies of
discrete columns, and exact percentiles by a sort of the distinct values, so
no column is ever sorted row by row. Partial counts of several batches are kept
as a list and grouped once, so unique columns do not pay a merge per batch.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.types as pt

from engine.stats.accumulator import Accumulator

#: Probabilities of the percentile columns of statistics.parquet (column p01 .. p99).
PERCENTILES: tuple[float, ...] = (0.01, 0.05, 0.25, 0.5, 0.75, 0.95, 0.99)


def percentile_column(p: float) -> str:
    return f"p{round(p * 100):02d}"


@dataclass
class ValueCounts:
    """A list of (value, count) tables; ``compact()`` groups them into one."""

    parts: list[pa.Table] = field(default_factory=list)

    def compact(self) -> pa.Table:
        if not self.parts:
            raise ValueError("compact() of empty value counts needs a type; use ValueCountsAccumulator.table")
        if len(self.parts) > 1:
            t = pa.concat_tables(self.parts)
            g = t.group_by("value", use_threads=False).aggregate([("count", "sum")])
            self.parts = [g.rename_columns(["value", "count"])]
        return self.parts[0]


def batch_value_counts(values: pa.Array) -> pa.Table:
    """(value, count) of the non-null, non-NaN values of one batch."""
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    if pt.is_dictionary(values.type):
        values = values.dictionary_decode()
    valid = values.drop_null()
    if pt.is_floating(valid.type):
        valid = valid.filter(pc.invert(pc.is_nan(valid)))
    vc = pc.value_counts(valid)
    return pa.table({"value": vc.field(0), "count": vc.field(1)})


class ValueCountsAccumulator(Accumulator[ValueCounts]):
    def __init__(self, type_: pa.DataType) -> None:
        self._type = type_

    def zero(self) -> ValueCounts:
        return ValueCounts()

    def update(self, state: ValueCounts, batch: pa.Array) -> ValueCounts:
        state.parts.append(batch_value_counts(batch))
        return state

    def merge(self, a: ValueCounts, b: ValueCounts) -> ValueCounts:
        return ValueCounts(a.parts + b.parts)

    def table(self, state: ValueCounts) -> pa.Table:
        if not state.parts:
            return pa.table({"value": pa.array([], self._type), "count": pa.array([], pa.int64())})
        return state.compact()

    def finalize(self, state: ValueCounts) -> dict[str, Any]:
        t = self.table(state)
        out: dict[str, Any] = {"distinct_count": t.num_rows}
        if _has_exact_percentiles(self._type):
            out.update(exact_percentiles(t))
        return out


def _has_exact_percentiles(t: pa.DataType) -> bool:
    from engine.types import has_percentiles

    return has_percentiles(t)


def sorted_counts(counts: pa.Table) -> pa.Table:
    """Value counts sorted by value ascending."""
    order = pc.sort_indices(counts["value"])
    return counts.take(order)


def exact_percentiles(counts: pa.Table, probabilities: tuple[float, ...] = PERCENTILES) -> dict[str, pa.Scalar | None]:
    """Lower nearest-rank percentiles: the value at 0-based position floor(p * (n - 1)).

    That is numpy's ``quantile(method="lower")`` and DuckDB's ``quantile_disc``.
    """
    names = [percentile_column(p) for p in probabilities]
    if counts.num_rows == 0:
        return dict.fromkeys(names)
    s = sorted_counts(counts)
    cum = np.cumsum(s["count"].to_numpy())
    n = int(cum[-1])
    positions = np.array([int(np.floor(p * (n - 1))) for p in probabilities], dtype=np.int64)
    # the value whose cumulative count first exceeds the position
    idx = np.searchsorted(cum, positions, side="right")
    values = s["value"].take(pa.array(idx))
    return {name: values[i] for i, name in enumerate(names)}
