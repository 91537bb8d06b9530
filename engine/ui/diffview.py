"""The diff page: what ``metastore diff`` computes (engine/review/diff.py) between two states of
a table, its columns sorted by KS distance, with each column's two histograms overlaid."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from engine.display import to_jsonable
from engine.exceptions import StatisticsNotFoundError
from engine.ui import charts
from engine.ui import viewmodel as vm

if TYPE_CHECKING:
    from engine.lookup import TableStatistics


@dataclass(frozen=True)
class DiffView:
    doc: dict[str, Any]  # TableDiff.as_dict(), JSON-ready, columns by KS distance (largest first)
    overlays: dict[str, charts.Overlay]  # by column
    transactions: tuple[vm.Transaction, ...]
    from_txn: int | None
    to_txn: int | None


def _bins(ts: TableStatistics, column: str, partition: str | None) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    try:
        spec = ts.histogram_spec(column, partition)
        if spec is None:
            return None
        t = ts.histogram(column, partition)
    except StatisticsNotFoundError:
        return None
    lower, upper = charts.edges_as_numbers(t["lower"]), charts.edges_as_numbers(t["upper"])
    if lower is None or upper is None:
        return None
    if spec.domain == "integer":  # inclusive upper edges: a bin of one value is one wide
        upper = upper + 1
    return lower, upper, np.asarray(t["count"].to_numpy(), dtype=np.int64)


def by_drift(columns: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Columns by KS distance, largest first (no KS last, in their order)."""
    return sorted(columns, key=lambda c: -(c["drift"]["ks"]) if c["drift"]["ks"] is not None else 1.0)


def diff_view(
    a: TableStatistics, b: TableStatistics, partition: str | None, other_partition: str | None, transactions: tuple[vm.Transaction, ...]
) -> DiffView:
    """The diff from ``a`` to ``b`` (their ``partition`` / ``other_partition`` or table levels)."""
    d = a.diff(b, partition=partition, other_partition=other_partition)
    doc = to_jsonable(d.as_dict())
    doc["columns"] = by_drift(doc["columns"])
    overlays = {}
    for c in d.columns:
        if c.drift.method not in ("histogram", "histogram_rebinned"):
            continue
        ha, hb = _bins(a, c.column, partition), _bins(b, c.column, other_partition)
        if ha is not None and hb is not None:
            o = charts.overlay(ha, hb)
            if o is not None:
                overlays[c.column] = o
    return DiffView(doc, overlays, transactions, d.from_side.txn_id, d.to_side.txn_id)
