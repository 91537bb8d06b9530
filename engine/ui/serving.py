"""How ``metastore ui`` holds up against slow and hostile clients (docs/UI.md, "Limits").

uvicorn's HTTP/1.1 protocol (h11) with four additions, as a protocol class per server:

- a **header timeout**: a connection must send a whole request head within
  ``Limits.header_timeout_s`` of connecting (or of its previous response); otherwise it is
  answered 408 and closed (a client sending one byte now and then cannot hold it open);
- a **connection cap**: at ``Limits.max_connections`` open connections a new one evicts the
  oldest connection that is not in a request (waiting for its head, or idle between
  requests); when every connection is in a request, the new one is answered 503 and closed.
  The file descriptors in use stay bounded, so a flood never takes the process to its limit
  (where accepting fails and nothing answers); ``raise_fd_limit`` lifts the soft limit to
  the hard one at start, and the cap stays below the soft limit;
- a **request head limit**: a head (request line and headers) over ``Limits.max_head_bytes``
  is answered 431 and the connection closed gracefully (our side shut for writing, the
  rest of the request read and dropped for a moment), so the client reads the answer
  instead of a connection reset;
- **log rate limiting** (``RateLimit``): a message repeated (a flood's errors) is logged at
  most ``burst`` times a minute; the next one says how many were dropped.
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger(__name__)

#: the listen backlog, also how many connections asyncio accepts in one go (before any is capped)
BACKLOG = 128
#: file descriptors kept free of connections. Beyond the cap, three accept batches hold
#: descriptors at once: asyncio accepts a batch in one loop turn, makes its transports in the
#: next, calls ``connection_made`` (which evicts) in the third, and an evicted socket closes
#: a turn later; while one batch's victims wait to close, two more batches arrive. Then 128
#: for the process itself (the log, the event loop, store reads). Measured: a flood of 3,000
#: connections against 1,024 files peaked at 264 over the cap on an idle machine.
FD_RESERVE = 3 * BACKLOG + 128


@dataclass(frozen=True)
class Limits:
    header_timeout_s: float = 10.0  # a request head must arrive within this
    max_connections: int = 1000  # open connections at most (lowered below the fd soft limit)
    max_head_bytes: int = 16 * 1024  # request line and headers; larger: 431
    keep_alive_s: int = 5  # an idle keep-alive connection is closed after this
    drain_s: float = 2.0  # after a 431, the rest of the request is read and dropped this long
    drain_bytes: int = 1 << 20  # ... or up to this much

    def capped(self, fd_soft_limit: int) -> Limits:
        """These limits with the connection cap below ``fd_soft_limit`` (minus a reserve)."""
        room = max(16, fd_soft_limit - FD_RESERVE)
        return Limits(self.header_timeout_s, min(self.max_connections, room), self.max_head_bytes, self.keep_alive_s, self.drain_s, self.drain_bytes)


def raise_fd_limit() -> int:
    """Lift this process's soft limit of open files to its hard limit; the soft limit now."""
    try:
        import resource
    except ImportError:  # not POSIX
        return 1 << 16
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 16)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    return soft if soft != resource.RLIM_INFINITY else 1 << 16


# ============================================================== log rate limiting
class RateLimit(logging.Filter):
    """At most ``burst`` records of one message (logger, level, format string) per ``window_s``;
    the first record let through after some were dropped says how many."""

    def __init__(self, burst: int = 5, window_s: float = 60.0, clock: Callable[[], float] = time.monotonic) -> None:
        super().__init__()
        self.burst = burst
        self.window_s = window_s
        self.clock = clock
        self._seen: dict[tuple[str, int, str], list[float]] = {}  # key -> [window start, count, dropped]
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        key = (record.name, record.levelno, str(record.msg))
        now = self.clock()
        with self._lock:
            if len(self._seen) > 1000:
                self._seen.clear()
            state = self._seen.setdefault(key, [now, 0, 0])
            if now - state[0] >= self.window_s:
                state[0], state[1] = now, 0
            state[1] += 1
            if state[1] > self.burst:
                state[2] += 1
                return False
            dropped, state[2] = int(state[2]), 0
        if dropped:
            record.msg = f"{record.msg} ({dropped} more like it dropped)"
        return True


LIMITED_LOGGERS = ("asyncio", "uvicorn.error", "uvicorn.access", "engine.ui.app")


def limit_logs(burst: int = 5, window_s: float = 60.0) -> RateLimit:
    """Rate-limit the loggers a flood of connections writes to (once per process)."""
    for name in LIMITED_LOGGERS:
        logger = logging.getLogger(name)
        for existing in logger.filters:
            if isinstance(existing, RateLimit):
                return existing
    limit = RateLimit(burst, window_s)
    for name in LIMITED_LOGGERS:
        logging.getLogger(name).addFilter(limit)
    return limit


# ============================================================== the protocol
class Waiting:
    """The connections of one server that are not in a request, oldest first (eviction order)."""

    def __init__(self) -> None:
        self.order: OrderedDict[GuardedH11, None] = OrderedDict()

    def add(self, conn: GuardedH11) -> None:
        self.order[conn] = None
        self.order.move_to_end(conn)

    def discard(self, conn: GuardedH11) -> None:
        self.order.pop(conn, None)

    def oldest(self) -> GuardedH11 | None:
        return next(iter(self.order), None)


