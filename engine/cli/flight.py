"""The bodies of ``metastore serve`` and ``metastore query`` (the click commands are in engine/cli/console.py).

Kept here so that the CLI module imports nothing of Flight until one of these
commands runs (``metastore --help`` stays fast).
"""

from __future__ import annotations

import json
import logging
import signal
import sys
import threading
from collections.abc import Sequence
from typing import Any

from engine import config as env_config
from engine.exceptions import InvalidArgumentError, MetastoreError

TOKEN_ENV = env_config.FLIGHT_TOKEN.name
SERVER_ENV = env_config.FLIGHT.name
DEFAULT_SERVER = "grpc://127.0.0.1:8815"
QUERY_KINDS = ("tables", "health", "statistics", "top", "histogram", "partitions", "history", "refresh")


# ============================================================== serve
def serve(
    store: str,
    host: str,
    port: int,
    tokens: Sequence[str],
    token_file: str | None,
    tls_cert: str | None,
    tls_key: str | None,
    no_auth: bool,
    poll_interval: float,
    allow_analyze: bool,
    analyze_roots: Sequence[str],
    allow_source_change: bool = False,
    health_store: bool = False,
    exact: dict[str, Any] | None = None,
    echo: Any = print,
    sql: dict[str, Any] | None = None,
) -> None:
    """Run the Flight server until SIGINT/SIGTERM, then shut down gracefully.

    Runs on the main thread, which also starts Ray when the analyze action is enabled
    (see MetastoreFlightServer) and stops it at the end. ``exact``: ServerConfig's exact
    subset settings (allow_exact, max_exact_jobs, exact_rate, exact_cache_bytes); ``sql``: its SQL
    face's (sql, sql_timeout, sql_max_rows; docs/FLIGHT_SQL.md).
    """
    from flight_server.auth import Token, TokenConfigError
    from flight_server.server import MetastoreFlightServer, ServerConfig, read_pem

    if (tls_cert is None) != (tls_key is None):
        raise InvalidArgumentError("--tls-cert and --tls-key go together")
    env_token = env_config.get(env_config.FLIGHT_TOKEN)
    secrets = list(tokens) + ([env_token] if env_token and not tokens else [])
    try:
        config = ServerConfig(
            store=store,
            host=host,
            port=port,
            tokens=[Token.of(t) for t in secrets],
            token_file=token_file,
            no_auth=no_auth,
            tls_cert=read_pem(tls_cert),
            tls_key=read_pem(tls_key),
            poll_interval=poll_interval,
            allow_analyze=allow_analyze,
            analyze_roots=tuple(analyze_roots),
            allow_source_change=allow_source_change,
            health_store=health_store,
            **(exact or {}),
            **(sql or {}),
        )
    except TokenConfigError as exc:
        raise InvalidArgumentError(str(exc)) from None
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if tokens:
        echo(f"warning: --token shows the token to every local user (ps); use {TOKEN_ENV} or --token-file")
    if config.analyze_enabled:
        echo(f"the analyze action may read under: {', '.join(analyze_roots)} (starting Ray)")
        if config.exact_enabled:
            echo("exact subsets are on for tables under those locations: they disclose rows (--no-exact turns them off)")
    try:
        server = MetastoreFlightServer(config)
    except TokenConfigError as exc:
        raise InvalidArgumentError(str(exc)) from None
    except MetastoreError:
        raise
    except Exception as exc:
        text = " ".join(str(exc).split())
        raise MetastoreError(f"cannot start the Flight server on {host}:{port}: {text}") from None
    if config.analyze_enabled:
        from engine.runtime.reaper import start_reaper

        start_reaper()  # Ray's processes end with this one, even after a kill -9
    tables = len(server.resolver.tables())
    echo(
        f"serving the statistics of {tables} table{'s' if tables != 1 else ''} in {store} on {server.location} "
        f"(auth {'on' if server.authenticator else 'off'}, TLS {'on' if config.tls_enabled else 'off'}); Ctrl-C stops"
    )
    if not config.tls_enabled and server.authenticator is not None and host not in ("127.0.0.1", "localhost", "::1"):
        echo("warning: tokens travel in clear text without TLS (--tls-cert/--tls-key)")
    stop = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        while not stop.wait(0.5):
            pass
    finally:
        echo("shutting down: waiting for the streams in flight")
        server.shutdown()
        for s, handler in previous.items():
            signal.signal(s, handler)
        if config.analyze_enabled:
            _stop_ray(server, echo)
        echo("stopped")


def _stop_ray(server: Any, echo: Any) -> None:
    """Wait a little for running analyze jobs, then stop Ray here, on the main thread that started it.

    (The exit 134 after SIGTERM came from a Ray whose processes had died with the first
    job's thread; stopping Ray explicitly keeps its shutdown out of the interpreter's exit,
    where job threads may still be inside Ray calls.)
    """
    import ray

    running = server.jobs.running()
    if running:
        echo(f"waiting up to 30 s for {running} analyze job(s)")
        server.jobs.join(30)
    if ray.is_initialized():
        ray.shutdown()


# ============================================================== query
def client_token(token: str | None, token_file: str | None) -> str | None:
    if token:
        return token
    if token_file:
        with open(token_file, encoding="utf-8") as f:
            for line in f:
                line = line.split("#", 1)[0].strip()
                if line:
                    return line.split()[0]
        raise InvalidArgumentError(f"no token in {token_file}")
    return env_config.get(env_config.FLIGHT_TOKEN)


