"""Start and stop a private ``redis-server``; check that a given Redis answers.

Metastore keeps its shared state in Redis. Unless the caller points it at an
existing server (``--redis URL``, else the ``REDIS_URL`` environment variable),
it runs its own ``redis-server`` process:

- bound to 127.0.0.1 on a free port, with ``--protected-mode yes``; or, when the
  job's tasks run on other nodes of a Ray cluster, bound to this node's cluster
  address with a generated password (``--requirepass``): a server other
  machines can reach must not answer clients that do not know the password;
- no persistence (``--save "" --appendonly no``), working directory in a
  fresh temporary directory that :meth:`RedisServer.stop` removes;
- in the foreground (``--daemonize no``) so it is our child process and we can
  terminate it;
- with a memory ceiling (``--maxmemory``) and ``noeviction``: a full store
  answers writes with an error instead of silently dropping statistics.

Typical use::

    with RedisServer() as server:
        client = redis.Redis.from_url(server.url)

    url, handle = connect_or_start()
    try:
        ...
    finally:
        if handle is not None:
            handle.stop()

The ``redis-server`` binary comes from the operating system
(``scripts/bootstrap.sh`` installs Debian's ``redis-server`` package).
"""

from __future__ import annotations

import os
import secrets
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.parse
import weakref
from pathlib import Path

from engine import config
from engine.exceptions import ServiceError

__all__ = [
    "REDIS_URL_ENV",
    "REDIS_SERVER_ENV",
    "RedisServer",
    "check_reachable",
    "connect_or_start",
    "find_redis_server",
    "generate_password",
    "redact",
]

#: Environment variable naming an existing Redis server to use instead of starting one.
REDIS_URL_ENV = config.REDIS_URL.name
#: Environment variable naming the ``redis-server`` binary explicitly (optional).
REDIS_SERVER_ENV = config.REDIS_SERVER.name

INSTALL_HINT = "run scripts/bootstrap.sh (it installs Debian's redis-server package), or set REDIS_URL to an existing Redis server"

_HOST = "127.0.0.1"
# Places Debian and other distributions install the binary, for a PATH
# (cron, a stripped CI environment) that lacks /usr/bin or /usr/sbin.
_FALLBACK_LOCATIONS = ("/usr/bin/redis-server", "/usr/sbin/redis-server", "/usr/local/bin/redis-server")
_LOG_TAIL_LINES = 20
_BIND_RETRIES = 3


def find_redis_server() -> str:
    """Return the path of a usable ``redis-server`` binary.

    Looks at ``$METASTORE_REDIS_SERVER`` first, then ``PATH``, then the usual
    install locations. Raises :class:`ServiceError` with the install hint when
    there is none.
    """
    explicit = config.get(config.REDIS_SERVER)
    if explicit:
        if os.path.isfile(explicit) and os.access(explicit, os.X_OK):
            return explicit
        raise ServiceError(f"{REDIS_SERVER_ENV}={explicit!r} is not an executable redis-server binary; {INSTALL_HINT}")
    found = shutil.which("redis-server")
    if found:
        return found
    for candidate in _FALLBACK_LOCATIONS:
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    raise ServiceError(f"redis-server was not found on PATH; {INSTALL_HINT}")


