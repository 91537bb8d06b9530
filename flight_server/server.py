"""The Arrow Flight server: published statistics to query planners.

    from flight_server.server import MetastoreFlightServer, ServerConfig
    server = MetastoreFlightServer(ServerConfig(store=".metastore", port=0))
    ...  # server.location, e.g. grpc+tcp://127.0.0.1:40123
    server.shutdown()  # waits for the streams in flight

- ``list_flights``: one FlightInfo per table with statistics (descriptor: the table's path).
- ``get_flight_info`` / ``get_schema``: schema, row estimate and one endpoint for a request
  (a JSON command of :mod:`flight_server.protocol`, or a path ``[table]``: all statistics).
- ``do_get``: Arrow record batches for a ticket (the same JSON request).
- ``do_action``: ``health``, ``history``, ``refresh``, ``analyze``, ``analyze_status``, ``diff``, ``alerts``.

Every error a client can cause is a FlightServerError (or FlightUnavailableError
when the store cannot be read, FlightUnauthenticatedError for authentication) with
a one-line message and ``extra_info`` = ``{"code": ...}``; the server keeps serving.
docs/FLIGHT.md describes the protocol.
"""

from __future__ import annotations

import contextlib
import dataclasses
import ipaddress
import json
import logging
import os
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.flight as flight

from engine import fileio, lookup
from engine.columns import display_name
from engine.exceptions import (
    CatalogCorruptError,
    InvalidArgumentError,
    MetastoreError,
    StatisticsFileCorruptError,
    StatisticsNotFoundError,
)
from engine.options import AnalyzeOptions
from engine.sources import registry as formats
from engine.store import Store
from engine.subset.guard import guarded
from flight_server import exact, protocol
from flight_server.auth import (
    MIDDLEWARE_KEY,
    SHUTTING_DOWN,
    CallTracker,
    MetastoreMiddlewareFactory,
    Token,
    TokenAuthenticator,
)
from flight_server.disclosure import StorePaths
from flight_server.exact import ExactLimits, ExactRefused, ExactSubsets, client_of
from flight_server.jobs import AnalyzeJobs, JobError
from flight_server.protocol import RequestError, StatisticsRequest
from flight_server.service import StatisticsService
from flight_server.state import (
    CurrentStateResolver,
    StateResolver,
    TimeTravelUnavailable,
    UnknownTable,
)
from flight_server.threadstate import keep_thread_state

log = logging.getLogger("metastore.flight")

DEFAULT_PORT = 8815
_IPC_OPTIONS = pa.ipc.IpcWriteOptions()  # built once (the default reads the environment per stream)
_TABLE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.=-]{0,127}$")

ACTIONS = {
    "health": "Server status: tables served, calls in flight, caches. Body: none.",
    "history": 'Published states of a table from its catalog, newest first. Body: {"table": ...}.',
    "refresh": 'Re-read the published state now (all tables, or {"table": ...}); returns what changed.',
    "staleness": 'Which source snapshot the current statistics describe and how many snapshots the table (Iceberg, Delta, Hudi) has committed since, from its history (no data read). Body: {"table": ...}.',
    "analyze": 'Start engine.api.analyze on Ray (only under the server\'s --analyze-root locations). Body: {"table_uri": ..., "name": null, "bins": 1000, "columns": null, "inherit": true, "value_partitions": false, "format": null, "at_snapshot": null, "as_of": null, "catalog": null}; returns {"job": ...}.',
    "analyze_status": 'Progress of an analyze job. Body: {"job": ...}; returns state, phase, done, total, result or error.',
    "diff": 'What changed between two states of a table (docs/DIFF.md). Body: {"table": ..., "from": null, "to": null, "from_partition": null, "to_partition": null, "columns": null, "top": 10}; returns metastore diff -o json\'s document.',
    "alerts": 'Alerts of a table\'s columns from its stored statistics (docs/DIFF.md). Body: {"table": ..., "columns": null, "partition": null, "thresholds": {}}; returns the table\'s and each column\'s alerts (kind, detail).',
}


class ServerConfigError(MetastoreError):
    """The server cannot start with this configuration (e.g. no tokens on a public address)."""


