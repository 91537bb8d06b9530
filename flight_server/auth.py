"""Bearer-token authentication and call tracking, as one Flight server middleware.

The tokens and their check are engine/tokens.py (shared with the UI app); this module
authenticates every Flight call with them (``MetastoreMiddlewareFactory``) and counts calls
(``CallTracker``).
"""

from __future__ import annotations

import threading
from typing import Any

import pyarrow.flight as flight

from engine.tokens import Token, TokenAuthenticator, TokenConfigError, parse_token_file
from flight_server.threadstate import keep_thread_state

__all__ = [
    "MIDDLEWARE_KEY",
    "SHUTTING_DOWN",
    "CallTracker",
    "MetastoreMiddlewareFactory",
    "Token",
    "TokenAuthenticator",
    "TokenConfigError",
    "parse_token_file",
]

MIDDLEWARE_KEY = "metastore"


class CallTracker:
    """Counts calls (for health and graceful shutdown) and refuses calls while closing.

    The server's handlers count themselves (``enter`` / ``leave``, and streams produced by a
    generator until they end), not a middleware: a middleware instance would cost every call
    one more trip into Python (``call_completed``), measurably under load.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.in_flight = 0
        self.calls = 0
        self.errors = 0
        self.rejected = 0
        self.closing = False
        self._idle = threading.Condition(self._lock)

    def enter(self, call: bool = True) -> None:
        """One more call in flight (``call`` False: a stream of a call already counted)."""
        with self._lock:
            self.in_flight += 1
            if call:
                self.calls += 1

    def leave(self, failed: bool) -> None:
        with self._lock:
            self.in_flight -= 1
            if failed:
                self.errors += 1
            if self.closing and self.in_flight == 0:
                self._idle.notify_all()

    def reject(self) -> None:
        with self._lock:
            self.rejected += 1

    def close(self) -> None:
        with self._lock:
            self.closing = True

    def wait_idle(self, timeout: float | None = None) -> bool:
        with self._lock:
            return self._idle.wait_for(lambda: self.in_flight == 0, timeout)


SHUTTING_DOWN = "server is shutting down"


class MetastoreMiddlewareFactory(flight.ServerMiddlewareFactory):
    """Authenticates every call and refuses calls while the server closes.

    It returns no middleware instance (so pyarrow makes no ``call_completed`` call back
    into Python): counting calls is the handlers' job (:class:`CallTracker`).
    """

    def __init__(self, tracker: CallTracker, authenticator: TokenAuthenticator | None = None) -> None:
        super().__init__()
        self.tracker = tracker
        self.authenticator = authenticator

    def start_call(self, info: flight.CallInfo, headers: dict[str, Any]) -> None:
        keep_thread_state()  # the handler then runs on the same thread without a new thread state
        if self.tracker.closing:
            self.tracker.reject()
            raise flight.FlightUnavailableError(SHUTTING_DOWN)
        if self.authenticator is not None:
            try:
                self.authenticator.check(headers.get("authorization"))
            except flight.FlightUnauthenticatedError:
                self.tracker.reject()
                raise
        return None
