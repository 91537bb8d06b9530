"""The web app's JSON endpoints (``/api/...``): the view values as they are (``viewmodel.to_json``).

No answer names where the store is: its label (engine.disclosure.store_label) at most."""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from engine.columns import display_name, display_path
from engine.disclosure import store_label
from engine.ui import params
from engine.ui import viewmodel as vm
from engine.ui.states import States


def routes(states: States, store: str) -> list[Route]:
    """``/api/tables``, ``/api/tables/{table}`` and its ``columns``, ``card``, ``histogram``, ``history``; ``/healthz``."""

    def api_tables(request: Request) -> Response:
        return JSONResponse({"store": store_label(store), "tables": [vm.to_json(t) for t in vm.table_summaries(states.store)]})

    def api_table(request: Request) -> Response:
        ts = params.state_of(states, request)
        doc = vm.to_json(vm.summary_of(ts))
        doc.update(
            at=ts.at_transaction,
            committed_at=ts.state.catalog.committed_at if ts.state.catalog is not None else None,
            partition_list=[{"key": p.key, "rows": p.rows} for p in ts.partitions()],
            column_list=[{"name": display_name(c["name"]), "path": display_path(c["name"]), "type": c["type"]} for c in ts.state.columns],
        )
        return JSONResponse(doc)

    def api_columns(request: Request) -> Response:
        _, page = params.page_of(states, request, cards=False)
        types = {c["name"]: c["type"] for c in states.get(page.table, page.at).state.columns}
        return JSONResponse(
            {
                "table": page.table, "query": page.query, "page": page.page, "pages": page.pages, "page_size": page.page_size,
                "matched": page.matched, "total_columns": page.total_columns,
                "columns": [{"name": display_name(c), "path": display_path(c), "type": types.get(c)} for c in page.columns],
            }
        )  # fmt: skip

    def api_card(request: Request) -> Response:
        _, c = params.card_of(states, request)
        return JSONResponse(vm.to_json(c))

    def api_histogram(request: Request) -> Response:
        return JSONResponse(vm.to_json(params.histogram_of(states, request).histogram))

    def api_history(request: Request) -> Response:
        table_name = request.path_params["table"]
        states.get(table_name)  # unknown table: 404
        return JSONResponse({"table": table_name, "transactions": [vm.to_json(t) for t in states.history(table_name)]})

    def health(request: Request) -> Response:
        return JSONResponse({"status": "ok"})  # where the store is: the operator's console, not clients

    return [
        Route("/api/tables", api_tables),
        Route("/api/tables/{table}", api_table),
        Route("/api/tables/{table}/columns", api_columns),
        Route("/api/tables/{table}/card", api_card),
        Route("/api/tables/{table}/histogram", api_histogram),
        Route("/api/tables/{table}/history", api_history),
        Route("/healthz", health),
    ]