@dataclass
class ServerConfig:
    store: str
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT  # 0: any free port (see server.port)
    tokens: list[Token] = field(default_factory=list)
    token_file: str | None = None
    no_auth: bool = False  # serve a non-loopback address without tokens (explicit opt-out)
    tls_cert: bytes | None = None  # PEM certificate chain
    tls_key: bytes | None = None  # PEM private key
    poll_interval: float = 2.0  # seconds between cheap polls of the CURRENT pointers; 0: only on refresh
    allow_analyze: bool = True  # False: refuse the analyze action even with roots (serve --no-analyze)
    analyze_roots: tuple[str, ...] = ()  # the locations the analyze action may read; none: the action is off
    allow_source_change: bool = False  # analyze may publish over a table whose statistics came from another location
    health_store: bool = False  # health names the store and analyze roots on a server without tokens too
    max_analyze_jobs: int = 2
    allow_exact: bool = True  # False: refuse "exact" subsets even where analyze is enabled (serve --no-exact)
    max_exact_jobs: int = 1  # exact subsets computed at once; more are refused (busy)
    exact_rate: int = 10  # exact subsets computed per client (address) per exact_rate_window seconds
    exact_rate_window: float = 60.0
    exact_cache_bytes: int = 256 * 1024 * 1024  # the store's computed subsets kept within this (least recently used deleted)
    shutdown_grace: float | None = None  # seconds shutdown waits for in-flight calls (None: until they end)
    result_cache_bytes: int = 64 * 1024 * 1024  # recent results by ticket (0: off)
    prepared_cache_bytes: int = 64 * 1024 * 1024  # prepared answers per statistics file (flight_server/prepared.py; 0: off)
    sql: bool = True  # the Flight SQL face (docs/FLIGHT_SQL.md; serve --no-sql: off)
    sql_timeout: float = 30.0  # seconds per SQL query (serve --sql-timeout)
    sql_max_rows: int = 1_000_000  # rows per SQL result (serve --sql-max-rows)

    @property
    def auth_enabled(self) -> bool:
        return bool(self.tokens) or self.token_file is not None

    @property
    def tls_enabled(self) -> bool:
        return self.tls_cert is not None

    @property
    def analyze_enabled(self) -> bool:
        """The analyze action is off unless the operator names the locations it may read."""
        return self.allow_analyze and bool(self.analyze_roots)

    @property
    def exact_enabled(self) -> bool:
        """Exact subsets read data and disclose rows: the analyze action's permission (and not --no-exact)."""
        return self.analyze_enabled and self.allow_exact


def is_loopback(host: str) -> bool:
    if host in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _location(scheme: str, host: str, port: int) -> str:
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"{scheme}://{host}:{port}"


# ============================================================== errors
def _code(code: str) -> bytes:
    return json.dumps({"code": code}).encode()


