"""The ``metastore ui`` web app: pages and JSON endpoints over a store, read-only.

Starlette routes, served by uvicorn; every endpoint is a plain function run in
Starlette's thread pool (the lookups block on file reads). Nothing is computed:
the pages show the published statistics through the lookups (engine/ui/viewmodel.py).

Safety, in one ASGI middleware (``Guard``) in front of everything:

- bound to loopback (the default), requests must name a loopback host in their
  ``Host`` header (a web page elsewhere cannot reach the app by rebinding its DNS name);
- bound elsewhere, bearer tokens are required, configured as for the Flight
  server (``--token``, ``--token-file``, ``METASTORE_FLIGHT_TOKEN``; the same
  checks: engine/tokens.py). A browser passes its token once as
  ``?token=...``: the app answers with an HttpOnly, SameSite=Strict cookie and
  the same URL without the token;
- a malformed ``Host`` header is a 400; the token login redirects only within the origin;
- slow and hostile clients are bounded by the serving protocol (engine/ui/serving.py:
  header timeout, connection cap, 431 for oversized heads, rate-limited logs);
- every response carries a Content-Security-Policy allowing only the app's own
  script and styles, ``nosniff``, no framing and no referrer.

Routes (docs/UI.md): ``/``, ``/table/{table}``, ``/table/{table}/card``,
``/table/{table}/histogram`` (HTML); ``/api/tables``, ``/api/tables/{table}``,
``/api/tables/{table}/columns``, ``/api/tables/{table}/card``,
``/api/tables/{table}/histogram``, ``/api/tables/{table}/history`` (JSON).
"""

from __future__ import annotations

import ipaddress
import logging
import re
import socket
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from starlette.applications import Starlette
from starlette.datastructures import Headers, QueryParams
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from engine import fileio, names
from engine.columns import display_name, display_path
from engine.exceptions import (
    InvalidArgumentError,
    MetastoreError,
    StatisticsNotFoundError,
)
from engine.store import CURRENT, Store
from engine.ui import render, serving
from engine.ui import viewmodel as vm

if TYPE_CHECKING:
    from engine.lookup import TableStatistics

log = logging.getLogger(__name__)

TOKEN_COOKIE = "metastore_token"
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
)
SECURITY_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"no-referrer"),
    (b"cache-control", b"no-store"),
]
MAX_PAGE_SIZE = 200
MAX_TOP = 1000


# ============================================================== published states
class States:
    """Opened table states: the current one re-checked against the table's ``CURRENT`` change
    signal at most once per ``poll_s`` (a new analyze shows on the next request after it),
    pinned ones (``at``) kept in a small LRU; catalog histories per current transaction."""

    def __init__(self, store: Store, poll_s: float = 1.0, pinned: int = 32) -> None:
        self.store = store
        self.poll_s = poll_s
        self._pinned_max = pinned
        self._current: dict[str, tuple[Any, bytes | None, float]] = {}
        self._pinned: OrderedDict[tuple[str, int], Any] = OrderedDict()
        self._history: dict[str, tuple[int | None, list[vm.Transaction]]] = {}
        self._lock = threading.Lock()

    def _signal(self, table: str) -> bytes | None:
        try:
            return fileio.read_bytes(fileio.join(self.store.table_uri(table), CURRENT))
        except (FileNotFoundError, OSError):
            return None

    def get(self, table: str, at: int | None = None) -> TableStatistics:
        from engine.lookup import TableStatistics

        check_table_name(table)
        if at is not None:
            with self._lock:
                hit = self._pinned.get((table, at))
                if hit is not None:
                    self._pinned.move_to_end((table, at))
                    return hit
            ts = TableStatistics(self.store, table, at_transaction=at)
            with self._lock:
                self._pinned[(table, at)] = ts
                while len(self._pinned) > self._pinned_max:
                    self._pinned.popitem(last=False)
            return ts
        now = time.monotonic()
        with self._lock:
            hit = self._current.get(table)
        if hit is not None and now - hit[2] < self.poll_s:
            return hit[0]
        signal = self._signal(table)
        if hit is not None and signal == hit[1] and signal is not None:
            with self._lock:
                self._current[table] = (hit[0], signal, now)
            return hit[0]
        ts = TableStatistics(self.store, table)
        with self._lock:
            self._current[table] = (ts, signal, now)
        return ts

    def history(self, table: str) -> list[vm.Transaction]:
        head = self.get(table).txn_id
        with self._lock:
            hit = self._history.get(table)
        if hit is not None and hit[0] == head:
            return hit[1]
        txns = vm.history(self.store.root, table)
        with self._lock:
            self._history[table] = (head, txns)
        return txns


