"""The web app's HTML pages: the table list, a table's page (its overview first, then its
cards), a column's own page, its card (the fragment a lazy card loads), a zoomed histogram,
the history of a table or a column, and the diff of two states."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from engine.disclosure import store_label
from engine.exceptions import InvalidArgumentError
from engine.review.diff import resolve_sides
from engine.ui import diffview, overview, params, render, trends
from engine.ui import viewmodel as vm
from engine.ui.states import States


def routes(states: States, store: str) -> list[Route]:
    """``/``, ``/table/{table}`` and its ``column``, ``card``, ``histogram``, ``history``, ``diff``, ``overview``; ``/favicon.ico``."""

    def tables(request: Request) -> Response:
        return HTMLResponse(render.tables_page(vm.table_summaries(states.store), store_label(store)))

    def table(request: Request) -> Response:
        ts, page = params.page_of(states, request)
        matched = vm.search(vm.column_names(ts), page.query)
        return HTMLResponse(render.table_page(page, overview=overview.overview(ts, matched, page.partition, overview.EAGER_ROWS)))

    def overview_rows(request: Request) -> Response:
        """The overview's rows from ``offset`` on (what the table page's script appends)."""
        ts = params.state_of(states, request)
        q = request.query_params
        partition = params.partition_param(q)
        vm.check_partition(ts, partition)
        offset = params.int_param(q, "offset", 0, 0) or 0
        matched = vm.search(vm.column_names(ts), q.get("q", ""))
        return HTMLResponse(render.overview_rows(overview.overview(ts, matched[offset:], partition), ts.table, partition, ts.at_transaction))

    def column(request: Request) -> Response:
        ts, c = params.card_of(states, request)
        return HTMLResponse(render.column_page(c, ts.at_transaction))

    def card(request: Request) -> Response:
        if request.headers.get("sec-fetch-dest") == "document":  # opened in a tab: the column's page, styled
            q = request.query_params
            at = params.int_param(q, "at", None, 1)
            return RedirectResponse(render.column_url(request.path_params["table"], q.get("column", ""), q.get("partition") or None, at), 303)
        _, c = params.card_of(states, request)
        return HTMLResponse(render.card(c))

    def histogram(request: Request) -> Response:
        return HTMLResponse(render.histogram(params.histogram_of(states, request)))

    def history(request: Request) -> Response:
        ts = states.get(request.path_params["table"])
        q = request.query_params
        name = vm.check_column(ts, q["column"]) if q.get("column") else None
        h = trends.history(lambda txn: states.get(ts.table, txn), ts.table, states.history(ts.table), name, vm.column_names(ts))
        return HTMLResponse(render.history_page(h))

    def diff(request: Request) -> Response:
        ts = states.get(request.path_params["table"])
        q = request.query_params
        a_txn, b_txn = params.int_param(q, "from", None, 1), params.int_param(q, "to", None, 1)
        fp, tp = q.get("from_partition") or None, q.get("to_partition") or None
        a_txn, b_txn = resolve_sides(store, ts.table, a_txn, b_txn, fp, tp)
        a = states.get(ts.table, a_txn) if a_txn is not None else ts
        b = states.get(ts.table, b_txn) if b_txn is not None else ts
        if a_txn is not None and a_txn == b_txn and fp == tp:
            raise InvalidArgumentError(f"choose two different states (both are transaction {a_txn})")
        view = diffview.diff_view(a, b, fp, tp, tuple(states.history(ts.table)))
        return HTMLResponse(render.diff_page(view))

    def favicon(request: Request) -> Response:
        return Response(render.FAVICON_SVG, media_type="image/svg+xml")

    return [
        Route("/", tables),
        Route("/favicon.ico", favicon),
        Route("/table/{table}", table),
        Route("/table/{table}/column", column),
        Route("/table/{table}/card", card),
        Route("/table/{table}/histogram", histogram),
        Route("/table/{table}/history", history),
        Route("/table/{table}/diff", diff),
        Route("/table/{table}/overview", overview_rows),
    ]
