"""The notebook view of ``TableStatistics`` (``card``, ``preview``, ``_repr_html_``): the app's
cards (viewmodel.py) drawn in Jupyter. engine.api registers it (``engine.lookup.use_notebook_view``):
the lookups import no UI. The view model loads when a card is first drawn, not with engine.api.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from engine.lookup import TableStatistics

if TYPE_CHECKING:  # loaded when first drawn (engine.api imports this module: start-up, #20)
    from engine.ui.viewmodel import ColumnCard, TablePage


class CardsView:
    """``engine.lookup.NotebookView`` with the app's cards."""

    def card(self, ts: TableStatistics, column: str, partition: str | None, bars: int, top: int) -> ColumnCard:
        from engine.ui import viewmodel

        return viewmodel.column_card(ts, column, partition, bars, top)

    def preview(self, ts: TableStatistics, columns: Sequence[str] | None, partition: str | None, bars: int, top: int, max_columns: int) -> TablePage:
        from engine.ui import viewmodel

        page = viewmodel.table_page(ts, partition=partition, page_size=max_columns, bars=bars, top=top, cards=columns is None)
        if columns is not None:
            columns = [viewmodel.check_column(ts, name) for name in columns]  # stored names
            page = replace(page, columns=tuple(columns), cards=tuple(viewmodel.column_cards(ts, list(columns), partition, bars, top)))
        return page


NOTEBOOK = CardsView()