def _split_pair(text: str, what: str) -> tuple[str, str]:
    if ":" not in text:
        raise InvalidArgumentError(f"{what} must be START:STOP, not {text!r}")
    a, b = text.split(":", 1)
    return a, b


def query(
    server: str | None,
    token: str | None,
    token_file: str | None,
    tls_root_cert: str | None,
    kind: str,
    table: str | None,
    columns: list[str] | None,
    partition: str | None,
    partitions: str | None,
    statistics: list[str] | None,
    k: int,
    bins: str | None,
    lo: str | None,
    hi: str | None,
    where: str | None,
    timeout: float,
) -> dict[str, Any]:
    """Run one request against a server; returns a document for the CLI's output."""
    import pyarrow.flight as flight

    from flight_server.client import MetastoreClient

    location = server or env_config.get(env_config.FLIGHT) or DEFAULT_SERVER
    root = None
    if tls_root_cert:
        with open(tls_root_cert, "rb") as f:
            root = f.read()
    needs_table = kind not in ("tables", "health", "refresh")
    if needs_table and not table:
        raise InvalidArgumentError(f"query {kind} needs a TABLE")
    try:
        with MetastoreClient(location, client_token(token, token_file), tls_root_certs=root, timeout=timeout) as client:
            if kind == "health":
                return {"server": location, "kind": kind, "document": client.health()}
            if kind == "history":
                return {"server": location, "kind": kind, "document": client.history(table)}  # type: ignore[arg-type]
            if kind == "refresh":
                return {"server": location, "kind": kind, "document": client.refresh(table)}
            if kind == "tables":
                result = client.tables()
            elif kind == "statistics":
                parts: Any = None
                if partitions:
                    parts = "*" if partitions == "*" else [p.strip() for p in partitions.split(",") if p.strip()]
                result = client.statistics(table, columns, partition, parts, statistics)  # type: ignore[arg-type]
            elif kind in ("top", "histogram"):
                if not columns or len(columns) != 1:
                    raise InvalidArgumentError(f"query {kind} needs exactly one --column")
                if kind == "top":
                    result = client.top_frequencies(table, columns[0], k=k, partition=partition)  # type: ignore[arg-type]
                else:
                    bin_range = None
                    if bins:
                        a, b = _split_pair(bins, "--bins")
                        try:
                            bin_range = (int(a), int(b))
                        except ValueError:
                            raise InvalidArgumentError(f"--bins must be whole numbers START:STOP, not {bins!r}") from None
                    value_range = (lo, hi) if lo is not None or hi is not None else None
                    result = client.histogram(table, columns[0], bins=bin_range, value_range=value_range, partition=partition)  # type: ignore[arg-type]
            elif kind == "partitions":
                if not where:
                    raise InvalidArgumentError("query partitions needs --where 'PREDICATE' (e.g. \"city = 'Berlin' and price > 5\")")
                from engine.expressions import parse

                parse(where)  # a malformed predicate fails here, with its position, before any call
                result = client.partitions_matching(table, where)  # type: ignore[arg-type]
            else:
                raise InvalidArgumentError(f"unknown query {kind!r}: one of {', '.join(QUERY_KINDS)}")
    except flight.FlightError as exc:
        raise MetastoreError(f"{type(exc).__name__}: {exc}") from None
    from engine.pyvalues import python_values

    metadata = {k.decode(): v.decode() for k, v in (result.schema.metadata or {}).items()}
    names = result.schema.names
    columns = [python_values(result.column(i)) for i in range(result.num_columns)]  # exact: ns timestamps, far dates
    return {
        "server": location,
        "kind": kind,
        "table": table,
        "columns": names,
        "rows": [dict(zip(names, row)) for row in zip(*columns)] if columns else [],
        "metadata": metadata,
    }


def print_query(doc: dict[str, Any], as_json: bool) -> None:
    """Text: a table of the rows (or the document of an action); JSON: the whole document."""
    from engine.cli.output import dumps, fmt_value, natural_width, print_records

    if as_json:
        sys.stdout.write(dumps(doc) + "\n")
        return
    from engine.cli.plain import Console, Table, box

    console = Console(highlight=True)  # as rich's default Console (styles only at a terminal)
    if "document" in doc:
        console.print_json(json.dumps(doc["document"], default=str))
        return
    title = f"{doc['kind']} {doc.get('table') or ''}".strip() + f"  ({len(doc['rows']):,} rows from {doc['server']})"
    names = list(doc["columns"])
    keys = [n for n in ("column", "partition", "table") if n in names]  # what a row is about, first
    names = keys + [n for n in names if n not in keys]
    rows = [[f"{len(v)} bytes" if isinstance(v, (bytes, bytearray)) else fmt_value(v) for v in (row[name] for name in names)] for row in doc["rows"]]
    # a statistics row has ~40 columns: wider than any terminal, it is shown as one block per row
    if natural_width(names, rows) > console.width:
        print_records(console, names, rows, title=title, keys=max(1, len(keys)))
    else:
        t = Table(box=box.SIMPLE_HEAD, title=title, title_justify="left")
        for name in names:
            t.add_column(name, no_wrap=True)
        for cells in rows:
            t.add_row(*cells)
        console.print(t)
    meta = {k: v for k, v in doc["metadata"].items() if k in ("metastore.job_id", "kind", "stored_rows", "domain")}
    if meta:
        console.print(", ".join(f"{k.replace('metastore.', '')}: {v}" for k, v in meta.items()), style="dim")
