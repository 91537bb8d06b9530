"""The ``diff`` action: what changed between two states of a table's statistics (docs/reference/FLIGHT.md,
docs/DIFF.md), answered from the stored statistics of both states (no data read)."""

from __future__ import annotations

from typing import Any

from engine.display import to_jsonable
from engine.exceptions import MetastoreError
from engine.review.diff import DEFAULT_TOP, resolve_sides
from flight_server.protocol import At, RequestError
from flight_server.state import StateResolver

MAX_TOP = 1_000


def _txn(body: dict[str, Any], key: str) -> int | None:
    v = body.get(key)
    if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 1):
        raise RequestError(f'"{key}" must be a transaction id (an integer >= 1) or null')
    return v


def _text(body: dict[str, Any], key: str) -> str | None:
    v = body.get(key)
    if v is not None and (not isinstance(v, str) or not v):
        raise RequestError(f'"{key}" must be a non-empty string or null')
    return v


def diff_action(resolver: StateResolver, store: str, body: dict[str, Any]) -> dict[str, Any]:
    """``{"table", "from", "to", "from_partition", "to_partition", "columns", "top"}`` (its keys checked
    by flight_server/requests.py) -> the ``metastore diff -o json`` document (``TableDiff.as_dict``)."""
    table = _text(body, "table")
    if table is None:
        raise RequestError('diff needs {"table": ...}')
    columns = body.get("columns")
    if columns is not None and (not isinstance(columns, list) or not all(isinstance(c, str) for c in columns)):
        raise RequestError('"columns" must be a list of column names or null')
    top = body.get("top", DEFAULT_TOP)
    if isinstance(top, bool) or not isinstance(top, int) or not 0 <= top <= MAX_TOP:
        raise RequestError(f'"top" must be an integer in 0..{MAX_TOP}')
    from_partition, to_partition = _text(body, "from_partition"), _text(body, "to_partition")
    resolver.resolve(table)  # an unknown table: the server's usual error
    a_txn, b_txn = resolve_sides(store, table, _txn(body, "from"), _txn(body, "to"), from_partition, to_partition)
    a = resolver.resolve(table, At(transaction=a_txn) if a_txn is not None else None).stats
    b = a if b_txn == a_txn else resolver.resolve(table, At(transaction=b_txn) if b_txn is not None else None).stats
    return to_jsonable(a.diff(b, partition=from_partition, other_partition=to_partition, columns=columns, top=top).as_dict())


def alerts_action(resolver: StateResolver, body: dict[str, Any]) -> dict[str, Any]:
    """``{"table", "columns"?, "partition"?, "thresholds"? ({name: number})}`` -> ``{"table",
    "partition", "alerts": [table's], "columns": [{"column", "alerts": [{"kind", "detail"}]}]}``,
    as ``metastore show -o json`` has them (docs/DIFF.md "Alerts"); ``stale`` from the source's
    history as the staleness action reads it."""
    from engine.review.alerts import column_alerts_of, table_alerts_of
    from engine.stats.alerts import AlertThresholds

    table = _text(body, "table")
    if table is None:
        raise RequestError('alerts needs {"table": ...}')
    partition = _text(body, "partition")
    columns = body.get("columns")
    if columns is not None and (not isinstance(columns, list) or not all(isinstance(c, str) for c in columns)):
        raise RequestError('"columns" must be a list of column names or null')
    settings = body.get("thresholds") or {}
    if not isinstance(settings, dict) or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in settings.values()):
        raise RequestError('"thresholds" must be an object of numbers, e.g. {"high_nulls": 0.2}')
    thresholds = AlertThresholds().with_settings({str(k): str(v) for k, v in settings.items()})
    ts = resolver.resolve(table).stats
    if partition is not None and partition not in {p.key for p in ts.partitions()}:
        raise RequestError(f"table {table!r} has no partition {partition[:80]!r}")
    found = column_alerts_of(ts, partition, columns, thresholds)
    try:
        stale_by = ts.stale_by()
    except MetastoreError:
        stale_by = None
    return {
        "table": table,
        "partition": partition,
        "alerts": [a.as_dict() for a in table_alerts_of(ts, stale_by, thresholds)],
        "columns": [{"column": c, "alerts": [a.as_dict() for a in v]} for c, v in found.items()],
    }
