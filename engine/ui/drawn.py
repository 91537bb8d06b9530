"""The notebook's cards and pages: the view model's values (engine/ui/viewmodel.py) that draw
themselves in Jupyter (``_repr_html_``) with the shared templates (engine/ui/render.py). Kept apart
from the view model, which knows no HTML (render reads the view model, never the other way)."""

from __future__ import annotations

from dataclasses import dataclass, fields

from engine.ui import render
from engine.ui.viewmodel import ColumnCard, TablePage


@dataclass(frozen=True)
class DrawnCard(ColumnCard):
    """A column's card that Jupyter draws."""

    def _repr_html_(self) -> str:
        return render.notebook_card(self)


@dataclass(frozen=True)
class DrawnPage(TablePage):
    """A table's page that Jupyter draws (its cards too, one by one)."""

    def _repr_html_(self) -> str:
        return render.notebook_page(self)


def card(c: ColumnCard) -> DrawnCard:
    return DrawnCard(**{f.name: getattr(c, f.name) for f in fields(ColumnCard)})


def page(p: TablePage) -> DrawnPage:
    values = {f.name: getattr(p, f.name) for f in fields(TablePage)}
    values["cards"] = tuple(card(c) for c in p.cards)
    return DrawnPage(**values)