def _free_port(host: str = _HOST) -> int:
    """A TCP port on ``host`` that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def generate_password() -> str:
    """A password for a server reachable from other machines (256 random bits, URL-safe)."""
    return secrets.token_hex(32)


def _probe(url: str, timeout: float = 1.0) -> str:
    """'' when the server at ``url`` answers PING, else why not (one line)."""
    # the client library is loaded by the Redis strategy's jobs only, not by every analyze
    import redis
    from redis.backoff import NoBackoff
    from redis.retry import Retry

    # No retries: redis-py 8 retries a refused connection with backoff by default,
    # which turns each probe of a server that is not up yet into seconds.
    client = redis.Redis.from_url(url, socket_connect_timeout=timeout, socket_timeout=timeout, retry=Retry(NoBackoff(), 0))
    try:
        return "" if client.ping() else "PING was not answered"
    except redis.exceptions.AuthenticationError:
        if urllib.parse.urlsplit(url).password is None:
            return "it requires a password, and the URL has none (redis://:PASSWORD@HOST:PORT/0)"
        return "authentication failed: wrong user name or password"
    except redis.exceptions.ResponseError as exc:  # NOAUTH: a password is required
        return f"the server refused the client ({exc})"
    except redis.exceptions.RedisError as exc:
        # ConnectionError (not listening yet), BusyLoadingError, TimeoutError, ...
        return " ".join(str(exc).split()) or type(exc).__name__
    finally:
        client.close()


def _ping(url: str, timeout: float = 1.0) -> bool:
    return not _probe(url, timeout)


def check_reachable(url: str, what: str = "--redis", timeout: float = 2.0) -> None:
    """Raise :class:`ServiceError` (one line, password redacted) unless the Redis at
    ``url`` answers PING from this process: an unusable server fails a job before
    any of its tasks starts, not in the middle of it."""
    try:
        problem = _probe(url, timeout=timeout)
    except ValueError as exc:  # malformed URL
        raise ServiceError(f"{what} {redact(url)!r} is not a valid Redis URL: {exc}") from None
    if problem:
        raise ServiceError(f"the Redis server at {what} {redact(url)} cannot be used: {problem}")


def redact(url: str) -> str:
    """``url`` without its password, for error messages."""
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return "<unparsable URL>"
    if parts.password is None:
        return url
    netloc = parts.hostname or ""
    if parts.username:
        netloc = f"{parts.username}:***@{netloc}"
    else:
        netloc = f":***@{netloc}"
    if parts.port is not None:
        netloc = f"{netloc}:{parts.port}"
    return urllib.parse.urlunsplit(parts._replace(netloc=netloc))


class RedisServer:
    """A private ``redis-server`` child process (on 127.0.0.1 unless ``host`` says otherwise).

    :param binary: path of ``redis-server``; found with :func:`find_redis_server` when None.
    :param host: the address to bind; anything but loopback needs ``password``.
    :param password: ``--requirepass``: clients must AUTH with it (it is part of :attr:`url`).
    :param port: TCP port; a free one is picked when None.
    :param maxmemory: the ``--maxmemory`` value (``"512mb"``, ``"2gb"``, bytes as int).
    :param maxmemory_policy: the ``--maxmemory-policy`` value.
    :param startup_timeout: seconds to wait for the server to answer PING.
    """

    def __init__(
        self,
        binary: str | None = None,
        *,
        port: int | None = None,
        maxmemory: str | int = "2gb",
        maxmemory_policy: str = "noeviction",
        startup_timeout: float = 15.0,
        die_with_parent: bool = False,
        host: str = _HOST,
        password: str | None = None,
    ) -> None:
        if not _is_loopback(host) and not password:
            raise ServiceError(f"a redis-server bound to {host} (not loopback) needs a password")
        self.binary = binary if binary is not None else find_redis_server()
        self._requested_port = port
        self.port: int | None = None
        self.host = host
        self.password = password
        self.maxmemory = str(maxmemory)
        self.maxmemory_policy = maxmemory_policy
        self.startup_timeout = startup_timeout
        #: Linux: the server gets SIGTERM when the process that started it dies
        #: (a crashed Ray actor must not leave an orphaned server behind)
        self.die_with_parent = die_with_parent
        self._proc: subprocess.Popen[bytes] | None = None
        self._tmpdir: Path | None = None
        self._log_path: Path | None = None
        self._finalizer: weakref.finalize[[subprocess.Popen[bytes], Path], RedisServer] | None = None

    # -- properties ----------------------------------------------------------

    @property
    def url(self) -> str:
        """``redis://[:PASSWORD@]HOST:PORT/0``; only valid while running."""
        if self.port is None:
            raise ServiceError("redis-server has not been started")
        auth = f":{urllib.parse.quote(self.password, safe='')}@" if self.password else ""
        return f"redis://{auth}{self.host}:{self.port}/0"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    # -- lifecycle -----------------------------------------------------------

    def start(self) -> RedisServer:
        """Start the server and wait until it answers PING. Returns ``self``."""
        if self._proc is not None:
            raise ServiceError("this redis-server handle is already started")
        attempts = 1 if self._requested_port is not None else _BIND_RETRIES
        for attempt in range(attempts):
            port = self._requested_port if self._requested_port is not None else _free_port(self.host)
            try:
                self._start_once(port)
                return self
            except _PortTaken:
                # Another process took the port between _free_port() and bind: retry.
                self.stop()
                if attempt == attempts - 1:
                    raise ServiceError(f"redis-server ({self.binary}) could not bind a port on {self.host} after {attempts} attempts") from None
        raise AssertionError("unreachable")  # pragma: no cover

    def _start_once(self, port: int) -> None:
        self._tmpdir = Path(tempfile.mkdtemp(prefix="metastore-redis-"))
        self._log_path = self._tmpdir / "redis-server.log"
        argv = [
            self.binary,
            "--bind",
            self.host,
            "--port",
            str(port),
            "--protected-mode",
            "yes",
            "--daemonize",
            "no",
            "--dir",
            str(self._tmpdir),
            "--save",
            "",
            "--appendonly",
            "no",
            "--maxmemory",
            self.maxmemory,
            "--maxmemory-policy",
            self.maxmemory_policy,
            "--logfile",
            "",  # log to stdout, which goes to the log file below
            "--loglevel",
            "notice",
        ]
        if self.password:
            # on stdin, not argv: ps shows a process's arguments to every user
            argv.append("-")
        with open(self._log_path, "wb") as log:
            try:
                self._proc = subprocess.Popen(
                    argv,
                    stdin=subprocess.PIPE if self.password else subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    cwd=self._tmpdir,
                    close_fds=True,
                    preexec_fn=_set_parent_death_signal if self.die_with_parent else None,
                )
            except OSError as exc:
                self._cleanup_tmpdir()
                raise ServiceError(f"could not run redis-server binary {self.binary!r}: {exc.strerror or exc}; {INSTALL_HINT}") from exc
            if self.password:
                assert self._proc.stdin is not None
                self._proc.stdin.write(f'requirepass "{self.password}"\n'.encode())
                self._proc.stdin.close()
        self.port = port
        # Never leave an orphaned server behind if the caller forgets stop().
        self._finalizer = weakref.finalize(self, _terminate, self._proc, self._tmpdir)
        self._wait_until_ready()

    def _wait_until_ready(self) -> None:
        assert self._proc is not None
        deadline = time.monotonic() + self.startup_timeout
        delay = 0.01
        while True:
            code = self._proc.poll()
            if code is not None:
                tail = self.log_tail()
                if "Address already in use" in tail and self._requested_port is None:
                    raise _PortTaken()
                self.stop()
                raise ServiceError(
                    f"redis-server ({self.binary}) exited with code {code} during start-up on {self.host}:{self.port}. Last log lines:\n{tail}"
                )
            if _ping(self.url, timeout=0.5):
                return
            if time.monotonic() >= deadline:
                tail = self.log_tail()
                self.stop()
                raise ServiceError(
                    f"redis-server ({self.binary}) did not answer PING on {self.host}:{self.port} "
                    f"within {self.startup_timeout:g}s. Last log lines:\n{tail}"
                )
            time.sleep(delay)
            delay = min(delay * 2, 0.2)

    def log_tail(self, lines: int = _LOG_TAIL_LINES) -> str:
        """The last lines of the server's log (empty once stopped)."""
        if self._log_path is None:
            return ""
        try:
            text = self._log_path.read_text(errors="replace")
        except OSError:
            return ""
        tail = text.splitlines()[-lines:]
        return "\n".join(tail) if tail else "(log is empty)"

    def stop(self, timeout: float = 10.0) -> None:
        """Terminate the server (SIGTERM, then SIGKILL) and remove its temp dir. Idempotent."""
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        if self._proc is not None:
            _stop_process(self._proc, timeout)
            self._proc = None
        self._cleanup_tmpdir()
        self.port = None

    def _cleanup_tmpdir(self) -> None:
        if self._tmpdir is not None:
            shutil.rmtree(self._tmpdir, ignore_errors=True)
            self._tmpdir = None
            self._log_path = None

    def __enter__(self) -> RedisServer:
        if self._proc is None:
            self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def __repr__(self) -> str:
        state = f"running on {self.host}:{self.port} (pid {self.pid})" if self.running else "stopped"
        return f"<RedisServer {self.binary} {state}>"


