"""The do_action handlers of the Flight server: one per action of flight_server/requests.py.

:class:`ServerActions` is a part of :class:`~flight_server.server.MetastoreFlightServer`
(which sets the attributes it names); ``HANDLERS`` maps each action to its method. The
body an action gets is a JSON object whose keys flight_server/requests.py checked.
"""

from __future__ import annotations

import json
import logging
import os
import re
import threading
import time
from collections.abc import Callable
from typing import Any

from engine import fileio, lookup
from engine.exceptions import InvalidArgumentError, MetastoreError, StatisticsNotFoundError
from engine.options import AnalyzeOptions
from engine.sources import registry as formats
from engine.store import Store
from flight_server import protocol, requests
from flight_server.auth import CallTracker, TokenAuthenticator
from flight_server.config import ServerConfig
from flight_server.disclosure import StorePaths
from flight_server.errors import one_line
from flight_server.exact import ExactSubsets
from flight_server.jobs import AnalyzeJobs, JobError
from flight_server.protocol import RequestError
from flight_server.results import ResultCache
from flight_server.service import StatisticsService
from flight_server.state import StateResolver

log = logging.getLogger("metastore.flight")

_TABLE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.=-]{0,127}$")


def ray_problem() -> str | None:
    """Why no job can run now (Ray is down), or None; never starts Ray (a request thread must not)."""
    from engine.runtime.ray_runtime import RayState, ray_status

    status = ray_status()
    return None if status.state is RayState.RUNNING else (status.problem or "Ray is not running")


def symlink_out_of(location: str, roots: list[str]) -> str | None:
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


class ServerActions:
    """The actions' handlers, over the server's parts (the server sets these attributes)."""

    config: ServerConfig
    resolver: StateResolver
    service: StatisticsService
    results: ResultCache
    tracker: CallTracker
    authenticator: TokenAuthenticator | None
    jobs: AnalyzeJobs
    exact: ExactSubsets
    sql: Any  # the Flight SQL face (flight_server/sql), or None
    paths: StorePaths
    analyze_roots: tuple[str, ...]
    started_at: float
    _analyze_lock: threading.Lock

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
        table = body.get("table")
        if not isinstance(table, str) or not table:
            raise RequestError('history needs {"table": ...}')
        return self.resolver.history(table)

    def _action_staleness(self, body: dict[str, Any]) -> dict[str, Any]:
        from engine.sources import snapshots_since

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
        table = body.get("table")
        if table is not None and not isinstance(table, str):
            raise RequestError('"table" must be a string')
        return self.resolver.refresh(table)

    def _action_analyze(self, body: dict[str, Any]) -> dict[str, Any]:
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
        inherit = body.get("inherit", AnalyzeOptions.inherit)
        if not isinstance(inherit, bool):
            raise RequestError(f'"inherit" must be true or false, not {protocol.short(inherit)}')
        value_partitions = body.get("value_partitions", AnalyzeOptions.value_partitions)
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
            escape = symlink_out_of(location, [r for r in self.analyze_roots if fileio.is_local(r)])
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
        handle = body.get("job")
        if not isinstance(handle, str):
            raise RequestError('analyze_status needs {"job": ...}')
        # the result's store and run_uri, an error naming a store file: relative to the store
        return json.loads(self.paths(json.dumps(self.jobs.status(handle), default=str, ensure_ascii=False)))


HANDLERS: dict[str, Callable[[ServerActions, dict[str, Any]], dict[str, Any]]] = {
    "health": ServerActions._action_health,
    "history": ServerActions._action_history,
    "refresh": ServerActions._action_refresh,
    "staleness": ServerActions._action_staleness,
    "analyze": ServerActions._action_analyze,
    "analyze_status": ServerActions._action_analyze_status,
    "diff": ServerActions._action_diff,
    "alerts": ServerActions._action_alerts,
}
requests.check_handlers(requests.ACTION, HANDLERS)
