"""The web app's safety layer (one ASGI middleware, ``Guard``, in front of every route).

- bound to loopback (the default), requests must name a loopback host in their
  ``Host`` header (a web page elsewhere cannot reach the app by rebinding its DNS name);
- bound elsewhere, bearer tokens are required, configured as for the Flight
  server (engine/tokens.py). A browser passes its token once as ``?token=...``:
  the app answers with an HttpOnly, SameSite=Strict cookie and the same URL without the token;
- a malformed ``Host`` header is a 400; the token login redirects only within the origin;
- every response carries a Content-Security-Policy allowing only the app's own
  script and styles, ``nosniff``, no framing and no referrer.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import MutableMapping
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

from starlette.datastructures import Headers, QueryParams
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response

from engine.ui import render

if TYPE_CHECKING:  # loaded by authenticator_for only when tokens are configured
    from starlette.types import ASGIApp, Receive, Scope, Send

    from engine.tokens import TokenAuthenticator

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

    def __init__(self, app: ASGIApp, authenticator: TokenAuthenticator | None = None, loopback_only: bool = True) -> None:
        self.app = app
        self.authenticator = authenticator
        self.loopback_only = loopback_only

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_secured(message: MutableMapping[str, Any]) -> None:
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
            refusal = self._authenticate(self.authenticator, scope, headers, api)
            if refusal is not None:
                await refusal(scope, receive, send_secured)
                return
        await self.app(scope, receive, send_secured)

    def _authenticate(self, authenticator: TokenAuthenticator, scope: Scope, headers: Headers, api: bool) -> Response | None:
        from pyarrow import flight

        query = QueryParams(scope.get("query_string", b""))
        token = query.get("token")
        if token is not None:
            try:
                authenticator.check([f"Bearer {token}"])
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
            authenticator.check([value] if value else None)
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
