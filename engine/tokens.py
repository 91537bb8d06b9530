"""Bearer tokens: the configured tokens and the check of an ``authorization`` header, shared by
the Flight server (flight_server/auth.py) and the UI app (engine/ui/app.py).

Clients send ``authorization: Bearer <token>`` on every call. Tokens are
configured on the server (``--token``, ``--token-file``), each optionally with an
expiry time; a token past its expiry is refused as expired. Every refusal is a
``FlightUnauthenticatedError`` (gRPC UNAUTHENTICATED) with a one-line reason:
no token, malformed header, unknown token, expired token. Tokens are compared
by their SHA-256 digests in constant time and never logged.

Token file: one token per line, optionally followed by whitespace and an expiry
(ISO 8601; a time without zone is UTC); ``#`` starts a comment::

    # planner fleet, rotated monthly
    9f2c...e1   2026-12-31T23:59:59Z
    0a7d...44

The file is re-read when it changes (checked at most once a second), so tokens can
be rotated without a restart; replace it atomically (write another file, rename it
over). A token file that disappears, cannot be read or does not parse refuses every
call until it is fixed (fail closed), and the server logs why.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from enum import Enum
from pathlib import Path
from typing import Any

import pyarrow.flight as flight

log = logging.getLogger("metastore.flight")

MAX_TOKEN_CHARS = 4096


class TokenConfigError(ValueError):
    """A token or token file that cannot be used."""


@dataclass(frozen=True)
class Token:
    digest: bytes  # sha256 of the token
    expires_at: float | None = None  # POSIX seconds; None: never
    name: str = ""  # a label for logs: the first characters of the digest

    @staticmethod
    def of(secret: str, expires_at: datetime | float | None = None) -> Token:
        _check_token_text(secret, "a configured token")
        if isinstance(expires_at, datetime):
            if expires_at.tzinfo is None:
                expires_at = expires_at.replace(tzinfo=UTC)
            expires_at = expires_at.timestamp()
        digest = _digest(secret)
        return Token(digest=digest, expires_at=expires_at, name=digest.hex()[:8])


def _digest(secret: str) -> bytes:
    return hashlib.sha256(secret.encode("utf-8")).digest()


def _check_token_text(secret: str, what: str) -> None:
    if not secret:
        raise TokenConfigError(f"{what} is empty")
    if len(secret) > MAX_TOKEN_CHARS:
        raise TokenConfigError(f"{what} is longer than {MAX_TOKEN_CHARS} characters")
    # printable ASCII without spaces: 0x21..0x7E
    if not (secret.isascii() and secret.isprintable()) or " " in secret:
        raise TokenConfigError(f"{what} must be printable ASCII without spaces")


def parse_expiry(text: str) -> float:
    try:
        when = datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise TokenConfigError(f"bad token expiry {text!r}: expected ISO 8601, e.g. 2026-12-31T23:59:59Z") from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return when.timestamp()


def parse_token_file(text: str, source: str = "token file") -> list[Token]:
    tokens = []
    for number, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        fields = line.split(None, 1)
        try:
            expires = parse_expiry(fields[1]) if len(fields) > 1 else None
            tokens.append(Token.of(fields[0], expires))
        except TokenConfigError as exc:
            raise TokenConfigError(f"{source} line {number}: {exc}") from None
    return tokens


class TokenFileState(str, Enum):
    OK = "ok"
    MISSING = "missing"
    UNREADABLE = "unreadable"
    INVALID = "invalid"


@dataclass(frozen=True)
class TokenFileStatus:
    """What the last read of the token file found. Anything but OK refuses every call."""

    state: TokenFileState
    tokens: tuple[Token, ...] = ()
    problem: str | None = None  # one line, without the file's path (health shows it)
    signature: tuple[int, int, int] | None = None  # (mtime_ns, size, inode) of the file read
    since: float = 0.0  # POSIX time this state began

    def as_dict(self) -> dict[str, Any]:
        return {"state": self.state.value, "tokens": len(self.tokens), "problem": self.problem, "since": self.since}


#: What a client is told while the token file is unusable (the reason is in the server's log).
TOKEN_FILE_UNUSABLE = "the server's token file is unusable: every call is refused until its operator fixes it"


class TokenAuthenticator:
    """The configured tokens (static ones and a reloadable token file); ``check`` a header value.

    The token file is re-read when it changes (checked at most once a second). A file
    that disappears, cannot be read or does not parse fails closed: every call is
    refused (static tokens too), and the reason is logged, until a good file is back.
    Keeping the last good tokens instead would keep a revoked token valid.
    """

    def __init__(
        self, tokens: list[Token] | None = None, token_file: str | os.PathLike[str] | None = None, clock: Callable[[], float] = time.time
    ) -> None:
        self._static = list(tokens or [])
        self._file = Path(token_file) if token_file is not None else None
        self._status = TokenFileStatus(TokenFileState.OK, since=time.time())
        self._checked = 0.0
        self._lock = threading.Lock()
        #: header value -> (its token, the token file's status it was verified against): a valid
        #: value seen before skips the parse and the digest; bounded (only valid values enter)
        self._verified: dict[object, tuple[Token, TokenFileStatus]] = {}
        self.clock = clock
        if self._file is not None:
            self._reload()
            if self._status.state is not TokenFileState.OK:
                raise TokenConfigError(f"token file {self._file}: {self._status.problem}")
        if not self._static and self._file is None:
            raise TokenConfigError("no tokens configured")

    @property
    def has_file(self) -> bool:
        return self._file is not None

    def file_status(self) -> TokenFileStatus:
        """The token file's state, re-read first if it may have changed."""
        self._maybe_reload()
        return self._status

    @property
    def tokens(self) -> list[Token]:
        """The valid tokens; FlightUnauthenticatedError while the token file is unusable."""
        return self._static + list(self._usable_status().tokens)

    def _usable_status(self) -> TokenFileStatus:
        """The token file's current status (reloaded when due); FlightUnauthenticatedError while
        it is unusable."""
        self._maybe_reload()
        status = self._status
        if status.state is not TokenFileState.OK:
            raise flight.FlightUnauthenticatedError(TOKEN_FILE_UNUSABLE)
        return status

    def _maybe_reload(self) -> None:
        if self._file is not None and time.monotonic() - self._checked > 1.0:
            self._reload()

    def _reload(self) -> None:
        with self._lock:
            self._checked = time.monotonic()
            old = self._status
            new = self._read(old)
            if new is old:
                return
            self._status = new
        if new.state is TokenFileState.OK:
            log.info("token file %s: %d token(s) loaded", self._file, len(new.tokens))
        elif (new.state, new.problem) != (old.state, old.problem):
            log.error("token file %s is %s (%s): refusing every call until it is fixed", self._file, new.state.value, new.problem)

    def _read(self, old: TokenFileStatus) -> TokenFileStatus:
        """The file's status now (``old`` itself when the file is unchanged)."""
        path = self._file
        assert path is not None
        now = time.time()
        try:
            st = path.stat()
        except FileNotFoundError:
            return TokenFileStatus(TokenFileState.MISSING, problem="the file does not exist", since=now)
        except OSError as exc:
            return TokenFileStatus(TokenFileState.UNREADABLE, problem=f"cannot stat it: {exc.strerror or exc}", since=now)
        signature = (st.st_mtime_ns, st.st_size, st.st_ino)
        if signature == old.signature and old.state is TokenFileState.OK:
            return old
        try:
            text = path.read_bytes().decode("utf-8")
        except UnicodeDecodeError:
            return TokenFileStatus(TokenFileState.INVALID, problem="not UTF-8 text", signature=signature, since=now)
        except OSError as exc:
            return TokenFileStatus(TokenFileState.UNREADABLE, problem=f"cannot read it: {exc.strerror or exc}", since=now)
        try:
            tokens = parse_token_file(text, "")
        except TokenConfigError as exc:
            return TokenFileStatus(TokenFileState.INVALID, problem=str(exc).strip(), signature=signature, since=now)
        return TokenFileStatus(TokenFileState.OK, tuple(tokens), signature=signature, since=now)

    def check(self, header_values: object) -> Token:
        """The token an ``authorization`` header carries, or FlightUnauthenticatedError.

        A header value verified before answers from ``_verified`` while the token file's status
        is the one it was verified against (any reload that changes the file replaces the status,
        so a revoked token is refused at once) and its token has not expired (checked at each
        call); anything else goes through the full check."""
        if type(header_values) is list and len(header_values) == 1 and type(header_values[0]) in (str, bytes):
            hit = self._verified.get(header_values[0])
            if hit is not None:
                self._maybe_reload()
                token, status = hit
                if status is self._status and (token.expires_at is None or self.clock() < token.expires_at):
                    return token
        return self._check(header_values)

    def _check(self, header_values: object) -> Token:
        if not header_values:
            raise flight.FlightUnauthenticatedError("authentication required: send 'authorization: Bearer <token>'")
        if not isinstance(header_values, (list, tuple)) or len(header_values) != 1:
            raise flight.FlightUnauthenticatedError("malformed authorization header: send exactly one 'Bearer <token>'")
        value = header_values[0]
        if isinstance(value, bytes):
            try:
                value = value.decode("ascii")
            except UnicodeDecodeError:
                raise flight.FlightUnauthenticatedError("malformed authorization header: not ASCII") from None
        scheme, _, secret = str(value).strip().partition(" ")
        secret = secret.strip()
        if scheme.lower() != "bearer" or not secret or " " in secret:
            raise flight.FlightUnauthenticatedError("malformed authorization header: expected 'Bearer <token>'")
        try:
            _check_token_text(secret, "the token")
        except TokenConfigError as exc:
            raise flight.FlightUnauthenticatedError(f"malformed token: {exc}") from None
        digest = _digest(secret)
        status = self._usable_status()
        match = None
        for token in self._static + list(status.tokens):
            if hmac.compare_digest(token.digest, digest):
                match = token
        if match is None:
            raise flight.FlightUnauthenticatedError("invalid token")
        if match.expires_at is not None and self.clock() >= match.expires_at:
            raise flight.FlightUnauthenticatedError("token expired")
        original = header_values[0]
        if type(original) in (str, bytes):
            if len(self._verified) >= 1024:  # spellings of valid tokens only; a bound all the same
                self._verified = {}
            self._verified[original] = (match, status)
        return match
