"""The Arrow Flight server: published statistics to query planners.

    from flight_server.server import MetastoreFlightServer, ServerConfig
    server = MetastoreFlightServer(ServerConfig(store=".metastore", port=0))
    ...  # server.location, e.g. grpc+tcp://127.0.0.1:40123
    server.shutdown()  # waits for the streams in flight

- ``list_flights``: one FlightInfo per table with statistics (descriptor: the table's path).
- ``get_flight_info`` / ``get_schema``: schema, row estimate and one endpoint for a request
  (a JSON command: a do_get kind of :mod:`flight_server.requests`, or a path ``[table]``: all statistics).
- ``do_get``: Arrow record batches for a ticket (the same JSON request).
- ``do_action``: the actions of :mod:`flight_server.requests`, answered by :mod:`flight_server.actions`.

Every error a client can cause is a FlightServerError (or FlightUnavailableError
when the store cannot be read, FlightUnauthenticatedError for authentication) with
a one-line message and ``extra_info`` = ``{"code": ...}`` (:mod:`flight_server.errors`); the server keeps serving.
docs/reference/FLIGHT.md describes the protocol.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.flight as flight

from engine import fileio
from engine.columns import display_name
from engine.exceptions import InvalidArgumentError
from engine.store import Store
from engine.subset.guard import guarded
from flight_server import actions, gather, protocol, requests
from flight_server.actions import ServerActions, ray_problem, symlink_out_of
from flight_server.auth import (
    MIDDLEWARE_KEY,
    SHUTTING_DOWN,
    CallTracker,
    MetastoreMiddlewareFactory,
    TokenAuthenticator,
)
from flight_server.config import DEFAULT_PORT, ServerConfig, ServerConfigError, is_loopback, read_pem
from flight_server.disclosure import StorePaths
from flight_server.errors import one_line, schema_error, to_flight_error
from flight_server.exact import ExactLimits, ExactSubsets, client_of
from flight_server.hotpath import HotPath
from flight_server.jobs import AnalyzeJobs
from flight_server.protocol import RequestError, StatisticsRequest
from flight_server.results import ResultCache
from flight_server.service import StatisticsService
from flight_server.state import CurrentStateResolver, StateResolver
from flight_server.threadstate import keep_thread_state

__all__ = ["DEFAULT_PORT", "MetastoreFlightServer", "ServerConfig", "ServerConfigError", "is_loopback", "read_pem"]

log = logging.getLogger("metastore.flight")

_IPC_OPTIONS = pa.ipc.IpcWriteOptions()  # built once (the default reads the environment per stream)


def _location(scheme: str, host: str, port: int) -> str:
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"{scheme}://{host}:{port}"


# ============================================================== calls
R = TypeVar("R")


def _guarded(fn: Callable[..., R]) -> Callable[..., R]:
    """A Flight handler that is counted (calls, in flight, errors), refused while the server
    closes, and whose exceptions reach the client as one-line Flight errors (never a traceback)."""

    def handler(self: MetastoreFlightServer, *args: object) -> R:
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


def _sql_service(config: ServerConfig, resolver: StateResolver) -> Any:
    """The Flight SQL face (flight_server/sql, docs/FLIGHT_SQL.md), or None with serve --no-sql."""
    if not config.sql:
        return None
    from flight_server.sql.engine import Limits
    from flight_server.sql.service import FlightSqlService

    return FlightSqlService(resolver, Limits(config.sql_timeout, config.sql_max_rows))


# ============================================================== the server
class MetastoreFlightServer(ServerActions, flight.FlightServerBase):
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
        if not gather.AVAILABLE:
            log.warning(
                "flight_server._gather (C) is not built: prepared statistics answers are taken by pyarrow.compute (slower under load; pip install -e . builds it)"
            )
        self.results = ResultCache(config.result_cache_bytes)
        self.hot = HotPath(self.resolver, self.service, self.results)
        self.sql = _sql_service(config, self.resolver)
        self.jobs = AnalyzeJobs(config.store, on_published=self._published, max_running=config.max_analyze_jobs, data_roots=self.analyze_roots)
        self.exact = ExactSubsets(
            config.store,
            self.analyze_roots,
            config.exact_enabled,
            ExactLimits(config.max_exact_jobs, config.exact_rate, config.exact_rate_window, config.exact_cache_bytes),
            escape=lambda location: symlink_out_of(location, [r for r in self.analyze_roots if fileio.is_local(r)]),
            ready=ray_problem,
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
    def shutdown(self) -> None:
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
        return requests.parse(raw)

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
            return requests.parse({"v": protocol.PROTOCOL_VERSION, "kind": "statistics", "table": table})
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
        assert isinstance(uri, str)  # permit refuses a table without a location
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

    def _flight_info(
        self, request: protocol.Request, descriptor: flight.FlightDescriptor, context: flight.ServerCallContext | None = None
    ) -> flight.FlightInfo:
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
            raise schema_error(exc) from None

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
        # a Flight SQL ticket is a protobuf Any (its first byte is field 1's tag), ours JSON: the
        # common case skips the protobuf parse (unpack answers None for anything else)
        sql = self._sql_command(raw) if raw[:1] == b"\n" else None
        if sql is not None:
            return self.sql.do_get(sql)
        generation = getattr(self.resolver, "generation", None)  # read before any state is resolved
        hot = self.hot.answer(raw, generation)  # the common tickets: a cached result, or a prepared entry (flight_server/hotpath.py)
        if hot is not None:
            return flight.RecordBatchStream(hot, _IPC_OPTIONS)
        request = requests.parse(raw)
        if getattr(request, "exact", False):
            with self._exact_scope(context, request):
                result = self.service.execute(request)
        else:  # every Python call counts here: under load each costs several times its cost in a loop
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
    def do_put(
        self,
        context: flight.ServerCallContext,
        descriptor: flight.FlightDescriptor,
        reader: flight.MetadataRecordBatchReader,
        writer: flight.FlightMetadataWriter,
    ) -> None:
        sql = self._sql_command(descriptor.command) if descriptor.descriptor_type == flight.DescriptorType.CMD else None
        if sql is not None:
            return self.sql.do_put(sql, reader, writer)
        raise RequestError("do_put is not supported: this service is read-only")

    @_guarded
    def do_exchange(
        self,
        context: flight.ServerCallContext,
        descriptor: flight.FlightDescriptor,
        reader: flight.MetadataRecordBatchReader,
        writer: flight.MetadataRecordBatchWriter,
    ) -> None:
        raise RequestError("do_exchange is not supported")

    # ------------------------------------------------------------ actions
    @_guarded
    def list_actions(self, context: flight.ServerCallContext) -> list[tuple[str, str]]:
        # Flight SQL's actions are the protocol's (docs/FLIGHT_SQL.md)
        return [(name, requests.of(requests.ACTION, name).description) for name in requests.ACTIONS]

    @_guarded
    def do_action(self, context: flight.ServerCallContext, action: flight.Action) -> Iterator[bytes]:
        kind = action.type
        raw = action.body.to_pybytes() if action.body is not None else b""
        if kind not in actions.HANDLERS and self.sql is not None and kind in self.sql.action_names:  # Flight SQL's
            return self.sql.action(kind, raw)
        body = requests.action_body(kind, raw)
        doc = actions.HANDLERS[kind](self, body)
        return iter([json.dumps(doc, default=str).encode()])