def _is_loopback(host: str) -> bool:
    return host in ("localhost", "::1") or host.startswith("127.")


def _set_parent_death_signal() -> None:
    """In the forked child: ask Linux for SIGTERM when the parent dies (PR_SET_PDEATHSIG)."""
    try:
        import ctypes
        import signal

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG
    except Exception:  # not Linux: the finalizer and atexit hook remain
        pass


class _PortTaken(Exception):
    """Internal: the picked port was taken before redis-server bound it."""


def _stop_process(proc: subprocess.Popen[bytes], timeout: float) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _terminate(proc: subprocess.Popen[bytes], tmpdir: Path) -> None:
    """Finalizer: runs at garbage collection or, via weakref.finalize's atexit hook, at interpreter exit."""
    try:
        _stop_process(proc, timeout=5.0)
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)


def connect_or_start(**server_kwargs: object) -> tuple[str, RedisServer | None]:
    """Return ``(url, handle)`` for the Redis server Metastore should use.

    If ``$REDIS_URL`` is set, that server is used as it is: it must answer PING
    (else :class:`ServiceError`), and ``handle`` is None (we do not own it).
    Otherwise a private :class:`RedisServer` is started with ``server_kwargs``
    and returned as ``handle``; the caller stops it.
    """
    existing = config.get(config.REDIS_URL) or ""
    if existing:
        try:
            reachable = _ping(existing, timeout=2.0)
        except ValueError as exc:  # malformed URL
            raise ServiceError(f"{REDIS_URL_ENV}={redact(existing)!r} is not a valid Redis URL: {exc}") from exc
        if not reachable:
            raise ServiceError(
                f"the Redis server at {REDIS_URL_ENV}={redact(existing)} does not answer PING; "
                f"start it, or unset {REDIS_URL_ENV} to let Metastore run its own redis-server"
            )
        return existing, None
    server = RedisServer(**server_kwargs).start()  # type: ignore[arg-type]  # keyword arguments built for RedisServer above
    return server.url, server
