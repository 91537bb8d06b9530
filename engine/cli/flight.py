"""The bodies of ``metastore serve`` and ``metastore query`` (their click commands are in
engine/cli/commands/servers.py and engine/cli/commands/query.py).

Kept here so that the CLI module imports nothing of Flight until one of these
commands runs (``metastore --help`` stays fast).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import signal
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine import config as env_config
from engine.exceptions import InvalidArgumentError, MetastoreError
from flight_server import requests
from flight_server.protocol import At, HistogramRequest, PartitionsMatchingRequest, PlanFilesRequest, StatisticsRequest, TopFrequenciesRequest

if TYPE_CHECKING:
    from types import FrameType

    from engine.cli.plain import Console
    from flight_server.client import MetastoreClient
    from flight_server.protocol import Request
    from flight_server.server import MetastoreFlightServer

TOKEN_ENV = env_config.FLIGHT_TOKEN.name
SERVER_ENV = env_config.FLIGHT.name
DEFAULT_SERVER = "grpc://127.0.0.1:8815"
#: what ``metastore query`` asks: the requests of flight_server/requests.py with a CLI name
QUERY_KINDS = requests.CLI_NAMES
#: the actions it asks with at most a table as their body (health, history, staleness, refresh)
ACTION_KINDS = tuple(r.cli for r in requests.REQUESTS if r.cli and r.mechanism == requests.ACTION and r.keys in (None, ("table",)))
#: how long ``query analyze --wait`` polls the job at most
ANALYZE_WAIT_S = 24 * 3600.0


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
    echo: Callable[[str], None] = print,
    sql: dict[str, Any] | None = None,
) -> None:
    """Run the Flight server until SIGINT/SIGTERM, then shut down gracefully.

    Runs on the main thread, which also starts Ray when the analyze action is enabled
    (see MetastoreFlightServer) and stops it at the end. ``exact``: ServerConfig's exact
    subset settings (allow_exact, max_exact_jobs, exact_rate, exact_cache_bytes); ``sql``: its SQL
    face's (sql, sql_timeout, sql_max_rows; docs/FLIGHT_SQL.md).
    """
    from engine.tokens import Token, TokenConfigError
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

    def on_signal(signum: int, frame: FrameType | None) -> None:
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


def _stop_ray(server: MetastoreFlightServer, echo: Callable[[str], None]) -> None:
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


@dataclass
class QueryOptions:
    """What ``metastore query`` asks besides the kind and the table (each applies to some kinds)."""

    columns: list[str] | None = None
    partition: str | None = None
    partitions: str | None = None
    statistics: list[str] | None = None
    k: int = 20
    bins: str | None = None
    lo: str | None = None
    hi: str | None = None
    where: str | None = None
    exact: bool = False
    at_transaction: int | None = None
    at_snapshot: str | None = None
    typed: bool = False  # top: values in the column's type, not their text form
    name: str | None = None  # analyze: the table's name in the server's store
    wait: bool = False  # analyze: poll the job until it ends


def _request(kind: str, table: str, o: QueryOptions) -> Request:
    """The protocol request of a data kind (a do_get kind of flight_server/requests.py)."""
    at = At(o.at_transaction, o.at_snapshot) if o.at_transaction is not None or o.at_snapshot is not None else None
    if o.exact and not o.where:
        raise InvalidArgumentError("--exact needs --where")
    if o.where and kind in ("statistics", "top", "histogram") and (o.partition or o.partitions):
        raise InvalidArgumentError("--where describes rows of the whole table: give no --partition with it")
    if kind == "statistics":
        parts: str | tuple[str, ...] | None = None
        if o.partitions:
            parts = "*" if o.partitions == "*" else tuple(p.strip() for p in o.partitions.split(",") if p.strip())
        cols = tuple(o.columns) if o.columns else None
        stats = tuple(o.statistics) if o.statistics else None
        return StatisticsRequest(table, cols, o.partition, parts, stats, at=at, where=o.where, exact=o.exact)
    if kind in ("top", "histogram"):
        if not o.columns or len(o.columns) != 1:
            raise InvalidArgumentError(f"query {kind} needs exactly one --column")
        if kind == "top":
            return TopFrequenciesRequest(table, o.columns[0], k=o.k, partition=o.partition, typed=o.typed, at=at, where=o.where, exact=o.exact)
        bin_range = None
        if o.bins:
            a, b = _split_pair(o.bins, "--bins")
            try:
                bin_range = (int(a), int(b))
            except ValueError:
                raise InvalidArgumentError(f"--bins must be whole numbers START:STOP, not {o.bins!r}") from None
        value_range = (o.lo, o.hi) if o.lo is not None or o.hi is not None else None
        return HistogramRequest(table, o.columns[0], bin_range, value_range, o.partition, at=at, where=o.where, exact=o.exact)
    if kind in ("partitions", "files"):
        if not o.where:
            raise InvalidArgumentError(f"query {kind} needs --where 'PREDICATE' (e.g. \"city = 'Berlin' and price > 5\")")
        if o.exact:
            raise InvalidArgumentError(f"--exact applies to statistics, top and histogram, not to query {kind}")
        from engine.expressions import parse

        parse(o.where)  # a malformed predicate fails here, with its position, before any call
        if kind == "partitions":
            return PartitionsMatchingRequest(table, o.where, at=at)
        return PlanFilesRequest(table, o.where, at=at)
    raise InvalidArgumentError(f"unknown query {kind!r}: one of {', '.join(QUERY_KINDS)}")


def _analyze(client: MetastoreClient, kind: str, table: str, o: QueryOptions) -> dict[str, Any]:
    """The analyze action (start a job on the server's Ray; ``wait``: its final status) or analyze_status."""
    if kind == "analyze-status":
        return client.analyze_status(table)
    job = client.analyze(table, name=o.name, columns=o.columns)
    if not o.wait:
        return {"job": job, "next": f"metastore query analyze-status {job}"}
    try:
        return {"job": job, **client.wait_analyze(job, timeout=ANALYZE_WAIT_S)}
    except TimeoutError as exc:
        raise MetastoreError(str(exc)) from None


def query(
    server: str | None,
    token: str | None,
    token_file: str | None,
    tls_root_cert: str | None,
    kind: str,
    table: str | None,
    options: QueryOptions,
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
    if kind in ("history", "staleness", "analyze", "analyze-status") and not table:
        what = {"analyze": "the table's location (TABLE)", "analyze-status": "a job handle (TABLE)"}.get(kind, "a TABLE")
        raise InvalidArgumentError(f"query {kind} needs {what}")
    if table and kind != "analyze":  # analyze's TABLE is a location; the others' a name (or a job handle)
        from engine.names import check_table_name

        check_table_name(table)
    if kind not in ACTION_KINDS and kind not in ("tables", "analyze", "analyze-status"):
        if not table:
            raise InvalidArgumentError(f"query {kind} needs a TABLE")
        request = _request(kind, table, options)  # a bad option fails before any call
    try:
        with MetastoreClient(location, client_token(token, token_file), tls_root_certs=root, timeout=timeout) as client:
            if kind in ACTION_KINDS:
                body = {"table": table} if table and kind != "health" else None
                return {"server": location, "kind": kind, "table": table, "document": client.action(kind, body)}
            if kind in ("analyze", "analyze-status"):
                return {"server": location, "kind": kind, "table": table, "document": _analyze(client, kind, str(table), options)}
            result = client.tables() if kind == "tables" else client.get(request)
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
    """Text: a table of the rows, or an action's document as key/value lines and tables
    (never raw JSON); JSON: the whole document."""
    from engine.cli.output import dumps

    if as_json:
        sys.stdout.write(dumps(doc) + "\n")
        return
    from engine.cli.plain import Console

    console = Console(highlight=True)  # as rich's default Console (styles only at a terminal)
    if "document" in doc:
        _print_document(console, doc)
        return
    title = f"{doc['kind']} {doc.get('table') or ''}".strip() + f"  ({len(doc['rows']):,} rows from {doc['server']})"
    if doc["kind"] == "files":  # paths whole, broken only after a "/", as metastore files
        from engine.cli.layout import files_table
        from engine.cli.output import fmt_count

        files_table(
            console,
            title,
            ["partition", "rows", "size"],
            [(r["path"], [r["partition"] or "", fmt_count(r["rows"]), fmt_count(r["size"])]) for r in doc["rows"]],
        )
        return
    names = list(doc["columns"])
    keys = [n for n in ("column", "partition", "table", "path") if n in names]  # what a row is about, first
    names = keys + [n for n in names if n not in keys]
    estimated = _estimated(doc["metadata"].get("metastore.subset"))
    limit = max(24, console.width - 28)  # a long value keeps to one line of a row's block
    rows = [
        [_cell(row[name], (row.get("column"), name) in estimated, limit) for name in names]
        for row in doc["rows"]
    ]  # fmt: skip
    _print_rows(console, title, names, rows, keys)
    meta = {k: v for k, v in doc["metadata"].items() if k in ("metastore.job_id", "kind", "stored_rows", "domain")}
    if meta:
        console.print(", ".join(f"{k.replace('metastore.', '')}: {v}" for k, v in meta.items()), style="dim")
    methods = doc["metadata"].get("metastore.subset")
    if methods:
        console.print(_methods_line(methods), style="dim")


def _print_rows(console: Console, title: str, names: list[str], rows: list[list[str]], keys: list[str]) -> None:
    """A table of the rows; wider than the terminal (a statistics row has ~40 columns): one block per row."""
    from engine.cli.layout import natural_width, print_records
    from engine.cli.plain import Table, Text, box

    if natural_width(names, rows) > console.width:
        print_records(console, names, rows, title=title, keys=max(1, len(keys)))
        return
    console.print(Text(title, style="bold"))  # a line of its own: a narrow table would wrap it
    t = Table(box=box.SIMPLE_HEAD)
    for name in names:
        t.add_column(name, no_wrap=True)
    for cells in rows:
        t.add_row(*cells)
    console.print(t)


def _flatten(doc: dict[str, Any], prefix: str = "") -> tuple[list[tuple[str, str]], dict[str, list[dict[str, Any]]]]:
    """An action's document as (dotted key, text) pairs and its lists of records (shown as tables)."""
    from engine.cli.output import fmt_value

    pairs: list[tuple[str, str]] = []
    tables: dict[str, list[dict[str, Any]]] = {}
    for key, value in doc.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            more, sub = _flatten(value, name + ".")
            pairs += more
            tables.update(sub)
        elif isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            tables[name] = value
        elif isinstance(value, list):
            pairs.append((name, ", ".join(fmt_value(v) for v in value) if value else "(none)"))
        elif isinstance(value, (int, float)) and not isinstance(value, bool) and (key.endswith("_at") or key == "last_poll"):
            pairs.append((name, fmt_value(dt.datetime.fromtimestamp(value, dt.UTC))))  # epoch seconds
        else:
            pairs.append((name, "(none)" if value is None else fmt_value(value)))
    return pairs, tables


def _print_document(console: Console, doc: dict[str, Any]) -> None:
    from engine.cli.output import fmt_value
    from engine.cli.plain import Table, Text

    title = f"{doc['kind']} {doc.get('table') or ''}".strip() + f"  (from {doc['server']})"
    console.print(Text(title, style="bold"))
    pairs, tables = _flatten(doc["document"])
    if pairs:
        grid = Table.grid(padding=(0, 2))
        # a long key (result.nodes.<node id>) folds: the values keep most of the line
        grid.add_column(style="bold cyan", overflow="fold", max_width=max(12, console.width * 2 // 5))
        grid.add_column(overflow="fold")
        for key, value in pairs:
            grid.add_row(key, Text(value))
        console.print(grid)
    for name, records in tables.items():
        names = list(dict.fromkeys(k for r in records for k in r))
        rows = [["" if r.get(n) is None else fmt_value(r.get(n)) for n in names] for r in records]
        firsts: tuple[str, ...] = ("txn_id", "table", "job_id")
        keys = [n for n in firsts if n in names][:1]
        ordered = keys + [n for n in names if n not in keys]
        _print_rows(console, name, ordered, [[row[names.index(n)] for n in ordered] for row in rows], keys)


def _cell(value: object, estimated: bool, limit: int) -> str:
    """A value as the text view shows it: long ones elided with their length (JSON has them whole)."""
    from engine.cli.layout import elide
    from engine.cli.output import fmt_value

    text = f"{len(value)} bytes" if isinstance(value, (bytes, bytearray)) else elide(fmt_value(value), limit)
    return f"~{text}" if estimated and text else text


def _estimated(text: str | None) -> set[tuple[object, object]]:
    """(column, statistic) of a subset answer's estimated values (docs/SUBSETS.md): shown with ``~``."""
    if not text:
        return set()
    try:
        answers = json.loads(text).get("answers", [])
    except (ValueError, AttributeError):
        return set()
    return {(a.get("column"), a.get("statistic")) for a in answers if isinstance(a, dict) and a.get("method") == "estimated"}


def _methods_line(text: str) -> str:
    """A subset answer's methods (schema metadata ``metastore.subset``) in one line: which are estimates."""
    try:
        doc = json.loads(text)
    except ValueError:
        return f"methods: {text}"
    answers = doc.get("answers", doc) if isinstance(doc, dict) else doc
    counts: dict[str, int] = {}
    for a in answers if isinstance(answers, list) else []:
        if isinstance(a, dict) and "method" in a:
            counts[a["method"]] = counts.get(a["method"], 0) + 1
    shown = ", ".join(f"{n} {m}" for m, n in sorted(counts.items()))
    if not shown:
        return "subset answer (docs/SUBSETS.md)"
    return f"subset answers: {shown}; ~ marks an estimate (its bounds: --output json, docs/SUBSETS.md)"
