"""The ``metastore ui`` web app: pages and JSON endpoints over a store, read-only.

Starlette routes, served by uvicorn; every endpoint is a plain function run in
Starlette's thread pool (the lookups block on file reads). Nothing is computed:
the pages show the published statistics through the lookups (engine/ui/viewmodel.py).

The routes by concept: HTML pages (engine/ui/pages.py), JSON endpoints (engine/ui/api.py),
over the opened states (engine/ui/states.py) and the request parameters (engine/ui/params.py).
Safety, in one ASGI middleware (``Guard``, engine/ui/guard.py) in front of everything:
loopback Host names, bearer tokens off loopback, security headers; slow and hostile clients
are bounded by the serving protocol (engine/ui/serving.py).

Routes: docs/UI.md.
"""

from __future__ import annotations

import functools
import logging
import socket
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import BaseRoute, Mount
from starlette.staticfiles import StaticFiles

from engine import config
from engine.disclosure import store_paths
from engine.exceptions import (
    InvalidArgumentError,
    MetastoreError,
    StatisticsNotFoundError,
)
from engine.store import Store
from engine.ui import api, pages, render, serving
from engine.ui.guard import Guard, is_loopback
from engine.ui.states import States

if TYPE_CHECKING:  # loaded by authenticator_for only when tokens are configured
    from engine.tokens import TokenAuthenticator

log = logging.getLogger(__name__)


# ============================================================== the app
def create_app(store: str, authenticator: TokenAuthenticator | None = None, loopback_only: bool = True, poll_s: float = 1.0) -> Starlette:
    """The app over ``store``; ``authenticator``: an engine.tokens.TokenAuthenticator (None: no tokens);
    ``loopback_only``: refuse requests whose Host header is not a loopback name."""
    states = States(Store(store), poll_s)
    routes: list[BaseRoute] = [
        *pages.routes(states, store),
        *api.routes(states, store),
        Mount("/static", app=StaticFiles(packages=[("engine.ui", "static")]), name="static"),
    ]
    handler = functools.partial(on_error, public=store_paths(store))
    handlers: dict[Any, Callable[..., Any]] = {MetastoreError: handler, HTTPException: handler, FileNotFoundError: handler, Exception: handler}
    app = Starlette(routes=routes, exception_handlers=handlers)
    return Guard(app, authenticator, loopback_only)  # type: ignore[return-value]  # the ASGI guard wraps the Starlette app and is served in its place


def on_error(request: Request, exc: Exception, public: Callable[[str], str] = str) -> Response:
    """Every failure as a page (or, under ``/api/``, JSON) with its status: 404, 400 or 500; its
    message through ``public`` (the app's: without the store's location)."""
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
    message = public(" ".join(str(exc.detail if isinstance(exc, HTTPException) else exc).split()))
    if isinstance(exc, HTTPException) and exc.status_code == 404:
        message = f"no page {request.url.path!r} (see / for the tables)"
    if request.url.path.startswith("/api/"):
        return JSONResponse({"error": message, "status": status}, status_code=status)
    return HTMLResponse(render.error_page(status, title, message), status_code=status)


# ============================================================== serving
class UiServer:
    """The app served by uvicorn on a socket bound here (port 0: a free port), in this thread
    (``run``) or a background thread (``start`` / ``stop``, for tests and benchmarks)."""

    def __init__(
        self,
        store: str,
        host: str = "127.0.0.1",
        port: int = 0,
        authenticator: TokenAuthenticator | None = None,
        limits: serving.Limits | None = None,
    ) -> None:
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


def authenticator_for(host: str, tokens: list[str], token_file: str | None, no_auth: bool) -> TokenAuthenticator | None:
    """The token check ``metastore ui`` needs: none on loopback unless tokens are given; elsewhere
    tokens are required (as ``metastore serve``) unless ``no_auth``."""
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