REQUEST_TIMEOUT = b"HTTP/1.1 408 Request Timeout\r\ncontent-type: text/plain\r\ncontent-length: 16\r\nconnection: close\r\n\r\nrequest timeout\n"
#: where a request head ends (h11's own rule: a blank line, with or without its CR)
HEAD_END = re.compile(b"\n\r?\n")
UNAVAILABLE = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: text/plain\r\ncontent-length: 28\r\nconnection: close\r\n\r\ntoo many connections, retry\n"
)


def protocol_for(limits: Limits) -> type[asyncio.Protocol]:
    """The HTTP protocol class of one server under ``limits`` (its connections share one ``Waiting``)."""
    waiting = Waiting()

    class Protocol(GuardedH11):
        pass

    Protocol.limits = limits
    Protocol.waiting = waiting
    return Protocol


class GuardedH11(H11Protocol):
    """uvicorn's h11 protocol with the header timeout, the connection cap and graceful 431s."""

    limits: Limits = Limits()
    waiting: Waiting = Waiting()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_timer: asyncio.TimerHandle | None = None
        self._draining = 0  # > 0: bytes dropped after a 431 (the request is not read any more)

    # ---------------------------------------------------------------- connections
    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]  # uvicorn's protocol takes asyncio's BaseTransport; it hands us a Transport
        if len(self.connections) >= self.limits.max_connections and not self._evict():
            transport.write(UNAVAILABLE)
            transport.close()
            self.transport = transport
            return
        super().connection_made(transport)
        self._await_head()

    def _evict(self) -> bool:
        """Close the oldest connection not in a request; False if there is none."""
        victim = self.waiting.oldest()
        if victim is None:
            return False
        victim._close()
        return True

    def _close(self) -> None:
        self._end_wait()
        self.connections.discard(self)  # counted out now: the transport closes on the next loop turn
        if self.transport is not None and not self.transport.is_closing():
            self.transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self._end_wait()
        if self.flow is None:  # refused in connection_made: uvicorn never saw it
            return
        super().connection_lost(exc)

    # ---------------------------------------------------------------- request heads
    def _await_head(self) -> None:
        """Between requests: evictable, and the next head must arrive within the timeout."""
        self.waiting.add(self)
        if self._head_timer is None:
            self._head_timer = self.loop.call_later(self.limits.header_timeout_s, self._head_timed_out)

    def _end_wait(self) -> None:
        self.waiting.discard(self)
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _head_timed_out(self) -> None:
        self._head_timer = None
        if self.transport.is_closing() or self.conn.their_state is not h11.IDLE:
            return
        if self.conn.our_state is h11.IDLE:
            self.transport.write(REQUEST_TIMEOUT)
        self._close()

    def data_received(self, data: bytes) -> None:
        if self._draining:
            self._draining += len(data)
            if self._draining > self.limits.drain_bytes:
                self.transport.close()
            return
        if self.conn.their_state is h11.IDLE:
            if self._head_timer is None:
                self._await_head()  # the first bytes of a keep-alive connection's next request
            if self._head_too_large(data):
                self._end_wait()
                self._answer_and_close(431, f"request head over {self.limits.max_head_bytes} bytes (a URL or headers too long)")
                return
        super().data_received(data)
        if self.conn.their_state is not h11.IDLE:
            self._end_wait()  # a whole head arrived (or the request failed)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
            self.waiting.add(self)  # idle keep-alive: evictable (uvicorn's keep-alive timeout closes it)

    # ---------------------------------------------------------------- bad requests
    def _head_too_large(self, data: bytes) -> bool:
        """Whether the request head being received (h11's buffer, then ``data``) ends beyond the limit.

        h11's own limit applies only while a head is incomplete: a large head that arrives
        in one read would pass it."""
        pending = self.conn.trailing_data[0] + data
        end = HEAD_END.search(pending, 0, self.limits.max_head_bytes + 3)
        return end is None and len(pending) > self.limits.max_head_bytes

    def send_400_response(self, msg: str) -> None:
        """A request h11 refuses: 431 when its head is too large, else 400; then a graceful close."""
        self._end_wait()
        if len(self.conn.trailing_data[0]) > self.limits.max_head_bytes:
            self._answer_and_close(431, f"request head over {self.limits.max_head_bytes} bytes (a URL or headers too long)")
        else:
            self._answer_and_close(400, msg)

    def _answer_and_close(self, status: int, msg: str) -> None:
        """Answer ``status`` with ``msg``, shut our side, read and drop the rest of the request for
        a moment (closing with unread data would reset the connection before the client reads)."""
        body = (msg + "\n").encode("ascii", "replace")
        reason = "Request Header Fields Too Large" if status == 431 else "Bad Request"
        head = f"HTTP/1.1 {status} {reason}\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: {len(body)}\r\nconnection: close\r\n\r\n"
        self.transport.write(head.encode("ascii") + body)  # raw: h11 has no request to answer (or has failed on it)
        if self.transport.can_write_eof():
            self.transport.write_eof()  # the answer, then our side shut: the client reads it
            self._draining = 1
            self.loop.call_later(self.limits.drain_s, self.transport.close)
        else:
            self.transport.close()


def fd_soft_limit() -> int:
    """This process's soft limit of open files (65,536 where there is none)."""
    try:
        import resource
    except ImportError:
        return 1 << 16
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    return soft if soft != resource.RLIM_INFINITY else 1 << 16
