"""Row-group pruning of filtered reads (computed subsets, engine/sources/filtered.py): which row
groups of a Parquet file might hold a row matching a predicate, by the inclusive metrics
evaluator (engine/expressions/metrics.py) over each row group's footer statistics, converted
as the file index converts a file's (``footer_column_stats``: bounds in the table's type,
units rounded outwards, NaN unknown).

pyarrow's own pruning (``ParquetFileFragment.subset``) keeps every row group whose column
holds a null (pyarrow 26: the guarantee ``in range OR is null`` does not simplify a
comparison), so a column with a few nulls would never be pruned by it.
"""

from __future__ import annotations

from collections.abc import Sequence

import pyarrow.parquet as pq

from engine.columns import LeafColumn
from engine.expressions.metrics import ColumnMetrics, InclusiveMetricsEvaluator, MetricsOf
from engine.expressions.statistics import metrics_from_row
from engine.expressions.tree import BoundReference, Expression
from engine.fileindex.build import footer_column_stats

__all__ = ["matching_row_groups", "row_group_metrics"]


class _OneRowGroup:
    """A file's footer seen as if it held only row group ``rg`` (what footer_column_stats reads)."""

    def __init__(self, md: pq.FileMetaData, rg: int) -> None:
        self._md, self._rg = md, rg
        self.num_columns = md.num_columns
        self.schema = md.schema
        self.num_row_groups = 1

    def row_group(self, _: int) -> pq.RowGroupMetaData:
        return self._md.row_group(self._rg)


def row_group_metrics(md: pq.FileMetaData, rg: int, leaves: Sequence[LeafColumn]) -> dict[str, ColumnMetrics]:
    """What row group ``rg``'s statistics prove of each leaf the file holds (others: unknown)."""
    rows = md.row_group(rg).num_rows
    out: dict[str, ColumnMetrics] = {}
    by_name = {l.name: l for l in leaves}
    for name, s in footer_column_stats(_OneRowGroup(md, rg), leaves).items():
        row = {
            "row_count": rows,
            "null_count": s.nulls,
            "nan_count": s.nans,
            "min": s.lower if s.bounded else None,
            "max": s.upper if s.bounded else None,
        }
        out[name] = metrics_from_row(row, by_name[name].type)
    return out


def matching_row_groups(where: Expression, md: pq.FileMetaData, leaves: Sequence[LeafColumn], candidates: Sequence[int] | None = None) -> list[int]:
    """The row groups (of ``candidates``, default all) that might hold a row matching the bound
    ``where``; ``leaves``: the predicate's columns (a column left out is unknown)."""
    evaluator = InclusiveMetricsEvaluator(where)
    groups = range(md.num_row_groups) if candidates is None else candidates
    out = []
    for rg in groups:
        metrics = row_group_metrics(md, rg, leaves)
        if evaluator.eval(_metrics_lookup(metrics), rows=md.row_group(rg).num_rows):
            out.append(rg)
    return out


def _metrics_lookup(metrics: dict[str, ColumnMetrics]) -> MetricsOf:
    """The evaluator's metrics of a bound reference: the row group's, by column name."""

    def of(ref: BoundReference) -> ColumnMetrics | None:
        return metrics.get(ref.name)

    return of