def check_table_name(table: str) -> None:
    """A table name is one directory name of the store (no path can leave the store): else a 404."""
    problem = names.table_name_problem(table)
    if problem is not None:
        raise StatisticsNotFoundError(f"no table {names.shown(table)}: {problem}")


# ============================================================== request parameters
def _int(params: QueryParams, name: str, default: int | None = None, low: int | None = None, high: int | None = None) -> int | None:
    text = params.get(name)
    if text is None or text == "":
        return default
    try:
        value = int(text)
    except ValueError:
        raise InvalidArgumentError(f"{name} must be a whole number, not {text!r}") from None
    if low is not None and value < low:
        raise InvalidArgumentError(f"{name} must be >= {low}, not {value}")
    if high is not None and value > high:
        raise InvalidArgumentError(f"{name} must be <= {high}, not {value}")
    return value


def _bars(params: QueryParams) -> int:
    return _int(params, "bars", vm.DEFAULT_BARS, 1, 1000) or vm.DEFAULT_BARS


def _partition(params: QueryParams) -> str | None:
    value = params.get("partition")
    return value if value else None


def _column(ts: TableStatistics, params: QueryParams) -> str:
    column = params.get("column")
    if column is None:
        raise InvalidArgumentError("give the column: ?column=NAME")
    return vm.check_column(ts, column)  # the stored name


def _value_range(ts: TableStatistics, column: str, params: QueryParams) -> tuple[Any, Any] | None:
    """``lo`` / ``hi`` in the column's text form (docs/VALUE_FORMS.md), decoded to its type."""
    from engine import values

    lo, hi = params.get("lo") or None, params.get("hi") or None
    if lo is None and hi is None:
        return None
    t = vm.leaf_types(ts)[column]
    out = []
    for name, text in (("lo", lo), ("hi", hi)):
        if text is None:
            out.append(None)
            continue
        try:
            out.append(values.decode_scalar(text.strip(), t))  # a scalar: as_py() fails on ns and far dates
        except InvalidArgumentError as exc:
            raise InvalidArgumentError(f"{name}={text!r} is not a value of column {column!r} ({t}): {exc}") from None
    return out[0], out[1]


