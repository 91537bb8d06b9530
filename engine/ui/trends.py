"""The history of a table or of one column over every kept state (catalog transaction): rows,
nulls and mean as small line charts (engine/ui/charts.py), and the states to diff."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine.columns import display_name
from engine.display import fmt_count
from engine.ui import charts
from engine.ui import viewmodel as vm

if TYPE_CHECKING:
    from engine.lookup import TableStatistics

MAX_STATES = 200  # the newest states drawn


@dataclass(frozen=True)
class Series:
    key: str
    label: str
    line: charts.Line


@dataclass(frozen=True)
class StateRow:
    txn_id: int
    committed_at: str
    values: tuple[str, ...]  # one per series


@dataclass(frozen=True)
class History:
    table: str
    column: str | None  # the stored name; None: the table's rows
    name: str
    transactions: tuple[vm.Transaction, ...]  # newest first
    series: tuple[Series, ...]
    states: tuple[StateRow, ...]  # oldest first
    columns: tuple[str, ...]  # the columns one can choose


def _number(value: Any) -> float | None:
    try:
        return float(value) if value is not None and not isinstance(value, bool) else None
    except (TypeError, ValueError):
        return None


def history(
    open_state: Callable[[int], TableStatistics], table: str, transactions: Sequence[vm.Transaction], column: str | None, columns: Sequence[str]
) -> History:
    """``open_state(txn)``: the table's state at a transaction. Each kept state's row count, and
    with ``column`` its nulls and mean (a state without the column: no point)."""
    kept = list(transactions)[:MAX_STATES][::-1]  # oldest first
    keys = [("row_count", "rows")] + ([("null_count", "nulls"), ("mean", "mean")] if column is not None else [])
    raw: list[dict[str, Any]] = []
    for t in kept:
        ts = open_state(t.txn_id)
        if column is None:
            raw.append({"row_count": ts.state.rows})
            continue
        if column not in set(vm.column_names(ts)):
            raw.append({})
            continue
        row = ts.statistics([column], statistics=["row_count", "null_count", "mean"]).to_pylist()[0]
        raw.append(vm.decode_row(row, vm.leaf_types(ts).get(column)))
    labels = [f"txn {t.txn_id} · {t.committed_at[:19].replace('T', ' ')}" for t in kept]
    series = []
    shown_by_key: dict[str, list[str]] = {}
    for key, label in keys:
        values = [_number(r.get(key)) for r in raw]
        shown = [("—" if r.get(key) is None else (fmt_count(r[key]) if key != "mean" else vm.show(r[key]))) for r in raw]
        shown_by_key[key] = shown
        series.append(Series(key, label, charts.line(values, labels, shown)))
    states = tuple(StateRow(t.txn_id, t.committed_at, tuple(shown_by_key[k][i] for k, _ in keys)) for i, t in enumerate(kept))
    name = display_name(column) if column is not None else table
    return History(table, column, name, tuple(transactions), tuple(series), states, tuple(columns))