def one_line(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def to_flight_error(exc: BaseException) -> flight.FlightError:
    """The Flight error a client sees for ``exc``: one line, and a machine-readable code in extra_info."""
    if isinstance(exc, flight.FlightError):
        return exc
    msg = one_line(str(exc) or type(exc).__name__)
    if isinstance(exc, RequestError):
        return flight.FlightServerError(f"bad request: {msg}", _code("bad_request"))
    if isinstance(exc, TimeTravelUnavailable):
        return flight.FlightServerError(msg, _code("time_travel_unavailable"))
    if isinstance(exc, UnknownTable):
        return flight.FlightServerError(msg, _code("not_found"))
    if isinstance(exc, InvalidArgumentError):
        return flight.FlightServerError(f"bad request: {msg}", _code("bad_request"))
    if isinstance(exc, JobError):
        return flight.FlightServerError(msg, _code("job"))
    if isinstance(exc, ExactRefused):
        if exc.code == exact.FORBIDDEN:
            return flight.FlightUnauthorizedError(msg, _code(exc.code))
        return flight.FlightUnavailableError(msg, _code(exc.code))
    if isinstance(exc, (StatisticsFileCorruptError, CatalogCorruptError)):
        return flight.FlightServerError(f"statistics damaged: {msg}", _code("damaged"))
    if isinstance(exc, StatisticsNotFoundError):
        return flight.FlightUnavailableError(f"statistics unavailable: {msg} (retry; the table may have been republished)", _code("unavailable"))
    if isinstance(exc, MetastoreError):
        return flight.FlightServerError(msg, _code("error"))
    if isinstance(exc, OSError):
        return flight.FlightUnavailableError(f"statistics store unavailable: {msg}", _code("unavailable"))
    log.error("internal error", exc_info=exc)
    return flight.FlightServerError(f"internal error: {type(exc).__name__}: {msg}", _code("internal"))


def _guarded(fn: Callable[..., Any]) -> Callable[..., Any]:
    """A Flight handler that is counted (calls, in flight, errors), refused while the server
    closes, and whose exceptions reach the client as one-line Flight errors (never a traceback)."""

    def handler(self: MetastoreFlightServer, *args: Any) -> Any:
        keep_thread_state()
        tracker = self.tracker
        if tracker.closing:
            tracker.reject()
            raise flight.FlightUnavailableError(SHUTTING_DOWN)
        tracker.enter()
        failed = True
        try:
            out = fn(self, *args)
            failed = False
            return out
        except Exception as exc:
            raise self.paths.error(to_flight_error(exc)) from None
        finally:
            tracker.leave(failed)

    handler.__name__ = fn.__name__
    handler.__doc__ = fn.__doc__
    return handler


def _guarded_stream(tracker: CallTracker, tables: Iterator[pa.Table], paths: StorePaths) -> Iterator[pa.Table]:
    """A stream of tables counted in flight until it ends (or the client goes away); its error
    without the store's location (``paths``)."""
    tracker.enter(call=False)
    failed = True
    try:
        yield from tables
        failed = False
    except GeneratorExit:
        failed = False  # the client stopped reading
        raise
    except Exception as exc:
        raise paths.error(to_flight_error(exc)) from None
    finally:
        tracker.leave(failed)


# ============================================================== get_schema errors
def _opaque_error_class(code: str, base: type[Exception]) -> type[Exception]:
    """An exception class for errors of ``get_schema``, which pyarrow's server cannot send as Flight errors.

    pyarrow's ``_get_schema`` (unlike the other methods) does not turn a raised FlightError
    into its status: whatever get_schema raises becomes a generic status whose message
    ends with ``traceback.format_exception`` of it (apache/arrow#43556). That formatting
    falls back to the class name when its text is not valid UTF-8, so these classes carry
    an unencodable character in their qualified name: the client gets ``<message>.
    Detail: Python exception: <code>`` and no traceback. The base class picks the status
    (ValueError: INVALID_ARGUMENT, KeyError: NOT_FOUND, OSError: IOError, else UNKNOWN).
    """
    cls = type(code, (base,), {"__str__": lambda self: str(self.args[0]) if self.args else code, "__module__": "metastore"})
    cls.__qualname__ = code + "\udc80"
    return cls


_SCHEMA_ERRORS = {
    "bad_request": _opaque_error_class("bad_request", ValueError),
    "time_travel_unavailable": _opaque_error_class("time_travel_unavailable", ValueError),
    "not_found": _opaque_error_class("not_found", KeyError),
    "job": _opaque_error_class("job", ValueError),
    exact.FORBIDDEN: _opaque_error_class(exact.FORBIDDEN, RuntimeError),
    exact.BUSY: _opaque_error_class(exact.BUSY, ConnectionError),
    exact.RATE_LIMITED: _opaque_error_class(exact.RATE_LIMITED, ConnectionError),
    "unavailable": _opaque_error_class("unavailable", ConnectionError),
    "error": _opaque_error_class("error", RuntimeError),
    "internal": _opaque_error_class("internal", RuntimeError),
}


def _schema_error(exc: flight.FlightError) -> Exception:
    """A get_schema error as an exception pyarrow sends without a traceback (see _opaque_error_class)."""
    code = "unavailable" if isinstance(exc, flight.FlightUnavailableError) else "internal"
    try:
        code = json.loads(exc.extra_info or b"{}").get("code", code)
    except (ValueError, AttributeError):
        pass
    text = str(exc).encode("utf-8", "backslashreplace").decode("utf-8")
    return _SCHEMA_ERRORS.get(code, _SCHEMA_ERRORS["internal"])(text)


# ============================================================== analyze
def _start_ray_on_main_thread() -> None:
    """Start (or attach to) Ray for the analyze action, on the main thread.

    Ray's processes get a parent-death signal tied to the thread that starts them:
    started from a job's thread, they were killed when that thread ended, and the next
    job killed the server. The main thread lives as long as the server.
    """
    import ray

    from engine.runtime.ray_runtime import ensure_ray

    if ray.is_initialized():
        return
    if threading.current_thread() is not threading.main_thread():
        raise ServerConfigError(
            "the analyze action needs Ray, started on the main thread: create the server there, "
            "or call engine.runtime.ray_runtime.ensure_ray() on the main thread first"
        )
    ensure_ray()


def _ray_problem() -> str | None:
    """Why no job can run now (Ray is down), or None; never starts Ray (a request thread must not)."""
    from engine.runtime.ray_runtime import RayState, ray_status

    status = ray_status()
    return None if status.state is RayState.RUNNING else (status.problem or "Ray is not running")


def _symlink_out_of(location: str, roots: list[str]) -> str | None:
    """The first symbolic link under the local directory ``location`` (followed as the reader follows
    them) that leads out of every root, or None."""
    pending, seen = [location], set()
    while pending:
        top = pending.pop()
        real = os.path.realpath(top)
        if real in seen or not os.path.isdir(real):
            continue
        seen.add(real)
        for directory, dirs, files in os.walk(top, followlinks=False):
            for entry in dirs + files:
                path = os.path.join(directory, entry)
                if os.path.islink(path):
                    if not any(fileio.is_within(os.path.realpath(path), root) for root in roots):
                        return path
                    if entry in dirs:
                        pending.append(path)  # os.walk does not descend into it; the reader does
    return None


# ============================================================== results cache
class ResultCache:
    """Recent single-table results by ticket bytes, valid for one resolver generation.

    Statistics files are immutable, so a result only goes stale when a table's published
    state changes, which bumps the resolver's ``generation``: entries of an older
    generation are never served (and are dropped when met). Bounded in bytes.
    """

    def __init__(self, max_bytes: int = 64 * 1024 * 1024, max_entry_bytes: int = 4 * 1024 * 1024) -> None:
        self.max_bytes = max_bytes
        self.max_entry_bytes = max_entry_bytes
        self._entries: OrderedDict[bytes, tuple[int, pa.Table, int]] = OrderedDict()  # generation, table, bytes
        self._bytes = 0
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def get(self, key: bytes, generation: int) -> pa.Table | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                self.misses += 1
                return None
            if entry[0] != generation:
                del self._entries[key]
                self._bytes -= entry[2]
                self.misses += 1
                return None
            self._entries.move_to_end(key)
            self.hits += 1
            return entry[1]

    def put(self, key: bytes, generation: int, table: pa.Table) -> None:
        if self.max_bytes <= 0:
            return
        size = table.get_total_buffer_size()  # cheap (nbytes walks slices); an upper bound
        if size > self.max_entry_bytes:
            return
        with self._lock:
            old = self._entries.pop(key, None)
            if old is not None:
                self._bytes -= old[2]
            self._entries[key] = (generation, table, size)
            self._bytes += size
            while self._bytes > self.max_bytes and self._entries:
                _, (_, _, dropped) = self._entries.popitem(last=False)
                self._bytes -= dropped

    def info(self) -> dict[str, int]:
        with self._lock:
            return {"entries": len(self._entries), "bytes": self._bytes, "hits": self.hits, "misses": self.misses}


def _sql_service(config: ServerConfig, resolver: StateResolver) -> Any:
    """The Flight SQL face (flight_server/sql, docs/FLIGHT_SQL.md), or None with serve --no-sql."""
    if not config.sql:
        return None
    from flight_server.sql.engine import Limits
    from flight_server.sql.service import FlightSqlService

    return FlightSqlService(resolver, Limits(config.sql_timeout, config.sql_max_rows))


# ============================================================== the server
class MetastoreFlightServer(flight.FlightServerBase):
    def __init__(self, config: ServerConfig, resolver: StateResolver | None = None) -> None:
        self.config = config
        if not is_loopback(config.host) and not config.auth_enabled and not config.no_auth:
            raise ServerConfigError(
                f"listening on {config.host} (not loopback) needs authentication: give --token or --token-file (or --no-auth to serve without it)"
            )
        if (config.tls_cert is None) != (config.tls_key is None):
            raise ServerConfigError("TLS needs both a certificate and a key")
        try:
            self.analyze_roots = tuple(fileio.canonical(r) for r in config.analyze_roots)
        except InvalidArgumentError as exc:
            raise ServerConfigError(f"bad --analyze-root: {exc}") from None
        self._analyze_lock = threading.Lock()  # one analyze action at a time passes the checks and starts its job
        self.started_at = time.time()
        self.tracker = CallTracker()
        self.paths = StorePaths(config.store)  # taken out of what clients are told
        self.authenticator = TokenAuthenticator(config.tokens, config.token_file) if config.auth_enabled else None
        if config.analyze_enabled:
            _start_ray_on_main_thread()
        self.resolver: StateResolver = resolver if resolver is not None else CurrentStateResolver(Store(config.store), config.poll_interval)
        self.service = StatisticsService(self.resolver, config.prepared_cache_bytes)
        self.results = ResultCache(config.result_cache_bytes)
        self.sql = _sql_service(config, self.resolver)
        self.jobs = AnalyzeJobs(config.store, on_published=self._published, max_running=config.max_analyze_jobs, data_roots=self.analyze_roots)
        self.exact = ExactSubsets(
            config.store,
            self.analyze_roots,
            config.exact_enabled,
            ExactLimits(config.max_exact_jobs, config.exact_rate, config.exact_rate_window, config.exact_cache_bytes),
            escape=lambda location: _symlink_out_of(location, [r for r in self.analyze_roots if fileio.is_local(r)]),
            ready=_ray_problem,
        )
        scheme = "grpc+tls" if config.tls_enabled else "grpc+tcp"
        tls = [flight.CertKeyPair(cert=config.tls_cert, key=config.tls_key)] if config.tls_enabled else None
        self._shutdown_lock = threading.Lock()
        self._shut_down = False
        try:
            super().__init__(
                _location(scheme, config.host, config.port),
                tls_certificates=tls,
                # only to read the authorization header: without tokens, no middleware (one trip into Python less per call)
                middleware={MIDDLEWARE_KEY: MetastoreMiddlewareFactory(self.tracker, self.authenticator)} if self.authenticator is not None else None,
            )
        except Exception:
            self.resolver.close()
            raise
        connect_host = "127.0.0.1" if config.host in ("0.0.0.0", "") else ("::1" if config.host == "::" else config.host)
        self.location = _location(scheme, connect_host, self.port)
        log.info(
            "serving statistics of %s on %s (auth %s, tls %s)",
            config.store,
            self.location,
            "on" if self.authenticator else "off",
            "on" if config.tls_enabled else "off",
        )

    # ------------------------------------------------------------ lifecycle
    def shutdown(self) -> None:  # type: ignore[override]
        """Refuse new calls, wait for the calls and streams in flight, stop. Idempotent."""
        with self._shutdown_lock:
            if self._shut_down:
                return
            self._shut_down = True
        self.tracker.close()
        self.tracker.wait_idle(self.config.shutdown_grace)
        super().shutdown()  # gRPC: waits for every RPC still running
        self.resolver.close()
        if self.sql is not None:
            self.sql.close()

    def _published(self, table: str) -> None:
        self.resolver.refresh(table)

    # ------------------------------------------------------------ requests
    @staticmethod
    def _request(raw: bytes) -> protocol.Request:
        return protocol.parse(raw)

    def _descriptor_request(self, descriptor: flight.FlightDescriptor) -> protocol.Request:
        if descriptor.descriptor_type == flight.DescriptorType.CMD:
            return self._request(descriptor.command)
        if descriptor.descriptor_type == flight.DescriptorType.PATH:
            path = descriptor.path or []
            if len(path) != 1:
                raise RequestError("a path descriptor must be [table]")
            try:
                table = path[0].decode("utf-8") if isinstance(path[0], bytes) else str(path[0])
            except UnicodeDecodeError:
                raise RequestError("a path descriptor must be UTF-8") from None
            return protocol.parse({"v": protocol.PROTOCOL_VERSION, "kind": "statistics", "table": table})
        raise RequestError("unknown descriptor type")

    def _exact_scope(self, context: flight.ServerCallContext | None, request: protocol.Request) -> contextlib.AbstractContextManager[None]:
        """Around a request's answer: for an ``exact`` subset, the server's permission (refused
        here, before anything is read) and its limits (engine/subset/guard.py; flight_server/exact.py)."""
        if not getattr(request, "exact", False):
            return contextlib.nullcontext()
        if not self.config.exact_enabled:
            self.exact.permit(request.table, None, self._exact_refusal())
        state = self.resolver.resolve(request.table, request.at)
        uri = state.stats.state.properties.get("table_uri")
        self.exact.permit(request.table, uri, self._exact_refusal())
        return guarded(self.exact.guard(client_of(context.peer() if context is not None else None), uri))

    def _exact_refusal(self) -> str:
        why = "they read the table's data and disclose its rows"
        if not self.config.allow_analyze:
            return f"exact subsets are disabled on this server (--no-analyze): {why}"
        if not self.config.allow_exact:
            return f"exact subsets are disabled on this server (--no-exact): {why}"
        return (
            f"exact subsets are disabled on this server: {why}; the operator enables them by naming the locations "
            "it may read (metastore serve --analyze-root DIR_OR_URI)"
        )

    def _flight_info(self, request: protocol.Request, descriptor: flight.FlightDescriptor, context: Any = None) -> flight.FlightInfo:
        with self._exact_scope(context, request):
            plan = self.service.describe(request)
        tickets = [protocol.encode(request)]
        if isinstance(request, StatisticsRequest) and request.partitions is not None:
            # one endpoint per partition, in order: a client may fetch them in parallel
            keys = self.service.partitions_of(plan.state, request)
            tickets = [protocol.encode(dataclasses.replace(request, partitions=None, partition=k)) for k in keys]
        endpoints = [flight.FlightEndpoint(t, []) for t in tickets]
        meta = {"table": plan.state.table, "job_id": plan.state.job_id, "snapshot": plan.state.snapshot, "kind": request.kind}
        return flight.FlightInfo(plan.schema, descriptor, endpoints, plan.total_records, -1, ordered=True, app_metadata=json.dumps(meta).encode())

    @_guarded
    def list_flights(self, context: flight.ServerCallContext, criteria: bytes) -> Iterator[flight.FlightInfo]:
        prefix = criteria.decode("utf-8", "replace") if criteria else ""
        infos = []
        damaged = dict(getattr(self.resolver, "errors", {}))  # tables whose catalog cannot be read
        for state in self.resolver.tables():
            if not state.table.startswith(prefix):
                continue
            try:
                request = StatisticsRequest(table=state.table)
                plan = self.service.describe(request)
            except Exception as exc:  # a damaged table is listed with its error, not dropped (#21)
                log.warning("list_flights: %s cannot be described: %s", state.table, exc)
                damaged[state.table] = str(to_flight_error(exc))
                continue
            meta = {
                **state.summary(),
                "partition_keys": [p.key for p in state.stats.state.partitions],
                "column_names": [display_name(c["name"]) for c in state.stats.state.columns],  # as answers name them
            }
            infos.append(
                flight.FlightInfo(
                    plan.schema,
                    flight.FlightDescriptor.for_path(state.table),
                    [flight.FlightEndpoint(protocol.encode(request), [])],
                    plan.total_records,
                    -1,
                    app_metadata=json.dumps(meta).encode(),
                )
            )
        for table in sorted(t for t in damaged if t.startswith(prefix)):
            meta = {"table": table, "error": one_line(self.paths(damaged[table])), "code": "damaged"}
            infos.append(
                flight.FlightInfo(pa.schema([]), flight.FlightDescriptor.for_path(table), [], -1, -1, app_metadata=json.dumps(meta).encode())
            )
        return iter(infos)

    def _sql_command(self, raw: bytes | None) -> Any:
        """The Flight SQL message in a cmd, ticket or action body (flight_server/sql), or None."""
        from flight_server.sql.protocol import UnsupportedCommand, unpack

        try:
            message = unpack(raw or b"")
        except UnsupportedCommand as exc:
            raise RequestError(str(exc)) from None
        if message is not None and self.sql is None:
            raise RequestError("SQL is disabled on this server (serve --no-sql)")
        return message

    @_guarded
    def get_flight_info(self, context: flight.ServerCallContext, descriptor: flight.FlightDescriptor) -> flight.FlightInfo:
        sql = self._sql_command(descriptor.command) if descriptor.descriptor_type == flight.DescriptorType.CMD else None
        if sql is not None:
            return self.sql.flight_info(descriptor, sql)
        return self._flight_info(self._descriptor_request(descriptor), descriptor, context)

    def get_schema(self, context: flight.ServerCallContext, descriptor: flight.FlightDescriptor) -> flight.SchemaResult:
        try:
            return self._get_schema(context, descriptor)
        except flight.FlightError as exc:
            raise _schema_error(exc) from None

    @_guarded
    def _get_schema(self, context: flight.ServerCallContext, descriptor: flight.FlightDescriptor) -> flight.SchemaResult:
        sql = self._sql_command(descriptor.command) if descriptor.descriptor_type == flight.DescriptorType.CMD else None
        if sql is not None:
            return flight.SchemaResult(self.sql.schema(sql))
        request = self._descriptor_request(descriptor)
        with self._exact_scope(context, request):
            return flight.SchemaResult(self.service.describe(request).schema)

    @_guarded
    def do_get(self, context: flight.ServerCallContext, ticket: flight.Ticket) -> flight.FlightDataStream:
        raw = ticket.ticket
        sql = self._sql_command(raw)
        if sql is not None:
            return self.sql.do_get(sql)
        generation = getattr(self.resolver, "generation", None)
        if generation is not None:
            hit = self.results.get(raw, generation)
            if hit is not None:
                return flight.RecordBatchStream(hit, _IPC_OPTIONS)
        request = self._request(raw)
        with self._exact_scope(context, request):
            result = self.service.execute(request)
        if result.count == 1:
            table = next(result.tables)
            # exact subsets are not kept here: each answer goes through the subsets cache, which
            # keeps their recency for its budget (flight_server/exact.py)
            if generation is not None and request.at is None and not getattr(request, "exact", False):
                self.results.put(raw, generation, table)
            return flight.RecordBatchStream(table, _IPC_OPTIONS)
        return flight.GeneratorStream(result.schema, _guarded_stream(self.tracker, result.tables, self.paths), _IPC_OPTIONS)

    @_guarded
    def do_put(self, context: Any, descriptor: Any, reader: Any, writer: Any) -> None:
        sql = self._sql_command(descriptor.command) if descriptor.descriptor_type == flight.DescriptorType.CMD else None
        if sql is not None:
            return self.sql.do_put(sql, reader, writer)
        raise RequestError("do_put is not supported: this service is read-only")

    @_guarded
    def do_exchange(self, context: Any, descriptor: Any, reader: Any, writer: Any) -> None:
        raise RequestError("do_exchange is not supported")

    # ------------------------------------------------------------ actions
    @_guarded
    def list_actions(self, context: flight.ServerCallContext) -> list[tuple[str, str]]:
        return list(ACTIONS.items())  # Flight SQL's actions are the protocol's (docs/FLIGHT_SQL.md)

    @_guarded
    def do_action(self, context: flight.ServerCallContext, action: flight.Action) -> Iterator[bytes]:
        kind = action.type
        if kind not in ACTIONS and self.sql is not None and kind in self.sql.action_names:  # Flight SQL's
            return self.sql.action(kind, action.body.to_pybytes() if action.body is not None else b"")
        if kind not in ACTIONS:
            raise RequestError(f"unknown action {protocol.short(kind)}: expected one of {', '.join(ACTIONS)}")
        raw = action.body.to_pybytes() if action.body is not None else b""
        body = protocol.decode(raw) if raw.strip() else {}
        doc = getattr(self, "_action_" + kind)(body)
        return iter([json.dumps(doc, default=str).encode()])

    @staticmethod
    def _only(body: dict[str, Any], keys: tuple[str, ...], action: str) -> None:
        extra = sorted(str(k) for k in body if k not in keys)
        if extra:
            raise RequestError(f"unknown key(s) in the {action} action: {', '.join(protocol.short(k, 40) for k in extra[:5])}")

    def _action_health(self, body: dict[str, Any]) -> dict[str, Any]:
        resolver = self.resolver
        tracker = self.tracker
        ray = None
        if self.config.analyze_enabled:
            from engine.runtime.ray_runtime import ray_status

            ray = ray_status().as_dict()
        status = "ok"
        if tracker.closing:
            status = "shutting_down"
        elif ray is not None and ray["state"] != "running":
            status = "degraded"  # statistics are served; the analyze action is refused
        doc: dict[str, Any] = {
            "status": status,
            "protocol": protocol.PROTOCOL_VERSION,
            "tables": len(resolver.tables()),
            "generation": getattr(resolver, "generation", None),
            "last_poll": getattr(resolver, "last_poll", None),
            "poll_errors": getattr(resolver, "poll_errors", None),
            "uptime_s": round(time.time() - self.started_at, 3),
            "in_flight": tracker.in_flight,
            "calls": tracker.calls,
            "errors": tracker.errors,
            "rejected": tracker.rejected,
            "analyze_jobs_running": self.jobs.running(),
            "cache": lookup.cache_info(),
            "result_cache": self.results.info(),
            "prepared_cache": self.service.prepared.info(),
            "auth": self.authenticator is not None,
            "tls": self.config.tls_enabled,
            "analyze": {"enabled": self.config.analyze_enabled, "ray": ray, "allow_source_change": self.config.allow_source_change},
            "exact": self.exact.info(),
            "sql": {"enabled": self.sql is not None, "timeout_s": self.config.sql_timeout, "max_rows": self.config.sql_max_rows},
        }
        if self.authenticator is not None and self.authenticator.has_file:
            doc["token_file"] = self.authenticator.file_status().as_dict()
        # where the store and the analyze roots are: only to authenticated callers (or when the operator says so)
        if self.authenticator is not None or self.config.health_store:
            doc["store"] = self.config.store
            doc["analyze"]["roots"] = list(self.analyze_roots)
        return doc

    def _action_history(self, body: dict[str, Any]) -> dict[str, Any]:
        self._only(body, ("table",), "history")
        table = body.get("table")
        if not isinstance(table, str) or not table:
            raise RequestError('history needs {"table": ...}')
        return self.resolver.history(table)

    def _action_staleness(self, body: dict[str, Any]) -> dict[str, Any]:
        from engine.sources import snapshots_since

        self._only(body, ("table",), "staleness")
        table = body.get("table")
        if not isinstance(table, str) or not table:
            raise RequestError('staleness needs {"table": ...}')
        state = self.resolver.resolve(table)
        uri = state.stats.state.properties.get("table_uri")
        try:
            stale_by = snapshots_since(uri, state.snapshot) if uri else None
        except MetastoreError as exc:
            log.warning("staleness of %s: %s", table, exc)
            stale_by = None
        doc = {"table": table, "snapshot": state.snapshot, "stale_by": stale_by}
        if self.authenticator is not None or self.config.health_store:  # the source's location: as health's store
            doc["table_uri"] = uri
        return doc

    def _action_refresh(self, body: dict[str, Any]) -> dict[str, Any]:
        self._only(body, ("table",), "refresh")
        table = body.get("table")
        if table is not None and not isinstance(table, str):
            raise RequestError('"table" must be a string')
        return self.resolver.refresh(table)

    def _action_analyze(self, body: dict[str, Any]) -> dict[str, Any]:
        self._only(
            body, ("table_uri", "name", "bins", "columns", "inherit", "value_partitions", "format", "at_snapshot", "as_of", "catalog"), "analyze"
        )
        if not self.config.analyze_enabled:
            if not self.config.allow_analyze:
                raise JobError("analyze is disabled on this server (--no-analyze)")
            raise JobError(
                "analyze is disabled on this server: the operator enables it by naming the locations it may read "
                "(metastore serve --analyze-root DIR_OR_URI)"
            )
        uri = body.get("table_uri")
        if not isinstance(uri, str) or not uri or len(uri) > 4096:
            raise RequestError('analyze needs {"table_uri": "<a table directory or s3:// prefix>"}')
        name = body.get("name")
        if name is None:
            name = uri.rstrip("/").rsplit("/", 1)[-1]
        if not isinstance(name, str) or not _TABLE_NAME.match(name) or ".." in name:
            raise RequestError(f"bad table name {protocol.short(name)}: letters, digits, _ . = - (at most 128)")
        bins = body.get("bins", AnalyzeOptions.bins)
        if not isinstance(bins, int) or isinstance(bins, bool):
            raise RequestError(f'"bins" must be a whole number, not {protocol.short(bins)}')
        columns = body.get("columns")
        if columns is not None and (not isinstance(columns, list) or not all(isinstance(c, str) for c in columns)):
            raise RequestError('"columns" must be a list of strings or null')
        inherit = body.get("inherit", True)
        if not isinstance(inherit, bool):
            raise RequestError(f'"inherit" must be true or false, not {protocol.short(inherit)}')
        value_partitions = body.get("value_partitions", False)
        if not isinstance(value_partitions, bool):
            raise RequestError(f'"value_partitions" must be true or false, not {protocol.short(value_partitions)}')
        try:  # the job's own validation, before a job is started (one place for every entry point)
            AnalyzeOptions(bins=bins, inherit=inherit, value_partitions=value_partitions)
        except InvalidArgumentError as exc:
            raise RequestError(str(exc)) from None
        source_options = {}
        for key in ("format", "at_snapshot", "as_of", "catalog"):
            value = body.get(key)
            if value is None:
                continue
            if not isinstance(value, (str, int)) or isinstance(value, bool) or len(str(value)) > 256:
                raise RequestError(f'"{key}" must be a string or null, not {protocol.short(value)}')
            source_options[key] = value
        if source_options.get("format") not in (None, *formats.NAMES):
            raise RequestError(f'"format" must be {formats.listed()}, not {protocol.short(source_options["format"])}')
        # the job reads the location that was checked (canonical: absolute, symlinks resolved), not the client's spelling
        location = self._analyze_location(uri)
        from engine.runtime.ray_runtime import RayState, ray_status

        ray = ray_status()
        if ray.state is not RayState.RUNNING:
            raise JobError(f"analyze is unavailable: {ray.problem or 'Ray is not running'}; restart the server")
        with self._analyze_lock:
            for job in self.jobs.list():
                if job["name"] == name and job["state"] in ("queued", "running"):
                    raise JobError(f"an analyze job of table {name!r} is running ({job['job']}); wait for it to finish")
            self._check_source(name, location)
            return self.jobs.start(
                location, name=name, bins=bins, columns=columns, inherit=inherit, value_partitions=value_partitions, **source_options
            )

    def _analyze_location(self, uri: str) -> str:
        """The canonical location of ``uri`` if it lies under an analyze root, else a RequestError.

        ``fileio.canonical`` spells a location as the reader resolves it (``file:/x`` is
        ``/x``, ``..`` applied, symlinks resolved), so the check is on what the job reads.
        Inside a local table, symlinks that lead out of every root are refused too (the
        reader follows them).
        """
        try:
            location = fileio.canonical(uri)
        except InvalidArgumentError as exc:
            raise RequestError(f"bad table_uri: {exc}") from None
        if not any(fileio.is_within(location, root) for root in self.analyze_roots):
            raise RequestError(f"table_uri {protocol.short(uri)} is outside the locations this server may analyze")
        if fileio.is_local(location):
            escape = _symlink_out_of(location, [r for r in self.analyze_roots if fileio.is_local(r)])
            if escape is not None:
                raise RequestError(
                    f"table_uri {protocol.short(uri)} holds a symbolic link out of the locations this server may analyze: "
                    f"{protocol.short(escape, 200)}"
                )
        return location

    def _check_source(self, name: str, location: str) -> None:
        """Refuse to publish over a table whose statistics came from another location (unless allowed).

        Without this, a client allowed to analyze could replace a table's statistics with
        those of another table it may read, under the same name.
        """
        if self.config.allow_source_change:
            return
        try:
            published = Store(self.config.store).state(name)
        except StatisticsNotFoundError:
            return  # a new table
        except Exception as exc:  # a damaged catalog: its error names store paths, which stay in the log
            log.warning("analyze refused: the source of table %r cannot be read: %s", name, one_line(exc))
            raise JobError(
                f"cannot tell where the statistics of table {name!r} came from (see the server log): not publishing over them "
                "(the operator can allow it: --allow-source-change)"
            ) from None
        previous = published.properties.get("table_uri")
        try:
            same = isinstance(previous, str) and fileio.canonical(previous) == location
        except InvalidArgumentError:
            same = False
        if not same:
            log.warning("analyze refused: table %r came from %r, the request names %r", name, previous, location)
            raise JobError(
                f"table {name!r} holds the statistics of another location; "
                "analyze it under another name (the operator can allow it: --allow-source-change)"
            )

    def _action_diff(self, body: dict[str, Any]) -> dict[str, Any]:
        from flight_server.review import diff_action

        return diff_action(self.resolver, self.config.store, body)

    def _action_alerts(self, body: dict[str, Any]) -> dict[str, Any]:
        from flight_server.review import alerts_action

        return alerts_action(self.resolver, body)

    def _action_analyze_status(self, body: dict[str, Any]) -> dict[str, Any]:
        self._only(body, ("job",), "analyze_status")
        handle = body.get("job")
        if not isinstance(handle, str):
            raise RequestError('analyze_status needs {"job": ...}')
        # the result's store and run_uri, an error naming a store file: relative to the store
        return json.loads(self.paths(json.dumps(self.jobs.status(handle), default=str, ensure_ascii=False)))


def read_pem(path: str | None) -> bytes | None:
    if path is None:
        return None
    if "://" in path:
        return fileio.read_bytes(path)
    with open(path, "rb") as f:
        return f.read()