# ============================================================== the app
def create_app(store: str, authenticator: Any = None, loopback_only: bool = True, poll_s: float = 1.0) -> Starlette:
    """The app over ``store``; ``authenticator``: an engine.tokens.TokenAuthenticator (None: no tokens);
    ``loopback_only``: refuse requests whose Host header is not a loopback name."""
    states = States(Store(store), poll_s)

    def page_of(request: Request, cards: bool = True) -> tuple[TableStatistics, vm.TablePage]:
        q = request.query_params
        ts = states.get(request.path_params["table"], _int(q, "at", None, 1))
        page = vm.table_page(
            ts,
            partition=_partition(q),
            query=q.get("q", ""),
            page=_int(q, "page", 1, 1) or 1,
            page_size=_int(q, "page_size", vm.PAGE_SIZE, 1, MAX_PAGE_SIZE) or vm.PAGE_SIZE,
            bars=_bars(q),
            top=_int(q, "top", vm.TOP_K, 0, MAX_TOP) or 0,
            transactions=states.history(ts.table) if request.url.path.startswith("/table/") and cards else (),
            cards=cards,
            eager=vm.EAGER_CARDS,
        )
        return ts, page

    def card_of(request: Request) -> tuple[TableStatistics, vm.ColumnCard]:
        q = request.query_params
        ts = states.get(request.path_params["table"], _int(q, "at", None, 1))
        column = _column(ts, q)
        return ts, vm.column_card(ts, column, _partition(q), _bars(q), _int(q, "top", vm.TOP_K, 0, MAX_TOP) or 0)

    def histogram_of(request: Request) -> vm.ColumnCard:
        """A card whose histogram is zoomed to ``start``/``stop`` (bins) or ``lo``/``hi`` (values)."""
        q = request.query_params
        ts = states.get(request.path_params["table"], _int(q, "at", None, 1))
        column = _column(ts, q)
        partition = _partition(q)
        vm.check_partition(ts, partition)
        start, stop = _int(q, "start", None, 0), _int(q, "stop", None, 0)
        bins = None
        if start is not None or stop is not None:
            bins = (start or 0, stop if stop is not None else 1 << 62)
        if not ts.statistics([column], statistics=["histogram_bins"]).to_pylist()[0]["histogram_bins"]:
            raise StatisticsNotFoundError(f"column {column!r} of table {ts.table!r} has no histogram (only numeric and temporal columns do)")
        h = vm.histogram(ts, column, partition, _bars(q), bins=bins, value_range=_value_range(ts, column, q))
        card = vm.ColumnCard(ts.table, column, str(vm.leaf_types(ts).get(column)), partition, None, None, (), (), h, None, (), "")
        return card

    # ---------------------------------------------------------------- HTML
    def tables(request: Request) -> Response:
        return HTMLResponse(render.tables_page(vm.table_summaries(states.store), store))

    def table(request: Request) -> Response:
        _, page = page_of(request)
        return HTMLResponse(render.table_page(page))

    def card(request: Request) -> Response:
        _, c = card_of(request)
        return HTMLResponse(render.card(c))

    def histogram(request: Request) -> Response:
        return HTMLResponse(render.histogram(histogram_of(request)))

    # ---------------------------------------------------------------- JSON
    def api_tables(request: Request) -> Response:
        return JSONResponse({"store": store, "tables": [vm.to_json(t) for t in vm.table_summaries(states.store)]})

    def api_table(request: Request) -> Response:
        q = request.query_params
        ts = states.get(request.path_params["table"], _int(q, "at", None, 1))
        doc = vm.to_json(vm.summary_of(ts))
        doc.update(
            at=ts.at_transaction,
            committed_at=ts.state.catalog.committed_at if ts.state.catalog is not None else None,
            partition_list=[{"key": p.key, "rows": p.rows} for p in ts.partitions()],
            column_list=[{"name": display_name(c["name"]), "path": display_path(c["name"]), "type": c["type"]} for c in ts.state.columns],
        )
        return JSONResponse(doc)

    def api_columns(request: Request) -> Response:
        _, page = page_of(request, cards=False)
        types = {c["name"]: c["type"] for c in states.get(page.table, page.at).state.columns}
        return JSONResponse(
            {
                "table": page.table, "query": page.query, "page": page.page, "pages": page.pages, "page_size": page.page_size,
                "matched": page.matched, "total_columns": page.total_columns,
                "columns": [{"name": display_name(c), "path": display_path(c), "type": types.get(c)} for c in page.columns],
            }
        )  # fmt: skip

    def api_card(request: Request) -> Response:
        _, c = card_of(request)
        return JSONResponse(vm.to_json(c))

    def api_histogram(request: Request) -> Response:
        return JSONResponse(vm.to_json(histogram_of(request).histogram))

    def api_history(request: Request) -> Response:
        table_name = request.path_params["table"]
        states.get(table_name)  # unknown table: 404
        return JSONResponse({"table": table_name, "transactions": [vm.to_json(t) for t in states.history(table_name)]})

    def health(request: Request) -> Response:
        return JSONResponse({"status": "ok", "store": store})

    routes = [
        Route("/", tables),
        Route("/table/{table}", table),
        Route("/table/{table}/card", card),
        Route("/table/{table}/histogram", histogram),
        Route("/api/tables", api_tables),
        Route("/api/tables/{table}", api_table),
        Route("/api/tables/{table}/columns", api_columns),
        Route("/api/tables/{table}/card", api_card),
        Route("/api/tables/{table}/histogram", api_histogram),
        Route("/api/tables/{table}/history", api_history),
        Route("/healthz", health),
        Mount("/static", app=StaticFiles(packages=[("engine.ui", "static")]), name="static"),
    ]

    def on_error(request: Request, exc: Exception) -> Response:
        if isinstance(exc, StatisticsNotFoundError):
            status, title = 404, "Not found"
        elif isinstance(exc, InvalidArgumentError):
            status, title = 400, "Bad request"
        elif isinstance(exc, HTTPException):
            status, title = exc.status_code, "Not found" if exc.status_code == 404 else "Error"
        else:  # a bug or an I/O failure: its text may name store paths, which stay in the log
            if isinstance(exc, OSError):  # handled here; any other exception uvicorn logs (re-raised after this answer)
                log.error("%s %s failed", request.method, request.url.path, exc_info=exc)
            status, title = 500, "Error"
            exc = MetastoreError("internal error (the server's log has the details)")
        message = " ".join(str(exc.detail if isinstance(exc, HTTPException) else exc).split())
        if isinstance(exc, HTTPException) and exc.status_code == 404:
            message = f"no page {request.url.path!r} (see / for the tables)"
        if request.url.path.startswith("/api/"):
            return JSONResponse({"error": message, "status": status}, status_code=status)
        return HTMLResponse(render.error_page(status, title, message), status_code=status)

    handlers: dict[Any, Callable[..., Any]] = {MetastoreError: on_error, HTTPException: on_error, FileNotFoundError: on_error, Exception: on_error}
    app = Starlette(routes=routes, exception_handlers=handlers)
    return Guard(app, authenticator, loopback_only)  # type: ignore[return-value]


