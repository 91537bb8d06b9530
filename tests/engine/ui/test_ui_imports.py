"""The UI's modules import in one direction (scripts/import_cycles.py: every import statement,
function-level and TYPE_CHECKING ones too): render reads the view model, the view model knows no
HTML, and the notebook's self-drawing values live in drawn.py."""

from __future__ import annotations

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
_spec = importlib.util.spec_from_file_location("import_cycles", REPO / "scripts" / "import_cycles.py")
assert _spec is not None and _spec.loader is not None
import_cycles = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(import_cycles)


def test_no_import_cycle_runs_through_engine_ui() -> None:
    graph = import_cycles.import_graph(["engine"], REPO)
    ui = [c for c in import_cycles.cycles(graph) if any(m.startswith("engine.ui") for m in c)]
    assert ui == []
    assert "engine.ui.render" not in graph["engine.ui.viewmodel"] and "engine.ui.viewmodel" in graph["engine.ui.render"]


def test_a_card_and_a_page_of_the_view_model_draw_themselves_through_drawn() -> None:
    from engine.ui import drawn, render, viewmodel

    card = viewmodel.ColumnCard("t", "x", "int64", None, None, None, (), (), None, None, (), "")
    shown = drawn.card(card)
    assert isinstance(shown, viewmodel.ColumnCard) and shown == drawn.DrawnCard(**vars(card))
    assert shown._repr_html_() == render.notebook_card(card) and 'data-column="x"' in shown._repr_html_()
    assert not hasattr(card, "_repr_html_")
