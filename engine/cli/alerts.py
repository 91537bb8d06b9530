"""Alerts in ``metastore show`` (docs/DIFF.md "Alerts"): ``--alert-threshold NAME=VALUE``
parsed into ``AlertThresholds``, each column's alerts added to the overview and column
documents (``alerts: [{"kind", "detail"}]``), the table's (``stale``) to the document, and
their text form under the overview or a column's statistics.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.cli.plain import Console, Text
from engine.exceptions import InvalidArgumentError

if TYPE_CHECKING:  # loaded when alerts are asked for
    from engine.lookup import TableStatistics
    from engine.stats.alerts import AlertThresholds


def thresholds_of(settings: tuple[str, ...]) -> AlertThresholds:
    """``AlertThresholds`` with ``NAME=VALUE`` settings applied (unknown names: one error line)."""
    from engine.stats.alerts import AlertThresholds

    pairs = {}
    for item in settings:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise InvalidArgumentError(f"--alert-threshold {item!r}: expected NAME=VALUE (e.g. high_nulls=0.2)")
        pairs[name.strip().replace("-", "_")] = value.strip()
    return AlertThresholds().with_settings(pairs)


def add_alerts(
    doc: dict[str, Any], ts: TableStatistics, partition: str | None, thresholds: AlertThresholds, stale_by: int | None, columns_key: str = "columns"
) -> None:
    """Each column entry of ``doc[columns_key]`` gets ``alerts``; ``doc`` gets the table's ``alerts``."""
    from engine.review.alerts import column_alerts_of, table_alerts_of

    names = [c["column"] for c in doc[columns_key]]
    found = column_alerts_of(ts, partition, names, thresholds)
    for c in doc[columns_key]:
        c["alerts"] = [a.as_dict() for a in found.get(c["column"], [])]
    doc["alerts"] = [a.as_dict() for a in table_alerts_of(ts, stale_by, thresholds)]


def print_alerts(console: Console, doc: dict[str, Any], columns_key: str = "columns") -> None:
    """``alerts`` lines: the table's, then one per column alert (nothing when there are none)."""
    lines = [f"{a['kind']}: {a['detail']}" for a in doc.get("alerts") or []]
    lines += [f"{c['column']}: {a['kind']} · {a['detail']}" for c in doc.get(columns_key) or [] for a in c.get("alerts") or []]
    if not lines:
        return
    console.print(Text("alerts", style="bold yellow"))
    for line in lines:
        console.print(Text(f"  {line}", style="yellow"))