# ============================================================== safety
def is_loopback(host: str) -> bool:
    host = host.strip("[]")
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


#: a Host header (RFC 9110 uri-host [":" port]): a DNS name or IPv4 address, or an IPv6 address in brackets
HOST_HEADER = re.compile(r"(?:(?P<name>[A-Za-z0-9](?:[A-Za-z0-9.-]{0,252}[A-Za-z0-9.])?)|\[(?P<ip6>[0-9A-Fa-f:.]{2,45})\])(?::[0-9]{1,5})?")


def _host_of(header: str) -> str | None:
    """The host a Host header names; None when it is not a host and optional port (``a:1@b``, spaces, ...)."""
    match = HOST_HEADER.fullmatch(header)
    if match is None:
        return None
    return match.group("name") or match.group("ip6")


def same_origin_target(raw_path: bytes, query: str) -> str:
    """A redirect target on this origin: the request's path (as sent, percent-encoded) with its
    leading slashes and backslashes collapsed to one slash (``//evil.example`` and ``/\\evil``
    are other hosts to a browser), anything outside a path's characters percent-encoded."""
    path = quote(raw_path.decode("latin-1"), safe="/%:@!$&'()*+,;=-._~")
    return "/" + path.lstrip("/") + ("?" + query if query else "")


class Guard:
    """Loopback Host check, bearer tokens, security headers (see the module docstring)."""

    def __init__(self, app: Any, authenticator: Any = None, loopback_only: bool = True) -> None:
        self.app = app
        self.authenticator = authenticator
        self.loopback_only = loopback_only

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_secured(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message.setdefault("headers", [])
                message["headers"] = list(message["headers"]) + SECURITY_HEADERS
            await send(message)

        headers = Headers(scope=scope)
        api = scope.get("path", "").startswith("/api/")
        host = _host_of(headers.get("host", ""))
        if host is None and headers.get("host") is not None:
            await self._refuse(400, f"malformed Host header {headers.get('host', '')!r}", api)(scope, receive, send_secured)
            return
        if self.loopback_only and not is_loopback(host or ""):
            await self._refuse(400, f"this app answers only to loopback host names, not {headers.get('host', '')!r}", api)(
                scope, receive, send_secured
            )
            return
        if self.authenticator is not None:
            refusal = self._authenticate(scope, headers, api)
            if refusal is not None:
                await refusal(scope, receive, send_secured)
                return
        await self.app(scope, receive, send_secured)

    def _authenticate(self, scope: dict[str, Any], headers: Headers, api: bool) -> Response | None:
        from pyarrow import flight

        query = QueryParams(scope.get("query_string", b""))
        token = query.get("token")
        if token is not None:
            try:
                self.authenticator.check([f"Bearer {token}"])
            except flight.FlightUnauthenticatedError as exc:
                return self._refuse(401, str(exc), api)
            rest = [(k, v) for k, v in query.multi_items() if k != "token"]
            target = same_origin_target(scope.get("raw_path") or scope["path"].encode(), str(QueryParams(rest)) if rest else "")
            response = RedirectResponse(target, status_code=303)
            response.set_cookie(TOKEN_COOKIE, token, httponly=True, samesite="strict", path="/")
            return response
        value = headers.get("authorization")
        if value is None:
            cookie = _cookie(headers.get("cookie", ""), TOKEN_COOKIE)
            value = f"Bearer {cookie}" if cookie else None
        try:
            self.authenticator.check([value] if value else None)
        except flight.FlightUnauthenticatedError as exc:
            return self._refuse(401, str(exc), api)
        return None

    @staticmethod
    def _refuse(status: int, message: str, api: bool) -> Response:
        extra = {"www-authenticate": "Bearer"} if status == 401 else None
        if api:
            return JSONResponse({"error": message, "status": status}, status_code=status, headers=extra)
        title = "Authentication required" if status == 401 else "Bad request"
        hint = " (open the app once as /?token=YOUR_TOKEN, or send 'Authorization: Bearer YOUR_TOKEN')" if status == 401 else ""
        return HTMLResponse(render.error_page(status, title, message + hint), status_code=status, headers=extra)


def _cookie(header: str, name: str) -> str | None:
    for part in header.split(";"):
        key, _, value = part.strip().partition("=")
        if key == name and value:
            return value
    return None


# ============================================================== serving
class UiServer:
    """The app served by uvicorn on a socket bound here (port 0: a free port), in this thread
    (``run``) or a background thread (``start`` / ``stop``, for tests and benchmarks)."""

    def __init__(self, store: str, host: str = "127.0.0.1", port: int = 0, authenticator: Any = None, limits: serving.Limits | None = None) -> None:
        import uvicorn

        self.host = host
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            self.sock.bind((host, port))
            self.sock.listen(serving.BACKLOG)  # connections wait in the backlog until uvicorn runs
        except OSError as exc:
            self.sock.close()
            raise MetastoreError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
        self.port = self.sock.getsockname()[1]
        app = create_app(store, authenticator, loopback_only=is_loopback(host))
        self.limits = (limits or serving.Limits()).capped(serving.fd_soft_limit())
        serving.limit_logs()
        config = uvicorn.Config(
            app, log_level="warning", access_log=False, lifespan="off", http=serving.protocol_for(self.limits),
            timeout_keep_alive=self.limits.keep_alive_s, backlog=serving.BACKLOG, h11_max_incomplete_event_size=self.limits.max_head_bytes,
        )  # fmt: skip
        self.server = uvicorn.Server(config)
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/"

    def run(self) -> None:
        self.server.run(sockets=[self.sock])

    def start(self, timeout: float = 30.0) -> str:
        self._thread = threading.Thread(target=self.run, name="metastore-ui", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise MetastoreError("the UI server did not start")
            time.sleep(0.02)
        return self.url

    def stop(self) -> None:
        self.server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=10)
        self.sock.close()


def authenticator_for(host: str, tokens: list[str], token_file: str | None, no_auth: bool) -> Any:
    """The token check ``metastore ui`` needs: none on loopback unless tokens are given; elsewhere
    tokens are required (as ``metastore serve``) unless ``no_auth``."""
    from engine import config
    from engine.tokens import Token, TokenAuthenticator, TokenConfigError

    TOKEN_ENV = config.FLIGHT_TOKEN.name
    env = config.get(config.FLIGHT_TOKEN)
    secrets = list(tokens) + ([env] if env and not tokens else [])
    if not secrets and token_file is None:
        if is_loopback(host) or no_auth:
            return None
        raise InvalidArgumentError(
            f"--host {host} is not a loopback address: give --token or --token-file (or {TOKEN_ENV}), as for metastore serve, "
            f"or --no-auth to serve without tokens"
        )
    try:
        return TokenAuthenticator([Token.of(t) for t in secrets], token_file)
    except TokenConfigError as exc:
        raise InvalidArgumentError(str(exc)) from None


def serve(store: str, host: str, port: int, tokens: list[str], token_file: str | None, no_auth: bool, echo: Callable[[str], None] = print) -> None:
    """``metastore ui``: serve until Ctrl-C."""
    authenticator = authenticator_for(host, tokens, token_file, no_auth)
    serving.raise_fd_limit()
    server = UiServer(store, host, port, authenticator)
    n = len(Store(store).tables())
    echo(f"Metastore UI: {n} table{'s' if n != 1 else ''} of {store} on {server.url} (tokens {'on' if authenticator else 'off'}); Ctrl-C stops")
    if authenticator is not None and not is_loopback(host):
        echo("warning: tokens travel in clear text over http; open the app once as /?token=YOUR_TOKEN in a browser")
    try:
        server.run()
    except KeyboardInterrupt:  # uvicorn re-raises the Ctrl-C it handled once it has shut down
        pass
    echo("Metastore UI stopped")
