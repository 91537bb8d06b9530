"""Batches of HINCRBY as raw RESP2 pipelines: encoded in numpy/Arrow, sent on a bare socket.

Why not a server-side script: a Lua script pays the Lua-to-Redis conversion of
every argument and reply on Redis's one thread (~2.4 us of server CPU a field
in the job), and redis-py builds one Python object per argument (~75,000
fields/s). Redis applies a pipelined ``HINCRBY`` it parsed itself in ~1.1 us
(existing field) to ~1.7 us (new field). So a batch is encoded in bulk here (a
fixed-width record per value for numbers, ``binary_join_element_wise`` for
strings: ~0.1-0.2 us a field) and sent as one blob.

Idempotency without a script: a batch is one ``MULTI ... EXEC`` that also
records, in the task's own progress hash, how many batches of its stream are
applied; a ``WATCH`` on that key taken before reading it makes the check and
the transaction one atomic step. A retried task (Ray reruns it after its
worker died) finds its earlier batches counted and skips them; a batch is never
half applied (a connection lost before ``EXEC`` discards the queued commands).

Replies are checked without parsing every one: the ``+QUEUED`` replies are
compared as one byte string, the integer replies of ``EXEC`` scanned for an
error line.
"""

from __future__ import annotations

import socket
import ssl
import time
import urllib.parse
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TypeAlias, cast

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from engine import types as mt
from engine.exceptions import MetastoreError, ServiceError
from engine.frequencies import keys

CRLF = b"\r\n"
_QUEUED = b"+QUEUED\r\n"
_POW10 = 10 ** np.arange(1, 19, dtype=np.int64)


class RespError(MetastoreError):
    """Redis answered a batch with an error (out of memory, wrong key type...)."""


#: a parsed reply: a status text, an integer, a bulk string, an error, an array of replies, or null
Reply: TypeAlias = "str | int | bytes | RespError | list[Reply] | None"


# ============================================================== encoding (pure)
def command(*args: bytes | str | int) -> bytes:
    """One command in RESP (for the few small commands around a batch)."""
    out = [b"*%d\r\n" % len(args)]
    for a in args:
        b = a if isinstance(a, bytes) else str(a).encode()
        out.append(b"$%d\r\n%s\r\n" % (len(b), b))
    return b"".join(out)


def _digits(counts: np.ndarray) -> np.ndarray:
    """The number of decimal digits of each positive count."""
    return np.searchsorted(_POW10, counts, side="right") + 1


