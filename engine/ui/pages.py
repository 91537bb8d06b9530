"""The web app's HTML pages: the table list, a table's page, a column's card (the fragment a
lazy card loads) and a zoomed histogram."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import HTMLResponse, Response
from starlette.routing import Route

from engine.ui import params, render
from engine.ui import viewmodel as vm
from engine.ui.states import States


def routes(states: States, store: str) -> list[Route]:
    """``/``, ``/table/{table}``, ``/table/{table}/card``, ``/table/{table}/histogram``."""

    def tables(request: Request) -> Response:
        return HTMLResponse(render.tables_page(vm.table_summaries(states.store), store))

    def table(request: Request) -> Response:
        _, page = params.page_of(states, request)
        return HTMLResponse(render.table_page(page))

    def card(request: Request) -> Response:
        _, c = params.card_of(states, request)
        return HTMLResponse(render.card(c))

    def histogram(request: Request) -> Response:
        return HTMLResponse(render.histogram(params.histogram_of(states, request)))

    return [
        Route("/", tables),
        Route("/table/{table}", table),
        Route("/table/{table}/card", card),
        Route("/table/{table}/histogram", histogram),
    ]
