"""Alerts of a table's columns from its stored statistics (no data read; docs/DIFF.md "Alerts").

Gathers each column's ``ColumnFacts`` through an ``engine.lookup.TableStatistics`` (passed
in: this module sits below the lookups) and applies the pure checks of engine/stats/alerts.py.
"""

from __future__ import annotations

import datetime as dt
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from engine import types as mt
from engine import values as value_forms
from engine.exceptions import MetastoreError
from engine.stats.alerts import Alert, AlertThresholds, ColumnFacts, column_alerts, table_alerts
from engine.types import is_numeric

if TYPE_CHECKING:
    from engine.review.reading import Statistics

_STATISTICS = [
    "type", "unsupported", "row_count", "null_count", "nan_count", "distinct_count",
    "distinct_count_exact", "min", "max", "mean", "stddev", "p50",
]  # fmt: skip


def _number(text: str | None, t: pa.DataType) -> Any:
    if text is None:
        return None
    try:
        return value_forms.decode_scalar(text, t).as_py()
    except (MetastoreError, OverflowError, ValueError):
        return None


def facts_of(ts: Statistics, partition: str | None = None, columns: list[str] | None = None) -> dict[str, ColumnFacts]:
    """Each column's stored numbers the alerts look at, in table order."""
    rows = ts.statistics(columns, partition, statistics=_STATISTICS).to_pylist()
    tops = ts.top_counts(partition)
    out = {}
    for r in rows:
        t = ts.column_type(r["column"])
        numeric = is_numeric(t)
        median = _number(r["p50"], t) if numeric else None
        out[r["column"]] = ColumnFacts(
            rows=r["row_count"] or 0,
            nulls=r["null_count"] or 0,
            nans=r["nan_count"],
            distinct=r["distinct_count"],
            distinct_exact=bool(r["distinct_count_exact"]),
            minimum=_number(r["min"], t),
            maximum=_number(r["max"], t),
            mean=r["mean"] if numeric else None,
            stddev=r["stddev"] if numeric else None,
            median=float(median) if median is not None else None,
            top_count=tops.get(r["column"]),
            categorical=mt.is_string_like(t) or mt.is_variable_binary(t),
            unsupported=r["unsupported"] is not None,
        )
    return out


def column_alerts_of(
    ts: Statistics, partition: str | None = None, columns: list[str] | None = None, thresholds: AlertThresholds | None = None
) -> dict[str, list[Alert]]:
    """``{column: [Alert, ...]}`` for every column (or ``columns``), in table order."""
    t = thresholds or AlertThresholds()
    return {c: column_alerts(f, t) for c, f in facts_of(ts, partition, columns).items()}


def state_age_s(ts: Statistics, now: dt.datetime | None = None) -> float | None:
    """Seconds since the state's catalog transaction (None without a catalog)."""
    cat = ts.state.catalog
    if cat is None or not cat.committed_at:
        return None
    try:
        at = dt.datetime.fromisoformat(str(cat.committed_at).replace("Z", "+00:00"))
    except ValueError:
        return None
    if at.tzinfo is None:
        at = at.replace(tzinfo=dt.UTC)
    return ((now or dt.datetime.now(dt.UTC)) - at).total_seconds()


def table_alerts_of(ts: Statistics, stale_by: int | None, thresholds: AlertThresholds | None = None) -> list[Alert]:
    """The table's alerts (``stale``): ``stale_by`` from ``ts.stale_by()`` (the caller's: it may read the source's history)."""
    return table_alerts(stale_by, state_age_s(ts), thresholds or AlertThresholds())


__all__ = ["Alert", "AlertThresholds", "column_alerts_of", "facts_of", "table_alerts_of"]