def _fixed_records(head: bytes, fields: np.ndarray, counts: np.ndarray) -> bytes:
    """HINCRBY records for fixed-width fields (an (n, width) uint8 array): one 2-D array per digit count."""
    n, width = fields.shape
    head_arr = np.frombuffer(head + b"$%d\r\n" % width, np.uint8)
    h = len(head_arr)
    lengths = _digits(counts)
    parts = []
    groups = np.unique(lengths)
    for d in groups:
        sel = None if len(groups) == 1 else np.flatnonzero(lengths == d)
        c = counts if sel is None else counts[sel]
        f = fields if sel is None else fields[sel]
        tail = np.frombuffer(b"\r\n$%d\r\n" % d, np.uint8)
        rec = np.empty((len(c), h + width + len(tail) + int(d) + 2), np.uint8)
        rec[:, :h] = head_arr
        rec[:, h : h + width] = f
        o = h + width
        rec[:, o : o + len(tail)] = tail
        o += len(tail)
        for j in range(int(d)):
            rec[:, o + j] = (c // 10 ** (int(d) - 1 - j)) % 10 + 48
        rec[:, -2] = 13
        rec[:, -1] = 10
        parts.append(rec.reshape(-1))
    return b"".join(p.tobytes() for p in parts)


def _variable_records(head: bytes, values: pa.Array, counts: np.ndarray) -> bytes:
    """HINCRBY records for strings and binaries, concatenated element-wise by Arrow."""
    binary = values.cast(pa.large_binary()) if values.type != pa.large_binary() else values
    flen = pc.cast(pc.binary_length(binary), pa.string()).cast(pa.large_binary())
    d = pa.array(counts, pa.int64()).cast(pa.string()).cast(pa.large_binary())
    dlen = pc.cast(pc.binary_length(d), pa.string()).cast(pa.large_binary())

    def s(b: bytes) -> pa.Scalar:
        return pa.scalar(b, pa.large_binary())

    out = pc.binary_join_element_wise(s(head + b"$"), flen, s(CRLF), binary, s(b"\r\n$"), dlen, s(CRLF), d, s(CRLF), s(b""))
    offs = np.frombuffer(out.buffers()[1], np.int64)[out.offset : out.offset + len(out) + 1]
    return out.buffers()[2].to_pybytes()[int(offs[0]) : int(offs[-1])]


def hincrby_records(hash_key: str, values: pa.Array, counts: np.ndarray) -> bytes:
    """``HINCRBY hash_key <value> <count>`` for every value, as one RESP blob.

    Fields are the values' storage encoding (:mod:`.keys`); counts must be
    positive. Order within the blob is not the values' order (increments commute).
    """
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks()
    counts = np.asarray(counts, np.int64)
    if len(values) != len(counts):
        raise ValueError("one count per value")
    if len(values) == 0:
        return b""
    if int(counts.min()) < 1:
        raise ValueError("counts must be positive")
    kb = hash_key.encode()
    head = b"*4\r\n$7\r\nHINCRBY\r\n$%d\r\n%s\r\n" % (len(kb), kb)
    width = keys.field_width(values.type)
    if width:
        enc = keys.encode(values)
        return _fixed_records(head, np.frombuffer(enc.data, np.uint8).reshape(-1, width), counts)
    t = values.type
    if mt.is_offset_string(t):
        values = values.cast(pa.large_binary())
    return _variable_records(head, values, counts)


# ============================================================== the connection (edge)
@dataclass(frozen=True)
class Address:
    host: str = "127.0.0.1"
    port: int = 6379
    path: str = ""  # unix socket
    tls: bool = False
    username: str | None = None
    password: str | None = None
    db: int = 0
    #: the URL's ssl_* query parameters (redis-py's names): ssl_ca_certs, ssl_cert_reqs,
    #: ssl_certfile, ssl_keyfile, ssl_check_hostname
    tls_options: tuple[tuple[str, str], ...] = ()

    @classmethod
    def from_url(cls, url: str) -> Address:
        u = urllib.parse.urlsplit(url)
        user = urllib.parse.unquote(u.username) if u.username else None
        password = urllib.parse.unquote(u.password) if u.password else None
        query = urllib.parse.parse_qs(u.query)
        if u.scheme == "unix":
            return cls(path=u.path, username=user, password=password, db=int(query.get("db", ["0"])[0]))
        if u.scheme not in ("redis", "rediss"):
            raise ServiceError(f"unsupported Redis URL scheme {u.scheme!r} in {url!r} (redis://, rediss:// or unix://)")
        db = int(u.path.strip("/") or query.get("db", ["0"])[0])
        tls = tuple(sorted((k, v[0]) for k, v in query.items() if k.startswith("ssl_") and v))
        return cls(u.hostname or "127.0.0.1", u.port or 6379, "", u.scheme == "rediss", user, password, db, tls)

    def tls_context(self) -> ssl.SSLContext:
        """The TLS context redis-py would build from the same URL (so both connections of a task agree)."""
        o = dict(self.tls_options)
        context = ssl.create_default_context(cafile=o.get("ssl_ca_certs"))
        reqs = o.get("ssl_cert_reqs", "required").lower()
        if o.get("ssl_check_hostname", "true").lower() in ("false", "0", "no") or reqs in ("none", "optional"):
            context.check_hostname = False
        context.verify_mode = {"none": ssl.CERT_NONE, "optional": ssl.CERT_OPTIONAL}.get(reqs, ssl.CERT_REQUIRED)
        if "ssl_certfile" in o:
            context.load_cert_chain(o["ssl_certfile"], o.get("ssl_keyfile"))
        return context


class RespPipe:
    """One connection for pre-encoded pipelines; reconnects (with backoff) on a lost connection."""

    def __init__(self, url: str, timeout_s: float = 120.0, attempts: int = 8) -> None:
        self.address = Address.from_url(url)
        self.timeout_s = timeout_s
        self.attempts = attempts
        self._sock: socket.socket | None = None
        self._buf = bytearray()

    # ---------------------------------------------------------- connection
    def _connect(self) -> None:
        a = self.address
        if a.path:
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.settimeout(5)
            sock.connect(a.path)
        else:
            sock = socket.create_connection((a.host, a.port), timeout=5)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if a.tls:
                sock = a.tls_context().wrap_socket(sock, server_hostname=a.host)
        sock.settimeout(self.timeout_s)
        self._sock, self._buf = sock, bytearray()
        if a.password is not None:
            self.call(*(("AUTH", a.username, a.password) if a.username else ("AUTH", a.password)))
        if a.db:
            self.call("SELECT", a.db)

    def close(self) -> None:
        if self._sock is not None:
            try:
                self._sock.close()
            finally:
                self._sock = None

    def __enter__(self) -> RespPipe:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _send(self, blob: bytes) -> None:
        if self._sock is None:
            self._connect()
        assert self._sock is not None
        self._sock.sendall(blob)

    def _fill(self) -> None:
        assert self._sock is not None
        chunk = self._sock.recv(1 << 20)
        if not chunk:
            raise ConnectionError("Redis closed the connection")
        self._buf += chunk

    # ---------------------------------------------------------- replies
    def _line(self) -> bytes:
        while True:
            i = self._buf.find(CRLF)
            if i >= 0:
                line = bytes(self._buf[:i])
                del self._buf[: i + 2]
                return line
            self._fill()

    def _reply(self) -> Reply:
        """One reply, parsed (for small replies; errors are returned as RespError, not raised)."""
        line = self._line()
        kind, rest = line[:1], line[1:]
        if kind == b"+":
            return rest.decode()
        if kind == b"-":
            return RespError(rest.decode(errors="replace"))
        if kind == b":":
            return int(rest)
        if kind == b"$":
            n = int(rest)
            if n < 0:
                return None
            while len(self._buf) < n + 2:
                self._fill()
            data = bytes(self._buf[:n])
            del self._buf[: n + 2]
            return data
        if kind == b"*":
            n = int(rest)
            return None if n < 0 else [self._reply() for _ in range(n)]
        raise ConnectionError(f"unexpected reply from Redis: {line[:80]!r}")

    def _lines(self, count: int) -> bytes:
        """The raw bytes of the next ``count`` reply lines (lines holding no binary data)."""
        if count <= 0:
            return b""
        found = scanned = 0
        while True:  # count newlines as data arrives, each byte scanned once
            found += self._buf.count(b"\n", scanned)
            scanned = len(self._buf)
            if found >= count:
                break
            self._fill()
        end = self._buf.rfind(b"\n")
        for _ in range(found - count):  # lines of a later reply that came along (rare)
            end = self._buf.rfind(b"\n", 0, end)
        raw = bytes(self._buf[: end + 1])
        del self._buf[: end + 1]
        return raw

    def call(self, *args: bytes | str | int) -> Reply:
        """One small command; raises its error."""
        self._send(command(*args))
        r = self._reply()
        if isinstance(r, RespError):
            raise r
        return r

    # ---------------------------------------------------------- batches
    def apply_once(self, progress_key: str, stream: str, batch: int, records: bytes, n: int) -> bool:
        """Apply batch ``batch`` of ``stream`` (``n`` pre-encoded commands) exactly once;
        False when it was applied before (a retry). See :meth:`apply_stream`."""
        return self.apply_stream(progress_key, stream, [(records, n)], first=batch) == 1

    def apply_stream(
        self,
        progress_key: str,
        stream: str,
        batches: Iterable[tuple[bytes, int]],
        first: int = 0,
        on_batch: Callable[[], None] | None = None,
    ) -> int:
        """Apply a stream's batches ((records, commands) pairs, numbered from ``first``)
        in order, each exactly once; returns how many this call applied.

        The progress hash holds how many batches of the stream are done. Each
        batch's transaction is preceded by a ``WATCH`` of it and a read of it
        (skip a batch already counted; the ``WATCH`` aborts the ``EXEC`` if an
        earlier attempt's transaction lands in between, and the batch is looked
        at again). That check travels with the previous batch's transaction: one
        round trip a batch, and the iterator encodes the next batch while Redis
        applies the current one. A progress record behind the batch means Redis
        lost its state (a restart): the batch is applied all the same, and the
        stage's epoch check (redis_ops) reruns the stage. A lost connection is
        reopened (with backoff) and the batch in flight looked at again: its
        transaction landed whole or not at all.
        """
        check = command("WATCH", progress_key) + command("HGET", progress_key, stream)
        applied = 0
        known: int | None = None  # progress read under the WATCH active now
        pending: tuple[int, bytes, int] | None = None  # sent: its transaction, then the next check
        failures = 0
        delay = 0.05
        todo: list[tuple[int, bytes, int]] = []
        it = iter(batches)
        b = first
        while True:
            if not todo:
                nxt = next(it, None)  # the next batch is encoded here, while Redis applies `pending`
                if nxt is None:
                    if pending is None:
                        break
                else:
                    todo.append((b, nxt[0], nxt[1]))
                    b += 1
            try:
                if pending is not None:
                    pb, prec, pn = pending
                    landed = self._transaction(pn)
                    known = self._check()
                    pending = None
                    if landed:
                        applied += 1
                        if on_batch is not None:
                            on_batch()
                    else:  # aborted by the WATCH: look at it again before the batch after it
                        todo.append((pb, prec, pn))
                    continue
                if not todo:
                    continue
                batch, records, n = todo[-1]
                if known is None:
                    self._send(check)
                    known = self._check()
                if batch < known:  # applied before; the WATCH stays on, `known` stays true
                    todo.pop()
                    continue
                self._send(b"".join((command("MULTI"), records, command("HSET", progress_key, stream, batch + 1), command("EXEC"), check)))
                todo.pop()
                pending, known = (batch, records, n), None
                failures, delay = 0, 0.05
            except (ConnectionError, OSError) as exc:
                self.close()
                failures += 1
                if failures >= self.attempts:
                    raise ServiceError(f"lost the connection to Redis at {self._where()} {self.attempts} times: {exc}") from exc
                if pending is not None:  # landed or not: the progress will tell
                    todo.append(pending)
                    pending = None
                known = None
                time.sleep(delay)
                delay = min(1.0, delay * 2)
        if self._sock is not None:
            try:
                self.call("UNWATCH")
            except (ConnectionError, OSError):
                self.close()
        return applied

    def _where(self) -> str:
        a = self.address
        return a.path or f"{a.host}:{a.port}"

    def _check(self) -> int:
        """The replies of WATCH and HGET: the stream's progress."""
        watched, done = self._reply(), self._reply()
        for r in (watched, done):
            if isinstance(r, RespError):
                raise r
        return int(cast("bytes | None", done) or 0)  # HGET's answer: a bulk string, or null

    def _transaction(self, n: int) -> bool:
        """The replies of MULTI, n + 1 queued commands and EXEC: True if it ran, False if the WATCH aborted it."""
        queued = self._lines(n + 3)  # +OK, n + 1 times +QUEUED, then EXEC's header
        body_end = queued.rfind(CRLF, 0, len(queued) - 2) + 2  # where the last line (EXEC's) starts
        header = queued[body_end:-2]
        if queued[:body_end] != b"+OK\r\n" + _QUEUED * (n + 1):
            errors = [ln for ln in queued[:body_end].split(CRLF) if ln.startswith(b"-")]
            if header.startswith(b"*") and header != b"*-1":  # not aborted: drain the results first
                self._lines(int(header[1:]))
            self._check()  # the check sent after it
            raise RespError(f"Redis refused a batch of {n} increments: {errors[0].decode(errors='replace') if errors else queued[:200]!r}")
        if header == b"*-1":
            return False
        if header.startswith(b"-"):
            self._check()
            raise RespError(f"Redis aborted a batch of {n} increments: {header.decode(errors='replace')}")
        results = self._lines(int(header[1:]))
        if b"\n-" in results or results.startswith(b"-"):
            bad = next(ln for ln in results.split(CRLF) if ln.startswith(b"-"))
            self._check()
            raise RespError(f"Redis failed an increment in a batch of {n}: {bad.decode(errors='replace')}")
        return True
