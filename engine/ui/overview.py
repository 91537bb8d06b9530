"""The overview of a table: one row per column (as DuckDB's ``SUMMARIZE``), from one lookup of
the statistics rows of every column shown; what the table page shows first."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine.columns import display_name
from engine.disclosure import store_paths
from engine.display import fmt_share
from engine.ui import viewmodel as vm

if TYPE_CHECKING:
    from engine.lookup import TableStatistics

#: the overview's columns: (statistic, heading, whether it is a count)
OVERVIEW_STATISTICS = (
    ("row_count", "rows", True),
    ("null_count", "nulls", True),
    ("distinct_count", "distinct", True),
    ("min", "min", False),
    ("max", "max", False),
    ("mean", "mean", False),
    ("stddev", "stddev", False),
    ("p25", "p25", False),
    ("p50", "p50", False),
    ("p75", "p75", False),
)


@dataclass(frozen=True)
class Cell:
    """One value of the overview: as shown, and the key it sorts by (a number when it has one)."""

    text: str
    sort: float | str | None
    count: int | None = None  # an exact count (shown abbreviated, exact in the tooltip)
    note: str = ""  # "≈" for an estimate


@dataclass(frozen=True)
class OverviewRow:
    column: str  # the stored name
    name: str  # as people read it
    type: str
    null_share: str
    cells: tuple[Cell, ...]


#: rows of the overview a table page brings; the app's page script fetches the others
#: (``/table/{table}/overview?offset=``) once the page is shown: a 1,000-column table's page
#: comes at once, its overview filled a moment later
EAGER_ROWS = 100


@dataclass(frozen=True)
class Overview:
    headings: tuple[str, ...]
    rows: tuple[OverviewRow, ...]
    error: str | None = None
    total: int | None = None  # the columns matched (None: all of them are in ``rows``)

    @property
    def more(self) -> int:
        """How many rows are still to be fetched (``offset=len(rows)``)."""
        return 0 if self.total is None else max(0, self.total - len(self.rows))


def _sort_key(value: Any) -> float | str | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    try:
        return float(value)  # Decimal
    except (TypeError, ValueError):
        return vm.show(value) if not hasattr(value, "isoformat") else value.isoformat()


def _cell(s: dict[str, Any], key: str, is_count: bool) -> Cell:
    value = s.get(key)
    if value is None:
        return Cell("—", None)
    if is_count:
        estimate = key == "distinct_count" and s.get("distinct_count_exact") is False
        return Cell(f"{value:,}", float(value), int(value), "≈" if estimate else "")
    estimate = key.startswith("p") and s.get("percentiles_exact") is False
    return Cell(vm.show(value), _sort_key(value), None, "≈" if estimate else "")


def overview(ts: TableStatistics, columns: Sequence[str], partition: str | None = None, limit: int | None = None) -> Overview:
    """The overview rows of ``columns`` (stored names) at the table level or of ``partition``; with
    ``limit``, only the first ``limit`` of them (``total`` says how many there are)."""
    headings = tuple(h for _, h, _ in OVERVIEW_STATISTICS)
    total = len(columns) if limit is not None and len(columns) > limit else None
    if total is not None:
        columns = columns[:limit]
    if not columns:
        return Overview(headings, ())
    try:
        raw = ts.statistics(list(columns), partition).to_pylist()
    except Exception as exc:  # noqa: BLE001 - a damaged statistics file: the page says so, the cards say which
        return Overview(headings, (), store_paths(ts.store.root)(" ".join(str(exc).split())))
    types = vm.leaf_types(ts)
    rows = []
    for column, r in zip(columns, raw):
        s = vm.decode_row(r, types.get(column))
        n, nulls = s.get("row_count"), s.get("null_count")
        share = fmt_share(nulls / n) if n and nulls is not None else "—"
        cells = tuple(_cell(s, key, is_count) for key, _, is_count in OVERVIEW_STATISTICS)
        rows.append(OverviewRow(column, display_name(column), str(s.get("type") or types.get(column) or "?"), share, cells))
    return Overview(headings, tuple(rows), total=total)
